//! A test environment: the real binary, a clean environment, a private HOME and store.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The project root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A fixture path under `fixtures/`.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("fixtures").join(rel)
}

/// `../shared/realdata`.
pub fn realdata() -> PathBuf {
    root().join("../shared/realdata")
}

/// A test environment with its own HOME (so pi's folder and the store are private).
pub struct TestEnv {
    /// The temporary HOME.
    pub home: tempfile::TempDir,
}

impl TestEnv {
    /// A fresh environment.
    pub fn new() -> Self {
        Self {
            home: tempfile::tempdir().unwrap(),
        }
    }

    /// `pisess ARGS…` with a cleared environment.
    pub fn pisess(&self) -> Command {
        let mut cmd = Command::cargo_bin("pisess").unwrap();
        cmd.env_clear()
            .env("HOME", self.home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("NO_COLOR", "1")
            .env("COLUMNS", "100")
            .env("PISESS_STORE", self.home.path().join("store.redb"));
        cmd
    }
}
