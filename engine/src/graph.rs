//! Read queries over one consistent snapshot of the store: sessions, entries, and the tree.
//!
//! Invariants:
//! - every query reads the store only, never a session file;
//! - tree walks read the fixed-width `parents.v1` table only (no record is decoded; the
//!   exceptions start from a record that is no tree node, pi's fallback leaf:
//!   [`Snapshot::context_leaf`], [`Snapshot::context_path`] and `context_runs` read that
//!   record's JSON for its `id` and `parentId`);
//! - the k-th ancestor and the LCA take O(log depth) steps, using each entry's skip pointer
//!   (Myers' jump pointers: a node's jump depends only on its depth, so two nodes at the same
//!   depth jump to the same depth, and the usual binary-lifting argument applies);
//! - nothing recurses: paths are built with loops, so a 1,000,000-deep chain is fine;
//! - a row is read from its block ([`crate::row_block`]); each thread keeps the last block it
//!   decoded, tagged with its snapshot's number, so reads in key order decode each block once
//!   and no snapshot ever sees another's block.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use redb::{ReadOnlyTable, ReadTransaction, ReadableTable};

use crate::error::StoreError;
use crate::ids::{EntryKey, Link, SessionKey};
use crate::record::{
    ArchivedEntryRecord, ArchivedRowKind, EntryRecord, Rkyv, SessionRecord, decode_entry,
    decode_session,
};
use crate::row_block::Block;
use crate::schema;

/// Numbers snapshots for the block cache.
static NEXT_SNAPSHOT: AtomicU64 = AtomicU64::new(1);

/// The last block of rows this thread decoded.
struct CachedBlock {
    snapshot: u64,
    first: u64,
    block: Block<'static>,
}

thread_local! {
    static LAST_BLOCK: Cell<Option<CachedBlock>> = const { Cell::new(None) };
}

/// Blocks up to this size (plain) are kept in the cache; a larger one is a single huge row,
/// read in place each time.
const CACHE_MAX: usize = crate::record::LARGE_ROW;

/// The result of looking something up by id or id prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<T> {
    /// Exactly one match.
    Found(T),
    /// Nothing matches.
    NotFound,
    /// Several match (the first few are given).
    Ambiguous(Vec<T>),
}

impl<T> Lookup<T> {
    /// The match, if unique.
    pub fn found(self) -> Option<T> {
        match self {
            Self::Found(t) => Some(t),
            _ => None,
        }
    }
}

/// A read-only, consistent view of the store.
pub struct Snapshot {
    pub(crate) _tx: ReadTransaction,
    pub(crate) sources: ReadOnlyTable<&'static str, schema::SourceStat>,
    pub(crate) sessions: ReadOnlyTable<u64, Rkyv<SessionRecord>>,
    pub(crate) session_ids: ReadOnlyTable<(&'static str, u64), ()>,
    pub(crate) entries: ReadOnlyTable<u64, &'static [u8]>,
    /// This snapshot's number in the block cache.
    id: u64,
    pub(crate) session_runs: ReadOnlyTable<(u64, u64), (u64, u64)>,
    pub(crate) entry_ids: ReadOnlyTable<(u64, &'static str), u64>,
    pub(crate) parents: ReadOnlyTable<u64, Link>,
    pub(crate) children: ReadOnlyTable<(u64, u64), ()>,
    pub(crate) labels: ReadOnlyTable<(u64, &'static str), &'static str>,
    pub(crate) run_starts: ReadOnlyTable<u64, u64>,
    pub(crate) settings: ReadOnlyTable<(u64, u64), u8>,
    pub(crate) file_hits: ReadOnlyTable<(&'static str, u64, u64), &'static [u8]>,
    pub(crate) file_resolved: ReadOnlyTable<(&'static str, u64, &'static str), ()>,
    pub(crate) file_session_paths: ReadOnlyTable<(u64, &'static str), ()>,
    pub(crate) outline: ReadOnlyTable<(u64, u64, u32), &'static [u8]>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Snapshot")
    }
}

impl Snapshot {
    pub(crate) fn new(tx: ReadTransaction) -> Result<Self, StoreError> {
        Ok(Self {
            sources: tx.open_table(schema::SOURCES)?,
            sessions: tx.open_table(schema::SESSIONS)?,
            session_ids: tx.open_table(schema::SESSION_IDS)?,
            entries: tx.open_table(schema::ENTRIES)?,
            id: NEXT_SNAPSHOT.fetch_add(1, Ordering::Relaxed),
            session_runs: tx.open_table(schema::SESSION_RUNS)?,
            entry_ids: tx.open_table(schema::ENTRY_IDS)?,
            parents: tx.open_table(schema::PARENTS)?,
            children: tx.open_table(schema::CHILDREN)?,
            labels: tx.open_table(schema::LABELS)?,
            run_starts: tx.open_table(schema::RUN_STARTS)?,
            settings: tx.open_table(schema::SETTINGS)?,
            file_hits: tx.open_table(crate::files::FILE_HITS)?,
            file_resolved: tx.open_table(crate::files::FILE_RESOLVED)?,
            file_session_paths: tx.open_table(crate::files::FILE_SESSION_PATHS)?,
            outline: tx.open_table(crate::outline::OUTLINE)?,
            _tx: tx,
        })
    }

    // ---- sessions ------------------------------------------------------------------------

    /// Every session, in key order (the catalogue; sort it as needed).
    pub fn sessions(&self) -> Result<Vec<(SessionKey, SessionRecord)>, StoreError> {
        let mut out = Vec::new();
        for row in self.sessions.iter()? {
            let (k, v) = row?;
            let k = k.value();
            out.push((SessionKey(k), decode_session(v.value().bytes(), k)?));
        }
        Ok(out)
    }

    /// One session's record.
    pub fn session(&self, s: SessionKey) -> Result<Option<SessionRecord>, StoreError> {
        match self.sessions.get(s.0)? {
            Some(v) => Ok(Some(decode_session(v.value().bytes(), s.0)?)),
            None => Ok(None),
        }
    }

    /// The session imported from a file (give the canonical path).
    pub fn session_by_path(
        &self,
        path: &std::path::Path,
    ) -> Result<Option<SessionKey>, StoreError> {
        let canon = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        Ok(self
            .sources
            .get(canon.to_string_lossy().as_ref())?
            .map(|v| SessionKey(v.value().0)))
    }

    /// A session by id or unique id prefix. A whole id wins over the longer ids it is a prefix
    /// of, but several sessions with that very id (copies of one file, two files with the same
    /// header id) are [`Lookup::Ambiguous`], all of them listed, never one picked.
    pub fn find_session(&self, id_or_prefix: &str) -> Result<Lookup<SessionKey>, StoreError> {
        let mut found = Vec::new();
        let mut exact = Vec::new();
        for row in self.session_ids.range((id_or_prefix, 0)..)? {
            let (k, _) = row?;
            let (id, s) = k.value();
            if !id.starts_with(id_or_prefix) {
                break;
            }
            // Rows with the whole id sort before every longer id.
            if id == id_or_prefix {
                exact.push(SessionKey(s));
                continue;
            }
            if !exact.is_empty() {
                break;
            }
            found.push(SessionKey(s));
            if found.len() > 8 {
                break;
            }
        }
        if !exact.is_empty() {
            return Ok(lookup(exact));
        }
        Ok(lookup(found))
    }

    // ---- entries -------------------------------------------------------------------------

    /// A session's rows in file order (every physical line; see [`EntryRecord`]).
    pub fn rows(&self, s: SessionKey) -> Result<Vec<EntryKey>, StoreError> {
        let mut out = Vec::new();
        for run in self.row_runs(s)? {
            out.extend(run.map(EntryKey));
        }
        Ok(out)
    }

    /// A session's rows in file order as runs of consecutive entry keys
    /// ([`schema::SESSION_RUNS`]).
    pub fn row_runs(&self, s: SessionKey) -> Result<Vec<std::ops::Range<u64>>, StoreError> {
        let mut out = Vec::new();
        for row in self.session_runs.range((s.0, 0)..=(s.0, u64::MAX))? {
            let (first, n) = row?.1.value();
            let end = first.checked_add(n).ok_or_else(|| {
                StoreError::Inconsistent(format!("session {s}: a run of {n} rows from {first}"))
            })?;
            out.push(first..end);
        }
        Ok(out)
    }

    /// A stored row, decoded.
    pub fn entry(&self, e: EntryKey) -> Result<Option<EntryRecord>, StoreError> {
        self.with_row(e, |bytes| decode_entry(bytes, e.0))?
            .transpose()
    }

    /// An entry's stored JSON, parsed as pi's `JSON.parse` would (key order kept, lone
    /// surrogates as U+FFFD: [`pisess_formats::value::parse_owned`]). JSON that cannot be read
    /// (nested too deep) is [`StoreError::UnreadableEntry`], naming the session file, the line
    /// and the entry; a row without JSON text is [`StoreError::Inconsistent`].
    pub fn entry_value(&self, e: EntryKey) -> Result<serde_json::Value, StoreError> {
        self.entry_value_as(e, false)
    }

    /// [`Self::entry_value`] of a row whose bytes are first checked against the blake3 it got
    /// at import: for what writes the entry out as a new copy (a fork), so that a damaged row
    /// is an error ([`StoreError::DamagedRow`]) and not a changed entry.
    pub fn checked_entry_value(&self, e: EntryKey) -> Result<serde_json::Value, StoreError> {
        self.entry_value_as(e, true)
    }

    /// The error for row `e` of `session` (from line `line`) whose bytes no longer match.
    pub fn damaged_row(&self, e: EntryKey, session: u64, line: u64) -> StoreError {
        let file = self
            .session(SessionKey(session))
            .ok()
            .flatten()
            .map_or_else(|| format!("(session {session})"), |r| r.path);
        StoreError::DamagedRow {
            file,
            line,
            row: e.0,
        }
    }

    fn entry_value_as(&self, e: EntryKey, checked: bool) -> Result<serde_json::Value, StoreError> {
        let (text, session, line, id, intact) = self
            .with_entry(e, |a| {
                (
                    a.json_text().map(std::borrow::Cow::into_owned),
                    u64::from(a.session),
                    u64::from(a.line),
                    a.id.as_ref().map(|t| t.as_str().to_owned()),
                    !checked || a.checked_raw_bytes().is_some(),
                )
            })?
            .ok_or_else(|| StoreError::Inconsistent(format!("row {e} is missing")))?;
        if !intact {
            return Err(self.damaged_row(e, session, line));
        }
        let text =
            text.ok_or_else(|| StoreError::Inconsistent(format!("entry {e} has no JSON text")))?;
        match pisess_formats::value::parse_owned(&text) {
            Ok(v) => Ok(v),
            Err(source) => Err(StoreError::UnreadableEntry {
                file: self
                    .session(SessionKey(session))?
                    .map_or_else(|| format!("(session {session})"), |r| r.path),
                line,
                id,
                source,
            }),
        }
    }

    /// Calls `f` with a stored row, read in place from its decoded block.
    pub fn with_entry<R>(
        &self,
        e: EntryKey,
        f: impl FnOnce(&ArchivedEntryRecord) -> R,
    ) -> Result<Option<R>, StoreError> {
        self.with_row(e, |bytes| {
            rkyv::access::<ArchivedEntryRecord, rkyv::rancor::Error>(bytes)
                .map(f)
                .map_err(|source| StoreError::CorruptRecord {
                    table: schema::ENTRIES_NAME,
                    key: e.0.to_string(),
                    source,
                })
        })?
        .transpose()
    }

    /// Whether a row is stored under `e`.
    pub fn has_entry(&self, e: EntryKey) -> Result<bool, StoreError> {
        Ok(self.with_row(e, |_| ())?.is_some())
    }

    /// Calls `f` with the serialised record of row `e` (from the thread's cached block when
    /// it holds `e`).
    fn with_row<R>(
        &self,
        e: EntryKey,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, StoreError> {
        let corrupt = |key, source| StoreError::CorruptBlock {
            table: schema::ENTRIES_NAME,
            key,
            source,
        };
        // Taken out while in use, so a nested read just misses.
        let cached = LAST_BLOCK.with(Cell::take).filter(|c| {
            c.snapshot == self.id && c.first <= e.0 && e.0 - c.first < u64::from(c.block.rows())
        });
        if let Some(c) = cached {
            let got = c
                .block
                .record((e.0 - c.first) as u32)
                .map(f)
                .map_err(|err| corrupt(c.first, err));
            LAST_BLOCK.with(|cell| cell.set(Some(c)));
            return got.map(Some);
        }
        let Some(row) = self.entries.range(..=e.0)?.next_back() else {
            return Ok(None);
        };
        let (k, v) = row?;
        let first = k.value();
        let value = v.value();
        let block = Block::decode(value).map_err(|err| corrupt(first, err))?;
        let at = e.0 - first;
        if at >= u64::from(block.rows()) {
            return Ok(None);
        }
        let got = f(block.record(at as u32).map_err(|err| corrupt(first, err))?);
        if value.len() <= CACHE_MAX {
            LAST_BLOCK.with(|cell| {
                cell.set(Some(CachedBlock {
                    snapshot: self.id,
                    first,
                    block: block.into_owned(),
                }));
            });
        }
        Ok(Some(got))
    }

    /// The id of an entry.
    pub fn entry_id(&self, e: EntryKey) -> Result<Option<String>, StoreError> {
        Ok(self
            .with_entry(e, |a| a.id.as_ref().map(|s| s.as_str().to_owned()))?
            .flatten())
    }

    /// An entry by exact id (a later duplicate id wins, as in pi).
    pub fn entry_by_id(&self, s: SessionKey, id: &str) -> Result<Option<EntryKey>, StoreError> {
        Ok(self.entry_ids.get((s.0, id))?.map(|v| EntryKey(v.value())))
    }

    /// An entry by id or unique id prefix.
    pub fn find_entry(
        &self,
        s: SessionKey,
        id_or_prefix: &str,
    ) -> Result<Lookup<EntryKey>, StoreError> {
        if let Some(e) = self.entry_by_id(s, id_or_prefix)? {
            return Ok(Lookup::Found(e));
        }
        let mut found = Vec::new();
        for row in self
            .entry_ids
            .range((s.0, id_or_prefix)..=(s.0, "\u{10FFFF}"))?
        {
            let (k, v) = row?;
            if !k.value().1.starts_with(id_or_prefix) {
                break;
            }
            found.push(EntryKey(v.value()));
            if found.len() > 8 {
                break;
            }
        }
        Ok(lookup(found))
    }

    // ---- tree ----------------------------------------------------------------------------

    /// The tree data of an entry (`None` for rows that are not tree nodes).
    pub fn link(&self, e: EntryKey) -> Result<Option<Link>, StoreError> {
        Ok(self.parents.get(e.0)?.map(|v| v.value()))
    }

    fn must_link(&self, e: EntryKey) -> Result<Link, StoreError> {
        self.link(e)?
            .ok_or_else(|| StoreError::Inconsistent(format!("entry {e} has no link")))
    }

    /// The parent of an entry.
    pub fn parent(&self, e: EntryKey) -> Result<Option<EntryKey>, StoreError> {
        Ok(self.link(e)?.and_then(|l| l.parent()))
    }

    /// The depth of an entry (a root has depth 0).
    pub fn depth(&self, e: EntryKey) -> Result<Option<u32>, StoreError> {
        Ok(self.link(e)?.map(|l| l.depth))
    }

    /// The children of an entry, in file order: those stored in `children` (each starts a
    /// run) and the one that continues the entry's run (key + 1, when its parent is the entry).
    pub fn children(&self, e: EntryKey) -> Result<Vec<EntryKey>, StoreError> {
        let mut out = Vec::new();
        for row in self.children.range((e.0, 0)..=(e.0, u64::MAX))? {
            out.push(EntryKey(row?.0.value().1));
        }
        if let Some(next) = e.0.checked_add(1)
            && self
                .link(EntryKey(next))?
                .is_some_and(|l| l.parent() == Some(e))
        {
            let at = out.partition_point(|c| c.0 < next);
            out.insert(at, EntryKey(next));
        }
        Ok(out)
    }

    /// The path from the root to `e` (inclusive), root first, like pi's `getBranch`.
    pub fn path_to_root(&self, e: EntryKey) -> Result<Vec<EntryKey>, StoreError> {
        let mut out = Vec::new();
        let mut cur = Some(e);
        while let Some(c) = cur {
            let Some(l) = self.link(c)? else { break };
            out.push(c);
            cur = l.parent();
        }
        out.reverse();
        Ok(out)
    }

    /// The entry pi's context is built from when no entry is given (its `buildSessionPath`
    /// with the loaded leaf, the last entry's `id`): the leaf ([`Self::leaf`]), or, when the
    /// last entry has no string id, that entry itself — pi's leaf id is then not text and it
    /// falls back to the last entry of the list — except when that id is `null`, for which
    /// pi's path is empty. `None` for a session without entries, or a last `"id": null`.
    pub fn context_leaf(&self, s: SessionKey) -> Result<Option<EntryKey>, StoreError> {
        let Some(rec) = self.session(s)? else {
            return Ok(None);
        };
        if let Some(leaf) = rec.leaf {
            return Ok(Some(EntryKey(leaf)));
        }
        if rec.entries == 0 {
            // A header only (junk lines after it are not walked back over).
            return Ok(None);
        }
        let Some(last) = self.last_entry(s)? else {
            return Ok(None);
        };
        let id_null = matches!(
            self.entry_value(last)?.get("id"),
            Some(serde_json::Value::Null)
        );
        Ok((!id_null).then_some(last))
    }

    /// Whether row `e` is a record pi loads as an entry (an object, or a truthy JSON value,
    /// after the header; with an id or not), not a header or a junk line.
    pub fn is_entry(&self, e: EntryKey) -> Result<bool, StoreError> {
        Ok(self
            .with_entry(e, |a| {
                matches!(a.kind, ArchivedRowKind::Entry | ArchivedRowKind::Value)
            })?
            .unwrap_or(false))
    }

    /// The last entry in file order ([`Self::is_entry`]).
    pub fn last_entry(&self, s: SessionKey) -> Result<Option<EntryKey>, StoreError> {
        for run in self.row_runs(s)?.into_iter().rev() {
            for k in run.rev() {
                if self.is_entry(EntryKey(k))? {
                    return Ok(Some(EntryKey(k)));
                }
            }
        }
        Ok(None)
    }

    /// The parent pi's path walk takes from `e` when `e` is no tree node (an entry whose `id`
    /// is not a string, which pisess reaches only as pi's fallback leaf): the entry its
    /// `parentId` names, when that is non-empty text (pi's walk stops at a falsy one) and an
    /// entry has that id. `None` for a tree node: its parent is its link's. (pi also follows
    /// a `parentId` that is a number or `true` to an entry with that id; pisess links text
    /// only.)
    pub(crate) fn unlinked_parent(
        &self,
        s: SessionKey,
        e: EntryKey,
    ) -> Result<Option<EntryKey>, StoreError> {
        if self.link(e)?.is_some() {
            return Ok(None);
        }
        // From the JSON, not the record: a record whose typed view failed (an `id` that is
        // a number) has no `parent_id`.
        let value = self.entry_value(e)?;
        match value.get("parentId").and_then(serde_json::Value::as_str) {
            Some(p) if !p.is_empty() => self.entry_by_id(s, p),
            _ => Ok(None),
        }
    }

    /// The path root → `e` (inclusive) as pi's context walks it: [`Self::path_to_root`] for a
    /// tree node; for a record that is none ([`Self::context_leaf`]'s fallback) the record
    /// itself after the path of the entry its `parentId` names.
    pub fn context_path(&self, s: SessionKey, e: EntryKey) -> Result<Vec<EntryKey>, StoreError> {
        if self.link(e)?.is_some() {
            return self.path_to_root(e);
        }
        let mut out = match self.unlinked_parent(s, e)? {
            Some(p) => self.path_to_root(p)?,
            None => Vec::new(),
        };
        out.push(e);
        Ok(out)
    }

    /// The ancestor of `e` at depth `d` (`e` itself when `d` is its depth), in O(log depth).
    pub fn ancestor_at_depth(&self, e: EntryKey, d: u32) -> Result<Option<EntryKey>, StoreError> {
        let Some(mut l) = self.link(e)? else {
            return Ok(None);
        };
        if l.depth < d {
            return Ok(None);
        }
        let mut cur = e;
        while l.depth > d {
            let lj = self.must_link(l.jump)?;
            if lj.depth >= d {
                cur = l.jump;
                l = lj;
            } else {
                cur = l.parent;
                l = self.must_link(cur)?;
            }
        }
        Ok(Some(cur))
    }

    /// The k-th ancestor of `e` (k = 0 is `e`), in O(log depth).
    pub fn ancestor(&self, e: EntryKey, k: u32) -> Result<Option<EntryKey>, StoreError> {
        let Some(l) = self.link(e)? else {
            return Ok(None);
        };
        match l.depth.checked_sub(k) {
            Some(d) => self.ancestor_at_depth(e, d),
            None => Ok(None),
        }
    }

    /// Whether `a` is an ancestor of `b` (or `b` itself).
    pub fn is_ancestor(&self, a: EntryKey, b: EntryKey) -> Result<bool, StoreError> {
        let Some(la) = self.link(a)? else {
            return Ok(false);
        };
        Ok(self.ancestor_at_depth(b, la.depth)? == Some(a))
    }

    /// The lowest common ancestor of two entries, in O(log depth); `None` when they are in
    /// different trees (or are not tree nodes).
    pub fn lca(&self, a: EntryKey, b: EntryKey) -> Result<Option<EntryKey>, StoreError> {
        let (Some(la), Some(lb)) = (self.link(a)?, self.link(b)?) else {
            return Ok(None);
        };
        let d = la.depth.min(lb.depth);
        let (Some(mut a), Some(mut b)) =
            (self.ancestor_at_depth(a, d)?, self.ancestor_at_depth(b, d)?)
        else {
            return Ok(None);
        };
        while a != b {
            let (la, lb) = (self.must_link(a)?, self.must_link(b)?);
            if la.parent().is_none() || lb.parent().is_none() {
                // Two different roots: the entries are in different trees.
                return Ok(None);
            }
            if la.jump != lb.jump {
                a = la.jump;
                b = lb.jump;
            } else {
                a = la.parent;
                b = lb.parent;
            }
        }
        Ok(Some(a))
    }

    /// The tree roots of a session, in file order.
    pub fn roots(&self, s: SessionKey) -> Result<Vec<EntryKey>, StoreError> {
        let mut out = Vec::new();
        for e in self.rows(s)? {
            if let Some(l) = self.link(e)?
                && l.parent().is_none()
            {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// The leaf pi resumes at: the last record in file order, if it has an id.
    pub fn leaf(&self, s: SessionKey) -> Result<Option<EntryKey>, StoreError> {
        Ok(self.session(s)?.and_then(|r| r.leaf).map(EntryKey))
    }

    /// The session's name (last `session_info`, trimmed).
    pub fn session_name(&self, s: SessionKey) -> Result<Option<String>, StoreError> {
        Ok(self.session(s)?.and_then(|r| r.name))
    }

    /// The label of an entry, resolved as pi does (all entries in file order, last wins).
    pub fn label(&self, s: SessionKey, target_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .labels
            .get((s.0, target_id))?
            .map(|v| v.value().to_owned()))
    }

    /// Every label of a session: (target id, label), by target id.
    pub fn labels(&self, s: SessionKey) -> Result<Vec<(String, String)>, StoreError> {
        let mut out = Vec::new();
        for row in self.labels.range((s.0, "")..=(s.0, "\u{10FFFF}"))? {
            let (k, v) = row?;
            out.push((k.value().1.to_owned(), v.value().to_owned()));
        }
        Ok(out)
    }

    /// Whether a session has a label in force ([`Snapshot::labels`] is not empty), read
    /// without reading the labels.
    pub fn has_labels(&self, s: SessionKey) -> Result<bool, StoreError> {
        Ok(self
            .labels
            .range((s.0, "")..=(s.0, "\u{10FFFF}"))?
            .next()
            .transpose()?
            .is_some())
    }

    /// The settings entries of a session (`thinking_level_change` →
    /// [`schema::SETTING_THINKING`], `model_change` → [`schema::SETTING_MODEL`]), in file order.
    pub fn settings(&self, s: SessionKey) -> Result<Vec<(EntryKey, u8)>, StoreError> {
        let mut out = Vec::new();
        for row in self.settings.range((s.0, 0)..=(s.0, u64::MAX))? {
            let (k, v) = row?;
            out.push((EntryKey(k.value().1), v.value()));
        }
        Ok(out)
    }
}

fn lookup<T>(mut found: Vec<T>) -> Lookup<T> {
    match found.len() {
        0 => Lookup::NotFound,
        1 => Lookup::Found(found.remove(0)),
        _ => Lookup::Ambiguous(found),
    }
}
