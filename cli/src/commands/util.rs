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

/// The paths to work on: the given ones, else pi's session folder
/// ([`pisess_formats::session_folder`]), else (on a machine without pi, when no variable or
/// setting names the folder) the samples. A folder named by `$PI_CODING_AGENT_SESSION_DIR`,
/// a `sessionDir` setting or `$PI_CODING_AGENT_DIR` that does not exist is an error, not a
/// reason to take the samples: a typo there must not fill the store with demo sessions.
pub fn default_inputs(given: &[PathBuf]) -> Result<(Vec<PathBuf>, Source), CommandError> {
    if !given.is_empty() {
        return Ok((given.to_vec(), Source::Given));
    }
    let folder = pisess_formats::session_folder::find();
    if let Some(f) = &folder
        && f.root.is_dir()
    {
        return Ok((vec![f.root.clone()], Source::PiSessions(f.root.clone())));
    }
    if let Some((root, named_by)) = folder.and_then(|f| f.named_by.map(|n| (f.root, n))) {
        return Err(CommandError::with_hint(
            anyhow!(
                "pi's session folder {} (from {}) is not a folder that exists",
                crate::ui::safe(&root.to_string_lossy()),
                crate::ui::safe(&named_by)
            ),
            format!(
                "check {}, or give the files or folders as arguments",
                crate::ui::safe(&named_by)
            ),
        ));
    }
    let s = samples_dir();
    Ok((vec![s.clone()], Source::Samples(s)))
}

/// Every `.jsonl` file under the given paths (files as given; folders recursed, sorted),
/// without recursion on the call stack. Unreadable folders are returned as errors.
///
/// A folder walk takes regular files only, and symlinks whose target is one (or cannot be
/// looked at: reading it then says why); a FIFO, socket or device named `*.jsonl` is left out.
/// Symlinks to folders are followed only directly inside pi's per-project session folder, where
/// pi's listing reads them as project folders
/// ([`pisess_formats::session_folder::linked_folder`]). A path given as a file is
/// returned whatever it is: open it with [`pisess_formats::open::open_regular`], which refuses
/// what is not a regular file without blocking.
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
        // In pi's per-project session folder, symlinks directly inside it are read as project
        // folders, as pi's listing reads them.
        let canon_top = std::fs::canonicalize(p)
            .ok()
            .filter(|c| pisess_formats::session_folder::reads_links_in(c));
        let mut top = true;
        // Links at the top, (link, the folder it leads to), read once each after the loop.
        let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
        while let Some(dir) = stack.pop() {
            let is_top = std::mem::take(&mut top);
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
                let linked_folder = || {
                    canon_top
                        .as_ref()
                        .and_then(|top| pisess_formats::session_folder::linked_folder(&path, top))
                };
                if ft.is_dir() {
                    stack.push(path);
                } else if is_top
                    && ft.is_symlink()
                    && let Some(target) = linked_folder()
                {
                    links.push((path, target));
                } else if path.extension().is_some_and(|x| x == "jsonl")
                    && (ft.is_file()
                        || ft.is_symlink()
                            && std::fs::metadata(&path).map_or(true, |md| md.is_file()))
                {
                    found.push(path);
                }
            }
            if is_top && !links.is_empty() {
                links.sort();
                let targets: Vec<&Path> = links.iter().map(|l| l.1.as_path()).collect();
                let read = pisess_formats::session_folder::read_linked_once(&targets);
                stack.extend(
                    links
                        .drain(..)
                        .zip(read)
                        .filter(|(_, r)| *r)
                        .map(|((link, _), _)| link),
                );
            }
        }
        found.sort();
        files.extend(found);
    }
    (files, errors)
}

/// Parses an age: a number and a unit (s, m, h, d, w), in milliseconds.
pub fn parse_age(s: &str) -> Result<i64, CommandError> {
    age_ms(s).map_err(|e| match e {
        AgeError::Unreadable => CommandError::with_hint(
            anyhow!("cannot read the age {s:?}"),
            "use a number and a unit: 90d, 12h, 2w, 30m, 45s",
        ),
        AgeError::TooLarge => too_large(s),
    })
}

/// Why an age cannot be read.
enum AgeError {
    /// Not a number and a unit.
    Unreadable,
    /// A number and a unit, but more milliseconds than a time can count.
    TooLarge,
}

/// [`parse_age`]'s reading.
fn age_ms(s: &str) -> Result<i64, AgeError> {
    let t = s.trim();
    let unit = t.chars().last().ok_or(AgeError::Unreadable)?;
    let digits = &t[..t.len() - unit.len_utf8()];
    let ms: i64 = match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        'w' => 7 * 86_400_000,
        _ => return Err(AgeError::Unreadable),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // A number too long for i64 is too large, not unreadable.
        return digits
            .parse::<i64>()
            .ok()
            .and_then(|n| n.checked_mul(ms))
            .ok_or(AgeError::TooLarge);
    }
    let n: i64 = digits.parse().map_err(|_| AgeError::Unreadable)?;
    n.checked_mul(ms)
        .filter(|v| *v >= 0)
        .ok_or(AgeError::Unreadable)
}

/// The error for an age that reaches back further than a time can.
fn too_large(s: &str) -> CommandError {
    CommandError::with_hint(
        anyhow!("the age {s:?} is too large: it reaches back before any date"),
        "give a smaller age (up to about 290 million years), or a date",
    )
}

/// What `--since` accepts, for its error hint and help.
pub const SINCE_FORMS: &str = "use a day YYYY-MM-DD (from its midnight UTC), an RFC 3339 time \
     such as 2026-01-31T12:00:00Z or 2026-01-31T12:00:00+02:00 (seconds may be left out; an \
     offset such as -05:30 is converted to UTC; a time without one is UTC), or an age such as \
     7d, 12h, 30m or 2w";
/// Parses the argument of a `--since` option: a day (`YYYY-MM-DD`, from its midnight UTC), an
/// RFC 3339 time (`2026-01-31T12:00:00Z`, `2026-01-31T12:00:00.5+02:00`: the offset is taken
/// off, giving UTC; without an offset the time is read as UTC), or an age counted back from now
/// (`7d`, `12h`, `2w`).
pub fn parse_since(d: &str) -> Result<i64, CommandError> {
    let t = d.trim();
    if let Some(ms) = parse_time(t) {
        return Ok(ms);
    }
    let age = age_ms(t).map_err(|e| match e {
        AgeError::Unreadable => {
            CommandError::with_hint(anyhow!("cannot read the date {d:?}"), SINCE_FORMS)
        }
        AgeError::TooLarge => too_large(d),
    })?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |x| i64::try_from(x.as_millis()).unwrap_or(i64::MAX));
    Ok(now.saturating_sub(age))
}

/// A day or an RFC 3339 time (see [`parse_since`]) as milliseconds since the epoch, UTC.
///
/// A day the month does not have (2024-02-30) is refused, not rolled over as JavaScript does:
/// the day read back from the time must be the day written (before any offset is applied).
fn parse_time(t: &str) -> Option<i64> {
    // Seconds may be left out (`2026-01-31T12:00Z`), as JavaScript's `Date` reads it: `:00`.
    let full;
    let t = match t.as_bytes().split_at_checked(16) {
        Some((
            [
                _,
                _,
                _,
                _,
                b'-',
                _,
                _,
                b'-',
                _,
                _,
                b'T' | b't' | b' ',
                _,
                _,
                b':',
                _,
                _,
            ],
            [] | [b'Z' | b'z'] | [b'+' | b'-', ..],
        )) => {
            full = format!("{}:00{}", &t[..16], &t[16..]);
            full.as_str()
        }
        _ => t,
    };
    let b = t.as_bytes();
    // RFC 3339's numeric offset (`+HH:MM`, `-HH:MM`) after a time; else `Z` or nothing (UTC).
    let (local, offset_min) = match b.len().checked_sub(6).map(|i| (i, &b[i..])) {
        Some((i, &[sign @ (b'+' | b'-'), h1, h2, b':', m1, m2])) if i >= 19 => {
            let two = |x: u8, y: u8| {
                (x.is_ascii_digit() && y.is_ascii_digit())
                    .then(|| i64::from(x - b'0') * 10 + i64::from(y - b'0'))
            };
            let (h, m) = (two(h1, h2)?, two(m1, m2)?);
            if h > 23 || m > 59 || matches!(b[i - 1], b'Z' | b'z') {
                return None;
            }
            let minutes = h * 60 + m;
            (&t[..i], if sign == b'+' { minutes } else { -minutes })
        }
        _ => (t, 0),
    };
    // RFC 3339 has only the offset read above (the time parser would also take `+0200`).
    if local
        .get(10..)
        .is_some_and(|rest| rest.contains(['+', '-']))
    {
        return None;
    }
    let lb = local.as_bytes();
    let ms = if lb.len() == 10 {
        pisess_engine::import::iso_to_ms(&format!("{local}T00:00:00Z"))
    } else if lb.get(13) == Some(&b':') && lb.get(16) == Some(&b':') {
        pisess_engine::import::iso_to_ms(local)
    } else {
        None
    }?;
    if local.get(..10) != Some(&pisess_engine::export::ms_to_iso(ms)[..10]) {
        return None;
    }
    // The time written is local to the offset: UTC is that time minus the offset.
    ms.checked_sub(offset_min * 60_000)
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

/// Whether an entry of type `entry_type` (a message: of role `role`) is of the kind a `--type` /
/// `--role` filter names: its type, its role, or a role that no stored entry carries but pi's
/// context shows the entry as (`compactionSummary` is a `compaction`, `branchSummary` a
/// `branch_summary`).
pub fn kind_matches(kind: &str, entry_type: &str, role: Option<&str>) -> bool {
    let shown_as = match kind {
        "compactionSummary" => Some("compaction"),
        "branchSummary" => Some("branch_summary"),
        _ => None,
    };
    entry_type == kind || role == Some(kind) || shown_as == Some(entry_type)
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

/// How `-l` / `-c` print a session's file (`files`, `grep`): as ripgrep prints a path. Into a
/// pipe the name goes as it is, so `xargs` gets the file; on a terminal unusual characters are
/// escaped ([`crate::ui::safe`]). With `-0` (`--null`) a NUL byte follows the name instead of
/// the newline (`-l`) or the `:` (`-c`, whose count still ends with a newline), as `rg -0`.
pub fn write_listed(
    ui: &mut crate::ui::Ui,
    file: &str,
    count: Option<u64>,
    null: bool,
) -> std::io::Result<()> {
    use std::io::Write;
    let name = if ui.tty {
        crate::ui::safe(file)
    } else {
        std::borrow::Cow::Borrowed(file)
    };
    let out = ui.out();
    out.write_all(name.as_bytes())?;
    match (count, null) {
        (None, false) => out.write_all(b"\n"),
        (None, true) => out.write_all(b"\0"),
        (Some(n), false) => writeln!(out, ":{n}"),
        (Some(n), true) => writeln!(out, "\0{n}"),
    }
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
        // Too large for a time: said so, not "cannot read".
        for big in ["999999999999d", "99999999999999999999w"] {
            let e = parse_age(big).unwrap_err().to_string();
            assert!(e.contains("too large"), "{big}: {e}");
            let e = parse_since(big).unwrap_err().to_string();
            assert!(e.contains("too large"), "{big}: {e}");
        }
        assert!(parse_age("-5d").is_err());
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
            "2026-01-02T03:04:60Z",
            "2026-01-02T23:59:60Z",
            "2026-01-02T24:00:00Z",
            "2026-01-02T03:04:05.Z",
        ] {
            let e = parse_since(bad).unwrap_err().to_string();
            assert!(e.contains("cannot read the date"), "{bad:?}: {e}");
        }
    }

    /// RFC 3339 offsets are taken off: the instant is the same as the UTC time it names.
    #[test]
    fn since_converts_rfc3339_offsets_to_utc() {
        let utc = parse_since("2026-01-02T01:04:05Z").unwrap();
        assert_eq!(utc, 1_767_315_845_000);
        for same in [
            "2026-01-02T03:04:05+02:00",
            "2026-01-01T19:34:05-05:30",
            "2026-01-02T01:04:05+00:00",
            "2026-01-02T01:04:05-00:00",
            "2026-01-02t01:04:05z",
            "2026-01-02T01:04:05",
            " 2026-01-02T14:49:05+13:45 ",
        ] {
            assert_eq!(parse_since(same).ok(), Some(utc), "{same}");
        }
        assert_eq!(
            parse_since("2026-01-02T03:04:05.250+02:00").ok(),
            Some(utc + 250)
        );
        // Without seconds, as JavaScript's `Date` reads it.
        for same in [
            "2026-01-02T01:04Z",
            "2026-01-02T01:04",
            "2026-01-02T03:04+02:00",
        ] {
            assert_eq!(parse_since(same).ok(), Some(utc - 5_000), "{same}");
        }
        assert!(parse_since("2026-01-02T01:04.5Z").is_err());
        // An offset can carry the time across a day, a month or a year.
        assert_eq!(
            parse_since("2025-12-31T23:30:00-01:00").ok(),
            parse_since("2026-01-01T00:30:00Z").ok()
        );
        // The day is checked as written, before the offset.
        assert_eq!(
            parse_since("2024-02-29T23:00:00-02:00").ok(),
            parse_since("2024-03-01T01:00:00Z").ok()
        );
        for bad in [
            "2026-01-02T03:04:05+2:00",
            "2026-01-02T03:04:05+0200",
            "2026-01-02T03:04:05+24:00",
            "2026-01-02T03:04:05+02:60",
            "2026-01-02T03:04:05Z+02:00",
            "2026-01-02T03:04:05+02:0x",
            "2023-02-29T03:04:05+02:00",
            "2026-01-02+02:00",
            "2026-01-02T03-04-05Z",
        ] {
            let e = parse_since(bad).unwrap_err();
            assert!(
                e.to_string().contains("cannot read the date"),
                "{bad:?}: {e}"
            );
        }
    }
}
