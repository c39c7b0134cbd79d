//! Tree queries on generated trees: deep chains, random trees, cycles, forward references.

use std::fmt::Write as _;

use pisess_engine::{EntryKey, Snapshot, Store};

use crate::naive::{Naive, Rng};

fn session_file(
    dir: &std::path::Path,
    name: &str,
    entries: &[(String, Option<String>)],
) -> std::path::PathBuf {
    let mut s = String::from(
        r#"{"type":"session","version":3,"id":"S","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    s.push('\n');
    for (id, p) in entries {
        let p = p.as_ref().map_or("null".to_owned(), |p| format!("\"{p}\""));
        writeln!(
            s,
            r#"{{"type":"custom","customType":"t","id":"{id}","parentId":{p},"timestamp":"2026-01-01T00:00:01.000Z"}}"#
        )
        .unwrap();
    }
    let path = dir.join(name);
    std::fs::write(&path, s).unwrap();
    path
}

fn key(snap: &Snapshot, s: pisess_engine::SessionKey, id: &str) -> EntryKey {
    snap.entry_by_id(s, id).unwrap().unwrap()
}

#[test]
fn random_trees_match_the_naive_lca_and_ancestors() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let mut rng = Rng(42);
    let mut entries = Vec::new();
    for i in 0..3000usize {
        // Mostly extend a recent node (long chains), sometimes branch far back or start a root.
        let parent = match rng.below(20) {
            0 => None,
            1..=3 if i > 0 => Some(rng.below(i)),
            _ if i > 0 => Some(i - 1 - rng.below(i.min(3))),
            _ => None,
        };
        entries.push((format!("n{i}"), parent.map(|p| format!("n{p}"))));
    }
    let path = session_file(dir.path(), "t.jsonl", &entries);
    store.import_file(&path).unwrap();
    let naive = Naive::read(&path);
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&path).unwrap().unwrap();
    for _ in 0..1500 {
        let a = format!("n{}", rng.below(3000));
        let b = format!("n{}", rng.below(3000));
        let got = snap
            .lca(key(&snap, s, &a), key(&snap, s, &b))
            .unwrap()
            .map(|k| snap.entry_id(k).unwrap().unwrap());
        assert_eq!(got, naive.lca(&a, &b).unwrap(), "lca({a}, {b})");
        let p = naive.path(&a).unwrap();
        let k = rng.below(p.len() + 1);
        let got = snap
            .ancestor(key(&snap, s, &a), k as u32)
            .unwrap()
            .map(|k| snap.entry_id(k).unwrap().unwrap());
        assert_eq!(got, p.len().checked_sub(k + 1).map(|i| p[i].clone()));
    }
}

#[test]
fn deep_chain_queries_take_few_steps() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let n = 100_000usize;
    let mut entries: Vec<(String, Option<String>)> = (0..n)
        .map(|i| (format!("c{i}"), i.checked_sub(1).map(|p| format!("c{p}"))))
        .collect();
    // A side branch near the bottom.
    entries.push(("side".into(), Some("c50000".into())));
    let path = session_file(dir.path(), "chain.jsonl", &entries);
    store.import_file(&path).unwrap();
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&path).unwrap().unwrap();
    let bottom = key(&snap, s, &format!("c{}", n - 1));
    assert_eq!(snap.depth(bottom).unwrap(), Some(n as u32 - 1));
    assert_eq!(
        snap.ancestor(bottom, 12_345).unwrap(),
        Some(key(&snap, s, &format!("c{}", n - 1 - 12_345)))
    );
    assert_eq!(
        snap.lca(bottom, key(&snap, s, "side")).unwrap(),
        Some(key(&snap, s, "c50000"))
    );
    assert_eq!(snap.path_to_root(bottom).unwrap().len(), n);
    assert!(snap.is_ancestor(key(&snap, s, "c7"), bottom).unwrap());
    assert!(!snap.is_ancestor(key(&snap, s, "side"), bottom).unwrap());
}

#[test]
fn cycles_duplicates_and_forward_references() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let e = |id: &str, p: Option<&str>| (id.to_owned(), p.map(str::to_owned));
    let entries = [
        e("fwd", Some("late")), // parent defined later in the file
        e("x", Some("y")),      // x -> y -> x: a cycle
        e("y", Some("x")),
        e("self", Some("self")),
        e("dup", None),
        e("late", None),
        e("kid", Some("dup")),
        e("dup", Some("late")), // later duplicate wins for "kid"
        e("orphan", Some("nowhere")),
    ];
    let path = session_file(dir.path(), "odd.jsonl", &entries);
    store.import_file(&path).unwrap();
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&path).unwrap().unwrap();
    let id = |k: EntryKey| snap.entry_id(k).unwrap().unwrap();
    let path_ids = |n: &str| -> Vec<String> {
        snap.path_to_root(key(&snap, s, n))
            .unwrap()
            .into_iter()
            .map(id)
            .collect()
    };
    assert_eq!(path_ids("fwd"), ["late", "fwd"]);
    assert_eq!(path_ids("kid"), ["late", "dup", "kid"]);
    assert_eq!(path_ids("orphan"), ["orphan"]);
    assert_eq!(path_ids("self"), ["self"]);
    assert_eq!(path_ids("x").len() + path_ids("y").len(), 3);
    let rec = snap.session(s).unwrap().unwrap();
    assert_eq!(rec.cycle_cuts, 2);
    assert_eq!(rec.dangling, ["nowhere"]);
}
