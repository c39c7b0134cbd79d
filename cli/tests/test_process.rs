//! The process's own start (cli/src/main.rs starts at a C `main`, not at Rust's): what Rust's
//! start did and pisess relies on must still happen. A closed pipe as a quiet exit 0 is tested
//! with the queries (`test_query::stops_quietly_on_a_closed_pipe`); here, closed standard
//! streams: each is reopened on `/dev/null`, the commands run as usual, exit 0 and leave the
//! session and the store as they were. (Removing the reopening does not fail this test today:
//! pisess prints its summaries after closing its files, and Rust drops writes to a closed
//! descriptor, so the harm it guards against — a file opened on descriptor 1 or 2 receiving the
//! output — needs output printed while a file is open for writing. Breaking the reopening, so
//! that it aborts or takes the wrong descriptor, does fail it.)

use std::process::Command;

use crate::common::{TestEnv, fixture};

/// `pisess ARGS` with the descriptors `closing` closes (`>&-`: closed, not redirected).
fn with_closed(env: &TestEnv, closing: &str, args: &[&str]) -> std::process::ExitStatus {
    let child = env.pisess_child();
    Command::new("sh")
        .arg("-c")
        .arg(format!(r#"exec "$0" "$@" {closing}"#))
        .arg(child.get_program())
        .args(args)
        .env_clear()
        .envs(child.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .status()
        .unwrap()
}

#[test]
fn commands_run_as_usual_with_closed_standard_streams() {
    let env = TestEnv::new();
    let dir = tempfile::tempdir().unwrap();
    for name in ["04-many-branches.jsonl", "03-compactions.jsonl"] {
        std::fs::copy(fixture("sessions").join(name), dir.path().join(name)).unwrap();
    }
    let dir_s = dir.path().to_str().unwrap();
    let session = dir.path().join("04-many-branches.jsonl");
    let session_s = session.to_str().unwrap();
    let before = std::fs::read(&session).unwrap();

    // A fresh import (the store is created), a re-import (answered from the sources copy), and
    // commands that open a session file and print a lot; with standard output alone closed (the
    // first file opened would otherwise get descriptor 1), all three, and standard error alone.
    for closing in [">&-", "<&- >&- 2>&-", "2>&- >/dev/null"] {
        for args in [
            &["import", dir_s][..],
            &["import", dir_s],
            &["log", "--all", session_s],
            &["tree", session_s],
            &["export", session_s],
        ] {
            let status = with_closed(&env, closing, args);
            assert_eq!(status.code(), Some(0), "{closing} {args:?}");
        }
    }

    // The session and the store are as an ordinary run leaves them.
    assert_eq!(std::fs::read(&session).unwrap(), before);
    let verify = env.pisess().args(["verify"]).output().unwrap();
    assert_eq!(
        verify.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // `ls --json` is JSON Lines: one session per line.
    let ls = env.pisess().args(["--json", "ls"]).output().unwrap();
    let rows: Vec<serde_json::Value> = String::from_utf8(ls.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
}
