//! The `pisess` binary.
fn main() {}
