//! Streaming, chunked line reading.
//!
//! [`ChunkReader`] reads a source in large blocks and hands out [`Chunk`]s that each hold whole
//! lines only; the partial line at the end of a block is carried into the next chunk. Memory is
//! bounded by the chunk size plus the longest line, whatever the size of the file, and byte
//! offsets are `u64`, so files past 4 GiB work.
//!
//! Invariants:
//! - every byte of the source after an initial UTF-8 BOM belongs to exactly one [`Line`], in order;
//! - a [`Line`]'s `bytes` exclude the `\n` and a `\r` right before it (`crlf` says it was there);
//! - only the last line of the source can have `terminated == false`;
//! - line numbers are 1-based and count every `\n`-separated line, blank ones included.

use std::io::{self, Read};

/// Default number of bytes read per chunk.
pub const DEFAULT_CHUNK_SIZE: usize = 4 << 20;

/// One line of the source.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    /// The line's bytes, without the line terminator.
    pub bytes: &'a [u8],
    /// 1-based line number.
    pub number: u64,
    /// Byte offset of the line's first byte in the source.
    pub offset: u64,
    /// Whether the line ended with `\r\n`.
    pub crlf: bool,
    /// Whether the line ended with `\n` (false only for a last line without a newline).
    pub terminated: bool,
}

/// A block of whole lines, owned, so it can be handed to another thread.
#[derive(Debug, Default)]
pub struct Chunk {
    buf: Vec<u8>,
    base_offset: u64,
    first_line: u64,
    line_count: u64,
}

impl Chunk {
    /// Offset of the chunk's first byte in the source.
    pub fn offset(&self) -> u64 {
        self.base_offset
    }
    /// Line number of the chunk's first line.
    pub fn first_line(&self) -> u64 {
        self.first_line
    }
    /// Number of lines in the chunk.
    pub fn line_count(&self) -> u64 {
        self.line_count
    }
    /// Bytes held.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Whether the chunk holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// The chunk's raw bytes (whole lines).
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
    /// The lines of the chunk, in order.
    pub fn lines(&self) -> Lines<'_> {
        Lines {
            buf: &self.buf,
            pos: 0,
            offset: self.base_offset,
            number: self.first_line,
        }
    }
}

/// Iterator over the lines of a [`Chunk`].
#[derive(Debug)]
pub struct Lines<'a> {
    buf: &'a [u8],
    pos: usize,
    offset: u64,
    number: u64,
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let (mut bytes, terminated, consumed) = match memchr::memchr(b'\n', rest) {
            Some(i) => (&rest[..i], true, i + 1),
            None => (rest, false, rest.len()),
        };
        let crlf = terminated && bytes.last() == Some(&b'\r');
        if crlf {
            bytes = &bytes[..bytes.len() - 1];
        }
        let line = Line {
            bytes,
            number: self.number,
            offset: self.offset + self.pos as u64,
            crlf,
            terminated,
        };
        self.pos += consumed;
        self.number += 1;
        Some(line)
    }
}

/// Reads a source as a sequence of [`Chunk`]s of whole lines.
#[derive(Debug)]
pub struct ChunkReader<R> {
    src: R,
    carry: Vec<u8>,
    carry_offset: u64,
    next_line: u64,
    chunk_size: usize,
    eof: bool,
    started: bool,
    bom: bool,
}

impl<R: Read> ChunkReader<R> {
    /// A reader with the default chunk size.
    pub fn new(src: R) -> Self {
        Self::with_chunk_size(src, DEFAULT_CHUNK_SIZE)
    }

    /// A reader that reads about `chunk_size` bytes per chunk (at least 4 KiB).
    pub fn with_chunk_size(src: R, chunk_size: usize) -> Self {
        Self {
            src,
            carry: Vec::new(),
            carry_offset: 0,
            next_line: 1,
            chunk_size: chunk_size.max(4096),
            eof: false,
            started: false,
            bom: false,
        }
    }

    /// Whether the source started with a UTF-8 byte order mark (known after the first chunk).
    pub fn had_bom(&self) -> bool {
        self.bom
    }

    /// Reads the next chunk; `None` at the end of the source.
    pub fn next_chunk(&mut self) -> io::Result<Option<Chunk>> {
        let mut buf = std::mem::take(&mut self.carry);
        let mut base = self.carry_offset;
        let mut want = self.chunk_size;
        let mut scanned = 0;
        loop {
            // Read until `want` bytes are buffered or the source ends.
            while buf.len() < want && !self.eof {
                let grow = (want - buf.len()).max(64 << 10);
                // `take` + `read_to_end` fills spare capacity without zeroing it first, and
                // only stops short of `grow` at the end of the source.
                match (&mut self.src).take(grow as u64).read_to_end(&mut buf) {
                    Ok(n) if n < grow => self.eof = true,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if !self.started {
                self.started = true;
                if buf.starts_with(b"\xEF\xBB\xBF") {
                    self.bom = true;
                    buf.drain(..3);
                    base += 3;
                }
            }
            if buf.is_empty() {
                return Ok(None);
            }
            if self.eof {
                self.carry_offset = base + buf.len() as u64;
                return Ok(Some(self.finish(buf, base)));
            }
            // Split after the last newline; a line longer than the buffer makes it grow.
            match memchr::memrchr(b'\n', &buf[scanned..]) {
                Some(i) => {
                    let cut = scanned + i + 1;
                    self.carry = buf[cut..].to_vec();
                    buf.truncate(cut);
                    self.carry_offset = base + cut as u64;
                    return Ok(Some(self.finish(buf, base)));
                }
                None => {
                    scanned = buf.len();
                    want = buf.len().saturating_mul(2);
                }
            }
        }
    }

    fn finish(&mut self, buf: Vec<u8>, base: u64) -> Chunk {
        let newlines = memchr::memchr_iter(b'\n', &buf).count() as u64;
        let line_count = newlines + u64::from(buf.last() != Some(&b'\n') && !buf.is_empty());
        let chunk = Chunk {
            buf,
            base_offset: base,
            first_line: self.next_line,
            line_count,
        };
        self.next_line += line_count;
        chunk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_lines(src: &[u8], size: usize) -> Vec<(String, u64, u64, bool, bool)> {
        let mut r = ChunkReader::with_chunk_size(src, size);
        let mut out = Vec::new();
        while let Some(c) = r.next_chunk().unwrap() {
            for l in c.lines() {
                out.push((
                    String::from_utf8_lossy(l.bytes).into_owned(),
                    l.number,
                    l.offset,
                    l.crlf,
                    l.terminated,
                ));
            }
        }
        out
    }

    #[test]
    fn lines_offsets_and_terminators() {
        let src = b"\xEF\xBB\xBFab\r\n\ncd\nlast";
        for size in [1, 4096, 1 << 20] {
            let got = all_lines(src, size);
            assert_eq!(
                got,
                vec![
                    ("ab".into(), 1, 3, true, true),
                    ("".into(), 2, 7, false, true),
                    ("cd".into(), 3, 8, false, true),
                    ("last".into(), 4, 11, false, false),
                ]
            );
        }
    }

    #[test]
    fn long_lines_grow_the_buffer() {
        let long = "x".repeat(50_000);
        let src = format!("a\n{long}\nb\n");
        let got = all_lines(src.as_bytes(), 4096);
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].0.len(), 50_000);
        assert_eq!(got[2], ("b".into(), 3, 50_003, false, true));
    }

    #[test]
    fn empty_source_has_no_chunks() {
        assert!(all_lines(b"", 4096).is_empty());
    }
}
