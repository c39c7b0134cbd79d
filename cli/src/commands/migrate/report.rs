//! What happened to each file, the totals, and how both are shown (text, table, JSON Lines).

use std::collections::BTreeMap;
use std::path::Path;

use comfy_table::{ContentArrangement, Table, presets};
use serde::Serialize;

/// What a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Found {
    /// A v1 session (no ids).
    V1,
    /// A v2 session.
    V2,
    /// A v3 session (current).
    V3,
    /// A header whose version is newer than 3.
    Future,
    /// A header whose version is not a number.
    UnknownVersion,
    /// pi's v4 format.
    V4,
    /// Not a pi session.
    NotASession,
    /// No JSON value at all.
    Empty,
    /// Could not be read.
    Unreadable,
}

impl Found {
    /// The label used in tables and JSON.
    pub fn label(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2 => "v2",
            Self::V3 => "v3",
            Self::Future => "future",
            Self::UnknownVersion => "unknown-version",
            Self::V4 => "v4",
            Self::NotASession => "not-a-session",
            Self::Empty => "empty",
            Self::Unreadable => "unreadable",
        }
    }
}

/// What was done with a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Written (or, in a dry run, would be).
    Migrated,
    /// Already v3: left alone; or (`--out`) its migration is already in the output folder,
    /// byte for byte: nothing written.
    Current,
    /// Left alone on purpose (not a session, v4, not fully parsed without `--force`, …).
    Skipped,
    /// Something went wrong; the file is untouched (or restored).
    Failed,
}

/// One file's record (`{"type":"file",…}` in JSON Lines; field names camelCase like pi's).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileReport {
    /// Always `"file"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The source file.
    pub file: String,
    /// The file written (absent when nothing was or would be written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The backup of the original (in-place mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// The format found.
    pub found: Found,
    /// What was done.
    pub status: Status,
    /// True in a dry run: `migrated` means "would be migrated".
    pub dry_run: bool,
    /// Why it was skipped or failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Entries after the header in the migrated output.
    pub entries: u64,
    /// Size of the source.
    pub bytes_read: u64,
    /// Size of the migrated output.
    pub bytes_written: u64,
    /// Records recovered from glued lines.
    pub glued_recovered: u64,
    /// Lines skipped because they hold no complete JSON value.
    pub bad_lines_skipped: u64,
    /// Whether `--verify` passed (absent without `--verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verified: Option<bool>,
}

impl FileReport {
    /// An empty record for `path`.
    pub fn new(path: &Path, dry_run: bool) -> Self {
        Self {
            kind: "file",
            file: path.to_string_lossy().into_owned(),
            output: None,
            backup: None,
            found: Found::Unreadable,
            status: Status::Failed,
            dry_run,
            reason: None,
            entries: 0,
            bytes_read: 0,
            bytes_written: 0,
            glued_recovered: 0,
            bad_lines_skipped: 0,
            verified: None,
        }
    }

    /// Marks the record with a final status and reason.
    pub fn end(mut self, status: Status, reason: impl Into<Option<String>>) -> Self {
        self.status = status;
        self.reason = reason.into();
        self
    }
}

/// Totals of a run (`{"type":"summary",…}`; field names camelCase like pi's).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Always `"summary"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The JSON schema version.
    pub schema: u32,
    /// `dry-run`, `in-place` or `out`.
    pub mode: &'static str,
    /// Files looked at.
    pub files: u64,
    /// Files by format found.
    pub found: BTreeMap<&'static str, u64>,
    /// Files migrated (in a dry run: that would be).
    pub migrated: u64,
    /// v3 files left alone.
    pub current: u64,
    /// Files skipped.
    pub skipped: u64,
    /// Files that failed.
    pub failed: u64,
    /// Entries in the migrated files.
    pub entries: u64,
    /// Bytes of the migrated sources.
    pub bytes_read: u64,
    /// Bytes of the migrated outputs.
    pub bytes_written: u64,
    /// Glued records recovered (in files migrated or skipped for it).
    pub glued_recovered: u64,
    /// Bad lines skipped (in files migrated or skipped for it).
    pub bad_lines_skipped: u64,
    /// Stale temp files of an earlier, interrupted run that were removed.
    pub stale_temp_files_removed: u64,
    /// Folders that could not be read.
    pub unreadable_folders: u64,
}

impl Summary {
    /// Totals of `reports`.
    pub fn of(reports: &[FileReport], mode: &'static str) -> Self {
        let mut s = Self {
            kind: "summary",
            schema: 1,
            mode,
            ..Self::default()
        };
        for r in reports {
            s.files += 1;
            *s.found.entry(r.found.label()).or_default() += 1;
            match r.status {
                Status::Migrated => {
                    s.migrated += 1;
                    s.entries += r.entries;
                    s.bytes_read += r.bytes_read;
                    s.bytes_written += r.bytes_written;
                }
                Status::Current => s.current += 1,
                Status::Skipped => s.skipped += 1,
                Status::Failed => s.failed += 1,
            }
            s.glued_recovered += r.glued_recovered;
            s.bad_lines_skipped += r.bad_lines_skipped;
        }
        s
    }

    /// The human table.
    pub fn table(&self, tty: bool, dry_run: bool) -> Table {
        let mut t = Table::new();
        if tty {
            t.load_style(presets::UTF8_FULL_CONDENSED)
                .set_content_arrangement(ContentArrangement::Dynamic);
        } else {
            t.load_style(presets::ASCII_BORDERS_ONLY_CONDENSED);
        }
        t.set_header(vec!["", "files"]);
        let found = self
            .found
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        t.add_row(vec![
            "found".to_owned(),
            format!("{} ({found})", self.files),
        ]);
        let migrated = if dry_run { "would migrate" } else { "migrated" };
        t.add_row(vec![migrated.to_owned(), self.migrated.to_string()]);
        t.add_row(vec!["already current".to_owned(), self.current.to_string()]);
        t.add_row(vec!["skipped".to_owned(), self.skipped.to_string()]);
        t.add_row(vec!["failed".to_owned(), self.failed.to_string()]);
        t.add_row(vec!["entries".to_owned(), self.entries.to_string()]);
        t.add_row(vec![
            "bytes".to_owned(),
            format!("{} read, {} written", self.bytes_read, self.bytes_written),
        ]);
        t.add_row(vec![
            "glued lines recovered".to_owned(),
            self.glued_recovered.to_string(),
        ]);
        t.add_row(vec![
            "bad lines skipped".to_owned(),
            self.bad_lines_skipped.to_string(),
        ]);
        if self.stale_temp_files_removed > 0 {
            t.add_row(vec![
                "stale temp files removed".to_owned(),
                self.stale_temp_files_removed.to_string(),
            ]);
        }
        t
    }
}

/// The text line for one file, or `None` when there is nothing to say (a current file).
pub fn line(r: &FileReport) -> Option<String> {
    let what = match r.status {
        Status::Current => return None,
        Status::Migrated if r.dry_run => "would migrate",
        Status::Migrated => "migrated",
        Status::Skipped => "skipped",
        Status::Failed => "FAILED",
    };
    let mut s = format!("{}: {what} ({}", r.file, r.found.label());
    if r.status == Status::Migrated {
        s.push_str(&format!(", {} entries", r.entries));
        if let Some(o) = &r.output
            && !r.dry_run
            && o != &r.file
        {
            s.push_str(&format!(" → {o}"));
        }
    }
    s.push(')');
    if let Some(reason) = &r.reason {
        s.push_str(": ");
        s.push_str(reason);
    }
    Some(crate::ui::safe(&s).into_owned())
}
