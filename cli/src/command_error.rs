//! How commands fail and what exit status that gives.
//!
//! Invariants: every error that reaches `main` prints as `error: …` with its cause chain and an
//! optional `hint: …`, and exits 2; a broken stdout pipe is not an error.

use std::fmt;
use std::path::{Path, PathBuf};

/// What a command that ran to its end found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Exit 0.
    Success,
    /// Exit 1: problems found, nothing found, or differences (as each command documents).
    Negative,
    /// Exit 2 after all work was done: some inputs failed (reported as they happened).
    PartialFailure,
}

impl Outcome {
    /// The exit status.
    pub fn code(self) -> u8 {
        match self {
            Self::Success => 0,
            Self::Negative => 1,
            Self::PartialFailure => 2,
        }
    }
}

/// A failure that stopped a command.
#[derive(Debug)]
pub struct CommandError {
    error: anyhow::Error,
    hint: Option<String>,
}

impl CommandError {
    /// The error itself (for callers that look for a library error in its chain).
    pub fn error(&self) -> &anyhow::Error {
        &self.error
    }

    /// A user-facing error with a hint on what to do.
    pub fn with_hint(error: impl Into<anyhow::Error>, hint: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            hint: Some(hint.into()),
        }
    }

    /// Wraps the error of a write to the file `path` named on the command line (`-o FILE`):
    /// `cannot write FILE`, the error as its cause. A closed pipe there (a FIFO whose reader
    /// left) is an error, unlike one on stdout: the output asked for was not written.
    pub fn writing(self, path: &Path) -> Self {
        let closed = self.is_closed_pipe();
        let e = Self {
            error: self.error.context(WritingFile(path.to_path_buf())),
            hint: self.hint,
        };
        match e.hint {
            None if closed => Self {
                hint: Some(format!(
                    "nothing reads {} any more: its reader closed it before the end",
                    path.display()
                )),
                ..e
            },
            _ => e,
        }
    }

    /// For the report of work already done (a file written, an entry appended): the hint says
    /// what was done, so that the exit status 2 of a report that could not be written (stdout
    /// on a full disk) is not read as "nothing was written", and a retry does not do it twice.
    pub fn after(self, done: impl FnOnce() -> String) -> Self {
        if self.hint.is_some() || self.is_broken_pipe() {
            return self;
        }
        Self {
            hint: Some(format!("{}; only the report of it failed", done())),
            ..self
        }
    }

    /// Whether this is a write to a closed pipe on stdout (`pisess log | head`), which is not
    /// an error; one to a file named on the command line ([`CommandError::writing`]) is.
    pub fn is_broken_pipe(&self) -> bool {
        self.error.downcast_ref::<WritingFile>().is_none() && self.is_closed_pipe()
    }

    fn is_closed_pipe(&self) -> bool {
        self.error.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
        })
    }

    /// Whether the store failed because its disk is full (see [`pisess_engine::StoreError::is_disk_full`]).
    fn is_store_disk_full(&self) -> bool {
        self.store_errors()
            .any(pisess_engine::StoreError::is_disk_full)
    }

    /// The store's errors in the chain, also where an engine error wraps one transparently (its
    /// chain then goes on with the store error's causes, skipping the store error itself).
    fn store_errors(&self) -> impl Iterator<Item = &pisess_engine::StoreError> {
        use pisess_engine::{ExportError, PruneError, StoreError, agent::writer::WriteError};
        self.error.chain().filter_map(|c| {
            c.downcast_ref::<StoreError>()
                .or_else(|| match c.downcast_ref::<ExportError>()? {
                    ExportError::Store(e) => Some(e),
                    _ => None,
                })
                .or_else(|| match c.downcast_ref::<PruneError>()? {
                    PruneError::Store(e) => Some(e),
                    _ => None,
                })
                .or_else(|| match c.downcast_ref::<WriteError>()? {
                    WriteError::Store(e) => Some(e),
                    _ => None,
                })
                .or_else(
                    || match c.downcast_ref::<pisess_engine::FileQueryError>()? {
                        pisess_engine::FileQueryError::Store(e) => Some(e),
                        _ => None,
                    },
                )
        })
    }

    /// Prints the error, its causes and the hint to stderr.
    pub fn print(&self) {
        eprintln!("error: {}", self.error);
        for cause in self.error.chain().skip(1) {
            eprintln!("  caused by: {cause}");
        }
        if let Some(h) = &self.hint {
            eprintln!("hint: {h}");
        } else if self.is_store_disk_full() {
            let store = pisess_engine::default_store_path()
                .map_or_else(|_| "the store".to_owned(), |p| p.display().to_string());
            eprintln!(
                "hint: the disk (or quota) that holds the store {store} is full; the store keeps \
                 what was stored before the failed write (`pisess verify` checks it). Free some \
                 space there, or point PISESS_STORE at a store on another disk"
            );
        } else if self
            .store_errors()
            .any(pisess_engine::StoreError::is_damage)
        {
            let store = pisess_engine::default_store_path()
                .map_or_else(|_| "the store".to_owned(), |p| p.display().to_string());
            eprintln!(
                "hint: the store file is damaged; keep it (it may hold the only copy of sessions \
                 whose files are gone) and build a new one from the session files: \
                 `mv {store} {store}.damaged && pisess import`"
            );
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for CommandError {
    fn from(e: E) -> Self {
        Self {
            error: e.into(),
            hint: None,
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)
    }
}

/// What failed: a write to this file (see [`CommandError::writing`]).
#[derive(Debug)]
struct WritingFile(PathBuf);

impl fmt::Display for WritingFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write {}", self.0.display())
    }
}

/// The result type of commands.
pub type CommandResult = Result<Outcome, CommandError>;

/// The result of a command whose answer (`outcome`) was known before it wrote it out: a closed
/// stdout pipe while `written` (a reader that stopped early, `pisess diff A B | head -1`) ends
/// the writing but leaves the answer, so the exit status does not depend on how much of the
/// output the reader took.
pub fn answered(outcome: Outcome, written: Result<(), CommandError>) -> CommandResult {
    match written {
        Ok(()) => Ok(outcome),
        Err(e) if e.is_broken_pipe() => Ok(outcome),
        Err(e) => Err(e),
    }
}
