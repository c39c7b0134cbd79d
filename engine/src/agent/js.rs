//! JavaScript value semantics that pi's context code relies on.
//!
//! Invariants:
//! - every length is in UTF-16 code units ([`len16`]), as JavaScript's `String.length`;
//! - [`truthy`] is ECMAScript `ToBoolean` on a JSON value, with `None` standing for `undefined`;
//! - [`date_ms`] is `new Date(x).getTime()` for the values a session file can hold, as JSON
//!   (`null` for `NaN`); date-times without an offset are read as UTC (pi's reference box runs
//!   in UTC);
//! - [`num`] turns an `f64` into the JSON number `JSON.stringify` would print (integers as
//!   integers, `NaN`/infinities as `null`).

use serde_json::{Number, Value};
use std::cmp::Ordering;

/// `s.length` in JavaScript: the number of UTF-16 code units of `s`.
pub fn len16(s: &str) -> usize {
    // Every UTF-8 leading byte starts one code unit; 4-byte sequences need a surrogate pair.
    s.bytes()
        .map(|b| usize::from(b & 0xC0 != 0x80) + usize::from(b >= 0xF0))
        .sum()
}

/// JavaScript's default string comparison (`Array.prototype.sort` without a comparator):
/// UTF-16 code-unit order.
pub fn cmp16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The longest prefix of `s` of at most `max` UTF-16 code units that does not split a
/// surrogate pair (pi's `sliceHead`).
pub fn slice_head16(s: &str, max: usize) -> &str {
    let mut units = 0;
    for (i, c) in s.char_indices() {
        units += c.len_utf16();
        if units > max {
            return &s[..i];
        }
    }
    s
}

/// ECMAScript `ToBoolean`; `None` is `undefined`.
pub fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0 && !x.is_nan()),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(_) | Value::Object(_)) => true,
    }
}

/// `value == null` in JavaScript (`undefined` or `null`).
pub fn nullish(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

/// The JSON number (or `null`) that `JSON.stringify` prints for `x`.
pub fn num(x: f64) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    if x == x.trunc() && x.abs() < 9.007_199_254_740_992e15 {
        // Exact: |x| < 2^53.
        #[allow(clippy::cast_possible_truncation)]
        return Value::Number(Number::from(x as i64));
    }
    Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// `Number(v)` for a JSON number; anything else is `NaN` (pi only ever stores numbers here).
pub fn as_f64(v: Option<&Value>) -> f64 {
    v.and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// `v` as JavaScript's `+` reads it beside a number: `null` and `false` are 0, `true` is 1,
/// `undefined` (`None`) is `NaN`. (Text would make `+` join strings: read as `NaN` here.)
pub fn plus_operand(v: Option<&Value>) -> f64 {
    match v {
        Some(Value::Null) => 0.0,
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        other => as_f64(other),
    }
}

/// `String(v)` (template-literal conversion) for a JSON value; `None` is `undefined`.
pub fn to_js_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".to_owned(),
        Some(Value::Null) => "null".to_owned(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(n @ Value::Number(_)) => pisess_formats::js::to_string(n),
        Some(Value::Object(_)) => "[object Object]".to_owned(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                if nullish(Some(x)) {
                    String::new()
                } else {
                    to_js_string(Some(x))
                }
            })
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// `new Date(s).getTime()` of a string in whole milliseconds, `None` where that is `NaN`.
pub fn string_date_ms(s: &str) -> Option<i64> {
    let t = time_clip(parse_iso(s)?);
    #[allow(clippy::cast_possible_truncation)]
    t.is_finite().then_some(t as i64)
}

/// `new Date(v).getTime()` as the JSON value `JSON.stringify` prints (`null` for an invalid date).
pub fn date_ms(v: Option<&Value>) -> Value {
    match v {
        None => Value::Null,
        Some(Value::Null) => num(0.0),
        Some(Value::Bool(b)) => num(if *b { 1.0 } else { 0.0 }),
        Some(Value::Number(n)) => num(time_clip(n.as_f64().unwrap_or(f64::NAN))),
        Some(Value::String(s)) => parse_iso(s).map_or(Value::Null, |ms| num(time_clip(ms))),
        // An array is read as its text (`[2026]` is the year 2026); an object's text
        // (`[object Object]`) is no date.
        Some(a @ Value::Array(_)) => {
            parse_iso(&to_js_string(Some(a))).map_or(Value::Null, |ms| num(time_clip(ms)))
        }
        Some(Value::Object(_)) => Value::Null,
    }
}

fn time_clip(t: f64) -> f64 {
    if !t.is_finite() || t.abs() > 8.64e15 {
        f64::NAN
    } else {
        t.trunc() + 0.0
    }
}

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The ECMAScript date-time string format (`YYYY[-MM[-DD]][THH:mm[:ss[.sss]]][Z|±HH:mm]`,
/// with `±YYYYYY` extended years). Returns milliseconds since the epoch.
fn parse_iso(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize, n: usize| -> Option<i64> {
        let part = b.get(*i..*i + n)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        *i += n;
        Some(part.iter().fold(0i64, |a, d| a * 10 + i64::from(d - b'0')))
    };
    let year = match b.first()? {
        b'+' | b'-' => {
            let neg = b[0] == b'-';
            i = 1;
            let y = digits(&mut i, 6)?;
            if neg && y == 0 {
                return None;
            }
            if neg { -y } else { y }
        }
        _ => digits(&mut i, 4)?,
    };
    let (mut month, mut day) = (1, 1);
    if b.get(i) == Some(&b'-') {
        i += 1;
        month = digits(&mut i, 2)?;
        if b.get(i) == Some(&b'-') {
            i += 1;
            day = digits(&mut i, 2)?;
        }
    }
    let (mut h, mut mi, mut sec, mut ms) = (0, 0, 0, 0.0);
    let mut fraction_zero = true;
    let mut offset_min = 0i64;
    if matches!(b.get(i), Some(b'T' | b't' | b' ')) {
        i += 1;
        h = digits(&mut i, 2)?;
        if b.get(i) != Some(&b':') {
            return None;
        }
        i += 1;
        mi = digits(&mut i, 2)?;
        if b.get(i) == Some(&b':') {
            i += 1;
            sec = digits(&mut i, 2)?;
            if b.get(i) == Some(&b'.') {
                i += 1;
                let start = i;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                if i == start {
                    return None;
                }
                // Milliseconds: the first three digits, further digits truncated (as V8, which
                // still refuses `24:00:00.0001`).
                fraction_zero = s[start..i].bytes().all(|d| d == b'0');
                let frac = &s[start..i.min(start + 3)];
                let v: f64 = frac.parse().ok()?;
                ms = v * 10f64.powi(3 - i32::try_from(frac.len()).ok()?);
            }
        }
        match b.get(i) {
            Some(b'Z' | b'z') => i += 1,
            Some(&c @ (b'+' | b'-')) => {
                i += 1;
                let oh = digits(&mut i, 2)?;
                if b.get(i) == Some(&b':') {
                    i += 1;
                }
                let om = digits(&mut i, 2)?;
                if oh > 23 || om > 59 {
                    return None;
                }
                offset_min = (oh * 60 + om) * if c == b'+' { 1 } else { -1 };
            }
            _ => {}
        }
    }
    if i != b.len() {
        return None;
    }
    // V8 takes any day up to 31 in any month and rolls it over (February 30 is March 2).
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || h > 24
        || mi > 59
        || sec > 59
        || (h == 24 && (mi != 0 || sec != 0 || !fraction_zero))
    {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_min * 60;
    #[allow(clippy::cast_precision_loss)]
    Some(secs as f64 * 1000.0 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates() {
        assert_eq!(date_ms(Some(&json!("1970-01-01T00:00:00.000Z"))), json!(0));
        assert_eq!(
            date_ms(Some(&json!("2024-03-01T12:34:56.789Z"))),
            json!(1_709_296_496_789_i64)
        );
        assert_eq!(date_ms(Some(&json!("nope"))), Value::Null);
        // Values as node's `new Date(v).getTime()` gives them.
        assert_eq!(date_ms(Some(&json!([2026]))), json!(1_767_225_600_000_i64));
        assert_eq!(
            date_ms(Some(&json!(["2026-01-01T00:00:00Z"]))),
            json!(1_767_225_600_000_i64)
        );
        assert_eq!(date_ms(Some(&json!([]))), Value::Null);
        assert_eq!(date_ms(Some(&json!({}))), Value::Null);
        assert_eq!(date_ms(Some(&json!(1e20))), Value::Null);
        assert_eq!(date_ms(Some(&json!(1.7))), json!(1));
        assert_eq!(date_ms(Some(&json!(-1))), json!(-1));
        assert_eq!(date_ms(None), Value::Null);
    }

    #[test]
    fn lengths() {
        assert_eq!(len16("a😀é"), 4);
        assert_eq!(slice_head16("ab😀", 3), "ab");
        assert_eq!(slice_head16("ab😀", 4), "ab😀");
    }
}
