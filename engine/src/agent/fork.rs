//! pi's `createBranchedSession` (spec §8): the path root → an entry as a new session.
//!
//! Invariants:
//! - entry ids are preserved; every `label` entry of the path is dropped and the remaining
//!   entries are re-chained (each `parentId` names the kept entry before it, the first `null`),
//!   keeping each entry's key order (a missing `parentId` key is added last, as a JavaScript
//!   spread does);
//! - a compaction whose `firstKeptEntryId` named a dropped label is redirected to the kept entry
//!   that followed that label; one that names itself is left alone;
//! - the labels in force ([`LabelMap`], pi's label map: all entries in file order, insertion
//!   order of the map, the time each label was last set) whose target is kept are re-created as
//!   fresh `label` entries chained after the last kept entry, with new 8-hex ids that collide
//!   with no id of the new session;
//! - the label map is built in time linear in the records (a hash lookup per label entry, not a
//!   scan of the labels in force), so a fork of a session dense with labels stays linear;
//! - memory is proportional to what the new session keeps, never to the source's labels: the
//!   path's keys, the kept entries' ids (only when the source has labels in force; pi's 8-hex
//!   ids as 4-byte numbers), the path's dropped label ids, and for each kept target with a
//!   label in force the key of the entry that set it (its label, time and target are read
//!   again from the store when it is re-created); labels on targets the fork drops are not
//!   held at all;
//! - nothing here touches a file; [`crate::agent::writer`] writes the result, one entry at a
//!   time ([`BranchPlan::for_each_entry`]).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::js::truthy;
use super::path::{id_of, type_of};
use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};

/// An entry id held compactly: one of pi's 8-hex ids (lowercase, as pi writes them) as its
/// number, any other id as its text. Two ids are equal exactly when their texts are.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Id {
    Hex(u32),
    Text(Box<str>),
}

impl Id {
    fn of(s: &str) -> Self {
        if s.len() == 8
            && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            && let Ok(n) = u32::from_str_radix(s, 16)
        {
            return Self::Hex(n);
        }
        Self::Text(s.into())
    }
}

/// pi's label map (`labelsById` with its insertion order), kept for the targets a fork keeps
/// only: for each such target with a label in force, the row of the `label` entry that last
/// set it. A truthy `label` sets (a target in force keeps its place), a falsy one deletes (a
/// target set again after that goes last).
///
/// Only string targets can name a kept entry, and a target's place among the others depends
/// on its own entries alone, so leaving the other targets out changes neither the labels nor
/// the order of those kept. Each [`LabelMap::add`] is O(1) on average (a hash of the target
/// finds its slot; a scan per label made a fork of a session dense with labels quadratic), and
/// the map holds a few words per kept target, not the labels' text: the label, its time and
/// its target are read again from the setting entry when the label is re-created.
#[derive(Debug, Default, Clone)]
pub struct LabelMap {
    /// The setting entries in insertion order; [`EntryKey::NONE`] where a label was deleted.
    order: Vec<EntryKey>,
    /// Target → its slot in `order`, for the targets in force.
    slots: HashMap<Id, usize>,
}

impl LabelMap {
    /// Feeds one record of the file (file order), read at `at`: a `label` entry whose target
    /// `keep` accepts sets or deletes that target's label.
    pub fn add(&mut self, entry: &Value, at: EntryKey, keep: impl FnOnce(&str) -> bool) {
        if type_of(entry) != Some("label") {
            return;
        }
        let Some(target) = entry.get("targetId").and_then(Value::as_str) else {
            return;
        };
        if !keep(target) {
            return;
        }
        let key = Id::of(target);
        if truthy(entry.get("label")) {
            match self.slots.get(&key) {
                Some(&i) => {
                    if let Some(slot) = self.order.get_mut(i) {
                        *slot = at;
                    }
                }
                None => {
                    self.slots.insert(key, self.order.len());
                    self.order.push(at);
                }
            }
        } else if let Some(i) = self.slots.remove(&key)
            && let Some(slot) = self.order.get_mut(i)
        {
            *slot = EntryKey::NONE;
        }
    }

    /// The entries that set the labels in force, in the map's insertion order.
    pub fn setters(&self) -> impl Iterator<Item = EntryKey> + '_ {
        self.order.iter().copied().filter(|&e| e != EntryKey::NONE)
    }

    /// Whether no label is in force.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// A fresh 8-hex entry id (the first 8 characters of a random v4 UUID) that `taken` does not
/// hold; after 100 collisions the whole UUID, as pi does (spec §1.4).
pub fn generate_id(mut taken: impl FnMut(&str) -> bool) -> String {
    for _ in 0..100 {
        let u = uuid::Uuid::new_v4().to_string();
        let id = u.get(..8).unwrap_or(&u).to_owned();
        if !taken(&id) {
            return id;
        }
    }
    uuid::Uuid::new_v4().to_string()
}

/// The path's entries re-chained one at a time, root first (see the module docs), so a fork
/// of a long path is written without holding the path: [`Rechain::next`] for each entry, then
/// [`Rechain::label`] for each label in force on a kept target.
#[derive(Debug, Default)]
pub struct Rechain {
    /// Dropped label id → the kept entry that followed it (a compaction may name the label).
    replacement: HashMap<Id, Box<str>>,
    /// Dropped labels waiting for the next kept entry.
    pending: Vec<Id>,
    /// The last entry's id (`null` before the first).
    parent: Value,
    /// With [`Rechain::gathering`]: the ids of the new session (kept entries, re-created
    /// labels), which a re-created label's target must be among and its new id must not be.
    ids: Option<HashSet<Id>>,
}

impl Rechain {
    /// A rechain that gathers the ids of the new session, for [`Rechain::label`].
    pub fn gathering() -> Self {
        Self {
            ids: Some(HashSet::new()),
            ..Self::default()
        }
    }

    /// The entry as the branched session holds it, or `None` for a label (dropped).
    pub fn next(&mut self, mut v: Value) -> Option<Value> {
        if type_of(&v) == Some("label") {
            if let Some(id) = id_of(&v) {
                self.pending.push(Id::of(id));
            }
            return None;
        }
        let id = id_of(&v).map(str::to_owned);
        if let Some(id) = &id {
            for l in self.pending.drain(..) {
                self.replacement.insert(l, id.as_str().into());
            }
            if let Some(ids) = &mut self.ids {
                ids.insert(Id::of(id));
            }
        }
        self.pending.clear();
        let compaction = type_of(&v) == Some("compaction");
        if let Some(o) = v.as_object_mut() {
            o.insert("parentId".into(), self.parent.clone());
            if compaction
                && let Some(fk) = o.get("firstKeptEntryId").and_then(Value::as_str)
                && Some(fk) != id.as_deref()
                && let Some(to) = self.replacement.get(&Id::of(fk))
            {
                let to = Value::from(&**to);
                o.insert("firstKeptEntryId".into(), to);
            }
        }
        self.parent = id.map_or(Value::Null, Value::from);
        Some(v)
    }

    /// Whether `target` is the id of an entry [`Rechain::next`] kept (or, once labels are
    /// re-created, of one of them); always `false` unless [`Rechain::gathering`].
    pub fn holds(&self, target: &str) -> bool {
        self.ids
            .as_ref()
            .is_some_and(|ids| ids.contains(&Id::of(target)))
    }

    /// The label in force that `setter` (the `label` entry that last set it; its target
    /// [`Rechain::holds`]) gives, as a new entry chained after the last one: a fresh id,
    /// then the setter's `timestamp` (when it has one), `targetId` and `label`.
    pub fn label(&mut self, setter: &Value) -> Value {
        let ids = self.ids.get_or_insert_with(HashSet::new);
        let id = generate_id(|c| ids.contains(&Id::of(c)));
        ids.insert(Id::of(&id));
        let mut o = Map::new();
        o.insert("type".into(), "label".into());
        o.insert("id".into(), id.clone().into());
        o.insert(
            "parentId".into(),
            std::mem::replace(&mut self.parent, id.into()),
        );
        if let Some(t) = setter.get("timestamp") {
            o.insert("timestamp".into(), t.clone());
        }
        o.insert(
            "targetId".into(),
            setter.get("targetId").cloned().unwrap_or(Value::Null),
        );
        o.insert(
            "label".into(),
            setter.get("label").cloned().unwrap_or(Value::Null),
        );
        Value::Object(o)
    }
}

/// Whether entries hold a `message` with role `user` or `assistant` (pi writes a session file
/// only from then on).
pub fn has_conversation<'v>(entries: impl IntoIterator<Item = &'v Value>) -> bool {
    entries.into_iter().any(|e| {
        type_of(e) == Some("message")
            && matches!(
                e.get("message")
                    .and_then(|m| m.get("role"))
                    .and_then(Value::as_str),
                Some("user" | "assistant")
            )
    })
}

/// The header pi writes for a new session: `type, version, id, timestamp, cwd` and
/// `parentSession` when given.
pub fn new_header(id: &str, timestamp: &str, cwd: &str, parent_session: Option<&str>) -> Value {
    let mut o = Map::new();
    o.insert("type".into(), "session".into());
    o.insert("version".into(), 3.into());
    o.insert("id".into(), id.into());
    o.insert("timestamp".into(), timestamp.into());
    o.insert("cwd".into(), cwd.into());
    if let Some(p) = parent_session {
        o.insert("parentSession".into(), p.into());
    }
    Value::Object(o)
}

/// pi's `resolvePath(p, base)`: `p` read as `normalizePath` reads it (`~` and `~/…` expanded,
/// a `file://` URL as its path), then [`resolve_path`] against `base`.
pub fn resolve_pi_path(p: &str, base: &str) -> String {
    resolve_path(
        &pisess_formats::layout::normalize(p).to_string_lossy(),
        base,
    )
}

/// Node's `path.resolve(p)` on POSIX, lexically: relative paths (and `""`) against `base`,
/// `.` and `..` segments folded, repeated and trailing slashes removed.
pub fn resolve_path(p: &str, base: &str) -> String {
    let joined = if p.starts_with('/') {
        p.to_owned()
    } else {
        format!("{base}/{p}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for seg in joined.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// pi's label map of a stored session for the targets `keep` accepts: every record in file
/// order (read only when the session has a label in force).
pub fn stored_label_map(
    snap: &Snapshot,
    s: SessionKey,
    mut keep: impl FnMut(&str) -> bool,
) -> Result<LabelMap, StoreError> {
    let mut map = LabelMap::default();
    if !snap.has_labels(s)? {
        return Ok(map);
    }
    for run in snap.row_runs(s)? {
        for row in run.map(EntryKey) {
            let text = snap
                .with_entry(row, |a| {
                    a.json_text()
                        .filter(|t| t.contains("label"))
                        .map(std::borrow::Cow::into_owned)
                })?
                .flatten();
            if let Some(v) = text.and_then(|t| pisess_formats::value::parse_owned::<Value>(&t).ok())
            {
                map.add(&v, row, &mut keep);
            }
        }
    }
    Ok(map)
}

/// `createBranchedSession(leaf)` of a stored session: the path root → `leaf` without labels,
/// re-chained, the labels in force re-created, under a new v3 header (new UUIDv7 id, the time
/// now, the source's `cwd` resolved, `parentSession` = the source file). Holds only the path's
/// keys; [`BranchPlan::for_each_entry`] reads and re-chains the entries one at a time.
pub fn branched_session(
    snap: &Snapshot,
    s: SessionKey,
    leaf: EntryKey,
) -> Result<BranchPlan, StoreError> {
    let rec = snap
        .session(s)?
        .ok_or_else(|| StoreError::Inconsistent(format!("no session {s}")))?;
    // pi cannot open such a session; a fork would get a cwd made up from the URL's text.
    if let Some(why) = pisess_formats::layout::file_url_refusal(&rec.cwd) {
        return Err(StoreError::CwdFileUrl {
            file: rec.path.clone(),
            cwd: rec.cwd.clone(),
            why,
        });
    }
    let path = snap.path_to_root(leaf)?;
    // pi writes the file once it holds a user or assistant message: usually near the root.
    let mut conversation = false;
    for &e in &path {
        if has_conversation(std::iter::once(&stored_json(snap, e)?)) {
            conversation = true;
            break;
        }
    }
    let id = uuid::Uuid::now_v7().to_string();
    let (ts, _) = super::writer::now();
    let base = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".to_owned());
    let cwd = resolve_pi_path(&rec.cwd, &base);
    let header = new_header(&id, &ts, &cwd, Some(&rec.path));
    Ok(BranchPlan {
        file_name: pisess_formats::layout::session_file_name(&ts, &id),
        has_conversation: conversation,
        header,
        session: s,
        path,
        labels: snap.has_labels(s)?,
    })
}

/// An entry's stored JSON, parsed ([`Snapshot::entry_value`]: JSON that cannot be read names
/// the file, line and entry).
fn stored_json(snap: &Snapshot, e: EntryKey) -> Result<Value, StoreError> {
    // A fork is a new copy of the entries: a damaged row must not pass into it.
    snap.checked_entry_value(e)
}

/// A branched session ready to write: its header, the file name pi gives it, and the path it
/// copies (keys only: a fork of a million-entry path holds 8 MB here, not the entries).
#[derive(Debug, Clone)]
pub struct BranchPlan {
    /// The new header (`parentSession` = the source file).
    pub header: Value,
    /// `<timestamp>_<session id>.jsonl`.
    pub file_name: String,
    /// Whether pi would write the file now (the path holds a user or assistant message).
    pub has_conversation: bool,
    /// The source session.
    session: SessionKey,
    /// The path, root first.
    path: Vec<EntryKey>,
    /// Whether the source session has a label in force (else no label is re-created).
    labels: bool,
}

/// What [`BranchPlan::for_each_entry`] gave.
#[derive(Debug, Clone, Default)]
pub struct BranchWritten {
    /// Entries given (header excluded).
    pub entries: usize,
    /// The last one's id (the new session's leaf).
    pub leaf_id: Option<String>,
}

impl BranchPlan {
    /// Gives `f` the new session's entries in file order, one at a time: the path without its
    /// labels, re-chained, then the re-created labels. When the source has labels in force,
    /// the ids of the kept entries are gathered (compactly) and, after the path, the source's
    /// records are read once more for pi's label map of the kept targets
    /// ([`stored_label_map`]), whose setting entries are read again one at a time.
    pub fn for_each_entry<E: From<StoreError>>(
        &self,
        snap: &Snapshot,
        mut f: impl FnMut(&Value) -> Result<(), E>,
    ) -> Result<BranchWritten, E> {
        let mut chain = if self.labels {
            Rechain::gathering()
        } else {
            Rechain::default()
        };
        let mut done = BranchWritten::default();
        let mut give = |v: &Value, done: &mut BranchWritten| -> Result<(), E> {
            f(v)?;
            done.entries += 1;
            done.leaf_id = id_of(v).map(str::to_owned);
            Ok(())
        };
        for &e in &self.path {
            if let Some(v) = chain.next(stored_json(snap, e)?) {
                give(&v, &mut done)?;
            }
        }
        if self.labels {
            let map = stored_label_map(snap, self.session, |t| chain.holds(t))?;
            for setter in map.setters() {
                let v = chain.label(&stored_json(snap, setter)?);
                give(&v, &mut done)?;
            }
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The labels in force of `m`, as (target, label, timestamp) read from `entries` (the
    /// map gives the index of each setting entry as its key).
    fn in_force(m: &LabelMap, entries: &[Value]) -> Vec<LabelState> {
        m.setters()
            .map(|e| {
                let v = &entries[e.0 as usize];
                LabelState {
                    target: v["targetId"].clone(),
                    label: v["label"].clone(),
                    timestamp: v.get("timestamp").cloned(),
                }
            })
            .collect()
    }

    #[test]
    fn labels_follow_pi_map_order_and_deletion() {
        let mut m = LabelMap::default();
        let entries = [
            json!({"type":"label","targetId":"a","label":"x","timestamp":"t1"}),
            json!({"type":"label","targetId":"b","label":"y","timestamp":"t2"}),
            json!({"type":"label","targetId":"a","label":"z","timestamp":"t3"}),
            json!({"type":"label","targetId":"b"}),
            json!({"type":"label","targetId":"b","label":"w","timestamp":"t4"}),
        ];
        for (i, e) in entries.iter().enumerate() {
            m.add(e, EntryKey(i as u64), |_| true);
        }
        let got: Vec<_> = in_force(&m, &entries)
            .into_iter()
            .map(|l| (l.target, l.label, l.timestamp))
            .collect();
        assert_eq!(
            got,
            vec![
                (json!("a"), json!("z"), Some(json!("t3"))),
                (json!("b"), json!("w"), Some(json!("t4")))
            ]
        );
    }

    /// One label in force, as pi's `labelsById` / `labelTimestampsById` hold it.
    #[derive(Debug, Clone, PartialEq)]
    struct LabelState {
        target: Value,
        label: Value,
        timestamp: Option<Value>,
    }

    /// pi's map as the first version here kept it: every target, a scan for it per label entry.
    fn naive(entries: &[Value]) -> Vec<LabelState> {
        let mut order: Vec<LabelState> = Vec::new();
        for entry in entries {
            let target = entry.get("targetId").cloned().unwrap_or(Value::Null);
            let pos = order.iter().position(|l| l.target == target);
            let label = entry.get("label");
            if truthy(label) {
                let state = LabelState {
                    target,
                    label: label.cloned().unwrap_or(Value::Null),
                    timestamp: entry.get("timestamp").cloned(),
                };
                match pos {
                    Some(i) => order[i] = state,
                    None => order.push(state),
                }
            } else if let Some(i) = pos {
                order.remove(i);
            }
        }
        order
    }

    /// The map restricted to some string targets equals pi's whole map with the other
    /// targets left out: same labels, same order (the fork re-creates only those).
    #[test]
    fn the_kept_targets_map_equals_a_scan_of_every_target() {
        let targets = [
            json!("a"),
            json!("b"),
            json!("c"),
            json!("0000000a"),
            json!("0000000A"),
            json!("ffffffff"),
            json!(1),
            json!(1.0),
            json!(-0.0),
            json!(0),
            json!(null),
            json!(true),
            json!([1]),
            json!({"x": 1}),
        ];
        let kept = |t: &str| matches!(t, "a" | "c" | "0000000a" | "0000000A" | "ffffffff");
        let mut seed = 7u64;
        let mut entries = Vec::new();
        let mut all = LabelMap::default();
        let mut some = LabelMap::default();
        for i in 0..2000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let t = &targets[(seed >> 33) as usize % targets.len()];
            let label = if (seed >> 20).is_multiple_of(3) {
                json!("")
            } else {
                json!(format!("l{i}"))
            };
            let e = if (seed >> 40).is_multiple_of(17) {
                json!({"type":"label","targetId":t,"label":label})
            } else {
                json!({"type":"label","targetId":t,"label":label,"timestamp":i})
            };
            all.add(&e, EntryKey(entries.len() as u64), |_| true);
            some.add(&e, EntryKey(entries.len() as u64), kept);
            entries.push(e);
            if i % 50 == 0 {
                let want = naive(&entries);
                let strings: Vec<LabelState> = want
                    .iter()
                    .filter(|l| l.target.is_string())
                    .cloned()
                    .collect();
                assert_eq!(
                    in_force(&all, &entries),
                    strings,
                    "after {} entries",
                    entries.len()
                );
                let kept_only: Vec<LabelState> = want
                    .into_iter()
                    .filter(|l| l.target.as_str().is_some_and(kept))
                    .collect();
                assert_eq!(
                    in_force(&some, &entries),
                    kept_only,
                    "after {} entries",
                    entries.len()
                );
            }
        }
    }

    #[test]
    fn ids_are_held_compactly_and_told_apart() {
        assert_eq!(Id::of("0000000a"), Id::Hex(10));
        assert_eq!(Id::of("0000000A"), Id::Text("0000000A".into()));
        assert_eq!(Id::of("000000a"), Id::Text("000000a".into()));
        assert_eq!(Id::of("+000000a"), Id::Text("+000000a".into()));
        assert_ne!(Id::of("ffffffff"), Id::of("fffffffff"));
    }

    #[test]
    fn resolve_is_lexical() {
        assert_eq!(resolve_path("/a/b/../c/", "/x"), "/a/c");
        assert_eq!(resolve_path("", "/x/y"), "/x/y");
        assert_eq!(resolve_path("q", "/x"), "/x/q");
    }
}
