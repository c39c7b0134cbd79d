//! Opening the store: location, schema check, read snapshots.
//!
//! Invariants:
//! - a store is only used after its `meta.schema_version` has been checked: a newer version is
//!   refused ([`StoreError::NewerSchema`]) and never read further; an older one is refused
//!   ([`StoreError::OlderSchema`]), except [`schema::UPGRADABLE_FROM`], which the first open
//!   that can write upgrades in place, in one transaction (a read-only open reopens writable
//!   for it, as for a store that needs a repair);
//! - opening for writing creates every table in one transaction, so a fresh store is complete;
//! - a store held by another process gives [`StoreError::Busy`] (redb's exclusive-writer lock),
//!   naming the holder where the system says ([`crate::holder`]);
//! - a new store appears complete or not at all, and two processes creating it at once end up
//!   sharing one file (the second one's copy is discarded, never renamed over the first);
//! - a store opened with [`Store::open_read_only`] is never written: redb's read-only mode takes
//!   a shared lock, writes no header and saves no allocator state on close, so commands that only
//!   read neither fsync nor exclude each other; anything that must write gets
//!   [`StoreError::ReadOnly`] and reopens with [`Store::into_writable`]. A store that was not
//!   closed cleanly (redb needs a repair) is opened for writing instead, which repairs it;
//! - a store that does not exist is not created by [`Store::open_read_only`]: it answers as an
//!   empty store from memory ([`Store::is_absent`]), and anything that must write gets
//!   [`StoreError::ReadOnly`] and creates it with [`Store::into_writable`] (a reading command
//!   under a mistyped `PISESS_STORE` used to create the file and its folders);
//! - opening for writing removes the copy of the catalogue beside the store
//!   ([`crate::source_copy`]) once it holds the exclusive lock, before pisess writes anything.

use std::path::{Path, PathBuf};

use redb::{Database, ReadOnlyDatabase, ReadableDatabase, ReadableTable};

use crate::error::StoreError;
use crate::schema::{self, META, META_SCHEMA, SCHEMA_VERSION};

/// The redb handle of a [`Store`]: writable, or read-only (see the module invariants).
pub(crate) enum Db {
    /// Opened for reading and writing (an exclusive lock).
    Write(Database),
    /// Opened read-only (a shared lock; never written).
    Read(ReadOnlyDatabase),
    /// No store file: an empty store in memory, read as a read-only one; nothing is written.
    Absent(Database),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Write(_) => "Db::Write",
            Self::Read(_) => "Db::Read",
            Self::Absent(_) => "Db::Absent",
        })
    }
}

impl Db {
    /// A read transaction, in either mode.
    pub(crate) fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Self::Write(d) | Self::Absent(d) => d.begin_read(),
            Self::Read(d) => d.begin_read(),
        }
    }
}

/// An open store.
#[derive(Debug)]
pub struct Store {
    pub(crate) db: Db,
    path: PathBuf,
    /// Set when an import wrote what its report counts as unchanged (a gone session un-marked,
    /// a file read again to the same blocks): a write the final commit must persist.
    pub(crate) unreported_write: std::sync::atomic::AtomicBool,
}

/// The default store location: `$PISESS_STORE`, else `$XDG_DATA_HOME/pisess/store.redb`, else
/// `~/.local/share/pisess/store.redb`.
pub fn default_store_path() -> Result<PathBuf, StoreError> {
    store_path_from(|k| std::env::var_os(k))
}

/// [`default_store_path`] with the environment given as a function (for tests).
pub fn store_path_from(
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<PathBuf, StoreError> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = set("PISESS_STORE") {
        return Ok(p);
    }
    if let Some(d) = set("XDG_DATA_HOME") {
        return Ok(d.join("pisess/store.redb"));
    }
    if let Some(h) = set("HOME") {
        return Ok(h.join(".local/share/pisess/store.redb"));
    }
    Err(StoreError::NoLocation)
}

/// Whether nothing at all is at `path` (not even a dangling link): a store there does not
/// exist yet, and [`Store::open_read_only`] reads it as empty without creating it.
pub fn no_store_at(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// The folder `prune --sessions` moves old session files into: `trash/` beside the store at
/// `store`. An import never reads it as part of a folder it scans (a store kept inside pi's
/// session folder would otherwise take its trash back as sessions); named alone, it is read.
pub fn trash_dir(store: &Path) -> PathBuf {
    store
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("trash")
}

/// redb's page cache (its write buffer is at most half of it). redb's default, 1 GiB, let
/// the import of a 1 GiB session peak at 680 MB of memory; 96 MiB bounds an import, whatever
/// the file size, to about 200 MB (issue 3: under 256 MiB), and is ample for queries.
const CACHE_BYTES: usize = 96 << 20;

fn open_db(path: &Path) -> Result<Database, StoreError> {
    guarded(|| redb::Builder::new().set_cache_size(CACHE_BYTES).open(path))?
        .map_err(|e| StoreError::from_open(e, path))
}

/// How a read-only open uses redb's page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadCache {
    /// Pages read are kept, up to [`CACHE_BYTES`]: for queries that come back to the same
    /// pages (`context` of the 1 GiB benchmark session took 4 times as long without).
    #[default]
    Keep,
    /// No page is kept: every read copies from the file (through the system's page cache)
    /// into a buffer that is freed and reused. For a query that reads each page about once
    /// and keeps what it decoded: the kept copies were ~20 MB of fresh memory for `tree` of
    /// the 1 GiB session, and clearing fresh pages is much of its time (129 → 108 MB;
    /// 65.9 → 58.8 ms median, faster in 25 of 30 interleaved rounds).
    None,
}

impl ReadCache {
    /// redb's cache size for it.
    fn bytes(self) -> usize {
        match self {
            Self::Keep => CACHE_BYTES,
            Self::None => 0,
        }
    }
}

/// Opens an existing store read-only; `Ok(None)` when redb says it needs a repair first.
fn open_db_read_only(
    path: &Path,
    cache: ReadCache,
) -> Result<Option<ReadOnlyDatabase>, StoreError> {
    let bytes = cache.bytes();
    match guarded(|| {
        redb::Builder::new()
            .set_cache_size(bytes)
            .open_read_only(path)
    })? {
        Ok(db) => Ok(Some(db)),
        Err(redb::DatabaseError::RepairAborted) => Ok(None),
        Err(e) => Err(StoreError::from_open(e, path)),
    }
}

/// Runs a redb call that reads the store file; a panic of redb's on a damaged page (see
/// [`crate::panic_guard`]) is the store's damage, as redb's own `Corrupted` is.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, StoreError> {
    crate::panic_guard::redb_panics_as_damage(f)
}

/// Refuses a store path that names something other than a regular file (followed through
/// links): redb would wait forever opening a FIFO, and fail obscurely on a folder.
fn regular_or_missing(path: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => Err(StoreError::NotAFile {
            path: path.to_path_buf(),
            what: pisess_formats::open::not_regular(m.file_type()).to_string(),
        }),
        _ => Ok(()),
    }
}

/// What every open refuses ([`regular_or_missing`]), and also a file that starts with text
/// (a `PISESS_STORE` naming a session file, a script), which redb's open would call a damaged
/// store (and the CLI then advise moving it aside). Any other file that does not start as
/// redb's is left to redb, which reports it as damaged (a store zeroed by a crash). For a caller to ask once,
/// before it makes anything beside the store (the CLI's gate); the opens themselves only
/// `stat`, as they did, so the store's first bytes are not read twice per command.
pub fn refuse_non_store(path: &Path) -> Result<(), StoreError> {
    regular_or_missing(path)?;
    let mut head = [0u8; REDB_MAGIC.len()];
    let read =
        std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
    if read.is_err() || head == REDB_MAGIC {
        return Ok(());
    }
    // Only text is surely no store (redb's header is binary): other bytes may be a store
    // damaged at its start (zeroed by a crash), for which the damage hint is right.
    let what = if head.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        "not a pisess store (a redb file): it holds JSON text, as a pi session file does"
    } else if head
        .iter()
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        "not a pisess store (a redb file): it starts with text"
    } else {
        return Ok(());
    };
    Err(StoreError::NotAFile {
        path: path.to_path_buf(),
        what: what.to_owned(),
    })
}

/// The first bytes of every redb file (redb 4's header).
const REDB_MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];

impl Store {
    /// Opens the store at `path` for reading and writing, creating it (and its folder) if needed.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        Self::open_at(path.clone()).map_err(|e| match e {
            StoreError::Redb(source) => StoreError::Open { path, source },
            other => other,
        })
    }

    fn open_at(path: PathBuf) -> Result<Self, StoreError> {
        regular_or_missing(&path)?;
        if !path.exists() {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                    path: dir.to_path_buf(),
                    source,
                })?;
            }
            Self::create_atomically(&path)?;
        }
        let db = open_db(&path)?;
        // Under the lock, before pisess writes anything (crate::source_copy); for a new store,
        // a copy left by one that was deleted (its identity could not match anyway).
        crate::source_copy::remove(&path);
        let store = Self {
            db: Db::Write(db),
            path,
            unreported_write: std::sync::atomic::AtomicBool::new(false),
        };
        store.init()?;
        Ok(store)
    }

    /// Opens the store at `path` for reading only (see the module invariants). A store that does
    /// not exist is read as an empty one, without creating anything ([`Self::is_absent`]); one
    /// that has no schema yet or needs a repair is opened for writing instead (which
    /// initialises or repairs it), so the result may be writable.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_read_only_with(path, ReadCache::Keep)
    }

    /// [`Self::open_read_only`] with `cache` for redb's page cache (a store opened for
    /// writing instead keeps its pages as usual).
    pub fn open_read_only_with(
        path: impl AsRef<Path>,
        cache: ReadCache,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        regular_or_missing(&path)?;
        if no_store_at(&path) {
            return Self::open_absent(path);
        }
        let Some(db) = open_db_read_only(&path, cache).map_err(|e| match e {
            StoreError::Redb(source) => StoreError::Open {
                path: path.clone(),
                source,
            },
            other => other,
        })?
        else {
            return Self::open(path);
        };
        let store = Self {
            db: Db::Read(db),
            path,
            unreported_write: std::sync::atomic::AtomicBool::new(false),
        };
        if store.schema_ready()? {
            Ok(store)
        } else {
            store.into_writable()
        }
    }

    /// A store over `file`, a private copy of one (it has no name, or none that anyone else
    /// will open: redb's file lock is not taken); `label` names it in errors.
    pub(crate) fn open_copy(file: std::fs::File, label: PathBuf) -> Result<Self, StoreError> {
        let backend =
            redb::backends::FileBackend::new(file).map_err(|e| StoreError::from_open(e, &label))?;
        let db = guarded(|| {
            redb::Builder::new()
                .set_cache_size(CACHE_BYTES)
                .create_with_backend(backend)
        })?
        .map_err(|e| StoreError::from_open(e, &label))?;
        let store = Self {
            db: Db::Write(db),
            path: label,
            unreported_write: std::sync::atomic::AtomicBool::new(false),
        };
        store.init()?;
        Ok(store)
    }

    /// An empty store in memory standing for the one at `path`, which does not exist.
    fn open_absent(path: PathBuf) -> Result<Self, StoreError> {
        let db = redb::Builder::new()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(|e| StoreError::from_open(e, &path))?;
        let store = Self {
            db: Db::Absent(db),
            path,
            unreported_write: std::sync::atomic::AtomicBool::new(false),
        };
        store.init()?;
        Ok(store)
    }

    /// Whether the store is open for writing.
    pub fn is_writable(&self) -> bool {
        matches!(self.db, Db::Write(_))
    }

    /// Whether there is no store file: the store was opened read-only where none exists, and
    /// reads as empty (nothing was created).
    pub fn is_absent(&self) -> bool {
        matches!(self.db, Db::Absent(_))
    }

    /// This store, open for writing: itself if it already is, else closed and reopened (the
    /// snapshots taken from the read-only handle must be dropped first).
    pub fn into_writable(self) -> Result<Self, StoreError> {
        match self.db {
            Db::Write(_) => Ok(self),
            Db::Read(db) => {
                db.close()
                    .map_err(|e| StoreError::from_open(e, &self.path))?;
                Self::open(self.path)
            }
            Db::Absent(_) => Self::open(self.path),
        }
    }

    /// The writable redb handle, or [`StoreError::ReadOnly`].
    pub(crate) fn writer_db(&self) -> Result<&Database, StoreError> {
        match &self.db {
            Db::Write(d) => Ok(d),
            Db::Read(_) | Db::Absent(_) => Err(StoreError::ReadOnly {
                path: self.path.clone(),
            }),
        }
    }

    /// Checks the schema version with a read transaction; false when the store has none yet.
    fn schema_ready(&self) -> Result<bool, StoreError> {
        let rtx = self.db.begin_read()?;
        match rtx.open_table(META) {
            Ok(meta) => match meta.get(META_SCHEMA)? {
                // Upgraded in place by the first writable open (`init`).
                Some(v) if schema::UPGRADABLE_FROM.contains(&v.value()) => Ok(false),
                Some(v) => {
                    self.check_version(v.value())?;
                    Ok(true)
                }
                None => Ok(false),
            },
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates a new, initialised store at `path` without ever leaving a half-made file there:
    /// it is built under a temporary name in the same folder, synced, then renamed into place
    /// (a process killed while redb writes its first pages would otherwise leave a file that
    /// every later open refuses).
    fn create_atomically(path: &Path) -> Result<(), StoreError> {
        let io = |source| StoreError::Create {
            path: path.to_path_buf(),
            source,
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = path.with_file_name(format!(".{name}.creating-{}", std::process::id()));
        match std::fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let built = (|| {
            let db = Database::create(&tmp).map_err(|e| StoreError::from_open(e, &tmp))?;
            let store = Self {
                db: Db::Write(db),
                path: tmp.clone(),
                unreported_write: std::sync::atomic::AtomicBool::new(false),
            };
            store.init()?;
            drop(store);
            std::fs::File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(io)?;
            // A link, not a rename: two processes creating the store at once must not replace
            // the file the first one already opened (its writes would go to an unlinked file).
            match std::fs::hard_link(&tmp, path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io(e)),
            }
            std::fs::remove_file(&tmp).map_err(io)?;
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io)?;
            }
            Ok(())
        })();
        if built.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        built
    }

    /// Opens the store at [`default_store_path`].
    pub fn open_default() -> Result<Self, StoreError> {
        Self::open(default_store_path()?)
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Checks the schema version and creates missing tables.
    fn init(&self) -> Result<(), StoreError> {
        // Check with a read transaction first: a newer store must not even be written to. The
        // version is written in the transaction that creates every table, so a store that has
        // one is ready and opening it commits nothing.
        if self.schema_ready()? {
            return Ok(());
        }
        // (The empty store in memory that stands for a missing one is made here too.)
        let db = match &self.db {
            Db::Write(d) | Db::Absent(d) => d,
            Db::Read(_) => self.writer_db()?,
        };
        let tx = db.begin_write()?;
        {
            let mut meta = tx.open_table(META)?;
            let found = meta.get(META_SCHEMA)?.map(|v| v.value());
            match found {
                Some(v) if schema::UPGRADABLE_FROM.contains(&v) => {
                    crate::files::upgrade_resolved(&tx, v)?;
                    meta.insert(META_SCHEMA, SCHEMA_VERSION)?;
                }
                Some(v) => self.check_version(v)?,
                None => {
                    meta.insert(META_SCHEMA, SCHEMA_VERSION)?;
                }
            }
            tx.open_table(schema::SOURCES)?;
            tx.open_table(schema::SESSIONS)?;
            tx.open_table(schema::SESSION_IDS)?;
            tx.open_table(schema::ENTRIES)?;
            tx.open_table(schema::SESSION_RUNS)?;
            tx.open_table(schema::ENTRY_IDS)?;
            tx.open_table(schema::PARENTS)?;
            tx.open_table(schema::CHILDREN)?;
            tx.open_table(schema::LABELS)?;
            tx.open_table(schema::RUN_STARTS)?;
            tx.open_table(schema::SETTINGS)?;
            tx.open_table(crate::files::FILE_HITS)?;
            tx.open_table(crate::files::FILE_RESOLVED)?;
            tx.open_table(crate::files::FILE_SESSION_PATHS)?;
            tx.open_table(crate::files::TOOL_RESULTS)?;
            tx.open_table(crate::outline::OUTLINE)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn check_version(&self, found: u64) -> Result<(), StoreError> {
        use std::cmp::Ordering::*;
        match found.cmp(&SCHEMA_VERSION) {
            Equal => Ok(()),
            Greater => Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found,
                supported: SCHEMA_VERSION,
            }),
            Less => Err(StoreError::OlderSchema {
                path: self.path.clone(),
                found,
                supported: SCHEMA_VERSION,
            }),
        }
    }

    /// A consistent read-only view of the store (one MVCC snapshot).
    pub fn snapshot(&self) -> Result<crate::graph::Snapshot, StoreError> {
        crate::graph::Snapshot::new(self.db.begin_read()?)
    }

    /// A blake3 digest of every table's keys and values, in key order: two stores with the same
    /// digest hold the same data (used to prove imports idempotent).
    pub fn content_digest(&self) -> Result<[u8; 32], StoreError> {
        let rtx = self.db.begin_read()?;
        let mut h = blake3::Hasher::new();
        hash_table(&rtx, META, &mut h)?;
        hash_table(&rtx, schema::SOURCES, &mut h)?;
        hash_table(&rtx, schema::SESSIONS, &mut h)?;
        hash_table(&rtx, schema::SESSION_IDS, &mut h)?;
        hash_table(&rtx, schema::ENTRIES, &mut h)?;
        hash_table(&rtx, schema::SESSION_RUNS, &mut h)?;
        hash_table(&rtx, schema::ENTRY_IDS, &mut h)?;
        hash_table(&rtx, schema::PARENTS, &mut h)?;
        hash_table(&rtx, schema::CHILDREN, &mut h)?;
        hash_table(&rtx, schema::LABELS, &mut h)?;
        hash_table(&rtx, schema::RUN_STARTS, &mut h)?;
        hash_table(&rtx, schema::SETTINGS, &mut h)?;
        hash_table(&rtx, crate::files::FILE_HITS, &mut h)?;
        hash_table(&rtx, crate::files::FILE_RESOLVED, &mut h)?;
        hash_table(&rtx, crate::files::FILE_SESSION_PATHS, &mut h)?;
        hash_table(&rtx, crate::files::TOOL_RESULTS, &mut h)?;
        hash_table(&rtx, crate::outline::OUTLINE, &mut h)?;
        Ok(*h.finalize().as_bytes())
    }

    /// Checks redb's own integrity (page checksums and tree structure).
    pub fn check_integrity(&mut self) -> Result<bool, StoreError> {
        let path = self.path.clone();
        match &mut self.db {
            Db::Write(d) => d
                .check_integrity()
                .map_err(|e| StoreError::from_open(e, &path)),
            Db::Read(_) | Db::Absent(_) => Err(StoreError::ReadOnly { path }),
        }
    }

    /// Closes the store, reporting any error redb would otherwise drop.
    pub fn close(self) -> Result<(), StoreError> {
        let path = self.path;
        match self.db {
            Db::Write(d) | Db::Absent(d) => d.close(),
            Db::Read(d) => d.close(),
        }
        .map_err(|e| StoreError::from_open(e, &path))
    }
}

fn hash_table<K: redb::Key + 'static, V: redb::Value + 'static>(
    rtx: &redb::ReadTransaction,
    def: redb::TableDefinition<K, V>,
    h: &mut blake3::Hasher,
) -> Result<(), StoreError> {
    use redb::TableHandle;
    h.update(def.name().as_bytes());
    let table = rtx.open_table(def)?;
    for row in table.iter()? {
        let (k, v) = row?;
        let (kv, vv) = (k.value(), v.value());
        let kb = K::as_bytes(&kv);
        let vb = V::as_bytes(&vv);
        for b in [kb.as_ref(), vb.as_ref()] {
            h.update(&(b.len() as u64).to_le_bytes());
            h.update(b);
        }
    }
    Ok(())
}

/// Reads a `meta` counter, 0 when unset.
pub(crate) fn meta_get(
    meta: &impl ReadableTable<&'static str, u64>,
    key: &str,
) -> Result<u64, StoreError> {
    Ok(meta.get(key)?.map_or(0, |v| v.value()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_path_resolution() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        };
        assert_eq!(
            store_path_from(env(&[("PISESS_STORE", "/x/s.redb"), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/x/s.redb")
        );
        assert_eq!(
            store_path_from(env(&[("XDG_DATA_HOME", "/d"), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/d/pisess/store.redb")
        );
        assert_eq!(
            store_path_from(env(&[("PISESS_STORE", ""), ("HOME", "/h")])).unwrap(),
            PathBuf::from("/h/.local/share/pisess/store.redb")
        );
        assert!(matches!(
            store_path_from(env(&[])),
            Err(StoreError::NoLocation)
        ));
    }

    /// A read-only store that keeps no pages (`ReadCache::None`) reads what one that keeps
    /// them reads, and is as read-only.
    #[test]
    fn a_store_read_without_a_page_cache_reads_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let session = dir.path().join("s.jsonl");
        let mut text = String::from(
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        );
        text.push('\n');
        let mut parent = "null".to_owned();
        for i in 0..3000 {
            text.push_str(&format!(
                r#"{{"type":"message","id":"e{i:05}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"line {i} {}"}}}}"#,
                "x".repeat(i % 97)
            ));
            text.push('\n');
            parent = format!("\"e{i:05}\"");
        }
        std::fs::write(&session, text).unwrap();
        let w = Store::open(&path).unwrap();
        w.import_file(&session).unwrap();
        w.close().unwrap();
        let kept = Store::open_read_only_with(&path, ReadCache::Keep).unwrap();
        let digest = kept.content_digest().unwrap();
        drop(kept);
        let none = Store::open_read_only_with(&path, ReadCache::None).unwrap();
        assert!(!none.is_writable());
        assert_eq!(none.content_digest().unwrap(), digest);
        let snap = none.snapshot().unwrap();
        let s = snap.sessions().unwrap()[0].0;
        assert_eq!(snap.session_tree(s).unwrap().len(), 3000);
        // And it is what its name says: no page kept.
        assert_eq!(ReadCache::None.bytes(), 0);
        assert_eq!(ReadCache::Keep.bytes(), CACHE_BYTES);
    }

    #[test]
    fn a_read_only_store_reads_side_by_side_and_refuses_writes_until_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let session = dir.path().join("s.jsonl");
        let header = r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
        let line = r#"{"type":"model_change","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","provider":"p","modelId":"m"}"#;
        std::fs::write(&session, format!("{header}\n{line}\n")).unwrap();
        // A missing store reads as empty and is not created; writing needs it reopened.
        let absent = Store::open_read_only(&path).unwrap();
        assert!(absent.is_absent() && !absent.is_writable());
        assert!(absent.snapshot().unwrap().sessions().unwrap().is_empty());
        assert!(matches!(
            absent.import_file(&session),
            Err(StoreError::ReadOnly { .. })
        ));
        assert!(!path.exists() && std::fs::read_dir(dir.path()).unwrap().count() == 1);
        let first = absent.into_writable().unwrap();
        assert!(first.is_writable() && path.is_file());
        first.import_file(&session).unwrap();
        first.close().unwrap();
        let image = std::fs::read(&path).unwrap();

        let a = Store::open_read_only(&path).unwrap();
        let b = Store::open_read_only(&path).unwrap();
        assert!(!a.is_writable() && !b.is_writable());
        // A writer is refused while readers hold it.
        assert!(matches!(Store::open(&path), Err(StoreError::Busy { .. })));
        // Nothing changed: the import answers from the read-only store.
        let r = a.import_file(&session).unwrap();
        assert_eq!(r.outcome, crate::import::Outcome::Unchanged);
        assert_eq!(b.snapshot().unwrap().sessions().unwrap().len(), 1);
        drop(b);
        // A grown file needs a write: refused with ReadOnly, then done after reopening.
        let more = r#"{"type":"thinking_level_change","id":"a2","parentId":"a1","timestamp":"2026-01-01T00:00:01.000Z","thinkingLevel":"high"}"#;
        std::fs::write(&session, format!("{header}\n{line}\n{more}\n")).unwrap();
        assert!(matches!(
            a.import_file(&session),
            Err(StoreError::ReadOnly { .. })
        ));
        assert_eq!(
            std::fs::read(&path).unwrap(),
            image,
            "a read-only store was written"
        );
        let w = a.into_writable().unwrap();
        assert!(w.is_writable());
        assert_eq!(
            w.import_file(&session).unwrap().outcome,
            crate::import::Outcome::Grown
        );
    }

    #[test]
    fn newer_schema_is_refused_and_busy_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/store.redb");
        let store = Store::open(&path).unwrap();
        assert!(matches!(Store::open(&path), Err(StoreError::Busy { .. })));
        {
            let tx = store.writer_db().unwrap().begin_write().unwrap();
            tx.open_table(META)
                .unwrap()
                .insert(META_SCHEMA, SCHEMA_VERSION + 1)
                .unwrap();
            tx.commit().unwrap();
        }
        store.close().unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::NewerSchema { found, .. } if found == SCHEMA_VERSION + 1),
            "{err}"
        );
        assert!(err.to_string().contains("newer"));
    }

    #[test]
    fn an_older_store_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let store = Store::open(&path).unwrap();
        {
            let tx = store.writer_db().unwrap().begin_write().unwrap();
            tx.open_table(META)
                .unwrap()
                .insert(META_SCHEMA, schema::UPGRADABLE_FROM.start() - 1)
                .unwrap();
            tx.commit().unwrap();
        }
        store.close().unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(
            matches!(err, StoreError::OlderSchema { found, .. } if found == schema::UPGRADABLE_FROM.start() - 1),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("older") && msg.contains(&path.display().to_string()),
            "{msg}"
        );
        // Nothing was migrated or dropped: the store still says what it was (redb itself
        // rewrites its header on open, so the file's bytes are not the measure).
        let db = Database::open(&path).unwrap();
        let rtx = db.begin_read().unwrap();
        let meta = rtx.open_table(META).unwrap();
        assert_eq!(
            meta.get(META_SCHEMA).unwrap().map(|v| v.value()),
            Some(schema::UPGRADABLE_FROM.start() - 1)
        );
    }

    /// A store of schema 13 resolved `@…`, `~…` and Unicode-spaced paths by joining them to
    /// the cwd as written, and 13 and 14 did so with `file://` URLs (as the path, or as the
    /// session's cwd); the first open of such a store (even a read-only one) rewrites those
    /// rows to what schema 15 stores, verify then finds nothing wrong, and queries find the
    /// paths pi's tools touched.
    #[test]
    fn a_schema_13_or_14_store_is_upgraded_in_place() {
        use crate::files::{FILE_RESOLVED, normalize, resolve, resolve_v14};
        let session_text = |cwd: &str, written: &[&str]| {
            let mut lines = vec![format!(
                r#"{{"type":"session","version":3,"id":"s-{}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#,
                cwd.len()
            )];
            for (i, p) in written.iter().enumerate() {
                let parent = if i == 0 {
                    "null".to_owned()
                } else {
                    format!("\"e{}\"", i - 1)
                };
                lines.push(format!(
                    r#"{{"type":"message","id":"e{i}","parentId":{parent},"timestamp":"2026-01-01T00:00:0{i}.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"c{i}","name":"read","arguments":{{"path":"{p}"}}}}],"timestamp":{i}}}}}"#
                ));
            }
            lines.join("\n") + "\n"
        };
        /// (cwd, paths as written in JSON, as read, where pi's tools find them)
        type Case<'a> = (&'a str, &'a [&'a str], &'a [&'a str], &'a [&'a str]);
        let cases: [Case<'_>; 2] = [
            (
                "/home/u/proj",
                &[
                    "@src/a.rs",
                    "~/notes.md",
                    "src/plain.rs",
                    r"a\u00a0b.txt",
                    "~x/y",
                    "file:///home/u/proj/src/f.rs",
                    "@file:///tmp/a%20b.txt",
                    "file://example.com/x",
                ],
                &[
                    "@src/a.rs",
                    "~/notes.md",
                    "src/plain.rs",
                    "a\u{a0}b.txt",
                    "~x/y",
                    "file:///home/u/proj/src/f.rs",
                    "@file:///tmp/a%20b.txt",
                    "file://example.com/x",
                ],
                &[
                    "/home/u/proj/src/a.rs",
                    "/home/u/notes.md",
                    "/home/u/proj/src/plain.rs",
                    "/home/u/proj/a b.txt",
                    "/home/u/proj/~x/y",
                    "/home/u/proj/src/f.rs",
                    "/tmp/a b.txt",
                    // Node's fileURLToPath refuses another host: joined as written.
                    "/home/u/proj/file:/example.com/x",
                ],
            ),
            (
                "file:///home/u/other",
                &["src/b.rs", "~/c.md"],
                &["src/b.rs", "~/c.md"],
                &["/home/u/other/src/b.rs", "/home/u/c.md"],
            ),
        ];
        for from in [13u64, 14] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("store.redb");
            let store = Store::open(&path).unwrap();
            let mut keys = Vec::new();
            for (n, (cwd, written, paths, want)) in cases.iter().enumerate() {
                for (p, w) in paths.iter().zip(want.iter()) {
                    assert_eq!(resolve(cwd, p), *w, "{p}");
                }
                let session = dir.path().join(format!("s{n}.jsonl"));
                std::fs::write(&session, session_text(cwd, written)).unwrap();
                assert!(store.import_file(&session).unwrap().error.is_none());
                let key = store
                    .snapshot()
                    .unwrap()
                    .session_by_path(&session)
                    .unwrap()
                    .unwrap()
                    .0;
                keys.push(key);
            }
            let digest = store.content_digest().unwrap();
            // Back to what schema `from` wrote.
            {
                let tx = store.writer_db().unwrap().begin_write().unwrap();
                {
                    let mut resolved = tx.open_table(FILE_RESOLVED).unwrap();
                    for ((cwd, _, paths, _), key) in cases.iter().zip(&keys) {
                        for p in paths.iter() {
                            let old = if from == 13 {
                                normalize(cwd, p)
                            } else {
                                resolve_v14(cwd, p)
                            };
                            let new = resolve(cwd, p);
                            if new != *p {
                                assert!(
                                    resolved.remove((new.as_str(), *key, *p)).unwrap().is_some(),
                                    "{p}"
                                );
                            }
                            if old != *p {
                                resolved.insert((old.as_str(), *key, *p), ()).unwrap();
                            }
                        }
                    }
                    tx.open_table(META)
                        .unwrap()
                        .insert(META_SCHEMA, from)
                        .unwrap();
                }
                tx.commit().unwrap();
            }
            assert_ne!(store.content_digest().unwrap(), digest, "{from}");
            store.close().unwrap();
            let mut store = Store::open_read_only(&path).unwrap();
            assert!(store.is_writable(), "the upgrade needs a writable open");
            assert_eq!(store.content_digest().unwrap(), digest, "{from}");
            let report = store.verify().unwrap();
            assert!(report.findings.is_empty(), "{:?}", report.findings);
            let snap = store.snapshot().unwrap();
            for (_, _, _, want) in &cases {
                for w in want.iter() {
                    let hits = snap.files_exact(w, &Default::default()).unwrap();
                    assert_eq!(hits.len(), 1, "{from}: {w}");
                }
            }
            drop(snap);
            store.close().unwrap();
            // Opened again, it is simply current.
            assert!(!Store::open_read_only(&path).unwrap().is_writable());
        }
    }

    #[test]
    fn verify_reports_changed_and_unreadable_rows() {
        use crate::record::{ArchivedEntryRecord, EntryRecord, encode};
        use crate::row_block::{Block, RowBlockBuilder};
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("s.jsonl");
        let text = format!(
            "{}\n{}\n",
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
            format_args!(
                r#"{{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"{}","timestamp":0}}}}"#,
                "long text ".repeat(100)
            )
        );
        std::fs::write(&session, &text).unwrap();
        let mut store = Store::open(dir.path().join("store.redb")).unwrap();
        store.import_file(&session).unwrap();
        assert!(store.verify().unwrap().findings.is_empty());
        let (first, value) = {
            let tx = store.writer_db().unwrap().begin_read().unwrap();
            let entries = tx.open_table(schema::ENTRIES).unwrap();
            let (k, v) = entries.first().unwrap().unwrap();
            (k.value(), v.value().to_vec())
        };
        let put = |store: &Store, bytes: &[u8]| {
            let tx = store.writer_db().unwrap().begin_write().unwrap();
            tx.open_table(schema::ENTRIES)
                .unwrap()
                .insert(first, bytes)
                .unwrap();
            tx.commit().unwrap();
        };
        // A byte of the message's line changed inside its (valid) record: its hash disagrees.
        let block = Block::decode(&value).unwrap();
        let mut b = RowBlockBuilder::new();
        let mut changed = false;
        for i in 0..block.rows() {
            let a =
                rkyv::access::<ArchivedEntryRecord, rkyv::rancor::Error>(block.record(i).unwrap())
                    .unwrap();
            let mut rec: EntryRecord = rkyv::deserialize::<_, rkyv::rancor::Error>(a).unwrap();
            if rec.id.as_deref() == Some("a1") {
                let at = rec.raw.len() / 2;
                rec.raw[at] = b'X';
                changed = true;
            }
            b.push(&encode(&rec).unwrap());
        }
        assert!(changed);
        put(&store, &b.finish());
        let report = store.verify().unwrap();
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.message.contains("raw bytes changed")),
            "{:?}",
            report.findings
        );
        // A block cut short: a finding naming it, not an error.
        put(&store, &value[..value.len() / 2]);
        let report = store.verify().unwrap();
        let text_of = |f: &crate::verify::Finding| f.message.clone();
        let msgs: Vec<String> = report.findings.iter().map(text_of).collect();
        assert!(
            msgs.iter()
                .any(|m| m.starts_with(&format!("block {first}:"))),
            "{msgs:?}"
        );
        assert!(
            msgs.iter().any(|m| m.contains("cannot be read")),
            "{msgs:?}"
        );
        // Reading the session is an error naming the block, not a panic.
        let snap = store.snapshot().unwrap();
        let s = snap.session_by_path(&session).unwrap().unwrap();
        let err = snap.export_session(s, &mut Vec::new()).unwrap_err();
        assert!(
            crate::import::error_chain(&err)
                .contains(&format!("block of rows in table entries.v4 at key {first}")),
            "{err:?}"
        );
        // The session file is the user's data: untouched.
        assert_eq!(std::fs::read_to_string(&session).unwrap(), text);
    }
}
