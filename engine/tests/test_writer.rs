//! The session writer: a session built only through it loads in the reference library with
//! the context pisess computes; torn tails are repaired; a failed write leaves the file and
//! the store as they were.

use std::path::Path;

use pisess_engine::Store;
use pisess_engine::agent::report::context_report;
use pisess_engine::agent::writer::{SessionWriter, WriteError};
use pisess_engine::agent::{CompactionSettings, prepare_compaction};
use serde_json::{Value, json};

use crate::common::root;

fn oracle(args: &[&str]) -> Value {
    let bin = root().join("../shared/oracle/oracle");
    let out = std::process::Command::new(&bin)
        .args(args)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Messages taken from a generated fixture (so their shapes are pi's).
fn fixture_messages() -> Vec<Value> {
    let text = std::fs::read_to_string(root().join("fixtures/sessions/01-tiny.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter_map(|v| v.get("message").cloned())
        .collect()
}

fn by_role(ms: &[Value], role: &str, n: usize) -> Value {
    ms.iter()
        .filter(|m| m["role"] == role)
        .nth(n)
        .unwrap()
        .clone()
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_784_970_005_174_i64})
}

/// The store's copy of the session equals the file, byte for byte.
fn assert_store_matches_file(store: &Store, w: &SessionWriter<'_>) {
    let snap = store.snapshot().unwrap();
    let mut out = Vec::new();
    snap.export_session(w.session_key().unwrap(), &mut out)
        .unwrap();
    assert_eq!(
        out,
        std::fs::read(w.file()).unwrap(),
        "store and file differ"
    );
}

/// pisess's context at `leaf` (through the writer's path) against `oracle context`.
fn assert_context_matches_oracle(w: &SessionWriter<'_>, leaf: &str) {
    let path = w.branch_entries(Some(leaf)).unwrap();
    let refs: Vec<&Value> = path.iter().collect();
    let ours = context_report(Some(leaf), &refs, false);
    let theirs = oracle(&["context", w.file().to_str().unwrap(), "--leaf", leaf]);
    for k in ["messages", "thinkingLevel", "model", "contextEntryIds"] {
        assert_eq!(ours.get(k), theirs.get(k), "context at {leaf}: {k}");
    }
}

fn unchanged_after<'s, T: std::fmt::Debug>(
    store: &Store,
    w: &mut SessionWriter<'s>,
    f: impl FnOnce(&mut SessionWriter<'s>) -> Result<T, WriteError>,
) -> WriteError {
    let before = std::fs::read(w.file()).unwrap();
    let leaf = w.leaf_id().map(str::to_owned);
    let err = f(w).expect_err("the write should fail");
    assert_eq!(
        w.leaf_id().map(str::to_owned),
        leaf,
        "the leaf moved: {err}"
    );
    assert_eq!(
        std::fs::read(w.file()).unwrap(),
        before,
        "file changed: {err}"
    );
    assert_store_matches_file(store, w);
    err
}

#[test]
fn a_session_written_by_pisess_loads_in_pi_with_the_same_context() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("store.redb")).unwrap();
    let dir = tmp.path().join("sessions");
    let ms = fixture_messages();
    let mut w =
        SessionWriter::create(&store, &dir, "/home/dev/projects/acme-api", None, None).unwrap();
    // Setup entries stay in memory until the first user message, as in pi.
    w.append_model_change("anthropic", "claude-sonnet-4-5")
        .unwrap();
    w.append_thinking_level_change("high").unwrap();
    w.append_message(by_role(&ms, "system", 0)).unwrap();
    assert!(!w.file().exists() && !w.is_flushed());
    let u1 = w.append_message(by_role(&ms, "user", 0)).unwrap();
    assert!(w.file().exists() && w.is_flushed());
    let name = w.file().file_name().unwrap().to_str().unwrap().to_owned();
    assert!(
        name.ends_with(".jsonl") && name.len() == 24 + 1 + 36 + 6,
        "{name}"
    );
    let a1 = w.append_message(by_role(&ms, "assistant", 0)).unwrap();
    let u2 = w.append_message(by_role(&ms, "user", 1)).unwrap();
    let a2 = w.append_message(by_role(&ms, "assistant", 1)).unwrap();
    let t2 = w.append_message(by_role(&ms, "toolResult", 0)).unwrap();
    let a3 = w.append_message(by_role(&ms, "assistant", 2)).unwrap();
    w.append_custom_entry("pisess.test", Some(json!({"k": [1, 2]})))
        .unwrap();
    let cm = w
        .append_custom_message("pisess.note", json!("remember the cache"), true, None)
        .unwrap();
    w.append_usage(
        "cache_warm",
        "anthropic",
        "claude-sonnet-4-5",
        json!({"input": 1, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1,
               "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}),
        None,
    )
    .unwrap();
    w.append_session_info("  first\r\n\r\nsession ").unwrap();
    w.append_label_change(&u2, Some("the-question")).unwrap();
    let e1 = w
        .append_context_edit(&a1, json!({"content": "shortened answer"}))
        .unwrap();
    w.append_context_edit(&t2, Value::Null).unwrap();
    w.append_context_edit(
        &cm,
        json!({"content": [{"type": "text", "text": "edited note"}]}),
    )
    .unwrap();
    // The string replacement of an assistant message became one text block, as in pi.
    let edit = w.entry(&e1).unwrap().unwrap();
    assert_eq!(
        edit["replacement"],
        json!({"content": [{"type": "text", "text": "shortened answer"}]})
    );
    // pi's validation: each refusal writes nothing.
    let model_change = w.branch_entries(Some(&u1)).unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let err = unchanged_after(&store, &mut w, |w| {
        w.append_context_edit(&model_change, Value::Null)
    });
    assert!(matches!(err, WriteError::NotEditable(_)), "{err}");
    let err = unchanged_after(&store, &mut w, |w| {
        w.append_context_edit("nope", Value::Null)
    });
    assert!(matches!(err, WriteError::NotFound(_)), "{err}");
    let err = unchanged_after(&store, &mut w, |w| {
        w.append_context_edit(&a2, json!({"content": 3}))
    });
    assert!(matches!(err, WriteError::BadReplacement), "{err}");
    let err = unchanged_after(&store, &mut w, |w| w.append_label_change("nope", Some("x")));
    assert!(matches!(err, WriteError::NotFound(_)), "{err}");
    let end_of_first_branch = w.leaf_id().unwrap().to_owned();

    // Navigate back to the second question with a branch summary: the new leaf is its parent.
    let bs = w
        .navigate(
            &u2,
            Some((
                "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\nLooked at the cache.",
                Some(json!({"readFiles": [], "modifiedFiles": []})),
            )),
        )
        .unwrap()
        .unwrap();
    let summary = w.entry(&bs).unwrap().unwrap();
    assert_eq!(summary["parentId"], json!(a1));
    assert_eq!(summary["fromId"], json!(end_of_first_branch));
    // An edit of an entry on the branch left behind is refused.
    let err = unchanged_after(&store, &mut w, |w| w.append_context_edit(&a3, Value::Null));
    assert!(matches!(err, WriteError::NotOnBranch(_)), "{err}");
    for i in 0..6 {
        w.append_message(user(&format!("question {i}: {}", "why ".repeat(200))))
            .unwrap();
        let mut a = by_role(&ms, "assistant", 2);
        a["content"][0]["text"] = json!(format!("answer {i}: {}", "because ".repeat(200)));
        w.append_message(a).unwrap();
    }
    // A compaction, prepared as pi prepares it, with the system message in force.
    let leaf = w.leaf_id().unwrap().to_owned();
    let path = w.branch_entries(Some(&leaf)).unwrap();
    let refs: Vec<&Value> = path.iter().collect();
    let settings = CompactionSettings {
        enabled: true,
        reserve_tokens: 2000.0,
        keep_recent_tokens: 700.0,
    };
    let prep = prepare_compaction(&refs, settings).unwrap();
    let (text, details) = prep.stored_summary(Some("## Goal\nAnswer the questions."), None);
    let c = w
        .append_compaction(
            &text,
            Some(&prep.first_kept_entry_id),
            json!(prep.tokens_before),
            Some(details),
            None,
            None,
        )
        .unwrap();
    let compaction = w.entry(&c).unwrap().unwrap();
    assert_eq!(compaction["systemMessage"]["role"], "system");
    let after = w.append_message(user("after the compaction")).unwrap();
    w.append_message(by_role(&ms, "assistant", 2)).unwrap();
    // Navigate without a summary (only the leaf moves), then branch there.
    assert_eq!(w.navigate(&a3, None).unwrap().as_deref(), Some(a3.as_str()));
    w.append_message(user("a second branch")).unwrap();
    // A reopened writer resumes at the file's last entry.
    drop(w);
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(files.len(), 1);
    let file = files[0].as_ref().unwrap().path();
    let mut w = SessionWriter::open(&store, &file).unwrap();
    let last = w.append_message(by_role(&ms, "assistant", 0)).unwrap();
    assert_store_matches_file(&store, &w);

    // The reference library loads the file, with every entry and the same leaf ...
    let load = oracle(&["load", file.to_str().unwrap()]);
    assert!(load.get("error").is_none(), "{load}");
    assert_eq!(load["leafId"], json!(last));
    assert_eq!(load["sessionName"], json!("first session"));
    assert_eq!(load["labels"][&u2], json!("the-question"));
    assert_eq!(load["rewrittenOnLoad"], json!(false));
    let ours: Vec<Value> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(load["entries"], Value::Array(ours));
    // ... and computes the context pisess computes, at the leaf and on the way.
    for at in [&last, &after, &c, &bs, &e1, &end_of_first_branch, &u1] {
        assert_context_matches_oracle(&w, at);
    }
    // After the compaction the model sees the summary and the kept entries.
    let path = w.branch_entries(Some(&after)).unwrap();
    let refs: Vec<&Value> = path.iter().collect();
    let ctx = context_report(Some(&after), &refs, false);
    let msgs = ctx["messages"].as_array().unwrap();
    assert!(msgs.iter().any(|m| m["role"] == "compactionSummary"));
    assert!(
        ctx["contextEntryIds"]
            .as_array()
            .unwrap()
            .contains(&json!(prep.first_kept_entry_id))
    );
}

fn flushed_session(store: &Store, dir: &Path) -> std::path::PathBuf {
    let mut w = SessionWriter::create(store, dir, "/tmp/p", None, None).unwrap();
    w.append_message(user("one")).unwrap();
    w.append_message(user("two")).unwrap();
    w.file().to_path_buf()
}

#[test]
fn a_torn_last_line_is_repaired_before_the_next_append() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("store.redb")).unwrap();
    // 1. A torn fragment at the end is dropped (pi would glue the next entry onto it).
    let file = flushed_session(&store, &tmp.path().join("a"));
    let mut bytes = std::fs::read(&file).unwrap();
    let good = bytes.clone();
    bytes.extend_from_slice(br#"{"type":"message","id":"torn","par"#);
    std::fs::write(&file, &bytes).unwrap();
    let mut w = SessionWriter::open(&store, &file).unwrap();
    let id = w.append_message(user("three")).unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with(std::str::from_utf8(&good).unwrap()));
    assert!(!text.contains("torn"));
    assert_store_matches_file(&store, &w);
    let load = oracle(&["load", file.to_str().unwrap()]);
    assert_eq!(load["entryCount"], json!(3));
    assert_eq!(load["leafId"], json!(id));
    // 2. A complete last record without its newline keeps its record and gets the newline.
    let file = flushed_session(&store, &tmp.path().join("b"));
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.pop();
    std::fs::write(&file, &bytes).unwrap();
    let mut w = SessionWriter::open(&store, &file).unwrap();
    let before_leaf = w.leaf_id().unwrap().to_owned();
    let id = w.append_message(user("three")).unwrap();
    assert_store_matches_file(&store, &w);
    let load = oracle(&["load", file.to_str().unwrap()]);
    assert_eq!(load["entryCount"], json!(3));
    assert_eq!(load["entries"][2]["parentId"], json!(before_leaf));
    assert_eq!(load["leafId"], json!(id));
    // 3. Two glued records and a torn one: the complete ones are kept, one per line.
    let file = flushed_session(&store, &tmp.path().join("c"));
    let mut bytes = std::fs::read(&file).unwrap();
    let leaf =
        serde_json::from_str::<Value>(std::str::from_utf8(&bytes).unwrap().lines().last().unwrap())
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
    let glued = format!(
        r#"{{"type":"custom","customType":"x","id":"g1","parentId":"{leaf}","timestamp":"2026-01-01T00:00:00.000Z"}}{{"type":"custom","customType":"x","id":"g2","parentId":"g1","timestamp":"2026-01-01T00:00:00.000Z"}}{{"type":"mess"#
    );
    bytes.extend_from_slice(glued.as_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let mut w = SessionWriter::open(&store, &file).unwrap();
    assert_eq!(w.leaf_id(), Some("g2"));
    w.append_message(user("three")).unwrap();
    assert_store_matches_file(&store, &w);
    let load = oracle(&["load", file.to_str().unwrap()]);
    assert_eq!(load["entryCount"], json!(5));
    let ids: Vec<&str> = load["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(&ids[2..4], &["g1", "g2"]);
}

#[test]
fn a_failed_import_puts_the_file_back_and_leaves_the_store_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("store.redb")).unwrap();
    let file = flushed_session(&store, &tmp.path().join("a"));
    let mut w = SessionWriter::open(&store, &file).unwrap();
    let leaf = w.leaf_id().unwrap().to_owned();
    let mut exported = Vec::new();
    store
        .snapshot()
        .unwrap()
        .export_session(w.session_key().unwrap(), &mut exported)
        .unwrap();
    // Someone else breaks the header behind the writer's back (same length, so the import
    // has to read the file to see it): the store refuses the file after the append.
    let mut bytes = std::fs::read(&file).unwrap();
    let broken: Vec<u8> = bytes
        .iter()
        .take_while(|&&b| b != b'\n')
        .map(|_| b'x')
        .collect();
    bytes.splice(0..broken.len(), broken);
    // (a torn tail too, so the undo must restore it)
    bytes.extend_from_slice(b"{\"torn");
    std::fs::write(&file, &bytes).unwrap();
    let err = w.append_message(user("three")).unwrap_err();
    assert!(matches!(err, WriteError::Import { .. }), "{err}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "the file was not put back"
    );
    let mut now = Vec::new();
    store
        .snapshot()
        .unwrap()
        .export_session(w.session_key().unwrap(), &mut now)
        .unwrap();
    assert_eq!(now, exported, "the store changed");
    assert_eq!(w.leaf_id(), Some(leaf.as_str()), "the leaf moved");
}

#[test]
fn a_legacy_file_is_not_appended_to() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("store.redb")).unwrap();
    let file = tmp.path().join("v1.jsonl");
    std::fs::copy(root().join("fixtures/sessions/07-v1.jsonl"), &file).unwrap();
    let err = SessionWriter::open(&store, &file).unwrap_err();
    assert!(matches!(err, WriteError::Legacy { .. }), "{err}");
}

#[test]
fn bad_session_ids_and_files_that_are_not_sessions_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("store.redb")).unwrap();
    for bad in ["", "-a", "a/b", "a b"] {
        let err = SessionWriter::create(&store, tmp.path(), "/p", Some(bad), None).unwrap_err();
        assert!(matches!(err, WriteError::BadSessionId(_)), "{bad:?}: {err}");
        assert!(err.to_string().contains("must be non-empty"), "{err}");
    }
    let w = SessionWriter::create(&store, tmp.path(), "/p", Some("my.session-1"), None).unwrap();
    assert!(w.file().to_str().unwrap().ends_with("_my.session-1.jsonl"));
    let file = tmp.path().join("garbage.jsonl");
    std::fs::copy(root().join("fixtures/edge/garbage.jsonl"), &file).unwrap();
    let before = std::fs::read(&file).unwrap();
    let err = SessionWriter::open(&store, &file).unwrap_err();
    assert!(
        matches!(
            err,
            WriteError::Unreadable { .. } | WriteError::NotASession(_)
        ),
        "{err}"
    );
    assert!(err.to_string().contains("garbage.jsonl"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
}
