//! `pisess verify [--repair]` on a store whose indexes were damaged behind its back (rows of
//! `entry_ids`, `parents`, `children`, `labels` and of the file index — `file_hits`,
//! `file_resolved`, `file_session_paths`, `tool_results` — of `settings`, and of the outline
//! that `log` and `tree` print
//! from, removed, altered or invented directly with redb): verify reports every damaged table,
//! `--repair` rebuilds them from the records, a second verify passes, the store is again
//! identical to the undamaged one (content digest of every table) and queries answer as
//! before. And on a store file damaged byte by byte (pages, rows, its header): commands report
//! the damage with the rebuild hint, never with a panic or an export that is not the session.

use std::fs;
use std::path::Path;

use pisess_engine::files::{
    FILE_HITS, FILE_RESOLVED, FILE_SESSION_PATHS, TOOL_RESULTS, decode_block, encode_block,
};
use pisess_engine::outline::OUTLINE;
use pisess_engine::schema::{
    CHILDREN, ENTRY_IDS, LABELS, PARENTS, SETTING_THINKING, SETTINGS, SOURCES, SourceStat,
};
use pisess_engine::{EntryKey, Link, Store};
use redb::ReadableTable;

use crate::common::{TestEnv, fixture, run_until_the_reader_stops, run_with_store as run};

/// Answers that read every damaged index: the catalogue, and per session its log, tree,
/// context and labels.
fn answers(env: &TestEnv, store: &Path) -> Vec<String> {
    let (code, ls, err) = run(env, store, &["--json", "ls"]);
    assert_eq!(code, 0, "{err}");
    let (code, files, err) = run(env, store, &["--json", "files", "**"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        files.lines().count() > 10,
        "too few file operations to test: {files}"
    );
    let mut out = vec![ls.clone(), files];
    for line in ls.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let id = v["id"].as_str().unwrap();
        for q in [
            vec!["log", id],
            vec!["tree", id],
            vec!["--json", "context", id],
            vec!["show", id, "@leaf"],
        ] {
            let (code, o, e) = run(env, store, &q);
            out.push(format!("{q:?} → {code}\n{o}\n{e}"));
        }
    }
    out
}

fn digest(store: &Path) -> [u8; 32] {
    let s = Store::open(store).unwrap();
    let d = s.content_digest().unwrap();
    s.close().unwrap();
    d
}

/// Damages every tree index and the file index of the store at `path` with redb directly.
fn damage(path: &Path) {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut ids = tx.open_table(ENTRY_IDS).unwrap();
        let rows: Vec<((u64, String), u64)> = ids
            .iter()
            .unwrap()
            .take(6)
            .map(|r| {
                let (k, v) = r.unwrap();
                let (s, id) = k.value();
                ((s, id.to_owned()), v.value())
            })
            .collect();
        for ((s, id), _) in &rows[..3] {
            ids.remove((*s, id.as_str())).unwrap();
        }
        let ((s, id), k) = &rows[4];
        ids.insert((*s, id.as_str()), k + 1).unwrap();
        ids.insert((*s, "no-such-entry"), *k).unwrap();

        let mut parents = tx.open_table(PARENTS).unwrap();
        let links: Vec<(u64, Link)> = parents
            .iter()
            .unwrap()
            .filter_map(|r| {
                let (k, v) = r.unwrap();
                v.value().parent().map(|_| (k.value(), v.value()))
            })
            .take(20)
            .collect();
        parents.remove(links[3].0).unwrap();
        let (k, mut l) = links[7];
        l.depth += 5;
        parents.insert(k, l).unwrap();
        let (k, mut l) = links[9];
        l.parent = EntryKey(links[12].0);
        parents.insert(k, l).unwrap();

        // Children: the row of a child that starts a run removed, and a child that continues
        // its parent's run (never stored) listed.
        let mut children = tx.open_table(CHILDREN).unwrap();
        let (p, c) = children.first().unwrap().map(|(k, _)| k.value()).unwrap();
        children.remove((p, c)).unwrap();
        let (k, l) = links[16];
        assert!(!l.starts_run(EntryKey(k)), "links[16] continues a run");
        children.insert((l.parent.0, k), ()).unwrap();

        let mut labels = tx.open_table(LABELS).unwrap();
        let first: Vec<(u64, String)> = labels
            .iter()
            .unwrap()
            .take(1)
            .map(|r| {
                let (k, _) = r.unwrap();
                (k.value().0, k.value().1.to_owned())
            })
            .collect();
        assert_eq!(first.len(), 1, "the fixtures have no label");
        labels.remove((first[0].0, first[0].1.as_str())).unwrap();
        labels.insert((first[0].0, "deadbeef"), "invented").unwrap();

        // The catalogue: a source row's size changed (a re-import would then read a changed
        // file as unchanged, or the reverse), another's gone flag set, and a row invented.
        let mut sources = tx.open_table(SOURCES).unwrap();
        let rows: Vec<(String, SourceStat)> = sources
            .iter()
            .unwrap()
            .take(2)
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.value().to_owned(), v.value())
            })
            .collect();
        let (p0, (s0, size0, m0, g0)) = &rows[0];
        sources
            .insert(p0.as_str(), (*s0, size0 + 1, *m0, *g0))
            .unwrap();
        let (p1, (s1, size1, m1, _)) = &rows[1];
        sources
            .insert(p1.as_str(), (*s1, *size1, *m1, true))
            .unwrap();
        sources
            .insert("/no/such/file.jsonl", (9999, 1, 1, false))
            .unwrap();

        // The file index: a block removed, another's first hit given another status, a
        // session's path invented, a resolved path removed, a tool result removed and one
        // invented.
        let mut hits = tx.open_table(FILE_HITS).unwrap();
        let (p, s, c) = {
            let row = hits.iter().unwrap().nth(3).unwrap().unwrap();
            let (p, s, c) = row.0.value();
            (p.to_owned(), s, c)
        };
        hits.remove((p.as_str(), s, c)).unwrap();
        let ((p, s, c), mut block) = {
            let row = hits.iter().unwrap().nth(5).unwrap().unwrap();
            let (p, s, c) = row.0.value();
            (
                (p.to_owned(), s, c),
                decode_block(row.1.value(), c).unwrap(),
            )
        };
        block[0].status = (block[0].status + 1) % 3;
        let mut bytes = Vec::new();
        encode_block(&block, c, &mut bytes);
        hits.insert((p.as_str(), s, c), bytes.as_slice()).unwrap();
        let mut session_paths = tx.open_table(FILE_SESSION_PATHS).unwrap();
        session_paths
            .insert((s, "src/not/what/was/written.rs"), ())
            .unwrap();
        let mut resolved = tx.open_table(FILE_RESOLVED).unwrap();
        let (r, s, p) = {
            let row = resolved.iter().unwrap().next().unwrap().unwrap();
            let (r, s, p) = row.0.value();
            (r.to_owned(), s, p.to_owned())
        };
        resolved.remove((r.as_str(), s, p.as_str())).unwrap();
        let mut results = tx.open_table(TOOL_RESULTS).unwrap();
        let (s, t) = {
            let row = results.iter().unwrap().nth(2).unwrap().unwrap();
            let (s, t) = row.0.value();
            (s, t.to_owned())
        };
        results.remove((s, t.as_str())).unwrap();
        results
            .insert((s, "toolu_invented"), [1u8].as_slice())
            .unwrap();

        // The settings index: one row removed, one invented for a row that is no setting.
        let mut settings = tx.open_table(SETTINGS).unwrap();
        let (sk, ek) = settings.iter().unwrap().next().unwrap().unwrap().0.value();
        settings.remove((sk, ek)).unwrap();
        settings.insert((sk, ek + 1), SETTING_THINKING).unwrap();

        // The outline: one block's first part removed, another block's bytes altered (a
        // summary that is not its line's), and a block of no session invented.
        let mut outline = tx.open_table(OUTLINE).unwrap();
        let firsts: Vec<((u64, u64, u32), Vec<u8>)> = outline
            .iter()
            .unwrap()
            .map(|r| {
                let (k, v) = r.unwrap();
                (k.value(), v.value().to_vec())
            })
            .filter(|(k, _)| k.2 == 0)
            .collect();
        assert!(firsts.len() >= 3, "too few outline blocks to damage");
        outline.remove(firsts[0].0).unwrap();
        let (k, _) = firsts[1].clone();
        let mut block = pisess_engine::outline::BlockBuilder::new(k.1);
        let facts = pisess_engine::describe::Facts {
            summary: "not what the line says".into(),
            ..Default::default()
        };
        block.push(&pisess_engine::outline::RowIn {
            key: k.1,
            id: "x",
            timestamp: None,
            parent_id: pisess_engine::outline::ParentId::Null,
            facts: Some(&facts),
        });
        let bytes = block.encode().unwrap();
        outline
            .retain_in((k.0, k.1, 0)..=(k.0, k.1, u32::MAX), |_, _| false)
            .unwrap();
        outline.insert(k, bytes.as_slice()).unwrap();
        outline
            .insert((9999, 1, 0), firsts[2].1.as_slice())
            .unwrap();
    }
    tx.commit().unwrap();
}

#[test]
fn verify_reports_damaged_indexes_and_repair_rebuilds_them_from_the_records() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let src = dir.join("src");
    fs::create_dir_all(&src).unwrap();
    for name in [
        "sessions/04-many-branches.jsonl",
        "edge/label-set-and-clear.jsonl",
        "edge/duplicate-ids.jsonl",
        "edge/cycle-parent-CRASHES-context.jsonl",
        "edge/orphan-parent.jsonl",
        "edge/multi-root.jsonl",
    ] {
        let p = fixture(name);
        fs::copy(&p, src.join(p.file_name().unwrap())).unwrap();
    }
    let store = dir.join("store.redb");
    let (code, o, e) = run(&env, &store, &["import", src.to_str().unwrap()]);
    assert_eq!(code, 0, "{o}\n{e}");
    let (code, o, _) = run(&env, &store, &["verify"]);
    assert_eq!(code, 0, "the fresh store does not verify: {o}");
    let before = answers(&env, &store);
    let clean = digest(&store);

    let copy = dir.join("damaged.redb");
    fs::copy(&store, &copy).unwrap();
    damage(&copy);
    assert_ne!(digest(&copy), clean, "the damage changed nothing");

    let (code, out, err) = run(&env, &copy, &["verify"]);
    assert_eq!(code, 1, "verify missed the damage: {out}\n{err}");
    for table in [
        "sources.v2",
        "entry_ids.v1",
        "parents.v1",
        "children.v2",
        "labels.v1",
        "file_hits.v1",
        "file_resolved.v1",
        "file_session_paths.v1",
        "tool_results.v3",
        "settings.v1",
        "outline.v2",
    ] {
        assert!(
            out.contains(&format!("{table}: ")),
            "no finding in {table}:\n{out}"
        );
    }
    // verify alone wrote nothing.
    assert_ne!(digest(&copy), clean);

    let (code, out, err) = run(&env, &copy, &["verify", "--repair"]);
    assert_eq!(code, 0, "repair did not fix the store: {out}\n{err}");
    assert!(out.contains("repaired: "), "{out}");
    assert!(out.contains("after repair: checked"), "{out}");
    let (code, out, _) = run(&env, &copy, &["verify"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        digest(&copy),
        clean,
        "the repaired store differs from the undamaged one"
    );
    assert_eq!(
        answers(&env, &copy),
        before,
        "queries answer differently after repair"
    );

    // On a consistent store, --repair changes nothing.
    let (code, out, _) = run(&env, &store, &["verify", "--repair"]);
    assert_eq!(code, 0);
    assert!(!out.contains("repaired"), "{out}");
    assert_eq!(digest(&store), clean);
}

/// `pisess verify | head` on a store with more findings than a pipe holds: the reader stops
/// early, nothing is said on stderr, the status is still 1 (text and JSON); with `--repair`
/// the store is still repaired (status 0, and a later verify passes).
#[test]
fn a_reader_that_stops_early_changes_neither_the_status_nor_the_repair() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let f = dir.join("long.jsonl");
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    );
    text.push('\n');
    let mut parent = "null".to_owned();
    for i in 0..3_000 {
        // Long ids, so that the 1,000 findings verify shows are more than a pipe holds.
        let id = format!("an-entry-whose-id-is-long-enough-to-fill-a-pipe-{i:07}");
        text.push_str(&format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"hi","timestamp":1}}}}"#
        ));
        text.push('\n');
        parent = format!("\"{id}\"");
    }
    fs::write(&f, text).unwrap();
    let store = dir.join("store.redb");
    let (code, o, e) = run(&env, &store, &["import", f.to_str().unwrap()]);
    assert_eq!(code, 0, "{o}\n{e}");
    let remove_ids = || {
        let db = redb::Database::open(&store).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(ENTRY_IDS)
            .unwrap()
            .retain(|_, _| false)
            .unwrap();
        tx.commit().unwrap();
    };
    remove_ids();
    let stopped_early = |args: &[&str]| {
        let mut cmd = env.pisess_child();
        cmd.env("PISESS_STORE", &store).args(args);
        let (code, err) = run_until_the_reader_stops(&mut cmd);
        assert!(err.is_empty(), "{args:?}: {err}");
        code
    };
    for args in [vec!["verify"], vec!["--json", "verify"]] {
        let (code, out, err) = run(&env, &store, &args);
        assert_eq!(code, 1, "{err}");
        assert!(out.len() > 64 << 10, "{args:?}: {} bytes", out.len());
        assert_eq!(stopped_early(&args), Some(1), "{args:?}");
    }
    for args in [
        vec!["verify", "--repair"],
        vec!["--json", "verify", "--repair"],
    ] {
        assert_eq!(stopped_early(&args), Some(0), "{args:?}");
        let (code, out, _) = run(&env, &store, &["verify"]);
        assert_eq!(code, 0, "{args:?} did not repair: {out}");
        remove_ids();
    }
}

/// A store file damaged under pisess (cut short, as a failed copy leaves it): every command
/// fails, and now says what to do — keep the file, build a new store from the session files —
/// where it used to print redb's message alone.
#[test]
fn a_damaged_store_gets_a_hint_to_rebuild_it() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let f = fixture("sessions/04-many-branches.jsonl");
    let out = env
        .pisess()
        .args(["import", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let len = std::fs::metadata(&store).unwrap().len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&store)
        .unwrap();
    file.set_len(len / 2).unwrap();
    drop(file);
    for args in [&["ls"][..], &["verify"], &["log", "019fa7f3"]] {
        let out = env.pisess().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("hint: the store file is damaged"),
            "{args:?}: {err}"
        );
        assert!(err.contains(".damaged && pisess import"), "{args:?}: {err}");
    }
}

/// A `PISESS_STORE` that names a session file (JSON text), or any file that starts with text
/// (a script), is no damaged store: every command says it is no store, creates nothing beside
/// it (no `.lock`), and never advises moving the file aside (which would hide a session from
/// pi); the file is left as it was.
#[test]
fn a_session_file_given_as_the_store_is_named_no_store_and_left_alone() {
    let env = TestEnv::new();
    let dir = env.home.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.jsonl");
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &file).unwrap();
    let scripts = env.home.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    let script = scripts.join("env.sh");
    std::fs::write(&script, "#!/bin/sh\nexport PISESS_STORE=~/s.redb\n").unwrap();
    for (store, says) in [
        (&file, "it holds JSON text"),
        (&script, "it starts with text"),
    ] {
        let before = std::fs::read(store).unwrap();
        for args in [&["ls"][..], &["verify"], &["import", dir.to_str().unwrap()]] {
            let (code, _, err) = run(&env, store, args);
            assert_eq!(code, 2, "{args:?}: {err}");
            assert!(err.contains("is not a pisess store"), "{args:?}: {err}");
            assert!(err.contains(says), "{args:?}: {err}");
            assert!(!err.contains(".damaged"), "{args:?}: {err}");
            // Nothing made beside it (no `.lock`), and the file as it was.
            let folder = store.parent().unwrap();
            let names: Vec<_> = std::fs::read_dir(folder)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, [store.file_name().unwrap()], "{args:?}");
            assert_eq!(std::fs::read(store).unwrap(), before);
        }
    }
}

/// `tree` reads a session's blocks on the pool while it builds the tree; a damaged page that
/// one of those reads meets first makes redb fail every later read with "a previous I/O
/// error". Whichever page of the store is damaged (one byte flipped in each 4 KiB page, in
/// turn), `tree` either draws the tree or exits 2 naming the damage with the rebuild hint —
/// it once said only "Previous I/O error" for one page of this store — and the store's bytes
/// are as they were.
#[test]
fn a_damaged_page_met_by_trees_early_reads_is_told_as_damage() {
    use std::os::unix::fs::FileExt;
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let file = env.home.path().join("s.jsonl");
    let id = |i: u64| format!("{:08x}", (i * 2_654_435_761 + 12_345) & 0xffff_ffff);
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"sweep","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
    );
    text.push('\n');
    for i in 0..20_000u64 {
        let parent = match i {
            0 => "null".to_owned(),
            // A branch now and then, so the tree has run starts.
            _ if i > 10 && i % 487 == 0 => {
                format!("\"{}\"", id((i - 1).saturating_sub(i * 7919 % 4000)))
            }
            _ => format!("\"{}\"", id(i - 1)),
        };
        let time = format!(
            "2026-01-01T{:02}:{:02}:{:02}.{:03}Z",
            i / 3_600_000 % 24,
            i / 60_000 % 60,
            i / 1000 % 60,
            i % 1000
        );
        let message = match i % 5 {
            0 => format!(
                r#"{{"role":"user","content":"question {i} {}"}}"#,
                "y".repeat((i % 50) as usize)
            ),
            1 | 3 => format!(
                r#"{{"role":"assistant","content":[{{"type":"text","text":"answer {i}"}},{{"type":"toolCall","id":"t{i}","name":"read","arguments":{{"path":"src/x{i}.rs"}}}}],"model":"m","provider":"p","stopReason":"toolUse","timestamp":0}}"#
            ),
            _ => format!(
                r#"{{"role":"toolResult","toolCallId":"t{}","toolName":"read","content":[{{"type":"text","text":"ok {i}"}}],"isError":false,"timestamp":0}}"#,
                i - 1
            ),
        };
        text.push_str(&format!(
            r#"{{"type":"message","id":"{}","parentId":{parent},"timestamp":"{time}","message":{message}}}"#,
            id(i)
        ));
        text.push('\n');
    }
    fs::write(&file, text).unwrap();
    let out = env
        .pisess()
        .args(["import", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let good = fs::read(&store).unwrap();
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&store)
        .unwrap();
    let mut failed = 0;
    for at in (4096 + 1500..good.len() as u64).step_by(4096) {
        let byte = good[at as usize];
        f.write_all_at(&[byte ^ 0x5a], at).unwrap();
        let out = env.pisess_child().args(["tree", "sweep"]).output().unwrap();
        f.write_all_at(&[byte], at).unwrap();
        if out.status.success() {
            continue;
        }
        failed += 1;
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "byte {at}: {err}");
        assert!(
            err.contains("hint: the store file is damaged"),
            "byte {at}: {err}"
        );
    }
    // Else the sweep proved nothing (no flipped byte made a read fail).
    assert!(failed > 0, "no flipped byte made tree fail");
    drop(f);
    assert!(
        fs::read(&store).unwrap() == good,
        "the store's bytes changed"
    );
}

/// A store whose pages redb cannot read — their type byte flipped, which redb 4 meets with
/// `unreachable!()` while opening — a store cut inside its header and a file that is no store
/// are reported as damaged (exit 2, the rebuild hint), never with a panic.
#[test]
fn no_damaged_page_makes_a_command_panic() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let f = fixture("sessions");
    let out = env
        .pisess()
        .args(["import", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let good = std::fs::read(&store).unwrap();
    let mut stopped = 0;
    // The first byte of each 4 KiB page: its type, for redb's B-tree pages.
    for at in (4096..good.len()).step_by(4096) {
        let mut bad = good.clone();
        bad[at] ^= 0xff;
        std::fs::write(&store, &bad).unwrap();
        for args in [&["ls"][..], &["verify"]] {
            let out = env.pisess().args(args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_ne!(out.status.code(), Some(101), "byte {at}, {args:?}: {err}");
            assert!(!err.contains("panicked"), "byte {at}, {args:?}: {err}");
            if err.contains("redb stopped on the store file") {
                stopped += 1;
                assert_eq!(out.status.code(), Some(2), "{err}");
                assert!(err.contains("hint: the store file is damaged"), "{err}");
            }
        }
    }
    // Else the sweep proved nothing about the guard (redb no longer panics there).
    assert!(stopped > 0, "no flipped page made redb stop");
    for (bytes, says) in [
        (good[..100].to_vec(), "the store file is cut short"),
        (vec![7u8; 20_000], "the file is not a store"),
    ] {
        std::fs::write(&store, &bytes).unwrap();
        let out = env.pisess().args(["ls"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(err.contains("hint: the store file is damaged"), "{err}");
    }
}

/// The store as the only copy of a session (its file deleted): a flipped bit in a stored row
/// makes `export` fail naming the line and the damage — never an exit 0 with other bytes than
/// the session's — and `fork` and `prune -o` refuse to copy the damaged row into a new file.
#[test]
fn a_damaged_row_is_not_exported_as_the_session() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    std::fs::copy(fixture("sessions/02-small-branches.jsonl"), &file).unwrap();
    let good = std::fs::read(&file).unwrap();
    let out = env
        .pisess()
        .args(["import", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::remove_file(&file).unwrap();
    let id = entries_header_id(&good);
    let stored = std::fs::read(&store).unwrap();
    let (mut named, mut forks_refused, mut prunes_refused) = (0, 0, 0);
    for at in (4096..stored.len()).step_by(331) {
        let mut bad = stored.clone();
        bad[at] ^= 0x20;
        std::fs::write(&store, &bad).unwrap();
        let out = env.pisess().args(["export", &id]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(101), "byte {at}: {err}");
        if out.status.success() {
            assert_eq!(out.stdout, good, "byte {at}: exit 0 with other bytes");
        } else if err.contains("is damaged: its bytes no longer match") {
            named += 1;
            assert!(err.contains("the stored copy of line "), "{err}");
            assert!(err.contains("hint: the store file is damaged"), "{err}");
            let target = env.home.path().join("fork-out");
            std::fs::create_dir_all(&target).unwrap();
            let out = env
                .pisess()
                .args(["fork", &id, "@leaf", "-o", target.to_str().unwrap()])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            // The damaged row may lie off the leaf's path; when the fork reads it, it stops.
            if err.contains("is damaged: its bytes no longer match") {
                forks_refused += 1;
                assert_eq!(out.status.code(), Some(2), "{err}");
            }
            // So does a prune that keeps it (`--keep-leaf`: the path to the leaf).
            let pruned = env.home.path().join("pruned.jsonl");
            let _ = std::fs::remove_file(&pruned);
            let out = env
                .pisess()
                .args(["prune", &id, "--keep-leaf", "-o", pruned.to_str().unwrap()])
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            if err.contains("is damaged: its bytes no longer match") {
                prunes_refused += 1;
                assert_eq!(out.status.code(), Some(2), "{err}");
                assert!(
                    !pruned.exists(),
                    "a refused prune wrote {}",
                    pruned.display()
                );
            }
        }
    }
    // Else the sweep proved nothing: no flip landed in a row's bytes.
    assert!(named > 0, "no flip was named as a damaged row");
    assert!(forks_refused > 0, "no fork met a damaged row");
    assert!(prunes_refused > 0, "no prune met a damaged row");
}

/// The header id of a session file's bytes.
fn entries_header_id(bytes: &[u8]) -> String {
    let first = bytes.split(|&b| b == b'\n').next().unwrap();
    let v: serde_json::Value = serde_json::from_slice(first).unwrap();
    v["id"].as_str().unwrap().to_owned()
}

/// A damaged row is a difference when the store is compared with the session's file, not an
/// error: a file cut shorter than the store's copy, whose kept part holds the damaged line,
/// is read again and mends the store (the row check of `export` stopped that import for a
/// while in session 41); `export` then gives the file's bytes.
#[test]
fn a_damaged_row_does_not_stop_the_import_that_mends_it() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    std::fs::copy(fixture("sessions/02-small-branches.jsonl"), &file).unwrap();
    let good = std::fs::read(&file).unwrap();
    let lines = good.iter().filter(|&&b| b == b'\n').count();
    let import = || {
        env.pisess()
            .args(["import", dir.to_str().unwrap()])
            .output()
            .unwrap()
    };
    assert!(import().status.success());
    let id = entries_header_id(&good);
    let stored = std::fs::read(&store).unwrap();
    // A flip that `export` names as a damaged row before the file's last line.
    let mut found = None;
    for at in (4096..stored.len()).step_by(331) {
        let mut bad = stored.clone();
        bad[at] ^= 0x20;
        std::fs::write(&store, &bad).unwrap();
        let out = env.pisess().args(["export", &id]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err
            .split("the stored copy of line ")
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok());
        if let Some(n) = line.filter(|&n| n < lines) {
            found = Some((bad, n));
            break;
        }
    }
    let (bad, _) = found.expect("no flip damaged a row before the last line");
    std::fs::write(&store, &bad).unwrap();
    // The file loses its last line (a strict prefix of the stored bytes, holding the damaged
    // line): it is read again, not refused, and the store then holds it.
    let cut = good[..good.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .unwrap()
        + 1;
    std::fs::write(&file, &good[..cut]).unwrap();
    let out = import();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let out = env.pisess().args(["export", &id]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, &good[..cut]);
}
