//! Several processes on one store and one session file at once.
//!
//! - `log`, `files` and `context` in a loop while an import of a big folder runs: each either
//!   gives exactly the answer computed when the store was idle, or (without `--wait`) fails with
//!   "the store is busy: pid N (… import …)"; with `--wait` it always answers, correctly;
//! - two imports at once into a fresh store: with `--wait` both finish and the store equals two
//!   imports one after the other; without it, the loser says the store is busy and a retry
//!   completes it;
//! - the session writer (`pisess compact`) appending while pi-like appends (`>>` of whole
//!   lines) land in the same file: no line is lost, torn or fused, and the store, brought up to
//!   date, equals a fresh import of the final file.
//!
//! Every child runs under a deadline: a hang fails the test ("deadlock") instead of blocking.
//! Inputs: `fixtures/sessions/` and the oracle's standard corpus (`common::corpus`).

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Rng, TestEnv, corpus, fixture};

/// Longest any single child may run before the test calls it a deadlock.
const DEADLINE: Duration = Duration::from_secs(300);

/// `pisess ARGS` as a child with the test environment and the store `store`.
fn spawn(env: &TestEnv, store: &Path, args: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("pisess"))
        .args(args)
        .env_clear()
        .env("HOME", env.home.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env("PISESS_STORE", store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for a child under [`DEADLINE`]; returns (exit code, stdout, stderr).
fn finish(mut child: Child, what: &str) -> (i32, String, String) {
    let start = Instant::now();
    // Drain the pipes on threads so a child with a lot of output never blocks on them.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut s).unwrap();
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut s).unwrap();
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {DEADLINE:?} (deadlock?)");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let out = String::from_utf8_lossy(&t_out.join().unwrap()).into_owned();
    let err = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
    (status.code().unwrap_or(-1), out, err)
}

/// Runs `pisess ARGS` to completion under the deadline.
fn run(env: &TestEnv, store: &Path, args: &[&str]) -> (i32, String, String) {
    finish(spawn(env, store, args), &args.join(" "))
}

/// Runs `pisess ARGS`, which must succeed; returns stdout.
fn ok(env: &TestEnv, store: &Path, args: &[&str]) -> String {
    let (code, out, err) = run(env, store, args);
    assert_eq!(code, 0, "pisess {}: {out}\n{err}", args.join(" "));
    out
}

/// The id in a session file's header.
fn session_id(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    header["id"].as_str().unwrap().to_owned()
}

/// `count` copies of large corpus files under `dir` (a folder an import takes seconds over).
fn big_folder(dir: &Path, count: usize) -> Vec<PathBuf> {
    let c = corpus();
    let names = [
        "12-large-5000",
        "09-med-3000-manybranch",
        "13-large-10000",
        "07-med-2000",
    ];
    let mut out = Vec::new();
    for i in 0..count {
        let name = names[i % names.len()];
        let dst = dir.join(format!("{i:02}-{name}.jsonl"));
        fs::copy(c.join(format!("{name}.jsonl")), &dst).unwrap();
        out.push(dst);
    }
    out
}

/// The queries the reader loop asks, against the session `id` (by id: reading never imports).
fn queries(id: &str) -> Vec<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    vec![
        s(&["log", id]),
        s(&["--json", "context", id]),
        s(&["files", "--session", id, "src/**"]),
    ]
}

#[test]
fn readers_during_an_import_get_the_idle_answer_or_a_clear_busy_message() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let session = env.home.path().join("a.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &session).unwrap();
    ok(&env, &store, &["import", session.to_str().unwrap()]);
    let id = session_id(&session);
    let idle: Vec<String> = queries(&id)
        .iter()
        .map(|q| {
            let q: Vec<&str> = q.iter().map(String::as_str).collect();
            ok(&env, &store, &q)
        })
        .collect();
    assert!(idle.iter().all(|a| !a.is_empty()), "{idle:?}");

    let big = tempfile::tempdir().unwrap();
    let files = big_folder(big.path(), 12);
    let importer = spawn(&env, &store, &["import", big.path().to_str().unwrap()]);
    let import_pid = importer.id();
    let importer = std::thread::spawn(move || finish(importer, "import of the big folder"));

    let (mut answered, mut busy, mut waited) = (0, 0, 0);
    let mut rng = Rng(0xc0c0_0a11);
    while !importer.is_finished() {
        for (q, expected) in queries(&id).iter().zip(&idle) {
            let wait = rng.below(3) == 0;
            let mut args: Vec<&str> = Vec::new();
            if wait {
                args.extend(["--wait", "300"]);
            }
            args.extend(q.iter().map(String::as_str));
            let (code, out, err) = run(&env, &store, &args);
            if code == 0 {
                assert_eq!(&out, expected, "pisess {}: a wrong answer", args.join(" "));
                if wait {
                    waited += 1;
                } else {
                    answered += 1;
                }
            } else {
                assert!(
                    !wait,
                    "pisess {}: failed despite --wait: {err}",
                    args.join(" ")
                );
                assert_eq!(code, 2, "pisess {}: {out}\n{err}", args.join(" "));
                assert!(
                    err.contains("the store is busy: ")
                        && err.contains(&format!("pid {import_pid} "))
                        && err.contains("import")
                        && err.contains("--wait"),
                    "pisess {}: the busy message does not name the import: {err}",
                    args.join(" ")
                );
                busy += 1;
            }
        }
    }
    let (code, out, err) = importer.join().unwrap();
    assert_eq!(code, 0, "the import failed: {out}\n{err}");
    eprintln!("readers during an import: {answered} answered, {busy} busy, {waited} waited");
    assert!(
        busy + waited > 0,
        "no reader ran while the import held the store"
    );
    let ls = ok(&env, &store, &["--json", "ls"]);
    assert_eq!(ls.lines().count(), files.len() + 1, "{ls}");
    ok(&env, &store, &["verify"]);
    for (q, expected) in queries(&id).iter().zip(&idle) {
        let q: Vec<&str> = q.iter().map(String::as_str).collect();
        assert_eq!(&ok(&env, &store, &q), expected, "after the import");
    }
}

/// The catalogue (sorted `ls --json` lines) and every file's exported bytes.
fn state(env: &TestEnv, store: &Path, files: &[PathBuf]) -> (Vec<String>, Vec<String>) {
    let mut ls: Vec<String> = ok(env, store, &["--json", "ls"])
        .lines()
        .map(str::to_owned)
        .collect();
    ls.sort();
    let exports = files
        .iter()
        .map(|f| {
            let out = ok(env, store, &["export", f.to_str().unwrap()]);
            blake3::hash(out.as_bytes()).to_hex().to_string()
        })
        .collect();
    (ls, exports)
}

#[test]
fn two_imports_at_once_equal_two_imports_in_turn() {
    let env = TestEnv::new();
    let src = tempfile::tempdir().unwrap();
    let (x, y) = (src.path().join("x"), src.path().join("y"));
    fs::create_dir_all(&x).unwrap();
    fs::create_dir_all(&y).unwrap();
    let mut files = big_folder(&x, 4);
    for e in fs::read_dir(fixture("sessions")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|e| e == "jsonl") {
            let dst = y.join(p.file_name().unwrap());
            fs::copy(&p, &dst).unwrap();
            files.push(dst);
        }
    }
    let stores = tempfile::tempdir().unwrap();
    let reference = stores.path().join("reference.redb");
    ok(&env, &reference, &["import", x.to_str().unwrap()]);
    ok(&env, &reference, &["import", y.to_str().unwrap()]);
    let expected = state(&env, &reference, &files);
    assert_eq!(expected.0.len(), files.len());

    for round in 0..4 {
        let store = stores.path().join(format!("round{round}.redb"));
        let wait = round % 2 == 0;
        let args = |dir: &Path| {
            let mut a = vec![];
            if wait {
                a.extend(["--wait", "300"]);
            }
            a.extend(["import", dir.to_str().unwrap()]);
            a.into_iter().map(str::to_owned).collect::<Vec<_>>()
        };
        let (ax, ay) = (args(&x), args(&y));
        let cx = spawn(
            &env,
            &store,
            &ax.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let cy = spawn(
            &env,
            &store,
            &ay.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        let tx = std::thread::spawn(move || finish(cx, "first import"));
        let ry = finish(cy, "second import");
        let rx = tx.join().unwrap();
        for ((code, out, err), dir) in [(rx, &x), (ry, &y)] {
            if code == 0 {
                continue;
            }
            assert!(
                !wait,
                "round {round}: an import failed despite --wait: {err}"
            );
            assert_eq!(code, 2, "round {round}: {out}\n{err}");
            assert!(
                err.contains("the store is busy: ") && err.contains("import"),
                "round {round}: unclear message: {err}"
            );
            ok(&env, &store, &["import", dir.to_str().unwrap()]);
        }
        ok(&env, &store, &["verify"]);
        let got = state(&env, &store, &files);
        assert!(got == expected, "round {round}: the store differs");
    }
}

/// A pi-like user message entry: one whole line, written by one `write` on an `O_APPEND` file.
fn pi_line(id: &str, parent: &str, n: u64) -> String {
    let text = format!("pi-like append {n}: ") + &"lorem ipsum dolor sit amet ".repeat(300);
    let v = serde_json::json!({
        "type": "message",
        "id": id,
        "parentId": parent,
        "timestamp": "2026-07-28T10:00:00.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": text}],
                    "timestamp": 1_785_232_800_000u64 + n},
    });
    serde_json::to_string(&v).unwrap() + "\n"
}

/// The id of the last line of `file` that has one.
fn last_id(file: &Path) -> String {
    let text = fs::read_to_string(file).unwrap();
    text.lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .and_then(|v| v["id"].as_str().map(str::to_owned))
        })
        .unwrap()
}

#[test]
fn the_writer_and_pi_like_appends_share_a_file_without_losing_a_line() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let file = env.home.path().join("shared.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap().to_owned();
    ok(&env, &store, &["import", &f]);

    let mut appended = Vec::new();
    let (mut compacted, mut nothing, mut refused) = (0, 0, 0);
    let mut rng = Rng(0x00a1_1ce5);
    for round in 0..8u64 {
        // pi appends five messages while `compact` runs.
        let ids: Vec<String> = (0..5)
            .map(|i| format!("{:08x}", 0xa000_0000 + round * 16 + i))
            .collect();
        let pauses: Vec<u64> = (0..5).map(|_| rng.below(40)).collect();
        let path = file.clone();
        let ids2 = ids.clone();
        let appender = std::thread::spawn(move || {
            for (i, id) in ids2.iter().enumerate() {
                std::thread::sleep(Duration::from_millis(pauses[i]));
                let line = pi_line(id, &last_id(&path), round * 16 + i as u64);
                let mut out = fs::OpenOptions::new().append(true).open(&path).unwrap();
                out.write_all(line.as_bytes()).unwrap();
            }
        });
        // A compaction planned from the file before an append is refused, nothing written
        // (it would hang under an old leaf); the user runs it again, as here.
        for attempt in 0.. {
            let (code, out, err) = run(
                &env,
                &store,
                &["--wait", "300", "compact", &f, "--keep", "1000"],
            );
            match code {
                0 => compacted += 1,
                1 => nothing += 1,
                2 if err.contains("changed while the summary was written") && attempt < 100 => {
                    refused += 1;
                    continue;
                }
                _ => panic!("round {round}: compact failed: {out}\n{err}"),
            }
            break;
        }
        appender.join().unwrap();
        appended.extend(ids);
    }
    eprintln!(
        "writer with pi-like appends: {compacted} compactions, {nothing} with nothing to do, \
         {refused} refused (the file changed meanwhile)"
    );
    assert!(compacted > 0, "compact never ran");

    // Every line is one whole entry, ids are unique, and every pi-like append is there.
    let text = fs::read_to_string(&file).unwrap();
    assert!(text.ends_with('\n'));
    let mut ids = BTreeSet::new();
    let mut compactions = 0;
    for (n, line) in text.lines().enumerate() {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {}: not one JSON value ({e}): {line:.200}", n + 1));
        if v["type"] == "compaction" {
            compactions += 1;
        }
        if let Some(id) = v["id"].as_str() {
            assert!(
                ids.insert(id.to_owned()) || n == 0,
                "line {}: id {id} twice",
                n + 1
            );
        }
    }
    assert_eq!(
        compactions, compacted,
        "a compaction line is missing or extra"
    );
    for id in &appended {
        assert!(ids.contains(id), "pi-like append {id} was lost");
    }

    // The store picks the appends up: brought up to date it equals the file and a fresh import.
    let exported = ok(&env, &store, &["export", &f]);
    assert_eq!(exported, text, "the store does not hold the file's bytes");
    ok(&env, &store, &["verify"]);
    let fresh = env.home.path().join("fresh.redb");
    ok(&env, &fresh, &["import", &f]);
    for q in [vec!["--json", "context", &f], vec!["log", &f]] {
        assert_eq!(
            ok(&env, &store, &q),
            ok(&env, &fresh, &q),
            "pisess {}",
            q.join(" ")
        );
    }
}

/// Once its summarizer has answered, `compact` waits for a store another process holds (here
/// the test, for 8 s: longer than the 5 s grace after which it used to fail "the store is
/// busy", throwing away a summary a model was paid for), says so, and then appends.
#[test]
fn compact_waits_for_the_store_once_its_summary_is_made() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    let imported = env.pisess().args(["import", f]).output().unwrap();
    assert!(imported.status.success());
    let flag = env.home.path().join("summarizing");
    let summarizer = format!(
        "cat >/dev/null; touch '{}'; sleep 1; printf '## Goal\\nstand-in\\n'",
        flag.display()
    );
    let child = env
        .pisess_child()
        .args(["compact", f, "--keep", "1000", "--summarizer", &summarizer])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while !flag.exists() {
        assert!(start.elapsed().as_secs() < 120, "the summarizer never ran");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // The summarizer is running: compact has let the store go. Hold it for 8 s.
    let held = pisess_engine::Store::open(env.home.path().join("store.redb")).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(8));
    drop(held);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("the store is busy") && stderr.contains("waiting up to 600 s"),
        "{stderr}"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("compacted at "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let tail = std::fs::read_to_string(&file).unwrap();
    assert!(
        tail.lines()
            .last()
            .unwrap()
            .contains("\"type\":\"compaction\"")
    );
}

/// Readers that overlap without a gap no longer keep a writer out. Each reader here is a real
/// `pisess export` whose output nobody reads, so it holds the store's shared lock for as long
/// as the test likes: R1 holds it, an import starts (and must wait), R2 starts while R1 still
/// holds it. R2 used to open the store beside R1 (readers share), so when R1 let go the store
/// was still held and the import ran out its `--wait`. Now the waiting import holds the
/// store's gate, R2 waits for the import, and the import finishes while R2 is still waiting.
#[test]
fn a_waiting_writer_is_not_starved_by_overlapping_readers() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let dir = env.home.path().join("s");
    fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.jsonl");
    fs::copy(corpus().join("12-large-5000.jsonl"), &big).unwrap();
    ok(&env, &store, &["import", big.to_str().unwrap()]);
    let id = session_id(&big);
    let expected = ok(&env, &store, &["export", &id]);
    assert!(expected.len() > 1 << 20);
    let other = env.home.path().join("other.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &other).unwrap();

    // R1: has the store open and is stuck writing its output.
    let mut r1 = spawn(&env, &store, &["export", &id]);
    let mut first = [0u8; 1];
    std::io::Read::read_exact(r1.stdout.as_mut().unwrap(), &mut first).unwrap();

    // The writer, which must wait for R1.
    let mut w = spawn(
        &env,
        &store,
        &["--wait", "20", "import", other.to_str().unwrap()],
    );
    // Wait until it holds the gate (the test's probe takes it shared for an instant only), or
    // 10 s (a writer without a gate never takes it; the import's exit below says the rest).
    let start = Instant::now();
    let mut saw_writer_waiting = false;
    while start.elapsed() < Duration::from_secs(10) {
        match pisess_engine::gate::Gate::try_reader(&store) {
            Err(taken) => {
                assert!(taken.holder.is_some_and(|h| h.contains("import")));
                saw_writer_waiting = true;
                break;
            }
            Ok(g) => {
                assert!(g.is_held(), "no gate beside {}", store.display());
                drop(g);
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    // R2, started while R1 still holds the store.
    let r2 = spawn(&env, &store, &["--wait", "120", "export", &id]);
    std::thread::sleep(Duration::from_millis(500));
    // The import is still waiting: R1 really holds the store.
    assert!(
        w.try_wait().unwrap().is_none(),
        "the import did not wait for the reader holding the store"
    );
    // R1 lets go (its pipe closes; it exits on the broken pipe).
    drop(r1.stdout.take());
    let _ = r1.wait_with_output().unwrap();

    let (code, out, err) = finish(w, "the import");
    assert_eq!(
        code, 0,
        "the import was kept out by the readers: {out}\n{err}"
    );
    // Checked after the import's answer, so that the old code fails on the starvation itself.
    assert!(saw_writer_waiting, "the import never held the gate");
    assert!(
        ok(&env, &store, &["ls", "--json"]).contains("other.jsonl"),
        "the import did not store its file"
    );
    // R2 got its answer after the import, intact.
    let (code, out, err) = finish(r2, "R2");
    assert_eq!(code, 0, "{err}");
    assert!(out == expected, "R2's export differs from the idle store's");
}

/// What a command says when the store's gate is held: a reader kept out by a waiting writer
/// names it as waiting to write and gives up after the writer's grace (5 s) without `--wait`;
/// a writer kept out by a reader opening the store names it as holding the store, and with
/// `--wait` says at once that it waits.
#[test]
fn a_held_gate_is_named_for_what_holds_it() {
    use pisess_engine::gate::Gate;
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let file = env.home.path().join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    ok(&env, &store, &["import", file.to_str().unwrap()]);
    let me = format!("pid {} (", std::process::id());

    // This process waits to write: it holds the gate exclusively.
    let gate = Gate::try_writer(&store).unwrap();
    assert!(gate.is_held(), "no gate beside {}", store.display());
    let start = Instant::now();
    let (code, out, err) = run(&env, &store, &["ls"]);
    let waited = start.elapsed();
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("the store is busy: {me}"))
            && err.contains(&format!("is waiting to write to {}", store.display())),
        "{err}"
    );
    assert!(
        err.contains("retry with `pisess --wait SECONDS ...`"),
        "{err}"
    );
    assert!(waited >= Duration::from_secs(4), "gave up after {waited:?}");
    drop(gate);

    // This process is a reader opening the store: it holds the gate shared. The import has a
    // new file to write.
    let other = env.home.path().join("t.jsonl");
    fs::copy(fixture("sessions/03-compactions.jsonl"), &other).unwrap();
    // (Retried: a child that another test forked just before the drop above holds a copy of
    // the lock's descriptor until it execs, and with it the lock; seen once under load.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let gate = loop {
        match Gate::try_reader(&store) {
            Ok(g) => break g,
            Err(e) if Instant::now() > deadline => panic!("the gate stayed taken: {e:?}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert!(gate.is_held());
    let (code, out, err) = run(
        &env,
        &store,
        &["--wait", "1", "import", other.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{out}\n{err}");
    let busy = format!("the store is busy: {me}");
    assert!(
        err.contains(&format!("pisess: {busy}"))
            && err.contains("; waiting up to 5 s")
            && err.contains(&format!(") holds {}", store.display()))
            && !err.contains("waiting to write"),
        "{err}"
    );
    drop(gate);
    // Free again: both answer.
    ok(&env, &store, &["import", other.to_str().unwrap()]);
    assert!(ok(&env, &store, &["ls", "--json"]).contains("t.jsonl"));
}

/// An import started while another writer holds the store (here this process) waits for it
/// quietly up to the writer's grace, as any writer does, even though it opens the store
/// read-only first (unchanged files need no more): it used to fail at once.
#[test]
fn an_import_waits_for_a_writer_that_lets_go_within_the_grace() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let file = env.home.path().join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    ok(&env, &store, &["import", file.to_str().unwrap()]);
    let other = env.home.path().join("t.jsonl");
    fs::copy(fixture("sessions/03-compactions.jsonl"), &other).unwrap();

    for target in [&file, &other] {
        let held = pisess_engine::Store::open(&store).unwrap();
        let child = spawn(&env, &store, &["import", target.to_str().unwrap()]);
        std::thread::sleep(Duration::from_millis(1500));
        drop(held);
        let (code, out, err) = finish(child, "the import");
        assert_eq!(code, 0, "{}: {out}\n{err}", target.display());
        // It waited without a word: the grace is not announced.
        assert!(!err.contains("busy"), "{err}");
    }
    assert!(ok(&env, &store, &["ls", "--json"]).contains("t.jsonl"));
}

/// `export -o FIFO` waits for the FIFO's reader before it opens the store: an import meanwhile
/// is not told the store is busy (it was, for as long as nobody read the FIFO), and the reader
/// then gets the session's bytes.
#[test]
fn an_export_waiting_for_its_fifos_reader_does_not_hold_the_store() {
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let file = env.home.path().join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    ok(&env, &store, &["import", file.to_str().unwrap()]);
    let fifo = env.home.path().join("out.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let export = spawn(
        &env,
        &store,
        &[
            "export",
            file.to_str().unwrap(),
            "-o",
            fifo.to_str().unwrap(),
        ],
    );
    // Until it waits in the FIFO's open: Linux names that wait `wait_for_partner` (where the
    // kernel hides wait channels, the process is in `openat`, syscall 257, and asleep).
    let proc_dir = PathBuf::from(format!("/proc/{}", export.id()));
    let waiting = || {
        let read = |f: &str| fs::read_to_string(proc_dir.join(f)).unwrap_or_default();
        read("wchan") == "wait_for_partner"
            || (read("syscall").starts_with("257 ")
                && read("stat").split_whitespace().nth(2) == Some("S"))
    };
    let start = Instant::now();
    while !waiting() {
        assert!(
            start.elapsed() < DEADLINE,
            "export never waited for a reader"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let other = env.home.path().join("t.jsonl");
    fs::copy(fixture("sessions/03-compactions.jsonl"), &other).unwrap();
    let (code, out, err) = run(&env, &store, &["import", other.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let read = fs::read(&fifo).unwrap();
    let (code, out, err) = finish(export, "export -o FIFO");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        read == fs::read(&file).unwrap(),
        "the FIFO's reader got other bytes"
    );
}
