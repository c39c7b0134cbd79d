//! Import of arbitrary bytes into a fresh store: no panic; a failed file is reported, not
//! fatal; after the import `verify` finds nothing, a second import of the unchanged file
//! changes nothing, and a v3 session exports to the bytes of its file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pisess_engine::Store;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else {
        return;
    };
    let file = dir.path().join("s.jsonl");
    if std::fs::write(&file, data).is_err() {
        return;
    }
    let mut store = Store::open(dir.path().join("store.redb")).expect("open a fresh store");
    let first = store.import_file(&file).expect("import (store errors only)");
    let digest = store.content_digest().expect("digest");
    let _ = store.import_file(&file).expect("re-import (store errors only)");
    assert_eq!(
        digest,
        store.content_digest().expect("digest"),
        "re-importing an unchanged file changed the store ({first:?})"
    );
    let report = store.verify().expect("verify");
    assert!(
        report.findings.is_empty(),
        "verify after import: {:?}",
        report.findings
    );
    if let Some(key) = first.session {
        let mut out = Vec::new();
        let exported = snapshot_export(&store, key, &mut out);
        // A v3 file (one the migrator copies through) exports to its own bytes.
        let v3 = pisess_migrate::migrate_seekable(std::io::Cursor::new(data), std::io::sink())
            .is_ok_and(|o| !o.migrated);
        if exported && v3 {
            assert!(out == data, "export differs from the imported v3 file");
        }
    }
});

fn snapshot_export(store: &Store, key: pisess_engine::SessionKey, out: &mut Vec<u8>) -> bool {
    store
        .snapshot()
        .is_ok_and(|snap| snap.export_session(key, out).is_ok())
}
