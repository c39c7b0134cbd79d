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

/// The links of one file's nodes as pi's index resolves them (a later duplicate id wins; a
/// parent not in the file makes a root), with cycles cut where the store cuts them: following
/// parents from each node in file order, the node whose parent is already on the walk becomes
/// a root. Returns each node's (parent index, depth).
fn naive_links(entries: &[(String, Option<String>)]) -> Vec<(Option<usize>, u32)> {
    let mut by_id = std::collections::HashMap::new();
    for (i, (id, _)) in entries.iter().enumerate() {
        by_id.insert(id.as_str(), i);
    }
    let mut parent: Vec<Option<usize>> = entries
        .iter()
        .map(|(_, p)| p.as_deref().and_then(|p| by_id.get(p).copied()))
        .collect();
    let mut depth: Vec<Option<u32>> = vec![None; entries.len()];
    for start in 0..entries.len() {
        let mut walk = vec![start];
        let mut on_walk = std::collections::HashSet::from([start]);
        loop {
            let top = *walk.last().unwrap();
            match parent[top] {
                Some(p) if depth[p].is_none() && on_walk.contains(&p) => parent[top] = None,
                Some(p) if depth[p].is_none() => {
                    walk.push(p);
                    on_walk.insert(p);
                    continue;
                }
                _ => {}
            }
            break;
        }
        while let Some(n) = walk.pop() {
            if depth[n].is_none() {
                depth[n] = Some(parent[n].map_or(0, |p| depth[p].unwrap() + 1));
            }
        }
    }
    parent
        .into_iter()
        .zip(depth)
        .map(|(p, d)| (p, d.unwrap()))
        .collect()
}

/// Files whose ids repeat and whose parents come later, point at themselves or are missing,
/// read in chunks of 4 KiB, in one chunk, and as a first half then an append: every node's
/// parent and depth equal the naive reading's, `verify` finds nothing (`children` and
/// `run_starts` agree with the links), and the chunked and one-chunk stores hold the same rows.
#[test]
fn odd_trees_read_in_small_chunks_link_as_the_whole_file_does() {
    use pisess_engine::ImportOptions;
    let mut rng = Rng(7);
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        let n = 200 + rng.below(400);
        // Rounds 0-3 repeat no id; later rounds repeat some.
        let pool = if round < 4 { usize::MAX } else { n + n / 8 };
        let mut entries: Vec<(String, Option<String>)> = Vec::new();
        for i in 0..n {
            let id = if pool == usize::MAX || rng.below(10) != 0 {
                format!("n{i}")
            } else {
                format!("n{}", rng.below(pool.min(n)))
            };
            let parent = match rng.below(40) {
                0 => None,
                1 => Some(format!("n{}", i + 1 + rng.below(20))), // later, or missing
                2 => Some(id.clone()),                            // itself
                3 => Some(format!("gone{}", rng.below(5))),       // missing
                4..=6 if i > 0 => Some(format!("n{}", rng.below(i))),
                _ if i > 0 => Some(format!("n{}", i - 1)),
                _ => None,
            };
            entries.push((id, parent));
        }
        let folder = dir.path().join("sessions");
        std::fs::create_dir(&folder).unwrap();
        let path = session_file(&folder, "odd.jsonl", &entries);
        let text = std::fs::read(&path).unwrap();
        let import = |store: &Store, chunk_size: usize| {
            let r = store
                .import(
                    std::slice::from_ref(&folder),
                    &ImportOptions {
                        chunk_size,
                        ..Default::default()
                    },
                    &mut |_| {},
                )
                .unwrap();
            assert!(r.files.iter().all(|f| f.error.is_none()), "{:?}", r.files);
        };
        let mut chunked = Store::open(dir.path().join("chunked.redb")).unwrap();
        import(&chunked, 4096);
        let mut once = Store::open(dir.path().join("once.redb")).unwrap();
        import(&once, 1 << 24);
        // Half the lines, then the rest as an append (a repeated id there is a rewrite).
        let mut grown = Store::open(dir.path().join("grown.redb")).unwrap();
        let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
        std::fs::write(&path, lines[..lines.len() / 2].concat()).unwrap();
        import(&grown, 4096);
        std::fs::write(&path, &text).unwrap();
        import(&grown, 4096);

        let want = naive_links(&entries);
        for store in [&mut chunked, &mut once, &mut grown] {
            let report = store.verify().unwrap();
            assert!(
                report.findings.is_empty(),
                "round {round}: {:?}",
                report.findings
            );
            let snap = store.snapshot().unwrap();
            let s = snap.session_by_path(&path).unwrap().unwrap();
            // Keys follow file order: the last node's key less its index is the first's.
            let (last_id, _) = entries.last().unwrap();
            let last = entries.iter().rposition(|(id, _)| id == last_id).unwrap();
            let base = key(&snap, s, last_id).0 - last as u64;
            for (i, &(p, d)) in want.iter().enumerate() {
                let k = EntryKey(base + i as u64);
                let got = snap.link(k).unwrap().unwrap();
                assert_eq!(
                    (got.parent().map(|p| (p.0 - base) as usize), got.depth),
                    (p, d),
                    "round {round}: node {i} {:?}",
                    entries[i]
                );
            }
        }
        assert_eq!(
            chunked.content_digest().unwrap(),
            once.content_digest().unwrap(),
            "round {round}"
        );
    }
}

/// A prune plan's dropped branches on a random tree (imported in two appends, so its rows are
/// two runs of keys) are the naive grouping: each dropped entry in the branch of its topmost
/// dropped ancestor, branches in file order of their tops, each with the entry it forks from
/// and its entries and bytes.
#[test]
fn prune_branches_match_a_naive_grouping() {
    use std::collections::{HashMap, HashSet};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let mut rng = Rng(7);
    let mut entries = Vec::new();
    for i in 0..4000usize {
        let parent = match rng.below(20) {
            0 => None,
            1..=4 if i > 0 => Some(rng.below(i)),
            _ if i > 0 => Some(i - 1 - rng.below(i.min(3))),
            _ => None,
        };
        entries.push((format!("n{i}"), parent.map(|p| format!("n{p}"))));
    }
    let path = session_file(dir.path(), "t.jsonl", &entries[..2500]);
    store.import_file(&path).unwrap();
    // Another session's rows in between: the append's keys do not continue the first run's.
    let other = session_file(dir.path(), "other.jsonl", &entries[..10]);
    store.import_file(&other).unwrap();
    let whole = session_file(dir.path(), "whole.jsonl", &entries);
    std::fs::copy(&whole, &path).unwrap();
    store.import_file(&path).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let len: HashMap<&str, u64> = text
        .lines()
        .skip(1)
        .zip(&entries)
        .map(|(l, (id, _))| (id.as_str(), l.len() as u64 + 1))
        .collect();
    let parent: HashMap<&str, Option<&str>> = entries
        .iter()
        .map(|(id, p)| (id.as_str(), p.as_deref()))
        .collect();
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&path).unwrap().unwrap();
    assert_eq!(snap.row_runs(s).unwrap().len(), 2);
    for round in 0..4 {
        let targets: Vec<String> = (0..=round)
            .map(|_| format!("n{}", rng.below(4000)))
            .collect();
        let mut kept = HashSet::new();
        for t in &targets {
            let mut cur = Some(t.as_str());
            while let Some(c) = cur {
                kept.insert(c);
                cur = parent[c];
            }
        }
        let mut want: Vec<(String, Option<String>, u64, u64)> = Vec::new();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (id, _) in &entries {
            if kept.contains(id.as_str()) {
                continue;
            }
            let mut top = id.as_str();
            while let Some(p) = parent[top].filter(|p| !kept.contains(p)) {
                top = p;
            }
            let i = *index.entry(top).or_insert_with(|| {
                want.push((top.to_owned(), parent[top].map(str::to_owned), 0, 0));
                want.len() - 1
            });
            want[i].2 += 1;
            want[i].3 += len[id.as_str()];
        }
        let keys: Vec<EntryKey> = targets.iter().map(|t| key(&snap, s, t)).collect();
        let plan = snap.prune_plan(s, &keys).unwrap();
        let got: Vec<(String, Option<String>, u64, u64)> = plan
            .branches
            .iter()
            .map(|b| {
                (
                    snap.entry_id(b.top).unwrap().unwrap(),
                    b.from_id.as_deref().map(str::to_owned),
                    b.entries,
                    b.bytes,
                )
            })
            .collect();
        assert_eq!(got, want, "keeping {targets:?}");
        assert_eq!(plan.kept_entries, kept.len() as u64);
        assert_eq!(plan.dropped_entries, want.iter().map(|b| b.2).sum::<u64>());
    }
}
