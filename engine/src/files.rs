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
//! - each operation is one `file_ops` row keyed (entry key, op index); `file_paths` keys it by
//!   the path as written and by the path resolved against the session `cwd` and normalised
//!   lexically ([`normalize`]: `.`, `..`, duplicate slashes; no filesystem access); both keys
//!   point at the same row, so a hit is reported once;
//! - whether an entry is on the active path (leaf → root) is computed at query time, so appends
//!   never rewrite old rows: per session either one walk of the path or an O(log depth)
//!   [`Snapshot::is_ancestor`] test per hit, whichever costs fewer lookups.

use std::collections::BTreeMap;

use redb::{ReadableTable, TableDefinition};
use rkyv::{Archive, Deserialize, Serialize};

use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};
use crate::import::Writer;
use crate::record::{Record, RecordRef, Rkyv, encode};

/// Name of the operations table.
pub const FILE_OPS_NAME: &str = "file_ops.v2";
/// (entry key, op index) → the operation.
pub const FILE_OPS: TableDefinition<(u64, u32), Rkyv<FileOpRecord>> =
    TableDefinition::new(FILE_OPS_NAME);
/// (path, entry key, op index) → how the path was found (1 as written, 2 resolved, 3 both).
pub const FILE_PATHS: TableDefinition<(&str, u64, u32), u8> = TableDefinition::new("file_paths.v1");
/// (session key, tool call id) → 1 when the tool result was an error, else 0.
pub const TOOL_RESULTS: TableDefinition<(u64, &str), u8> = TableDefinition::new("tool_results.v1");

/// What a file operation did.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[rkyv(compare(PartialEq))]
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
}

/// One stored file operation.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
pub struct FileOpRecord {
    /// The session.
    pub session: u64,
    /// The entry's id.
    pub entry_id: Option<String>,
    /// The tool call's id (none for summary details).
    pub tool_call_id: Option<String>,
    /// The tool's name, or the entry type for summary details.
    pub tool_name: String,
    /// What it did.
    pub op: FileOp,
    /// The path as written.
    pub path: String,
    /// The path resolved against the session cwd and normalised.
    pub resolved: String,
    /// The entry's `timestamp` as written.
    pub timestamp: Option<String>,
}

impl Record for FileOpRecord {
    const TYPE_NAME: &'static str = "pisess::FileOpRecordV1";
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
            self.tool_results
                .insert((s.0, id.as_str()), u8::from(err))?;
        }
        for (i, op) in ops.ops.into_iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            let resolved = normalize(cwd, &op.path);
            if resolved == op.path {
                self.file_paths.insert((op.path.as_str(), key, i), 3)?;
            } else {
                self.file_paths.insert((op.path.as_str(), key, i), 1)?;
                self.file_paths.insert((resolved.as_str(), key, i), 2)?;
            }
            let rec = FileOpRecord {
                session: s.0,
                entry_id: entry_id.map(str::to_owned),
                tool_call_id: op.tool_call_id,
                tool_name: op.tool_name,
                op: op.op,
                path: op.path,
                resolved,
                timestamp: timestamp.map(str::to_owned),
            };
            let bytes = encode(&rec)?;
            self.file_ops.insert((key, i), RecordRef::new(&bytes))?;
        }
        Ok(())
    }
}

/// Removes a session's operations and tool results (its rows are listed in `keys`).
pub(crate) fn delete_session_ops(
    w: &mut Writer<'_>,
    s: SessionKey,
    keys: &[u64],
) -> Result<(), StoreError> {
    for &k in keys {
        let mut paths = Vec::new();
        for row in w.file_ops.range((k, 0)..=(k, u32::MAX))? {
            let (key, v) = row?;
            let i = key.value().1;
            let a = archived(&v.value(), k)?;
            paths.push((a.path.as_str().to_owned(), i));
            paths.push((a.resolved.as_str().to_owned(), i));
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

fn archived<'a>(
    r: &RecordRef<'a, FileOpRecord>,
    key: u64,
) -> Result<&'a ArchivedFileOpRecord, StoreError> {
    r.archived().map_err(|source| StoreError::CorruptRecord {
        table: FILE_OPS_NAME,
        key: key.to_string(),
        source,
    })
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
        self.files_scan(path, f, |p| p == path)
    }

    /// Hits whose path is `folder` or lies under it (trailing slashes are ignored).
    pub fn files_under(&self, folder: &str, f: &FileFilter) -> Result<Vec<FileHit>, StoreError> {
        let trimmed = folder.trim_end_matches('/');
        let (prefix, root) = if trimmed.is_empty() && folder.starts_with('/') {
            ("/", true)
        } else {
            (trimmed, false)
        };
        self.files_scan(prefix, f, |p| {
            root || p == prefix || p.as_bytes().get(prefix.len()) == Some(&b'/')
        })
    }

    /// Hits whose path matches a glob (`*` and `?` stay within a path component, `**` crosses
    /// them).
    pub fn files_glob(&self, glob: &str, f: &FileFilter) -> Result<Vec<FileHit>, FileQueryError> {
        let matcher = globset::GlobBuilder::new(glob)
            .literal_separator(true)
            .build()
            .map_err(|source| FileQueryError::Glob {
                glob: glob.to_owned(),
                source,
            })?
            .compile_matcher();
        let literal = glob
            .find(['*', '?', '[', '{', '\\'])
            .map_or(glob, |i| &glob[..i]);
        Ok(self.files_scan(literal, f, |p| matcher.is_match(p))?)
    }

    /// Every hit of one session, in file order.
    pub fn files_of_session(&self, s: SessionKey) -> Result<Vec<FileHit>, StoreError> {
        let filter = FileFilter {
            session: Some(s),
            ..FileFilter::default()
        };
        let mut found = BTreeMap::new();
        for e in self.rows(s)? {
            for row in self.file_ops.range((e.0, 0)..=(e.0, u32::MAX))? {
                let (k, _) = row?;
                found.insert(k.value(), ());
            }
        }
        self.hits(found.into_keys(), &filter)
    }

    /// Keys of `file_paths` from `prefix` on, while they start with it and pass `keep`.
    fn files_scan(
        &self,
        prefix: &str,
        f: &FileFilter,
        keep: impl Fn(&str) -> bool,
    ) -> Result<Vec<FileHit>, StoreError> {
        let mut found = BTreeMap::new();
        for row in self.file_paths.range((prefix, 0, 0)..)? {
            let (k, _) = row?;
            let (p, e, i) = k.value();
            if !p.starts_with(prefix) {
                break;
            }
            if keep(p) {
                found.insert((e, i), ());
            }
        }
        self.hits(found.into_keys(), f)
    }

    fn hits(
        &self,
        keys: impl Iterator<Item = (u64, u32)>,
        f: &FileFilter,
    ) -> Result<Vec<FileHit>, StoreError> {
        let mut out = Vec::new();
        for (e, i) in keys {
            let Some(v) = self.file_ops.get((e, i))? else {
                return Err(StoreError::Inconsistent(format!(
                    "file path index names missing op ({e}, {i})"
                )));
            };
            let rec = v.value();
            let a = archived(&rec, e)?;
            let s = a.session.to_native();
            if f.session.is_some_and(|fs| fs.0 != s) {
                continue;
            }
            let op = match a.op {
                ArchivedFileOp::Read => FileOp::Read,
                ArchivedFileOp::Write => FileOp::Write,
                ArchivedFileOp::Edit => FileOp::Edit,
                ArchivedFileOp::Modified => FileOp::Modified,
                ArchivedFileOp::Other => FileOp::Other,
            };
            if !f.ops.is_empty() && !f.ops.contains(&op) {
                continue;
            }
            let tool_call_id = a.tool_call_id.as_ref().map(|t| t.as_str().to_owned());
            let is_error = match &tool_call_id {
                Some(t) => self
                    .tool_results
                    .get((s, t.as_str()))?
                    .map(|v| v.value() != 0),
                None => None,
            };
            out.push(FileHit {
                session: SessionKey(s),
                entry: EntryKey(e),
                index: i,
                entry_id: a.entry_id.as_ref().map(|t| t.as_str().to_owned()),
                tool_call_id,
                tool_name: a.tool_name.as_str().to_owned(),
                op,
                path: a.path.as_str().to_owned(),
                resolved: a.resolved.as_str().to_owned(),
                timestamp: a.timestamp.as_ref().map(|t| t.as_str().to_owned()),
                is_error,
                active: false,
            });
        }
        self.mark_active(&mut out)?;
        if f.active_only {
            out.retain(|h| h.active);
        }
        Ok(out)
    }

    /// Sets each hit's `active` flag. Per session, whichever is cheaper: one walk of the active
    /// path (O(depth), then a set lookup per hit) or an O(log depth) ancestor test per hit.
    fn mark_active(&self, hits: &mut [FileHit]) -> Result<(), StoreError> {
        let mut per_session: BTreeMap<SessionKey, usize> = BTreeMap::new();
        for h in hits.iter() {
            *per_session.entry(h.session).or_default() += 1;
        }
        let mut on_path: BTreeMap<SessionKey, Active> = BTreeMap::new();
        for (&s, &n) in &per_session {
            let active = match self.leaf(s)? {
                None => Active::Nothing,
                Some(leaf) => {
                    let depth = u64::from(self.link(leaf)?.map_or(0, |l| l.depth)) + 1;
                    let per_hit_cost = n as u64 * (u64::from(depth.ilog2()) + 2);
                    if per_hit_cost >= depth {
                        let keys = self.path_to_root(leaf)?;
                        Active::Path(keys.into_iter().map(|k| k.0).collect())
                    } else {
                        Active::Leaf(leaf)
                    }
                }
            };
            on_path.insert(s, active);
        }
        for h in hits.iter_mut() {
            h.active = match on_path.get(&h.session) {
                Some(Active::Path(set)) => set.contains(&h.entry.0),
                Some(Active::Leaf(leaf)) => self.is_ancestor(h.entry, *leaf)?,
                Some(Active::Nothing) | None => false,
            };
        }
        Ok(())
    }
}

/// How the hits of one session learn whether they are on its active path.
enum Active {
    /// The session has no leaf.
    Nothing,
    /// The keys of the whole active path.
    Path(std::collections::HashSet<u64>),
    /// Test each hit against the leaf.
    Leaf(EntryKey),
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
