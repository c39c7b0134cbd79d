//! The `pisess` binary: everything happens in the library but the heap's set-up, which needs
//! `unsafe` and so lives here, outside the library crates (they forbid it).
mod heap;

fn main() -> std::process::ExitCode {
    pisess_cli::main_with(|command| {
        if pisess_cli::short_query(command) {
            heap::prefer_huge_pages();
        }
    })
}
