//! A full disk and a read-only store folder: every command that must write fails with a clear
//! error naming the path, leaves no partial output or temporary file behind, keeps the store
//! verifiable and the source unchanged; commands that only read still work on a read-only store.
//!
//! The full disk is a small tmpfs (a real `ENOSPC`), mounted by the test; that needs root (or
//! `CAP_SYS_ADMIN`), as the CI container has. Where `mount` is refused the tests FAIL (a
//! skipped check must not count as a pass).

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::{TestEnv, corpus, fixture, run_with_store as run};

/// A tmpfs of `size` mounted on a fresh folder; unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "cannot mount a tmpfs here (not root?): the full-disk tests need root or CAP_SYS_ADMIN"
        );
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Makes the file system read-only.
    fn read_only(&self) {
        let st = std::process::Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(self.path())
            .status()
            .unwrap();
        assert!(st.success(), "remount read-only failed");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Names in a folder, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

/// `pisess verify` on a copy of `store` (the full file system may refuse verify's own write).
fn verifies(env: &TestEnv, store: &Path) {
    let copy = env.home.path().join("verify-copy.redb");
    fs::copy(store, &copy).unwrap();
    let (code, out, err) = run(env, &copy, &[os("verify")]);
    assert_eq!(code, 0, "verify after the failure: {out}\n{err}");
    fs::remove_file(&copy).unwrap();
}

#[test]
fn a_full_disk_during_import_fails_clearly_and_keeps_the_store_consistent() {
    let disk = Tmpfs::mount("3m");
    let env = TestEnv::new();
    let src = tempfile::tempdir().unwrap();
    let small = src.path().join("a.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &small).unwrap();
    let store = disk.path().join("store.redb");
    // A first, small import fits.
    let (code, out, err) = run(&env, &store, &[os("import"), small.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    for name in ["12-large-5000", "09-med-3000-manybranch"] {
        fs::copy(
            corpus().join(format!("{name}.jsonl")),
            src.path().join(format!("{name}.jsonl")),
        )
        .unwrap();
    }
    let before: Vec<Vec<u8>> = listing(src.path())
        .iter()
        .map(|n| fs::read(src.path().join(n)).unwrap())
        .collect();
    let (code, out, err) = run(&env, &store, &[os("import"), src.path().as_os_str()]);
    assert_eq!(
        code, 2,
        "an import onto a full disk must fail: {out}\n{err}"
    );
    let text = format!("{out}\n{err}");
    assert!(
        text.contains("No space left on device"),
        "the error does not say the disk is full: {text}"
    );
    // It names the store and the file it was importing, and says what to do.
    assert!(
        text.contains(&format!("into the store {}", store.display()))
            && text.contains("cannot import ")
            && text.contains(&format!(
                "hint: the disk (or quota) that holds the store {} is full",
                store.display()
            )),
        "the error does not name the store: {text}"
    );
    // The store and its gate (an empty lock file), nothing else.
    assert_eq!(
        listing(disk.path()),
        ["store.redb", "store.redb.lock"],
        "a temporary file was left"
    );
    verifies(&env, &store);
    let after: Vec<Vec<u8>> = listing(src.path())
        .iter()
        .map(|n| fs::read(src.path().join(n)).unwrap())
        .collect();
    assert_eq!(before, after, "a source file changed");
    // The session imported before is still answered from the store.
    let copy = env.home.path().join("after.redb");
    fs::copy(&store, &copy).unwrap();
    let (code, out, _) = run(&env, &copy, &[os("export"), small.as_os_str()]);
    assert_eq!(code, 0);
    assert_eq!(out.as_bytes(), fs::read(&small).unwrap());
}

/// One writing command with its output on a full disk: exit 2, the error names the output (or,
/// for `migrate`, which reports per input, the input),
/// and the disk holds nothing afterwards (no partial file, no temporary file).
fn full_output(env: &TestEnv, store: &Path, disk: &Path, args: &[&std::ffi::OsStr], source: &Path) {
    let before = fs::read(source).unwrap();
    let (code, out, err) = run(env, store, args);
    let what = format!("{args:?}");
    assert_eq!(code, 2, "{what} must fail: {out}\n{err}");
    assert!(
        err.contains("No space left on device")
            && (err.contains(&disk.display().to_string())
                || err.contains(&source.display().to_string())),
        "{what}: the error does not name the file: {err}"
    );
    assert!(listing(disk).is_empty(), "{what}: left {:?}", listing(disk));
    assert_eq!(
        fs::read(source).unwrap(),
        before,
        "{what}: the source changed"
    );
    verifies(env, store);
}

#[test]
fn a_full_disk_under_export_migrate_and_prune_output_leaves_nothing_half_written() {
    let disk = Tmpfs::mount("64k");
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let session: PathBuf = env.home.path().join("s.jsonl");
    fs::copy(corpus().join("04-small-250.jsonl"), &session).unwrap();
    let v1 = env.home.path().join("old").join("v1.jsonl");
    fs::create_dir_all(v1.parent().unwrap()).unwrap();
    fs::copy(corpus().join("17-v1-400.jsonl"), &v1).unwrap();
    let (code, out, err) = run(&env, &store, &[os("import"), session.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");

    let out_file = disk.path().join("out.jsonl");
    full_output(
        &env,
        &store,
        disk.path(),
        &[
            os("export"),
            session.as_os_str(),
            os("-o"),
            out_file.as_os_str(),
        ],
        &session,
    );
    full_output(
        &env,
        &store,
        disk.path(),
        &[
            os("migrate"),
            v1.as_os_str(),
            os("--out"),
            disk.path().as_os_str(),
        ],
        &v1,
    );
    // An output folder the run creates is removed again when nothing could be written in it.
    let made = disk.path().join("new").join("deeper");
    full_output(
        &env,
        &store,
        disk.path(),
        &[os("migrate"), v1.as_os_str(), os("--out"), made.as_os_str()],
        &v1,
    );
    // Keep a leaf far from the root, so the pruned file is still larger than the disk.
    full_output(
        &env,
        &store,
        disk.path(),
        &[
            os("prune"),
            session.as_os_str(),
            os("--keep-leaf"),
            os("-o"),
            out_file.as_os_str(),
        ],
        &session,
    );
}

#[test]
fn a_read_only_store_folder_gives_an_error_naming_the_path() {
    let disk = Tmpfs::mount("8m");
    let env = TestEnv::new();
    let session = env.home.path().join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &session).unwrap();
    // A read-only folder with no store yet, then one holding a store.
    let fresh = disk.path().join("fresh");
    fs::create_dir_all(&fresh).unwrap();
    let store = disk.path().join("store.redb");
    let (code, out, err) = run(&env, &store, &[os("import"), session.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let image = fs::read(&store).unwrap();
    disk.read_only();
    // Nothing to write: the unchanged session imports as "unchanged" and `ls` lists it, from
    // the read-only folder (the store is opened read-only and nothing is written).
    let (code, out, err) = run(&env, &store, &[os("import"), session.as_os_str()]);
    assert_eq!(
        code, 0,
        "an unchanged import on a read-only store: {out}\n{err}"
    );
    assert!(out.contains(" 1 "), "{out}");
    let (code, out, err) = run(&env, &store, &[os("ls")]);
    assert_eq!(code, 0, "ls on a read-only store: {out}\n{err}");
    assert!(out.contains("acme-api"), "ls lists the session: {out}");
    // Something to write: a clear error naming the store's folder.
    let other = env.home.path().join("t.jsonl");
    fs::copy(fixture("sessions/01-tiny.jsonl"), &other).unwrap();
    for (store, args) in [
        (
            fresh.join("store.redb"),
            vec![os("import"), session.as_os_str()],
        ),
        (store.clone(), vec![os("import"), other.as_os_str()]),
    ] {
        let (code, out, err) = run(&env, &store, &args);
        assert_eq!(code, 2, "{args:?} on a read-only store: {out}\n{err}");
        assert!(
            err.contains(&store.parent().unwrap().display().to_string()),
            "{args:?}: the error does not name the store: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(listing(&fresh), Vec::<String>::new());
    assert_eq!(fs::read(&store).unwrap(), image, "the store changed");
}

/// An append (here `compact`'s) that the disk can only take part of leaves the session file
/// as it was: the part written is cut again (pi would read it as a torn last line).
#[test]
fn a_full_disk_under_an_append_leaves_the_session_as_it_was() {
    let disk = Tmpfs::mount("300k");
    let env = TestEnv::new();
    let store = env.home.path().join("store.redb");
    let session = disk.path().join("a.jsonl");
    fs::copy(fixture("sessions/02-small-branches.jsonl"), &session).unwrap();
    let before = fs::read(&session).unwrap();
    // Fill every free page; the file's last page keeps its free bytes (tmpfs allocates pages),
    // so the append is written in part before ENOSPC.
    {
        use std::io::Write;
        let mut fill = fs::File::create(disk.path().join("fill")).unwrap();
        let block = vec![0u8; 1024];
        while fill.write_all(&block).is_ok() {}
        let _ = fill.write_all(&[0u8]);
    }
    let (code, out, err) = run(
        &env,
        &store,
        &[os("compact"), session.as_os_str(), os("--keep"), os("500")],
    );
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        fs::read(&session).unwrap() == before,
        "the session file changed ({} bytes, was {})",
        fs::metadata(&session).unwrap().len(),
        before.len()
    );
    let (code, out, err) = run(&env, &store, &[os("check"), session.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
}

/// Every record id in `bytes`, read as a stream of JSON values (glued records included; a torn
/// fragment at the end ends the stream).
fn record_ids(bytes: &[u8]) -> std::collections::BTreeSet<String> {
    serde_json::Deserializer::from_slice(bytes)
        .into_iter::<serde_json::Value>()
        .map_while(Result::ok)
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect()
}

/// `compact` killed (SIGKILL, by `strace` at its N-th `write(2)`) while it appends to a file
/// whose last line has no newline loses no record: each one is still in the file or in the
/// copy of the tail saved beside it (`FILE.torn`). A tail that is one complete record only
/// gets a newline before the new line, in the same appending write, so nothing is ever cut;
/// glued records are saved before the file is cut and rewritten one per line. (Before, a kill
/// between the cut and the write lost the leaf entry from the file.) Needs `strace`.
#[test]
fn compact_killed_while_it_repairs_a_last_line_loses_no_record() {
    let have_strace = std::process::Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(have_strace, "strace is needed (apt-get install strace)");
    let base = fs::read(fixture("sessions/04-many-branches.jsonl")).unwrap();
    let record = |id: &str, parent: &str| {
        format!(
            "{{\"type\":\"custom\",\"customType\":\"x\",\"data\":{{}},\"id\":\"{id}\",\
             \"parentId\":\"{parent}\",\"timestamp\":\"2026-07-28T09:50:00.000Z\"}}"
        )
    };
    let complete = base[..base.len() - 1].to_vec();
    let mut glued = base.clone();
    glued.extend_from_slice(record("cu000001", "5ddf36d3").as_bytes());
    glued.extend_from_slice(record("cu000002", "cu000001").as_bytes());
    let (mut cut_between, mut killed) = (0, 0);
    for (name, start) in [("complete", complete), ("glued", glued)] {
        let want = record_ids(&start);
        for when in 1..=4 {
            let env = TestEnv::new();
            let dir = env.home.path().join("s");
            fs::create_dir_all(&dir).unwrap();
            let file = dir.join("s.jsonl");
            fs::write(&file, &start).unwrap();
            let inject = format!("inject=write:signal=KILL:when={when}");
            let status = env
                .pisess_wrapped(&[
                    "strace",
                    "-f",
                    "-o",
                    "/dev/null",
                    "-e",
                    "trace=write",
                    "-e",
                    &inject,
                ])
                .arg("compact")
                .arg(&file)
                .args(["--keep", "1000"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            // strace dies of the command's SIGKILL (or exits 137) when the command was killed,
            // exits 0 when it ended first. Anything else (strace refusing its arguments) means
            // nothing ran.
            let was_killed = {
                use std::os::unix::process::ExitStatusExt;
                status.signal() == Some(9) || status.code() == Some(137)
            };
            assert!(
                was_killed || status.success(),
                "{name}, write {when}: the command did not run under strace ({status})"
            );
            killed += usize::from(was_killed);
            let mut have = record_ids(&fs::read(&file).unwrap());
            for e in fs::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("s.jsonl.torn")
                {
                    have.extend(record_ids(&fs::read(&p).unwrap()));
                }
            }
            let lost: Vec<_> = want.difference(&have).collect();
            assert!(
                lost.is_empty(),
                "{name}, killed at write {when} ({status}): lost {lost:?}"
            );
            // Killed between its cut and its write: the file is its start cut short, the
            // import refuses it and says where the missing line is and how to put it back,
            // which then restores the file exactly.
            let now = fs::read(&file).unwrap();
            if now.len() < start.len() && start.starts_with(&now) {
                cut_between += 1;
                let torn = dir.join("s.jsonl.torn");
                let out = env.pisess().arg("import").arg(&file).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(2), "{err}");
                let put_back = format!(
                    "`cat {} >> {}` puts it back",
                    torn.display(),
                    file.display()
                );
                assert!(err.contains(&put_back), "{name}, write {when}: {err}");
                let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
                std::io::Write::write_all(&mut f, &fs::read(&torn).unwrap()).unwrap();
                drop(f);
                assert!(fs::read(&file).unwrap() == start, "{name}, write {when}");
                let out = env.pisess().arg("import").arg(&file).output().unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
    assert!(killed >= 4, "only {killed} of the runs were killed");
    assert!(
        cut_between > 0,
        "no kill fell between the cut and the write"
    );
}

/// A file size limit (`ulimit -f`, here `prlimit --fsize`): a write past it is an error with a
/// message naming the file, exit 2, and nothing half-written is left, where SIGXFSZ used to kill
/// the process without a word (exit by signal, a temporary file left behind).
#[test]
fn a_file_size_limit_is_an_error_with_a_message_not_a_silent_kill() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.jsonl");
    fs::copy(corpus().join("12-large-5000.jsonl"), &big).unwrap();
    let limited = |args: &[&std::ffi::OsStr]| {
        let out = env
            .pisess_wrapped(&["prlimit", "--fsize=1000000", "--"])
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    let store = env.home.path().join("store.redb");
    let (code, err) = limited(&[os("import"), big.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("File too large")
            && err.contains(&format!("into the store {}", store.display())),
        "{err}"
    );
    verifies(&env, &store);
    // Without the limit the import completes.
    let (code, out, err) = run(&env, &store, &[os("import"), big.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    // An export over the limit.
    let out_dir = env.home.path().join("out");
    fs::create_dir_all(&out_dir).unwrap();
    let target = out_dir.join("copy.jsonl");
    let (code, err) = limited(&[os("export"), big.as_os_str(), os("-o"), target.as_os_str()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("File too large") && err.contains(&target.display().to_string()),
        "{err}"
    );
    assert!(listing(&out_dir).is_empty(), "{:?}", listing(&out_dir));
}

/// A store that may only be read (here on a read-only mount) still answers for a session whose
/// file changed since it was imported: by id or by path, from the stored copy, with a warning
/// naming the file and the store (it used to fail with the bare "Read-only file system" of
/// the reopening). A file the store has never seen is an error that says so.
#[test]
fn a_read_only_store_answers_for_a_changed_session_from_its_copy() {
    let disk = Tmpfs::mount("8m");
    let env = TestEnv::new();
    let session = env.home.path().join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &session).unwrap();
    let store = disk.path().join("store.redb");
    let (code, out, err) = run(&env, &store, &[os("import"), session.as_os_str()]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (_, before, _) = run(
        &env,
        &store,
        &[os("log"), session.as_os_str(), os("-n"), os("1")],
    );
    assert!(before.starts_with("5ddf36d3 "), "{before}");
    let (_, ls, _) = run(&env, &store, &[os("--json"), os("ls")]);
    let id: serde_json::Value = serde_json::from_str(ls.lines().next().unwrap()).unwrap();
    let id = id["id"].as_str().unwrap().to_owned();
    // pi appends an entry; then the store's disk becomes read-only.
    let mut f = fs::OpenOptions::new().append(true).open(&session).unwrap();
    std::io::Write::write_all(
        &mut f,
        b"{\"type\":\"custom\",\"customType\":\"x\",\"data\":{},\"id\":\"ffff0001\",\
          \"parentId\":\"5ddf36d3\",\"timestamp\":\"2026-07-28T10:00:00.000Z\"}\n",
    )
    .unwrap();
    drop(f);
    let image = fs::read(&store).unwrap();
    disk.read_only();
    for named in [os(&id), session.as_os_str()] {
        let (code, out, err) = run(&env, &store, &[os("log"), named, os("-n"), os("1")]);
        assert_eq!(code, 0, "{named:?}: {out}\n{err}");
        assert_eq!(out, before, "{named:?}: not the stored copy");
        assert!(
            err.contains("changed since it was imported, and the store")
                && err.contains(&store.display().to_string())
                && err.contains("using the copy in the store"),
            "{named:?}: {err}"
        );
    }
    let other = env.home.path().join("t.jsonl");
    fs::copy(fixture("sessions/01-tiny.jsonl"), &other).unwrap();
    let (code, _, err) = run(&env, &store, &[os("log"), other.as_os_str()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is not in the store, and the store cannot be written to import it"),
        "{err}"
    );
    assert!(fs::read(&store).unwrap() == image, "the store changed");

    // `verify` checks it through a copy in the temp folder, and finds it sound; the copy goes.
    let tmp = tempfile::tempdir().unwrap();
    let verify = |args: &[&std::ffi::OsStr]| {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("pisess"))
            .args(args)
            .env_clear()
            .env("HOME", env.home.path())
            .env("NO_COLOR", "1")
            .env("PISESS_STORE", &store)
            .env("TMPDIR", tmp.path())
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, out, err) = verify(&[os("verify")]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("checked 1 sessions") && out.ends_with(": ok\n"),
        "{out}"
    );
    assert!(
        err.contains("cannot be written (I/O error: Read-only file system")
            && err.contains("checking a copy of it in"),
        "{err}"
    );
    assert!(listing(tmp.path()).is_empty(), "{:?}", listing(tmp.path()));
    // --repair cannot repair it: it says so, and writes nothing.
    let (code, _, err) = verify(&[os("verify"), os("--repair")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("Read-only file system"), "{err}");
    assert!(fs::read(&store).unwrap() == image, "the store changed");
}

/// `prune --sessions` moving a session to a trash on another file system (the store's folder on
/// a tmpfs): a move that fails after the copy (the session's file system read-only, so the
/// original cannot be removed) leaves no copy in the trash (each retry left one more, and
/// "move it back" restored a stale one); the dry run names the places the real run uses, also
/// for two files of one name; and the real move gives the trash the file's bytes.
#[test]
fn prune_sessions_across_file_systems_leaves_no_copy_behind_a_failed_move() {
    let env = TestEnv::new();
    let pi = Tmpfs::mount("8M");
    let disk = Tmpfs::mount("8M");
    let store = disk.path().join("store.redb");
    let agent = pi.path().join("agent");
    let (d1, d2) = (agent.join("sessions/--w--"), agent.join("sessions/x/--w--"));
    fs::create_dir_all(&d1).unwrap();
    fs::create_dir_all(&d2).unwrap();
    let src = fixture("sessions/01-tiny.jsonl");
    fs::copy(&src, d1.join("a.jsonl")).unwrap();
    fs::copy(fixture("sessions/03-compactions.jsonl"), d2.join("a.jsonl")).unwrap();
    let prune = |extra: &[&str]| {
        let out = env
            .pisess_child()
            .env("PISESS_STORE", &store)
            .env("PI_CODING_AGENT_DIR", &agent)
            .args([
                "--json",
                "prune",
                "--sessions",
                "--older-than",
                "30d",
                "--any-folder",
            ])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = run(
        &env,
        &store,
        &[os("import"), d1.as_os_str(), d2.as_os_str()],
    );
    assert_eq!(code, 0, "{err}");
    let trash = disk.path().join("trash");
    fs::create_dir_all(&trash).unwrap();
    let st = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(pi.path())
        .status()
        .unwrap();
    assert!(st.success());
    for _ in 0..2 {
        let (code, out, err) = prune(&[]);
        assert_eq!(code, Some(2), "{out}{err}");
        assert!(out.contains("Read-only file system"), "{out}");
        let left = crate::common::files_under(&trash);
        assert!(left.is_empty(), "copies left in the trash: {left:?}");
    }
    let st = std::process::Command::new("mount")
        .args(["-o", "remount,rw"])
        .arg(pi.path())
        .status()
        .unwrap();
    assert!(st.success());
    let paths = |out: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        let mut p: Vec<String> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["trashPath"].as_str().unwrap().to_owned())
            .collect();
        p.sort();
        p
    };
    let (code, dry, err) = prune(&["--dry-run"]);
    assert_eq!(code, Some(0), "{err}");
    let (code, real, err) = prune(&[]);
    assert_eq!(code, Some(0), "{real}{err}");
    assert_eq!(paths(&dry), paths(&real));
    let moved = paths(&real);
    assert_eq!(moved.len(), 2);
    assert_ne!(moved[0], moved[1]);
    let mut got: Vec<Vec<u8>> = moved.iter().map(|p| fs::read(p).unwrap()).collect();
    let mut want = vec![
        fs::read(&src).unwrap(),
        fs::read(fixture("sessions/03-compactions.jsonl")).unwrap(),
    ];
    got.sort();
    want.sort();
    assert!(got == want, "the trash does not hold the files' bytes");
    assert!(!d1.join("a.jsonl").exists() && !d2.join("a.jsonl").exists());
}
