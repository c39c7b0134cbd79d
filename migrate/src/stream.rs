//! Migrating a whole session file, streaming from a reader to a writer.
//!
//! [`migrate_reader`] reads once: it records the bytes before the header (only those), decides
//! the plan from the header, and then either copies the source through unchanged (v3 and later)
//! or migrates each record as it is read. [`migrate_seekable`] (and [`migrate_file`]) read the
//! header first, then, for v1 files only, run the [`Lookahead`] pass so that forward
//! `firstKeptEntryIndex` references resolve exactly, then migrate in a second pass.
//!
//! Output: the migrated header, then one line per record the reader kept (in order, glued
//! records included), each `JSON.stringify`-exact and followed by `\n`. Nothing is written when
//! the file is rejected (not a session, a v4 file, empty).

use std::cell::{Cell, RefCell};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::Path;

use pisess_formats::{Event, Problem, ProblemKind, ReadError, SessionReader, Severity, js};
use serde_json::Value;

use crate::MigrateError;
use crate::migrator::{Lookahead, Migrator, Note, NoteKind};
use crate::version::Plan;

/// Bytes read per chunk: large enough for full-speed reads, small enough that migrating many
/// small files costs little.
pub const CHUNK: usize = 256 << 10;

/// At most this many problems and notes are kept in a [`MigrationOutcome`] (all are counted).
pub const MAX_KEPT: usize = 1000;

/// [`migrate_reader`] keeps the bytes before the header (to copy a v3 file through) up to this
/// size; a v3 file whose header comes later is refused with [`MigrateError::HeaderTooFar`].
pub const PREFIX_LIMIT: usize = 64 << 20;

/// What a migration did.
#[derive(Debug, Clone, Default)]
pub struct MigrationOutcome {
    /// The header's `version` field as written (`None` when absent, which means v1).
    pub original_version: Option<Value>,
    /// The steps that ran (and whether the file was rewritten at all).
    pub plan: Option<Plan>,
    /// The session id.
    pub session_id: String,
    /// True when the output is a migrated rewrite; false when the source was copied unchanged
    /// (v3 or later), in which case the record counts below are zero.
    pub migrated: bool,
    /// Records written after the header.
    pub entries: u64,
    /// Of those, records recovered from glued or damaged lines (pi drops those lines whole).
    pub glued_recovered: u64,
    /// Of those, values that are not objects (arrays, numbers, strings), kept in place.
    pub non_objects: u64,
    /// Lines dropped because they hold no complete JSON value (malformed, cut short, or junk
    /// before the header), as pi drops them.
    pub lines_skipped: u64,
    /// Blank lines dropped.
    pub blank_lines: u64,
    /// Falsy values (`null`, `false`, `0`, `""`) dropped, as pi drops them.
    pub falsy_dropped: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// False when a single pass could not resolve a forward reference as pi would (see
    /// [`NoteKind::Inexact`]); always true for [`migrate_seekable`] and [`migrate_file`].
    pub exact: bool,
    /// The reader's problems, in file order (the first [`MAX_KEPT`]).
    pub problems: Vec<Problem>,
    /// Number of problems, including those not kept.
    pub problems_total: u64,
    /// The migration's notes (the first [`MAX_KEPT`]).
    pub notes: Vec<Note>,
    /// Number of notes, including those not kept.
    pub notes_total: u64,
}

impl MigrationOutcome {
    /// The notes (of those kept) on records kept as written but outside the parent chain
    /// because they cannot be loaded ([`NoteKind::Unparsable`]), where pi's migration chains
    /// them: the migrated tree is not pi's there.
    pub fn unparsable_kept(&self) -> impl Iterator<Item = &Note> + Clone {
        self.notes
            .iter()
            .filter(|n| matches!(n.kind, NoteKind::Unparsable { .. }))
    }

    fn add_problem(&mut self, p: &Problem) {
        match &p.kind {
            ProblemKind::Malformed { .. } | ProblemKind::PartialLastLine => self.lines_skipped += 1,
            ProblemKind::JunkBeforeHeader { lines } => self.lines_skipped += lines,
            ProblemKind::BlankLine => self.blank_lines += 1,
            ProblemKind::NonObject { kept: false, .. } => self.falsy_dropped += 1,
            _ => {}
        }
        self.problems_total += 1;
        if self.problems.len() < MAX_KEPT {
            self.problems.push(p.clone());
        }
    }

    fn add_note(&mut self, n: Note) {
        if matches!(n.kind, NoteKind::Inexact { .. }) {
            self.exact = false;
        }
        self.notes_total += 1;
        if self.notes.len() < MAX_KEPT {
            self.notes.push(n);
        }
    }
}

/// Migrates the session read from `src` to `out` in one pass (see the module docs). Forward
/// `firstKeptEntryIndex` references resolve as pi resolves them unless the later entry carries
/// its own `id`, in which case the outcome is marked inexact; use [`migrate_seekable`] when the
/// source can be read twice.
pub fn migrate_reader<R: Read, W: Write>(src: R, out: W) -> Result<MigrationOutcome, MigrateError> {
    run(src, out, None, CHUNK, PREFIX_LIMIT)
}

/// Migrates the session read from `src` (from its current position) to `out`, exactly: v1
/// files are read twice (a [`Lookahead`] pass first), v2 files once after the header, v3 files
/// are copied through.
pub fn migrate_seekable<R: Read + Seek, W: Write>(
    mut src: R,
    out: W,
) -> Result<MigrationOutcome, MigrateError> {
    let start = src.stream_position().map_err(MigrateError::Read)?;
    // Small files need no large buffers.
    let end = src.seek(SeekFrom::End(0)).map_err(MigrateError::Read)?;
    let chunk = usize::try_from(end.saturating_sub(start).saturating_add(1))
        .unwrap_or(CHUNK)
        .clamp(4096, CHUNK);
    src.seek(SeekFrom::Start(start))
        .map_err(MigrateError::Read)?;
    let (header, problems) = read_header(&mut src, chunk)?;
    let plan = Plan::for_header(&header);
    src.seek(SeekFrom::Start(start))
        .map_err(MigrateError::Read)?;
    if !plan.rewrite {
        let mut outcome = MigrationOutcome {
            original_version: header.get("version").cloned(),
            plan: Some(plan),
            session_id: session_id(&header),
            exact: true,
            ..MigrationOutcome::default()
        };
        for p in &problems {
            outcome.add_problem(p);
        }
        let mut out = out;
        outcome.bytes_written = copy(&mut src, &mut out, chunk)?;
        out.flush().map_err(MigrateError::Write)?;
        return Ok(outcome);
    }
    let lookahead = if plan.v1_to_v2 {
        let la = Lookahead::scan_chunked(&mut src, chunk)?;
        src.seek(SeekFrom::Start(start))
            .map_err(MigrateError::Read)?;
        Some(la)
    } else {
        None
    };
    run(src, out, lookahead, chunk, PREFIX_LIMIT)
}

/// Migrates the session file at `path` to `out` with [`migrate_seekable`]. `path` must be a
/// regular file (or a symlink to one): anything else is a read error, and is never read.
pub fn migrate_file<W: Write>(path: &Path, out: W) -> Result<MigrationOutcome, MigrateError> {
    let file = pisess_formats::open::open_regular(path).map_err(MigrateError::Read)?;
    migrate_seekable(file, out)
}

fn session_id(header: &serde_json::Map<String, Value>) -> String {
    header
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Reads up to the header; returns its fields and the problems before it.
fn read_header<R: Read>(
    src: R,
    chunk: usize,
) -> Result<(serde_json::Map<String, Value>, Vec<Problem>), MigrateError> {
    let mut header = None;
    let mut problems = Vec::new();
    let result = SessionReader::with_chunk_size(src, chunk.min(64 << 10)).read(|ev| match ev {
        Event::Header(h) => {
            header = Some(h.fields.clone());
            Err(())
        }
        Event::Problem(p) => {
            problems.push(p.clone());
            Ok(())
        }
        Event::Record(..) => Ok(()),
    });
    match result {
        Ok(_) | Err(ReadError::Stopped(())) => {}
        Err(ReadError::Io(e)) => return Err(MigrateError::Read(e)),
    }
    match header {
        Some(h) => Ok((h, problems)),
        None => Err(rejection(problems)),
    }
}

/// The error for a file without a usable header: its error-severity problem.
fn rejection(problems: Vec<Problem>) -> MigrateError {
    let p = problems
        .into_iter()
        .rev()
        .find(|p| p.severity() == Severity::Error)
        .unwrap_or(Problem {
            line: 1,
            offset: 0,
            kind: ProblemKind::Empty,
        });
    MigrateError::Rejected(p)
}

/// A reader that keeps a copy of what it reads while `prefix` is `Some`.
struct Recording<'p, R> {
    inner: R,
    prefix: &'p RefCell<Option<Vec<u8>>>,
    overflow: &'p Cell<bool>,
    limit: usize,
}

impl<R: Read> Read for Recording<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut prefix = self.prefix.borrow_mut();
        if let Some(p) = prefix.as_mut() {
            if p.len() + n > self.limit {
                self.overflow.set(true);
                *prefix = None;
            } else {
                p.extend_from_slice(&buf[..n]);
            }
        }
        Ok(n)
    }
}

enum Stop {
    Copy,
    Fail(MigrateError),
}

struct Run<'p, W: Write> {
    out: BufWriter<W>,
    outcome: MigrationOutcome,
    migrator: Option<Migrator>,
    lookahead: Option<Lookahead>,
    prefix: &'p RefCell<Option<Vec<u8>>>,
    rejection: Vec<Problem>,
    line: Vec<u8>,
}

impl<W: Write> Run<'_, W> {
    fn on_event(&mut self, ev: Event<'_, '_>) -> Result<(), Stop> {
        match ev {
            Event::Header(h) => {
                let plan = Plan::for_header(&h.fields);
                self.outcome.original_version = h.fields.get("version").cloned();
                self.outcome.plan = Some(plan);
                self.outcome.session_id = h.id().to_owned();
                if !plan.rewrite {
                    return Err(Stop::Copy);
                }
                // The bytes before the header are not needed any more.
                *self.prefix.borrow_mut() = None;
                self.outcome.migrated = true;
                let migrator = match self.lookahead.take() {
                    Some(la) => Migrator::with_lookahead(&h.fields, la),
                    None => Migrator::new(&h.fields),
                };
                let mut fields = h.fields.clone();
                migrator.migrate_header(&mut fields);
                self.migrator = Some(migrator);
                self.write_value(&Value::Object(fields))
            }
            Event::Record(piece, index) => {
                let Some(m) = self.migrator.as_mut() else {
                    return Ok(());
                };
                self.outcome.entries += 1;
                if piece.glued {
                    self.outcome.glued_recovered += 1;
                }
                match serde_json::from_str::<Value>(piece.json) {
                    Ok(mut v) => {
                        m.migrate_record(&mut v, index).map_err(Stop::Fail)?;
                        if !v.is_object() {
                            self.outcome.non_objects += 1;
                        }
                        self.drain_notes();
                        self.write_value(&v)
                    }
                    Err(e) => {
                        m.pass_record(index).map_err(Stop::Fail)?;
                        self.drain_notes();
                        self.outcome.add_note(Note {
                            index,
                            kind: NoteKind::Unparsable {
                                message: e.to_string(),
                            },
                        });
                        if !piece.is_object() {
                            self.outcome.non_objects += 1;
                        }
                        self.line.clear();
                        self.line.extend_from_slice(piece.json.as_bytes());
                        self.line.push(b'\n');
                        self.write_line()
                    }
                }
            }
            Event::Problem(p) => {
                if self.migrator.is_none() && p.severity() == Severity::Error {
                    self.rejection.push(p.clone());
                }
                self.outcome.add_problem(p);
                Ok(())
            }
        }
    }

    fn drain_notes(&mut self) {
        if let Some(m) = self.migrator.as_mut() {
            for n in m.take_notes() {
                self.outcome.add_note(n);
            }
        }
    }

    fn write_value(&mut self, v: &Value) -> Result<(), Stop> {
        self.line.clear();
        js::write_value(&mut self.line, v);
        self.line.push(b'\n');
        self.write_line()
    }

    fn write_line(&mut self) -> Result<(), Stop> {
        self.outcome.bytes_written += self.line.len() as u64;
        self.out
            .write_all(&self.line)
            .map_err(|e| Stop::Fail(MigrateError::Write(e)))
    }
}

fn run<R: Read, W: Write>(
    src: R,
    out: W,
    lookahead: Option<Lookahead>,
    chunk: usize,
    limit: usize,
) -> Result<MigrationOutcome, MigrateError> {
    let prefix = RefCell::new(Some(Vec::new()));
    let overflow = Cell::new(false);
    let mut rec = Recording {
        inner: src,
        prefix: &prefix,
        overflow: &overflow,
        limit,
    };
    let mut state = Run {
        out: BufWriter::with_capacity(chunk, out),
        outcome: MigrationOutcome {
            exact: true,
            ..MigrationOutcome::default()
        },
        migrator: None,
        lookahead,
        prefix: &prefix,
        rejection: Vec::new(),
        line: Vec::new(),
    };
    let result = SessionReader::with_chunk_size(&mut rec, chunk).read(|ev| state.on_event(ev));
    match result {
        Ok(_) => {}
        Err(ReadError::Io(e)) => return Err(MigrateError::Read(e)),
        Err(ReadError::Stopped(Stop::Fail(e))) => return Err(e),
        Err(ReadError::Stopped(Stop::Copy)) => {
            let Some(head) = prefix.take() else {
                return Err(MigrateError::HeaderTooFar {
                    limit: limit as u64,
                });
            };
            let mut outcome = state.outcome;
            let mut out = state.out;
            out.write_all(&head).map_err(MigrateError::Write)?;
            outcome.bytes_written = head.len() as u64 + copy(&mut rec.inner, &mut out, chunk)?;
            out.flush().map_err(MigrateError::Write)?;
            return Ok(outcome);
        }
    }
    let Some(migrator) = state.migrator.take() else {
        return Err(rejection(state.rejection));
    };
    for n in migrator.finish() {
        state.outcome.add_note(n);
    }
    state.out.flush().map_err(MigrateError::Write)?;
    Ok(state.outcome)
}

/// Copies `src` to `out` to the end; returns the bytes copied.
fn copy<R: Read, W: Write>(src: &mut R, out: &mut W, chunk: usize) -> Result<u64, MigrateError> {
    let mut buf = vec![0u8; chunk];
    let mut total = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(MigrateError::Read(e)),
        };
        out.write_all(&buf[..n]).map_err(MigrateError::Write)?;
        total += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v3_header_after_too_much_junk_is_refused_by_a_single_pass() {
        let junk = "x".repeat(5000);
        let text = format!("{junk}\n{{\"type\":\"session\",\"version\":3,\"id\":\"s\"}}\n");
        let mut out = Vec::new();
        let err = run(text.as_bytes(), &mut out, None, CHUNK, 4096).unwrap_err();
        assert!(matches!(err, MigrateError::HeaderTooFar { limit: 4096 }));
        assert!(out.is_empty());
        // Under the limit, or migrating (the prefix is not needed), or seekable: fine.
        let mut out = Vec::new();
        run(text.as_bytes(), &mut out, None, CHUNK, 1 << 20).unwrap();
        assert_eq!(out, text.as_bytes());
        let v1 = text.replace(",\"version\":3", "");
        let mut out = Vec::new();
        let outcome = run(v1.as_bytes(), &mut out, None, CHUNK, 4096).unwrap();
        assert!(outcome.migrated);
        let mut out = Vec::new();
        migrate_seekable(io::Cursor::new(&text), &mut out).unwrap();
        assert_eq!(out, text.as_bytes());
    }

    #[test]
    fn read_and_write_errors_are_told_apart() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk"))
            }
        }
        impl Write for Failing {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Err(io::Error::other("full"))
            }
        }
        let err = migrate_reader(Failing, Vec::new()).unwrap_err();
        assert!(matches!(err, MigrateError::Read(_)));
        let text = "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\"}\n";
        let err = migrate_reader(text.as_bytes(), Failing).unwrap_err();
        assert!(matches!(err, MigrateError::Write(_)), "{err}");
        let v3 = "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n";
        let err = migrate_reader(v3.as_bytes(), Failing).unwrap_err();
        assert!(matches!(err, MigrateError::Write(_)), "{err}");
    }
}
