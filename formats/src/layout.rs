//! Where pi keeps session files (spec §1.2, §1.3).
//!
//! Invariants: these functions only compute paths; they never touch the file system except to
//! read environment variables and the home directory. Which folder pi uses on this machine
//! (variables, settings files) is [`crate::session_folder`]'s.

use std::path::{Path, PathBuf};

/// pi's agent directory: `$PI_CODING_AGENT_DIR` (with `~` expanded), else `~/.pi/agent`.
pub fn agent_dir() -> Option<PathBuf> {
    match std::env::var_os("PI_CODING_AGENT_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => Some(expand_tilde(Path::new(&dir))),
        None => home().map(|h| h.join(".pi").join("agent")),
    }
}

/// The per-project folder name for a working directory: `--` + the path without its leading
/// separator, with `/`, `\` and `:` replaced by `-`, + `--`.
pub fn project_dir_name(cwd: &str) -> String {
    let trimmed = cwd.strip_prefix(['/', '\\']).unwrap_or(cwd);
    let body: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    format!("--{body}--")
}

/// The file name pi gives a session: the header timestamp with `:` and `.` replaced by `-`,
/// `_`, the session id, `.jsonl`.
pub fn session_file_name(timestamp: &str, session_id: &str) -> String {
    let ts: String = timestamp
        .chars()
        .map(|c| if matches!(c, ':' | '.') { '-' } else { c })
        .collect();
    format!("{ts}_{session_id}.jsonl")
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `~` or a leading `~/` replaced by `$HOME` (pi's `normalizePath`); anything else as it is.
pub(crate) fn expand_tilde(p: &Path) -> PathBuf {
    match p.strip_prefix("~") {
        Ok(rest) => home().map_or_else(|| p.to_path_buf(), |h| h.join(rest)),
        Err(_) => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_pi() {
        assert_eq!(
            project_dir_name("/home/dev/projects/acme-api"),
            "--home-dev-projects-acme-api--"
        );
        assert_eq!(project_dir_name("C:\\Users\\me\\p"), "--C--Users-me-p--");
        assert_eq!(
            session_file_name(
                "2026-01-06T09:00:00.000Z",
                "019b9288-d680-708f-949b-6f772632716c"
            ),
            "2026-01-06T09-00-00-000Z_019b9288-d680-708f-949b-6f772632716c.jsonl"
        );
    }
}
