//! `pisess log`: the path from an entry to the root, newest first, like `git log`.

use std::collections::HashMap;
use std::io::Write;

use serde_json::{Map, Value, json};

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::{self as sa, open_session_read};
use crate::ui::{Ui, safe};

/// Show the path from an entry (default: the leaf) back to the root, newest first.
///
/// One line per entry: short id, time, kind (message role or entry type), model, a one-line
/// summary (first line of the text; tool calls as `read src/x.rs`) and estimated tokens.
/// Labels are shown in brackets; compactions and branch summaries are marked as boundaries.
///
/// With --json: JSON Lines, one object per entry `{"type":"entry", id, parentId, entryType,
/// role, timestamp, model, summary, tokens, label?, boundary?}` in the same order as the text
/// output: newest first, or root first with --reverse (then the ids are pi's `getBranch`).
/// With --all, every entry of the session once, each before its parent, with `column` (the
/// graph lane), `leaf` and `active` (on the path to the leaf) added.
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// Start from this entry (id or prefix, @leaf, @root, label:NAME, ENTRY~N). Default: the leaf.
    #[arg(long, value_name = "ENTRY")]
    pub at: Option<String>,
    /// Show at most N entries.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    pub max_count: Option<usize>,
    /// Oldest (the root) first.
    #[arg(long, conflicts_with = "all")]
    pub reverse: bool,
    /// Every branch, not only the path to one entry, with a graph like `git log --graph`:
    /// newest first, each entry before its parent, the active path (leaf `@`) leftmost.
    #[arg(long, conflicts_with = "at")]
    pub all: bool,
    /// Only entries of this kind: an entry type (`message`, `compaction`, …) or a message role
    /// (`user`, `assistant`, `toolResult`, …).
    #[arg(long = "type", value_name = "T")]
    pub kind: Option<String>,
}

/// Runs `pisess log`.
pub fn cmd_log(ui: &mut Ui, args: &LogArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    if args.all {
        return crate::graphlog::log_all(ui, &session, args);
    }
    let at = match &args.at {
        Some(a) => session.entry(a)?,
        None => session.leaf()?,
    };
    let labels = session.label_map()?;
    // Newest first walks parent links (so `-n 10` on a deep path reads 10 entries); root
    // first needs the whole path.
    let mut keys = if args.reverse {
        session.snap.path_to_root(at)?.into_iter()
    } else {
        Vec::new().into_iter()
    };
    let mut next = (!args.reverse).then_some(at);
    let mut shown = 0usize;
    let width = sa::width();
    loop {
        if args.max_count.is_some_and(|n| shown >= n) {
            break;
        }
        let k = if args.reverse {
            match keys.next() {
                Some(k) => k,
                None => break,
            }
        } else {
            let Some(k) = next else { break };
            next = session.snap.parent(k)?;
            k
        };
        let v = session.value(k)?;
        if let Some(t) = &args.kind
            && sa::entry_type(&v) != t
            && sa::role(&v) != Some(t.as_str())
        {
            continue;
        }
        shown += 1;
        if ui.json {
            ui.json_line(&entry_json(&v, &labels))?;
        } else {
            write_line(ui, &v, &labels, width)?;
        }
    }
    Ok(Outcome::Success)
}

/// The `--json` record of one entry.
pub fn entry_json(v: &Value, labels: &HashMap<String, String>) -> Value {
    let id = v.get("id").and_then(Value::as_str);
    let mut o = Map::new();
    o.insert("type".into(), "entry".into());
    o.insert("id".into(), json!(id));
    o.insert(
        "parentId".into(),
        v.get("parentId").cloned().unwrap_or(Value::Null),
    );
    o.insert("entryType".into(), sa::entry_type(v).into());
    o.insert("role".into(), json!(sa::role(v)));
    o.insert(
        "timestamp".into(),
        v.get("timestamp").cloned().unwrap_or(Value::Null),
    );
    o.insert("model".into(), json!(sa::model(v)));
    o.insert("summary".into(), sa::summary(v).into());
    o.insert("tokens".into(), sa::tokens(v).into());
    if let Some(l) = id.and_then(|i| labels.get(i)) {
        o.insert("label".into(), l.clone().into());
    }
    if let Some(b) = boundary(v) {
        o.insert("boundary".into(), b.into());
    }
    Value::Object(o)
}

/// How a compaction or branch summary bounds the context, as text.
pub(crate) fn boundary(v: &Value) -> Option<String> {
    match sa::entry_type(v) {
        "compaction" => Some(format!(
            "compaction: earlier entries summarised, kept from {}",
            v.get("firstKeptEntryId")
                .and_then(Value::as_str)
                .unwrap_or("?")
        )),
        "branch_summary" => Some(format!(
            "branch summary of the branch left at {}",
            v.get("fromId").and_then(Value::as_str).unwrap_or("?")
        )),
        _ => None,
    }
}

fn write_line(
    ui: &mut Ui,
    v: &Value,
    labels: &HashMap<String, String>,
    width: usize,
) -> std::io::Result<()> {
    if let Some(b) = boundary(v) {
        let mark = format!("──── {} ────", safe(&b));
        let painted = ui.paint("35", &mark);
        writeln!(ui.out(), "{painted}")?;
    }
    let line = line_text(ui, v, labels, width);
    writeln!(ui.out(), "{line}")
}

/// One entry as a line of text (terminal-safe), laid out for `width` columns.
pub(crate) fn line_text(
    ui: &Ui,
    v: &Value,
    labels: &HashMap<String, String>,
    width: usize,
) -> String {
    let id = v.get("id").and_then(Value::as_str).unwrap_or("-");
    let time = sa::short_time(v.get("timestamp").and_then(Value::as_str));
    let kind = sa::kind(v);
    let model = sa::model(v)
        .map(|m| format!(" {}", safe(m)))
        .unwrap_or_default();
    let label = labels
        .get(id)
        .map(|l| format!(" [{}]", safe(l)))
        .unwrap_or_default();
    let head = format!(
        "{} {time} {:<11}{model}{label}",
        ui.paint("33", &safe(sa::short_id(id))),
        safe(kind)
    );
    let tokens = format!("~{}t", sa::tokens(v));
    let used = 8
        + 1
        + time.chars().count()
        + 1
        + 11.max(kind.chars().count())
        + 2
        + model.chars().count()
        + label.chars().count()
        + tokens.len()
        + 2;
    let room = width.saturating_sub(used).max(20);
    let summary = sa::clip(&sa::summary(v), room);
    format!("{head}  {}  {tokens}", safe(&summary))
}
