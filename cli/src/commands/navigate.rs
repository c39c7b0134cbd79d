//! `pisess navigate`: prepare moving the leaf to another entry, with a branch summary of the
//! branch left behind (dry run only for now).

use std::io::Write;

use anyhow::anyhow;
use pisess_engine::agent::report::branch_summary_report;
use serde_json::Value;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::open_session;
use crate::ui::{Ui, safe};

/// Prepare navigating to another entry with a branch summary (dry run).
///
/// As pi's /tree does it: the common ancestor and the entries of the branch left behind that a
/// branch summary would cover.
///
/// Only --dry-run is available: moving the leaf and writing the summary are not implemented yet.
///
/// With --json: one object with pi's branch-summary preparation: `oldLeafId`, `targetId`,
/// `commonAncestorId`, `entryIds` (the branch left, oldest first), `budget`,
/// `preparedMessages`, `totalTokens`, `fileOps`, `readFiles`, `modifiedFiles`,
/// `fileListSuffix`.
#[derive(Debug, clap::Args)]
pub struct NavigateArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// The entry to move to (id or prefix, @leaf, @root, label:NAME, ENTRY~N).
    pub target: String,
    /// The entry being left. Default: the leaf.
    #[arg(long, value_name = "ENTRY")]
    pub from: Option<String>,
    /// Token budget of the summarised messages (pi: context window − reserve).
    #[arg(long, value_name = "N", default_value_t = 128000.0 - 16384.0)]
    pub budget: f64,
    /// Print the preparation and change nothing (required for now).
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `pisess navigate`.
pub fn cmd_navigate(ui: &mut Ui, args: &NavigateArgs) -> CommandResult {
    if !args.dry_run {
        return Err(CommandError::with_hint(
            anyhow!("moving the leaf and writing a branch summary are not available yet"),
            "use --dry-run (with --json) to see what would be summarised",
        ));
    }
    let session = open_session(&args.session)?;
    let from = match &args.from {
        Some(f) => session.entry(f)?,
        None => session.leaf()?,
    };
    let target = session.entry(&args.target)?;
    let old = session.path_values(from)?;
    let new = session.path_values(target)?;
    let old_path: Vec<&Value> = old.iter().map(|(_, v)| v).collect();
    let new_path: Vec<&Value> = new.iter().map(|(_, v)| v).collect();
    let (from_id, target_id) = (session.id(from)?, session.id(target)?);
    let report = branch_summary_report(
        Some(&from_id),
        &target_id,
        &old_path,
        &new_path,
        args.budget,
        false,
    );
    if ui.json {
        ui.json_line(&report)?;
        return Ok(Outcome::Success);
    }
    let g = |k: &str| report.get(k).cloned().unwrap_or(Value::Null);
    let n = |k: &str| report.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    writeln!(
        ui.out(),
        "navigate {} → {} (dry run)",
        safe(&from_id),
        safe(&target_id)
    )?;
    writeln!(
        ui.out(),
        "common ancestor:   {}",
        safe(g("commonAncestorId").as_str().unwrap_or("none"))
    )?;
    writeln!(
        ui.out(),
        "branch left:       {} entries, {} message(s) to summarise, ~{} tokens",
        n("entryIds"),
        n("preparedMessages"),
        g("totalTokens")
    )?;
    for (k, title) in [("readFiles", "read"), ("modifiedFiles", "modified")] {
        for f in report
            .get(k)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            writeln!(ui.out(), "{title:<9} {}", safe(f.as_str().unwrap_or("?")))?;
        }
    }
    Ok(Outcome::Success)
}
