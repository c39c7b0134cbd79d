//! Writing one JSON object piece by piece, so that a long list inside it is printed as its
//! items are read instead of being built in memory first.
//!
//! Invariant: the bytes are those `serde_json::to_writer` prints for the whole object (no
//! spaces; keys in the order written). Keys are written as given, so they must be plain ASCII
//! without quotes or backslashes (the callers' keys are constants).

use std::io::{Result, Write};

/// Writes `,"key":` and then `v`.
pub fn field<W: Write>(out: &mut W, key: &str, v: &impl serde::Serialize) -> Result<()> {
    write!(out, ",\"{key}\":")?;
    serde_json::to_writer(&mut *out, v).map_err(std::io::Error::from)
}

/// Writes one item of a list: a comma unless it is the `first`, then `v`.
pub fn item<W: Write>(out: &mut W, first: &mut bool, v: &impl serde::Serialize) -> Result<()> {
    if !std::mem::take(first) {
        out.write_all(b",")?;
    }
    serde_json::to_writer(&mut *out, v).map_err(std::io::Error::from)
}
