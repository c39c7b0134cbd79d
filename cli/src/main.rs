//! The `pisess` binary: everything happens in the library.
fn main() -> std::process::ExitCode {
    pisess_cli::main()
}
