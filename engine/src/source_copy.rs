//! A copy of the store's `sources` table in a file beside the store (`<store>.sources`), so
//! that re-importing files that have not changed answers without opening the store.
//!
//! Opening the store is most of what such a re-import does besides one `statx` per file:
//! redb reads its allocator state on every open (a tenth of the run on the 1 GB folder of
//! issue 3). The copy holds what the unchanged check reads: every row of `sources` (path,
//! session, size, mtime, gone).
//!
//! Invariants:
//! - a copy is written only by a process that has the store open **read-only** (redb's shared
//!   lock, so no process writes the store meanwhile, and redb writes nothing on closing it),
//!   from rows read through that handle, under a temporary name renamed into place before the
//!   store is closed;
//! - every opening of the store for writing removes the copy as soon as it holds redb's
//!   exclusive lock, before pisess writes anything ([`crate::store::Store::open`]; redb itself
//!   may already have written its header's recovery flag, which changes no table), so a copy
//!   never survives a write by pisess, finished or not; removing it before taking the lock
//!   would let a reader still holding its shared lock put a copy back;
//! - a copy records the store file's device, inode, size, mtime and ctime as they were when it
//!   was written, and is used only while the store file still has all five: a store replaced,
//!   restored or written by anything else is opened as usual. (On a kernel or filesystem with
//!   coarse timestamps, a write by another program that keeps the file's size and lands in the
//!   same clock tick as the last one before the copy was made would not be seen; Linux 6.13+
//!   gives a file whose times were just read a fine-grained time at its next change.)
//! - a copy that is damaged (its digest, [`digest`], does not match), truncated, of another format,
//!   of another schema version or of another `sources` table version is ignored, never
//!   trusted: the copy can make an import cheaper, never change what it does (a store of
//!   another schema version is refused when opened, so its copy must not answer for it).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::schema::{SCHEMA_VERSION, SOURCES_NAME, SourceStat};

/// The first bytes of a copy (format version included: 1 was sealed with blake3, 2 kept each
/// path beside its row).
const MAGIC: &[u8; 16] = b"pisess-sources\x003";

/// The length of a copy's digest.
const DIGEST_LEN: usize = 8;

/// The digest that seals a copy: a check against damage (a torn or truncated write, a flipped
/// byte), not against forgery (the copy lies beside the store, which anyone who can write it
/// can write too). Each 8-byte word (the last one zero-padded) is folded into the state by a
/// xor, a multiplication by an odd constant and a xor with the state shifted right: each step is
/// a bijection of the state for a given word, so a copy that differs in one word always has
/// another digest; the length goes in first, so does a copy that only grew or shrank.
///
/// Not blake3, which seals what the store keeps: a re-import of an unchanged folder reads the
/// copy and little else, and blake3 costs it its CPU-feature detection (`cpuid` traps to the
/// hypervisor on these guests, ~4 us each) and its SIMD code's pages.
fn digest(b: &[u8]) -> [u8; DIGEST_LEN] {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mix = |h: u64, w: u64| {
        let h = (h ^ w).wrapping_mul(K);
        h ^ (h >> 29)
    };
    let mut h = mix(0x243F_6A88_85A3_08D3, b.len() as u64);
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        h = mix(h, u64::from_le_bytes(a));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut a = [0u8; 8];
        a[..rest.len()].copy_from_slice(rest);
        h = mix(h, u64::from_le_bytes(a));
    }
    mix(h, K).to_le_bytes()
}

/// The copy of the store at `store`.
pub fn path_for(store: &Path) -> PathBuf {
    let mut p = store.as_os_str().to_owned();
    p.push(".sources");
    PathBuf::from(p)
}

/// The store file's identity: (device, inode, size, mtime s, mtime ns, ctime s, ctime ns).
type Identity = (u64, u64, u64, i64, i64, i64, i64);

fn identity(store: &Path) -> Option<Identity> {
    let m = std::fs::metadata(store).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// The rows of a valid copy of the store at `store`, sorted by path.
#[derive(Debug)]
pub struct SourceCopy {
    /// Every row's path, one after another: the copy's own block of paths, moved to the front
    /// of the buffer it was read into (no allocation or UTF-8 check per row; a string per
    /// row cost an unchanged re-import of 160 files ~4 % of its instructions).
    paths: String,
    /// (where the row's path starts and ends in `paths`, the row), sorted by path.
    rows: Vec<(usize, usize, SourceStat)>,
}

impl SourceCopy {
    /// Reads the copy beside `store`; `None` when there is none, or it is not a valid copy of
    /// the store as it is now (see the module invariants).
    pub fn load(store: &Path) -> Option<Self> {
        let bytes = std::fs::read(path_for(store)).ok()?;
        let (body, sealed) = bytes.split_at_checked(bytes.len().checked_sub(DIGEST_LEN)?)?;
        if digest(body) != sealed {
            return None;
        }
        let mut r = Reader { b: body, at: 0 };
        if r.take(MAGIC.len())? != MAGIC
            || r.u64()? != SCHEMA_VERSION
            || r.take_str()? != SOURCES_NAME
        {
            return None;
        }
        let recorded: Identity = (
            r.u64()?,
            r.u64()?,
            r.u64()?,
            r.i64()?,
            r.i64()?,
            r.i64()?,
            r.i64()?,
        );
        if identity(store)? != recorded {
            return None;
        }
        let n = usize::try_from(r.u64()?).ok()?;
        // The rows (each path's length and the row), then every path, one after another, to the
        // end of the body. (A row takes 29 bytes: never trust the count for an allocation.)
        let mut rows = Vec::with_capacity(n.min(body.len() / 29));
        let mut end = 0usize;
        for _ in 0..n {
            let len = u32::from_le_bytes(r.take(4)?.try_into().ok()?) as usize;
            let stat = (r.u64()?, r.u64()?, r.i64()?, r.take(1)? != [0]);
            let start = end;
            end = end.checked_add(len)?;
            rows.push((start, end, stat));
        }
        let (from, to) = (r.at, body.len());
        if to.checked_sub(from)? != end {
            return None;
        }
        // The paths become the string without a copy: the block moves to the front of the
        // buffer, checked as UTF-8 once.
        let mut bytes = bytes;
        bytes.truncate(to);
        bytes.drain(..from);
        let paths = String::from_utf8(bytes).ok()?;
        let copy = Self { paths, rows };
        let whole = copy
            .rows
            .iter()
            .all(|&(_, end, _)| copy.paths.is_char_boundary(end));
        let sorted = copy
            .rows
            .windows(2)
            .all(|w| copy.path(&w[0]) < copy.path(&w[1]));
        (whole && sorted).then_some(copy)
    }

    /// The path of a row.
    fn path(&self, &(start, end, _): &(usize, usize, SourceStat)) -> &str {
        self.paths.get(start..end).unwrap_or_default()
    }

    /// The row of `path`.
    pub fn get(&self, path: &str) -> Option<SourceStat> {
        let i = self
            .rows
            .binary_search_by(|r| self.path(r).cmp(path))
            .ok()?;
        self.rows.get(i).map(|r| r.2)
    }

    /// The row of `path`, looked for first at `near` (where the previous lookup of a caller
    /// going through paths in order ended), then by binary search; `near` is left after the
    /// row found. The same answer as [`SourceCopy::get`], without its ~8 comparisons per path
    /// when the caller's order is the catalogue's.
    pub fn get_near(&self, path: &str, near: &mut usize) -> Option<SourceStat> {
        if let Some(r) = self.rows.get(*near)
            && self.path(r) == path
        {
            *near += 1;
            return Some(r.2);
        }
        let i = self
            .rows
            .binary_search_by(|r| self.path(r).cmp(path))
            .ok()?;
        *near = i + 1;
        self.rows.get(i).map(|r| r.2)
    }

    /// The rows whose path is in `lo..hi`, or every row, in path order.
    pub fn rows_in(
        &self,
        range: Option<(&str, &str)>,
    ) -> impl Iterator<Item = (&str, SourceStat)> + '_ {
        let (a, b) = match range {
            Some((lo, hi)) => {
                let a = self.rows.partition_point(|r| self.path(r) < lo);
                let b = self.rows.partition_point(|r| self.path(r) < hi).max(a);
                (a, b)
            }
            None => (0, self.rows.len()),
        };
        self.rows
            .get(a..b)
            .unwrap_or_default()
            .iter()
            .map(|r| (self.path(r), r.2))
    }
}

/// Writes the copy of the store at `store` (see the module invariants for when a caller may):
/// `rows` sorted by path, as read through the caller's handle. A temporary file renamed into
/// place; not synced (a copy lost or torn by a crash is ignored, see [`SourceCopy::load`]).
pub fn write(store: &Path, rows: &[(String, SourceStat)]) -> std::io::Result<()> {
    let Some(id) = identity(store) else {
        return Err(std::io::Error::other("the store file cannot be read"));
    };
    let mut b = Vec::with_capacity(128 + rows.iter().map(|r| r.0.len() + 33).sum::<usize>());
    b.extend_from_slice(MAGIC);
    b.extend_from_slice(&SCHEMA_VERSION.to_le_bytes());
    put_str(&mut b, SOURCES_NAME);
    for v in [id.0, id.1, id.2] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    for v in [id.3, id.4, id.5, id.6] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    for (path, (s, size, mtime, gone)) in rows {
        let len = u32::try_from(path.len()).map_err(std::io::Error::other)?;
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&s.to_le_bytes());
        b.extend_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&mtime.to_le_bytes());
        b.push(u8::from(*gone));
    }
    for (path, _) in rows {
        b.extend_from_slice(path.as_bytes());
    }
    let d = digest(&b);
    b.extend_from_slice(&d);
    let target = path_for(store);
    let mut tmp = target.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::write(&tmp, &b).and_then(|()| std::fs::rename(&tmp, &target));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Removes the copy of the store at `store`, if there is one. Errors are ignored: a copy left
/// behind (a folder that cannot be written) no longer matches the store once it is written.
pub fn remove(store: &Path) {
    let _ = std::fs::remove_file(path_for(store));
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    b.extend_from_slice(&(s.len() as u32).to_le_bytes());
    b.extend_from_slice(s.as_bytes());
}

/// Bounds-checked reads from a copy's body.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn take_str(&mut self) -> Option<&'a str> {
        let n = u32::from_le_bytes(self.take(4)?.try_into().ok()?) as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rows() -> Vec<(String, SourceStat)> {
        vec![
            ("/a/one.jsonl".to_owned(), (1, 10, 100, false)),
            ("/a/two.jsonl".to_owned(), (2, 20, 200, true)),
            ("/b/three.jsonl".to_owned(), (3, 30, -300, false)),
        ]
    }

    #[test]
    fn a_copy_reads_back_until_the_store_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store.redb");
        std::fs::write(&store, b"not really a store").unwrap();
        assert!(SourceCopy::load(&store).is_none(), "no copy yet");
        write(&store, &rows()).unwrap();
        let c = SourceCopy::load(&store).unwrap();
        assert_eq!(c.get("/a/two.jsonl"), Some((2, 20, 200, true)));
        assert_eq!(c.get("/a/three.jsonl"), None);
        let all: Vec<(&str, SourceStat)> = c.rows_in(None).collect();
        let want = rows();
        let want: Vec<(&str, SourceStat)> = want.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        assert_eq!(all, want);
        let under_a: Vec<&str> = c.rows_in(Some(("/a/", "/a0"))).map(|r| r.0).collect();
        assert_eq!(under_a, ["/a/one.jsonl", "/a/two.jsonl"]);
        assert_eq!(c.rows_in(Some(("/c/", "/c0"))).count(), 0);
        // Any write to the store file (here one of the same size) makes the copy stale.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&store, b"not really a stor!").unwrap();
        assert!(SourceCopy::load(&store).is_none(), "the store was written");
        write(&store, &rows()).unwrap();
        assert!(SourceCopy::load(&store).is_some());
        remove(&store);
        assert!(SourceCopy::load(&store).is_none(), "removed");
        remove(&store);
    }

    #[test]
    fn a_lookup_near_the_last_gives_what_a_plain_lookup_gives_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store.redb");
        std::fs::write(&store, b"x").unwrap();
        write(&store, &rows()).unwrap();
        let c = SourceCopy::load(&store).unwrap();
        let paths = [
            "/a/one.jsonl",
            "/a/two.jsonl",
            "/b/three.jsonl",
            "/a/three.jsonl",
            "/",
        ];
        // Every sequence of three lookups (in order, backwards, repeated, missing paths), with
        // the cursor carried from one to the next as the import carries it.
        for a in paths {
            for b in paths {
                for d in paths {
                    let mut near = 0;
                    for p in [a, b, d] {
                        assert_eq!(c.get_near(p, &mut near), c.get(p), "{a} {b} {d}: {p}");
                    }
                }
            }
        }
        // In order, each lookup after the first finds its row where the last one ended.
        let mut near = 0;
        for (i, (p, s)) in rows().iter().enumerate() {
            assert_eq!(c.get_near(p, &mut near), Some(*s));
            assert_eq!(near, i + 1);
        }
        // A cursor past the end, or anywhere, still finds the row.
        let mut near = 99;
        assert_eq!(
            c.get_near("/a/one.jsonl", &mut near),
            Some((1, 10, 100, false))
        );
        assert_eq!(near, 1);
    }

    /// A copy re-sealed (valid digest) after `edit`.
    fn resealed(good: &[u8], edit: impl Fn(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = good[..good.len() - DIGEST_LEN].to_vec();
        edit(&mut b);
        let d = digest(&b);
        b.extend_from_slice(&d);
        b
    }

    /// The digest changes with any one byte changed, whatever the change, and with zero bytes
    /// added or removed at the end (which a zero-padded last word alone would not see).
    #[test]
    fn the_digest_sees_every_one_byte_change_and_every_length() {
        let body: Vec<u8> = (0..77u8).map(|i| i.wrapping_mul(37)).collect();
        let d = digest(&body);
        for i in 0..body.len() {
            for x in 1..=255u8 {
                let mut b = body.clone();
                b[i] ^= x;
                assert_ne!(digest(&b), d, "byte {i} ^ {x}");
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut zeros = Vec::new();
        for n in 0..40 {
            assert!(seen.insert(digest(&zeros)), "{n} zero bytes");
            zeros.push(0);
        }
    }

    /// A stand-in store file in `dir` with a copy of [`rows`] beside it: (the store, the copy's
    /// bytes).
    fn store_with_copy(dir: &Path) -> (PathBuf, Vec<u8>) {
        let store = dir.join("store.redb");
        std::fs::write(&store, b"x").unwrap();
        write(&store, &rows()).unwrap();
        let good = std::fs::read(path_for(&store)).unwrap();
        (store, good)
    }

    #[test]
    fn a_copy_of_another_schema_or_table_version_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (store, good) = store_with_copy(dir.path());
        std::fs::write(path_for(&store), resealed(&good, |_| {})).unwrap();
        assert!(SourceCopy::load(&store).is_some(), "re-sealed unchanged");
        let schema_at = MAGIC.len();
        std::fs::write(path_for(&store), resealed(&good, |b| b[schema_at] ^= 1)).unwrap();
        assert!(SourceCopy::load(&store).is_none(), "another schema version");
        // The table name follows the schema version and its 4-byte length: "sources.v2".
        let last = schema_at + 8 + 4 + SOURCES_NAME.len() - 1;
        std::fs::write(path_for(&store), resealed(&good, |b| b[last] = b'9')).unwrap();
        assert!(SourceCopy::load(&store).is_none(), "another table version");
        // Rows out of order.
        let swapped = resealed(&good, |b| {
            let at = b.windows(12).position(|w| w == b"/a/one.jsonl").unwrap();
            b[at + 3] = b'z';
        });
        std::fs::write(path_for(&store), swapped).unwrap();
        assert!(SourceCopy::load(&store).is_none(), "rows out of order");
    }

    /// Path lengths that do not add up to the paths that follow the rows, or that split a
    /// character between two paths, make a copy invalid even when it is sealed.
    #[test]
    fn a_copy_whose_path_lengths_do_not_fit_its_paths_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store.redb");
        std::fs::write(&store, b"x").unwrap();
        let rows = vec![
            ("/a/\u{e9}.jsonl".to_owned(), (1, 10, 100, false)),
            ("/b/x.jsonl".to_owned(), (2, 20, 200, false)),
        ];
        write(&store, &rows).unwrap();
        assert!(SourceCopy::load(&store).is_some());
        let good = std::fs::read(path_for(&store)).unwrap();
        // Where the rows start: after the magic, the schema version, the table's name, the
        // store's identity (7 numbers) and the row count.
        let at = MAGIC.len() + 8 + 4 + SOURCES_NAME.len() + 7 * 8 + 8;
        assert_eq!(good[at - 8..at], 2u64.to_le_bytes());
        let len_at = |row: usize| at + row * 29;
        let with_lengths = |first: u32, second: u32| {
            resealed(&good, |b| {
                b[len_at(0)..len_at(0) + 4].copy_from_slice(&first.to_le_bytes());
                b[len_at(1)..len_at(1) + 4].copy_from_slice(&second.to_le_bytes());
            })
        };
        let (a, b) = (rows[0].0.len() as u32, rows[1].0.len() as u32);
        std::fs::write(path_for(&store), with_lengths(a, b)).unwrap();
        assert!(SourceCopy::load(&store).is_some(), "the same lengths");
        for (first, second, why) in [
            (a - 1, b, "one byte short"),
            (a, b + 1, "one byte over"),
            // "/a/\u{e9}" ends inside the two bytes of the e-acute.
            (a - 7, b + 7, "split inside a character"),
        ] {
            std::fs::write(path_for(&store), with_lengths(first, second)).unwrap();
            assert!(SourceCopy::load(&store).is_none(), "{why}");
        }
    }

    #[test]
    fn a_damaged_or_truncated_copy_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (store, good) = store_with_copy(dir.path());
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(path_for(&store), &bad).unwrap();
            assert!(SourceCopy::load(&store).is_none(), "byte {i} flipped");
        }
        for n in 0..good.len() {
            std::fs::write(path_for(&store), &good[..n]).unwrap();
            assert!(SourceCopy::load(&store).is_none(), "cut at {n}");
        }
        std::fs::write(path_for(&store), &good).unwrap();
        assert!(SourceCopy::load(&store).is_some());
    }
}
