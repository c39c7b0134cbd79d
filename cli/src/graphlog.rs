//! `pisess log --all`: every branch of a session as a graph, like `git log --graph` / `jj log`.
//!
//! Order: the reverse of a pre-order walk of the tree in which each node's children are taken
//! in file order except that the child on the active path (root → leaf) comes last, and the
//! roots likewise. Reversed, that puts the leaf first (top left, marked `@`), and every entry
//! after all of its descendants, so each branch is printed from its tip down to where it
//! leaves its parent.
//!
//! Lanes: each open lane waits for the entry its last printed entry's parent is. In this order
//! the lanes waiting for an entry are always the last ones (the subtrees of its children were
//! printed just before it, one after the other), so the lanes are a stack: an entry joins the
//! tail lanes that wait for it (drawn `├─╯`), or opens a new lane when none does (a branch tip).
//!
//! Invariants: no recursion (the walk uses an explicit stack, so a 1,000,000-deep chain is one
//! lane and one loop); session text is made terminal-safe by `log::line_text`.

use std::collections::HashSet;
use std::io::Write;

use pisess_engine::EntryKey;
use serde_json::Value;

use crate::command_error::{CommandResult, Outcome};
use crate::commands::log::{LogArgs, boundary, entry_json, line_text};
use crate::session_arg::{self as sa, Session};
use crate::ui::{Ui, safe};

/// Runs `pisess log --all`.
pub fn log_all(ui: &mut Ui, session: &Session, args: &LogArgs) -> CommandResult {
    let snap = &session.snap;
    let leaf = snap.leaf(session.key)?;
    let active: HashSet<EntryKey> = match leaf {
        Some(l) => snap.path_to_root(l)?.into_iter().collect(),
        None => HashSet::new(),
    };
    let labels = session.label_map()?;
    let width = sa::width();

    // Pre-order, active child last; printed reversed.
    let order_children = |mut kids: Vec<EntryKey>| {
        if let Some(i) = kids.iter().position(|k| active.contains(k)) {
            let a = kids.remove(i);
            kids.push(a);
        }
        kids
    };
    let mut pre = Vec::new();
    let mut stack: Vec<EntryKey> = order_children(snap.roots(session.key)?);
    stack.reverse();
    while let Some(n) = stack.pop() {
        pre.push(n);
        let mut kids = order_children(snap.children(n)?);
        kids.reverse();
        stack.extend(kids);
    }

    let mut lanes: Vec<EntryKey> = Vec::new();
    let mut shown = 0usize;
    for &n in pre.iter().rev() {
        if args.max_count.is_some_and(|m| shown >= m) {
            break;
        }
        let k = lanes.iter().rev().take_while(|&&w| w == n).count();
        let col = lanes.len() - k;
        let parent = snap.parent(n)?;
        let v = session.value(n)?;
        let wanted = args
            .kind
            .as_ref()
            .is_none_or(|t| sa::entry_type(&v) == t || sa::role(&v) == Some(t.as_str()));
        if !ui.json && k >= 2 {
            let mut join = "│ ".repeat(col);
            join.push_str("├─");
            join.push_str(&"┴─".repeat(k - 2));
            join.push('╯');
            writeln!(ui.out(), "{join}")?;
        }
        if wanted {
            shown += 1;
            let is_leaf = Some(n) == leaf;
            if ui.json {
                let mut o = entry_json(&v, &labels);
                if let Value::Object(m) = &mut o {
                    m.insert("column".into(), col.into());
                    m.insert("leaf".into(), is_leaf.into());
                    m.insert("active".into(), active.contains(&n).into());
                }
                ui.json_line(&o)?;
            } else {
                let lanes_before = "│ ".repeat(col);
                if let Some(b) = boundary(&v) {
                    let through = if k >= 1 { "│ " } else { "" };
                    let mark = ui.paint("35", &format!("──── {} ────", safe(&b)));
                    writeln!(ui.out(), "{lanes_before}{through}{mark}")?;
                }
                let glyph = if is_leaf {
                    ui.paint("1;32", "@")
                } else if active.contains(&n) {
                    "●".to_owned()
                } else {
                    "○".to_owned()
                };
                let text = line_text(ui, &v, &labels, width.saturating_sub(2 * col + 2));
                writeln!(ui.out(), "{lanes_before}{glyph} {text}")?;
            }
        }
        lanes.truncate(col);
        if let Some(p) = parent {
            lanes.push(p);
        }
    }
    Ok(Outcome::Success)
}
