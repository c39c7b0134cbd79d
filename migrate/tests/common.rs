//! Helpers shared by the test modules, and (from `formats/tests/common.rs`) where the test
//! inputs are.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use pisess_formats::{Event, SessionReader, js};
use pisess_migrate::{MigrationOutcome, migrate_reader, migrate_seekable};
use serde_json::Value;

pub use crate::inputs::*;

/// Where this crate's expected outputs live.
pub fn expected_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/expected")
}

/// Migrates `src` exactly (two passes for v1); panics on error.
pub fn migrate(src: &[u8]) -> (Vec<u8>, MigrationOutcome) {
    let mut out = Vec::new();
    let outcome = migrate_seekable(Cursor::new(src), &mut out).expect("migration succeeds");
    (out, outcome)
}

/// Migrates `src` in a single pass; panics on error.
pub fn migrate_once(src: &[u8]) -> (Vec<u8>, MigrationOutcome) {
    let mut out = Vec::new();
    let outcome = migrate_reader(src, &mut out).expect("migration succeeds");
    (out, outcome)
}

/// The lines of a migrated output, parsed.
pub fn parse_lines(out: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(out).expect("output is UTF-8");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "output ends with a newline"
    );
    text.lines()
        .map(|l| serde_json::from_str(l).expect("output line is JSON"))
        .collect()
}

/// The output as text lines (without newlines).
pub fn lines(out: &[u8]) -> Vec<String> {
    std::str::from_utf8(out)
        .expect("output is UTF-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Indexes (in pi's entry list) of the records the reader recovered from glued lines.
pub fn glued_indexes(src: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    SessionReader::new(src)
        .read(|ev| {
            if let Event::Record(r, i) = ev
                && r.glued
            {
                out.push(i);
            }
            Ok::<(), ()>(())
        })
        .unwrap();
    out
}

/// The id fields renamed by [`normalize`].
pub const ID_FIELDS: [&str; 3] = ["id", "parentId", "firstKeptEntryId"];

/// Renames every entry id (in `id`, `parentId`, `firstKeptEntryId` of the elements after the
/// header) to `#n`, n being the order of its first appearance, so that outputs with different
/// random ids compare equal when their structure is the same.
pub fn normalize(entries: &mut [Value]) {
    let mut names: HashMap<String, usize> = HashMap::new();
    for e in entries.iter_mut().skip(1) {
        let Value::Object(obj) = e else { continue };
        for key in ID_FIELDS {
            if let Some(Value::String(s)) = obj.get_mut(key) {
                let n = names.len();
                let k = *names.entry(s.clone()).or_insert(n);
                *s = format!("#{k}");
            }
        }
    }
}

/// Removes the elements at `indexes` (sorted) from a migrated list, reconnecting the chain:
/// references to a removed element's id are replaced by its `parentId`.
pub fn splice_out(entries: &mut Vec<Value>, indexes: &[u64]) {
    let mut replaced: HashMap<String, Value> = HashMap::new();
    let mut kept = Vec::with_capacity(entries.len());
    for (i, mut e) in std::mem::take(entries).into_iter().enumerate() {
        if let Value::Object(obj) = &mut e {
            for key in ["parentId", "firstKeptEntryId"] {
                if let Some(Value::String(s)) = obj.get(key)
                    && let Some(r) = replaced.get(s)
                {
                    obj.insert(key.to_owned(), r.clone());
                }
            }
        }
        if indexes.contains(&(i as u64)) {
            if let (Some(Value::String(id)), Some(parent)) = (e.get("id"), e.get("parentId")) {
                replaced.insert(id.clone(), parent.clone());
            }
            continue;
        }
        kept.push(e);
    }
    *entries = kept;
}

/// A short digest of one normalised element.
pub fn digest(v: &Value) -> String {
    let h = blake3::hash(js::to_string(v).as_bytes());
    h.to_hex()[..16].to_owned()
}
