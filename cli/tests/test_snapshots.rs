//! insta snapshots of every command, in human and `--json` form, on four fixtures: a
//! many-branch session (04), a compacted one (03), context edits and labels (05) and a v1 file
//! migrated on import (07). Each fixture gets one private HOME and store; the fixture is copied
//! into `$HOME/sessions/` (fixtures/ is never written) and imported once, and every command
//! runs against that copy.
//!
//! Snapshots are deterministic: the HOME path is shown as `$HOME`, the project root as `$ROOT`,
//! durations as `$DUR`, the random id, time and label ids of a fork as `$FORK_*`; `NO_COLOR`
//! and `COLUMNS=100` are set by `TestEnv`. A long output keeps its first lines and says how
//! many were cut. `.ci/test` sets `INSTA_UPDATE=no`, so a missing or changed snapshot fails.
//!
//! The facts in these snapshots were reviewed against the oracle goldens in `fixtures/golden/`
//! (paths, tree order, contexts, cut points); the tests that compare JSON with the goldens field
//! by field are in test_inspect.rs, test_query.rs, test_prune.rs and test_write.rs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use regex::Regex;

use crate::common::{TestEnv, fixture, root};

/// Lines kept of one command's output.
const MAX_LINES: usize = 60;

struct Fx {
    env: TestEnv,
    /// `$HOME/sessions/NAME.jsonl`.
    file: String,
    /// (from, to) replacements, applied in order before the generic ones.
    subst: Vec<(String, String)>,
}

impl Fx {
    /// A private store holding a copy of `fixtures/sessions/NAME.jsonl`, imported.
    fn new(name: &str) -> (Self, String) {
        let env = TestEnv::new();
        let dir = env.home.path().join("sessions");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{name}.jsonl"));
        std::fs::copy(fixture(&format!("sessions/{name}.jsonl")), &file).unwrap();
        let fx = Self {
            env,
            file: file.to_str().unwrap().to_owned(),
            subst: Vec::new(),
        };
        let f = fx.file.clone();
        let mut snap = fx.sh(&["import", &f], 0);
        snap.push_str(&fx.sh(&["--json", "import", &f], 0));
        (fx, snap)
    }

    fn home(&self) -> &Path {
        self.env.home.path()
    }

    /// Runs `pisess ARGS`, checks the exit code, and returns the command line and its output
    /// (stderr after stdout, marked), redacted and cut to `MAX_LINES`.
    fn sh(&self, args: &[&str], code: i32) -> String {
        let out = self.env.pisess().args(args).output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}\nstdout: {stdout}\nstderr: {stderr}"
        );
        // No line of pisess's own ends in blanks (the fixtures' texts end none in them either).
        for l in stdout.lines().chain(stderr.lines()) {
            assert!(
                !l.ends_with([' ', '\t']),
                "{args:?}: a line ends in blanks: {l:?}"
            );
        }
        let mut text = format!("$ pisess {}\n", args.join(" "));
        if code != 0 {
            text.push_str(&format!("[exit {code}]\n"));
        }
        let lines: Vec<&str> = stdout.lines().collect();
        for l in lines.iter().take(MAX_LINES) {
            text.push_str(l);
            text.push('\n');
        }
        if lines.len() > MAX_LINES {
            text.push_str(&format!("[… {} more lines]\n", lines.len() - MAX_LINES));
        }
        for l in stderr.lines() {
            text.push_str("[stderr] ");
            text.push_str(l);
            text.push('\n');
        }
        self.redact(&text)
    }

    /// The same command in human and `--json` form.
    fn both(&self, args: &[&str], code: i32) -> String {
        let mut s = self.sh(args, code);
        let mut j = vec!["--json"];
        j.extend_from_slice(args);
        s.push_str(&self.sh(&j, code));
        s
    }

    /// `sh`, with the random id and the time of a new session header (export --branch)
    /// redacted.
    fn sh_new_header(&self, args: &[&str], code: i32) -> String {
        let s = self.sh(args, code);
        let re = Regex::new(
            r#"\{"type":"session","version":3,"id":"[0-9a-f-]{36}","timestamp":"[0-9T:.Z-]{24}""#,
        )
        .unwrap();
        re.replace(
            &s,
            r#"{"type":"session","version":3,"id":"$$NEW_ID","timestamp":"$$NOW""#,
        )
        .into_owned()
    }

    fn redact(&self, s: &str) -> String {
        let mut s = s.to_owned();
        for (from, to) in &self.subst {
            s = s.replace(from.as_str(), to);
        }
        let home = self.home().to_str().unwrap().to_owned();
        let home_canon = std::fs::canonicalize(self.home()).unwrap();
        s = s.replace(home_canon.to_str().unwrap(), "$HOME");
        s = s.replace(&home, "$HOME");
        let root = std::fs::canonicalize(root()).unwrap();
        s = s.replace(root.to_str().unwrap(), "$ROOT");
        // Durations: the import table's `0.08s`, the import JSON's `"seconds":0.0123`, the
        // migrate summary's `in 0.01s`.
        let secs = Regex::new(r#""(seconds|elapsedSeconds|elapsed)":[0-9.e-]+"#).unwrap();
        s = secs.replace_all(&s, "\"$1\":\"$$DUR\"").into_owned();
        let dur = Regex::new(r"(^|[ (])[0-9]+(\.[0-9]+)?(ms|s)\b").unwrap();
        dur.replace_all(&s, "$1$$DUR").into_owned()
    }
}

/// The ids of the entries of a session file.
fn ids(p: &Path) -> HashSet<String> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some(v["id"].as_str()?.to_owned())
        })
        .collect()
}

/// `pisess fork SESSION ENTRY -o FILE` in human and `--json` form, with the fork's random
/// session id, header time and any new entry ids (re-created labels) redacted.
fn fork(fx: &mut Fx, entry: &str) -> String {
    // The source's ids as stored (a v1 file gets its ids from the migration).
    let exported = fx.home().join("source-export.jsonl");
    let e = fx
        .env
        .pisess()
        .args(["export", &fx.file, "--format", "jsonl", "-o"])
        .arg(&exported)
        .output()
        .unwrap();
    assert_eq!(e.status.code(), Some(0), "{e:?}");
    let src_ids = ids(&exported);
    let mut snap = String::new();
    for (i, json) in [false, true].into_iter().enumerate() {
        let out = fx.home().join(format!("fork-{i}.jsonl"));
        let o = out.to_str().unwrap().to_owned();
        let f = fx.file.clone();
        let mut args = vec!["fork", f.as_str(), entry, "-o", o.as_str()];
        if json {
            args.insert(0, "--json");
        }
        // Run first, learn the random values from the written file, then render.
        let raw = fx.env.pisess().args(&args).output().unwrap();
        assert_eq!(raw.status.code(), Some(0), "{raw:?}");
        let text = std::fs::read_to_string(&out).unwrap();
        let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        fx.subst
            .push((header["id"].as_str().unwrap().to_owned(), "$FORK_ID".into()));
        fx.subst.push((
            header["timestamp"].as_str().unwrap().to_owned(),
            "$FORK_TIME".into(),
        ));
        let mut new: Vec<String> = ids(&out).difference(&src_ids).cloned().collect();
        new.sort();
        new.retain(|id| *id != header["id"].as_str().unwrap());
        for (k, id) in new.into_iter().enumerate() {
            fx.subst.push((id, format!("$FORK_NEW{k}")));
        }
        let mut s = format!("$ pisess {}\n", args.join(" "));
        s.push_str(&String::from_utf8(raw.stdout).unwrap());
        for l in String::from_utf8(raw.stderr).unwrap().lines() {
            s.push_str("[stderr] ");
            s.push_str(l);
            s.push('\n');
        }
        // What pi would see in the fork: its path from the leaf.
        s.push_str(&fx.sh(&["log", &o, "-n", "4"], 0));
        snap.push_str(&fx.redact(&s));
    }
    snap
}

/// A copy of the session's folder for `migrate` (which takes folders and writes beside them).
fn migrate(fx: &Fx) -> String {
    let src = PathBuf::from(&fx.file);
    let dir = fx.home().join("mig");
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join(src.file_name().unwrap());
    std::fs::copy(&src, &copy).unwrap();
    let d = dir.to_str().unwrap();
    let before = std::fs::read(&copy).unwrap();
    let mut s = fx.both(&["migrate", d, "--dry-run"], 0);
    assert_eq!(std::fs::read(&copy).unwrap(), before, "the dry run wrote");
    let out0 = fx.home().join("mig-out-0");
    let out1 = fx.home().join("mig-out-1");
    s.push_str(&fx.sh(&["migrate", d, "--out", out0.to_str().unwrap()], 0));
    s.push_str(&fx.sh(
        &["--json", "migrate", d, "--out", out1.to_str().unwrap()],
        0,
    ));
    assert_eq!(
        std::fs::read(&copy).unwrap(),
        before,
        "--out wrote the source"
    );
    let mut written: Vec<String> = Vec::new();
    for out in [&out0, &out1] {
        for e in walk(out) {
            written.push(format!(
                "{} ({} lines)",
                e.strip_prefix(fx.home()).unwrap().display(),
                std::fs::read_to_string(&e).unwrap().lines().count()
            ));
        }
    }
    written.sort();
    s.push_str(&format!("written: {}\n", written.join(", ")));
    s
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        if !d.exists() {
            continue;
        }
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// `prune --dry-run` and `prune -o` (human and JSON), with a check that the dry run wrote
/// nothing, and the pruned file's log.
fn prune(fx: &Fx, keep: &[&str]) -> String {
    let f = fx.file.clone();
    let before = std::fs::read(&f).unwrap();
    let mut args = vec!["prune", f.as_str()];
    args.extend_from_slice(keep);
    let mut dry = args.clone();
    dry.push("--dry-run");
    let mut s = fx.both(&dry, 0);
    assert_eq!(std::fs::read(&f).unwrap(), before, "the dry run wrote");
    for (i, json) in [false, true].into_iter().enumerate() {
        let o = fx.home().join(format!("pruned-{i}.jsonl"));
        let o = o.to_str().unwrap().to_owned();
        let mut a = args.clone();
        a.extend_from_slice(&["-o", o.as_str()]);
        if json {
            a.insert(0, "--json");
        }
        s.push_str(&fx.sh(&a, 0));
        if !json {
            // The pruned file's tree, from a store of its own (same session id as the source).
            let other = TestEnv::new();
            let t = other
                .pisess()
                .args(["log", &o, "-n", "3"])
                .output()
                .unwrap();
            assert_eq!(t.status.code(), Some(0), "{t:?}");
            s.push_str("$ pisess log PRUNED -n 3   # in a store of its own\n");
            s.push_str(&fx.redact(&String::from_utf8(t.stdout).unwrap()));
        }
    }
    assert_eq!(std::fs::read(&f).unwrap(), before, "-o wrote the source");
    s
}

macro_rules! snap {
    ($name:expr, $text:expr) => {
        insta::assert_snapshot!($name, $text)
    };
}

#[test]
fn snapshots_04_many_branches() {
    let (mut fx, import) = Fx::new("04-many-branches");
    let f = fx.file.clone();
    let f = f.as_str();
    snap!("s04_import", import);
    snap!("s04_check", fx.both(&["check", f], 0));
    snap!("s04_ls", fx.both(&["ls"], 0));
    snap!("s04_verify", fx.both(&["verify"], 0));
    snap!("s04_log", fx.both(&["log", f], 0));
    snap!("s04_log_n", fx.both(&["log", f, "-n", "3"], 0));
    snap!(
        "s04_log_type",
        fx.both(&["log", f, "--type", "branch_summary"], 0)
    );
    snap!(
        "s04_log_at",
        fx.both(&["log", f, "--at", "label:explored-2", "--reverse"], 0)
    );
    snap!("s04_tree", fx.both(&["tree", f], 0));
    for filter in ["no-tools", "user-only", "labeled", "all"] {
        snap!(
            format!("s04_tree_{filter}"),
            fx.both(&["tree", f, "--filter", filter], 0)
        );
    }
    snap!("s04_tree_depth", fx.both(&["tree", f, "--depth", "3"], 0));
    snap!("s04_show_toolcall", fx.both(&["show", f, "cc566ae4"], 0));
    snap!("s04_show_raw", fx.sh(&["show", f, "cc566ae4", "--raw"], 0));
    snap!(
        "s04_show_label",
        fx.both(&["show", f, "label:explored-69"], 0)
    );
    snap!("s04_diff", fx.both(&["diff", f, "bf0418f2", "@leaf"], 1));
    snap!("s04_diff_same", fx.both(&["diff", f, "@leaf", "@leaf"], 0));
    snap!(
        "s04_diff_context",
        fx.both(&["diff", f, "bf0418f2", "@leaf", "--context"], 1)
    );
    snap!(
        "s04_files_exact",
        fx.both(&["files", "src/db/pool.rs", "--session", f], 0)
    );
    snap!("s04_files_folder", fx.both(&["files", "src/http"], 0));
    snap!("s04_files_glob", fx.both(&["files", "web/**/*.ts"], 0));
    snap!(
        "s04_files_op",
        fx.both(&["files", "src/**", "--op", "write"], 0)
    );
    snap!(
        "s04_files_active",
        fx.both(&["files", "src/**", "--active-only"], 0)
    );
    snap!("s04_files_none", fx.both(&["files", "no/such/file.rs"], 1));
    snap!(
        "s04_context_at",
        fx.both(&["context", f, "--at", "label:explored-2"], 0)
    );
    snap!("s04_context_llm", fx.both(&["context", f, "--llm"], 0));
    snap!(
        "s04_compact_dry",
        fx.both(&["compact", f, "--dry-run", "--keep", "1000"], 0)
    );
    snap!(
        "s04_navigate_dry",
        fx.both(&["navigate", f, "bf0418f2", "--dry-run"], 0)
    );
    snap!(
        "s04_export_md_branch",
        fx.sh(
            &[
                "export",
                f,
                "--format",
                "md",
                "--branch",
                "label:explored-2"
            ],
            0
        )
    );
    snap!(
        "s04_export_jsonl_branch",
        fx.sh_new_header(
            &[
                "export",
                f,
                "--format",
                "jsonl",
                "--branch",
                "label:explored-2"
            ],
            0
        )
    );
    snap!(
        "s04_prune",
        prune(&fx, &["--keep-leaf", "--keep", "bf0418f2"])
    );
    snap!(
        "s04_grep",
        fx.both(&["grep", "-i", "cargo registry", "--session", f], 0)
    );
    snap!("s04_grep_none", fx.both(&["grep", "-F", "zzz-nothing"], 1));
    snap!("s04_stats", fx.both(&["stats", f], 0));
    snap!(
        "s04_stats_by_model",
        fx.both(&["stats", "--by", "model"], 0)
    );
    snap!("s04_fork", fork(&mut fx, "label:explored-69"));
}

#[test]
fn snapshots_03_compactions() {
    let (mut fx, import) = Fx::new("03-compactions");
    let f = fx.file.clone();
    let f = f.as_str();
    snap!("s03_import", import);
    snap!("s03_check", fx.both(&["check", f], 0));
    snap!("s03_ls", fx.both(&["ls"], 0));
    snap!("s03_verify", fx.both(&["verify"], 0));
    snap!("s03_log", fx.both(&["log", f], 0));
    snap!("s03_log_n", fx.both(&["log", f, "-n", "5"], 0));
    snap!(
        "s03_log_type",
        fx.both(&["log", f, "--type", "compaction"], 0)
    );
    snap!("s03_log_at", fx.both(&["log", f, "--at", "37636afc"], 0));
    snap!("s03_tree", fx.both(&["tree", f], 0));
    snap!(
        "s03_tree_user_only",
        fx.both(&["tree", f, "--filter", "user-only"], 0)
    );
    snap!("s03_tree_depth", fx.both(&["tree", f, "--depth", "2"], 0));
    snap!("s03_show_toolcall", fx.both(&["show", f, "302e1841"], 0));
    snap!("s03_show_compaction", fx.both(&["show", f, "@leaf"], 0));
    snap!("s03_show_raw", fx.sh(&["show", f, "@leaf", "--raw"], 0));
    snap!("s03_diff", fx.both(&["diff", f, "37636afc", "@leaf"], 1));
    snap!(
        "s03_files_folder",
        fx.both(&["files", "src/db", "--session", f], 0)
    );
    snap!("s03_context", fx.both(&["context", f], 0));
    snap!(
        "s03_context_at",
        fx.both(&["context", f, "--at", "37636afc"], 0)
    );
    snap!(
        "s03_compact_dry",
        fx.both(&["compact", f, "--dry-run", "--keep", "1000"], 0)
    );
    snap!(
        "s03_navigate_dry",
        fx.both(&["navigate", f, "0168fc2f", "--dry-run"], 0)
    );
    snap!("s03_export_md", fx.sh(&["export", f, "--format", "md"], 0));
    snap!("s03_prune", prune(&fx, &["--keep-leaf"]));
    snap!(
        "s03_grep",
        fx.both(&["grep", "-i", "pagination", "--role", "compaction"], 0)
    );
    snap!("s03_stats", fx.both(&["stats", f], 0));
    snap!("s03_fork", fork(&mut fx, "@leaf"));
}

#[test]
fn snapshots_05_context_edits_labels() {
    let (mut fx, import) = Fx::new("05-context-edits-labels");
    let f = fx.file.clone();
    let f = f.as_str();
    snap!("s05_import", import);
    snap!("s05_check", fx.both(&["check", f], 0));
    snap!("s05_ls", fx.both(&["ls"], 0));
    snap!("s05_verify", fx.both(&["verify"], 0));
    snap!("s05_log", fx.both(&["log", f], 0));
    snap!("s05_log_type", fx.both(&["log", f, "--type", "label"], 0));
    snap!(
        "s05_log_at",
        fx.both(&["log", f, "--at", "label:explored-49~2", "-n", "4"], 0)
    );
    for filter in ["default", "no-tools", "user-only", "labeled", "all"] {
        snap!(
            format!("s05_tree_{filter}"),
            fx.both(&["tree", f, "--filter", filter], 0)
        );
    }
    snap!("s05_tree_depth", fx.both(&["tree", f, "--depth", "4"], 0));
    snap!("s05_show_toolcall", fx.both(&["show", f, "af7f860e"], 0));
    snap!("s05_show_raw", fx.sh(&["show", f, "af7f860e", "--raw"], 0));
    snap!(
        "s05_diff",
        fx.both(&["diff", f, "label:explored-49", "label:explored-23"], 1)
    );
    snap!(
        "s05_files_glob",
        fx.both(&["files", "**/*.rs", "--session", f, "--op", "read"], 0)
    );
    snap!("s05_context", fx.both(&["context", f], 0));
    snap!(
        "s05_context_at_llm",
        fx.both(&["context", f, "--at", "label:explored-49", "--llm"], 0)
    );
    snap!(
        "s05_compact_dry",
        fx.both(
            &[
                "compact",
                f,
                "--dry-run",
                "--keep",
                "1000",
                "--reserve",
                "2000"
            ],
            0
        )
    );
    snap!(
        "s05_navigate_dry",
        fx.both(&["navigate", f, "label:explored-23", "--dry-run"], 0)
    );
    snap!(
        "s05_export_md_branch",
        fx.sh(
            &[
                "export",
                f,
                "--format",
                "md",
                "--branch",
                "label:explored-49"
            ],
            0
        )
    );
    snap!("s05_prune", prune(&fx, &["--keep-leaf", "--keep-labeled"]));
    snap!(
        "s05_grep",
        fx.both(&["grep", "explored", "--session", f], 0)
    );
    snap!("s05_stats", fx.both(&["stats", f, "--by", "day"], 0));
    snap!("s05_fork", fork(&mut fx, "label:explored-49"));
}

#[test]
fn snapshots_07_v1() {
    let (mut fx, import) = Fx::new("07-v1");
    let f = fx.file.clone();
    let f = f.as_str();
    snap!("s07_import", import);
    snap!("s07_check", fx.both(&["check", f], 0));
    snap!("s07_ls", fx.both(&["ls"], 0));
    snap!("s07_verify", fx.both(&["verify"], 0));
    snap!("s07_log", fx.both(&["log", f, "-n", "6"], 0));
    snap!(
        "s07_log_type",
        fx.both(&["log", f, "--type", "compaction"], 0)
    );
    snap!(
        "s07_log_at",
        fx.both(&["log", f, "--at", "@leaf~100", "-n", "3"], 0)
    );
    snap!(
        "s07_tree",
        fx.both(&["tree", f, "--filter", "user-only"], 0)
    );
    snap!("s07_tree_depth", fx.both(&["tree", f, "--depth", "3"], 0));
    snap!("s07_show", fx.both(&["show", f, "@leaf~1"], 0));
    snap!("s07_show_raw", fx.sh(&["show", f, "@root", "--raw"], 0));
    snap!("s07_diff", fx.both(&["diff", f, "@leaf~10", "@leaf"], 1));
    snap!(
        "s07_files",
        fx.both(&["files", "Cargo.toml", "--session", f], 0)
    );
    snap!(
        "s07_context_at",
        fx.both(&["context", f, "--at", "@leaf~20"], 0)
    );
    snap!(
        "s07_compact_dry",
        fx.both(&["compact", f, "--dry-run", "--keep", "1000"], 0)
    );
    snap!(
        "s07_navigate_dry",
        fx.both(&["navigate", f, "@leaf~5", "--dry-run"], 0)
    );
    snap!(
        "s07_export_jsonl",
        fx.sh(&["export", f, "--format", "jsonl"], 0)
    );
    snap!(
        "s07_export_md_branch",
        fx.sh(&["export", f, "--format", "md", "--branch", "@leaf~150"], 0)
    );
    snap!("s07_migrate", migrate(&fx));
    snap!("s07_prune", prune(&fx, &["--keep-leaf"]));
    snap!(
        "s07_grep",
        fx.both(&["grep", "error\\[E0\\d+\\]", "--session", f], 0)
    );
    snap!("s07_stats", fx.both(&["stats", f], 0));
    snap!("s07_fork", fork(&mut fx, "@leaf~2"));
}
