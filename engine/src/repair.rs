//! The tree indexes as the records say they should be: checked by `pisess verify`, rewritten
//! by `pisess verify --repair`.
//!
//! Invariants:
//! - the expected `entry_ids`, `parents`, `children` and `labels` rows of a session are derived
//!   from its stored rows alone (file order, id, parentId, and the JSON of `label` entries),
//!   with import's rules: a later duplicate id wins; a parentId naming no entry makes a root; a
//!   cycle is cut where a depth-first walk in file order closes it; labels resolve in file
//!   order, the last one wins and an empty label clears;
//! - each session's `sources` row is derived from its record (key, file size, mtime, gone);
//! - `run_starts` is derived from the links ([`Link::starts_run`]) and rebuilt with them;
//! - `outline` blocks are derived from each session's records
//!   ([`Snapshot::expected_outline`]) and rewritten where they differ;
//! - repair runs in one write transaction and touches only those index tables: it never
//!   deletes or changes a record (`entries`, `session_runs`, `sessions`);
//! - nothing recurses: links are built with an explicit stack.
//!
//! The file-operation index (`file_hits`, `file_resolved`, `file_session_paths`,
//! `tool_results`) is rebuilt the same way: the rows every stored record implies are written by
//! import's own writer into a scratch in-memory store (session by session, rows in file order,
//! as import wrote them; a block's bytes depend on its hits only, not on how imports split
//! them), and the real tables are made equal to those, row by row.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use redb::ReadableTable;

use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, Link, SessionKey};
use crate::record::RowKind;
use crate::schema;
use crate::store::Store;

/// The file-operation index rows the records imply (see the module docs).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct FileIndex {
    pub(crate) hits: BTreeMap<(String, u64, u64), Vec<u8>>,
    pub(crate) resolved: BTreeSet<(String, u64, String)>,
    pub(crate) session_paths: BTreeSet<(u64, String)>,
    pub(crate) results: BTreeMap<(u64, String), Vec<u8>>,
}

impl Snapshot {
    /// Replays every stored entry's file operations through import's writer, into a scratch
    /// in-memory store, and returns the rows that gives.
    pub(crate) fn expected_file_index(&self) -> Result<FileIndex, StoreError> {
        use pisess_formats::entry::Entry;
        let scratch = redb::Builder::new()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| StoreError::Redb(e.into()))?;
        let tx = scratch.begin_write()?;
        {
            let mut w = crate::import::Writer::new(&tx)?;
            for (s, rec) in self.sessions()? {
                for e in self.rows(s)? {
                    let row = self.with_entry(e, |a| {
                        (a.kind == RowKind::Entry).then(|| {
                            (
                                a.json_text().map(std::borrow::Cow::into_owned),
                                a.id.as_ref().map(|x| x.as_str().to_owned()),
                                a.timestamp.as_ref().map(|x| x.as_str().to_owned()),
                            )
                        })
                    })?;
                    let Some(Some((Some(json), id, ts))) = row else {
                        continue;
                    };
                    if !json.trim_start().starts_with('{') {
                        continue;
                    }
                    let Ok(entry) = Entry::parse(&json).or_else(|_| Entry::parse_lenient(&json))
                    else {
                        continue;
                    };
                    let ops = crate::files::extract(&entry, &json);
                    if !ops.ops.is_empty() || ops.result.is_some() {
                        w.write_ops(s, e.0, &rec.cwd, id.as_deref(), ts.as_deref(), ops)?;
                    }
                }
            }
            w.flush_file_hits()?;
        }
        let mut out = FileIndex::default();
        for row in tx.open_table(crate::files::FILE_HITS)?.iter()? {
            let (k, v) = row?;
            let (p, s, c) = k.value();
            out.hits.insert((p.to_owned(), s, c), v.value().to_vec());
        }
        for row in tx.open_table(crate::files::FILE_RESOLVED)?.iter()? {
            let row = row?;
            let (r, s, p) = row.0.value();
            out.resolved.insert((r.to_owned(), s, p.to_owned()));
        }
        for row in tx.open_table(crate::files::FILE_SESSION_PATHS)?.iter()? {
            let row = row?;
            let (s, p) = row.0.value();
            out.session_paths.insert((s, p.to_owned()));
        }
        for row in tx.open_table(crate::files::TOOL_RESULTS)?.iter()? {
            let (k, v) = row?;
            let (s, t) = k.value();
            out.results.insert((s, t.to_owned()), v.value().to_vec());
        }
        Ok(out)
    }
}

/// One session's index rows as its records imply them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExpectedIndex {
    /// Entry id → entry key (the last row with that id).
    pub entry_ids: BTreeMap<String, u64>,
    /// Entry key → link, for every row with an id.
    pub links: BTreeMap<u64, Link>,
    /// Target id → label.
    pub labels: BTreeMap<String, String>,
}

/// What one stored row contributes.
struct RowFacts {
    id: Option<String>,
    parent: Option<String>,
    /// `Some((target, label))` for a `label` entry (an empty or missing label clears).
    label: Option<(String, Option<String>)>,
}

impl Snapshot {
    /// The index rows session `s` should have (see the module docs).
    pub fn expected_index(&self, s: SessionKey) -> Result<ExpectedIndex, StoreError> {
        let mut out = ExpectedIndex::default();
        // Nodes in file order: (key, id, parent id).
        let mut nodes: Vec<(u64, String, Option<String>)> = Vec::new();
        for e in self.rows(s)? {
            let facts = self.with_entry(e, |a| {
                let label = if a.kind == RowKind::Entry
                    && a.type_name.as_ref().map(|t| t.as_str()) == Some("label")
                {
                    a.json_text().and_then(|t| label_of(&t))
                } else {
                    None
                };
                RowFacts {
                    id: a.id.as_ref().map(|i| i.as_str().to_owned()),
                    parent: a.parent_id.as_ref().map(|p| p.as_str().to_owned()),
                    label,
                }
            })?;
            let Some(f) = facts else {
                return Err(StoreError::Inconsistent(format!(
                    "session {s} lists missing row {e}"
                )));
            };
            if let Some((target, label)) = f.label {
                match label {
                    Some(l) => {
                        out.labels.insert(target, l);
                    }
                    None => {
                        out.labels.remove(&target);
                    }
                }
            }
            if let Some(id) = f.id {
                out.entry_ids.insert(id.clone(), e.0);
                nodes.push((e.0, id, f.parent));
            }
        }
        out.links = link_nodes(&nodes, &out.entry_ids);
        Ok(out)
    }
}

/// `(targetId, label)` of a label entry's JSON, as import reads it.
fn label_of(json: &str) -> Option<(String, Option<String>)> {
    // Read through the typed view, as import reads it (a label that is not text included).
    let e = pisess_formats::Entry::parse_lenient(json).ok()?;
    let target = e.target_id.get()?.as_str().to_owned();
    let label = e
        .label
        .get()
        .map(|l| l.as_str().to_owned())
        .filter(|l| !l.is_empty());
    Some((target, label))
}

/// Links of every node: parent by id (the last node with it), depth, skip pointer.
fn link_nodes(
    nodes: &[(u64, String, Option<String>)],
    entry_ids: &BTreeMap<String, u64>,
) -> BTreeMap<u64, Link> {
    let index: HashMap<u64, usize> = nodes.iter().enumerate().map(|(i, n)| (n.0, i)).collect();
    let mut parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|(_, _, p)| {
            p.as_ref()
                .and_then(|p| entry_ids.get(p))
                .and_then(|k| index.get(k).copied())
        })
        .collect();
    const UNSEEN: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; nodes.len()];
    let mut links: Vec<Option<Link>> = vec![None; nodes.len()];
    let mut stack = Vec::new();
    for start in 0..nodes.len() {
        if state[start] != UNSEEN {
            continue;
        }
        state[start] = OPEN;
        stack.push(start);
        while let Some(&top) = stack.last() {
            if let Some(j) = parent[top] {
                if state[j] == UNSEEN {
                    state[j] = OPEN;
                    stack.push(j);
                    continue;
                }
                if state[j] == OPEN {
                    // `top` closes a cycle: it becomes a root.
                    parent[top] = None;
                }
            }
            let key = nodes[top].0;
            let link = match parent[top].and_then(|j| links[j].map(|l| (j, l))) {
                None => Link {
                    parent: EntryKey::NONE,
                    jump: EntryKey(key),
                    depth: 0,
                },
                Some((j, lp)) => {
                    let link_of = |k: EntryKey| index.get(&k.0).and_then(|&i| links[i]);
                    let lj = link_of(lp.jump).unwrap_or(lp);
                    let ljj = link_of(lj.jump).unwrap_or(lj);
                    let jump = if lp.depth - lj.depth == lj.depth - ljj.depth {
                        lj.jump
                    } else {
                        EntryKey(nodes[j].0)
                    };
                    Link {
                        parent: EntryKey(nodes[j].0),
                        jump,
                        depth: lp.depth + 1,
                    }
                }
            };
            links[top] = Some(link);
            state[top] = DONE;
            stack.pop();
        }
    }
    nodes
        .iter()
        .zip(links)
        .filter_map(|(n, l)| l.map(|l| (n.0, l)))
        .collect()
}

/// What [`Store::repair`] rewrote.
#[derive(Debug, Clone, Default)]
pub struct RepairReport {
    /// Sessions whose indexes were rebuilt.
    pub sessions: u64,
    /// Index rows that were missing or wrong and are now written.
    pub written: u64,
    /// Index rows that should not have existed and are now removed.
    pub removed: u64,
}

impl Store {
    /// Rebuilds `sources`, `entry_ids`, `parents`, `children`, `labels`, `run_starts`, `settings`,
    /// `outline` and the file index
    /// (`file_hits`, `file_resolved`, `file_session_paths`, `tool_results`) from the records,
    /// in one write transaction (see the module docs). Records are never touched.
    pub fn repair(&mut self) -> Result<RepairReport, StoreError> {
        let snap = self.snapshot()?;
        let mut expected = Vec::new();
        for (s, _) in snap.sessions()? {
            expected.push((s, snap.expected_index(s)?));
        }
        let files = snap.expected_file_index()?;
        let mut want_outline: BTreeMap<(u64, u64, u32), Vec<u8>> = BTreeMap::new();
        for (s, _) in snap.sessions()? {
            for (k, v) in snap.expected_outline(s)? {
                for (i, part) in crate::outline::parts(&v) {
                    want_outline.insert((s.0, k, i), part.to_vec());
                }
            }
        }
        // Each session's source row, from its record (the record is the truth: schema's
        // invariant on `sources.v2`).
        let mut want_sources: BTreeMap<String, schema::SourceStat> = BTreeMap::new();
        for (s, rec) in snap.sessions()? {
            let stat = schema::source_stat(s.0, &rec);
            want_sources.insert(rec.path, stat);
        }
        let mut want_settings: BTreeMap<(u64, u64), u8> = BTreeMap::new();
        for (s, _) in snap.sessions()? {
            for e in snap.rows(s)? {
                let v = snap.with_entry(e, |a| {
                    (a.kind == RowKind::Entry)
                        .then(|| schema::setting_of(a.type_name.as_ref().map(|t| t.as_str())))
                        .flatten()
                })?;
                if let Some(Some(v)) = v {
                    want_settings.insert((s.0, e.0), v);
                }
            }
        }
        drop(snap);
        let mut report = RepairReport::default();
        let tx = self.writer_db()?.begin_write()?;
        {
            let mut entry_ids = tx.open_table(schema::ENTRY_IDS)?;
            let mut parents = tx.open_table(schema::PARENTS)?;
            let mut children = tx.open_table(schema::CHILDREN)?;
            let mut labels = tx.open_table(schema::LABELS)?;
            let mut run_starts = tx.open_table(schema::RUN_STARTS)?;
            // Rows of sessions that no longer exist, or that no record implies, go.
            let mut want_ids: BTreeMap<(u64, String), u64> = BTreeMap::new();
            let mut want_labels: BTreeMap<(u64, String), String> = BTreeMap::new();
            let mut want_links: BTreeMap<u64, Link> = BTreeMap::new();
            for (s, x) in &expected {
                report.sessions += 1;
                for (id, k) in &x.entry_ids {
                    want_ids.insert((s.0, id.clone()), *k);
                }
                for (t, l) in &x.labels {
                    want_labels.insert((s.0, t.clone()), l.clone());
                }
                want_links.extend(x.links.iter().map(|(k, l)| (*k, *l)));
            }
            let mut sources = tx.open_table(schema::SOURCES)?;
            let mut stale: Vec<String> = Vec::new();
            for row in sources.iter()? {
                let (k, v) = row?;
                if want_sources.get(k.value()) != Some(&v.value()) {
                    stale.push(k.value().to_owned());
                }
            }
            for k in &stale {
                sources.remove(k.as_str())?;
                report.removed += 1;
            }
            for (k, v) in &want_sources {
                if sources.get(k.as_str())?.map(|x| x.value()) != Some(*v) {
                    sources.insert(k.as_str(), *v)?;
                    report.written += 1;
                }
            }
            let mut stale: Vec<(u64, String)> = Vec::new();
            for row in entry_ids.iter()? {
                let (k, v) = row?;
                let (s, id) = k.value();
                if want_ids.get(&(s, id.to_owned())) != Some(&v.value()) {
                    stale.push((s, id.to_owned()));
                }
            }
            for (s, id) in &stale {
                entry_ids.remove((*s, id.as_str()))?;
                report.removed += 1;
            }
            for ((s, id), k) in &want_ids {
                if entry_ids.get((*s, id.as_str()))?.map(|v| v.value()) != Some(*k) {
                    entry_ids.insert((*s, id.as_str()), *k)?;
                    report.written += 1;
                }
            }
            let mut stale: Vec<(u64, String)> = Vec::new();
            for row in labels.iter()? {
                let (k, v) = row?;
                let (s, t) = k.value();
                if want_labels.get(&(s, t.to_owned())).map(String::as_str) != Some(v.value()) {
                    stale.push((s, t.to_owned()));
                }
            }
            for (s, t) in &stale {
                labels.remove((*s, t.as_str()))?;
                report.removed += 1;
            }
            for ((s, t), l) in &want_labels {
                if labels
                    .get((*s, t.as_str()))?
                    .map(|v| v.value().to_owned())
                    .as_ref()
                    != Some(l)
                {
                    labels.insert((*s, t.as_str()), l.as_str())?;
                    report.written += 1;
                }
            }
            let mut stale: Vec<u64> = Vec::new();
            for row in parents.iter()? {
                let (k, v) = row?;
                if want_links.get(&k.value()) != Some(&v.value()) {
                    stale.push(k.value());
                }
            }
            for k in &stale {
                parents.remove(*k)?;
                report.removed += 1;
            }
            for (k, l) in &want_links {
                if parents.get(*k)?.map(|v| v.value()) != Some(*l) {
                    parents.insert(*k, *l)?;
                    report.written += 1;
                }
            }
            let want_starts: BTreeMap<u64, u64> = want_links
                .iter()
                .filter(|(k, l)| l.starts_run(EntryKey(**k)))
                .map(|(k, l)| (*k, l.parent.0))
                .collect();
            let mut stale: Vec<u64> = Vec::new();
            for row in run_starts.iter()? {
                let (k, v) = row?;
                if want_starts.get(&k.value()) != Some(&v.value()) {
                    stale.push(k.value());
                }
            }
            for k in &stale {
                run_starts.remove(*k)?;
                report.removed += 1;
            }
            for (k, p) in &want_starts {
                if run_starts.get(*k)?.map(|v| v.value()) != Some(*p) {
                    run_starts.insert(*k, *p)?;
                    report.written += 1;
                }
            }
            let want_children: std::collections::BTreeSet<(u64, u64)> = want_links
                .iter()
                .filter(|(k, l)| l.starts_run(EntryKey(**k)))
                .filter_map(|(k, l)| l.parent().map(|p| (p.0, *k)))
                .collect();
            let mut stale: Vec<(u64, u64)> = Vec::new();
            for row in children.iter()? {
                let (k, _) = row?;
                if !want_children.contains(&k.value()) {
                    stale.push(k.value());
                }
            }
            for k in &stale {
                children.remove(*k)?;
                report.removed += 1;
            }
            for k in &want_children {
                if children.get(*k)?.is_none() {
                    children.insert(*k, ())?;
                    report.written += 1;
                }
            }
            let mut settings = tx.open_table(schema::SETTINGS)?;
            let mut stale = Vec::new();
            for row in settings.iter()? {
                let (k, v) = row?;
                if want_settings.get(&k.value()) != Some(&v.value()) {
                    stale.push(k.value());
                }
            }
            for k in &stale {
                settings.remove(*k)?;
                report.removed += 1;
            }
            for (k, v) in &want_settings {
                if settings.get(*k)?.map(|g| g.value()) != Some(*v) {
                    settings.insert(*k, *v)?;
                    report.written += 1;
                }
            }
            let mut outline = tx.open_table(crate::outline::OUTLINE)?;
            let mut stale = Vec::new();
            for row in outline.iter()? {
                let (k, v) = row?;
                if want_outline.get(&k.value()).map(Vec::as_slice) != Some(v.value()) {
                    stale.push(k.value());
                }
            }
            for k in &stale {
                outline.remove(*k)?;
                report.removed += 1;
            }
            for (k, v) in &want_outline {
                if outline.get(*k)?.map(|g| g.value().to_vec()).as_ref() != Some(v) {
                    outline.insert(*k, v.as_slice())?;
                    report.written += 1;
                }
            }
            let mut hits = tx.open_table(crate::files::FILE_HITS)?;
            let mut stale = Vec::new();
            for row in hits.iter()? {
                let (k, v) = row?;
                let (p, s, c) = k.value();
                if files.hits.get(&(p.to_owned(), s, c)).map(Vec::as_slice) != Some(v.value()) {
                    stale.push((p.to_owned(), s, c));
                }
            }
            for (p, s, c) in &stale {
                hits.remove((p.as_str(), *s, *c))?;
                report.removed += 1;
            }
            for ((p, s, c), v) in &files.hits {
                if hits
                    .get((p.as_str(), *s, *c))?
                    .map(|g| g.value().to_vec())
                    .as_ref()
                    != Some(v)
                {
                    hits.insert((p.as_str(), *s, *c), v.as_slice())?;
                    report.written += 1;
                }
            }
            let mut resolved = tx.open_table(crate::files::FILE_RESOLVED)?;
            let mut stale = Vec::new();
            for row in resolved.iter()? {
                let row = row?;
                let (r, s, p) = row.0.value();
                let k = (r.to_owned(), s, p.to_owned());
                if !files.resolved.contains(&k) {
                    stale.push(k);
                }
            }
            for (r, s, p) in &stale {
                resolved.remove((r.as_str(), *s, p.as_str()))?;
                report.removed += 1;
            }
            for (r, s, p) in &files.resolved {
                if resolved.get((r.as_str(), *s, p.as_str()))?.is_none() {
                    resolved.insert((r.as_str(), *s, p.as_str()), ())?;
                    report.written += 1;
                }
            }
            let mut session_paths = tx.open_table(crate::files::FILE_SESSION_PATHS)?;
            let mut stale = Vec::new();
            for row in session_paths.iter()? {
                let row = row?;
                let (s, p) = row.0.value();
                let k = (s, p.to_owned());
                if !files.session_paths.contains(&k) {
                    stale.push(k);
                }
            }
            for (s, p) in &stale {
                session_paths.remove((*s, p.as_str()))?;
                report.removed += 1;
            }
            for (s, p) in &files.session_paths {
                if session_paths.get((*s, p.as_str()))?.is_none() {
                    session_paths.insert((*s, p.as_str()), ())?;
                    report.written += 1;
                }
            }
            let mut results = tx.open_table(crate::files::TOOL_RESULTS)?;
            let mut stale = Vec::new();
            for row in results.iter()? {
                let (k, v) = row?;
                let (s, t) = k.value();
                if files.results.get(&(s, t.to_owned())).map(Vec::as_slice) != Some(v.value()) {
                    stale.push((s, t.to_owned()));
                }
            }
            for (s, t) in &stale {
                results.remove((*s, t.as_str()))?;
                report.removed += 1;
            }
            for ((s, t), v) in &files.results {
                if results
                    .get((*s, t.as_str()))?
                    .map(|g| g.value().to_vec())
                    .as_ref()
                    != Some(v)
                {
                    results.insert((*s, t.as_str()), v.as_slice())?;
                    report.written += 1;
                }
            }
        }
        tx.commit()?;
        Ok(report)
    }
}
