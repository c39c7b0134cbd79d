//! Crash-safe file replacement: a temp file in the target's folder, fsync, rename, fsync the
//! folder.
//!
//! Invariants: a target path only ever holds its old bytes or its complete new bytes (rename is
//! atomic within a folder); temp files are named [`TEMP_PREFIX`]`…` and do not end in `.jsonl`,
//! so neither pi nor pisess ever reads one as a session; a temp file is removed when the write
//! fails (the [`TempFile`] guard), and one left behind by a killed run is removed by the next
//! writing run ([`clean_stale`]); [`TempFile::persist_new`] never replaces a target whose
//! bytes differ (it links rather than renames, so a file appearing meanwhile is not lost).

use std::ffi::OsString;
use std::fs::{self, File, Metadata};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use pisess_formats::open::open_regular;

/// The name prefix of every temp file pisess writes.
pub const TEMP_PREFIX: &str = ".pisess-tmp-";

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The longest file name (bytes) the usual Linux file systems take.
const NAME_MAX: usize = 255;

/// At most `max` bytes of `name`, cut at a character boundary when it is UTF-8 (so that
/// [`clean_stale`], which reads names as text, still finds the temp file).
fn name_part(name: &std::ffi::OsStr, max: usize) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    let bytes = name.as_bytes();
    if bytes.len() <= max {
        return name.to_owned();
    }
    let mut end = max;
    if let Ok(text) = std::str::from_utf8(bytes) {
        while !text.is_char_boundary(end) {
            end -= 1;
        }
    }
    std::ffi::OsStr::from_bytes(&bytes[..end]).to_owned()
}

/// Gives `f` the owner and mode of `old`, the file it is to replace, as a shell's `>` keeps
/// them (it writes the same file): a private file stays private, and a session another user
/// owns stays theirs (pi, run as that user, must still append to it). Only root may give a
/// file away, so the owner is kept where that is allowed and left as it is otherwise.
pub fn keep_owner_and_mode(f: &File, old: &Metadata) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    if std::os::unix::fs::fchown(f, Some(old.uid()), Some(old.gid())).is_err() {
        // Not root: the group alone, which a member of it may give (a 0660 file of a shared
        // group stays readable by the group).
        let _ = std::os::unix::fs::fchown(f, None, Some(old.gid()));
    }
    f.set_permissions(old.permissions())
}

/// A temp file that is deleted on drop unless [`TempFile::persist`] renamed it.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    file: Option<File>,
}

impl TempFile {
    /// Creates a new, empty temp file in `dir` (a name no other file has).
    pub fn create(dir: &Path, for_name: &std::ffi::OsStr) -> io::Result<Self> {
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let mut name = OsString::from(TEMP_PREFIX);
            name.push(format!("{}-{n}-", std::process::id()));
            // A long name is cut so that the temp name stays a legal one (a target named
            // with 230 bytes could not be written).
            let room = NAME_MAX.saturating_sub(name.len() + ".tmp".len());
            name.push(name_part(for_name, room));
            name.push(".tmp");
            let path = dir.join(name);
            match fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(file) => {
                    return Ok(Self {
                        path,
                        file: Some(file),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The open file.
    pub fn file(&self) -> io::Result<&File> {
        self.file
            .as_ref()
            .ok_or_else(|| io::Error::other("temp file already closed"))
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Gives the file `meta`'s permissions and modification time, and with `owner` its owner
    /// too (where allowed: [`keep_owner_and_mode`]; for a file that takes the place or the
    /// role of the one `meta` describes, not for a copy made elsewhere), then flushes it.
    pub fn finish(&self, meta: &Metadata, owner: bool) -> io::Result<()> {
        let f = self.file()?;
        if owner {
            keep_owner_and_mode(f, meta)?;
        } else {
            f.set_permissions(meta.permissions())?;
        }
        f.set_modified(meta.modified()?)?;
        f.sync_all()
    }

    /// Puts the file at `target` only if nothing is there, or what is there holds the same
    /// bytes, and flushes the folder; a different file at `target` is never replaced (see
    /// [`Placed`]). Race-free where the file system has hard links: the file is linked to
    /// `target`, which fails rather than replaces; elsewhere (no hard links) `target` is checked
    /// just before a rename, which a file created in that instant would lose to. As with
    /// [`Self::persist`], the bytes are flushed first ([`Self::finish`]).
    pub fn persist_new(mut self, target: &Path) -> io::Result<Placed> {
        drop(self.file.take());
        match fs::hard_link(&self.path, target) {
            Ok(()) => {
                sync_dir(target)?;
                // `self` is dropped: the temp name goes, the target keeps the bytes.
                Ok(Placed::Written)
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => self.compare(target),
            // No hard links here (some FUSE or FAT file systems): check, then rename.
            Err(_) => match fs::symlink_metadata(target) {
                Ok(_) => self.compare(target),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.persist(target).map(|()| Placed::Written)
                }
                Err(e) => Err(e),
            },
        }
    }

    /// What is at `target` compared with the temp file (which is then removed).
    fn compare(self, target: &Path) -> io::Result<Placed> {
        Ok(if same_bytes(&self.path, target)? {
            Placed::AlreadyThere
        } else {
            Placed::Differs
        })
    }

    /// Renames the file over `target` and flushes the folder.
    pub fn persist(mut self, target: &Path) -> io::Result<()> {
        drop(self.file.take());
        fs::rename(&self.path, target)?;
        // Renamed: nothing to clean up any more.
        self.path = PathBuf::new();
        sync_dir(target)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            drop(self.file.take());
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// What [`TempFile::persist_new`] found at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// Nothing was there: the file is now.
    Written,
    /// A file with the same bytes was there: left as it is.
    AlreadyThere,
    /// A file with other bytes (or something else) was there: left as it is, nothing written.
    Differs,
}

/// Flushes the folder holding `path` (so a rename or link in it is durable).
pub fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Whether a temp file name belongs to a process that is still running (another pisess at work
/// in the same folder). Where `/proc` is missing every temp file counts as stale.
fn owner_alive(name: &str) -> bool {
    let Some(pid) = name
        .strip_prefix(TEMP_PREFIX)
        .and_then(|rest| rest.split('-').next())
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    pid != std::process::id()
        && Path::new("/proc/self").exists()
        && Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes temp files left in `dir` by a run that was killed (not those of a pisess still
/// running); returns how many.
pub fn clean_stale(dir: &Path) -> usize {
    let Ok(rd) = fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for entry in rd.flatten() {
        let is_temp = entry
            .file_name()
            .to_str()
            .is_some_and(|s| s.starts_with(TEMP_PREFIX) && !owner_alive(s));
        if is_temp
            && entry.file_type().is_ok_and(|t| t.is_file())
            && fs::remove_file(entry.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// How the file at `path` differs from `before` (its metadata when it was read): `None` when it
/// is the same file with the same length and modification time.
pub fn changed_since(path: &Path, before: &Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let now = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(format!("it can no longer be read ({e})")),
    };
    if (now.dev(), now.ino()) != (before.dev(), before.ino()) {
        Some("it was replaced by another file".to_owned())
    } else if now.len() != before.len() {
        Some(format!(
            "it changed size ({} bytes, then {})",
            before.len(),
            now.len()
        ))
    } else if (now.mtime(), now.mtime_nsec()) != (before.mtime(), before.mtime_nsec()) {
        Some("it was modified".to_owned())
    } else {
        None
    }
}

/// Whether two files hold the same bytes.
pub fn same_bytes(a: &Path, b: &Path) -> io::Result<bool> {
    let (mut fa, mut fb) = (open_regular(a)?, open_regular(b)?);
    if fa.metadata()?.len() != fb.metadata()?.len() {
        return Ok(false);
    }
    let (mut ba, mut bb) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(&mut fa, &mut ba)?;
        let m = read_full(&mut fb, &mut bb)?;
        if n != m || ba[..n] != bb[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Copies `src` to `target` atomically (temp file, fsync, rename), keeping mode and mtime.
pub fn copy_atomic(src: &Path, target: &Path) -> io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    let name = target.file_name().unwrap_or_default();
    let tmp = TempFile::create(dir, name)?;
    let mut from = open_regular(src)?;
    let meta = from.metadata()?;
    io::copy(&mut from, &mut tmp.file()?)?;
    // A backup beside the file, as `cp -p` makes it.
    tmp.finish(&meta, true)?;
    tmp.persist(target)
}

/// Why a backup could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// A different file is already at the backup path.
    #[error("backup {0} already exists and differs from the file; move it away first")]
    Differs(PathBuf),
    /// A symbolic link is at the backup path: it may lead to the file itself, which the
    /// write then replaces (the "backup" would follow it).
    #[error("backup {0} is a symbolic link, not a copy; move it away first")]
    Link(PathBuf),
    /// I/O.
    #[error("cannot back up to {0}: {1}")]
    Io(PathBuf, #[source] io::Error),
}

/// Keeps the bytes of `src` at `backup`: a hard link (the original inode survives the rename
/// that replaces `src`), else an atomic copy. An existing identical backup is kept as it is
/// (a hard link to `src` left by an interrupted run is one), but never a symbolic link: one
/// to `src` has its bytes until the rename, then the new ones.
pub fn make_backup(src: &Path, backup: &Path) -> Result<(), BackupError> {
    let io_err = |e| BackupError::Io(backup.to_path_buf(), e);
    match fs::symlink_metadata(backup) {
        Ok(m) if m.file_type().is_symlink() => return Err(BackupError::Link(backup.to_path_buf())),
        Ok(_) => {
            return if same_bytes(src, backup).map_err(io_err)? {
                Ok(())
            } else {
                Err(BackupError::Differs(backup.to_path_buf()))
            };
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    match fs::hard_link(src, backup) {
        Ok(()) => sync_dir(backup).map_err(io_err),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            // Appeared meanwhile: same rules as above.
            if fs::symlink_metadata(backup).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(BackupError::Link(backup.to_path_buf()));
            }
            if same_bytes(src, backup).map_err(io_err)? {
                Ok(())
            } else {
                Err(BackupError::Differs(backup.to_path_buf()))
            }
        }
        Err(_) => copy_atomic(src, backup).map_err(io_err),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn temp_files_vanish_unless_persisted() {
        let dir = std::env::temp_dir().join(format!("pisess-atomic-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let t = TempFile::create(&dir, "a.jsonl".as_ref()).unwrap();
        let p = t.path().to_path_buf();
        assert!(p.exists());
        drop(t);
        assert!(!p.exists());
        let t = TempFile::create(&dir, "a.jsonl".as_ref()).unwrap();
        t.persist(&dir.join("b")).unwrap();
        assert!(dir.join("b").exists());
        TempFile::create(&dir, "c".as_ref())
            .map(std::mem::forget)
            .unwrap();
        assert_eq!(clean_stale(&dir), 1);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn persist_new_never_replaces_other_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (d, t) = (dir.path(), dir.path().join("t.jsonl"));
        let make = |bytes: &[u8]| {
            let tmp = TempFile::create(d, "t.jsonl".as_ref()).unwrap();
            std::io::Write::write_all(&mut tmp.file().unwrap(), bytes).unwrap();
            tmp
        };
        assert_eq!(make(b"new").persist_new(&t).unwrap(), Placed::Written);
        assert_eq!(make(b"new").persist_new(&t).unwrap(), Placed::AlreadyThere);
        fs::write(&t, b"newer, appended").unwrap();
        assert_eq!(make(b"new").persist_new(&t).unwrap(), Placed::Differs);
        assert_eq!(fs::read(&t).unwrap(), b"newer, appended");
        // Only the target is left: no temp file.
        assert_eq!(fs::read_dir(d).unwrap().count(), 1);
    }
}
