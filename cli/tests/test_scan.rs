//! What folder walks take and how files are opened: a FIFO named `*.jsonl` is never opened for
//! reading, an unreadable folder is reported as failed, a name that is not UTF-8 is refused
//! (never imported then marked gone), and `check` shows names escaped, with counts that add up.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{TestEnv, session};

/// Runs `cmd` for at most 20 seconds (a hang is a failure, not a stuck CI): (exit code, stdout,
/// stderr).
fn run_timed(mut cmd: Command, what: &str) -> (i32, String, String) {
    let out = tempfile::tempdir().unwrap();
    let (o, e) = (out.path().join("out"), out.path().join("err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(fs::File::create(&o).unwrap())
        .stderr(fs::File::create(&e).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st.code().unwrap_or(-1);
        }
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("`pisess {what}` still runs after 20 s: it blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| String::from_utf8_lossy(&fs::read(p).unwrap()).into_owned();
    (code, read(&o), read(&e))
}

fn pisess(env: &TestEnv, args: &[&str]) -> Command {
    let mut cmd = env.pisess_child();
    cmd.args(args);
    cmd
}

/// The `--json import` summary line.
fn summary(out: &str) -> serde_json::Value {
    serde_json::from_str(out.lines().last().unwrap_or_default()).unwrap()
}

#[test]
fn a_fifo_named_jsonl_is_never_opened() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::copy(session("01-tiny"), d.join("s.jsonl")).unwrap();
    let st = Command::new("mkfifo").arg(d.join("x.jsonl")).status();
    assert!(st.is_ok_and(|s| s.success()), "mkfifo failed");
    let (ds, fifo, file) = (
        d.to_str().unwrap(),
        d.join("x.jsonl").to_str().unwrap().to_owned(),
        d.join("s.jsonl").to_str().unwrap().to_owned(),
    );
    // A folder walk leaves the FIFO out.
    let (code, out, err) = run_timed(pisess(&env, &["--json", "import", ds]), "import");
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(summary(&out)["new"], 1, "{out}");
    let (code, out, err) = run_timed(pisess(&env, &["check", ds]), "check");
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("checked 1 file(s): 1 clean"), "{out}");
    let (code, out, err) = run_timed(pisess(&env, &["migrate", ds]), "migrate");
    assert_eq!(code, 0, "{out}\n{err}");
    // Given by name, it is an error naming it; the other file is still done.
    for cmd in ["import", "check", "migrate"] {
        let (code, out, err) = run_timed(pisess(&env, &[cmd, &fifo, &file]), cmd);
        assert_eq!(code, 2, "{cmd}: {out}\n{err}");
        assert!(
            err.contains("x.jsonl") && err.contains("not a regular file (a FIFO)"),
            "{cmd}: {err}"
        );
    }
    let (code, out, err) = run_timed(pisess(&env, &["stats", &fifo]), "stats");
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("not a regular file (a FIFO)"), "{err}");
}

/// `cmd` run as a user whom file permissions bind: as it is when the tests do not run as root,
/// else through `setpriv` as uid/gid 65534, nobody (`None` when that is not possible here). `readable` are
/// folders that user must be able to enter.
fn unprivileged(cmd: Command, readable: &[&Path]) -> Option<Command> {
    use std::os::unix::fs::MetadataExt;
    if fs::metadata("/proc/self").is_ok_and(|m| m.uid() != 0) {
        return Some(cmd);
    }
    for d in readable {
        fs::set_permissions(d, fs::Permissions::from_mode(0o777)).unwrap();
    }
    let mut wrapped = Command::new("setpriv");
    wrapped
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            wrapped.env(k, v);
        }
    }
    let works = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success());
    works.then_some(wrapped)
}

/// Whether the unprivileged user of [`unprivileged`] is refused `dir`'s listing.
fn denied(dir: &Path, readable: &[&Path]) -> bool {
    let mut ls = Command::new("ls");
    ls.arg(dir);
    unprivileged(ls, readable).is_some_and(|mut c| {
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| !s.success())
    })
}

#[test]
fn an_unreadable_folder_is_reported_and_the_rest_imported() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    let sub = files.join("sub");
    fs::create_dir_all(&sub).unwrap();
    fs::copy(session("01-tiny"), files.join("a.jsonl")).unwrap();
    fs::copy(session("02-small-branches"), sub.join("x.jsonl")).unwrap();
    fs::set_permissions(&sub, fs::Permissions::from_mode(0o000)).unwrap();
    let readable = [env.home.path(), dir.path()];
    if !denied(&sub, &readable) {
        fs::set_permissions(&sub, fs::Permissions::from_mode(0o755)).unwrap();
        panic!(
            "permissions cannot be made to deny a folder here (as root this test runs the \
             commands through `setpriv` as uid 65534): the case cannot be checked"
        );
    }
    let run = |args: &[&str]| {
        let cmd = unprivileged(pisess(&env, args), &readable).unwrap();
        run_timed(cmd, &args.join(" "))
    };
    let (fs_, subs, x) = (
        files.to_str().unwrap(),
        sub.to_str().unwrap(),
        sub.join("x.jsonl").to_str().unwrap().to_owned(),
    );
    // Twice: the second import is answered without reading a file, and says the same.
    for _ in 0..2 {
        let (code, out, err) = run(&["--json", "import", fs_]);
        assert_eq!(code, 2, "{out}\n{err}");
        let s = summary(&out);
        assert_eq!((&s["failed"], &s["gone"]), (&1.into(), &0.into()), "{out}");
        assert!(
            err.contains(&format!(
                "failed: {subs}: cannot read this folder: Permission denied"
            )),
            "{err}"
        );
    }
    let (code, out, err) = run(&["import", subs]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("Permission denied"), "{err}");
    let (code, out, err) = run(&["stats", &x]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("Permission denied"), "{err}");
    let (code, out, err) = run(&["check", fs_]);
    assert_eq!(code, 2, "{out}\n{err}");
    assert!(err.contains("cannot read folder"), "{err}");
    assert!(
        out.contains(
            "checked 1 file(s): 1 clean, 0 with problems, 0 unreadable (0 errors, 0 warnings, \
             0 notes); 1 folder could not be read"
        ),
        "{out}"
    );
    fs::set_permissions(&sub, fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_name_that_is_not_utf8_is_refused_not_imported_then_gone() {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs::copy(session("01-tiny"), d.join("s.jsonl")).unwrap();
    let bad = d.join(std::ffi::OsStr::from_bytes(b"bad\xff.jsonl"));
    fs::copy(session("02-small-branches"), &bad).unwrap();
    for _ in 0..2 {
        let (code, out, err) = run_timed(
            pisess(&env, &["--json", "import", d.to_str().unwrap()]),
            "import",
        );
        assert_eq!(code, 2, "{out}\n{err}");
        let s = summary(&out);
        assert_eq!((&s["failed"], &s["gone"]), (&1.into(), &0.into()), "{out}");
        assert_eq!(
            s["new"].as_u64().unwrap() + s["unchanged"].as_u64().unwrap(),
            1
        );
        assert!(err.contains("its path is not UTF-8"), "{err}");
    }
    let mut cmd = pisess(&env, &["import"]);
    cmd.arg(&bad);
    let (code, _, err) = run_timed(cmd, "import");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("its path is not UTF-8"), "{err}");
}

#[test]
fn check_escapes_names() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("\x1b[31mred.jsonl");
    fs::copy(crate::common::fixture("edge/duplicate-ids.jsonl"), &file).unwrap();
    let (code, out, err) = run_timed(
        pisess(&env, &["check", dir.path().to_str().unwrap()]),
        "check",
    );
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(!out.contains('\x1b'), "{out:?}");
    assert!(out.contains("\\u{1b}[31mred.jsonl:4: warning"), "{out}");
}
