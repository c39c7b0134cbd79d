//! Integration tests of pisess-migrate (one binary; modules by topic).
#![allow(clippy::unwrap_used)]
mod arb;
mod common;
#[path = "../../formats/tests/common.rs"]
mod inputs;
mod test_fixtures;
mod test_oracle;
mod test_props;
mod test_units;
