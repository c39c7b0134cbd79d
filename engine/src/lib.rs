//! pisess-engine: the store of pi sessions.
//!
//! - [`store`] opens the redb store (location, schema version, locking);
//! - [`schema`] lists every table; [`record`] the rkyv records stored in them;
//! - [`import`] brings files and folders in, incrementally and in parallel;
//! - [`graph`] answers tree queries (ancestors, LCA, children, labels) without reading files;
//! - [`describe`] says what an entry is in one line (kind, model, summary, tokens), and
//!   [`outline`] stores that for every tree node at import, so listings read no line;
//! - [`export`] writes sessions back out, byte for byte;
//! - [`prune`] plans and writes a session with only some of its branches;
//! - [`files`] indexes tool calls that read or change files;
//! - [`verify`] checks the store's consistency; [`repair`] rebuilds its tree indexes;
//! - [`source_copy`] keeps a copy of the catalogue of imported files beside the store, so that
//!   re-importing unchanged files does not open it.
//!
//! Nothing here prints or draws: progress is reported through callbacks.
#![forbid(unsafe_code)]

pub mod agent;
pub mod describe;
pub mod error;
pub mod export;
pub mod files;
pub mod gate;
pub mod graph;
pub mod holder;
pub mod ids;
pub mod import;
pub mod outline;
pub mod panic_guard;
pub mod prune;
pub mod record;
pub mod repair;
pub mod row_block;
pub mod schema;
pub mod source_copy;
pub mod store;
pub mod verify;

pub use error::StoreError;
pub use export::{BranchExport, ExportError};
pub use files::{FileFilter, FileHit, FileHitRef, FileHits, FileOp, FileQuery, FileQueryError};
pub use graph::{Lookup, Snapshot};
pub use ids::{EntryKey, Link, SessionKey};
pub use import::{FileReport, ImportEvent, ImportOptions, ImportReport, Outcome};
pub use prune::{DroppedBranch, PruneError, PrunePlan, RowFate};
pub use record::{EntryRecord, RowKind, SessionRecord};
pub use store::{ReadCache, Store, default_store_path, no_store_at, refuse_non_store, trash_dir};
pub use verify::{Finding, VerifyReport};
