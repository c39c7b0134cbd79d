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

/// What the cut-point algorithm and the recovery-omission rule need to know about one
/// projected entry: computed from the entry and its projected messages, so the algorithm runs
/// the same over entries held in memory and over entries streamed from a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutFacts {
    /// The entry is a `compaction`.
    pub compaction: bool,
    /// Not a compaction, and one of its messages is a cut point.
    pub cut_point: bool,
    /// Not a compaction, and one of its messages starts a turn.
    pub turn_start: bool,
    /// The sum of its messages' estimates.
    pub tokens: u64,
    /// It has projected messages.
    pub has_messages: bool,
    /// Not a compaction: how many of its messages are not system messages (what
    /// `messagesToSummarize` takes from it).
    pub summarisable: u32,
    /// A `message` entry whose message is an assistant's.
    pub assistant_message: bool,
    /// Visible: not a context edit, and has messages before projection.
    pub visible: bool,
    /// Visible but without projected messages (hidden by a context edit): `Some(its string
    /// id)`.
    pub omitted_id: Option<Option<Box<str>>>,
    /// A `context_edit` whose `replacement` is not `null`: `Some(its string targetId)`.
    pub replacement_target: Option<Option<Box<str>>>,
}

impl CutFacts {
    /// The facts of `entry` whose projected messages are `messages`.
    pub fn of(entry: &Value, messages: &[Msg<'_>]) -> Self {
        let compaction = type_of(entry) == Some("compaction");
        let context_edit = type_of(entry) == Some("context_edit");
        let has_messages = !messages.is_empty();
        let visible = !context_edit && !entry_messages(entry).is_empty();
        let as_box = |v: Option<&Value>| v.and_then(Value::as_str).map(Box::from);
        Self {
            compaction,
            cut_point: !compaction && messages.iter().any(|m| is_cut_point_message(m)),
            turn_start: !compaction && messages.iter().any(|m| is_turn_start_message(m)),
            tokens: messages.iter().map(|m| estimate_tokens(m)).sum(),
            has_messages,
            summarisable: if compaction {
                0
            } else {
                let n = messages
                    .iter()
                    .filter(|m| role(m) != Some("system"))
                    .count();
                u32::try_from(n).unwrap_or(u32::MAX)
            },
            assistant_message: type_of(entry) == Some("message")
                && entry.get("message").and_then(role) == Some("assistant"),
            visible,
            omitted_id: (visible && !has_messages).then(|| as_box(entry.get("id"))),
            replacement_target: (context_edit && entry.get("replacement") != Some(&Value::Null))
                .then(|| as_box(entry.get("targetId"))),
        }
    }

    /// The facts of every projected entry.
    pub fn of_projected(entries: &[ProjectedEntry<'_>]) -> Vec<Self> {
        entries
            .iter()
            .map(|e| Self::of(e.entry, &e.messages))
            .collect()
    }
}

/// The cut-point algorithm over entries' facts; `recovery` enables the recovery-omission rule
/// (projected form only).
pub fn cut_point(
    facts: &[CutFacts],
    start: usize,
    end: usize,
    keep: f64,
    recovery: bool,
) -> CutPoint {
    let cut_points: Vec<usize> = (start..end).filter(|&i| facts[i].cut_point).collect();
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
        let t = facts[i].tokens;
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
    if recovery && exceeded && recovery_omission_suffix(&facts[(cut + 1).min(end)..end]) {
        cut += 1;
    }
    while cut > start {
        let prev = &facts[cut - 1];
        if prev.compaction || prev.has_messages {
            break;
        }
        cut -= 1;
    }
    let starts_turn = facts.get(cut).is_some_and(|f| f.turn_start);
    let turn_start = if starts_turn {
        None
    } else {
        (start..=cut.min(facts.len().saturating_sub(1)))
            .rev()
            .find(|&i| facts[i].turn_start)
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index: turn_start,
        is_split_turn: !starts_turn && turn_start.is_some(),
    }
}

/// The recovery-omission rule: the suffix after the cut is closed and holds an assistant
/// attempt hidden by a context edit.
fn recovery_omission_suffix(suffix: &[CutFacts]) -> bool {
    let omitted_ids: HashSet<Option<&str>> = suffix
        .iter()
        .filter_map(|f| f.omitted_id.as_ref().map(Option::as_deref))
        .collect();
    let external_replacement = suffix.iter().any(|f| {
        f.replacement_target
            .as_ref()
            .is_some_and(|t| !omitted_ids.contains(&t.as_deref()))
    });
    !external_replacement
        && suffix
            .iter()
            .any(|f| f.assistant_message && f.omitted_id.is_some())
        && suffix
            .iter()
            .all(|f| !f.compaction && (!f.visible || !f.has_messages))
}

/// pi's `findProjectedCutPoint` over projected entries `[start, end)`.
pub fn find_projected_cut_point(
    entries: &[ProjectedEntry<'_>],
    start: usize,
    end: usize,
    keep: f64,
) -> CutPoint {
    cut_point(&CutFacts::of_projected(entries), start, end, keep, true)
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
    cut_point(&CutFacts::of_projected(&raw), start, end, keep, false)
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

/// What `prepareCompaction` decides from the projected entries' facts alone: the boundary,
/// the cut, and which projected entries give `messagesToSummarize` and `turnPrefixMessages`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutPlan {
    /// Position of the previous compaction (the first compaction with messages), if any.
    pub previous: Option<usize>,
    /// The cut.
    pub cut: CutPoint,
    /// Positions whose messages are summarised (may be empty).
    pub history: std::ops::Range<usize>,
    /// Positions of the split turn's prefix (empty unless split).
    pub turn_prefix: std::ops::Range<usize>,
}

impl CutPlan {
    /// Plans the cut over the facts of a whole projection, or says why there is nothing to
    /// prepare (`AlreadyCompacted` is the caller's: it depends on the path's last entry).
    pub fn new(facts: &[CutFacts], keep: f64) -> Result<Self, NoCompaction> {
        let previous = facts.iter().position(|f| f.compaction && f.has_messages);
        let boundary_start = previous.map_or(0, |i| i + 1);
        let cut = cut_point(facts, boundary_start, facts.len(), keep, true);
        if cut.first_kept_entry_index >= facts.len() {
            return Err(NoCompaction::NothingToCompact);
        }
        let history_end = match cut.turn_start_index {
            Some(t) if cut.is_split_turn => t,
            _ => cut.first_kept_entry_index,
        };
        let history = boundary_start..history_end.max(boundary_start);
        let turn_prefix = match cut.turn_start_index {
            Some(t) if cut.is_split_turn => t..cut.first_kept_entry_index,
            _ => 0..0,
        };
        let summarisable =
            |r: &std::ops::Range<usize>| facts[r.clone()].iter().any(|f| f.summarisable > 0);
        if !summarisable(&history) && !summarisable(&turn_prefix) {
            return Err(NoCompaction::NothingToCompact);
        }
        Ok(Self {
            previous,
            cut,
            history,
            turn_prefix,
        })
    }
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
    let plan = CutPlan::new(&CutFacts::of_projected(pe), settings.keep_recent_tokens)?;
    let Some(first_kept_entry_id) = pe
        .get(plan.cut.first_kept_entry_index)
        .and_then(|e| e.entry.get("id"))
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
    else {
        return Err(NoCompaction::NothingToCompact);
    };
    let previous_summary = plan
        .previous
        .and_then(|i| pe[i].entry.get("summary").cloned());
    let tokens_before = estimate_projected_context_tokens(&projection, path).tokens;
    let messages_to_summarize = for_compaction(&pe[plan.history.clone()]);
    let turn_prefix_messages = for_compaction(&pe[plan.turn_prefix.clone()]);
    let mut file_ops = FileOps::default();
    if let Some(d) = plan.previous.and_then(|p| inherited_details(pe[p].entry)) {
        file_ops.add_details(d);
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_message(m);
    }
    Ok(CompactionPreparation {
        first_kept_entry_id,
        first_kept_projected_index: plan.cut.first_kept_entry_index,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: plan.cut.is_split_turn,
        tokens_before,
        previous_summary,
        file_ops,
        settings,
        projection,
    })
}

/// The `details` of the previous compaction whose file operations a new one inherits: none
/// when it came from a hook or has no truthy `details`.
pub fn inherited_details(compaction: &Value) -> Option<&Value> {
    if super::js::truthy(compaction.get("fromHook")) {
        return None;
    }
    compaction
        .get("details")
        .filter(|d| super::js::truthy(Some(d)))
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
