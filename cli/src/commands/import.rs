//! `pisess import [PATH...]`: bring session files into the store, incrementally.
//!
//! Invariants: every file is tried; failures are reported with their reason and give exit 2
//! at the end; progress goes to stderr only when stderr is a terminal; stdout carries the
//! summary (a table, or one JSON object with `--json`).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use pisess_engine::{
    ImportEvent, ImportOptions, ImportReport, Outcome as FileOutcome, Store, StoreError,
};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::commands::util::{Source, default_inputs};
use crate::session_arg::{open_store, open_store_read_to_write};
use crate::ui::{Ui, safe};

/// Arguments of `pisess import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Files and folders to import (default: pi's session folder).
    pub paths: Vec<PathBuf>,
    /// Read every file again from its first byte, even one whose size and time are unchanged
    /// or that only seems to have grown (an edit that kept the size and time, or one before
    /// lines appended since, is not seen otherwise).
    #[arg(long)]
    pub full: bool,
}

/// Runs `pisess import`.
pub fn cmd_import(ui: &mut Ui, args: &ImportArgs) -> CommandResult {
    let (inputs, source) = default_inputs(&args.paths)?;
    match &source {
        Source::Given => {}
        Source::PiSessions(d) => eprintln!("importing pi's session folder {}", d.display()),
        Source::Samples(d) => eprintln!(
            "pi's session folder does not exist; importing the samples in {}",
            d.display()
        ),
    }
    let start = Instant::now();
    // Nothing changed: answered from the copy of the store's catalogue beside it, without
    // opening the store (pisess_engine::source_copy), when there is a valid copy.
    let (report, store) = match pisess_engine::default_store_path()
        .ok()
        .filter(|_| !args.full)
        .and_then(|p| Store::unchanged_by_copy(&p, &inputs))
    {
        Some(report) => (report, None),
        None => {
            let opts = ImportOptions {
                full: args.full,
                ..ImportOptions::default()
            };
            let (report, store) = import_into_store(&inputs, &opts)?;
            (report, Some(store))
        }
    };
    let elapsed = start.elapsed();
    for f in &report.files {
        if f.outcome == FileOutcome::Failed {
            eprintln!(
                "failed: {}: {}",
                safe(&f.path.to_string_lossy()),
                safe(f.error.as_deref().unwrap_or("unknown error"))
            );
        } else if f.warned_lines > 0 {
            // Kept byte for byte (export gives the file back), but said: pi drops or
            // misreads such lines.
            let file = safe(&f.path.to_string_lossy()).into_owned();
            eprintln!(
                "warning: {file}: {} line{} that pi drops or misreads, kept as written (first: \
                 {}); `pisess check {file}` lists them",
                f.warned_lines,
                if f.warned_lines == 1 { "" } else { "s" },
                safe(f.first_warning.as_deref().unwrap_or("?"))
            );
        }
    }
    if let Some(store) = store {
        store.close()?;
    }
    let counts = [
        ("new", report.count(FileOutcome::New)),
        ("grown", report.count(FileOutcome::Grown)),
        ("unchanged", report.count(FileOutcome::Unchanged)),
        ("rewritten", report.count(FileOutcome::Rewritten)),
        ("failed", report.count(FileOutcome::Failed)),
    ];
    if ui.json {
        let mut o = serde_json::Map::new();
        o.insert("type".into(), "summary".into());
        o.insert("schema".into(), 1.into());
        for (k, n) in counts {
            o.insert(k.into(), n.into());
        }
        o.insert("gone".into(), report.gone.into());
        let warned: u64 = report.files.iter().map(|f| f.warned_lines).sum();
        o.insert("warnedLines".into(), warned.into());
        o.insert("entries".into(), report.entries_added().into());
        o.insert("bytes".into(), report.bytes_read().into());
        o.insert("seconds".into(), elapsed.as_secs_f64().into());
        ui.json_line(&serde_json::Value::Object(o))?;
    } else {
        let mut t = comfy_table::Table::new();
        t.load_style(comfy_table::presets::NOTHING);
        t.set_header(vec![
            "new",
            "grown",
            "unchanged",
            "rewritten",
            "failed",
            "entries",
            "bytes",
            "time",
        ]);
        let mut row: Vec<String> = counts.iter().map(|(_, n)| n.to_string()).collect();
        row.push(report.entries_added().to_string());
        row.push(report.bytes_read().to_string());
        row.push(format!("{:.2}s", elapsed.as_secs_f64()));
        t.add_row(row);
        writeln!(ui.out(), "{}", crate::table::plain(&t))?;
        if report.gone > 0 {
            // As rsync or git say what left: the sessions stay in the store, marked gone.
            writeln!(
                ui.out(),
                "gone: {} session{} whose file is no longer in the folder{} (kept in the store, \
                 left out of `pisess ls`)",
                report.gone,
                if report.gone == 1 { "" } else { "s" },
                if report.gone == 1 { "" } else { "s" },
            )?;
        }
    }
    Ok(if report.count(FileOutcome::Failed) > 0 {
        Outcome::PartialFailure
    } else {
        Outcome::Success
    })
}

/// Imports `inputs` through the store, opened read-only first: re-importing unchanged files
/// then writes nothing and takes no exclusive lock; the store is reopened for writing only when
/// a file changed. Returns the report and the store, still open.
fn import_into_store(
    inputs: &[PathBuf],
    opts: &ImportOptions,
) -> Result<(ImportReport, Store), CommandError> {
    let mut store = open_store_read_to_write()?;
    if store.is_absent() {
        // An import makes its store, even of a folder with nothing to import.
        drop(store);
        store = open_store()?;
    }
    let bar = std::io::stderr().is_terminal().then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} files {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    // The file being imported, named when the store fails (a full disk under it).
    let current = std::cell::RefCell::new(None::<PathBuf>);
    let mut on_event = |ev: ImportEvent<'_>| {
        if let ImportEvent::FileStart { path, .. } = ev {
            *current.borrow_mut() = Some(path.to_path_buf());
        }
        let Some(b) = &bar else { return };
        match ev {
            ImportEvent::Start { files } => b.set_length(files as u64),
            ImportEvent::FileDone(_) => b.inc(1),
            _ => {}
        }
    };
    let imported = match store.import(inputs, opts, &mut on_event) {
        Err(StoreError::ReadOnly { .. }) => {
            drop(store);
            store = open_store()?;
            store.import(inputs, opts, &mut on_event)
        }
        other => other,
    };
    let report = imported.map_err(|e| {
        let what = match current.borrow().as_deref() {
            Some(f) => format!(
                "cannot import {} into the store {}",
                safe(&f.to_string_lossy()),
                store.path().display()
            ),
            None => format!("cannot import into the store {}", store.path().display()),
        };
        CommandError::from(anyhow::Error::from(e).context(what))
    })?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok((report, store))
}
