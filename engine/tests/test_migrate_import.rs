//! v1/v2 files are migrated on import: the source is never touched, the stored rows are the
//! migrated lines, export gives exactly `pisess_migrate::migrate_file`'s output, and every id of
//! the migrated file resolves to its line.

use std::path::PathBuf;

use pisess_engine::{Outcome, Store};

use crate::common;
use crate::naive::Naive;

/// Every file the tests know, v3 or not.
pub fn every_file() -> Vec<PathBuf> {
    let corpus = common::corpus();
    let mut files = common::jsonl_files(&corpus);
    files.extend(common::jsonl_files(&corpus.join("edge")));
    files.extend(common::realdata());
    files.extend(common::jsonl_files(
        &common::root().join("fixtures/sessions"),
    ));
    files.extend(common::jsonl_files(&common::root().join("fixtures/edge")));
    files
}

#[test]
fn old_files_import_migrated_and_export_as_migrate_file_writes_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let old: Vec<PathBuf> = every_file()
        .into_iter()
        .filter(|p| {
            let n = Naive::read(p);
            !n.rejected && (n.version.is_nan() || n.version < 3.0)
        })
        .collect();
    assert!(old.len() >= 4, "only {} v1/v2 files", old.len());
    let before: Vec<Vec<u8>> = old.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let report = store
        .import(&old, &Default::default(), &mut |_| {})
        .unwrap();
    for (r, (p, bytes)) in report.files.iter().zip(old.iter().zip(&before)) {
        assert_eq!(r.outcome, Outcome::New, "{}: {:?}", p.display(), r.error);
        assert_eq!(
            &std::fs::read(p).unwrap(),
            bytes,
            "{} was changed",
            p.display()
        );
    }
    let snap = store.snapshot().unwrap();
    for p in &old {
        let mut want = Vec::new();
        pisess_migrate::migrate_file(p, &mut want).unwrap();
        let s = snap.session_by_path(p).unwrap().unwrap();
        let mut got = Vec::new();
        snap.export_session(s, &mut got).unwrap();
        assert!(
            got == want,
            "{}: export differs from migrate_file",
            p.display()
        );
        let rec = snap.session(s).unwrap().unwrap();
        assert!(rec.version < 3.0, "{}: source version kept", p.display());
        // Every id of the migrated file resolves to its line (a later duplicate wins).
        let text = String::from_utf8(want).unwrap();
        let mut last = std::collections::HashMap::new();
        for line in text.lines().skip(1) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(id) = v.get("id").and_then(|i| i.as_str()) {
                last.insert(id.to_owned(), line.to_owned());
            }
        }
        assert!(!last.is_empty() || text.lines().count() <= 1);
        for (id, line) in &last {
            let e = snap
                .entry_by_id(s, id)
                .unwrap()
                .unwrap_or_else(|| panic!("{}: id {id} not found", p.display()));
            let json = snap
                .with_entry(e, |a| a.json_text().map(std::borrow::Cow::into_owned))
                .unwrap()
                .flatten();
            assert_eq!(
                json.as_deref(),
                Some(line.as_str()),
                "{}: {id}",
                p.display()
            );
            assert!(snap.link(e).unwrap().is_some());
        }
    }
    drop(snap);
    // Importing again: unchanged (the source's stat is what is compared).
    let again = store
        .import(&old, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(again.count(Outcome::Unchanged), old.len());
}

#[test]
fn a_grown_v1_file_is_read_again_in_full() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let src = common::root().join("fixtures/sessions/07-v1.jsonl");
    let file = dir.path().join("v1.jsonl");
    let bytes = std::fs::read(&src).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let half = lines.len() / 2;
    std::fs::write(&file, lines[..half].join("\n") + "\n").unwrap();
    assert_eq!(store.import_file(&file).unwrap().outcome, Outcome::New);
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::Rewritten, "{:?}", r.error);
    let mut want = Vec::new();
    pisess_migrate::migrate_file(&file, &mut want).unwrap();
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&file).unwrap().unwrap();
    let mut got = Vec::new();
    snap.export_session(s, &mut got).unwrap();
    assert!(got == want);
}
