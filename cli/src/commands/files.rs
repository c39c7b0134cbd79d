//! `pisess files PATH_OR_GLOB`: which tool calls read or changed a path.
//!
//! A query with glob characters is a glob; otherwise it matches the path exactly and every
//! path under it (as a folder), both as written and resolved against the current folder.
//! Exit 1 when nothing is found.

use std::io::Write;

use pisess_engine::{FileFilter, FileHit, FileOp};
use serde_json::json;

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::{open_session, open_store};
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
        Some(s) => (Some(open_session(s)?), None),
        None => (None, Some(open_store()?)),
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
    let mut hits: Vec<FileHit> = if q.contains(['*', '?', '[', '{']) {
        snap.files_glob(q, &filter)?
    } else {
        let mut h = snap.files_under(q, &filter)?;
        if !q.starts_with('/')
            && let Ok(cwd) = std::env::current_dir()
        {
            let abs = pisess_engine::files::normalize(&cwd.to_string_lossy(), q);
            h.extend(snap.files_under(&abs, &filter)?);
        }
        h
    };
    hits.sort_by_key(|h| (h.entry, h.index));
    hits.dedup_by_key(|h| (h.entry, h.index));
    let mut ids = std::collections::HashMap::new();
    for h in &hits {
        if let std::collections::hash_map::Entry::Vacant(v) = ids.entry(h.session) {
            let id = snap
                .session(h.session)?
                .map(|r| r.session_id)
                .unwrap_or_default();
            v.insert(id);
        }
        let sid = ids.get(&h.session).cloned().unwrap_or_default();
        if ui.json {
            ui.json_line(&json!({
                "type": "file_op", "session": sid, "entry": h.entry_id,
                "toolCallId": h.tool_call_id, "tool": h.tool_name, "op": h.op.as_str(),
                "path": h.path, "resolved": h.resolved, "timestamp": h.timestamp,
                "isError": h.is_error, "active": h.active,
            }))?;
        } else {
            let err = match h.is_error {
                Some(true) => " error",
                _ => "",
            };
            let active = if h.active { "*" } else { " " };
            writeln!(
                ui.out(),
                "{active} {} {:<8} {:<6} {} {}{err}  ({}…/{})",
                safe(h.timestamp.as_deref().unwrap_or("-")),
                h.op.as_str(),
                safe(&h.tool_name),
                safe(&h.resolved),
                if h.path == h.resolved {
                    String::new()
                } else {
                    format!("[{}]", safe(&h.path))
                },
                safe(&sid.chars().take(8).collect::<String>()),
                safe(h.entry_id.as_deref().unwrap_or("-")),
            )?;
        }
    }
    Ok(if hits.is_empty() {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}
