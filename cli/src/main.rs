//! The `pisess` binary: everything happens in the library but the heap's set-up, which needs
//! `unsafe` and so lives here, outside the library crates (they forbid it).
mod heap;

fn main() -> std::process::ExitCode {
    pisess_cli::main_with(|command| {
        if pisess_cli::short_query(command) && heap::prefer_huge_pages() {
            // The global pool, built before anything else could build it, so that each worker
            // advises its own arena's heap as it starts (if it was built already, the workers
            // keep the usual heaps, and nothing else changes).
            let _ = rayon::ThreadPoolBuilder::new()
                .start_handler(|_| {
                    heap::prefer_huge_pages_in_thread();
                })
                .build_global();
        }
    })
}
