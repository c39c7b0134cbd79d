//! `pisess grep PATTERN`: search message text and tool output across the stored sessions.
//!
//! Invariants:
//! - what is searched is the *decoded* text of an entry's fields (text and thinking blocks,
//!   tool-call arguments, tool output, bash commands and output, compaction and branch
//!   summaries, custom messages), one line at a time, never the JSON syntax around it;
//! - the raw-byte pre-filter only ever skips rows that cannot match: a match in a decoded
//!   string starts with one of the regex's prefix literals, and that literal appears in the
//!   stored JSON text in its JSON-escaped form (the escaping `JSON.stringify` and serde_json
//!   share). Rows whose text uses optional escapes (`\uXXXX`, `\/`) could hide a literal, so
//!   they are always decoded. Patterns without a usable prefix literal decode every row;
//! - rows are read through the store's snapshot (`Snapshot::with_entry` + `json_text`),
//!   blocks of rows in parallel (rayon), and printed in file order, sessions in path order;
//!   nothing is held per session beyond its row keys and one block's results;
//! - every piece of session text printed for a human passes through [`safe`].

use std::borrow::Cow;
use std::io::Write;

use anyhow::anyhow;
use memchr::memmem;
use pisess_engine::{SessionKey, SessionRecord, Snapshot};
use regex::{Regex, RegexBuilder};

/// The most a compiled pattern may take (ripgrep's default `--regex-size-limit`, 100 MiB).
const REGEX_SIZE_LIMIT: usize = 100 << 20;
use serde_json::{Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{self as sa, open_session_read, open_store_to_query};
use crate::ui::{Ui, safe};

/// Search message text and tool output across sessions (a regex, like ripgrep).
///
/// PATTERN is a regular expression (Rust `regex` syntax) unless -F is given. It is matched
/// against each line of: message text and thinking, tool-call arguments, tool output, bash
/// commands and their output, compaction and branch summaries, and custom messages. Without
/// --session every session in the store is searched (import pi's folder first with
/// `pisess import`).
///
/// Output: one line per matching line, grouped by session: entry id, kind, the field and its
/// line number, and the line cut around the match.
///
/// With -l, only the file of each session with a match, one per line (a session's search stops
/// at its first match); with -c, `FILE:COUNT` per session with a match, COUNT its matching
/// lines. -m NUM stops each session's search after NUM matching lines.
///
/// With --json: JSON Lines, `{"type":"match", sessionId, file, entryId, entryType, role,
/// timestamp, field, line, snippet, match}` per matching line (with -l `{"type":"session",
/// sessionId, file}` per session instead, with -c `{"type":"count", sessionId, file, matches,
/// entries}`), then one `{"type":"summary", matches, entries, sessions, rowsScanned,
/// rowsDecoded}`.
///
/// Exit status: 0 when something matched, 1 when nothing did, 2 on error.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("listing").args(["files_with_matches", "count"])))]
pub struct GrepArgs {
    /// The regular expression (or, with -F, the text) to look for.
    pub pattern: String,
    /// Only this session: a file, a session id or unique prefix, or @latest.
    #[arg(long, value_name = "SESSION")]
    pub session: Option<String>,
    /// Only entries of this kind: a message role (`user`, `assistant`, `toolResult`,
    /// `bashExecution`, …) or an entry type (`compaction`, `branch_summary`, `custom_message`).
    /// Other values (an extension's own) are matched as written; one that is none of pi's and
    /// matches nothing gets a warning listing pi's. `--type` is the same option (its name in
    /// `log`).
    #[arg(long, visible_alias = "type", value_name = "R")]
    pub role: Option<String>,
    /// Only entries written on or after DATE (`YYYY-MM-DD`, midnight UTC; an RFC 3339 time
    /// such as `2026-01-31T12:00:00Z` or `…+02:00`; or an age such as `7d`), by their
    /// `timestamp` read as pi's `new Date(…)` reads it; an entry without a valid one is left
    /// out.
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// Treat PATTERN as a literal text, not a regex.
    #[arg(short = 'F', long = "fixed-strings")]
    pub fixed: bool,
    /// Match case-insensitively.
    #[arg(short = 'i', long = "ignore-case")]
    pub ignore_case: bool,
    /// Match whole words only: no word character just before or just after the match.
    #[arg(short = 'w', long = "word-regexp")]
    pub word: bool,
    /// Print only the file of each session with a match, and stop searching a session at its
    /// first match.
    #[arg(short = 'l', long = "files-with-matches", conflicts_with = "count")]
    pub files_with_matches: bool,
    /// Print only the number of matching lines of each session with a match, as `FILE:COUNT`.
    #[arg(short = 'c', long = "count")]
    pub count: bool,
    /// Stop searching a session after NUM matching lines.
    #[arg(short = 'm', long = "max-count", value_name = "NUM")]
    pub max_count: Option<u64>,
    /// With `-l` or `-c`: end each file name with a NUL byte, for `xargs -0` (as `rg -0`).
    #[arg(short = '0', long = "null", requires = "listing")]
    pub null: bool,
}

/// What `grep` prints for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every matching line.
    Lines,
    /// The session's file, once (`-l`).
    Files,
    /// The session's file and its number of matching lines (`-c`).
    Count,
}

impl Mode {
    fn of(args: &GrepArgs) -> Self {
        if args.files_with_matches {
            Self::Files
        } else if args.count {
            Self::Count
        } else {
            Self::Lines
        }
    }

    /// Matching lines after which a session's search stops.
    fn limit(self, args: &GrepArgs) -> Option<u64> {
        match self {
            Self::Files => Some(args.max_count.map_or(1, |m| m.min(1))),
            Self::Lines | Self::Count => args.max_count,
        }
    }
}

/// The compiled pattern and its raw-byte pre-filter.
struct Matcher {
    re: Regex,
    pre: Prefilter,
    /// Finds `\u` and `\/`, the escapes that can hide a literal in the raw text.
    backslash_u: memmem::Finder<'static>,
    backslash_slash: memmem::Finder<'static>,
}

enum Prefilter {
    /// No usable literal: every row is decoded.
    None,
    /// A row can match only if it contains this (JSON-escaped) literal.
    One(Box<memmem::Finder<'static>>),
    /// A row can match only if it contains one of these (JSON-escaped) literals.
    Any(regex::bytes::Regex),
}

impl Matcher {
    fn new(args: &GrepArgs) -> Result<Self, CommandError> {
        if names_a_newline(&args.pattern, args.fixed) {
            // Texts are searched line by line (as ripgrep searches), so such a pattern could
            // never match: refused, as ripgrep refuses it.
            return Err(CommandError::with_hint(
                anyhow!(
                    "the pattern {:?} holds a line break, and text is searched line by line",
                    args.pattern
                ),
                "search for one line of it",
            ));
        }
        let mut pattern = if args.fixed {
            regex::escape(&args.pattern)
        } else {
            args.pattern.clone()
        };
        if args.word {
            // ripgrep's -w: the match may not touch a word character on either side (half
            // boundaries, so a pattern that starts or ends with a non-word character still
            // matches where a plain `\b` would not).
            pattern = format!(r"\b{{start-half}}(?:{pattern})\b{{end-half}}");
        }
        let re = RegexBuilder::new(&pattern)
            .case_insensitive(args.ignore_case)
            // ripgrep's default limit (`--regex-size-limit`), ten times the crate's: a
            // pattern such as `\w{300,}` compiles there, so here too.
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(_) => CommandError::from(anyhow!(
                    "the pattern {:?} is too large once compiled: {e}",
                    args.pattern
                )),
                _ => CommandError::with_hint(
                    anyhow!("invalid pattern {:?}: {e}", args.pattern),
                    "use -F to search for the text as written",
                ),
            })?;
        Ok(Self {
            re,
            pre: prefilter(&pattern, args.ignore_case),
            backslash_u: memmem::Finder::new(b"\\u").into_owned(),
            backslash_slash: memmem::Finder::new(b"\\/").into_owned(),
        })
    }

    /// Whether a row's stored JSON text may hold a match (false means it certainly does not).
    fn may_match(&self, raw: &[u8]) -> bool {
        let hit = match &self.pre {
            Prefilter::None => return true,
            Prefilter::One(f) => f.find(raw).is_some(),
            Prefilter::Any(re) => re.is_match(raw),
        };
        hit || self.backslash_u.find(raw).is_some() || self.backslash_slash.find(raw).is_some()
    }
}

/// Whether `pattern` holds a line break: the character itself (`-F`), or (a regex) a literal
/// line break (`\n`, `\x0A`, or the character) outside a class — as ripgrep refuses; a class
/// (`[^\n]`, `\s`) and a comment may name one. A pattern that does not parse is left to the
/// regex's own error.
fn names_a_newline(pattern: &str, fixed: bool) -> bool {
    use regex_syntax::hir::HirKind;
    if fixed {
        return pattern.contains('\n');
    }
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
        return false;
    };
    let mut stack = vec![&hir];
    while let Some(h) = stack.pop() {
        match h.kind() {
            HirKind::Literal(l) if l.0.contains(&b'\n') => return true,
            HirKind::Concat(v) | HirKind::Alternation(v) => stack.extend(v),
            HirKind::Repetition(r) => stack.push(&r.sub),
            HirKind::Capture(c) => stack.push(&c.sub),
            _ => {}
        }
    }
    false
}

/// The pre-filter of a pattern: its prefix literals, JSON-escaped, when every match must start
/// with one of them.
fn prefilter(pattern: &str, ignore_case: bool) -> Prefilter {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let Ok(hir) = regex_syntax::ParserBuilder::new()
        .case_insensitive(ignore_case)
        .build()
        .parse(pattern)
    else {
        return Prefilter::None;
    };
    let mut ex = Extractor::new();
    ex.kind(ExtractKind::Prefix);
    let seq = ex.extract(&hir);
    let Some(lits) = seq.literals() else {
        return Prefilter::None;
    };
    let mut escaped = Vec::with_capacity(lits.len());
    for lit in lits {
        let Ok(text) = std::str::from_utf8(lit.as_bytes()) else {
            return Prefilter::None;
        };
        if text.is_empty() {
            return Prefilter::None;
        }
        let Ok(quoted) = serde_json::to_string(text) else {
            return Prefilter::None;
        };
        escaped.push(quoted[1..quoted.len() - 1].to_owned());
    }
    match escaped.as_slice() {
        [] => Prefilter::None,
        [one] => Prefilter::One(Box::new(memmem::Finder::new(one.as_bytes()).into_owned())),
        many => {
            let alt = many
                .iter()
                .map(|l| regex::escape(l))
                .collect::<Vec<_>>()
                .join("|");
            match regex::bytes::Regex::new(&alt) {
                Ok(re) => Prefilter::Any(re),
                Err(_) => Prefilter::None,
            }
        }
    }
}

/// Counters for the summary record.
#[derive(Default)]
struct Counts {
    matches: u64,
    entries: u64,
    sessions: u64,
    rows_scanned: u64,
    rows_decoded: u64,
    /// Entries that may match but could not be read (reported on stderr; exit status 2).
    unreadable: u64,
}

/// Runs `pisess grep`.
pub fn cmd_grep(ui: &mut Ui, args: &GrepArgs) -> CommandResult {
    let query = Query {
        matcher: Matcher::new(args)?,
        role: args.role.as_deref(),
        since_ms: args
            .since
            .as_deref()
            .map(super::util::parse_since)
            .transpose()?,
    };
    let mut counts = Counts::default();
    if let Some(arg) = &args.session {
        let session = open_session_read(arg)?;
        search_session(
            ui,
            &session.snap,
            session.key,
            &session.record,
            &query,
            args,
            &mut counts,
        )?;
    } else {
        let store = open_store_to_query()?;
        let snap = store.snapshot()?;
        let mut sessions: Vec<(SessionKey, SessionRecord)> = snap
            .sessions()?
            .into_iter()
            .filter(|(_, r)| !r.gone)
            .collect();
        sessions.sort_by(|(_, a), (_, b)| {
            a.path
                .cmp(&b.path)
                .then_with(|| a.session_id.cmp(&b.session_id))
        });
        for (key, record) in &sessions {
            search_session(ui, &snap, *key, record, &query, args, &mut counts)?;
        }
    }
    if ui.json {
        ui.json_line(&json!({
            "type": "summary",
            "matches": counts.matches,
            "entries": counts.entries,
            "sessions": counts.sessions,
            "rowsScanned": counts.rows_scanned,
            "rowsDecoded": counts.rows_decoded,
        }))?;
    }
    if counts.matches == 0
        && let Some(w) = args
            .role
            .as_deref()
            .and_then(|r| super::util::unknown_kind_warning("--role", r))
    {
        eprintln!("warning: {w}");
    }
    Ok(if counts.unreadable > 0 {
        // As ripgrep does when a file cannot be read: the answer may be incomplete.
        Outcome::PartialFailure
    } else if counts.matches == 0 {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}

/// Rows searched in parallel at a time; their results are printed in file order before the
/// next block starts, so output streams and memory stays bounded.
const BLOCK: usize = 2048;

/// One matching line (all fields empty when only lines are counted).
#[derive(Default)]
struct LineHit {
    field: String,
    line: usize,
    snippet: String,
    at: usize,
    matched: String,
}

/// What searching one row gave.
enum RowResult {
    /// The pre-filter ruled it out (or it has no JSON text).
    Skipped,
    /// Decoded, but nothing matched (or it is not of the wanted kind).
    NoMatch,
    /// An entry that may match but whose JSON cannot be read (its line).
    Unreadable(u64),
    /// The entry and its matching lines.
    Hits(Value, Vec<LineHit>),
}

/// What a search looks for: the pattern, and which entries it reads.
struct Query<'a> {
    matcher: Matcher,
    /// `--role`.
    role: Option<&'a str>,
    /// `--since`, in milliseconds since the epoch.
    since_ms: Option<i64>,
}

fn search_row(
    snap: &Snapshot,
    row: pisess_engine::EntryKey,
    query: &Query<'_>,
    detail: bool,
) -> Result<RowResult, pisess_engine::StoreError> {
    let (matcher, role) = (&query.matcher, query.role);
    let decoded = snap
        .with_entry(row, |a| {
            // A string time is the record's own field: a row written before `--since` is
            // passed over without reading its JSON. Any other `timestamp` (a number: pi's
            // `new Date` reads it too) is read from the line once it is decoded.
            let mut time_unread = false;
            if let Some(since) = query.since_ms {
                match a.timestamp.as_ref() {
                    Some(t) => {
                        let at = pisess_engine::import::iso_to_ms(t.as_str());
                        if at.is_none_or(|t| t < since) {
                            return None;
                        }
                    }
                    None => time_unread = true,
                }
            }
            let text = a.json_text()?;
            if !matcher.may_match(text.as_bytes()) {
                return None;
            }
            let entry = matches!(a.kind, pisess_engine::record::ArchivedRowKind::Entry);
            Some((
                pisess_formats::value::parse_owned::<Value>(&text),
                entry,
                u64::from(a.line),
                time_unread,
            ))
        })?
        .flatten();
    let Some((parsed, entry, line, time_unread)) = decoded else {
        return Ok(RowResult::Skipped);
    };
    let v = match parsed {
        Ok(v) => v,
        // An entry pi reads but serde_json cannot (nested too deep) is reported, not skipped.
        Err(_) if entry => return Ok(RowResult::Unreadable(line)),
        // A row that is not valid JSON (junk kept for byte-exact export) has nothing to search.
        Err(_) => return Ok(RowResult::NoMatch),
    };
    if let Some(r) = role
        && !super::util::kind_matches(r, sa::entry_type(&v), Some(sa::kind(&v)))
    {
        return Ok(RowResult::NoMatch);
    }
    #[allow(clippy::cast_precision_loss)]
    if let Some(since) = query.since_ms.filter(|_| time_unread)
        && pisess_engine::agent::js::date_ms(v.get("timestamp"))
            .as_f64()
            .is_none_or(|t| t < since as f64)
    {
        return Ok(RowResult::NoMatch);
    }
    let mut hits = Vec::new();
    for (field, text) in fields(&v) {
        for (n, line) in text.split('\n').enumerate() {
            if let Some(m) = matcher.re.find(line) {
                // -l and -c only count lines: no snippet to cut, no text to copy.
                hits.push(if detail {
                    let (snippet, at) = snippet(line, m.start(), m.end());
                    LineHit {
                        field: field.clone(),
                        line: n + 1,
                        snippet,
                        at,
                        matched: m.as_str().to_owned(),
                    }
                } else {
                    LineHit::default()
                });
            }
        }
    }
    Ok(if hits.is_empty() {
        RowResult::NoMatch
    } else {
        RowResult::Hits(v, hits)
    })
}

fn search_session(
    ui: &mut Ui,
    snap: &Snapshot,
    key: SessionKey,
    record: &SessionRecord,
    query: &Query<'_>,
    args: &GrepArgs,
    counts: &mut Counts,
) -> Result<(), CommandError> {
    use rayon::prelude::*;
    let mode = Mode::of(args);
    let limit = mode.limit(args);
    if limit == Some(0) {
        return Ok(());
    }
    // This session's matching lines and entries so far, and the lines of entries that could
    // not be read.
    let (mut found, mut entries) = (0u64, 0u64);
    let mut unreadable: Vec<u64> = Vec::new();
    let rows = snap.rows(key)?;
    'blocks: for block in rows.chunks(BLOCK) {
        let results: Vec<Result<RowResult, pisess_engine::StoreError>> = block
            .par_iter()
            .map(|&row| search_row(snap, row, query, mode == Mode::Lines))
            .collect();
        counts.rows_scanned += block.len() as u64;
        for r in results {
            let (v, hits) = match r? {
                RowResult::Skipped => continue,
                RowResult::NoMatch => {
                    counts.rows_decoded += 1;
                    continue;
                }
                RowResult::Unreadable(line) => {
                    unreadable.push(line);
                    continue;
                }
                RowResult::Hits(v, hits) => (v, hits),
            };
            counts.rows_decoded += 1;
            counts.entries += 1;
            entries += 1;
            if found == 0 {
                counts.sessions += 1;
                if mode == Mode::Lines && !ui.json {
                    let head = format!("{} {}", safe(&record.session_id), safe(&record.path));
                    let painted = ui.paint("35", &head);
                    writeln!(ui.out(), "{painted}")?;
                }
            }
            for h in hits {
                counts.matches += 1;
                found += 1;
                if mode == Mode::Lines {
                    if ui.json {
                        ui.json_line(&json!({
                            "type": "match",
                            "sessionId": record.session_id,
                            "file": record.path,
                            "entryId": sa::id_of(&v),
                            "entryType": sa::entry_type(&v),
                            "role": sa::role(&v),
                            "timestamp": v.get("timestamp"),
                            "field": h.field,
                            "line": h.line,
                            "snippet": h.snippet,
                            "match": h.matched,
                        }))?;
                    } else {
                        write_match(ui, &v, &h)?;
                    }
                }
                if limit.is_some_and(|l| found >= l) {
                    break 'blocks;
                }
            }
        }
    }
    if !unreadable.is_empty() {
        ui.out().flush()?;
        super::util::warn_unreadable(&record.path, &unreadable, "not searched");
        counts.unreadable += unreadable.len() as u64;
    }
    if found == 0 {
        return Ok(());
    }
    match (mode, ui.json) {
        (Mode::Lines, _) => {}
        (Mode::Files, true) => ui.json_line(&json!({
            "type": "session",
            "sessionId": record.session_id,
            "file": record.path,
        }))?,
        (Mode::Files, false) => super::util::write_listed(ui, &record.path, None, args.null)?,
        (Mode::Count, true) => ui.json_line(&json!({
            "type": "count",
            "sessionId": record.session_id,
            "file": record.path,
            "matches": found,
            "entries": entries,
        }))?,
        (Mode::Count, false) => {
            super::util::write_listed(ui, &record.path, Some(found), args.null)?;
        }
    }
    Ok(())
}

fn write_match(ui: &mut Ui, v: &Value, h: &LineHit) -> std::io::Result<()> {
    let id = sa::id_of(v).unwrap_or("-");
    let (before, rest) = h.snippet.split_at(h.at);
    let (hit, after) = rest.split_at(h.matched.len().min(rest.len()));
    let hit = ui.paint("1;31", &safe(hit));
    let id = ui.paint("33", &safe(sa::short_id(id)));
    writeln!(
        ui.out(),
        "  {id} {:<13} {}:{}: {}{hit}{}",
        safe(sa::kind(v)),
        safe(&h.field),
        h.line,
        safe(before),
        safe(after)
    )
}

/// Characters of context kept on each side of a match.
const BEFORE: usize = 40;
const AFTER: usize = 80;

/// A line cut around a match (`…` marks the cuts); returns the snippet and the match's byte
/// offset in it.
fn snippet(line: &str, start: usize, end: usize) -> (String, usize) {
    let head = &line[..start];
    let tail = &line[end..];
    let mut out = String::new();
    let skip = head.chars().count().saturating_sub(BEFORE);
    if skip > 0 {
        out.push('…');
        out.extend(head.chars().skip(skip));
    } else {
        out.push_str(head);
    }
    let at = out.len();
    out.push_str(&line[start..end]);
    if tail.chars().count() > AFTER {
        out.extend(tail.chars().take(AFTER));
        out.push('…');
    } else {
        out.push_str(tail);
    }
    (out, at)
}

/// The searchable text fields of an entry: (field name, text).
fn fields(v: &Value) -> Vec<(String, Cow<'_, str>)> {
    fn str_of(x: Option<&Value>) -> Option<Cow<'_, str>> {
        x.and_then(Value::as_str).map(Cow::Borrowed)
    }
    let mut out: Vec<(String, Cow<'_, str>)> = Vec::new();
    match sa::entry_type(v) {
        "message" => {
            let Some(m) = v.get("message") else {
                return out;
            };
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            let text_field = if role == "toolResult" {
                "output"
            } else {
                "text"
            };
            if role == "bashExecution" {
                if let Some(c) = str_of(m.get("command")) {
                    out.push(("command".into(), c));
                }
                if let Some(o) = str_of(m.get("output")) {
                    out.push(("output".into(), o));
                }
            }
            content_fields(m.get("content"), text_field, &mut out);
        }
        "compaction" | "branch_summary" => {
            if let Some(s) = str_of(v.get("summary")) {
                out.push(("summary".into(), s));
            }
        }
        "custom_message" => content_fields(v.get("content"), "text", &mut out),
        _ => {}
    }
    out
}

fn content_fields<'v>(
    content: Option<&'v Value>,
    text_field: &str,
    out: &mut Vec<(String, Cow<'v, str>)>,
) {
    match content {
        Some(Value::String(s)) => out.push((text_field.to_owned(), Cow::Borrowed(s))),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = b.get("text").and_then(Value::as_str) {
                            out.push((text_field.to_owned(), Cow::Borrowed(t)));
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = b.get("thinking").and_then(Value::as_str) {
                            out.push(("thinking".into(), Cow::Borrowed(t)));
                        }
                    }
                    Some("toolCall") => {
                        let name = b.get("name").and_then(Value::as_str).unwrap_or("tool");
                        // Every string, number and boolean in the arguments (`grep 8080` finds
                        // `{"port":8080}`), found with an explicit stack.
                        let mut stack: Vec<(String, &Value)> = Vec::new();
                        if let Some(a) = b.get("arguments") {
                            stack.push((name.to_owned(), a));
                        }
                        while let Some((path, x)) = stack.pop() {
                            match x {
                                Value::String(s) => out.push((path, Cow::Borrowed(s))),
                                Value::Number(n) => out.push((path, Cow::Owned(n.to_string()))),
                                Value::Bool(b) => out
                                    .push((path, Cow::Borrowed(if *b { "true" } else { "false" }))),
                                Value::Array(items) => {
                                    for (i, it) in items.iter().enumerate().rev() {
                                        stack.push((format!("{path}[{i}]"), it));
                                    }
                                }
                                Value::Object(o) => {
                                    for (k, it) in o.iter().rev() {
                                        stack.push((format!("{path}.{k}"), it));
                                    }
                                }
                                _ => {}
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_break_in_a_pattern_is_seen_in_either_form() {
        assert!(names_a_newline("line1\\nline2", false));
        assert!(names_a_newline("line1\nline2", false));
        assert!(names_a_newline("line1\nline2", true));
        assert!(names_a_newline("a\\\\\\n", false));
        assert!(names_a_newline("(a|b\\x0A)+", false));
        // A backslash and an `n`; -F takes `\n` as written; classes and comments may.
        assert!(!names_a_newline("a\\\\n", false));
        assert!(!names_a_newline("line1\\nline2", true));
        assert!(!names_a_newline("\\d+\\s", false));
        assert!(!names_a_newline("[^\\n]+", false));
        assert!(!names_a_newline("(?x) m # comment \\n", false));
        assert!(!names_a_newline("(unclosed\\n", false));
    }

    fn may(pattern: &str, ic: bool, raw: &str) -> bool {
        let args = GrepArgs {
            pattern: pattern.into(),
            session: None,
            role: None,
            since: None,
            fixed: false,
            ignore_case: ic,
            word: false,
            files_with_matches: false,
            count: false,
            max_count: None,
            null: false,
        };
        Matcher::new(&args).unwrap().may_match(raw.as_bytes())
    }

    #[test]
    fn prefilter_never_skips_a_row_that_matches_after_decoding() {
        // The literal is found in its escaped form.
        assert!(may("say \"hi\"", false, r#"{"t":"say \"hi\" now"}"#));
        assert!(may("a\tb", false, r#"{"t":"a\tb"}"#));
        assert!(may("FOO", true, r#"{"t":"foo"}"#));
        // Optional escapes always go to the decoder.
        assert!(may("é", false, r#"{"t":"\u00e9"}"#));
        assert!(may("a/b", false, r#"{"t":"a\/b"}"#));
        // A pattern without a prefix literal decodes everything.
        assert!(may(".*x", false, r#"{"t":"y"}"#));
        // And a row without the literal is skipped.
        assert!(!may("needle", false, r#"{"t":"haystack"}"#));
        assert!(!may("foo|bar", false, r#"{"t":"baz"}"#));
    }

    #[test]
    fn snippets_cut_long_lines_around_the_match() {
        let line = format!("{}needle{}", "a".repeat(100), "b".repeat(100));
        let (s, at) = snippet(&line, 100, 106);
        assert!(s.starts_with('…') && s.ends_with('…'));
        assert_eq!(&s[at..at + 6], "needle");
    }
}
