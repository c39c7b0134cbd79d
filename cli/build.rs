//! Link-time layout of the `pisess` binary: on x86_64 Linux with glibc, where rustc (1.90 and
//! later, this workspace's minimum) links with its own lld, the functions listed in
//! `link-order.txt` are placed first and together in the text (lld's `--symbol-ordering-file`).
//! They are what the quick commands execute, so starting one maps a dozen 64 KiB windows of the
//! binary instead of ~50 (see `benches/link-order.sh`, which regenerates the list).
//!
//! Invariants: the list only moves code, never changes it, and a name missing from the build is
//! ignored (`--no-warn-symbol-ordering`); the flags are passed only when the default linker is in
//! use — a configured linker (`RUSTC_LINKER`), linker flags in RUSTFLAGS, or
//! `PISESS_LINK_ORDER=0` leave the link as cargo makes it.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=PISESS_LINK_ORDER");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");

    let var = |k: &str| env::var(k).unwrap_or_default();
    let default_lld = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let linker_chosen = env::var_os("RUSTC_LINKER").is_some()
        || flags.contains("linker")
        || flags.contains("link-self-contained")
        || flags.contains("fuse-ld");
    if !default_lld || linker_chosen || var("PISESS_LINK_ORDER") == "0" {
        return;
    }
    let list = Path::new(&var("CARGO_MANIFEST_DIR")).join("link-order.txt");
    if !list.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=pisess=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo:rustc-link-arg-bin=pisess=-Wl,--no-warn-symbol-ordering");
}
