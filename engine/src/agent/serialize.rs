//! The conversation as text for the summariser (pi's `serializeConversation`).
//!
//! Invariants:
//! - input is the LLM view (after [`super::project::convert_to_llm`]); parts are joined by a
//!   blank line; thinking, system messages and unknown roles are omitted;
//! - a tool result longer than 2000 UTF-16 units keeps its first 2000 units (one fewer when
//!   that would split a surrogate pair) and says how many units were cut.

use super::js::{len16, slice_head16};
use super::project::content_text;
use serde_json::Value;

/// Longest tool result kept, in UTF-16 code units.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

fn truncate_for_summary(text: &str, max: usize) -> String {
    let n = len16(text);
    if n <= max {
        return text.to_owned();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        slice_head16(text, max),
        n - max
    )
}

fn tool_call_text(block: &Value) -> String {
    let args: Vec<String> = match block.get("arguments") {
        Some(Value::Object(a)) => a
            .iter()
            .map(|(k, v)| format!("{k}={}", pisess_formats::js::to_string(v)))
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(k, v)| format!("{k}={}", pisess_formats::js::to_string(v)))
            .collect(),
        _ => Vec::new(),
    };
    format!(
        "{}({})",
        super::js::to_js_string(block.get("name")),
        args.join(", ")
    )
}

/// pi's `serializeConversation(messages)`.
pub fn serialize_conversation<'v>(messages: impl IntoIterator<Item = &'v Value>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for m in messages {
        match m.get("role").and_then(Value::as_str) {
            Some("user") => {
                let c = content_text(m.get("content"), "");
                if !c.is_empty() {
                    parts.push(format!("[User]: {c}"));
                }
            }
            Some("assistant") => {
                let blocks = m
                    .get("content")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice);
                let is = |b: &Value, t: &str| b.get("type").and_then(Value::as_str) == Some(t);
                let calls: Vec<String> = blocks
                    .iter()
                    .filter(|b| is(b, "toolCall"))
                    .map(tool_call_text)
                    .collect();
                if blocks.iter().any(|b| is(b, "text")) {
                    parts.push(format!(
                        "[Assistant]: {}",
                        content_text(m.get("content"), "\n")
                    ));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("toolResult") => {
                let c = content_text(m.get("content"), "");
                if !c.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&c, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}
