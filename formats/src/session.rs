//! Reading a whole session file: header detection, entry indices, and tree checks.
//!
//! [`SessionReader`] streams a file chunk by chunk and calls back with the header, each
//! [`Record`] and each [`Problem`], in file order. It never holds more than one chunk, and
//! before the header at most [`MAX_HELD_BYTES`] of lines held back (their bookkeeping counted).
//!
//! Invariants (pi's loader, spec §5.1, except where noted):
//! - the header is the first truthy JSON value of the file; lines before it that do not parse are
//!   skipped and reported once as junk; if that value is not an object with `type: "session"` and
//!   a string `id`, the file is not a session and nothing else is read;
//! - a line of glued records before the header is held back until the next whole line that
//!   parses: pi, whose `JSON.parse` fails on the glued line, reads that whole line as its
//!   header, so when it is one the glued lines are junk as pi has them; otherwise (or at the
//!   end of the file, or past [`MAX_HELD_BYTES`]) the glued line is read as usual, its first
//!   record being the header (where pi finds no session at all). The first line of a file
//!   that starts with a byte order mark is held back the same way (`JSON.parse` fails on the
//!   mark);
//! - a v4 header (`"kind":"header"`) is detected and refused as unsupported;
//! - a record's `index` is its position in pi's entry list, the header being index 0; every kept
//!   value counts, non-objects too, and recovered glued records count where pi drops them;
//! - [`TreeCheck`] reports duplicate ids, orphans, parent cycles and multiple roots without
//!   recursion, in time linear in the number of entries.

use std::collections::HashMap;
use std::io::Read;

use serde_json::{Map, Value};

use crate::entry::Entry;
use crate::line::{Piece, parse_line};
use crate::problem::{Problem, ProblemKind};
use crate::reader::{ChunkReader, Line};

/// The session header line (spec §2), with every field kept in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    /// The header object as parsed (unknown fields and key order kept).
    pub fields: Map<String, Value>,
    /// The header's exact JSON text.
    pub json: String,
    /// 1-based line number.
    pub line: u64,
    /// Byte offset of the header in the file.
    pub offset: u64,
}

impl Header {
    /// The session id.
    pub fn id(&self) -> &str {
        self.fields
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
    /// The `version` field, `None` when absent (which pi reads as 1).
    pub fn version_field(&self) -> Option<f64> {
        self.fields.get("version").and_then(Value::as_f64)
    }
    /// The format version as pi decides it: `version`, or 1 when absent.
    pub fn version(&self) -> f64 {
        self.version_field().unwrap_or(1.0)
    }
    /// The working directory the session ran in (may be empty on old files).
    pub fn cwd(&self) -> &str {
        self.fields
            .get("cwd")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
    /// The creation time as written.
    pub fn timestamp(&self) -> &str {
        self.fields
            .get("timestamp")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
    /// The file this session was forked or cloned from.
    pub fn parent_session(&self) -> Option<&str> {
        self.fields.get("parentSession").and_then(Value::as_str)
    }
}

/// One entry record of a session file.
pub type Record<'a> = Piece<'a>;

/// What the reader reports, in file order.
#[derive(Debug)]
pub enum Event<'r, 'a> {
    /// The header (once, before any record).
    Header(&'r Header),
    /// An entry record and its position in pi's entry list (header = 0).
    Record(&'r Record<'a>, u64),
    /// A problem.
    Problem(&'r Problem),
}

/// Totals of a read.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The header, if one was found.
    pub header: Option<Header>,
    /// Records after the header.
    pub records: u64,
    /// Lines in the file.
    pub lines: u64,
    /// Bytes in the file.
    pub bytes: u64,
    /// Whether the file ended with a newline (or was empty).
    pub ends_with_newline: bool,
    /// Whether the read stopped because the file is not a (supported) session.
    pub rejected: bool,
}

/// Streams a session file and reports its header, records and problems.
#[derive(Debug)]
pub struct SessionReader<R> {
    chunks: ChunkReader<R>,
}

impl<R: Read> SessionReader<R> {
    /// A reader over `src`.
    pub fn new(src: R) -> Self {
        Self {
            chunks: ChunkReader::new(src),
        }
    }

    /// A reader with a given chunk size (tests use small ones to cross chunk boundaries).
    pub fn with_chunk_size(src: R, chunk_size: usize) -> Self {
        Self {
            chunks: ChunkReader::with_chunk_size(src, chunk_size),
        }
    }

    /// Reads everything, calling `f` for each event. Stops early if `f` returns an error.
    pub fn read<E, F>(mut self, mut f: F) -> Result<Summary, ReadError<E>>
    where
        F: FnMut(Event<'_, '_>) -> Result<(), E>,
    {
        let mut st = ReadState {
            summary: Summary {
                ends_with_newline: true,
                ..Summary::default()
            },
            junk_lines: 0,
            first_junk: (1, 0),
            index: 0,
            problems: Vec::new(),
            held: Vec::new(),
            held_bytes: 0,
            bom_line: false,
        };
        let mut first = true;
        while let Some(chunk) = self.chunks.next_chunk().map_err(ReadError::Io)? {
            if first {
                first = false;
                if self.chunks.had_bom() {
                    st.bom_line = true;
                    let p = Problem {
                        line: 1,
                        offset: 0,
                        kind: ProblemKind::Bom,
                    };
                    f(Event::Problem(&p)).map_err(ReadError::Stopped)?;
                }
            }
            st.summary.bytes = chunk.offset() + chunk.len() as u64;
            for line in chunk.lines() {
                st.summary.lines = line.number;
                st.summary.ends_with_newline = line.terminated;
                st.next_line(&line, &mut f)?;
                if st.summary.rejected {
                    return Ok(st.summary);
                }
            }
        }
        // No whole line decided against the glued lines held back: their first record is
        // the header, or the file is not a session.
        st.replay_held(&mut f)?;
        if st.summary.rejected {
            return Ok(st.summary);
        }
        let mut summary = st.summary;
        if summary.header.is_none() {
            summary.rejected = true;
            let kind = if st.junk_lines > 0 {
                ProblemKind::NotASession {
                    found: format!("no JSON value in {} line(s)", st.junk_lines),
                }
            } else {
                ProblemKind::Empty
            };
            // A problem of the whole file, located at its start (line 1, byte 0): the line
            // and byte of one place, as every problem's are.
            let p = Problem {
                line: 1,
                offset: 0,
                kind,
            };
            f(Event::Problem(&p)).map_err(ReadError::Stopped)?;
        } else if !summary.ends_with_newline {
            let p = Problem {
                line: summary.lines,
                offset: summary.bytes,
                kind: ProblemKind::MissingFinalNewline,
            };
            f(Event::Problem(&p)).map_err(ReadError::Stopped)?;
        }
        Ok(summary)
    }
}

/// How much of the file's start is held back at most while glued lines wait for a whole line
/// to decide the header (past it, the first glued line's first record is taken).
const MAX_HELD_BYTES: usize = 16 << 20;

/// A line held back before the header, owned.
struct HeldLine {
    bytes: Vec<u8>,
    number: u64,
    offset: u64,
    crlf: bool,
    terminated: bool,
    /// A line pi's `JSON.parse` fails on although it holds records (glued, or the marked first
    /// line); otherwise a line without a value (junk, blank, a falsy value), read as usual.
    pi_skips: bool,
}

impl HeldLine {
    fn line(&self) -> Line<'_> {
        Line {
            bytes: &self.bytes,
            number: self.number,
            offset: self.offset,
            crlf: self.crlf,
            terminated: self.terminated,
        }
    }
}

/// What a line before the header holds, as far as the header's choice goes.
enum Probe {
    /// No value (a line pi skips).
    Nothing,
    /// One value and nothing else: what `JSON.parse` of the line gives pi. `true` when it is a
    /// session header.
    Whole(bool),
    /// Glued records, or a record with a piece cut short: `JSON.parse` fails on the line.
    Glued,
}

fn probe(line: &Line<'_>) -> Probe {
    let mut scratch = Vec::new();
    let mut pieces = 0usize;
    let mut glued = false;
    let mut header = false;
    parse_line(line, &mut scratch, |piece| {
        if pieces == 0 {
            glued = piece.glued;
            header = !piece.glued && header_of(&piece).is_ok();
        }
        pieces += 1;
    });
    match (pieces, glued) {
        (0, _) => Probe::Nothing,
        (_, false) => Probe::Whole(header),
        (_, true) => Probe::Glued,
    }
}

/// The reader's state between lines.
struct ReadState {
    summary: Summary,
    problems: Vec<Problem>,
    /// Lines before the header that yielded nothing (pi skips them), and where the first is.
    junk_lines: u64,
    first_junk: (u64, u64),
    index: u64,
    /// Lines held back before the header, from the first glued one on: pi's `JSON.parse`
    /// fails on a glued line, so its header is the first *whole* line that parses. Until
    /// such a line shows whether it is a header, the glued lines wait.
    held: Vec<HeldLine>,
    held_bytes: usize,
    /// The file starts with a byte order mark: `JSON.parse` fails on its first line as on a
    /// glued one (the mark is no JSON white space), so the line waits as a glued one does.
    bom_line: bool,
}

impl ReadState {
    /// Takes the file's next line, holding it back or deciding the header where it must.
    fn next_line<E, F>(&mut self, line: &Line<'_>, f: &mut F) -> Result<(), ReadError<E>>
    where
        F: FnMut(Event<'_, '_>) -> Result<(), E>,
    {
        if self.summary.header.is_some() || self.summary.rejected {
            return self.take(line, f);
        }
        let probe = match probe(line) {
            Probe::Whole(_) if self.bom_line && line.number == 1 => Probe::Glued,
            p => p,
        };
        match probe {
            Probe::Whole(true) if !self.held.is_empty() => {
                // pi skips the glued lines and reads this one as its header: so do we. The
                // lines between them without a value are what they are before any header.
                for held in std::mem::take(&mut self.held) {
                    if held.pi_skips {
                        self.skip_glued(&held.line(), f)?;
                    } else {
                        self.take(&held.line(), f)?;
                    }
                }
                self.held_bytes = 0;
                self.take(line, f)
            }
            Probe::Whole(_) => {
                self.replay_held(f)?;
                if self.summary.rejected {
                    return Ok(());
                }
                self.take(line, f)
            }
            Probe::Nothing if self.held.is_empty() => self.take(line, f),
            Probe::Glued | Probe::Nothing => {
                // What holding the line costs, its bookkeeping included (a run of blank lines
                // is no free ride). Past the cap the held lines are read as they are, and so
                // is this one, never copied.
                let cost = line.bytes.len() + std::mem::size_of::<HeldLine>();
                if self.held_bytes + cost > MAX_HELD_BYTES {
                    self.replay_held(f)?;
                    if self.summary.rejected {
                        return Ok(());
                    }
                    return self.take(line, f);
                }
                self.held_bytes += cost;
                self.held.push(HeldLine {
                    bytes: line.bytes.to_vec(),
                    number: line.number,
                    offset: line.offset,
                    crlf: line.crlf,
                    terminated: line.terminated,
                    pi_skips: matches!(probe, Probe::Glued),
                });
                Ok(())
            }
        }
    }

    /// Reads the held lines as they are: the first glued one's first record is the header.
    fn replay_held<E, F>(&mut self, f: &mut F) -> Result<(), ReadError<E>>
    where
        F: FnMut(Event<'_, '_>) -> Result<(), E>,
    {
        self.held_bytes = 0;
        for held in std::mem::take(&mut self.held) {
            if self.summary.rejected {
                break;
            }
            self.take(&held.line(), f)?;
        }
        Ok(())
    }

    /// A line before a whole-line header, skipped as pi skips it: glued records included.
    fn skip_glued<E, F>(&mut self, line: &Line<'_>, f: &mut F) -> Result<(), ReadError<E>>
    where
        F: FnMut(Event<'_, '_>) -> Result<(), E>,
    {
        let mut problems = Vec::new();
        parse_line(line, &mut problems, |_| {});
        for p in problems {
            match p.kind {
                ProblemKind::Crlf | ProblemKind::BlankLine | ProblemKind::InvalidUtf8 { .. } => {
                    f(Event::Problem(&p)).map_err(ReadError::Stopped)?;
                }
                _ => {}
            }
        }
        if !line.bytes.iter().all(u8::is_ascii_whitespace) {
            if self.junk_lines == 0 {
                self.first_junk = (line.number, line.offset);
            }
            self.junk_lines += 1;
        }
        Ok(())
    }

    /// Reads one line: the header if it is still to come, else records.
    fn take<E, F>(&mut self, line: &Line<'_>, f: &mut F) -> Result<(), ReadError<E>>
    where
        F: FnMut(Event<'_, '_>) -> Result<(), E>,
    {
        let summary = &mut self.summary;
        let (junk_lines, first_junk, index) =
            (&mut self.junk_lines, &mut self.first_junk, &mut self.index);
        let mut result: Result<(), E> = Ok(());
        let mut line_problems_before_header = false;
        let mut late = Vec::new();
        parse_line(line, &mut self.problems, |piece| {
            if result.is_err() || summary.rejected {
                return;
            }
            if summary.header.is_none() {
                match header_of(&piece) {
                    Ok(h) => {
                        if *junk_lines > 0 {
                            late.push(Problem {
                                line: first_junk.0,
                                offset: first_junk.1,
                                kind: ProblemKind::JunkBeforeHeader { lines: *junk_lines },
                            });
                        }
                        if h.version_field().is_some_and(|v| v > 3.0) {
                            let version = h
                                .fields
                                .get("version")
                                .map(Value::to_string)
                                .unwrap_or_default();
                            late.push(Problem {
                                line: piece.line,
                                offset: piece.offset,
                                kind: ProblemKind::FutureVersion { version },
                            });
                        }
                        if let Some(cwd) = h.fields.get("cwd").and_then(Value::as_str)
                            && let Some(why) = crate::layout::file_url_refusal(cwd)
                        {
                            late.push(Problem {
                                line: piece.line,
                                offset: piece.offset,
                                kind: ProblemKind::CwdFileUrl {
                                    cwd: cwd.to_owned(),
                                    why,
                                },
                            });
                        }
                        result = f(Event::Header(&h));
                        summary.header = Some(h);
                    }
                    Err(kind) => {
                        late.push(Problem {
                            line: piece.line,
                            offset: piece.offset,
                            kind,
                        });
                        summary.rejected = true;
                    }
                }
                return;
            }
            *index += 1;
            summary.records += 1;
            result = f(Event::Record(&piece, *index));
        });
        result.map_err(ReadError::Stopped)?;
        self.problems.append(&mut late);
        if self.summary.header.is_none() && !self.summary.rejected {
            // Lines before the header that yielded nothing are junk pi skips.
            let skipped = self.problems.iter().any(|p| {
                matches!(
                    p.kind,
                    ProblemKind::Malformed { .. }
                        | ProblemKind::InvalidUtf8 { .. }
                        | ProblemKind::PartialLastLine
                )
            });
            if skipped {
                if self.junk_lines == 0 {
                    self.first_junk = (line.number, line.offset);
                }
                self.junk_lines += 1;
                line_problems_before_header = true;
            }
        }
        for p in self.problems.drain(..) {
            if line_problems_before_header && matches!(p.kind, ProblemKind::Malformed { .. }) {
                continue;
            }
            f(Event::Problem(&p)).map_err(ReadError::Stopped)?;
        }
        Ok(())
    }
}

/// The line of the header a [`SessionReader`] of `src` finds (`None`: none), read no further
/// than that.
pub fn header_line<R: Read>(src: R) -> Option<u64> {
    first_header(src).map(|h| h.line)
}

/// The header a [`SessionReader`] of `src` finds (`None`: none), read no further than that.
pub fn first_header<R: Read>(src: R) -> Option<Header> {
    let mut header = None;
    // Stopping at the header is the point: the `Err` is no failure.
    let _stopped = SessionReader::new(src).read(|ev| match ev {
        Event::Header(h) => {
            header = Some(h.clone());
            Err(())
        }
        _ => Ok(()),
    });
    header
}

/// Decides whether the first value of a file is a session header.
fn header_of(piece: &Piece<'_>) -> Result<Header, ProblemKind> {
    let value: Value = serde_json::from_str(piece.json).map_err(|e| ProblemKind::NotASession {
        found: format!("unreadable JSON ({e})"),
    })?;
    let Value::Object(fields) = value else {
        return Err(ProblemKind::NotASession {
            found: format!(
                "the first JSON value is a JSON {}, not a session header",
                crate::value::raw_kind(piece.json)
            ),
        });
    };
    if fields.get("kind").and_then(Value::as_str) == Some("header") {
        return Err(ProblemKind::V4Header);
    }
    let ty = fields.get("type").and_then(Value::as_str);
    if ty != Some("session") || !fields.get("id").is_some_and(Value::is_string) {
        let found = match ty {
            Some("session") => "the session header has no string id".to_owned(),
            Some(t) => {
                format!("the first JSON value is an object of type {t:?}, not a session header")
            }
            None => {
                "the first JSON value is an object without a type, not a session header".to_owned()
            }
        };
        return Err(ProblemKind::NotASession { found });
    }
    Ok(Header {
        fields,
        json: piece.json.to_owned(),
        line: piece.line,
        offset: piece.offset,
    })
}

/// Why a read stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReadError<E> {
    /// The source could not be read.
    #[error("read failed: {0}")]
    Io(#[source] std::io::Error),
    /// The callback asked to stop.
    #[error("stopped")]
    Stopped(E),
}

/// Checks the tree structure of a file's entries: duplicate and missing ids, orphans, cycles,
/// roots. Feed it every record in file order, then call [`TreeCheck::finish`].
#[derive(Debug, Default)]
pub struct TreeCheck {
    ids: HashMap<String, u32>,
    nodes: Vec<Node>,
    require_ids: bool,
    roots: usize,
    second_root: Option<(u64, u64)>,
    problems: Vec<Problem>,
    /// `label` entries: target, line, offset.
    labels: Vec<(String, u64, u64)>,
    /// Compactions: node, `firstKeptEntryId`, line, offset.
    compactions: Vec<(u32, String, u64, u64)>,
}

#[derive(Debug)]
struct Node {
    id: String,
    parent: Option<String>,
    line: u64,
    offset: u64,
}

impl TreeCheck {
    /// A check for a file of the given format version (v1 files have no ids to check).
    pub fn new(version: f64) -> Self {
        Self {
            require_ids: version >= 2.0,
            ..Self::default()
        }
    }

    /// Adds one record.
    pub fn add(&mut self, record: &Record<'_>) {
        let Ok(entry) = &record.entry else { return };
        self.add_entry(entry, record.line, record.offset);
    }

    /// Adds one parsed entry found at `line`/`offset`.
    pub fn add_entry(&mut self, entry: &Entry<'_>, line: u64, offset: u64) {
        let Some(id) = entry.id() else {
            if self.require_ids {
                self.problems.push(Problem {
                    line,
                    offset,
                    kind: ProblemKind::MissingId,
                });
            }
            return;
        };
        if entry.parent_id.is_present() && entry.parent_id().is_none() {
            self.roots += 1;
            if self.roots == 2 {
                self.second_root = Some((line, offset));
            }
        }
        let n = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        if let Some(prev) = self.ids.insert(id.to_owned(), n) {
            let first_line = self.nodes.get(prev as usize).map_or(0, |p| p.line);
            self.problems.push(Problem {
                line,
                offset,
                kind: ProblemKind::DuplicateId {
                    id: id.to_owned(),
                    first_line,
                },
            });
        }
        match entry.entry_type() {
            crate::entry::EntryType::Label => {
                if let Some(t) = entry.target_id.get() {
                    self.labels.push((t.as_str().to_owned(), line, offset));
                }
            }
            crate::entry::EntryType::Compaction => {
                if let Some(k) = entry.first_kept_entry_id.get() {
                    self.compactions
                        .push((n, k.as_str().to_owned(), line, offset));
                }
            }
            _ => {}
        }
        self.nodes.push(Node {
            id: id.to_owned(),
            parent: entry.parent_id().map(str::to_owned),
            line,
            offset,
        });
    }

    /// Finishes the check and returns its problems (orphans and cycles after the others).
    pub fn finish(mut self) -> Vec<Problem> {
        // Parent of each node, by pi's id index (a later duplicate wins), or None for a root.
        let parent: Vec<Option<u32>> = self
            .nodes
            .iter()
            .map(|n| n.parent.as_ref().and_then(|p| self.ids.get(p).copied()))
            .collect();
        for n in &self.nodes {
            if let Some(p) = &n.parent
                && !p.is_empty()
                && p != &n.id
                && !self.ids.contains_key(p)
            {
                self.problems.push(Problem {
                    line: n.line,
                    offset: n.offset,
                    kind: ProblemKind::Orphan {
                        id: n.id.clone(),
                        parent_id: p.clone(),
                    },
                });
            }
        }
        // Cycle detection: walk up from each unvisited node, stamping nodes with the walk number.
        const UNSEEN: u32 = u32::MAX;
        let mut stamp = vec![UNSEEN; self.nodes.len()];
        for start in 0..self.nodes.len() {
            if stamp[start] != UNSEEN {
                continue;
            }
            let walk = start as u32;
            let mut cur = Some(start as u32);
            while let Some(c) = cur {
                let c = c as usize;
                if stamp[c] == walk {
                    self.report_cycle(c, &parent);
                    break;
                }
                if stamp[c] != UNSEEN {
                    break;
                }
                stamp[c] = walk;
                cur = parent[c];
            }
        }
        for (target, line, offset) in std::mem::take(&mut self.labels) {
            if !self.ids.contains_key(&target) {
                self.problems.push(Problem {
                    line,
                    offset,
                    kind: ProblemKind::LabelTargetMissing { target },
                });
            }
        }
        if !self.compactions.is_empty() {
            let span = spans(&parent);
            for (c, first_kept, line, offset) in std::mem::take(&mut self.compactions) {
                let k = self.ids.get(&first_kept).copied();
                let on_path = k.is_some_and(|k| {
                    let (kin, kout) = span[k as usize];
                    let (cin, cout) = span[c as usize];
                    // An entry on a cycle has no span (never reached from a root): not judged.
                    cin == u32::MAX || (kin < cin && cout <= kout)
                });
                if !on_path {
                    self.problems.push(Problem {
                        line,
                        offset,
                        kind: ProblemKind::FirstKeptNotOnPath {
                            first_kept,
                            exists: k.is_some(),
                        },
                    });
                }
            }
        }
        if let Some((line, offset)) = self.second_root {
            self.problems.push(Problem {
                line,
                offset,
                kind: ProblemKind::MultipleRoots { count: self.roots },
            });
        }
        self.problems
    }

    fn report_cycle(&mut self, at: usize, parent: &[Option<u32>]) {
        let mut ids = Vec::new();
        let mut length = 0;
        let mut cur = at;
        loop {
            if ids.len() < 8 {
                ids.push(self.nodes[cur].id.clone());
            }
            length += 1;
            match parent[cur] {
                Some(p) if p as usize != at => cur = p as usize,
                _ => break,
            }
        }
        let n = &self.nodes[at];
        self.problems.push(Problem {
            line: n.line,
            offset: n.offset,
            kind: ProblemKind::Cycle { ids, length },
        });
    }
}

/// Each node's (entry, exit) number in a depth-first walk from the roots, so that `a` is an
/// ancestor of `b` exactly when `a.0 < b.0 && b.1 <= a.1`; `(u32::MAX, u32::MAX)` for a node
/// no root reaches (on a parent cycle). Loops, no recursion: a chain of a million is fine.
fn spans(parent: &[Option<u32>]) -> Vec<(u32, u32)> {
    let n = parent.len();
    // Children in index order (compressed rows).
    let mut start = vec![0u32; n + 1];
    for p in parent.iter().flatten() {
        start[*p as usize + 1] += 1;
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut children = vec![0u32; start[n] as usize];
    for (i, p) in parent.iter().enumerate() {
        if let Some(p) = p {
            let at = &mut fill[*p as usize];
            children[*at as usize] = i as u32;
            *at += 1;
        }
    }
    let mut span = vec![(u32::MAX, u32::MAX); n];
    let mut clock = 0u32;
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for root in (0..n).filter(|&i| parent[i].is_none()) {
        span[root].0 = clock;
        clock += 1;
        stack.push((root as u32, start[root]));
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if *next < start[node as usize + 1] {
                let child = children[*next as usize];
                *next += 1;
                span[child as usize].0 = clock;
                clock += 1;
                stack.push((child, start[child as usize]));
            } else {
                span[node as usize].1 = clock;
                stack.pop();
            }
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(src: &str) -> (Option<Header>, Vec<(u64, String)>, Vec<String>) {
        let mut records = Vec::new();
        let mut problems = Vec::new();
        let summary = SessionReader::with_chunk_size(src.as_bytes(), 4096)
            .read(|ev| {
                match ev {
                    Event::Header(_) => {}
                    Event::Record(r, i) => records.push((i, r.json.to_owned())),
                    Event::Problem(p) => problems.push(p.kind.code().to_owned()),
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        (summary.header, records, problems)
    }

    #[test]
    fn header_then_records_with_indices() {
        let (h, r, p) = read(
            "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n{\"type\":\"a\"}\n[1]\n{\"type\":\"b\"}\n",
        );
        assert_eq!(h.unwrap().id(), "s");
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(p, ["non-object"]);
    }

    #[test]
    fn junk_before_header_is_skipped_and_reported_once() {
        let (h, r, p) =
            read("garbage\n{oops\n{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"a\"}");
        assert!(h.is_some());
        assert_eq!(r.len(), 1);
        assert_eq!(p, ["junk-before-header", "missing-final-newline"]);
    }

    #[test]
    fn a_whole_line_header_after_glued_lines_is_the_header_as_in_pi() {
        let glued_header = r#"{"type":"session","id":"old"}{"type":"a","id":"x"}"#;
        let glued_entries = r#"{"type":"a","id":"y"}{"type":"b","id":"z"}"#;
        let header = r#"{"type":"session","version":3,"id":"new"}"#;
        // pi's JSON.parse fails on both glued lines and on the junk (1,000 lines of it, so
        // that a 4 KiB chunk ends among the held lines), and skips `null`: line 1,004 is its
        // header.
        let junk = "{oops\n".repeat(1000);
        let src =
            format!("{glued_header}\n{junk}{glued_entries}\nnull\n{header}\n{{\"type\":\"c\"}}\n");
        for chunk in [4096, 8192, 1 << 20] {
            let mut records = Vec::new();
            let mut problems = Vec::new();
            let summary = SessionReader::with_chunk_size(src.as_bytes(), chunk)
                .read(|ev| {
                    match ev {
                        Event::Header(_) => {}
                        Event::Record(r, i) => records.push((i, r.line)),
                        Event::Problem(p) => problems.push((p.kind.to_string(), p.line)),
                    }
                    Ok::<(), ()>(())
                })
                .unwrap();
            let h = summary.header.unwrap();
            assert_eq!((h.id(), h.line), ("new", 1004), "chunk {chunk}");
            assert_eq!(records, [(1, 1005)], "chunk {chunk}");
            // The `null` is noted as it is before any header, not counted as junk.
            let null_note = problems.iter().find(|p| p.1 == 1003).map(|p| p.0.as_str());
            assert!(
                null_note.is_some_and(|n| n.contains("null")),
                "{problems:?}"
            );
            assert_eq!(
                problems.iter().filter(|p| p.1 != 1003).collect::<Vec<_>>(),
                [&(
                    "1002 unparsable line(s) before the header (skipped)".to_owned(),
                    1
                )],
                "chunk {chunk}"
            );
        }
        // Held lines are bounded (their bookkeeping counted): past MAX_HELD_BYTES of them the
        // glued line's header is taken, even if a whole-line header follows.
        let many = "x\n".repeat(MAX_HELD_BYTES / std::mem::size_of::<HeldLine>() + 1);
        let (h, r, _) = read(&format!("{glued_header}\n{many}{header}\n"));
        assert_eq!(h.unwrap().id(), "old");
        assert_eq!(r.len(), 2);
        // No whole-line header follows: the glued line's first record is the header (pi finds
        // no session), and the lines held back are read as records after it.
        let (h, r, p) = read(&format!("{glued_header}\n{{oops\n{{\"type\":\"c\"}}\n"));
        assert_eq!(h.unwrap().id(), "old");
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(p, ["glued", "malformed"]);
        let (h, r, _) = read(&format!("{glued_header}\n{glued_entries}\n"));
        assert_eq!(h.unwrap().id(), "old");
        assert_eq!(r.len(), 3);
        // A glued line whose first record is no header, then a whole-line header: a session.
        let (h, r, p) = read(&format!("{glued_entries}\n{header}\n{{\"type\":\"c\"}}\n"));
        assert_eq!(h.unwrap().id(), "new");
        assert_eq!(r.len(), 1);
        assert_eq!(p, ["junk-before-header"]);
        // ...and without one: not a session, named by the glued line's first record.
        assert_eq!(
            read(&format!("{glued_entries}\n")).2,
            ["glued", "not-a-session"]
        );
    }

    #[test]
    fn a_first_line_with_a_byte_order_mark_waits_for_a_whole_line_header_as_a_glued_one() {
        let bom = "\u{feff}";
        let h = |id: &str| format!(r#"{{"type":"session","version":3,"id":"{id}"}}"#);
        let e = r#"{"type":"a","id":"x"}"#;
        // pi's JSON.parse fails on the marked line: the next whole line decides.
        let (hd, r, p) = read(&format!("{bom}[]\n{}\n{e}\n", h("s")));
        assert_eq!(hd.unwrap().id(), "s");
        assert_eq!(r.len(), 1);
        assert_eq!(p, ["bom", "junk-before-header"]);
        let (hd, _, _) = read(&format!("{bom}{}\n{}\n{e}\n", h("first"), h("second")));
        assert_eq!(hd.unwrap().id(), "second");
        // No header follows: the marked line is read without its mark (pi loads nothing).
        let (hd, r, p) = read(&format!("{bom}{}\n{e}\n", h("only")));
        assert_eq!(hd.unwrap().id(), "only");
        assert_eq!(r.len(), 1);
        assert_eq!(p, ["bom"]);
        assert_eq!(
            read(&format!("{bom}[]\n{e}\n")).2,
            ["bom", "non-object", "not-a-session"]
        );
    }

    #[test]
    fn non_sessions_and_v4_are_rejected() {
        assert_eq!(read("{\"type\":\"message\"}\n").2, ["not-a-session"]);
        assert_eq!(
            read("{\"kind\":\"header\",\"version\":4}\n").2,
            ["v4-header"]
        );
        assert_eq!(read("").2, ["empty"]);
        assert_eq!(read("\n\n").2, ["blank-line", "blank-line", "empty"]);
    }

    #[test]
    fn tree_check_finds_everything() {
        let lines = [
            r#"{"type":"x","id":"a","parentId":null}"#,
            r#"{"type":"x","id":"b","parentId":"a"}"#,
            r#"{"type":"x","id":"b","parentId":"a"}"#,
            r#"{"type":"x","id":"c","parentId":"zzz"}"#,
            r#"{"type":"x","id":"d","parentId":"e"}"#,
            r#"{"type":"x","id":"e","parentId":"d"}"#,
            r#"{"type":"x","id":"f","parentId":"f"}"#,
            r#"{"type":"x","id":"g","parentId":null}"#,
            r#"{"type":"x","parentId":null}"#,
        ];
        let mut check = TreeCheck::new(3.0);
        for (i, l) in lines.iter().enumerate() {
            let e = Entry::parse(l).unwrap();
            check.add_entry(&e, i as u64 + 2, 0);
        }
        let codes: Vec<_> = check
            .finish()
            .into_iter()
            .map(|p| p.kind.to_string())
            .collect();
        assert_eq!(codes.len(), 6, "{codes:#?}");
        assert!(codes[0].contains("duplicate id \"b\""));
        assert!(codes[1].contains("no string id"));
        assert!(codes[2].contains("\"zzz\""));
        assert!(codes[3].contains("cycle of length 2: d -> e"));
        assert!(codes[4].contains("cycle of length 1: f"));
        assert!(codes[5].contains("2 root entries"));
    }

    #[test]
    fn tree_check_finds_labels_and_kept_entries_off_the_path() {
        let lines = [
            r#"{"type":"x","id":"a","parentId":null}"#,
            r#"{"type":"x","id":"b","parentId":"a"}"#,
            r#"{"type":"x","id":"s","parentId":"a"}"#,
            // Kept from an ancestor: fine; from a sibling's branch or nowhere: not on the path.
            r#"{"type":"compaction","id":"c1","parentId":"b","firstKeptEntryId":"a"}"#,
            r#"{"type":"compaction","id":"c2","parentId":"c1","firstKeptEntryId":"s"}"#,
            r#"{"type":"compaction","id":"c3","parentId":"c2","firstKeptEntryId":"nope"}"#,
            r#"{"type":"compaction","id":"c4","parentId":"c3","firstKeptEntryId":"c4"}"#,
            r#"{"type":"label","id":"l1","parentId":"c4","targetId":"b","label":"x"}"#,
            r#"{"type":"label","id":"l2","parentId":"l1","targetId":"gone","label":"y"}"#,
            // On a parent cycle: not judged.
            r#"{"type":"x","id":"d","parentId":"e"}"#,
            r#"{"type":"compaction","id":"e","parentId":"d","firstKeptEntryId":"a"}"#,
        ];
        let mut check = TreeCheck::new(3.0);
        for (i, l) in lines.iter().enumerate() {
            let e = Entry::parse(l).unwrap();
            check.add_entry(&e, i as u64 + 2, 0);
        }
        let found: Vec<(u64, String)> = check
            .finish()
            .into_iter()
            .map(|p| (p.line, p.kind.to_string()))
            .collect();
        let lines_of = |code: &str| -> Vec<u64> {
            found
                .iter()
                .filter(|(_, t)| t.contains(code))
                .map(|(l, _)| *l)
                .collect()
        };
        assert_eq!(lines_of("not on its path"), [6, 8], "{found:#?}");
        assert_eq!(lines_of("which no entry has:"), [7], "{found:#?}");
        assert_eq!(lines_of("label for \"gone\""), [10], "{found:#?}");
        assert_eq!(found.len(), 5, "{found:#?}");
    }
}
