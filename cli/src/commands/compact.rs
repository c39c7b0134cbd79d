//! `pisess compact`: prepare a compaction of a session's context (dry run only for now).

use std::io::Write;

use anyhow::anyhow;
use pisess_engine::agent::compaction::{find_projected_cut_point, prepare_compaction};
use pisess_engine::agent::path::{id_of, type_of};
use pisess_engine::agent::report::cut_report;
use pisess_engine::agent::tokens::CompactionSettings;
use serde_json::{Map, Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::open_session;
use crate::ui::{Ui, safe};

/// Prepare a compaction as pi would (dry run): where to cut, what to summarise.
///
/// Only --dry-run is available: writing the summary into the session is not implemented yet.
///
/// With --json: one object with pi's `prepareCompaction` fields (`firstKeptEntryId`,
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
    /// Print the preparation and write nothing (required for now).
    #[arg(long)]
    pub dry_run: bool,
}

/// Runs `pisess compact`.
pub fn cmd_compact(ui: &mut Ui, args: &CompactArgs) -> CommandResult {
    if !args.dry_run {
        return Err(CommandError::with_hint(
            anyhow!("writing a compaction summary into a session is not available yet"),
            "use --dry-run (with --json) to see what would be summarised",
        ));
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
