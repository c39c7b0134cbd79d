//! The quick parse-throughput runner behind `benches/parse.sh`.
//!
//! `pisess-bench-parse [--file FILE] [--runs N] [--chunk-size BYTES]`
//!
//! Runs every read variant of [`pisess_benches::measure`] `N` times over the same file, in
//! interleaved rounds (the order rotates each round) so that a noisy neighbour slows all
//! variants alike, checks that they all saw the same lines and messages, and prints min and
//! median times, MB/s (1 MB = 10^6 bytes) and ratios against the baseline of the same run.

use std::fs::File;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail, ensure};
use pisess_benches::measure::{self, Tally};

struct Variant {
    name: &'static str,
    what: &'static str,
    wall: Vec<f64>,
    cpu: Vec<f64>,
    tally: Tally,
}

impl Variant {
    fn new(name: &'static str, what: &'static str) -> Self {
        Self {
            name,
            what,
            wall: Vec::new(),
            cpu: Vec::new(),
            tally: Tally::default(),
        }
    }
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

fn min(v: &[f64]) -> f64 {
    sorted(v).first().copied().unwrap_or(f64::NAN)
}

fn median(v: &[f64]) -> f64 {
    let s = sorted(v);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

const USAGE: &str = "usage: pisess-bench-parse [--file FILE] [--runs N] [--chunk-size BYTES] \
                     [--only VARIANT]
  --only VARIANT runs just that variant N times and prints its times (for profilers)";

// Indices into the variant table.
const VALUE_FILE: usize = 0;
const VALUE_MEM: usize = 1;
const TYPED_FILE: usize = 2;
const TYPED_MEM: usize = 3;
const PAR1: usize = 4;
const PAR2: usize = 5;
const SPLIT: usize = 6;
const VALUE_PAR2: usize = 7;

fn run() -> anyhow::Result<()> {
    let mut file = None;
    let mut runs = 7usize;
    let mut chunk_size = measure::PARALLEL_CHUNK_SIZE;
    let mut only = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--file" => file = Some(PathBuf::from(value()?)),
            "--runs" => runs = value()?.parse().context("bad --runs")?,
            "--chunk-size" => chunk_size = value()?.parse().context("bad --chunk-size")?,
            "--only" => only = Some(value()?),
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    ensure!(runs > 0, "--runs must be at least 1");
    let path = match file {
        Some(p) => p,
        None => measure::corpus_file(measure::CORPUS_FILE).map_err(anyhow::Error::msg)?,
    };
    let buf = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let bytes = buf.len() as f64;
    let pool1 = measure::pool(1);
    let pool2 = measure::pool(2);

    let mut variants = [
        Variant::new(
            "value/file",
            "File > BufReader(4 MiB).read_line > from_str::<Value>",
        ),
        Variant::new(
            "value/mem",
            "&[u8] > memchr > from_utf8 > from_str::<Value>",
        ),
        Variant::new(
            "typed/file",
            "SessionReader(File): 4 MiB chunks, memchr, typed Entry",
        ),
        Variant::new("typed/mem", "SessionReader(&[u8]): the same from memory"),
        Variant::new(
            "par/1 thread",
            "ChunkReader(File) + parse_line, 1-thread pool",
        ),
        Variant::new(
            "par/2 threads",
            "ChunkReader(File) + parse_line, 2-thread pool",
        ),
        Variant::new(
            "split/file",
            "ChunkReader(File) + line split only, no parsing",
        ),
        Variant::new(
            "value/2 threads",
            "ChunkReader(File) + from_slice::<Value> per line, 2-thread pool",
        ),
    ];
    let one = |i: usize| -> anyhow::Result<(f64, f64, Tally)> {
        let cpu0 = measure::process_cpu_ns().unwrap_or(0);
        let start = Instant::now();
        let t = match i {
            VALUE_FILE => measure::value_file(&path)?,
            VALUE_MEM => measure::value_memory(&buf),
            TYPED_FILE => measure::typed_reader(File::open(&path)?)?,
            TYPED_MEM => measure::typed_reader(&buf[..])?,
            PAR1 => measure::typed_parallel(&path, &pool1, chunk_size)?,
            PAR2 => measure::typed_parallel(&path, &pool2, chunk_size)?,
            VALUE_PAR2 => measure::value_parallel(&path, &pool2, chunk_size)?,
            _ => measure::split_only(&path)?,
        };
        let wall = start.elapsed().as_secs_f64();
        let cpu = measure::process_cpu_ns().unwrap_or(0).saturating_sub(cpu0) as f64 / 1e9;
        Ok((wall, cpu, std::hint::black_box(t)))
    };
    if let Some(name) = only {
        let i = variants
            .iter()
            .position(|v| v.name == name)
            .with_context(|| format!("no variant {name:?}"))?;
        for _ in 0..runs {
            let (wall, cpu, t) = one(i)?;
            println!(
                "{name}: wall {:.1} ms, cpu {:.1} ms, {t:?}",
                wall * 1e3,
                cpu * 1e3
            );
        }
        return Ok(());
    }
    // Warm-up round (page cache, allocator, pools), not recorded.
    for (i, v) in variants.iter_mut().enumerate() {
        v.tally = one(i)?.2;
    }
    let n = variants.len();
    for round in 0..runs {
        for k in 0..n {
            let i = (k + round) % n;
            let (wall, cpu, _) = one(i)?;
            variants[i].wall.push(wall);
            variants[i].cpu.push(cpu);
        }
    }

    // Every variant must have seen the same file.
    let reference = variants[VALUE_FILE].tally;
    for v in &variants {
        let t = v.tally;
        ensure!(
            t.lines == reference.lines
                && (t.messages == reference.messages || v.name == "split/file"),
            "{} saw {t:?}, the baseline {reference:?}",
            v.name
        );
    }
    let have_cpu = measure::process_cpu_ns().is_some();

    println!(
        "file: {} ({:.1} MB, {} lines, {} message entries)",
        path.display(),
        bytes / 1e6,
        reference.lines,
        reference.messages
    );
    println!(
        "{runs} timed runs per variant, interleaved, after one warm-up run; MB = 10^6 bytes; \
         parallel chunk size {} KiB; cpu = CPU time of all threads (schedstat)",
        chunk_size >> 10
    );
    println!();
    println!(
        "{:<15} {:>7} {:>7} {:>6} {:>6} {:>7} {:>7} {:>7} {:>7}  what",
        "", "wall ms", "wall ms", "MB/s", "MB/s", "x base", "x base", "cpu ms", "x base"
    );
    println!(
        "{:<15} {:>7} {:>7} {:>6} {:>6} {:>7} {:>7} {:>7} {:>7}",
        "variant", "min", "median", "best", "median", "median", "best", "median", "cpu"
    );
    for (i, v) in variants.iter().enumerate() {
        // In-memory variants are compared with the in-memory baseline, the rest with the file one.
        let base = &variants[if i == VALUE_MEM || i == TYPED_MEM {
            VALUE_MEM
        } else {
            VALUE_FILE
        }];
        let cpu = if have_cpu {
            format!(
                "{:>7.1} {:>6.2}x",
                median(&v.cpu) * 1e3,
                median(&base.cpu) / median(&v.cpu)
            )
        } else {
            format!("{:>7} {:>7}", "-", "-")
        };
        println!(
            "{:<15} {:>7.1} {:>7.1} {:>6.0} {:>6.0} {:>6.2}x {:>6.2}x {cpu}  {}",
            v.name,
            min(&v.wall) * 1e3,
            median(&v.wall) * 1e3,
            bytes / min(&v.wall) / 1e6,
            bytes / median(&v.wall) / 1e6,
            median(&base.wall) / median(&v.wall),
            min(&base.wall) / min(&v.wall),
            v.what
        );
    }
    let w = |i: usize| median(&variants[i].wall);
    let b = |i: usize| min(&variants[i].wall);
    let c = |i: usize| median(&variants[i].cpu);
    let verdict = |ok: bool| if ok { "MET" } else { "NOT MET" };
    let typed = w(VALUE_FILE) / w(TYPED_FILE);
    println!();
    println!(
        "one core, typed vs Value: wall {typed:.2}x (median), {:.2}x (best); in memory {:.2}x; \
         cpu {:.2}x  => target >= 2x: {}",
        b(VALUE_FILE) / b(TYPED_FILE),
        w(VALUE_MEM) / w(TYPED_MEM),
        c(VALUE_FILE) / c(TYPED_FILE),
        verdict(typed >= 2.0)
    );
    // How many cores the 2-thread runs actually got: their CPU time over their wall time.
    let par2 = &variants[PAR2];
    let cores: Vec<f64> = par2
        .cpu
        .iter()
        .zip(&par2.wall)
        .map(|(c, w)| c / w)
        .collect();
    println!(
        "parallel, 2 threads vs 1: wall {:.2}x (median), {:.2}x (best); the 2-thread runs got \
         {:.2} cores (median cpu/wall; < 2 = the machine was busy); cpu 2t/1t {:.2} (1.00 = no \
         extra work); serial share (read+split / par 1t cpu) {:.0}%",
        w(PAR1) / w(PAR2),
        b(PAR1) / b(PAR2),
        median(&cores),
        c(PAR2) / c(PAR1),
        100.0 * c(SPLIT) / c(PAR1)
    );
    println!(
        "the parse floor measured (rayon + Value, 2 threads) vs idealised (1 thread / 2): wall \
         {:.2}x (median), {:.2}x (best); cpu {:.2}x",
        w(VALUE_PAR2) / (w(VALUE_FILE) / 2.0),
        b(VALUE_PAR2) / (b(VALUE_FILE) / 2.0),
        c(VALUE_PAR2) / c(VALUE_FILE)
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisess-bench-parse: {e:#}");
            ExitCode::FAILURE
        }
    }
}
