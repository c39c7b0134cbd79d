//! `pisess export SESSION [--branch ENTRY] [--format jsonl|md|html] [-o FILE]`: a session (or
//! one branch) as JSONL, or a branch as a Markdown transcript or a self-contained HTML page.
//!
//! Invariants: a whole v3 session is written byte for byte as imported (v1/v2: migrated);
//! `md` and `html` show the path root → ENTRY (default: the leaf, or the last entry when it has
//! no string id, where pi's context starts), streamed entry by entry, and
//! `html` escapes every text of the session (see `render::html`); `-o` writes by
//! [`crate::output`]'s rule: a file (or a symlink's target) is replaced atomically, so a reader
//! never sees a half-written file; a device or FIFO is written into; a directory is refused,
//! and so is the session's own file (by any name: [`output::refuse_the_source`]).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::output;
use crate::render::{self, Title, html, markdown};
use crate::session_arg::{Session, open_session_read};
use crate::ui::{SafeWriter, Ui};

/// Arguments of `pisess export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The session: a file, a session id or unique prefix, or `@latest`.
    pub session: String,
    /// Export only the path root → ENTRY (jsonl: as a new session whose parentSession is the
    /// source; md/html: the transcript shown; default there: the leaf).
    #[arg(long, value_name = "ENTRY")]
    pub branch: Option<String>,
    /// What to write: the session file (jsonl), a Markdown transcript (md), or one HTML page
    /// with the tree and the transcript (html).
    #[arg(long, value_enum, default_value_t = Format::Jsonl)]
    pub format: Format,
    /// Write to FILE instead of stdout (`-` is stdout): a file is replaced atomically (through
    /// a symlink, its target); a device or FIFO is written into.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// pi's session format.
    Jsonl,
    /// A Markdown transcript of one branch.
    Md,
    /// A self-contained HTML page: the tree and the transcript of one branch.
    Html,
}

/// Runs `pisess export`.
pub fn cmd_export(ui: &mut Ui, args: &ExportArgs) -> CommandResult {
    // `-o -` is stdout, as for most tools that take an output file.
    let output = args.output.as_deref().filter(|o| *o != Path::new("-"));
    // A FIFO (or a device) is opened before the store: opening a FIFO waits for its reader,
    // and the store must not be held meanwhile (an import would find it busy).
    let stream = match output {
        Some(path) if matches!(output::resolve(path)?, output::Target::Stream(_)) => {
            Some(output::Output::create(path)?)
        }
        _ => None,
    };
    let sess = open_session_read(&args.session)?;
    if output.is_none() {
        output::refuse_stdout_as_source(
            Path::new(&sess.record.path),
            "write the copy elsewhere (`-o FILE`, or `>` another file)",
        )?;
    }
    match output {
        // A terminal sees the document with escapes shown, never acted on (see `ui`).
        None if ui.tty => {
            let mut w = SafeWriter::new(ui.out());
            write(&sess, args, &mut w)?;
            w.finish()?;
        }
        None => write(&sess, args, ui.out())?,
        Some(path) => {
            output::refuse_the_source(
                path,
                Path::new(&sess.record.path),
                "give another FILE (`pisess export` writes a copy; the session stays as it is)",
            )?;
            let out = match stream {
                Some(out) => out,
                None => output::Output::create(path)?,
            };
            out.write_with(|w| write(&sess, args, w))?;
            out.commit()?;
        }
    }
    Ok(Outcome::Success)
}

fn write(sess: &Session, args: &ExportArgs, out: &mut dyn Write) -> Result<(), CommandError> {
    match (args.format, &args.branch) {
        (Format::Jsonl, Some(b)) => {
            let e = sess.entry(b)?;
            sess.snap.export_branch(sess.key, e, out)?;
        }
        (Format::Jsonl, None) => {
            sess.snap.export_session(sess.key, out)?;
        }
        (f, b) => {
            // A session without entries has no leaf: its page shows the header facts only.
            // When the last entry has no string id the transcript ends there, as pi's context
            // and its HTML export fall back to the last entry.
            let target = match b {
                Some(b) => Some(sess.entry(b)?),
                None => sess.context_leaf()?,
            };
            transcript(sess, f, target, out)?;
        }
    }
    Ok(())
}

/// Writes the md or html rendering of the path root → `target`.
fn transcript(
    sess: &Session,
    format: Format,
    target: Option<pisess_engine::EntryKey>,
    out: &mut dyn Write,
) -> Result<(), CommandError> {
    let path = match target {
        Some(t) => sess.snap.context_path(sess.key, t)?,
        None => Vec::new(),
    };
    let labels = sess.label_map()?;
    let r = &sess.record;
    let title = Title {
        session_id: r.session_id.clone(),
        name: sess.snap.session_name(sess.key)?,
        cwd: r.cwd.clone(),
        file: r.path.clone(),
        created: r.created.clone(),
        branch_id: match target {
            Some(t) if sess.snap.link(t)?.is_none() => "(no id)".to_owned(),
            Some(t) => sess.id(t)?,
            None => String::new(),
        },
        entries: path.len(),
    };
    let nonce = html::nonce();
    match format {
        Format::Md => markdown::begin(out, &title)?,
        _ => {
            html::begin(out, &title, &nonce)?;
            let on_path: HashSet<_> = path.iter().copied().collect();
            html::tree(out, sess, &on_path, target, &labels)?;
            html::facts(out, &title)?;
        }
    }
    for &k in &path {
        let v = sess.value(k)?;
        let rendered = render::parts(&v);
        let label = labels.get(&rendered.id).map(String::as_str);
        match format {
            Format::Md => markdown::entry(out, &rendered, label)?,
            _ => html::entry(out, &rendered, label)?,
        }
    }
    if format == Format::Html {
        html::end(out, &nonce)?;
    }
    Ok(())
}
