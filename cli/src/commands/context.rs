//! `pisess context`: what the model sees at an entry (pi's `buildSessionContext`).
//!
//! Invariants:
//! - memory is bounded by the path's length (its entry keys and a few words per kept entry),
//!   not by its messages: entries are decoded one at a time from the store
//!   ([`pisess_engine::agent::lean`]) and each message is written as soon as it is projected;
//! - `--json` prints the object
//!   `{leafId, messages, thinkingLevel?, model, entryIds, tokens, estimate, llmMessages?}`,
//!   in that key order, compact, numbers as JavaScript prints them (`js::to_writer`): each
//!   message is the text pi's `JSON.stringify` gives it; `leafId` is null for a session
//!   without entries (a header only), whose context is empty, as pi's is.

use std::io::Write;

use pisess_engine::agent::lean::{LeanContext, PathSource};
use pisess_engine::agent::project::convert_to_llm;
use pisess_engine::agent::tokens::estimate_tokens;
use serde_json::Value;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::json_stream::item;
use crate::session_arg::{self, StoredPath, open_session_read};
use crate::ui::{Ui, safe};

/// Show what the model sees at an entry, with token estimates.
///
/// The path from the root to the entry is read from the store and projected as pi does
/// (latest compaction's summary and kept entries, branch summaries, context edits, model and
/// thinking level in force).
///
/// With --json: one object `{leafId, messages, thinkingLevel, model, entryIds, tokens,
/// estimate}` (plus `llmMessages` with --llm); `messages`, `thinkingLevel` and `model` are pi's
/// `buildSessionContext`, `entryIds` the selected entries, `tokens` the projected estimate and
/// `estimate` its parts.
#[derive(Debug, clap::Args)]
pub struct ContextArgs {
    /// The session: a file, a session id or unique prefix, or @latest (the default: the
    /// session `pi -c` continues in this folder, as `git log` reads the current repository).
    #[arg(default_value = "@latest")]
    pub session: String,
    /// The entry to look from (id or prefix, @leaf, @root, label:NAME, ENTRY~N). Default: the leaf.
    #[arg(long, value_name = "ENTRY")]
    pub at: Option<String>,
    /// Show the messages as the model receives them (pi's `convertToLlm`) instead; with --json
    /// they are added as `llmMessages`.
    #[arg(long)]
    pub llm: bool,
}

/// Runs `pisess context`.
///
/// Memory is bounded by the path's length, not by its messages: the context is planned from
/// the stored records (types and roles, a few decoded entries), then each selected entry is
/// decoded, written and dropped in turn. `--json` is written as it is read (the token estimate
/// comes after the messages in the object and is summed on the way); the human form reads the
/// selected entries twice, once for the header's count and estimate and once to print them.
/// An entry that cannot be read stops the command with exit 2, possibly after part of the
/// output.
pub fn cmd_context(ui: &mut Ui, args: &ContextArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    let at = match &args.at {
        Some(a) => Some(session.entry(a)?),
        // A session without entries has no leaf; pi's context there is empty, and so is ours.
        // When the last entry has no string id, pi starts from that entry.
        None => session.context_leaf()?,
    };
    let (ids, path) = match at {
        Some(at) => (start_ids(&session, at)?, session.path_source(at)?),
        None => ((Value::Null, None), session.empty_path()),
    };
    let (leaf_id, start_id) = ids;
    let mut plan = LeanContext::plan(&path)?;
    if leaf_id.is_null() && !path.is_empty() {
        // pi's `getBranch()` of a falsy leaf id is empty: its estimate counts no usage.
        plan = plan.with_empty_branch();
    }
    if ui.json {
        write_json(
            ui.out(),
            &leaf_id,
            start_id.as_ref(),
            &path,
            &plan,
            args.llm,
        )?;
        return Ok(Outcome::Success);
    }
    let mut count = 0usize;
    let estimate = plan.messages(&path, |m| {
        count += if args.llm {
            convert_to_llm(std::iter::once(m)).len()
        } else {
            1
        };
        Ok::<(), CommandError>(())
    })?;
    let model = Some(plan.model())
        .filter(|m| !m.is_null())
        .map(|m| {
            format!(
                "{}/{}",
                m.get("provider").and_then(Value::as_str).unwrap_or("?"),
                m.get("modelId").and_then(Value::as_str).unwrap_or("?")
            )
        })
        .unwrap_or_else(|| "none".into());
    let thinking = plan
        .thinking_level()
        .and_then(Value::as_str)
        .unwrap_or("unset");
    let total = estimate
        .to_json()
        .get("tokens")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let at = match (at, &leaf_id) {
        (None, _) if session.record.entries == 0 => "(no entries)".to_owned(),
        (None, _) => "(no entry: the last entry's id is null)".to_owned(),
        (Some(_), Value::String(id)) => safe(id).into_owned(),
        (Some(at), other) => {
            let line = session
                .snap
                .with_entry(at, |a| u64::from(a.line))?
                .unwrap_or(0);
            // `leafId` is null for an id pi's walk cannot find the entry by: none, or `""`.
            let id = match other {
                Value::Null if session.snap.link(at)?.is_some() => "id \"\"".to_owned(),
                Value::Null => "no id".to_owned(),
                v => format!("id {}", safe(&v.to_string())),
            };
            format!("the entry of line {line} ({id})")
        }
    };
    let header = format!(
        "context at {at} — {count} message(s), ~{total} tokens, model {}, thinking {}",
        safe(&model),
        safe(thinking)
    );
    let painted = ui.paint("1", &header);
    writeln!(ui.out(), "{painted}")?;
    if args.llm {
        plan.llm_messages(&path, |m| write_message(ui, m).map_err(CommandError::from))?;
    } else {
        plan.messages(&path, |m| write_message(ui, m).map_err(CommandError::from))?;
    }
    Ok(Outcome::Success)
}

/// Writes the `--json` object `{leafId, messages, thinkingLevel, model, entryIds, tokens,
/// estimate[, llmMessages]}` (compact, numbers as JavaScript prints them) as the messages are
/// read.
fn write_json(
    out: &mut impl Write,
    leaf_id: &Value,
    start_id: Option<&Value>,
    path: &StoredPath<'_>,
    plan: &LeanContext,
    llm: bool,
) -> Result<(), CommandError> {
    out.write_all(b"{\"leafId\":")?;
    pisess_formats::js::to_writer(&mut *out, leaf_id)?;
    out.write_all(b",\"messages\":[")?;
    let mut first = true;
    let estimate = plan.messages(path, |m| Ok::<(), CommandError>(item(out, &mut first, m)?))?;
    out.write_all(b"]")?;
    if let Some(t) = plan.thinking_level() {
        out.write_all(b",\"thinkingLevel\":")?;
        pisess_formats::js::to_writer(&mut *out, t)?;
    }
    out.write_all(b",\"model\":")?;
    pisess_formats::js::to_writer(&mut *out, plan.model())?;
    out.write_all(b",\"entryIds\":[")?;
    let mut first = true;
    // The entry without a string id is only ever the path's end (pi's fallback leaf): its
    // `id` as the file has it (`null` when it has none), where the record holds none.
    let end = path.len().checked_sub(1);
    for i in plan.selected() {
        match start_id {
            Some(id) if Some(i) == end => item(out, &mut first, id)?,
            _ => path.meta(i, |_, id| item(out, &mut first, &id))??,
        }
    }
    out.write_all(b"]")?;
    let estimate = estimate.to_json();
    out.write_all(b",\"tokens\":")?;
    pisess_formats::js::to_writer(&mut *out, estimate.get("tokens").unwrap_or(&Value::Null))?;
    out.write_all(b",\"estimate\":")?;
    pisess_formats::js::to_writer(&mut *out, &estimate)?;
    if llm {
        out.write_all(b",\"llmMessages\":[")?;
        let mut first = true;
        plan.llm_messages(path, |m| Ok::<(), CommandError>(item(out, &mut first, m)?))?;
        out.write_all(b"]")?;
    }
    out.write_all(b"}\n")?;
    Ok(())
}

/// The start of pi's context, as `--json` reports it: `leafId` (the oracle's
/// `resolvedLeafId`: the entry's `id` when pi's id index finds the entry by it, i.e. when the
/// id is truthy; else `null`) and, for an entry without a string id (pi's fallback leaf, only
/// ever the path's end), its `id` as written (`null` when it has none) for `entryIds`. Only
/// such an entry is decoded for it.
fn start_ids(
    session: &session_arg::Session,
    at: pisess_engine::EntryKey,
) -> Result<(Value, Option<Value>), CommandError> {
    let id = session.id(at)?;
    if !id.is_empty() {
        return Ok((Value::String(id), None));
    }
    if session.snap.link(at)?.is_some() {
        // The empty id: falsy, so pi's walk finds no entry by it.
        return Ok((Value::Null, None));
    }
    let raw = session.value(at)?.get("id").cloned().unwrap_or(Value::Null);
    let leaf = if pisess_engine::agent::js::truthy(Some(&raw)) {
        raw.clone()
    } else {
        Value::Null
    };
    Ok((leaf, Some(raw)))
}

fn write_message(ui: &mut Ui, m: &Value) -> std::io::Result<()> {
    let role = m.get("role").and_then(Value::as_str).unwrap_or("?");
    let mut title = role.to_owned();
    if let Some(t) = m
        .get("toolName")
        .or_else(|| m.get("customType"))
        .and_then(Value::as_str)
    {
        title = format!("{role} ({t})");
    }
    let line = format!("── {} · ~{} tokens", safe(&title), estimate_tokens(m));
    writeln!(ui.out())?;
    let painted = ui.paint("36", &line);
    writeln!(ui.out(), "{painted}")?;
    let mut body = String::new();
    match m.get("content") {
        Some(Value::String(s)) => body.push_str(s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                let piece = match b.get("type").and_then(Value::as_str) {
                    Some("text") => b
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    Some("thinking") => format!(
                        "[thinking] {}",
                        b.get("thinking").and_then(Value::as_str).unwrap_or("")
                    ),
                    Some("toolCall") => format!("→ {}", session_arg::tool_call_phrase(b)),
                    Some("image") => "[image]".to_owned(),
                    Some(other) => format!("[{other}]"),
                    None => String::new(),
                };
                if !body.is_empty() {
                    body.push('\n');
                }
                body.push_str(&piece);
            }
        }
        _ => {}
    }
    if role == "bashExecution" {
        body = format!(
            "$ {}\n{}",
            m.get("command").and_then(Value::as_str).unwrap_or(""),
            m.get("output").and_then(Value::as_str).unwrap_or("")
        );
    } else if matches!(role, "compactionSummary" | "branchSummary") {
        body = m
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
    }
    if let Some(sections) = m.get("sections").and_then(Value::as_object) {
        for (name, text) in sections {
            let text = text
                .as_str()
                .map_or_else(|| text.to_string(), str::to_owned);
            body.push_str(&format!(
                "\n[{name}] {}",
                session_arg::clip(session_arg::first_line(&text), 100)
            ));
        }
    }
    for l in body.trim_start_matches('\n').lines() {
        writeln!(ui.out(), "{}", safe(l))?;
    }
    Ok(())
}
