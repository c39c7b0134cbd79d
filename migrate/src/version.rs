//! Which migration steps a file needs, decided exactly as pi decides it.
//!
//! pi reads `const version = header?.version ?? 1` and compares it with numbers
//! (`version >= 3`, `version < 2`, `version < 3`), so JavaScript's `ToNumber` applies to whatever
//! the header holds: a missing or `null` version is 1, `"2"` is 2, `true` is 1, `[2]` is 2, and a
//! value that is not a number (`"abc"`, `{}`) is `NaN`, for which every comparison is false: pi
//! then runs neither step but still counts the session as migrated and rewrites the file.

use serde_json::{Map, Value};

/// The steps a file needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// The version as pi's comparisons see it (`NaN` when it is not a number).
    pub version: f64,
    /// v1 → v2 runs (`version < 2`).
    pub v1_to_v2: bool,
    /// v2 → v3 runs (`version < 3`).
    pub v2_to_v3: bool,
    /// pi counts the session as migrated and rewrites it (`!(version >= 3)`); when false the file
    /// is left exactly as it is.
    pub rewrite: bool,
}

impl Plan {
    /// The plan for a file whose header is `header`.
    pub fn for_header(header: &Map<String, Value>) -> Self {
        let version = match header.get("version") {
            None | Some(Value::Null) => 1.0,
            Some(v) => to_number(v),
        };
        Self {
            version,
            v1_to_v2: version < 2.0,
            v2_to_v3: version < 3.0,
            // `!(version >= 3)`: NaN rewrites too.
            rewrite: version.is_nan() || version < 3.0,
        }
    }
}

/// JavaScript's `ToNumber` of a parsed JSON value (arrays and objects through `ToPrimitive`).
pub fn to_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) => string_to_number(s),
        Value::Array(_) => string_to_number(&array_to_string(v)),
        Value::Object(_) => f64::NAN,
    }
}

/// `String(array)`: elements joined with `,` (nested arrays flattened the same way, `null` as
/// the empty string, objects as `[object Object]`), without recursion.
fn array_to_string(v: &Value) -> String {
    enum Step<'a> {
        Value(&'a Value),
        Comma,
    }
    let mut out = String::new();
    let mut stack = vec![Step::Value(v)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Comma => out.push(','),
            Step::Value(v) => match v {
                Value::Null => {}
                Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                Value::Number(n) => {
                    let mut buf = Vec::new();
                    pisess_formats::js::write_number(&mut buf, n);
                    out.push_str(&String::from_utf8_lossy(&buf));
                }
                Value::String(s) => out.push_str(s),
                Value::Object(_) => out.push_str("[object Object]"),
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate().rev() {
                        stack.push(Step::Value(item));
                        if i > 0 {
                            stack.push(Step::Comma);
                        }
                    }
                }
            },
        }
    }
    out
}

/// JavaScript's `StringToNumber`: white space trimmed, empty ⇒ 0, `0x`/`0o`/`0b` integers,
/// `Infinity` with an optional sign, or a decimal literal; anything else ⇒ `NaN`.
pub fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_space);
    if t.is_empty() {
        return 0.0;
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return f64::NAN;
            }
            return digits.chars().fold(0.0, |acc, c| {
                acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
            });
        }
    }
    let (sign, body) = match t.as_bytes()[0] {
        b'-' => (-1.0, &t[1..]),
        b'+' => (1.0, &t[1..]),
        _ => (1.0, t),
    };
    if body == "Infinity" {
        return sign * f64::INFINITY;
    }
    if !is_decimal_literal(body) {
        return f64::NAN;
    }
    body.parse::<f64>().map_or(f64::NAN, |v| sign * v)
}

/// `digits [. digits?] [exp]` or `. digits [exp]`, with `exp = (e|E) [+|-] digits`.
fn is_decimal_literal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let int = digits(&mut i);
    let mut frac = 0;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        frac = digits(&mut i);
    }
    if int == 0 && frac == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// ECMAScript WhiteSpace and LineTerminator code points.
fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\u{9}' | '\u{a}' | '\u{b}' | '\u{c}' | '\u{d}' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan(v: Option<Value>) -> (bool, bool, bool) {
        let mut m = Map::new();
        if let Some(v) = v {
            m.insert("version".into(), v);
        }
        let p = Plan::for_header(&m);
        (p.v1_to_v2, p.v2_to_v3, p.rewrite)
    }

    #[test]
    fn plans_follow_javascript_comparisons() {
        assert_eq!(plan(None), (true, true, true));
        assert_eq!(plan(Some(Value::Null)), (true, true, true));
        assert_eq!(plan(Some(json!(1))), (true, true, true));
        assert_eq!(plan(Some(json!(2))), (false, true, true));
        assert_eq!(plan(Some(json!(2.5))), (false, true, true));
        assert_eq!(plan(Some(json!(3))), (false, false, false));
        assert_eq!(plan(Some(json!(99))), (false, false, false));
        assert_eq!(plan(Some(json!("2"))), (false, true, true));
        assert_eq!(plan(Some(json!(" 3 "))), (false, false, false));
        assert_eq!(plan(Some(json!(""))), (true, true, true));
        assert_eq!(plan(Some(json!(true))), (true, true, true));
        assert_eq!(plan(Some(json!(false))), (true, true, true));
        assert_eq!(plan(Some(json!([2]))), (false, true, true));
        assert_eq!(plan(Some(json!([[3]]))), (false, false, false));
        assert_eq!(plan(Some(json!([]))), (true, true, true));
        // NaN: no step, but pi still rewrites the file.
        assert_eq!(plan(Some(json!("abc"))), (false, false, true));
        assert_eq!(plan(Some(json!({}))), (false, false, true));
        assert_eq!(plan(Some(json!([1, 2]))), (false, false, true));
    }

    #[test]
    fn string_to_number_matches_ecmascript() {
        let cases: &[(&str, f64)] = &[
            ("0x1f", 31.0),
            ("0b101", 5.0),
            ("0o17", 15.0),
            ("  +1.5e1\n", 15.0),
            ("-Infinity", f64::NEG_INFINITY),
            (".5", 0.5),
            ("5.", 5.0),
            ("\u{feff}2\u{3000}", 2.0),
        ];
        for &(s, want) in cases {
            assert_eq!(string_to_number(s), want, "{s:?}");
        }
        for nan in [
            "inf", "NaN", "1e", "0x", "-0x1", "1_000", "..5", "e5", "infinity",
        ] {
            assert!(string_to_number(nan).is_nan(), "{nan:?}");
        }
    }
}
