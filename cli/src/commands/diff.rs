//! `pisess diff`: compare two entries (branches) like `git log --left-right A...B`, what the
//! model sees at two entries (`--context`), or a fork and its parent session.
//!
//! Invariants:
//! - entry sides come from the store's LCA (O(log depth)); nothing recurses;
//! - `--context` compares pi's projected contexts (the agent layer's `project`) message by
//!   message as JSON values: the common prefix, then each side's remaining messages;
//! - two sessions are compared along their active paths (root → leaf): an entry is common when
//!   both paths hold, at the same depth, a row with the same JSON text (blake3 of the text, so
//!   same id, same timestamp, same content: pi's fork copies entries byte for byte). The
//!   divergence point is the last common entry.

use std::io::Write;

use pisess_engine::agent::project::project;
use pisess_engine::agent::tokens::{estimate_projected_context_tokens, estimate_tokens};
use pisess_engine::{EntryKey, SessionKey, SessionRecord};
use serde_json::{Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{self as sa, Session, open_session_pair, open_session_read};
use crate::ui::{Ui, safe};

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
        return diff_sessions(ui, &args.session, a);
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
                    sa::clip(&text, width.saturating_sub(12).max(20))
                );
                let painted = ui.paint(color, &safe(&line));
                writeln!(ui.out(), "{painted}")?;
            }
        }
    }
    Ok(if left.is_empty() && right.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
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

/// One side's context: messages with the entry each came from, model, thinking level, tokens.
struct Ctx {
    id: String,
    messages: Vec<(Value, Value)>,
    model: Value,
    thinking: Value,
    tokens: Value,
}

fn context_at(session: &Session, e: EntryKey) -> Result<Ctx, CommandError> {
    let values = session.path_values(e)?;
    let path: Vec<&Value> = values.iter().map(|(_, v)| v).collect();
    let p = project(&path);
    let messages = p
        .entries
        .iter()
        .flat_map(|pe| {
            let id = pe.entry.get("id").cloned().unwrap_or(Value::Null);
            pe.messages
                .iter()
                .map(move |m| (id.clone(), m.as_ref().clone()))
        })
        .collect();
    let est = estimate_projected_context_tokens(&p, &path).to_json();
    Ok(Ctx {
        id: session.id(e)?,
        messages,
        model: p.model.clone(),
        thinking: p.thinking_level.clone().unwrap_or(Value::Null),
        tokens: est.get("tokens").cloned().unwrap_or(Value::Null),
    })
}

fn diff_context(ui: &mut Ui, session: &Session, a: EntryKey, b: EntryKey) -> CommandResult {
    let (ca, cb) = (context_at(session, a)?, context_at(session, b)?);
    let common = ca
        .messages
        .iter()
        .zip(&cb.messages)
        .take_while(|((_, x), (_, y))| x == y)
        .count();
    let (ra, rb) = (&ca.messages[common..], &cb.messages[common..]);
    let differs =
        !ra.is_empty() || !rb.is_empty() || ca.model != cb.model || ca.thinking != cb.thinking;
    if ui.json {
        let side = |r: &[(Value, Value)]| {
            r.iter()
                .map(|(id, m)| json!({"entryId": id, "message": m}))
                .collect::<Vec<_>>()
        };
        ui.json_line(&json!({
            "a": ca.id,
            "b": cb.id,
            "commonMessages": common,
            "onlyA": side(ra),
            "onlyB": side(rb),
            "modelA": ca.model,
            "modelB": cb.model,
            "thinkingLevelA": ca.thinking,
            "thinkingLevelB": cb.thinking,
            "tokensA": ca.tokens,
            "tokensB": cb.tokens,
        }))?;
    } else {
        let head = format!(
            "context at {} vs {}: {common} message(s) in common",
            safe(&ca.id),
            safe(&cb.id)
        );
        let painted = ui.paint("1", &head);
        writeln!(ui.out(), "{painted}")?;
        let model = |m: &Value| {
            m.get("modelId")
                .and_then(Value::as_str)
                .map_or_else(|| "none".to_owned(), |s| safe(s).into_owned())
        };
        for (mark, c, rest) in [("<", &ca, ra), (">", &cb, rb)] {
            writeln!(
                ui.out(),
                "{mark} {}: {} more message(s), {} in all, ~{} tokens, model {}, thinking {}",
                safe(&c.id),
                rest.len(),
                c.messages.len(),
                c.tokens,
                model(&c.model),
                safe(c.thinking.as_str().unwrap_or("unset"))
            )?;
        }
        let width = sa::width();
        for (mark, color, rest) in [("<", "31", ra), (">", "32", rb)] {
            for (id, m) in rest {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
                let text = message_line(m);
                let line = format!(
                    "{mark} {} {role} ~{}t: {}",
                    sa::short_id(id.as_str().unwrap_or("-")),
                    estimate_tokens(m),
                    sa::clip(&text, width.saturating_sub(30).max(20))
                );
                let painted = ui.paint(color, &safe(&line));
                writeln!(ui.out(), "{painted}")?;
            }
        }
    }
    Ok(if differs {
        Outcome::Negative
    } else {
        Outcome::Success
    })
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

/// One session's active path: (key, blake3 of the row's JSON text) root first.
fn active_path(
    session: &Session,
    key: SessionKey,
) -> Result<Vec<(EntryKey, [u8; 32])>, CommandError> {
    let Some(leaf) = session.snap.leaf(key)? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for k in session.snap.path_to_root(leaf)? {
        let h = session
            .snap
            .with_entry(k, |a| {
                a.json_text()
                    .map(|t| *blake3::hash(t.as_bytes()).as_bytes())
            })?
            .flatten()
            .ok_or_else(|| anyhow::anyhow!("entry {k} has no JSON text in the store"))?;
        out.push((k, h));
    }
    Ok(out)
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
    let common = pa
        .iter()
        .zip(&pb)
        .take_while(|((_, x), (_, y))| x == y)
        .count();
    let ids = |p: &[(EntryKey, [u8; 32])]| -> Result<Vec<String>, CommandError> {
        p.iter().map(|(k, _)| session.id(*k)).collect()
    };
    let (only_a, only_b) = (ids(&pa[common..])?, ids(&pb[common..])?);
    let base = match common.checked_sub(1) {
        Some(i) => Some(session.id(pa[i].0)?),
        None => None,
    };
    let leaf_id = |p: &[(EntryKey, [u8; 32])]| -> Result<Option<String>, CommandError> {
        p.last().map(|(k, _)| session.id(*k)).transpose()
    };
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
            Some(id) => format!("diverge after {} ({common} entries in common)", safe(id)),
            None => "no entry in common".to_owned(),
        };
        let painted = ui.paint("1", &head);
        writeln!(ui.out(), "{painted}")?;
        let width = sa::width();
        for (mark, color, r, p) in [
            ("<", "31", ra, &pa[common..]),
            (">", "32", &rb, &pb[common..]),
        ] {
            writeln!(
                ui.out(),
                "{mark} {} only: {} entries ({})",
                safe(&r.session_id),
                p.len(),
                safe(&r.path)
            )?;
            for (k, _) in p {
                let v = session.value(*k)?;
                let text = format!("{} {}", sa::kind(&v), sa::summary(&v));
                let line = format!(
                    "{mark} {} {}",
                    sa::short_id(sa::id_of(&v).unwrap_or("-")),
                    sa::clip(&text, width.saturating_sub(12).max(20))
                );
                let painted = ui.paint(color, &safe(&line));
                writeln!(ui.out(), "{painted}")?;
            }
        }
    }
    Ok(if only_a.is_empty() && only_b.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
