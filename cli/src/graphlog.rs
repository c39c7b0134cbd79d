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
//! Folding: at most `shown_levels(width)` lanes (as `tree` nests: a quarter of the width, 8 to
//! 100) are drawn left of an entry; the outermost others fold into `[+N] ` at the start of the
//! line, and a join of more lanes than that draws the first ones and `[+M]` for the rest. So a
//! fan (N siblings, each a tip, all joining at their parent) prints lines of bounded width,
//! output linear in N, where one lane per sibling made it quadratic. `--json`'s `column` is
//! the lane itself, unfolded.
//!
//! Filtering (`--type`): the graph is that of the entries shown, each linked to its nearest
//! shown ancestor (`git log --graph`'s history simplification), found in a first pass over the
//! rows' facts; the order is the same walk's, restricted to them (the restriction of a
//! pre-order is a pre-order of the simplified tree, the active child still last), so the lanes
//! stay a stack. A branch of hidden entries draws nothing, and a join is drawn where the
//! branches meet among the entries shown. An entry shown whose ancestors are all hidden is
//! followed by a `~` line at its column (as `jj log` marks elided parents). A filter that
//! matches nothing prints nothing, as `log --type` does.
//!
//! Invariants: no recursion (the walk uses an explicit stack, so a 1,000,000-deep chain is one
//! lane and one loop); the tree comes from the store in a few range reads
//! ([`pisess_engine::Snapshot::session_tree`]) and each line from the node's outline row
//! ([`crate::listing`]), the line decoded only when the row cannot show it; session text is made
//! terminal-safe as in `log::line_text`.

use std::io::Write;

use serde_json::Value;

use crate::command_error::{CommandResult, Outcome};
use crate::commands::log::{LogArgs, Shown, boundary, entry_json, line_text};
use crate::commands::tree::shown_levels;
use crate::listing;
use crate::session_arg::{self as sa, Session};
use crate::ui::{Ui, safe};

/// Runs `pisess log --all`.
pub fn log_all(ui: &mut Ui, session: &Session, args: &LogArgs) -> CommandResult {
    let snap = &session.snap;
    let tree = snap.session_tree(session.key)?;
    let n_nodes = tree.len();
    let leaf = snap.leaf(session.key)?;
    let leaf_i = leaf.and_then(|l| tree.index_of(l));
    // The active path is the one pi's context walks: from the leaf, or from the last entry
    // when that has no string id (not drawn: no tree node; `note_undrawn` says so).
    let active: Vec<bool> = match snap.context_leaf(session.key)? {
        Some(l) => tree.marks(&snap.context_runs(session.key, l)?),
        None => vec![false; n_nodes],
    };
    let labels = session.label_map()?;
    let width = sa::width();
    let max_lanes = shown_levels(width);
    let mut reader = tree.reader(snap, ui.json || listing::needs_cold(width));

    // Pre-order, active child last; printed reversed.
    let order_children = |mut kids: Vec<usize>| {
        if let Some(i) = kids.iter().position(|&k| active[k]) {
            let a = kids.remove(i);
            kids.push(a);
        }
        kids
    };
    let mut pre = Vec::with_capacity(n_nodes);
    let mut stack: Vec<usize> = order_children(tree.roots.clone());
    stack.reverse();
    while let Some(n) = stack.pop() {
        pre.push(n);
        let mut kids = order_children(tree.children(n).collect());
        kids.reverse();
        stack.extend(kids);
    }

    // With --type or --since, the graph is that of the entries shown: each linked to its
    // nearest shown ancestor (as `git log --graph` simplifies history), so branches of hidden
    // entries draw nothing. Pre-order lists ancestors first, so one pass finds each node's link.
    let filter = Shown::of(args)?;
    let (keep, link) = if filter.all() {
        (None, Vec::new())
    } else {
        let mut keep = vec![false; n_nodes];
        let mut facts_reader = tree.reader(snap, false);
        for (i, k) in keep.iter_mut().enumerate() {
            let row = facts_reader.row(i)?;
            *k = match filter.row(&row) {
                Some(s) => s,
                None => filter.value(&session.value_or_unreadable(row.key)?),
            };
        }
        let mut link: Vec<Option<usize>> = vec![None; n_nodes];
        for &n in &pre {
            link[n] = tree
                .parent(n)
                .and_then(|p| if keep[p] { Some(p) } else { link[p] });
        }
        (Some(keep), link)
    };
    let parent_of = |n: usize| match &keep {
        None => tree.parent(n),
        Some(_) => link[n],
    };

    let mut lanes: Vec<usize> = Vec::new();
    let mut shown = 0usize;
    let mut buf = Vec::with_capacity(1 << 17);
    // Every entry walked is shown (with --type, the walk is of the entries shown, linked to
    // their nearest shown ancestors), so a join line goes out just before its entry's line.
    for &n in pre
        .iter()
        .rev()
        .filter(|&&n| keep.as_ref().is_none_or(|k| k[n]))
    {
        if args.max_count.is_some_and(|m| shown >= m) {
            break;
        }
        let k = lanes.iter().rev().take_while(|&&w| w == n).count();
        let col = lanes.len() - k;
        let parent = parent_of(n);
        let row = reader.row(n)?;
        // A row without facts is decoded before anything of it is written (as the per-entry
        // walk does; a line that cannot be read stands in as `(unreadable)` in both).
        let mut value = match row.facts {
            Some(_) => None,
            None => Some(session.value_or_unreadable(row.key)?),
        };
        let (lanes_before, lanes_width) = lanes_prefix(col, max_lanes);
        if !ui.json && k >= 2 {
            buf.extend_from_slice(lanes_before.as_bytes());
            buf.extend_from_slice("├─".as_bytes());
            let joined = k - 2;
            buf.extend_from_slice("┴─".repeat(joined.min(max_lanes)).as_bytes());
            if joined > max_lanes {
                buf.extend_from_slice(format!("[+{}]─", joined - max_lanes).as_bytes());
            }
            buf.extend_from_slice("╯\n".as_bytes());
        }
        let is_leaf = Some(n) == leaf_i;
        let mut done = false;
        if let Some(f) = row.facts {
            if ui.json {
                done = listing::write_log_json(
                    &mut buf,
                    &row,
                    &f,
                    &labels,
                    Some((col, is_leaf, active[n])),
                )?;
            } else {
                let glyph = if is_leaf {
                    format!("{} ", ui.paint("1;32", "@"))
                } else if active[n] {
                    "● ".to_owned()
                } else {
                    "○ ".to_owned()
                };
                let through = if k >= 1 { "│ " } else { "" };
                done = listing::write_log_line(
                    &mut buf,
                    ui.color,
                    &row,
                    &f,
                    &labels,
                    width.saturating_sub(lanes_width + 2),
                    Some((&lanes_before, through, &glyph)),
                );
            }
            if done {
                shown += 1;
            }
        }
        if !done {
            listing::drain(ui, &mut buf, true)?;
            let v = match value.take() {
                Some(v) => v,
                None => session.value_or_unreadable(row.key)?,
            };
            shown += 1;
            if ui.json {
                let mut o = entry_json(&v, &labels);
                if let Value::Object(m) = &mut o {
                    m.insert("column".into(), col.into());
                    m.insert("leaf".into(), is_leaf.into());
                    m.insert("active".into(), active[n].into());
                }
                ui.json_line(&o)?;
            } else {
                if let Some(b) = boundary(&v) {
                    let through = if k >= 1 { "│ " } else { "" };
                    let mark = ui.paint("35", &format!("──── {} ────", safe(&b)));
                    writeln!(ui.out(), "{lanes_before}{through}{mark}")?;
                }
                let glyph = if is_leaf {
                    ui.paint("1;32", "@")
                } else if active[n] {
                    "●".to_owned()
                } else {
                    "○".to_owned()
                };
                let text = line_text(ui, &v, &labels, width.saturating_sub(lanes_width + 2));
                writeln!(ui.out(), "{lanes_before}{glyph} {text}")?;
            }
        }
        if !ui.json && parent.is_none() && tree.parent(n).is_some() {
            // Shown without a shown ancestor, though it has hidden ones: marked as `jj log`
            // marks elided parents, so that the next line at this column is not read as its
            // parent.
            listing::drain(ui, &mut buf, true)?;
            writeln!(ui.out(), "{lanes_before}~")?;
        }
        listing::drain(ui, &mut buf, false)?;
        lanes.truncate(col);
        if let Some(p) = parent {
            lanes.push(p);
        }
    }
    listing::drain(ui, &mut buf, true)?;
    if shown == 0 {
        crate::commands::log::warn_unknown_type(args);
    }
    if !ui.json {
        crate::commands::tree::note_undrawn(ui, session, n_nodes)?;
    }
    Ok(Outcome::Success)
}

/// The lanes left of column `col` as drawn, and their width in characters: `│ ` per lane, or,
/// with more than `shown` lanes, `[+N] ` for the N outermost and `│ ` for the `shown` others.
fn lanes_prefix(col: usize, shown: usize) -> (String, usize) {
    if col <= shown {
        return ("│ ".repeat(col), 2 * col);
    }
    let text = format!("[+{}] {}", col - shown, "│ ".repeat(shown));
    let chars = text.chars().count();
    (text, chars)
}
