//! A guard around code that reads the store, for redb's panics on a damaged store file.
//!
//! redb 4 meets some damaged pages with `unreachable!()` (a B-tree page whose type byte is
//! wrong, found while opening the store or walking a table) instead of returning `Corrupted`:
//! a flipped byte in the store ended every command, `verify` included, with a panic and a
//! backtrace. [`redb_panics_as_damage`] runs code and returns such a panic as the store's
//! damage ([`StoreError`] `Corrupted`, which the command line reports with its rebuild hint).
//!
//! Invariants:
//! - only a panic raised in redb's own source (its location is a file of a `redb-*` crate
//!   folder) is turned into an error, and only while a guard runs; it is then not printed;
//! - any other panic is printed by the hook that was in place before and continues to unwind
//!   out of the guard unchanged: a bug in pisess is still a panic (exit status 101);
//! - the process's panic hook is wrapped once, on the first guarded call.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use crate::error::StoreError;

/// How many guards are running, on any thread (a redb panic on a pool thread unwinds into the
/// guard of the thread that started the work).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// The first redb panic seen while a guard ran: its message and where in redb it was raised.
static REDB_PANIC: Mutex<Option<String>> = Mutex::new(None);

static WRAP_HOOK: Once = Once::new();

/// Whether a panic location is in redb's source: a `src` folder inside a folder named
/// `redb-<version>` (the registry's, `…/redb-4.6.0/src/…`) or `redb` (a vendored copy).
fn in_redb(file: &str) -> bool {
    let parts: Vec<&str> = file.split(['/', '\\']).collect();
    parts.windows(2).any(|w| {
        let crate_dir = w[0] == "redb"
            || w[0]
                .strip_prefix("redb-")
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()));
        crate_dir && w[1] == "src"
    })
}

/// The text of a panic's payload.
fn message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

fn wrap_hook() {
    WRAP_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let redb = info.location().filter(|l| in_redb(l.file()));
            match redb {
                Some(at) if ACTIVE.load(Ordering::SeqCst) > 0 => {
                    let mut seen = REDB_PANIC.lock().unwrap_or_else(|e| e.into_inner());
                    if seen.is_none() {
                        let file = at.file().rsplit_once("/src/").map_or(at.file(), |(_, f)| f);
                        *seen = Some(format!(
                            "{} (redb's {file}:{})",
                            message(info.payload()),
                            at.line()
                        ));
                    }
                }
                _ => previous(info),
            }
        }));
    });
}

/// Runs `f`; a panic that redb raises inside it (on a damaged page) is returned as the
/// store's damage, any other panic goes on unwinding.
pub fn redb_panics_as_damage<T>(f: impl FnOnce() -> T) -> Result<T, StoreError> {
    wrap_hook();
    if ACTIVE.fetch_add(1, Ordering::SeqCst) == 0 {
        // A record left by a redb panic that some other catcher swallowed must not be taken
        // for this guard's.
        REDB_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
    let result = catch_unwind(AssertUnwindSafe(f));
    ACTIVE.fetch_sub(1, Ordering::SeqCst);
    match result {
        Ok(v) => Ok(v),
        Err(payload) => {
            let seen = REDB_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
            match seen {
                Some(why) => Err(StoreError::Redb(redb::Error::Corrupted(format!(
                    "redb stopped on the store file (a damaged page, or a fault in redb): {why}"
                )))),
                None => resume_unwind(payload),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_redb_locations_count() {
        assert!(in_redb(
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/redb-4.6.0/src/tree_store/btree.rs"
        ));
        assert!(in_redb("redb-4.6.0/src/db.rs"));
        assert!(in_redb("vendor/redb/src/db.rs"));
        assert!(!in_redb("engine/src/store.rs"));
        assert!(!in_redb("/work/main/engine/src/redb.rs"));
        assert!(!in_redb("/registry/redb-derive-1.0/src/lib.rs"));
    }

    #[test]
    fn a_panic_outside_redb_goes_on_unwinding() {
        assert_eq!(redb_panics_as_damage(|| 7).ok(), Some(7));
        let outer = catch_unwind(|| redb_panics_as_damage(|| panic!("a bug of ours")));
        let payload = outer.err().unwrap();
        assert_eq!(message(payload.as_ref()), "a bug of ours");
    }
}
