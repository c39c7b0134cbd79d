//! Commands that write sessions: `fork` (against the oracle's goldens and the live oracle),
//! `compact` and `navigate --summarize` through a summariser command, torn-tail repair and
//! failed writes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::{TestEnv, corpus, fixture, fork_structure, oracle, read_lines, root};

fn run_json(env: &TestEnv, args: &[&str]) -> Value {
    let out = env.pisess().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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
                fork_structure(&got, legacy),
                fork_structure(&want_lines, legacy),
                "{name} fork at {id}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 16, "only {compared} forks compared");
}

/// v3 files of the standard corpus up to 4 MB and the genuine v3 files, at the leaf, the
/// middle entry of the file and the last entry with a label or compaction, against
/// `oracle fork` run now.
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
    // The genuine v3 files with entries too.
    for e in std::fs::read_dir(root().join("../shared/realdata")).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("pimonozig__")
        {
            files.push(p);
        }
    }
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
                fork_structure(&got, false),
                fork_structure(&want, false),
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

/// A session whose header `cwd` is a `file://` URL Node refuses (another host, an encoded `/`,
/// bytes that are not UTF-8) is one pi cannot open (its `fileURLToPath` throws). pisess forked
/// it with a cwd made up from the URL's text joined to the current folder; it now refuses, names
/// the reason, and writes nothing. A URL Node reads is forked with its path as the cwd, as pi
/// does.
#[test]
fn a_fork_of_a_session_whose_cwd_is_a_refused_file_url_is_refused() {
    let env = TestEnv::new();
    let msg = r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-02-01T10:00:01.000Z","message":{"role":"user","content":"q","timestamp":1769940000000}}"#;
    let write = |name: &str, cwd: &str| {
        let f = env.home.path().join(name);
        std::fs::write(
            &f,
            format!(
                "{{\"type\":\"session\",\"version\":3,\"id\":\"0199aaaa-0000-7000-8000-00000000077{}\",\
                 \"timestamp\":\"2026-02-01T10:00:00.000Z\",\"cwd\":{cwd:?}}}\n{msg}\n",
                name.len() % 10
            ),
        )
        .unwrap();
        f
    };
    for (name, cwd, why) in [
        ("host.jsonl", "file://host/x", "host must be"),
        ("slash.jsonl", "file:///a%2Fb", "encoded / characters"),
        ("bytes.jsonl", "file:///tmp/%ff", "URI malformed"),
    ] {
        let f = write(name, cwd);
        let out = env.home.path().join(format!("{name}.fork"));
        let r = crate::common::run(
            &env,
            &[
                "fork",
                f.to_str().unwrap(),
                "@leaf",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(r.code, 2, "{name}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stderr
                .contains(&format!("cwd {cwd:?} is a file URL Node cannot read"))
                && r.stderr.contains(why)
                && r.stderr.contains("pi cannot open this session"),
            "{name}: {}",
            r.stderr
        );
        assert!(!out.exists(), "{name}: a fork was written");
    }
    // The oracle agrees that pi cannot open such a file at all.
    let host = env.home.path().join("host.jsonl");
    let o = std::process::Command::new(crate::common::root().join("../shared/oracle/oracle"))
        .args(["tree", host.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success(), "the oracle opened it");
    assert!(String::from_utf8_lossy(&o.stdout).contains("File URL host must be"));
    // A URL Node reads gives its path.
    let ok = write("ok.jsonl", "file:///srv/p%20q");
    let out = env.home.path().join("ok.fork");
    let r = crate::common::run(
        &env,
        &[
            "fork",
            ok.to_str().unwrap(),
            "@leaf",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(read_lines(&out)[0]["cwd"], "/srv/p q");
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
    // A path without a user or assistant message: pi would not write it yet, nor does pisess.
    let tiny = fixture("sessions/01-tiny.jsonl");
    let listed = |d: &Path| std::fs::read_dir(d).map_or(0, Iterator::count);
    let n = listed(&dir);
    let out = env
        .pisess()
        .args(["fork", tiny.to_str().unwrap(), "@root"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("nothing written: the path to"),
        "{out:?}"
    );
    assert_eq!(listed(&dir), n);
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

// ---- compact and navigate --summarize ---------------------------------------------------

/// A summariser script: appends each prompt (NUL-terminated) to `prompts`, prints a summary.
fn summarizer_script(dir: &Path) -> (String, PathBuf) {
    let prompts = dir.join("prompts");
    let script = dir.join("summarize.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat >> '{}'\nprintf '\\0' >> '{}'\nprintf '%s' \"$PISESS_SYSTEM_PROMPT\" > '{}.system'\nprintf '## Goal\\nScripted summary.\\n\\n'\n",
            prompts.display(),
            prompts.display(),
            prompts.display()
        ),
    )
    .unwrap();
    (format!("sh '{}'", script.display()), prompts)
}

fn prompts_of(p: &Path) -> Vec<String> {
    let t = std::fs::read_to_string(p).unwrap_or_default();
    t.split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `ls --json` (reads only the store): the session's entry count.
fn stored_entries(env: &TestEnv) -> Vec<Value> {
    let out = env.pisess().args(["--json", "ls"]).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn generated_session(dir: &Path, seed: &str) -> PathBuf {
    let f = dir.join(format!("gen-{seed}.jsonl"));
    let out = std::process::Command::new(root().join("../shared/oracle/gen"))
        .args([
            "--out",
            f.to_str().unwrap(),
            "--seed",
            seed,
            "--entries",
            "120",
            "--branches",
            "2",
            "--scale",
            "0.1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    f
}

fn context_matches_oracle(env: &TestEnv, file: &Path) -> Value {
    let ours = run_json(env, &["--json", "context", file.to_str().unwrap()]);
    let theirs = oracle(&["context", file.to_str().unwrap()]);
    for k in ["messages", "thinkingLevel", "model"] {
        assert_eq!(ours.get(k), theirs.get(k), "context: {k}");
    }
    assert_eq!(ours["entryIds"], theirs["contextEntryIds"]);
    ours
}

#[test]
fn compact_with_a_summarizer_appends_what_pi_would_and_pi_agrees() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let (cmd, prompts) = summarizer_script(dir);
    let mut checked = 0;
    for seed in ["4242", "77"] {
        let file = generated_session(dir, seed);
        let f = file.to_str().unwrap();
        let _ = std::fs::remove_file(&prompts);
        let want = oracle(&["cut", f, "--keep", "1000", "--full"]);
        let prep = &want["preparation"];
        assert!(
            prep.is_object(),
            "seed {seed}: the oracle prepares nothing: {want}"
        );
        let got = run_json(
            &env,
            &[
                "--json",
                "compact",
                f,
                "--keep",
                "1000",
                "--summarizer",
                &cmd,
            ],
        );
        assert_eq!(got["firstKeptEntryId"], prep["firstKeptEntryId"]);
        assert_eq!(got["tokensBefore"], prep["tokensBefore"]);
        assert_eq!(got["details"], prep["details"]);
        // The command got pi's prompts: the history (unless empty) and, for a split turn, the
        // turn prefix.
        let ps = prompts_of(&prompts);
        let split = prep["isSplitTurn"] == true
            && !prep["turnPrefixMessages"].as_array().unwrap().is_empty();
        let history = !prep["messagesToSummarize"].as_array().unwrap().is_empty();
        assert_eq!(
            ps.len(),
            usize::from(history || !split) + usize::from(split)
        );
        if history || !split {
            let conv = format!(
                "<conversation>\n{}\n</conversation>\n\n",
                prep["serializedHistory"].as_str().unwrap()
            );
            assert!(ps[0].starts_with(&conv), "history prompt:\n{}", ps[0]);
            assert!(ps[0].contains("Use this EXACT format:"));
            let system = std::fs::read_to_string(prompts.with_extension("system")).unwrap();
            assert!(
                system.starts_with("You are a context summarization assistant."),
                "{system}"
            );
        }
        if split {
            let conv = format!(
                "# Conversation\n{}\n\n# Instructions\n",
                prep["serializedTurnPrefix"].as_str().unwrap()
            );
            assert!(ps.last().unwrap().starts_with(&conv));
        }
        let summary = got["summary"].as_str().unwrap();
        assert!(
            summary.starts_with("## Goal\nScripted summary."),
            "{summary}"
        );
        assert!(summary.ends_with(prep["fileListSuffix"].as_str().unwrap()));
        // pi loads the file with the compaction as its leaf, and computes the same context,
        // which starts with the summary and keeps the first kept entry.
        let load = oracle(&["load", f]);
        assert_eq!(load["leafId"], got["compactionId"]);
        let last = load["entries"].as_array().unwrap().last().unwrap();
        assert_eq!(last["type"], "compaction");
        assert_eq!(last["summary"], got["summary"]);
        assert_eq!(last["fromHook"], false);
        let ctx = context_matches_oracle(&env, &file);
        let msgs = ctx["messages"].as_array().unwrap();
        assert!(
            msgs.iter()
                .any(|m| m["role"] == "compactionSummary" && m["summary"] == got["summary"])
        );
        assert!(
            ctx["entryIds"]
                .as_array()
                .unwrap()
                .contains(&prep["firstKeptEntryId"])
        );
        checked += 1;
    }
    assert_eq!(checked, 2);
}

#[test]
fn navigate_summarize_appends_pis_branch_summary_and_pi_agrees() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let (cmd, prompts) = summarizer_script(dir);
    let file = dir.join("s.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    let (old, target) = ("5ddf36d3", "bf0418f2");
    let want = oracle(&["branch-summary", f, old, target, "--full"]);
    let got = run_json(
        &env,
        &[
            "--json",
            "navigate",
            f,
            target,
            "--summarize",
            "--summarizer",
            &cmd,
        ],
    );
    let ps = prompts_of(&prompts);
    assert_eq!(ps.len(), 1);
    let conv = format!(
        "<conversation>\n{}\n</conversation>\n\n",
        want["serialized"].as_str().unwrap()
    );
    assert!(ps[0].starts_with(&conv));
    let summary = got["summary"].as_str().unwrap();
    assert_eq!(
        summary,
        format!(
            "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n## Goal\nScripted summary.{}",
            want["fileListSuffix"].as_str().unwrap()
        )
    );
    assert_eq!(got["details"]["readFiles"], want["readFiles"]);
    assert_eq!(got["details"]["modifiedFiles"], want["modifiedFiles"]);
    assert_eq!(got["fromId"], old);
    let load = oracle(&["load", f]);
    let last = load["entries"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["type"], "branch_summary");
    assert_eq!(load["leafId"], last["id"]);
    assert_eq!(last["fromId"], old);
    assert_eq!(last["fromHook"], false);
    // The target is not a user message, so the summary hangs off the target itself.
    assert_eq!(last["parentId"], target);
    context_matches_oracle(&env, &file);
    // Without a summarizer: the extractive summary, marked as such.
    let got = run_json(&env, &["--json", "navigate", f, "5ddf36d3", "--summarize"]);
    assert!(
        got["summary"]
            .as_str()
            .unwrap()
            .contains("(Extractive summary written by pisess without a model")
    );
    context_matches_oracle(&env, &file);
}

/// A session whose last line was cut short (a torn write): `compact` repairs the tail before
/// appending (pi would glue its line onto the fragment), and the torn line's bytes are saved
/// beside the file and named on stderr, never just dropped.
#[test]
fn a_torn_last_line_is_saved_beside_the_file_before_compact_cuts_it() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let file = dir.join("s.jsonl");
    let mut bytes = std::fs::read(fixture("sessions/04-many-branches.jsonl")).unwrap();
    let torn = b"{\"type\":\"message\",\"id\":\"zz\",\"message\":{\"role\":\"user\",\"content\":\"IMPORTANT half";
    bytes.extend_from_slice(torn);
    std::fs::write(&file, &bytes).unwrap();
    let f = file.to_str().unwrap();
    let out = env
        .pisess()
        .args(["compact", f, "--keep", "1000", "--summarizer", "echo S"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let saved = dir.join("s.jsonl.torn");
    assert_eq!(std::fs::read(&saved).unwrap(), torn);
    assert!(
        err.contains("torn write") && err.contains(saved.to_str().unwrap()),
        "{err}"
    );
    // The file: the old lines, then the compaction, and no fragment.
    let now = std::fs::read(&file).unwrap();
    let old = &bytes[..bytes.len() - torn.len()];
    assert!(now.starts_with(old));
    assert!(!now.windows(9).any(|w| w == b"IMPORTANT"));
}

/// `compact --at` an entry before the leaf hangs the compaction there and makes it pi's leaf:
/// stderr says which leaf the file had and that its entries stay on their own branch; at the
/// leaf itself nothing is said.
#[test]
fn compact_at_an_earlier_entry_says_the_leaf_moved() {
    let env = TestEnv::new();
    let file = env.home.path().join("s.jsonl");
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    let leaf = |env: &TestEnv| {
        let r = crate::common::run(env, &["--json", "context", f]);
        serde_json::from_str::<Value>(&r.stdout).unwrap()["leafId"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let old = leaf(&env);
    let r = crate::common::run(&env, &["show", f, "@leaf~20", "--json"]);
    let at = serde_json::from_str::<Value>(&r.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let args = [
        "compact",
        f,
        "--at",
        "@leaf~20",
        "--keep",
        "100",
        "--summarizer",
        "echo S",
    ];
    let r = crate::common::run(&env, &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!("the leaf was {old}")) && r.stderr.contains(&at),
        "{}",
        r.stderr
    );
    let new = leaf(&env);
    assert_ne!(new, old);
    let other = env.home.path().join("t.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &other).unwrap();
    let t = other.to_str().unwrap();
    let r = crate::common::run(
        &env,
        &["compact", t, "--keep", "100", "--summarizer", "echo S"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("the leaf was"), "{}", r.stderr);
}

/// A fork copies its path one entry at a time: a 300,000-entry chain forks inside a 1 GiB
/// address space (holding the path as JSON values took 1.25 GB of memory for this one),
/// and the new file holds the path, root first, re-chained.
#[test]
fn a_fork_of_a_long_chain_runs_in_bounded_memory() {
    use std::io::Write as _;
    let env = TestEnv::new();
    let file = env.home.path().join("deep.jsonl");
    let n = 300_000;
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
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        writeln!(
            w,
            r#"{{"type":"message","id":"{i:08x}","parentId":{parent},"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"{role}","content":"message {i}","timestamp":1}}}}"#
        )
        .unwrap();
    }
    w.into_inner().unwrap().sync_all().unwrap();
    let out = env.home.path().join("fork.jsonl");
    let r = env
        .pisess_limited(1 << 30)
        .args(["fork", file.to_str().unwrap(), "@leaf~10", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1 + n - 10);
    assert_eq!(lines[0]["parentSession"], file.to_str().unwrap());
    assert_eq!(lines[1]["id"], "00000000");
    assert_eq!(lines[1]["parentId"], Value::Null);
    let last = &lines[lines.len() - 1];
    assert_eq!(last["id"], format!("{:08x}", n - 11));
    assert_eq!(last["parentId"], format!("{:08x}", n - 12));
}

/// A fork holds the labels it re-creates, not the source's: 100,000 labels in force (each
/// ~220 bytes) on entries off the path forked leave the fork inside a 96 MiB address space
/// (it needs ~40; holding pi's whole label map, twice, and the store's list of labels took
/// over 160 MiB for this file, 330 MB of memory for twice as many labels).
#[test]
fn a_fork_holds_only_the_labels_it_keeps() {
    use std::io::Write as _;
    let env = TestEnv::new();
    let file = env.home.path().join("labels.jsonl");
    let n = 100_000;
    let mut w = std::io::BufWriter::new(std::fs::File::create(&file).unwrap());
    writeln!(
        w,
        r#"{{"type":"session","version":3,"id":"labels","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}}"#
    )
    .unwrap();
    writeln!(
        w,
        r#"{{"type":"message","id":"00000000","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"hello","timestamp":1}}}}"#
    )
    .unwrap();
    writeln!(
        w,
        r#"{{"type":"label","id":"00000001","parentId":"00000000","timestamp":"2026-01-01T00:00:01.500Z","targetId":"00000000","label":"start"}}"#
    )
    .unwrap();
    let pad = "x".repeat(200);
    let mut parent = "00000001".to_owned();
    for i in 0..n {
        let id = format!("{:08x}", 0x1000_0000 + i);
        writeln!(
            w,
            r#"{{"type":"label","id":"{id}","parentId":"{parent}","timestamp":"2026-01-01T00:00:02.000Z","targetId":"t{i}","label":"label {i} {pad}"}}"#
        )
        .unwrap();
        parent = id;
    }
    w.into_inner().unwrap().sync_all().unwrap();
    let f = file.to_str().unwrap();
    let imported = env.pisess().args(["import", f]).output().unwrap();
    assert!(imported.status.success());
    let out = env.home.path().join("fork.jsonl");
    let r = env
        .pisess_limited(96 << 20)
        .args(["fork", f, "00000000", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let lines = read_lines(&out);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[1]["id"], "00000000");
    assert_eq!(lines[2]["type"], "label");
    assert_eq!(lines[2]["targetId"], "00000000");
    assert_eq!(lines[2]["label"], "start");
    assert_eq!(lines[2]["parentId"], "00000000");
}

/// pi's label map through a fork, on a crafted session against the live oracle: labels set,
/// cleared and set again (a label set again after being cleared goes last), labels on
/// entries the fork drops and on ids no entry has, non-string targets, labels written on a
/// dropped branch for a kept entry, label entries on the path itself (dropped), and a
/// compaction whose `firstKeptEntryId` names one of those.
#[test]
fn fork_recreates_pis_label_map_on_a_crafted_session() {
    let env = TestEnv::new();
    let file = env.home.path().join("crafted.jsonl");
    let ts = |i: usize| format!("2026-01-01T00:00:{i:02}.000Z");
    let mut lines: Vec<String> = vec![
        r#"{"type":"session","version":3,"id":"crafted","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}"#.to_owned(),
    ];
    let msg = |id: &str, parent: Option<&str>, role: &str, i: usize| {
        let parent = parent.map_or("null".to_owned(), |p| format!("\"{p}\""));
        let content = if role == "user" {
            format!(r#""message {i}""#)
        } else {
            format!(r#"[{{"type":"text","text":"answer {i}"}}]"#)
        };
        format!(
            r#"{{"type":"message","id":"{id}","parentId":{parent},"timestamp":"{}","message":{{"role":"{role}","content":{content},"timestamp":{i}}}}}"#,
            ts(i)
        )
    };
    let label = |id: &str, parent: &str, target: &str, label: &str, i: usize| {
        format!(
            r#"{{"type":"label","id":"{id}","parentId":"{parent}","timestamp":"{}","targetId":{target},"label":{label}}}"#,
            ts(i)
        )
    };
    lines.push(msg("a0000001", None, "user", 1));
    lines.push(msg("a0000002", Some("a0000001"), "assistant", 2));
    lines.push(label(
        "b0000001",
        "a0000002",
        r#""a0000001""#,
        r#""first""#,
        3,
    ));
    lines.push(label(
        "b0000002",
        "b0000001",
        r#""a0000002""#,
        r#""second""#,
        4,
    ));
    lines.push(msg("a0000003", Some("b0000002"), "user", 5));
    // A branch the fork drops, with a label for a kept entry and labels for its own entries.
    lines.push(msg("c0000001", Some("a0000002"), "user", 6));
    lines.push(label(
        "b0000003",
        "c0000001",
        r#""c0000001""#,
        r#""dropped""#,
        7,
    ));
    lines.push(label(
        "b0000004",
        "b0000003",
        r#""a0000003""#,
        r#""from a side branch""#,
        8,
    ));
    lines.push(label(
        "b0000005",
        "b0000004",
        r#""nowhere1""#,
        r#""no entry""#,
        9,
    ));
    lines.push(label("b0000006", "b0000005", "7", r#""a number""#, 10));
    lines.push(label("b0000007", "b0000006", "null", r#""null""#, 11));
    // Back on the path: clear the first label, set it again (it goes last), relabel the second
    // (it keeps its place), a falsy label that clears nothing, a compaction naming a label.
    lines.push(label("b0000008", "a0000003", r#""a0000001""#, r#""""#, 12));
    lines.push(label(
        "b0000009",
        "b0000008",
        r#""a0000002""#,
        r#""second again""#,
        13,
    ));
    lines.push(label(
        "b000000a",
        "b0000009",
        r#""a0000001""#,
        r#""first again""#,
        14,
    ));
    lines.push(label("b000000b", "b000000a", r#""a0000004""#, "0", 15));
    lines.push(msg("a0000004", Some("b000000b"), "assistant", 16));
    lines.push(format!(
        r#"{{"type":"compaction","id":"a0000005","parentId":"a0000004","timestamp":"{}","summary":"s","firstKeptEntryId":"b0000009","tokensBefore":100}}"#,
        ts(17)
    ));
    lines.push(label(
        "b000000c",
        "a0000005",
        r#""a0000004""#,
        r#""fourth""#,
        18,
    ));
    lines.push(msg("a0000006", Some("b000000c"), "user", 19));
    lines.push(label(
        "b000000d",
        "a0000006",
        r#""c0000001""#,
        r#""dropped again""#,
        20,
    ));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for at in ["a0000006", "a0000004", "a0000003"] {
        let theirs = tmp.path().join(format!("{at}.oracle.jsonl"));
        let o = oracle(&["fork", file.to_str().unwrap(), at, theirs.to_str().unwrap()]);
        assert!(o.get("error").is_none(), "{at}: {o}");
        assert_eq!(o["written"], true, "{at}: {o}");
        let mine = tmp.path().join(format!("{at}.pisess.jsonl"));
        let got = fork_with_pisess(&env, &file, at, &mine);
        let want = read_lines(&theirs);
        assert_eq!(
            fork_structure(&got, false),
            fork_structure(&want, false),
            "fork at {at}"
        );
        assert!(
            got.iter().filter(|l| l["type"] == "label").count() >= 2,
            "{at}: {got:?}"
        );
    }
}

#[test]
fn a_failing_summarizer_or_an_unwritable_file_writes_nothing() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let file = dir.join("s.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    let before = std::fs::read(&file).unwrap();
    // Import once, so the store has the session.
    run_json(&env, &["--json", "context", f]);
    let stored = stored_entries(&env);
    for args in [
        vec!["compact", f, "--keep", "1000", "--summarizer", "exit 3"],
        vec!["compact", f, "--keep", "1000", "--summarizer", "true"],
        vec![
            "compact",
            f,
            "--keep",
            "1000",
            "--summarizer",
            "printf '\\377'",
        ],
        vec![
            "navigate",
            f,
            "bf0418f2",
            "--summarize",
            "--summarizer",
            "cat >/dev/null; exit 1",
        ],
    ] {
        let out = env.pisess().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("summarizer"), "{args:?}: {err}");
        assert!(err.contains("nothing was written"), "{err}");
        assert_eq!(
            std::fs::read(&file).unwrap(),
            before,
            "{args:?}: file changed"
        );
        assert_eq!(stored_entries(&env), stored, "{args:?}: store changed");
    }
    // Nothing to summarise: exit 1, nothing written.
    let out = env
        .pisess()
        .args(["navigate", f, "@leaf", "--summarize"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing written"));
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // The environment variable is the default summarizer.
    let out = env
        .pisess()
        .env("PISESS_SUMMARIZER", "exit 4")
        .args(["compact", f, "--keep", "1000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exit 4"));
    assert_eq!(std::fs::read(&file).unwrap(), before);
    // A file that cannot be written: read-only, or (for root, whom permissions do not bind)
    // immutable where `chattr +i` works.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let root_user = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
    let locked = if root_user {
        Immutable::set(&file)
    } else {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        None
    };
    assert!(
        !root_user || locked.is_some(),
        "chattr +i is not available here (as root, the unwritable file is made immutable): \
         the unwritable-file case cannot be checked"
    );
    let out = env
        .pisess()
        .args(["compact", f, "--keep", "1000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot write"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
    assert_eq!(stored_entries(&env), stored);
    drop(locked);
}

/// `chattr +i` on a file, undone on drop.
struct Immutable(PathBuf);

impl Immutable {
    fn set(p: &Path) -> Option<Self> {
        let ok = std::process::Command::new("chattr")
            .arg("+i")
            .arg(p)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(p.to_path_buf()))
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(&self.0)
            .status();
    }
}

/// `compact` killed (SIGKILL) at random moments: the file is always either untouched or has
/// exactly one more line, a complete compaction; the store stays consistent and, after the next
/// import, equals the file.
#[test]
fn a_killed_compact_leaves_the_file_whole_and_the_store_consistent() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let src = fixture("sessions/04-many-branches.jsonl");
    let orig = std::fs::read(&src).unwrap();
    let mut rng = crate::common::Rng(0x5eed_0fc0_ffee);
    let (mut untouched, mut appended, mut killed) = (0, 0, 0);
    let spawn = |f: &str| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("pisess"))
            .env_clear()
            .env("HOME", dir)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("PISESS_STORE", dir.join("store.redb"))
            .args(["compact", f, "--keep", "1000"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let fresh = |name: &str| {
        let file = dir.join(name);
        std::fs::write(&file, &orig).unwrap();
        // Imported first, so that a kill lands in the compaction, not in the first import.
        run_json(&env, &["--json", "context", file.to_str().unwrap()]);
        file
    };
    // The kills are drawn within the time one whole compact takes here: a fixed window (it
    // was 60 ms) outlasts a compact of a few milliseconds on an idle machine, and then no
    // run was killed at all.
    let calibration = fresh("calibrate.jsonl");
    let started = std::time::Instant::now();
    assert!(
        spawn(calibration.to_str().unwrap())
            .wait()
            .unwrap()
            .success()
    );
    let window = u64::try_from(started.elapsed().as_micros()).unwrap().max(1);
    for i in 0..crate::common::kills(24) {
        let file = fresh(&format!("k{i}.jsonl"));
        let f = file.to_str().unwrap();
        let mut child = spawn(f);
        std::thread::sleep(std::time::Duration::from_micros(rng.below(window)));
        let _ = child.kill();
        let status = child.wait().unwrap();
        {
            use std::os::unix::process::ExitStatusExt;
            // Killed while it ran, or finished first (then it must have succeeded: a compact
            // that fails at once would leave every file untouched and prove nothing).
            assert!(
                status.signal() == Some(9) || status.success(),
                "run {i}: {status}"
            );
            killed += usize::from(status.signal() == Some(9));
        }
        let now = std::fs::read(&file).unwrap();
        if now == orig {
            untouched += 1;
        } else {
            assert!(now.starts_with(&orig), "run {i}: the old bytes changed");
            let tail = std::str::from_utf8(&now[orig.len()..]).unwrap();
            assert!(
                tail.ends_with('\n') && tail.matches('\n').count() == 1,
                "run {i}"
            );
            let v: Value = serde_json::from_str(tail).unwrap();
            assert_eq!(v["type"], "compaction", "run {i}");
            appended += 1;
        }
        let out = env.pisess().arg("verify").output().unwrap();
        assert!(
            out.status.success(),
            "run {i}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let out = env.pisess().args(["export", f]).output().unwrap();
        assert_eq!(
            out.stdout, now,
            "run {i}: store and file differ after re-import"
        );
    }
    eprintln!(
        "killed compact: {killed} killed, {untouched} untouched, {appended} appended \
         (kills within {window} µs)"
    );
    assert!(killed > 0, "no run was killed before it finished");
}

/// A user message appended to `file` under its last entry, as pi appends one; its id.
fn append_as_pi(file: &Path, id: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let line = serde_json::json!({
        "type": "message", "id": id, "parentId": last["id"],
        "timestamp": "2026-07-28T09:50:00.000Z",
        "message": {"role": "user", "content": "appended by pi", "timestamp": 1_785_232_200_000_i64},
    });
    let mut f = std::fs::OpenOptions::new().append(true).open(file).unwrap();
    std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()).unwrap();
    id.to_owned()
}

/// A session named by id, id prefix or `@latest` is read as its file is now, as one named by
/// its path is: pi may have appended since the import. Before, the store's old copy answered,
/// and `compact`, `navigate` and `fork` wrote from it (the compaction hung under the old leaf,
/// leaving pi's new message on an abandoned branch).
#[test]
fn a_session_named_by_id_or_latest_is_read_as_its_file_is_now() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let file = dir.join("s.jsonl");
    // The header's cwd is `work`, for @latest.
    let text = std::fs::read_to_string(fixture("sessions/04-many-branches.jsonl")).unwrap();
    let (head, rest) = text.split_once('\n').unwrap();
    let mut header: Value = serde_json::from_str(head).unwrap();
    header["cwd"] = work.to_str().unwrap().into();
    std::fs::write(&file, format!("{header}\n{rest}")).unwrap();
    let f = file.to_str().unwrap();
    let sid = header["id"].as_str().unwrap().to_owned();
    let prefix = &sid[..8];
    assert!(
        env.pisess()
            .args(["import", f])
            .output()
            .unwrap()
            .status
            .success()
    );

    let leaf_of = |args: &[&str], dir: Option<&Path>| -> String {
        let r = crate::common::run_in(&env, args, dir);
        assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
        let first: Value = serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
        first["id"].as_str().unwrap().to_owned()
    };
    let new = append_as_pi(&file, "beef0001");
    assert_eq!(leaf_of(&["--json", "log", &sid, "-n", "1"], None), new);
    let newer = append_as_pi(&file, "beef0002");
    assert_eq!(
        leaf_of(&["--json", "log", "@latest", "-n", "1"], Some(&work)),
        newer
    );
    let newest = append_as_pi(&file, "beef0003");
    let forked = dir.join("fork.jsonl");
    let out = env
        .pisess()
        .args(["fork", prefix, "@leaf", "-o", forked.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        read_lines(&forked)
            .iter()
            .any(|l| l["id"] == newest.as_str())
    );
    let last = append_as_pi(&file, "beef0004");
    let r = run_json(&env, &["--json", "compact", prefix, "--keep", "1000"]);
    assert_eq!(r["parentId"], last.as_str(), "{r}");
    let lines = read_lines(&file);
    let tail = lines.last().unwrap();
    assert_eq!(tail["type"], "compaction");
    assert_eq!(tail["parentId"], last.as_str());
}

/// `compact` and `navigate --summarize` let the store go while the summarizer runs (a model may
/// take minutes: other pisess commands must not find the store busy all that time), and append
/// only if the file is still as they read it — what pi appended meanwhile would otherwise end
/// up on an abandoned branch. Before, the summarizer's own `pisess ls` failed ("the store is
/// busy"), and a line appended during the summary was left behind the compaction.
#[test]
fn compact_and_navigate_let_the_store_go_while_summarising_and_refuse_a_changed_file() {
    let env = TestEnv::new();
    let dir = env.home.path();
    let file = dir.join("s.jsonl");
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
    let bin = assert_cmd::cargo::cargo_bin("pisess");
    let bin = bin.to_str().unwrap();
    // The store is free while the summary is written.
    let uses_store =
        format!("cat >/dev/null; '{bin}' --json ls >/dev/null && printf '## Goal\\nx\\n'");
    let r = run_json(
        &env,
        &[
            "--json",
            "compact",
            f,
            "--keep",
            "1000",
            "--summarizer",
            &uses_store,
        ],
    );
    assert_eq!(r["compacted"], true, "{r}");
    assert_eq!(r["written"], true, "{r}");
    let r = run_json(
        &env,
        &[
            "--json",
            "navigate",
            f,
            "bf0418f2",
            "--summarize",
            "--summarizer",
            &uses_store,
        ],
    );
    assert_eq!(r["written"], true, "{r}");
    // pi appends while the summary is written: nothing is written, pi's line is the last.
    let file = dir.join("t.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &file).unwrap();
    let f = file.to_str().unwrap();
    let line = dir.join("line.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let pi_line = serde_json::json!({
        "type": "message", "id": "beef0001", "parentId": last["id"],
        "timestamp": "2026-07-28T09:50:00.000Z",
        "message": {"role": "user", "content": "appended by pi", "timestamp": 1_785_232_200_000_i64},
    });
    std::fs::write(&line, format!("{pi_line}\n")).unwrap();
    let appends = format!(
        "cat >/dev/null; cat '{}' >> '{f}'; printf '## Goal\\nx\\n'",
        line.display()
    );
    let compact: Vec<&str> = vec!["compact", f, "--keep", "1000", "--summarizer", &appends];
    let navigate: Vec<&str> = vec![
        "navigate",
        f,
        "bf0418f2",
        "--summarize",
        "--summarizer",
        &appends,
    ];
    for args in [compact, navigate] {
        let before = std::fs::read(&file).unwrap();
        let out = env.pisess().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("changed while the summary was written"),
            "{err}"
        );
        assert!(err.contains("nothing was written"), "{err}");
        let mut expect = before;
        expect.extend_from_slice(&std::fs::read(&line).unwrap());
        assert_eq!(std::fs::read(&file).unwrap(), expect, "{args:?}");
    }
}

/// `fork -o` of a folder says it is a folder (it said "already exists", hinting at a new name);
/// `fork -o` into a folder that does not exist is refused, as `export -o` refuses it.
#[test]
fn fork_into_a_folder_says_it_is_a_folder() {
    let env = TestEnv::new();
    let f = fixture("sessions/01-tiny.jsonl");
    let dir = env.home.path().join("forks");
    std::fs::create_dir_all(&dir).unwrap();
    let out = env
        .pisess()
        .args([
            "fork",
            f.to_str().unwrap(),
            "@leaf",
            "-o",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is a directory"), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    // A folder that does not exist is not made (as `export -o` and a shell's `>`): a typo in
    // the folder's name would otherwise hide the fork where nobody looks.
    let target = dir.join("no/such/fork.jsonl");
    let out = env
        .pisess()
        .args([
            "fork",
            f.to_str().unwrap(),
            "@leaf",
            "-o",
            target.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "the folder {} does not exist",
            dir.join("no/such").display()
        )),
        "{err}"
    );
    assert!(!dir.join("no").exists());

    // A "folder" that is a file says so.
    let file = dir.join("plain");
    std::fs::write(&file, "x").unwrap();
    let out = env
        .pisess()
        .args([
            "fork",
            f.to_str().unwrap(),
            "@leaf",
            "-o",
            file.join("fork.jsonl").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("the folder {} is not a folder", file.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
}

/// A command that wrote a file and then could not write its report to stdout (a full device)
/// exits 2 naming stdout, with a hint saying what it had done (it said only "No space left on
/// device", so exit 2 read as "nothing written" and a retry forked twice); an in-place prune
/// brings the store in step with the new file first (it returned before, and the session was
/// then read from the store's stale copy with a "cut short" warning).
#[test]
fn a_report_that_cannot_be_written_says_what_was_done() {
    let env = TestEnv::new();
    let dir = env.home.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("c.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &f).unwrap();
    let fs_ = f.to_str().unwrap();
    let to_full = |args: &[&str]| {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = env.pisess_child().args(args).stdout(full).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let fork = dir.join("f.jsonl");
    let (code, err) = to_full(&["fork", fs_, "@leaf~3", "-o", fork.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("error: cannot write to stdout: No space left"),
        "{err}"
    );
    assert!(
        err.contains(&format!("hint: the fork was written: {}", fork.display())),
        "{err}"
    );
    assert!(fork.is_file());

    let (code, err) = to_full(&["compact", fs_, "--keep", "1000"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("was appended to"), "{err}");
    let last = read_lines(&f).pop().unwrap();
    assert_eq!(last["type"], "compaction");

    // Three thousand branches off the root: a report larger than stdout's buffer, so that
    // it fails while it is written, not when it is flushed at the end.
    let mut lines = vec![
        r#"{"type":"session","version":3,"id":"fan","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#.to_owned(),
        r#"{"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"root","timestamp":1}}"#.to_owned(),
    ];
    for i in 0..3000 {
        lines.push(format!(
            r#"{{"type":"message","id":"b{i:07}","parentId":"a0000001","timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user","content":"branch {i}","timestamp":2}}}}"#
        ));
    }
    std::fs::write(&f, lines.join("\n") + "\n").unwrap();
    let (code, err) = to_full(&[
        "--json",
        "prune",
        fs_,
        "--keep",
        "a0000001",
        "--in-place",
        "--no-backup",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("hint: {fs_} was written")), "{err}");
    assert_eq!(read_lines(&f).len(), 2);
    // The store holds the pruned file: no warning, and export gives its bytes.
    let out = env.pisess().args(["export", fs_]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.is_empty(), "{stderr}");
    assert!(out.stdout == std::fs::read(&f).unwrap());
}

/// A file replaced by `-o` or `--in-place` keeps its mode and (where the user may give files
/// away: root) its owner, as a shell's `>` does: `export -o` over a private file made it
/// world-readable, and a root `prune --in-place` of another user's session made it root's. A
/// target whose name is legal but long (240 bytes) can be written: the temp name is cut.
#[test]
fn a_replaced_file_keeps_its_mode_and_owner_and_long_names_work() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = TestEnv::new();
    let dir = env.home.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    let src = fixture("sessions/04-many-branches.jsonl");
    let private = dir.join("private.md");
    std::fs::write(&private, "secret").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = crate::common::run(
        &env,
        &[
            "export",
            src.to_str().unwrap(),
            "--format",
            "md",
            "-o",
            private.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let md = std::fs::metadata(&private).unwrap();
    assert_eq!(md.mode() & 0o7777, 0o600);
    assert!(std::fs::read_to_string(&private).unwrap().starts_with('#'));

    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    let f = dir.join(format!("{}.jsonl", "x".repeat(234)));
    assert_eq!(f.file_name().unwrap().len(), 240);
    std::fs::copy(&src, &f).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    if root {
        std::os::unix::fs::chown(&f, Some(65534), Some(65534)).unwrap();
    }
    let before = std::fs::metadata(&f).unwrap();
    let r = crate::common::run(
        &env,
        &[
            "prune",
            f.to_str().unwrap(),
            "--keep-leaf",
            "--in-place",
            "--no-backup",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let after = std::fs::metadata(&f).unwrap();
    assert_ne!(after.ino(), before.ino(), "not replaced");
    assert!(after.len() < before.len());
    assert_eq!(
        (after.mode() & 0o7777, after.uid(), after.gid()),
        (0o640, before.uid(), before.gid())
    );
    // `-o` to a long name, new and then over itself.
    let out = dir.join(format!("{}.md", "y".repeat(237)));
    for _ in 0..2 {
        let r = crate::common::run(
            &env,
            &[
                "export",
                src.to_str().unwrap(),
                "--format",
                "md",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
    assert!(out.is_file());
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with(".pisess-tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `export S >> S` and `migrate S --stdout >> S` are refused (exit 2, the file unchanged), as
/// `cat` refuses an input that is its output: they appended the session to itself (two
/// headers, every id twice). `export S > S` (the shell empties the file first) still writes
/// the stored copy back.
#[test]
fn stdout_that_is_the_session_file_itself_is_refused() {
    let env = TestEnv::new();
    let dir = env.home.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    let a = dir.join("a.jsonl");
    let v = dir.join("v.jsonl");
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &a).unwrap();
    std::fs::copy(fixture("sessions/07-v1.jsonl"), &v).unwrap();
    let (a0, v0) = (std::fs::read(&a).unwrap(), std::fs::read(&v).unwrap());
    let into = |file: &Path, append: bool, args: &[&str]| {
        let out = std::fs::OpenOptions::new()
            .write(true)
            .append(append)
            .truncate(!append)
            .open(file)
            .unwrap();
        let done = env.pisess_child().args(args).stdout(out).output().unwrap();
        (
            done.status.code(),
            String::from_utf8_lossy(&done.stderr).into_owned(),
        )
    };
    let (code, err) = into(&a, true, &["export", a.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("stdout is the session file itself"), "{err}");
    let (code, err) = into(&v, true, &["migrate", v.to_str().unwrap(), "--stdout"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("stdout is the session file itself"), "{err}");
    assert!(std::fs::read(&a).unwrap() == a0 && std::fs::read(&v).unwrap() == v0);
    let (code, err) = into(&a, false, &["export", a.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&a).unwrap() == a0);
    // The same by `-o /dev/stdout`: refused while it holds the session, written when emptied.
    let (code, err) = into(
        &a,
        true,
        &["export", a.to_str().unwrap(), "-o", "/dev/stdout"],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(std::fs::read(&a).unwrap() == a0);
    let (code, err) = into(
        &a,
        false,
        &["export", a.to_str().unwrap(), "-o", "/dev/stdout"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&a).unwrap() == a0);
}

/// A session file without write permission is left alone by every command that would change
/// it — `prune --in-place`, `compact`, `navigate --summarize` — as `migrate --in-place` leaves
/// it (root could write it, and `prune --in-place` did, and `compact` appended to it).
#[test]
fn a_read_only_session_file_is_left_alone() {
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let dir = env.home.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("c.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &f).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&f).unwrap();
    let fs_ = f.to_str().unwrap();
    for args in [
        &["prune", fs_, "--keep-leaf", "--in-place"][..],
        &["compact", fs_, "--keep", "1000"][..],
        &["navigate", fs_, "@leaf~3", "--summarize"][..],
    ] {
        let r = crate::common::run(&env, args);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stderr.contains("is read-only; left alone"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(
            std::fs::read(&f).unwrap() == before,
            "{args:?} changed the file"
        );
    }
    assert!(!dir.join("c.jsonl.bak").exists());
    // Nor replaced by `-o` (a rename would do it all the same).
    let r = crate::common::run(
        &env,
        &[
            "export",
            fixture("sessions/01-tiny.jsonl").to_str().unwrap(),
            "-o",
            fs_,
        ],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("is read-only; left alone"),
        "{}",
        r.stderr
    );
    assert!(std::fs::read(&f).unwrap() == before);
    // An in-place prune that would drop nothing leaves it as it is: no refusal.
    let chain = dir.join("chain.jsonl");
    std::fs::copy(fixture("sessions/01-tiny.jsonl"), &chain).unwrap();
    std::fs::set_permissions(&chain, std::fs::Permissions::from_mode(0o444)).unwrap();
    let r = crate::common::run(
        &env,
        &[
            "prune",
            chain.to_str().unwrap(),
            "--keep-leaf",
            "--in-place",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Writable again: changed.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = crate::common::run(&env, &["compact", fs_, "--keep", "1000"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

/// `-o -` is stdout for `export` (it wrote a file named `-`); `fork` and `prune` refuse it
/// (a fork is a file pi opens; prune's report shares stdout), and nothing named `-` appears.
#[test]
fn dash_as_the_output_is_stdout_or_refused() {
    let env = TestEnv::new();
    let dir = env.home.path().join("w");
    std::fs::create_dir(&dir).unwrap();
    let f = dir.join("c.jsonl");
    std::fs::copy(fixture("sessions/04-many-branches.jsonl"), &f).unwrap();
    let fs_ = f.to_str().unwrap();
    let out = env
        .pisess_child()
        .current_dir(&dir)
        .args(["export", fs_, "-o", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout == std::fs::read(&f).unwrap());
    for args in [
        &["fork", fs_, "@leaf", "-o", "-"][..],
        &["prune", fs_, "--keep-leaf", "-o", "-"][..],
    ] {
        let out = env
            .pisess_child()
            .current_dir(&dir)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("-o -"),
            "{args:?}"
        );
    }
    assert!(!dir.join("-").exists());
}

/// `--json` of the commands that write a session: `written` says whether they did, the same
/// field in `compact`, `navigate` and `fork` (`compact` also keeps its `compacted`).
#[test]
fn writers_say_written_in_their_json() {
    let env = TestEnv::new();
    let json = |args: &[&str], code: i32| -> Value {
        let r = crate::common::run(&env, args);
        assert_eq!(r.code, code, "{args:?}: {}", r.stderr);
        serde_json::from_str(&r.stdout).unwrap()
    };
    let out = env.home.path().join("f.jsonl");
    let busy = fixture("sessions/04-many-branches.jsonl");
    let tiny = fixture("sessions/01-tiny.jsonl");
    let compacted = env.home.path().join("c.jsonl");
    std::fs::copy(fixture("sessions/03-compactions.jsonl"), &compacted).unwrap();
    let o = out.to_str().unwrap();
    let v = json(
        &["--json", "fork", busy.to_str().unwrap(), "@leaf", "-o", o],
        0,
    );
    assert_eq!(v["written"], true, "{v}");
    let v = json(&["--json", "fork", tiny.to_str().unwrap(), "@root"], 1);
    assert_eq!(v["written"], false, "{v}");
    let v = json(&["--json", "compact", compacted.to_str().unwrap()], 1);
    assert_eq!(v["compacted"], false, "{v}");
    assert_eq!(v["written"], false, "{v}");
}
