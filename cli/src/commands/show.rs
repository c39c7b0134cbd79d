//! `pisess show`: one entry in full.

use std::collections::VecDeque;
use std::io::Write;

use pisess_engine::EntryKey;
use serde_json::{Map, Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{self as sa, Session, open_session_read};
use crate::ui::{Ui, safe};

/// How many descendants are searched for the results of an entry's tool calls.
const RESULT_SEARCH: usize = 256;

/// Show one entry in full.
///
/// Content blocks, tool calls with their arguments and the result paired with each call, usage
/// and cost.
///
/// With --json: one object `{id, label, line, entry, toolResults}`, where `entry` is the stored
/// entry and `toolResults` the result messages of its tool calls. With --raw: the stored line,
/// byte for byte.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// The entry (id or prefix, @leaf, @root, label:NAME, ENTRY~N); the leaf when left out,
    /// as `git show` shows HEAD.
    #[arg(default_value = "@leaf")]
    pub entry: String,
    /// Print the stored line exactly as it is in the file.
    #[arg(long)]
    pub raw: bool,
}

/// Runs `pisess show`.
pub fn cmd_show(ui: &mut Ui, args: &ShowArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    let e = session.entry(&args.entry)?;
    if args.raw {
        let bytes = session
            .snap
            .with_entry(e, |a| {
                if a.raw_len == 0 {
                    a.json_text().map(|t| format!("{t}\n").into_bytes())
                } else {
                    a.raw_bytes().ok().map(std::borrow::Cow::into_owned)
                }
            })?
            .flatten()
            .unwrap_or_default();
        // The stored bytes exactly, except on a terminal, which must not get them raw.
        if ui.tty {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let text = text.strip_suffix('\r').unwrap_or(text);
            writeln!(ui.out(), "{}", crate::ui::safe(text))?;
        } else {
            ui.out().write_all(&bytes)?;
        }
        return Ok(Outcome::Success);
    }
    let v = session.value(e)?;
    let line = session.snap.with_entry(e, |a| u64::from(a.line))?;
    let labels = session.label_map()?;
    let id = sa::id_of(&v).unwrap_or("").to_owned();
    let results = tool_results(&session, e, &v)?;
    if ui.json {
        let mut o = Map::new();
        o.insert("id".into(), id.clone().into());
        o.insert("label".into(), json!(labels.get(&id)));
        o.insert("line".into(), json!(line));
        o.insert("entry".into(), v.clone());
        o.insert("toolResults".into(), Value::Array(results));
        ui.json_line(&Value::Object(o))?;
        return Ok(Outcome::Success);
    }
    let out_line = |ui: &mut Ui, k: &str, val: &str| -> std::io::Result<()> {
        // Padded by its own width: the colour's escapes take none.
        let key = ui.paint("1", k);
        let pad = 10usize.saturating_sub(k.chars().count());
        writeln!(ui.out(), "{key}{:pad$} {}", "", safe(val))
    };
    out_line(ui, "id", &id)?;
    out_line(
        ui,
        "parent",
        v.get("parentId")
            .and_then(Value::as_str)
            .unwrap_or("(root)"),
    )?;
    out_line(ui, "kind", sa::kind(&v))?;
    out_line(
        ui,
        "time",
        v.get("timestamp").and_then(Value::as_str).unwrap_or(""),
    )?;
    if let Some(l) = line {
        out_line(ui, "line", &l.to_string())?;
    }
    if let Some(l) = labels.get(&id) {
        out_line(ui, "label", l)?;
    }
    if let Some(m) = sa::model(&v) {
        out_line(ui, "model", m)?;
    }
    out_line(ui, "tokens", &format!("~{}", sa::tokens(&v)))?;
    if let Some(m) = v.get("message") {
        // The message's keys the lines and blocks below show; the others go to `fields`.
        let mut shown: Vec<&str> = vec!["role"];
        if sa::model(&v).is_some() {
            shown.push("model");
        }
        if let Some(u) = m.get("usage") {
            out_line(ui, "usage", &usage_text(u))?;
            shown.push("usage");
        }
        if let Some(t) = m.get("toolName").and_then(Value::as_str) {
            let call = m.get("toolCallId").and_then(Value::as_str);
            let err = match m.get("isError") {
                Some(Value::Bool(true)) => ", error",
                _ => "",
            };
            out_line(
                ui,
                "tool",
                &format!("{t} (call {}{err})", call.unwrap_or("?")),
            )?;
            shown.push("toolName");
            if call.is_some() {
                shown.push("toolCallId");
            }
            if m.get("isError").is_some_and(Value::is_boolean) {
                shown.push("isError");
            }
        }
        if let Some(r) = m.get("stopReason").and_then(Value::as_str) {
            out_line(ui, "stop", r)?;
            shown.push("stopReason");
        }
        writeln!(ui.out())?;
        write_content(ui, m.get("content"), &results)?;
        if m.get("content")
            .is_some_and(|c| c.is_string() || c.is_array())
        {
            shown.push("content");
        }
        if let Some(c) = m.get("command").and_then(Value::as_str) {
            write_block(ui, "$", c)?;
            shown.push("command");
            if let Some(o) = m.get("output").and_then(Value::as_str) {
                write_block(ui, "output", o)?;
                shown.push("output");
            }
        }
        // What the lines and blocks above leave out (an error message, a tool result's
        // details, a command's exit code, a field of an unexpected kind…), then the entry's
        // own other keys.
        let mut rest = without(m, &shown);
        if let (Some(o), Value::Object(top)) = (rest.as_object_mut(), without(&v, ENTRY_KEYS)) {
            o.extend(top.into_iter().filter(|(k, _)| k != "message"));
        }
        write_fields(ui, &rest)?;
    } else {
        writeln!(ui.out())?;
        if let Some(s) = v.get("summary").and_then(Value::as_str) {
            write_block(ui, "summary", s)?;
        }
        let rest = without(&v, &[ENTRY_KEYS, &["summary"]].concat());
        write_fields(ui, &rest)?;
    }
    Ok(Outcome::Success)
}

/// The keys every entry has, shown on the lines at the top.
const ENTRY_KEYS: &[&str] = &["type", "id", "parentId", "timestamp"];

/// An object without `keys`, in the order written (anything else as it is).
fn without(v: &Value, keys: &[&str]) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !keys.contains(&k.as_str()))
                .map(|(k, x)| (k.clone(), x.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The `fields` block: `rest` as indented JSON, when it is an object with keys.
fn write_fields(ui: &mut Ui, rest: &Value) -> Result<(), CommandError> {
    if rest.as_object().is_some_and(|o| !o.is_empty()) {
        write_block(ui, "fields", &serde_json::to_string_pretty(rest)?)?;
    }
    Ok(())
}

fn usage_text(u: &Value) -> String {
    let n = |k: &str| u.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let cost = u
        .get("cost")
        .and_then(|c| c.get("total"))
        .and_then(Value::as_f64);
    let mut s = format!(
        "input {} output {} cacheRead {} cacheWrite {} total {}",
        n("input"),
        n("output"),
        n("cacheRead"),
        n("cacheWrite"),
        n("totalTokens")
    );
    if let Some(c) = cost {
        s.push_str(&format!(" cost ${c:.4}"));
    }
    s
}

fn write_block(ui: &mut Ui, title: &str, body: &str) -> std::io::Result<()> {
    // A title can hold a session's text (a tool's name, a block's type).
    let painted = ui.paint("36", &format!("── {}", safe(title)));
    writeln!(ui.out(), "{painted}")?;
    for l in body.lines() {
        // A blank line of the text stays blank: no indent left at the end of a line.
        if l.is_empty() {
            writeln!(ui.out())?;
        } else {
            writeln!(ui.out(), "  {}", safe(l))?;
        }
    }
    Ok(())
}

fn write_content(ui: &mut Ui, content: Option<&Value>, results: &[Value]) -> std::io::Result<()> {
    match content {
        Some(Value::String(s)) => write_block(ui, "text", s),
        Some(Value::Array(blocks)) => {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        write_block(
                            ui,
                            "text",
                            b.get("text").and_then(Value::as_str).unwrap_or(""),
                        )?;
                    }
                    Some("thinking") => write_block(
                        ui,
                        "thinking",
                        b.get("thinking").and_then(Value::as_str).unwrap_or(""),
                    )?,
                    Some("toolCall") => {
                        let args = b
                            .get("arguments")
                            .map(serde_json::to_string_pretty)
                            .transpose()
                            .map_err(std::io::Error::other)?
                            .unwrap_or_default();
                        let title = format!(
                            "tool call {} ({})",
                            b.get("name").and_then(Value::as_str).unwrap_or("?"),
                            b.get("id").and_then(Value::as_str).unwrap_or("?")
                        );
                        write_block(ui, &title, &args)?;
                        let result = results.iter().find(|r| {
                            r.get("toolCallId").is_some() && r.get("toolCallId") == b.get("id")
                        });
                        if let Some(r) = result {
                            let err = if r.get("isError") == Some(&Value::Bool(true)) {
                                " (error)"
                            } else {
                                ""
                            };
                            write_block(ui, &format!("result{err}"), &sa::message_text(r))?;
                        }
                    }
                    Some("image") => write_block(ui, "image", "(image data not shown)")?,
                    other => write_block(ui, other.unwrap_or("block"), &b.to_string())?,
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The result messages of an entry's tool calls: first on the active path below the entry
/// (when the entry is on it: the results pi's context pairs with the calls), then breadth-first
/// among its other descendants; the first result found for each call, and at most
/// [`RESULT_SEARCH`] entries looked at each way.
fn tool_results(session: &Session, e: EntryKey, v: &Value) -> Result<Vec<Value>, CommandError> {
    let ids: Vec<&Value> = v
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
        .filter_map(|b| b.get("id"))
        .collect();
    let mut found = Vec::new();
    if ids.is_empty() {
        return Ok(found);
    }
    let take = |k: EntryKey, found: &mut Vec<Value>| -> Result<(), CommandError> {
        let c = session.value(k)?;
        if let Some(m) = c.get("message")
            && m.get("role").and_then(Value::as_str) == Some("toolResult")
            && m.get("toolCallId").is_some_and(|t| ids.contains(&t))
            && !found
                .iter()
                .any(|f: &Value| f.get("toolCallId") == m.get("toolCallId"))
        {
            found.push(m.clone());
        }
        Ok(())
    };
    // Down the active path, when the entry is on it.
    let snap = &session.snap;
    if let Ok(leaf) = session.leaf()
        && leaf != e
        && snap.is_ancestor(e, leaf)?
        && let (Some(de), Some(dl)) = (snap.depth(e)?, snap.depth(leaf)?)
    {
        let last = dl.min(de.saturating_add(RESULT_SEARCH as u32));
        for d in de + 1..=last {
            if found.len() == ids.len() {
                return Ok(found);
            }
            if let Some(k) = snap.ancestor_at_depth(leaf, d)? {
                take(k, &mut found)?;
            }
        }
    }
    let mut queue: VecDeque<EntryKey> = snap.children(e)?.into();
    let mut seen = 0;
    while let Some(k) = queue.pop_front() {
        seen += 1;
        if seen > RESULT_SEARCH || found.len() == ids.len() {
            break;
        }
        take(k, &mut found)?;
        queue.extend(snap.children(k)?);
    }
    Ok(found)
}
