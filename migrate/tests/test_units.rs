//! One test per subtlety of pi's migration (spec §5.3), and the file-level behaviour.

use std::fs;

use pisess_formats::ProblemKind;
use pisess_migrate::ids::candidate_hash;
use pisess_migrate::{
    MigrateError, Migrator, NoteKind, Unresolved, migrate_reader, migrate_seekable,
};
use serde_json::{Value, json};

use crate::common;

const H1: &str =
    r#"{"type":"session","id":"s1","timestamp":"2025-06-01T10:00:00.000Z","cwd":"/p"}"#;
const M: &str =
    r#"{"type":"message","timestamp":"t","message":{"role":"user","content":"q","timestamp":1}}"#;

fn file(lines: &[&str]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// Exact migration: the output lines.
fn mig(text: &str) -> Vec<String> {
    common::lines(&common::migrate(text.as_bytes()).0)
}

fn values(text: &str) -> Vec<Value> {
    common::parse_lines(&common::migrate(text.as_bytes()).0)
}

/// The id pi-style migration gives entry `index` of session `sid` (no collisions).
fn id(sid: &str, index: u64) -> String {
    let h = candidate_hash(sid, index, 0);
    format!("{:02x}{:02x}{:02x}{:02x}", h[0], h[1], h[2], h[3])
}

#[test]
fn ids_follow_the_documented_hash() {
    let mut h = blake3::Hasher::new();
    h.update(b"pisess-migrate v1 id\0s1\0");
    h.update(&2u64.to_le_bytes());
    h.update(&0u32.to_le_bytes());
    let want = h.finalize().to_hex()[..8].to_owned();
    assert_eq!(id("s1", 2), want);
    let v = values(&file(&[H1, M, M]));
    assert_eq!(v[1]["id"], json!(id("s1", 1)));
    assert_eq!(v[2]["id"], json!(id("s1", 2)));
    // Pinned, so that a change to the scheme is noticed (stored ids depend on it).
    assert_eq!(
        mig(&file(&[H1, M])),
        [
            r#"{"type":"session","id":"s1","timestamp":"2025-06-01T10:00:00.000Z","cwd":"/p","version":3}"#
                .to_owned(),
            format!(
                r#"{{"type":"message","timestamp":"t","message":{{"role":"user","content":"q","timestamp":1}},"id":"{}","parentId":null}}"#,
                id("s1", 1)
            ),
        ]
    );
    assert_eq!(id("s1", 1), "eab50b74");
}

#[test]
fn forward_index_resolves_to_no_id() {
    // corpus/edge/v1-compaction-forward-index.jsonl
    let c = r#"{"type":"compaction","timestamp":"t","summary":"S","firstKeptEntryIndex":3,"tokensBefore":9}"#;
    let v = values(&file(&[H1, M, c, M]));
    assert_eq!(
        v[2],
        json!({"type":"compaction","timestamp":"t","summary":"S","tokensBefore":9,
               "id": id("s1", 2), "parentId": id("s1", 1)})
    );
    // An existing firstKeptEntryId is set to undefined, so it disappears.
    let c2 = r#"{"type":"compaction","firstKeptEntryId":"old","firstKeptEntryIndex":3}"#;
    let v = values(&file(&[H1, M, c2, M]));
    assert!(v[2].get("firstKeptEntryId").is_none());
}

#[test]
fn forward_index_to_an_entry_with_its_own_id() {
    // pi reads the later entry's id before overwriting it.
    let c = r#"{"type":"compaction","firstKeptEntryIndex":3}"#;
    let later = r#"{"type":"message","id":"keepme","message":{"role":"user"}}"#;
    let text = file(&[H1, M, c, later]);
    let v = values(&text);
    assert_eq!(v[2]["firstKeptEntryId"], "keepme");
    assert_ne!(v[3]["id"], "keepme");
    // A single pass cannot know it, and says so.
    let (once, outcome) = common::migrate_once(text.as_bytes());
    assert!(!outcome.exact);
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.index == 2 && n.kind == NoteKind::Inexact { target: 3 })
    );
    assert!(
        common::parse_lines(&once)[2]
            .get("firstKeptEntryId")
            .is_none()
    );
    // A null id is copied as null.
    let later = r#"{"type":"message","id":null}"#;
    let v = values(&file(&[H1, M, c, later]));
    assert_eq!(v[2]["firstKeptEntryId"], Value::Null);
}

#[test]
fn index_pointing_at_the_header_or_a_session_entry() {
    for index in ["0", "-0", "2"] {
        let c = format!(
            r#"{{"type":"compaction","firstKeptEntryId":"old","firstKeptEntryIndex":{index}}}"#
        );
        let inner = r#"{"type":"session","id":"inner"}"#;
        let v = values(&file(&[H1, M, inner, &c]));
        // Not resolved: firstKeptEntryId untouched, the index deleted.
        assert_eq!(v[3]["firstKeptEntryId"], "old", "index {index}");
        assert!(v[3].get("firstKeptEntryIndex").is_none());
        // The inner session element gets the version, no id, and stays out of the chain.
        assert_eq!(v[2], json!({"type":"session","id":"inner","version":3}));
        assert_eq!(v[3]["parentId"], v[1]["id"]);
    }
    // Forward to a later session element: untouched too.
    let c = r#"{"type":"compaction","firstKeptEntryId":"old","firstKeptEntryIndex":3}"#;
    let v = values(&file(&[H1, M, c, r#"{"type":"session","id":"x"}"#]));
    assert_eq!(v[2]["firstKeptEntryId"], "old");
}

#[test]
fn non_integer_or_out_of_range_index() {
    for index in ["1.5", "-1", "1e300", "4", "99"] {
        let c = format!(
            r#"{{"type":"compaction","firstKeptEntryId":"old","firstKeptEntryIndex":{index}}}"#
        );
        let v = values(&file(&[H1, M, &c, M]));
        assert_eq!(v[2]["firstKeptEntryId"], "old", "index {index}");
        assert!(v[2].get("firstKeptEntryIndex").is_none(), "index {index}");
    }
    // Integral floats index like integers.
    let c = r#"{"type":"compaction","firstKeptEntryIndex":1.0}"#;
    let v = values(&file(&[H1, M, c]));
    assert_eq!(v[2]["firstKeptEntryId"], v[1]["id"]);
    // Not a number: typeof !== "number", the field stays as it is.
    for index in [r#""1""#, "null", "[1]"] {
        let c = format!(r#"{{"type":"compaction","firstKeptEntryIndex":{index}}}"#);
        let lines = mig(&file(&[H1, M, &c]));
        assert!(
            lines[2].starts_with(&format!(
                r#"{{"type":"compaction","firstKeptEntryIndex":{index},"id":"#
            )),
            "{}",
            lines[2]
        );
    }
    // Only compaction entries are touched.
    let l = r#"{"type":"label","firstKeptEntryIndex":1}"#;
    assert!(mig(&file(&[H1, M, l]))[2].contains(r#""firstKeptEntryIndex":1"#));
}

#[test]
fn backward_and_self_references_take_the_new_id() {
    let c = r#"{"type":"compaction","summary":"S","firstKeptEntryIndex":1,"tokensBefore":1}"#;
    let me = r#"{"type":"compaction","firstKeptEntryIndex":3}"#;
    let v = values(&file(&[H1, M, c, me]));
    assert_eq!(v[2]["firstKeptEntryId"], v[1]["id"]);
    let lines = mig(&file(&[H1, M, c, me]));
    // New keys after id and parentId; the index key deleted in place.
    assert_eq!(
        lines[2],
        format!(
            r#"{{"type":"compaction","summary":"S","tokensBefore":1,"id":"{}","parentId":"{}","firstKeptEntryId":"{}"}}"#,
            id("s1", 2),
            id("s1", 1),
            id("s1", 1)
        )
    );
    assert_eq!(v[3]["firstKeptEntryId"], v[3]["id"]);
}

#[test]
fn existing_id_keys_keep_their_position() {
    let e = r#"{"parentId":"zzz","type":"message","id":"old","x":1}"#;
    let lines = mig(&file(&[H1, e, e]));
    assert_eq!(
        lines[1],
        format!(
            r#"{{"parentId":null,"type":"message","id":"{}","x":1}}"#,
            id("s1", 1)
        )
    );
    assert_eq!(
        lines[2],
        format!(
            r#"{{"parentId":"{}","type":"message","id":"{}","x":1}}"#,
            id("s1", 1),
            id("s1", 2)
        )
    );
}

#[test]
fn hook_messages_become_custom() {
    let h2 = r#"{"type":"session","version":2,"id":"s2"}"#;
    let hook = r#"{"type":"message","id":"a","parentId":null,"message":{"role":"hookMessage","customType":"h","content":"x","display":true}}"#;
    assert_eq!(
        mig(&file(&[h2, hook])),
        [
            r#"{"type":"session","version":3,"id":"s2"}"#,
            r#"{"type":"message","id":"a","parentId":null,"message":{"role":"custom","customType":"h","content":"x","display":true}}"#,
        ]
    );
    // v2 files keep their ids (and missing ids stay missing, as in pi 1.6.0).
    let bare = r#"{"type":"message","message":{"role":"user"}}"#;
    assert_eq!(mig(&file(&[h2, bare]))[1], bare);
}

#[test]
fn header_version_keeps_its_position() {
    // corpus/edge/version-1-explicit.jsonl
    let h = r#"{"type":"session","version":1,"id":"old-v1b","cwd":"/p"}"#;
    assert_eq!(
        mig(&file(&[h]))[0],
        r#"{"type":"session","version":3,"id":"old-v1b","cwd":"/p"}"#
    );
    let h = r#"{"type":"session","id":"x","version":"1","cwd":"/p"}"#;
    assert_eq!(
        mig(&file(&[h]))[0],
        r#"{"type":"session","id":"x","version":3,"cwd":"/p"}"#
    );
    // Absent: appended last.
    assert!(mig(&file(&[H1]))[0].ends_with(r#""cwd":"/p","version":3}"#));
}

#[test]
fn versions_that_are_not_numbers() {
    // NaN: pi runs no step but rewrites the file (dropping bad lines).
    let h = r#"{"type":"session","version":"abc","id":"x"}"#;
    let text = format!("{h}\n{{bad\n{M}\n");
    let (out, outcome) = common::migrate(text.as_bytes());
    assert!(outcome.migrated);
    assert_eq!(common::lines(&out), [h, M]);
    // "2" is 2: only v2 → v3.
    let h = r#"{"type":"session","version":"2","id":"x"}"#;
    let lines = mig(&file(&[h, M]));
    assert_eq!(lines[0], r#"{"type":"session","version":3,"id":"x"}"#);
    assert_eq!(lines[1], M);
}

#[test]
fn values_that_are_not_objects_stay_out_of_the_chain() {
    let c = r#"{"type":"compaction","firstKeptEntryIndex":2}"#;
    let text = file(&[H1, M, "[1,2]", "42", r#""text""#, c, M]);
    let (out, outcome) = common::migrate(text.as_bytes());
    let lines = common::lines(&out);
    assert_eq!(&lines[2..5], ["[1,2]", "42", r#""text""#]);
    let v = common::parse_lines(&out);
    assert_eq!(v[5]["parentId"], v[1]["id"]);
    assert!(v[5].get("firstKeptEntryId").is_none());
    assert_eq!(v[6]["parentId"], v[5]["id"]);
    assert_eq!(outcome.non_objects, 3);
    let kinds: Vec<_> = outcome.notes.iter().map(|n| (n.index, &n.kind)).collect();
    assert_eq!(
        kinds,
        [
            (2, &NoteKind::NonObjectKept { found: "array" }),
            (3, &NoteKind::NonObjectKept { found: "number" }),
            (4, &NoteKind::NonObjectKept { found: "string" }),
            (
                5,
                &NoteKind::FirstKeptUnresolved {
                    value: 2.0,
                    why: Unresolved::NotAnObject
                }
            ),
        ]
    );
    // In a v2 file they are simply kept, as pi keeps them.
    let h2 = r#"{"type":"session","version":2,"id":"s2"}"#;
    let (_, outcome) = common::migrate(file(&[h2, "[1]"]).as_bytes());
    assert!(outcome.notes.is_empty());
}

#[test]
fn glued_records_are_migrated_like_the_others() {
    let text = format!("{H1}\n{M}{M}\n{M}\n");
    let (out, outcome) = common::migrate(text.as_bytes());
    assert_eq!(outcome.glued_recovered, 2);
    let v = common::parse_lines(&out);
    assert_eq!(v.len(), 4);
    assert_eq!(v[3]["parentId"], v[2]["id"]);
    assert_eq!(v[3]["id"], json!(id("s1", 3)));
}

#[test]
fn dropped_lines_are_counted_and_output_uses_lf() {
    let text = format!("{{junk\n\r\n{H1}\r\nnull\r\n{{bad\r\n  \r\n{M}\r\n{{\"type\":\"mess");
    let (out, outcome) = common::migrate(text.as_bytes());
    let lines = common::lines(&out);
    assert_eq!(lines.len(), 2);
    assert!(!String::from_utf8(out).unwrap().contains('\r'));
    assert_eq!(outcome.entries, 1);
    assert_eq!(outcome.lines_skipped, 3, "junk, bad, partial last line");
    assert_eq!(outcome.blank_lines, 2);
    assert_eq!(outcome.falsy_dropped, 1);
    assert!(
        outcome
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::PartialLastLine)
    );
    assert_eq!(
        outcome.bytes_written,
        lines.iter().map(|l| l.len() as u64 + 1).sum::<u64>()
    );
}

#[test]
fn numbers_beyond_double_range_are_kept_verbatim() {
    let big = r#"{"type":"message","n":1e400}"#;
    let (out, outcome) = common::migrate(file(&[H1, M, big, M]).as_bytes());
    let lines = common::lines(&out);
    assert_eq!(lines[2], big);
    let v3: Value = serde_json::from_str(&lines[3]).unwrap();
    let v1: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(v3["parentId"], v1["id"]);
    assert!(
        outcome
            .notes
            .iter()
            .any(|n| n.index == 2 && matches!(n.kind, NoteKind::Unparsable { .. }))
    );
}

#[test]
fn current_files_are_copied_byte_for_byte() {
    let corpus = common::corpus();
    let mut files = common::jsonl_files(&corpus);
    files.extend(common::jsonl_files(&corpus.join("edge")));
    files.extend(common::realdata());
    let mut copied = 0;
    for path in files {
        let src = fs::read(&path).unwrap();
        let mut out = Vec::new();
        let Ok(outcome) = migrate_seekable(std::io::Cursor::new(&src), &mut out) else {
            continue;
        };
        if outcome.migrated {
            continue;
        }
        assert!(out == src, "{} not copied unchanged", path.display());
        let mut once = Vec::new();
        let outcome = migrate_reader(&src[..], &mut once).unwrap();
        assert!(!outcome.migrated);
        assert!(once == src, "{}: single pass", path.display());
        assert_eq!(outcome.bytes_written, src.len() as u64);
        copied += 1;
    }
    assert!(copied >= 33, "only {copied} current files");
    // A byte order mark, CRLF and junk are copied too.
    let text =
        b"\xEF\xBB\xBF{oops\r\n{\"type\":\"session\",\"version\":3,\"id\":\"x\"}\r\n[1]\r\n{bad";
    assert_eq!(common::migrate(text).0, text);
    assert_eq!(common::migrate_once(text).0, text);
}

#[test]
fn files_that_are_not_sessions_are_refused_and_nothing_is_written() {
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("\n  \n", "empty"),
        ("this is not a session\n", "not-a-session"),
        (M, "not-a-session"),
        ("[1]\n", "not-a-session"),
        (r#"{"type":"session","id":7}"#, "not-a-session"),
        (r#"{"kind":"header","version":4}"#, "v4-header"),
    ];
    for &(text, code) in cases {
        for single in [false, true] {
            let mut out = Vec::new();
            let err = if single {
                migrate_reader(text.as_bytes(), &mut out)
            } else {
                migrate_seekable(std::io::Cursor::new(text), &mut out)
            }
            .unwrap_err();
            let MigrateError::Rejected(p) = &err else {
                panic!("{text:?}: {err}");
            };
            assert_eq!(p.kind.code(), code, "{text:?}");
            assert!(out.is_empty());
            assert!(err.to_string().starts_with("cannot migrate: "));
        }
    }
}

#[test]
fn migrator_needs_increasing_indexes() {
    let header = json!({"type":"session","id":"s"});
    let mut m = Migrator::new(header.as_object().unwrap());
    let mut v = json!({"type":"message"});
    m.migrate_record(&mut v, 1).unwrap();
    let mut w = json!({"type":"message"});
    assert!(matches!(
        m.migrate_record(&mut w, 1),
        Err(MigrateError::IndexOrder {
            index: 1,
            previous: 1
        })
    ));
    // A gap counts as elements outside the chain.
    let mut c = json!({"type":"compaction","firstKeptEntryIndex":3});
    m.migrate_record(&mut c, 5).unwrap();
    assert_eq!(c["parentId"], v["id"]);
    assert!(c.get("firstKeptEntryId").is_none());
    let mut v3 = Migrator::new(
        json!({"type":"session","id":"s","version":3})
            .as_object()
            .unwrap(),
    );
    assert!(!v3.needs_rewrite());
    let mut same = json!({"type":"message","message":{"role":"hookMessage"}});
    v3.migrate_record(&mut same, 1).unwrap();
    assert_eq!(same["message"]["role"], "hookMessage");
}

#[test]
fn a_byte_order_mark_is_dropped_from_a_migrated_file() {
    let text = format!("\u{feff}{H1}\n{M}\n");
    let (out, outcome) = common::migrate(text.as_bytes());
    assert!(outcome.migrated);
    assert!(out.starts_with(b"{\"type\":\"session\""));
    assert!(outcome.problems.iter().any(|p| p.kind == ProblemKind::Bom));
}
