//! Errors of the store.
//!
//! Invariants:
//! - redb and rkyv errors are kept as sources, never flattened to strings;
//! - "the store is held by another process" is its own variant ([`StoreError::Busy`]) so callers
//!   can offer to wait, and a store written by a newer schema is refused with
//!   [`StoreError::NewerSchema`] before any table is read.

use std::path::PathBuf;

/// What went wrong with the store itself (not with one imported file), or with one stored
/// entry that cannot be read ([`StoreError::UnreadableEntry`], named by its file and line).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Another process holds the store.
    #[error("the store is busy: {holder} holds {path}")]
    Busy {
        /// The store file.
        path: PathBuf,
        /// Who holds it: `pid N (command line)` when the system says, else "another process".
        holder: String,
    },
    /// Another process waits to write to the store and holds its gate ([`crate::gate`]): readers
    /// let it in first.
    #[error("the store is busy: {holder} is waiting to write to {path}")]
    WriterWaiting {
        /// The store file.
        path: PathBuf,
        /// Who waits: `pid N (command line)` when the system says, else "another process".
        holder: String,
    },
    /// The store's path names something other than a file (a folder, a FIFO — opening which
    /// would wait for a writer forever —, a device).
    #[error("the store {path} is {what}")]
    NotAFile {
        /// The store path.
        path: PathBuf,
        /// What it is instead.
        what: String,
    },
    /// A write was asked of a store opened read-only ([`crate::Store::open_read_only`]); the
    /// caller reopens it with [`crate::Store::into_writable`] and retries.
    #[error("the store {path} was opened read-only and this needs to write to it")]
    ReadOnly {
        /// The store file.
        path: PathBuf,
    },
    /// The store was written by a newer pisess.
    #[error(
        "the store {path} has schema version {found}, newer than this pisess understands \
         ({supported}); upgrade pisess or use another store"
    )]
    NewerSchema {
        /// The store file.
        path: PathBuf,
        /// The schema version found in the store.
        found: u64,
        /// The newest schema version this build reads.
        supported: u64,
    },
    /// The store was written by an older schema this build cannot migrate.
    #[error(
        "the store {path} has schema version {found}, older than this pisess needs \
         ({supported}); delete it and import again"
    )]
    OlderSchema {
        /// The store file.
        path: PathBuf,
        /// The schema version found in the store.
        found: u64,
        /// The schema version this build writes.
        supported: u64,
    },
    /// No default location could be worked out.
    #[error("no location for the store: set PISESS_STORE, XDG_DATA_HOME or HOME")]
    NoLocation,
    /// The folder for the store could not be created.
    #[error("cannot create the store folder {path}")]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A new store file could not be created and moved into place.
    #[error("cannot create the store {path}")]
    Create {
        /// The store file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store file could not be opened or prepared (a read-only folder, a full disk…).
    #[error("cannot open the store {path}")]
    Open {
        /// The store file.
        path: PathBuf,
        /// Why.
        #[source]
        source: redb::Error,
    },
    /// A redb operation failed.
    #[error("store operation failed")]
    Redb(#[from] redb::Error),
    /// A stored record does not validate.
    #[error("corrupt record in table {table} at key {key}")]
    CorruptRecord {
        /// The table.
        table: &'static str,
        /// The key, as text.
        key: String,
        /// What rkyv found.
        #[source]
        source: rkyv::rancor::Error,
    },
    /// A stored row's bytes no longer match the blake3 its record got at import (or no longer
    /// decompress): the store file is damaged there.
    #[error(
        "the stored copy of line {line} of {file} is damaged: its bytes no longer match the \
         blake3 recorded at import (row {row})"
    )]
    DamagedRow {
        /// The session's file.
        file: String,
        /// The line (1-based) in that file.
        line: u64,
        /// The row's key.
        row: u64,
    },
    /// A stored block of rows does not read.
    #[error("corrupt block of rows in table {table} at key {key}")]
    CorruptBlock {
        /// The table.
        table: &'static str,
        /// The block's key.
        key: u64,
        /// What is wrong with it.
        #[source]
        source: crate::row_block::BlockError,
    },
    /// A record could not be serialised.
    #[error("cannot serialise a record")]
    Serialize(#[source] rkyv::rancor::Error),
    /// The tables disagree with each other.
    #[error("inconsistent store: {0}")]
    Inconsistent(String),
    /// An entry's JSON, stored as its session file has it, cannot be read into a value: the
    /// fault is the file's (nesting deeper than [`pisess_formats::value::DEEPEST`] levels,
    /// which pi's `JSON.parse` reads but its `JSON.stringify` cannot write), not the store's.
    /// Names the file, the line and the entry.
    #[error(
        "{file}:{line}: entry {} cannot be read: {}",
        id.as_deref().map_or_else(|| "(no id)".to_owned(), |i| format!("{i:?}")),
        why_unreadable(source)
    )]
    UnreadableEntry {
        /// The session file.
        file: String,
        /// The entry's line in it (1-based).
        line: u64,
        /// The entry's id, when it has a string id.
        id: Option<String>,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
    /// An outline block could not be written.
    #[error("cannot write an outline block")]
    Outline(#[from] crate::outline::OutlineError),
    /// A session's header `cwd` is a `file://` URL Node's `fileURLToPath` refuses
    /// ([`pisess_formats::layout::file_url_refusal`]): pi cannot open the session, and a new
    /// session made from it (a fork) would have no folder to record as its own.
    #[error(
        "{file}: the session's cwd {cwd:?} is a file URL Node cannot read ({why}): pi cannot \
         open this session, so pisess makes no new session from it"
    )]
    CwdFileUrl {
        /// The session file.
        file: String,
        /// The header's `cwd`.
        cwd: String,
        /// Node's reason.
        why: &'static str,
    },
}

/// What is wrong with JSON that could not be read, in words: nesting deeper than
/// [`pisess_formats::value::DEEPEST`] levels is named as such (serde_json's own message,
/// "recursion limit exceeded", says it in terms of the parser), anything else is JSON that does
/// not parse.
pub fn why_unreadable(e: &serde_json::Error) -> String {
    if pisess_formats::value::is_too_deep(e) {
        format!(
            "its JSON nests more than {} levels deep, deeper than pisess reads (pi reads it, \
             but its context and fork of it fail beyond about 4,180 levels)",
            pisess_formats::value::DEEPEST
        )
    } else {
        "its JSON does not parse".to_owned()
    }
}

macro_rules! via_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                Self::Redb(redb::Error::from(e))
            }
        }
    )*};
}

via_redb!(
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

impl StoreError {
    /// Converts a database-open error, recognising a store held by another process.
    /// Whether this says the store file itself is damaged: redb found it corrupt (flipped
    /// bytes, a truncated file), a stored record or block of rows does not validate, or the
    /// tables disagree. Not a fault of a session file, nor of the machine (a full disk).
    pub fn is_damage(&self) -> bool {
        match self {
            // A length read from a damaged page can send redb past the file's end.
            Self::Redb(e) | Self::Open { source: e, .. } => match e {
                redb::Error::Corrupted(_) => true,
                redb::Error::Io(e) => e.kind() == std::io::ErrorKind::UnexpectedEof,
                _ => false,
            },
            Self::CorruptRecord { .. }
            | Self::CorruptBlock { .. }
            | Self::DamagedRow { .. }
            | Self::Inconsistent(_) => true,
            _ => false,
        }
    }

    /// Whether the store could not be opened for writing because it may only be read (a
    /// read-only file system, no write permission): readers can still answer from it.
    pub fn is_read_only_store(&self) -> bool {
        match self {
            Self::Open {
                source: redb::Error::Io(e),
                ..
            } => matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ),
            _ => false,
        }
    }

    /// Whether the store's disk (or the user's quota on it) is full: `ENOSPC` or `EDQUOT` from
    /// redb's writes. redb's errors name no cause chain, so callers cannot find it themselves.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Redb(redb::Error::Io(e))
            | Self::Open {
                source: redb::Error::Io(e),
                ..
            } => {
                matches!(
                    e.kind(),
                    std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
                )
            }
            _ => false,
        }
    }

    pub(crate) fn from_open(e: redb::DatabaseError, path: &std::path::Path) -> Self {
        match e {
            redb::DatabaseError::DatabaseAlreadyOpen => Self::Busy {
                path: path.to_path_buf(),
                holder: crate::holder::holder_of(path)
                    .unwrap_or_else(|| "another process".to_owned()),
            },
            // A file too short for redb's header, or one whose header is not redb's: the
            // store file is damaged (or is no store), as a `Corrupted` page says.
            redb::DatabaseError::Storage(redb::StorageError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
                ) =>
            {
                let what = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "the store file is cut short"
                } else {
                    "the file is not a store"
                };
                Self::Redb(redb::Error::Corrupted(format!("{what}: {e}")))
            }
            other => Self::Redb(redb::Error::from(other)),
        }
    }
}
