//! `pisess grep`, `stats`, `log --all`, `diff --context`, `diff SESSION_A SESSION_B`,
//! `completions` and `man`: JSON checked against the oracle's goldens (tree, path,
//! context-at), against a live `oracle fork`, or against an independent scan of the session
//! files; human output as insta snapshots with machine paths redacted.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{TestEnv, V3, fixture, golden, root, run, run_in, session};

/// Runs a command that must exit with `code` and returns its stdout.
fn out(env: &TestEnv, args: &[&str], code: i32) -> String {
    let r = run(env, args);
    assert_eq!(
        r.code, code,
        "{args:?}\nstdout: {}\nstderr: {}",
        r.stdout, r.stderr
    );
    r.stdout
}

fn json(env: &TestEnv, args: &[&str], code: i32) -> Value {
    let s = out(env, args, code);
    serde_json::from_str(s.trim_end()).unwrap_or_else(|e| panic!("{args:?}: {e}: {s}"))
}

fn json_lines(env: &TestEnv, args: &[&str], code: i32) -> Vec<Value> {
    out(env, args, code)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `pisess ARGS` as std's Command (for its stdout and spawn), in the test environment.
fn std_command(env: &TestEnv, args: &[&str]) -> std::process::Command {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("pisess"));
    c.args(args)
        .env_clear()
        .env("HOME", env.home.path())
        .env("NO_COLOR", "1")
        .env("PISESS_STORE", env.home.path().join("store.redb"));
    c
}

/// Runs `pisess ARGS` for a reader that takes 16 bytes and closes the pipe (`pisess … | head
/// -c 16`): it must exit 0 and say nothing.
fn stops_quietly_on_a_closed_pipe(env: &TestEnv, args: &[&str]) {
    answers_quietly_on_a_closed_pipe(env, args, 0);
}

/// Runs `pisess ARGS` for a reader that takes 16 bytes and closes the pipe: it must say
/// nothing and exit with `code`, the status of its answer.
fn answers_quietly_on_a_closed_pipe(env: &TestEnv, args: &[&str], code: i32) {
    let (got, err) = crate::common::run_until_the_reader_stops(&mut std_command(env, args));
    assert_eq!(got, Some(code), "{args:?}");
    assert!(err.is_empty(), "{args:?}: {err}");
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_owned())
        .collect()
}

/// Machine-specific paths replaced, so snapshots are the same everywhere.
fn redact(s: &str, extra: &[(&str, &str)]) -> String {
    let mut s = s.to_owned();
    for (from, to) in extra {
        s = s.replace(from, to);
    }
    let root = std::fs::canonicalize(root()).unwrap();
    s.replace(root.to_str().unwrap(), "$ROOT")
}

/// The session file's lines after the header, parsed, with their text.
fn file_entries(p: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| (l.to_owned(), serde_json::from_str(l).unwrap()))
        .collect()
}

/// The path root → leaf of a file (leaf = last entry), by following `parentId`.
fn file_leaf_path(p: &Path) -> Vec<String> {
    let entries = file_entries(p);
    let by_id: HashMap<&str, &Value> = entries
        .iter()
        .filter_map(|(_, v)| Some((v["id"].as_str()?, v)))
        .collect();
    let mut out = Vec::new();
    let mut cur = entries.last().and_then(|(_, v)| v["id"].as_str());
    while let Some(id) = cur {
        out.push(id.to_owned());
        cur = by_id.get(id).and_then(|v| v["parentId"].as_str());
    }
    out.reverse();
    out
}

// ---- log --all --------------------------------------------------------------------------------

#[test]
fn log_all_json_has_the_oracle_tree_and_paths() {
    for name in V3 {
        let env = TestEnv::new();
        let f = session(name);
        let f = f.to_str().unwrap();
        let tree = golden(name, "tree");
        let nodes = tree["nodes"].as_array().unwrap();
        let leaf = tree["leafId"].as_str().unwrap();
        let lines = json_lines(&env, &["log", f, "--all", "--json"], 0);
        assert_eq!(lines.len(), nodes.len(), "{name}: every node once");
        let pos: HashMap<&str, usize> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (l["id"].as_str().unwrap(), i))
            .collect();
        assert_eq!(pos.len(), nodes.len(), "{name}: no id twice");
        assert_eq!(lines[0]["id"], leaf, "{name}: the leaf comes first");
        assert_eq!(lines[0]["leaf"], true);
        assert_eq!(lines[0]["column"], 0);
        let active: HashSet<String> = strs(&golden(name, "path")[leaf]).into_iter().collect();
        for n in nodes {
            let id = n["id"].as_str().unwrap();
            let l = &lines[pos[id]];
            assert_eq!(l["parentId"], n["parentId"], "{name} {id}");
            assert_eq!(l["active"], active.contains(id), "{name} {id}");
            if let Some(p) = n["parentId"].as_str() {
                assert!(pos[id] < pos[p], "{name}: {id} after its parent {p}");
            }
            // Siblings: the one on the active path first, then the others newest-in-file
            // first (the reverse of pi's children order).
            let kids = strs(&n["children"]);
            let mut want: Vec<&str> = kids.iter().rev().map(String::as_str).collect();
            if let Some(i) = want.iter().position(|k| active.contains(*k)) {
                let a = want.remove(i);
                want.insert(0, a);
            }
            let mut got: Vec<&str> = kids.iter().map(String::as_str).collect();
            got.sort_by_key(|k| pos[k]);
            assert_eq!(got, want, "{name}: children of {id}");
        }
        // Following parentId through the output gives the oracle's paths.
        let parent: HashMap<&str, Option<&str>> = lines
            .iter()
            .map(|l| (l["id"].as_str().unwrap(), l["parentId"].as_str()))
            .collect();
        for (id, want) in golden(name, "path").as_object().unwrap() {
            if id == "no-such-id" {
                continue;
            }
            let mut chain = vec![id.clone()];
            while let Some(Some(p)) = parent.get(chain.last().unwrap().as_str()) {
                chain.push((*p).to_owned());
            }
            chain.reverse();
            assert_eq!(chain, strs(want), "{name} path to {id}");
        }
        // Human output: one node line per entry, and the filters still work.
        let human = out(&env, &["log", f, "--all"], 0);
        let node_lines = human
            .lines()
            .filter(|l| {
                l.trim_start_matches(['│', ' '])
                    .starts_with(['@', '●', '○'])
            })
            .count();
        assert_eq!(node_lines, nodes.len(), "{name}:\n{human}");
        let users = json_lines(&env, &["log", f, "--all", "--type", "user", "--json"], 0);
        let want_users = nodes
            .iter()
            .filter(|n| {
                n["type"] == "message"
                    && file_entries(&session(name))
                        .iter()
                        .any(|(_, v)| v["id"] == n["id"] && v["message"]["role"] == "user")
            })
            .count();
        assert_eq!(users.len(), want_users, "{name}");
        assert_eq!(
            json_lines(&env, &["log", f, "--all", "-n", "3", "--json"], 0).len(),
            3.min(nodes.len())
        );
    }
}

#[test]
fn log_all_of_a_migrated_v1_file_has_the_oracle_shape() {
    let env = TestEnv::new();
    let f = session("07-v1");
    let lines = json_lines(&env, &["log", f.to_str().unwrap(), "--all", "--json"], 0);
    let tree = golden("07-v1", "tree");
    // v1 ids are drawn by the migration (pi's are random), so compare types newest first.
    let mut want: Vec<Value> = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["type"].clone())
        .collect();
    want.reverse();
    let got: Vec<Value> = lines.iter().map(|l| l["entryType"].clone()).collect();
    assert_eq!(got, want);
    assert!(
        lines
            .iter()
            .all(|l| l["column"] == 0 && l["active"] == true)
    );
}

#[test]
fn log_all_flags_that_make_no_sense_together_are_refused() {
    let env = TestEnv::new();
    let f = session("02-small-branches");
    let f = f.to_str().unwrap();
    for (args, other) in [
        (&["log", f, "--all", "--reverse"][..], "'--reverse'"),
        (&["log", f, "--all", "--at", "@root"][..], "'--at <ENTRY>'"),
    ] {
        let r = run(&env, args);
        assert_eq!(r.code, 2, "{}", r.stderr);
        let refused = format!("the argument '--all' cannot be used with {other}");
        assert!(r.stderr.contains(&refused), "{}", r.stderr);
    }
}

#[test]
fn log_all_human_snapshots() {
    let env = TestEnv::new();
    let f = session("02-small-branches");
    insta::assert_snapshot!(
        "log_all_02",
        redact(&out(&env, &["log", f.to_str().unwrap(), "--all"], 0), &[])
    );
    let f = session("05-context-edits-labels");
    insta::assert_snapshot!(
        "log_all_05_n40",
        redact(
            &out(&env, &["log", f.to_str().unwrap(), "--all", "-n", "40"], 0),
            &[]
        )
    );
    let f = session("03-compactions");
    insta::assert_snapshot!(
        "log_all_03_user",
        redact(
            &out(
                &env,
                &["log", f.to_str().unwrap(), "--all", "--type", "user"],
                0
            ),
            &[]
        )
    );
}

/// `log --json` (the path and `--all`) prints each entry's `timestamp` and `parentId` as its
/// line has them, as the decoded rendering does, also where the outline keeps no such value
/// (a number or `true`; a `parentId` of 5 or false): every odd, generated and edge fixture.
#[test]
fn log_json_prints_the_time_and_parent_as_the_line_has_them() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [
        fixture("odd"),
        fixture("sessions"),
        crate::common::corpus().join("edge"),
    ] {
        files.extend(
            std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl")),
        );
    }
    files.sort();
    let mut odd_values = 0;
    for file in &files {
        let env = TestEnv::new();
        let f = file.to_str().unwrap();
        // By id, the last line wins (pi's index); lines that are no JSON object are passed over.
        let mut lines: HashMap<String, Value> = HashMap::new();
        for line in String::from_utf8_lossy(&std::fs::read(file).unwrap()).lines() {
            if let Ok(v) = serde_json::from_str::<Value>(line)
                && let Some(id) = v.get("id").and_then(Value::as_str)
            {
                lines.insert(id.to_owned(), v);
            }
        }
        for args in [&["log", f, "--json"][..], &["log", f, "--all", "--json"]] {
            let r = run(&env, args);
            for out in r
                .stdout
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap())
            {
                let Some(v) = out["id"].as_str().and_then(|id| lines.get(id)) else {
                    continue;
                };
                for k in ["timestamp", "parentId"] {
                    let want = v.get(k).cloned().unwrap_or(Value::Null);
                    odd_values += usize::from(!want.is_string() && !want.is_null());
                    assert_eq!(out[k], want, "{f} {args:?} {}: {k}", out["id"]);
                }
            }
        }
    }
    assert!(odd_values >= 4, "{odd_values}");
}

/// `log --since DATE` shows the entries `log` shows whose `timestamp` is at or after DATE (pi's
/// times are fixed-width UTC, so they order as strings), with `-n`, `--reverse`, `--type` and
/// `--all` as without it; the same instant written with an offset gives the same lines.
#[test]
fn log_since_keeps_the_entries_written_on_or_after_the_date() {
    let env = TestEnv::new();
    let ids = |lines: &[Value]| -> Vec<String> {
        lines
            .iter()
            .map(|l| l["id"].as_str().unwrap().to_owned())
            .collect()
    };
    for name in [
        "03-compactions",
        "04-many-branches",
        "05-context-edits-labels",
    ] {
        let path = session(name);
        let f = path.to_str().unwrap();
        let every = json_lines(&env, &["log", f, "--all", "--json"], 0);
        let mut times: Vec<&str> = every
            .iter()
            .filter_map(|l| l["timestamp"].as_str())
            .collect();
        times.sort_unstable();
        let mid = times[times.len() / 2].to_owned();
        let after = |lines: &[Value]| -> Vec<String> {
            ids(&lines
                .iter()
                .filter(|l| l["timestamp"].as_str().is_some_and(|t| t >= mid.as_str()))
                .cloned()
                .collect::<Vec<_>>())
        };
        let mut narrowed = false;
        for extra in [
            &[][..],
            &["--reverse"],
            &["--type", "user"],
            &["--all"],
            &["--all", "--type", "assistant"],
        ] {
            let mut plain = vec!["log", f, "--json"];
            plain.extend_from_slice(extra);
            let want = after(&json_lines(&env, &plain, 0));
            let mut since = plain.clone();
            since.extend(["--since", &mid]);
            let got = json_lines(&env, &since, 0);
            assert_eq!(ids(&got), want, "{name} {since:?}");
            narrowed |= !want.is_empty() && want.len() < json_lines(&env, &plain, 0).len();
            // -n counts the entries shown; with --reverse, the oldest of the first N.
            if !extra.contains(&"--all") {
                let mut n3 = since.clone();
                n3.extend(["-n", "3"]);
                let got = ids(&json_lines(&env, &n3, 0));
                let mut first3: Vec<String> = if extra.contains(&"--reverse") {
                    let mut newest_first = want.clone();
                    newest_first.reverse();
                    newest_first.truncate(3);
                    newest_first.reverse();
                    newest_first
                } else {
                    want.clone()
                };
                first3.truncate(3);
                assert_eq!(got, first3, "{name} {n3:?}");
            }
        }
        assert!(
            narrowed,
            "{name}: --since {mid} showed everything or nothing"
        );
        // The same instant at +02:00.
        let ms = pisess_engine::import::iso_to_ms(&mid).unwrap();
        let local = pisess_engine::export::ms_to_iso(ms + 120 * 60_000);
        let t = format!("{}+02:00", local.trim_end_matches('Z'));
        assert_eq!(
            run(&env, &["log", f, "--since", &t]).stdout,
            run(&env, &["log", f, "--since", &mid]).stdout,
            "{name} --since {t}"
        );
    }
    // A date that does not read is refused, naming the forms.
    let r = run(
        &env,
        &[
            "log",
            session("02-small-branches").to_str().unwrap(),
            "--since",
            "soon",
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("cannot read the date \"soon\""),
        "{}",
        r.stderr
    );
}

/// `grep --since` and `log --since` read a `timestamp` that is no string as pi's `new Date`
/// does (a number is milliseconds, `true` 1 ms, `null` 0), so they keep the same entries.
#[test]
fn grep_and_log_since_read_odd_times_as_new_date_does() {
    let env = TestEnv::new();
    let file = fixture("odd/ts-number-sibling-order.jsonl");
    let f = file.to_str().unwrap();
    let since = "2026-02-01T10:00:02Z";
    let grep = json_lines(
        &env,
        &["grep", ".", "--session", f, "--since", since, "--json"],
        0,
    );
    let mut got = grep_ids(&grep);
    assert_eq!(got, ["n1", "n2", "n3", "n6"]);
    let log = json_lines(&env, &["log", f, "--all", "--since", since, "--json"], 0);
    let mut shown: Vec<String> = log
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_owned())
        .collect();
    got.sort();
    shown.sort();
    assert_eq!(got, shown);
}

/// `log --all --type T` draws the graph of the entries it shows, each linked to its nearest
/// shown ancestor (git's history simplification): the graph read back from the text (lanes,
/// joins, and `~` where an entry's ancestors are all hidden) links each entry shown to exactly
/// that ancestor, computed here from the file. When nothing matches it prints nothing (as
/// `log --type T` does).
#[test]
fn log_all_with_a_type_draws_the_graph_of_the_lines_shown() {
    let env = TestEnv::new();
    for name in [
        "04-many-branches",
        "02-small-branches",
        "05-context-edits-labels",
    ] {
        let path = session(name);
        let f = path.to_str().unwrap();
        for t in ["nosuch", "compaction"] {
            let flat = run(&env, &["log", f, "--type", t]);
            let all = run(&env, &["log", f, "--all", "--type", t]);
            if flat.stdout.is_empty() {
                assert_eq!((all.code, all.stdout.as_str()), (0, ""), "--all --type {t}");
            }
        }
        let entries = file_entries(&path);
        let parent: HashMap<String, Option<String>> = entries
            .iter()
            .map(|(_, v)| {
                (
                    v["id"].as_str().unwrap().to_owned(),
                    v["parentId"].as_str().map(str::to_owned),
                )
            })
            .collect();
        for t in ["user", "label", "branch_summary", "toolResult", "assistant"] {
            let shown = |id: &str| {
                let v = &entries.iter().find(|(_, v)| v["id"] == id).unwrap().1;
                v["type"] == t || v["message"]["role"] == t
            };
            // The nearest shown ancestor of each entry shown, from the file.
            let mut want: HashMap<String, Option<String>> = HashMap::new();
            for id in parent.keys().filter(|id| shown(id)) {
                let mut at = parent[id].clone();
                while let Some(p) = at.clone().filter(|p| !shown(p)) {
                    at = parent[&p].clone();
                }
                want.insert(id.clone(), at);
            }
            if want.is_empty() {
                continue;
            }
            // The graph as drawn: a lane holds the entries waiting for their parent, the next
            // entry drawn at its column; a join merges lanes; `~` ends one.
            let human = out(&env, &["log", f, "--all", "--type", t], 0);
            let mut lanes: Vec<Vec<String>> = Vec::new();
            let mut got: HashMap<String, Option<String>> = HashMap::new();
            let what = format!("{name} --type {t}:\n{human}");
            for l in human.lines() {
                let rest = l.trim_start_matches("│ ");
                let col = (l.len() - rest.len()) / "│ ".len();
                if rest.starts_with("────") || rest.starts_with("│ ────") {
                    continue;
                }
                if rest == "~" {
                    assert_eq!(lanes.len(), col + 1, "{what}");
                    for child in lanes.pop().unwrap() {
                        got.insert(child, None);
                    }
                } else if let Some(j) = rest.strip_prefix("├─") {
                    let k = 2 + j.matches("┴─").count();
                    assert!(j.ends_with('╯'), "{what}");
                    assert_eq!(lanes.len(), col + k, "{what}");
                    let merged: Vec<String> = lanes.drain(col..).flatten().collect();
                    lanes.push(merged);
                } else {
                    let mut chars = rest.chars();
                    let glyph = chars.next().unwrap();
                    assert!(['@', '●', '○'].contains(&glyph), "{l}\n{what}");
                    let short: String = chars.skip(1).take(8).collect();
                    let id = parent
                        .keys()
                        .find(|id| id.starts_with(&short))
                        .unwrap()
                        .clone();
                    assert!(lanes.len() <= col + 1, "{what}");
                    if lanes.len() == col + 1 {
                        for child in lanes.pop().unwrap() {
                            got.insert(child, Some(id.clone()));
                        }
                    }
                    lanes.push(vec![id]);
                }
            }
            for child in lanes.into_iter().flatten() {
                got.insert(child, None);
            }
            let mut diff: Vec<String> = want
                .keys()
                .chain(got.keys())
                .filter(|k| got.get(*k) != want.get(*k))
                .map(|k| {
                    format!(
                        "{k}: drawn {:?}, nearest shown {:?}",
                        got.get(k),
                        want.get(k)
                    )
                })
                .collect();
            diff.sort();
            diff.dedup();
            assert!(diff.is_empty(), "{}\n{what}", diff.join("\n"));
        }
    }
}

/// A 100,000-deep chain is one lane and no recursion.
#[test]
fn log_all_on_a_deep_chain() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("deep.jsonl");
    let n = 100_000usize;
    let mut body = String::from(
        r#"{"type":"session","version":3,"id":"deep-0000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    );
    body.push('\n');
    for i in 0..n {
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"{:08x}\"", i - 1)
        };
        body.push_str(&format!(
            r#"{{"type":"message","id":"{i:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"m{i}","timestamp":0}}}}"#
        ));
        body.push('\n');
    }
    std::fs::write(&p, body).unwrap();
    let f = p.to_str().unwrap();
    let text = out(&env, &["log", f, "--all"], 0);
    assert_eq!(text.lines().count(), n);
    assert!(text.lines().all(|l| !l.starts_with('│')));
    assert!(text.lines().last().unwrap().starts_with("● 00000000"));

    // A reader that stops early (`pisess log --all | head -1`): a quiet exit 0.
    stops_quietly_on_a_closed_pipe(&env, &["log", f, "--all"]);
}

/// A fan (a root with 2,000 children, each a tip) opens a lane per sibling: past 25 lanes (a
/// quarter of 100 columns) the outermost fold into `[+N]`, so no line grows with the lanes and
/// the output grows with the siblings, not their square (one lane per sibling drawn made 2,000
/// siblings 12 MB, 100,000 siblings 20 GB).
#[test]
fn log_all_on_a_fan_folds_its_lanes() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fan.jsonl");
    let n = 2_000usize;
    let mut body = String::from(
        r#"{"type":"session","version":3,"id":"fan-0000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
    );
    body.push('\n');
    for i in 0..=n {
        let parent = if i == 0 { "null" } else { "\"00000000\"" };
        body.push_str(&format!(
            r#"{{"type":"message","id":"{i:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":"m{i}","timestamp":0}}}}"#
        ));
        body.push('\n');
    }
    std::fs::write(&p, body).unwrap();
    let f = p.to_str().unwrap();
    let text = out(&env, &["log", f, "--all"], 0);
    let lines: Vec<&str> = text.lines().collect();
    // The siblings, newest first, the join, the root.
    assert_eq!(lines.len(), n + 2);
    // A line's fixed columns (id, time, type, tokens) take ~50 characters however narrow the
    // room left for its text, so a line may pass the width by a little, but not by its lanes.
    for l in &lines {
        assert!(
            l.chars().count() <= 120,
            "{} characters: {l}",
            l.chars().count()
        );
    }
    assert!(text.len() < 200 * (n + 2), "{} bytes", text.len());
    assert!(lines[0].starts_with(&format!("@ {n:08x}")));
    assert!(lines[25].starts_with(&format!("{}○ {:08x}", "│ ".repeat(25), n - 25)));
    // The sibling in lane 26 and the last one (lane n - 1) show their 25 innermost lanes.
    let lanes = "│ ".repeat(25);
    assert!(lines[26].starts_with(&format!("[+1] {lanes}○ {:08x}", n - 26)));
    assert!(lines[n - 1].starts_with(&format!("[+{}] {lanes}○ 00000001", n - 26)));
    // All n lanes join the root: 25 drawn, the rest counted.
    assert_eq!(
        lines[n],
        format!("├─{}[+{}]─╯", "┴─".repeat(25), n - 2 - 25)
    );
    assert!(lines[n + 1].starts_with("● 00000000"));
    // --json keeps each entry's true lane.
    let json = json_lines(&env, &["--json", "log", f, "--all"], 0);
    assert_eq!(json[n - 1]["column"], n - 1);
}

// ---- diff --context ---------------------------------------------------------------------------

#[test]
fn diff_context_json_equals_the_oracle_contexts() {
    let mut pairs = 0;
    for name in V3 {
        let env = TestEnv::new();
        let f = session(name);
        let f = f.to_str().unwrap();
        let at = golden(name, "context-at");
        let pool = at["messagePool"].as_array().unwrap();
        let sampled: Vec<(&String, &Value)> = at["at"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(id, w)| *id != "no-such-id" && w.get("error").is_none())
            .collect();
        let msgs = |w: &Value| -> Vec<Value> {
            w["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| pool[usize::try_from(i.as_u64().unwrap()).unwrap()].clone())
                .collect()
        };
        for (i, (a, wa)) in sampled.iter().enumerate().take(6) {
            for (b, wb) in sampled.iter().skip(i).take(4) {
                let (ma, mb) = (msgs(wa), msgs(wb));
                let common = ma.iter().zip(&mb).take_while(|(x, y)| x == y).count();
                let differs = common != ma.len()
                    || common != mb.len()
                    || wa["model"] != wb["model"]
                    || wa.get("thinkingLevel") != wb.get("thinkingLevel");
                let got = json(
                    &env,
                    &["diff", f, a, b, "--context", "--json"],
                    i32::from(differs),
                );
                assert_eq!(got["commonMessages"], common, "{name} {a} {b}");
                let side = |v: &Value| -> Vec<Value> {
                    v.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x["message"].clone())
                        .collect()
                };
                assert_eq!(side(&got["onlyA"]), ma[common..], "{name} {a} {b}");
                assert_eq!(side(&got["onlyB"]), mb[common..], "{name} {a} {b}");
                assert_eq!(got["modelA"], wa["model"], "{name} {a}");
                assert_eq!(got["modelB"], wb["model"], "{name} {b}");
                assert_eq!(
                    got["tokensA"], wa["estimate"]["projected"]["tokens"],
                    "{name} {a}"
                );
                // Each remaining message names an entry of the oracle's context entries.
                let ids: HashSet<String> = strs(&wa["contextEntryIds"]).into_iter().collect();
                for x in got["onlyA"].as_array().unwrap() {
                    assert!(ids.contains(x["entryId"].as_str().unwrap()), "{name} {a}");
                }
                pairs += 1;
            }
        }
    }
    assert!(pairs >= 100, "only {pairs} pairs compared");
}

/// A migrated v1 file: the context at the leaf, rebuilt from the diff against the root, is the
/// oracle's.
#[test]
fn diff_context_of_a_migrated_v1_file() {
    let env = TestEnv::new();
    let f = session("07-v1");
    let got = json(
        &env,
        &[
            "diff",
            f.to_str().unwrap(),
            "@root",
            "@leaf",
            "--context",
            "--json",
        ],
        1,
    );
    let want = golden("07-v1", "context")["messages"].clone();
    let want = want.as_array().unwrap();
    let common = usize::try_from(got["commonMessages"].as_u64().unwrap()).unwrap();
    let only_b: Vec<Value> = got["onlyB"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["message"].clone())
        .collect();
    assert_eq!(only_b, want[common..]);
    assert_eq!(got["modelB"], golden("07-v1", "context")["model"]);
}

#[test]
fn diff_context_human_snapshot() {
    let env = TestEnv::new();
    let name = "03-compactions";
    let f = session(name);
    let tree = golden(name, "tree");
    let leaf = tree["leafId"].as_str().unwrap();
    // Another tip of the tree: a branch left earlier.
    let other = tree["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["children"].as_array().unwrap().is_empty() && n["id"] != leaf)
        .unwrap()["id"]
        .as_str()
        .unwrap();
    let (a, b) = (leaf, other);
    let text = out(&env, &["diff", f.to_str().unwrap(), a, b, "--context"], 1);
    insta::assert_snapshot!("diff_context_03", text);
    // The same entry: no difference, exit 0.
    out(&env, &["diff", f.to_str().unwrap(), a, a, "--context"], 0);
}

/// `diff --context` reads both contexts one entry at a time, as `context` does: on a
/// 200,000-entry chain (imported first), the contexts at `@leaf~100000` and `@leaf` (300,000
/// entries of path) compare inside a 256 MiB address space (30 MB of memory; holding both
/// paths and their messages as JSON values took 600 MB and aborted there), in both forms,
/// with the right counts.
#[test]
fn diff_context_of_a_long_chain_runs_in_bounded_memory() {
    use std::io::Write as _;
    let env = TestEnv::new();
    let file = env.home.path().join("deep.jsonl");
    let (n, back) = (200_000usize, 100_000usize);
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    writeln!(
        w,
        r#"{{"type":"session","version":3,"id":"deep","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}}"#
    )
    .unwrap();
    for i in 0..n {
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"{:08x}\"", i - 1)
        };
        writeln!(
            w,
            r#"{{"type":"message","id":"{i:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"message {i}","timestamp":1}}}}"#
        )
        .unwrap();
    }
    w.into_inner().unwrap().sync_all().unwrap();
    let f = file.to_str().unwrap();
    out(&env, &["import", f], 0);
    let a = format!("@leaf~{back}");
    for json in [false, true] {
        let mut args = vec!["diff", f, &a, "@leaf", "--context"];
        if json {
            args.insert(0, "--json");
        }
        let r = env.pisess_limited(256 << 20).args(&args).output().unwrap();
        let stdout = String::from_utf8_lossy(&r.stdout);
        assert_eq!(
            r.status.code(),
            Some(1),
            "{args:?}: {}",
            String::from_utf8_lossy(&r.stderr)
        );
        let common = n - back;
        if json {
            let v: Value = serde_json::from_str(stdout.trim_end()).unwrap();
            assert_eq!(v["commonMessages"], common);
            assert_eq!(v["onlyA"].as_array().unwrap().len(), 0);
            let only_b = v["onlyB"].as_array().unwrap();
            assert_eq!(only_b.len(), back);
            assert_eq!(only_b[0]["entryId"], format!("{common:08x}"));
            assert_eq!(
                only_b[back - 1]["message"]["content"],
                format!("message {}", n - 1)
            );
        } else {
            let lines: Vec<&str> = stdout.lines().collect();
            assert_eq!(lines.len(), 3 + back);
            assert!(lines[0].ends_with(&format!(": {common} message(s) in common")));
            assert!(lines[1].contains(&format!(": 0 more message(s), {common} in all")));
            assert!(lines[2].contains(&format!(": {back} more message(s), {n} in all")));
            assert!(lines[3].starts_with(&format!("> {common:08x} user")));
        }
    }
}

// ---- diff SESSION_A SESSION_B (fork and parent) -------------------------------------------------

fn oracle() -> PathBuf {
    root().join("../shared/oracle/oracle")
}

/// Forks `parent` at `id` with the live oracle (pi's own `createBranchedSession`).
fn oracle_fork(parent: &Path, id: &str, out_file: &Path) -> Value {
    let o = std::process::Command::new(oracle())
        .arg("fork")
        .arg(parent)
        .arg(id)
        .arg(out_file)
        .output()
        .unwrap();
    let text = String::from_utf8(o.stdout).unwrap();
    let v: Value = serde_json::from_str(text.trim_end())
        .unwrap_or_else(|e| panic!("oracle fork: {e}: {text}"));
    assert!(v.get("error").is_none(), "oracle fork: {v}");
    assert!(out_file.is_file());
    v
}

/// The middle user message of a session's active path (where pi users fork from).
fn middle_user(name: &str) -> String {
    let tree = golden(name, "tree");
    let path = strs(&golden(name, "path")[tree["leafId"].as_str().unwrap()]);
    let entries = file_entries(&session(name));
    let users: Vec<&String> = path
        .iter()
        .filter(|id| {
            entries
                .iter()
                .any(|(_, v)| v["id"] == id.as_str() && v["message"]["role"] == "user")
        })
        .collect();
    users[users.len() / 2].clone()
}

/// Expected, from two files, for `diff A B`: their active paths walked side by side, an entry
/// common when both hold it next with the same line, or the same JSON but for `parentId`
/// (pi's fork re-parents the entry after a label it drops), a label on one side only passed
/// over and counted as that side's own. The number of common entries, the positions of the
/// last one on each path, and each side's own entries (the labels passed over before it, then
/// all after it).
fn fork_walk(a: &Path, b: &Path) -> (usize, (usize, usize), [Vec<String>; 2]) {
    let values = |f: &Path| -> HashMap<String, (String, Value)> {
        file_entries(f)
            .into_iter()
            .filter_map(|(l, v)| Some((v["id"].as_str()?.to_owned(), (l, v))))
            .collect()
    };
    let (va, vb) = (values(a), values(b));
    let (pa, pb) = (file_leaf_path(a), file_leaf_path(b));
    let label = |v: &Value| v["type"] == "label";
    let bare = |v: &Value| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().remove("parentId");
        v
    };
    let (mut i, mut j, mut common, mut last) = (0, 0, 0, (0, 0));
    let (mut skipped_a, mut skipped_b) = (Vec::new(), Vec::new());
    while i < pa.len() || j < pb.len() {
        let x = pa.get(i).map(|id| &va[id.as_str()]);
        let y = pb.get(j).map(|id| &vb[id.as_str()]);
        match (x, y) {
            (Some(x), Some(y)) if x.0 == y.0 || (!label(&x.1) && bare(&x.1) == bare(&y.1)) => {
                common += 1;
                last = (i, j);
                i += 1;
                j += 1;
            }
            (Some(x), _) if label(&x.1) => {
                skipped_a.push(i);
                i += 1;
            }
            (_, Some(y)) if label(&y.1) => {
                skipped_b.push(j);
                j += 1;
            }
            _ => break,
        }
    }
    let own = |p: &[String], skipped: &[usize], l: usize| -> Vec<String> {
        let before = skipped.iter().filter(|&&x| x < l).map(|&x| p[x].clone());
        before.chain(p[l..].iter().cloned()).collect()
    };
    let own_a = own(&pa, &skipped_a, last.0 + 1);
    let own_b = own(&pb, &skipped_b, last.1 + 1);
    (common, last, [own_a, own_b])
}

/// pi's fork drops the labels of the path it copies (re-parenting the entry after each) and
/// writes them again, as new entries, at its end: `diff` passes over them, so a fork of the
/// whole path holds every entry of its parent (it split at the first label).
#[test]
fn diff_of_a_fork_passes_over_the_labels_pi_fork_drops() {
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent.jsonl");
    std::fs::write(
        &parent,
        concat!(
            r#"{"type":"session","version":3,"id":"cccc0000-0000-7000-8000-000000000003","timestamp":"2026-07-25T09:00:00.000Z","cwd":"/w"}"#,
            "\n",
            r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-07-25T09:00:01.000Z","message":{"role":"user","content":"first","timestamp":1785000001000}}"#,
            "\n",
            r#"{"type":"label","id":"l1","parentId":"u1","timestamp":"2026-07-25T09:00:02.000Z","targetId":"u1","label":"start"}"#,
            "\n",
            r#"{"type":"message","id":"u2","parentId":"l1","timestamp":"2026-07-25T09:00:03.000Z","message":{"role":"user","content":"second","timestamp":1785000003000}}"#,
            "\n",
            r#"{"type":"message","id":"u3","parentId":"u2","timestamp":"2026-07-25T09:00:04.000Z","message":{"role":"user","content":"third","timestamp":1785000004000}}"#,
            "\n",
        ),
    )
    .unwrap();
    let env = TestEnv::new();
    let fork = dir.path().join("fork.jsonl");
    let made = oracle_fork(&parent, "u3", &fork);
    let (p, k) = (parent.to_str().unwrap(), fork.to_str().unwrap());
    let new_label = strs(&made["entryIds"]).last().unwrap().clone();
    assert_eq!(
        fork_walk(&parent, &fork),
        (3, (3, 2), [vec!["l1".to_owned()], vec![new_label.clone()]])
    );
    let got = json(&env, &["diff", p, k, "--json"], 1);
    assert_eq!(got["common"], 3, "{got}");
    assert_eq!(got["commonAncestorId"], "u3", "{got}");
    // The label the fork dropped is the parent's own, the one it wrote again the fork's.
    assert_eq!(got["onlyA"], serde_json::json!(["l1"]), "{got}");
    assert_eq!(strs(&got["onlyB"]), [new_label], "{got}");
    let swapped = json(&env, &["diff", k, p, "--json"], 1);
    assert_eq!(swapped["onlyA"], got["onlyB"]);
    assert_eq!(swapped["onlyB"], got["onlyA"]);
    // pisess's own fork drops and re-creates the labels as pi's does.
    let ours = dir.path().join("ours.jsonl");
    out(&env, &["fork", p, "u3", "-o", ours.to_str().unwrap()], 0);
    let got = json(&env, &["diff", p, ours.to_str().unwrap(), "--json"], 1);
    assert_eq!(got["common"], 3, "{got}");
    assert_eq!(got["onlyA"], serde_json::json!(["l1"]), "{got}");
    // A copy of the session without its label differs from it by that label alone (exit 1).
    let bare = dir.path().join("bare.jsonl");
    let text = std::fs::read_to_string(&parent).unwrap();
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| !l.contains(r#""id":"l1""#))
        .collect();
    // pi's fork gives the entry after a dropped label the label's parent; so does this copy.
    let kept = kept
        .join("\n")
        .replace(r#""parentId":"l1""#, r#""parentId":"u1""#);
    std::fs::write(&bare, kept + "\n").unwrap();
    let got = json(&env, &["diff", p, bare.to_str().unwrap(), "--json"], 1);
    assert_eq!(got["common"], 3, "{got}");
    assert_eq!(got["onlyA"], serde_json::json!(["l1"]), "{got}");
    assert_eq!(got["onlyB"], serde_json::json!([]), "{got}");
}

#[test]
fn diff_of_a_fork_and_its_parent_finds_where_they_diverge() {
    let name = "04-many-branches";
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent.jsonl");
    std::fs::copy(session(name), &parent).unwrap();
    let leaf = golden(name, "tree")["leafId"].as_str().unwrap().to_owned();
    for at in [middle_user(name), leaf] {
        let env = TestEnv::new();
        let fork = dir.path().join(format!("fork-{at}.jsonl"));
        let made = oracle_fork(&parent, &at, &fork);
        let (p, k) = (parent.to_str().unwrap(), fork.to_str().unwrap());

        let line_of = |f: &Path| -> HashMap<String, String> {
            file_entries(f)
                .into_iter()
                .filter_map(|(l, v)| Some((v["id"].as_str()?.to_owned(), l)))
                .collect()
        };
        let lp = line_of(&parent);
        let (pp, pk) = (file_leaf_path(&parent), file_leaf_path(&fork));
        let (common, (i, j), [own_a, own_b]) = fork_walk(&parent, &fork);
        // The fork's own path starts with the oracle's entry ids up to the fork point.
        assert!(common >= 1);
        assert_eq!(pk[..=j], strs(&made["entryIds"])[..=j]);

        let got = json(&env, &["diff", p, k, "--json"], 1);
        assert_eq!(got["relation"], "bForkOfA");
        assert_eq!(got["common"], common);
        assert_eq!(got["commonAncestorId"], pp[i].as_str());
        assert_eq!(strs(&got["onlyA"]), own_a);
        assert_eq!(strs(&got["onlyB"]), own_b);
        assert_eq!(got["a"]["leafId"], pp.last().unwrap().as_str());
        assert_eq!(got["b"]["leafId"], pk.last().unwrap().as_str());
        // Swapped: the same split, the other way round.
        let swapped = json(&env, &["diff", k, p, "--json"], 1);
        assert_eq!(swapped["relation"], "aForkOfB");
        assert_eq!(swapped["onlyA"], got["onlyB"]);
        assert_eq!(swapped["onlyB"], got["onlyA"]);
        // A session against itself: no difference.
        let same = json(&env, &["diff", p, p, "--json"], 0);
        assert_eq!(same["onlyA"].as_array().unwrap().len(), 0);
        let text = out(&env, &["diff", p, p], 0);
        assert!(
            text.contains(&format!(
                "the active paths are the same ({} entries)",
                pp.len()
            )),
            "{text}"
        );

        let sid = made["header"]["id"].as_str().unwrap();
        let text = out(&env, &["diff", p, k], 1);
        assert!(text.starts_with(&format!("{sid} is a fork of ")), "{text}");
        if at != golden(name, "tree")["leafId"] {
            // Entries pi's fork made (re-created labels) get random ids.
            let fresh: Vec<String> = pk
                .iter()
                .filter(|id| !lp.contains_key(id.as_str()))
                .map(|id| id[..8].to_owned())
                .collect();
            let mut subst = vec![
                (sid, "$FORK_SESSION_ID"),
                (dir.path().to_str().unwrap(), "$TMP"),
            ];
            subst.extend(fresh.iter().map(|id| (id.as_str(), "$NEW_ID")));
            insta::assert_snapshot!("diff_fork_04_middle", redact(&text, &subst));
        }
    }
    // Two unrelated sessions: compared, but said to be unrelated.
    let env = TestEnv::new();
    let a = session("01-tiny");
    let b = session("02-small-branches");
    let got = json(
        &env,
        &["diff", a.to_str().unwrap(), b.to_str().unwrap(), "--json"],
        1,
    );
    assert_eq!(got["relation"], Value::Null);
    assert_eq!(got["commonAncestorId"], Value::Null);
}

// ---- stats ------------------------------------------------------------------------------------

/// Counts from an independent scan of parsed lines.
#[derive(Default, Debug, PartialEq)]
struct Scan {
    entries: u64,
    messages: u64,
    tool_calls: HashMap<String, u64>,
    input: u64,
    output: u64,
    total: u64,
    cost: f64,
}

/// pi's `getSessionStats` (agent-session.js, pi 1.6): usage of `usage` entries, of compactions
/// and branch summaries that have one, of tool results that have one, and of every assistant
/// message; tokens total = input + output + cacheRead + cacheWrite.
fn scan<'a>(entries: impl Iterator<Item = &'a Value>) -> Scan {
    let mut s = Scan::default();
    let add = |s: &mut Scan, u: &Value| {
        let n = |k: &str| u[k].as_u64().unwrap_or(0);
        s.input += n("input");
        s.output += n("output");
        s.total += n("input") + n("output") + n("cacheRead") + n("cacheWrite");
        s.cost += u["cost"]["total"].as_f64().unwrap_or(0.0);
    };
    for v in entries {
        s.entries += 1;
        if v["type"] == "usage" || v["type"] == "compaction" || v["type"] == "branch_summary" {
            add(&mut s, &v["usage"]);
        }
        if v["type"] != "message" {
            continue;
        }
        s.messages += 1;
        let m = &v["message"];
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "toolCall" {
                *s.tool_calls
                    .entry(b["name"].as_str().unwrap().to_owned())
                    .or_default() += 1;
            }
        }
        if m["role"] == "assistant" || m["role"] == "toolResult" {
            add(&mut s, &m["usage"]);
        }
    }
    s
}

fn check_stats(what: &str, got: &Value, want: &Scan) {
    assert_eq!(got["entries"], want.entries, "{what}");
    assert_eq!(got["messages"], want.messages, "{what}");
    let tools: HashMap<String, u64> = got["toolCalls"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(tools, want.tool_calls, "{what}");
    assert_eq!(got["tokens"]["input"], want.input, "{what}");
    assert_eq!(got["tokens"]["output"], want.output, "{what}");
    assert_eq!(got["tokens"]["total"], want.total, "{what}");
    let cost = got["cost"].as_f64().unwrap();
    assert!(
        (cost - want.cost).abs() < 1e-6,
        "{what}: {cost} vs {}",
        want.cost
    );
}

#[test]
fn stats_of_each_session_equal_an_independent_scan() {
    // 07-v1 too: migration adds ids, not entries, so the v1 lines count the same.
    for name in V3.iter().chain(&["07-v1"]) {
        let env = TestEnv::new();
        let f = session(name);
        let entries = file_entries(&f);
        let want = scan(entries.iter().map(|(_, v)| v));
        let got = json_lines(&env, &["stats", f.to_str().unwrap(), "--json"], 0);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["type"], "total");
        check_stats(name, &got[0], &want);
        // --by day / model: the groups add up to the total.
        for by in ["day", "model", "session"] {
            let lines = json_lines(
                &env,
                &["stats", f.to_str().unwrap(), "--by", by, "--json"],
                0,
            );
            let (groups, total) = lines.split_at(lines.len() - 1);
            assert!(groups.iter().all(|g| g["type"] == "group" && g["by"] == by));
            let sum: u64 = groups.iter().map(|g| g["entries"].as_u64().unwrap()).sum();
            assert_eq!(sum, want.entries, "{name} --by {by}");
            assert_eq!(total[0]["entries"], want.entries);
            if by == "model" {
                // Each model's cost is what pi's breakdown charges it.
                for (key, cost) in pis_usage_breakdown(&entries) {
                    let g = groups.iter().find(|g| g["key"] == key.as_str());
                    let got = g.and_then(|g| g["cost"].as_f64()).unwrap_or(0.0);
                    assert!((got - cost).abs() < 1e-9, "{name} {key}: {got} vs {cost}");
                }
            }
        }
    }
    // --by day keys are the UTC days of the entries' timestamps.
    let env = TestEnv::new();
    let f = session("04-many-branches");
    let lines = json_lines(
        &env,
        &["stats", f.to_str().unwrap(), "--by", "day", "--json"],
        0,
    );
    let mut days: HashMap<String, u64> = HashMap::new();
    for (_, v) in file_entries(&f) {
        *days
            .entry(v["timestamp"].as_str().unwrap()[..10].to_owned())
            .or_default() += 1;
    }
    for g in &lines[..lines.len() - 1] {
        assert_eq!(g["entries"], days[g["key"].as_str().unwrap()], "{g}");
    }
}

/// pi's `getUsageCostBreakdown` (core/usage-totals.js), written out for the test: the cost
/// of each group it keys usage by.
fn pis_usage_breakdown(entries: &[(String, Value)]) -> HashMap<String, f64> {
    let mut by: HashMap<String, f64> = HashMap::new();
    for (_, v) in entries {
        let m = &v["message"];
        let (key, usage) = match (v["type"].as_str(), m["role"].as_str()) {
            (Some("message"), Some("assistant")) => {
                let model = m["responseModel"].as_str().or(m["model"].as_str());
                let key = match (m["provider"].as_str(), model) {
                    (Some(p), Some(m)) => format!("{p}/{m}"),
                    (None, Some(m)) => m.to_owned(),
                    _ => continue,
                };
                (key, &m["usage"])
            }
            (Some("usage"), _) => (
                format!(
                    "{}/{}",
                    v["provider"].as_str().unwrap(),
                    v["model"].as_str().unwrap()
                ),
                &v["usage"],
            ),
            (Some("message"), Some("toolResult")) if !m["usage"].is_null() => {
                ("Tools/summaries".to_owned(), &m["usage"])
            }
            (Some("compaction" | "branch_summary"), _) if !v["usage"].is_null() => {
                ("Tools/summaries".to_owned(), &v["usage"])
            }
            _ => continue,
        };
        if let Some(c) = usage["cost"]["total"].as_f64() {
            *by.entry(key).or_default() += c;
        }
    }
    by
}

/// `stats --by model` charges each usage where pi's breakdown does: an assistant message to the
/// model that answered (`responseModel`), a `usage` entry to its own model (not the one in
/// force), a tool result or summary carrying a usage to "Tools/summaries".
#[test]
fn stats_by_model_charge_usage_where_pis_breakdown_does() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("u.jsonl");
    let usage = |cost: f64| {
        serde_json::json!({"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,
            "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":cost}})
    };
    let lines = [
        serde_json::json!({"type":"session","version":3,"id":"u","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}),
        serde_json::json!({"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",
            "message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"provider":"anthropic",
            "model":"claude-x","responseModel":"claude-x-20260101","api":"a","usage":usage(0.25),
            "stopReason":"stop","timestamp":1}}),
        serde_json::json!({"type":"usage","id":"u1","parentId":"a1","timestamp":"2026-01-01T00:00:02.000Z",
            "kind":"cache_warm","provider":"openai","model":"gpt-5","usage":usage(1.0)}),
        serde_json::json!({"type":"message","id":"r1","parentId":"u1","timestamp":"2026-01-01T00:00:03.000Z",
            "message":{"role":"toolResult","toolCallId":"c","toolName":"task","content":[],
            "isError":false,"usage":usage(0.5),"timestamp":3}}),
        serde_json::json!({"type":"compaction","id":"k1","parentId":"r1","timestamp":"2026-01-01T00:00:04.000Z",
            "summary":"s","firstKeptEntryId":"r1","tokensBefore":10,"usage":usage(0.125)}),
        serde_json::json!({"type":"message","id":"m1","parentId":"k1","timestamp":"2026-01-01T00:00:05.000Z",
            "message":{"role":"user","content":"next","timestamp":5}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&f, text).unwrap();
    let got = json_lines(
        &env,
        &["stats", f.to_str().unwrap(), "--by", "model", "--json"],
        0,
    );
    let groups: HashMap<&str, &Value> = got[..got.len() - 1]
        .iter()
        .map(|g| (g["key"].as_str().unwrap(), g))
        .collect();
    let want = pis_usage_breakdown(&file_entries(&f));
    assert_eq!(want.len(), 3, "{want:?}");
    for (key, cost) in &want {
        assert_eq!(groups[key.as_str()]["cost"].as_f64(), Some(*cost), "{key}");
    }
    // The user message after the compaction counts under the model in force.
    assert_eq!(groups["anthropic/claude-x-20260101"]["entries"], 2);
    assert_eq!(groups["openai/gpt-5"]["entries"], 1);
    assert_eq!(groups["Tools/summaries"]["entries"], 2);
}

#[test]
fn stats_count_an_entry_shared_by_a_fork_and_its_parent_once() {
    let name = "04-many-branches";
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("parent.jsonl");
    std::fs::copy(session(name), &parent).unwrap();
    let fork = dir.path().join("fork.jsonl");
    oracle_fork(&parent, &middle_user(name), &fork);
    // A second, unrelated session with the same content must not be deduplicated against
    // the first: only a fork and its parent share entries.
    let other = dir.path().join("other.jsonl");
    std::fs::copy(session("01-tiny"), &other).unwrap();
    out(&env, &["import", dir.path().to_str().unwrap()], 0);

    let (ep, ek, eo) = (
        file_entries(&parent),
        file_entries(&fork),
        file_entries(&other),
    );
    let parent_lines: HashSet<&str> = ep.iter().map(|(l, _)| l.as_str()).collect();
    let fork_new: Vec<&Value> = ek
        .iter()
        .filter(|(l, _)| !parent_lines.contains(l.as_str()))
        .map(|(_, v)| v)
        .collect();
    let shared = ek.len() - fork_new.len();
    assert!(shared > 10, "the fork shares {shared} entries");
    let all: Vec<&Value> = ep
        .iter()
        .map(|(_, v)| v)
        .chain(fork_new.iter().copied())
        .chain(eo.iter().map(|(_, v)| v))
        .collect();
    let lines = json_lines(&env, &["stats", "--json"], 0);
    let total = lines.last().unwrap();
    check_stats("all", total, &scan(all.into_iter()));
    assert_eq!(total["sharedEntries"], shared);
    assert_eq!(total["sessions"], 3);

    // By session: the parent owns the shared entries; the fork shows what it added.
    let by = json_lines(&env, &["stats", "--by", "session", "--json"], 0);
    let group = |f: &Path| {
        let sid = std::fs::read_to_string(f).unwrap();
        let header: Value = serde_json::from_str(sid.lines().next().unwrap()).unwrap();
        by.iter()
            .find(|g| g["key"] == header["id"])
            .unwrap()
            .clone()
    };
    check_stats("parent", &group(&parent), &scan(ep.iter().map(|(_, v)| v)));
    check_stats("fork", &group(&fork), &scan(fork_new.iter().copied()));
    assert_eq!(group(&fork)["sharedEntries"], shared);

    // One session alone is counted in full.
    let alone = json(&env, &["stats", fork.to_str().unwrap(), "--json"], 0);
    check_stats("fork alone", &alone, &scan(ek.iter().map(|(_, v)| v)));
}

/// A terminal narrower than the table gets one block per group (its name, then a count a
/// line under its title) instead of a table the terminal would wrap: every line fits, and
/// every count of the table is there; a wide one, or output to a pipe, gets the table.
#[test]
fn stats_fit_a_narrow_terminal_in_blocks() {
    let env = TestEnv::new();
    let f = session("04-many-branches");
    let f = f.to_str().unwrap();
    let at = |columns: Option<&str>| {
        let mut cmd = env.pisess();
        cmd.args(["stats", f, "--by", "model"]);
        match columns {
            Some(c) => cmd.env("COLUMNS", c),
            None => cmd.env_remove("COLUMNS"),
        };
        let a = cmd.assert().code(0);
        String::from_utf8(a.get_output().stdout.clone()).unwrap()
    };
    let groups = json_lines(&env, &["--json", "stats", f, "--by", "model"], 0);
    let wide = at(Some("200"));
    let piped = at(None);
    assert_eq!(wide, piped);
    assert!(
        wide.lines().next().unwrap().contains("cache write"),
        "{wide}"
    );
    assert!(wide.lines().any(|l| l.chars().count() > 60), "{wide}");
    let narrow = at(Some("60"));
    for l in narrow.lines() {
        assert!(l.chars().count() <= 60, "{l:?}\n{narrow}");
    }
    // Each group's block: its name, then its counts, as `--json` gives them.
    let blocks: Vec<&str> = narrow.split("\n\n").collect();
    for g in &groups {
        let key = g["key"].as_str().unwrap_or("total");
        let block = blocks
            .iter()
            .find(|b| b.lines().next() == Some(key))
            .unwrap_or_else(|| panic!("no block for {key}:\n{narrow}"));
        let count = |title: &str| -> String {
            let line = block
                .lines()
                .find(|l| l.trim_start().starts_with(title))
                .unwrap_or_else(|| panic!("{key}: no {title}:\n{block}"));
            line.split_whitespace().last().unwrap().to_owned()
        };
        assert_eq!(count("entries"), g["entries"].to_string(), "{key}");
        assert_eq!(count("input"), g["tokens"]["input"].to_string(), "{key}");
        assert_eq!(
            count("cache write"),
            g["tokens"]["cacheWrite"].to_string(),
            "{key}"
        );
        assert_eq!(
            count("cost $"),
            format!("{:.4}", g["cost"].as_f64().unwrap()),
            "{key}"
        );
    }
    assert!(narrow.contains("tool calls: "), "{narrow}");
}

#[test]
fn stats_human_snapshots() {
    let env = TestEnv::new();
    for name in ["03-compactions", "05-context-edits-labels", "07-v1"] {
        out(&env, &["import", session(name).to_str().unwrap()], 0);
    }
    // The tables as a terminal wide enough for them shows them (`stats_fit_a_narrow_terminal_
    // in_blocks` covers a narrow one).
    let wide = |args: &[&str]| {
        let a = env
            .pisess()
            .env("COLUMNS", "200")
            .args(args)
            .assert()
            .code(0);
        String::from_utf8(a.get_output().stdout.clone()).unwrap()
    };
    insta::assert_snapshot!("stats_all", wide(&["stats"]));
    insta::assert_snapshot!(
        "stats_by_model_07",
        wide(&["stats", session("07-v1").to_str().unwrap(), "--by", "model"])
    );
    insta::assert_snapshot!("stats_by_day", wide(&["stats", "--by", "day"]));
    insta::assert_snapshot!(
        "stats_by_session",
        redact(&wide(&["stats", "--by", "session"]), &[])
    );
}

// ---- grep -------------------------------------------------------------------------------------

/// Entry ids whose searchable strings, numbers and booleans (anything under `message.content`,
/// a bash execution's `command`/`output`, a summary, a custom message's `content`) match, by
/// a generic walk; with `since`, only entries whose `timestamp` is at or after it (pi's times
/// are fixed-width UTC, so they order as strings).
fn scan_grep(f: &Path, re: &regex::Regex, role: Option<&str>, since: Option<&str>) -> Vec<String> {
    let mut hits = Vec::new();
    for (_, v) in file_entries(f) {
        if since.is_some_and(|t| v["timestamp"].as_str().is_none_or(|at| at < t)) {
            continue;
        }
        let kind = if v["type"] == "message" {
            v["message"]["role"].as_str().unwrap_or("").to_owned()
        } else {
            v["type"].as_str().unwrap_or("").to_owned()
        };
        if role.is_some_and(|r| r != kind && v["type"] != r) {
            continue;
        }
        let roots: Vec<&Value> = match v["type"].as_str().unwrap() {
            "message" => vec![
                &v["message"]["content"],
                &v["message"]["command"],
                &v["message"]["output"],
            ],
            "compaction" | "branch_summary" => vec![&v["summary"]],
            "custom_message" => vec![&v["content"]],
            _ => vec![],
        };
        let mut stack = roots;
        let mut hit = false;
        while let Some(x) = stack.pop() {
            match x {
                Value::String(s) => hit |= s.split('\n').any(|l| re.is_match(l)),
                // Numbers and booleans as JSON writes them (tool-call arguments hold them).
                Value::Number(_) | Value::Bool(_) => hit |= re.is_match(&x.to_string()),
                Value::Array(a) => stack.extend(a),
                Value::Object(o) => stack.extend(
                    o.iter()
                        .filter(|(k, _)| !matches!(k.as_str(), "type" | "id" | "thinkingSignature"))
                        .map(|(_, v)| v),
                ),
                _ => {}
            }
        }
        if hit {
            hits.push(v["id"].as_str().unwrap().to_owned());
        }
    }
    hits
}

fn grep_ids(lines: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for l in lines.iter().filter(|l| l["type"] == "match") {
        let id = l["entryId"].as_str().unwrap().to_owned();
        if ids.last() != Some(&id) {
            ids.push(id);
        }
    }
    ids
}

#[test]
fn grep_finds_what_an_independent_scan_finds() {
    let cases: &[(&[&str], &str, Option<&str>)] = &[
        (&["pagination"], "pagination", None),
        (&["-i", "PAGINATION"], "(?i)PAGINATION", None),
        (&["borrow|serde"], "borrow|serde", None),
        (&["-F", "unwrap()"], r"unwrap\(\)", None),
        (&["-F", "\""], "\"", None),
        (&["Ωmega"], "Ωmega", None),
        (&["^Successfully"], "^Successfully", Some("toolResult")),
        (&["src/[a-z]+\\.rs"], "src/[a-z]+\\.rs", Some("assistant")),
        (&["explored"], "explored", Some("branch_summary")),
        // Numbers in tool-call arguments (the fixtures hold no booleans there).
        (&["^[0-9]+$"], "^[0-9]+$", None),
        (&["the"], "the", Some("compaction")),
        // -w, against other spellings of "no word character on either side".
        (&["-w", "the"], r"\bthe\b", None),
        (&["-w", "-F", ".rs"], r"(?:^|\W)\.rs(?:$|\W)", None),
        (
            &["-w", "-i", "ERROR"],
            r"(?i)(?:^|[^\w])error(?:[^\w]|$)",
            None,
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    // Whether some --since case kept some of the entries it would otherwise find, not all.
    let mut narrowed = false;
    for name in [
        "03-compactions",
        "04-many-branches",
        "05-context-edits-labels",
        "07-v1",
    ] {
        let env = TestEnv::new();
        let f = session(name);
        let fs = f.to_str().unwrap();
        // A v1 file gets its ids at migration: scan the migrated text.
        let scanned = if name == "07-v1" {
            let m = dir.path().join("07-v1-migrated.jsonl");
            std::fs::write(&m, out(&env, &["migrate", fs, "--stdout"], 0)).unwrap();
            m
        } else {
            f.clone()
        };
        // --since the middle entry's time.
        let mut times: Vec<String> = file_entries(&scanned)
            .iter()
            .filter_map(|(_, v)| v["timestamp"].as_str().map(str::to_owned))
            .collect();
        times.sort_unstable();
        let mid = times[times.len() / 2].clone();
        let since = cases.iter().take(4).map(|(args, re, role)| {
            let args: Vec<&str> = args.iter().copied().chain(["--since", &mid]).collect();
            (args, *re, *role, Some(mid.as_str()))
        });
        let cases = cases
            .iter()
            .map(|(args, re, role)| (args.to_vec(), *re, *role, None))
            .chain(since);
        for (args, re, role, since) in cases {
            let re = regex::Regex::new(re).unwrap();
            let want = scan_grep(&scanned, &re, role, since);
            if since.is_some() {
                let all = scan_grep(&scanned, &re, role, None).len();
                narrowed |= !want.is_empty() && want.len() < all;
            }
            let mut cmd = vec!["grep"];
            cmd.extend_from_slice(&args);
            cmd.extend(["--session", fs, "--json"]);
            if let Some(r) = role {
                cmd.extend(["--role", r]);
            }
            let code = if want.is_empty() { 1 } else { 0 };
            let lines = json_lines(&env, &cmd, code);
            assert_eq!(grep_ids(&lines), want, "{name} {cmd:?}");
            let summary = lines.last().unwrap();
            assert_eq!(summary["type"], "summary");
            assert_eq!(summary["entries"], want.len());
            for l in &lines[..lines.len() - 1] {
                let m = l["match"].as_str().unwrap();
                assert!(l["snippet"].as_str().unwrap().contains(m), "{l}");
            }
        }
    }
    assert!(narrowed);
}

/// `-l`, `-c` and `-m` against the plain listing: the sessions, counts and first matches it
/// gives (itself checked against an independent scan above).
#[test]
fn grep_lists_counts_and_stops_like_ripgrep() {
    let env = TestEnv::new();
    for name in V3 {
        out(&env, &["import", session(name).to_str().unwrap()], 0);
    }
    let pat = "the";
    let all = json_lines(&env, &["grep", pat, "--json"], 0);
    // Each session's file and its matches, in output order.
    let mut per: Vec<(String, Vec<&Value>)> = Vec::new();
    for l in all.iter().filter(|l| l["type"] == "match") {
        let f = l["file"].as_str().unwrap();
        if per.last().is_none_or(|(g, _)| g != f) {
            per.push((f.to_owned(), Vec::new()));
        }
        per.last_mut().unwrap().1.push(l);
    }
    assert!(per.len() >= 3, "{per:?}");
    assert!(
        per.iter().any(|(_, m)| m.len() > 2),
        "some session must match more than twice"
    );
    let entries = |m: &[&Value]| {
        let mut ids: Vec<&str> = m.iter().map(|l| l["entryId"].as_str().unwrap()).collect();
        ids.dedup();
        ids.len()
    };

    // -l: each session with a match, once, in the same order; each search stops at one match.
    let files: Vec<String> = per.iter().map(|(f, _)| f.clone()).collect();
    let text = out(&env, &["grep", "-l", pat], 0);
    assert_eq!(text.lines().collect::<Vec<_>>(), files);
    let lines = json_lines(&env, &["grep", "-l", pat, "--json"], 0);
    let (summary, listed) = lines.split_last().unwrap();
    assert!(listed.iter().all(|l| l["type"] == "session"), "{listed:?}");
    let listed: Vec<&str> = listed.iter().map(|l| l["file"].as_str().unwrap()).collect();
    assert_eq!(listed, files);
    assert_eq!(summary["matches"], per.len());
    assert!(summary["rowsScanned"].as_u64() <= all.last().unwrap()["rowsScanned"].as_u64());

    // -c: FILE:COUNT, COUNT the session's matching lines; with -m, at most that many.
    for max in [None, Some(2u64)] {
        let mut args = vec!["grep", "-c", pat];
        let m;
        if let Some(n) = max {
            m = n.to_string();
            args.extend(["-m", &m]);
        }
        let cap = |n: usize| max.map_or(n, |c| n.min(c as usize));
        let want: Vec<String> = per
            .iter()
            .map(|(f, m)| format!("{f}:{}", cap(m.len())))
            .collect();
        assert_eq!(
            out(&env, &args, 0).lines().collect::<Vec<_>>(),
            want,
            "{args:?}"
        );
        args.push("--json");
        let lines = json_lines(&env, &args, 0);
        for (l, (f, m)) in lines.iter().zip(&per) {
            assert_eq!(l["type"], "count");
            assert_eq!(l["file"], f.as_str());
            assert_eq!(l["matches"], cap(m.len()));
            assert_eq!(l["entries"], entries(&m[..cap(m.len())]));
        }
        assert_eq!(lines.len(), per.len() + 1);
    }

    // -m 2: each session's first two matches of the full listing, nothing else.
    let lines = json_lines(&env, &["grep", "-m", "2", pat, "--json"], 0);
    let want: Vec<&Value> = per
        .iter()
        .flat_map(|(_, m)| m.iter().take(2).copied())
        .collect();
    let got: Vec<&Value> = lines.iter().filter(|l| l["type"] == "match").collect();
    assert_eq!(got, want);

    // -m 0 finds nothing; -l with -c is refused.
    assert_eq!(out(&env, &["grep", "-m", "0", pat], 1), "");
    let r = run(&env, &["grep", "-l", "-c", pat]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("cannot be used with '--count'"),
        "{}",
        r.stderr
    );
}

#[test]
fn grep_prefilter_skips_rows_but_never_a_match() {
    let env = TestEnv::new();
    for name in V3 {
        out(&env, &["import", session(name).to_str().unwrap()], 0);
    }
    let lines = json_lines(&env, &["grep", "pagination", "--json"], 0);
    let s = lines.last().unwrap();
    let (scanned, decoded) = (
        s["rowsScanned"].as_u64().unwrap(),
        s["rowsDecoded"].as_u64().unwrap(),
    );
    assert!(decoded * 4 < scanned, "{s}");
    assert!(s["sessions"].as_u64().unwrap() >= 3, "{s}");
    // Every store session is searched, in path order.
    let files: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "match")
        .map(|l| l["file"].as_str().unwrap())
        .collect();
    let mut sorted = files.clone();
    sorted.sort_unstable();
    assert_eq!(files, sorted);

    // Text hidden behind optional JSON escapes (`\u00e9`, `\/`) is still found.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("escaped.jsonl");
    std::fs::write(
        &p,
        concat!(
            r#"{"type":"session","version":3,"id":"esc-0001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
            "\n",
            r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"caf\u00e9 at src\/lib.rs","timestamp":0}}"#,
            "\n",
            r#"{"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"text","text":"say \"hi\"\nthen bye"}],"timestamp":0}}"#,
            "\n",
        ),
    )
    .unwrap();
    let f = p.to_str().unwrap();
    for (pat, id) in [
        ("café", "aaaa0001"),
        ("src/lib", "aaaa0001"),
        ("say \"hi\"", "aaaa0002"),
        ("then bye", "aaaa0002"),
    ] {
        let lines = json_lines(&env, &["grep", "-F", pat, "--session", f, "--json"], 0);
        assert_eq!(grep_ids(&lines), [id], "{pat}");
    }
    let lines = json_lines(&env, &["grep", "^then", "--session", f, "--json"], 0);
    assert_eq!(lines[0]["line"], 2);
    out(&env, &["grep", "nothing-like-this", "--session", f], 1);
    let r = run(&env, &["grep", "(unclosed", "--session", f]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("-F"), "{}", r.stderr);
}

#[test]
fn grep_human_output_is_terminal_safe_and_snapshotted() {
    let env = TestEnv::new();
    let f = session("04-many-branches");
    let text = out(
        &env,
        &["grep", "pagination", "--session", f.to_str().unwrap()],
        0,
    );
    insta::assert_snapshot!("grep_04_pagination", redact(&text, &[]));

    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hostile.jsonl");
    std::fs::write(
        &p,
        concat!(
            r#"{"type":"session","version":3,"id":"evil-0001","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
            "\n",
            r#"{"type":"message","id":"bbbb0001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"evil \u001b[2J\u001b]0;pwned\u0007 text\r more","timestamp":0}}"#,
            "\n",
        ),
    )
    .unwrap();
    let text = out(&env, &["grep", "evil", "--session", p.to_str().unwrap()], 0);
    for bad in ['\u{1b}', '\u{7}', '\r'] {
        assert!(!text.contains(bad), "{text:?}");
    }
    assert!(text.contains("evil \\u{1b}[2J"), "{text}");
}

// ---- completions and man ------------------------------------------------------------------------

#[test]
fn completions_and_man_pages() {
    let env = TestEnv::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let s = out(&env, &["completions", shell], 0);
        for word in ["grep", "stats", "completions", "context", "all"] {
            assert!(s.contains(word), "{shell}: {word}");
        }
    }
    assert_eq!(run(&env, &["completions", "tcsh"]).code, 2);
    let man = out(&env, &["man"], 0);
    assert!(man.contains(".TH pisess 1"), "{man}");
    assert!(man.contains("grep"));
    // NAME does not repeat the program's name ("pisess \- pisess: inspect…").
    assert!(
        man.contains("\n.SH NAME\npisess \\- inspect, query"),
        "{man}"
    );
    let log = out(&env, &["man", "log"], 0);
    assert!(log.contains(".TH pisess-log 1"), "{log}");
    assert!(log.contains("\\-\\-all"), "{log}");
    let r = run(&env, &["man", "nope"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("commands: "), "{}", r.stderr);
}

/// A byte copy of a session file (a backup, a synced duplicate) is a second session, but its
/// entries are the first's: they are counted once, as a fork's shared entries are, so totals
/// do not double when a session folder holds a copy.
#[test]
fn stats_count_a_copied_session_once() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    std::fs::copy(session("04-many-branches"), &a).unwrap();
    out(&env, &["import", dir.path().to_str().unwrap()], 0);
    let alone = json_lines(&env, &["stats", "--json"], 0);
    let alone = alone.last().unwrap().clone();
    std::fs::copy(&a, dir.path().join("copy.jsonl")).unwrap();
    out(&env, &["import", dir.path().to_str().unwrap()], 0);
    let both = json_lines(&env, &["stats", "--json"], 0);
    let both = both.last().unwrap();
    let entries = file_entries(&a).len();
    assert_eq!(both["sharedEntries"], entries, "{both}");
    for key in [
        "entries",
        "messages",
        "roles",
        "toolCalls",
        "toolErrors",
        "tokens",
        "cost",
    ] {
        assert_eq!(both[key], alone[key], "{key}: {both} vs {alone}");
    }
}

/// Which copy of a session owns the entries the copies share does not depend on the order
/// they were imported in: a store that took the longer copy first counts as a fresh import of
/// the same files (the first copy by path owns them).
#[test]
fn stats_of_copies_do_not_depend_on_the_import_order() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(session("04-many-branches")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let half = lines.len() / 2;
    let join = |ls: &[&str]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
    // b.jsonl first, then a.jsonl, a copy of its first half, and b grows.
    let b = dir.path().join("b.jsonl");
    std::fs::write(&b, join(&lines[..half])).unwrap();
    out(&env, &["import", dir.path().to_str().unwrap()], 0);
    std::fs::copy(&b, dir.path().join("a.jsonl")).unwrap();
    std::fs::write(&b, join(&lines)).unwrap();
    out(&env, &["import", dir.path().to_str().unwrap()], 0);
    let args = ["stats", "--by", "session", "--json"];
    let got = json_lines(&env, &args, 0);
    let fresh = TestEnv::new();
    out(&fresh, &["import", dir.path().to_str().unwrap()], 0);
    let want = json_lines(&fresh, &args, 0);
    assert_eq!(got, want);
    // a.jsonl owns the first half: b adds the rest.
    let total = want.last().unwrap();
    assert_eq!(total["sessions"], 2, "{total}");
    assert_eq!(total["sharedEntries"], half - 1, "{total}");
}

/// Two files with the same session id (pi's edge cases share one) are two sessions.
#[test]
fn stats_tell_apart_files_that_share_a_session_id() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    for name in ["multi-root", "orphan-parent"] {
        std::fs::copy(
            fixture(&format!("edge/{name}.jsonl")),
            dir.path().join(format!("{name}.jsonl")),
        )
        .unwrap();
    }
    out(&env, &["import", dir.path().to_str().unwrap()], 0);
    let lines = json_lines(&env, &["stats", "--by", "session", "--json"], 0);
    let (groups, total) = lines.split_at(lines.len() - 1);
    assert_eq!(total[0]["sessions"], 2);
    assert_eq!(groups.len(), 2, "{groups:?}");
    // The key is the session id, the same for both; the file tells them apart (JSON keeps the
    // two fields apart, where the text table's label is "ID (FILE)").
    let mut files = Vec::new();
    for g in groups {
        let id = g["key"].as_str().unwrap();
        let file = g["file"].as_str().unwrap();
        let header = std::fs::read_to_string(file).unwrap();
        let header: Value = serde_json::from_str(header.lines().next().unwrap()).unwrap();
        assert_eq!(header["id"], id, "{g}");
        assert_eq!(g["sessions"], 1);
        files.push(file.to_owned());
    }
    files.sort();
    let names: Vec<&str> = files
        .iter()
        .map(|f| f.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(names, ["multi-root.jsonl", "orphan-parent.jsonl"]);
    assert_eq!(groups[0]["key"], groups[1]["key"]);
    let text = out(&env, &["stats", "--by", "session"], 0);
    assert!(text.contains("multi-root.jsonl)"), "{text}");
}

/// `diff` whose reader stops early (`pisess diff A B | head -1`) on a diff far longer than a
/// pipe holds: no error, and the status is still the answer, 1 for differences, as when the
/// reader takes the whole diff (of entries, of contexts, of two sessions; text and JSON).
#[test]
fn diff_answers_on_a_closed_pipe() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let line = |id: &str, parent: Option<&str>| {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"the text of {id}","timestamp":1}}}}"#
        ) + "\n"
    };
    let header = |id: &str, parent: Option<&Path>| {
        let parent = parent.map_or(String::new(), |p| format!(r#","parentSession":{p:?}"#));
        format!(
            r#"{{"type":"session","version":3,"id":"{id}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"{parent}}}"#
        ) + "\n"
    };
    // Two sides of 10,000 entries under one root; a fork holding the root and a third side.
    let n = 10_000;
    let side = |c: char| -> String {
        (0..n)
            .map(|i| {
                let parent = if i == 0 {
                    "root".to_owned()
                } else {
                    format!("{c}{:07x}", i - 1)
                };
                line(&format!("{c}{i:07x}"), Some(&parent))
            })
            .collect()
    };
    let a = dir.join("a.jsonl");
    let text = header("a", None) + &line("root", None) + &side('a') + &side('b');
    std::fs::write(&a, text).unwrap();
    let fork = dir.join("fork.jsonl");
    let text = header("fork", Some(&a)) + &line("root", None) + &side('c');
    std::fs::write(&fork, text).unwrap();
    let (a, fork) = (a.to_str().unwrap(), fork.to_str().unwrap());
    out(&env, &["import", a, fork], 0);
    let (ta, tb) = (format!("a{:07x}", n - 1), format!("b{:07x}", n - 1));
    for args in [
        vec!["diff", a, &ta, &tb],
        vec!["--json", "diff", a, &ta, &tb],
        vec!["diff", "--context", a, &ta, &tb],
        vec!["--json", "diff", "--context", a, &ta, &tb],
        vec!["diff", a, fork],
    ] {
        let whole = run(&env, &args);
        assert_eq!(whole.code, 1, "{args:?}: {}", whole.stderr);
        assert!(
            whole.stdout.len() > 128 << 10,
            "{args:?}: {} bytes",
            whole.stdout.len()
        );
        answers_quietly_on_a_closed_pipe(&env, &args, 1);
    }
}

#[test]
fn diff_with_one_entry_says_it_needs_two() {
    let env = TestEnv::new();
    let f = session("02-small-branches");
    let r = run(&env, &["diff", f.to_str().unwrap(), "@leaf"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("diff needs two"), "{}", r.stderr);
    // An entry's id (or prefix) too, where it names no session.
    let show = run(&env, &["--json", "show", f.to_str().unwrap(), "@leaf~1"]);
    let id = serde_json::from_str::<Value>(&show.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for a in [&id[..], &id[..6]] {
        let r = run(&env, &["diff", f.to_str().unwrap(), a]);
        assert_eq!(r.code, 2);
        assert!(r.stderr.contains("is an entry of"), "{a}: {}", r.stderr);
    }
    let r = run(&env, &["diff", f.to_str().unwrap(), "nosuchthing"]);
    assert!(
        r.stderr.contains("no session file or session id matches"),
        "{}",
        r.stderr
    );
    let r = run(&env, &["diff", f.to_str().unwrap(), "@leaf", "--context"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("required arguments were not provided") && r.stderr.contains("<B>"),
        "{}",
        r.stderr
    );
}

/// Escapes in a session's header id, text, label and model never reach the terminal from the
/// new commands' human output.
#[test]
fn new_commands_never_print_escapes_from_a_session() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let evil = "evil \u{1b}[2J\u{1b}]0;pwned\u{7} \r\n\u{9b}31m";
    let text = std::fs::read_to_string(session("02-small-branches")).unwrap();
    let mut lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    lines[0]["id"] = Value::String(format!("sess-{evil}"));
    for l in &mut lines {
        if l["type"] == "message" && l["message"]["role"] == "user" {
            l["message"]["content"] = Value::String(format!("pagination {evil}"));
        }
        if l["type"] == "message" && l["message"]["role"] == "assistant" {
            l["message"]["model"] = Value::String(format!("m-{evil}"));
            l["message"]["content"] = serde_json::json!([
                {"type": "toolCall", "id": "t1", "name": format!("tool-{evil}"),
                 "arguments": {"path": format!("pagination {evil}")}}
            ]);
        }
        if l["type"] == "label" {
            l["label"] = Value::String(evil.to_owned());
        }
    }
    let p = dir.path().join("hostile.jsonl");
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&p, body).unwrap();
    let f = p.to_str().unwrap();
    let other = session("01-tiny");
    let other = other.to_str().unwrap();
    let leaf = golden("02-small-branches", "tree")["leafId"]
        .as_str()
        .unwrap()
        .to_owned();
    let cmds: Vec<Vec<&str>> = vec![
        vec!["log", f, "--all"],
        vec!["grep", "pagination", "--session", f],
        vec!["grep", "pagination"],
        vec!["stats", f, "--by", "model"],
        vec!["stats", "--by", "session"],
        vec!["diff", f, "@root", &leaf, "--context"],
        vec!["diff", f, other],
    ];
    for args in &cmds {
        let r = run(&env, args);
        assert!(r.code <= 1, "{args:?}: {}", r.stderr);
        assert!(!r.stdout.is_empty(), "{args:?}");
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\r'] {
            assert!(
                !r.stdout.contains(bad),
                "{args:?} printed {bad:?}:\n{}",
                r.stdout
            );
        }
    }
}

// ---- files ------------------------------------------------------------------------------------

/// A hit of `pisess files --json`, as the independent scan has it.
fn file_hit(v: &Value) -> crate::tool_scan::Hit {
    let s = |k: &str| v[k].as_str().map(str::to_owned);
    crate::tool_scan::Hit {
        entry_id: s("entry"),
        tool_call_id: s("toolCallId"),
        tool_name: s("tool").unwrap(),
        op: s("op").unwrap(),
        path: s("path").unwrap(),
        is_error: v["isError"].as_bool(),
        active: v["active"].as_bool().unwrap(),
        timestamp: s("timestamp"),
    }
}

/// `pisess --json files ARGS` as hits; exit 1 (nothing found) gives none.
fn files_json(env: &TestEnv, args: &[&str], want_any: bool) -> Vec<crate::tool_scan::Hit> {
    let mut a = vec!["--json", "files"];
    a.extend_from_slice(args);
    json_lines(env, &a, if want_any { 0 } else { 1 })
        .iter()
        .map(|v| {
            assert_eq!(v["type"], "file_op", "{v}");
            file_hit(v)
        })
        .collect()
}

/// `pisess files` over the whole store backs its heap with huge pages where the kernel has
/// them (`cli/src/heap.rs`): while it writes its output, its `[heap]` mapping and the heap of
/// each worker thread's arena (an unnamed mapping) carry `MADV_HUGEPAGE` (`hg` in
/// `/proc/PID/smaps`). Its output (~1.2 MB) outgrows the pipe, which this test does not read
/// until it has looked, so the process is still alive. Without THP in the kernel the advice
/// fails and no mapping may carry the flag. The output is then the same as `--session`'s (whose
/// process keeps the usual heap).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn files_over_the_store_asks_for_huge_pages() {
    use std::io::Read;
    let env = TestEnv::new();
    let file = crate::common::corpus().join("13-large-10000.jsonl");
    let file = file.to_str().unwrap();
    assert_eq!(run(&env, &["import", file]).code, 0);
    let mut child = env
        .pisess_child()
        .args(["--json", "files", "**"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let smaps = format!("/proc/{}/smaps", child.id());
    // (whether a `[heap]` mapping is advised, whether an unnamed one is, every heap's flags)
    let advice = |text: &str| -> (bool, bool, Vec<String>) {
        let (mut heap, mut arena, mut flags) = (false, false, Vec::new());
        let mut name: Option<String> = None;
        for l in text.lines() {
            let first = l.split_whitespace().next().unwrap_or("");
            if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                name = Some(l.split_whitespace().nth(5).unwrap_or("").to_owned());
            } else if let Some(f) = l.strip_prefix("VmFlags:") {
                let hg = f.split_whitespace().any(|x| x == "hg");
                match name.as_deref() {
                    Some("[heap]") => {
                        heap |= hg;
                        flags.push(f.trim().to_owned());
                    }
                    Some("") => arena |= hg,
                    _ => {}
                }
            }
        }
        (heap, arena, flags)
    };
    let thp = Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut seen = (false, false, Vec::new());
    while std::time::Instant::now() < deadline {
        assert!(
            child.try_wait().unwrap().is_none(),
            "pisess files exited before the test looked at its heap (its output fit the pipe)"
        );
        seen = advice(&std::fs::read_to_string(&smaps).unwrap_or_default());
        if seen.0 && seen.1 || !thp && !seen.2.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(
        (seen.0, seen.1),
        (thp, thp),
        "THP in the kernel: {thp}; (main heap advised, a thread heap advised, [heap] VmFlags): \
         {seen:?}"
    );
    assert!(out.len() > 1 << 20, "{}", out.len());
    let again = run(&env, &["--json", "files", "--session", file, "**"]);
    assert_eq!(again.code, 0);
    assert_eq!(out, again.stdout);
}

/// `files --json` equals an independent serde_json scan of the tool calls of every v3 fixture
/// and of the standard corpus's v3 files up to 8 MB, for the whole session and under each
/// filter: `--op read|write|edit|modified`, `--active-only`, `--since`.
#[test]
fn files_json_equals_an_independent_scan_of_the_tool_calls() {
    let env = TestEnv::new();
    let mut files: Vec<PathBuf> = V3
        .iter()
        .filter(|n| **n != "08-v2")
        .map(|n| session(n))
        .collect();
    let mut corpus: Vec<PathBuf> = std::fs::read_dir(crate::common::corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && std::fs::metadata(p).unwrap().len() <= 8 << 20
                && std::fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .next()
                    .is_some_and(|h| h.contains("\"version\":3"))
        })
        .collect();
    corpus.sort();
    files.extend(corpus);
    assert!(files.len() >= 10, "{files:?}");
    let mut args = vec!["import"];
    args.extend(files.iter().map(|p| p.to_str().unwrap()));
    out(&env, &args, 0);
    let mut total = 0;
    let mut since_checked = 0;
    for p in &files {
        let f = p.to_str().unwrap();
        let (want, _) = crate::tool_scan::scan(p);
        let got = files_json(&env, &["**", "--session", f], !want.is_empty());
        assert_eq!(got, want, "{f}");
        total += want.len();
        let only = |keep: &dyn Fn(&crate::tool_scan::Hit) -> bool| -> Vec<crate::tool_scan::Hit> {
            want.iter().filter(|h| keep(h)).cloned().collect()
        };
        for (op, ops) in [
            ("read", &["read"][..]),
            ("write", &["write"][..]),
            ("edit", &["edit"][..]),
            ("modified", &["write", "edit", "modified"][..]),
        ] {
            let w = only(&|h| ops.contains(&h.op.as_str()));
            let g = files_json(&env, &["**", "--session", f, "--op", op], !w.is_empty());
            assert_eq!(g, w, "{f} --op {op}");
        }
        let w = only(&|h| h.active);
        let g = files_json(
            &env,
            &["**", "--session", f, "--active-only"],
            !w.is_empty(),
        );
        assert_eq!(g, w, "{f} --active-only");
        // --since the middle hit's time: pi writes `toISOString()` times (fixed width, UTC),
        // which order as strings.
        let mut times: Vec<&str> = want.iter().filter_map(|h| h.timestamp.as_deref()).collect();
        assert!(
            times.iter().all(|t| t.len() == 24 && t.ends_with('Z')),
            "{f}"
        );
        times.sort_unstable();
        if let Some(mid) = times.get(times.len() / 2) {
            let mid = (*mid).to_owned();
            let w = only(&|h| h.timestamp.as_deref().is_some_and(|t| t >= mid.as_str()));
            assert!(!w.is_empty(), "{f}");
            let g = files_json(&env, &["**", "--session", f, "--since", &mid], true);
            assert_eq!(g, w, "{f} --since {mid}");
            // The same instant written with RFC 3339 offsets (pi's times are `…Z`, UTC).
            if since_checked == 0 {
                let ms = pisess_engine::import::iso_to_ms(&mid).unwrap();
                for (off_min, off) in [(120, "+02:00"), (-330, "-05:30")] {
                    // The local time at that offset, then the offset.
                    let local = pisess_engine::export::ms_to_iso(ms + off_min * 60_000);
                    let t = format!("{}{off}", local.trim_end_matches('Z'));
                    let g = files_json(&env, &["**", "--session", f, "--since", &t], true);
                    assert_eq!(g, w, "{f} --since {t} (= {mid})");
                }
            }
            since_checked += 1;
        }
    }
    assert!(total > 1000, "only {total} hits");
    assert!(since_checked >= 5);
    // A day, an age, and a date that cannot be read.
    let f = session("04-many-branches");
    let f = f.to_str().unwrap();
    let all = files_json(&env, &["**", "--session", f], true);
    assert_eq!(
        files_json(&env, &["**", "--session", f, "--since", "2000-01-01"], true),
        all
    );
    assert!(
        files_json(
            &env,
            &["**", "--session", f, "--since", "2999-01-01"],
            false
        )
        .is_empty()
    );
    // The fixtures are from 2026-07: a day ago is after every one of them.
    assert!(files_json(&env, &["**", "--session", f, "--since", "1d"], false).is_empty());
    let r = run(&env, &["files", "**", "--since", "last tuesday"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("cannot read the date \"last tuesday\""),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("YYYY-MM-DD"), "{}", r.stderr);
    assert!(r.stderr.contains("+02:00"), "{}", r.stderr);
}

/// `files -l` / `-c` list each session with a hit once, in the order of its first hit, with
/// its number of hits for `-c` — the sessions and counts of the plain listing's hits, under the
/// same filters; nothing found is exit 1, `-l` with `-c` a usage error.
#[test]
fn files_lists_and_counts_sessions_like_ripgrep() {
    let env = TestEnv::new();
    let dir = std::fs::canonicalize(fixture("sessions")).unwrap();
    out(&env, &["import", dir.to_str().unwrap()], 0);
    let mut checked = 0;
    for filters in [&[][..], &["--op", "edit"][..], &["--active-only"][..]] {
        for q in ["src/**", "**/*.rs", "nothing/here"] {
            let mut plain = vec!["--json", "files", q];
            plain.extend_from_slice(filters);
            let hits = run(&env, &plain);
            // (session id, hits), in the order of each session's first hit.
            let mut want: Vec<(String, u64)> = Vec::new();
            for l in hits.stdout.lines() {
                let v: Value = serde_json::from_str(l).unwrap();
                let id = v["session"].as_str().unwrap();
                match want.iter_mut().find(|(s, _)| s == id) {
                    Some(w) => w.1 += 1,
                    None => want.push((id.to_owned(), 1)),
                }
            }
            let code = if want.is_empty() { 1 } else { 0 };
            assert_eq!(hits.code, code, "{q} {filters:?}");
            // `[--json] files Q FLAG FILTERS...`
            let with = |flags: &[&'static str]| -> Vec<&str> {
                let (json, flag) = flags.split_at(flags.len() - 1);
                let mut a = json.to_vec();
                a.extend(["files", q]);
                a.extend_from_slice(flag);
                a.extend_from_slice(filters);
                a
            };
            let listed = json_lines(&env, &with(&["--json", "-l"]), code);
            let ids: Vec<&str> = listed
                .iter()
                .map(|l| l["sessionId"].as_str().unwrap())
                .collect();
            let want_ids: Vec<&str> = want.iter().map(|w| w.0.as_str()).collect();
            assert_eq!(ids, want_ids, "-l {q} {filters:?}");
            assert!(listed.iter().all(|l| l["type"] == "session"));
            let files: Vec<&str> = listed.iter().map(|l| l["file"].as_str().unwrap()).collect();
            assert_eq!(
                out(&env, &with(&["-l"]), code).lines().collect::<Vec<_>>(),
                files
            );
            let counted = json_lines(&env, &with(&["--json", "-c"]), code);
            let got: Vec<(String, u64)> = counted
                .iter()
                .map(|l| {
                    (
                        l["sessionId"].as_str().unwrap().to_owned(),
                        l["hits"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, want, "-c {q} {filters:?}");
            let text: Vec<String> = files
                .iter()
                .zip(&want)
                .map(|(f, (_, n))| format!("{f}:{n}"))
                .collect();
            assert_eq!(
                out(&env, &with(&["-c"]), code).lines().collect::<Vec<_>>(),
                text
            );
            checked += want.len();
        }
    }
    assert!(checked >= 10, "{checked}");
    let r = run(&env, &["files", "-l", "-c", "src"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("cannot be used with '--count'"),
        "{}",
        r.stderr
    );
}

/// `files` whose output cannot be written: a reader that stops early is a quiet exit 0 (as
/// `pisess files … | head`), a full device is exit 2 naming the failed write; the store is
/// only read, and answers the same afterwards.
#[test]
fn files_output_to_a_closed_pipe_or_a_full_device() {
    let env = TestEnv::new();
    let dir = std::fs::canonicalize(fixture("sessions")).unwrap();
    out(&env, &["import", dir.to_str().unwrap()], 0);
    let all = out(&env, &["--json", "files", "**"], 0);
    // Twice what a pipe holds (64 KiB), so the writer meets the closed pipe.
    assert!(all.len() > 128 << 10, "{} bytes", all.len());
    stops_quietly_on_a_closed_pipe(&env, &["--json", "files", "**"]);

    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let done = std_command(&env, &["--json", "files", "**"])
        .stdout(full)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot write the output"), "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    assert_eq!(out(&env, &["--json", "files", "**"], 0), all);
}

/// `ls --json` against pi's own listing (`oracle list`) on `fixtures/listing`: the order
/// (newest first; a tie on the time broken by file name, descending, as pi reads a folder),
/// `modified` (message times of 0 or before fall back to the header time), the first-message
/// preview (the first user message with text: an image-only or empty one is skipped), the name
/// and the message count; a message without `content` does not count for `modified`, an entry
/// time with an offset or without seconds is read as `new Date` reads it, and a message whose
/// own time is text (a field the typed view cannot hold) still counts, by its entry's time;
/// a session without messages whose header time is missing or no date is as new as its file
/// (mtime), and a header time written as a number is its `created`, not its `modified`.
#[test]
fn ls_json_follows_pis_listing_rules() {
    let env = TestEnv::new();
    let dir = fixture("listing");
    let d = dir.to_str().unwrap();
    let want = crate::common::oracle(&["list", d]);
    let want = want.as_array().unwrap();
    assert_eq!(want.len(), 14, "the oracle changed: {want:?}");
    let r = run(&env, &["import", d]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let got = json_lines(&env, &["--json", "ls"], 0);
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(want) {
        let ctx = format!("\n got {g}\nwant {w}");
        assert_eq!(g["file"], w["path"], "order{ctx}");
        assert_eq!(g["modified"], w["modified"], "{ctx}");
        assert_eq!(g["created"], w["created"], "{ctx}");
        // pi shows "(no messages)" where pisess gives null.
        let first = Some(&w["firstMessage"])
            .filter(|f| *f != "(no messages)")
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(g["firstMessage"], first, "{ctx}");
        assert_eq!(g["messages"], w["messageCount"], "{ctx}");
        assert_eq!(
            g["name"],
            w.get("name").cloned().unwrap_or(Value::Null),
            "{ctx}"
        );
    }
}

/// `ls --cwd DIR` matches a header `cwd` as pi's `pathsEqual(resolvePath(a), resolvePath(b))`
/// does (`.`, `..`, duplicate and trailing slashes taken out on both sides, a relative DIR
/// resolved from the current folder), and also by DIR's real path when DIR is a link.
#[test]
fn ls_cwd_matches_folders_as_pi_resolves_them() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap().join("proj");
    std::fs::create_dir_all(&real).unwrap();
    let link = real.with_file_name("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let r = real.to_str().unwrap();
    let text = std::fs::read_to_string(session("01-tiny")).unwrap();
    let cwds = [
        ("plain", r.to_owned()),
        ("dotted", format!("{r}/../proj/.")),
        ("slashes", format!("{r}//")),
        ("other", format!("{r}-other")),
        ("empty", String::new()),
    ];
    let sessions = dir.path().join("s");
    std::fs::create_dir_all(&sessions).unwrap();
    for (i, (name, cwd)) in cwds.iter().enumerate() {
        let mut lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        lines[0]["cwd"] = Value::String(cwd.clone());
        lines[0]["id"] = Value::String(format!("0000000{i}-{name}"));
        let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(sessions.join(format!("{name}.jsonl")), body).unwrap();
    }
    out(&env, &["import", sessions.to_str().unwrap()], 0);
    let listed = |cwd: &str, from: &Path| -> Vec<String> {
        let r = run_in(&env, &["--json", "ls", "--cwd", cwd], Some(from));
        assert_eq!(r.code, 0, "{}", r.stderr);
        let mut ids: Vec<String> = r
            .stdout
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                v["id"]
                    .as_str()
                    .unwrap()
                    .split('-')
                    .nth(1)
                    .unwrap()
                    .to_owned()
            })
            .collect();
        ids.sort();
        ids
    };
    let same = vec!["dotted", "plain", "slashes"];
    let parent = real.parent().unwrap();
    for q in [
        r.to_owned(),
        format!("{r}/"),
        format!("{r}/./"),
        format!("/no/such/../..{r}"),
        link.to_str().unwrap().to_owned(),
    ] {
        assert_eq!(listed(&q, parent), same, "--cwd {q}");
    }
    assert_eq!(listed("proj", parent), same, "--cwd proj from its parent");
    assert_eq!(listed("link", parent), same, "--cwd link from its parent");
    assert!(listed(&format!("{r}-other/x/.."), parent) == vec!["other"]);
}

/// `files` normalises an absolute query (`..`, `./`, `//`) as it does a relative one and as the
/// index normalises the paths it resolves: each form finds the same hits as the plain path.
/// An empty query (the start of every path) is refused, exit 2.
#[test]
fn files_normalises_absolute_queries_and_refuses_an_empty_one() {
    let env = TestEnv::new();
    let r = run(&env, &["import", fixture("sessions").to_str().unwrap()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let plain = "/home/dev/projects/acme-api/src/main.rs";
    let want = out(&env, &["files", "-c", plain], 0);
    assert!(!want.is_empty());
    for q in [
        "/home/dev/projects/acme-api/src/../src/main.rs",
        "/home/dev/projects/./acme-api/src/main.rs",
        "//home/dev//projects/acme-api/src/main.rs",
        "/home/dev/projects/acme-api/src/main.rs/",
        "/../home/dev/projects/acme-api/src/main.rs",
    ] {
        assert_eq!(out(&env, &["files", "-c", q], 0), want, "{q}");
    }
    // A folder too.
    assert_eq!(
        out(
            &env,
            &["files", "-c", "/home/dev/projects/acme-api/src/../src"],
            0
        ),
        out(&env, &["files", "-c", "/home/dev/projects/acme-api/src"], 0),
    );
    let r = run(&env, &["files", ""]);
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(
        r.stderr.contains("error: the path to look for is empty"),
        "{}",
        r.stderr
    );
}

/// `grep --role` and `log --type` take pi's entry types and message roles; pi tolerates others
/// (an extension's own), so they are still matched as written, but one that is none of pi's
/// and matches nothing is no longer passed over in silence: a warning lists pi's values (and
/// the one it probably meant). pi's own values that match nothing say nothing.
#[test]
fn unknown_roles_and_types_that_match_nothing_get_a_warning() {
    let env = TestEnv::new();
    let f = session("02-small-branches");
    let f = f.to_str().unwrap();
    let r = run(
        &env,
        &["grep", "cargo", "--session", f, "--role", "nonsense"],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("warning: no entry matched --role \"nonsense\", which is none of pi's")
            && r.stderr.contains("toolResult")
            && r.stderr.contains("branch_summary"),
        "{}",
        r.stderr
    );
    let r = run(
        &env,
        &["grep", "cargo", "--session", f, "--role", "tool_result"],
    );
    assert!(
        r.stderr.contains("did you mean toolResult?"),
        "{}",
        r.stderr
    );
    for all in [false, true] {
        let mut args = vec!["log", f, "--type", "nonsense"];
        if all {
            args.push("--all");
        }
        let r = run(&env, &args);
        assert_eq!(r.code, 0, "{args:?}");
        // (`--all` still draws the graph's joins: only the entries are filtered.)
        assert!(
            !r.stdout.contains(|c: char| c.is_ascii_alphanumeric()),
            "{args:?}: {}",
            r.stdout
        );
        assert!(
            r.stderr
                .contains("warning: no entry matched --type \"nonsense\""),
            "{args:?}: {}",
            r.stderr
        );
    }
    // pi's values: no warning, matched or not.
    for args in [
        vec!["log", f, "--type", "compaction"],
        vec!["log", f, "--type", "user"],
        vec![
            "grep",
            "cargo",
            "--session",
            f,
            "--role",
            "compactionSummary",
        ],
        vec!["grep", "cargo", "--session", f, "--role", "user"],
    ] {
        let r = run(&env, &args);
        assert!(r.code < 2, "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("warning"), "{args:?}: {}", r.stderr);
    }
    // A custom role present in a session is matched as written, without a warning.
    let dir = tempfile::tempdir().unwrap();
    let custom = dir.path().join("custom.jsonl");
    let mut text = std::fs::read_to_string(session("01-tiny")).unwrap();
    text.push_str(
        "{\"type\":\"message\",\"id\":\"cccc0001\",\"parentId\":\"e65ac404\",\
         \"timestamp\":\"2026-07-25T09:05:00.000Z\",\"message\":{\"role\":\"myNote\",\
         \"content\":\"remember the cargo cache\",\"timestamp\":1}}\n",
    );
    std::fs::write(&custom, text).unwrap();
    let c = custom.to_str().unwrap();
    let r = run(&env, &["log", c, "--type", "myNote", "--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.lines().count(), 1, "{}", r.stdout);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
    let r = run(
        &env,
        &["grep", "cargo cache", "--session", c, "--role", "myNote"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("cccc0001"), "{}", r.stdout);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

/// `stats --by day` groups by the UTC day of each time as JavaScript reads it: an offset moves
/// a late evening to the next day, and second 60 is no time (the key was the text's first ten
/// characters).
#[test]
fn stats_by_day_uses_the_utc_day_of_each_time() {
    let env = TestEnv::new();
    let file = env.home.path().join("day.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"00000000-0000-4000-8000-0000000000d1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/p"}"#,
        r#"{"type":"message","id":"d0000001","parentId":null,"timestamp":"2026-03-01T23:30:00-05:00","message":{"role":"user","content":"late","timestamp":1772425800000}}"#,
        r#"{"type":"message","id":"d0000002","parentId":"d0000001","timestamp":"2026-03-01T23:59:60Z","message":{"role":"user","content":"leap","timestamp":1772425800000}}"#,
        r#"{"type":"message","id":"d0000003","parentId":"d0000002","timestamp":"2026-03-01T10:00:00.000Z","message":{"role":"user","content":"day","timestamp":1772359200000}}"#,
        // Years past 9999 (as `toISOString` writes them): two days, not one month.
        r#"{"type":"message","id":"d0000004","parentId":"d0000003","timestamp":"+010000-01-01T10:00:00.000Z","message":{"role":"user","content":"far","timestamp":1772359200000}}"#,
        r#"{"type":"message","id":"d0000005","parentId":"d0000004","timestamp":"+010000-01-02T10:00:00.000Z","message":{"role":"user","content":"farther","timestamp":1772359200000}}"#,
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let got = json_lines(
        &env,
        &["stats", file.to_str().unwrap(), "--by", "day", "--json"],
        0,
    );
    let days: HashMap<String, u64> = got[..got.len() - 1]
        .iter()
        .map(|g| {
            (
                g["key"].as_str().unwrap().to_owned(),
                g["entries"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: HashMap<String, u64> = [
        ("2026-03-02", 1),
        ("-", 1),
        ("2026-03-01", 1),
        ("+010000-01-01", 1),
        ("+010000-01-02", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    assert_eq!(days, want);
}

/// Entry `a000000N` of a chain (its parent `a000000{N-1}`, none for 1), an assistant message
/// whose one tool call `tN` reads `path`, at second N-1 of 2026-03-01T10:00.
fn read_call(n: u32, path: &str) -> String {
    let parent = if n == 1 {
        "null".to_owned()
    } else {
        format!("\"a000000{}\"", n - 1)
    };
    let s = n - 1;
    let ms = 1_772_359_200_000u64 + u64::from(s) * 1000;
    format!(
        r#"{{"type":"message","id":"a000000{n}","parentId":{parent},"timestamp":"2026-03-01T10:00:0{s}.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"t{n}","name":"read","arguments":{{"path":"{path}"}}}}],"provider":"p","model":"m","usage":{{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}}},"stopReason":"toolUse","timestamp":{ms}}}}}"#
    )
}

/// A path holding glob characters (`app/[id]/page.tsx`, a Next.js route) is found as written:
/// the query is a glob and, as git's pathspecs, also the literal path (the glob's `[id]`
/// alone is a character class and found nothing).
#[test]
fn a_path_with_glob_characters_is_also_matched_as_written() {
    let env = TestEnv::new();
    let file = env.home.path().join("g.jsonl");
    let lines = [
        r#"{"type":"session","version":3,"id":"00000000-0000-4000-8000-0000000000a7","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/p"}"#,
        &read_call(1, "app/[id]/page.tsx"),
        &read_call(2, "app/i/page.tsx"),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let f = file.to_str().unwrap();
    let ids = |q: &str| -> Vec<String> {
        let mut v: Vec<String> = json_lines(&env, &["--json", "files", q, "--session", f], 0)
            .iter()
            .map(|h| h["entry"].as_str().unwrap().to_owned())
            .collect();
        v.sort();
        v
    };
    // Both: the literal path, and `app/i/page.tsx`, which the class `[id]` matches.
    assert_eq!(ids("app/[id]/page.tsx"), ["a0000001", "a0000002"]);
    assert_eq!(ids("app/\\[id\\]/page.tsx"), ["a0000001"]);
}

/// A relative glob is also matched against the resolved paths, resolved from the current
/// folder as a relative path query is: `src/**` run in the project finds `./src/a.rs`, an
/// absolute path into the project's `src` and `@src/d.rs` (pi's tools drop the `@`), not the
/// project's `docs`; run elsewhere it finds only the path written `src/…`. A path under
/// `$HOME` also finds what a session outside any home folder wrote as `~/…`.
#[test]
fn a_relative_glob_is_resolved_from_the_current_folder_as_a_path_is() {
    let env = TestEnv::new();
    let project = env.home.path().join("work/proj");
    std::fs::create_dir_all(&project).unwrap();
    let proj = project.to_str().unwrap();
    let lines = [
        format!(
            r#"{{"type":"session","version":3,"id":"00000000-0000-4000-8000-0000000000b1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"{proj}"}}"#
        ),
        read_call(1, "./src/a.rs"),
        read_call(2, &format!("{proj}/src/b.rs")),
        read_call(3, "src/c.rs"),
        read_call(4, "@src/d.rs"),
        read_call(5, "docs/x.md"),
        read_call(6, "~/notes.md"),
    ];
    let file = env.home.path().join("g.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let f = file.to_str().unwrap();
    let ids = |q: &str, dir: &Path| -> Vec<String> {
        let r = crate::common::run_in(&env, &["--json", "files", q, "--session", f], Some(dir));
        assert!(r.code == 0 || r.code == 1, "{q}: {}", r.stderr);
        let mut v: Vec<String> = r
            .stdout
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["entry"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        v.sort();
        v
    };
    let in_project = ["a0000001", "a0000002", "a0000003", "a0000004"];
    assert_eq!(ids("src/**", &project), in_project);
    assert_eq!(ids("src/*.rs", &project), in_project);
    assert_eq!(ids("src", &project), in_project);
    // Elsewhere only the paths as written match: `src/…`, and its `./` and `@` forms.
    assert_eq!(
        ids("src/**", env.home.path()),
        ["a0000001", "a0000003", "a0000004"]
    );
    assert_eq!(ids("./src/a.rs", env.home.path()), ["a0000001"]);
    assert_eq!(ids("src/d.rs", env.home.path()), ["a0000004"]);
    // The session's cwd lies outside any home folder, so `~/notes.md` stays as written; the
    // query's `$HOME/notes.md` (as the shell expands `~/notes.md`) finds it.
    let home_notes = env.home.path().join("notes.md");
    assert_eq!(ids(home_notes.to_str().unwrap(), &project), ["a0000006"]);
    assert_eq!(ids("~/notes.md", &project), ["a0000006"]);
}

/// The roles pi's context gives the summaries (`compactionSummary`, `branchSummary`) find the
/// entries that carry them, as their entry types do, in `grep --role` and `log --type`.
#[test]
fn the_context_roles_of_summaries_find_their_entries() {
    let env = TestEnv::new();
    for (name, role, ty) in [
        ("03-compactions", "compactionSummary", "compaction"),
        ("02-small-branches", "branchSummary", "branch_summary"),
    ] {
        let f = session(name);
        let f = f.to_str().unwrap();
        let by_type = run(&env, &["log", f, "--type", ty, "--json"]);
        assert_eq!(by_type.code, 0, "{}", by_type.stderr);
        assert!(!by_type.stdout.is_empty(), "{name}: no {ty} entry to find");
        let by_role = run(&env, &["log", f, "--type", role, "--json"]);
        assert_eq!(by_role.stdout, by_type.stdout, "{name}");
        assert!(by_role.stderr.is_empty(), "{}", by_role.stderr);
        let all = |t: &str| run(&env, &["log", f, "--all", "--type", t, "--json"]).stdout;
        assert_eq!(all(role), all(ty), "{name} --all");
        let first = run(&env, &["log", f, "--type", role, "-n", "1", "--json"]);
        assert_eq!(
            first.stdout.lines().next(),
            by_type.stdout.lines().next(),
            "{name} -n 1"
        );
        let grep_type = run(&env, &["grep", "e", "--session", f, "--role", ty, "--json"]);
        assert_eq!(grep_type.code, 0, "{name}: {}", grep_type.stderr);
        let grep_role = run(
            &env,
            &["grep", "e", "--session", f, "--role", role, "--json"],
        );
        assert_eq!(grep_role.code, 0, "{name}: {}", grep_role.stderr);
        assert_eq!(grep_role.stdout, grep_type.stdout, "{name}");
    }
}

/// `diff --context` fits its message lines to `COLUMNS`: the text gets what the line's head
/// (mark, id, role, tokens) leaves; a long role (`branchSummary`) used to push the line two
/// columns past the width.
#[test]
fn diff_context_lines_fit_the_width() {
    let env = TestEnv::new();
    let f = session("02-small-branches");
    for cols in [80usize, 100, 140] {
        let out = env
            .pisess()
            .env("COLUMNS", cols.to_string())
            .args([
                "diff",
                f.to_str().unwrap(),
                "@leaf",
                "0c83b3b2",
                "--context",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("branchSummary ~"), "{text}");
        // The message lines (`< ID ROLE ~Nt: TEXT`), not each side's heading.
        let messages = text.lines().filter(|l| {
            (l.starts_with("< ") || l.starts_with("> "))
                && l.split(' ').nth(3).is_some_and(|t| t.starts_with('~'))
        });
        for line in messages {
            assert!(
                line.chars().count() <= cols,
                "{cols}: {} columns: {line}",
                line.chars().count()
            );
        }
    }
}

/// A query that is no valid glob is a path (with a note saying so), and a `grep` pattern with
/// a line break, which line-by-line search can never match, is refused (exit 2) with the
/// reason; neither writes to the session file.
#[test]
fn a_query_that_is_no_glob_is_a_path_and_a_line_break_pattern_is_refused() {
    let env = TestEnv::new();
    let lines = [
        r#"{"type":"session","version":3,"id":"00000000-0000-4000-8000-0000000000c1","timestamp":"2026-03-01T00:00:00.000Z","cwd":"/nowhere/p"}"#.to_owned(),
        read_call(1, "notes[1.md"),
        read_call(2, "x{y.rs"),
    ];
    let file = env.home.path().join("q.jsonl");
    let text = lines.join("\n") + "\n";
    std::fs::write(&file, &text).unwrap();
    let f = file.to_str().unwrap();
    for (q, id) in [("notes[1.md", "a0000001"), ("x{y.rs", "a0000002")] {
        let r = run(&env, &["--json", "files", q, "--session", f]);
        assert_eq!(r.code, 0, "{q}: {}", r.stderr);
        let hits: Vec<Value> = r
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(hits.len(), 1, "{q}: {}", r.stdout);
        assert_eq!(hits[0]["entry"], id, "{q}");
        assert!(
            r.stderr.contains(&format!("note: {q} is no glob ("))
                && r.stderr.contains("matched as written only"),
            "{q}: {}",
            r.stderr
        );
    }
    for (args, refused) in [
        (vec!["grep", "line1\\nline2", "--session", f], true),
        (vec!["grep", "-F", "line1\nline2", "--session", f], true),
        (vec!["grep", "[^\\n]+ng", "--session", f], false),
    ] {
        let r = run(&env, &args);
        if refused {
            assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
            assert!(
                r.stderr
                    .contains("holds a line break, and text is searched line by line"),
                "{args:?}: {}",
                r.stderr
            );
        } else {
            assert_ne!(r.code, 2, "{args:?}: {}", r.stderr);
        }
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

/// A pattern ripgrep compiles (its size limit is 100 MiB, the regex crate's default 10) is
/// compiled here too; one past that limit says so, without the `-F` hint meant for syntax.
#[test]
fn grep_takes_the_patterns_ripgrep_takes() {
    let env = TestEnv::new();
    out(&env, &["import", session("01-tiny").to_str().unwrap()], 0);
    // No match: exit 1, as ripgrep.
    let r = run(&env, &["grep", "-c", r"\w{300,}"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let r = run(&env, &["grep", r"\w{90000}"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("too large once compiled"), "{}", r.stderr);
    assert!(!r.stderr.contains("-F"), "{}", r.stderr);
}

/// `stats --by day` lists days in time order: an extended year where its year puts it, the
/// entries without a day (`-`) last (the days sorted as text put `+275760-…` first).
#[test]
fn stats_by_day_lists_days_in_time_order() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("days.jsonl");
    let msg = |id: &str, parent: Option<&str>, ts: Option<&str>| {
        let mut v = serde_json::json!({"type":"message","id":id,"parentId":parent,
            "message":{"role":"user","content":"x","timestamp":1}});
        if let Some(t) = ts {
            v["timestamp"] = t.into();
        }
        v
    };
    let lines = [
        serde_json::json!({"type":"session","version":3,"id":"days","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp/x"}),
        msg("e1", None, Some("+275760-09-13T00:00:00.000Z")),
        msg("e2", Some("e1"), None),
        msg("e3", Some("e2"), Some("2025-03-01T00:00:00.000Z")),
        msg("e4", Some("e3"), Some("-000001-01-01T00:00:00.000Z")),
        msg("e5", Some("e4"), Some("2025-02-28T23:00:00.000Z")),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&f, text).unwrap();
    let got = json_lines(
        &env,
        &["stats", f.to_str().unwrap(), "--by", "day", "--json"],
        0,
    );
    let keys: Vec<&str> = got[..got.len() - 1]
        .iter()
        .map(|g| g["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        [
            "-000001-01-01",
            "2025-02-28",
            "2025-03-01",
            "+275760-09-13",
            "-"
        ]
    );
}

/// JSON written to a terminal carries the characters that `safe` escapes in text but JSON
/// leaves raw (a C1 control such as U+009B, which some terminals take for `ESC [`, a bidi
/// override, DEL) as JSON escapes: the same text when parsed, nothing a terminal acts on.
/// Into a pipe the bytes stay as `JSON.stringify` writes them. (`script` gives the command a
/// terminal.)
#[test]
fn json_on_a_terminal_escapes_c1_and_bidi_controls() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c1.jsonl");
    std::fs::write(
        &f,
        concat!(
            r#"{"type":"session","version":3,"id":"c1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
            "\n",
            r#"{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"a\u009b31mred \u202eevil \u007fdel","timestamp":1}}"#,
            "\n"
        ),
    )
    .unwrap();
    let f = f.to_str().unwrap();
    for args in [["log", f], ["context", f]] {
        // `sh -c SCRIPT FILE BINARY`: $0 is the session file, $1 the binary.
        let line = format!(
            "exec script -qec \"\\\"$1\\\" --json {} \\\"$0\\\"\" /dev/null",
            args[0]
        );
        let tty = env
            .pisess_wrapped(&["sh", "-c", &line, f])
            .output()
            .unwrap();
        assert!(tty.status.success(), "{args:?}: {tty:?}");
        let piped = env.pisess().arg("--json").args(args).output().unwrap();
        assert!(piped.status.success(), "{args:?}");
        let raw: [&[u8]; 3] = [b"\xc2\x9b", b"\xe2\x80\xae", b"\x7f"];
        let has = |out: &[u8], pat: &[u8]| out.windows(pat.len()).any(|w| w == pat);
        for pat in raw {
            assert!(
                has(&piped.stdout, pat),
                "{args:?}: piped output keeps {pat:?}"
            );
            assert!(
                !has(&tty.stdout, pat),
                "{args:?}: raw {pat:?} reached the terminal"
            );
        }
        let text = String::from_utf8_lossy(&tty.stdout);
        for esc in [r"\u009b", r"\u202e", r"\u007f"] {
            assert!(text.contains(esc), "{args:?}: {text}");
        }
    }
}

/// Colour on a terminal: on by default, off when `TERM` is `dumb` (as git and ripgrep read
/// it) or `NO_COLOR` is set. (`script` gives the command a terminal.)
#[test]
fn colour_on_a_terminal_is_off_for_a_dumb_one() {
    let env = TestEnv::new();
    let f = session("04-many-branches");
    let f = f.to_str().unwrap();
    let colours = |vars: &str| {
        // `sh -c SCRIPT FILE BINARY`: $0 is the session file, $1 the binary.
        let line = format!(
            "exec env -u NO_COLOR {vars} script -qec \"\\\"$1\\\" log \\\"$0\\\" -n 3\" /dev/null"
        );
        let out = env
            .pisess_wrapped(&["sh", "-c", &line, f])
            .output()
            .unwrap();
        assert!(out.status.success(), "{vars}: {out:?}");
        out.stdout.contains(&0x1b)
    };
    // (`PISESS_PAGER=cat`: the colours are pisess's own, not those of a pager's screen set-up.)
    assert!(colours("TERM=xterm PISESS_PAGER=cat"));
    assert!(!colours("TERM=dumb"));
    assert!(!colours("TERM=xterm NO_COLOR=1 PISESS_PAGER=cat"));
}

/// `-l` and `-c` of `grep` and `files` print a session's file as ripgrep prints a path: into a
/// pipe as it is (an escape character in the name stays one byte, for `xargs`), on a terminal
/// escaped; with `-0` each name ends in a NUL byte (`-c`: `NAME\0COUNT\n`), and `-0` without
/// `-l` or `-c` is refused. (`script` gives the command a terminal.)
#[test]
fn listed_files_are_raw_into_a_pipe_and_nul_terminated_with_null() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    let dir = std::fs::canonicalize(dir.path()).unwrap();
    let odd = dir.join("we\x1bird.jsonl");
    let plain = dir.join("plain.jsonl");
    for (f, id) in [(&odd, "s-odd"), (&plain, "s-plain")] {
        let text = format!(
            concat!(
                r#"{{"type":"session","version":3,"id":"{}","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}}"#,
                "\n",
                r#"{{"type":"message","id":"m1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"c1","name":"read","arguments":{{"path":"src/zebra.rs"}}}}],"timestamp":1}}}}"#,
                "\n"
            ),
            id
        );
        std::fs::write(f, text).unwrap();
    }
    out(&env, &["import", dir.to_str().unwrap()], 0);
    let (odd_s, plain_s) = (odd.to_str().unwrap(), plain.to_str().unwrap());
    let raw = |args: &[&str]| {
        let o = env.pisess().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {o:?}");
        String::from_utf8(o.stdout).unwrap()
    };
    for cmd in [["grep", "zebra"], ["files", "src/zebra.rs"]] {
        let with = |flags: &[&'static str]| -> Vec<&str> {
            let mut a = cmd.to_vec();
            a.extend_from_slice(flags);
            a
        };
        let mut listed: Vec<String> = raw(&with(&["-l"])).lines().map(str::to_owned).collect();
        listed.sort();
        assert_eq!(listed, [plain_s, odd_s], "{cmd:?} -l");
        let mut nul: Vec<&str> = Vec::new();
        let z = raw(&with(&["-l", "-0"]));
        assert!(
            z.ends_with('\0') && !z.contains('\n'),
            "{cmd:?} -l -0: {z:?}"
        );
        nul.extend(z.trim_end_matches('\0').split('\0'));
        nul.sort();
        assert_eq!(nul, [plain_s, odd_s], "{cmd:?} -l -0");
        let mut counted: Vec<String> = raw(&with(&["-c", "-0"]))
            .lines()
            .map(str::to_owned)
            .collect();
        counted.sort();
        assert_eq!(
            counted,
            [format!("{plain_s}\x001"), format!("{odd_s}\x001")],
            "{cmd:?} -c -0"
        );
        let r = run(&env, &with(&["-0"]));
        assert_eq!(r.code, 2, "{cmd:?} -0 alone: {}", r.stderr);
        assert!(r.stderr.contains("--files-with-matches"), "{}", r.stderr);
        // On a terminal the escape character is shown, not sent.
        let line = format!(
            "exec script -qec \"\\\"$1\\\" {} {} -l\" /dev/null",
            cmd[0], cmd[1]
        );
        let tty = env
            .pisess_wrapped(&["sh", "-c", &line, "x"])
            .output()
            .unwrap();
        assert!(tty.status.success(), "{cmd:?}: {tty:?}");
        let text = String::from_utf8_lossy(&tty.stdout);
        assert!(!tty.stdout.contains(&0x1b), "{cmd:?}: {text:?}");
        assert!(text.contains(r"we\u{1b}ird.jsonl"), "{cmd:?}: {text:?}");
    }
}

/// `log --type` and `grep --role` take the same values (a role or an entry type), so each
/// command takes the other's name too: `log --role user` is `log --type user`, `grep --type
/// compaction` is `grep --role compaction`.
#[test]
fn log_and_grep_take_each_others_name_for_the_kind_filter() {
    let env = TestEnv::new();
    let f = session("03-compactions");
    let f = f.to_str().unwrap();
    for (a, b) in [
        (
            vec!["log", f, "--all", "--type", "user"],
            vec!["log", f, "--all", "--role", "user"],
        ),
        (
            vec!["grep", "e", "--session", f, "--role", "compaction"],
            vec!["grep", "e", "--session", f, "--type", "compaction"],
        ),
    ] {
        let want = out(&env, &a, 0);
        assert!(want.lines().count() >= 2, "{a:?}: {want}");
        assert_eq!(out(&env, &b, 0), want, "{b:?}");
    }
}
