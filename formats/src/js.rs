//! JSON text exactly as JavaScript's `JSON.stringify` writes it.
//!
//! pi writes every line with `JSON.stringify(obj)`: compact, keys in insertion order, strings
//! escaped only where ECMAScript requires it, numbers in ECMAScript `Number::toString` form.
//! Everything pisess writes (migrated lines, new entries, forks) goes through this module so
//! that the bytes are the ones pi would have written for the same object.
//!
//! Invariants:
//! - [`write_str`] escapes `"` `\\` and U+0000..U+001F only (`\b \f \n \r \t` by name, the rest as
//!   lower-case `\u00xx`); everything else, including U+2028/U+2029 and U+007F, is literal.
//! - [`write_f64`] gives the shortest digits that round-trip (as ECMAScript requires) and the
//!   ECMAScript layout: plain decimals for exponents in `-7 < e < 21`, else `de±x`; `-0` prints
//!   `0`; NaN and infinities print `null`.
//! - [`write_value`] keeps object keys in the order of the map (serde_json's `preserve_order`),
//!   and prints every number as JavaScript would after `JSON.parse` (integers beyond 2^53 lose
//!   precision exactly as they do in pi).

use serde_json::Value;

/// JavaScript's `String.prototype.trim`: ECMAScript white space (which counts U+FEFF and not
/// U+0085, unlike Rust's `str::trim`) and line terminators cut from both ends.
pub fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| (c.is_whitespace() && c != '\u{85}') || c == '\u{FEFF}')
}

/// Appends `s` as a JSON string literal, escaped as `JSON.stringify` escapes it.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Most strings (ids, timestamps, paths) have nothing to escape: one check, one copy.
    if !any_needs_escape(bytes) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Skip eight plain bytes at a time (most text has nothing to escape).
        if let Some(word) = bytes.get(i..i + 8) {
            let mut w = [0u8; 8];
            w.copy_from_slice(word);
            if !needs_escape(u64::from_le_bytes(w)) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(b >> 4) as usize]);
                out.push(HEX[(b & 0xf) as usize]);
                i += 1;
                start = i;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(esc);
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether [`write_str`] would escape anything in `s` (exactly: `"`, `\\` or a control
/// character). A caller that writes many strings may check them together once and, where
/// nothing needs escaping, write each between quotes as it is.
pub fn needs_escaping(s: &str) -> bool {
    any_needs_escape(s.as_bytes()) && s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\')
}

/// Whether any byte of `bytes` may need escaping: 64 bytes at a time, exactly ([`BLOCK`]: a
/// loop the compiler turns into vector compares), then the rest eight at a time
/// ([`needs_escape`]: the last few with the rest's last eight bytes, or, in a shorter rest,
/// padded with spaces).
#[inline]
fn any_needs_escape(bytes: &[u8]) -> bool {
    let mut blocks = bytes.chunks_exact(BLOCK);
    for block in &mut blocks {
        // One branch per block: the flags of all its bytes are or-ed, without an early exit.
        let hit = block.iter().fold(false, |hit, &b| {
            hit | (b < 0x20) | (b == b'"') | (b == b'\\')
        });
        if hit {
            return true;
        }
    }
    let bytes = blocks.remainder();
    let mut words = bytes.chunks_exact(8);
    let mut w = [0u8; 8];
    for word in &mut words {
        w.copy_from_slice(word);
        if needs_escape(u64::from_le_bytes(w)) {
            return true;
        }
    }
    let rest = words.remainder();
    if rest.is_empty() {
        return false;
    }
    match bytes.len().checked_sub(8).and_then(|at| bytes.get(at..)) {
        Some(last) => w.copy_from_slice(last),
        None => {
            w = [b' '; 8];
            for (d, s) in w.iter_mut().zip(rest) {
                *d = *s;
            }
        }
    }
    needs_escape(u64::from_le_bytes(w))
}

/// Bytes [`any_needs_escape`] checks at once in a long string.
const BLOCK: usize = 64;

/// Whether any byte of `w` is below 0x20, `"` or `\\` (may also say so for a few bytes that
/// are fine, never the other way round: the caller then looks at each byte).
#[inline]
fn needs_escape(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte is zero in `x` exactly when the high bit of the result is set for it (or a
    // borrow from a lower zero byte sets it: a false positive, which only costs a slow step).
    let zero = |x: u64| x.wrapping_sub(ONES) & !x;
    // Bytes below 0x20: subtracting 0x20 borrows into the high bit of bytes < 0x20 (for
    // bytes >= 0x80 the `!w` mask clears it).
    let below_space = w.wrapping_sub(ONES * 0x20) & !w;
    // The three tests' high bits together: one branch, not three.
    (below_space | zero(w ^ (ONES * u64::from(b'"'))) | zero(w ^ (ONES * u64::from(b'\\')))) & HIGH
        != 0
}

/// Appends `v` formatted as ECMAScript `Number.prototype.toString()` (and `JSON.stringify`).
pub fn write_f64(out: &mut Vec<u8>, v: f64) {
    if !v.is_finite() {
        out.extend_from_slice(b"null");
        return;
    }
    if v == 0.0 {
        out.push(b'0');
        return;
    }
    // Rust's `{:e}` yields the shortest round-trip digits, e.g. "-1.2345e-7".
    let sci = format!("{v:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let k = digits.len() as i32;
    // ECMAScript: value = 0.d1d2…dk × 10^n  (n = exp + 1).
    let n = exp + 1;
    if neg {
        out.push(b'-');
    }
    if k <= n && n <= 21 {
        out.extend_from_slice(&digits);
        out.extend(std::iter::repeat_n(b'0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.extend_from_slice(&digits[..n as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-n) as usize));
        out.extend_from_slice(&digits);
    } else {
        out.push(digits[0]);
        if k > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        let e = n - 1;
        out.push(if e < 0 { b'-' } else { b'+' });
        out.extend_from_slice(e.unsigned_abs().to_string().as_bytes());
    }
}

/// Appends a serde_json number as JavaScript prints the `Number` that `JSON.parse` makes of it.
pub fn write_number(out: &mut Vec<u8>, n: &serde_json::Number) {
    if let Some(u) = n.as_u64()
        && u <= (1u64 << 53)
    {
        out.extend_from_slice(u.to_string().as_bytes());
        return;
    }
    if let Some(i) = n.as_i64()
        && (-(1i64 << 53)..=(1i64 << 53)).contains(&i)
    {
        out.extend_from_slice(i.to_string().as_bytes());
        return;
    }
    write_f64(out, n.as_f64().unwrap_or(f64::NAN));
}

/// Appends `v` as `JSON.stringify(v)` would write it.
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    // An explicit stack keeps deeply nested input from overflowing the call stack.
    enum Step<'a> {
        Value(&'a Value),
        Raw(&'static [u8]),
        Key(&'a str),
    }
    let mut stack = vec![Step::Value(v)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Raw(b) => out.extend_from_slice(b),
            Step::Key(k) => {
                write_str(out, k);
                out.push(b':');
            }
            Step::Value(v) => match v {
                Value::Null => out.extend_from_slice(b"null"),
                Value::Bool(true) => out.extend_from_slice(b"true"),
                Value::Bool(false) => out.extend_from_slice(b"false"),
                Value::Number(n) => write_number(out, n),
                Value::String(s) => write_str(out, s),
                Value::Array(items) => {
                    out.push(b'[');
                    stack.push(Step::Raw(b"]"));
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Raw(b","));
                        }
                    }
                }
                Value::Object(map) => {
                    out.push(b'{');
                    stack.push(Step::Raw(b"}"));
                    let entries: Vec<_> = map.iter().collect();
                    for (i, (k, item)) in entries.into_iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        stack.push(Step::Key(k));
                        if i > 0 {
                            stack.push(Step::Raw(b","));
                        }
                    }
                }
            },
        }
    }
}

/// A `serde_json` formatter that prints numbers as [`write_f64`] and [`write_number`] do, so that
/// anything serialized through it (typed structs as well as values) shows each number as pi's
/// `JSON.stringify` would: `0.000005`, not `5e-6`; `1`, not `1.0`; an integer beyond 2^53 as
/// the double it becomes. Strings are escaped by `serde_json`, as `JSON.stringify` escapes them.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsFormatter;

impl serde_json::ser::Formatter for JsFormatter {
    fn write_f64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f64) -> std::io::Result<()> {
        let mut b = Vec::with_capacity(24);
        write_f64(&mut b, v);
        w.write_all(&b)
    }

    fn write_f32<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: f32) -> std::io::Result<()> {
        self.write_f64(w, f64::from(v))
    }

    fn write_u64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: u64) -> std::io::Result<()> {
        let mut b = Vec::with_capacity(24);
        write_number(&mut b, &serde_json::Number::from(v));
        w.write_all(&b)
    }

    fn write_i64<W: ?Sized + std::io::Write>(&mut self, w: &mut W, v: i64) -> std::io::Result<()> {
        let mut b = Vec::with_capacity(24);
        write_number(&mut b, &serde_json::Number::from(v));
        w.write_all(&b)
    }

    #[allow(clippy::cast_precision_loss)]
    fn write_u128<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        v: u128,
    ) -> std::io::Result<()> {
        match u64::try_from(v) {
            Ok(v) => self.write_u64(w, v),
            Err(_) => self.write_f64(w, v as f64),
        }
    }

    #[allow(clippy::cast_precision_loss)]
    fn write_i128<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        v: i128,
    ) -> std::io::Result<()> {
        match i64::try_from(v) {
            Ok(v) => self.write_i64(w, v),
            Err(_) => self.write_f64(w, v as f64),
        }
    }
}

/// Serializes `v` compactly into `w` with [`JsFormatter`]: the bytes `serde_json::to_writer`
/// writes, except that numbers read as JavaScript prints them.
pub fn to_writer<W: std::io::Write, T: ?Sized + serde::Serialize>(
    w: W,
    v: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, JsFormatter);
    v.serialize(&mut ser)
}

/// `JSON.stringify(v)` as a `String`.
pub fn to_string(v: &Value) -> String {
    let mut out = Vec::new();
    write_value(&mut out, v);
    // Only whole UTF-8 strings and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {

    #[test]
    fn trim_is_javascripts() {
        assert_eq!(super::trim("\u{feff} a b\u{2028}\u{3000}"), "a b");
        assert_eq!(super::trim("\u{85}a\u{85}"), "\u{85}a\u{85}");
        assert_eq!(super::trim("\u{200b}a"), "\u{200b}a");
    }

    use super::*;

    /// Numbers read from a line and printed through [`to_writer`] come out as node prints
    /// `JSON.stringify(JSON.parse(line))` (the expected text is node 20's output).
    #[test]
    fn to_writer_prints_numbers_as_javascript() {
        let line = r#"{"a":0.0000015,"b":1.0,"c":1E5,"d":-0,"e":9007199254740993,"f":100000000000000000000,"g":5e-6,"h":-18446744073709551616,"i":1e21,"j":1.5e-7}"#;
        let v: Value = serde_json::from_str(line).unwrap();
        let mut out = Vec::new();
        to_writer(&mut out, &v).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":0.0000015,"b":1,"c":100000,"d":0,"e":9007199254740992,"f":100000000000000000000,"g":0.000005,"h":-18446744073709552000,"i":1e+21,"j":1.5e-7}"#
        );
        // Typed values too, and strings escaped as `JSON.stringify` escapes them.
        let mut out = Vec::new();
        to_writer(&mut out, &(0.25f64, 3u64, -2i64, "x\u{2028}\u{7f}\n")).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[0.25,3,-2,\"x\u{2028}\u{7f}\\n\"]"
        );
    }

    fn num(v: f64) -> String {
        let mut out = Vec::new();
        write_f64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    /// `needs_escaping` says yes exactly when a byte is `"`, `\\` or below 0x20, wherever
    /// it sits (short strings, word edges, the last few bytes), and never for bytes above.
    #[test]
    fn needs_escaping_is_exact() {
        let naive = |s: &str| s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\');
        let long = "abcdefgh".repeat(8);
        let longer = format!("{long}{long}é😀x");
        let fillers = [
            "",
            "a",
            "abcdefg",
            "abcdefgh",
            "abcdefghijklmno",
            "é😀\u{7f}\u{2028}x",
            &long[..63],
            &long,
            &longer,
        ];
        let specials = [
            '"', '\\', '\u{0}', '\n', '\u{1f}', ' ', '!', '#', '[', ']', '\u{7f}', 'é',
        ];
        for a in fillers {
            for b in fillers {
                assert!(!needs_escaping(&format!("{a}{b}")) || naive(&format!("{a}{b}")));
                for c in specials {
                    let t = format!("{a}{c}{b}");
                    assert_eq!(needs_escaping(&t), naive(&t), "{t:?}");
                }
            }
        }
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // Expected strings are what node prints for String(x).
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "0"),
            (1.0, "1"),
            (100.0, "100"),
            (1.5, "1.5"),
            (-2.25, "-2.25"),
            (0.1, "0.1"),
            (0.000001, "0.000001"),
            (0.0000001, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (123456789012345680000.0, "123456789012345680000"),
            (1e21, "1e+21"),
            (1.2345e22, "1.2345e+22"),
            (1766006435055.0, "1766006435055"),
            (0.0123, "0.0123"),
            (3.0000000000000004, "3.0000000000000004"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for &(v, want) in cases {
            assert_eq!(num(v), want, "formatting {v:e}");
        }
    }

    #[test]
    fn strings_escape_like_json_stringify() {
        let mut out = Vec::new();
        write_str(
            &mut out,
            "a\"b\\c\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é😀\u{2028}/",
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u0001\\u001f\u{7f}é😀\u{2028}/\""
        );
    }

    /// The byte-at-a-time escaper `write_str` replaced: the word-at-a-time skip must agree.
    fn escape_slowly(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    proptest::proptest! {
        #[test]
        fn word_skip_agrees_with_the_byte_loop(s in "(\\PC|[\"\\\\\\x00-\\x1f\\x7f-\\xff]){0,40}") {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            proptest::prop_assert_eq!(String::from_utf8(out).unwrap(), escape_slowly(&s));
        }
    }

    #[test]
    fn values_keep_key_order_and_js_numbers() {
        let v: Value = serde_json::from_str(
            r#"{"z":1,"a":[1.50,1e2,-0,{"k":null}],"m":true,"big":9007199254740993}"#,
        )
        .unwrap();
        assert_eq!(
            to_string(&v),
            r#"{"z":1,"a":[1.5,100,0,{"k":null}],"m":true,"big":9007199254740992}"#
        );
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let depth = 100_000;
        let mut v = Value::Null;
        for _ in 0..depth {
            v = Value::Array(vec![v]);
        }
        let s = to_string(&v);
        assert_eq!(s.len(), depth * 2 + 4);
        // serde_json's own drop of the nested Value recurses; leak it in the test.
        std::mem::forget(v);
    }
}
