//! Root arguments shared by every command.

use clap::{Parser, ValueEnum};

use crate::commands::Command;

/// pisess: inspect, query, migrate, prune and share pi coding-agent session trees.
#[derive(Debug, Parser)]
#[command(name = "pisess", version, about, max_term_width = 100)]
pub struct Args {
    /// Options every command takes.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes.
#[derive(Debug, clap::Args)]
pub struct GlobalArgs {
    /// Print machine-readable JSON (JSON Lines for listings) instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// When to colour the output.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    /// When another process holds the store, retry for up to SECONDS. Without it a command
    /// that only reads fails at once while a writer holds the store (and waits up to 5 s
    /// while one waits for it); a command that writes waits up to 5 s for readers.
    #[arg(long, global = true, value_name = "SECONDS", default_value_t = 0)]
    pub wait: u64,
    /// Do not page the output. Listings (log, tree, show, diff, context, grep, files, ls,
    /// stats) bound for a terminal go through $PISESS_PAGER, else $PAGER, else `less` when
    /// TERM is set and not "dumb" (with LESS=FRX when LESS is unset: it exits at once when the
    /// output fits on the screen); a pager set to "" or "cat" is none.
    #[arg(long, global = true)]
    pub no_pager: bool,
}

/// When to colour the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is not set.
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}
