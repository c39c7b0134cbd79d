//! pisess-migrate: v1 → v2 → v3 migration of pi session files, streaming and deterministic.
//!
//! pi migrates a legacy session when it opens it (spec §5.3; `migrateV1ToV2`, `migrateV2ToV3`
//! and `migrateToCurrentVersion` in pi's `session-manager.js`) and rewrites the whole file. This
//! crate produces the bytes of that rewrite without holding the file in memory:
//!
//! - [`Migrator`] migrates one element of the entry list at a time ([`v1_to_v2`] and
//!   [`v2_to_v3`] hold the two steps as pure functions over `serde_json` values);
//! - [`migrate_reader`], [`migrate_seekable`] and [`migrate_file`] migrate a whole file from a
//!   reader to a writer with `pisess_formats::SessionReader`;
//! - [`migrate_values`] migrates an in-memory list (for tests and small inputs).
//!
//! # Invariants
//!
//! - **Same element list as pi's loader.** The entry list is every truthy JSON value of the file
//!   in order, the header at index 0 (non-object values count; blank, unparsable and falsy lines
//!   do not). `firstKeptEntryIndex` indexes that list. The record index that
//!   `SessionReader` reports is exactly this index, with one difference: pisess recovers records
//!   glued on one line, which pi drops, so the indexes of elements after a glued line are
//!   larger than pi's by the number of records recovered (see *Improvements*).
//! - **Same decision as pi.** The version is the header's `version` (absent or `null` ⇒ 1),
//!   compared with JavaScript semantics ([`version`]). v1 → v2 runs when it is < 2, v2 → v3 when
//!   it is < 3. A file whose version is ≥ 3 is the identity: [`migrate_reader`] copies its bytes
//!   through unchanged.
//! - **Same edits as pi, in the same key order.** Assigning an existing key keeps its position,
//!   a new key is appended, `delete` removes the key and keeps the others in order. Every output
//!   line is `JSON.stringify` of the migrated value (`pisess_formats::js`) followed by `\n`.
//!   v1 → v2: each `session` element gets `version = 2`; every other element, in order, gets
//!   `id` then `parentId` (the previous element's new id, `null` first); a `compaction` with a
//!   numeric `firstKeptEntryIndex` gets `firstKeptEntryId` = the id of `entries[index]` (its new
//!   id if that element is not after the compaction, its own `id` field, usually absent, if it
//!   is after), written only if that element exists and is not a `session`; an undefined id
//!   removes the key; `firstKeptEntryIndex` is deleted either way. v2 → v3: `session` elements
//!   get `version = 3`; `message` elements whose `message.role` is `"hookMessage"` get
//!   `"custom"`.
//! - **Deterministic ids.** pi draws random 8-hex ids; pisess derives them with blake3 from the
//!   session id and the element's index ([`ids`]), re-drawing on a collision with an id already
//!   drawn or one that survives into the output. Migrating the same file twice gives the same
//!   bytes, and every id is unique in the session. The output is v3, so migrating it again is
//!   the identity.
//! - **Streaming.** Memory does not grow with record size beyond one record, and for v1 files
//!   grows by about 16 bytes per entry (the drawn ids a later `firstKeptEntryIndex` may name).
//!   A v1 compaction pointing at a *later* element needs that element's own `id`; the single
//!   pass of [`migrate_reader`] assumes it has none (pi's files never have one), checks that
//!   when the element arrives and reports [`NoteKind::Inexact`] otherwise; [`migrate_seekable`]
//!   reads the file twice for v1 ([`Lookahead`]) and is always exact.
//! - **Refusals.** A file that is empty, whose first value is not a session header with a string
//!   `id`, or that is pi's v4 format, is refused with [`MigrateError::Rejected`] and nothing is
//!   written.
//!
//! # Improvements over pi (deliberate)
//!
//! 1. Deterministic, collision-checked ids (above). pi's collision set is never filled, so it
//!    could in theory repeat an id.
//! 2. Values that are not objects (arrays, numbers, strings on a line of their own): pi's
//!    strict-mode code throws on numbers and strings (the session cannot be opened) and gives an
//!    array an `id` that `JSON.stringify` never writes, so the next entry's `parentId` names
//!    nothing. pisess keeps such values in place in the output (re-serialised), leaves them out
//!    of the parent chain (the next entry's parent is the previous object entry) and resolves a
//!    `firstKeptEntryIndex` that names one to no id ([`NoteKind::NonObjectKept`]).
//! 3. Records glued on one line (a lost newline) or after a torn write are recovered by the
//!    reader and migrated like any other element; pi drops the whole line. Such files therefore
//!    have more entries than pi's result, and the indexes after the glued line are shifted (a
//!    `firstKeptEntryIndex` written by pi before the damage still counts pi's way only for
//!    elements before it).
//! 4. A record that is valid JSON but holds a number beyond the range of a double (pi reads it
//!    as `Infinity` and writes `null`) is written back unchanged and left out of the chain
//!    ([`NoteKind::Unparsable`]).
//! 5. A file that starts with a UTF-8 byte order mark: the reader skips the mark, so the file
//!    is migrated (and written without it); pi's loader cannot parse that first line and refuses
//!    the file. A v3 file with a mark is copied through, mark included.
//!
//! pi's loader is the reference, not the oracle's `migrate` command: that command parses with
//! `parseSessionEntries`, which keeps falsy values (and then throws on them in v1) and does not
//! require the header to be the first value.
#![forbid(unsafe_code)]

pub mod ids;
pub mod migrator;
pub mod stream;
pub mod v1_to_v2;
pub mod v2_to_v3;
pub mod version;

use pisess_formats::Problem;
use serde_json::Value;

pub use migrator::{Lookahead, Migrator, Note, NoteKind, Unresolved};
pub use stream::{MigrationOutcome, migrate_file, migrate_reader, migrate_seekable};
pub use version::Plan;

/// Why a migration failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The source could not be read.
    #[error("reading the session failed: {0}")]
    Read(#[source] std::io::Error),
    /// The output could not be written.
    #[error("writing the migrated session failed: {0}")]
    Write(#[source] std::io::Error),
    /// The file is not a session pisess can migrate (nothing was written).
    #[error("cannot migrate: {} (line {})", .0.kind, .0.line)]
    Rejected(Problem),
    /// A v3 file read by a single pass has its header after more than `limit` bytes of other
    /// lines, which would have to be kept to copy the file through.
    #[error(
        "the session header comes after more than {limit} bytes of unparsable lines; migrate from a seekable file"
    )]
    HeaderTooFar {
        /// The limit in bytes.
        limit: u64,
    },
    /// [`Migrator::migrate_record`] was given an index that does not follow the previous one.
    #[error("entry index {index} does not come after index {previous}")]
    IndexOrder {
        /// The index given.
        index: u64,
        /// The previous index.
        previous: u64,
    },
}

/// Migrates an in-memory entry list in place (`values[0]` is the header, as in pi's list) with
/// the streaming [`Migrator`] and an exact [`Lookahead`]. Returns whether pi would rewrite the
/// file (false, and nothing changed, for v3 and later, or when `values[0]` is not an object).
pub fn migrate_values(values: &mut [Value]) -> bool {
    let la = Lookahead::from_values(values);
    let Some((Value::Object(header), rest)) = values.split_first_mut() else {
        return false;
    };
    let mut m = Migrator::with_lookahead(header, la);
    if !m.needs_rewrite() {
        return false;
    }
    m.migrate_header(header);
    for (i, v) in rest.iter_mut().enumerate() {
        // Indexes increase by construction.
        let _ = m.migrate_record(v, i as u64 + 1);
    }
    true
}
