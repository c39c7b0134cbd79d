//! Helpers shared by commands: finding session files, reading dates and ages, warnings.
//!
//! Times are milliseconds since the Unix epoch, UTC, as in pi's entries.

use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::command_error::CommandError;

/// Where the inputs of a command came from, so the output can say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Paths given on the command line.
    Given,
    /// pi's session folder.
    PiSessions(PathBuf),
    /// pi's session folder does not exist; the sample sessions shipped with pisess.
    Samples(PathBuf),
}

/// The sample sessions in the source tree (used when the machine has no pi sessions).
pub fn samples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/sessions")
}

/// The paths to work on: the given ones, else pi's session folder, else the samples.
pub fn default_inputs(given: &[PathBuf]) -> (Vec<PathBuf>, Source) {
    if !given.is_empty() {
        return (given.to_vec(), Source::Given);
    }
    match pisess_formats::layout::session_root() {
        Some(root) if root.is_dir() => (vec![root.clone()], Source::PiSessions(root)),
        _ => {
            let s = samples_dir();
            (vec![s.clone()], Source::Samples(s))
        }
    }
}

/// Every `.jsonl` file under the given paths (files as given; folders recursed, sorted),
/// without recursion on the call stack. Unreadable folders are returned as errors.
///
/// A folder walk takes regular files only, and symlinks whose target is one (or cannot be
/// looked at: reading it then says why); a FIFO, socket or device named `*.jsonl` is left out.
/// Symlinks to folders are not followed. A path given as a file is returned whatever it is:
/// open it with [`pisess_formats::open::open_regular`], which refuses what is not a regular
/// file without blocking.
pub fn session_files(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<(PathBuf, std::io::Error)>) {
    let mut files = Vec::new();
    let mut errors = Vec::new();
    for p in paths {
        if !p.is_dir() {
            files.push(p.clone());
            continue;
        }
        let mut stack = vec![p.clone()];
        let mut found = Vec::new();
        while let Some(dir) = stack.pop() {
            let rd = match std::fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) => {
                    errors.push((dir, e));
                    continue;
                }
            };
            for entry in rd.flatten() {
                let path = entry.path();
                let ft = entry.file_type();
                let Ok(ft) = ft else { continue };
                if ft.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|x| x == "jsonl")
                    && (ft.is_file()
                        || ft.is_symlink()
                            && std::fs::metadata(&path).map_or(true, |md| md.is_file()))
                {
                    found.push(path);
                }
            }
        }
        found.sort();
        files.extend(found);
    }
    (files, errors)
}

/// Parses an age: a number and a unit (s, m, h, d, w), in milliseconds.
pub fn parse_age(s: &str) -> Result<i64, CommandError> {
    let bad = || {
        CommandError::with_hint(
            anyhow!("cannot read the age {s:?}"),
            "use a number and a unit: 90d, 12h, 2w, 30m, 45s",
        )
    };
    let t = s.trim();
    let unit = t.chars().last().ok_or_else(bad)?;
    let n: i64 = t[..t.len() - unit.len_utf8()].parse().map_err(|_| bad())?;
    let ms = match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        'w' => 7 * 86_400_000,
        _ => return Err(bad()),
    };
    n.checked_mul(ms).filter(|v| *v >= 0).ok_or_else(bad)
}

/// Parses the argument of a `--since` option: a day (`YYYY-MM-DD`, from its midnight UTC), an
/// ISO time (`2026-01-31T12:00:00Z`), or an age counted back from now (`7d`, `12h`, `2w`).
pub fn parse_since(d: &str) -> Result<i64, CommandError> {
    let t = d.trim();
    let ms = if t.len() == 10 {
        pisess_engine::import::iso_to_ms(&format!("{t}T00:00:00Z"))
    } else {
        pisess_engine::import::iso_to_ms(t)
    };
    // A day the month does not have (2024-02-30) is refused, not rolled over as JavaScript
    // does: the day read back from the time must be the day written.
    if let Some(ms) = ms
        && t.get(..10) == Some(&pisess_engine::export::ms_to_iso(ms)[..10])
    {
        return Ok(ms);
    }
    let age = parse_age(t).map_err(|_| {
        CommandError::with_hint(
            anyhow!("cannot read the date {d:?}"),
            "use YYYY-MM-DD, 2026-01-31T12:00:00Z, or an age such as 7d or 12h",
        )
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |x| i64::try_from(x.as_millis()).unwrap_or(i64::MAX));
    Ok(now.saturating_sub(age))
}

/// Says on stderr where the writer saved torn last lines of `file` before cutting their
/// fragments (`SessionWriter::saved_tails`), so no one has to wonder where the bytes went.
pub fn warn_saved_tails(file: &str, saved: &[std::path::PathBuf]) {
    for p in saved {
        eprintln!(
            "warning: {}: its last line was cut short (a torn write) and could not be kept in \
             the session; the whole line is saved in {}",
            crate::ui::safe(file),
            crate::ui::safe(&p.to_string_lossy())
        );
    }
}

/// What to say when a `--type` / `--role` filter (`log`, `grep`) matched nothing and is none of
/// pi's entry types or message roles: most likely a typo. pi tolerates unknown roles and types
/// (an extension's custom messages), so such a value is still matched as written, never
/// refused; the warning names pi's values, and the one the value probably meant.
pub fn unknown_kind_warning(flag: &str, value: &str) -> Option<String> {
    use pisess_formats::entry::{EntryType, Role};
    if EntryType::NAMES.contains(&value) || Role::NAMES.contains(&value) {
        return None;
    }
    let fold = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '_' | '-'))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let near = EntryType::NAMES
        .iter()
        .chain(Role::NAMES)
        .find(|n| fold(n) == fold(value));
    let mut w = format!(
        "no entry matched {flag} {:?}, which is none of pi's entry types ({}) or message roles \
         ({}); other values are matched as written (an extension's own)",
        crate::ui::safe(value),
        EntryType::NAMES.join(", "),
        Role::NAMES.join(", "),
    );
    if let Some(n) = near {
        w.push_str(&format!("; did you mean {n}?"));
    }
    Some(w)
}

/// Warns on stderr that the entries of `path` at `lines` (1-based) were `what` ("not counted",
/// "not searched") because their JSON cannot be read; names the first few lines.
pub fn warn_unreadable(path: &str, lines: &[u64], what: &str) {
    let shown: Vec<String> = lines.iter().take(5).map(u64::to_string).collect();
    let more = if lines.len() > 5 { ", …" } else { "" };
    eprintln!(
        "warning: {}: {} entr{} {what}: the JSON cannot be read (line {}{more}; `pisess show` \
         says why)",
        crate::ui::safe(path),
        lines.len(),
        if lines.len() == 1 { "y" } else { "ies" },
        shown.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse() {
        assert_eq!(parse_age("90d").ok(), Some(90 * 86_400_000));
        assert_eq!(parse_age("2w").ok(), Some(14 * 86_400_000));
        assert_eq!(parse_age("30m").ok(), Some(1_800_000));
        assert!(parse_age("d").is_err());
        assert!(parse_age("10y").is_err());
        assert!(parse_age("").is_err());
    }

    #[test]
    fn since_reads_days_times_and_ages() {
        assert_eq!(parse_since("1970-01-02").ok(), Some(86_400_000));
        assert_eq!(parse_since("1970-01-01T00:00:01.5Z").ok(), Some(1_500));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|x| x.as_millis() as i64)
            .unwrap();
        let week = parse_since("1w").unwrap();
        assert!(
            (now - 7 * 86_400_000 - week).abs() < 60_000,
            "{week} vs {now}"
        );
        assert_eq!(parse_since("2024-02-29").ok(), Some(1_709_164_800_000));
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "12x",
            "-3d",
            "2024-02-30",
            "2023-02-29",
            "2026-04-31T00:00:00Z",
        ] {
            let e = parse_since(bad).unwrap_err().to_string();
            assert!(e.contains("cannot read the date"), "{bad:?}: {e}");
        }
    }
}
