//! Integration tests of pisess-engine (one binary; modules by topic).
#![allow(clippy::unwrap_used)]
#[path = "../../formats/tests/common.rs"]
mod common;
mod naive;
mod test_agent;
mod test_corpus;
mod test_files;
mod test_graph;
mod test_incremental;
mod test_migrate_import;
mod test_outline;
mod test_writer;
mod tool_scan;
