//! Stored records (rkyv) and the redb value wrapper that reads them without copying.
//!
//! Invariants:
//! - every archived type here has alignment 1 (the workspace pins rkyv's `unaligned` format),
//!   so [`RecordRef::archived`] validates and reads straight out of a redb page;
//! - records are only ever read through checked `rkyv::access` (never `access_unchecked`);
//! - an imported row carries the blake3 of its plain line bytes ([`EntryRecord::hash`]);
//! - a row's line bytes (`raw`) are stored as written or zstd-compressed ([`Codec`]); every
//!   reader goes through [`ArchivedEntryRecord::raw_bytes`] / [`ArchivedEntryRecord::json_text`]
//!   (or gets an unpacked owned record from [`decode_entry`]), never reads `raw` directly;
//! - each record type has a versioned redb type name ([`Record::TYPE_NAME`]); changing a record's
//!   layout means a new type (`…V2`) and a new name, so an old store fails loudly with
//!   `TableTypeMismatch` instead of being misread.

use std::marker::PhantomData;

use rkyv::rancor;
use rkyv::{Archive, Deserialize, Serialize};

use crate::error::StoreError;

/// A type stored as an rkyv archive in a redb table.
pub trait Record: Archive + Sized {
    /// The versioned redb type name.
    const TYPE_NAME: &'static str;
}

/// What kind of physical line (or record) a stored row is.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[rkyv(compare(PartialEq))]
pub enum RowKind {
    /// A session header: the first record, or a later `"type":"session"` record (no entry:
    /// pi's tree, leaf and context pass over it).
    Header,
    /// A JSON object after the header: an entry (a tree node when it has a string id).
    Entry,
    /// A truthy non-object JSON value after the header (pi keeps it as an id-less entry).
    Value,
    /// A line that yields no record (blank, malformed, torn, falsy, or junk before the header).
    Junk,
}

/// How a row's `raw` bytes are stored.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Default)]
#[rkyv(derive(Debug, PartialEq, Eq))]
#[rkyv(compare(PartialEq))]
pub enum Codec {
    /// As written.
    #[default]
    Plain,
    /// zstd-compressed (one frame); `raw_len` is the plain length.
    Zstd,
}

/// zstd level: 1 is the fastest, and still halves pi's lines.
const ZSTD_LEVEL: i32 = 1;

/// Rows above this size are zstd-compressed on their own, by streaming into a growing buffer
/// (a one-shot compressor needs an output buffer of the worst-case size up front, a second copy
/// of a 200 MB line even when it compresses to a few kilobytes). Smaller rows are stored plain
/// in their record and compressed with their block ([`crate::row_block`]).
pub const LARGE_ROW: usize = 1 << 20;

/// A sink that refuses to grow to `cap` bytes: compression that does not save space stops
/// early instead of producing a second full-size copy.
struct Capped {
    buf: Vec<u8>,
    cap: usize,
}

impl std::io::Write for Capped {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + b.len() >= self.cap {
            return Err(std::io::Error::other("compression saves nothing"));
        }
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// zstd-compresses a large row (see [`LARGE_ROW`]): a streaming frame with the content size
/// in its header, so [`decompress`] reads it like any other. `None` when compression does not
/// help or fails (the row is then stored plain).
fn compress_large(data: &[u8]) -> Option<Vec<u8>> {
    use std::io::Write;
    let sink = Capped {
        buf: Vec::new(),
        cap: data.len(),
    };
    let mut enc = zstd::stream::Encoder::new(sink, ZSTD_LEVEL).ok()?;
    enc.include_contentsize(true).ok()?;
    enc.set_pledged_src_size(Some(data.len() as u64)).ok()?;
    enc.write_all(data).ok()?;
    Some(enc.finish().ok()?.buf)
}

thread_local! {
    static DECOMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Decompresses a row with a per-thread context: making a context per row cost more than the
/// decompression itself (zstd probes the CPU with `cpuid`, which traps on virtual machines; it
/// was 68 % of an export's profile).
pub(crate) fn decompress(data: &[u8], len: u64) -> std::io::Result<Vec<u8>> {
    let len = usize::try_from(len).map_err(std::io::Error::other)?;
    let out = DECOMPRESSOR.with(|d| -> std::io::Result<Vec<u8>> {
        let mut d = d.try_borrow_mut().map_err(std::io::Error::other)?;
        if d.is_none() {
            *d = Some(zstd::bulk::Decompressor::new()?);
        }
        match d.as_mut() {
            Some(d) => d.decompress(data, len),
            None => zstd::bulk::decompress(data, len),
        }
    })?;
    if out.len() != len {
        return Err(std::io::Error::other(format!(
            "decompressed {} bytes where the record says {len}",
            out.len()
        )));
    }
    Ok(out)
}

/// One stored row of a session file.
///
/// Export concatenates `raw` of a session's rows in order and gets the file back byte for byte:
/// each physical line is stored with its terminator (and a leading byte order mark, if any), even
/// when pi would skip it. A line holding several glued records gives one row per record; the
/// first holds the line's bytes and the others have empty `raw` and their text in `json`.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[rkyv(derive(Debug))]
pub struct EntryRecord {
    /// The session the row belongs to.
    pub session: u64,
    /// 1-based physical line number.
    pub line: u64,
    /// Byte offset of the line in the file.
    pub offset: u64,
    /// What the row is.
    pub kind: RowKind,
    /// How `raw` is stored.
    pub codec: Codec,
    /// The bytes this row contributes to the file (line plus terminator), stored as `codec`
    /// says: read them with `raw_bytes()`.
    pub raw: Vec<u8>,
    /// The length of the plain `raw` bytes.
    pub raw_len: u64,
    /// The record's JSON text when it is not simply `raw` without its terminator.
    pub json: Option<String>,
    /// The entry's `id`, when it is a string.
    pub id: Option<String>,
    /// The entry's `parentId`, when it is a string.
    pub parent_id: Option<String>,
    /// The entry's `type`.
    pub type_name: Option<String>,
    /// The message role, for `message` entries.
    pub role: Option<String>,
    /// The entry's `timestamp` as written.
    pub timestamp: Option<String>,
    /// blake3 of the plain `raw` bytes, set at import ([`Self::seal`]); `verify` hashes the
    /// bytes again and compares.
    pub hash: [u8; 32],
}

impl Record for EntryRecord {
    const TYPE_NAME: &'static str = "pisess::EntryRecordV3";
}

impl EntryRecord {
    /// A row whose `raw` bytes are `raw`, stored plain; [`Self::pack`] compresses them.
    pub fn with_raw(raw: Vec<u8>) -> Self {
        Self {
            session: 0,
            line: 0,
            offset: 0,
            kind: RowKind::Junk,
            codec: Codec::Plain,
            raw_len: raw.len() as u64,
            raw,
            json: None,
            id: None,
            parent_id: None,
            type_name: None,
            role: None,
            timestamp: None,
            hash: [0; 32],
        }
    }

    /// Records the hash of the plain `raw` bytes, then compresses them if the row is large
    /// ([`Self::pack`]).
    pub fn seal(&mut self) {
        if self.codec == Codec::Plain {
            let raw = std::mem::take(&mut self.raw);
            if !self.seal_from(&raw) {
                self.raw = raw;
            }
        }
    }

    /// [`Self::seal`] for a row whose plain line bytes are `raw`, held elsewhere (`self.raw`
    /// empty): records their hash, and when the row is large and compresses, stores the
    /// compressed bytes in `self.raw`. Returns whether it did (the row's bytes are then
    /// `self.raw`, no longer `raw`).
    pub fn seal_from(&mut self, raw: &[u8]) -> bool {
        self.hash = *blake3::hash(raw).as_bytes();
        self.pack_from(raw)
    }

    /// Compresses a plain `raw` over [`LARGE_ROW`] when that makes it smaller.
    pub fn pack(&mut self) {
        if self.codec != Codec::Plain {
            return;
        }
        let raw = std::mem::take(&mut self.raw);
        if !self.pack_from(&raw) {
            self.raw = raw;
        }
    }

    /// Stores `raw` (the row's plain bytes) compressed in `self.raw` when it is over
    /// [`LARGE_ROW`] and compressing makes it smaller; whether it did.
    fn pack_from(&mut self, raw: &[u8]) -> bool {
        if raw.len() <= LARGE_ROW {
            return false;
        }
        match compress_large(raw) {
            Some(z) => {
                self.raw = z;
                self.raw_len = raw.len() as u64;
                self.codec = Codec::Zstd;
                true
            }
            None => false,
        }
    }

    /// Makes `raw` plain again.
    pub fn unpack(&mut self) -> std::io::Result<()> {
        if self.codec == Codec::Zstd {
            self.raw = decompress(&self.raw, self.raw_len)?;
            self.codec = Codec::Plain;
        }
        Ok(())
    }
}

impl ArchivedEntryRecord {
    /// [`Self::raw_bytes`], checked against the blake3 the row got at import
    /// ([`EntryRecord::hash`]): `None` when they do not decompress or no longer match (the
    /// store file is damaged there). For what writes a row's bytes out as a copy that may be
    /// the only one left (an export, a fork): a damaged row must not pass for the session.
    pub fn checked_raw_bytes(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        self.raw_bytes()
            .ok()
            .filter(|raw| *blake3::hash(raw).as_bytes() == self.hash)
    }

    /// The bytes this row contributes to the file (decompressed when stored compressed).
    pub fn raw_bytes(&self) -> std::io::Result<std::borrow::Cow<'_, [u8]>> {
        match self.codec {
            ArchivedCodec::Plain => Ok(std::borrow::Cow::Borrowed(self.raw.as_slice())),
            ArchivedCodec::Zstd => {
                decompress(self.raw.as_slice(), self.raw_len.to_native()).map(Into::into)
            }
        }
    }

    /// The record's JSON text (`None` for junk rows that are not valid UTF-8, or for a stored
    /// row that does not decompress — `verify` reports those).
    pub fn json_text(&self) -> Option<std::borrow::Cow<'_, str>> {
        if let Some(j) = self.json.as_ref() {
            return Some(std::borrow::Cow::Borrowed(j.as_str()));
        }
        match self.raw_bytes().ok()? {
            std::borrow::Cow::Borrowed(raw) => {
                std::str::from_utf8(trim_line(raw)).ok().map(Into::into)
            }
            std::borrow::Cow::Owned(raw) => {
                let text = std::str::from_utf8(trim_line(&raw)).ok()?.to_owned();
                Some(text.into())
            }
        }
    }
}

/// A line without its terminator and byte order mark.
fn trim_line(raw: &[u8]) -> &[u8] {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw)
}

/// One imported session file.
#[derive(Archive, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[rkyv(derive(Debug))]
pub struct SessionRecord {
    /// The session id from the header.
    pub session_id: String,
    /// The file it was imported from (canonical path).
    pub path: String,
    /// The header's `cwd`.
    pub cwd: String,
    /// The header's exact JSON text.
    pub header_json: String,
    /// The header's `version` (1 when absent).
    pub version: f64,
    /// The header's `timestamp` as written.
    pub created: String,
    /// The header's `timestamp` in Unix milliseconds, if it parses.
    pub created_ms: Option<i64>,
    /// Newest user/assistant message time in Unix milliseconds (pi's listing rule).
    pub modified_ms: Option<i64>,
    /// Records after the header (pi's entry count: objects and kept non-objects).
    pub entries: u64,
    /// `message` entries.
    pub messages: u64,
    /// Stored rows (the next row's sequence number).
    pub rows: u64,
    /// Physical lines imported.
    pub lines: u64,
    /// The session name (last `session_info`, trimmed; empty means none).
    pub name: Option<String>,
    /// The header's `parentSession`.
    pub parent_session: Option<String>,
    /// The text of the first user message (pi's `firstMessage`).
    pub first_message: Option<String>,
    /// The leaf: the last record in file order, if it has an id.
    pub leaf: Option<u64>,
    /// Bytes imported (the file size when it was last read).
    pub file_size: u64,
    /// The file's modification time (ns since the Unix epoch) when it was last read.
    pub mtime_ns: i64,
    /// Whether the imported bytes end with a newline (only then can an append be imported alone).
    pub ends_with_newline: bool,
    /// blake3 of the first [`crate::import::WINDOW`] imported bytes.
    pub head_hash: [u8; 32],
    /// blake3 of the last [`crate::import::WINDOW`] imported bytes.
    pub tail_hash: [u8; 32],
    /// Whether the file was missing at the last import of its folder.
    pub gone: bool,
    /// Parent ids that no entry has (orphans point at them), sorted.
    pub dangling: Vec<String>,
    /// Entries whose parent chain formed a cycle and that were made roots to break it.
    pub cycle_cuts: u64,
}

impl Record for SessionRecord {
    const TYPE_NAME: &'static str = "pisess::SessionRecordV1";
}

/// The redb value type of a table of `T` records.
#[derive(Debug)]
pub struct Rkyv<T>(PhantomData<T>);

/// A stored record, borrowed from a redb page; validate it with [`RecordRef::archived`].
pub struct RecordRef<'a, T> {
    bytes: &'a [u8],
    _t: PhantomData<T>,
}

impl<T> std::fmt::Debug for RecordRef<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RecordRef({} bytes)", self.bytes.len())
    }
}

impl<T> Clone for RecordRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RecordRef<'_, T> {}

impl<'a, T> RecordRef<'a, T> {
    /// Wraps serialised bytes (as produced by [`encode`]) for insertion.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            _t: PhantomData,
        }
    }
    /// The archive's bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

impl<'a, T> RecordRef<'a, T>
where
    T: Record,
    T::Archived: rkyv::Portable
        + for<'b> rkyv::bytecheck::CheckBytes<rkyv::api::high::HighValidator<'b, rancor::Error>>,
{
    /// The validated archive, borrowed from the page.
    pub fn archived(&self) -> Result<&'a T::Archived, rancor::Error> {
        rkyv::access::<T::Archived, rancor::Error>(self.bytes)
    }
}

impl<T: Record + std::fmt::Debug + 'static> redb::Value for Rkyv<T> {
    type SelfType<'a>
        = RecordRef<'a, T>
    where
        Self: 'a;
    type AsBytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn fixed_width() -> Option<usize> {
        None
    }

    fn from_bytes<'a>(data: &'a [u8]) -> RecordRef<'a, T>
    where
        Self: 'a,
    {
        RecordRef::new(data)
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a RecordRef<'b, T>) -> &'a [u8]
    where
        Self: 'b,
    {
        value.bytes
    }

    fn type_name() -> redb::TypeName {
        redb::TypeName::new(T::TYPE_NAME)
    }
}

/// Serialises a record.
pub fn encode<T>(value: &T) -> Result<Vec<u8>, StoreError>
where
    T: for<'a> Serialize<
        rkyv::api::high::HighSerializer<
            Vec<u8>,
            rkyv::ser::allocator::ArenaHandle<'a>,
            rancor::Error,
        >,
    >,
{
    rkyv::api::high::to_bytes_in::<_, rancor::Error>(value, Vec::new())
        .map_err(StoreError::Serialize)
}

/// An [`EntryRecord`] whose bytes and strings are borrowed: it archives to the same
/// [`ArchivedEntryRecord`] (rkyv checks the fields' archived types at compile time), so an
/// import serialises a row straight from the chunk it read, without copying the line into an
/// owned record first ([`encode_entry_into`]). It has every field of [`EntryRecord`], in the
/// same order ([`EntryRecordRef::new`] destructures the owned record exhaustively, so a new
/// field cannot be forgotten here), and serialises to the same bytes (tested).
#[derive(Archive, Serialize)]
#[rkyv(as = ArchivedEntryRecord)]
#[rkyv(serialize_bounds(
    __S: rkyv::ser::Writer + rkyv::ser::Allocator,
    <__S as rkyv::rancor::Fallible>::Error: rkyv::rancor::Source,
))]
pub struct EntryRecordRef<'a> {
    /// See [`EntryRecord::session`].
    pub session: u64,
    /// See [`EntryRecord::line`].
    pub line: u64,
    /// See [`EntryRecord::offset`].
    pub offset: u64,
    /// See [`EntryRecord::kind`].
    pub kind: RowKind,
    /// See [`EntryRecord::codec`].
    pub codec: Codec,
    /// See [`EntryRecord::raw`].
    #[rkyv(with = rkyv::with::AsVec, omit_bounds)]
    pub raw: &'a [u8],
    /// See [`EntryRecord::raw_len`].
    pub raw_len: u64,
    /// See [`EntryRecord::json`].
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsString>, omit_bounds)]
    pub json: Option<&'a str>,
    /// See [`EntryRecord::id`].
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsString>, omit_bounds)]
    pub id: Option<&'a str>,
    /// See [`EntryRecord::parent_id`].
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsString>, omit_bounds)]
    pub parent_id: Option<&'a str>,
    /// See [`EntryRecord::type_name`].
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsString>, omit_bounds)]
    pub type_name: Option<&'a str>,
    /// See [`EntryRecord::role`].
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsString>, omit_bounds)]
    pub role: Option<&'a str>,
    /// See [`EntryRecord::timestamp`].
    #[rkyv(with = rkyv::with::Map<rkyv::with::AsString>, omit_bounds)]
    pub timestamp: Option<&'a str>,
    /// See [`EntryRecord::hash`].
    pub hash: [u8; 32],
}

impl<'a> EntryRecordRef<'a> {
    /// `rec` with its line bytes taken from `raw` instead of `rec.raw` (`raw_len`, `codec` and
    /// `hash` as `rec` has them).
    pub fn new(rec: &'a EntryRecord, raw: &'a [u8]) -> Self {
        // Exhaustive on purpose: rkyv's `as` writes only the fields this twin has, so a field
        // added to `EntryRecord` must stop this from compiling until the twin has it too.
        let EntryRecord {
            session,
            line,
            offset,
            kind,
            codec,
            raw: _,
            raw_len,
            json,
            id,
            parent_id,
            type_name,
            role,
            timestamp,
            hash,
        } = rec;
        Self {
            session: *session,
            line: *line,
            offset: *offset,
            kind: *kind,
            codec: *codec,
            raw,
            raw_len: *raw_len,
            json: json.as_deref(),
            id: id.as_deref(),
            parent_id: parent_id.as_deref(),
            type_name: type_name.as_deref(),
            role: role.as_deref(),
            timestamp: timestamp.as_deref(),
            hash: *hash,
        }
    }
}

impl EntryRecordRef<'_> {
    /// About the length of the serialised record: its line, its JSON text when it has one, its
    /// strings, and room for the fixed fields.
    pub fn size_hint(&self) -> usize {
        let strings = [
            self.json,
            self.id,
            self.parent_id,
            self.type_name,
            self.role,
            self.timestamp,
        ];
        self.raw.len() + strings.iter().flatten().map(|s| s.len()).sum::<usize>() + 160
    }
}

/// Appends a row's serialised record to `out` (which may already hold other records: rkyv's
/// offsets are relative, and every archived type here has alignment 1, so the record reads
/// in place from where it starts). On an error `out` is left empty.
pub fn encode_entry_into(rec: &EntryRecordRef<'_>, out: &mut Vec<u8>) -> Result<(), StoreError> {
    let buf = std::mem::take(out);
    *out = rkyv::api::high::to_bytes_in::<_, rancor::Error>(rec, buf)
        .map_err(StoreError::Serialize)?;
    Ok(())
}

/// Reads an archived record back into an owned value.
pub fn decode_session(bytes: &[u8], key: u64) -> Result<SessionRecord, StoreError> {
    let corrupt = |source| StoreError::CorruptRecord {
        table: crate::schema::SESSIONS_NAME,
        key: key.to_string(),
        source,
    };
    let a = rkyv::access::<ArchivedSessionRecord, rancor::Error>(bytes).map_err(corrupt)?;
    rkyv::deserialize::<SessionRecord, rancor::Error>(a).map_err(corrupt)
}

/// Reads an archived entry back into an owned value, its `raw` bytes plain.
pub fn decode_entry(bytes: &[u8], key: u64) -> Result<EntryRecord, StoreError> {
    let corrupt = |source| StoreError::CorruptRecord {
        table: crate::schema::ENTRIES_NAME,
        key: key.to_string(),
        source,
    };
    let a = rkyv::access::<ArchivedEntryRecord, rancor::Error>(bytes).map_err(corrupt)?;
    let mut rec = rkyv::deserialize::<EntryRecord, rancor::Error>(a).map_err(corrupt)?;
    rec.unpack()
        .map_err(|e| corrupt(<rancor::Error as rancor::Source>::new(e)))?;
    Ok(rec)
}

/// `n` incompressible bytes (a xorshift stream), for tests of the codecs.
#[cfg(test)]
pub(crate) fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_have_alignment_one_and_read_at_any_offset() {
        assert_eq!(std::mem::align_of::<ArchivedEntryRecord>(), 1);
        assert_eq!(std::mem::align_of::<ArchivedSessionRecord>(), 1);
        let rec = EntryRecord {
            session: 7,
            line: 3,
            offset: 99,
            kind: RowKind::Entry,
            id: Some("abc".into()),
            type_name: Some("x".into()),
            ..EntryRecord::with_raw(b"{\"type\":\"x\"}\n".to_vec())
        };
        let bytes = encode(&rec).unwrap();
        for shift in 0..8 {
            let mut buf = vec![0u8; shift];
            buf.extend_from_slice(&bytes);
            let r = RecordRef::<EntryRecord>::new(&buf[shift..]);
            let a = r.archived().unwrap();
            assert_eq!(a.id.as_ref().map(|s| s.as_str()), Some("abc"));
            assert_eq!(a.json_text().as_deref(), Some("{\"type\":\"x\"}"));
            assert_eq!(decode_entry(&buf[shift..], 0).unwrap(), rec);
        }
    }

    /// The borrowed twin serialises to exactly the owned record's bytes, whatever its fields
    /// hold (none, short strings rkyv keeps inline, long ones, a compressed row), and a record
    /// appended after others reads back in place from where it starts.
    #[test]
    fn a_record_serialised_from_borrowed_bytes_equals_the_owned_one() {
        let long = "x".repeat(300);
        let mut recs = vec![EntryRecord::with_raw(Vec::new())];
        for (raw, id, ts) in [
            (&b"{}\n"[..], None, None),
            (
                b"{\"a\":1}\r\n",
                Some("ab"),
                Some("2026-01-01T00:00:00.000Z"),
            ),
            (long.as_bytes(), Some(long.as_str()), Some("t")),
        ] {
            let mut r = EntryRecord {
                session: 7,
                line: 3,
                offset: 99,
                kind: RowKind::Entry,
                json: Some("{\"j\":true}".into()),
                id: id.map(str::to_owned),
                parent_id: Some("12345678".into()),
                type_name: Some("message".into()),
                role: Some("toolResult".into()),
                timestamp: ts.map(str::to_owned),
                ..EntryRecord::with_raw(raw.to_vec())
            };
            r.seal();
            recs.push(r);
        }
        let mut big = EntryRecord::with_raw("abcd".repeat(LARGE_ROW).into_bytes());
        big.seal();
        assert_eq!(big.codec, Codec::Zstd);
        recs.push(big);
        let mut joined = b"earlier records".to_vec();
        for rec in &recs {
            let owned = encode(rec).unwrap();
            let mut borrowed = Vec::new();
            encode_entry_into(&EntryRecordRef::new(rec, &rec.raw), &mut borrowed).unwrap();
            assert_eq!(borrowed, owned);
            let at = joined.len();
            encode_entry_into(&EntryRecordRef::new(rec, &rec.raw), &mut joined).unwrap();
            assert_eq!(&joined[at..], &owned[..]);
            assert_eq!(decode_entry(&joined[at..], 0).unwrap().hash, rec.hash);
        }
    }

    /// Sealing a row from bytes held elsewhere gives the record sealing it owned does.
    #[test]
    fn sealing_from_borrowed_bytes_equals_sealing_the_owned_row() {
        for raw in [
            b"{}\n".to_vec(),
            "abcd".repeat(LARGE_ROW).into_bytes(),
            noise(LARGE_ROW + 10),
        ] {
            let mut owned = EntryRecord::with_raw(raw.clone());
            owned.seal();
            let mut from = EntryRecord {
                raw_len: raw.len() as u64,
                ..EntryRecord::with_raw(Vec::new())
            };
            let replaced = from.seal_from(&raw);
            assert_eq!(replaced, owned.codec == Codec::Zstd);
            if !replaced {
                from.raw = raw.clone();
            }
            assert_eq!(from, owned);
        }
    }

    #[test]
    fn rows_up_to_large_row_stay_plain_in_their_record() {
        // Their block compresses them (crate::row_block).
        for n in [3, 1000, LARGE_ROW] {
            let mut rec = EntryRecord::with_raw(vec![b'a'; n]);
            rec.seal();
            assert_eq!(rec.codec, Codec::Plain, "{n}");
            assert_eq!(rec.hash, *blake3::hash(&vec![b'a'; n]).as_bytes());
        }
    }

    #[test]
    fn large_rows_compress_by_streaming_and_incompressible_ones_stay_plain() {
        // Above LARGE_ROW: compressible text is stored compressed and reads back exactly.
        let line = format!("{{\"text\":\"{}\"}}\n", "abcd".repeat(LARGE_ROW / 2));
        let mut rec = EntryRecord::with_raw(line.clone().into_bytes());
        rec.pack();
        assert_eq!(rec.codec, Codec::Zstd);
        assert!(rec.raw.len() < line.len() / 100, "{} bytes", rec.raw.len());
        let bytes = encode(&rec).unwrap();
        let a = RecordRef::<EntryRecord>::new(&bytes).archived().unwrap();
        assert_eq!(a.raw_bytes().unwrap().as_ref(), line.as_bytes());
        // Incompressible bytes (a xorshift stream) stay plain.
        let noise = noise(2 * LARGE_ROW);
        let mut rec = EntryRecord::with_raw(noise.clone());
        rec.pack();
        assert_eq!(rec.codec, Codec::Plain);
        assert_eq!(rec.raw, noise);
    }

    #[test]
    fn a_damaged_compressed_row_is_an_error_not_a_panic() {
        let mut rec = EntryRecord::with_raw("x".repeat(LARGE_ROW + 1).into_bytes());
        rec.pack();
        assert_eq!(rec.codec, Codec::Zstd);
        let n = rec.raw.len();
        rec.raw.truncate(n / 2);
        let bytes = encode(&rec).unwrap();
        let a = RecordRef::<EntryRecord>::new(&bytes).archived().unwrap();
        assert!(a.raw_bytes().is_err());
        assert!(a.json_text().is_none());
        assert!(decode_entry(&bytes, 0).is_err());
    }
}
