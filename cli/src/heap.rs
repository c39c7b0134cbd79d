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
//! the threads wait on its lock, ~5 % of the query's time). Both then move the heap's top past
//! the 2 MiB range it lies in when advised ([`skip_to_huge_page`]): that range was touched
//! before the advice, so the kernel would fill the rest of it 4 KiB at a time — ~1,500 of the
//! ~1,650 faults of a `files 'src/**'` over a 1 GB store before this step, ~150 after.
//! Invariants:
//! - it only tunes and advises: every step may fail (a kernel without THP, `brk` refused, a
//!   `mallopt` refused) and the process then runs without huge pages, tuned as far as the
//!   steps before the failure went; elsewhere than glibc on Linux it does nothing;
//! - the thread heap's place comes from glibc's layout (a heap is [`ARENA_HEAP`] bytes at a
//!   multiple of [`ARENA_HEAP`]); were that ever wrong, the advice would land on other
//!   anonymous memory of the process, which changes how pages are backed, never their contents;
//! - it is for commands that read the store and exit (their peak memory is a query's output
//!   buffers, not a growing import): `main` calls it for those alone (`pisess_cli::short_query`:
//!   `files`, and `tree` and `log`, whose on-the-fly import of a changed file it accepts),
//!   before any thread starts;
//! - memory beyond each heap's first [`PAD`] comes in normal pages, as without the call;
//! - the skipped part of a heap (under 2 MiB each) is held, never written, until the process
//!   ends: address space, not memory.
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
    if !tune() {
        return false;
    }
    // SAFETY: `sbrk(0)` reads the program break without moving it; the block is freed at once
    // and never read or written.
    let (before, after, top) = unsafe {
        let before = libc::sbrk(0) as usize;
        // Nothing free is that big: it comes from the top, and goes back to it.
        let p = libc::malloc(PAD / 4);
        let after = libc::sbrk(0) as usize;
        // Kept opaque: a `malloc` whose block is only freed may be removed by the optimiser.
        libc::free(std::hint::black_box(p));
        (before, after, p as usize)
    };
    let start = before.div_ceil(HUGE).saturating_mul(HUGE);
    if before == usize::MAX || after <= start {
        return false;
    }
    // SAFETY: [start, after) lies inside the heap that `brk` just grew (mapped, owned by this
    // process); `MADV_HUGEPAGE` changes how its pages are backed, never their contents.
    let advised = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            after - start,
            libc::MADV_HUGEPAGE,
        ) == 0
    };
    if advised {
        // Not only past the top's 2 MiB range: past the break it had, where the advice begins.
        skip_to_huge_page(top, start);
    }
    advised
}

/// Sets glibc's top pad, mapping threshold and trim threshold (see the module header);
/// whether glibc took all three.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune() -> bool {
    let pad = libc::c_int::try_from(PAD).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` only sets allocator parameters, under the main arena's lock; a thread
    // allocating meanwhile sees the old values or the new ones. (`main` calls it before any
    // other thread exists; the test below, beside libtest's threads.)
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, pad / 2) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, pad.saturating_mul(2)) == 1
            && libc::mallopt(libc::M_TOP_PAD, pad) == 1
    }
}

/// Keeps the heap's next blocks out of the 2 MiB range its top lies in (`top`: where a block
/// just taken from the top and freed began), and below `past`. That range was touched before
/// the advice (glibc's bookkeeping of a thread's arena, the blocks allocated before `main`),
/// and the kernel backs a 2 MiB range with a huge page only if none of it is mapped yet, so the
/// rest of it would fault in 4 KiB at a time (512 faults where one would do). Takes one block
/// from the top to just past the next 2 MiB boundary (or `past`, if later) and never frees it:
/// it costs address space, not memory (nothing writes it but glibc's header at its start).
/// Done whenever the advice was taken, whether or not the kernel will back anything with huge
/// pages.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn skip_to_huge_page(top: usize, past: usize) {
    if top == 0 {
        return;
    }
    let boundary = ((top | (HUGE - 1)) + 1).max(past);
    // Ends past the boundary: glibc's header and alignment add less than 64 bytes.
    let gap = boundary.saturating_sub(top).saturating_add(64);
    // SAFETY: `malloc`/`free` of a block that is never read or written.
    unsafe {
        // Kept opaque: a block that is never used may be removed by the optimiser.
        let filler = std::hint::black_box(libc::malloc(gap));
        // Elsewhere than `top` (a free block that big existed, which a fresh arena does not
        // have), it would hold space for nothing.
        if !filler.is_null() && filler as usize != top {
            libc::free(filler);
        }
    }
}

/// The size of the block [`prefer_huge_pages_in_thread`] takes to find its heap and top.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const PROBE: usize = 64 << 10;

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
        // Not a small block: the thread may hold small ones of the main arena in its cache
        // (blocks it freed that another thread had allocated), and this one must come from
        // its own arena; too big for the small-block bins too, so it comes from the top (in
        // a fresh arena) and goes back to it.
        let p = libc::malloc(PROBE);
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
    let advised =
        unsafe { libc::madvise(base as *mut libc::c_void, ARENA_HEAP, libc::MADV_HUGEPAGE) == 0 };
    if advised {
        // The heap's first 2 MiB hold the arena's bookkeeping, written before the advice.
        skip_to_huge_page(p, 0);
    }
    advised
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// (Rss, AnonHugePages) in KiB of the mapping of `/proc/self/smaps` that holds `addr`.
    fn backing(addr: usize) -> (u64, u64) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let (mut inside, mut rss, mut huge) = (false, 0, 0);
        for l in smaps.lines() {
            let first = l.split_whitespace().next().unwrap_or("");
            if let Some((a, b)) = first.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                if inside {
                    break;
                }
                inside = (a..b).contains(&addr);
                continue;
            }
            let kib = || l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap();
            if inside && l.starts_with("Rss:") {
                rss = kib();
            } else if inside && l.starts_with("AnonHugePages:") {
                huge = kib();
            }
        }
        (rss, huge)
    }

    /// A worker thread's heap is in huge pages from its first block on: without
    /// [`skip_to_huge_page`] its first 2 MiB, where glibc wrote the arena's bookkeeping before
    /// the advice, fault in 4 KiB pages (the kernel gives a huge page only to an untouched
    /// 2 MiB range). A new thread (the only one this test binary starts, so its arena is new)
    /// advises its heap and fills 6 MiB of blocks; where the kernel offers THP on request, the
    /// advice must be taken, and at least 4 MiB of that heap must be huge pages and at most
    /// 64 KiB small ones — unless the kernel fell back to small pages meanwhile
    /// (`thp_fault_fallback` in `/proc/vmstat` grew: memory too fragmented), which this test
    /// reports and cannot judge.
    #[test]
    fn a_thread_heap_is_in_huge_pages_from_its_first_block() {
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|m| m.contains("[always]") || m.contains("[madvise]"));
        let fallbacks = || {
            std::fs::read_to_string("/proc/vmstat")
                .unwrap_or_default()
                .lines()
                .find_map(|l| l.strip_prefix("thp_fault_fallback "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let before = fallbacks();
        // What `main` does first, but for growing the main heap (a test runs on a thread of
        // its own, whose blocks do not come from there).
        assert!(tune());
        let (advised, rss, huge) = std::thread::spawn(|| {
            let advised = prefer_huge_pages_in_thread();
            // Written, not zeroed: `calloc` may leave fresh memory untouched.
            let blocks: Vec<Vec<u8>> = (0..96).map(|_| vec![1u8; 64 << 10]).collect();
            let (rss, huge) = backing(blocks[0].as_ptr() as usize);
            assert!(blocks.iter().all(|b| b[b.len() - 1] == 1));
            (advised, rss, huge)
        })
        .join()
        .unwrap();
        if !thp {
            // `MADV_HUGEPAGE` may be taken or refused; nothing is backed by huge pages.
            return;
        }
        assert!(advised, "the thread heap was not advised");
        if fallbacks() != before {
            eprintln!("THP fell back to small pages during the test: page counts not judged");
        } else {
            assert!(
                huge >= 4 << 10 && rss.saturating_sub(huge) <= 64,
                "the thread heap: {rss} KiB resident, {huge} KiB of it in huge pages"
            );
        }
    }
}
