//! `pisess migrate`: v1/v2 → v3 with deterministic ids; the source is never changed.

use std::path::PathBuf;

use anyhow::{Context, anyhow};

use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::ui::{Ui, safe};

/// Migrate v1/v2 session files to v3 with deterministic ids; the source is never changed.
///
/// `pisess migrate FILE --stdout` prints FILE migrated to v3 as JSONL. Ids that pi would draw
/// at random are derived from the session id and the entry's position, so two runs give the
/// same bytes. A v3 file is printed unchanged. Problems found on the way (glued records
/// recovered, malformed lines skipped) are reported on stderr.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    /// Session files.
    pub paths: Vec<PathBuf>,
    /// Print the migrated file to stdout (exactly one FILE).
    #[arg(long)]
    pub stdout: bool,
}

/// Runs `pisess migrate`.
pub fn cmd_migrate(ui: &mut Ui, args: &MigrateArgs) -> CommandResult {
    if !args.stdout {
        return Err(CommandError::with_hint(
            anyhow!("only `pisess migrate FILE --stdout` is available in this version"),
            "pass --stdout and redirect the output to a new file",
        ));
    }
    let [path] = args.paths.as_slice() else {
        return Err(CommandError::with_hint(
            anyhow!(
                "--stdout takes exactly one FILE ({} given)",
                args.paths.len()
            ),
            "migrate one file at a time with --stdout",
        ));
    };
    let outcome = pisess_migrate::migrate_file(path, ui.out())
        .with_context(|| format!("cannot migrate {}", path.display()))?;
    for p in &outcome.problems {
        eprintln!(
            "{}:{}: {}: {}",
            path.display(),
            p.line,
            p.severity(),
            safe(&p.kind.to_string())
        );
    }
    for n in &outcome.notes {
        eprintln!("{}: note: {}", path.display(), safe(&n.to_string()));
    }
    Ok(Outcome::Success)
}
