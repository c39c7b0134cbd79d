//! Conformance with pi 1.6.0's own migration (the oracle's `migrate` command), on every legacy
//! file of the standard corpus and the genuine v1 files of `../shared/realdata` (the fixtures'
//! goldens, `test_fixtures.rs`, cover the edge cases, and the genuine files by their tree shape
//! only; here every entry is compared).
//!
//! pi draws random ids, so outputs are compared by structure: every id is renamed by its first
//! appearance (`common::normalize`), then the elements must be equal, key order included (each
//! is compared through `JSON.stringify`). The oracle's answers are stored in `tests/expected/`
//! (whole for small files, one digest per element otherwise); regenerate them with
//!
//! ```text
//! PISESS_REGEN_EXPECTED=1 cargo test -p pisess-migrate --test runner -- --ignored regen_expected
//! ```
//!
//! (uses `../shared/oracle/oracle`, or `$PISESS_ORACLE`).

use std::fs;
use std::path::{Path, PathBuf};

use pisess_formats::js;
use serde_json::{Value, json};

use crate::common;

/// Small expected files keep the whole normalised entry list.
const WHOLE_LIMIT: usize = 16 << 10;

struct Case {
    group: &'static str,
    path: PathBuf,
}

impl Case {
    fn name(&self) -> String {
        self.path
            .file_stem()
            .expect("file name")
            .to_string_lossy()
            .into_owned()
    }

    fn expected_path(&self) -> PathBuf {
        common::expected_dir()
            .join(self.group)
            .join(format!("{}.json", self.name()))
    }
}

fn cases() -> Vec<Case> {
    let corpus = common::corpus();
    let mut v = Vec::new();
    for name in [
        "16-v1-60.jsonl",
        "17-v1-400.jsonl",
        "18-v2-80.jsonl",
        "19-v2-800.jsonl",
    ] {
        v.push(Case {
            group: "corpus",
            path: corpus.join(name),
        });
    }
    for path in common::realdata() {
        if path.to_string_lossy().contains(".v1.") {
            v.push(Case {
                group: "realdata",
                path,
            });
        }
    }
    assert_eq!(v.len(), 8, "corpus or realdata files are missing");
    for c in &v {
        assert!(c.path.is_file(), "missing input {}", c.path.display());
    }
    v
}

/// The oracle's migrated entries, normalised.
fn run_oracle(path: &Path) -> (Value, Vec<Value>) {
    let oracle = std::env::var_os("PISESS_ORACLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::shared().join("oracle/oracle"));
    let out = std::process::Command::new(&oracle)
        .arg("migrate")
        .arg(path)
        .args(["--seed", "1"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", oracle.display()));
    assert!(out.status.success(), "oracle failed on {}", path.display());
    let v: Value = serde_json::from_slice(&out.stdout).expect("oracle prints JSON");
    let mut entries = v["entries"].as_array().expect("entries").clone();
    common::normalize(&mut entries);
    (v["originalVersion"].clone(), entries)
}

#[test]
#[ignore = "regenerates tests/expected/ with the oracle (set PISESS_REGEN_EXPECTED=1)"]
fn regen_expected() {
    assert!(
        std::env::var_os("PISESS_REGEN_EXPECTED").is_some(),
        "set PISESS_REGEN_EXPECTED=1 to overwrite tests/expected/"
    );
    for case in cases() {
        let (version, entries) = run_oracle(&case.path);
        let whole: usize = entries.iter().map(|e| js::to_string(e).len()).sum();
        let mut doc = json!({
            "source": format!("{}/{}", case.group, case.path.file_name().unwrap().to_string_lossy()),
            "oracle": "@earendil-works/pi-coding-agent 1.6.0: oracle migrate FILE --seed 1, ids renamed #n by first appearance",
            "originalVersion": version,
            "count": entries.len(),
        });
        if whole <= WHOLE_LIMIT {
            doc["entries"] = Value::Array(entries);
        } else {
            doc["digests"] = entries.iter().map(common::digest).collect();
        }
        let path = case.expected_path();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        fs::write(&path, text).unwrap();
    }
}

fn expected(case: &Case) -> Value {
    let path = case.expected_path();
    let text = fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (see the docs of test_oracle.rs to regenerate)",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap()
}

/// Compares `ours` (normalised) with the expected document; returns the first difference.
fn compare(ours: &[Value], exp: &Value) -> Result<(), String> {
    let count = exp["count"].as_u64().unwrap() as usize;
    if ours.len() != count {
        return Err(format!("{} entries, pi has {count}", ours.len()));
    }
    if let Some(entries) = exp["entries"].as_array() {
        for (i, (a, b)) in ours.iter().zip(entries).enumerate() {
            let (a, b) = (js::to_string(a), js::to_string(b));
            if a != b {
                return Err(format!("entry {i}:\n  ours: {a}\n  pi:   {b}"));
            }
        }
    } else {
        let digests = exp["digests"].as_array().unwrap();
        for (i, (a, b)) in ours.iter().zip(digests).enumerate() {
            if common::digest(a) != b.as_str().unwrap() {
                return Err(format!(
                    "entry {i} differs from pi's; ours: {}",
                    js::to_string(a)
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn legacy_files_migrate_like_pi() {
    let mut failures = Vec::new();
    for case in cases() {
        let src = fs::read(&case.path).unwrap();
        let exp = expected(&case);
        let (out, outcome) = common::migrate(&src);
        assert!(outcome.migrated, "{}", case.path.display());
        assert!(outcome.exact);
        assert_eq!(
            outcome.original_version.clone().unwrap_or(Value::Null),
            exp["originalVersion"],
            "{}",
            case.path.display()
        );
        // Single pass gives the same bytes on every file (none has a forward reference to an
        // entry with its own id).
        let (once, _) = common::migrate_once(&src);
        assert!(once == out, "{}: single pass differs", case.path.display());

        let mut ours = common::parse_lines(&out);
        let glued = common::glued_indexes(&src);
        assert_eq!(outcome.glued_recovered, glued.len() as u64);
        assert_eq!(
            ours.len() as u64,
            exp["count"].as_u64().unwrap() + outcome.glued_recovered,
            "{}: pi's entries plus the recovered glued records",
            case.path.display()
        );
        // Every line is exactly JSON.stringify of its value.
        for (line, v) in common::lines(&out).iter().zip(&ours) {
            assert_eq!(line, &js::to_string(v));
        }
        common::splice_out(&mut ours, &glued);
        common::normalize(&mut ours);
        if let Err(e) = compare(&ours, &exp) {
            failures.push(format!("{}: {e}", case.path.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn glued_realdata_records_are_recovered_and_migrated() {
    let dir = common::shared().join("realdata");
    // Line 440 holds two messages; pi drops both.
    let src = fs::read(dir.join("pimono__root-session.v1.concat-line.jsonl")).unwrap();
    let glued = common::glued_indexes(&src);
    assert_eq!(glued, [439, 440]);
    let (out, outcome) = common::migrate(&src);
    assert_eq!(outcome.glued_recovered, 2);
    let v = common::parse_lines(&out);
    assert_eq!(v.len(), 464);
    for i in [439usize, 440, 441] {
        assert_eq!(v[i]["type"], "message");
        assert_eq!(
            v[i]["parentId"],
            v[i - 1]["id"],
            "entry {i} continues the chain"
        );
    }

    // The last line holds a message and the compaction after it; the compaction's
    // firstKeptEntryIndex (1013) is its own index once the line is split.
    let src = fs::read(dir.join("pimono__root-compact.v1.concat-line.jsonl")).unwrap();
    assert_eq!(common::glued_indexes(&src), [1012, 1013]);
    let (out, outcome) = common::migrate(&src);
    assert_eq!(outcome.glued_recovered, 2);
    let v = common::parse_lines(&out);
    assert_eq!(v.len(), 1014);
    let last = &v[1013];
    assert_eq!(last["type"], "compaction");
    assert_eq!(last["parentId"], v[1012]["id"]);
    assert_eq!(last["firstKeptEntryId"], last["id"]);
    assert!(last.get("firstKeptEntryIndex").is_none());
}
