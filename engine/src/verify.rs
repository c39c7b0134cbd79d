//! The store's self-check (`pisess verify`).
//!
//! Invariants checked (each failure is one [`Finding`]; nothing is changed here, see
//! [`crate::repair`] for `--repair`):
//! - redb's own integrity (page checksums, tree structure);
//! - every session's `sources` row holds its key, file size, mtime and gone flag, and every
//!   `sources` row names an existing session;
//! - every block of rows decodes, its records validate, blocks do not overlap, and each lies
//!   inside one session's run of rows (when a block does not read, the checks that need the
//!   records are skipped: they would only repeat it);
//! - every row listed in `session_runs` exists, belongs to its session, and its `raw` bytes
//!   hash (blake3) to the hash its record got at import;
//! - every `parents` link names an existing parent one level shallower (so every chain reaches
//!   a root and none is cyclic), a jump at no greater depth, and has its `children` row when
//!   it starts a run; every `children` row is a child that starts a run under its parent;
//! - every `entry_ids` row points at a row of that session with that id;
//! - every session's `entry_ids`, `parents` and `labels` rows equal what its records imply
//!   ([`Snapshot::expected_index`]: last duplicate id wins, dangling parents are roots, cycles
//!   cut), and every `children` row matches its child's link;
//! - `run_starts` holds exactly the linked entries whose link starts a run, with their parent;
//! - `settings` holds exactly each session's `thinking_level_change` and `model_change` rows;
//! - `outline` holds exactly the blocks each session's records imply
//!   ([`Snapshot::expected_outline`]: every node's line described again, byte for byte);
//! - every `file_hits` block decodes and its (session, path) is listed in
//!   `file_session_paths`, and the file-operation index (`file_hits`, `file_resolved`,
//!   `file_session_paths`, `tool_results`) equals what the records imply
//!   ([`Snapshot::expected_file_index`], import's writer replayed in a scratch store; blocks
//!   compared byte for byte).
//!
//! Walks are loops over tables; nothing recurses.

use redb::ReadableTable;

use crate::error::StoreError;
use crate::files::{
    FILE_HITS_NAME, FILE_RESOLVED_NAME, FILE_SESSION_PATHS_NAME, TOOL_RESULTS_NAME,
};
use crate::graph::Snapshot;
use crate::outline::OUTLINE_NAME;

/// Name of the children table (for findings).
const CHILDREN_NAME: &str = "children.v2";
use crate::store::Store;

/// One inconsistency found by [`Store::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The table concerned.
    pub table: &'static str,
    /// What is wrong.
    pub message: String,
}

/// What [`Store::verify`] looked at and found.
#[derive(Debug, Clone, Default)]
pub struct VerifyReport {
    /// Sessions checked.
    pub sessions: u64,
    /// Rows re-hashed.
    pub rows: u64,
    /// Tree links checked.
    pub links: u64,
    /// Problems found (empty when the store is consistent).
    pub findings: Vec<Finding>,
}

/// Stop collecting after this many findings (they are counted in the first few anyway).
const MAX_FINDINGS: usize = 1000;

impl Store {
    /// Checks the store (see the module docs).
    pub fn verify(&mut self) -> Result<VerifyReport, StoreError> {
        let mut report = VerifyReport::default();
        if !self.check_integrity()? {
            report.findings.push(Finding {
                table: "redb",
                message: "redb's integrity check failed (the store was repaired or is damaged)"
                    .into(),
            });
        }
        let snap = self.snapshot()?;
        snap.verify_into(&mut report)?;
        Ok(report)
    }

    /// [`Store::verify`] of a store that may only be read (a read-only file system, no write
    /// permission): redb's integrity check needs its database writable, so everything is
    /// checked on a private copy made in `dir`, while this handle keeps writers out. The copy's
    /// name is removed as soon as it is made, so nothing is left behind, even by a kill.
    pub fn verify_copy_in(&self, dir: &std::path::Path) -> Result<VerifyReport, StoreError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let io = |path: &std::path::Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Create { path, source }
        };
        let (copy, file) = loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let copy = dir.join(format!(".pisess-verify-{}-{n}.redb", std::process::id()));
            match std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&copy)
            {
                Ok(f) => break (copy, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(&copy)(e)),
            }
        };
        std::fs::remove_file(&copy).map_err(io(&copy))?;
        let mut from = std::fs::File::open(self.path()).map_err(|source| StoreError::Open {
            path: self.path().to_path_buf(),
            source: redb::Error::Io(source),
        })?;
        std::io::copy(&mut from, &mut &file).map_err(io(&copy))?;
        Self::open_copy(file, copy)?.verify()
    }
}

impl Snapshot {
    /// Checks every block of rows on its own; false when some block or record does not read.
    fn verify_blocks(&self, r: &mut VerifyReport) -> Result<bool, StoreError> {
        use crate::row_block::Block;
        let add = |r: &mut VerifyReport, message: String| {
            if r.findings.len() < MAX_FINDINGS {
                r.findings.push(Finding {
                    table: crate::schema::ENTRIES_NAME,
                    message,
                });
            }
        };
        let mut runs = Vec::new();
        for row in self.session_runs.iter()? {
            let (k, v) = row?;
            let (first, n) = v.value();
            runs.push((first, first.saturating_add(n), k.value().0));
        }
        runs.sort_unstable();
        let mut readable = true;
        let mut prev_end = 0u64;
        for row in self.entries.iter()? {
            let (k, v) = row?;
            let first = k.value();
            let block = match Block::decode(v.value()) {
                Ok(b) => b,
                Err(e) => {
                    add(r, format!("block {first}: {e}"));
                    readable = false;
                    continue;
                }
            };
            let end = first.saturating_add(u64::from(block.rows()));
            if first < prev_end {
                add(
                    r,
                    format!("block {first} overlaps the block before it (to {prev_end})"),
                );
            }
            prev_end = prev_end.max(end);
            let i = runs.partition_point(|&(f, ..)| f <= first);
            match i.checked_sub(1).map(|i| runs[i]) {
                Some((_, run_end, _)) if end <= run_end => {}
                _ => add(
                    r,
                    format!("block {first}..{end} is not inside one session's rows"),
                ),
            }
            for i in 0..block.rows() {
                let ok = block.record(i).is_ok_and(|bytes| {
                    rkyv::access::<crate::record::ArchivedEntryRecord, rkyv::rancor::Error>(bytes)
                        .is_ok()
                });
                if !ok {
                    add(
                        r,
                        format!("row {}: the record does not validate", first + u64::from(i)),
                    );
                    readable = false;
                }
            }
        }
        Ok(readable)
    }

    fn verify_into(&self, r: &mut VerifyReport) -> Result<(), StoreError> {
        let add = |r: &mut VerifyReport, table: &'static str, message: String| {
            if r.findings.len() < MAX_FINDINGS {
                r.findings.push(Finding { table, message });
            }
        };
        if !self.verify_blocks(r)? {
            add(
                r,
                crate::schema::ENTRIES_NAME,
                "some rows cannot be read, so the indexes were not checked against them; \
                 re-import their session files"
                    .into(),
            );
            return Ok(());
        }
        let mut known = std::collections::HashSet::new();
        for (s, rec) in self.sessions()? {
            known.insert(s.0);
            r.sessions += 1;
            let mut n = 0u64;
            let mut settings = Vec::new();
            for e in self.rows(s)? {
                n += 1;
                r.rows += 1;
                let got = self.with_entry(e, |a| {
                    (
                        a.session.to_native(),
                        // A row that does not decompress is a mismatch.
                        a.raw_bytes()
                            .is_ok_and(|raw| *blake3::hash(&raw).as_bytes() == a.hash),
                        (a.kind == crate::record::RowKind::Entry)
                            .then(|| {
                                crate::schema::setting_of(a.type_name.as_ref().map(|t| t.as_str()))
                            })
                            .flatten(),
                    )
                })?;
                if let Some((_, _, Some(v))) = got {
                    settings.push((e, v));
                }
                let Some((owner, hash_ok, _)) = got else {
                    add(
                        r,
                        crate::schema::ENTRIES_NAME,
                        format!("session {s} lists missing row {e}"),
                    );
                    continue;
                };
                if owner != s.0 {
                    add(
                        r,
                        crate::schema::ENTRIES_NAME,
                        format!("row {e} of session {s} says {owner}"),
                    );
                }
                if !hash_ok {
                    add(
                        r,
                        crate::schema::ENTRIES_NAME,
                        format!("row {e}: raw bytes changed"),
                    );
                }
            }
            self.verify_index(s, r)?;
            if self.settings(s)? != settings {
                add(
                    r,
                    "settings.v1",
                    format!("session {s}: the settings entries differ from its records"),
                );
            }
            let mut have = self.stored_outline(s)?;
            for (k, v) in self.expected_outline(s)? {
                match have.remove(&k) {
                    Some(Some(h)) if h == v => {}
                    Some(_) => add(
                        r,
                        OUTLINE_NAME,
                        format!("session {s}: block {k} differs from its records"),
                    ),
                    None => add(
                        r,
                        OUTLINE_NAME,
                        format!("session {s}: block {k} is missing"),
                    ),
                }
            }
            let mut extra: Vec<u64> = have.into_keys().collect();
            extra.sort_unstable();
            for k in extra {
                add(
                    r,
                    OUTLINE_NAME,
                    format!("session {s}: block {k} is not implied by its records"),
                );
            }
            if n != rec.rows {
                add(
                    r,
                    "sessions.v1",
                    format!("session {s} has {n} rows, its record says {}", rec.rows),
                );
            }
            let want = crate::schema::source_stat(s.0, &rec);
            let got = self.sources.get(rec.path.as_str())?.map(|v| v.value());
            if got != Some(want) {
                add(
                    r,
                    "sources.v2",
                    format!(
                        "session {s}: the row of {} is {got:?}, its record says {want:?}",
                        rec.path
                    ),
                );
            }
        }
        for row in self.sources.iter()? {
            let (path, stat) = row?;
            let (s, ..) = stat.value();
            if !known.contains(&s) {
                add(
                    r,
                    "sources.v2",
                    format!("{} names session {s}, which does not exist", path.value()),
                );
            }
        }
        for row in self.outline.iter()? {
            let (s, k, part) = row?.0.value();
            if !known.contains(&s) {
                add(
                    r,
                    OUTLINE_NAME,
                    format!("block ({s}, {k}) part {part} of no session"),
                );
            }
        }
        for row in self.parents.iter()? {
            let (k, l) = row?;
            let (k, l) = (k.value(), l.value());
            r.links += 1;
            if !self.has_entry(crate::ids::EntryKey(k))? {
                add(r, "parents.v1", format!("link of missing row {k}"));
            }
            let starts = l.starts_run(crate::ids::EntryKey(k));
            let want = starts.then_some(l.parent.0);
            if self.run_starts.get(k)?.map(|v| v.value()) != want {
                add(r, "run_starts.v1", format!("{k}: not {want:?}"));
            }
            let Some(p) = l.parent() else {
                if l.depth != 0 {
                    add(r, "parents.v1", format!("root {k} has depth {}", l.depth));
                }
                continue;
            };
            match self.parents.get(p.0)? {
                Some(pl) if pl.value().depth.checked_add(1) == Some(l.depth) => {}
                Some(_) => add(r, "parents.v1", format!("{k}: depth is not parent's + 1")),
                None => add(r, "parents.v1", format!("{k}: parent {p} has no link")),
            }
            match self.parents.get(l.jump.0)? {
                Some(j) if j.value().depth <= l.depth => {}
                _ => add(r, "parents.v1", format!("{k}: bad jump {}", l.jump)),
            }
            if starts && self.children.get((p.0, k))?.is_none() {
                add(
                    r,
                    CHILDREN_NAME,
                    format!("{k} is missing from {p}'s children"),
                );
            }
        }
        for row in self.children.iter()? {
            let (k, _) = row?;
            let (p, c) = k.value();
            match self.parents.get(c)? {
                Some(l)
                    if l.value().parent().map(|x| x.0) == Some(p)
                        && l.value().starts_run(crate::ids::EntryKey(c)) => {}
                Some(l) if l.value().parent().map(|x| x.0) == Some(p) => add(
                    r,
                    CHILDREN_NAME,
                    format!("{c} is listed under {p}, but it continues {p}'s run"),
                ),
                _ => add(
                    r,
                    CHILDREN_NAME,
                    format!("{c} is listed under {p}, but its parent is not {p}"),
                ),
            }
        }
        for row in self.entry_ids.iter()? {
            let (k, v) = row?;
            let ((s, id), e) = (k.value(), v.value());
            let ok = self
                .with_entry(crate::ids::EntryKey(e), |a| {
                    a.session.to_native() == s && a.id.as_ref().map(|i| i.as_str()) == Some(id)
                })?
                .unwrap_or(false);
            if !ok {
                add(
                    r,
                    "entry_ids.v1",
                    format!("({s}, {id}) → {e}: no row of that session with that id"),
                );
            }
        }
        for row in self.run_starts.iter()? {
            let k = row?.0.value();
            if self.parents.get(k)?.is_none() {
                add(r, "run_starts.v1", format!("{k} has no link"));
            }
        }
        for row in self.file_hits.iter()? {
            let (k, v) = row?;
            let (p, s, c) = k.value();
            if self.file_session_paths.get((s, p))?.is_none() {
                add(
                    r,
                    FILE_HITS_NAME,
                    format!("{p} ({s}, {c}): the session does not list the path"),
                );
            }
            if crate::files::decode_block(v.value(), c).is_none() {
                add(
                    r,
                    FILE_HITS_NAME,
                    format!("{p} ({s}, {c}): malformed block"),
                );
            }
        }
        self.verify_file_index(r)?;
        Ok(())
    }

    /// Compares the file-operation index with what the records imply
    /// ([`Snapshot::expected_file_index`]): rows that differ or should not exist, and how many
    /// implied rows are missing.
    fn verify_file_index(&self, r: &mut VerifyReport) -> Result<(), StoreError> {
        let mut add = |table: &'static str, message: String| {
            if r.findings.len() < MAX_FINDINGS {
                r.findings.push(Finding { table, message });
            }
        };
        let want = self.expected_file_index()?;
        let mut matched = 0usize;
        for row in self.file_hits.iter()? {
            let (k, v) = row?;
            let (p, s, c) = k.value();
            if want.hits.get(&(p.to_owned(), s, c)).map(Vec::as_slice) == Some(v.value()) {
                matched += 1;
            } else {
                add(
                    FILE_HITS_NAME,
                    format!("{p} ({s}, {c}): not what the records imply"),
                );
            }
        }
        if matched < want.hits.len() {
            let n = want.hits.len() - matched;
            add(
                FILE_HITS_NAME,
                format!("{n} block(s) the records imply are missing"),
            );
        }
        let mut matched = 0usize;
        for row in self.file_resolved.iter()? {
            let row = row?;
            let (rp, s, p) = row.0.value();
            if want.resolved.contains(&(rp.to_owned(), s, p.to_owned())) {
                matched += 1;
            } else {
                add(
                    FILE_RESOLVED_NAME,
                    format!("{rp} ({s}, {p}): not what the records imply"),
                );
            }
        }
        if matched < want.resolved.len() {
            let n = want.resolved.len() - matched;
            add(
                FILE_RESOLVED_NAME,
                format!("{n} resolved path row(s) the records imply are missing"),
            );
        }
        let mut matched = 0usize;
        for row in self.file_session_paths.iter()? {
            let row = row?;
            let (s, p) = row.0.value();
            if want.session_paths.contains(&(s, p.to_owned())) {
                matched += 1;
            } else {
                add(
                    FILE_SESSION_PATHS_NAME,
                    format!("({s}, {p}): not what the records imply"),
                );
            }
        }
        if matched < want.session_paths.len() {
            let n = want.session_paths.len() - matched;
            add(
                FILE_SESSION_PATHS_NAME,
                format!("{n} session path row(s) the records imply are missing"),
            );
        }
        let results = self._tx.open_table(crate::files::TOOL_RESULTS)?;
        let mut matched = 0usize;
        for row in results.iter()? {
            let (k, v) = row?;
            let (s, t) = k.value();
            if want.results.get(&(s, t.to_owned())).map(Vec::as_slice) == Some(v.value()) {
                matched += 1;
            } else {
                add(
                    TOOL_RESULTS_NAME,
                    format!("({s}, {t}): not what the records imply"),
                );
            }
        }
        if matched < want.results.len() {
            let n = want.results.len() - matched;
            add(
                TOOL_RESULTS_NAME,
                format!("{n} tool result row(s) the records imply are missing"),
            );
        }
        Ok(())
    }

    /// Compares session `s`'s `entry_ids`, `parents` and `labels` rows with what its records
    /// imply ([`Snapshot::expected_index`]).
    fn verify_index(
        &self,
        s: crate::ids::SessionKey,
        r: &mut VerifyReport,
    ) -> Result<(), StoreError> {
        let mut add = |table: &'static str, message: String| {
            if r.findings.len() < MAX_FINDINGS {
                r.findings.push(Finding { table, message });
            }
        };
        let x = match self.expected_index(s) {
            Ok(x) => x,
            Err(StoreError::Inconsistent(m)) => {
                add(crate::schema::ENTRIES_NAME, m);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let mut seen = 0usize;
        for row in self.entry_ids.range((s.0, "")..(s.0 + 1, ""))? {
            let (k, v) = row?;
            let ((_, id), e) = (k.value(), v.value());
            seen += 1;
            if x.entry_ids.get(id) != Some(&e) {
                add(
                    "entry_ids.v1",
                    format!("session {s}: id {id} → {e} is not its last row"),
                );
            }
        }
        for (id, e) in &x.entry_ids {
            if self.entry_ids.get((s.0, id.as_str()))?.map(|v| v.value()) != Some(*e) {
                add(
                    "entry_ids.v1",
                    format!("session {s}: id {id} (row {e}) is not indexed"),
                );
            }
        }
        if seen != x.entry_ids.len() {
            add(
                "entry_ids.v1",
                format!(
                    "session {s}: {seen} ids indexed, its rows have {}",
                    x.entry_ids.len()
                ),
            );
        }
        for (k, want) in &x.links {
            match self.parents.get(*k)? {
                Some(l) if l.value() == *want => {}
                Some(_) => add(
                    "parents.v1",
                    format!("{k}: link differs from its record's parentId"),
                ),
                None => add("parents.v1", format!("{k}: no link")),
            }
        }
        let mut seen = 0usize;
        for row in self.labels.range((s.0, "")..(s.0 + 1, ""))? {
            let (k, v) = row?;
            let ((_, t), l) = (k.value(), v.value());
            seen += 1;
            if x.labels.get(t).map(String::as_str) != Some(l) {
                add(
                    "labels.v1",
                    format!("session {s}: label of {t} differs from its records"),
                );
            }
        }
        for (t, l) in &x.labels {
            if self.labels.get((s.0, t.as_str()))?.map(|v| v.value() == l) != Some(true) {
                add("labels.v1", format!("session {s}: label of {t} is missing"));
            }
        }
        if seen != x.labels.len() {
            add(
                "labels.v1",
                format!(
                    "session {s}: {seen} labels indexed, its records give {}",
                    x.labels.len()
                ),
            );
        }
        Ok(())
    }
}
