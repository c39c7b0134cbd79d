//! Issue 4's "done when", through the real `pisess` binary: for every session file we have —
//! `fixtures/sessions/*.jsonl`, `fixtures/edge/*.jsonl`, the standard corpus
//! (`../shared/oracle/corpus`, and its `edge/`) and the genuine files (`../shared/realdata`) —
//! and for up to [`N`] entries of each, pisess's agent commands equal the reference oracle run
//! now:
//!
//! - `pisess --json context F --at E` = `oracle context F --leaf E` (messages, thinkingLevel,
//!   model, entryIds = contextEntryIds, leafId = resolvedLeafId, tokens and estimate = the
//!   projected estimate);
//! - `pisess --json compact F --at E --dry-run [--keep 1000 --reserve 2000 --window 8000]` =
//!   `oracle cut F --leaf E [same settings]` (leafId, settings, compactable/reason, every
//!   preparation field, readFiles/modifiedFiles = details, shouldCompact). The sampled entries
//!   alternate between these small settings (cut points inside small files) and pi's defaults;
//! - `pisess --json navigate F T --from O --dry-run` = `oracle branch-summary F O T` (every key;
//!   the oracle's `--full` keys are not printed by pisess) for [`PAIRS`] pairs: pairs on
//!   different branches (neither an ancestor of the other: from the leaf to sampled entries
//!   off its path, between sampled entries, between branch tips) where the tree has them, else
//!   pairs along the chain (a linear file has nothing else; the summary says how many of each);
//! - `pisess --json fork F E -o OUT` = `oracle fork F E OUT` by structure
//!   ([`crate::common::fork_structure`]: the new session id, header time and `parentSession` aside,
//!   re-created label ids renamed; for legacy files all ids); pisess's `parentSession` is F;
//!   where pi would not write the file yet (no user or assistant message), pisess writes nothing
//!   either (exit 1, `"written": false`).
//!
//! **Sampled entries** (deterministic, all of them when a file has fewer than [`N`]): the leaf,
//! the root, then round robin over entries inside compacted ranges (older than a compaction's
//! `firstKeptEntryId` on that compaction's path), tips of abandoned branches, other entries off
//! the active path, inner entries of the active path and one entry of each rarer type, each
//! bucket taken in bisection order (middle, quarters, …). The summary printed at the end counts
//! the entries checked per kind (an entry can be of several kinds) and per file group.
//!
//! **Big files** (the corpus files over [`BIG_FILE`] bytes: 08-med-2000-bigout 7.8 MB,
//! 12-large 6.9 MB, 13-large 13 MB, 14-large 26 MB, 15-large 64 MB) get the same [`N`] entries
//! and [`PAIRS`] pairs as the others ([`BIG_OPS`], [`BIG_FORKS`] can lower that when a run must
//! be quick); every oracle call re-reads the file (0.2 s to 1.4 s a call, several seconds on a
//! busy machine), so they take most of the test's time, and start first.
//! Files with the same bytes as one already checked (the corpus's `edge/` is a copy of
//! `fixtures/edge/`) are checked once and listed.
//!
//! **Files the oracle cannot answer**: where it fails to open a file (not a session), pisess
//! must refuse it clearly (exit 2, "not a pi session"); a file without entries has nothing to
//! sample, and pisess's answer there is printed; [`SKIPPED`] lists the files where pi itself is
//! broken, with the reason, printed. Where the oracle answers one command with an error, pisess
//! must exit 2 with a message, unless the error is pi crashing ([`PI_CRASHES`]: then pisess may
//! answer; printed). Legacy (v1) files get random ids in pi: the oracle is run with `--seed 1`
//! and its ids are mapped to pisess's by position. The genuine files with two records glued on
//! one line lose a record in pi and keep both in pisess: they are compared with the oracle's
//! answers on a copy with those lines split.
//!
//! **Oracle calls**: one Node process per file answers all of that file's calls
//! (`oracle_batch.mjs` evaluates the oracle's own `oracle.mjs` afresh per call; a process per
//! call, ~0.25 s each, would not fit the time), two files at a time. On every file up to
//! [`BIG_FILE`] bytes its answer at the leaf is checked against a separate `oracle` process.
//! `PISESS_ORACLE_PLAIN=1` runs every call as its own `oracle` process instead (slower; same
//! answers). `PISESS_SAMPLED_ONLY=TEXT` checks only the files whose label contains TEXT (for
//! debugging; the coverage minimums are then not asserted). `PISESS_SAMPLED_EXTRA=DIR` adds the
//! `*.jsonl` files of DIR as the group `extra` (say, sessions generated with new seeds).
//!
//! Mismatches that need a fix in files the test's author may not edit are listed in
//! [`KNOWN_MISMATCHES`]; a listed case that passes fails the test too.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::Value;

use crate::common::{
    CUT_FIELDS, TestEnv, corpus, fixture, fork_structure, oracle_home, read_lines, realdata, root,
};

/// Entries sampled per file.
const N: usize = 20;
/// Navigation pairs per file.
const PAIRS: usize = 20;
/// Files larger than this (bytes) get fewer cut, navigate and fork checks.
const BIG_FILE: u64 = 4 << 20;
/// Cut checks and navigate pairs on a big file.
const BIG_OPS: usize = N;
/// Fork checks on a big file.
const BIG_FORKS: usize = N;

/// Cases (`group/file op entry`, `op` one of context, cut, navigate, fork; `entry` is
/// `OLD>TARGET` for navigate) where pisess differs from the oracle because of a bug in a file
/// this test's author may not edit; each is described in the report that added it. The test
/// fails when a listed case passes, so the list can only shrink.
const KNOWN_MISMATCHES: &[&str] = &[];

/// Files not compared (by the name in their group), and why.
const SKIPPED: &[(&str, &str)] = &[(
    "cycle-parent-CRASHES-context.jsonl",
    "its two entries are each other's parent: pi's path walk never ends and the oracle's \
     context, cut and fileops fail with 'Invalid array length' (test_bad runs every pisess \
     command on it and checks that `check` reports the cycle)",
)];

// ---- the oracle --------------------------------------------------------------------------

/// The oracle for one file: a batch process (see the header), or a process per call.
enum Oracle {
    Batch {
        child: Child,
        stdin: Option<ChildStdin>,
        stdout: BufReader<ChildStdout>,
    },
    Plain,
}

thread_local! {
    /// Time this thread spent waiting for the oracle (µs).
    static ORACLE_MICROS: Cell<u128> = const { Cell::new(0) };
}

fn plain_mode() -> bool {
    std::env::var_os("PISESS_ORACLE_PLAIN").is_some_and(|v| v != "0" && !v.is_empty())
}

/// A plain `oracle ARGS --seed 1` process; its JSON answer (an `{error}` object included).
fn plain_oracle(args: &[&str]) -> Value {
    let out = Command::new(root().join("../shared/oracle/oracle"))
        .args(args)
        .args(["--seed", "1"])
        .output()
        .unwrap_or_else(|e| panic!("oracle {args:?}: {e}"));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

impl Oracle {
    fn start() -> Self {
        if plain_mode() {
            return Self::Plain;
        }
        let home = oracle_home();
        let mut child = Command::new(home.join("node22/node_modules/.bin/node"))
            .arg(root().join("cli/tests/oracle_batch.mjs"))
            .arg(home.join("oracle.mjs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting the oracle batch in {}: {e}", home.display()));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self::Batch {
            child,
            stdin,
            stdout,
        }
    }

    /// `oracle ARGS --seed 1`: its JSON answer (an `{error}` object when it fails).
    fn ask(&mut self, args: &[&str]) -> Value {
        let t = Instant::now();
        let v = self.ask_now(args);
        ORACLE_MICROS.with(|m| m.set(m.get() + t.elapsed().as_micros()));
        v
    }

    fn ask_now(&mut self, args: &[&str]) -> Value {
        match self {
            Self::Plain => plain_oracle(args),
            Self::Batch { stdin, stdout, .. } => {
                let mut req: Vec<&str> = args.to_vec();
                req.extend(["--seed", "1"]);
                let w = stdin.as_mut().unwrap();
                writeln!(w, "{}", serde_json::to_string(&req).unwrap()).unwrap();
                w.flush().unwrap();
                let mut line = String::new();
                stdout.read_line(&mut line).unwrap();
                assert!(!line.is_empty(), "oracle batch ended at {args:?}");
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("oracle {args:?}: {e}"))
            }
        }
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        if let Self::Batch { child, stdin, .. } = self {
            drop(stdin.take());
            let _ = child.wait();
        }
    }
}

/// Installs the oracle if needed (through its own wrapper) and checks that the installed copy
/// the batch runs is the current `oracle.mjs`.
fn prepare_oracle() {
    let v = plain_oracle(&[
        "path",
        &fixture("sessions/01-tiny.jsonl").to_string_lossy(),
        "x",
    ]);
    assert!(v.get("ids").is_some(), "the oracle does not answer: {v}");
    let installed = std::fs::read(oracle_home().join("oracle.mjs")).unwrap();
    let current = std::fs::read(root().join("../shared/oracle/oracle.mjs")).unwrap();
    assert!(
        installed == current,
        "{} is not ../shared/oracle/oracle.mjs",
        oracle_home().join("oracle.mjs").display()
    );
}

// ---- files -------------------------------------------------------------------------------

/// A session file to check.
struct Subject {
    group: &'static str,
    path: PathBuf,
    label: String,
    bytes: u64,
}

fn jsonl_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v
}

/// Every file, and the lines to print about files checked elsewhere (same bytes) or skipped.
fn subjects(notes: &mut Vec<String>) -> Vec<Subject> {
    let c = corpus();
    let mut groups: Vec<(&'static str, PathBuf)> = vec![
        ("sessions", fixture("sessions")),
        ("edge", fixture("edge")),
        ("corpus", c.clone()),
        ("corpus-edge", c.join("edge")),
        ("realdata", realdata()),
    ];
    // More files to check, e.g. sessions just generated with other seeds (`oracle/gen`).
    if let Some(extra) = std::env::var_os("PISESS_SAMPLED_EXTRA") {
        groups.push(("extra", PathBuf::from(extra)));
    }
    let only = std::env::var("PISESS_SAMPLED_ONLY").ok();
    let mut seen: HashMap<Vec<u8>, String> = HashMap::new();
    let mut out = Vec::new();
    for (group, dir) in groups {
        let files = jsonl_in(&dir);
        assert!(!files.is_empty(), "no session files in {}", dir.display());
        for path in files {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let label = format!("{group}/{}", name.trim_end_matches(".jsonl"));
            if only.as_deref().is_some_and(|o| !label.contains(o)) {
                continue;
            }
            if let Some((_, why)) = SKIPPED.iter().find(|(n, _)| *n == name) {
                notes.push(format!("{label}: skipped: {why}"));
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let digest = blake(&bytes);
            if let Some(first) = seen.get(&digest) {
                notes.push(format!("{label}: same bytes as {first}, checked there"));
                continue;
            }
            seen.insert(digest, label.clone());
            out.push(Subject {
                group,
                bytes: bytes.len() as u64,
                path,
                label,
            });
        }
    }
    out
}

/// A content key for deduplication (the bytes themselves for small files).
fn blake(bytes: &[u8]) -> Vec<u8> {
    if bytes.len() <= 1 << 16 {
        return bytes.to_vec();
    }
    let mut key = bytes.len().to_le_bytes().to_vec();
    key.extend_from_slice(&bytes[..4096]);
    key.extend_from_slice(&bytes[bytes.len() - 4096..]);
    key
}

/// The file with every line that holds several glued JSON objects split into one line each
/// (pisess recovers them; pi drops the line), or `None` when there is none; and how many lines
/// were split.
fn split_glued(path: &Path) -> Option<(String, usize)> {
    let text = String::from_utf8(std::fs::read(path).ok()?).ok()?;
    let mut out = String::with_capacity(text.len() + 64);
    let mut split = 0;
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        if body.trim().is_empty() || serde_json::from_str::<Value>(body).is_ok() {
            out.push_str(line);
            continue;
        }
        let mut parts = Vec::new();
        let mut stream = serde_json::Deserializer::from_str(body).into_iter::<Value>();
        let mut start = 0;
        let mut whole = true;
        while let Some(v) = stream.next() {
            match v {
                Ok(v) if v.is_object() => {
                    let end = stream.byte_offset();
                    parts.push(body[start..end].trim());
                    start = end;
                }
                _ => {
                    whole = false;
                    break;
                }
            }
        }
        if whole && parts.len() > 1 && body[start..].trim().is_empty() {
            for p in parts {
                out.push_str(p);
                out.push('\n');
            }
            split += 1;
        } else {
            out.push_str(line);
        }
    }
    (split > 0).then_some((out, split))
}

// ---- the tree as pi sees it ----------------------------------------------------------------

/// One entry as the oracle holds it (only entries with a string id).
struct Node {
    id: String,
    parent: Option<String>,
    ty: String,
    first_kept: Option<String>,
}

/// The oracle's view of a file: entries in file order, the leaf, and whether ids were drawn by
/// a legacy migration; `ids_in_order` has every entry's id (or "") in file order, for mapping.
struct Tree {
    nodes: Vec<Node>,
    leaf: Option<String>,
    legacy: bool,
    ids_in_order: Vec<String>,
    by_id: HashMap<String, usize>,
    children: HashMap<String, Vec<String>>,
}

impl Tree {
    /// From `oracle load` (small files) or `oracle tree` plus the compactions read from the
    /// file (big v3 files, whose `load` answer would be as big as the file).
    fn read(oracle: &mut Oracle, file: &str, bytes: u64) -> Result<Self, String> {
        let mut nodes = Vec::new();
        let mut ids_in_order = Vec::new();
        let (leaf, legacy);
        if bytes <= 8 << 20 {
            let load = oracle.ask(&["load", file]);
            if let Some(e) = load.get("error") {
                return Err(e.to_string());
            }
            legacy =
                load["migrated"] == true && load["originalVersion"].as_f64().unwrap_or(1.0) < 2.0;
            leaf = load["leafId"].as_str().map(str::to_owned);
            for e in load["entries"].as_array().unwrap() {
                let id = e.get("id").and_then(Value::as_str);
                ids_in_order.push(id.unwrap_or_default().to_owned());
                if let Some(id) = id {
                    nodes.push(Node {
                        id: id.to_owned(),
                        parent: e.get("parentId").and_then(Value::as_str).map(str::to_owned),
                        ty: e["type"].as_str().unwrap_or("?").to_owned(),
                        first_kept: e
                            .get("firstKeptEntryId")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    });
                }
            }
        } else {
            let tree = oracle.ask(&["tree", file]);
            if let Some(e) = tree.get("error") {
                return Err(e.to_string());
            }
            legacy = false;
            leaf = tree["leafId"].as_str().map(str::to_owned);
            let mut kept = HashMap::new();
            let text = std::fs::read_to_string(file).unwrap();
            for line in text.lines() {
                if line.contains("\"compaction\"")
                    && let Ok(v) = serde_json::from_str::<Value>(line)
                    && v["type"] == "compaction"
                    && let (Some(id), Some(k)) = (v["id"].as_str(), v["firstKeptEntryId"].as_str())
                {
                    kept.insert(id.to_owned(), k.to_owned());
                }
            }
            // The tree's nodes are in depth-first order: put them back in file order.
            let order: HashMap<&str, usize> = text
                .lines()
                .enumerate()
                .filter_map(|(i, l)| {
                    let at = l.find("\"id\":\"")? + 6;
                    Some((l[at..].split('"').next()?, i))
                })
                .collect();
            let mut raw: Vec<&Value> = tree["nodes"].as_array().unwrap().iter().collect();
            raw.sort_by_key(|n| order.get(n["id"].as_str().unwrap_or("")).copied());
            for n in raw {
                let id = n["id"].as_str().unwrap().to_owned();
                ids_in_order.push(id.clone());
                nodes.push(Node {
                    first_kept: kept.get(&id).cloned(),
                    parent: n["parentId"].as_str().map(str::to_owned),
                    ty: n["type"].as_str().unwrap_or("?").to_owned(),
                    id,
                });
            }
        }
        // pi's byId map: the last entry with an id wins.
        let mut by_id = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            by_id.insert(n.id.clone(), i);
        }
        let mut children: HashMap<String, Vec<String>> = HashMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if by_id[&n.id] == i
                && let Some(p) = &n.parent
            {
                children.entry(p.clone()).or_default().push(n.id.clone());
            }
        }
        Ok(Self {
            nodes,
            leaf,
            legacy,
            ids_in_order,
            by_id,
            children,
        })
    }

    /// Root first, up to `id` (stops at a missing parent or a cycle).
    fn path(&self, id: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = Some(id.to_owned());
        while let Some(c) = cur {
            let Some(&i) = self.by_id.get(&c) else { break };
            if !seen.insert(c.clone()) {
                break;
            }
            cur = self.nodes[i].parent.clone();
            out.push(c);
        }
        out.reverse();
        out
    }

    /// Distinct ids in file order (the entry pi's map holds for each).
    fn ids(&self) -> Vec<&str> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| self.by_id[&n.id] == *i)
            .map(|(_, n)| n.id.as_str())
            .collect()
    }
}

// ---- sampling ----------------------------------------------------------------------------

/// The kinds an entry can be of, in the order they are reported.
const KINDS: [&str; 6] = ["leaf", "root", "inner", "abandoned", "compacted", "tip"];

/// Indices `0..m` in bisection order: middle, then the middles of each half, and so on.
fn spread(m: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(m);
    let mut queue = std::collections::VecDeque::from([(0, m)]);
    while let Some((lo, hi)) = queue.pop_front() {
        if lo >= hi {
            continue;
        }
        let mid = lo + (hi - lo) / 2;
        out.push(mid);
        queue.push_back((lo, mid));
        queue.push_back((mid + 1, hi));
    }
    out
}

/// The sampled entries (oracle ids) and the kinds of each.
struct Sample {
    picks: Vec<String>,
    kinds: HashMap<String, Vec<&'static str>>,
    branched: bool,
}

fn sample(tree: &Tree) -> Sample {
    let ids = tree.ids();
    let active: Vec<String> = tree
        .leaf
        .as_deref()
        .map(|l| tree.path(l))
        .unwrap_or_default();
    let on_active: HashSet<&str> = active.iter().map(String::as_str).collect();
    // Inside a compacted range: the ancestors of a compaction's first kept entry, when that
    // entry is on the compaction's own path.
    let mut compacted: HashSet<String> = HashSet::new();
    for n in &tree.nodes {
        if let Some(k) = &n.first_kept
            && tree.path(&n.id).contains(k)
        {
            let mut cur = tree.nodes[tree.by_id[k]].parent.clone();
            while let Some(c) = cur {
                if !tree.by_id.contains_key(&c) || !compacted.insert(c.clone()) {
                    break;
                }
                cur = tree.nodes[tree.by_id[&c]].parent.clone();
            }
        }
    }
    let root = ids.iter().find(|id| {
        tree.nodes[tree.by_id[**id]]
            .parent
            .as_ref()
            .is_none_or(|p| !tree.by_id.contains_key(p))
    });
    let mut kinds: HashMap<String, Vec<&'static str>> = HashMap::new();
    for id in &ids {
        let mut k = Vec::new();
        if tree.leaf.as_deref() == Some(*id) {
            k.push("leaf");
        }
        if root == Some(id) {
            k.push("root");
        }
        if on_active.contains(id) && k.is_empty() {
            k.push("inner");
        }
        if !on_active.contains(id) {
            k.push("abandoned");
            if !tree.children.contains_key(*id) {
                k.push("tip");
            }
        }
        if compacted.contains(*id) {
            k.push("compacted");
        }
        kinds.insert((*id).to_owned(), k);
    }
    let has = |id: &str, k: &str| kinds[id].contains(&k);
    let bucket = |f: &dyn Fn(&str) -> bool| -> Vec<String> {
        let b: Vec<&str> = ids.iter().copied().filter(|id| f(id)).collect();
        spread(b.len())
            .into_iter()
            .map(|i| b[i].to_owned())
            .collect()
    };
    let mut rare: Vec<String> = Vec::new();
    let mut types: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for id in &ids {
        let ty = tree.nodes[tree.by_id[*id]].ty.as_str();
        if ty != "message" {
            types.entry(ty).or_default().push(id);
        }
    }
    for v in types.values() {
        rare.push(v[spread(v.len())[0]].to_owned());
    }
    let buckets = [
        bucket(&|id| has(id, "compacted")),
        bucket(&|id| has(id, "tip")),
        bucket(&|id| has(id, "abandoned") && !has(id, "tip")),
        bucket(&|id| has(id, "inner")),
        rare,
    ];
    let mut picks: Vec<String> = Vec::new();
    let push = |id: &str, picks: &mut Vec<String>| {
        if picks.len() < N && !picks.iter().any(|p| p == id) {
            picks.push(id.to_owned());
        }
    };
    for id in tree.leaf.iter().chain(root.map(|r| (*r).to_owned()).iter()) {
        if tree.by_id.contains_key(id) {
            push(id, &mut picks);
        }
    }
    let mut cursors = [0usize; 5];
    while picks.len() < N && buckets.iter().zip(&cursors).any(|(b, c)| *c < b.len()) {
        for (b, c) in buckets.iter().zip(cursors.iter_mut()) {
            if let Some(id) = b.get(*c) {
                push(id, &mut picks);
                *c += 1;
            }
        }
    }
    for i in spread(ids.len()) {
        push(ids[i], &mut picks);
    }
    let roots = ids
        .iter()
        .filter(|id| {
            tree.nodes[tree.by_id[**id]]
                .parent
                .as_ref()
                .is_none_or(|p| !tree.by_id.contains_key(p))
        })
        .count();
    let branched = roots > 1 || tree.children.values().any(|c| c.len() > 1);
    Sample {
        picks,
        kinds,
        branched,
    }
}

/// Navigation pairs (old leaf, target), up to [`PAIRS`]: on different branches first, then
/// along the chain. Returns the pairs and how many are on different branches.
fn pairs(tree: &Tree, s: &Sample) -> (Vec<(String, String)>, usize) {
    // Branch tips (entries without children), at most 12, spread over the file.
    let all_tips: Vec<&str> = tree
        .ids()
        .into_iter()
        .filter(|id| !tree.children.contains_key(*id))
        .collect();
    let tips: Vec<&str> = spread(all_tips.len())
        .into_iter()
        .take(12)
        .map(|i| all_tips[i])
        .collect();
    let paths: HashMap<&str, HashSet<String>> = s
        .picks
        .iter()
        .map(String::as_str)
        .chain(tips.iter().copied())
        .map(|id| (id, tree.path(id).into_iter().collect()))
        .collect();
    let apart = |a: &str, b: &str| !paths[a].contains(b) && !paths[b].contains(a);
    let mut out: Vec<(String, String)> = Vec::new();
    let add = |a: &str, b: &str, out: &mut Vec<(String, String)>| {
        if out.len() < PAIRS && a != b && !out.iter().any(|(x, y)| x == a && y == b) {
            out.push((a.to_owned(), b.to_owned()));
        }
    };
    let leaf = tree.leaf.as_deref().filter(|l| tree.by_id.contains_key(*l));
    if let Some(l) = leaf {
        for p in &s.picks {
            if apart(l, p) {
                add(l, p, &mut out);
            }
        }
    }
    for (i, a) in s.picks.iter().enumerate() {
        for b in &s.picks[i + 1..] {
            if apart(a, b) {
                add(a, b, &mut out);
                add(b, a, &mut out);
            }
        }
    }
    for a in &tips {
        for b in &tips {
            if apart(a, b) {
                add(a, b, &mut out);
            }
        }
    }
    let apart_count = out.len();
    if let Some(l) = leaf {
        for p in &s.picks {
            add(l, p, &mut out);
            add(p, l, &mut out);
        }
    }
    for (i, a) in s.picks.iter().enumerate() {
        for b in &s.picks[i + 1..] {
            add(a, b, &mut out);
        }
    }
    (out, apart_count)
}

// ---- comparisons -------------------------------------------------------------------------

/// Keys whose values are entry ids (renamed from pisess's to the oracle's for legacy files).
const ID_KEYS: &[&str] = &[
    "leafId",
    "resolvedLeafId",
    "entryIds",
    "firstKeptEntryId",
    "commonAncestorId",
    "oldLeafId",
    "targetId",
    "fromId",
    "summarizeEntryIds",
    "turnPrefixEntryIds",
];

fn rename_ids(v: &mut Value, map: &HashMap<String, String>, under_id_key: bool) {
    match v {
        Value::String(s) if under_id_key => {
            if let Some(to) = map.get(s.as_str()) {
                *s = to.clone();
            }
        }
        Value::Array(a) => {
            for x in a {
                rename_ids(x, map, under_id_key);
            }
        }
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                rename_ids(x, map, ID_KEYS.contains(&k.as_str()));
            }
        }
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 400 {
        let mut end = 400;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}… ({} bytes)", &s[..end], s.len())
    } else {
        s
    }
}

/// Differences between `got[ours]` and `want[theirs]` for each pair of keys, one line each.
fn field_diffs(got: &Value, want: &Value, keys: &[(&str, &str)]) -> Vec<String> {
    keys.iter()
        .filter(|(o, t)| got.get(*o) != want.get(*t))
        .map(|(o, t)| {
            format!(
                "{o}: pisess {} / oracle {t} {}",
                got.get(*o).map_or("(absent)".to_owned(), short),
                want.get(*t).map_or("(absent)".to_owned(), short)
            )
        })
        .collect()
}

/// A pisess run: exit code, stdout parsed as JSON (if it is), stderr.
struct PRun {
    code: i32,
    json: Option<Value>,
    stderr: String,
}

fn pisess(env: &TestEnv, args: &[&str]) -> PRun {
    let out = env.pisess().args(args).output().unwrap();
    PRun {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_slice(&out.stdout).ok(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The check of one file.
struct Report {
    label: String,
    group: &'static str,
    entries: usize,
    kinds: BTreeMap<&'static str, usize>,
    context: usize,
    cut: usize,
    prepared: usize,
    navigate: usize,
    navigate_apart: usize,
    fork: usize,
    fork_written: usize,
    notes: Vec<String>,
    /// (case, what differs).
    failures: Vec<(String, String)>,
    seconds: f64,
    oracle_seconds: f64,
    pisess_seconds: f64,
}

impl Report {
    fn new(s: &Subject) -> Self {
        Self {
            label: s.label.clone(),
            group: s.group,
            entries: 0,
            kinds: BTreeMap::new(),
            context: 0,
            cut: 0,
            prepared: 0,
            navigate: 0,
            navigate_apart: 0,
            fork: 0,
            fork_written: 0,
            notes: Vec::new(),
            failures: Vec::new(),
            seconds: 0.0,
            oracle_seconds: 0.0,
            pisess_seconds: 0.0,
        }
    }

    fn fail(&mut self, op: &str, entry: &str, diffs: Vec<String>) {
        if !diffs.is_empty() {
            self.failures
                .push((format!("{} {op} {entry}", self.label), diffs.join("\n    ")));
        }
    }
}

/// Oracle errors that are pi crashing inside the library (a JavaScript TypeError), not pi
/// refusing a request: there pisess may answer (exit 0) or refuse (exit 2); each is printed.
const PI_CRASHES: &[(&str, &str)] = &[(
    "content is not iterable",
    "pi's branch-summary preparation iterates each message's content: null in \
     edge/null-content's user message u1, missing in its custom_message cm1",
)];

/// What one file's checks need.
struct Ctx<'a> {
    env: &'a TestEnv,
    /// The file given to pisess.
    file: String,
    /// The file given to the oracle (a copy with glued lines split, or the same).
    ofile: String,
    /// Oracle id → pisess id (identity unless legacy).
    to_ours: HashMap<String, String>,
    /// pisess id → oracle id.
    to_theirs: HashMap<String, String>,
    legacy: bool,
    /// Oracle errors met, and what pisess did there: (message, pisess's exit) → count.
    oracle_errors: RefCell<BTreeMap<(String, i32), usize>>,
    /// Seconds spent in pisess.
    pisess_seconds: Cell<f64>,
}

impl Ctx<'_> {
    /// When the oracle answered with an error: pisess must refuse clearly too (exit 2 and a
    /// message), unless pi crashed ([`PI_CRASHES`]; then pisess may answer); returns the
    /// differences.
    fn both_refuse(&self, p: &PRun, want: &Value) -> Vec<String> {
        let msg = want["error"].as_str().unwrap_or("?").to_owned();
        let crash = PI_CRASHES.iter().any(|(m, _)| msg.contains(m));
        let refused = p.code == 2 && p.stderr.starts_with("error: ");
        if refused || (crash && p.code == 0) {
            *self
                .oracle_errors
                .borrow_mut()
                .entry((msg, p.code))
                .or_default() += 1;
            return Vec::new();
        }
        vec![format!(
            "the oracle fails ({msg}) but pisess exits {} ({})",
            p.code,
            p.stderr.trim()
        )]
    }

    fn ours(&self, id: &str) -> String {
        self.to_ours
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_owned())
    }

    fn pisess(&self, args: &[&str]) -> PRun {
        let t = Instant::now();
        let mut r = pisess(self.env, args);
        self.pisess_seconds
            .set(self.pisess_seconds.get() + t.elapsed().as_secs_f64());
        if let Some(j) = r.json.as_mut() {
            rename_ids(j, &self.to_theirs, false);
        }
        r
    }
}

/// `context` at entry `id`, or, with `None`, at the leaf each side loads (pi falls back to the
/// last entry when its leaf id is not text).
fn check_context(c: &Ctx<'_>, o: &mut Oracle, id: Option<&str>) -> Vec<String> {
    let (want, got) = match id {
        Some(id) => (
            o.ask(&["context", &c.ofile, "--leaf", id]),
            c.pisess(&["--json", "context", &c.file, "--at", &c.ours(id)]),
        ),
        None => (
            o.ask(&["context", &c.ofile]),
            c.pisess(&["--json", "context", &c.file]),
        ),
    };
    if want.get("error").is_some() {
        return c.both_refuse(&got, &want);
    }
    let Some(g) = got.json.filter(|_| got.code == 0) else {
        return vec![format!("pisess exits {}: {}", got.code, got.stderr.trim())];
    };
    let mut d = field_diffs(
        &g,
        &want,
        &[
            ("leafId", "resolvedLeafId"),
            ("messages", "messages"),
            ("thinkingLevel", "thinkingLevel"),
            ("model", "model"),
            ("entryIds", "contextEntryIds"),
        ],
    );
    let projected = &want["estimate"]["projected"];
    if g["estimate"] != *projected || g["tokens"] != projected["tokens"] {
        d.push(format!(
            "estimate: pisess {} {} / oracle {}",
            g["tokens"],
            short(&g["estimate"]),
            short(projected)
        ));
    }
    d
}

/// Returns the differences and whether the oracle prepared a compaction.
fn check_cut(c: &Ctx<'_>, o: &mut Oracle, id: &str, small: bool) -> (Vec<String>, bool) {
    let settings: &[&str] = if small {
        &["--keep", "1000", "--reserve", "2000", "--window", "8000"]
    } else {
        &[]
    };
    let mut oargs = vec!["cut", c.ofile.as_str(), "--leaf", id];
    oargs.extend(settings);
    let want = o.ask(&oargs);
    let at = c.ours(id);
    let mut pargs = vec![
        "--json",
        "compact",
        c.file.as_str(),
        "--at",
        &at,
        "--dry-run",
    ];
    pargs.extend(settings);
    let got = c.pisess(&pargs);
    if want.get("error").is_some() {
        return (c.both_refuse(&got, &want), false);
    }
    let Some(g) = got.json.filter(|_| got.code == 0) else {
        return (
            vec![format!("pisess exits {}: {}", got.code, got.stderr.trim())],
            false,
        );
    };
    let mut d = field_diffs(&g, &want, &[("leafId", "leafId"), ("settings", "settings")]);
    let Some(p) = want["preparation"].as_object() else {
        if g["compactable"] != false || g["reason"] != want["reason"] {
            d.push(format!(
                "pisess compactable {} reason {} / oracle reason {}",
                g["compactable"], g["reason"], want["reason"]
            ));
        }
        return (d, false);
    };
    let p = Value::Object(p.clone());
    if g["compactable"] != true {
        d.push(format!("pisess: not compactable ({})", g["reason"]));
        return (d, true);
    }
    let fields: Vec<(&str, &str)> = CUT_FIELDS.iter().map(|k| (*k, *k)).collect();
    d.extend(field_diffs(&g, &p, &fields));
    d.extend(field_diffs(
        &g,
        &p["details"],
        &[
            ("readFiles", "readFiles"),
            ("modifiedFiles", "modifiedFiles"),
        ],
    ));
    d.extend(field_diffs(
        &g,
        &want,
        &[("shouldCompact", "shouldCompact")],
    ));
    (d, true)
}

fn check_navigate(c: &Ctx<'_>, o: &mut Oracle, old: &str, target: &str) -> Vec<String> {
    let want = o.ask(&["branch-summary", &c.ofile, old, target]);
    let (from, to) = (c.ours(old), c.ours(target));
    let got = c.pisess(&[
        "--json",
        "navigate",
        &c.file,
        &to,
        "--from",
        &from,
        "--dry-run",
    ]);
    if want.get("error").is_some() {
        return c.both_refuse(&got, &want);
    }
    let Some(g) = got.json.filter(|_| got.code == 0) else {
        return vec![format!("pisess exits {}: {}", got.code, got.stderr.trim())];
    };
    let keys: Vec<(&str, &str)> = want
        .as_object()
        .unwrap()
        .keys()
        .map(|k| (k.as_str(), k.as_str()))
        .collect();
    field_diffs(&g, &want, &keys)
}

/// Returns the differences and whether the oracle wrote a file.
fn check_fork(c: &Ctx<'_>, o: &mut Oracle, id: &str, n: usize) -> (Vec<String>, bool) {
    let dir = c.env.home.path();
    let theirs = dir.join(format!("fork-{n}.oracle.jsonl"));
    let mine = dir.join(format!("fork-{n}.pisess.jsonl"));
    let want = o.ask(&["fork", &c.ofile, id, &theirs.to_string_lossy()]);
    let got = c.pisess(&[
        "--json",
        "fork",
        &c.file,
        &c.ours(id),
        "-o",
        &mine.to_string_lossy(),
    ]);
    if want.get("error").is_some() {
        return (c.both_refuse(&got, &want), false);
    }
    if want["written"] != true {
        let refused = got.code == 1
            && got
                .json
                .as_ref()
                .is_some_and(|j| j["written"] == false && j["reason"].is_string());
        let d = if refused && !mine.exists() {
            Vec::new()
        } else {
            vec![format!(
                "the oracle writes no file (no user or assistant message); pisess exits {}: {}",
                got.code,
                got.stderr.trim()
            )]
        };
        return (d, false);
    }
    if got.code != 0 || !mine.exists() {
        return (
            vec![format!("pisess exits {}: {}", got.code, got.stderr.trim())],
            true,
        );
    }
    let (g, w) = (read_lines(&mine), read_lines(&theirs));
    let mut d = Vec::new();
    let source = std::fs::canonicalize(&c.file).unwrap();
    if g[0]["parentSession"] != source.to_string_lossy().as_ref() {
        d.push(format!("parentSession {}", g[0]["parentSession"]));
    }
    let (gs, ws) = (fork_structure(&g, c.legacy), fork_structure(&w, c.legacy));
    if gs.len() != ws.len() {
        d.push(format!("{} lines / oracle {}", gs.len(), ws.len()));
    }
    for (i, (a, b)) in gs.iter().zip(&ws).enumerate() {
        if a != b {
            d.push(format!(
                "line {}: pisess {} / oracle {}",
                i + 1,
                short(a),
                short(b)
            ));
            break;
        }
    }
    let _ = std::fs::remove_file(&mine);
    let _ = std::fs::remove_file(&theirs);
    (d, true)
}

// ---- one file ----------------------------------------------------------------------------

fn check_subject(s: &Subject) -> Report {
    let t0 = Instant::now();
    ORACLE_MICROS.with(|m| m.set(0));
    let mut r = Report::new(s);
    check_file(s, &mut r);
    r.seconds = t0.elapsed().as_secs_f64();
    r.oracle_seconds = ORACLE_MICROS.with(Cell::get) as f64 / 1e6;
    r
}

fn check_file(s: &Subject, r: &mut Report) {
    let env = TestEnv::new();
    let file = s.path.to_string_lossy().into_owned();
    let ofile = match split_glued(&s.path) {
        Some((text, n)) => {
            let copy = env.home.path().join(s.path.file_name().unwrap());
            std::fs::write(&copy, text).unwrap();
            r.notes.push(format!(
                "{n} line(s) with glued records (pisess keeps every record, pi drops the line): \
                 the oracle reads a copy with them split"
            ));
            copy.to_string_lossy().into_owned()
        }
        None => file.clone(),
    };
    let mut o = Oracle::start();
    let tree = match Tree::read(&mut o, &ofile, s.bytes) {
        Ok(t) => t,
        Err(e) => {
            // pi cannot open the file: pisess must refuse it too, and say why.
            let p = pisess(&env, &["--json", "context", &file]);
            if p.code == 2 && p.stderr.contains("not a pi session") {
                r.notes.push(format!(
                    "the oracle cannot open it ({e}); pisess refuses it: {}",
                    p.stderr.lines().next().unwrap_or_default()
                ));
            } else {
                r.fail(
                    "open",
                    "-",
                    vec![format!(
                        "the oracle cannot open it ({e}); pisess exits {}: {}",
                        p.code,
                        p.stderr.trim()
                    )],
                );
            }
            return;
        }
    };
    let (mut to_ours, mut to_theirs) = (HashMap::new(), HashMap::new());
    if tree.legacy {
        // pisess's ids, in file order (migrated).
        let export = env.pisess().args(["export", &file]).output().unwrap();
        let ours: Vec<String> = String::from_utf8_lossy(&export.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .map(|v| v["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        if ours.len() != tree.ids_in_order.len() {
            r.fail(
                "ids",
                "-",
                vec![format!(
                    "pisess has {} entries, the oracle {}: ids cannot be mapped",
                    ours.len(),
                    tree.ids_in_order.len()
                )],
            );
            return;
        }
        for (a, b) in tree.ids_in_order.iter().zip(&ours) {
            to_ours.insert(a.clone(), b.clone());
            to_theirs.insert(b.clone(), a.clone());
        }
    }
    let c = Ctx {
        env: &env,
        file: file.clone(),
        ofile: ofile.clone(),
        to_ours,
        to_theirs,
        legacy: tree.legacy,
        oracle_errors: RefCell::new(BTreeMap::new()),
        pisess_seconds: Cell::new(0.0),
    };
    // The batch's answer against a process of its own (not on big files, where a call costs
    // seconds; the batch runs the same code for every file).
    if !plain_mode() && s.bytes <= BIG_FILE {
        let leaf = tree.leaf.clone().unwrap_or_else(|| "null".to_owned());
        let a = o.ask(&["context", &ofile, "--leaf", &leaf]);
        let b = plain_oracle(&["context", &ofile, "--leaf", &leaf]);
        assert!(
            a == b,
            "{}: the oracle batch and the oracle differ at the leaf",
            s.label
        );
    }
    let sm = sample(&tree);
    r.entries = tree.ids().len();
    if sm.picks.is_empty() {
        // Nothing to sample: pisess's context at the leaf equals the oracle's, or pisess
        // refuses clearly (printed: pi answers with an empty context there).
        let want = o.ask(&["context", &ofile]);
        let got = c.pisess(&["--json", "context", &file]);
        match (&got.json, got.code) {
            (Some(g), 0) => r.fail(
                "context",
                "@leaf",
                field_diffs(
                    g,
                    &want,
                    &[("messages", "messages"), ("entryIds", "contextEntryIds")],
                ),
            ),
            (_, 2) if got.stderr.starts_with("error: ") => r.notes.push(format!(
                "no entries; the oracle's context has {} message(s); pisess refuses: {}",
                want["messages"].as_array().map_or(0, Vec::len),
                got.stderr.lines().next().unwrap_or_default()
            )),
            _ => r.fail(
                "context",
                "@leaf",
                vec![format!(
                    "no entries: pisess exits {}: {}",
                    got.code,
                    got.stderr.trim()
                )],
            ),
        }
        return;
    }
    if tree
        .leaf
        .as_deref()
        .is_none_or(|l| !tree.by_id.contains_key(l))
    {
        // Not sampled by id; pi's context at its loaded leaf starts from the last entry.
        r.notes.push(
            "pi's leaf has no id (an entry without one): its context checked at the default leaf"
                .to_owned(),
        );
        let d = check_context(&c, &mut o, None);
        r.fail("context", "@leaf", d);
    }
    let big = s.bytes > BIG_FILE;
    let (cuts, forks, navs) = if big {
        (BIG_OPS, BIG_FORKS, BIG_OPS)
    } else {
        (N, N, PAIRS)
    };
    for (i, id) in sm.picks.iter().enumerate() {
        for k in &sm.kinds[id] {
            *r.kinds.entry(k).or_default() += 1;
        }
        let d = check_context(&c, &mut o, Some(id));
        r.fail("context", id, d);
        r.context += 1;
        if i < cuts {
            let (d, prepared) = check_cut(&c, &mut o, id, i % 2 == 0);
            r.fail("cut", id, d);
            r.cut += 1;
            r.prepared += usize::from(prepared);
        }
        if i < forks {
            let (d, written) = check_fork(&c, &mut o, id, i);
            r.fail("fork", id, d);
            r.fork += 1;
            r.fork_written += usize::from(written);
        }
    }
    let (ps, apart) = pairs(&tree, &sm);
    for (i, (old, target)) in ps.iter().enumerate().take(navs) {
        let d = check_navigate(&c, &mut o, old, target);
        r.fail("navigate", &format!("{old}>{target}"), d);
        r.navigate += 1;
        r.navigate_apart += usize::from(i < apart);
    }
    if !sm.branched {
        r.notes
            .push("linear: the navigation pairs are along the chain".to_owned());
    }
    if big {
        r.notes.push(format!(
            "big file: cut at {cuts}, fork at {forks} of the sampled entries, {navs} pairs"
        ));
    }
    for ((msg, code), n) in c.oracle_errors.into_inner() {
        let what = PI_CRASHES
            .iter()
            .find(|(m, _)| msg.contains(m))
            .map_or_else(
                || "the oracle refuses".to_owned(),
                |(_, why)| format!("pi crashes ({why})"),
            );
        r.notes.push(format!(
            "{what} {n} time(s): {msg}; pisess {}",
            if code == 0 { "answers" } else { "refuses too" }
        ));
    }
    r.pisess_seconds = c.pisess_seconds.get();
}

// ---- the test ------------------------------------------------------------------------------

#[test]
fn agent_commands_equal_the_oracle_at_sampled_entries_of_every_file() {
    let t0 = Instant::now();
    prepare_oracle();
    let mut notes = Vec::new();
    let mut subjects = subjects(&mut notes);
    // Biggest first, so the two workers end together.
    subjects.sort_by_key(|s| std::cmp::Reverse(s.bytes));
    let next = AtomicUsize::new(0);
    let reports = Mutex::new(Vec::new());
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(s) = subjects.get(i) else { break };
                    let r = check_subject(s);
                    reports.lock().unwrap().push(r);
                }
            });
        }
    });
    let mut reports = reports.into_inner().unwrap();
    reports.sort_by(|a, b| a.label.cmp(&b.label));

    let mut out = String::new();
    let mut totals: BTreeMap<&str, [usize; 8]> = BTreeMap::new();
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &reports {
        let kinds_line: Vec<String> = KINDS
            .iter()
            .filter_map(|k| r.kinds.get(k).map(|n| format!("{k} {n}")))
            .collect();
        let _ = writeln!(
            out,
            "{}: {} entries; sampled {} ({}); context {}, cut {} ({} prepared), navigate {} \
             ({} on different branches), fork {} ({} written); {:.1}s (oracle {:.1}s, pisess \
             {:.1}s)",
            r.label,
            r.entries,
            r.context,
            kinds_line.join(", "),
            r.context,
            r.cut,
            r.prepared,
            r.navigate,
            r.navigate_apart,
            r.fork,
            r.fork_written,
            r.seconds,
            r.oracle_seconds,
            r.pisess_seconds
        );
        for n in &r.notes {
            let _ = writeln!(out, "    {n}");
        }
        let t = totals.entry(r.group).or_default();
        for (i, v) in [
            1,
            r.context,
            r.cut,
            r.prepared,
            r.navigate,
            r.navigate_apart,
            r.fork,
            r.fork_written,
        ]
        .into_iter()
        .enumerate()
        {
            t[i] += v;
        }
        for (k, n) in &r.kinds {
            *kinds.entry(k).or_default() += n;
        }
    }
    for n in &notes {
        let _ = writeln!(out, "{n}");
    }
    let _ = writeln!(
        out,
        "\nper group: files, context, cut (prepared), navigate (apart), fork (written)"
    );
    for (g, t) in &totals {
        let _ = writeln!(
            out,
            "  {g}: {} files, context {}, cut {} ({}), navigate {} ({}), fork {} ({})",
            t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]
        );
    }
    let kinds_line: Vec<String> = KINDS
        .iter()
        .map(|k| format!("{k} {}", kinds.get(k).unwrap_or(&0)))
        .collect();
    let _ = writeln!(out, "entries checked per kind: {}", kinds_line.join(", "));
    let _ = writeln!(out, "wall time {:.0}s", t0.elapsed().as_secs_f64());
    println!("{out}");

    // Every mismatch is listed, and every listed one still happens.
    let failures: Vec<&(String, String)> = reports.iter().flat_map(|r| &r.failures).collect();
    let unexpected: Vec<String> = failures
        .iter()
        .filter(|(case, _)| !KNOWN_MISMATCHES.contains(&case.as_str()))
        .map(|(case, why)| format!("{case}:\n    {why}"))
        .collect();
    let ran: HashSet<&str> = reports.iter().map(|r| r.label.as_str()).collect();
    let fixed: Vec<&&str> = KNOWN_MISMATCHES
        .iter()
        .filter(|k| ran.iter().any(|l| k.starts_with(&format!("{l} "))))
        .filter(|k| !failures.iter().any(|(case, _)| case == **k))
        .collect();
    assert!(
        unexpected.is_empty() && fixed.is_empty(),
        "{} mismatch(es) with the oracle:\n{}\n\nlisted in KNOWN_MISMATCHES but passing now \
         (remove them): {fixed:?}",
        unexpected.len(),
        unexpected.join("\n")
    );

    // Coverage: every group checked, with the sample sizes promised above.
    if std::env::var_os("PISESS_SAMPLED_ONLY").is_some() {
        eprintln!("PISESS_SAMPLED_ONLY is set: coverage minimums not checked");
        return;
    }
    for g in ["sessions", "edge", "corpus", "realdata"] {
        assert!(totals.contains_key(g), "no file of {g} checked");
    }
    for r in &reports {
        assert_eq!(r.context, r.entries.min(N), "{}: context checks", r.label);
    }
    let corpus_files = reports.iter().filter(|r| r.group == "corpus").count();
    assert!(corpus_files >= 20, "only {corpus_files} corpus files");
    // The comparisons that can take a trivial branch (nothing to compact, nothing written, two
    // entries on one chain) took the real one often enough: about half of what the standard
    // inputs gave when this was written (372 prepared cuts, 474 navigations between branches
    // apart, 677 forks written).
    let sum = |i: usize| totals.values().map(|t| t[i]).sum::<usize>();
    let (prepared, apart, written) = (sum(3), sum(5), sum(7));
    assert!(
        prepared >= 180,
        "only {prepared} cuts where the oracle prepared a compaction"
    );
    assert!(
        apart >= 230,
        "only {apart} navigations between entries on different branches"
    );
    assert!(written >= 330, "only {written} forks that wrote a file");
    for k in KINDS {
        assert!(
            kinds.get(k).is_some_and(|n| *n >= 20),
            "only {:?} sampled entries of kind {k}",
            kinds.get(k)
        );
    }
}
