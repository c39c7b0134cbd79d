//! How commands fail and what exit status that gives.
//!
//! Invariants: every error that reaches `main` prints as `error: …` with its cause chain and an
//! optional `hint: …`, and exits 2; a broken stdout pipe is not an error.

use std::fmt;

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
    /// A user-facing error with a hint on what to do.
    pub fn with_hint(error: impl Into<anyhow::Error>, hint: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            hint: Some(hint.into()),
        }
    }

    /// Wraps the error with what was being done (`cannot write FILE`), keeping it as the cause.
    pub fn context(self, what: String) -> Self {
        Self {
            error: self.error.context(what),
            hint: self.hint,
        }
    }

    /// Whether this is a write to a closed pipe (`pisess log | head`).
    pub fn is_broken_pipe(&self) -> bool {
        self.error.chain().any(|c| {
            c.downcast_ref::<std::io::Error>()
                .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
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

/// The result type of commands.
pub type CommandResult = Result<Outcome, CommandError>;
