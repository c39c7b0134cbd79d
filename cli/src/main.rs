//! The `pisess` binary: everything happens in the library.
//!
//! The allocator is mimalloc: an import allocates each row on the parse threads and frees it on
//! the writer thread, which glibc's malloc serialises on its per-arena locks (a sixth of the
//! import's CPU went to malloc, free and the futex wake-ups of their locks). Version 2, whose
//! freed pages go back to the system after 10 ms: version 3 keeps them for a second, which
//! raised the peak RSS of importing a 1 GiB session from ~200 to ~280 MB (issue 3: < 256 MiB).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    pisess_cli::main()
}
