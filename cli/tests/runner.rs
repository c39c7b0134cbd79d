//! Integration tests of the pisess CLI.
#![allow(clippy::unwrap_used)]
