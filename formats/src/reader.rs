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
//! - line numbers are 1-based and count every `\n`-separated line, blank ones included;
//! - a chunk holds at most [`MAX_CHUNK_LINES`] lines, so what a consumer keeps per line (an
//!   import keeps a row of a few hundred bytes each) is bounded too: a 4 MiB chunk of 2-byte
//!   junk lines would otherwise be two million rows;
//! - no line longer than [`MAX_LINE`] bytes is ever held: reading one is an
//!   [`io::ErrorKind::InvalidData`] error naming its line number and offset, so memory stays
//!   bounded by the chunk size plus [`MAX_LINE`].

use std::io::{self, Read};

/// Default number of bytes read per chunk.
pub const DEFAULT_CHUNK_SIZE: usize = 4 << 20;

/// The most lines in one chunk (a chunk of typical entries, a few hundred bytes to kilobytes
/// each, ends at its byte size long before).
pub const MAX_CHUNK_LINES: usize = 32 << 10;

/// The longest line a reader holds (256 MiB). A session line is one JSON value that pi wrote as
/// one JavaScript string, and V8 caps strings at about 512 Mi characters; a longer "line" (say
/// gigabytes of zeros) is not an entry of any session, and holding it would exhaust memory.
pub const MAX_LINE: usize = 256 << 20;

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
    max_line: usize,
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
            max_line: MAX_LINE,
            eof: false,
            started: false,
            bom: false,
        }
    }

    /// Sets the longest line held (default [`MAX_LINE`]; tests use small values).
    pub fn with_max_line(mut self, max_line: usize) -> Self {
        self.max_line = max_line;
        self
    }

    /// A reader of a source that starts part-way through a file (the lines appended since an
    /// earlier read): only a file's first bytes can be a byte order mark, so three BOM bytes at
    /// the start of this source are data, kept in the first line as a reader of the whole file
    /// keeps them there.
    pub fn mid_file(mut self) -> Self {
        self.started = true;
        self
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
                // The rest, but for MAX_CHUNK_LINES lines at most.
                if let Some(n) = memchr::memchr_iter(b'\n', &buf).nth(MAX_CHUNK_LINES - 1)
                    && n + 1 < buf.len()
                {
                    self.carry = buf[n + 1..].to_vec();
                    buf.truncate(n + 1);
                }
                self.carry_offset = base + buf.len() as u64;
                return Ok(Some(self.finish(buf, base)));
            }
            // Split after the last newline (or the MAX_CHUNK_LINES-th); a line longer than the
            // buffer makes it grow.
            match memchr::memrchr(b'\n', &buf[scanned..]) {
                Some(i) => {
                    let cut = match memchr::memchr_iter(b'\n', &buf).nth(MAX_CHUNK_LINES - 1) {
                        Some(n) => (n + 1).min(scanned + i + 1),
                        None => scanned + i + 1,
                    };
                    self.carry = buf[cut..].to_vec();
                    buf.truncate(cut);
                    self.carry_offset = base + cut as u64;
                    return Ok(Some(self.finish(buf, base)));
                }
                None => {
                    if buf.len() > self.max_line {
                        // No newline anywhere in `buf`: it all belongs to line `next_line`.
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "line {} (from byte {}) is longer than {} bytes, the most a \
                                 session line can hold; the file cannot be read",
                                self.next_line, base, self.max_line
                            ),
                        ));
                    }
                    scanned = buf.len();
                    want = buf
                        .len()
                        .saturating_mul(2)
                        .min(self.max_line.saturating_add(1 << 16));
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
    fn a_line_over_the_limit_is_an_error_naming_it_and_memory_stays_bounded() {
        let src = format!("a\n{}\nb\n", "x".repeat(300_000));
        let mut r = ChunkReader::with_chunk_size(src.as_bytes(), 4096).with_max_line(100_000);
        let mut lines = 0;
        let err = loop {
            match r.next_chunk() {
                Ok(Some(c)) => {
                    assert!(c.len() <= 100_000 + (1 << 16), "held {} bytes", c.len());
                    lines += c.line_count();
                }
                Ok(None) => panic!("the long line was read"),
                Err(e) => break e,
            }
        };
        assert_eq!(lines, 1);
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(
            err.to_string()
                .starts_with("line 2 (from byte 2) is longer than 100000 bytes"),
            "{err}"
        );
        // At the limit it still reads.
        let ok = format!("{}\n", "y".repeat(100_000));
        let mut r = ChunkReader::with_chunk_size(ok.as_bytes(), 4096).with_max_line(100_000);
        let c = r.next_chunk().unwrap().unwrap();
        assert_eq!(c.lines().next().unwrap().bytes.len(), 100_000);
        assert!(r.next_chunk().unwrap().is_none());
    }

    #[test]
    fn a_chunk_holds_at_most_max_chunk_lines_lines() {
        let n = 3 * MAX_CHUNK_LINES + 5;
        let src = "1\n".repeat(n);
        let mut r = ChunkReader::with_chunk_size(src.as_bytes(), 1 << 20);
        let mut counts = Vec::new();
        let mut next = 1;
        while let Some(c) = r.next_chunk().unwrap() {
            assert_eq!(c.first_line(), next);
            next += c.line_count();
            counts.push(c.line_count());
            assert_eq!(c.lines().count() as u64, c.line_count());
        }
        let max = MAX_CHUNK_LINES as u64;
        assert_eq!(counts, [max, max, max, 5]);
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
