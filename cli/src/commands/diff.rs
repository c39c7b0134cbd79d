//! `pisess diff`: compare two entries (branches) like `git log --left-right A...B`.

use std::io::Write;

use pisess_engine::EntryKey;
use serde_json::{Value, json};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::session_arg::{self as sa, Session, open_session};
use crate::ui::{Ui, safe};

/// Compare two entries (branches): common ancestor and what is only on each side.
///
/// Like `git log --left-right A...B`: lines starting with `<` are only on A's path, lines with
/// `>` only on B's, each side oldest first, with estimated tokens per side.
///
/// With --json: one object `{a, b, commonAncestorId, onlyA, onlyB, tokensA, tokensB}` where
/// `onlyA`/`onlyB` are entry ids, oldest first.
///
/// Exit status: 0 when A and B are the same entry, 1 when they differ, 2 on error.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    pub session: String,
    /// One side (id or prefix, @leaf, @root, label:NAME, ENTRY~N).
    pub a: String,
    /// The other side.
    pub b: String,
}

/// Runs `pisess diff`.
pub fn cmd_diff(ui: &mut Ui, args: &DiffArgs) -> CommandResult {
    let session = open_session(&args.session)?;
    let a = session.entry(&args.a)?;
    let b = session.entry(&args.b)?;
    let lca = session.snap.lca(a, b)?;
    // Only keys are kept per side; each entry's JSON is parsed when it is needed and dropped,
    // so memory does not grow with the length of the sides (a side can be a million entries).
    let left = side(&session, a, lca)?;
    let right = side(&session, b, lca)?;
    let (a_id, b_id) = (session.id(a)?, session.id(b)?);
    let lca_id = lca.map(|l| session.id(l)).transpose()?;
    let tokens = |s: &[EntryKey]| -> Result<u64, CommandError> {
        s.iter()
            .try_fold(0u64, |n, k| Ok(n + sa::tokens(&session.value(*k)?)))
    };
    let (ta, tb) = (tokens(&left)?, tokens(&right)?);
    if ui.json {
        let ids = |s: &[EntryKey]| -> Result<Vec<Value>, CommandError> {
            s.iter().map(|k| Ok(json!(session.id(*k)?))).collect()
        };
        let (only_a, only_b) = (ids(&left)?, ids(&right)?);
        ui.json_line(&json!({
            "a": a_id,
            "b": b_id,
            "commonAncestorId": lca_id,
            "onlyA": only_a,
            "onlyB": only_b,
            "tokensA": ta,
            "tokensB": tb,
        }))?;
    } else {
        let base = match &lca_id {
            Some(l) => format!("common ancestor {}", safe(l)),
            None => "no common ancestor (different trees)".to_owned(),
        };
        let painted = ui.paint("1", &base);
        writeln!(ui.out(), "{painted}")?;
        writeln!(
            ui.out(),
            "< {} only: {} entries, ~{ta} tokens",
            safe(&a_id),
            left.len()
        )?;
        writeln!(
            ui.out(),
            "> {} only: {} entries, ~{tb} tokens",
            safe(&b_id),
            right.len()
        )?;
        let width = sa::width();
        for (mark, color, list) in [("<", "31", &left), (">", "32", &right)] {
            for k in list {
                let v = &session.value(*k)?;
                let id = sa::id_of(v).unwrap_or("");
                let text = format!("{} {}", sa::kind(v), sa::summary(v));
                let line = format!(
                    "{mark} {} {}",
                    sa::short_id(id),
                    sa::clip(&text, width.saturating_sub(12).max(20))
                );
                let painted = ui.paint(color, &safe(&line));
                writeln!(ui.out(), "{painted}")?;
            }
        }
    }
    Ok(if left.is_empty() && right.is_empty() {
        Outcome::Success
    } else {
        Outcome::Negative
    })
}

/// The entries from `e` up to (not including) `stop`, oldest first.
fn side(
    session: &Session,
    e: EntryKey,
    stop: Option<EntryKey>,
) -> Result<Vec<EntryKey>, CommandError> {
    let mut out = Vec::new();
    let mut cur = Some(e);
    while let Some(k) = cur {
        if Some(k) == stop {
            break;
        }
        out.push(k);
        cur = session.snap.parent(k)?;
    }
    out.reverse();
    Ok(out)
}
