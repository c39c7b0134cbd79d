//! Reads one session file with `SessionReader` (typed view of every record, nothing kept) and
//! prints what it saw; used to measure peak memory (`/usr/bin/time -v`) on big files.
//!
//! `pisess-bench-read [--no-read] FILE`: with `--no-read` it opens the file and exits without
//! reading it, which gives the baseline peak memory of a process that reads nothing.

use std::fs::File;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use pisess_benches::measure::{Tally, peak_rss_kib, typed_reader};

fn run() -> anyhow::Result<()> {
    let mut args: Vec<_> = std::env::args_os().skip(1).collect();
    let no_read = args.first().is_some_and(|a| a == "--no-read");
    if no_read {
        args.remove(0);
    }
    let [path] = &args[..] else {
        anyhow::bail!("usage: pisess-bench-read [--no-read] FILE");
    };
    let path = std::path::Path::new(path);
    let before = peak_rss_kib();
    let start = Instant::now();
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let bytes = file.metadata()?.len();
    let t = if no_read {
        Tally::default()
    } else {
        typed_reader(file).with_context(|| format!("reading {}", path.display()))?
    };
    let secs = start.elapsed().as_secs_f64();
    let after = peak_rss_kib();
    let kib = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
    println!(
        "bytes={bytes} lines={} parsed={} messages={} failed={} problems={} secs={secs:.3} \
         mb_per_s={:.0} vmhwm_kib_before={} vmhwm_kib_after={}",
        t.lines,
        t.parsed,
        t.messages,
        t.failed,
        t.problems,
        bytes as f64 / secs / 1e6,
        kib(before),
        kib(after),
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisess-bench-read: {e:#}");
            ExitCode::FAILURE
        }
    }
}
