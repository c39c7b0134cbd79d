//! `pisess migrate` on folders: results equal pi's migration by structure, nothing else
//! changes, backups are exact, counts are right, runs are idempotent, and a run killed at any
//! point leaves every file migrated or untouched.
//!
//! Inputs come from stable places: the oracle's standard corpus (`~/.cache/pisess-oracle/corpus`,
//! or `$PISESS_CORPUS`; built by `../shared/oracle/corpus`) and `../shared/realdata`. pi's
//! answers are the oracle expectations stored by the migrate crate
//! (`migrate/tests/expected/`, one digest per entry after renaming ids by first appearance).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use pisess_formats::js;
use serde_json::Value;

use crate::common::{Rng, TestEnv, corpus, fixture, realdata, root};

/// Copies `src` to `dst` (creating folders), writable.
fn put(src: &Path, dst: &Path) {
    fs::create_dir_all(dst.parent().unwrap()).unwrap();
    fs::copy(src, dst).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    fs::set_permissions(dst, fs::Permissions::from_mode(0o644)).unwrap();
}

/// Every file under `dir`: relative path → bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    crate::common::files_under(dir)
        .into_iter()
        .map(|p| {
            (
                p.strip_prefix(dir).unwrap().to_path_buf(),
                fs::read(&p).unwrap(),
            )
        })
        .collect()
}

/// Runs `pisess migrate ARGS --json`; returns the file records, the summary and the exit code.
fn run_json(env: &TestEnv, args: &[&str]) -> (Vec<Value>, Value, i32) {
    let out = env
        .pisess()
        .arg("migrate")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().unwrap_or(Value::Null);
    assert_eq!(summary["type"], "summary", "{text}");
    assert!(lines.iter().all(|l| l["type"] == "file"));
    (lines, summary, out.status.code().unwrap())
}

/// The library's migration of `path` (the bytes the CLI must write).
fn lib_migrate(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    pisess_migrate::migrate_file(path, &mut out).unwrap();
    out
}

/// Digests of a migrated output after renaming ids by first appearance (as
/// `migrate/tests/common.rs` does for the oracle's answers).
fn structure_digests(bytes: &[u8]) -> Vec<String> {
    let mut entries: Vec<Value> = std::str::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut names: HashMap<String, usize> = HashMap::new();
    for e in entries.iter_mut().skip(1) {
        let Value::Object(obj) = e else { continue };
        for key in ["id", "parentId", "firstKeptEntryId"] {
            if let Some(Value::String(s)) = obj.get_mut(key) {
                let n = names.len();
                let k = *names.entry(s.clone()).or_insert(n);
                *s = format!("#{k}");
            }
        }
    }
    entries
        .iter()
        .map(|v| blake3::hash(js::to_string(v).as_bytes()).to_hex()[..16].to_owned())
        .collect()
}

/// pi's migration of an input, by structure (from `migrate/tests/expected/<group>/<name>.json`).
fn pi_digests(group: &str, name: &str) -> Vec<String> {
    let path = root().join(format!("migrate/tests/expected/{group}/{name}.json"));
    let doc: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    doc["digests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_owned())
        .collect()
}

fn mtime(p: &Path) -> SystemTime {
    fs::metadata(p).unwrap().modified().unwrap()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The mixed folder: (relative path, group and name of pi's expected answer if migrated).
struct Mixed {
    dir: tempfile::TempDir,
}

const V1_SMALL: &str = "16-v1-60.jsonl";
const V2: &str = "sub/18-v2-80.jsonl";
const V1_REAL: &str = "sub/deeper/pimono__large-session.v1.jsonl";
const READ_ONLY: &str = "read-only.jsonl";
const GLUED: &str = "glued.jsonl";
const TARGETS: [(&str, &str, &str); 3] = [
    (V1_SMALL, "corpus", "16-v1-60"),
    (V2, "corpus", "18-v2-80"),
    (V1_REAL, "realdata", "pimono__large-session.v1"),
];

impl Mixed {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let c = corpus();
        put(&c.join("16-v1-60.jsonl"), &d.join(V1_SMALL));
        put(&c.join("18-v2-80.jsonl"), &d.join(V2));
        put(
            &realdata().join("pimono__large-session.v1.jsonl"),
            &d.join(V1_REAL),
        );
        put(&c.join("01-tiny-10.jsonl"), &d.join("v3.jsonl"));
        put(
            &realdata().join("kirgadjello__873fc059_crew-planner_0.header-only.v3.jsonl"),
            &d.join("sub/header-only.v3.jsonl"),
        );
        fs::write(
            d.join("v4.jsonl"),
            "{\"kind\":\"header\",\"version\":4,\"id\":\"s4\",\"cwd\":\"/x\"}\n{\"kind\":\"entry\"}\n",
        )
        .unwrap();
        put(&c.join("edge/empty.jsonl"), &d.join("edge/empty.jsonl"));
        put(&c.join("edge/garbage.jsonl"), &d.join("edge/garbage.jsonl"));
        put(
            &realdata().join("pimono__root-session.v1.concat-line.jsonl"),
            &d.join(GLUED),
        );
        put(&c.join("17-v1-400.jsonl"), &d.join(READ_ONLY));
        fs::set_permissions(d.join(READ_ONLY), fs::Permissions::from_mode(0o444)).unwrap();
        // Not a session file: must never be touched.
        fs::write(d.join("notes.txt"), "hello\n").unwrap();
        // The migrated files get a distinctive mode.
        fs::set_permissions(d.join(V2), fs::Permissions::from_mode(0o600)).unwrap();
        Self { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn arg(&self) -> &str {
        self.path().to_str().unwrap()
    }
}

fn check_found(summary: &Value) {
    assert_eq!(summary["files"], 10, "{summary}");
    let found = &summary["found"];
    assert_eq!(found["v1"], 4, "{summary}");
    assert_eq!(found["v2"], 1, "{summary}");
    assert_eq!(found["v3"], 2, "{summary}");
    assert_eq!(found["v4"], 1, "{summary}");
    assert_eq!(found["empty"], 1, "{summary}");
    assert_eq!(found["not-a-session"], 1, "{summary}");
}

/// A v1 record pisess cannot read (a number beyond the double range) is kept as written but
/// outside the parent chain, where pi's migration chains it: the migrated tree is not pi's.
/// `--in-place` wrote it without a word; it is now skipped unless `--force`, as a file with
/// skipped lines is, and the reason names the record.
#[test]
fn a_v1_record_pisess_cannot_read_needs_force() {
    let env = TestEnv::new();
    let file = env.home.path().join("v1.jsonl");
    let bytes = crate::common::V1_UNREADABLE_RECORD;
    std::fs::write(&file, bytes).unwrap();
    let f = file.to_str().unwrap();
    let (files, _, code) = run_json(&env, &[f, "--in-place"]);
    assert_eq!(code, 0);
    assert_eq!(files[0]["status"], "skipped", "{files:?}");
    let reason = files[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("1 record(s) pisess cannot read kept outside the parent chain")
            && reason.contains("--force"),
        "{reason}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes.as_bytes());
    let (files, _, code) = run_json(&env, &[f, "--in-place", "--force"]);
    assert_eq!((code, &files[0]["status"]), (0, &Value::from("migrated")));
}

#[test]
fn dry_run_is_the_default_and_writes_nothing() {
    let env = TestEnv::new();
    let m = Mixed::new();
    let before = snapshot(m.path());
    let (files, summary, code) = run_json(&env, &[m.arg()]);
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["mode"], "dry-run");
    check_found(&summary);
    // The read-only file is only refused when writing.
    assert_eq!(summary["migrated"], 4, "{summary}");
    assert_eq!(summary["current"], 2);
    assert_eq!(summary["skipped"], 4);
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["gluedRecovered"], 2);
    assert!(files.iter().all(|f| f["dryRun"] == true));
    assert_eq!(snapshot(m.path()), before);
    // --dry-run says the same.
    let (_, again, _) = run_json(&env, &[m.arg(), "--dry-run"]);
    assert_eq!(again, summary);
    assert_eq!(snapshot(m.path()), before);
}

#[test]
fn in_place_migrates_exactly_the_legacy_files() {
    let env = TestEnv::new();
    let m = Mixed::new();
    let d = m.path();
    let before = snapshot(d);
    let times: HashMap<&str, SystemTime> = TARGETS
        .iter()
        .map(|(rel, ..)| (*rel, mtime(&d.join(rel))))
        .collect();
    let (files, summary, code) =
        run_json(&env, &[m.arg(), "--in-place", "--verify", "--jobs", "3"]);
    assert_eq!(code, 2, "the read-only file failed: {summary}");
    check_found(&summary);
    assert_eq!(summary["mode"], "in-place");
    assert_eq!(summary["migrated"], 3, "{summary}");
    assert_eq!(summary["current"], 2);
    assert_eq!(summary["skipped"], 4);
    assert_eq!(summary["failed"], 1);
    assert_eq!(summary["gluedRecovered"], 2);
    assert_eq!(summary["badLinesSkipped"], 0);
    let by_file: HashMap<String, &Value> = files
        .iter()
        .map(|f| {
            let p = PathBuf::from(f["file"].as_str().unwrap());
            (p.strip_prefix(d).unwrap().to_string_lossy().into_owned(), f)
        })
        .collect();
    assert_eq!(by_file[READ_ONLY]["status"], "failed");
    assert!(
        by_file[READ_ONLY]["reason"]
            .as_str()
            .unwrap()
            .contains("read-only")
    );
    assert_eq!(by_file[GLUED]["status"], "skipped");
    assert_eq!(by_file["v4.jsonl"]["status"], "skipped");
    assert_eq!(by_file["v3.jsonl"]["status"], "current");

    let after = snapshot(d);
    let mut expected_entries = 0;
    for (rel, group, name) in TARGETS {
        let out = &after[Path::new(rel)];
        // pi's migration by structure.
        assert_eq!(structure_digests(out), pi_digests(group, name), "{rel}");
        // The library's bytes.
        let mut orig = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut orig, &before[Path::new(rel)]).unwrap();
        assert!(*out == lib_migrate(orig.path()), "{rel}");
        // The backup is the original, byte for byte, and mode and mtime are kept.
        let backup = PathBuf::from(format!("{rel}.v1.bak"));
        assert!(after[&backup] == before[Path::new(rel)], "{rel}");
        assert_eq!(mtime(&d.join(rel)), times[rel], "{rel}");
        assert_eq!(by_file[rel]["status"], "migrated");
        assert_eq!(by_file[rel]["verified"], true);
        expected_entries += by_file[rel]["entries"].as_u64().unwrap();
    }
    assert_eq!(summary["entries"], expected_entries);
    assert_eq!(mode(&d.join(V2)), 0o600);
    // Nothing else changed, nothing else appeared.
    let mut rest = after.clone();
    for (rel, ..) in TARGETS {
        rest.remove(Path::new(rel));
        rest.remove(&PathBuf::from(format!("{rel}.v1.bak")));
    }
    let mut untouched = before.clone();
    for (rel, ..) in TARGETS {
        untouched.remove(Path::new(rel));
    }
    assert_eq!(rest, untouched);

    // The second run changes nothing.
    let (_, second, code) = run_json(&env, &[m.arg(), "--in-place", "--verify"]);
    assert_eq!(code, 2);
    assert_eq!(second["migrated"], 0, "{second}");
    assert_eq!(second["current"], 5);
    assert_eq!(snapshot(d), after);
}

#[test]
fn out_mirrors_the_tree_and_never_touches_the_sources() {
    let env = TestEnv::new();
    let m = Mixed::new();
    let out = tempfile::tempdir().unwrap();
    let before = snapshot(m.path());
    let out_arg = out.path().join("mirror");
    let (_, summary, code) = run_json(
        &env,
        &[
            m.arg(),
            "--out",
            out_arg.to_str().unwrap(),
            "--verify",
            "--jobs",
            "2",
        ],
    );
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["migrated"], 4, "{summary}");
    assert_eq!(snapshot(m.path()), before);
    let written = snapshot(&out_arg);
    let names: Vec<_> = written
        .keys()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, [V1_SMALL, READ_ONLY, V2, V1_REAL]);
    for (rel, bytes) in &written {
        assert!(
            *bytes == lib_migrate(&m.path().join(rel)),
            "{}",
            rel.display()
        );
        assert_eq!(mtime(&out_arg.join(rel)), mtime(&m.path().join(rel)));
    }
    // Again: byte-identical.
    let (_, again, code) = run_json(&env, &[m.arg(), "--out", out_arg.to_str().unwrap()]);
    assert_eq!(code, 0, "{again}");
    assert_eq!(snapshot(&out_arg), written);
}

/// Two inputs holding files of one name both map to one `--out` path: the first in argument
/// order is migrated, every time, whichever worker gets there first; the other fails with a
/// message that names both and says what to do, and no source changes.
#[test]
fn files_of_one_name_under_two_inputs_do_not_race_for_their_out_path() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    put(&fixture("sessions/07-v1.jsonl"), &a.join("x.jsonl"));
    put(&fixture("sessions/08-v2.jsonl"), &b.join("x.jsonl"));
    let before = snapshot(dir.path());
    for round in 0..6 {
        let out = dir.path().join(format!("out{round}"));
        // Folders, then the files themselves, in both orders.
        let (first, second) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let args: Vec<PathBuf> = if round < 4 {
            vec![first.clone(), second.clone()]
        } else {
            vec![first.join("x.jsonl"), second.join("x.jsonl")]
        };
        let mut argv: Vec<&str> = args.iter().map(|p| p.to_str().unwrap()).collect();
        argv.extend(["--out", out.to_str().unwrap(), "--jobs", "2"]);
        let (files, summary, code) = run_json(&env, &argv);
        assert_eq!(code, 2, "{summary}");
        assert_eq!(
            (&summary["migrated"], &summary["failed"]),
            (&1.into(), &1.into())
        );
        let failed = files.iter().find(|f| f["status"] == "failed").unwrap();
        assert!(
            failed["file"]
                .as_str()
                .unwrap()
                .ends_with(&second.join("x.jsonl").to_string_lossy().into_owned()),
            "{failed}"
        );
        let reason = failed["reason"].as_str().unwrap();
        assert!(
            reason.contains("is also the --out path of")
                && reason.contains(&*first.join("x.jsonl").to_string_lossy())
                && reason.contains("separate --out folders"),
            "{reason}"
        );
        assert_eq!(
            fs::read(out.join("x.jsonl")).unwrap(),
            lib_migrate(&first.join("x.jsonl"))
        );
        fs::remove_dir_all(&out).unwrap();
        assert_eq!(snapshot(dir.path()), before);
    }
}

/// A file that cannot be put in place (its target is a folder: refused by `output::resolve`
/// before anything is written; the rename would fail on it too) fails alone: reported with
/// the reason, in the same place among the reports as a dry run lists it; the others are
/// written; no temp file is left and the folder in the way is untouched.
#[test]
fn a_file_that_cannot_be_put_in_place_fails_alone_and_leaves_no_temp_file() {
    let env = TestEnv::new();
    let m = Mixed::new();
    let out = tempfile::tempdir().unwrap();
    let out_arg = out.path().join("mirror");
    let blocker = out_arg.join(V2);
    fs::create_dir_all(&blocker).unwrap();
    fs::write(blocker.join("keep"), b"mine").unwrap();
    let (listed, _, code) = run_json(&env, &[m.arg()]);
    assert_eq!(code, 0);
    let (files, summary, code) = run_json(
        &env,
        &[m.arg(), "--out", out_arg.to_str().unwrap(), "--jobs", "2"],
    );
    assert_eq!(code, 2, "{summary}");
    assert_eq!(summary["migrated"], 3, "{summary}");
    assert_eq!(summary["failed"], 1, "{summary}");
    let order = |v: &[Value]| v.iter().map(|f| f["file"].clone()).collect::<Vec<_>>();
    assert_eq!(order(&files), order(&listed));
    let failed: Vec<&Value> = files.iter().filter(|f| f["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{files:?}");
    assert!(
        failed[0]["file"].as_str().unwrap().ends_with(V2),
        "{:?}",
        failed[0]
    );
    let reason = failed[0]["reason"].as_str().unwrap();
    assert_eq!(
        reason,
        format!("{} is a directory", blocker.display()),
        "{reason}"
    );
    assert!(failed[0]["output"].is_null(), "{:?}", failed[0]);
    let written = snapshot(&out_arg);
    let names: Vec<_> = written
        .keys()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [V1_SMALL, READ_ONLY, format!("{V2}/keep").as_str(), V1_REAL]
    );
    assert_eq!(written[Path::new(&format!("{V2}/keep"))], b"mine");
    for rel in [V1_SMALL, READ_ONLY, V1_REAL] {
        assert!(
            written[Path::new(rel)] == lib_migrate(&m.path().join(rel)),
            "{rel}"
        );
    }
}

#[test]
fn force_writes_a_file_that_was_not_fully_parsed() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join(GLUED);
    put(
        &realdata().join("pimono__root-session.v1.concat-line.jsonl"),
        &f,
    );
    let orig = fs::read(&f).unwrap();
    let (files, summary, code) = run_json(&env, &[dir.path().to_str().unwrap(), "--in-place"]);
    assert_eq!(code, 0);
    assert_eq!(summary["skipped"], 1);
    assert!(files[0]["reason"].as_str().unwrap().contains("--force"));
    assert!(fs::read(&f).unwrap() == orig);
    let (files, summary, code) = run_json(
        &env,
        &[
            dir.path().to_str().unwrap(),
            "--in-place",
            "--force",
            "--verify",
            "--no-backup",
        ],
    );
    assert_eq!(code, 0, "{files:?}");
    assert_eq!(summary["migrated"], 1);
    assert_eq!(files[0]["gluedRecovered"], 2);
    assert_eq!(files[0]["verified"], true);
    let mut src = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut src, &orig).unwrap();
    assert!(fs::read(&f).unwrap() == lib_migrate(src.path()));
    assert_eq!(snapshot(dir.path()).len(), 1, "no backup with --no-backup");
}

#[test]
fn stale_temp_files_are_removed_and_backups_are_never_overwritten() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(&corpus().join("16-v1-60.jsonl"), &d.join("a.jsonl"));
    put(&corpus().join("18-v2-80.jsonl"), &d.join("b.jsonl"));
    fs::write(
        d.join(".pisess-tmp-4000000000-0-a.jsonl.tmp"),
        "half a file",
    )
    .unwrap();
    fs::write(d.join("b.jsonl.old"), "someone else's backup").unwrap();
    let a = fs::read(d.join("a.jsonl")).unwrap();
    let b = fs::read(d.join("b.jsonl")).unwrap();
    let (files, summary, code) = run_json(
        &env,
        &[d.to_str().unwrap(), "--in-place", "--backup-suffix", ".old"],
    );
    assert_eq!(code, 2, "{summary}");
    assert_eq!(summary["staleTempFilesRemoved"], 1);
    assert!(!d.join(".pisess-tmp-4000000000-0-a.jsonl.tmp").exists());
    assert_eq!(files[0]["status"], "migrated");
    assert!(fs::read(d.join("a.jsonl.old")).unwrap() == a);
    assert_eq!(files[1]["status"], "failed");
    assert!(
        files[1]["reason"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
    assert!(fs::read(d.join("b.jsonl")).unwrap() == b);
    assert_eq!(
        fs::read(d.join("b.jsonl.old")).unwrap(),
        b"someone else's backup"
    );
    // A vanished input is reported, the others still run.
    let (files, _, code) = run_json(
        &env,
        &[
            d.join("gone.jsonl").to_str().unwrap(),
            d.join("a.jsonl").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 2);
    assert_eq!(files[0]["status"], "failed");
    assert_eq!(files[1]["status"], "current");
}

#[test]
fn stdout_mode_is_unchanged() {
    let env = TestEnv::new();
    let src = corpus().join("16-v1-60.jsonl");
    let out = env
        .pisess()
        .args(["migrate", "--stdout"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(out.stdout == lib_migrate(&src));
    let out = env.pisess().args(["migrate", "--stdout"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--stdout takes exactly one FILE (0 given)")
    );
    let out = env
        .pisess()
        .args(["migrate", "--stdout", "--in-place"])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "flags conflict");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("the argument '--stdout' cannot be used with '--in-place'")
    );
}

#[test]
fn human_output_has_a_summary_table() {
    let env = TestEnv::new();
    let m = Mixed::new();
    let out = env.pisess().arg("migrate").arg(m.path()).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    for want in [
        "would migrate",
        "already current",
        "glued lines recovered",
        "bad lines skipped",
        "v4.jsonl: skipped (v4)",
    ] {
        assert!(text.contains(want), "{want:?} in\n{text}");
    }
}

/// Copies `src` with the header's id changed, so every copy migrates to different ids.
fn put_renamed(src: &Path, dst: &Path, tag: usize) {
    let text = fs::read_to_string(src).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let header: Value = serde_json::from_str(first).unwrap();
    let id = header["id"].as_str().unwrap();
    let first = first.replacen(
        &format!("\"id\":\"{id}\""),
        &format!("\"id\":\"{id}-{tag}\""),
        1,
    );
    fs::write(dst, format!("{first}\n{rest}")).unwrap();
}

#[test]
fn a_killed_migration_leaves_every_file_migrated_or_untouched() {
    let env = TestEnv::new();
    let master = tempfile::tempdir().unwrap();
    let c = corpus();
    let sources = [
        c.join("16-v1-60.jsonl"),
        c.join("17-v1-400.jsonl"),
        c.join("18-v2-80.jsonl"),
        c.join("19-v2-800.jsonl"),
        realdata().join("pimono__large-session.v1.jsonl"),
        realdata().join("pimono__before-compaction.v1.jsonl"),
    ];
    for i in 0..30 {
        let sub = master.path().join(format!("p{}", i % 3));
        fs::create_dir_all(&sub).unwrap();
        put_renamed(
            &sources[i % sources.len()],
            &sub.join(format!("s{i:02}.jsonl")),
            i,
        );
    }
    let originals = snapshot(master.path());
    // The uninterrupted result.
    let expected_dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (_, summary, code) = run_json(
        &env,
        &[
            master.path().to_str().unwrap(),
            "--out",
            expected_dir.path().to_str().unwrap(),
            "--jobs",
            "2",
        ],
    );
    let full = started.elapsed();
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["migrated"], 30);
    let expected = snapshot(expected_dir.path());

    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("crash test seed {seed}, uninterrupted run {full:?}");
    let mut rng = Rng(seed);
    let window = full.as_millis().max(200) as u64;
    let (mut migrated_seen, mut untouched_seen) = (0, 0);
    for round in 0..crate::common::kills(24) {
        let work = tempfile::tempdir().unwrap();
        for (rel, bytes) in &originals {
            let p = work.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, bytes).unwrap();
        }
        // Half the rounds within 0–200 ms, half anywhere in the run.
        let wait = if round % 2 == 0 {
            rng.below(200)
        } else {
            rng.below(window)
        };
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("pisess"))
            .args(["migrate", "--in-place", "--jobs", "2"])
            .arg(work.path())
            .env_clear()
            .env("HOME", env.home.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(wait));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();

        let now = snapshot(work.path());
        for (rel, orig) in &originals {
            let cur = &now[rel];
            let migrated = expected[rel] == *cur;
            assert!(
                migrated || cur == orig,
                "round {round} (seed {seed}, {wait} ms): {} is neither migrated nor untouched",
                rel.display()
            );
            if migrated {
                migrated_seen += 1;
            } else {
                untouched_seen += 1;
            }
            let backup = PathBuf::from(format!("{}.v1.bak", rel.display()));
            if let Some(b) = now.get(&backup) {
                assert!(
                    b == orig,
                    "round {round}: backup of {} is partial",
                    rel.display()
                );
            } else {
                assert!(
                    !migrated,
                    "round {round}: {} migrated without a backup",
                    rel.display()
                );
            }
        }
        for rel in now.keys() {
            let name = rel.file_name().unwrap().to_string_lossy();
            assert!(
                originals.contains_key(rel)
                    || name.ends_with(".v1.bak")
                    || name.starts_with(".pisess-tmp-"),
                "round {round}: unexpected file {}",
                rel.display()
            );
        }
        // Finishing the job afterwards gives the uninterrupted result, and no temp file is left.
        if round % 6 == 5 {
            let (_, summary, code) = run_json(&env, &[work.path().to_str().unwrap(), "--in-place"]);
            assert_eq!(code, 0, "{summary}");
            let done = snapshot(work.path());
            for (rel, bytes) in &expected {
                assert!(done[rel] == *bytes, "{}", rel.display());
            }
            assert_eq!(done.len(), 60, "30 files and 30 backups, no temp files");
        }
    }
    eprintln!("crash test: {migrated_seen} files found migrated, {untouched_seen} untouched");
    assert!(migrated_seen > 0 && untouched_seen > 0);
}

/// `--in-place` on a session folder holding a symlink migrates the file the link names, keeps
/// the backup beside that file, and leaves the link a link (before, the link was replaced by
/// the migrated file and the "backup" was a second link to the untouched original).
#[test]
fn in_place_follows_a_symlink_and_keeps_the_link() {
    let env = TestEnv::new();
    let work = tempfile::tempdir().unwrap();
    let real = work.path().join("real/a.jsonl");
    put(&root().join("fixtures/sessions/07-v1.jsonl"), &real);
    let original = fs::read(&real).unwrap();
    let sessions = work.path().join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    let link = sessions.join("a.jsonl");
    std::os::unix::fs::symlink("../real/a.jsonl", &link).unwrap();

    let (files, summary, code) = run_json(
        &env,
        &[sessions.to_str().unwrap(), "--in-place", "--verify"],
    );
    assert_eq!(code, 0, "{summary}");
    assert_eq!(summary["migrated"], 1, "{summary}");
    assert_eq!(files[0]["status"], "migrated");
    // The link is still a link to the same place, and the file it names is migrated.
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_link(&link).unwrap(), Path::new("../real/a.jsonl"));
    let migrated = fs::read(&real).unwrap();
    let header: Value =
        serde_json::from_slice(migrated.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(header["version"], 3);
    let mut orig = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut orig, &original).unwrap();
    assert!(migrated == lib_migrate(orig.path()));
    // The backup is a file beside the real one, with the original bytes; none beside the link.
    let backup = work.path().join("real/a.jsonl.v1.bak");
    assert!(fs::symlink_metadata(&backup).unwrap().is_file());
    assert!(fs::read(&backup).unwrap() == original);
    let beside_link: Vec<_> = fs::read_dir(&sessions)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside_link, vec![std::ffi::OsString::from("a.jsonl")]);
}

/// `--out` never replaces a file in DIR whose bytes differ from the migration: a migrated copy
/// pi has appended to since, an unrelated file of that name, or a link there to another file
/// are left alone and reported as failed (exit 2, after the other files); a file with the very
/// same bytes is left as it is (not rewritten: same inode), so re-running stays idempotent.
#[test]
fn out_never_replaces_a_file_that_differs() {
    use std::os::unix::fs::{MetadataExt, symlink};
    let env = TestEnv::new();
    let src = tempfile::tempdir().unwrap();
    let s = src.path();
    for name in ["appended", "unrelated", "linked", "same", "new"] {
        put(
            &corpus().join("16-v1-60.jsonl"),
            &s.join(format!("{name}.jsonl")),
        );
    }
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("mirror");
    let o_arg = o.to_str().unwrap();
    let s_arg = s.to_str().unwrap();
    let (_, first, code) = run_json(&env, &[s_arg, "--out", o_arg]);
    assert_eq!(code, 0, "{first}");
    let migrated = lib_migrate(&s.join("same.jsonl"));
    // pi appends to one migrated copy; another name holds someone else's file; a third is a
    // link to a file outside DIR; the fourth stays as written; the fifth is gone.
    let mut appended = fs::read(o.join("appended.jsonl")).unwrap();
    appended.extend_from_slice(b"{\"type\":\"session_info\",\"id\":\"feedbeef\",\"parentId\":null,\"timestamp\":\"2026-12-01T00:00:00.000Z\",\"name\":\"work done since\"}\n");
    fs::write(o.join("appended.jsonl"), &appended).unwrap();
    fs::write(o.join("unrelated.jsonl"), b"not yours\n").unwrap();
    let elsewhere = out.path().join("elsewhere.jsonl");
    fs::write(&elsewhere, b"kept\n").unwrap();
    fs::remove_file(o.join("linked.jsonl")).unwrap();
    symlink(&elsewhere, o.join("linked.jsonl")).unwrap();
    fs::remove_file(o.join("new.jsonl")).unwrap();
    let inode = fs::metadata(o.join("same.jsonl")).unwrap().ino();

    let (files, summary, code) = run_json(&env, &[s_arg, "--out", o_arg, "--jobs", "2"]);
    assert_eq!(code, 2, "{summary}");
    assert_eq!(summary["failed"], 3, "{summary}");
    assert_eq!(summary["migrated"], 1, "{summary}");
    assert_eq!(summary["current"], 1, "{summary}");
    let by_name = |n: &str| {
        files
            .iter()
            .find(|f| {
                f["file"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("/{n}.jsonl"))
            })
            .unwrap()
            .clone()
    };
    for (name, target) in [
        ("appended", o.join("appended.jsonl")),
        ("unrelated", o.join("unrelated.jsonl")),
        ("linked", elsewhere.clone()),
    ] {
        let f = by_name(name);
        assert_eq!(f["status"], "failed", "{f}");
        assert_eq!(
            f["reason"],
            format!(
                "{} exists and differs from the migration; left alone (remove it to write it \
                 again)",
                target.display()
            ),
            "{f}"
        );
        assert!(f["output"].is_null(), "{f}");
    }
    assert!(fs::read(o.join("appended.jsonl")).unwrap() == appended);
    assert_eq!(fs::read(o.join("unrelated.jsonl")).unwrap(), b"not yours\n");
    assert_eq!(fs::read(&elsewhere).unwrap(), b"kept\n");
    assert!(
        fs::symlink_metadata(o.join("linked.jsonl"))
            .unwrap()
            .is_symlink()
    );
    let same = by_name("same");
    assert_eq!(same["status"], "current", "{same}");
    assert_eq!(same["bytesWritten"], 0, "{same}");
    assert_eq!(
        same["reason"],
        "already there, the same bytes; not rewritten"
    );
    assert_eq!(fs::metadata(o.join("same.jsonl")).unwrap().ino(), inode);
    assert!(fs::read(o.join("same.jsonl")).unwrap() == migrated);
    assert_eq!(by_name("new")["status"], "migrated");
    assert!(by_name("new")["reason"].is_null());
    assert!(fs::read(o.join("new.jsonl")).unwrap() == migrated);
    // No temp file is left, and the sources are as they were.
    let names: Vec<_> = fs::read_dir(&o)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".pisess-tmp-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    for name in ["appended", "same"] {
        let p = s.join(format!("{name}.jsonl"));
        assert!(fs::read(&p).unwrap() == fs::read(corpus().join("16-v1-60.jsonl")).unwrap());
    }
    // The human report names the file and the reason on stderr.
    let r = env
        .pisess()
        .args(["migrate", s_arg, "--out", o_arg])
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8(r.stderr).unwrap();
    assert!(
        err.contains(&format!(
            "{}/appended.jsonl exists and differs from the migration; left alone",
            o.display()
        )),
        "{err}"
    );
}

/// pi appends to a session by its path. A line appended while `--in-place` migrates the file
/// would go to the old file and be lost when the migration is renamed over it: such a file is
/// left alone, holding the appended line, and reported as failed.
#[test]
fn in_place_leaves_alone_a_file_appended_to_while_it_is_migrated() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let src = fs::read_to_string(realdata().join("pimono__large-session.v1.jsonl")).unwrap();
    let (header, body) = src.split_once('\n').unwrap();
    // Large enough that the migration takes many milliseconds after its temp file appears.
    let mut text = format!("{header}\n");
    while text.len() < (16 << 20) {
        text.push_str(body);
    }
    let file = dir.path().join("s.jsonl");
    fs::write(&file, &text).unwrap();

    let mut child = env
        .pisess_child()
        .args(["migrate", "--in-place", "--no-backup", "--json"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Append one line as soon as the migration's temp file exists, as pi would mid-run.
    let line = r#"{"type":"message","timestamp":"2026-12-03T21:00:00.000Z","message":{"role":"user","content":"appended meanwhile"}}"#;
    let appended =
        crate::common::append_once_a_temp_file_appears(&mut child, dir.path(), &file, line);
    let out = child.wait_with_output().unwrap();
    assert!(
        appended,
        "the migration ended before its temp file was seen"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    let record: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert_eq!(record["status"], "failed", "{stdout}");
    let reason = record["reason"].as_str().unwrap();
    assert!(
        reason.contains("changed size") && reason.contains("left alone"),
        "{reason}"
    );
    let now = fs::read_to_string(&file).unwrap();
    assert_eq!(
        now,
        format!("{text}{line}\n"),
        "the file is untouched but for the append"
    );
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["s.jsonl"], "no temp file or backup is left");
}

/// `--out` naming the folder being migrated (or a folder the inputs lie in): the files inside it
/// are left out, as what `--out` writes is never migrated again — said, and an error when that
/// leaves nothing (it printed "found 0" and exited 0).
#[test]
fn an_output_folder_that_holds_the_inputs_is_said_to_leave_them_out() {
    let env = TestEnv::new();
    let dir = env.home.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = dir.join("07-v1.jsonl");
    std::fs::copy(fixture("sessions/07-v1.jsonl"), &v1).unwrap();
    let before = std::fs::read(&v1).unwrap();
    let d = dir.to_str().unwrap();
    let out = env
        .pisess()
        .args(["migrate", d, "--out", d])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nothing to migrate: 1 file inside the output folder"),
        "{err}"
    );
    assert_eq!(std::fs::read(&v1).unwrap(), before);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    // One input inside, one outside: the outside one is migrated, the other named.
    let other = env.home.path().join("e");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(fixture("sessions/07-v1.jsonl"), other.join("x.jsonl")).unwrap();
    let out = env
        .pisess()
        .args(["migrate", d, other.to_str().unwrap(), "--out", d])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("note: 1 file inside the output folder"),
        "{err}"
    );
    assert!(dir.join("x.jsonl").exists());
    assert_eq!(std::fs::read(&v1).unwrap(), before);
}

/// A backup suffix ending in `.jsonl` is refused before anything is written: pi lists every
/// `*.jsonl` of a session folder as a session (and `pisess import` takes it), so each backup
/// would show up as a second copy of its session.
#[test]
fn a_backup_suffix_ending_in_jsonl_is_refused() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(&corpus().join("16-v1-60.jsonl"), &d.join("a.jsonl"));
    let before = fs::read(d.join("a.jsonl")).unwrap();
    let out = env
        .pisess()
        .args(["migrate", "--in-place", "--backup-suffix", ".old.jsonl"])
        .arg(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the backup suffix .old.jsonl ends in .jsonl"),
        "{err}"
    );
    assert!(fs::read(d.join("a.jsonl")).unwrap() == before);
    let names: Vec<_> = fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["a.jsonl"]);
    // A suffix that makes `.jsonl` only with the file's name (`x.json` + `l`): that file fails.
    put(&corpus().join("16-v1-60.jsonl"), &d.join("x.json"));
    let (files, summary, code) = run_json(
        &env,
        &[
            d.join("x.json").to_str().unwrap(),
            "--in-place",
            "--backup-suffix",
            "l",
        ],
    );
    assert_eq!(code, 2, "{summary}");
    assert_eq!(files[0]["status"], "failed");
    assert!(
        files[0]["reason"]
            .as_str()
            .unwrap()
            .contains("would end in .jsonl"),
        "{}",
        files[0]
    );
    assert!(!d.join("x.jsonl").exists());
    assert!(fs::read(d.join("x.json")).unwrap() == before);
}

/// A symbolic link where the backup goes is refused, by `migrate --in-place` and `prune
/// --in-place` alike: one to the file itself held its bytes until the rename, then the new
/// ones, so the original was lost while the command said it was kept as the backup.
#[test]
fn a_backup_path_that_is_a_symbolic_link_is_refused() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    put(&fixture("sessions/07-v1.jsonl"), &d.join("v.jsonl"));
    put(
        &fixture("sessions/04-many-branches.jsonl"),
        &d.join("a.jsonl"),
    );
    std::os::unix::fs::symlink("v.jsonl", d.join("v.jsonl.v1.bak")).unwrap();
    std::os::unix::fs::symlink("a.jsonl", d.join("a.jsonl.bak")).unwrap();
    let before = snapshot(d);
    let (files, summary, code) =
        run_json(&env, &[d.join("v.jsonl").to_str().unwrap(), "--in-place"]);
    assert_eq!(code, 2, "{summary}");
    assert_eq!(files[0]["status"], "failed");
    assert!(
        files[0]["reason"]
            .as_str()
            .unwrap()
            .contains("is a symbolic link"),
        "{}",
        files[0]
    );
    let r = crate::common::run(
        &env,
        &[
            "prune",
            d.join("a.jsonl").to_str().unwrap(),
            "--keep-leaf",
            "--in-place",
        ],
    );
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("is a symbolic link"), "{}", r.stderr);
    assert_eq!(snapshot(d), before, "a file or its link changed");
    assert!(
        fs::symlink_metadata(d.join("a.jsonl.bak"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Moved away, the backup is made.
    fs::remove_file(d.join("a.jsonl.bak")).unwrap();
    let r = crate::common::run(
        &env,
        &[
            "prune",
            d.join("a.jsonl").to_str().unwrap(),
            "--keep-leaf",
            "--in-place",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(fs::read(d.join("a.jsonl.bak")).unwrap() == before[Path::new("a.jsonl")]);
}

/// `--jobs` starts no more worker threads than there are files (and at most 256): a huge
/// number over one file used to start that many threads and run for minutes. (`timeout` only
/// turns a hang into a failure; nothing here is timed.)
#[test]
fn a_huge_jobs_count_over_one_file_starts_no_idle_workers() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("sessions/07-v1.jsonl"), dir.join("a.jsonl")).unwrap();
    let out = env
        .pisess_wrapped(&["timeout", "120"])
        .args(["migrate", "--dry-run", "--jobs", "1000000"])
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
}

/// `--out` naming a file that exists says it is not a folder (it said "cannot create the
/// output folder …: File exists"), and changes nothing.
#[test]
fn out_naming_a_file_says_it_is_not_a_folder() {
    let env = TestEnv::new();
    let dir = env.home.path().join("s");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(fixture("sessions/07-v1.jsonl"), dir.join("a.jsonl")).unwrap();
    let file = env.home.path().join("x.jsonl");
    std::fs::write(&file, "keep").unwrap();
    let out = env
        .pisess()
        .args(["migrate", "--out"])
        .arg(&file)
        .arg(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("exists and is not a folder"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
}
