//! Writing one JSON object piece by piece, so that a long list inside it is printed as its
//! items are read instead of being built in memory first.
//!
//! Invariant: the bytes are those `pisess_formats::js::to_writer` prints for the whole object
//! (no spaces; keys in the order written; numbers as JavaScript prints them). Keys are written as given, so they must be plain ASCII
//! without quotes or backslashes (the callers' keys are constants).

use std::io::{Result, Write};

/// Writes `,"key":` and then `v`.
pub fn field<W: Write>(out: &mut W, key: &str, v: &impl serde::Serialize) -> Result<()> {
    write!(out, ",\"{key}\":")?;
    pisess_formats::js::to_writer(&mut *out, v).map_err(std::io::Error::from)
}

/// Writes one item of a list: a comma unless it is the `first`, then `v`.
pub fn item<W: Write>(out: &mut W, first: &mut bool, v: &impl serde::Serialize) -> Result<()> {
    if !std::mem::take(first) {
        out.write_all(b",")?;
    }
    pisess_formats::js::to_writer(&mut *out, v).map_err(std::io::Error::from)
}
