//! Benchmarks and measurement tools for pisess.
//!
//! - [`generate`] writes realistic v3 pi sessions of any size, deterministically and fast
//!   (bin `pisess-bench-gen`);
//! - [`measure`] holds the read paths the parse benchmarks compare: pisess's `SessionReader`
//!   and parallel chunk reader against a `serde_json::Value`-per-line baseline (criterion bench
//!   `parse`, quick runner `pisess-bench-parse`, script `benches/parse.sh`);
//! - bin `pisess-bench-read` reads one file with `SessionReader`, for peak-memory measurements.
//!
//! Shared machines are noisy: every figure these tools report is a ratio against a baseline
//! measured in the same run, and no test asserts on timing.

// `gen` is a reserved word in edition 2024; the file keeps the short name.
#[path = "gen.rs"]
pub mod generate;
pub mod measure;

pub use generate::{
    GenOptions, GenStats, generate, generate_chain, generate_file, generate_file_with,
    generate_folder, generate_with,
};
