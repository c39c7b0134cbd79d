//! The read paths that the parse benchmarks compare, shared by the criterion bench and the
//! quick runner (`pisess-bench-parse`).
//!
//! Every variant reads the same bytes, splits them into lines and parses every line; each
//! returns a [`Tally`] so the callers can check that all variants saw the same file.
//!
//! | variant | source | split | parse |
//! |---|---|---|---|
//! | [`value_file`] | `File` → `BufReader` (4 MiB) | `read_line` (memchr + UTF-8 check) | `serde_json::from_str::<Value>` |
//! | [`value_memory`] | bytes already in memory | `memchr` | `str::from_utf8` + `from_str::<Value>` |
//! | [`typed_reader`] on a `File` / on `&[u8]` | `SessionReader` (4 MiB chunks) | `memchr` | `parse_line`: UTF-8 check + typed borrowed `Entry` (+ header detection) |
//! | [`typed_parallel`] | `ChunkReader` (chunks pulled by the pool's threads) | `memchr` | `parse_line` on the pool, chunk by chunk |

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use pisess_formats::line::parse_line;
use pisess_formats::reader::{Chunk, ChunkReader, DEFAULT_CHUNK_SIZE};
use pisess_formats::{EntryType, Event, SessionReader};
use rayon::iter::{IntoParallelRefIterator, ParallelBridge, ParallelIterator};
use serde_json::Value;

/// The corpus file the parse benchmarks read.
pub const CORPUS_FILE: &str = "15-large-50000.jsonl";

/// Chunk size of the parallel variant: small enough that a 64 MB file makes ~64 tasks.
pub const PARALLEL_CHUNK_SIZE: usize = 1 << 20;

/// What a read saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Lines read.
    pub lines: u64,
    /// Lines (or records) parsed into a value or typed entry.
    pub parsed: u64,
    /// Parsed objects whose `type` is `"message"`.
    pub messages: u64,
    /// Records that did not fit the typed view, or lines that did not parse.
    pub failed: u64,
    /// Problems reported by the reader (pisess variants only).
    pub problems: u64,
}

impl Tally {
    fn add(mut self, o: Self) -> Self {
        self.lines += o.lines;
        self.parsed += o.parsed;
        self.messages += o.messages;
        self.failed += o.failed;
        self.problems += o.problems;
        self
    }
}

/// The standard corpus folder: `$PISESS_CORPUS`, else `$PISESS_ORACLE_HOME/corpus`, else
/// `~/.cache/pisess-oracle/corpus`.
pub fn corpus_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("PISESS_CORPUS") {
        return dir.into();
    }
    let home = std::env::var_os("PISESS_ORACLE_HOME").map_or_else(
        || PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pisess-oracle"),
        PathBuf::from,
    );
    home.join("corpus")
}

/// The path of a corpus file, or an error saying how to build the corpus.
pub fn corpus_file(name: &str) -> Result<PathBuf, String> {
    let path = corpus_dir().join(name);
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "corpus file {} not found; build the standard corpus first with \
             `../shared/oracle/corpus` (from the project root, i.e. /work/shared/oracle/corpus), \
             or point PISESS_CORPUS at a folder holding {name}",
            path.display()
        ))
    }
}

fn tally_value(t: &mut Tally, v: &Value) {
    t.parsed += 1;
    if v.get("type").and_then(Value::as_str) == Some("message") {
        t.messages += 1;
    }
}

/// Baseline: `BufReader` (4 MiB buffer) line by line, `serde_json::from_str::<Value>` per line.
pub fn value_file(path: &Path) -> io::Result<Tally> {
    let mut r = BufReader::with_capacity(DEFAULT_CHUNK_SIZE, File::open(path)?);
    let mut line = String::new();
    let mut t = Tally::default();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(t);
        }
        t.lines += 1;
        match serde_json::from_str::<Value>(&line) {
            Ok(v) => tally_value(&mut t, &v),
            Err(_) => t.failed += 1,
        }
    }
}

/// Baseline over bytes already in memory: memchr split, UTF-8 check, `from_str::<Value>`.
pub fn value_memory(buf: &[u8]) -> Tally {
    let mut t = Tally::default();
    let mut start = 0;
    while start < buf.len() {
        let end = memchr::memchr(b'\n', &buf[start..]).map_or(buf.len(), |i| start + i);
        t.lines += 1;
        match std::str::from_utf8(&buf[start..end])
            .ok()
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
        {
            Some(v) => tally_value(&mut t, &v),
            None => t.failed += 1,
        }
        start = end + 1;
    }
    t
}

/// pisess, one thread: `SessionReader` over `src`, the typed `Entry` view of every record.
pub fn typed_reader<R: Read>(src: R) -> io::Result<Tally> {
    let mut t = Tally::default();
    let summary = SessionReader::new(src)
        .read(|ev| {
            match ev {
                Event::Header(_) => t.parsed += 1,
                Event::Record(r, _) => match &r.entry {
                    Ok(e) => {
                        t.parsed += 1;
                        if e.entry_type() == EntryType::Message {
                            t.messages += 1;
                        }
                    }
                    Err(_) => t.failed += 1,
                },
                Event::Problem(_) => t.problems += 1,
            }
            Ok::<(), io::Error>(())
        })
        .map_err(|e| match e {
            pisess_formats::ReadError::Io(e) | pisess_formats::ReadError::Stopped(e) => e,
        })?;
    t.lines = summary.lines;
    Ok(t)
}

/// `parse_line` over every line of a chunk (the header is parsed as an entry like any line).
pub fn parse_chunk(chunk: &Chunk) -> Tally {
    let mut t = Tally::default();
    let mut problems = Vec::new();
    for line in chunk.lines() {
        t.lines += 1;
        parse_line(&line, &mut problems, |p| match &p.entry {
            Ok(e) => {
                t.parsed += 1;
                if e.entry_type() == EntryType::Message {
                    t.messages += 1;
                }
            }
            Err(_) => t.failed += 1,
        });
        t.problems += problems.len() as u64;
        problems.clear();
    }
    t
}

/// pisess, parallel: a `ChunkReader` whose chunks are pulled by the threads of `pool` (reading
/// happens on the pool too, so a 1-thread pool does everything on one core) and parsed with
/// `parse_line`. Chunks are processed out of order; only the totals are kept.
pub fn typed_parallel(
    path: &Path,
    pool: &rayon::ThreadPool,
    chunk_size: usize,
) -> io::Result<Tally> {
    chunks_parallel(path, pool, chunk_size, parse_chunk)
}

/// The chunks of `path` pulled by the threads of `pool` and tallied by `tally`, the totals
/// summed.
fn chunks_parallel(
    path: &Path,
    pool: &rayon::ThreadPool,
    chunk_size: usize,
    tally: impl Fn(&Chunk) -> Tally + Sync + Send,
) -> io::Result<Tally> {
    let file = File::open(path)?;
    pool.install(|| {
        let mut reader = ChunkReader::with_chunk_size(file, chunk_size);
        std::iter::from_fn(move || reader.next_chunk().transpose())
            .par_bridge()
            .map(|chunk| chunk.map(|c| tally(&c)))
            .try_reduce(Tally::default, |a, b| Ok(a.add(b)))
    })
}

/// The parse floor as issue 3 words it, measured rather than idealised: a rayon +
/// `serde_json::Value` parse of the file's lines on `pool`. A `ChunkReader` feeds chunks to the
/// pool (reading happens on the pool too) and each chunk's lines are parsed in parallel, so a
/// file of one chunk is spread over the threads as well.
pub fn value_parallel(
    path: &Path,
    pool: &rayon::ThreadPool,
    chunk_size: usize,
) -> io::Result<Tally> {
    chunks_parallel(path, pool, chunk_size, |c| {
        let lines: Vec<&[u8]> = c.lines().map(|l| l.bytes).collect();
        lines
            .par_iter()
            .map(|l| {
                let mut t = Tally {
                    lines: 1,
                    ..Tally::default()
                };
                match serde_json::from_slice::<Value>(l) {
                    Ok(v) => tally_value(&mut t, &v),
                    Err(_) => t.failed += 1,
                }
                t
            })
            .reduce(Tally::default, Tally::add)
    })
}

/// A rayon pool of exactly `threads` threads.
pub fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("bench-{threads}t-{i}"))
        .build()
        .expect("a rayon thread pool can be built")
}

/// CPU time used so far by all live threads of this process, in nanoseconds, from
/// `/proc/self/task/*/schedstat` (Linux; `None` elsewhere). Unlike wall time it does not count
/// time spent waiting for a core, so on a busy shared machine it is the steadier measure of
/// single-threaded work.
pub fn process_cpu_ns() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(stat) = std::fs::read_to_string(task.ok()?.path().join("schedstat")) else {
            continue; // the thread exited meanwhile
        };
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Reading and splitting only (no parsing): `ChunkReader` over the file, lines counted with the
/// chunk's line iterator. The serial floor of the parallel variant.
pub fn split_only(path: &Path) -> io::Result<Tally> {
    let mut reader = ChunkReader::new(File::open(path)?);
    let mut t = Tally::default();
    while let Some(chunk) = reader.next_chunk()? {
        t.lines += chunk.lines().count() as u64;
    }
    Ok(t)
}

/// Peak resident set size of this process so far (`VmHWM`), in KiB, where Linux reports it.
pub fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_variants_agree_on_a_generated_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        crate::generate::generate_file(&path, 3 << 20, 11).unwrap();
        let buf = std::fs::read(&path).unwrap();
        let a = value_file(&path).unwrap();
        let b = value_memory(&buf);
        let c = typed_reader(File::open(&path).unwrap()).unwrap();
        let d = typed_reader(&buf[..]).unwrap();
        let e = typed_parallel(&path, &pool(2), 64 << 10).unwrap();
        assert_eq!(a, b);
        assert_eq!(c, d);
        assert_eq!(a, Tally { problems: 0, ..c });
        assert_eq!(a, e);
        assert!(a.messages > 100 && a.failed == 0 && a.lines == a.parsed);
    }
}
