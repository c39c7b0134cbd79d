//! Opening session files for reading without ever blocking on the open.
//!
//! A folder can hold things named `*.jsonl` that are not files: a FIFO (opening it for reading
//! waits for a writer, forever), a socket, a device. Walks take regular files only, but a path
//! can change between the walk and the open, and a path given on the command line is taken as
//! it is; [`open_regular`] opens with `O_NONBLOCK` (a FIFO's open returns at once) and then
//! refuses whatever the opened descriptor is not a regular file.

use std::fs::{File, FileType, OpenOptions};
use std::io;
use std::path::Path;

/// Opens `path` (following symlinks) for reading when it is a regular file; anything else is an
/// [`io::ErrorKind::InvalidInput`] error saying what it is ([`not_regular`]). The open never
/// blocks. The descriptor keeps `O_NONBLOCK`, which reads of a regular file ignore.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let f = o.open(path)?;
    let ft = f.metadata()?.file_type();
    if !ft.is_file() {
        return Err(not_regular(ft));
    }
    Ok(f)
}

/// The error for a path that is not a regular file: "not a regular file (a FIFO)".
pub fn not_regular(ft: FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({})", kind_of(ft)),
    )
}

/// What a file type is, in words ("a FIFO", "a folder").
fn kind_of(ft: FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_socket() {
            return "a socket";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
    }
    if ft.is_dir() {
        "a folder"
    } else if ft.is_symlink() {
        "a symlink"
    } else {
        "a special file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        assert!(open_regular(&file).is_ok());
        let e = open_regular(dir.path()).unwrap_err();
        assert_eq!(e.to_string(), "not a regular file (a folder)");
        let fifo = dir.path().join("f.jsonl");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let e = open_regular(&fifo).unwrap_err();
            assert_eq!(e.to_string(), "not a regular file (a FIFO)");
        }
        assert_eq!(
            open_regular(&dir.path().join("none")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }
}
