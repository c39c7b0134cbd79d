//! Where the test inputs are. The engine's and migrate's tests use this file too (by
//! `#[path]`), so that the three crates look for the corpus and the genuine files alike.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The project root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate dir has a parent")
        .to_path_buf()
}

/// `../shared` beside the project.
pub fn shared() -> PathBuf {
    root().join("../shared")
}

/// The standard corpus built by `../shared/oracle/corpus`. Tests that need it fail (never skip)
/// when it is missing, with the command that builds it.
pub fn corpus() -> PathBuf {
    let dir = std::env::var_os("PISESS_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("PISESS_ORACLE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                        .join(".cache/pisess-oracle")
                });
            home.join("corpus")
        });
    assert!(
        dir.join("15-large-50000.jsonl").is_file(),
        "the standard corpus is missing at {}: run ../shared/oracle/corpus first",
        dir.display()
    );
    dir
}

/// The `.jsonl` files of a folder, sorted.
pub fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort();
    v
}

/// The genuine pi sessions in `../shared/realdata` (a test fails when they are missing).
pub fn realdata() -> Vec<PathBuf> {
    let v = jsonl_files(&shared().join("realdata"));
    assert!(v.len() >= 7, "../shared/realdata is missing or incomplete");
    v
}
