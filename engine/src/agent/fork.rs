//! pi's `createBranchedSession` (spec §8): the path root → an entry as a new session.
//!
//! Invariants:
//! - entry ids are preserved; every `label` entry of the path is dropped and the remaining
//!   entries are re-chained (each `parentId` names the kept entry before it, the first `null`),
//!   keeping each entry's key order (a missing `parentId` key is added last, as a JavaScript
//!   spread does);
//! - a compaction whose `firstKeptEntryId` named a dropped label is redirected to the kept entry
//!   that followed that label; one that names itself is left alone;
//! - the labels in force ([`LabelState`], pi's label map: all entries in file order, insertion
//!   order of the map, the time each label was last set) whose target is kept are re-created as
//!   fresh `label` entries chained after the last kept entry, with new 8-hex ids that collide
//!   with no id of the new session;
//! - the label map is built in time linear in the records (a hash lookup per label entry, not a
//!   scan of the labels in force), so a fork of a session dense with labels stays linear;
//! - nothing here touches a file; [`crate::agent::writer`] writes the result, one entry at a
//!   time ([`BranchPlan::for_each_entry`]): only the path's keys are held.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::js::truthy;
use super::path::{id_of, type_of};
use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};

/// One label in force, as pi's `labelsById` / `labelTimestampsById` hold it.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelState {
    /// The labelled entry's id (`targetId` as written; non-strings never match an entry).
    pub target: Value,
    /// The label (truthy).
    pub label: Value,
    /// The `timestamp` of the label entry that last set it (`None` when that entry had none).
    pub timestamp: Option<Value>,
}

/// pi's label map after reading `entries` in file order: a truthy `label` sets (a target seen
/// before keeps its place), a falsy one deletes (a target set again after that goes last).
///
/// Each [`LabelMap::add`] is O(1) on average: the slots are kept in insertion order with holes
/// where labels were deleted, and a hash of the target finds its slot (a session of labels only
/// has as many in force as entries; a scan per label made such a fork quadratic).
#[derive(Debug, Default, Clone)]
pub struct LabelMap {
    /// Insertion order; `None` where a label was deleted.
    order: Vec<Option<LabelState>>,
    /// [`TargetKey`] → the slots in force whose target has it (targets compare as JSON values,
    /// so the slots of a key are told apart with `==`; a key rarely has more than one).
    slots: HashMap<TargetKey, Vec<usize>>,
}

/// A hash key for a target id equal for equal JSON values: the string itself (pi writes entry
/// ids), else what kind of value it is and a cheap summary of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TargetKey {
    Str(String),
    Null,
    Bool(bool),
    /// The number as an `f64`'s bits (`-0` as `0`).
    Number(u64),
    /// An array's or object's length.
    Array(usize),
    Object(usize),
}

impl TargetKey {
    fn of(v: &Value) -> Self {
        match v {
            Value::String(s) => Self::Str(s.clone()),
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => {
                let f = n.as_f64().unwrap_or(0.0);
                Self::Number(if f == 0.0 { 0 } else { f.to_bits() })
            }
            Value::Array(a) => Self::Array(a.len()),
            Value::Object(o) => Self::Object(o.len()),
        }
    }
}

impl LabelMap {
    /// Feeds one entry (any record of the file, in file order).
    pub fn add(&mut self, entry: &Value) {
        if type_of(entry) != Some("label") {
            return;
        }
        let target = entry.get("targetId").cloned().unwrap_or(Value::Null);
        let key = TargetKey::of(&target);
        let order = &self.order;
        let found = self.slots.get(&key).and_then(|slots| {
            slots.iter().position(|&i| {
                order
                    .get(i)
                    .and_then(Option::as_ref)
                    .is_some_and(|l| l.target == target)
            })
        });
        let label = entry.get("label");
        if truthy(label) {
            let state = LabelState {
                target,
                label: label.cloned().unwrap_or(Value::Null),
                timestamp: entry.get("timestamp").cloned(),
            };
            match found.and_then(|k| Some(*self.slots.get(&key)?.get(k)?)) {
                Some(i) => self.order[i] = Some(state),
                None => {
                    self.slots.entry(key).or_default().push(self.order.len());
                    self.order.push(Some(state));
                }
            }
        } else if let Some(k) = found
            && let Some(slots) = self.slots.get_mut(&key)
        {
            let i = slots.swap_remove(k);
            if slots.is_empty() {
                self.slots.remove(&key);
            }
            self.order[i] = None;
        }
    }

    /// The labels in force, in the map's insertion order.
    pub fn labels(&self) -> impl Iterator<Item = &LabelState> {
        self.order.iter().flatten()
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
/// [`Rechain::labels`].
#[derive(Debug, Default)]
pub struct Rechain {
    /// Dropped label id → the kept entry that followed it.
    replacement: HashMap<String, String>,
    /// Dropped labels waiting for the next kept entry.
    pending: Vec<String>,
    /// The last kept entry's id (`null` before the first).
    parent: Value,
}

impl Rechain {
    /// The entry as the branched session holds it, or `None` for a label (dropped).
    pub fn next(&mut self, e: &Value) -> Option<Value> {
        if type_of(e) == Some("label") {
            if let Some(id) = id_of(e) {
                self.pending.push(id.to_owned());
            }
            return None;
        }
        let id = id_of(e).map(str::to_owned);
        if let Some(id) = &id {
            for l in self.pending.drain(..) {
                self.replacement.insert(l, id.clone());
            }
        }
        self.pending.clear();
        let mut v = e.clone();
        if let Some(o) = v.as_object_mut() {
            o.insert("parentId".into(), self.parent.clone());
            if type_of(e) == Some("compaction")
                && let Some(fk) = e.get("firstKeptEntryId").and_then(Value::as_str)
                && Some(fk) != id.as_deref()
                && let Some(to) = self.replacement.get(fk)
            {
                o.insert("firstKeptEntryId".into(), to.clone().into());
            }
        }
        self.parent = id.map_or(Value::Null, Value::from);
        Some(v)
    }

    /// The labels in force whose target is among `kept` (the ids of the entries
    /// [`Rechain::next`] kept), as new entries chained after the last kept one.
    pub fn labels(mut self, labels: &[LabelState], kept: &HashSet<String>) -> Vec<Value> {
        let mut out = Vec::new();
        let mut taken = kept.clone();
        for l in labels {
            let Some(target) = l.target.as_str() else {
                continue;
            };
            if !kept.contains(target) {
                continue;
            }
            let id = generate_id(|c| taken.contains(c));
            taken.insert(id.clone());
            let mut o = Map::new();
            o.insert("type".into(), "label".into());
            o.insert("id".into(), id.clone().into());
            o.insert("parentId".into(), self.parent.clone());
            if let Some(t) = &l.timestamp {
                o.insert("timestamp".into(), t.clone());
            }
            o.insert("targetId".into(), target.into());
            o.insert("label".into(), l.label.clone());
            out.push(Value::Object(o));
            self.parent = id.into();
        }
        out
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

/// pi's label map of a stored session: every record in file order (read only when the
/// session has a label in force).
pub fn stored_label_map(snap: &Snapshot, s: SessionKey) -> Result<LabelMap, StoreError> {
    let mut map = LabelMap::default();
    if snap.labels(s)?.is_empty() {
        return Ok(map);
    }
    for row in snap.rows(s)? {
        let text = snap
            .with_entry(row, |a| {
                a.json_text()
                    .filter(|t| t.contains("label"))
                    .map(std::borrow::Cow::into_owned)
            })?
            .flatten();
        if let Some(v) = text.and_then(|t| pisess_formats::value::parse_owned::<Value>(&t).ok()) {
            map.add(&v);
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
    let path = snap.path_to_root(leaf)?;
    let labels = stored_label_map(snap, s)?.labels().cloned().collect();
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
    let cwd = resolve_path(&rec.cwd, &base);
    let header = new_header(&id, &ts, &cwd, Some(&rec.path));
    Ok(BranchPlan {
        file_name: pisess_formats::layout::session_file_name(&ts, &id),
        has_conversation: conversation,
        header,
        path,
        labels,
    })
}

/// An entry's stored JSON, parsed ([`Snapshot::entry_value`]: JSON that cannot be read names
/// the file, line and entry).
fn stored_json(snap: &Snapshot, e: EntryKey) -> Result<Value, StoreError> {
    snap.entry_value(e)
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
    /// The path, root first.
    path: Vec<EntryKey>,
    /// pi's labels in force in the source session.
    labels: Vec<LabelState>,
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
    /// labels, re-chained, then the re-created labels; the ids of the kept entries are only
    /// gathered when there are labels to re-create.
    pub fn for_each_entry<E: From<StoreError>>(
        &self,
        snap: &Snapshot,
        mut f: impl FnMut(&Value) -> Result<(), E>,
    ) -> Result<BranchWritten, E> {
        let mut chain = Rechain::default();
        let mut kept = HashSet::new();
        let mut done = BranchWritten::default();
        let mut give = |v: &Value, done: &mut BranchWritten| -> Result<(), E> {
            f(v)?;
            done.entries += 1;
            done.leaf_id = id_of(v).map(str::to_owned);
            Ok(())
        };
        for &e in &self.path {
            let v = stored_json(snap, e)?;
            if let Some(v) = chain.next(&v) {
                if !self.labels.is_empty()
                    && let Some(id) = id_of(&v)
                {
                    kept.insert(id.to_owned());
                }
                give(&v, &mut done)?;
            }
        }
        for v in chain.labels(&self.labels, &kept) {
            give(&v, &mut done)?;
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_follow_pi_map_order_and_deletion() {
        let mut m = LabelMap::default();
        for e in [
            json!({"type":"label","targetId":"a","label":"x","timestamp":"t1"}),
            json!({"type":"label","targetId":"b","label":"y","timestamp":"t2"}),
            json!({"type":"label","targetId":"a","label":"z","timestamp":"t3"}),
            json!({"type":"label","targetId":"b"}),
            json!({"type":"label","targetId":"b","label":"w","timestamp":"t4"}),
        ] {
            m.add(&e);
        }
        let got: Vec<_> = m
            .labels()
            .map(|l| (l.target.clone(), l.label.clone(), l.timestamp.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (json!("a"), json!("z"), Some(json!("t3"))),
                (json!("b"), json!("w"), Some(json!("t4")))
            ]
        );
    }

    /// pi's map as the first version here kept it: a scan for the target per label entry.
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

    #[test]
    fn the_hashed_map_equals_a_scan() {
        let targets = [
            json!("a"),
            json!("b"),
            json!("c"),
            json!(1),
            json!(1.0),
            json!(-0.0),
            json!(0),
            json!(null),
            json!(true),
            json!([1]),
            json!([2]),
            json!({"x": 1}),
            json!({"y": 1}),
        ];
        let mut seed = 7u64;
        let mut entries = Vec::new();
        let mut m = LabelMap::default();
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
            let e = json!({"type":"label","targetId":t,"label":label,"timestamp":i});
            m.add(&e);
            entries.push(e);
            if i % 50 == 0 {
                let got: Vec<LabelState> = m.labels().cloned().collect();
                assert_eq!(got, naive(&entries), "after {} entries", entries.len());
            }
        }
    }

    #[test]
    fn resolve_is_lexical() {
        assert_eq!(resolve_path("/a/b/../c/", "/x"), "/a/c");
        assert_eq!(resolve_path("", "/x/y"), "/x/y");
        assert_eq!(resolve_path("q", "/x"), "/x/q");
    }
}
