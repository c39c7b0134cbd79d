//! Context projection over a path whose entries stay where they are stored: memory bounded by
//! the path's length, not by the bytes of its messages.
//!
//! [`LeanContext::plan`] chooses the context entries from a [`PathSource`]: it walks from the
//! leaf towards the root reading each entry's [`Kind`] (a store records the entry type and
//! message role beside the line, so no line is decoded for it) and decodes only the entries
//! whose values matter — the latest compaction, the thinking level and model in force, context
//! edits — stopping as soon as nothing further up can change the answer.
//! [`LeanContext::messages`] then decodes the selected entries one at a time, hands each
//! projected message to the caller and returns the projected token estimate accumulated on the
//! way; [`LeanContext::llm_messages`] does the same for `convertToLlm`.
//! [`LeanContext::cursor`] hands the selected entries out on demand instead, so that two
//! contexts can be walked side by side (`diff --context`) holding one entry of each.
//!
//! Invariants:
//! - the answers equal [`super::project::project`]'s messages, thinking level, model and
//!   context entry ids and [`super::tokens::estimate_projected_context_tokens`] on the same
//!   path (a test checks every entry of every fixture);
//! - memory: the plan keeps one index per kept entry before the latest compaction, one target id
//!   per context edit, and the thinking level and model values; streaming holds one entry (and
//!   the edit of its target) at a time, plus the lengths of the replayed system message's
//!   sections and tools;
//! - nothing recurses: every walk is a loop over path indices;
//! - a [`Kind::Unknown`] from the source is resolved by decoding the entry, so a source answers
//!   `Unknown` whenever its record does not say for sure;
//! - the path is trusted as in [`super::project`]: root first, ids unique along it. Ids compare
//!   as strings (a non-string `id` or `firstKeptEntryId` never matches; pi compares values).

use super::js::{len16, truthy};
use super::path::{id_of, type_of};
use super::project::{Msg, content_text, convert_to_llm, project_entry};
use super::tokens::{
    ContextEstimate, assistant_usage, context_tokens_of_usage, estimate_tokens, json_len16,
};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::ops::Range;

/// What the context projection needs to know about an entry without its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `compaction`
    Compaction,
    /// `context_edit`
    ContextEdit,
    /// `thinking_level_change`
    ThinkingLevelChange,
    /// `model_change`
    ModelChange,
    /// A `message` entry whose message has role `assistant`.
    Assistant,
    /// A `message` entry whose message has role `system`.
    System,
    /// `branch_summary`
    BranchSummary,
    /// Anything else.
    Other,
    /// Not known without decoding the entry.
    Unknown,
}

impl Kind {
    /// The kind of a decoded entry.
    pub fn of_value(e: &Value) -> Self {
        match type_of(e) {
            Some("compaction") => Self::Compaction,
            Some("context_edit") => Self::ContextEdit,
            Some("thinking_level_change") => Self::ThinkingLevelChange,
            Some("model_change") => Self::ModelChange,
            Some("branch_summary") => Self::BranchSummary,
            Some("message") => {
                match e
                    .get("message")
                    .and_then(|m| m.get("role"))
                    .and_then(Value::as_str)
                {
                    Some("assistant") => Self::Assistant,
                    Some("system") => Self::System,
                    _ => Self::Other,
                }
            }
            _ => Self::Other,
        }
    }

    /// The kind from a stored record's entry type and message role (as the typed view read
    /// them; `None` when it did not): `Unknown` when the record cannot say for sure — no type,
    /// or a `message` without a role (the typed view of the message failed or had none).
    pub fn of_record(type_name: Option<&str>, role: Option<&str>) -> Self {
        match (type_name, role) {
            (None, _) | (Some("message"), None) => Self::Unknown,
            (Some("message"), Some("assistant")) => Self::Assistant,
            (Some("message"), Some("system")) => Self::System,
            (Some("compaction"), _) => Self::Compaction,
            (Some("context_edit"), _) => Self::ContextEdit,
            (Some("thinking_level_change"), _) => Self::ThinkingLevelChange,
            (Some("model_change"), _) => Self::ModelChange,
            (Some("branch_summary"), _) => Self::BranchSummary,
            _ => Self::Other,
        }
    }
}

/// A path, root first, read one entry at a time.
pub trait PathSource {
    /// What reading an entry can fail with.
    type Error;
    /// The number of entries on the path.
    fn len(&self) -> usize;
    /// Whether the path is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Calls `f` with the kind and the string `id` of the entry at `i` (cheap: no decoding).
    fn meta<R>(&self, i: usize, f: impl FnOnce(Kind, Option<&str>) -> R) -> Result<R, Self::Error>;
    /// The entry at `i`, decoded (key order kept).
    fn value(&self, i: usize) -> Result<Value, Self::Error>;
    /// The greatest path index below `before` holding a `thinking_level_change`
    /// (`Some(Some(i))`), or that there is none (`Some(None)`), when the source knows without
    /// reading the entries (a store keeps an index of them); `None` (the default) makes the
    /// plan walk up and look.
    fn last_thinking_change_before(
        &self,
        before: usize,
    ) -> Result<Option<Option<usize>>, Self::Error> {
        let _ = before;
        Ok(None)
    }
}

/// A path of values already in memory (tests, small files).
#[derive(Debug, Clone, Copy)]
pub struct ValuePath<'a>(pub &'a [&'a Value]);

impl PathSource for ValuePath<'_> {
    type Error = std::convert::Infallible;
    fn len(&self) -> usize {
        self.0.len()
    }
    fn meta<R>(&self, i: usize, f: impl FnOnce(Kind, Option<&str>) -> R) -> Result<R, Self::Error> {
        let e = self.0[i];
        Ok(f(Kind::of_value(e), id_of(e)))
    }
    fn value(&self, i: usize) -> Result<Value, Self::Error> {
        Ok(self.0[i].clone())
    }
}

/// The context at the end of a path, planned: which entries it is made of, the edits that
/// apply, and the settings in force. The messages are read when asked for.
#[derive(Debug, Clone)]
pub struct LeanContext {
    /// The latest compaction and the kept entries before it, in context order.
    head: Vec<usize>,
    /// The entries after the latest compaction (the whole path without one).
    tail: Range<usize>,
    /// Target id → path index of the context edit that applies to it.
    edits: HashMap<String, usize>,
    thinking_level: Option<Value>,
    model: Value,
    /// The latest `context_edit` or `compaction` on the whole path.
    invalidating: Option<usize>,
    /// Whether pi's `getBranch()` of the leaf is empty ([`Self::with_empty_branch`]).
    empty_branch: bool,
}

/// What a walk up the path is still looking for.
#[derive(Default)]
struct Walk {
    compaction: Option<usize>,
    /// The compaction's `firstKeptEntryId`, while the kept entries are being collected.
    first_kept: Option<Option<String>>,
    /// Non-system entries below the compaction, leaf side first (kept if the first kept
    /// entry is found).
    kept: Vec<usize>,
    kept_edits: Vec<usize>,
    kept_found: bool,
    tail_edits: Vec<usize>,
    invalidating: Option<usize>,
    thinking: Option<Option<Value>>,
    model: Option<Value>,
}

impl Walk {
    fn done(&self) -> bool {
        self.compaction.is_some()
            && self.first_kept.is_none()
            && self.thinking.is_some()
            && self.model.is_some()
    }
}

fn model_pair(provider: Option<&Value>, model: Option<&Value>) -> Value {
    let mut o = Map::new();
    if let Some(p) = provider {
        o.insert("provider".into(), p.clone());
    }
    if let Some(m) = model {
        o.insert("modelId".into(), m.clone());
    }
    Value::Object(o)
}

impl LeanContext {
    /// Plans the context at the end of `src` (pi's `buildContextEntries`, the context edits
    /// among them, and `getSessionContextSettings`), walking up from the leaf.
    pub fn plan<S: PathSource>(src: &S) -> Result<Self, S::Error> {
        let n = src.len();
        let mut w = Walk::default();
        let mut i = n;
        while i > 0 && !w.done() {
            // Only the thinking level is left to find (it is often set once, at the root):
            // ask the source's index instead of reading every entry up to it.
            if w.compaction.is_some()
                && w.first_kept.is_none()
                && w.model.is_some()
                && w.thinking.is_none()
                && let Some(found) = src.last_thinking_change_before(i)?
            {
                if let Some(j) = found {
                    w.thinking = Some(src.value(j)?.get("thinkingLevel").cloned());
                }
                break;
            }
            i -= 1;
            let fk = w.first_kept.as_ref().map(Option::as_deref);
            let (mut kind, is_first_kept) = src.meta(i, |k, id| {
                (k, fk.is_some_and(|fk| fk.is_some() && fk == id))
            })?;
            let mut value = None;
            if kind == Kind::Unknown {
                let v = src.value(i)?;
                kind = Kind::of_value(&v);
                value = Some(v);
            }
            let needs_value = match kind {
                Kind::Compaction => w.compaction.is_none(),
                Kind::ThinkingLevelChange => w.thinking.is_none(),
                Kind::ModelChange | Kind::Assistant => w.model.is_none(),
                _ => false,
            };
            if needs_value && value.is_none() {
                value = Some(src.value(i)?);
            }
            let v = value.as_ref();
            if w.first_kept.is_some() {
                if kind != Kind::System {
                    w.kept.push(i);
                    if kind == Kind::ContextEdit {
                        w.kept_edits.push(i);
                    }
                }
                if is_first_kept {
                    w.first_kept = None;
                    w.kept_found = true;
                }
            } else if w.compaction.is_none() {
                match kind {
                    Kind::ContextEdit => w.tail_edits.push(i),
                    Kind::Compaction => {
                        w.compaction = Some(i);
                        let fk = v.and_then(|v| v.get("firstKeptEntryId"));
                        w.first_kept = Some(fk.and_then(Value::as_str).map(str::to_owned));
                    }
                    _ => {}
                }
            }
            if w.invalidating.is_none() && matches!(kind, Kind::Compaction | Kind::ContextEdit) {
                w.invalidating = Some(i);
            }
            match (kind, v) {
                (Kind::ThinkingLevelChange, Some(v)) if w.thinking.is_none() => {
                    w.thinking = Some(v.get("thinkingLevel").cloned());
                }
                (Kind::ModelChange, Some(v)) if w.model.is_none() => {
                    w.model = Some(model_pair(v.get("provider"), v.get("modelId")));
                }
                (Kind::Assistant, Some(v)) if w.model.is_none() => {
                    let m = v.get("message");
                    w.model = Some(model_pair(
                        m.and_then(|m| m.get("provider")),
                        m.and_then(|m| m.get("model")),
                    ));
                }
                _ => {}
            }
        }
        let (head, tail) = match w.compaction {
            Some(c) => {
                let mut head = vec![c];
                if w.kept_found {
                    head.extend(w.kept.iter().rev());
                }
                (head, c + 1..n)
            }
            None => (Vec::new(), 0..n),
        };
        // The latest edit of a target wins: walk the edits from the leaf side, first one kept.
        let mut edits = HashMap::new();
        let kept_edits = if w.kept_found { &w.kept_edits[..] } else { &[] };
        for &e in w.tail_edits.iter().chain(kept_edits) {
            let v = src.value(e)?;
            if let Some(t) = v.get("targetId").and_then(Value::as_str)
                && !edits.contains_key(t)
            {
                edits.insert(t.to_owned(), e);
            }
        }
        Ok(Self {
            head,
            tail,
            edits,
            thinking_level: w
                .thinking
                .unwrap_or_else(|| Some(Value::String("off".into()))),
            model: w.model.unwrap_or(Value::Null),
            invalidating: w.invalidating,
            empty_branch: false,
        })
    }

    /// The plan for a context pi builds from its fallback leaf (the last entry, when the
    /// loaded leaf id is falsy): pi estimates with `getBranch()` of that leaf id, which is
    /// empty, so no assistant usage is found on it and the estimate is the characters'
    /// (`estimateProjectedContextTokens` with `usageEntryIndex` -1).
    #[must_use]
    pub fn with_empty_branch(mut self) -> Self {
        self.empty_branch = true;
        self
    }

    /// The thinking level in force (`None` when a `thinking_level_change` left it undefined).
    pub fn thinking_level(&self) -> Option<&Value> {
        self.thinking_level.as_ref()
    }

    /// `null` or `{provider, modelId}`.
    pub fn model(&self) -> &Value {
        &self.model
    }

    /// The path indices of the selected entries, in context order.
    pub fn selected(&self) -> impl Iterator<Item = usize> + '_ {
        self.head.iter().copied().chain(self.tail.clone())
    }

    /// The number of selected entries.
    pub fn selected_len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Calls `f` with the string id of each selected entry, in context order
    /// (`buildContextEntries(...).map(e => e.id)`).
    pub fn entry_ids<S, E>(
        &self,
        src: &S,
        mut f: impl FnMut(Option<&str>) -> Result<(), E>,
    ) -> Result<(), E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        for i in self.selected() {
            src.meta(i, |_, id| f(id))??;
        }
        Ok(())
    }

    /// Decodes the selected entries at context positions `positions` one at a time and calls
    /// `f(position, path index, entry, projected messages)` for each, as
    /// [`super::project::project`] lists them: the entry's context edit applied, no messages
    /// for a compaction after the first position.
    pub fn projected_entries<S, E>(
        &self,
        src: &S,
        positions: Range<usize>,
        mut f: impl FnMut(usize, usize, &Value, &[Msg<'_>]) -> Result<(), E>,
    ) -> Result<(), E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        for pos in positions {
            let Some(i) = self.selected_at(pos) else {
                break;
            };
            let entry = src.value(i)?;
            if pos > 0 && type_of(&entry) == Some("compaction") {
                f(pos, i, &entry, &[])?;
                continue;
            }
            let edit = match id_of(&entry).and_then(|id| self.edits.get(id)) {
                Some(&e) => Some(src.value(e)?),
                None => None,
            };
            let messages = project_entry(&entry, edit.as_ref());
            f(pos, i, &entry, &messages)?;
        }
        Ok(())
    }

    /// The path index of the selected entry at context position `pos`.
    fn selected_at(&self, pos: usize) -> Option<usize> {
        match pos.checked_sub(self.head.len()) {
            None => self.head.get(pos).copied(),
            Some(t) => Some(self.tail.start + t).filter(|&i| i < self.tail.end),
        }
    }

    /// A reader of the selected entries that the caller pulls one at a time (to walk two
    /// contexts side by side), accumulating the projected token estimate on the way.
    pub fn cursor<'p, S: PathSource>(&'p self, src: &'p S) -> ContextCursor<'p, S> {
        ContextCursor {
            plan: self,
            src,
            pos: 0,
            acc: EstimateAcc::default(),
        }
    }

    /// [`Self::projected_entries`] over every selected entry, returning the projected token
    /// estimate (`estimateProjectedContextTokens`) accumulated on the way.
    pub fn projected_entries_with_estimate<S, E>(
        &self,
        src: &S,
        mut f: impl FnMut(usize, usize, &Value, &[Msg<'_>]) -> Result<(), E>,
    ) -> Result<ContextEstimate, E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        let mut acc = EstimateAcc::default();
        self.projected_entries::<S, E>(src, 0..self.selected_len(), |pos, i, entry, messages| {
            let id_truthy = truthy(entry.get("id"));
            for m in messages {
                acc.add(m, i, id_truthy);
            }
            f(pos, i, entry, messages)
        })?;
        Ok(acc.finish(self.invalidating, self.empty_branch))
    }

    /// Calls `f` with each message of the context in order (pi's `buildSessionContext`
    /// messages) and returns the projected token estimate
    /// (`estimateProjectedContextTokens`).
    pub fn messages<S, E>(
        &self,
        src: &S,
        mut f: impl FnMut(&Value) -> Result<(), E>,
    ) -> Result<ContextEstimate, E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        self.projected_entries_with_estimate::<S, E>(src, |_, _, _, messages| {
            for m in messages {
                f(m)?;
            }
            Ok(())
        })
    }

    /// Calls `f` with each message as the model receives it (`convertToLlm(messages)`).
    pub fn llm_messages<S, E>(
        &self,
        src: &S,
        mut f: impl FnMut(&Value) -> Result<(), E>,
    ) -> Result<(), E>
    where
        S: PathSource,
        E: From<S::Error>,
    {
        self.projected_entries::<S, E>(src, 0..self.selected_len(), |_, _, _, messages| {
            for m in convert_to_llm(messages.iter().map(AsRef::as_ref)) {
                f(&m)?;
            }
            Ok(())
        })
    }
}

/// The selected entries of a [`LeanContext`] read on demand, in context order: holds one
/// entry's messages at a time (the caller's), never the path's.
pub struct ContextCursor<'p, S> {
    plan: &'p LeanContext,
    src: &'p S,
    /// The context position of the next entry.
    pos: usize,
    acc: EstimateAcc,
}

impl<S: PathSource> ContextCursor<'_, S> {
    /// The context position of the entry the next [`Self::next_entry`] reads.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reads the next selected entry: its `id` (`null` when it has none) and the messages it
    /// projects to, as [`LeanContext::projected_entries`] gives them; `None` after the last.
    pub fn next_entry(&mut self) -> Result<Option<(Value, Vec<Value>)>, S::Error> {
        let pos = self.pos;
        if pos >= self.plan.selected_len() {
            return Ok(None);
        }
        self.pos += 1;
        let mut out = None;
        let acc = &mut self.acc;
        self.plan.projected_entries::<S, S::Error>(
            self.src,
            pos..pos + 1,
            |_, i, entry, messages| {
                let id_truthy = truthy(entry.get("id"));
                for m in messages {
                    acc.add(m, i, id_truthy);
                }
                out = Some((
                    entry.get("id").cloned().unwrap_or(Value::Null),
                    messages.iter().map(|m| m.as_ref().clone()).collect(),
                ));
                Ok(())
            },
        )?;
        Ok(out)
    }

    /// The projected token estimate (`estimateProjectedContextTokens`) of the context, once
    /// every entry has been read (before that, of the entries read so far).
    pub fn estimate(&self) -> ContextEstimate {
        self.acc
            .finish(self.plan.invalidating, self.plan.empty_branch)
    }
}

/// `estimateProjectedContextTokens`, accumulated one message at a time.
#[derive(Default)]
struct EstimateAcc {
    count: usize,
    all: f64,
    /// (message index, path index of its entry, whether that entry's id is truthy, usage).
    last_usage: Option<(usize, usize, bool, f64)>,
    trailing: f64,
    non_system: f64,
    system: SystemTokens,
}

impl EstimateAcc {
    fn add(&mut self, m: &Value, path_index: usize, id_truthy: bool) {
        let t = estimate_tokens(m) as f64;
        self.all += t;
        match assistant_usage(m) {
            Some(u) => {
                let usage = context_tokens_of_usage(u);
                self.last_usage = Some((self.count, path_index, id_truthy, usage));
                self.trailing = 0.0;
            }
            None => self.trailing += t,
        }
        if m.get("role").and_then(Value::as_str) == Some("system") {
            self.system.add(m);
        } else {
            self.non_system += t;
        }
        self.count += 1;
    }

    fn finish(&self, invalidating: Option<usize>, empty_branch: bool) -> ContextEstimate {
        if let Some((k, at, id_truthy, usage)) = self.last_usage
            && id_truthy
            && !empty_branch
            && invalidating.is_none_or(|i| at > i)
        {
            return ContextEstimate {
                tokens: usage + self.trailing,
                usage_tokens: usage,
                trailing_tokens: self.trailing,
                last_usage_index: Some(k),
            };
        }
        let tokens = self.system.tokens() as f64 + self.non_system;
        ContextEstimate {
            tokens,
            usage_tokens: 0.0,
            trailing_tokens: tokens,
            last_usage_index: None,
        }
    }
}

/// The estimate of `getCurrentSystemMessage(messages)` without building it: the lengths of its
/// parts (content texts, sections by name, tools by name).
#[derive(Default)]
struct SystemTokens {
    /// `None` = undefined, `Some(true)` = null, `Some(false)` = any other value.
    timestamp: Option<bool>,
    parts: usize,
    chars: usize,
    sections: HashMap<String, usize>,
    tools: HashMap<String, usize>,
}

impl SystemTokens {
    fn add(&mut self, m: &Value) {
        if self.timestamp.is_none_or(|null| null) {
            self.timestamp = m.get("timestamp").map(Value::is_null);
        }
        let text = content_text(m.get("content"), "\n");
        if !text.is_empty() {
            self.parts += 1;
            self.chars += len16(&text);
        }
        if let Some(Value::Object(s)) = m.get("sections") {
            for (name, value) in s {
                if value.is_null() {
                    self.sections.remove(name);
                } else {
                    self.sections
                        .insert(name.clone(), value.as_str().map_or(0, len16));
                }
            }
        }
        let key = |t: &Value| {
            t.get("name")
                .map_or("undefined".to_owned(), pisess_formats::js::to_string)
        };
        if let Some(Value::Array(removed)) = m.get("toolsRemoved") {
            for t in removed {
                self.tools.remove(&key(t));
            }
        }
        if let Some(Value::Array(added)) = m.get("toolsAdded") {
            for t in added {
                self.tools.insert(key(t), json_len16(t));
            }
        }
    }

    /// `estimateTokens` of the replayed system message, 0 when there is none.
    fn tokens(&self) -> u64 {
        if self.timestamp.is_none() && self.tools.is_empty() {
            return 0;
        }
        let mut chars = self.chars + 2 * self.parts.saturating_sub(1);
        chars += self.sections.values().sum::<usize>();
        if !self.tools.is_empty() {
            chars += 2 + self.tools.values().sum::<usize>() + (self.tools.len() - 1);
        }
        (chars as u64).div_ceil(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::project::project;
    use crate::agent::tokens::estimate_projected_context_tokens;
    use serde_json::json;

    fn check(path: &[&Value]) {
        let src = ValuePath(path);
        let plan = LeanContext::plan(&src).unwrap();
        let p = project(path);
        let mut got = Vec::new();
        let est = plan
            .messages(&src, |m| {
                got.push(m.clone());
                Ok::<(), std::convert::Infallible>(())
            })
            .unwrap();
        let want: Vec<Value> = p.messages().cloned().collect();
        assert_eq!(got, want);
        assert_eq!(est, estimate_projected_context_tokens(&p, path));
        let mut cursor = plan.cursor(&src);
        let mut pulled = Vec::new();
        while let Some((id, messages)) = cursor.next_entry().unwrap() {
            pulled.extend(messages.into_iter().map(|m| (id.clone(), m)));
        }
        let want_pairs: Vec<(Value, Value)> = p
            .entries
            .iter()
            .flat_map(|pe| {
                let id = pe.entry.get("id").cloned().unwrap_or(Value::Null);
                pe.messages
                    .iter()
                    .map(move |m| (id.clone(), m.as_ref().clone()))
            })
            .collect();
        assert_eq!(pulled, want_pairs);
        assert_eq!(cursor.estimate(), est);
        assert_eq!(plan.thinking_level(), p.thinking_level.as_ref());
        assert_eq!(plan.model(), &p.model);
        let mut ids = Vec::new();
        plan.entry_ids(&src, |id| {
            ids.push(id.map_or(Value::Null, |s| Value::String(s.to_owned())));
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap();
        assert_eq!(ids, p.context_entry_ids());
        let mut llm = Vec::new();
        plan.llm_messages(&src, |m| {
            llm.push(m.clone());
            Ok::<(), std::convert::Infallible>(())
        })
        .unwrap();
        let want: Vec<Value> = p
            .llm_messages()
            .into_iter()
            .map(|m| m.into_owned())
            .collect();
        assert_eq!(llm, want);
    }

    #[test]
    fn a_compaction_with_kept_entries_edits_and_system_messages() {
        let entries = [
            json!({"type":"thinking_level_change","id":"t","parentId":null,"thinkingLevel":"high"}),
            json!({"type":"message","id":"s","parentId":"t","timestamp":"2026-01-01T00:00:00Z","message":{"role":"system","content":"base","sections":{"a":"xx"},"toolsAdded":[{"name":"read"}],"timestamp":5}}),
            json!({"type":"message","id":"u1","parentId":"s","message":{"role":"user","content":"hello there","timestamp":1}}),
            json!({"type":"message","id":"a1","parentId":"u1","message":{"role":"assistant","content":[{"type":"text","text":"hi"}],"provider":"p","model":"m","usage":{"totalTokens":50},"stopReason":"stop","timestamp":2}}),
            json!({"type":"message","id":"s2","parentId":"a1","message":{"role":"system","content":[{"type":"text","text":"more"}],"sections":{"a":null,"b":"yyy"},"toolsRemoved":[{"name":"read"}],"timestamp":6}}),
            json!({"type":"message","id":"u2","parentId":"s2","message":{"role":"user","content":"second","timestamp":3}}),
            json!({"type":"compaction","id":"c","parentId":"u2","timestamp":"2026-01-01T00:00:01Z","summary":"sum","firstKeptEntryId":"a1","tokensBefore":9}),
            json!({"type":"context_edit","id":"e","parentId":"c","targetId":"u2","replacement":{"content":"edited"}}),
            json!({"type":"message","id":"a2","parentId":"e","message":{"role":"assistant","content":[],"provider":"q","model":"n","usage":{"input":3,"output":4},"stopReason":"stop","timestamp":4}}),
            json!({"type":"message","id":"u3","parentId":"a2","message":{"role":"user","content":"tail","timestamp":7}}),
        ];
        let all: Vec<&Value> = entries.iter().collect();
        for end in 1..=all.len() {
            check(&all[..end]);
        }
    }
}
