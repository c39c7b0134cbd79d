//! The agent layer's answers as JSON, in the shapes the reference oracle
//! (`../shared/oracle/oracle.mjs`) prints them: `context`, `cut`, `fileops`, `branch-summary`.
//!
//! Invariants:
//! - key order and optional keys are the oracle's; numbers are JavaScript numbers;
//! - paths come from the caller, built as pi's `getBranch` does (root first).

use super::branch::{collect_entries_for_branch_summary, prepare_branch_entries};
use super::compaction::{NoCompaction, find_cut_point, prepare_compaction};
use super::fileops::{FileOps, compute_file_lists, format_file_operations};
use super::js::num;
use super::path::{id_of, type_of};
use super::project::{Projection, convert_to_llm, entry_messages, project};
use super::serialize::serialize_conversation;
use super::tokens::{
    CompactionSettings, estimate_context_tokens, estimate_projected_context_tokens,
    estimate_tokens, should_compact,
};
use serde_json::{Map, Value, json};

fn opt_str(s: Option<&str>) -> Value {
    s.map_or(Value::Null, |s| Value::String(s.to_owned()))
}

/// The oracle's `summarizeMessage`: `{role, toolName?, customType?, tokens}`.
pub fn summarize_message(m: &Value) -> Value {
    let mut o = Map::new();
    let role = m.get("role");
    if let Some(r) = role {
        o.insert("role".into(), r.clone());
    }
    let role = role.and_then(Value::as_str);
    if role == Some("toolResult")
        && let Some(t) = m.get("toolName")
    {
        o.insert("toolName".into(), t.clone());
    }
    if role == Some("custom")
        && let Some(t) = m.get("customType")
    {
        o.insert("customType".into(), t.clone());
    }
    o.insert("tokens".into(), json!(estimate_tokens(m)));
    Value::Object(o)
}

/// `readFiles`, `modifiedFiles` and the summary's file-list suffix of `ops`, as JSON.
pub fn lists_json(ops: &FileOps) -> (Value, Value, Value) {
    let (read, modified) = compute_file_lists(ops);
    let suffix = format_file_operations(&read, &modified);
    (json!(read), json!(modified), Value::String(suffix))
}

/// The oracle's `context FILE --leaf ID [--llm]` for a path (`requested` is the leaf asked for).
pub fn context_report(requested: Option<&str>, path: &[&Value], llm: bool) -> Value {
    let p = project(path);
    let mut o = Map::new();
    o.insert("requestedLeafId".into(), opt_str(requested));
    o.insert(
        "resolvedLeafId".into(),
        opt_str(path.last().and_then(|e| id_of(e))),
    );
    let ctx = p.context_json();
    if let Value::Object(c) = ctx {
        o.extend(c);
    }
    o.insert(
        "contextEntryIds".into(),
        Value::Array(p.context_entry_ids()),
    );
    o.insert("projection".into(), projection_summary(&p));
    o.insert(
        "estimate".into(),
        json!({
            "projected": estimate_projected_context_tokens(&p, path).to_json(),
            "fromMessages": estimate_context_tokens(p.messages()).to_json(),
        }),
    );
    if llm {
        o.insert(
            "llmMessages".into(),
            Value::Array(
                p.llm_messages()
                    .into_iter()
                    .map(|m| m.into_owned())
                    .collect(),
            ),
        );
    }
    Value::Object(o)
}

fn projection_summary(p: &Projection<'_>) -> Value {
    Value::Array(
        p.entries
            .iter()
            .map(|e| {
                let mut o = Map::new();
                if let Some(id) = e.entry.get("id") {
                    o.insert("id".into(), id.clone());
                }
                if let Some(t) = e.entry.get("type") {
                    o.insert("type".into(), t.clone());
                }
                o.insert("messages".into(), json!(e.messages.len()));
                Value::Object(o)
            })
            .collect(),
    )
}

/// The oracle's `cut FILE [--leaf ID] [--full] [--window N]` for the path at `leaf`.
pub fn cut_report(
    leaf: Option<&str>,
    path: &[&Value],
    settings: CompactionSettings,
    full: bool,
    window: Option<f64>,
) -> Value {
    let raw = find_cut_point(path, 0, path.len(), settings.keep_recent_tokens);
    let id_at = |i: usize| {
        path.get(i)
            .and_then(|e| e.get("id"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let mut o = Map::new();
    o.insert("leafId".into(), opt_str(leaf));
    o.insert("settings".into(), settings_json(&settings));
    o.insert(
        "rawFindCutPoint".into(),
        json!({
            "firstKeptEntryIndex": raw.first_kept_entry_index,
            "turnStartIndex": raw.turn_start_index.map_or(-1, |i| i64::try_from(i).unwrap_or(-1)),
            "isSplitTurn": raw.is_split_turn,
            "firstKeptEntryId": id_at(raw.first_kept_entry_index),
            "turnStartEntryId": raw.turn_start_index.map_or(Value::Null, id_at),
        }),
    );
    match prepare_compaction(path, settings) {
        Err(why) => {
            o.insert("preparation".into(), Value::Null);
            let reason = match why {
                NoCompaction::AlreadyCompacted => "Already compacted",
                NoCompaction::NothingToCompact => "Nothing to compact (session too small)",
            };
            // The oracle decides the reason by the last entry alone.
            let reason = if path
                .last()
                .is_some_and(|e| type_of(e) == Some("compaction"))
            {
                "Already compacted"
            } else {
                reason
            };
            o.insert("reason".into(), reason.into());
        }
        Ok(prep) => {
            let (read, modified, suffix) = lists_json(&prep.file_ops);
            let idx = path
                .iter()
                .position(|e| id_of(e) == Some(prep.first_kept_entry_id.as_str()));
            let mut p = Map::new();
            p.insert(
                "firstKeptEntryId".into(),
                prep.first_kept_entry_id.clone().into(),
            );
            p.insert(
                "firstKeptPathIndex".into(),
                idx.map_or(json!(-1), |i| json!(i)),
            );
            p.insert("isSplitTurn".into(), prep.is_split_turn.into());
            p.insert("tokensBefore".into(), num(prep.tokens_before));
            p.insert(
                "previousSummary".into(),
                prep.previous_summary.clone().unwrap_or(Value::Null),
            );
            p.insert(
                "messagesToSummarize".into(),
                prep.messages_to_summarize
                    .iter()
                    .map(|m| summarize_message(m))
                    .collect(),
            );
            p.insert(
                "turnPrefixMessages".into(),
                prep.turn_prefix_messages
                    .iter()
                    .map(|m| summarize_message(m))
                    .collect(),
            );
            p.insert("fileOps".into(), prep.file_ops.to_json());
            p.insert(
                "details".into(),
                json!({"readFiles": read, "modifiedFiles": modified}),
            );
            p.insert("fileListSuffix".into(), suffix);
            if full {
                p.insert("serializedHistory".into(), prep.serialized_history().into());
                p.insert(
                    "serializedTurnPrefix".into(),
                    prep.serialized_turn_prefix().into(),
                );
            }
            o.insert("preparation".into(), Value::Object(p));
            if let Some(w) = window {
                o.insert(
                    "shouldCompact".into(),
                    should_compact(prep.tokens_before, w, &settings).into(),
                );
            }
        }
    }
    Value::Object(o)
}

/// The `settings` object of the oracle's `cut`.
pub fn settings_json(settings: &CompactionSettings) -> Value {
    json!({"enabled": settings.enabled, "reserveTokens": num(settings.reserve_tokens), "keepRecentTokens": num(settings.keep_recent_tokens)})
}

/// The oracle's `fileops FILE [--leaf ID]` for the path at `leaf`.
pub fn fileops_report(leaf: Option<&str>, path: &[&Value]) -> Value {
    let with_lists = |ops: &FileOps| {
        let (read, modified) = compute_file_lists(ops);
        json!({"ops": ops.to_json(), "readFiles": read, "modifiedFiles": modified})
    };
    let mut path_ops = FileOps::default();
    for e in path {
        for m in entry_messages(e) {
            path_ops.add_message(&m);
        }
    }
    let p = project(path);
    let mut ctx_ops = FileOps::default();
    for m in p.messages() {
        ctx_ops.add_message(m);
    }
    let next = prepare_compaction(path, CompactionSettings::default())
        .ok()
        .map(|prep| with_lists(&prep.file_ops));
    let stored: Vec<Value> = path
        .iter()
        .filter(|e| {
            matches!(type_of(e), Some("compaction" | "branch_summary"))
                && e.get("details").is_some()
        })
        .map(|e| {
            let mut o = Map::new();
            if let Some(id) = e.get("id") {
                o.insert("id".into(), id.clone());
            }
            if let Some(t) = e.get("type") {
                o.insert("type".into(), t.clone());
            }
            o.insert(
                "fromHook".into(),
                e.get("fromHook").cloned().unwrap_or(Value::Null),
            );
            o.insert("details".into(), e["details"].clone());
            Value::Object(o)
        })
        .collect();
    json!({
        "leafId": opt_str(leaf),
        "activePath": with_lists(&path_ops),
        "context": with_lists(&ctx_ops),
        "nextCompaction": next,
        "storedDetails": stored,
    })
}

/// The oracle's `branch-summary FILE OLD TARGET [--budget N] [--full]`, given the two paths
/// (pi's `getBranch` of each id).
pub fn branch_summary_report(
    old: Option<&str>,
    target: &str,
    old_path: &[&Value],
    target_path: &[&Value],
    budget: f64,
    full: bool,
) -> Value {
    let old_path = if old.is_some_and(|o| !o.is_empty()) {
        old_path
    } else {
        &[]
    };
    let c = collect_entries_for_branch_summary(old_path, target_path);
    let prep = prepare_branch_entries(&c.entries, budget);
    let (read, modified, suffix) = lists_json(&prep.file_ops);
    let mut o = Map::new();
    o.insert("oldLeafId".into(), opt_str(old));
    o.insert("targetId".into(), target.into());
    o.insert(
        "commonAncestorId".into(),
        opt_str(c.common_ancestor_id.as_deref()),
    );
    o.insert(
        "entryIds".into(),
        c.entries
            .iter()
            .map(|e| e.get("id").cloned().unwrap_or(Value::Null))
            .collect(),
    );
    o.insert("budget".into(), num(budget));
    o.insert(
        "preparedMessages".into(),
        prep.messages.iter().map(|m| summarize_message(m)).collect(),
    );
    o.insert("totalTokens".into(), num(prep.total_tokens));
    o.insert("fileOps".into(), prep.file_ops.to_json());
    o.insert("readFiles".into(), read);
    o.insert("modifiedFiles".into(), modified);
    o.insert("fileListSuffix".into(), suffix);
    if full {
        o.insert(
            "messages".into(),
            prep.messages
                .iter()
                .map(|m| m.clone().into_owned())
                .collect(),
        );
        let llm = convert_to_llm(prep.messages.iter().map(AsRef::as_ref));
        o.insert(
            "serialized".into(),
            serialize_conversation(llm.iter().map(AsRef::as_ref)).into(),
        );
    }
    Value::Object(o)
}
