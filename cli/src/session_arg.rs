//! SESSION and ENTRY arguments, resolved against the store, and one-line descriptions of
//! entries shared by the inspection commands (`log`, `tree`, `show`, `diff`, `context`).
//!
//! SESSION is a file path (imported, or refreshed incrementally, first), a session id or unique
//! id prefix (a bare word that is both a file of the current folder and an id or prefix is the
//! id, as in pi: only a word with a `/` or ending in `.jsonl` is always a path), or `@latest` (the file `pi -c` continues: the latest valid session file by mtime
//! in pi's session folder for the current folder; when there is none, the imported session
//! whose header `cwd` is the current folder with the latest message).
//!
//! ENTRY is an id or unique id prefix, `@leaf`, `@root` (the root of the active path),
//! `label:NAME`, each optionally followed by `~N` (the N-th ancestor; chained as in git,
//! `@leaf~1~1` is `@leaf~2`, a bare `~` is `~1`).
//!
//! Invariants: nothing here recurses over the tree; every lookup that can match several things
//! fails with the candidates listed instead of picking one — also a whole session id that
//! several files hold (copies of one session), unless all but one of them are gone.

use std::path::Path;

use anyhow::anyhow;
use pisess_engine::agent::lean::{Kind, PathSource};
use pisess_engine::{
    EntryKey, Lookup, ReadCache, SessionKey, SessionRecord, Snapshot, Store, StoreError,
};
use serde_json::Value;

use crate::command_error::{CommandError, Outcome};

/// An open store, a snapshot of it and the session a command works on.
pub struct Session {
    /// The snapshot every query of the command reads.
    pub snap: Snapshot,
    /// The session.
    pub key: SessionKey,
    /// Its catalogue record.
    pub record: SessionRecord,
    /// Lines of the entries [`Session::value_or_unreadable`] stood in for.
    unreadable: std::sync::Mutex<Vec<u64>>,
    _store: Store,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({}, {})", self.key, self.record.session_id)
    }
}

/// How long [`open_store`] waits for a busy store (`--wait SECONDS`; 0 = fail at once).
static WAIT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();

/// Sets how long to wait for a store held by another process (once, from `--wait`).
pub fn set_store_wait(d: std::time::Duration) {
    let _ = WAIT.set(d);
}

/// Opens the default store (`$PISESS_STORE`, else the XDG data folder), explaining a busy one.
///
/// A store held by another process (an import, a compaction) is retried with backoff (50 ms
/// doubling to 1 s) for up to `--wait` seconds, saying once on stderr what it waits for; after
/// that, or without `--wait`, the error names the holder. A command that writes also waits,
/// quietly, up to [`WRITER_GRACE`] for readers to let go.
pub fn open_store() -> Result<Store, CommandError> {
    open_store_as(
        false,
        WRITER_GRACE,
        std::time::Duration::ZERO,
        ReadCache::Keep,
    )
}

/// How long `compact` and `navigate --summarize` wait for the store, at least, once their
/// summarizer has answered: the summary cost a model's time and money, and giving up on a
/// busy store after the usual grace would throw it away.
const AFTER_SUMMARY: std::time::Duration = std::time::Duration::from_secs(600);

/// [`open_store`] for writing a summary already made: waits up to [`AFTER_SUMMARY`] (or
/// `--wait`, when longer) for a store others hold, saying so after the usual grace.
pub fn open_store_after_summary() -> Result<Store, CommandError> {
    open_store_as(false, WRITER_GRACE, AFTER_SUMMARY, ReadCache::Keep)
}

/// [`open_store`] for a command that only reads: redb's read-only mode (a shared lock, nothing
/// written, no fsync), so such commands run side by side. A store that needs a repair is opened
/// for writing instead.
pub fn open_store_read() -> Result<Store, CommandError> {
    open_store_read_with(ReadCache::Keep)
}

/// [`open_store_read`] with `cache` for redb's page cache ([`ReadCache`]).
pub fn open_store_read_with(cache: ReadCache) -> Result<Store, CommandError> {
    open_store_as(
        true,
        std::time::Duration::ZERO,
        std::time::Duration::ZERO,
        cache,
    )
}

/// [`open_store_read`] for a command that answers from the whole store (`ls`, `files`, `grep`,
/// `stats`): a store that does not exist reads as empty, nothing is created, and a note on
/// stderr says where it was looked for (a mistyped `PISESS_STORE`).
pub fn open_store_to_query() -> Result<Store, CommandError> {
    let store = open_store_read()?;
    if store.is_absent() {
        eprintln!(
            "note: there is no store at {} yet; `pisess import` creates it from pi's session \
             folder",
            crate::ui::safe(&store.path().to_string_lossy())
        );
    }
    Ok(store)
}

/// [`open_store_read`] for a command that means to write when it has to (`import`: files that
/// did not change need nothing more): it waits, quietly, the writer's grace as [`open_store`]
/// does, so that two imports started together do not fail for each other's first moments.
pub fn open_store_read_to_write() -> Result<Store, CommandError> {
    open_store_as(
        true,
        WRITER_GRACE,
        std::time::Duration::ZERO,
        ReadCache::Keep,
    )
}

/// How long a command that writes keeps trying, without a word, to open a store that others
/// hold: commands that only read hold it briefly (a shared lock) and often, so a writer would
/// otherwise fail whenever it starts beside one.
const WRITER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Opens the store, waiting for one that others hold: up to `--wait`, the writer's quiet
/// grace, or `floor`, whichever is longest.
///
/// The store's gate ([`pisess_engine::gate`]) keeps readers from starving a writer: a writer
/// takes it first and holds it across its retries until it has the store; a reader takes it
/// only while it opens the store, and while a writer holds it waits, quietly, up to the
/// writer's grace (or `--wait`), for the writer to get the store or give up.
fn open_store_as(
    read_only: bool,
    quiet: std::time::Duration,
    floor: std::time::Duration,
    cache: ReadCache,
) -> Result<Store, CommandError> {
    use pisess_engine::gate::Gate;
    use std::time::{Duration, Instant};
    let wait = WAIT.get().copied().unwrap_or_default();
    let limit = wait.max(quiet).max(floor);
    // A reader kept out by a waiting writer waits the writer's grace, or `--wait` when given.
    let gate_limit = if wait.is_zero() {
        limit.max(WRITER_GRACE)
    } else {
        limit
    };
    // When to say that it waits: at once with --wait (or after the writer's grace), never
    // when the wait is only that grace.
    let announce_at = if !wait.is_zero() {
        Some(quiet.min(wait))
    } else if floor > quiet {
        Some(quiet)
    } else {
        None
    };
    let max_pause = Duration::from_millis(if read_only { 1000 } else { 100 });
    let mut pause = Duration::from_millis(if read_only { 50 } else { 5 });
    let path = pisess_engine::default_store_path().map_err(store_error)?;
    // No store at all there (a folder, a session file): said before the gate is made beside it.
    pisess_engine::refuse_non_store(&path).map_err(store_error)?;
    let start = Instant::now();
    let mut told = false;
    // The writer's gate, held from when it is taken until the store is open.
    let mut gate: Option<Gate> = None;
    loop {
        let opened = if read_only && pisess_engine::no_store_at(&path) {
            // Read as empty, and nothing created: not even the gate.
            Store::open_read_only_with(&path, cache)
        } else if read_only {
            match Gate::try_reader(&path) {
                // Let go as soon as the store is open (or the open failed).
                Ok(_gate) => Store::open_read_only_with(&path, cache),
                Err(taken) => Err(StoreError::WriterWaiting {
                    path: path.clone(),
                    holder: taken.holder.unwrap_or_else(|| "another process".into()),
                }),
            }
        } else {
            // A writer takes the gate before it tries the store, and keeps it until the store
            // is open; while another process holds it (a writer waiting for the store, or a
            // reader opening it), it waits as for the store itself.
            let taken = match gate {
                Some(_) => None,
                None => match Gate::try_writer(&path) {
                    Ok(g) => {
                        gate = Some(g);
                        None
                    }
                    Err(taken) => Some(taken),
                },
            };
            match taken {
                None => Store::open(&path),
                Some(taken) => {
                    let holder = taken.holder.unwrap_or_else(|| "another process".into());
                    if taken.by_writer {
                        Err(StoreError::WriterWaiting {
                            path: path.clone(),
                            holder,
                        })
                    } else {
                        // A reader, for the moment it takes to open the store.
                        Err(StoreError::Busy {
                            path: path.clone(),
                            holder,
                        })
                    }
                }
            }
        };
        let limit = match &opened {
            Err(StoreError::WriterWaiting { .. }) => gate_limit,
            _ => limit,
        };
        match opened {
            Err(StoreError::Busy { holder, .. } | StoreError::WriterWaiting { holder, .. })
                if start.elapsed() < limit =>
            {
                if !told && announce_at.is_some_and(|at| start.elapsed() >= at) {
                    eprintln!(
                        "pisess: the store is busy: {}; waiting up to {} s",
                        crate::ui::safe(&holder),
                        limit.as_secs()
                    );
                    told = true;
                }
                std::thread::sleep(pause.min(limit.saturating_sub(start.elapsed())));
                pause = (pause * 2).min(max_pause);
            }
            Ok(store) => return Ok(store),
            Err(e) => return Err(store_error(e)),
        }
    }
}

fn store_error(e: StoreError) -> CommandError {
    match e {
        StoreError::WriterWaiting { .. } => CommandError::with_hint(
            e,
            "a command that writes waits for the store, and the commands that start after it \
             wait their turn; retry with `pisess --wait SECONDS ...`, or point PISESS_STORE at \
             another store",
        ),
        StoreError::Busy { .. } => CommandError::with_hint(
            e,
            "another process has the store open (a writer needs it alone, and readers share \
             it only with readers); retry with `pisess --wait SECONDS ...`, or point \
             PISESS_STORE at another store",
        ),
        StoreError::NoLocation => CommandError::with_hint(e, "set PISESS_STORE=/path/store.redb"),
        StoreError::NotAFile { .. } => CommandError::with_hint(
            e,
            "nothing was written to it; point PISESS_STORE at a store file (a new path makes \
             a new store), or unset it for the default one",
        ),
        other => other.into(),
    }
}

/// Resolves a SESSION argument, importing a file path first (and refreshing the file of a
/// session named by id or `@latest`: see [`resolve_fresh`]).
pub fn open_session(arg: &str) -> Result<Session, CommandError> {
    let (store, key) = resolve_fresh(open_store()?, arg)?;
    session_in(store, key)
}

/// [`open_session`] for a command that only reads: the store is opened read-only, and reopened
/// for writing only when SESSION is a file, or names a session whose file, that must be
/// imported or refreshed first.
pub fn open_session_read(arg: &str) -> Result<Session, CommandError> {
    open_session_read_with(arg, ReadCache::Keep)
}

/// [`open_session_read`] with `cache` for redb's page cache when the store is opened
/// read-only ([`ReadCache`]); a store reopened to import a changed file, or reopened
/// read-only after that failed, keeps its pages as usual.
pub fn open_session_read_with(arg: &str, cache: ReadCache) -> Result<Session, CommandError> {
    let store = writable_if_needed(open_store_read_with(cache)?, &[arg])?;
    let (store, key) = resolve_fresh(store, arg)?;
    session_in(store, key)
}

/// Resolves SESSION and brings the session up to date with its file, however it was named: a
/// session id, a prefix or `@latest` names a file as surely as a path does, and pi may have
/// appended to it since the last import. The file is imported incrementally (a `stat` when it
/// is unchanged); a read-only store is reopened for writing only when it changed. A session
/// whose file is gone, or can no longer be read, is answered from the store with a warning
/// naming the file (the commands that write refuse it when they open it).
fn resolve_fresh(store: Store, arg: &str) -> Result<(Store, SessionKey), CommandError> {
    let key = resolve_session(&store, arg)?;
    if arg != "@latest" && names_a_file(&store, Path::new(arg))? {
        // Imported or refreshed by `resolve_session` itself.
        return Ok((store, key));
    }
    let Some(record) = store.snapshot()?.session(key)? else {
        return Ok((store, key));
    };
    let file = std::path::PathBuf::from(&record.path);
    // (A file marked gone by a folder import and back since is imported again below.)
    if !file.is_file() {
        let why = match std::fs::metadata(&file) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => "is gone".to_string(),
            Err(e) => format!("cannot be read ({e})"),
            Ok(md) => format!("is {}", pisess_formats::open::not_regular(md.file_type())),
        };
        eprintln!(
            "warning: {}, the session's file, {why}; answering from the copy in the store",
            crate::ui::safe(&record.path),
        );
        return Ok((store, key));
    }
    let (store, report) = match store.import_file(&file) {
        Err(StoreError::ReadOnly { .. }) => {
            drop(store);
            let store =
                match open_store_writable_or_read(&record.path, "changed since it was imported")? {
                    Ok(store) => store,
                    // Only readable: answer from the stored copy (warned).
                    Err(store) => return Ok((store, key)),
                };
            let report = store.import_file(&file).map_err(store_error)?;
            (store, report)
        }
        Err(e) => return Err(store_error(e)),
        Ok(report) => (store, report),
    };
    if let Some(err) = &report.error {
        eprintln!(
            "warning: {} changed since it was imported and cannot be read again ({}); using \
             the copy in the store",
            crate::ui::safe(&record.path),
            crate::ui::safe(err)
        );
        return Ok((store, key));
    }
    if report.outcome == pisess_engine::Outcome::Unchanged {
        return Ok((store, key));
    }
    // A rewritten file may hold another session now: resolve the argument again.
    let key = resolve_session(&store, arg)?;
    Ok((store, key))
}

/// `store`, reopened for writing when one of the SESSION arguments is a file the store does not
/// hold as it is now (an import would write). Waits as `--wait` says.
fn writable_if_needed(store: Store, args: &[&str]) -> Result<Store, CommandError> {
    if store.is_writable() {
        return Ok(store);
    }
    for arg in args {
        let latest = (*arg == "@latest").then(pi_latest_file).flatten();
        let path = Path::new(latest.as_deref().unwrap_or(arg));
        if names_a_file(&store, path)? {
            match store.import_file(path) {
                Err(StoreError::ReadOnly { .. }) => {
                    drop(store);
                    // A store that may only be read answers from its copy (warned); a file it
                    // has never seen is then not found in it.
                    let file = path.to_string_lossy();
                    let what = "is new or changed since it was imported";
                    return Ok(
                        open_store_writable_or_read(&file, what)?.unwrap_or_else(|store| store)
                    );
                }
                Err(e) => return Err(store_error(e)),
                Ok(_) => {}
            }
        }
    }
    Ok(store)
}

/// The store reopened for writing to refresh `file` (a session file that `what`: changed
/// since it was imported, or is new), or, when the store may only be read (a read-only file
/// system, no write permission), the store opened read-only again (`Err`), after a warning
/// that the stored copy of `file` is used.
fn open_store_writable_or_read(
    file: &str,
    what: &str,
) -> Result<Result<Store, Store>, CommandError> {
    match open_store() {
        Ok(store) => Ok(Ok(store)),
        Err(e)
            if e.error()
                .downcast_ref::<StoreError>()
                .is_some_and(StoreError::is_read_only_store) =>
        {
            let store = open_store_read()?;
            eprintln!(
                "warning: {} {what}, and the store {} cannot be written ({}); using the copy \
                 in the store",
                crate::ui::safe(file),
                store.path().display(),
                crate::ui::safe(&e.error().root_cause().to_string())
            );
            Ok(Err(store))
        }
        Err(e) => Err(e),
    }
}

/// Resolves two SESSION arguments against one store: the first as a [`Session`], the second
/// as a key and record read from the same snapshot.
pub fn open_session_pair(
    a: &str,
    b: &str,
) -> Result<(Session, SessionKey, SessionRecord), CommandError> {
    let store = writable_if_needed(open_store_read()?, &[a, b])?;
    let (store, _) = resolve_fresh(store, a)?;
    let (store, kb) = resolve_fresh(store, b)?;
    // `b`'s refresh may have reopened the store or re-imported `a`'s file (the same file).
    let ka = resolve_session(&store, a)?;
    let session = session_in(store, ka)?;
    let rb = session
        .snap
        .session(kb)?
        .ok_or_else(|| anyhow!("session {kb} vanished from the store"))?;
    Ok((session, kb, rb))
}

fn session_in(store: Store, key: SessionKey) -> Result<Session, CommandError> {
    let snap = store.snapshot()?;
    let record = snap
        .session(key)?
        .ok_or_else(|| anyhow!("session {key} vanished from the store"))?;
    if record.cycle_cuts > 0 {
        // pi hangs on such a file (its path walk never ends); say what pisess did instead.
        eprintln!(
            "warning: {}: {} parent link{} formed a cycle; pisess cut {} (the entries stay, as \
             roots) — `pisess check` shows where",
            crate::ui::safe(&record.path),
            record.cycle_cuts,
            if record.cycle_cuts == 1 { "" } else { "s" },
            if record.cycle_cuts == 1 { "it" } else { "them" },
        );
    }
    Ok(Session {
        snap,
        key,
        record,
        unreadable: std::sync::Mutex::new(Vec::new()),
        _store: store,
    })
}

/// How many of the candidates an ambiguous prefix matches are named (the lookups stop after
/// one more: a hint, not a listing).
const SHOWN_MATCHES: usize = 8;

/// `a, b, c`, and `, … (more: give a longer prefix)` when the list was cut.
fn matches_list(names: Vec<String>, more: bool) -> String {
    let mut s = names.join(", ");
    if more {
        s.push_str(", … (more: give a longer prefix)");
    }
    s
}

/// Whether a SESSION argument names a file, as pi's `resolveSessionPath` decides: one with a
/// `/` (or `\`) or ending in `.jsonl` is a path; any other is a session id or prefix first,
/// and names a file (of the current folder) only when it is one and no session matches it.
fn names_a_file(store: &Store, path: &Path) -> Result<bool, CommandError> {
    use std::os::unix::ffi::OsStrExt;
    if !path.is_file() {
        return Ok(false);
    }
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&b'/') || bytes.contains(&b'\\') || bytes.ends_with(b".jsonl") {
        return Ok(true);
    }
    let Some(arg) = path.to_str() else {
        return Ok(true);
    };
    // Sessions whose files are gone do not hide the file here.
    let snap = store.snapshot()?;
    let live = |k: SessionKey| -> Result<bool, CommandError> {
        Ok(snap.session(k)?.is_some_and(|r| !r.gone))
    };
    Ok(match snap.find_session(arg)? {
        Lookup::NotFound => true,
        Lookup::Found(k) => !live(k)?,
        Lookup::Ambiguous(keys) => {
            let mut any = false;
            for k in keys {
                any |= live(k)?;
            }
            !any
        }
    })
}

fn resolve_session(store: &Store, arg: &str) -> Result<SessionKey, CommandError> {
    if arg.is_empty() {
        return Err(CommandError::with_hint(
            anyhow!("the SESSION argument is empty"),
            "give a session file, a session id (or a unique prefix) from `pisess ls`, or @latest",
        ));
    }
    let latest = (arg == "@latest").then(pi_latest_file).flatten();
    let arg = latest.as_deref().unwrap_or(arg);
    let path = Path::new(arg);
    let key = if arg == "@latest" {
        let snap = store.snapshot()?;
        latest_for_cwd(&snap)?
    } else if names_a_file(store, path)? {
        let report = match store.import_file(path) {
            // A store that may only be read (see `open_store_writable_or_read`, which warned):
            // the stored copy of the file, if it has one.
            Err(StoreError::ReadOnly { .. }) => {
                return store.snapshot()?.session_by_path(path)?.ok_or_else(|| {
                    anyhow!(
                        "{} is not in the store, and the store cannot be written to import it",
                        path.display()
                    )
                    .into()
                });
            }
            other => other?,
        };
        if let (Some(err), Some(s)) = (&report.error, report.session) {
            // The file was not read over the stored session (it was cut short): use that.
            eprintln!(
                "warning: {}; using the copy in the store",
                crate::ui::safe(err)
            );
            return Ok(s);
        }
        if let Some(err) = report.error {
            let mut hint = format!("run `pisess check {}` to see every problem", path.display());
            // What the file held when it was last imported is still in the store.
            let snap = store.snapshot()?;
            if let Some(s) = snap.session_by_path(path)?
                && let Some(r) = snap.session(s)?
            {
                hint.push_str(&format!(
                    "; the store still holds the session last imported from it ({}): `pisess \
                     export {} -o FILE` writes it out",
                    crate::ui::safe(&r.session_id),
                    crate::ui::safe(&r.session_id)
                ));
            }
            return Err(CommandError::with_hint(
                anyhow!("cannot import {}: {err}", path.display()),
                hint,
            ));
        }
        match report.session {
            Some(s) => s,
            None => store
                .snapshot()?
                .session_by_path(path)?
                .ok_or_else(|| anyhow!("{} was not imported as a session", path.display()))?,
        }
    } else {
        let snap = store.snapshot()?;
        match snap.find_session(arg)? {
            Lookup::Found(s) => s,
            Lookup::NotFound => {
                // A path that exists but cannot be looked at (a folder on the way that the user
                // may not search), or that is not a file: say so rather than "no match".
                match std::fs::metadata(path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(anyhow!("cannot read {}: {e}", crate::ui::safe(arg)).into());
                    }
                    Ok(md) if !md.is_file() => {
                        let e = pisess_formats::open::not_regular(md.file_type());
                        return Err(CommandError::with_hint(
                            anyhow!("{} is not a session file: {e}", crate::ui::safe(arg)),
                            "give a session file, a session id (or a unique prefix) from \
                             `pisess ls`, or @latest",
                        ));
                    }
                    _ => {}
                }
                return Err(CommandError::with_hint(
                    anyhow!("no session file or session id matches {arg:?}"),
                    "give a session file, a session id (or a unique prefix) from `pisess ls`, \
                     or @latest",
                ));
            }
            Lookup::Ambiguous(keys) => {
                let mut records = Vec::new();
                for k in keys {
                    if let Some(r) = snap.session(k)? {
                        records.push((k, r));
                    }
                }
                let whole = records.iter().all(|(_, r)| r.session_id == arg);
                let one_id = records
                    .windows(2)
                    .all(|w| w[0].1.session_id == w[1].1.session_id);
                // One session id held by one live file and by files since gone (a session
                // file moved or renamed) names the live one; two live files are two sessions.
                // Gone: marked so by an import of its folder, or missing now (a file deleted
                // since the last import is not named as a choice).
                let gone: Vec<bool> = records
                    .iter()
                    .map(|(_, r)| {
                        // (A file replaced by a symbolic link is gone for the import too.)
                        r.gone
                            || std::fs::symlink_metadata(&r.path).map_or_else(
                                |e| e.kind() == std::io::ErrorKind::NotFound,
                                |m| m.file_type().is_symlink(),
                            )
                    })
                    .collect();
                let live: Vec<SessionKey> = records
                    .iter()
                    .zip(&gone)
                    .filter(|(_, g)| !**g)
                    .map(|((k, _), _)| *k)
                    .collect();
                if let ([k], true) = (live.as_slice(), one_id) {
                    return Ok(*k);
                }
                let names: Vec<String> = records
                    .iter()
                    .zip(&gone)
                    .map(|((_, r), g)| {
                        let gone = if *g { ", gone" } else { "" };
                        if whole {
                            format!("{}{gone}", crate::ui::safe(&r.path))
                        } else {
                            format!("{} ({}{gone})", r.session_id, crate::ui::safe(&r.path))
                        }
                    })
                    .collect();
                let more = names.len() > SHOWN_MATCHES;
                let names: Vec<String> = names.into_iter().take(SHOWN_MATCHES).collect();
                return Err(if whole {
                    CommandError::with_hint(
                        anyhow!(
                            "session id {arg:?} is ambiguous: {}{} files have it",
                            names.len(),
                            if more { " or more" } else { "" }
                        ),
                        format!(
                            "give the session file instead: {}",
                            matches_list(names, more)
                        ),
                    )
                } else {
                    CommandError::with_hint(
                        anyhow!("session prefix {arg:?} is ambiguous"),
                        format!("it matches: {}", matches_list(names, more)),
                    )
                });
            }
        }
    };
    Ok(key)
}

/// A writer appending to the session file `path` (and to `store`), explaining a legacy file.
fn open_writer<'s>(
    store: &'s Store,
    path: &str,
) -> Result<pisess_engine::agent::writer::SessionWriter<'s>, CommandError> {
    use pisess_engine::agent::writer::{SessionWriter, WriteError};
    refuse_read_only(path, "")?;
    SessionWriter::open(store, Path::new(path)).map_err(|e| match e {
        WriteError::Legacy { .. } => CommandError::with_hint(
            e,
            format!(
                "run `pisess migrate --in-place {path}` first (pi rewrites such a file before \
                 writing to it)"
            ),
        ),
        other => other.into(),
    })
}

/// Refuses to change a session file without write permission: a read-only file is the
/// user's way of saying "do not change this" (root may write it anyway; `migrate --in-place`
/// leaves such files alone, and so do `compact`, `navigate` and `prune --in-place`). `also`
/// ends the hint (another way to get what was asked).
pub fn refuse_read_only(path: &str, also: &str) -> Result<(), CommandError> {
    if std::fs::metadata(path).is_ok_and(|m| m.permissions().readonly()) {
        return Err(CommandError::with_hint(
            anyhow!("{} is read-only; left alone", crate::ui::safe(path)),
            format!(
                "make it writable (`chmod u+w {}`) to change it{also}",
                crate::ui::safe(path)
            ),
        ));
    }
    Ok(())
}

/// A session file as a command read it (its size and modification time when it was imported),
/// for appending later without holding the store in between: `compact` and `navigate` let the
/// store go while their summarizer runs (a model may take minutes, and every other pisess
/// command would find the store busy), then append only if the file is still as they read it
/// — what pi appended meanwhile would otherwise end up on an abandoned branch.
#[derive(Debug, Clone)]
pub struct SeenFile {
    path: String,
    size: u64,
    mtime_ns: i64,
}

impl SeenFile {
    /// The file's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Opens `store`'s writer on the file, or fails, writing nothing, when the file is not as
    /// it was read (another size or modification time: pi or another process wrote to it).
    pub fn open_writer<'s>(
        &self,
        store: &'s Store,
    ) -> Result<pisess_engine::agent::writer::SessionWriter<'s>, CommandError> {
        let now = std::fs::metadata(&self.path)
            .map(|md| pisess_engine::import::size_mtime(&md))
            .map_err(|e| anyhow!("cannot read {}: {e}", crate::ui::safe(&self.path)))?;
        if now != (self.size, self.mtime_ns) {
            return Err(CommandError::with_hint(
                anyhow!(
                    "{} changed while the summary was written (pi, or another process, wrote to \
                     it); nothing was written",
                    crate::ui::safe(&self.path)
                ),
                "run the command again: it starts from the file as it is now",
            ));
        }
        open_writer(store, &self.path)
    }
}

/// A folder as pi's `resolvePath` makes it for a comparison (`pathsEqual`): `~` and `~/…`
/// expanded to `$HOME`, a `file://` URL read as its path, a relative path joined to `here`
/// (absolute), then `.`, `..`, repeated and trailing slashes taken out, lexically (no link is
/// followed): [`pisess_engine::agent::fork::resolve_pi_path`].
pub fn resolve_path(p: &str, here: &str) -> String {
    pisess_engine::agent::fork::resolve_pi_path(p, here)
}

/// The file `pi -c` would continue in the current folder, as a SESSION argument (pi's
/// `continueRecent` and `findMostRecentSession`): in pi's session folder for this cwd
/// (`$PI_CODING_AGENT_SESSION_DIR` or the `sessionDir` setting itself when set; else
/// `--<cwd with / \\ : as ->--` under the sessions folder), the `*.jsonl` file with the latest
/// mtime whose header ([`pi_header`]) is a session's. Such a shared folder other than that
/// default folder holds every project's sessions, so there the header's `cwd`, resolved, must
/// also be the current folder.
/// `None` when there is no such file (or its path is not UTF-8): then `@latest` is looked up in
/// the store ([`latest_for_cwd`]).
fn pi_latest_file() -> Option<String> {
    let cwd = std::env::current_dir().ok()?;
    let cwd = cwd.to_str()?;
    let resolve = |p: &str| resolve_path(p, cwd);
    let default_dir = pisess_formats::layout::agent_dir().map(|a| {
        a.join("sessions")
            .join(pisess_formats::layout::project_dir_name(cwd))
    });
    let folder = pisess_formats::session_folder::find_from(Some(Path::new(cwd)))?;
    let (dir, filter_cwd) = if folder.shared {
        // `~` expanded, as pi (and `import`) expand it.
        let root = folder.root;
        let same = default_dir
            .as_ref()
            .and_then(|d| d.to_str())
            .zip(root.to_str())
            .is_some_and(|(d, r)| resolve(d) == resolve(r));
        (root, !same)
    } else {
        (default_dir?, false)
    };
    let here = resolve(cwd);
    let mut files: Vec<(std::time::SystemTime, std::path::PathBuf)> = Vec::new();
    for e in std::fs::read_dir(&dir).ok()?.flatten() {
        let path = e.path();
        if !path.to_str().is_some_and(|p| p.ends_with(".jsonl")) {
            continue;
        }
        if let Ok(mtime) = std::fs::metadata(&path).and_then(|m| m.modified()) {
            files.push((mtime, path));
        }
    }
    // Newest first; the first whose header qualifies (headers read only as far as needed).
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    files
        .into_iter()
        .find(|(_, path)| {
            pi_header(path).is_some_and(|h| {
                !filter_cwd
                    || h["cwd"]
                        .as_str()
                        .is_some_and(|c| !c.is_empty() && resolve(c) == here)
            })
        })
        .and_then(|(_, p)| p.to_str().map(str::to_owned))
}

/// The header of a session file as pi's discovery reads it (`readSessionHeader`): the first
/// line that parses as JSON within the first MiB, blank and malformed lines skipped; it is the
/// header when it is an object with `type` "session" and a string `id`. `None` otherwise (also
/// for a file that cannot be read, or a first MiB without a whole line that parses).
fn pi_header(path: &Path) -> Option<Value> {
    use std::io::BufRead;
    const SCAN: u64 = 1 << 20;
    // Regular files only, opened so that the open cannot block (pi's own read waits forever
    // on a FIFO named `*.jsonl`).
    let f = pisess_formats::open::open_regular(path).ok()?;
    let mut r = std::io::BufReader::new(std::io::Read::take(f, SCAN + 1));
    let mut line = Vec::new();
    let mut read = 0u64;
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line).ok()?;
        if n == 0 {
            return None;
        }
        read += n as u64;
        // A line cut by the limit (one byte past it read) is not whole.
        if read > SCAN {
            return None;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.strip_suffix('\n').unwrap_or(&text);
        if text.trim().is_empty() {
            continue;
        }
        // `JSON.parse` as pi reads it (lone surrogates, repeated keys, deep nesting), and a
        // line that parses to a falsy value (`null`, `0`, `false`, `""`) skipped as pi skips it.
        let Ok(v) = pisess_formats::value::parse_owned::<Value>(text) else {
            continue;
        };
        if !pisess_formats::value::raw_is_truthy(text) {
            continue;
        }
        return (v["type"] == "session" && v["id"].is_string()).then_some(v);
    }
}

/// The session a `@latest` that [`pi_latest_file`] does not answer names: among the imported
/// sessions whose header `cwd` is the current folder (both resolved as pi compares folders,
/// [`resolve_path`]), the one with the latest message.
fn latest_for_cwd(snap: &Snapshot) -> Result<SessionKey, CommandError> {
    let cwd = std::env::current_dir()?;
    let cwd_s = cwd.to_string_lossy();
    let here = resolve_path(&cwd_s, &cwd_s);
    let mut best: Option<(i64, SessionKey)> = None;
    for (k, r) in snap.sessions()? {
        if r.gone || r.cwd.is_empty() || resolve_path(&r.cwd, &cwd_s) != here {
            continue;
        }
        let t = r.modified_ms.or(r.created_ms).unwrap_or(i64::MIN);
        if best.is_none_or(|(bt, _)| t >= bt) {
            best = Some((t, k));
        }
    }
    best.map(|(_, k)| k).ok_or_else(|| {
        CommandError::with_hint(
            anyhow!("no imported session has {} as its folder", cwd.display()),
            "import pi's sessions first (`pisess import`), or give a session file",
        )
    })
}

impl Session {
    /// The open store (for commands that write through it).
    pub fn store(&self) -> &Store {
        &self._store
    }

    /// A writer appending to this session's file (and the store), explaining a legacy file.
    pub fn writer(&self) -> Result<pisess_engine::agent::writer::SessionWriter<'_>, CommandError> {
        open_writer(&self._store, &self.record.path)
    }

    /// The session file as this session was read from it, for a command that lets the store go
    /// during a long step (a summarizer) and appends after it ([`SeenFile::open_writer`]).
    pub fn seen_file(&self) -> SeenFile {
        SeenFile {
            path: self.record.path.clone(),
            size: self.record.file_size,
            mtime_ns: self.record.mtime_ns,
        }
    }

    /// Resolves an ENTRY argument.
    ///
    /// `~N` suffixes chain as in git (`@leaf~1~1` is `@leaf~2`; a bare `~` is `~1`). An error
    /// quotes the argument as given, and the part of it that is wrong.
    pub fn entry(&self, arg: &str) -> Result<EntryKey, CommandError> {
        if arg.is_empty() {
            return Err(CommandError::with_hint(
                anyhow!("the ENTRY argument is empty"),
                "give an entry id or unique prefix (see `pisess log`), @leaf, @root, \
                 label:NAME or ENTRY~N",
            ));
        }
        // An id, or a label, that literally contains `~` wins over the ancestor syntax.
        if let Some(e) = self.whole(arg)? {
            return Ok(e);
        }
        // Suffixes are taken off from the right until none is left, or what is left is an id.
        let mut base = arg;
        let mut up: u32 = 0;
        while let Some((b, n)) = base.rsplit_once('~') {
            if b.is_empty() || !n.bytes().all(|c| c.is_ascii_digit()) {
                break;
            }
            let n: u32 = if n.is_empty() { Ok(1) } else { n.parse() }
                .ok()
                .and_then(|n| up.checked_add(n))
                .ok_or_else(|| anyhow!("ancestor count too large in {arg:?}"))?;
            up = n;
            base = b;
            if base.contains('~') && self.whole(base)?.is_some() {
                break;
            }
        }
        let within = if base == arg {
            String::new()
        } else {
            format!(" (in {arg:?})")
        };
        let e = self.base_entry(base, &within)?;
        if up == 0 {
            return Ok(e);
        }
        match self.snap.ancestor(e, up)? {
            Some(a) => Ok(a),
            None => {
                let has = self.snap.depth(e)?.unwrap_or(0);
                Err(CommandError::with_hint(
                    anyhow!(
                        "{arg:?}: {} has fewer than {up} ancestors (it has {has})",
                        crate::ui::safe(base)
                    ),
                    "use a smaller N in ENTRY~N",
                ))
            }
        }
    }

    /// The entry `arg` names as a whole: an id, or `label:NAME` of a label that exists.
    fn whole(&self, arg: &str) -> Result<Option<EntryKey>, CommandError> {
        if let Some(e) = self.snap.entry_by_id(self.key, arg)? {
            return Ok(Some(e));
        }
        match arg.strip_prefix("label:") {
            Some(name) if self.snap.labels(self.key)?.iter().any(|(_, l)| l == name) => {
                self.labelled(name, "").map(Some)
            }
            _ => Ok(None),
        }
    }

    /// An ENTRY without `~N`; `within` (` (in "ARG")` or empty) follows what errors quote.
    fn base_entry(&self, arg: &str, within: &str) -> Result<EntryKey, CommandError> {
        match arg {
            "@leaf" => self.leaf(),
            "@root" => {
                let leaf = self.leaf()?;
                let d = self.snap.depth(leaf)?.unwrap_or(0);
                Ok(self.snap.ancestor(leaf, d)?.unwrap_or(leaf))
            }
            _ => {
                if let Some(name) = arg.strip_prefix("label:") {
                    return self.labelled(name, within);
                }
                match self.snap.find_entry(self.key, arg)? {
                    Lookup::Found(e) => Ok(e),
                    Lookup::NotFound => Err(CommandError::with_hint(
                        anyhow!(
                            "no entry of session {} matches {arg:?}{within}",
                            self.record.session_id
                        ),
                        "give an entry id or unique prefix (see `pisess log`), @leaf, @root, \
                         label:NAME or ENTRY~N",
                    )),
                    Lookup::Ambiguous(keys) => {
                        let more = keys.len() > SHOWN_MATCHES;
                        let ids: Vec<String> = keys
                            .into_iter()
                            .take(SHOWN_MATCHES)
                            .map(|k| self.id(k))
                            .collect::<Result<_, _>>()?;
                        Err(CommandError::with_hint(
                            anyhow!("entry prefix {arg:?}{within} is ambiguous"),
                            format!("it matches: {}", matches_list(ids, more)),
                        ))
                    }
                }
            }
        }
    }

    fn labelled(&self, name: &str, within: &str) -> Result<EntryKey, CommandError> {
        let labels = self.snap.labels(self.key)?;
        let hits: Vec<&String> = labels
            .iter()
            .filter(|(_, l)| l == name)
            .map(|(id, _)| id)
            .collect();
        match hits.as_slice() {
            [id] => self.snap.entry_by_id(self.key, id)?.ok_or_else(|| {
                anyhow!("label {name:?}{within} points at {id}, which is not stored").into()
            }),
            [] => {
                let all: Vec<&str> = labels.iter().map(|(_, l)| l.as_str()).collect();
                Err(CommandError::with_hint(
                    anyhow!("no entry has the label {name:?}{within}"),
                    if all.is_empty() {
                        "this session has no labels".to_owned()
                    } else {
                        format!("labels: {}", all.join(", "))
                    },
                ))
            }
            many => Err(CommandError::with_hint(
                anyhow!("the label {name:?}{within} is on several entries"),
                format!(
                    "give one of: {}",
                    many.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
        }
    }

    /// The line of the session's last entry (a row that is an entry or a kept value), walking
    /// back from its last row; `None` when it has none.
    fn last_entry_line(&self) -> Result<Option<u64>, CommandError> {
        let Some(last) = self.snap.last_entry(self.key)? else {
            return Ok(None);
        };
        Ok(self.snap.with_entry(last, |a| u64::from(a.line))?)
    }

    /// The entry `context` and `log` start from when none is given: the leaf, or, when the
    /// last entry has no string id, that entry (pi's context falls back to the last entry
    /// when its leaf id is undefined: [`pisess_engine::Snapshot::context_leaf`]). `None` for a
    /// session without entries.
    pub fn context_leaf(&self) -> Result<Option<EntryKey>, CommandError> {
        Ok(self.snap.context_leaf(self.key)?)
    }

    /// The leaf pi resumes at.
    pub fn leaf(&self) -> Result<EntryKey, CommandError> {
        let Some(leaf) = self.snap.leaf(self.key)? else {
            // pi resumes at the last entry in file order; without entries there is none, and
            // an entry whose `id` is not a string cannot be named (`pisess check` says more).
            let (why, hint) = if self.record.entries == 0 {
                (
                    "no entries".to_owned(),
                    "the file holds only its header: pi writes the entries once the session has \
                     a message",
                )
            } else {
                let at = self
                    .last_entry_line()?
                    .map_or_else(String::new, |l| format!(" (line {l})"));
                (
                    format!("its last entry{at} has no string id; `pisess check` says more"),
                    "give an entry explicitly (`context` and `log` without one start from that \
                     last entry, as pi's context does)",
                )
            };
            return Err(CommandError::with_hint(
                anyhow!(
                    "session {} ({}) has no leaf ({why})",
                    crate::ui::safe(&self.record.session_id),
                    crate::ui::safe(&self.record.path)
                ),
                hint,
            ));
        };
        Ok(leaf)
    }

    /// The id of an entry (empty for id-less rows).
    pub fn id(&self, e: EntryKey) -> Result<String, CommandError> {
        Ok(self.snap.entry_id(e)?.unwrap_or_default())
    }

    /// An entry's stored JSON, parsed (key order kept). An error names the file, line and entry
    /// ([`pisess_engine::Snapshot::entry_value`]).
    pub fn value(&self, e: EntryKey) -> Result<Value, CommandError> {
        Ok(self.snap.entry_value(e)?)
    }

    /// [`Session::value`] for listings (`log`, `tree`), where one entry whose JSON cannot be
    /// read (nested deeper than pisess reads) must not hide the others: it stands in as
    /// `{"type": "(unreadable)", "id": …}`, and its line is kept for [`Session::finish`].
    pub fn value_or_unreadable(&self, e: EntryKey) -> Result<Value, CommandError> {
        match self.snap.entry_value(e) {
            Ok(v) => Ok(v),
            Err(StoreError::UnreadableEntry { line, id, .. }) => {
                if let Ok(mut lines) = self.unreadable.lock() {
                    lines.push(line);
                }
                let parent = self
                    .snap
                    .with_entry(e, |a| a.parent_id.as_ref().map(|p| p.as_str().to_owned()))?
                    .flatten();
                Ok(serde_json::json!({"type": "(unreadable)", "id": id, "parentId": parent}))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The outcome of a listing that ran to its end: `outcome`, unless entries were shown as
    /// `(unreadable)` ([`Session::value_or_unreadable`]); then they are named on stderr (file
    /// and lines), after stdout is flushed, and the status is 2, as `stats` and `grep` do for what they left out.
    pub fn finish(&self, ui: &mut crate::ui::Ui, outcome: Outcome) -> Outcome {
        let mut lines = self
            .unreadable
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default();
        if lines.is_empty() {
            return outcome;
        }
        lines.sort_unstable();
        lines.dedup();
        // After what was listed, not before it: stdout is buffered, stderr is not. A write error
        // here comes back at the final flush.
        let _ = ui.flush();
        crate::commands::util::warn_unreadable(&self.record.path, &lines, "shown as (unreadable)");
        Outcome::PartialFailure
    }

    /// The path root → `e` (inclusive) with each entry's JSON.
    pub fn path_values(&self, e: EntryKey) -> Result<Vec<(EntryKey, Value)>, CommandError> {
        self.snap
            .path_to_root(e)?
            .into_iter()
            .map(|k| Ok((k, self.value(k)?)))
            .collect()
    }

    /// The path root → `e` (inclusive) as a [`PathSource`] that reads each entry from the
    /// store when asked: only the keys are held. `e` may be [`Self::context_leaf`]'s id-less
    /// entry ([`pisess_engine::Snapshot::context_path`]).
    pub fn path_source(&self, e: EntryKey) -> Result<StoredPath<'_>, CommandError> {
        Ok(StoredPath {
            session: self,
            keys: self.snap.context_path(self.key, e)?,
        })
    }

    /// The empty path: pi's context of a session without entries (a header only), or of one
    /// whose last entry has the id `null` ([`Self::context_leaf`] is `None` for both).
    pub fn empty_path(&self) -> StoredPath<'_> {
        StoredPath {
            session: self,
            keys: Vec::new(),
        }
    }

    /// Every label of the session: target id → label.
    pub fn label_map(&self) -> Result<LabelMap, CommandError> {
        Ok(self.snap.labels(self.key)?.into_iter().collect())
    }
}

/// Labels by target id. Listings look every entry's id up (`tree` and `log` of the 1 GiB
/// benchmark session: 375,000 lookups), so the hash takes an id a word at a time
/// ([`IdHash`]; SipHash was 2 % of `log`, and FNV-1a, a multiply per byte, ~4 % of `tree`
/// and `log`: 20 interleaved rounds each, 63.3 → 61.9 ms and 46.4 → 45.2 ms median).
pub type LabelMap =
    std::collections::HashMap<String, String, std::hash::BuildHasherDefault<IdHash>>;

/// A fast hash for short keys: eight bytes at a time, each word folded in with one rotate,
/// xor and multiply (the step of rustc's FxHash); the last partial word is zero-padded and
/// tagged with its length. The result is rotated so that the product's well-mixed high bits
/// pick the table's bucket (a multiply mixes upwards only). Not for keys an attacker picks to
/// collide (nor was FNV-1a).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHash(u64);

impl IdHash {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl std::hash::Hasher for IdHash {
    fn write(&mut self, bytes: &[u8]) {
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            self.add(u64::from_le_bytes(b));
        }
        let rest = words.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i) | 1 << 63);
    }
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}

/// A path in the store, read one entry at a time (see [`Session::path_source`]). An entry's
/// kind comes from its record (type and role as imported), its value from its stored line.
#[derive(Debug)]
pub struct StoredPath<'s> {
    session: &'s Session,
    keys: Vec<EntryKey>,
}

impl PathSource for StoredPath<'_> {
    type Error = CommandError;

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn meta<R>(
        &self,
        i: usize,
        f: impl FnOnce(Kind, Option<&str>) -> R,
    ) -> Result<R, CommandError> {
        let key = self.keys[i];
        self.session
            .snap
            .with_entry(key, |a| {
                let kind = Kind::of_record(
                    a.type_name.as_ref().map(|t| t.as_str()),
                    a.role.as_ref().map(|r| r.as_str()),
                );
                f(kind, a.id.as_ref().map(|s| s.as_str()))
            })?
            .ok_or_else(|| anyhow!("entry {key} vanished from the store").into())
    }

    fn value(&self, i: usize) -> Result<Value, CommandError> {
        self.session.value(self.keys[i])
    }

    fn last_thinking_change_before(
        &self,
        before: usize,
    ) -> Result<Option<Option<usize>>, CommandError> {
        // The path is root first, so an entry at depth d is on it iff it is keys[d].
        let mut best = None;
        for (k, v) in self.session.snap.settings(self.session.key)? {
            if v != pisess_engine::schema::SETTING_THINKING {
                continue;
            }
            let Some(d) = self.session.snap.depth(k)? else {
                continue;
            };
            let d = d as usize;
            if d < before && self.keys.get(d) == Some(&k) {
                best = best.max(Some(d));
            }
        }
        Ok(Some(best))
    }
}

// ---- describing entries ---------------------------------------------------------------------

pub use pisess_engine::describe::{
    entry_type, first_line, kind, message_text, model, role, summary, tokens, tool_call_phrase,
};

/// The terminal columns `c` takes once [`crate::ui::safe`] has escaped what it escapes: its
/// display width (two for CJK and most emoji, none for a combining mark), or the length of its
/// escape (`\u{1b}`: 6).
pub fn columns(c: char) -> usize {
    use unicode_width::UnicodeWidthChar;
    if crate::ui::is_unsafe(c) {
        c.escape_unicode().count()
    } else {
        c.width().unwrap_or(0)
    }
}

/// The terminal columns `t` takes once [`crate::ui::safe`] has escaped it ([`columns`] summed).
pub fn text_columns(t: &str) -> usize {
    t.chars().map(columns).sum()
}

/// Cuts a text to at most `max` terminal columns, marking the cut with `…`: a character counts
/// as wide as it is shown (two for CJK and most emoji, none for a combining mark), and one that
/// [`crate::ui::safe`] escapes as wide as its escape (`\u{1b}`: 6), so `safe(&clip(t, n))`
/// fits in `n` columns.
pub fn clip(t: &str, max: usize) -> String {
    let cols = columns;
    if text_columns(t) <= max {
        return t.to_owned();
    }
    let room = max.saturating_sub(1);
    let mut used = 0;
    let mut out = String::new();
    for c in t.chars() {
        used += cols(c);
        if used > room {
            break;
        }
        out.push(c);
    }
    out.push('…');
    out
}

/// The width to lay out for: `COLUMNS` when set (20 or more), else the width of the terminal
/// on stdout, else 100 (output to a file or a pipe).
pub fn width() -> usize {
    known_width().unwrap_or(100)
}

/// `COLUMNS` when set (20 or more), else the width of the terminal on stdout; `None` for
/// output to a file or a pipe.
pub fn known_width() -> Option<usize> {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w: &usize| w >= 20)
        .or_else(|| {
            terminal_size::terminal_size_of(std::io::stdout())
                .map(|(w, _)| usize::from(w.0))
                .filter(|&w| w >= 20)
        })
}

/// Width of `log`'s time column: `2026-01-01 12:34:56`.
pub const TIME_COLUMN: usize = 19;

/// A [`short_time`] for `log`'s time column: terminal-safe and exactly [`TIME_COLUMN`]
/// characters (longer text cut with `…`, shorter padded, `-` for no time), so the columns after
/// it line up whatever a timestamp holds.
pub fn time_column(short: &str) -> std::borrow::Cow<'_, str> {
    // Printable ASCII is one column a byte: one pass over the bytes decides the usual case
    // (without an early exit, which lets it be vectorised).
    if short.len() == TIME_COLUMN
        && short
            .bytes()
            .fold(true, |ok, b| ok & (b.wrapping_sub(0x20) < 0x5f))
    {
        return short.into();
    }
    let shown = if short.is_empty() {
        "-".into()
    } else {
        crate::ui::safe(short).replace('\t', " ")
    };
    let n = shown.chars().count();
    let mut out = String::with_capacity(TIME_COLUMN + 4);
    if n > TIME_COLUMN {
        out.extend(shown.chars().take(TIME_COLUMN - 1));
        out.push('…');
    } else {
        out.push_str(&shown);
        out.extend(std::iter::repeat_n(' ', TIME_COLUMN - n));
    }
    out.into()
}

/// An ISO timestamp shortened for display, in UTC: `2026-01-01 12:34:56` (a time with an
/// offset is moved to UTC, as every other time shown is; text that is no date as written).
pub fn short_time(ts: Option<&str>) -> String {
    // Date and time around the `T`, so that an extended year (`+010000-01-01T…`) is cut right.
    let cut = |t: &str| {
        let at = t
            .find(['T', 't'])
            .filter(|&i| i >= 10 && t.as_bytes().get(i - 3) == Some(&b'-'));
        match at.and_then(|i| Some((t.get(..i)?, t.get(i + 1..i + 9)?))) {
            Some((d, h)) => format!("{d} {h}"),
            None => t.to_owned(),
        }
    };
    match ts {
        Some(t) if t.ends_with(['Z', 'z']) || t.len() <= 19 => cut(t),
        Some(t) => match pisess_engine::import::iso_to_ms(t) {
            Some(ms) => cut(&pisess_engine::export::ms_to_iso(ms)),
            None => t.to_owned(),
        },
        None => String::new(),
    }
}

/// An id shortened for display (8 characters, pi's id length).
pub fn short_id(id: &str) -> &str {
    // pi's ids are ASCII: their first 8 bytes are their first 8 characters.
    if let Some(head) = id.as_bytes().get(..8)
        && head.is_ascii()
    {
        return &id[..8];
    }
    match id.char_indices().nth(8) {
        Some((i, _)) => &id[..i],
        None => id,
    }
}

/// The entry's id, when it is a string.
pub fn id_of(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use unicode_width::UnicodeWidthStr;

    use super::{IdHash, LabelMap, clip, short_time, time_column};
    use crate::ui::safe;

    /// Keys that differ only by trailing zero bytes, by a word boundary or by being empty hash
    /// apart (the last word is zero-padded, so its length must be part of it), and a map of
    /// many ids finds each one.
    #[test]
    fn id_hash_tells_padded_and_split_keys_apart() {
        use std::hash::BuildHasher;
        let h = |k: &str| std::hash::BuildHasherDefault::<IdHash>::default().hash_one(k);
        let keys = [
            "",
            "\0",
            "\0\0",
            "a",
            "a\0",
            "abcdefg",
            "abcdefg\0",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefghi",
            "5ddf36d3",
            "5ddf36d4",
            "6ddf36d3",
        ];
        let mut seen = std::collections::HashSet::new();
        for k in keys {
            assert!(seen.insert(h(k)), "{k:?} hashes as an earlier key");
        }
        let mut map = LabelMap::default();
        for i in 0..20_000u32 {
            map.insert(
                format!("{:08x}", i.wrapping_mul(2_654_435_761)),
                i.to_string(),
            );
        }
        for i in 0..20_000u32 {
            let id = format!("{:08x}", i.wrapping_mul(2_654_435_761));
            assert_eq!(map.get(&id), Some(&i.to_string()));
        }
        assert_eq!(map.get("not an id"), None);
    }

    #[test]
    fn short_times_are_shown_in_utc() {
        assert_eq!(
            short_time(Some("2026-07-25T09:00:00.000Z")),
            "2026-07-25 09:00:00"
        );
        assert_eq!(
            short_time(Some("2026-07-25T09:00:00+02:00")),
            "2026-07-25 07:00:00"
        );
        assert_eq!(
            short_time(Some("2026-07-25T01:00:00.5+02:00")),
            "2026-07-24 23:00:00"
        );
        assert_eq!(short_time(Some("2026-07-25")), "2026-07-25");
        assert_eq!(
            short_time(Some("not a time at all, but long")),
            "not a time at all, but long"
        );
        assert_eq!(short_time(None), "");
        assert_eq!(time_column("2026-07-25 09:00:00"), "2026-07-25 09:00:00");
        assert_eq!(time_column(""), "-                  ");
        assert_eq!(time_column("2026-07-25"), "2026-07-25         ");
        assert_eq!(
            time_column("not a time at all, but long"),
            "not a time at all,…"
        );
        assert_eq!(time_column("\u{1b}[31mRED"), "\\u{1b}[31mRED      ");
        assert_eq!(time_column("a\tb"), "a b                ");
        for t in [
            "",
            "x",
            "2026-07-25 09:00:00",
            "+010000-01-01 10:00:00",
            "\u{1b}[31m",
            "ééé",
        ] {
            assert_eq!(time_column(t).chars().count(), super::TIME_COLUMN, "{t:?}");
        }
        // An extended year (`toISOString` past 9999) is cut at its `T`, not at byte 10.
        assert_eq!(
            short_time(Some("+010000-01-01T10:00:00.000Z")),
            "+010000-01-01 10:00:00"
        );
        assert_eq!(
            short_time(Some("+010000-01-01T12:00:00+02:00")),
            "+010000-01-01 10:00:00"
        );
    }

    /// A clipped text, escaped for the terminal, fits its columns: CJK characters take two,
    /// escapes as many as they print, and a text that fits is left whole.
    #[test]
    fn clip_counts_columns_as_the_terminal_shows_them() {
        for (t, max) in [
            ("plain ascii text that is long enough to cut", 20),
            ("汉字汉字汉字汉字汉字汉字汉字汉字汉字汉字汉字", 21),
            ("汉字汉字汉字汉字汉字汉字汉字汉字汉字汉字汉字", 20),
            ("red \u{1b}[31mtext\u{7} and more text after it", 20),
            (
                "e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}e\u{301}",
                5,
            ),
            ("😀😀😀😀😀😀😀😀😀😀😀😀", 9),
        ] {
            let shown = safe(&clip(t, max)).into_owned();
            assert!(
                shown.width() <= max,
                "{t:?} → {shown:?} is {} columns",
                shown.width()
            );
            assert!(shown.width() + 2 >= max, "{t:?} → {shown:?} cut too short");
            assert!(shown.ends_with('…'));
        }
        assert_eq!(clip("汉字", 4), "汉字");
        assert_eq!(clip("short", 20), "short");
    }
}
