//! Blocks of stored rows: the values of `entries.v4` ([`crate::schema::ENTRIES`]).
//!
//! A session's rows are stored a block at a time, so an import compresses and inserts a few
//! dozen kilobytes at once instead of one row at a time (per-row zstd was a third of an
//! import's CPU, and one B-tree insert per row most of its writer thread).
//!
//! Invariants:
//! - a block holds the rows `first..first + rows` (`rows >= 1`) of one session, in key (file)
//!   order, and is stored under `first`; blocks never overlap, so the row with key `k` is in
//!   the last block stored at or below `k`, when that block reaches `k`;
//! - an import cuts a block after the row that brings its records to [`TARGET`] bytes or
//!   [`MAX_ROWS`] rows; an append whose keys continue its session's last block reopens that
//!   block when it is not full, so a file read in appends is cut where one read cuts it;
//! - the value is `body ‖ trailer`: the body is the payload, LZ4-compressed or plain as the
//!   trailer says; the payload is the records one after another, then each record's end offset
//!   in the records (u32 LE); the trailer is the payload's plain length (u32 LE), the rows
//!   (u32 LE) and the codec (one byte);
//! - each record is an rkyv [`crate::record::EntryRecord`] (alignment 1, so it reads in place
//!   at any offset), its line bytes plain unless the row alone is over
//!   [`crate::record::LARGE_ROW`] (then zstd, as the record says);
//! - a payload over [`crate::record::LARGE_ROW`] is stored plain: LZ4 would need a second
//!   full-size buffer for a row the record already compressed.

use std::borrow::Cow;

/// A block is cut once its records reach this many bytes.
pub const TARGET: usize = 64 * 1024;
/// A block is cut once it holds this many rows.
pub const MAX_ROWS: usize = 1024;

/// Bytes of the trailer (plain length, rows, codec).
const TRAILER: usize = 9;
/// Room reserved past [`TARGET`] for the row that fills a block (a longer one grows it once).
const SPARE: usize = 16 * 1024;
/// Codec byte: the body is the payload.
const PLAIN: u8 = 0;
/// Codec byte: the body is the payload as one LZ4 block.
const LZ4: u8 = 1;

/// Why a stored block cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// Shorter than its trailer, or the trailer disagrees with the body.
    #[error("the block is malformed: {0}")]
    Malformed(&'static str),
    /// The body does not decompress.
    #[error("the block does not decompress")]
    Lz4(#[source] lz4_flex::block::DecompressError),
}

/// The rows of a block being filled, as serialised records.
#[derive(Debug, Default)]
pub struct RowBlockBuilder {
    records: Vec<u8>,
    ends: Vec<u32>,
}

impl RowBlockBuilder {
    /// An empty block.
    pub fn new() -> Self {
        Self::default()
    }

    /// A stored block, decoded, to be continued (an append reopening its session's last
    /// block).
    pub fn resume(block: &Block<'_>) -> Result<Self, BlockError> {
        let mut b = Self::new();
        for i in 0..block.rows() {
            b.push(block.record(i)?);
        }
        Ok(b)
    }

    /// Adds a serialised record.
    pub fn push(&mut self, record: &[u8]) {
        self.reserve_block(record.len());
        self.records.extend_from_slice(record);
        self.ends.push(self.records.len() as u32);
    }

    /// Adds the record that `write` appends to the block's records (serialised in place, so
    /// the row's bytes are copied once); `size` is about its length. Returns `write`'s error,
    /// or `Ok(false)` when the block would pass the u32 offsets (no row is added then).
    /// On an error the block is left unusable: the caller gives up the import.
    pub fn push_with<E>(
        &mut self,
        size: usize,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<bool, E> {
        self.reserve_block(size);
        let before = self.records.len();
        write(&mut self.records)?;
        let Ok(end) = u32::try_from(self.records.len()) else {
            self.records.truncate(before);
            return Ok(false);
        };
        self.ends.push(end);
        Ok(true)
    }

    /// On the first row: one buffer for the whole block, offsets and trailer included (grown
    /// by doubling from its first row, it would be reallocated and copied about six times). A
    /// single large row gets a buffer of its own size.
    fn reserve_block(&mut self, first: usize) {
        if self.records.is_empty() {
            let block = TARGET + SPARE + MAX_ROWS * 4 + TRAILER;
            self.records.reserve_exact(block.max(first));
        }
    }

    /// Whether the block is full (the next row starts a new one).
    pub fn is_full(&self) -> bool {
        self.records.len() >= TARGET || self.ends.len() >= MAX_ROWS
    }

    /// The rows in the block.
    pub fn rows(&self) -> usize {
        self.ends.len()
    }

    /// Whether the block has no rows.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The stored value: the payload, compressed when that helps, and the trailer.
    pub fn finish(self) -> Vec<u8> {
        let Self { mut records, ends } = self;
        let rows = ends.len() as u32;
        records.reserve_exact(ends.len() * 4 + TRAILER);
        for e in &ends {
            records.extend_from_slice(&e.to_le_bytes());
        }
        let plain_len = records.len();
        let mut out = if plain_len <= crate::record::LARGE_ROW {
            let z = lz4_flex::block::compress(&records);
            if z.len() < plain_len {
                let mut z = z;
                z.reserve_exact(TRAILER);
                trailer(&mut z, plain_len, rows, LZ4);
                return z;
            }
            records
        } else {
            records
        };
        trailer(&mut out, plain_len, rows, PLAIN);
        out
    }
}

fn trailer(out: &mut Vec<u8>, plain_len: usize, rows: u32, codec: u8) {
    out.extend_from_slice(&(plain_len as u32).to_le_bytes());
    out.extend_from_slice(&rows.to_le_bytes());
    out.push(codec);
}

/// The rows a stored block holds (from its trailer alone, without decompressing it).
pub fn rows_of(value: &[u8]) -> Result<u32, BlockError> {
    Ok(split(value)?.2)
}

/// (body, plain length, rows, codec).
fn split(value: &[u8]) -> Result<(&[u8], usize, u32, u8), BlockError> {
    let Some(at) = value.len().checked_sub(TRAILER) else {
        return Err(BlockError::Malformed("shorter than its trailer"));
    };
    let (body, t) = value.split_at(at);
    let u = |i: usize| u32::from_le_bytes([t[i], t[i + 1], t[i + 2], t[i + 3]]);
    let (plain_len, rows, codec) = (u(0) as usize, u(4), t[8]);
    if rows == 0 {
        return Err(BlockError::Malformed("no rows"));
    }
    Ok((body, plain_len, rows, codec))
}

/// A stored block, its payload plain (borrowed when it was stored plain).
#[derive(Debug, Clone)]
pub struct Block<'a> {
    payload: Cow<'a, [u8]>,
    rows: u32,
}

impl<'a> Block<'a> {
    /// Reads a stored value (decompressing it when it is compressed).
    pub fn decode(value: &'a [u8]) -> Result<Self, BlockError> {
        let (body, plain_len, rows, codec) = split(value)?;
        let payload: Cow<'a, [u8]> = match codec {
            PLAIN if body.len() == plain_len => Cow::Borrowed(body),
            // lz4_flex's bounds-checked decoder: a damaged body is an error, not a panic.
            // Only payloads up to LARGE_ROW are compressed: a larger length is damage, and must
            // not become an allocation.
            LZ4 if plain_len > crate::record::LARGE_ROW + MAX_ROWS * 4 => {
                return Err(BlockError::Malformed("compressed payload over its limit"));
            }
            LZ4 => {
                Cow::Owned(lz4_flex::block::decompress(body, plain_len).map_err(BlockError::Lz4)?)
            }
            PLAIN => return Err(BlockError::Malformed("plain body of the wrong length")),
            _ => return Err(BlockError::Malformed("unknown codec")),
        };
        if payload.len() != plain_len {
            return Err(BlockError::Malformed("payload of the wrong length"));
        }
        let ends_len = rows as usize * 4;
        if ends_len > plain_len {
            return Err(BlockError::Malformed("more rows than bytes"));
        }
        let b = Self { payload, rows };
        // Offsets ascend and stay inside the records.
        let mut prev = 0usize;
        for i in 0..rows {
            let end = b.end(i);
            if end < prev || end > plain_len - ends_len {
                return Err(BlockError::Malformed("record offsets out of order"));
            }
            prev = end;
        }
        Ok(b)
    }

    /// The block as an owned value (for a cache).
    pub fn into_owned(self) -> Block<'static> {
        Block {
            payload: Cow::Owned(self.payload.into_owned()),
            rows: self.rows,
        }
    }

    /// The rows in the block.
    pub fn rows(&self) -> u32 {
        self.rows
    }

    fn records_len(&self) -> usize {
        self.payload.len() - self.rows as usize * 4
    }

    fn end(&self, i: u32) -> usize {
        let at = self.records_len() + i as usize * 4;
        let p = &self.payload[at..at + 4];
        u32::from_le_bytes([p[0], p[1], p[2], p[3]]) as usize
    }

    /// The serialised record of the block's `i`-th row.
    pub fn record(&self, i: u32) -> Result<&[u8], BlockError> {
        if i >= self.rows {
            return Err(BlockError::Malformed("row past the block's end"));
        }
        let start = if i == 0 { 0 } else { self.end(i - 1) };
        // `decode` checked that the offsets ascend inside the records.
        Ok(&self.payload[start..self.end(i)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_of(records: &[&[u8]]) -> Vec<u8> {
        let mut b = RowBlockBuilder::new();
        for r in records {
            b.push(r);
        }
        b.finish()
    }

    #[test]
    fn records_read_back_from_compressed_and_plain_blocks() {
        let text = b"{\"type\":\"message\",\"text\":\"hello hello hello hello\"}".repeat(20);
        let rows: Vec<&[u8]> = vec![b"", b"a", &text, b"{}"];
        let v = block_of(&rows);
        assert_eq!(v[v.len() - 1], LZ4, "repetitive rows compress");
        assert!(v.len() < text.len());
        let b = Block::decode(&v).unwrap();
        assert_eq!(b.rows(), 4);
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(b.record(i as u32).unwrap(), *r);
        }
        assert!(b.record(4).is_err());
        assert_eq!(rows_of(&v).unwrap(), 4);
        // Incompressible bytes are stored plain and read in place.
        let noise = crate::record::noise(5000);
        let v = block_of(&[&noise]);
        assert_eq!(v[v.len() - 1], PLAIN);
        let b = Block::decode(&v).unwrap();
        assert!(matches!(b.payload, Cow::Borrowed(_)));
        assert_eq!(b.record(0).unwrap(), noise.as_slice());
    }

    #[test]
    fn a_resumed_block_finishes_as_one_built_at_once() {
        let rows: Vec<Vec<u8>> = (0..10)
            .map(|i| format!("row {i} ").repeat(i).into_bytes())
            .collect();
        let all = block_of(&rows.iter().map(Vec::as_slice).collect::<Vec<_>>());
        let head = block_of(&rows[..4].iter().map(Vec::as_slice).collect::<Vec<_>>());
        let mut b = RowBlockBuilder::resume(&Block::decode(&head).unwrap()).unwrap();
        for r in &rows[4..] {
            b.push(r);
        }
        assert_eq!(b.finish(), all);
    }

    #[test]
    fn a_block_is_full_at_its_byte_or_row_limit() {
        let mut b = RowBlockBuilder::new();
        b.push(&vec![b'x'; TARGET - 1]);
        assert!(!b.is_full());
        b.push(b"y");
        assert!(b.is_full());
        let mut b = RowBlockBuilder::new();
        for _ in 0..MAX_ROWS - 1 {
            b.push(b"r");
        }
        assert!(!b.is_full());
        b.push(b"r");
        assert!(b.is_full());
    }

    #[test]
    fn damaged_blocks_are_errors_not_panics() {
        let text = b"abcabcabcabcabcabcabcabcabcabcabcabc".repeat(30);
        let v = block_of(&[&text, b"tail"]);
        assert!(Block::decode(&v).is_ok());
        // Every truncation and every single-byte change decodes to an error or to some block,
        // never a panic.
        for cut in 0..v.len() {
            let _ = Block::decode(&v[..cut]).map(|b| b.record(0).map(<[u8]>::len));
        }
        for i in 0..v.len() {
            for flip in [1u8, 0x80, 0xff] {
                let mut d = v.clone();
                d[i] ^= flip;
                if let Ok(b) = Block::decode(&d) {
                    for r in 0..b.rows() {
                        let _ = b.record(r);
                    }
                }
            }
        }
        assert!(Block::decode(&[]).is_err());
        assert!(
            Block::decode(&[0, 0, 0, 0, 0, 0, 0, 0, PLAIN]).is_err(),
            "zero rows"
        );
    }
}
