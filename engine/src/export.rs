//! Writing sessions back out.
//!
//! Invariants:
//! - exporting a v3 session writes the concatenation of its rows' `raw` bytes in file order,
//!   which is exactly the bytes imported (every physical line is a row, junk included, with its
//!   terminator and any byte order mark), so export is byte-identical to the source;
//! - rows are read in place from redb pages (no copy of the line bytes);
//! - a v1/v2 session's rows are its migrated lines, so its export is the migrated file;
//! - a branch export is a new valid session: a v3 header, then the path root → entry, each
//!   entry's `parentId` naming the entry before it (re-chained only where it did not).

use std::io::Write;

use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::SessionKey;
use crate::schema;

/// Why an export failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The output failed.
    #[error("cannot write the export")]
    Io(#[from] std::io::Error),
    /// The session is not in the store.
    #[error("no session {0} in the store")]
    NoSession(SessionKey),
    /// The entry is not a tree node (it has no id).
    #[error("entry {0} is not a tree node")]
    NotANode(crate::ids::EntryKey),
}

impl Snapshot {
    /// Writes a whole session as JSONL, byte-identical to the imported file. Returns the bytes
    /// written.
    ///
    /// Each row is checked against the blake3 it got at import: an export may be the only copy
    /// of a session whose file is gone, and a damaged row must not pass for it
    /// ([`StoreError::DamagedRow`]).
    pub fn export_session(&self, s: SessionKey, out: &mut dyn Write) -> Result<u64, ExportError> {
        self.write_rows(s, out, true)
    }

    /// The rows of session `s` into `out`; `checked`: each against its import blake3 first.
    /// Unchecked for comparing the stored bytes with a file: a damaged row is then a
    /// difference, which reading the file again mends.
    fn write_rows(
        &self,
        s: SessionKey,
        out: &mut dyn Write,
        checked: bool,
    ) -> Result<u64, ExportError> {
        if self.session(s)?.is_none() {
            return Err(ExportError::NoSession(s));
        }
        let mut n = 0u64;
        for key in self.row_runs(s)?.into_iter().flatten() {
            let e = crate::ids::EntryKey(key);
            let (step, line) = self
                .with_entry(e, |a| {
                    let step = match a.raw_bytes() {
                        Err(err) => Row::Unreadable(err),
                        Ok(raw) if checked && *blake3::hash(&raw).as_bytes() != a.hash => {
                            Row::Damaged
                        }
                        Ok(raw) => match out.write_all(&raw) {
                            Ok(()) => Row::Written(raw.len() as u64),
                            Err(err) => Row::WriteFailed(err),
                        },
                    };
                    (step, u64::from(a.line))
                })?
                .ok_or_else(|| StoreError::Inconsistent(format!("row {key} is missing")))?;
            match step {
                Row::Written(w) => n += w,
                Row::WriteFailed(err) => return Err(err.into()),
                Row::Damaged => return Err(self.damaged_row(e, s.0, line).into()),
                Row::Unreadable(err) => {
                    return Err(StoreError::CorruptRecord {
                        table: schema::ENTRIES_NAME,
                        key: key.to_string(),
                        source: <rkyv::rancor::Error as rkyv::rancor::Source>::new(err),
                    }
                    .into());
                }
            }
        }
        Ok(n)
    }
}

/// What [`Snapshot::write_rows`] did with one row.
enum Row {
    Written(u64),
    WriteFailed(std::io::Error),
    /// Its bytes no longer match their import blake3.
    Damaged,
    /// Its bytes do not decompress.
    Unreadable(std::io::Error),
}

impl Snapshot {
    /// Where the bytes of `file` first differ from session `s` as stored (a byte offset), or
    /// `None` when they are the same bytes: the file read once, beside the stored rows, and
    /// never held whole. Meaningful for a v3 session (an older one is stored migrated).
    pub fn first_difference(
        &self,
        s: SessionKey,
        file: &mut dyn std::io::Read,
    ) -> Result<Option<u64>, ExportError> {
        first_difference_of(file, |out| self.write_rows(s, out, false).map(drop))
    }
}

/// The offset of the first byte where what `write` writes differs from `file`'s bytes (read
/// alongside, never held whole; a file longer than what was written differs at its end), or
/// `None` when they are the same.
pub(crate) fn first_difference_of<E: From<std::io::Error>>(
    file: &mut dyn std::io::Read,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<Option<u64>, E> {
    let mut cmp = Compare {
        file,
        at: 0,
        differs: None,
        buf: Vec::new(),
    };
    write(&mut cmp)?;
    if cmp.differs.is_none() {
        // Bytes after the written ones: the file is longer.
        let mut one = [0u8; 1];
        if cmp.file.read(&mut one)? > 0 {
            cmp.differs = Some(cmp.at);
        }
    }
    Ok(cmp.differs)
}

impl Snapshot {
    /// Whether `file` (`size` bytes) was cut short: a strict prefix of session `s`'s stored
    /// bytes whose missing part holds more than white space (a lost final newline loses no
    /// entry). Two streaming passes over the stored rows; a file that cannot be read is not
    /// judged (`false`). Reading such a file over the stored session would drop the entries
    /// only the store still holds.
    pub fn is_cut_short(
        &self,
        s: SessionKey,
        file: &mut dyn std::io::Read,
        size: u64,
    ) -> Result<bool, StoreError> {
        match self.first_difference(s, file) {
            Ok(at) if at == Some(size) => {}
            Ok(_) => return Ok(false),
            Err(ExportError::Store(e)) => return Err(e),
            Err(_) => return Ok(false),
        }
        let mut tail = Tail {
            skip: size,
            meaningful: false,
        };
        match self.write_rows(s, &mut tail, false) {
            Ok(_) => Ok(tail.meaningful),
            Err(ExportError::Store(e)) => Err(e),
            Err(_) => Ok(false),
        }
    }
}

/// A writer that skips `skip` bytes and notes whether any later byte is not white space.
struct Tail {
    skip: u64,
    meaningful: bool,
}

impl std::io::Write for Tail {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let skipped = usize::try_from(self.skip)
            .unwrap_or(usize::MAX)
            .min(data.len());
        self.skip -= skipped as u64;
        if data[skipped..].iter().any(|b| !b.is_ascii_whitespace()) {
            self.meaningful = true;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A writer that compares what it is given with the next bytes of a file.
struct Compare<'a> {
    file: &'a mut dyn std::io::Read,
    /// Bytes compared so far.
    at: u64,
    /// The offset of the first difference.
    differs: Option<u64>,
    buf: Vec<u8>,
}

impl Write for Compare<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.differs.is_some() {
            return Ok(data.len());
        }
        self.buf.resize(data.len(), 0);
        let mut got = 0;
        while got < data.len() {
            match self.file.read(&mut self.buf[got..])? {
                0 => break,
                n => got += n,
            }
        }
        let same = data
            .iter()
            .zip(&self.buf[..got])
            .position(|(a, b)| a != b)
            .or((got < data.len()).then_some(got));
        match same {
            Some(i) => self.differs = Some(self.at + i as u64),
            None => self.at += data.len() as u64,
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What [`Snapshot::export_branch`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchExport {
    /// The new session's id (a UUIDv7).
    pub session_id: String,
    /// Entries written after the header.
    pub entries: u64,
    /// Entries whose `parentId` had to be rewritten to chain the path.
    pub rechained: u64,
    /// Bytes written.
    pub bytes: u64,
}

impl Snapshot {
    /// Writes the path root → `entry` as a new pi session: a v3 header with a new UUIDv7 id, the
    /// time now, the source's `cwd` and `parentSession` = the source file, then each entry of
    /// the path as stored (its JSON text), one per line. An entry whose `parentId` does not name
    /// the entry before it (a root that pointed at a missing id, or an entry whose cycle was cut)
    /// is re-chained: its JSON is re-serialised with the right `parentId` (pi's
    /// `JSON.stringify` form).
    pub fn export_branch(
        &self,
        s: SessionKey,
        entry: crate::ids::EntryKey,
        out: &mut dyn Write,
    ) -> Result<BranchExport, ExportError> {
        let Some(rec) = self.session(s)? else {
            return Err(ExportError::NoSession(s));
        };
        if self.link(entry)?.is_none() {
            return Err(ExportError::NotANode(entry));
        }
        let path = self.path_to_root(entry)?;
        let session_id = uuid::Uuid::now_v7().to_string();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut header = serde_json::Map::new();
        header.insert("type".into(), "session".into());
        header.insert("version".into(), 3.into());
        header.insert("id".into(), session_id.clone().into());
        header.insert("timestamp".into(), ms_to_iso(now).into());
        header.insert("cwd".into(), rec.cwd.clone().into());
        header.insert("parentSession".into(), rec.path.clone().into());
        let mut line = pisess_formats::js::to_string(&serde_json::Value::Object(header));
        line.push('\n');
        out.write_all(line.as_bytes())?;
        let mut report = BranchExport {
            session_id,
            entries: 0,
            rechained: 0,
            bytes: line.len() as u64,
        };
        let mut prev: Option<String> = None;
        for e in path {
            let (id, parent, json, intact, line) = self
                .with_entry(e, |a| {
                    (
                        a.id.as_ref().map(|t| t.as_str().to_owned()),
                        a.parent_id.as_ref().map(|t| t.as_str().to_owned()),
                        a.json_text().map(std::borrow::Cow::into_owned),
                        a.checked_raw_bytes().is_some(),
                        u64::from(a.line),
                    )
                })?
                .ok_or_else(|| StoreError::Inconsistent(format!("row {e} is missing")))?;
            // A new copy of the entries: a damaged row must not pass into it.
            if !intact {
                return Err(self.damaged_row(e, s.0, line).into());
            }
            let json = json.ok_or_else(|| {
                StoreError::Inconsistent(format!("entry {e} on a path is not UTF-8"))
            })?;
            let mut line = if parent == prev {
                json
            } else {
                // (Read again: a failure then names the file, line and entry.)
                let mut v = match pisess_formats::value::parse_owned::<serde_json::Value>(&json) {
                    Ok(v) => v,
                    Err(_) => self.entry_value(e)?,
                };
                if let Some(o) = v.as_object_mut() {
                    let p = prev.clone().map_or(serde_json::Value::Null, Into::into);
                    o.insert("parentId".into(), p);
                }
                report.rechained += 1;
                pisess_formats::js::to_string(&v)
            };
            line.push('\n');
            out.write_all(line.as_bytes())?;
            report.bytes += line.len() as u64;
            report.entries += 1;
            prev = id;
        }
        Ok(report)
    }
}

/// Unix milliseconds as ISO 8601 UTC with milliseconds (`2026-01-01T00:00:00.000Z`), as
/// JavaScript's `Date.prototype.toISOString` writes it: a year outside 0–9999 in the extended
/// form, a sign and six digits (`+275760-09-13T00:00:00.000Z`, `-000100-…`).
pub fn ms_to_iso(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    // Civil from days (Howard Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let year = if (0..=9999).contains(&y) {
        format!("{y:04}")
    } else if y < 0 {
        format!("-{:06}", -y)
    } else {
        format!("+{y:06}")
    };
    format!(
        "{year}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::ms_to_iso;
    use crate::import::iso_to_ms;

    #[test]
    fn iso_round_trips() {
        for ms in [0, 1_767_225_600_500, 951_782_400_000, 4_102_444_799_999] {
            assert_eq!(iso_to_ms(&ms_to_iso(ms)), Some(ms), "{}", ms_to_iso(ms));
        }
        assert_eq!(ms_to_iso(1_767_225_600_500), "2026-01-01T00:00:00.500Z");
    }

    #[test]
    fn years_outside_four_digits_are_written_as_javascript_writes_them() {
        // `new Date(8.64e15).toISOString()` and `new Date(Date.UTC(-100, 0, 1))…`,
        // `new Date(Date.UTC(10000, 0, 1))…` in node.
        assert_eq!(
            ms_to_iso(8_640_000_000_000_000),
            "+275760-09-13T00:00:00.000Z"
        );
        assert_eq!(
            ms_to_iso(-65_322_892_800_000),
            "-000100-01-01T00:00:00.000Z"
        );
        assert_eq!(
            ms_to_iso(253_402_300_800_000),
            "+010000-01-01T00:00:00.000Z"
        );
        assert_eq!(ms_to_iso(-62_167_219_200_000), "0000-01-01T00:00:00.000Z");
    }
}
