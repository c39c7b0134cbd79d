//! The file-operation index equals an independent serde_json scan of the tool calls, and a
//! branch export is a session the oracle loads.

use std::collections::HashSet;

use pisess_engine::{FileFilter, FileHit, Outcome, Store};
use serde_json::Value;

use crate::naive::Naive;
use crate::test_migrate_import::every_file;
use crate::tool_scan::{Hit, scan};

fn tuple(h: &FileHit) -> Hit {
    Hit {
        entry_id: h.entry_id.clone(),
        tool_call_id: h.tool_call_id.clone(),
        tool_name: h.tool_name.clone(),
        op: h.op.as_str().to_owned(),
        path: h.path.clone(),
        is_error: h.is_error,
        active: h.active,
        timestamp: h.timestamp.clone(),
    }
}

#[test]
fn file_hits_equal_an_independent_scan() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let files: Vec<_> = every_file()
        .into_iter()
        .filter(|p| {
            let n = Naive::read(p);
            !n.rejected && n.version >= 3.0
        })
        .collect();
    store
        .import(&files, &Default::default(), &mut |_| {})
        .unwrap();
    let snap = store.snapshot().unwrap();
    let mut total = 0;
    for p in &files {
        let s = snap.session_by_path(p).unwrap().unwrap();
        let rec = snap.session(s).unwrap().unwrap();
        let (mut want, cwd) = scan(p);
        let got = snap.files_of_session(s).unwrap();
        let mut got_t: Vec<Hit> = got.iter().map(tuple).collect();
        if rec.cycle_cuts > 0 {
            for h in want.iter_mut().chain(got_t.iter_mut()) {
                h.active = false;
            }
        }
        assert_eq!(got_t, want, "{}", p.display());
        total += got.len();
        let only = FileFilter {
            session: Some(s),
            ..Default::default()
        };
        for h in &got {
            assert_eq!(h.resolved, crate::tool_scan::resolve_like_pi(&cwd, &h.path));
        }
        for h in got.iter().take(50) {
            for q in [&h.path, &h.resolved] {
                let by_path = snap.files_exact(q, &only).unwrap();
                assert!(by_path.contains(h), "{}: exact {q}", p.display());
            }
            if let Some((folder, _)) = h.resolved.rsplit_once('/') {
                let folder = if folder.is_empty() { "/" } else { folder };
                assert!(snap.files_under(folder, &only).unwrap().contains(h));
                let glob = format!("{}/*", folder.trim_end_matches('/'));
                assert!(snap.files_glob(&glob, &only).unwrap().contains(h), "{glob}");
            }
        }
    }
    assert!(total > 500, "only {total} file hits");
    stream_equals_collect(&snap, &files);
    a_panicking_renderer_ends_the_stream(&snap);
}

/// `FileScan::stream` renders the same hits in the same order as `FileScan::collect`, on the
/// calling thread and in parallel with small buffers (which makes the workers wait for the
/// writer), whatever the query and filter.
fn stream_equals_collect(snap: &pisess_engine::Snapshot, files: &[std::path::PathBuf]) {
    use pisess_engine::files::{FileQuery, RenderHit, StreamOptions};
    use pisess_engine::{FileHitRef, FileOp};
    /// A hit as its Debug form, after its tool, op and paths as the part gave them. While
    /// streaming it also checks `plain`'s contract: each hit's entry id, tool call id and
    /// timestamp are slices of the string its job gave `plain` on the same thread, and `hit`
    /// gets what `plain` returned (an arbitrary verdict: whether that string's length is even).
    struct Line;
    thread_local! {
        /// The address range of the string `plain` last saw on this thread and its verdict;
        /// `None` outside a stream.
        static JOB: std::cell::Cell<Option<(usize, usize, bool)>> =
            const { std::cell::Cell::new(None) };
    }
    /// Hits whose strings `hit` found inside their job's string.
    static CHECKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    impl RenderHit for Line {
        fn plain(&self, strings: &str) -> bool {
            let at = strings.as_ptr() as usize;
            let verdict = strings.len().is_multiple_of(2);
            JOB.set(Some((at, at + strings.len(), verdict)));
            verdict
        }
        fn session(&self, s: pisess_engine::SessionKey, out: &mut Vec<u8>) {
            out.extend_from_slice(format!("{}|", s.0).as_bytes());
        }
        fn part(&self, tool: &str, op: FileOp, path: &str, resolved: &str, out: &mut Vec<u8>) {
            out.extend_from_slice(format!("{tool}|{op:?}|{path}|{resolved}|").as_bytes());
        }
        fn hit(
            &self,
            h: &FileHitRef<'_>,
            session: &[u8],
            part: &[u8],
            plain: bool,
            out: &mut Vec<u8>,
        ) {
            if let Some((lo, hi, verdict)) = JOB.get() {
                assert_eq!(plain, verdict);
                for s in [h.entry_id, h.tool_call_id, h.timestamp]
                    .into_iter()
                    .flatten()
                {
                    let at = s.as_ptr() as usize;
                    assert!(
                        lo <= at && at + s.len() <= hi,
                        "{s:?} outside its job's strings"
                    );
                }
                CHECKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            out.extend_from_slice(session);
            out.extend_from_slice(part);
            out.extend_from_slice(format!("{:?}\n", h.to_owned_hit()).as_bytes());
        }
    }
    let line = |h: &FileHitRef<'_>, out: &mut Vec<u8>| {
        JOB.set(None);
        Line.hit(
            h,
            format!("{}|", h.session.0).as_bytes(),
            format!("{}|{:?}|{}|{}|", h.tool_name, h.op, h.path, h.resolved).as_bytes(),
            false,
            out,
        );
    };
    let one = files
        .iter()
        .find_map(|p| snap.session_by_path(p).unwrap())
        .unwrap();
    let filters = [
        FileFilter::default(),
        FileFilter {
            active_only: true,
            ..Default::default()
        },
        FileFilter {
            ops: vec![FileOp::Edit, FileOp::Modified],
            ..Default::default()
        },
        FileFilter {
            session: Some(one),
            ..Default::default()
        },
    ];
    let queries: [&[FileQuery<'_>]; 6] = [
        &[FileQuery::Glob("**")],
        &[FileQuery::Glob("src/**")],
        &[FileQuery::Glob("**/*.ts")],
        &[FileQuery::Under("/")],
        &[FileQuery::Under("src"), FileQuery::Under("/home")],
        &[FileQuery::Exact("src/main.rs"), FileQuery::Exact("zzz")],
    ];
    let small = StreamOptions {
        inline_below: 0,
        buffer: 512,
        buffers: 2,
    };
    let mut parallel_hits = 0;
    for q in queries {
        for f in &filters {
            let mut want = Vec::new();
            for h in snap.file_hits(q, f).unwrap().iter() {
                line(&h.unwrap(), &mut want);
            }
            let scan = snap.file_scan(q, f).unwrap();
            for opt in [StreamOptions::default(), small.clone()] {
                let mut got = Vec::new();
                let n = scan
                    .stream_with(
                        &Line,
                        &mut |b| {
                            got.extend_from_slice(b);
                            Ok(())
                        },
                        &opt,
                    )
                    .unwrap();
                assert_eq!(n, want.iter().filter(|&&b| b == b'\n').count());
                assert!(got == want, "{q:?} {f:?} {opt:?}");
                if opt.inline_below == 0 {
                    parallel_hits += n;
                }
            }
        }
    }
    assert!(
        parallel_hits > 10_000,
        "only {parallel_hits} hits streamed in parallel"
    );
    // Every streamed hit went through the check (the collected ones do not).
    assert!(CHECKED.load(std::sync::atomic::Ordering::Relaxed) >= parallel_hits);
}

/// A renderer for the panic tests: panics at a hit when `panics(on a worker, entry key)` says
/// so, writes a 100-byte line for the others, and on the calling thread first gives the
/// workers time to take jobs of their own.
struct Boom {
    caller: std::thread::ThreadId,
    panics: fn(bool, u64) -> bool,
    waited: std::sync::atomic::AtomicBool,
}

impl pisess_engine::files::RenderHit for Boom {
    fn session(&self, _: pisess_engine::SessionKey, _: &mut Vec<u8>) {}
    fn part(&self, _: &str, _: pisess_engine::FileOp, _: &str, _: &str, _: &mut Vec<u8>) {}
    fn hit(
        &self,
        h: &pisess_engine::FileHitRef<'_>,
        _: &[u8],
        _: &[u8],
        _: bool,
        out: &mut Vec<u8>,
    ) {
        let worker = std::thread::current().id() != self.caller;
        if (self.panics)(worker, h.entry.0) {
            panic!("boom");
        }
        if !worker && !self.waited.swap(true, std::sync::atomic::Ordering::Relaxed) {
            // Long enough for a worker of a loaded machine to take a job (200 ms was not).
            std::thread::sleep(std::time::Duration::from_millis(1000));
        }
        out.extend_from_slice(&[b'.'; 99]);
        out.push(b'\n');
    }
}

/// Streams every hit of `snap` on a four-thread pool (three workers beside the calling
/// thread) with small buffers and [`Boom`]: `Err` with the panic's message, or the number of
/// hits.
fn stream_with_boom(
    snap: &pisess_engine::Snapshot,
    panics: fn(bool, u64) -> bool,
) -> Result<usize, String> {
    use std::panic::{AssertUnwindSafe, catch_unwind};

    use pisess_engine::files::{FileQuery, StreamOptions};
    let scan = snap
        .file_scan(&[FileQuery::Glob("**")], &FileFilter::default())
        .unwrap();
    let small = StreamOptions {
        inline_below: 0,
        buffer: 512,
        buffers: 2,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    let r = pool.install(|| {
        let boom = Boom {
            caller: std::thread::current().id(),
            panics,
            waited: false.into(),
        };
        catch_unwind(AssertUnwindSafe(|| {
            scan.stream_with(&boom, &mut |_| Ok(()), &small)
        }))
    });
    match r {
        Err(p) => Err(p
            .downcast_ref::<&str>()
            .map_or_else(|| "?".to_owned(), |s| (*s).to_owned())),
        Ok(n) => Ok(n.unwrap()),
    }
}

/// A renderer that panics, on a worker or on the calling thread, ends `FileScan::stream` with
/// its panic: the other threads are told to stop, and none waits forever for the job it left.
/// (A hang here shows as a test that never ends.)
fn a_panicking_renderer_ends_the_stream(snap: &pisess_engine::Snapshot) {
    assert_eq!(
        stream_with_boom(snap, |worker, _| worker),
        Err("boom".into())
    );
    assert_eq!(
        stream_with_boom(snap, |worker, _| !worker),
        Err("boom".into())
    );
}

/// A worker that panics while other workers wait for output buffers (their jobs come after
/// its, and the writer stops at its job) does not leave the writer waiting: the panic comes
/// back. Needs more jobs (chunks of entry keys) than the corpus gives: a session of four
/// chunks' worth of rows, a `read` call in every 500th. The worker panics in the second chunk
/// only; when the calling thread happens to take that job itself, nothing panics and every
/// hit is written, so the test runs until a worker took it.
#[test]
fn a_worker_that_panics_does_not_strand_the_writer() {
    use std::io::Write;

    use pisess_engine::files::CHUNK;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(
        f,
        r#"{{"type":"session","version":3,"id":"0190aaaa-0000-7000-8000-000000000001","timestamp":"2026-07-25T09:00:00.000Z","cwd":"/home/dev/p"}}"#
    )
    .unwrap();
    let rows = 4 * CHUNK;
    let mut calls = 0;
    for n in 1..=rows {
        let parent = if n == 1 {
            "null".to_owned()
        } else {
            format!("\"{:08x}\"", n - 1)
        };
        let message = if n % 500 == 0 {
            calls += 1;
            format!(
                r#"{{"role":"assistant","content":[{{"type":"toolCall","id":"call_{n}","name":"read","arguments":{{"path":"src/f{}.rs"}}}}],"api":"anthropic-messages","provider":"anthropic","model":"m","usage":{{"input":0,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":1,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"stopReason":"toolUse","timestamp":1}}"#,
                n % 7
            )
        } else {
            r#"{"role":"user","content":"go on","timestamp":1}"#.to_owned()
        };
        writeln!(
            f,
            r#"{{"type":"message","id":"{n:08x}","parentId":{parent},"timestamp":"2026-07-25T09:00:05.174Z","message":{message}}}"#
        )
        .unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    store
        .import(&[path], &Default::default(), &mut |_| {})
        .unwrap();
    let snap = store.snapshot().unwrap();
    let second = |worker: bool, entry: u64| worker && (CHUNK..2 * CHUNK).contains(&entry);
    let mut panicked = 0;
    for _ in 0..20 {
        match stream_with_boom(&snap, second) {
            Err(m) => {
                assert_eq!(m, "boom");
                panicked += 1;
                break;
            }
            Ok(n) => assert_eq!(n, calls),
        }
    }
    assert_eq!(
        panicked, 1,
        "the calling thread took the second chunk every time"
    );
}

/// Paths written as pi's file tools accept them (`@src/a.rs`, `~/x`, Unicode spaces, `~` in
/// a cwd outside any home) are resolved as those tools resolve them, and found by that path.
#[test]
fn paths_are_resolved_as_pi_tools_resolve_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let written = [
        "@src/a.rs",
        "~/notes.md",
        "~",
        "~x/y",
        "@~/n.txt",
        "@@twice",
        "./src/../b.rs",
        r"a\u00a0b\u3000c.txt",
        "/abs/@x",
    ];
    let mut files = Vec::new();
    for (n, cwd) in ["/home/u/proj", "/Users/ann/w/p", "/root", "/work/p", "/"]
        .iter()
        .enumerate()
    {
        let mut text = format!(
            r#"{{"type":"session","version":3,"id":"s{n}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"{cwd}"}}"#
        );
        for (i, p) in written.iter().enumerate() {
            let parent = if i == 0 {
                "null".to_owned()
            } else {
                format!("\"e{}\"", i - 1)
            };
            text.push_str(&format!(
                "\n{{\"type\":\"message\",\"id\":\"e{i}\",\"parentId\":{parent},\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"toolCall\",\"id\":\"c{i}\",\"name\":\"edit\",\"arguments\":{{\"path\":\"{p}\"}}}}],\"timestamp\":1}}}}"
            ));
        }
        text.push('\n');
        let f = dir.path().join(format!("s{n}.jsonl"));
        std::fs::write(&f, text).unwrap();
        files.push((f, cwd.to_string()));
    }
    for (f, _) in &files {
        let r = store.import_file(f).unwrap();
        assert!(r.error.is_none(), "{:?}", r.error);
    }
    let snap = store.snapshot().unwrap();
    let mut expanded = 0;
    for (f, cwd) in &files {
        let s = snap.session_by_path(f).unwrap().unwrap();
        let got = snap.files_of_session(s).unwrap();
        let (want, _) = scan(f);
        assert_eq!(got.iter().map(tuple).collect::<Vec<_>>(), want);
        assert_eq!(got.len(), written.len());
        let only = FileFilter {
            session: Some(s),
            ..Default::default()
        };
        for h in &got {
            let r = crate::tool_scan::resolve_like_pi(cwd, &h.path);
            assert_eq!(h.resolved, r, "{cwd} {}", h.path);
            if (h.path == "~" || h.path.starts_with("~/")) && !r.starts_with('~') {
                expanded += 1;
            }
            for q in [&h.path, &h.resolved] {
                assert!(
                    snap.files_exact(q, &only).unwrap().contains(h),
                    "{cwd}: {q}"
                );
            }
        }
    }
    // `~` and `~/notes.md` expanded in the three sessions whose cwd lies in a home folder.
    assert_eq!(expanded, 6);
    let h = snap
        .files_exact("/Users/ann/notes.md", &Default::default())
        .unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!(h[0].path, "~/notes.md");
    let h = snap
        .files_exact("/home/u/proj/a b c.txt", &Default::default())
        .unwrap();
    assert_eq!(h.len(), 1);
}

#[test]
fn branch_exports_load_in_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let root = crate::common::root();
    let files = [
        root.join("fixtures/sessions/02-small-branches.jsonl"),
        root.join("fixtures/sessions/04-many-branches.jsonl"),
        root.join("fixtures/sessions/07-v1.jsonl"),
        root.join("fixtures/edge/orphan-parent.jsonl"),
        root.join("fixtures/edge/multi-root.jsonl"),
    ];
    store
        .import(&files, &Default::default(), &mut |_| {})
        .unwrap();
    let snap = store.snapshot().unwrap();
    let oracle = root.join("../shared/oracle/oracle");
    for p in &files {
        let s = snap.session_by_path(p).unwrap().unwrap();
        let rec = snap.session(s).unwrap().unwrap();
        let rows = snap.rows(s).unwrap();
        let nodes: Vec<_> = rows
            .iter()
            .copied()
            .filter(|e| snap.link(*e).unwrap().is_some())
            .collect();
        for &e in [nodes.last(), nodes.get(nodes.len() / 2)].iter().flatten() {
            let out = dir.path().join("branch.jsonl");
            let mut buf = Vec::new();
            let r = snap.export_branch(s, *e, &mut buf).unwrap();
            std::fs::write(&out, &buf).unwrap();
            let path = snap.path_to_root(*e).unwrap();
            assert_eq!(r.entries, path.len() as u64);
            let o = std::process::Command::new(&oracle)
                .arg("load")
                .arg(&out)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["entryCount"], path.len(), "{}", p.display());
            assert_eq!(v["header"]["parentSession"], rec.path.as_str());
            assert_eq!(v["header"]["cwd"], rec.cwd.as_str());
            assert_eq!(v["migrated"], false);
            // The oracle's leaf path is the whole exported branch.
            let ids: Vec<String> = path
                .iter()
                .map(|k| snap.entry_id(*k).unwrap().unwrap())
                .collect();
            let last = v["entries"].as_array().unwrap().last().unwrap();
            assert_eq!(last["id"], ids.last().unwrap().as_str());
        }
    }
}

/// A tool result imported after its call (a later append) sets the hit's status, a second
/// result for the same call (last one wins) changes it again, under both of the hit's paths;
/// and the active flags follow the leaf as the file grows.
#[test]
fn a_result_appended_later_sets_the_status_of_its_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let src = crate::common::root().join("fixtures/sessions/02-small-branches.jsonl");
    let full = std::fs::read_to_string(&src).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    // The first result of a call that has a path, and its call's id.
    let mut calls = HashSet::new();
    let mut cut = None;
    for (n, l) in lines.iter().enumerate() {
        let v: Value = serde_json::from_str(l).unwrap();
        let m = &v["message"];
        if m["role"] == "assistant" {
            for b in m["content"].as_array().into_iter().flatten() {
                if b["type"] == "toolCall" && b["arguments"]["path"].is_string() {
                    calls.insert(b["id"].as_str().unwrap().to_owned());
                }
            }
        }
        if m["role"] == "toolResult" && calls.contains(m["toolCallId"].as_str().unwrap()) {
            cut = Some((n, m["toolCallId"].as_str().unwrap().to_owned()));
            break;
        }
    }
    let (cut, call) = cut.expect("a result of a call with a path");
    let file = dir.path().join("grow.jsonl");
    let check = |want_status: Option<bool>, outcome: Outcome| {
        let r = store.import_file(&file).unwrap();
        assert_eq!(r.outcome, outcome, "{:?}", r.error);
        let snap = store.snapshot().unwrap();
        let s = snap.session_by_path(&file).unwrap().unwrap();
        let got = snap.files_of_session(s).unwrap();
        let (want, _) = scan(&file);
        assert_eq!(got.iter().map(tuple).collect::<Vec<_>>(), want);
        let h = got
            .iter()
            .find(|h| h.tool_call_id.as_deref() == Some(call.as_str()))
            .unwrap();
        assert_eq!(h.is_error, want_status);
        let only = FileFilter {
            session: Some(s),
            ..Default::default()
        };
        for q in [&h.path, &h.resolved] {
            assert!(snap.files_exact(q, &only).unwrap().contains(h), "{q}");
        }
    };
    let upto = |n: usize| {
        lines[..n]
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    };
    std::fs::write(&file, upto(cut)).unwrap();
    check(None, Outcome::New);
    let status = {
        let v: Value = serde_json::from_str(lines[cut]).unwrap();
        v["message"]["isError"] == Value::Bool(true)
    };
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    use std::io::Write;
    f.write_all(&upto(lines.len()).as_bytes()[upto(cut).len()..])
        .unwrap();
    drop(f);
    check(Some(status), Outcome::Grown);
    // A second result for the same call, with the other status, appended on the leaf.
    let last: Value = serde_json::from_str(lines[lines.len() - 1]).unwrap();
    let extra = serde_json::json!({
        "type": "message", "id": "feedf00d", "parentId": last["id"],
        "timestamp": "2026-12-01T00:00:00.000Z",
        "message": {"role": "toolResult", "toolCallId": call, "toolName": "read",
            "content": [{"type": "text", "text": "again"}], "isError": !status,
            "timestamp": 1}
    });
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&file)
        .unwrap();
    writeln!(f, "{extra}").unwrap();
    drop(f);
    check(Some(!status), Outcome::Grown);
}

/// An entry with a field the typed view cannot hold (a usage count written as text, a text
/// block whose text is an array) keeps its tool calls in the index, as pi reads them; so do
/// the result status of a tool result with such a field and a compaction's file lists.
#[test]
fn an_entry_with_an_odd_field_keeps_its_file_operations() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("store.redb")).unwrap();
    let file = dir.path().join("odd.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-02-01T10:00:00.000Z","cwd":"/w"}"#,
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-02-01T10:00:01.000Z","message":{"role":"user","content":"go","timestamp":1}}"#,
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-02-01T10:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"edit","arguments":{"path":"src/usage_str.rs"}}],"usage":{"input":1,"output":"5"},"timestamp":2}}"#,
        r#"{"type":"message","id":"r1","parentId":"a1","timestamp":"2026-02-01T10:00:03.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"edit","content":[{"type":"text","text":["x"]}],"isError":true,"timestamp":3}}"#,
        r#"{"type":"message","id":"a2","parentId":"r1","timestamp":"2026-02-01T10:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":["x"]},{"type":"toolCall","id":"c2","name":"write","arguments":{"path":"src/text_array.rs"}}],"timestamp":4}}"#,
        r#"{"type":"compaction","id":"k1","parentId":"a2","timestamp":"2026-02-01T10:00:05.000Z","summary":"s","firstKeptEntryId":"a2","tokensBefore":"many","details":{"readFiles":["src/read.rs"],"modifiedFiles":[]}}"#,
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::New, "{:?}", r.error);
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&file).unwrap().unwrap();
    let got = snap.files_of_session(s).unwrap();
    let (want, _) = scan(&file);
    assert_eq!(got.iter().map(tuple).collect::<Vec<_>>(), want);
    let paths: Vec<(&str, Option<bool>)> =
        got.iter().map(|h| (h.path.as_str(), h.is_error)).collect();
    assert!(
        paths.contains(&("src/usage_str.rs", Some(true))),
        "{paths:?}"
    );
    assert!(paths.contains(&("src/text_array.rs", None)), "{paths:?}");
    assert!(paths.iter().any(|p| p.0 == "src/read.rs"), "{paths:?}");
    // verify's rebuild of the index from the records agrees with what import wrote.
    drop(snap);
    let report = store.verify().unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
}
