//! Problems found while reading a session file, each with its exact location.
//!
//! A [`Problem`] never stops a read on its own: the reader reports it and goes on where that is
//! safe (a bad line is skipped, a glued line is split). Whether a problem is worth a non-zero exit
//! is its [`Severity`]: notes describe harmless oddities pi also accepts (CRLF, blank lines);
//! warnings are data pi would lose or misread (a byte order mark too: pi cannot load such a file
//! at all, though pisess reads it); errors make the file unreadable as a session.

use std::fmt;

/// How serious a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Harmless; pi reads the file the same way.
    Note,
    /// Something pi drops, misreads or cannot follow; pisess recovers or reports it.
    Warning,
    /// The file cannot be read as a pi session (or not as a supported version).
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Note => "note",
            Self::Warning => "warning",
            Self::Error => "error",
        })
    }
}

/// What is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProblemKind {
    /// The file starts with a UTF-8 byte order mark (skipped).
    Bom,
    /// The line ends in `\r\n` (the `\r` is ignored, as `JSON.parse` ignores it).
    Crlf,
    /// The line is empty or white space only (skipped, as pi skips it).
    BlankLine,
    /// The line is not valid UTF-8: read with U+FFFD for the bad bytes, as pi's decoder reads
    /// it (so it is an entry if it then parses); exports of the file give back its bytes.
    InvalidUtf8 {
        /// Bytes of the line that are valid before the first bad one.
        valid_up_to: usize,
    },
    /// The line holds lone UTF-16 surrogate escapes (`\ud83d` without its pair: a string cut
    /// inside an emoji). pi reads them into its strings; Rust strings cannot hold them, so the
    /// line is read with U+FFFD in their place; exports of the file give back its bytes.
    LoneSurrogate {
        /// How many escapes were replaced.
        count: usize,
    },
    /// An object on the line holds a key more than once. pi's `JSON.parse` keeps one property
    /// per key (in the first one's place, with the last one's value); pisess reads the line the
    /// same way ([`crate::duplicate_keys`]); exports of the file give back its bytes.
    DuplicateKeys {
        /// How many members were dropped (later values replacing earlier ones).
        count: usize,
    },
    /// The entry nests arrays and objects deeper than pisess reads into a value
    /// ([`crate::value::DEEPEST`] levels): it is imported, exported and placed in the tree, but
    /// its content cannot be shown. pi reads it; its context and fork of it fail beyond about
    /// 4,180 levels (node's stack). Found by `check`, not by the reader.
    TooDeep {
        /// How deeply the line nests.
        depth: usize,
    },
    /// The line is not valid JSON (skipped; pi skips it silently).
    Malformed {
        /// serde_json's description of the error.
        message: String,
        /// 1-based column (in bytes) where parsing failed.
        column: usize,
    },
    /// The last line has no newline and is not valid JSON: a write was cut short (skipped).
    PartialLastLine,
    /// The last line is complete but has no final newline (pi appends one when it opens the file).
    MissingFinalNewline,
    /// The line holds a JSON value that is not an object.
    NonObject {
        /// `array`, `number`, `string`, `true`, `false` or `null`.
        found: &'static str,
        /// Whether pi keeps the value as an entry (truthy) or drops it (falsy).
        kept: bool,
    },
    /// Two or more JSON records on one line (a lost newline, or a torn write followed by the
    /// next append); the complete ones were recovered, each record cut short is reported as a
    /// [`ProblemKind::TornRecord`].
    Glued {
        /// How many complete records were recovered.
        records: usize,
        /// How many records were cut short (not recovered).
        torn: usize,
        /// Bytes of the records cut short.
        skipped_bytes: usize,
    },
    /// A piece of a line that also holds complete records that is no complete record (a torn
    /// write, or bytes a crash left): its bytes, from here to the next record or the end of the
    /// line, are skipped; nothing nested in it is read as a record.
    TornRecord {
        /// serde_json's description of the error.
        message: String,
        /// 1-based column (in bytes) where parsing failed.
        column: usize,
        /// Length of the skipped piece.
        bytes: usize,
    },
    /// Lines before the header that are not JSON (skipped, as pi skips them).
    JunkBeforeHeader {
        /// Number of skipped lines.
        lines: u64,
    },
    /// The first JSON value of the file is not a session header.
    NotASession {
        /// What was found instead.
        found: String,
    },
    /// The file has no JSON value at all.
    Empty,
    /// The header is pi's v4 format (`"kind":"header"`), which pisess does not read yet.
    V4Header,
    /// The header's `version` is newer than 3 (read as v3, as pi does).
    FutureVersion {
        /// The version found, as written.
        version: String,
    },
    /// The header's `cwd` is a `file://` URL Node's `fileURLToPath` refuses: pi reads the cwd
    /// that way when it opens a session, so it cannot open this one.
    CwdFileUrl {
        /// The `cwd` as written.
        cwd: String,
        /// Node's reason ([`crate::layout::file_url_refusal`]).
        why: &'static str,
    },
    /// An entry field has the wrong JSON type or shape.
    BadField {
        /// The entry type (empty when it cannot be read).
        entry_type: String,
        /// What serde_json reported.
        message: String,
    },
    /// An entry of a v2/v3 file has no string `id`.
    MissingId,
    /// An id that an earlier entry already has (pi's index keeps the later one).
    DuplicateId {
        /// The id.
        id: String,
        /// Line of the earlier entry.
        first_line: u64,
    },
    /// An entry whose `parentId` names no entry of the file (pi treats it as a root).
    Orphan {
        /// The entry's id.
        id: String,
        /// The missing parent.
        parent_id: String,
    },
    /// Entries whose parents form a loop (pi's path walk never ends on these).
    Cycle {
        /// Ids on the loop, in parent order (at most 8 are listed).
        ids: Vec<String>,
        /// Length of the loop.
        length: usize,
    },
    /// A `label` entry whose `targetId` names no entry (pi keeps it in its label map, where
    /// nothing shows it).
    LabelTargetMissing {
        /// The target.
        target: String,
    },
    /// A compaction whose `firstKeptEntryId` is not on its path (names no entry, or one that
    /// is not its ancestor): pi keeps no message from before the compaction.
    FirstKeptNotOnPath {
        /// The `firstKeptEntryId`.
        first_kept: String,
        /// Whether some entry has that id.
        exists: bool,
    },
    /// More than one entry has `parentId: null`.
    MultipleRoots {
        /// Number of roots.
        count: usize,
    },
}

impl ProblemKind {
    /// The severity of this kind of problem.
    pub fn severity(&self) -> Severity {
        match self {
            Self::Crlf
            | Self::BlankLine
            | Self::MissingFinalNewline
            | Self::LoneSurrogate { .. }
            | Self::DuplicateKeys { .. } => Severity::Note,
            Self::MultipleRoots { .. } => Severity::Note,
            Self::NotASession { .. } | Self::Empty | Self::V4Header => Severity::Error,
            _ => Severity::Warning,
        }
    }

    /// A short stable name for JSON output and tests.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Bom => "bom",
            Self::Crlf => "crlf",
            Self::BlankLine => "blank-line",
            Self::InvalidUtf8 { .. } => "invalid-utf8",
            Self::LoneSurrogate { .. } => "lone-surrogate",
            Self::DuplicateKeys { .. } => "duplicate-key",
            Self::TooDeep { .. } => "too-deep",
            Self::Malformed { .. } => "malformed",
            Self::PartialLastLine => "partial-last-line",
            Self::MissingFinalNewline => "missing-final-newline",
            Self::NonObject { .. } => "non-object",
            Self::Glued { .. } => "glued",
            Self::TornRecord { .. } => "torn-record",
            Self::JunkBeforeHeader { .. } => "junk-before-header",
            Self::NotASession { .. } => "not-a-session",
            Self::Empty => "empty",
            Self::V4Header => "v4-header",
            Self::FutureVersion { .. } => "future-version",
            Self::CwdFileUrl { .. } => "cwd-file-url",
            Self::BadField { .. } => "bad-field",
            Self::MissingId => "missing-id",
            Self::DuplicateId { .. } => "duplicate-id",
            Self::Orphan { .. } => "orphan",
            Self::Cycle { .. } => "cycle",
            Self::MultipleRoots { .. } => "multiple-roots",
            Self::LabelTargetMissing { .. } => "label-target-missing",
            Self::FirstKeptNotOnPath { .. } => "first-kept-not-on-path",
        }
    }
}

impl fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bom => write!(
                f,
                "UTF-8 byte order mark at the start of the file: pi cannot read the first \
                 line, nor load the file unless the next line it can read is a header \
                 (pisess reads the line without the mark)"
            ),
            Self::Crlf => write!(f, "line ends in CRLF (the CR is ignored)"),
            Self::BlankLine => write!(f, "blank line (skipped)"),
            Self::InvalidUtf8 { valid_up_to } => {
                write!(
                    f,
                    "invalid UTF-8 after byte {valid_up_to} of the line (read with U+FFFD in \
                     place of the bad bytes, as pi reads it)"
                )
            }
            Self::LoneSurrogate { count } => {
                write!(
                    f,
                    "{count} lone UTF-16 surrogate escape(s) (half an emoji; read as U+FFFD, \
                     which pi keeps as the half character)"
                )
            }
            Self::DuplicateKeys { count } => {
                write!(
                    f,
                    "{count} key(s) written again in the same object (the last value is read, \
                     in the first one's place, as pi's JSON.parse reads it)"
                )
            }
            Self::TooDeep { depth } => {
                write!(
                    f,
                    "JSON nested {depth} levels deep: pisess reads at most {} (the entry keeps \
                     its place, but its content cannot be shown; pi reads it, but its context \
                     and fork fail beyond about 4,180 levels)",
                    crate::value::DEEPEST
                )
            }
            Self::Malformed { message, column } => {
                write!(
                    f,
                    "not valid JSON at column {column}: {message} (line skipped)"
                )
            }
            Self::PartialLastLine => {
                write!(
                    f,
                    "last line is cut short: no newline and not valid JSON (skipped)"
                )
            }
            Self::MissingFinalNewline => {
                write!(
                    f,
                    "file does not end with a newline (pi appends one when it opens it)"
                )
            }
            Self::NonObject { found, kept } => {
                if *kept {
                    write!(
                        f,
                        "JSON {found} where an object was expected (pi keeps it as an entry without type or id)"
                    )
                } else {
                    write!(
                        f,
                        "JSON {found} where an object was expected (skipped, as pi skips it)"
                    )
                }
            }
            Self::Glued {
                records,
                torn,
                skipped_bytes,
            } => {
                if *torn == 0 {
                    return write!(
                        f,
                        "{records} JSON records glued on one line; recovered {records} of \
                         {records} (pi drops the whole line)"
                    );
                }
                // A broken piece may be a torn record or a few stray bytes: it is not counted
                // as a record.
                let s = |n: usize| if n == 1 { "" } else { "s" };
                write!(
                    f,
                    "{records} JSON record{} and {torn} broken or cut-short piece{} on one line; \
                     {records} recovered, {skipped_bytes} byte{} skipped (nothing inside the \
                     piece{} read as a record; pi drops the whole line)",
                    s(*records),
                    s(*torn),
                    s(*skipped_bytes),
                    s(*torn)
                )
            }
            Self::TornRecord {
                message,
                column,
                bytes,
            } => {
                write!(
                    f,
                    "{bytes} bytes here are no complete JSON record (not valid JSON at column \
                     {column}: {message}); skipped, nothing inside them read as a record"
                )
            }
            Self::JunkBeforeHeader { lines } => {
                write!(f, "{lines} unparsable line(s) before the header (skipped)")
            }
            Self::NotASession { found } => {
                write!(f, "not a pi session: {found}")
            }
            Self::Empty => write!(f, "no JSON value in the file"),
            Self::V4Header => write!(
                f,
                "pi v4 session header (\"kind\":\"header\"): this format is not supported yet"
            ),
            Self::FutureVersion { version } => {
                write!(
                    f,
                    "session version {version} is newer than 3 (read as version 3, as pi does)"
                )
            }
            Self::CwdFileUrl { cwd, why } => write!(
                f,
                "the header's cwd {cwd:?} is a file URL Node cannot read ({why}): pi cannot \
                 open this session (pisess reads it, but writes no fork of it)"
            ),
            Self::BadField {
                entry_type,
                message,
            } if entry_type.is_empty() => write!(f, "entry has a bad field: {message}"),
            Self::BadField {
                entry_type,
                message,
            } => {
                write!(f, "{entry_type} entry has a bad field: {message}")
            }
            Self::MissingId => write!(f, "entry has no string id"),
            Self::DuplicateId { id, first_line } => {
                write!(
                    f,
                    "duplicate id {id:?} (first seen on line {first_line}; pi keeps this later one)"
                )
            }
            Self::LabelTargetMissing { target } => write!(
                f,
                "label for {target:?}, which no entry has (pi keeps it, but shows it nowhere)"
            ),
            Self::FirstKeptNotOnPath { first_kept, exists } => write!(
                f,
                "compaction keeps entries from {first_kept:?}, which {}: pi keeps no message \
                 from before this compaction",
                if *exists {
                    "is not on its path"
                } else {
                    "no entry has"
                }
            ),
            Self::Orphan { id, parent_id } => {
                write!(
                    f,
                    "entry {id:?} has parentId {parent_id:?}, which is not in the file (treated as a root)"
                )
            }
            Self::Cycle { ids, length } => {
                write!(f, "parent cycle of length {length}: {}", ids.join(" -> "))?;
                if *length > ids.len() {
                    write!(f, " -> …")?;
                }
                write!(f, " (pi hangs on this)")
            }
            Self::MultipleRoots { count } => write!(f, "{count} root entries (parentId null)"),
        }
    }
}

/// A problem and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the start of the line (or of the record, for glued lines).
    pub offset: u64,
    /// What is wrong.
    pub kind: ProblemKind,
}

impl Problem {
    /// The problem's severity.
    pub fn severity(&self) -> Severity {
        self.kind.severity()
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {} (byte {}): {}: {}",
            self.line,
            self.offset,
            self.severity(),
            self.kind
        )
    }
}
