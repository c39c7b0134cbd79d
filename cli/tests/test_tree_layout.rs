//! `pisess tree` against pi's own `/tree` layout: the reference library's
//! TreeSelectorComponent, run by `pi_tree_layout.mjs` on every generated fixture, the standard
//! corpus's files and its edge cases, and genuine sessions, in every filter mode.
//!
//! pisess draws two-character levels where pi draws three, and leaves out the blank level pi
//! adds below an entry that has a connector (its "first generation after a branch"). Apart
//! from that the layouts must agree line for line: the same entries in the same order, the
//! same active-path marks, the same connectors (`├─`/`└─` or none), and the same gutters (`│`
//! or blank) at the same levels, a root among several drawn flush left and the entries under a
//! root that does not branch indented one level.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::common::{TestEnv, V3, corpus, oracle_home, realdata, root, session};

/// One level of a line's prefix, as drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// `│`: a gutter of an earlier sibling's branch.
    Bar,
    /// Blank: a gutter where the branch has no later sibling, or a root's indent.
    Blank,
}

/// One line of a tree, as compared.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    id: String,
    active: bool,
    levels: Vec<Level>,
    /// `Some(is_last)` when a connector is drawn.
    connector: Option<bool>,
}

/// pi's filter modes, and pisess's names for them.
const MODES: &[(&str, &str)] = &[
    ("default", "default"),
    ("no-tools", "no-tools"),
    ("user-only", "user-only"),
    ("labeled-only", "labeled"),
    ("all", "all"),
];

/// pi's layout of each (file, mode), from one Node process.
pub(crate) fn pi_layouts(requests: &[(PathBuf, &str)]) -> Vec<Value> {
    let home = oracle_home();
    let mut child = Command::new(home.join("node22/node_modules/.bin/node"))
        .arg(root().join("cli/tests/pi_tree_layout.mjs"))
        .arg(&home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("node in {}: {e} (run the oracle's setup)", home.display()));
    let mut stdin = child.stdin.take().unwrap();
    for (f, mode) in requests {
        writeln!(stdin, "{}", json!([f, mode])).unwrap();
    }
    drop(stdin);
    let out: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert!(child.wait().unwrap().success());
    assert_eq!(
        out.len(),
        requests.len(),
        "pi_tree_layout.mjs answered short"
    );
    out
}

/// pi's lines in pisess's levels: pi's display positions, each a gutter, the connector or
/// empty; the empty ones pisess leaves out (those below an entry with a connector), but for
/// the first, which is the indent under a root among several.
fn pi_lines(layout: &Value) -> Vec<Line> {
    let many_roots = layout["multipleRoots"].as_bool().unwrap();
    layout["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let indent = n["indent"].as_u64().unwrap() as usize;
            let connector = n["connector"].as_bool().unwrap();
            let gutters: Vec<(usize, bool)> = n["gutters"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| (g[0].as_u64().unwrap() as usize, g[1].as_bool().unwrap()))
                .collect();
            let mut levels = Vec::new();
            for p in 0..indent {
                if let Some(&(_, show)) = gutters.iter().find(|g| g.0 == p) {
                    levels.push(if show { Level::Bar } else { Level::Blank });
                } else if connector && p + 1 == indent {
                    // The connector's own position.
                } else if many_roots && p == 0 {
                    levels.push(Level::Blank);
                }
            }
            Line {
                id: n["id"].as_str().unwrap().to_owned(),
                active: n["active"].as_bool().unwrap(),
                levels,
                connector: connector.then(|| n["isLast"].as_bool().unwrap()),
            }
        })
        .collect()
}

/// pisess's text lines, read back into levels, connector, mark and id.
fn pisess_lines(text: &str) -> Vec<Line> {
    text.lines()
        .map(|l| {
            let mut rest = l;
            let mut levels = Vec::new();
            let mut connector = None;
            loop {
                if let Some(r) = rest.strip_prefix("│ ") {
                    levels.push(Level::Bar);
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("  ") {
                    levels.push(Level::Blank);
                    rest = r;
                } else if let Some(r) = rest.strip_prefix("├─") {
                    connector = Some(false);
                    rest = r;
                    break;
                } else if let Some(r) = rest.strip_prefix("└─") {
                    connector = Some(true);
                    rest = r;
                    break;
                } else {
                    break;
                }
            }
            let mut parts = rest.splitn(3, ' ');
            let mark = parts.next().unwrap();
            assert!(["@", "*", "o"].contains(&mark), "no mark in {l:?}");
            Line {
                id: parts.next().unwrap().to_owned(),
                active: mark != "o",
                levels,
                connector,
            }
        })
        .collect()
}

/// The files compared: every generated fixture with stable ids, the corpus's files up to
/// 3,000 entries and its v2 files (v1 files get random ids in pi), the edge cases pi opens
/// without hanging or failing, and the genuine v3 sessions.
fn files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = V3.iter().map(|n| session(n)).collect();
    let c = corpus();
    for name in [
        "01-tiny-10",
        "02-small-40",
        "03-small-100",
        "04-small-250",
        "05-med-500",
        "06-med-1000",
        "07-med-2000",
        "09-med-3000-manybranch",
        "10-med-1500-tinywindow",
        "11-med-1200-nosystem",
        "18-v2-80",
        "20-med-800-keep2k",
    ] {
        out.push(c.join(format!("{name}.jsonl")));
    }
    for name in [
        "multi-root",
        "orphan-parent",
        "leaf-not-last-branch",
        "label-set-and-clear",
        "context-edits",
        "unicode",
        "crlf",
        "null-content",
        "compaction-retain-none",
    ] {
        out.push(c.join(format!("edge/{name}.jsonl")));
    }
    // Genuine v3 sessions.
    for name in [
        "pimonozig__2026-05-17T13-43-15-664Z_019e362d-3fd0-7198-8d36-1e865e30a3b8",
        "pimonozig__2026-05-17T13-51-26-739Z_019e3634-be13-7330-a2a4-ffab205872d1",
    ] {
        out.push(realdata().join(format!("{name}.jsonl")));
    }
    out
}

/// Copies `f` into `dir` (pi rewrites a v2 file in place when it opens it).
fn copy_into(dir: &Path, i: usize, f: &Path) -> PathBuf {
    let to = dir.join(format!(
        "{i:02}-{}",
        f.file_name().unwrap().to_string_lossy()
    ));
    std::fs::copy(f, &to).unwrap();
    to
}

#[test]
fn tree_lays_out_every_filter_as_pi_does() {
    let env = TestEnv::new();
    let copies = tempfile::tempdir().unwrap();
    let files = files();
    let mut requests = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let copy = copy_into(copies.path(), i, f);
        for (pi_mode, _) in MODES {
            requests.push((copy.clone(), *pi_mode));
        }
    }
    let layouts = pi_layouts(&requests);
    let mut failures = Vec::new();
    let mut compared = 0usize;
    let mut many_roots = 0usize;
    let mut with_connectors = 0usize;
    for (i, f) in files.iter().enumerate() {
        for (m, (pi_mode, mode)) in MODES.iter().enumerate() {
            let layout = &layouts[i * MODES.len() + m];
            let want = pi_lines(layout);
            let out = env
                .pisess()
                .env("COLUMNS", "1000")
                .args(["tree", f.to_str().unwrap(), "--filter", mode])
                .output()
                .unwrap();
            let stdout = String::from_utf8(out.stdout).unwrap();
            assert!(
                out.status.success(),
                "{f:?} {mode}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(!stdout.contains("[+"), "{f:?} {mode}: nesting folded");
            let got = pisess_lines(&stdout);
            compared += want.len();
            many_roots += usize::from(layout["multipleRoots"] == true);
            with_connectors += want.iter().filter(|l| l.connector.is_some()).count();
            if got != want {
                let at = got.iter().zip(&want).position(|(g, w)| g != w);
                failures.push(format!(
                    "{} --filter {mode} (pi: {pi_mode}): {} lines vs pi's {}; first difference \
                     at line {at:?}: pisess {:?} pi {:?}\n{}",
                    f.display(),
                    got.len(),
                    want.len(),
                    at.map(|a| &got[a]),
                    at.map(|a| &want[a]),
                    stdout
                        .lines()
                        .take(at.unwrap_or(0) + 3)
                        .collect::<Vec<_>>()
                        .join("\n")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The comparison covered what it is for: many lines, connectors, several roots.
    assert!(compared > 10_000, "{compared} lines compared");
    assert!(
        with_connectors > 500,
        "{with_connectors} connectors compared"
    );
    assert!(many_roots >= 5, "{many_roots} layouts with several roots");
}
