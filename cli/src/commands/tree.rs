//! `pisess tree`: the session tree as pi's `/tree` draws it.
//!
//! Children are ordered as pi's `getTree` orders them: by timestamp, oldest first, a stable
//! sort over file order (entries whose timestamps do not parse keep their file order relative
//! to their neighbours). The walk is an explicit stack, so a 1,000,000-deep chain is fine.
//!
//! The filter is applied before the layout, as pi's `/tree` applies it: the shown entries are
//! laid out as a tree of their own, each under its nearest shown ancestor ([`ShownTree`]).
//!
//! The tree comes from the store's outline and parent links in a few range reads, which
//! entries the filter shows from every block's hot frame, and each line from the node's
//! outline row ([`crate::listing`]); a node the outline cannot show is decoded from its line,
//! so the output is the per-entry rendering's, byte for byte.

use std::io::{IoSlice, Write};
use std::sync::Mutex;

use clap::ValueEnum;
use pisess_engine::agent::js::date_ms;
use pisess_engine::outline::{
    BLOCK_ROWS, FactsRef, OutlineBlock, ParentId, SessionTree, TreeReader,
};
use pisess_engine::{EntryKey, ReadCache, StoreError};
use rayon::prelude::*;
use serde_json::{Map, Value, json};

use crate::command_error::{CommandResult, Outcome};
use crate::listing::{self, Item};
use crate::session_arg::{self as sa, Session, open_session_read_with};
use crate::ui::{Ui, safe};

/// Show the whole session tree as pi's /tree draws it.
///
/// Active path and leaf marked, labels shown, linear runs drawn without indentation, siblings
/// in pi's order: the one on the active path first, then the others oldest first (likewise
/// roots: the active one first, then file order).
///
/// Markers: `@` the leaf, `*` an entry on the active path (root → leaf), `o` any other entry.
/// Indentation grows only where an entry has several children. A filter's entries are laid
/// out as pi lays them out: each under its nearest shown ancestor, several shown roots flush
/// left. Nesting deeper than a quarter of the screen's width is folded: `[+N]` at the start of
/// a line stands for its N outermost levels.
///
/// With --json: one object `{roots, leafId, nodes}` whose nodes `{id, parentId, type, children,
/// label?}` are listed depth-first, children in pi's order (the shape of pi's `getTree`). A
/// root where pisess cut a parent cycle (pi hangs on one) keeps its parentId as written and
/// has `cycleCut: true`. An entry without a string id is listed as pi lists it (`id`,
/// `parentId`, `type` as written, `null` among its parent's children); the drawing leaves it
/// out and says so on stderr.
/// --filter and --depth apply to the text output only.
#[derive(Debug, clap::Args)]
pub struct TreeArgs {
    /// The session: a file, a session id or unique prefix, or @latest (the default: the
    /// session `pi -c` continues in this folder, as `git log` reads the current repository).
    #[arg(default_value = "@latest")]
    pub session: String,
    /// Which entries to show (pi's /tree filter modes).
    #[arg(long, value_enum, default_value_t = Filter::Default)]
    pub filter: Filter,
    /// Show at most N levels of branch nesting (0: from the root to the first branch point;
    /// the branches left out are counted).
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
    /// Everything but what pi's /tree never lists: `usage` entries and assistant messages
    /// that only call tools (unless the leaf, or stopped by an error).
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
    let times: Vec<Option<f64>> = nodes.iter().map(|n| n.time).collect();
    let order = pi_order(&times);
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// The order pi's `getTree` gives siblings with these times (`None`: a timestamp that does not
/// parse), as indices into `times`: `children.sort((a, b) => new Date(a) - new Date(b))`.
/// While every time is known that is a stable sort; an unknown one makes the difference `NaN`,
/// and then only V8's own algorithm gives pi's order (see `pisess_engine::agent::timsort`).
fn pi_order(times: &[Option<f64>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..times.len()).collect();
    if times.iter().all(Option::is_some) {
        order.sort_by(|&a, &b| {
            let (x, y) = (times[a].unwrap_or_default(), times[b].unwrap_or_default());
            x.total_cmp(&y)
        });
    } else {
        pisess_engine::agent::timsort::sort_like_v8(&mut order, |a, b| {
            times[a].unwrap_or(f64::NAN) - times[b].unwrap_or(f64::NAN)
        });
    }
    order
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
    // A timestamp that is no string (a number, `true`, `null`) is read from the line, as
    // `new Date` reads it.
    let time = match ts {
        Some(t) => date_ms(Some(&Value::String(t))).as_f64(),
        None => date_ms(session.snap.entry_value(k)?.get("timestamp")).as_f64(),
    };
    Ok(Node {
        key: k,
        id: id.unwrap_or_default(),
        time,
    })
}

/// Runs `pisess tree`.
///
/// The tree and the order of its lines come from the store's block headers and run starts
/// ([`pisess_engine::Snapshot::session_tree`]) and, for the filter, every block's hot frame;
/// then batches of lines are decoded and rendered on the rayon pool and written in order.
/// Only nodes the outline cannot show are decoded from their lines.
pub fn cmd_tree(ui: &mut Ui, args: &TreeArgs) -> CommandResult {
    // Every page is read about once and what was decoded is kept: redb keeps no copy
    // (`ReadCache::None`: ~20 MB less fresh memory for the 1 GiB benchmark session).
    let session = open_session_read_with(&args.session, ReadCache::None)?;
    let (outcome, nodes) = draw(ui, args, &session)?;
    // `--json` lists them, as pi's tree does.
    if !ui.json {
        note_undrawn(ui, &session, nodes)?;
    }
    Ok(session.finish(ui, outcome))
}

/// After a drawing of a session's `nodes` tree nodes (`tree`, `log --all`): says on stderr how
/// many entries it left out, those without a string id, which the store's tree does not hold
/// (pi's tree lists them; so does `tree --json`).
pub(crate) fn note_undrawn(
    ui: &mut Ui,
    session: &Session,
    nodes: usize,
) -> Result<(), crate::command_error::CommandError> {
    let left_out = session.record.entries.saturating_sub(nodes as u64);
    if left_out == 0 {
        return Ok(());
    }
    // After the drawing: stdout is buffered, stderr is not.
    ui.flush()?;
    let (entries, are, them, their, lines) = if left_out == 1 {
        ("entry", "is", "it", "its", "line")
    } else {
        ("entries", "are", "them", "their", "lines")
    };
    eprintln!(
        "note: {left_out} {entries} without a string id {are} not drawn (pi lists {them}; so \
         does `tree --json`); `pisess check {}` names {their} {lines}",
        safe(&session.record.path),
    );
    Ok(())
}

/// Writes the tree (or its `--json`); also gives the number of its nodes.
fn draw(
    ui: &mut Ui,
    args: &TreeArgs,
    session: &Session,
) -> Result<(Outcome, usize), crate::command_error::CommandError> {
    let labels = session.label_map()?;
    let leaf = session.snap.leaf(session.key)?;
    // The drawing reads every block's hot frame for the filter (`shown_nodes`) and keeps the
    // blocks when there are at most KEEP_BLOCKS: those are read on the pool while the tree
    // is built. (A session that may have more blocks than that is not read early: its blocks
    // would be held until the filter pass ends, then dropped.)
    let kept_at_most = session.record.entries <= (KEEP_BLOCKS * BLOCK_ROWS) as u64;
    let (tree, early) =
        if kept_at_most && !ui.json && args.depth.is_none() && !listing::needs_cold(sa::width()) {
            tree_reading_blocks(session, args.filter, leaf, &labels)?
        } else {
            (session.snap.session_tree(session.key)?, Vec::new())
        };
    let nodes = tree.len();
    draw_tree(ui, args, session, &tree, &labels, leaf, early).map(|o| (o, nodes))
}

/// A block read for the drawing: its nodes' filter verdicts ([`block_shown`]) and the block.
type FilteredBlock = (Vec<Option<bool>>, OutlineBlock);

/// The session's tree, and its first [`KEEP_BLOCKS`] blocks (in order) read, decoded and
/// filtered on the pool while the tree is built: each block's header names it before the
/// tree is whole, and a block needs nothing of the tree to be filtered. (The 1 GiB benchmark
/// session: the tree and the filter pass took ~23 ms instead of ~28.)
fn tree_reading_blocks(
    session: &Session,
    filter: Filter,
    leaf: Option<EntryKey>,
    labels: &sa::LabelMap,
) -> Result<(SessionTree, Vec<FilteredBlock>), crate::command_error::CommandError> {
    let s = session.key;
    let snap = &session.snap;
    let read: Mutex<Vec<(usize, Result<FilteredBlock, StoreError>)>> = Mutex::new(Vec::new());
    let mut n = 0usize;
    let tree = rayon::scope(|scope| {
        let read = &read;
        snap.session_tree_each(s, |first| {
            let b = n;
            n += 1;
            if b < KEEP_BLOCKS {
                scope.spawn(move |_| {
                    let got = snap
                        .outline_block(s, first, false)
                        .map(|blk| (block_shown(&blk, filter, leaf, labels), blk));
                    read.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((b, got));
                });
            }
        })
    });
    let mut read = read
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // A failed read ends the command here, before anything else reads the store: after a
    // damaged page, redb fails every read with "a previous I/O error" ([`telling_error`]).
    if tree.is_err() || read.iter().any(|r| r.1.is_err()) {
        let blocks = read.into_iter().filter_map(|(_, got)| got.err());
        return Err(telling_error(tree.err().into_iter().chain(blocks)).into());
    }
    let tree = tree?;
    read.sort_unstable_by_key(|r| r.0);
    let blocks = read.into_iter().map(|r| r.1).collect::<Result<_, _>>()?;
    Ok((tree, blocks))
}

/// Of errors met by reads on several threads, the one that says what is wrong: the first
/// that shows damage, else the first. (A damaged page fails one read; redb then fails every
/// later read with "a previous I/O error", which would hide the damage and the advice that
/// goes with it.) `errors` is never empty.
fn telling_error(errors: impl Iterator<Item = StoreError>) -> StoreError {
    let mut first = None;
    for e in errors {
        if e.is_damage() {
            return e;
        }
        first.get_or_insert(e);
    }
    first.unwrap_or_else(|| StoreError::Inconsistent("a read failed without an error".into()))
}

/// The filter's verdict on each row of a block: `None` where the row has no facts and its
/// line must be decoded.
fn block_shown(
    blk: &OutlineBlock,
    filter: Filter,
    leaf: Option<EntryKey>,
    labels: &sa::LabelMap,
) -> Vec<Option<bool>> {
    (0..blk.len())
        .map(|j| {
            let row = blk.row(j);
            let f = row.facts?;
            // Only `labeled` asks (a hash lookup per row saved for the others).
            let labelled = filter == Filter::Labeled && labels.get(row.id).is_some();
            Some(shown_fast(&f, filter, Some(row.key) == leaf, labelled))
        })
        .collect()
}

/// [`draw`] of a tree read; `early` holds the blocks [`tree_reading_blocks`] read, if any.
fn draw_tree(
    ui: &mut Ui,
    args: &TreeArgs,
    session: &Session,
    tree: &SessionTree,
    labels: &sa::LabelMap,
    leaf: Option<EntryKey>,
    early: Vec<FilteredBlock>,
) -> CommandResult {
    let leaf_i = leaf.and_then(|l| tree.index_of(l));
    if ui.json {
        return write_json(ui, session, tree, leaf, labels);
    }
    if tree.is_empty() && session.record.entries == 0 {
        // Nothing to draw; say why rather than print nothing (`--json` gives `[]`, as pi).
        eprintln!(
            "session {} ({}) has no entries: the file holds only its header",
            safe(&session.record.session_id),
            safe(&session.record.path)
        );
        return Ok(Outcome::Success);
    }
    if tree.is_empty() {
        // Entries, none of them with a string id: `cmd_tree`'s note says so.
        return Ok(Outcome::Success);
    }
    let active: Vec<bool> = match leaf {
        Some(l) => tree.marks(&session.snap.path_runs(l)?),
        None => vec![false; tree.len()],
    };
    let width = sa::width();
    let cold = listing::needs_cold(width);
    // Read from every block's hot frame first: pi lays out what its filter shows. When the
    // lines need no cold frame and all of them are drawn, the blocks are kept for them rather
    // than read again, up to KEEP_BLOCKS of them (memory grows with the session's size).
    let keep = !cold && args.depth.is_none() && tree.blocks() <= KEEP_BLOCKS;
    let (shown, kept) = shown_nodes(session, tree, args.filter, leaf_i, labels, keep, early)?;
    let (lines, prefixes, hidden) = {
        let mut reader = tree.reader(&session.snap, cold);
        let layout = Layout {
            active: &active,
            shown: &shown,
            depth: args.depth,
            shown_levels: shown_levels(width),
        };
        order(tree, &mut reader, &layout)?
    };
    let marks = [ui.paint("1;32", "@"), ui.paint("32", "*"), "o".to_owned()];
    let style = LineStyle {
        color: ui.color,
        width,
        leaf: leaf_i,
        active: &active,
        labels,
        marks: &marks,
        prefixes: &prefixes,
    };
    // Chunks of lines, cut where the block changes, rendered a batch at a time into buffers
    // that are kept (allocating a batch's worth of fresh memory each time cost page faults).
    let chunks = chunk_lines(tree, &lines);
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::new()).collect();
    let mut done = 0;
    while done < chunks.len() {
        let todo = &chunks[done..(done + BATCH).min(chunks.len())];
        done += todo.len();
        let mut wanted: Vec<usize> = todo
            .iter()
            .flat_map(|c| {
                lines[c.clone()]
                    .iter()
                    .map(|l| tree.block_of(l.node as usize).0)
            })
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        // Each block read and decoded on the pool (the snapshot is shared by its threads).
        let s = tree.session();
        let snap = &session.snap;
        let read: Vec<OutlineBlock> = if kept.is_empty() {
            wanted
                .par_iter()
                .map(|&b| snap.outline_block(s, tree.block_first(b), cold))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        let blocks: Vec<&OutlineBlock> = if kept.is_empty() {
            read.iter().collect()
        } else {
            wanted.iter().map(|&b| &kept[b]).collect()
        };
        let items: Vec<Vec<Item>> = todo
            .par_iter()
            .zip(bufs.par_iter_mut())
            .map(|(c, buf)| render_lines(tree, &lines[c.clone()], &wanted, &blocks, &style, buf))
            .collect();
        for ((c, items), buf) in todo.iter().zip(items).zip(&bufs) {
            // A line is its prefix (shared by the lines of a branch, up to hundreds of spaces
            // deep in a session) and its rendered rest: both are handed to `writev` as they
            // are, so the prefixes are never copied.
            let mut slices: Vec<IoSlice<'_>> = Vec::with_capacity(2 * items.len() + 1);
            let mut from = 0;
            let mut upto = 0;
            for (item, line) in items.iter().zip(&lines[c.clone()]) {
                match *item {
                    Item::Shown(end) => {
                        let base = prefixes[line.prefix as usize].text.as_bytes();
                        if !base.is_empty() {
                            if upto > from {
                                slices.push(IoSlice::new(&buf[from..upto]));
                            }
                            slices.push(IoSlice::new(base));
                            from = upto;
                        }
                        upto = end;
                    }
                    Item::Left => {}
                    Item::Decode => {
                        if upto > from {
                            slices.push(IoSlice::new(&buf[from..upto]));
                        }
                        listing::write_all_vectored(ui.out(), &mut slices)?;
                        slices.clear();
                        from = upto;
                        decoded_line(ui, session, tree, line, &style)?;
                    }
                }
            }
            if upto > from {
                slices.push(IoSlice::new(&buf[from..upto]));
            }
            listing::write_all_vectored(ui.out(), &mut slices)?;
        }
    }
    if hidden > 0 {
        writeln!(ui.out(), "({hidden} branch(es) below --depth not shown)")?;
    }
    Ok(Outcome::Success)
}

/// One line of `tree`: a node, the index of its parent's child prefix, and its place.
#[derive(Debug, Clone, Copy)]
struct Line {
    node: u32,
    prefix: u32,
    at: Place,
}

/// What [`order`] lays out: the nodes on the active path, the nodes the filter shows, and the
/// `--depth` and prefix limits.
struct Layout<'a> {
    active: &'a [bool],
    shown: &'a [bool],
    depth: Option<usize>,
    shown_levels: usize,
}

/// The lines of the tree in printing order, the prefixes they refer to, and how many branches
/// `--depth` left out.
///
/// As pi's `/tree` does it: the whole tree is put in `flattenTree`'s order (depth first, the
/// sibling on the active path first, the others by time; roots likewise, the others in file
/// order), the filter keeps some of its nodes, and those are laid out again as a tree of
/// their own (`recalculateVisualStructure`): each hangs from its nearest shown ancestor, and
/// its connector and nesting come from its shown siblings alone. Several shown roots are
/// drawn flush left without a connector; the entries below a root that does not branch are
/// indented one level. Prefixes show at most `shown_levels` levels of nesting (see [`Prefix`]).
fn order(
    tree: &SessionTree,
    reader: &mut TreeReader<'_>,
    layout: &Layout<'_>,
) -> Result<(Vec<Line>, Vec<Prefix>, usize), crate::command_error::CommandError> {
    let shown_tree = ShownTree::new(tree, reader, layout.active, layout.shown)?;
    let mut prefixes: Vec<Prefix> = vec![Prefix::default()];
    let mut lines = Vec::with_capacity(shown_tree.kids.len());
    // (node, parent's child prefix, place, nesting level)
    let mut stack: Vec<(u32, u32, Place, usize)> = Vec::new();
    let roots = shown_tree.children(None);
    let many_roots = roots.len() > 1;
    let root_place = if many_roots { Place::Root } else { Place::Only };
    for &r in roots.iter().rev() {
        stack.push((r, 0, root_place, usize::from(many_roots)));
    }
    let mut hidden = 0usize;
    while let Some((nd, cp, at, level)) = stack.pop() {
        lines.push(Line {
            node: nd,
            prefix: cp,
            at,
        });
        let children = shown_tree.children(Some(nd));
        let n = children.len();
        if n == 0 {
            continue;
        }
        let branching = n > 1;
        if branching && layout.depth.is_some_and(|d| level >= d) {
            hidden += n;
            continue;
        }
        // This node's child prefix: its parent's plus its segment. A root among several adds
        // one only when it does not branch (its children's connectors start at the margin).
        let child_cp = match at {
            Place::Only => cp,
            Place::Root if branching => cp,
            _ => {
                let next = prefixes[cp as usize].nested(at.strings().1, layout.shown_levels);
                prefixes.push(next);
                u32::try_from(prefixes.len() - 1)
                    .map_err(|_| anyhow::anyhow!("too many prefixes"))?
            }
        };
        if !branching {
            stack.push((children[0], child_cp, Place::Only, level));
            continue;
        }
        for (i, &c) in children.iter().enumerate().rev() {
            stack.push((c, child_cp, place(true, i + 1 == n), level + 1));
        }
    }
    Ok((lines, prefixes, hidden))
}

/// The nodes a filter shows, as a tree of their own: each hangs from its nearest shown
/// ancestor, and siblings keep pi's `flattenTree` order.
///
/// Invariant: `start[p]..start[p + 1]` indexes `kids`, the shown children of node `p` in
/// flattenTree order (`p == tree.len()`: the shown roots); `kids` holds each shown node once.
struct ShownTree {
    start: Vec<u32>,
    kids: Vec<u32>,
}

impl ShownTree {
    /// Walks the whole tree once (an explicit stack) and attaches each shown node.
    fn new(
        tree: &SessionTree,
        reader: &mut TreeReader<'_>,
        active: &[bool],
        shown: &[bool],
    ) -> Result<Self, crate::command_error::CommandError> {
        let n = tree.len();
        let top = u32::try_from(n).map_err(|_| anyhow::anyhow!("too many entries"))?;
        // (nearest shown ancestor, or `top` for none; node), shown nodes only, in order.
        let mut hung: Vec<(u32, u32)> = Vec::new();
        let mut roots = tree.roots.clone();
        on_path_first(&mut roots, |&r| active.get(r) == Some(&true));
        let mut stack: Vec<(usize, u32)> = roots.into_iter().rev().map(|r| (r, top)).collect();
        while let Some((nd, above)) = stack.pop() {
            #[allow(clippy::cast_possible_truncation)]
            let here = if shown[nd] {
                hung.push((above, nd as u32));
                nd as u32
            } else {
                above
            };
            match tree.children(nd).len() {
                0 => {}
                1 => stack.extend(tree.children(nd).map(|c| (c, here))),
                _ => {
                    let mut children = sorted_nodes(reader, tree.children(nd).collect())?;
                    on_path_first(&mut children, |&c| active.get(c) == Some(&true));
                    stack.extend(children.into_iter().rev().map(|c| (c, here)));
                }
            }
        }
        // A counting sort by parent keeps each parent's children in walk order.
        let mut start = vec![0u32; n + 2];
        for &(p, _) in &hung {
            start[p as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut next = start.clone();
        let mut kids = vec![0u32; hung.len()];
        for &(p, c) in &hung {
            kids[next[p as usize] as usize] = c;
            next[p as usize] += 1;
        }
        Ok(Self { start, kids })
    }

    /// The shown children of `node` (`None`: the shown roots).
    fn children(&self, node: Option<u32>) -> &[u32] {
        let p = node.map_or(self.start.len() - 2, |p| p as usize);
        &self.kids[self.start[p] as usize..self.start[p + 1] as usize]
    }
}

/// Which nodes `filter` shows (pi's `applyFilter`), from each block's outline facts (hot
/// frames only), the blocks read on the pool; a node the outline cannot show is decoded from
/// its line. With `keep`, also every block read, by block number (else none).
fn shown_nodes(
    session: &Session,
    tree: &SessionTree,
    filter: Filter,
    leaf: Option<usize>,
    labels: &sa::LabelMap,
    keep: bool,
    early: Vec<FilteredBlock>,
) -> Result<(Vec<bool>, Vec<OutlineBlock>), crate::command_error::CommandError> {
    let s = tree.session();
    let snap = &session.snap;
    let leaf_key = leaf.map(|l| tree.key(l));
    // The blocks read early, then the others.
    let mut early: Vec<Option<FilteredBlock>> = early.into_iter().map(Some).collect();
    early.resize_with(tree.blocks(), || None);
    // Per block: Some(shown) from the facts, None where the line must be decoded.
    #[allow(clippy::type_complexity)]
    let per_block: Vec<Result<(Vec<Option<bool>>, Option<OutlineBlock>), StoreError>> = early
        .into_par_iter()
        .enumerate()
        .map(|(b, got)| {
            let (mut shown, blk) = match got {
                Some(got) => got,
                None => {
                    let blk = snap.outline_block(s, tree.block_first(b), false)?;
                    (block_shown(&blk, filter, leaf_key, labels), blk)
                }
            };
            // One verdict per node of the block (a block shorter than its header's keys
            // has its missing rows decoded from their lines).
            shown.resize(tree.block_nodes(b).len(), None);
            Ok((shown, keep.then_some(blk)))
        })
        .collect();
    if per_block.iter().any(Result::is_err) {
        return Err(telling_error(per_block.into_iter().filter_map(Result::err)).into());
    }
    let mut facts: Vec<Option<bool>> = Vec::with_capacity(tree.len());
    let mut kept = Vec::with_capacity(if keep { per_block.len() } else { 0 });
    for (v, blk) in per_block.into_iter().flatten() {
        facts.extend(v);
        kept.extend(blk);
    }
    let mut shown = Vec::with_capacity(facts.len());
    for (nd, v) in facts.into_iter().enumerate() {
        shown.push(match v {
            Some(b) => b,
            None => {
                let key = tree.key(nd);
                let labelled = filter == Filter::Labeled && labels.get(&session.id(key)?).is_some();
                let v = session.value_or_unreadable(key)?;
                self::shown(&v, filter, Some(nd) == leaf, labelled)
            }
        });
    }
    Ok((shown, kept))
}

/// `nodes` with the first one `on_path` holds for (at most one of siblings: the one on the
/// active or exported path) moved first, the others kept in their order: pi's `flattenTree`
/// (the `/tree` component's and the HTML export's) draws that branch first.
pub(crate) fn on_path_first<T>(nodes: &mut [T], on_path: impl Fn(&T) -> bool) {
    if let Some(i) = nodes.iter().position(on_path) {
        nodes[..=i].rotate_right(1);
    }
}

/// How many levels of nesting a line's prefix shows on a screen `width` characters wide: a
/// quarter of the width in two-character levels, at least 8 and at most 100. Deeper levels are
/// folded (see [`Prefix`]), so a "comb" (a side branch at every step of a long main line)
/// prints in space proportional to its entries instead of its depth squared. `log --all` draws
/// as many lanes left of an entry and folds the rest the same way.
pub(crate) fn shown_levels(width: usize) -> usize {
    (width / 4).clamp(8, 100)
}

/// The prefix of the lines below a branch point: one two-character segment per level of
/// nesting (`│ ` where the branch's parent has later children, else two spaces).
///
/// Invariant: `text` is `[+N] ` followed by at most `shown_levels` segments, where N (`folded`)
/// counts the outermost levels left out, or only the segments when none are; `tail` is the byte
/// offset where the segments start; `chars` is `text`'s width in characters.
#[derive(Debug, Default)]
struct Prefix {
    text: String,
    chars: usize,
    folded: usize,
    tail: usize,
}

impl Prefix {
    /// The prefix one level deeper, adding `segment` (two characters) at the end and folding the
    /// outermost shown level into the count when more than `shown_levels` would show.
    fn nested(&self, segment: &str, shown_levels: usize) -> Self {
        let segments = &self.text[self.tail..];
        let shown = segments.chars().count() / 2;
        let (folded, kept) = if shown < shown_levels {
            (self.folded, segments)
        } else {
            // Drop the outermost segment: its glyph and the space after it.
            let cut = segments
                .char_indices()
                .nth(2)
                .map_or(segments.len(), |(i, _)| i);
            (self.folded + 1, &segments[cut..])
        };
        let mut text = if folded > 0 {
            format!("[+{folded}] ")
        } else {
            String::new()
        };
        let tail = text.len();
        text.push_str(kept);
        text.push_str(segment);
        let chars = text.chars().count();
        Self {
            text,
            chars,
            folded,
            tail,
        }
    }
}

/// Ranges of `lines` of about [`CHUNK_LINES`] lines, cut where the block changes.
fn chunk_lines(tree: &SessionTree, lines: &[Line]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev = None;
    for (i, l) in lines.iter().enumerate() {
        let b = tree.block_of(l.node as usize).0;
        if i - start >= CHUNK_LINES && prev != Some(b) {
            out.push(start..i);
            start = i;
        }
        prev = Some(b);
    }
    if start < lines.len() {
        out.push(start..lines.len());
    }
    out
}

/// Blocks (of 1,024 entries) `tree` keeps decoded between reading the filter and drawing
/// the lines, at most: the 1 GiB benchmark session's 399 blocks took 62 MB more memory and
/// saved 13 % of its time (120.4 vs 139.1 ms median). A larger session reads them again.
const KEEP_BLOCKS: usize = 512;

/// Lines a chunk holds at least (about a block).
const CHUNK_LINES: usize = 1024;
/// Chunks rendered at a time.
const BATCH: usize = 8;

/// What every line's rendering needs.
struct LineStyle<'a> {
    color: bool,
    width: usize,
    leaf: Option<usize>,
    active: &'a [bool],
    labels: &'a sa::LabelMap,
    marks: &'a [String; 3],
    prefixes: &'a [Prefix],
}

impl LineStyle<'_> {
    fn mark(&self, node: usize) -> &str {
        if Some(node) == self.leaf {
            &self.marks[0]
        } else if self.active[node] {
            &self.marks[1]
        } else {
            &self.marks[2]
        }
    }
}

/// Renders a chunk's lines into `bytes` (cleared first); says what became of each line.
fn render_lines(
    tree: &SessionTree,
    lines: &[Line],
    wanted: &[usize],
    blocks: &[&OutlineBlock],
    st: &LineStyle<'_>,
    bytes: &mut Vec<u8>,
) -> Vec<Item> {
    bytes.clear();
    let mut out = Rendered {
        bytes,
        items: Vec::with_capacity(lines.len()),
    };
    for l in lines {
        let nd = l.node as usize;
        let (b, j) = tree.block_of(nd);
        let Some(blk) = wanted.binary_search(&b).ok().map(|i| blocks[i]) else {
            out.items.push(Item::Decode);
            continue;
        };
        if j >= blk.len() {
            out.items.push(Item::Decode);
            continue;
        }
        let row = blk.row(j);
        let Some(f) = row.facts else {
            out.items.push(Item::Decode);
            continue;
        };
        let label = st.labels.get(row.id);
        // The prefix is written by the caller (see `cmd_tree`).
        let chars = st.prefixes[l.prefix as usize].chars;
        let connector = l.at.strings().0;
        let line_chars = chars + if connector.is_empty() { 0 } else { 2 };
        let written = listing::write_tree_line(
            out.bytes,
            st.color,
            ("", connector),
            line_chars,
            st.mark(nd),
            &row,
            &f,
            label,
            st.width,
        );
        out.items.push(if written {
            Item::Shown(out.bytes.len())
        } else {
            Item::Decode
        });
    }
    out.items
}

/// A chunk being rendered.
struct Rendered<'b> {
    bytes: &'b mut Vec<u8>,
    items: Vec<Item>,
}

/// A line the outline cannot show, from the node's decoded line (the per-entry rendering).
fn decoded_line(
    ui: &mut Ui,
    session: &Session,
    tree: &SessionTree,
    l: &Line,
    st: &LineStyle<'_>,
) -> CommandResult {
    let nd = l.node as usize;
    let key = tree.key(nd);
    let id = session.id(key)?;
    // One entry whose JSON cannot be read (nested deeper than pisess reads) does not hide the
    // rest of the tree: it is drawn as `(unreadable)`, and named on stderr at the end.
    let v = session.value_or_unreadable(key)?;
    let label = st.labels.get(&id);
    // The label's width on screen is that of its text: the colour's escapes take none.
    let label_text = label.map(|l| format!("[{}]", safe(l)));
    let label_chars = label_text.as_ref().map_or(0, |t| 1 + t.chars().count());
    let label = label_text
        .map(|t| format!(" {}", ui.paint("1;35", &t)))
        .unwrap_or_default();
    let Prefix {
        text: base, chars, ..
    } = &st.prefixes[l.prefix as usize];
    let connector = l.at.strings().0;
    let line_chars = chars + if connector.is_empty() { 0 } else { 2 };
    let text = format!("{} {}", sa::kind(&v), sa::summary(&v));
    let room = st
        .width
        .saturating_sub(line_chars + 12 + label_chars)
        .max(20);
    let idp = ui.paint("33", &safe(sa::short_id(&id)));
    writeln!(
        ui.out(),
        "{base}{connector}{} {idp}{label} {}",
        st.mark(nd),
        safe(&sa::clip(&text, room))
    )?;
    Ok(Outcome::Success)
}

/// Where a node is among its siblings, for its connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Its parent has one child (or it is the only root): no connector.
    Only,
    /// Not the last of several.
    Middle,
    /// The last of several.
    Last,
    /// One of several roots: no connector; the entries below it are indented one level
    /// when it does not branch (pi's roots hang from a virtual root whose connectors it
    /// leaves out).
    Root,
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
            Self::Root => ("", "  "),
        }
    }
}

/// Nodes (siblings, in file order) in pi's order: by timestamp, as [`sorted_children`] sorts
/// (the times from `TreeReader::date_ms`).
fn sorted_nodes(
    reader: &mut TreeReader<'_>,
    mut nodes: Vec<usize>,
) -> Result<Vec<usize>, crate::command_error::CommandError> {
    if nodes.len() < 2 {
        return Ok(nodes);
    }
    let mut timed: Vec<(usize, Option<f64>)> = Vec::with_capacity(nodes.len());
    for &i in &nodes {
        timed.push((i, reader.date_ms(i)?));
    }
    let times: Vec<Option<f64>> = timed.iter().map(|t| t.1).collect();
    nodes.clear();
    nodes.extend(pi_order(&times).into_iter().map(|k| timed[k].0));
    Ok(nodes)
}

/// pi's /tree filter for one entry.
fn shown(v: &Value, filter: Filter, is_leaf: bool, labelled: bool) -> bool {
    passes(
        filter,
        sa::entry_type(v),
        sa::role(v),
        is_leaf,
        labelled,
        || {
            let m = &v["message"];
            let has_text = !sa::message_text(m).trim().is_empty();
            let stop = m.get("stopReason").and_then(Value::as_str);
            let error = stop.is_some_and(|s| s != "stop" && s != "toolUse");
            !has_text && !error
        },
    )
}

/// [`shown`] from a node's outline facts.
fn shown_fast(f: &FactsRef<'_>, filter: Filter, is_leaf: bool, labelled: bool) -> bool {
    passes(filter, f.entry_type(), f.role, is_leaf, labelled, || {
        f.tool_only
    })
}

/// pi's /tree filter over an entry's type and role; `quiet_reply` says whether an assistant
/// message has no text and did not fail (asked only for an assistant message off the leaf).
fn passes(
    filter: Filter,
    t: &str,
    role: Option<&str>,
    is_leaf: bool,
    labelled: bool,
    quiet_reply: impl FnOnce() -> bool,
) -> bool {
    // Hidden before the mode applies, `all` included (pi's `applyFilter`).
    if t == "usage" {
        return false;
    }
    if t == "message" && role == Some("assistant") && !is_leaf && quiet_reply() {
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
        Filter::UserOnly => t == "message" && role == Some("user"),
        Filter::NoTools => {
            let tool_result = t == "message" && role == Some("toolResult");
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
    labels: &sa::LabelMap,
) -> CommandResult {
    // Written as it is walked, one node at a time (the same bytes as one `json!` object with
    // keys roots, leafId, nodes).
    let mut reader = tree.reader(&session.snap, false);
    let loose = Loose::of(session, tree)?;
    // The roots in file order: the tree's, and the loose entries that are roots.
    let mut roots: Vec<JsonNode> = tree.roots.iter().map(|&r| JsonNode::Node(r)).collect();
    let loose_roots = (0..loose.entries.len()).filter(|&j| loose.entries[j].parent.is_none());
    roots.extend(loose_roots.map(JsonNode::Loose));
    roots.sort_by_key(|it| it.key(tree, &loose));
    let mut root_ids: Vec<Value> = Vec::with_capacity(roots.len());
    for it in &roots {
        root_ids.push(it.id(&mut reader, &loose)?);
    }
    // pi's `getLeafId()`: the last entry's `id` as written (left out when it has none).
    let leaf_id = match leaf {
        Some(l) => Some(json!(session.id(l)?)),
        None if session.record.entries == 0 => Some(Value::Null),
        None => match session.snap.last_entry(session.key)? {
            Some(last) => session.value_or_unreadable(last)?.get("id").cloned(),
            None => Some(Value::Null),
        },
    };
    write!(ui.out(), "{{\"roots\":")?;
    pisess_formats::js::to_writer(ui.out(), &root_ids)?;
    if let Some(leaf_id) = &leaf_id {
        write!(ui.out(), ",\"leafId\":")?;
        pisess_formats::js::to_writer(ui.out(), leaf_id)?;
    }
    write!(ui.out(), ",\"nodes\":[")?;
    // Roots where import cut a parent cycle keep their parentId as written; they are flagged,
    // so a walk over parentId links knows to stop there.
    let mut cut: Vec<usize> = Vec::new();
    if session.record.cycle_cuts > 0 {
        for &r in &tree.roots {
            if session.snap.closed_cycle(session.key, reader.row(r)?.key)? {
                cut.push(r);
            }
        }
    }
    let mut first = true;
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let mut stack: Vec<JsonNode> = roots.into_iter().rev().collect();
    while let Some(item) = stack.pop() {
        if !first {
            buf.push(b',');
        }
        first = false;
        let nd = match item {
            JsonNode::Node(nd) => nd,
            JsonNode::Loose(j) => {
                pisess_formats::js::to_writer(&mut buf, &loose.entries[j].node_json())?;
                listing::drain(ui, &mut buf, false)?;
                continue;
            }
        };
        let children = match loose.children.get(&nd) {
            None => sorted_nodes(&mut reader, tree.children(nd).collect())?
                .into_iter()
                .map(JsonNode::Node)
                .collect(),
            Some(extra) => loose.sorted_children(&mut reader, tree, nd, extra)?,
        };
        let mut ids: Vec<Value> = Vec::with_capacity(children.len());
        for c in &children {
            ids.push(c.id(&mut reader, &loose)?);
        }
        let row = reader.row(nd)?;
        match row.facts {
            Some(f) => {
                buf.extend_from_slice(b"{\"id\":");
                pisess_formats::js::to_writer(&mut buf, row.id)?;
                match row.parent_id {
                    ParentId::Id(p) => {
                        buf.extend_from_slice(b",\"parentId\":");
                        pisess_formats::js::to_writer(&mut buf, p)?;
                    }
                    ParentId::Null => buf.extend_from_slice(b",\"parentId\":null"),
                    ParentId::Missing => {}
                }
                if cut.contains(&nd) {
                    buf.extend_from_slice(b",\"cycleCut\":true");
                }
                buf.extend_from_slice(b",\"type\":");
                match f.entry_type {
                    Some(t) => pisess_formats::js::to_writer(&mut buf, t)?,
                    None => buf.extend_from_slice(b"null"),
                }
                buf.extend_from_slice(b",\"children\":[");
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        buf.push(b',');
                    }
                    pisess_formats::js::to_writer(&mut buf, id)?;
                }
                buf.push(b']');
                if let Some(l) = labels.get(row.id) {
                    buf.extend_from_slice(b",\"label\":");
                    pisess_formats::js::to_writer(&mut buf, l)?;
                }
                buf.push(b'}');
            }
            None => {
                let (key, id) = (row.key, row.id.to_owned());
                let o = node_json(session, key, &id, ids, labels, cut.contains(&nd))?;
                pisess_formats::js::to_writer(&mut buf, &o)?;
            }
        }
        listing::drain(ui, &mut buf, false)?;
        stack.extend(children.into_iter().rev());
    }
    listing::drain(ui, &mut buf, true)?;
    writeln!(ui.out(), "]}}")?;
    Ok(Outcome::Success)
}

/// A node of `tree --json`: one of the tree's, or an entry without a string id.
#[derive(Debug, Clone, Copy)]
enum JsonNode {
    Node(usize),
    Loose(usize),
}

impl JsonNode {
    /// Its key, for file order.
    fn key(self, tree: &SessionTree, loose: &Loose) -> u64 {
        match self {
            Self::Node(i) => tree.key(i).0,
            Self::Loose(j) => loose.entries[j].key.0,
        }
    }

    /// Its `id` as pi's tree gives it (`null` for an entry without one).
    fn id(
        self,
        reader: &mut TreeReader<'_>,
        loose: &Loose,
    ) -> Result<Value, crate::command_error::CommandError> {
        Ok(match self {
            Self::Node(i) => Value::String(reader.row(i)?.id.to_owned()),
            Self::Loose(j) => loose.entries[j]
                .value
                .get("id")
                .cloned()
                .unwrap_or(Value::Null),
        })
    }
}

/// The entries without a string id, which pi's `getTree` lists (no `id`, `null` among its
/// parent's children) and the store's tree does not hold: found by reading the session's rows
/// only when it has more entries than tree nodes. Each hangs under the entry its `parentId`
/// names, or is a root; it has no children (pi hangs an entry with an id but no `parentId`
/// under such an entry, and shows the last of them in place of each, as they all share the
/// id `undefined`: pisess lists each in its own place).
struct Loose {
    entries: Vec<LooseEntry>,
    /// Tree node → its loose children, in file order.
    children: std::collections::HashMap<usize, Vec<usize>>,
}

struct LooseEntry {
    key: EntryKey,
    value: Value,
    /// The tree node its `parentId` names (`None`: a root).
    parent: Option<usize>,
    time: Option<f64>,
}

impl Loose {
    fn of(
        session: &Session,
        tree: &SessionTree,
    ) -> Result<Self, crate::command_error::CommandError> {
        let mut out = Self {
            entries: Vec::new(),
            children: std::collections::HashMap::new(),
        };
        if session.record.entries <= tree.len() as u64 {
            return Ok(out);
        }
        for run in session.snap.row_runs(session.key)? {
            for k in run {
                let key = EntryKey(k);
                if tree.index_of(key).is_some() || !session.snap.is_entry(key)? {
                    continue;
                }
                let value = session.value_or_unreadable(key)?;
                // pi: a `parentId` that is null or equal to the id (both undefined) makes a
                // root, one naming no entry an orphan root.
                let parent = match value.get("parentId").and_then(Value::as_str) {
                    Some(p) => session
                        .snap
                        .entry_by_id(session.key, p)?
                        .and_then(|e| tree.index_of(e)),
                    None => None,
                };
                let time = date_ms(value.get("timestamp")).as_f64();
                let j = out.entries.len();
                if let Some(p) = parent {
                    out.children.entry(p).or_default().push(j);
                }
                out.entries.push(LooseEntry {
                    key,
                    value,
                    parent,
                    time,
                });
            }
        }
        Ok(out)
    }

    /// The children of node `nd` with its loose ones `extra`, in pi's order (file order, then
    /// sorted by time as [`sorted_nodes`] sorts).
    fn sorted_children(
        &self,
        reader: &mut TreeReader<'_>,
        tree: &SessionTree,
        nd: usize,
        extra: &[usize],
    ) -> Result<Vec<JsonNode>, crate::command_error::CommandError> {
        let mut items: Vec<JsonNode> = tree.children(nd).map(JsonNode::Node).collect();
        items.extend(extra.iter().map(|&j| JsonNode::Loose(j)));
        items.sort_by_key(|it| it.key(tree, self));
        let mut times = Vec::with_capacity(items.len());
        for it in &items {
            times.push(match *it {
                JsonNode::Node(i) => reader.date_ms(i)?,
                JsonNode::Loose(j) => self.entries[j].time,
            });
        }
        Ok(pi_order(&times).into_iter().map(|k| items[k]).collect())
    }
}

impl LooseEntry {
    /// Its node as pi's tree writes it: `id`, `parentId` and `type` as the entry has them (left
    /// out when it has none), no children.
    fn node_json(&self) -> Value {
        let mut o = Map::new();
        for k in ["id", "parentId", "type"] {
            if let Some(v) = self.value.get(k) {
                o.insert(k.into(), v.clone());
            }
        }
        o.insert("children".into(), Value::Array(Vec::new()));
        Value::Object(o)
    }
}

/// One node of `tree --json` from its record (and, for a root, its line).
fn node_json(
    session: &Session,
    key: EntryKey,
    id: &str,
    children: Vec<Value>,
    labels: &sa::LabelMap,
    cycle_cut: bool,
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
            let v = session.value_or_unreadable(key)?;
            if let Some(p) = v.get("parentId") {
                o.insert("parentId".into(), p.clone());
            }
            o.insert("type".into(), v.get("type").cloned().unwrap_or(Value::Null));
        }
    }
    if cycle_cut {
        // Before `type`, as the streamed nodes write it (a root's type came from its line).
        let t = o.shift_remove("type");
        o.insert("cycleCut".into(), Value::Bool(true));
        if let Some(t) = t {
            o.insert("type".into(), t);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// redb's "previous I/O error", which every read after a damaged page gets, never hides
    /// the damage another thread met: the damage is reported wherever it comes in the list.
    #[test]
    fn the_damage_is_told_before_a_previous_io_error() {
        let previous = || StoreError::Redb(redb::Error::PreviousIo);
        let eof = || {
            StoreError::Redb(redb::Error::Io(std::io::Error::from(
                std::io::ErrorKind::UnexpectedEof,
            )))
        };
        for errors in [
            vec![previous(), eof()],
            vec![eof(), previous()],
            vec![previous(), previous(), eof()],
        ] {
            assert!(telling_error(errors.into_iter()).is_damage());
        }
        // Without damage, the first error.
        let denied = StoreError::Redb(redb::Error::Io(std::io::Error::from(
            std::io::ErrorKind::PermissionDenied,
        )));
        assert!(!denied.is_damage());
        let e = telling_error([previous(), denied].into_iter());
        assert!(matches!(e, StoreError::Redb(redb::Error::PreviousIo)));
    }
}
