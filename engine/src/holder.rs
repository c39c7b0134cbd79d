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
    let pid = pid_from_locks(meta.dev(), meta.ino(), me)
        .map(|(pid, _)| pid)
        .or_else(|| pid_from_fds(store, me))?;
    Some(describe(pid))
}

/// `pid N (command line)` of a process holding a `flock` on `file`, and whether its lock is
/// exclusive, if `/proc/locks` says.
pub fn flock_holder_of(file: &Path) -> Option<(String, bool)> {
    let meta = std::fs::metadata(file).ok()?;
    let (pid, exclusive) = pid_from_locks(meta.dev(), meta.ino(), std::process::id())?;
    Some((describe(pid), exclusive))
}

/// Linux's device number split as `/proc/locks` prints it.
fn major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

/// A lock of `/proc/locks` on the file (`MAJOR:MINOR:INODE`, hex:hex:decimal) with a pid, and
/// whether it is exclusive (`WRITE`). Blocked waiters (lines with `->`) hold nothing.
fn pid_from_locks(dev: u64, ino: u64, me: u32) -> Option<(u32, bool)> {
    let text = std::fs::read_to_string("/proc/locks").ok()?;
    let (major, minor) = major_minor(dev);
    text.lines()
        .find_map(|line| parse_lock(line, (major, minor, ino), me))
}

/// One line of `/proc/locks`: "1: FLOCK ADVISORY WRITE 19611 fe:00:10076483 0 EOF".
fn parse_lock(line: &str, file: (u64, u64, u64), me: u32) -> Option<(u32, bool)> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.get(1) == Some(&"->") {
        return None;
    }
    let exclusive = *f.get(3)? == "WRITE";
    let pid: u32 = f.get(4)?.parse().ok()?;
    let mut id = f.get(5)?.split(':');
    let ma = u64::from_str_radix(id.next()?, 16).ok()?;
    let mi = u64::from_str_radix(id.next()?, 16).ok()?;
    let inode: u64 = id.next()?.parse().ok()?;
    (pid != me && (ma, mi, inode) == file).then_some((pid, exclusive))
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

    #[test]
    fn proc_locks_lines_give_the_holder_and_its_mode() {
        let file = (0xfe, 0, 10076483);
        let line = |s: &str| parse_lock(s, file, 1);
        assert_eq!(
            line("1: FLOCK  ADVISORY  WRITE 19611 fe:00:10076483 0 EOF"),
            Some((19611, true))
        );
        assert_eq!(
            line("2: FLOCK  ADVISORY  READ 7 fe:00:10076483 0 EOF"),
            Some((7, false))
        );
        // A blocked waiter holds nothing; another file, or this process, is not the holder.
        assert_eq!(
            line("2: -> FLOCK  ADVISORY  WRITE 7 fe:00:10076483 0 EOF"),
            None
        );
        assert_eq!(
            line("3: FLOCK  ADVISORY  WRITE 7 fe:00:10076484 0 EOF"),
            None
        );
        assert_eq!(
            line("4: FLOCK  ADVISORY  WRITE 1 fe:00:10076483 0 EOF"),
            None
        );
        // OFD locks record no pid.
        assert_eq!(
            line("5: OFDLCK ADVISORY  WRITE -1 fe:00:10076483 0 EOF"),
            None
        );
    }
}
