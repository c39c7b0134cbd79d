//! The pager: a listing bound for a terminal goes through `less` (or `$PISESS_PAGER`, else
//! `$PAGER`), as git and jj page theirs.
//!
//! Invariants:
//! - a pager is used only when stdout is a terminal, the command is one that lists
//!   ([`crate::commands::pages`]) and `--no-pager` is not given; a pager command that is empty
//!   or `cat` is no pager (git reads them so), and without one set, `less` is used only when
//!   `TERM` is set and not `dumb`;
//! - it starts at the first write to stdout, not before: what a command does before it has
//!   output (an import on the fly with its progress bar, an error) stays on the terminal as it
//!   is, and a command with no output starts none;
//! - it runs through `sh -c`, its stdout and stderr are the terminal, and `LESS=FRX` (quit when
//!   the output fits on one screen, pass colours through, leave the screen as it is) and
//!   `LV=-c` are set for it when unset, as git sets them; pisess's own stdout is not touched, so
//!   the layout and colours are decided by the terminal as without a pager;
//! - as it starts, the hook the binary installs ([`set_start_hook`]: SIGINT and SIGQUIT
//!   ignored, by pisess and so by the `sh` it starts) leaves a Ctrl-C to the pager (`less`
//!   sets its own handler); pisess stops at its next write after the pager has closed its
//!   input (EPIPE: the quiet exit of a reader that left);
//! - at the end, [`Pager::finish`] closes the pipe and waits for the pager, so the shell's
//!   prompt (and any error message) comes after it; later writes are refused as to a closed
//!   pipe, never sent to the terminal behind the pager's back;
//! - a pager that cannot be started is reported once on stderr, and the output goes to the
//!   terminal.

use std::io::{self, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

/// Called as a pager starts (the binary ignores the keyboard's signals there, which the
/// library, free of `unsafe`, cannot do).
static START_HOOK: OnceLock<fn()> = OnceLock::new();

/// Sets the function called as a pager starts, before it is spawned (the first call wins).
pub fn set_start_hook(hook: fn()) {
    let _ = START_HOOK.set(hook);
}

/// The pager command from the environment: `PISESS_PAGER`, else `PAGER`, else `less` when the
/// terminal can run it (`TERM` set and not `dumb`, as git's `is_terminal_dumb` reads it: less
/// would stop at "terminal is not fully functional"); `None` when it is empty or `cat`.
pub fn command_from_env() -> Option<String> {
    let capable = std::env::var_os("TERM").is_some_and(|t| !t.is_empty() && t != "dumb");
    let cmd = std::env::var("PISESS_PAGER")
        .or_else(|_| std::env::var("PAGER"))
        .ok()
        .or_else(|| capable.then(|| "less".to_owned()))?;
    let trimmed = cmd.trim();
    (!trimmed.is_empty() && trimmed != "cat").then(|| trimmed.to_owned())
}

/// Where stdout's bytes go when they may be paged.
#[derive(Debug)]
pub struct Pager {
    state: State,
}

#[derive(Debug)]
enum State {
    /// Not started yet: the command to start at the first write.
    Ready(String),
    /// Running: its input, and the process.
    Running(ChildStdin, Child),
    /// Could not start: the output goes to the terminal.
    Failed,
    /// Finished: nothing more is written.
    Closed,
}

impl Pager {
    /// A pager that runs `cmd` at the first write.
    pub fn new(cmd: String) -> Self {
        Self {
            state: State::Ready(cmd),
        }
    }

    /// The pager's input, started now if it was not; `None` when the output goes to the
    /// terminal (the pager could not start). An error once the pager is finished.
    pub fn input(&mut self) -> io::Result<Option<&mut ChildStdin>> {
        if let State::Ready(cmd) = &self.state {
            // Before the start, so that the `sh` between pisess and the pager inherits it: a
            // shell that runs a command without `exec` (dash does) would die of a Ctrl-C.
            if let Some(hook) = START_HOOK.get() {
                hook();
            }
            self.state = match start(cmd) {
                Ok((stdin, child)) => State::Running(stdin, child),
                Err(e) => {
                    eprintln!(
                        "warning: cannot start the pager `{cmd}`: {e}; writing to the terminal"
                    );
                    State::Failed
                }
            };
        }
        match &mut self.state {
            State::Running(stdin, _) => Ok(Some(stdin)),
            State::Failed => Ok(None),
            State::Ready(_) | State::Closed => Err(io::Error::from(io::ErrorKind::BrokenPipe)),
        }
    }

    /// Closes the pager's input and waits for it to end (at once when it never started).
    pub fn finish(&mut self) {
        if let State::Running(stdin, mut child) = std::mem::replace(&mut self.state, State::Closed)
        {
            drop(stdin);
            // Its exit status is the pager's business (less says why it failed, if it did).
            let _ = child.wait();
        }
    }
}

/// Starts `cmd` through `sh -c` with a piped stdin.
fn start(cmd: &str) -> io::Result<(ChildStdin, Child)> {
    let mut c = Command::new("sh");
    c.arg("-c").arg(cmd).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        c.env("LESS", "FRX");
    }
    if std::env::var_os("LV").is_none() {
        c.env("LV", "-c");
    }
    let mut child = c.spawn()?;
    match child.stdin.take() {
        Some(stdin) => Ok((stdin, child)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(io::Error::other("the pager has no input"))
        }
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Writes `buf` to the pager's input, or to `terminal` when no pager runs.
pub fn write_all(
    pager: Option<&mut Pager>,
    terminal: &mut io::Stdout,
    buf: &[u8],
) -> io::Result<()> {
    match pager {
        Some(p) => match p.input()? {
            Some(input) => input.write_all(buf),
            None => terminal.write_all(buf),
        },
        None => terminal.write_all(buf),
    }
}
