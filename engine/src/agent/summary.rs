//! Producing the summaries pi asks a model for, without a network: through a caller-supplied
//! summariser (given pi's exact prompt, it returns the text pi would take from the model) or
//! an extractive default.
//!
//! Invariants:
//! - with a summariser, the calls are pi's (`compact()`, `generateBranchSummary`): for a split
//!   turn with history, one call for the history (first or update prompt) and one for the turn
//!   prefix; without history only the prefix; otherwise one history call; a branch summary is
//!   one call, and none when there is nothing to summarise ("No content to summarize");
//! - the stored text and `details` are pi's: the file-list suffix, the branch preamble;
//! - the extractive default is deterministic (same messages, same text), uses pi's six
//!   sections, and says on its first line that no model wrote it.

use serde_json::{Value, json};

use super::branch::BranchPreparation;
use super::compaction::CompactionPreparation;
use super::fileops::{compute_file_lists, format_file_operations};
use super::project::content_text;

/// The first line of every extractive summary.
pub const EXTRACTIVE_MARK: &str =
    "(Extractive summary written by pisess without a model: the sections quote the conversation.)";

/// pi's preamble of a branch summary's text.
pub const BRANCH_SUMMARY_PREAMBLE: &str = "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n";

/// How a summary is made: `Some(f)` calls `f(prompt)` for each model call pi would make;
/// `None` writes the extractive summary.
pub type Summarizer<'f, E> = Option<&'f mut dyn FnMut(&str) -> Result<String, E>>;

/// The stored compaction summary and its `details`, as pi's `compact()` makes them.
pub fn compaction_summary<E>(
    prep: &CompactionPreparation<'_>,
    summarizer: Summarizer<'_, E>,
) -> Result<(String, Value), E> {
    let Some(run) = summarizer else {
        let mut msgs: Vec<&Value> = prep
            .messages_to_summarize
            .iter()
            .map(AsRef::as_ref)
            .collect();
        msgs.extend(prep.turn_prefix_messages.iter().map(AsRef::as_ref));
        let prev = prep.previous_summary.as_ref().and_then(Value::as_str);
        let (read, modified) = compute_file_lists(&prep.file_ops);
        let text = extractive_summary(&msgs, prev, &read, &modified);
        return Ok(prep.stored_summary(Some(&text), None));
    };
    if prep.is_split_turn && !prep.turn_prefix_messages.is_empty() {
        let history = if prep.messages_to_summarize.is_empty() {
            None
        } else {
            Some(run(&prep.history_prompt(None))?)
        };
        let prefix = run(&prep.turn_prefix_prompt(None))?;
        Ok(prep.stored_summary(history.as_deref(), Some(&prefix)))
    } else {
        let history = run(&prep.history_prompt(None))?;
        Ok(prep.stored_summary(Some(&history), None))
    }
}

/// The stored branch summary and its `details` (`generateBranchSummary` and `/tree`'s
/// `{readFiles, modifiedFiles}`).
pub fn branch_summary<E>(
    prep: &BranchPreparation<'_>,
    summarizer: Summarizer<'_, E>,
) -> Result<(String, Value), E> {
    let (read, modified) = compute_file_lists(&prep.file_ops);
    let details = json!({"readFiles": read, "modifiedFiles": modified});
    if prep.messages.is_empty() {
        return Ok((
            "No content to summarize".to_owned(),
            json!({"readFiles": [], "modifiedFiles": []}),
        ));
    }
    let text = match summarizer {
        Some(run) => run(&super::branch::branch_summary_prompt(
            &prep.serialized(),
            None,
            false,
        ))?,
        None => {
            let msgs: Vec<&Value> = prep.messages.iter().map(AsRef::as_ref).collect();
            extractive_summary(&msgs, None, &read, &modified)
        }
    };
    let summary = format!(
        "{BRANCH_SUMMARY_PREAMBLE}{text}{}",
        format_file_operations(&read, &modified)
    );
    Ok((summary, details))
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// The first non-empty line of a text, trimmed and cut to `max` characters.
fn gist(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= max {
        line.to_owned()
    } else {
        let mut s: String = line.chars().take(max).collect();
        s.push('…');
        s
    }
}

/// The lines of a previous summary's `## Goal` section.
fn previous_goal(prev: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for l in prev.lines() {
        if l.starts_with("## ") {
            inside = l.trim() == "## Goal";
            continue;
        }
        if inside && !l.trim().is_empty() {
            out.push(l.trim().trim_start_matches("- ").to_owned());
        }
    }
    out
}

/// A deterministic summary in pi's six sections: the goal from the user messages (and the
/// previous summary's goal), files from the file operations, the last assistant text as the
/// work in progress, the last user request as the next step.
pub fn extractive_summary(
    messages: &[&Value],
    previous: Option<&str>,
    read: &[String],
    modified: &[String],
) -> String {
    const MAX_GOALS: usize = 12;
    let mut goals: Vec<String> = previous.map(previous_goal).unwrap_or_default();
    // The goals listed so far, to keep each once (a list scan per message made a branch of
    // 100,000 distinct user messages quadratic: 9 s for `compact`).
    let mut listed: std::collections::HashSet<String> = goals.iter().cloned().collect();
    let mut last_user = None;
    let mut last_assistant = None;
    for m in messages {
        match role(m) {
            "user" => {
                let g = gist(&content_text(m.get("content"), ""), 200);
                if !g.is_empty() {
                    if listed.insert(g.clone()) {
                        goals.push(g.clone());
                    }
                    last_user = Some(g);
                }
            }
            "assistant" => {
                let g = gist(&content_text(m.get("content"), "\n"), 300);
                if !g.is_empty() {
                    last_assistant = Some(g);
                }
            }
            _ => {}
        }
    }
    if goals.len() > MAX_GOALS {
        goals.drain(..goals.len() - MAX_GOALS);
    }
    let list = |items: &[String], prefix: &str, none: &str| -> String {
        if items.is_empty() {
            format!("{prefix}{none}")
        } else {
            items
                .iter()
                .map(|i| format!("{prefix}{i}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
    };
    let mut s = String::new();
    s.push_str(EXTRACTIVE_MARK);
    s.push_str("\n\n## Goal\n");
    s.push_str(&list(
        &goals,
        "- ",
        "(no user request in the summarised messages)",
    ));
    s.push_str("\n\n## Constraints & Preferences\n- (none recorded: not inferred without a model)");
    s.push_str("\n\n## Progress\n### Done\n");
    let done: Vec<String> = modified.iter().map(|f| format!("changed {f}")).collect();
    s.push_str(&list(&done, "- [x] ", "(no file changed)"));
    s.push_str("\n\n### In Progress\n");
    s.push_str(&format!(
        "- [ ] {}",
        last_assistant.as_deref().unwrap_or("(no assistant text)")
    ));
    s.push_str("\n\n### Blocked\n- (none recorded)");
    s.push_str("\n\n## Key Decisions\n- (none recorded: not inferred without a model)");
    s.push_str("\n\n## Next Steps\n");
    s.push_str(&format!(
        "1. Continue with the last request: {}",
        last_user.as_deref().unwrap_or("(none)")
    ));
    s.push_str("\n\n## Critical Context\n");
    let files: Vec<String> = read.iter().map(|f| format!("read {f}")).collect();
    s.push_str(&list(&files, "- ", "(none)"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extractive_summary_has_pis_six_sections_and_is_marked() {
        let u = json!({"role": "user", "content": "Fix the cache\nplease"});
        let a = json!({"role": "assistant", "content": [{"type": "text", "text": "Looking at src/cache.rs"}]});
        let s = extractive_summary(&[&u, &a], None, &["a.rs".into()], &["b.rs".into()]);
        assert!(s.starts_with(EXTRACTIVE_MARK));
        for h in [
            "## Goal\n- Fix the cache",
            "## Constraints & Preferences",
            "## Progress\n### Done\n- [x] changed b.rs",
            "### In Progress\n- [ ] Looking at src/cache.rs",
            "## Key Decisions",
            "## Next Steps\n1. Continue with the last request: Fix the cache",
            "## Critical Context\n- read a.rs",
        ] {
            assert!(s.contains(h), "{h} missing in\n{s}");
        }
        let again = extractive_summary(&[&u, &a], None, &["a.rs".into()], &["b.rs".into()]);
        assert_eq!(s, again);
        let next = extractive_summary(&[&u], Some(&s), &[], &[]);
        assert_eq!(next.matches("- Fix the cache").count(), 1);
    }
}
