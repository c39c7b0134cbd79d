//! `pisess files PATH_OR_GLOB`: which tool calls read or changed a path.
//!
//! A query with glob characters is a glob; otherwise it matches the path exactly and every
//! path under it (as a folder), both as written and resolved against the current folder.
//! Exit 1 when nothing is found.

use std::collections::HashMap;
use std::io::Write;

use pisess_engine::files::{FileHitRef, FileQuery};
use pisess_engine::{FileFilter, FileOp, SessionKey};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{open_session_read, open_store_read};
use crate::ui::{Ui, safe};

/// Which operations to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OpArg {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Edits.
    Edit,
    /// Writes, edits and summaries' modified files.
    Modified,
}

/// Arguments of `pisess files`.
#[derive(Debug, clap::Args)]
pub struct FilesArgs {
    /// A path, a folder, or a glob (`**/*.rs`).
    pub path: String,
    /// Only this session (a file, an id or unique prefix, or `@latest`).
    #[arg(long)]
    pub session: Option<String>,
    /// Only this operation.
    #[arg(long, value_enum)]
    pub op: Option<OpArg>,
    /// Only entries on their session's active path.
    #[arg(long)]
    pub active_only: bool,
}

/// Runs `pisess files`.
pub fn cmd_files(ui: &mut Ui, args: &FilesArgs) -> CommandResult {
    let ops = match args.op {
        None => vec![],
        Some(OpArg::Read) => vec![FileOp::Read],
        Some(OpArg::Write) => vec![FileOp::Write],
        Some(OpArg::Edit) => vec![FileOp::Edit],
        Some(OpArg::Modified) => vec![FileOp::Write, FileOp::Edit, FileOp::Modified],
    };
    // The store must outlive its snapshot.
    let (sess, store) = match &args.session {
        Some(s) => (Some(open_session_read(s)?), None),
        None => (None, Some(open_store_read()?)),
    };
    let owned;
    let (snap, session) = match (&sess, &store) {
        (Some(sess), _) => (&sess.snap, Some(sess.key)),
        (None, Some(store)) => {
            owned = store.snapshot()?;
            (&owned, None)
        }
        (None, None) => return Err(anyhow::anyhow!("no store was opened").into()),
    };
    let filter = FileFilter {
        session,
        ops,
        active_only: args.active_only,
    };
    let q = args.path.as_str();
    let abs;
    let mut queries = Vec::with_capacity(2);
    if q.contains(['*', '?', '[', '{']) {
        queries.push(FileQuery::Glob(q));
    } else {
        queries.push(FileQuery::Under(q));
        if !q.starts_with('/')
            && let Ok(cwd) = std::env::current_dir()
        {
            abs = pisess_engine::files::normalize(&cwd.to_string_lossy(), q);
            queries.push(FileQuery::Under(&abs));
        }
    }
    let hits = snap.file_hits(&queries, &filter)?;
    // Session ids, looked up once per session.
    let mut ids: HashMap<SessionKey, String> = HashMap::new();
    for s in hits.sessions() {
        let id = snap.session(s)?.map(|r| r.session_id).unwrap_or_default();
        ids.insert(s, id);
    }
    let json = ui.json;
    let out = ui.out();
    // Lines are gathered into large writes (a glob can print tens of megabytes).
    let mut buf = Vec::with_capacity(1 << 18);
    for h in hits.iter() {
        let h = h?;
        let sid = ids.get(&h.session).map_or("", String::as_str);
        hit_line(&mut buf, sid, &h, json)?;
        if buf.len() >= 1 << 18 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(if hits.is_empty() {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}

/// One hit's line: a JSON Lines record, or the text form.
fn hit_line(
    out: &mut Vec<u8>,
    sid: &str,
    h: &FileHitRef<'_>,
    json: bool,
) -> Result<(), CommandError> {
    if json {
        json_line(out, sid, h)?;
        return Ok(());
    }
    let err = match h.is_error {
        Some(true) => " error",
        _ => "",
    };
    let active = if h.active { "*" } else { " " };
    writeln!(
        out,
        "{active} {} {:<8} {:<6} {} {}{err}  ({}…/{})",
        safe(h.timestamp.unwrap_or("-")),
        h.op.as_str(),
        safe(h.tool_name),
        safe(h.resolved),
        if h.path == h.resolved {
            String::new()
        } else {
            format!("[{}]", safe(h.path))
        },
        safe(&sid.chars().take(8).collect::<String>()),
        safe(h.entry_id.unwrap_or("-")),
    )?;
    Ok(())
}

/// One hit as a JSON Lines record, written field by field in the order `serde_json::json!`
/// would give (`type, session, entry, toolCallId, tool, op, path, resolved, timestamp,
/// isError, active`); a string that needs escaping goes through serde_json's escaper, which
/// escapes exactly control characters, `"` and `\`.
fn json_line(out: &mut Vec<u8>, sid: &str, h: &FileHitRef<'_>) -> serde_json::Result<()> {
    fn field(out: &mut Vec<u8>, name: &str, v: Option<&str>) -> serde_json::Result<()> {
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        match v {
            // Most strings need no escape (no control character, quote or backslash): copied.
            Some(s)
                if !s
                    .bytes()
                    .fold(false, |e, b| e | (b < 0x20) | (b == b'"') | (b == b'\\')) =>
            {
                out.push(b'"');
                out.extend_from_slice(s.as_bytes());
                out.push(b'"');
                Ok(())
            }
            Some(s) => serde_json::to_writer(&mut *out, s),
            None => {
                out.extend_from_slice(b"null");
                Ok(())
            }
        }
    }
    out.extend_from_slice(b"{\"type\":\"file_op\"");
    field(out, "session", Some(sid))?;
    field(out, "entry", h.entry_id)?;
    field(out, "toolCallId", h.tool_call_id)?;
    field(out, "tool", Some(h.tool_name))?;
    field(out, "op", Some(h.op.as_str()))?;
    field(out, "path", Some(h.path))?;
    field(out, "resolved", Some(h.resolved))?;
    field(out, "timestamp", h.timestamp)?;
    out.extend_from_slice(match h.is_error {
        Some(true) => b",\"isError\":true",
        Some(false) => b",\"isError\":false",
        None => b",\"isError\":null",
    });
    out.extend_from_slice(if h.active {
        b",\"active\":true}\n"
    } else {
        b",\"active\":false}\n"
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use pisess_engine::EntryKey;
    use serde_json::json;

    use super::*;

    /// The hand-written record equals serde_json's for the same fields, escapes included.
    #[test]
    fn json_line_equals_serde_json() {
        for (s, opt, flag) in [
            ("plain/path.rs", None, None),
            (
                "q\"uote\\back\nline\t\u{1}\u{7f}é😀",
                Some("x\u{1f}y"),
                Some(true),
            ),
            ("", Some(""), Some(false)),
        ] {
            let h = FileHitRef {
                session: SessionKey(1),
                entry: EntryKey(2),
                index: 0,
                entry_id: opt,
                tool_call_id: Some(s),
                tool_name: s,
                op: FileOp::Edit,
                path: s,
                resolved: "/r",
                timestamp: opt,
                is_error: flag,
                active: flag == Some(true),
            };
            let mut got = Vec::new();
            json_line(&mut got, s, &h).unwrap();
            let want = json!({
                "type": "file_op", "session": s, "entry": h.entry_id,
                "toolCallId": h.tool_call_id, "tool": h.tool_name, "op": h.op.as_str(),
                "path": h.path, "resolved": h.resolved, "timestamp": h.timestamp,
                "isError": h.is_error, "active": h.active,
            });
            assert_eq!(String::from_utf8(got).unwrap(), format!("{want}\n"));
        }
    }
}
