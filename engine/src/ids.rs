//! Key newtypes.
//!
//! Invariants:
//! - entry keys are allocated from one counter in ascending order, so a session's rows, read in
//!   key order, are in file order, and bulk inserts hit redb's ascending-key fast path;
//! - [`EntryKey::NONE`] (`u64::MAX`) is never allocated; it marks "no parent" in fixed-width rows.

use std::fmt;

/// A stored row of a session (one physical line, or one record of a line holding several).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryKey(pub u64);

impl EntryKey {
    /// The "no entry" sentinel used in fixed-width tables.
    pub const NONE: Self = Self(u64::MAX);
}

impl fmt::Display for EntryKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}", self.0)
    }
}

/// An imported session file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SessionKey(pub u64);

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "s{}", self.0)
    }
}

/// The fixed-width tree data of one entry: parent, skip pointer and depth.
///
/// `jump` is the skip pointer of Myers' "jump pointer" scheme: an ancestor chosen so that
/// level-ancestor and LCA queries take O(log depth) steps with one pointer per node. A root has
/// `parent == EntryKey::NONE`, `jump == itself` and `depth == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// The parent, or [`EntryKey::NONE`] for a root.
    pub parent: EntryKey,
    /// The skip pointer (an ancestor, or the entry itself for a root).
    pub jump: EntryKey,
    /// Number of edges to the root.
    pub depth: u32,
}

impl Link {
    /// The parent, `None` for a root.
    pub fn parent(&self) -> Option<EntryKey> {
        (self.parent != EntryKey::NONE).then_some(self.parent)
    }

    /// Whether the entry `key` with this link starts a run: a run is a maximal range of keys
    /// in which every entry's parent is the key just before it, so a walk to the root crosses
    /// a run in one step ([`crate::schema::RUN_STARTS`]). Roots always start one.
    pub fn starts_run(&self, key: EntryKey) -> bool {
        match (self.parent(), key.0.checked_sub(1)) {
            (Some(p), Some(prev)) => p.0 != prev,
            _ => true,
        }
    }
}
