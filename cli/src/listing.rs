//! Lines of `log`, `log --all` and `tree` written straight from the store's outline rows
//! ([`pisess_engine::outline`]): the same bytes as the commands' per-entry rendering of the
//! decoded line, without decoding it and without building intermediate strings.
//!
//! Invariants:
//! - every function here writes exactly what its counterpart over a `serde_json::Value` writes
//!   (`log::line_text`, `log::entry_json`, the `tree` line), given the row's facts; the caller
//!   decodes the line instead whenever a row has no facts, or its summary is cut shorter than
//!   the line needs ([`summary_suffices`]);
//! - session text reaches the output only through [`push_safe`] (text output) or a JSON string
//!   escaper (`--json`), as in the per-entry rendering.

use std::io::{self, IoSlice, Write};

use pisess_engine::outline::{FactsRef, HOT_CHARS, OutlineRow, ParentId, Timestamp, write_iso};

use crate::session_arg as sa;
use crate::ui::{Ui, safe};

/// Whether a stored summary (`f.summary`, its first characters when not complete; `summary`
/// is it measured, [`Measured::upto`] the clip) gives the same text as the whole summary when
/// the line clips it to `room` characters after `before` characters: the whole text is then
/// longer than `room`, and the cut falls inside what is stored.
fn summary_suffices(f: &FactsRef<'_>, summary: &Measured<'_>, before: usize, room: usize) -> bool {
    f.summary_complete || room < before + summary.chars
}

/// Whether lines of `width` columns can need more of a summary than a block's hot frame holds
/// ([`HOT_CHARS`]): `log` uses at least 47 columns before the summary, `tree` 12 and the kind.
pub fn needs_cold(width: usize) -> bool {
    width >= 12 + 1 + HOT_CHARS
}

/// Appends `s` made terminal-safe ([`safe`]).
pub fn push_safe(out: &mut Vec<u8>, s: &str) {
    if plain(s) {
        out.extend_from_slice(s.as_bytes());
    } else {
        out.extend_from_slice(safe(s).as_bytes());
    }
}

/// Appends `s` in the colour `style` when `color` is on ([`Ui::paint`]), made safe first
/// when `make_safe`.
fn push_painted(out: &mut Vec<u8>, color: bool, style: &str, s: &str, make_safe: bool) {
    if color {
        out.extend_from_slice(b"\x1b[");
        out.extend_from_slice(style.as_bytes());
        out.push(b'm');
    }
    if make_safe {
        push_safe(out, s);
    } else {
        out.extend_from_slice(s.as_bytes());
    }
    if color {
        out.extend_from_slice(b"\x1b[0m");
    }
}

/// What became of one entry of a rendered listing (`log`'s pieces, `tree`'s chunks).
pub enum Item {
    /// Written: its bytes end at this offset.
    Shown(usize),
    /// Left out (by `log --type`, by `tree`'s filter).
    Left,
    /// The outline cannot show it: decode the line.
    Decode,
}

/// Appends a number.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    let mut b = [0u8; 20];
    out.extend_from_slice(digits(n, &mut b));
}

/// The decimal digits of `n`, written at the end of `buf`.
fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        #[allow(clippy::cast_possible_truncation)]
        {
            buf[i] = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Characters of `s` once made safe ([`safe`]).
fn safe_chars(s: &str) -> usize {
    if plain(s) { s.len() } else { chars(&safe(s)) }
}

/// Whether `s` is printable ASCII (and tabs): [`safe`] leaves it as it is. Eight bytes at a
/// time: a word passes when no byte is below 0x20, at or above 0x7f.
fn plain(s: &str) -> bool {
    plain_bytes(s.as_bytes())
}

/// [`plain`] of bytes.
fn plain_bytes(b: &[u8]) -> bool {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(c) = b.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let w = u64::from_le_bytes(w);
        // A byte below 0x20, or of 0x7f or above (adding 1 carries into the top bit); a
        // word that may hold one is checked byte by byte.
        let low = w.wrapping_sub(LO * 0x20) & !w & HI;
        let high = (w | w.wrapping_add(LO)) & HI;
        if low | high != 0 {
            return plain_tail(&b[i..]);
        }
        i += 8;
    }
    plain_tail(&b[i..])
}

fn plain_tail(b: &[u8]) -> bool {
    b.iter().all(|&b| (0x20..0x7f).contains(&b) || b == b'\t')
}

/// The terminal columns of `s` once made safe ([`sa::columns`]): its length when it is
/// printable ASCII.
fn chars(s: &str) -> usize {
    if plain(s) {
        s.len()
    } else {
        s.chars().map(sa::columns).sum()
    }
}

/// The longest start of `s` that takes at most `n` columns once made safe.
fn take_chars(s: &str, n: usize) -> &str {
    if s.len() <= n && plain(s) {
        return s;
    }
    if s.as_bytes().get(..n).is_some_and(plain_bytes) {
        return &s[..n];
    }
    let mut used = 0;
    for (i, c) in s.char_indices() {
        used += sa::columns(c);
        if used > n {
            return &s[..i];
        }
    }
    s
}

/// Session text measured once: a line needs its length in characters, whether [`safe`] leaves
/// it alone, and then its bytes, and each scan of a summary costs.
#[derive(Clone, Copy)]
struct Measured<'a> {
    s: &'a str,
    /// Characters of `s` (not of its safe form).
    chars: usize,
    /// [`plain`]: printable ASCII, so also one byte per character.
    plain: bool,
}

impl<'a> Measured<'a> {
    fn new(s: &'a str) -> Self {
        let plain = plain(s);
        Self {
            s,
            chars: if plain { s.len() } else { chars(s) },
            plain,
        }
    }

    /// `s` measured as far as a line clipped to `bound` characters needs: when its first
    /// `bound + 1` bytes are plain, it is longer than `bound` characters whatever follows, and
    /// a clip keeps at most `bound` of them, so only they are scanned (and kept).
    fn upto(s: &'a str, bound: usize) -> Self {
        match s.as_bytes().get(..=bound) {
            Some(head) if plain_bytes(head) => Self {
                // A plain prefix is ASCII: `bound + 1` is a character boundary.
                s: &s[..=bound],
                chars: bound + 1,
                plain: true,
            },
            _ => Self::new(s),
        }
    }

    /// Characters of `s` once made safe.
    fn safe_chars(&self) -> usize {
        if self.plain {
            self.chars
        } else {
            chars(&safe(self.s))
        }
    }

    /// Appends `s` made safe.
    fn push(&self, out: &mut Vec<u8>) {
        if self.plain {
            out.extend_from_slice(self.s.as_bytes());
        } else {
            out.extend_from_slice(safe(self.s).as_bytes());
        }
    }
}

/// Appends the pieces' concatenation clipped to `max` characters ([`sa::clip`]), made safe;
/// `total` is its length in characters.
fn push_clipped(out: &mut Vec<u8>, pieces: &[Measured<'_>], total: usize, max: usize) {
    if total <= max {
        for p in pieces {
            p.push(out);
        }
        return;
    }
    let mut left = max.saturating_sub(1);
    for p in pieces {
        if left == 0 {
            break;
        }
        if p.plain {
            // One byte per character.
            let t = &p.s.as_bytes()[..left.min(p.s.len())];
            out.extend_from_slice(t);
            left -= t.len();
        } else {
            let t = take_chars(p.s, left);
            push_safe(out, t);
            left -= chars(t);
        }
    }
    out.extend_from_slice("…".as_bytes());
}

/// The short time of a row (`2026-01-01 12:34:56`, [`sa::short_time`]), using `buf`.
fn short_time<'b>(ts: &Timestamp<'_>, buf: &'b mut [u8; 24]) -> std::borrow::Cow<'b, str> {
    match ts {
        Timestamp::None => "".into(),
        Timestamp::Ms(ms) => {
            // Listings print runs of entries of one day: the date is worked out once a day.
            thread_local! {
                static DAY: std::cell::Cell<(i64, [u8; 10])> =
                    const { std::cell::Cell::new((i64::MIN, [0; 10])) };
            }
            let day = ms.div_euclid(86_400_000);
            let (d, date) = DAY.get();
            if d == day {
                buf[..10].copy_from_slice(&date);
                let rem = ms.rem_euclid(86_400_000);
                let two = |buf: &mut [u8; 24], at: usize, v: i64| {
                    #[allow(clippy::cast_possible_truncation)]
                    {
                        buf[at] = b'0' + (v / 10) as u8;
                        buf[at + 1] = b'0' + (v % 10) as u8;
                    }
                };
                two(buf, 11, rem / 3_600_000);
                buf[13] = b':';
                two(buf, 14, rem / 60_000 % 60);
                buf[16] = b':';
                two(buf, 17, rem / 1000 % 60);
            } else {
                write_iso(*ms, buf);
                let mut date = [0u8; 10];
                date.copy_from_slice(&buf[..10]);
                DAY.set((day, date));
            }
            buf[10] = b' ';
            std::str::from_utf8(&buf[..19]).unwrap_or("").into()
        }
        Timestamp::Text(t) => sa::short_time(Some(t)).into(),
    }
}

/// `log`'s line of an entry (`log::line_text`, and the boundary line before it), with
/// `width` columns; `false` (nothing written) when the stored summary does not suffice.
pub fn write_log_line(
    out: &mut Vec<u8>,
    color: bool,
    row: &OutlineRow<'_>,
    f: &FactsRef<'_>,
    labels: &sa::LabelMap,
    width: usize,
    lanes: Option<(&str, &str, &str)>,
) -> bool {
    let mut tbuf = [0u8; 24];
    let time = short_time(&row.timestamp, &mut tbuf);
    let time = sa::time_column(&time);
    let time_chars = chars(&time);
    let kind = Measured::new(f.kind());
    let kind_chars = kind.chars;
    let kind_safe = kind.safe_chars();
    let model = f.model.map(Measured::new);
    let model_chars = model.map_or(0, |m| 1 + m.safe_chars());
    let label = if labels.is_empty() {
        None
    } else {
        labels.get(row.id)
    };
    let label_chars = label.map_or(0, |l| 3 + safe_chars(l));
    let mut tok = [0u8; 20];
    let tok = digits(f.tokens, &mut tok);
    // The tokens are printed `~Nt`.
    let used = 8
        + 1
        + time_chars
        + 1
        + 11.max(kind_chars)
        + 2
        + model_chars
        + label_chars
        + (tok.len() + 2)
        + 2;
    let room = width.saturating_sub(used).max(20);
    let summary = Measured::upto(f.summary, room);
    if !summary_suffices(f, &summary, 0, room) {
        return false;
    }
    // `log --all`: (lanes before, the boundary's lane, the glyph and its space).
    let (lanes_before, through, glyph) = lanes.unwrap_or(("", "", ""));
    if let Some(b) = f.boundary {
        out.extend_from_slice(lanes_before.as_bytes());
        out.extend_from_slice(through.as_bytes());
        let mut mark = Vec::with_capacity(b.len() + 32);
        mark.extend_from_slice("──── ".as_bytes());
        push_safe(&mut mark, b);
        mark.extend_from_slice(" ────".as_bytes());
        push_painted(out, color, "35", &String::from_utf8_lossy(&mark), false);
        out.push(b'\n');
    }
    out.extend_from_slice(lanes_before.as_bytes());
    out.extend_from_slice(glyph.as_bytes());
    push_painted(out, color, "33", sa::short_id(row.id), true);
    out.push(b' ');
    out.extend_from_slice(time.as_bytes());
    out.push(b' ');
    kind.push(out);
    out.extend_from_slice(&b"           "[..11usize.saturating_sub(kind_safe)]);
    if let Some(m) = model {
        out.push(b' ');
        m.push(out);
    }
    if let Some(l) = label {
        out.extend_from_slice(b" [");
        push_safe(out, l);
        out.push(b']');
    }
    out.extend_from_slice(b"  ");
    push_clipped(out, &[summary], summary.chars, room);
    out.extend_from_slice(b"  ~");
    out.extend_from_slice(tok);
    out.extend_from_slice(b"t\n");
    true
}

/// `log --json`'s record of an entry (`log::entry_json`), with `extra` (`--all`'s column,
/// leaf and active) after it; `false` (nothing written) when the stored summary is cut.
pub fn write_log_json(
    out: &mut Vec<u8>,
    row: &OutlineRow<'_>,
    f: &FactsRef<'_>,
    labels: &sa::LabelMap,
    extra: Option<(usize, bool, bool)>,
) -> io::Result<bool> {
    // A timestamp or parentId that is no string (a number, `true`) is printed as the line has
    // it, which the row does not hold: it tells such a value from a missing or null one only
    // by decoding the line (pi writes a string time; only roots have no parent id).
    if !f.summary_complete
        || row.timestamp == Timestamp::None
        || !matches!(row.parent_id, ParentId::Id(_))
    {
        return Ok(false);
    }
    let opt = |out: &mut Vec<u8>, s: Option<&str>| -> io::Result<()> {
        match s {
            Some(s) => pisess_formats::js::to_writer(&mut *out, s).map_err(io::Error::from),
            None => out.write_all(b"null"),
        }
    };
    out.extend_from_slice(b"{\"type\":\"entry\",\"id\":");
    pisess_formats::js::to_writer(&mut *out, row.id)?;
    out.extend_from_slice(b",\"parentId\":");
    match row.parent_id {
        ParentId::Id(p) => pisess_formats::js::to_writer(&mut *out, p)?,
        ParentId::Missing | ParentId::Null => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"entryType\":");
    pisess_formats::js::to_writer(&mut *out, f.entry_type())?;
    out.extend_from_slice(b",\"role\":");
    opt(out, f.role)?;
    out.extend_from_slice(b",\"timestamp\":");
    opt(out, row.timestamp.text().as_deref())?;
    out.extend_from_slice(b",\"model\":");
    opt(out, f.model)?;
    out.extend_from_slice(b",\"summary\":");
    pisess_formats::js::to_writer(&mut *out, f.summary)?;
    out.extend_from_slice(b",\"tokens\":");
    push_u64(out, f.tokens);
    if let Some(l) = labels.get(row.id) {
        out.extend_from_slice(b",\"label\":");
        pisess_formats::js::to_writer(&mut *out, l)?;
    }
    if let Some(b) = f.boundary {
        out.extend_from_slice(b",\"boundary\":");
        pisess_formats::js::to_writer(&mut *out, b)?;
    }
    if let Some((column, leaf, active)) = extra {
        out.extend_from_slice(b",\"column\":");
        push_u64(out, column as u64);
        out.extend_from_slice(if leaf {
            b",\"leaf\":true"
        } else {
            b",\"leaf\":false"
        });
        out.extend_from_slice(if active {
            b",\"active\":true"
        } else {
            b",\"active\":false"
        });
    }
    out.extend_from_slice(b"}\n");
    Ok(true)
}

/// `tree`'s line of an entry after its `prefix` (of `prefix_chars` characters): `mark`, the
/// short id, the label and the clipped kind and summary, with `width` columns; `false`
/// (nothing written) when the stored summary does not suffice.
#[allow(clippy::too_many_arguments)]
pub fn write_tree_line(
    out: &mut Vec<u8>,
    color: bool,
    prefix: (&str, &str),
    prefix_chars: usize,
    mark: &str,
    row: &OutlineRow<'_>,
    f: &FactsRef<'_>,
    label: Option<&String>,
    width: usize,
) -> bool {
    // The label's width on screen: the colour's escape bytes take none.
    let mut label_chars = 0;
    let label = label.map(|l| {
        let shown = format!("[{}]", safe(l));
        label_chars = 1 + chars(&shown);
        let mut b = Vec::new();
        b.push(b' ');
        push_painted(&mut b, color, "1;35", &shown, false);
        String::from_utf8_lossy(&b).into_owned()
    });
    let room = width
        .saturating_sub(prefix_chars + 12 + label_chars)
        .max(20);
    let kind = Measured::new(f.kind());
    let summary = Measured::upto(f.summary, room.saturating_sub(kind.chars + 1));
    if !summary_suffices(f, &summary, kind.chars + 1, room) {
        return false;
    }
    out.extend_from_slice(prefix.0.as_bytes());
    out.extend_from_slice(prefix.1.as_bytes());
    out.extend_from_slice(mark.as_bytes());
    out.push(b' ');
    push_painted(out, color, "33", sa::short_id(row.id), true);
    if let Some(l) = &label {
        out.extend_from_slice(l.as_bytes());
    }
    out.push(b' ');
    if summary.chars == 0 {
        // No summary (an assistant reply of tool calls the filter hides): no space after the
        // kind, so the line does not end in one.
        let n = kind.chars;
        push_clipped(out, &[kind], n, room);
    } else {
        let total = kind.chars + 1 + summary.chars;
        let space = Measured {
            s: " ",
            chars: 1,
            plain: true,
        };
        push_clipped(out, &[kind, space, summary], total, room);
    }
    out.push(b'\n');
    true
}

/// Writes all of `slices` (with `writev` where the writer has it), in as few calls as it takes.
pub fn write_all_vectored(w: &mut impl Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut slices, 0);
    while !slices.is_empty() {
        match w.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes `buf` out when it holds more than a few lines' worth, keeping it for reuse.
pub fn drain(ui: &mut Ui, buf: &mut Vec<u8>, force: bool) -> io::Result<()> {
    if force || buf.len() >= 1 << 16 {
        ui.out().write_all(buf)?;
        buf.clear();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_what_safe_leaves_alone() {
        for s in [
            "",
            "abc",
            "0123456789abcdef",
            "tab\there and more text",
            "x\u{7f}yyyyyyyyyyyy",
            "yyyyyyyyyyyyé",
            "~~~~~~~~}}}}}}}} !!!!!!!!",
            "line\nbreak........",
            "\u{1b}[0m........",
        ] {
            assert_eq!(
                plain(s),
                matches!(safe(s), std::borrow::Cow::Borrowed(_)) && s.is_ascii(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn a_text_measured_up_to_the_clip_clips_as_the_whole_text() {
        for s in [
            "",
            "short",
            "exactly ten",
            "a plain summary that is longer than most bounds here",
            "plain head, then \u{1b}[31m an escape",
            "plain head, then é",
            "é at the start of a long enough text",
        ] {
            for bound in 0..30 {
                let whole = Measured::new(s);
                let part = Measured::upto(s, bound);
                assert_eq!(bound < whole.chars, bound < part.chars, "{s:?} {bound}");
                let (mut a, mut b) = (Vec::new(), Vec::new());
                push_clipped(&mut a, &[whole], whole.chars, bound);
                push_clipped(&mut b, &[part], part.chars, bound);
                assert_eq!(a, b, "{s:?} {bound}");
            }
        }
    }

    #[test]
    fn clipping_pieces_matches_clipping_their_concatenation() {
        for (pieces, max) in [
            (vec!["user", " ", "hello world"], 8),
            (vec!["user", " ", "héllo wörld"], 9),
            (vec!["a", " ", "b"], 3),
            (vec!["abc", " ", "d\u{1b}e"], 4),
            (vec!["abc", " ", "d\u{1b}e"], 20),
            (vec!["tool", " ", "abcdefgh\u{1b}ij"], 8),
            (vec!["tool", " ", "abcdefgh\u{1b}ij"], 12),
            (vec!["tööl", " ", "abcdefghij"], 9),
            (vec!["user", " ", "汉字汉字汉字汉字"], 9),
            (vec!["user", " ", "汉字汉字汉字汉字"], 10),
            (vec!["汉字", " ", "a\u{1b}b汉字"], 12),
        ] {
            let whole: String = pieces.concat();
            let mut out = Vec::new();
            let measured: Vec<Measured<'_>> = pieces.iter().map(|p| Measured::new(p)).collect();
            let total = measured.iter().map(|m| m.chars).sum();
            push_clipped(&mut out, &measured, total, max);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                safe(&sa::clip(&whole, max)),
                "{pieces:?} {max}"
            );
        }
    }
}
