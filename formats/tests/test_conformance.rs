//! pisess's reading of every fixture and genuine file against the oracle's `load` goldens
//! (`fixtures/golden/<group>/<name>/load.json`, written by `fixtures/regen.sh` from pi 1.6.0).
//!
//! For v3 files the records pisess reads must be exactly pi's entries (as JSON values), and
//! the leaf must be pi's. Deliberate differences are asserted as such: glued lines yield more
//! records than pi keeps (pi drops the line), and files pi rejects are rejected.

use std::fs::File;
use std::path::{Path, PathBuf};

use pisess_formats::{Event, ProblemKind, SessionReader};
use serde_json::Value;

use crate::common;

struct Read {
    header: Option<Value>,
    records: Vec<Value>,
    glued_extra: usize,
    last_id: Option<String>,
}

fn read(path: &Path) -> Read {
    let mut out = Read {
        header: None,
        records: Vec::new(),
        glued_extra: 0,
        last_id: None,
    };
    SessionReader::new(File::open(path).unwrap())
        .read(|ev| {
            match ev {
                Event::Header(h) => out.header = Some(serde_json::from_str(&h.json).unwrap()),
                Event::Record(r, index) => {
                    assert_eq!(index as usize, out.records.len() + 1);
                    out.records.push(serde_json::from_str(r.json).unwrap());
                    out.last_id = r
                        .entry
                        .as_ref()
                        .ok()
                        .and_then(|e| e.id().map(str::to_owned));
                }
                Event::Problem(p) => {
                    if let ProblemKind::Glued { records, .. } = p.kind {
                        out.glued_extra += records;
                    }
                }
            }
            Ok::<(), ()>(())
        })
        .unwrap();
    out
}

fn fixtures() -> Vec<(PathBuf, PathBuf)> {
    let root = common::root();
    let mut v = Vec::new();
    for group in ["sessions", "edge"] {
        for f in common::jsonl_files(&root.join("fixtures").join(group)) {
            let name = f.file_stem().unwrap().to_string_lossy().into_owned();
            v.push((f, root.join("fixtures/golden").join(group).join(name)));
        }
    }
    for f in common::realdata() {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        v.push((f, root.join("fixtures/golden/realdata").join(name)));
    }
    assert!(v.len() >= 40, "fixtures missing: {}", v.len());
    v
}

fn golden(dir: &Path, cmd: &str) -> Value {
    let p = dir.join(format!("{cmd}.json"));
    let text = std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e} (run fixtures/regen.sh)", p.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn records_and_leaf_equal_pi_for_every_fixture() {
    let mut compared = 0;
    for (file, dir) in fixtures() {
        let load = golden(&dir, "load");
        let ours = read(&file);
        let name = file.display();
        if load.get("error").is_some() {
            // pi rejects the file (not a session / empty but non-empty bytes); so does pisess,
            // except an empty file, which pi turns into a new session.
            let empty = std::fs::metadata(&file).unwrap().len() == 0;
            assert!(
                ours.header.is_none(),
                "{name}: pi rejects it, pisess read a header"
            );
            assert!(!empty, "{name}: pi accepts empty files");
            continue;
        }
        if std::fs::metadata(&file).unwrap().len() == 0 {
            assert!(ours.header.is_none() && ours.records.is_empty(), "{name}");
            continue;
        }
        let header = ours
            .header
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no header"));
        let original = load["originalVersion"].as_f64().unwrap_or(1.0);
        if original >= 3.0 {
            assert_eq!(header, &load["header"], "{name}: header");
        }
        let Some(entries) = load["entries"].as_array() else {
            // Large genuine files keep only a count in the golden.
            assert_eq!(
                ours.records.len() - ours.glued_extra_dropped(),
                load["entryCount"].as_u64().unwrap() as usize,
                "{name}"
            );
            continue;
        };
        // pi drops a glued line entirely; pisess recovers each of its records.
        assert_eq!(
            ours.records.len() - ours.glued_extra_dropped(),
            entries.len(),
            "{name}: entry count"
        );
        if original >= 3.0 {
            assert_eq!(&ours.records, entries, "{name}: entries");
            let leaf = load["leafId"].as_str().map(str::to_owned);
            assert_eq!(ours.last_id, leaf, "{name}: leaf");
        }
        compared += 1;
    }
    assert!(compared >= 30, "only {compared} files compared");
}

impl Read {
    /// Records pi would not have: every record of a glued line.
    fn glued_extra_dropped(&self) -> usize {
        self.glued_extra
    }
}

#[test]
fn glued_genuine_files_yield_pi_count_plus_recovered_records() {
    for name in [
        "pimono__root-compact.v1.concat-line",
        "pimono__root-session.v1.concat-line",
    ] {
        let file = common::shared()
            .join("realdata")
            .join(format!("{name}.jsonl"));
        let load = golden(
            &common::root().join("fixtures/golden/realdata").join(name),
            "load",
        );
        let ours = read(&file);
        let pi = load["entryCount"].as_u64().unwrap() as usize;
        assert_eq!(ours.glued_extra, 2, "{name}: one glued line of two records");
        assert_eq!(
            ours.records.len(),
            pi + 2,
            "{name}: pi's {pi} entries plus both recovered records"
        );
    }
}
