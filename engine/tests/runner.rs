//! Integration tests of pisess-engine.
#![allow(clippy::unwrap_used)]
