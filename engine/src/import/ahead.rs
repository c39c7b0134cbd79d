//! Reading and preparing the next new file while the writer stores the current one.
//!
//! pi keeps one file per conversation, so its folder is mostly small files. Imported one after
//! another, a small file keeps about one core busy: its lines are parsed, hashed and compressed
//! on the pool while the writer thread waits, then the writer stores them while the pool waits
//! (a folder of 5,000 sessions took as much wall time as CPU). So while the writer takes a
//! file, a helper thread takes the next one when it is new to the store and fits in one chunk:
//! it opens, reads and parses it ([`super::prepare_chunk`]) for keys not known yet, and once
//! the writer has counted the rows of the file before it (so the next file's session key and
//! first entry key are known, if that file is stored), it classifies the rows and seals them
//! into blocks ([`super::Prepared::seal`]) for those keys. The writer takes that work when it
//! reaches the file.
//!
//! Invariants:
//! - at most one file is read ahead, and it is used only for the file it was read for, when
//!   the import finds it new to the store (read from its first byte) and its `stat` gives the
//!   size and mtime of the descriptor the bytes came from; otherwise it is dropped and the file
//!   read as usual;
//! - the bytes read, the window hashes stored for them and the descriptor are one: the import
//!   takes the descriptor as the file's `origin`;
//! - a chunk sealed ahead is used only when the session key and first entry key it was sealed
//!   for are the ones the file gets (else it is dropped and the file read again): the
//!   preparation is a function of the bytes and those two keys, so the rows are then those a
//!   read of the file would give. A chunk parsed but not sealed depends on the keys only
//!   through each row's `session` and its `first_key`, which [`super::Prepared::rebase`] sets;
//! - no pool thread ever waits for the writer: the waiting is done by the helper thread;
//! - anything that goes wrong ahead (an I/O error, a file longer than one chunk, a panic) only
//!   means the file is read as usual, which then reports it.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use pisess_formats::open::open_regular;
use pisess_formats::reader::{Chunk, ChunkReader};

use super::{FileState, Prepared, prepare_chunk, size_mtime, source_bytes};
use crate::ids::SessionKey;
use crate::record::SessionRecord;
use crate::row_block::RowBlockBuilder;

/// A file's one chunk, read and parsed, and maybe sealed.
pub(super) struct FirstChunk {
    pub(super) chunk: Chunk,
    /// Whether the file starts with a byte order mark.
    pub(super) bom: bool,
    /// The chunk's rows: for session 0 from key 0 ([`Prepared::rebase`] moves them), or, with
    /// `sealed`, classified and sealed for its keys.
    pub(super) prepared: Prepared,
    pub(super) sealed: Option<Sealed>,
}

/// What a chunk was sealed for, and what its header gave.
pub(super) struct Sealed {
    pub(super) session: u64,
    pub(super) first_key: u64,
    /// The session record as the header's classification filled it.
    pub(super) rec: SessionRecord,
}

impl FirstChunk {
    /// Whether the chunk can be taken by a file stored as session `session` from key
    /// `first_key`.
    pub(super) fn fits(&self, session: u64, first_key: u64) -> bool {
        let fits = self
            .sealed
            .as_ref()
            .is_none_or(|s| s.session == session && s.first_key == first_key);
        #[cfg(test)]
        if self.sealed.is_some() {
            tests::count(fits);
        }
        fits
    }

    /// Classifies the rows and seals them for `session` from `first_key` when the chunk holds
    /// the header; leaves them as they are otherwise. `Err` when sealing failed part-way (the
    /// rows are then of no use).
    fn seal_for(&mut self, session: u64, first_key: u64, path: &Path) -> Result<(), ()> {
        self.prepared.rebase(session, first_key);
        let mut st = FileState::new(SessionKey(session), SessionRecord::default(), 0, path);
        // A file that is no session (or needs migration) fails this the same way when it is
        // read as usual, which reports it. A failure may leave rows of lines pi skips before
        // the header turned into junk rows: a second `classify` makes the same change.
        if st
            .classify(&mut self.prepared.rows, self.chunk.bytes())
            .is_err()
            || st.header_pending
        {
            return Ok(());
        }
        self.prepared
            .seal((RowBlockBuilder::new(), None), self.chunk.bytes())
            .map_err(|_| ())?;
        self.sealed = Some(Sealed {
            session,
            first_key,
            rec: st.rec,
        });
        Ok(())
    }
}

/// A file read ahead.
pub(super) struct Ahead {
    /// Its canonical path.
    pub(super) canon: PathBuf,
    /// Size and mtime of `origin` when it was read.
    pub(super) size: u64,
    pub(super) mtime: i64,
    /// The descriptor the bytes were read from.
    pub(super) origin: File,
    pub(super) first: FirstChunk,
}

/// One file to read ahead.
struct Job {
    canon: PathBuf,
    chunk_size: usize,
    /// The keys to seal for, once known (closed unsent: do not seal).
    keys: mpsc::Receiver<(u64, u64)>,
    out: mpsc::SyncSender<Option<Ahead>>,
}

/// The helper thread that reads files ahead, one at a time.
pub(super) struct Worker {
    jobs: mpsc::Sender<Job>,
}

impl Worker {
    /// Starts the helper thread; `None` if it cannot be started (files are then read as usual).
    pub(super) fn start() -> Option<Self> {
        // The pool's threads take the name of the thread that first uses it: make sure that is
        // not the helper, or every worker would show as `pisess-read-ahead` in `top`.
        let _ = rayon::current_num_threads();
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("pisess-read-ahead".into())
            .spawn(move || {
                for job in rx {
                    let Job {
                        canon,
                        chunk_size,
                        keys,
                        out,
                    } = job;
                    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut a = read(canon, chunk_size)?;
                        match keys.recv() {
                            Ok((session, first_key)) => a
                                .first
                                .seal_for(session, first_key, &a.canon)
                                .ok()
                                .map(|()| a),
                            Err(_) => Some(a),
                        }
                    }));
                    // The import may have stopped waiting (an error): nothing to hand over.
                    let _ = out.send(done.ok().flatten());
                }
            })
            .ok()?;
        Some(Self { jobs })
    }

    /// Starts reading `canon` ahead, in chunks of `chunk_size` bytes.
    pub(super) fn read(&self, canon: PathBuf, chunk_size: usize) -> Option<Pending> {
        let (keys_tx, keys) = mpsc::sync_channel(1);
        let (out, rx) = mpsc::sync_channel(1);
        self.jobs
            .send(Job {
                canon,
                chunk_size,
                keys,
                out,
            })
            .ok()?;
        Some(Pending {
            keys: Some(keys_tx),
            rx,
        })
    }
}

/// A file being read ahead.
pub(super) struct Pending {
    keys: Option<mpsc::SyncSender<(u64, u64)>>,
    rx: mpsc::Receiver<Option<Ahead>>,
}

impl Pending {
    /// Tells the helper the session key and first entry key the file will get if the file
    /// being written before it is stored: it seals the rows for them. Only the first call
    /// counts.
    pub(super) fn keys(&self, session: u64, first_key: u64) {
        if let Some(k) = &self.keys {
            let _ = k.try_send((session, first_key));
        }
    }

    /// Waits for the file and gives it when it is `canon`, `size` bytes of mtime `mtime`.
    pub(super) fn take(mut self, canon: &Path, size: u64, mtime: i64) -> Option<Ahead> {
        // No keys yet: none will come, the helper hands the rows over unsealed.
        self.keys = None;
        self.rx
            .recv()
            .ok()
            .flatten()
            .filter(|a| a.canon == canon && a.size == size && a.mtime == mtime)
    }
}

/// Reads and parses `canon` when it is a regular file of one chunk; `None` otherwise.
fn read(canon: PathBuf, chunk_size: usize) -> Option<Ahead> {
    let origin = open_regular(&canon).ok()?;
    let (size, mtime) = size_mtime(&origin.metadata().ok()?);
    if size == 0 || size > chunk_size as u64 {
        return None;
    }
    let bytes = source_bytes(origin.try_clone().ok()?.take(size), &canon);
    let mut reader = ChunkReader::with_chunk_size(bytes, chunk_size);
    let chunk = reader.next_chunk().ok()??;
    let bom = reader.had_bom();
    if !matches!(reader.next_chunk(), Ok(None)) {
        return None;
    }
    let prepared = prepare_chunk(&chunk, 0, 0, 0, bom, 0, None).ok()?;
    Some(Ahead {
        canon,
        size,
        mtime,
        origin,
        first: FirstChunk {
            chunk,
            bom,
            prepared,
            sealed: None,
        },
    })
}

#[cfg(test)]
pub(super) mod tests {
    use std::cell::Cell;

    thread_local! {
        /// Chunks sealed ahead that this thread's imports took, and dropped.
        static SEALED: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    pub(in super::super) fn count(taken: bool) {
        SEALED.with(|c| {
            let (t, d) = c.get();
            c.set(if taken { (t + 1, d) } else { (t, d + 1) });
        });
    }

    /// Chunks sealed ahead that this thread's imports took, and dropped, so far.
    pub(in super::super) fn sealed() -> (usize, usize) {
        SEALED.with(Cell::get)
    }
}
