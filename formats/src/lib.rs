//! pisess-formats: pi session files as they are on disk.
//!
//! - [`reader`] streams a file in chunks of whole lines (bounded memory, any file size);
//! - [`line`] turns a line into the JSON records it holds, recovering glued records;
//! - [`session`] finds the header, numbers entries as pi does and checks the tree;
//! - [`entry`] is the typed, borrowed view of entries and messages, and writes them back in
//!   pi's key order;
//! - [`js`] writes JSON exactly as JavaScript's `JSON.stringify` does;
//! - [`problem`] describes what is wrong with a file, with its location;
//! - [`open`] opens a session file for reading, regular files only, without blocking;
//! - [`layout`] and [`session_folder`] say where pi keeps its session files.
//!
//! This crate knows nothing of storage; it is the ground truth for what a line means.
#![forbid(unsafe_code)]

pub mod duplicate_keys;
pub mod entry;
pub mod js;
pub mod layout;
pub mod line;
pub mod open;
pub mod problem;
pub mod reader;
pub mod session;
pub mod session_folder;
pub mod value;

pub use entry::{Block, Content, Entry, EntryType, Message, Role, Usage};
pub use problem::{Problem, ProblemKind, Severity};
pub use session::{Event, Header, ReadError, Record, SessionReader, Summary, TreeCheck};
pub use value::{Field, RawStr, Str};

/// The session format version pisess reads and writes natively.
pub const CURRENT_VERSION: u32 = 3;
