//! The file-operation index (spec §9, issue 3 item 4): which tool calls touched which path.
//!
//! What is indexed, per stored row:
//! - every `toolCall` block of an `assistant` message whose `arguments.path` is a non-empty
//!   string (`read` / `write` / `edit` give those operations, any other tool gives
//!   [`FileOp::Other`] with its name kept);
//! - the `details.readFiles` ([`FileOp::Read`]) and `details.modifiedFiles`
//!   ([`FileOp::Modified`]) string arrays of `compaction` and `branch_summary` entries (tool name
//!   = the entry type, no tool call id);
//! - every `toolResult` message's `toolCallId` and `isError` (last one in file order wins), so
//!   a hit's result status is known even when the result was appended later.
//!
//! Invariants:
//! - every row here is written in the same write transaction as the entries it indexes, and
//!   removed with them ([`delete_session_ops`]);
//! - each operation is one `file_ops` row keyed (entry key, op index) holding the path as
//!   written; `file_paths` keys it by the path as written and by the path resolved against the
//!   session `cwd` and normalised lexically ([`normalize`]: `.`, `..`, duplicate slashes; no
//!   filesystem access; a session's `cwd` never changes while its rows exist), and each
//!   `file_paths` value carries every field a hit reports ([`PathValue`]), so a query is one
//!   range scan and never reads `file_ops` or `tool_results`;
//! - a hit's result status lives in byte 0 of both of its `file_paths` values; it is set from
//!   `tool_results` when the call is written and rewritten when a result for the call arrives
//!   later (`tool_results` lists each call's operations for that), so it always equals the
//!   status of the last result in file order;
//! - whether an entry is on the active path (leaf → root) is computed at query time, so appends
//!   never rewrite old rows: the path is a few key ranges ("runs", see
//!   [`crate::schema::RUN_STARTS`]), found with one small-table lookup per run
//!   ([`Snapshot::path_runs`], bounded by the leaf's depth), and each hit is a binary search in
//!   them.
//!
//! A query is range scans of `file_paths` (a glob's literal prefix bounds its scan, and the glob
//! runs once per distinct path, not per row), then one stable sort of the hits by (entry key,
//! op index): each path's rows already come in that order, so the sort merges a few runs.

use std::collections::HashMap;

use redb::{ReadableTable, TableDefinition};

use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};
use crate::import::Writer;

/// Name of the operations table.
pub const FILE_OPS_NAME: &str = "file_ops.v3";
/// Name of the path index.
pub const FILE_PATHS_NAME: &str = "file_paths.v2";
/// (entry key, op index) → the path as written.
pub const FILE_OPS: TableDefinition<(u64, u32), &str> = TableDefinition::new(FILE_OPS_NAME);
/// (path, entry key, op index) → the hit's fields, encoded as in [`PathValue`].
pub const FILE_PATHS: TableDefinition<(&str, u64, u32), &[u8]> =
    TableDefinition::new(FILE_PATHS_NAME);
/// (session key, tool call id) → byte 0: the last result's status ([`RESULT_NONE`],
/// [`RESULT_OK`], [`RESULT_ERROR`]), then the (entry key u64 LE, op index u32 LE) of every file
/// operation of that call.
pub const TOOL_RESULTS: TableDefinition<(u64, &str), &[u8]> =
    TableDefinition::new("tool_results.v2");

/// No result for this tool call (yet).
pub const RESULT_NONE: u8 = 0;
/// The last result was not an error.
pub const RESULT_OK: u8 = 1;
/// The last result was an error.
pub const RESULT_ERROR: u8 = 2;

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

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Details {
    #[serde(default)]
    read_files: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    modified_files: Option<Vec<serde_json::Value>>,
}

/// Extracts the file operations of one parsed entry.
pub(crate) fn extract(e: &pisess_formats::entry::Entry<'_>) -> EntryOps {
    use pisess_formats::entry::{Content, EntryType, Role};
    let mut out = EntryOps::default();
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
                        let Some(args) = b.arguments.get() else {
                            continue;
                        };
                        let Ok(PathArg { path: Some(path) }) = serde_json::from_str(args.get())
                        else {
                            continue;
                        };
                        if path.is_empty() {
                            continue;
                        }
                        let name = b.name.get().map(|n| n.as_str()).unwrap_or_default();
                        out.ops.push(OpDraft {
                            tool_call_id: b.id.get().map(|i| i.as_str().to_owned()),
                            tool_name: name.to_owned(),
                            op: FileOp::of_tool(name),
                            path: path.into_owned(),
                        });
                    }
                }
                Role::ToolResult => {
                    if let Some(id) = m.tool_call_id.get() {
                        let err = m.is_error.get().copied().unwrap_or(false);
                        out.result = Some((id.as_str().to_owned(), err));
                    }
                }
                _ => {}
            }
        }
        t @ (EntryType::Compaction | EntryType::BranchSummary) => {
            let Some(d) = e.details.get() else {
                return out;
            };
            let Ok(d) = serde_json::from_str::<Details>(d.get()) else {
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
                for v in list.unwrap_or_default() {
                    if let Some(p) = v.as_str().filter(|p| !p.is_empty()) {
                        out.ops.push(OpDraft {
                            tool_call_id: None,
                            tool_name: tool.to_owned(),
                            op,
                            path: p.to_owned(),
                        });
                    }
                }
            }
        }
        _ => {}
    }
    out
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

/// How a `file_paths` key was found: the path as written.
const HOW_WRITTEN: u8 = 1;
/// How a `file_paths` key was found: the path resolved against the session `cwd`.
const HOW_RESOLVED: u8 = 2;
/// How a `file_paths` key was found: both (the path as written is already resolved).
const HOW_BOTH: u8 = 3;

/// The value of a `file_paths` row: everything a hit reports, read straight from the row.
///
/// Layout: byte 0 the result status ([`RESULT_NONE`] / [`RESULT_OK`] / [`RESULT_ERROR`]; at a
/// fixed offset so a later result rewrites one byte), byte 1 how the key was found (1 as
/// written, 2 resolved, 3 both), byte 2 the operation, then the session key as a LEB128
/// varint, then five strings, each a LEB128 varint (0 = none, else length + 1) and its bytes:
/// entry id, tool call id, tool name, timestamp, and the *other* path (resolved for a key as
/// written, as written for a resolved key, none when both are the key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathValue<'a> {
    /// The last result's status.
    pub result: u8,
    /// How the key was found.
    pub how: u8,
    /// What it did.
    pub op: FileOp,
    /// The session key.
    pub session: u64,
    /// The entry's id.
    pub entry_id: Option<&'a str>,
    /// The tool call's id.
    pub tool_call_id: Option<&'a str>,
    /// The tool's name, or the entry type for summary details.
    pub tool_name: &'a str,
    /// The entry's `timestamp` as written.
    pub timestamp: Option<&'a str>,
    /// The other path (see the layout).
    pub other: Option<&'a str>,
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn take_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
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

fn put_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => put_varint(out, 0),
        Some(s) => {
            put_varint(out, s.len() as u64 + 1);
            out.extend_from_slice(s.as_bytes());
        }
    }
}

fn take_str<'a>(b: &'a [u8], pos: &mut usize) -> Option<Option<&'a str>> {
    let n = take_varint(b, pos)?;
    if n == 0 {
        return Some(None);
    }
    let len = usize::try_from(n - 1).ok()?;
    let end = pos.checked_add(len)?;
    let s = std::str::from_utf8(b.get(*pos..end)?).ok()?;
    *pos = end;
    Some(Some(s))
}

impl<'a> PathValue<'a> {
    /// Appends the encoded value to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&[self.result, self.how, self.op.code()]);
        put_varint(out, self.session);
        put_str(out, self.entry_id);
        put_str(out, self.tool_call_id);
        put_str(out, Some(self.tool_name));
        put_str(out, self.timestamp);
        put_str(out, self.other);
    }

    /// Reads an encoded value (`None` when it is malformed).
    pub fn decode(b: &'a [u8]) -> Option<Self> {
        let (&result, &how, &op) = (b.first()?, b.get(1)?, b.get(2)?);
        let mut pos = 3;
        let session = take_varint(b, &mut pos)?;
        Some(Self {
            result,
            how,
            op: FileOp::from_code(op)?,
            session,
            entry_id: take_str(b, &mut pos)?,
            tool_call_id: take_str(b, &mut pos)?,
            tool_name: take_str(b, &mut pos)??,
            timestamp: take_str(b, &mut pos)?,
            other: take_str(b, &mut pos)?,
        })
    }

    /// (path as written, resolved path) of a hit found under `key`.
    fn paths(&self, key: &'a str) -> (&'a str, &'a str) {
        match (self.how, self.other) {
            (HOW_WRITTEN, Some(o)) => (key, o),
            (HOW_RESOLVED, Some(o)) => (o, key),
            _ => (key, key),
        }
    }

    /// The result status as reported (`None`: no result with this tool call id).
    fn is_error(&self) -> Option<bool> {
        match self.result {
            RESULT_OK => Some(false),
            RESULT_ERROR => Some(true),
            _ => None,
        }
    }
}

fn corrupt(table: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::Inconsistent(format!("malformed {table} value at {what}"))
}

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
            self.record_result(s, cwd, &id, if err { RESULT_ERROR } else { RESULT_OK })?;
        }
        let mut buf = Vec::new();
        for (i, op) in ops.ops.into_iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let resolved = normalize(cwd, &op.path);
            let mut result = RESULT_NONE;
            if let Some(t) = op.tool_call_id.as_deref() {
                // The call's operations are listed under its id, so a later result finds them.
                let mut v = match self.tool_results.get((s.0, t))? {
                    Some(g) => g.value().to_vec(),
                    None => vec![RESULT_NONE],
                };
                result = v.first().copied().unwrap_or(RESULT_NONE);
                v.extend_from_slice(&key.to_le_bytes());
                v.extend_from_slice(&i.to_le_bytes());
                self.tool_results.insert((s.0, t), v.as_slice())?;
            }
            let mut value = PathValue {
                result,
                how: HOW_BOTH,
                op: op.op,
                session: s.0,
                entry_id,
                tool_call_id: op.tool_call_id.as_deref(),
                tool_name: &op.tool_name,
                timestamp,
                other: None,
            };
            if resolved == op.path {
                buf.clear();
                value.encode(&mut buf);
                self.file_paths
                    .insert((op.path.as_str(), key, i), buf.as_slice())?;
            } else {
                buf.clear();
                value.how = HOW_WRITTEN;
                value.other = Some(&resolved);
                value.encode(&mut buf);
                self.file_paths
                    .insert((op.path.as_str(), key, i), buf.as_slice())?;
                buf.clear();
                value.how = HOW_RESOLVED;
                value.other = Some(&op.path);
                value.encode(&mut buf);
                self.file_paths
                    .insert((resolved.as_str(), key, i), buf.as_slice())?;
            }
            self.file_ops.insert((key, i), op.path.as_str())?;
        }
        Ok(())
    }

    /// Records a tool result and rewrites the status byte of the call's operations.
    fn record_result(
        &mut self,
        s: SessionKey,
        cwd: &str,
        id: &str,
        status: u8,
    ) -> Result<(), StoreError> {
        let mut v = match self.tool_results.get((s.0, id))? {
            Some(g) => g.value().to_vec(),
            None => vec![RESULT_NONE],
        };
        if v.first() == Some(&status) {
            return Ok(());
        }
        for op in v.get(1..).unwrap_or_default().chunks_exact(12) {
            let mut e = [0u8; 8];
            let mut i = [0u8; 4];
            e.copy_from_slice(&op[..8]);
            i.copy_from_slice(&op[8..]);
            let (e, i) = (u64::from_le_bytes(e), u32::from_le_bytes(i));
            let Some(path) = self.file_ops.get((e, i))?.map(|g| g.value().to_owned()) else {
                return Err(StoreError::Inconsistent(format!(
                    "tool result {id} names missing op ({e}, {i})"
                )));
            };
            let resolved = normalize(cwd, &path);
            for p in [path.as_str(), resolved.as_str()] {
                let Some(mut pv) = self.file_paths.get((p, e, i))?.map(|g| g.value().to_vec())
                else {
                    continue;
                };
                if let Some(b) = pv.first_mut() {
                    *b = status;
                }
                self.file_paths.insert((p, e, i), pv.as_slice())?;
                if p == path && resolved == path {
                    break;
                }
            }
        }
        if let Some(b) = v.first_mut() {
            *b = status;
        }
        self.tool_results.insert((s.0, id), v.as_slice())?;
        Ok(())
    }
}

/// Removes a session's operations and tool results (its rows are listed in `keys`; `cwd` is
/// the session's, which resolved its paths).
pub(crate) fn delete_session_ops(
    w: &mut Writer<'_>,
    s: SessionKey,
    cwd: &str,
    keys: &[u64],
) -> Result<(), StoreError> {
    for &k in keys {
        let mut paths = Vec::new();
        for row in w.file_ops.range((k, 0)..=(k, u32::MAX))? {
            let (key, v) = row?;
            let i = key.value().1;
            let p = v.value().to_owned();
            paths.push((normalize(cwd, &p), i));
            paths.push((p, i));
        }
        for (p, i) in &paths {
            w.file_paths.remove((p.as_str(), k, *i))?;
        }
        if !paths.is_empty() {
            w.file_ops.retain_in((k, 0)..=(k, u32::MAX), |_, _| false)?;
        }
    }
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

/// One found row: where its key and value bytes sit in [`FileHits::arena`].
#[derive(Debug, Clone, Copy)]
struct HitRow {
    entry: u64,
    index: u32,
    session: u64,
    key: (usize, usize),
    value: (usize, usize),
    active: bool,
}

/// The hits of a query, in (entry key, op index) order, each once: the `file_paths` rows'
/// bytes copied into one buffer, decoded on iteration.
#[derive(Debug, Default)]
pub struct FileHits {
    arena: Vec<u8>,
    rows: Vec<HitRow>,
    /// Where the last pushed key's bytes sit in the arena.
    last_key: Option<(usize, usize)>,
}

impl FileHits {
    /// Number of hits.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there is no hit.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The hits, in (entry key, op index) order.
    pub fn iter(&self) -> impl Iterator<Item = Result<FileHitRef<'_>, StoreError>> + '_ {
        self.rows.iter().map(|r| self.hit(r))
    }

    /// The sessions of the hits, each once, in the order of their first hit.
    pub fn sessions(&self) -> Vec<SessionKey> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        for r in &self.rows {
            if out.last() != Some(&SessionKey(r.session)) && seen.insert(r.session) {
                out.push(SessionKey(r.session));
            }
        }
        out
    }

    fn hit(&self, r: &HitRow) -> Result<FileHitRef<'_>, StoreError> {
        let bad = || corrupt(FILE_PATHS_NAME, format!("({}, {})", r.entry, r.index));
        let key = self
            .arena
            .get(r.key.0..r.key.1)
            .and_then(|b| std::str::from_utf8(b).ok())
            .ok_or_else(bad)?;
        let v = self
            .arena
            .get(r.value.0..r.value.1)
            .and_then(PathValue::decode)
            .ok_or_else(bad)?;
        let (path, resolved) = v.paths(key);
        Ok(FileHitRef {
            session: SessionKey(v.session),
            entry: EntryKey(r.entry),
            index: r.index,
            entry_id: v.entry_id,
            tool_call_id: v.tool_call_id,
            tool_name: v.tool_name,
            op: v.op,
            path,
            resolved,
            timestamp: v.timestamp,
            is_error: v.is_error(),
            active: r.active,
        })
    }

    /// Owned copies of every hit.
    pub fn to_vec(&self) -> Result<Vec<FileHit>, StoreError> {
        self.iter().map(|h| h.map(|h| h.to_owned_hit())).collect()
    }

    fn push(&mut self, key: &str, entry: u64, index: u32, value: &[u8], f: &FileFilter) -> bool {
        // Filter on the fixed header before copying anything.
        let mut pos = 3;
        let (Some(op), Some(session)) = (
            value.get(2).copied().and_then(FileOp::from_code),
            take_varint(value, &mut pos),
        ) else {
            return false;
        };
        if f.session.is_some_and(|s| s.0 != session) || (!f.ops.is_empty() && !f.ops.contains(&op))
        {
            return true;
        }
        // A scan meets each path's rows together: its bytes are kept once.
        let key_at = match self.last_key {
            Some((k0, k1)) if self.arena.get(k0..k1) == Some(key.as_bytes()) => (k0, k1),
            _ => {
                let k0 = self.arena.len();
                self.arena.extend_from_slice(key.as_bytes());
                let at = (k0, self.arena.len());
                self.last_key = Some(at);
                at
            }
        };
        let v0 = self.arena.len();
        self.arena.extend_from_slice(value);
        self.rows.push(HitRow {
            entry,
            index,
            session,
            key: key_at,
            value: (v0, self.arena.len()),
            active: false,
        });
        true
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

impl Snapshot {
    /// Hits whose path (as written or resolved) is exactly `path`.
    pub fn files_exact(&self, path: &str, f: &FileFilter) -> Result<Vec<FileHit>, StoreError> {
        let mut out = FileHits::default();
        self.files_scan(&mut out, path, f, |p| p == path)?;
        self.finish_hits(&mut out, f)?;
        out.to_vec()
    }

    /// Hits whose path is `folder` or lies under it (trailing slashes are ignored).
    pub fn files_under(&self, folder: &str, f: &FileFilter) -> Result<Vec<FileHit>, StoreError> {
        let mut out = FileHits::default();
        self.scan_under(&mut out, folder, f)?;
        self.finish_hits(&mut out, f)?;
        out.to_vec()
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
        let mut out = FileHits::default();
        for q in queries {
            match *q {
                FileQuery::Exact(p) => self.files_scan(&mut out, p, f, |k| k == p)?,
                FileQuery::Under(p) => self.scan_under(&mut out, p, f)?,
                FileQuery::Glob(glob) => {
                    let matcher = globset::GlobBuilder::new(glob)
                        .literal_separator(true)
                        .build()
                        .map_err(|source| FileQueryError::Glob {
                            glob: glob.to_owned(),
                            source,
                        })?
                        .compile_matcher();
                    // The glob's literal prefix bounds the range scan.
                    let literal = glob
                        .find(['*', '?', '[', '{', '\\'])
                        .map_or(glob, |i| &glob[..i]);
                    self.files_scan(&mut out, literal, f, |p| matcher.is_match(p))?;
                }
            }
        }
        self.finish_hits(&mut out, f)?;
        Ok(out)
    }

    /// Every hit of one session, in file order.
    pub fn files_of_session(&self, s: SessionKey) -> Result<Vec<FileHit>, StoreError> {
        let filter = FileFilter {
            session: Some(s),
            ..FileFilter::default()
        };
        let mut out = FileHits::default();
        for e in self.rows(s)? {
            for row in self.file_ops.range((e.0, 0)..=(e.0, u32::MAX))? {
                let (k, p) = row?;
                let (e, i) = k.value();
                let p = p.value();
                let Some(v) = self.file_paths.get((p, e, i))? else {
                    return Err(StoreError::Inconsistent(format!(
                        "op ({e}, {i}) has no {FILE_PATHS_NAME} row"
                    )));
                };
                if !out.push(p, e, i, v.value(), &filter) {
                    return Err(corrupt(FILE_PATHS_NAME, format!("({e}, {i})")));
                }
            }
        }
        self.finish_hits(&mut out, &filter)?;
        out.to_vec()
    }

    fn scan_under(
        &self,
        out: &mut FileHits,
        folder: &str,
        f: &FileFilter,
    ) -> Result<(), StoreError> {
        let trimmed = folder.trim_end_matches('/');
        let (prefix, root) = if trimmed.is_empty() && folder.starts_with('/') {
            ("/", true)
        } else {
            (trimmed, false)
        };
        self.files_scan(out, prefix, f, |p| {
            root || p == prefix || p.as_bytes().get(prefix.len()) == Some(&b'/')
        })
    }

    /// Rows of `file_paths` from `prefix` on, while their keys start with it and pass `keep`.
    fn files_scan(
        &self,
        out: &mut FileHits,
        prefix: &str,
        f: &FileFilter,
        keep: impl Fn(&str) -> bool,
    ) -> Result<(), StoreError> {
        // Rows come grouped by path (few paths, many rows each): `keep` runs once per path.
        let mut last: Option<(String, bool)> = None;
        for row in self.file_paths.range((prefix, 0, 0)..)? {
            let (k, v) = row?;
            let (p, e, i) = k.value();
            let kept = match &mut last {
                Some((lp, kept)) if lp.as_str() == p => *kept,
                _ => {
                    if !p.starts_with(prefix) {
                        break;
                    }
                    let kept = keep(p);
                    match &mut last {
                        Some((lp, k)) => {
                            lp.clear();
                            lp.push_str(p);
                            *k = kept;
                        }
                        None => last = Some((p.to_owned(), kept)),
                    }
                    kept
                }
            };
            if kept && !out.push(p, e, i, v.value(), f) {
                return Err(corrupt(FILE_PATHS_NAME, format!("{p:?} ({e}, {i})")));
            }
        }
        Ok(())
    }

    /// Orders the hits, drops repeats (a hit found under both of its paths), marks the active
    /// ones and applies `active_only`.
    fn finish_hits(&self, hits: &mut FileHits, f: &FileFilter) -> Result<(), StoreError> {
        // Each path's rows are already in this order, so the rows are a few sorted runs, which
        // the stable sort detects and merges.
        hits.rows.sort_by_key(|r| (r.entry, r.index));
        hits.rows.dedup_by_key(|r| (r.entry, r.index));
        // Each session's active path once; a session's rows are mostly together, so the last
        // session's runs are kept at hand instead of looked up per row.
        let mut runs: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        for s in hits.sessions() {
            runs.insert(s.0, self.active_runs(s)?);
        }
        let mut last: Option<(u64, &[(u64, u64)])> = None;
        for r in &mut hits.rows {
            let path = match last {
                Some((s, p)) if s == r.session => p,
                _ => {
                    let p = runs.get(&r.session).map_or(&[][..], Vec::as_slice);
                    last = Some((r.session, p));
                    p
                }
            };
            // The last run starting at or before the entry holds it, if any does.
            let n = path.partition_point(|&(start, _)| start <= r.entry);
            r.active = n > 0 && path.get(n - 1).is_some_and(|&(_, end)| r.entry <= end);
        }
        if f.active_only {
            hits.rows.retain(|r| r.active);
        }
        Ok(())
    }

    /// The session's active path (leaf → root) as sorted, disjoint key ranges [start, end].
    fn active_runs(&self, s: SessionKey) -> Result<Vec<(u64, u64)>, StoreError> {
        let Some(leaf) = self.leaf(s)? else {
            return Ok(Vec::new());
        };
        // Bounded by the leaf's depth: a damaged store cannot make it loop.
        let mut out: Vec<(u64, u64)> = self
            .path_runs(leaf)?
            .into_iter()
            .map(|(start, end)| (start.0, end.0))
            .collect();
        out.sort_unstable();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::normalize;

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
