//! Importing session files and folders into the store, incrementally.
//!
//! For each file, one `stat` decides what to do:
//! - **unchanged** (same size and mtime as at the last import): nothing is read;
//! - **grown** (larger, and the blake3 hashes of the first and last [`WINDOW`] bytes of the
//!   old prefix still match): only the new lines are read; when the old bytes ended in a line
//!   cut short (pi still writing it), that line is read again from its start, its junk row
//!   taken out first ([`Writer::drop_torn_line`]), unless it holds a record (then the file is
//!   read in full);
//! - **cut short** (smaller, a byte prefix of the stored v3 copy, and what is missing holds more
//!   than white space): nothing is read or written, the import fails for that file
//!   ([`FileError::CutShort`]): the store may hold the only copy of the lost entries
//!   (`ImportOptions::full` reads it anyway);
//! - **rewritten** (anything else): the session's rows are deleted and the file read again;
//! - **new**: read in full.
//!
//! When no file changed, nothing is written; on a store opened read-only that answer also leaves
//! a copy of the `sources` table beside the store ([`crate::source_copy`]), from which
//! [`Store::unchanged_by_copy`] gives the same answer next time without opening the store.
//!
//! Invariants:
//! - one file is one write transaction: a crash leaves the file either fully imported (as of
//!   the bytes read) or not at all, and the next import completes it;
//! - every physical line is stored with its exact bytes (see [`crate::record::EntryRecord`]), so
//!   export gives back the file; rows get ascending entry keys in file order, consecutive
//!   within one import, which `session_runs` records as one run;
//! - parents are resolved as pi's id index does (a later duplicate id wins); parent chains that
//!   form a cycle are cut (the entry closing the cycle becomes a root, counted in
//!   `SessionRecord::cycle_cuts`) so depth is always finite;
//! - an append that would change how *old* entries resolve (a new entry reusing an old id, or
//!   supplying an id old entries were orphaned on) falls back to a full re-import, so the result
//!   never depends on how the file was read in pieces;
//! - lines are parsed in parallel (rayon) a chunk at a time; all writes come from this thread;
//! - each tree node's outline row ([`crate::outline`]) is worked out with the parse (from the
//!   typed view, a second parse only for the rare entries it cannot describe), added to the
//!   outline blocks by the worker that prepares the chunk (the keys a chunk's rows will get are
//!   counted ahead, and the writer checks them), and the blocks are written in file order; an
//!   append reopens the session's last, partial block, so the blocks are the same as those of
//!   a single import of the whole file, in chunks of any size.
//!
//! The prefix check hashes two windows instead of the whole prefix so that importing an append
//! to a 1 GB file costs about as much as importing the appended bytes; pi only ever appends or
//! rewrites whole files, and a rewrite changes the header line (new session id or timestamp) or
//! the last line in practice.
//!
//! v1/v2 files need migration (pisess-migrate); see [`migrate_hook`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use pisess_formats::entry::{Content, Entry, EntryType, Role};
use pisess_formats::line::parse_line;
use pisess_formats::open::{not_regular, open_regular};
use pisess_formats::reader::{ChunkReader, Line};
use rayon::prelude::*;
use redb::{Durability, ReadableTable, Table, WriteTransaction};

use crate::error::StoreError;
use crate::ids::{EntryKey, Link, SessionKey};
use crate::outline::{BlockBuilder, NodeFacts, OUTLINE, RowIn};
use crate::record::{EntryRecord, RecordRef, Rkyv, RowKind, SessionRecord, decode_session, encode};
use crate::row_block::{self, Block, RowBlockBuilder};
use crate::schema::{self, META, META_NEXT_ENTRY, META_NEXT_SESSION};
use crate::source_copy::SourceCopy;
use crate::store::{Store, meta_get};

mod ahead;

/// Size of the head and tail windows hashed to check an old prefix.
pub const WINDOW: u64 = 64 * 1024;

/// What an import did with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// First import.
    New,
    /// Only the appended lines were read.
    Grown,
    /// Nothing was read.
    Unchanged,
    /// The file changed other than by an append and was read again.
    Rewritten,
    /// The file could not be imported (see [`FileReport::error`]).
    Failed,
}

/// The result of importing one file.
#[derive(Debug, Clone)]
pub struct FileReport {
    /// The file as given.
    pub path: PathBuf,
    /// What happened.
    pub outcome: Outcome,
    /// The session it is stored as; on a failed import, set only for [`FileError::CutShort`]:
    /// the stored session the file was not read over.
    pub session: Option<SessionKey>,
    /// Bytes read and parsed.
    pub bytes_read: u64,
    /// Physical lines read and parsed.
    pub lines_read: u64,
    /// Records (entries after the header) added.
    pub entries_added: u64,
    /// Lines read this time that the reader warned about (pi drops or misreads them; pisess
    /// keeps their bytes, and recovers what it can), and the first of them ("line N: what").
    pub warned_lines: u64,
    /// See `warned_lines`.
    pub first_warning: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
}

/// The result of an import.
#[derive(Debug, Clone, Default)]
pub struct ImportReport {
    /// One report per file, in the order imported.
    pub files: Vec<FileReport>,
    /// Sessions whose files were found missing and marked gone.
    pub gone: u64,
}

impl ImportReport {
    /// Files with the given outcome.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.files.iter().filter(|f| f.outcome == outcome).count()
    }
    /// Bytes parsed over all files.
    pub fn bytes_read(&self) -> u64 {
        self.files.iter().map(|f| f.bytes_read).sum()
    }
    /// Lines parsed over all files.
    pub fn lines_read(&self) -> u64 {
        self.files.iter().map(|f| f.lines_read).sum()
    }
    /// Entries added over all files.
    pub fn entries_added(&self) -> u64 {
        self.files.iter().map(|f| f.entries_added).sum()
    }
}

/// Progress of an import, for a progress bar.
#[derive(Debug)]
#[non_exhaustive]
pub enum ImportEvent<'a> {
    /// The files to look at were found.
    Start {
        /// Number of files.
        files: usize,
    },
    /// A file is being read from `offset`; it has `size` bytes.
    FileStart {
        /// The file.
        path: &'a Path,
        /// Where reading starts.
        offset: u64,
        /// The file's size.
        size: u64,
    },
    /// More bytes of the current file were parsed.
    Bytes(u64),
    /// A file is done.
    FileDone(&'a FileReport),
}

/// Import settings.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Bytes read (and parsed in parallel) at a time.
    pub chunk_size: usize,
    /// Read every known file again from its first byte, whatever its size and time say: the
    /// usual checks (same size and mtime: unchanged; longer, with the same first and last
    /// [`WINDOW`] bytes of the old part: grown) cannot see an edit that keeps the size and
    /// time, or one inside the old part of a file that also grew.
    pub full: bool,
}

impl Default for ImportOptions {
    fn default() -> Self {
        Self {
            chunk_size: pisess_formats::reader::DEFAULT_CHUNK_SIZE,
            full: false,
        }
    }
}

/// Why one file could not be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a pi session.
    #[error("{path} is not a pi session: {reason}")]
    NotASession {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The file needs migration (an internal signal: the importer migrates and retries).
    #[error("{path} is a version {version} session; importing it needs migration to v3")]
    NeedsMigration {
        /// The file.
        path: PathBuf,
        /// Its format version.
        version: f64,
    },
    /// The file's canonical path is not UTF-8: the catalogue keys sessions by their path as a
    /// string, so the file could be neither recorded nor found again.
    #[error("cannot import {path}: its path is not UTF-8, which the store cannot record")]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// Migrating a v1/v2 file failed.
    #[error("cannot migrate {path} to v3")]
    Migrate {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: pisess_migrate::MigrateError,
    },
    /// The file changed while it was being read (truncated, replaced): nothing of it was
    /// stored; the next import reads it again.
    #[error(
        "{path} changed while it was being imported ({what}); nothing of it was stored, import it again"
    )]
    Changed {
        /// The file.
        path: PathBuf,
        /// What was seen.
        what: String,
    },
    /// The file is a strict prefix of the session's stored bytes: it was cut short (a
    /// truncation, a restore of an old copy) and reading it would drop from the store the
    /// entries only the store still holds. Left as it is unless the import is `full`.
    #[error(
        "{path} was cut short: its {size} bytes are the first {size} of the {stored} bytes the \
         store holds for it; the store keeps its copy ({}){}",
        if *.holds_session {
            "import --full replaces it"
        } else {
            "what is left holds no session line, so import --full cannot read it either; \
             `pisess export FILE -o OUT` writes the stored copy out"
        },
        torn_note(.torn.as_deref(), path)
    )]
    CutShort {
        /// The file.
        path: PathBuf,
        /// Its size now.
        size: u64,
        /// The size of the stored copy.
        stored: u64,
        /// Whether what is left starts with a whole session line (which `--full` would read).
        holds_session: bool,
        /// A last line pisess's session writer saved and cut, exactly the missing bytes
        /// ([`crate::agent::writer::saved_torn_line`]).
        torn: Option<PathBuf>,
    },
}

/// Whether the file's first line (read up to [`WINDOW`] bytes) is a session line (a JSON
/// object whose `type` is `session`), as pi's loader wants it; for the advice of a cut-short
/// file only.
fn starts_with_session_line(path: &Path) -> bool {
    let Ok(f) = open_regular(path) else {
        return false;
    };
    let mut head = Vec::new();
    if f.take(WINDOW).read_to_end(&mut head).is_err() {
        return false;
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let first = first.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(first);
    type_is_session(first)
}

/// The end of the "cut short" message when the missing bytes are a line the session writer
/// saved before it cut them (a write killed in between).
pub fn torn_note(torn: Option<&Path>, path: &Path) -> String {
    torn.map_or_else(String::new, |t| {
        format!(
            "; {} holds the missing bytes, a last line pisess saved before a write that did not \
             finish cut it: `cat {} >> {}` puts it back",
            t.display(),
            t.display(),
            path.display()
        )
    })
}

/// Hook for v1/v2 files: they are migrated to v3 (by `pisess-migrate`) before import.
///
/// The first read of a file stops at its header when pi would migrate it
/// ([`FileError::NeedsMigration`], an internal signal); the importer then calls this hook, which
/// writes `pisess_migrate::migrate_file`'s output (deterministic ids; the source is only read)
/// to `scratch`, and imports that instead. The stored rows are the *migrated* lines, so queries
/// see v3 entries and exporting the session gives exactly the migrated file. The session record
/// keeps the source's size, mtime and window hashes (so an unchanged source is skipped) and the
/// source's version (so a grown v1/v2 file is re-imported in full rather than appended to).
///
/// The source is the descriptor the import opened (its first `size` bytes, read with
/// positioned reads), never the path again: a file replaced by rename meanwhile would be
/// migrated and stored under the hashes of the file the import looked at.
///
/// Returns what the migration found in the source that pi drops or misreads
/// ([`migration_warnings`]): the lines of a migrated copy are not the source's, so the import
/// reports these instead of its own.
fn migrate_hook(
    path: &Path,
    source: &File,
    size: u64,
    scratch: &Path,
) -> Result<(u64, Option<String>), FileError> {
    let fail = |source_err| FileError::Migrate {
        path: path.to_path_buf(),
        source: source_err,
    };
    let out = File::create(scratch).map_err(|e| fail(pisess_migrate::MigrateError::Write(e)))?;
    let mut out = std::io::BufWriter::new(out);
    let window = Window {
        file: source,
        len: size,
        pos: 0,
    };
    let outcome = pisess_migrate::migrate_seekable(window, &mut out).map_err(fail)?;
    std::io::Write::flush(&mut out).map_err(|e| fail(pisess_migrate::MigrateError::Write(e)))?;
    Ok(migration_warnings(&outcome))
}

/// The lines of a migrated source that pi drops or misreads, as the import counts them for a
/// v3 file (the reader's warnings about lines), plus the records kept outside the parent chain
/// because pisess cannot read them (pi's migration chains them); the count and the first
/// ("line N: what", or the migration's note). Problems of the file as a whole (a byte order
/// mark, the header's version or cwd) are not lines: the import of a v3 file names none either.
fn migration_warnings(o: &pisess_migrate::MigrationOutcome) -> (u64, Option<String>) {
    use pisess_formats::ProblemKind as K;
    let mut lines = o.problems.iter().filter(|p| {
        p.severity() == pisess_formats::Severity::Warning
            && !matches!(
                p.kind,
                K::Bom | K::CwdFileUrl { .. } | K::FutureVersion { .. }
            )
    });
    let mut unread = o.unparsable_kept();
    let first = lines
        .clone()
        .next()
        .map(|p| format!("line {}: {}", p.line, p.kind))
        .or_else(|| unread.clone().next().map(ToString::to_string));
    let n = lines.by_ref().count() + unread.by_ref().count();
    (n as u64, first)
}

/// The first `len` bytes of an open file as a reader of its own, read with positioned reads
/// (the descriptor's offset never moves); a file shorter than `len` ends early, and the window
/// hashes taken after it then report the file changed.
struct Window<'f> {
    file: &'f File,
    len: u64,
    pos: u64,
}

impl Read for Window<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let left = self.len.saturating_sub(self.pos);
        let want = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Window<'_> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let Some(target) = target else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            ));
        };
        self.pos = target;
        Ok(target)
    }
}

/// The file an import writes, as its `stat` found it.
#[derive(Clone, Copy)]
struct Target<'p> {
    /// Its canonical path.
    canon: &'p Path,
    /// Its key in the catalogue.
    key: &'p str,
    size: u64,
    mtime: i64,
}

/// What `write_file` reads: the source itself, or its migrated copy.
struct Source<'p> {
    /// The file read.
    path: &'p Path,
    /// Its size.
    size: u64,
    /// The source's version when `path` is a migrated copy.
    migrated_from: Option<f64>,
    /// The source, as opened once by [`Store::write_source`]: read when `path` is the source,
    /// and always the file whose window hashes are stored.
    origin: &'p File,
}

#[derive(Clone)]
enum Plan {
    Fresh(Option<(SessionKey, SessionRecord)>),
    Append(SessionKey, SessionRecord),
}

/// An append that would change old entries; the file must be read again in full.
struct Conflict;

impl Store {
    /// Imports files and folders (folders recursively, `*.jsonl` files), reporting progress.
    ///
    /// Per-file problems are reported in the [`ImportReport`]; only store failures are errors.
    /// Sessions that were imported from a file inside one of the given folders, or from a file
    /// given by its path, and whose file no longer exists are marked gone.
    pub fn import(
        &self,
        paths: &[PathBuf],
        opts: &ImportOptions,
        progress: &mut dyn FnMut(ImportEvent<'_>),
    ) -> Result<ImportReport, StoreError> {
        self.import_paths(paths, opts, progress, true)
    }

    /// [`Self::import`]; a path given as a file that no longer exists is marked gone only when
    /// `named_gone` (an import the user asked for), else it fails as unreadable (a session
    /// refreshed on the fly by a command reading it stays as it is).
    fn import_paths(
        &self,
        paths: &[PathBuf],
        opts: &ImportOptions,
        progress: &mut dyn FnMut(ImportEvent<'_>),
        named_gone: bool,
    ) -> Result<ImportReport, StoreError> {
        let (files, folders) = discover(paths, &crate::store::trash_dir(self.path()));
        // The common case of a re-import: nothing changed. Decided in one read transaction,
        // so it also works on a store opened read-only and writes nothing.
        if !opts.full
            && let Some(sessions) = self.unchanged(&files, &folders)?
        {
            progress(ImportEvent::Start { files: files.len() });
            let report = unchanged_report(files, sessions);
            for r in &report.files {
                progress(ImportEvent::FileDone(r));
            }
            return Ok(report);
        }
        self.writer_db()?;
        // A path given as a file that no longer exists, and that the catalogue holds a live
        // session for, is marked gone (as `git add` of a deleted file stages its removal);
        // one the store never knew fails as before.
        let mut deleted = Vec::new();
        let mut files = files;
        if named_gone {
            files.retain(|f| {
                let key = (f.name_at == 0 && f.error.is_none())
                    .then(|| self.known_deleted(&f.path))
                    .flatten();
                deleted.extend(key.clone());
                key.is_none()
            });
        }
        progress(ImportEvent::Start { files: files.len() });
        let mut report = ImportReport::default();
        for key in &deleted {
            report.gone += u64::from(self.mark_file_gone(key)?);
        }
        // The next new small file is read and prepared by a helper while this thread stores the
        // current one (see `ahead`).
        let worker = if files.len() > 1 {
            ahead::Worker::start()
        } else {
            None
        };
        let mut ahead: Option<ahead::Pending> = None;
        for (i, f) in files.iter().enumerate() {
            let mine = ahead.take();
            ahead = worker
                .as_ref()
                .zip(files.get(i + 1))
                .and_then(|(worker, next)| self.read_ahead(worker, next, opts));
            let r = match &f.error {
                Some(e) => failed_report(f.path.clone(), e.to_string()),
                None => {
                    let canon = f.canon();
                    let next = ahead.as_ref();
                    self.import_one(&f.path, canon.as_deref(), opts, progress, mine, next)?
                }
            };
            progress(ImportEvent::FileDone(&r));
            report.files.push(r);
        }
        report.gone += self.mark_gone(&folders)?;
        // The per-file commits skip fsync; one durable commit at the end persists them all
        // (none when nothing was written: an unchanged folder costs a stat per file).
        let wrote = report.gone > 0
            || report
                .files
                .iter()
                .any(|f| f.outcome != Outcome::Unchanged && f.outcome != Outcome::Failed)
            || self
                .unreported_write
                .swap(false, std::sync::atomic::Ordering::Relaxed);
        if wrote {
            let tx = self.writer_db()?.begin_write()?;
            tx.commit()?;
        }
        Ok(report)
    }

    /// Starts reading `f` ahead ([`ahead`]) when the folder scan found it a regular file of one
    /// chunk at most and the store does not know it.
    fn read_ahead(
        &self,
        worker: &ahead::Worker,
        f: &Found,
        opts: &ImportOptions,
    ) -> Option<ahead::Pending> {
        let (size, _) = f.stat?;
        if f.error.is_some() || size == 0 || size > opts.chunk_size as u64 {
            return None;
        }
        let canon = f.canon()?;
        let key = catalogue_key(&canon)?;
        let rtx = self.db.begin_read().ok()?;
        let sources = rtx.open_table(schema::SOURCES).ok()?;
        if !matches!(sources.get(key), Ok(None)) {
            return None;
        }
        worker.read(canon, opts.chunk_size)
    }

    /// Imports one file (no progress reporting). A file that no longer exists fails as
    /// unreadable; its session is not marked gone.
    pub fn import_file(&self, path: impl AsRef<Path>) -> Result<FileReport, StoreError> {
        let path = path.as_ref().to_path_buf();
        let report = self.import_paths(
            std::slice::from_ref(&path),
            &ImportOptions::default(),
            &mut |_| {},
            false,
        )?;
        Ok(report.files.into_iter().next().unwrap_or_else(|| {
            failed_report(path, "the import reported nothing for it".to_owned())
        }))
    }

    /// The report of importing `paths` into the store at `store` when that would change
    /// nothing, decided from the copy of the store's catalogue beside it
    /// ([`crate::source_copy`]) without opening the store; `None` when there is no valid copy
    /// or a file changed (then open the store and [`Store::import`] as usual). Same answer as
    /// [`Store::import`]'s when it is `Some`.
    pub fn unchanged_by_copy(store: &Path, paths: &[PathBuf]) -> Option<ImportReport> {
        let copy = SourceCopy::load(store)?;
        let (files, folders) = discover(paths, &crate::store::trash_dir(store));
        let sessions = unchanged_in(&copy, &files, &folders).ok().flatten()?;
        Some(unchanged_report(files, sessions))
    }

    /// [`unchanged_in`] the store's `sources` table. On a store opened read-only (nothing can
    /// write it meanwhile, see [`crate::source_copy`]), a yes also writes the table's copy
    /// beside the store when there is no valid one, so that the next re-import need not open it.
    fn unchanged(
        &self,
        files: &[Found],
        folders: &[PathBuf],
    ) -> Result<Option<Vec<u64>>, StoreError> {
        let rtx = self.db.begin_read()?;
        let sources = rtx.open_table(schema::SOURCES)?;
        let report = unchanged_in(&sources, files, folders)?;
        if report.is_some()
            && !self.is_writable()
            && !self.is_absent()
            && SourceCopy::load(self.path()).is_none()
        {
            // Best effort: without a copy the next re-import opens the store, as it did here.
            let rows = sources.iter().and_then(|rows| {
                rows.map(|row| row.map(|(path, stat)| (path.value().to_owned(), stat.value())))
                    .collect::<Result<Vec<_>, _>>()
            });
            if let Ok(rows) = rows {
                let _ = crate::source_copy::write(self.path(), &rows);
            }
        }
        Ok(report)
    }

    fn import_one(
        &self,
        path: &Path,
        canon: Option<&Path>,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(ImportEvent<'_>),
        ahead: Option<ahead::Pending>,
        next: Option<&ahead::Pending>,
    ) -> Result<FileReport, StoreError> {
        let mut report = FileReport {
            path: path.to_path_buf(),
            outcome: Outcome::Failed,
            session: None,
            bytes_read: 0,
            lines_read: 0,
            entries_added: 0,
            warned_lines: 0,
            first_warning: None,
            error: None,
        };
        let fail = |mut report: FileReport, e: FileError| {
            report.error = Some(error_chain(&e));
            Ok(report)
        };
        let (canon, size, mtime) = match stat(path, canon) {
            Ok(x) => x,
            Err(e) => return fail(report, e),
        };
        // A key made lossily would name no file: the import would be followed at once by marking
        // the session gone.
        let Some(key) = catalogue_key(&canon).map(str::to_owned) else {
            return fail(report, FileError::NotUtf8 { path: canon });
        };
        let existing = {
            let rtx = self.db.begin_read()?;
            let sources = rtx.open_table(schema::SOURCES)?;
            match sources.get(key.as_str())? {
                None => None,
                Some(s) => {
                    let s = s.value().0;
                    let sessions = rtx.open_table(schema::SESSIONS)?;
                    let rec = sessions.get(s)?.ok_or_else(|| {
                        StoreError::Inconsistent(format!("source {key} names missing session {s}"))
                    })?;
                    Some((SessionKey(s), decode_session(rec.value().bytes(), s)?))
                }
            }
        };
        let plan = match existing {
            None => Plan::Fresh(None),
            Some((s, rec)) if !opts.full && rec.file_size == size && rec.mtime_ns == mtime => {
                report.outcome = Outcome::Unchanged;
                report.session = Some(s);
                if rec.gone {
                    self.set_gone(s, false)?;
                    self.unreported_write
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                return Ok(report);
            }
            Some((s, rec))
                if !opts.full
                    && self
                        .snapshot()?
                        .refuses_as_cut_short(s, &rec, &canon, size)? =>
            {
                report.session = Some(s);
                return fail(
                    report,
                    FileError::CutShort {
                        torn: crate::agent::writer::saved_torn_line(&canon, rec.file_size - size),
                        holds_session: starts_with_session_line(&canon),
                        path: canon,
                        size,
                        stored: rec.file_size,
                    },
                );
            }
            Some((s, rec)) => {
                // (Old bytes that end in a line cut short are checked again once the
                // store is open for writing: `Writer::drop_torn_line`.)
                let grown = !opts.full
                    && size > rec.file_size
                    && rec.version >= 3.0
                    && windows_match(&canon, &rec).unwrap_or(false);
                if grown {
                    Plan::Append(s, rec)
                } else {
                    Plan::Fresh(Some((s, rec)))
                }
            }
        };
        // The file read ahead, when it is this one and new (waited for in any case).
        let ahead = ahead
            .and_then(|a| a.take(&canon, size, mtime))
            .filter(|_| matches!(plan, Plan::Fresh(None)));
        let to = Target {
            canon: &canon,
            key: &key,
            size,
            mtime,
        };
        let result = match self.write_source(to, plan, opts, progress, ahead, next)? {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(Conflict)) => {
                // An append that changes old entries: read everything again.
                let existing = self.session_record_by_source(&key)?;
                match self.write_source(to, Plan::Fresh(existing), opts, progress, None, next)? {
                    Ok(Ok(mut r)) => {
                        r.outcome = Outcome::Rewritten;
                        Ok(r)
                    }
                    Ok(Err(Conflict)) => Err(StoreError::Inconsistent(
                        "a full import reported an append conflict".into(),
                    )),
                    Err(e) => return fail(report, e),
                }
            }
            Err(e) => return fail(report, e),
        };
        let mut r = result?;
        r.path = path.to_path_buf();
        Ok(r)
    }

    fn session_record_by_source(
        &self,
        key: &str,
    ) -> Result<Option<(SessionKey, SessionRecord)>, StoreError> {
        let rtx = self.db.begin_read()?;
        let sources = rtx.open_table(schema::SOURCES)?;
        let Some(s) = sources.get(key)?.map(|v| v.value().0) else {
            return Ok(None);
        };
        let sessions = rtx.open_table(schema::SESSIONS)?;
        let Some(rec) = sessions.get(s)? else {
            return Ok(None);
        };
        Ok(Some((
            SessionKey(s),
            decode_session(rec.value().bytes(), s)?,
        )))
    }

    /// Sets a session's gone flag in its record and its source row; `false` when the session
    /// has no record (a source row left by a damaged store: `verify` reports it, nothing is
    /// written).
    fn set_gone(&self, s: SessionKey, gone: bool) -> Result<bool, StoreError> {
        let mut tx = self.writer_db()?.begin_write()?;
        tx.set_durability(Durability::None)?;
        {
            let mut sessions = tx.open_table(schema::SESSIONS)?;
            let rec = match sessions.get(s.0)? {
                Some(r) => decode_session(r.value().bytes(), s.0)?,
                None => return Ok(false),
            };
            let rec = SessionRecord { gone, ..rec };
            let bytes = encode(&rec)?;
            sessions.insert(s.0, RecordRef::new(&bytes))?;
            // The source row carries the same flag (schema invariant).
            let mut sources = tx.open_table(schema::SOURCES)?;
            let owner = sources.get(rec.path.as_str())?.map(|v| v.value().0);
            if owner == Some(s.0) {
                sources.insert(rec.path.as_str(), schema::source_stat(s.0, &rec))?;
            }
        }
        tx.commit()?;
        Ok(true)
    }

    /// The catalogue key of the live session imported from `path` (given as a file), when
    /// `path` no longer exists ([`deleted_key`]); `None` otherwise.
    fn known_deleted(&self, path: &Path) -> Option<String> {
        let missing = std::fs::symlink_metadata(path)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound);
        let key = deleted_key(path).filter(|_| missing)?;
        let rtx = self.db.begin_read().ok()?;
        let live = rtx
            .open_table(schema::SOURCES)
            .ok()?
            .get(key.as_str())
            .ok()
            .flatten()
            .is_some_and(|v| !v.value().3);
        live.then_some(key)
    }

    /// Marks the live session imported from the catalogue key `key` gone; whether one was.
    fn mark_file_gone(&self, key: &str) -> Result<bool, StoreError> {
        let owner = {
            let rtx = self.db.begin_read()?;
            let sources = rtx.open_table(schema::SOURCES)?;
            sources
                .get(key)?
                .map(|v| v.value())
                .filter(|(_, _, _, gone)| !gone)
        };
        match owner {
            Some((s, _, _, _)) => self.set_gone(SessionKey(s), true),
            None => Ok(false),
        }
    }

    /// Marks sessions imported from inside `folders` whose files no longer exist; returns how
    /// many were marked.
    fn mark_gone(&self, folders: &[PathBuf]) -> Result<u64, StoreError> {
        if folders.is_empty() {
            return Ok(0);
        }
        let mut missing = Vec::new();
        {
            let rtx = self.db.begin_read()?;
            let sources = rtx.open_table(schema::SOURCES)?;
            for row in sources.iter()? {
                let (path, stat) = row?;
                let path = path.value();
                let (s, _, _, gone) = stat.value();
                let inside = folders.iter().any(|f| Path::new(path).starts_with(f));
                if inside && !gone && vanished(Path::new(path)) {
                    missing.push(SessionKey(s));
                }
            }
        }
        let mut marked = 0;
        for s in &missing {
            if self.set_gone(*s, true)? {
                marked += 1;
            }
        }
        Ok(marked)
    }

    /// [`Self::write_file`] on the source; when the source needs migration, on its migrated
    /// copy (see [`migrate_hook`]).
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn write_source(
        &self,
        to: Target<'_>,
        plan: Plan,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(ImportEvent<'_>),
        ahead: Option<ahead::Ahead>,
        next: Option<&ahead::Pending>,
    ) -> Result<Result<Result<FileReport, Conflict>, FileError>, StoreError> {
        let canon = to.canon;
        // Opened once: both reads below and the stored hashes are of this very file (for a
        // file read ahead, the descriptor its bytes came from).
        let (origin, first) = match ahead {
            Some(a) => (a.origin, Some(a.first)),
            None => match open_regular(canon) {
                Ok(f) => (f, None),
                Err(source) => {
                    return Ok(Err(FileError::Io {
                        path: canon.to_path_buf(),
                        source,
                    }));
                }
            },
        };
        let content = Source {
            path: canon,
            size: to.size,
            migrated_from: None,
            origin: &origin,
        };
        let version =
            match self.write_file(to, &content, plan.clone(), opts, progress, first, next)? {
                Err(FileError::NeedsMigration { version, .. }) => version,
                other => return Ok(other),
            };
        // One writer holds the store, so one scratch file beside it is enough; a copy left by a
        // crash is simply overwritten. Its name is the store's with `.migrating` added: two
        // stores in one folder (`s.redb`, `s.old`) never share it, and it never ends in
        // `.jsonl` (pi would list it as a session when the store sits in a session folder).
        let scratch = {
            let mut name = self.path().as_os_str().to_owned();
            name.push(".migrating");
            PathBuf::from(name)
        };
        let warned = match migrate_hook(canon, &origin, to.size, &scratch) {
            Ok(w) => w,
            Err(e) => {
                let _ = std::fs::remove_file(&scratch);
                return Ok(Err(e));
            }
        };
        let result = match std::fs::metadata(&scratch) {
            Ok(md) => {
                let content = Source {
                    path: &scratch,
                    size: md.len(),
                    migrated_from: Some(version),
                    origin: &origin,
                };
                self.write_file(to, &content, plan, opts, progress, None, next)
                    .map(|r| {
                        r.map(|r| {
                            r.map(|mut report| {
                                report.warned_lines += warned.0;
                                report.first_warning = report.first_warning.or(warned.1);
                                report
                            })
                        })
                    })
            }
            Err(source) => Ok(Err(FileError::Io {
                path: scratch.clone(),
                source,
            })),
        };
        let _ = std::fs::remove_file(&scratch);
        result
    }

    /// Reads (part of) a file (`content`: the source or its migrated copy) and writes it in one
    /// transaction. `first_chunk`: the whole of a new file, read ahead ([`ahead`]); then
    /// nothing more is read. `next`: the file read ahead after this one, told its keys as soon
    /// as this file's rows are counted.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn write_file(
        &self,
        to: Target<'_>,
        content: &Source<'_>,
        plan: Plan,
        opts: &ImportOptions,
        progress: &mut dyn FnMut(ImportEvent<'_>),
        first_chunk: Option<ahead::FirstChunk>,
        next: Option<&ahead::Pending>,
    ) -> Result<Result<Result<FileReport, Conflict>, FileError>, StoreError> {
        let Target {
            canon,
            key,
            size,
            mtime,
        } = to;
        let mut tx = self.writer_db()?.begin_write()?;
        tx.set_durability(Durability::None)?;
        tx.set_quick_repair(true);
        let io = |source| FileError::Io {
            path: canon.to_path_buf(),
            source,
        };
        // The source (read directly, or through its migrated copy) is the descriptor
        // `write_source` opened: its window hashes (and, for an append, the check of the old
        // prefix) are taken from this very file, not from the path again, which may name
        // another file by then (a file replaced by rename while it was read was stored as the
        // old file's bytes under the new one's hashes, and later "grew" into a mix of both).
        let hashed = content.origin;
        let opened = match content.migrated_from {
            None => hashed.try_clone(),
            Some(_) => open_regular(content.path),
        };
        let mut file = match opened {
            Ok(f) => f,
            Err(e) => return Ok(Err(io(e))),
        };
        if let Plan::Append(_, old) = &plan {
            match window_hashes_of(hashed, old.file_size) {
                Ok((h, t)) if h == old.head_hash && t == old.tail_hash => {}
                // Not the file the plan looked at: read it all again.
                Ok(_) => return Ok(Ok(Err(Conflict))),
                Err(e) => return Ok(Err(changed_or_io(canon, e))),
            }
            // A header read from a line pi skips (glued records, a byte order mark) with no
            // whole line after it stands only until a whole-line header follows: when the
            // grown file's reader takes another header, everything is read again.
            match header_unchanged(hashed, content.path, &old.header_json, old.file_size) {
                Ok(true) => {}
                Ok(false) => return Ok(Ok(Err(Conflict))),
                Err(e) => return Ok(Err(changed_or_io(canon, e))),
            }
        }
        let mut w = Writer::new(&tx)?;
        // The digest of the stored blocks a fresh read replaces, when the file kept its size.
        let mut same_as = None;
        let (s, rec, mut outcome, start) = match plan {
            Plan::Fresh(None) => {
                let s = SessionKey(w.next_session);
                w.next_session += 1;
                w.mark_fresh(s);
                (s, SessionRecord::default(), Outcome::New, 0)
            }
            Plan::Fresh(Some((s, old))) => {
                // Read again (`--full`, or a changed time): the same bytes store the same
                // blocks, which the report then counts as unchanged.
                // (A v1/v2 file's rows are its migrated copy, which does not keep every byte.)
                if old.file_size == size && old.version >= 3.0 && content.migrated_from.is_none() {
                    same_as = Some(w.rows_digest(s)?);
                }
                w.delete_session(s, &old)?;
                w.mark_fresh(s);
                (s, SessionRecord::default(), Outcome::Rewritten, 0)
            }
            Plan::Append(s, mut old) => {
                // The old bytes ended in a line cut short: read it again from its start.
                if !old.ends_with_newline && !w.drop_torn_line(s, &mut old)? {
                    return Ok(Ok(Err(Conflict)));
                }
                let start = old.file_size;
                (s, old, Outcome::Grown, start)
            }
        };
        if let Err(e) = file.seek(SeekFrom::Start(start)) {
            return Ok(Err(io(e)));
        }
        progress(ImportEvent::FileStart {
            path: canon,
            offset: start,
            size,
        });
        let mut st = FileState::new(s, rec, start, canon);
        st.migrated_from = content.migrated_from;
        // The open blocks of rows and of the outline: the session's last ones when this
        // append continues them.
        let mut carry = RowBlockBuilder::new();
        let mut outline_open = None;
        st.rows_first = w.next_entry;
        // The key of the next chunk's first row.
        let mut next_key = w.next_entry;
        if st.append {
            outline_open = w.open_outline(s)?;
            if let Some((first, b)) = w.open_rows(s)? {
                st.rows_first = first;
                carry = b;
            }
        }
        // A file read ahead is all in `first_chunk`, unless it was sealed for other keys than
        // it gets (the file before it was not stored as foreseen): then it is read again.
        let mut first_chunk = first_chunk.filter(|f| f.fits(s.0, next_key));
        let unread = if first_chunk.is_some() {
            0
        } else {
            content.size - start
        };
        // Bytes of the file prepared so far: once they reach its end, the next file's keys are
        // known.
        let mut covered = start;
        let tell_next = |covered: u64, next_session: u64, next_key: u64| {
            if covered >= content.size
                && let Some(n) = next
            {
                n.keys(next_session, next_key);
            }
        };
        let mut reader = ChunkReader::with_chunk_size(
            source_bytes(file.take(unread), content.path),
            opts.chunk_size,
        );
        if start > 0 {
            // Appended lines: a BOM there is no file's mark but a line's bytes.
            reader = reader.mid_file();
        }
        let mut first = true;
        // Line numbers from the reader count from the start offset.
        let line_base = st.rec.lines;
        // Chunks are pipelined: while this thread writes chunk k, a worker reads chunk k+1 and
        // parses, hashes, compresses and serialises it and builds its outline blocks (on the
        // rayon pool). Until the header is found each chunk is read, prepared and classified
        // on its own first (header detection is serial).
        let mut pending: Option<Prepared> = None;
        loop {
            let prepared = if st.header_pending {
                let (chunk, bom, ready) = match first_chunk.take() {
                    Some(f) => (f.chunk, f.bom, Some((f.prepared, f.sealed))),
                    None => match reader.next_chunk() {
                        Ok(Some(c)) => {
                            let bom = first && start == 0 && reader.had_bom();
                            (c, bom, None)
                        }
                        Ok(None) => break,
                        Err(e) => return Ok(Err(io(e))),
                    },
                };
                first = false;
                if let Some(p) = pending.take()
                    && w.write_prepared(&mut st, p, progress)?.is_err()
                {
                    return Ok(Ok(Err(Conflict)));
                }
                let mut p = match ready {
                    // Classified and sealed ahead, for this session and these keys (`fits`),
                    // from the empty blocks a new file starts with.
                    Some((p, Some(sealed))) => {
                        st.rec = sealed.rec;
                        st.header_pending = false;
                        p
                    }
                    ready => {
                        let mut p = match ready {
                            Some((mut p, None)) => {
                                p.rebase(s.0, next_key);
                                p
                            }
                            _ => prepare_chunk(&chunk, s.0, start, line_base, bom, next_key, None)?,
                        };
                        if let Err(e) = st.classify(&mut p.rows, chunk.bytes()) {
                            return Ok(Err(e));
                        }
                        p.seal(
                            (std::mem::take(&mut carry), outline_open.take()),
                            chunk.bytes(),
                        )?;
                        p
                    }
                };
                carry = std::mem::take(&mut p.carry);
                outline_open = p.outline_open.take();
                next_key += p.rows.len() as u64;
                covered += p.bytes;
                tell_next(covered, w.next_session, next_key);
                p
            } else {
                // The worker reads the next chunk too, which takes a tenth of the writer
                // thread's work off it on a large file (the wall did not move: the chunk loop is
                // bound by the CPU of both cores; benches/HISTORY.md, session 17).
                let prev = pending.take();
                let open = (std::mem::take(&mut carry), outline_open.take());
                let reader = &mut reader;
                let was_first = first;
                first = false;
                let (next, written) = std::thread::scope(|scope| {
                    let worker = scope.spawn(move || match reader.next_chunk() {
                        Ok(Some(chunk)) => {
                            let bom = was_first && start == 0 && reader.had_bom();
                            Next::Chunk(prepare_chunk(
                                &chunk,
                                s.0,
                                start,
                                line_base,
                                bom,
                                next_key,
                                Some(open),
                            ))
                        }
                        Ok(None) => Next::End(open),
                        Err(e) => Next::Io(e),
                    });
                    let written = match prev {
                        Some(p) => w.write_prepared(&mut st, p, progress),
                        None => Ok(Ok(())),
                    };
                    let next = worker.join().unwrap_or_else(|_| {
                        Next::Chunk(Err(StoreError::Inconsistent(
                            "an import worker panicked".into(),
                        )))
                    });
                    (next, written)
                });
                if written?.is_err() {
                    return Ok(Ok(Err(Conflict)));
                }
                match next {
                    Next::Chunk(prepared) => {
                        let mut p = prepared?;
                        carry = std::mem::take(&mut p.carry);
                        outline_open = p.outline_open.take();
                        next_key += p.rows.len() as u64;
                        covered += p.bytes;
                        tell_next(covered, w.next_session, next_key);
                        p
                    }
                    Next::End(open) => {
                        (carry, outline_open) = open;
                        break;
                    }
                    Next::Io(e) => return Ok(Err(io(e))),
                }
            };
            pending = Some(prepared);
        }
        if let Some(p) = pending.take()
            && w.write_prepared(&mut st, p, progress)?.is_err()
        {
            return Ok(Ok(Err(Conflict)));
        }
        if st.rec.session_id.is_empty() && st.header_pending {
            let reason = if size == 0 {
                zero_size_reason(canon)
            } else {
                "no header line".to_owned()
            };
            return Ok(Err(FileError::NotASession {
                path: canon.to_path_buf(),
                reason,
            }));
        }
        if !carry.is_empty() {
            let rows = carry.rows() as u64;
            w.write_block(&mut st, rows, &carry.finish())?;
        }
        if st.rows_first != w.next_entry {
            return Err(StoreError::Inconsistent(format!(
                "{}: the blocks of rows end at key {}, the rows at {}",
                canon.display(),
                st.rows_first,
                w.next_entry
            )));
        }
        w.flush_outline(s, outline_open)?;
        w.link(&mut st)?;
        if let Some(run) = st.run {
            w.add_run(s, run)?;
        }
        // Finish the session record.
        let (head, tail) = match window_hashes_of(hashed, size) {
            Ok(h) => h,
            Err(e) => return Ok(Err(changed_or_io(canon, e))),
        };
        let mut rec = st.rec;
        rec.path = key.to_owned();
        rec.file_size = size;
        rec.mtime_ns = mtime;
        rec.ends_with_newline = st.ends_with_newline || size == 0;
        rec.head_hash = head;
        rec.tail_hash = tail;
        rec.gone = false;
        rec.dangling.sort();
        rec.dangling.dedup();
        w.finish(s, key, &rec)?;
        if let Some(digest) = same_as
            && w.rows_digest(s)? == digest
        {
            // Written (new keys), but nothing changed: the final commit must still persist it.
            outcome = Outcome::Unchanged;
            self.unreported_write
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        drop(w);
        tx.commit()?;
        Ok(Ok(Ok(FileReport {
            path: canon.to_path_buf(),
            outcome,
            session: Some(s),
            bytes_read: st.bytes_read,
            lines_read: st.lines_read,
            entries_added: st.entries_added,
            warned_lines: st.warned_lines,
            first_warning: st.first_warning,
            error: None,
        })))
    }
}

/// What an import reads of a source file: its bytes from where the import starts to the size
/// the file had when it was looked at. The file itself (std's `Take<File>`, which reads into a
/// buffer's spare capacity without zeroing it first: a wrapper that only implements `read`
/// makes `read_to_end` zero each 4 MiB chunk before reading into it, 1.5 % of a corpus
/// import's instructions), but in this crate's own tests, where [`SourceBytes`] wraps it.
#[cfg(not(test))]
fn source_bytes(inner: std::io::Take<File>, _path: &Path) -> std::io::Take<File> {
    inner
}

/// In this crate's own tests, [`source_bytes`]' reads can be made to fail part-way
/// (`tests::fail_reads`): a plain file cannot be made to return an I/O error mid-read without
/// root and a faulty block device.
#[cfg(test)]
fn source_bytes(inner: std::io::Take<File>, path: &Path) -> SourceBytes {
    SourceBytes::new(inner, path)
}

/// A source file's bytes whose reads fail after a set number of bytes (tests only).
#[cfg(test)]
struct SourceBytes {
    inner: std::io::Take<File>,
    /// Bytes left before every read fails.
    fail_after: Option<u64>,
}

#[cfg(test)]
impl SourceBytes {
    fn new(inner: std::io::Take<File>, path: &Path) -> Self {
        Self {
            inner,
            fail_after: tests::failing_after(path),
        }
    }
}

#[cfg(test)]
impl Read for SourceBytes {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(left) = &mut self.fail_after {
            if *left == 0 {
                return Err(std::io::Error::other("injected read error"));
            }
            let n = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
            let got = self.inner.read(&mut buf[..n])?;
            *left -= got as u64;
            return Ok(got);
        }
        self.inner.read(buf)
    }
}

/// What an import worker found next in the file.
enum Next {
    /// The next chunk, prepared.
    Chunk(Result<Prepared, StoreError>),
    /// The end of the file; the open blocks it was given, unchanged.
    End(Open),
    /// Reading failed.
    Io(std::io::Error),
}

/// A finished outline block: (its first key, stored value).
type FinishedOutline = (u64, Vec<u8>);

/// A finished block of rows: (rows, stored value).
type FinishedBlock = (u64, Vec<u8>);

/// A chunk's rows, ready to write.
struct Prepared {
    rows: Vec<Draft>,
    /// The blocks of rows this chunk completed (the first may begin with rows of earlier
    /// chunks, carried in).
    blocks: Vec<FinishedBlock>,
    /// The block left open after this chunk's rows.
    carry: RowBlockBuilder,
    /// The key of the chunk's first row (every row gets the next key).
    first_key: u64,
    /// The outline blocks this chunk completed.
    outline: Vec<FinishedOutline>,
    /// The outline block left open after this chunk's nodes.
    outline_open: Option<BlockBuilder>,
    /// Physical lines in the chunk.
    lines: u64,
    /// Whether the chunk's last line ends with a newline.
    last_terminated: Option<bool>,
    /// Bytes of the file the chunk covers (with a leading byte order mark).
    bytes: u64,
}

/// The blocks a chunk continues: the open block of rows and the open outline block.
type Open = (RowBlockBuilder, Option<BlockBuilder>);

/// Parses a chunk's lines into rows (in parallel), whose keys will start at `first_key`;
/// given the open blocks, also hashes, serialises and adds the rows to blocks, and the nodes
/// to outline blocks ([`outline_rows`]) (only once the header is known: classification may
/// change rows).
fn prepare_chunk(
    chunk: &pisess_formats::reader::Chunk,
    session: u64,
    start: u64,
    line_base: u64,
    bom: bool,
    first_key: u64,
    open: Option<Open>,
) -> Result<Prepared, StoreError> {
    let lines: Vec<Line<'_>> = chunk.lines().collect();
    let at = chunk.offset();
    let drafts: Vec<(Draft, Vec<Draft>)> = lines
        .par_iter()
        .map(|l| draft_line(l, at, session, start, line_base))
        .collect();
    let glued: usize = drafts.iter().map(|d| d.1.len()).sum();
    let mut rows: Vec<Draft> = Vec::with_capacity(drafts.len() + glued);
    for (first, more) in drafts {
        rows.push(first);
        rows.extend(more);
    }
    if bom && let Some(first) = rows.first().map(|r| r.rec.line) {
        // pi's `JSON.parse` fails on the first line: the mark is no JSON white space.
        for r in rows.iter_mut().take_while(|r| r.rec.line == first) {
            r.pi_skips = r.rec.kind != RowKind::Junk;
        }
    }
    if bom && let Some(r) = rows.first_mut() {
        let mut raw = b"\xEF\xBB\xBF".to_vec();
        raw.extend_from_slice(r.raw(chunk.bytes()).ok_or_else(off_chunk)?);
        r.rec.raw_len = raw.len() as u64;
        r.rec.raw = raw;
        r.line = None;
        r.rec.offset = 0;
    }
    let mut p = Prepared {
        rows,
        blocks: Vec::new(),
        carry: RowBlockBuilder::new(),
        first_key,
        outline: Vec::new(),
        outline_open: None,
        lines: lines.len() as u64,
        last_terminated: lines.last().map(|l| l.terminated),
        bytes: chunk.len() as u64 + if bom { 3 } else { 0 },
    };
    if let Some(open) = open {
        p.seal(open, chunk.bytes())?;
    }
    Ok(p)
}

impl Prepared {
    /// Moves rows prepared for session 0 from key 0 ([`ahead`]) to session `session` from key
    /// `first_key`: nothing else of an unsealed chunk depends on them.
    fn rebase(&mut self, session: u64, first_key: u64) {
        for r in &mut self.rows {
            r.rec.session = session;
        }
        self.first_key = first_key;
    }

    /// Adds the rows to blocks ([`encode_rows`]) and the nodes to outline blocks
    /// ([`outline_rows`]), continuing the `open` ones; the blocks left open are `carry` and
    /// `outline_open`. `chunk`: the bytes of the chunk the rows were read from.
    fn seal(&mut self, (carry, outline_open): Open, chunk: &[u8]) -> Result<(), StoreError> {
        (self.blocks, self.carry) = encode_rows(&mut self.rows, chunk, carry)?;
        (self.outline, self.outline_open) =
            outline_rows(&mut self.rows, self.first_key, outline_open)?;
        Ok(())
    }
}

/// Adds the nodes among `rows` (keys from `first_key`) to the open outline block `open`,
/// cutting a block where it is full, and encodes the finished blocks (in parallel). Returns
/// them, (first key, value), and the block left open. Done with the parse rather than by the
/// writer, whose thread also works alone at the end of each file (it took a seventh of that
/// thread's CPU).
fn outline_rows(
    rows: &mut [Draft],
    first_key: u64,
    mut open: Option<BlockBuilder>,
) -> Result<(Vec<FinishedOutline>, Option<BlockBuilder>), StoreError> {
    let mut full = Vec::new();
    for (r, key) in rows.iter_mut().zip(first_key..) {
        let Some(id) = r.rec.id.as_deref() else {
            continue;
        };
        let node = r.facts.node.take().unwrap_or_default();
        let row = RowIn {
            key,
            id,
            timestamp: r.rec.timestamp.as_deref(),
            parent_id: node.parent_id(r.rec.parent_id.as_deref()),
            facts: node.facts.as_ref(),
        };
        full.extend(BlockBuilder::push_into(&mut open, &row));
    }
    let blocks = full
        .into_par_iter()
        .map(|b| Ok((b.first_key(), b.encode()?)))
        .collect::<Result<_, StoreError>>()?;
    Ok((blocks, open))
}

/// Hashes each row (in parallel; a large row is compressed on its own, see
/// [`EntryRecord::seal_from`]), serialises the rows in order straight into the open block
/// `carry` (`chunk`: the bytes of the chunk the rows' lines lie in, copied once, into the
/// block), cutting a block where it is full ([`crate::row_block`]), and compresses the finished
/// blocks (in parallel). Returns them and the block left open.
fn encode_rows(
    rows: &mut [Draft],
    chunk: &[u8],
    mut carry: RowBlockBuilder,
) -> Result<(Vec<FinishedBlock>, RowBlockBuilder), StoreError> {
    rows.par_iter_mut()
        .try_for_each(|r| -> Result<(), StoreError> {
            match &r.line {
                Some(span) => {
                    let raw = chunk.get(span.clone()).ok_or_else(off_chunk)?;
                    if r.rec.seal_from(raw) {
                        r.line = None;
                    }
                }
                None => r.rec.seal(),
            }
            Ok(())
        })?;
    let mut full = Vec::new();
    for r in rows.iter_mut() {
        let raw = r.raw(chunk).ok_or_else(off_chunk)?;
        let rec = crate::record::EntryRecordRef::new(&r.rec, raw);
        if !carry.push_with(rec.size_hint(), |buf| {
            crate::record::encode_entry_into(&rec, buf)
        })? {
            return Err(StoreError::Inconsistent(format!(
                "a row of {} bytes does not fit a block",
                raw.len()
            )));
        }
        // The writer needs the row's facts, not its bytes.
        r.rec.raw = Vec::new();
        r.line = None;
        if carry.is_full() {
            full.push(std::mem::take(&mut carry));
        }
    }
    let blocks = full
        .into_par_iter()
        .map(|b| (b.rows() as u64, b.finish()))
        .collect();
    Ok((blocks, carry))
}

/// A row whose line does not lie in its chunk (a bug: the spans come from the chunk's lines).
fn off_chunk() -> StoreError {
    StoreError::Inconsistent("a row's line lies outside its chunk".into())
}

/// Per-file state while importing.
struct FileState<'p> {
    s: SessionKey,
    rec: SessionRecord,
    path: &'p Path,
    header_pending: bool,
    ends_with_newline: bool,
    lines_read: u64,
    bytes_read: u64,
    entries_added: u64,
    /// Lines read with a warning, and the first of them ("line N: what").
    warned_lines: u64,
    first_warning: Option<String>,
    /// The first entry key written by this import (older keys are old rows).
    first_new_key: Option<u64>,
    /// The run of rows this import adds: (sequence of its first row, first key, rows).
    run: Option<(u64, u64, u64)>,
    nodes: Vec<Node>,
    /// How many of `nodes` have their `entry_ids` row written ([`Writer::write_ids`]).
    ids_written: usize,
    append: bool,
    /// The source's version when the rows come from its migrated copy.
    migrated_from: Option<f64>,
    /// The key of the first row of the open block of rows.
    rows_first: u64,
}

impl<'p> FileState<'p> {
    fn new(s: SessionKey, rec: SessionRecord, start: u64, path: &'p Path) -> Self {
        Self {
            s,
            header_pending: start == 0,
            ends_with_newline: rec.ends_with_newline,
            rec,
            path,
            lines_read: 0,
            bytes_read: 0,
            entries_added: 0,
            warned_lines: 0,
            first_warning: None,
            first_new_key: None,
            run: None,
            nodes: Vec::new(),
            ids_written: 0,
            append: start > 0,
            migrated_from: None,
            rows_first: 0,
        }
    }

    /// Settles header detection: rows before the header are junk, the first record must be it.
    fn classify(&mut self, rows: &mut [Draft], chunk: &[u8]) -> Result<(), FileError> {
        if !self.header_pending {
            return Ok(());
        }
        // The header's line when a line pi skips comes before it (glued records, a byte order
        // mark), as the file's reader decides it: a whole-line header after one is pi's.
        let mut decided: Option<Option<u64>> = None;
        for r in rows.iter_mut() {
            if !self.header_pending {
                break;
            }
            if r.rec.kind == RowKind::Junk {
                continue;
            }
            if r.pi_skips && self.migrated_from.is_none() {
                let header_line = *decided.get_or_insert_with(|| {
                    pisess_formats::open::open_regular(self.path)
                        .ok()
                        .and_then(pisess_formats::session::header_line)
                });
                if header_line.is_some_and(|h| h > r.rec.line) {
                    // As a junk line is kept: its bytes only (the later records of the
                    // line have none), no JSON text that would read as an entry.
                    r.rec = EntryRecord {
                        session: r.rec.session,
                        line: r.rec.line,
                        offset: r.rec.offset,
                        raw_len: r.rec.raw_len,
                        ..EntryRecord::with_raw(std::mem::take(&mut r.rec.raw))
                    };
                    // One warning for the line, on its first row (the others have no bytes).
                    r.facts = Facts {
                        warning: (r.rec.raw_len > 0).then(|| {
                            "a line before the header line that pi cannot parse (glued \
                             records, or a byte order mark) and skips (read as junk)"
                                .to_owned()
                        }),
                        ..Facts::default()
                    };
                    continue;
                }
            }
            let json = r.json_text(chunk);
            // Named with its line: the file's first lines may be junk pi skips.
            let line = r.rec.line;
            let fail = |reason: String| FileError::NotASession {
                path: self.path.to_path_buf(),
                reason,
            };
            let value: serde_json::Value =
                pisess_formats::value::parse_owned(&json).map_err(|e| {
                    fail(format!(
                        "the first record (line {line}) does not parse ({e})"
                    ))
                })?;
            let Some(obj) = value.as_object() else {
                return Err(fail(format!(
                    "the first record (line {line}) is not an object"
                )));
            };
            if obj.get("kind").and_then(|v| v.as_str()) == Some("header") {
                return Err(fail(format!(
                    "a v4 header (line {line}), which pisess does not read"
                )));
            }
            let id = obj.get("id").and_then(|v| v.as_str());
            let (Some("session"), Some(id)) = (obj.get("type").and_then(|v| v.as_str()), id) else {
                return Err(fail(format!(
                    "the first record (line {line}) is not a header with a string id"
                )));
            };
            let plan = pisess_migrate::Plan::for_header(obj);
            let version = match self.migrated_from {
                Some(v) => v,
                None if plan.rewrite => {
                    return Err(FileError::NeedsMigration {
                        path: self.path.to_path_buf(),
                        version: plan.version,
                    });
                }
                None => plan.version,
            };
            let s = |k: &str| obj.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            self.rec.session_id = id.to_owned();
            self.rec.cwd = s("cwd").unwrap_or_default();
            self.rec.created = s("timestamp").unwrap_or_default();
            // As pi's listing reads it: `new Date(header.timestamp)`, a number included.
            self.rec.created_ms = match obj.get("timestamp") {
                Some(serde_json::Value::Number(n)) => n
                    .as_f64()
                    .and_then(|ms| crate::agent::js::date_ms(Some(&serde_json::json!(ms))).as_f64())
                    .map(|ms| ms as i64),
                _ => iso_to_ms(&self.rec.created),
            };
            self.rec.parent_session = s("parentSession");
            self.rec.version = version;
            self.rec.header_json = json.into_owned();
            r.rec.kind = RowKind::Header;
            r.rec.id = None;
            r.rec.parent_id = None;
            r.facts = Facts::default();
            self.header_pending = false;
        }
        // Records before (and on the header's line) are no entries; the header row is not one.
        Ok(())
    }
}

/// A tree node found by this import.
struct Node {
    key: u64,
    id: String,
    parent: Option<String>,
}

/// What a record tells about its session, worked out in parallel.
#[derive(Default)]
struct Facts {
    /// `Some(label)` for a `label` entry (`None` label clears): (target, label).
    label: Option<(String, Option<String>)>,
    /// `Some(name)` for a `session_info` entry.
    session_name: Option<Option<String>>,
    /// A `message` entry.
    message: bool,
    /// Time of a user/assistant message.
    message_ms: Option<i64>,
    /// Text of a user message.
    user_text: Option<String>,
    /// File operations and tool result (see [`crate::files`]).
    ops: crate::files::EntryOps,
    /// What the outline stores of a tree node (rows with an id).
    node: Option<NodeFacts>,
    /// On the first row of a line: the first warning the reader gave for the line (a line
    /// that is not JSON, glued records, a field of the wrong kind…), as `check` words it.
    warning: Option<String>,
}

/// One row to store, before its key is known.
struct Draft {
    rec: EntryRecord,
    /// Where the row's line bytes lie in its chunk (`rec.raw` is then empty); `None` when
    /// `rec.raw` holds them (a line with a byte order mark, a compressed large row, or the
    /// second and later records of a glued line, whose bytes are empty).
    line: Option<std::ops::Range<usize>>,
    facts: Facts,
    /// Whether pi's `JSON.parse` fails on the row's line, which pi then skips: a line of glued
    /// records, or the first line of a file that starts with a byte order mark.
    pi_skips: bool,
}

impl Draft {
    /// The row's line bytes, as stored (`chunk`: the bytes of the chunk it was read from);
    /// `None` if its span does not lie in `chunk` (never, for the chunk it was read from).
    fn raw<'a>(&'a self, chunk: &'a [u8]) -> Option<&'a [u8]> {
        match &self.line {
            Some(r) => chunk.get(r.clone()),
            None => Some(&self.rec.raw),
        }
    }

    fn json_text<'a>(&'a self, chunk: &'a [u8]) -> std::borrow::Cow<'a, str> {
        if let Some(j) = &self.rec.json {
            return std::borrow::Cow::Borrowed(j);
        }
        let raw = self.raw(chunk).unwrap_or_default();
        let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        String::from_utf8_lossy(raw)
    }
}

/// Whether a record's `type` is `"session"`, read from its JSON (for a record whose typed view
/// failed, or a line not read yet; the last of repeated keys wins, as in JavaScript).
fn type_is_session(json: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(json)
        .is_ok_and(|v| v.get("type").and_then(serde_json::Value::as_str) == Some("session"))
}

/// Parses one physical line into its rows: the first, and the others of a line of glued
/// records (none, but for such a line: no allocation per line). Junk lines are rows too. The
/// first row's line bytes are the line and its terminator, where they lie in the chunk (`at`:
/// the chunk's offset, as the reader counts, which `line.offset` is counted in too).
fn draft_line(
    line: &Line<'_>,
    at: u64,
    session: u64,
    base_offset: u64,
    line_base: u64,
) -> (Draft, Vec<Draft>) {
    let terminator = if line.crlf {
        2
    } else {
        usize::from(line.terminated)
    };
    let start = usize::try_from(line.offset - at).unwrap_or(usize::MAX);
    let span = start..start.saturating_add(line.bytes.len() + terminator);
    let raw_len = span.len() as u64;
    let number = line_base + line.number;
    let offset = base_offset + line.offset;
    let mut problems = Vec::new();
    let mut head: Option<Draft> = None;
    let mut rest: Vec<Draft> = Vec::new();
    parse_line(line, &mut problems, |piece| {
        let first = head.is_none();
        let exact = first && piece.json.as_bytes() == line.bytes;
        let json = (!exact).then(|| piece.json.to_owned());
        let mut rec = EntryRecord {
            session,
            line: number,
            offset,
            kind: if piece.is_object() {
                RowKind::Entry
            } else {
                RowKind::Value
            },
            json,
            raw_len: if first { raw_len } else { 0 },
            ..EntryRecord::with_raw(Vec::new())
        };
        let mut facts = Facts::default();
        if let Ok(e) = &piece.entry {
            fill(&mut rec, &mut facts, e, piece.json);
            if rec.type_name.as_deref() == Some("session") {
                // A header (the first, or another one: `cat a.jsonl b.jsonl`), which pi's
                // tree, leaf and context all pass over.
                rec.kind = RowKind::Header;
                rec.id = None;
                rec.parent_id = None;
                facts = Facts::default();
            } else if rec.id.is_some() {
                facts.node = Some(NodeFacts::of(piece.json, e));
            }
        } else if piece.is_object() && type_is_session(piece.json.as_bytes()) {
            // A header whose typed view fails (an `id` that is a number, say): pi passes over
            // every `"type":"session"` record all the same.
            rec.kind = RowKind::Header;
        }
        let d = Draft {
            rec,
            line: first.then(|| span.clone()),
            facts,
            pi_skips: piece.glued,
        };
        match head {
            None => head = Some(d),
            Some(_) => rest.push(d),
        }
    });
    let mut head = head.unwrap_or_else(|| Draft {
        rec: EntryRecord {
            session,
            line: number,
            offset,
            kind: RowKind::Junk,
            raw_len,
            ..EntryRecord::with_raw(Vec::new())
        },
        line: Some(span),
        facts: Facts::default(),
        pi_skips: false,
    });
    head.facts.warning = problems
        .iter()
        .find(|p| p.severity() == pisess_formats::Severity::Warning)
        .map(|p| p.kind.to_string());
    (head, rest)
}

/// A message entry's JSON reduced to what the catalogue reads of it: `type`, the message's
/// `role`, its `content` (`null` when that does not fit the typed view either) and its
/// `timestamp` when it is a number. `None` when there is no message object.
fn plain_message(json: &str) -> Option<String> {
    use serde_json::{Map, Value};
    let v: Value = pisess_formats::value::parse_owned(json).ok()?;
    let m = v.get("message")?.as_object()?;
    let mut out = Map::new();
    for key in ["role", "content"] {
        if let Some(x) = m.get(key) {
            out.insert(key.into(), x.clone());
        }
    }
    if let Some(t) = m.get("timestamp").filter(|t| t.is_number()) {
        out.insert("timestamp".into(), t.clone());
    }
    let wrap = |msg: Map<String, Value>| {
        serde_json::json!({"type": "message", "message": Value::Object(msg)}).to_string()
    };
    let text = wrap(out.clone());
    if Entry::parse(&text).is_ok() {
        return Some(text);
    }
    if out.contains_key("content") {
        out.insert("content".into(), Value::Null);
    }
    Some(wrap(out))
}

/// The catalogue facts of a message: its role, its time for pi's "modified", and a user
/// message's text for the first-message preview.
fn message_facts(
    rec: &mut EntryRecord,
    facts: &mut Facts,
    m: &pisess_formats::entry::Message<'_>,
    json: &str,
) {
    rec.role = m.role.get().map(|r| r.as_str().to_owned());
    let role = m.role();
    // pi's getLastActivityTime: user and assistant messages that have a `content` key; the
    // message's numeric time, else the entry's as `new Date` reads it.
    if matches!(role, Role::User | Role::Assistant) && m.content.is_present() {
        facts.message_ms = m
            .timestamp
            .get()
            // A time no date can hold (|t| > 8.64e15 ms) is none: pi's `new Date` of it is
            // invalid (and its listing fails on it).
            .filter(|t| t.is_finite() && t.abs() <= 8.64e15)
            .map(|t| *t as i64)
            .or_else(|| match rec.timestamp.as_deref() {
                Some(t) => iso_to_ms(t),
                // Not text (a number, `true`, `null`: `new Date` reads each) or missing: read
                // from the line itself (rare: pi writes the message's own time), as pi reads it.
                None if memchr::memmem::find(json.as_bytes(), b"\"timestamp\"").is_some() => {
                    pisess_formats::value::parse_owned::<serde_json::Value>(json)
                        .ok()
                        .and_then(|v| crate::agent::js::date_ms(v.get("timestamp")).as_f64())
                        .map(|t| t as i64)
                }
                None => None,
            });
    }
    if role == Role::User {
        // Only the catalogue's first-message preview needs it: at most
        // FIRST_MESSAGE_MAX bytes, never a copy of a huge message.
        let mut text = String::new();
        match m.content.get() {
            Some(Content::Text(t)) => push_capped(&mut text, t.as_str()),
            _ => {
                for (i, t) in m.texts().enumerate() {
                    if i > 0 {
                        push_capped(&mut text, " ");
                    }
                    push_capped(&mut text, &t);
                }
            }
        }
        // pi's listing skips a user message without text (an image alone, empty
        // text): the preview is the first one that has some.
        if !text.is_empty() {
            facts.user_text = Some(text);
        }
    }
}

fn fill(rec: &mut EntryRecord, facts: &mut Facts, e: &Entry<'_>, json: &str) {
    facts.ops = crate::files::extract(e, json);
    rec.id = e.id().map(str::to_owned);
    rec.parent_id = e.parent_id().map(str::to_owned);
    rec.type_name = e.type_name.get().map(|t| t.as_str().to_owned());
    rec.timestamp = e.timestamp.get().map(|t| t.as_str().to_owned());
    match e.entry_type() {
        EntryType::Message => {
            facts.message = true;
            if let Some(m) = e.message.get() {
                message_facts(rec, facts, m, json);
            } else if e.bad_field.is_some() {
                // A field the typed view cannot hold (a message time written as text): the
                // message's role, content and numeric time alone, as pi's listing reads them.
                if let Some(plain) = plain_message(json)
                    && let Ok(p) = Entry::parse(&plain)
                    && let Some(m) = p.message.get()
                {
                    message_facts(rec, facts, m, json);
                }
            }
        }
        EntryType::Label => {
            if let Some(t) = e.target_id.get() {
                let label = e
                    .label
                    .get()
                    .map(|l| l.as_str().to_owned())
                    .filter(|l| !l.is_empty());
                facts.label = Some((t.as_str().to_owned(), label));
            }
        }
        EntryType::SessionInfo => {
            let name = e
                .name
                .get()
                // pi's `name.trim()` (JavaScript's: U+FEFF is white space there).
                .map(|n| pisess_formats::js::trim(n.as_str()).to_owned())
                .filter(|n| !n.is_empty());
            facts.session_name = Some(name);
        }
        _ => {}
    }
}

/// The open tables of one write transaction.
pub(crate) struct Writer<'t> {
    meta: Table<'t, &'static str, u64>,
    sources: Table<'t, &'static str, schema::SourceStat>,
    sessions: Table<'t, u64, Rkyv<SessionRecord>>,
    session_ids: Table<'t, (&'static str, u64), ()>,
    entries: Table<'t, u64, &'static [u8]>,
    session_runs: Table<'t, (u64, u64), (u64, u64)>,
    entry_ids: Table<'t, (u64, &'static str), u64>,
    parents: Table<'t, u64, Link>,
    children: Table<'t, (u64, u64), ()>,
    labels: Table<'t, (u64, &'static str), &'static str>,
    run_starts: Table<'t, u64, u64>,
    settings: Table<'t, (u64, u64), u8>,
    outline: Table<'t, (u64, u64, u32), &'static [u8]>,
    pub(crate) file_hits: Table<'t, (&'static str, u64, u64), &'static [u8]>,
    pub(crate) file_resolved: Table<'t, (&'static str, u64, &'static str), ()>,
    pub(crate) file_session_paths: Table<'t, (u64, &'static str), ()>,
    pub(crate) tool_results: Table<'t, (u64, &'static str), &'static [u8]>,
    /// File hits not yet in their blocks ([`Writer::flush_file_hits`] writes them).
    pub(crate) file_pending: crate::files::PendingHits,
    next_entry: u64,
    next_session: u64,
}

impl<'t> Writer<'t> {
    pub(crate) fn new(tx: &'t WriteTransaction) -> Result<Self, StoreError> {
        let meta = tx.open_table(META)?;
        let next_entry = meta_get(&meta, META_NEXT_ENTRY)?;
        let next_session = meta_get(&meta, META_NEXT_SESSION)?;
        Ok(Self {
            meta,
            sources: tx.open_table(schema::SOURCES)?,
            sessions: tx.open_table(schema::SESSIONS)?,
            session_ids: tx.open_table(schema::SESSION_IDS)?,
            entries: tx.open_table(schema::ENTRIES)?,
            session_runs: tx.open_table(schema::SESSION_RUNS)?,
            entry_ids: tx.open_table(schema::ENTRY_IDS)?,
            parents: tx.open_table(schema::PARENTS)?,
            children: tx.open_table(schema::CHILDREN)?,
            labels: tx.open_table(schema::LABELS)?,
            run_starts: tx.open_table(schema::RUN_STARTS)?,
            settings: tx.open_table(schema::SETTINGS)?,
            outline: tx.open_table(OUTLINE)?,
            file_hits: tx.open_table(crate::files::FILE_HITS)?,
            file_resolved: tx.open_table(crate::files::FILE_RESOLVED)?,
            file_session_paths: tx.open_table(crate::files::FILE_SESSION_PATHS)?,
            tool_results: tx.open_table(crate::files::TOOL_RESULTS)?,
            file_pending: crate::files::PendingHits::default(),
            next_entry,
            next_session,
        })
    }

    /// blake3 of a session's stored records in key order. A record holds its row's bytes
    /// (as written: v3 files only, the caller's rule) and facts, with the line and offset it
    /// has in the file, but not its key, so two imports of the same bytes give the same digest
    /// however they were read (whole, or in appends, whose blocks may be cut elsewhere).
    fn rows_digest(&self, s: SessionKey) -> Result<[u8; 32], StoreError> {
        let mut h = blake3::Hasher::new();
        for run in self.session_runs.range((s.0, 0)..=(s.0, u64::MAX))? {
            let (first, n) = run?.1.value();
            for stored in self.entries.range(first..first.saturating_add(n))? {
                let (key, value) = stored?;
                let corrupt = |source| StoreError::CorruptBlock {
                    table: schema::ENTRIES_NAME,
                    key: key.value(),
                    source,
                };
                let block = Block::decode(value.value()).map_err(corrupt)?;
                for i in 0..block.rows() {
                    let record = block.record(i).map_err(corrupt)?;
                    h.update(&(record.len() as u64).to_le_bytes());
                    h.update(record);
                }
            }
        }
        Ok(*h.finalize().as_bytes())
    }

    /// Removes every row of a session (before reading its file again).
    fn delete_session(&mut self, s: SessionKey, old: &SessionRecord) -> Result<(), StoreError> {
        let mut keys = Vec::new();
        for row in self.session_runs.range((s.0, 0)..=(s.0, u64::MAX))? {
            let (first, n) = row?.1.value();
            let end = first.saturating_add(n);
            keys.extend(first..end);
            // A block lies inside one run.
            self.entries.retain_in(first..end, |_, _| false)?;
        }
        for k in &keys {
            let link = self.parents.remove(*k)?.map(|l| l.value());
            if let Some(l) = link
                && l.starts_run(EntryKey(*k))
            {
                if let Some(p) = l.parent() {
                    self.children.remove((p.0, *k))?;
                }
                self.run_starts.remove(*k)?;
            }
        }
        self.session_runs
            .retain_in((s.0, 0)..=(s.0, u64::MAX), |_, _| false)?;
        self.settings
            .retain_in((s.0, 0)..=(s.0, u64::MAX), |_, _| false)?;
        self.outline
            .retain_in((s.0, 0, 0)..=(s.0, u64::MAX, u32::MAX), |_, _| false)?;
        // Key ranges (a session's rows sort together), not scans of every session's rows.
        let next = s.0.saturating_add(1);
        self.entry_ids
            .retain_in((s.0, "")..(next, ""), |_, _| false)?;
        self.labels.retain_in((s.0, "")..(next, ""), |_, _| false)?;
        self.session_ids.remove((old.session_id.as_str(), s.0))?;
        crate::files::delete_session_ops(self, s, &old.cwd)?;
        Ok(())
    }

    /// Before an append to a file whose stored bytes ended in a line cut short (pi was still
    /// writing it when the file was read): when that line is the session's last row and a
    /// junk row of its own (the whole line, no record), takes the row out, so that the append
    /// reads the line again from its start as a single read of the grown file reads it. The
    /// row's key is given back when it was the store's last, so the store then equals one
    /// import of the grown file. `rec` becomes the record of the rows before the line.
    /// Returns whether it did; if not (the last row is a record, or shares its line), nothing
    /// was changed and the file must be read in full.
    fn drop_torn_line(
        &mut self,
        s: SessionKey,
        rec: &mut SessionRecord,
    ) -> Result<bool, StoreError> {
        let Some((seq, first, n)) = self.last_run(s)? else {
            return Ok(false);
        };
        let Some(last) = first.checked_add(n).and_then(|end| end.checked_sub(1)) else {
            return Ok(false);
        };
        let Some((at, value)) = self.block_ending(s, last + 1, |at, v| Ok((at, v.to_vec())))?
        else {
            return Ok(false);
        };
        let corrupt = |source| StoreError::CorruptBlock {
            table: schema::ENTRIES_NAME,
            key: at,
            source,
        };
        let block = Block::decode(&value).map_err(corrupt)?;
        let rows = block.rows();
        let row = block.record(rows - 1).map_err(corrupt)?;
        let row = RecordRef::<EntryRecord>::new(row)
            .archived()
            .map_err(|source| StoreError::CorruptRecord {
                table: schema::ENTRIES_NAME,
                key: last.to_string(),
                source,
            })?;
        let (offset, raw_len) = (row.offset.to_native(), row.raw_len.to_native());
        let torn = row.kind == RowKind::Junk
            && raw_len > 0
            && offset > 0
            && offset.checked_add(raw_len) == Some(rec.file_size)
            && row.line.to_native() == rec.lines
            && rec.rows > 0
            && rec.lines > 0;
        if !torn {
            return Ok(false);
        }
        self.entries.remove(at)?;
        if rows > 1 {
            let mut kept = RowBlockBuilder::new();
            for i in 0..rows - 1 {
                kept.push(block.record(i).map_err(corrupt)?);
            }
            self.entries.insert(at, kept.finish().as_slice())?;
        }
        if n > 1 {
            self.session_runs.insert((s.0, seq), (first, n - 1))?;
        } else {
            self.session_runs.remove((s.0, seq))?;
        }
        if self.next_entry == last + 1 {
            self.next_entry = last;
        }
        rec.rows -= 1;
        rec.lines -= 1;
        rec.file_size = offset;
        // The line starts after a newline: the rows before it end with one.
        rec.ends_with_newline = true;
        Ok(true)
    }

    /// Writes a prepared chunk and counts it.
    fn write_prepared(
        &mut self,
        st: &mut FileState<'_>,
        p: Prepared,
        progress: &mut dyn FnMut(ImportEvent<'_>),
    ) -> Result<Result<(), Conflict>, StoreError> {
        if p.first_key != self.next_entry {
            return Err(StoreError::Inconsistent(format!(
                "a chunk prepared for key {} written at key {}",
                p.first_key, self.next_entry
            )));
        }
        if let Some(t) = p.last_terminated {
            st.ends_with_newline = t;
        }
        st.lines_read += p.lines;
        st.rec.lines += p.lines;
        st.bytes_read += p.bytes;
        if self.write_rows(st, p.rows)?.is_err() {
            return Ok(Err(Conflict));
        }
        self.write_ids(st)?;
        for (rows, bytes) in &p.blocks {
            self.write_block(st, *rows, bytes)?;
        }
        for (first, bytes) in &p.outline {
            self.write_outline(st.s, *first, bytes)?;
        }
        progress(ImportEvent::Bytes(p.bytes));
        Ok(Ok(()))
    }

    /// Writes a chunk's rows; `Err(Conflict)` when an append would change old entries.
    fn write_rows(
        &mut self,
        st: &mut FileState<'_>,
        rows: Vec<Draft>,
    ) -> Result<Result<(), Conflict>, StoreError> {
        let s = st.s.0;
        for mut row in rows {
            let key = self.next_entry;
            self.next_entry += 1;
            let first_new = *st.first_new_key.get_or_insert(key);
            // This import's keys are consecutive: its rows are one run.
            match &mut st.run {
                Some((_, _, n)) => *n += 1,
                None => st.run = Some((st.rec.rows, key, 1)),
            }
            st.rec.rows += 1;
            // Lines of a migrated copy are not the source's lines: `migrate` reports those.
            if let Some(w) = row.facts.warning.take()
                && st.migrated_from.is_none()
            {
                st.warned_lines += 1;
                if st.first_warning.is_none() {
                    st.first_warning = Some(format!("line {}: {w}", row.rec.line));
                }
            }
            let ops = std::mem::take(&mut row.facts.ops);
            if !ops.ops.is_empty() || ops.result.is_some() {
                self.write_ops(
                    st.s,
                    key,
                    &st.rec.cwd,
                    row.rec.id.as_deref(),
                    row.rec.timestamp.as_deref(),
                    ops,
                )?;
            }
            let rec = row.rec;
            if rec.kind == RowKind::Entry
                && let Some(v) = schema::setting_of(rec.type_name.as_deref())
            {
                self.settings.insert((s, key), v)?;
            }
            if matches!(rec.kind, RowKind::Entry | RowKind::Value) {
                st.rec.entries += 1;
                st.entries_added += 1;
                st.rec.leaf = rec.id.as_ref().map(|_| key);
            }
            if let Some(id) = rec.id {
                if st.append {
                    let old = self.entry_ids.get((s, id.as_str()))?.map(|v| v.value());
                    if old.is_some_and(|k| k < first_new)
                        || st.rec.dangling.binary_search(&id).is_ok()
                    {
                        return Ok(Err(Conflict));
                    }
                }
                // `entry_ids` is written for the chunk's nodes once its rows are
                // (`write_ids`), the links at the end of the file (`link`); the outline row
                // was made with the parse (`outline_rows`).
                st.nodes.push(Node {
                    key,
                    id,
                    parent: rec.parent_id,
                });
            }
            let f = row.facts;
            if f.message {
                st.rec.messages += 1;
            }
            if let Some(ms) = f.message_ms {
                st.rec.modified_ms = Some(st.rec.modified_ms.map_or(ms, |m| m.max(ms)));
            }
            if st.rec.first_message.is_none()
                && let Some(t) = f.user_text
            {
                st.rec.first_message = Some(t);
            }
            if let Some(name) = f.session_name {
                st.rec.name = name;
            }
            if let Some((target, label)) = f.label {
                match label {
                    Some(l) => {
                        self.labels.insert((s, target.as_str()), l.as_str())?;
                    }
                    None => {
                        self.labels.remove((s, target.as_str()))?;
                    }
                }
            }
        }
        Ok(Ok(()))
    }

    /// Stores a finished block of `rows` rows: the open block's, which starts at
    /// `st.rows_first` (their keys were given by [`Self::write_rows`]).
    fn write_block(
        &mut self,
        st: &mut FileState<'_>,
        rows: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let end = st.rows_first.saturating_add(rows);
        if end > self.next_entry {
            return Err(StoreError::Inconsistent(format!(
                "a block of {rows} rows from key {} passes the last row written ({})",
                st.rows_first, self.next_entry
            )));
        }
        self.entries.insert(st.rows_first, bytes)?;
        st.rows_first = end;
        Ok(())
    }

    /// The session's last block of rows, reopened, when an import starting at
    /// [`Self::next_entry`] continues its keys and it is not full: (its first key, its rows).
    fn open_rows(&self, s: SessionKey) -> Result<Option<(u64, RowBlockBuilder)>, StoreError> {
        let Some((_, first, n)) = self.last_run(s)? else {
            return Ok(None);
        };
        let last = first.saturating_add(n);
        if last != self.next_entry || last == 0 {
            return Ok(None);
        }
        let reopened = self.block_ending(s, last, |at, value| {
            let corrupt = |source| StoreError::CorruptBlock {
                table: schema::ENTRIES_NAME,
                key: at,
                source,
            };
            let block = Block::decode(value).map_err(corrupt)?;
            let b = RowBlockBuilder::resume(&block).map_err(corrupt)?;
            Ok((!b.is_full()).then_some((at, b)))
        })?;
        Ok(reopened.flatten())
    }

    /// Session `s`'s last run of rows: (sequence number of its first row, first key, rows).
    fn last_run(&self, s: SessionKey) -> Result<Option<(u64, u64, u64)>, StoreError> {
        match self
            .session_runs
            .range((s.0, 0)..=(s.0, u64::MAX))?
            .next_back()
        {
            Some(run) => {
                let (k, v) = run?;
                let (first, n) = v.value();
                Ok(Some((k.value().1, first, n)))
            }
            None => Ok(None),
        }
    }

    /// `f` of the stored block of rows just below key `end` (its key and bytes), checked (from
    /// its trailer) to end at `end`, as the block that ends session `s`'s last run must;
    /// `None` when no block lies below `end`.
    fn block_ending<R>(
        &self,
        s: SessionKey,
        end: u64,
        f: impl FnOnce(u64, &[u8]) -> Result<R, StoreError>,
    ) -> Result<Option<R>, StoreError> {
        let Some(row) = self.entries.range(..end)?.next_back() else {
            return Ok(None);
        };
        let (k, v) = row?;
        let at = k.value();
        let value = v.value();
        let rows = row_block::rows_of(value).map_err(|source| StoreError::CorruptBlock {
            table: schema::ENTRIES_NAME,
            key: at,
            source,
        })?;
        if at.saturating_add(u64::from(rows)) != end {
            return Err(StoreError::Inconsistent(format!(
                "session {s}: its rows end at key {end}, its last block at {}",
                at.saturating_add(u64::from(rows))
            )));
        }
        f(at, value).map(Some)
    }

    /// Records a run of rows (sequence of its first row, first key, rows) of session `s`,
    /// extending the session's last run when it continues it: runs are maximal, so the table
    /// is the same however the file was read in pieces.
    fn add_run(
        &mut self,
        s: SessionKey,
        (seq, first, n): (u64, u64, u64),
    ) -> Result<(), StoreError> {
        let last = match self
            .session_runs
            .range((s.0, 0)..=(s.0, u64::MAX))?
            .next_back()
        {
            Some(row) => {
                let (k, v) = row?;
                Some((k.value().1, v.value()))
            }
            None => None,
        };
        match last {
            Some((lseq, (lfirst, ln)))
                if lseq.checked_add(ln) == Some(seq) && lfirst.checked_add(ln) == Some(first) =>
            {
                self.session_runs.insert((s.0, lseq), (lfirst, ln + n))?;
            }
            _ => {
                self.session_runs.insert((s.0, seq), (first, n))?;
            }
        }
        Ok(())
    }

    /// Writes session `s`'s open outline block, if any.
    fn flush_outline(
        &mut self,
        s: SessionKey,
        open: Option<BlockBuilder>,
    ) -> Result<(), StoreError> {
        if let Some(b) = open {
            self.write_outline(s, b.first_key(), &b.encode()?)?;
        }
        Ok(())
    }

    /// Stores session `s`'s outline block that starts at key `first`, encoded as `bytes`.
    fn write_outline(&mut self, s: SessionKey, first: u64, bytes: &[u8]) -> Result<(), StoreError> {
        // A reopened block may now need fewer parts than were stored.
        self.outline
            .retain_in((s.0, first, 0)..=(s.0, first, u32::MAX), |_, _| false)?;
        for (i, part) in crate::outline::parts(bytes) {
            self.outline.insert((s.0, first, i), part)?;
        }
        Ok(())
    }

    /// The session's last outline block when it has room for more nodes (an append continues
    /// it).
    fn open_outline(&self, s: SessionKey) -> Result<Option<BlockBuilder>, StoreError> {
        let Some(row) = self
            .outline
            .range((s.0, 0, 0)..=(s.0, u64::MAX, u32::MAX))?
            .next_back()
        else {
            return Ok(None);
        };
        let first = row?.0.value().1;
        let mut bytes = Vec::new();
        for row in self
            .outline
            .range((s.0, first, 0)..=(s.0, first, u32::MAX))?
        {
            bytes.extend_from_slice(row?.1.value());
        }
        let b = BlockBuilder::resume(first, &bytes)?;
        Ok((!b.is_full()).then_some(b))
    }

    /// Writes the `entry_ids` rows of the nodes added since the last call: each id once, with
    /// its last node in file order (pi's index: a later duplicate wins, and a later chunk's row
    /// replaces an earlier one's), in the table's key order within the call (a B-tree fills
    /// its pages better that way). Called with each chunk, so that these inserts happen while
    /// the next chunk is parsed rather than at the end of the file, on this thread alone.
    /// Sorted by the id's first 8 bytes as a number (zero-padded, so in the same order as the
    /// bytes), then by the whole id: pi's ids are 8 hex digits, so most comparisons are of two
    /// integers.
    fn write_ids(&mut self, st: &mut FileState<'_>) -> Result<(), StoreError> {
        let s = st.s.0;
        let nodes = st.nodes.get(st.ids_written..).unwrap_or_default();
        let prefix = |id: &str| {
            let mut b = [0u8; 8];
            let n = id.len().min(8);
            b[..n].copy_from_slice(&id.as_bytes()[..n]);
            u64::from_be_bytes(b)
        };
        let mut order: Vec<(u64, &Node)> = nodes.iter().map(|n| (prefix(&n.id), n)).collect();
        order.sort_unstable_by(|&(pa, a), &(pb, b)| {
            pa.cmp(&pb)
                .then_with(|| (a.id.as_str(), a.key).cmp(&(b.id.as_str(), b.key)))
        });
        for (i, &(_, n)) in order.iter().enumerate() {
            if order.get(i + 1).is_some_and(|&(_, m)| m.id == n.id) {
                continue;
            }
            self.entry_ids.insert((s, n.id.as_str()), n.key)?;
        }
        st.ids_written = st.nodes.len();
        Ok(())
    }

    /// Resolves the parents of this import's nodes and writes `parents` and `children` (and
    /// the `entry_ids` rows [`Self::write_ids`] has not written yet).
    fn link(&mut self, st: &mut FileState<'_>) -> Result<(), StoreError> {
        self.write_ids(st)?;
        let s = st.s.0;
        let nodes = std::mem::take(&mut st.nodes);
        // hashbrown's default hasher (foldhash, seeded per process) rather than SipHash: ids
        // are short, and a file crafted to collide could only slow its own import.
        let mut by_id: hashbrown::HashMap<&str, usize> =
            hashbrown::HashMap::with_capacity(nodes.len());
        for (i, n) in nodes.iter().enumerate() {
            by_id.insert(n.id.as_str(), i);
        }
        #[derive(Clone, Copy, PartialEq)]
        enum Ref {
            Root,
            New(usize),
            Old(u64),
        }
        let mut parent = Vec::with_capacity(nodes.len());
        for n in &nodes {
            let r = match &n.parent {
                None => Ref::Root,
                Some(p) => match by_id.get(p.as_str()) {
                    Some(&j) => Ref::New(j),
                    None => match self.entry_ids.get((s, p.as_str()))?.map(|v| v.value()) {
                        Some(k) => Ref::Old(k),
                        None => {
                            st.rec.dangling.push(p.clone());
                            Ref::Root
                        }
                    },
                },
            };
            parent.push(r);
        }
        let mut links: Vec<Option<Link>> = vec![None; nodes.len()];
        let mut old_links: hashbrown::HashMap<u64, Link> = hashbrown::HashMap::new();
        // Node index by key: this import's keys are consecutive, so a table over their span
        // answers in one step (a binary search over the nodes took a third of `link`).
        let first = nodes.first().map_or(0, |n| n.key);
        let span = nodes
            .last()
            .map_or(0, |n| n.key.saturating_sub(first).saturating_add(1));
        let slots: Option<Vec<u32>> = match usize::try_from(span) {
            Ok(span) if nodes.len() < u32::MAX as usize => {
                let mut slots = vec![u32::MAX; span];
                for (i, n) in nodes.iter().enumerate() {
                    let at = n
                        .key
                        .checked_sub(first)
                        .and_then(|d| usize::try_from(d).ok());
                    if let Some(slot) = at.and_then(|at| slots.get_mut(at)) {
                        *slot = i as u32;
                    }
                }
                Some(slots)
            }
            _ => None,
        };
        let key_index = |k: u64| match &slots {
            Some(slots) => {
                let i = *slots.get(usize::try_from(k.checked_sub(first)?).ok()?)?;
                (i != u32::MAX).then_some(i as usize)
            }
            None => nodes.binary_search_by_key(&k, |n| n.key).ok(),
        };
        // Links of keys outside this import are read from the table (and cached).
        let mut link_of = |k: u64,
                           links: &Vec<Option<Link>>,
                           parents: &Table<'t, u64, Link>|
         -> Result<Link, StoreError> {
            if let Some(i) = key_index(k) {
                return links[i].ok_or_else(|| {
                    StoreError::Inconsistent(format!("entry {k} linked before its parent"))
                });
            }
            if let Some(l) = old_links.get(&k) {
                return Ok(*l);
            }
            let l = parents
                .get(k)?
                .map(|v| v.value())
                .ok_or_else(|| StoreError::Inconsistent(format!("entry {k} has no link")))?;
            old_links.insert(k, l);
            Ok(l)
        };
        const UNSEEN: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![UNSEEN; nodes.len()];
        let mut stack = Vec::new();
        for start in 0..nodes.len() {
            if state[start] != UNSEEN {
                continue;
            }
            state[start] = OPEN;
            stack.push(start);
            while let Some(&top) = stack.last() {
                if let Ref::New(j) = parent[top] {
                    if state[j] == UNSEEN {
                        state[j] = OPEN;
                        stack.push(j);
                        continue;
                    }
                    if state[j] == OPEN {
                        // `top` closes a cycle: make it a root.
                        parent[top] = Ref::Root;
                        st.rec.cycle_cuts += 1;
                    }
                }
                let key = nodes[top].key;
                let p = match parent[top] {
                    Ref::Root => None,
                    Ref::New(j) => Some(nodes[j].key),
                    Ref::Old(k) => Some(k),
                };
                let link = match p {
                    None => Link {
                        parent: EntryKey::NONE,
                        jump: EntryKey(key),
                        depth: 0,
                    },
                    Some(p) => {
                        let lp = link_of(p, &links, &self.parents)?;
                        let lj = link_of(lp.jump.0, &links, &self.parents)?;
                        let ljj = link_of(lj.jump.0, &links, &self.parents)?;
                        let jump = if lp.depth - lj.depth == lj.depth - ljj.depth {
                            lj.jump
                        } else {
                            EntryKey(p)
                        };
                        Link {
                            parent: EntryKey(p),
                            jump,
                            depth: lp.depth + 1,
                        }
                    }
                };
                links[top] = Some(link);
                state[top] = DONE;
                stack.pop();
            }
        }
        for (n, l) in nodes.iter().zip(&links) {
            let l = l.ok_or_else(|| StoreError::Inconsistent("unlinked node".into()))?;
            self.parents.insert(n.key, l)?;
            if l.starts_run(EntryKey(n.key)) {
                if let Some(p) = l.parent() {
                    self.children.insert((p.0, n.key), ())?;
                }
                self.run_starts.insert(n.key, l.parent.0)?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, s: SessionKey, key: &str, rec: &SessionRecord) -> Result<(), StoreError> {
        self.flush_file_hits()?;
        // A rewritten file may carry a new session id: the old one is in the old record (a
        // lookup, not a scan of every session's id).
        let stale = match self.sessions.get(s.0)? {
            Some(old) => Some(decode_session(old.value().bytes(), s.0)?.session_id),
            None => None,
        };
        if let Some(id) = stale.filter(|id| *id != rec.session_id) {
            self.session_ids.remove((id.as_str(), s.0))?;
        }
        self.session_ids
            .insert((rec.session_id.as_str(), s.0), ())?;
        let bytes = encode(rec)?;
        self.sessions.insert(s.0, RecordRef::new(&bytes))?;
        self.sources.insert(key, schema::source_stat(s.0, rec))?;
        self.meta.insert(META_NEXT_ENTRY, self.next_entry)?;
        self.meta.insert(META_NEXT_SESSION, self.next_session)?;
        Ok(())
    }
}

/// Longest first-message preview kept in a session's catalogue record (bytes).
pub const FIRST_MESSAGE_MAX: usize = 4096;

/// Appends `t` to `out` without letting `out` pass [`FIRST_MESSAGE_MAX`] bytes (cut at a
/// character boundary).
fn push_capped(out: &mut String, t: &str) {
    let room = FIRST_MESSAGE_MAX.saturating_sub(out.len());
    if t.len() <= room {
        out.push_str(t);
    } else {
        let mut cut = room;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        out.push_str(&t[..cut]);
    }
}

/// Canonical path, size and mtime (ns) of a file; `known` is its canonical path when the
/// caller already has it (a folder walk), which saves resolving every path component.
fn stat(path: &Path, known: Option<&Path>) -> Result<(PathBuf, u64, i64), FileError> {
    let io = |source| FileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let canon = match known {
        Some(c) => c.to_path_buf(),
        None => std::fs::canonicalize(path).map_err(io)?,
    };
    let md = std::fs::metadata(&canon).map_err(io)?;
    if !md.is_file() {
        return Err(io(not_regular(md.file_type())));
    }
    let (size, mtime) = size_mtime(&md);
    Ok((canon, size, mtime))
}

/// Why a file whose size reads as 0 bytes gave no header line. Usually it is empty; but a file
/// the system makes up as it is read (those under /proc) has a size of 0 and content, which an
/// import, reading a file up to its size, never sees: then the reason says so, and whether the
/// content begins with a session header at all (so "the file is empty" is never said of it).
fn zero_size_reason(path: &Path) -> String {
    let mut head = Vec::new();
    let read = File::open(path).and_then(|f| f.take(64 << 10).read_to_end(&mut head));
    // A file that grew since it was read (a session being created) was empty when read.
    let still_zero = std::fs::metadata(path).is_ok_and(|m| m.len() == 0);
    if read.is_err() || head.is_empty() || !still_zero {
        return "the file is empty".to_owned();
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let header = serde_json::from_slice::<serde_json::Value>(first)
        .ok()
        .is_some_and(|v| v.get("type").and_then(serde_json::Value::as_str) == Some("session"));
    if header {
        "its size reads as 0 bytes though it has content (a file made up as it is read, as \
         under /proc): pisess reads a session file up to its size; copy it to an ordinary file"
            .to_owned()
    } else {
        "no header line: its first line is not a session header (its size reads as 0 bytes, \
         yet it has content: a file made up as it is read, as under /proc)"
            .to_owned()
    }
}

/// A file's size and mtime (nanoseconds since the epoch, 0 when unknown), as the catalogue
/// records them (`SessionRecord::file_size`, `mtime_ns`).
pub fn size_mtime(md: &std::fs::Metadata) -> (u64, i64) {
    let mtime = md
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    (md.len(), mtime)
}

/// The range of catalogue keys (canonical paths as strings) that can be `folder` itself or lie
/// below it: from the folder's path to that path followed by `0`, the character after `/` (a
/// canonical path below `/a/b` is `/a/b/...`, and `/a/b/...` < `/a/b0`). `None` when the folder
/// is not absolute (then no canonical path lies below it by this rule, and the caller reads the
/// whole table to decide exactly as before). The range may also hold siblings such as `/a/b-2`;
/// callers still test `Path::starts_with`, so the range only narrows what is read.
fn keys_under(folder: &Path) -> Option<(String, String)> {
    if !folder.is_absolute() {
        return None;
    }
    let lo = folder
        .components()
        .collect::<PathBuf>()
        .to_string_lossy()
        .into_owned();
    let mut hi = lo.strip_suffix('/').unwrap_or(&lo).to_owned();
    hi.push('0');
    Some((lo, hi))
}

/// blake3 of the first and last [`WINDOW`] bytes of the first `len` bytes of a file.
fn window_hashes(path: &Path, len: u64) -> std::io::Result<([u8; 32], [u8; 32])> {
    window_hashes_of(&open_regular(path)?, len)
}

impl crate::graph::Snapshot {
    /// Whether the file at `path`, `size` bytes long, must not be read over session `s`
    /// (`rec`): a v3 file cut short ([`Snapshot::is_cut_short`](crate::graph::Snapshot::is_cut_short):
    /// the store may hold the only copy of the lost entries) that no `FILE.bak` vouches for
    /// ([`backup_holds`]). The one rule for every command that reads a file over its stored
    /// session (import, prune); `false` when the file cannot be read (the reader says why).
    pub fn refuses_as_cut_short(
        &self,
        s: SessionKey,
        rec: &SessionRecord,
        path: &Path,
        size: u64,
    ) -> Result<bool, StoreError> {
        if size >= rec.file_size || rec.version < 3.0 {
            return Ok(false);
        }
        let Ok(file) = open_regular(path) else {
            return Ok(false);
        };
        let mut file = std::io::BufReader::with_capacity(1 << 16, file);
        Ok(self.is_cut_short(s, &mut file, size)? && !backup_holds(path, rec))
    }
}

/// Whether `FILE.bak` beside the source holds the bytes the store holds for it (its size and
/// window hashes): then a source cut short loses nothing that only the store holds, and is
/// read as it is. That is what `prune --in-place` leaves when it is interrupted after putting
/// the pruned file in place (a prefix of the source when it kept an early entry) and before it
/// imported it: the next import finishes the job instead of refusing the file.
fn backup_holds(source: &Path, rec: &SessionRecord) -> bool {
    let mut name = source.as_os_str().to_owned();
    name.push(".bak");
    let bak = PathBuf::from(name);
    let Ok(f) = open_regular(&bak) else {
        return false;
    };
    f.metadata().is_ok_and(|m| m.len() == rec.file_size)
        && window_hashes_of(&f, rec.file_size)
            .is_ok_and(|(h, t)| h == rec.head_hash && t == rec.tail_hash)
}

/// [`window_hashes`] of an open file (positioned reads: its offset does not move).
fn window_hashes_of(f: &File, len: u64) -> std::io::Result<([u8; 32], [u8; 32])> {
    use std::os::unix::fs::FileExt;
    let w = WINDOW.min(len);
    let mut buf = vec![0u8; w as usize];
    f.read_exact_at(&mut buf, 0)?;
    let head = *blake3::hash(&buf).as_bytes();
    f.read_exact_at(&mut buf, len - w)?;
    let tail = *blake3::hash(&buf).as_bytes();
    Ok((head, tail))
}

/// Whether the file's reader still takes the header it took from the file's first `old_size`
/// bytes (`header_json`), on the same line: at once when the file starts with that line (as pi
/// writes it), else by reading up to the header in both (`path` opened again: the import
/// reads `f` from its own offset). The same text on a later line is another header: the lines
/// before it are then junk.
fn header_unchanged(
    f: &File,
    path: &Path,
    header_json: &str,
    old_size: u64,
) -> std::io::Result<bool> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; header_json.len() + 2];
    let mut got = 0;
    while got < head.len() {
        match f.read_at(&mut head[got..], got as u64)? {
            0 => break,
            n => got += n,
        }
    }
    let head = &head[..got];
    if let Some(rest) = head.strip_prefix(header_json.as_bytes())
        && (rest.starts_with(b"\n") || rest.starts_with(b"\r\n"))
    {
        return Ok(true);
    }
    let before = pisess_formats::session::first_header(open_regular(path)?.take(old_size));
    let now = pisess_formats::session::first_header(open_regular(path)?);
    Ok(match (before, now) {
        (Some(b), Some(n)) => b.json == header_json && n.json == b.json && n.line == b.line,
        _ => false,
    })
}

/// The error for a failed read of the window hashes: a file now shorter than the size it was
/// read at changed during the import ([`FileError::Changed`]); anything else is an I/O error.
fn changed_or_io(path: &Path, e: std::io::Error) -> FileError {
    if e.kind() == std::io::ErrorKind::UnexpectedEof {
        FileError::Changed {
            path: path.to_path_buf(),
            what: "it became shorter".into(),
        }
    } else {
        FileError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

fn windows_match(path: &Path, rec: &SessionRecord) -> std::io::Result<bool> {
    let (h, t) = window_hashes(path, rec.file_size)?;
    Ok(h == rec.head_hash && t == rec.tail_hash)
}

/// Where [`unchanged_in`] reads the catalogue: the store's `sources` table, or its copy.
trait Catalogue {
    /// The row of `path`. `near` is where the caller's previous lookup ended (the index of the
    /// row after it, for a catalogue that has indexes): files are looked up in path order,
    /// which is nearly always the catalogue's, so a catalogue may try there first. It only
    /// makes a lookup cheaper, never changes its answer.
    fn get(&self, path: &str, near: &mut usize) -> Result<Option<schema::SourceStat>, StoreError>;
    /// Whether `f` holds for a row whose path is in `lo..hi` (for any row when `None`), the
    /// rows visited in path order.
    fn any_in(
        &self,
        range: Option<(&str, &str)>,
        f: &mut dyn FnMut(&str, schema::SourceStat) -> bool,
    ) -> Result<bool, StoreError>;
}

impl Catalogue for redb::ReadOnlyTable<&'static str, schema::SourceStat> {
    fn get(&self, path: &str, _near: &mut usize) -> Result<Option<schema::SourceStat>, StoreError> {
        Ok(ReadableTable::get(self, path)?.map(|v| v.value()))
    }
    fn any_in(
        &self,
        range: Option<(&str, &str)>,
        f: &mut dyn FnMut(&str, schema::SourceStat) -> bool,
    ) -> Result<bool, StoreError> {
        let rows = match range {
            Some((lo, hi)) => self.range(lo..hi)?,
            None => self.iter()?,
        };
        for row in rows {
            let (path, stat) = row?;
            if f(path.value(), stat.value()) {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl Catalogue for SourceCopy {
    fn get(&self, path: &str, near: &mut usize) -> Result<Option<schema::SourceStat>, StoreError> {
        Ok(self.get_near(path, near))
    }
    fn any_in(
        &self,
        range: Option<(&str, &str)>,
        f: &mut dyn FnMut(&str, schema::SourceStat) -> bool,
    ) -> Result<bool, StoreError> {
        Ok(self.rows_in(range).any(|(p, s)| f(p, s)))
    }
}

/// The catalogue key of a canonical path: the path as a string; `None` when it is not UTF-8
/// (the one definition of the key, for the import that writes the row and for the unchanged
/// check that looks it up). Such a file is not imported ([`FileError::NotUtf8`]): a key made
/// lossily names no file, so the session would be marked gone by the import that made it.
fn catalogue_key(p: &Path) -> Option<&str> {
    p.to_str()
}

/// The catalogue key a file that no longer exists was imported under: its folder's canonical
/// path (as far as the folder still exists, [`canonical_prefix`]) joined with its name.
/// `None` when the path is not UTF-8.
fn deleted_key(path: &Path) -> Option<String> {
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let canon = canonical_prefix(&std::path::absolute(dir).ok()?).join(name);
    catalogue_key(&canon).map(str::to_owned)
}

/// Whether a session's file has disappeared from its path (a catalogue key, canonical when it
/// was imported): nothing is there any more, or a symbolic link is (the file was replaced by a
/// link: what the link leads to is imported under its own canonical path, so the session of
/// the old file must not stay live beside it), or anything else that is no regular file (a
/// folder, a FIFO: the scan never reads one, so the session could never be refreshed or
/// marked gone otherwise). A path that cannot be looked at (a folder on the way that the user
/// cannot search) has not vanished.
fn vanished(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(md) => !md.file_type().is_file(),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The report of a file that was not imported, and why.
fn failed_report(path: PathBuf, error: String) -> FileReport {
    FileReport {
        path,
        outcome: Outcome::Failed,
        session: None,
        bytes_read: 0,
        lines_read: 0,
        entries_added: 0,
        warned_lines: 0,
        first_warning: None,
        error: Some(error),
    }
}

/// The report of an import that changed nothing: every file (by its path, in order)
/// unchanged, of the session [`unchanged_in`] found for it, but those the scan could not take
/// ([`Found::error`]), which failed.
fn unchanged_report(files: Vec<Found>, sessions: Vec<u64>) -> ImportReport {
    let mut sessions = sessions.into_iter();
    ImportReport {
        files: files
            .into_iter()
            .map(|f| match f.error {
                Some(e) => failed_report(f.path, e.into()),
                None => FileReport {
                    path: f.path,
                    outcome: Outcome::Unchanged,
                    session: sessions.next().map(SessionKey),
                    bytes_read: 0,
                    lines_read: 0,
                    entries_added: 0,
                    warned_lines: 0,
                    first_warning: None,
                    error: None,
                },
            })
            .collect(),
        gone: 0,
    }
}

/// Whether an import of `files` (each with its canonical path when known) would change
/// nothing, by the catalogue `sources`: every file known, not gone, with the size and mtime
/// on record, and no session under `folders` whose file has disappeared. Then the session of
/// each file, in order ([`unchanged_report`] makes the import's report of them); `None`
/// otherwise. The files the scan could not take ([`Found::error`]) are left out: an import
/// reports them as failed and writes nothing for them either.
fn unchanged_in(
    sources: &impl Catalogue,
    files: &[Found],
    folders: &[PathBuf],
) -> Result<Option<Vec<u64>>, StoreError> {
    // The catalogue keys of the files, for the gone check below: one after another in
    // `seen_keys`, `seen` holding where each starts and ends. Each file's key is made in `buf`
    // (its folder's canonical path joined with its name): no allocation per file.
    let mut seen_keys = String::new();
    let mut seen: Vec<(usize, usize)> = Vec::with_capacity(files.len());
    let mut sessions = Vec::with_capacity(files.len());
    let mut near = 0;
    let mut buf = PathBuf::new();
    for f in files {
        if f.error.is_some() {
            continue;
        }
        // The directory scan's size and mtime when it has them (a plain file under a
        // folder), else a `stat` of the path.
        let owned;
        let (key, size, mtime) = match (&f.canon_dir, f.stat) {
            (Some(dir), Some((size, mtime))) => {
                buf.as_mut_os_string().clear();
                buf.push(dir);
                buf.push(f.name());
                let Some(key) = catalogue_key(&buf) else {
                    return Ok(None);
                };
                (key, size, mtime)
            }
            _ => {
                let Ok((c, size, mtime)) = stat(&f.path, f.canon().as_deref()) else {
                    return Ok(None);
                };
                owned = c;
                let Some(key) = catalogue_key(&owned) else {
                    return Ok(None);
                };
                (key, size, mtime)
            }
        };
        let Some((s, sz, mt, gone)) = sources.get(key, &mut near)? else {
            return Ok(None);
        };
        if gone || sz != size || mt != mtime {
            return Ok(None);
        }
        sessions.push(s);
        if !folders.is_empty() {
            let start = seen_keys.len();
            seen_keys.push_str(key);
            seen.push((start, seen_keys.len()));
        }
    }
    let key_of = |&(start, end): &(usize, usize)| seen_keys.get(start..end).unwrap_or_default();
    seen.sort_unstable_by(|a, b| key_of(a).cmp(key_of(b)));
    // A session whose file was under one of the folders and has disappeared must be marked
    // gone (so the import is not a no-op). Only the part of the catalogue that can hold
    // such files is read. A row found among the files seen is not gone (that spares its
    // `exists`, and only that: the answer is the same without). The rows come in path order,
    // as `seen` is sorted, so a cursor that only moves forward finds them in one pass.
    let mut at: usize = 0;
    let mut disappeared = |path: &str, (_, _, _, gone): schema::SourceStat| -> bool {
        if gone {
            return false;
        }
        // Nearly always the next key.
        if seen.get(at).is_some_and(|k| key_of(k) == path) {
            at += 1;
            return false;
        }
        // A range's rows follow the previous range's (the folders' ranges may overlap or
        // come in any order): start again from the first key at or after this row.
        if at
            .checked_sub(1)
            .and_then(|i| seen.get(i))
            .is_some_and(|k| key_of(k) >= path)
        {
            at = seen.partition_point(|k| key_of(k) < path);
        }
        while seen.get(at).is_some_and(|k| key_of(k) < path) {
            at += 1;
        }
        if seen.get(at).is_some_and(|k| key_of(k) == path) {
            at += 1;
            return false;
        }
        folders.iter().any(|f| Path::new(path).starts_with(f)) && vanished(Path::new(path))
    };
    match folders
        .iter()
        .map(|f| keys_under(f))
        .collect::<Option<Vec<_>>>()
    {
        Some(ranges) => {
            for (lo, hi) in &ranges {
                if sources.any_in(Some((lo, hi)), &mut disappeared)? {
                    return Ok(None);
                }
            }
        }
        None => {
            if sources.any_in(None, &mut disappeared)? {
                return Ok(None);
            }
        }
    }
    Ok(Some(sessions))
}

/// The files to import for `paths` (folders scanned with [`files_under`]), and the folders
/// (canonical when they can be) whose vanished files are marked gone: those given, and in
/// pi's per-project session folder the folders that its symlinks lead or led to.
///
/// `trash` is the store's trash folder ([`crate::store::trash_dir`]): a scan does not go into
/// it (the files `prune --sessions` moved there are not sessions to import again), though a
/// path naming it, or a file in it, is read as given.
fn discover(paths: &[PathBuf], trash: &Path) -> (Vec<Found>, Vec<PathBuf>) {
    let mut files: Vec<Found> = Vec::new();
    let mut folders = Vec::new();
    // The trash's canonical path; none when it does not exist (then there is nothing to skip).
    let trash = std::fs::canonicalize(trash).ok();
    let skip = trash.as_deref();
    // pi's per-project session folder, whose symlinks to folders pi lists as project folders.
    let mut pi_folder = None;
    for p in paths {
        if p.is_dir() {
            match std::fs::canonicalize(p) {
                Ok(canon) => {
                    let pi = pi_folder
                        .get_or_insert_with(pisess_formats::session_folder::per_project_root)
                        .as_ref()
                        .is_some_and(|r| *r == canon);
                    let mut linked = Vec::new();
                    files.extend(files_under(
                        p,
                        Some(&canon),
                        skip,
                        pi.then_some(&mut linked),
                    ));
                    folders.append(&mut linked);
                    folders.push(canon);
                }
                // A folder that is itself deleted (the current folder `.` removed while in
                // use): its scan would find nothing and say nothing.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    files.push(Found::failed(
                        p.clone(),
                        format!("cannot resolve this folder (deleted while in use?): {e}"),
                    ));
                }
                Err(_) => {
                    files.extend(files_under(p, None, skip, None));
                    folders.push(p.clone());
                }
            }
        } else {
            files.push(Found {
                path: p.clone(),
                canon_dir: None,
                name_at: 0,
                stat: None,
                error: None,
            });
        }
    }
    if paths.len() > 1 {
        once_each(&mut files);
    }
    (files, folders)
}

/// Keeps the first of the files that name one file (`import s/a.jsonl s` finds `a.jsonl`
/// twice): each file is imported and counted once. Files are compared by canonical path, a
/// file that has none (deleted, unreadable) by its path as given. Only called when several
/// paths were given (the re-import of pi's folder stays free of it): one folder's scan names
/// a file twice only through symbolic links, which is left as it is.
fn once_each(files: &mut Vec<Found>) {
    let mut seen = std::collections::HashSet::new();
    files.retain(|f| {
        let key = match f.canon() {
            Some(c) => c,
            None if f.error.is_none() => {
                std::fs::canonicalize(&f.path).unwrap_or_else(|_| f.path.clone())
            }
            None => f.path.clone(),
        };
        seen.insert(key)
    });
}

/// A `*.jsonl` file found under a folder by [`files_under`], or a path given as a file.
struct Found {
    /// The path (the folder joined with the file's path below it).
    path: PathBuf,
    /// The canonical path of the folder it was found in, when known and the file is not a
    /// symlink: then the file's canonical path is that folder joined with its name (a file
    /// found through real folders only is the canonical folder joined with its path below
    /// the folder). Shared by the folder's files, so that a scan allocates no canonical path
    /// per file.
    canon_dir: Option<std::sync::Arc<Path>>,
    /// Where the file's name starts in `path` (with `canon_dir`).
    name_at: usize,
    /// Its size and mtime ([`size_mtime`]) from the directory scan (`fstatat` on the open
    /// folder, no path walk), for a file that is not a symlink (then the same as a `stat` of
    /// its path).
    stat: Option<(u64, i64)>,
    /// Why the scan cannot take it: a folder it could not read, a file whose path is not
    /// UTF-8. The import reports it as failed and reads nothing.
    error: Option<Box<str>>,
}

impl Found {
    /// A folder or file that the scan found and cannot take, and why.
    fn failed(path: PathBuf, error: String) -> Self {
        Self {
            path,
            canon_dir: None,
            name_at: 0,
            stat: None,
            error: Some(error.into()),
        }
    }

    /// The file's name (the last component of `path`, for a file found by a scan).
    fn name(&self) -> &std::ffi::OsStr {
        use std::os::unix::ffi::OsStrExt;
        let p = self.path.as_os_str().as_bytes();
        std::ffi::OsStr::from_bytes(p.get(self.name_at..).unwrap_or_default())
    }

    /// Its canonical path, when the scan made it known.
    fn canon(&self) -> Option<PathBuf> {
        self.canon_dir.as_deref().map(|d| joined(d, self.name()))
    }
}

/// A directory-scan item of [`files_under`]: a folder still to read (with its canonical path
/// when known), or a file.
enum Scan {
    Dir(PathBuf, Option<std::sync::Arc<Path>>),
    File(Found),
}

/// The `*.jsonl` files under a folder, recursively (explicit stack, depth first), sorted by
/// path. Each folder's entries are sorted by name and visited in that order, which is the
/// order of `Path`'s own comparison (component by component, bytes within one): sorting
/// names in one folder is much cheaper than comparing whole paths afterwards.
///
/// Only regular files are taken, and symlinks whose target is one (or cannot be looked at: the
/// import then says why); a FIFO, socket or device named `*.jsonl` is left out (opening a FIFO
/// would wait for a writer). With `linked` (`dir` is pi's per-project session folder, where
/// pi's listing reads them as project folders), symlinks to folders directly inside `dir` are
/// followed ([`linked_folder`]), not deeper, and the folders they lead to are added to
/// `linked`, with where dangling ones not named `*.jsonl` led ([`dangling_target`]): the gone
/// check covers them. Otherwise symlinks to folders are not followed. A folder that cannot be
/// read, and a file whose name is not UTF-8 (the store cannot record its path), come out with
/// their [`Found::error`], in their place.
///
/// This is most of the work of re-importing an unchanged folder, so each entry costs one
/// `statx` and as few allocations as the paths need: the name used for sorting is a slice of
/// the entry's path, and a file's canonical path is its folder's canonical path joined with
/// its name (the same path `canon_dir` joined with the file's path below `dir`).
///
/// A sub-folder whose canonical path is `skip` (the store's trash) is not read. Only a folder
/// named like it is looked at for that, so the scan costs no more for the others.
fn files_under(
    dir: &Path,
    canon_dir: Option<&Path>,
    skip: Option<&Path>,
    linked: Option<&mut Vec<PathBuf>>,
) -> Vec<Found> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    let mut stack = vec![Scan::Dir(
        dir.to_path_buf(),
        canon_dir.map(std::sync::Arc::from),
    )];
    // (the name's first 8 bytes as a big-endian number, zero-padded, where the entry's name
    // starts in its path, the entry). Names hold no NUL byte, so the numbers order names as
    // their first 8 bytes do, and most names of a folder differ there: the sort compares
    // numbers, and whole names only on a tie.
    let mut here: Vec<(u64, usize, Scan)> = Vec::new();
    fn prefix(name: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = name.len().min(8);
        b[..n].copy_from_slice(&name[..n]);
        u64::from_be_bytes(b)
    }
    fn name_of((_, at, s): &(u64, usize, Scan)) -> &[u8] {
        let p = match s {
            Scan::Dir(p, _) => p,
            Scan::File(f) => &f.path,
        };
        p.as_os_str().as_bytes().get(*at..).unwrap_or_default()
    }
    // The first folder read is `dir` itself: symlinks to folders are followed there only,
    // and only when `linked` asks for it.
    let mut top = linked.is_some();
    let mut linked = linked;
    while let Some(item) = stack.pop() {
        let (d, canon_d) = match item {
            Scan::File(f) => {
                out.push(f);
                continue;
            }
            Scan::Dir(d, c) => (d, c),
        };
        let is_top = std::mem::take(&mut top);
        let rd = match std::fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) => {
                out.push(Found::failed(d, format!("cannot read this folder: {e}")));
                continue;
            }
        };
        for e in rd.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name();
            if is_top
                && ft.is_symlink()
                && let (Some(canon_top), Some(linked)) = (canon_d.as_deref(), linked.as_mut())
            {
                let p = joined(&d, &name);
                if let Some(target) = linked_folder(&p, canon_top, skip) {
                    let at = p.as_os_str().len() - name.len();
                    linked.push(target.clone());
                    let c = Some(std::sync::Arc::from(target));
                    here.push((prefix(name.as_bytes()), at, Scan::Dir(p, c)));
                    continue;
                }
                // A dangling `*.jsonl` link is a file link, reported as unreadable as before.
                let jsonl_name = name.len() > 6 && name.as_bytes().ends_with(b".jsonl");
                if !jsonl_name && let Some(gone) = dangling_target(&p) {
                    linked.push(gone);
                    continue;
                }
            }
            // `Path::extension` of a name is `jsonl` exactly when the name ends with `.jsonl`
            // after at least one byte (a name whose only dot comes first has no extension).
            let jsonl = name.len() > 6 && name.as_bytes().ends_with(b".jsonl");
            if !ft.is_dir() && !jsonl {
                continue;
            }
            let p = joined(&d, &name);
            let at = p.as_os_str().len() - name.len();
            if !ft.is_dir() && !ft.is_file() {
                // A symlink is taken when its target is a regular file, or cannot be looked at
                // (a dangling link: the import says why it fails, as it always did).
                let keep = ft.is_symlink()
                    && match std::fs::metadata(&p) {
                        Ok(md) => md.is_file(),
                        Err(_) => true,
                    };
                if !keep {
                    continue;
                }
            }
            if !ft.is_dir() && name.to_str().is_none() {
                let error = error_chain(&FileError::NotUtf8 { path: p.clone() });
                here.push((
                    prefix(name.as_bytes()),
                    at,
                    Scan::File(Found::failed(p, error)),
                ));
                continue;
            }
            if ft.is_dir() {
                let c = canon_d
                    .as_deref()
                    .map(|c| std::sync::Arc::from(joined(c, &name)));
                if let Some(skip) = skip
                    && skip.file_name() == Some(name.as_os_str())
                    && match c.as_deref() {
                        Some(c) => c == skip,
                        None => std::fs::canonicalize(&p).is_ok_and(|c| c == skip),
                    }
                {
                    continue;
                }
                here.push((prefix(name.as_bytes()), at, Scan::Dir(p, c)));
            } else {
                let (canon_dir, stat) = if ft.is_symlink() {
                    (None, None)
                } else {
                    (canon_d.clone(), e.metadata().ok().map(|md| size_mtime(&md)))
                };
                here.push((
                    prefix(name.as_bytes()),
                    at,
                    Scan::File(Found {
                        path: p,
                        canon_dir,
                        name_at: at,
                        stat,
                        error: None,
                    }),
                ));
            }
        }
        here.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| name_of(a).cmp(name_of(b))));
        if is_top && let Some(canon_top) = canon_d.as_deref() {
            read_linked_once(&mut here, canon_top);
        }
        stack.extend(here.drain(..).rev().map(|(_, _, s)| s));
    }
    out
}

/// Of the folders found at the top of a scan (sorted by name), those that symlinks lead to
/// (outside `canon_top`, where [`linked_folder`] put them) read once
/// ([`pisess_formats::session_folder::read_linked_once`]).
fn read_linked_once(here: &mut Vec<(u64, usize, Scan)>, canon_top: &Path) {
    let target = |s: &Scan| match s {
        Scan::Dir(_, Some(c)) if !c.starts_with(canon_top) => Some(c.clone()),
        _ => None,
    };
    let targets: Vec<std::sync::Arc<Path>> = here.iter().filter_map(|h| target(&h.2)).collect();
    if targets.len() < 2 {
        return;
    }
    let refs: Vec<&Path> = targets.iter().map(|t| &**t).collect();
    let mut read = pisess_formats::session_folder::read_linked_once(&refs).into_iter();
    here.retain(|h| target(&h.2).is_none() || read.next().unwrap_or(true));
}

/// The canonical path of the folder a symlink directly inside the scanned folder (canonical
/// path `canon_top`) leads to, when the scan should read it
/// ([`pisess_formats::session_folder::linked_folder`]) and it is not `skip` (the store's
/// trash).
fn linked_folder(link: &Path, canon_top: &Path, skip: Option<&Path>) -> Option<PathBuf> {
    pisess_formats::session_folder::linked_folder(link, canon_top)
        .filter(|t| skip != Some(t.as_path()))
}

/// Where a dangling symlink directly inside the scanned folder led: its target, through any
/// further links, canonical as far as it exists ([`canonical_prefix`]). The sessions imported
/// from there are then checked for being gone.
fn dangling_target(link: &Path) -> Option<PathBuf> {
    if std::fs::metadata(link).is_ok() {
        return None;
    }
    Some(canonical_prefix(link))
}

/// `p` with its longest existing ancestor made canonical and the rest appended as written
/// (`p` itself canonical when it exists); a dangling symbolic link met on the way is replaced
/// by its target (up to 40 of them, as the kernel allows). The catalogue key a file imported
/// from a path that has since disappeared was most likely recorded under.
fn canonical_prefix(p: &Path) -> PathBuf {
    let mut p = p.to_path_buf();
    'links: for _ in 0..40 {
        let mut rest: Vec<std::ffi::OsString> = Vec::new();
        let mut at = p.as_path();
        loop {
            let append = |base: PathBuf| rest.iter().rev().fold(base, |acc, n| acc.join(n));
            if let Ok(c) = std::fs::canonicalize(at) {
                return append(c);
            }
            if std::fs::symlink_metadata(at).is_ok_and(|m| m.file_type().is_symlink())
                && let Ok(target) = std::fs::read_link(at)
            {
                let base = at.parent().unwrap_or(Path::new("/"));
                p = append(base.join(target));
                continue 'links;
            }
            match (at.parent(), at.file_name()) {
                (Some(parent), Some(name)) => {
                    rest.push(name.to_os_string());
                    at = parent;
                }
                _ => return p.clone(),
            }
        }
    }
    p
}

/// `dir.join(name)` in one allocation of the exact size (`join` copies `dir`, then grows the
/// copy for `name`: a second allocation and a copy per file of a folder scan).
fn joined(dir: &Path, name: &std::ffi::OsStr) -> PathBuf {
    let mut p = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    p.push(dir);
    p.push(name);
    p
}

/// The `*.jsonl` files under a folder, recursively (explicit stack), sorted: regular files
/// (and symlinks to them) that an import would read, without the folders it could not read
/// and the files it would refuse.
pub fn jsonl_files_under(dir: &Path) -> Vec<PathBuf> {
    files_under(dir, None, None, None)
        .into_iter()
        .filter(|f| f.error.is_none())
        .map(|f| f.path)
        .collect()
}

/// An error and its sources, joined with ": ".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        // A cause the message above already ends with (an error that prints its source as
        // well as returning it) is not said twice.
        let text = c.to_string();
        if !s.ends_with(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = c.source();
    }
    s
}

/// Parses a time as pi's `new Date(s).getTime()` reads it, to Unix milliseconds: `None` where
/// that gives `NaN` (the ECMAScript date-time format, [`crate::agent::js`]).
///
/// Like V8 it takes the short forms (`2026-01-01`, `2026-01`, `2026-01-01T10:00`), extended
/// years (`+002026-…`), `t` or a space for the `T`, `z` for the `Z`, any number of fraction
/// digits (the first three count), a day the month does not have (rolled over into the next:
/// 2026-02-30 is March 2) and `24:00:00` (the next day's midnight), and applies an offset
/// (`+02:00`, `-05:30`, `+0200`); it refuses other separators and widths, month 0 or 13, day 0
/// or 32, minute or second 60, a `.` without digits and anything after the zone (V8's values
/// checked with node). Unlike JavaScript, a time without a zone is UTC, not local time (pi
/// always writes the `Z`).
pub fn iso_to_ms(s: &str) -> Option<i64> {
    crate::agent::js::string_date_ms(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files whose reads fail once this many of their bytes were read ([`SourceBytes`]).
    static FAILING: std::sync::Mutex<Vec<(PathBuf, u64)>> = std::sync::Mutex::new(Vec::new());

    /// The bytes of `path` an import reads before its reads fail, if they are to.
    pub(super) fn failing_after(path: &Path) -> Option<u64> {
        let list = FAILING.lock().unwrap_or_else(|e| e.into_inner());
        list.iter().find(|(p, _)| p == path).map(|&(_, n)| n)
    }

    /// Makes every read of `path` fail once `after` bytes were read (`None`: never).
    fn fail_reads(path: &Path, after: Option<u64>) {
        let path = std::fs::canonicalize(path).unwrap();
        let mut list = FAILING.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|(p, _)| *p != path);
        if let Some(n) = after {
            list.push((path, n));
        }
    }

    fn fixture(name: &str) -> Vec<u8> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions");
        std::fs::read(dir.join(name)).unwrap()
    }

    fn export(store: &Store, path: &Path) -> Option<Vec<u8>> {
        let snap = store.snapshot().unwrap();
        let s = snap.session_by_path(path).unwrap()?;
        let mut out = Vec::new();
        snap.export_session(s, &mut out).unwrap();
        Some(out)
    }

    fn import(store: &Store, folder: &Path, opts: &ImportOptions) -> ImportReport {
        store
            .import(&[folder.to_path_buf()], opts, &mut |_| {})
            .unwrap()
    }

    fn assert_consistent(store: &mut Store) {
        let v = store.verify().unwrap();
        assert!(v.findings.is_empty(), "{:?}", v.findings);
    }

    /// After the retried import: `big` exports as `bytes`, the store holds what `reference`
    /// (never failed) holds, and it passes `verify`.
    fn assert_completed(store: &mut Store, reference: &Store, big: &Path, bytes: &[u8]) {
        assert_eq!(export(store, big).as_deref(), Some(bytes));
        assert_eq!(
            store.content_digest().unwrap(),
            reference.content_digest().unwrap()
        );
        assert_consistent(store);
    }

    const CHUNK: u64 = 16 * 1024;

    /// A read that fails part-way through a file (first chunk, on a chunk boundary, later
    /// chunks, the last byte) fails that file alone, names it and the cause, stores nothing
    /// of it, and the next import stores exactly what an import without the failure does.
    #[test]
    fn a_read_error_part_way_stores_nothing_and_the_next_import_completes() {
        let bytes = fixture("03-compactions.jsonl");
        let opts = ImportOptions {
            chunk_size: CHUNK as usize,
            ..Default::default()
        };
        let len = bytes.len() as u64;
        assert!(len > 4 * CHUNK);
        for after in [
            0,
            1,
            4096,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            3 * CHUNK + 7,
            len - 1,
        ] {
            let dir = tempfile::tempdir().unwrap();
            let folder = dir.path().join("sessions");
            std::fs::create_dir(&folder).unwrap();
            let big = folder.join("big.jsonl");
            std::fs::write(&big, &bytes).unwrap();
            let reference = Store::open(dir.path().join("reference.redb")).unwrap();
            import(&reference, &folder, &opts);

            let mut store = Store::open(dir.path().join("store.redb")).unwrap();
            fail_reads(&big, Some(after));
            let failed = import(&store, &folder, &opts);
            fail_reads(&big, None);
            let f = &failed.files[0];
            assert_eq!(f.outcome, Outcome::Failed, "failing after {after} bytes");
            let why = f.error.as_deref().unwrap_or_default();
            assert!(
                why.contains("big.jsonl") && why.contains("injected read error"),
                "{why}"
            );
            assert_eq!(export(&store, &big), None);
            assert_consistent(&mut store);

            let done = import(&store, &folder, &opts);
            assert_eq!(done.files[0].outcome, Outcome::New);
            assert_completed(&mut store, &reference, &big, &bytes);
        }
    }

    /// A read that fails in the appended part of a grown file leaves the session as it was,
    /// and a new file beside it imports as usual; the next import appends the new lines as an
    /// import without the failure did.
    #[test]
    fn a_read_error_in_an_append_keeps_the_old_rows() {
        let bytes = fixture("05-context-edits-labels.jsonl");
        let lines = bytes.iter().filter(|&&b| b == b'\n').count();
        let mut cut = 0;
        for _ in 0..lines / 2 {
            cut += bytes[cut..].iter().position(|&b| b == b'\n').unwrap() + 1;
        }
        let (head, tail) = bytes.split_at(cut);
        let opts = ImportOptions {
            chunk_size: CHUNK as usize,
            ..Default::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sessions");
        std::fs::create_dir(&folder).unwrap();
        let big = folder.join("big.jsonl");
        std::fs::write(&big, head).unwrap();
        // Named to be read before `big.jsonl` (files are read in name order), so that both
        // stores give the same keys.
        let other = folder.join("a-other.jsonl");
        let reference = Store::open(dir.path().join("reference.redb")).unwrap();
        let mut store = Store::open(dir.path().join("store.redb")).unwrap();
        import(&reference, &folder, &opts);
        import(&store, &folder, &opts);

        std::fs::OpenOptions::new()
            .append(true)
            .open(&big)
            .and_then(|mut f| std::io::Write::write_all(&mut f, tail))
            .unwrap();
        std::fs::write(&other, fixture("01-tiny.jsonl")).unwrap();
        import(&reference, &folder, &opts);
        fail_reads(&big, Some(tail.len() as u64 / 2));
        let failed = import(&store, &folder, &opts);
        fail_reads(&big, None);
        let outcome = |r: &ImportReport, p: &Path| {
            r.files
                .iter()
                .find(|f| f.path.ends_with(p.file_name().unwrap()))
                .map(|f| f.outcome)
        };
        assert_eq!(outcome(&failed, &big), Some(Outcome::Failed));
        assert_eq!(outcome(&failed, &other), Some(Outcome::New));
        assert_eq!(export(&store, &big).as_deref(), Some(head));
        assert_consistent(&mut store);

        let done = import(&store, &folder, &opts);
        assert_eq!(outcome(&done, &big), Some(Outcome::Grown));
        assert_eq!(outcome(&done, &other), Some(Outcome::Unchanged));
        assert_completed(&mut store, &reference, &big, &bytes);
    }

    /// The folder scan finds what a plain recursive walk with `Path::extension` finds, in
    /// `Path` order, with each plain file's canonical path and size and mtime (none for a
    /// symlink): names that only look like `*.jsonl`, folders named like one, nesting.
    #[test]
    fn the_folder_scan_finds_what_a_plain_walk_finds() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let names = [
            "a.jsonl",
            ".jsonl",
            "..jsonl",
            "b.json",
            "c.jsonl.bak",
            "d.x.jsonl",
            "E.JSONL",
            "jsonl",
            "x.jsonl/f.jsonl",
            "x.jsonl/.jsonl",
            "sub/g.jsonl",
            "sub/deeper/h.jsonl",
            "sub-a/i.jsonl",
            "sub.a/j.jsonl",
            // Names alike in their first 8 bytes (the sort's quick key), shorter than 8,
            // and with bytes above 0x7f.
            "session-2.jsonl",
            "session-10.jsonl",
            "session-1.jsonl",
            "session-/k.jsonl",
            "session.jsonl",
            "s.jsonl",
            "sessio.jsonl",
            "sessionA.jsonl",
            "sessiona/l.jsonl",
            "\u{e9}t\u{e9}.jsonl",
            "\u{e9}.jsonl",
            "~.jsonl",
        ];
        for (i, n) in names.iter().enumerate() {
            let p = root.join(n);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x".repeat(i + 1)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("a.jsonl"), root.join("link.jsonl")).unwrap();
        // The reference: std's own path operations, recursion, a sort of whole paths.
        fn walk(d: &Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                let ft = std::fs::symlink_metadata(&p).unwrap().file_type();
                if ft.is_dir() {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    out.push(p);
                }
            }
        }
        let mut want = Vec::new();
        walk(&root, &mut want);
        want.sort();
        let canon_root = std::fs::canonicalize(&root).unwrap();
        let got = files_under(&root, Some(&canon_root), None, None);
        let paths: Vec<&Path> = got.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(paths, want);
        for f in &got {
            if f.path.ends_with("link.jsonl") {
                assert!(f.canon().is_none() && f.stat.is_none(), "{f:?}", f = f.path);
                continue;
            }
            assert_eq!(f.canon(), Some(std::fs::canonicalize(&f.path).unwrap()));
            let md = std::fs::metadata(&f.path).unwrap();
            assert_eq!(f.stat, Some(size_mtime(&md)), "{}", f.path.display());
        }
        assert_eq!(jsonl_files_under(&root), want);
    }

    /// `canonical_prefix` follows dangling links to where they lead, through further links,
    /// and ends on a loop of links (the kernel's 40) instead of going round it.
    #[test]
    fn canonical_prefix_follows_dangling_links_and_ends_on_loops() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap();
        symlink(root.join("real/gone"), root.join("hop")).unwrap();
        symlink(root.join("hop"), root.join("link")).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        assert_eq!(
            canonical_prefix(&root.join("link").join("x.jsonl")),
            root.join("real/gone/x.jsonl")
        );
        symlink(root.join("b"), root.join("a")).unwrap();
        symlink(root.join("a"), root.join("b")).unwrap();
        let looped = canonical_prefix(&root.join("a").join("x.jsonl"));
        assert!(looped.ends_with("x.jsonl"), "{}", looped.display());
    }

    /// Symlinks to folders are followed directly inside the scanned folder (pi's listing reads
    /// them as project folders), not deeper, and not when they lead back to the folder or
    /// above it; the folders they lead to are returned for the gone check.
    #[test]
    fn the_scan_follows_linked_folders_at_the_top_only() {
        use std::os::unix::fs::symlink;
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("sessions");
        let proj = t.path().join("elsewhere").join("proj");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&proj).unwrap();
        std::fs::write(proj.join("x.jsonl"), "x").unwrap();
        std::fs::write(root.join("sub").join("y.jsonl"), "y").unwrap();
        symlink(&proj, root.join("link")).unwrap();
        symlink(&root, root.join("loop")).unwrap();
        symlink(t.path(), root.join("up")).unwrap();
        symlink(t.path().join("nowhere"), root.join("dangling")).unwrap();
        symlink(&proj, root.join("sub").join("deeper")).unwrap();
        // A dangling link named `*.jsonl` is a file link: listed, so the import says why it
        // cannot be read.
        symlink(t.path().join("nowhere.jsonl"), root.join("d.jsonl")).unwrap();
        let canon_root = std::fs::canonicalize(&root).unwrap();
        let mut linked = Vec::new();
        let got = files_under(&root, Some(&canon_root), None, Some(&mut linked));
        let paths: Vec<&Path> = got.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(
            paths,
            [
                root.join("d.jsonl"),
                root.join("link").join("x.jsonl"),
                root.join("sub").join("y.jsonl")
            ]
        );
        let canon_proj = std::fs::canonicalize(&proj).unwrap();
        assert_eq!(got[1].canon(), Some(canon_proj.join("x.jsonl")));
        // Where the dangling link led is checked for gone sessions too.
        linked.sort();
        let nowhere = std::fs::canonicalize(t.path()).unwrap().join("nowhere");
        let mut want = vec![canon_proj.clone(), nowhere.clone()];
        want.sort();
        assert_eq!(linked, want);
        // Without `linked` (not pi's folder), no link is followed.
        let got = files_under(&root, Some(&canon_root), None, None);
        assert_eq!(got.len(), 2);
        // The store's trash is not read through a link either.
        let mut linked = Vec::new();
        let got = files_under(
            &root,
            Some(&canon_root),
            Some(&canon_proj),
            Some(&mut linked),
        );
        assert_eq!(got.len(), 2);
        assert_eq!(linked, [nowhere]);
    }

    /// A duplicate id whose later occurrence lies in a later chunk: the id resolves to the
    /// later entry (pi's index), and the store holds what a one-chunk import holds, whether
    /// its `entry_ids` rows were written chunk by chunk or at once.
    #[test]
    fn a_duplicate_id_in_a_later_chunk_wins() {
        let pad = "x".repeat(2000);
        let mut text = String::from(
            "{\"type\":\"session\",\"version\":3,\"id\":\"s-dup\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}\n",
        );
        let mut parent = "null".to_owned();
        for i in 0..40 {
            // Lines 3 and 36 (about 70 KB apart, four 16 KiB chunks) share the id `dupe`.
            let id = if i == 2 || i == 35 {
                "dupe".to_owned()
            } else {
                format!("e{i:07}")
            };
            text.push_str(&format!(
                "{{\"type\":\"message\",\"id\":\"{id}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:{i:02}.000Z\",\"message\":{{\"role\":\"user\",\"content\":\"{pad}\"}}}}\n"
            ));
            parent = format!("\"{id}\"");
        }
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sessions");
        std::fs::create_dir(&folder).unwrap();
        let file = folder.join("dup.jsonl");
        std::fs::write(&file, &text).unwrap();
        let small = ImportOptions {
            chunk_size: CHUNK as usize,
            ..Default::default()
        };
        let whole = ImportOptions {
            chunk_size: 4 * text.len(),
            ..Default::default()
        };
        let mut chunked = Store::open(dir.path().join("chunked.redb")).unwrap();
        let once = Store::open(dir.path().join("once.redb")).unwrap();
        let s = import(&chunked, &folder, &small).files[0].session.unwrap();
        import(&once, &folder, &whole);
        let snap = chunked.snapshot().unwrap();
        let last = snap.entry_by_id(s, "dupe").unwrap().unwrap();
        // Keys follow file order from the session's first row (the header): line 37.
        let first = snap.entry_by_id(s, "e0000000").unwrap().unwrap();
        assert_eq!(last.0 - first.0, 35);
        drop(snap);
        assert_eq!(
            chunked.content_digest().unwrap(),
            once.content_digest().unwrap()
        );
        assert_eq!(export(&chunked, &file).as_deref(), Some(text.as_bytes()));
        assert_consistent(&mut chunked);
    }

    /// A folder's new files, read and sealed ahead while the file before each is written
    /// (`ahead`), are stored exactly as files imported one at a time, in the same order, are:
    /// sessions, v1/v2 files, and files that are no session or fail (whose keys the next file
    /// was sealed for, then read again).
    #[test]
    fn files_read_ahead_are_stored_as_files_read_one_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sessions");
        std::fs::create_dir(&folder).unwrap();
        let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut names = Vec::new();
        for sub in ["sessions", "edge"] {
            for e in std::fs::read_dir(fixtures.join(sub)).unwrap() {
                let p = e.unwrap().path();
                let name = format!("{sub}-{}", p.file_name().unwrap().to_string_lossy());
                std::fs::copy(&p, folder.join(&name)).unwrap();
                names.push(name);
            }
        }
        // A file that starts with a byte order mark, and one that is only junk lines.
        std::fs::write(
            folder.join("bom.jsonl"),
            [b"\xEF\xBB\xBF".as_slice(), &fixture("01-tiny.jsonl")].concat(),
        )
        .unwrap();
        std::fs::write(folder.join("junk-only.jsonl"), "not json\nnor this\n").unwrap();
        let before = ahead::tests::sealed();
        let mut ahead_store = Store::open(dir.path().join("ahead.redb")).unwrap();
        let report = import(&ahead_store, &folder, &ImportOptions::default());
        let (taken, dropped) = ahead::tests::sealed();
        assert!(report.files.len() > 30, "{}", report.files.len());
        assert!(taken - before.0 > 20, "taken {}", taken - before.0);
        // After each file that fails once its rows are counted (junk only, no header).
        assert!(dropped > before.1, "none dropped");

        let one = Store::open(dir.path().join("one.redb")).unwrap();
        for f in &report.files {
            let alone = one
                .import(
                    std::slice::from_ref(&f.path),
                    &ImportOptions::default(),
                    &mut |_| {},
                )
                .unwrap();
            assert_eq!(alone.files[0].outcome, f.outcome, "{}", f.path.display());
            assert_eq!(alone.files[0].entries_added, f.entries_added);
        }
        assert_eq!(
            ahead_store.content_digest().unwrap(),
            one.content_digest().unwrap()
        );
        assert_consistent(&mut ahead_store);
        let v3 = fixture("03-compactions.jsonl");
        let path = std::fs::canonicalize(folder.join("sessions-03-compactions.jsonl")).unwrap();
        assert_eq!(export(&ahead_store, &path).as_deref(), Some(v3.as_slice()));
    }

    /// A new file sealed ahead for the keys the file before it would give, when that file's
    /// append turns into a full read (an appended entry reuses an old id), is read again: the
    /// store holds what a fresh import of the folder holds.
    #[test]
    fn a_file_sealed_ahead_for_other_keys_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("sessions");
        std::fs::create_dir(&folder).unwrap();
        let a = folder.join("a.jsonl");
        std::fs::write(&a, fixture("02-small-branches.jsonl")).unwrap();
        let mut store = Store::open(dir.path().join("store.redb")).unwrap();
        import(&store, &folder, &ImportOptions::default());
        // An entry reusing the first entry's id: the append would change old entries.
        let text = String::from_utf8(fixture("02-small-branches.jsonl")).unwrap();
        let first = text.lines().nth(1).unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&a).unwrap();
        std::io::Write::write_all(&mut f, format!("{first}\n").as_bytes()).unwrap();
        drop(f);
        let b = folder.join("b.jsonl");
        std::fs::write(&b, fixture("01-tiny.jsonl")).unwrap();

        let before = ahead::tests::sealed();
        let report = import(&store, &folder, &ImportOptions::default());
        let after = ahead::tests::sealed();
        let outcomes: Vec<_> = report.files.iter().map(|f| f.outcome).collect();
        assert_eq!(outcomes, [Outcome::Rewritten, Outcome::New]);
        assert_eq!(after.1 - before.1, 1, "b was sealed for the append's keys");

        let fresh = Store::open(dir.path().join("fresh.redb")).unwrap();
        let mut files = vec![a.clone(), b.clone()];
        for p in &mut files {
            *p = std::fs::canonicalize(&*p).unwrap();
        }
        for p in &files {
            fresh
                .import(
                    std::slice::from_ref(p),
                    &ImportOptions::default(),
                    &mut |_| {},
                )
                .unwrap();
        }
        assert_eq!(
            export(&store, &files[1]).as_deref(),
            Some(fixture("01-tiny.jsonl").as_slice())
        );
        assert_consistent(&mut store);
        // Rows and links as a fresh import stores them (keys differ: `a` was stored twice).
        for cmd in [&files[0], &files[1]] {
            assert_eq!(export(&store, cmd), export(&fresh, cmd));
        }
    }

    /// A cause already printed by the error above it is said once.
    #[test]
    fn a_cause_is_not_said_twice() {
        let io = || std::io::Error::from_raw_os_error(28);
        let e = FileError::Migrate {
            path: PathBuf::from("/s/v1.jsonl"),
            source: pisess_migrate::MigrateError::Write(io()),
        };
        let text = error_chain(&e);
        assert_eq!(
            text,
            format!(
                "cannot migrate /s/v1.jsonl to v3: writing the migrated session failed: {}",
                io()
            )
        );
        let e = FileError::Io {
            path: PathBuf::from("/s/a.jsonl"),
            source: io(),
        };
        assert_eq!(error_chain(&e), format!("cannot read /s/a.jsonl: {}", io()));
    }

    #[test]
    fn iso_times() {
        assert_eq!(iso_to_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(
            iso_to_ms("2026-01-01T00:00:00.000Z"),
            Some(1_767_225_600_000)
        );
        assert_eq!(iso_to_ms("2025-01-01T00:00:01Z"), Some(1_735_689_601_000));
        assert_eq!(iso_to_ms("2026-01-01T00:00:00.5Z"), Some(1_767_225_600_500));
        assert_eq!(iso_to_ms("nope"), None);
    }

    /// What `new Date(s).getTime()` gives (node 22), `None` for `NaN`.
    #[test]
    fn iso_times_are_read_as_javascript_reads_them() {
        let day = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        let hms = |h: i64, m: i64, s: i64| Some(day + ((h * 60 + m) * 60 + s) * 1000);
        for (s, want) in [
            ("2026-01-01T10:00:59Z", hms(10, 0, 59)),
            ("2026-01-01t10:00:59z", hms(10, 0, 59)),
            ("2026-01-01 10:00:59Z", hms(10, 0, 59)),
            ("2026-01-01T10:00:00.1234Z", hms(10, 0, 0).map(|t| t + 123)),
            ("2026-01-01T24:00:00Z", hms(24, 0, 0)),
            ("2026-01-01T24:00:00.000Z", hms(24, 0, 0)),
            (
                "2026-02-30T00:00:00Z",
                Some(day + (31 + 30 - 1) * 86_400_000),
            ),
            ("2026-01-01T10:00:59+02:00", hms(8, 0, 59)),
            ("2026-01-01T10:00:59-05:30", hms(15, 30, 59)),
            ("2026-01-01T10:00:59+0200", hms(8, 0, 59)),
            (
                "2026-01-01T10:00:59.5+02:00",
                hms(8, 0, 59).map(|t| t + 500),
            ),
            ("2026-01-01T10:00:59+23:59", hms(10 - 23, -59, 59)),
            ("2026-01-01T10:00:59+02", None),
            ("2026-01-01T10:00:59+24:00", None),
            ("2026-01-01T10:00:59+02:60", None),
            ("2026-01-01T10:00:59Z+02:00", None),
            ("2026-01-01T10:00:60Z", None),
            ("2026-01-01T23:59:60.000Z", None),
            ("2026-01-01T10:60:00Z", None),
            ("2026-01-01T24:00:01Z", None),
            ("2026-01-01T24:00:00.001Z", None),
            ("2026-01-01T24:00:00.0001Z", None),
            ("2026-01-01T24:00:00.0000Z", hms(24, 0, 0)),
            ("2026-01-01T25:00:00Z", None),
            ("2026-01-01T10-00-00Z", None),
            ("2026-01-01T10x00x00Z", None),
            ("2026-01-01T10:00x00Z", None),
            ("2026-01-01T10:00:00.Z", None),
            ("2026-01-01T10:00:00,5Z", None),
            ("2026-01-01T00:00:00.000Zjunk", None),
            ("2026-01-01T00:00:00.000 Z", None),
            ("2026-13-01T00:00:00Z", None),
            ("2026-01-00T00:00:00Z", None),
            ("2026-01-32T00:00:00Z", None),
            ("2026-1-01T00:00:00Z", None),
            ("2026-01-01T00:00:0Z", None),
            // Forms V8 reads beyond RFC 3339 (pi's files hold whatever `new Date` took).
            ("2026-01-01", Some(day)),
            ("2026-01", Some(day)),
            ("2026", Some(day)),
            ("2026-01-01T10:00", hms(10, 0, 0)),
            ("+002026-01-01T10:00:00.000Z", hms(10, 0, 0)),
            (
                "2026-04-31T00:00:00Z",
                Some(day + (31 + 28 + 31 + 30) * 86_400_000),
            ),
            ("2026-01-01T10", None),
            ("-000000-01-01T00:00:00Z", None),
            ("+275760-09-13T00:00:00.001Z", None),
        ] {
            assert_eq!(iso_to_ms(s), want, "{s}");
        }
    }
}
