//! `pisess verify`: check the store (redb integrity, row hashes, tree links, id index).
//!
//! Exit 0 when consistent, 1 with findings (one per line on stdout).

use std::io::Write;

use serde_json::json;

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::open_store;
use crate::ui::Ui;

/// Arguments of `pisess verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {}

/// Runs `pisess verify`.
pub fn cmd_verify(ui: &mut Ui, _args: &VerifyArgs) -> CommandResult {
    let mut store = open_store()?;
    let r = store.verify()?;
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
            writeln!(ui.out(), "{}: {}", f.table, f.message)?;
        }
        writeln!(
            ui.out(),
            "checked {} sessions, {} rows, {} links: {}",
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
    Ok(if r.findings.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}
