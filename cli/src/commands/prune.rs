//! `pisess prune`: drop the branches of a session that are not on the kept paths, or move whole
//! old sessions into a trash folder.
//!
//! Invariants:
//! - the output is a valid pi session in which the context pi builds at every kept entry equals
//!   the source's (see `pisess_engine::prune` for what is kept and why);
//! - nothing on disk changes in a dry run (the default when neither `-o` nor `--in-place` is
//!   given); the plan is still written, to a byte counter, so the numbers are exact;
//! - every write of a file is atomic: a temp file in the target's folder, fsync, rename, fsync
//!   of the folder; `-o` follows symlinks and writes a device or FIFO straight into (the rule of
//!   [`crate::output`]); `--in-place` first keeps the original bytes at FILE.bak (a hard link, else an
//!   atomic copy) unless `--no-backup`, and re-imports the new file so the store matches; a
//!   file whose size or mtime differs from what the store read (pi appended) is left alone;
//! - `--sessions` never deletes: files are renamed into `trash/` beside the store (a copy that
//!   is checked byte for byte before the original is removed, across file systems); only
//!   files inside pi's session folder are moved unless `--any-folder`;
//! - the report is written as it is made: the table of dropped branches a row at a time
//!   ([`crate::table`], laid out as comfy_table lays it out) and the JSON lists an item at a
//!   time ([`crate::json_stream`]), so a session of 400,000 dropped branches (a fan of
//!   siblings) is reported in the memory of its plan, not of its report (the table keeps the
//!   two cells it reads from the store, a few dozen bytes a branch, so that it parses each
//!   branch's first entry once, not once a pass).

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use pisess_engine::import::size_mtime;

use pisess_engine::{DroppedBranch, EntryKey, PrunePlan, RowFate, SessionRecord, Store};
use serde_json::json;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::commands::migrate::atomic;
use crate::json_stream::{field, item};
use crate::output::{self, Output};
use crate::session_arg::{
    self as sa, Session, open_session, open_session_read, open_store, open_store_read,
};
use crate::table::Columns;
use crate::ui::{Ui, safe};

/// Drop the branches not on the kept paths, or move old sessions to a trash folder.
///
/// `pisess prune SESSION [--keep-leaf] [--keep ENTRY]... [--keep-labeled]` keeps the paths
/// root → each kept entry (and, with --keep-labeled, root → each labelled entry) and drops every
/// other branch. The result is a valid pi session: the header and every kept entry unchanged,
/// so pi builds the same context at every kept entry. Labels and the session name are resolved
/// by pi over the whole file, so the last label of each kept entry and the last session_info
/// are kept too, re-attached to their nearest kept ancestor if their branch goes (those after
/// the last kept entry are chained under it, so that pi resumes where it did). An entry
/// whose parentId closed a parent cycle (which hangs pi) is written as a root, as pisess shows
/// it.
///
/// Without -o or --in-place it is a dry run: it prints what would go (entries, bytes,
/// branches) and changes nothing. -o FILE writes the pruned session to FILE (through a symlink,
/// to its target; a device or FIFO is written into); --in-place replaces the session file,
/// keeping the original as FILE.bak unless --no-backup. Files are replaced atomically.
///
/// `pisess prune --sessions --older-than 90d [--dry-run]` moves every session of pi's session
/// folder last modified (pi's rule: newest message) before then into the folder `trash/` beside
/// the store; nothing is deleted. Sessions imported from elsewhere stay unless --any-folder.
///
/// With --json: one object `{type: "prune", …}` (or `{type: "pruneSessions", …}`).
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    /// The session: a file, a session id or unique prefix, or @latest.
    #[arg(required_unless_present = "sessions", conflicts_with = "sessions")]
    pub session: Option<String>,
    /// Keep the path to the session's leaf (where pi resumes).
    #[arg(long)]
    pub keep_leaf: bool,
    /// Keep the path to ENTRY (an id or prefix, @leaf, label:NAME, ENTRY~N); repeat the
    /// option for more (`--keep A --keep B`).
    #[arg(long, value_name = "ENTRY", action = clap::ArgAction::Append)]
    pub keep: Vec<String>,
    /// Also keep the path to every labelled entry.
    #[arg(long)]
    pub keep_labeled: bool,
    /// Only print what would be dropped or moved (the default for a session without -o or
    /// --in-place).
    #[arg(long)]
    pub dry_run: bool,
    /// Write the pruned session to FILE (a file is replaced atomically; a device or FIFO is
    /// written into).
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FILE",
        conflicts_with = "in_place"
    )]
    pub output: Option<PathBuf>,
    /// Replace the session file (atomically), keeping the original as FILE.bak.
    #[arg(long)]
    pub in_place: bool,
    /// With --in-place: keep no backup.
    #[arg(long, requires = "in_place")]
    pub no_backup: bool,
    /// Move whole old sessions to the trash folder beside the store instead.
    #[arg(long, requires = "older_than", conflicts_with_all = ["keep_leaf", "keep", "keep_labeled", "output", "in_place"])]
    pub sessions: bool,
    /// With --sessions: the age (by last message) beyond which a session is moved: 90d, 12h,
    /// 2w, 30m, 45s; or a date before which it was last modified: 2026-01-31 (midnight UTC)
    /// or an RFC 3339 time, as `ls --since` takes them.
    #[arg(long, value_name = "AGE|DATE", requires = "sessions")]
    pub older_than: Option<String>,
    /// With --sessions: also move sessions imported from outside pi's session folder (by
    /// default those are left alone: they may be someone's fixtures or a copy kept on purpose).
    #[arg(long, requires = "sessions")]
    pub any_folder: bool,
}

/// Runs `pisess prune`.
pub fn cmd_prune(ui: &mut Ui, args: &PruneArgs) -> CommandResult {
    if args.sessions {
        return prune_sessions(ui, args);
    }
    let Some(arg) = &args.session else {
        return Err(anyhow!("give a SESSION, or --sessions --older-than AGE").into());
    };
    if !args.keep_leaf && args.keep.is_empty() && !args.keep_labeled {
        return Err(CommandError::with_hint(
            anyhow!("nothing to keep was given"),
            "give --keep-leaf, --keep ENTRY (repeatable) and/or --keep-labeled",
        ));
    }
    // Only an in-place prune writes the store (it re-imports the file it replaced); a dry run
    // or `-o` reads it, read-only, beside other readers.
    let rewrites = args.in_place && !args.dry_run;
    let mut session = if rewrites {
        open_session(arg)?
    } else {
        open_session_read(arg)?
    };
    if rewrites {
        session = check_in_place(session, arg)?;
    }
    let (targets, names) = keep_targets(&session, args)?;
    let plan = session.snap.prune_plan(session.key, &targets)?;
    let source = PathBuf::from(&session.record.path);
    let dry = args.dry_run || (args.output.is_none() && !args.in_place);
    let mut bytes_before = 0u64;
    for &(_, _, len) in &plan.rows {
        bytes_before += len;
    }
    let target = match (&args.output, args.in_place) {
        (Some(o), _) => Some(o.clone()),
        (None, true) => Some(source.clone()),
        (None, false) => None,
    };
    if args.output.as_deref() == Some(Path::new("-")) {
        return Err(CommandError::with_hint(
            anyhow!("`-o -` would mix the pruned session with prune's report on stdout"),
            "give -o a file name (`-o /dev/stdout` if you mean it)",
        ));
    }
    if let Some(o) = &args.output {
        output::refuse_the_source(o, &source, "use --in-place to replace it (with a backup)")?;
    }
    // An in-place prune that drops nothing would write the same bytes (the store holds the
    // file's bytes, checked above): the file is left as it is, and no backup is made. So is
    // one that drops nothing and only writes a re-attached entry where it already is (a
    // second prune of what a first one wrote), which would otherwise replace the file by
    // itself and then find its backup in the way.
    let untouched = !dry
        && args.in_place
        && (plan
            .rows
            .iter()
            .all(|r| matches!(r.1, RowFate::Header | RowFate::Kept))
            || (plan.dropped_entries == 0
                && plan.dropped_other == 0
                && writes_the_file_again(&session, &plan, &source)));
    let target = if untouched { None } else { target };
    if rewrites && !untouched {
        crate::session_arg::refuse_read_only(
            &session.record.path,
            ", or -o FILE to write the pruned session elsewhere",
        )?;
    }
    let mut backup = None;
    let bytes_after = if dry || untouched {
        let mut counter = Counter(0);
        session.snap.write_pruned(&plan, &mut counter)?;
        counter.0
    } else {
        let target = target.clone().ok_or_else(|| anyhow!("no output"))?;
        let (n, b) = write_output(&session, &plan, &target, args)?;
        backup = b;
        n
    };
    let report = Report {
        session: &session,
        plan: &plan,
        names: &names,
        dry,
        bytes_before,
        bytes_after,
        target: target.as_deref(),
        backup: backup.as_deref(),
        untouched: untouched.then_some(source.as_path()),
    };
    let key = session.key;
    let leaf_id = match plan.new_leaf {
        Some(l) => Some(session.id(l)?),
        None => None,
    };
    // The file is written: the store is brought in step with it whatever happens to the
    // report (a reader that stopped early, a full disk), then the report's error is returned.
    let reported = if ui.json {
        report.write_json(ui.out(), leaf_id.as_deref())
    } else {
        report.human(ui, leaf_id.as_deref())
    }
    .and_then(|()| ui.flush());
    drop(session);
    if !dry && args.in_place && !untouched {
        // The file changed under the store: import it again.
        // In full: the pruned file may be a prefix of the source (every dropped entry after
        // the last kept one), which an ordinary import keeps the store's copy of.
        import_full(&source.to_string_lossy())?;
        let reopened = open_session(&source.to_string_lossy())?;
        if reopened.key != key {
            eprintln!(
                "note: the pruned file was imported as a new session in the store ({})",
                reopened.record.session_id
            );
        }
    }
    reported.map_err(|e| match (&target, dry || untouched) {
        (Some(t), false) => e.after(|| format!("{} was written", safe(&t.to_string_lossy()))),
        _ => e,
    })?;
    Ok(Outcome::Success)
}

/// The session an in-place prune rewrites, as its file is now, or why its file is left alone:
/// the named session's file must still exist and still hold that session (a file replaced by a
/// link to another session's is not that session), and the store's copy must be the file's
/// bytes exactly, since the new file is written from the store: a file changed in a way the
/// import's size, time and prefix checks cannot see (an edit that kept the size and time, or
/// one before lines appended since) is read again in full first.
fn check_in_place(session: Session, arg: &str) -> Result<Session, CommandError> {
    let named = session.record.session_id.clone();
    let path = session.record.path.clone();
    // Gone: marked so by an import, or deleted since (the store has not looked yet).
    let missing = matches!(
        std::fs::symlink_metadata(&path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    );
    if session.record.gone || missing {
        return Err(CommandError::with_hint(
            anyhow!(
                "session {} has no file to replace: {} is gone",
                safe(&named),
                safe(&path)
            ),
            "-o FILE writes the pruned session to a new file",
        ));
    }
    let mut session = session;
    if Path::new(arg) != Path::new(&path) {
        // Refresh the store from the file about to be replaced.
        drop(session);
        session = open_session(&path)?;
        if session.record.session_id != named {
            return Err(CommandError::with_hint(
                anyhow!(
                    "{} no longer holds session {} (it holds {} now); left alone",
                    safe(&path),
                    safe(&named),
                    safe(&session.record.session_id)
                ),
                "name the file to prune it, or -o FILE to write the stored session elsewhere",
            ));
        }
    }
    if session.record.version < 3.0 {
        return Ok(session);
    }
    // A file cut short is not read over the stored session (which may be the only copy of the
    // lost entries), and so not pruned either: the import's own rule.
    let cut_short = {
        let size = std::fs::metadata(&session.record.path)
            .map_err(|e| anyhow!("cannot read {}: {e}", safe(&session.record.path)))?
            .len();
        session.snap.refuses_as_cut_short(
            session.key,
            &session.record,
            Path::new(&session.record.path),
            size,
        )?
    };
    if cut_short {
        let file = Path::new(&session.record.path);
        let torn = std::fs::metadata(file).ok().and_then(|m| {
            let missing = session.record.file_size.checked_sub(m.len())?;
            pisess_engine::agent::writer::saved_torn_line(file, missing)
        });
        return Err(CommandError::with_hint(
            anyhow!(
                "{} was cut short (the store holds {} bytes of it, the file fewer, and they \
                 begin alike); left alone{}",
                safe(&session.record.path),
                session.record.file_size,
                safe(&pisess_engine::import::torn_note(torn.as_deref(), file))
            ),
            format!(
                "`pisess export {} -o FILE` writes the stored session out; `pisess import --full \
                 FILE` takes the file as it is",
                session.record.session_id
            ),
        ));
    }
    let differs = |session: &Session| -> Result<Option<u64>, CommandError> {
        let file = std::fs::File::open(&session.record.path)
            .map_err(|e| anyhow!("cannot read {}: {e}", safe(&session.record.path)))?;
        Ok(session
            .snap
            .first_difference(session.key, &mut std::io::BufReader::new(file))?)
    };
    let Some(at) = differs(&session)? else {
        return Ok(session);
    };
    eprintln!(
        "note: {} differs from the store's copy from byte {at} (a change the import could not \
         see); reading it again in full",
        safe(&session.record.path)
    );
    let path = session.record.path.clone();
    drop(session);
    import_full(&path)?;
    let session = open_session(&path)?;
    if let Some(at) = differs(&session)? {
        return Err(CommandError::with_hint(
            anyhow!(
                "{} still differs from the store's copy from byte {at}; left alone",
                safe(&path)
            ),
            "is pi writing to it? run the prune again when it is idle",
        ));
    }
    Ok(session)
}

/// Reads the file at `path` into the store again in full (`import --full`).
fn import_full(path: &str) -> Result<(), CommandError> {
    let store = crate::session_arg::open_store()?;
    let opts = pisess_engine::ImportOptions {
        full: true,
        ..Default::default()
    };
    let report = store.import(&[PathBuf::from(path)], &opts, &mut |_| {})?;
    if let Some(err) = report.files.first().and_then(|f| f.error.as_deref()) {
        return Err(anyhow!("cannot read {} again: {}", safe(path), safe(err)).into());
    }
    Ok(())
}

/// The entries to keep and how they were named.
fn keep_targets(
    session: &Session,
    args: &PruneArgs,
) -> Result<(Vec<EntryKey>, Vec<String>), CommandError> {
    let mut targets = Vec::new();
    let mut names = Vec::new();
    if args.keep_leaf {
        targets.push(session.leaf()?);
        names.push("@leaf".to_owned());
    }
    for k in &args.keep {
        targets.push(session.entry(k)?);
        // An ENTRY given twice is named once in the report.
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    if args.keep_labeled {
        let mut labels = session.snap.labels(session.key)?;
        labels.sort();
        for (id, label) in labels {
            if let Some(e) = session.snap.entry_by_id(session.key, &id)?
                && session.snap.link(e)?.is_some()
            {
                targets.push(e);
                names.push(format!("label:{label}"));
            }
        }
    }
    Ok((targets, names))
}

struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether `plan` written out gives `file`'s bytes exactly (`false` when the file cannot be
/// read).
fn writes_the_file_again(session: &Session, plan: &PrunePlan, file: &Path) -> bool {
    let Ok(f) = std::fs::File::open(file) else {
        return false;
    };
    session
        .snap
        .pruned_first_difference(plan, &mut std::io::BufReader::new(f))
        .is_ok_and(|at| at.is_none())
}

/// Writes the plan to `target` by [`output`]'s rule (`--in-place`: the session file, replaced
/// atomically after the backup is made); returns the bytes and the backup made.
fn write_output(
    session: &Session,
    plan: &PrunePlan,
    target: &Path,
    args: &PruneArgs,
) -> Result<(u64, Option<PathBuf>), CommandError> {
    let out = Output::create(target)?;
    let source = Path::new(&session.record.path);
    let n = out.write_with(|w| Ok(session.snap.write_pruned(plan, w)?))?;
    if args.in_place
        && !out.is_stream()
        && let Ok(meta) = std::fs::metadata(source)
    {
        out.file()
            .and_then(|f| f.set_permissions(meta.permissions()))
            .map_err(|e| anyhow!("cannot write {}: {e}", target.display()))?;
    }
    // pi appends to a session by its path: a line appended since the store read the file would
    // go to the old file and be lost by the rename. Such a file is left alone (checked just
    // before the backup and the rename).
    if args.in_place
        && let Ok(meta) = std::fs::metadata(source)
        && size_mtime(&meta) != (session.record.file_size, session.record.mtime_ns)
    {
        return Err(CommandError::with_hint(
            anyhow!(
                "{}: the file changed while it was being pruned ({} bytes when read, {} now); \
                 left alone",
                source.display(),
                session.record.file_size,
                meta.len()
            ),
            "is pi writing to it? run the prune again when it is idle",
        ));
    }
    let mut backup = None;
    if args.in_place && !args.no_backup {
        let mut b = source.as_os_str().to_owned();
        b.push(".bak");
        let b = PathBuf::from(b);
        atomic::make_backup(source, &b)?;
        backup = Some(b);
    }
    out.commit()?;
    Ok((n, backup))
}

struct Report<'a> {
    session: &'a Session,
    plan: &'a PrunePlan,
    names: &'a [String],
    dry: bool,
    bytes_before: u64,
    bytes_after: u64,
    target: Option<&'a Path>,
    backup: Option<&'a Path>,
    /// The file an in-place prune left as it was (nothing to drop).
    untouched: Option<&'a Path>,
}

impl Report<'_> {
    /// The entries of one fate, in file order.
    fn rows_with(&self, fate: RowFate) -> impl Iterator<Item = EntryKey> + '_ {
        self.plan
            .rows
            .iter()
            .filter(move |&&(_, f, _)| f == fate)
            .map(|&(e, _, _)| e)
    }

    /// The re-attached entries, in file order.
    /// None when the file is left as it is (each is written where it already was).
    fn reattached(&self) -> impl Iterator<Item = EntryKey> + '_ {
        self.rows_with(RowFate::Reattached)
            .filter(|_| self.untouched.is_none())
    }

    /// The entries written as roots because their `parentId` closed a cycle, in file order.
    fn rerooted(&self) -> impl Iterator<Item = EntryKey> + '_ {
        self.rows_with(RowFate::Rerooted)
    }

    /// The report as one JSON object, written as it is made: the lists (`reattached`,
    /// `branches`: one item per dropped branch, a fan of siblings has as many as entries) are
    /// printed an item at a time, never held.
    fn write_json<W: Write>(&self, out: &mut W, leaf: Option<&str>) -> Result<(), CommandError> {
        out.write_all(b"{\"type\":\"prune\"")?;
        field(out, "dryRun", &self.dry)?;
        field(out, "sessionId", &self.session.record.session_id)?;
        field(out, "file", &self.session.record.path)?;
        field(out, "keep", &self.names)?;
        field(out, "keptEntries", &self.plan.kept_entries)?;
        out.write_all(b",\"reattached\":[")?;
        let mut first = true;
        for e in self.reattached() {
            item(out, &mut first, &self.session.id(e)?)?;
        }
        out.write_all(b"]")?;
        out.write_all(b",\"rerooted\":[")?;
        let mut first = true;
        for e in self.rerooted() {
            item(out, &mut first, &self.session.id(e)?)?;
        }
        out.write_all(b"]")?;
        field(out, "droppedEntries", &self.plan.dropped_entries)?;
        field(out, "droppedOther", &self.plan.dropped_other)?;
        field(out, "bytesBefore", &self.bytes_before)?;
        field(out, "bytesAfter", &self.bytes_after)?;
        out.write_all(b",\"branches\":[")?;
        let mut first = true;
        for b in &self.plan.branches {
            let v = json!({
                "id": self.top_id(b)?,
                "fromId": b.from_id.as_deref(),
                "entries": b.entries,
                "bytes": b.bytes,
            });
            item(out, &mut first, &v)?;
        }
        out.write_all(b"]")?;
        field(out, "leafId", &leaf)?;
        field(
            out,
            "output",
            &self.target.map(|p| p.to_string_lossy().into_owned()),
        )?;
        field(
            out,
            "backup",
            &self.backup.map(|p| p.to_string_lossy().into_owned()),
        )?;
        out.write_all(b"}\n")?;
        Ok(())
    }

    /// The id of a dropped branch's first entry.
    fn top_id(&self, b: &DroppedBranch) -> Result<String, CommandError> {
        Ok(self.session.snap.entry_id(b.top)?.unwrap_or_default())
    }

    /// The cells of a dropped branch's row that come from the store: its first entry's short
    /// id and `kind: summary` (which parses the entry's JSON), clipped to `width` characters.
    fn read_cells(&self, b: &DroppedBranch, width: usize) -> Result<[String; 2], CommandError> {
        let first = match self.session.value(b.top) {
            Ok(v) => format!("{}: {}", sa::kind(&v), sa::summary(&v)),
            Err(_) => String::new(),
        };
        Ok([
            safe(sa::short_id(&self.top_id(b)?)).into_owned(),
            safe(&sa::clip(&first, width)).into_owned(),
        ])
    }

    fn write_branches(&self, out: &mut dyn Write) -> Result<(), CommandError> {
        let width = sa::width().saturating_sub(40).max(20);
        branch_table(&self.plan.branches, out, |b| self.read_cells(b, width))
    }

    fn human(&self, ui: &mut Ui, leaf: Option<&str>) -> Result<(), CommandError> {
        let p = self.plan;
        let total = p.kept_entries + p.dropped_entries;
        let verb = if self.dry { "would drop" } else { "dropped" };
        let reattached = self.reattached().count();
        let out = ui.out();
        writeln!(
            out,
            "{} ({})",
            safe(&self.session.record.path),
            self.session.record.session_id
        )?;
        writeln!(
            out,
            "keep:  the paths to {} — {} entries{}",
            safe(&self.names.join(", ")),
            p.kept_entries,
            match reattached {
                0 => String::new(),
                n => format!(
                    " ({n} label/session-name entr{} re-attached)",
                    if n == 1 { "y" } else { "ies" }
                ),
            }
        )?;
        writeln!(
            out,
            "{verb}: {} of {total} entries in {} branch{}, {} of {} bytes{}",
            p.dropped_entries,
            p.branches.len(),
            if p.branches.len() == 1 { "" } else { "es" },
            self.bytes_before.saturating_sub(self.bytes_after),
            self.bytes_before,
            match p.dropped_other {
                0 => String::new(),
                n => format!(", and {n} line(s) that are not entries"),
            }
        )?;
        let rerooted: Vec<String> = self
            .rerooted()
            .map(|e| self.session.id(e))
            .collect::<Result<_, _>>()?;
        if !rerooted.is_empty() {
            writeln!(
                out,
                "{} as root{} (parentId null), where a parent cycle was cut (pi hangs on one): {}",
                if self.dry { "would write" } else { "written" },
                if rerooted.len() == 1 { "" } else { "s" },
                safe(&rerooted.join(", "))
            )?;
        }
        if let Some(l) = leaf {
            writeln!(out, "pi resumes at: {}", safe(l))?;
        }
        if !p.branches.is_empty() {
            self.write_branches(out)?;
        }
        match (self.dry, self.target) {
            (true, None) => writeln!(
                out,
                "dry run: nothing written (give -o FILE or --in-place to write)"
            )?,
            (true, Some(t)) => writeln!(out, "dry run: {} not written", t.display())?,
            (false, Some(t)) => {
                writeln!(out, "wrote {} ({} bytes)", t.display(), self.bytes_after)?;
                if let Some(b) = self.backup {
                    writeln!(out, "the original is kept as {}", b.display())?;
                }
            }
            (false, None) => {
                if let Some(f) = self.untouched {
                    writeln!(
                        out,
                        "nothing to drop: {} left as it is (no backup made)",
                        f.display()
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// The table of dropped branches, streamed ([`crate::table`]): a first pass measures the
/// columns, a second prints the rows, and neither holds a row. `cells` (the cells read from
/// the store: a JSON parse of the branch's first entry) is called once a branch, in the first
/// pass; what it gives is kept for the second in one buffer, a few dozen bytes a branch.
fn branch_table(
    branches: &[DroppedBranch],
    out: &mut dyn Write,
    mut cells: impl FnMut(&DroppedBranch) -> Result<[String; 2], CommandError>,
) -> Result<(), CommandError> {
    const HEADER: [&str; 5] = ["branch", "from", "entries", "bytes", "first entry"];
    let row = |b: &DroppedBranch, [id, first]: [&str; 2]| {
        [
            id.to_owned(),
            b.from_id.as_deref().map_or_else(
                || "(root)".to_owned(),
                |f| safe(sa::short_id(f)).into_owned(),
            ),
            b.entries.to_string(),
            b.bytes.to_string(),
            first.to_owned(),
        ]
    };
    let mut kept = KeptCells::default();
    let mut columns = Columns::new(&HEADER);
    for b in branches {
        let [id, first] = cells(b)?;
        columns.measure(&row(b, [&id, &first]));
        kept.push([&id, &first]);
    }
    if columns.streamable() {
        columns.write_row(out, &HEADER)?;
        for (i, b) in branches.iter().enumerate() {
            columns.write_row(out, &row(b, kept.get(i)))?;
        }
    } else {
        // A column over 65,535 characters wide (a terminal that wide): comfy_table breaks
        // such lines, which only comfy_table itself does exactly.
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(HEADER.to_vec());
        for (i, b) in branches.iter().enumerate() {
            t.add_row(row(b, kept.get(i)).to_vec());
        }
        writeln!(out, "{}", crate::table::plain(&t))?;
    }
    Ok(())
}

/// Pairs of cells, in one buffer.
#[derive(Default)]
struct KeptCells {
    text: String,
    /// Where each cell ends in `text`.
    ends: Vec<usize>,
}

impl KeptCells {
    fn push(&mut self, cells: [&str; 2]) {
        for c in cells {
            self.text.push_str(c);
            self.ends.push(self.text.len());
        }
    }

    /// The `i`-th pair pushed.
    fn get(&self, i: usize) -> [&str; 2] {
        let end = |k: usize| self.ends.get(k).copied().unwrap_or(self.text.len());
        let start = |k: usize| if k == 0 { 0 } else { end(k - 1) };
        let cell = |k: usize| self.text.get(start(k)..end(k)).unwrap_or("");
        [cell(2 * i), cell(2 * i + 1)]
    }
}

// ---- --sessions ---------------------------------------------------------------------------

/// A free name for `file` in `dir`: the file name, else `NAME.1`, `NAME.2`, …; a name taken
/// earlier in this run (`taken`: a dry run moves nothing, so the folder does not show it) is
/// not free either, so a dry run names the places the real run uses.
fn free_name(dir: &Path, file: &Path, taken: &mut BTreeSet<PathBuf>) -> PathBuf {
    let name = file.file_name().unwrap_or_default();
    let mut candidate = dir.join(name);
    let mut i = 1u32;
    while candidate.symlink_metadata().is_ok() || taken.contains(&candidate) {
        let mut n = name.to_owned();
        n.push(format!(".{i}"));
        candidate = dir.join(n);
        i += 1;
    }
    taken.insert(candidate.clone());
    candidate
}

/// Moves `src` to `dst` (a new name): rename, else (another file system) a checked atomic copy
/// and then the removal of the original. A copy that fails its check is removed again. The
/// original is held open across its removal: what was appended to it between the check and
/// the removal (pi appends by path, a line per write) is read through it and added to the
/// copy, so no line is lost; a line appended after the removal makes a new file in its place.
fn move_file(src: &Path, dst: &Path) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    match std::fs::rename(src, dst) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::CrossesDevices => {
            let mut original = pisess_formats::open::open_regular(src)?;
            let checked = atomic::copy_atomic(src, dst).and_then(|()| {
                if atomic::same_bytes(src, dst)? {
                    Ok(())
                } else {
                    Err(std::io::Error::other(format!(
                        "the copy at {} differs from the original (is pi writing to it?); the \
                         original was left in place",
                        dst.display()
                    )))
                }
            });
            if let Err(e) = checked {
                if std::fs::symlink_metadata(dst).is_ok() {
                    let _ = std::fs::remove_file(dst);
                }
                return Err(e);
            }
            let copied = std::fs::metadata(dst)?.len();
            if let Err(e) = std::fs::remove_file(src) {
                // Left in place: the copy goes again (a second one came each retry).
                let _ = std::fs::remove_file(dst);
                return Err(e);
            }
            let mut tail = Vec::new();
            original.seek(SeekFrom::Start(copied))?;
            original.read_to_end(&mut tail)?;
            if !tail.is_empty() {
                let mut f = std::fs::OpenOptions::new().append(true).open(dst)?;
                f.write_all(&tail)?;
                f.sync_all()?;
            }
        }
        Err(e) => return Err(e),
    }
    atomic::sync_dir(dst)?;
    atomic::sync_dir(src)
}

/// A session old enough to move, and its modification time (pi's rule).
type Old = (SessionRecord, Option<i64>);

fn prune_sessions(ui: &mut Ui, args: &PruneArgs) -> CommandResult {
    // An age (`90d`: that long before now) or a date, as `ls --since` reads them.
    let cutoff = super::util::parse_since(args.older_than.as_deref().unwrap_or(""))?;
    // The dry run moves nothing, so it only reads the store (and writes it only to refresh a
    // session whose file changed, below).
    // A store that does not exist holds nothing to move: read as empty, not created.
    let absent = pisess_engine::default_store_path().is_ok_and(|p| pisess_engine::no_store_at(&p));
    let queried = if absent {
        // Made meanwhile (an import started beside this): opened as usual below.
        Some(crate::session_arg::open_store_to_query()?).filter(Store::is_absent)
    } else {
        None
    };
    let mut store = if let Some(store) = queried {
        store
    } else if args.dry_run {
        open_store_read()?
    } else {
        open_store()?
    };
    let trash = pisess_engine::trash_dir(store.path());
    // A session whose file is in the trash already (imported from it by naming it) stays
    // where it is: it was not moved into `NAME.1` beside itself.
    let trash_real = std::fs::canonicalize(&trash).unwrap_or_else(|_| trash.clone());
    // pi's session folder, and the folders its symlinks lead to (pi lists those sessions too).
    let mut pi_folders: Vec<PathBuf> = pisess_formats::session_folder::linked_folders();
    if let Some(f) = pisess_formats::session_folder::find() {
        pi_folders.push(std::fs::canonicalize(&f.root).unwrap_or(f.root));
    }
    let select = |store: &Store| -> Result<(Vec<Old>, usize), CommandError> {
        let snap = store.snapshot()?;
        let mut old = Vec::new();
        let mut outside = 0usize;
        for (_, r) in snap.sessions()? {
            let modified = r.modified_ms.or(r.created_ms);
            if r.gone
                || modified.is_none_or(|m| m >= cutoff)
                || Path::new(&r.path).starts_with(&trash_real)
            {
                continue;
            }
            let in_pi = pi_folders
                .iter()
                .any(|root| Path::new(&r.path).starts_with(root));
            if !in_pi && !args.any_folder {
                outside += 1;
                continue;
            }
            old.push((r, modified));
        }
        Ok((old, outside))
    };
    let (mut old, mut outside) = select(&store)?;
    // A session is judged by its file as it is now, not as it was last imported: pi may have
    // written to an old session since (it is then no longer old). The files of the candidates
    // that changed are imported again (a `stat` each for the others), and the choice made again.
    // A file deleted since its import is imported too, which marks its session gone (as
    // `pisess import FILE` does): it is no longer a session to move, nor a failure.
    let changed: Vec<PathBuf> = old
        .iter()
        .filter(|(r, _)| match std::fs::metadata(&r.path) {
            Ok(md) => md.is_file() && size_mtime(&md) != (r.file_size, r.mtime_ns),
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
        })
        .map(|(r, _)| PathBuf::from(&r.path))
        .collect();
    let mut unreadable = std::collections::BTreeMap::new();
    if !changed.is_empty() {
        if !store.is_writable() {
            store = store.into_writable()?;
        }
        let report = store.import(
            &changed,
            &pisess_engine::ImportOptions::default(),
            &mut |_| {},
        )?;
        for f in report.files {
            if let Some(e) = f.error {
                unreadable.insert(f.path.to_string_lossy().into_owned(), e);
            }
        }
        (old, outside) = select(&store)?;
    }
    old.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.path.cmp(&b.0.path)));
    let mut moved = Vec::new();
    let mut failed = 0usize;
    let mut folders = BTreeSet::new();
    let mut taken = BTreeSet::new();
    for (r, modified) in &old {
        let src = PathBuf::from(&r.path);
        let sub = src
            .parent()
            .and_then(Path::file_name)
            .map_or_else(|| PathBuf::from("_"), PathBuf::from);
        let dir = trash.join(sub);
        let dst = free_name(&dir, &src, &mut taken);
        let status = if let Err(e) = std::fs::metadata(&src) {
            failed += 1;
            Err(if e.kind() == std::io::ErrorKind::NotFound {
                "the file is missing".to_owned()
            } else {
                format!("the file cannot be looked at ({e}); left in place")
            })
        } else if !src.is_file() {
            failed += 1;
            Err("the file is no regular file now; left in place".to_owned())
        } else if std::fs::symlink_metadata(&src).is_ok_and(|m| m.file_type().is_symlink()) {
            // Replaced by a link since it was imported: what it leads to is another file, not
            // the session judged old.
            failed += 1;
            Err("the file is a symbolic link now; left in place".to_owned())
        } else if let Some(e) = unreadable.get(&r.path) {
            // Changed since it was imported, and what it holds now cannot be judged.
            failed += 1;
            Err(format!(
                "the file changed since it was imported and cannot be read again ({e}); left in place"
            ))
        } else if args.dry_run {
            Ok(())
        } else {
            let res = std::fs::create_dir_all(&dir).and_then(|()| move_file(&src, &dst));
            match res {
                Ok(()) => {
                    if let Some(p) = src.parent() {
                        folders.insert(p.to_path_buf());
                    }
                    Ok(())
                }
                Err(e) => {
                    failed += 1;
                    Err(e.to_string())
                }
            }
        };
        moved.push((r, *modified, src, dst, status));
    }
    // The moved files' folders: import them so the catalogue marks those sessions gone.
    if !folders.is_empty() {
        let folders: Vec<PathBuf> = folders.into_iter().collect();
        store.import(
            &folders,
            &pisess_engine::ImportOptions::default(),
            &mut |_| {},
        )?;
    }
    let iso = |ms: Option<i64>| ms.map(pisess_engine::export::ms_to_iso);
    if ui.json {
        let sessions: Vec<serde_json::Value> = moved
            .iter()
            .map(|(r, m, src, dst, status)| {
                json!({
                    "sessionId": r.session_id,
                    "file": src.to_string_lossy(),
                    "modified": iso(*m),
                    "bytes": r.file_size,
                    "trashPath": dst.to_string_lossy(),
                    "error": status.as_ref().err(),
                })
            })
            .collect();
        ui.json_line(&json!({
            "type": "pruneSessions",
            "dryRun": args.dry_run,
            "olderThan": iso(Some(cutoff)),
            "trash": trash.to_string_lossy(),
            "sessions": sessions,
            "outsidePiFolder": outside,
        }))?;
    } else {
        let out = ui.out();
        let verb = if args.dry_run { "would move" } else { "moved" };
        let ok = moved.len() - failed;
        let bytes: u64 = moved
            .iter()
            .filter(|m| m.4.is_ok())
            .map(|m| m.0.file_size)
            .sum();
        writeln!(
            out,
            "{verb} {ok} session{} ({bytes} bytes) last modified before {} to {}",
            if ok == 1 { "" } else { "s" },
            iso(Some(cutoff)).unwrap_or_default(),
            trash.display()
        )?;
        if !moved.is_empty() {
            let mut t = comfy_table::Table::new();
            t.load_style(comfy_table::presets::NOTHING);
            t.set_header(vec!["session", "modified", "file", "to"]);
            for (r, m, src, dst, status) in &moved {
                t.add_row(vec![
                    safe(&r.session_id.chars().take(13).collect::<String>()).into_owned(),
                    iso(*m).unwrap_or_default(),
                    safe(&src.to_string_lossy()).into_owned(),
                    match status {
                        Ok(()) => safe(&dst.to_string_lossy()).into_owned(),
                        Err(e) => format!("not moved: {}", safe(e)),
                    },
                ]);
            }
            writeln!(out, "{}", crate::table::plain(&t))?;
        }
        if outside > 0 {
            writeln!(
                out,
                "{outside} old session(s) outside pi's session folder left alone (--any-folder \
                 moves them too)"
            )?;
        }
        if args.dry_run {
            writeln!(out, "dry run: nothing moved")?;
        } else if ok > 0 {
            writeln!(
                out,
                "nothing was deleted; move a file back to restore it (then `pisess import`)"
            )?;
        }
    }
    Ok(if failed > 0 {
        Outcome::PartialFailure
    } else {
        Outcome::Success
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    /// The cells read from the store (a parse of the branch's first entry) are read once a
    /// branch, though the table is laid out in two passes, and each row gets its own.
    #[test]
    fn the_branch_table_reads_each_first_entry_once() {
        let from: Arc<str> = Arc::from("0123456789");
        let branches: Vec<DroppedBranch> = (0..5)
            .map(|i| DroppedBranch {
                top: EntryKey(i),
                from_id: (i % 2 == 0).then(|| Arc::clone(&from)),
                entries: i + 1,
                bytes: 100 * i,
            })
            .collect();
        let mut reads = Vec::new();
        let mut out = Vec::new();
        branch_table(&branches, &mut out, |b| {
            reads.push(b.top.0);
            Ok([format!("id{}", b.top.0), "x".repeat(b.top.0 as usize * 3)])
        })
        .unwrap();
        assert_eq!(reads, [0, 1, 2, 3, 4]);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                " branch  from      entries  bytes  first entry",
                " id0     01234567  1        0",
                " id1     (root)    2        100    xxx",
                " id2     01234567  3        200    xxxxxx",
                " id3     (root)    4        300    xxxxxxxxx",
                " id4     01234567  5        400    xxxxxxxxxxxx",
            ]
        );
    }
}
