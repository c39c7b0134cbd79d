//! The terminal: buffered stdout, colour decision, JSON switch, safe text.
//!
//! Invariants: stdout carries data only (progress, warnings and hints go to stderr); text that
//! comes from a session is passed through [`safe`] before it reaches a terminal, so escape
//! sequences and control characters in a session can never act on the user's terminal.

use std::io::{self, BufWriter, IsTerminal, Write};

use crate::cli::{ColorChoice, GlobalArgs};

/// Output state shared by all commands.
pub struct Ui {
    out: BufWriter<io::Stdout>,
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
            out: BufWriter::with_capacity(64 << 10, io::stdout()),
            json: args.json,
            color,
            tty,
        }
    }

    /// The stdout writer.
    pub fn out(&mut self) -> &mut BufWriter<io::Stdout> {
        &mut self.out
    }

    /// Writes one JSON value and a newline (a JSON Lines record).
    pub fn json_line(&mut self, v: &serde_json::Value) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, v)?;
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

fn is_unsafe(c: char) -> bool {
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
}
