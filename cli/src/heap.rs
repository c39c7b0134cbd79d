//! Huge pages for the heap of a short query that touches tens of megabytes once.
//!
//! A fresh process faults in every 4 KiB page it touches: a `files` glob over a big store
//! reads ~8 MB of redb pages and renders ~40 MB of output through ~25 MB of fresh memory, and
//! those ~6,000 faults (the kernel clearing each page, charging it, taking its locks) are
//! about a third of the query's CPU. Where transparent huge pages are offered on request
//! (`/sys/kernel/mm/transparent_hugepage/enabled` = `madvise`, or `always`), one 2 MiB fault
//! replaces 512 of them.
//!
//! [`prefer_huge_pages`] tunes glibc's allocator: a top pad of [`PAD`] (a heap grows by that
//! much at once, and a thread's new arena gets a whole heap of [`ARENA_HEAP`] read-write),
//! blocks up to half of it taken from the heap rather than mapped on their own, no trimming;
//! then it grows the main (`brk`) heap and marks the grown part `MADV_HUGEPAGE`.
//! [`prefer_huge_pages_in_thread`], run by each worker thread as it starts, marks that
//! thread's arena heap the same way (each thread keeps its own arena: one shared arena made
//! the threads wait on its lock, ~5 % of the query's time). Invariants:
//! - it only tunes and advises: every step may fail (a kernel without THP, `brk` refused, a
//!   `mallopt` refused) and the process then runs without huge pages, tuned as far as the
//!   steps before the failure went; elsewhere than glibc on Linux it does nothing;
//! - the thread heap's place comes from glibc's layout (a heap is [`ARENA_HEAP`] bytes at a
//!   multiple of [`ARENA_HEAP`]); were that ever wrong, the advice would land on other
//!   anonymous memory of the process, which changes how pages are backed, never their contents;
//! - it is for commands that read the store and exit (their peak memory is a query's output
//!   buffers, not a growing import): `main` calls it for those alone, before any thread starts;
//! - memory beyond each heap's first [`PAD`] comes in normal pages, as without the call.
#![allow(unsafe_code)]

/// How much the heap grows at once, and so how much of it can be in huge pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const PAD: usize = 64 << 20;

/// The size of a transparent huge page on x86-64 and on arm64 with 4 KiB pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HUGE: usize = 2 << 20;

/// See the module header. Returns whether the kernel accepted the advice.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn prefer_huge_pages() -> bool {
    let pad = libc::c_int::try_from(PAD).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` only sets allocator parameters; called before any other thread exists,
    // so no allocation races with it.
    let tuned = unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, pad / 2) == 1
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

/// Elsewhere nothing is advised.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn prefer_huge_pages_in_thread() -> bool {
    false
}

/// glibc's `HEAP_MAX_SIZE` on 64-bit: a thread's arena lives in heaps of this size, each
/// aligned to it, and with [`PAD`] as the top pad a new heap is mapped read-write whole.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENA_HEAP: usize = 64 << 20;

/// In a new thread, after [`prefer_huge_pages`]: marks the heap of this thread's arena
/// `MADV_HUGEPAGE`. Returns whether the kernel accepted the advice.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn prefer_huge_pages_in_thread() -> bool {
    // SAFETY: the block is freed at once and never read or written; `sbrk(0)` only reads the
    // program break.
    let (p, brk) = unsafe {
        let p = libc::malloc(64);
        let brk = libc::sbrk(0) as usize;
        libc::free(std::hint::black_box(p));
        (p as usize, brk)
    };
    // A block of the main arena (below the break) is not in a thread heap.
    if p == 0 || p < brk {
        return false;
    }
    let base = p & !(ARENA_HEAP - 1);
    // SAFETY: [base, base + ARENA_HEAP) is the heap glibc mapped for this thread's arena;
    // `MADV_HUGEPAGE` changes how its pages are backed, never their contents.
    unsafe { libc::madvise(base as *mut libc::c_void, ARENA_HEAP, libc::MADV_HUGEPAGE) == 0 }
}
