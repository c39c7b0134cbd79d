//! `pisess diff`: compare two entries (branches) like `git log --left-right A...B`, what the
//! model sees at two entries (`--context`), or a fork and its parent session.
//!
//! Invariants:
//! - entry sides come from the store's LCA (O(log depth)); nothing recurses;
//! - `--context` compares pi's projected contexts (the agent layer's streaming `lean` plan, equal
//!   to `project`) message by message as JSON values: the common prefix, then each side's
//!   remaining messages; both sides are read one entry at a time, so memory is bounded by the
//!   paths' keys (as for `context`), not by their messages;
//! - two sessions are compared along their active paths (root → leaf), walked side by side:
//!   an entry is common when both paths hold it next, with the same JSON text (blake3 of the
//!   text, so same id, same timestamp, same content: pi's fork copies entries byte for byte),
//!   or the same text but for its `parentId`; a label entry one side holds there and the other
//!   does not is passed over, and counted as that side's own. pi's fork drops the path's labels
//!   (it writes them again, as new entries, at its end) and gives the entry after each the
//!   label's parent. The divergence point is the last common entry; what follows it on each
//!   side is that side's own too;
//! - the exit status is the answer's (1: differences) also when the reader stops early
//!   (`pisess diff A B | head -1`), however much of the output it took.

use std::collections::VecDeque;
use std::io::Write;

use pisess_engine::agent::lean::{ContextCursor, LeanContext};
use pisess_engine::agent::tokens::{ContextEstimate, estimate_tokens};
use pisess_engine::{EntryKey, SessionKey, SessionRecord};
use serde_json::{Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome, answered};
use crate::json_stream;
use crate::session_arg::{self as sa, Session, StoredPath, open_session_pair, open_session_read};
use crate::ui::{Ui, UntilClosed, safe};

/// Compare two entries (branches): common ancestor and what is only on each side.
///
/// Like `git log --left-right A...B`: lines starting with `<` are only on A's path, lines with
/// `>` only on B's, each side oldest first, with estimated tokens per side.
///
/// With --json: one object `{a, b, commonAncestorId, onlyA, onlyB, tokensA, tokensB}` where
/// `onlyA`/`onlyB` are entry ids, oldest first.
///
/// With --context: what the model sees at A and at B (pi's context projection): the messages
/// both contexts start with, then `<` lines for the rest of A's and `>` lines for the rest of
/// B's. --json: one object `{a, b, commonMessages, onlyA, onlyB, modelA, modelB,
/// thinkingLevelA, thinkingLevelB, tokensA, tokensB}`; `onlyA`/`onlyB` hold `{entryId,
/// message}` in context order.
///
/// With two sessions (`pisess diff SESSION_A SESSION_B`, e.g. a fork and its parent, linked by
/// the fork's `parentSession`): where their active paths diverge. --json: one object `{a, b,
/// relation, commonAncestorId, common, onlyA, onlyB}` (`a`/`b` are `{sessionId, file,
/// leafId}`; `relation` is `bForkOfA`, `aForkOfB` or null; `onlyA`/`onlyB` are entry ids,
/// oldest first).
///
/// Exit status: 0 when there is no difference, 1 when there are differences, 2 on error.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// One side (id or prefix, @leaf, @root, label:NAME, ENTRY~N); or, without B, another
    /// session to compare SESSION with.
    #[arg(value_name = "A | SESSION_B")]
    pub a: String,
    /// The other side.
    pub b: Option<String>,
    /// Compare what the model sees at A and at B.
    #[arg(long, requires = "b")]
    pub context: bool,
}

/// Runs `pisess diff`.
pub fn cmd_diff(ui: &mut Ui, args: &DiffArgs) -> CommandResult {
    let Some(b_arg) = &args.b else {
        let a = &args.a;
        if a.starts_with('@') && a != "@latest" || a.starts_with("label:") {
            return Err(CommandError::with_hint(
                anyhow::anyhow!("{a:?} is an entry, and diff needs two"),
                "give both entries (`pisess diff SESSION A B`), or two sessions",
            ));
        }
        return diff_sessions(ui, &args.session, a).map_err(|e| {
            // Not a session but an entry of SESSION (an id or prefix): say so, as for `@leaf`.
            let unmatched = e
                .to_string()
                .starts_with("no session file or session id matches");
            let entry =
                unmatched && open_session_read(&args.session).is_ok_and(|s| s.entry(a).is_ok());
            if entry {
                CommandError::with_hint(
                    anyhow::anyhow!(
                        "{:?} is an entry of {}, and diff needs two",
                        crate::ui::safe(a),
                        crate::ui::safe(&args.session)
                    ),
                    "give both entries (`pisess diff SESSION A B`), or two sessions",
                )
            } else {
                e
            }
        });
    };
    let session = open_session_read(&args.session)?;
    let a = session.entry(&args.a)?;
    let b = session.entry(b_arg)?;
    if args.context {
        return diff_context(ui, &session, a, b);
    }
    let lca = session.snap.lca(a, b)?;
    // Only keys are kept per side; each entry's JSON is parsed when it is needed and dropped,
    // so memory does not grow with the length of the sides (a side can be a million entries).
    let left = side(&session, a, lca)?;
    let right = side(&session, b, lca)?;
    let (a_id, b_id) = (session.id(a)?, session.id(b)?);
    let lca_id = lca.map(|l| session.id(l)).transpose()?;
    let tokens = |s: &[EntryKey]| -> Result<u64, CommandError> {
        s.iter()
            .try_fold(0u64, |n, k| Ok(n + sa::tokens(&session.value(*k)?)))
    };
    let (ta, tb) = (tokens(&left)?, tokens(&right)?);
    let outcome = if left.is_empty() && right.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    };
    let mut write = || -> Result<(), CommandError> {
        if ui.json {
            let ids = |s: &[EntryKey]| -> Result<Vec<Value>, CommandError> {
                s.iter().map(|k| Ok(json!(session.id(*k)?))).collect()
            };
            let (only_a, only_b) = (ids(&left)?, ids(&right)?);
            ui.json_line(&json!({
                "a": a_id,
                "b": b_id,
                "commonAncestorId": lca_id,
                "onlyA": only_a,
                "onlyB": only_b,
                "tokensA": ta,
                "tokensB": tb,
            }))?;
        } else {
            let base = match &lca_id {
                Some(l) => format!("common ancestor {}", safe(l)),
                None => "no common ancestor (different trees)".to_owned(),
            };
            let painted = ui.paint("1", &base);
            writeln!(ui.out(), "{painted}")?;
            writeln!(
                ui.out(),
                "< {} only: {} entries, ~{ta} tokens",
                safe(&a_id),
                left.len()
            )?;
            writeln!(
                ui.out(),
                "> {} only: {} entries, ~{tb} tokens",
                safe(&b_id),
                right.len()
            )?;
            let width = sa::width();
            for (mark, color, list) in [("<", "31", &left), (">", "32", &right)] {
                for k in list {
                    let v = &session.value(*k)?;
                    let id = sa::id_of(v).unwrap_or("");
                    let text = format!("{} {}", sa::kind(v), sa::summary(v));
                    let line = format!(
                        "{mark} {} {}",
                        sa::short_id(id),
                        sa::clip(text.trim_end(), width.saturating_sub(12).max(20))
                    );
                    let painted = ui.paint(color, &safe(&line));
                    writeln!(ui.out(), "{painted}")?;
                }
            }
        }
        Ok(())
    };
    answered(outcome, write())
}

/// The entries from `e` up to (not including) `stop`, oldest first.
fn side(
    session: &Session,
    e: EntryKey,
    stop: Option<EntryKey>,
) -> Result<Vec<EntryKey>, CommandError> {
    let mut out = Vec::new();
    let mut cur = Some(e);
    while let Some(k) = cur {
        if Some(k) == stop {
            break;
        }
        out.push(k);
        cur = session.snap.parent(k)?;
    }
    out.reverse();
    Ok(out)
}

// ---- --context ------------------------------------------------------------------------------

/// The messages of the entry a side's cursor read last that are not yet compared or written:
/// one entry of each side is held at a time, never the path's messages.
#[derive(Default)]
struct Pending {
    /// The context position of the entry.
    pos: usize,
    /// Its `id` (`null` when it has none).
    id: Value,
    messages: VecDeque<Value>,
    /// How many of its messages were taken off the front.
    taken: usize,
    /// The cursor has no entry left.
    done: bool,
}

impl Pending {
    /// Reads entries until one has a message left or the context ends.
    fn fill(&mut self, c: &mut ContextCursor<'_, StoredPath<'_>>) -> Result<(), CommandError> {
        while self.messages.is_empty() && !self.done {
            self.pos = c.position();
            match c.next_entry()? {
                Some((id, messages)) => {
                    self.id = id;
                    self.messages = messages.into();
                    self.taken = 0;
                }
                None => self.done = true,
            }
        }
        Ok(())
    }

    fn pop(&mut self) {
        self.messages.pop_front();
        self.taken += 1;
    }

    /// Hands `f` every message not yet taken, this entry's and then the cursor's, with the id
    /// of its entry; returns how many.
    fn drain(
        &mut self,
        c: &mut ContextCursor<'_, StoredPath<'_>>,
        mut f: impl FnMut(&Value, &Value) -> Result<(), CommandError>,
    ) -> Result<usize, CommandError> {
        let mut n = 0;
        loop {
            self.fill(c)?;
            let Some(m) = self.messages.pop_front() else {
                return Ok(n);
            };
            self.taken += 1;
            f(&self.id, &m)?;
            n += 1;
        }
    }
}

/// One side of `--context`: the path to the entry and its planned context.
struct CtxSide<'s> {
    id: String,
    path: StoredPath<'s>,
    plan: LeanContext,
}

impl<'s> CtxSide<'s> {
    fn new(session: &'s Session, e: EntryKey) -> Result<Self, CommandError> {
        let path = session.path_source(e)?;
        let plan = LeanContext::plan(&path)?;
        Ok(Self {
            id: session.id(e)?,
            path,
            plan,
        })
    }

    fn thinking(&self) -> Value {
        self.plan.thinking_level().cloned().unwrap_or(Value::Null)
    }
}

/// The projected estimate's `tokens`.
fn tokens_of(e: &ContextEstimate) -> Value {
    e.to_json().get("tokens").cloned().unwrap_or(Value::Null)
}

/// Compares the contexts at `a` and `b` walking both side by side, one entry of each at a
/// time: the common prefix first, then each side's rest. Memory is that of `context` for
/// each side (the path's keys and the plan), not of the messages: `--json` writes each side's
/// rest as it is read; the human form counts the rests first (its header comes before them)
/// and reads them again to print them.
fn diff_context(ui: &mut Ui, session: &Session, a: EntryKey, b: EntryKey) -> CommandResult {
    let (left, right) = (CtxSide::new(session, a)?, CtxSide::new(session, b)?);
    let (mut ca, mut cb) = (left.plan.cursor(&left.path), right.plan.cursor(&right.path));
    let (mut qa, mut qb) = (Pending::default(), Pending::default());
    let mut common = 0usize;
    loop {
        qa.fill(&mut ca)?;
        qb.fill(&mut cb)?;
        match (qa.messages.front(), qb.messages.front()) {
            (Some(x), Some(y)) if x == y => {
                qa.pop();
                qb.pop();
                common += 1;
            }
            _ => break,
        }
    }
    // Where each side's rest starts: (context position, messages of that entry to skip).
    let (start_a, start_b) = ((qa.pos, qa.taken), (qb.pos, qb.taken));
    let same_settings =
        left.plan.model() == right.plan.model() && left.thinking() == right.thinking();
    let (rest_a, rest_b, ta, tb);
    let written;
    if ui.json {
        // What differs is known once the lists are written out: a reader that stops early
        // (`| head`) lets the lists be drained without being written, for the exit status.
        let out = &mut UntilClosed::new(ui.out());
        out.write_all(b"{\"a\":")?;
        pisess_formats::js::to_writer(&mut *out, &left.id)?;
        json_stream::field(out, "b", &right.id)?;
        json_stream::field(out, "commonMessages", &common)?;
        let mut side = |key: &str, q: &mut Pending, c: &mut ContextCursor<'_, StoredPath<'_>>| {
            write!(out, ",\"{key}\":[")?;
            let mut first = true;
            let n = q.drain(c, |id, m| {
                let item = json!({"entryId": id, "message": m});
                Ok(json_stream::item(&mut *out, &mut first, &item)?)
            })?;
            out.write_all(b"]")?;
            Ok::<usize, CommandError>(n)
        };
        rest_a = side("onlyA", &mut qa, &mut ca)?;
        rest_b = side("onlyB", &mut qb, &mut cb)?;
        (ta, tb) = (tokens_of(&ca.estimate()), tokens_of(&cb.estimate()));
        json_stream::field(out, "modelA", left.plan.model())?;
        json_stream::field(out, "modelB", right.plan.model())?;
        json_stream::field(out, "thinkingLevelA", &left.thinking())?;
        json_stream::field(out, "thinkingLevelB", &right.thinking())?;
        json_stream::field(out, "tokensA", &ta)?;
        json_stream::field(out, "tokensB", &tb)?;
        out.write_all(b"}\n")?;
        written = Ok(());
    } else {
        rest_a = qa.drain(&mut ca, |_, _| Ok(()))?;
        rest_b = qb.drain(&mut cb, |_, _| Ok(()))?;
        (ta, tb) = (tokens_of(&ca.estimate()), tokens_of(&cb.estimate()));
        written = (|| -> Result<(), CommandError> {
            let head = format!(
                "context at {} vs {}: {common} message(s) in common",
                safe(&left.id),
                safe(&right.id)
            );
            let painted = ui.paint("1", &head);
            writeln!(ui.out(), "{painted}")?;
            let model = |m: &Value| {
                m.get("modelId")
                    .and_then(Value::as_str)
                    .map_or_else(|| "none".to_owned(), |s| safe(s).into_owned())
            };
            for (mark, s, rest, t) in [("<", &left, rest_a, &ta), (">", &right, rest_b, &tb)] {
                writeln!(
                    ui.out(),
                    "{mark} {}: {} more message(s), {} in all, ~{} tokens, model {}, thinking {}",
                    safe(&s.id),
                    rest,
                    common + rest,
                    t,
                    model(s.plan.model()),
                    safe(s.thinking().as_str().unwrap_or("unset"))
                )?;
            }
            let width = sa::width();
            let sides = [
                ("<", "31", &left, start_a, rest_a),
                (">", "32", &right, start_b, rest_b),
            ];
            for (mark, color, s, (pos, skip), rest) in sides {
                if rest == 0 {
                    continue;
                }
                let end = s.plan.selected_len();
                s.plan
                    .projected_entries(&s.path, pos..end, |p, _, entry, messages| {
                        let id = entry.get("id").and_then(Value::as_str).unwrap_or("-");
                        let from = if p == pos { skip } else { 0 };
                        for m in messages.iter().skip(from) {
                            let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
                            let text = message_line(m);
                            let head = format!(
                                "{mark} {} {role} ~{}t: ",
                                sa::short_id(id),
                                estimate_tokens(m),
                            );
                            // The text gets what the line's head leaves of the width.
                            let used: usize = head.chars().map(sa::columns).sum();
                            let room = width.saturating_sub(used).max(20);
                            let line = format!("{head}{}", sa::clip(&text, room));
                            let painted = ui.paint(color, &safe(&line));
                            writeln!(ui.out(), "{painted}")?;
                        }
                        Ok::<(), CommandError>(())
                    })?;
            }
            Ok(())
        })();
    }
    let outcome = if rest_a > 0 || rest_b > 0 || !same_settings {
        Outcome::Negative
    } else {
        Outcome::Success
    };
    answered(outcome, written)
}

/// A context message in one line: its first line of text, or what it is.
fn message_line(m: &Value) -> String {
    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("");
    let text = sa::message_text(m);
    let first = sa::first_line(&text);
    if !first.is_empty() {
        return first.to_owned();
    }
    match s("role") {
        "compactionSummary" | "branchSummary" => sa::first_line(s("summary")).to_owned(),
        "bashExecution" => format!("$ {}", sa::first_line(s("command"))),
        "system" => m
            .get("sections")
            .and_then(Value::as_object)
            .and_then(|o| o.values().find_map(Value::as_str))
            .map(|t| sa::first_line(t).to_owned())
            .unwrap_or_default(),
        _ => m
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
            .map(sa::tool_call_phrase)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

// ---- two sessions ---------------------------------------------------------------------------

/// One entry of a session's active path.
struct PathEntry {
    key: EntryKey,
    /// blake3 of the row's JSON text.
    hash: [u8; 32],
    /// Whether it is a `label` entry.
    label: bool,
}

/// One session's active path, root first.
fn active_path(session: &Session, key: SessionKey) -> Result<Vec<PathEntry>, CommandError> {
    let Some(leaf) = session.snap.leaf(key)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for k in session.snap.path_to_root(leaf)? {
        let (hash, label) = session
            .snap
            .with_entry(k, |a| {
                let label = a.type_name.as_ref().is_some_and(|t| t.as_str() == "label");
                a.json_text()
                    .map(|t| (*blake3::hash(t.as_bytes()).as_bytes(), label))
            })?
            .flatten()
            .ok_or_else(|| anyhow::anyhow!("entry {k} has no JSON text in the store"))?;
        out.push(PathEntry {
            key: k,
            hash,
            label,
        });
    }
    Ok(out)
}

/// Whether two path entries are the same entry: the same text, or the same text but for the
/// `parentId` (an entry pi's fork re-parented over a label it dropped).
fn same_entry(session: &Session, a: &PathEntry, b: &PathEntry) -> Result<bool, CommandError> {
    if a.hash == b.hash {
        return Ok(true);
    }
    if a.label || b.label {
        return Ok(false);
    }
    let without_parent = |k: EntryKey| -> Result<Value, CommandError> {
        let mut v = session.value(k)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("parentId");
        }
        Ok(v)
    };
    Ok(without_parent(a.key)? == without_parent(b.key)?)
}

/// Two active paths walked side by side ([`common_walk`]).
struct Walk {
    /// Entries common to both.
    common: usize,
    /// Positions of the last common entry on each path.
    last: Option<(usize, usize)>,
    /// Each side's own entries, in path order: the labels passed over before the last common
    /// entry, then everything after it.
    own_a: Vec<usize>,
    own_b: Vec<usize>,
}

/// The common entries of two active paths walked side by side ([`same_entry`]; a label on
/// one side only is passed over, and counts as that side's own).
fn common_walk(
    session: &Session,
    pa: &[PathEntry],
    pb: &[PathEntry],
) -> Result<Walk, CommandError> {
    let (mut i, mut j, mut common, mut last) = (0, 0, 0, None);
    let (mut own_a, mut own_b) = (Vec::new(), Vec::new());
    while i < pa.len() || j < pb.len() {
        if i < pa.len() && j < pb.len() && same_entry(session, &pa[i], &pb[j])? {
            common += 1;
            last = Some((i, j));
            i += 1;
            j += 1;
        } else if i < pa.len() && pa[i].label {
            own_a.push(i);
            i += 1;
        } else if j < pb.len() && pb[j].label {
            own_b.push(j);
            j += 1;
        } else {
            break;
        }
    }
    // After the last common entry, each side's whole rest is its own.
    let (ta, tb) = last.map_or((0, 0), |(i, j)| (i + 1, j + 1));
    own_a.retain(|&x| x < ta);
    own_a.extend(ta..pa.len());
    own_b.retain(|&x| x < tb);
    own_b.extend(tb..pb.len());
    Ok(Walk {
        common,
        last,
        own_a,
        own_b,
    })
}

fn same_file(a: &str, b: &str) -> bool {
    let canon = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
    a == b || canon(a) == canon(b)
}

fn diff_sessions(ui: &mut Ui, a_arg: &str, b_arg: &str) -> CommandResult {
    let (session, kb, rb) = open_session_pair(a_arg, b_arg)?;
    let ra: &SessionRecord = &session.record;
    let relation = if rb
        .parent_session
        .as_deref()
        .is_some_and(|p| same_file(p, &ra.path))
    {
        Some("bForkOfA")
    } else if ra
        .parent_session
        .as_deref()
        .is_some_and(|p| same_file(p, &rb.path))
    {
        Some("aForkOfB")
    } else {
        None
    };
    let pa = active_path(&session, session.key)?;
    let pb = active_path(&session, kb)?;
    let Walk {
        common,
        last,
        own_a,
        own_b,
    } = common_walk(&session, &pa, &pb)?;
    let rest_a: Vec<&PathEntry> = own_a.iter().map(|&x| &pa[x]).collect();
    let rest_b: Vec<&PathEntry> = own_b.iter().map(|&x| &pb[x]).collect();
    let ids = |p: &[&PathEntry]| -> Result<Vec<String>, CommandError> {
        p.iter().map(|e| session.id(e.key)).collect()
    };
    let (only_a, only_b) = (ids(&rest_a)?, ids(&rest_b)?);
    let base = match last {
        Some((i, _)) => Some(session.id(pa[i].key)?),
        None => None,
    };
    let leaf_id = |p: &[PathEntry]| -> Result<Option<String>, CommandError> {
        p.last().map(|e| session.id(e.key)).transpose()
    };
    let outcome = if only_a.is_empty() && only_b.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    };
    let mut write = || -> Result<(), CommandError> {
        if ui.json {
            ui.json_line(&json!({
                "a": {"sessionId": ra.session_id, "file": ra.path, "leafId": leaf_id(&pa)?},
                "b": {"sessionId": rb.session_id, "file": rb.path, "leafId": leaf_id(&pb)?},
                "relation": relation,
                "commonAncestorId": base,
                "common": common,
                "onlyA": only_a,
                "onlyB": only_b,
            }))?;
        } else {
            let rel = match relation {
                Some("bForkOfA") => format!("{} is a fork of {}", rb.session_id, ra.session_id),
                Some(_) => format!("{} is a fork of {}", ra.session_id, rb.session_id),
                None => "the sessions are not fork and parent (no parentSession links them); \
                     comparing their active paths"
                    .to_owned(),
            };
            writeln!(ui.out(), "{}", safe(&rel))?;
            let head = match &base {
                Some(_) if only_a.is_empty() && only_b.is_empty() => {
                    format!("the active paths are the same ({common} entries)")
                }
                Some(id) => format!("diverge after {} ({common} entries in common)", safe(id)),
                None => "no entry in common".to_owned(),
            };
            let painted = ui.paint("1", &head);
            writeln!(ui.out(), "{painted}")?;
            let width = sa::width();
            for (mark, color, r, p) in [("<", "31", ra, &rest_a), (">", "32", &rb, &rest_b)] {
                writeln!(
                    ui.out(),
                    "{mark} {} only: {} entries ({})",
                    safe(&r.session_id),
                    p.len(),
                    safe(&r.path)
                )?;
                for e in p {
                    let v = session.value(e.key)?;
                    let text = format!("{} {}", sa::kind(&v), sa::summary(&v));
                    let text = text.trim_end();
                    let line = format!(
                        "{mark} {} {}",
                        sa::short_id(sa::id_of(&v).unwrap_or("-")),
                        sa::clip(text, width.saturating_sub(12).max(20))
                    );
                    let painted = ui.paint(color, &safe(&line));
                    writeln!(ui.out(), "{painted}")?;
                }
            }
        }
        Ok(())
    };
    answered(outcome, write())
}
