//! Paths from a leaf to the root, as pi walks them, with cycle detection.
//!
//! Invariants:
//! - the id index maps every id to the **last** entry in file order that carries it (pi's
//!   `Map.set` in file order); entries without a string id are never reachable by id;
//! - [`path_from_entries`] never loops: a repeated id on the walk is a cycle, reported as
//!   [`AgentError::Cycle`] with the ids of the loop in walk order;
//! - paths are returned root first; the walk is iterative (paths can hold a million entries).

use super::AgentError;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The entries of a session (header excluded), in file order, indexed by id.
#[derive(Debug)]
pub struct EntryIndex<'a> {
    entries: &'a [Value],
    by_id: HashMap<&'a str, &'a Value>,
}

/// The `id` of an entry, when it is a string.
pub fn id_of(entry: &Value) -> Option<&str> {
    entry.get("id").and_then(Value::as_str)
}

/// The `type` of an entry, when it is a string.
pub fn type_of(entry: &Value) -> Option<&str> {
    entry.get("type").and_then(Value::as_str)
}

impl<'a> EntryIndex<'a> {
    /// Indexes `entries` (file order, header excluded; a later duplicate id wins).
    pub fn new(entries: &'a [Value]) -> Self {
        let mut by_id = HashMap::with_capacity(entries.len());
        for e in entries {
            if let Some(id) = id_of(e) {
                by_id.insert(id, e);
            }
        }
        Self { entries, by_id }
    }

    /// The entry pi's `getEntry(id)` returns.
    pub fn get(&self, id: &str) -> Option<&'a Value> {
        self.by_id.get(id).copied()
    }

    /// The entries, in file order.
    pub fn entries(&self) -> &'a [Value] {
        self.entries
    }

    /// pi's `getBranch(id)`: root→`id`, empty for an unknown id.
    pub fn branch(&self, id: &str) -> Result<Vec<&'a Value>, AgentError> {
        match self.get(id) {
            Some(e) => self.walk(e),
            None => Ok(Vec::new()),
        }
    }

    /// pi's private `buildSessionPath`: like [`Self::branch`], but an absent, empty or unknown
    /// leaf falls back to the last entry of the file.
    pub fn path(&self, leaf: Option<&str>) -> Result<Vec<&'a Value>, AgentError> {
        let start = leaf
            .filter(|l| !l.is_empty())
            .and_then(|l| self.get(l))
            .or_else(|| self.entries.last());
        match start {
            Some(e) => self.walk(e),
            None => Ok(Vec::new()),
        }
    }

    fn walk(&self, leaf: &'a Value) -> Result<Vec<&'a Value>, AgentError> {
        let mut path = vec![leaf];
        let mut seen: HashSet<&str> = HashSet::new();
        if let Some(id) = id_of(leaf) {
            seen.insert(id);
        }
        let mut current = leaf;
        // `current.parentId ? index.get(current.parentId) : undefined`
        while let Some(parent) = current
            .get("parentId")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .and_then(|p| self.get(p))
        {
            let pid = id_of(parent).unwrap_or_default();
            if !seen.insert(pid) {
                let start = path.iter().position(|e| id_of(e) == Some(pid)).unwrap_or(0);
                let ids = path[start..]
                    .iter()
                    .map(|e| id_of(e).unwrap_or_default().to_owned());
                return Err(AgentError::Cycle { ids: ids.collect() });
            }
            path.push(parent);
            current = parent;
        }
        path.reverse();
        Ok(path)
    }
}

/// The path root→leaf that pi builds for `leaf` over `entries` (file order, header excluded):
/// an absent or unknown leaf falls back to the last entry; a parent cycle is an error.
/// (A `null` leaf in pi means the empty path; callers handle it without calling this.)
pub fn path_from_entries<'a>(
    entries: &'a [Value],
    leaf: Option<&str>,
) -> Result<Vec<&'a Value>, AgentError> {
    EntryIndex::new(entries).path(leaf)
}

/// The entries of a session file's text as pi's loader keeps them: every non-blank line that
/// parses as JSON, minus falsy values; empty unless the first one is a header (`type:
/// "session"` with a string `id`). Returns the header and the entries (every element whose
/// `type` is not `"session"`), without migration.
pub fn parse_session_text(text: &str) -> (Option<Value>, Vec<Value>) {
    let mut values = text
        .split('\n')
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| pisess_formats::value::parse_owned::<Value>(l).ok())
        .filter(|v| super::js::truthy(Some(v)));
    let Some(header) = values.next() else {
        return (None, Vec::new());
    };
    if type_of(&header) != Some("session") || !header.get("id").is_some_and(Value::is_string) {
        return (None, Vec::new());
    }
    let entries = values.filter(|v| type_of(v) != Some("session")).collect();
    (Some(header), entries)
}
