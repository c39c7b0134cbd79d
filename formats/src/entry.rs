//! The typed, borrowed view of a session entry (spec §3) and of messages (spec §4).
//!
//! Each object is one flat struct holding every field any of its variants can carry, parsed in
//! a single pass with no copies of unescaped strings and no allocation for payloads pisess does
//! not interpret (tool arguments, `details`, `data`: kept as raw JSON text). The `type` (or
//! `role`) field says which fields are meaningful; [`EntryType`] and [`Role`] name them.
//!
//! Invariants:
//! - unknown entry types, roles, block types and unknown fields are accepted; unknown fields are
//!   not in the typed view, but the line's raw bytes are always kept beside it;
//! - [`Entry::write_json`] writes the known fields in the order pi's own object literals produce
//!   (spec §3, §4), so for a line pi wrote the output is the same bytes: the conformance tests
//!   check this over the whole generated corpus, which proves the view misses no field pi writes.

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};

use crate::js;
use crate::value::{Field, Raw, RawStr, Str};

/// The entry types pi defines (spec §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// `message`
    Message,
    /// `thinking_level_change`
    ThinkingLevelChange,
    /// `model_change`
    ModelChange,
    /// `usage` (1.x)
    Usage,
    /// `compaction`
    Compaction,
    /// `branch_summary`
    BranchSummary,
    /// `custom`
    Custom,
    /// `custom_message`
    CustomMessage,
    /// `context_edit` (1.x)
    ContextEdit,
    /// `label`
    Label,
    /// `session_info`
    SessionInfo,
    /// Any other `type` (or none).
    Unknown,
}

impl EntryType {
    /// The `type` strings pi writes (spec §3); others are read as [`Self::Unknown`].
    pub const NAMES: &[&str] = &[
        "message",
        "thinking_level_change",
        "model_change",
        "usage",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "context_edit",
        "label",
        "session_info",
    ];

    /// The type named by a `type` string.
    pub fn from_name(name: &str) -> Self {
        match name {
            "message" => Self::Message,
            "thinking_level_change" => Self::ThinkingLevelChange,
            "model_change" => Self::ModelChange,
            "usage" => Self::Usage,
            "compaction" => Self::Compaction,
            "branch_summary" => Self::BranchSummary,
            "custom" => Self::Custom,
            "custom_message" => Self::CustomMessage,
            "context_edit" => Self::ContextEdit,
            "label" => Self::Label,
            "session_info" => Self::SessionInfo,
            _ => Self::Unknown,
        }
    }
}

/// Message roles (spec §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `system` (1.x)
    System,
    /// `user`
    User,
    /// `assistant`
    Assistant,
    /// `toolResult`
    ToolResult,
    /// `bashExecution`
    BashExecution,
    /// `custom`
    Custom,
    /// `hookMessage` (v2 name of `custom`)
    HookMessage,
    /// `branchSummary` (context only)
    BranchSummary,
    /// `compactionSummary` (context only)
    CompactionSummary,
    /// Any other role.
    Unknown,
}

impl Role {
    /// The `role` strings of pi's messages (spec §4); others (pi tolerates them) are read as
    /// [`Self::Unknown`].
    pub const NAMES: &[&str] = &[
        "system",
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "hookMessage",
        "branchSummary",
        "compactionSummary",
    ];

    /// The role named by a `role` string.
    pub fn from_name(name: &str) -> Self {
        match name {
            "system" => Self::System,
            "user" => Self::User,
            "assistant" => Self::Assistant,
            "toolResult" => Self::ToolResult,
            "bashExecution" => Self::BashExecution,
            "custom" => Self::Custom,
            "hookMessage" => Self::HookMessage,
            "branchSummary" => Self::BranchSummary,
            "compactionSummary" => Self::CompactionSummary,
            _ => Self::Unknown,
        }
    }
}

/// One session entry: every field of every entry type (spec §3).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Entry<'a> {
    /// Any value but text reads as `null` (an entry of no known type, as in pi).
    #[serde(
        rename = "type",
        borrow,
        deserialize_with = "crate::value::text_or_null"
    )]
    pub type_name: Field<Str<'a>>,
    #[serde(borrow)]
    pub id: Field<Str<'a>>,
    /// Any value but text reads as `null`: pi finds no parent by it (a root), and still
    /// reads the rest of the entry.
    #[serde(borrow, deserialize_with = "crate::value::text_or_null")]
    pub parent_id: Field<Str<'a>>,
    /// Text as pi writes it; any other value (pi loads a number too) reads as `null`.
    #[serde(borrow, deserialize_with = "crate::value::text_or_null")]
    pub timestamp: Field<Str<'a>>,
    // message
    #[serde(borrow)]
    pub message: Field<Box<Message<'a>>>,
    // thinking_level_change
    #[serde(borrow)]
    pub thinking_level: Field<Str<'a>>,
    // model_change, usage
    #[serde(borrow)]
    pub provider: Field<Str<'a>>,
    #[serde(borrow)]
    pub model_id: Field<Str<'a>>,
    #[serde(borrow)]
    pub kind: Field<Str<'a>>,
    #[serde(borrow)]
    pub model: Field<Str<'a>>,
    #[serde(borrow)]
    pub usage: Field<Box<Usage<'a>>>,
    #[serde(borrow)]
    pub note: Field<Str<'a>>,
    // compaction, branch_summary
    #[serde(borrow)]
    pub summary: Field<RawStr<'a>>,
    #[serde(borrow)]
    pub first_kept_entry_id: Field<Str<'a>>,
    pub first_kept_entry_index: Field<f64>,
    pub tokens_before: Field<f64>,
    #[serde(borrow)]
    pub details: Field<Raw<'a>>,
    pub from_hook: Field<bool>,
    #[serde(borrow)]
    pub system_message: Field<Box<Message<'a>>>,
    #[serde(borrow)]
    pub from_id: Field<Str<'a>>,
    // custom, custom_message
    #[serde(borrow)]
    pub custom_type: Field<Str<'a>>,
    #[serde(borrow)]
    pub data: Field<Raw<'a>>,
    #[serde(borrow)]
    pub content: Field<Content<'a>>,
    pub display: Field<bool>,
    // context_edit, label
    #[serde(borrow)]
    pub target_id: Field<Str<'a>>,
    #[serde(borrow)]
    pub replacement: Field<Box<Replacement<'a>>>,
    /// Text; another value as pi's label map takes it ([`crate::value::label_text`]).
    #[serde(borrow, deserialize_with = "crate::value::label_text")]
    pub label: Field<Str<'a>>,
    // session_info
    #[serde(borrow)]
    pub name: Field<Str<'a>>,
    /// Set by [`Entry::parse_lenient`] when a field does not fit the typed view: then only
    /// `type`, `id`, `parentId` and `timestamp` are filled in, and this says what did not fit.
    #[serde(skip)]
    pub bad_field: Option<String>,
}

/// The tree fields of an entry, read when the whole typed view does not fit (pi keeps such an
/// entry in the tree: its loader only parses JSON).
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Skeleton<'a> {
    #[serde(
        rename = "type",
        borrow,
        deserialize_with = "crate::value::text_or_null"
    )]
    type_name: Field<Str<'a>>,
    #[serde(borrow)]
    id: Field<Str<'a>>,
    #[serde(borrow, deserialize_with = "crate::value::text_or_null")]
    parent_id: Field<Str<'a>>,
    #[serde(borrow, deserialize_with = "crate::value::text_or_null")]
    timestamp: Field<Str<'a>>,
}

/// `context_edit.replacement` (`null` in the entry means "omit the target").
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct Replacement<'a> {
    #[serde(borrow)]
    pub content: Field<Content<'a>>,
}

/// A message: every field of every role (spec §4).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Message<'a> {
    #[serde(borrow)]
    pub role: Field<Str<'a>>,
    #[serde(borrow)]
    pub content: Field<Content<'a>>,
    // assistant
    #[serde(borrow)]
    pub api: Field<Str<'a>>,
    #[serde(borrow)]
    pub provider: Field<Str<'a>>,
    #[serde(borrow)]
    pub model: Field<Str<'a>>,
    #[serde(borrow)]
    pub response_model: Field<Str<'a>>,
    #[serde(borrow)]
    pub response_id: Field<Str<'a>>,
    #[serde(borrow)]
    pub thinking_level: Field<Str<'a>>,
    #[serde(borrow)]
    pub provider_thinking_level: Field<Raw<'a>>,
    #[serde(borrow)]
    pub usage: Field<Box<Usage<'a>>>,
    #[serde(borrow)]
    pub stop_reason: Field<Str<'a>>,
    #[serde(borrow)]
    pub error_message: Field<Str<'a>>,
    #[serde(borrow)]
    pub raw_stop_reason: Field<Raw<'a>>,
    #[serde(borrow)]
    pub diagnostics: Field<Raw<'a>>,
    #[serde(borrow)]
    pub deferred: Field<Raw<'a>>,
    #[serde(borrow)]
    pub end_turn: Field<Raw<'a>>,
    // toolResult
    #[serde(borrow)]
    pub tool_call_id: Field<Str<'a>>,
    #[serde(borrow)]
    pub tool_name: Field<Str<'a>>,
    #[serde(borrow)]
    pub details: Field<Raw<'a>>,
    pub is_error: Field<bool>,
    #[serde(borrow)]
    pub nested_calls: Field<Box<NestedCalls<'a>>>,
    // bashExecution
    #[serde(borrow)]
    pub command: Field<Str<'a>>,
    #[serde(borrow)]
    pub output: Field<RawStr<'a>>,
    pub exit_code: Field<f64>,
    pub cancelled: Field<bool>,
    pub truncated: Field<bool>,
    #[serde(borrow)]
    pub full_output_path: Field<Str<'a>>,
    pub exclude_from_context: Field<bool>,
    // custom / hookMessage
    #[serde(borrow)]
    pub custom_type: Field<Str<'a>>,
    pub display: Field<bool>,
    // system
    #[serde(borrow)]
    pub sections: Field<Raw<'a>>,
    #[serde(borrow)]
    pub tools_added: Field<Vec<Tool<'a>>>,
    #[serde(borrow)]
    pub tools_removed: Field<Vec<ToolRef<'a>>>,
    // branchSummary / compactionSummary (context only)
    #[serde(borrow)]
    pub summary: Field<RawStr<'a>>,
    #[serde(borrow)]
    pub from_id: Field<Str<'a>>,
    pub tokens_before: Field<f64>,
    pub timestamp: Field<f64>,
}

/// `usage` of an assistant message, compaction, branch summary or usage entry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Usage<'a> {
    pub input: Field<f64>,
    pub output: Field<f64>,
    pub cache_read: Field<f64>,
    pub cache_write: Field<f64>,
    #[serde(rename = "cacheWrite1h")]
    pub cache_write_1h: Field<f64>,
    pub reasoning: Field<f64>,
    pub total_tokens: Field<f64>,
    #[serde(borrow)]
    pub cost: Field<Cost<'a>>,
}

/// `usage.cost`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Cost<'a> {
    pub input: Field<f64>,
    pub output: Field<f64>,
    pub cache_read: Field<f64>,
    pub cache_write: Field<f64>,
    pub total: Field<f64>,
    #[serde(skip)]
    pub _marker: std::marker::PhantomData<&'a ()>,
}

/// A tool definition in a system message's `toolsAdded`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Tool<'a> {
    #[serde(borrow)]
    pub name: Field<Str<'a>>,
    #[serde(borrow)]
    pub description: Field<Str<'a>>,
    #[serde(borrow)]
    pub parameters: Field<Raw<'a>>,
    #[serde(borrow)]
    pub constrained_sampling: Field<Raw<'a>>,
}

/// A tool named in `toolsRemoved`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct ToolRef<'a> {
    #[serde(borrow)]
    pub name: Field<Str<'a>>,
}

/// `toolResult.nestedCalls`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
#[allow(missing_docs)]
pub struct NestedCalls<'a> {
    #[serde(borrow)]
    pub calls: Field<Vec<NestedCall<'a>>>,
    pub complete: Field<bool>,
}

/// One nested call.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct NestedCall<'a> {
    #[serde(borrow)]
    pub id: Field<Str<'a>>,
    #[serde(borrow)]
    pub name: Field<Str<'a>>,
    #[serde(borrow)]
    pub arguments: Field<Raw<'a>>,
    pub arguments_bytes: Field<f64>,
    #[serde(borrow)]
    pub status: Field<Str<'a>>,
    pub duration_ms: Field<f64>,
    #[serde(borrow)]
    pub error: Field<Str<'a>>,
}

/// Message content: a string or a list of blocks.
#[derive(Debug, Clone)]
pub enum Content<'a> {
    /// `"content": "…"`
    Text(Str<'a>),
    /// `"content": [ … ]`
    Blocks(Vec<Block<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Content<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Content::Text(Str(std::borrow::Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Content::Text(Str(std::borrow::Cow::Owned(v.to_owned()))))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(2));
                while let Some(b) = seq.next_element::<Block<'de>>()? {
                    blocks.push(b);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        d.deserialize_any(V)
    }
}

/// A content block: every field of every block type (spec §4).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
#[allow(missing_docs)]
pub struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub type_name: Field<Str<'a>>,
    #[serde(borrow)]
    pub text: Field<RawStr<'a>>,
    #[serde(borrow)]
    pub text_signature: Field<Str<'a>>,
    #[serde(borrow)]
    pub data: Field<RawStr<'a>>,
    #[serde(borrow)]
    pub mime_type: Field<Str<'a>>,
    #[serde(borrow)]
    pub thinking: Field<RawStr<'a>>,
    #[serde(borrow)]
    pub thinking_signature: Field<Str<'a>>,
    pub redacted: Field<bool>,
    #[serde(borrow)]
    pub id: Field<Str<'a>>,
    #[serde(borrow)]
    pub name: Field<Str<'a>>,
    #[serde(borrow)]
    pub arguments: Field<Raw<'a>>,
    #[serde(borrow)]
    pub thought_signature: Field<Str<'a>>,
    #[serde(borrow)]
    pub namespace: Field<Str<'a>>,
}

impl<'a> Entry<'a> {
    /// Parses one line (or one recovered record) into the typed view.
    pub fn parse(json: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// [`Entry::parse`], or when a field does not fit the typed view (content of the wrong
    /// shape, a number where text belongs, …) the entry's `type`, `id`, `parentId` and
    /// `timestamp` alone, with [`Entry::bad_field`] saying what did not fit, so the entry keeps
    /// its place in the tree as it does in pi. An error only when even those do not parse.
    pub fn parse_lenient(json: &'a str) -> Result<Self, String> {
        match Self::parse(json) {
            Ok(e) => Ok(e),
            Err(e) => Self::lenient_after(json, &e),
        }
    }

    /// The second half of [`Entry::parse_lenient`], for a caller that has already parsed
    /// `json` strictly and got `err`: the entry's skeleton, or `err` in words.
    pub fn lenient_after(json: &'a str, err: &serde_json::Error) -> Result<Self, String> {
        let err = err.to_string();
        match serde_json::from_str::<Skeleton<'a>>(json) {
            Ok(k) => Ok(Self {
                type_name: k.type_name,
                id: k.id,
                parent_id: k.parent_id,
                timestamp: k.timestamp,
                bad_field: Some(err),
                ..Self::default()
            }),
            Err(_) => Err(err),
        }
    }

    /// The entry's type.
    pub fn entry_type(&self) -> EntryType {
        self.type_name
            .get()
            .map_or(EntryType::Unknown, |t| EntryType::from_name(t))
    }

    /// The entry's id, if it has a string id.
    pub fn id(&self) -> Option<&str> {
        self.id.get().map(Str::as_str)
    }

    /// The parent's id; `None` for a root (`null`) or a missing field.
    pub fn parent_id(&self) -> Option<&str> {
        self.parent_id.get().map(Str::as_str)
    }

    /// The message's role, for `message` entries.
    pub fn role(&self) -> Option<Role> {
        self.message.get().map(|m| m.role())
    }

    /// Writes the entry as pi writes it: compact JSON, pi's key order (spec §3).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        let t = self.entry_type();
        if matches!(t, EntryType::Custom | EntryType::CustomMessage) {
            // pi's literal for these two puts the payload before the tree fields.
            w.field("type", &self.type_name);
            w.field("customType", &self.custom_type);
            if t == EntryType::Custom {
                w.field("data", &self.data);
            } else {
                w.field("content", &self.content);
                w.field("display", &self.display);
                w.field("details", &self.details);
            }
            w.field("id", &self.id);
            w.field("parentId", &self.parent_id);
            w.field("timestamp", &self.timestamp);
            w.finish();
            return;
        }
        w.field("type", &self.type_name);
        w.field("id", &self.id);
        w.field("parentId", &self.parent_id);
        w.field("timestamp", &self.timestamp);
        match t {
            EntryType::Message => w.field("message", &self.message),
            EntryType::ThinkingLevelChange => w.field("thinkingLevel", &self.thinking_level),
            EntryType::ModelChange => {
                w.field("provider", &self.provider);
                w.field("modelId", &self.model_id);
            }
            EntryType::Usage => {
                w.field("kind", &self.kind);
                w.field("provider", &self.provider);
                w.field("model", &self.model);
                w.field("usage", &self.usage);
                w.field("note", &self.note);
            }
            EntryType::Compaction => {
                w.field("summary", &self.summary);
                w.field("firstKeptEntryId", &self.first_kept_entry_id);
                w.field("firstKeptEntryIndex", &self.first_kept_entry_index);
                w.field("tokensBefore", &self.tokens_before);
                w.field("details", &self.details);
                w.field("usage", &self.usage);
                w.field("fromHook", &self.from_hook);
                w.field("systemMessage", &self.system_message);
            }
            EntryType::BranchSummary => {
                w.field("fromId", &self.from_id);
                w.field("summary", &self.summary);
                w.field("details", &self.details);
                w.field("usage", &self.usage);
                w.field("fromHook", &self.from_hook);
            }
            EntryType::ContextEdit => {
                w.field("targetId", &self.target_id);
                w.field("replacement", &self.replacement);
            }
            EntryType::Label => {
                w.field("targetId", &self.target_id);
                w.field("label", &self.label);
            }
            EntryType::SessionInfo => w.field("name", &self.name),
            EntryType::Custom | EntryType::CustomMessage | EntryType::Unknown => {}
        }
        w.finish();
    }

    /// [`Entry::write_json`] into a new `String`.
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(256);
        self.write_json(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Message<'_> {
    /// The message's role.
    pub fn role(&self) -> Role {
        self.role
            .get()
            .map_or(Role::Unknown, |r| Role::from_name(r))
    }

    /// The text blocks (or string content) of the message, in order, decoded.
    pub fn texts(&self) -> impl Iterator<Item = std::borrow::Cow<'_, str>> {
        let (single, blocks): (Option<&str>, &[Block<'_>]) = match self.content.get() {
            Some(Content::Text(s)) => (Some(s.as_str()), &[]),
            Some(Content::Blocks(b)) => (None, b.as_slice()),
            None => (None, &[]),
        };
        single
            .map(std::borrow::Cow::Borrowed)
            .into_iter()
            .chain(blocks.iter().filter_map(|b| {
                (b.type_name.get().map(Str::as_str) == Some("text"))
                    .then(|| b.text.get().map(RawStr::decode))
                    .flatten()
            }))
    }
}

/// Types the pi-order writer can emit.
pub trait WriteJs {
    /// Appends the value as `JSON.stringify` writes it.
    fn write_js(&self, out: &mut Vec<u8>);
}

impl WriteJs for Str<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        js::write_str(out, self);
    }
}
impl WriteJs for f64 {
    fn write_js(&self, out: &mut Vec<u8>) {
        js::write_f64(out, *self);
    }
}
impl WriteJs for bool {
    fn write_js(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if *self { b"true" } else { b"false" });
    }
}
impl WriteJs for RawStr<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        self.write_js_string(out);
    }
}
impl<T: WriteJs> WriteJs for Box<T> {
    fn write_js(&self, out: &mut Vec<u8>) {
        (**self).write_js(out);
    }
}
impl WriteJs for Raw<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.get().as_bytes());
    }
}
impl<T: WriteJs> WriteJs for Vec<T> {
    fn write_js(&self, out: &mut Vec<u8>) {
        out.push(b'[');
        for (i, v) in self.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            v.write_js(out);
        }
        out.push(b']');
    }
}
impl WriteJs for Content<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        match self {
            Content::Text(s) => s.write_js(out),
            Content::Blocks(b) => b.write_js(out),
        }
    }
}
impl WriteJs for Block<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("type", &self.type_name);
        match self.type_name.get().map(Str::as_str) {
            Some("text") => {
                w.field("text", &self.text);
                w.field("textSignature", &self.text_signature);
            }
            Some("image") => {
                w.field("data", &self.data);
                w.field("mimeType", &self.mime_type);
            }
            Some("thinking") => {
                w.field("thinking", &self.thinking);
                w.field("thinkingSignature", &self.thinking_signature);
                w.field("redacted", &self.redacted);
            }
            Some("toolCall") => {
                w.field("id", &self.id);
                w.field("name", &self.name);
                w.field("arguments", &self.arguments);
                w.field("thoughtSignature", &self.thought_signature);
                w.field("namespace", &self.namespace);
            }
            _ => {
                w.field("text", &self.text);
                w.field("textSignature", &self.text_signature);
                w.field("data", &self.data);
                w.field("mimeType", &self.mime_type);
                w.field("thinking", &self.thinking);
                w.field("thinkingSignature", &self.thinking_signature);
                w.field("redacted", &self.redacted);
                w.field("id", &self.id);
                w.field("name", &self.name);
                w.field("arguments", &self.arguments);
                w.field("thoughtSignature", &self.thought_signature);
                w.field("namespace", &self.namespace);
            }
        }
        w.finish();
    }
}
impl WriteJs for Usage<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("input", &self.input);
        w.field("output", &self.output);
        w.field("cacheRead", &self.cache_read);
        w.field("cacheWrite", &self.cache_write);
        w.field("cacheWrite1h", &self.cache_write_1h);
        w.field("reasoning", &self.reasoning);
        w.field("totalTokens", &self.total_tokens);
        w.field("cost", &self.cost);
        w.finish();
    }
}
impl WriteJs for Cost<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("input", &self.input);
        w.field("output", &self.output);
        w.field("cacheRead", &self.cache_read);
        w.field("cacheWrite", &self.cache_write);
        w.field("total", &self.total);
        w.finish();
    }
}
impl WriteJs for Tool<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("name", &self.name);
        w.field("description", &self.description);
        w.field("parameters", &self.parameters);
        w.field("constrainedSampling", &self.constrained_sampling);
        w.finish();
    }
}
impl WriteJs for ToolRef<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("name", &self.name);
        w.finish();
    }
}
impl WriteJs for NestedCalls<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("calls", &self.calls);
        w.field("complete", &self.complete);
        w.finish();
    }
}
impl WriteJs for NestedCall<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("id", &self.id);
        w.field("name", &self.name);
        w.field("arguments", &self.arguments);
        w.field("argumentsBytes", &self.arguments_bytes);
        w.field("status", &self.status);
        w.field("durationMs", &self.duration_ms);
        w.field("error", &self.error);
        w.finish();
    }
}
impl WriteJs for Replacement<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("content", &self.content);
        w.finish();
    }
}
impl WriteJs for Message<'_> {
    fn write_js(&self, out: &mut Vec<u8>) {
        let mut w = ObjWriter::new(out);
        w.field("role", &self.role);
        match self.role() {
            Role::User => w.field("content", &self.content),
            Role::Assistant => {
                w.field("content", &self.content);
                w.field("api", &self.api);
                w.field("provider", &self.provider);
                w.field("model", &self.model);
                w.field("responseModel", &self.response_model);
                w.field("responseId", &self.response_id);
                w.field("thinkingLevel", &self.thinking_level);
                w.field("providerThinkingLevel", &self.provider_thinking_level);
                w.field("diagnostics", &self.diagnostics);
                w.field("usage", &self.usage);
                w.field("stopReason", &self.stop_reason);
                w.field("rawStopReason", &self.raw_stop_reason);
                w.field("endTurn", &self.end_turn);
                w.field("deferred", &self.deferred);
                w.field("errorMessage", &self.error_message);
            }
            Role::ToolResult => {
                w.field("toolCallId", &self.tool_call_id);
                w.field("toolName", &self.tool_name);
                w.field("content", &self.content);
                w.field("details", &self.details);
                w.field("isError", &self.is_error);
                w.field("usage", &self.usage);
                w.field("nestedCalls", &self.nested_calls);
            }
            Role::BashExecution => {
                w.field("command", &self.command);
                w.field("output", &self.output);
                w.field("exitCode", &self.exit_code);
                w.field("cancelled", &self.cancelled);
                w.field("truncated", &self.truncated);
                w.field("fullOutputPath", &self.full_output_path);
                w.field("excludeFromContext", &self.exclude_from_context);
            }
            Role::System => {
                w.field("content", &self.content);
                w.field("sections", &self.sections);
                w.field("toolsAdded", &self.tools_added);
                w.field("toolsRemoved", &self.tools_removed);
            }
            Role::Custom | Role::HookMessage => {
                w.field("customType", &self.custom_type);
                w.field("content", &self.content);
                w.field("display", &self.display);
                w.field("details", &self.details);
            }
            Role::BranchSummary => {
                w.field("summary", &self.summary);
                w.field("fromId", &self.from_id);
            }
            Role::CompactionSummary => {
                w.field("summary", &self.summary);
                w.field("tokensBefore", &self.tokens_before);
            }
            Role::Unknown => {
                w.field("content", &self.content);
            }
        }
        w.field("timestamp", &self.timestamp);
        w.finish();
    }
}

/// Writes `{"k":v,…}` skipping missing fields.
struct ObjWriter<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> ObjWriter<'o> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Self { out, first: true }
    }
    fn field<T: WriteJs>(&mut self, key: &str, v: &Field<T>) {
        if !v.is_present() {
            return;
        }
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        js::write_str(self.out, key);
        self.out.push(b':');
        match v {
            Field::Value(v) => v.write_js(self.out),
            _ => self.out.extend_from_slice(b"null"),
        }
    }
    fn finish(self) {
        self.out.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_known_types_and_roles() {
        for n in EntryType::NAMES {
            assert_ne!(EntryType::from_name(n), EntryType::Unknown, "{n}");
        }
        for n in Role::NAMES {
            assert_ne!(Role::from_name(n), Role::Unknown, "{n}");
        }
    }

    #[test]
    fn message_entry_round_trips() {
        let line = r#"{"type":"message","id":"a1b2c3d4","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hm","thinkingSignature":"sig"},{"type":"text","text":"Hi \"there\"\n"},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"src/a.rs","limit":10}}],"api":"anthropic-messages","provider":"anthropic","model":"claude","usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"input":0.00003,"output":0.000075,"cacheRead":0,"cacheWrite":0,"total":0.000105}},"stopReason":"toolUse","timestamp":1767225600000}}"#;
        let e = Entry::parse(line).unwrap();
        assert_eq!(e.entry_type(), EntryType::Message);
        assert_eq!(e.role(), Some(Role::Assistant));
        assert_eq!(e.parent_id.get().map(Str::as_str), None);
        assert_eq!(e.parent_id, Field::Null);
        assert_eq!(e.to_json(), line);
    }

    #[test]
    fn custom_entries_use_pi_key_order() {
        let line = r#"{"type":"custom","customType":"x","data":{"b":1,"a":[2]},"id":"i","parentId":"p","timestamp":"t"}"#;
        assert_eq!(Entry::parse(line).unwrap().to_json(), line);
    }

    #[test]
    fn wrong_field_types_are_errors() {
        let err = Entry::parse(r#"{"type":"message","id":5}"#).unwrap_err();
        assert!(err.to_string().contains("expected a string"), "{err}");
    }

    #[test]
    fn labels_of_other_kinds_read_as_pis_label_map_takes_them() {
        let label = |v: &str| {
            let line = format!(r#"{{"type":"label","id":"l","targetId":"t","label":{v}}}"#);
            let e = Entry::parse(&line).unwrap();
            e.label.get().map(|l| l.as_str().to_owned())
        };
        for (v, want) in [
            ("\"a\"", Some("a")),
            ("0", None),
            ("-0.0", None),
            ("false", None),
            ("null", None),
            ("5", Some("5")),
            ("1.5", Some("1.5")),
            ("1e21", Some("1e+21")),
            ("12345678901234567890", Some("12345678901234567000")),
            ("true", Some("true")),
            ("[1,\"b\",null]", Some("1,b,")),
            ("{\"a\":1}", Some("[object Object]")),
        ] {
            assert_eq!(label(v).as_deref(), want, "{v}");
        }
    }

    #[test]
    fn a_bad_field_keeps_the_tree_fields() {
        // pi keeps this entry in the tree (its loader only parses JSON); the typed view does
        // not fit the content, so the lenient parse keeps type, id, parentId and timestamp.
        let line = r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"user","content":[[1]]}}"#;
        assert!(Entry::parse(line).is_err());
        let e = Entry::parse_lenient(line).unwrap();
        assert_eq!((e.id(), e.parent_id()), (Some("b"), Some("a")));
        assert_eq!(e.entry_type(), EntryType::Message);
        assert!(e.message.get().is_none());
        assert!(
            e.bad_field
                .as_deref()
                .unwrap()
                .contains("expected a string")
        );
        // A wrong kind of id is still an error.
        assert!(Entry::parse_lenient(r#"{"type":"message","id":5}"#).is_err());
        assert!(
            Entry::parse_lenient(line.replace("[[1]]", "\"x\"").as_str())
                .unwrap()
                .bad_field
                .is_none()
        );
    }

    #[test]
    fn a_timestamp_that_is_not_text_costs_the_entry_nothing_else() {
        // pi loads `"timestamp": 1769940003000` (and `new Date(n)` is a date); the typed view
        // keeps the whole entry and reads the timestamp as null.
        for ts in ["1769940003000", "true", "[1]", "{\"a\":[1]}", "null"] {
            let line = format!(
                r#"{{"type":"message","id":"b","parentId":"a","timestamp":{ts},"message":{{"role":"user","content":"hi","timestamp":1}}}}"#
            );
            let e = Entry::parse(&line).unwrap();
            assert_eq!((e.id(), e.parent_id()), (Some("b"), Some("a")), "{ts}");
            assert!(e.message.get().is_some(), "{ts}");
            assert_eq!(e.timestamp, Field::Null, "{ts}");
        }
        let e = Entry::parse(r#"{"type":"x","id":"b","timestamp":"t\u0041"}"#).unwrap();
        assert_eq!(e.timestamp.get().map(Str::as_str), Some("tA"));
        let e = Entry::parse(r#"{"type":"x","id":"b"}"#).unwrap();
        assert_eq!(e.timestamp, Field::Missing);
    }

    #[test]
    fn unknown_types_and_fields_are_tolerated() {
        let e =
            Entry::parse(r#"{"type":"future","id":"x","parentId":"y","timestamp":"t","zzz":[1]}"#)
                .unwrap();
        assert_eq!(e.entry_type(), EntryType::Unknown);
        assert_eq!(e.id(), Some("x"));
    }
}
