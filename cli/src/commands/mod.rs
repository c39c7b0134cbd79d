//! One file per command: `<Name>Args` (clap derive; doc comments are the help) and `cmd_<name>`.

use clap::Subcommand;

use crate::command_error::CommandResult;
use crate::ui::Ui;

pub mod check;
pub mod migrate;
pub mod util;

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read session files and report every problem found, with its location.
    Check(check::CheckArgs),
    /// Migrate v1/v2 session files to v3 (deterministic ids; the source is never changed).
    Migrate(migrate::MigrateArgs),
}

/// Runs a command.
pub fn run(ui: &mut Ui, command: Command) -> CommandResult {
    match command {
        Command::Check(args) => check::cmd_check(ui, &args),
        Command::Migrate(args) => migrate::cmd_migrate(ui, &args),
    }
}
