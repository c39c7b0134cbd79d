//! An independent scan of a session file's tool calls on files, with serde_json, for tests
//! that check the file-operation index (`engine/tests/test_files.rs`) and `pisess files`
//! (`cli/tests/test_query.rs`, which includes this file by path).
//!
//! It knows nothing of the importer: records are split by the formats reader (so glued lines
//! are recovered as the store recovers them), then read as plain JSON. What counts as a hit:
//! every `toolCall` block of an assistant message with a non-empty string `arguments.path`
//! (op = the tool's name for read/write/edit, else "other"), the same for every call in a tool
//! result's `nestedCalls.calls` (its status `ok` / `error` is its error status), and every path
//! in a compaction's or branch summary's `details.readFiles` (read) and
//! `details.modifiedFiles` (modified). A call's error status is its last tool result's
//! `isError`; a hit is active when its entry is
//! on the path from the last record to the root (following `parentId`, a later duplicate id
//! winning, as pi's index does).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use pisess_formats::{Event, SessionReader};
use serde_json::Value;

/// One file operation, with the fields `pisess files` reports.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    pub entry_id: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_name: String,
    pub op: String,
    pub path: String,
    pub is_error: Option<bool>,
    pub active: bool,
    pub timestamp: Option<String>,
}

/// The hits of one file in file order, and the header's `cwd`.
pub fn scan(path: &Path) -> (Vec<Hit>, String) {
    let mut records: Vec<Value> = Vec::new();
    let mut cwd = String::new();
    SessionReader::new(std::fs::File::open(path).unwrap())
        .read(|ev| {
            match ev {
                Event::Header(h) => {
                    cwd = h
                        .fields
                        .get("cwd")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into();
                }
                Event::Record(r, _) => {
                    records.push(serde_json::from_str(r.json).unwrap_or(Value::Null));
                }
                Event::Problem(_) => {}
            }
            Ok::<(), ()>(())
        })
        .unwrap();
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let mut results: HashMap<String, bool> = HashMap::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        if let Some(id) = s(r, "id") {
            by_id.insert(id, i);
        }
        let m = &r["message"];
        if r["type"] == "message"
            && m["role"] == "toolResult"
            && let Some(id) = s(m, "toolCallId")
        {
            results.insert(id, m["isError"] == Value::Bool(true));
        }
    }
    let mut active = HashSet::new();
    let mut cur = records.last().and_then(|r| s(r, "id"));
    while let Some(id) = cur {
        let Some(&i) = by_id.get(&id) else { break };
        if !active.insert(i) {
            break;
        }
        cur = s(&records[i], "parentId");
    }
    let mut hits = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let id = s(r, "id");
        let on = active.contains(&i) && id.as_ref().is_some_and(|d| by_id[d] == i);
        let timestamp = s(r, "timestamp");
        let m = &r["message"];
        if r["type"] == "message" && m["role"] == "assistant" {
            for b in m["content"].as_array().into_iter().flatten() {
                let Some(p) = b["arguments"]["path"].as_str().filter(|p| !p.is_empty()) else {
                    continue;
                };
                if b["type"] != "toolCall" {
                    continue;
                }
                let name = s(b, "name").unwrap_or_default();
                let op = match name.as_str() {
                    "read" | "write" | "edit" => name.clone(),
                    _ => "other".into(),
                };
                let call = s(b, "id");
                let is_error = call.as_ref().and_then(|c| results.get(c).copied());
                hits.push(Hit {
                    entry_id: id.clone(),
                    tool_call_id: call,
                    tool_name: name,
                    op,
                    path: p.to_owned(),
                    is_error,
                    active: on,
                    timestamp: timestamp.clone(),
                });
            }
        }
        if r["type"] == "message" && m["role"] == "toolResult" {
            for c in m["nestedCalls"]["calls"].as_array().into_iter().flatten() {
                let Some(p) = c["arguments"]["path"].as_str().filter(|p| !p.is_empty()) else {
                    continue;
                };
                let name = s(c, "name").unwrap_or_default();
                let op = match name.as_str() {
                    "read" | "write" | "edit" => name.clone(),
                    _ => "other".into(),
                };
                let is_error = match c["status"].as_str() {
                    Some("ok") => Some(false),
                    Some("error") => Some(true),
                    _ => None,
                };
                hits.push(Hit {
                    entry_id: id.clone(),
                    tool_call_id: s(c, "id"),
                    tool_name: name,
                    op,
                    path: p.to_owned(),
                    is_error,
                    active: on,
                    timestamp: timestamp.clone(),
                });
            }
        }
        if r["type"] == "compaction" || r["type"] == "branch_summary" {
            let tool = r["type"].as_str().unwrap().to_owned();
            for (k, op) in [("readFiles", "read"), ("modifiedFiles", "modified")] {
                for p in r["details"][k].as_array().into_iter().flatten() {
                    if let Some(p) = p.as_str().filter(|p| !p.is_empty()) {
                        hits.push(Hit {
                            entry_id: id.clone(),
                            tool_call_id: None,
                            tool_name: tool.clone(),
                            op: op.into(),
                            path: p.into(),
                            is_error: None,
                            active: on,
                            timestamp: timestamp.clone(),
                        });
                    }
                }
            }
        }
    }
    (hits, cwd)
}

/// The path pi's file tools touch for `path` written in a session whose cwd is `cwd`, worked
/// out here with `std::path` (the index's resolution is its own code): one leading `@`
/// dropped, Unicode spaces made plain, `~` / `~/…` expanded to the home folder the cwd lies in
/// (`/root`, `/home/NAME`, `/Users/NAME`; left as written when there is none), joined to the
/// cwd when relative, then `.`, `..` and repeated separators folded.
#[allow(dead_code)]
pub fn resolve_like_pi(cwd: &str, path: &str) -> String {
    use std::path::{Component, PathBuf};
    let path = path.strip_prefix('@').unwrap_or(path);
    let path: String = path
        .chars()
        .map(|c| match c {
            '\u{a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect();
    let cwd_parts: Vec<Component> = Path::new(cwd).components().collect();
    let home: Option<PathBuf> = match cwd_parts.as_slice() {
        [Component::RootDir, Component::Normal(r), ..] if *r == "root" => Some("/root".into()),
        [
            Component::RootDir,
            Component::Normal(h),
            Component::Normal(n),
            ..,
        ] if *h == "home" || *h == "Users" => Some(Path::new("/").join(h).join(n)),
        _ => None,
    };
    let joined: PathBuf = if path == "~" || path.starts_with("~/") {
        match &home {
            Some(h) => h.join(path[1..].trim_start_matches('/')),
            None => PathBuf::from(&path),
        }
    } else {
        Path::new(cwd).join(&path)
    };
    let mut out: Vec<String> = Vec::new();
    let absolute = joined.has_root();
    for c in joined.components() {
        match c {
            Component::Normal(n) => out.push(n.to_string_lossy().into_owned()),
            Component::ParentDir => match out.last().map(String::as_str) {
                Some(l) if l != ".." => {
                    out.pop();
                }
                _ if absolute => {}
                _ => out.push("..".into()),
            },
            _ => {}
        }
    }
    match (absolute, out.is_empty()) {
        (true, _) => format!("/{}", out.join("/")),
        (false, true) => ".".into(),
        (false, false) => out.join("/"),
    }
}
