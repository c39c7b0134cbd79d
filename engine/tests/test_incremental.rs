//! Incremental and idempotent import: unchanged files are not read, appends read only the new
//! lines, rewrites are read again, and importing twice changes nothing.

use std::io::Write;
use std::path::{Path, PathBuf};

use pisess_engine::{Outcome, Store};

use crate::common;

fn corpus_file(name: &str) -> PathBuf {
    common::corpus().join(name)
}

fn export(store: &Store, path: &Path) -> Vec<u8> {
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(path).unwrap().unwrap();
    let mut out = Vec::new();
    snap.export_session(s, &mut out).unwrap();
    out
}

/// Copies corpus files into `dir/sessions/--w--` (pi's layout: a folder per working
/// directory) and returns that folder.
fn copy_corpus_files(dir: &Path, names: &[&str]) -> PathBuf {
    let src = dir.join("sessions/--w--");
    std::fs::create_dir_all(&src).unwrap();
    for name in names {
        std::fs::copy(corpus_file(name), src.join(name)).unwrap();
    }
    src
}

/// Splits a file's bytes after `n` lines.
fn split_after_lines(bytes: &[u8], n: usize) -> (&[u8], &[u8]) {
    let mut at = 0;
    for _ in 0..n {
        at += bytes[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
    }
    bytes.split_at(at)
}

/// Appends `bytes` to `file`, as pi appends.
fn append(file: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// `store` holds exactly what a fresh store importing `file` once holds (key for key).
fn assert_same_as_one_import(dir: &Path, store: &Store, file: &Path, what: &str) {
    let once = Store::open(dir.join("once.redb")).unwrap();
    once.import_file(file).unwrap();
    assert_eq!(
        once.content_digest().unwrap(),
        store.content_digest().unwrap(),
        "{what}"
    );
}

#[test]
fn unchanged_files_are_not_read_and_importing_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let src = copy_corpus_files(
        dir.path(),
        &[
            "03-small-100.jsonl",
            "05-med-500.jsonl",
            "09-med-3000-manybranch.jsonl",
        ],
    );
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let folder = [dir.path().join("sessions")];
    let first = store
        .import(&folder, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(first.count(Outcome::New), 3);
    let digest = store.content_digest().unwrap();
    let mut events = 0;
    let second = store
        .import(&folder, &Default::default(), &mut |_| events += 1)
        .unwrap();
    assert_eq!(second.count(Outcome::Unchanged), 3);
    assert_eq!((second.bytes_read(), second.lines_read()), (0, 0));
    assert!(events >= 4);
    assert_eq!(store.content_digest().unwrap(), digest);

    // The same files imported into a fresh store give the same store.
    let other = Store::open(dir.path().join("other.redb")).unwrap();
    other
        .import(&folder, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(other.content_digest().unwrap(), digest);

    // A deleted file is marked gone, and comes back when it reappears.
    let gone = src.join("03-small-100.jsonl");
    std::fs::rename(&gone, dir.path().join("aside")).unwrap();
    let r = store
        .import(&folder, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(r.gone, 1);
    let snap = store.snapshot().unwrap();
    assert_eq!(
        snap.sessions()
            .unwrap()
            .iter()
            .filter(|(_, s)| s.gone)
            .count(),
        1
    );
    drop(snap);
    std::fs::rename(dir.path().join("aside"), &gone).unwrap();
    let r = store
        .import(&folder, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!((r.gone, r.count(Outcome::Unchanged)), (0, 3));
    assert_eq!(store.content_digest().unwrap(), digest);

    // A file replaced by a symbolic link to a copy elsewhere: the copy is imported under its
    // own path, and the session of the replaced file is gone (not live twice).
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let target = elsewhere.join("03.jsonl");
    std::fs::rename(&gone, &target).unwrap();
    std::os::unix::fs::symlink(&target, &gone).unwrap();
    let r = store
        .import(&folder, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(
        (r.gone, r.count(Outcome::New), r.count(Outcome::Unchanged)),
        (1, 1, 2)
    );
    let snap = store.snapshot().unwrap();
    let live: Vec<_> = snap
        .sessions()
        .unwrap()
        .into_iter()
        .filter(|(_, s)| !s.gone)
        .map(|(_, s)| s.path)
        .collect();
    assert_eq!(live.len(), 3, "{live:?}");
    let target = std::fs::canonicalize(&target).unwrap();
    assert!(live.iter().any(|p| Path::new(p) == target), "{live:?}");
    drop(snap);
    // Nothing changed since: a no-op.
    let r = store
        .import(&folder, &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!((r.gone, r.count(Outcome::Unchanged)), (0, 3));
}

/// The gone check of an unchanged import reads only the catalogue keys that can lie under the
/// imported folder: `a`'s range holds `a/...` but also siblings such as `a-2` and `a.b` (`-` and
/// `.` sort before `/`), while `a0` sorts just after it. Whatever disappears in a sibling is
/// not this import's business; whatever disappears below `a`, however deep, is.
#[test]
fn an_import_marks_gone_only_what_disappeared_under_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("s");
    let tiny = corpus_file("03-small-100.jsonl");
    let files = [
        "a/sub/x.jsonl",
        "a/y.jsonl",
        "a-2/x.jsonl",
        "a.b/x.jsonl",
        "a0/x.jsonl",
    ];
    for f in files {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::copy(&tiny, &p).unwrap();
    }
    let path = dir.path().join("store.redb");
    let import = |store: &Store, paths: &[std::path::PathBuf]| {
        store.import(paths, &Default::default(), &mut |_| {})
    };
    let whole = [root.clone()];
    let store = Store::open(&path).unwrap();
    let r = import(&store, &whole).unwrap();
    assert_eq!(r.count(Outcome::New), files.len());
    store.close().unwrap();

    // Siblings gone: importing `a` is still a no-op, decided on a read-only store.
    for f in ["a-2/x.jsonl", "a.b/x.jsonl", "a0/x.jsonl"] {
        std::fs::remove_file(root.join(f)).unwrap();
    }
    let a = [root.join("a")];
    let ro = Store::open_read_only(&path).unwrap();
    assert!(!ro.is_writable());
    let r = import(&ro, &a).unwrap();
    assert_eq!((r.count(Outcome::Unchanged), r.gone), (2, 0));

    // A file two levels below `a` gone: the read-only store refuses (the import must write)...
    std::fs::remove_file(root.join("a/sub/x.jsonl")).unwrap();
    assert!(matches!(
        import(&ro, &a),
        Err(pisess_engine::StoreError::ReadOnly { .. })
    ));
    // ...and a writable one marks exactly that session gone.
    let store = ro.into_writable().unwrap();
    let r = import(&store, &a).unwrap();
    assert_eq!((r.count(Outcome::Unchanged), r.gone), (1, 1));
    // The whole tree: the three siblings are gone too, and then nothing is left to mark.
    let r = import(&store, &whole).unwrap();
    assert_eq!((r.count(Outcome::Unchanged), r.gone), (1, 3));
    let r = import(&store, &whole).unwrap();
    assert_eq!((r.count(Outcome::Unchanged), r.gone), (1, 0));
    store.close().unwrap();

    // A damaged catalogue: a source row under the folder names a session that does not
    // exist. Imports mark nothing (and say so), and verify names the row.
    let ghost = std::fs::canonicalize(&root).unwrap().join("a/ghost.jsonl");
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(pisess_engine::schema::SOURCES)
            .unwrap()
            .insert(ghost.to_str().unwrap(), (9999, 1, 1, false))
            .unwrap();
        tx.commit().unwrap();
    }
    let mut store = Store::open(&path).unwrap();
    for _ in 0..2 {
        let r = import(&store, &whole).unwrap();
        assert_eq!((r.count(Outcome::Unchanged), r.gone), (1, 0));
    }
    let v = store.verify().unwrap();
    assert!(
        v.findings
            .iter()
            .any(|f| f.table == "sources.v2" && f.message.contains("ghost.jsonl")),
        "{:?}",
        v.findings
    );
}

/// An unchanged import of several folders, overlapping, repeated or in any order, is a no-op
/// both on the store and through the copy of its catalogue, and stops being one when a file
/// under one of them (and only then) disappears.
#[test]
fn several_folders_in_any_order_are_unchanged_until_a_file_under_one_disappears() {
    use pisess_engine::source_copy::SourceCopy;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("s");
    let tiny = corpus_file("03-small-100.jsonl");
    for f in ["a/sub/x.jsonl", "a/y.jsonl", "a-2/w.jsonl", "b/z.jsonl"] {
        let p = root.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::copy(&tiny, &p).unwrap();
    }
    let path = dir.path().join("store.redb");
    let store = Store::open(&path).unwrap();
    let r = store
        .import(
            std::slice::from_ref(&root),
            &Default::default(),
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(r.count(Outcome::New), 4);
    store.close().unwrap();
    let lists: Vec<Vec<&str>> = vec![
        vec!["a/sub", "a"],
        vec!["a", "a/sub"],
        vec!["b", "a"],
        vec!["a", "a"],
        vec!["b", "a/sub", "a-2", "a"],
        vec!["a/sub", "b"],
        vec!["a/y.jsonl", "a/sub"],
    ];
    // (files each list finds, each counted once however often it is named; whether it
    // contains `a`)
    let expect = [
        (2, true),
        (2, true),
        (3, true),
        (2, true),
        (4, true),
        (2, false),
        (2, false),
    ];
    let unchanged = |paths: &[PathBuf]| -> (Option<usize>, Option<usize>) {
        let ro = Store::open_read_only(&path).unwrap();
        let slow = ro
            .import(paths, &Default::default(), &mut |_| {})
            .ok()
            .map(|r| r.count(Outcome::Unchanged));
        ro.close().unwrap();
        let fast = Store::unchanged_by_copy(&path, paths).map(|r| r.count(Outcome::Unchanged));
        (slow, fast)
    };
    for (list, (n, _)) in lists.iter().zip(expect) {
        let paths: Vec<PathBuf> = list.iter().map(|p| root.join(p)).collect();
        assert_eq!(unchanged(&paths), (Some(n), Some(n)), "{list:?}");
        assert!(SourceCopy::load(&path).is_some());
    }
    std::fs::remove_file(root.join("a/y.jsonl")).unwrap();
    for (list, (n, has_a)) in lists.iter().zip(expect) {
        if list.contains(&"a/y.jsonl") {
            continue;
        }
        let paths: Vec<PathBuf> = list.iter().map(|p| root.join(p)).collect();
        // Without `a/y.jsonl`, a list holding `a` finds one file fewer, and the
        // import must mark the session gone: a read-only store refuses, the copy says no.
        let found = n - usize::from(list.contains(&"a"));
        let want = if has_a {
            (None, None)
        } else {
            (Some(found), Some(found))
        };
        assert_eq!(unchanged(&paths), want, "{list:?}");
    }
}

#[test]
fn appended_lines_are_the_only_lines_read() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(corpus_file("09-med-3000-manybranch.jsonl")).unwrap();
    let total_lines = full.iter().filter(|&&b| b == b'\n').count();
    let file = dir.path().join("grow.jsonl");
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let mut done = 0;
    // Grow the file in three steps; each import reads exactly the new lines.
    for cut in [total_lines / 3, 2 * total_lines / 3, total_lines] {
        let (head, _) = split_after_lines(&full, cut);
        let new = &head[done..];
        if done == 0 {
            std::fs::write(&file, head).unwrap();
        } else {
            append(&file, new);
        }
        let r = store.import_file(&file).unwrap();
        let new_lines = new.iter().filter(|&&b| b == b'\n').count() as u64;
        let want = if done == 0 {
            Outcome::New
        } else {
            Outcome::Grown
        };
        assert_eq!(r.outcome, want, "{:?}", r.error);
        assert_eq!(r.bytes_read, new.len() as u64);
        assert_eq!(r.lines_read, new_lines);
        assert_eq!(export(&store, &file), head);
        done = head.len();
    }
    // The store equals one built from the whole file at once.
    assert_same_as_one_import(dir.path(), &store, &file, "");
}

/// A file read while pi was still writing its last line holds that line cut short (a junk row
/// without a newline). When the file has grown by the rest of the line and more, the next
/// import reads from the start of that line only, and the store is the one a single import of
/// the grown file makes, key for key; when another file was imported in between (the cut
/// line's key is no longer the store's last), the session still exports as the file and the
/// store passes `verify`. The same when the write never finished and later lines were appended
/// after the cut one (glued onto it, as pi would append them). Every line of the file is cut
/// once, so the cut line is sometimes the first row of a block of rows and sometimes a later one.
#[test]
fn a_line_cut_short_by_a_write_in_progress_is_read_again_from_its_start() {
    let full = std::fs::read(corpus_file("03-small-100.jsonl")).unwrap();
    let lines = full.iter().filter(|&&b| b == b'\n').count();
    let other = corpus_file("02-small-40.jsonl");
    for n in 1..lines {
        let (head, rest) = split_after_lines(&full, n);
        let line = rest.iter().position(|&b| b == b'\n').unwrap() + 1;
        // Cut inside the line: its first byte, its middle, all but the closing brace.
        let cuts = match n % 10 {
            0 => vec![1, line / 2, line - 2],
            _ => vec![line / 2],
        };
        for cut in cuts {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("s.jsonl");
            let store = Store::open(dir.path().join("store.redb")).unwrap();
            let torn = [head, &rest[..cut]].concat();
            std::fs::write(&file, &torn).unwrap();
            let r = store.import_file(&file).unwrap();
            assert_eq!((r.outcome, r.warned_lines), (Outcome::New, 1), "line {n}");
            assert_eq!(export(&store, &file), torn);
            let between = n % 3 == 0;
            if between {
                store.import_file(&other).unwrap();
            }
            // The rest of the line and up to two more lines; or, as when the write never
            // finished and pi appended after it, the lines after the cut one (glued onto it).
            let (more, _) = split_after_lines(&full, (n + 3).min(lines));
            let never = n % 10 == 5;
            let added = if never {
                &more[head.len() + line..]
            } else {
                &more[torn.len()..]
            };
            let grown = [&torn, added].concat();
            append(&file, added);
            let r = store.import_file(&file).unwrap();
            let read = &grown[head.len()..];
            assert_eq!(
                r.outcome,
                Outcome::Grown,
                "line {n}, cut {cut}: {:?}",
                r.error
            );
            assert_eq!(r.bytes_read, read.len() as u64, "line {n}, cut {cut}");
            assert_eq!(
                r.lines_read,
                read.iter().filter(|&&b| b == b'\n').count() as u64
            );
            assert_eq!(r.warned_lines, u64::from(never));
            assert_eq!(export(&store, &file), grown);
            if between {
                let mut store = store;
                let v = store.verify().unwrap();
                assert!(v.findings.is_empty(), "line {n}: {:?}", v.findings);
            } else {
                assert_same_as_one_import(
                    dir.path(),
                    &store,
                    &file,
                    &format!("line {n}, cut {cut}"),
                );
            }
        }
    }
}

/// Three BOM bytes at the start of appended lines are those lines' bytes, not a file's byte
/// order mark: the import of the append keeps them (export gives back the file) and reads the
/// lines as an import of the whole file does (a BOM-prefixed line is no JSON there).
#[test]
fn a_bom_in_appended_lines_is_kept_and_read_as_a_whole_read_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    let full = std::fs::read(corpus_file("03-small-100.jsonl")).unwrap();
    let (head, rest) = split_after_lines(&full, 20);
    let (next, _) = split_after_lines(rest, 2);
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    std::fs::write(&file, head).unwrap();
    assert_eq!(store.import_file(&file).unwrap().outcome, Outcome::New);
    for added in [
        [b"\xEF\xBB\xBF".as_slice(), next].concat(),
        b"\xEF\xBB\xBF\n".to_vec(),
    ] {
        append(&file, &added);
        let r = store.import_file(&file).unwrap();
        assert_eq!(r.outcome, Outcome::Grown, "{:?}", r.error);
        assert_eq!(r.bytes_read, added.len() as u64);
        assert_eq!(export(&store, &file), std::fs::read(&file).unwrap());
    }
    assert_same_as_one_import(dir.path(), &store, &file, "");
}

#[test]
fn rewrites_and_conflicting_appends_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.jsonl");
    std::fs::copy(corpus_file("03-small-100.jsonl"), &file).unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    store.import_file(&file).unwrap();
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&file).unwrap().unwrap();
    let first_id = snap
        .rows(s)
        .unwrap()
        .iter()
        .find_map(|k| snap.entry_id(*k).unwrap())
        .unwrap();
    drop(snap);

    // An append that reuses an old id changes how old entries resolve: full re-read.
    let dup = format!(
        "{{\"type\":\"custom\",\"customType\":\"t\",\"id\":\"{first_id}\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:00.000Z\"}}\n"
    );
    append(&file, dup.as_bytes());
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::Rewritten);
    assert_eq!(r.bytes_read, std::fs::metadata(&file).unwrap().len());
    assert_eq!(export(&store, &file), std::fs::read(&file).unwrap());
    let snap = store.snapshot().unwrap();
    let k = snap.entry_by_id(s, &first_id).unwrap().unwrap();
    assert_eq!(snap.depth(k).unwrap(), Some(0));
    assert_eq!(snap.leaf(s).unwrap(), Some(k));
    drop(snap);

    // A change in the middle is a rewrite.
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() / 2;
    let pos = at
        + bytes[at..]
            .windows(9)
            .position(|w| w == b"\"content\"")
            .unwrap();
    bytes.splice(pos..pos + 9, b"\"CONTENT\"".iter().copied());
    std::fs::write(&file, &bytes).unwrap();
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::Rewritten);
    assert_eq!(export(&store, &file), bytes);
    // The rows of the old version are gone.
    let snap = store.snapshot().unwrap();
    assert_eq!(snap.sessions().unwrap().len(), 1);
    assert_eq!(
        snap.rows(s).unwrap().len() as u64,
        snap.session(s).unwrap().unwrap().rows
    );
}

#[test]
fn odd_bytes_survive_the_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store.redb")).unwrap();
    let header = br#"{"type":"session","version":3,"id":"odd","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(b"\n  \njunk{\n");
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(b"\r\n");
    bytes.extend_from_slice(br#"{"type":"custom","customType":"t","id":"a","parentId":null,"timestamp":"t"}{"type":"custom","customType":"t","id":"b","parentId":"a","timestamp":"t"}"#);
    bytes.extend_from_slice(
        b"\n[1,2]\nnull\n\xff\xfe{\"type\":\"custom\",\"id\":\"c\",\"parentId\":\"b\"}\n",
    );
    bytes.extend_from_slice(br#"{"type":"custom","id":"d","parentId":"c"}"#);
    bytes.extend_from_slice(b"\n{\"type\":\"mess");
    let file = dir.path().join("odd.jsonl");
    std::fs::write(&file, &bytes).unwrap();
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::New, "{:?}", r.error);
    assert_eq!(export(&store, &file), bytes);
    let snap = store.snapshot().unwrap();
    let s = snap.session_by_path(&file).unwrap().unwrap();
    let d = snap.entry_by_id(s, "d").unwrap().unwrap();
    let ids: Vec<_> = snap
        .path_to_root(d)
        .unwrap()
        .into_iter()
        .map(|k| snap.entry_id(k).unwrap().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b", "c", "d"]);
    // The torn last line is junk: when it is completed, it alone is read again.
    append(&file, b"age\"}\n");
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::Grown, "{:?}", r.error);
    assert_eq!(r.bytes_read, b"{\"type\":\"message\"}\n".len() as u64);
    assert_eq!(export(&store, &file), std::fs::read(&file).unwrap());
    assert_same_as_one_import(dir.path(), &store, &file, "");
    // A line that is a whole record without its newline is read in full when the file grows.
    std::fs::write(&file, [&bytes[..bytes.len() - 13], b"{}"].concat()).unwrap();
    assert_eq!(
        store.import_file(&file).unwrap().outcome,
        Outcome::Rewritten
    );
    append(&file, b"\n[3]\n");
    let r = store.import_file(&file).unwrap();
    assert_eq!(r.outcome, Outcome::Rewritten);
    assert_eq!(export(&store, &file), std::fs::read(&file).unwrap());
}

/// The copy of the catalogue beside the store (`pisess_engine::source_copy`): written by an
/// unchanged import on a read-only store, it gives the same report as the store while nothing
/// changes, and nothing once a file or the store changes.
#[test]
fn the_copy_of_the_catalogue_answers_as_the_store_until_anything_changes() {
    use pisess_engine::source_copy::{SourceCopy, path_for};
    let dir = tempfile::tempdir().unwrap();
    let src = copy_corpus_files(
        dir.path(),
        &[
            "03-small-100.jsonl",
            "05-med-500.jsonl",
            "04-small-250.jsonl",
        ],
    );
    let path = dir.path().join("store.redb");
    let folder = [dir.path().join("sessions")];
    let one = [src.join("05-med-500.jsonl")];
    let import = |store: &Store, paths: &[PathBuf]| {
        store
            .import(paths, &Default::default(), &mut |_| {})
            .unwrap()
    };
    let facts = |r: &pisess_engine::ImportReport| -> Vec<(PathBuf, Outcome, Option<u64>)> {
        let mut v: Vec<_> = r
            .files
            .iter()
            .map(|f| (f.path.clone(), f.outcome, f.session.map(|s| s.0)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let store = Store::open(&path).unwrap();
    assert_eq!(import(&store, &folder).count(Outcome::New), 3);
    assert_eq!(import(&store, &folder).count(Outcome::Unchanged), 3);
    store.close().unwrap();
    // Neither the writing import nor the unchanged one on the writable store left a copy
    // (redb may write on closing a writable store).
    assert!(!path_for(&path).exists());
    assert!(Store::unchanged_by_copy(&path, &folder).is_none());

    // An unchanged import on a read-only store writes it; it then answers as the store does.
    let ro = Store::open_read_only(&path).unwrap();
    let slow = import(&ro, &folder);
    let slow_one = import(&ro, &one);
    ro.close().unwrap();
    assert!(SourceCopy::load(&path).is_some());
    let fast = Store::unchanged_by_copy(&path, &folder).unwrap();
    assert_eq!(facts(&fast), facts(&slow));
    assert_eq!(fast.count(Outcome::Unchanged), 3);
    let fast_one = Store::unchanged_by_copy(&path, &one).unwrap();
    assert_eq!(facts(&fast_one), facts(&slow_one));

    // A file grows: no answer from the copy; the import (on a writable store) removes it.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&one[0])
        .unwrap();
    let tail = std::fs::read(&one[0]).unwrap();
    let last = tail[..tail.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    f.write_all(&tail[last..]).unwrap();
    drop(f);
    assert!(Store::unchanged_by_copy(&path, &folder).is_none());
    assert!(Store::unchanged_by_copy(&path, &one).is_none());
    let store = Store::open(&path).unwrap();
    assert!(
        !path_for(&path).exists(),
        "opening for writing removes the copy"
    );
    let r = import(&store, &folder);
    // (The appended line repeats an id, so the file is read again rather than grown.)
    let read_again = r.count(Outcome::Grown) + r.count(Outcome::Rewritten);
    assert_eq!((read_again, r.count(Outcome::Unchanged)), (1, 2));
    store.close().unwrap();

    // Written again by a read-only unchanged import; a file that disappears is noticed.
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(import(&ro, &folder).count(Outcome::Unchanged), 3);
    ro.close().unwrap();
    assert!(Store::unchanged_by_copy(&path, &folder).is_some());
    let gone = src.join("03-small-100.jsonl");
    let kept = std::fs::read(&gone).unwrap();
    std::fs::remove_file(&gone).unwrap();
    assert!(Store::unchanged_by_copy(&path, &folder).is_none());
    std::fs::write(&gone, &kept).unwrap();
    // (Written again with a new mtime: changed for the copy and for the store alike; read
    // again, to the same bytes, so counted as unchanged.)
    assert!(Store::unchanged_by_copy(&path, &folder).is_none());
    let store = Store::open(&path).unwrap();
    let r = import(&store, &folder);
    assert_eq!(r.count(Outcome::Unchanged), 3);
    assert_eq!(r.bytes_read(), kept.len() as u64);
    store.close().unwrap();
    let ro = Store::open_read_only(&path).unwrap();
    assert_eq!(import(&ro, &folder).count(Outcome::Unchanged), 3);
    ro.close().unwrap();
    assert!(Store::unchanged_by_copy(&path, &folder).is_some());

    // The store written by something else than pisess: the copy no longer matches it.
    std::thread::sleep(std::time::Duration::from_millis(20));
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(pisess_engine::schema::META)
            .unwrap()
            .insert("written-by-a-test", 1)
            .unwrap();
        tx.commit().unwrap();
    }
    assert!(path_for(&path).exists());
    assert!(SourceCopy::load(&path).is_none());
    assert!(Store::unchanged_by_copy(&path, &folder).is_none());
}

/// A file replaced by rename while it is being imported (an editor's save, a sync tool, `git
/// checkout`): the import stores the file it opened, with that file's own window hashes, so
/// the next import sees a rewritten file and reads it in full. (The hashes used to be read from
/// the path again after the import: the new file's, under the old file's size; the next import
/// then took the larger new file for the old one grown and stored a mix of the two.)
#[test]
fn a_file_replaced_while_it_is_imported_is_read_in_full_next_time() {
    let (old, new) = ("02-small-branches", "04-many-branches");
    let len = |n: &str| {
        std::fs::metadata(common::root().join(format!("fixtures/sessions/{n}.jsonl")))
            .unwrap()
            .len()
    };
    // Larger, as the old bug needed: it took the new file for the old one grown.
    assert!(len(new) > len(old));
    replaced_while_imported(old, new, |b| b.to_vec());
}

/// The same for a v1/v2 file, which the import migrates into a scratch copy: the migration
/// reads the file the import opened (the first `size` bytes it looked at), not the path again,
/// so the session stored is the old file's, under the old file's hashes. (The migration used to
/// open the path again and store the replacement's entries, under the old file's size and
/// mtime.)
#[test]
fn a_v1_file_replaced_while_it_is_imported_is_migrated_from_the_file_opened() {
    replaced_while_imported("07-v1", "08-v2", |bytes| {
        let mut out = Vec::new();
        pisess_migrate::migrate_seekable(std::io::Cursor::new(bytes), &mut out).unwrap();
        out
    });
}

/// Imports a folder whose file (the fixture `old`) is replaced by rename with the fixture `new`
/// as the import opens it; the store must hold `stored(old)` (what the import reads of a file),
/// and the next import must read the new file in full and hold `stored(new)`.
fn replaced_while_imported(old: &str, new: &str, stored: impl Fn(&[u8]) -> Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    let fixture = |n: &str| {
        std::fs::read(common::root().join(format!("fixtures/sessions/{n}.jsonl"))).unwrap()
    };
    let (old, new) = (fixture(old), fixture(new));
    assert_ne!(stored(&old), stored(&new));
    std::fs::write(&file, &old).unwrap();
    let replacement = dir.join("a.jsonl.tmp");
    std::fs::write(&replacement, &new).unwrap();
    let canon = file.canonicalize().unwrap();
    let mut store = Store::open(tmp.path().join("store.redb")).unwrap();
    let first = store
        .import(std::slice::from_ref(&dir), &Default::default(), &mut |ev| {
            if let pisess_engine::ImportEvent::FileStart { path, .. } = ev
                && path == canon
                && replacement.exists()
            {
                // The import has the old file open: replace it under its name.
                std::fs::rename(&replacement, &file).unwrap();
            }
        })
        .unwrap();
    assert_eq!(first.count(Outcome::New), 1, "{:?}", first.files);
    assert!(!replacement.exists(), "the replacement never happened");
    assert_eq!(
        export(&store, &canon),
        stored(&old),
        "the file stored was not the one the import opened"
    );
    let second = store
        .import(std::slice::from_ref(&dir), &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(second.count(Outcome::Rewritten), 1, "{:?}", second.files);
    assert_eq!(export(&store, &canon), stored(&new));
    assert!(store.verify().unwrap().findings.is_empty());
}

/// A file cut shorter while it is being imported fails with "changed while it was being
/// imported", stores nothing of it, and is imported as it is by the next run.
#[test]
fn a_file_cut_while_it_is_imported_fails_and_stores_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    let bytes =
        std::fs::read(common::root().join("fixtures/sessions/04-many-branches.jsonl")).unwrap();
    std::fs::write(&file, &bytes).unwrap();
    let canon = file.canonicalize().unwrap();
    let half = split_after_lines(&bytes, 40).0.len();
    let mut store = Store::open(tmp.path().join("store.redb")).unwrap();
    let first = store
        .import(std::slice::from_ref(&dir), &Default::default(), &mut |ev| {
            if let pisess_engine::ImportEvent::FileStart { path, .. } = ev
                && path == canon
            {
                let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
                f.set_len(half as u64).unwrap();
            }
        })
        .unwrap();
    assert_eq!(first.count(Outcome::Failed), 1);
    let error = first.files[0].error.clone().unwrap();
    assert!(
        error.contains("changed while it was being imported (it became shorter)"),
        "{error}"
    );
    assert!(
        store
            .snapshot()
            .unwrap()
            .session_by_path(&canon)
            .unwrap()
            .is_none()
    );
    let second = store
        .import(std::slice::from_ref(&dir), &Default::default(), &mut |_| {})
        .unwrap();
    assert_eq!(second.count(Outcome::New), 1, "{:?}", second.files);
    assert_eq!(export(&store, &canon), &bytes[..half]);
    assert!(store.verify().unwrap().findings.is_empty());
}

/// The migrated copy of a v1/v2 file is written beside the store under the store's own name
/// plus `.migrating`: two stores in one folder (`s.redb`, `s.old`) never share it, and it never
/// ends in `.jsonl` (pi would list it as a session when the store sits in a session folder).
#[test]
fn the_migration_scratch_file_is_named_for_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        common::root().join("fixtures/sessions/07-v1.jsonl"),
        dir.join("v1.jsonl"),
    )
    .unwrap();
    let store = Store::open(tmp.path().join("s.old")).unwrap();
    let mut seen = Vec::new();
    store
        .import(std::slice::from_ref(&dir), &Default::default(), &mut |ev| {
            if let pisess_engine::ImportEvent::FileStart { .. } = ev {
                let mut names: Vec<String> = std::fs::read_dir(tmp.path())
                    .unwrap()
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                seen.push(names);
            }
        })
        .unwrap();
    // The first read stops at the v1 header; the second reads the migrated copy.
    assert!(
        seen.iter()
            .any(|n| n.contains(&"s.old.migrating".to_owned())),
        "{seen:?}"
    );
    assert!(
        seen.iter().flatten().all(|n| !n.ends_with(".jsonl")),
        "{seen:?}"
    );
    assert!(!tmp.path().join("s.old.migrating").exists());
}
