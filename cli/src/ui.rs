//! The terminal: buffered stdout, colour decision, JSON switch, safe text.
//!
//! Invariants: stdout carries data only (progress, warnings and hints go to stderr); text that
//! comes from a session is passed through [`safe`] before it reaches a terminal, so escape
//! sequences and control characters in a session can never act on the user's terminal.

use std::io::{self, BufWriter, IsTerminal, Write};

use crate::cli::{ColorChoice, GlobalArgs};

/// Output state shared by all commands.
pub struct Ui {
    out: BufWriter<Stdout>,
    /// Print JSON instead of text.
    pub json: bool,
    /// Use colour.
    pub color: bool,
    /// Whether stdout is a terminal.
    pub tty: bool,
}

impl Ui {
    /// Decides colour and buffering from the flags and the environment.
    pub fn new(args: &GlobalArgs) -> Self {
        let tty = io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        Self {
            out: BufWriter::with_capacity(64 << 10, Stdout(io::stdout())),
            json: args.json,
            color,
            tty,
        }
    }

    /// The stdout writer.
    pub fn out(&mut self) -> &mut BufWriter<Stdout> {
        &mut self.out
    }

    /// Writes one JSON value and a newline (a JSON Lines record).
    pub fn json_line(&mut self, v: &serde_json::Value) -> io::Result<()> {
        pisess_formats::js::to_writer(&mut self.out, v)?;
        self.out.write_all(b"\n")
    }

    /// Wraps `s` in an ANSI style when colour is on.
    pub fn paint(&self, style: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{style}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    /// Flushes stdout.
    pub fn flush(&mut self) -> Result<(), crate::command_error::CommandError> {
        self.out.flush().map_err(Into::into)
    }
}

/// stdout, whose write errors say that stdout failed ("cannot write to stdout: No space left
/// on device"): a command that wrote a file and then could not report it said only "No space
/// left on device". The error's kind is kept (a closed pipe is still told apart).
pub struct Stdout(io::Stdout);

/// The failure of a write to stdout (the cause of the [`io::Error`] [`Stdout`] returns).
#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
pub struct StdoutFailed(io::Error);

impl Stdout {
    fn wrap(e: io::Error) -> io::Error {
        io::Error::new(e.kind(), StdoutFailed(e))
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(Self::wrap)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(Self::wrap)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(Self::wrap)
    }
}

/// A writer that drops what is written once its reader has closed the pipe (and notes it), so
/// that a command whose answer is only known at the end of its output still finds it.
pub struct UntilClosed<W> {
    inner: W,
    /// Whether the pipe was found closed.
    pub closed: bool,
}

impl<W: Write> UntilClosed<W> {
    /// Writes to `inner` until its pipe is closed.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            closed: false,
        }
    }

    fn went<T>(&mut self, r: io::Result<T>, gone: T) -> io::Result<T> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(gone)
            }
            r => r,
        }
    }
}

impl<W: Write> Write for UntilClosed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        let r = self.inner.write(buf);
        self.went(r, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let r = self.inner.flush();
        self.went(r, ())
    }
}

/// `n` and the noun for it: `1 error`, `2 errors`, `0 errors`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Text from a session made safe for a terminal: control characters (other than tab) and
/// escape sequences are shown as visible `\u{…}` escapes, never sent raw.
pub fn safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A writer for whole documents (an export, a migrated file) bound for a terminal: what
/// [`safe`] escapes is shown escaped here too, except the newline, which keeps the document's
/// lines; a byte that is not UTF-8 is shown as `\x{NN}`. A character split between two writes
/// is held back until the next one, so the result does not depend on how the text was cut;
/// [`SafeWriter::finish`] shows what is left of an unfinished one.
pub struct SafeWriter<W: Write> {
    inner: W,
    /// The start of a character that the last write cut (at most 3 bytes).
    pending: Vec<u8>,
}

impl<W: Write> SafeWriter<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }

    /// Writes what a cut character left behind (as escapes) and flushes.
    pub fn finish(mut self) -> io::Result<W> {
        for b in std::mem::take(&mut self.pending) {
            write!(self.inner, "\\x{{{b:02x}}}")?;
        }
        self.inner.flush()?;
        Ok(self.inner)
    }

    fn put(&mut self, s: &str) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in s.char_indices() {
            if c != '\n' && is_unsafe(c) {
                self.inner.write_all(&s.as_bytes()[start..i])?;
                write!(self.inner, "{}", c.escape_unicode())?;
                start = i + c.len_utf8();
            }
        }
        self.inner.write_all(&s.as_bytes()[start..])
    }
}

impl<W: Write> Write for SafeWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let held;
        let mut rest = if self.pending.is_empty() {
            buf
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(buf);
            held = joined;
            &held[..]
        };
        while !rest.is_empty() {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    self.put(s)?;
                    break;
                }
                Err(e) => {
                    let (good, bad) = rest.split_at(e.valid_up_to());
                    // `good` is valid UTF-8 by `valid_up_to`'s definition.
                    self.put(std::str::from_utf8(good).unwrap_or_default())?;
                    let Some(n) = e.error_len() else {
                        // A character cut at the end of this write: keep it for the next.
                        self.pending = bad.to_vec();
                        break;
                    };
                    for b in &bad[..n] {
                        write!(self.inner, "\\x{{{b:02x}}}")?;
                    }
                    rest = &bad[n..];
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_never_reach_the_terminal() {
        assert_eq!(safe("plain"), "plain");
        assert_eq!(safe("a\x1b[31mred\x07"), "a\\u{1b}[31mred\\u{7}");
        assert_eq!(safe("x\ny"), "x\\u{a}y");
    }

    /// `text` through a [`SafeWriter`] cut into writes of `step` bytes.
    fn through(text: &[u8], step: usize) -> String {
        let mut w = SafeWriter::new(Vec::new());
        for part in text.chunks(step) {
            assert_eq!(w.write(part).unwrap(), part.len());
        }
        String::from_utf8(w.finish().unwrap()).unwrap()
    }

    #[test]
    fn a_document_for_the_terminal_keeps_its_lines_and_shows_escapes_however_it_is_cut() {
        let text = "a\x1b]0;t\x07b\n\u{202e}é\r\tc\n".as_bytes();
        let want = "a\\u{1b}]0;t\\u{7}b\n\\u{202e}é\\u{d}\tc\n";
        for step in 1..=text.len() {
            assert_eq!(through(text, step), want, "step {step}");
        }
        // Bytes that are not UTF-8, in the middle and cut off at the end.
        let bad = b"x\xff\xc3(\n\xe2\x80";
        for step in 1..=bad.len() {
            assert_eq!(
                through(bad, step),
                "x\\x{ff}\\x{c3}(\n\\x{e2}\\x{80}",
                "step {step}"
            );
        }
    }
}
