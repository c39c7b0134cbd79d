//! Commands that write sessions: `fork` (against the oracle's goldens and the live oracle),
//! `compact` and `navigate --summarize` through a summariser command, torn-tail repair and
//! failed writes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{TestEnv, corpus, fixture, root};

fn oracle(args: &[&str]) -> Value {
    let bin = root().join("../shared/oracle/oracle");
    let out = std::process::Command::new(&bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("oracle {args:?}: {e}"));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn read_lines(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run_json(env: &TestEnv, args: &[&str]) -> Value {
    let out = env.pisess().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A forked session's lines, comparable by structure: the header without its new id and time
/// (and without `parentSession`, which the caller checks), and ids renamed by first appearance
/// — all of them when `all_ids` (legacy sources, whose migrated ids are random in pi), else
/// only those of the re-created labels (random in pi and in pisess).
fn normalize(lines: &[Value], all_ids: bool) -> Vec<Value> {
    let mut map: HashMap<String, String> = HashMap::new();
    for e in &lines[1..] {
        if let Some(id) = e["id"].as_str()
            && (all_ids || e["type"] == "label")
        {
            let n = map.len();
            map.entry(id.to_owned()).or_insert(format!("#{n}"));
        }
    }
    let mut out = Vec::new();
    let mut h = lines[0].clone();
    for k in ["id", "timestamp", "parentSession"] {
        h.as_object_mut().unwrap().shift_remove(k);
    }
    out.push(h);
    for e in &lines[1..] {
        let mut e = e.clone();
        for k in ["id", "parentId", "targetId", "firstKeptEntryId", "fromId"] {
            if let Some(s) = e.get(k).and_then(Value::as_str)
                && let Some(to) = map.get(s)
            {
                e[k] = Value::String(to.clone());
            }
        }
        out.push(e);
    }
    out
}

fn fork_with_pisess(env: &TestEnv, file: &Path, entry: &str, out: &Path) -> Vec<Value> {
    let got = run_json(
        env,
        &[
            "--json",
            "fork",
            file.to_str().unwrap(),
            entry,
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(got["path"], out.canonicalize().unwrap().to_str().unwrap());
    let lines = read_lines(out);
    assert_eq!(lines[0]["type"], "session");
    assert_eq!(lines[0]["version"], 3);
    let id = lines[0]["id"].as_str().unwrap();
    assert_eq!(id.len(), 36, "{id}");
    assert_eq!(&id[14..15], "7", "UUIDv7: {id}");
    assert_eq!(
        lines[0]["parentSession"],
        file.canonicalize().unwrap().to_str().unwrap()
    );
    lines
}

/// The ids of a session's entries in file order, as pisess stores them (migrated for legacy
/// files).
fn stored_ids(env: &TestEnv, file: &Path) -> Vec<String> {
    let out = env
        .pisess()
        .args(["export", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|v| v["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn fork_equals_the_oracle_goldens_by_structure() {
    let mut compared = 0;
    for name in [
        "01-tiny",
        "02-small-branches",
        "03-compactions",
        "04-many-branches",
        "05-context-edits-labels",
        "06-no-system",
        "07-v1",
        "08-v2",
    ] {
        let env = TestEnv::new();
        let file = fixture(&format!("sessions/{name}.jsonl"));
        let golden: Value = serde_json::from_str(
            &std::fs::read_to_string(fixture(&format!("golden/sessions/{name}/fork.json")))
                .unwrap(),
        )
        .unwrap();
        let legacy = name == "07-v1";
        // Golden ids are the oracle's; a legacy file's are mapped to pisess's by position.
        let oracle_ids: Vec<String> = if legacy {
            let load: Value = serde_json::from_str(
                &std::fs::read_to_string(fixture(&format!("golden/sessions/{name}/load.json")))
                    .unwrap(),
            )
            .unwrap();
            load["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap_or_default().to_owned())
                .collect()
        } else {
            Vec::new()
        };
        let ours = stored_ids(&env, &file);
        for (id, want) in golden.as_object().unwrap() {
            assert!(want.get("error").is_none(), "{name} {id}: {want}");
            let entry = if legacy {
                let i = oracle_ids.iter().position(|x| x == id).unwrap();
                ours[i].clone()
            } else {
                id.clone()
            };
            let out = env.home.path().join(format!("{name}-{id}.jsonl"));
            let got = fork_with_pisess(&env, &file, &entry, &out);
            let want_lines: Vec<Value> = want["lines"].as_array().unwrap().clone();
            assert_eq!(
                normalize(&got, legacy),
                normalize(&want_lines, legacy),
                "{name} fork at {id}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 16, "only {compared} forks compared");
}

/// v3 files of the standard corpus up to 4 MB, at the leaf, the middle entry of the file and
/// the last entry with a label or compaction, against `oracle fork` run now.
#[test]
fn fork_equals_the_live_oracle_on_corpus_files() {
    let dir = corpus();
    let mut compared = 0;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter(|p| std::fs::metadata(p).unwrap().len() <= 4_000_000)
        .collect();
    files.sort();
    let tmp = tempfile::tempdir().unwrap();
    for file in files {
        let head = read_lines_head(&file);
        if head["version"] != 3 {
            continue;
        }
        let env = TestEnv::new();
        let lines = read_lines(&file);
        let ids: Vec<&str> = lines[1..].iter().filter_map(|e| e["id"].as_str()).collect();
        let mut picks = vec![ids[ids.len() - 1], ids[ids.len() / 2]];
        if let Some(e) = lines[1..]
            .iter()
            .rev()
            .find(|e| e["type"] == "label" || e["type"] == "compaction")
        {
            let t = if e["type"] == "label" {
                e["targetId"].as_str().unwrap()
            } else {
                e["id"].as_str().unwrap()
            };
            picks.push(t);
        }
        picks.dedup();
        picks.sort_unstable();
        picks.dedup();
        for id in picks {
            let stem = file.file_stem().unwrap().to_str().unwrap();
            let theirs = tmp.path().join(format!("{stem}-{id}.oracle.jsonl"));
            let o = oracle(&["fork", file.to_str().unwrap(), id, theirs.to_str().unwrap()]);
            assert!(o.get("error").is_none(), "{stem} {id}: {o}");
            if o["written"] != true {
                continue;
            }
            let mine = tmp.path().join(format!("{stem}-{id}.pisess.jsonl"));
            let got = fork_with_pisess(&env, &file, id, &mine);
            let want = read_lines(&theirs);
            assert_eq!(
                normalize(&got, false),
                normalize(&want, false),
                "{stem} {id}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 25, "only {compared} forks compared");
}

fn read_lines_head(p: &Path) -> Value {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(std::fs::File::open(p).unwrap())
        .read_line(&mut line)
        .unwrap();
    serde_json::from_str(&line).unwrap()
}

#[test]
fn fork_writes_into_pis_folder_for_the_cwd_and_never_overwrites() {
    let env = TestEnv::new();
    let file = fixture("sessions/02-small-branches.jsonl");
    let out = env
        .pisess()
        .args(["fork", file.to_str().unwrap(), "@leaf"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end());
    let dir = env
        .home
        .path()
        .join(".pi/agent/sessions/--home-dev-projects-acme-api--");
    assert_eq!(path.parent().unwrap(), dir.canonicalize().unwrap());
    let lines = read_lines(&path);
    // pi's file name: the header time with ':' and '.' as '-', '_', the session id.
    let ts = lines[0]["timestamp"]
        .as_str()
        .unwrap()
        .replace([':', '.'], "-");
    let want = format!("{ts}_{}.jsonl", lines[0]["id"].as_str().unwrap());
    assert_eq!(path.file_name().unwrap().to_str().unwrap(), want);
    // $PI_CODING_AGENT_SESSION_DIR is used as it is.
    let flat = env.home.path().join("flat");
    let out = env
        .pisess()
        .env("PI_CODING_AGENT_SESSION_DIR", &flat)
        .args(["fork", file.to_str().unwrap(), "@leaf"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let p = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end());
    assert_eq!(p.parent().unwrap(), flat.canonicalize().unwrap());
    // -o never replaces a file.
    let before = std::fs::read(&path).unwrap();
    let out = env
        .pisess()
        .args([
            "fork",
            file.to_str().unwrap(),
            "@leaf",
            "-o",
            path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(std::fs::read(&path).unwrap(), before);
}
