//! The outline (what `log` and `tree` print per node, stored at import) against the definition:
//! for every node of every corpus, fixture, edge-case and genuine file, the stored facts equal
//! `Facts::from_value` of the node's line; the typed fast path agrees with the value wherever it
//! answers and answers for every message of the corpus; an import done in appends writes the
//! same blocks as one import of the whole file.

use std::io::Write;
use std::path::{Path, PathBuf};

use pisess_engine::describe::Facts;
use pisess_engine::outline::{OutlineRow, ParentId, SUMMARY_CHARS, Timestamp};
use pisess_engine::{Outcome, SessionKey, Snapshot, Store};
use pisess_formats::entry::Entry;
use serde_json::Value;

use crate::common;

fn all_files() -> Vec<PathBuf> {
    let corpus = common::corpus();
    let mut files = common::jsonl_files(&corpus);
    files.extend(common::jsonl_files(&corpus.join("edge")));
    files.extend(common::realdata());
    for dir in ["fixtures/sessions", "fixtures/edge", "fixtures/bad"] {
        files.extend(common::jsonl_files(&common::root().join(dir)));
    }
    files
}

/// Lines no pi writes but a file can hold: every way the typed view could disagree with the
/// parsed value, and lines the value parse refuses.
fn crafted() -> String {
    let h = r#"{"type":"session","version":3,"id":"s-crafted","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let deep = format!(
        r#"{{"type":"message","id":"e9","parentId":"e8","timestamp":"2026-01-01T00:00:09.000Z","message":{{"role":"user","content":"deep","x":{}1{}}}}}"#,
        "[".repeat(150),
        "]".repeat(150)
    );
    let lines = [
        h.to_owned(),
        r#"{"type":"message","id":"e1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"first\nsecond"}}"#.to_owned(),
        r#"{"type":"message","id":"e2","parentId":"e1","timestamp":"yesterday","message":{"role":"assistant","model":"m","content":[{"type":"toolCall","name":"edit","arguments":{"path":"a","path":"b"}}]}}"#.to_owned(),
        r#"{"type":"message","id":"e3","parentId":"e2","message":{"role":"assistant","content":[{"type":"toolCall","name":"x","arguments":{ "q" : 1.50 }}]}}"#.to_owned(),
        r#"{"type":"message","id":"e4","parentId":"e3","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"toolResult","toolName":"bash","content":[{"type":"text","text":"\ud83d\ude00 pair"}]}}"#.to_owned(),
        r#"{"type":"message","id":"e5","parentId":"e4","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"toolResult","content":[{"type":"text","text":"lone \udc00"}]}}"#.to_owned(),
        r#"{"type":"message","id":"e6","parentId":"e5","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"user","content":"big","n":1e999}}"#.to_owned(),
        r#"{"type":"message","id":"e7","parentId":"e6","timestamp":"2026-01-01T00:00:07.000Z","message":{"role":"system","content":"","sections":{"a":"\n sys line"}}}"#.to_owned(),
        format!(
            r#"{{"type":"message","id":"e8","parentId":"e7","timestamp":"2026-01-01T00:00:08.000Z","message":{{"role":"user","content":"{}"}}}}"#,
            "long ".repeat(SUMMARY_CHARS)
        ),
        deep,
        r###"{"type":"compaction","id":"e10","parentId":"e9","timestamp":"2026-01-01T00:00:10.000Z","summary":"## Goal\nx","firstKeptEntryId":"e8","tokensBefore":5}"###.to_owned(),
        r#"{"type":"label","id":"e11","parentId":"e10","timestamp":"2026-01-01T00:00:11.000Z","targetId":"e1","label":"here"}"#.to_owned(),
        r#"{"type":"message","id":"e12","parentId":"e11","timestamp":"2026-01-01T00:00:12.000Z","message":{"role":"assistant","content":[{"type":"text","text":"  "},{"type":"toolCall","name":"read","arguments":null}],"stopReason":"toolUse"}}"#.to_owned(),
        r#"{"type":"message","id":"e13","parentId":"missing","timestamp":"2026-01-01T00:00:13.000Z","message":{"role":"bashExecution","command":"ls\n-la","output":"\u001b[1mx"}}"#.to_owned(),
        format!(
            r#"{{"type":"message","id":"{}","parentId":"e13","message":{{"role":"user","content":"a long id"}}}}"#,
            "i".repeat(5000)
        ),
    ];
    lines.join("\n") + "\n"
}

/// Checks every node's stored row against its line; returns (nodes, rows with facts).
fn check_session(snap: &Snapshot, s: SessionKey, what: &str) -> (usize, usize) {
    let outline = snap.outline(s).unwrap();
    let mut nodes = 0;
    let mut with_facts = 0;
    let mut i = 0;
    for e in snap.rows(s).unwrap() {
        let Some(rec) = snap.entry(e).unwrap() else {
            panic!("{what}: row {e} missing");
        };
        let Some(id) = rec.id.clone() else { continue };
        nodes += 1;
        let row: OutlineRow<'_> = outline.row(i);
        i += 1;
        assert_eq!(row.key, e, "{what}: node {i} is not in file order");
        assert_eq!(row.id, id, "{what}: id of {e}");
        assert_eq!(
            row.timestamp.text().as_deref(),
            rec.timestamp.as_deref(),
            "{what}: time of {id}"
        );
        if let Timestamp::Ms(ms) = row.timestamp {
            assert_eq!(
                pisess_engine::outline::format_iso(ms),
                rec.timestamp.clone().unwrap()
            );
        }
        let json = snap
            .with_entry(e, |a| a.json_text().map(|t| t.into_owned()))
            .unwrap()
            .flatten()
            .unwrap();
        let parsed: Result<Value, _> = pisess_formats::value::parse_owned(&json);
        match (&parsed, row.parent_id) {
            (Ok(v), ParentId::Missing) => assert!(v.get("parentId").is_none(), "{what}: {id}"),
            (Ok(v), ParentId::Null) => assert_eq!(v["parentId"], Value::Null, "{what}: {id}"),
            (_, ParentId::Id(p)) => assert_eq!(Some(p), rec.parent_id.as_deref(), "{what}: {id}"),
            (Err(_), _) => {}
        }
        let Some(f) = row.facts else {
            continue;
        };
        with_facts += 1;
        let v = parsed.unwrap_or_else(|e| panic!("{what}: {id} has facts but no value: {e}"));
        let want = Facts::from_value(&v);
        assert_eq!(
            f.entry_type,
            want.entry_type.as_deref(),
            "{what}: type of {id}"
        );
        assert_eq!(f.role, want.role.as_deref(), "{what}: role of {id}");
        assert_eq!(f.model, want.model.as_deref(), "{what}: model of {id}");
        assert_eq!(f.tokens, want.tokens, "{what}: tokens of {id}");
        assert_eq!(
            f.boundary,
            want.boundary.as_deref(),
            "{what}: boundary of {id}"
        );
        assert_eq!(f.tool_only, want.tool_only, "{what}: tool_only of {id}");
        if f.summary_complete {
            assert_eq!(f.summary, want.summary, "{what}: summary of {id}");
        } else {
            assert_eq!(f.summary.chars().count(), SUMMARY_CHARS, "{what}: {id}");
            assert!(
                want.summary.starts_with(f.summary),
                "{what}: summary of {id}"
            );
            assert!(want.summary.chars().count() > SUMMARY_CHARS, "{what}: {id}");
        }
    }
    assert_eq!(i, outline.len(), "{what}: the outline has rows of no node");
    (nodes, with_facts)
}

#[test]
fn stored_facts_equal_the_lines_for_every_node_of_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let crafted_path = dir.path().join("crafted.jsonl");
    std::fs::write(&crafted_path, crafted()).unwrap();
    let mut files = all_files();
    files.push(crafted_path.clone());
    let mut store = Store::open(dir.path().join("store.redb")).unwrap();
    let (mut nodes, mut with_facts) = (0, 0);
    for f in &files {
        let r = store.import_file(f).unwrap();
        let Some(s) = r.session else { continue };
        let snap = store.snapshot().unwrap();
        let (n, w) = check_session(&snap, s, &f.display().to_string());
        nodes += n;
        with_facts += w;
        if f == &crafted_path {
            // The line the value parse refuses (`1e999`) and the long id have no facts; the
            // rest do, the lone surrogate's (`e5`, read as U+FFFD) and the one nested 150
            // levels deep (`e9`, beyond serde_json's own limit) included.
            assert_eq!((n, w), (14, 12), "crafted");
        }
    }
    assert!(nodes > 90_000, "{nodes} nodes");
    // Only the crafted and bad files hold lines whose facts cannot be stored.
    assert!(
        nodes - with_facts < 10,
        "{} of {nodes} without facts",
        nodes - with_facts
    );
    let report = store.verify().unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn the_typed_view_answers_for_every_corpus_message_and_agrees_with_the_value() {
    let corpus = common::corpus();
    let mut files = common::jsonl_files(&corpus);
    files.extend(common::realdata());
    let (mut typed, mut messages) = (0usize, 0usize);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in text.lines() {
            let Ok(e) = Entry::parse(line) else { continue };
            if e.id().is_none() {
                continue;
            }
            let common_role = e.message.get().and_then(|m| m.role.get()).is_some_and(|r| {
                matches!(
                    r.as_str(),
                    "user" | "assistant" | "toolResult" | "bashExecution"
                )
            });
            if common_role && e.type_name.get().is_some_and(|t| t.as_str() == "message") {
                messages += 1;
            }
            if let Some(t) = Facts::from_entry(&e, line) {
                typed += 1;
                let v: Value = serde_json::from_str(line).unwrap();
                assert_eq!(t, Facts::from_value(&v), "{}: {line:.200}", f.display());
            }
        }
    }
    assert!(messages > 90_000, "{messages}");
    assert_eq!(
        typed, messages,
        "the typed view declined some corpus messages"
    );
}

#[test]
fn an_import_in_appends_writes_the_blocks_of_one_import() {
    let dir = tempfile::tempdir().unwrap();
    let name = "09-med-3000-manybranch.jsonl";
    let bytes = std::fs::read(common::corpus().join(name)).unwrap();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    assert!(lines.len() > 3000);
    let grown = dir.path().join("grown.jsonl");
    let appended = Store::open(dir.path().join("a.redb")).unwrap();
    let mut f = std::fs::File::create(&grown).unwrap();
    let mut at = 0;
    // Irregular steps, so that appends end inside blocks and across their boundaries.
    for step in [1usize, 5, 700, 1, 1023, 1024, 333, 2000].iter().cycle() {
        let end = (at + step).min(lines.len());
        for l in &lines[at..end] {
            f.write_all(l).unwrap();
        }
        f.flush().unwrap();
        at = end;
        let r = appended.import_file(&grown).unwrap();
        assert!(
            matches!(r.outcome, Outcome::New | Outcome::Grown),
            "{:?} at line {at}",
            r.outcome
        );
        if at == lines.len() {
            break;
        }
    }
    let whole = Store::open(dir.path().join("b.redb")).unwrap();
    whole.import_file(&grown).unwrap();
    let (sa, sb) = (appended.snapshot().unwrap(), whole.snapshot().unwrap());
    let ka = sa.session_by_path(&grown).unwrap().unwrap();
    let kb = sb.session_by_path(&grown).unwrap().unwrap();
    let (oa, ob) = (sa.outline(ka).unwrap(), sb.outline(kb).unwrap());
    assert_eq!(oa.len(), ob.len());
    assert!(
        oa.len() > 2 * pisess_engine::outline::BLOCK_ROWS,
        "{}",
        oa.len()
    );
    for i in 0..oa.len() {
        let (a, b) = (oa.row(i), ob.row(i));
        assert_eq!(a.key.0 - oa.key(0).0, b.key.0 - ob.key(0).0, "node {i}");
        assert_eq!(
            format!("{:?}", (a.id, a.timestamp, a.parent_id)),
            format!("{:?}", (b.id, b.timestamp, b.parent_id))
        );
        assert_eq!(
            format!("{:?}", a.facts),
            format!("{:?}", b.facts),
            "node {i}"
        );
    }
    let (_, n) = check_session(&sa, ka, "appended");
    assert_eq!(n, oa.len());
    drop((sa, sb));
    let mut appended = appended;
    let report = appended.verify().unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}

#[test]
fn the_tree_and_the_path_runs_agree_with_the_links() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("s.redb")).unwrap();
    let path: &Path = &common::corpus().join("09-med-3000-manybranch.jsonl");
    let s = store.import_file(path).unwrap().session.unwrap();
    let snap = store.snapshot().unwrap();
    let tree = snap.session_tree(s).unwrap();
    let roots: Vec<_> = tree.roots.iter().map(|&i| tree.key(i)).collect();
    assert_eq!(roots, snap.roots(s).unwrap());
    for i in 0..tree.len() {
        let k = tree.key(i);
        let kids: Vec<_> = tree.children(i).map(|c| tree.key(c)).collect();
        assert_eq!(kids, snap.children(k).unwrap(), "children of {k}");
        assert_eq!(tree.parent(i).map(|p| tree.key(p)), snap.parent(k).unwrap());
    }
    let leaf = snap.leaf(s).unwrap().unwrap();
    let runs = snap.path_runs(leaf).unwrap();
    let mut walked = Vec::new();
    for (start, end) in &runs {
        walked.extend((start.0..=end.0).rev().map(pisess_engine::EntryKey));
    }
    let mut want = snap.path_to_root(leaf).unwrap();
    want.reverse();
    assert_eq!(walked, want);
    let on = tree.marks(&runs);
    for (i, on) in on.iter().enumerate() {
        assert_eq!(*on, want.contains(&tree.key(i)));
    }
}

/// `outline_block` without the cold frame reads a block only up to the end of its hot frame;
/// what it decodes must be what decoding the whole stored block gives, and a block cut inside
/// its hot frame must be an error, not a shorter block.
#[test]
fn a_block_read_up_to_its_hot_frame_decodes_as_the_whole_block() {
    use pisess_engine::outline::{OUTLINE, OutlineBlock};
    use redb::{ReadableDatabase, ReadableTable};
    let dir = tempfile::tempdir().unwrap();
    let src = common::corpus().join("15-large-50000.jsonl");
    let path = dir.path().join("o.redb");
    let store = Store::open(&path).unwrap();
    store.import_file(&src).unwrap();
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&src).unwrap().unwrap();
    let firsts = snap.outline_firsts(s).unwrap();
    assert!(firsts.len() > 10, "{}", firsts.len());
    let mut multi_part = 0;
    for &f in &firsts {
        let bytes = snap.outline_bytes(s, f).unwrap();
        if bytes.len() > pisess_engine::outline::FIRST_PART_BYTES {
            multi_part += 1;
        }
        for cold in [false, true] {
            let whole = OutlineBlock::decode_stored(s, f, &bytes, cold).unwrap();
            let read = snap.outline_block(s, f, cold).unwrap();
            assert_eq!(read.len(), whole.len(), "block {f}");
            for i in 0..whole.len() {
                assert_eq!(
                    format!("{:?}", read.row(i)),
                    format!("{:?}", whole.row(i)),
                    "block {f}, row {i}, cold {cold}"
                );
            }
        }
    }
    assert!(
        multi_part > 0,
        "no block spans parts: the test shows nothing"
    );
    drop(snap);
    drop(store);

    // Cut the second part of a block that has more than two (its hot frame goes on after it).
    let db = redb::Database::open(&path).unwrap();
    let (first, parts) = {
        let r = db.begin_read().unwrap();
        let t = r.open_table(OUTLINE).unwrap();
        let mut best = (0u64, 0u32);
        for row in t.iter().unwrap() {
            let (k, _) = row.unwrap();
            let (_, f, part) = k.value();
            if part + 1 > best.1 {
                best = (f, part + 1);
            }
        }
        best
    };
    assert!(parts > 2, "{parts}");
    let w = db.begin_write().unwrap();
    {
        let mut t = w.open_table(OUTLINE).unwrap();
        let key = (s.0, first, 1u32);
        let cut = t.get(key).unwrap().unwrap().value()[..100].to_vec();
        t.insert(key, cut.as_slice()).unwrap();
    }
    w.commit().unwrap();
    drop(db);
    let store = Store::open(&path).unwrap();
    let snap = store.snapshot().unwrap();
    let err = snap.outline_block(s, first, false).unwrap_err().to_string();
    // The error names the table and the block; the damage did not spread: every other block
    // still reads as before.
    let want = format!(
        "{}: block ({s}, {first}) cannot be read",
        pisess_engine::outline::OUTLINE_NAME
    );
    assert!(err.contains(&want), "{err}");
    for &f in firsts.iter().filter(|&&f| f != first) {
        snap.outline_block(s, f, false).unwrap();
    }
}

/// An import read in small chunks (each prepared apart, the open row and outline blocks carried
/// from one to the next, the keys counted ahead of the writer) stores the same outline blocks,
/// byte for byte, and the same file as an import in the default chunks.
#[test]
fn small_chunks_store_the_same_outline_blocks_as_large_ones() {
    use pisess_engine::ImportOptions;
    let dir = tempfile::tempdir().unwrap();
    let src = common::corpus().join("12-large-5000.jsonl");
    let import = |name: &str, chunk_size: usize| {
        let store = Store::open(dir.path().join(name)).unwrap();
        let opts = ImportOptions {
            chunk_size,
            ..Default::default()
        };
        let report = store
            .import(std::slice::from_ref(&src), &opts, &mut |_| {})
            .unwrap();
        assert_eq!(report.count(Outcome::New), 1);
        store
    };
    let small = import("small.redb", 4096);
    let large = import("large.redb", ImportOptions::default().chunk_size);
    let (sa, sb) = (small.snapshot().unwrap(), large.snapshot().unwrap());
    let ka = sa.session_by_path(&src).unwrap().unwrap();
    let kb = sb.session_by_path(&src).unwrap().unwrap();
    let firsts = sa.outline_firsts(ka).unwrap();
    assert_eq!(firsts, sb.outline_firsts(kb).unwrap());
    assert!(firsts.len() > 2, "{}", firsts.len());
    for &f in &firsts {
        assert_eq!(
            sa.outline_bytes(ka, f).unwrap(),
            sb.outline_bytes(kb, f).unwrap(),
            "block {f}"
        );
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    sa.export_session(ka, &mut a).unwrap();
    sb.export_session(kb, &mut b).unwrap();
    assert!(a == b && a == std::fs::read(&src).unwrap());
    check_session(&sa, ka, "small chunks");
}
