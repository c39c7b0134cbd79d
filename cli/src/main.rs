//! The `pisess` binary: everything happens in the library but the process's set-up, which needs
//! `unsafe` and so lives here, outside the library crates (they forbid it).
//!
//! On Linux with glibc the binary starts at its own C `main` (`#![no_main]`), not at Rust's:
//! most of what pisess's quick commands do is start a process (a re-import of an unchanged
//! folder takes ~0.9 ms, of which the kernel's `exec` and glibc's start take ~0.5 ms), and
//! Rust's start adds ~50 us to it, mostly for a stack-overflow handler (it reads
//! `/proc/self/maps` to find the main thread's stack, maps an alternate signal stack, installs
//! two signal handlers). pisess does not need that handler: it never recurses over a session
//! (a stack overflow would still stop the process, by SIGSEGV, without Rust's message).
//!
//! Invariants: everything else Rust's start does that pisess relies on is done here, in the same
//! way: SIGPIPE ignored (a closed pipe is an `EPIPE` error, which pisess reports as a quiet
//! exit), and SIGXFSZ too (a write past `ulimit -f` is an `EFBIG` error with a message, where
//! the signal killed the process without a word), the standard streams open (a closed one is reopened on `/dev/null`), a panic turned
//! into exit status 101 after the panic hook has printed it, and standard output flushed at exit
//! (`std::process::exit` runs Rust's clean-up, as a return from Rust's `main` does). The command-line
//! arguments are read by std from glibc's `.init_array` call, as they are without `no_main`.
#![cfg_attr(all(target_os = "linux", target_env = "gnu", not(test)), no_main)]
mod heap;

/// The signals a terminal's keyboard sends (Ctrl-C, the quit key), which a pager takes.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const KEYBOARD_SIGNALS: [libc::c_int; 2] = [libc::SIGINT, libc::SIGQUIT];

/// The [`KEYBOARD_SIGNALS`]' dispositions before a pager took them (as `signal` returned them).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
static BEFORE_PAGER: [std::sync::atomic::AtomicUsize; 2] = [
    std::sync::atomic::AtomicUsize::new(libc::SIG_DFL),
    std::sync::atomic::AtomicUsize::new(libc::SIG_DFL),
];

/// Once a pager shows the output, a Ctrl-C (SIGINT) or a quit key (SIGQUIT) at the terminal is
/// the pager's: pisess ignores them and ends when the pager closes its input, as git waits for
/// its pager. (Killed by the signal, it would leave the pager reading a terminal that the shell
/// has taken back.)
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn leave_keyboard_signals_to_the_pager() {
    use std::sync::atomic::Ordering;
    for (i, sig) in KEYBOARD_SIGNALS.into_iter().enumerate() {
        // SAFETY: `signal` with a valid signal number and `SIG_IGN` changes nothing but that
        // signal's disposition.
        let before = unsafe { libc::signal(sig, libc::SIG_IGN) };
        if before != libc::SIG_ERR {
            BEFORE_PAGER[i].store(before, Ordering::Relaxed);
        }
    }
}

/// Gives the keyboard signals back what they were before the pager (it could not start, or
/// it has ended).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn take_keyboard_signals_back() {
    use std::sync::atomic::Ordering;
    for (i, sig) in KEYBOARD_SIGNALS.into_iter().enumerate() {
        // SAFETY: as above; the disposition is one `signal` returned for this signal (the
        // default, ignore, or a handler that is still installed: pisess installs none).
        unsafe {
            libc::signal(sig, BEFORE_PAGER[i].load(Ordering::Relaxed));
        }
    }
}

/// Runs the command line; its exit status.
fn run() -> u8 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    pisess_cli::pager::set_signal_hooks(
        leave_keyboard_signals_to_the_pager,
        take_keyboard_signals_back,
    );
    pisess_cli::status_with(|command| {
        if pisess_cli::short_query(command) && heap::prefer_huge_pages() {
            // The global pool, built before anything else could build it, so that each worker
            // advises its own arena's heap as it starts (if it was built already, the workers
            // keep the usual heaps, and nothing else changes).
            let _ = rayon::ThreadPoolBuilder::new()
                .start_handler(|_| {
                    heap::prefer_huge_pages_in_thread();
                })
                .build_global();
        }
    })
}

/// The process's entry, called by glibc's start with the command line (which std has already
/// captured, so it is not read here).
#[cfg(all(target_os = "linux", target_env = "gnu", not(test)))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: nothing else runs yet (no thread, no handler); `signal` and `poll` take only the
    // values given, and `open` a NUL-terminated path.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        // A file over `ulimit -f` is then an `EFBIG` error naming the file, not a silent kill.
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
            fd,
            events: 0,
            revents: 0,
        });
        if libc::poll(fds.as_mut_ptr(), 3, 0) > 0 {
            for p in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
                // The lowest free descriptor: the closed one (the lower ones are open, or
                // were reopened by an earlier turn).
                if libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) != p.fd {
                    libc::abort();
                }
            }
        }
    }
    // `process::exit`, like a return from Rust's `main`, flushes standard output first.
    std::process::exit(std::panic::catch_unwind(run).map_or(101, i32::from))
}

/// Elsewhere, and in the unit tests' build (whose harness brings its own `main`), Rust's start.
#[cfg(not(all(target_os = "linux", target_env = "gnu", not(test))))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(run())
}
