//! `pisess log`: the path from an entry to the root, newest first, like `git log`.
//!
//! Invariants: the output is the per-entry rendering of each decoded line ([`line_text`],
//! [`entry_json`]); entries are read from the store's outline ([`crate::listing`]) and decoded
//! only when the outline cannot show them, so a path of 345,000 entries reads a few hundred
//! blocks (decoded and rendered on the rayon pool, written in order); no recursion (the path
//! is a list of key runs).

use std::io::Write;

use serde_json::{Map, Value, json};

use pisess_engine::EntryKey;
use pisess_engine::outline::OutlineBlock;
use rayon::prelude::*;

use super::util::kind_matches;
use crate::command_error::{CommandResult, Outcome};
use crate::listing::{self, Item};
use crate::session_arg::{self as sa, Session, open_session_read};
use crate::ui::{Ui, safe};

/// Show the path from an entry (default: the leaf) back to the root, newest first.
///
/// One line per entry: short id, time, kind (message role or entry type), model, a one-line
/// summary (first line of the text; tool calls as `read src/x.rs`) and estimated tokens.
/// Labels are shown in brackets; compactions and branch summaries are marked as boundaries.
///
/// With --json: JSON Lines, one object per entry `{"type":"entry", id, parentId, entryType,
/// role, timestamp, model, summary, tokens, label?, boundary?}` in the same order as the text
/// output: newest first, or root first with --reverse (then the ids are pi's `getBranch`).
/// With --all, every entry of the session once, each before its parent, with `column` (the
/// graph lane), `leaf` and `active` (on the path to the leaf) added.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The session: a file, a session id or unique prefix, or @latest (the default: the
    /// session `pi -c` continues in this folder, as `git log` reads the current repository).
    #[arg(default_value = "@latest")]
    pub session: String,
    /// Start from this entry (id or prefix, @leaf, @root, label:NAME, ENTRY~N). Default: the leaf.
    #[arg(long, value_name = "ENTRY")]
    pub at: Option<String>,
    /// Show at most N entries.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    pub max_count: Option<usize>,
    /// Oldest (the root) first. With -n N, as in git: the N entries `-n N` shows, oldest first.
    #[arg(long, conflicts_with = "all")]
    pub reverse: bool,
    /// Every branch, not only the path to one entry, with a graph like `git log --graph`:
    /// newest first, each entry before its parent, the active path (leaf `@`) leftmost.
    #[arg(long, conflicts_with = "at")]
    pub all: bool,
    /// Only entries of this kind: an entry type (`message`, `compaction`, …) or a message role
    /// (`user`, `assistant`, `toolResult`, …). Other values (an extension's own) are matched as
    /// written; one that is none of pi's and matches nothing gets a warning listing pi's.
    /// `--role` is the same option (its name in `grep`).
    #[arg(long = "type", visible_alias = "role", value_name = "T")]
    pub kind: Option<String>,
    /// Only entries written on or after DATE (`YYYY-MM-DD`, midnight UTC; an RFC 3339 time
    /// such as `2026-01-31T12:00:00Z` or `…+02:00`; or an age such as `7d`), by their
    /// `timestamp` read as pi's `new Date(…)` reads it; an entry without a valid one is left
    /// out. With --all, the graph links each entry shown to its nearest shown ancestor.
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
}

/// Which entries `log` shows: `--type` and `--since`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shown<'a> {
    kind: Option<&'a str>,
    since_ms: Option<i64>,
}

impl<'a> Shown<'a> {
    pub(crate) fn of(args: &'a LogArgs) -> Result<Self, crate::command_error::CommandError> {
        Ok(Self {
            kind: args.kind.as_deref(),
            since_ms: args
                .since
                .as_deref()
                .map(super::util::parse_since)
                .transpose()?,
        })
    }

    /// Whether every entry is shown.
    pub(crate) fn all(&self) -> bool {
        self.kind.is_none() && self.since_ms.is_none()
    }

    /// From an outline row: `None` when the entry's line must be decoded to say (the row
    /// has no facts, or `--since` is given and the row has no string time).
    pub(crate) fn row(&self, row: &pisess_engine::outline::OutlineRow<'_>) -> Option<bool> {
        let f = row.facts.as_ref()?;
        let time = match (self.since_ms, &row.timestamp) {
            (None, _) => None,
            (Some(_), pisess_engine::outline::Timestamp::None) => return None,
            (Some(_), t) => t.date_ms(),
        };
        Some(self.kind_ok(f.entry_type(), f.role) && self.time_ok(time))
    }

    /// From the entry's value.
    pub(crate) fn value(&self, v: &Value) -> bool {
        let time = self
            .since_ms
            .and_then(|_| pisess_engine::agent::js::date_ms(v.get("timestamp")).as_f64());
        self.kind_ok(sa::entry_type(v), sa::role(v)) && self.time_ok(time)
    }

    fn kind_ok(&self, entry_type: &str, role: Option<&str>) -> bool {
        self.kind.is_none_or(|t| kind_matches(t, entry_type, role))
    }

    /// `time`: milliseconds, `None` for no time or `NaN`.
    #[allow(clippy::cast_precision_loss)]
    fn time_ok(&self, time: Option<f64>) -> bool {
        self.since_ms
            .is_none_or(|since| time.is_some_and(|t| t >= since as f64))
    }
}

/// Runs `pisess log`.
///
/// Walks the path as runs of consecutive keys ([`pisess_engine::Snapshot::path_runs`]) cut at
/// the outline's block boundaries; batches of these pieces are decoded and rendered on the
/// rayon pool and written in path order. Only entries the outline cannot show (no facts, or a
/// summary cut shorter than the line needs) are decoded from their lines, in order.
pub fn cmd_log(ui: &mut Ui, args: &LogArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    let outcome = if args.all {
        crate::graphlog::log_all(ui, &session, args)?
    } else {
        log_path(ui, &session, args)?
    };
    Ok(session.finish(ui, outcome))
}

/// `log` of the path root → the entry (or the reverse), entry by entry.
fn log_path(ui: &mut Ui, session: &Session, args: &LogArgs) -> CommandResult {
    let at = match &args.at {
        Some(a) => session.entry(a)?,
        // The path pi's context walks: from the leaf, or from the last entry when that has
        // no string id; a session without entries has none ([`Session::leaf`] says so).
        None => match session.context_leaf()? {
            Some(at) => at,
            None => session.leaf()?,
        },
    };
    let shown = Shown::of(args)?;
    let labels = session.label_map()?;
    let mut runs = session.snap.context_runs(session.key, at)?;
    let firsts = session.snap.outline_firsts(session.key)?;
    // `--reverse -n N` is git's: the N entries `-n N` shows, oldest first.
    let mut max_count = args.max_count;
    if let (true, Some(n)) = (args.reverse, max_count) {
        if let Some(oldest) = nth_shown(session, &runs, &firsts, n, shown)? {
            let i = runs
                .iter()
                .position(|&(start, end)| (start.0..=end.0).contains(&oldest.0))
                .unwrap_or(runs.len() - 1);
            runs.truncate(i + 1);
            runs[i].0 = oldest;
        }
        max_count = None;
    }
    let pieces = pieces(&runs, &firsts, args.reverse);
    let width = sa::width();
    let style = Style {
        json: ui.json,
        color: ui.color,
        width,
        shown,
        labels: &labels,
    };
    // Batches grow, so that `-n 10` decodes one block and a whole path runs in parallel.
    let mut batches = Vec::new();
    let mut done = 0usize;
    let mut batch = 1usize;
    while done < pieces.len() {
        let upto = (done + batch).min(pieces.len());
        batches.push(done..upto);
        done = upto;
        batch = (batch * 2).min(16);
    }
    // Output buffers are recycled: a batch's worth of fresh memory each time cost page faults.
    let pool: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
    let take = || {
        let mut b = pool
            .lock()
            .ok()
            .and_then(|mut p| p.pop())
            .unwrap_or_default();
        b.clear();
        b
    };
    // JSON prints whole summaries, wide lines long ones: read the blocks' cold frames too.
    let cold = ui.json || listing::needs_cold(width);
    let s = session.key;
    let snap = &session.snap;
    // One batch: one task per block (read it, decode it, render its pieces while it is in the
    // cache), then the pieces no block holds.
    let render_batch =
        |todo: &[Piece]| -> Result<Vec<Rendered>, crate::command_error::CommandError> {
            let mut wanted: Vec<u64> = todo
                .iter()
                .filter_map(|p| p.block.map(|b| firsts[b]))
                .collect();
            wanted.sort_unstable();
            wanted.dedup();
            let done_blocks: Vec<Vec<(usize, Rendered)>> = wanted
                .par_iter()
                .map(|&f| -> Result<_, crate::command_error::CommandError> {
                    let block = snap.outline_block(s, f, cold)?;
                    let mut out = Vec::new();
                    for (j, p) in todo.iter().enumerate() {
                        if p.block.map(|b| firsts[b]) == Some(f) {
                            out.push((j, render_piece(p, Some(&block), &style, take())?));
                        }
                    }
                    Ok(out)
                })
                .collect::<Result<_, _>>()?;
            let mut rendered: Vec<Option<Rendered>> = todo.iter().map(|_| None).collect();
            for (j, r) in done_blocks.into_iter().flatten() {
                rendered[j] = Some(r);
            }
            todo.iter()
                .zip(rendered)
                .map(|(p, r)| match r {
                    Some(r) => Ok(r),
                    None => Ok(render_piece(p, None, &style, take())?),
                })
                .collect()
        };
    // The next batch is rendered while this thread writes the last one (a channel of one keeps
    // it at most one batch ahead; `-n N` returning early drops the receiver, which stops it).
    std::thread::scope(|scope| -> CommandResult {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let batches_ref = &batches;
        let pieces_ref = &pieces;
        let render_batch = &render_batch;
        scope.spawn(move || {
            for range in batches_ref {
                let r = render_batch(&pieces_ref[range.clone()]);
                let failed = r.is_err();
                if tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        let mut count = 0usize;
        for (range, rendered) in batches.iter().zip(rx.iter()) {
            let rendered = rendered?;
            for (p, r) in pieces[range.clone()].iter().zip(rendered) {
                // Bytes rendered but not yet written: consecutive entries go out in one write.
                let mut from = 0;
                let mut upto = 0;
                for (item, k) in r.items.iter().zip(p.keys()) {
                    if max_count.is_some_and(|n| count >= n) {
                        ui.out().write_all(&r.bytes[from..upto])?;
                        return Ok(Outcome::Success);
                    }
                    match *item {
                        Item::Shown(end) => {
                            upto = end;
                            count += 1;
                        }
                        Item::Left => {}
                        Item::Decode => {
                            ui.out().write_all(&r.bytes[from..upto])?;
                            from = upto;
                            let v = session.value_or_unreadable(EntryKey(k))?;
                            if !style.shown.value(&v) {
                                continue;
                            }
                            count += 1;
                            if ui.json {
                                ui.json_line(&entry_json(&v, &labels))?;
                            } else {
                                write_line(ui, &v, &labels, width)?;
                            }
                        }
                    }
                }
                ui.out().write_all(&r.bytes[from..upto])?;
                if let Ok(mut p) = pool.lock() {
                    p.push(r.bytes);
                }
            }
        }
        if count == 0 {
            warn_unknown_type(args);
        }
        Ok(Outcome::Success)
    })
}

/// The key of the `n`-th entry `log` shows walking the path's runs (leaf first) newest first,
/// with `--type` and `--since`; `None` when fewer than `n` are shown. Reads the outline's
/// facts, and decodes only the entries it has none for.
fn nth_shown(
    session: &Session,
    runs: &[(EntryKey, EntryKey)],
    firsts: &[u64],
    n: usize,
    filter: Shown<'_>,
) -> Result<Option<EntryKey>, crate::command_error::CommandError> {
    if n == 0 {
        return Ok(None);
    }
    let mut seen = 0usize;
    for p in pieces(runs, firsts, false) {
        let block = match p.block {
            Some(b) if !filter.all() => {
                Some(session.snap.outline_block(session.key, firsts[b], false)?)
            }
            _ => None,
        };
        for k in p.keys() {
            let shown = if filter.all() {
                true
            } else {
                let from_row = block
                    .as_ref()
                    .and_then(|b| b.find(EntryKey(k)).map(|i| b.row(i)))
                    .and_then(|r| filter.row(&r));
                match from_row {
                    Some(s) => s,
                    None => filter.value(&session.value_or_unreadable(EntryKey(k))?),
                }
            };
            if shown {
                seen += 1;
                if seen == n {
                    return Ok(Some(EntryKey(k)));
                }
            }
        }
    }
    Ok(None)
}

/// Warns on stderr when `--type` is none of pi's values (see
/// [`super::util::unknown_kind_warning`]); called when it matched nothing.
pub(crate) fn warn_unknown_type(args: &LogArgs) {
    if let Some(w) = args
        .kind
        .as_deref()
        .and_then(|t| super::util::unknown_kind_warning("--type", t))
    {
        eprintln!("warning: {w}");
    }
}

/// Keys of a path that lie in one outline block, in the order `log` prints them.
struct Piece {
    /// Index of the block in the session's block list (`None`: no block holds them).
    block: Option<usize>,
    /// The keys `from`, `from ∓ 1`, … `to` (descending unless `up`).
    from: u64,
    to: u64,
    up: bool,
}

impl Piece {
    fn keys(&self) -> Box<dyn Iterator<Item = u64>> {
        if self.up {
            Box::new(self.from..=self.to)
        } else {
            Box::new((self.to..=self.from).rev())
        }
    }
}

/// The path's runs (leaf first) cut at block boundaries, in printing order.
fn pieces(runs: &[(EntryKey, EntryKey)], firsts: &[u64], reverse: bool) -> Vec<Piece> {
    let block_of = |k: u64| firsts.partition_point(|&f| f <= k).checked_sub(1);
    let mut out = Vec::new();
    for &(start, end) in runs {
        let mut hi = end.0;
        loop {
            let b = block_of(hi);
            let lo = b.map_or(start.0, |b| firsts[b].max(start.0));
            out.push(Piece {
                block: b,
                from: hi,
                to: lo,
                up: false,
            });
            if lo <= start.0 {
                break;
            }
            hi = lo - 1;
        }
    }
    if reverse {
        out.reverse();
        for p in &mut out {
            std::mem::swap(&mut p.from, &mut p.to);
            p.up = true;
        }
    }
    out
}

/// What every piece's rendering needs.
struct Style<'a> {
    json: bool,
    color: bool,
    width: usize,
    shown: Shown<'a>,
    labels: &'a sa::LabelMap,
}

/// A piece's entries as bytes.
struct Rendered {
    bytes: Vec<u8>,
    items: Vec<Item>,
}

fn render_piece(
    p: &Piece,
    block: Option<&OutlineBlock>,
    style: &Style<'_>,
    bytes: Vec<u8>,
) -> Result<Rendered, std::io::Error> {
    let mut out = Rendered {
        bytes,
        items: Vec::new(),
    };
    // The keys of a piece are consecutive, and so are their rows in the block.
    let mut at: Option<usize> = None;
    for k in p.keys() {
        let i = match (block, at) {
            (Some(b), Some(i)) => {
                let j = if p.up { i + 1 } else { i.wrapping_sub(1) };
                if j < b.len() && b.key(j) == EntryKey(k) {
                    Some(j)
                } else {
                    b.find(EntryKey(k))
                }
            }
            (Some(b), None) => b.find(EntryKey(k)),
            (None, _) => None,
        };
        at = i;
        // Built in place and borrowed: a row is ~180 bytes, and moving it through `Option`
        // adaptors cost a `memmove` each time (a sixth of `log`'s CPU on a 1 GiB session).
        let row = match (block, i) {
            (Some(b), Some(i)) => b.row(i),
            _ => {
                out.items.push(Item::Decode);
                continue;
            }
        };
        let Some(f) = row.facts.as_ref() else {
            out.items.push(Item::Decode);
            continue;
        };
        match style.shown.row(&row) {
            None => {
                out.items.push(Item::Decode);
                continue;
            }
            Some(false) => {
                out.items.push(Item::Left);
                continue;
            }
            Some(true) => {}
        }
        let written = if style.json {
            listing::write_log_json(&mut out.bytes, &row, f, style.labels, None)?
        } else {
            listing::write_log_line(
                &mut out.bytes,
                style.color,
                &row,
                f,
                style.labels,
                style.width,
                None,
            )
        };
        out.items.push(if written {
            Item::Shown(out.bytes.len())
        } else {
            Item::Decode
        });
    }
    Ok(out)
}

/// The `--json` record of one entry.
pub fn entry_json(v: &Value, labels: &sa::LabelMap) -> Value {
    let id = v.get("id").and_then(Value::as_str);
    let mut o = Map::new();
    o.insert("type".into(), "entry".into());
    o.insert("id".into(), json!(id));
    o.insert(
        "parentId".into(),
        v.get("parentId").cloned().unwrap_or(Value::Null),
    );
    o.insert("entryType".into(), sa::entry_type(v).into());
    o.insert("role".into(), json!(sa::role(v)));
    o.insert(
        "timestamp".into(),
        v.get("timestamp").cloned().unwrap_or(Value::Null),
    );
    o.insert("model".into(), json!(sa::model(v)));
    o.insert("summary".into(), sa::summary(v).into());
    o.insert("tokens".into(), sa::tokens(v).into());
    if let Some(l) = id.and_then(|i| labels.get(i)) {
        o.insert("label".into(), l.clone().into());
    }
    if let Some(b) = boundary(v) {
        o.insert("boundary".into(), b.into());
    }
    Value::Object(o)
}

pub(crate) use pisess_engine::describe::boundary;

fn write_line(ui: &mut Ui, v: &Value, labels: &sa::LabelMap, width: usize) -> std::io::Result<()> {
    if let Some(b) = boundary(v) {
        let mark = format!("──── {} ────", safe(&b));
        let painted = ui.paint("35", &mark);
        writeln!(ui.out(), "{painted}")?;
    }
    let line = line_text(ui, v, labels, width);
    writeln!(ui.out(), "{line}")
}

/// One entry as a line of text (terminal-safe), laid out for `width` columns.
pub(crate) fn line_text(ui: &Ui, v: &Value, labels: &sa::LabelMap, width: usize) -> String {
    let id = v.get("id").and_then(Value::as_str).unwrap_or("-");
    let time = sa::short_time(v.get("timestamp").and_then(Value::as_str));
    let time = sa::time_column(&time);
    let kind = sa::kind(v);
    let model = sa::model(v)
        .map(|m| format!(" {}", safe(m)))
        .unwrap_or_default();
    let label = labels
        .get(id)
        .map(|l| format!(" [{}]", safe(l)))
        .unwrap_or_default();
    let head = format!(
        "{} {time} {:<11}{model}{label}",
        ui.paint("33", &safe(sa::short_id(id))),
        safe(kind)
    );
    let tokens = format!("~{}t", sa::tokens(v));
    let used = 8
        + 1
        + time.chars().count()
        + 1
        + 11.max(kind.chars().count())
        + 2
        + model.chars().count()
        + label.chars().count()
        + tokens.len()
        + 2;
    let room = width.saturating_sub(used).max(20);
    let summary = sa::clip(&sa::summary(v), room);
    format!("{head}  {}  {tokens}", safe(&summary))
}
