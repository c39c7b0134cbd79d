//! `pisess check`: read session files and report every problem, with file, line and byte.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use pisess_formats::open::open_regular;
use pisess_formats::value::DEEPEST;
use pisess_formats::{Event, Problem, SessionReader, Severity, TreeCheck};
use serde_json::json;

use crate::command_error::{CommandError, CommandResult, Outcome, answered};
use crate::commands::util::{Source, default_inputs, session_files};
use crate::ui::{Ui, safe};

/// Read session files and report every problem found, with its location.
///
/// Problems are glued records (recovered), malformed or partial lines, invalid UTF-8,
/// non-object lines, JSON nested deeper than pisess reads (4,096 levels), junk before the
/// header, files that are not sessions, v4 headers, future versions, bad field types, missing
/// and duplicate ids, orphans, parent cycles, labels of entries that do not exist, compactions
/// whose `firstKeptEntryId` is not on their path (pi keeps no message from before them; for a
/// v1 file, as its migration sets it). Notes (CRLF, BOM, blank lines, several roots, no
/// final newline) are shown but do not count as problems.
///
/// Exit status: 0 when every file is clean, 1 when problems were found, 2 when a file or a
/// folder could not be read at all (the summary counts unreadable folders apart from files).
/// A reader that stops early (`pisess check | head`) ends the check; the status is then that
/// of the files checked up to there.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Session files or folders (searched for *.jsonl). Default: pi's session folder.
    pub paths: Vec<PathBuf>,
    /// Show at most this many problems of one kind per file (0: all).
    #[arg(long, default_value_t = 20)]
    pub max_per_kind: usize,
}

/// Counts of one file's read.
#[derive(Debug, Default)]
struct FileReport {
    version: Option<f64>,
    entries: u64,
    problems: Vec<Problem>,
}

/// What is odd about an entry's `type` or `parentId` that the typed view read as `null`
/// although it holds another value than text or `null` (pi loads it: an entry of no known
/// type, a parent it cannot find). Parses the line again only when one of them is `null`.
fn odd_tree_field(e: &pisess_formats::Entry<'_>, json: &str) -> Option<String> {
    use pisess_formats::value::Field;
    if !matches!(e.type_name, Field::Null) && !matches!(e.parent_id, Field::Null) {
        return None;
    }
    let v: serde_json::Value = pisess_formats::value::parse_owned(json).ok()?;
    ["type", "parentId"].into_iter().find_map(|k| {
        let x = v.get(k).filter(|x| !x.is_null() && !x.is_string())?;
        let what = if k == "type" {
            "an entry of no known type"
        } else {
            "a root: no parent has it as id"
        };
        let mut text = pisess_formats::js::to_string(x);
        if text.chars().count() > 40 {
            text = text.chars().take(40).collect::<String>() + "…";
        }
        Some(format!("`{k}` is {text}, not text (read as {what})"))
    })
}

/// Reads one file and collects its problems, tree problems included.
fn check_file(path: &Path) -> std::io::Result<FileReport> {
    let file = open_regular(path)?;
    let mut report = FileReport::default();
    let mut tree: Option<TreeCheck> = None;
    // Each record's place (line, byte), for a v1 file's migrated copy, and whether the file
    // has a record whose migration the tree checks judge (a compaction, a label).
    let mut places: Vec<(u64, u64)> = Vec::new();
    let mut judged = false;
    let summary = SessionReader::new(file).read(|ev| {
        match ev {
            Event::Header(h) => {
                report.version = Some(h.version());
                tree = Some(TreeCheck::new(h.version()));
            }
            Event::Record(r, _) => {
                report.entries += 1;
                if report.version.is_some_and(|v| v < 2.0) {
                    places.push((r.line, r.offset));
                    judged |= r.entry.as_ref().is_ok_and(|e| {
                        matches!(
                            e.entry_type(),
                            pisess_formats::EntryType::Compaction
                                | pisess_formats::EntryType::Label
                        )
                    });
                }
                let odd;
                let bad = match &r.entry {
                    Err(msg) => Some(msg),
                    Ok(e) => {
                        odd = odd_tree_field(e, r.json);
                        e.bad_field.as_ref().or(odd.as_ref())
                    }
                };
                if let Some(msg) = bad
                    && r.is_object()
                {
                    let entry_type =
                        pisess_formats::value::parse_owned::<serde_json::Value>(r.json)
                            .ok()
                            .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
                            .unwrap_or_default();
                    report.problems.push(Problem {
                        line: r.line,
                        offset: r.offset,
                        kind: pisess_formats::ProblemKind::BadField {
                            entry_type,
                            message: within_the_line(msg),
                        },
                    });
                }
                // Each level takes two bytes at least, and one `[` or `{`: only a long line with
                // that many can nest too deep (counted fast, then measured).
                if r.json.len() > 2 * DEEPEST
                    && memchr::memchr2_iter(b'[', b'{', r.json.as_bytes())
                        .nth(DEEPEST)
                        .is_some()
                {
                    let depth = pisess_formats::value::nesting(r.json.as_bytes());
                    if depth > DEEPEST {
                        report.problems.push(Problem {
                            line: r.line,
                            offset: r.offset,
                            kind: pisess_formats::ProblemKind::TooDeep { depth },
                        });
                    }
                }
                if let Some(t) = &mut tree {
                    t.add(r);
                }
            }
            Event::Problem(p) => report.problems.push(p.clone()),
        }
        Ok::<(), std::convert::Infallible>(())
    });
    match summary {
        Ok(_) => {}
        Err(pisess_formats::ReadError::Io(e)) => return Err(e),
        Err(pisess_formats::ReadError::Stopped(never)) => match never {},
    }
    let v1 = report.version.is_some_and(|v| v < 2.0);
    if let Some(t) = tree {
        // pi's migration gives a v1 file's entries new ids: its first-kept and label
        // problems are those of the migrated copy, below.
        report.problems.extend(
            t.finish()
                .into_iter()
                .filter(|p| !(v1 && judged_by_migration(p))),
        );
    }
    if v1 && judged {
        report
            .problems
            .extend(migrated_tree_problems(path, &places));
    }
    // In file order, as a compiler lists them: the reader names some problems only later
    // (the junk before a header once the header is found), the tree checks at the end.
    report.problems.sort_by_key(|p| (p.line, p.offset));
    Ok(report)
}

/// The tree problems of a v1 file that only its migration shows: pi migrates a v1 file on
/// load (ids, a parent chain, `firstKeptEntryIndex` turned into the `firstKeptEntryId` of the
/// entry at that index, an old `firstKeptEntryId` kept when the index names none), so a
/// compaction can keep entries from no entry or from one off its path, and a label can name
/// no entry. `places` are the source's records' lines and bytes, in order: the migration
/// writes its header, then one line per record. A file the migration cannot read yields
/// nothing here (the read above reported why).
fn migrated_tree_problems(path: &Path, places: &[(u64, u64)]) -> Vec<Problem> {
    /// Feeds each migrated line to a v3 tree check, at its source record's place.
    struct Lines<'p> {
        pending: Vec<u8>,
        seen: usize,
        places: &'p [(u64, u64)],
        check: TreeCheck,
    }
    impl Lines<'_> {
        fn take(&mut self, line: &[u8]) {
            let n = self.seen;
            self.seen += 1;
            // Line 0 is the header.
            let Some(&(line_no, offset)) = n.checked_sub(1).and_then(|i| self.places.get(i)) else {
                return;
            };
            if let Ok(text) = std::str::from_utf8(line)
                && let Ok(e) = pisess_formats::Entry::parse(text)
                && e.id().is_some()
            {
                self.check.add_entry(&e, line_no, offset);
            }
        }
    }
    impl Write for Lines<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.pending.extend_from_slice(buf);
            let mut start = 0;
            while let Some(i) = memchr::memchr(b'\n', &self.pending[start..]) {
                let line = self.pending[start..start + i].to_vec();
                self.take(&line);
                start += i + 1;
            }
            self.pending.drain(..start);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut sink = Lines {
        pending: Vec::new(),
        seen: 0,
        places,
        check: TreeCheck::new(3.0),
    };
    if pisess_migrate::migrate_file(path, &mut sink).is_err() {
        return Vec::new();
    }
    sink.check
        .finish()
        .into_iter()
        .filter(judged_by_migration)
        .collect()
}

/// Whether a v1 file's problem is one its migration decides (the ids the migration gives are
/// what a `firstKeptEntryId` or a label's target must name): reported from the migrated copy.
fn judged_by_migration(p: &Problem) -> bool {
    matches!(
        p.kind,
        pisess_formats::ProblemKind::FirstKeptNotOnPath { .. }
            | pisess_formats::ProblemKind::LabelTargetMissing { .. }
    )
}

/// Runs `pisess check`.
pub fn cmd_check(ui: &mut Ui, args: &CheckArgs) -> CommandResult {
    let (inputs, source) = default_inputs(&args.paths)?;
    match &source {
        Source::PiSessions(p) => eprintln!("checking pi's session folder {}", p.display()),
        Source::Samples(p) => eprintln!(
            "no pi session folder on this machine; checking the sample sessions in {}",
            p.display()
        ),
        Source::Given => {}
    }
    let (files, dir_errors) = session_files(&inputs);
    let mut tally = Tally {
        folders_failed: dir_errors.len(),
        ..Tally::default()
    };
    let written = report_all(ui, args, &files, &dir_errors, &mut tally);
    // A reader that stopped early (`pisess check | head`) ends the checking; the status is
    // what was found up to then, so problems already shown are never answered with 0.
    answered(tally.outcome(), written)
}

/// What the files checked so far hold: every file found is clean, has problems or is
/// unreadable; folders that could not be read are counted apart (how many files they hold
/// is unknown).
#[derive(Debug, Default)]
struct Tally {
    clean: usize,
    with_problems: usize,
    failed: usize,
    folders_failed: usize,
    totals: HashMap<Severity, usize>,
}

/// The number of problems of one severity, with its noun (`1 warning`, `2 warnings`).
fn count(tally: &Tally, severity: Severity, one: &str, many: &str) -> String {
    let n = tally.totals.get(&severity).copied().unwrap_or(0);
    crate::ui::count(n as u64, one, many)
}

impl Tally {
    fn outcome(&self) -> Outcome {
        if self.failed > 0 || self.folders_failed > 0 {
            Outcome::PartialFailure
        } else if self.with_problems > 0 {
            Outcome::Negative
        } else {
            Outcome::Success
        }
    }
}

/// Checks `files` in order and writes what each holds, then the summary, counting in `tally`
/// as it goes (so that a write that fails leaves the counts of what was checked).
fn report_all(
    ui: &mut Ui,
    args: &CheckArgs,
    files: &[PathBuf],
    dir_errors: &[(PathBuf, std::io::Error)],
    tally: &mut Tally,
) -> Result<(), CommandError> {
    for (dir, e) in dir_errors {
        let dir = dir.to_string_lossy();
        eprintln!("error: cannot read folder {}: {e}", safe(&dir));
        if ui.json {
            ui.json_line(&json!({"type": "error", "folder": dir, "message": e.to_string()}))?;
        }
    }
    for path in files {
        // Names are shown escaped (a name can hold terminal escapes), and in JSON as text
        // (lossily when not UTF-8).
        let name = path.to_string_lossy();
        let label = safe(&name);
        let report = match check_file(path) {
            Ok(r) => r,
            Err(e) => {
                tally.failed += 1;
                eprintln!("error: cannot read {label}: {e}");
                if ui.json {
                    ui.json_line(
                        &json!({"type": "error", "file": name, "message": e.to_string()}),
                    )?;
                }
                continue;
            }
        };
        let worst = report.problems.iter().map(Problem::severity).max();
        if worst.is_some_and(|s| s >= Severity::Warning) {
            tally.with_problems += 1;
        } else {
            tally.clean += 1;
        }
        for p in &report.problems {
            *tally.totals.entry(p.severity()).or_default() += 1;
        }
        if ui.json {
            for p in &report.problems {
                ui.json_line(&json!({
                    "type": "problem",
                    "file": name,
                    "line": p.line,
                    "offset": p.offset,
                    "severity": p.severity().to_string(),
                    "code": p.kind.code(),
                    "message": p.kind.to_string(),
                }))?;
            }
            ui.json_line(&json!({
                "type": "file",
                "file": name,
                "version": report.version.map(json_version),
                "entries": report.entries,
                "problems": report.problems.iter().filter(|p| p.severity() >= Severity::Warning).count(),
                "notes": report.problems.iter().filter(|p| p.severity() == Severity::Note).count(),
            }))?;
            continue;
        }
        let mut shown: HashMap<&'static str, usize> = HashMap::new();
        for p in &report.problems {
            let n = shown.entry(p.kind.code()).or_default();
            *n += 1;
            if args.max_per_kind == 0 || *n <= args.max_per_kind {
                let sev = p.severity().to_string();
                let sev = match p.severity() {
                    Severity::Error => ui.paint("1;31", &sev),
                    Severity::Warning => ui.paint("33", &sev),
                    Severity::Note => ui.paint("36", &sev),
                };
                let line = format!(
                    "{label}:{}: {sev}: {} (byte {})",
                    p.line,
                    safe(&p.kind.to_string()),
                    p.offset
                );
                writeln!(ui.out(), "{line}")?;
            }
        }
        for (code, n) in &shown {
            if args.max_per_kind > 0 && *n > args.max_per_kind {
                writeln!(
                    ui.out(),
                    "{label}: … and {} more {code}",
                    n - args.max_per_kind
                )?;
            }
        }
    }
    if !ui.json {
        let folders = match dir_errors.len() {
            0 => String::new(),
            1 => "; 1 folder could not be read".to_owned(),
            n => format!("; {n} folders could not be read"),
        };
        writeln!(
            ui.out(),
            "checked {} file(s): {} clean, {} with problems, {} unreadable \
             ({}, {}, {}){folders}",
            files.len(),
            tally.clean,
            tally.with_problems,
            tally.failed,
            count(tally, Severity::Error, "error", "errors"),
            count(tally, Severity::Warning, "warning", "warnings"),
            count(tally, Severity::Note, "note", "notes"),
        )?;
    }
    Ok(())
}

/// A header version as pi wrote it: `3`, not `3.0` (a fractional version is kept as is).
fn json_version(v: f64) -> serde_json::Value {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 9.0e15 {
        json!(v as i64)
    } else {
        json!(v)
    }
}

/// serde_json's position in a record, which is one line of the file: "… at line 1 column N"
/// becomes "… at column N", so it is not read as the file's line.
fn within_the_line(msg: &str) -> String {
    match msg.rsplit_once(" at line 1 column ") {
        Some((what, col)) if !col.is_empty() && col.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{what} at column {col}")
        }
        _ => msg.to_owned(),
    }
}
