//! `pisess man [COMMAND]`: the manual page (roff), generated from the clap definition.
//!
//! Invariants: pages are derived from the same `Args` the binary parses (help texts are the doc
//! comments), so they cannot drift from `--help`; output goes to stdout only.

use anyhow::anyhow;
use clap::CommandFactory;

use crate::cli::Args;
use crate::command_error::{CommandError, CommandResult, Outcome};
use crate::ui::Ui;

/// Print the manual page (roff) of pisess, or of one command.
///
/// Install with e.g. `pisess man > ~/.local/share/man/man1/pisess.1` and
/// `pisess man log > ~/.local/share/man/man1/pisess-log.1`; read one without installing with
/// `pisess man log | man -l -`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// The command whose page to print (default: the main page).
    pub command: Option<String>,
}

/// Runs `pisess man`.
pub fn cmd_man(ui: &mut Ui, args: &ManArgs) -> CommandResult {
    let mut root = Args::command();
    root.build();
    let page = match &args.command {
        // NAME reads "pisess - inspect, …": the help's first line names the program already.
        None => {
            let about = root
                .get_about()
                .map(ToString::to_string)
                .unwrap_or_default();
            let about = about.strip_prefix("pisess: ").unwrap_or(&about).to_owned();
            root.about(about)
        }
        Some(name) => {
            let names: Vec<String> = root
                .get_subcommands()
                .map(|c| c.get_name().to_owned())
                .collect();
            let Some(sub) = root.find_subcommand(name) else {
                return Err(CommandError::with_hint(
                    anyhow!("no command is called {name:?}"),
                    format!("commands: {}", names.join(", ")),
                ));
            };
            let full = format!("pisess-{}", sub.get_name());
            sub.clone().display_name(full)
        }
    };
    clap_mangen::Man::new(page).render(ui.out())?;
    Ok(Outcome::Success)
}
