//! The output file a command writes (`export -o`, `prune -o`/`--in-place`, the files of
//! `migrate --out`): where the bytes go and how they get there.
//!
//! Invariants, by what the path names ([`resolve`] decides, for every writer):
//! - a regular file, or nothing: replaced atomically — a temp file in the same folder, fsync,
//!   rename, fsync of the folder — so a reader sees the old bytes or all the new ones, never a
//!   half-written file; a failed write leaves no temp file behind;
//! - a symlink: followed (through any number of links, up to the kernel's limit of 40) and the
//!   file at the end of the chain is replaced as above; the links stay links. A dangling link
//!   creates the file it points to (as a shell's `>` does);
//! - a character or block device or a FIFO: written straight into, with no temp file and no
//!   rename (`-o /dev/null` discards, a FIFO gets the bytes), so the node is never replaced; a
//!   socket is refused with an error (it cannot be opened as a file);
//! - a link in `/proc` (`/dev/stdout`, `/dev/fd/N`: a file the process has open): not followed
//!   by name but written into, whatever is behind it (a pipe, a terminal; a file at its end, as
//!   the shell's `>` or `>>` expects), and never replaced;
//! - a directory (or a link to one): an error naming it, before anything is written.
//!
//! A command that reads a session refuses an output that is that session's file (through a
//! link, `./`, `..` or a hard link: [`refuse_the_source`]), and every output that is pisess's
//! store or the copy of its catalogue (by the same rule, [`resolve`]); nothing is written then.
//!
//! Errors name the path as the user gave it and exit 2 (see [`crate::command_error`]).

use std::fs::{self, File};
use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;

use crate::command_error::CommandError;
use crate::commands::migrate::atomic;
use crate::ui::SafeWriter;

/// A writer that notes whether a write to it failed, so a failure can be told apart from one
/// of the code producing the bytes.
struct Noting<W> {
    inner: W,
    failed: bool,
}

impl<W: Write> Write for Noting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let r = self.inner.write(buf);
        self.failed |= r.is_err();
        r
    }

    fn flush(&mut self) -> io::Result<()> {
        let r = self.inner.flush();
        self.failed |= r.is_err();
        r
    }
}

/// How many symlinks [`resolve`] follows before giving up (Linux's `MAXSYMLINKS`).
const MAX_LINKS: usize = 40;

/// What a path given as an output names, links followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A regular file, or a name that is free: replace (or create) it atomically at this path.
    Replace(PathBuf),
    /// A device, FIFO, socket or a `/proc` link: write into it, at this path.
    Stream(PathBuf),
}

impl Target {
    /// The path to write at (links followed).
    pub fn path(&self) -> &Path {
        match self {
            Self::Replace(p) | Self::Stream(p) => p,
        }
    }
}

/// Decides how an output path is written: follows symlinks to the file at the end of the
/// chain, and refuses a directory, a path with no file name (`..`, `/`) and pisess's own store
/// ([`refuse_the_store`]).
pub fn resolve(path: &Path) -> Result<Target, CommandError> {
    let target = follow(path)?;
    refuse_the_store(path, target.path())?;
    Ok(target)
}

/// Refuses an output that is the store (`$PISESS_STORE` or its default), the copy of its
/// catalogue or its gate beside it, by any name ([`same_file`]): the store may hold the only
/// copy of sessions whose files are gone.
fn refuse_the_store(given: &Path, target: &Path) -> Result<(), CommandError> {
    let Ok(store) = pisess_engine::default_store_path() else {
        return Ok(());
    };
    let copy = pisess_engine::source_copy::path_for(&store);
    // The gate beside it too: replacing it would let two processes lock two files of one name.
    let gate = pisess_engine::gate::path_for(&store);
    if same_file(target, &store) || same_file(target, &copy) || same_file(target, &gate) {
        return Err(CommandError::with_hint(
            anyhow!(
                "{} is pisess's store ({}); writing there would destroy it",
                given.display(),
                store.display()
            ),
            "give another file name",
        ));
    }
    Ok(())
}

/// [`resolve`] without the store check.
fn follow(path: &Path) -> Result<Target, CommandError> {
    let mut p = path.to_path_buf();
    for _ in 0..=MAX_LINKS {
        let meta = match fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if p.file_name().is_none() {
                    return Err(no_file_name(path));
                }
                return Ok(Target::Replace(p));
            }
            Err(e) => return Err(anyhow!("cannot read {}: {e}", path.display()).into()),
        };
        let ft = meta.file_type();
        if ft.is_symlink() && in_proc(&p) {
            // The kernel's link to an open file (`/dev/stdout` → `/proc/self/fd/1`): what it
            // reads as may be no path at all (`pipe:[…]`), and a file behind it is one a shell
            // opened for us (`>>` appends): written into, never replaced.
            return match fs::metadata(&p) {
                Ok(m) if m.is_dir() => Err(is_a_directory(path)),
                Ok(_) => Ok(Target::Stream(p)),
                Err(e) => Err(anyhow!("cannot read {}: {e}", path.display()).into()),
            };
        }
        if ft.is_symlink() {
            let to = fs::read_link(&p)
                .map_err(|e| anyhow!("cannot read the link {}: {e}", p.display()))?;
            // A relative link is relative to the folder holding it. The path is not normalised
            // (`a/../b`): the kernel resolves `..` after any link in `a`, as it would here.
            p = match p.parent() {
                Some(dir) if to.is_relative() => dir.join(to),
                _ => to,
            };
            continue;
        }
        if ft.is_dir() {
            return Err(is_a_directory(path));
        }
        if p.file_name().is_none() {
            return Err(no_file_name(path));
        }
        return Ok(if ft.is_file() {
            Target::Replace(p)
        } else {
            Target::Stream(p)
        });
    }
    Err(anyhow!(
        "cannot follow {}: more than {MAX_LINKS} symbolic links (a loop?)",
        path.display()
    )
    .into())
}

/// Whether the link `p` is in `/proc` (also through `/dev/fd` → `/proc/self/fd`).
fn in_proc(p: &Path) -> bool {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::canonicalize(dir).is_ok_and(|d| d.starts_with("/proc"))
}

fn is_a_directory(path: &Path) -> CommandError {
    CommandError::with_hint(
        anyhow!("{} is a directory", path.display()),
        "give a file name (inside it, if you meant the folder)",
    )
}

fn no_file_name(path: &Path) -> CommandError {
    CommandError::with_hint(
        anyhow!("{} names no file", path.display()),
        "give a file name",
    )
}

/// Whether `a` and `b` name the same file: the same device and inode once symlinks are
/// followed, so `./x`, `dir/../x`, a symlink to it and a hard link of it all count. A path that
/// does not exist (or cannot be read) is not the same file as anything.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (fs::metadata(a), fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Refuses to write `output` when it is the session file `source` itself ([`same_file`]): a
/// command that reads a session never overwrites it by way of `-o`. `hint` says what to do
/// instead.
pub fn refuse_the_source(output: &Path, source: &Path, hint: &str) -> Result<(), CommandError> {
    // An emptied one is let through, as for stdout ([`refuse_stdout_as_source`]).
    if same_file(output, source) && fs::metadata(source).is_ok_and(|m| m.len() > 0) {
        return Err(CommandError::with_hint(
            anyhow!("{} is the session file itself", output.display()),
            hint.to_owned(),
        ));
    }
    Ok(())
}

/// Refuses to write to stdout when it is the non-empty session file `source` itself, as `cat`
/// refuses "input file is output file": `pisess export S >> S` appended the session to itself
/// (two headers, every id twice). An empty one is let through: `export S > S` emptied the file
/// before pisess ran, and the store's copy writes it back.
pub fn refuse_stdout_as_source(source: &Path, hint: &str) -> Result<(), CommandError> {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return Ok(());
    };
    let (Ok(out), Ok(src)) = (File::from(fd).metadata(), fs::metadata(source)) else {
        return Ok(());
    };
    if out.is_file() && out.len() > 0 && (out.dev(), out.ino()) == (src.dev(), src.ino()) {
        return Err(CommandError::with_hint(
            anyhow!("stdout is the session file itself ({})", source.display()),
            hint.to_owned(),
        ));
    }
    Ok(())
}

/// An output being written: see the module's invariants. Write with [`Output::write_with`],
/// then [`Output::commit`]; dropped without a commit, a temp file is removed and the target is left
/// as it was (a stream keeps what it got).
#[derive(Debug)]
pub struct Output {
    /// The path as the user gave it (for messages).
    given: PathBuf,
    sink: Sink,
}

#[derive(Debug)]
enum Sink {
    Stream(File),
    Replace {
        target: PathBuf,
        tmp: atomic::TempFile,
    },
}

impl Output {
    /// Opens `path` for writing by [`resolve`]'s rule: a temp file beside the file to replace
    /// (temp files of a killed run in that folder are removed first), or the device, FIFO or
    /// socket itself (a FIFO blocks here until it has a reader).
    pub fn create(path: &Path) -> Result<Self, CommandError> {
        let sink = match resolve(path)? {
            Target::Stream(p) => {
                let meta = fs::metadata(&p).ok();
                if meta.as_ref().is_some_and(|m| m.file_type().is_socket()) {
                    return Err(CommandError::with_hint(
                        anyhow!(
                            "{} is a socket, which cannot be opened as a file",
                            path.display()
                        ),
                        "leave out -o and redirect stdout to it",
                    ));
                }
                // A file behind a `/proc` link is written at its end, as the shell's `>>` (or
                // `>`, which emptied it) expects; a device from its start.
                let f = fs::OpenOptions::new()
                    .write(true)
                    .append(meta.is_some_and(|m| m.is_file()))
                    .open(&p)
                    .map_err(|e| anyhow!("cannot open {}: {e}", path.display()))?;
                Sink::Stream(f)
            }
            Target::Replace(target) => {
                let dir = target
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                let name = target.file_name().ok_or_else(|| no_file_name(path))?;
                if !dir.is_dir() {
                    return Err(CommandError::with_hint(
                        anyhow!(
                            "cannot write {}: the folder {} does not exist",
                            path.display(),
                            dir.display()
                        ),
                        "create the folder first, or give a file in a folder that exists",
                    ));
                }
                // A read-only file is the user's way of saying "do not change this" (a rename
                // would replace it all the same), as for the commands that change sessions.
                if fs::metadata(&target).is_ok_and(|m| m.is_file() && m.permissions().readonly()) {
                    return Err(CommandError::with_hint(
                        anyhow!("{} is read-only; left alone", path.display()),
                        "make it writable (`chmod u+w FILE`) to replace it, or give another file",
                    ));
                }
                // Temp files of a run that was killed (never those of a live pisess).
                atomic::clean_stale(dir);
                let tmp = atomic::TempFile::create(dir, name)
                    .map_err(|e| anyhow!("cannot create a temp file in {}: {e}", dir.display()))?;
                Sink::Replace { target, tmp }
            }
        };
        Ok(Self {
            given: path.to_path_buf(),
            sink,
        })
    }

    /// The open file the bytes go to (the temp file, or the stream itself).
    pub fn file(&self) -> io::Result<&File> {
        match &self.sink {
            Sink::Stream(f) => Ok(f),
            Sink::Replace { tmp, .. } => tmp.file(),
        }
    }

    /// Runs `body` on a buffered writer to the output and flushes it; a terminal behind the
    /// path (`-o /dev/tty`) sees escapes shown, never acted on, as stdout does (see
    /// [`SafeWriter`]). A failure to write names the path (`cannot write FILE`); a failure of
    /// `body` itself (a session entry that cannot be read) is returned as it is, since it is
    /// no fault of the output.
    pub fn write_with<T>(
        &self,
        body: impl FnOnce(&mut dyn Write) -> Result<T, CommandError>,
    ) -> Result<T, CommandError> {
        let ctx = |e: CommandError| e.writing(&self.given);
        let file = self.file().map_err(|e| ctx(e.into()))?;
        let mut w = BufWriter::with_capacity(
            256 << 10,
            Noting {
                inner: file,
                failed: false,
            },
        );
        let value = if self.is_stream() && file.is_terminal() {
            let mut safe = SafeWriter::new(&mut w);
            match body(&mut safe) {
                Ok(v) => safe.finish().map(|_| v).map_err(CommandError::from),
                Err(e) => Err(e),
            }
        } else {
            body(&mut w)
        };
        let value = match value {
            Ok(v) => v,
            Err(e) if w.get_ref().failed => return Err(ctx(e)),
            Err(e) => return Err(e),
        };
        w.flush().map_err(|e| ctx(e.into()))?;
        Ok(value)
    }

    /// Whether the bytes go straight into a device, FIFO or open file (nothing is replaced).
    pub fn is_stream(&self) -> bool {
        matches!(self.sink, Sink::Stream(_))
    }

    /// Puts the written bytes in place: fsync, rename over the target and fsync of its folder
    /// (a stream: nothing more to do, every byte was written through).
    pub fn commit(self) -> Result<(), CommandError> {
        match self.sink {
            Sink::Stream(_) => Ok(()),
            Sink::Replace { target, tmp } => {
                tmp.file()
                    .and_then(|f| {
                        // A file replaced keeps its owner and mode, as under a shell's `>`.
                        if let Ok(old) = std::fs::metadata(&target) {
                            crate::commands::migrate::atomic::keep_owner_and_mode(f, &old)?;
                        }
                        f.sync_all()
                    })
                    .map_err(|e| anyhow!("cannot write {}: {e}", self.given.display()))?;
                tmp.persist(&target).map_err(|e| {
                    anyhow!("cannot rename into place at {}: {e}", target.display()).into()
                })
            }
        }
    }
}

/// Writes what `body` writes to `path` by the module's rule ([`Output::write_with`], then
/// [`Output::commit`]) and returns what `body` returns. A failure names `path`; nothing is
/// replaced then.
pub fn write_to<T>(
    path: &Path,
    body: impl FnOnce(&mut dyn Write) -> Result<T, CommandError>,
) -> Result<T, CommandError> {
    let out = Output::create(path)?;
    let value = out.write_with(body)?;
    out.commit()?;
    Ok(value)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn plain_and_new_files_are_replaced_where_they_are() {
        let d = dir();
        let f = d.path().join("f");
        assert_eq!(resolve(&f).unwrap(), Target::Replace(f.clone()));
        fs::write(&f, b"x").unwrap();
        assert_eq!(resolve(&f).unwrap(), Target::Replace(f.clone()));
    }

    #[test]
    fn links_are_followed_to_their_end_even_dangling() {
        let d = dir();
        let real = d.path().join("real");
        symlink("real", d.path().join("a")).unwrap();
        symlink(d.path().join("a"), d.path().join("b")).unwrap();
        let got = resolve(&d.path().join("b")).unwrap();
        assert_eq!(got, Target::Replace(d.path().join("real")));
        fs::write(&real, b"x").unwrap();
        let got = resolve(&d.path().join("b")).unwrap();
        assert_eq!(got, Target::Replace(real));
    }

    #[test]
    fn loops_directories_and_nameless_paths_are_refused() {
        let d = dir();
        symlink("loop2", d.path().join("loop1")).unwrap();
        symlink("loop1", d.path().join("loop2")).unwrap();
        let e = resolve(&d.path().join("loop1")).unwrap_err().to_string();
        assert!(e.contains("symbolic links"), "{e}");
        symlink(d.path(), d.path().join("to-dir")).unwrap();
        for p in [d.path().to_path_buf(), d.path().join("to-dir")] {
            let e = resolve(&p).unwrap_err().to_string();
            assert_eq!(e, format!("{} is a directory", p.display()));
        }
        assert!(resolve(Path::new("/")).is_err());
    }

    /// Resolution only: nothing is opened or written.
    #[test]
    fn proc_links_are_streams_whatever_is_behind_them() {
        for p in ["/dev/stdout", "/dev/fd/2", "/proc/self/fd/1"] {
            if fs::symlink_metadata(p).is_ok() {
                let got = resolve(Path::new(p)).unwrap();
                assert!(matches!(got, Target::Stream(_)), "{p}: {got:?}");
            }
        }
    }

    #[test]
    fn the_same_file_by_any_name_is_the_same_file() {
        let d = dir();
        let f = d.path().join("f");
        fs::write(&f, b"x").unwrap();
        fs::create_dir(d.path().join("sub")).unwrap();
        symlink(&f, d.path().join("link")).unwrap();
        fs::hard_link(&f, d.path().join("hard")).unwrap();
        for name in ["link", "hard", "sub/../f", "./f"] {
            assert!(same_file(&d.path().join(name), &f), "{name}");
            assert!(
                refuse_the_source(&d.path().join(name), &f, "h").is_err(),
                "{name}"
            );
        }
        fs::write(d.path().join("g"), b"x").unwrap();
        assert!(!same_file(&d.path().join("g"), &f));
        assert!(!same_file(&d.path().join("missing"), &f));
    }

    #[test]
    fn a_failed_write_leaves_the_file_and_no_temp_file() {
        let d = dir();
        let f = d.path().join("f");
        fs::write(&f, b"old").unwrap();
        let r: Result<(), _> = write_to(&f, |w| {
            w.write_all(b"new")?;
            Err(anyhow!("stop").into())
        });
        assert!(r.is_err());
        assert_eq!(fs::read(&f).unwrap(), b"old");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
        write_to(&f, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(fs::read(&f).unwrap(), b"new");
    }
}
