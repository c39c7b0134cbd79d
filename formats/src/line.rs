//! Turning one physical line into the JSON records it holds.
//!
//! pi parses each line with `JSON.parse` and silently drops any line that fails. pisess instead
//! recovers the complete records of a line — two appends glued together when a newline was
//! lost, or a torn write followed by the next append — and reports what it did.
//!
//! The rule (a record is never invented out of another one):
//! - a record starts at the start of the line or right after the end of a complete record on
//!   the same line (white space between allowed): records are taken at top level, left to
//!   right, never searched for inside a piece of text;
//! - a piece that is not a complete value is a record cut short: it is skipped up to the end of
//!   the line, and reported with its line and byte. Nothing nested in it is ever a record;
//! - one exception, for a torn write followed by the next append: a write cut short is a valid
//!   beginning of a record, so the first byte at which the piece stops being valid JSON is
//!   where the next append begins. If a `{"` starts there (the cut was outside a string) or two
//!   bytes before it (the cut was inside a string: the new `{` reads as text, its `"` closes
//!   the string), the piece ends there and a record starts at that `{`. A `{` that the piece
//!   reads as the start of a nested value never starts a record: text such as
//!   `{"type":"custom","data":{"type":"message",…}` without its final `}` yields nothing, even
//!   though it is what a write cut after `"data":` followed by an append would look like;
//! - and for what a crash leaves instead of a torn write: a run of NUL bytes or undecodable
//!   bytes (U+FFFD) where a record may start is skipped when a `{"` follows it right away (the
//!   run opens nothing, so that `{` is still at top level). Any other text there makes the rest
//!   of the line one piece.
//!
//! Invariants:
//! - a line that is one valid JSON value yields exactly that value (the common, fast path: the
//!   typed view is parsed straight from the line, once);
//! - records come out in the order they appear on the line, each with its byte offset;
//! - a line that yields nothing is reported (blank lines as notes, everything else as warnings);
//!   a line that yields records and pieces cut short reports each piece with its byte;
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

/// `text` (the line's text) as one record when it is a single object that parses into the
/// typed view; its bytes are the whole line. Otherwise whether the parse failed on a key
/// written twice ([`crate::duplicate_keys`]).
fn whole_object<'t>(text: &'t str, line: &Line<'t>) -> Result<Piece<'t>, bool> {
    let body = text.trim_start();
    if !body.starts_with('{') {
        return Err(false);
    }
    let entry = Entry::parse(text).map_err(|e| crate::duplicate_keys::is_repeated_key(&e))?;
    Ok(Piece {
        json: text,
        bytes: line.bytes,
        offset: line.offset + (text.len() - body.len()) as u64,
        line: line.number,
        glued: false,
        entry: Ok(entry),
    })
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
    let mut text: &str = &text;
    let bytes_of = |start: usize, end: usize| -> &'a [u8] {
        if lossy {
            line.bytes
        } else {
            &line.bytes[start..end]
        }
    };

    // Fast path: one object, parsed straight into the typed view (its bytes are the whole line,
    // as they are in the file, even where `text` was mended below).
    let mut repeated_key = match whole_object(text, line) {
        Ok(piece) => return f(piece),
        Err(repeated_key) => repeated_key,
    };

    // A lone surrogate escape fails the parse (Rust strings cannot hold one); pi reads it. The
    // line is read with U+FFFD in its place (same length, so offsets hold) and its bytes are
    // kept as they are.
    let cleaned;
    if let Some((c, count)) = crate::value::lone_surrogates_replaced(text) {
        cleaned = c;
        problems.push(at(ProblemKind::LoneSurrogate { count }));
        text = &cleaned;
        match whole_object(text, line) {
            Ok(piece) => return f(piece),
            Err(repeated) => repeated_key = repeated,
        }
    }

    // An object that holds a key twice fails the typed parse; pi's `JSON.parse` keeps the last
    // value in the first one's place, and so does the merged text read here (the bytes are
    // still the line's). Only when the parse failed on one: the merge holds the whole value's
    // outline in memory.
    if repeated_key
        && let Some((merged, count)) = crate::duplicate_keys::merged(text)
        && let Ok(piece) = whole_object(&merged, line)
    {
        problems.push(at(ProblemKind::DuplicateKeys { count }));
        f(piece);
        return;
    }

    // Slow path: find every complete value on the line.
    let split = split_values(text);
    if split.values.is_empty() {
        let kind = if !line.terminated {
            ProblemKind::PartialLastLine
        } else {
            let (message, column) = split
                .first_error()
                .map_or(("no JSON value".into(), 1), |(m, c)| (m.to_owned(), c));
            ProblemKind::Malformed { message, column }
        };
        problems.push(at(kind));
        return;
    }
    let glued = split.values.len() > 1 || !split.fragments.is_empty();
    if glued {
        problems.push(at(ProblemKind::Glued {
            records: split.values.len(),
            torn: split.fragments.len(),
            skipped_bytes: split.skipped_bytes(),
        }));
        for frag in &split.fragments {
            problems.push(Problem {
                line: line.number,
                offset: line.offset + frag.start as u64,
                kind: ProblemKind::TornRecord {
                    message: frag.message.clone(),
                    column: frag.column,
                    bytes: frag.end - frag.start,
                },
            });
        }
    }
    for (start, end) in split.values {
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
        // Each record is parsed strictly once; its error, if any, serves both the repeated-key
        // test and the lenient reading.
        let strict = json.starts_with('{').then(|| Entry::parse(json));
        // A record that holds a key twice is read as the whole line above would be.
        let merged = match &strict {
            Some(Err(e)) if crate::duplicate_keys::is_repeated_key(e) => {
                crate::duplicate_keys::merged(json).filter(|(m, _)| Entry::parse(m).is_ok())
            }
            _ => None,
        };
        if let Some((_, count)) = merged {
            problems.push(Problem {
                line: line.number,
                offset,
                kind: ProblemKind::DuplicateKeys { count },
            });
        }
        let (json, entry) = match (&merged, strict) {
            (Some((m, _)), _) => (m.as_str(), Entry::parse_lenient(m)),
            (None, Some(Ok(e))) => (json, Ok(e)),
            (None, Some(Err(e))) => (json, Entry::lenient_after(json, &e)),
            (None, None) => (
                json,
                Err(format!("a JSON {} is not an entry", raw_kind(json))),
            ),
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

/// What [`split_values`] found on a line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Byte ranges of the complete values, in line order.
    pub values: Vec<(usize, usize)>,
    /// Byte ranges of the pieces that are not a complete value (records cut short), each with
    /// its parse error (message, 1-based column in the line). Nothing inside one is a record.
    pub fragments: Vec<Fragment>,
}

/// A piece of a line that is not a complete JSON value: a record cut short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// Where it starts in the line.
    pub start: usize,
    /// Where it ends (the start of the record after it, or the end of the line).
    pub end: usize,
    /// serde_json's description of why it does not parse.
    pub message: String,
    /// 1-based column (in bytes, in the line) where parsing failed.
    pub column: usize,
}

impl Split {
    /// Bytes of the line in fragments.
    pub fn skipped_bytes(&self) -> usize {
        self.fragments.iter().map(|f| f.end - f.start).sum()
    }

    /// The first parse error of the line (message, 1-based column), if any.
    pub fn first_error(&self) -> Option<(&str, usize)> {
        self.fragments
            .first()
            .map(|f| (f.message.as_str(), f.column))
    }
}

/// The complete JSON values of a line and the pieces that are not (see the module header for
/// the rule: values are taken at top level, left to right; a piece that does not parse is a
/// fragment up to the join with a following record, or to the end of the line).
pub fn split_values(text: &str) -> Split {
    let mut split = Split::default();
    let mut pos = 0;
    loop {
        let (found, end, err) = stream_from(text, pos);
        split.values.extend(found);
        let Some((message, column)) = err else {
            break;
        };
        // The piece that failed starts after the white space that follows the last value.
        let start = end + count_leading_ws(&text.as_bytes()[end..]);
        let next = after_filler(text, start)
            .or_else(|| join_after(text.as_bytes(), start))
            .filter(|&k| k > start);
        split.fragments.push(Fragment {
            start,
            end: next.unwrap_or(text.len()),
            message,
            column,
        });
        match next {
            Some(k) => pos = k,
            None => break,
        }
    }
    split
}

/// The `{"` right after a run of NUL bytes or U+FFFD (undecodable bytes) at `start`: what a
/// crash can leave in place of a torn write (a zero-filled tail, a cut character) before the
/// next append. Such a run opens nothing, so the `{` after it is at top level.
fn after_filler(text: &str, start: usize) -> Option<usize> {
    let rest = &text[start..];
    let run = rest.len() - rest.trim_start_matches(['\0', '\u{FFFD}']).len();
    (run > 0 && rest[run..].starts_with("{\"")).then_some(start + run)
}

pub(crate) fn count_leading_ws(b: &[u8]) -> usize {
    b.iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        .count()
}

/// Value ranges, the end of the last one, and the error (message, column) that stopped them.
type Streamed = (Vec<(usize, usize)>, usize, Option<(String, usize)>);

/// Parses values from `text[pos..]` until the end or an error. Returns the value ranges, the
/// end of the last good value, and the error (message, 1-based column) if one stopped it.
fn stream_from(text: &str, pos: usize) -> Streamed {
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

/// Where a record cut short (starting at `start`) is joined by the next record, if it is: the
/// `{"` that starts the next append. A write cut short is a valid JSON prefix, so the first
/// byte that makes `bytes[start..]` stop being one is the first byte of the next append; the
/// new record starts there (the cut was outside a string), or two bytes before it (the cut was
/// inside a string: the new record's `{` read as text and its `"` closed the string). A `{`
/// that the cut record reads as the start of a nested value is never a join: nothing nested is
/// ever taken as a record. `None` when the piece is a valid JSON prefix to the end of the line
/// (a record cut short at the end of the line, or one whose nesting is too deep to parse).
fn join_after(bytes: &[u8], start: usize) -> Option<usize> {
    let Prefix::Breaks { at, string_closed } = scan_prefix(&bytes[start..]) else {
        return None;
    };
    let at = start + at;
    if bytes[at..].starts_with(b"{\"") {
        return Some(at);
    }
    let k = at.checked_sub(2)?;
    (string_closed == Some(at - start) && bytes[k..].starts_with(b"{\"")).then_some(k)
}

/// How a piece of text reads as the start of one JSON value.
#[derive(Debug, PartialEq, Eq)]
enum Prefix {
    /// The value is complete at this byte (what follows is not part of it).
    Complete(usize),
    /// The text is a valid beginning of a value to its end.
    Open,
    /// The byte at `at` cannot continue a valid beginning of a value. `string_closed` is `at`
    /// when the byte before it closed a string that holds at least one byte.
    Breaks {
        at: usize,
        string_closed: Option<usize>,
    },
}

/// Scans `b` as the beginning of one JSON value (iteratively: any depth) and says where, if
/// anywhere, it stops being one. Numbers are checked only for their characters.
fn scan_prefix(b: &[u8]) -> Prefix {
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        Value,
        ValueOrClose,
        Key,
        KeyOrClose,
        Colon,
        CommaOrClose,
    }
    let mut stack: Vec<u8> = Vec::new();
    let mut want = Want::Value;
    let mut i = 0;
    let mut closed_at = None;
    // After a value: done at top level, else a comma or the container's close.
    let after_value = |stack: &Vec<u8>| {
        if stack.is_empty() {
            None
        } else {
            Some(Want::CommaOrClose)
        }
    };
    let breaks = |at: usize, closed_at: Option<usize>| Prefix::Breaks {
        at,
        string_closed: closed_at.filter(|&c| c == at),
    };
    while i < b.len() {
        let c = b[i];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
            continue;
        }
        match want {
            Want::Colon => {
                if c != b':' {
                    return breaks(i, closed_at);
                }
                want = Want::Value;
                i += 1;
            }
            Want::CommaOrClose => {
                let top = *stack.last().unwrap_or(&b'[');
                if c == b',' {
                    want = if top == b'{' { Want::Key } else { Want::Value };
                    i += 1;
                } else if (c == b'}' && top == b'{') || (c == b']' && top == b'[') {
                    stack.pop();
                    i += 1;
                    match after_value(&stack) {
                        Some(w) => want = w,
                        None => return Prefix::Complete(i),
                    }
                } else {
                    return breaks(i, closed_at);
                }
            }
            Want::Key | Want::KeyOrClose => {
                if c == b'}' && want == Want::KeyOrClose {
                    stack.pop();
                    i += 1;
                    match after_value(&stack) {
                        Some(w) => want = w,
                        None => return Prefix::Complete(i),
                    }
                } else if c == b'"' {
                    match scan_string(b, i) {
                        Ok(end) => {
                            closed_at = (end > i + 2).then_some(end);
                            i = end;
                            want = Want::Colon;
                        }
                        Err(Some(at)) => return breaks(at, None),
                        Err(None) => return Prefix::Open,
                    }
                } else {
                    return breaks(i, closed_at);
                }
            }
            Want::Value | Want::ValueOrClose => {
                if c == b']' && want == Want::ValueOrClose {
                    stack.pop();
                    i += 1;
                    match after_value(&stack) {
                        Some(w) => want = w,
                        None => return Prefix::Complete(i),
                    }
                    continue;
                }
                match c {
                    b'{' => {
                        stack.push(b'{');
                        want = Want::KeyOrClose;
                        i += 1;
                        continue;
                    }
                    b'[' => {
                        stack.push(b'[');
                        want = Want::ValueOrClose;
                        i += 1;
                        continue;
                    }
                    b'"' => match scan_string(b, i) {
                        Ok(end) => {
                            closed_at = (end > i + 2).then_some(end);
                            i = end;
                        }
                        Err(Some(at)) => return breaks(at, None),
                        Err(None) => return Prefix::Open,
                    },
                    b't' | b'f' | b'n' => {
                        let word: &[u8] = match c {
                            b't' => b"true",
                            b'f' => b"false",
                            _ => b"null",
                        };
                        for (j, w) in word.iter().enumerate() {
                            match b.get(i + j) {
                                None => return Prefix::Open,
                                Some(x) if x == w => {}
                                Some(_) => return breaks(i + j, None),
                            }
                        }
                        i += word.len();
                    }
                    b'-' | b'0'..=b'9' => {
                        i += b[i..]
                            .iter()
                            .take_while(|x| {
                                matches!(x, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                            })
                            .count();
                        if i == b.len() {
                            return Prefix::Open;
                        }
                    }
                    _ => return breaks(i, closed_at),
                }
                match after_value(&stack) {
                    Some(w) => want = w,
                    None => return Prefix::Complete(i),
                }
            }
        }
    }
    Prefix::Open
}

/// Scans the string that starts with the `"` at `b[start]`: `Ok(end)` just past its closing
/// quote, `Err(Some(at))` at a byte no JSON string may hold there, `Err(None)` if the text ends
/// inside it.
pub(crate) fn scan_string(b: &[u8], start: usize) -> Result<usize, Option<usize>> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Ok(i + 1),
            b'\\' => match b.get(i + 1) {
                None => return Err(None),
                Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                Some(b'u') => {
                    for j in 2..6 {
                        match b.get(i + j) {
                            None => return Err(None),
                            Some(x) if x.is_ascii_hexdigit() => {}
                            Some(_) => return Err(Some(i + j)),
                        }
                    }
                    i += 6;
                }
                Some(_) => return Err(Some(i + 1)),
            },
            0..=0x1f => return Err(Some(i)),
            _ => i += 1,
        }
    }
    Err(None)
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
        assert_eq!(problems, ["glued", "torn-record"]);
    }

    /// The records a line yields and its problems as `code@byte` (the line starts at byte 100).
    fn split(src: &str) -> (Vec<String>, Vec<String>) {
        let line = Line {
            bytes: src.as_bytes(),
            number: 7,
            offset: 100,
            crlf: false,
            terminated: true,
        };
        let mut problems = Vec::new();
        let mut out = Vec::new();
        parse_line(&line, &mut problems, |p| out.push(p.json.to_owned()));
        let problems = problems
            .iter()
            .map(|p| format!("{}@{}", p.kind.code(), p.offset))
            .collect();
        (out, problems)
    }

    #[test]
    fn nothing_nested_in_a_torn_record_is_a_record() {
        // A custom entry whose data holds a message, cut short before its final `}`.
        let torn = r#"{"type":"custom","customType":"x","id":"b","parentId":"a","data":{"type":"message","id":"zz","parentId":"a","message":{"role":"user","content":"INJECTED","timestamp":1}}"#;
        let (out, problems) = split(torn);
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(problems, ["malformed@100"]);
        // The same after a complete record: that one is kept, the rest is one torn piece.
        let good = r#"{"type":"label","id":"1"}"#;
        let (out, problems) = split(&format!("{good}{torn}"));
        assert_eq!(out, [good]);
        let torn_at = format!("torn-record@{}", 100 + good.len());
        assert_eq!(problems, ["glued@100", torn_at.as_str()]);
        // A nested object followed by text that breaks the record is no record either.
        let (out, _) = split(r#"{"type":"x","data":{"type":"message","id":"zz"}oops"#);
        assert!(out.is_empty(), "{out:?}");
        let (out, _) = split(r#"{"type":"x","data":[{"type":"message","id":"zz"}, 1 2]"#);
        assert!(out.is_empty(), "{out:?}");
        // A write cut where a value was due, then an append: indistinguishable from a nested
        // object, so nothing; a record glued after that is at top level again and kept.
        let (out, _) = split(r#"{"type":"x","data":{"type":"b","id":"2"}"#);
        assert!(out.is_empty(), "{out:?}");
        let (out, _) = split(r#"{"type":"x","data":{"type":"b","id":"2"}{"type":"c","id":"3"}"#);
        assert_eq!(out, [r#"{"type":"c","id":"3"}"#]);
        // A string ending in `{` inside a record cut short is no join.
        let (out, _) = split(r#"{"type":"x","a{":":1}","b":{"type":"m","id":"zz"}"#);
        assert!(out.is_empty(), "{out:?}");
        // Deep nesting, cut short: the whole line is one piece, nothing inside (the scan is
        // iterative: any depth). Complete, it is one record.
        let deep = format!("{}1{}", r#"{"a":"#.repeat(100_000), "}".repeat(99_999));
        let (out, problems) = split(&deep);
        assert!(out.is_empty(), "{}", out.len());
        assert_eq!(problems, ["malformed@100"]);
        let (out, problems) = split(&format!("{deep}}}{deep}"));
        assert_eq!(out.len(), 1);
        assert_eq!(problems, ["glued@100", "torn-record@600101"]);
    }

    #[test]
    fn a_torn_write_is_joined_where_the_next_append_begins() {
        let good = r#"{"type":"c","id":"3"}"#;
        for torn in [
            r#"{"type":"m","id":"ab"#,     // inside a string
            r#"{"type":"m","i"#,           // inside a key
            r#"{"type":"m","id":"a\"#,     // after a backslash
            r#"{"type":"m","id":"a\u00"#,  // inside a \u escape
            r#"{"type":"m","id":"a","#,    // after a comma
            r#"{"type":"m","id":"a""#,     // after a complete value
            r#"{"type":"m","n":12"#,       // inside a number
            r#"{"type":"m","n":tr"#,       // inside a literal
            r#"{"#,                        // after the first brace
            r#"{"type":"m","c":[{"a":"x"#, // deeper, inside a string
        ] {
            let (out, problems) = split(&format!("{torn}{good}"));
            assert_eq!(out, [good], "{torn}");
            assert_eq!(problems, ["glued@100", "torn-record@100"], "{torn}");
        }
        // Two torn writes in a row, then a good record, then a glued one.
        let line = format!(r#"{{"type":"m","id":"a{{"type":"m","id":"b{good} {good}"#);
        let (out, problems) = split(&line);
        assert_eq!(out, [good, good]);
        assert_eq!(
            problems,
            ["glued@100", "torn-record@100", "torn-record@119"]
        );
    }

    #[test]
    fn a_run_of_nul_or_undecodable_bytes_before_a_record_is_skipped() {
        let good = r#"{"type":"c","id":"3"}"#;
        let (out, problems) = split(&format!("\0\0\0{good}"));
        assert_eq!(out, [good]);
        assert_eq!(problems, ["glued@100", "torn-record@100"]);
        let (out, _) = split(&format!("{good} \u{FFFD}{good}"));
        assert_eq!(out, [good, good]);
        // Only right before a record, and only such bytes.
        let (out, problems) = split(&format!("x{good}"));
        assert!(out.is_empty(), "{out:?}");
        assert_eq!(problems, ["malformed@100"]);
        let (out, _) = split(&format!("\0 {good}"));
        assert!(out.is_empty(), "{out:?}");
        let (out, _) = split(r#"{"type":"x","data":"#);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn glued_wording_says_how_many_were_recovered() {
        let line = Line {
            bytes: br#"{"a":1}{"type":"m","id":"ab{"b":2}{"c":"#,
            number: 1,
            offset: 0,
            crlf: false,
            terminated: true,
        };
        let mut problems = Vec::new();
        parse_line(&line, &mut problems, |_| {});
        assert_eq!(
            problems[0].to_string(),
            "line 1 (byte 0): warning: 2 JSON records and 2 broken or cut-short pieces on one \
             line; 2 recovered, 25 bytes skipped (nothing inside the pieces read as a record; pi \
             drops the whole line)"
        );
        assert_eq!(problems.len(), 3);
        assert_eq!(problems[2].offset, 34);
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

    /// pi's `JSON.parse` keeps the last of a repeated key; the typed view did not parse at all,
    /// so the entry lost its id (and its place in the tree).
    #[test]
    fn a_repeated_key_is_read_as_javascript_reads_it() {
        let text = r#"{"type":"label","id":"old","parentId":null,"targetId":"t","label":"one","id":"new","label":"two"}"#;
        let line = Line {
            bytes: text.as_bytes(),
            number: 1,
            offset: 0,
            crlf: false,
            terminated: true,
        };
        let mut problems = Vec::new();
        let mut got = Vec::new();
        parse_line(&line, &mut problems, |p| {
            let e = p.entry.unwrap();
            assert!(e.bad_field.is_none(), "{:?}", e.bad_field);
            got.push((
                e.id.get().unwrap().as_str().to_owned(),
                e.label.get().unwrap().as_str().to_owned(),
                p.bytes == text.as_bytes(),
            ));
        });
        assert_eq!(got, [("new".to_owned(), "two".to_owned(), true)]);
        let codes: Vec<_> = problems.iter().map(|p| p.kind.code()).collect();
        assert_eq!(codes, ["duplicate-key"]);
        assert!(
            problems[0]
                .kind
                .to_string()
                .starts_with("2 key(s) written again")
        );

        // The same in the second of two records glued on one line.
        let glued = format!(r#"{{"type":"label","id":"a","label":"x"}}{text}"#);
        let (out, problems) = run(&glued, true);
        assert_eq!(out.len(), 2);
        assert!(out.iter().all(|o| o.1 && o.2), "{out:?}");
        assert_eq!(problems, ["glued", "duplicate-key"]);
        let line = Line {
            bytes: glued.as_bytes(),
            ..line
        };
        let mut ids = Vec::new();
        parse_line(&line, &mut Vec::new(), |p| {
            ids.push(p.entry.unwrap().id.get().unwrap().as_str().to_owned());
        });
        assert_eq!(ids, ["a", "new"]);
    }
}
