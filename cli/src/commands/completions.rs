//! `pisess completions SHELL`: a shell completion script, generated from the clap definition.
//!
//! Invariants: the script is derived from the same `Args` the binary parses, so it can never
//! offer a flag the binary does not take; it goes to stdout only.

use clap::CommandFactory;

use crate::cli::Args;
use crate::command_error::{CommandResult, Outcome};
use crate::ui::Ui;

/// Print a completion script for a shell.
///
/// Install it where your shell looks, e.g.
/// `pisess completions bash > ~/.local/share/bash-completion/completions/pisess`,
/// `pisess completions zsh > ~/.zfunc/_pisess`,
/// `pisess completions fish > ~/.config/fish/completions/pisess.fish`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Runs `pisess completions`.
pub fn cmd_completions(ui: &mut Ui, args: &CompletionsArgs) -> CommandResult {
    let mut cmd = Args::command();
    clap_complete::generate(args.shell, &mut cmd, "pisess", ui.out());
    Ok(Outcome::Success)
}
