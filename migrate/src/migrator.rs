//! The streaming migrator: one element of the entry list at a time, in file order.
//!
//! [`Migrator`] holds, per element already seen, only what a later `firstKeptEntryIndex` can
//! ask for (8 bytes: its kind and drawn id), never the element itself. A compaction that points
//! at a *later* element needs that element's own `id` field at migration time, which a single
//! forward pass cannot know yet; [`Lookahead`] is a cheap first pass that records exactly those
//! facts. Without it the migrator assumes the usual case (the target exists, is an object and has
//! no `id`, so no `firstKeptEntryId` is written, as pi does for v1 files), checks the assumption
//! when the target arrives, and reports [`NoteKind::Inexact`] if it was wrong.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Read;

use pisess_formats::{Event, Field, SessionReader};
use serde_json::{Map, Value};

use crate::MigrateError;
use crate::ids::{DrawnId, IdDrawer};
use crate::v1_to_v2::{
    self, Kind, Target, apply_first_kept, array_index, assign_ids, first_kept_index, set_version,
    target_of,
};
use crate::v2_to_v3;
use crate::version::Plan;

/// Something the migration did that pi would not have done, or that loses information.
#[derive(Debug, Clone, PartialEq)]
pub struct Note {
    /// Index of the element concerned in pi's entry list (header = 0).
    pub index: u64,
    /// What happened.
    pub kind: NoteKind,
}

/// Why a compaction's `firstKeptEntryIndex` gave no `firstKeptEntryId`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unresolved {
    /// Not a non-negative integer.
    NotAnIndex,
    /// Past the last element of the file.
    PastTheEnd,
    /// Names the header (or another `session` element).
    Session,
    /// Names a later element, which has no id yet when pi migrates the compaction.
    Later,
    /// Names an element that is not an object (and so has no id in pisess).
    NotAnObject,
}

/// What a [`Note`] says.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NoteKind {
    /// A v1 element that is not an object was kept in place, outside the parent chain (pi throws
    /// on numbers and strings, and gives arrays an id it never writes, leaving the next entry's
    /// `parentId` dangling).
    NonObjectKept {
        /// `array`, `number`, `string` or `true`.
        found: &'static str,
    },
    /// A compaction's `firstKeptEntryIndex` was removed without giving a `firstKeptEntryId`.
    FirstKeptUnresolved {
        /// The index as written.
        value: f64,
        /// Why it did not resolve.
        why: Unresolved,
    },
    /// Single pass only: a compaction points at a later element whose own fields change the
    /// result, so this output differs from pi's (run with a [`Lookahead`] to be exact).
    Inexact {
        /// Index of the element the compaction points at.
        target: u64,
    },
    /// The record is valid JSON but holds a number outside the range of a double, which
    /// serde_json cannot load; it was written back unchanged and left out of the parent chain.
    Unparsable {
        /// serde_json's message.
        message: String,
    },
}

impl fmt::Display for NoteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonObjectKept { found } => write!(
                f,
                "a JSON {found} line was kept as it is, outside the parent chain (pi cannot migrate it)"
            ),
            Self::FirstKeptUnresolved { value, why } => {
                let why = match why {
                    Unresolved::NotAnIndex => "is not an index",
                    Unresolved::PastTheEnd => "is past the end of the file",
                    Unresolved::Session => "names the session header",
                    Unresolved::Later => "names a later entry, which has no id yet (as in pi)",
                    Unresolved::NotAnObject => "names a line that is not an entry",
                };
                write!(
                    f,
                    "compaction firstKeptEntryIndex {value} {why}: no firstKeptEntryId written"
                )
            }
            Self::Inexact { target } => write!(
                f,
                "compaction firstKeptEntryIndex names entry {target}, which a single pass could not \
                 read ahead: the result differs from pi's (migrate from a seekable file to be exact)"
            ),
            Self::Unparsable { message } => write!(
                f,
                "record kept unchanged, outside the parent chain: it cannot be loaded ({message})"
            ),
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "entry {}: {}", self.index, self.kind)
    }
}

/// What a first pass learned about the elements that compactions point at ahead of themselves.
#[derive(Debug, Clone, Default)]
pub struct Lookahead {
    count: u64,
    targets: HashMap<u64, Target>,
    wanted: HashSet<u64>,
}

impl Lookahead {
    /// An empty lookahead, to be fed every element with [`Lookahead::add`].
    pub fn new() -> Self {
        Self {
            count: 1,
            ..Self::default()
        }
    }

    /// Reads a whole session file (the same bytes the migration will read) and records what
    /// forward `firstKeptEntryIndex` references resolve to. Reader problems are ignored here.
    pub fn scan<R: Read>(src: R) -> Result<Self, MigrateError> {
        Self::scan_chunked(src, crate::stream::CHUNK)
    }

    /// [`Lookahead::scan`] reading `chunk` bytes at a time.
    pub(crate) fn scan_chunked<R: Read>(src: R, chunk: usize) -> Result<Self, MigrateError> {
        let mut la = Self::new();
        SessionReader::with_chunk_size(src, chunk)
            .read(|ev| {
                if let Event::Record(piece, index) = ev {
                    la.add_piece(index, piece);
                }
                Ok::<(), ()>(())
            })
            .map_err(|e| match e {
                pisess_formats::ReadError::Io(e) => MigrateError::Read(e),
                pisess_formats::ReadError::Stopped(()) => {
                    MigrateError::Read(std::io::Error::other("scan stopped"))
                }
            })?;
        Ok(la)
    }

    /// Feeds a record as the reader gives it, from its typed view when it has one (no second
    /// parse), else from its JSON.
    fn add_piece(&mut self, index: u64, piece: &pisess_formats::Record<'_>) {
        let entry = match &piece.entry {
            // A partial view (a field did not fit) lacks `firstKeptEntryIndex`: use the JSON.
            Ok(e) if piece.is_object() && e.bad_field.is_none() => e,
            _ => {
                let v = serde_json::from_str::<Value>(piece.json).unwrap_or(Value::Null);
                self.add(index, &v);
                return;
            }
        };
        let ty = entry.type_name.get().map(|t| t.as_str());
        let target = if ty == Some("session") {
            Target::Session
        } else {
            Target::Entry(match &entry.id {
                Field::Missing => None,
                Field::Null => Some(Value::Null),
                Field::Value(s) => Some(Value::String(s.as_str().to_owned())),
            })
        };
        let forward = match (ty, entry.first_kept_entry_index.get()) {
            (Some("compaction"), Some(n)) => array_index(*n),
            _ => None,
        };
        self.add_facts(index, target, forward);
    }

    /// The lookahead of an in-memory entry list (`values[0]` is the header).
    pub fn from_values(values: &[Value]) -> Self {
        let mut la = Self::new();
        for (i, v) in values.iter().enumerate().skip(1) {
            la.add(i as u64, v);
        }
        la
    }

    /// Feeds element `index` (in increasing order; elements that are written back unchanged
    /// without being loaded are fed as `Value::Null`).
    pub fn add(&mut self, index: u64, v: &Value) {
        let forward = match v {
            Value::Object(obj) if v1_to_v2::kind(v) == Kind::Chain => {
                first_kept_index(obj).and_then(array_index)
            }
            _ => None,
        };
        self.add_facts(index, target_of(v), forward);
    }

    fn add_facts(&mut self, index: u64, target: Target, forward: Option<u64>) {
        self.count = self.count.max(index + 1);
        if self.wanted.remove(&index) {
            self.targets.insert(index, target);
        }
        if let Some(t) = forward
            && t > index
        {
            self.wanted.insert(t);
        }
    }

    /// Number of elements in the list, header included.
    pub fn len(&self) -> u64 {
        self.count
    }

    /// Whether the list holds the header only.
    pub fn is_empty(&self) -> bool {
        self.count <= 1
    }

    fn target(&self, t: u64) -> Target {
        if t >= self.count {
            return Target::Missing;
        }
        self.targets.get(&t).cloned().unwrap_or(Target::Entry(None))
    }

    /// String ids that survive into the output unchanged (own ids of forward targets).
    fn surviving_ids(&self) -> impl Iterator<Item = &str> {
        self.targets.values().filter_map(|t| match t {
            Target::Entry(Some(Value::String(s))) => Some(s.as_str()),
            _ => None,
        })
    }
}

/// Per element: what a later `firstKeptEntryIndex` resolves to, in 8 bytes.
#[derive(Debug, Clone, Copy)]
struct Slot(u64);

const TAG: u64 = 3 << 62;
const OTHER: u64 = 0;
const SESSION: u64 = 1 << 62;
const SHORT: u64 = 2 << 62;
const LONG: u64 = 3 << 62;

/// A compaction waiting for its forward target (single pass only).
#[derive(Debug, Clone, Copy)]
struct Pending {
    compaction: u64,
    had_first_kept_id: bool,
}

/// Migrates the elements of one session's entry list as they stream past.
#[derive(Debug)]
pub struct Migrator {
    plan: Plan,
    drawer: IdDrawer,
    slots: Vec<Slot>,
    longs: Vec<Box<str>>,
    prev: Option<String>,
    lookahead: Option<Lookahead>,
    pending: HashMap<u64, Vec<Pending>>,
    notes: Vec<Note>,
    next_index: u64,
    exact: bool,
}

impl Migrator {
    /// A single-pass migrator for the session whose header fields are `header` (as read, before
    /// migration).
    pub fn new(header: &Map<String, Value>) -> Self {
        let session_id = header.get("id").and_then(Value::as_str).unwrap_or_default();
        Self {
            plan: Plan::for_header(header),
            drawer: IdDrawer::new(session_id),
            slots: vec![Slot(SESSION)],
            longs: Vec::new(),
            prev: None,
            lookahead: None,
            pending: HashMap::new(),
            notes: Vec::new(),
            next_index: 1,
            exact: true,
        }
    }

    /// An exact migrator: `lookahead` must come from the same elements.
    pub fn with_lookahead(header: &Map<String, Value>, lookahead: Lookahead) -> Self {
        let mut m = Self::new(header);
        for id in lookahead.surviving_ids() {
            m.drawer.reserve(id);
        }
        m.lookahead = Some(lookahead);
        m
    }

    /// The steps this session needs.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Whether pi would rewrite this session (false for v3 and later: every call is then a
    /// no-op and the file should be copied unchanged).
    pub fn needs_rewrite(&self) -> bool {
        self.plan.rewrite
    }

    /// Whether the output so far is exactly pi's (with pisess's ids); false only after a
    /// [`NoteKind::Inexact`] note.
    pub fn is_exact(&self) -> bool {
        self.exact
    }

    /// Migrates the header's fields in place (`version` set, or appended when absent).
    pub fn migrate_header(&self, header: &mut Map<String, Value>) {
        if self.plan.v1_to_v2 {
            set_version(header, 2);
        }
        if self.plan.v2_to_v3 {
            set_version(header, 3);
        }
    }

    /// Migrates element `index` of the entry list in place. Indexes must increase (gaps are
    /// treated as elements that are not objects).
    pub fn migrate_record(&mut self, value: &mut Value, index: u64) -> Result<(), MigrateError> {
        self.advance_to(index)?;
        if self.plan.v1_to_v2 {
            if self.lookahead.is_none() {
                self.check_pending(index, &target_of(value));
            }
            self.v1_step(value, index);
        }
        if self.plan.v2_to_v3 {
            v2_to_v3::migrate_entry(value);
        }
        Ok(())
    }

    /// Records that element `index` is written back unchanged without being loaded (see
    /// [`NoteKind::Unparsable`]): it stays out of the parent chain.
    pub fn pass_record(&mut self, index: u64) -> Result<(), MigrateError> {
        self.advance_to(index)?;
        if self.plan.v1_to_v2 {
            if self.lookahead.is_none() {
                self.check_pending(index, &Target::Entry(None));
            }
            self.slots.push(Slot(OTHER));
        }
        Ok(())
    }

    /// Notes produced since the last call.
    pub fn take_notes(&mut self) -> std::vec::Drain<'_, Note> {
        self.notes.drain(..)
    }

    /// Ends the stream: returns the last notes (forward targets that never arrived).
    pub fn finish(mut self) -> Vec<Note> {
        let mut left: Vec<_> = self.pending.drain().collect();
        left.sort_by_key(|(t, _)| *t);
        for (target, list) in left {
            for p in list {
                self.check_one(target, p, &Target::Missing);
            }
        }
        self.notes
    }

    fn advance_to(&mut self, index: u64) -> Result<(), MigrateError> {
        if index < self.next_index {
            return Err(MigrateError::IndexOrder {
                index,
                previous: self.next_index - 1,
            });
        }
        if self.plan.v1_to_v2 {
            while (self.slots.len() as u64) < index {
                self.slots.push(Slot(OTHER));
            }
        }
        self.next_index = index + 1;
        Ok(())
    }

    fn v1_step(&mut self, value: &mut Value, index: u64) {
        let Value::Object(obj) = value else {
            self.slots.push(Slot(OTHER));
            self.notes.push(Note {
                index,
                kind: NoteKind::NonObjectKept {
                    found: json_kind(value),
                },
            });
            return;
        };
        if v1_to_v2::is_type(obj, "session") {
            set_version(obj, 2);
            self.slots.push(Slot(SESSION));
            return;
        }
        let drawn = self.drawer.draw(index);
        let id = drawn.to_string();
        assign_ids(obj, &id, self.prev.as_deref());
        let slot = self.pack(drawn);
        self.slots.push(slot);
        if let Some(n) = first_kept_index(obj) {
            let (target, why) = match array_index(n) {
                None => (Target::Missing, Some(Unresolved::NotAnIndex)),
                Some(t) if t <= index => {
                    let target = self.slot_target(t);
                    let why = match target {
                        Target::Session => Some(Unresolved::Session),
                        Target::Entry(None) => Some(Unresolved::NotAnObject),
                        _ => None,
                    };
                    (target, why)
                }
                Some(t) => {
                    let target = match &self.lookahead {
                        Some(la) => la.target(t),
                        None => {
                            let had_first_kept_id = obj.contains_key("firstKeptEntryId");
                            self.pending.entry(t).or_default().push(Pending {
                                compaction: index,
                                had_first_kept_id,
                            });
                            Target::Entry(None)
                        }
                    };
                    let why = match target {
                        Target::Missing => Some(Unresolved::PastTheEnd),
                        Target::Session => Some(Unresolved::Session),
                        Target::Entry(None) => Some(Unresolved::Later),
                        Target::Entry(Some(_)) => None,
                    };
                    (target, why)
                }
            };
            if let Some(why) = why {
                self.notes.push(Note {
                    index,
                    kind: NoteKind::FirstKeptUnresolved { value: n, why },
                });
            }
            apply_first_kept(obj, target);
        }
        self.prev = Some(id);
    }

    fn pack(&mut self, id: DrawnId) -> Slot {
        match id {
            DrawnId::Short(n) => Slot(SHORT | u64::from(n)),
            DrawnId::Long(s) => {
                self.longs.push(s);
                Slot(LONG | (self.longs.len() as u64 - 1))
            }
        }
    }

    fn slot_target(&self, t: u64) -> Target {
        let Some(Slot(s)) = self.slots.get(t as usize).copied() else {
            return Target::Missing;
        };
        match s & TAG {
            SESSION => Target::Session,
            SHORT => Target::Entry(Some(Value::String(format!("{:08x}", s & 0xffff_ffff)))),
            LONG => {
                let long = self.longs.get((s & !TAG) as usize);
                Target::Entry(long.map(|l| Value::String(l.to_string())))
            }
            _ => Target::Entry(None),
        }
    }

    fn check_pending(&mut self, index: u64, actual: &Target) {
        if let Some(list) = self.pending.remove(&index) {
            for p in list {
                self.check_one(index, p, actual);
            }
        }
    }

    /// Whether the single-pass assumption (target = object without id) gave pi's output.
    fn check_one(&mut self, target: u64, p: Pending, actual: &Target) {
        let same = match actual {
            Target::Entry(None) => true,
            // Nothing written by pi; the key was removed here: same unless it existed.
            Target::Missing | Target::Session => !p.had_first_kept_id,
            Target::Entry(Some(_)) => false,
        };
        if !same {
            self.exact = false;
            self.notes.push(Note {
                index: p.compaction,
                kind: NoteKind::Inexact { target },
            });
        }
    }
}

/// The JSON kind of a value that is not an object.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(true) => "true",
        Value::Bool(false) => "false",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
