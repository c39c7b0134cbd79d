//! `pisess ls [--cwd DIR] [--since DATE]`: the session catalogue, newest first.
//!
//! Invariants: reads the store only; the order is by `modified` (pi's listing rule: newest
//! user/assistant message after 1970, else the header time), newest first, ties by file name
//! descending (as pi's folder listing), then by id. The text table fits the terminal's width
//! (`COLUMNS`, else the terminal's) where the fixed columns allow: the title, then the start
//! of the cwd give way; to a file or a pipe, titles are cut at 60 columns. No line ends in
//! spaces, and every cell is terminal-safe.

use std::io::Write;
use std::path::PathBuf;

use pisess_engine::SessionRecord;
use serde_json::json;

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::{clip, columns, open_store_to_query, text_columns};
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

/// The header of the text table.
const HEADER: [&str; 5] = ["id", "modified", "entries", "cwd", "name / first message"];

/// Widest title written when the width is not known (output to a file or a pipe).
const TITLE_PIPED: usize = 60;

/// Fewest columns the title keeps before the cwd is shortened to make room for it.
const TITLE_MIN: usize = 24;

/// Fewest columns a shortened cwd keeps (its end: the project's folder).
const CWD_MIN: usize = 12;

/// Lays the catalogue out as text lines that fit in `width` terminal columns (`None`: not
/// known, titles cut at [`TITLE_PIPED`]), as far as the id, time and entry count allow: the
/// title takes the room left (cut with `…`), and when that is under [`TITLE_MIN`], the cwd
/// gives up its start (`…/projects/api`) down to [`CWD_MIN`]. Columns are two spaces apart,
/// the entry count right-aligned, and no line ends in spaces. Every cell is measured as it
/// is shown once made terminal-safe ([`safe`]).
fn table(rows: &[[String; 5]], width: Option<usize>) -> Vec<String> {
    // Each column's widest cell, measured once (a listing of thousands of sessions measured
    // every column again for every line: 1.4 s for 5,000 sessions).
    let widest: [usize; 5] = std::array::from_fn(|i| {
        rows.iter()
            .map(|r| text_columns(&r[i]))
            .chain(std::iter::once(HEADER[i].len()))
            .max()
            .unwrap_or(0)
    });
    let fixed = widest[0] + widest[1] + widest[2] + 4 * 2;
    let mut cwd_w = widest[3];
    let Some(width) = width else {
        return lay_out(rows, &widest, cwd_w, TITLE_PIPED);
    };
    let mut title_w = width.saturating_sub(fixed + cwd_w);
    if title_w < TITLE_MIN {
        let want = width.saturating_sub(fixed + TITLE_MIN);
        cwd_w = cwd_w.min(want.max(CWD_MIN));
        title_w = width
            .saturating_sub(fixed + cwd_w)
            .max(HEADER[4].len().min(TITLE_MIN));
    }
    lay_out(rows, &widest, cwd_w, title_w)
}

/// The lines of [`table`] with the cwd and title columns `cwd_w` and `title_w` wide at most.
fn lay_out(rows: &[[String; 5]], widest: &[usize; 5], cwd_w: usize, title_w: usize) -> Vec<String> {
    let cwd_w = cwd_w.max(HEADER[3].len());
    let cell = |s: &str, w: usize| -> String {
        let t = safe(s);
        format!("{t}{}", " ".repeat(w.saturating_sub(text_columns(&t))))
    };
    let line = |r: [&str; 5]| -> String {
        let cwd = clip_start(r[3], cwd_w);
        let title = clip(r[4], title_w);
        let l = format!(
            "{}  {}  {:>e$}  {}  {}",
            cell(r[0], widest[0]),
            cell(r[1], widest[1]),
            r[2],
            cell(&cwd, cwd_w),
            safe(&title),
            e = widest[2],
        );
        l.trim_end_matches(' ').to_owned()
    };
    let mut out = vec![line(HEADER)];
    out.extend(
        rows.iter()
            .map(|r| line([&r[0], &r[1], &r[2], &r[3], &r[4]])),
    );
    out
}

/// `dir` with the home folder written `~` (`~/projects/api`), as shells show it.
fn tilde(dir: &str, home: Option<&str>) -> String {
    let home = home.map(|h| h.trim_end_matches('/'));
    match home.and_then(|h| dir.strip_prefix(h)) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => format!("~{rest}"),
        _ => dir.to_owned(),
    }
}

/// Cuts a text to at most `max` terminal columns by dropping its start, marking the cut with
/// `…` (the end of a path names the project); see [`crate::session_arg::clip`].
fn clip_start(t: &str, max: usize) -> String {
    if text_columns(t) <= max {
        return t.to_owned();
    }
    let room = max.saturating_sub(1);
    let mut used = 0;
    let mut tail: Vec<char> = Vec::new();
    for c in t.chars().rev() {
        used += columns(c);
        if used > room {
            break;
        }
        tail.push(c);
    }
    tail.reverse();
    // Cut at a folder's start when one is in the part kept (`…/projects/api`, not
    // `…rojects/api`).
    if let Some(at) = tail.iter().position(|&c| c == '/')
        && at + 1 < tail.len()
    {
        tail.drain(..at);
    }
    std::iter::once('…').chain(tail).collect()
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
        let home = std::env::var("HOME").ok().filter(|h| h.len() > 1);
        let rows: Vec<[String; 5]> = rows
            .iter()
            .map(|r| {
                let title = r
                    .name
                    .clone()
                    .or_else(|| r.first_message.clone())
                    .unwrap_or_default()
                    .replace('\n', " ");
                let id: String = r.session_id.chars().take(13).collect();
                let modified = iso(modified(r));
                [
                    id,
                    crate::session_arg::short_time(modified.as_deref()),
                    r.entries.to_string(),
                    tilde(&r.cwd, home.as_deref()),
                    title,
                ]
            })
            .collect();
        let out = ui.out();
        // To a file or a pipe (no width known): titles of up to [`TITLE_PIPED`] columns.
        for line in table(&rows, crate::session_arg::known_width()) {
            writeln!(out, "{line}")?;
        }
    }
    Ok(Outcome::Success)
}

#[cfg(test)]
mod tests {
    use super::*;
    use unicode_width::UnicodeWidthStr;

    fn row(cwd: &str, title: &str) -> [String; 5] {
        [
            "019fa7f3-ca80".into(),
            "2026-07-28 09:46:42".into(),
            "161".into(),
            cwd.into(),
            title.into(),
        ]
    }

    #[test]
    fn the_table_fits_the_width_and_cuts_the_title_then_the_cwd_start() {
        let rows = vec![
            row(
                "/home/dev/projects/acme-api",
                &"Can you look at ".repeat(10),
            ),
            row(
                "/srv/x",
                "短い題名ですがとても長い説明が続きます。さらに続きます。",
            ),
            row(
                "/tmp/\u{1b}[31mred",
                "title with \u{1b}]0;pwned\u{7} escape",
            ),
        ];
        for width in [60, 80, 100, 120, 200] {
            let lines = table(&rows, Some(width));
            assert_eq!(lines.len(), 4);
            assert!(lines[0].starts_with("id  "), "{}", lines[0]);
            for l in &lines {
                assert!(!l.ends_with(' '), "{width}: {l:?}");
                assert!(!l.contains('\u{1b}') && !l.contains('\u{7}'), "{l:?}");
                // 80 columns leave the title and the cwd their minimum; 60 cannot fit.
                if width >= 80 {
                    assert!(l.width() <= width, "{width}: {} > {width}: {l}", l.width());
                }
            }
            // Cut titles end with the mark; the whole title shows when there is room.
            assert!(lines[1].ends_with('…'), "{}", lines[1]);
            if width >= 100 {
                assert!(
                    lines[1].contains("/home/dev/projects/acme-api"),
                    "{}",
                    lines[1]
                );
            }
        }
        let narrow = table(&rows, Some(80));
        assert!(narrow[1].contains("…/acme-api    Can"), "{}", narrow[1]);
        let piped = table(&rows, None);
        assert!(
            piped[1].contains("/home/dev/projects/acme-api  Can"),
            "{}",
            piped[1]
        );
        assert_eq!(piped[1].split("  ").last().unwrap().width(), TITLE_PIPED);
        let wide = table(&rows, Some(400));
        assert!(wide[2].ends_with("さらに続きます。"), "{}", wide[2]);
        assert!(wide[1].ends_with("Can you look at"), "{}", wide[1]);
        // The entry count is right-aligned under its header.
        let at = wide[0].find("entries").unwrap() + "entries".len();
        assert_eq!(&wide[1][at - 3..at], "161", "{}", wide[1]);
    }

    #[test]
    fn the_home_folder_is_a_tilde() {
        assert_eq!(tilde("/home/dev/p", Some("/home/dev")), "~/p");
        assert_eq!(tilde("/home/dev", Some("/home/dev/")), "~");
        assert_eq!(tilde("/home/devx/p", Some("/home/dev")), "/home/devx/p");
        assert_eq!(tilde("/home/dev/p", None), "/home/dev/p");
    }
}
