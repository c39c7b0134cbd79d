//! The pager (cli/src/pager.rs): a listing bound for a terminal goes through
//! `$PISESS_PAGER`/`$PAGER`/`less`, as git's and jj's do; nothing else does. A terminal is
//! given by util-linux's `script` (a pseudo-terminal around the command); the pagers are small
//! shell scripts that record what they got. Tests fail, never skip, when `script` is missing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{TestEnv, corpus, run, session};

/// `pisess ARGS` on a pseudo-terminal (`script -qec`), with `env` added to the test's
/// environment: (exit status, what reached the terminal). Its stdin is empty.
fn on_terminal(test: &TestEnv, env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
    let child = test.pisess_child();
    let bin = child.get_program().to_string_lossy().into_owned();
    let line = std::iter::once(bin.as_str())
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    // A pager that waits for a key would hang the test: `timeout` makes that a failure (124).
    let out = Command::new("timeout")
        .args(["60", "script", "-qec", &line, "/dev/null"])
        .env_clear()
        .envs(child.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .env("TERM", "xterm")
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("util-linux `script` is needed for these tests: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A pager script that copies its input to `got` and notes its `LESS` and `LV` in `env`.
fn recording_pager(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let script = dir.join(format!("{name}.sh"));
    let got = dir.join(format!("{name}.got"));
    let env = dir.join(format!("{name}.env"));
    fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"LESS=$LESS LV=$LV\" > '{}'\ncat > '{}'\n",
            env.display(),
            got.display()
        ),
    )
    .unwrap();
    make_executable(&script);
    (script, got, env)
}

fn make_executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A session with branches, imported (without a terminal) into the test's store.
fn imported(test: &TestEnv) -> String {
    let s = session("04-many-branches");
    assert_eq!(run(test, &["import", s.to_str().unwrap()]).code, 0);
    s.to_str().unwrap().to_owned()
}

#[test]
fn a_listing_on_a_terminal_goes_through_the_pager_whole() {
    let test = TestEnv::new();
    let s = imported(&test);
    let (pager, got, env) = recording_pager(test.home.path(), "pager");
    let pager = pager.to_str().unwrap();
    for args in [
        vec!["log", s.as_str()],
        vec!["tree", s.as_str()],
        vec!["show", s.as_str(), "@leaf"],
        vec!["diff", s.as_str(), "@root", "@leaf"],
        vec!["context", s.as_str()],
        vec!["ls"],
        vec!["stats"],
        vec!["--json", "log", s.as_str()],
    ] {
        let _ = fs::remove_file(&got);
        let (code, terminal) = on_terminal(&test, &[("PISESS_PAGER", pager)], &args);
        // Without a terminal the same command prints the same bytes (colour is off: NO_COLOR;
        // the width is COLUMNS in both).
        let plain = run(&test, &args);
        assert_eq!(code, plain.code, "{args:?}");
        assert!(!plain.stdout.is_empty(), "{args:?}");
        let paged = fs::read_to_string(&got).unwrap_or_else(|e| {
            panic!("{args:?}: the pager got nothing ({e}); terminal: {terminal}")
        });
        assert_eq!(paged, plain.stdout, "{args:?}");
        assert!(
            !terminal.contains(plain.stdout.lines().next().unwrap()),
            "{args:?}: the listing reached the terminal besides the pager: {terminal}"
        );
        assert_eq!(
            fs::read_to_string(&env).unwrap().trim(),
            "LESS=FRX LV=-c",
            "{args:?}"
        );
    }
    // A LESS of the user's own is left as it is.
    on_terminal(
        &test,
        &[("PISESS_PAGER", pager), ("LESS", "-S")],
        &["log", s.as_str()],
    );
    assert_eq!(fs::read_to_string(&env).unwrap().trim(), "LESS=-S LV=-c");
}

#[test]
fn no_pager_off_a_terminal_with_no_pager_for_cat_or_for_other_commands() {
    let test = TestEnv::new();
    let s = imported(&test);
    let (pager, got, _) = recording_pager(test.home.path(), "pager");
    let pager = pager.to_str().unwrap();
    let log = run(&test, &["log", &s]).stdout;
    let first = log.lines().next().unwrap().to_owned();

    // Not a terminal: the pager is never started.
    let out = test
        .pisess()
        .env("PISESS_PAGER", pager)
        .args(["log", &s])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), log);
    assert!(!got.exists(), "a pager ran without a terminal");

    // On a terminal, each of these leaves the output on the terminal.
    for (env, args) in [
        (
            vec![("PISESS_PAGER", pager)],
            vec!["--no-pager", "log", s.as_str()],
        ),
        (
            vec![("PISESS_PAGER", pager)],
            vec!["log", "--no-pager", s.as_str()],
        ),
        (
            vec![("PAGER", pager), ("PISESS_PAGER", "cat")],
            vec!["log", s.as_str()],
        ),
        (
            vec![("PAGER", pager), ("PISESS_PAGER", "")],
            vec!["log", s.as_str()],
        ),
    ] {
        let (code, terminal) = on_terminal(&test, &env, &args);
        assert_eq!(code, 0, "{env:?} {args:?}");
        assert!(terminal.contains(&first), "{env:?} {args:?}: {terminal}");
        assert!(!got.exists(), "{env:?} {args:?}: the pager ran");
    }
    // Without a pager set, a dumb terminal (or none named) gets no `less`, which would stop at
    // "terminal is not fully functional"; a pager set is used there too.
    for term in ["dumb", ""] {
        let (code, terminal) = on_terminal(&test, &[("TERM", term)], &["log", &s]);
        assert_eq!(code, 0, "TERM={term}");
        assert!(terminal.contains(&first), "TERM={term}: {terminal}");
    }
    on_terminal(
        &test,
        &[("TERM", "dumb"), ("PISESS_PAGER", pager)],
        &["log", &s],
    );
    assert_eq!(fs::read_to_string(&got).unwrap(), log);
    fs::remove_file(&got).unwrap();
    // PAGER serves when PISESS_PAGER is not set.
    on_terminal(&test, &[("PAGER", pager)], &["log", &s]);
    assert_eq!(fs::read_to_string(&got).unwrap(), log);
    fs::remove_file(&got).unwrap();

    // Commands that write or report are not paged.
    let out_file = test.home.path().join("out.jsonl");
    for args in [
        vec!["export", s.as_str(), "-o", out_file.to_str().unwrap()],
        vec!["export", s.as_str()],
        vec!["import", s.as_str()],
        vec!["verify"],
        vec!["check", s.as_str()],
    ] {
        on_terminal(&test, &[("PISESS_PAGER", pager)], &args);
        assert!(!got.exists(), "{args:?} was paged");
    }
}

#[test]
fn a_pager_that_quits_early_ends_the_listing_quietly() {
    let test = TestEnv::new();
    let big = corpus().join("15-large-50000.jsonl");
    let big = big.to_str().unwrap();
    assert_eq!(run(&test, &["import", big]).code, 0);
    // The listing is megabytes long; the pager reads 100 bytes and leaves.
    for pager in ["head -c 100 > /dev/null", "true"] {
        let (code, terminal) = on_terminal(&test, &[("PISESS_PAGER", pager)], &["log", big]);
        assert_eq!(code, 0, "{pager}: {terminal}");
        assert!(!terminal.contains("error"), "{pager}: {terminal}");
    }
}

#[test]
fn a_keyboard_interrupt_is_left_to_the_pager() {
    let test = TestEnv::new();
    let big = corpus().join("15-large-50000.jsonl");
    let big = big.to_str().unwrap();
    assert_eq!(run(&test, &["import", big]).code, 0);
    let listing = run(&test, &["log", big]).stdout;
    let got = test.home.path().join("got");
    let who = test.home.path().join("who");
    let pager = test.home.path().join("interrupting.sh");
    // As a Ctrl-C does, SIGINT reaches every process from the pager up to pisess (a `sh` that
    // runs the pager, and pisess) while the pager runs and handles it, as less does; then the
    // pager reads everything. The script names them.
    fs::write(
        &pager,
        format!(
            "#!/bin/sh\ntrap '' INT\np=$PPID\nnames=\n\
             while [ \"$p\" -gt 1 ]; do\n\
             n=$(cat /proc/$p/comm); names=\"$names $n\"; kill -INT $p\n\
             [ \"$n\" = pisess ] && break\n\
             p=$(cut -d' ' -f4 /proc/$p/stat)\ndone\n\
             echo $names > '{}'\nsleep 0.3\ncat > '{}'\n",
            who.display(),
            got.display()
        ),
    )
    .unwrap();
    make_executable(&pager);
    let path = pager.to_str().unwrap();
    // Plain words run as they are; quotes make it a shell command (`sh -c`).
    for (cmd, chain) in [
        (path.to_owned(), "pisess"),
        (format!("'{path}'"), "sh pisess"),
    ] {
        let _ = fs::remove_file(&got);
        let (code, terminal) = on_terminal(&test, &[("PISESS_PAGER", &cmd)], &["log", big]);
        assert_eq!(code, 0, "{cmd}: {terminal}");
        assert_eq!(fs::read_to_string(&who).unwrap().trim(), chain, "{cmd}");
        assert!(fs::read_to_string(&got).unwrap() == listing, "{cmd}");
    }
}

/// A warning or note written after the listing (here `tree`'s note on an entry it cannot
/// draw) goes into the pager after it when stderr is the terminal, not onto the screen behind
/// the pager.
#[test]
fn notes_after_the_listing_are_paged_after_it() {
    let test = TestEnv::new();
    let f = test.home.path().join("idless.jsonl");
    let mut text = fs::read_to_string(session("01-tiny")).unwrap();
    text.push_str(r#"{"type":"custom","customType":"x","parentId":null,"timestamp":"2026-07-25T09:02:00.000Z"}"#);
    text.push('\n');
    fs::write(&f, text).unwrap();
    let f = f.to_str().unwrap();
    let plain = run(&test, &["tree", f]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(
        plain.stderr.starts_with("note: 1 entry"),
        "{}",
        plain.stderr
    );
    let (pager, got, _) = recording_pager(test.home.path(), "pager");
    let (code, terminal) = on_terminal(
        &test,
        &[("PISESS_PAGER", pager.to_str().unwrap())],
        &["tree", f],
    );
    assert_eq!(code, 0, "{terminal}");
    assert_eq!(
        fs::read_to_string(&got).unwrap(),
        format!("{}{}", plain.stdout, plain.stderr)
    );
    assert!(!terminal.contains("note:"), "{terminal}");
}

/// A pager that is not found is said so, and the listing goes to the terminal.
#[test]
fn a_pager_that_cannot_start_leaves_the_listing_on_the_terminal() {
    let test = TestEnv::new();
    let s = imported(&test);
    let first = run(&test, &["log", &s])
        .stdout
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let (code, terminal) = on_terminal(
        &test,
        &[("PISESS_PAGER", "/nonexistent/pager -R")],
        &["log", &s],
    );
    assert_eq!(code, 0, "{terminal}");
    assert!(
        terminal.contains("warning: cannot start the pager `/nonexistent/pager -R`"),
        "{terminal}"
    );
    assert!(terminal.contains(&first), "{terminal}");
}
