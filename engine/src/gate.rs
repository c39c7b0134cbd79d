//! The store's gate: a lock file beside the store (`STORE.lock`) that keeps readers from
//! starving a writer.
//!
//! redb lets readers share the store (a shared lock) and gives a writer the store alone (an
//! exclusive one), but a waiting writer has no place in line: commands that only read, started
//! so that each overlaps the one before (a status bar polling `grep`), hold the shared lock
//! without a gap, and a writer retrying its open never gets in. The gate gives it a place:
//!
//! - a writer takes the gate exclusively *before* it tries the store and keeps it, across its
//!   retries, until it has opened the store (or given up); a reader takes the gate shared only
//!   for the moment it opens the store, then lets it go and keeps reading;
//! - so once a writer holds the gate no new reader opens the store; the readers already in
//!   finish, the store falls free, and the writer gets it; readers then wait for it as before;
//! - the gate is advisory and only about fairness: a gate that cannot be opened or locked (a
//!   read-only folder, a file system without `flock`) is skipped ([`Gate::Absent`]), and the
//!   store's own lock still keeps writers and readers apart;
//! - the file is never written and never removed (removing it would let two processes lock two
//!   different files of the same name); it is empty.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// A held gate, released when dropped.
#[derive(Debug)]
pub enum Gate {
    /// The gate file, locked.
    Held(File),
    /// No gate could be used (see the module invariants); nothing is held.
    Absent,
}

/// The gate file of the store at `store`: its path with `.lock` added.
pub fn path_for(store: &Path) -> PathBuf {
    let mut p = store.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// What [`Gate::try_writer`] and [`Gate::try_reader`] found when the gate is taken.
#[derive(Debug)]
pub struct Taken {
    /// The gate file.
    pub path: PathBuf,
    /// Who holds it: `pid N (command line)` when the system says.
    pub holder: Option<String>,
    /// Whether the holder is a writer (holds it exclusively). When the system does not say,
    /// true for a reader refused (only a writer's hold keeps a reader out) and false for a
    /// writer.
    pub by_writer: bool,
}

impl Gate {
    /// Takes the gate exclusively, for a writer about to open the store; `Err` when another
    /// process holds it (a writer waiting for the store, or a reader opening it).
    pub fn try_writer(store: &Path) -> Result<Self, Taken> {
        Self::take(store, true)
    }

    /// Takes the gate shared, for a reader about to open the store; `Err` when a writer holds it
    /// (it waits for the store, and readers let it go first).
    pub fn try_reader(store: &Path) -> Result<Self, Taken> {
        Self::take(store, false)
    }

    fn take(store: &Path, exclusive: bool) -> Result<Self, Taken> {
        let path = path_for(store);
        let Some(file) = open(&path) else {
            return Ok(Self::Absent);
        };
        let locked = if exclusive {
            file.try_lock()
        } else {
            file.try_lock_shared()
        };
        match locked {
            Ok(()) => Ok(Self::Held(file)),
            Err(TryLockError::WouldBlock) => {
                let holder = crate::holder::flock_holder_of(&path);
                Err(Taken {
                    by_writer: holder.as_ref().map_or(!exclusive, |h| h.1),
                    holder: holder.map(|h| h.0),
                    path,
                })
            }
            Err(TryLockError::Error(_)) => Ok(Self::Absent),
        }
    }

    /// Whether a lock is held.
    pub fn is_held(&self) -> bool {
        matches!(self, Self::Held(_))
    }
}

/// The gate file, created when missing (in the store's folder only when that exists: a store
/// not made yet has nobody to be fair to); `None` when it cannot be opened.
fn open(path: &Path) -> Option<File> {
    let folder_exists = path
        .parent()
        .is_none_or(|d| d.as_os_str().is_empty() || d.is_dir());
    if !folder_exists {
        return None;
    }
    // flock needs no write access: a reader of a store in a folder it cannot write still
    // shares a gate that exists.
    open_mode(path, true)
        .or_else(|_| open_mode(path, false))
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
}

/// Opens the gate file for reading (and, with `write`, writing and creating it), never
/// waiting: a FIFO in its place would otherwise hang a read-only open until a writer came.
/// A symbolic link in its place is not followed (a dangling one had its target created,
/// anywhere it pointed): no gate then.
fn open_mode(path: &Path, write: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .read(true)
        .write(write)
        .create(write)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbolic_link_in_the_gates_place_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.redb");
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, path_for(&store)).unwrap();
        assert!(!Gate::try_writer(&store).unwrap().is_held());
        assert!(!Gate::try_reader(&store).unwrap().is_held());
        assert!(!target.exists(), "the link's target was created");
    }

    #[test]
    fn a_writer_excludes_readers_and_writers_and_readers_share() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("s.redb");
        let w = Gate::try_writer(&store).unwrap();
        assert!(w.is_held());
        assert!(path_for(&store).is_file());
        // flock locks belong to the open file description: a second open in this process
        // contends as another process would.
        let taken = Gate::try_reader(&store).unwrap_err();
        assert_eq!(taken.path, path_for(&store));
        assert!(Gate::try_writer(&store).is_err());
        drop(w);
        // A process another test forks meanwhile shares this process's open files (and so
        // their locks) until it execs: a lock let go is free again within moments, not at once.
        let soon = |reader: bool| {
            let start = std::time::Instant::now();
            loop {
                let got = if reader {
                    Gate::try_reader(&store)
                } else {
                    Gate::try_writer(&store)
                };
                match got {
                    Ok(g) => return g,
                    Err(t) if start.elapsed() > std::time::Duration::from_secs(10) => {
                        panic!("the gate stayed taken: {t:?}")
                    }
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(2)),
                }
            }
        };
        let r1 = soon(true);
        let r2 = Gate::try_reader(&store).unwrap();
        assert!(r1.is_held() && r2.is_held());
        assert!(Gate::try_writer(&store).is_err());
        drop((r1, r2));
        assert!(soon(false).is_held());
    }

    #[test]
    fn no_folder_means_no_gate_and_nothing_created() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("missing/s.redb");
        assert!(!Gate::try_writer(&store).unwrap().is_held());
        assert!(!dir.path().join("missing").exists());
        // A folder where the gate file should be: skipped, not an error.
        let store = dir.path().join("t.redb");
        std::fs::create_dir(path_for(&store)).unwrap();
        assert!(!Gate::try_reader(&store).unwrap().is_held());
        // A FIFO in the gate's place: skipped, and even the read-only open (the one a reader
        // who may not write it makes) returns at once instead of waiting for a writer.
        let store = dir.path().join("u.redb");
        let fifo = path_for(&store);
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(!Gate::try_reader(&store).unwrap().is_held());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(open_mode(&fifo, false).is_ok());
        });
        let opened = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(opened, Ok(true), "the read-only open of a FIFO waited");
    }
}
