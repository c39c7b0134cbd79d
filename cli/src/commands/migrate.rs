//! `pisess migrate`: v1/v2 → v3 with deterministic ids, one file to stdout or whole folders,
//! safely and in parallel.
//!
//! Invariants: a source is never opened for writing; every file written goes through a temp
//! file in the target's folder, fsync, rename and a folder fsync ([`atomic`]), so after a crash
//! or a kill each file is either fully migrated or byte-identical to what it was; a file that
//! was not fully parsed (skipped lines, glued records) is not written without `--force`; with
//! `--out` an existing file is never replaced (same bytes: left as it is; other bytes: left
//! alone and reported as failed); with `--in-place` a file whose length, modification time or
//! inode changed since it was read (pi appended to it) is left alone and reported as failed;
//! every file is tried before the exit status is decided.
//!
//! A file's durable steps (fsync of the temp file, backup, rename, folder fsync: [`commit`])
//! run on one committer thread while the `--jobs` workers migrate the next files, so no worker
//! waits for the disk; with `--verify` they stay on the worker (verification is CPU work). The
//! steps and their order for each file are the same either way.

pub(crate) mod atomic;
mod report;
mod verify;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs;
use std::io::{self, BufWriter, IsTerminal, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, anyhow};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pisess_formats::ProblemKind;
use pisess_formats::open::{not_regular, open_regular};
use pisess_migrate::{MigrateError, MigrationOutcome, migrate_file, migrate_reader};
use rayon::prelude::*;

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::commands::util::{Source, default_inputs, session_files};
use crate::output::{self, Target};
use crate::ui::{self, SafeWriter, Ui, safe};

use report::{FileReport, Found, Status, Summary};
use verify::Probe;

/// The modes, safety and exit status (shown by `--help`, also while the command list gives the
/// migrate command a one-line summary of its own).
const MODES_HELP: &str = "\
Modes: --dry-run (the default) reads everything and writes nothing; --in-place replaces each \
file, keeping the original as FILE.v1.bak (see --backup-suffix, --no-backup; a symlink is \
followed: the file it names is replaced and backed up beside it, the link kept); --out DIR writes \
the migrated files under DIR with the same relative paths and never touches the sources (only \
files that need migrating are written there; a symlink there is followed, a device or FIFO left \
alone). --out never replaces a file: one already in DIR with the same bytes is left as it is \
(so a second run writes nothing), and one that differs (a migrated copy pi has appended to \
since, or another file of that name) is left alone and reported as failed; remove it to write \
it again.

Safety: every write is atomic (temp file in the same folder, fsync, rename, fsync of the folder) \
and keeps the file's mode and modification time, so an interrupted run leaves each file either \
migrated or untouched; temp files (.pisess-tmp-*) left by a killed run are removed by the next \
run. A file with skipped lines or recovered glued records is not written unless --force. A \
read-only file is not replaced. Running twice changes nothing the second time.

`pisess migrate FILE --stdout` prints one migrated file as JSONL instead (the source is not \
changed); lines that hold no entry (malformed, cut short) are left out, named on stderr, and \
make the exit status 2.

Exit status: 0 when every file was migrated, current or skipped; 2 when any file failed (after \
all files were tried).";

/// The most worker threads `--jobs` starts (each is a thread; the work is mostly I/O).
const MAX_JOBS: usize = 256;

/// Migrate v1/v2 session files to v3 with deterministic ids, safely and in parallel.
///
/// Finds every *.jsonl file under the PATHs (default: pi's session folder), detects its version
/// and migrates v1/v2 files to v3. Ids that pi would draw at random are derived from the session
/// id and the entry's position, so two runs give the same bytes. v3 files are left alone; v4
/// files, future versions and files that are not sessions are reported and left alone.
#[derive(Debug, clap::Args)]
#[command(after_long_help = MODES_HELP)]
pub struct MigrateArgs {
    /// Session files or folders (searched for *.jsonl). Default: pi's session folder.
    pub paths: Vec<PathBuf>,
    /// Print the migrated file to stdout (exactly one FILE).
    #[arg(long, conflicts_with_all = ["dry_run", "in_place", "out", "verify", "force"])]
    pub stdout: bool,
    /// Report what would be done and write nothing (the default).
    #[arg(long, conflicts_with_all = ["in_place", "out"])]
    pub dry_run: bool,
    /// Replace each file with its migration (keeping a backup unless --no-backup).
    #[arg(long, conflicts_with = "out")]
    pub in_place: bool,
    /// With --in-place: the original is kept as FILE followed by this suffix.
    #[arg(
        long,
        default_value = ".v1.bak",
        requires = "in_place",
        value_name = "SUFFIX"
    )]
    pub backup_suffix: String,
    /// With --in-place: keep no backup.
    #[arg(long, requires = "in_place", conflicts_with = "backup_suffix")]
    pub no_backup: bool,
    /// Write the migrated files under DIR, mirroring the folder structure.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Files migrated at once (default: the number of CPUs; at most the number of files, and
    /// 256).
    #[arg(long, short, value_name = "N")]
    pub jobs: Option<usize>,
    /// Re-read each written file and check every source entry is in it; a file that fails is
    /// restored from its backup (or never put in place) and reported.
    #[arg(long)]
    pub verify: bool,
    /// Write files that were not fully parsed (skipped lines, recovered glued records).
    #[arg(long)]
    pub force: bool,
}

/// Runs `pisess migrate`.
pub fn cmd_migrate(ui: &mut Ui, args: &MigrateArgs) -> CommandResult {
    if args.stdout {
        return cmd_stdout(ui, args);
    }
    cmd_bulk(ui, args)
}

/// `pisess migrate FILE --stdout`.
fn cmd_stdout(ui: &mut Ui, args: &MigrateArgs) -> CommandResult {
    let [path] = args.paths.as_slice() else {
        return Err(CommandError::with_hint(
            anyhow!(
                "--stdout takes exactly one FILE ({} given)",
                args.paths.len()
            ),
            "migrate one file at a time with --stdout",
        ));
    };
    crate::output::refuse_stdout_as_source(
        path,
        "write the migrated copy elsewhere, or use --in-place (which keeps a backup)",
    )?;
    let outcome = if ui.tty {
        // A terminal sees the file with escapes shown, never acted on (see `ui`).
        let mut w = SafeWriter::new(ui.out());
        let o = pisess_migrate::migrate_file(path, &mut w);
        w.finish()?;
        o
    } else {
        pisess_migrate::migrate_file(path, ui.out())
    }
    .with_context(|| format!("cannot migrate {}", path.display()))?;
    for p in &outcome.problems {
        eprintln!(
            "{}:{}: {}: {}",
            path.display(),
            p.line,
            p.severity(),
            safe(&p.kind.to_string())
        );
    }
    for n in &outcome.notes {
        eprintln!("{}: note: {}", path.display(), safe(&n.to_string()));
    }
    // The output is complete up to what pi itself drops; say so in the exit status, as the
    // bulk modes refuse such a file without --force.
    let lost = outcome.lines_skipped + outcome.falsy_dropped;
    if lost > 0 {
        eprintln!(
            "{}: {} left out of the output (no entry in them: malformed, cut short or falsy; \
             see above)",
            path.display(),
            ui::count(lost, "line", "lines")
        );
        return Ok(Outcome::PartialFailure);
    }
    Ok(Outcome::Success)
}

/// Where the output of a run goes.
#[derive(Debug, Clone)]
enum Mode {
    DryRun,
    InPlace { backup_suffix: Option<String> },
    Out(PathBuf),
}

impl Mode {
    fn name(&self) -> &'static str {
        match self {
            Self::DryRun => "dry-run",
            Self::InPlace { .. } => "in-place",
            Self::Out(_) => "out",
        }
    }
}

/// One file to migrate.
#[derive(Debug)]
struct Job {
    src: PathBuf,
    /// Where the migration goes (`None` in a dry run).
    target: Option<PathBuf>,
    /// An earlier file of the run whose migration goes to the same `--out` path (files of one
    /// name from different inputs): this one is not migrated.
    clash: Option<PathBuf>,
}

/// Options every file sees.
struct Opts {
    mode: Mode,
    verify: bool,
    force: bool,
}

/// The bulk modes.
fn cmd_bulk(ui: &mut Ui, args: &MigrateArgs) -> CommandResult {
    // Declared first, so it is dropped last, after every worker has finished.
    let mut _made = MadeFolders(None);
    let mode = if args.in_place {
        Mode::InPlace {
            backup_suffix: (!args.no_backup).then(|| args.backup_suffix.clone()),
        }
    } else if let Some(out) = &args.out {
        // Something there that is not a folder (a file, a FIFO) would fail below as "File
        // exists", which names neither the cause nor the way out.
        if let Ok(md) = fs::metadata(out)
            && !md.is_dir()
        {
            return Err(CommandError::with_hint(
                anyhow!("--out {} exists and is not a folder", out.display()),
                "give a folder (created if missing) to write the migrated files under",
            ));
        }
        _made = MadeFolders(first_missing(out));
        fs::create_dir_all(out)
            .with_context(|| format!("cannot create the output folder {}", out.display()))?;
        let out = fs::canonicalize(out)
            .with_context(|| format!("cannot resolve the output folder {}", out.display()))?;
        Mode::Out(out)
    } else {
        Mode::DryRun
    };
    if matches!(mode, Mode::InPlace { backup_suffix: Some(ref s) } if s.is_empty() || s.contains('/'))
    {
        return Err(CommandError::with_hint(
            anyhow!("the backup suffix must be non-empty and hold no `/`"),
            "use e.g. --backup-suffix .v1.bak, or --no-backup",
        ));
    }
    if let Mode::InPlace {
        backup_suffix: Some(s),
    } = &mode
        && s.ends_with(".jsonl")
    {
        // pi lists every `*.jsonl` of a session folder as a session, and `pisess import`
        // takes it: the backup would show up as a second copy of the session.
        return Err(CommandError::with_hint(
            anyhow!(
                "the backup suffix {} ends in .jsonl: pi and `pisess import` would take each \
                 backup for a session of its own",
                safe(s)
            ),
            "use e.g. --backup-suffix .v1.bak, or --no-backup",
        ));
    }

    let (inputs, source) = default_inputs(&args.paths)?;
    match &source {
        Source::PiSessions(p) => eprintln!("migrating pi's session folder {}", p.display()),
        Source::Samples(p) => {
            if matches!(mode, Mode::InPlace { .. }) {
                return Err(CommandError::with_hint(
                    anyhow!("there is no pi session folder on this machine"),
                    "give the folders to migrate as arguments",
                ));
            }
            eprintln!(
                "no pi session folder on this machine; using the sample sessions in {}",
                p.display()
            );
        }
        Source::Given => {}
    }

    let (jobs, dir_errors, in_out) = plan_jobs(&inputs, &mode);
    if let (Mode::Out(out), 1..) = (&mode, in_out) {
        // What --out writes is not read again; said, as a folder given as its own --out
        // would otherwise migrate nothing without a word.
        let what = format!(
            "{in_out} file{} inside the output folder {} left out (what --out writes is not \
             migrated again)",
            if in_out == 1 { "" } else { "s" },
            out.display()
        );
        if jobs.is_empty() {
            return Err(CommandError::with_hint(
                anyhow!("nothing to migrate: {what}"),
                "give --out a folder outside the inputs, or use --in-place (with backups) to \
                 migrate files where they are",
            ));
        }
        eprintln!("note: {what}");
    }
    for (dir, e) in &dir_errors {
        eprintln!("error: cannot read folder {}: {e}", dir.display());
    }

    // Temp files of a killed run: removed before writing beside them again.
    let mut stale = 0u64;
    if !matches!(mode, Mode::DryRun) {
        let dirs: BTreeSet<&Path> = jobs
            .iter()
            .filter_map(|j| j.target.as_deref().and_then(Path::parent))
            .collect();
        for d in dirs {
            stale += atomic::clean_stale(d) as u64;
        }
    }

    // No more workers than files: each starts a thread, and `--jobs 100000` over one file
    // spent minutes starting threads that had nothing to do.
    let threads = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
        .min(jobs.len())
        .clamp(1, MAX_JOBS);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("cannot start the worker threads")?;
    let opts = Opts {
        mode: mode.clone(),
        verify: args.verify,
        force: args.force,
    };
    let bar = progress_bar(&jobs);
    let done = AtomicU64::new(0);
    let total = jobs.len();
    let tick = |bytes: u64| {
        if let Some(bar) = &bar {
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            bar.set_message(format!("{n}/{total} files"));
            bar.inc(bytes);
        }
    };
    // Files waiting for the committer at most (each holds a written temp file).
    let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Box<Pending>)>(threads * 2);
    let (mut reports, committed) = std::thread::scope(|scope| {
        let opts = &opts;
        let tick = &tick;
        let commit_one = move |p: Box<Pending>| {
            let r = commit(*p, opts);
            tick(r.bytes_read);
            r
        };
        let committer = scope.spawn(move || {
            rx.into_iter()
                .map(|(i, p)| (i, commit_one(p)))
                .collect::<Vec<_>>()
        });
        let reports: Vec<Option<FileReport>> = pool.install(|| {
            jobs.par_iter()
                .enumerate()
                .map_with(tx, |tx, (i, job)| match process(job, opts) {
                    Step::Done(r) => {
                        tick(r.bytes_read);
                        Some(r)
                    }
                    // The committer has stopped only if it panicked: commit here.
                    Step::Commit(p) => tx.send((i, p)).err().map(|e| commit_one(e.0.1)),
                })
                .collect()
        });
        (reports, committer.join())
    });
    let committed =
        committed.map_err(|_| anyhow!("the thread that puts migrated files in place panicked"))?;
    for (i, r) in committed {
        if let Some(slot) = reports.get_mut(i) {
            *slot = Some(r);
        }
    }
    let reports: Vec<FileReport> = reports
        .into_iter()
        .collect::<Option<_>>()
        .ok_or_else(|| anyhow!("a file was neither migrated nor reported"))?;
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }

    let mut summary = Summary::of(&reports, mode.name());
    summary.stale_temp_files_removed = stale;
    summary.unreadable_folders = dir_errors.len() as u64;
    let dry_run = matches!(mode, Mode::DryRun);
    for r in &reports {
        if r.status == Status::Failed {
            eprintln!(
                "error: {}: {}",
                safe(&r.file),
                safe(r.reason.as_deref().unwrap_or("failed"))
            );
        }
    }
    if ui.json {
        for r in &reports {
            ui.json_line(&serde_json::to_value(r)?)?;
        }
        ui.json_line(&serde_json::to_value(&summary)?)?;
    } else {
        for r in &reports {
            if let Some(l) = report::line(r) {
                writeln!(ui.out(), "{l}")?;
            }
        }
        let table = summary.table(ui.tty, dry_run);
        writeln!(ui.out(), "{table}")?;
        if dry_run && summary.migrated > 0 {
            eprintln!("hint: nothing was written; use --in-place or --out DIR to migrate");
        }
    }
    Ok(if summary.failed > 0 || !dir_errors.is_empty() {
        Outcome::PartialFailure
    } else {
        Outcome::Success
    })
}

/// The files under the inputs, each with its target; duplicates and files inside the output
/// folder are left out (how many of the latter: the last member).
fn plan_jobs(inputs: &[PathBuf], mode: &Mode) -> (Vec<Job>, Vec<(PathBuf, io::Error)>, usize) {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    let mut seen = HashSet::new();
    let mut in_out = 0usize;
    // --out targets taken, by the file that takes each (the first in argument order, so that
    // the outcome does not depend on which worker gets there first).
    let mut taken: HashMap<PathBuf, PathBuf> = HashMap::new();
    for input in inputs {
        let (files, errs) = session_files(std::slice::from_ref(input));
        errors.extend(errs);
        for src in files {
            let key = fs::canonicalize(&src).unwrap_or_else(|_| src.clone());
            if let Mode::Out(out) = mode
                && key.starts_with(out)
            {
                in_out += 1;
                continue;
            }
            if !seen.insert(key.clone()) {
                continue;
            }
            let target = match mode {
                Mode::DryRun => None,
                // A symlink is followed: the file it names is migrated (and backed up beside
                // it), and the link stays a link, as `--out` treats links.
                Mode::InPlace { .. } => Some(if src.is_symlink() { key } else { src.clone() }),
                Mode::Out(out) => {
                    let rel = if input.is_dir() {
                        src.strip_prefix(input).map(Path::to_path_buf).ok()
                    } else {
                        None
                    };
                    let rel = rel
                        .unwrap_or_else(|| src.file_name().map(PathBuf::from).unwrap_or_default());
                    Some(out.join(rel))
                }
            };
            let clash = match (mode, &target) {
                (Mode::Out(_), Some(t)) => match taken.get(t) {
                    Some(first) => Some(first.clone()),
                    None => {
                        taken.insert(t.clone(), src.clone());
                        None
                    }
                },
                _ => None,
            };
            jobs.push(Job { src, target, clash });
        }
    }
    (jobs, errors, in_out)
}

/// A progress bar on stderr when it is a terminal.
fn progress_bar(jobs: &[Job]) -> Option<ProgressBar> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let bytes: u64 = jobs
        .iter()
        .filter_map(|j| fs::metadata(&j.src).ok())
        .map(|m| m.len())
        .sum();
    let style = ProgressStyle::with_template(
        "{spinner} {msg} [{wide_bar}] {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}",
    )
    .ok()?
    .progress_chars("=> ");
    let bar = ProgressBar::with_draw_target(Some(bytes), ProgressDrawTarget::stderr())
        .with_style(style)
        .with_message(format!("0/{} files", jobs.len()));
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    Some(bar)
}

/// Whether a migration read every line of its source.
fn fully_parsed(o: &MigrationOutcome) -> bool {
    o.lines_skipped == 0
        && o.glued_recovered == 0
        && o.unparsable_kept().next().is_none()
        && !o.problems.iter().any(|p| {
            matches!(
                p.kind,
                ProblemKind::Malformed { .. }
                    | ProblemKind::PartialLastLine
                    | ProblemKind::InvalidUtf8 { .. }
                    | ProblemKind::Glued { .. }
                    | ProblemKind::JunkBeforeHeader { .. }
            )
        })
}

/// Counts what is written to it.
#[derive(Default)]
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a worker leaves of a file: its report, or a written temp file for [`commit`].
enum Step {
    Done(FileReport),
    Commit(Box<Pending>),
}

impl From<FileReport> for Step {
    fn from(r: FileReport) -> Self {
        Self::Done(r)
    }
}

/// A migrated file written to its temp file and not yet flushed or put in place.
struct Pending {
    r: FileReport,
    tmp: atomic::TempFile,
    src: PathBuf,
    target: PathBuf,
    meta: fs::Metadata,
}

/// Migrates one file as the options say, up to its written temp file; never panics on a bad
/// file.
fn process(job: &Job, opts: &Opts) -> Step {
    let dry_run = matches!(opts.mode, Mode::DryRun);
    let mut r = FileReport::new(&job.src, dry_run);
    let meta = match fs::metadata(&job.src) {
        Ok(m) if m.is_file() => m,
        Ok(m) => {
            let e = not_regular(m.file_type());
            return r.end(Status::Failed, format!("cannot read: {e}")).into();
        }
        Err(e) => return r.end(Status::Failed, format!("cannot read: {e}")).into(),
    };
    r.bytes_read = meta.len();
    let plan = match verify::probe(&job.src) {
        Err(e) => return r.end(Status::Failed, format!("cannot read: {e}")).into(),
        Ok(Probe::Rejected(kind)) => {
            let (found, why) = match kind {
                ProblemKind::V4Header => (Found::V4, "pi's v4 format; left alone".to_owned()),
                ProblemKind::Empty => (Found::Empty, "no JSON value in the file".to_owned()),
                other => (Found::NotASession, other.to_string()),
            };
            r.found = found;
            return r.end(Status::Skipped, why).into();
        }
        Ok(Probe::Header(plan)) => plan,
    };
    if plan.version.is_nan() {
        r.found = Found::UnknownVersion;
        return r
            .end(
                Status::Skipped,
                "the header's version is not a number".to_owned(),
            )
            .into();
    }
    if !plan.rewrite {
        if plan.version > 3.0 {
            r.found = Found::Future;
            return r
                .end(
                    Status::Skipped,
                    format!("version {} is newer than 3; left alone", plan.version),
                )
                .into();
        }
        r.found = Found::V3;
        return r.end(Status::Current, None).into();
    }
    r.found = if plan.v1_to_v2 { Found::V1 } else { Found::V2 };
    if let (Some(first), Some(target)) = (&job.clash, &job.target) {
        return r
            .end(
                Status::Failed,
                format!(
                    "not migrated: {} is also the --out path of {} (files of one name under \
                     different inputs); give them separate --out folders",
                    target.display(),
                    first.display()
                ),
            )
            .into();
    }

    let Some(target) = &job.target else {
        // Dry run: migrate into a counter.
        return match migrate_exact(&job.src, || Ok(Counter::default())) {
            Ok(o) => finish_counts(r, &o, opts.force),
            Err(e) => r.end(Status::Failed, e.to_string()),
        }
        .into();
    };
    write_one(r, job, target, &meta, opts)
}

/// Migrates `src` into the writer `out` gives, in one pass; in the rare case where one pass
/// cannot resolve a v1 forward reference as pi would (the outcome is not exact), starts again on
/// a fresh writer with the exact two-pass [`migrate_file`].
fn migrate_exact<W: Write>(
    src: &Path,
    mut out: impl FnMut() -> io::Result<W>,
) -> Result<MigrationOutcome, MigrateError> {
    let once = |w: W, two_pass: bool| {
        let mut w = w;
        let o = if two_pass {
            migrate_file(src, &mut w)?
        } else {
            let f = open_regular(src).map_err(MigrateError::Read)?;
            migrate_reader(f, &mut w)?
        };
        w.flush().map_err(MigrateError::Write)?;
        Ok(o)
    };
    let o = once(out().map_err(MigrateError::Write)?, false)?;
    if o.exact {
        return Ok(o);
    }
    once(out().map_err(MigrateError::Write)?, true)
}

/// Fills the counts of a migration and decides between migrated and skipped.
fn finish_counts(mut r: FileReport, o: &MigrationOutcome, force: bool) -> FileReport {
    r.entries = o.entries;
    r.bytes_written = o.bytes_written;
    r.glued_recovered = o.glued_recovered;
    r.bad_lines_skipped = o.lines_skipped;
    if !force && !fully_parsed(o) {
        // Records pisess cannot read (a number beyond the double range, nesting deeper than
        // it reads), kept outside the parent chain where pi's migration chains them.
        let unreadable = match o.unparsable_kept().next() {
            None => String::new(),
            Some(first) => format!(
                ", {} record(s) pisess cannot read kept outside the parent chain, where pi \
                 chains them (first: {})",
                o.unparsable_kept().count(),
                safe(&first.to_string())
            ),
        };
        let why = format!(
            "not fully parsed ({} bad line(s) skipped, {} glued record(s) recovered{unreadable}); \
             --force writes it anyway",
            o.lines_skipped, o.glued_recovered
        );
        return r.end(Status::Skipped, why);
    }
    r.end(Status::Migrated, None)
}

/// Migrates `job.src` into a temp file beside `target`; the rest ([`commit`]) is left to the
/// committer thread, or done here with `--verify`.
fn write_one(r: FileReport, job: &Job, target: &Path, meta: &fs::Metadata, opts: &Opts) -> Step {
    let fail = |r: FileReport, why: String| r.end(Status::Failed, why).into();
    let Some(dir) = target.parent() else {
        return fail(r, "the target has no folder".into());
    };
    let mut target = target.to_path_buf();
    if let Mode::Out(_) = opts.mode {
        if let Err(e) = fs::create_dir_all(dir) {
            return fail(r, format!("cannot create {}: {e}", dir.display()));
        }
        if output::same_file(&job.src, &target) {
            return fail(r, "the output is the source; use --in-place".into());
        }
        // A link under DIR is followed (its target written unless it holds other bytes: see
        // `commit`; the link kept); anything but a file there is left alone: a migrated session
        // is a file, and `--verify` reads it back.
        target = match output::resolve(&target) {
            Ok(Target::Replace(p)) => p,
            Ok(Target::Stream(_)) => {
                let why = format!(
                    "{} is a device, FIFO or socket, not a file; left alone",
                    target.display()
                );
                return fail(r, why);
            }
            Err(e) => return fail(r, e.to_string()),
        };
    }
    let Some(dir) = target.parent() else {
        return fail(r, "the target has no folder".into());
    };
    let name = target.file_name().unwrap_or_default();
    let tmp = match atomic::TempFile::create(dir, name) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                r,
                format!("cannot create a temp file in {}: {e}", dir.display()),
            );
        }
    };
    let written = match tmp.file() {
        Ok(mut f) => migrate_exact(&job.src, || {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            Ok(BufWriter::with_capacity(256 << 10, f))
        }),
        Err(e) => Err(MigrateError::Write(e)),
    };
    let outcome = match written {
        Ok(o) => o,
        Err(e) => return fail(r, e.to_string()),
    };
    let r = finish_counts(r, &outcome, opts.force);
    if r.status != Status::Migrated {
        return r.into(); // the temp file is removed on drop
    }
    // A read-only file is the user's way of saying "do not change this" (rename would not
    // stop us: it needs only the folder to be writable).
    if matches!(opts.mode, Mode::InPlace { .. }) && meta.permissions().readonly() {
        return fail(r, "the file is read-only; left alone".into());
    }
    let p = Pending {
        r,
        tmp,
        src: job.src.clone(),
        target,
        meta: meta.clone(),
    };
    if opts.verify {
        return commit(p, opts).into();
    }
    Step::Commit(Box::new(p))
}

/// Flushes a written temp file and puts it in place: fsync, the backup in place mode, the
/// check before or after the rename with `--verify`, the rename and the folder fsync.
fn commit(p: Pending, opts: &Opts) -> FileReport {
    let Pending {
        mut r,
        tmp,
        src,
        target,
        meta,
    } = p;
    let fail = |r: FileReport, why: String| r.end(Status::Failed, why);
    // In place, the new file takes the old one's owner; a copy under --out is the user's.
    if let Err(e) = tmp.finish(&meta, matches!(opts.mode, Mode::InPlace { .. })) {
        return fail(r, format!("cannot write the temp file: {e}"));
    }
    // pi appends to a session by its path: a line appended since the file was read would go to
    // the old file and be lost by the rename. Such a file is left alone (the check is made just
    // before the backup and the rename; what remains is the instant between them).
    if matches!(opts.mode, Mode::InPlace { .. })
        && let Some(change) = atomic::changed_since(&target, &meta)
    {
        let why = format!(
            "{change} while it was being migrated (is pi writing to it?); left alone, run again \
             when it is idle"
        );
        return fail(r, why);
    }
    let backup = match &opts.mode {
        Mode::InPlace {
            backup_suffix: Some(suffix),
        } => {
            let mut b = target.clone().into_os_string();
            b.push(suffix);
            let b = PathBuf::from(b);
            // The suffix alone may not say it (`x.json` + `l`).
            if b.as_os_str().as_encoded_bytes().ends_with(b".jsonl") {
                return fail(
                    r,
                    format!(
                        "the backup {} would end in .jsonl: pi and `pisess import` would take it \
                         for a session of its own; left alone",
                        safe(&b.to_string_lossy())
                    ),
                );
            }
            if let Err(e) = atomic::make_backup(&target, &b) {
                return fail(r, e.to_string());
            }
            r.backup = Some(b.to_string_lossy().into_owned());
            Some(b)
        }
        _ => None,
    };
    // Without a backup, check the temp file before it replaces anything.
    if opts.verify
        && backup.is_none()
        && let Err(e) = verify::verify(tmp.path(), &src)
    {
        r.verified = Some(false);
        return fail(r, format!("verification failed, nothing written: {e}"));
    }
    if let Mode::Out(_) = opts.mode {
        // `--out` writes copies: one already at the target may hold work done since (pi
        // appends to a migrated copy) or be another file of that name, so it is never
        // replaced; one with the very same bytes is the migration, already there.
        match tmp.persist_new(&target) {
            Ok(atomic::Placed::Written) => {}
            Ok(atomic::Placed::AlreadyThere) => {
                // Nothing was written: the run counts it as current, not as migrated.
                r.status = Status::Current;
                r.bytes_written = 0;
                r.reason = Some("already there, the same bytes; not rewritten".into());
            }
            Ok(atomic::Placed::Differs) => {
                let why = format!(
                    "{} exists and differs from the migration; left alone (remove it to write \
                     it again)",
                    target.display()
                );
                return fail(r, why);
            }
            Err(e) => return fail(r, format!("cannot put {} in place: {e}", target.display())),
        }
    } else if let Err(e) = tmp.persist(&target) {
        return fail(r, format!("cannot rename into place: {e}"));
    }
    r.output = Some(target.to_string_lossy().into_owned());
    if opts.verify {
        if let Some(b) = &backup
            && let Err(e) = verify::verify(&target, b)
        {
            r.verified = Some(false);
            let restored = match atomic::copy_atomic(b, &target) {
                Ok(()) => "restored from the backup".to_owned(),
                Err(re) => format!("RESTORING FROM {} FAILED: {re}", b.display()),
            };
            r.output = None;
            return fail(r, format!("verification failed ({e}); {restored}"));
        }
        r.verified = Some(true);
    }
    r
}

/// The folders `--out` created that are still empty when the command ends (a full disk, every
/// input failed or was left out): removed again on drop, deepest first, so such a run leaves
/// nothing behind. Only what lies under the topmost folder this run created is looked at, and
/// `remove_dir` removes only an empty folder, so no folder that was there before, and none
/// that holds a file, is touched.
struct MadeFolders(Option<PathBuf>);

impl Drop for MadeFolders {
    fn drop(&mut self) {
        let Some(top) = self.0.take() else {
            return;
        };
        // Every folder under `top` (links not followed), found without recursion.
        let mut folders = vec![top];
        let mut next = 0;
        while let Some(dir) = folders.get(next).cloned() {
            next += 1;
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    folders.push(e.path());
                }
            }
        }
        // Breadth-first order: children after their parents, so removing in reverse removes
        // each folder after everything under it.
        for dir in folders.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// The topmost of `path` and its ancestors that does not exist (what `create_dir_all(path)`
/// would create first), or `None` when `path` exists.
fn first_missing(path: &Path) -> Option<PathBuf> {
    let mut missing = None;
    for p in path.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        if fs::symlink_metadata(p).is_ok() {
            break;
        }
        missing = Some(p.to_path_buf());
    }
    missing
}
