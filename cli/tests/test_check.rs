//! `pisess check` on the edge cases and the genuine files.

use crate::common::{TestEnv, fixture, realdata, run_until_the_reader_stops};

fn check(args: &[&std::path::Path]) -> (String, String, i32) {
    let env = TestEnv::new();
    let out = env.pisess().arg("check").args(args).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap(),
    )
}

#[test]
fn clean_file_exits_zero() {
    let (out, _, code) = check(&[&fixture("edge/unicode.jsonl")]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("checked 1 file(s): 1 clean"), "{out}");
}

#[test]
fn every_edge_problem_is_located() {
    let cases = [
        (
            "edge/cycle-parent-CRASHES-context.jsonl",
            ":2: warning: parent cycle of length 2",
        ),
        (
            "edge/duplicate-ids.jsonl",
            ":4: warning: duplicate id \"u1\" (first seen on line 2",
        ),
        ("edge/garbage.jsonl", ":1: error: not a pi session"),
        (
            "edge/header-not-first.jsonl",
            "error: not a pi session: the first JSON value is an object of type \"message\"",
        ),
        (
            "edge/leading-malformed-then-header.jsonl",
            ":1: warning: 1 unparsable line(s) before the header",
        ),
        (
            "edge/malformed-and-blank-lines.jsonl",
            ":5: warning: not valid JSON at column 2",
        ),
        (
            "edge/orphan-parent.jsonl",
            "parentId \"missing0\", which is not in the file",
        ),
        (
            "edge/partial-last-line.jsonl",
            ":4: warning: last line is cut short",
        ),
        (
            "edge/v2-missing-ids-tail.jsonl",
            ":3: warning: entry has no string id",
        ),
        (
            "edge/version-99-future.jsonl",
            ":1: warning: session version 99 is newer than 3",
        ),
        ("edge/empty.jsonl", "error: no JSON value in the file"),
        (
            "edge/compaction-firstkept-missing.jsonl",
            ":4: warning: compaction keeps entries from \"nope0000\", which no entry has: pi \
             keeps no message from before this compaction",
        ),
    ];
    for (file, want) in cases {
        let (out, _, code) = check(&[&fixture(file)]);
        assert_eq!(code, 1, "{file}: {out}");
        assert!(out.contains(want), "{file}: expected {want:?} in\n{out}");
    }
}

/// A file of junk lines only is no session: the problem is the whole file's, located at its
/// start (line 1, byte 0); it was given the last line's number with byte 0, a place that is
/// not one.
#[test]
fn a_file_of_junk_lines_is_located_at_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("junk.jsonl");
    std::fs::write(&f, "junk1\njunk2\njunk3\n").unwrap();
    let (out, _, code) = check(&[&f]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("junk.jsonl:1: error: not a pi session: no JSON value in 3 line(s) (byte 0)"),
        "{out}"
    );
}

/// A header `cwd` that is a `file://` URL Node refuses makes the session one pi cannot open:
/// `check` says so at the header, with Node's reason; a URL Node reads is no problem.
#[test]
fn a_header_cwd_that_is_a_refused_file_url_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, cwd: &str| {
        let f = dir.path().join(name);
        std::fs::write(
            &f,
            format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"s1\",\
                 \"timestamp\":\"2026-02-01T10:00:00.000Z\",\"cwd\":{cwd:?}}}\n"
            ),
        )
        .unwrap();
        f
    };
    let bad = write("bad.jsonl", "file://host/x");
    let (out, _, code) = check(&[&bad]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "bad.jsonl:1: warning: the header's cwd \"file://host/x\" is a file URL Node \
             cannot read (File URL host must be \"localhost\" or empty): pi cannot open this \
             session"
        ),
        "{out}"
    );
    let good = write("good.jsonl", "file://localhost/srv/p%20q");
    let (out, _, code) = check(&[&good]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn notes_alone_do_not_fail() {
    for file in [
        "edge/crlf.jsonl",
        "edge/multi-root.jsonl",
        "edge/no-final-newline.jsonl",
    ] {
        let (out, _, code) = check(&[&fixture(file)]);
        assert_eq!(code, 0, "{file}: {out}");
        assert!(out.contains(": note: "), "{file}: {out}");
    }
}

#[test]
fn glued_lines_in_genuine_files_are_reported() {
    let (out, _, code) = check(&[&realdata()]);
    assert_eq!(code, 1);
    assert!(out.contains("root-compact.v1.concat-line.jsonl:1013: warning: 2 JSON records glued on one line; recovered 2 of 2"), "{out}");
    assert!(
        out.contains("root-session.v1.concat-line.jsonl:440: warning: 2 JSON records glued"),
        "{out}"
    );
    assert!(out.contains("checked 7 file(s)"), "{out}");
}

#[test]
fn json_output_is_json_lines() {
    let env = TestEnv::new();
    let out = env
        .pisess()
        .args(["check", "--json"])
        .arg(fixture("edge/duplicate-ids.jsonl"))
        .output()
        .unwrap();
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.last().unwrap()["type"], "file");
    assert!(
        lines
            .iter()
            .any(|l| l["code"] == "duplicate-id" && l["line"] == 4)
    );
}

#[test]
fn unreadable_file_exits_two_after_the_others() {
    let (out, err, code) = check(&[
        std::path::Path::new("/nonexistent/x.jsonl"),
        &fixture("edge/unicode.jsonl"),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read /nonexistent/x.jsonl"), "{err}");
    assert!(out.contains("1 clean"), "{out}");
}

#[test]
fn input_files_are_not_changed() {
    let file = fixture("edge/no-final-newline.jsonl");
    let before = std::fs::read(&file).unwrap();
    check(&[&file]);
    assert_eq!(std::fs::read(&file).unwrap(), before);
}

#[test]
fn no_input_panics() {
    let (_, err, _) = check(&[&fixture("edge"), &fixture("sessions"), &realdata()]);
    assert!(!err.contains("panicked"), "{err}");
}

/// A record cut short whose data holds a complete message (`fixtures/bad/torn-nested.jsonl`,
/// line 3): no entry comes out of it — not in check, the tree, a branch export or prune — and
/// it is reported as a malformed line with its line and byte. The torn write followed by a good
/// record (line 5) and the glued records (line 6) are still recovered.
#[test]
fn nothing_nested_in_a_torn_record_becomes_an_entry() {
    let file = fixture("bad/torn-nested.jsonl");
    let (out, _, code) = check(&[&file]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "torn-nested.jsonl:3: warning: not valid JSON at column 280: EOF while parsing an \
             object (line skipped) (byte 309)"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "torn-nested.jsonl:5: warning: 1 JSON record and 1 broken or cut-short piece on \
             one line; 1 recovered, 134 bytes skipped (nothing inside the piece read as a \
             record; pi drops the whole line)"
        ),
        "{out}"
    );
    assert!(
        out.contains("torn-nested.jsonl:5: warning: 134 bytes here are no complete JSON record"),
        "{out}"
    );
    assert!(
        out.contains(
            "torn-nested.jsonl:6: warning: 2 JSON records glued on one line; recovered 2 of 2"
        ),
        "{out}"
    );

    let env = TestEnv::new();
    let run = |args: &[&std::ffi::OsStr]| env.pisess().args(args).output().unwrap();
    let f = file.as_os_str();
    let tree = run(&["tree".as_ref(), "--json".as_ref(), f]);
    assert!(tree.status.success());
    let tree: serde_json::Value = serde_json::from_slice(&tree.stdout).unwrap();
    let ids: Vec<&str> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["t0000001", "t0000003", "t0000005", "t0000006", "t0000007"]
    );

    let export = run(&[
        "export".as_ref(),
        f,
        "--branch".as_ref(),
        "t0000007".as_ref(),
    ]);
    assert!(export.status.success());
    let text = String::from_utf8(export.stdout).unwrap();
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(
        !text.contains("INJECTED") && !text.contains("t0000002"),
        "{text}"
    );

    for args in [
        ["export".as_ref(), f, "--branch".as_ref(), "zz".as_ref()],
        ["prune".as_ref(), f, "--keep".as_ref(), "zz".as_ref()],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("no entry"),
            "{args:?}"
        );
    }
}

/// `pisess check | head` on a file with far more problems than a pipe holds: the reader
/// stops early, nothing is said on stderr, and the status is still 1 for the problems
/// already shown (text and JSON), never the 0 of a clean check.
#[test]
fn a_reader_that_stops_early_keeps_the_problems_status() {
    let env = TestEnv::new();
    let f = env.home.path().join("bad.jsonl");
    let mut text = String::from(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    );
    text.push('\n');
    for i in 0..5_000 {
        text.push_str(&format!("{{\"broken line {i}\n"));
    }
    std::fs::write(&f, text).unwrap();
    for json in [false, true] {
        let mut cmd = env.pisess_child();
        if json {
            cmd.arg("--json");
        }
        cmd.args(["check", "--max-per-kind", "0"]).arg(&f);
        let whole = cmd.output().unwrap();
        assert_eq!(whole.status.code(), Some(1), "json {json}");
        assert!(
            whole.stdout.len() > 256 << 10,
            "{} bytes",
            whole.stdout.len()
        );
        let (code, err) = run_until_the_reader_stops(&mut cmd);
        assert_eq!(code, Some(1), "json {json}");
        assert!(err.is_empty(), "{err}");
    }
}

/// A field serde_json cannot read is named with the column in its line: the position serde
/// gives ("at line 1 column N") was printed beside the file's line as if it were another line,
/// and the entry's type, when it cannot be read either, as `?`.
#[test]
fn a_bad_field_is_placed_by_its_column_in_the_line() {
    let (out, _, code) = check(&[&fixture("bad/numbers-beyond-f64.jsonl")]);
    assert_eq!(code, 1, "{out}");
    let line = out
        .lines()
        .find(|l| l.contains(":2:"))
        .unwrap_or_else(|| panic!("no problem on line 2: {out}"));
    assert!(
        line.contains("entry has a bad field: number out of range at column "),
        "{line}"
    );
    assert!(
        !line.contains("at line 1") && !line.contains("? entry"),
        "{line}"
    );
}

/// A file that starts with a byte order mark is one pi cannot load (its first line is not
/// JSON to `JSON.parse`): `check` warns (exit 1), though pisess reads it.
#[test]
fn a_byte_order_mark_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("bom.jsonl");
    let mut bytes = b"\xef\xbb\xbf".to_vec();
    bytes.extend(std::fs::read(fixture("sessions/01-tiny.jsonl")).unwrap());
    std::fs::write(&f, bytes).unwrap();
    let (out, err, code) = check(&[&f]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("warning: UTF-8 byte order mark")
            && out.contains("pi cannot read the first line"),
        "{out}"
    );
}

#[test]
fn the_summary_counts_in_the_singular_for_one() {
    let (out, _, code) = check(&[&fixture("edge/cycle-parent-CRASHES-context.jsonl")]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("1 with problems, 0 unreadable (0 errors, 1 warning, 0 notes)"),
        "{out}"
    );
}

/// pi migrates a v1 file on load, so the tree problems of its migrated copy are the file's:
/// a compaction whose old `firstKeptEntryId` names no entry (the index names none), or whose
/// index names an entry off its path, keeps no message from before it. `check` of the v1 file
/// said nothing of either (its records have no ids to check); it now reports what `check` of
/// the migrated copy reports, at the v1 file's own line and byte.
#[test]
fn a_v1_files_tree_problems_are_those_of_its_migration() {
    let env = TestEnv::new();
    let v1 = env.home.path().join("v1stale.jsonl");
    let lines = [
        r#"{"type":"session","id":"v1s","timestamp":"2026-02-01T10:00:00.000Z","cwd":"/p"}"#,
        "not json",
        r#"{"type":"message","timestamp":"2026-02-01T10:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
        r#"{"type":"compaction","timestamp":"2026-02-01T10:00:02.000Z","summary":"s","firstKeptEntryId":"stale123","tokensBefore":5}"#,
        r#"{"type":"message","timestamp":"2026-02-01T10:00:03.000Z","message":{"role":"user","content":"b","timestamp":3}}"#,
    ];
    std::fs::write(&v1, lines.join("\n") + "\n").unwrap();
    let (out, _, code) = check(&[&v1]);
    assert_eq!(code, 1, "{out}");
    let at = lines[..3].iter().map(|l| l.len() + 1).sum::<usize>();
    assert!(
        out.contains(&format!(
            "v1stale.jsonl:4: warning: compaction keeps entries from \"stale123\", which no entry \
             has: pi keeps no message from before this compaction (byte {at})"
        )),
        "{out}"
    );
    // The genuine file whose glued last line holds a compaction naming itself by index.
    let (out, _, _) = check(&[&realdata().join("pimono__root-compact.v1.concat-line.jsonl")]);
    assert!(
        out.contains("concat-line.jsonl:1013: warning: compaction keeps entries from")
            && out.contains("which is not on its path"),
        "{out}"
    );
    // A clean v1 file stays clean.
    let (out, _, code) = check(&[&fixture("sessions/07-v1.jsonl")]);
    assert_eq!(code, 0, "{out}");
    // A problem both the file's own records and its migration show is reported once.
    let label = env.home.path().join("v1label.jsonl");
    std::fs::write(
        &label,
        format!(
            "{}\n{}\n{}\n",
            lines[0],
            lines[2],
            r#"{"type":"label","id":"l1","targetId":"nope","label":"x","timestamp":"2026-02-01T10:00:02.000Z"}"#
        ),
    )
    .unwrap();
    let (out, _, _) = check(&[&label]);
    assert_eq!(out.matches("label for \"nope\"").count(), 1, "{out}");
}

/// Problems are listed in file order: the junk before the header (named only once the header
/// is found, after the header line's own notes) and the tree checks (made at the end) came
/// out of line order.
#[test]
fn problems_are_listed_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("order.jsonl");
    let text = concat!(
        "garbage\n",
        "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/p\"}\r\n",
        "{\"type\":\"message\",\"id\":\"a\",\"parentId\":\"gone\",\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"x\",\"timestamp\":1}}\n",
        "not json\n",
    );
    std::fs::write(&f, text).unwrap();
    let (out, _, code) = check(&[&f]);
    assert_eq!(code, 1, "{out}");
    let lines: Vec<u64> = out
        .lines()
        .filter_map(|l| l.strip_prefix(f.to_str().unwrap())?.strip_prefix(':'))
        .map(|l| l.split(':').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(lines, [1, 2, 3, 4], "{out}");
}
