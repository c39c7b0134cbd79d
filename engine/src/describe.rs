//! What the listing commands (`log`, `tree`, `show`, `diff`, …) say about one entry: its kind,
//! model, one-line summary, token estimate and context boundary.
//!
//! The definitions work on the entry's parsed JSON ([`summary`], [`tokens`], [`kind`], …).
//! [`Facts`] gathers what `log` and `tree` print per entry so that the import can store it
//! ([`crate::outline`]), and has two constructors that give the same answer:
//! - [`Facts::from_value`]: the definitions applied to the parsed value;
//! - [`Facts::from_entry`]: the same facts from the typed borrowed view the import has already
//!   parsed (no second parse of the line), for `message` entries of the four common roles; it
//!   returns `None` for anything else, and for any line on which the two could differ, so that
//!   the caller parses the value instead.
//!
//! Invariants:
//! - `Facts::from_entry(e, json)`, when `Some`, equals `Facts::from_value(&parse(json))`
//!   (checked over every entry of the corpus, the fixtures and crafted edge cases);
//! - [`value_parse_safe`] is conservative: `true` only when `serde_json` parses the line into a
//!   `Value` (nesting, lone surrogates and number range are checked; the typed parse has already
//!   checked the syntax), so a line the listing would fail to read never gets facts from the
//!   typed view;
//! - nothing here recurses: nested JSON is scanned with loops and explicit depth counters.

use std::borrow::Cow;

use pisess_formats::entry::{Block, Content, Entry, EntryType, Message, Role};
use pisess_formats::value::{Field, Raw, RawStr, Str};
use serde_json::Value;

use crate::agent::js::len16;
use crate::agent::project::{content_text, entry_messages};
use crate::agent::tokens::estimate_tokens;

fn s<'v>(v: &'v Value, k: &str) -> Option<&'v str> {
    v.get(k).and_then(Value::as_str)
}

/// The entry's type (`?` when it has none).
pub fn entry_type(v: &Value) -> &str {
    s(v, "type").unwrap_or("?")
}

/// The message role of a `message` entry.
pub fn role(v: &Value) -> Option<&str> {
    v.get("message").and_then(|m| s(m, "role"))
}

/// What an entry is: the role for messages, else the entry type.
pub fn kind(v: &Value) -> &str {
    match entry_type(v) {
        "message" => role(v).unwrap_or("message"),
        t => t,
    }
}

/// The model an entry names (assistant messages, model changes).
pub fn model(v: &Value) -> Option<&str> {
    match entry_type(v) {
        "message" => v.get("message").and_then(|m| s(m, "model")),
        "model_change" => s(v, "modelId"),
        _ => None,
    }
}

/// Estimated tokens of the messages an entry contributes.
pub fn tokens(v: &Value) -> u64 {
    entry_messages(v).iter().map(|m| estimate_tokens(m)).sum()
}

/// The keys whose string value names a tool call's target, in the order they are tried.
const TARGET_KEYS: [&str; 6] = ["path", "file_path", "command", "pattern", "query", "url"];

/// A tool call as a short phrase: `read src/x.rs`, `bash cargo test`.
pub fn tool_call_phrase(block: &Value) -> String {
    let name = s(block, "name").unwrap_or("tool");
    let args = block.get("arguments");
    let arg = args
        .and_then(|a| {
            TARGET_KEYS
                .iter()
                .find_map(|k| s(a, k))
                .or_else(|| a.as_object()?.values().find_map(Value::as_str))
        })
        .unwrap_or("");
    phrase(name, first_line(arg))
}

fn phrase(name: &str, arg: &str) -> String {
    if arg.is_empty() {
        name.to_owned()
    } else {
        format!("{name} {arg}")
    }
}

/// The first non-empty line of a text, trimmed.
pub fn first_line(t: &str) -> &str {
    t.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// The text of a message's content blocks (text blocks only).
pub fn message_text(m: &Value) -> String {
    content_text(m.get("content"), "\n")
}

/// A one-line summary of an entry (not yet made terminal-safe).
pub fn summary(v: &Value) -> String {
    match entry_type(v) {
        "message" => {
            let Some(m) = v.get("message") else {
                return String::new();
            };
            let text = message_text(m);
            let line = first_line(&text);
            let calls: Vec<String> = m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|b| s(b, "type") == Some("toolCall"))
                .map(tool_call_phrase)
                .collect();
            match role(v) {
                Some("toolResult") => {
                    let tool = s(m, "toolName").unwrap_or("tool");
                    let err = m.get("isError") == Some(&Value::Bool(true));
                    tool_result_summary(tool, err, line)
                }
                Some("bashExecution") => {
                    format!("$ {}", first_line(s(m, "command").unwrap_or("")))
                }
                Some("system") if line.is_empty() => m
                    .get("sections")
                    .and_then(Value::as_object)
                    .and_then(|o| o.values().find_map(Value::as_str))
                    .map(|t| first_line(t).to_owned())
                    .unwrap_or_default(),
                _ => line_and_calls(line, &calls),
            }
        }
        "compaction" | "branch_summary" => first_line(s(v, "summary").unwrap_or("")).to_owned(),
        "custom_message" => {
            let t = content_text(v.get("content"), "\n");
            format!(
                "{}: {}",
                s(v, "customType").unwrap_or("custom"),
                first_line(&t)
            )
        }
        "model_change" => format!(
            "{}/{}",
            s(v, "provider").unwrap_or("?"),
            s(v, "modelId").unwrap_or("?")
        ),
        "thinking_level_change" => s(v, "thinkingLevel").unwrap_or("").to_owned(),
        // An empty label clears the target's, as no label does (pi's test is truthiness).
        "label" => match s(v, "label").filter(|l| !l.is_empty()) {
            Some(l) => format!("{} ← {l}", s(v, "targetId").unwrap_or("?")),
            None => format!("{} (label removed)", s(v, "targetId").unwrap_or("?")),
        },
        "session_info" => s(v, "name").unwrap_or("").to_owned(),
        "context_edit" => format!("edits {}", s(v, "targetId").unwrap_or("?")),
        "custom" => s(v, "customType").unwrap_or("").to_owned(),
        _ => String::new(),
    }
}

fn tool_result_summary(tool: &str, is_error: bool, line: &str) -> String {
    let err = if is_error { " (error)" } else { "" };
    format!("{tool}{err}: {line}")
}

fn line_and_calls(line: &str, calls: &[String]) -> String {
    match (line.is_empty(), calls.is_empty()) {
        (true, false) => calls.join(", "),
        (false, false) => format!("{line} [{}]", calls.join(", ")),
        _ => line.to_owned(),
    }
}

/// How a compaction or branch summary bounds the context, as text.
pub fn boundary(v: &Value) -> Option<String> {
    match entry_type(v) {
        "compaction" => Some(format!(
            "compaction: earlier entries summarised, kept from {}",
            s(v, "firstKeptEntryId").unwrap_or("?")
        )),
        "branch_summary" => Some(format!(
            "branch summary of the branch left at {}",
            s(v, "fromId").unwrap_or("?")
        )),
        _ => None,
    }
}

/// Whether pi's default `/tree` filter hides the entry when it is not the leaf: an assistant
/// message with no text that did not stop on an error (one that only calls tools).
pub fn tool_only(v: &Value) -> bool {
    if entry_type(v) != "message" || role(v) != Some("assistant") {
        return false;
    }
    let m = &v["message"];
    let has_text = !message_text(m).trim().is_empty();
    let stop = m.get("stopReason").and_then(Value::as_str);
    !has_text && !stop_is_error(stop)
}

fn stop_is_error(stop: Option<&str>) -> bool {
    stop.is_some_and(|s| s != "stop" && s != "toolUse")
}

/// Characters of a summary [`Facts`] keeps: more than any listing stores or shows, few
/// enough that a 200 MB first line is never copied whole.
pub const KEEP_CHARS: usize = 1024;

/// The first [`KEEP_CHARS`] characters of `s`.
fn keep(s: &str) -> &str {
    if s.len() <= KEEP_CHARS {
        return s;
    }
    match s.char_indices().nth(KEEP_CHARS) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// What `log` and `tree` print of one entry, beside its id, parent and time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// The entry's `type` when it is a string ([`entry_type`] shows `?` for `None`).
    pub entry_type: Option<String>,
    /// The message role ([`role`]).
    pub role: Option<String>,
    /// [`model`].
    pub model: Option<String>,
    /// [`summary`], its first [`KEEP_CHARS`] characters.
    pub summary: String,
    /// [`tokens`].
    pub tokens: u64,
    /// [`boundary`].
    pub boundary: Option<String>,
    /// [`tool_only`].
    pub tool_only: bool,
}

impl Facts {
    /// The facts of an entry from its parsed JSON (the definition).
    pub fn from_value(v: &Value) -> Self {
        let mut summary = summary(v);
        let kept = keep(&summary).len();
        summary.truncate(kept);
        Self {
            entry_type: s(v, "type").map(str::to_owned),
            role: role(v).map(str::to_owned),
            model: model(v).map(str::to_owned),
            summary,
            tokens: tokens(v),
            boundary: boundary(v),
            tool_only: tool_only(v),
        }
    }

    /// The facts of a `user`, `assistant`, `toolResult` or `bashExecution` message from the
    /// typed view `e` of the record `json`, without parsing it again; `None` when the entry is
    /// of another kind, or when the answer could differ from [`Facts::from_value`] (see the
    /// module invariants): the caller then parses the value.
    pub fn from_entry(e: &Entry<'_>, json: &str) -> Option<Self> {
        if e.bad_field.is_some() || e.entry_type() != EntryType::Message {
            return None;
        }
        let m: &Message<'_> = e.message.get()?;
        let role = m.role();
        if !matches!(
            role,
            Role::User | Role::Assistant | Role::ToolResult | Role::BashExecution
        ) {
            return None;
        }
        if !value_parse_safe(json) {
            return None;
        }
        // Every piece is cut to KEEP_CHARS before it is copied: the summary's first KEEP_CHARS
        // characters depend on no more than that of each piece.
        let (line, calls) = match m.content.get() {
            Some(Content::Text(t)) => (Cow::Owned(keep(first_line(t)).to_owned()), Vec::new()),
            Some(Content::Blocks(blocks)) => {
                let mut line: Cow<'_, str> = Cow::Borrowed("");
                let mut calls = Vec::new();
                for b in blocks {
                    match b.type_name.get().map(Str::as_str) {
                        Some("text") if line.is_empty() => {
                            if let Some(t) = b.text.get() {
                                line = raw_first_line(t)?;
                            }
                        }
                        Some("toolCall") => calls.push(call_phrase(b)?),
                        _ => {}
                    }
                }
                (line, calls)
            }
            None => (Cow::Borrowed(""), Vec::new()),
        };
        let line = keep(&line);
        let mut summary = match role {
            Role::ToolResult => {
                let tool = keep(m.tool_name.get().map_or("tool", Str::as_str));
                let err = matches!(m.is_error, Field::Value(true));
                tool_result_summary(tool, err, line)
            }
            Role::BashExecution => {
                format!(
                    "$ {}",
                    keep(first_line(m.command.get().map_or("", Str::as_str)))
                )
            }
            _ => line_and_calls(line, &calls),
        };
        let kept = keep(&summary).len();
        summary.truncate(kept);
        let chars = match role {
            Role::User | Role::ToolResult => text_and_image_chars(m.content.get()),
            Role::Assistant => match m.content.get() {
                Some(Content::Blocks(blocks)) => {
                    let mut n = 0usize;
                    for b in blocks {
                        n += match b.type_name.get().map(Str::as_str) {
                            Some("text") => b.text.get().map_or(0, raw_len16),
                            Some("thinking") => b.thinking.get().map_or(0, raw_len16),
                            Some("toolCall") => {
                                b.name.get().map_or(0, |n| len16(n))
                                    + match &b.arguments {
                                        Field::Missing => 0,
                                        Field::Null => "null".len(),
                                        Field::Value(raw) => canonical_len16(raw.get())?,
                                    }
                            }
                            _ => 0,
                        };
                    }
                    n
                }
                _ => 0,
            },
            _ => m.command.get().map_or(0, |c| len16(c)) + m.output.get().map_or(0, raw_len16),
        };
        let tool_only = role == Role::Assistant
            && line.is_empty()
            && !stop_is_error(m.stop_reason.get().map(Str::as_str));
        Some(Self {
            entry_type: Some("message".to_owned()),
            role: m.role.get().map(|r| r.as_str().to_owned()),
            model: m.model.get().map(|r| r.as_str().to_owned()),
            summary,
            tokens: (chars as u64).div_ceil(4),
            boundary: None,
            tool_only,
        })
    }
}

/// Characters of text blocks plus 4800 per image (pi's count for user and tool messages).
fn text_and_image_chars(content: Option<&Content<'_>>) -> usize {
    match content {
        Some(Content::Text(t)) => len16(t),
        Some(Content::Blocks(blocks)) => blocks
            .iter()
            .map(|b| match b.type_name.get().map(Str::as_str) {
                Some("text") => b.text.get().map_or(0, raw_len16),
                Some("image") => 4800,
                _ => 0,
            })
            .sum(),
        None => 0,
    }
}

/// [`tool_call_phrase`] of a typed block; `None` when its arguments have duplicate keys (the
/// parsed value keeps the first key's place and the last key's value).
fn call_phrase(b: &Block<'_>) -> Option<String> {
    let name = keep(b.name.get().map_or("tool", Str::as_str));
    let arg = match &b.arguments {
        Field::Value(raw) => target_arg(raw)?,
        Field::Missing | Field::Null => Cow::Borrowed(""),
    };
    Some(phrase(name, keep(first_line(&arg))))
}

/// The argument [`tool_call_phrase`] picks from raw JSON `arguments`: the first of
/// [`TARGET_KEYS`] holding a string, else the first string value; `""` when there is none (or
/// the arguments are no object); `None` when a key repeats.
fn target_arg<'a>(raw: Raw<'a>) -> Option<Cow<'a, str>> {
    use serde::de::{Deserializer, MapAccess, Visitor};
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Vec<(Str<'de>, Raw<'de>)>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(kv) = map.next_entry::<Str<'de>, Raw<'de>>()? {
                out.push(kv);
            }
            Ok(out)
        }
    }
    let text: &'a str = raw.get();
    if !text.starts_with('{') {
        return Some(Cow::Borrowed(""));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let fields = de.deserialize_map(V).ok()?;
    // A repeated key: pairwise for the few keys a call has, by a set past that (pairwise,
    // 80,000 keys took 3.5 s to import).
    let repeated = if fields.len() <= 16 {
        fields
            .iter()
            .enumerate()
            .any(|(i, (k, _))| fields[..i].iter().any(|(j, _)| j == k))
    } else {
        let mut seen = std::collections::HashSet::with_capacity(fields.len());
        !fields.iter().all(|(k, _)| seen.insert(k.as_str()))
    };
    if repeated {
        return None;
    }
    let string = |r: &Raw<'a>| -> Option<Cow<'a, str>> {
        let t: &'a str = r.get();
        t.starts_with('"')
            .then(|| {
                serde_json::from_str::<Str<'a>>(t)
                    .ok()
                    .map(|s| s.0)
                    .or_else(|| {
                        pisess_formats::value::parse_owned::<String>(t)
                            .ok()
                            .map(Cow::Owned)
                    })
            })
            .flatten()
    };
    let found = TARGET_KEYS
        .iter()
        .find_map(|k| {
            fields
                .iter()
                .find(|(name, _)| name.as_str() == *k)
                .and_then(|(_, v)| string(v))
        })
        .or_else(|| fields.iter().find_map(|(_, v)| string(v)));
    Some(found.unwrap_or(Cow::Borrowed("")))
}

/// [`first_line`] of a raw JSON string, decoding only the lines it looks at; `None` when the
/// text does not decode (the caller then parses the value).
fn raw_first_line<'a>(t: &RawStr<'a>) -> Option<Cow<'a, str>> {
    let raw = t.raw_json();
    let inner = raw.get(1..raw.len().saturating_sub(1))?;
    let bytes = inner.as_bytes();
    let mut start = 0;
    let mut i = 0;
    loop {
        // The next line break: `\n`, or a `\u000a` escape.
        let (end, next) = loop {
            let Some(off) = memchr_backslash(&bytes[i..]) else {
                break (bytes.len(), bytes.len());
            };
            let at = i + off;
            match bytes.get(at + 1) {
                Some(b'n') => break (at, at + 2),
                Some(b'u') => {
                    if bytes
                        .get(at + 2..at + 6)
                        .is_some_and(|h| h.eq_ignore_ascii_case(b"000a"))
                    {
                        break (at, at + 6);
                    }
                    i = at + 6;
                }
                _ => i = at + 2,
            }
            if i >= bytes.len() {
                break (bytes.len(), bytes.len());
            }
        };
        let seg = inner.get(start..end)?;
        let line = if seg.contains('\\') {
            Cow::Owned(pisess_formats::value::parse_owned::<String>(&format!("\"{seg}\"")).ok()?)
        } else {
            Cow::Borrowed(seg)
        };
        if !line.trim().is_empty() {
            return Some(match line {
                Cow::Borrowed(b) => Cow::Borrowed(keep(b.trim())),
                Cow::Owned(o) => Cow::Owned(keep(o.trim()).to_owned()),
            });
        }
        if next >= bytes.len() {
            return Some(Cow::Borrowed(""));
        }
        start = next;
        i = next;
    }
}

fn memchr_backslash(b: &[u8]) -> Option<usize> {
    memchr::memchr(b'\\', b)
}

/// JavaScript's `length` of the string a raw JSON string literal decodes to, counted on the
/// raw text: an escape is one code unit (a surrogate pair is two `\u` escapes, two units).
fn raw_len16(t: &RawStr<'_>) -> usize {
    let raw = t.raw_json().as_bytes();
    let inner = raw.get(1..raw.len().saturating_sub(1)).unwrap_or(&[]);
    // Without `\\` every backslash starts an escape, and every `\u` is a `\u` escape: the
    // length is the code units of the raw bytes less one per escape (its backslash) and four
    // more per `\u` escape (its hex digits). Counted in whole passes, not escape by escape.
    if DOUBLE_BACKSLASH.find(inner).is_none() {
        let (units, backslashes) = units_and_backslashes(inner);
        let u_escapes = BACKSLASH_U.find_iter(inner).count();
        return units.saturating_sub(backslashes + 4 * u_escapes);
    }
    raw_len16_stepwise(inner)
}

/// `\\`, `\u` and `\/` in raw JSON text.
static DOUBLE_BACKSLASH: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\\\\"));
static BACKSLASH_U: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\\u"));
static BACKSLASH_SLASH: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\\/"));

/// The UTF-16 code units of `b` read as UTF-8 (one per leading byte, two for a 4-byte
/// sequence), and its backslashes; in blocks whose sums fit 16-bit lanes, so the loop
/// vectorises.
fn units_and_backslashes(b: &[u8]) -> (usize, usize) {
    let (mut units, mut backslashes) = (0usize, 0usize);
    for block in b.chunks(16_384) {
        let u: u16 = block
            .iter()
            .map(|&c| u16::from(c & 0xC0 != 0x80) + u16::from(c >= 0xF0))
            .fold(0u16, u16::wrapping_add);
        let s: u16 = block
            .iter()
            .map(|&c| u16::from(c == b'\\'))
            .fold(0u16, u16::wrapping_add);
        units += usize::from(u);
        backslashes += usize::from(s);
    }
    (units, backslashes)
}

/// [`raw_len16`] escape by escape (any raw text, `\\` included).
fn raw_len16_stepwise(inner: &[u8]) -> usize {
    // Runs between escapes: an ASCII run is one unit a byte (checked many bytes at a time).
    let run = |b: &[u8]| -> usize {
        if b.is_ascii() {
            b.len()
        } else {
            b.iter()
                .map(|&c| usize::from(c & 0xC0 != 0x80) + usize::from(c >= 0xF0))
                .sum()
        }
    };
    let mut n = 0usize;
    let mut i = 0;
    while i < inner.len() {
        let Some(off) = memchr::memchr(b'\\', &inner[i..]) else {
            n += run(&inner[i..]);
            break;
        };
        n += run(&inner[i..i + off]) + 1;
        i += off
            + if inner.get(i + off + 1) == Some(&b'u') {
                6
            } else {
                2
            };
    }
    n
}

/// `JSON.stringify(JSON.parse(raw)).length` when `raw` is already in the form
/// `JSON.stringify` writes (compact; strings escaped as JavaScript escapes them; numbers in
/// ECMAScript form; no repeated key): then it is `raw`'s own length. `None` otherwise. `raw`
/// is JSON text the typed parse accepted (its escapes are valid JSON escapes).
pub fn canonical_len16(raw: &str) -> Option<usize> {
    let b = raw.as_bytes();
    // JSON text (as the typed parse accepted it) without `\u` and `\/` has only the escapes
    // `JSON.stringify` writes: its strings need only their ends found, a quote at a time.
    let quick = BACKSLASH_U.find(b).is_none() && BACKSLASH_SLASH.find(b).is_none();
    // Keys of the open objects, with the depth of the object each belongs to.
    let mut keys: Vec<(usize, &[u8])> = Vec::new();
    // For each open container: true for an object.
    let mut open: Vec<bool> = Vec::new();
    // Whether the next string in an object is a key.
    let mut want_key = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                open.push(true);
                want_key = true;
                i += 1;
            }
            b'[' => {
                open.push(false);
                want_key = false;
                i += 1;
            }
            b'}' | b']' => {
                let depth = open.len();
                if open.pop()? {
                    while keys.last().is_some_and(|(d, _)| *d == depth) {
                        keys.pop();
                    }
                }
                want_key = false;
                i += 1;
            }
            b',' => {
                want_key = open.last() == Some(&true);
                i += 1;
            }
            b':' => i += 1,
            b'"' => {
                let end = if quick {
                    string_end_without_u(b, i + 1)?
                } else {
                    canonical_string_end(b, i)?
                };
                if want_key {
                    let depth = open.len();
                    let key = &b[i..end];
                    let mine = keys.iter().rev().take_while(|(d, _)| *d == depth);
                    let mut n = 0;
                    for (_, k) in mine {
                        n += 1;
                        if *k == key || n > 64 {
                            return None;
                        }
                    }
                    keys.push((depth, key));
                    want_key = false;
                }
                i = end;
            }
            b't' if b[i..].starts_with(b"true") => i += 4,
            b'f' if b[i..].starts_with(b"false") => i += 5,
            b'n' if b[i..].starts_with(b"null") => i += 4,
            b'-' | b'0'..=b'9' => {
                let end = i + b[i..]
                    .iter()
                    .position(|c| !matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(b.len() - i);
                if !canonical_number(&raw[i..end]) {
                    return None;
                }
                i = end;
            }
            _ => return None,
        }
    }
    open.is_empty().then(|| len16(raw))
}

/// The end (after the closing quote) of the string literal at `b[start]`, if every escape in
/// it is one `JSON.stringify` writes.
fn canonical_string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    loop {
        let off = memchr::memchr2(b'"', b'\\', &b[i..])?;
        i += off;
        if b[i] == b'"' {
            return Some(i + 1);
        }
        match b.get(i + 1)? {
            b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
            b'u' => {
                // Only control characters without a short escape, in lower-case hex.
                let h = b.get(i + 2..i + 6)?;
                let ok = h[0] == b'0'
                    && h[1] == b'0'
                    && matches!(h[2], b'0' | b'1')
                    && matches!(h[3], b'0'..=b'9' | b'a'..=b'f')
                    && !matches!(&h[2..4], b"08" | b"09" | b"0a" | b"0c" | b"0d");
                if !ok {
                    return None;
                }
                i += 6;
            }
            _ => return None,
        }
    }
}

/// Whether a JSON number is written as `JSON.stringify` writes its value.
fn canonical_number(t: &str) -> bool {
    let digits = t.strip_prefix('-').unwrap_or(t);
    let plain_int = !digits.is_empty()
        && digits.bytes().all(|c| c.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
        && digits.len() <= 15;
    if plain_int {
        return t != "-0";
    }
    match pisess_formats::value::parse_owned::<Value>(t) {
        Ok(v @ Value::Number(_)) => pisess_formats::js::to_string(&v) == t,
        _ => false,
    }
}

/// Just past the closing quote of the string whose contents start at `b[i]`, in text without
/// `\u` escapes: the first quote not escaped, i.e. after an even run of backslashes. `None` if
/// the string does not end.
fn string_end_without_u(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        let q = i + memchr::memchr(b'"', b.get(i..)?)?;
        let backslashes = b[i..q].iter().rev().take_while(|&&c| c == b'\\').count();
        if backslashes % 2 == 0 {
            return Some(q + 1);
        }
        i = q + 1;
    }
}

/// Nesting deeper than this, or a number this far from zero, makes [`value_parse_safe`] say
/// no (serde_json's limits are 128 levels and the range of `f64`).
const SAFE_DEPTH: usize = 100;

/// Whether `serde_json` surely parses `json` (a record the typed parser accepted) into a
/// `Value`: no nesting deeper than [`SAFE_DEPTH`], no `\u` escape of a UTF-16 surrogate, and no
/// number that may be out of the range of `f64`. Conservative: `false` only costs a parse.
pub fn value_parse_safe(json: &str) -> bool {
    let b = json.as_bytes();
    // Without any `\u`, an escape is a backslash and one more byte: a string ends at the first
    // quote after an even run of backslashes, found a quote at a time (not an escape at a time).
    let quick = BACKSLASH_U.find(b).is_none();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' if quick => {
                let Some(end) = string_end_without_u(b, i + 1) else {
                    return false;
                };
                i = end;
            }
            b'"' => {
                i += 1;
                loop {
                    // (Past the end only after an escape cut short: not JSON.)
                    let Some(off) = b.get(i..).and_then(|r| memchr::memchr2(b'"', b'\\', r)) else {
                        return false;
                    };
                    i += off;
                    if b[i] == b'"' {
                        i += 1;
                        break;
                    }
                    if b.get(i + 1) == Some(&b'u') {
                        // U+D800..U+DFFF: `\\u` then `d`, then 8..f.
                        let surrogate = b.get(i + 2).is_some_and(|c| matches!(c, b'd' | b'D'))
                            && b.get(i + 3).is_some_and(
                                |c| matches!(c, b'8' | b'9' | b'a'..=b'f' | b'A'..=b'F'),
                            );
                        if surrogate {
                            return false;
                        }
                        i += 6;
                    } else {
                        i += 2;
                    }
                }
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > SAFE_DEPTH {
                    return false;
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let end = i + b[i..]
                    .iter()
                    .position(|c| !matches!(c, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                    .unwrap_or(b.len() - i);
                let t = &json[i..end];
                let exp = t.contains(['e', 'E']);
                if (exp || t.len() > 300)
                    && !t
                        .parse::<f64>()
                        .is_ok_and(|x| x.is_finite() && x.abs() < 1e300)
                {
                    return false;
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A label entry names its label; an empty one clears it, as no label does.
    #[test]
    fn a_label_summary_says_a_cleared_label_is_removed() {
        let label = |l: Value| {
            summary(&serde_json::json!({"type": "label", "id": "l", "targetId": "t1", "label": l}))
        };
        assert_eq!(label("keep".into()), "t1 ← keep");
        assert_eq!(label("".into()), "t1 (label removed)");
        assert_eq!(label(Value::Null), "t1 (label removed)");
    }

    /// [`value_parse_safe`] written plainly, byte by byte, as the reference for its memchr scan.
    fn value_parse_safe_plain(json: &str) -> bool {
        let b = json.as_bytes();
        let (mut depth, mut i) = (0usize, 0);
        while i < b.len() {
            match b[i] {
                b'"' => {
                    i += 1;
                    loop {
                        match b.get(i) {
                            None => return false,
                            Some(b'"') => {
                                i += 1;
                                break;
                            }
                            Some(b'\\') if b.get(i + 1) == Some(&b'u') => {
                                let hi = b.get(i + 2).is_some_and(|c| matches!(c, b'd' | b'D'));
                                let lo = b.get(i + 3).is_some_and(
                                    |c| matches!(c, b'8' | b'9' | b'a'..=b'f' | b'A'..=b'F'),
                                );
                                if hi && lo {
                                    return false;
                                }
                                i += 6;
                            }
                            Some(b'\\') => i += 2,
                            Some(_) => i += 1,
                        }
                    }
                }
                open @ (b'{' | b'[' | b'}' | b']') => {
                    if matches!(open, b'{' | b'[') {
                        depth += 1;
                    } else {
                        depth = depth.saturating_sub(1);
                    }
                    if depth > SAFE_DEPTH {
                        return false;
                    }
                    i += 1;
                }
                c if c == b'-' || c.is_ascii_digit() => {
                    let n = b[i..]
                        .iter()
                        .take_while(|c| b"-+.eE0123456789".contains(c))
                        .count();
                    let t = &json[i..i + n];
                    if t.bytes().any(|c| c == b'e' || c == b'E') || n > 300 {
                        match t.parse::<f64>() {
                            Ok(x) if x.is_finite() && x.abs() < 1e300 => {}
                            _ => return false,
                        }
                    }
                    i += n;
                }
                _ => i += 1,
            }
        }
        true
    }

    #[test]
    fn the_safety_scan_agrees_with_a_plain_one() {
        let long = "x".repeat(40);
        let mut cases: Vec<String> = vec![
            r#"{"a":"b"}"#.into(),
            r#"{"a":"\ud83d\ude00"}"#.into(),
            r#"{"a":"\u00e9","b":1e400}"#.into(),
            r#"{"a":1.5e3,"b":[1,2,{"c":"\"q\""}]}"#.into(),
            format!(r#"{{"k":"{long}\ud800{long}"}}"#),
            format!(r#"{{"k":"{long}\u00ff{long}","n":-0.25}}"#),
            format!(r#"{{"k":"{long}\\","v":"{long}"}}"#),
            format!("{}1{}", "[".repeat(SAFE_DEPTH), "]".repeat(SAFE_DEPTH)),
            format!(
                "{}1{}",
                "[".repeat(SAFE_DEPTH + 1),
                "]".repeat(SAFE_DEPTH + 1)
            ),
            format!(r#"{{"s":"{}"}}"#, "{".repeat(SAFE_DEPTH + 5)),
            format!(r#"{{"n":{}}}"#, "9".repeat(400)),
            r#"{"unterminated":"abc"#.into(),
            r#"{"cut":"abc\"#.into(),
            format!(r#"{{"unterminated":"{long}"#),
        ];
        // Every prefix of the cases: strings, escapes and numbers cut at every byte.
        let prefixes: Vec<String> = cases
            .iter()
            .flat_map(|c| (0..=c.len()).filter_map(|n| c.get(..n).map(str::to_owned)))
            .collect();
        cases.extend(prefixes);
        let mut seen = [0usize; 2];
        for c in &cases {
            let want = value_parse_safe_plain(c);
            assert_eq!(value_parse_safe(c), want, "{c:?}");
            seen[usize::from(want)] += 1;
        }
        // Both answers occur, and the full cases give the ones they were written for.
        assert!(seen[0] > 10 && seen[1] > 10, "{seen:?}");
        assert!(!value_parse_safe(r#"{"a":"\ud83d\ude00"}"#));
        assert!(value_parse_safe(r#"{"a":1.5e3,"b":[1,2,{"c":"\"q\""}]}"#));
    }

    fn typed(json: &str) -> Option<Facts> {
        let e = Entry::parse_lenient(json).ok()?;
        Facts::from_entry(&e, json)
    }

    fn by_value(json: &str) -> Facts {
        Facts::from_value(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn the_typed_view_gives_the_value_facts() {
        let long = "é".repeat(KEEP_CHARS + 10);
        let long_user = format!(
            r#"{{"type":"message","id":"a","message":{{"role":"user","content":"{long}\nnext"}}}}"#
        );
        let long_result = format!(
            r#"{{"type":"message","id":"a","message":{{"role":"toolResult","toolName":"{long}","content":[{{"type":"text","text":"{long}"}}]}}}}"#
        );
        let long_call = format!(
            r#"{{"type":"message","id":"a","message":{{"role":"assistant","content":[{{"type":"text","text":"x"}},{{"type":"toolCall","name":"read","arguments":{{"path":"{long}"}}}}]}}}}"#
        );
        for c in [&long_user, &long_result, &long_call] {
            let t = typed(c).unwrap();
            assert_eq!(t.summary.chars().count(), KEEP_CHARS);
            assert_eq!(t, by_value(c), "{c:.80}");
        }
        let cases = [
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"  \n\nhello\\there\n","timestamp":1}}"#,
            r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"text","text":"\r\n \u000a  first\u0009line\nsecond"},{"type":"image","data":"xx","mimeType":"image/png"}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","model":"m","stopReason":"toolUse","content":[{"type":"thinking","thinking":"hmm é 😀"},{"type":"toolCall","id":"c","name":"read","arguments":{"path":"src/a.rs\nmore","offset":3}},{"type":"toolCall","name":"x","arguments":{"n":1.5,"o":{"p":"q"},"s":"first string"}},{"type":"toolCall","name":"y","arguments":null},{"type":"toolCall","arguments":[1,2]}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","stopReason":"error","content":[{"type":"toolCall","name":"bash","arguments":{"command":"ls"}}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":"plain text counts nothing"}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"text","text":"  "},{"type":"text","text":null}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"toolResult","toolName":"bash","isError":true,"content":[{"type":"text","text":"\n\nerror[E0599]: no method\nmore"}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"toolResult","content":null}}"#,
            r#"{"type":"message","id":"a","message":{"role":"bashExecution","command":"\n cargo test \n","output":"ok\u001b[0m"}}"#,
            r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"toolCall","name":"z","arguments":{"b":true,"c":"\u00e9"}}]}}"#,
        ];
        for c in cases {
            let t = typed(c).unwrap_or_else(|| panic!("no typed facts: {c}"));
            assert_eq!(t, by_value(c), "{c}");
        }
    }

    #[test]
    fn doubtful_lines_are_left_to_the_value_parse() {
        let deep = format!(
            r#"{{"type":"message","id":"a","message":{{"role":"user","content":"x","x":{}1{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        for c in [
            deep.as_str(),
            r#"{"type":"message","id":"a","message":{"role":"user","content":"x","y":"\ud800"}}"#,
            r#"{"type":"message","id":"a","message":{"role":"user","content":"x","y":1e400}}"#,
            r#"{"type":"message","id":"a","message":{"role":"system","content":"x"}}"#,
            r#"{"type":"compaction","id":"a","summary":"s"}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"x","arguments":{"a":"1","a":"2"}}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"x","arguments":{"a": "spaced"}}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"x","arguments":{"a":1.0}}]}}"#,
            r#"{"type":"message","id":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"x","arguments":{"a":"\/"}}]}}"#,
        ] {
            assert!(typed(c).is_none(), "{c}");
        }
        // The value parse itself fails on the first three.
        assert!(serde_json::from_str::<Value>(&deep).is_err());
    }

    /// A call with many argument keys is described as the value parse describes it, and is left
    /// to that parse when a key repeats, however far apart the two are (past 16 keys the
    /// repeat is found with a set instead of pairwise; past 64 keys the canonical length leaves
    /// every call to the value parse).
    #[test]
    fn many_argument_keys_and_a_far_repeat() {
        for n in [3, 16, 17, 40, 60] {
            let keys: Vec<String> = (0..n).map(|i| format!(r#""k{i}":{i}"#)).collect();
            let call = |args: &str| {
                format!(
                    r#"{{"type":"message","id":"a","message":{{"role":"assistant","content":[{{"type":"toolCall","name":"x","arguments":{{{args}}}}}]}}}}"#
                )
            };
            let plain = call(&format!(r#"{},"s":"the target""#, keys.join(",")));
            let t = typed(&plain).unwrap_or_else(|| panic!("{n} keys: no typed facts"));
            assert_eq!(t, by_value(&plain), "{n} keys");
            assert!(t.summary.contains("the target"), "{n} keys: {}", t.summary);
            let repeat = call(&format!(r#"{},"k0":"again""#, keys.join(",")));
            assert!(typed(&repeat).is_none(), "{n} keys and a repeat");
        }
    }

    /// Pieces of raw JSON string text: plain and multi-byte characters and every kind of
    /// escape, `\\` before a `u` or an escape included.
    const STRING_PIECES: [&str; 14] = [
        "a",
        "é",
        "😀",
        "\\n",
        "\\\\",
        "\\\"",
        "\\u00e9",
        "\\ud83d\\ude00",
        "\\u001b",
        "\\\\u0",
        "\\/",
        "\\t",
        " ",
        "x\\\\\\n",
    ];

    #[test]
    fn raw_lengths_are_the_decoded_strings_lengths() {
        let pieces = STRING_PIECES;
        let mut n = 0;
        let mut fast = 0;
        for a in &pieces {
            for b in &pieces {
                for c in &pieces {
                    for d in ["", "long text ", "ü\\n\\n"] {
                        let raw = format!("\"{d}{a}{b}{d}{c}\"");
                        let t: RawStr<'_> = serde_json::from_str(&raw).unwrap();
                        let want = t.utf16_len();
                        assert_eq!(raw_len16(&t), want, "{raw}");
                        let inner = &raw.as_bytes()[1..raw.len() - 1];
                        assert_eq!(raw_len16_stepwise(inner), want, "{raw}");
                        // The quick string scan ends it at its closing quote, not at a
                        // quote inside it nor at the next one after it.
                        if !raw.contains("\\u") {
                            let more = format!("{raw},\"k\"");
                            assert_eq!(
                                string_end_without_u(more.as_bytes(), 1),
                                Some(raw.len()),
                                "{raw}"
                            );
                        }
                        fast += usize::from(DOUBLE_BACKSLASH.find(inner).is_none());
                        n += 1;
                    }
                }
            }
        }
        // Both ways of counting were used.
        assert!(fast > n / 4 && fast < n, "{fast} of {n}");
        // Blocks longer than one 16-bit sum.
        let big = format!("\"{}\"", "😀\\n".repeat(30_000));
        let t: RawStr<'_> = serde_json::from_str(&big).unwrap();
        assert_eq!(raw_len16(&t), t.utf16_len());
    }

    /// Typed facts equal the value's on messages whose strings are made of escapes, quotes and
    /// backslashes (the quick and the stepwise scans), picked by a fixed pseudo-random walk.
    #[test]
    fn the_typed_view_gives_the_value_facts_on_escape_heavy_strings() {
        let more = ["[", "{", "1e5", ",", ":", "\\\\u", "\\\\\\\""];
        let pieces: Vec<&str> = STRING_PIECES.iter().chain(&more).copied().collect();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n as u64) as usize
        };
        let (mut checked, mut typed_some) = (0, 0);
        for _ in 0..3_000 {
            let mut text = || {
                let k = next(12);
                (0..k)
                    .map(|_| pieces[next(pieces.len())])
                    .collect::<String>()
            };
            let (t1, t2, t3) = (text(), text(), text());
            let line = match next(4) {
                0 => format!(
                    r#"{{"type":"message","id":"a","message":{{"role":"user","content":"{t1}"}}}}"#
                ),
                1 => format!(
                    r#"{{"type":"message","id":"a","message":{{"role":"assistant","content":[{{"type":"text","text":"{t1}"}},{{"type":"thinking","thinking":"{t2}"}},{{"type":"toolCall","name":"edit","arguments":{{"path":"{t3}","n":{{"k":"{t1}"}}}}}}]}}}}"#
                ),
                2 => format!(
                    r#"{{"type":"message","id":"a","message":{{"role":"toolResult","toolName":"bash","content":[{{"type":"text","text":"{t1}"}},{{"type":"text","text":"{t2}"}}]}}}}"#
                ),
                _ => format!(
                    r#"{{"type":"message","id":"a","message":{{"role":"bashExecution","command":"{t1}","output":"{t2}"}}}}"#
                ),
            };
            if serde_json::from_str::<Value>(&line).is_err() {
                continue;
            }
            checked += 1;
            if let Some(t) = typed(&line) {
                typed_some += 1;
                assert_eq!(t, by_value(&line), "{line}");
            }
        }
        assert!(
            checked > 2_000 && typed_some > checked / 2,
            "{typed_some} of {checked}"
        );
    }

    #[test]
    fn canonical_lengths() {
        assert_eq!(canonical_len16(r#"{"a":1,"a":2}"#), None);
        assert_eq!(canonical_len16(r#"{"a":100000000000000000000000}"#), None);
        assert_eq!(canonical_len16(r#"[-0]"#), None);
        assert_eq!(canonical_len16(r#""\u00e9""#), None);
        assert_eq!(canonical_len16(r#"{"a":"x\/y"}"#), None);
        assert_eq!(canonical_len16(r#"{"a":"\"","a":1}"#), None);
        for raw in [
            r#"{"a":"say \"hi\"\\","b":"c:\\\\d\n\t"}"#,
            r#"{"a":"\\/","b":["\"]\\",{"c":"\\"}]}"#,
            r#"{"a":"\u001b[0m\\"}"#,
            r#"{"a":[1,-2,0.5,1e+21,"é\n\u001b"],"b":{"a":null}}"#,
            r#"{"x":1e-7}"#,
            r#"{"a":{"b":1},"b":1}"#,
        ] {
            let v: Value = serde_json::from_str(raw).unwrap();
            assert_eq!(
                canonical_len16(raw),
                Some(crate::agent::tokens::json_len16(&v))
            );
        }
    }
}
