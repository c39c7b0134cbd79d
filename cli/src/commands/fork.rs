//! `pisess fork SESSION ENTRY [-o FILE]`: pi's `/fork` and `/clone` (`createBranchedSession`).
//!
//! Invariants: the new file holds the path root → ENTRY with entry ids preserved, labels
//! re-created for kept targets and compactions redirected, exactly as pi writes it; it is
//! written atomically and only as a new file (an existing file is never overwritten); it is
//! imported into the store in the same step; nothing is written when pi would not write the
//! file yet (no user or assistant message on the path); the path is copied one entry at a time
//! (a fork of a million-entry path holds its keys, not its entries).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use pisess_engine::agent::fork::branched_session;
use pisess_engine::agent::writer::{SessionWriter, pi_session_dir};
use serde_json::json;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::open_session;
use crate::ui::{Ui, safe};

/// Write the path root → ENTRY as a new pi session, as pi's /fork and /clone do, and print
/// its path.
///
/// Entry ids are kept; label entries are dropped and the labels in force on kept entries are
/// re-created at the end; the header gets a new session id and `parentSession` = the source
/// file. Default folder: pi's folder for the source's cwd ($PI_CODING_AGENT_SESSION_DIR, else
/// pi's sessionDir setting, else $PI_CODING_AGENT_DIR/sessions/--cwd--, else
/// ~/.pi/agent/sessions/--cwd--). The new session is imported into the store.
///
/// With --json: `{written, path, sessionId, entries, leafId, parentSession}` (`written` false,
/// and exit 1, when the path has no message to keep).
#[derive(Debug, clap::Args)]
pub struct ForkArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// The last entry to keep (id or prefix, @leaf, @root, label:NAME, ENTRY~N).
    pub entry: String,
    /// Write to FILE (must not exist) instead of pi's folder.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `pisess fork`.
pub fn cmd_fork(ui: &mut Ui, args: &ForkArgs) -> CommandResult {
    let session = open_session(&args.session)?;
    let at = session.entry(&args.entry)?;
    let branched = branched_session(&session.snap, session.key, at)?;
    if !branched.has_conversation {
        // pi writes a session file only once it holds a message: a negative answer, as
        // `compact` and `navigate` give when they have nothing to write.
        let id = session.id(at)?;
        if ui.json {
            ui.json_line(&json!({
                "written": false,
                "reason": "no user or assistant message",
                "entryId": id,
            }))?;
        } else {
            writeln!(
                ui.out(),
                "nothing written: the path to {} holds no user or assistant message (pi writes \
                 a session file only once it has one); fork at a later entry",
                safe(&id)
            )?;
        }
        return Ok(Outcome::Negative);
    }
    let cwd = branched
        .header
        .get("cwd")
        .and_then(|c| c.as_str())
        .unwrap_or_default()
        .to_owned();
    let path = match &args.output {
        Some(p) if p == Path::new("-") => {
            return Err(CommandError::with_hint(
                anyhow!("a fork is a session file; `-o -` (stdout) cannot hold it"),
                "give -o a new file name, or `pisess export SESSION --branch ENTRY` to print the \
                 branch as JSONL",
            ));
        }
        Some(p) => {
            // As `export -o` (and a shell's `>`): a folder named by the user must exist; only
            // pi's own session folder for the cwd is created, as pi creates it.
            let dir = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            if !dir.is_dir() {
                let why = if dir.exists() {
                    "is not a folder"
                } else {
                    "does not exist"
                };
                return Err(CommandError::with_hint(
                    anyhow!(
                        "cannot write {}: the folder {} {why}",
                        p.display(),
                        dir.display()
                    ),
                    "create the folder first, or give a file in a folder that exists",
                ));
            }
            p.clone()
        }
        None => pi_session_dir(&cwd)
            .ok_or_else(|| {
                CommandError::with_hint(
                    anyhow!("no folder for pi's sessions (HOME is not set)"),
                    "give -o FILE, or set PI_CODING_AGENT_DIR",
                )
            })?
            .join(&branched.file_name),
    };
    if path.is_dir() {
        return Err(CommandError::with_hint(
            anyhow!("{} is a directory", path.display()),
            "give -o the name of a new file (a fork never goes into a folder by itself)",
        ));
    }
    if path.exists() {
        return Err(CommandError::with_hint(
            anyhow!("{} already exists", path.display()),
            "give -o a new file name",
        ));
    }
    let session_id = branched
        .header
        .get("id")
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let (writer, done) =
        SessionWriter::create_branched(session.store(), &session.snap, &branched, &path)?;
    let (entries, leaf) = (done.entries, done.leaf_id);
    let written = writer
        .file()
        .canonicalize()
        .unwrap_or_else(|_| path.clone());
    let reported = if ui.json {
        ui.json_line(&json!({
            "written": true,
            "path": written.to_string_lossy(),
            "sessionId": session_id,
            "entries": entries,
            "leafId": leaf,
            "parentSession": session.record.path,
        }))
    } else {
        writeln!(ui.out(), "{}", safe(&written.to_string_lossy()))
    };
    reported
        .map_err(CommandError::from)
        .and_then(|()| ui.flush())
        .map_err(|e| {
            e.after(|| format!("the fork was written: {}", safe(&written.to_string_lossy())))
        })?;
    Ok(Outcome::Success)
}
