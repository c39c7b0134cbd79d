//! `pisess verify [--repair]`: check the store (redb integrity, row hashes, tree links, every
//! index against the records) and, with `--repair`, rebuild the tree indexes from the records.
//!
//! Invariants: without `--repair` nothing is written; `--repair` rewrites only index rows
//! (`entry_ids`, `parents`, `children`, `labels`) in one transaction, never a record, and is
//! followed by a second check whose result decides the exit status. A store that may only be
//! read (read-only file system, no write permission) is checked whole through a copy in the
//! temp folder (redb's integrity check needs a writable database), removed after; `--repair`
//! of it fails with the open's error.
//!
//! Exit 0 when consistent (after repair, with `--repair`), 1 with findings (one per line on
//! stdout).

use std::io::Write;

use pisess_engine::{StoreError, VerifyReport};
use serde_json::json;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{open_store, open_store_read};
use crate::ui::{Ui, safe};

/// Check the store: redb's integrity, every row's blake3, tree links (every parent reachable,
/// no cycles), and every index against the records.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// When the check finds problems, rebuild the indexes (entry ids, parents, children,
    /// labels) from the stored records, then check again. Records are never deleted.
    #[arg(long)]
    pub repair: bool,
}

/// Runs `pisess verify`. A reader that stops early (`pisess verify | head`) ends the output,
/// not the work: `--repair` still repairs, and the status is still the check's.
pub fn cmd_verify(ui: &mut Ui, args: &VerifyArgs) -> CommandResult {
    // Nothing to check is no "ok": a mistyped PISESS_STORE would pass (and be created).
    let path = pisess_engine::default_store_path()
        .map_err(|e| CommandError::with_hint(e, "set PISESS_STORE=/path/store.redb"))?;
    if pisess_engine::no_store_at(&path) {
        return Err(CommandError::with_hint(
            anyhow::anyhow!("there is no store at {}", safe(&path.to_string_lossy())),
            "`pisess import` creates it; PISESS_STORE names another store",
        ));
    }
    let mut store = match open_store() {
        Ok(store) => store,
        Err(e)
            if !args.repair
                && e.error()
                    .downcast_ref::<StoreError>()
                    .is_some_and(StoreError::is_read_only_store) =>
        {
            return verify_read_only(ui, &e);
        }
        Err(e) => return Err(e),
    };
    let mut r = store.verify()?;
    let mut open = still_open(print_report(ui, &r, ""))?;
    if args.repair && !r.findings.is_empty() {
        let fixed = store.repair()?;
        if open && ui.json {
            open = still_open(
                ui.json_line(&json!({"type": "repair", "sessions": fixed.sessions,
                "written": fixed.written, "removed": fixed.removed})),
            )?;
        } else if open {
            open = still_open(writeln!(
                ui.out(),
                "repaired: rebuilt the indexes of {} sessions ({} rows written, {} removed)",
                fixed.sessions,
                fixed.written,
                fixed.removed
            ))?;
        }
        r = store.verify()?;
        if open {
            still_open(print_report(ui, &r, "after repair: "))?;
        }
    }
    Ok(if r.findings.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}

/// `verify` of a store that may only be read (`cannot_write` says why): redb's integrity check
/// needs the database writable, so the whole check runs on a copy in the temp folder.
fn verify_read_only(ui: &mut Ui, cannot_write: &CommandError) -> CommandResult {
    let store = open_store_read()?;
    let dir = std::env::temp_dir();
    eprintln!(
        "note: the store {} cannot be written ({}); checking a copy of it in {}",
        store.path().display(),
        safe(&cannot_write.error().root_cause().to_string()),
        dir.display()
    );
    let r = store.verify_copy_in(&dir).map_err(|e| {
        CommandError::from(anyhow::Error::from(e).context(format!(
            "cannot check a copy of the store {} in {} (TMPDIR names another folder)",
            store.path().display(),
            dir.display()
        )))
    })?;
    still_open(print_report(ui, &r, ""))?;
    Ok(if r.findings.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}

/// Whether stdout still has a reader after a write: `false` once its pipe is closed, the
/// write's error otherwise.
fn still_open(written: std::io::Result<()>) -> Result<bool, CommandError> {
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn print_report(ui: &mut Ui, r: &VerifyReport, prefix: &str) -> std::io::Result<()> {
    if ui.json {
        for f in &r.findings {
            ui.json_line(&json!({"type": "finding", "table": f.table, "message": f.message}))?;
        }
        ui.json_line(
            &json!({"type": "summary", "schema": 1, "sessions": r.sessions,
            "rows": r.rows, "links": r.links, "findings": r.findings.len()}),
        )?;
    } else {
        for f in &r.findings {
            writeln!(ui.out(), "{prefix}{}: {}", f.table, safe(&f.message))?;
        }
        writeln!(
            ui.out(),
            "{prefix}checked {} sessions, {} rows, {} links: {}",
            r.sessions,
            r.rows,
            r.links,
            if r.findings.is_empty() {
                "ok".to_owned()
            } else {
                format!("{} problems", r.findings.len())
            }
        )?;
    }
    Ok(())
}
