//! Integration tests of the pisess CLI (one binary; modules by topic).
#![allow(clippy::unwrap_used)]

mod common;
mod test_bad;
mod test_check;
mod test_concurrency;
mod test_export_render;
mod test_faults;
mod test_import_crash;
mod test_inspect;
mod test_migrate;
mod test_migrate_stdout;
mod test_output;
mod test_pager;
mod test_process;
mod test_prune;
mod test_query;
mod test_sampled_oracle;
mod test_scan;
mod test_snapshots;
mod test_store;
mod test_tree_layout;
mod test_verify;
mod test_write;
#[path = "../../engine/tests/tool_scan.rs"]
mod tool_scan;
