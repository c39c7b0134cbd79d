//! Compaction and branch-summary preparation over a path read one entry at a time from a
//! [`PathSource`]: the answers of [`super::compaction::prepare_compaction`] and
//! [`super::branch`] with memory bounded by the path's length, not by its messages.
//!
//! [`LeanCompaction::prepare`] reads the context once (through [`LeanContext`]) and keeps a
//! few facts per context entry ([`CutFacts`]); the cut is then planned by the same
//! [`CutPlan`] as the in-memory preparation, and the messages to summarise are decoded again,
//! one entry at a time, when [`LeanCompaction::messages`] is called. [`LeanBranch`] does the
//! same for pi's `collectEntriesForBranchSummary` and `prepareBranchEntries`: ids and kinds
//! come from the source's records, and only the entries that matter are decoded — branch
//! summaries and context edits of the branch left, then its entries newest first until the
//! token budget is spent.
//!
//! Invariants:
//! - the answers equal the in-memory preparation's on the same path (a test checks every entry
//!   of every fixture and of the standard corpus);
//! - memory: one [`CutFacts`] per context entry (or one id per entry of the old path for a
//!   branch), the prepared branch messages (bounded by the budget), and one decoded entry at a
//!   time otherwise;
//! - nothing recurses: every walk is a loop over path indices.

use super::branch::message_from_entry;
use super::compaction::{CutFacts, CutPlan, NoCompaction, inherited_details};
use super::fileops::FileOps;
use super::js::truthy;
use super::lean::{Kind, LeanContext, PathSource};
use super::path::{id_of, type_of};
use super::tokens::{CompactionSettings, estimate_tokens};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::ops::Range;

/// Which list of a compaction's preparation a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `messagesToSummarize`.
    History,
    /// `turnPrefixMessages`.
    TurnPrefix,
}

/// The kind of entry `i`, decoding it only when its record cannot say.
fn kind_of<S: PathSource>(src: &S, i: usize) -> Result<Kind, S::Error> {
    let kind = src.meta(i, |k, _| k)?;
    Ok(if kind == Kind::Unknown {
        Kind::of_value(&src.value(i)?)
    } else {
        kind
    })
}

/// pi's `prepareCompaction` at the end of a path, planned; the messages are read when asked.
#[derive(Debug, Clone)]
pub struct LeanCompaction {
    context: LeanContext,
    facts: Vec<CutFacts>,
    plan: CutPlan,
    inherited: Option<Value>,
    /// Id of the first kept entry.
    pub first_kept_entry_id: String,
    /// The first path index holding that id (pi's `indexOf` over the path).
    pub first_kept_path_index: Option<usize>,
    /// Whether the cut splits a turn.
    pub is_split_turn: bool,
    /// Estimated context tokens before compaction.
    pub tokens_before: f64,
    /// The previous compaction's summary, if the context starts with one.
    pub previous_summary: Option<Value>,
    /// The settings used.
    pub settings: CompactionSettings,
}

impl LeanCompaction {
    /// Prepares a compaction at the end of `src` (the inner `Err` says why there is nothing
    /// to prepare, as [`super::compaction::prepare_compaction`] does).
    pub fn prepare<S: PathSource>(
        src: &S,
        settings: CompactionSettings,
    ) -> Result<Result<Self, NoCompaction>, S::Error> {
        let n = src.len();
        if n > 0 && kind_of(src, n - 1)? == Kind::Compaction {
            return Ok(Err(NoCompaction::AlreadyCompacted));
        }
        let context = LeanContext::plan(src)?;
        let mut facts = Vec::with_capacity(context.selected_len());
        let mut previous: Option<(Option<Value>, Option<Value>)> = None;
        let estimate = context.projected_entries_with_estimate::<S, S::Error>(
            src,
            |_, _, entry, messages| {
                let f = CutFacts::of(entry, messages);
                if previous.is_none() && f.compaction && f.has_messages {
                    previous = Some((
                        entry.get("summary").cloned(),
                        inherited_details(entry).cloned(),
                    ));
                }
                facts.push(f);
                Ok(())
            },
        )?;
        let plan = match CutPlan::new(&facts, settings.keep_recent_tokens) {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let first = plan.cut.first_kept_entry_index;
        let Some(at) = context.selected().nth(first) else {
            return Ok(Err(NoCompaction::NothingToCompact));
        };
        let id = src.meta(at, |_, id| id.map(str::to_owned))?;
        let Some(first_kept_entry_id) = id.filter(|id| !id.is_empty()) else {
            return Ok(Err(NoCompaction::NothingToCompact));
        };
        let mut first_kept_path_index = None;
        for i in 0..n {
            if src.meta(i, |_, id| id == Some(first_kept_entry_id.as_str()))? {
                first_kept_path_index = Some(i);
                break;
            }
        }
        let (previous_summary, inherited) = previous.unwrap_or_default();
        Ok(Ok(Self {
            is_split_turn: plan.cut.is_split_turn,
            context,
            facts,
            plan,
            inherited,
            first_kept_entry_id,
            first_kept_path_index,
            tokens_before: estimate.tokens,
            previous_summary,
            settings,
        }))
    }

    /// Whether the turn prefix holds messages.
    pub fn has_turn_prefix(&self) -> bool {
        self.facts[self.plan.turn_prefix.clone()]
            .iter()
            .any(|f| f.summarisable > 0)
    }

    /// Decodes the summarised entries one at a time and calls `f` with each message of
    /// `messagesToSummarize`, then of `turnPrefixMessages`; returns the file operations pi
    /// records (the previous compaction's, then those of these messages).
    pub fn messages<S, E>(
        &self,
        src: &S,
        mut f: impl FnMut(Part, &Value) -> Result<(), E>,
    ) -> Result<FileOps, E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        let mut file_ops = FileOps::default();
        if let Some(d) = &self.inherited {
            file_ops.add_details(d);
        }
        for (part, range) in [
            (Part::History, self.plan.history.clone()),
            (Part::TurnPrefix, self.plan.turn_prefix.clone()),
        ] {
            self.context
                .projected_entries::<S, E>(src, range, |_, _, entry, messages| {
                    if type_of(entry) == Some("compaction") {
                        return Ok(());
                    }
                    for m in messages {
                        if m.get("role").and_then(Value::as_str) == Some("system") {
                            continue;
                        }
                        file_ops.add_message(m);
                        f(part, m)?;
                    }
                    Ok(())
                })?;
        }
        Ok(file_ops)
    }

    /// Calls `f` with the string id of each entry whose messages are summarised (`part`
    /// `History`) or form the turn prefix (`TurnPrefix`), oldest first.
    pub fn entry_ids<S, E>(
        &self,
        src: &S,
        part: Part,
        mut f: impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        let range = match part {
            Part::History => self.plan.history.clone(),
            Part::TurnPrefix => self.plan.turn_prefix.clone(),
        };
        let skip = range.start;
        let take = range.len();
        for (pos, i) in self.context.selected().enumerate().skip(skip).take(take) {
            let fact = &self.facts[pos];
            if fact.compaction || !fact.has_messages {
                continue;
            }
            src.meta(i, |_, id| id.map_or(Ok(()), &mut f))??;
        }
        Ok(())
    }
}

/// pi's `collectEntriesForBranchSummary` and `prepareBranchEntries` between two paths.
#[derive(Debug, Clone)]
pub struct LeanBranch {
    /// Id of the deepest common entry, if any.
    pub common_ancestor_id: Option<String>,
    /// The old path's indices of the entries of the branch left, oldest first.
    pub entries: Range<usize>,
    /// The messages to summarise, oldest first.
    pub messages: Vec<Value>,
    /// File operations (including those seeded from earlier branch summaries).
    pub file_ops: FileOps,
    /// Sum of the messages' estimates.
    pub total_tokens: f64,
}

impl LeanBranch {
    /// Collects and prepares the branch left when going from the end of `old` (`None`: no old
    /// leaf) to the end of `target`, within `budget` tokens (0: unlimited).
    pub fn prepare<S, T, E>(old: Option<&S>, target: &T, budget: f64) -> Result<Self, E>
    where
        S: PathSource,
        T: PathSource,
        E: From<S::Error> + From<T::Error>,
    {
        let empty = Self {
            common_ancestor_id: None,
            entries: 0..0,
            messages: Vec::new(),
            file_ops: FileOps::default(),
            total_tokens: 0.0,
        };
        let Some(old) = old.filter(|o| !o.is_empty()) else {
            return Ok(empty);
        };
        let mut old_ids: HashSet<String> = HashSet::new();
        for i in 0..old.len() {
            old.meta(i, |_, id| {
                if let Some(id) = id {
                    old_ids.insert(id.to_owned());
                }
            })?;
        }
        let mut ancestor = None;
        for i in (0..target.len()).rev() {
            let found = target.meta(i, |_, id| {
                id.filter(|id| old_ids.contains(*id)).map(str::to_owned)
            })?;
            if found.is_some() {
                ancestor = found;
                break;
            }
        }
        drop(old_ids);
        let mut start = 0;
        if let Some(a) = &ancestor {
            for i in (0..old.len()).rev() {
                if old.meta(i, |_, id| id == Some(a.as_str()))? {
                    start = i + 1;
                    break;
                }
            }
        }
        let entries = start..old.len();
        let (messages, file_ops, total_tokens) =
            prepare_entries::<S, E>(old, entries.clone(), budget)?;
        Ok(Self {
            common_ancestor_id: ancestor,
            entries,
            messages,
            file_ops,
            total_tokens,
        })
    }

    /// Calls `f` with each entry's `id` value (`null` when it has none), oldest first.
    pub fn entry_ids<S, E>(
        &self,
        old: &S,
        mut f: impl FnMut(&Value) -> Result<(), E>,
    ) -> Result<(), E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        for i in self.entries.clone() {
            let id = old.meta(i, |_, id| id.map(|s| Value::String(s.to_owned())))?;
            let id = match id {
                Some(id) => id,
                // Not a string: the value as written.
                None => old.value(i)?.get("id").cloned().unwrap_or(Value::Null),
            };
            f(&id)?;
        }
        Ok(())
    }
}

/// `prepareBranchEntries` over the old path's `range`.
fn prepare_entries<S, E>(
    old: &S,
    range: Range<usize>,
    budget: f64,
) -> Result<(Vec<Value>, FileOps, f64), E>
where
    S: PathSource,
    E: From<S::Error>,
{
    let mut file_ops = FileOps::default();
    let mut edits: HashMap<String, usize> = HashMap::new();
    for i in range.clone() {
        let kind = old.meta(i, |k, _| k)?;
        if !matches!(
            kind,
            Kind::BranchSummary | Kind::ContextEdit | Kind::Unknown
        ) {
            continue;
        }
        let e = old.value(i)?;
        match type_of(&e) {
            Some("branch_summary") => {
                if !truthy(e.get("fromHook"))
                    && let Some(d) = e.get("details").filter(|d| truthy(Some(d)))
                {
                    file_ops.add_details(d);
                }
            }
            Some("context_edit") => {
                if let Some(t) = e.get("targetId").and_then(Value::as_str) {
                    edits.insert(t.to_owned(), i);
                }
            }
            _ => {}
        }
    }
    let mut rev: Vec<Value> = Vec::new();
    let mut total = 0.0;
    for i in range.rev() {
        let kind = old.meta(i, |k, _| k)?;
        if matches!(
            kind,
            Kind::ContextEdit | Kind::ThinkingLevelChange | Kind::ModelChange
        ) {
            continue;
        }
        let e = old.value(i)?;
        let edit = match id_of(&e).and_then(|id| edits.get(id)) {
            Some(&j) => Some(old.value(j)?),
            None => None,
        };
        let Some(m) = message_from_entry(&e, edit.as_ref()) else {
            continue;
        };
        file_ops.add_message(&m);
        let t = estimate_tokens(&m) as f64;
        if budget > 0.0 && total + t > budget {
            if matches!(type_of(&e), Some("compaction" | "branch_summary")) && total < budget * 0.9
            {
                rev.push(m.into_owned());
                total += t;
            }
            break;
        }
        rev.push(m.into_owned());
        total += t;
    }
    rev.reverse();
    Ok((rev, file_ops, total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::branch::{collect_entries_for_branch_summary, prepare_branch_entries};
    use crate::agent::compaction::prepare_compaction;
    use crate::agent::lean::ValuePath;
    use serde_json::json;
    use std::convert::Infallible;

    fn check_compaction(path: &[&Value], keep: f64) {
        let settings = CompactionSettings {
            keep_recent_tokens: keep,
            ..CompactionSettings::default()
        };
        let src = ValuePath(path);
        let lean = LeanCompaction::prepare(&src, settings).unwrap();
        let mem = prepare_compaction(path, settings);
        match (lean, mem) {
            (Err(a), Err(b)) => assert_eq!(a, b),
            (Ok(l), Ok(m)) => {
                assert_eq!(l.first_kept_entry_id, m.first_kept_entry_id);
                assert_eq!(l.is_split_turn, m.is_split_turn);
                assert_eq!(l.tokens_before, m.tokens_before);
                assert_eq!(l.previous_summary, m.previous_summary);
                let (mut h, mut p) = (Vec::new(), Vec::new());
                let ops = l
                    .messages(&src, |part, msg| {
                        match part {
                            Part::History => h.push(msg.clone()),
                            Part::TurnPrefix => p.push(msg.clone()),
                        }
                        Ok::<(), Infallible>(())
                    })
                    .unwrap();
                let owned = |v: &[crate::agent::Msg<'_>]| {
                    v.iter().map(|m| m.clone().into_owned()).collect::<Vec<_>>()
                };
                assert_eq!(h, owned(&m.messages_to_summarize));
                assert_eq!(p, owned(&m.turn_prefix_messages));
                assert_eq!(ops.to_json(), m.file_ops.to_json());
                assert_eq!(l.has_turn_prefix(), !m.turn_prefix_messages.is_empty());
            }
            (l, m) => panic!("lean {:?} vs in memory {:?}", l.err(), m.err()),
        }
    }

    #[test]
    fn compactions_equal_the_in_memory_preparation() {
        let mut entries = vec![
            json!({"type":"thinking_level_change","id":"t","parentId":null,"thinkingLevel":"high"}),
        ];
        let mut parent = "t".to_owned();
        for k in 0..12 {
            let id = format!("u{k}");
            entries.push(json!({"type":"message","id":id,"parentId":parent,"message":{"role":"user","content":"x".repeat(40 * (k + 1)),"timestamp":k}}));
            parent = id;
            let id = format!("a{k}");
            entries.push(json!({"type":"message","id":id,"parentId":parent,"message":{"role":"assistant","content":[{"type":"toolCall","id":format!("c{k}"),"name":"read","arguments":{"path":format!("f{k}.rs")}}],"provider":"p","model":"m","usage":{"totalTokens":10 * k},"stopReason":"toolUse","timestamp":k}}));
            parent = id;
            if k == 5 {
                entries.push(json!({"type":"compaction","id":"c","parentId":parent,"summary":"sum","firstKeptEntryId":"u3","tokensBefore":9,"details":{"readFiles":["old.rs"],"modifiedFiles":[]}}));
                parent = "c".into();
            }
            if k == 8 {
                entries.push(json!({"type":"context_edit","id":"e","parentId":parent,"targetId":"u7","replacement":{"content":"short"}}));
                parent = "e".into();
            }
        }
        let all: Vec<&Value> = entries.iter().collect();
        for end in 1..=all.len() {
            for keep in [0.0, 20.0, 100.0, 400.0, 1e9] {
                check_compaction(&all[..end], keep);
            }
        }
    }

    #[test]
    fn branches_equal_the_in_memory_preparation() {
        let e = |id: &str, parent: Option<&str>, text: &str| json!({"type":"message","id":id,"parentId":parent,"message":{"role":"user","content":text,"timestamp":1}});
        let trunk = [
            e("r", None, "root"),
            e("a", Some("r"), "aaaa"),
            e("b", Some("a"), "bbbbbbbb"),
        ];
        let left = [
            e("l1", Some("b"), &"l".repeat(100)),
            json!({"type":"branch_summary","id":"l2","parentId":"l1","fromId":"x","summary":"went","details":{"readFiles":["s.rs"],"modifiedFiles":["m.rs"]}}),
            json!({"type":"context_edit","id":"l3","parentId":"l2","targetId":"l1","replacement":{"content":"edited"}}),
            e("l4", Some("l3"), &"z".repeat(300)),
        ];
        let right = [e("q1", Some("b"), "right")];
        let old: Vec<&Value> = trunk.iter().chain(&left).collect();
        let new: Vec<&Value> = trunk.iter().chain(&right).collect();
        for budget in [0.0, 10.0, 50.0, 80.0, 1000.0] {
            for (o, t) in [(&old, &new), (&new, &old), (&old, &old)] {
                let lean: LeanBranch = LeanBranch::prepare::<_, _, Infallible>(
                    Some(&ValuePath(o)),
                    &ValuePath(t),
                    budget,
                )
                .unwrap();
                let c = collect_entries_for_branch_summary(o, t);
                let m = prepare_branch_entries(&c.entries, budget);
                assert_eq!(lean.common_ancestor_id, c.common_ancestor_id);
                let mut ids = Vec::new();
                lean.entry_ids(&ValuePath(o), |id| {
                    ids.push(id.clone());
                    Ok::<(), Infallible>(())
                })
                .unwrap();
                let want: Vec<Value> = c.entries.iter().map(|e| e["id"].clone()).collect();
                assert_eq!(ids, want);
                let msgs: Vec<Value> = m.messages.iter().map(|x| x.clone().into_owned()).collect();
                assert_eq!(lean.messages, msgs, "budget {budget}");
                assert_eq!(lean.file_ops.to_json(), m.file_ops.to_json());
                assert_eq!(lean.total_tokens, m.total_tokens);
            }
        }
    }
}
