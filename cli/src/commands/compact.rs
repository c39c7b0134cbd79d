//! `pisess compact`: compact a session's context as pi does — prepare, summarise (through a
//! `--summarizer` command or the extractive default), append the compaction — or, with
//! `--dry-run`, only show the preparation.
//!
//! Invariants: the dry run writes nothing; a real run writes one `compaction` entry through
//! the session writer (file and store in one step) or, when preparing or summarising fails,
//! nothing at all.

use std::io::Write;

use pisess_engine::agent::compaction::{NoCompaction, prepare_compaction};
use pisess_engine::agent::fileops::compute_file_lists;
use pisess_engine::agent::js::num;
use pisess_engine::agent::lean_preparation::{LeanCompaction, Part};
use pisess_engine::agent::report::{lists_json, settings_json, summarize_message};
use pisess_engine::agent::summary::compaction_summary;
use pisess_engine::agent::tokens::{CompactionSettings, should_compact};
use serde_json::{Value, json};

use super::summarizer::summarize;
use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::json_stream::{field, item};
use crate::session_arg::{StoredPath, open_session, open_session_read, open_store_after_summary};
use crate::ui::{Ui, safe};

/// Compact a session's context as pi would: cut, summarise, append a compaction.
///
/// The summary comes from --summarizer CMD (or $PISESS_SUMMARIZER), run with `sh -c`: pi's
/// exact summarisation prompt on its stdin, pi's system prompt in $PISESS_SYSTEM_PROMPT, the
/// summary on its stdout (e.g. `llm -s "$PISESS_SYSTEM_PROMPT"`, `pi -p`, any script); pi makes two calls for a split turn. Without a summarizer, pisess
/// writes a deterministic extractive summary in pi's six sections, marked as such on its first
/// line. The compaction (with pi's file lists, `details` and the system message in force) is
/// appended at ENTRY (default: the leaf) in the file and the store; a failing summarizer
/// writes nothing.
///
/// With --dry-run --json: one object with pi's `prepareCompaction` fields (`firstKeptEntryId`,
/// `firstKeptPathIndex`, `isSplitTurn`, `tokensBefore`, `previousSummary`,
/// `messagesToSummarize`, `turnPrefixMessages`, `fileOps`, `readFiles`, `modifiedFiles`,
/// `fileListSuffix`), the entry ids summarised (`summarizeEntryIds`, `turnPrefixEntryIds`), and
/// `shouldCompact` with --window; or `{compactable: false, reason}`.
#[derive(Debug, clap::Args)]
pub struct CompactArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// Compact the context as it is at this entry. Default: the leaf.
    #[arg(long, value_name = "ENTRY")]
    pub at: Option<String>,
    /// Tokens of recent context kept verbatim (pi's keepRecentTokens).
    #[arg(long, value_name = "N", default_value_t = 20000.0)]
    pub keep: f64,
    /// Tokens kept free for the prompt and the reply (pi's reserveTokens).
    #[arg(long, value_name = "N", default_value_t = 16384.0)]
    pub reserve: f64,
    /// The model's context window, to report whether pi would compact now.
    #[arg(long, value_name = "N")]
    pub window: Option<f64>,
    /// Print the preparation and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The command that writes the summary (`sh -c CMD`, prompt on stdin, summary on stdout).
    #[arg(long, value_name = "CMD", env = "PISESS_SUMMARIZER")]
    pub summarizer: Option<String>,
}

/// Runs `pisess compact`.
pub fn cmd_compact(ui: &mut Ui, args: &CompactArgs) -> CommandResult {
    if !args.dry_run {
        return write_compaction(ui, args);
    }
    let session = open_session_read(&args.session)?;
    let at = match &args.at {
        Some(a) => session.entry(a)?,
        None => session.leaf()?,
    };
    let path = session.path_source(at)?;
    let leaf_id = session.id(at)?;
    let settings = settings_of(args);
    let prep = LeanCompaction::prepare(&path, settings)?;
    if ui.json {
        write_json(ui.out(), &leaf_id, &path, &prep, settings, args.window)?;
        return Ok(Outcome::Success);
    }
    writeln!(ui.out(), "compaction at {} (dry run)", safe(&leaf_id))?;
    let p = match &prep {
        Err(why) => {
            writeln!(ui.out(), "nothing to do: {}", reason(*why))?;
            return Ok(Outcome::Success);
        }
        Ok(p) => p,
    };
    let (mut history, mut prefix) = (0usize, 0usize);
    let ops = p.messages(&path, |part, _| {
        match part {
            Part::History => history += 1,
            Part::TurnPrefix => prefix += 1,
        }
        Ok::<(), CommandError>(())
    })?;
    let mut entries = 0usize;
    p.entry_ids(&path, Part::History, |_| {
        entries += 1;
        Ok::<(), CommandError>(())
    })?;
    writeln!(ui.out(), "tokens before:     {}", num(p.tokens_before))?;
    writeln!(
        ui.out(),
        "first kept entry:  {}{}",
        safe(&p.first_kept_entry_id),
        if p.is_split_turn {
            " (splits a turn)"
        } else {
            ""
        }
    )?;
    writeln!(
        ui.out(),
        "to summarise:      {history} message(s) from {entries} entries, turn prefix {prefix} message(s)"
    )?;
    writeln!(
        ui.out(),
        "previous summary:  {}",
        if p.previous_summary.as_ref().is_none_or(Value::is_null) {
            "none"
        } else {
            "yes (updated)"
        }
    )?;
    let (read, modified) = compute_file_lists(&ops);
    for (files, title) in [(read, "read"), (modified, "modified")] {
        for f in files {
            writeln!(ui.out(), "{title:<9} {}", safe(&f))?;
        }
    }
    if let Some(w) = args.window {
        writeln!(
            ui.out(),
            "pi would compact now: {}",
            should_compact(p.tokens_before, w, &settings)
        )?;
    }
    Ok(Outcome::Success)
}

fn settings_of(args: &CompactArgs) -> CompactionSettings {
    CompactionSettings {
        enabled: true,
        reserve_tokens: args.reserve,
        keep_recent_tokens: args.keep,
    }
}

/// Why the oracle's `cut` prepares nothing.
fn reason(why: NoCompaction) -> &'static str {
    match why {
        NoCompaction::AlreadyCompacted => "Already compacted",
        NoCompaction::NothingToCompact => "Nothing to compact (session too small)",
    }
}

/// Writes the `--dry-run --json` object (`leafId`, `settings`, `compactable`, then `reason`
/// or pi's preparation flattened, the entry ids summarised and `shouldCompact`: the bytes
/// `serde_json` prints for it) as the summarised entries are read, one at a time.
fn write_json(
    out: &mut impl Write,
    leaf_id: &str,
    path: &StoredPath<'_>,
    prep: &Result<LeanCompaction, NoCompaction>,
    settings: CompactionSettings,
    window: Option<f64>,
) -> Result<(), CommandError> {
    out.write_all(b"{\"leafId\":")?;
    pisess_formats::js::to_writer(&mut *out, leaf_id)?;
    field(out, "settings", &settings_json(&settings))?;
    let p = match prep {
        Err(why) => {
            field(out, "compactable", &false)?;
            field(out, "reason", &reason(*why))?;
            out.write_all(b"}\n")?;
            return Ok(());
        }
        Ok(p) => p,
    };
    field(out, "compactable", &true)?;
    field(out, "firstKeptEntryId", &p.first_kept_entry_id)?;
    field(
        out,
        "firstKeptPathIndex",
        &p.first_kept_path_index.map_or(json!(-1), |i| json!(i)),
    )?;
    field(out, "isSplitTurn", &p.is_split_turn)?;
    field(out, "tokensBefore", &num(p.tokens_before))?;
    field(
        out,
        "previousSummary",
        p.previous_summary.as_ref().unwrap_or(&Value::Null),
    )?;
    out.write_all(b",\"messagesToSummarize\":[")?;
    let mut current = Part::History;
    let mut first = true;
    let ops = p.messages(path, |part, m| {
        if part != current {
            out.write_all(b"],\"turnPrefixMessages\":[")?;
            current = part;
            first = true;
        }
        Ok::<(), CommandError>(item(out, &mut first, &summarize_message(m))?)
    })?;
    if current == Part::History {
        out.write_all(b"],\"turnPrefixMessages\":[")?;
    }
    out.write_all(b"]")?;
    field(out, "fileOps", &ops.to_json())?;
    let (read, modified, suffix) = lists_json(&ops);
    field(out, "readFiles", &read)?;
    field(out, "modifiedFiles", &modified)?;
    field(out, "fileListSuffix", &suffix)?;
    for (key, part) in [
        ("summarizeEntryIds", Part::History),
        ("turnPrefixEntryIds", Part::TurnPrefix),
    ] {
        write!(out, ",\"{key}\":[")?;
        let mut first = true;
        p.entry_ids(path, part, |id| {
            Ok::<(), CommandError>(item(out, &mut first, &id)?)
        })?;
        out.write_all(b"]")?;
    }
    if let Some(w) = window {
        field(
            out,
            "shouldCompact",
            &should_compact(p.tokens_before, w, &settings),
        )?;
    }
    out.write_all(b"}\n")?;
    Ok(())
}

/// Prepares, summarises and appends the compaction.
fn write_compaction(ui: &mut Ui, args: &CompactArgs) -> CommandResult {
    let session = open_session(&args.session)?;
    let at = match &args.at {
        Some(a) => session.entry(a)?,
        None => session.leaf()?,
    };
    let values = session.path_values(at)?;
    let path: Vec<&Value> = values.iter().map(|(_, v)| v).collect();
    let at_id = session.id(at)?;
    let settings = settings_of(args);
    let prep = match prepare_compaction(&path, settings) {
        Ok(p) => p,
        Err(why) => {
            let reason = match why {
                NoCompaction::AlreadyCompacted => "Already compacted",
                NoCompaction::NothingToCompact => "Nothing to compact",
            };
            if ui.json {
                ui.json_line(&json!({
                    "leafId": at_id,
                    "compacted": false,
                    "written": false,
                    "reason": reason,
                }))?;
            } else {
                writeln!(ui.out(), "nothing written: {reason} (at {})", safe(&at_id))?;
            }
            return Ok(Outcome::Negative);
        }
    };
    // Refuse a file that cannot be written before asking the summarizer, then let the store
    // go while it runs, and append only to the file as it was read.
    drop(session.writer()?);
    let seen = session.seen_file();
    drop(session);
    let (summary, details) =
        summarize(args.summarizer.as_deref(), |s| compaction_summary(&prep, s))?;
    let store = open_store_after_summary()?;
    let mut writer = seen.open_writer(&store)?;
    // `--at` an entry before the leaf: the compaction starts a branch there and becomes the
    // leaf pi resumes from; say so, as the entries after it leave the active path.
    let left = writer
        .leaf_id()
        .filter(|&l| l != at_id.as_str())
        .map(str::to_owned);
    if left.is_some() {
        writer.branch(&at_id)?;
    }
    let id = writer.append_compaction(
        &summary,
        Some(&prep.first_kept_entry_id),
        pisess_engine::agent::js::num(prep.tokens_before),
        Some(details.clone()),
        Some(false),
        None,
    )?;
    let by = args.summarizer.as_deref();
    super::util::warn_saved_tails(seen.path(), writer.saved_tails());
    if let Some(old) = &left {
        eprintln!(
            "note: the leaf was {}; the compaction hangs under {} instead and is the leaf pi \
             resumes from (the entries after {} stay in the file on their own branch: `pisess \
             tree` shows it)",
            safe(old),
            safe(&at_id),
            safe(&at_id)
        );
    }
    report_compaction(ui, &at_id, &id, &prep, &details, by, &summary, seen.path())
        .and_then(|()| ui.flush())
        .map_err(|e| {
            e.after(|| {
                format!(
                    "compaction {} was appended to {}",
                    safe(&id),
                    safe(seen.path())
                )
            })
        })?;
    Ok(Outcome::Success)
}

/// The report of a compaction appended to `file`.
#[allow(clippy::too_many_arguments)]
fn report_compaction(
    ui: &mut Ui,
    at_id: &str,
    id: &str,
    prep: &pisess_engine::agent::compaction::CompactionPreparation<'_>,
    details: &Value,
    by: Option<&str>,
    summary: &str,
    file: &str,
) -> Result<(), CommandError> {
    if ui.json {
        ui.json_line(&json!({
            "compacted": true,
            "written": true,
            "compactionId": id,
            "parentId": at_id,
            "firstKeptEntryId": prep.first_kept_entry_id,
            "tokensBefore": pisess_engine::agent::js::num(prep.tokens_before),
            "details": details,
            "summarizer": by,
            "summary": summary,
            "file": file,
        }))?;
        return Ok(());
    }
    writeln!(
        ui.out(),
        "compacted at {}: compaction {} appended to {}",
        safe(at_id),
        safe(id),
        safe(file)
    )?;
    writeln!(ui.out(), "tokens before:     {}", prep.tokens_before)?;
    writeln!(
        ui.out(),
        "first kept entry:  {}",
        safe(&prep.first_kept_entry_id)
    )?;
    writeln!(
        ui.out(),
        "summary by:        {}",
        by.map_or_else(|| "pisess (extractive, no model)".into(), safe)
    )?;
    Ok(())
}
