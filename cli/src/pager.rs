//! The pager: a listing bound for a terminal goes through `less` (or `$PISESS_PAGER`, else
//! `$PAGER`), as git and jj page theirs.
//!
//! Invariants:
//! - a pager is used only when stdout is a terminal, the command is one that lists
//!   ([`crate::commands::pages`]) and `--no-pager` is not given; a pager command that is empty
//!   or `cat` is no pager (git reads them so), and without one set, `less` is used only when
//!   `TERM` is set and not `dumb`;
//! - it starts at the first write to stdout, not before: what a command does before it has
//!   output (an import on the fly, an error) stays on the terminal as it is, and a command with
//!   no output starts none;
//! - a command of plain words (`less -R`, `/usr/bin/most`) is run directly, anything else
//!   (quotes, pipes, variables) by `sh -c`; its stdout and stderr are the terminal; `LESS=FRX`
//!   (quit when the output fits on one screen, pass colours through, leave the screen as it is)
//!   and `LV=-c` are set for it when unset, as git sets them; pisess's own stdout is not
//!   touched, so the layout and colours are decided by the terminal as without a pager;
//! - while it runs, pisess's stderr, when it is the terminal, goes into the pager too (as git
//!   does), so a warning or note written after the listing is shown after it, not on the
//!   screen behind the pager; [`Pager::finish`] gives stderr back before the pipe is closed;
//! - as it starts, the hooks the binary installs ([`set_signal_hooks`]: SIGINT and SIGQUIT
//!   ignored, by pisess and so by a `sh` it starts) leave a Ctrl-C to the pager (`less` sets its
//!   own handler); they are undone when the pager cannot start or has ended; pisess stops at
//!   its next write after the pager has closed its input (EPIPE: the quiet exit of a reader
//!   that left);
//! - at the end, [`Pager::finish`] closes the pipe and waits for the pager, so the shell's
//!   prompt (and any error message) comes after it; later writes are refused as to a closed
//!   pipe, never sent to the terminal behind the pager's back;
//! - a pager that cannot be started (a plain command that is not found) is reported once on
//!   stderr, and the output goes to the terminal. (One run by `sh` that is not found is `sh`'s
//!   to report, and the listing is lost with it, as with git.)

use std::io::{self, IsTerminal, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

/// What the binary does to the keyboard's signals around a pager (the library, free of
/// `unsafe`, cannot).
struct SignalHooks {
    /// Called as the pager starts, before it is spawned.
    ignore: fn(),
    /// Called when it could not start, or has ended.
    restore: fn(),
}

static SIGNAL_HOOKS: OnceLock<SignalHooks> = OnceLock::new();

/// Sets the functions called as a pager starts, before it is spawned (`ignore`), and when it
/// could not start or has ended (`restore`). The first call wins.
pub fn set_signal_hooks(ignore: fn(), restore: fn()) {
    let _ = SIGNAL_HOOKS.set(SignalHooks { ignore, restore });
}

fn ignore_signals() {
    if let Some(h) = SIGNAL_HOOKS.get() {
        (h.ignore)();
    }
}

fn restore_signals() {
    if let Some(h) = SIGNAL_HOOKS.get() {
        (h.restore)();
    }
}

/// The pager command from the environment: `PISESS_PAGER`, else `PAGER`, else `less` when the
/// terminal can run it (`TERM` set and not `dumb`, as git's `is_terminal_dumb` reads it: less
/// would stop at "terminal is not fully functional"); `None` when it is empty or `cat`.
pub fn command_from_env() -> Option<String> {
    let capable = std::env::var_os("TERM").is_some_and(|t| !t.is_empty() && t != "dumb");
    let cmd = std::env::var_os("PISESS_PAGER")
        .or_else(|| std::env::var_os("PAGER"))
        .map(|c| c.to_string_lossy().into_owned())
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
    /// Running: its input, the process, and pisess's own stderr when it was moved into the
    /// pager's input.
    Running(ChildStdin, Child, Option<OwnedFd>),
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
            // Before the start, so that a `sh` between pisess and the pager inherits it: a
            // shell that runs a command without `exec` (dash does) would die of a Ctrl-C.
            ignore_signals();
            self.state = match start(cmd) {
                Ok((stdin, child)) => {
                    let saved = stderr_into(&stdin);
                    State::Running(stdin, child, saved)
                }
                Err(e) => {
                    restore_signals();
                    eprintln!(
                        "warning: cannot start the pager `{cmd}`: {e}; writing to the terminal"
                    );
                    State::Failed
                }
            };
        }
        match &mut self.state {
            State::Running(stdin, _, _) => Ok(Some(stdin)),
            State::Failed => Ok(None),
            State::Ready(_) | State::Closed => Err(io::Error::from(io::ErrorKind::BrokenPipe)),
        }
    }

    /// Gives stderr back, closes the pager's input and waits for it to end (at once when it
    /// never started).
    pub fn finish(&mut self) {
        if let State::Running(stdin, mut child, saved) =
            std::mem::replace(&mut self.state, State::Closed)
        {
            if let Some(fd) = saved {
                // Else the pager's input stays open through stderr, and the wait never ends:
                // a failure here leaves the pager running, not waited for.
                if restore_stderr(&fd).is_err() {
                    drop(stdin);
                    restore_signals();
                    return;
                }
            }
            drop(stdin);
            // Its exit status is the pager's business (less says why it failed, if it did).
            let _ = child.wait();
            restore_signals();
        }
    }
}

impl Drop for Pager {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Whether `cmd` is plain words, which run as a program and its arguments without a shell.
fn plain_words(cmd: &str) -> bool {
    cmd.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" \t_./:=,+@%-".contains(&b))
}

/// Starts `cmd` (directly when it is plain words, else through `sh -c`) with a piped stdin.
fn start(cmd: &str) -> io::Result<(ChildStdin, Child)> {
    let mut c = if plain_words(cmd) {
        let mut words = cmd.split_ascii_whitespace();
        let mut c = Command::new(words.next().unwrap_or("less"));
        c.args(words);
        c
    } else {
        let mut c = Command::new("sh");
        c.arg("-c").arg(cmd);
        c
    };
    c.stdin(Stdio::piped());
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

/// Moves pisess's stderr, when it is the terminal, into the pager's input; gives the terminal's
/// descriptor to restore it with, or `None` when stderr stays as it is.
fn stderr_into(input: &ChildStdin) -> Option<OwnedFd> {
    if !io::stderr().is_terminal() {
        return None;
    }
    let saved = io::stderr().as_fd().try_clone_to_owned().ok()?;
    rustix::stdio::dup2_stderr(input).ok()?;
    Some(saved)
}

/// Puts the terminal back on stderr.
fn restore_stderr(fd: &OwnedFd) -> io::Result<()> {
    let _ = io::stderr().flush();
    rustix::stdio::dup2_stderr(fd).map_err(io::Error::from)
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
