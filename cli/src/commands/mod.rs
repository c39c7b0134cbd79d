//! One file per command: `<Name>Args` (clap derive; doc comments are the help) and `cmd_<name>`.

use clap::Subcommand;

use crate::command_error::CommandResult;
use crate::ui::Ui;

pub mod check;
pub mod compact;
pub mod completions;
pub mod context;
pub mod diff;
pub mod export;
pub mod files;
pub mod fork;
pub mod grep;
pub mod import;
pub mod log;
pub mod ls;
pub mod man;
pub mod migrate;
pub mod navigate;
pub mod prune;
pub mod show;
pub mod stats;
pub mod summarizer;
pub mod tree;
pub mod util;
pub mod verify;

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read session files and report every problem found, with its location.
    Check(check::CheckArgs),
    /// Import session files and folders into the store (incremental; default: pi's folder).
    Import(import::ImportArgs),
    /// Write a session or a branch as JSONL, a Markdown transcript, or an HTML page.
    Export(export::ExportArgs),
    /// List the imported sessions, newest first.
    Ls(ls::LsArgs),
    /// Check the store: redb integrity, row hashes, tree links, id index.
    Verify(verify::VerifyArgs),
    /// Find tool calls that read or changed a path, folder or glob.
    Files(files::FilesArgs),
    /// Migrate v1/v2 session files to v3: dry run, in place with a backup, or into a folder.
    Migrate(migrate::MigrateArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Log(log::LogArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Tree(tree::TreeArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Show(show::ShowArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Context(context::ContextArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Diff(diff::DiffArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Compact(compact::CompactArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Navigate(navigate::NavigateArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Prune(prune::PruneArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Grep(grep::GrepArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Stats(stats::StatsArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Completions(completions::CompletionsArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Man(man::ManArgs),
    // (help: the doc comment of the Args struct)
    #[allow(missing_docs)]
    Fork(fork::ForkArgs),
}

/// The command `name` alone, as clap's derive would build it inside the full command (same
/// arguments), or `None` for a name that is not a command. Used by [`crate::parse_args`] to
/// parse without building the other commands; `tests` check it against the full command.
pub fn lone(name: &str) -> Option<clap::Command> {
    use clap::Args as _;
    type Augment = fn(clap::Command) -> clap::Command;
    let (name, augment): (&'static str, Augment) = match name {
        "check" => ("check", check::CheckArgs::augment_args),
        "import" => ("import", import::ImportArgs::augment_args),
        "export" => ("export", export::ExportArgs::augment_args),
        "ls" => ("ls", ls::LsArgs::augment_args),
        "verify" => ("verify", verify::VerifyArgs::augment_args),
        "files" => ("files", files::FilesArgs::augment_args),
        "migrate" => ("migrate", migrate::MigrateArgs::augment_args),
        "log" => ("log", log::LogArgs::augment_args),
        "tree" => ("tree", tree::TreeArgs::augment_args),
        "show" => ("show", show::ShowArgs::augment_args),
        "context" => ("context", context::ContextArgs::augment_args),
        "diff" => ("diff", diff::DiffArgs::augment_args),
        "compact" => ("compact", compact::CompactArgs::augment_args),
        "navigate" => ("navigate", navigate::NavigateArgs::augment_args),
        "prune" => ("prune", prune::PruneArgs::augment_args),
        "grep" => ("grep", grep::GrepArgs::augment_args),
        "stats" => ("stats", stats::StatsArgs::augment_args),
        "completions" => ("completions", completions::CompletionsArgs::augment_args),
        "man" => ("man", man::ManArgs::augment_args),
        "fork" => ("fork", fork::ForkArgs::augment_args),
        _ => return None,
    };
    Some(augment(clap::Command::new(name)))
}

/// Whether `command` lists something that a terminal pages ([`crate::pager`]): the commands
/// that only read and print, as git pages `log`, `show` and `diff`.
pub fn pages(command: &Command) -> bool {
    matches!(
        command,
        Command::Log(_)
            | Command::Tree(_)
            | Command::Show(_)
            | Command::Diff(_)
            | Command::Context(_)
            | Command::Grep(_)
            | Command::Files(_)
            | Command::Ls(_)
            | Command::Stats(_)
    )
}

/// Runs `command`, writing its answer through `ui`.
pub fn run(ui: &mut Ui, command: Command) -> CommandResult {
    match command {
        Command::Check(args) => check::cmd_check(ui, &args),
        Command::Import(args) => import::cmd_import(ui, &args),
        Command::Export(args) => export::cmd_export(ui, &args),
        Command::Ls(args) => ls::cmd_ls(ui, &args),
        Command::Verify(args) => verify::cmd_verify(ui, &args),
        Command::Files(args) => files::cmd_files(ui, &args),
        Command::Migrate(args) => migrate::cmd_migrate(ui, &args),
        Command::Log(args) => log::cmd_log(ui, &args),
        Command::Tree(args) => tree::cmd_tree(ui, &args),
        Command::Show(args) => show::cmd_show(ui, &args),
        Command::Context(args) => context::cmd_context(ui, &args),
        Command::Diff(args) => diff::cmd_diff(ui, &args),
        Command::Compact(args) => compact::cmd_compact(ui, &args),
        Command::Navigate(args) => navigate::cmd_navigate(ui, &args),
        Command::Prune(args) => prune::cmd_prune(ui, &args),
        Command::Grep(args) => grep::cmd_grep(ui, &args),
        Command::Stats(args) => stats::cmd_stats(ui, &args),
        Command::Completions(args) => completions::cmd_completions(ui, &args),
        Command::Man(args) => man::cmd_man(ui, &args),
        Command::Fork(args) => fork::cmd_fork(ui, &args),
    }
}
