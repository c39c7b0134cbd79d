//! `pisess migrate FILE --stdout` against the oracle's migration of every legacy fixture and
//! genuine file, compared by structure (pi's v1 ids are random, so ids are renamed by first
//! appearance), byte-identical across runs, and the identity on v3 files.

use std::collections::HashMap;

use serde_json::Value;

use crate::common::{TestEnv, fixture, realdata, root};

/// The migration of `path` (which holds no line that is left out: exit status 0).
fn migrate(path: &std::path::Path) -> Vec<u8> {
    let out = TestEnv::new()
        .pisess()
        .args(["migrate", "--stdout"])
        .arg(path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Renames ids (and references to them) by the order in which they first appear.
fn canonical(values: &mut [Value]) {
    let mut names: HashMap<String, String> = HashMap::new();
    for v in values.iter() {
        if let Some(id) = v.get("id").and_then(Value::as_str) {
            let n = names.len();
            names
                .entry(id.to_owned())
                .or_insert_with(|| format!("#{n}"));
        }
    }
    for v in values.iter_mut().skip(1) {
        let Some(obj) = v.as_object_mut() else {
            continue;
        };
        for key in ["id", "parentId", "firstKeptEntryId", "targetId", "fromId"] {
            if let Some(Value::String(s)) = obj.get_mut(key)
                && let Some(n) = names.get(s.as_str())
            {
                *s = n.clone();
            }
        }
    }
}

#[test]
fn legacy_fixtures_equal_the_oracle_by_structure() {
    let cases = [
        ("sessions", "07-v1"),
        ("sessions", "08-v2"),
        ("edge", "version-1-explicit"),
        ("edge", "v1-compaction-forward-index"),
        ("edge", "v2-missing-ids-tail"),
    ];
    for (group, name) in cases {
        let file = fixture(&format!("{group}/{name}.jsonl"));
        let golden: Value = serde_json::from_str(
            &std::fs::read_to_string(
                root().join(format!("fixtures/golden/{group}/{name}/migrate.json")),
            )
            .unwrap(),
        )
        .unwrap();
        let mut want: Vec<Value> = golden["entries"].as_array().unwrap().clone();
        let bytes = migrate(&file);
        assert_eq!(bytes, migrate(&file), "{name}: two runs differ");
        let mut got: Vec<Value> = String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        canonical(&mut want);
        canonical(&mut got);
        assert_eq!(got, want, "{group}/{name}");
    }
}

#[test]
fn genuine_v1_files_keep_every_entry_and_run_deterministically() {
    for name in [
        "pimono__before-compaction.v1",
        "pimono__large-session.v1",
        "pimono__root-session.v1.concat-line",
    ] {
        let file = realdata().join(format!("{name}.jsonl"));
        let bytes = migrate(&file);
        assert_eq!(bytes, migrate(&file), "{name}: two runs differ");
        let golden: Value = serde_json::from_str(
            &std::fs::read_to_string(
                root().join(format!("fixtures/golden/realdata/{name}/migrate.json")),
            )
            .unwrap(),
        )
        .unwrap();
        let lines = bytes.iter().filter(|b| **b == b'\n').count() as u64;
        let glued = u64::from(name.contains("concat-line")) * 2;
        // The golden counts pi's entries (header included); pisess also recovers both records
        // of the glued line that pi drops.
        let pi_count = golden["entriesDigest"]["count"]
            .as_u64()
            .or_else(|| golden["entries"].as_array().map(|a| a.len() as u64))
            .unwrap();
        assert_eq!(lines, pi_count + glued, "{name}");
    }
}

#[test]
fn v3_files_are_printed_unchanged() {
    for f in [
        "sessions/01-tiny.jsonl",
        "sessions/04-many-branches.jsonl",
        "edge/crlf.jsonl",
        "edge/no-final-newline.jsonl",
    ] {
        let file = fixture(f);
        assert_eq!(migrate(&file), std::fs::read(&file).unwrap(), "{f}");
    }
}

#[test]
fn lines_left_out_of_the_output_make_the_exit_status_two() {
    let env = TestEnv::new();
    let file = env.home.path().join("v1-with-a-bad-line.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"type":"session","version":1,"id":"abc","timestamp":"2025-01-01T00:00:00Z","cwd":"/x"}"#,
            "\nnot json\n",
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"hi"}}"#,
            "\n"
        ),
    )
    .unwrap();
    let out = env
        .pisess()
        .args(["migrate", "--stdout"])
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(":2: warning: not valid JSON"), "{stderr}");
    assert!(
        stderr.contains(": 1 line left out of the output"),
        "{stderr}"
    );
    // Everything else is printed: the header and the one message, migrated.
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["version"], 3);
    assert_eq!(lines[1]["message"]["content"], "hi");
}
