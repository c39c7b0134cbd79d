//! The file-operation index (spec §9, issue 3 item 4): which tool calls touched which path.
//!
//! What is indexed, per stored row:
//! - every `toolCall` block of an `assistant` message whose `arguments.path` is a non-empty
//!   string (`read` / `write` / `edit` give those operations, any other tool gives
//!   [`FileOp::Other`] with its name kept), and by the same rule every call in a `toolResult`
//!   message's `nestedCalls.calls` (calls a tool made itself; its id is the nested call's, its
//!   result status its own `status`: `ok`, `error`, else none);
//! - the `details.readFiles` ([`FileOp::Read`]) and `details.modifiedFiles`
//!   ([`FileOp::Modified`]) string arrays of `compaction` and `branch_summary` entries (tool name
//!   = the entry type, no tool call id);
//! - every `toolResult` message's `toolCallId` and `isError` (last one in file order wins), so
//!   a hit's result status is known even when the result was appended later.
//!
//! Invariants:
//! - every row here is written in the same write transaction as the entries it indexes, and
//!   removed with them ([`delete_session_ops`]);
//! - the hits are stored densely: one `file_hits` value per (path as written, session, chunk)
//!   holds every hit of that path in that session whose entry key lies in the chunk (the
//!   [`CHUNK`] keys from a multiple of [`CHUNK`]), in (entry key, op index) order, as a block
//!   ([`encode_block`]: varints, entry keys delta-coded, tool names stored once per block, ids
//!   and timestamps front-coded against the previous hit). A block's bytes are a function of
//!   its hits alone, whatever imports wrote them (an append adds to the chunk it falls in, so
//!   an append to a long session adds or rewrites only the last chunks), so verify and repair
//!   compare them byte for byte;
//! - the resolved path (the path as written resolved against the session `cwd` as pi's tools
//!   resolve it, [`resolve`]: a leading `@` dropped, `~` expanded, then normalised lexically:
//!   `.`, `..`, duplicate slashes; no filesystem access; a function of the path and the cwd
//!   alone, and a session's `cwd` never changes while its rows exist) is not stored with the hits: a query computes it
//!   once per (path, session), and `file_resolved` maps each resolved path that differs from
//!   its path as written to (session, path as written), so a query on resolved paths finds the
//!   blocks without any hit data stored twice; `file_session_paths` lists each session's paths
//!   as written (for [`delete_session_ops`]);
//! - a hit's result status is in its block; for a nested call it is the call's own; else it
//!   is set from `tool_results` when the call is written and rewritten when a result for the
//!   call arrives later (`tool_results` lists each call's operations with their path for
//!   that), so it always equals the status of the last result in file order;
//! - whether an entry is on the active path (leaf → root) is computed at query time, so appends
//!   never rewrite old rows for it: the path is a few key ranges ("runs", see
//!   [`crate::schema::RUN_STARTS`]), found with one small-table lookup per run
//!   ([`Snapshot::path_runs`], bounded by the leaf's depth), and each hit is a binary search in
//!   them.
//!
//! A query is range scans of `file_hits` (and of `file_resolved` for resolved paths): a glob's
//! literal prefix bounds the scan, and the glob runs once per distinct path, not per hit. The
//! paths as written are found with one seek each (a path the query does not keep is stepped
//! over, its blocks unread); then each kept path's key range is read, ranges in parallel on the
//! rayon pool (most of a big query's scan is redb's page reads). The scan only collects the
//! blocks ([`FileScan`]); then either
//! - [`FileScan::collect`] decodes them all and sorts the hits by (entry key, op index) (each
//!   path's hits already come in about that order, so the stable sort merges a few runs); or
//! - [`FileScan::stream`] renders them without holding the output: a hit lies in its entry's
//!   chunk, so the blocks are grouped by chunk, and each chunk is decoded, sorted and rendered
//!   on its own (chunks in parallel: on all but one of the rayon pool's threads and on the
//!   calling thread, into a bounded set of reused buffers), its output written after the
//!   previous chunk's, by the calling thread alone, between the jobs and buffers it renders
//!   itself. Both give the same hits in the same order.
//!
//! Decoding copies a block's strings into one arena as bytes, each string once (a string equal
//! to the previous hit's is shared), and checks the arena as UTF-8 once (per query for
//! `collect`, per chunk for `stream`); each string is then taken with `str::get`, which refuses
//! a span off character boundaries, so a damaged block is an error, never a wrong string.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

use redb::{ReadableTable, TableDefinition};

use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};
use crate::import::Writer;

/// Name of the hit blocks table.
pub const FILE_HITS_NAME: &str = "file_hits.v1";
/// Name of the resolved-path table.
pub const FILE_RESOLVED_NAME: &str = "file_resolved.v1";
/// Name of the per-session path list.
pub const FILE_SESSION_PATHS_NAME: &str = "file_session_paths.v1";
/// Name of the tool results table.
pub const TOOL_RESULTS_NAME: &str = "tool_results.v3";
/// (path as written, session key, chunk start key) → the block of that path's hits in that
/// session and chunk ([`encode_block`]).
pub const FILE_HITS: TableDefinition<(&str, u64, u64), &[u8]> =
    TableDefinition::new(FILE_HITS_NAME);
/// (resolved path, session key, path as written) → (), for every (path, session) whose
/// resolved path differs from the path as written.
pub const FILE_RESOLVED: TableDefinition<(&str, u64, &str), ()> =
    TableDefinition::new(FILE_RESOLVED_NAME);
/// (session key, path as written) → (): the paths each session has hits for.
pub const FILE_SESSION_PATHS: TableDefinition<(u64, &str), ()> =
    TableDefinition::new(FILE_SESSION_PATHS_NAME);
/// (session key, tool call id) → byte 0: the last result's status ([`RESULT_NONE`],
/// [`RESULT_OK`], [`RESULT_ERROR`]), then for every file operation of that call its entry key
/// (u64 LE), op index (u32 LE) and path as written (LEB128 length, bytes).
pub const TOOL_RESULTS: TableDefinition<(u64, &str), &[u8]> =
    TableDefinition::new(TOOL_RESULTS_NAME);

/// Entry keys per `file_hits` chunk (a power of two).
pub const CHUNK: u64 = 1 << 16;

/// The first key of the chunk holding entry key `e`.
pub fn chunk_of(e: u64) -> u64 {
    e & !(CHUNK - 1)
}

/// No result for this tool call (yet).
pub const RESULT_NONE: u8 = 0;
/// The last result was not an error.
pub const RESULT_OK: u8 = 1;
/// The last result was an error.
pub const RESULT_ERROR: u8 = 2;

/// A stored result status as a hit's `is_error`: `None` when no result was seen.
fn is_error(status: u8) -> Option<bool> {
    match status {
        RESULT_OK => Some(false),
        RESULT_ERROR => Some(true),
        _ => None,
    }
}

/// Whether `entry` lies in one of `runs` (sorted, disjoint key ranges [start, end], as
/// [`Snapshot::active_runs`] gives them): the last run starting at or before it holds it, if
/// any does.
fn in_runs(runs: &[(u64, u64)], entry: u64) -> bool {
    let k = runs.partition_point(|&(start, _)| start <= entry);
    k > 0 && runs.get(k - 1).is_some_and(|&(_, end)| entry <= end)
}

/// What a file operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileOp {
    /// `read` tool call, or a summary's `readFiles`.
    Read,
    /// `write` tool call.
    Write,
    /// `edit` tool call.
    Edit,
    /// A summary's `modifiedFiles` (written or edited).
    Modified,
    /// Another tool with a string `arguments.path`.
    Other,
}

impl FileOp {
    /// The operation's name (`read`, `write`, `edit`, `modified`, `other`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Edit => "edit",
            Self::Modified => "modified",
            Self::Other => "other",
        }
    }

    /// Whether the operation changes the file (write, edit, modified).
    pub fn modifies(self) -> bool {
        matches!(self, Self::Write | Self::Edit | Self::Modified)
    }

    fn of_tool(name: &str) -> Self {
        match name {
            "read" => Self::Read,
            "write" => Self::Write,
            "edit" => Self::Edit,
            _ => Self::Other,
        }
    }

    fn code(self) -> u8 {
        match self {
            Self::Read => 0,
            Self::Write => 1,
            Self::Edit => 2,
            Self::Modified => 3,
            Self::Other => 4,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => Self::Read,
            1 => Self::Write,
            2 => Self::Edit,
            3 => Self::Modified,
            4 => Self::Other,
            _ => return None,
        })
    }
}

/// An operation found while parsing a row (before its key and the cwd are known).
#[derive(Debug, Clone)]
pub(crate) struct OpDraft {
    pub tool_call_id: Option<String>,
    pub tool_name: String,
    pub op: FileOp,
    pub path: String,
    /// The status a nested call carries itself; `None` for a call whose status comes from
    /// its tool result (looked up and kept up to date through `tool_results`).
    pub status: Option<u8>,
}

/// The operations and tool result of one parsed entry.
#[derive(Debug, Default)]
pub(crate) struct EntryOps {
    pub ops: Vec<OpDraft>,
    /// (tool call id, is error) of a `toolResult` message.
    pub result: Option<(String, bool)>,
}

#[derive(serde::Deserialize)]
struct PathArg<'a> {
    #[serde(borrow, default)]
    path: Option<std::borrow::Cow<'a, str>>,
}

/// [`PathArg`] for text that must be decoded leniently (lone surrogate escapes).
#[derive(serde::Deserialize)]
struct OwnedPathArg {
    #[serde(default)]
    path: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Details {
    #[serde(default)]
    read_files: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    modified_files: Option<Vec<serde_json::Value>>,
}

/// Extracts the file operations of one parsed entry, whose JSON text is `json`.
///
/// An entry with a field the typed view cannot hold ([`Entry::bad_field`]: a `usage` count
/// written as text, a text block whose `text` is an array) has only its tree fields in that
/// view; its operations are read from its JSON as a plain value instead ([`extract_value`]),
/// as pi reads them: pi looks only at the fields it needs.
///
/// [`Entry::bad_field`]: pisess_formats::entry::Entry::bad_field
pub(crate) fn extract(e: &pisess_formats::entry::Entry<'_>, json: &str) -> EntryOps {
    use pisess_formats::entry::{Content, EntryType, Role};
    let mut out = EntryOps::default();
    if e.bad_field.is_some() {
        return match pisess_formats::value::parse_owned::<serde_json::Value>(json) {
            Ok(v) => extract_value(&v),
            Err(_) => out,
        };
    }
    match e.entry_type() {
        EntryType::Message => {
            let Some(m) = e.message.get() else {
                return out;
            };
            match m.role() {
                Role::Assistant => {
                    let Some(Content::Blocks(blocks)) = m.content.get() else {
                        return out;
                    };
                    for b in blocks {
                        if b.type_name.get().map(|t| t.as_str()) != Some("toolCall") {
                            continue;
                        }
                        out.ops.extend(call_op(&b.id, &b.name, &b.arguments, None));
                    }
                }
                Role::ToolResult => {
                    if let Some(id) = m.tool_call_id.get() {
                        let err = m.is_error.get().copied().unwrap_or(false);
                        out.result = Some((id.as_str().to_owned(), err));
                    }
                    // The calls a tool made itself (spec §9: pi's file lists count them
                    // whatever their status), each with its own id and status.
                    let calls = m.nested_calls.get().and_then(|n| n.calls.get());
                    for c in calls.into_iter().flatten() {
                        let status = match c.status.get().map(|t| t.as_str()) {
                            Some("ok") => RESULT_OK,
                            Some("error") => RESULT_ERROR,
                            _ => RESULT_NONE,
                        };
                        out.ops
                            .extend(call_op(&c.id, &c.name, &c.arguments, Some(status)));
                    }
                }
                _ => {}
            }
        }
        t @ (EntryType::Compaction | EntryType::BranchSummary) => {
            let Some(d) = e.details.get() else {
                return out;
            };
            let Ok(d) = pisess_formats::value::parse_owned::<Details>(d.get()) else {
                return out;
            };
            let tool = if t == EntryType::Compaction {
                "compaction"
            } else {
                "branch_summary"
            };
            for (list, op) in [
                (d.read_files, FileOp::Read),
                (d.modified_files, FileOp::Modified),
            ] {
                push_listed(&mut out.ops, tool, op, list.iter().flatten());
            }
        }
        _ => {}
    }
    out
}

/// The operations of a compaction's or branch summary's `details.readFiles` /
/// `modifiedFiles` list: one per item that is non-empty text.
fn push_listed<'a>(
    ops: &mut Vec<OpDraft>,
    tool: &str,
    op: FileOp,
    list: impl IntoIterator<Item = &'a serde_json::Value>,
) {
    for p in list.into_iter().filter_map(serde_json::Value::as_str) {
        if !p.is_empty() {
            ops.push(OpDraft {
                tool_call_id: None,
                tool_name: tool.to_owned(),
                op,
                path: p.to_owned(),
                status: None,
            });
        }
    }
}

/// [`extract`] from an entry read as a plain JSON value: the same fields, each taken only
/// where it has the kind the typed view gives it (a `toolCall` block's `id` and `name` text,
/// `arguments.path` non-empty text, `isError` true).
fn extract_value(v: &serde_json::Value) -> EntryOps {
    use serde_json::Value;
    let mut out = EntryOps::default();
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let op_of = |call: &Value, status: Option<u8>| -> Option<OpDraft> {
        let path = call.get("arguments")?.get("path")?.as_str()?;
        if path.is_empty() {
            return None;
        }
        let name = text(call, "name").unwrap_or_default();
        Some(OpDraft {
            tool_call_id: text(call, "id"),
            op: FileOp::of_tool(&name),
            tool_name: name,
            path: path.to_owned(),
            status,
        })
    };
    match v.get("type").and_then(Value::as_str) {
        Some("message") => {
            let Some(m) = v.get("message") else {
                return out;
            };
            match m.get("role").and_then(Value::as_str) {
                Some("assistant") => {
                    let blocks = m.get("content").and_then(Value::as_array);
                    for b in blocks.into_iter().flatten() {
                        if b.get("type").and_then(Value::as_str) == Some("toolCall") {
                            out.ops.extend(op_of(b, None));
                        }
                    }
                }
                Some("toolResult") => {
                    if let Some(id) = text(m, "toolCallId") {
                        let err = m.get("isError").and_then(Value::as_bool).unwrap_or(false);
                        out.result = Some((id, err));
                    }
                    let calls = m
                        .get("nestedCalls")
                        .and_then(|n| n.get("calls"))
                        .and_then(Value::as_array);
                    for c in calls.into_iter().flatten() {
                        let status = match c.get("status").and_then(Value::as_str) {
                            Some("ok") => RESULT_OK,
                            Some("error") => RESULT_ERROR,
                            _ => RESULT_NONE,
                        };
                        out.ops.extend(op_of(c, Some(status)));
                    }
                }
                _ => {}
            }
        }
        Some(t @ ("compaction" | "branch_summary")) => {
            let Some(d) = v.get("details") else {
                return out;
            };
            let tool = if t == "compaction" {
                "compaction"
            } else {
                "branch_summary"
            };
            for (key, op) in [
                ("readFiles", FileOp::Read),
                ("modifiedFiles", FileOp::Modified),
            ] {
                let list = d.get(key).and_then(Value::as_array);
                push_listed(&mut out.ops, tool, op, list.into_iter().flatten());
            }
        }
        _ => {}
    }
    out
}

/// The file operation of one tool call (an assistant's `toolCall` block or a nested call):
/// `None` unless its `arguments.path` is a non-empty string.
fn call_op(
    id: &pisess_formats::Field<pisess_formats::Str<'_>>,
    name: &pisess_formats::Field<pisess_formats::Str<'_>>,
    arguments: &pisess_formats::Field<pisess_formats::value::Raw<'_>>,
    status: Option<u8>,
) -> Option<OpDraft> {
    let args = arguments.get()?;
    let path: std::borrow::Cow<'_, str> = match serde_json::from_str::<PathArg<'_>>(args.get()) {
        Ok(PathArg { path: Some(p) }) => p,
        Ok(PathArg { path: None }) => return None,
        // A lone surrogate escape in the arguments is read as U+FFFD, as everywhere else.
        Err(_) => pisess_formats::value::parse_owned::<OwnedPathArg>(args.get())
            .ok()?
            .path?
            .into(),
    };
    if path.is_empty() {
        return None;
    }
    let name = name.get().map(|n| n.as_str()).unwrap_or_default();
    Some(OpDraft {
        tool_call_id: id.get().map(|i| i.as_str().to_owned()),
        tool_name: name.to_owned(),
        op: FileOp::of_tool(name),
        path: path.into_owned(),
        status,
    })
}

/// The path a file tool of pi's touched for `path` written in a session whose `cwd` is `cwd`:
/// pi's tools strip one leading `@`, turn Unicode spaces (U+00A0, U+2000–U+200A, U+202F,
/// U+205F, U+3000) into plain ones and expand `~` and `~/…` to the home folder, and read a
/// `file://` URL as its path (Node's `fileURLToPath`; one it refuses, of another host, is
/// joined as written), before they resolve against the cwd (itself read as a path when it is a
/// `file://` URL); then [`normalize`]. The home folder is the one the cwd lies in
/// ([`home_of`]); when the cwd lies in none, `~` is left as written (not joined to the cwd).
/// A function of its arguments alone: the index stores what it returns, and recomputes it to
/// find and remove those rows.
pub fn resolve(cwd: &str, path: &str) -> String {
    resolve_with(cwd, path, true)
}

/// [`resolve`] as schema 14 stored it: `file://` URLs joined to the cwd as written.
pub(crate) fn resolve_v14(cwd: &str, path: &str) -> String {
    resolve_with(cwd, path, false)
}

fn resolve_with(cwd: &str, path: &str, urls: bool) -> String {
    let bare = path.strip_prefix('@').unwrap_or(path);
    let spaced;
    let bare = if bare.chars().any(is_unicode_space) {
        spaced = bare
            .chars()
            .map(|c| if is_unicode_space(c) { ' ' } else { c })
            .collect::<String>();
        spaced.as_str()
    } else {
        bare
    };
    let cwd_path;
    let cwd = match file_url(cwd).filter(|_| urls) {
        Some(p) => {
            cwd_path = p;
            cwd_path.as_str()
        }
        None => cwd,
    };
    let rest = match bare.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => {
            return match file_url(bare).filter(|_| urls) {
                Some(p) => normalize("", &p),
                None => normalize(cwd, bare),
            };
        }
    };
    match home_of(cwd) {
        Some(home) => normalize("", &format!("{home}{rest}")),
        None => normalize("", bare),
    }
}

/// The path a `file://` URL names, as pi's `normalizePath` reads it (the scheme in lower case,
/// as its test is written); `None` for any other text, or a URL Node's `fileURLToPath` refuses.
fn file_url(s: &str) -> Option<String> {
    let p = pisess_formats::layout::file_url_path(s.strip_prefix("file://")?)?;
    Some(p.to_string_lossy().into_owned())
}

/// The spaces pi's path handling turns into U+0020.
fn is_unicode_space(c: char) -> bool {
    matches!(
        c,
        '\u{a0}' | '\u{2000}'..='\u{200a}' | '\u{202f}' | '\u{205f}' | '\u{3000}'
    )
}

/// The home folder an absolute `cwd` lies in, when its form says so: `/root`, `/home/NAME` or
/// `/Users/NAME` (Linux and macOS). pi expands `~` to the home folder of the machine it ran
/// on, which a session does not record; its cwd is nearly always inside it.
pub fn home_of(cwd: &str) -> Option<&str> {
    let mut parts = cwd.split('/');
    if parts.next() != Some("") {
        return None;
    }
    let first = parts.next()?;
    let end = match first {
        "root" => 1 + first.len(),
        "home" | "Users" => {
            let name = parts
                .next()
                .filter(|n| !n.is_empty() && *n != "." && *n != "..")?;
            2 + first.len() + name.len()
        }
        _ => return None,
    };
    cwd.get(..end)
}

/// `path` resolved against `cwd` (when relative) and normalised lexically: empty and `.`
/// components dropped, `..` removes the previous component (never above the root of an
/// absolute path; kept at the start of a relative one). No filesystem access.
pub fn normalize(cwd: &str, path: &str) -> String {
    let joined;
    let full = if path.starts_with('/') || cwd.is_empty() {
        path
    } else {
        joined = format!("{cwd}/{path}");
        &joined
    };
    let absolute = full.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for c in full.split('/') {
        match c {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&p) if p != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            c => parts.push(c),
        }
    }
    let body = parts.join("/");
    match (absolute, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".to_owned(),
        (false, false) => body,
    }
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[inline]
fn take_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    // Most numbers in a block are below 128: one byte.
    let byte = *b.get(*pos)?;
    if byte < 0x80 {
        *pos += 1;
        return Some(u64::from(byte));
    }
    take_long_varint(b, pos)
}

fn take_long_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    let mut shift = 0u32;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        n |= u64::from(byte & 0x7f).checked_shl(shift)?;
        if byte < 0x80 {
            return Some(n);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[inline(always)]
fn take_bytes<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let len = usize::try_from(take_varint(b, pos)?).ok()?;
    let end = pos.checked_add(len)?;
    let s = b.get(*pos..end)?;
    *pos = end;
    Some(s)
}

fn take_str<'a>(b: &'a [u8], pos: &mut usize) -> Option<&'a str> {
    std::str::from_utf8(take_bytes(b, pos)?).ok()
}

/// One hit as a block stores it (owned: what import buffers, and what a block decodes to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHit {
    /// The entry (stored row).
    pub entry: u64,
    /// Index of the operation within the entry.
    pub index: u32,
    /// What it did.
    pub op: FileOp,
    /// The last result's status ([`RESULT_NONE`], [`RESULT_OK`], [`RESULT_ERROR`]).
    pub status: u8,
    /// The tool name, or `compaction` / `branch_summary`.
    pub tool_name: String,
    /// The entry's id.
    pub entry_id: Option<String>,
    /// The tool call id (none for summary details).
    pub tool_call_id: Option<String>,
    /// The entry's timestamp as written.
    pub timestamp: Option<String>,
}

/// Encodes hits (in (entry key, op index) order, all in the chunk that starts at key `chunk`)
/// as one `file_hits` block, appended to `out`.
///
/// Layout (every number a LEB128 varint, every string its length then its bytes): the number
/// of distinct tool names and each name, in order of first use; then per hit: its entry key
/// minus the previous hit's (the first hit's: minus `chunk`), its op index, one byte (the
/// operation's code | the status << 3), the number of its tool name, and its entry id, tool
/// call id and timestamp, each front-coded against the same field of the previous hit: 0 for
/// none, else 1 + the length of the prefix it shares with the previous value (none counts as
/// empty; the prefix ends at a character boundary), then the rest of the string.
pub fn encode_block(hits: &[BlockHit], chunk: u64, out: &mut Vec<u8>) {
    let mut names: Vec<&str> = Vec::new();
    for h in hits {
        if !names.contains(&h.tool_name.as_str()) {
            names.push(&h.tool_name);
        }
    }
    put_varint(out, names.len() as u64);
    for n in &names {
        put_bytes(out, n.as_bytes());
    }
    let mut last_entry = chunk;
    let mut prev: [&str; 3] = [""; 3];
    for h in hits {
        put_varint(out, h.entry.wrapping_sub(last_entry));
        last_entry = h.entry;
        put_varint(out, u64::from(h.index));
        out.push(h.op.code() | (h.status << 3));
        let name = names.iter().position(|n| *n == h.tool_name).unwrap_or(0);
        put_varint(out, name as u64);
        let fields = [
            h.entry_id.as_deref(),
            h.tool_call_id.as_deref(),
            h.timestamp.as_deref(),
        ];
        for (p, v) in prev.iter_mut().zip(fields) {
            match v {
                None => {
                    put_varint(out, 0);
                    *p = "";
                }
                Some(v) => {
                    let mut n = p.bytes().zip(v.bytes()).take_while(|(a, b)| a == b).count();
                    while !v.is_char_boundary(n) {
                        n -= 1;
                    }
                    put_varint(out, n as u64 + 1);
                    put_bytes(out, v.get(n..).unwrap_or_default().as_bytes());
                    *p = v;
                }
            }
        }
    }
}

/// Why a block did not decode.
#[derive(Debug, Clone, Copy)]
enum BlockError {
    /// The block is not what [`encode_block`] writes.
    Malformed,
    /// Its strings would take the arena past 4 GiB.
    TooBig,
}

impl BlockError {
    /// The store error for this failure of a block that `bad` names.
    fn into_store(self, bad: impl FnOnce() -> StoreError) -> StoreError {
        match self {
            Self::Malformed => bad(),
            Self::TooBig => too_big(),
        }
    }
}

/// The error for a damaged `file_hits` block: path as written, session, chunk.
fn bad_block_at(path: &str, session: u64, chunk: u64) -> StoreError {
    corrupt(FILE_HITS_NAME, format!("{path:?} ({session}, {chunk})"))
}

/// One hit read from a block: its strings are spans of the arena [`BlockReader::next_hit`]
/// was given.
#[derive(Debug, Clone, Copy)]
struct HitView {
    entry: u64,
    index: u32,
    op: FileOp,
    status: u8,
    /// The number of the tool name in [`BlockReader::names`].
    name: usize,
    /// Entry id, tool call id, timestamp ([`NO_SPAN`]: none).
    strs: [Span; 3],
}

/// Reads a block's hits in order (see [`encode_block`]), appending their strings to an arena
/// as bytes: a string equal to the previous hit's reuses its span, another one is copied in
/// once (its shared prefix from the previous string's span). The strings are not checked for
/// UTF-8 here: the caller checks the whole arena once, and takes each span with `str::get`
/// (which refuses a span that does not start and end on character boundaries), so every
/// string it hands out is valid UTF-8 exactly when the block's strings are.
struct BlockReader<'b> {
    b: &'b [u8],
    pos: usize,
    /// The block's tool names.
    names: Vec<&'b str>,
    entry: u64,
    /// The previous hit's strings, as spans of the arena.
    prev: [Span; 3],
}

impl<'b> BlockReader<'b> {
    /// Reads the block's header.
    fn new(b: &'b [u8], chunk: u64) -> Result<Self, BlockError> {
        let mut pos = 0;
        let n = take_varint(b, &mut pos).ok_or(BlockError::Malformed)?;
        let mut names = Vec::new();
        // Each name takes at least one byte: a bad count ends at the end of the block.
        for _ in 0..n {
            names.push(take_str(b, &mut pos).ok_or(BlockError::Malformed)?);
        }
        Ok(Self {
            b,
            pos,
            names,
            entry: chunk,
            prev: [NO_SPAN; 3],
        })
    }

    /// The next hit, `None` at the end of the block. `arena` must hold what the previous
    /// calls on this block appended.
    fn next_hit(&mut self, arena: &mut Vec<u8>) -> Result<Option<HitView>, BlockError> {
        use BlockError::Malformed;
        if self.pos >= self.b.len() {
            return Ok(None);
        }
        let b = self.b;
        let pos = &mut self.pos;
        let delta = take_varint(b, pos).ok_or(Malformed)?;
        self.entry = self.entry.wrapping_add(delta);
        let index = u32::try_from(take_varint(b, pos).ok_or(Malformed)?).map_err(|_| Malformed)?;
        let code = *b.get(*pos).ok_or(Malformed)?;
        *pos += 1;
        let op = FileOp::from_code(code & 7).ok_or(Malformed)?;
        let status = code >> 3;
        if status > RESULT_ERROR {
            return Err(Malformed);
        }
        let name = usize::try_from(take_varint(b, pos).ok_or(Malformed)?).map_err(|_| Malformed)?;
        if name >= self.names.len() {
            return Err(Malformed);
        }
        let mut strs = [NO_SPAN; 3];
        for (prev, out) in self.prev.iter_mut().zip(&mut strs) {
            let tag = take_varint(b, pos).ok_or(Malformed)?;
            if tag == 0 {
                *prev = NO_SPAN;
                continue;
            }
            let shared = usize::try_from(tag - 1).map_err(|_| Malformed)?;
            let start = prev.at as usize;
            let plen = prev.len as usize;
            if shared > 0 && start + shared > arena.len() {
                return Err(Malformed);
            }
            // The shared prefix ends at a character boundary of the previous string (a byte
            // that does not continue a character, or its end).
            if shared > plen
                || (shared < plen && arena.get(start + shared).is_none_or(|&c| (c as i8) < -0x40))
            {
                return Err(Malformed);
            }
            let rest = take_bytes(b, pos).ok_or(Malformed)?;
            if prev.at != u32::MAX && shared == plen && rest.is_empty() {
                *out = *prev;
                continue;
            }
            let at = arena.len();
            let len = shared + rest.len();
            if at
                .checked_add(len)
                .is_none_or(|end| end >= u32::MAX as usize)
            {
                return Err(BlockError::TooBig);
            }
            if shared > 0 {
                arena.extend_from_within(start..start + shared);
            }
            arena.extend_from_slice(rest);
            *prev = Span {
                at: at as u32,
                len: len as u32,
            };
            *out = *prev;
        }
        Ok(Some(HitView {
            entry: self.entry,
            index,
            op,
            status,
            name,
            strs,
        }))
    }
}

/// Every hit of a block, owned (`None` when it is malformed).
pub fn decode_block(b: &[u8], chunk: u64) -> Option<Vec<BlockHit>> {
    let mut r = BlockReader::new(b, chunk).ok()?;
    let names: Vec<String> = r.names.iter().map(|n| (*n).to_owned()).collect();
    let mut arena = Vec::new();
    let mut out = Vec::new();
    let string = |arena: &[u8], s: Span| -> Option<Option<String>> {
        if s.at == u32::MAX {
            return Some(None);
        }
        let at = s.at as usize;
        let bytes = arena.get(at..at + s.len as usize)?;
        Some(Some(std::str::from_utf8(bytes).ok()?.to_owned()))
    };
    while let Some(h) = r.next_hit(&mut arena).ok()? {
        let [id, call, ts] = h.strs;
        out.push(BlockHit {
            entry: h.entry,
            index: h.index,
            op: h.op,
            status: h.status,
            tool_name: names.get(h.name)?.clone(),
            entry_id: string(&arena, id)?,
            tool_call_id: string(&arena, call)?,
            timestamp: string(&arena, ts)?,
        });
    }
    Some(out)
}

fn corrupt(table: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::Inconsistent(format!("malformed {table} value at {what}"))
}

/// One (path, session)'s hits not yet written to `file_hits`.
#[derive(Debug)]
struct PendingPair {
    resolved: String,
    chunks: BTreeMap<u64, Vec<BlockHit>>,
}

/// Hits written in this transaction and not yet in `file_hits` (path as written → session →
/// the hits by chunk), so that a block is written once per import, not once per hit. The maps
/// are looked up for every tool call and result on the import's writer thread: hashbrown's
/// foldhash, not SipHash (they are sorted before anything is written).
#[derive(Debug, Default)]
pub(crate) struct PendingHits {
    paths: hashbrown::HashMap<String, BTreeMap<u64, PendingPair>>,
    /// `tool_results` values written in this transaction and not yet in the table (session →
    /// tool call id → value): they supersede the table's, and reach it, in key order, with the
    /// hits.
    results: hashbrown::HashMap<u64, hashbrown::HashMap<String, Vec<u8>>>,
    /// Sessions with no `tool_results` rows in the table (new, or just deleted), until the
    /// next flush: their lookups stop at the pending results.
    fresh: hashbrown::HashSet<u64>,
    /// Pending hits and results.
    len: usize,
}

/// Pending hits past this many are written out (bounds an import's memory).
const PENDING_MAX: usize = 1 << 16;

impl Writer<'_> {
    /// Writes the operations of one stored row.
    pub(crate) fn write_ops(
        &mut self,
        s: SessionKey,
        key: u64,
        cwd: &str,
        entry_id: Option<&str>,
        timestamp: Option<&str>,
        ops: EntryOps,
    ) -> Result<(), StoreError> {
        if let Some((id, err)) = ops.result {
            self.record_result(s, &id, if err { RESULT_ERROR } else { RESULT_OK })?;
        }
        for (i, op) in ops.ops.into_iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let mut status = op.status.unwrap_or(RESULT_NONE);
            if op.status.is_none()
                && let Some(t) = op.tool_call_id.as_deref()
            {
                // The call's operations are listed under its id, so a later result finds them.
                // Room for what is appended below (a path's length takes at most 10 bytes).
                let mut v = self.take_result(s, t, 8 + 4 + 10 + op.path.len())?;
                status = v.first().copied().unwrap_or(RESULT_NONE);
                v.extend_from_slice(&key.to_le_bytes());
                v.extend_from_slice(&i.to_le_bytes());
                put_bytes(&mut v, op.path.as_bytes());
                self.put_result(s, t, v);
            }
            let pending = &mut self.file_pending;
            let known = pending
                .paths
                .get(op.path.as_str())
                .is_some_and(|m| m.contains_key(&s.0));
            let resolved = (!known).then(|| resolve(cwd, &op.path));
            let hit = BlockHit {
                entry: key,
                index: i,
                op: op.op,
                status,
                tool_name: op.tool_name,
                entry_id: entry_id.map(str::to_owned),
                tool_call_id: op.tool_call_id,
                timestamp: timestamp.map(str::to_owned),
            };
            pending
                .paths
                .entry(op.path)
                .or_default()
                .entry(s.0)
                .or_insert_with(|| PendingPair {
                    resolved: resolved.unwrap_or_default(),
                    chunks: BTreeMap::new(),
                })
                .chunks
                .entry(chunk_of(key))
                .or_default()
                .push(hit);
            pending.len += 1;
        }
        if self.file_pending.len >= PENDING_MAX {
            self.flush_file_hits()?;
        }
        Ok(())
    }

    /// Writes the pending hits into their blocks (merged with what the chunks already hold),
    /// and their `file_session_paths` and `file_resolved` rows. Must run before the
    /// transaction commits.
    pub(crate) fn flush_file_hits(&mut self) -> Result<(), StoreError> {
        let pending = std::mem::take(&mut self.file_pending);
        let mut results: Vec<_> = pending.results.into_iter().collect();
        results.sort_unstable_by_key(|r| r.0);
        for (s, ids) in results {
            let mut ids: Vec<_> = ids.into_iter().collect();
            ids.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            for (id, v) in ids {
                self.tool_results.insert((s, id.as_str()), v.as_slice())?;
            }
        }
        let mut paths: Vec<_> = pending.paths.into_iter().collect();
        paths.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut buf = Vec::new();
        for (path, sessions) in paths {
            let p = path.as_str();
            for (s, pair) in sessions {
                self.file_session_paths.insert((s, p), ())?;
                if pair.resolved != path {
                    self.file_resolved
                        .insert((pair.resolved.as_str(), s, p), ())?;
                }
                for (c, mut hits) in pair.chunks {
                    let old = self.file_hits.get((p, s, c))?.map(|g| g.value().to_vec());
                    if let Some(old) = old {
                        let mut all = decode_block(&old, c)
                            .ok_or_else(|| corrupt(FILE_HITS_NAME, format!("{p:?} ({s}, {c})")))?;
                        all.append(&mut hits);
                        all.sort_by_key(|h| (h.entry, h.index));
                        hits = all;
                    }
                    buf.clear();
                    encode_block(&hits, c, &mut buf);
                    self.file_hits.insert((p, s, c), buf.as_slice())?;
                }
            }
        }
        Ok(())
    }

    /// Records that session `s` has no rows in `tool_results` (a new session, or one whose
    /// rows were just deleted), so that lookups of its tool calls skip the table until the
    /// pending rows are flushed into it.
    pub(crate) fn mark_fresh(&mut self, s: SessionKey) {
        self.file_pending.fresh.insert(s.0);
    }

    /// The `tool_results` value of call `id` (pending or stored; just [`RESULT_NONE`] when
    /// there is none), removed from the pending ones: the caller puts it back with
    /// [`Self::put_result`]. A new buffer has room for `more` bytes past the value.
    fn take_result(&mut self, s: SessionKey, id: &str, more: usize) -> Result<Vec<u8>, StoreError> {
        if let Some(v) = self
            .file_pending
            .results
            .get_mut(&s.0)
            .and_then(|m| m.get_mut(id))
        {
            return Ok(std::mem::take(v));
        }
        let with = |value: &[u8]| {
            let mut v = Vec::with_capacity(value.len() + more);
            v.extend_from_slice(value);
            v
        };
        if self.file_pending.fresh.contains(&s.0) {
            return Ok(with(&[RESULT_NONE]));
        }
        Ok(match self.tool_results.get((s.0, id))? {
            Some(g) => with(g.value()),
            None => with(&[RESULT_NONE]),
        })
    }

    /// Sets the `tool_results` value of call `id` (written by [`Self::flush_file_hits`]).
    fn put_result(&mut self, s: SessionKey, id: &str, v: Vec<u8>) {
        let ids = self.file_pending.results.entry(s.0).or_default();
        match ids.get_mut(id) {
            Some(old) => *old = v,
            None => {
                ids.insert(id.to_owned(), v);
                self.file_pending.len += 1;
            }
        }
    }

    /// Records a tool result and rewrites the status of the call's operations.
    fn record_result(&mut self, s: SessionKey, id: &str, status: u8) -> Result<(), StoreError> {
        let mut v = self.take_result(s, id, 0)?;
        if v.first() == Some(&status) {
            self.put_result(s, id, v);
            return Ok(());
        }
        let bad = || corrupt(TOOL_RESULTS_NAME, format!("({s}, {id})"));
        let mut pos = 1;
        while pos < v.len() {
            let mut e = [0u8; 8];
            let mut i = [0u8; 4];
            e.copy_from_slice(v.get(pos..pos + 8).ok_or_else(bad)?);
            i.copy_from_slice(v.get(pos + 8..pos + 12).ok_or_else(bad)?);
            pos += 12;
            let path = take_str(&v, &mut pos).ok_or_else(bad)?.to_owned();
            self.set_status(
                s,
                &path,
                u64::from_le_bytes(e),
                u32::from_le_bytes(i),
                status,
            )?;
        }
        if let Some(b) = v.first_mut() {
            *b = status;
        }
        self.put_result(s, id, v);
        Ok(())
    }

    /// Sets the status of one hit, pending or in its block.
    fn set_status(
        &mut self,
        s: SessionKey,
        path: &str,
        e: u64,
        i: u32,
        status: u8,
    ) -> Result<(), StoreError> {
        let c = chunk_of(e);
        if let Some(hits) = self
            .file_pending
            .paths
            .get_mut(path)
            .and_then(|m| m.get_mut(&s.0))
            .and_then(|p| p.chunks.get_mut(&c))
            && let Ok(n) = hits.binary_search_by_key(&(e, i), |h| (h.entry, h.index))
            && let Some(h) = hits.get_mut(n)
        {
            h.status = status;
            return Ok(());
        }
        let missing = || {
            StoreError::Inconsistent(format!(
                "tool result of session {s} names missing op ({e}, {i}) of {path:?}"
            ))
        };
        let old = self
            .file_hits
            .get((path, s.0, c))?
            .map(|g| g.value().to_vec());
        let old = old.ok_or_else(missing)?;
        let mut hits = decode_block(&old, c)
            .ok_or_else(|| corrupt(FILE_HITS_NAME, format!("{path:?} ({s}, {c})")))?;
        let h = hits
            .iter_mut()
            .find(|h| (h.entry, h.index) == (e, i))
            .ok_or_else(missing)?;
        h.status = status;
        let mut buf = Vec::new();
        encode_block(&hits, c, &mut buf);
        self.file_hits.insert((path, s.0, c), buf.as_slice())?;
        Ok(())
    }
}

/// Rewrites the `file_resolved` rows that schema `from` (13 or 14) resolved differently from
/// [`resolve`]; returns how many paths changed. Schema 13 joined paths written with a leading
/// `@`, a `~` or a Unicode space to the cwd as they were; 13 and 14 did the same with `file://`
/// URLs, in the path or as the session's cwd. Run once, in the transaction that moves such a
/// store to the current schema.
pub(crate) fn upgrade_resolved(tx: &redb::WriteTransaction, from: u64) -> Result<u64, StoreError> {
    let old_of = |c: &str, p: &str| {
        if from <= 13 {
            normalize(c, p)
        } else {
            resolve_v14(c, p)
        }
    };
    let differs = |p: &str| {
        (from <= 13 && (p.starts_with(['@', '~']) || p.chars().any(is_unicode_space)))
            || p.contains("file://")
    };
    let sessions = tx.open_table(crate::schema::SESSIONS)?;
    let mut pairs = Vec::new();
    let mut cwd: Option<(u64, Option<String>)> = None;
    for row in tx.open_table(FILE_SESSION_PATHS)?.iter()? {
        let (k, _) = row?;
        let (s, p) = k.value();
        if cwd.as_ref().is_none_or(|c| c.0 != s) {
            let rec = match sessions.get(s)? {
                Some(r) => Some(crate::record::decode_session(r.value().bytes(), s)?.cwd),
                // A path row without its session: verify reports it; nothing to resolve.
                None => None,
            };
            cwd = Some((s, rec));
        }
        let Some((_, Some(c))) = &cwd else {
            continue;
        };
        if differs(p) || c.starts_with("file://") {
            pairs.push((s, c.clone(), p.to_owned()));
        }
    }
    let mut resolved = tx.open_table(FILE_RESOLVED)?;
    let mut changed = 0;
    for (s, c, p) in &pairs {
        let (old, new) = (old_of(c, p), resolve(c, p));
        if old == new {
            continue;
        }
        if old != *p {
            resolved.remove((old.as_str(), *s, p.as_str()))?;
        }
        if new != *p {
            resolved.insert((new.as_str(), *s, p.as_str()), ())?;
        }
        changed += 1;
    }
    Ok(changed)
}

/// Removes a session's operations and tool results (`cwd` is the session's, which resolved
/// its paths).
pub(crate) fn delete_session_ops(
    w: &mut Writer<'_>,
    s: SessionKey,
    cwd: &str,
) -> Result<(), StoreError> {
    let pending = &mut w.file_pending;
    for m in pending.paths.values_mut() {
        if let Some(p) = m.remove(&s.0) {
            pending.len = pending
                .len
                .saturating_sub(p.chunks.values().map(Vec::len).sum::<usize>());
        }
    }
    if let Some(ids) = pending.results.remove(&s.0) {
        pending.len = pending.len.saturating_sub(ids.len());
    }
    let range = (s.0, "")..(s.0.saturating_add(1), "");
    let mut paths = Vec::new();
    for row in w.file_session_paths.range(range.clone())? {
        paths.push(row?.0.value().1.to_owned());
    }
    for p in &paths {
        let p = p.as_str();
        w.file_hits
            .retain_in((p, s.0, 0)..=(p, s.0, u64::MAX), |_, _| false)?;
        let r = resolve(cwd, p);
        if r != p {
            w.file_resolved.remove((r.as_str(), s.0, p))?;
        }
    }
    w.file_session_paths.retain_in(range, |_, _| false)?;
    w.tool_results
        .retain_in((s.0, "")..(s.0.saturating_add(1), ""), |_, _| false)?;
    Ok(())
}

/// One file operation found by a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileHit {
    /// The session.
    pub session: SessionKey,
    /// The entry (stored row).
    pub entry: EntryKey,
    /// Index of the operation within the entry.
    pub index: u32,
    /// The entry's id.
    pub entry_id: Option<String>,
    /// The tool call id (none for summary details).
    pub tool_call_id: Option<String>,
    /// The tool name, or `compaction` / `branch_summary`.
    pub tool_name: String,
    /// What it did.
    pub op: FileOp,
    /// The path as written.
    pub path: String,
    /// The path resolved against the session cwd and normalised.
    pub resolved: String,
    /// The entry's timestamp as written.
    pub timestamp: Option<String>,
    /// Whether the tool result was an error (`None`: no result with this tool call id).
    pub is_error: Option<bool>,
    /// Whether the entry is on the session's active path (leaf → root).
    pub active: bool,
}

/// One file operation found by a query, borrowed from its [`FileHits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHitRef<'a> {
    /// The session.
    pub session: SessionKey,
    /// The entry (stored row).
    pub entry: EntryKey,
    /// Index of the operation within the entry.
    pub index: u32,
    /// The entry's id.
    pub entry_id: Option<&'a str>,
    /// The tool call id (none for summary details).
    pub tool_call_id: Option<&'a str>,
    /// The tool name, or `compaction` / `branch_summary`.
    pub tool_name: &'a str,
    /// What it did.
    pub op: FileOp,
    /// The path as written.
    pub path: &'a str,
    /// The path resolved against the session cwd and normalised.
    pub resolved: &'a str,
    /// The entry's timestamp as written.
    pub timestamp: Option<&'a str>,
    /// Whether the tool result was an error (`None`: no result with this tool call id).
    pub is_error: Option<bool>,
    /// Whether the entry is on the session's active path (leaf → root).
    pub active: bool,
}

impl FileHitRef<'_> {
    /// An owned copy.
    pub fn to_owned_hit(&self) -> FileHit {
        FileHit {
            session: self.session,
            entry: self.entry,
            index: self.index,
            entry_id: self.entry_id.map(str::to_owned),
            tool_call_id: self.tool_call_id.map(str::to_owned),
            tool_name: self.tool_name.to_owned(),
            op: self.op,
            path: self.path.to_owned(),
            resolved: self.resolved.to_owned(),
            timestamp: self.timestamp.map(str::to_owned),
            is_error: self.is_error,
            active: self.active,
        }
    }
}

/// Where a string sits in [`FileHits::arena`] (`at == u32::MAX`: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    at: u32,
    len: u32,
}

const NO_SPAN: Span = Span {
    at: u32::MAX,
    len: 0,
};

/// One found hit: its fields, strings as spans of [`FileHits::arena`].
#[derive(Debug, Clone, Copy)]
struct HitRow {
    entry: u64,
    session: u64,
    index: u32,
    op: FileOp,
    status: u8,
    active: bool,
    path: Span,
    resolved: Span,
    tool_name: Span,
    /// Entry id, tool call id, timestamp.
    strs: [Span; 3],
}

/// The hits of a query, in (entry key, op index) order, each once: their strings copied into
/// one buffer (a path, a resolved path or a tool name once per block, an id or timestamp once
/// per run of equal values).
#[derive(Debug, Default)]
pub struct FileHits {
    arena: String,
    rows: Vec<HitRow>,
    /// The hits to report, as indexes into `rows`, in (entry key, op index) order.
    order: Vec<u32>,
}

impl FileHits {
    /// Number of hits.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there is no hit.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The hits, in (entry key, op index) order.
    pub fn iter(&self) -> impl Iterator<Item = Result<FileHitRef<'_>, StoreError>> + '_ {
        self.ordered().map(|r| self.hit(r))
    }

    fn ordered(&self) -> impl Iterator<Item = &HitRow> + '_ {
        self.order.iter().filter_map(|&n| self.rows.get(n as usize))
    }

    /// The sessions of the hits, each once, in the order of their first hit.
    pub fn sessions(&self) -> Vec<SessionKey> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for r in self.ordered() {
            if out.last() != Some(&SessionKey(r.session)) && seen.insert(r.session) {
                out.push(SessionKey(r.session));
            }
        }
        out
    }

    fn hit(&self, r: &HitRow) -> Result<FileHitRef<'_>, StoreError> {
        let bad = || corrupt(FILE_HITS_NAME, format!("({}, {})", r.entry, r.index));
        let a = self.arena.as_str();
        let [id, call, ts] = r.strs;
        Ok(FileHitRef {
            session: SessionKey(r.session),
            entry: EntryKey(r.entry),
            index: r.index,
            entry_id: get_opt(a, id).ok_or_else(bad)?,
            tool_call_id: get_opt(a, call).ok_or_else(bad)?,
            tool_name: get_span(a, r.tool_name).ok_or_else(bad)?,
            op: r.op,
            path: get_span(a, r.path).ok_or_else(bad)?,
            resolved: get_span(a, r.resolved).ok_or_else(bad)?,
            timestamp: get_opt(a, ts).ok_or_else(bad)?,
            is_error: is_error(r.status),
            active: r.active,
        })
    }

    /// Owned copies of every hit.
    pub fn to_vec(&self) -> Result<Vec<FileHit>, StoreError> {
        self.iter().map(|h| h.map(|h| h.to_owned_hit())).collect()
    }

    /// Adds the hits of one block to `rows`, their strings to `arena` (as bytes, checked when
    /// the arena becomes [`Self::arena`]).
    fn push_block(
        arena: &mut Vec<u8>,
        rows: &mut Vec<HitRow>,
        block: &[u8],
        (p, session, chunk): (&str, u64, u64),
        path: Span,
        resolved: Span,
    ) -> Result<(), StoreError> {
        let bad = || bad_block_at(p, session, chunk);
        let fail = |e: BlockError| e.into_store(bad);
        let mut r = BlockReader::new(block, chunk).map_err(fail)?;
        let mut names = Vec::with_capacity(r.names.len());
        for n in &r.names {
            names.push(push_span(arena, n.as_bytes())?);
        }
        while let Some(h) = r.next_hit(arena).map_err(fail)? {
            rows.push(HitRow {
                entry: h.entry,
                session,
                index: h.index,
                op: h.op,
                status: h.status,
                active: false,
                path,
                resolved,
                tool_name: names.get(h.name).copied().ok_or_else(bad)?,
                strs: h.strs,
            });
        }
        Ok(())
    }
}

/// Which hits a query keeps.
#[derive(Debug, Clone, Default)]
pub struct FileFilter {
    /// Only this session.
    pub session: Option<SessionKey>,
    /// Only these operations (empty: all).
    pub ops: Vec<FileOp>,
    /// Only entries on their session's active path.
    pub active_only: bool,
    /// Only hits whose entry's timestamp is at or after this time (milliseconds since the
    /// epoch, UTC); with it, a hit whose timestamp is missing or unreadable is left out.
    pub since_ms: Option<i64>,
}

impl FileFilter {
    /// Whether a hit with this operation and timestamp passes the operation and time filters
    /// (the session and active-path filters are applied elsewhere).
    fn admits(&self, op: FileOp, timestamp: Option<&str>) -> bool {
        (self.ops.is_empty() || self.ops.contains(&op))
            && self.since_ms.is_none_or(|since| {
                timestamp
                    .and_then(crate::import::iso_to_ms)
                    .is_some_and(|t| t >= since)
            })
    }
}

/// What a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileQuery<'q> {
    /// The path exactly.
    Exact(&'q str),
    /// The path as a folder: itself and everything under it (trailing slashes are ignored).
    Under(&'q str),
    /// A glob: `*` and `?` stay within a path component, `**` crosses them.
    Glob(&'q str),
}

/// Why a file query failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileQueryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The output could not be written.
    #[error("cannot write the output")]
    Write(#[source] std::io::Error),
    /// The glob does not parse.
    #[error("invalid glob {glob:?}")]
    Glob {
        /// The glob.
        glob: String,
        /// Why.
        #[source]
        source: globset::Error,
    },
}

/// The cwd of each session a query met (looked up once per session).
#[derive(Default)]
struct Cwds(HashMap<u64, String>);

impl Cwds {
    fn get(&mut self, snap: &Snapshot, s: u64) -> Result<&str, StoreError> {
        if let std::collections::hash_map::Entry::Vacant(v) = self.0.entry(s) {
            v.insert(
                snap.session(SessionKey(s))?
                    .map(|r| r.cwd)
                    .unwrap_or_default(),
            );
        }
        Ok(self.0.get(&s).map_or("", String::as_str))
    }
}

/// A block a query's scan found (its hits are decoded later).
struct FoundBlock {
    chunk: u64,
    session: u64,
    /// The path as written: its number in [`FileScan::paths`].
    path: u32,
    /// The resolved path's number when the scan found it in `file_resolved` (otherwise it is
    /// computed from the session's cwd).
    resolved: Option<u32>,
    value: redb::AccessGuard<'static, &'static [u8]>,
}

/// The blocks of a query's hits, found by its range scans and not yet decoded:
/// [`FileScan::collect`] gathers the hits, [`FileScan::stream`] renders them in order.
pub struct FileScan<'s> {
    snap: &'s Snapshot,
    filter: FileFilter,
    /// The paths (as written or resolved) the blocks name.
    paths: Vec<String>,
    /// The key ranges to read, in order (emptied by [`Snapshot::read_ranges`]).
    ranges: Vec<ScanRange>,
    blocks: Vec<FoundBlock>,
}

/// A key range of `file_hits` a query reads: every block of one path as written in the
/// sessions `sessions` (inclusive).
struct ScanRange {
    /// The path as written: its number in [`FileScan::paths`].
    path: u32,
    sessions: (u64, u64),
    /// As [`FoundBlock::resolved`].
    resolved: Option<u32>,
}

/// How [`FileScan::stream`] renders hits.
pub trait RenderHit: Sync {
    /// Appends the part of a hit's output that depends on its session only: made once per
    /// session, and given to [`Self::hit`] for each of its hits.
    fn session(&self, s: SessionKey, out: &mut Vec<u8>);
    /// Appends the part of a hit's output that depends only on its tool name, operation and
    /// paths (as written and resolved): made once per block for each (tool, operation) in it,
    /// and given to [`Self::hit`] for each of its hits.
    fn part(&self, tool: &str, op: FileOp, path: &str, resolved: &str, out: &mut Vec<u8>);
    /// Whether a job's entry ids, tool call ids and timestamps may be written as they are:
    /// called once per job, on the thread that then renders its hits, with a string that
    /// holds every one of those (each hit's three are slices of it; it also holds resolved
    /// paths that differ from the paths as written), so that a renderer that escapes strings
    /// checks them once, not once per hit. Tool names and paths are not covered: they reach
    /// [`Self::part`], never this. What it returns is handed to [`Self::hit`] for each hit of
    /// the job. The default says no, without looking.
    fn plain(&self, strings: &str) -> bool {
        let _ = strings;
        false
    }
    /// Appends a hit's output (`session` and `part`: what [`Self::session`] and
    /// [`Self::part`] made for it; `plain`: what [`Self::plain`] said of its job's strings).
    fn hit(&self, h: &FileHitRef<'_>, session: &[u8], part: &[u8], plain: bool, out: &mut Vec<u8>);
}

/// The sizes [`FileScan::stream_with`] works with.
#[derive(Debug, Clone)]
pub struct StreamOptions {
    /// Below this many bytes of blocks, the hits are decoded on the calling thread.
    pub inline_below: usize,
    /// Bytes of output a worker gathers before handing them to the writer.
    pub buffer: usize,
    /// Output buffers that may be filled and not yet written: beyond them, a worker ahead of
    /// the writer waits (the worker on the chunk being written never does).
    pub buffers: usize,
}

impl Default for StreamOptions {
    fn default() -> Self {
        Self {
            inline_below: 1 << 18,
            buffer: 1 << 18,
            buffers: 32,
        }
    }
}

/// What [`FileScan::stream`] knows of a session: its cwd, its active path's key ranges and
/// what [`RenderHit::session`] made for it.
struct SessionFacts {
    cwd: String,
    runs: Vec<(u64, u64)>,
    head: Vec<u8>,
}

/// What every [`FileScan::stream`] job reads.
#[derive(Clone, Copy)]
struct JobContext<'c> {
    /// By session key.
    facts: &'c [(u64, SessionFacts)],
    emit: &'c dyn RenderHit,
    /// Output bytes gathered before they are handed on.
    buffer: usize,
}

/// A block of a [`FileScan::stream`] job.
#[derive(Clone, Copy)]
struct JobBlock<'a> {
    /// The block's number in [`FileScan::blocks`].
    n: u32,
    /// Its session's number in [`JobContext::facts`] (`usize::MAX`: none).
    fact: usize,
    path: &'a str,
    /// The resolved path in [`Scratch::arena`]; `None`: the path as written.
    resolved: Option<Span>,
}

/// A hit of a [`FileScan::stream`] job, its strings as spans of the job's arena.
#[derive(Clone, Copy)]
struct JobRow {
    entry: u64,
    index: u32,
    /// The number of its block in [`Scratch::blocks`].
    block: u32,
    /// The number of its [`RenderHit::part`] in [`Scratch::parts`], which names its tool.
    part: u32,
    op: FileOp,
    status: u8,
    /// Entry id, tool call id, timestamp.
    strs: [Span; 3],
}

/// A [`FileScan::stream`] worker's buffers, reused from job to job.
#[derive(Default)]
struct Scratch<'a> {
    /// The job's strings, as bytes until every block is read, then checked as UTF-8 once.
    arena: Vec<u8>,
    /// Where each block's strings begin in `arena`, with the block's number.
    starts: Vec<(usize, u32)>,
    /// The [`RenderHit::part`] outputs of the job.
    text: Vec<u8>,
    /// Each (block, tool name, operation)'s [`RenderHit::part`]: the tool name's number in
    /// `names`, the operation, the output in `text`.
    parts: Vec<(u32, FileOp, Span)>,
    names: Vec<&'a str>,
    blocks: Vec<JobBlock<'a>>,
    rows: Vec<JobRow>,
    keys: Vec<(u64, u32, u32)>,
    packed: Vec<u64>,
    /// [`sort_by_high_half`]'s second buffer.
    spare: Vec<u64>,
    /// The rows to render, in order.
    order: Vec<u32>,
}

/// What [`FileScan::stream`]'s writer and workers share, behind one lock.
struct Flow {
    /// Jobs completely written (and so the job being written).
    written: usize,
    /// Buffers handed out and not yet given back.
    lent: usize,
    free: Vec<Vec<u8>>,
    /// Set by the writer when it stops: workers stop at their next buffer.
    stop: bool,
    /// Each job's rendered buffers, in order, not yet written.
    ready: Vec<std::collections::VecDeque<Vec<u8>>>,
    /// Each finished job's number of hits.
    counts: Vec<Option<usize>>,
    /// The first worker's error.
    failed: Option<StoreError>,
    /// Workers still running.
    live: usize,
    /// Whether the writer waits for the job it is writing.
    writer_waits: bool,
    /// Workers waiting for a buffer.
    lenders_wait: usize,
}

impl Flow {
    /// A buffer for output, counted as lent: a free one, else a new one of about `size` bytes
    /// when fewer than `limit` are lent or `always`; `None` otherwise.
    fn take_buffer(&mut self, size: usize, limit: usize, always: bool) -> Option<Vec<u8>> {
        let b = match self.free.pop() {
            Some(b) => b,
            None if always || self.lent < limit => new_buffer(size),
            None => return None,
        };
        self.lent += 1;
        Some(b)
    }
}

/// An output buffer that holds `size` bytes and the line that passes it.
fn new_buffer(size: usize) -> Vec<u8> {
    Vec::with_capacity(size + (size >> 3))
}

/// [`FileScan::stream`]'s calling thread: the only one that writes, in job order, and which
/// renders jobs of its own between writes.
struct Output<'a> {
    flow: &'a std::sync::Mutex<Flow>,
    wake_writer: &'a std::sync::Condvar,
    wake_lenders: &'a std::sync::Condvar,
    sink: &'a mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    /// The job being written (`Flow::written`).
    cur: usize,
    /// Hits of the jobs written.
    total: usize,
    /// Buffers taken from the queue to write outside the lock.
    taken: Vec<Vec<u8>>,
    buffers: usize,
    buffer: usize,
}

type FlowGuard<'a> = std::sync::MutexGuard<'a, Flow>;

impl<'a> Output<'a> {
    fn lost(&self) -> FileQueryError {
        self.wake_lenders.notify_all();
        StoreError::Inconsistent("a file query's state was lost".into()).into()
    }

    fn lock(&self) -> Result<FlowGuard<'a>, FileQueryError> {
        self.flow.lock().map_err(|_| self.lost())
    }

    /// Writes every buffer ready for the job being written, moving on past finished jobs,
    /// until the job being written has nothing ready (or every job is written).
    fn drain(&mut self, mut g: FlowGuard<'a>) -> Result<FlowGuard<'a>, FileQueryError> {
        loop {
            if let Some(e) = g.failed.take() {
                return Err(e.into());
            }
            if let Some(q) = g.ready.get_mut(self.cur).filter(|q| !q.is_empty()) {
                self.taken.extend(q.drain(..));
                drop(g);
                let mut wrote = Ok(());
                for b in &self.taken {
                    wrote = (self.sink)(b);
                    if wrote.is_err() {
                        break;
                    }
                }
                g = self.lock()?;
                for mut b in self.taken.drain(..) {
                    b.clear();
                    g.lent = g.lent.saturating_sub(1);
                    g.free.push(b);
                }
                if g.lenders_wait > 0 {
                    self.wake_lenders.notify_all();
                }
                wrote.map_err(FileQueryError::Write)?;
                continue;
            }
            if let Some(n) = g.counts.get(self.cur).copied().flatten() {
                self.total += n;
                self.cur += 1;
                g.written = self.cur;
                if g.lenders_wait > 0 {
                    self.wake_lenders.notify_all();
                }
                continue;
            }
            return Ok(g);
        }
    }

    /// Waits until something changes for the job being written (an error if every worker
    /// has left without finishing it).
    fn wait(&self, mut g: FlowGuard<'a>) -> Result<FlowGuard<'a>, FileQueryError> {
        if g.live == 0 && g.counts.get(self.cur).is_some_and(Option::is_none) {
            return Err(
                StoreError::Inconsistent("a file query's workers stopped early".into()).into(),
            );
        }
        g.writer_waits = true;
        let mut g = self.wake_writer.wait(g).map_err(|_| self.lost())?;
        g.writer_waits = false;
        Ok(g)
    }

    /// Takes `b`, the next output of the calling thread's own job `j`: writes it at once if
    /// `j` is the job being written (after what was ready before it), else queues it and
    /// leaves a fresh buffer in `b`. Never waits for a buffer while the job being written has
    /// output to write, so the thread that writes never waits on itself.
    fn take_own(&mut self, j: usize, b: &mut Vec<u8>) -> Result<(), FileQueryError> {
        loop {
            let mut g = self.drain(self.lock()?)?;
            if j == self.cur {
                drop(g);
                (self.sink)(b).map_err(FileQueryError::Write)?;
                b.clear();
                return Ok(());
            }
            if let Some(fresh) = g.take_buffer(self.buffer, self.buffers, false) {
                let full = std::mem::replace(b, fresh);
                if let Some(q) = g.ready.get_mut(j) {
                    q.push_back(full);
                }
                return Ok(());
            }
            drop(self.wait(g)?);
        }
    }
}

/// Counts a [`FileScan::stream`] worker out when it ends, however it ends.
struct Leave<'a> {
    flow: &'a std::sync::Mutex<Flow>,
    wake: &'a std::sync::Condvar,
}

/// The flow's lock, taken even when another thread panicked holding it (the drop guards below
/// must do their part however the threads ended).
fn lock_anyway(flow: &std::sync::Mutex<Flow>) -> FlowGuard<'_> {
    flow.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        let mut g = lock_anyway(self.flow);
        g.live = g.live.saturating_sub(1);
        // A worker that panics leaves its job unfinished: the writer must not wait for it.
        if std::thread::panicking() && g.failed.is_none() {
            g.failed = Some(StoreError::Inconsistent(
                "a file query's worker panicked".into(),
            ));
        }
        if g.writer_waits && (g.live == 0 || g.failed.is_some()) {
            self.wake.notify_one();
        }
    }
}

/// Tells [`FileScan::stream`]'s workers to stop when the calling thread leaves, however it
/// leaves.
struct Stop<'a> {
    flow: &'a std::sync::Mutex<Flow>,
    wake: &'a std::sync::Condvar,
}

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        let mut g = lock_anyway(self.flow);
        g.stop = true;
        drop(g);
        self.wake.notify_all();
    }
}

fn too_big() -> StoreError {
    StoreError::Inconsistent("a file query's strings pass 4 GiB".into())
}

/// Copies bytes into an arena.
fn push_span(arena: &mut Vec<u8>, s: &[u8]) -> Result<Span, StoreError> {
    let at = u32::try_from(arena.len()).map_err(|_| too_big())?;
    let len = u32::try_from(s.len()).map_err(|_| too_big())?;
    if at.checked_add(len).is_none_or(|end| end == u32::MAX) {
        return Err(too_big());
    }
    arena.extend_from_slice(s);
    Ok(Span { at, len })
}

/// A span's string; `None` for [`NO_SPAN`] or a span that is not a string of the arena.
fn get_span(arena: &str, s: Span) -> Option<&str> {
    if s.at == u32::MAX {
        return None;
    }
    let at = s.at as usize;
    arena.get(at..at + s.len as usize)
}

/// A span's string, `Some(None)` for [`NO_SPAN`]; `None` for a span that is not a string of
/// the arena (a damaged block's).
fn get_opt(arena: &str, s: Span) -> Option<Option<&str>> {
    if s.at == u32::MAX {
        return Some(None);
    }
    get_span(arena, s).map(Some)
}

/// Which block's strings hold arena offset `at`: `starts` gives the offset where each block's
/// strings begin (ascending), with the block's number.
fn block_at(starts: &[(usize, u32)], at: usize) -> u32 {
    let k = starts.partition_point(|&(start, _)| start <= at);
    k.checked_sub(1)
        .and_then(|k| starts.get(k))
        .map_or(0, |&(_, n)| n)
}

impl<'s> FileScan<'s> {
    fn new(snap: &'s Snapshot, f: &FileFilter) -> Self {
        Self {
            snap,
            filter: f.clone(),
            paths: Vec::new(),
            ranges: Vec::new(),
            blocks: Vec::new(),
        }
    }

    fn intern(&mut self, p: &str) -> Result<u32, StoreError> {
        let n = u32::try_from(self.paths.len())
            .map_err(|_| StoreError::Inconsistent("a file query met over 2^32 paths".into()))?;
        self.paths.push(p.to_owned());
        Ok(n)
    }

    fn path(&self, n: u32) -> Result<&str, StoreError> {
        self.paths
            .get(n as usize)
            .map(String::as_str)
            .ok_or_else(|| StoreError::Inconsistent("a file query lost a path".into()))
    }

    /// The sessions of the found blocks, each once, in key order.
    pub fn sessions(&self) -> Vec<SessionKey> {
        let mut out: Vec<u64> = self.blocks.iter().map(|b| b.session).collect();
        out.sort_unstable();
        out.dedup();
        out.into_iter().map(SessionKey).collect()
    }

    /// Decodes every block: the hits, each once, in (entry key, op index) order.
    pub fn collect(self) -> Result<FileHits, StoreError> {
        let mut arena = Vec::new();
        let mut rows = Vec::new();
        // Where each block's strings begin in the arena.
        let mut starts = Vec::with_capacity(self.blocks.len());
        let mut cwds = Cwds::default();
        // The last block's (path, session) and their spans.
        let mut last: Option<(u32, u64, Span, Span)> = None;
        for (b, n) in self.blocks.iter().zip(0u32..) {
            let p = self.path(b.path)?;
            starts.push((arena.len(), n));
            let (path, resolved) = match last {
                Some((lp, ls, x, r)) if lp == b.path && ls == b.session => (x, r),
                _ => {
                    let x = push_span(&mut arena, p.as_bytes())?;
                    let r = match b.resolved {
                        Some(r) => push_span(&mut arena, self.path(r)?.as_bytes())?,
                        None => {
                            let r = resolve(cwds.get(self.snap, b.session)?, p);
                            if r == p {
                                x
                            } else {
                                push_span(&mut arena, r.as_bytes())?
                            }
                        }
                    };
                    last = Some((b.path, b.session, x, r));
                    (x, r)
                }
            };
            FileHits::push_block(
                &mut arena,
                &mut rows,
                b.value.value(),
                (p, b.session, b.chunk),
                path,
                resolved,
            )?;
        }
        let arena = String::from_utf8(arena)
            .map_err(|e| self.bad_block(block_at(&starts, e.utf8_error().valid_up_to())))?;
        let f = &self.filter;
        if !f.ops.is_empty() || f.since_ms.is_some() {
            let mut damaged = None;
            rows.retain(|r| match get_opt(&arena, r.strs[2]) {
                Some(ts) => f.admits(r.op, ts),
                None => {
                    damaged = Some((r.entry, r.index));
                    false
                }
            });
            if let Some((e, i)) = damaged {
                return Err(corrupt(FILE_HITS_NAME, format!("({e}, {i})")));
            }
        }
        let mut out = FileHits {
            arena,
            rows,
            order: Vec::new(),
        };
        self.snap.finish_hits(&mut out, f)?;
        Ok(out)
    }

    /// The error for block `n`, which is damaged.
    fn bad_block(&self, n: u32) -> StoreError {
        match self.blocks.get(n as usize) {
            Some(b) => bad_block_at(self.path(b.path).unwrap_or_default(), b.session, b.chunk),
            None => corrupt(FILE_HITS_NAME, "a query's blocks"),
        }
    }

    /// Renders every hit, each once, in (entry key, op index) order: `emit` appends each hit's
    /// output to a buffer, `sink` receives the output in order, in large pieces. Returns the
    /// number of hits.
    ///
    /// The blocks are decoded, ordered and rendered one chunk ([`CHUNK`] entry keys) at a time
    /// (a hit lies in its entry's chunk, so the chunks' outputs follow each other), chunks in
    /// parallel on the rayon pool and the calling thread; the output is written by the calling
    /// thread.
    pub fn stream(
        &self,
        emit: &dyn RenderHit,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
    ) -> Result<usize, FileQueryError> {
        self.stream_with(emit, sink, &StreamOptions::default())
    }

    /// [`Self::stream`] with its sizes chosen (tests use small ones to exercise the parallel
    /// path on little data).
    pub fn stream_with(
        &self,
        emit: &dyn RenderHit,
        sink: &mut dyn FnMut(&[u8]) -> std::io::Result<()>,
        opt: &StreamOptions,
    ) -> Result<usize, FileQueryError> {
        use rayon::prelude::*;
        // Jobs: the blocks by chunk.
        let mut order: Vec<u32> = (0..self.blocks.len())
            .map(|n| u32::try_from(n).unwrap_or(u32::MAX))
            .collect();
        order.sort_by_key(|&n| self.blocks.get(n as usize).map_or(u64::MAX, |b| b.chunk));
        let jobs: Vec<&[u32]> = order
            .chunk_by(|&a, &b| {
                self.blocks.get(a as usize).map(|x| x.chunk)
                    == self.blocks.get(b as usize).map(|x| x.chunk)
            })
            .collect();
        let bytes: usize = self.blocks.iter().map(|b| b.value.value().len()).sum();
        let inline = bytes < opt.inline_below || rayon::current_num_threads() < 2;
        let sessions = self.sessions();
        let facts = |s: &SessionKey| -> Result<(u64, SessionFacts), StoreError> {
            let cwd = self.snap.session(*s)?.map(|r| r.cwd).unwrap_or_default();
            let mut head = Vec::new();
            emit.session(*s, &mut head);
            Ok((
                s.0,
                SessionFacts {
                    cwd,
                    runs: self.snap.active_runs(*s)?,
                    head,
                },
            ))
        };
        let facts: Vec<(u64, SessionFacts)> = if inline {
            sessions.iter().map(facts).collect::<Result<_, _>>()?
        } else {
            sessions.par_iter().map(facts).collect::<Result<_, _>>()?
        };
        let cx = JobContext {
            facts: &facts,
            emit,
            buffer: opt.buffer,
        };
        if inline {
            let mut st = Scratch::default();
            let mut buf = Vec::new();
            let mut total = 0;
            let mut failed = None;
            for job in &jobs {
                let mut flush = |b: &mut Vec<u8>| match sink(b) {
                    Ok(()) => {
                        b.clear();
                        true
                    }
                    Err(e) => {
                        failed = Some(e);
                        false
                    }
                };
                match self.render_job(job, &cx, &mut st, &mut buf, &mut flush)? {
                    Some(n) => total += n,
                    None => break,
                }
            }
            if let Some(e) = failed {
                return Err(FileQueryError::Write(e));
            }
            sink(&buf).map_err(FileQueryError::Write)?;
            return Ok(total);
        }
        let flow = std::sync::Mutex::new(Flow {
            written: 0,
            lent: 0,
            free: Vec::new(),
            stop: false,
            ready: (0..jobs.len()).map(|_| Default::default()).collect(),
            counts: vec![None; jobs.len()],
            failed: None,
            live: 0,
            writer_waits: false,
            lenders_wait: 0,
        });
        // The writer waits on `wake_writer`, only ever for the job it is writing; lenders wait
        // on `wake_lenders`. Each is notified only when someone waits on it.
        let wake_writer = std::sync::Condvar::new();
        let wake_lenders = std::sync::Condvar::new();
        let next = std::sync::atomic::AtomicUsize::new(0);
        // The calling thread renders too, beside one fewer pool thread.
        let workers = rayon::current_num_threads()
            .saturating_sub(1)
            .min(jobs.len());
        if let Ok(mut g) = flow.lock() {
            g.live = workers;
        }
        // Tells the writer what changed for job `j`, if it waits for that job.
        let tell = |g: &Flow, j: usize| {
            if g.writer_waits && (j == g.written || g.failed.is_some()) {
                wake_writer.notify_one();
            }
        };
        // A buffer for job `j`, `None` once the writer has stopped.
        let lend = |j: usize| -> Option<Vec<u8>> {
            let mut g = flow.lock().ok()?;
            loop {
                if g.stop {
                    return None;
                }
                // The job being written always gets one, so that it never waits.
                let always = j == g.written;
                if let Some(b) = g.take_buffer(opt.buffer, opt.buffers, always) {
                    return Some(b);
                }
                g.lenders_wait += 1;
                g = wake_lenders.wait(g).ok()?;
                g.lenders_wait -= 1;
            }
        };
        // Hands job `j`'s next buffer to the writer, and with its last one (`done`), the job's
        // number of hits. False once the writer has stopped.
        let deliver = |j: usize, b: Vec<u8>, done: Option<usize>| -> bool {
            let Ok(mut g) = flow.lock() else {
                return false;
            };
            if let Some(q) = g.ready.get_mut(j) {
                q.push_back(b);
            }
            if let Some(c) = g.counts.get_mut(j) {
                *c = c.or(done);
            }
            tell(&g, j);
            !g.stop
        };
        let work = || {
            // Counts this worker out however it ends (an unwinding panic included), so that a
            // writer waiting for a job nobody will finish learns of it.
            let _out = Leave {
                flow: &flow,
                wake: &wake_writer,
            };
            let mut st = Scratch::default();
            loop {
                let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(j) else {
                    return;
                };
                let Some(mut buf) = lend(j) else {
                    return;
                };
                let mut flush = |b: &mut Vec<u8>| {
                    let Some(fresh) = lend(j) else {
                        return false;
                    };
                    deliver(j, std::mem::replace(b, fresh), None)
                };
                match self.render_job(job, &cx, &mut st, &mut buf, &mut flush) {
                    Ok(Some(n)) => {
                        if !deliver(j, buf, Some(n)) {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        if let Ok(mut g) = flow.lock() {
                            g.failed.get_or_insert(e);
                            tell(&g, j);
                        }
                        return;
                    }
                }
            }
        };
        let mut result: Result<usize, FileQueryError> = Ok(0);
        rayon::in_place_scope(|scope| {
            // However the calling thread leaves this scope (an unwinding panic included), the
            // workers are told to stop, so that none waits forever for a buffer and the scope
            // ends.
            let _stop = Stop {
                flow: &flow,
                wake: &wake_lenders,
            };
            for _ in 0..workers {
                let work = &work;
                scope.spawn(move |_| work());
            }
            let mut w = Output {
                flow: &flow,
                wake_writer: &wake_writer,
                wake_lenders: &wake_lenders,
                sink: &mut *sink,
                cur: 0,
                total: 0,
                taken: Vec::new(),
                buffers: opt.buffers,
                buffer: opt.buffer,
            };
            let mut st = Scratch::default();
            result = (|| -> Result<usize, FileQueryError> {
                loop {
                    let g = w.drain(w.lock()?)?;
                    if w.cur == jobs.len() {
                        return Ok(w.total);
                    }
                    // Between writes, the calling thread renders a job too; with none left,
                    // it waits (holding the lock since the drain, so no news is missed).
                    let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(job) = jobs.get(j) else {
                        drop(w.wait(g)?);
                        continue;
                    };
                    drop(g);
                    let mut buf = new_buffer(opt.buffer);
                    let mut failed: Option<FileQueryError> = None;
                    let mut flush = |b: &mut Vec<u8>| match w.take_own(j, b) {
                        Ok(()) => true,
                        Err(e) => {
                            failed = Some(e);
                            false
                        }
                    };
                    let n = self.render_job(job, &cx, &mut st, &mut buf, &mut flush);
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    let Some(n) = n? else {
                        return Err(StoreError::Inconsistent(
                            "a file query's render stopped early".into(),
                        )
                        .into());
                    };
                    w.take_own(j, &mut buf)?;
                    let mut g = w.lock()?;
                    if let Some(c) = g.counts.get_mut(j) {
                        *c = Some(n);
                    }
                }
            })();
        });
        result
    }

    /// Decodes, orders and renders one job's blocks (all in one chunk) into `out`, handing it
    /// to `flush` whenever it passes `buffer` bytes. `None` when `flush` said stop.
    fn render_job<'a>(
        &'a self,
        job: &[u32],
        cx: &JobContext<'_>,
        st: &mut Scratch<'a>,
        out: &mut Vec<u8>,
        flush: &mut dyn FnMut(&mut Vec<u8>) -> bool,
    ) -> Result<Option<usize>, StoreError> {
        st.arena.clear();
        st.starts.clear();
        st.text.clear();
        st.parts.clear();
        st.names.clear();
        st.blocks.clear();
        st.rows.clear();
        let JobContext {
            facts,
            emit,
            buffer,
        } = *cx;
        let f = &self.filter;
        for &n in job {
            let Some(b) = self.blocks.get(n as usize) else {
                continue;
            };
            let p = self.path(b.path)?;
            let bad = || self.bad_block(n);
            let fail = |e: BlockError| e.into_store(bad);
            st.starts.push((st.arena.len(), n));
            let fact = facts
                .binary_search_by_key(&b.session, |x| x.0)
                .unwrap_or(usize::MAX);
            let norm;
            let rstr = match b.resolved {
                Some(r) => self.path(r)?,
                None => {
                    let cwd = facts.get(fact).map_or("", |x| x.1.cwd.as_str());
                    norm = resolve(cwd, p);
                    norm.as_str()
                }
            };
            let resolved = if rstr == p {
                None
            } else {
                Some(push_span(&mut st.arena, rstr.as_bytes())?)
            };
            let block = u32::try_from(st.blocks.len()).map_err(|_| too_big())?;
            st.blocks.push(JobBlock {
                n,
                fact,
                path: p,
                resolved,
            });
            let mut r = BlockReader::new(b.value.value(), b.chunk).map_err(fail)?;
            let base = u32::try_from(st.names.len()).map_err(|_| bad())?;
            st.names.extend(r.names.iter().copied());
            // This block's parts (one per tool name and operation in it, usually one or two).
            let first_part = st.parts.len();
            while let Some(h) = r.next_hit(&mut st.arena).map_err(fail)? {
                if st.rows.len() >= u32::MAX as usize {
                    return Err(too_big());
                }
                // `next_hit` checked the name against the block's names.
                let name = base + h.name as u32;
                let part = match st
                    .parts
                    .get(first_part..)
                    .and_then(|ps| ps.iter().position(|&(n, op, _)| n == name && op == h.op))
                {
                    Some(k) => first_part + k,
                    None => {
                        let tool = r.names.get(h.name).copied().ok_or_else(bad)?;
                        let at = st.text.len();
                        emit.part(tool, h.op, p, rstr, &mut st.text);
                        let span = Span {
                            at: u32::try_from(at).map_err(|_| too_big())?,
                            len: u32::try_from(st.text.len() - at).map_err(|_| too_big())?,
                        };
                        st.parts.push((name, h.op, span));
                        st.parts.len() - 1
                    }
                };
                st.rows.push(JobRow {
                    entry: h.entry,
                    index: h.index,
                    block,
                    part: u32::try_from(part).map_err(|_| too_big())?,
                    op: h.op,
                    status: h.status,
                    strs: h.strs,
                });
            }
        }
        // The strings, checked once for the whole job.
        let arena = std::str::from_utf8(&st.arena)
            .map_err(|e| self.bad_block(block_at(&st.starts, e.valid_up_to())))?;
        let plain = emit.plain(arena);
        // The order: (entry key, op index), sorted as one packed number when the entry's
        // offset in the chunk and the index fit 16 bits each (always, but for a damaged block).
        // A hit found under both of its paths comes twice, the same both times.
        let chunk = job
            .first()
            .and_then(|&n| self.blocks.get(n as usize))
            .map_or(0, |b| b.chunk);
        let packed = st
            .rows
            .iter()
            .all(|r| r.entry.wrapping_sub(chunk) < 1 << 16 && r.index < 1 << 16);
        if packed {
            st.packed.clear();
            st.packed.extend(st.rows.iter().zip(0u64..).map(|(r, n)| {
                (r.entry.wrapping_sub(chunk) << 48) | (u64::from(r.index) << 32) | n
            }));
            // The low half (the row's number) ascends in this order, so a stable sort by the
            // high half is the sort of the whole number.
            sort_by_high_half(&mut st.packed, &mut st.spare);
            st.packed.dedup_by_key(|k| *k >> 32);
            st.order.clear();
            st.order
                .extend(st.packed.iter().map(|&k| (k & 0xffff_ffff) as u32));
        } else {
            st.keys.clear();
            st.keys.extend(
                st.rows
                    .iter()
                    .zip(0u32..)
                    .map(|(r, n)| (r.entry, r.index, n)),
            );
            st.keys.sort_unstable();
            st.keys.dedup_by_key(|k| (k.0, k.1));
            st.order.clear();
            st.order.extend(st.keys.iter().map(|k| k.2));
        }
        let filtered = !f.ops.is_empty() || f.since_ms.is_some();
        let no_fact = SessionFacts {
            cwd: String::new(),
            runs: Vec::new(),
            head: Vec::new(),
        };
        let mut count = 0;
        // Where the last hit lay in its session's active path: (session's number in `facts`,
        // entry, the number of runs starting at or before it). A session's hits come in
        // ascending entry order, so the runs are mostly walked, not searched.
        let mut at_run = (usize::MAX, 0, 0);
        for &n in &st.order {
            let Some(r) = st.rows.get(n as usize) else {
                continue;
            };
            let Some(b) = st.blocks.get(r.block as usize) else {
                continue;
            };
            let (session, fact) = facts.get(b.fact).map_or((0, &no_fact), |x| (x.0, &x.1));
            let runs = fact.runs.as_slice();
            if at_run.0 == b.fact && at_run.1 <= r.entry {
                while runs
                    .get(at_run.2)
                    .is_some_and(|&(start, _)| start <= r.entry)
                {
                    at_run.2 += 1;
                }
            } else {
                at_run = (
                    b.fact,
                    r.entry,
                    runs.partition_point(|&(start, _)| start <= r.entry),
                );
            }
            at_run.1 = r.entry;
            let active = at_run
                .2
                .checked_sub(1)
                .and_then(|k| runs.get(k))
                .is_some_and(|&(_, end)| r.entry <= end);
            if f.active_only && !active {
                continue;
            }
            let bad = || self.bad_block(b.n);
            let [id, call, ts] = r.strs;
            let timestamp = get_opt(arena, ts).ok_or_else(bad)?;
            if filtered && !f.admits(r.op, timestamp) {
                continue;
            }
            let &(name, _, part) = st.parts.get(r.part as usize).ok_or_else(bad)?;
            let hit = FileHitRef {
                session: SessionKey(session),
                entry: EntryKey(r.entry),
                index: r.index,
                entry_id: get_opt(arena, id).ok_or_else(bad)?,
                tool_call_id: get_opt(arena, call).ok_or_else(bad)?,
                tool_name: st.names.get(name as usize).copied().ok_or_else(bad)?,
                op: r.op,
                path: b.path,
                resolved: match b.resolved {
                    None => b.path,
                    Some(s) => get_span(arena, s).ok_or_else(bad)?,
                },
                timestamp,
                is_error: is_error(r.status),
                active,
            };
            let at = part.at as usize;
            let part = st.text.get(at..at + part.len as usize).ok_or_else(bad)?;
            emit.hit(&hit, &fact.head, part, plain, out);
            count += 1;
            if out.len() >= buffer && !flush(out) {
                return Ok(None);
            }
        }
        Ok(Some(count))
    }
}

/// Sorts `v` by the high 32 bits of each number, stably (least significant byte first, one
/// counting pass per byte, a byte every number shares skipped); `spare` is scratch space. A
/// job's rows are a few thousand numbers whose high half is two 16-bit keys: three or four
/// linear passes cost fewer instructions than a comparison sort.
fn sort_by_high_half(v: &mut Vec<u64>, spare: &mut Vec<u64>) {
    for shift in [32u32, 40, 48, 56] {
        let mut counts = [0usize; 256];
        for &x in v.iter() {
            counts[((x >> shift) & 0xff) as usize] += 1;
        }
        if counts.contains(&v.len()) {
            continue;
        }
        let mut at = 0;
        for c in &mut counts {
            let n = *c;
            *c = at;
            at += n;
        }
        // Every slot is written below: only a length change needs filling.
        spare.resize(v.len(), 0);
        for &x in v.iter() {
            let slot = &mut counts[((x >> shift) & 0xff) as usize];
            if let Some(d) = spare.get_mut(*slot) {
                *d = x;
            }
            *slot += 1;
        }
        std::mem::swap(v, spare);
    }
}

/// `glob` as [`FileQuery::Glob`] reads it (`*` and `?` stay within a path component).
fn glob_of(glob: &str) -> Result<globset::Glob, FileQueryError> {
    globset::GlobBuilder::new(glob)
        .literal_separator(true)
        .build()
        .map_err(|source| FileQueryError::Glob {
            glob: glob.to_owned(),
            source,
        })
}

/// Why `glob` is no glob [`FileQuery::Glob`] can match (an unclosed `[` or `{`), if it is not.
pub fn glob_error(glob: &str) -> Option<FileQueryError> {
    glob_of(glob).err()
}

impl Snapshot {
    /// Hits whose path (as written or resolved) is exactly `path`.
    pub fn files_exact(&self, path: &str, f: &FileFilter) -> Result<Vec<FileHit>, StoreError> {
        let mut scan = FileScan::new(self, f);
        self.files_scan(&mut scan, path, |p| p == path)?;
        self.read_ranges(&mut scan)?;
        if scan.filter.session.is_none() {
            self.drop_gone(&mut scan)?;
        }
        scan.collect()?.to_vec()
    }

    /// Hits whose path is `folder` or lies under it (trailing slashes are ignored).
    pub fn files_under(&self, folder: &str, f: &FileFilter) -> Result<Vec<FileHit>, StoreError> {
        let mut scan = FileScan::new(self, f);
        self.scan_under(&mut scan, folder)?;
        self.read_ranges(&mut scan)?;
        if scan.filter.session.is_none() {
            self.drop_gone(&mut scan)?;
        }
        scan.collect()?.to_vec()
    }

    /// Hits whose path matches a glob (`*` and `?` stay within a path component, `**` crosses
    /// them).
    pub fn files_glob(&self, glob: &str, f: &FileFilter) -> Result<Vec<FileHit>, FileQueryError> {
        Ok(self.file_hits(&[FileQuery::Glob(glob)], f)?.to_vec()?)
    }

    /// The union of several queries' hits, each hit once, in (entry key, op index) order.
    pub fn file_hits(
        &self,
        queries: &[FileQuery<'_>],
        f: &FileFilter,
    ) -> Result<FileHits, FileQueryError> {
        Ok(self.file_scan(queries, f)?.collect()?)
    }

    /// The blocks holding the union of several queries' hits (decode them with
    /// [`FileScan::collect`] or [`FileScan::stream`]).
    pub fn file_scan(
        &self,
        queries: &[FileQuery<'_>],
        f: &FileFilter,
    ) -> Result<FileScan<'_>, FileQueryError> {
        let mut scan = FileScan::new(self, f);
        for q in queries {
            match *q {
                FileQuery::Exact(p) => self.files_scan(&mut scan, p, |k| k == p)?,
                FileQuery::Under(folder) => self.scan_under(&mut scan, folder)?,
                FileQuery::Glob(glob) => {
                    let matcher = glob_of(glob)?.compile_matcher();
                    // The glob's literal prefix bounds the range scans.
                    let literal = glob
                        .find(['*', '?', '[', '{', '\\'])
                        .map_or(glob, |i| &glob[..i]);
                    self.files_scan(&mut scan, literal, |p| matcher.is_match(p))?;
                }
            }
        }
        self.read_ranges(&mut scan)?;
        if scan.filter.session.is_none() {
            self.drop_gone(&mut scan)?;
        }
        Ok(scan)
    }

    /// Leaves out the blocks of sessions whose files are gone (deleted or moved since their
    /// import: a moved file is imported again under its new path, and its hits must not be
    /// listed twice), as `ls`, `grep` and `stats` do. One catalogue lookup per session met.
    fn drop_gone(&self, scan: &mut FileScan<'_>) -> Result<(), StoreError> {
        let mut gone = Vec::new();
        for s in scan.sessions() {
            if self.session(s)?.is_some_and(|r| r.gone) {
                gone.push(s.0);
            }
        }
        if !gone.is_empty() {
            scan.blocks
                .retain(|b| gone.binary_search(&b.session).is_err());
        }
        Ok(())
    }

    /// Every hit of one session, in file order.
    pub fn files_of_session(&self, s: SessionKey) -> Result<Vec<FileHit>, StoreError> {
        let filter = FileFilter {
            session: Some(s),
            ..FileFilter::default()
        };
        let mut paths = Vec::new();
        for row in self
            .file_session_paths
            .range((s.0, "")..(s.0.saturating_add(1), ""))?
        {
            paths.push(row?.0.value().1.to_owned());
        }
        let mut scan = FileScan::new(self, &filter);
        for p in &paths {
            let path = scan.intern(p)?;
            scan.ranges.push(ScanRange {
                path,
                sessions: (s.0, s.0),
                resolved: None,
            });
        }
        self.read_ranges(&mut scan)?;
        scan.collect()?.to_vec()
    }

    fn scan_under(&self, scan: &mut FileScan<'_>, folder: &str) -> Result<(), StoreError> {
        let trimmed = folder.trim_end_matches('/');
        let (prefix, root) = if trimmed.is_empty() && folder.starts_with('/') {
            ("/", true)
        } else {
            (trimmed, false)
        };
        self.files_scan(scan, prefix, |p| {
            root || p == prefix || p.as_bytes().get(prefix.len()) == Some(&b'/')
        })
    }

    /// Reads the blocks of the scan's ranges, in order: on the rayon pool when there are
    /// several ranges (a scan spends most of its time in redb's page reads: allocating,
    /// zeroing and filling each page), on the calling thread otherwise.
    fn read_ranges(&self, scan: &mut FileScan<'_>) -> Result<(), StoreError> {
        use rayon::prelude::*;
        let ranges = std::mem::take(&mut scan.ranges);
        let read = |r: &ScanRange| -> Result<Vec<FoundBlock>, StoreError> {
            let p = scan.path(r.path)?;
            let (lo, hi) = r.sessions;
            let mut out = Vec::new();
            for row in self.file_hits.range((p, lo, 0)..=(p, hi, u64::MAX))? {
                let (k, v) = row?;
                let (_, s, c) = k.value();
                out.push(FoundBlock {
                    chunk: c,
                    session: s,
                    path: r.path,
                    resolved: r.resolved,
                    value: v,
                });
            }
            Ok(out)
        };
        let found: Vec<Vec<FoundBlock>> = if ranges.len() < 2 || rayon::current_num_threads() < 2 {
            ranges.iter().map(read).collect::<Result<_, _>>()?
        } else {
            ranges.par_iter().map(read).collect::<Result<_, _>>()?
        };
        scan.blocks.extend(found.into_iter().flatten());
        Ok(())
    }

    /// Blocks whose path as written or resolved starts with `prefix` and passes `keep` (run
    /// once per distinct path).
    fn files_scan(
        &self,
        scan: &mut FileScan<'_>,
        prefix: &str,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(), StoreError> {
        self.scan_written(scan, prefix, &keep)?;
        self.scan_resolved(scan, prefix, &keep)
    }

    /// The `file_hits` part of [`Self::files_scan`]: the paths as written, each found with one
    /// seek (a path that is not kept is stepped over, its blocks unread); a kept path's blocks
    /// are read later, by [`Self::read_ranges`].
    fn scan_written(
        &self,
        scan: &mut FileScan<'_>,
        prefix: &str,
        keep: &impl Fn(&str) -> bool,
    ) -> Result<(), StoreError> {
        let sessions = scan.filter.session.map_or((0, u64::MAX), |s| (s.0, s.0));
        let mut after: Option<String> = None;
        loop {
            let mut range = match &after {
                None => self.file_hits.range::<(&str, u64, u64)>((prefix, 0, 0)..)?,
                Some(p) => self.file_hits.range::<(&str, u64, u64)>((
                    Bound::Excluded((p.as_str(), u64::MAX, u64::MAX)),
                    Bound::Unbounded,
                ))?,
            };
            let Some(row) = range.next() else {
                return Ok(());
            };
            let (k, _) = row?;
            let p = k.value().0;
            if !p.starts_with(prefix) {
                return Ok(());
            }
            if keep(p) {
                let path = scan.intern(p)?;
                scan.ranges.push(ScanRange {
                    path,
                    sessions,
                    resolved: None,
                });
            }
            after = Some(p.to_owned());
        }
    }

    /// The `file_resolved` part of [`Self::files_scan`]: each kept resolved path's (session,
    /// path as written) pairs, whose blocks [`Self::read_ranges`] reads.
    fn scan_resolved(
        &self,
        scan: &mut FileScan<'_>,
        prefix: &str,
        keep: &impl Fn(&str) -> bool,
    ) -> Result<(), StoreError> {
        let only = scan.filter.session;
        // The current resolved path, whether it is kept, and its number once needed.
        let mut cur: Option<(String, bool, Option<u32>)> = None;
        for row in self
            .file_resolved
            .range::<(&str, u64, &str)>((prefix, 0, "")..)?
        {
            let (k, _) = row?;
            let (r, s, p) = k.value();
            if cur.as_ref().is_none_or(|c| c.0 != r) {
                if !r.starts_with(prefix) {
                    break;
                }
                cur = Some((r.to_owned(), keep(r), None));
            }
            let Some((_, kept, rid)) = &mut cur else {
                continue;
            };
            if !*kept || only.is_some_and(|x| x.0 != s) {
                continue;
            }
            let rid = match *rid {
                Some(x) => x,
                None => {
                    let x = scan.intern(r)?;
                    *rid = Some(x);
                    x
                }
            };
            let path = scan.intern(p)?;
            scan.ranges.push(ScanRange {
                path,
                sessions: (s, s),
                resolved: Some(rid),
            });
        }
        Ok(())
    }

    /// Orders the hits, drops repeats (a hit found under both of its paths), marks the active
    /// ones and applies `active_only`.
    fn finish_hits(&self, hits: &mut FileHits, f: &FileFilter) -> Result<(), StoreError> {
        // Each path's hits are already about in this order, so the keys are a few sorted
        // runs, which the stable sort detects and merges; the rows themselves stay put.
        let mut keys = Vec::with_capacity(hits.rows.len());
        for (n, r) in hits.rows.iter().enumerate() {
            let n = u32::try_from(n).map_err(|_| {
                StoreError::Inconsistent("a file query found more than 2^32 hits".into())
            })?;
            keys.push((r.entry, r.index, n));
        }
        keys.sort();
        keys.dedup_by_key(|k| (k.0, k.1));
        hits.order = keys.into_iter().map(|k| k.2).collect();
        // Each session's active path once; a session's rows are mostly together, so the last
        // session's runs are kept at hand instead of looked up per row.
        let mut runs: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        for s in hits.sessions() {
            runs.insert(s.0, self.active_runs(s)?);
        }
        let mut last: Option<(u64, &[(u64, u64)])> = None;
        for &n in &hits.order {
            let Some(r) = hits.rows.get_mut(n as usize) else {
                continue;
            };
            let path = match last {
                Some((s, p)) if s == r.session => p,
                _ => {
                    let p = runs.get(&r.session).map_or(&[][..], Vec::as_slice);
                    last = Some((r.session, p));
                    p
                }
            };
            r.active = in_runs(path, r.entry);
        }
        if f.active_only {
            let rows = &hits.rows;
            hits.order
                .retain(|&n| rows.get(n as usize).is_some_and(|r| r.active));
        }
        Ok(())
    }

    /// The session's active path (leaf → root) as sorted, disjoint key ranges [start, end].
    fn active_runs(&self, s: SessionKey) -> Result<Vec<(u64, u64)>, StoreError> {
        // The path pi's context walks: from the leaf, or from the last entry when that has no
        // string id.
        let Some(leaf) = self.context_leaf(s)? else {
            return Ok(Vec::new());
        };
        // Bounded by the leaf's depth: a damaged store cannot make it loop.
        let mut out: Vec<(u64, u64)> = self
            .context_runs(s, leaf)?
            .into_iter()
            .map(|(start, end)| (start.0, end.0))
            .collect();
        out.sort_unstable();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The radix sort of a job's packed rows gives what a comparison sort of the whole numbers
    /// gives, on rows in any order, with repeated keys, and with bytes every row shares.
    #[test]
    fn sorting_by_the_high_half_equals_sorting_the_numbers() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut spare = Vec::new();
        for (n, mask) in [
            (0usize, u64::MAX),
            (1, u64::MAX),
            (2, u64::MAX),
            (1000, u64::MAX),
            (1000, 0xff),
            (5000, 0xffff_0000),
            (5000, 0x0000_00ff_0000_00ff),
            (300, 0),
        ] {
            let mut v: Vec<u64> = (0..n as u64).map(|i| ((next() & mask) << 32) | i).collect();
            let mut want = v.clone();
            want.sort_unstable();
            sort_by_high_half(&mut v, &mut spare);
            assert_eq!(v, want, "{n} rows, mask {mask:#x}");
        }
    }

    fn hit(entry: u64, index: u32, name: &str, strs: [Option<&str>; 3]) -> BlockHit {
        BlockHit {
            entry,
            index,
            op: FileOp::of_tool(name),
            status: (entry % 3) as u8,
            tool_name: name.to_owned(),
            entry_id: strs[0].map(str::to_owned),
            tool_call_id: strs[1].map(str::to_owned),
            timestamp: strs[2].map(str::to_owned),
        }
    }

    #[test]
    fn blocks_round_trip_and_reject_damage() {
        let c = 3 * CHUNK;
        let hits = vec![
            hit(
                c,
                0,
                "read",
                [Some("ab12"), Some("call_1"), Some("2026-01-01T00:00:00Z")],
            ),
            hit(
                c,
                1,
                "edit",
                [Some("ab12"), Some("call_2"), Some("2026-01-01T00:00:00Z")],
            ),
            hit(c + 7, 0, "compaction", [Some("ab1é"), None, None]),
            hit(c + 7, 1, "read", [Some("ab1è"), Some(""), Some("")]),
            hit(
                c + 900,
                0,
                "read",
                [None, Some("call_😀"), Some("2026-01-01T00:00:01Z")],
            ),
            hit(c + 901, 0, "mystery", [Some("ab1è"), Some("call_😁"), None]),
        ];
        let mut b = Vec::new();
        encode_block(&hits, c, &mut b);
        assert_eq!(decode_block(&b, c), Some(hits.clone()));
        // Equal ids and timestamps are a few bytes each.
        assert!(b.len() < 200, "{}", b.len());
        for n in 0..b.len() {
            // A cut block is malformed or a shorter list of the same hits, never a panic.
            if let Some(got) = decode_block(&b[..n], c) {
                assert!(got.len() < hits.len() && hits.starts_with(&got));
            }
        }
        for n in 0..b.len() {
            let mut d = b.clone();
            d[n] ^= 0xff;
            let _ = decode_block(&d, c);
        }
    }

    #[test]
    fn normalises_lexically() {
        assert_eq!(normalize("/w/p", "src/a.rs"), "/w/p/src/a.rs");
        assert_eq!(normalize("/w/p", "./src//b/../a.rs"), "/w/p/src/a.rs");
        assert_eq!(normalize("/w/p", "/etc/./x"), "/etc/x");
        assert_eq!(normalize("/w", "../../../x"), "/x");
        assert_eq!(normalize("", "a/../../b"), "../b");
        assert_eq!(normalize("", "./"), ".");
        assert_eq!(normalize("/w", "."), "/w");
    }
}
