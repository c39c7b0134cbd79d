//! Integration tests of pisess-formats (one binary; modules by topic).
#![allow(clippy::unwrap_used)]
mod common;
mod test_conformance;
mod test_corpus;
