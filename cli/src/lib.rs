//! pisess-cli: the `pisess` command line.
//!
//! Layout: [`cli`] holds the root arguments, `commands/<name>.rs` one file per command
//! (`<Name>Args` + `cmd_<name>`), [`command_error`] maps failures to exit codes, [`ui`] owns
//! stdout, colour and the JSON switch, [`output`] decides how an output FILE is written,
//! [`render`] draws sessions as Markdown and HTML.
//!
//! Exit status (all commands): 0 success; 1 a negative answer (problems found by `check`,
//! nothing found, differences); 2 any error. A closed stdout pipe exits 0 silently.
#![forbid(unsafe_code)]

/// `eprintln!` that never panics. std's panics when stderr cannot be written (a full disk, a
/// pipe closed early: `pisess log X 2>&1 | true`), which ended a command with exit 101, after
/// its work was done; a message that cannot be written is dropped instead. Defined before
/// the modules, so it is the `eprintln!` of the whole crate.
macro_rules! eprintln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod cli;
pub mod command_error;
pub mod commands;
pub mod graphlog;
pub mod json_stream;
pub mod listing;
pub mod output;
pub mod pager;
pub mod render;
pub mod session_arg;
pub mod table;
pub mod ui;

use std::process::ExitCode;

use std::ffi::OsString;

use clap::{FromArgMatches, Parser};

/// Parses the arguments, runs the command and turns the outcome into an exit status.
pub fn main() -> ExitCode {
    main_with(|_| {})
}

/// [`main`], with `prepare` called once the command is known and before it runs (before any
/// thread starts): the binary uses it to set up its heap for the commands that
/// [`short_query`] names.
pub fn main_with(prepare: impl FnOnce(&commands::Command)) -> ExitCode {
    ExitCode::from(status_with(prepare))
}

/// [`main_with`], giving the exit status as a number (for a binary that exits by itself).
pub fn status_with(prepare: impl FnOnce(&commands::Command)) -> u8 {
    let args = parse_args(std::env::args_os().collect());
    prepare(&args.command);
    session_arg::set_store_wait(std::time::Duration::from_secs(args.global.wait));
    let mut ui = ui::Ui::new(&args.global, commands::pages(&args.command));
    // redb meets some damaged pages with a panic (see `pisess_engine::panic_guard`): that is
    // the store's damage, reported as such (exit 2, with the rebuild hint); any other panic
    // still ends the process with status 101.
    let outcome =
        pisess_engine::panic_guard::redb_panics_as_damage(|| commands::run(&mut ui, args.command))
            .unwrap_or_else(|e| {
                let store = pisess_engine::default_store_path()
                    .map_or_else(|_| "the store".to_owned(), |p| p.display().to_string());
                Err(command_error::CommandError::from(
                    anyhow::Error::new(e).context(format!("cannot read the store {store}")),
                ))
            });
    let flushed = ui.flush();
    // The pager shows the answer; the prompt, and an error message, come after it.
    ui.finish_pager();
    let result = match (flushed, outcome) {
        // The answer is whole; only its last bytes found the reader gone (`| head`): the
        // status is the answer's, as when the reader takes everything.
        (Err(e), Ok(o)) if e.is_broken_pipe() => Ok(o),
        // The command's own error comes first: the flush fails again for the same cause (the
        // buffer still holds what could not be written), without the command's hint.
        (_, Err(e)) => Err(e),
        (flushed, Ok(o)) => flushed.map(|()| o),
    };
    match result {
        Ok(o) => o.code(),
        // A reader that stopped early, while the command was still writing its answer.
        Err(e) if e.is_broken_pipe() => 0,
        Err(e) => {
            e.print();
            2
        }
    }
}

/// Whether `command` only reads the store and exits, touching tens of megabytes of fresh memory
/// once, so that the binary may back its heap with huge pages: `files` over the whole store (with
/// `--session`, a session file may be imported on the fly, which keeps the usual heap), `tree`,
/// which keeps a big session's decoded blocks (the 1 GiB benchmark session: 103.7 vs 124.8 ms
/// median, 9 interleaved runs), and `log`, which decodes every block of a big session's path
/// (the same session: 11,553 page faults → 235, 55.8 → 48.8 ms, `perf stat -r 15`). `tree
/// FILE` and `log FILE` import the file first when it changed: with these heaps the import of
/// the 1 GiB session peaked at 223 MB instead of 205 MB. The set-up costs a small session about
/// 0.2 ms (its first huge page).
pub fn short_query(command: &commands::Command) -> bool {
    matches!(command, commands::Command::Files(a) if a.session.is_none())
        || matches!(
            command,
            commands::Command::Tree(_) | commands::Command::Log(_)
        )
}

/// Parses the command line. Building clap's full command (every command's arguments, the global
/// options copied into each) costs about as much CPU as a whole re-import of an unchanged
/// folder, so when `argv` names a command, the root is built with that command alone (the same
/// arguments: [`commands::lone`]). Anything that parse does not accept (an error, `--help`,
/// `--version`, no command) is parsed again with the full command, so every message and exit
/// status is clap's usual one.
pub fn parse_args(argv: Vec<OsString>) -> cli::Args {
    if let Some(args) = plain_import(&argv) {
        return args;
    }
    if let Some(root) = command_named(&argv).and_then(|name| {
        let sub = commands::lone(name)?;
        Some(
            <cli::GlobalArgs as clap::Args>::augment_args(clap::Command::new("pisess"))
                .subcommand(sub),
        )
    }) && let Ok(m) = root.try_get_matches_from(&argv)
        && let Ok(args) = cli::Args::from_arg_matches(&m)
    {
        return args;
    }
    match cli::Args::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => std::process::exit(clap_exit(&e)),
    }
}

/// Prints clap's message (a usage error on stderr, `--help` or `--version` on stdout) and gives
/// the exit status: clap's own, but 2 when the help could not be written (a full disk: clap's
/// `exit` ignores that and says 0, as if the help had been shown) — unless the reader simply
/// left (`| head`), which is not an error.
fn clap_exit(e: &clap::Error) -> i32 {
    use std::io::Write;
    let written = e.print().and_then(|()| {
        if e.use_stderr() {
            Ok(())
        } else {
            std::io::stdout().flush()
        }
    });
    match written {
        Err(w) if !e.use_stderr() && w.kind() != std::io::ErrorKind::BrokenPipe => {
            eprintln!("error: cannot write to stdout: {w}");
            2
        }
        _ => e.exit_code(),
    }
}

/// The arguments of `pisess import [PATH...]` with nothing else on the line: every argument
/// after `import` a path that is not empty and does not start with `-` (so no option, no `--`,
/// no `-h`). clap's parse of such a line is exactly this (the test
/// `plain_imports_parse_as_clap_parses_them` holds it to that); building even the lone command
/// costs a re-import of an unchanged folder a tenth of its instructions (clap's ~125 K of
/// ~750 K), and that line is how pi's folder is kept in step. `None` for any other line.
fn plain_import(argv: &[OsString]) -> Option<cli::Args> {
    let mut it = argv.iter().skip(1);
    if it.next()? != "import" {
        return None;
    }
    let paths = it
        .map(|a| {
            let plain = a.as_encoded_bytes().first().is_some_and(|&b| b != b'-');
            plain.then(|| std::path::PathBuf::from(a))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(cli::Args {
        global: cli::GlobalArgs {
            json: false,
            color: cli::ColorChoice::Auto,
            wait: 0,
            no_pager: false,
        },
        command: commands::Command::Import(commands::import::ImportArgs { paths, full: false }),
    })
}

/// The first argument that is not an option or a global option's value: the command's name, if
/// the command line is well formed.
fn command_named(argv: &[OsString]) -> Option<&str> {
    let mut it = argv.iter().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_str()?;
        match a {
            "--" => return None,
            // The global options that take a value as the next argument.
            "--color" | "--wait" => {
                it.next();
            }
            _ if a.starts_with('-') => {}
            _ => return Some(a),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every line [`plain_import`] answers, clap's full parse answers the same way; the lines it
    /// leaves to clap include every kind of argument that is not a plain path.
    #[test]
    fn plain_imports_parse_as_clap_parses_them() {
        use std::os::unix::ffi::OsStringExt;
        let line = |args: &[&[u8]]| -> Vec<OsString> {
            std::iter::once(&b"pisess"[..])
                .chain(args.iter().copied())
                .map(|a| OsString::from_vec(a.to_vec()))
                .collect()
        };
        let plain: &[&[&[u8]]] = &[
            &[b"import"],
            &[b"import", b"a"],
            &[
                b"import",
                b"/x/y.jsonl",
                b"rel/dir",
                b"with space",
                b"a=b",
                b"x-",
            ],
            &[b"import", b"\xff\xfe-not-utf8", b"\xc3\xa9t\xc3\xa9"],
            &[b"import", b"import", b"json", b"~"],
        ];
        for args in plain {
            let argv = line(args);
            let fast = plain_import(&argv).unwrap_or_else(|| panic!("{argv:?} is plain"));
            let full = cli::Args::try_parse_from(&argv).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{full:?}"), "{argv:?}");
        }
        let not_plain: &[&[&[u8]]] = &[
            &[],
            &[b"--json", b"import"],
            &[b"import", b"--json"],
            &[b"import", b"a", b"--color", b"never"],
            &[b"import", b"--wait", b"3", b"a"],
            &[b"import", b"-h"],
            &[b"import", b"--", b"-dash"],
            &[b"import", b"-"],
            &[b"import", b""],
            &[b"import", b"a", b""],
            &[b"ls"],
            &[b"imp"],
            &[b"Import", b"a"],
        ];
        for args in not_plain {
            assert!(plain_import(&line(args)).is_none(), "{args:?}");
        }
    }

    /// `commands::lone` must build each command exactly as the derive does inside the full
    /// command: same names, same arguments, every field of every argument.
    #[test]
    fn lone_commands_are_the_full_commands() {
        let full = cli::Args::command();
        let mut n = 0;
        for sub in full.get_subcommands() {
            let name = sub.get_name();
            let lone = commands::lone(name).unwrap_or_else(|| panic!("no lone command {name}"));
            let a: Vec<String> = sub.get_arguments().map(|a| format!("{a:?}")).collect();
            let b: Vec<String> = lone.get_arguments().map(|a| format!("{a:?}")).collect();
            assert_eq!(a, b, "arguments of {name}");
            n += 1;
        }
        assert_eq!(
            n, 20,
            "a command was added: give it a line in commands::lone"
        );
        assert!(commands::lone("nope").is_none());
    }

    /// The huge-page heap is for `files` over the whole store (with `--session` it may import
    /// a file), `tree` and `log`; no other command is a short query.
    #[test]
    fn short_query_is_files_over_the_store_tree_and_log() {
        let q = |argv: &[&str]| {
            short_query(&parse_args(argv.iter().map(OsString::from).collect()).command)
        };
        assert!(q(&["pisess", "files", "src/**"]));
        assert!(q(&["pisess", "--json", "files", "--op", "read", "a.rs"]));
        assert!(!q(&["pisess", "files", "--session", "s.jsonl", "src/**"]));
        assert!(!q(&["pisess", "files", "src/**", "--session=@latest"]));
        assert!(q(&["pisess", "log", "s.jsonl"]));
        assert!(q(&["pisess", "--json", "log", "--all", "s.jsonl"]));
        assert!(q(&["pisess", "tree", "@latest"]));
        assert!(!q(&["pisess", "context", "s.jsonl"]));
        assert!(!q(&["pisess", "import"]));
        assert!(!q(&["pisess", "grep", "x"]));
    }

    /// The lean parse gives the same result as clap's full parse.
    #[test]
    fn lean_parse_is_the_full_parse() {
        let cases: &[&[&str]] = &[
            &["pisess", "import"],
            &["pisess", "import", "a", "b/c"],
            &["pisess", "--json", "ls"],
            &["pisess", "ls", "--json", "--since", "2026-01-01"],
            &["pisess", "--wait", "5", "log", "x", "-n", "3"],
            &["pisess", "--color", "never", "tree", "x"],
            &["pisess", "log", "--color=always", "x", "--all"],
            &["pisess", "files", "src/**"],
            &["pisess", "export", "x", "--format", "md", "-o", "f.md"],
            &["pisess", "migrate", "--jobs", "2", "d"],
        ];
        for argv in cases {
            let argv: Vec<OsString> = argv.iter().map(OsString::from).collect();
            assert!(command_named(&argv).is_some());
            let full = cli::Args::try_parse_from(&argv).map(|a| format!("{a:?}"));
            let full = full.unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            assert_eq!(format!("{:?}", parse_args(argv.clone())), full, "{argv:?}");
        }
    }

    #[test]
    fn command_named_skips_options_and_their_values() {
        let v = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(command_named(&v(&["p", "--wait", "3", "ls"])), Some("ls"));
        assert_eq!(
            command_named(&v(&["p", "--color", "ls", "log"])),
            Some("log")
        );
        assert_eq!(
            command_named(&v(&["p", "--json", "import", "x"])),
            Some("import")
        );
        assert_eq!(command_named(&v(&["p", "--", "ls"])), None);
        assert_eq!(command_named(&v(&["p", "--version"])), None);
    }
}
