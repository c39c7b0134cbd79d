//! `pisess stats [SESSION] [--by day|model|session]`: entries, messages, tool calls, tokens
//! and cost, from the store.
//!
//! Invariants:
//! - tokens and cost are pi's `getSessionStats`: the `usage` pi wrote (never estimated) of
//!   assistant messages, tool results that carry one, `usage` entries, and compactions and
//!   branch summaries that carry one; the total is input + output + cache read + cache write
//!   (a `usage.totalTokens` is not read: older files lack it);
//! - an entry shared by a fork and its parent is counted once. A fork (pi's
//!   `createBranchedSession`) copies the entries of the path it forks byte for byte, ids and
//!   timestamps included, so an entry's identity is (id, timestamp, blake3 of its JSON text):
//!   the same id with another timestamp or other content is a different entry. Only sessions
//!   in a fork family (a session whose header names a `parentSession` that is in the store,
//!   and that parent) are checked, so unrelated sessions cost no memory; parents are counted
//!   before their forks, so the parent owns the shared entries and a fork's row shows only
//!   what it added (`sharedEntries` says how many were skipped). Files that hold the same
//!   session id (a copy of a session file, a backup) are a family too: the entries a copy
//!   shares with the first (by file path) are counted once;
//! - with SESSION, that one session is counted in full (nothing is shared with itself);
//! - rows are read through the snapshot (`with_entry` + `json_text`), one at a time;
//! - an entry whose JSON cannot be read is not counted, is named on stderr (file and line) and
//!   makes the exit status 2: the counts are then a lower bound, never silently short.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;

use pisess_engine::{SessionKey, SessionRecord, Snapshot};
use serde_json::{Map, Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{open_session_read, open_store_to_query};
use crate::ui::Ui;

/// Count entries, messages, tool calls by tool, tokens and cost (from `usage`).
///
/// Without SESSION every session in the store is counted, an entry shared by a fork and its
/// parent (`parentSession`) once. --by splits the counts by the day of the entry's timestamp
/// (UTC), by model (where pi's usage breakdown puts the entry's usage: an assistant message
/// under its model, a `usage` entry under its own, a tool result, compaction or branch summary
/// carrying a usage under "Tools/summaries"; any other entry under the model last set before
/// it in the file) or by session (its id; id and file when several files share an id). `sessions` counts the
/// sessions that add an entry to the counts (not a header-only one, nor a copy of a file whose
/// entries were all counted already). On a terminal narrower than the table (or with
/// `COLUMNS` set so), each group is printed as a block instead: its name, then one count a line.
///
/// With --json: JSON Lines, one `{"type":"group", by, key, …counts}` per group (with --by),
/// then `{"type":"total", …counts}`; counts are `sessions, entries, sharedEntries, messages,
/// roles{role: n}, toolCalls{tool: n}, toolErrors, tokens{input, output, cacheRead,
/// cacheWrite, total}, cost`.
#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Only this session: a file, a session id or unique prefix, or @latest.
    pub session: Option<String>,
    /// Split the counts by day, model or session.
    #[arg(long, value_enum, value_name = "BY")]
    pub by: Option<By>,
}

/// What to split the counts by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The UTC day of the entry's timestamp.
    Day,
    /// The model the entry's usage is charged to, else the one last set before it.
    Model,
    /// The session.
    Session,
}

impl By {
    fn name(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Model => "model",
            Self::Session => "session",
        }
    }
}

/// The counts of one group.
#[derive(Debug, Default, Clone)]
struct Counts {
    sessions: HashSet<SessionKey>,
    entries: u64,
    shared: u64,
    messages: u64,
    roles: BTreeMap<String, u64>,
    tool_calls: BTreeMap<String, u64>,
    tool_errors: u64,
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    total_tokens: u64,
    cost: f64,
}

impl Counts {
    fn add_entry(&mut self, session: SessionKey, v: &Value) {
        self.sessions.insert(session);
        self.entries += 1;
        let kind = v.get("type").and_then(Value::as_str);
        if matches!(kind, Some("usage" | "compaction" | "branch_summary")) {
            if let Some(u) = v.get("usage") {
                self.add_usage(u);
            }
            return;
        }
        if kind != Some("message") {
            return;
        }
        self.messages += 1;
        let Some(m) = v.get("message") else { return };
        let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
        *self.roles.entry(role.to_owned()).or_default() += 1;
        if role == "toolResult" && m.get("isError") == Some(&Value::Bool(true)) {
            self.tool_errors += 1;
        }
        if let Some(blocks) = m.get("content").and_then(Value::as_array) {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("toolCall") {
                    let name = b.get("name").and_then(Value::as_str).unwrap_or("?");
                    *self.tool_calls.entry(name.to_owned()).or_default() += 1;
                }
            }
        }
        if matches!(role, "assistant" | "toolResult")
            && let Some(u) = m.get("usage")
        {
            self.add_usage(u);
        }
    }

    /// One `usage` object, as pi's `addUsageToTotals` adds it.
    fn add_usage(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (input, output, read, write) =
            (n("input"), n("output"), n("cacheRead"), n("cacheWrite"));
        self.input += input;
        self.output += output;
        self.cache_read += read;
        self.cache_write += write;
        self.total_tokens += input + output + read + write;
        self.cost += u
            .get("cost")
            .and_then(|c| c.get("total"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
    }

    fn merge(&mut self, o: &Self) {
        self.sessions.extend(o.sessions.iter().copied());
        self.entries += o.entries;
        self.shared += o.shared;
        self.messages += o.messages;
        for (k, n) in &o.roles {
            *self.roles.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &o.tool_calls {
            *self.tool_calls.entry(k.clone()).or_default() += n;
        }
        self.tool_errors += o.tool_errors;
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
        self.total_tokens += o.total_tokens;
        self.cost += o.cost;
    }

    fn tool_call_count(&self) -> u64 {
        self.tool_calls.values().sum()
    }

    fn to_json(&self, head: Map<String, Value>) -> Value {
        let mut o = head;
        o.insert("sessions".into(), self.sessions.len().into());
        o.insert("entries".into(), self.entries.into());
        o.insert("sharedEntries".into(), self.shared.into());
        o.insert("messages".into(), self.messages.into());
        o.insert("roles".into(), json!(self.roles));
        o.insert("toolCalls".into(), json!(self.tool_calls));
        o.insert("toolErrors".into(), self.tool_errors.into());
        o.insert(
            "tokens".into(),
            json!({
                "input": self.input,
                "output": self.output,
                "cacheRead": self.cache_read,
                "cacheWrite": self.cache_write,
                "total": self.total_tokens,
            }),
        );
        o.insert("cost".into(), json!(round_cost(self.cost)));
        Value::Object(o)
    }
}

/// Cost rounded to 1e-9 dollars, so sums print without float noise.
fn round_cost(c: f64) -> f64 {
    (c * 1e9).round() / 1e9
}

/// Runs `pisess stats`.
pub fn cmd_stats(ui: &mut Ui, args: &StatsArgs) -> CommandResult {
    let mut groups: BTreeMap<String, Counts> = BTreeMap::new();
    let mut total = Counts::default();
    // Entries whose JSON cannot be read (nested deeper than the parser allows), per file.
    let mut unreadable: Vec<(String, Vec<u64>)> = Vec::new();
    // --by session: each group's label → (session id, file), for the JSON records.
    let mut owners: HashMap<String, (String, String)> = HashMap::new();
    if let Some(arg) = &args.session {
        let s = open_session_read(arg)?;
        owners.insert(
            s.record.session_id.clone(),
            (s.record.session_id.clone(), s.record.path.clone()),
        );
        let mut lines = Vec::new();
        count_session(
            &s.snap,
            s.key,
            &s.record.session_id,
            args.by,
            None,
            &mut groups,
            &mut total,
            &mut lines,
        )?;
        if !lines.is_empty() {
            unreadable.push((s.record.path.clone(), lines));
        }
    } else {
        let store = open_store_to_query()?;
        let snap = store.snapshot()?;
        let sessions: Vec<(SessionKey, SessionRecord)> = snap
            .sessions()?
            .into_iter()
            .filter(|(_, r)| !r.gone)
            .collect();
        let order = family_order(&snap, &sessions)?;
        // --by session: the session id, with the file when several files share the id.
        let mut id_uses: HashMap<&str, usize> = HashMap::new();
        for (_, r) in &sessions {
            *id_uses.entry(r.session_id.as_str()).or_default() += 1;
        }
        let label = |r: &SessionRecord| {
            if id_uses[r.session_id.as_str()] > 1 {
                format!("{} ({})", r.session_id, r.path)
            } else {
                r.session_id.clone()
            }
        };
        let mut seen: HashSet<[u8; 32]> = HashSet::new();
        for (i, in_family) in order {
            let (key, record) = &sessions[i];
            let seen = in_family.then_some(&mut seen);
            let label = label(record);
            owners.insert(
                label.clone(),
                (record.session_id.clone(), record.path.clone()),
            );
            let mut lines = Vec::new();
            count_session(
                &snap,
                *key,
                &label,
                args.by,
                seen,
                &mut groups,
                &mut total,
                &mut lines,
            )?;
            if !lines.is_empty() {
                unreadable.push((record.path.clone(), lines));
            }
        }
    }
    if ui.json {
        if let Some(by) = args.by {
            for (k, c) in in_order(by, &groups) {
                let mut head = Map::new();
                head.insert("type".into(), "group".into());
                head.insert("by".into(), by.name().into());
                // By session the key is the session id, and the file says which file
                // (several files can hold one id; the text table's label then adds the file).
                match owners.get(k).filter(|_| by == By::Session) {
                    Some((id, file)) => {
                        head.insert("key".into(), id.clone().into());
                        head.insert("file".into(), file.clone().into());
                    }
                    None => {
                        head.insert("key".into(), k.clone().into());
                    }
                }
                ui.json_line(&c.to_json(head))?;
            }
        }
        let mut head = Map::new();
        head.insert("type".into(), "total".into());
        ui.json_line(&total.to_json(head))?;
    } else {
        write_human(ui, args.by, &groups, &total)?;
    }
    Ok(report_unreadable(&unreadable))
}

/// Says on stderr which entries were left out of the counts because their JSON cannot be
/// read, and makes the exit status 2 when there were any (the counts are then incomplete).
fn report_unreadable(unreadable: &[(String, Vec<u64>)]) -> Outcome {
    if unreadable.is_empty() {
        return Outcome::Success;
    }
    for (path, lines) in unreadable {
        super::util::warn_unreadable(path, lines, "not counted");
    }
    Outcome::PartialFailure
}

/// The order to count sessions in, and whether each is in a fork family (or shares its id with
/// another file): parents before their forks (by the length of the `parentSession` chain, then
/// creation time, then id, then file path).
fn family_order(
    snap: &Snapshot,
    sessions: &[(SessionKey, SessionRecord)],
) -> Result<Vec<(usize, bool)>, CommandError> {
    let index: HashMap<SessionKey, usize> = sessions
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (*k, i))
        .collect();
    // parent[i] = index of the session named by i's parentSession, when it is in the store.
    let mut parent: Vec<Option<usize>> = vec![None; sessions.len()];
    for (i, (_, r)) in sessions.iter().enumerate() {
        if let Some(p) = &r.parent_session
            && let Some(pk) = snap.session_by_path(std::path::Path::new(p))?
        {
            parent[i] = index.get(&pk).copied().filter(|&j| j != i);
        }
    }
    let mut in_family = vec![false; sessions.len()];
    // Copies: several files holding one session id.
    let mut id_uses: HashMap<&str, usize> = HashMap::new();
    for (_, r) in sessions {
        *id_uses.entry(r.session_id.as_str()).or_default() += 1;
    }
    for (i, (_, r)) in sessions.iter().enumerate() {
        if id_uses[r.session_id.as_str()] > 1 {
            in_family[i] = true;
        }
    }
    for (i, p) in parent.iter().enumerate() {
        if let Some(j) = p {
            in_family[i] = true;
            in_family[*j] = true;
        }
    }
    let depth = chain_depths(&parent);
    let mut order: Vec<usize> = (0..sessions.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (&sessions[a].1, &sessions[b].1);
        depth[a]
            .cmp(&depth[b])
            .then_with(|| ra.created_ms.cmp(&rb.created_ms))
            .then_with(|| ra.session_id.cmp(&rb.session_id))
            // Copies of one session (same id and creation time): by file path, not by the
            // order they were imported in, so that the counts are those of a fresh import.
            .then_with(|| std::path::Path::new(&ra.path).cmp(std::path::Path::new(&rb.path)))
    });
    Ok(order.into_iter().map(|i| (i, in_family[i])).collect())
}

/// Each session's `parentSession` chain length (`parent[i]`: the index of i's parent), worked
/// out once for all in linear time: a chain that reaches a cycle counts as longer than any
/// chain can be (`parent.len() + 1`), so a family in a cycle is counted after every other.
/// (Measured per comparison while sorting, a chain of 64,000 forks took 8 s of `stats`.)
fn chain_depths(parent: &[Option<usize>]) -> Vec<usize> {
    let cycle = parent.len() + 1;
    let mut depth: Vec<Option<usize>> = vec![None; parent.len()];
    let mut on_walk = vec![false; parent.len()];
    let mut walk: Vec<usize> = Vec::new();
    for start in 0..parent.len() {
        // Walk up to a session whose depth is known, a root, or one met on this walk (a cycle).
        walk.clear();
        let mut at = start;
        let above = loop {
            if let Some(d) = depth.get(at).copied().flatten() {
                break if d == cycle { cycle } else { d + 1 };
            }
            if on_walk.get(at).copied().unwrap_or(true) {
                break cycle;
            }
            on_walk[at] = true;
            walk.push(at);
            match parent.get(at).copied().flatten() {
                Some(up) => at = up,
                None => break 0,
            }
        };
        // `above` is the depth the last session walked gets (0 for a root): one less for each
        // step back down, but a chain that reaches a cycle is that long all the way down.
        let mut d = above;
        for &i in walk.iter().rev() {
            depth[i] = Some(d);
            on_walk[i] = false;
            if d != cycle {
                d += 1;
            }
        }
    }
    depth.into_iter().map(|d| d.unwrap_or(cycle)).collect()
}

/// The identity of an entry across a fork family: blake3 of (id, timestamp, JSON text).
fn identity(v: &Value, text: &str) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    for part in [
        v.get("id").and_then(Value::as_str).unwrap_or(""),
        v.get("timestamp").and_then(Value::as_str).unwrap_or(""),
    ] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.update(text.as_bytes());
    *h.finalize().as_bytes()
}

#[allow(clippy::too_many_arguments)]
fn count_session(
    snap: &Snapshot,
    key: SessionKey,
    label: &str,
    by: Option<By>,
    mut seen: Option<&mut HashSet<[u8; 32]>>,
    groups: &mut BTreeMap<String, Counts>,
    total: &mut Counts,
    unreadable: &mut Vec<u64>,
) -> Result<(), CommandError> {
    let mut model_in_force = String::from("-");
    let mut local: BTreeMap<String, Counts> = BTreeMap::new();
    let mut first = true;
    for row in snap.rows(key)? {
        let parsed = snap
            .with_entry(row, |a| {
                let entry = matches!(a.kind, pisess_engine::record::ArchivedRowKind::Entry);
                let line = u64::from(a.line);
                // A line pi skips (kept for the export only) is no entry, nor the first value.
                if matches!(a.kind, pisess_engine::record::ArchivedRowKind::Junk) {
                    return Ok(Some(None));
                }
                let Some(text) = a.json_text() else {
                    return if entry { Err(line) } else { Ok(None) };
                };
                match pisess_formats::value::parse_owned::<Value>(&text) {
                    Ok(v) => {
                        let id = seen.is_some().then(|| identity(&v, &text));
                        Ok(Some(Some((v, id))))
                    }
                    Err(_) if entry => Err(line),
                    Err(_) => Ok(None),
                }
            })?
            .unwrap_or(Ok(None));
        if matches!(parsed, Ok(Some(None))) {
            continue;
        }
        let was_first = std::mem::replace(&mut first, false);
        let (v, id) = match parsed {
            Ok(Some(Some(p))) => p,
            Ok(_) => continue,
            Err(line) => {
                unreadable.push(line);
                continue;
            }
        };
        if !v.is_object() || (was_first && v.get("type").and_then(Value::as_str) == Some("session"))
        {
            continue;
        }
        let model = entry_model(&v);
        if let Some(m) = &model {
            model_in_force.clone_from(m);
        }
        // An entry whose usage pi attributes by itself (`getUsageCostBreakdown`) is grouped
        // there; any other under the model in force.
        let own = if by == Some(By::Model) {
            usage_key(&v)
        } else {
            None
        };
        let in_force = own.as_deref().unwrap_or(&model_in_force);
        if let (Some(seen), Some(id)) = (seen.as_deref_mut(), id)
            && !seen.insert(id)
        {
            let k = group_key(by, &v, in_force, label);
            let g = local.entry(k).or_default();
            g.shared += 1;
            continue;
        }
        let k = group_key(by, &v, in_force, label);
        local.entry(k).or_default().add_entry(key, &v);
    }
    for (k, c) in local {
        total.merge(&c);
        groups.entry(k).or_default().merge(&c);
    }
    Ok(())
}

/// The model an entry sets or uses: a message's `provider/model` (the model that answered,
/// `responseModel`, when the message names one, as pi's usage breakdown takes it), a model
/// change.
fn entry_model(v: &Value) -> Option<String> {
    let s = |x: &Value, k: &str| x.get(k).and_then(Value::as_str).map(str::to_owned);
    match v.get("type").and_then(Value::as_str)? {
        "message" => {
            let m = v.get("message")?;
            let model = s(m, "responseModel").or_else(|| s(m, "model"))?;
            Some(match s(m, "provider") {
                Some(p) => format!("{p}/{model}"),
                None => model,
            })
        }
        "model_change" => {
            let model = s(v, "modelId")?;
            Some(match s(v, "provider") {
                Some(p) => format!("{p}/{model}"),
                None => model,
            })
        }
        _ => None,
    }
}

/// The group pi's `getUsageCostBreakdown` puts an entry's usage in, for the entries it
/// attributes by themselves rather than by the model in force: a `usage` entry by its own
/// `provider/model`, a tool result carrying a usage and a compaction or branch summary
/// carrying one under "Tools/summaries". (An assistant message is [`entry_model`]'s.)
fn usage_key(v: &Value) -> Option<String> {
    let s = |x: &Value, k: &str| x.get(k).and_then(Value::as_str).map(str::to_owned);
    let has_usage = |x: &Value| x.get("usage").is_some_and(|u| !u.is_null());
    match v.get("type").and_then(Value::as_str)? {
        "usage" => {
            let model = s(v, "model")?;
            Some(match s(v, "provider") {
                Some(p) => format!("{p}/{model}"),
                None => model,
            })
        }
        "message" => {
            let m = v.get("message")?;
            (m.get("role").and_then(Value::as_str) == Some("toolResult") && has_usage(m))
                .then(|| TOOLS_AND_SUMMARIES.to_owned())
        }
        "compaction" | "branch_summary" => has_usage(v).then(|| TOOLS_AND_SUMMARIES.to_owned()),
        _ => None,
    }
}

/// The groups in the order they are printed: days in time order (an extended year such as
/// `+275760` or `-000001` where its year puts it, `-` for entries without a day last), the
/// other groups by their key.
fn in_order(by: By, groups: &BTreeMap<String, Counts>) -> Vec<(&String, &Counts)> {
    let mut rows: Vec<(&String, &Counts)> = groups.iter().collect();
    if by == By::Day {
        // `YYYY-MM-DD`, `+YYYYYY-MM-DD` or `-YYYYYY-MM-DD`: the year is all before the
        // last two dashes; the rest compares as text.
        let when = |k: &str| {
            let mut parts = k.rsplitn(3, '-');
            let (day, month, year) = (parts.next(), parts.next(), parts.next());
            match (year.and_then(|y| y.parse::<i64>().ok()), month, day) {
                (Some(y), Some(m), Some(d)) => (false, y, m.to_owned(), d.to_owned()),
                _ => (true, 0, String::new(), k.to_owned()),
            }
        };
        rows.sort_by_cached_key(|(k, _)| when(k));
    }
    rows
}

/// pi's group for usage that no model answered for (`getUsageCostBreakdown`).
const TOOLS_AND_SUMMARIES: &str = "Tools/summaries";

fn group_key(by: Option<By>, v: &Value, model: &str, session: &str) -> String {
    match by {
        None => String::new(),
        // The UTC day of the time as JavaScript's `Date` reads it (an offset is applied; a time
        // `Date` cannot read, such as second 60, is no day).
        Some(By::Day) => {
            pisess_engine::agent::js::date_ms(v.get("timestamp").filter(|t| t.is_string()))
                .as_f64()
                .map_or_else(
                    || "-".to_owned(),
                    #[allow(clippy::cast_possible_truncation)]
                    // The date before the `T` (an extended year is longer than four digits).
                    |ms| {
                        let iso = pisess_engine::export::ms_to_iso(ms as i64);
                        iso.split_once('T')
                            .map_or(iso.clone(), |(d, _)| d.to_owned())
                    },
                )
        }
        Some(By::Model) => model.to_owned(),
        Some(By::Session) => session.to_owned(),
    }
}

fn write_human(
    ui: &mut Ui,
    by: Option<By>,
    groups: &BTreeMap<String, Counts>,
    total: &Counts,
) -> std::io::Result<()> {
    use crate::ui::safe;
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING);
    let key_name = by.map_or("", By::name);
    t.set_header(vec![
        key_name,
        "sessions",
        "entries",
        "messages",
        "tool calls",
        "input",
        "output",
        "cache read",
        "cache write",
        "cost $",
    ]);
    let row = |k: &str, c: &Counts| {
        vec![
            safe(k).into_owned(),
            c.sessions.len().to_string(),
            c.entries.to_string(),
            c.messages.to_string(),
            c.tool_call_count().to_string(),
            c.input.to_string(),
            c.output.to_string(),
            c.cache_read.to_string(),
            c.cache_write.to_string(),
            format!("{:.4}", c.cost),
        ]
    };
    if let Some(by) = by {
        for (k, c) in in_order(by, groups) {
            t.add_row(row(k, c));
        }
    }
    t.add_row(row("total", total));
    for i in 1..10 {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    let table = crate::table::plain(&t);
    let fits = |w: usize| {
        table
            .lines()
            .all(|l| unicode_width::UnicodeWidthStr::width(l) <= w)
    };
    match crate::session_arg::known_width() {
        // Too wide for the terminal: one block per group, a count a line.
        Some(w) if !fits(w) => write_blocks(ui, &t)?,
        _ => writeln!(ui.out(), "{table}")?,
    }
    if total.shared > 0 {
        writeln!(
            ui.out(),
            "{} entries shared by forks and their parents (or by copies of a session) counted once",
            total.shared
        )?;
    }
    if !total.tool_calls.is_empty() {
        let mut tools: Vec<(&String, &u64)> = total.tool_calls.iter().collect();
        tools.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.cmp(b.0)));
        let list: Vec<String> = tools
            .iter()
            .map(|(k, n)| format!("{} {n}", safe(k)))
            .collect();
        let errors = format!(
            "({})",
            crate::ui::count(total.tool_errors, "error", "errors")
        );
        write_list(ui, "tool calls:", &list, &errors)?;
    }
    if !total.roles.is_empty() {
        let list: Vec<String> = total
            .roles
            .iter()
            .map(|(k, n)| format!("{} {n}", safe(k)))
            .collect();
        write_list(ui, "messages:", &list, "")?;
    }
    Ok(())
}

/// `title item, item, … end` on one line, or, on a terminal too narrow for it, wrapped after
/// a comma with the next lines indented by two spaces (an item longer than the width is left
/// whole).
fn write_list(ui: &mut Ui, title: &str, items: &[String], end: &str) -> std::io::Result<()> {
    let width = crate::session_arg::known_width().unwrap_or(usize::MAX);
    let w = |s: &str| unicode_width::UnicodeWidthStr::width(s);
    let mut line = title.to_owned();
    let mut on_line = 0;
    let last = items.len().saturating_sub(1);
    for (i, item) in items.iter().enumerate() {
        let mut piece = item.clone();
        if i < last {
            piece.push(',');
        } else if !end.is_empty() {
            piece.push(' ');
            piece.push_str(end);
        }
        if on_line > 0 && w(&line) + 1 + w(&piece) > width {
            writeln!(ui.out(), "{line}")?;
            line = String::from(" ");
            on_line = 0;
        }
        line.push(' ');
        line.push_str(&piece);
        on_line += 1;
    }
    writeln!(ui.out(), "{line}")
}

/// The table's rows as blocks: the group's name, then each count under its title, for a
/// terminal narrower than the table.
fn write_blocks(ui: &mut Ui, t: &comfy_table::Table) -> std::io::Result<()> {
    let titles: Vec<String> = t
        .header()
        .map(|h| h.cell_iter().map(|c| c.content()).collect())
        .unwrap_or_default();
    // The widest of the count cells (the first cell is the group's name).
    let widest = |cells: &[String]| cells.iter().skip(1).map(|s| s.chars().count()).max();
    let title_w = widest(&titles).unwrap_or(0);
    for (n, row) in t.row_iter().enumerate() {
        if n > 0 {
            writeln!(ui.out())?;
        }
        let cells: Vec<String> = row.cell_iter().map(|c| c.content()).collect();
        writeln!(ui.out(), "{}", cells.first().map_or("", String::as_str))?;
        let value_w = widest(&cells).unwrap_or(0);
        for (title, value) in titles.iter().zip(&cells).skip(1) {
            writeln!(ui.out(), "  {title:<title_w$}  {value:>value_w$}")?;
        }
    }
    writeln!(ui.out())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::chain_depths;

    /// The chain length walked step by step, capped as a cycle makes it.
    fn naive(parent: &[Option<usize>], mut i: usize) -> usize {
        let mut d = 0;
        while let Some(j) = parent[i] {
            d += 1;
            if d > parent.len() {
                break;
            }
            i = j;
        }
        d
    }

    /// Random parent links (forests, chains into cycles, self-links) give the naive walk's
    /// lengths; a chain of 100,000 is worked out without walking it once per session.
    #[test]
    fn chain_depths_equal_a_walk_from_each_session() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % n as u64).unwrap()
        };
        for round in 0..2000 {
            let n = 1 + round % 12;
            let parent: Vec<Option<usize>> =
                (0..n).map(|_| (next(3) > 0).then(|| next(n))).collect();
            let want: Vec<usize> = (0..n).map(|i| naive(&parent, i)).collect();
            assert_eq!(chain_depths(&parent), want, "{parent:?}");
        }
        let n: usize = 100_000;
        let chain: Vec<Option<usize>> = (0..n).map(|i| i.checked_sub(1)).collect();
        let d = chain_depths(&chain);
        assert!(d.iter().enumerate().all(|(i, &d)| d == i));
    }
}
