//! Every redb table of the store, and the schema version.
//!
//! Invariants:
//! - table names and record type names carry a version (`entries.v4`, `pisess::EntryRecordV3`);
//!   only `meta` is unversioned, because it holds the schema version itself;
//! - every index row is written in the same write transaction as the rows it indexes, so a
//!   committed store never has an index that disagrees with its data;
//! - tree data (`parents.v1`) is fixed width, so walks never decode a record;
//! - `run_starts.v1` holds exactly the nodes whose link [`Link::starts_run`], with their
//!   parent (derived from `parents.v1`, written and removed with it);
//! - `settings.v1` holds exactly the `thinking_level_change` and `model_change` entries
//!   (derived from each record's type, written and removed with it);
//! - each `sources.v2` row's size, mtime and gone flag equal its session record's (written in
//!   the same transaction as the record);
//! - `outline.v2` holds, for every tree node, what its record implies
//!   ([`crate::outline`]: derived from each record's line, written and removed with it).
//!
//! | table | key → value |
//! |---|---|
//! | `meta` | `&str → u64`: `schema_version`, `next_entry`, `next_session` |
//! | `sources.v2` | canonical file path → ([`SourceStat`]) session key, and the file's size, mtime and gone flag as in its session record |
//! | `sessions.v1` | session key → [`SessionRecord`] |
//! | `session_ids.v1` | (session id, session key) → () |
//! | `entries.v4` | first entry key → a block of consecutive rows of one session ([`crate::row_block`]: LZ4 over up to 64 KiB of [`EntryRecord`](crate::record::EntryRecord)s, each with the blake3 of its line, checked by `verify`) |
//! | `session_runs.v1` | (session key, sequence of the run's first row) → (first entry key, rows): the session's rows in file order, as runs of consecutive entry keys (one per import of the file) |
//! | `entry_ids.v1` | (session key, entry id) → entry key (a later duplicate id wins, as in pi) |
//! | `parents.v1` | entry key → [`Link`] (parent, skip pointer, depth; 20 bytes) |
//! | `children.v2` | (parent key, child key) → () for each child that starts a run (the child at key parent + 1 is implied by `parents.v1`) |
//! | `labels.v1` | (session key, target id) → label (resolved as pi: file order, last wins) |
//! | `run_starts.v1` | entry key → its parent key, for every entry whose parent is not the key just before it |
//! | `file_hits.v1` | (path as written, session key, chunk start key) → a block of that path's hits in that session and chunk ([`crate::files::encode_block`]) |
//! | `file_resolved.v1` | (resolved path, session key, path as written) → (), where the two paths differ |
//! | `file_session_paths.v1` | (session key, path as written) → () |
//! | `tool_results.v3` | (session key, tool call id) → last result's status, the call's file operations and their paths |
//! | `settings.v1` | (session key, entry key) → [`SETTING_THINKING`] or [`SETTING_MODEL`] |
//! | `outline.v2` | (session key, first node key, part) → a block of 1,024 nodes' listing facts ([`crate::outline`]) |
//!
//! Schema 2 added `row_hashes`, `file_paths`, `tool_results` and the filled `file_ops.v2`;
//! schema 3 stores long lines zstd-compressed (`entries.v2`, `EntryRecordV2`); schema 4 puts
//! every field of a file hit in its `file_paths.v2` value (a query is one range scan), lists a
//! call's operations in `tool_results.v2` (a later result rewrites their status), and adds
//! `run_starts.v1` (the active path is a few key ranges); schema 5 adds `settings.v1` (the
//! context at a leaf finds the thinking level in force without reading the path up to it);
//! schema 6 adds `outline.v1` (`log` and `tree` read each node's kind, model, summary and
//! token estimate from it instead of decoding every line); schema 7 replaces `file_ops.v3` and
//! `file_paths.v2` (one row per hit and path, the resolved path stored with the hit) by dense
//! blocks of hits per (path, session, chunk) in `file_hits.v1`, with `file_resolved.v1` and
//! `file_session_paths.v1` beside them, and `tool_results.v3` names each operation's path;
//! schema 8 makes the outline's hot frame an LZ4 block (`outline.v2`: `log` and `tree` decode
//! it about 2.5 times faster). (Both were built apart as "7"; a store from either is refused.)
//! Schema 9 makes an import write fewer rows: a row's hash moves into its record
//! (`entries.v3`, `EntryRecordV3`; `row_hashes.v1` is gone) and `session_entries.v1` (one row
//! per line) becomes `session_runs.v1` (one row per import of a file). Schema 10 copies each
//! session's file size, mtime and gone flag into its `sources.v2` row (was `sources.v1`: the
//! session key only), so a re-import of an unchanged folder reads a few pages of one table
//! instead of one session record per file. Schema 11 stores rows in blocks (`entries.v4`, one
//! LZ4-compressed value per 64 KiB of rows, replacing one zstd-compressed value per row in
//! `entries.v3`): an import inserts and compresses a block at a time; `children.v2` keeps only
//! the children that start a run (a chain's child is its parent's key + 1, implied by
//! `parents.v1`), one row per branch instead of one per entry. Schema 12 indexes the file
//! operations of the calls a tool made itself (a `toolResult`'s `nestedCalls`, spec §9):
//! the tables are as in 11, but a store of 11 lacks those hits, so it is refused (delete it
//! and import again) rather than answer without them. Schema 13 takes a session's first-message
//! preview from the first user message that has text, as pi's listing does (12 took the first
//! user message, so an image-only first message gave an empty preview); tables as in 12.
//! Schema 14 resolves a path written `@src/a.rs`, `~/x` or with Unicode spaces as pi's tools do
//! ([`crate::files::resolve`]; 13 joined them to the cwd as written). Schema 15 also reads a
//! `file://` URL (as the path, or as the session's cwd) as the path it names, as pi's tools do
//! (14 joined it to the cwd as written). Tables as in 13: the first writable open of a store of
//! 13 or 14 rewrites the `file_resolved.v1` rows that differ in place ([`UPGRADABLE_FROM`]).

use redb::{TableDefinition, TypeName, Value};

use crate::ids::{EntryKey, Link};
use crate::record::{Rkyv, SessionRecord};

/// The schema version this build reads and writes.
pub const SCHEMA_VERSION: u64 = 15;

/// The older schemas a store is upgraded from in place (on its first writable open; a
/// read-only open reopens it writable for that), rather than refused.
pub const UPGRADABLE_FROM: std::ops::RangeInclusive<u64> = 13..=14;

/// `meta` key of the schema version.
pub const META_SCHEMA: &str = "schema_version";
/// `meta` key of the next entry key to allocate.
pub const META_NEXT_ENTRY: &str = "next_entry";
/// `meta` key of the next session key to allocate.
pub const META_NEXT_SESSION: &str = "next_session";

/// Name of the sessions table (for error messages).
pub const SESSIONS_NAME: &str = "sessions.v1";
/// Name of the entries table (for error messages).
pub const ENTRIES_NAME: &str = "entries.v4";

/// Store-wide settings and counters.
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// Name of [`SOURCES`] (also recorded in its copy beside the store, [`crate::source_copy`]).
pub const SOURCES_NAME: &str = "sources.v2";
/// Imported file path → session.
pub const SOURCES: TableDefinition<&str, SourceStat> = TableDefinition::new(SOURCES_NAME);

/// A `sources.v2` value: (session key, file size, mtime in ns, gone), the last three equal to
/// the session record's `file_size`, `mtime_ns` and `gone`, so that deciding that a file is
/// unchanged reads this small fixed-width row and never a session record.
pub type SourceStat = (u64, u64, i64, bool);

/// The `sources.v2` value of session `s` with record `rec` (the one place that says which
/// record fields the row copies).
pub fn source_stat(s: u64, rec: &SessionRecord) -> SourceStat {
    (s, rec.file_size, rec.mtime_ns, rec.gone)
}
/// Session key → session record.
pub const SESSIONS: TableDefinition<u64, Rkyv<SessionRecord>> = TableDefinition::new(SESSIONS_NAME);
/// (session id, session key) → ().
pub const SESSION_IDS: TableDefinition<(&str, u64), ()> = TableDefinition::new("session_ids.v1");
/// First entry key of a block → a block of a session's consecutive rows
/// ([`crate::row_block`]).
pub const ENTRIES: TableDefinition<u64, &[u8]> = TableDefinition::new(ENTRIES_NAME);
/// (session, sequence of a run's first row) → (the run's first entry key, its rows): the rows
/// of a session in file order are the runs in key order, each the entry keys `first..first +
/// rows`. One import of a file gives its rows consecutive keys, so it writes one run (or
/// extends the last one: runs are maximal, the same whether the file was read at once or in
/// appends).
pub const SESSION_RUNS: TableDefinition<(u64, u64), (u64, u64)> =
    TableDefinition::new("session_runs.v1");
/// (session, entry id) → entry key.
pub const ENTRY_IDS: TableDefinition<(u64, &str), u64> = TableDefinition::new("entry_ids.v1");
/// Entry key → parent, skip pointer, depth.
pub const PARENTS: TableDefinition<u64, Link> = TableDefinition::new("parents.v1");
/// (parent, child) → (), for every child that starts a run ([`Link::starts_run`]): the child
/// that continues its parent's run (key parent + 1) is implied by `parents.v1` and not stored,
/// so a chain costs no rows here ([`crate::graph::Snapshot::children`] merges the two).
pub const CHILDREN: TableDefinition<(u64, u64), ()> = TableDefinition::new("children.v2");
/// Entry key → its parent key ([`EntryKey::NONE`] for a root), for every tree node that starts
/// a run ([`Link::starts_run`]): the nodes whose parent is not the key just before them (roots,
/// branch points, the first node of an append). A node's run starts at the greatest key here at
/// or below it, and every key from there to the node is its ancestor or itself, so a walk to
/// the root takes one lookup per run in this small table and never reads `parents`.
pub const RUN_STARTS: TableDefinition<u64, u64> = TableDefinition::new("run_starts.v1");
/// (session, entry key) → which setting the entry changes: the `thinking_level_change` and
/// `model_change` entries of every session, so that the one in force at a leaf is found by
/// checking these few entries against the path instead of reading every entry above it.
pub const SETTINGS: TableDefinition<(u64, u64), u8> = TableDefinition::new("settings.v1");
/// [`SETTINGS`] value of a `thinking_level_change` entry.
pub const SETTING_THINKING: u8 = 1;
/// [`SETTINGS`] value of a `model_change` entry.
pub const SETTING_MODEL: u8 = 2;

/// The [`SETTINGS`] value of an entry of type `type_name`, if it has one.
pub fn setting_of(type_name: Option<&str>) -> Option<u8> {
    match type_name {
        Some("thinking_level_change") => Some(SETTING_THINKING),
        Some("model_change") => Some(SETTING_MODEL),
        _ => None,
    }
}

/// (session, target id) → label.
pub const LABELS: TableDefinition<(u64, &str), &str> = TableDefinition::new("labels.v1");

impl Value for Link {
    type SelfType<'a> = Self;
    type AsBytes<'a> = [u8; 20];

    fn fixed_width() -> Option<usize> {
        Some(20)
    }

    fn from_bytes<'a>(data: &'a [u8]) -> Self
    where
        Self: 'a,
    {
        let mut p = [0u8; 8];
        let mut j = [0u8; 8];
        let mut d = [0u8; 4];
        // redb hands back exactly `fixed_width()` bytes; shorter input reads as zeros.
        for (dst, src) in p.iter_mut().zip(data.iter()) {
            *dst = *src;
        }
        for (dst, src) in j.iter_mut().zip(data.iter().skip(8)) {
            *dst = *src;
        }
        for (dst, src) in d.iter_mut().zip(data.iter().skip(16)) {
            *dst = *src;
        }
        Self {
            parent: EntryKey(u64::from_le_bytes(p)),
            jump: EntryKey(u64::from_le_bytes(j)),
            depth: u32::from_le_bytes(d),
        }
    }

    fn as_bytes<'a, 'b: 'a>(value: &'a Self) -> [u8; 20]
    where
        Self: 'b,
    {
        let mut out = [0u8; 20];
        out[..8].copy_from_slice(&value.parent.0.to_le_bytes());
        out[8..16].copy_from_slice(&value.jump.0.to_le_bytes());
        out[16..].copy_from_slice(&value.depth.to_le_bytes());
        out
    }

    fn type_name() -> TypeName {
        TypeName::new("pisess::LinkV1")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_round_trips() {
        let l = Link {
            parent: EntryKey(1 << 40),
            jump: EntryKey(5),
            depth: 1_000_000,
        };
        let b = <Link as Value>::as_bytes(&l);
        assert_eq!(<Link as Value>::from_bytes(&b), l);
    }
}
