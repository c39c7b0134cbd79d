//! Token estimates (pi's `estimateTokens`, `estimateContextTokens`,
//! `estimateProjectedContextTokens`, `shouldCompact`).
//!
//! Invariants:
//! - a message's estimate is `ceil(chars / 4)` with chars in UTF-16 code units, an image block
//!   counting 4800 chars and a tool call `name.length + JSON.stringify(arguments).length`;
//! - usage numbers are JavaScript numbers (`f64`), combined in pi's order.

use super::js::{len16, truthy};
use super::path::type_of;
use super::project::{Projection, current_system_message};
use serde_json::{Value, json};

const IMAGE_CHARS: usize = 4800;

/// Compaction settings (pi's `CompactionSettings`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionSettings {
    /// Whether auto-compaction is on.
    pub enabled: bool,
    /// Tokens kept free for the prompt and the reply.
    pub reserve_tokens: f64,
    /// Tokens of recent context kept verbatim.
    pub keep_recent_tokens: f64,
}

impl Default for CompactionSettings {
    /// pi's `DEFAULT_COMPACTION_SETTINGS`: enabled, reserve 16384, keep 20000.
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: 16384.0,
            keep_recent_tokens: 20000.0,
        }
    }
}

fn str_len(v: Option<&Value>) -> usize {
    v.and_then(Value::as_str).map_or(0, len16)
}

fn text_and_image_chars(content: Option<&Value>) -> usize {
    match content {
        Some(Value::String(s)) => len16(s),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("type").and_then(Value::as_str) {
                Some("text") => str_len(b.get("text")),
                Some("image") => IMAGE_CHARS,
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

/// `JSON.stringify(v).length`.
pub fn json_len16(v: &Value) -> usize {
    len16(&pisess_formats::js::to_string(v))
}

/// pi's `estimateTokens(message)`.
pub fn estimate_tokens(m: &Value) -> u64 {
    let chars = match m.get("role").and_then(Value::as_str) {
        Some("system") => {
            let mut c = text_and_image_chars(m.get("content"));
            if let Some(Value::Object(s)) = m.get("sections") {
                c += s.values().map(|v| str_len(Some(v))).sum::<usize>();
            }
            if let Some(t) = m.get("toolsAdded").filter(|t| truthy(Some(t))) {
                c += json_len16(t);
            }
            c
        }
        Some("user" | "custom" | "toolResult") => text_and_image_chars(m.get("content")),
        Some("assistant") => match m.get("content") {
            Some(Value::Array(blocks)) => blocks
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => str_len(b.get("text")),
                    Some("thinking") => str_len(b.get("thinking")),
                    Some("toolCall") => {
                        str_len(b.get("name")) + b.get("arguments").map_or(0, json_len16)
                    }
                    _ => 0,
                })
                .sum(),
            _ => 0,
        },
        Some("bashExecution") => str_len(m.get("command")) + str_len(m.get("output")),
        Some("branchSummary" | "compactionSummary") => str_len(m.get("summary")),
        _ => 0,
    };
    (chars as u64).div_ceil(4)
}

/// pi's `calculateContextTokens(usage)`.
/// (`u.totalTokens || u.input + u.output + u.cacheRead + u.cacheWrite`: a `null` field adds 0,
/// `true` 1, as JavaScript's `+` has it.)
pub fn context_tokens_of_usage(u: &Value) -> f64 {
    use super::js::plus_operand;
    let total = plus_operand(u.get("totalTokens"));
    if total != 0.0 && !total.is_nan() {
        return total;
    }
    plus_operand(u.get("input"))
        + plus_operand(u.get("output"))
        + plus_operand(u.get("cacheRead"))
        + plus_operand(u.get("cacheWrite"))
}

/// The usage of an assistant message when pi trusts it (not aborted/error, positive).
pub fn assistant_usage(m: &Value) -> Option<&Value> {
    if m.get("role").and_then(Value::as_str) != Some("assistant") {
        return None;
    }
    let stop = m.get("stopReason").and_then(Value::as_str);
    if matches!(stop, Some("aborted" | "error")) {
        return None;
    }
    let u = m.get("usage").filter(|u| truthy(Some(u)))?;
    (context_tokens_of_usage(u) > 0.0).then_some(u)
}

/// pi's `ContextUsageEstimate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextEstimate {
    /// Estimated context tokens.
    pub tokens: f64,
    /// Tokens reported by the last valid usage (0 without one).
    pub usage_tokens: f64,
    /// Estimated tokens of the messages after it.
    pub trailing_tokens: f64,
    /// Index of the message carrying that usage.
    pub last_usage_index: Option<usize>,
}

impl ContextEstimate {
    /// As pi's object: `{tokens, usageTokens, trailingTokens, lastUsageIndex}`.
    pub fn to_json(&self) -> Value {
        json!({
            "tokens": super::js::num(self.tokens),
            "usageTokens": super::js::num(self.usage_tokens),
            "trailingTokens": super::js::num(self.trailing_tokens),
            "lastUsageIndex": self.last_usage_index,
        })
    }
}

/// pi's `estimateContextTokens(messages)`.
pub fn estimate_context_tokens<'v>(
    messages: impl IntoIterator<Item = &'v Value>,
) -> ContextEstimate {
    let messages: Vec<&Value> = messages.into_iter().collect();
    let last = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| assistant_usage(m).map(|u| (i, u)));
    let sum = |ms: &[&Value]| ms.iter().map(|m| estimate_tokens(m) as f64).sum::<f64>();
    match last {
        None => {
            let t = sum(&messages);
            ContextEstimate {
                tokens: t,
                usage_tokens: 0.0,
                trailing_tokens: t,
                last_usage_index: None,
            }
        }
        Some((i, u)) => {
            let usage = context_tokens_of_usage(u);
            let trailing = sum(&messages[i + 1..]);
            ContextEstimate {
                tokens: usage + trailing,
                usage_tokens: usage,
                trailing_tokens: trailing,
                last_usage_index: Some(i),
            }
        }
    }
}

/// pi's `estimateProjectedContextTokens(projection, branchEntries)`: the usage-based value only
/// when its entry lies after the latest `context_edit`/`compaction` of the raw path; else the
/// replayed system message plus every non-system message, by estimate.
pub fn estimate_projected_context_tokens(
    projection: &Projection<'_>,
    path: &[&Value],
) -> ContextEstimate {
    let estimate = estimate_context_tokens(projection.messages());
    if let Some(last) = estimate.last_usage_index {
        let mut start = 0;
        let mut usage_entry = None;
        for e in &projection.entries {
            let next = start + e.messages.len();
            if last < next {
                usage_entry = Some(e.entry);
                break;
            }
            start = next;
        }
        let usage_id = usage_entry
            .and_then(|e| e.get("id"))
            .filter(|id| truthy(Some(id)));
        let usage_idx = usage_id.and_then(|id| path.iter().position(|e| e.get("id") == Some(id)));
        let invalidating = path
            .iter()
            .rposition(|e| matches!(type_of(e), Some("context_edit" | "compaction")));
        let after = match (usage_idx, invalidating) {
            (Some(u), Some(i)) => u > i,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if after {
            return estimate;
        }
    }
    let mut tokens =
        current_system_message(projection.messages()).map_or(0, |s| estimate_tokens(&s)) as f64;
    tokens += projection
        .messages()
        .filter(|m| m.get("role").and_then(Value::as_str) != Some("system"))
        .map(|m| estimate_tokens(m) as f64)
        .sum::<f64>();
    ContextEstimate {
        tokens,
        usage_tokens: 0.0,
        trailing_tokens: tokens,
        last_usage_index: None,
    }
}

/// pi's `shouldCompact(contextTokens, contextWindow, settings)`.
pub fn should_compact(context_tokens: f64, context_window: f64, s: &CompactionSettings) -> bool {
    s.enabled && context_tokens > context_window - s.reserve_tokens
}
