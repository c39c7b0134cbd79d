//! Readable renderings of a session for sharing: a Markdown transcript ([`markdown`]) and a
//! self-contained HTML page ([`html`]).
//!
//! Both walk the same [`Part`]s, so they show the same things: [`parts`] turns one stored
//! entry into what a reader sees (headings, text, thinking, tool calls with their arguments,
//! tool results, summaries, settings changes).
//!
//! Invariants: the branch is streamed entry by entry (never the whole session in memory); the
//! tree is walked with an explicit stack (no recursion); every text taken from a session is
//! untrusted and is escaped by the renderer that writes it.

pub mod html;
pub mod markdown;

use serde_json::Value;

use crate::session_arg as sa;

/// One piece of an entry as a reader sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Prose (a message's text).
    Text(String),
    /// The model's thinking.
    Thinking(String),
    /// A tool call: the tool and its arguments (pretty JSON).
    ToolCall {
        /// The tool.
        name: String,
        /// The arguments, pretty-printed.
        args: String,
    },
    /// Verbatim text shown as code (tool output, command output, system prompt sections).
    Code {
        /// What it is.
        caption: String,
        /// The text.
        text: String,
    },
    /// An image (not embedded).
    Image(String),
    /// A one-line note (settings changes, labels, edits).
    Note(String),
}

/// An entry ready to render: a heading and its parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The entry id.
    pub id: String,
    /// What it is: the role or the entry type.
    pub kind: String,
    /// Heading details: model, tool, time.
    pub meta: String,
    /// The body.
    pub parts: Vec<Part>,
}

fn s<'v>(v: &'v Value, k: &str) -> Option<&'v str> {
    v.get(k).and_then(Value::as_str)
}

/// Nesting deeper than this is written compact: indented, a value `d` levels deep costs `2d`
/// bytes a line, and 4,000 nested arrays would fill 32 MB from a 16 KB line.
const PRETTY_DEPTH: usize = 16;

/// A value as text: a string as it is, anything else as indented JSON (compact when it nests
/// deeper than [`PRETTY_DEPTH`]).
fn pretty(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(other) if depth_exceeds(other, PRETTY_DEPTH) => {
            serde_json::to_string(other).unwrap_or_default()
        }
        Some(other) => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Whether `v` nests containers more than `limit` deep (a loop, not a recursion).
fn depth_exceeds(v: &Value, limit: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(o) => Box::new(o.values()),
            _ => continue,
        };
        if d >= limit {
            return true;
        }
        stack.extend(children.map(|c| (c, d + 1)));
    }
    false
}

/// Content blocks (or a string) as parts.
fn content_parts(content: Option<&Value>, out: &mut Vec<Part>) {
    match content {
        Some(Value::String(t)) if !t.is_empty() => out.push(Part::Text(t.clone())),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match s(b, "type") {
                    Some("text") => {
                        let t = pretty(b.get("text"));
                        if !t.is_empty() {
                            out.push(Part::Text(t));
                        }
                    }
                    Some("thinking") => {
                        let t = pretty(b.get("thinking"));
                        if !t.trim().is_empty() {
                            out.push(Part::Thinking(t));
                        }
                    }
                    Some("toolCall") => out.push(Part::ToolCall {
                        name: s(b, "name").unwrap_or("tool").to_owned(),
                        args: pretty(b.get("arguments")),
                    }),
                    Some("image") => {
                        out.push(Part::Image(s(b, "mimeType").unwrap_or("image").to_owned()));
                    }
                    other => out.push(Part::Note(format!(
                        "({} block)",
                        other.unwrap_or("unknown")
                    ))),
                }
            }
        }
        _ => {}
    }
}

/// What a reader sees of one entry.
pub fn parts(v: &Value) -> Rendered {
    let id = sa::id_of(v).unwrap_or("").to_owned();
    let time = sa::short_time(s(v, "timestamp"));
    let mut meta = Vec::new();
    let mut parts = Vec::new();
    let kind = sa::kind(v).to_owned();
    match sa::entry_type(v) {
        "message" => {
            let m = v.get("message").unwrap_or(&Value::Null);
            match s(m, "role") {
                Some("assistant") => {
                    if let Some(model) = s(m, "model") {
                        meta.push(model.to_owned());
                    }
                    content_parts(m.get("content"), &mut parts);
                    if let Some(err) = s(m, "errorMessage") {
                        parts.push(Part::Note(format!("error: {err}")));
                    }
                }
                Some("toolResult") => {
                    let tool = s(m, "toolName").unwrap_or("tool");
                    meta.push(tool.to_owned());
                    let err = m.get("isError") == Some(&Value::Bool(true));
                    let text = sa::message_text(m);
                    parts.push(Part::Code {
                        caption: if err {
                            format!("{tool} failed")
                        } else {
                            format!("{tool} output")
                        },
                        text,
                    });
                    let mut rest = Vec::new();
                    content_parts(m.get("content"), &mut rest);
                    parts.extend(rest.into_iter().filter(|p| matches!(p, Part::Image(_))));
                }
                Some("bashExecution") => {
                    parts.push(Part::Code {
                        caption: "command".into(),
                        text: s(m, "command").unwrap_or("").to_owned(),
                    });
                    parts.push(Part::Code {
                        caption: match m.get("exitCode").and_then(Value::as_i64) {
                            Some(c) => format!("output (exit {c})"),
                            None => "output".into(),
                        },
                        text: s(m, "output").unwrap_or("").to_owned(),
                    });
                }
                Some("system") => {
                    content_parts(m.get("content"), &mut parts);
                    if let Some(sections) = m.get("sections").and_then(Value::as_object) {
                        for (name, text) in sections {
                            parts.push(Part::Code {
                                caption: format!("section {name}"),
                                text: pretty(Some(text)),
                            });
                        }
                    }
                    if let Some(tools) = m.get("toolsAdded").and_then(Value::as_array) {
                        let names: Vec<&str> = tools.iter().filter_map(|t| s(t, "name")).collect();
                        if !names.is_empty() {
                            parts.push(Part::Note(format!("tools: {}", names.join(", "))));
                        }
                    }
                }
                Some("custom") => {
                    if let Some(t) = s(m, "customType") {
                        meta.push(t.to_owned());
                    }
                    content_parts(m.get("content"), &mut parts);
                }
                _ => content_parts(m.get("content"), &mut parts),
            }
        }
        "compaction" => {
            if let Some(n) = v.get("tokensBefore").and_then(Value::as_u64) {
                meta.push(format!("{n} tokens before"));
            }
            parts.push(Part::Text(s(v, "summary").unwrap_or("").to_owned()));
        }
        "branch_summary" => {
            if let Some(f) = s(v, "fromId") {
                meta.push(format!("from {f}"));
            }
            parts.push(Part::Text(s(v, "summary").unwrap_or("").to_owned()));
        }
        "custom_message" => {
            if let Some(t) = s(v, "customType") {
                meta.push(t.to_owned());
            }
            content_parts(v.get("content"), &mut parts);
        }
        "context_edit" => parts.push(Part::Note(format!(
            "context edit of {}: {}",
            s(v, "targetId").unwrap_or("?"),
            match v.get("replacement") {
                Some(Value::Null) | None => "removed from the context".to_owned(),
                Some(r) => format!("replaced by {}", sa::clip(&pretty(r.get("content")), 200)),
            }
        ))),
        _ => {
            let summary = sa::summary(v);
            if !summary.is_empty() {
                parts.push(Part::Note(summary));
            }
        }
    }
    meta.push(time);
    meta.retain(|m| !m.is_empty());
    Rendered {
        id,
        kind,
        meta: meta.join(" · "),
        parts,
    }
}

/// A header for the rendering: what session, which branch.
#[derive(Debug, Clone)]
pub struct Title {
    /// The session id.
    pub session_id: String,
    /// The session's name, if any.
    pub name: Option<String>,
    /// The session's folder.
    pub cwd: String,
    /// The session file.
    pub file: String,
    /// The header's time.
    pub created: String,
    /// The entry the transcript ends at.
    pub branch_id: String,
    /// Entries in the transcript.
    pub entries: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_values_are_written_compact_and_shallow_ones_indented() {
        let nest = |n: usize| -> Value {
            let mut v = Value::from(1);
            for _ in 0..n {
                v = Value::Array(vec![v]);
            }
            v
        };
        assert!(!depth_exceeds(&nest(PRETTY_DEPTH), PRETTY_DEPTH));
        assert!(depth_exceeds(&nest(PRETTY_DEPTH + 1), PRETTY_DEPTH));
        assert!(pretty(Some(&nest(PRETTY_DEPTH))).contains('\n'));
        let deep = nest(1000);
        let text = pretty(Some(&deep));
        assert_eq!(text.len(), 2001, "compact, not indented");
        assert_eq!(
            pretty(Some(&serde_json::json!({"a": [1]}))),
            "{\n  \"a\": [\n    1\n  ]\n}"
        );
    }
}
