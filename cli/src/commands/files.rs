//! `pisess files PATH_OR_GLOB`: which tool calls read or changed a path.
//!
//! A query matches the path exactly and every path under it (as a folder), both as written
//! and resolved against the current folder; one with glob characters is also a glob, as
//! written and resolved (the union: `app/[id]/page.tsx` finds that path, as git's pathspecs
//! do; `src/**` run in the project finds `./src/a.rs` and `/…/project/src/b.rs`).
//! An absolute query is normalised as a relative one is (`..`, `.`, `//`), as the index
//! normalises the paths it resolves ([`pisess_engine::files::normalize`]); an empty one is
//! refused. Exit 1 when nothing is found. With `-l` (`-c`), each session with a hit is listed
//! once, by its file (and its number of hits), in the order of its first hit, as `grep -l`
//! (`-c`) lists them: the same hits, filters and exit status, only rendered as session keys and
//! counted.

use std::io::Write;

use pisess_engine::files::{FileHitRef, FileQuery, RenderHit};
use pisess_engine::{FileFilter, FileOp, SessionKey};
use pisess_formats::js;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{open_session_read, open_store_to_query};
use crate::ui::{Ui, safe};

/// Which operations to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OpArg {
    /// Reads.
    Read,
    /// Writes.
    Write,
    /// Edits.
    Edit,
    /// Writes, edits and summaries' modified files.
    Modified,
}

/// Arguments of `pisess files`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("listing").args(["files_with_matches", "count"])))]
pub struct FilesArgs {
    /// A path, a folder, or a glob (`**/*.rs`).
    pub path: String,
    /// Only this session (a file, an id or unique prefix, or `@latest`).
    #[arg(long)]
    pub session: Option<String>,
    /// Only this operation.
    #[arg(long, value_enum)]
    pub op: Option<OpArg>,
    /// Only entries on their session's active path.
    #[arg(long)]
    pub active_only: bool,
    /// Only tool calls made on or after DATE (`YYYY-MM-DD`, midnight UTC; an RFC 3339 time such
    /// as `2026-01-31T12:00:00Z` or `…+02:00`; or an age such as `7d`), by their entry's time.
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    /// List each session with a hit once, by its file (as `rg -l`).
    #[arg(short = 'l', long = "files-with-matches", conflicts_with = "count")]
    pub files_with_matches: bool,
    /// List each session with a hit and its number of hits, `FILE:COUNT` (as `rg -c`).
    #[arg(short = 'c', long = "count")]
    pub count: bool,
    /// With `-l` or `-c`: end each file name with a NUL byte, for `xargs -0` (as `rg -0`).
    #[arg(short = '0', long = "null", requires = "listing")]
    pub null: bool,
}

/// Runs `pisess files`.
pub fn cmd_files(ui: &mut Ui, args: &FilesArgs) -> CommandResult {
    if args.path.is_empty() {
        // An empty folder name would be the start of every path: refuse it rather than list
        // every hit in the store.
        return Err(CommandError::with_hint(
            anyhow::anyhow!("the path to look for is empty"),
            "give a path, a folder or a glob; `pisess files '**'` lists every file touched",
        ));
    }
    let ops = match args.op {
        None => vec![],
        Some(OpArg::Read) => vec![FileOp::Read],
        Some(OpArg::Write) => vec![FileOp::Write],
        Some(OpArg::Edit) => vec![FileOp::Edit],
        Some(OpArg::Modified) => vec![FileOp::Write, FileOp::Edit, FileOp::Modified],
    };
    // The store must outlive its snapshot.
    let (sess, store) = match &args.session {
        Some(s) => (Some(open_session_read(s)?), None),
        None => (None, Some(open_store_to_query()?)),
    };
    let owned;
    let (snap, session) = match (&sess, &store) {
        (Some(sess), _) => (&sess.snap, Some(sess.key)),
        (None, Some(store)) => {
            owned = store.snapshot()?;
            (&owned, None)
        }
        (None, None) => return Err(anyhow::anyhow!("no store was opened").into()),
    };
    let filter = FileFilter {
        session,
        ops,
        active_only: args.active_only,
        since_ms: args
            .since
            .as_deref()
            .map(super::util::parse_since)
            .transpose()?,
    };
    let queries = queries_for(&args.path);
    if args.path.contains(['*', '?', '[', '{'])
        && let Some(e) = pisess_engine::files::glob_error(&args.path)
    {
        let why = std::error::Error::source(&e).map(ToString::to_string);
        eprintln!(
            "note: {} is no glob ({}): matched as written only",
            safe(&args.path),
            safe(&why.unwrap_or_default())
        );
    }
    let queries: Vec<FileQuery<'_>> = queries.iter().map(Query::as_query).collect();
    let scan = snap.file_scan(&queries, &filter)?;
    if args.files_with_matches || args.count {
        return list_sessions(ui, snap, &scan, args.count, args.null);
    }
    let json = ui.json;
    // Each session's part of a line, made once: the record's start (JSON) or the id's first
    // eight characters (text); in session key order.
    let mut heads: Vec<(SessionKey, Vec<u8>)> = Vec::new();
    for s in scan.sessions() {
        let id = snap.session(s)?.map(|r| r.session_id).unwrap_or_default();
        let mut head = Vec::new();
        if json {
            head.extend_from_slice(b"{\"type\":\"file_op\",\"session\":");
            js::write_str(&mut head, &id);
        } else {
            head.extend_from_slice(safe(&id.chars().take(8).collect::<String>()).as_bytes());
        }
        heads.push((s, head));
    }
    let render = Render {
        json,
        heads: &heads,
    };
    let out = ui.out();
    let n = scan.stream(&render, &mut |b| out.write_all(b))?;
    Ok(if n == 0 {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}

/// One query the index is asked, owning its text.
#[derive(Debug, PartialEq, Eq)]
enum Query {
    Under(String),
    Glob(String),
}

impl Query {
    fn as_query(&self) -> FileQuery<'_> {
        match self {
            Self::Under(p) => FileQuery::Under(p),
            Self::Glob(g) => FileQuery::Glob(g),
        }
    }
}

/// What `pisess files Q` asks the index: `Q` as a folder (itself and everything under it) and,
/// when it has glob characters, as a glob; each also resolved against the current folder (a
/// relative query) or normalised (an absolute one) as the index resolves the paths it records
/// (`a/../b`, `./`, `//`); and a path under `$HOME` also as `~/…`, the way a session whose cwd
/// lies outside any home folder keeps such a path (see `pisess_engine::files::resolve`).
fn queries_for(q: &str) -> Vec<Query> {
    let cwd = std::env::current_dir()
        .ok()
        .map(|c| c.to_string_lossy().into_owned());
    let home = std::env::var("HOME").ok().filter(|h| h.starts_with('/'));
    queries_in(q, cwd.as_deref(), home.as_deref())
}

fn queries_in(q: &str, cwd: Option<&str>, home: Option<&str>) -> Vec<Query> {
    let glob = q.contains(['*', '?', '[', '{']);
    let mut forms = vec![q.to_owned()];
    // A relative path is recorded as the tool was given it: `src/a.rs`, `./src/a.rs` or
    // `@src/a.rs` (which pi's tools read as `src/a.rs`). Each is asked, so that the answer
    // does not depend on the folder the query runs in.
    if !q.starts_with(['/', '~']) {
        // pi's tools drop one leading `@`; then `./`, as resolving does.
        let mut bare = q.strip_prefix('@').unwrap_or(q);
        while let Some(r) = bare.strip_prefix("./") {
            bare = r.trim_start_matches('/');
        }
        let plain = !bare.is_empty()
            && !bare.starts_with(['/', '~'])
            && bare != "."
            && bare != ".."
            && !bare.starts_with("../");
        if plain {
            // Also tidied as the index tidies what it resolves (`src//a.rs`, `src/./a.rs` and
            // `src/x/../a.rs` ask for `src/a.rs`), but for a glob with braces, whose `/`s may
            // lie inside alternatives.
            let tidy = pisess_engine::files::normalize("", bare);
            let tidy = (!q.contains('{')
                && tidy != bare
                && tidy != "."
                && tidy != ".."
                && !tidy.starts_with("../"))
            .then_some(tidy);
            for b in std::iter::once(bare).chain(tidy.as_deref()) {
                for f in [b.to_owned(), format!("./{b}"), format!("@{b}")] {
                    if !forms.contains(&f) {
                        forms.push(f);
                    }
                }
            }
        }
    }
    let resolved = if q.starts_with('/') {
        Some(pisess_engine::files::normalize("", q))
    } else {
        cwd.map(|c| pisess_engine::files::normalize(c, q))
    };
    if let Some(r) = resolved {
        if let Some(rest) = home
            .map(|h| h.trim_end_matches('/'))
            .filter(|h| !h.is_empty())
            .and_then(|h| r.strip_prefix(h))
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        {
            forms.push(format!("~{rest}"));
        }
        forms.push(r);
    }
    let mut out = Vec::new();
    for f in forms {
        // As written too, as git matches a pathspec literally as well as a glob: a path such as
        // `app/[id]/page.tsx` is found though `[id]` is a character class to the glob.
        let under = Query::Under(f.clone());
        // A query that is no valid glob (`notes[1.md`: an unclosed class) is still a path.
        if glob && pisess_engine::files::glob_error(&f).is_none() {
            let g = Query::Glob(f);
            if !out.contains(&g) {
                out.push(g);
            }
        }
        if !out.contains(&under) {
            out.push(under);
        }
    }
    out
}

/// `-l` / `-c`: the hits rendered as their session keys (8 bytes each, in hit order), then each
/// session listed once, in the order of its first hit, with its count for `-c`.
fn list_sessions(
    ui: &mut Ui,
    snap: &pisess_engine::Snapshot,
    scan: &pisess_engine::files::FileScan<'_>,
    count: bool,
    null: bool,
) -> CommandResult {
    let mut keys = Vec::new();
    let n = scan.stream(&SessionKeys, &mut |b| {
        keys.extend_from_slice(b);
        Ok(())
    })?;
    // (session, hits), in the order of each session's first hit.
    let mut listed: Vec<(SessionKey, u64)> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    for k in keys.chunks_exact(8) {
        let mut b = [0u8; 8];
        b.copy_from_slice(k);
        let s = SessionKey(u64::from_le_bytes(b));
        let at = *seen.entry(s).or_insert_with(|| {
            listed.push((s, 0));
            listed.len() - 1
        });
        if let Some(x) = listed.get_mut(at) {
            x.1 += 1;
        }
    }
    for (s, hits) in listed {
        let (id, file) = snap
            .session(s)?
            .map(|r| (r.session_id, r.path))
            .unwrap_or_default();
        match (ui.json, count) {
            (true, false) => ui.json_line(&serde_json::json!({
                "type": "session", "sessionId": id, "file": file,
            }))?,
            (true, true) => ui.json_line(&serde_json::json!({
                "type": "count", "sessionId": id, "file": file, "hits": hits,
            }))?,
            (false, false) => super::util::write_listed(ui, &file, None, null)?,
            (false, true) => super::util::write_listed(ui, &file, Some(hits), null)?,
        }
    }
    Ok(if n == 0 {
        Outcome::Negative
    } else {
        Outcome::Success
    })
}

/// Renders each hit as its session key, 8 little-endian bytes (for `-l` / `-c`).
struct SessionKeys;

impl RenderHit for SessionKeys {
    fn session(&self, _: SessionKey, _: &mut Vec<u8>) {}
    fn part(&self, _: &str, _: FileOp, _: &str, _: &str, _: &mut Vec<u8>) {}
    fn hit(&self, h: &FileHitRef<'_>, _: &[u8], _: &[u8], _: bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&h.session.0.to_le_bytes());
    }
}

/// How `pisess files` prints hits: JSON Lines records or text lines.
struct Render<'a> {
    json: bool,
    /// Each session's part of a line, in session key order: the record's start, up to the
    /// session id's closing quote (JSON), or the id's first eight characters (text).
    heads: &'a [(SessionKey, Vec<u8>)],
}

impl RenderHit for Render<'_> {
    fn session(&self, s: SessionKey, out: &mut Vec<u8>) {
        if let Some((_, head)) = self
            .heads
            .binary_search_by_key(&s, |x| x.0)
            .ok()
            .and_then(|n| self.heads.get(n))
        {
            out.extend_from_slice(head);
        }
    }

    fn part(&self, tool: &str, op: FileOp, path: &str, resolved: &str, out: &mut Vec<u8>) {
        if self.json {
            out.extend_from_slice(b",\"tool\":");
            js::write_str(out, tool);
            out.extend_from_slice(b",\"op\":\"");
            out.extend_from_slice(op.as_str().as_bytes());
            out.push(b'"');
            out.extend_from_slice(b",\"path\":");
            js::write_str(out, path);
            out.extend_from_slice(b",\"resolved\":");
            js::write_str(out, resolved);
        } else {
            // Writing to a Vec cannot fail.
            let _ = write!(out, "{:<8} {:<6} ", op.as_str(), safe(tool));
            out.extend_from_slice(safe(resolved).as_bytes());
            out.push(b' ');
            if path != resolved {
                out.push(b'[');
                out.extend_from_slice(safe(path).as_bytes());
                out.push(b']');
            }
        }
    }

    fn plain(&self, strings: &str) -> bool {
        // Text lines make each string safe apart (`safe`); JSON needs only the escapes.
        self.json && !js::needs_escaping(strings)
    }

    fn hit(&self, h: &FileHitRef<'_>, head: &[u8], part: &[u8], plain: bool, out: &mut Vec<u8>) {
        if self.json {
            json_line(out, head, part, h, plain);
        } else {
            text_line(out, head, part, h);
        }
    }
}

/// One hit's text line (`sid`: the session id's first eight characters, made safe; `part`:
/// the operation and tool name, padded, the resolved path, a space and the path as written in
/// brackets when it differs).
fn text_line(out: &mut Vec<u8>, sid: &[u8], part: &[u8], h: &FileHitRef<'_>) {
    let err = match h.is_error {
        Some(true) => " error",
        _ => "",
    };
    // Pieces, not `write!`: a big query writes a line per hit.
    out.extend_from_slice(if h.active { b"* " } else { b"  " });
    out.extend_from_slice(safe(h.timestamp.unwrap_or("-")).as_bytes());
    out.push(b' ');
    out.extend_from_slice(part);
    out.extend_from_slice(err.as_bytes());
    out.extend_from_slice(b"  (");
    out.extend_from_slice(sid);
    out.extend_from_slice("…/".as_bytes());
    out.extend_from_slice(safe(h.entry_id.unwrap_or("-")).as_bytes());
    out.extend_from_slice(b")\n");
}

/// One hit as a JSON Lines record, written field by field in the order `serde_json::json!`
/// would give (`type, session, entry, toolCallId, tool, op, path, resolved, timestamp,
/// isError, active`; `head` holds the first two, up to the session id's closing quote, and
/// `part` the tool, op, path and resolved fields). Strings are escaped by [`js::write_str`], which
/// escapes exactly what serde_json does: `"`, `\\` and control characters; `plain`: the hit's
/// entry id, tool call id and timestamp need no escaping (its job's were checked at once,
/// `RenderHit::plain`), so those three are written as they are (`part` was escaped when made).
fn json_line(out: &mut Vec<u8>, head: &[u8], part: &[u8], h: &FileHitRef<'_>, plain: bool) {
    let opt = |out: &mut Vec<u8>, v: Option<&str>| match v {
        Some(s) if plain => {
            out.push(b'"');
            out.extend_from_slice(s.as_bytes());
            out.push(b'"');
        }
        Some(s) => js::write_str(out, s),
        None => out.extend_from_slice(b"null"),
    };
    out.extend_from_slice(head);
    out.extend_from_slice(b",\"entry\":");
    opt(out, h.entry_id);
    out.extend_from_slice(b",\"toolCallId\":");
    opt(out, h.tool_call_id);
    out.extend_from_slice(part);
    out.extend_from_slice(b",\"timestamp\":");
    opt(out, h.timestamp);
    out.extend_from_slice(match h.is_error {
        Some(true) => b",\"isError\":true",
        Some(false) => b",\"isError\":false",
        None => b",\"isError\":null",
    });
    out.extend_from_slice(if h.active {
        b",\"active\":true}\n"
    } else {
        b",\"active\":false}\n"
    });
}

#[cfg(test)]
mod tests {
    use pisess_engine::EntryKey;
    use serde_json::json;

    use super::*;

    /// The hand-written record equals serde_json's for the same fields, escapes included.
    #[test]
    fn json_line_equals_serde_json() {
        let mut verdicts = std::collections::HashSet::new();
        for (s, opt, flag) in [
            ("plain/path.rs", None, None),
            (
                "q\"uote\\back\nline\t\u{1}\u{7f}é😀",
                Some("x\u{1f}y"),
                Some(true),
            ),
            ("", Some(""), Some(false)),
            (
                "\u{0}\u{8}\u{c}\r\u{b}\u{1b}\u{1e}\"\"\\end",
                Some("\u{7}\t\n"),
                None,
            ),
        ] {
            let h = FileHitRef {
                session: SessionKey(1),
                entry: EntryKey(2),
                index: 0,
                entry_id: opt,
                tool_call_id: Some(s),
                tool_name: s,
                op: FileOp::Edit,
                path: s,
                resolved: "/r",
                timestamp: opt,
                is_error: flag,
                active: flag == Some(true),
            };
            let mut head = b"{\"type\":\"file_op\",\"session\":".to_vec();
            js::write_str(&mut head, s);
            let heads = [(h.session, head)];
            let r = Render {
                json: true,
                heads: &heads,
            };
            let mut head = Vec::new();
            r.session(h.session, &mut head);
            let mut part = Vec::new();
            r.part(h.tool_name, h.op, h.path, h.resolved, &mut part);
            let mut got = Vec::new();
            // The job's verdict, from this hit's strings alone (escapes and none both occur).
            let strings: String = [h.entry_id, h.tool_call_id, h.timestamp]
                .iter()
                .flatten()
                .copied()
                .collect();
            let plain = r.plain(&strings);
            verdicts.insert(plain);
            r.hit(&h, &head, &part, plain, &mut got);
            let want = json!({
                "type": "file_op", "session": s, "entry": h.entry_id,
                "toolCallId": h.tool_call_id, "tool": h.tool_name, "op": h.op.as_str(),
                "path": h.path, "resolved": h.resolved, "timestamp": h.timestamp,
                "isError": h.is_error, "active": h.active,
            });
            assert_eq!(String::from_utf8(got).unwrap(), format!("{want}\n"));
        }
        // Both ways of writing the strings were taken.
        assert_eq!(verdicts.len(), 2);
    }

    /// The forms a query is asked in, each once: as written, `~/…` under `$HOME`, resolved.
    #[test]
    fn a_query_is_asked_as_written_resolved_and_home_relative() {
        let u = |s: &str| Query::Under(s.into());
        let g = |s: &str| Query::Glob(s.into());
        assert_eq!(
            queries_in("src", Some("/h/u/p"), Some("/h/u")),
            [
                u("src"),
                u("./src"),
                u("@src"),
                u("~/p/src"),
                u("/h/u/p/src")
            ]
        );
        assert_eq!(
            queries_in("src/**", Some("/w/p"), Some("/h/u")),
            [
                g("src/**"),
                u("src/**"),
                g("./src/**"),
                u("./src/**"),
                g("@src/**"),
                u("@src/**"),
                g("/w/p/src/**"),
                u("/w/p/src/**")
            ]
        );
        // Written with `./` or `@`: also asked bare, and the other way.
        assert_eq!(
            queries_in("./src/a.rs", None, None),
            [u("./src/a.rs"), u("src/a.rs"), u("@src/a.rs")]
        );
        assert_eq!(
            queries_in("@a.rs", None, None),
            [u("@a.rs"), u("a.rs"), u("./a.rs")]
        );
        assert_eq!(
            queries_in("@./a.rs", None, None),
            [u("@./a.rs"), u("a.rs"), u("./a.rs"), u("@a.rs")]
        );
        // `@@a.rs` is the path `@a.rs` to pi.
        assert_eq!(
            queries_in("@@a.rs", None, None),
            [u("@@a.rs"), u("@a.rs"), u("./@a.rs")]
        );
        // Tidied as the index tidies resolved paths, as well.
        assert_eq!(
            queries_in("src//a.rs", None, None),
            [
                u("src//a.rs"),
                u("./src//a.rs"),
                u("@src//a.rs"),
                u("src/a.rs"),
                u("./src/a.rs"),
                u("@src/a.rs")
            ]
        );
        assert_eq!(
            queries_in("src/./x/../a.rs", None, None)[3..],
            [u("src/a.rs"), u("./src/a.rs"), u("@src/a.rs")]
        );
        // Not a glob with braces (a `/` may be inside an alternative), nor out of the folder.
        assert_eq!(queries_in("{a,b/../c}", None, None).len(), 6);
        assert_eq!(queries_in("a/../../x", None, None).len(), 3);
        assert_eq!(queries_in("../x", None, None), [u("../x")]);
        assert_eq!(queries_in(".", None, None), [u(".")]);
        // No valid glob (an unclosed class or set): a path only.
        assert_eq!(
            queries_in("notes[1.md", None, None),
            [u("notes[1.md"), u("./notes[1.md"), u("@notes[1.md")]
        );
        assert_eq!(
            queries_in("/h/u/notes.md", None, Some("/h/u/")),
            [u("/h/u/notes.md"), u("~/notes.md")]
        );
        assert_eq!(queries_in("/h/uv", None, Some("/h/u")), [u("/h/uv")]);
        assert_eq!(
            queries_in("/a//b/../c", None, None),
            [u("/a//b/../c"), u("/a/c")]
        );
        assert_eq!(queries_in("x", None, None), [u("x"), u("./x"), u("@x")]);
    }
}
