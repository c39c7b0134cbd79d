//! The outline: what `log` and `tree` print of each tree node, computed at import and stored in
//! compressed blocks, so that listing a session reads a few hundred values instead of decoding
//! every line.
//!
//! A block holds [`BLOCK_ROWS`] consecutive tree nodes of a session (file order; the last
//! block may hold fewer); `outline.v2` maps (session key, key of the block's first node, part)
//! to the block's bytes cut in parts that fill redb pages: the first [`FIRST_PART_BYTES`]
//! (an 8 KiB page; it holds the header, so building a session's tree reads one part per block),
//! the others [`PART_BYTES`] (4 KiB pages). A block of ~30 KB stored whole would take a 32 or
//! 64 KiB allocation. A row holds the
//! node's id, timestamp and parentId as the record has them, and the [`Facts`] of the entry
//! (type, role, model, summary, token estimate, boundary, whether the default `/tree` filter
//! hides it), or a mark that they need the line decoded.
//!
//! Invariants:
//! - blocks are a function of the session's rows alone: node `n` (0-based, file order) is row
//!   `n % BLOCK_ROWS` of block `n / BLOCK_ROWS`, and the bytes of a block depend only on its rows
//!   ([`BlockBuilder`]; LZ4 and zstd at a fixed level, both pinned versions), so an import in one go, an import in appends
//!   (the last block is extended and rewritten) and `verify --repair` write the same bytes;
//! - a row's facts equal [`Facts::from_value`] of the stored line; when they cannot be stored
//!   exactly (the line does not parse into a value, or a field is too long, or the value
//!   disagrees with the typed record) the row says so and readers decode the line instead; a
//!   summary is stored up to [`SUMMARY_CHARS`] characters, with a mark when it is longer;
//! - rows are written and removed with their records, in the same write transaction; `verify`
//!   recomputes every block from the records and `repair` rewrites those that differ;
//! - reading never recurses and never trusts lengths it has not checked: a damaged block is an
//!   error, not a panic.
//!
//! Block layout: a header (varints: rows, the plain and compressed lengths of the hot and the
//! cold frame, then each row's key as a delta from the previous one, the first from the
//! block's first key, then each row's time: 0 when it is no canonical ISO time, else 1 + the
//! zigzag of its milliseconds minus the previous row's), then the two frames. The hot frame (an
//! LZ4 block: every `log` and `tree` decodes it, LZ4 about 2.5 times faster than zstd, for
//! ~0.5 % more store) holds everything a listing prints at usual widths: the string arena (UTF-8: every string of every row, a summary up
//! to [`HOT_CHARS`] characters), the rows (varints and codes) and the arena's length (u32,
//! little endian). The cold frame (zstd) holds the rest of the longer summaries, up to
//! [`SUMMARY_CHARS`] characters, in row order; only `--json` and wide terminals read it. The
//! keys and times are outside the frames, so a session's tree, and the order `tree` prints it
//! in, are worked out without decompressing anything.

use pisess_formats::entry::Entry;
use pisess_formats::value::Field;
use redb::TableDefinition;
use serde_json::Value;

use crate::describe::Facts;
use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::{EntryKey, SessionKey};

/// Name of the outline table.
pub const OUTLINE_NAME: &str = "outline.v2";
/// (session key, first node key of the block, part) → that part of the block's bytes (see
/// the module docs).
pub const OUTLINE: TableDefinition<(u64, u64, u32), &[u8]> = TableDefinition::new(OUTLINE_NAME);
/// Bytes of a block per table row after the first: a leaf page of 4 KiB holds one with its key.
pub const PART_BYTES: usize = 4000;
/// Bytes of a block's first row: a leaf page of 8 KiB holds it with its key.
pub const FIRST_PART_BYTES: usize = 8100;
/// Nodes per block.
pub const BLOCK_ROWS: usize = 1024;
/// Characters of a summary stored; a longer summary is marked incomplete.
pub const SUMMARY_CHARS: usize = 512;
/// Characters of a summary in the hot frame: more than a line of `log` or `tree` shows at
/// widths up to about 110 columns.
pub const HOT_CHARS: usize = 96;
/// Longest id, timestamp or parent id (bytes) a row holds itself; longer ones are read from
/// the record.
const FIELD_MAX: usize = 4096;
/// zstd level of the cold frame (fixed: the bytes of a block are part of the store's content).
const ZSTD_LEVEL: i32 = 3;

// Row flags.
/// Only the parent mode is stored: id, time and parent come from the record, facts from the
/// line.
const F_RECORD: u64 = 1;
/// No facts: the line must be decoded to show the entry.
const F_RAW: u64 = 1 << 1;
/// Parent id mode (2 bits): missing, null, the previous row's id, a string.
const PARENT_SHIFT: u64 = 2;
const P_MISSING: u64 = 0;
const P_NULL: u64 = 1;
const P_PREV: u64 = 2;
const P_STR: u64 = 3;
/// Timestamp mode (2 bits): none, milliseconds of a canonical ISO time, a string.
const TS_SHIFT: u64 = 4;
const T_NONE: u64 = 0;
const T_MS: u64 = 1;
const T_STR: u64 = 2;
const F_MODEL: u64 = 1 << 6;
const F_BOUNDARY: u64 = 1 << 7;
/// The summary is stored whole (at most [`SUMMARY_CHARS`] characters).
const F_COMPLETE: u64 = 1 << 8;
const F_TOOL_ONLY: u64 = 1 << 9;
/// The summary is longer than [`HOT_CHARS`]: the rest is in the cold frame.
const F_TAIL: u64 = 1 << 10;
const FLAG_BITS: u64 = 11;

/// Entry types and roles stored as one-byte codes (0: none, 255: the string follows).
const TYPES: [&str; 11] = [
    "message",
    "compaction",
    "branch_summary",
    "custom_message",
    "model_change",
    "thinking_level_change",
    "label",
    "session_info",
    "context_edit",
    "custom",
    "usage",
];
const ROLES: [&str; 9] = [
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "system",
    "custom",
    "hookMessage",
    "branchSummary",
    "compactionSummary",
];
const CODE_STR: u8 = 255;

/// A record's `parentId` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentId<'a> {
    /// No `parentId` key.
    Missing,
    /// `"parentId": null`.
    Null,
    /// A string.
    Id(&'a str),
}

/// A record's `timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamp<'a> {
    /// None (missing or null).
    None,
    /// A canonical ISO time (`YYYY-MM-DDTHH:MM:SS.sssZ`), as Unix milliseconds.
    Ms(i64),
    /// Any other string.
    Text(&'a str),
}

impl Timestamp<'_> {
    /// The string as written (`None` when there is none).
    pub fn text(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Self::None => None,
            Self::Ms(ms) => Some(format_iso(*ms).into()),
            Self::Text(t) => Some((*t).into()),
        }
    }

    /// `new Date(timestamp).getTime()` (`None` for NaN or no timestamp), as `tree` orders
    /// siblings by it.
    pub fn date_ms(&self) -> Option<f64> {
        match self {
            Self::None => None,
            #[allow(clippy::cast_precision_loss)]
            Self::Ms(ms) => Some(*ms as f64),
            Self::Text(t) => {
                crate::agent::js::date_ms(Some(&Value::String((*t).to_owned()))).as_f64()
            }
        }
    }
}

/// What one node's row says (borrowed from its block).
#[derive(Debug, Clone, Copy)]
pub struct OutlineRow<'a> {
    /// The node.
    pub key: EntryKey,
    /// Its id.
    pub id: &'a str,
    /// Its timestamp as the record has it.
    pub timestamp: Timestamp<'a>,
    /// Its `parentId` field.
    pub parent_id: ParentId<'a>,
    /// What `log` and `tree` print; `None` when the line must be decoded for it.
    pub facts: Option<FactsRef<'a>>,
}

/// [`Facts`] as stored (borrowed from a block).
#[derive(Debug, Clone, Copy)]
pub struct FactsRef<'a> {
    /// The entry's `type`, when a string.
    pub entry_type: Option<&'a str>,
    /// The message role.
    pub role: Option<&'a str>,
    /// The model it names.
    pub model: Option<&'a str>,
    /// The summary, or when not `summary_complete` its first characters ([`HOT_CHARS`], or
    /// [`SUMMARY_CHARS`] when the block was read with its cold frame).
    pub summary: &'a str,
    /// Whether `summary` is the whole summary.
    pub summary_complete: bool,
    /// Estimated tokens.
    pub tokens: u64,
    /// The context boundary text.
    pub boundary: Option<&'a str>,
    /// Hidden by pi's default `/tree` filter unless it is the leaf.
    pub tool_only: bool,
}

impl FactsRef<'_> {
    /// The entry type as listings show it (`?` when it has none).
    pub fn entry_type(&self) -> &str {
        self.entry_type.unwrap_or("?")
    }

    /// What the entry is: the role for messages, else the entry type.
    pub fn kind(&self) -> &str {
        match self.entry_type() {
            "message" => self.role.unwrap_or("message"),
            t => t,
        }
    }
}

// ---- writing ------------------------------------------------------------------------------

/// A node's row as the import hands it over.
#[derive(Debug, Clone, Copy)]
pub struct RowIn<'a> {
    /// The node's key.
    pub key: u64,
    /// Its id.
    pub id: &'a str,
    /// Its timestamp string.
    pub timestamp: Option<&'a str>,
    /// Its `parentId` field.
    pub parent_id: ParentId<'a>,
    /// Its facts (`None`: decode the line to show it).
    pub facts: Option<&'a Facts>,
}

/// What the outline needs of a node besides its key, id and timestamp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The `parentId` field: 0 missing, 1 null, 2 a string.
    pub parent_field: u8,
    /// The facts, when they are exact (see the module invariants).
    pub facts: Option<Facts>,
}

impl NodeFacts {
    /// The facts of the record `json` whose typed view is `e`: from the typed view when it can
    /// give them, else from the parsed value (`None` when the value does not parse or disagrees
    /// with the typed record on id, type, timestamp or parentId).
    pub fn of(json: &str, e: &Entry<'_>) -> Self {
        let parent_field = match &e.parent_id {
            Field::Missing => 0,
            Field::Null => 1,
            Field::Value(_) => 2,
        };
        let facts = Facts::from_entry(e, json).or_else(|| {
            let v: Value = pisess_formats::value::parse_owned(json).ok()?;
            let str_or_none = |k: &str| match v.get(k) {
                None | Some(Value::Null) => Some(None),
                Some(Value::String(s)) => Some(Some(s.as_str())),
                Some(_) => None,
            };
            let agrees = v.get("id").and_then(Value::as_str) == e.id()
                && v.get("type").and_then(Value::as_str) == e.type_name.get().map(|t| t.as_str())
                && str_or_none("timestamp")? == e.timestamp.get().map(|t| t.as_str())
                && str_or_none("parentId")? == e.parent_id()
                && (v.get("parentId").is_some() == e.parent_id.is_present());
            agrees.then(|| Facts::from_value(&v))
        });
        Self {
            parent_field,
            facts,
        }
    }

    /// The `parentId` of a node whose parent id string is `parent`.
    pub fn parent_id<'a>(&self, parent: Option<&'a str>) -> ParentId<'a> {
        match (self.parent_field, parent) {
            (_, Some(p)) => ParentId::Id(p),
            (1, None) => ParentId::Null,
            _ => ParentId::Missing,
        }
    }
}

/// Builds one block, row by row (see the module docs for the layout).
#[derive(Debug, Clone)]
pub struct BlockBuilder {
    first_key: u64,
    prev_key: u64,
    prev_ms: i64,
    prev_id: Option<String>,
    rows: usize,
    /// The rows' key deltas (varints).
    keys: Vec<u8>,
    /// The rows' times (varints, see the module docs).
    times: Vec<u8>,
    arena: String,
    fields: Vec<u8>,
    cold: String,
}

impl BlockBuilder {
    /// An empty block whose first node will be `first_key`.
    pub fn new(first_key: u64) -> Self {
        Self {
            first_key,
            prev_key: first_key,
            prev_ms: 0,
            prev_id: None,
            rows: 0,
            keys: Vec::new(),
            times: Vec::new(),
            arena: String::new(),
            fields: Vec::new(),
            cold: String::new(),
        }
    }

    /// Continues the stored block `value` (whose first node is `first_key`).
    pub fn resume(first_key: u64, value: &[u8]) -> Result<Self, OutlineError> {
        let h = Header::parse(first_key, value)?;
        let (arena, fields) = h.hot(value)?;
        let cold = h.cold(value)?;
        let mut b = Self::new(first_key);
        let mut r = Reader::new(&fields);
        let mut walk = Walk::default();
        let mut extras = Vec::new();
        for (&key, &ms) in h.keys.iter().zip(&h.times) {
            let row = walk.row(key, ms, &mut r, &arena, &mut extras)?;
            b.push_key(key);
            b.push_time(ms);
            b.prev_id = if u64::from(row.flags) & F_RECORD != 0 {
                None
            } else {
                Some(arena_str(&arena, row.id)?.to_owned())
            };
        }
        if r.pos != fields.len() || walk.at != arena.len() as u64 || walk.tail != cold.len() as u64
        {
            return Err(OutlineError::Malformed("trailing bytes"));
        }
        b.fields = fields;
        b.arena = arena;
        b.cold = cold;
        Ok(b)
    }

    fn push_time(&mut self, ms: Option<i64>) {
        match ms {
            Some(ms) => {
                put_varint(&mut self.times, zigzag(ms.wrapping_sub(self.prev_ms)) + 1);
                self.prev_ms = ms;
            }
            None => self.times.push(0),
        }
    }

    fn push_key(&mut self, key: u64) {
        put_varint(&mut self.keys, key.wrapping_sub(self.prev_key));
        self.prev_key = key;
        self.rows += 1;
    }

    /// Rows in the block.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// Whether the block has no row.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Adds `row` to the open block `open`, starting one at the row's key when there is none;
    /// returns the block when that filled it (`open` is then empty), so that the blocks are
    /// cut in the same places however the rows are fed.
    pub fn push_into(open: &mut Option<Self>, row: &RowIn<'_>) -> Option<Self> {
        let b = open.get_or_insert_with(|| Self::new(row.key));
        b.push(row);
        if b.is_full() { open.take() } else { None }
    }

    /// Whether the block is full.
    pub fn is_full(&self) -> bool {
        self.rows >= BLOCK_ROWS
    }

    /// The key of the block's first node.
    pub fn first_key(&self) -> u64 {
        self.first_key
    }

    /// Adds the next node (keys ascending).
    pub fn push(&mut self, row: &RowIn<'_>) {
        self.push_key(row.key);
        let long = |s: Option<&str>| s.is_some_and(|s| s.len() > FIELD_MAX);
        let parent_str = match row.parent_id {
            ParentId::Id(p) => Some(p),
            _ => None,
        };
        let parent_mode = match row.parent_id {
            ParentId::Missing => P_MISSING,
            ParentId::Null => P_NULL,
            ParentId::Id(p) if self.prev_id.as_deref() == Some(p) => P_PREV,
            ParentId::Id(_) => P_STR,
        };
        if long(Some(row.id)) || long(row.timestamp) || long(parent_str) {
            // The strings are read from the record; the mode tells a missing parentId from null.
            let mode = if parent_mode == P_NULL {
                P_NULL
            } else {
                P_MISSING
            };
            put_varint(&mut self.fields, F_RECORD | (mode << PARENT_SHIFT));
            self.push_time(None);
            self.prev_id = None;
            return;
        }
        let ts = row.timestamp.map(|t| (t, iso_canonical(t)));
        let ts_mode = match ts {
            None => T_NONE,
            Some((_, Some(_))) => T_MS,
            Some((_, None)) => T_STR,
        };
        let facts = row.facts.filter(|f| {
            !long(f.entry_type.as_deref())
                && !long(f.role.as_deref())
                && !long(f.model.as_deref())
                && !long(f.boundary.as_deref())
        });
        let mut flags = (parent_mode << PARENT_SHIFT) | (ts_mode << TS_SHIFT);
        let (mut hot, mut tail) = ("", "");
        match facts {
            None => flags |= F_RAW,
            Some(f) => {
                let (kept, complete) = clip_chars(&f.summary, SUMMARY_CHARS);
                let (h, whole) = clip_chars(kept, HOT_CHARS);
                hot = h;
                if !whole {
                    tail = &kept[h.len()..];
                    flags |= F_TAIL;
                }
                if complete {
                    flags |= F_COMPLETE;
                }
                if f.model.is_some() {
                    flags |= F_MODEL;
                }
                if f.boundary.is_some() {
                    flags |= F_BOUNDARY;
                }
                if f.tool_only {
                    flags |= F_TOOL_ONLY;
                }
            }
        }
        put_varint(&mut self.fields, flags);
        self.put_str(row.id);
        self.push_time(ts.and_then(|(_, ms)| ms));
        if let Some((t, None)) = ts {
            self.put_str(t);
        }
        if parent_mode == P_STR
            && let Some(p) = parent_str
        {
            self.put_str(p);
        }
        if let Some(f) = facts {
            self.put_code(f.entry_type.as_deref(), &TYPES);
            self.put_code(f.role.as_deref(), &ROLES);
            put_varint(&mut self.fields, f.tokens);
            if let Some(m) = &f.model {
                self.put_str(m);
            }
            self.put_str(hot);
            if flags & F_TAIL != 0 {
                put_varint(&mut self.fields, tail.len() as u64);
                self.cold.push_str(tail);
            }
            if let Some(b) = &f.boundary {
                self.put_str(b);
            }
        }
        self.prev_id = Some(row.id.to_owned());
    }

    fn put_str(&mut self, s: &str) {
        put_varint(&mut self.fields, s.len() as u64);
        self.arena.push_str(s);
    }

    fn put_code(&mut self, s: Option<&str>, known: &[&str]) {
        match s {
            None => self.fields.push(0),
            Some(s) => match known.iter().position(|k| *k == s) {
                #[allow(clippy::cast_possible_truncation)]
                Some(i) => self.fields.push(i as u8 + 1),
                None => {
                    self.fields.push(CODE_STR);
                    self.put_str(s);
                }
            },
        }
    }

    /// The stored value of the block.
    pub fn encode(&self) -> Result<Vec<u8>, OutlineError> {
        let mut hot = Vec::with_capacity(self.arena.len() + self.fields.len() + 4);
        hot.extend_from_slice(self.arena.as_bytes());
        hot.extend_from_slice(&self.fields);
        let arena_len =
            u32::try_from(self.arena.len()).map_err(|_| OutlineError::Malformed("arena size"))?;
        hot.extend_from_slice(&arena_len.to_le_bytes());
        let hot_z = lz4_flex::block::compress(&hot);
        let cold_z = if self.cold.is_empty() {
            Vec::new()
        } else {
            zstd::bulk::compress(self.cold.as_bytes(), ZSTD_LEVEL).map_err(OutlineError::Zstd)?
        };
        let mut out = Vec::with_capacity(
            hot_z.len() + cold_z.len() + self.keys.len() + self.times.len() + 24,
        );
        for v in [
            self.rows,
            hot.len(),
            hot_z.len(),
            self.cold.len(),
            cold_z.len(),
        ] {
            put_varint(&mut out, v as u64);
        }
        out.extend_from_slice(&self.keys);
        out.extend_from_slice(&self.times);
        out.extend_from_slice(&hot_z);
        out.extend_from_slice(&cold_z);
        Ok(out)
    }
}

/// `s` cut to at most `max` characters, and whether it was whole.
fn clip_chars(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, true);
    }
    match s.char_indices().nth(max) {
        Some((i, _)) => (&s[..i], false),
        None => (s, true),
    }
}

// ---- reading ------------------------------------------------------------------------------

/// Why a stored block could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutlineError {
    /// The block is not what the writer writes.
    #[error("malformed outline block ({0})")]
    Malformed(&'static str),
    /// zstd failed.
    #[error("outline block compression")]
    Zstd(#[source] std::io::Error),
    /// The hot frame's LZ4 block is damaged.
    #[error("outline block: the hot frame's LZ4 data is damaged")]
    Lz4(#[source] lz4_flex::block::DecompressError),
}

/// A block's header (see the module docs).
struct Header {
    keys: Vec<u64>,
    /// Milliseconds of the rows whose time is a canonical ISO time.
    times: Vec<Option<i64>>,
    hot_plain: usize,
    hot: std::ops::Range<usize>,
    cold_plain: usize,
    cold: std::ops::Range<usize>,
}

/// Appends the row keys of a block and their times ([`NO_MS`] when not canonical) to `keys` and
/// `times`, from the start of its bytes; `Ok(false)` (nothing appended) when `bytes` ends
/// before the header does.
fn header_keys_into(
    first_key: u64,
    bytes: &[u8],
    keys: &mut Vec<u64>,
    times: &mut Vec<i64>,
) -> Result<bool, OutlineError> {
    let (k, t) = (keys.len(), times.len());
    match Header::parse_keys_into(first_key, bytes, keys, |ms| {
        times.push(ms.unwrap_or(NO_MS));
    }) {
        Ok(_) => Ok(true),
        Err(e) => {
            keys.truncate(k);
            times.truncate(t);
            match e {
                OutlineError::Malformed("truncated") => Ok(false),
                e => Err(e),
            }
        }
    }
}

impl Header {
    /// The keys, the times, the four frame lengths and where the frames start.
    #[allow(clippy::type_complexity)]
    fn parse_keys(
        first_key: u64,
        value: &[u8],
    ) -> Result<(Vec<u64>, Vec<Option<i64>>, [usize; 4], usize), OutlineError> {
        let mut keys = Vec::with_capacity(BLOCK_ROWS);
        let mut times = Vec::with_capacity(BLOCK_ROWS);
        let (lens, at) = Self::parse_keys_into(first_key, value, &mut keys, |t| times.push(t))?;
        Ok((keys, times, lens, at))
    }

    /// [`Header::parse_keys`], appending the keys to `keys` and handing each time to `time`;
    /// on an error, some keys may have been appended.
    fn parse_keys_into(
        first_key: u64,
        value: &[u8],
        keys: &mut Vec<u64>,
        mut time: impl FnMut(Option<i64>),
    ) -> Result<([usize; 4], usize), OutlineError> {
        let mut r = Reader::new(value);
        let n = r.varint()?;
        if n == 0 || n > BLOCK_ROWS as u64 {
            return Err(OutlineError::Malformed("row count"));
        }
        let mut len = || -> Result<usize, OutlineError> {
            usize::try_from(r.varint()?).map_err(|_| OutlineError::Malformed("length"))
        };
        let lens = [len()?, len()?, len()?, len()?];
        #[allow(clippy::cast_possible_truncation)]
        keys.reserve(n as usize);
        let mut prev = first_key;
        for i in 0..n {
            let d = r.varint()?;
            if (i == 0) != (d == 0) {
                return Err(OutlineError::Malformed("keys out of order"));
            }
            prev = prev.checked_add(d).ok_or(OutlineError::Malformed("key"))?;
            keys.push(prev);
        }
        let mut ms = 0i64;
        for _ in 0..n {
            time(match r.varint()? {
                0 => None,
                v => {
                    ms = ms.wrapping_add(unzigzag(v - 1));
                    Some(ms)
                }
            });
        }
        Ok((lens, r.pos))
    }

    fn parse(first_key: u64, value: &[u8]) -> Result<Self, OutlineError> {
        let h = Self::parse_prefix(first_key, value)?;
        if h.cold.end != value.len() {
            return Err(OutlineError::Malformed("frame lengths"));
        }
        Ok(h)
    }

    /// [`Header::parse`] of the first bytes of a block (at least its header): the frames'
    /// ranges are not checked against the block's length.
    fn parse_prefix(first_key: u64, value: &[u8]) -> Result<Self, OutlineError> {
        let (keys, times, [hot_plain, hot_z, cold_plain, cold_z], at) =
            Self::parse_keys(first_key, value)?;
        let hot = at..at.saturating_add(hot_z);
        let cold = hot.end..hot.end.saturating_add(cold_z);
        if (cold_plain == 0) != (cold_z == 0) {
            return Err(OutlineError::Malformed("frame lengths"));
        }
        Ok(Self {
            keys,
            times,
            hot_plain,
            hot,
            cold_plain,
            cold,
        })
    }

    /// The hot frame: the arena and the rows' fields.
    fn hot(&self, value: &[u8]) -> Result<(String, Vec<u8>), OutlineError> {
        let frame = &value[self.hot.clone()];
        // An LZ4 block expands at most ~255 times: a damaged length never allocates more.
        if self.hot_plain > frame.len().saturating_mul(255) {
            return Err(OutlineError::Malformed("hot frame length"));
        }
        // lz4_flex's bounds-checked fast decoder (not `unchecked-decode`; 0.11.7 has the fix
        // for RUSTSEC-2026-0041, reads of uninitialised output on bad offsets) writes into
        // fresh capacity, without zeroing the buffer first.
        let mut plain =
            lz4_flex::block::decompress(frame, self.hot_plain).map_err(OutlineError::Lz4)?;
        if plain.len() != self.hot_plain {
            return Err(OutlineError::Malformed("hot frame length"));
        }
        let tail: [u8; 4] = plain
            .get(plain.len().saturating_sub(4)..)
            .and_then(|t| t.try_into().ok())
            .ok_or(OutlineError::Malformed("no arena length"))?;
        let arena_len = u32::from_le_bytes(tail) as usize;
        if arena_len > plain.len() - 4 {
            return Err(OutlineError::Malformed("arena length"));
        }
        let fields = plain[arena_len..plain.len() - 4].to_vec();
        plain.truncate(arena_len);
        // The rows' bytes after the arena are copied out above; giving their room back lets
        // the next allocation reuse it (`tree` keeps every block's arena).
        plain.shrink_to_fit();
        let arena = String::from_utf8(plain).map_err(|_| OutlineError::Malformed("arena text"))?;
        Ok((arena, fields))
    }

    /// The cold frame: the rest of the long summaries.
    fn cold(&self, value: &[u8]) -> Result<String, OutlineError> {
        if self.cold_plain == 0 {
            return Ok(String::new());
        }
        let plain = crate::record::decompress(&value[self.cold.clone()], self.cold_plain as u64)
            .map_err(OutlineError::Zstd)?;
        String::from_utf8(plain).map_err(|_| OutlineError::Malformed("cold text"))
    }
}

/// A span of a block's arena.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn pack(self) -> u64 {
        (u64::from(self.start) << 32) | u64::from(self.len)
    }
    #[allow(clippy::cast_possible_truncation)]
    fn unpack(v: u64) -> Self {
        Self {
            start: (v >> 32) as u32,
            len: v as u32,
        }
    }
}

/// One decoded row (positions into the block's arena); 64 bytes.
#[derive(Debug, Clone, Copy, Default)]
struct RowPos {
    key: u64,
    /// Milliseconds (`T_MS`) or the packed span of the timestamp string (`T_STR`).
    time: u64,
    tokens: u64,
    flags: u16,
    type_code: u8,
    role_code: u8,
    /// Index into the block's `extras` (`u32::MAX`: none).
    extra: u32,
    id: Span,
    parent: Span,
    model: Span,
    summary: Span,
}

/// The less common parts of a row: type and role when not coded, boundary, and where the
/// summary's rest is.
#[derive(Debug, Clone, Copy, Default)]
struct Extra {
    type_s: Span,
    role_s: Span,
    boundary: Span,
    /// The rest of the summary in the cold frame.
    tail: Span,
    /// The whole stored summary in the block's `full` arena (when the cold frame was read).
    full: Span,
}

/// A block, decoded.
#[derive(Debug, Clone)]
pub struct OutlineBlock {
    arena: String,
    rows: Vec<RowPos>,
    extras: Vec<Extra>,
    /// Long summaries joined with their rest (empty unless `cold`).
    full: String,
    /// Whether the cold frame was read.
    cold: bool,
}

fn arena_str(arena: &str, s: Span) -> Result<&str, OutlineError> {
    arena
        .get(s.start as usize..s.start as usize + s.len as usize)
        .ok_or(OutlineError::Malformed("string span"))
}

struct Reader<'b> {
    b: &'b [u8],
    pos: usize,
}

impl<'b> Reader<'b> {
    fn new(b: &'b [u8]) -> Self {
        Self { b, pos: 0 }
    }
    fn varint(&mut self) -> Result<u64, OutlineError> {
        // Most varints of a block (string lengths, codes, key deltas) are one byte.
        if let Some(&byte) = self.b.get(self.pos)
            && byte < 0x80
        {
            self.pos += 1;
            return Ok(u64::from(byte));
        }
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let byte = *self
                .b
                .get(self.pos)
                .ok_or(OutlineError::Malformed("truncated"))?;
            self.pos += 1;
            if shift >= 64 {
                return Err(OutlineError::Malformed("varint"));
            }
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }
    fn byte(&mut self) -> Result<u8, OutlineError> {
        let byte = *self
            .b
            .get(self.pos)
            .ok_or(OutlineError::Malformed("truncated"))?;
        self.pos += 1;
        Ok(byte)
    }
}

/// Decoding state across a block's rows.
#[derive(Default)]
struct Walk {
    prev_id: Option<Span>,
    /// Bytes of the arena and of the cold frame used so far.
    at: u64,
    tail: u64,
}

impl Walk {
    fn span(&mut self, r: &mut Reader<'_>, arena: &str) -> Result<Span, OutlineError> {
        let len = r.varint()?;
        let start = self.at;
        self.at = self.at.saturating_add(len);
        if self.at > arena.len() as u64 {
            return Err(OutlineError::Malformed("string length"));
        }
        #[allow(clippy::cast_possible_truncation)]
        Ok(Span {
            start: start as u32,
            len: len as u32,
        })
    }

    fn code(
        &mut self,
        r: &mut Reader<'_>,
        arena: &str,
        known: usize,
    ) -> Result<(u8, Span), OutlineError> {
        let c = r.byte()?;
        Ok(match c {
            CODE_STR => (c, self.span(r, arena)?),
            c if usize::from(c) <= known => (c, Span::default()),
            _ => return Err(OutlineError::Malformed("code")),
        })
    }

    fn row(
        &mut self,
        key: u64,
        ms: Option<i64>,
        r: &mut Reader<'_>,
        arena: &str,
        extras: &mut Vec<Extra>,
    ) -> Result<RowPos, OutlineError> {
        let flags = r.varint()?;
        if flags >> FLAG_BITS != 0 {
            return Err(OutlineError::Malformed("flags"));
        }
        #[allow(clippy::cast_possible_truncation)]
        let mut row = RowPos {
            key,
            flags: flags as u16,
            extra: u32::MAX,
            ..RowPos::default()
        };
        if flags & F_RECORD != 0 {
            if ms.is_some() {
                return Err(OutlineError::Malformed("time"));
            }
            self.prev_id = None;
            return Ok(row);
        }
        row.id = self.span(r, arena)?;
        match ((flags >> TS_SHIFT) & 3, ms) {
            (T_MS, Some(ms)) => row.time = ms as u64,
            (T_STR, None) => row.time = self.span(r, arena)?.pack(),
            (T_NONE, None) => {}
            _ => return Err(OutlineError::Malformed("time")),
        }
        match (flags >> PARENT_SHIFT) & 3 {
            P_STR => row.parent = self.span(r, arena)?,
            P_PREV => {
                row.parent = self
                    .prev_id
                    .ok_or(OutlineError::Malformed("no previous row"))?;
            }
            _ => {}
        }
        if flags & F_RAW == 0 {
            let mut extra = Extra::default();
            (row.type_code, extra.type_s) = self.code(r, arena, TYPES.len())?;
            (row.role_code, extra.role_s) = self.code(r, arena, ROLES.len())?;
            row.tokens = r.varint()?;
            if flags & F_MODEL != 0 {
                row.model = self.span(r, arena)?;
            }
            row.summary = self.span(r, arena)?;
            if flags & F_TAIL != 0 {
                let len = r.varint()?;
                #[allow(clippy::cast_possible_truncation)]
                {
                    extra.tail = Span {
                        start: self.tail as u32,
                        len: len as u32,
                    };
                }
                self.tail = self.tail.saturating_add(len);
            }
            if flags & F_BOUNDARY != 0 {
                extra.boundary = self.span(r, arena)?;
            }
            if row.type_code == CODE_STR
                || row.role_code == CODE_STR
                || flags & (F_BOUNDARY | F_TAIL) != 0
            {
                row.extra =
                    u32::try_from(extras.len()).map_err(|_| OutlineError::Malformed("extras"))?;
                extras.push(extra);
            }
        } else if flags & (F_MODEL | F_BOUNDARY | F_COMPLETE | F_TOOL_ONLY | F_TAIL) != 0 {
            return Err(OutlineError::Malformed("flags"));
        }
        self.prev_id = Some(row.id);
        Ok(row)
    }
}

/// The first node key and the row keys of a stored block, from its header alone.
pub fn block_keys(first_key: u64, value: &[u8]) -> Result<Vec<u64>, OutlineError> {
    Header::parse(first_key, value).map(|h| h.keys)
}

impl OutlineBlock {
    /// Decodes a stored block whose first node is `first_key`; with `cold`, its long summaries
    /// whole (up to [`SUMMARY_CHARS`]), else up to [`HOT_CHARS`] characters.
    pub fn decode(first_key: u64, value: &[u8], cold: bool) -> Result<Self, OutlineError> {
        Self::decode_parsed(Header::parse(first_key, value)?, value, cold)
    }

    /// [`OutlineBlock::decode`] with the header parsed; without `cold`, `value` may end after
    /// the hot frame.
    fn decode_parsed(h: Header, value: &[u8], cold: bool) -> Result<Self, OutlineError> {
        if value.len() < h.hot.end || (cold && value.len() < h.cold.end) {
            return Err(OutlineError::Malformed("frame lengths"));
        }
        let (arena, fields) = h.hot(value)?;
        let mut r = Reader::new(&fields);
        let mut walk = Walk::default();
        let mut rows = Vec::with_capacity(h.keys.len());
        let mut extras = Vec::new();
        for (&key, &ms) in h.keys.iter().zip(&h.times) {
            rows.push(walk.row(key, ms, &mut r, &arena, &mut extras)?);
        }
        if r.pos != fields.len()
            || walk.at != arena.len() as u64
            || walk.tail != h.cold_plain as u64
        {
            return Err(OutlineError::Malformed("trailing bytes"));
        }
        let mut full = String::new();
        if cold && h.cold_plain > 0 {
            let rest = h.cold(value)?;
            for row in &rows {
                if u64::from(row.flags) & F_TAIL == 0 {
                    continue;
                }
                let e = &mut extras[row.extra as usize];
                let start = full.len();
                full.push_str(arena_str(&arena, row.summary)?);
                full.push_str(arena_str(&rest, e.tail)?);
                #[allow(clippy::cast_possible_truncation)]
                {
                    e.full = Span {
                        start: start as u32,
                        len: (full.len() - start) as u32,
                    };
                }
            }
        }
        // Grown by doubling: the unused half of its last growth is given back.
        extras.shrink_to_fit();
        Ok(Self {
            arena,
            rows,
            extras,
            full,
            cold,
        })
    }

    /// [`OutlineBlock::decode`] of session `s`'s block `first`, a damaged block reported as
    /// the store's inconsistency. Rows whose id or time is left to the record
    /// ([`Snapshot::outline_bytes`] gives the bytes; no snapshot is needed, so blocks decode on
    /// any thread) have empty ids and no facts.
    pub fn decode_stored(
        s: SessionKey,
        first: u64,
        value: &[u8],
        cold: bool,
    ) -> Result<Self, StoreError> {
        Self::decode(first, value, cold).map_err(|e| corrupt(s, first, &e))
    }

    /// Rows in the block.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the block has no rows (never, for a stored block).
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The key of the first and the last node.
    fn bounds(&self) -> (u64, u64) {
        (
            self.rows.first().map_or(0, |r| r.key),
            self.rows.last().map_or(0, |r| r.key),
        )
    }

    /// The index of the row of `key`.
    pub fn find(&self, key: EntryKey) -> Option<usize> {
        self.rows.binary_search_by_key(&key.0, |r| r.key).ok()
    }

    /// The key of row `i`.
    pub fn key(&self, i: usize) -> EntryKey {
        EntryKey(self.rows[i].key)
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> OutlineRow<'_> {
        let r = &self.rows[i];
        let s = |sp: Span| arena_str(&self.arena, sp).unwrap_or("");
        let extra = self
            .extras
            .get(r.extra as usize)
            .copied()
            .unwrap_or_default();
        let code = |c: u8, sp: Span, known: &[&'static str]| -> Option<&str> {
            match c {
                0 => None,
                CODE_STR => Some(s(sp)),
                c => known.get(usize::from(c) - 1).copied(),
            }
        };
        let flags = u64::from(r.flags);
        let timestamp = match (flags >> TS_SHIFT) & 3 {
            T_MS => Timestamp::Ms(r.time as i64),
            T_STR => Timestamp::Text(s(Span::unpack(r.time))),
            _ => Timestamp::None,
        };
        let parent_id = match (flags >> PARENT_SHIFT) & 3 {
            P_MISSING => ParentId::Missing,
            P_NULL => ParentId::Null,
            _ => ParentId::Id(s(r.parent)),
        };
        let facts = (flags & (F_RAW | F_RECORD) == 0).then(|| {
            let (summary, summary_complete) = match (flags & F_TAIL != 0, self.cold) {
                (false, _) => (s(r.summary), true),
                (true, false) => (s(r.summary), false),
                (true, true) => (
                    arena_str(&self.full, extra.full).unwrap_or(""),
                    flags & F_COMPLETE != 0,
                ),
            };
            FactsRef {
                entry_type: code(r.type_code, extra.type_s, &TYPES),
                role: code(r.role_code, extra.role_s, &ROLES),
                model: (flags & F_MODEL != 0).then(|| s(r.model)),
                summary,
                summary_complete,
                tokens: r.tokens,
                boundary: (flags & F_BOUNDARY != 0).then(|| s(extra.boundary)),
                tool_only: flags & F_TOOL_ONLY != 0,
            }
        });
        OutlineRow {
            key: EntryKey(r.key),
            id: s(r.id),
            timestamp,
            parent_id,
            facts,
        }
    }

    /// Fills in the rows that keep only their key (long ids or times) from the records.
    fn fill_from_records(&mut self, snap: &Snapshot) -> Result<(), StoreError> {
        for i in 0..self.rows.len() {
            if u64::from(self.rows[i].flags) & F_RECORD == 0 {
                continue;
            }
            let key = self.rows[i].key;
            let got = snap.with_entry(EntryKey(key), |a| {
                (
                    a.id.as_ref().map(|s| s.as_str().to_owned()),
                    a.timestamp.as_ref().map(|s| s.as_str().to_owned()),
                    a.parent_id.as_ref().map(|s| s.as_str().to_owned()),
                )
            })?;
            let Some((id, ts, parent)) = got else {
                return Err(StoreError::Inconsistent(format!(
                    "the outline lists entry {key}, which is not stored"
                )));
            };
            let mut push = |t: &str| -> Span {
                let start = self.arena.len();
                self.arena.push_str(t);
                #[allow(clippy::cast_possible_truncation)]
                Span {
                    start: start as u32,
                    len: t.len() as u32,
                }
            };
            let row = &mut self.rows[i];
            row.id = push(id.as_deref().unwrap_or(""));
            if let Some(t) = ts {
                row.time = push(&t).pack();
                row.flags |= (T_STR << TS_SHIFT) as u16;
            }
            if let Some(p) = parent {
                row.parent = push(&p);
                row.flags =
                    (row.flags & !((3 << PARENT_SHIFT) as u16)) | (P_STR << PARENT_SHIFT) as u16;
            }
        }
        Ok(())
    }
}

/// Every node of a session, from its outline, in file order.
#[derive(Debug, Clone, Default)]
pub struct Outline {
    blocks: Vec<OutlineBlock>,
    /// Index of the first row of each block.
    starts: Vec<usize>,
    len: usize,
}

impl Outline {
    /// Nodes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the session has no node.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn locate(&self, i: usize) -> (usize, usize) {
        let b = self.starts.partition_point(|&s| s <= i) - 1;
        (b, i - self.starts[b])
    }

    /// Node `i` (file order).
    pub fn row(&self, i: usize) -> OutlineRow<'_> {
        let (b, j) = self.locate(i);
        self.blocks[b].row(j)
    }

    /// The key of node `i`.
    pub fn key(&self, i: usize) -> EntryKey {
        let (b, j) = self.locate(i);
        self.blocks[b].key(j)
    }
}

fn corrupt(s: SessionKey, first: u64, e: &OutlineError) -> StoreError {
    StoreError::Inconsistent(format!(
        "{OUTLINE_NAME}: block ({s}, {first}) cannot be read: {e}"
    ))
}

impl Snapshot {
    /// The stored bytes of session `s`'s block whose first node is `first` (its parts joined),
    /// for [`OutlineBlock::decode_stored`].
    pub fn outline_bytes(&self, s: SessionKey, first: u64) -> Result<Vec<u8>, StoreError> {
        let mut out = Vec::with_capacity(16 * PART_BYTES);
        self.outline_parts(s, first, |part| {
            out.extend_from_slice(part);
            Ok(true)
        })?;
        Ok(out)
    }

    /// Hands the parts of session `s`'s block `first` to `each` in order, until it returns
    /// `false`; a missing part is an error.
    fn outline_parts(
        &self,
        s: SessionKey,
        first: u64,
        mut each: impl FnMut(&[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        for (i, row) in self
            .outline
            .range((s.0, first, 0)..=(s.0, first, u32::MAX))?
            .enumerate()
        {
            let (k, v) = row?;
            if k.value().2 as usize != i {
                return Err(corrupt(s, first, &OutlineError::Malformed("missing part")));
            }
            if !each(v.value())? {
                break;
            }
        }
        Ok(())
    }

    /// Session `s`'s block whose first node is `first`, decoded ([`OutlineBlock::decode`]).
    /// Without `cold`, only the parts up to the end of the hot frame are read: the header
    /// (in the first part) says where it ends.
    pub fn outline_block(
        &self,
        s: SessionKey,
        first: u64,
        cold: bool,
    ) -> Result<OutlineBlock, StoreError> {
        if cold {
            let bytes = self.outline_bytes(s, first)?;
            return OutlineBlock::decode_stored(s, first, &bytes, true);
        }
        let mut out = Vec::with_capacity(16 * PART_BYTES);
        let mut header: Option<Header> = None;
        self.outline_parts(s, first, |part| {
            out.extend_from_slice(part);
            if header.is_none() {
                // A header cut by the end of the part (not written so) is read on from the
                // next part.
                match Header::parse_prefix(first, &out) {
                    Ok(h) => header = Some(h),
                    Err(OutlineError::Malformed("truncated")) => return Ok(true),
                    Err(e) => return Err(corrupt(s, first, &e)),
                }
            }
            Ok(header.as_ref().is_none_or(|h| out.len() < h.hot.end))
        })?;
        let h = header.ok_or_else(|| corrupt(s, first, &OutlineError::Malformed("truncated")))?;
        OutlineBlock::decode_parsed(h, &out, false).map_err(|e| corrupt(s, first, &e))
    }

    /// Every stored block of session `s`: (first node key, bytes), in key order.
    fn outline_raw(&self, s: SessionKey) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut raw: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut next_part = 0u32;
        for row in self
            .outline
            .range((s.0, 0, 0)..=(s.0, u64::MAX, u32::MAX))?
        {
            let (k, v) = row?;
            let (_, f, part) = k.value();
            match raw.last_mut() {
                Some((first, bytes)) if *first == f => {
                    if part != next_part {
                        return Err(corrupt(s, f, &OutlineError::Malformed("missing part")));
                    }
                    bytes.extend_from_slice(v.value());
                }
                _ => {
                    if part != 0 {
                        return Err(corrupt(s, f, &OutlineError::Malformed("missing part")));
                    }
                    raw.push((f, v.value().to_vec()));
                }
            }
            next_part = part + 1;
        }
        Ok(raw)
    }

    /// Calls `f` with the first node key and the first part of each of session `s`'s blocks,
    /// in order, reading no other part (one B-tree descent per block).
    fn outline_heads(
        &self,
        s: SessionKey,
        mut f: impl FnMut(u64, &[u8]) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut from = 0u64;
        loop {
            let Some(row) = self
                .outline
                .range((s.0, from, 0)..=(s.0, u64::MAX, u32::MAX))?
                .next()
            else {
                return Ok(());
            };
            let (k, v) = row?;
            let (_, first, part) = k.value();
            if part != 0 {
                return Err(corrupt(s, first, &OutlineError::Malformed("missing part")));
            }
            f(first, v.value())?;
            match first.checked_add(1) {
                Some(n) => from = n,
                None => return Ok(()),
            }
        }
    }

    /// The first node keys of session `s`'s blocks, in order.
    pub fn outline_firsts(&self, s: SessionKey) -> Result<Vec<u64>, StoreError> {
        let mut out: Vec<u64> = Vec::new();
        self.outline_heads(s, |first, _| {
            out.push(first);
            Ok(())
        })?;
        Ok(out)
    }

    /// Decodes blocks (first node key, stored bytes) of session `s` on the rayon pool.
    fn decode_blocks(
        &self,
        s: SessionKey,
        raw: &[(u64, &[u8])],
        cold: bool,
    ) -> Result<Vec<OutlineBlock>, StoreError> {
        use rayon::prelude::*;
        let decoded: Vec<Result<OutlineBlock, OutlineError>> = if raw.len() > 1 {
            raw.par_iter()
                .map(|(first, bytes)| OutlineBlock::decode(*first, bytes, cold))
                .collect()
        } else {
            raw.iter()
                .map(|(first, bytes)| OutlineBlock::decode(*first, bytes, cold))
                .collect()
        };
        let mut out = Vec::with_capacity(decoded.len());
        for ((first, _), b) in raw.iter().zip(decoded) {
            let mut b = b.map_err(|e| corrupt(s, *first, &e))?;
            b.fill_from_records(self)?;
            out.push(b);
        }
        Ok(out)
    }

    /// The blocks of session `s` whose first node keys are `firsts`, decoded (in parallel);
    /// with `cold`, with their long summaries whole.
    pub fn outline_blocks(
        &self,
        s: SessionKey,
        firsts: &[u64],
        cold: bool,
    ) -> Result<Vec<OutlineBlock>, StoreError> {
        let raw = firsts
            .iter()
            .map(|&f| Ok((f, self.outline_bytes(s, f)?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let refs: Vec<(u64, &[u8])> = raw.iter().map(|(f, b)| (*f, b.as_slice())).collect();
        self.decode_blocks(s, &refs, cold)
    }

    /// Every node of session `s`, from its outline, whole summaries included (blocks decoded
    /// in parallel).
    pub fn outline(&self, s: SessionKey) -> Result<Outline, StoreError> {
        let raw = self.outline_raw(s)?;
        let refs: Vec<(u64, &[u8])> = raw.iter().map(|(f, b)| (*f, b.as_slice())).collect();
        let mut out = Outline::default();
        for b in self.decode_blocks(s, &refs, true)? {
            if out
                .blocks
                .last()
                .is_some_and(|p| p.bounds().1 >= b.bounds().0)
            {
                return Err(corrupt(
                    s,
                    b.bounds().0,
                    &OutlineError::Malformed("blocks overlap"),
                ));
            }
            out.starts.push(out.len);
            out.len += b.len();
            out.blocks.push(b);
        }
        Ok(out)
    }

    /// The path from `e` up to its root as runs of consecutive keys, `e`'s run first: each
    /// `(start, end)` holds the keys `end, end - 1, …, start`, every one the parent of the one
    /// before (see [`crate::schema::RUN_STARTS`]).
    pub fn path_runs(&self, e: EntryKey) -> Result<Vec<(EntryKey, EntryKey)>, StoreError> {
        let mut out = Vec::new();
        let Some(link) = self.link(e)? else {
            return Ok(out);
        };
        // A consistent store has no cycle; a damaged one must not make this loop forever.
        let mut left = u64::from(link.depth) + 1;
        let mut x = e.0;
        loop {
            let Some(row) = self.run_starts.range(..=x)?.next_back() else {
                return Err(StoreError::Inconsistent(format!(
                    "entry {x} has no run start"
                )));
            };
            let (start, parent) = row?;
            let start = start.value();
            left = match left.checked_sub(x - start + 1) {
                Some(l) => l,
                None => {
                    return Err(StoreError::Inconsistent(format!(
                        "the path of {e} is longer than its depth"
                    )));
                }
            };
            out.push((EntryKey(start), EntryKey(x)));
            match parent.value() {
                p if p == EntryKey::NONE.0 => break,
                p => x = p,
            }
        }
        Ok(out)
    }

    /// [`Self::path_runs`] of the path pi's context walks from `e`
    /// ([`Snapshot::context_path`]): for a record that is no tree node (the last entry without
    /// a string id, pi's fallback leaf), `(e, e)` first, then the runs of the entry its
    /// `parentId` names.
    pub fn context_runs(
        &self,
        s: SessionKey,
        e: EntryKey,
    ) -> Result<Vec<(EntryKey, EntryKey)>, StoreError> {
        if self.link(e)?.is_some() {
            return self.path_runs(e);
        }
        let mut runs = vec![(e, e)];
        if let Some(p) = self.unlinked_parent(s, e)? {
            runs.extend(self.path_runs(p)?);
        }
        Ok(runs)
    }

    /// The session's tree in memory: every node's key, parent and children (file order) and
    /// the roots, from the blocks' headers and the run starts (a node that starts no run is
    /// the child of the key just before it); nothing is decompressed. Rows are read through
    /// [`SessionTree::reader`].
    pub fn session_tree(&self, s: SessionKey) -> Result<SessionTree, StoreError> {
        self.session_tree_each(s, |_| {})
    }

    /// [`Self::session_tree`], handing `each` every block's first node key, in order, as soon
    /// as its header is read: a caller can start reading the blocks while the tree is built.
    pub fn session_tree_each(
        &self,
        s: SessionKey,
        mut each: impl FnMut(u64),
    ) -> Result<SessionTree, StoreError> {
        // The keys are in each block's header, at the start of its first part: parsed
        // straight into the node arrays (grown by doubling; a large `Vec` is moved by
        // `mremap`, so only the pages finally used are touched).
        let mut keys: Vec<u64> = Vec::new();
        let mut times: Vec<i64> = Vec::new();
        let mut starts = Vec::new();
        let mut firsts = Vec::new();
        self.outline_heads(s, |first, part| {
            if keys.last().is_some_and(|&l| l >= first) {
                return Err(corrupt(
                    s,
                    first,
                    &OutlineError::Malformed("blocks overlap"),
                ));
            }
            starts.push(keys.len());
            firsts.push(first);
            each(first);
            let whole = header_keys_into(first, part, &mut keys, &mut times)
                .map_err(|e| corrupt(s, first, &e))?;
            if !whole {
                // A header longer than the first part: read the block whole.
                let bytes = self.outline_bytes(s, first)?;
                let h = Header::parse(first, &bytes).map_err(|e| corrupt(s, first, &e))?;
                keys.extend(h.keys);
                times.extend(h.times.into_iter().map(|t| t.unwrap_or(NO_MS)));
            }
            Ok(())
        })?;
        let n = keys.len();
        // A node that starts no run is the child of the node just before it; the run starts
        // and the nodes are both in key order, so one merge finds the others' parents.
        let mut parent: Vec<u32> = Vec::with_capacity(n);
        if n > 0 {
            let (lo, hi) = (keys[0], keys[n - 1]);
            let mut starts_iter = self.run_starts.range(lo..=hi)?;
            let mut next = starts_iter.next().transpose()?;
            for i in 0..n {
                let k = keys[i];
                // Run starts of keys that are no node of this session are skipped.
                while let Some((sk, _)) = &next
                    && sk.value() < k
                {
                    next = starts_iter.next().transpose()?;
                }
                let p = match &next {
                    Some((sk, p)) if sk.value() == k => {
                        let p = p.value();
                        if p == EntryKey::NONE.0 {
                            u32::MAX
                        } else {
                            let j = keys.binary_search(&p).map_err(|_| {
                                StoreError::Inconsistent(format!(
                                    "entry {k}'s parent {p} is not a node of session {s}"
                                ))
                            })?;
                            #[allow(clippy::cast_possible_truncation)]
                            {
                                j as u32
                            }
                        }
                    }
                    _ => {
                        if i == 0 || keys[i - 1] + 1 != k {
                            return Err(StoreError::Inconsistent(format!(
                                "entry {k} of session {s} starts no run, but the key before it is no node"
                            )));
                        }
                        #[allow(clippy::cast_possible_truncation)]
                        {
                            (i - 1) as u32
                        }
                    }
                };
                parent.push(p);
            }
        }
        let mut count = vec![0u32; n + 1];
        for &p in &parent {
            if p != u32::MAX {
                count[p as usize + 1] += 1;
            }
        }
        for i in 0..n {
            count[i + 1] += count[i];
        }
        let child_start = count.clone();
        let mut fill = count;
        let mut children = vec![0u32; child_start[n] as usize];
        let mut roots = Vec::new();
        for (i, &p) in parent.iter().enumerate() {
            #[allow(clippy::cast_possible_truncation)]
            if p == u32::MAX {
                roots.push(i);
            } else {
                children[fill[p as usize] as usize] = i as u32;
                fill[p as usize] += 1;
            }
        }
        Ok(SessionTree {
            s,
            firsts,
            starts,
            keys,
            times,
            parent,
            child_start,
            children,
            roots,
        })
    }
}

/// A session's tree in memory (see [`Snapshot::session_tree`]): nodes are indexes in file
/// order; blocks are read and decoded when a [`TreeReader`] needs them.
#[derive(Debug, Clone)]
pub struct SessionTree {
    s: SessionKey,
    /// Each block's first node key.
    firsts: Vec<u64>,
    /// Index of each block's first node.
    starts: Vec<usize>,
    keys: Vec<u64>,
    /// Milliseconds of each node's canonical ISO time ([`NO_MS`]: none, or another string).
    times: Vec<i64>,
    parent: Vec<u32>,
    child_start: Vec<u32>,
    children: Vec<u32>,
    /// The roots, in file order.
    pub roots: Vec<usize>,
}

impl SessionTree {
    /// Nodes.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the session has no node.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key of node `i`.
    pub fn key(&self, i: usize) -> EntryKey {
        EntryKey(self.keys[i])
    }

    /// The milliseconds of node `i`'s time when it is a canonical ISO time (the others need
    /// the row: [`Timestamp::date_ms`]).
    pub fn time_ms(&self, i: usize) -> Option<i64> {
        let t = self.times[i];
        (t != NO_MS).then_some(t)
    }

    /// The block holding node `i` (blocks are numbered in key order), and the node's row in it.
    pub fn block_of(&self, i: usize) -> (usize, usize) {
        // Every block but the last holds `BLOCK_ROWS` nodes (the module invariants); a store
        // where that does not hold is searched.
        let b = i / BLOCK_ROWS;
        if self.starts.get(b) == Some(&(b * BLOCK_ROWS))
            && self.starts.get(b + 1).is_none_or(|&s| s > i)
        {
            return (b, i - b * BLOCK_ROWS);
        }
        let b = self.starts.partition_point(|&s| s <= i) - 1;
        (b, i - self.starts[b])
    }

    /// The first node key of block `b` (for [`Snapshot::outline_bytes`]).
    pub fn block_first(&self, b: usize) -> u64 {
        self.firsts[b]
    }

    /// How many blocks hold the nodes.
    pub fn blocks(&self) -> usize {
        self.firsts.len()
    }

    /// The nodes of block `b` (its rows, in order).
    pub fn block_nodes(&self, b: usize) -> std::ops::Range<usize> {
        self.starts[b]..self.starts.get(b + 1).copied().unwrap_or(self.keys.len())
    }

    /// The session.
    pub fn session(&self) -> SessionKey {
        self.s
    }

    /// The node of `key`.
    pub fn index_of(&self, key: EntryKey) -> Option<usize> {
        self.keys.binary_search(&key.0).ok()
    }

    /// The parent of node `i`.
    pub fn parent(&self, i: usize) -> Option<usize> {
        let p = self.parent[i];
        (p != u32::MAX).then_some(p as usize)
    }

    /// The children of node `i`, in file order.
    pub fn children(&self, i: usize) -> impl ExactSizeIterator<Item = usize> + '_ {
        self.children[self.child_start[i] as usize..self.child_start[i + 1] as usize]
            .iter()
            .map(|&c| c as usize)
    }

    /// Whether node `i` lies on one of `runs` (as [`Snapshot::path_runs`] gives them).
    pub fn marks(&self, runs: &[(EntryKey, EntryKey)]) -> Vec<bool> {
        let mut on = vec![false; self.len()];
        for &(start, end) in runs {
            if let Some(i) = self.index_of(end) {
                let n = usize::try_from(end.0 - start.0).unwrap_or(usize::MAX);
                on[i.saturating_sub(n)..=i].fill(true);
            }
        }
        on
    }

    /// A reader of the nodes' rows; with `cold`, whole summaries.
    pub fn reader<'t>(&'t self, snap: &'t Snapshot, cold: bool) -> TreeReader<'t> {
        TreeReader {
            tree: self,
            snap,
            cold,
            cache: Vec::new(),
        }
    }
}

/// Reads a [`SessionTree`]'s rows, decoding blocks on demand and keeping the last few (walks
/// go through the nodes about in file order). A missed block is decoded together with the
/// next few, on the rayon pool.
pub struct TreeReader<'t> {
    tree: &'t SessionTree,
    snap: &'t Snapshot,
    cold: bool,
    /// (block index, block), most recently used last.
    cache: Vec<(usize, OutlineBlock)>,
}

impl std::fmt::Debug for TreeReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TreeReader({} blocks cached)", self.cache.len())
    }
}

/// [`SessionTree`]'s mark of a node without canonical milliseconds (no real time is this far
/// from 1970).
const NO_MS: i64 = i64::MIN;

/// Blocks a [`TreeReader`] keeps decoded, and decodes at a time (on the rayon pool).
const READER_CACHE: usize = 16;
const READER_AHEAD: usize = 4;

impl TreeReader<'_> {
    /// `new Date(timestamp).getTime()` of node `i`, as pi's `getTree` orders siblings by it
    /// (`None` for `NaN`): a canonical time from the tree, another string from the row, and a
    /// timestamp that is no string (a number, `true`, `null`: pi reads those too) or none at
    /// all from the record itself, which real sessions never need (pi writes ISO strings).
    pub fn date_ms(&mut self, i: usize) -> Result<Option<f64>, StoreError> {
        if let Some(ms) = self.tree.time_ms(i) {
            #[allow(clippy::cast_precision_loss)]
            return Ok(Some(ms as f64));
        }
        let from_row = match self.row(i)?.timestamp {
            Timestamp::None => None,
            t => Some(t.date_ms()),
        };
        match from_row {
            Some(t) => Ok(t),
            None => {
                let v = self.snap.entry_value(self.tree.key(i))?;
                Ok(crate::agent::js::date_ms(v.get("timestamp")).as_f64())
            }
        }
    }

    /// The row of node `i`.
    pub fn row(&mut self, i: usize) -> Result<OutlineRow<'_>, StoreError> {
        let t = self.tree;
        // Most reads are of the block read last.
        let hit = self.cache.last().and_then(|(b, blk)| {
            let j = i.checked_sub(t.starts[*b])?;
            (j < blk.len()).then_some(j)
        });
        if let Some(j) = hit {
            let last = self.cache.len() - 1;
            return Ok(self.cache[last].1.row(j));
        }
        let b = t.starts.partition_point(|&s| s <= i) - 1;
        let j = i - t.starts[b];
        let at = match self.cache.iter().rposition(|(x, _)| *x == b) {
            Some(at) => {
                let e = self.cache.remove(at);
                self.cache.push(e);
                self.cache.len() - 1
            }
            None => {
                let want: Vec<usize> = (b..t.firsts.len().min(b + READER_AHEAD))
                    .filter(|x| *x == b || !self.cache.iter().any(|(c, _)| c == x))
                    .collect();
                let firsts: Vec<u64> = want.iter().map(|&x| t.firsts[x]).collect();
                let blocks = self.snap.outline_blocks(t.s, &firsts, self.cold)?;
                for (x, blk) in want.into_iter().zip(blocks).rev() {
                    if self.cache.len() >= READER_CACHE {
                        self.cache.remove(0);
                    }
                    self.cache.push((x, blk));
                }
                self.cache.len() - 1
            }
        };
        let blk = &self.cache[at].1;
        if j >= blk.len() || blk.key(j) != EntryKey(t.keys[i]) {
            return Err(corrupt(
                t.s,
                t.firsts[b],
                &OutlineError::Malformed("rows differ from the header"),
            ));
        }
        Ok(blk.row(j))
    }
}

// ---- expected blocks (verify, repair) -----------------------------------------------------

impl Snapshot {
    /// The blocks session `s`'s records imply: (first node key, value), in key order.
    pub(crate) fn expected_outline(
        &self,
        s: SessionKey,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        let mut block: Option<BlockBuilder> = None;
        for e in self.rows(s)? {
            let got = self.with_entry(e, |a| {
                a.id.as_ref().map(|id| {
                    (
                        id.as_str().to_owned(),
                        a.timestamp.as_ref().map(|t| t.as_str().to_owned()),
                        a.parent_id.as_ref().map(|t| t.as_str().to_owned()),
                        a.json_text().map(std::borrow::Cow::into_owned),
                    )
                })
            })?;
            let Some(Some((id, ts, parent, json))) = got else {
                continue;
            };
            let facts = json
                .as_deref()
                .and_then(|j| {
                    Entry::parse(j)
                        .or_else(|_| Entry::parse_lenient(j))
                        .ok()
                        .map(|en| NodeFacts::of(j, &en))
                })
                .unwrap_or_default();
            let row = RowIn {
                key: e.0,
                id: &id,
                timestamp: ts.as_deref(),
                parent_id: facts.parent_id(parent.as_deref()),
                facts: facts.facts.as_ref(),
            };
            if let Some(b) = BlockBuilder::push_into(&mut block, &row) {
                out.push((b.first_key(), b.encode().map_err(|e| outline_err(s, &e))?));
            }
        }
        if let Some(b) = block.take() {
            out.push((b.first_key(), b.encode().map_err(|e| outline_err(s, &e))?));
        }
        Ok(out)
    }

    /// Session `s`'s stored blocks: first node key → bytes (parts joined; `None` when a part
    /// is missing).
    pub(crate) fn stored_outline(
        &self,
        s: SessionKey,
    ) -> Result<std::collections::HashMap<u64, Option<Vec<u8>>>, StoreError> {
        let mut out: std::collections::HashMap<u64, Option<Vec<u8>>> =
            std::collections::HashMap::new();
        let mut next = (u64::MAX, 0u32);
        for row in self
            .outline
            .range((s.0, 0, 0)..=(s.0, u64::MAX, u32::MAX))?
        {
            let (k, v) = row?;
            let (_, first, part) = k.value();
            let expected = if next.0 == first { next.1 } else { 0 };
            let entry = out.entry(first).or_insert_with(|| Some(Vec::new()));
            match entry {
                Some(bytes) if part == expected => bytes.extend_from_slice(v.value()),
                _ => *entry = None,
            }
            next = (first, part.saturating_add(1));
        }
        Ok(out)
    }
}

/// A block's bytes as table rows: (part, bytes).
pub fn parts(bytes: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
    let (head, rest) = bytes.split_at(bytes.len().min(FIRST_PART_BYTES));
    #[allow(clippy::cast_possible_truncation)]
    std::iter::once(head)
        .chain(rest.chunks(PART_BYTES))
        .enumerate()
        .map(|(i, c)| (i as u32, c))
}

fn outline_err(s: SessionKey, e: &OutlineError) -> StoreError {
    StoreError::Inconsistent(format!("{OUTLINE_NAME}: session {s}: {e}"))
}

// ---- numbers and times ----------------------------------------------------------------------

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        #[allow(clippy::cast_possible_truncation)]
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    #[allow(clippy::cast_possible_truncation)]
    out.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The date of a day number (inverse of [`days_from_civil`](crate::agent::js::days_from_civil)).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The ISO time of `ms` as `YYYY-MM-DDTHH:MM:SS.sssZ` (pi's `toISOString` for years 0–9999).
pub fn format_iso(ms: i64) -> String {
    let mut b = [0u8; 24];
    write_iso(ms, &mut b);
    String::from_utf8_lossy(&b).into_owned()
}

/// [`format_iso`] into a buffer.
pub fn write_iso(ms: i64, b: &mut [u8; 24]) {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let put = |b: &mut [u8; 24], at: usize, v: i64, n: usize| {
        let mut v = v.rem_euclid(10_i64.pow(n as u32));
        for k in (0..n).rev() {
            #[allow(clippy::cast_possible_truncation)]
            {
                b[at + k] = b'0' + (v % 10) as u8;
            }
            v /= 10;
        }
    };
    put(b, 0, y, 4);
    b[4] = b'-';
    put(b, 5, mo, 2);
    b[7] = b'-';
    put(b, 8, d, 2);
    b[10] = b'T';
    put(b, 11, rem / 3_600_000, 2);
    b[13] = b':';
    put(b, 14, rem / 60_000 % 60, 2);
    b[16] = b':';
    put(b, 17, rem / 1000 % 60, 2);
    b[19] = b'.';
    put(b, 20, rem % 1000, 3);
    b[23] = b'Z';
}

/// The milliseconds of a canonical ISO time (`YYYY-MM-DDTHH:MM:SS.sssZ`, a real date and time,
/// year 0000–9999): exactly the strings [`format_iso`] writes.
pub fn iso_canonical(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 24 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Some(v)
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let t = ((crate::agent::js::days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60_000
        + sec * 1000
        + ms;
    let mut back = [0u8; 24];
    write_iso(t, &mut back);
    (back == b[..]).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_times_round_trip_and_agree_with_javascript_dates() {
        for s in [
            "2026-07-26T09:14:43.123Z",
            "1970-01-01T00:00:00.000Z",
            "1969-12-31T23:59:59.999Z",
            "0000-01-01T00:00:00.000Z",
            "9999-12-31T23:59:59.999Z",
            "2024-02-29T12:00:00.000Z",
        ] {
            let ms = iso_canonical(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(format_iso(ms), s);
            let js = crate::agent::js::date_ms(Some(&Value::String(s.to_owned()))).as_f64();
            #[allow(clippy::cast_precision_loss)]
            let want = Some(ms as f64);
            assert_eq!(js, want, "{s}");
        }
        for s in [
            "2026-02-30T00:00:00.000Z",
            "2026-07-26T09:14:43.123",
            "2026-07-26T24:00:00.000Z",
            "2026-07-26T09:14:60.000Z",
            "2026-07-26 09:14:43.123Z",
            "2026-07-26T09:14:43.12Z",
        ] {
            assert_eq!(iso_canonical(s), None, "{s}");
        }
    }

    fn facts(summary: &str) -> Facts {
        Facts {
            entry_type: Some("message".into()),
            role: Some("assistant".into()),
            model: Some("m".into()),
            summary: summary.into(),
            tokens: 12,
            boundary: None,
            tool_only: false,
        }
    }

    #[test]
    fn blocks_round_trip_resume_and_reject_damage() {
        let long = "é".repeat(SUMMARY_CHARS + 5);
        let medium = "m".repeat(HOT_CHARS + 3);
        let f = [
            facts("short"),
            facts(&long),
            Facts::default(),
            Facts {
                boundary: Some("compaction: x".into()),
                entry_type: Some("compaction".into()),
                ..facts(&medium)
            },
        ];
        let big_id = "x".repeat(FIELD_MAX + 1);
        let rows = [
            RowIn {
                key: 10,
                id: "a",
                timestamp: Some("2026-07-26T09:14:43.123Z"),
                parent_id: ParentId::Null,
                facts: Some(&f[0]),
            },
            RowIn {
                key: 11,
                id: "b",
                timestamp: Some("yesterday"),
                parent_id: ParentId::Id("a"),
                facts: Some(&f[1]),
            },
            RowIn {
                key: 15,
                id: "c",
                timestamp: None,
                parent_id: ParentId::Id("zz"),
                facts: None,
            },
            RowIn {
                key: 16,
                id: &big_id,
                timestamp: Some("2026-07-26T09:14:44.000Z"),
                parent_id: ParentId::Missing,
                facts: Some(&f[2]),
            },
            RowIn {
                key: 17,
                id: "d",
                timestamp: Some("2026-07-26T09:14:45.000Z"),
                parent_id: ParentId::Id("x"),
                facts: Some(&f[3]),
            },
        ];
        let mut all = BlockBuilder::new(10);
        for r in &rows {
            all.push(r);
        }
        let bytes = all.encode().unwrap();
        assert_eq!(block_keys(10, &bytes).unwrap(), vec![10, 11, 15, 16, 17]);
        for cold in [false, true] {
            let b = OutlineBlock::decode(10, &bytes, cold).unwrap();
            assert_eq!(b.len(), 5);
            let r0 = b.row(0);
            assert_eq!((r0.key, r0.id), (EntryKey(10), "a"));
            assert_eq!(
                r0.timestamp.text().as_deref(),
                Some("2026-07-26T09:14:43.123Z")
            );
            assert_eq!(r0.parent_id, ParentId::Null);
            let f0 = r0.facts.unwrap();
            assert_eq!((f0.summary, f0.summary_complete), ("short", true));
            let r1 = b.row(1);
            assert_eq!(r1.parent_id, ParentId::Id("a"));
            assert_eq!(r1.timestamp, Timestamp::Text("yesterday"));
            let f1 = r1.facts.unwrap();
            assert!(!f1.summary_complete);
            let stored = if cold { SUMMARY_CHARS } else { HOT_CHARS };
            assert_eq!(f1.summary.chars().count(), stored);
            assert_eq!(
                (f1.kind(), f1.model, f1.tokens),
                ("assistant", Some("m"), 12)
            );
            let r2 = b.row(2);
            assert!(r2.facts.is_none());
            assert_eq!(r2.parent_id, ParentId::Id("zz"));
            assert_eq!(b.find(EntryKey(16)), Some(3));
            assert_eq!(b.row(3).id, "", "a long id is left to the record");
            let r4 = b.row(4);
            assert_eq!(r4.parent_id, ParentId::Id("x"));
            let f4 = r4.facts.unwrap();
            assert_eq!(f4.boundary, Some("compaction: x"));
            assert_eq!(f4.summary_complete, cold);
            assert_eq!(
                f4.summary,
                if cold {
                    &medium[..]
                } else {
                    &medium[..HOT_CHARS]
                }
            );
            assert_eq!(b.find(EntryKey(12)), None);
        }

        // Built in two parts (an append), the block is the same bytes.
        let mut first = BlockBuilder::new(10);
        for r in &rows[..2] {
            first.push(r);
        }
        let mut resumed = BlockBuilder::resume(10, &first.encode().unwrap()).unwrap();
        for r in &rows[2..] {
            resumed.push(r);
        }
        assert_eq!(resumed.encode().unwrap(), bytes);

        // Damage is an error.
        for cut in [0, 3, bytes.len() / 2, bytes.len() - 1] {
            assert!(OutlineBlock::decode(10, &bytes[..cut], true).is_err());
        }
        // A hot frame's plain length that lies: a little (LZ4 decodes fewer bytes, or runs out
        // of room) or hugely (refused before anything is allocated).
        let mut r = Reader::new(&bytes);
        let lens: Vec<u64> = (0..5).map(|_| r.varint().unwrap()).collect();
        let with_hot_plain = |plain: u64| {
            let mut out = Vec::new();
            put_varint(&mut out, lens[0]);
            put_varint(&mut out, plain);
            for &l in &lens[2..] {
                put_varint(&mut out, l);
            }
            out.extend_from_slice(&bytes[r.pos..]);
            out
        };
        let msg = |plain: u64| match OutlineBlock::decode(10, &with_hot_plain(plain), false) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("a hot frame of {plain} plain bytes was accepted"),
        };
        assert_eq!(
            msg(lens[1] + 1),
            "malformed outline block (hot frame length)"
        );
        assert_eq!(
            msg(u64::MAX / 2),
            "malformed outline block (hot frame length)"
        );
        assert_eq!(
            msg(lens[1] - 1),
            "outline block: the hot frame's LZ4 data is damaged"
        );
        assert!(OutlineBlock::decode(10, &with_hot_plain(lens[1]), false).is_ok());
    }
}
