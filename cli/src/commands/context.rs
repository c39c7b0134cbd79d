//! `pisess context`: what the model sees at an entry (pi's `buildSessionContext`).

use std::io::Write;

use pisess_engine::agent::report::context_report;
use pisess_engine::agent::tokens::estimate_tokens;
use serde_json::{Map, Value};

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::{self, open_session_read};
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
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// The entry to look from (id or prefix, @leaf, @root, label:NAME, ENTRY~N). Default: the leaf.
    #[arg(long, value_name = "ENTRY")]
    pub at: Option<String>,
    /// Also show the messages as the model receives them (pi's `convertToLlm`).
    #[arg(long)]
    pub llm: bool,
}

/// Runs `pisess context`.
pub fn cmd_context(ui: &mut Ui, args: &ContextArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    let at = match &args.at {
        Some(a) => session.entry(a)?,
        None => session.leaf()?,
    };
    let values = session.path_values(at)?;
    let path: Vec<&Value> = values.iter().map(|(_, v)| v).collect();
    let leaf_id = session.id(at)?;
    let report = context_report(Some(&leaf_id), &path, args.llm);
    let get = |k: &str| report.get(k).cloned().unwrap_or(Value::Null);
    let projected = report
        .get("estimate")
        .and_then(|e| e.get("projected"))
        .cloned()
        .unwrap_or(Value::Null);
    if ui.json {
        let mut o = Map::new();
        o.insert("leafId".into(), leaf_id.into());
        o.insert("messages".into(), get("messages"));
        if let Some(t) = report.get("thinkingLevel") {
            o.insert("thinkingLevel".into(), t.clone());
        }
        o.insert("model".into(), get("model"));
        o.insert("entryIds".into(), get("contextEntryIds"));
        o.insert(
            "tokens".into(),
            projected.get("tokens").cloned().unwrap_or(Value::Null),
        );
        o.insert("estimate".into(), projected);
        if args.llm {
            o.insert("llmMessages".into(), get("llmMessages"));
        }
        ui.json_line(&Value::Object(o))?;
        return Ok(Outcome::Success);
    }
    let messages = report
        .get(if args.llm { "llmMessages" } else { "messages" })
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let model = report
        .get("model")
        .filter(|m| !m.is_null())
        .map(|m| {
            format!(
                "{}/{}",
                m.get("provider").and_then(Value::as_str).unwrap_or("?"),
                m.get("modelId").and_then(Value::as_str).unwrap_or("?")
            )
        })
        .unwrap_or_else(|| "none".into());
    let thinking = report
        .get("thinkingLevel")
        .and_then(Value::as_str)
        .unwrap_or("unset");
    let total = projected
        .get("tokens")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let header = format!(
        "context at {} — {} message(s), ~{total} tokens, model {}, thinking {}",
        safe(&leaf_id),
        messages.len(),
        safe(&model),
        safe(thinking)
    );
    let painted = ui.paint("1", &header);
    writeln!(ui.out(), "{painted}")?;
    for m in &messages {
        write_message(ui, m)?;
    }
    Ok(Outcome::Success)
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
