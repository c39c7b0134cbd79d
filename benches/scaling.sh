#!/usr/bin/env bash
# Growth check (runs from any directory, ~2-3 minutes): does a command's time grow with its input
# about linearly? Each shape is built at a size N and at 4N, the command timed at both (median of
# RUNS processes), and the ratio printed: ~4x is linear, and a ratio above GROWTH_LIMIT (default
# 6) is flagged as faster than linear. Not a pass/fail target of an issue: a tripwire for the
# accidental quadratic loops sessions 43-44 shipped and found (a per-line re-measure in `ls`, a
# chain walk in a sort comparator in `stats`, a list scan in `compact`'s summary, a pairwise key
# check at import), each of which passed every test.
#
# Shapes (benches/scaling.py writes them, except the generated sessions):
#   sessions   N small sessions from pisess-bench-gen: ls, stats, files '**', grep -l
#   forkchain  N sessions, each a fork (parentSession) of the one before: stats
#   chain      an N-entry chain from pisess-bench-gen: compact (writing, the default summary)
#   wideargs   one tool call with N argument keys: import
#
# Environment: RUNS (default 3), GROWTH_LIMIT (default 6), SCALE (multiplies every N; default
# 1), CARGO_TARGET_DIR (default <root>/target), WORK (scratch folder, default a temp dir).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=benches/common.sh
source "$here/common.sh"
export RUNS=${RUNS:-3} GROWTH_LIMIT=${GROWTH_LIMIT:-6} SCALE=${SCALE:-1}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
export BIN=$(bench_bin)

bench_machine

echo
echo "== building release binaries (target dir $CARGO_TARGET_DIR)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-cli --bin pisess
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-benches \
    --bin pisess-bench-gen

bench_scratch pisess-scaling
python3 "$here/scaling.py"
