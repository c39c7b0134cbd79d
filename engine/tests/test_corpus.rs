//! Every corpus, edge-case and genuine file: import, export byte-identical, every entry
//! reachable by id, and tree answers equal to a naive in-memory reading of the file.

use std::path::{Path, PathBuf};

use pisess_engine::{EntryKey, Outcome, Snapshot, Store};

use crate::common;
use crate::naive::{Naive, Rng};

fn all_files() -> Vec<PathBuf> {
    let corpus = common::corpus();
    let mut files = common::jsonl_files(&corpus);
    files.extend(common::jsonl_files(&corpus.join("edge")));
    files.extend(common::realdata());
    files
}

fn ids_of(snap: &Snapshot, keys: &[EntryKey]) -> Vec<String> {
    keys.iter()
        .map(|k| snap.entry_id(*k).unwrap().unwrap())
        .collect()
}

fn check_file(snap: &Snapshot, path: &Path, naive: &Naive, rng: &mut Rng) -> usize {
    let s = snap
        .session_by_path(path)
        .unwrap()
        .unwrap_or_else(|| panic!("{} was not imported", path.display()));
    let rec = snap.session(s).unwrap().unwrap();
    let mut out = Vec::new();
    snap.export_session(s, &mut out).unwrap();
    assert!(
        out == std::fs::read(path).unwrap(),
        "{}: export differs from the source",
        path.display()
    );
    assert_eq!(rec.entries, naive.records, "{}", path.display());
    // Every entry is reachable by id, and the id resolves to the same line as in pi's index.
    for (id, &i) in &naive.by_id {
        let e = snap
            .entry_by_id(s, id)
            .unwrap()
            .unwrap_or_else(|| panic!("{}: id {id} not found", path.display()));
        let row = snap.entry(e).unwrap().unwrap();
        assert_eq!(row.line, naive.nodes[i].line, "{}: {id}", path.display());
        assert!(snap.link(e).unwrap().is_some());
    }
    if naive.nodes.is_empty() {
        return 0;
    }
    let ids: Vec<&String> = naive.by_id.keys().collect();
    let mut ids = ids;
    ids.sort();
    let samples = ids.len().min(120);
    // Children of each node index, in file order (pi's id index decides the parent).
    let mut kids: std::collections::HashMap<usize, Vec<String>> = Default::default();
    for n in &naive.nodes {
        if let Some(&p) = n.parent.as_ref().and_then(|p| naive.by_id.get(p)) {
            kids.entry(p).or_default().push(n.id.clone());
        }
    }
    for _ in 0..samples {
        let id = ids[rng.below(ids.len())];
        let e = snap.entry_by_id(s, id).unwrap().unwrap();
        let Some(want) = naive.path(id) else {
            // A cycle: the store cut it, so the path must still be finite and end at `e`.
            let p = snap.path_to_root(e).unwrap();
            assert_eq!(p.last(), Some(&e));
            continue;
        };
        let got = snap.path_to_root(e).unwrap();
        assert_eq!(ids_of(snap, &got), want, "{}: path of {id}", path.display());
        assert_eq!(snap.depth(e).unwrap(), Some(want.len() as u32 - 1));
        let k = rng.below(want.len());
        assert_eq!(
            snap.ancestor(e, k as u32).unwrap(),
            Some(got[got.len() - 1 - k]),
            "{}: ancestor {k} of {id}",
            path.display()
        );
        assert_eq!(snap.ancestor(e, want.len() as u32).unwrap(), None);
        if rec.cycle_cuts == 0 {
            let i = naive.by_id[id.as_str()];
            let want_children = kids.get(&i).cloned().unwrap_or_default();
            let got_children = ids_of(snap, &snap.children(e).unwrap());
            assert_eq!(
                got_children,
                want_children,
                "{}: children of {id}",
                path.display()
            );
        }
        let other = ids[rng.below(ids.len())];
        if let Some(want_lca) = naive.lca(id, other) {
            let f = snap.entry_by_id(s, other).unwrap().unwrap();
            let got_lca = snap
                .lca(e, f)
                .unwrap()
                .map(|k| snap.entry_id(k).unwrap().unwrap());
            assert_eq!(got_lca, want_lca, "{}: lca({id}, {other})", path.display());
        }
    }
    // The leaf is the last record when it has an id.
    if let Some(leaf) = snap.leaf(s).unwrap() {
        let row = snap.entry(leaf).unwrap().unwrap();
        assert_eq!(row.line, naive.nodes.last().unwrap().line);
    }
    samples
}

#[test]
fn every_file_imports_exports_identically_and_answers_like_a_naive_reading() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let files = all_files();
    assert!(files.len() > 40, "only {} files", files.len());
    let report = store
        .import(&files, &Default::default(), &mut |_| {})
        .unwrap();
    let snap = store.snapshot().unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut imported, mut sampled) = (0, 0);
    for (path, r) in files.iter().zip(&report.files) {
        let naive = Naive::read(path);
        if naive.rejected {
            assert_eq!(r.outcome, Outcome::Failed, "{}", path.display());
            assert!(r.error.is_some());
            continue;
        }
        if naive.version < 3.0 {
            // Migrated on import: checked in `test_migrate_import`.
            assert_eq!(r.outcome, Outcome::New, "{}: {:?}", path.display(), r.error);
            continue;
        }
        assert_eq!(r.outcome, Outcome::New, "{}: {:?}", path.display(), r.error);
        sampled += check_file(&snap, path, &naive, &mut rng);
        imported += 1;
    }
    assert!(imported >= 35, "only {imported} v3 files imported");
    assert!(sampled > 1500, "only {sampled} entries sampled");
}

#[test]
fn labels_and_names_resolve_as_pi() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let file = dir.path().join("s.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"sess-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hello there","timestamp":1767225601000}}"#,
        r#"{"type":"label","id":"l1","parentId":"a","timestamp":"2026-01-01T00:00:02.000Z","targetId":"a","label":"first"}"#,
        r#"{"type":"session_info","id":"n1","parentId":"l1","timestamp":"2026-01-01T00:00:03.000Z","name":"  Old  "}"#,
        r#"{"type":"label","id":"l2","parentId":"n1","timestamp":"2026-01-01T00:00:04.000Z","targetId":"l1","label":"x"}"#,
        r#"{"type":"label","id":"l3","parentId":"l2","timestamp":"2026-01-01T00:00:05.000Z","targetId":"a","label":"second"}"#,
        r#"{"type":"label","id":"l4","parentId":"l3","timestamp":"2026-01-01T00:00:06.000Z","targetId":"l1"}"#,
        r#"{"type":"session_info","id":"n2","parentId":"l4","timestamp":"2026-01-01T00:00:07.000Z","name":" New name "}"#,
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    store.import_file(&file).unwrap();
    let snap = store.snapshot().unwrap();
    let s = snap.find_session("sess").unwrap().found().unwrap();
    assert_eq!(
        snap.labels(s).unwrap(),
        [("a".to_owned(), "second".to_owned())]
    );
    assert_eq!(snap.label(s, "l1").unwrap(), None);
    assert_eq!(snap.session_name(s).unwrap().as_deref(), Some("New name"));
    let rec = snap.session(s).unwrap().unwrap();
    assert_eq!(rec.first_message.as_deref(), Some("hello there"));
    assert_eq!(rec.modified_ms, Some(1_767_225_601_000));
    assert_eq!(rec.cwd, "/w");
    let leaf = snap.leaf(s).unwrap().unwrap();
    assert_eq!(snap.entry_id(leaf).unwrap().as_deref(), Some("n2"));
    assert_eq!(snap.depth(leaf).unwrap(), Some(6));
    assert_eq!(
        snap.find_entry(s, "l").unwrap(),
        pisess_engine::Lookup::Ambiguous(
            ["l1", "l2", "l3", "l4"]
                .iter()
                .map(|i| snap.entry_by_id(s, i).unwrap().unwrap())
                .collect()
        )
    );
    assert_eq!(snap.find_entry(s, "n2").unwrap().found(), Some(leaf),);
}
