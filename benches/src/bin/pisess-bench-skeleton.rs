//! A bottom-up measure of issue 3's import target: how close to the parse floor can *any*
//! importer of this design get? `benches/skeleton.sh` runs it interleaved with the floor and
//! with `pisess import`.
//!
//! `pisess-bench-skeleton MODE DIR STORE`, MODE one of:
//! - `floor`: the measured parse floor, as `compare.sh` and `store.sh` take it: every line of
//!   every top-level `*.jsonl` of DIR parsed to a `serde_json::Value` on a 2-thread rayon pool
//!   ([`measure::value_parallel`]); nothing stored.
//! - `rows`: the least an importer of this design must do to keep the lines: read the files in
//!   4 MiB chunks, cut each chunk's lines into blocks of ~64 KiB, and on the 2-thread pool hash
//!   every line with blake3 and compress every block with LZ4 (as the store's row blocks are);
//!   then insert the blocks and the hashes into two redb tables, one write transaction per file
//!   with `Durability::None` and a last durable commit (as `pisess import` does). The pool's
//!   threads pull the chunks and build their blocks while the main thread inserts, in file
//!   order, the blocks of the chunks already built.
//! - `rows+ids`: `rows`, plus a typed parse of each line into just `type`, `id`, `parentId` and
//!   `timestamp` (borrowed, the rest skipped), and two more tables: id → key (inserted sorted)
//!   and key → parent key (pi's "a later duplicate id wins" resolved through a hash map).
//!
//! Neither skeleton is an importer: they keep no outline, no file index, no tool results, no
//! catalogue, no skip pointers or children lists, handle no v1/v2 file, glued line or
//! incremental case. Their times are what the chosen pieces (blake3, LZ4, redb, serde_json)
//! cost by themselves on this machine, a floor under any importer built from them. STORE is
//! removed first; the process prints one summary line on stderr.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use anyhow::{Context, bail};
use pisess_benches::measure;
use pisess_formats::reader::ChunkReader;
use rayon::iter::{IntoParallelRefIterator, ParallelBridge, ParallelIterator};
use redb::{Database, Durability, TableDefinition};
use serde::Deserialize;

const ROWS: TableDefinition<u64, &[u8]> = TableDefinition::new("rows");
const HASHES: TableDefinition<u64, &[u8]> = TableDefinition::new("hashes");
const IDS: TableDefinition<&str, u64> = TableDefinition::new("ids");
const PARENTS: TableDefinition<u64, u64> = TableDefinition::new("parents");

/// Uncompressed size at which a block of lines is closed (the store's row blocks aim at 64 KiB).
const BLOCK_BYTES: usize = 64 << 10;
/// Chunk size of the reads (the import's).
const CHUNK_BYTES: usize = 4 << 20;
/// redb's page cache, as the store opens it.
const CACHE_BYTES: usize = 96 << 20;

/// The four fields the `rows+ids` skeleton reads of each line; serde skips the rest.
#[derive(Deserialize)]
struct Skim<'a> {
    #[serde(borrow, rename = "type")]
    _kind: Option<&'a str>,
    #[serde(borrow)]
    id: Option<&'a str>,
    #[serde(borrow, rename = "parentId")]
    parent: Option<&'a str>,
    #[serde(borrow)]
    _timestamp: Option<&'a str>,
}

/// A line's id and parent id, when it has them.
type Link = (Option<Box<str>>, Option<Box<str>>);

/// One block of lines, ready to insert.
struct Block {
    /// Index of the block's first line in the chunk.
    first: usize,
    lz4: Vec<u8>,
    hashes: Vec<u8>,
    /// (id, parent id) of each line, `rows+ids` only (owned: the chunk's buffer is reused).
    links: Vec<Link>,
}

fn build(lines: &[&[u8]], first: usize, with_ids: bool) -> Block {
    let mut raw = Vec::with_capacity(BLOCK_BYTES + BLOCK_BYTES / 4);
    let mut hashes = Vec::with_capacity(lines.len() * 32);
    let mut links = Vec::new();
    for line in lines {
        raw.extend_from_slice(line);
        raw.push(b'\n');
        hashes.extend_from_slice(blake3::hash(line).as_bytes());
        if with_ids {
            let skim = serde_json::from_slice::<Skim<'_>>(line).ok();
            links.push(match skim {
                Some(s) => (s.id.map(Box::from), s.parent.map(Box::from)),
                None => (None, None),
            });
        }
    }
    Block {
        first,
        lz4: lz4_flex::compress_prepend_size(&raw),
        hashes,
        links,
    }
}

/// Cuts a chunk's lines into blocks of about [`BLOCK_BYTES`]: (first line, end) pairs.
fn blocks_of(lines: &[&[u8]]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let (mut start, mut size) = (0, 0);
    for (i, line) in lines.iter().enumerate() {
        size += line.len() + 1;
        if size >= BLOCK_BYTES {
            out.push((start, i + 1));
            (start, size) = (i + 1, 0);
        }
    }
    if start < lines.len() {
        out.push((start, lines.len()));
    }
    out
}

/// Totals printed at the end.
#[derive(Default)]
struct Totals {
    lines: u64,
    stored: u64,
    links: u64,
}

fn import_file(
    db: &Database,
    pool: &rayon::ThreadPool,
    path: &Path,
    next_key: &mut u64,
    with_ids: bool,
    totals: &mut Totals,
) -> anyhow::Result<()> {
    let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut tx = db.begin_write()?;
    tx.set_durability(Durability::None)?;
    {
        let mut rows = tx.open_table(ROWS)?;
        let mut hashes = tx.open_table(HASHES)?;
        let mut ids = tx.open_table(IDS)?;
        let mut parents = tx.open_table(PARENTS)?;
        let mut by_id: HashMap<Box<str>, u64> = HashMap::new();
        let mut id_rows: Vec<(Box<str>, u64)> = Vec::new();
        let mut links: Vec<(u64, u64)> = Vec::new();
        // As in the floor, the pool's threads pull the chunks from the reader and build their
        // blocks; this thread inserts them in file order as they arrive (while the pool works on
        // the next chunks), as the import's writer thread does.
        type Built = std::io::Result<(usize, u64, Vec<Block>)>;
        let (send, receive) = mpsc::sync_channel::<Built>(4);
        std::thread::scope(|scope| -> anyhow::Result<()> {
            scope.spawn(move || {
                let mut reader = ChunkReader::with_chunk_size(file, CHUNK_BYTES);
                pool.install(|| {
                    std::iter::from_fn(move || reader.next_chunk().transpose())
                        .enumerate()
                        .par_bridge()
                        .for_each_with(send, |send, (index, chunk)| {
                            let built = chunk.map(|chunk| {
                                let lines: Vec<&[u8]> = chunk.lines().map(|l| l.bytes).collect();
                                let spans = blocks_of(&lines);
                                let blocks = spans
                                    .par_iter()
                                    .map(|&(a, b)| build(&lines[a..b], a, with_ids))
                                    .collect();
                                (index, lines.len() as u64, blocks)
                            });
                            // A closed channel means the inserts failed; that error is reported.
                            let _ = send.send(built);
                        });
                });
            });
            let mut waiting = std::collections::BTreeMap::new();
            let mut next_chunk = 0;
            for message in receive {
                let (index, line_count, blocks) = message?;
                waiting.insert(index, (line_count, blocks));
                while let Some((line_count, blocks)) = waiting.remove(&next_chunk) {
                    next_chunk += 1;
                    for block in blocks {
                        let key = *next_key + block.first as u64;
                        rows.insert(key, block.lz4.as_slice())?;
                        hashes.insert(key, block.hashes.as_slice())?;
                        totals.stored += block.lz4.len() as u64;
                        for (i, (id, parent)) in block.links.into_iter().enumerate() {
                            let k = key + i as u64;
                            if let Some(p) = parent.and_then(|p| by_id.get(&p).copied()) {
                                links.push((k, p));
                            }
                            if let Some(id) = id {
                                by_id.insert(id.clone(), k);
                                id_rows.push((id, k));
                            }
                        }
                    }
                    *next_key += line_count;
                    totals.lines += line_count;
                }
            }
            Ok(())
        })?;
        // Sorted, so that redb's inserts run in key order; a later duplicate id wins.
        id_rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        for (id, k) in &id_rows {
            ids.insert(&**id, *k)?;
        }
        for (k, p) in links {
            parents.insert(k, p)?;
        }
        totals.links += id_rows.len() as u64;
    }
    tx.commit()?;
    Ok(())
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [mode, dir, store] = args.as_slice() else {
        bail!("usage: pisess-bench-skeleton floor|rows|rows+ids DIR STORE");
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("listing {dir}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let pool = measure::pool(2);
    let mut totals = Totals::default();
    let with_ids = match mode.as_str() {
        "floor" => {
            for f in &files {
                let t = measure::value_parallel(f, &pool, measure::PARALLEL_CHUNK_SIZE)?;
                totals.lines += t.lines;
            }
            eprintln!("floor: {} files, {} lines", files.len(), totals.lines);
            return Ok(());
        }
        "rows" => false,
        "rows+ids" => true,
        other => bail!("unknown mode {other:?}"),
    };
    match std::fs::remove_file(store) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("removing {store}"));
        }
        _ => {}
    }
    let db = redb::Builder::new()
        .set_cache_size(CACHE_BYTES)
        .create(store)
        .with_context(|| format!("creating {store}"))?;
    let mut next_key = 0;
    for f in &files {
        import_file(&db, &pool, f, &mut next_key, with_ids, &mut totals)?;
    }
    // The import's last transaction is durable; this one makes the data above durable too.
    let mut tx = db.begin_write()?;
    tx.set_durability(Durability::Immediate)?;
    tx.commit()?;
    drop(db);
    let size = std::fs::metadata(store)?.len();
    eprintln!(
        "{mode}: {} files, {} lines, {} ids, {} bytes of LZ4 blocks, store {size} bytes",
        files.len(),
        totals.lines,
        totals.links,
        totals.stored
    );
    Ok(())
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisess-bench-skeleton: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
