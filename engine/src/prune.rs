//! Pruning a session: keep the paths root → chosen entries, drop every other branch.
//!
//! Invariants:
//! - every entry on a kept path is written unchanged (its stored JSON text), in file order, so
//!   the context pi builds at any kept entry is the same as in the source: pi's context at an
//!   entry depends only on the path root → entry (compactions, their `firstKeptEntryId`,
//!   branch summaries, context edits and settings are all on that path);
//! - the header is written unchanged (a v1/v2 session's stored header is the migrated one);
//! - pi resolves labels and the session name over the whole file in file order, not per
//!   branch. So for every kept entry, the last `label` entry targeting it is kept, and the
//!   last `session_info` entry is kept; when such an entry lies on a dropped branch it is
//!   re-attached (its `parentId` rewritten) to its nearest kept ancestor, or made a root when
//!   it has none; but those that come after the last kept entry in file order are chained
//!   under that entry, each under the one before, so pi resumes with the context of the last
//!   kept entry (pi's leaf is the file's last entry; neither kind adds to the context);
//! - a kept entry where import cut a parent cycle (a root whose `parentId` names an entry of
//!   the session) is written with `"parentId":null`: the source hangs pi, the output must not.
//!   Those and the re-attached entries are the only entries whose JSON changes;
//! - junk lines, id-less records and other non-tree rows are dropped (pi ignores or cannot
//!   reach them);
//! - walks are loops over parent links (no recursion), so a 1,000,000-deep chain is fine; the
//!   plan holds a few words per row (its fate and length, and while planning its branch) and
//!   per dropped branch (no id text but the shared id of the entry it forks from), the output
//!   is streamed row by row.
//!
//! Stored rows are read through [`Snapshot::with_entry`] only for the row kind, id, type and
//! JSON text.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::Arc;

use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};
use crate::record::RowKind;

/// Why a prune failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PruneError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The output failed.
    #[error("cannot write the pruned session")]
    Io(#[from] std::io::Error),
    /// The session is not in the store.
    #[error("no session {0} in the store")]
    NoSession(SessionKey),
    /// A kept entry is not a tree node.
    #[error("entry {0} is not a tree node (it has no id), so it has no path to keep")]
    NotANode(EntryKey),
    /// Nothing to keep.
    #[error("no entry to keep")]
    NothingKept,
    /// A row that must be written has no UTF-8 JSON text.
    #[error("row {0} (line {1}) has no JSON text")]
    NoText(EntryKey, u64),
    /// A label or session_info entry to re-attach does not parse.
    #[error("entry {0} does not parse as JSON: {1}")]
    BadJson(EntryKey, serde_json::Error),
}

/// What happens to a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFate {
    /// The header: written unchanged.
    Header,
    /// On a kept path: written unchanged.
    Kept,
    /// On a kept path, a root only because its `parentId` closed a parent cycle (import cut
    /// the cycle there): written with `"parentId":null`, so the output has no cycle (pi hangs
    /// on one) and its tree is the one pisess shows.
    Rerooted,
    /// On a dropped branch but kept for the label map or the session name: written with a new
    /// `parentId`.
    Reattached,
    /// A tree node on a dropped branch.
    Dropped,
    /// Not a tree node (junk, an id-less record, a value): dropped.
    Other,
}

/// One dropped branch: a subtree whose top's parent is kept or re-attached (or that is a whole
/// root tree).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedBranch {
    /// The first entry of the branch (its id: [`Snapshot::entry_id`]; read when reported, not
    /// held: a fan of siblings has as many branches as entries).
    pub top: EntryKey,
    /// The id of the kept entry it forks from (`None`: a root tree), shared by the branches
    /// that fork from the same entry.
    pub from_id: Option<Arc<str>>,
    /// Entries dropped in it.
    pub entries: u64,
    /// Bytes of their lines.
    pub bytes: u64,
}

/// A planned prune.
#[derive(Debug, Clone)]
pub struct PrunePlan {
    /// The session.
    pub session: SessionKey,
    /// Each row in file order with its fate and the byte length of its line (JSON text plus a
    /// newline; 0 for rows without text).
    pub rows: Vec<(EntryKey, RowFate, u64)>,
    /// Re-attached entries and their new `parentId` (`None`: a root).
    pub reattached: HashMap<EntryKey, Option<String>>,
    /// The dropped branches, in file order of their tops.
    pub branches: Vec<DroppedBranch>,
    /// Entries kept (not counting the header; re-attached ones included).
    pub kept_entries: u64,
    /// Tree nodes dropped.
    pub dropped_entries: u64,
    /// Non-tree rows dropped (junk lines, id-less records).
    pub dropped_other: u64,
    /// Bytes of the dropped lines.
    pub dropped_bytes: u64,
    /// The entry pi will resume at when it opens the output: the last kept entry in file order.
    pub new_leaf: Option<EntryKey>,
}

/// What [`Snapshot::branch_index`] reads and fills: the rows (key order), each row's branch
/// once known, the ids of the entries branches fork from (read once each: reading one between
/// two rows would decode its block again every time), and the branches.
struct BranchWalk<'a> {
    rows: &'a [(EntryKey, RowFate, u64)],
    branch_of: &'a mut [u32],
    from_ids: &'a mut HashMap<EntryKey, Arc<str>>,
    branches: &'a mut Vec<DroppedBranch>,
}

impl BranchWalk<'_> {
    fn row(&self, e: EntryKey) -> Option<usize> {
        self.rows.binary_search_by_key(&e, |r| r.0).ok()
    }

    fn memo(&self, e: EntryKey) -> Option<usize> {
        let b = *self.branch_of.get(self.row(e)?)?;
        (b != u32::MAX).then_some(b as usize)
    }

    fn remember(&mut self, e: EntryKey, b: usize) {
        if let (Some(i), Ok(b)) = (self.row(e), u32::try_from(b))
            && let Some(slot) = self.branch_of.get_mut(i)
        {
            *slot = b;
        }
    }
}

struct RowInfo {
    kind: RowKind,
    id: Option<String>,
    type_name: Option<String>,
    len: u64,
}

impl Snapshot {
    fn row_info(&self, e: EntryKey) -> Result<RowInfo, StoreError> {
        self.with_entry(e, |a| {
            let kind = match a.kind {
                crate::record::ArchivedRowKind::Header => RowKind::Header,
                crate::record::ArchivedRowKind::Entry => RowKind::Entry,
                crate::record::ArchivedRowKind::Value => RowKind::Value,
                crate::record::ArchivedRowKind::Junk => RowKind::Junk,
            };
            RowInfo {
                kind,
                id: a.id.as_ref().map(|s| s.as_str().to_owned()),
                type_name: a.type_name.as_ref().map(|s| s.as_str().to_owned()),
                len: a.json_text().map_or(0, |t| t.len() as u64 + 1),
            }
        })?
        .ok_or_else(|| StoreError::Inconsistent(format!("row {e} is missing")))
    }

    /// [`Self::text`] of row `e` of session `s`, first checked against its import blake3: the
    /// pruned file is a new copy of the session, which may be its only one. (The damage is
    /// named by `s`, not by the row's own session field, which the hash does not cover.)
    fn checked_text(&self, s: SessionKey, e: EntryKey) -> Result<Option<String>, StoreError> {
        let (text, intact, line) = self
            .with_entry(e, |a| {
                (
                    a.json_text().map(std::borrow::Cow::into_owned),
                    a.checked_raw_bytes().is_some(),
                    u64::from(a.line),
                )
            })?
            .ok_or_else(|| StoreError::Inconsistent(format!("row {e} is missing")))?;
        if !intact {
            return Err(self.damaged_row(e, s.0, line));
        }
        Ok(text)
    }

    fn text(&self, e: EntryKey) -> Result<Option<String>, StoreError> {
        Ok(self
            .with_entry(e, |a| a.json_text().map(std::borrow::Cow::into_owned))?
            .flatten())
    }

    /// Plans a prune of session `s` that keeps the paths root → each of `keep`.
    pub fn prune_plan(&self, s: SessionKey, keep: &[EntryKey]) -> Result<PrunePlan, PruneError> {
        if self.session(s)?.is_none() {
            return Err(PruneError::NoSession(s));
        }
        if keep.is_empty() {
            return Err(PruneError::NothingKept);
        }
        // The kept paths: walk up from each target until an entry already kept.
        let mut kept: HashSet<EntryKey> = HashSet::new();
        for &t in keep {
            if self.link(t)?.is_none() {
                return Err(PruneError::NotANode(t));
            }
            let mut cur = Some(t);
            while let Some(c) = cur {
                if !kept.insert(c) {
                    break;
                }
                cur = self.parent(c)?;
            }
        }
        // One pass over the rows: fates, and the last label per target / last session_info.
        let runs = self.row_runs(s)?;
        let mut rows =
            Vec::with_capacity(runs.iter().map(|r| r.end - r.start).sum::<u64>() as usize);
        let mut last_label: HashMap<String, EntryKey> = HashMap::new();
        let mut last_info: Option<EntryKey> = None;
        let mut kept_ids: HashSet<String> = HashSet::new();
        let has_cuts = self.session(s)?.is_some_and(|r| r.cycle_cuts > 0);
        for e in runs.into_iter().flatten().map(EntryKey) {
            let info = self.row_info(e)?;
            let link = match info.kind {
                RowKind::Entry => self.link(e)?,
                _ => None,
            };
            let fate = match info.kind {
                RowKind::Header => RowFate::Header,
                _ if link.is_none() => RowFate::Other,
                _ if kept.contains(&e) => {
                    if has_cuts
                        && link.is_some_and(|l| l.parent().is_none())
                        && self.closed_cycle(s, e)?
                    {
                        RowFate::Rerooted
                    } else {
                        RowFate::Kept
                    }
                }
                _ => RowFate::Dropped,
            };
            let node = link.is_some();
            if matches!(fate, RowFate::Kept | RowFate::Rerooted)
                && let Some(id) = &info.id
            {
                kept_ids.insert(id.clone());
            }
            if node {
                match info.type_name.as_deref() {
                    Some("label") => {
                        if let Some(target) = self.label_target(e)? {
                            last_label.insert(target, e);
                        }
                    }
                    Some("session_info") => last_info = Some(e),
                    _ => {}
                }
            }
            rows.push((e, fate, info.len));
        }
        // Entries to re-attach.
        let mut extra: HashSet<EntryKey> = last_label
            .iter()
            .filter(|(target, _)| kept_ids.contains(*target))
            .map(|(_, &e)| e)
            .collect();
        extra.extend(last_info);
        extra.retain(|e| !kept.contains(e));
        let mut reattached = HashMap::new();
        // The last kept entry in file order: where pi resumes when nothing follows it. The
        // entries to re-attach that come after it are chained under it, in file order, so that
        // pi still resumes there (a label or session_info adds nothing to the context); hung
        // on their nearest kept ancestor, the last of them would move pi's leaf up there.
        let last_kept = rows
            .iter()
            .rev()
            .find(|r| matches!(r.1, RowFate::Kept | RowFate::Rerooted))
            .map(|r| r.0);
        if let Some(last) = last_kept {
            let mut after: Vec<EntryKey> = extra.iter().copied().filter(|&e| e > last).collect();
            after.sort_unstable();
            let mut above = self.entry_id(last)?;
            for e in after {
                extra.remove(&e);
                reattached.insert(e, above.clone());
                above = self.entry_id(e)?;
            }
        }
        for &e in &extra {
            let mut cur = self.parent(e)?;
            while let Some(c) = cur {
                if kept.contains(&c) {
                    break;
                }
                cur = self.parent(c)?;
            }
            let parent_id = match cur {
                Some(c) => self.entry_id(c)?,
                None => None,
            };
            reattached.insert(e, parent_id);
        }
        let mut plan = PrunePlan {
            session: s,
            rows,
            reattached,
            branches: Vec::new(),
            kept_entries: 0,
            dropped_entries: 0,
            dropped_other: 0,
            dropped_bytes: 0,
            new_leaf: None,
        };
        // Branches: each dropped entry belongs to the branch of its topmost dropped ancestor.
        // Rows are in key order (keys ascend in file order), so a row's place is a binary
        // search; `branch_of[i]` is row i's branch once known (u32::MAX before).
        if !plan.rows.is_sorted_by_key(|r| r.0) {
            return Err(StoreError::Inconsistent(format!(
                "session {s}: its rows' keys do not ascend in file order"
            ))
            .into());
        }
        let mut branch_of: Vec<u32> = vec![u32::MAX; plan.rows.len()];
        let mut from_ids: HashMap<EntryKey, Arc<str>> = HashMap::new();
        for i in 0..plan.rows.len() {
            let (e, fate, len) = plan.rows[i];
            match fate {
                RowFate::Header => continue,
                RowFate::Kept | RowFate::Rerooted => {
                    plan.kept_entries += 1;
                    plan.new_leaf = Some(e);
                    continue;
                }
                RowFate::Other => {
                    plan.dropped_other += 1;
                    plan.dropped_bytes += len;
                    continue;
                }
                RowFate::Reattached | RowFate::Dropped => {}
            }
            if plan.reattached.contains_key(&e) {
                plan.rows[i].1 = RowFate::Reattached;
                plan.kept_entries += 1;
                plan.new_leaf = Some(e);
                continue;
            }
            plan.dropped_entries += 1;
            plan.dropped_bytes += len;
            let boundary = |p: &EntryKey| kept.contains(p) || plan.reattached.contains_key(p);
            let mut walk = BranchWalk {
                rows: &plan.rows,
                branch_of: &mut branch_of,
                from_ids: &mut from_ids,
                branches: &mut plan.branches,
            };
            let b = self.branch_index(e, &boundary, &mut walk)?;
            if let Some(br) = plan.branches.get_mut(b) {
                br.entries += 1;
                br.bytes += len;
            }
        }
        plan.branches.shrink_to_fit();
        Ok(plan)
    }

    /// The branch a dropped entry belongs to, creating it (and memoising the walk) as needed.
    fn branch_index(
        &self,
        e: EntryKey,
        boundary: &dyn Fn(&EntryKey) -> bool,
        walk: &mut BranchWalk<'_>,
    ) -> Result<usize, StoreError> {
        // Walk up to a memoised entry or to the top of the dropped subtree.
        let mut chain = vec![e];
        let mut cur = e;
        let index = loop {
            if let Some(b) = walk.memo(cur) {
                break b;
            }
            match self.parent(cur)? {
                Some(p) if !boundary(&p) => {
                    chain.push(p);
                    cur = p;
                }
                p => {
                    let from_id = match p {
                        Some(p) => match walk.from_ids.get(&p) {
                            Some(id) => Some(Arc::clone(id)),
                            None => {
                                let id: Option<Arc<str>> = self.entry_id(p)?.map(Into::into);
                                if let Some(id) = &id {
                                    walk.from_ids.insert(p, Arc::clone(id));
                                }
                                id
                            }
                        },
                        None => None,
                    };
                    walk.branches.push(DroppedBranch {
                        top: cur,
                        from_id,
                        entries: 0,
                        bytes: 0,
                    });
                    break walk.branches.len() - 1;
                }
            }
        };
        for c in chain {
            walk.remember(c, index);
        }
        Ok(index)
    }

    /// Whether root `e` of session `s` is a root because import cut a parent cycle there: its
    /// `parentId` is a string naming an entry of the session (a `parentId` naming no entry
    /// makes an orphan root, which pi reads as a root too and is left as written).
    pub fn closed_cycle(&self, s: SessionKey, e: EntryKey) -> Result<bool, StoreError> {
        #[derive(serde::Deserialize)]
        struct Parent {
            #[serde(rename = "parentId")]
            parent_id: Option<serde_json::Value>,
        }
        let Some(text) = self.text(e)? else {
            return Ok(false);
        };
        let parent = pisess_formats::value::parse_owned::<Parent>(&text)
            .ok()
            .and_then(|p| p.parent_id)
            .and_then(|p| p.as_str().map(str::to_owned));
        match parent {
            Some(p) => Ok(self.entry_by_id(s, &p)?.is_some()),
            None => Ok(false),
        }
    }

    fn label_target(&self, e: EntryKey) -> Result<Option<String>, StoreError> {
        #[derive(serde::Deserialize)]
        struct Label {
            #[serde(rename = "targetId")]
            target_id: Option<serde_json::Value>,
        }
        let Some(text) = self.text(e)? else {
            return Ok(None);
        };
        Ok(pisess_formats::value::parse_owned::<Label>(&text)
            .ok()
            .and_then(|l| l.target_id)
            .and_then(|t| t.as_str().map(str::to_owned)))
    }

    /// The offset of the first byte where the pruned session ([`Self::write_pruned`]) differs
    /// from `file`'s bytes, or `None` when writing it would give the file again.
    pub fn pruned_first_difference(
        &self,
        plan: &PrunePlan,
        file: &mut dyn std::io::Read,
    ) -> Result<Option<u64>, PruneError> {
        crate::export::first_difference_of(file, |out| self.write_pruned(plan, out).map(drop))
    }

    /// Writes the pruned session: the header, then the kept and re-attached entries in file
    /// order, one JSON line each. Returns the bytes written.
    pub fn write_pruned(&self, plan: &PrunePlan, out: &mut dyn Write) -> Result<u64, PruneError> {
        let mut n = 0u64;
        for &(e, fate, _) in &plan.rows {
            let line = match fate {
                RowFate::Dropped | RowFate::Other => continue,
                RowFate::Header | RowFate::Kept => self.checked_text(plan.session, e)?,
                RowFate::Rerooted => match self.checked_text(plan.session, e)? {
                    None => None,
                    Some(t) => Some(reparent(e, &t, None)?),
                },
                RowFate::Reattached => match self.checked_text(plan.session, e)? {
                    None => None,
                    Some(t) => Some(reparent(e, &t, plan.reattached.get(&e).cloned().flatten())?),
                },
            };
            let Some(line) = line else {
                let line_no = self.entry(e)?.map_or(0, |r| r.line);
                return Err(PruneError::NoText(e, line_no));
            };
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
            n += line.len() as u64 + 1;
        }
        Ok(n)
    }
}

/// An entry's JSON with `parentId` replaced, re-serialised as pi's `JSON.stringify` would.
fn reparent(e: EntryKey, text: &str, parent: Option<String>) -> Result<String, PruneError> {
    let mut v: serde_json::Value =
        pisess_formats::value::parse_owned(text).map_err(|err| PruneError::BadJson(e, err))?;
    if let Some(o) = v.as_object_mut() {
        let p = parent.map_or(serde_json::Value::Null, Into::into);
        if o.get("parentId") == Some(&p) {
            return Ok(text.to_owned());
        }
        o.insert("parentId".into(), p);
    }
    Ok(pisess_formats::js::to_string(&v))
}
