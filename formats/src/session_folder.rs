//! Where pi keeps the sessions on this machine (spec §1.2): the folder pi writes new sessions
//! to and lists them from, found as pi's command line finds it.
//!
//! In order: `$PI_CODING_AGENT_SESSION_DIR`; else the `sessionDir` setting, the project's
//! `<cwd>/.pi/settings.json` over the global `<agent dir>/settings.json` (pi merges the two,
//! the project's key winning whenever it is present, even as `null` or `""`); else
//! `<agent dir>/sessions` with one sub-folder per working directory. The first two hold every
//! project's sessions in one folder ([`SessionFolder::shared`]).
//!
//! Invariants: only reads (the environment, the current directory, at most two settings files);
//! a settings file that is missing, unreadable, not JSON or not a JSON object counts as no
//! settings, as pi's settings manager counts it; a `sessionDir` that is not a non-empty string
//! is no setting (pi stops on a non-string one).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::layout;

/// pi's session folder and what named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFolder {
    /// The folder (as pi's `normalizePath` reads it: `~` expanded, a `file://` URL as its
    /// path; relative paths stay relative to the current directory, as pi leaves them).
    pub root: PathBuf,
    /// Every project's sessions directly in `root` (a variable or setting named it), rather
    /// than one sub-folder per working directory.
    pub shared: bool,
    /// What named the folder, for messages: `$PI_CODING_AGENT_SESSION_DIR`, `sessionDir in
    /// FILE`, `$PI_CODING_AGENT_DIR`; `None` for the default `~/.pi/agent/sessions`.
    pub named_by: Option<String>,
}

impl SessionFolder {
    /// The folder pi writes a new session for `cwd` (resolved) to.
    pub fn for_cwd(&self, cwd: &str) -> PathBuf {
        if self.shared {
            self.root.clone()
        } else {
            self.root.join(layout::project_dir_name(cwd))
        }
    }
}

/// The canonical path of pi's per-project session folder, `<agent dir>/sessions` (whatever
/// a variable or setting says: pi's listing reads symlinks as project folders there), when it
/// exists.
pub fn per_project_root() -> Option<PathBuf> {
    layout::agent_dir().and_then(|a| std::fs::canonicalize(a.join("sessions")).ok())
}

/// Whether pi's listing reads symlinks directly inside the folder whose canonical path is
/// `canon_dir` as project folders: it is [`per_project_root`] (pi's `listAll` takes
/// `isDirectory() || isSymbolicLink()` there). Decided without the settings, so that an
/// import of that folder reads the same files from any current folder.
pub fn reads_links_in(canon_dir: &Path) -> bool {
    per_project_root().is_some_and(|r| r == canon_dir)
}

/// The canonical folders that symlinks directly inside [`per_project_root`] lead to
/// ([`linked_folder`]).
pub fn linked_folders() -> Vec<PathBuf> {
    let Some(root) = per_project_root() else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    rd.flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .filter_map(|e| linked_folder(&e.path(), &root))
        .collect()
}

/// The canonical path of the folder that the symlink `link`, directly inside the folder whose
/// canonical path is `canon_top`, leads to, when a scan should read it as a project folder:
/// `None` for a link to anything but a folder, a dangling one, and one to `canon_top` itself,
/// a folder above it (it would be read again) or a folder inside it (read anyway).
pub fn linked_folder(link: &Path, canon_top: &Path) -> Option<PathBuf> {
    if !std::fs::metadata(link).is_ok_and(|md| md.is_dir()) {
        return None;
    }
    let target = std::fs::canonicalize(link).ok()?;
    (!canon_top.starts_with(&target) && !target.starts_with(canon_top)).then_some(target)
}

/// Which of the folders that symlinks directly inside pi's folder lead to ([`linked_folder`];
/// given in the order of the links' names) a scan reads: not one that an earlier link leads to
/// as well, nor one inside another of them (read with it), so that no session file is found
/// twice under two names.
pub fn read_linked_once(targets: &[&Path]) -> Vec<bool> {
    let mut read: Vec<&Path> = Vec::new();
    targets
        .iter()
        .map(|&t| {
            let inside_another = targets.iter().any(|&o| o != t && t.starts_with(o));
            if inside_another || read.contains(&t) {
                return false;
            }
            read.push(t);
            true
        })
        .collect()
}

/// pi's session folder for a process started in the current directory. `None` when neither a
/// variable, a setting nor `$HOME` gives one.
pub fn find() -> Option<SessionFolder> {
    let cwd = std::env::current_dir().ok();
    find_from(cwd.as_deref())
}

/// [`find`] with the project settings looked up under `cwd` (none when `None`).
pub fn find_from(cwd: Option<&Path>) -> Option<SessionFolder> {
    if let Some(dir) = std::env::var_os("PI_CODING_AGENT_SESSION_DIR").filter(|v| !v.is_empty()) {
        return Some(SessionFolder {
            root: layout::normalize_os(&dir),
            shared: true,
            named_by: Some("$PI_CODING_AGENT_SESSION_DIR".to_owned()),
        });
    }
    let agent = layout::agent_dir();
    if let Some((dir, file)) = session_dir_setting(agent.as_deref(), cwd) {
        return Some(SessionFolder {
            root: dir,
            shared: true,
            named_by: Some(format!("sessionDir in {}", file.display())),
        });
    }
    let named = std::env::var_os("PI_CODING_AGENT_DIR").is_some_and(|v| !v.is_empty());
    agent.map(|a| SessionFolder {
        root: a.join("sessions"),
        shared: false,
        named_by: named.then(|| "$PI_CODING_AGENT_DIR".to_owned()),
    })
}

/// The `sessionDir` setting and the settings file it came from: the project file
/// `<cwd>/.pi/settings.json` when it has the key, else the global `<agent>/settings.json`.
fn session_dir_setting(agent: Option<&Path>, cwd: Option<&Path>) -> Option<(PathBuf, PathBuf)> {
    let files = [
        cwd.map(|c| c.join(".pi").join("settings.json")),
        agent.map(|a| a.join("settings.json")),
    ];
    for file in files.into_iter().flatten() {
        let Some(value) = setting(&file) else {
            continue;
        };
        // Present, even as null or "": it overrides the global one, and names no folder.
        return match value {
            Value::String(s) if !s.is_empty() => Some((layout::normalize(&s), file)),
            _ => None,
        };
    }
    None
}

/// The `sessionDir` key of one settings file, when the file is a JSON object that has it.
fn setting(file: &Path) -> Option<Value> {
    let bytes = std::fs::read(file).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    match serde_json::from_str::<Value>(text).ok()? {
        Value::Object(mut map) => map.remove("sessionDir"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_setting_wins_even_when_it_names_nothing() {
        let t = tempfile::tempdir().unwrap();
        let agent = t.path().join("agent");
        let project = t.path().join("project");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(project.join(".pi")).unwrap();
        let global = agent.join("settings.json");
        std::fs::write(&global, "\u{feff}{\"sessionDir\": \"/g\"}").unwrap();
        let got = session_dir_setting(Some(&agent), Some(&project));
        assert_eq!(got, Some((PathBuf::from("/g"), global.clone())));
        let local = project.join(".pi").join("settings.json");
        for (text, want) in [
            (
                "{\"sessionDir\": \"/p\"}",
                Some((PathBuf::from("/p"), local.clone())),
            ),
            ("{\"sessionDir\": null}", None),
            ("{\"sessionDir\": \"\"}", None),
            ("{\"sessionDir\": 5}", None),
            // Not an object, not JSON, empty: no project settings, so the global one.
            ("[1]", Some((PathBuf::from("/g"), global.clone()))),
            ("{", Some((PathBuf::from("/g"), global.clone()))),
            ("", Some((PathBuf::from("/g"), global.clone()))),
            (
                "{\"theme\": \"dark\"}",
                Some((PathBuf::from("/g"), global.clone())),
            ),
        ] {
            std::fs::write(&local, text).unwrap();
            assert_eq!(
                session_dir_setting(Some(&agent), Some(&project)),
                want,
                "{text}"
            );
        }
    }
}
