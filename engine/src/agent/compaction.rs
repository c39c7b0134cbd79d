//! Compaction preparation (pi's `findProjectedCutPoint`, `findCutPoint`, `prepareCompaction`)
//! and the summariser prompts.
//!
//! Invariants:
//! - cut points are entries (not compactions) with a user, assistant, bash, custom or summary
//!   message; never a tool result; turn starts are the same without assistant;
//! - the walk from the newest entry sums per-entry estimates (system messages included) until
//!   `keepRecentTokens` is reached; then the recovery-omission rule, then metadata entries just
//!   before the cut are kept with it;
//! - `messagesToSummarize` and `turnPrefixMessages` never hold compaction entries' messages or
//!   system messages; file operations inherit the previous compaction's `details` unless it
//!   came from a hook.

use super::fileops::FileOps;
use super::path::type_of;
use super::project::{Msg, ProjectedEntry, Projection, convert_to_llm, entry_messages, project};
use super::serialize::serialize_conversation;
use super::tokens::{CompactionSettings, estimate_projected_context_tokens, estimate_tokens};
use serde_json::Value;
use std::collections::HashSet;

/// Where to cut (pi's `CutPointResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// Index of the first kept entry.
    pub first_kept_entry_index: usize,
    /// Index of the entry starting the split turn, when the cut splits one.
    pub turn_start_index: Option<usize>,
    /// Whether the cut falls inside a turn.
    pub is_split_turn: bool,
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

fn is_cut_point_message(m: &Value) -> bool {
    matches!(
        role(m),
        Some(
            "user"
                | "assistant"
                | "bashExecution"
                | "custom"
                | "branchSummary"
                | "compactionSummary"
        )
    )
}

fn is_turn_start_message(m: &Value) -> bool {
    matches!(
        role(m),
        Some("user" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary")
    )
}

/// The cut-point algorithm over entries with their messages; `recovery` enables the
/// recovery-omission rule (projected form only).
fn cut_point(
    entries: &[ProjectedEntry<'_>],
    start: usize,
    end: usize,
    keep: f64,
    recovery: bool,
) -> CutPoint {
    let is_compaction = |e: &ProjectedEntry<'_>| type_of(e.entry) == Some("compaction");
    let cut_points: Vec<usize> = (start..end)
        .filter(|&i| {
            !is_compaction(&entries[i])
                && entries[i].messages.iter().any(|m| is_cut_point_message(m))
        })
        .collect();
    let (Some(&first), Some(&last)) = (cut_points.first(), cut_points.last()) else {
        return CutPoint {
            first_kept_entry_index: start,
            turn_start_index: None,
            is_split_turn: false,
        };
    };
    let mut acc = 0.0;
    let mut exceeded = false;
    let mut cut = first;
    for i in (start..end).rev() {
        let t: u64 = entries[i].messages.iter().map(|m| estimate_tokens(m)).sum();
        if t == 0 {
            continue;
        }
        acc += t as f64;
        if acc >= keep {
            exceeded = true;
            cut = cut_points.iter().copied().find(|&c| c >= i).unwrap_or(last);
            break;
        }
    }
    if recovery && exceeded && recovery_omission_suffix(&entries[(cut + 1).min(end)..end]) {
        cut += 1;
    }
    while cut > start {
        let prev = &entries[cut - 1];
        if is_compaction(prev) || !prev.messages.is_empty() {
            break;
        }
        cut -= 1;
    }
    let is_turn_start = |e: &ProjectedEntry<'_>| {
        !is_compaction(e) && e.messages.iter().any(|m| is_turn_start_message(m))
    };
    let starts_turn = entries.get(cut).is_some_and(is_turn_start);
    let turn_start = if starts_turn {
        None
    } else {
        (start..=cut.min(entries.len().saturating_sub(1)))
            .rev()
            .find(|&i| is_turn_start(&entries[i]))
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index: turn_start,
        is_split_turn: !starts_turn && turn_start.is_some(),
    }
}

/// The recovery-omission rule: the suffix after the cut is closed and holds an assistant
/// attempt hidden by a context edit.
fn recovery_omission_suffix(suffix: &[ProjectedEntry<'_>]) -> bool {
    let visible = |e: &ProjectedEntry<'_>| {
        type_of(e.entry) != Some("context_edit") && !entry_messages(e.entry).is_empty()
    };
    let omitted = |e: &ProjectedEntry<'_>| visible(e) && e.messages.is_empty();
    let omitted_ids: HashSet<Option<&str>> = suffix
        .iter()
        .filter(|e| omitted(e))
        .map(|e| e.entry.get("id").and_then(Value::as_str))
        .collect();
    let external_replacement = suffix.iter().any(|e| {
        type_of(e.entry) == Some("context_edit")
            && e.entry.get("replacement") != Some(&Value::Null)
            && !omitted_ids.contains(&e.entry.get("targetId").and_then(Value::as_str))
    });
    !external_replacement
        && suffix.iter().any(|e| {
            type_of(e.entry) == Some("message")
                && e.entry.get("message").and_then(role) == Some("assistant")
                && omitted(e)
        })
        && suffix
            .iter()
            .all(|e| type_of(e.entry) != Some("compaction") && (!visible(e) || omitted(e)))
}

/// pi's `findProjectedCutPoint` over projected entries `[start, end)`.
pub fn find_projected_cut_point(
    entries: &[ProjectedEntry<'_>],
    start: usize,
    end: usize,
    keep: f64,
) -> CutPoint {
    cut_point(entries, start, end, keep, true)
}

/// pi's exported legacy `findCutPoint` over raw path entries `[start, end)` (no edits, no
/// recovery rule).
pub fn find_cut_point(path: &[&Value], start: usize, end: usize, keep: f64) -> CutPoint {
    let raw: Vec<ProjectedEntry<'_>> = path
        .iter()
        .map(|&entry| ProjectedEntry {
            entry,
            messages: entry_messages(entry),
        })
        .collect();
    cut_point(&raw, start, end, keep, false)
}

/// pi's `CompactionPreparation`.
#[derive(Debug, Clone)]
pub struct CompactionPreparation<'a> {
    /// The projection of the path the preparation was made from.
    pub projection: Projection<'a>,
    /// Id of the first kept entry.
    pub first_kept_entry_id: String,
    /// Index of the first kept entry in the projection.
    pub first_kept_projected_index: usize,
    /// Messages summarised into the history summary.
    pub messages_to_summarize: Vec<Msg<'a>>,
    /// Messages of the split turn's prefix (empty unless split).
    pub turn_prefix_messages: Vec<Msg<'a>>,
    /// Whether the cut splits a turn.
    pub is_split_turn: bool,
    /// Estimated context tokens before compaction.
    pub tokens_before: f64,
    /// The previous compaction's summary, if the projection starts with one.
    pub previous_summary: Option<Value>,
    /// File operations to record.
    pub file_ops: FileOps,
    /// The settings used.
    pub settings: CompactionSettings,
}

/// Why there is nothing to prepare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCompaction {
    /// The path ends with a compaction.
    AlreadyCompacted,
    /// Nothing before the cut to summarise.
    NothingToCompact,
}

fn for_compaction<'a>(entries: &[ProjectedEntry<'a>]) -> Vec<Msg<'a>> {
    entries
        .iter()
        .filter(|e| type_of(e.entry) != Some("compaction"))
        .flat_map(|e| {
            e.messages
                .iter()
                .filter(|m| role(m) != Some("system"))
                .cloned()
        })
        .collect()
}

/// pi's `prepareCompaction(pathEntries, settings)` over a path root→leaf.
pub fn prepare_compaction<'a>(
    path: &[&'a Value],
    settings: CompactionSettings,
) -> Result<CompactionPreparation<'a>, NoCompaction> {
    if path
        .last()
        .is_some_and(|e| type_of(e) == Some("compaction"))
    {
        return Err(NoCompaction::AlreadyCompacted);
    }
    let projection = project(path);
    let pe = &projection.entries;
    let prev = pe
        .iter()
        .position(|e| type_of(e.entry) == Some("compaction") && !e.messages.is_empty());
    let previous_summary = prev.and_then(|i| pe[i].entry.get("summary").cloned());
    let boundary_start = prev.map_or(0, |i| i + 1);
    let tokens_before = estimate_projected_context_tokens(&projection, path).tokens;
    let cut = find_projected_cut_point(pe, boundary_start, pe.len(), settings.keep_recent_tokens);
    let Some(first_kept_entry_id) = pe
        .get(cut.first_kept_entry_index)
        .and_then(|e| e.entry.get("id"))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
    else {
        return Err(NoCompaction::NothingToCompact);
    };
    let history_end = match cut.turn_start_index {
        Some(t) if cut.is_split_turn => t,
        _ => cut.first_kept_entry_index,
    };
    let messages_to_summarize = for_compaction(pe.get(boundary_start..history_end).unwrap_or(&[]));
    let turn_prefix_messages = match cut.turn_start_index {
        Some(t) if cut.is_split_turn => for_compaction(&pe[t..cut.first_kept_entry_index]),
        _ => Vec::new(),
    };
    if messages_to_summarize.is_empty() && turn_prefix_messages.is_empty() {
        return Err(NoCompaction::NothingToCompact);
    }
    let mut file_ops = FileOps::default();
    if let Some(p) = prev {
        let c = pe[p].entry;
        if !super::js::truthy(c.get("fromHook"))
            && let Some(d) = c.get("details").filter(|d| super::js::truthy(Some(d)))
        {
            file_ops.add_details(d);
        }
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(m);
    }
    Ok(CompactionPreparation {
        first_kept_entry_id,
        first_kept_projected_index: cut.first_kept_entry_index,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: cut.is_split_turn,
        tokens_before,
        previous_summary,
        file_ops,
        settings,
        projection,
    })
}

impl CompactionPreparation<'_> {
    /// `serializeConversation(convertToLlm(messagesToSummarize))`.
    pub fn serialized_history(&self) -> String {
        serialize_conversation(
            convert_to_llm(self.messages_to_summarize.iter().map(AsRef::as_ref))
                .iter()
                .map(AsRef::as_ref),
        )
    }

    /// `serializeConversation(convertToLlm(turnPrefixMessages))`.
    pub fn serialized_turn_prefix(&self) -> String {
        serialize_conversation(
            convert_to_llm(self.turn_prefix_messages.iter().map(AsRef::as_ref))
                .iter()
                .map(AsRef::as_ref),
        )
    }

    /// The user prompt pi sends for the history summary (first or update form).
    pub fn history_prompt(&self, custom_instructions: Option<&str>) -> String {
        let prev = self
            .previous_summary
            .as_ref()
            .filter(|p| super::js::truthy(Some(p)));
        history_prompt(
            &self.serialized_history(),
            prev.map(|p| super::js::to_js_string(Some(p))).as_deref(),
            custom_instructions,
        )
    }

    /// The user prompt pi sends for the split turn's prefix.
    pub fn turn_prefix_prompt(&self, custom_instructions: Option<&str>) -> String {
        turn_prefix_prompt(&self.serialized_turn_prefix(), custom_instructions)
    }

    /// The summary pi stores: `history` (and the turn-prefix summary when split, joined as pi
    /// does) followed by the file lists; and the `details` object.
    pub fn stored_summary(
        &self,
        history: Option<&str>,
        turn_prefix: Option<&str>,
    ) -> (String, Value) {
        let mut summary = match turn_prefix {
            Some(prefix) if self.is_split_turn && !self.turn_prefix_messages.is_empty() => {
                let prev = self
                    .previous_summary
                    .as_ref()
                    .map(|p| super::js::to_js_string(Some(p)));
                let h = history
                    .map(str::to_owned)
                    .or(prev)
                    .unwrap_or_else(|| "No prior history.".to_owned());
                format!("{h}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix}")
            }
            _ => history.unwrap_or_default().to_owned(),
        };
        let (read, modified) = super::fileops::compute_file_lists(&self.file_ops);
        summary += &super::fileops::format_file_operations(&read, &modified);
        (
            summary,
            serde_json::json!({"readFiles": read, "modifiedFiles": modified}),
        )
    }
}

/// The summariser's system prompt.
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = "You are a context summarization assistant. Your task is to read a conversation between a user and an AI assistant, then produce a structured summary following the exact format specified.

Do NOT continue the conversation. Do NOT respond to any questions in the conversation. ONLY output the structured summary.";

/// The first-compaction instructions.
pub const SUMMARIZATION_PROMPT: &str = "The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or \"(none)\" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or \"(none)\" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages.";

/// The update instructions (a previous summary exists).
pub const UPDATE_SUMMARIZATION_PROMPT: &str = "The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from \"In Progress\" to \"Done\" when completed
- UPDATE \"Next Steps\" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

Keep each section concise. Preserve exact file paths, function names, and error messages.";

/// The split-turn prefix instructions.
pub const TURN_PREFIX_SUMMARIZATION_PROMPT: &str = "The messages above are earlier context from an ongoing conversation. Later messages are stored separately and do not need to be reconstructed.

Create a concise checkpoint of the user's request and the progress shown above. This checkpoint will be placed before the later messages so the conversation can continue with the necessary context.

## Original Request
[What did the user ask for?]

## Progress So Far
- [Key decisions and work completed in these messages]

## Context Needed to Continue
- [Information from these messages needed to understand the later work]

Only summarize information explicitly present above. Do not infer or recreate later messages.";

/// The history prompt text (`generateSummaryWithUsage`).
pub fn history_prompt(
    conversation: &str,
    previous_summary: Option<&str>,
    custom: Option<&str>,
) -> String {
    let mut base = if previous_summary.is_some() {
        UPDATE_SUMMARIZATION_PROMPT
    } else {
        SUMMARIZATION_PROMPT
    }
    .to_owned();
    if let Some(c) = custom.filter(|c| !c.is_empty()) {
        base = format!("{base}\n\nAdditional focus: {c}");
    }
    let mut text = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    if let Some(p) = previous_summary {
        text += &format!("<previous-summary>\n{p}\n</previous-summary>\n\n");
    }
    text + &base
}

/// The split-turn prefix prompt text (`generateTurnPrefixSummary`).
pub fn turn_prefix_prompt(conversation: &str, custom: Option<&str>) -> String {
    let text = format!(
        "# Conversation\n{conversation}\n\n# Instructions\n{TURN_PREFIX_SUMMARIZATION_PROMPT}"
    );
    match custom.filter(|c| !c.is_empty()) {
        Some(c) => format!("{text}\n\nAdditional focus: {c}"),
        None => text,
    }
}
