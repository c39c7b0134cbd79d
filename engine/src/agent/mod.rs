//! The agent layer: pi's context engine over a path of entries (spec §6, §7, §9–§11).
//!
//! Everything but [`writer`] (and the store readers of [`fork`]) is pure: the caller supplies a **path** (entries root→leaf as
//! `serde_json::Value` objects, key order preserved) and gets back JSON values equal to what
//! pi 1.6.0 computes for the same input.
//!
//! - [`path`]: paths from a file's entries as pi builds them, with cycle detection;
//! - [`project`]: context projection (`buildSessionContext`, provenance, system replay,
//!   `convertToLlm`);
//! - [`lean`]: the same projection over a path read one entry at a time from a
//!   [`lean::PathSource`] (a store), with memory bounded by the path's length;
//! - [`lean_preparation`]: compaction and branch-summary preparation over the same
//!   one-entry-at-a-time source;
//! - [`tokens`]: estimates, usage-based context size, `shouldCompact`;
//! - [`compaction`]: cut points, `prepareCompaction`, summariser prompts, stored summary;
//! - [`branch`]: branch-summary collection and preparation;
//! - [`fileops`]: file operations and their lists; [`serialize`]: the summariser's text.
//! - [`report`]: the answers in the oracle's JSON shapes (for `--json` output and tests).
//! - [`writer`]: pi's `SessionManager` appends over a session's file **and** the store (the
//!   one module here that writes; torn-tail repair, rollback on failure);
//! - [`fork`]: `createBranchedSession` (labels, re-chaining, compaction redirects);
//! - [`summary`]: compaction and branch summaries through a caller's summariser or the
//!   extractive default.
//!
//! # Invariants
//! - Every string length is in UTF-16 code units; every sort of paths is UTF-16 order.
//! - Nothing recurses over the tree or a path: walks are loops, so a path of a million entries
//!   is fine. (Recursion happens only inside `JSON.stringify` of one tool call's arguments.)
//! - A path is trusted (root first, no cycle); [`path::path_from_entries`] is the one place
//!   that detects cycles.
//!
//! # Differences from pi (deliberate)
//! - A parent cycle is an error ([`AgentError::Cycle`]); pi loops until V8 runs out of memory.
//! - Inputs on which pi throws a `TypeError` (an entry of type `message` without `message`,
//!   content that is neither string nor array, a `context_edit` without `replacement`, …) give
//!   a best-effort answer here instead of an exception.
//! - Values that only hand-made files hold are simplified: non-string ids/paths never match,
//!   non-string text counts 0 characters instead of making `NaN`.
//! - Lines holding lone UTF-16 surrogates do not parse with serde_json, so
//!   [`path::parse_session_text`] drops them where pi keeps them.
//!
//! # Not done yet
//! - Per-model compaction overrides are the caller's (pass [`tokens::CompactionSettings`]).
//! - The writer's only kill -9 test is through `pisess compact`; it takes no lock on the
//!   session file (like pi: one writer per file), and does not write to v1/v2 files (pi rewrites them first; run
//!   `pisess migrate --in-place`).
//! - pi's `SessionManager.forkFrom` (`--fork`: every entry copied under a new header) and
//!   `/fork` on a root user message (an empty session with `parentSession`) are not exposed.
//! - Summaries record no `usage` (a summariser command reports none).
#![allow(clippy::cast_precision_loss)]

pub mod branch;
pub mod compaction;
pub mod fileops;
pub mod fork;
pub mod js;
pub mod lean;
pub mod lean_preparation;
pub mod path;
pub mod project;
pub mod report;
pub mod serialize;
pub mod summary;
pub mod timsort;
pub mod tokens;
pub mod writer;

pub use branch::{
    BranchCollection, BranchPreparation, collect_entries_for_branch_summary, prepare_branch_entries,
};
pub use compaction::{
    CompactionPreparation, CutPoint, NoCompaction, find_cut_point, find_projected_cut_point,
    prepare_compaction,
};
pub use fileops::{FileOps, compute_file_lists, format_file_operations};
pub use path::{EntryIndex, parse_session_text, path_from_entries};
pub use project::{
    Msg, ProjectedEntry, Projection, convert_to_llm, current_system_message, project,
};
pub use serialize::serialize_conversation;
pub use tokens::{
    CompactionSettings, ContextEstimate, estimate_context_tokens,
    estimate_projected_context_tokens, estimate_tokens, should_compact,
};

/// Errors of the agent layer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AgentError {
    /// Following `parentId` links came back to an entry already on the walk.
    #[error("parent cycle through {} entries: {}", ids.len(), ids.join(" -> "))]
    Cycle {
        /// The ids of the loop, leaf side first.
        ids: Vec<String>,
    },
}
