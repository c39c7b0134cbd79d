//! Small borrowed building blocks of the typed view: [`Str`], [`Field`] and raw JSON.
//!
//! Invariants:
//! - [`Str`] borrows from the input line whenever the JSON string has no escapes, and owns the
//!   decoded text otherwise; its value is always the decoded string.
//! - [`Field`] distinguishes a missing key from an explicit `null`, because pi's
//!   `JSON.stringify` omits `undefined` but writes `null`, and pisess writes back what it read.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde_json::value::RawValue;

/// A JSON string value, borrowed from the line when possible.
#[derive(Clone, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Str<'a>(pub Cow<'a, str>);

impl<'a> Str<'a> {
    /// The decoded string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
    /// An owned copy that no longer borrows the line.
    pub fn into_owned(self) -> Str<'static> {
        Str(Cow::Owned(self.0.into_owned()))
    }
}

impl fmt::Debug for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Str<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// A field read as text when it is a string and as `null` when it holds any other value
/// (`#[serde(deserialize_with = "text_or_null")]`): for fields pi writes as text but whose
/// other values pi still loads (a numeric `timestamp`), so one such value does not cost the
/// entry its typed view. Strings borrow from the line where they can, as [`Str`] does.
pub fn text_or_null<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Field<Str<'a>>, D::Error> {
    d.deserialize_any(TextVisitor { js_string: false })
}

/// A `label` as pi's label map takes it (`#[serde(deserialize_with = "label_text")]`): a
/// truthy value sets the label, a falsy one (`null`, `false`, `0`, `""`) clears it. Text is
/// kept as it is; `true`, a number, an array and an object are kept as JavaScript's `String`
/// writes them (`"true"`, `"5"`, `"1,2"`, `"[object Object]"`; an empty array's `""` clears,
/// where pi keeps the label `[]`).
pub fn label_text<'de: 'a, 'a, D: Deserializer<'de>>(d: D) -> Result<Field<Str<'a>>, D::Error> {
    d.deserialize_any(TextVisitor { js_string: true })
}

/// Reads text as it is (borrowed where it can be); any other value as `null`, or with
/// `js_string` as a truthy value's JavaScript `String` ([`label_text`]), a falsy one as `null`.
struct TextVisitor {
    js_string: bool,
}

impl TextVisitor {
    fn text<'x>(t: String) -> Field<Str<'x>> {
        Field::Value(Str(Cow::Owned(t)))
    }
}

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Field<Str<'de>>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Value(Str(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Self::text(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Self::text(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(if self.js_string && v {
            Self::text("true".into())
        } else {
            Field::Null
        })
    }
    #[allow(clippy::cast_precision_loss)]
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        self.visit_f64(v as f64)
    }
    #[allow(clippy::cast_precision_loss)]
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        self.visit_f64(v as f64)
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // A JavaScript number: 12345678901234567890 is 12345678901234567000.
        Ok(if self.js_string && v != 0.0 {
            Self::text(crate::js::to_string(&serde_json::Value::from(v)))
        } else {
            Field::Null
        })
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        if !self.js_string {
            while a.next_element::<de::IgnoredAny>()?.is_some() {}
            return Ok(Field::Null);
        }
        // `String(array)`: the items joined with commas (`null` as nothing; an item that is
        // itself an array or object as its JSON text, which pi would write otherwise).
        let mut parts = Vec::new();
        while let Some(x) = a.next_element::<serde_json::Value>()? {
            parts.push(match x {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => s,
                other => crate::js::to_string(&other),
            });
        }
        Ok(Self::text(parts.join(",")))
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        while a.next_entry::<de::IgnoredAny, de::IgnoredAny>()?.is_some() {}
        Ok(if self.js_string {
            Self::text("[object Object]".into())
        } else {
            Field::Null
        })
    }
}

/// A JSON string kept as its raw text (quotes and escapes included) and decoded on demand.
///
/// Used for the large fields of a line (message text, thinking, tool output, image data,
/// summaries): parsing only scans them, with no copy and no allocation.
#[derive(Clone, Copy)]
pub struct RawStr<'a>(&'a RawValue);

impl<'a> RawStr<'a> {
    /// The raw JSON text, quotes included.
    pub fn raw_json(&self) -> &'a str {
        self.0.get()
    }

    /// The decoded string (borrowed when the JSON text has no escapes).
    pub fn decode(&self) -> Cow<'a, str> {
        let raw = self.0.get();
        let inner = &raw[1..raw.len() - 1];
        if !inner.contains('\\') {
            return Cow::Borrowed(inner);
        }
        // The text was validated as a JSON string when the line was parsed (a lone surrogate
        // escape passes that check, and is read as U+FFFD here).
        Cow::Owned(parse_owned::<String>(raw).unwrap_or_default())
    }

    /// Length in UTF-16 code units of the decoded string (JavaScript's `length`).
    pub fn utf16_len(&self) -> usize {
        self.decode().encode_utf16().count()
    }

    /// Appends the string as `JSON.stringify` writes it: the raw text when its escapes are
    /// already the ones JavaScript uses (no `\u` escapes, no `\/`), else decoded and re-escaped.
    pub fn write_js_string(&self, out: &mut Vec<u8>) {
        let raw = self.0.get();
        if !raw.contains("\\u") && !raw.contains("\\/") {
            out.extend_from_slice(raw.as_bytes());
        } else {
            crate::js::write_str(out, &self.decode());
        }
    }
}

impl fmt::Debug for RawStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.decode(), f)
    }
}

impl PartialEq for RawStr<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.decode() == other.decode()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(d)?;
        if raw.get().starts_with('"') {
            Ok(RawStr(raw))
        } else {
            Err(de::Error::invalid_type(
                de::Unexpected::Other(raw_kind(raw.get())),
                &"a string",
            ))
        }
    }
}

/// An object field that may be missing, `null`, or hold a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Field<T> {
    /// The key is absent.
    #[default]
    Missing,
    /// The key is present with `null`.
    Null,
    /// The key is present with a value.
    Value(T),
}

impl<T> Field<T> {
    /// The value, if present and not null.
    pub fn get(&self) -> Option<&T> {
        match self {
            Self::Value(v) => Some(v),
            _ => None,
        }
    }
    /// The value, if present and not null, by value.
    pub fn into_option(self) -> Option<T> {
        match self {
            Self::Value(v) => Some(v),
            _ => None,
        }
    }
    /// Whether the key is present (even as `null`).
    pub fn is_present(&self) -> bool {
        !matches!(self, Self::Missing)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Self::Null,
            Some(v) => Self::Value(v),
        })
    }
}

/// Any JSON value, kept as the exact text of the line.
pub type Raw<'a> = &'a RawValue;

/// Parses `text` as `serde_json` does, except that it reads what pi's `JSON.parse` reads where
/// serde refuses it: lone UTF-16 surrogate escapes (which Rust strings cannot hold) are read as
/// U+FFFD, and an object that holds a key twice is read with the last value in the first one's
/// place ([`crate::duplicate_keys`]). Only when the plain parse fails is the text searched for
/// either (the merge only when serde names a repeated key), so the common case costs nothing
/// extra; when neither mends it, the error is that of the last text parsed before the merge.
///
/// Nesting deeper than serde_json's 128 levels is read too, up to [`DEEPEST`] levels, on a
/// stack that grows as the parse needs it ([`from_text`]).
pub fn parse_owned<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let err = match from_text(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    let clean = lone_surrogates_replaced(text).map(|(c, _)| c);
    let (text, err) = match &clean {
        Some(c) => match from_text(c) {
            Ok(v) => return Ok(v),
            Err(e) => (c.as_str(), e),
        },
        None => (text, err),
    };
    if !crate::duplicate_keys::is_repeated_key(&err) {
        return Err(err);
    }
    match crate::duplicate_keys::merged(text) {
        Some((merged, _)) => from_text(&merged).map_err(|_| err),
        None => Err(err),
    }
}

/// The deepest nesting of arrays and objects [`parse_owned`] reads. pi's `JSON.parse` reads
/// any depth, but node's stack ends its recursive `JSON.stringify` at about 4,180 levels (pi
/// 1.6.0's context of such an entry fails with "Maximum call stack size exceeded"); every
/// value read here must also be walked by recursive code (serialised, rendered, dropped), so the
/// bound is of the same order as pi's. Measured at this depth (session 31): a release build's
/// walks take 0.5–1 MiB of stack, a debug build's 2–8 MiB; the commands that show a value walk
/// it on the main thread (8 MiB), and the import's walks on pool threads passed with 512 KiB.
pub const DEEPEST: usize = 4096;

/// `serde_json::from_str`, except that a text nested deeper than serde_json's limit of 128
/// levels but no deeper than [`DEEPEST`] is parsed without the limit, on a stack that grows on
/// the heap as the parse recurses (`serde_stacker`), so that no thread's stack can overflow.
/// Only a text that failed the plain parse for its depth is measured and parsed again.
pub fn from_text<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let err = match serde_json::from_str(text) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if !is_too_deep(&err) || nesting(text.as_bytes()) > DEEPEST {
        return Err(err);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let v = T::deserialize(serde_stacker::Deserializer::new(&mut de))?;
    de.end()?;
    Ok(v)
}

/// Whether serde_json refused a text for nesting deeper than its limit of 128 levels.
pub fn is_too_deep(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("recursion limit exceeded")
}

/// How deeply arrays and objects nest in `b` (strings skipped; a string that does not end
/// ends the count).
pub fn nesting(b: &[u8]) -> usize {
    let (mut depth, mut deepest, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        match b[i] {
            b'"' => match crate::line::scan_string(b, i) {
                Ok(end) => {
                    i = end;
                    continue;
                }
                Err(_) => break,
            },
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    deepest
}

/// `text` with every lone UTF-16 surrogate escape (`\ud83d` not followed by a low surrogate
/// escape, or a low one `\udc00`–`\udfff` not after a high one) replaced by `\ufffd`, with
/// how many were replaced, or `None` when it has none.
///
/// JavaScript strings may hold lone surrogates (a string cut inside an emoji) and pi's
/// `JSON.stringify` writes them as such escapes; `JSON.parse` reads them back, but Rust strings
/// cannot hold them, so `serde_json` refuses the whole line. The replacement has the same length
/// (six bytes for six), so byte offsets and columns stay those of the line.
pub fn lone_surrogates_replaced(text: &str) -> Option<(String, usize)> {
    let b = text.as_bytes();
    let unit = |at: usize| -> Option<u16> {
        // `\uXXXX` at `at`: the code unit.
        if b.get(at) != Some(&b'\\') || b.get(at + 1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(b.get(at + 2..at + 6)?).ok()?;
        u16::from_str_radix(hex, 16).ok()
    };
    let mut lone: Vec<usize> = Vec::new();
    let mut i = 0;
    while let Some(k) = memchr::memchr(b'\\', &b[i..]) {
        let at = i + k;
        match unit(at) {
            Some(0xD800..=0xDBFF) => {
                if matches!(unit(at + 6), Some(0xDC00..=0xDFFF)) {
                    i = at + 12;
                } else {
                    lone.push(at);
                    i = at + 6;
                }
            }
            Some(0xDC00..=0xDFFF) => {
                lone.push(at);
                i = at + 6;
            }
            Some(_) => i = at + 6,
            // Any other escape is two characters; skipping the second keeps `\\u…` (an escaped
            // backslash then `u`) from being read as an escape.
            None => i = at + 2,
        }
        if i >= b.len() {
            break;
        }
    }
    if lone.is_empty() {
        return None;
    }
    let mut out = text.to_owned();
    for &at in &lone {
        // Six ASCII bytes replaced by six ASCII bytes: char boundaries are kept.
        out.replace_range(at + 2..at + 6, "fffd");
    }
    Some((out, lone.len()))
}

/// Whether a raw JSON value is JavaScript-truthy as a parsed value (pi skips falsy lines).
pub fn raw_is_truthy(raw: &str) -> bool {
    !matches!(raw.trim(), "null" | "false" | "0" | "\"\"" | "-0") && !is_zero_number(raw.trim())
}

fn is_zero_number(s: &str) -> bool {
    let first = s.as_bytes().first().copied();
    if !matches!(first, Some(b'-' | b'0'..=b'9')) {
        return false;
    }
    s.parse::<f64>().map(|v| v == 0.0).unwrap_or(false)
}

/// The JSON kind of a raw value, for messages (`object`, `array`, `string`, …).
pub fn raw_kind(raw: &str) -> &'static str {
    match raw.trim_start().as_bytes().first() {
        Some(b'{') => "object",
        Some(b'[') => "array",
        Some(b'"') => "string",
        Some(b't') => "true",
        Some(b'f') => "false",
        Some(b'n') => "null",
        _ => "number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `{"a":[[…"x"…]]}` with `arrays` nested arrays (`arrays + 1` levels in all).
    fn nested(arrays: usize) -> String {
        format!(r#"{{"a":{}"x"{}}}"#, "[".repeat(arrays), "]".repeat(arrays))
    }

    #[test]
    fn nesting_counts_arrays_and_objects_but_not_brackets_in_strings() {
        assert_eq!(nesting(b"1"), 0);
        assert_eq!(nesting(br#"{"a":[1,{"b":[]}],"c":{}}"#), 4);
        assert_eq!(nesting(br#"{"a":"[[[[{{{\"[["}"#), 1);
        assert_eq!(nesting(nested(300).as_bytes()), 301);
    }

    #[test]
    fn values_nested_up_to_deepest_are_read_beyond_serdes_limit() {
        // serde_json alone stops at 128 levels; these are read, on any thread's stack.
        for arrays in [126, 127, 500, DEEPEST - 1] {
            let text = nested(arrays);
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&text).is_ok(),
                arrays + 1 < 128
            );
            let v: serde_json::Value = parse_owned(&text).unwrap();
            let mut at = &v["a"];
            for _ in 0..arrays {
                at = &at[0];
            }
            assert_eq!(at, "x", "{arrays}");
            // Written back, it is the same text (a thread of 1 MiB holds the walk).
            let back = std::thread::Builder::new()
                .stack_size(1 << 20)
                .spawn(move || {
                    let t = crate::js::to_string(&v);
                    drop(v);
                    t
                })
                .unwrap()
                .join()
                .unwrap();
            assert_eq!(back, text);
        }
        // Deeper than DEEPEST: serde_json's error, which names the depth.
        let err = parse_owned::<serde_json::Value>(&nested(DEEPEST)).unwrap_err();
        assert!(is_too_deep(&err), "{err}");
        // Deep and mended: a lone surrogate and a repeated key in a deep value.
        let text = format!(
            r#"{{"a":1,"b":{}"\ud83d"{},"a":2}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        let v: serde_json::Value = parse_owned(&text).unwrap();
        assert_eq!(v["a"], 2);
        assert_eq!(v.as_object().unwrap().keys().next().unwrap(), "a");
        // Deep but broken: an error, not a value.
        assert!(parse_owned::<serde_json::Value>(&nested(300)[1..]).is_err());
    }

    #[test]
    fn lone_surrogates_are_replaced_and_pairs_kept() {
        let r = |t: &str| lone_surrogates_replaced(t).map(|(s, _)| s);
        assert_eq!(
            r(r#"{"a":"x\ud83d"}"#).as_deref(),
            Some(r#"{"a":"x\ufffd"}"#)
        );
        assert_eq!(
            r(r#"{"a":"\udc00y"}"#).as_deref(),
            Some(r#"{"a":"\ufffdy"}"#)
        );
        assert_eq!(
            r(r#"["\ud83d\ud83d\ude00","\uD800\u0041"]"#).as_deref(),
            Some(r#"["\ufffd\ud83d\ude00","\ufffd\u0041"]"#)
        );
        assert_eq!(lone_surrogates_replaced(r#""\ud800\udbff""#).unwrap().1, 2);
        // A pair, an escaped backslash before `ud83d`, other escapes: nothing to replace.
        assert_eq!(r(r#"{"a":"\ud83d\ude00 \\ud83d \n \u00e9"}"#), None);
        assert_eq!(r(r#"{"a":"\"}"#), None);
        assert_eq!(r("\\u12"), None);
        // What comes out parses, and a string with a pair still holds the emoji.
        let fixed = r(r#"{"a":"cut \ud83d","b":"\ud83d\ude00"}"#).unwrap();
        let v: serde_json::Value = serde_json::from_str(&fixed).unwrap();
        assert_eq!(v["a"], "cut \u{fffd}");
        assert_eq!(v["b"], "\u{1f600}");
    }

    #[test]
    fn parse_owned_reads_a_repeated_key_as_javascript_does() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Label {
            label: String,
            target: String,
        }
        let text = r#"{"label":"one","target":"t","label":"two\ud83d"}"#;
        assert!(serde_json::from_str::<Label>(text).is_err());
        assert_eq!(
            parse_owned::<Label>(text).unwrap(),
            Label {
                label: "two\u{fffd}".into(),
                target: "t".into()
            }
        );
        // Neither mend helps: the plain parse's error is the one returned.
        let err = parse_owned::<Label>(r#"{"label":"a","label":2}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate field"), "{err}");
    }

    #[test]
    fn str_borrows_without_escapes() {
        let s: Str<'_> = serde_json::from_str("\"abc\"").unwrap();
        assert!(matches!(s.0, Cow::Borrowed("abc")));
        let s: Str<'_> = serde_json::from_str("\"a\\nb\"").unwrap();
        assert_eq!(s.as_str(), "a\nb");
    }

    #[test]
    fn raw_str_decodes_and_rewrites_like_javascript() {
        let s: RawStr<'_> = serde_json::from_str(r#""a\nb\u00e9\/""#).unwrap();
        assert_eq!(s.decode(), "a\nbé/");
        let mut out = Vec::new();
        s.write_js_string(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), r#""a\nbé/""#);
        let plain: RawStr<'_> = serde_json::from_str(r#""x\"y""#).unwrap();
        assert!(matches!(plain.decode(), Cow::Owned(_)));
        let mut out = Vec::new();
        plain.write_js_string(&mut out);
        assert_eq!(out, br#""x\"y""#);
        assert!(serde_json::from_str::<RawStr<'_>>("5").is_err());
    }

    #[test]
    fn field_tells_missing_from_null() {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(default)]
            a: Field<f64>,
            #[serde(default)]
            b: Field<f64>,
            #[serde(default)]
            c: Field<f64>,
        }
        let t: T = serde_json::from_str(r#"{"a":null,"b":2}"#).unwrap();
        assert_eq!(
            (t.a, t.b, t.c),
            (Field::Null, Field::Value(2.0), Field::Missing)
        );
    }

    #[test]
    fn truthiness_matches_javascript() {
        for falsy in ["null", "false", "0", "\"\"", "-0", "0.0", "0e5"] {
            assert!(!raw_is_truthy(falsy), "{falsy}");
        }
        for truthy in ["1", "[]", "{}", "\"0\"", "true", "-1e-9"] {
            assert!(raw_is_truthy(truthy), "{truthy}");
        }
    }
}
