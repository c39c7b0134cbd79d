//! Integration tests of pisess-migrate.
#![allow(clippy::unwrap_used)]
