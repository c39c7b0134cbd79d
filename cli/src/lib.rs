//! pisess-cli: the `pisess` command line.
//!
//! Layout: [`cli`] holds the root arguments, `commands/<name>.rs` one file per command
//! (`<Name>Args` + `cmd_<name>`), [`command_error`] maps failures to exit codes, [`ui`] owns
//! stdout, colour and the JSON switch, [`render`] draws sessions as Markdown and HTML.
//!
//! Exit status (all commands): 0 success; 1 a negative answer (problems found by `check`,
//! nothing found, differences); 2 any error. A closed stdout pipe exits 0 silently.
#![forbid(unsafe_code)]

pub mod cli;
pub mod command_error;
pub mod commands;
pub mod graphlog;
pub mod json_stream;
pub mod listing;
pub mod render;
pub mod session_arg;
pub mod ui;

use std::process::ExitCode;

use clap::Parser;

/// Parses the arguments, runs the command and turns the outcome into an exit status.
pub fn main() -> ExitCode {
    let args = cli::Args::parse();
    session_arg::set_store_wait(std::time::Duration::from_secs(args.global.wait));
    let mut ui = ui::Ui::new(&args.global);
    let outcome = commands::run(&mut ui, args.command);
    let flushed = ui.flush();
    match flushed.and(outcome) {
        Ok(o) => ExitCode::from(o.code()),
        Err(e) if e.is_broken_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            e.print();
            ExitCode::from(2)
        }
    }
}
