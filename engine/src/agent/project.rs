//! Context projection: what the model sees at the end of a path (pi's `buildSessionContext`,
//! `buildSessionProjection`, `buildContextEntries`, `getCurrentSystemMessage`, `convertToLlm`).
//!
//! Invariants:
//! - the path is given root first and is trusted (no cycle, ids unique along it);
//! - a message that pi passes through unchanged is borrowed from the entry; messages pi builds
//!   (summaries, custom messages, edited or defaulted content) are owned, with the keys in the
//!   order pi's object literals give them and `undefined` fields left out;
//! - the selected entries are the whole path without a compaction; with one, the latest
//!   compaction, the kept entries before it from `firstKeptEntryId` (system messages skipped)
//!   and every entry after it; only the compaction at index 0 projects messages;
//! - the latest `context_edit` among the selected entries wins for its target.

use super::js::{date_ms, nullish, truthy};
use super::path::{id_of, type_of};
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::collections::HashMap;

/// A message in context: borrowed from the session when pi uses it as stored, owned otherwise.
pub type Msg<'a> = Cow<'a, Value>;

/// One selected entry and the messages it contributes (pi's `ProjectedSessionEntry`).
#[derive(Debug, Clone)]
pub struct ProjectedEntry<'a> {
    /// The session entry.
    pub entry: &'a Value,
    /// Its messages after compaction and context edits.
    pub messages: Vec<Msg<'a>>,
}

/// The model context at the end of a path, with provenance.
#[derive(Debug, Clone)]
pub struct Projection<'a> {
    /// The selected entries, in context order, each with its messages.
    pub entries: Vec<ProjectedEntry<'a>>,
    /// The thinking level in force (`None` when a `thinking_level_change` left it undefined).
    pub thinking_level: Option<Value>,
    /// `null` or `{provider, modelId}`.
    pub model: Value,
}

impl<'a> Projection<'a> {
    /// All messages, in order (pi's `messages`).
    pub fn messages(&self) -> impl Iterator<Item = &Value> {
        self.entries
            .iter()
            .flat_map(|e| e.messages.iter().map(AsRef::as_ref))
    }

    /// The ids of the selected entries (`buildContextEntries(...).map(e => e.id)`; `null` for
    /// an entry without an id).
    pub fn context_entry_ids(&self) -> Vec<Value> {
        self.entries
            .iter()
            .map(|e| e.entry.get("id").cloned().unwrap_or(Value::Null))
            .collect()
    }

    /// pi's `buildSessionContext` as JSON: `{messages, thinkingLevel, model}`.
    pub fn context_json(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "messages".into(),
            Value::Array(self.messages().cloned().collect()),
        );
        if let Some(t) = &self.thinking_level {
            m.insert("thinkingLevel".into(), t.clone());
        }
        m.insert("model".into(), self.model.clone());
        Value::Object(m)
    }

    /// The replayed system message (`getCurrentSystemMessage(messages)`).
    pub fn system_message(&self) -> Option<Value> {
        current_system_message(self.messages())
    }

    /// The messages as the model receives them (`convertToLlm(messages)`).
    pub fn llm_messages(&self) -> Vec<Msg<'_>> {
        convert_to_llm(self.messages())
    }
}

fn role_of(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

fn is_message_role(e: &Value, role: &str) -> bool {
    type_of(e) == Some("message") && e.get("message").and_then(role_of) == Some(role)
}

/// `thinkingLevel` and `model` from the whole path (pi's `getSessionContextSettings`).
pub fn context_settings(path: &[&Value]) -> (Option<Value>, Value) {
    let mut thinking = Some(Value::String("off".into()));
    let mut model = Value::Null;
    let pair = |p: Option<&Value>, m: Option<&Value>| {
        let mut o = Map::new();
        if let Some(p) = p {
            o.insert("provider".into(), p.clone());
        }
        if let Some(m) = m {
            o.insert("modelId".into(), m.clone());
        }
        Value::Object(o)
    };
    for e in path {
        match type_of(e) {
            Some("thinking_level_change") => thinking = e.get("thinkingLevel").cloned(),
            Some("model_change") => model = pair(e.get("provider"), e.get("modelId")),
            Some("message") if is_message_role(e, "assistant") => {
                let m = &e["message"];
                model = pair(m.get("provider"), m.get("model"));
            }
            _ => {}
        }
    }
    (thinking, model)
}

/// `{role:"custom", customType, content, display, details, timestamp}` (pi's
/// `createCustomMessage`); `content` is taken as given (`None` = undefined).
pub fn custom_message(entry: &Value, content: Option<&Value>) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), "custom".into());
    for (k, v) in [
        ("customType", entry.get("customType")),
        ("content", content),
        ("display", entry.get("display")),
        ("details", entry.get("details")),
    ] {
        if let Some(v) = v {
            o.insert(k.into(), v.clone());
        }
    }
    o.insert("timestamp".into(), date_ms(entry.get("timestamp")));
    Value::Object(o)
}

/// `{role:"branchSummary", summary, fromId, timestamp}`.
pub fn branch_summary_message(entry: &Value) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), "branchSummary".into());
    for k in ["summary", "fromId"] {
        if let Some(v) = entry.get(k) {
            o.insert(k.into(), v.clone());
        }
    }
    o.insert("timestamp".into(), date_ms(entry.get("timestamp")));
    Value::Object(o)
}

/// `{role:"compactionSummary", summary, tokensBefore, timestamp}`.
pub fn compaction_summary_message(entry: &Value) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), "compactionSummary".into());
    for k in ["summary", "tokensBefore"] {
        if let Some(v) = entry.get(k) {
            o.insert(k.into(), v.clone());
        }
    }
    o.insert("timestamp".into(), date_ms(entry.get("timestamp")));
    Value::Object(o)
}

fn with_content(message: &Value, content: Option<Value>) -> Value {
    let mut m = message.as_object().cloned().unwrap_or_default();
    match content {
        Some(c) => {
            m.insert("content".into(), c);
        }
        None => {
            m.shift_remove("content");
        }
    }
    Value::Object(m)
}

/// The messages an entry contributes before context edits (pi's
/// `sessionEntryToContextMessages`).
pub fn entry_messages(entry: &Value) -> Vec<Msg<'_>> {
    match type_of(entry) {
        Some("message") => {
            let Some(m) = entry.get("message") else {
                return Vec::new();
            };
            let content_missing = nullish(m.get("content"));
            match role_of(m) {
                Some("system") if content_missing => {
                    vec![Cow::Owned(with_content(
                        m,
                        Some(Value::String(String::new())),
                    ))]
                }
                Some("user" | "assistant" | "toolResult") if content_missing => {
                    vec![Cow::Owned(with_content(m, Some(json!([]))))]
                }
                _ => vec![Cow::Borrowed(m)],
            }
        }
        Some("custom_message") => {
            let content = entry.get("content").filter(|c| !c.is_null()).cloned();
            vec![Cow::Owned(custom_message(
                entry,
                Some(&content.unwrap_or_else(|| json!([]))),
            ))]
        }
        Some("branch_summary") if truthy(entry.get("summary")) => {
            vec![Cow::Owned(branch_summary_message(entry))]
        }
        Some("compaction") => {
            let summary = Cow::Owned(compaction_summary_message(entry));
            match entry.get("systemMessage").filter(|s| truthy(Some(s))) {
                Some(s) => vec![Cow::Borrowed(s), summary],
                None => vec![summary],
            }
        }
        _ => Vec::new(),
    }
}

/// An entry's messages with its context edit applied (pi's `projectContextEntry`).
pub fn project_entry<'a>(entry: &'a Value, edit: Option<&Value>) -> Vec<Msg<'a>> {
    let messages = entry_messages(entry);
    let Some(edit) = edit else {
        return messages;
    };
    let replacement = edit.get("replacement");
    if replacement == Some(&Value::Null) {
        return Vec::new();
    }
    let content = replacement.and_then(|r| r.get("content"));
    messages
        .into_iter()
        .map(|m| match role_of(&m) {
            Some(role @ ("user" | "assistant" | "toolResult" | "custom")) => {
                let c = match content {
                    Some(Value::String(s)) if role == "assistant" || role == "toolResult" => {
                        Some(json!([{"type": "text", "text": s}]))
                    }
                    c => c.cloned(),
                };
                Cow::Owned(with_content(&m, c))
            }
            _ => m,
        })
        .collect()
}

/// The selected entries (pi's `buildContextEntries` on a path).
pub fn context_entries<'a>(path: &[&'a Value]) -> Vec<&'a Value> {
    let Some(ci) = path.iter().rposition(|e| type_of(e) == Some("compaction")) else {
        return path.to_vec();
    };
    let compaction = path[ci];
    let first_kept = compaction.get("firstKeptEntryId");
    let mut out = vec![compaction];
    let mut found = false;
    for e in &path[..ci] {
        if e.get("id") == first_kept {
            found = true;
        }
        if found && !is_message_role(e, "system") {
            out.push(e);
        }
    }
    out.extend_from_slice(&path[ci + 1..]);
    out
}

/// The projection at the end of `path` (pi's `buildSessionProjection` with the path's leaf).
pub fn project<'a>(path: &[&'a Value]) -> Projection<'a> {
    let (thinking_level, model) = context_settings(path);
    let selected = context_entries(path);
    let mut edits: HashMap<&str, &Value> = HashMap::new();
    for e in &selected {
        if type_of(e) == Some("context_edit")
            && let Some(t) = e.get("targetId").and_then(Value::as_str)
        {
            edits.insert(t, e);
        }
    }
    let entries = selected
        .iter()
        .enumerate()
        .map(|(i, &entry)| ProjectedEntry {
            entry,
            messages: if i > 0 && type_of(entry) == Some("compaction") {
                Vec::new()
            } else {
                project_entry(entry, id_of(entry).and_then(|id| edits.get(id).copied()))
            },
        })
        .collect();
    Projection {
        entries,
        thinking_level,
        model,
    }
}

/// `contentText(content, sep)`: a string as is, else the `text` of text blocks joined by `sep`.
pub fn content_text(content: Option<&Value>, sep: &str) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .map(|b| {
                let t = b.get("text");
                if nullish(t) {
                    String::new()
                } else {
                    super::js::to_js_string(t)
                }
            })
            .collect::<Vec<_>>()
            .join(sep),
        _ => String::new(),
    }
}

/// pi-ai's `getCurrentSystemMessage`: every system message replayed into one (content texts
/// joined by a blank line, sections patched by name, tools resolved by name), or `None` when
/// there is no system message and no tool.
pub fn current_system_message<'v>(messages: impl Iterator<Item = &'v Value>) -> Option<Value> {
    // `timestamp ??= message.timestamp`: None = undefined, Some(Null) = null.
    let mut timestamp: Option<Value> = None;
    let mut content: Vec<String> = Vec::new();
    let mut sections = Map::new();
    let mut tools = Map::new(); // keyed by the JSON text of the name; insertion order kept
    for m in messages {
        if role_of(m) != Some("system") {
            continue;
        }
        if nullish(timestamp.as_ref()) {
            timestamp = m.get("timestamp").cloned();
        }
        let text = content_text(m.get("content"), "\n");
        if !text.is_empty() {
            content.push(text);
        }
        if let Some(Value::Object(s)) = m.get("sections") {
            for (name, value) in s {
                if value.is_null() {
                    sections.shift_remove(name);
                } else {
                    sections.insert(name.clone(), value.clone());
                }
            }
        }
        let key = |t: &Value| {
            t.get("name")
                .map_or("undefined".to_owned(), pisess_formats::js::to_string)
        };
        if let Some(Value::Array(removed)) = m.get("toolsRemoved") {
            for t in removed {
                tools.shift_remove(&key(t));
            }
        }
        if let Some(Value::Array(added)) = m.get("toolsAdded") {
            for t in added {
                tools.insert(key(t), t.clone());
            }
        }
    }
    if timestamp.is_none() && tools.is_empty() {
        return None;
    }
    let mut o = Map::new();
    o.insert("role".into(), "system".into());
    o.insert("content".into(), Value::String(content.join("\n\n")));
    if !sections.is_empty() {
        o.insert("sections".into(), Value::Object(sections));
    }
    if !tools.is_empty() {
        o.insert(
            "toolsAdded".into(),
            Value::Array(tools.into_iter().map(|(_, t)| t).collect()),
        );
    }
    o.insert(
        "timestamp".into(),
        timestamp
            .filter(|t| !t.is_null())
            .unwrap_or_else(|| json!(0)),
    );
    Some(Value::Object(o))
}

/// pi's `bashExecutionToText`.
pub fn bash_execution_text(m: &Value) -> String {
    use super::js::to_js_string;
    let mut text = format!("Ran `{}`\n", to_js_string(m.get("command")));
    if truthy(m.get("output")) {
        text += &format!("```\n{}\n```", to_js_string(m.get("output")));
    } else {
        text += "(no output)";
    }
    let exit = m.get("exitCode");
    if truthy(m.get("cancelled")) {
        text += "\n\n(command cancelled)";
    } else if !nullish(exit) && !exit.and_then(Value::as_f64).is_some_and(|x| x == 0.0) {
        text += &format!("\n\nCommand exited with code {}", to_js_string(exit));
    }
    if truthy(m.get("truncated")) && truthy(m.get("fullOutputPath")) {
        text += &format!(
            "\n\n[Output truncated. Full output: {}]",
            to_js_string(m.get("fullOutputPath"))
        );
    }
    text
}

/// Prefix of a compaction summary in the LLM view.
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Suffix of a compaction summary in the LLM view.
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// Prefix of a branch summary in the LLM view.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
/// Suffix of a branch summary in the LLM view (no newline before the tag, as pi).
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

fn user_message(content: Option<Value>, timestamp: Option<&Value>) -> Value {
    let mut o = Map::new();
    o.insert("role".into(), "user".into());
    if let Some(c) = content {
        o.insert("content".into(), c);
    }
    if let Some(t) = timestamp {
        o.insert("timestamp".into(), t.clone());
    }
    Value::Object(o)
}

/// pi's `convertToLlm`: bash executions become user text (dropped when excluded from context,
/// the `!!` form), custom messages and summaries become user messages, unknown roles are dropped.
pub fn convert_to_llm<'v>(messages: impl Iterator<Item = &'v Value>) -> Vec<Msg<'v>> {
    let text = |s: String| Some(json!([{"type": "text", "text": s}]));
    messages
        .filter_map(|m| {
            let ts = m.get("timestamp");
            match role_of(m)? {
                "bashExecution" if truthy(m.get("excludeFromContext")) => None,
                "bashExecution" => Some(Cow::Owned(user_message(text(bash_execution_text(m)), ts))),
                "custom" => {
                    let content = match m.get("content") {
                        Some(Value::String(s)) => text(s.clone()),
                        c => c.cloned(),
                    };
                    Some(Cow::Owned(user_message(content, ts)))
                }
                "branchSummary" => {
                    let s = super::js::to_js_string(m.get("summary"));
                    let t = format!("{BRANCH_SUMMARY_PREFIX}{s}{BRANCH_SUMMARY_SUFFIX}");
                    Some(Cow::Owned(user_message(text(t), ts)))
                }
                "compactionSummary" => {
                    let s = super::js::to_js_string(m.get("summary"));
                    let t = format!("{COMPACTION_SUMMARY_PREFIX}{s}{COMPACTION_SUMMARY_SUFFIX}");
                    Some(Cow::Owned(user_message(text(t), ts)))
                }
                "system" | "user" | "assistant" | "toolResult" => Some(Cow::Borrowed(m)),
                _ => None,
            }
        })
        .collect()
}
