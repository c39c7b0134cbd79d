//! `pisess migrate`: v1/v2 → v3.

use std::path::PathBuf;

use crate::command_error::{CommandError, CommandResult};
use crate::ui::Ui;

/// Migrate v1/v2 session files to v3 with deterministic ids; the source is never changed.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Session files or folders.
    pub paths: Vec<PathBuf>,
    /// Print the migrated file to stdout (one FILE). A v3 file is printed unchanged.
    #[arg(long)]
    pub stdout: bool,
}

/// Runs `pisess migrate`.
pub fn cmd_migrate(_ui: &mut Ui, _args: &MigrateArgs) -> CommandResult {
    Err(CommandError::with_hint(
        anyhow::anyhow!("migrate is not wired yet"),
        "use --stdout",
    ))
}
