//! Writes a realistic, deterministic v3 pi session of a given size.
//!
//! `pisess-bench-gen --out FILE --bytes N [--seed S] [--compact-window TOKENS] [--image-bytes N]`;
//! sizes take a `K`, `M` or `G` suffix (powers of 1024). `--compact-window` compacts as pi's
//! auto-compaction would for a model with that context window (default: never);
//! `--image-bytes N` attaches a base64 image of N (incompressible) bytes to every user
//! message, as pasted screenshots are kept. Prints what it wrote and how fast.
//!
//! `pisess-bench-gen --out FILE --chain N`: a linear chain of N entries plus a sibling of its
//! leaf. `pisess-bench-gen --out DIR --sessions N --bytes B [--seed S]`: N sessions of about B
//! bytes each (seeds S, S+1, …) in the folder DIR.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};

fn parse_size(s: &str) -> anyhow::Result<u64> {
    let (num, mult) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num.parse().with_context(|| format!("bad size {s:?}"))?;
    n.checked_mul(mult).context("size overflows")
}

fn run() -> anyhow::Result<()> {
    let mut out = None;
    let mut bytes = None;
    let mut seed = 1u64;
    let mut options = pisess_benches::GenOptions::default();
    let mut chain = None;
    let mut sessions = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--out" => out = Some(PathBuf::from(value()?)),
            "--bytes" => bytes = Some(parse_size(&value()?)?),
            "--seed" => seed = value()?.parse().context("bad --seed")?,
            "--compact-window" => {
                options.compact_window = Some(value()?.parse().context("bad --compact-window")?);
            }
            "--image-bytes" => {
                options.image_bytes = Some(parse_size(&value()?)?);
            }
            "--chain" => chain = Some(parse_size(&value()?)?),
            "--sessions" => sessions = Some(parse_size(&value()?)?),
            "-h" | "--help" => {
                println!(
                    "usage: pisess-bench-gen --out FILE --bytes N[K|M|G] [--seed S] [--compact-window TOKENS] [--image-bytes N]\n       pisess-bench-gen --out FILE --chain N\n       pisess-bench-gen --out DIR --sessions N --bytes B [--seed S]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other:?} (try --help)"),
        }
    }
    if let (Some(out), Some(n)) = (&out, chain) {
        let start = Instant::now();
        let file =
            std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
        let bytes =
            pisess_benches::generate_chain(std::io::BufWriter::with_capacity(1 << 20, file), n)
                .with_context(|| format!("writing {}", out.display()))?;
        println!(
            "wrote a {n}-entry chain, {bytes} bytes, to {} in {:.2} s",
            out.display(),
            start.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    if let (Some(out), Some(n), Some(each)) = (&out, sessions, bytes) {
        let start = Instant::now();
        let total = pisess_benches::generate_folder(out, n, each, seed)
            .with_context(|| format!("writing into {}", out.display()))?;
        println!(
            "wrote {n} sessions, {total} bytes, into {} in {:.2} s",
            out.display(),
            start.elapsed().as_secs_f64()
        );
        return Ok(());
    }
    let (Some(out), Some(bytes)) = (out, bytes) else {
        bail!(
            "usage: pisess-bench-gen --out FILE --bytes N[K|M|G] [--seed S] [--compact-window TOKENS] [--image-bytes N]"
        );
    };
    if options.compact_window.is_some() && options.image_bytes.is_some() {
        bail!(
            "--image-bytes and --compact-window do not combine (images are not counted by the compaction tracker)"
        );
    }
    let start = Instant::now();
    let stats = pisess_benches::generate_file_with(&out, bytes, seed, options)
        .with_context(|| format!("writing {}", out.display()))?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "wrote {} bytes, {} lines ({} tool calls, {} long outputs, {} branches, {} compactions, {} images) to {} in {:.2} s: {:.0} MB/s",
        stats.bytes,
        stats.lines,
        stats.tool_calls,
        stats.long_outputs,
        stats.branches,
        stats.compactions,
        stats.images,
        out.display(),
        secs,
        stats.bytes as f64 / secs / 1e6,
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisess-bench-gen: {e:#}");
            ExitCode::FAILURE
        }
    }
}
