//! `pisess prune` against the live oracle: the pruned file loads in pi's own library, with the
//! same context at every kept leaf (and at an ancestor of each) as the source has there, the
//! same labels on kept entries and the same session name; the dry run changes nothing;
//! `--in-place` keeps a byte-identical backup; `--sessions` moves and never deletes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{TestEnv, fixture, oracle, realdata};

fn context(file: &Path, leaf: Option<&str>) -> Value {
    let f = file.to_str().unwrap();
    let v = match leaf {
        Some(l) => oracle(&["context", f, "--leaf", l]),
        None => oracle(&["context", f]),
    };
    if let Some(l) = leaf {
        assert_eq!(v["resolvedLeafId"], l, "{f}: the oracle did not find {l}");
    }
    v
}

/// The parts of a context that must not change.
fn essence(v: &Value, with_ids: bool) -> Value {
    let mut o = serde_json::Map::new();
    for k in ["messages", "thinkingLevel", "model"] {
        o.insert(k.into(), v[k].clone());
    }
    if with_ids {
        o.insert("contextEntryIds".into(), v["contextEntryIds"].clone());
    }
    Value::Object(o)
}

/// (id, parentId) of every entry of a v3 file, in file order, read independently of pisess.
fn entries(file: &Path) -> Vec<(String, Option<String>, Value)> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let id = v.get("id")?.as_str()?.to_owned();
            let parent = v.get("parentId").and_then(Value::as_str).map(str::to_owned);
            Some((id, parent, v))
        })
        .collect()
}

fn run_json(env: &TestEnv, args: &[&str]) -> Value {
    let out = env.pisess().arg("--json").args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Prunes `src` keeping the leaf and two other leaves (and, with `keep_labeled`, every entry
/// that carries a label), then checks it with the oracle.
fn check_prune(src: &Path, keep_labeled: bool) {
    let env = TestEnv::new();
    let dir = env.home.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(src.file_name().unwrap());
    std::fs::copy(src, &file).unwrap();
    let all = entries(&file);
    let parents: HashSet<&str> = all.iter().filter_map(|e| e.1.as_deref()).collect();
    let leaves: Vec<&str> = all
        .iter()
        .map(|e| e.0.as_str())
        .filter(|id| !parents.contains(id))
        .collect();
    let mut keep: Vec<&str> = Vec::new();
    if leaves.len() > 2 {
        keep.push(leaves[0]);
        keep.push(leaves[leaves.len() / 2]);
    }
    let out = env.home.path().join("out.jsonl");
    let f = file.to_str().unwrap();
    let o = out.to_str().unwrap();
    // The entries that carry a label, as pi resolves labels (the oracle's tree).
    let labeled: Vec<String> = if keep_labeled {
        oracle(&["tree", f])["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| n.get("label").is_some_and(|l| !l.is_null()))
            .map(|n| n["id"].as_str().unwrap().to_owned())
            .collect()
    } else {
        Vec::new()
    };
    assert!(
        !keep_labeled || labeled.len() >= 2,
        "{f}: too few labels to test"
    );
    let mut args = vec!["prune", f, "--keep-leaf"];
    if keep_labeled {
        args.push("--keep-labeled");
    }
    for k in &keep {
        args.push("--keep");
        args.push(k);
    }
    args.extend(["-o", o]);
    let report = run_json(&env, &args);
    assert_eq!(report["dryRun"], false);
    // Every entry is either kept or dropped.
    assert_eq!(
        report["keptEntries"].as_u64().unwrap() + report["droppedEntries"].as_u64().unwrap(),
        all.len() as u64,
        "{f}"
    );
    // It loads in pi as it is (no repair, no migration).
    let load = oracle(&["load", o]);
    assert_eq!(load["migrated"], false, "{o}");
    assert_eq!(load["rewrittenOnLoad"], false, "{o}");
    let src_load = oracle(&["load", f]);
    assert_eq!(load["sessionName"], src_load["sessionName"], "{f}");
    assert_eq!(load["header"], src_load["header"], "{f}: header changed");
    // The same context at each kept leaf and at the parent of each.
    let pruned = entries(&out);
    let by_id: HashMap<&str, Option<&str>> = pruned
        .iter()
        .map(|e| (e.0.as_str(), e.1.as_deref()))
        .collect();
    let leaf = src_load["leafId"].as_str().unwrap().to_owned();
    let mut points: Vec<String> = vec![leaf.clone()];
    points.extend(keep.iter().map(|k| (*k).to_owned()));
    // Up to six labeled entries, spread over the file (each point costs two oracle runs).
    let step = labeled.len().div_ceil(6).max(1);
    points.extend(labeled.iter().step_by(step).cloned());
    for p in points.clone() {
        if let Some(Some(parent)) = by_id.get(p.as_str()) {
            points.push((*parent).to_owned());
        }
    }
    assert_eq!(
        load["leafId"],
        leaf.as_str(),
        "{f}: pi would resume elsewhere"
    );
    for p in &points {
        assert!(by_id.contains_key(p.as_str()), "{p} is not in the output");
        assert_eq!(
            essence(&context(&out, Some(p)), true),
            essence(&context(&file, Some(p)), true),
            "{f}: context at {p} differs"
        );
    }
    // Dropped: exactly the entries on no kept path.
    let src_parent: HashMap<&str, Option<&str>> =
        all.iter().map(|e| (e.0.as_str(), e.1.as_deref())).collect();
    let mut on_paths = HashSet::new();
    for p in std::iter::once(leaf.as_str())
        .chain(keep.iter().copied())
        .chain(labeled.iter().map(String::as_str))
    {
        let mut cur = Some(p);
        while let Some(c) = cur {
            if !on_paths.insert(c) {
                break;
            }
            cur = src_parent.get(c).copied().flatten();
        }
    }
    for (id, _, v) in &pruned {
        if !on_paths.contains(id.as_str()) {
            let t = v["type"].as_str().unwrap();
            assert!(
                t == "label" || t == "session_info",
                "{f}: {id} ({t}) is on no kept path"
            );
        }
    }
    assert!(on_paths.iter().all(|id| by_id.contains_key(id)), "{f}");
    // Labels of kept entries are those of the source.
    let tree_src = oracle(&["tree", f]);
    let tree_out = oracle(&["tree", o]);
    let labels = |t: &Value| -> BTreeMap<String, Value> {
        t["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|n| on_paths.contains(n["id"].as_str().unwrap()))
            .map(|n| {
                (
                    n["id"].as_str().unwrap().to_owned(),
                    n.get("label").cloned().unwrap_or(Value::Null),
                )
            })
            .collect()
    };
    assert_eq!(labels(&tree_out), labels(&tree_src), "{f}: labels differ");
}

#[test]
fn prune_keeps_the_context_at_every_kept_leaf_many_branches() {
    check_prune(&fixture("sessions/04-many-branches.jsonl"), false);
}

#[test]
fn prune_keeps_the_context_at_every_kept_leaf_compactions() {
    check_prune(&fixture("sessions/03-compactions.jsonl"), false);
}

#[test]
fn prune_keeps_the_context_at_every_kept_leaf_context_edits_labels() {
    check_prune(&fixture("sessions/05-context-edits-labels.jsonl"), false);
}

#[test]
fn prune_keeps_the_context_at_every_kept_leaf_realdata() {
    check_prune(
        &realdata()
            .join("pimonozig__2026-05-17T13-51-26-739Z_019e3634-be13-7330-a2a4-ffab205872d1.jsonl"),
        false,
    );
}

#[test]
fn prune_keep_labeled_keeps_the_context_at_labeled_entries_many_branches() {
    check_prune(&fixture("sessions/04-many-branches.jsonl"), true);
}

#[test]
fn prune_keep_labeled_keeps_the_context_at_labeled_entries_context_edits_labels() {
    check_prune(&fixture("sessions/05-context-edits-labels.jsonl"), true);
}

#[test]
fn prune_of_a_v1_file_keeps_its_context() {
    // pi gives v1 entries random ids, so compare the contexts at the leaf without ids.
    let env = TestEnv::new();
    let src = realdata().join("pimono__large-session.v1.jsonl");
    let out = env.home.path().join("out.jsonl");
    run_json(
        &env,
        &[
            "prune",
            src.to_str().unwrap(),
            "--keep-leaf",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(
        essence(&context(&out, None), false),
        essence(&context(&src, None), false)
    );
}

#[test]
fn prune_dry_run_changes_nothing_and_in_place_keeps_a_backup() {
    let env = TestEnv::new();
    let dir = env.home.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    let before = crate::common::file_hashes(&dir);
    let store = env.home.path().join("store.redb");
    // The first run imports the file; after that a dry run only reads the store.
    let mut store_bytes = None;
    for args in [
        vec!["prune", f, "--keep-leaf"],
        vec!["prune", f, "--keep-leaf", "--in-place", "--dry-run"],
        vec!["prune", f, "--keep-labeled", "--keep", "@leaf~3"],
        // --keep takes one ENTRY (repeat it), so SESSION may come after it.
        vec!["prune", "--keep", "@leaf~3", "--keep", "@leaf", f],
    ] {
        let r = run_json(&env, &args);
        assert_eq!(r["dryRun"], true, "{args:?}");
        assert!(r["droppedEntries"].as_u64().unwrap() > 0, "{args:?}");
        assert_eq!(
            crate::common::file_hashes(&dir),
            before,
            "{args:?} changed the folder"
        );
        let now = std::fs::read(&store).unwrap();
        if let Some(b) = &store_bytes {
            assert!(b == &now, "{args:?} wrote the store");
        }
        store_bytes = Some(now);
    }
    // Human output of the dry run says so.
    let out = env
        .pisess()
        .args(["prune", f, "--keep-leaf"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("dry run: nothing written"), "{text}");
    assert_eq!(crate::common::file_hashes(&dir), before);

    // -o into a second file, then --in-place: same bytes; the backup is the original.
    let expect = env.home.path().join("expect.jsonl");
    run_json(
        &env,
        &["prune", f, "--keep-leaf", "-o", expect.to_str().unwrap()],
    );
    let original = std::fs::read(&file).unwrap();
    let r = run_json(&env, &["prune", f, "--keep-leaf", "--in-place"]);
    assert_eq!(r["dryRun"], false);
    let bak = dir.join("s.jsonl.bak");
    assert_eq!(r["backup"], bak.to_str().unwrap());
    assert_eq!(std::fs::read(&bak).unwrap(), original, "backup differs");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(&expect).unwrap()
    );
    // No temp file is left behind, and the store now has the pruned file.
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let again = run_json(&env, &["prune", f, "--keep-leaf"]);
    assert_eq!(again["droppedEntries"], 0);
    // --no-backup writes none.
    let file2 = dir.join("t.jsonl");
    std::fs::copy(fixture("sessions/02-small-branches.jsonl"), &file2).unwrap();
    let r = run_json(
        &env,
        &[
            "prune",
            file2.to_str().unwrap(),
            "--keep-leaf",
            "--in-place",
            "--no-backup",
        ],
    );
    assert_eq!(r["backup"], Value::Null);
    assert!(!dir.join("t.jsonl.bak").exists());
}

/// pi's `modified` of a session file: the newest user/assistant message time, else the header's.
fn modified_ms(file: &Path) -> i64 {
    let text = std::fs::read_to_string(file).unwrap();
    let mut newest = None;
    for l in text.lines().skip(1) {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        let role = v["message"]["role"].as_str();
        if matches!(role, Some("user" | "assistant")) {
            let t = v["message"]["timestamp"].as_i64().unwrap();
            newest = Some(newest.map_or(t, |n: i64| n.max(t)));
        }
    }
    newest.unwrap()
}

#[test]
fn prune_sessions_moves_old_sessions_to_the_trash_and_deletes_nothing() {
    let env = TestEnv::new();
    let dir = env.home.path().join(".pi/agent/sessions/--work--");
    std::fs::create_dir_all(&dir).unwrap();
    let names = [
        "01-tiny",
        "03-compactions",
        "04-many-branches",
        "05-context-edits-labels",
    ];
    for n in names {
        std::fs::copy(
            fixture(&format!("sessions/{n}.jsonl")),
            dir.join(format!("{n}.jsonl")),
        )
        .unwrap();
    }
    let out = env
        .pisess()
        .args(["import", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    // A session imported from outside pi's folder is left alone unless --any-folder.
    let elsewhere = env.home.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let other = elsewhere.join("old.jsonl");
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &other).unwrap();
    let out = env.pisess().arg("import").arg(&other).output().unwrap();
    assert!(out.status.success());
    // An age between the newest and the oldest session, so some go and some stay.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let mut ages: Vec<(i64, &str)> = names
        .iter()
        .map(|n| (now - modified_ms(&dir.join(format!("{n}.jsonl"))), *n))
        .collect();
    ages.sort();
    let cut_days = (ages[1].0 / 86_400_000 + ages[2].0 / 86_400_000) / 2;
    assert!(cut_days * 86_400_000 > ages[1].0 && cut_days * 86_400_000 < ages[2].0);
    let expect_moved: HashSet<&str> = ages.iter().skip(2).map(|a| a.1).collect();
    let age = format!("{cut_days}d");

    let all_hashes = |home: &Path| -> Vec<String> {
        let mut v: Vec<String> = crate::common::file_hashes(home)
            .into_iter()
            .filter(|(p, _)| p.extension().is_some_and(|x| x == "jsonl"))
            .map(|(_, h)| h)
            .collect();
        v.sort();
        v
    };
    let before = crate::common::file_hashes(&dir);
    let hashes_before = all_hashes(env.home.path());
    let store_before = std::fs::read(env.home.path().join("store.redb")).unwrap();
    let r = run_json(
        &env,
        &["prune", "--sessions", "--older-than", &age, "--dry-run"],
    );
    assert_eq!(
        crate::common::file_hashes(&dir),
        before,
        "the dry run changed the folder"
    );
    let store_after = std::fs::read(env.home.path().join("store.redb")).unwrap();
    assert!(store_after == store_before, "the dry run wrote the store");
    assert!(!env.home.path().join("trash").exists());
    assert_eq!(r["sessions"].as_array().unwrap().len(), expect_moved.len());
    assert_eq!(r["outsidePiFolder"], 1);

    let r = run_json(&env, &["prune", "--sessions", "--older-than", &age]);
    let trash = env.home.path().join("trash");
    assert_eq!(r["trash"], trash.to_str().unwrap());
    for s in r["sessions"].as_array().unwrap() {
        let file = PathBuf::from(s["file"].as_str().unwrap());
        let to = PathBuf::from(s["trashPath"].as_str().unwrap());
        let stem = file.file_stem().unwrap().to_str().unwrap();
        assert!(expect_moved.contains(stem), "{stem} moved");
        assert!(!file.exists());
        assert!(to.starts_with(&trash));
        assert_eq!(
            std::fs::read(&to).unwrap(),
            std::fs::read(fixture(&format!("sessions/{stem}.jsonl"))).unwrap()
        );
    }
    for n in names {
        assert_eq!(
            dir.join(format!("{n}.jsonl")).exists(),
            !expect_moved.contains(n),
            "{n}"
        );
    }
    // Nothing deleted: the same files (by content) exist, in the folder or in the trash.
    assert_eq!(all_hashes(env.home.path()), hashes_before);
    assert!(other.exists(), "a session outside pi's folder was moved");
    // The catalogue no longer lists the moved sessions.
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    let listed = String::from_utf8(out.stdout).unwrap().lines().count();
    assert_eq!(listed, names.len() - expect_moved.len() + 1);
    // --any-folder takes the outside one too.
    let r = run_json(
        &env,
        &["prune", "--sessions", "--older-than", &age, "--any-folder"],
    );
    assert_eq!(r["sessions"].as_array().unwrap().len(), 1);
    assert!(!other.exists());
    assert_eq!(all_hashes(env.home.path()), hashes_before);
}

#[test]
fn prune_keeps_the_leaf_context_of_the_edge_cases() {
    // Duplicate ids, orphans, several roots, a leaf that is not on the last branch, labels
    // set and cleared, context edits, compactions, CRLF, junk lines, non-ASCII text.
    let env = TestEnv::new();
    for name in [
        "duplicate-ids",
        "orphan-parent",
        "multi-root",
        "leaf-not-last-branch",
        "label-set-and-clear",
        "context-edits",
        "compaction-firstkept-missing",
        "compaction-retain-none",
        "two-compactions-older-in-kept-range",
        "crlf",
        "malformed-and-blank-lines",
        "leading-malformed-then-header",
        "unicode",
    ] {
        let src = fixture(&format!("edge/{name}.jsonl"));
        let out = env.home.path().join(format!("{name}.jsonl"));
        run_json(
            &env,
            &[
                "prune",
                src.to_str().unwrap(),
                "--keep-leaf",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(
            essence(&context(&out, None), true),
            essence(&context(&src, None), true),
            "{name}: context at the leaf differs"
        );
        let load = oracle(&["load", out.to_str().unwrap()]);
        let src_load = oracle(&["load", src.to_str().unwrap()]);
        assert_eq!(load["leafId"], src_load["leafId"], "{name}");
        assert_eq!(load["sessionName"], src_load["sessionName"], "{name}");
    }
}

#[test]
fn a_killed_in_place_prune_leaves_the_file_pruned_or_untouched() {
    use std::time::{Duration, Instant, SystemTime};

    use crate::common::{Rng, corpus};

    let src = corpus().join("09-med-3000-manybranch.jsonl");
    let original = std::fs::read(&src).unwrap();
    // The uninterrupted result.
    let env = TestEnv::new();
    let expect = env.home.path().join("expect.jsonl");
    run_json(
        &env,
        &[
            "prune",
            src.to_str().unwrap(),
            "--keep-leaf",
            "-o",
            expect.to_str().unwrap(),
        ],
    );
    let expected = std::fs::read(&expect).unwrap();
    assert!(expected.len() < original.len());
    // How long an uninterrupted in-place prune takes here, a fresh store included (as in each
    // round): the kills fall within 1.5 times that, so that some land before its rename and
    // some after (a window from the `-o` run above, which reused its store, let every run of
    // a loaded machine finish first).
    // `pisess prune --keep-leaf --in-place FILE`, with a store of its own in `dir`.
    let prune_in_place = |dir: &Path, file: &Path| {
        let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("pisess"));
        c.args(["prune", "--keep-leaf", "--in-place"])
            .arg(file)
            .env_clear()
            .env("HOME", dir)
            .env("PISESS_STORE", dir.join("store/store.redb"));
        c
    };
    let full = {
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("s.jsonl");
        std::fs::write(&file, &original).unwrap();
        let started = Instant::now();
        let out = prune_in_place(work.path(), &file).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read(&file).unwrap(), expected);
        started.elapsed()
    };
    let seed = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("prune crash test seed {seed}, uninterrupted run {full:?}");
    let mut rng = Rng(seed);
    let window = (full.as_millis() as u64 * 3 / 2).max(20);
    let mut seen = [0usize; 2];
    for round in 0..crate::common::kills(12) {
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("s.jsonl");
        std::fs::write(&file, &original).unwrap();
        let wait = rng.below(window);
        let mut child = prune_in_place(work.path(), &file)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(wait));
        let _ = child.kill(); // SIGKILL (or it already finished)
        let status = child.wait().unwrap();
        {
            use std::os::unix::process::ExitStatusExt;
            // Killed, or finished first and then successfully (a prune failing at once would
            // leave every file untouched and prove nothing).
            assert!(
                status.signal() == Some(9) || status.success(),
                "round {round}: {status}"
            );
        }
        let now = std::fs::read(&file).unwrap();
        let pruned = now == expected;
        assert!(
            pruned || now == original,
            "round {round} (killed after {wait} ms): the file is neither pruned nor untouched"
        );
        let bak = work.path().join("s.jsonl.bak");
        if bak.exists() {
            assert_eq!(std::fs::read(&bak).unwrap(), original, "round {round}");
        }
        seen[usize::from(pruned)] += 1;
        if pruned {
            assert!(bak.exists(), "round {round}: pruned without a backup");
            continue;
        }
        // Untouched: a second, uninterrupted run finishes the job and leaves no temp file.
        let out = prune_in_place(work.path(), &file).output().unwrap();
        assert!(
            out.status.success(),
            "round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read(&file).unwrap(), expected, "round {round}");
        let names: Vec<String> = std::fs::read_dir(work.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(names.is_empty(), "round {round}: left {names:?}");
    }
    eprintln!("untouched {}, pruned {}", seen[0], seen[1]);
    // Both ends were reached: some kills fell before the rename, some runs got through.
    assert!(
        seen[0] > 0 && seen[1] > 0,
        "untouched {}, pruned {}",
        seen[0],
        seen[1]
    );
}

/// pi appends to a session by its path. A line appended while `--in-place` prunes the file
/// would go to the old file and be lost when the pruned one is renamed over it: such a file is
/// left alone, holding the appended line, with no backup made.
#[test]
fn in_place_leaves_alone_a_file_appended_to_while_it_is_pruned() {
    let env = TestEnv::new();
    let dir = env.home.path().join("in");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("s.jsonl");
    // Large enough that writing the pruned copy takes many milliseconds after its temp file
    // appears.
    std::fs::copy(crate::common::corpus().join("14-large-20000.jsonl"), &file).unwrap();
    let original = std::fs::read(&file).unwrap();
    let mut child = env
        .pisess_child()
        .args(["prune", "--keep-leaf", "--in-place"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Append one line as soon as the pruned copy's temp file exists, as pi would mid-run.
    let line = r#"{"type":"label","id":"appended1","parentId":null,"timestamp":"2026-12-03T21:00:00.000Z","targetId":"appended1","label":"meanwhile"}"#;
    let appended = crate::common::append_once_a_temp_file_appears(&mut child, &dir, &file, line);
    let out = child.wait_with_output().unwrap();
    assert!(appended, "the prune ended before its temp file was seen");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("changed while it was being pruned") && stderr.contains("left alone"),
        "{stderr}"
    );
    let mut expected = original;
    expected.extend_from_slice(format!("{line}\n").as_bytes());
    assert!(
        std::fs::read(&file).unwrap() == expected,
        "the file is untouched but for the append"
    );
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["s.jsonl"], "no temp file or backup is left");
}

/// A prune's report is streamed: a fan of 100,000 siblings of the root (as many dropped
/// branches) is reported, as the table and as JSON, inside a 96 MiB address space (it needs
/// ~40; the table built in comfy_table and the JSON list built as values took over 192 MiB
/// here, 833 MB of memory for 400,000 siblings), and the report still lists every branch.
#[test]
fn a_prune_report_of_a_wide_fan_runs_in_bounded_memory() {
    use std::io::Write as _;
    let env = TestEnv::new();
    let file = env.home.path().join("fan.jsonl");
    let n = 100_000;
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    writeln!(
        w,
        r#"{{"type":"session","version":3,"id":"fan","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}}"#
    )
    .unwrap();
    writeln!(
        w,
        r#"{{"type":"message","id":"00000000","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"the root","timestamp":1}}}}"#
    )
    .unwrap();
    for i in 1..=n {
        writeln!(
            w,
            r#"{{"type":"message","id":"{i:08x}","parentId":"00000000","timestamp":"2026-01-01T00:00:02.000Z","message":{{"role":"user","content":"sibling {i}","timestamp":2}}}}"#
        )
        .unwrap();
    }
    w.into_inner().unwrap().sync_all().unwrap();
    let f = file.to_str().unwrap();
    let imported = env.pisess().args(["import", f]).output().unwrap();
    assert!(imported.status.success());
    let run = |json: bool| {
        let mut args = vec!["prune", f, "--keep-leaf"];
        if json {
            args.insert(0, "--json");
        }
        let r = env.pisess_limited(96 << 20).args(&args).output().unwrap();
        assert!(
            r.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        String::from_utf8(r.stdout).unwrap()
    };
    let last = format!("{n:08x}");
    let v: Value = serde_json::from_str(run(true).trim_end()).unwrap();
    let branches = v["branches"].as_array().unwrap();
    assert_eq!(branches.len(), n - 1);
    assert_eq!(branches[0]["id"], "00000001");
    assert_eq!(branches[0]["fromId"], "00000000");
    assert_eq!(branches[n - 2]["id"], format!("{:08x}", n - 1));
    assert_eq!(v["leafId"], last);
    assert_eq!(v["droppedEntries"], n - 1);
    let text = run(false);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4 + 1 + (n - 1) + 1, "{}", &text[..500]);
    assert!(
        lines[4].starts_with(" branch    from      entries"),
        "{}",
        lines[4]
    );
    assert!(
        lines[5].starts_with(" 00000001  00000000  1        ")
            && lines[5].ends_with("user: sibling 1"),
        "{:?}",
        lines[5]
    );
}

/// `--sessions` judges a session by its file as it is now, not by the copy imported earlier:
/// one pi wrote to today stays (before, the store's old record moved it to the trash), one
/// that grew by an old entry still goes, and one rewritten into something that cannot be read
/// is left in place and reported. The dry run gives the same answer.
#[test]
fn prune_sessions_judges_each_session_by_its_file_as_it_is_now() {
    let env = TestEnv::new();
    let dir = env.home.path().join(".pi/agent/sessions/--work--");
    std::fs::create_dir_all(&dir).unwrap();
    let [used, grown, broken] = ["used", "grown", "broken"].map(|n| dir.join(format!("{n}.jsonl")));
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &used).unwrap();
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &grown).unwrap();
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &broken).unwrap();
    let out = env
        .pisess()
        .args(["import", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let append = |file: &Path, ms: i64| {
        let last: Value = serde_json::from_str(
            std::fs::read_to_string(file)
                .unwrap()
                .lines()
                .last()
                .unwrap(),
        )
        .unwrap();
        let line = serde_json::json!({
            "type": "message", "id": "beef0001", "parentId": last["id"],
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": {"role": "user", "content": "later", "timestamp": ms},
        });
        let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
        std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    };
    append(&used, now);
    append(&grown, 1_767_225_600_000);
    std::fs::write(&broken, "this is no longer a session\n").unwrap();
    let check = |r: &Value, dry_run: bool| {
        let listed: BTreeMap<String, Value> = r["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["file"].as_str().unwrap().to_owned(), s["error"].clone()))
            .collect();
        let name = |p: &Path| p.to_str().unwrap().to_owned();
        assert!(!listed.contains_key(&name(&used)), "{dry_run}: {r}");
        assert_eq!(
            listed.get(&name(&grown)),
            Some(&Value::Null),
            "{dry_run}: {r}"
        );
        let err = listed[&name(&broken)].as_str().unwrap_or_default();
        assert!(
            err.contains("changed since it was imported"),
            "{dry_run}: {r}"
        );
        assert_eq!(listed.len(), 2, "{r}");
    };
    for dry_run in [true, false] {
        let mut args = vec!["--json", "prune", "--sessions", "--older-than", "30d"];
        if dry_run {
            args.push("--dry-run");
        }
        let out = env.pisess().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{dry_run}");
        check(&serde_json::from_slice(&out.stdout).unwrap(), dry_run);
        assert!(used.exists() && broken.exists());
        assert_eq!(grown.exists(), dry_run);
    }
    assert_eq!(
        std::fs::read_to_string(&broken).unwrap(),
        "this is no longer a session\n"
    );
}

/// A session file deleted since its import is no session to move and no failure: the prune
/// (dry run or not) leaves it out, exits 0, and the session is marked gone, as `import` marks it.
#[test]
fn prune_sessions_passes_over_a_file_deleted_since_its_import() {
    let env = TestEnv::new();
    let dir = env.home.path().join(".pi/agent/sessions/--work--");
    std::fs::create_dir_all(&dir).unwrap();
    let [kept, deleted] = ["old", "deleted"].map(|n| dir.join(format!("{n}.jsonl")));
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &kept).unwrap();
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &deleted).unwrap();
    let r = crate::common::run(&env, &["import", dir.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::remove_file(&deleted).unwrap();
    // A date works as the bound too: every fixture time is before 2026-11-01, none before 2020.
    for (bound, n) in [
        ("2026-11-01", 1),
        ("2026-11-01T00:00:00Z", 1),
        ("2020-01-01", 0),
    ] {
        let args = [
            "--json",
            "prune",
            "--sessions",
            "--older-than",
            bound,
            "--dry-run",
        ];
        let r = crate::common::run(&env, &args);
        assert_eq!(r.code, 0, "{bound}: {}", r.stderr);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(v["sessions"].as_array().unwrap().len(), n, "{bound}: {v}");
    }
    // Neither an age nor a date: refused, naming it, and nothing moved.
    for bad in ["soon", "2026-02-30", "30x"] {
        let r = crate::common::run(&env, &["prune", "--sessions", "--older-than", bad]);
        assert_eq!(r.code, 2, "{bad}: {}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("cannot read the date \"{bad}\"")),
            "{bad}: {}",
            r.stderr
        );
        assert!(kept.exists());
        assert!(!env.home.path().join("trash").exists());
    }
    for dry_run in [true, false] {
        let mut args = vec!["--json", "prune", "--sessions", "--older-than", "30d"];
        if dry_run {
            args.push("--dry-run");
        }
        let r = crate::common::run(&env, &args);
        assert_eq!(r.code, 0, "{dry_run}: {}{}", r.stdout, r.stderr);
        let v: Value = serde_json::from_str(&r.stdout).unwrap();
        let files: Vec<&str> = v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["file"].as_str().unwrap())
            .collect();
        assert_eq!(files, [kept.to_str().unwrap()], "{dry_run}: {v}");
        assert_eq!(kept.exists(), dry_run);
    }
    let ls = crate::common::run(&env, &["--json", "ls"]);
    assert!(!ls.stdout.contains("deleted.jsonl"), "{}", ls.stdout);
}

/// An in-place prune writes the file from the store, so it must never act on a file that is
/// not, byte for byte, the session it names: a file replaced by a link to another session's
/// file is refused (whether the store saw the link or not), and a file edited without a change
/// of size (here: a same-length redaction, then a line appended, which the import takes for
/// an append) is read again in full first, so the pruned file keeps the edit. `import --full`
/// reads such a file again too.
#[test]
fn an_in_place_prune_acts_only_on_the_bytes_in_the_file() {
    let env = TestEnv::new();
    let run = |args: &[&str]| crate::common::run(&env, args);
    let dir = env.home.path().join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &a).unwrap();
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &b).unwrap();
    let d = dir.to_str().unwrap();
    assert_eq!(run(&["import", d]).code, 0);
    let a_id = entries_header_id(&a);
    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink("b.jsonl", &a).unwrap();
    let b_bytes = std::fs::read(&b).unwrap();
    for reimport in [false, true] {
        if reimport {
            assert_eq!(run(&["import", d]).code, 0);
        }
        let r = run(&["prune", &a_id, "--keep-leaf", "--in-place", "--no-backup"]);
        assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("no longer holds session") || r.stderr.contains("is gone"),
            "{}",
            r.stderr
        );
        assert!(
            std::fs::read(&b).unwrap() == b_bytes,
            "another session was rewritten"
        );
    }

    // A same-length edit inside the file, then an appended line.
    let f = dir.join("c.jsonl");
    // Larger than the import's two 64 KiB windows, edited between them.
    std::fs::copy(crate::common::corpus().join("07-med-2000.jsonl"), &f).unwrap();
    let fs_ = f.to_str().unwrap();
    assert_eq!(run(&["import", fs_]).code, 0);
    let text = std::fs::read_to_string(&f).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    // A line in the second half on the leaf's path (which the prune keeps).
    let values: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id: HashMap<&str, usize> = values
        .iter()
        .enumerate()
        .filter_map(|(i, v)| Some((v["id"].as_str()?, i)))
        .collect();
    let mut on_path = HashSet::new();
    let mut cur = values.last().and_then(|v| v["id"].as_str());
    while let Some(id) = cur {
        let i = by_id[id];
        on_path.insert(i);
        cur = values[i]["parentId"].as_str();
    }
    let (i, at) = lines
        .iter()
        .enumerate()
        .skip(lines.len() / 2)
        .filter(|(i, _)| on_path.contains(i))
        .find_map(|(i, l)| l.find("\"text\":\"").map(|at| (i, at + 8)))
        .unwrap();
    lines[i].replace_range(at..at + 6, "XXXXXX");
    let last: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    lines.push(
        serde_json::json!({"type": "message", "id": "feedbeef", "parentId": last["id"],
            "timestamp": "2026-12-01T00:00:00.000Z",
            "message": {"role": "user", "content": [{"type": "text", "text": "hi"}],
                "timestamp": 1}})
        .to_string(),
    );
    let edited = lines.join("\n") + "\n";
    std::fs::write(&f, &edited).unwrap();
    let r = run(&["prune", fs_, "--keep-leaf", "--in-place"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("reading it again in full"),
        "{}",
        r.stderr
    );
    assert!(std::fs::read_to_string(dir.join("c.jsonl.bak")).unwrap() == edited);
    let pruned = std::fs::read_to_string(&f).unwrap();
    let old = text.lines().nth(i).unwrap();
    assert!(
        pruned.lines().any(|l| l == lines[i]),
        "the edited line was not kept"
    );
    assert!(
        !pruned.lines().any(|l| l == old),
        "the pruned file has the line as it was before the edit"
    );
    assert_eq!(
        run(&["export", fs_]).stdout,
        pruned,
        "the store holds the pruned file"
    );

    // `import --full` reads a same-size, same-time edit that a plain import cannot see.
    let g = dir.join("g.jsonl");
    std::fs::copy(fixture("sessions/02-small-branches.jsonl"), &g).unwrap();
    let gs = g.to_str().unwrap();
    assert_eq!(run(&["import", gs]).code, 0);
    let mtime = std::fs::metadata(&g).unwrap().modified().unwrap();
    let before = std::fs::read_to_string(&g).unwrap();
    let at = before.rfind("\"text\":\"").unwrap() + 8;
    let mut after = before.clone();
    after.replace_range(at..at + 4, "ZZZZ");
    std::fs::write(&g, &after).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&g)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_eq!(run(&["import", gs]).code, 0);
    assert_eq!(
        run(&["export", gs]).stdout,
        before,
        "a plain import saw the edit"
    );
    let r = run(&["import", "--full", gs]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(run(&["export", gs]).stdout, after);
}

/// The session id in a file's header.
fn entries_header_id(file: &Path) -> String {
    let first = std::fs::read_to_string(file).unwrap();
    let v: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    v["id"].as_str().unwrap().to_owned()
}

/// An in-place prune that would drop nothing leaves the file alone: no rewrite (same inode),
/// no backup, and says so.
#[test]
fn an_in_place_prune_that_drops_nothing_leaves_the_file_alone() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let f = env.home.path().join("tiny.jsonl");
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &f).unwrap();
    let before = std::fs::read(&f).unwrap();
    let ino = std::fs::metadata(&f).unwrap().ino();
    let fs_ = f.to_str().unwrap();
    let r = crate::common::run(&env, &["prune", fs_, "--keep-leaf", "--in-place"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing to drop"), "{}", r.stdout);
    assert_eq!(
        std::fs::metadata(&f).unwrap().ino(),
        ino,
        "the file was replaced"
    );
    assert!(std::fs::read(&f).unwrap() == before);
    assert!(
        !env.home.path().join("tiny.jsonl.bak").exists(),
        "a backup was made"
    );
    let v = run_json(&env, &["prune", fs_, "--keep-leaf", "--in-place"]);
    assert_eq!(v["droppedEntries"], 0);
    assert_eq!(v["output"], Value::Null);
    assert_eq!(v["backup"], Value::Null);
}

/// A second in-place prune of what a first one wrote (its re-attached label already where a
/// prune puts it) drops nothing and leaves the file and the first backup alone: it used to
/// write the file again and then fail on the backup in its way.
#[test]
fn a_second_in_place_prune_with_nothing_left_to_drop_leaves_the_file_alone() {
    use std::os::unix::fs::MetadataExt;
    let env = TestEnv::new();
    let f = env.home.path().join("many.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &f).unwrap();
    let fs_ = f.to_str().unwrap();
    let first = run_json(&env, &["prune", fs_, "--keep-leaf", "--in-place"]);
    assert!(first["droppedEntries"].as_u64().unwrap() > 0, "{first}");
    assert_ne!(first["reattached"], serde_json::json!([]), "{first}");
    let pruned = std::fs::read(&f).unwrap();
    let backup = std::fs::read(env.home.path().join("many.jsonl.bak")).unwrap();
    let ino = std::fs::metadata(&f).unwrap().ino();

    let r = crate::common::run(&env, &["prune", fs_, "--keep-leaf", "--in-place"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("nothing to drop"), "{}", r.stdout);
    assert!(!r.stdout.contains("re-attached"), "{}", r.stdout);
    assert_eq!(
        std::fs::metadata(&f).unwrap().ino(),
        ino,
        "the file was replaced"
    );
    assert!(std::fs::read(&f).unwrap() == pruned);
    assert!(std::fs::read(env.home.path().join("many.jsonl.bak")).unwrap() == backup);
    let v = run_json(&env, &["prune", fs_, "--keep-leaf", "--in-place"]);
    assert_eq!(v["droppedEntries"], 0, "{v}");
    assert_eq!(v["reattached"], serde_json::json!([]), "{v}");
    assert_eq!(v["output"], Value::Null);
}

/// `prune ID --in-place` of a session whose file was deleted since its import (not yet
/// marked gone) says there is no file to replace, as for one marked gone: it said that the
/// file's path matched no session, right after warning that the file is gone.
#[test]
fn an_in_place_prune_of_a_deleted_file_says_there_is_nothing_to_replace() {
    let env = TestEnv::new();
    let f = env.home.path().join("gone.jsonl");
    std::fs::copy(fixture("sessions/02-small-branches.jsonl"), &f).unwrap();
    let header: Value =
        serde_json::from_str(std::fs::read_to_string(&f).unwrap().lines().next().unwrap()).unwrap();
    let id = header["id"].as_str().unwrap().to_owned();
    let r = crate::common::run(&env, &["import", f.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    std::fs::remove_file(&f).unwrap();
    let r = crate::common::run(&env, &["prune", &id, "--keep-leaf", "--in-place"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("has no file to replace"), "{}", r.stderr);
    assert!(r.stderr.contains("-o FILE"), "{}", r.stderr);
    assert!(
        !r.stderr.contains("no session file or session id matches"),
        "{}",
        r.stderr
    );
    assert!(!f.exists());
}

/// An ENTRY given twice (or `--keep-leaf` and `--keep @leaf`) is named once.
#[test]
fn an_entry_kept_twice_is_named_once() {
    let env = TestEnv::new();
    let f = fixture("sessions/04-many-branches.jsonl");
    let fs_ = f.to_str().unwrap();
    let v = run_json(
        &env,
        &[
            "prune",
            fs_,
            "--keep-leaf",
            "--keep",
            "@leaf",
            "--keep",
            "@leaf",
        ],
    );
    assert_eq!(v["keep"], serde_json::json!(["@leaf"]), "{v}");
    let r = crate::common::run(&env, &["prune", fs_, "--keep", "@leaf", "--keep", "@leaf"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("keep:  the paths to @leaf — "),
        "{}",
        r.stdout
    );
}

#[test]
fn prune_writes_a_cut_cycle_as_a_root_so_pi_can_open_the_output() {
    // ca and cb are each other's parent (pi hangs on this file); cc hangs off cb, cd off ca.
    // pisess cuts the cycle where a walk in file order closes it and shows cb as the root.
    let env = TestEnv::new();
    let src = env.home.path().join("cycle.jsonl");
    let mut text = std::fs::read_to_string(fixture("edge/cycle-parent-CRASHES-context.jsonl"))
        .expect("fixture");
    text.push_str(concat!(
        r#"{"type":"custom","customType":"m","id":"cc","parentId":"cb","timestamp":"2026-02-01T10:00:03.000Z"}"#,
        "\n",
        r#"{"type":"custom","customType":"m","id":"cd","parentId":"ca","timestamp":"2026-02-01T10:00:04.000Z"}"#,
        "\n",
    ));
    std::fs::write(&src, &text).unwrap();
    let out = env.home.path().join("out.jsonl");
    let v = run_json(
        &env,
        &[
            "prune",
            src.to_str().unwrap(),
            "--keep-leaf",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(v["rerooted"], serde_json::json!(["cb"]), "{v}");
    assert_eq!(v["droppedEntries"], 1, "{v}");
    let written = entries(&out);
    let ids: Vec<&str> = written.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["ca", "cb", "cd"]);
    assert_eq!(written[1].1, None, "cb is written as a root");
    // Every other line is the source's, byte for byte.
    let src_lines: Vec<&str> = text.lines().collect();
    let out_text = std::fs::read_to_string(&out).unwrap();
    let out_lines: Vec<&str> = out_text.lines().collect();
    assert_eq!(out_lines[0], src_lines[0]);
    assert_eq!(out_lines[1], src_lines[1]);
    assert_eq!(out_lines[3], src_lines[4]);
    // pi opens the output (the oracle's load would hang on a cycle) and resumes at cd.
    let load = oracle(&["context", out.to_str().unwrap()]);
    assert!(load.get("messages").is_some(), "{load}");
    let chk = crate::common::run(&env, &["check", out.to_str().unwrap()]);
    assert_eq!(chk.code, 0, "{}{}", chk.stdout, chk.stderr);
    // An orphan's parentId (naming no entry) is not a cycle: it stays as written.
    let orphan = fixture("edge/orphan-parent.jsonl");
    let v = run_json(&env, &["prune", orphan.to_str().unwrap(), "--keep-leaf"]);
    assert_eq!(v["rerooted"], serde_json::json!([]), "{v}");
}

/// A session file replaced by a symbolic link since it was imported is not moved: the link
/// leads to another file (here a newer session), not the session judged old (the link was
/// moved to the trash, where it dangled, and that session left pi's folder).
#[test]
fn prune_sessions_leaves_a_file_replaced_by_a_link() {
    let env = TestEnv::new();
    let dir = env.home.path().join(".pi/agent/sessions/--work--");
    std::fs::create_dir_all(&dir).unwrap();
    let old = dir.join("old.jsonl");
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &old).unwrap();
    let out = env
        .pisess()
        .args(["import", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let other = env.home.path().join("other.jsonl");
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &other).unwrap();
    std::fs::remove_file(&old).unwrap();
    std::os::unix::fs::symlink(&other, &old).unwrap();
    let r = crate::common::run(&env, &["prune", "--sessions", "--older-than", "30d"]);
    assert!(
        r.stdout.contains("symbolic link now") || r.stderr.contains("symbolic link now"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        std::fs::symlink_metadata(&old)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(other.is_file());
    let trash = env.home.path().join("trash");
    assert!(!trash.join("--work--/old.jsonl").exists());
}

/// A store kept inside pi's session folder has its trash there too: an import of the folder
/// does not read the sessions `prune --sessions` moved into the trash back as sessions, though
/// the trash named alone is read, and a folder merely named `trash` elsewhere is read as usual.
#[test]
fn a_store_inside_pis_folder_does_not_import_its_own_trash() {
    let env = TestEnv::new();
    let root = env.home.path().join(".pi/agent/sessions");
    let dir = root.join("--work--");
    std::fs::create_dir_all(&dir).unwrap();
    for n in ["01-tiny", "03-compactions"] {
        std::fs::copy(
            fixture(&format!("sessions/{n}.jsonl")),
            dir.join(format!("{n}.jsonl")),
        )
        .unwrap();
    }
    // A folder of pi's named `trash` that is not the store's: its session is pi's.
    let other = root.join("--work--").join("trash");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(
        fixture("sessions/04-many-branches.jsonl"),
        other.join("kept.jsonl"),
    )
    .unwrap();
    let store = root.join("store.redb");
    let run = |args: &[&str]| -> Value {
        let with_json: Vec<&str> = std::iter::once("--json")
            .chain(args.iter().copied())
            .collect();
        let (code, text, err) = crate::common::run_with_store(&env, &store, &with_json);
        assert_eq!(code, 0, "{args:?}: {err}");
        // JSON Lines (ls) or one JSON value (import, prune): an array of the lines.
        let mut lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if args[0] == "ls" {
            Value::Array(lines)
        } else {
            assert_eq!(lines.len(), 1, "{args:?}: {text}");
            lines.remove(0)
        }
    };
    let files = |v: &Value| -> Vec<String> {
        let mut f: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["file"].as_str().unwrap().to_string())
            .collect();
        f.sort();
        f
    };
    run(&["import"]);
    assert_eq!(files(&run(&["ls"])).len(), 3);
    let r = run(&["prune", "--sessions", "--older-than", "1d"]);
    let trash = root.join("trash");
    assert_eq!(r["trash"], trash.to_str().unwrap());
    assert_eq!(r["sessions"].as_array().unwrap().len(), 3, "{r}");
    assert!(!dir.join("01-tiny.jsonl").exists());
    assert!(!other.join("kept.jsonl").exists());
    let in_trash = crate::common::files_under(&trash);
    assert_eq!(in_trash.len(), 3, "{in_trash:?}");

    // Pi writes a new session into a folder named `trash` of its own.
    std::fs::copy(
        fixture("sessions/05-context-edits-labels.jsonl"),
        other.join("new.jsonl"),
    )
    .unwrap();
    let r = run(&["import"]);
    let listed = files(&run(&["ls"]));
    let canon_other = std::fs::canonicalize(&other).unwrap();
    assert_eq!(
        listed,
        vec![canon_other.join("new.jsonl").to_str().unwrap().to_string()],
        "import of pi's folder read the store's trash: {r}"
    );

    // Named alone, the trash is read; its sessions are not moved again (into NAME.1 beside
    // themselves) by the next prune.
    run(&["import", trash.to_str().unwrap()]);
    assert_eq!(files(&run(&["ls"])).len(), 4);
    let before = crate::common::files_under(&trash);
    let r = run(&["prune", "--sessions", "--older-than", "1d"]);
    assert_eq!(r["sessions"].as_array().unwrap().len(), 1, "{r}");
    let after = crate::common::files_under(&trash);
    assert_eq!(after.len(), 4, "{after:?}");
    for f in &before {
        assert!(f.exists(), "{} moved", f.display());
    }
}

/// `prune --keep B` where the last lines of the file are a label and the session name on a
/// dropped branch: they are kept (pi resolves both over the whole file) and chained under the
/// last kept entry, so pi resumes with B's context, not with that of the fork point above B
/// (where their nearest kept ancestor is, and where they used to be hung).
#[test]
fn prune_keeps_where_pi_resumes_when_the_last_lines_are_re_attached() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let msg = |id: &str, parent: &str, role: &str, t: u32| {
        let content = if role == "user" {
            Value::String(format!("question {id}"))
        } else {
            serde_json::json!([{"type":"text","text":format!("answer {id}")}])
        };
        let mut m = serde_json::json!({"role":role,"content":content,"timestamp":t});
        if role == "assistant" {
            m["provider"] = "p".into();
            m["model"] = "m".into();
            m["stopReason"] = "stop".into();
        }
        serde_json::json!({"type":"message","id":id,"parentId":parent,
            "timestamp":format!("2026-01-01T00:00:{t:02}.000Z"),"message":m})
    };
    let mut lines = vec![
        serde_json::json!({"type":"session","version":3,"id":"resume","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}),
        serde_json::json!({"type":"message","id":"u0000001","parentId":null,
            "timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"start","timestamp":1}}),
        msg("a0000001", "u0000001", "assistant", 2),
        // The branch kept: b…
        msg("b0000001", "a0000001", "user", 3),
        msg("b0000002", "b0000001", "assistant", 4),
        // … and the branch dropped, written after it, ending with a label and a name.
        msg("c0000001", "a0000001", "user", 5),
        msg("c0000002", "c0000001", "assistant", 6),
    ];
    lines.push(
        serde_json::json!({"type":"label","id":"l0000001","parentId":"c0000002",
        "timestamp":"2026-01-01T00:00:07.000Z","targetId":"b0000001","label":"kept-one"}),
    );
    lines.push(
        serde_json::json!({"type":"session_info","id":"n0000001","parentId":"l0000001",
        "timestamp":"2026-01-01T00:00:08.000Z","name":"the name"}),
    );
    let src = dir.path().join("resume.jsonl");
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&src, text).unwrap();
    let out = dir.path().join("out.jsonl");
    let report = run_json(
        &env,
        &[
            "prune",
            src.to_str().unwrap(),
            "--keep",
            "b0000002",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(
        report["reattached"],
        serde_json::json!(["l0000001", "n0000001"])
    );
    let o = out.to_str().unwrap();
    let load = oracle(&["load", o]);
    assert_eq!(load["leafId"], "n0000001", "{load}");
    assert_eq!(load["sessionName"], "the name");
    // pi's context where it resumes is that of the kept branch's end.
    assert_eq!(
        essence(&context(&out, None), false),
        essence(&context(&src, Some("b0000002")), false)
    );
    let got = entries(&out);
    let parent = |id: &str| got.iter().find(|e| e.0 == id).unwrap().1.clone();
    assert_eq!(parent("l0000001").as_deref(), Some("b0000002"));
    assert_eq!(parent("n0000001").as_deref(), Some("l0000001"));
    // The label still lands on its target.
    let tree = oracle(&["tree", o]);
    let b1 = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "b0000001")
        .unwrap();
    assert_eq!(b1["label"], "kept-one");
}
