//! Micro-benchmarks of the store (issue 7): import, entry by id, k-th ancestor, LCA, file
//! queries, export — each beside a baseline in the same run, since only ratios mean anything on
//! a shared machine.
//!
//! Inputs are generated, never read from the user's store:
//! - a realistic session of `PISESS_BENCH_BYTES` bytes (default 8 MiB) from the Rust generator
//!   (`pisess_benches::generate_file`, seed 1), imported into a store in a temporary folder;
//! - two linear chains, 1,000 entries and `PISESS_BENCH_CHAIN` entries (default 100,000; the
//!   full 1,000,000 of issue 3 is in `benches/store.sh`), each with a sibling of its leaf.
//!
//! Groups:
//! - `import`: a fresh import of the generated session vs the `serde_json::Value` parse of the
//!   same lines (the parse floor), `Throughput::Bytes`;
//! - `lookup`, `ancestor`, `lca`: entry by id, the ancestor halfway up, and the LCA of the leaf
//!   and its sibling, on the short and the long chain (log-depth scaling: the two should be
//!   close);
//! - `files`: an exact-path and a glob query on the generated session's store;
//! - `export`: the session written back as JSONL to a sink vs copying the file's bytes;
//! - `context`: pi's context projection at the leaf of the generated session (path already
//!   parsed): the streaming plan (`LeanContext`) vs the projection over the whole path
//!   (`agent::project::project`), and, as the floor, parsing the session's lines.
//!
//! `cargo bench -p pisess-benches --bench store` (a few minutes).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pisess_benches::measure;
use pisess_engine::{EntryKey, FileFilter, SessionKey, Snapshot, Store};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A linear chain of `n` messages plus a sibling of the last one; returns the file.
fn write_chain(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join(format!("chain-{n}.jsonl"));
    let file = std::fs::File::create(&path).expect("create chain");
    pisess_benches::generate_chain(std::io::BufWriter::new(file), n as u64).expect("write chain");
    path
}

struct Chain {
    n: usize,
    snap: Snapshot,
    session: SessionKey,
    leaf: EntryKey,
    sibling: EntryKey,
    _store: Store,
}

fn chain(dir: &Path, n: usize) -> Chain {
    let file = write_chain(dir, n);
    let store = Store::open(dir.join(format!("chain-{n}.redb"))).expect("store");
    let r = store.import_file(&file).expect("import chain");
    let session = r.session.expect("chain imported");
    let snap = store.snapshot().expect("snapshot");
    let leaf = snap
        .entry_by_id(session, &format!("{n:08x}"))
        .expect("lookup")
        .expect("leaf");
    let sibling = snap
        .entry_by_id(session, &format!("{:08x}", n + 1))
        .expect("lookup")
        .expect("sibling");
    Chain {
        n,
        snap,
        session,
        leaf,
        sibling,
        _store: store,
    }
}

fn store_benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = env_usize("PISESS_BENCH_BYTES", 8 << 20) as u64;
    let session_file = dir.path().join("session.jsonl");
    pisess_benches::generate_file(&session_file, bytes, 1).expect("generate");
    let size = std::fs::metadata(&session_file).expect("stat").len();

    // import vs the parse floor
    let mut g = c.benchmark_group("import");
    g.throughput(Throughput::Bytes(size));
    g.sample_size(10);
    g.bench_function("parse_floor_value", |b| {
        b.iter(|| black_box(measure::value_file(&session_file).expect("read")));
    });
    let mut round = 0u64;
    g.bench_function("pisess_fresh_store", |b| {
        b.iter(|| {
            round += 1;
            let path = dir.path().join(format!("import-{round}.redb"));
            let store = Store::open(&path).expect("store");
            black_box(store.import_file(&session_file).expect("import"));
            store.close().expect("close");
            std::fs::remove_file(&path).expect("remove");
        });
    });
    g.finish();

    // tree queries on a short and a long chain
    let short = chain(dir.path(), 1_000);
    let long = chain(dir.path(), env_usize("PISESS_BENCH_CHAIN", 100_000));
    let chains = [&short, &long];
    let mut g = c.benchmark_group("lookup");
    for ch in chains {
        let id = format!("{:08x}", ch.n / 2);
        g.bench_with_input(BenchmarkId::new("entry_by_id", ch.n), ch, |b, ch| {
            b.iter(|| black_box(ch.snap.entry_by_id(ch.session, &id).expect("lookup")));
        });
    }
    g.finish();
    let mut g = c.benchmark_group("ancestor");
    for ch in chains {
        let k = (ch.n / 2) as u32;
        g.bench_with_input(BenchmarkId::new("kth_halfway", ch.n), ch, |b, ch| {
            b.iter(|| black_box(ch.snap.ancestor(ch.leaf, k).expect("ancestor")));
        });
    }
    g.finish();
    let mut g = c.benchmark_group("lca");
    for ch in chains {
        g.bench_with_input(BenchmarkId::new("leaf_sibling", ch.n), ch, |b, ch| {
            b.iter(|| black_box(ch.snap.lca(ch.leaf, ch.sibling).expect("lca")));
        });
    }
    g.finish();

    // file queries and export on the generated session
    let store = Store::open(dir.path().join("session.redb")).expect("store");
    let session = store
        .import_file(&session_file)
        .expect("import")
        .session
        .expect("imported");
    let snap = store.snapshot().expect("snapshot");
    let all = snap
        .files_glob("**", &FileFilter::default())
        .expect("glob query");
    let exact = all.first().map(|h| h.path.clone()).unwrap_or_default();
    let mut g = c.benchmark_group("files");
    g.bench_function("exact_path", |b| {
        b.iter(|| {
            black_box(
                snap.files_exact(&exact, &FileFilter::default())
                    .expect("query"),
            )
        });
    });
    g.bench_function("glob_src", |b| {
        b.iter(|| {
            black_box(
                snap.files_glob("src/**", &FileFilter::default())
                    .expect("query"),
            )
        });
    });
    g.finish();

    let mut g = c.benchmark_group("export");
    g.throughput(Throughput::Bytes(size));
    g.sample_size(10);
    g.bench_function("copy_file_bytes", |b| {
        b.iter(|| {
            let mut f = std::fs::File::open(&session_file).expect("open");
            black_box(std::io::copy(&mut f, &mut std::io::sink()).expect("copy"))
        });
    });
    g.bench_function("pisess_export_jsonl", |b| {
        b.iter(|| {
            black_box(
                snap.export_session(session, &mut std::io::sink())
                    .expect("export"),
            )
        });
    });
    g.finish();
    drop(snap);
    drop(store);

    // context projection at the leaf, over the parsed path
    let text = std::fs::read_to_string(&session_file).expect("read");
    let (_, entries) = pisess_engine::agent::path::parse_session_text(&text);
    let path = pisess_engine::agent::path::path_from_entries(&entries, None).expect("path");
    let mut g = c.benchmark_group("context");
    g.bench_function("parse_session_lines", |b| {
        b.iter(|| {
            black_box(
                pisess_engine::agent::path::parse_session_text(&text)
                    .1
                    .len(),
            )
        });
    });
    g.bench_function("lean_plan_and_messages", |b| {
        b.iter(|| {
            let src = pisess_engine::agent::lean::ValuePath(&path);
            let plan = pisess_engine::agent::lean::LeanContext::plan(&src).expect("plan");
            let mut n = 0usize;
            let est = plan
                .messages::<_, std::convert::Infallible>(&src, |_| {
                    n += 1;
                    Ok(())
                })
                .expect("messages");
            black_box((n, est))
        });
    });
    g.bench_function("project_whole_path", |b| {
        b.iter(|| black_box(pisess_engine::agent::project::project(&path).context_json()));
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = store_benches
}
criterion_main!(benches);
