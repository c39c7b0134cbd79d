#!/usr/bin/env bash
# Issue 7: one command that runs every scenario side by side with its alternatives — pisess, the
# reference (pi 1.6.0 through ../shared/oracle/oracle), jq, rg where it answers the same
# question, and the parse floor — and prints one table of ratios plus peak memory.
#
# Scenarios (each subject interleaved with its baselines, A B C A B C ..., min and median):
#   parse      reading + typing the corpus's biggest file: pisess's reader vs a serde_json::Value
#              parse on one core (issue 2: >= 2x), 2 threads vs 1, and the peak RSS of reading
#              the 1 GiB session above a process that reads nothing (< 64 MiB)
#   import     cold import of the corpus (20 top-level files, ~128 MB) vs the parse floor
#              (serde_json::Value per line, one file per process, summed, / 2 = ideal 2-thread
#              rayon; also measured: a real rayon + Value parse on a 2-thread pool, summed), `jq -c .`
#              over the same files, and `oracle load` of every file
#   reimport   a folder of COPIES copies of the corpus (~1 GB): store size vs its bytes, and
#              re-import of the unchanged folder vs `cat` of its bytes (issue 3: >= 50x)
#   context    `pisess context --json` at the leaf of the corpus's biggest file vs `oracle context`
#   log, tree  `pisess log` / `pisess tree` of the same file vs `oracle load` (what pi must do)
#   files      `pisess files 'src/**'` across the corpus vs jq and rg, and `src/**` and
#              `src/main.rs` on the 1 GB folder's store vs the parse floor (issue 3: >= 100x)
#   lca        entry by id, k-th ancestor and `diff --json LEAF SIBLING` (LCA) on a CHAIN-entry
#              linear chain vs a 1,000-entry one (issue 3: <= 3x), and vs `oracle path` of both
#              entries (pi has no LCA; it walks both paths)
#   export     `pisess export --format jsonl|md -o F` vs `cat` and `oracle load`
#   migrate    `pisess migrate --jobs 2` on a sample of v1/v2 files vs `oracle migrate FILE` each,
#              and vs `--jobs 1` (issue 6: >= 20x and >= 1.7x)
#   ls         import of a folder of LS_N small sessions into a fresh store vs the measured parse
#              floor of its files (one process: pisess-bench-skeleton floor), then `pisess ls`
#              over it vs `oracle list DIR`
#   images     a session of IMAGES_BYTES (2 GiB) that is mostly base64 images: import vs the
#              parse floor, store size, peak RSS, then context at its leaf and export
#   big        a BIG_BYTES session (default 1 GiB, from pisess-bench-gen, cached): context at the
#              leaf vs `oracle context` (issue 4: >= 100x), context at a shallow entry (a short
#              branch) vs the leaf of a SMALL_BYTES session (issue 4: <= 2x), log/tree/show vs
#              `oracle load` (issue 5: >= 100x; the oracle's own --timing separates node's start
#              and pi's `SessionManager.open` from the oracle's output, which V8 cannot build for
#              1 GiB), peak RSS of its import (< 256 MiB), and
#              1 MB appended to it vs a fresh 1 MB session (issue 3: <= 2x), and the import
#              that completes its last line after an import saw it cut short (information). The oracle gets ONE
#              run with ORACLE_TIMEOUT; if it does not finish, the ratio is printed as ">= X".
#
# Times are wall-clock, of the whole process (start included), of copies of the binaries made
# for the run as `cargo install` would make them (see the build step below), measured by
# pisess-bench-run (benches/src/bin): clock read, posix_spawn, wait4, clock read, so no shell,
# Python fork or /usr/bin/time is in the time (compare.py's docstring says exactly what is
# timed); CPU = user+sys and peak memory = ru_maxrss ("Maximum resident set size", as
# `/usr/bin/time -v` reports it; for a pipeline, its largest process) from that wait4().
# Ratios use medians. A reference that times out gives a lower bound (">="); one that fails
# gives no bound ("~", never counted as met).
# The store is imported (untimed, but the time is printed) before the query scenarios: pisess
# answers from its store, the others from the files.
#
# Environment (defaults in brackets): RUNS [5], SLOW_RUNS [3] (runs of subjects over ~1 s),
# TARGET_RUNS [15] (at least this many runs for the quick subjects of parse, re-import, the 1 GB
# file queries and migrate --jobs 2 vs 1, whose targets sit near their thresholds),
# ORACLE_TIMEOUT [180 s], BIG_BYTES [1073741824], SMALL_BYTES [1048576], CHAIN [1000000],
# LS_N [5000], MIGRATE_SAMPLE [40], COPIES [8], COMPACT_WINDOW [200000],
# IMAGES_BYTES [2147483648], IMAGE_SIZE [262144],
# SKIP (comma list of scenario names to skip),
# CARGO_TARGET_DIR [<root>/target], PISESS_CORPUS [../shared/oracle/corpus output],
# PISESS_BENCH_CACHE [benches/.cache], PISESS_ORACLE, WORK [mktemp dir, removed at the end].
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=benches/common.sh
source "$here/common.sh"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
export RUNS=${RUNS:-5} SLOW_RUNS=${SLOW_RUNS:-3} TARGET_RUNS=${TARGET_RUNS:-15} ORACLE_TIMEOUT=${ORACLE_TIMEOUT:-180}
export BIG_BYTES=${BIG_BYTES:-1073741824} SMALL_BYTES=${SMALL_BYTES:-1048576}
export CHAIN=${CHAIN:-1000000} LS_N=${LS_N:-5000} MIGRATE_SAMPLE=${MIGRATE_SAMPLE:-40}
export COMPACT_WINDOW=${COMPACT_WINDOW:-200000}
export IMAGES_BYTES=${IMAGES_BYTES:-2147483648} IMAGE_SIZE=${IMAGE_SIZE:-262144}
export SKIP=${SKIP:-}
export ORACLE=${PISESS_ORACLE:-$root/../shared/oracle/oracle}
export BIN=$(bench_bin)
cache=${PISESS_BENCH_CACHE:-$here/.cache}
export CACHE=$cache
started=$(date +%s)

bench_machine
echo "scale: BIG_BYTES=$BIG_BYTES COMPACT_WINDOW=$COMPACT_WINDOW SMALL_BYTES=$SMALL_BYTES CHAIN=$CHAIN LS_N=$LS_N MIGRATE_SAMPLE=$MIGRATE_SAMPLE RUNS=$RUNS SLOW_RUNS=$SLOW_RUNS TARGET_RUNS=$TARGET_RUNS ORACLE_TIMEOUT=${ORACLE_TIMEOUT}s"

for tool in jq rg; do
    if ! command -v "$tool" >/dev/null; then
        pkg=$tool
        [[ $tool == rg ]] && pkg=ripgrep
        echo "installing $pkg (apt-get)"
        if [[ $(id -u) == 0 ]]; then apt-get install -y -qq "$pkg" >/dev/null 2>&1 || true; else sudo -n apt-get install -y -qq "$pkg" >/dev/null 2>&1 || true; fi
    fi
done
echo "jq: $(jq --version 2>/dev/null || echo missing); rg: $(rg --version 2>/dev/null | sed -n 1p); node: $(node --version 2>/dev/null || echo missing)"

echo
echo "== building release binaries (target dir $CARGO_TARGET_DIR)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-cli -p pisess-benches --bins
# The binaries are timed as installed (`cargo install` copies them), not where the linker wrote
# them. How a file was written decides the page-cache pages that hold it, and so what starting
# it costs: on Linux 6.18/ext4 a copy sits in large folios and a file the linker has just
# written in 4 KiB pages, which makes every `pisess` process ~0.3-0.4 ms slower to start and end
# (README, Performance, session 21). A fresh copy each run, beside the build (same filesystem).
installed=$BIN/installed
rm -rf "$installed" && mkdir -p "$installed"
for b in pisess pisess-bench-parse pisess-bench-read pisess-bench-run pisess-bench-gen pisess-bench-skeleton; do
    cp "$BIN/$b" "$installed/$b"
done
export BIN=$installed
# The link order (cli/link-order.txt) goes stale as the code changes: a name the build no longer
# has is ignored, and the code it stood for is spread over the text again, which the quick
# subjects (the re-import above all) pay for in page faults. Say how stale it is.
if command -v nm >/dev/null && [[ -f $root/cli/link-order.txt ]]; then
    stale=$(sort -u "$root/cli/link-order.txt" | comm -23 - <(nm --defined-only "$BIN/pisess" | awk '{print $3}' | sort -u) | wc -l)
    echo "link order: $stale of $(wc -l < "$root/cli/link-order.txt") names not in this build$( ((stale > 20)) && echo ' (run benches/link-order.sh, then build again)')"
fi

bench_work pisess-compare
# Issue 3's 1 GB folder (re-import, file queries, store size): COPIES copies of the corpus.
export COPIES=${COPIES:-8} BIGDIR=$WORK/big1g
rm -rf "$BIGDIR"
for ((k = 0; k < COPIES; k++)); do
    mkdir -p "$BIGDIR/copy-$k" && cp "$CORPUS"/*.jsonl "$BIGDIR/copy-$k/"
done
# The copies are ~1 GB of dirty page cache, which the kernel writes back 30 s later
# (vm.dirty_expire_centisecs), in the middle of whichever scenario runs then: write it now.
sync

echo
echo "== inputs (cached in $cache)"
mkdir -p "$cache"
# Same naming as benches/parse.sh: a changed generator regenerates the files.
gen_hash=$(cksum <"$here/src/gen.rs" | cut -d' ' -f1)
gen_cached() { # BYTES -> path of the cached generated session
    local f=$cache/session-$1-seed1-w$COMPACT_WINDOW-$gen_hash.jsonl
    local w=()
    ((COMPACT_WINDOW > 0)) && w=(--compact-window "$COMPACT_WINDOW")
    if [[ ! -f $f ]] || (($(stat -L -c %s "$f") < $1)); then
        "$BIN/pisess-bench-gen" --out "$f.tmp" --bytes "$1" --seed 1 "${w[@]}" | sed 's/^/  /' >&2
        mv "$f.tmp" "$f"
    fi
    echo "$f"
}
# pi compacts a session when its context nears the model's window, so a session grows to 1 GiB
# only through many compactions: the big session is generated that way (COMPACT_WINDOW tokens,
# claude-sonnet-4-5's 200,000 by default; 0 = never compact, the context at the leaf is then the
# whole conversation).
export BIG=$(gen_cached "$BIG_BYTES")
export SMALL=$(gen_cached "$SMALL_BYTES")
# A session whose bytes are mostly base64 screenshots (an IMAGE_SIZE image in every user
# message), IMAGES_BYTES in all.
images=$cache/images-$IMAGES_BYTES-$IMAGE_SIZE-seed1-$gen_hash.jsonl
if [[ ! -f $images ]]; then
    "$BIN/pisess-bench-gen" --out "$images.tmp" --bytes "$IMAGES_BYTES" --seed 1 --image-bytes "$IMAGE_SIZE" | sed 's/^/  /' >&2
    mv "$images.tmp" "$images"
fi
export IMAGES=$images
echo "big session: $BIG ($(stat -L -c %s "$BIG") bytes)"
echo "small session: $SMALL ($(stat -L -c %s "$SMALL") bytes)"

# A folder of LS_N small sessions (about 140 KB each, the corpus's small files' size), from the
# Rust generator: distinct seeds, so distinct sessions.
lsdir=$cache/ls-$LS_N-$gen_hash
if [[ ! -f $lsdir/.done ]]; then
    rm -rf "$lsdir"
    "$BIN/pisess-bench-gen" --out "$lsdir" --sessions "$LS_N" --bytes 140K --seed 1 | sed 's/^/  /'
    touch "$lsdir/.done"
fi
export LSDIR=$lsdir
echo "ls folder: $lsdir ($(find "$lsdir" -name '*.jsonl' | wc -l) files, $(du -sb "$lsdir" | cut -f1) bytes)"

# Bulk migration: a sample of benches/migrate.sh's cached folder if it is there, else a few
# v1/v2 sessions from the oracle's generator.
mig=$WORK/migrate && mkdir -p "$mig"
mfolder=$(ls -d "$cache"/migrate-folder-* 2>/dev/null | head -1 || true)
if [[ -n $mfolder ]]; then
    find "$mfolder/" -name '*.jsonl' | sort | shuf -n "$MIGRATE_SAMPLE" --random-source=<(yes 7) |
        while read -r f; do cp "$f" "$mig/$(basename "$(dirname "$f")")-$(basename "$f")"; done
    echo "migration sample: $MIGRATE_SAMPLE files from $mfolder"
else
    for ((k = 0; k < MIGRATE_SAMPLE; k++)); do
        p=v1 && ((k % 2)) && p=v2
        "$root/../shared/oracle/gen" --out "$mig/m-$k.jsonl" --profile "$p" --seed $((700 + k)) \
            --entries $((20 + 40 * k)) >/dev/null
    done
    echo "migration sample: $MIGRATE_SAMPLE files generated with ../shared/oracle/gen"
fi
export MIGDIR=$mig
echo "migration sample: $(ls "$mig" | wc -l) files, $(du -sb "$mig" | cut -f1) bytes"
echo "inputs ready after $(($(date +%s) - started)) s"

python3 "$here/compare.py"
echo "total time: $(($(date +%s) - started)) s"
