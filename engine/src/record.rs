//! Stored records (rkyv) and the redb value wrapper that reads them without copying.
//!
//! Invariants:
//! - every archived type here has alignment 1 (the workspace pins rkyv's `unaligned` format),
//!   so [`RecordRef::archived`] validates and reads straight out of a redb page;
//! - records are only ever read through checked `rkyv::access` (never `access_unchecked`);
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
    /// The session header.
    Header,
    /// A JSON object after the header: an entry (a tree node when it has a string id).
    Entry,
    /// A truthy non-object JSON value after the header (pi keeps it as an id-less entry).
    Value,
    /// A line that yields no record (blank, malformed, torn, falsy, or junk before the header).
    Junk,
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
    /// The bytes this row contributes to the file (line plus terminator).
    pub raw: Vec<u8>,
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
}

impl Record for EntryRecord {
    const TYPE_NAME: &'static str = "pisess::EntryRecordV1";
}

impl ArchivedEntryRecord {
    /// The record's JSON text (`None` for junk rows that are not valid UTF-8).
    pub fn json_text(&self) -> Option<&str> {
        if let Some(j) = self.json.as_ref() {
            return Some(j.as_str());
        }
        let raw = self.raw.as_slice();
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
        std::str::from_utf8(raw).ok()
    }
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

/// Reads an archived entry back into an owned value.
pub fn decode_entry(bytes: &[u8], key: u64) -> Result<EntryRecord, StoreError> {
    let corrupt = |source| StoreError::CorruptRecord {
        table: crate::schema::ENTRIES_NAME,
        key: key.to_string(),
        source,
    };
    let a = rkyv::access::<ArchivedEntryRecord, rancor::Error>(bytes).map_err(corrupt)?;
    rkyv::deserialize::<EntryRecord, rancor::Error>(a).map_err(corrupt)
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
            raw: b"{\"type\":\"x\"}\n".to_vec(),
            json: None,
            id: Some("abc".into()),
            parent_id: None,
            type_name: Some("x".into()),
            role: None,
            timestamp: None,
        };
        let bytes = encode(&rec).unwrap();
        for shift in 0..8 {
            let mut buf = vec![0u8; shift];
            buf.extend_from_slice(&bytes);
            let r = RecordRef::<EntryRecord>::new(&buf[shift..]);
            let a = r.archived().unwrap();
            assert_eq!(a.id.as_ref().map(|s| s.as_str()), Some("abc"));
            assert_eq!(a.json_text(), Some("{\"type\":\"x\"}"));
            assert_eq!(decode_entry(&buf[shift..], 0).unwrap(), rec);
        }
    }
}
