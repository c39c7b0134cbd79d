//! `-o FILE` of `export` and `prune` (and `migrate --out`) on paths that are not plain files: a
//! FIFO gets the bytes written straight into it and stays a FIFO; a symlink is followed (its
//! target replaced atomically, the link kept), a dangling one creates its target; a directory,
//! or a link to one, is refused with an error naming it; a FIFO whose reader leaves before the
//! end is an error naming it.
//!
//! No test here points at a real device: a broken build would replace it on the machine.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, symlink};
use std::path::{Path, PathBuf};

use crate::common::{TestEnv, fixture};

/// A session with branches, copied into the environment (prune has something to drop).
fn session(env: &TestEnv) -> PathBuf {
    let s = env.home.path().join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &s).unwrap();
    s
}

/// The argument lines of the writers under test, each writing to `out`.
fn writers(session: &Path, out: &Path) -> Vec<(&'static str, Vec<OsString>)> {
    let line = |args: &[&OsStr]| args.iter().map(|a| a.to_os_string()).collect();
    vec![
        (
            "export",
            line(&[
                "export".as_ref(),
                session.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ]),
        ),
        (
            "prune",
            line(&[
                "prune".as_ref(),
                session.as_os_str(),
                "--keep-leaf".as_ref(),
                "-o".as_ref(),
                out.as_os_str(),
            ]),
        ),
    ]
}

/// Runs pisess: (exit code, stdout, stderr).
fn run(env: &TestEnv, args: &[OsString]) -> (i32, String, String) {
    let out = env.pisess().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What each writer puts in a fresh regular file (the reference bytes).
fn expected(env: &TestEnv, s: &Path) -> Vec<Vec<u8>> {
    let dir = env.home.path().join("expected");
    fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.jsonl");
    writers(s, &plain)
        .into_iter()
        .map(|(name, args)| {
            let (code, out, err) = run(env, &args);
            assert_eq!(code, 0, "{name} -o a file: {out}\n{err}");
            let bytes = fs::read(&plain).unwrap();
            assert!(!bytes.is_empty(), "{name} wrote nothing");
            fs::remove_file(&plain).unwrap();
            bytes
        })
        .collect()
}

/// The names in `dir`, sorted (to see that no temp file is left behind).
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

#[test]
fn output_to_a_fifo_writes_into_it_and_keeps_it() {
    let env = TestEnv::new();
    let s = session(&env);
    let want = expected(&env, &s);
    let dir = env.home.path().join("fifo");
    fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("out.jsonl");
    for ((name, args), want) in writers(&s, &fifo).into_iter().zip(want) {
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                fs::File::open(&fifo)
                    .unwrap()
                    .read_to_end(&mut got)
                    .unwrap();
                got
            })
        };
        // Our own writer end keeps the reader from seeing the end of the stream before pisess
        // has written (and lets it end if pisess never opens the FIFO, as a broken build
        // would: no test hangs).
        let guard = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let (code, out, err) = run(&env, &args);
        drop(guard);
        let got = reader.join().unwrap();
        assert_eq!(code, 0, "{name} -o FIFO: {out}\n{err}");
        assert!(
            fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
            "{name}: the FIFO was replaced"
        );
        assert_eq!(
            got.len(),
            want.len(),
            "{name}: the FIFO got other bytes than a file does"
        );
        assert!(got == want, "{name}: the FIFO got other bytes than a file");
        assert_eq!(listing(&dir), ["out.jsonl"], "{name}: left files behind");
        fs::remove_file(&fifo).unwrap();
    }
}

/// A FIFO whose reader takes 16 bytes and leaves, long before the end (the session is 2 MB,
/// the FIFO holds 64 KiB): the output was not written, so each writer fails (exit 2) naming the
/// FIFO and why; the FIFO stays and nothing is left beside it.
#[test]
fn output_to_a_fifo_whose_reader_leaves_early_fails_naming_it() {
    use std::io::Write as _;
    let env = TestEnv::new();
    let s = env.home.path().join("big.jsonl");
    let mut w = std::io::BufWriter::new(fs::File::create(&s).unwrap());
    writeln!(
        w,
        r#"{{"type":"session","version":3,"id":"big","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}}"#
    )
    .unwrap();
    let text = "x".repeat(1000);
    for i in 0..2000 {
        let parent = match i {
            0 => "null".to_owned(),
            _ => format!("\"{:08x}\"", i - 1),
        };
        writeln!(
            w,
            r#"{{"type":"message","id":"{i:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"{text}","timestamp":1}}}}"#
        )
        .unwrap();
    }
    w.into_inner().unwrap().sync_all().unwrap();
    let dir = env.home.path().join("fifo");
    fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("out.jsonl");
    for (name, args) in writers(&s, &fifo) {
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut first = [0u8; 16];
                let mut f = fs::File::open(&fifo).unwrap();
                // Fails at the end of the stream only if pisess never wrote (a broken build).
                let _ = f.read_exact(&mut first);
            })
        };
        // As above: lets the reader's open return, and its read end if pisess never writes.
        let guard = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        let (code, out, err) = run(&env, &args);
        drop(guard);
        reader.join().unwrap();
        assert_eq!(code, 2, "{name} -o FIFO: {out}\n{err}");
        assert!(
            err.contains(&format!("error: cannot write {}", fifo.display()))
                && err.contains("Broken pipe")
                && err.contains("its reader closed it"),
            "{name}: {err}"
        );
        assert!(
            fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(),
            "{name}: the FIFO was replaced"
        );
        assert_eq!(listing(&dir), ["out.jsonl"], "{name}: left files behind");
        fs::remove_file(&fifo).unwrap();
    }
}

#[test]
fn output_to_a_symlink_replaces_its_target_and_keeps_the_link() {
    let env = TestEnv::new();
    let s = session(&env);
    let want = expected(&env, &s);
    let dir = env.home.path().join("links");
    let real_dir = dir.join("real");
    fs::create_dir_all(&real_dir).unwrap();
    let target = real_dir.join("target.jsonl");
    // link → (relative) mid → (absolute) target: two links to follow.
    let mid = real_dir.join("mid.jsonl");
    let link = dir.join("link.jsonl");
    for ((name, args), want) in writers(&s, &link).into_iter().zip(want) {
        fs::write(&target, b"old bytes\n").unwrap();
        symlink(&target, &mid).unwrap();
        symlink("real/mid.jsonl", &link).unwrap();
        let (code, out, err) = run(&env, &args);
        assert_eq!(code, 0, "{name} -o LINK: {out}\n{err}");
        for l in [&link, &mid] {
            assert!(
                fs::symlink_metadata(l).unwrap().file_type().is_symlink(),
                "{name}: {} was replaced by a file",
                l.display()
            );
        }
        assert!(fs::read(&target).unwrap() == want, "{name}: stale target");
        assert_eq!(listing(&dir), ["link.jsonl", "real"], "{name}");
        assert_eq!(
            listing(&real_dir),
            ["mid.jsonl", "target.jsonl"],
            "{name}: left files behind"
        );
        for f in [&link, &mid, &target] {
            fs::remove_file(f).unwrap();
        }
    }
}

#[test]
fn output_to_a_dangling_symlink_creates_its_target() {
    let env = TestEnv::new();
    let s = session(&env);
    let want = expected(&env, &s);
    let dir = env.home.path().join("dangling");
    fs::create_dir_all(&dir).unwrap();
    let link = dir.join("link.jsonl");
    let target = dir.join("new.jsonl");
    for ((name, args), want) in writers(&s, &link).into_iter().zip(want) {
        symlink("new.jsonl", &link).unwrap();
        let (code, out, err) = run(&env, &args);
        assert_eq!(code, 0, "{name} -o DANGLING: {out}\n{err}");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink(),
            "{name}: the link was replaced by a file"
        );
        assert!(fs::read(&target).unwrap() == want, "{name}: target");
        assert_eq!(listing(&dir), ["link.jsonl", "new.jsonl"], "{name}");
        fs::remove_file(&link).unwrap();
        fs::remove_file(&target).unwrap();
    }
}

#[test]
fn output_to_a_directory_or_a_link_to_one_is_refused_naming_it() {
    let env = TestEnv::new();
    let s = session(&env);
    let base = env.home.path().join("dirs");
    let dir = base.join("folder");
    let link = base.join("to-folder");
    fs::create_dir_all(&dir).unwrap();
    symlink("folder", &link).unwrap();
    for out in [&link, &dir] {
        for (name, args) in writers(&s, out) {
            let (code, stdout, err) = run(&env, &args);
            assert_eq!(code, 2, "{name} -o {}: {stdout}\n{err}", out.display());
            assert!(
                err.contains(&format!("{} is a directory", out.display())),
                "{name}: the error does not say {} is a directory: {err}",
                out.display()
            );
            assert!(!err.contains("panicked"), "{err}");
            assert!(
                fs::symlink_metadata(&link)
                    .unwrap()
                    .file_type()
                    .is_symlink(),
                "{name}: the link to the folder was replaced"
            );
            assert!(listing(&dir).is_empty(), "{name}: wrote into the folder");
            assert_eq!(listing(&base), ["folder", "to-folder"], "{name}");
        }
    }
}

/// `migrate --out DIR` writes each file by the same rule: a link under DIR is followed (a
/// missing target gets the migrated file, the link stays; a target that holds other bytes is
/// never replaced, see `test_migrate::out_never_replaces_a_file_that_differs`); a FIFO there is
/// left alone, reported as failed, without blocking on it.
#[test]
fn migrate_out_follows_links_and_leaves_fifos_alone() {
    let env = TestEnv::new();
    let src_dir = env.home.path().join("v1");
    fs::create_dir_all(&src_dir).unwrap();
    let src = src_dir.join("s.jsonl");
    fs::copy(fixture("sessions/07-v1.jsonl"), &src).unwrap();
    let migrate = |out: &Path| -> Vec<OsString> {
        [
            "migrate".as_ref(),
            src.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ]
        .iter()
        .map(|a| a.to_os_string())
        .collect()
    };
    let plain = env.home.path().join("plain");
    let (code, out, err) = run(&env, &migrate(&plain));
    assert_eq!(code, 0, "{out}\n{err}");
    let want = fs::read(plain.join("s.jsonl")).unwrap();

    let out_dir = env.home.path().join("out");
    let elsewhere = env.home.path().join("elsewhere");
    fs::create_dir_all(&out_dir).unwrap();
    fs::create_dir_all(&elsewhere).unwrap();
    let target = elsewhere.join("kept.jsonl");
    fs::write(&target, b"old bytes\n").unwrap();
    let link = out_dir.join("s.jsonl");
    symlink("../elsewhere/kept.jsonl", &link).unwrap();
    let (code, out, err) = run(&env, &migrate(&out_dir));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(
        err.contains("exists and differs from the migration"),
        "{err}"
    );
    assert_eq!(fs::read(&target).unwrap(), b"old bytes\n");
    // Gone: the link's target is created; the link stays a link.
    fs::remove_file(&target).unwrap();
    let (code, out, err) = run(&env, &migrate(&out_dir));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced by a file"
    );
    assert!(fs::read(&target).unwrap() == want, "stale target");
    assert_eq!(listing(&out_dir), ["s.jsonl"]);
    assert_eq!(listing(&elsewhere), ["kept.jsonl"]);

    fs::remove_file(&link).unwrap();
    mkfifo(&link);
    let (code, out, err) = run(&env, &migrate(&out_dir));
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(out.contains("FIFO") || err.contains("FIFO"), "{out}\n{err}");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_fifo());
    assert_eq!(listing(&out_dir), ["s.jsonl"]);
}

/// `export -o` onto the session's own file, by any name (the path itself, `./`, `dir/..`, a
/// symlink, a hard link), is refused as `prune -o` refuses it: exit 2, the file untouched,
/// nothing else written. A v1 source (migrated on import) is its file too.
#[test]
fn export_onto_the_session_file_itself_is_refused() {
    let env = TestEnv::new();
    let dir = env.home.path().join("e");
    fs::create_dir_all(dir.join("sub")).unwrap();
    let s = dir.join("s.jsonl");
    fs::copy(fixture("sessions/04-many-branches.jsonl"), &s).unwrap();
    let v1 = dir.join("v1.jsonl");
    fs::copy(fixture("sessions/07-v1.jsonl"), &v1).unwrap();
    symlink("s.jsonl", dir.join("link.jsonl")).unwrap();
    fs::hard_link(&s, dir.join("hard.jsonl")).unwrap();
    let bytes = |p: &Path| fs::read(p).unwrap();
    let (s_bytes, v1_bytes) = (bytes(&s), bytes(&v1));
    let arg = |p: &Path| p.as_os_str().to_os_string();
    let targets: Vec<(PathBuf, OsString)> = vec![
        (s.clone(), arg(&s)),
        (s.clone(), arg(&dir.join("./s.jsonl"))),
        (s.clone(), arg(&dir.join("sub/../s.jsonl"))),
        (s.clone(), arg(&dir.join("link.jsonl"))),
        (s.clone(), arg(&dir.join("hard.jsonl"))),
        (v1.clone(), arg(&v1)),
    ];
    for (session, out) in &targets {
        for format in ["jsonl", "html", "md"] {
            let args: Vec<OsString> = vec![
                "export".into(),
                arg(session),
                "--format".into(),
                format.into(),
                "-o".into(),
                out.clone(),
            ];
            let (code, stdout, err) = run(&env, &args);
            assert_eq!(code, 2, "{args:?}\n{stdout}\n{err}");
            assert!(
                err.contains(&format!(
                    "error: {} is the session file itself",
                    Path::new(out).display()
                )),
                "{args:?}: {err}"
            );
        }
    }
    assert!(bytes(&s) == s_bytes, "the session was overwritten");
    assert!(bytes(&v1) == v1_bytes, "the v1 session was overwritten");
    assert!(
        fs::symlink_metadata(dir.join("link.jsonl"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(
        listing(&dir),
        ["hard.jsonl", "link.jsonl", "s.jsonl", "sub", "v1.jsonl"]
    );
    // Another file is written as before.
    let other = dir.join("sub/copy.jsonl");
    let (code, _, err) = run(
        &env,
        &[arg(Path::new("export")), arg(&s), "-o".into(), arg(&other)],
    );
    assert_eq!(code, 0, "{err}");
    assert!(bytes(&other) == s_bytes);
}

/// An output that is pisess's own store or the copy of its catalogue beside it, by any name
/// (the path, a symlink, a hard link), is refused by every command that writes one (`export
/// -o`, `prune -o`, `migrate --out` naming the store's folder is a folder, so not here): exit
/// 2, the store untouched and still answering.
#[test]
fn an_output_onto_the_store_is_refused() {
    let env = TestEnv::new();
    let dir = env.home.path().join("w");
    fs::create_dir_all(&dir).unwrap();
    let s = dir.join("s.jsonl");
    fs::copy(fixture("sessions/02-small-branches.jsonl"), &s).unwrap();
    let arg = |p: &Path| p.as_os_str().to_os_string();
    let (code, _, err) = run(&env, &["import".into(), arg(&s)]);
    assert_eq!(code, 0, "{err}");
    let store = env.home.path().join("store.redb");
    let copy = env.home.path().join("store.redb.sources");
    // An import that changes nothing leaves the copy of the catalogue beside the store.
    let (code, _, err) = run(&env, &["import".into(), arg(&s)]);
    assert_eq!(code, 0, "{err}");
    assert!(copy.exists(), "no catalogue copy at {}", copy.display());
    symlink(&store, dir.join("link.redb")).unwrap();
    fs::hard_link(&store, dir.join("hard.redb")).unwrap();
    let before = fs::read(&store).unwrap();
    for out in [
        store.clone(),
        dir.join("link.redb"),
        dir.join("hard.redb"),
        copy.clone(),
    ] {
        for cmd in [
            vec!["export".into(), arg(&s), "-o".into(), arg(&out)],
            vec![
                "prune".into(),
                arg(&s),
                "--keep-leaf".into(),
                "-o".into(),
                arg(&out),
            ],
        ] {
            let (code, stdout, err) = run(&env, &cmd);
            assert_eq!(code, 2, "{cmd:?}\n{stdout}\n{err}");
            assert!(err.contains("is pisess's store"), "{cmd:?}: {err}");
        }
    }
    assert!(fs::read(&store).unwrap() == before, "the store was written");
    let (code, stdout, err) = run(&env, &["ls".into()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        stdout.contains("s.jsonl") || stdout.contains("019"),
        "{stdout}"
    );
}

/// An output in a folder that does not exist says so, for every writer, and creates nothing.
#[test]
fn output_into_a_missing_folder_says_the_folder_does_not_exist() {
    let env = TestEnv::new();
    let s = session(&env);
    let missing = env.home.path().join("no/such/dir");
    let out = missing.join("x.jsonl");
    for (name, args) in writers(&s, &out) {
        let (code, stdout, err) = run(&env, &args);
        assert_eq!(code, 2, "{name}: {stdout}\n{err}");
        assert!(
            err.contains(&format!("the folder {} does not exist", missing.display())),
            "{name}: {err}"
        );
    }
    assert!(!env.home.path().join("no").exists());
}
