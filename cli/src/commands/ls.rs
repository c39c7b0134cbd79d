//! `pisess ls [--cwd DIR] [--since DATE]`: the session catalogue, newest first.
//!
//! Invariants: reads the store only; the order is by `modified` (pi's listing rule: newest
//! user/assistant message after 1970, else the header time), newest first, ties by file name
//! descending (as pi's folder listing), then by id.

use std::io::Write;
use std::path::PathBuf;

use pisess_engine::SessionRecord;
use serde_json::json;

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::open_store_to_query;
use crate::ui::{Ui, safe};

/// Arguments of `pisess ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// Only sessions whose header cwd is DIR.
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Only sessions modified on or after DATE: `YYYY-MM-DD` (midnight UTC), an RFC 3339 time
    /// (`2026-01-31T12:00:00Z`, or with an offset such as `+02:00`), or an age such as `7d`.
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
}

/// pi's rule: the newest user/assistant message time when it is after 1970, else the header's
/// time when it is text that reads as a date, else the file's mtime.
fn modified(r: &SessionRecord) -> Option<i64> {
    r.modified_ms
        .filter(|&m| m > 0)
        .or(r.created_ms.filter(|_| !r.created.is_empty()))
        .or(Some(mtime_ms(r.mtime_ns)))
}

/// The mtime as node's `stats.mtime` gives it: `sec * 1e3 + nsec / 1e6` in floating point,
/// rounded to whole milliseconds as `Math.round` rounds (checked with node: .636773 ms is .637).
#[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
fn mtime_ms(ns: i64) -> i64 {
    let (sec, nsec) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    (sec as f64 * 1e3 + nsec as f64 / 1e6 + 0.5).floor() as i64
}

/// The file's name, which breaks ties as pi's listing does (it reads a folder's names sorted
/// descending before its stable sort by time).
fn file_name(r: &SessionRecord) -> &str {
    r.path.rsplit('/').next().unwrap_or(&r.path)
}

/// Runs `pisess ls`.
pub fn cmd_ls(ui: &mut Ui, args: &LsArgs) -> CommandResult {
    let since = args
        .since
        .as_deref()
        .map(super::util::parse_since)
        .transpose()?;
    // A folder matches as pi's `pathsEqual(resolvePath(a), resolvePath(b))` matches it: both
    // resolved lexically (`~` expanded, relative to the current folder, `.` and `..` taken out),
    // and also by the folder's real path (symbolic links followed) when it exists.
    let here = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    let resolve = |p: &str| crate::session_arg::resolve_path(p, &here);
    let cwd: Option<Vec<String>> = args.cwd.as_ref().map(|c| {
        let mut forms = vec![resolve(&c.to_string_lossy())];
        if let Ok(real) = std::fs::canonicalize(c) {
            forms.push(real.to_string_lossy().into_owned());
        }
        forms
    });
    let store = open_store_to_query()?;
    let snap = store.snapshot()?;
    let all = snap.sessions()?;
    if all.is_empty() && !store.is_absent() {
        eprintln!(
            "note: the store {} holds no sessions yet; `pisess import` indexes pi's session folder",
            safe(&store.path().to_string_lossy())
        );
    }
    let mut rows: Vec<SessionRecord> = all
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| !r.gone)
        .filter(|r| {
            cwd.as_ref().is_none_or(|forms| {
                !r.cwd.is_empty() && {
                    let theirs = resolve(&r.cwd);
                    forms.contains(&theirs)
                }
            })
        })
        .filter(|r| since.is_none_or(|s| modified(r).is_some_and(|m| m >= s)))
        .collect();
    rows.sort_by(|a, b| {
        modified(b)
            .cmp(&modified(a))
            .then_with(|| file_name(b).cmp(file_name(a)))
            .then_with(|| a.session_id.cmp(&b.session_id))
    });
    let iso = |ms: Option<i64>| ms.map(pisess_engine::export::ms_to_iso);
    if ui.json {
        for r in &rows {
            let v = json!({
                "type": "session",
                "id": r.session_id,
                "file": r.path,
                "cwd": r.cwd,
                // As pi's session list reads it: `new Date(header.timestamp)`, written out
                // as `toISOString` does (an offset becomes UTC); null when it is no date.
                "created": iso(r.created_ms),
                "modified": iso(modified(r)),
                "entries": r.entries,
                "messages": r.messages,
                "bytes": r.file_size,
                "name": r.name,
                "parentSession": r.parent_session,
                "firstMessage": r.first_message,
            });
            ui.json_line(&v)?;
        }
    } else {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(vec![
            "id",
            "modified",
            "entries",
            "cwd",
            "name / first message",
        ]);
        for r in &rows {
            let title = r
                .name
                .clone()
                .or_else(|| r.first_message.clone())
                .unwrap_or_default();
            let title: String = title.replace('\n', " ").chars().take(60).collect();
            let id: String = r.session_id.chars().take(13).collect();
            t.add_row(vec![
                safe(&id).into_owned(),
                iso(modified(r)).unwrap_or_default(),
                r.entries.to_string(),
                safe(&r.cwd).into_owned(),
                safe(&title).into_owned(),
            ]);
        }
        writeln!(ui.out(), "{t}")?;
    }
    Ok(Outcome::Success)
}
