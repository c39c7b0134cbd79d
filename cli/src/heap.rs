//! Huge pages for the heap of a short query that touches tens of megabytes once.
//!
//! A fresh process faults in every 4 KiB page it touches: a `files` glob over a big store
//! reads ~8 MB of redb pages and renders ~40 MB of output through ~25 MB of fresh memory, and
//! those ~6,000 faults (the kernel clearing each page, charging it, taking its locks) are
//! about a third of the query's CPU. Where transparent huge pages are offered on request
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, or `always`), one 2 MiB fault
//! replaces 512 of them.
//!
//! [`prefer_huge_pages`] asks glibc's allocator to take its memory from one heap (the `brk`
//! heap: one arena for every thread, large blocks from the heap rather than their own
//! mappings, no trimming) and to grow that heap by [`PAD`] at once, then marks the grown part
//! `MADV_HUGEPAGE`. Invariants:
//! - it only tunes and advises: every step may fail (a kernel without THP, `brk` refused, a
//!   `mallopt` refused) and the process then runs without huge pages, tuned as far as the
//!   steps before the failure went; elsewhere than glibc on Linux it does nothing;
//! - it is for commands that read the store and exit (their peak memory is a query's output
//!   buffers, not a growing import): `main` calls it for those alone, before any thread starts;
//! - memory beyond [`PAD`] comes in normal pages, as without the call.
#![allow(unsafe_code)]

/// How much the heap grows at once, and so how much of it can be in huge pages.
pub const PAD: usize = 64 << 20;

/// The size of a transparent huge page on x86-64 and on arm64 with 4 KiB pages.
const HUGE: usize = 2 << 20;

/// See the module header. Returns whether the kernel accepted the advice.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn prefer_huge_pages() -> bool {
    let pad = libc::c_int::try_from(PAD).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` only sets allocator parameters; called before any other thread exists,
    // so no allocation races with it.
    let tuned = unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1) == 1
            && libc::mallopt(libc::M_MMAP_THRESHOLD, pad / 2) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, pad.saturating_mul(2)) == 1
            && libc::mallopt(libc::M_TOP_PAD, pad) == 1
    };
    if !tuned {
        return false;
    }
    // SAFETY: `sbrk(0)` reads the program break without moving it; the block is freed at once
    // and never read or written.
    let (before, after) = unsafe {
        let before = libc::sbrk(0) as usize;
        let p = libc::malloc(PAD / 4);
        let after = libc::sbrk(0) as usize;
        // Kept opaque: a `malloc` whose block is only freed may be removed by the optimiser.
        libc::free(std::hint::black_box(p));
        (before, after)
    };
    let start = before.div_ceil(HUGE).saturating_mul(HUGE);
    if before == usize::MAX || after <= start {
        return false;
    }
    // SAFETY: [start, after) lies inside the heap that `brk` just grew (mapped, owned by this
    // process); `MADV_HUGEPAGE` changes how its pages are backed, never their contents.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            after - start,
            libc::MADV_HUGEPAGE,
        ) == 0
    }
}

/// Elsewhere nothing is tuned.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn prefer_huge_pages() -> bool {
    false
}
