//! The agent layer against the reference oracle's goldens (`fixtures/golden/`): context at every
//! sampled leaf, cut preparation, file operations and branch summaries, for every fixture and
//! genuine file listed in `fixtures/golden/index.json`. A missing golden fails the test.

use pisess_engine::agent::report::{
    branch_summary_report, context_report, cut_report, fileops_report,
};
use pisess_engine::agent::{
    AgentError, CompactionSettings, EntryIndex, parse_session_text, path_from_entries,
};
use pisess_formats::js;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn golden_dir() -> PathBuf {
    root().join("fixtures/golden")
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("golden missing: {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn is_err(v: &Value) -> bool {
    v.get("error").is_some() && v.as_object().is_some_and(|o| o.len() <= 2)
}

/// One fixture: its entries as pi holds them after opening the file.
struct Fixture {
    name: String,
    dir: PathBuf,
    /// `None` when pi refuses the file (no header first).
    entries: Option<Vec<Value>>,
    goldens: Vec<String>,
}

fn fixtures() -> Vec<Fixture> {
    let index = read_json(&golden_dir().join("index.json"));
    let mut out = Vec::new();
    for f in index["fixtures"].as_array().unwrap() {
        let group = f["group"].as_str().unwrap();
        let name = f["name"].as_str().unwrap();
        let dir = golden_dir().join(group).join(name);
        let goldens: Vec<String> = f["goldens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap().to_owned())
            .collect();
        let file = root().join(f["path"].as_str().unwrap());
        let text = String::from_utf8_lossy(&std::fs::read(&file).unwrap()).into_owned();
        let (header, entries) = parse_session_text(&text);
        let load = read_json(&dir.join("load.json"));
        let entries = if header.is_none() && !text.is_empty() {
            None
        } else if load.get("migrated") == Some(&Value::Bool(true))
            && load.get("entriesDigest").is_some()
        {
            migrate_with_oracle_ids(
                header.clone().unwrap(),
                entries,
                &load["entriesDigest"]["summary"],
            )
        } else if load.get("migrated") == Some(&Value::Bool(true)) {
            // Legacy files: the ids of a v1 migration are random in pi (seeded in the oracle),
            // so the migrated entries are taken from the oracle's own load.
            load.get("entries").and_then(Value::as_array).cloned()
        } else {
            Some(entries)
        };
        if entries.is_none() && header.is_some() {
            eprintln!("{group}/{name}: migrated entries not in load.json (reduced); skipped");
            continue;
        }
        out.push(Fixture {
            name: format!("{group}/{name}"),
            dir,
            entries,
            goldens,
        });
    }
    out
}

/// Migrates a legacy file with pisess-migrate, then gives each entry the id the oracle's
/// seeded migration gave it (`load.json`'s digest lists `[id, parentId, type]` per entry).
fn migrate_with_oracle_ids(
    header: Value,
    entries: Vec<Value>,
    summary: &Value,
) -> Option<Vec<Value>> {
    let mut values = vec![header];
    values.extend(entries);
    pisess_migrate::migrate_values(&mut values);
    let mut entries: Vec<Value> = values.into_iter().skip(1).collect();
    let summary = summary.as_array()?;
    if summary.len() != entries.len() {
        return None;
    }
    let mut rename = std::collections::HashMap::new();
    for (e, s) in entries.iter().zip(summary) {
        if let (Some(ours), Some(theirs)) = (e.get("id").and_then(Value::as_str), s[0].as_str()) {
            rename.insert(ours.to_owned(), theirs.to_owned());
        }
    }
    for (e, s) in entries.iter_mut().zip(summary) {
        if let Some(o) = e.as_object_mut() {
            o.insert("id".into(), s[0].clone());
            o.insert("parentId".into(), s[1].clone());
            if let Some(fk) = o
                .get("firstKeptEntryId")
                .and_then(Value::as_str)
                .and_then(|k| rename.get(k))
            {
                let fk = Value::String(fk.clone());
                o.insert("firstKeptEntryId".into(), fk);
            }
        }
    }
    Some(entries)
}

fn canon(v: &Value) -> String {
    js::to_string(v)
}

/// Compares the keys of `expected` (all but `skip`) with ours; returns the mismatching keys.
fn diff(ours: &Value, expected: &Value, skip: &[&str]) -> Vec<String> {
    let mut bad = Vec::new();
    for (k, v) in expected.as_object().unwrap() {
        if skip.contains(&k.as_str()) {
            continue;
        }
        let o = ours.get(k).unwrap_or(&Value::Null);
        if k.ends_with("Digest") {
            let base = &k[..k.len() - "Digest".len()];
            let n = ours.get(base).and_then(Value::as_array).map(Vec::len);
            if n != v.get("count").and_then(Value::as_u64).map(|c| c as usize) {
                bad.push(k.clone());
            }
            continue;
        }
        if canon(o) != canon(v) {
            bad.push(format!(
                "{k}: ours {} / pi {}",
                trunc(&canon(o)),
                trunc(&canon(v))
            ));
        }
    }
    bad
}

fn trunc(s: &str) -> String {
    if s.len() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s.to_owned()
    }
}

#[derive(Default)]
struct Tally {
    checked: usize,
    failures: Vec<String>,
}

impl Tally {
    fn check(&mut self, what: String, bad: Vec<String>) {
        self.checked += 1;
        if !bad.is_empty() {
            self.failures.push(format!("{what}: {}", bad.join("; ")));
        }
    }
    fn finish(self, label: &str) {
        eprintln!(
            "{label}: {} comparisons, {} failures",
            self.checked,
            self.failures.len()
        );
        assert!(self.checked > 0, "{label}: nothing compared");
        assert!(
            self.failures.is_empty(),
            "{label}:\n{}",
            self.failures.join("\n")
        );
    }
}

fn expect_cycle_or_refused(
    t: &mut Tally,
    what: String,
    fx: &Fixture,
    golden: &Value,
    leaf: Option<&str>,
) -> bool {
    let Some(entries) = &fx.entries else {
        t.check(
            what,
            if is_err(golden) {
                vec![]
            } else {
                vec!["pi loads a file we refuse".into()]
            },
        );
        return true;
    };
    if is_err(golden) {
        let ours = path_from_entries(entries, leaf);
        let ok = matches!(ours, Err(AgentError::Cycle { .. }))
            && golden["error"]
                .as_str()
                .is_some_and(|e| e.contains("Invalid array length"));
        t.check(
            what,
            if ok {
                vec![]
            } else {
                vec![format!("pi: {golden}, ours: {ours:?}")]
            },
        );
        return true;
    }
    false
}

/// Messages of a context-at golden, resolved from the message pool.
fn resolve_pool(v: &Value, pool: Option<&Value>) -> Value {
    let mut v = v.clone();
    if let (Some(pool), Some(Value::Array(refs))) = (pool, v.get("messages").cloned()) {
        let msgs: Vec<Value> = refs
            .iter()
            .map(|r| pool[r.as_u64().unwrap() as usize].clone())
            .collect();
        v["messages"] = Value::Array(msgs);
    }
    v
}

#[test]
fn context_matches_goldens() {
    let mut t = Tally::default();
    let skip = ["requestedLeafId"];
    for fx in fixtures() {
        let golden = read_json(&fx.dir.join("context.json"));
        let what = format!("{} context@leaf", fx.name);
        if !expect_cycle_or_refused(&mut t, what.clone(), &fx, &golden, None) {
            let entries = fx.entries.as_ref().unwrap();
            let path = path_from_entries(entries, None).unwrap();
            let ours = context_report(None, &path, true);
            t.check(what, diff(&ours, &golden, &skip));
        }
        if !fx.goldens.iter().any(|g| g == "context-at") {
            continue;
        }
        let at = read_json(&fx.dir.join("context-at.json"));
        let (pool, map) = match at.get("at") {
            Some(m) => (at.get("messagePool"), m.clone()),
            None => (None, at.clone()),
        };
        for (leaf, g) in map.as_object().unwrap() {
            let what = format!("{} context@{leaf}", fx.name);
            if expect_cycle_or_refused(&mut t, what.clone(), &fx, g, Some(leaf)) {
                continue;
            }
            let g = resolve_pool(g, pool);
            let entries = fx.entries.as_ref().unwrap();
            let path = path_from_entries(entries, Some(leaf)).unwrap();
            let ours = context_report(Some(leaf), &path, true);
            t.check(what, diff(&ours, &g, &[]));
        }
    }
    t.finish("context");
}

/// The ids of about `per` entries of `entries` spread evenly, plus every entry `shaping`
/// accepts and the entry after it, each with its path (pi's `getBranch`).
fn sampled_paths<'a>(
    entries: &'a [Value],
    index: &EntryIndex<'a>,
    per: usize,
    shaping: impl Fn(&Value) -> bool,
) -> Vec<(&'a str, Vec<&'a Value>)> {
    let step = (entries.len() / per).max(1);
    let mut out = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let wanted = i % step == 0
            || i + 1 == entries.len()
            || shaping(e)
            || (i > 0 && shaping(&entries[i - 1]));
        if !wanted {
            continue;
        }
        let Some(id) = e.get("id").and_then(Value::as_str) else {
            continue;
        };
        if let Ok(path) = index.branch(id) {
            out.push((id, path));
        }
    }
    out
}

/// The lean projection (one entry at a time from a `PathSource`) answers as `project` and
/// `estimate_projected_context_tokens` do, at about 200 entries of every fixture: evenly
/// spread, plus every entry that changes the context's shape and the one after it.
#[test]
fn lean_context_equals_the_projection() {
    use pisess_engine::agent::lean::{LeanContext, ValuePath};
    use pisess_engine::agent::{estimate_projected_context_tokens, project};
    type Never = std::convert::Infallible;
    let mut t = Tally::default();
    for fx in fixtures() {
        let Some(entries) = fx.entries.as_ref() else {
            continue;
        };
        let index = EntryIndex::new(entries);
        let shaping = |e: &Value| {
            matches!(
                e.get("type").and_then(Value::as_str),
                Some("compaction" | "context_edit" | "thinking_level_change" | "model_change")
            ) || e.pointer("/message/role").and_then(Value::as_str) == Some("system")
        };
        for (id, path) in sampled_paths(entries, &index, 200, shaping) {
            let src = ValuePath(&path);
            let plan = LeanContext::plan(&src).unwrap();
            let p = project(&path);
            let mut bad = Vec::new();
            let mut messages = Vec::new();
            let est = plan
                .messages(&src, |m| {
                    messages.push(m.clone());
                    Ok::<(), Never>(())
                })
                .unwrap();
            if messages != p.messages().cloned().collect::<Vec<_>>() {
                bad.push("messages".to_owned());
            }
            if est != estimate_projected_context_tokens(&p, &path) {
                bad.push(format!("estimate {est:?}"));
            }
            if plan.thinking_level() != p.thinking_level.as_ref() || plan.model() != &p.model {
                bad.push("settings".to_owned());
            }
            let mut ids = Vec::new();
            plan.entry_ids(&src, |id| {
                ids.push(id.map_or(Value::Null, |s| Value::String(s.to_owned())));
                Ok::<(), Never>(())
            })
            .unwrap();
            if ids != p.context_entry_ids() {
                bad.push("entry ids".to_owned());
            }
            let mut llm = Vec::new();
            plan.llm_messages(&src, |m| {
                llm.push(m.clone());
                Ok::<(), Never>(())
            })
            .unwrap();
            let want: Vec<Value> = p
                .llm_messages()
                .into_iter()
                .map(|m| m.into_owned())
                .collect();
            if llm != want {
                bad.push("llm messages".to_owned());
            }
            t.check(format!("{} lean@{id}", fx.name), bad);
        }
    }
    t.finish("lean context");
}

/// The lean compaction and branch-summary preparations (one entry at a time from a
/// `PathSource`) answer as `prepare_compaction` and `prepare_branch_entries` do, at about 100
/// entries of every fixture (evenly spread, plus every compaction, context edit and branch
/// summary and the entry after it): compaction with pi's default `keepRecentTokens` and a
/// small one, and the branch left from each entry to the previous sample and to the leaf.
#[test]
fn lean_preparations_equal_the_in_memory_ones() {
    use pisess_engine::agent::lean::ValuePath;
    use pisess_engine::agent::lean_preparation::{LeanBranch, LeanCompaction, Part};
    use pisess_engine::agent::{
        Msg, collect_entries_for_branch_summary, prepare_branch_entries, prepare_compaction,
    };
    type Never = std::convert::Infallible;
    let owned = |v: &[Msg<'_>]| v.iter().map(|m| m.clone().into_owned()).collect::<Vec<_>>();
    let mut t = Tally::default();
    let (mut prepared, mut branches) = (0, 0);
    for fx in fixtures() {
        let Some(entries) = fx.entries.as_ref() else {
            continue;
        };
        let index = EntryIndex::new(entries);
        let shaping = |e: &Value| {
            matches!(
                e.get("type").and_then(Value::as_str),
                Some("compaction" | "context_edit" | "branch_summary")
            )
        };
        let leaf = entries
            .iter()
            .rev()
            .find_map(|e| e.get("id").and_then(Value::as_str));
        let leaf_path = leaf.and_then(|l| index.branch(l).ok()).unwrap_or_default();
        let mut previous: Option<Vec<&Value>> = None;
        for (id, path) in sampled_paths(entries, &index, 100, shaping) {
            let src = ValuePath(&path);
            for keep in [20000.0, 500.0] {
                let settings = CompactionSettings {
                    keep_recent_tokens: keep,
                    ..CompactionSettings::default()
                };
                let mut bad = Vec::new();
                match (
                    LeanCompaction::prepare(&src, settings).unwrap(),
                    prepare_compaction(&path, settings),
                ) {
                    (Err(a), Err(b)) if a == b => {}
                    (Ok(l), Ok(m)) => {
                        prepared += 1;
                        let (mut h, mut p) = (Vec::new(), Vec::new());
                        let ops = l
                            .messages(&src, |part, msg| {
                                match part {
                                    Part::History => h.push(msg.clone()),
                                    Part::TurnPrefix => p.push(msg.clone()),
                                }
                                Ok::<(), Never>(())
                            })
                            .unwrap();
                        if (&l.first_kept_entry_id, l.is_split_turn, l.tokens_before)
                            != (&m.first_kept_entry_id, m.is_split_turn, m.tokens_before)
                        {
                            bad.push("cut".to_owned());
                        }
                        if l.previous_summary != m.previous_summary {
                            bad.push("previous summary".to_owned());
                        }
                        if h != owned(&m.messages_to_summarize) {
                            bad.push("messages to summarize".to_owned());
                        }
                        if p != owned(&m.turn_prefix_messages) {
                            bad.push("turn prefix".to_owned());
                        }
                        if ops.to_json() != m.file_ops.to_json() {
                            bad.push("file ops".to_owned());
                        }
                    }
                    (l, m) => bad.push(format!("lean {:?} vs {:?}", l.err(), m.err())),
                }
                t.check(format!("{} compaction@{id} keep {keep}", fx.name), bad);
            }
            for other in [previous.as_deref(), Some(&leaf_path[..])]
                .into_iter()
                .flatten()
            {
                branches += 1;
                let lean = LeanBranch::prepare::<_, _, Never>(
                    Some(&ValuePath(other)),
                    &src,
                    DEFAULT_BUDGET,
                )
                .unwrap();
                let c = collect_entries_for_branch_summary(other, &path);
                let m = prepare_branch_entries(&c.entries, DEFAULT_BUDGET);
                let mut ids = Vec::new();
                lean.entry_ids(&ValuePath(other), |id| {
                    ids.push(id.clone());
                    Ok::<(), Never>(())
                })
                .unwrap();
                let mut bad = Vec::new();
                if lean.common_ancestor_id != c.common_ancestor_id {
                    bad.push("common ancestor".to_owned());
                }
                if ids
                    != c.entries
                        .iter()
                        .map(|e| e["id"].clone())
                        .collect::<Vec<_>>()
                {
                    bad.push("entry ids".to_owned());
                }
                if lean.messages != owned(&m.messages)
                    || lean.total_tokens != m.total_tokens
                    || lean.file_ops.to_json() != m.file_ops.to_json()
                {
                    bad.push("prepared messages".to_owned());
                }
                t.check(format!("{} branch ->{id}", fx.name), bad);
            }
            previous = Some(path);
        }
    }
    assert!(
        prepared > 100 && branches > 100,
        "{prepared} preparations, {branches} branches"
    );
    t.finish("lean preparations");
}

/// pi's branch-summary budget with its default model window (128,000 − 16,384).
const DEFAULT_BUDGET: f64 = 128_000.0 - 16_384.0;

/// The `--window` of regen.sh's cut-at samples.
const CUT_AT_WINDOW: f64 = 8000.0;

#[test]
fn cut_matches_goldens() {
    let mut t = Tally::default();
    for fx in fixtures() {
        let golden = read_json(&fx.dir.join("cut.json"));
        let what = format!("{} cut@leaf", fx.name);
        if !expect_cycle_or_refused(&mut t, what.clone(), &fx, &golden, None) {
            let entries = fx.entries.as_ref().unwrap();
            let index = EntryIndex::new(entries);
            let leaf = entries
                .last()
                .and_then(|e| e.get("id"))
                .and_then(Value::as_str);
            let path = leaf.map(|l| index.branch(l).unwrap()).unwrap_or_default();
            let ours = cut_report(leaf, &path, CompactionSettings::default(), false, None);
            t.check(what, diff(&ours, &golden, &[]));
        }
        if !fx.goldens.iter().any(|g| g == "cut-at") {
            continue;
        }
        let at = read_json(&fx.dir.join("cut-at.json"));
        let entries = fx.entries.as_ref().unwrap();
        let index = EntryIndex::new(entries);
        for (leaf, g) in at.as_object().unwrap() {
            let path = index.branch(leaf).unwrap();
            // regen.sh samples cut-at with `--keep 1000 --reserve 2000 --window 8000`.
            let settings = CompactionSettings {
                enabled: true,
                reserve_tokens: g["settings"]["reserveTokens"].as_f64().unwrap(),
                keep_recent_tokens: g["settings"]["keepRecentTokens"].as_f64().unwrap(),
            };
            let window = g.get("shouldCompact").map(|_| CUT_AT_WINDOW);
            let ours = cut_report(Some(leaf), &path, settings, false, window);
            t.check(format!("{} cut@{leaf}", fx.name), diff(&ours, g, &[]));
        }
    }
    t.finish("cut");
}

#[test]
fn fileops_match_goldens() {
    let mut t = Tally::default();
    for fx in fixtures() {
        let golden = read_json(&fx.dir.join("fileops.json"));
        let what = format!("{} fileops@leaf", fx.name);
        if expect_cycle_or_refused(&mut t, what.clone(), &fx, &golden, None) {
            continue;
        }
        let entries = fx.entries.as_ref().unwrap();
        let index = EntryIndex::new(entries);
        let leaf = entries
            .last()
            .and_then(|e| e.get("id"))
            .and_then(Value::as_str);
        let path = leaf.map(|l| index.branch(l).unwrap()).unwrap_or_default();
        let ours = fileops_report(leaf, &path);
        t.check(what, diff(&ours, &golden, &[]));
    }
    t.finish("fileops");
}

#[test]
fn branch_summaries_match_goldens() {
    let mut t = Tally::default();
    for fx in fixtures() {
        if !fx.goldens.iter().any(|g| g == "branch-summary") {
            continue;
        }
        let entries = fx.entries.as_ref().unwrap();
        let index = EntryIndex::new(entries);
        for g in read_json(&fx.dir.join("branch-summary.json"))
            .as_array()
            .unwrap()
        {
            let old = g["oldLeafId"].as_str();
            let target = g["targetId"].as_str().unwrap();
            let old_path = old.map(|o| index.branch(o).unwrap()).unwrap_or_default();
            let target_path = index.branch(target).unwrap();
            let budget = g["budget"].as_f64().unwrap();
            let ours = branch_summary_report(old, target, &old_path, &target_path, budget, true);
            t.check(
                format!("{} branch {old:?}->{target}", fx.name),
                diff(&ours, g, &[]),
            );
        }
    }
    t.finish("branch-summary");
}

#[test]
fn cycles_are_reported() {
    let text =
        std::fs::read_to_string(root().join("fixtures/edge/cycle-parent-CRASHES-context.jsonl"))
            .unwrap();
    let (_, entries) = parse_session_text(&text);
    let err = path_from_entries(&entries, None).unwrap_err();
    let AgentError::Cycle { ids } = &err;
    assert!(!ids.is_empty(), "{err}");
}

fn oracle(args: &[&str]) -> Value {
    let bin = root().join("../shared/oracle/oracle");
    let out = std::process::Command::new(&bin)
        .args(args)
        .args(["--seed", "1"])
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "oracle {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every file of the standard corpus at its leaf, against the oracle run now: `context --llm`
/// and `cut --full` (which adds the serialised history the goldens leave out).
#[test]
fn corpus_matches_live_oracle() {
    let dir = crate::common::corpus();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    let results: Vec<Tally> = std::thread::scope(|s| {
        let chunks: Vec<Vec<PathBuf>> = (0..2)
            .map(|k| files.iter().skip(k).step_by(2).cloned().collect())
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    let mut t = Tally::default();
                    for f in chunk {
                        let name = f.file_name().unwrap().to_string_lossy().into_owned();
                        let fs = f.to_str().unwrap();
                        let text = std::fs::read_to_string(&f).unwrap();
                        let (header, mut entries) = parse_session_text(&text);
                        let version = header
                            .as_ref()
                            .and_then(|h| h.get("version"))
                            .and_then(Value::as_f64);
                        if version.is_none_or(|v| v < 3.0) {
                            let load = oracle(&["load", fs]);
                            entries = load["entries"].as_array().unwrap().clone();
                        }
                        let index = EntryIndex::new(&entries);
                        let path = path_from_entries(&entries, None).unwrap();
                        let ctx = oracle(&["context", fs, "--llm"]);
                        let ours = context_report(ctx["requestedLeafId"].as_str(), &path, true);
                        t.check(format!("{name} context"), diff(&ours, &ctx, &[]));
                        let cut = oracle(&["cut", fs, "--full"]);
                        let leaf = cut["leafId"].as_str();
                        let bpath = leaf.map(|l| index.branch(l).unwrap()).unwrap_or_default();
                        let ours =
                            cut_report(leaf, &bpath, CompactionSettings::default(), true, None);
                        t.check(format!("{name} cut"), diff(&ours, &cut, &[]));
                    }
                    t
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all = Tally::default();
    for t in results {
        all.checked += t.checked;
        all.failures.extend(t.failures);
    }
    all.finish("corpus (live oracle)");
}

#[test]
fn diff_sees_differences() {
    let a = serde_json::json!({"a": 1, "b": [1.0]});
    assert!(diff(&a, &serde_json::json!({"a": 1, "b": [1]}), &[]).is_empty());
    assert_eq!(diff(&a, &serde_json::json!({"a": 2}), &[]).len(), 1);
    assert_eq!(
        diff(&a, &serde_json::json!({"c": null, "d": 1}), &[]).len(),
        1
    );
}

#[test]
fn stored_summary_and_prompts_follow_pi() {
    use pisess_engine::agent::compaction::{SUMMARIZATION_PROMPT, history_prompt};
    use pisess_engine::agent::prepare_compaction;
    let text =
        std::fs::read_to_string(root().join("fixtures/sessions/03-compactions.jsonl")).unwrap();
    let (_, entries) = parse_session_text(&text);
    let index = EntryIndex::new(&entries);
    // The first user message of the file, then the path to its last entry before the leaf.
    let ids: Vec<&str> = entries
        .iter()
        .filter_map(|e| e.get("id")?.as_str())
        .collect();
    let settings = CompactionSettings {
        keep_recent_tokens: 200.0,
        ..CompactionSettings::default()
    };
    let prep = ids
        .iter()
        .rev()
        .find_map(|id| prepare_compaction(&index.branch(id).unwrap(), settings).ok())
        .expect("some entry can be compacted");
    let (summary, details) = prep.stored_summary(Some("S"), Some("P"));
    if prep.is_split_turn && !prep.turn_prefix_messages.is_empty() {
        assert!(summary.starts_with("S\n\n---\n\n**Turn Context (split turn):**\n\nP"));
    } else {
        assert!(summary.starts_with('S'));
    }
    assert!(details.get("readFiles").is_some() && details.get("modifiedFiles").is_some());
    let p = history_prompt("conv", None, Some("focus"));
    assert_eq!(
        p,
        format!(
            "<conversation>\nconv\n</conversation>\n\n{SUMMARIZATION_PROMPT}\n\nAdditional focus: focus"
        )
    );
    assert!(prep.history_prompt(None).starts_with("<conversation>\n"));
}
