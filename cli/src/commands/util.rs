//! Helpers shared by commands: finding session files.

use std::path::{Path, PathBuf};

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
                if ft.as_ref().is_ok_and(std::fs::FileType::is_dir) {
                    stack.push(path);
                } else if path.extension().is_some_and(|x| x == "jsonl") {
                    found.push(path);
                }
            }
        }
        found.sort();
        files.extend(found);
    }
    (files, errors)
}
