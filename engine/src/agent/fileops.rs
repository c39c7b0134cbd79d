//! File operations read from tool calls (spec §9; pi's `extractFileOpsFromMessage`,
//! `computeFileLists`, `formatFileOperations`).
//!
//! Invariants:
//! - each set keeps first-insertion order, as a JavaScript `Set`;
//! - only `read`, `write` and `edit` calls with a non-empty string `arguments.path` count, from
//!   assistant tool-call blocks and from a tool result's `nestedCalls.calls`;
//! - lists are sorted in UTF-16 code-unit order (JavaScript's default sort); paths are verbatim.

use super::js::cmp16;
use serde_json::{Value, json};
use std::collections::HashSet;

/// A string set that keeps insertion order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderedSet {
    items: Vec<String>,
    seen: HashSet<String>,
}

impl OrderedSet {
    /// Adds `s` unless present.
    pub fn add(&mut self, s: &str) {
        if self.seen.insert(s.to_owned()) {
            self.items.push(s.to_owned());
        }
    }
    /// Whether `s` is present.
    pub fn contains(&self, s: &str) -> bool {
        self.seen.contains(s)
    }
    /// The items in insertion order.
    pub fn items(&self) -> &[String] {
        &self.items
    }
}

/// pi's `FileOperations`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    /// Files read.
    pub read: OrderedSet,
    /// Files written.
    pub written: OrderedSet,
    /// Files edited.
    pub edited: OrderedSet,
}

impl FileOps {
    /// `{read, written, edited}` as arrays in insertion order (the oracle's `fileOpsToJson`).
    pub fn to_json(&self) -> Value {
        json!({"read": self.read.items(), "written": self.written.items(), "edited": self.edited.items()})
    }

    /// Seeds from stored `details` (`readFiles` → read, `modifiedFiles` → edited); non-string
    /// items are ignored.
    pub fn add_details(&mut self, details: &Value) {
        let strs = |k: &str| {
            details
                .get(k)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
        };
        for f in strs("readFiles") {
            self.read.add(f);
        }
        for f in strs("modifiedFiles") {
            self.edited.add(f);
        }
    }

    fn add_op(&mut self, name: Option<&Value>, args: Option<&Value>) {
        let Some(path) = args.and_then(|a| a.get("path")).and_then(Value::as_str) else {
            return;
        };
        if path.is_empty() {
            return;
        }
        match name.and_then(Value::as_str) {
            Some("read") => self.read.add(path),
            Some("write") => self.written.add(path),
            Some("edit") => self.edited.add(path),
            _ => {}
        }
    }

    /// pi's `extractFileOpsFromMessage`.
    pub fn add_message(&mut self, m: &Value) {
        match m.get("role").and_then(Value::as_str) {
            Some("toolResult") => {
                let calls = m
                    .get("nestedCalls")
                    .and_then(|n| n.get("calls"))
                    .and_then(Value::as_array);
                for c in calls.into_iter().flatten() {
                    self.add_op(c.get("name"), c.get("arguments"));
                }
            }
            Some("assistant") => {
                for b in m
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if b.get("type").and_then(Value::as_str) == Some("toolCall")
                        && b.get("name").is_some()
                        && let Some(args) = b.get("arguments")
                    {
                        self.add_op(b.get("name"), Some(args));
                    }
                }
            }
            _ => {}
        }
    }
}

/// pi's `computeFileLists`: `(readFiles, modifiedFiles)`.
pub fn compute_file_lists(ops: &FileOps) -> (Vec<String>, Vec<String>) {
    let mut modified = OrderedSet::default();
    for f in ops.edited.items().iter().chain(ops.written.items()) {
        modified.add(f);
    }
    let mut read: Vec<String> = ops
        .read
        .items()
        .iter()
        .filter(|f| !modified.contains(f))
        .cloned()
        .collect();
    read.sort_by(|a, b| cmp16(a, b));
    let mut modified = modified.items;
    modified.sort_by(|a, b| cmp16(a, b));
    (read, modified)
}

/// pi's `formatFileOperations`: `""`, or `"\n\n"` + the `<read-files>` and `<modified-files>`
/// sections joined by a blank line.
pub fn format_file_operations(read: &[String], modified: &[String]) -> String {
    let mut sections = Vec::new();
    if !read.is_empty() {
        sections.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
    }
    if !modified.is_empty() {
        sections.push(format!(
            "<modified-files>\n{}\n</modified-files>",
            modified.join("\n")
        ));
    }
    if sections.is_empty() {
        return String::new();
    }
    format!("\n\n{}", sections.join("\n\n"))
}
