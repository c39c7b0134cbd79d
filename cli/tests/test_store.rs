//! The store commands: import (twice: all unchanged), export (byte-identical for v3), ls,
//! files (a path known to be in a fixture), verify.

use std::path::Path;

use crate::common::{TestEnv, fixture, oracle, realdata, run};

#[test]
fn import_export_ls_files_verify() {
    let env = TestEnv::new();
    let dir = env.home.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    let names: Vec<String> = std::fs::read_dir(fixture("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    for n in &names {
        std::fs::copy(fixture("sessions").join(n), dir.join(n)).unwrap();
    }
    let first = env
        .pisess()
        .args(["--json", "import"])
        .arg(&dir)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&first.get_output().stdout).unwrap();
    assert_eq!(v["new"], names.len());
    assert_eq!(v["failed"], 0);
    let second = env
        .pisess()
        .args(["--json", "import"])
        .arg(&dir)
        .assert()
        .success();
    let v: serde_json::Value = serde_json::from_slice(&second.get_output().stdout).unwrap();
    assert_eq!(v["unchanged"], names.len(), "{v}");
    // Export of v3 files is byte-identical; -o writes the same bytes.
    for n in names
        .iter()
        .filter(|n| !n.contains("v1") && !n.contains("v2"))
    {
        let src = dir.join(n);
        let out = env.pisess().arg("export").arg(&src).assert().success();
        assert!(
            out.get_output().stdout == std::fs::read(&src).unwrap(),
            "{n}"
        );
    }
    let o = env.home.path().join("out.jsonl");
    let src = dir.join("01-tiny.jsonl");
    env.pisess()
        .arg("export")
        .arg(&src)
        .arg("-o")
        .arg(&o)
        .assert()
        .success();
    assert_eq!(std::fs::read(&o).unwrap(), std::fs::read(&src).unwrap());
    // ls lists every session.
    let ls = env.pisess().args(["--json", "ls"]).assert().success();
    let text = String::from_utf8(ls.get_output().stdout.clone()).unwrap();
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), names.len());
    for r in &rows {
        for k in [
            "id",
            "file",
            "cwd",
            "created",
            "entries",
            "messages",
            "bytes",
            "firstMessage",
        ] {
            assert!(r.get(k).is_some(), "{k} missing in {r}");
        }
    }
    // files: `/etc/hosts` is read in the fixtures (grep '"path":"/etc/hosts"').
    let f = env
        .pisess()
        .args(["--json", "files", "/etc/hosts"])
        .assert()
        .success();
    let text = String::from_utf8(f.get_output().stdout.clone()).unwrap();
    assert!(text.lines().count() >= 1);
    assert!(text.contains("\"path\":\"/etc/hosts\""));
    env.pisess()
        .args(["files", "/nowhere/at/all"])
        .assert()
        .code(1);
    env.pisess()
        .args(["files", "**/*.proto"])
        .assert()
        .success();
    env.pisess().arg("verify").assert().success();
}

#[test]
fn failed_files_give_exit_2_after_all_were_tried() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("bad.jsonl"), "not json\n").unwrap();
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), dir.join("ok.jsonl")).unwrap();
    let a = env
        .pisess()
        .args(["--json", "import"])
        .arg(&dir)
        .assert()
        .code(2);
    let v: serde_json::Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(
        (v["new"].as_u64(), v["failed"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("bad.jsonl"));
}

/// `pisess --json import DIR`, which must exit 0: its summary and its stderr.
fn import_json(env: &TestEnv, dir: &std::path::Path) -> (serde_json::Value, String) {
    let a = env
        .pisess()
        .args(["--json", "import"])
        .arg(dir)
        .assert()
        .code(0);
    (
        serde_json::from_slice(&a.get_output().stdout).unwrap(),
        String::from_utf8_lossy(&a.get_output().stderr).into_owned(),
    )
}

/// The `warning:` lines of a command's stderr.
fn warning_lines(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("warning:")).collect()
}

/// A v1 file is imported through its migrated copy, whose lines are not the source's: the
/// import said nothing of the source's lines pi drops or misreads (a glued line), nor of a
/// record pisess cannot read (a number beyond the double range), which the migration keeps
/// outside the parent chain where pi's chains it. It now counts and names both, as for a v3
/// file; a clean v1 file still says nothing.
#[test]
fn an_import_of_a_v1_file_says_which_lines_pi_drops_or_misreads() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("unread.jsonl"),
        crate::common::V1_UNREADABLE_RECORD,
    )
    .unwrap();
    std::fs::copy(
        realdata().join("pimono__root-session.v1.concat-line.jsonl"),
        dir.join("glued.jsonl"),
    )
    .unwrap();
    std::fs::copy(fixture("sessions/07-v1.jsonl"), dir.join("clean.jsonl")).unwrap();
    let (v, err) = import_json(&env, &dir);
    assert_eq!(v["warnedLines"].as_u64(), Some(2), "{v}");
    let warnings = warning_lines(&err);
    assert_eq!(warnings.len(), 2, "{err}");
    let of = |name: &str| warnings.iter().find(|w| w.contains(name)).copied();
    assert!(
        of("unread.jsonl").is_some_and(
            |w| w.contains("outside the parent chain") && w.contains("number out of range")
        ),
        "{err}"
    );
    assert!(
        of("glued.jsonl").is_some_and(|w| w.contains("first: line 440: 2 JSON records glued")),
        "{err}"
    );
    assert!(of("clean.jsonl").is_none(), "{err}");
}

/// Lines pi drops or misreads (not JSON, a torn last line, glued records) are kept by the
/// import, and said: one warning per file on stderr naming the first such line, and their
/// number in the JSON summary; a clean file and an unchanged re-import say nothing.
#[test]
fn an_import_says_which_files_hold_lines_pi_drops() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        fixture("edge/malformed-and-blank-lines.jsonl"),
        dir.join("bad-lines.jsonl"),
    )
    .unwrap();
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), dir.join("ok.jsonl")).unwrap();
    let (v, err) = import_json(&env, &dir);
    assert_eq!(v["warnedLines"].as_u64(), Some(3));
    let warnings = warning_lines(&err);
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains("bad-lines.jsonl: 3 lines") && warnings[0].contains("first: line 5"),
        "{err}"
    );
    let a = env
        .pisess()
        .args(["--json", "import"])
        .arg(&dir)
        .assert()
        .code(0);
    assert!(!String::from_utf8_lossy(&a.get_output().stderr).contains("warning"));
}

/// pi's `JSON.parse` fails on a line of glued records, and on a first line that starts with a
/// byte order mark, so a whole-line header after such a line is pi's header. pisess took the
/// line's first record instead: a file whose glued first line starts with an old header was
/// read as that v1 session (migrated, so `export` did not give the bytes back), one whose
/// glued first line starts with an entry, or whose marked first line is `[]`, was refused, and
/// a marked header line followed by another header gave the first. All are now the session pi
/// reads (the oracle's id, cwd and entries), the line kept as junk: export gives the same
/// bytes, and `stats` counts pi's entries only.
#[test]
fn a_whole_line_header_after_a_line_pi_skips_is_the_session_pi_reads() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let names = [
        "glued-header-then-header",
        "glued-entries-then-header",
        "bom-array-then-header",
        "bom-header-then-header",
    ];
    for name in names {
        std::fs::copy(
            fixture(&format!("odd/{name}.jsonl")),
            dir.join(format!("{name}.jsonl")),
        )
        .unwrap();
    }
    let (v, err) = import_json(&env, &dir);
    assert_eq!(
        (v["new"].as_u64(), v["failed"].as_u64()),
        (Some(4), Some(0)),
        "{v}\n{err}"
    );
    let warnings = warning_lines(&err);
    assert_eq!(warnings.len(), 4, "{err}");
    assert!(
        warnings.iter().all(
            |w| w.contains("first: line 1: a line before the header line that pi cannot parse")
        ),
        "{err}"
    );
    let ls = run(&env, &["--json", "ls"]);
    for name in names {
        let f = dir.join(format!("{name}.jsonl"));
        let f = f.to_str().unwrap();
        let exported = env.pisess().args(["export", f]).assert().code(0);
        assert!(
            exported.get_output().stdout == std::fs::read(f).unwrap(),
            "{name}: export differs from the file"
        );
        let load = oracle(&["load", f]);
        let row: serde_json::Value = ls
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|r| r["file"] == f)
            .unwrap_or_else(|| panic!("{name} not listed: {}", ls.stdout));
        assert_eq!(row["id"], load["sessionId"], "{name}");
        assert_eq!(row["cwd"], load["header"]["cwd"], "{name}");
        assert_eq!(row["entries"], load["entryCount"], "{name}");
        let stats = run(&env, &["--json", "stats", f]);
        let total: serde_json::Value = serde_json::from_str(stats.stdout.trim()).unwrap();
        assert_eq!(
            total["entries"], load["entryCount"],
            "{name}: {}",
            stats.stdout
        );
    }
}

/// A header read from a line pi skips, with no whole line after it (pi finds no session; pisess
/// takes the line's header), stands only until a whole line decides: when a whole-line header
/// is appended, pi reads that one, and so does a fresh import. An import of the grown file kept
/// the old header and appended the new line as a second header row; it now reads the file
/// again, and gives what a fresh import gives (also when the appended header has the old one's
/// text: its line decides). An appended entry keeps the header (grown).
#[test]
fn an_appended_whole_line_header_replaces_one_read_from_a_line_pi_skips() {
    let h = |id: &str| {
        format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-02-01T10:00:00.000Z","cwd":"/{id}"}}"#
        )
    };
    let e = |id: &str, parent: &str| {
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-02-01T10:00:01.000Z","message":{{"role":"user","content":"{id}","timestamp":1}}}}"#
        )
    };
    let ls = |env: &TestEnv| -> Vec<(String, u64)> {
        run(env, &["--json", "ls"])
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| {
                (
                    v["id"].as_str().unwrap().to_owned(),
                    v["entries"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let cases = [
        // (first part, appended part, outcome, session afterwards)
        (
            format!("{}{}\n", h("a"), e("e1", "null")),
            format!("{}\n", h("b")),
            "rewritten",
            ("b", 0),
        ),
        (
            format!("\u{feff}{}\n", h("a")),
            format!("{}\n", h("b")),
            "rewritten",
            ("b", 0),
        ),
        // The same header text on a later whole line is another header: the lines before it
        // are then junk (the header's line decides, not its text).
        (
            format!(
                "\u{feff}{}\n{}{}\n",
                h("a"),
                e("e1", "null"),
                e("e2", "\"e1\"")
            ),
            format!("{}\n", h("a")),
            "rewritten",
            ("a", 0),
        ),
        (
            format!("{}{}\n", h("a"), e("e1", "null")),
            format!("{}\n", e("e2", "\"e1\"")),
            "grown",
            ("a", 2),
        ),
        (
            format!("{}\n{}\n", h("a"), e("e1", "null")),
            format!("{}\n", h("b")),
            "grown",
            ("a", 1),
        ),
    ];
    for (first, appended, outcome, (id, entries)) in cases {
        let env = TestEnv::new();
        let f = env.home.path().join("s.jsonl");
        std::fs::write(&f, &first).unwrap();
        import_json(&env, &f);
        std::fs::write(&f, format!("{first}{appended}")).unwrap();
        let (v, _) = import_json(&env, &f);
        assert_eq!(
            v[outcome].as_u64(),
            Some(1),
            "{first:?} + {appended:?}: {v}"
        );
        assert_eq!(
            ls(&env),
            [(id.to_owned(), entries)],
            "{first:?} + {appended:?}"
        );
        let fresh = TestEnv::new();
        import_json(&fresh, &f);
        assert_eq!(ls(&env), ls(&fresh), "{first:?} + {appended:?}");
        assert_eq!(run(&env, &["verify"]).code, 0);
    }
}

/// `pisess import` of an unchanged folder answers from the copy of the catalogue beside the
/// store without opening the store: the first import writes the store, the second (unchanged,
/// on the store opened read-only) leaves the copy, and the third answers even while another
/// process holds the store's lock, where opening the store says it is busy. A changed file
/// opens the store again, which removes the copy.
#[test]
fn an_unchanged_import_answers_from_the_copy_without_opening_the_store() {
    let env = TestEnv::new();
    let dir = env.home.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    for n in ["02-small-branches.jsonl", "03-compactions.jsonl"] {
        std::fs::copy(fixture("sessions").join(n), dir.join(n)).unwrap();
    }
    let store = env.home.path().join("store.redb");
    let copy = store.with_file_name("store.redb.sources");
    let import = |env: &TestEnv| {
        env.pisess()
            .args(["--json", "import"])
            .arg(&dir)
            .output()
            .unwrap()
    };
    let field = |out: &std::process::Output, k: &str| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[k].clone()
    };
    let out = import(&env);
    assert!(out.status.success());
    assert_eq!(field(&out, "new"), 2);
    assert!(!copy.exists(), "a writing import leaves no copy");
    let out = import(&env);
    assert_eq!(field(&out, "unchanged"), 2);
    assert!(copy.exists(), "an unchanged import leaves the copy");

    let held = std::fs::File::open(&store).unwrap();
    held.lock().unwrap();
    let out = import(&env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(field(&out, "unchanged"), 2);
    std::fs::remove_file(&copy).unwrap();
    let out = import(&env);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the store is busy"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(held);

    let out = import(&env);
    assert_eq!(field(&out, "unchanged"), 2);
    assert!(copy.exists());
    let f = dir.join("02-small-branches.jsonl");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes.extend_from_slice(b"{\"type\":\"label\",\"id\":\"cafe0001\",\"parentId\":null,\"timestamp\":\"2026-07-26T09:10:00.000Z\",\"targetId\":\"cafe0001\",\"label\":\"x\"}\n");
    std::fs::write(&f, bytes).unwrap();
    let out = import(&env);
    assert!(out.status.success());
    assert_eq!(field(&out, "unchanged"), 1);
    assert!(
        !copy.exists(),
        "opening the store for writing removes the copy"
    );
}

/// Without arguments, `import`, `check` and `migrate` work on pi's session folder; on a machine
/// without one they take the samples and say so — but not when a variable names the folder and
/// it does not exist (a typo there used to fill the store with the demo sessions).
#[test]
fn a_session_folder_named_by_a_variable_must_exist() {
    let env = TestEnv::new();
    let missing = env.home.path().join("no-such-folder");
    for var in ["PI_CODING_AGENT_SESSION_DIR", "PI_CODING_AGENT_DIR"] {
        for args in [&["import"][..], &["check"], &["migrate"]] {
            let out = env.pisess().env(var, &missing).args(args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{var} {args:?}: {err}");
            assert!(err.contains(&format!("(from ${var})")), "{err}");
            assert!(err.contains("no-such-folder"), "{err}");
            assert!(!err.contains("sample"), "{err}");
        }
    }
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // No variable and no ~/.pi: the samples, said on stderr.
    let out = env.pisess().arg("import").output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("importing the samples"), "{err}");
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    let samples = std::fs::read_dir(fixture("sessions"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "jsonl")
        })
        .count();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        samples
    );
}

/// pi's `sessionDir` setting (global `<agent dir>/settings.json`, the project's
/// `.pi/settings.json` over it, `$PI_CODING_AGENT_SESSION_DIR` over both) names the folder
/// that `import`, `fork` and `@latest` use, as pi's command line uses it: pisess read only the
/// variable and the default folder, so a user with the setting had the wrong sessions indexed.
#[test]
fn pis_session_dir_setting_names_the_folder() {
    let env = TestEnv::new();
    let home = env.home.path();
    let work = tempfile::tempdir().unwrap();
    let project = std::fs::canonicalize(work.path()).unwrap();
    let project_s = project.to_str().unwrap();
    std::fs::create_dir_all(home.join(".pi/agent")).unwrap();
    std::fs::write(
        home.join(".pi/agent/settings.json"),
        "{\"theme\": \"dark\", \"sessionDir\": \"~/pi-flat\"}",
    )
    .unwrap();
    let flat = home.join("pi-flat");
    std::fs::create_dir_all(&flat).unwrap();
    // One session of this project (its header's cwd changed), one of another.
    let text = std::fs::read_to_string(fixture("sessions/01-tiny.jsonl")).unwrap();
    let (head, body) = text.split_once('\n').unwrap();
    let mut header: serde_json::Value = serde_json::from_str(head).unwrap();
    header["cwd"] = serde_json::Value::String(project_s.to_owned());
    let mine = flat.join("mine.jsonl");
    std::fs::write(&mine, format!("{header}\n{body}")).unwrap();
    std::fs::copy(
        fixture("sessions/04-many-branches.jsonl"),
        flat.join("other.jsonl"),
    )
    .unwrap();
    let in_project = |args: &[&str]| {
        env.pisess()
            .args(args)
            .current_dir(&project)
            .output()
            .unwrap()
    };
    let out = in_project(&["import"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("importing pi's session folder {}", flat.display())),
        "{err}"
    );
    let out = in_project(&["--json", "ls"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);

    // @latest: the newest session of this project in the shared folder.
    let out = in_project(&["--json", "log", "@latest", "-n", "1"]);
    assert!(out.status.success(), "{out:?}");
    let mine_s = mine.to_str().unwrap();
    let want = in_project(&["--json", "log", mine_s, "-n", "1"]);
    assert_eq!(out.stdout, want.stdout);

    // fork writes into the shared folder, not a per-project one.
    let out = in_project(&["fork", mine_s, "@leaf"]);
    assert!(out.status.success(), "{out:?}");
    let forked = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end());
    assert_eq!(forked.parent().unwrap(), flat.canonicalize().unwrap());

    // The project's setting wins; a folder it names that does not exist is an error naming it.
    std::fs::create_dir_all(project.join(".pi")).unwrap();
    let local = project.join(".pi/settings.json");
    std::fs::write(&local, "{\"sessionDir\": \"here\"}").unwrap();
    let out = in_project(&["import"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("(from sessionDir in {})", local.display())),
        "{err}"
    );
    // Relative to the current folder, as pi leaves it.
    std::fs::create_dir_all(project.join("here")).unwrap();
    let out = in_project(&["import"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("importing pi's session folder here"), "{err}");
    // fork, run from elsewhere, writes where pi started in the session's folder would: that
    // folder's project setting, relative to it.
    let out = env
        .pisess()
        .args(["fork", mine_s, "@leaf"])
        .current_dir(home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let forked = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end());
    assert_eq!(forked.parent().unwrap(), project.join("here"));

    // A `file://` URL in the variable is its path, as pi's normalizePath reads it.
    let out = env
        .pisess()
        .env(
            "PI_CODING_AGENT_SESSION_DIR",
            format!("file://{}", flat.display()),
        )
        .arg("import")
        .current_dir(&project)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("importing pi's session folder {}", flat.display())),
        "{err}"
    );

    // The variable wins over both settings.
    let missing = home.join("no-such-folder");
    let out = env
        .pisess()
        .env("PI_CODING_AGENT_SESSION_DIR", &missing)
        .arg("import")
        .current_dir(&project)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("(from $PI_CODING_AGENT_SESSION_DIR)"), "{err}");

    // A project `sessionDir: null` overrides the global one (pi merges the keys): the default
    // folder, absent here, so the samples.
    std::fs::write(&local, "{\"sessionDir\": null}").unwrap();
    let out = in_project(&["import"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("importing the samples"), "{err}");
}

/// `import FILE` of a session file that was deleted marks its session gone (as `git add` of a
/// deleted file stages the removal): it failed ("No such file") and left the session live.
/// A path the store never knew, or a session already gone, still fails.
#[test]
fn importing_a_deleted_file_by_name_marks_its_session_gone() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("a.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    assert!(
        env.pisess()
            .args(["import", f])
            .output()
            .unwrap()
            .status
            .success()
    );
    std::fs::remove_file(&file).unwrap();
    // A command that writes to the session refreshes it on the fly: that fails as before and
    // marks nothing (the import of a deleted file it made panicked for a while).
    let out = env
        .pisess()
        .args(["compact", "019fa7f3", "--keep", "1000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("No such file"), "{err}");
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    // Named through a relative path, from its folder.
    let out = env
        .pisess()
        .args(["import", "a.jsonl"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(text.contains("gone: 1 session"), "{text}");
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert!(out.stdout.is_empty(), "{out:?}");
    for _ in 0..2 {
        let out = env.pisess().args(["import", f]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("No such file"), "{err}");
        let other = dir.join("never.jsonl");
        let out = env
            .pisess()
            .args(["import", other.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
    }
}

/// A file named twice — by its path and inside a folder also given, or through a link — is
/// imported and counted once; a folder that was deleted while it is the current one fails with
/// a message instead of importing nothing in silence.
#[test]
fn a_file_named_twice_counts_once_and_a_deleted_folder_is_reported() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        fixture("sessions/04-many-branches.jsonl"),
        dir.join("a.jsonl"),
    )
    .unwrap();
    std::os::unix::fs::symlink(dir.join("a.jsonl"), env.home.path().join("link.jsonl")).unwrap();
    let summary = |out: &std::process::Output| -> serde_json::Value {
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(text.lines().last().unwrap()).unwrap()
    };
    let out = env
        .pisess()
        .args([
            "--json",
            "import",
            "s/a.jsonl",
            "s",
            "link.jsonl",
            "./s/../s/a.jsonl",
        ])
        .current_dir(env.home.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let s = summary(&out);
    assert_eq!(
        (s["new"].as_u64(), s["unchanged"].as_u64()),
        (Some(1), Some(0)),
        "{s}"
    );
    let out = env
        .pisess()
        .args(["--json", "import", "s", "s/a.jsonl"])
        .current_dir(env.home.path())
        .output()
        .unwrap();
    let s = summary(&out);
    assert_eq!(
        (s["new"].as_u64(), s["unchanged"].as_u64()),
        (Some(0), Some(1)),
        "{s}"
    );
    // The current folder deleted under the process.
    let gone = env.home.path().join("gone");
    std::fs::create_dir_all(&gone).unwrap();
    let script = r#"cd "$0" && rmdir "$0" && exec "$1" import ."#;
    let out = env
        .pisess_wrapped(&["sh", "-c", script, gone.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot resolve this folder"), "{err}");
}

/// A project folder in pi's session folder that is a symbolic link is read (pi's listing
/// takes `isDirectory() || isSymbolicLink()`), by `import` and `check` alike, and a session
/// whose file left it is marked gone; links deeper down are still not followed.
#[test]
fn a_linked_project_folder_is_read_as_pi_lists_it() {
    let env = TestEnv::new();
    let home = env.home.path();
    let sessions = home.join(".pi/agent/sessions");
    let elsewhere = home.join("synced/--work-proj--");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), elsewhere.join("a.jsonl")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, sessions.join("--work-proj--")).unwrap();
    // A link back to the folder itself is not read again.
    std::os::unix::fs::symlink(&sessions, sessions.join("again")).unwrap();
    let out = env.pisess().arg("import").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.contains("--work-proj--"), "{listed}");
    let out = env.pisess().arg("check").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{err}");
    assert!(text.contains("checked 1 file(s): 1 clean"), "{text}");
    // prune --sessions counts it as in pi's folder (pi lists it).
    let out = env
        .pisess()
        .args(["prune", "--sessions", "--older-than", "1d", "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(!text.contains("outside pi's session folder"), "{text}");
    // The same link in a folder that is not pi's is not followed (as rg and git do not).
    let other = home.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::os::unix::fs::symlink(&elsewhere, other.join("link")).unwrap();
    let out = env
        .pisess()
        .args(["--json", "import", other.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"new\":0,") && text.contains("\"unchanged\":0,"),
        "{text}"
    );

    std::fs::remove_file(elsewhere.join("a.jsonl")).unwrap();
    let out = env.pisess().arg("import").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gone: 1 session"), "{text}");

    // A linked folder moved away (the link dangles): its sessions are gone too.
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), elsewhere.join("b.jsonl")).unwrap();
    assert!(
        env.pisess()
            .arg("import")
            .output()
            .unwrap()
            .status
            .success()
    );
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    std::fs::rename(&elsewhere, home.join("synced/moved")).unwrap();
    let out = env.pisess().arg("import").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gone: 1 session"), "{text}");
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert!(out.stdout.is_empty(), "{out:?}");

    // Through two links (pi's folder → hop → the real folder), the real folder deleted.
    let real = home.join("real2");
    std::fs::create_dir_all(&real).unwrap();
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), real.join("c.jsonl")).unwrap();
    std::os::unix::fs::symlink(&real, home.join("hop")).unwrap();
    std::os::unix::fs::symlink(home.join("hop"), sessions.join("--hop--")).unwrap();
    assert!(
        env.pisess()
            .arg("import")
            .output()
            .unwrap()
            .status
            .success()
    );
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    // Read the same from a folder whose project settings name another session folder: the
    // links of ~/.pi/agent/sessions do not depend on where pisess runs.
    let proj = home.join("proj");
    std::fs::create_dir_all(proj.join(".pi")).unwrap();
    std::fs::write(proj.join(".pi/settings.json"), "{\"sessionDir\": \"/x\"}").unwrap();
    let out = env
        .pisess()
        .env("PISESS_STORE", home.join("other.redb"))
        .args(["--json", "import", sessions.to_str().unwrap()])
        .current_dir(&proj)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"new\":1,"), "{text}");
    std::fs::remove_dir_all(&real).unwrap();
    let out = env.pisess().arg("import").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("gone: 1 session"), "{text}");
}

/// Two symbolic links in pi's folder to one project folder, and a third to a folder inside
/// it: each file is imported and checked once (it was counted once per link).
#[test]
fn a_folder_linked_twice_from_pis_folder_is_read_once() {
    let env = TestEnv::new();
    let home = env.home.path();
    let sessions = home.join(".pi/agent/sessions");
    let elsewhere = home.join("synced/--work-proj--");
    std::fs::create_dir_all(&sessions).unwrap();
    std::fs::create_dir_all(elsewhere.join("nested")).unwrap();
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), elsewhere.join("a.jsonl")).unwrap();
    std::fs::copy(
        fixture("sessions/02-small-branches.jsonl"),
        elsewhere.join("nested/b.jsonl"),
    )
    .unwrap();
    std::os::unix::fs::symlink(&elsewhere, sessions.join("--work-proj--")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, sessions.join("--work-proj-again--")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("nested"), sessions.join("--a-nested--")).unwrap();
    let out = env.pisess().args(["--json", "import"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"new\":2,"), "{text}");
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let out = env.pisess().arg("check").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("checked 2 file(s): 2 clean"), "{text}");
    // Unchanged the next time, and nothing is taken for gone.
    let out = env.pisess().args(["--json", "import"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"new\":0,")
            && text.contains("\"unchanged\":2,")
            && !text.contains("\"gone\":1"),
        "{text}"
    );
}

/// `fork`'s default folder for a session whose header `cwd` starts with `~`: pi resolves the
/// cwd (`resolvePath`: `~` expanded) before naming the folder; pisess named it with the `~`.
#[test]
fn a_fork_of_a_session_with_a_tilde_cwd_goes_where_pi_puts_it() {
    let env = TestEnv::new();
    let home = env.home.path();
    let text = std::fs::read_to_string(fixture("sessions/04-many-branches.jsonl")).unwrap();
    let (head, body) = text.split_once('\n').unwrap();
    let mut header: serde_json::Value = serde_json::from_str(head).unwrap();
    header["cwd"] = serde_json::Value::String("~/x".to_owned());
    let file = home.join("t.jsonl");
    std::fs::write(&file, format!("{header}\n{body}")).unwrap();
    let out = env
        .pisess()
        .args(["fork", file.to_str().unwrap(), "@leaf"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let forked = std::path::PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end());
    let home_s = home.to_str().unwrap();
    let name = format!("--{}-x--", home_s.trim_start_matches('/').replace('/', "-"));
    assert_eq!(
        forked.parent().unwrap(),
        std::fs::canonicalize(home.join(".pi/agent/sessions").join(name)).unwrap()
    );
    // Its header's cwd is resolved the same way (pi's forkFrom: `resolvePath(targetCwd)`).
    let text = std::fs::read_to_string(&forked).unwrap();
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["cwd"], format!("{home_s}/x"));
}

/// A re-import of a folder from which a session file was removed says so in its human summary
/// too (only `--json` had `gone`), as rsync and git say what left.
#[test]
fn an_import_says_which_sessions_left_the_folder() {
    let env = TestEnv::new();
    let dir = env.home.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    for n in ["01-tiny", "04-many-branches"] {
        std::fs::copy(
            fixture(&format!("sessions/{n}.jsonl")),
            dir.join(format!("{n}.jsonl")),
        )
        .unwrap();
    }
    let d = dir.to_str().unwrap();
    let out = env.pisess().args(["import", d]).output().unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("gone"));
    std::fs::remove_file(dir.join("01-tiny.jsonl")).unwrap();
    let out = env.pisess().args(["import", d]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("gone: 1 session whose file is no longer in the folder"),
        "{text}"
    );
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

/// A session whose file left the folder is left out by every listing, `files` included: a
/// file moved within the folder has its hits listed once (under its new path), not twice; a
/// deleted one has none; and a file replaced by a folder or a FIFO of its name has left too
/// (it was kept live for ever before: the scan never reads such a thing). Each answer equals a
/// fresh import's of the same folder.
#[test]
fn a_session_whose_file_left_is_left_out_by_files_too() {
    let env = TestEnv::new();
    let dir = env.home.path().join("sessions");
    std::fs::create_dir_all(&dir).unwrap();
    for n in [
        "03-compactions",
        "04-many-branches",
        "05-context-edits-labels",
    ] {
        std::fs::copy(
            fixture(&format!("sessions/{n}.jsonl")),
            dir.join(format!("{n}.jsonl")),
        )
        .unwrap();
    }
    let d = dir.to_str().unwrap();
    let fresh = env.home.path().join("fresh.redb");
    // The answers of the store, and of a fresh import of the folder as it is now.
    let answers = |store: &Path| -> Vec<String> {
        let q = |args: &[&str]| {
            let (code, out, err) = crate::common::run_with_store(&env, store, args);
            assert!(code == 0 || code == 1, "{args:?}: {err}");
            out
        };
        let mut v = vec![
            q(&["--json", "files", "/**"]),
            q(&["files", "-c", "/**"]),
            q(&["--json", "ls"]),
            q(&["--json", "stats"]),
        ];
        // Hits come in store order (which differs after a move): compare them sorted.
        let mut hits: Vec<&str> = v[0].lines().collect();
        hits.sort_unstable();
        v[0] = hits.join("\n");
        v
    };
    let step = |what: &str| {
        let r = crate::common::run(&env, &["import", d]);
        assert_eq!(r.code, 0, "{what}: {}", r.stderr);
        let _ = std::fs::remove_file(&fresh);
        let out = env
            .pisess()
            .env("PISESS_STORE", &fresh)
            .args(["import", d])
            .output()
            .unwrap();
        assert!(out.status.success(), "{what}");
        let (got, want) = (
            answers(&env.home.path().join("store.redb")),
            answers(&fresh),
        );
        assert!(!want[0].is_empty(), "{what}: no hits");
        for (g, w) in got.iter().zip(&want) {
            let (gl, wl) = (g.lines().count(), w.lines().count());
            let first = g.lines().zip(w.lines()).find(|(a, b)| a != b);
            assert!(
                g == w,
                "{what}: {gl} lines, a fresh import {wl}; first difference {first:?}"
            );
        }
    };
    step("first import");
    std::fs::rename(dir.join("03-compactions.jsonl"), dir.join("moved.jsonl")).unwrap();
    step("a file moved within the folder");
    std::fs::remove_file(dir.join("moved.jsonl")).unwrap();
    step("a file deleted");
    let fifo = dir.join("04-many-branches.jsonl");
    std::fs::remove_file(&fifo).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::remove_file(dir.join("05-context-edits-labels.jsonl")).unwrap();
    std::fs::create_dir(dir.join("05-context-edits-labels.jsonl")).unwrap();
    std::fs::copy(
        fixture("sessions/03-compactions.jsonl"),
        dir.join("05-context-edits-labels.jsonl/inner.jsonl"),
    )
    .unwrap();
    step("files replaced by a FIFO and a folder");
    let r = crate::common::run(&env, &["--json", "ls"]);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stdout.contains("inner.jsonl"), "{}", r.stdout);
}

/// `ls` on a store that holds no session (a first run, or a mistyped `$PISESS_STORE`) says
/// which store it read and how to fill it, on stderr, and lists nothing.
#[test]
fn ls_of_an_empty_store_names_it() {
    let env = TestEnv::new();
    // An import of an empty folder makes the store.
    let empty = env.home.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(
        crate::common::run(&env, &["import", empty.to_str().unwrap()]).code,
        0
    );
    let r = crate::common::run(&env, &["ls"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let store = env.home.path().join("store.redb");
    assert!(
        r.stderr.contains(&format!(
            "the store {} holds no sessions yet",
            store.display()
        )),
        "{}",
        r.stderr
    );
    let r = crate::common::run(&env, &["--json", "ls"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
}

/// A session file cut short (a byte prefix of what the store holds: a truncation, an old copy
/// put back) is not read over the store's copy, which may be the only one of the lost entries:
/// the import fails for that file and says so, commands use the stored session with a warning,
/// and `import --full` takes the file as it is. An in-place prune whose output is a prefix of
/// its source (every dropped entry after the last kept one) still updates the store.
#[test]
fn a_file_cut_short_does_not_replace_the_stored_session() {
    let env = TestEnv::new();
    let (dir, f, full, id) = imported_copy(&env);
    let fs_ = f.to_str().unwrap();
    let run = |args: &[&str]| crate::common::run(&env, args);

    // Cut in the middle of a line.
    let cut = full.len() / 2;
    std::fs::write(&f, &full[..cut]).unwrap();
    let r = run(&["import", dir.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("was cut short"), "{}", r.stderr);
    assert!(
        r.stderr.contains("import --full replaces it"),
        "{}",
        r.stderr
    );
    for named in [id.as_str(), fs_] {
        let out = env.pisess().args(["export", named]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == full, "{named}: the store's copy was replaced");
    }
    // An in-place prune does not take the cut file either: it is left alone, the store too.
    let r = run(&["prune", fs_, "--keep-leaf", "--in-place"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("was cut short"), "{}", r.stderr);
    assert!(std::fs::read(&f).unwrap() == full[..cut]);
    assert!(!dir.join("b.jsonl.bak").exists());
    let warned = run(&["export", &id]);
    assert!(
        warned.stderr.contains("using the copy in the store"),
        "{}",
        warned.stderr
    );

    // Cut to nothing, or inside its session line: what is left is no session, which
    // `--full` cannot read either; the advice says so and names `export`, which gives the
    // stored copy back.
    let header_len = full.iter().position(|&b| b == b'\n').unwrap();
    for left in [0, header_len / 2] {
        std::fs::write(&f, &full[..left]).unwrap();
        let r = run(&["import", fs_]);
        assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("holds no session line")
                && r.stderr.contains("pisess export FILE -o OUT")
                && !r.stderr.contains("import --full replaces it"),
            "{left} bytes: {}",
            r.stderr
        );
        assert_eq!(run(&["import", "--full", fs_]).code, 2, "{left} bytes");
        let out = env.pisess().args(["export", fs_]).output().unwrap();
        assert!(
            out.stdout == full,
            "{left} bytes: export is not the stored copy"
        );
    }
    std::fs::write(&f, &full[..cut]).unwrap();

    // Taken as it is on request.
    let r = run(&["import", "--full", fs_]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = env.pisess().args(["export", &id]).output().unwrap();
    assert!(
        out.stdout == full[..cut],
        "import --full did not take the file"
    );

    // An in-place prune that keeps only an early entry writes a prefix of its source.
    std::fs::write(&f, &full).unwrap();
    assert_eq!(run(&["import", "--full", fs_]).code, 0);
    let second = String::from_utf8_lossy(&full)
        .lines()
        .nth(2)
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].clone())
        .unwrap();
    let second = second.as_str().unwrap();
    let r = run(&["prune", fs_, "--keep", second, "--in-place", "--no-backup"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let pruned = std::fs::read(&f).unwrap();
    assert!(full.starts_with(&pruned) && pruned.len() < full.len());
    let out = env.pisess().args(["export", &id]).output().unwrap();
    assert!(
        out.stdout == pruned,
        "the store did not take the pruned file"
    );
    // A file that lost only its final newline loses no entry: it is read as it is.
    std::fs::write(&f, &pruned[..pruned.len() - 1]).unwrap();
    let r = run(&["import", fs_]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let out = env.pisess().args(["export", &id]).output().unwrap();
    assert!(out.stdout == pruned[..pruned.len() - 1]);
    let v = run(&["verify"]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
}

/// A folder `s` in the test's home holding `b.jsonl`, a copy of 02-small-branches, imported:
/// (the folder, the file, its bytes, its session id).
fn imported_copy(env: &TestEnv) -> (std::path::PathBuf, std::path::PathBuf, Vec<u8>, String) {
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("b.jsonl");
    let full = std::fs::read(fixture("sessions/02-small-branches.jsonl")).unwrap();
    std::fs::write(&f, &full).unwrap();
    let run = |args: &[&str]| crate::common::run(env, args);
    let r = run(&["import", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let listed: serde_json::Value =
        serde_json::from_str(run(&["--json", "ls"]).stdout.lines().next().unwrap()).unwrap();
    let id = listed["id"].as_str().unwrap().to_owned();
    (dir, f, full, id)
}

/// A session file overwritten with something that is no session (here a Markdown export),
/// named by path: the command fails, and its hint names the session the store still holds for
/// that path and the `export` that writes it out, which gives back the old bytes.
#[test]
fn a_session_file_overwritten_with_no_session_points_to_the_stored_copy() {
    let env = TestEnv::new();
    let (_dir, f, full, id) = imported_copy(&env);
    let fs_ = f.to_str().unwrap();
    std::fs::write(&f, "# a Markdown export\n\nnot a session\n").unwrap();
    let r = crate::common::run(&env, &["log", fs_, "-n", "1"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("`pisess export {id} -o FILE`")),
        "{}",
        r.stderr
    );
    let back = env.home.path().join("back.jsonl");
    let r = crate::common::run(&env, &["export", &id, "-o", back.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(std::fs::read(&back).unwrap(), full);
}

/// A session named by id whose file is gone (deleted, or replaced by a folder) is answered
/// from the store, with a warning naming the file; writing to it is refused, naming the file;
/// once the file is back it is read again, without a warning.
#[test]
fn a_session_whose_file_is_gone_is_answered_from_the_store_with_a_warning() {
    let env = TestEnv::new();
    let (dir, f, full, id) = imported_copy(&env);
    let run = |args: &[&str]| crate::common::run(&env, args);
    let leaf = run(&["show", &id, "@leaf", "--json"]).stdout;
    let warning = format!("warning: {}, the session's file, ", f.display());

    std::fs::remove_file(&f).unwrap();
    for args in [vec!["show", &id, "@leaf", "--json"], vec!["log", &id]] {
        let r = run(&args);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "{warning}is gone; answering from the copy in the store"
            )),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert_eq!(run(&["show", &id, "@leaf", "--json"]).stdout, leaf);
    let out = env.pisess().args(["export", &id]).output().unwrap();
    assert!(out.stdout == full, "the stored bytes were not exported");
    // Writing needs the file: refused, naming it, and nothing is created.
    let r = run(&[
        "navigate",
        &id,
        "@root",
        "--summarize",
        "--summarizer",
        "echo S",
    ]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("cannot append to {}: ", f.display())),
        "{}",
        r.stderr
    );
    assert!(!f.exists());

    // Something else in its place.
    std::fs::create_dir(&f).unwrap();
    let r = run(&["log", &id]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("{warning}is not a regular file")),
        "{}",
        r.stderr
    );
    std::fs::remove_dir(&f).unwrap();

    // A folder import marks it gone; once back, it is read again without a warning.
    assert_eq!(run(&["import", dir.to_str().unwrap()]).code, 0);
    assert!(run(&["log", &id]).stderr.contains(&warning));
    std::fs::write(&f, &full).unwrap();
    let r = run(&["log", &id]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    assert!(
        run(&["--json", "ls"]).stdout.contains(&id),
        "not listed again"
    );
    let v = run(&["verify"]);
    assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
}

/// `prune --in-place` interrupted after it put the pruned file in place (a prefix of the
/// source when it kept an early entry) and before it imported it: FILE.bak holds the bytes the
/// store holds, so the file cut short loses nothing and the next import takes it (before, every
/// import refused it as cut short until `import --full`). A FILE.bak with other bytes does not
/// count.
#[test]
fn a_file_cut_short_whose_backup_holds_the_stored_bytes_is_taken() {
    let env = TestEnv::new();
    let (dir, f, full, _) = imported_copy(&env);
    let bak = dir.join("b.jsonl.bak");
    let run = |args: &[&str]| crate::common::run(&env, args);
    let d = dir.to_str().unwrap();
    // A prefix of whole lines, as a prune that kept an early entry writes.
    let cut = full
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(5)
        .unwrap()
        .0
        + 1;
    std::fs::write(&f, &full[..cut]).unwrap();
    // A backup with other bytes (the same size) does not count.
    let mut other = full.clone();
    let last = other.len() - 2;
    other[last] = b' ';
    std::fs::write(&bak, &other).unwrap();
    let r = run(&["import", d]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("was cut short"), "{}", r.stderr);
    // The backup of what the store holds: the file is taken as it is.
    std::fs::write(&bak, &full).unwrap();
    let r = run(&["--json", "import", d]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("\"rewritten\":1"), "{}", r.stdout);
    let out = env
        .pisess()
        .args(["export", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.stdout == full[..cut], "the file was not taken");
    assert_eq!(std::fs::read(&bak).unwrap(), full, "the backup changed");
}

/// A store path that names a FIFO or a folder is refused at once, naming it (opening a FIFO
/// used to wait for a writer forever: `ls` and `import` hung).
#[test]
fn a_store_path_that_is_not_a_file_is_refused_at_once() {
    let env = TestEnv::new();
    let fifo = env.home.path().join("fifo.redb");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let folder = env.home.path().join("folder.redb");
    std::fs::create_dir(&folder).unwrap();
    for (store, what) in [
        (&fifo, "not a regular file (a FIFO)"),
        (&folder, "not a regular file (a folder)"),
    ] {
        for args in [&["ls"][..], &["import", "--full"][..]] {
            let mut child = env
                .pisess_child()
                .env("PISESS_STORE", store)
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            let start = std::time::Instant::now();
            let status = loop {
                if let Some(s) = child.try_wait().unwrap() {
                    break s;
                }
                if start.elapsed().as_secs() > 60 {
                    child.kill().unwrap();
                    panic!("{args:?} on {}: still running after 60 s", store.display());
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            };
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            assert_eq!(status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("the store {} is {what}", store.display())),
                "{args:?}: {err}"
            );
        }
    }
}

/// `ls --json` gives `created` as pi's session list does: the header's timestamp read by
/// `new Date(…)` and written as `toISOString` (UTC, milliseconds), for every fixture and for
/// a header written with an offset (it used to print the header's text as it was).
#[test]
fn ls_gives_created_as_pis_session_list_does() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    for n in crate::common::V3 {
        std::fs::copy(
            fixture(&format!("sessions/{n}.jsonl")),
            dir.join(format!("{n}.jsonl")),
        )
        .unwrap();
    }
    let tiny = std::fs::read_to_string(fixture("sessions/01-tiny.jsonl")).unwrap();
    let header: serde_json::Value = serde_json::from_str(tiny.lines().next().unwrap()).unwrap();
    let stamp = header["timestamp"].as_str().unwrap();
    assert!(stamp.ends_with('Z'), "{stamp}");
    // The same instant two hours east, and the session under another id.
    let ms = pisess_engine::import::iso_to_ms(stamp).unwrap();
    let east = pisess_engine::export::ms_to_iso(ms + 2 * 3_600_000);
    let east = format!("{}+02:00", &east[..east.len() - 1]);
    let shifted = tiny
        .replacen(
            &format!("\"timestamp\":\"{stamp}\""),
            &format!("\"timestamp\":\"{east}\""),
            1,
        )
        .replacen(
            header["id"].as_str().unwrap(),
            "019fb766-0000-7000-8000-000000000001",
            1,
        );
    assert_ne!(shifted, tiny);
    std::fs::write(dir.join("offset.jsonl"), shifted).unwrap();
    let r = crate::common::run(&env, &["import", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let ours: std::collections::BTreeMap<String, serde_json::Value> =
        crate::common::run(&env, &["--json", "ls"])
            .stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| (v["file"].as_str().unwrap().to_owned(), v["created"].clone()))
            .collect();
    let theirs = crate::common::oracle(&["list", dir.to_str().unwrap()]);
    let theirs = theirs.as_array().unwrap();
    assert_eq!(theirs.len(), ours.len());
    for s in theirs {
        let file = s["path"].as_str().unwrap();
        assert_eq!(ours[file], s["created"], "{file}");
    }
    let want = pisess_engine::export::ms_to_iso(ms);
    assert_eq!(
        ours[&dir.join("offset.jsonl").display().to_string()],
        serde_json::json!(want)
    );
}

/// A v3 file read again to the same bytes — every file under `import --full`, or one whose
/// time changed — counts as unchanged, not rewritten (each used to count as rewritten), also
/// when it was read in appends while other files were imported between them (its rows' blocks
/// are then cut elsewhere than by one read); and the write is persisted: the next plain import
/// answers from a `stat`. A change that keeps the size counts as rewritten, and so does a v1/v2
/// file read again (its rows are its migrated copy, which does not keep every byte).
#[test]
fn a_file_read_again_to_the_same_bytes_counts_as_unchanged() {
    let env = TestEnv::new();
    let (dir, f, full, _) = imported_copy(&env);
    let run = |args: &[&str]| crate::common::run(&env, args);
    let d = dir.to_str().unwrap();
    let summary = |args: &[&str]| -> serde_json::Value {
        let r = run(args);
        assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
        serde_json::from_str(r.stdout.lines().last().unwrap()).unwrap()
    };
    let counts = |s: &serde_json::Value| {
        ["new", "grown", "unchanged", "rewritten"].map(|k| s[k].as_u64().unwrap())
    };
    // Another file imported after it, then a line appended to it: read as an append.
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), dir.join("t.jsonl")).unwrap();
    assert_eq!(counts(&summary(&["--json", "import", d])), [1, 0, 1, 0]);
    let text = String::from_utf8(full.clone()).unwrap();
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let leaf = last["id"].as_str().unwrap();
    let line = format!(
        "{{\"type\":\"label\",\"id\":\"zz000001\",\"parentId\":\"{leaf}\",\"timestamp\":\"2026-07-28T10:00:00.000Z\",\"targetId\":\"{leaf}\",\"label\":\"x\"}}\n"
    );
    let mut grown = full.clone();
    grown.extend_from_slice(line.as_bytes());
    std::fs::write(&f, &grown).unwrap();
    assert_eq!(counts(&summary(&["--json", "import", d])), [0, 1, 1, 0]);

    let s = summary(&["--json", "import", "--full", d]);
    assert_eq!(counts(&s), [0, 0, 2, 0], "{s}");
    assert!(s["bytes"].as_u64().unwrap() > grown.len() as u64, "{s}");

    // A new time, the same bytes: read again, unchanged; then the `stat` answers.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let s = summary(&["--json", "import", d]);
    assert_eq!(counts(&s), [0, 0, 2, 0], "{s}");
    assert_eq!(s["bytes"], grown.len() as u64, "{s}");
    let s = summary(&["--json", "import", d]);
    assert_eq!(counts(&s), [0, 0, 2, 0], "{s}");
    assert_eq!(s["bytes"], 0, "{s}");

    // One byte changed, the size kept: rewritten.
    let at = text.rfind("\"content\"").unwrap();
    let mut edited = grown.clone();
    let q = at + text[at..].find('a').unwrap();
    edited[q] = b'b';
    std::fs::write(&f, &edited).unwrap();
    let s = summary(&["--json", "import", "--full", d]);
    assert_eq!(counts(&s), [0, 0, 1, 1], "{s}");
    let out = env
        .pisess()
        .args(["export", f.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.stdout == edited, "the edit was not taken");

    // A v2 file read again: rewritten, as its stored rows are not its bytes.
    std::fs::copy(fixture("sessions/08-v2.jsonl"), dir.join("v.jsonl")).unwrap();
    assert_eq!(counts(&summary(&["--json", "import", d])), [1, 0, 2, 0]);
    assert_eq!(
        counts(&summary(&["--json", "import", "--full", d])),
        [0, 0, 2, 1]
    );
}

/// Commands that only read create no store where there is none (a mistyped `PISESS_STORE`
/// used to get its file and folders made by `ls`): they answer as from an empty store and say
/// where they looked; `verify` fails, as there is nothing to check. A command given a session
/// file still imports it, creating the store.
#[test]
fn a_reading_command_creates_no_store() {
    let env = TestEnv::new();
    let typo = env.home.path().join("typo");
    let store = typo.join("dir/store.redb");
    let run = |args: &[&str]| {
        let (code, stdout, stderr) = crate::common::run_with_store(&env, &store, args);
        crate::common::Run {
            code,
            stdout,
            stderr,
        }
    };
    let note = format!("there is no store at {} yet", store.display());
    for (args, code) in [
        (&["ls"][..], 0),
        (&["--json", "ls"][..], 0),
        (&["files", "src/a.rs"][..], 1),
        (&["grep", "foo"][..], 1),
        (&["stats"][..], 0),
        (&["prune", "--sessions", "--older-than", "30d"][..], 0),
    ] {
        let r = run(args);
        assert_eq!(r.code, code, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(&note), "{args:?}: {}", r.stderr);
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    let r = run(&["verify"]);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains(&format!("there is no store at {}", store.display())),
        "{}",
        r.stderr
    );
    assert!(!typo.exists(), "verify created {}", typo.display());
    // Nothing made in an existing folder either (not even the gate file).
    let here = env.home.path().join("here");
    std::fs::create_dir(&here).unwrap();
    let (code, ..) = crate::common::run_with_store(&env, &here.join("store.redb"), &["ls"]);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_dir(&here).unwrap().count(), 0);

    let session = fixture("sessions/01-tiny.jsonl");
    let r = run(&["log", session.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        store.is_file(),
        "a session file given is imported into a new store"
    );
    let r = run(&["ls"]);
    assert!(!r.stderr.contains("there is no store"), "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 2, "{}", r.stdout);
}

/// A session id held by two files, one of them deleted since the last import, names the one
/// left (the deleted one was listed as a choice, and the full id failed too).
#[test]
fn a_session_id_whose_other_file_was_deleted_names_the_one_left() {
    let env = TestEnv::new();
    let dir = env.home.path().join("g");
    std::fs::create_dir(&dir).unwrap();
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &a).unwrap();
    std::fs::copy(&a, &b).unwrap();
    let run = |args: &[&str]| crate::common::run(&env, args);
    assert_eq!(run(&["import", dir.to_str().unwrap()]).code, 0);
    let id = entries_header_id_of(&a);
    let r = run(&["log", &id, "-n", "1"]);
    assert_eq!(r.code, 2, "two files hold it: {}", r.stdout);
    assert!(r.stderr.contains("is ambiguous"), "{}", r.stderr);
    std::fs::remove_file(&b).unwrap();
    for arg in [&id[..8], id.as_str()] {
        let r = run(&["log", arg, "-n", "1"]);
        assert_eq!(r.code, 0, "{arg}: {}", r.stderr);
        assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    }
}

fn entries_header_id_of(file: &std::path::Path) -> String {
    let first = std::fs::read_to_string(file).unwrap();
    let v: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    v["id"].as_str().unwrap().to_owned()
}
