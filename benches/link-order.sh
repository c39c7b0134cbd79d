#!/usr/bin/env bash
# Regenerates cli/link-order.txt: the functions that pisess's quick commands execute, which the
# linker places first and together in the binary's text (cli/build.rs passes the file to lld as
# --symbol-ordering-file).
#
# Why: a quick command (re-import of an unchanged folder, `ls`, `files`, `show`, `log` of a small
# session) is mostly the start of a process, and much of that is page faults on the binary's
# text. Each fault on a file-backed page maps the 16 pages around it (the kernel's fault-around),
# about 4 us each on this VM, so code scattered over 8 MB of text costs ~50 faults; packed, the
# same code takes a dozen (README, The store: re-import).
#
# How: each command runs once under valgrind's callgrind with --demangle=no, which names every
# function that executed an instruction; the symbol names (as the linker sees them) go to the
# file, the unchanged re-import's first. Valgrind's virtual CPU has no AVX-512, so for the
# CPU-dispatched C functions it saw (glibc's string functions, blake3's SIMD kernels) every
# variant in the binary is listed too, after everything else (listed among the rest, the unused
# variants would spread out the code that does run). A name that a later build no longer has (a changed
# generic instance, a ThinLTO-promoted local whose `.llvm.N` suffix moved) is ignored by the
# linker; the file only ever makes the layout better or leaves it as it was, never changes what
# the program does. Regenerate after large changes to the start-up path and compare with
# `perf stat -e page-faults`. Any change to a crate renames some of its functions (ThinLTO's
# `.llvm.N` suffixes), so the list fades with every commit: benches/compare.sh prints how many
# of its names the build lacks (session 26 found 158 of 1,480 missing; regenerating took the re-import from 86 to 70 faults).
#
# Usage: benches/link-order.sh [PISESS_BINARY]   (default: the release build under
# CARGO_TARGET_DIR or target/). Needs valgrind and nm.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$root/target}
bin=${1:-$target/$(rustc -vV | sed -n 's/^host: //p')/release/pisess}
[ -x "$bin" ] || { echo "link-order.sh: no binary at $bin (cargo build --release first)" >&2; exit 2; }
command -v valgrind > /dev/null || { echo "link-order.sh: valgrind is needed" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/sessions/cwd-a" "$work/home"
cp "$root"/fixtures/sessions/*.jsonl "$work/sessions/cwd-a/"
export PISESS_STORE=$work/store.redb HOME=$work/home PI_CODING_AGENT_SESSION_DIR=$work/sessions
session=$work/sessions/cwd-a/04-many-branches.jsonl

# The fresh import is untraced: it runs long enough that where its code lies does not matter.
# The first re-import opens the store and writes its sources copy (engine/src/source_copy.rs);
# the next ones answer from the copy, the path that matters most, so it is traced first.
"$bin" import "$work/sessions" > /dev/null
"$bin" import "$work/sessions" > /dev/null

n=0
trace() {
  n=$((n + 1))
  valgrind --tool=callgrind --demangle=no --callgrind-out-file="$work/cg.$n" "$bin" "$@" \
    > /dev/null 2> "$work/vg.$n" || true
  [ -s "$work/cg.$n" ] || { echo "link-order.sh: callgrind failed on: $*" >&2; cat "$work/vg.$n" >&2; exit 1; }
}
trace import "$work/sessions"
trace ls
trace files --json 'src/**'
trace files src/main.rs
trace log "$session"
trace tree "$session"
trace show "$session" @leaf
trace context --json "$session"
trace diff "$session" @root @leaf

nm --defined-only "$bin" | awk '{print $3}' | sort -u > "$work/defined"
python3 - "$work" "$n" "$root/cli/link-order.txt" <<'EOF'
import re, sys
work, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
defined = set(open(f"{work}/defined").read().split())
order, seen = [], set()

def add(name):
    if name in defined and name not in seen:
        seen.add(name)
        order.append(name)

variants = []
for i in range(1, n + 1):
    names, ran = {}, []
    for line in open(f"{work}/cg.{i}"):
        m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not m:
            continue
        kind, ident, name = m.groups()
        if name:
            names[ident] = re.sub(r"'\d+$", "", name)  # callgrind's recursion-depth suffix
        if kind == "fn" and ident in names:
            ran.append(names[ident])
    for name in sorted(set(ran)):
        add(name)
        # CPU-dispatched families: glibc's __memmove_avx_unaligned_erms -> every __memmove_*,
        # blake3's _blake3_hash_many_avx2 -> every _blake3_hash_many_*.
        m = re.match(r"^(__[a-z0-9]+_|_blake3_[a-z_]+?_)(sse2|sse41|avx|avx2|avx512|evex)", name)
        if m:
            variants.extend(sorted(d for d in defined if d.startswith(m.group(1))))
# The variants last, so that the ones valgrind did not run do not spread out the code that ran.
for name in variants:
    add(name)

with open(out, "w") as f:
    f.write("".join(s + "\n" for s in order))
print(f"link-order.sh: {len(order)} functions from {n} commands -> {out}")
EOF
