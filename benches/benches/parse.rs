//! Parse throughput of `15-large-50000.jsonl` (the standard corpus, 64 MB, 50,002 lines).
//!
//! Groups (all `Throughput::Bytes`, so criterion reports MB/s; compare them as ratios):
//! - `value_baseline`: `serde_json::from_str::<Value>` per line, from the file (`BufReader`) and
//!   from memory (memchr split);
//! - `typed_1thread`: pisess's `SessionReader` (chunked read, memchr split, typed `Entry` view
//!   of every record), over the file and over the same bytes in memory;
//! - `parallel`: `ChunkReader` + `parse_line` on explicit rayon pools of 1 and 2 threads.
//!
//! Needs the corpus: run `../shared/oracle/corpus` from the project root first (or set
//! `PISESS_CORPUS`). `cargo bench -p pisess-benches --bench parse`.

use std::fs::File;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use pisess_benches::measure;

fn parse(c: &mut Criterion) {
    let path = match measure::corpus_file(measure::CORPUS_FILE) {
        Ok(p) => p,
        // `cargo test --all-targets` runs benches once in test mode: skip there, fail in earnest.
        Err(msg) if !std::env::args().any(|a| a == "--bench") => {
            eprintln!("skipping parse benches: {msg}");
            return;
        }
        Err(msg) => {
            eprintln!("error: {msg}");
            std::process::exit(2);
        }
    };
    let buf = std::fs::read(&path).expect("the corpus file is readable");
    let bytes = Throughput::Bytes(buf.len() as u64);

    let mut g = c.benchmark_group("value_baseline");
    g.throughput(bytes.clone());
    g.bench_function("file", |b| {
        b.iter(|| black_box(measure::value_file(&path).expect("read")));
    });
    g.bench_function("memory", |b| {
        b.iter(|| black_box(measure::value_memory(&buf)));
    });
    g.finish();

    let mut g = c.benchmark_group("typed_1thread");
    g.throughput(bytes.clone());
    g.bench_function("file", |b| {
        b.iter(|| {
            let file = File::open(&path).expect("open");
            black_box(measure::typed_reader(file).expect("read"))
        });
    });
    g.bench_function("memory", |b| {
        b.iter(|| black_box(measure::typed_reader(&buf[..]).expect("read")));
    });
    g.finish();

    let mut g = c.benchmark_group("parallel");
    g.throughput(bytes);
    for threads in [1, 2] {
        let pool = measure::pool(threads);
        g.bench_with_input(BenchmarkId::new("threads", threads), &pool, |b, pool| {
            b.iter(|| {
                black_box(
                    measure::typed_parallel(&path, pool, measure::PARALLEL_CHUNK_SIZE)
                        .expect("read"),
                )
            });
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    targets = parse
}
criterion_main!(benches);
