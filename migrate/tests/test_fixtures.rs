//! pisess's migration of every fixture against the oracle's `migrate` goldens
//! (`fixtures/golden/<group>/<name>/migrate.json`, written by `fixtures/regen.sh` from pi 1.6.0
//! with `--seed 1`).
//!
//! Legacy files (version < 3) are compared by structure, ids renamed by first appearance: whole
//! entries where the golden has them, `[id, parentId, type]` rows where the golden keeps only a
//! digest (large genuine files). Records recovered from glued lines are taken out first (pi
//! drops those lines). Current files must come out byte for byte; files pi's loader refuses must
//! be refused.

use std::fs;
use std::path::PathBuf;

use pisess_formats::js;
use pisess_migrate::{MigrateError, migrate_seekable};
use serde_json::{Value, json};

use crate::common;

struct Fixture {
    name: String,
    path: PathBuf,
    golden: Value,
}

fn fixtures() -> Vec<Fixture> {
    let root = common::root();
    let index = root.join("fixtures/golden/index.json");
    let text = fs::read_to_string(&index).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: run fixtures/regen.sh to build the goldens",
            index.display()
        )
    });
    let index: Value = serde_json::from_str(&text).unwrap();
    let mut v = Vec::new();
    for fx in index["fixtures"].as_array().unwrap() {
        let group = fx["group"].as_str().unwrap();
        let name = fx["name"].as_str().unwrap();
        if !fx["goldens"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "migrate")
        {
            continue;
        }
        let rel = fx["path"].as_str().unwrap();
        let path = match rel.strip_prefix("../shared/") {
            Some(r) => common::shared().join(r),
            None => root.join(rel),
        };
        let golden = root
            .join("fixtures/golden")
            .join(group)
            .join(name)
            .join("migrate.json");
        let golden = serde_json::from_str(&fs::read_to_string(&golden).unwrap()).unwrap();
        v.push(Fixture {
            name: format!("{group}/{name}"),
            path,
            golden,
        });
    }
    assert!(v.len() >= 35, "only {} migrate goldens", v.len());
    v
}

/// `[id, parentId, type]` rows as objects, so that `normalize` can rename them.
fn rows(entries: &[Value]) -> Vec<Value> {
    entries
        .iter()
        .map(|e| json!({"id": e.get("id"), "parentId": e.get("parentId"), "type": e.get("type")}))
        .collect()
}

#[test]
fn fixtures_migrate_like_pi() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for fx in fixtures() {
        let src = fs::read(&fx.path).unwrap();
        let mut out = Vec::new();
        let result = migrate_seekable(std::io::Cursor::new(&src), &mut out);
        let golden_entries = fx.golden.get("entries").and_then(Value::as_array);
        let outcome = match result {
            Err(MigrateError::Rejected(_)) => {
                // pi's loader refuses these; the oracle's parseSessionEntries only finds no
                // header at index 0 (empty, garbage) or a header later (header-not-first).
                let first = golden_entries.and_then(|e| e.first());
                assert!(
                    first.is_none_or(|h| h["type"] != "session"),
                    "{}: refused, but pi's list starts with a header",
                    fx.name
                );
                assert!(out.is_empty());
                continue;
            }
            Err(e) => panic!("{}: {e}", fx.name),
            Ok(o) => o,
        };
        if !outcome.migrated {
            assert!(out == src, "{}: not copied unchanged", fx.name);
            continue;
        }
        compared += 1;
        let mut ours = common::parse_lines(&out);
        let glued = common::glued_indexes(&src);
        common::splice_out(&mut ours, &glued);
        let (mut ours, mut pi) = match golden_entries {
            Some(e) => (ours, e.clone()),
            None => {
                let summary = fx.golden["entriesDigest"]["summary"].as_array().unwrap();
                let pi: Vec<Value> = summary
                    .iter()
                    .map(|r| json!({"id": r[0], "parentId": r[1], "type": r[2]}))
                    .collect();
                (rows(&ours), pi)
            }
        };
        common::normalize(&mut ours);
        common::normalize(&mut pi);
        if ours.len() != pi.len() {
            failures.push(format!(
                "{}: {} entries, pi {}",
                fx.name,
                ours.len(),
                pi.len()
            ));
            continue;
        }
        for (i, (a, b)) in ours.iter().zip(&pi).enumerate() {
            let (a, b) = (js::to_string(a), js::to_string(b));
            if a != b {
                failures.push(format!("{} entry {i}:\n  ours: {a}\n  pi:   {b}", fx.name));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compared >= 9, "only {compared} legacy fixtures compared");
}
