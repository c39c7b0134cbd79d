//! Runs one command and reports what it cost, for `benches/compare.py`: the timer sits as close
//! to the child as a parent can, so that a few-millisecond subject is not measured together
//! with the harness's own process start-up.
//!
//! `pisess-bench-run [--timeout SECONDS] [--] PROGRAM [ARGS...]`
//!
//! The program is looked up in `$PATH` first, outside the measurement. The child is started
//! with `posix_spawn` (Rust's `Command` uses it when, as here, nothing has to run between fork
//! and exec; glibc implements it with `clone(CLONE_VM | CLONE_VFORK)`, so no page tables are
//! copied) in a process group of its own, stdin inherited, stdout to
//! `/dev/null`, stderr inherited. The wall time is `clock_gettime(CLOCK_MONOTONIC)` (`Instant`)
//! taken just before the spawn and just after `wait4` reaps the child; CPU (user + sys) and peak
//! RSS (`ru_maxrss`) are `wait4`'s rusage of that child, which covers its waited-for descendants
//! too (a `sh -c` pipeline: the largest process's peak, the sum of their CPU). As with GNU
//! `time`, `ru_maxrss` is at least this runner's own resident set at the spawn (a few hundred
//! KiB), because Linux records the pre-exec address space's peak at `execve`.
//!
//! With `--timeout`, a watchdog thread (started before the clock) kills the child's process
//! group with SIGKILL at the deadline. Prints one line on stdout:
//! `wall_ns=N cpu_ns=N maxrss_kib=N exit=N timed_out=0|1` (`exit` is 128 + the signal number
//! when the child was killed by a signal) and exits 0; exits 125 when it could not run the
//! command.

// wait4(2) is the only way to get the rusage of one particular child; std has no wrapper.
#![allow(unsafe_code)]

use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// What `wait4` reported for the child.
struct Reaped {
    status: libc::c_int,
    usage: libc::rusage,
}

/// Blocks until `pid` exits (retrying on EINTR) and returns its status and rusage.
fn wait4(pid: libc::pid_t) -> std::io::Result<Reaped> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: both pointers are to live, writable locals of the right types.
        let r = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
        if r == pid {
            return Ok(Reaped { status, usage });
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// `program` as `posix_spawnp` would find it through `$PATH`, looked up before the clock starts
/// (otherwise a bare name such as `cat` pays for a failed `execve` per earlier `$PATH` entry
/// inside the measured time, and a subject given by its full path does not).
fn resolve(program: &std::ffi::OsStr) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = std::path::Path::new(program);
    if p.components().count() != 1 {
        return p.to_path_buf();
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|c| {
                    std::fs::metadata(c)
                        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                })
        })
        .unwrap_or_else(|| p.to_path_buf())
}

fn tv_ns(tv: libc::timeval) -> i128 {
    i128::from(tv.tv_sec) * 1_000_000_000 + i128::from(tv.tv_usec) * 1_000
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args_os().skip(1).peekable();
    let mut timeout = None;
    while let Some(a) = args.peek() {
        if a == "--timeout" {
            args.next();
            let v = args.next().context("--timeout needs a value")?;
            let secs: f64 = v
                .to_str()
                .and_then(|s| s.parse().ok())
                .filter(|s: &f64| s.is_finite() && *s > 0.0)
                .with_context(|| format!("bad --timeout {}", v.to_string_lossy()))?;
            timeout = Some(Duration::from_secs_f64(secs));
        } else if a == "--" {
            args.next();
            break;
        } else {
            break;
        }
    }
    let Some(program) = args.next() else {
        bail!("usage: pisess-bench-run [--timeout SECONDS] [--] PROGRAM [ARGS...]");
    };
    let mut cmd = Command::new(resolve(&program));
    cmd.args(args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // argv[0] stays the name given, as a shell would pass it.
    std::os::unix::process::CommandExt::arg0(&mut cmd, &program);
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);

    // The watchdog exists before the clock starts; it learns the child's pid, then either hears
    // that the child was reaped or kills its group at the deadline.
    let watchdog = timeout.map(|limit| {
        let (pid_tx, pid_rx) = mpsc::channel::<libc::pid_t>();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let handle = std::thread::spawn(move || {
            let Ok(pid) = pid_rx.recv() else { return false };
            match done_rx.recv_timeout(limit) {
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    // SAFETY: kill(2) with a negative pid signals that process group; the group
                    // is the child's own (process_group(0)) and the child is not yet reaped.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    true
                }
                _ => false,
            }
        });
        (pid_tx, done_tx, handle)
    });

    let start = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", program.to_string_lossy()))?;
    let pid = libc::pid_t::try_from(child.id()).context("pid out of range")?;
    if let Some((pid_tx, _, _)) = &watchdog {
        pid_tx.send(pid).context("watchdog gone")?;
    }
    let reaped = wait4(pid).context("wait4")?;
    let wall = start.elapsed();
    // `child` is not waited for again (its Drop does not wait); the pid is already reaped.
    drop(child);
    let timed_out = match watchdog {
        Some((_, done_tx, handle)) => {
            let _ = done_tx.send(());
            handle.join().unwrap_or(false)
        }
        None => false,
    };

    let status = reaped.status;
    let exit = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        255
    };
    let cpu = tv_ns(reaped.usage.ru_utime) + tv_ns(reaped.usage.ru_stime);
    println!(
        "wall_ns={} cpu_ns={cpu} maxrss_kib={} exit={exit} timed_out={}",
        wall.as_nanos(),
        reaped.usage.ru_maxrss,
        u8::from(timed_out)
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pisess-bench-run: {e:#}");
            ExitCode::from(125)
        }
    }
}
