//! Who holds the store: named in [`crate::StoreError::Busy`] so a refused command can say
//! what it is waiting for.
//!
//! Invariants:
//! - only reads the system's own accounts (`/proc/locks`, then `/proc/*/fd`); never opens or
//!   locks the store; any failure gives `None` (the caller then says "another process");
//! - the process itself is never named (its own handles are not the holder).
//!
//! redb 4.6 takes OFD byte-range locks (their owner pid is not recorded, `-1` in
//! `/proc/locks`) and, where the file system keeps them apart, a `flock` too (which records
//! the pid). Without a pid there, the holder is found as a process with the file open.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// `pid N (command line)` of a process holding `store`, if the system says.
pub fn holder_of(store: &Path) -> Option<String> {
    let meta = std::fs::metadata(store).ok()?;
    let me = std::process::id();
    let pid = pid_from_locks(meta.dev(), meta.ino(), me).or_else(|| pid_from_fds(store, me))?;
    Some(describe(pid))
}

/// Linux's device number split as `/proc/locks` prints it.
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// A lock of `/proc/locks` on the file (`MAJOR:MINOR:INODE`, hex:hex:decimal) with a pid.
fn pid_from_locks(dev: u64, ino: u64, me: u32) -> Option<u32> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let (major, minor) = major_minor(dev);
    text.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // "1: FLOCK ADVISORY WRITE 19611 fe:00:10076483 0 EOF"; blocked waiters have "->".
        let f: Vec<&str> = f.into_iter().filter(|x| *x != "->").collect();
        let pid: u32 = f.get(4)?.parse().ok()?;
        let mut id = f.get(5)?.split(':');
        let ma = u64::from_str_radix(id.next()?, 16).ok()?;
        let mi = u64::from_str_radix(id.next()?, 16).ok()?;
        let inode: u64 = id.next()?.parse().ok()?;
        (pid != me && (ma, mi, inode) == (major, minor, ino)).then_some(pid)
    })
}

/// A process (not this one) with the file open.
fn pid_from_fds(store: &Path, me: u32) -> Option<u32> {
    let target = std::fs::canonicalize(store).ok()?;
    for proc_entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = proc_entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(proc_entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|t| t == target) {
                return Some(pid);
            }
        }
    }
    None
}

/// `pid N (argv…)`, the command line shortened and made printable.
fn describe(pid: u32) -> String {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| {
            String::from_utf8_lossy(w)
                .chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect()
        })
        .collect();
    if words.is_empty() {
        return format!("pid {pid}");
    }
    let mut cmd = words.join(" ");
    if cmd.chars().count() > 200 {
        cmd = cmd.chars().take(200).collect::<String>() + "…";
    }
    format!("pid {pid} ({cmd})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_split_as_proc_locks_prints_them() {
        // makedev(0xfe, 0x00) and makedev(8, 1) as glibc encodes them.
        assert_eq!(major_minor(0xfe00), (0xfe, 0));
        assert_eq!(major_minor(0x0801), (8, 1));
        assert_eq!(major_minor(0x0451_2367), (0x123, 0x4567));
    }
}
