//! Turning one physical line into the JSON records it holds.
//!
//! pi parses each line with `JSON.parse` and silently drops any line that fails. pisess instead
//! recovers every complete record on a line — two appends glued together when a newline was
//! lost, or a torn write followed by a good record — and reports what it did.
//!
//! Invariants:
//! - a line that is one valid JSON value yields exactly that value (the common, fast path: the
//!   typed view is parsed straight from the line, once);
//! - records come out in the order they appear on the line, each with its byte offset;
//! - a line that yields nothing is reported (blank lines as notes, everything else as warnings);
//! - falsy values (`null`, `false`, `0`, `""`) are reported and dropped, as pi drops them;
//! - invalid UTF-8 is decoded lossily (U+FFFD), as pi's stream decoder does, and reported.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::entry::Entry;
use crate::problem::{Problem, ProblemKind};
use crate::reader::Line;
use crate::value::{raw_is_truthy, raw_kind};

/// One JSON record found on a line.
#[derive(Debug)]
pub struct Piece<'a> {
    /// The record's JSON text.
    pub json: &'a str,
    /// The record's bytes as they are in the file (the whole line if it had invalid UTF-8).
    pub bytes: &'a [u8],
    /// Byte offset of the record in the file.
    pub offset: u64,
    /// 1-based line number.
    pub line: u64,
    /// Whether the line held more than one record (or recovered text).
    pub glued: bool,
    /// The typed view, or why the record is not an entry (non-objects, or an object whose
    /// `type`/`id`/`parentId`/`timestamp` are of the wrong kind). An object with another field
    /// that does not fit has a partial view with [`Entry::bad_field`] set.
    pub entry: Result<Entry<'a>, String>,
}

impl Piece<'_> {
    /// Whether the record is a JSON object.
    pub fn is_object(&self) -> bool {
        self.json.trim_start().starts_with('{')
    }
}

/// Splits `line` into records and calls `f` with each; problems go to `problems`.
///
/// `last_line` is true for the final line of the file (a final line without a newline that
/// does not parse is then reported as a partial write).
pub fn parse_line<'a, F>(line: &Line<'a>, problems: &mut Vec<Problem>, mut f: F)
where
    F: FnMut(Piece<'_>),
{
    let at = |kind| Problem {
        line: line.number,
        offset: line.offset,
        kind,
    };
    if line.crlf {
        problems.push(at(ProblemKind::Crlf));
    }
    if line.bytes.iter().all(u8::is_ascii_whitespace) {
        // JSON.parse("") throws, so pi skips it; a whitespace-only last line is no torn write.
        problems.push(at(ProblemKind::BlankLine));
        return;
    }
    let text: Cow<'a, str> = match std::str::from_utf8(line.bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(e) => {
            problems.push(at(ProblemKind::InvalidUtf8 {
                valid_up_to: e.valid_up_to(),
            }));
            Cow::Owned(String::from_utf8_lossy(line.bytes).into_owned())
        }
    };
    let lossy = matches!(text, Cow::Owned(_));
    let text: &str = &text;
    let bytes_of = |start: usize, end: usize| -> &'a [u8] {
        if lossy {
            line.bytes
        } else {
            &line.bytes[start..end]
        }
    };

    // Fast path: one object, parsed straight into the typed view.
    if text.trim_start().starts_with('{')
        && let Ok(entry) = Entry::parse(text)
    {
        {
            let start = text.len() - text.trim_start().len();
            f(Piece {
                json: text,
                bytes: bytes_of(0, line.bytes.len()),
                offset: line.offset + start as u64,
                line: line.number,
                glued: false,
                entry: Ok(entry),
            });
            return;
        }
    }

    // Slow path: find every complete value on the line.
    let (values, skipped, error) = split_values(text);
    if values.is_empty() {
        let kind = if !line.terminated {
            ProblemKind::PartialLastLine
        } else {
            let (message, column) = error.unwrap_or_else(|| ("no JSON value".into(), 1));
            ProblemKind::Malformed { message, column }
        };
        problems.push(at(kind));
        return;
    }
    let glued = values.len() > 1 || skipped > 0;
    if glued {
        problems.push(at(ProblemKind::Glued {
            records: values.len(),
            skipped_bytes: skipped,
        }));
    }
    for (start, end) in values {
        let json = &text[start..end];
        let offset = line.offset + start as u64;
        if !json.starts_with('{') {
            let kept = raw_is_truthy(json);
            problems.push(Problem {
                line: line.number,
                offset,
                kind: ProblemKind::NonObject {
                    found: raw_kind(json),
                    kept,
                },
            });
            if !kept {
                continue;
            }
        }
        let entry = if json.starts_with('{') {
            Entry::parse_lenient(json)
        } else {
            Err(format!("a JSON {} is not an entry", raw_kind(json)))
        };
        f(Piece {
            json,
            bytes: bytes_of(start, end),
            offset,
            line: line.number,
            glued,
            entry,
        });
    }
}

/// Byte ranges of values, bytes skipped, and the first error (message, column).
pub type Split = (Vec<(usize, usize)>, usize, Option<(String, usize)>);

/// Byte ranges of the complete JSON values on a line, the number of bytes skipped to recover
/// them, and the first parse error (message, 1-based column) if any text was left unparsed.
pub fn split_values(text: &str) -> Split {
    let mut values = Vec::new();
    let mut skipped = 0;
    let mut first_error = None;
    let mut pos = 0;
    loop {
        let (found, end, err) = stream_from(text, pos);
        values.extend(found);
        match err {
            None => break,
            Some((msg, col)) => {
                first_error.get_or_insert((msg, col));
                // Recover: the next place that looks like the start of a record.
                let search_from = (pos + 1).max(end);
                match next_record_start(text, search_from) {
                    Some(next) => {
                        skipped += next - end;
                        pos = next;
                    }
                    None => {
                        skipped += text.len() - end;
                        break;
                    }
                }
            }
        }
    }
    if values.is_empty() {
        skipped = 0;
    }
    (values, skipped, first_error)
}

/// Parses values from `text[pos..]` until the end or an error. Returns the value ranges, the
/// end of the last good value, and the error (message, column) if one stopped it.
fn stream_from(text: &str, pos: usize) -> Split {
    let rest = &text[pos..];
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
    let mut found = Vec::new();
    let mut end = pos;
    loop {
        match stream.next() {
            None => return (found, end, None),
            Some(Ok(raw)) => {
                let stop = pos + stream.byte_offset();
                let start = stop - raw.get().len();
                found.push((start, stop));
                end = stop;
            }
            Some(Err(e)) => {
                let col = pos + e.column();
                return (
                    found,
                    end,
                    Some((strip_position(&e.to_string()), col.max(1))),
                );
            }
        }
    }
}

fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_owned(),
        None => msg.to_owned(),
    }
}

/// The next `{"` at or after `from` (records start with an object).
fn next_record_start(text: &str, from: usize) -> Option<usize> {
    if from >= text.len() {
        return None;
    }
    memchr::memmem::find(&text.as_bytes()[from..], b"{\"").map(|i| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(src: &str, terminated: bool) -> (Vec<(String, bool, bool)>, Vec<&'static str>) {
        let line = Line {
            bytes: src.as_bytes(),
            number: 7,
            offset: 100,
            crlf: false,
            terminated,
        };
        let mut problems = Vec::new();
        let mut out = Vec::new();
        parse_line(&line, &mut problems, |p| {
            out.push((p.json.to_owned(), p.glued, p.entry.is_ok()));
        });
        (out, problems.iter().map(|p| p.kind.code()).collect())
    }

    #[test]
    fn single_object_is_the_fast_path() {
        let (out, problems) = run(r#"{"type":"label","id":"a"}"#, true);
        assert_eq!(out.len(), 1);
        assert!(problems.is_empty());
    }

    #[test]
    fn glued_records_are_all_recovered() {
        let (out, problems) = run(r#"{"type":"a","id":"1"}{"type":"b","id":"2"}"#, true);
        assert_eq!(
            out.iter().map(|o| o.0.as_str()).collect::<Vec<_>>(),
            [r#"{"type":"a","id":"1"}"#, r#"{"type":"b","id":"2"}"#]
        );
        assert!(out.iter().all(|o| o.1 && o.2));
        assert_eq!(problems, ["glued"]);
    }

    #[test]
    fn torn_write_then_good_record() {
        let (out, problems) = run(r#"{"type":"message","id":"ab{"type":"b","id":"2"}"#, true);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, r#"{"type":"b","id":"2"}"#);
        assert_eq!(problems, ["glued"]);
    }

    #[test]
    fn malformed_blank_partial_and_non_objects() {
        assert_eq!(run("{nope", true).1, ["malformed"]);
        assert_eq!(run(r#"{"type":"mess"#, false).1, ["partial-last-line"]);
        assert_eq!(run("   ", true).1, ["blank-line"]);
        let (out, problems) = run("[1,2,3]", true);
        assert_eq!((out.len(), out[0].2), (1, false));
        assert_eq!(problems, ["non-object"]);
        let (out, problems) = run("null", true);
        assert!(out.is_empty());
        assert_eq!(problems, ["non-object"]);
    }

    #[test]
    fn bad_field_types_are_kept_with_an_error() {
        let (out, problems) = run(r#"{"type":"message","id":7}"#, true);
        assert_eq!(out.len(), 1);
        assert!(!out[0].2);
        assert!(problems.is_empty());
    }

    #[test]
    fn invalid_utf8_is_decoded_lossily() {
        let mut bytes = br#"{"type":"label","id":"a","label":"x"#.to_vec();
        bytes.push(0xff);
        bytes.extend_from_slice(br#""}"#);
        let line = Line {
            bytes: &bytes,
            number: 1,
            offset: 0,
            crlf: false,
            terminated: true,
        };
        let mut problems = Vec::new();
        let mut labels = Vec::new();
        parse_line(&line, &mut problems, |p| {
            labels.push(p.entry.unwrap().label.get().unwrap().as_str().to_owned());
        });
        assert_eq!(labels, ["x\u{fffd}"]);
        assert_eq!(problems[0].kind.code(), "invalid-utf8");
    }
}
