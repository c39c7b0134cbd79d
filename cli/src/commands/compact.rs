//! `pisess compact`: compact a session's context as pi does — prepare, summarise (through a
//! `--summarizer` command or the extractive default), append the compaction — or, with
//! `--dry-run`, only show the preparation.
//!
//! Invariants: the dry run writes nothing; a real run writes one `compaction` entry through
//! the session writer (file and store in one step) or, when preparing or summarising fails,
//! nothing at all.

use std::io::Write;

use pisess_engine::agent::compaction::{
    NoCompaction, find_projected_cut_point, prepare_compaction,
};
use pisess_engine::agent::path::{id_of, type_of};
use pisess_engine::agent::report::cut_report;
use pisess_engine::agent::summary::compaction_summary;
use pisess_engine::agent::tokens::CompactionSettings;
use serde_json::{Map, Value, json};

use super::summarizer::summarize;
use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::open_session;
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
    let session = open_session(&args.session)?;
    let at = match &args.at {
        Some(a) => session.entry(a)?,
        None => session.leaf()?,
    };
    let values = session.path_values(at)?;
    let path: Vec<&Value> = values.iter().map(|(_, v)| v).collect();
    let leaf_id = session.id(at)?;
    let settings = CompactionSettings {
        enabled: true,
        reserve_tokens: args.reserve,
        keep_recent_tokens: args.keep,
    };
    let report = cut_report(Some(&leaf_id), &path, settings, false, args.window);
    let mut o = Map::new();
    o.insert("leafId".into(), leaf_id.clone().into());
    o.insert(
        "settings".into(),
        report.get("settings").cloned().unwrap_or(Value::Null),
    );
    let prep = report.get("preparation").and_then(Value::as_object);
    o.insert("compactable".into(), prep.is_some().into());
    match prep {
        None => {
            o.insert(
                "reason".into(),
                report.get("reason").cloned().unwrap_or(Value::Null),
            );
        }
        Some(p) => {
            for (k, v) in p {
                if k == "details" {
                    for (dk, dv) in v.as_object().into_iter().flatten() {
                        o.insert(dk.clone(), dv.clone());
                    }
                } else {
                    o.insert(k.clone(), v.clone());
                }
            }
            let (summarize, prefix) = summarized_entries(&path, settings);
            o.insert("summarizeEntryIds".into(), json!(summarize));
            o.insert("turnPrefixEntryIds".into(), json!(prefix));
            if let Some(s) = report.get("shouldCompact") {
                o.insert("shouldCompact".into(), s.clone());
            }
        }
    }
    let o = Value::Object(o);
    if ui.json {
        ui.json_line(&o)?;
        return Ok(Outcome::Success);
    }
    let g = |k: &str| o.get(k).cloned().unwrap_or(Value::Null);
    let n = |k: &str| o.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    writeln!(ui.out(), "compaction at {} (dry run)", safe(&leaf_id))?;
    if prep.is_none() {
        writeln!(
            ui.out(),
            "nothing to do: {}",
            safe(g("reason").as_str().unwrap_or("?"))
        )?;
        return Ok(Outcome::Success);
    }
    writeln!(ui.out(), "tokens before:     {}", g("tokensBefore"))?;
    writeln!(
        ui.out(),
        "first kept entry:  {}{}",
        safe(g("firstKeptEntryId").as_str().unwrap_or("?")),
        if g("isSplitTurn") == Value::Bool(true) {
            " (splits a turn)"
        } else {
            ""
        }
    )?;
    writeln!(
        ui.out(),
        "to summarise:      {} message(s) from {} entries, turn prefix {} message(s)",
        n("messagesToSummarize"),
        n("summarizeEntryIds"),
        n("turnPrefixMessages")
    )?;
    writeln!(
        ui.out(),
        "previous summary:  {}",
        if g("previousSummary").is_null() {
            "none"
        } else {
            "yes (updated)"
        }
    )?;
    for (k, title) in [("readFiles", "read"), ("modifiedFiles", "modified")] {
        for f in o.get(k).and_then(Value::as_array).into_iter().flatten() {
            writeln!(ui.out(), "{title:<9} {}", safe(f.as_str().unwrap_or("?")))?;
        }
    }
    if let Some(s) = o.get("shouldCompact") {
        writeln!(ui.out(), "pi would compact now: {s}")?;
    }
    Ok(Outcome::Success)
}

/// The ids of the entries whose messages are summarised, and of the split turn's prefix.
fn summarized_entries(path: &[&Value], settings: CompactionSettings) -> (Vec<String>, Vec<String>) {
    let Ok(prep) = prepare_compaction(path, settings) else {
        return (Vec::new(), Vec::new());
    };
    let pe = &prep.projection.entries;
    let prev = pe
        .iter()
        .position(|e| type_of(e.entry) == Some("compaction") && !e.messages.is_empty());
    let start = prev.map_or(0, |i| i + 1);
    let cut = find_projected_cut_point(pe, start, pe.len(), settings.keep_recent_tokens);
    let history_end = match cut.turn_start_index {
        Some(t) if cut.is_split_turn => t,
        _ => cut.first_kept_entry_index,
    };
    let ids = |r: &[pisess_engine::agent::ProjectedEntry<'_>]| {
        r.iter()
            .filter(|e| type_of(e.entry) != Some("compaction") && !e.messages.is_empty())
            .filter_map(|e| id_of(e.entry).map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let summarize = ids(pe.get(start..history_end).unwrap_or(&[]));
    let prefix = match cut.turn_start_index {
        Some(t) if cut.is_split_turn => ids(pe.get(t..cut.first_kept_entry_index).unwrap_or(&[])),
        _ => Vec::new(),
    };
    (summarize, prefix)
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
    let settings = CompactionSettings {
        enabled: true,
        reserve_tokens: args.reserve,
        keep_recent_tokens: args.keep,
    };
    let prep = match prepare_compaction(&path, settings) {
        Ok(p) => p,
        Err(why) => {
            let reason = match why {
                NoCompaction::AlreadyCompacted => "Already compacted",
                NoCompaction::NothingToCompact => "Nothing to compact",
            };
            if ui.json {
                ui.json_line(&json!({"leafId": at_id, "compacted": false, "reason": reason}))?;
            } else {
                writeln!(ui.out(), "nothing written: {reason} (at {})", safe(&at_id))?;
            }
            return Ok(Outcome::Negative);
        }
    };
    // Refuse a file that cannot be written before asking the summarizer.
    let mut writer = session.writer()?;
    let (summary, details) =
        summarize(args.summarizer.as_deref(), |s| compaction_summary(&prep, s))?;
    if writer.leaf_id() != Some(at_id.as_str()) {
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
    if ui.json {
        ui.json_line(&json!({
            "compacted": true,
            "compactionId": id,
            "parentId": at_id,
            "firstKeptEntryId": prep.first_kept_entry_id,
            "tokensBefore": pisess_engine::agent::js::num(prep.tokens_before),
            "details": details,
            "summarizer": by,
            "summary": summary,
            "file": session.record.path,
        }))?;
        return Ok(Outcome::Success);
    }
    writeln!(
        ui.out(),
        "compacted at {}: compaction {} appended to {}",
        safe(&at_id),
        safe(&id),
        safe(&session.record.path)
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
    Ok(Outcome::Success)
}
