//! The terminal: buffered stdout, colour decision, JSON switch, safe text.
//!
//! Invariants: stdout carries data only (progress, warnings and hints go to stderr); text that
//! comes from a session is passed through [`safe`] before it reaches a terminal, so escape
//! sequences and control characters in a session can never act on the user's terminal.

use std::io::{self, BufWriter, IsTerminal, Write};

use crate::cli::{ColorChoice, GlobalArgs};
use crate::pager::Pager;

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
    /// Decides colour, buffering and paging from the flags and the environment; `lists` says
    /// whether the command is one whose output a terminal pages ([`crate::pager`]).
    pub fn new(args: &GlobalArgs, lists: bool) -> Self {
        let tty = io::stdout().is_terminal();
        let pager = (tty && lists && !args.no_pager)
            .then(crate::pager::command_from_env)
            .flatten()
            .map(Pager::new);
        // `NO_COLOR`, and a terminal that says it cannot show colour (`TERM=dumb`), as git
        // and ripgrep read it.
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
            || std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        let color = match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        Self {
            out: BufWriter::with_capacity(
                64 << 10,
                Stdout {
                    inner: io::stdout(),
                    json_tty: args.json && tty,
                    pending: Vec::new(),
                    pager,
                },
            ),
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

    /// Ends the pager, if one runs: closes its input and waits for it. Call after the last
    /// flush; what is written afterwards fails as to a closed pipe.
    pub fn finish_pager(&mut self) {
        let out = self.out.get_mut();
        if out.pager.is_some() {
            // What `Drop` would write, while the pager still reads.
            out.send_pending();
        }
        if let Some(p) = out.pager.as_mut() {
            p.finish();
        }
    }
}

/// stdout, whose write errors say that stdout failed ("cannot write to stdout: No space left
/// on device"): a command that wrote a file and then could not report it said only "No space
/// left on device". The error's kind is kept (a closed pipe is still told apart).
pub struct Stdout {
    inner: io::Stdout,
    /// JSON bound for a terminal: the characters [`safe`] escapes that JSON leaves raw (DEL,
    /// the C1 controls such as U+009B, which some terminals take for `ESC [`, and the bidi
    /// overrides) are written as JSON escapes (`\u009b`), which read back as the same text.
    json_tty: bool,
    /// The start of such a character that the last write cut (at most 2 bytes).
    pending: Vec<u8>,
    /// The pager the output goes through, started at the first write ([`crate::pager`]).
    pager: Option<Pager>,
}

/// The failure of a write to stdout (the cause of the [`io::Error`] [`Stdout`] returns).
#[derive(Debug, thiserror::Error)]
#[error("cannot write to stdout: {0}")]
pub struct StdoutFailed(io::Error);

impl Stdout {
    fn wrap(e: io::Error) -> io::Error {
        io::Error::new(e.kind(), StdoutFailed(e))
    }

    /// Writes `buf` with the characters described at [`Stdout::json_tty`] escaped; a cut one
    /// is kept for the next write.
    fn write_json_tty(&mut self, buf: &[u8]) -> io::Result<()> {
        let out = json_tty_bytes(&mut self.pending, buf);
        self.send(&out)
    }

    /// Writes the start of a character the output ended in, as it is (a write error is
    /// dropped: the output is over).
    fn send_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            let _ = self.send(&pending);
        }
    }

    /// Writes `buf` to the pager, or to stdout when there is none.
    fn send(&mut self, buf: &[u8]) -> io::Result<()> {
        crate::pager::write_all(self.pager.as_mut(), &mut self.inner, buf).map_err(Self::wrap)
    }
}

/// `buf` (after what `pending` held) with the characters described at [`Stdout::json_tty`]
/// written as JSON escapes; the start of one that `buf` cuts is left in `pending`.
fn json_tty_bytes(pending: &mut Vec<u8>, buf: &[u8]) -> Vec<u8> {
    let mut bytes = std::mem::take(pending);
    bytes.extend_from_slice(buf);
    let mut out = Vec::with_capacity(bytes.len());
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match json_tty_escape(&bytes[i..]) {
            Escape::No => i += 1,
            Escape::Cut => {
                *pending = bytes[i..].to_vec();
                break;
            }
            Escape::Yes(c, n) => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(format!("\\u{c:04x}").as_bytes());
                i += n;
                start = i;
            }
        }
    }
    out.extend_from_slice(&bytes[start..i.min(bytes.len())]);
    out
}

/// What [`json_tty_escape`] found at the start of some bytes.
enum Escape {
    /// Nothing to escape here.
    No,
    /// The start of a character to escape, cut by the end of the bytes.
    Cut,
    /// A character to escape (its code point), and its length in bytes.
    Yes(u32, usize),
}

/// Whether `b` starts with DEL, a C1 control (U+0080–U+009F) or a bidi control (U+200E,
/// U+200F, U+202A–U+202E, U+2066–U+2069), as UTF-8.
fn json_tty_escape(b: &[u8]) -> Escape {
    match b {
        [0x7f, ..] => Escape::Yes(0x7f, 1),
        [0xc2] | [0xe2] | [0xe2, 0x80 | 0x81] => Escape::Cut,
        [0xc2, x @ 0x80..=0x9f, ..] => Escape::Yes(u32::from(*x), 2),
        [0xe2, 0x80, x @ (0x8e | 0x8f | 0xaa..=0xae), ..] => {
            Escape::Yes(0x2000 + u32::from(*x) - 0x80, 3)
        }
        [0xe2, 0x81, x @ 0xa6..=0xa9, ..] => Escape::Yes(0x2040 + u32::from(*x) - 0x80, 3),
        _ => Escape::No,
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.json_tty {
            self.write_json_tty(buf)?;
            return Ok(buf.len());
        }
        if self.pager.is_some() {
            self.send(buf)?;
            return Ok(buf.len());
        }
        self.inner.write(buf).map_err(Self::wrap)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if self.json_tty {
            return self.write_json_tty(buf);
        }
        self.send(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        // The pager's input is a pipe, which holds no buffer of its own.
        self.inner.flush().map_err(Self::wrap)
    }
}

impl Drop for Stdout {
    fn drop(&mut self) {
        // The output ended inside a character: its bytes as they are.
        self.send_pending();
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

    /// JSON for a terminal: DEL, C1 and bidi controls become JSON escapes however the bytes
    /// are cut into writes, and the result still parses to the same text.
    #[test]
    fn json_for_a_terminal_escapes_what_json_leaves_raw() {
        let text = "a\u{9b}31m b\u{202e}c\u{7f}d\u{2066}é\u{85}€\u{200f}";
        let json = serde_json::to_string(&serde_json::json!({ "t": text })).unwrap();
        let want = r#"{"t":"a\u009b31m b\u202ec\u007fd\u2066é\u0085€\u200f"}"#;
        for step in 1..=json.len() {
            let mut pending = Vec::new();
            let mut out = Vec::new();
            for part in json.as_bytes().chunks(step) {
                out.extend(json_tty_bytes(&mut pending, part));
            }
            assert!(pending.is_empty(), "{step}");
            let got = String::from_utf8(out).unwrap();
            assert_eq!(got, want, "{step}");
            let back: serde_json::Value = serde_json::from_str(&got).unwrap();
            assert_eq!(back["t"], text);
        }
    }

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
