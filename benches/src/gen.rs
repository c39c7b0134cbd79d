//! A deterministic generator of realistic v3 pi session files of any size.
//!
//! [`generate`] writes a session header followed by message entries the way pi writes them
//! (compact JSON, pi's key order): user prompts, assistant turns with thinking, text and tool
//! calls (`read`, `edit`, `write`, `bash` with file paths), one `toolResult` per call, some long
//! tool outputs (whole files, long build logs), and now and then a branch (a `branch_summary`
//! back to an earlier turn, often followed by a `label`).
//!
//! With [`GenOptions::compact_window`] it also compacts as pi's auto-compaction would for a
//! model with that context window (pi's default settings: reserve 16384 tokens, keep 20000):
//! when the estimated context passes the window minus the reserve at the end of a turn, a
//! `compaction` entry follows (pi's key order; a summary in pi's section layout with the file
//! lists; `firstKeptEntryId` at pi's cut point over the entries since the previous compaction;
//! `tokensBefore`; `details` with `readFiles`/`modifiedFiles` carried over from the previous
//! compaction), branches go back only to turns after the latest compaction, and each assistant
//! `usage` adds up to the context it was sent (so pi's usage-based estimate agrees).
//!
//! Invariants:
//! - the output depends only on `(target_bytes, seed, options)`: same arguments, same bytes;
//!   without compaction it is the same bytes as before compaction existed;
//! - every line is one JSON object that pisess's typed view parses and writes back byte for byte
//!   (so the key order and number format are pi's), ids are unique and every `parentId` names an
//!   earlier entry;
//! - writing stops at the first line end at or after `target_bytes`, and the file ends with `\n`;
//! - memory is bounded by one line (at most a few hundred KiB) plus the output buffer, whatever
//!   the size asked for (with compaction, plus a few words per entry of the current context,
//!   which the window bounds); text is copied from small pre-escaped pools, so it runs at
//!   several hundred MB/s;
//! - with compaction, token estimates are pi's `ceil(chars / 4)` per message with chars in
//!   UTF-16 code units, so the cut point is pi's for the same entries (a test checks it against
//!   the engine's `prepare_compaction`).

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Appends the base64 text of `bytes` (a multiple of 3) pseudo-random bytes: four alphabet
/// characters per three bytes, no padding.
fn push_base64_noise(rng: &mut Rng, out: &mut Vec<u8>, bytes: u64) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut left = bytes / 3 * 4;
    while left > 0 {
        let mut r = rng.next();
        for _ in 0..10.min(left) {
            out.push(ALPHABET[(r & 63) as usize]);
            r >>= 6;
        }
        left -= 10.min(left);
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenStats {
    /// Bytes written.
    pub bytes: u64,
    /// Lines written (the header included).
    pub lines: u64,
    /// Tool calls (each has a `toolResult` unless the file ended first).
    pub tool_calls: u64,
    /// Tool outputs longer than 16 KiB.
    pub long_outputs: u64,
    /// Branches (`branch_summary` entries).
    pub branches: u64,
    /// `compaction` entries.
    pub compactions: u64,
    /// `image` blocks (see [`GenOptions::image_bytes`]).
    pub images: u64,
}

/// How to generate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenOptions {
    /// Compact as pi would for a model with this context window (tokens); `None`: never.
    pub compact_window: Option<u64>,
    /// Attach to every user message a base64 `image` block of this many (pseudo-random, so
    /// incompressible) bytes, rounded up to a multiple of 3 (pi keeps pasted screenshots
    /// inline this way); `None`: no images. Not counted by the compaction tracker, so not
    /// combined with `compact_window`.
    pub image_bytes: Option<u64>,
}

/// Writes a session of about `target_bytes` bytes (at least one line) to `out`.
pub fn generate<W: Write>(out: W, target_bytes: u64, seed: u64) -> io::Result<GenStats> {
    generate_with(out, target_bytes, seed, GenOptions::default())
}

/// [`generate`] with options.
pub fn generate_with<W: Write>(
    out: W,
    target_bytes: u64,
    seed: u64,
    options: GenOptions,
) -> io::Result<GenStats> {
    let mut g = Gen::new(out, seed);
    g.compact = options.compact_window.map(Compactor::new);
    g.image_bytes = options.image_bytes.map_or(0, |b| b.div_ceil(3) * 3);
    g.run(target_bytes)?;
    g.out.flush()?;
    Ok(g.stats)
}

/// [`generate`] into a new file at `path` (replaced if it exists).
pub fn generate_file(path: &Path, target_bytes: u64, seed: u64) -> io::Result<GenStats> {
    generate_file_with(path, target_bytes, seed, GenOptions::default())
}

/// Writes a linear chain of `n` user/assistant messages (ids `00000001`…, each the parent of
/// the next) plus a sibling of the last one (id `n + 1`, child of `n - 1`): the deepest tree a
/// session of that many entries can have, for depth-scaling benchmarks. Returns bytes written.
pub fn generate_chain<W: Write>(mut out: W, n: u64) -> io::Result<u64> {
    let mut written = 0u64;
    let mut line = format!(
        r#"{{"type":"session","version":3,"id":"019daa1e-3680-74fc-94de-{n:012x}","timestamp":"2026-04-20T09:00:00.000Z","cwd":"/tmp/chain"}}"#
    );
    line.push('\n');
    out.write_all(line.as_bytes())?;
    written += line.len() as u64;
    for i in 0..n {
        line.clear();
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        let parent = if i == 0 {
            "null".to_owned()
        } else {
            format!("\"{i:08x}\"")
        };
        line.push_str(&format!(
            r#"{{"type":"message","id":"{:08x}","parentId":{parent},"timestamp":"2026-04-20T09:00:00.000Z","message":{{"role":"{role}","content":[{{"type":"text","text":"entry {i}"}}],"timestamp":1776675600000}}}}"#,
            i + 1
        ));
        line.push('\n');
        out.write_all(line.as_bytes())?;
        written += line.len() as u64;
    }
    line = format!(
        r#"{{"type":"message","id":"{:08x}","parentId":"{:08x}","timestamp":"2026-04-20T09:00:01.000Z","message":{{"role":"assistant","content":[{{"type":"text","text":"sibling"}}],"timestamp":1776675601000}}}}"#,
        n + 1,
        n.saturating_sub(1)
    );
    line.push('\n');
    out.write_all(line.as_bytes())?;
    written += line.len() as u64;
    out.flush()?;
    Ok(written)
}

/// Writes `count` sessions of about `bytes` each into the folder `dir` (created if needed),
/// named `NNNNN.jsonl`, session `k` with seed `first_seed + k`: a folder like pi's for one
/// working directory, for listing benchmarks. Returns the bytes written in all.
pub fn generate_folder(dir: &Path, count: u64, bytes: u64, first_seed: u64) -> io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let mut total = 0u64;
    for k in 0..count {
        let path = dir.join(format!("{k:05}.jsonl"));
        total += generate_file(&path, bytes, first_seed + k)?.bytes;
    }
    Ok(total)
}

/// [`generate_with`] into a new file at `path` (replaced if it exists).
pub fn generate_file_with(
    path: &Path,
    target_bytes: u64,
    seed: u64,
    options: GenOptions,
) -> io::Result<GenStats> {
    let file = File::create(path)?;
    generate_with(
        BufWriter::with_capacity(1 << 20, file),
        target_bytes,
        seed,
        options,
    )
}

/// wyrand: small, fast, good enough for synthetic text.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = u128::from(self.0) * u128::from(self.0 ^ 0xe703_7ed1_a0b4_28db);
        ((t >> 64) as u64) ^ (t as u64)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `num / den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "the",
    "the",
    "the",
    "config",
    "router",
    "pool",
    "borrow",
    "lifetime",
    "async",
    "retry",
    "fixture",
    "migration",
    "handler",
    "endpoints",
    "timeout",
    "serde",
    "trait",
    "clone",
    "orders",
    "users",
    "request",
    "value",
    "pagination",
    "middleware",
    "compile",
    "check",
    "error",
    "refactor",
    "tests",
    "should",
    "before",
    "because",
    "with",
    "from",
    "when",
    "here",
    "and",
    "is",
    "it",
    "to",
    "to",
    "in",
    "on",
    "we",
    "so",
    "an",
    "list",
    "task",
    "log",
    "env",
    "ci",
    "id",
    "short",
    "block",
    "calls",
    "returns",
    "loads",
    "creates",
    "moves",
    "matters",
    "exist",
    "share",
    "bound",
    "checker",
    "complains",
    "unwrap",
    "reference",
    "backoff",
    "exhausted",
    "spawning",
    "versions",
    "fields",
    "rename",
    "add",
    "fail",
    "mutable",
    "camelCase",
    "issue",
];

const UNICODE: &[&str] = &[
    "naïve café",
    "中文注释",
    "😀 done",
    "→ résumé",
    "日本語のテスト",
    "Ωmega ∑",
    "emoji 🚀✨",
];

const PATHS: &[&str] = &[
    "src/main.rs",
    "src/lib.rs",
    "src/config.rs",
    "src/error.rs",
    "src/telemetry.rs",
    "src/db/mod.rs",
    "src/db/pool.rs",
    "src/http/router.rs",
    "src/http/handlers/users.rs",
    "src/http/handlers/orders.rs",
    "src/models/user.rs",
    "src/models/order.rs",
    "tests/api_users.rs",
    "tests/api_orders.rs",
    "tests/common/mod.rs",
    "migrations/0001_init.sql",
    "migrations/0002_orders.sql",
    "docs/architecture.md",
    "README.md",
    "Cargo.toml",
    "web/src/App.tsx",
    "web/src/api/client.ts",
    "web/src/components/OrderTable.tsx",
    "../shared/proto/orders.proto",
];

const IDENTS: &[&str] = &[
    "req", "ctx", "pool", "conn", "user", "order", "tx", "cfg", "id", "page",
];

const COMMANDS: &[&str] = &[
    "cargo test --workspace",
    "cargo build --release 2>&1 | tail -40",
    "cargo clippy --all-targets -- -D warnings",
    "git status --short && git diff --stat",
    "rg -n \\\"get_conn\\\" src/",
    "npm test -- --watch=false",
    "ls -la src/http/handlers",
    "sqlx migrate run",
];

/// A pool of pre-escaped JSON string lines (each ends with the two bytes `\n`).
#[derive(Debug)]
struct Pool {
    text: Vec<u8>,
    starts: Vec<usize>,
}

impl Pool {
    fn build(rng: &mut Rng, lines: usize, mut line: impl FnMut(&mut Rng, &mut Vec<u8>)) -> Self {
        let mut text = Vec::with_capacity(lines * 48);
        let mut starts = Vec::with_capacity(lines + 1);
        for _ in 0..lines {
            starts.push(text.len());
            line(rng, &mut text);
            text.extend_from_slice(b"\\n");
        }
        starts.push(text.len());
        Self { text, starts }
    }

    fn lines(&self) -> usize {
        self.starts.len() - 1
    }

    /// Copies `count` consecutive lines starting at a random one (wrapping around), without
    /// the final `\n` escape. Returns the bytes copied.
    fn copy(&self, rng: &mut Rng, count: usize, out: &mut Vec<u8>) -> usize {
        let before = out.len();
        let n = self.lines();
        let mut at = rng.below(n as u64) as usize;
        let mut left = count.max(1);
        while left > 0 {
            let take = left.min(n - at);
            out.extend_from_slice(&self.text[self.starts[at]..self.starts[at + take]]);
            left -= take;
            at = 0;
        }
        out.truncate(out.len() - 2);
        out.len() - before
    }
}

fn code_line(rng: &mut Rng, out: &mut Vec<u8>) {
    let indent = rng.below(4) as usize * 4;
    out.extend(std::iter::repeat_n(b' ', indent));
    let a = *rng.pick(IDENTS);
    let b = *rng.pick(IDENTS);
    let c = *rng.pick(IDENTS);
    match rng.below(9) {
        0 | 1 => {
            for s in ["let ", a, " = ", b, ".get_", c, "().await?;"] {
                out.extend_from_slice(s.as_bytes());
            }
        }
        2 => {
            for s in [
                "if ",
                a,
                ".is_empty() { return Err(Error::Empty(\\\"",
                b,
                "\\\")); }",
            ] {
                out.extend_from_slice(s.as_bytes());
            }
        }
        3 => {
            for s in [a, ".push(", b, ".clone());"] {
                out.extend_from_slice(s.as_bytes());
            }
        }
        4 => {
            for s in ["pub fn ", a, "_", b, "(&self, ", a, ": &"] {
                out.extend_from_slice(s.as_bytes());
            }
            out.extend(a.bytes().map(|x| x.to_ascii_uppercase()));
            out.extend_from_slice(b") -> Result<(), Error> {");
        }
        5 | 6 => out.push(b'}'),
        7 => {
            out.extend_from_slice(b"// ");
            prose_words(rng, out, 3, 8, false);
        }
        _ => {
            out.extend_from_slice(b"\\tlog::debug!(\\\"");
            out.extend_from_slice(c.as_bytes());
            out.extend_from_slice(b"={:?}\\\", ");
            out.extend_from_slice(c.as_bytes());
            out.extend_from_slice(b");");
        }
    }
}

fn bash_line(rng: &mut Rng, out: &mut Vec<u8>) {
    match rng.below(7) {
        0 => {
            out.extend_from_slice(b"test ");
            out.extend_from_slice(rng.pick(IDENTS).as_bytes());
            out.extend_from_slice(b"::");
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
            out.extend_from_slice(b"_");
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
            out.extend_from_slice(if rng.chance(1, 8) {
                b" ... FAILED"
            } else {
                b" ... ok"
            });
        }
        1 => {
            out.extend_from_slice(b"warning: ");
            prose_words(rng, out, 2, 7, false);
        }
        2 => {
            out.extend_from_slice(b"error[E0");
            push_num(out, rng.range(100, 799));
            out.extend_from_slice(b"]: ");
            prose_words(rng, out, 3, 8, false);
        }
        3 | 4 => {
            out.extend_from_slice(b"  --> ");
            out.extend_from_slice(rng.pick(PATHS).as_bytes());
            out.push(b':');
            push_num(out, rng.range(1, 400));
            out.push(b':');
            push_num(out, rng.range(1, 90));
        }
        5 => {
            out.extend_from_slice(b"   Compiling ");
            out.extend_from_slice(rng.pick(WORDS).as_bytes());
            out.extend_from_slice(b" v0.");
            push_num(out, rng.range(1, 30));
            out.push(b'.');
            push_num(out, rng.range(0, 9));
        }
        _ => {
            out.extend_from_slice(b" M ");
            out.extend_from_slice(rng.pick(PATHS).as_bytes());
        }
    }
}

/// Writes `lo..=hi` words of prose (JSON-safe, no escapes needed), capitalising the first one
/// when `sentence` is set and ending it with a period.
fn prose_words(rng: &mut Rng, out: &mut Vec<u8>, lo: u64, hi: u64, sentence: bool) {
    let n = rng.range(lo, hi);
    for i in 0..n {
        if i > 0 {
            out.push(b' ');
        }
        let w = rng.pick(WORDS).as_bytes();
        if i == 0 && sentence {
            out.push(w[0].to_ascii_uppercase());
            out.extend_from_slice(&w[1..]);
        } else {
            out.extend_from_slice(w);
        }
    }
    if rng.chance(1, 12) {
        out.push(b' ');
        out.extend_from_slice(rng.pick(UNICODE).as_bytes());
    }
    if sentence {
        out.push(b'.');
    }
}

/// Writes `sentences` sentences separated by spaces.
fn prose(rng: &mut Rng, out: &mut Vec<u8>, sentences: u64) {
    for i in 0..sentences {
        if i > 0 {
            out.push(b' ');
        }
        prose_words(rng, out, 4, 20, true);
    }
}

fn push_num(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Writes `micros / 1e6` the way JavaScript prints it (no trailing zeros).
fn push_micros(out: &mut Vec<u8>, micros: u64) {
    push_num(out, micros / 1_000_000);
    let frac = micros % 1_000_000;
    if frac != 0 {
        let mut digits = [0u8; 6];
        let mut f = frac;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (f % 10) as u8;
            f /= 10;
        }
        let len = 6 - digits.iter().rev().take_while(|&&d| d == b'0').count();
        out.push(b'.');
        out.extend_from_slice(&digits[..len]);
    }
}

/// `"usage":{…}` with the cost at $3 / $15 / $0.30 / $3.75 per million tokens.
fn push_usage(l: &mut Vec<u8>, input: u64, output: u64, cache_read: u64, cache_write: u64) {
    l.extend_from_slice(br#""usage":{"input":"#);
    push_num(l, input);
    l.extend_from_slice(br#","output":"#);
    push_num(l, output);
    l.extend_from_slice(br#","cacheRead":"#);
    push_num(l, cache_read);
    l.extend_from_slice(br#","cacheWrite":"#);
    push_num(l, cache_write);
    l.extend_from_slice(br#","totalTokens":"#);
    push_num(l, input + output + cache_read + cache_write);
    // In micro-dollars.
    let costs = [
        input * 3,
        output * 15,
        cache_read * 3 / 10,
        cache_write * 15 / 4,
    ];
    l.extend_from_slice(br#","cost":{"input":"#);
    push_micros(l, costs[0]);
    l.extend_from_slice(br#","output":"#);
    push_micros(l, costs[1]);
    l.extend_from_slice(br#","cacheRead":"#);
    push_micros(l, costs[2]);
    l.extend_from_slice(br#","cacheWrite":"#);
    push_micros(l, costs[3]);
    l.extend_from_slice(br#","total":"#);
    push_micros(l, costs.iter().sum());
    l.extend_from_slice(b"}}");
}

/// The length in UTF-16 code units of JSON text: of the string it encodes (`raw == false`:
/// each escape is one unit), or of the text itself (`raw == true`: `JSON.stringify` of a
/// parsed value gives the same text back).
fn text_len(json: &[u8], raw: bool) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < json.len() {
        let b = json[i];
        if b == b'\\' && !raw {
            i += if json.get(i + 1) == Some(&b'u') { 6 } else { 2 };
            n += 1;
        } else {
            n += usize::from(b & 0xC0 != 0x80) + usize::from(b >= 0xF0);
            i += 1;
        }
    }
    n
}

fn push_hex(out: &mut Vec<u8>, v: u64, digits: u32) {
    for i in (0..digits).rev() {
        out.push(b"0123456789abcdef"[((v >> (i * 4)) & 0xf) as usize]);
    }
}

/// A bijection on `u32` that looks random: entry ids are unique for up to 2^32 entries.
fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for a Unix time in milliseconds.
fn push_iso(out: &mut Vec<u8>, ms: u64) {
    let days = (ms / 86_400_000) as i64;
    let in_day = ms % 86_400_000;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let two = |out: &mut Vec<u8>, v: u64| {
        out.push(b'0' + (v / 10) as u8);
        out.push(b'0' + (v % 10) as u8);
    };
    push_num(out, y as u64);
    out.push(b'-');
    two(out, m as u64);
    out.push(b'-');
    two(out, d as u64);
    out.push(b'T');
    two(out, in_day / 3_600_000);
    out.push(b':');
    two(out, in_day / 60_000 % 60);
    out.push(b':');
    two(out, in_day / 1000 % 60);
    out.push(b'.');
    let ms3 = in_day % 1000;
    out.push(b'0' + (ms3 / 100) as u8);
    two(out, ms3 % 100);
    out.push(b'Z');
}

type Id = [u8; 8];

/// pi's default `reserveTokens`.
const RESERVE_TOKENS: u64 = 16_384;
/// pi's default `keepRecentTokens`.
const KEEP_RECENT_TOKENS: u64 = 20_000;

/// What an entry of the context is, for pi's cut-point rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// A compaction: its summary when first in the context, nothing elsewhere.
    Compaction,
    /// A user message or a branch summary: a cut point that starts a turn.
    TurnStart,
    /// An assistant message: a cut point inside a turn.
    Assistant,
    /// A tool result: never a cut point.
    ToolResult,
    /// No message (label, model or thinking-level change).
    Silent,
}

/// One entry of the context.
#[derive(Debug)]
struct CtxEntry {
    id: Id,
    /// pi's estimate of its messages.
    tokens: u64,
    part: Part,
    /// The file operations of its tool calls.
    ops: Vec<(Tool, &'static str)>,
}

/// Where pi would cut: `ctx[start..first_kept]` is summarised (`[start, turn_start)` as
/// history and `[turn_start, first_kept)` as the split turn's prefix when split).
#[derive(Debug)]
struct Cut {
    start: usize,
    first_kept: usize,
    turn_start: Option<usize>,
}

/// The context as pi's auto-compaction sees it: the entries of the projection at the leaf.
#[derive(Debug)]
struct Compactor {
    window: u64,
    /// In context order: the latest compaction, the entries it kept (before it on the path,
    /// with the compaction before that as a message-less entry where it falls among them),
    /// then the entries after it on the path.
    ctx: Vec<CtxEntry>,
    /// `ctx[..after]` are the latest compaction and the entries it kept.
    after: usize,
    /// The sum of `ctx`'s estimates.
    tokens: u64,
    /// The context of the previous request, as the provider cached it.
    cached: u64,
    /// The previous compaction's `details`.
    read: Vec<&'static str>,
    modified: Vec<&'static str>,
}

impl Compactor {
    fn new(window: u64) -> Self {
        Self {
            window,
            ctx: Vec::new(),
            after: 0,
            tokens: 0,
            cached: 0,
            read: Vec::new(),
            modified: Vec::new(),
        }
    }

    /// pi's `shouldCompact` with the default reserve.
    fn due(&self) -> bool {
        self.tokens > self.window.saturating_sub(RESERVE_TOKENS)
    }

    fn push(&mut self, id: Id, part: Part, chars: usize, ops: Vec<(Tool, &'static str)>) {
        let tokens = (chars as u64).div_ceil(4);
        self.tokens += tokens;
        self.ctx.push(CtxEntry {
            id,
            tokens,
            part,
            ops,
        });
    }

    /// Where `id` is in the context, if it is on the path after the latest compaction.
    fn position(&self, id: &Id) -> Option<usize> {
        self.ctx[self.after..]
            .iter()
            .position(|e| &e.id == id)
            .map(|p| p + self.after)
    }

    /// Goes back to `id` (on the path after the latest compaction): later entries leave the
    /// context.
    fn truncate_to(&mut self, id: &Id) {
        if let Some(p) = self.position(id) {
            for e in self.ctx.drain(p + 1..) {
                self.tokens -= e.tokens;
            }
        }
    }

    /// pi's `findProjectedCutPoint` with `keepRecentTokens` over the entries after the
    /// previous compaction's summary, and `prepareCompaction`'s "nothing to compact" (`None`).
    fn cut(&self) -> Option<Cut> {
        let ctx = &self.ctx;
        let start = usize::from(ctx.first().is_some_and(|e| e.part == Part::Compaction));
        let end = ctx.len();
        let is_cut = |i: &usize| matches!(ctx[*i].part, Part::TurnStart | Part::Assistant);
        let first = (start..end).find(is_cut)?;
        let last = (start..end).rev().find(is_cut)?;
        let mut cut = first;
        let mut acc = 0;
        for i in (start..end).rev() {
            if ctx[i].tokens == 0 {
                continue;
            }
            acc += ctx[i].tokens;
            if acc >= KEEP_RECENT_TOKENS {
                cut = (i..end).find(is_cut).unwrap_or(last);
                break;
            }
        }
        // Message-less entries just before the cut stay with the kept part.
        while cut > start && ctx[cut - 1].part == Part::Silent {
            cut -= 1;
        }
        let turn_start = if ctx[cut].part == Part::TurnStart {
            None
        } else {
            (start..=cut)
                .rev()
                .find(|&i| ctx[i].part == Part::TurnStart)
        };
        let has_messages = |e: &CtxEntry| !matches!(e.part, Part::Silent | Part::Compaction);
        ctx[start..cut].iter().any(has_messages).then_some(Cut {
            start,
            first_kept: cut,
            turn_start,
        })
    }

    /// pi's `computeFileLists` over the previous compaction's details and the tool calls of
    /// the summarised entries: (read, modified), each sorted.
    fn file_lists(&self, cut: &Cut) -> (Vec<&'static str>, Vec<&'static str>) {
        let mut read: BTreeSet<&'static str> = self.read.iter().copied().collect();
        let mut modified: BTreeSet<&'static str> = self.modified.iter().copied().collect();
        for e in &self.ctx[cut.start..cut.first_kept] {
            for &(tool, path) in &e.ops {
                match tool {
                    Tool::Read => {
                        read.insert(path);
                    }
                    Tool::Edit | Tool::Write => {
                        modified.insert(path);
                    }
                    Tool::Bash => {}
                }
            }
        }
        let read = read.difference(&modified).copied().collect();
        (read, modified.into_iter().collect())
    }

    /// The context after the compaction `id` (its summary `summary_tokens` long) at `cut`.
    fn compacted(
        &mut self,
        id: Id,
        summary_tokens: u64,
        cut: &Cut,
        read: Vec<&'static str>,
        modified: Vec<&'static str>,
    ) {
        let mut kept: Vec<CtxEntry> = Vec::with_capacity(self.ctx.len() - cut.first_kept + 2);
        kept.push(CtxEntry {
            id,
            tokens: summary_tokens,
            part: Part::Compaction,
            ops: Vec::new(),
        });
        let mut old = std::mem::take(&mut self.ctx).into_iter();
        let previous = if cut.start == 1 { old.next() } else { None };
        for (i, e) in old.enumerate() {
            let i = i + cut.start;
            if i == self.after
                && cut.first_kept < self.after
                && let Some(p) = &previous
            {
                // The previous compaction sits here on the path; it projects nothing now.
                kept.push(CtxEntry {
                    id: p.id,
                    tokens: 0,
                    part: Part::Compaction,
                    ops: Vec::new(),
                });
            }
            if i >= cut.first_kept {
                kept.push(e);
            }
        }
        self.tokens = kept.iter().map(|e| e.tokens).sum();
        self.after = kept.len();
        self.ctx = kept;
        self.cached = 0;
        self.read = read;
        self.modified = modified;
    }
}

/// Tool calls an assistant message makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Read,
    Edit,
    Write,
    Bash,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Edit => "edit",
            Self::Write => "write",
            Self::Bash => "bash",
        }
    }
}

struct Call {
    id: [u8; 29],
    tool: Tool,
    path: &'static str,
    blocks: u64,
}

struct Gen<W: Write> {
    out: W,
    rng: Rng,
    line: Vec<u8>,
    code: Pool,
    logs: Pool,
    stats: GenStats,
    id_key: u32,
    entries: u32,
    now_ms: u64,
    leaf: Option<Id>,
    /// Parents of recent user prompts: where a branch can go back to.
    turn_starts: Vec<Id>,
    stop_at: u64,
    /// The context as auto-compaction sees it, when compacting.
    compact: Option<Compactor>,
    /// Bytes of the image attached to every user message (0: none).
    image_bytes: u64,
}

/// Why the generator stopped.
enum Stop {
    /// The target size was reached.
    Full,
    /// Writing failed.
    Io(io::Error),
}

impl<W: Write> Gen<W> {
    fn new(out: W, seed: u64) -> Self {
        let mut rng = Rng(seed ^ 0x5eed_0f91_55e5_5a11);
        let code = Pool::build(&mut rng, 4096, code_line);
        let logs = Pool::build(&mut rng, 2048, bash_line);
        let id_key = rng.next() as u32;
        Self {
            out,
            rng,
            line: Vec::with_capacity(1 << 20),
            code,
            logs,
            stats: GenStats::default(),
            id_key,
            entries: 0,
            // 2026-04-30T09:00:00.000Z
            now_ms: 1_777_539_600_000,
            leaf: None,
            turn_starts: Vec::new(),
            stop_at: 0,
            compact: None,
            image_bytes: 0,
        }
    }

    fn run(&mut self, target_bytes: u64) -> io::Result<()> {
        self.stop_at = target_bytes;
        match self.body() {
            Ok(()) | Err(Stop::Full) => Ok(()),
            Err(Stop::Io(e)) => Err(e),
        }
    }

    /// Writes lines until the target size is reached.
    fn body(&mut self) -> Result<(), Stop> {
        self.header();
        self.emit()?;
        self.entry_head("model_change");
        self.line
            .extend_from_slice(br#","provider":"anthropic","modelId":"claude-sonnet-4-5"}"#);
        self.track(Part::Silent, 0, Vec::new());
        self.emit()?;
        self.entry_head("thinking_level_change");
        self.line.extend_from_slice(br#","thinkingLevel":"high"}"#);
        self.track(Part::Silent, 0, Vec::new());
        self.emit()?;
        let mut turn = 0u64;
        loop {
            turn += 1;
            if self.compact.as_ref().is_some_and(Compactor::due) && self.compaction() {
                self.emit()?;
            }
            if turn > 4 && self.rng.chance(1, 60) && self.branch_summary() {
                self.emit()?;
                if self.rng.chance(1, 2) {
                    self.label(turn);
                    self.emit()?;
                }
            }
            if let Some(parent) = self.leaf {
                if self.turn_starts.len() >= 256 {
                    self.turn_starts.swap_remove(self.rng.below(256) as usize);
                }
                self.turn_starts.push(parent);
            }
            self.user();
            self.emit()?;
            let steps = self.rng.range(1, 6);
            for step in 1..=steps {
                let calls = if step == steps {
                    Vec::new()
                } else {
                    (0..self.rng.range(1, 3)).map(|_| self.call()).collect()
                };
                self.assistant(&calls);
                self.emit()?;
                for call in &calls {
                    self.tool_result(call);
                    self.emit()?;
                }
            }
        }
    }

    /// Ends the current line and writes it; stops once the target size is reached.
    fn emit(&mut self) -> Result<(), Stop> {
        self.line.push(b'\n');
        self.out.write_all(&self.line).map_err(Stop::Io)?;
        self.stats.bytes += self.line.len() as u64;
        self.stats.lines += 1;
        self.line.clear();
        if self.stats.bytes >= self.stop_at {
            return Err(Stop::Full);
        }
        Ok(())
    }

    fn header(&mut self) {
        let l = &mut self.line;
        l.extend_from_slice(br#"{"type":"session","version":3,"id":""#);
        let (a, b) = (self.rng.next(), self.rng.next());
        push_hex(l, a >> 32, 8);
        l.push(b'-');
        push_hex(l, a >> 16, 4);
        l.extend_from_slice(b"-7");
        push_hex(l, a, 3);
        l.push(b'-');
        push_hex(l, 0x8000 | (b >> 48 & 0x3fff), 4);
        l.push(b'-');
        push_hex(l, b, 12);
        l.extend_from_slice(br#"","timestamp":""#);
        push_iso(l, self.now_ms);
        l.extend_from_slice(br#"","cwd":"/home/dev/projects/acme-api"}"#);
    }

    fn new_id(&mut self) -> Id {
        let v = mix32(self.entries.wrapping_add(self.id_key));
        self.entries += 1;
        let mut id = [0u8; 8];
        for (i, d) in id.iter_mut().enumerate() {
            *d = b"0123456789abcdef"[(v >> (28 - 4 * i) & 0xf) as usize];
        }
        id
    }

    /// `{"type":…,"id":…,"parentId":…,"timestamp":…` (no closing brace); the new entry becomes
    /// the leaf.
    fn entry_head(&mut self, ty: &str) -> Id {
        self.entry_head_at(ty, self.leaf)
    }

    fn entry_head_at(&mut self, ty: &str, parent: Option<Id>) -> Id {
        self.now_ms += self.rng.range(300, 30_000);
        let id = self.new_id();
        let l = &mut self.line;
        l.extend_from_slice(br#"{"type":""#);
        l.extend_from_slice(ty.as_bytes());
        l.extend_from_slice(br#"","id":""#);
        l.extend_from_slice(&id);
        match parent {
            Some(p) => {
                l.extend_from_slice(br#"","parentId":""#);
                l.extend_from_slice(&p);
                l.extend_from_slice(br#"","timestamp":""#);
            }
            None => l.extend_from_slice(br#"","parentId":null,"timestamp":""#),
        }
        push_iso(l, self.now_ms);
        l.push(b'"');
        self.leaf = Some(id);
        id
    }

    fn message_head(&mut self, role: &str) {
        self.entry_head("message");
        self.line.extend_from_slice(br#","message":{"role":""#);
        self.line.extend_from_slice(role.as_bytes());
        self.line.push(b'"');
    }

    fn message_tail(&mut self) {
        self.line.extend_from_slice(br#","timestamp":"#);
        push_num(&mut self.line, self.now_ms);
        self.line.extend_from_slice(b"}}");
    }

    fn user(&mut self) {
        self.message_head("user");
        let l = &mut self.line;
        l.extend_from_slice(br#","content":[{"type":"text","text":""#);
        let a = l.len();
        let n = self.rng.range(1, 4);
        prose(&mut self.rng, l, n);
        if self.rng.chance(1, 2) {
            l.extend_from_slice(b" See ");
            l.extend_from_slice(self.rng.pick(PATHS).as_bytes());
            l.push(b'.');
        }
        if self.rng.chance(1, 10) {
            l.extend_from_slice(b"\\n\\n```\\n");
            let n = self.rng.range(3, 30) as usize;
            self.logs.copy(&mut self.rng, n, l);
            l.extend_from_slice(b"\\n```");
        }
        let b = l.len();
        l.extend_from_slice(br#""}"#);
        if self.image_bytes > 0 {
            l.extend_from_slice(br#",{"type":"image","data":""#);
            push_base64_noise(&mut self.rng, l, self.image_bytes);
            l.extend_from_slice(br#"","mimeType":"image/png"}"#);
            self.stats.images += 1;
        }
        l.push(b']');
        self.message_tail();
        self.track_text(Part::TurnStart, a, b);
    }

    fn call(&mut self) -> Call {
        let tool = match self.rng.below(20) {
            0..=7 => Tool::Read,
            8..=12 => Tool::Edit,
            13..=15 => Tool::Write,
            _ => Tool::Bash,
        };
        let mut id = *b"call_000000000000000000000000";
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut bits = self.rng.next();
        for (i, c) in id[5..].iter_mut().enumerate() {
            if i == 10 {
                bits = self.rng.next();
            }
            *c = alphabet[(bits % 62) as usize];
            bits /= 62;
        }
        Call {
            id,
            tool,
            path: self.rng.pick::<&str>(PATHS),
            blocks: self.rng.range(1, 3),
        }
    }

    fn assistant(&mut self, calls: &[Call]) {
        self.message_head("assistant");
        let l = &mut self.line;
        // What pi's estimate counts: (start, end, raw) spans of the line, and tool names.
        let mut spans: Vec<(usize, usize, bool)> = Vec::new();
        let mut name_chars = 0;
        l.extend_from_slice(br#","content":["#);
        let mut first = true;
        let mut sep = |l: &mut Vec<u8>| {
            if !std::mem::take(&mut first) {
                l.push(b',');
            }
        };
        if self.rng.chance(3, 5) {
            sep(l);
            l.extend_from_slice(br#"{"type":"thinking","thinking":""#);
            let a = l.len();
            let n = self.rng.range(1, 4);
            prose(&mut self.rng, l, n);
            spans.push((a, l.len(), false));
            l.extend_from_slice(br#"","thinkingSignature":"sig_"#);
            push_hex(l, self.rng.next(), 16);
            l.extend_from_slice(br#""}"#);
        }
        if calls.is_empty() || self.rng.chance(7, 10) {
            sep(l);
            l.extend_from_slice(br#"{"type":"text","text":""#);
            let a = l.len();
            let n = self.rng.range(1, if calls.is_empty() { 8 } else { 3 });
            prose(&mut self.rng, l, n);
            if calls.is_empty() && self.rng.chance(1, 3) {
                l.extend_from_slice(b"\\n\\n```rust\\n");
                let n = self.rng.range(4, 40) as usize;
                self.code.copy(&mut self.rng, n, l);
                l.extend_from_slice(b"\\n```");
            }
            spans.push((a, l.len(), false));
            l.extend_from_slice(br#""}"#);
        }
        for call in calls {
            sep(l);
            l.extend_from_slice(br#"{"type":"toolCall","id":""#);
            l.extend_from_slice(&call.id);
            l.extend_from_slice(br#"","name":""#);
            l.extend_from_slice(call.tool.name().as_bytes());
            name_chars += call.tool.name().len();
            l.extend_from_slice(br#"","arguments":{"#);
            let a = l.len() - 1;
            match call.tool {
                Tool::Read => {
                    l.extend_from_slice(br#""path":""#);
                    l.extend_from_slice(call.path.as_bytes());
                    l.push(b'"');
                    if self.rng.chance(1, 4) {
                        l.extend_from_slice(br#","offset":"#);
                        push_num(l, self.rng.range(1, 300));
                        l.extend_from_slice(br#","limit":"#);
                        push_num(l, self.rng.range(20, 200));
                    }
                }
                Tool::Edit => {
                    l.extend_from_slice(br#""path":""#);
                    l.extend_from_slice(call.path.as_bytes());
                    l.extend_from_slice(br#"","edits":["#);
                    for b in 0..call.blocks {
                        if b > 0 {
                            l.push(b',');
                        }
                        l.extend_from_slice(br#"{"oldText":""#);
                        let n = self.rng.range(1, 6) as usize;
                        self.code.copy(&mut self.rng, n, l);
                        l.extend_from_slice(br#"","newText":""#);
                        let n = self.rng.range(1, 8) as usize;
                        self.code.copy(&mut self.rng, n, l);
                        l.extend_from_slice(br#""}"#);
                    }
                    l.push(b']');
                }
                Tool::Write => {
                    l.extend_from_slice(br#""path":""#);
                    l.extend_from_slice(call.path.as_bytes());
                    l.extend_from_slice(br#"","content":""#);
                    let n = self.rng.range(10, 150) as usize;
                    self.code.copy(&mut self.rng, n, l);
                    l.push(b'"');
                }
                Tool::Bash => {
                    l.extend_from_slice(br#""command":""#);
                    l.extend_from_slice(self.rng.pick(COMMANDS).as_bytes());
                    l.push(b'"');
                    if self.rng.chance(1, 3) {
                        l.extend_from_slice(br#","timeout":"#);
                        push_num(l, self.rng.range(1, 10) * 60);
                    }
                }
            }
            l.extend_from_slice(b"}}");
            spans.push((a, l.len() - 1, true));
            self.stats.tool_calls += 1;
        }
        l.extend_from_slice(br#"],"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","responseId":"msg_"#);
        push_hex(l, self.rng.next(), 16);
        push_hex(l, self.rng.next(), 8);
        l.extend_from_slice(br#"","#);
        let mut input = self.rng.range(1, 4000);
        let mut output = self.rng.range(5, 1500);
        let mut cache_read = self.rng.range(0, 150_000);
        let mut cache_write = self.rng.range(0, 3000);
        let mut chars = None;
        if let Some(c) = &mut self.compact {
            // The request carried the whole context: the part sent before is read from the
            // cache, the rest is new; the reply is this message.
            let context = c.tokens;
            let n = name_chars
                + spans
                    .iter()
                    .map(|&(a, b, raw)| text_len(&l[a..b], raw))
                    .sum::<usize>();
            chars = Some(n);
            output = (n as u64).div_ceil(4);
            cache_read = c.cached.min(context);
            input = input.min(context - cache_read);
            cache_write = context - cache_read - input;
            c.cached = context + output;
        }
        push_usage(l, input, output, cache_read, cache_write);
        l.extend_from_slice(br#","stopReason":""#);
        l.extend_from_slice(if calls.is_empty() {
            b"stop"
        } else {
            b"toolUse"
        });
        l.push(b'"');
        self.message_tail();
        if let Some(n) = chars {
            let ops = calls.iter().map(|c| (c.tool, c.path)).collect();
            self.track(Part::Assistant, n, ops);
        }
    }

    fn tool_result(&mut self, call: &Call) {
        self.message_head("toolResult");
        let l = &mut self.line;
        l.extend_from_slice(br#","toolCallId":""#);
        l.extend_from_slice(&call.id);
        l.extend_from_slice(br#"","toolName":""#);
        l.extend_from_slice(call.tool.name().as_bytes());
        l.extend_from_slice(br#"","content":[{"type":"text","text":""#);
        let mut is_error = false;
        let mut details = false;
        let start = l.len();
        match call.tool {
            Tool::Read => {
                // 1 in 25 reads returns a whole large file (~20-150 KB).
                let n = if self.rng.chance(1, 25) {
                    self.rng.range(600, 4000)
                } else {
                    self.rng.range(8, 120)
                };
                self.code.copy(&mut self.rng, n as usize, l);
            }
            Tool::Bash => {
                // 1 in 20 commands prints a long log.
                let n = if self.rng.chance(1, 20) {
                    self.rng.range(500, 3000)
                } else {
                    self.rng.range(2, 60)
                };
                self.logs.copy(&mut self.rng, n as usize, l);
                if self.rng.chance(1, 6) {
                    is_error = true;
                    l.extend_from_slice(b"\\n\\nCommand exited with code 101");
                }
            }
            Tool::Edit => {
                if self.rng.chance(1, 12) {
                    is_error = true;
                    l.extend_from_slice(b"Could not find the exact text in ");
                    l.extend_from_slice(call.path.as_bytes());
                    l.extend_from_slice(b". The old text must match exactly.");
                } else {
                    details = true;
                    l.extend_from_slice(b"Successfully replaced ");
                    push_num(l, call.blocks);
                    l.extend_from_slice(b" block(s) in ");
                    l.extend_from_slice(call.path.as_bytes());
                    l.push(b'.');
                }
            }
            Tool::Write => {
                l.extend_from_slice(b"Successfully wrote ");
                push_num(l, self.rng.range(200, 6000));
                l.extend_from_slice(b" bytes to ");
                l.extend_from_slice(call.path.as_bytes());
            }
        }
        if l.len() - start > 16 << 10 {
            self.stats.long_outputs += 1;
        }
        let end = l.len();
        l.extend_from_slice(br#""}]"#);
        if details {
            let line_no = self.rng.range(1, 400);
            l.extend_from_slice(br#","details":{"diff":""#);
            for (sign, lines) in [(b'-', self.rng.range(1, 4)), (b'+', self.rng.range(1, 6))] {
                l.push(sign);
                push_num(l, line_no);
                l.push(b' ');
                self.code.copy(&mut self.rng, lines as usize, l);
                if sign == b'-' {
                    l.extend_from_slice(b"\\n");
                }
            }
            l.extend_from_slice(br#"","firstChangedLine":"#);
            push_num(l, line_no);
            l.push(b'}');
        }
        l.extend_from_slice(if is_error {
            br#","isError":true"#
        } else {
            br#","isError":false"#
        });
        self.message_tail();
        self.track_text(Part::ToolResult, start, end);
    }

    /// Goes back to the start of an earlier turn, summarising the branch left behind.
    /// Returns false (and writes nothing) when there is no earlier turn to go back to.
    fn branch_summary(&mut self) -> bool {
        let (Some(from), false) = (self.leaf, self.turn_starts.is_empty()) else {
            return false;
        };
        let target = match &mut self.compact {
            None => *self.rng.pick(&self.turn_starts),
            Some(c) => {
                // Only back to a turn after the latest compaction, on the current path.
                let here: Vec<Id> = self
                    .turn_starts
                    .iter()
                    .copied()
                    .filter(|t| c.position(t).is_some())
                    .collect();
                if here.is_empty() {
                    return false;
                }
                let t = *self.rng.pick(&here);
                c.truncate_to(&t);
                t
            }
        };
        self.entry_head_at("branch_summary", Some(target));
        let l = &mut self.line;
        l.extend_from_slice(br#","fromId":""#);
        l.extend_from_slice(&from);
        l.extend_from_slice(br#"","summary":""#);
        let a = l.len();
        l.extend_from_slice(
            br#"The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n## Goal\n"#,
        );
        prose(&mut self.rng, l, 1);
        l.extend_from_slice(br"\n\n## Progress\n### Done\n- [x] ");
        prose(&mut self.rng, l, 1);
        l.extend_from_slice(br"\n\n### In Progress\n- [ ] ");
        prose(&mut self.rng, l, 1);
        l.extend_from_slice(br"\n\n<modified-files>\n");
        l.extend_from_slice(self.rng.pick(PATHS).as_bytes());
        l.extend_from_slice(br"\n</modified-files>");
        let b = l.len();
        l.extend_from_slice(br#""}"#);
        self.track_text(Part::TurnStart, a, b);
        self.stats.branches += 1;
        true
    }

    fn label(&mut self, turn: u64) {
        let target = self.leaf;
        self.entry_head("label");
        let l = &mut self.line;
        l.extend_from_slice(br#","targetId":""#);
        l.extend_from_slice(&target.unwrap_or(*b"00000000"));
        l.extend_from_slice(br#"","label":"explored-"#);
        push_num(l, turn);
        l.extend_from_slice(br#""}"#);
        self.track(Part::Silent, 0, Vec::new());
    }

    /// Records the entry just built (the leaf) in the compaction context.
    fn track(&mut self, part: Part, chars: usize, ops: Vec<(Tool, &'static str)>) {
        if let (Some(c), Some(id)) = (&mut self.compact, self.leaf) {
            c.push(id, part, chars, ops);
        }
    }

    /// [`Self::track`] for a message whose counted text is the JSON string `line[a..b]`.
    fn track_text(&mut self, part: Part, a: usize, b: usize) {
        if self.compact.is_some() {
            let n = text_len(&self.line[a..b], false);
            self.track(part, n, Vec::new());
        }
    }

    /// Appends a compaction as pi's auto-compaction would, with a made-up summary in pi's
    /// layout; false (nothing written) when there is nothing to summarise.
    fn compaction(&mut self) -> bool {
        let Some(c) = &self.compact else {
            return false;
        };
        let Some(cut) = c.cut() else {
            return false;
        };
        let first_kept = c.ctx[cut.first_kept].id;
        let tokens_before = c.tokens;
        let (read, modified) = c.file_lists(&cut);
        let summarized: u64 = c.ctx[cut.start..cut.first_kept]
            .iter()
            .map(|e| e.tokens)
            .sum();
        // Summarising takes a while.
        self.now_ms += self.rng.range(5_000, 60_000);
        self.entry_head("compaction");
        let l = &mut self.line;
        l.extend_from_slice(br#","summary":""#);
        let a = l.len();
        let rng = &mut self.rng;
        let sections: [&[u8]; 8] = [
            br"## Goal\n",
            br"## Constraints & Preferences\n- ",
            br"## Progress\n### Done\n- [x] ",
            br"### In Progress\n- [ ] ",
            br"### Blocked\n- (none)",
            br"## Key Decisions\n- **",
            br"## Next Steps\n1. ",
            br"## Critical Context\n- ",
        ];
        for (i, heading) in sections.iter().enumerate() {
            if i > 0 {
                l.extend_from_slice(br"\n\n");
            }
            l.extend_from_slice(heading);
            if i == 5 {
                prose_words(rng, l, 2, 2, false);
                l.extend_from_slice(b"**: ");
            }
            if i != 4 {
                prose(rng, l, 1);
            }
        }
        if cut.turn_start.is_some() {
            l.extend_from_slice(
                br"\n\n---\n\n**Turn Context (split turn):**\n\n## Original Request\n",
            );
            prose(rng, l, 1);
            l.extend_from_slice(br"\n\n## Progress So Far\n- ");
            prose(rng, l, 1);
            l.extend_from_slice(br"\n\n## Context Needed to Continue\n- ");
            prose(rng, l, 1);
        }
        for (tag, files) in [("read-files", &read), ("modified-files", &modified)] {
            if files.is_empty() {
                continue;
            }
            l.extend_from_slice(br"\n\n<");
            l.extend_from_slice(tag.as_bytes());
            l.push(b'>');
            for f in files {
                l.extend_from_slice(br"\n");
                l.extend_from_slice(f.as_bytes());
            }
            l.extend_from_slice(br"\n</");
            l.extend_from_slice(tag.as_bytes());
            l.push(b'>');
        }
        let b = l.len();
        l.extend_from_slice(br#"","firstKeptEntryId":""#);
        l.extend_from_slice(&first_kept);
        l.extend_from_slice(br#"","tokensBefore":"#);
        push_num(l, tokens_before);
        let lists: [(&[u8], &Vec<&str>); 2] = [
            (br#","details":{"readFiles":["#, &read),
            (br#"],"modifiedFiles":["#, &modified),
        ];
        for (key, files) in lists {
            l.extend_from_slice(key);
            for (i, f) in files.iter().enumerate() {
                if i > 0 {
                    l.push(b',');
                }
                l.push(b'"');
                l.extend_from_slice(f.as_bytes());
                l.push(b'"');
            }
        }
        l.extend_from_slice(b"]},");
        let chars = text_len(&l[a..b], false);
        let summary_tokens = (chars as u64).div_ceil(4);
        // The summariser got the summarised messages and pi's prompt (about 1,000 tokens).
        push_usage(l, summarized + 1_000, summary_tokens, 0, 0);
        l.extend_from_slice(br#","fromHook":false}"#);
        let id = self.leaf.unwrap_or(first_kept);
        if let Some(c) = &mut self.compact {
            c.compacted(id, summary_tokens, &cut, read, modified);
        }
        self.stats.compactions += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pisess_formats::{Event, SessionReader, TreeCheck};

    #[test]
    fn iso_dates_match_javascript() {
        let mut out = Vec::new();
        push_iso(&mut out, 1_777_539_627_444);
        assert_eq!(out, b"2026-04-30T09:00:27.444Z");
        out.clear();
        push_iso(&mut out, 951_782_400_000); // leap day
        assert_eq!(out, b"2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn micros_are_printed_as_javascript_does() {
        for (v, s) in [
            (0, "0"),
            (135, "0.000135"),
            (1_500_000, "1.5"),
            (2_000_000, "2"),
        ] {
            let mut out = Vec::new();
            push_micros(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), s);
        }
    }

    #[test]
    fn output_is_deterministic_and_sized() {
        let mut a = Vec::new();
        let mut b = Vec::new();
        let mut c = Vec::new();
        let sa = generate(&mut a, 300_000, 7).unwrap();
        generate(&mut b, 300_000, 7).unwrap();
        generate(&mut c, 300_000, 8).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(sa.bytes, a.len() as u64);
        assert!(a.len() >= 300_000 && a.ends_with(b"\n"));
        // Tiny sizes still give a header line.
        let mut t = Vec::new();
        assert_eq!(generate(&mut t, 1, 1).unwrap().lines, 1);
    }

    #[test]
    fn every_line_is_a_clean_entry_written_in_pi_order() {
        let mut buf = Vec::new();
        let stats = generate(&mut buf, 6 << 20, 3).unwrap();
        assert!(stats.branches > 0 && stats.long_outputs > 0, "{stats:?}");
        assert_clean(&buf, &stats);
    }

    #[test]
    fn a_chain_is_one_path_of_n_entries_plus_a_sibling_of_its_leaf() {
        let mut buf = Vec::new();
        let bytes = generate_chain(&mut buf, 1000).unwrap();
        assert_eq!(bytes, buf.len() as u64);
        let lines: Vec<serde_json::Value> = String::from_utf8(buf)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 1002);
        assert_eq!(lines[0]["type"], "session");
        assert_eq!(lines[1]["parentId"], serde_json::Value::Null);
        for i in 2..=1000 {
            assert_eq!(lines[i]["parentId"], lines[i - 1]["id"], "line {i}");
        }
        assert_eq!(lines[1001]["id"], format!("{:08x}", 1001));
        assert_eq!(lines[1001]["parentId"], lines[999]["id"]);
    }

    #[test]
    fn a_folder_holds_distinct_sessions_of_the_size_asked() {
        let dir = std::env::temp_dir().join(format!("pisess-gen-folder-{}", std::process::id()));
        let total = generate_folder(&dir, 3, 50_000, 9).unwrap();
        let mut ids = std::collections::BTreeSet::new();
        let mut sum = 0;
        for k in 0..3 {
            let text = std::fs::read_to_string(dir.join(format!("{k:05}.jsonl"))).unwrap();
            sum += text.len() as u64;
            assert!(text.len() >= 50_000, "{k}: {} bytes", text.len());
            let header: serde_json::Value =
                serde_json::from_str(text.lines().next().unwrap()).unwrap();
            ids.insert(header["id"].as_str().unwrap().to_owned());
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(sum, total);
        assert_eq!(ids.len(), 3, "{ids:?}");
    }

    #[test]
    fn with_images_every_line_is_clean_and_images_are_incompressible_base64() {
        let options = GenOptions {
            image_bytes: Some(30_000),
            ..GenOptions::default()
        };
        let mut buf = Vec::new();
        let stats = generate_with(&mut buf, 4 << 20, 5, options).unwrap();
        assert!(stats.images > 10, "{stats:?}");
        assert_clean(&buf, &stats);
        let text = String::from_utf8(buf).unwrap();
        let mut seen = 0;
        for line in text.lines().filter(|l| l.contains(r#""type":"image""#)) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let block = &v["message"]["content"][1];
            assert_eq!(block["mimeType"], "image/png");
            let data = block["data"].as_str().unwrap();
            assert_eq!(
                data.len(),
                40_000,
                "30,000 bytes are 40,000 base64 characters"
            );
            assert!(
                data.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
            );
            seen += 1;
        }
        assert_eq!(seen, stats.images);
    }

    #[test]
    fn with_compaction_every_line_is_clean_and_the_output_deterministic() {
        let options = GenOptions {
            compact_window: Some(200_000),
            ..GenOptions::default()
        };
        let mut buf = Vec::new();
        let stats = generate_with(&mut buf, 12 << 20, 1, options).unwrap();
        assert!(stats.compactions > 5 && stats.branches > 0, "{stats:?}");
        assert_clean(&buf, &stats);
        let mut again = Vec::new();
        generate_with(&mut again, 12 << 20, 1, options).unwrap();
        assert!(again == buf);
    }

    /// Each compaction is the one pi's `prepareCompaction` (the engine's implementation) makes
    /// at its parent: the same first kept entry, `tokensBefore` and file lists, and pi's
    /// `shouldCompact` says it was due. The small window makes cuts land among the entries the
    /// previous compaction kept.
    #[test]
    fn compactions_are_the_ones_pi_prepares() {
        use pisess_engine::agent::{
            CompactionSettings, compute_file_lists, path_from_entries, prepare_compaction,
            should_compact,
        };
        use serde_json::Value;
        for (window, seed) in [(38_000u64, 7u64), (60_000, 2), (200_000, 1)] {
            let options = GenOptions {
                compact_window: Some(window),
                ..GenOptions::default()
            };
            let mut buf = Vec::new();
            let stats = generate_with(&mut buf, 3 << 20, seed, options).unwrap();
            assert!(stats.compactions > 2, "{stats:?}");
            let entries: Vec<Value> = buf
                .split(|&b| b == b'\n')
                .skip(1)
                .filter(|l| !l.is_empty())
                .map(|l| serde_json::from_slice(l).unwrap())
                .collect();
            let mut checked = 0;
            for c in entries.iter().filter(|e| e["type"] == "compaction") {
                let parent = c["parentId"].as_str();
                let path = path_from_entries(&entries, parent).unwrap();
                let settings = CompactionSettings::default();
                let prep = prepare_compaction(&path, settings).unwrap();
                let at = format!("window {window}, compaction {}", c["id"]);
                assert_eq!(prep.first_kept_entry_id, c["firstKeptEntryId"], "{at}");
                assert_eq!(
                    prep.tokens_before,
                    c["tokensBefore"].as_f64().unwrap(),
                    "{at}"
                );
                let (read, modified) = compute_file_lists(&prep.file_ops);
                let list = |k: &str| -> Vec<String> {
                    let files = c["details"][k].as_array().unwrap().iter();
                    files.map(|f| f.as_str().unwrap().to_owned()).collect()
                };
                assert_eq!(read, list("readFiles"), "{at}");
                assert_eq!(modified, list("modifiedFiles"), "{at}");
                assert!(
                    should_compact(prep.tokens_before, window as f64, &settings),
                    "{at}"
                );
                checked += 1;
            }
            assert_eq!(checked, stats.compactions);
        }
    }

    fn assert_clean(buf: &[u8], stats: &GenStats) {
        let mut tree = TreeCheck::new(3.0);
        let mut problems = Vec::new();
        let mut records = 0u64;
        SessionReader::new(buf)
            .read(|ev| {
                match ev {
                    Event::Header(h) => assert_eq!(h.version(), 3.0),
                    Event::Record(r, _) => {
                        let entry = r.entry.as_ref().expect("typed view");
                        assert_eq!(entry.to_json(), r.json, "line {}", r.line);
                        tree.add(r);
                        records += 1;
                    }
                    Event::Problem(p) => problems.push(p.kind.to_string()),
                }
                Ok::<(), ()>(())
            })
            .unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(records + 1, stats.lines);
        let tree_problems: Vec<_> = tree.finish().iter().map(|p| p.kind.to_string()).collect();
        assert!(tree_problems.is_empty(), "{tree_problems:?}");
    }
}
