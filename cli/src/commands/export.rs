//! `pisess export SESSION [--branch ENTRY] [-o FILE]`: a session (or one branch) as JSONL.
//!
//! Invariants: a whole v3 session is written byte for byte as imported (v1/v2: migrated);
//! `-o` writes atomically (temp file in the same folder, fsync, rename), so a reader never
//! sees a half-written file.

use std::io::Write;
use std::path::PathBuf;

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::open_session;
use crate::ui::Ui;

/// Arguments of `pisess export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The session: a file, a session id or unique prefix, or `@latest`.
    pub session: String,
    /// Export only the path root → ENTRY, as a new session whose parentSession is the source.
    #[arg(long, value_name = "ENTRY")]
    pub branch: Option<String>,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `pisess export`.
pub fn cmd_export(ui: &mut Ui, args: &ExportArgs) -> CommandResult {
    let sess = open_session(&args.session)?;
    let mut buf: Vec<u8> = Vec::new();
    let write = |out: &mut dyn Write| -> CommandResult {
        match &args.branch {
            Some(b) => {
                let e = sess.entry(b)?;
                sess.snap.export_branch(sess.key, e, out)?;
            }
            None => {
                sess.snap.export_session(sess.key, out)?;
            }
        }
        Ok(Outcome::Success)
    };
    match &args.output {
        None => write(ui.out()),
        Some(path) => {
            write(&mut buf)?;
            let dir = path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .map_or_else(|| PathBuf::from("."), PathBuf::from);
            let name = path
                .file_name()
                .map_or_else(|| "export".to_owned(), |n| n.to_string_lossy().into_owned());
            let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
            let result = (|| -> std::io::Result<()> {
                let mut f = std::fs::File::create(&tmp)?;
                f.write_all(&buf)?;
                f.sync_all()?;
                std::fs::rename(&tmp, path)
            })();
            if let Err(e) = result {
                let _ = std::fs::remove_file(&tmp);
                return Err(e.into());
            }
            Ok(Outcome::Success)
        }
    }
}
