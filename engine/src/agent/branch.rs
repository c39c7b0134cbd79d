//! Branch-summary collection (pi's `collectEntriesForBranchSummary`, `prepareBranchEntries`).
//!
//! Invariants:
//! - the common ancestor is the deepest entry of the target's path that is on the old leaf's
//!   path; the collected entries are the old leaf's path after it, oldest first;
//! - preparation walks newest to oldest, adding each message's file operations before its
//!   tokens are checked against the budget (so file lists cover one message past the budget);
//!   tool results are skipped; summaries may overshoot the budget while under 90 % of it.

use super::fileops::FileOps;
use super::js::truthy;
use super::path::{id_of, type_of};
use super::project::{
    Msg, branch_summary_message, compaction_summary_message, convert_to_llm, custom_message,
    project_entry,
};
use super::serialize::serialize_conversation;
use super::tokens::estimate_tokens;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

/// The entries to summarise when leaving `old_path`'s leaf for `target_path`'s leaf.
#[derive(Debug, Clone)]
pub struct BranchCollection<'a> {
    /// Id of the deepest common entry, if any.
    pub common_ancestor_id: Option<String>,
    /// The entries of the abandoned branch, oldest first.
    pub entries: Vec<&'a Value>,
}

/// pi's `collectEntriesForBranchSummary`, given the two paths as pi's `getBranch` returns them
/// (root first; empty for an unknown id). `old_path` empty means no old leaf.
pub fn collect_entries_for_branch_summary<'a>(
    old_path: &[&'a Value],
    target_path: &[&'a Value],
) -> BranchCollection<'a> {
    if old_path.is_empty() {
        return BranchCollection {
            common_ancestor_id: None,
            entries: Vec::new(),
        };
    }
    let old_ids: HashSet<&str> = old_path.iter().filter_map(|e| id_of(e)).collect();
    let ancestor = target_path
        .iter()
        .rev()
        .find_map(|e| id_of(e).filter(|id| old_ids.contains(id)));
    let start = match ancestor {
        Some(a) => old_path
            .iter()
            .rposition(|e| id_of(e) == Some(a))
            .map_or(0, |i| i + 1),
        None => 0,
    };
    BranchCollection {
        common_ancestor_id: ancestor.map(str::to_owned),
        entries: old_path[start..].to_vec(),
    }
}

/// pi's `BranchPreparation`.
#[derive(Debug, Clone)]
pub struct BranchPreparation<'a> {
    /// Messages to summarise, oldest first.
    pub messages: Vec<Msg<'a>>,
    /// File operations (including those seeded from earlier branch summaries).
    pub file_ops: FileOps,
    /// Sum of the messages' estimates.
    pub total_tokens: f64,
}

impl BranchPreparation<'_> {
    /// `serializeConversation(convertToLlm(messages))`.
    pub fn serialized(&self) -> String {
        let llm = convert_to_llm(self.messages.iter().map(AsRef::as_ref));
        serialize_conversation(llm.iter().map(AsRef::as_ref))
    }
}

/// The message pi summarises for an entry of the branch left (`getMessageFromEntry`): none
/// for tool results and entries without one, nor for a falsy `message` (`""`, `0`, `false`,
/// `null`: pi's `if (!message) continue`; on `null` pi itself throws); `edit` is the context
/// edit of the entry.
pub(crate) fn message_from_entry<'a>(entry: &'a Value, edit: Option<&Value>) -> Option<Msg<'a>> {
    match type_of(entry)? {
        "message" => {
            let m = entry.get("message").filter(|m| truthy(Some(m)))?;
            if m.get("role").and_then(Value::as_str) == Some("toolResult") {
                return None;
            }
            match edit {
                Some(_) => project_entry(entry, edit).into_iter().next(),
                None => Some(Cow::Borrowed(m)),
            }
        }
        "custom_message" => match edit {
            Some(_) => project_entry(entry, edit).into_iter().next(),
            None => Some(Cow::Owned(custom_message(entry, entry.get("content")))),
        },
        "branch_summary" => Some(Cow::Owned(branch_summary_message(entry))),
        "compaction" => Some(Cow::Owned(compaction_summary_message(entry))),
        _ => None,
    }
}

/// pi's `prepareBranchEntries(entries, tokenBudget)` (budget 0 = unlimited).
pub fn prepare_branch_entries<'a>(entries: &[&'a Value], budget: f64) -> BranchPreparation<'a> {
    let mut file_ops = FileOps::default();
    for e in entries {
        if type_of(e) == Some("branch_summary")
            && !truthy(e.get("fromHook"))
            && let Some(d) = e.get("details").filter(|d| truthy(Some(d)))
        {
            file_ops.add_details(d);
        }
    }
    let mut edits: HashMap<&str, &Value> = HashMap::new();
    for e in entries {
        if type_of(e) == Some("context_edit")
            && let Some(t) = e.get("targetId").and_then(Value::as_str)
        {
            edits.insert(t, e);
        }
    }
    let mut rev: Vec<Msg<'a>> = Vec::new();
    let mut total = 0.0;
    for &e in entries.iter().rev() {
        let edit = id_of(e).and_then(|id| edits.get(id).copied());
        let Some(m) = message_from_entry(e, edit) else {
            continue;
        };
        file_ops.add_message(&m);
        let t = estimate_tokens(&m) as f64;
        if budget > 0.0 && total + t > budget {
            if matches!(type_of(e), Some("compaction" | "branch_summary")) && total < budget * 0.9 {
                rev.push(m);
                total += t;
            }
            break;
        }
        rev.push(m);
        total += t;
    }
    rev.reverse();
    BranchPreparation {
        messages: rev,
        file_ops,
        total_tokens: total,
    }
}

/// The preamble pi puts before a branch summary.
pub const BRANCH_SUMMARY_PREAMBLE: &str = "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n";

/// The branch-summary instructions.
pub const BRANCH_SUMMARY_PROMPT: &str =
    "Create a structured summary of this conversation branch for context when returning later.

Use this EXACT format:

## Goal
[What was the user trying to accomplish in this branch?]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned]
- [Or \"(none)\" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Work that was started but not finished]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [What should happen next to continue this work]

Keep each section concise. Preserve exact file paths, function names, and error messages.";

/// The branch-summary prompt text (`generateBranchSummary`): `replace` uses the custom
/// instructions instead of pi's.
pub fn branch_summary_prompt(conversation: &str, custom: Option<&str>, replace: bool) -> String {
    let instructions = match custom.filter(|c| !c.is_empty()) {
        Some(c) if replace => c.to_owned(),
        Some(c) => format!("{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {c}"),
        None => BRANCH_SUMMARY_PROMPT.to_owned(),
    };
    format!("<conversation>\n{conversation}\n</conversation>\n\n{instructions}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// pi skips an entry whose `message` is falsy when it prepares a branch summary.
    #[test]
    fn a_falsy_message_is_not_summarised() {
        let e = |id: &str, m: Value| json!({"type": "message", "id": id, "message": m});
        let user = json!({"role": "user", "content": "hello", "timestamp": 1});
        let entries = [
            e("a", user.clone()),
            e("b", json!("")),
            e("c", json!(0)),
            e("d", json!(false)),
            e("f", Value::Null),
            e("g", user),
        ];
        let refs: Vec<&Value> = entries.iter().collect();
        let prep = prepare_branch_entries(&refs, 0.0);
        assert_eq!(prep.messages.len(), 2);
        assert!(prep.messages.iter().all(|m| m["role"] == "user"));
    }
}
