//! The v1 → v2 step: every entry gets an `id` and a `parentId` (spec §5.3, pi's
//! `migrateV1ToV2`).
//!
//! pi's loop, for each element of the entry list in order (header = index 0):
//!
//! ```js
//! if (entry.type === "session") { entry.version = 2; continue; }
//! entry.id = generateId(ids);
//! entry.parentId = prevId;
//! prevId = entry.id;
//! if (entry.type === "compaction" && typeof entry.firstKeptEntryIndex === "number") {
//!     const target = entries[entry.firstKeptEntryIndex];
//!     if (target && target.type !== "session") entry.firstKeptEntryId = target.id;
//!     delete entry.firstKeptEntryIndex;
//! }
//! ```
//!
//! The functions here are the pieces of that loop over `serde_json` values; [`migrate_values`]
//! is the loop itself over an in-memory list, and [`crate::Migrator`] runs the same pieces over a
//! stream. Assigning a key that exists keeps its position (`Map::insert`), a new key goes last,
//! and `delete` is `shift_remove`, so `JSON.stringify` key order is kept.
//!
//! Deliberate differences from pi, both documented in the crate docs:
//! - ids are drawn deterministically ([`crate::ids`]) and never collide;
//! - an element that is not an object (an array, number or string line) is left as it is and is
//!   not part of the parent chain (pi throws on primitives and gives arrays an id that
//!   `JSON.stringify` never writes, so the next entry's `parentId` names nothing); a
//!   `firstKeptEntryIndex` pointing at such an element resolves to no id.

use serde_json::{Map, Value};

use crate::ids::IdDrawer;

/// How the step treats one element of the entry list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An object with `type: "session"`: gets `version = 2`, no id.
    Session,
    /// Any other object: gets an id and joins the parent chain.
    Chain,
    /// Not an object: left as it is (pisess; see the module docs).
    Other,
}

/// The kind of `v`.
pub fn kind(v: &Value) -> Kind {
    match v {
        Value::Object(obj) if is_type(obj, "session") => Kind::Session,
        Value::Object(_) => Kind::Chain,
        _ => Kind::Other,
    }
}

/// `obj.type === name`.
pub fn is_type(obj: &Map<String, Value>, name: &str) -> bool {
    obj.get("type").and_then(Value::as_str) == Some(name)
}

/// `obj.version = version` (in place if the key exists, else appended).
pub fn set_version(obj: &mut Map<String, Value>, version: u32) {
    obj.insert("version".to_owned(), Value::from(version));
}

/// `obj.id = id; obj.parentId = parent` (`null` when `parent` is `None`).
pub fn assign_ids(obj: &mut Map<String, Value>, id: &str, parent: Option<&str>) {
    obj.insert("id".to_owned(), Value::String(id.to_owned()));
    let parent = parent.map_or(Value::Null, |p| Value::String(p.to_owned()));
    obj.insert("parentId".to_owned(), parent);
}

/// `firstKeptEntryIndex` of a compaction entry when it is a JSON number, else `None` (the field
/// is then left alone).
pub fn first_kept_index(obj: &Map<String, Value>) -> Option<f64> {
    if !is_type(obj, "compaction") {
        return None;
    }
    match obj.get("firstKeptEntryIndex") {
        Some(Value::Number(n)) => Some(n.as_f64().unwrap_or(f64::NAN)),
        _ => None,
    }
}

/// The array index `entries[n]` reads, as JavaScript decides it: `n` must be a non-negative
/// integer (`-0` is `0`); `None` (undefined) otherwise. The upper bound is checked by the caller.
pub fn array_index(n: f64) -> Option<u64> {
    // 2^53: every integer below is exact; no session has that many entries.
    if n.is_finite() && n >= 0.0 && n.fract() == 0.0 && n < 9_007_199_254_740_992.0 {
        Some(n as u64)
    } else {
        None
    }
}

/// What `entries[firstKeptEntryIndex]` is when the compaction is migrated.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// `undefined`: not an index, or past the end: nothing is written.
    Missing,
    /// An element with `type: "session"`: nothing is written.
    Session,
    /// Any other element, with its `id` at that moment (`None` = undefined).
    Entry(Option<Value>),
}

/// What an element is as a `firstKeptEntryIndex` target: its kind and its `id` field as it is
/// now (the new id once migrated, its own one before). Non-objects have no id (pisess; see the
/// module docs).
pub fn target_of(v: &Value) -> Target {
    match v {
        Value::Object(obj) if is_type(obj, "session") => Target::Session,
        Value::Object(obj) => Target::Entry(obj.get("id").cloned()),
        _ => Target::Entry(None),
    }
}

/// Applies the compaction rule: `firstKeptEntryId = target.id` when the target exists and is
/// not a session (an undefined id removes the key, as `JSON.stringify` omits it), then deletes
/// `firstKeptEntryIndex` whatever the target was.
pub fn apply_first_kept(obj: &mut Map<String, Value>, target: Target) {
    match target {
        Target::Missing | Target::Session => {}
        Target::Entry(Some(id)) => {
            obj.insert("firstKeptEntryId".to_owned(), id);
        }
        Target::Entry(None) => {
            obj.shift_remove("firstKeptEntryId");
        }
    }
    obj.shift_remove("firstKeptEntryIndex");
}

/// Runs the v1 → v2 step over a whole in-memory entry list (`values[0]` is the header), as
/// pi's loop does, with pisess's deterministic ids. The ids depend on the header's `id`.
///
/// Ids that can survive into the output unchanged (the own `id` of an element that a compaction
/// points at before it is migrated) are reserved first, so no drawn id equals them.
pub fn migrate_values(values: &mut [Value]) {
    let session_id = values
        .first()
        .and_then(|h| h.get("id"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut drawer = IdDrawer::new(&session_id);
    for id in surviving_ids(values) {
        drawer.reserve(&id);
    }
    let len = values.len();
    let mut prev: Option<String> = None;
    for i in 0..len {
        let (before, rest) = values.split_at_mut(i);
        let (current, after) = rest.split_at_mut(1);
        let Value::Object(obj) = &mut current[0] else {
            continue;
        };
        if is_type(obj, "session") {
            set_version(obj, 2);
            continue;
        }
        let id = drawer.draw(i as u64).to_string();
        assign_ids(obj, &id, prev.as_deref());
        let Some(n) = first_kept_index(obj) else {
            prev = Some(id);
            continue;
        };
        let target = match array_index(n) {
            Some(t) if (t as usize) < len => {
                let t = t as usize;
                if t < i {
                    // Already migrated: its new id (or none for non-objects).
                    target_of(&before[t])
                } else if t == i {
                    Target::Entry(Some(Value::String(id.clone())))
                } else {
                    target_of(&after[t - i - 1])
                }
            }
            _ => Target::Missing,
        };
        apply_first_kept(obj, target);
        prev = Some(id);
    }
}

/// The string ids that can appear unchanged in the output: own ids of elements a compaction
/// points at before they are migrated (forward references).
fn surviving_ids(values: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let Value::Object(obj) = v else { continue };
        if is_type(obj, "session") {
            continue;
        }
        let Some(t) = first_kept_index(obj).and_then(array_index) else {
            continue;
        };
        if t as usize > i
            && let Some(Target::Entry(Some(Value::String(id)))) =
                values.get(t as usize).map(target_of)
        {
            out.push(id);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn array_index_follows_javascript() {
        assert_eq!(array_index(0.0), Some(0));
        assert_eq!(array_index(-0.0), Some(0));
        assert_eq!(array_index(3.0), Some(3));
        assert_eq!(array_index(1.5), None);
        assert_eq!(array_index(-1.0), None);
        assert_eq!(array_index(1e300), None);
    }

    #[test]
    fn first_kept_rule() {
        let mut obj = json!({"type":"compaction","firstKeptEntryIndex":2,"firstKeptEntryId":"x"});
        let m = obj.as_object_mut().unwrap();
        apply_first_kept(m, Target::Entry(None));
        assert_eq!(obj, json!({"type":"compaction"}));

        let mut obj = json!({"type":"compaction","firstKeptEntryId":"x","firstKeptEntryIndex":2});
        apply_first_kept(obj.as_object_mut().unwrap(), Target::Session);
        assert_eq!(
            serde_json::to_string(&obj).unwrap(),
            r#"{"type":"compaction","firstKeptEntryId":"x"}"#
        );
    }
}
