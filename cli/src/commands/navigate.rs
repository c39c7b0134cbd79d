//! `pisess navigate`: move to another entry as pi's `/tree` does, writing a branch summary of
//! the branch left behind (`--summarize`), or, with `--dry-run`, only show what it would cover.
//!
//! Invariants: the dry run writes nothing; `--summarize` appends one `branch_summary` entry
//! through the session writer (file and store in one step) or nothing at all; without
//! `--summarize` nothing is written (pi keeps a bare leaf move in memory only).

use std::io::Write;

use anyhow::anyhow;
use pisess_engine::agent::branch::{collect_entries_for_branch_summary, prepare_branch_entries};
use pisess_engine::agent::js::num;
use pisess_engine::agent::lean_preparation::LeanBranch;
use pisess_engine::agent::report::{lists_json, summarize_message};
use pisess_engine::agent::summary::branch_summary;
use serde_json::{Value, json};

use super::summarizer::summarize;
use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::json_stream::{field, item};
use crate::session_arg::{StoredPath, open_session, open_session_read, open_store_after_summary};
use crate::ui::{Ui, safe};

/// Navigate to another entry as pi's /tree does, summarising the branch left behind.
///
/// With --summarize: the entries of the branch left (from the common ancestor to the leaf) are
/// summarised by --summarizer CMD (or $PISESS_SUMMARIZER; `sh -c`, pi's prompt on stdin, pi's
/// system prompt in $PISESS_SYSTEM_PROMPT, the summary on stdout) or, without one, by pisess's extractive summary; the `branch_summary` is
/// appended where pi puts it (at the target, or at its parent for a user or custom message),
/// in the file and the store. A failing summarizer writes nothing. Without --summarize nothing
/// is written: pi keeps a bare leaf move in memory.
///
/// With --dry-run --json: one object with pi's branch-summary preparation: `oldLeafId`, `targetId`,
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
    /// Print the preparation and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Write a branch summary of the branch left behind.
    #[arg(long)]
    pub summarize: bool,
    /// The command that writes the summary (`sh -c CMD`, prompt on stdin, summary on stdout).
    #[arg(long, value_name = "CMD", env = "PISESS_SUMMARIZER")]
    pub summarizer: Option<String>,
}

/// Runs `pisess navigate`.
pub fn cmd_navigate(ui: &mut Ui, args: &NavigateArgs) -> CommandResult {
    if !args.dry_run {
        return write_navigation(ui, args);
    }
    let session = open_session_read(&args.session)?;
    let from = match &args.from {
        Some(f) => session.entry(f)?,
        None => session.leaf()?,
    };
    let target = session.entry(&args.target)?;
    let old = session.path_source(from)?;
    let new = session.path_source(target)?;
    let (from_id, target_id) = (session.id(from)?, session.id(target)?);
    // pi's `collectEntriesForBranchSummary(oldLeafId, …)` takes an empty id for no old leaf.
    let old_leaf = (!from_id.is_empty()).then_some(&old);
    let branch = LeanBranch::prepare::<_, _, CommandError>(old_leaf, &new, args.budget)?;
    if ui.json {
        write_json(ui.out(), &from_id, &target_id, &old, &branch, args.budget)?;
        return Ok(Outcome::Success);
    }
    writeln!(
        ui.out(),
        "navigate {} → {} (dry run)",
        safe(&from_id),
        safe(&target_id)
    )?;
    writeln!(
        ui.out(),
        "common ancestor:   {}",
        safe(branch.common_ancestor_id.as_deref().unwrap_or("none"))
    )?;
    writeln!(
        ui.out(),
        "branch left:       {} entries, {} message(s) to summarise, ~{} tokens",
        branch.entries.len(),
        branch.messages.len(),
        num(branch.total_tokens)
    )?;
    let (read, modified, _) = lists_json(&branch.file_ops);
    for (files, title) in [(read, "read"), (modified, "modified")] {
        for f in files.as_array().into_iter().flatten() {
            writeln!(ui.out(), "{title:<9} {}", safe(f.as_str().unwrap_or("?")))?;
        }
    }
    Ok(Outcome::Success)
}

/// Writes the `--dry-run --json` object (pi's branch-summary preparation in the oracle's
/// shape: the bytes `serde_json` prints for it), reading the ids of the branch left one entry
/// at a time.
fn write_json(
    out: &mut impl Write,
    from_id: &str,
    target_id: &str,
    old: &StoredPath<'_>,
    branch: &LeanBranch,
    budget: f64,
) -> Result<(), CommandError> {
    out.write_all(b"{\"oldLeafId\":")?;
    pisess_formats::js::to_writer(&mut *out, from_id)?;
    field(out, "targetId", &target_id)?;
    field(out, "commonAncestorId", &branch.common_ancestor_id)?;
    out.write_all(b",\"entryIds\":[")?;
    let mut first = true;
    branch.entry_ids(old, |id| Ok::<(), CommandError>(item(out, &mut first, id)?))?;
    out.write_all(b"]")?;
    field(out, "budget", &num(budget))?;
    let prepared: Vec<Value> = branch.messages.iter().map(summarize_message).collect();
    field(out, "preparedMessages", &prepared)?;
    field(out, "totalTokens", &num(branch.total_tokens))?;
    field(out, "fileOps", &branch.file_ops.to_json())?;
    let (read, modified, suffix) = lists_json(&branch.file_ops);
    field(out, "readFiles", &read)?;
    field(out, "modifiedFiles", &modified)?;
    field(out, "fileListSuffix", &suffix)?;
    out.write_all(b"}\n")?;
    Ok(())
}

/// Summarises the branch left and appends the branch summary.
fn write_navigation(ui: &mut Ui, args: &NavigateArgs) -> CommandResult {
    if !args.summarize {
        return Err(CommandError::with_hint(
            anyhow!(
                "without --summarize there is nothing to write: pi keeps a bare leaf move in memory"
            ),
            "add --summarize to record the navigation with a branch summary, or --dry-run to see it",
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
    let collected = collect_entries_for_branch_summary(&old_path, &new_path);
    if collected.entries.is_empty() {
        if ui.json {
            ui.json_line(
                &json!({"written": false, "reason": "no entries to summarise",
                "oldLeafId": from_id, "targetId": target_id}),
            )?;
        } else {
            writeln!(
                ui.out(),
                "nothing written: the branch left ({} → {}) has no entries to summarise",
                safe(&from_id),
                safe(&target_id)
            )?;
        }
        return Ok(Outcome::Negative);
    }
    // Refuse a file that cannot be written before asking the summarizer, then let the store
    // go while it runs, and append only to the file as it was read.
    drop(session.writer()?);
    let seen = session.seen_file();
    drop(session);
    let prep = prepare_branch_entries(&collected.entries, args.budget);
    let (summary, details) = summarize(args.summarizer.as_deref(), |s| branch_summary(&prep, s))?;
    let store = open_store_after_summary()?;
    let mut writer = seen.open_writer(&store)?;
    if writer.leaf_id() != Some(from_id.as_str()) {
        writer.branch(&from_id)?;
    }
    let id = writer
        .navigate(&target_id, Some((&summary, Some(details.clone()))))?
        .unwrap_or_default();
    super::util::warn_saved_tails(seen.path(), writer.saved_tails());
    let parent = writer
        .entry(&id)?
        .and_then(|e| e.get("parentId").cloned())
        .unwrap_or(Value::Null);
    let by = args.summarizer.as_deref();
    let reported = (|| -> Result<(), CommandError> {
        report_navigation(
            ui,
            &id,
            &parent,
            &from_id,
            &target_id,
            &collected.common_ancestor_id,
            &details,
            by,
            &summary,
            seen.path(),
        )?;
        ui.flush()
    })();
    reported.map_err(|e| {
        e.after(|| {
            format!(
                "branch summary {} was appended to {}",
                safe(&id),
                safe(seen.path())
            )
        })
    })?;
    Ok(Outcome::Success)
}

/// The report of a branch summary appended to `file`.
#[allow(clippy::too_many_arguments)]
fn report_navigation(
    ui: &mut Ui,
    id: &str,
    parent: &Value,
    from_id: &str,
    target_id: &str,
    common_ancestor_id: &Option<String>,
    details: &Value,
    by: Option<&str>,
    summary: &str,
    file: &str,
) -> Result<(), CommandError> {
    if ui.json {
        ui.json_line(&json!({
            "written": true,
            "branchSummaryId": id,
            "parentId": parent,
            "fromId": from_id,
            "targetId": target_id,
            "commonAncestorId": common_ancestor_id,
            "details": details,
            "summarizer": by,
            "summary": summary,
            "file": file,
        }))?;
        return Ok(());
    }
    writeln!(
        ui.out(),
        "navigated {} → {}: branch summary {} appended to {}",
        safe(from_id),
        safe(target_id),
        safe(id),
        safe(file)
    )?;
    writeln!(
        ui.out(),
        "new leaf:          {} (child of {})",
        safe(id),
        safe(parent.as_str().unwrap_or("nothing: a new root"))
    )?;
    writeln!(
        ui.out(),
        "summary by:        {}",
        by.map_or_else(|| "pisess (extractive, no model)".into(), safe)
    )?;
    Ok(())
}
