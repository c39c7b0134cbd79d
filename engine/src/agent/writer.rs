//! A session writer with pi's `SessionManager` semantics (spec §1.3, §1.4, §3, §8), over the
//! session's JSONL file **and** the store.
//!
//! Invariants:
//! - every entry is built with pi's key order and written as `JSON.stringify` would
//!   ([`pisess_formats::js::to_string`]); ids are fresh 8-hex ids unique in the session;
//! - a new session stays in memory until it holds a `user` or `assistant` message; then its
//!   header and every pending entry are written at once, into a file that did not exist (temp
//!   file in the same folder, fsync, hard link to the final name — which fails if the name is
//!   taken —, fsync of the folder);
//! - every later entry is one line appended to the file (write + fsync) and then imported into
//!   the store ([`Store::import_file`], which reads only the new lines); if the append or the
//!   import fails, the file is put back as it was (truncated, its torn tail restored) and the
//!   writer's state (leaf, pending entries) is unchanged: the file and the store are either
//!   both updated or both left alone;
//! - before the first append to a file whose last line has no newline (a torn write), the tail
//!   is repaired as pi's issue #8345 asks: a complete record gets its newline (in the same
//!   appending write as the entry: the file is not cut, so a kill at any moment loses
//!   nothing), the complete records of a glued line or of one with a torn fragment are kept
//!   one per line and the fragment is cut from the file (pi would glue the next entry onto the
//!   fragment and lose both) — but never lost: before the cut, the whole line is saved beside
//!   the file as `FILE.torn` (`.torn.1`, …: a new name each time; temp file, fsync, link; removed
//!   again when the repair dropped no byte), and [`SessionWriter::saved_tails`] names it;
//! - the leaf lives in the writer, as in pi: [`SessionWriter::branch`] moves it without writing
//!   anything; a reopened file resumes at its last entry.
//!
//! Nothing here holds a lock on the file: like pi, one writer per session file at a time.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

use super::fork::{BranchPlan, BranchWritten, generate_id, has_conversation, new_header};
use super::path::{id_of, type_of};
use super::project::{current_system_message, project};
use crate::error::StoreError;
use crate::graph::Snapshot;
use crate::ids::SessionKey;
use crate::store::Store;

/// Why a write failed. Nothing was written when this is returned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading or writing the session file failed.
    #[error("cannot write {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The store did not take the written file; the file was put back as it was.
    #[error("the store refused {}: {message}", path.display())]
    Import {
        /// The file.
        path: PathBuf,
        /// What the import said.
        message: String,
    },
    /// The file to append to could not be read as a session (gone, unreadable, cut short):
    /// nothing was written, the store did not change.
    #[error("cannot append to {}: {message}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the import said.
        message: String,
    },
    /// An entry id that the session does not hold.
    #[error("entry {0} not found")]
    NotFound(String),
    /// A context edit of an entry that is not on the active branch.
    #[error("entry {0} is not on the active branch")]
    NotOnBranch(String),
    /// A context edit of an entry that gives the model no editable content.
    #[error("entry {0} does not contribute editable model content")]
    NotEditable(String),
    /// A context edit replacement that is neither `null` nor `{content: string | array}`.
    #[error("context edit replacement must be null or contain string/array content")]
    BadReplacement,
    /// A session id that pi would refuse.
    #[error(
        "session id {0:?} must be non-empty, contain only alphanumeric characters, '-', '_', \
         and '.', and start and end with an alphanumeric character"
    )]
    BadSessionId(String),
    /// The file is not a session the store holds.
    #[error("{} is not an imported pi session", .0.display())]
    NotASession(PathBuf),
    /// A write failed and putting the file back failed too: its last line may be the new,
    /// unimported entry (the store did not change).
    #[error("{cause}; and {} could not be put back as it was", path.display())]
    RollbackFailed {
        /// The file.
        path: PathBuf,
        /// What failed first.
        cause: String,
        /// Why the file could not be put back.
        source: io::Error,
    },
    /// A v1/v2 file: pi rewrites it as v3 before its first append; pisess does not write
    /// into it (its stored, migrated ids are not the file's).
    #[error("{} is a version {version} session file; appending needs a v3 file", path.display())]
    Legacy {
        /// The file.
        path: PathBuf,
        /// Its header's version.
        version: f64,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WriteError + '_ {
    move |source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Debug)]
enum State {
    /// Not written yet: the header and the entries so far.
    Pending { header: Value, entries: Vec<Value> },
    /// On disk and in the store.
    Flushed { key: SessionKey },
}

/// Writes one pi session, keeping its file and the store in step.
#[derive(Debug)]
pub struct SessionWriter<'s> {
    store: &'s Store,
    file: PathBuf,
    state: State,
    leaf: Option<String>,
    /// Where torn last lines were saved before their fragments were cut (see the module docs).
    saved_tails: Vec<PathBuf>,
}

/// The current time as pi writes it (`new Date().toISOString()`) and in milliseconds.
pub fn now() -> (String, i64) {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    (crate::export::ms_to_iso(ms), ms)
}

/// pi's rule for a caller-supplied session id (spec §1.4).
pub fn valid_session_id(id: &str) -> bool {
    let b = id.as_bytes();
    let ok = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-');
    !b.is_empty()
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(ok)
}

/// pi's folder for the new sessions of a working directory (spec §1.2,
/// [`pisess_formats::session_folder`]), as pi started in that folder finds it:
/// `$PI_CODING_AGENT_SESSION_DIR` or the `sessionDir` setting (the project's settings being
/// those of `cwd`), a relative one taken from `cwd` when `cwd` exists; else
/// `<agent dir>/sessions/--<cwd>--` with the agent dir `$PI_CODING_AGENT_DIR` or
/// `~/.pi/agent`. `cwd` is resolved as pi's `resolvePath` resolves it (`~` expanded, relative
/// to the current folder).
pub fn pi_session_dir(cwd: &str) -> Option<PathBuf> {
    // pi's `resolvePath`: `~` and `file://` read as `normalizePath` reads them, then resolved
    // against the current folder.
    let base = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".to_owned());
    let cwd = super::fork::resolve_pi_path(cwd, &base);
    let here = Path::new(&cwd);
    let dir = pisess_formats::session_folder::find_from(Some(here))?.for_cwd(&cwd);
    Some(if dir.is_relative() && here.is_dir() {
        here.join(dir)
    } else {
        dir
    })
}

impl<'s> SessionWriter<'s> {
    /// A new session in `dir` (pi's `newSession`): a v3 header with a new UUIDv7 id (or `id`),
    /// the time now, `cwd` and `parentSession`; the file
    /// `<dir>/<timestamp with ':' and '.' as '-'>_<id>.jsonl` is written once the first user
    /// or assistant message is appended.
    pub fn create(
        store: &'s Store,
        dir: &Path,
        cwd: &str,
        id: Option<&str>,
        parent_session: Option<&str>,
    ) -> Result<Self, WriteError> {
        let id = match id {
            Some(i) if !valid_session_id(i) => return Err(WriteError::BadSessionId(i.to_owned())),
            Some(i) => i.to_owned(),
            None => uuid::Uuid::now_v7().to_string(),
        };
        let (ts, _) = now();
        let header = new_header(&id, &ts, cwd, parent_session);
        let file = dir.join(pisess_formats::layout::session_file_name(&ts, &id));
        Ok(Self {
            store,
            file,
            state: State::Pending {
                header,
                entries: Vec::new(),
            },
            leaf: None,
            saved_tails: Vec::new(),
        })
    }

    /// A new session for working directory `cwd` (resolved against the current directory, as
    /// pi resolves it) in pi's folder for it ([`pi_session_dir`]).
    pub fn create_for_cwd(
        store: &'s Store,
        cwd: &str,
        id: Option<&str>,
        parent_session: Option<&str>,
    ) -> Result<Self, WriteError> {
        let base = std::env::current_dir()
            .map(|d| d.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".to_owned());
        let cwd = super::fork::resolve_pi_path(cwd, &base);
        let dir = pi_session_dir(&cwd).ok_or_else(|| WriteError::Io {
            path: PathBuf::from("~/.pi/agent/sessions"),
            source: io::Error::new(io::ErrorKind::NotFound, "HOME is not set"),
        })?;
        Self::create(store, &dir, &cwd, id, parent_session)
    }

    /// A fork or clone ([`BranchPlan`], which must hold a conversation: pi writes none
    /// otherwise) written to the new file `file` entry by entry, never held whole in memory
    /// (atomically, never over an existing file, as [`create_new_file`]), then imported. The
    /// leaf is the last entry written.
    pub fn create_branched(
        store: &'s Store,
        snap: &Snapshot,
        plan: &BranchPlan,
        file: &Path,
    ) -> Result<(Self, BranchWritten), WriteError> {
        let mut done = BranchWritten::default();
        create_new_file_with(
            file,
            |e| io_err(file)(e),
            |out| {
                let mut line = |v: &Value| -> Result<(), WriteError> {
                    out.write_all(pisess_formats::js::to_string(v).as_bytes())
                        .and_then(|()| out.write_all(b"\n"))
                        .map_err(io_err(file))
                };
                line(&plan.header)?;
                done = plan.for_each_entry(snap, line)?;
                Ok(())
            },
        )?;
        let mut w = Self {
            store,
            file: file.to_path_buf(),
            state: State::Pending {
                header: plan.header.clone(),
                entries: Vec::new(),
            },
            leaf: done.leaf_id.clone(),
            saved_tails: Vec::new(),
        };
        match w.import_or_undo(None) {
            Ok(key) => {
                w.state = State::Flushed { key };
                Ok((w, done))
            }
            Err(e) => {
                let _ = fs::remove_file(file);
                let _ = sync_dir(file);
                Err(e)
            }
        }
    }

    /// Opens an existing session file (imported into the store first); the leaf is pi's, the
    /// last entry of the file. A v1/v2 file is refused ([`WriteError::Legacy`]): migrate it
    /// first (`pisess migrate --in-place`).
    pub fn open(store: &'s Store, file: &Path) -> Result<Self, WriteError> {
        let report = store.import_file(file)?;
        if let Some(message) = report.error {
            return Err(WriteError::Unreadable {
                path: file.to_path_buf(),
                message,
            });
        }
        let key = report
            .session
            .ok_or_else(|| WriteError::NotASession(file.to_path_buf()))?;
        let snap = store.snapshot()?;
        let version = snap.session(key)?.map_or(3.0, |r| r.version);
        if version < 3.0 {
            return Err(WriteError::Legacy {
                path: file.to_path_buf(),
                version,
            });
        }
        let leaf = match snap.leaf(key)? {
            Some(e) => snap.entry_id(e)?,
            None => None,
        };
        Ok(Self {
            store,
            file: file.to_path_buf(),
            state: State::Flushed { key },
            leaf,
            saved_tails: Vec::new(),
        })
    }

    /// The session file (it may not exist yet).
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The session in the store, once the file is written.
    pub fn session_key(&self) -> Option<SessionKey> {
        match self.state {
            State::Flushed { key } => Some(key),
            State::Pending { .. } => None,
        }
    }

    /// Whether the file has been written.
    pub fn is_flushed(&self) -> bool {
        matches!(self.state, State::Flushed { .. })
    }

    /// The files into which torn last lines were saved before their fragments were cut from
    /// the session file (empty when nothing was torn); a caller should say so.
    pub fn saved_tails(&self) -> &[PathBuf] {
        &self.saved_tails
    }

    /// The current leaf (`None`: the next entry is a new root).
    pub fn leaf_id(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    // ---- reading ------------------------------------------------------------------------

    /// Whether the session holds an entry with this id.
    pub fn has_entry(&self, id: &str) -> Result<bool, WriteError> {
        match &self.state {
            State::Pending { entries, .. } => Ok(entries.iter().any(|e| id_of(e) == Some(id))),
            State::Flushed { key } => Ok(self.store.snapshot()?.entry_by_id(*key, id)?.is_some()),
        }
    }

    /// The entry with this id (the last one in file order, as pi's index keeps it).
    pub fn entry(&self, id: &str) -> Result<Option<Value>, WriteError> {
        match &self.state {
            State::Pending { entries, .. } => {
                Ok(entries.iter().rev().find(|e| id_of(e) == Some(id)).cloned())
            }
            State::Flushed { key } => {
                let snap = self.store.snapshot()?;
                match snap.entry_by_id(*key, id)? {
                    Some(e) => Ok(Some(stored_value(&snap, e)?)),
                    None => Ok(None),
                }
            }
        }
    }

    /// The path root → `id` (pi's `getBranch(id)`), empty for `None` or an unknown id.
    pub fn branch_entries(&self, id: Option<&str>) -> Result<Vec<Value>, WriteError> {
        let Some(id) = id else {
            return Ok(Vec::new());
        };
        match &self.state {
            State::Pending { entries, .. } => {
                let index = super::path::EntryIndex::new(entries);
                // A cycle cannot be built through this writer; treat one as an empty path.
                Ok(index
                    .branch(id)
                    .map(|p| p.into_iter().cloned().collect())
                    .unwrap_or_default())
            }
            State::Flushed { key } => {
                let snap = self.store.snapshot()?;
                let Some(e) = snap.entry_by_id(*key, id)? else {
                    return Ok(Vec::new());
                };
                snap.path_to_root(e)?
                    .into_iter()
                    .map(|k| stored_value(&snap, k))
                    .collect()
            }
        }
    }

    // ---- appending ----------------------------------------------------------------------

    fn base(&self, kind: &str) -> Result<(Map<String, Value>, String), WriteError> {
        let id = self.new_id()?;
        let mut o = Map::new();
        o.insert("type".into(), kind.into());
        o.insert("id".into(), id.clone().into());
        o.insert("parentId".into(), self.leaf_value());
        o.insert("timestamp".into(), now().0.into());
        Ok((o, id))
    }

    fn leaf_value(&self) -> Value {
        self.leaf.clone().map_or(Value::Null, Value::from)
    }

    fn new_id(&self) -> Result<String, WriteError> {
        match &self.state {
            State::Pending { entries, .. } => {
                Ok(generate_id(|c| entries.iter().any(|e| id_of(e) == Some(c))))
            }
            State::Flushed { key } => {
                let snap = self.store.snapshot()?;
                let mut err = None;
                let id = generate_id(|c| match snap.entry_by_id(*key, c) {
                    Ok(found) => found.is_some(),
                    Err(e) => {
                        err = Some(e);
                        true
                    }
                });
                match err {
                    Some(e) => Err(e.into()),
                    None => Ok(id),
                }
            }
        }
    }

    /// `appendMessage`: a `message` entry. Returns its id.
    pub fn append_message(&mut self, message: Value) -> Result<String, WriteError> {
        let (mut o, id) = self.base("message")?;
        o.insert("message".into(), message);
        self.commit(o, id)
    }

    /// `appendThinkingLevelChange`.
    pub fn append_thinking_level_change(&mut self, level: &str) -> Result<String, WriteError> {
        let (mut o, id) = self.base("thinking_level_change")?;
        o.insert("thinkingLevel".into(), level.into());
        self.commit(o, id)
    }

    /// `appendModelChange`.
    pub fn append_model_change(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<String, WriteError> {
        let (mut o, id) = self.base("model_change")?;
        o.insert("provider".into(), provider.into());
        o.insert("modelId".into(), model_id.into());
        self.commit(o, id)
    }

    /// `appendUsage` (`note` only when non-empty).
    pub fn append_usage(
        &mut self,
        kind: &str,
        provider: &str,
        model: &str,
        usage: Value,
        note: Option<&str>,
    ) -> Result<String, WriteError> {
        let (mut o, id) = self.base("usage")?;
        o.insert("kind".into(), kind.into());
        o.insert("provider".into(), provider.into());
        o.insert("model".into(), model.into());
        o.insert("usage".into(), usage);
        if let Some(n) = note.filter(|n| !n.is_empty()) {
            o.insert("note".into(), n.into());
        }
        self.commit(o, id)
    }

    /// `appendCompaction`: `firstKeptEntryId` defaults to the compaction's own id; the system
    /// message in force at the leaf is stored as `systemMessage` with the compaction's time.
    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: Option<&str>,
        tokens_before: Value,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<Value>,
    ) -> Result<String, WriteError> {
        let path = self.branch_entries(self.leaf.as_deref())?;
        let refs: Vec<&Value> = path.iter().collect();
        let system = current_system_message(project(&refs).messages());
        let (mut o, id) = self.base("compaction")?;
        let ms = o
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(crate::import::iso_to_ms)
            .unwrap_or(0);
        o.insert("summary".into(), summary.into());
        o.insert(
            "firstKeptEntryId".into(),
            first_kept_entry_id.unwrap_or(&id).into(),
        );
        o.insert("tokensBefore".into(), tokens_before);
        insert_some(&mut o, "details", details);
        insert_some(&mut o, "usage", usage);
        insert_some(&mut o, "fromHook", from_hook.map(Value::from));
        if let Some(Value::Object(mut s)) = system {
            s.insert("timestamp".into(), ms.into());
            o.insert("systemMessage".into(), Value::Object(s));
        }
        self.commit(o, id)
    }

    /// `appendCustomEntry` (key order `type, customType, data, id, parentId, timestamp`).
    pub fn append_custom_entry(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
    ) -> Result<String, WriteError> {
        let id = self.new_id()?;
        let mut o = Map::new();
        o.insert("type".into(), "custom".into());
        o.insert("customType".into(), custom_type.into());
        insert_some(&mut o, "data", data);
        o.insert("id".into(), id.clone().into());
        o.insert("parentId".into(), self.leaf_value());
        o.insert("timestamp".into(), now().0.into());
        self.commit(o, id)
    }

    /// `appendSessionInfo`: runs of CR/LF become one space, then the name is trimmed.
    pub fn append_session_info(&mut self, name: &str) -> Result<String, WriteError> {
        let mut clean = String::with_capacity(name.len());
        let mut in_break = false;
        for c in name.chars() {
            if c == '\r' || c == '\n' {
                if !in_break {
                    clean.push(' ');
                }
                in_break = true;
            } else {
                clean.push(c);
                in_break = false;
            }
        }
        let (mut o, id) = self.base("session_info")?;
        o.insert("name".into(), pisess_formats::js::trim(&clean).into());
        self.commit(o, id)
    }

    /// `appendCustomMessageEntry` (key order `type, customType, content, display, details, id,
    /// parentId, timestamp`).
    pub fn append_custom_message(
        &mut self,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
    ) -> Result<String, WriteError> {
        let id = self.new_id()?;
        let mut o = Map::new();
        o.insert("type".into(), "custom_message".into());
        o.insert("customType".into(), custom_type.into());
        o.insert("content".into(), content);
        o.insert("display".into(), display.into());
        insert_some(&mut o, "details", details);
        o.insert("id".into(), id.clone().into());
        o.insert("parentId".into(), self.leaf_value());
        o.insert("timestamp".into(), now().0.into());
        self.commit(o, id)
    }

    /// `appendContextEdit`, validated as pi validates: the replacement is `null` or has string
    /// or array `content`; the target exists, is on the active branch and is a
    /// `custom_message` or a `user`/`assistant`/`toolResult` message. A string replacement of
    /// an assistant or tool result becomes one text block.
    pub fn append_context_edit(
        &mut self,
        target_id: &str,
        replacement: Value,
    ) -> Result<String, WriteError> {
        let content_ok = match &replacement {
            Value::Null => true,
            Value::Object(o) => {
                matches!(o.get("content"), Some(Value::String(_) | Value::Array(_)))
            }
            _ => false,
        };
        if !content_ok {
            return Err(WriteError::BadReplacement);
        }
        let target = self
            .entry(target_id)?
            .ok_or_else(|| WriteError::NotFound(target_id.to_owned()))?;
        let on_branch = self
            .branch_entries(self.leaf.as_deref())?
            .iter()
            .any(|e| id_of(e) == Some(target_id));
        if !on_branch {
            return Err(WriteError::NotOnBranch(target_id.to_owned()));
        }
        let role = target
            .get("message")
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str);
        let role = match (type_of(&target), role) {
            (Some("custom_message"), _) => "custom",
            (Some("message"), Some(r @ ("user" | "assistant" | "toolResult"))) => r,
            _ => return Err(WriteError::NotEditable(target_id.to_owned())),
        };
        let replacement = match (&replacement, role) {
            (Value::Object(o), "assistant" | "toolResult") => match o.get("content") {
                Some(Value::String(t)) => {
                    serde_json::json!({"content": [{"type": "text", "text": t}]})
                }
                _ => replacement,
            },
            _ => replacement,
        };
        let (mut o, id) = self.base("context_edit")?;
        o.insert("targetId".into(), target_id.into());
        o.insert("replacement".into(), replacement);
        self.commit(o, id)
    }

    /// `appendLabelChange`: sets (`Some` non-empty) or clears a label; the target must exist.
    pub fn append_label_change(
        &mut self,
        target_id: &str,
        label: Option<&str>,
    ) -> Result<String, WriteError> {
        if !self.has_entry(target_id)? {
            return Err(WriteError::NotFound(target_id.to_owned()));
        }
        let (mut o, id) = self.base("label")?;
        o.insert("targetId".into(), target_id.into());
        if let Some(l) = label {
            o.insert("label".into(), l.into());
        }
        self.commit(o, id)
    }

    /// `branch(id)`: moves the leaf (nothing is written).
    pub fn branch(&mut self, id: &str) -> Result<(), WriteError> {
        if !self.has_entry(id)? {
            return Err(WriteError::NotFound(id.to_owned()));
        }
        self.leaf = Some(id.to_owned());
        Ok(())
    }

    /// `resetLeaf()`: the next entry becomes a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf = None;
    }

    /// `branchWithSummary`: moves the leaf to `branch_from` (`None`: a new root) and appends a
    /// `branch_summary` there whose `fromId` is the leaf before (or `"root"`).
    pub fn branch_with_summary(
        &mut self,
        branch_from: Option<&str>,
        summary: &str,
        details: Option<Value>,
        from_hook: Option<bool>,
        usage: Option<Value>,
    ) -> Result<String, WriteError> {
        if let Some(b) = branch_from
            && !self.has_entry(b)?
        {
            return Err(WriteError::NotFound(b.to_owned()));
        }
        let from_id = self.leaf.clone().unwrap_or_else(|| "root".to_owned());
        let id = self.new_id()?;
        let mut o = Map::new();
        o.insert("type".into(), "branch_summary".into());
        o.insert("id".into(), id.clone().into());
        o.insert(
            "parentId".into(),
            branch_from.map_or(Value::Null, Value::from),
        );
        o.insert("timestamp".into(), now().0.into());
        o.insert("fromId".into(), from_id.into());
        o.insert("summary".into(), summary.into());
        insert_some(&mut o, "details", details);
        insert_some(&mut o, "usage", usage);
        insert_some(&mut o, "fromHook", from_hook.map(Value::from));
        self.commit(o, id)
    }

    /// pi's tree navigation (`/tree`) to `target`: the new leaf is the target's parent when the
    /// target is a user message or a custom message (its text goes back to the editor), else
    /// the target. With a summary, a `branch_summary` (`fromHook: false`, as pi's own summary)
    /// is appended at the new leaf and its id is returned; without, only the leaf moves and the
    /// new leaf is returned.
    pub fn navigate(
        &mut self,
        target_id: &str,
        summary: Option<(&str, Option<Value>)>,
    ) -> Result<Option<String>, WriteError> {
        let target = self
            .entry(target_id)?
            .ok_or_else(|| WriteError::NotFound(target_id.to_owned()))?;
        let is_user = type_of(&target) == Some("message")
            && target
                .get("message")
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str)
                == Some("user");
        let new_leaf = if is_user || type_of(&target) == Some("custom_message") {
            target
                .get("parentId")
                .and_then(Value::as_str)
                .map(str::to_owned)
        } else {
            Some(target_id.to_owned())
        };
        match summary {
            Some((text, details)) => {
                // pi's `/tree` passes `fromExtension` (false for its own summary) as `fromHook`.
                let id = self.branch_with_summary(
                    new_leaf.as_deref(),
                    text,
                    details,
                    Some(false),
                    None,
                )?;
                Ok(Some(id))
            }
            None => {
                match &new_leaf {
                    None => self.reset_leaf(),
                    Some(l) => self.branch(l)?,
                }
                Ok(new_leaf)
            }
        }
    }

    /// Appends a built entry ([`Self::append`]) and returns its id.
    fn commit(&mut self, o: Map<String, Value>, id: String) -> Result<String, WriteError> {
        self.append(Value::Object(o), Some(id.clone()))?;
        Ok(id)
    }

    /// Adds an entry: to the pending session (written once it holds a conversation) or to the
    /// file and the store. On failure nothing changed.
    fn append(&mut self, entry: Value, id: Option<String>) -> Result<(), WriteError> {
        match &mut self.state {
            State::Pending { entries, .. } => {
                entries.push(entry);
                let before = self.leaf.clone();
                self.leaf = id;
                if let Err(e) = self.flush_if_conversation() {
                    if let State::Pending { entries, .. } = &mut self.state {
                        entries.pop();
                    }
                    self.leaf = before;
                    return Err(e);
                }
                Ok(())
            }
            State::Flushed { .. } => {
                let mut line = pisess_formats::js::to_string(&entry);
                line.push('\n');
                let undo = append_repairing(&self.file, line.as_bytes())?;
                let saved = undo.saved.clone();
                let key = self.import_or_undo(Some(undo))?;
                self.saved_tails.extend(saved);
                self.state = State::Flushed { key };
                self.leaf = id;
                Ok(())
            }
        }
    }

    fn flush_if_conversation(&mut self) -> Result<(), WriteError> {
        let State::Pending { header, entries } = &self.state else {
            return Ok(());
        };
        if !has_conversation(entries) {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for v in std::iter::once(header).chain(entries.iter()) {
            bytes.extend_from_slice(pisess_formats::js::to_string(v).as_bytes());
            bytes.push(b'\n');
        }
        create_new_file(&self.file, &bytes).map_err(io_err(&self.file))?;
        match self.import_or_undo(None) {
            Ok(key) => {
                self.state = State::Flushed { key };
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&self.file);
                let _ = sync_dir(&self.file);
                Err(e)
            }
        }
    }

    /// Imports the file; on failure undoes the append (when given) and reports.
    fn import_or_undo(&self, undo: Option<Undo>) -> Result<SessionKey, WriteError> {
        let result = match self.store.import_file(&self.file) {
            Ok(r) => match (r.error, r.session) {
                (None, Some(key)) => Ok(key),
                (Some(message), _) => Err(WriteError::Import {
                    path: self.file.clone(),
                    message,
                }),
                (None, None) => Err(WriteError::NotASession(self.file.clone())),
            },
            Err(e) => Err(e.into()),
        };
        // The store did not change (an import commits all or nothing): put the file back.
        if let (Err(e), Some(u)) = (&result, undo)
            && let Err(source) = u.restore()
        {
            return Err(WriteError::RollbackFailed {
                path: self.file.clone(),
                cause: e.to_string(),
                source,
            });
        }
        result
    }
}

/// Sets `k` when the value is given (pi's `undefined` fields are left out of the JSON).
fn insert_some(o: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        o.insert(k.into(), v);
    }
}

/// An entry's stored JSON, parsed (key order kept; [`Snapshot::entry_value`]: JSON that cannot
/// be read names the file, line and entry).
fn stored_value(snap: &Snapshot, e: crate::ids::EntryKey) -> Result<Value, WriteError> {
    Ok(snap.entry_value(e)?)
}

// ---- files -------------------------------------------------------------------------------

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Flushes the folder holding `path`.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// Writes `bytes` as a new file at `path`, atomically and only if no file has that name: a
/// temp file in the same folder, fsync, hard link to `path`, fsync of the folder. Creates the
/// folder if needed.
pub fn create_new_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_new_file_with(path, |e| e, |out| out.write_all(bytes))
}

/// [`create_new_file`] with the bytes written by `write` into the temp file (buffered), so a
/// large file is never held in memory; `io` turns this function's own I/O errors into `E`.
pub fn create_new_file_with<E>(
    path: &Path,
    io: impl Fn(io::Error) -> E,
    write: impl FnOnce(&mut dyn Write) -> Result<(), E>,
) -> Result<(), E> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    fs::create_dir_all(&dir).map_err(&io)?;
    let name = path.file_name().map_or_else(
        || "session".to_owned(),
        |n| n.to_string_lossy().into_owned(),
    );
    let (tmp, f) = loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let prefix = format!(".pisess-tmp-{}-{n}-", std::process::id());
        // Cut so that the temp name stays a legal one (255 bytes) for a long target name.
        let mut room = 255usize
            .saturating_sub(prefix.len() + ".tmp".len())
            .min(name.len());
        while !name.is_char_boundary(room) {
            room -= 1;
        }
        let tmp = dir.join(format!("{prefix}{}.tmp", &name[..room]));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(e)),
        }
    };
    let mut out = io::BufWriter::with_capacity(256 << 10, f);
    let written = write(&mut out).and_then(|()| {
        let f = out.into_inner().map_err(|e| io(e.into_error()))?;
        f.sync_all().map_err(&io)
    });
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    match fs::hard_link(&tmp, path) {
        Ok(()) => {
            let _ = fs::remove_file(&tmp);
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let _ = fs::remove_file(&tmp);
            return Err(io(e));
        }
        // A file system without hard links: rename, after checking the name is free (a race
        // with another writer of the same new name is then possible, as in any rename).
        Err(_) if !path.exists() => {
            if let Err(e) = fs::rename(&tmp, path) {
                let _ = fs::remove_file(&tmp);
                return Err(io(e));
            }
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(io(e));
        }
    }
    sync_dir(path).map_err(io)
}

/// How to put a file back as it was before [`append_repairing`].
///
/// Only ever shortens the file back to `at` when nothing was appended after our bytes (the file
/// still ends at `end`, or — after a write that failed part way, a full disk — ends with a first
/// part of `written`): a line another process (pi) appended in the meantime is never cut.
#[derive(Debug)]
struct Undo {
    path: PathBuf,
    /// Where the repaired tail (or the append) started.
    at: u64,
    /// Where our bytes ended.
    end: u64,
    /// What was written at `at` (the repaired tail, then the new line).
    written: Vec<u8>,
    /// The bytes that were there (the torn tail; empty when there was none).
    tail: Vec<u8>,
    /// Where the torn line was saved before the file was cut.
    saved: Option<PathBuf>,
}

impl Undo {
    fn restore(&self) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)?;
        let len = f.metadata()?.len();
        // A write that failed part way (a full disk) leaves a first part of ours.
        if len != self.end && !ends_with_part_of(&mut f, self.at, len, &self.written)? {
            return Err(io::Error::other(format!(
                "it changed after our write (now {len} bytes, we wrote up to {}); the new line \
                 stays at byte {}",
                self.end, self.at
            )));
        }
        f.set_len(self.at)?;
        // Appending (O_APPEND) writes at the end, which is `at` after the truncation.
        f.write_all(&self.tail)?;
        f.sync_all()?;
        // The torn line is back in the file: its saved copy is not needed.
        if let Some(p) = &self.saved {
            let _ = fs::remove_file(p);
        }
        Ok(())
    }
}

/// Whether `f`, `len` bytes long, holds from `at` to its end a first part of `bytes` (possibly
/// none, or all of it): what an appending write of `bytes` at `at` leaves when it stops part
/// way. Anything else after `at` (a line another process appended) is not ours.
fn ends_with_part_of(f: &mut File, at: u64, len: u64, bytes: &[u8]) -> io::Result<bool> {
    let Some(n) = len
        .checked_sub(at)
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n <= bytes.len())
    else {
        return Ok(false);
    };
    let mut got = vec![0u8; n];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut got)?;
    Ok(got == bytes[..n])
}

/// What to write in place of a last line that has no newline (spec: pi issue #8345).
///
/// `None`: nothing to repair. Otherwise the replacement of the tail: the tail plus a newline
/// when it is one complete record; else each complete record of the line on its own line
/// (possibly none), the torn fragment dropped.
pub fn repaired_tail(tail: &[u8]) -> Option<Vec<u8>> {
    if tail.is_empty() {
        return None;
    }
    let Ok(text) = std::str::from_utf8(tail) else {
        return Some(Vec::new());
    };
    let split = pisess_formats::line::split_values(text);
    if split.values.len() == 1 && split.fragments.is_empty() {
        let mut out = tail.to_vec();
        out.push(b'\n');
        return Some(out);
    }
    let mut out = Vec::new();
    for (a, b) in split.values {
        out.extend_from_slice(&tail[a..b]);
        out.push(b'\n');
    }
    Some(out)
}

/// Whether repairing `tail` ([`repaired_tail`]) leaves out any of its bytes (a torn fragment,
/// bytes that are not UTF-8), rather than only adding newlines between its records.
fn repair_drops_bytes(tail: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(tail) else {
        return true;
    };
    !pisess_formats::line::split_values(text)
        .fragments
        .is_empty()
}

/// The copy of a last line that this writer saved (`FILE.torn`, `FILE.torn.1`, …) and then cut
/// from `path`, when one of exactly `missing` bytes is there (the newest such): what a write
/// killed between its cut and its write leaves, the file then being `missing` bytes short of
/// the stored copy. Named in the "cut short" errors so the line can be put back.
pub fn saved_torn_line(path: &Path, missing: u64) -> Option<PathBuf> {
    let mut found = None;
    for n in 0..1000 {
        let candidate = torn_name(path, n);
        match fs::symlink_metadata(&candidate) {
            Ok(m) if m.is_file() && m.len() == missing => found = Some(candidate),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    found
}

/// The `n`-th name for a saved torn line of the file at `path`: `FILE.torn`, then
/// `FILE.torn.N`. A file name too long for that (names hold at most 255 bytes) is cut first,
/// at a character boundary, so that every session file can have its copy.
fn torn_name(path: &Path, n: usize) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let suffix = if n == 0 {
        ".torn".to_owned()
    } else {
        format!(".torn.{n}")
    };
    let name = path.file_name().map_or(&[][..], |f| f.as_bytes());
    let mut room = 255usize.saturating_sub(suffix.len()).min(name.len());
    // A name that is not UTF-8 is cut where it is: any byte but `/` and NUL is legal.
    if let Ok(text) = std::str::from_utf8(name) {
        while !text.is_char_boundary(room) {
            room -= 1;
        }
    }
    let mut cut = name.get(..room).unwrap_or(name).to_vec();
    cut.extend_from_slice(suffix.as_bytes());
    path.with_file_name(std::ffi::OsString::from_vec(cut))
}

/// Saves a torn last line beside the session file, under a name no file has yet
/// (`FILE.torn`, then `FILE.torn.1`, …), and returns that name.
fn save_torn_line(path: &Path, tail: &[u8]) -> io::Result<PathBuf> {
    for n in 0..1000 {
        let candidate = torn_name(path, n);
        match create_new_file(&candidate, tail) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(
        "1,000 saved torn lines are beside it already; move them away",
    ))
}

/// Appends `bytes` to the file at `path`, repairing a torn last line first; fsyncs. Returns how
/// to undo it. On failure the file is put back as it was.
///
/// pi appends to the same file without a lock (one `O_APPEND` write per line), so this never
/// truncates past what it has read: the file is opened for appending; a file that ends with a
/// newline, or with one complete record that only lacks its newline, gets one appending write
/// (atomic against other appenders; nothing is cut, so a kill at any moment loses nothing); any
/// other tail (glued records, a torn fragment) is first saved beside the file (`FILE.torn…`),
/// then cut, only after checking that the length is still the one the tail was read at
/// (retried when pi wrote in between), and rewritten — so a kill between the cut and the write
/// leaves the tail's bytes in that copy. The copy is removed again when the repair dropped none
/// of the tail's bytes.
fn append_repairing(path: &Path, bytes: &[u8]) -> Result<Undo, WriteError> {
    const ATTEMPTS: usize = 5;
    let err = io_err(path);
    let mut f = OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
        .map_err(io_err(path))?;
    for _ in 0..ATTEMPTS {
        let len = f.metadata().map_err(io_err(path))?.len();
        let at = last_line_start(&mut f, len).map_err(io_err(path))?;
        if at == len {
            // Nothing torn: one appending write, wherever the end is by then.
            return append_whole(&mut f, path, len, bytes.to_vec());
        }
        let mut tail = vec![0u8; usize::try_from(len - at).unwrap_or(0)];
        f.seek(SeekFrom::Start(at)).map_err(io_err(path))?;
        f.read_exact(&mut tail).map_err(io_err(path))?;
        if f.metadata().map_err(io_err(path))?.len() != len {
            continue; // the torn line is being written right now: look again
        }
        let mut out = repaired_tail(&tail).unwrap_or_else(|| tail.clone());
        if out.len() == tail.len() + 1 && out.starts_with(&tail) {
            // One complete record without its newline: the newline and the entry go after it.
            let mut whole = Vec::with_capacity(1 + bytes.len());
            whole.push(b'\n');
            whole.extend_from_slice(bytes);
            return append_whole(&mut f, path, len, whole);
        }
        // The file is cut below: keep the whole tail first.
        let drops = repair_drops_bytes(&tail);
        let saved = save_torn_line(path, &tail).map_err(io_err(path))?;
        out.extend_from_slice(bytes);
        let mut undo = Undo {
            path: path.to_path_buf(),
            at,
            end: at + out.len() as u64,
            written: out,
            tail,
            saved: Some(saved),
        };
        let written = (|| {
            f.set_len(at)?;
            f.write_all(&undo.written)?;
            f.sync_data()
        })();
        if let Err(e) = written {
            return Err(rolled_back(path, &undo, e));
        }
        if !drops && let Some(p) = undo.saved.take() {
            // Every byte of the tail is in the file again (only newlines were added).
            let _ = fs::remove_file(p);
        }
        return Ok(undo);
    }
    Err(err(io::Error::other(format!(
        "its last line has no newline and the file kept growing over {ATTEMPTS} attempts \
         (is pi writing it?); try again"
    ))))
}

/// One appending write of `bytes` to `f` (`path`, `len` bytes long when looked at), fsynced;
/// a write that fails part way is taken back (see [`cut_partial_write`]).
fn append_whole(f: &mut File, path: &Path, len: u64, bytes: Vec<u8>) -> Result<Undo, WriteError> {
    if let Err(e) = f.write_all(&bytes) {
        // A part may have been written (a full disk): take it back, but only when the file
        // ends with exactly that part, so a line pi appended is never cut.
        return Err(match cut_partial_write(f, len, &bytes) {
            Ok(()) => io_err(path)(e),
            Err(source) => WriteError::RollbackFailed {
                path: path.to_path_buf(),
                cause: format!("cannot write {}: {e}", path.display()),
                source,
            },
        });
    }
    let end = f.stream_position().map_err(io_err(path))?;
    let undo = Undo {
        path: path.to_path_buf(),
        at: end.saturating_sub(bytes.len() as u64),
        end,
        written: bytes,
        tail: Vec::new(),
        saved: None,
    };
    if let Err(e) = f.sync_data() {
        return Err(rolled_back(path, &undo, e));
    }
    Ok(undo)
}

/// After a failed appending write to `f`, which was `len` bytes long before it: cuts what the
/// write left behind when the file now ends with a first part of `bytes` right after `len`
/// (fsynced); leaves the file alone when nothing was written; errs, cutting nothing, when the
/// bytes after `len` are not ours (another process appended).
fn cut_partial_write(f: &mut File, len: u64, bytes: &[u8]) -> io::Result<()> {
    let now = f.metadata()?.len();
    if now <= len {
        return Ok(());
    }
    if !ends_with_part_of(f, len, now, bytes)? {
        return Err(io::Error::other(format!(
            "the file grew to {now} bytes during the failed write and its end is not what we \
             wrote; it was left at that length"
        )));
    }
    f.set_len(len)?;
    f.sync_all()
}

/// The error of a failed write, after putting the file back (or saying that failed too).
fn rolled_back(path: &Path, undo: &Undo, e: io::Error) -> WriteError {
    if let Err(source) = undo.restore() {
        return WriteError::RollbackFailed {
            path: path.to_path_buf(),
            cause: format!("cannot write {}: {e}", path.display()),
            source,
        };
    }
    io_err(path)(e)
}

/// The offset just after the file's last `\n` (0 when it has none), reading backwards in
/// blocks.
fn last_line_start(f: &mut File, len: u64) -> io::Result<u64> {
    const BLOCK: u64 = 64 * 1024;
    let mut end = len;
    let mut buf = vec![0u8; usize::try_from(BLOCK).unwrap_or(65536)];
    while end > 0 {
        let start = end.saturating_sub(BLOCK);
        let n = usize::try_from(end - start).unwrap_or(0);
        f.seek(SeekFrom::Start(start))?;
        f.read_exact(&mut buf[..n])?;
        if let Some(i) = memchr_last(&buf[..n]) {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn memchr_last(b: &[u8]) -> Option<usize> {
    b.iter().rposition(|&c| c == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_tails_are_repaired_as_issue_8345_asks() {
        assert_eq!(repaired_tail(b""), None);
        assert_eq!(repaired_tail(b"{\"a\":1}").unwrap(), b"{\"a\":1}\n");
        assert_eq!(repaired_tail(b"{\"type\":\"mess").unwrap(), b"");
        assert_eq!(
            repaired_tail(b"{\"a\":1}{\"b\":2}{\"c\":").unwrap(),
            b"{\"a\":1}\n{\"b\":2}\n"
        );
        assert_eq!(repaired_tail(b"\xff\xfe").unwrap(), b"");
        // An object nested in the torn record is not written out as a record of its own.
        let nested = br#"{"type":"custom","data":{"type":"message","id":"zz","parentId":"a"}"#;
        assert_eq!(repaired_tail(nested).unwrap(), b"");
        let mut glued = br#"{"a":1}"#.to_vec();
        glued.extend_from_slice(nested);
        assert_eq!(repaired_tail(&glued).unwrap(), b"{\"a\":1}\n");
    }

    #[test]
    fn an_append_and_its_undo_never_cut_a_line_appended_by_someone_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, b"{\"a\":1}\n").unwrap();
        let undo = append_repairing(&path, b"{\"ours\":2}\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n{\"ours\":2}\n");
        // pi appends after us: undoing ours would cut pi's line, so the undo refuses.
        let mut pi = OpenOptions::new().append(true).open(&path).unwrap();
        pi.write_all(b"{\"pi\":3}\n").unwrap();
        let refused = undo.restore().unwrap_err().to_string();
        assert!(
            refused.contains("it changed after our write") && refused.contains("stays at byte 8"),
            "{refused}"
        );
        assert_eq!(
            fs::read(&path).unwrap(),
            b"{\"a\":1}\n{\"ours\":2}\n{\"pi\":3}\n"
        );
        // Undone right away, the file is as it was; a torn tail is repaired (the torn line kept
        // beside the file meanwhile), then put back (and its copy removed).
        fs::write(&path, b"{\"a\":1}\n{\"torn\":").unwrap();
        let undo = append_repairing(&path, b"{\"ours\":2}\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n{\"ours\":2}\n");
        let saved = dir.path().join("s.jsonl.torn");
        assert_eq!(undo.saved.as_deref(), Some(saved.as_path()));
        assert_eq!(fs::read(&saved).unwrap(), b"{\"torn\":");
        undo.restore().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n{\"torn\":");
        assert!(!saved.exists());
        // Kept: each repair saves the torn line under a new name; a tail that is one complete
        // record only gets its newline, and nothing is saved.
        fs::write(&saved, b"older").unwrap();
        let undo = append_repairing(&path, b"{\"ours\":2}\n").unwrap();
        let second = dir.path().join("s.jsonl.torn.1");
        assert_eq!(undo.saved.as_deref(), Some(second.as_path()));
        assert_eq!(fs::read(&second).unwrap(), b"{\"torn\":");
        assert_eq!(fs::read(&saved).unwrap(), b"older");
        fs::write(&path, b"{\"a\":1}\n{\"b\":2}").unwrap();
        let undo = append_repairing(&path, b"{\"ours\":2}\n").unwrap();
        assert_eq!(undo.saved, None);
        assert_eq!(
            fs::read(&path).unwrap(),
            b"{\"a\":1}\n{\"b\":2}\n{\"ours\":2}\n"
        );
    }

    #[test]
    fn a_file_whose_name_is_255_bytes_gets_its_torn_line_saved() {
        let dir = tempfile::tempdir().unwrap();
        // 249 bytes of ASCII, a 2-byte character and 4 more: 255 bytes, so `NAME.torn` would
        // be 260; the cut to 250 bytes would split the `é`, so it keeps 249.
        let name = format!("{}éabcd", "a".repeat(249));
        assert_eq!(name.len(), 255);
        let path = dir.path().join(&name);
        fs::write(&path, b"{\"a\":1}\n{\"torn\":").unwrap();
        let undo = append_repairing(&path, b"{\"ours\":2}\n").unwrap();
        let saved = undo.saved.clone().unwrap();
        let saved_name = saved.file_name().unwrap().to_str().unwrap();
        assert!(saved_name.len() <= 255, "{saved_name}");
        assert_eq!(saved_name, format!("{}.torn", "a".repeat(249)));
        assert_eq!(fs::read(&saved).unwrap(), b"{\"torn\":");
        assert_eq!(saved_torn_line(&path, 8), Some(saved.clone()));
        // A second repair takes the next name, cut the same way.
        fs::write(&path, b"{\"a\":1}\n{\"torn\":").unwrap();
        let undo = append_repairing(&path, b"{\"ours\":2}\n").unwrap();
        let second = undo.saved.unwrap();
        let second_name = second.file_name().unwrap().to_str().unwrap();
        assert!(
            second_name.len() <= 255 && second_name.ends_with(".torn.1"),
            "{second_name}"
        );
        assert!(saved.exists());
    }

    #[test]
    fn a_tail_that_only_lacks_its_newline_is_appended_to_never_cut() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let before = b"{\"a\":1}\n{\"b\":2}".to_vec();
        fs::write(&path, &before).unwrap();
        let undo = append_repairing(&path, b"{\"ours\":3}\n").unwrap();
        // Everything was written after the old end (`at`): no byte of the file was cut, so a
        // kill at any moment leaves at least the file as it was.
        assert_eq!(undo.at, before.len() as u64);
        assert_eq!(undo.tail, b"");
        assert_eq!(undo.saved, None);
        assert_eq!(
            fs::read(&path).unwrap(),
            b"{\"a\":1}\n{\"b\":2}\n{\"ours\":3}\n"
        );
        undo.restore().unwrap();
        assert_eq!(fs::read(&path).unwrap(), before);
        // Glued records are rewritten one per line: the tail is kept beside the file while the
        // file is cut, and the copy removed once every byte of it is back.
        let glued = b"{\"a\":1}\n{\"b\":2}{\"c\":3}".to_vec();
        fs::write(&path, &glued).unwrap();
        let undo = append_repairing(&path, b"{\"ours\":4}\n").unwrap();
        assert_eq!(undo.saved, None);
        assert!(!dir.path().join("s.jsonl.torn").exists());
        assert_eq!(
            fs::read(&path).unwrap(),
            b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"ours\":4}\n"
        );
        undo.restore().unwrap();
        assert_eq!(fs::read(&path).unwrap(), glued);
    }

    #[test]
    fn a_write_that_failed_part_way_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let written = b"{\"c\":3}\n{\"ours\":4}\n".to_vec();
        let undo = Undo {
            path: path.clone(),
            at: 8,
            end: 8 + written.len() as u64,
            written: written.clone(),
            tail: b"{\"c\":3}{".to_vec(),
            saved: None,
        };
        // A full disk left the cut file with the first 12 bytes of ours.
        let mut now = b"{\"a\":1}\n".to_vec();
        now.extend_from_slice(&written[..12]);
        fs::write(&path, &now).unwrap();
        undo.restore().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"{\"a\":1}\n{\"c\":3}{");
        // Bytes that are not ours are never cut.
        let mut other = b"{\"a\":1}\n".to_vec();
        other.extend_from_slice(b"{\"pi\":5}\n");
        fs::write(&path, &other).unwrap();
        assert!(undo.restore().is_err());
        assert_eq!(fs::read(&path).unwrap(), other);
    }

    #[test]
    fn session_ids_follow_pi() {
        assert!(valid_session_id("abc"));
        assert!(valid_session_id("a.b-c_d"));
        assert!(!valid_session_id(""));
        assert!(!valid_session_id("-a"));
        assert!(!valid_session_id("a/b"));
    }
}
