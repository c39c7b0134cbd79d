//! `pisess tree`: the session tree as pi's `/tree` draws it.
//!
//! Children are ordered as pi's `getTree` orders them: by timestamp, oldest first, a stable
//! sort over file order (entries whose timestamps do not parse keep their file order relative
//! to their neighbours). The walk is an explicit stack, so a 1,000,000-deep chain is fine.
//!
//! The tree comes from the store's outline and parent links in a few range reads, and each
//! line from the node's outline row ([`crate::listing`]); a node the outline cannot show is
//! decoded from its line, so the output is the per-entry rendering's, byte for byte.

use std::collections::HashMap;
use std::io::Write;

use clap::ValueEnum;
use pisess_engine::EntryKey;
use pisess_engine::agent::js::date_ms;
use pisess_engine::outline::{FactsRef, ParentId, SessionTree, TreeReader};
use serde_json::{Map, Value, json};

use crate::command_error::{CommandResult, Outcome};
use crate::listing;
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
///
/// The tree is read in a few range reads ([`pisess_engine::Snapshot::session_tree`]) and each
/// line written from the node's outline row; only nodes the outline cannot show are decoded.
pub fn cmd_tree(ui: &mut Ui, args: &TreeArgs) -> CommandResult {
    let session = open_session_read(&args.session)?;
    let labels = session.label_map()?;
    let tree = session.snap.session_tree(session.key)?;
    let leaf = session.snap.leaf(session.key)?;
    let leaf_i = leaf.and_then(|l| tree.index_of(l));
    if ui.json {
        return write_json(ui, &session, &tree, leaf, &labels);
    }
    let active: Vec<bool> = match leaf {
        Some(l) => tree.marks(&session.snap.path_runs(l)?),
        None => vec![false; tree.len()],
    };
    let width = sa::width();
    let mut reader = tree.reader(&session.snap, listing::needs_cold(width));
    // The walk keeps one prefix buffer: a node's line prefix is its parent's child prefix
    // (the buffer cut back to `base`) plus its connector, and its own child prefix that plus
    // its child segment. Every node between a node and its next sibling is a descendant of
    // the first, whose prefixes extend the parent's, so cutting back always gives it.
    // Stack: (node, base length in bytes, base length in characters, position among its
    // siblings, nesting level).
    let mut stack: Vec<(usize, usize, usize, Place, usize)> = Vec::new();
    // Roots stay in file order (pi's `getTree` sorts only children).
    let roots = tree.roots.clone();
    let many_roots = roots.len() > 1;
    let n = roots.len();
    for (i, r) in roots.into_iter().enumerate().rev() {
        stack.push((
            r,
            0,
            0,
            place(many_roots, i + 1 == n),
            usize::from(many_roots),
        ));
    }
    let mut hidden = 0usize;
    let mut prefix = String::new();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let marks = [ui.paint("1;32", "@"), ui.paint("32", "*"), "o".to_owned()];
    while let Some((nd, base, base_chars, at, level)) = stack.pop() {
        prefix.truncate(base);
        let (connector, segment) = at.strings();
        let line_prefix_chars = base_chars + if connector.is_empty() { 0 } else { 2 };
        let row = reader.row(nd)?;
        let is_leaf = Some(nd) == leaf_i;
        let label = labels.get(row.id);
        let mark = if is_leaf {
            &marks[0]
        } else if active[nd] {
            &marks[1]
        } else {
            &marks[2]
        };
        let mut written = false;
        if let Some(f) = row.facts {
            if shown_fast(&f, args.filter, is_leaf, label.is_some()) {
                prefix.push_str(connector);
                written = listing::write_tree_line(
                    &mut buf,
                    ui,
                    &prefix,
                    line_prefix_chars,
                    mark,
                    &row,
                    &f,
                    label,
                    width,
                );
                prefix.truncate(base);
            } else {
                written = true;
            }
        }
        if !written {
            listing::drain(ui, &mut buf, true)?;
            // One entry whose JSON cannot be read (nested deeper than the parser allows)
            // does not hide the rest of the tree: it is drawn as `(unreadable)`.
            let v = session
                .value(row.key)
                .unwrap_or_else(|_| serde_json::json!({"type": "(unreadable)", "id": row.id}));
            if shown(&v, args.filter, is_leaf, label.is_some()) {
                let label = label
                    .map(|l| format!(" {}", ui.paint("1;35", &format!("[{}]", safe(l)))))
                    .unwrap_or_default();
                let text = format!("{} {}", sa::kind(&v), sa::summary(&v));
                let room = width
                    .saturating_sub(line_prefix_chars + 12 + label.chars().count())
                    .max(20);
                let id = ui.paint("33", &safe(sa::short_id(row.id)));
                writeln!(
                    ui.out(),
                    "{prefix}{connector}{mark} {id}{label} {}",
                    safe(&sa::clip(&text, room))
                )?;
            }
        }
        listing::drain(ui, &mut buf, false)?;
        let n = tree.children(nd).len();
        let branching = n > 1;
        if branching && args.depth.is_some_and(|d| level >= d) {
            hidden += n;
            continue;
        }
        prefix.push_str(segment);
        let prefix_chars = base_chars + if segment.is_empty() { 0 } else { 2 };
        if n == 1
            && let Some(c) = tree.children(nd).next()
        {
            stack.push((c, prefix.len(), prefix_chars, Place::Only, level));
            continue;
        }
        let children = sorted_nodes(&mut reader, tree.children(nd).collect())?;
        for (i, c) in children.into_iter().enumerate().rev() {
            stack.push((
                c,
                prefix.len(),
                prefix_chars,
                place(branching, i + 1 == n),
                level + usize::from(branching),
            ));
        }
    }
    listing::drain(ui, &mut buf, true)?;
    if hidden > 0 {
        writeln!(ui.out(), "({hidden} branch(es) below --depth not shown)")?;
    }
    Ok(Outcome::Success)
}

/// Where a node is among its siblings, for its connector.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// Its parent has one child (or it is the only root): no connector.
    Only,
    /// Not the last of several.
    Middle,
    /// The last of several.
    Last,
}

fn place(branching: bool, last: bool) -> Place {
    match (branching, last) {
        (false, _) => Place::Only,
        (true, false) => Place::Middle,
        (true, true) => Place::Last,
    }
}

impl Place {
    /// The connector before the node's mark, and the segment its descendants' prefix adds
    /// (`│ ` or two spaces when it has siblings).
    fn strings(self) -> (&'static str, &'static str) {
        match self {
            Self::Only => ("", ""),
            Self::Middle => ("├─", "│ "),
            Self::Last => ("└─", "  "),
        }
    }
}

/// Nodes (siblings, in file order) in pi's order: by timestamp, as [`sorted_children`] sorts.
fn sorted_nodes(
    reader: &mut TreeReader<'_>,
    mut nodes: Vec<usize>,
) -> Result<Vec<usize>, crate::command_error::CommandError> {
    if nodes.len() < 2 {
        return Ok(nodes);
    }
    let mut timed: Vec<(usize, Option<f64>)> = Vec::with_capacity(nodes.len());
    for &i in &nodes {
        timed.push((i, reader.row(i)?.timestamp.date_ms()));
    }
    timed.sort_by(|a, b| match (a.1, b.1) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => std::cmp::Ordering::Equal,
    });
    nodes.clear();
    nodes.extend(timed.into_iter().map(|(i, _)| i));
    Ok(nodes)
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

/// [`shown`] from a node's outline facts.
fn shown_fast(f: &FactsRef<'_>, filter: Filter, is_leaf: bool, labelled: bool) -> bool {
    let t = f.entry_type();
    if filter == Filter::All {
        return true;
    }
    if t == "usage" {
        return false;
    }
    if t == "message" && f.role == Some("assistant") && !is_leaf && f.tool_only {
        return false;
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
        Filter::UserOnly => t == "message" && f.role == Some("user"),
        Filter::NoTools => {
            let tool_result = t == "message" && f.role == Some("toolResult");
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
    tree: &SessionTree,
    leaf: Option<EntryKey>,
    labels: &HashMap<String, String>,
) -> CommandResult {
    // Written as it is walked, one node at a time (the same bytes as one `json!` object with
    // keys roots, leafId, nodes).
    let mut reader = tree.reader(&session.snap, false);
    let mut root_ids: Vec<Value> = Vec::with_capacity(tree.roots.len());
    for &r in &tree.roots {
        root_ids.push(Value::String(reader.row(r)?.id.to_owned()));
    }
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
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut stack: Vec<usize> = tree.roots.iter().rev().copied().collect();
    while let Some(nd) = stack.pop() {
        let children = sorted_nodes(&mut reader, tree.children(nd).collect())?;
        let mut ids: Vec<String> = Vec::with_capacity(children.len());
        for &c in &children {
            ids.push(reader.row(c)?.id.to_owned());
        }
        let row = reader.row(nd)?;
        if !first {
            buf.push(b',');
        }
        first = false;
        match row.facts {
            Some(f) => {
                buf.extend_from_slice(b"{\"id\":");
                serde_json::to_writer(&mut buf, row.id)?;
                match row.parent_id {
                    ParentId::Id(p) => {
                        buf.extend_from_slice(b",\"parentId\":");
                        serde_json::to_writer(&mut buf, p)?;
                    }
                    ParentId::Null => buf.extend_from_slice(b",\"parentId\":null"),
                    ParentId::Missing => {}
                }
                buf.extend_from_slice(b",\"type\":");
                match f.entry_type {
                    Some(t) => serde_json::to_writer(&mut buf, t)?,
                    None => buf.extend_from_slice(b"null"),
                }
                buf.extend_from_slice(b",\"children\":[");
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        buf.push(b',');
                    }
                    serde_json::to_writer(&mut buf, id)?;
                }
                buf.push(b']');
                if let Some(l) = labels.get(row.id) {
                    buf.extend_from_slice(b",\"label\":");
                    serde_json::to_writer(&mut buf, l)?;
                }
                buf.push(b'}');
            }
            None => {
                let (key, id) = (row.key, row.id.to_owned());
                let ids = ids.into_iter().map(Value::String).collect();
                let o = node_json(session, key, &id, ids, labels)?;
                serde_json::to_writer(&mut buf, &o)?;
            }
        }
        listing::drain(ui, &mut buf, false)?;
        stack.extend(children.into_iter().rev());
    }
    listing::drain(ui, &mut buf, true)?;
    writeln!(ui.out(), "]}}")?;
    Ok(Outcome::Success)
}

/// One node of `tree --json` from its record (and, for a root, its line).
fn node_json(
    session: &Session,
    key: EntryKey,
    id: &str,
    children: Vec<Value>,
    labels: &HashMap<String, String>,
) -> Result<Value, crate::command_error::CommandError> {
    let parent = session
        .snap
        .with_entry(key, |a| a.parent_id.as_ref().map(|p| p.as_str().to_owned()))?
        .flatten();
    let mut o = Map::new();
    o.insert("id".into(), id.into());
    match parent {
        Some(p) => {
            o.insert("parentId".into(), p.into());
        }
        None => {
            // null and absent differ in pi's output; only roots need the JSON.
            let v = session.value(key)?;
            if let Some(p) = v.get("parentId") {
                o.insert("parentId".into(), p.clone());
            }
            o.insert("type".into(), v.get("type").cloned().unwrap_or(Value::Null));
        }
    }
    if !o.contains_key("type") {
        let t = session
            .snap
            .with_entry(key, |a| a.type_name.as_ref().map(|p| p.as_str().to_owned()))?
            .flatten();
        o.insert("type".into(), json!(t));
    }
    o.insert("children".into(), Value::Array(children));
    if let Some(l) = labels.get(id) {
        o.insert("label".into(), l.clone().into());
    }
    Ok(Value::Object(o))
}
