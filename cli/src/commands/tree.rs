//! `pisess tree`: the session tree as pi's `/tree` draws it.
//!
//! Children are ordered as pi's `getTree` orders them: by timestamp, oldest first, a stable
//! sort over file order (entries whose timestamps do not parse keep their file order relative
//! to their neighbours). The walk is an explicit stack, so a 1,000,000-deep chain is fine.

use std::collections::{HashMap, HashSet};
use std::io::Write;

use clap::ValueEnum;
use pisess_engine::EntryKey;
use pisess_engine::agent::js::date_ms;
use serde_json::{Map, Value, json};

use crate::command_error::{CommandResult, Outcome};
use crate::session_arg::{self as sa, Session, open_session_read};
use crate::ui::{Ui, safe};

/// Show the whole session tree as pi's /tree draws it.
///
/// Active path and leaf marked, labels shown, linear runs drawn without indentation, siblings
/// oldest first (pi's order).
///
/// Markers: `@` the leaf, `*` an entry on the active path (root → leaf), `o` any other entry.
/// Indentation grows only where an entry has several children.
///
/// With --json: one object `{roots, leafId, nodes}` whose nodes `{id, parentId, type, children,
/// label?}` are listed depth-first, children in pi's order (the shape of pi's `getTree`).
/// --filter and --depth apply to the text output only.
#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// Which entries to show (pi's /tree filter modes).
    #[arg(long, value_enum, default_value_t = Filter::Default)]
    pub filter: Filter,
    /// Show at most N levels of branch nesting (0: the trunk only).
    #[arg(long, value_name = "N")]
    pub depth: Option<usize>,
}

/// pi's /tree filter modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Filter {
    /// Hide bookkeeping entries (labels, model/thinking changes, context edits, custom, session
    /// info) and assistant messages that only call tools.
    Default,
    /// The default, without tool results.
    NoTools,
    /// User messages only.
    UserOnly,
    /// Labelled entries only.
    Labeled,
    /// Everything.
    All,
}

/// A tree node with what pi orders siblings by.
pub(crate) struct Node {
    pub(crate) key: EntryKey,
    pub(crate) id: String,
    time: Option<f64>,
}

/// Reads the children of `e` in pi's order.
pub(crate) fn sorted_children(
    session: &Session,
    e: EntryKey,
) -> Result<Vec<Node>, crate::command_error::CommandError> {
    let mut nodes = Vec::new();
    for c in session.snap.children(e)? {
        nodes.push(node(session, c)?);
    }
    // `new Date(a) - new Date(b)`: NaN compares as equal, like V8's stable sort treats it.
    nodes.sort_by(|a, b| match (a.time, b.time) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => std::cmp::Ordering::Equal,
    });
    Ok(nodes)
}

pub(crate) fn node(
    session: &Session,
    k: EntryKey,
) -> Result<Node, crate::command_error::CommandError> {
    let (id, ts) = session
        .snap
        .with_entry(k, |a| {
            (
                a.id.as_ref().map(|s| s.as_str().to_owned()),
                a.timestamp.as_ref().map(|s| s.as_str().to_owned()),
            )
        })?
        .unwrap_or((None, None));
    let time = date_ms(ts.map(Value::String).as_ref()).as_f64();
    Ok(Node {
        key: k,
        id: id.unwrap_or_default(),
        time,
    })
}

/// Runs `pisess tree`.
pub fn cmd_tree(ui: &mut Ui, args: &TreeArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    let labels = session.label_map()?;
    let roots: Vec<Node> = session
        .snap
        .roots(session.key)?
        .into_iter()
        .map(|r| node(&session, r))
        .collect::<Result<_, _>>()?;
    let leaf = session.snap.leaf(session.key)?;
    if ui.json {
        return write_json(ui, &session, roots, leaf, &labels);
    }
    let active: HashSet<EntryKey> = match leaf {
        Some(l) => session.snap.path_to_root(l)?.into_iter().collect(),
        None => HashSet::new(),
    };
    // (node, prefix for its line, prefix for its descendants, nesting level)
    let mut stack: Vec<(Node, String, String, usize)> = Vec::new();
    let many_roots = roots.len() > 1;
    let n = roots.len();
    for (i, r) in roots.into_iter().enumerate().rev() {
        let (p, c) = connectors(many_roots, i + 1 == n, "");
        stack.push((r, p, c, usize::from(many_roots)));
    }
    let width = sa::width();
    let mut hidden = 0usize;
    while let Some((nd, prefix, child_prefix, level)) = stack.pop() {
        // One entry whose JSON cannot be read (nested deeper than the parser allows) does not
        // hide the rest of the tree: it is drawn as `(unreadable)`.
        let v = session
            .value(nd.key)
            .unwrap_or_else(|_| serde_json::json!({"type": "(unreadable)", "id": nd.id}));
        let is_leaf = Some(nd.key) == leaf;
        let label = labels.get(&nd.id);
        if shown(&v, args.filter, is_leaf, label.is_some()) {
            let mark = if is_leaf {
                ui.paint("1;32", "@")
            } else if active.contains(&nd.key) {
                ui.paint("32", "*")
            } else {
                "o".to_owned()
            };
            let label = label
                .map(|l| format!(" {}", ui.paint("1;35", &format!("[{}]", safe(l)))))
                .unwrap_or_default();
            let text = format!("{} {}", sa::kind(&v), sa::summary(&v));
            let room = width
                .saturating_sub(prefix.chars().count() + 12 + label.chars().count())
                .max(20);
            let id = ui.paint("33", &safe(sa::short_id(&nd.id)));
            writeln!(
                ui.out(),
                "{prefix}{mark} {id}{label} {}",
                safe(&sa::clip(&text, room))
            )?;
        }
        let children = sorted_children(&session, nd.key)?;
        let branching = children.len() > 1;
        if branching && args.depth.is_some_and(|d| level >= d) {
            hidden += children.len();
            continue;
        }
        let n = children.len();
        for (i, c) in children.into_iter().enumerate().rev() {
            let (p, cp) = connectors(branching, i + 1 == n, &child_prefix);
            stack.push((c, p, cp, level + usize::from(branching)));
        }
    }
    if hidden > 0 {
        writeln!(ui.out(), "({hidden} branch(es) below --depth not shown)")?;
    }
    Ok(Outcome::Success)
}

/// The line prefix and the descendants' prefix of a child.
fn connectors(branching: bool, last: bool, base: &str) -> (String, String) {
    if !branching {
        return (base.to_owned(), base.to_owned());
    }
    if last {
        (format!("{base}└─"), format!("{base}  "))
    } else {
        (format!("{base}├─"), format!("{base}│ "))
    }
}

/// pi's /tree filter for one entry.
fn shown(v: &Value, filter: Filter, is_leaf: bool, labelled: bool) -> bool {
    let t = sa::entry_type(v);
    if filter == Filter::All {
        return true;
    }
    if t == "usage" {
        return false;
    }
    if t == "message" && sa::role(v) == Some("assistant") && !is_leaf {
        let m = &v["message"];
        let has_text = !sa::message_text(m).trim().is_empty();
        let stop = m.get("stopReason").and_then(Value::as_str);
        let error = stop.is_some_and(|s| s != "stop" && s != "toolUse");
        if !has_text && !error {
            return false;
        }
    }
    let settings = matches!(
        t,
        "label"
            | "context_edit"
            | "custom"
            | "model_change"
            | "thinking_level_change"
            | "session_info"
    );
    match filter {
        Filter::UserOnly => t == "message" && sa::role(v) == Some("user"),
        Filter::NoTools => {
            let tool_result = t == "message" && sa::role(v) == Some("toolResult");
            !settings && !tool_result
        }
        Filter::Labeled => labelled,
        Filter::All => true,
        Filter::Default => !settings,
    }
}

fn write_json(
    ui: &mut Ui,
    session: &Session,
    roots: Vec<Node>,
    leaf: Option<EntryKey>,
    labels: &HashMap<String, String>,
) -> CommandResult {
    // Written as it is walked, one node at a time, so memory does not grow with the session
    // (the same bytes as one `json!` object with keys roots, leafId, nodes).
    let root_ids: Vec<Value> = roots.iter().map(|r| Value::String(r.id.clone())).collect();
    let leaf_id = match leaf {
        Some(l) => json!(session.id(l)?),
        None => Value::Null,
    };
    write!(ui.out(), "{{\"roots\":")?;
    serde_json::to_writer(ui.out(), &root_ids)?;
    write!(ui.out(), ",\"leafId\":")?;
    serde_json::to_writer(ui.out(), &leaf_id)?;
    write!(ui.out(), ",\"nodes\":[")?;
    let mut first = true;
    let mut stack: Vec<Node> = roots.into_iter().rev().collect();
    while let Some(nd) = stack.pop() {
        let children = sorted_children(session, nd.key)?;
        let parent = session
            .snap
            .with_entry(nd.key, |a| {
                a.parent_id.as_ref().map(|p| p.as_str().to_owned())
            })?
            .flatten();
        let mut o = Map::new();
        o.insert("id".into(), nd.id.clone().into());
        match parent {
            Some(p) => {
                o.insert("parentId".into(), p.into());
            }
            None => {
                // null and absent differ in pi's output; only roots need the JSON.
                let v = session.value(nd.key)?;
                if let Some(p) = v.get("parentId") {
                    o.insert("parentId".into(), p.clone());
                }
                o.insert("type".into(), v.get("type").cloned().unwrap_or(Value::Null));
            }
        }
        if !o.contains_key("type") {
            let t = session
                .snap
                .with_entry(nd.key, |a| {
                    a.type_name.as_ref().map(|p| p.as_str().to_owned())
                })?
                .flatten();
            o.insert("type".into(), json!(t));
        }
        o.insert(
            "children".into(),
            children
                .iter()
                .map(|c| Value::String(c.id.clone()))
                .collect(),
        );
        if let Some(l) = labels.get(&nd.id) {
            o.insert("label".into(), l.clone().into());
        }
        if !first {
            write!(ui.out(), ",")?;
        }
        first = false;
        serde_json::to_writer(ui.out(), &Value::Object(o))?;
        stack.extend(children.into_iter().rev());
    }
    writeln!(ui.out(), "]}}")?;
    Ok(Outcome::Success)
}
