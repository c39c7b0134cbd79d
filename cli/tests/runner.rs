//! Integration tests of the pisess CLI (one binary; modules by topic).
#![allow(clippy::unwrap_used)]

mod common;
mod test_check;
