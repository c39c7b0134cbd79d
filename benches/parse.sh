#!/usr/bin/env bash
# Quick measurement of the two foundation numbers (runs from any directory, ~1-3 minutes):
#
#  1. parse throughput of the corpus file 15-large-50000.jsonl: the serde_json::Value baseline,
#     pisess's SessionReader on one core (ratio, target >= 2x), and the parallel chunk reader on
#     explicit 1- and 2-thread rayon pools (speed-up), and a rayon + Value parse on 2 threads
#     (issue 3's parse floor measured, against the idealised one-thread time / 2);
#  2. peak RSS of reading a generated 1 GiB session with SessionReader, above a baseline process
#     that reads nothing (the same binary with --no-read); target < 64 MiB. The same binary on
#     a 64 KiB session shows the reader's fixed cost (its 4 MiB chunk buffer).
#
# Shared machines are noisy: every figure is a ratio against a baseline measured in the same
# run; the load average is printed so a reader can judge the noise.
#
# Environment: RUNS (timed runs per variant, default 7), CARGO_TARGET_DIR (default
# <root>/target), PISESS_CORPUS (corpus folder; default: built by ../shared/oracle/corpus),
# PISESS_BENCH_CACHE (where the 1 GiB file is cached; default benches/.cache, git-ignored),
# BIG_BYTES (size of the big file, default 1 GiB).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=benches/common.sh
source "$here/common.sh"
runs=${RUNS:-7}
big_bytes=${BIG_BYTES:-1073741824}
cache=${PISESS_BENCH_CACHE:-$here/.cache}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
bin=$(bench_bin)

bench_machine "formats/src formats/Cargo.toml"

echo
echo "== building release binaries (target dir $CARGO_TARGET_DIR)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-benches --bins

bench_corpus
file=$corpus/15-large-50000.jsonl
if [[ ! -f $file ]]; then
    echo "parse.sh: $file is missing; build the corpus with $root/../shared/oracle/corpus" >&2
    exit 1
fi

echo
echo "== 1. parse throughput"
"$bin/pisess-bench-parse" --file "$file" --runs "$runs"
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "== 2. peak memory"
echo "generator speed (512 MiB to /dev/null):"
"$bin/pisess-bench-gen" --out /dev/null --bytes 512M --seed 1 | sed 's/^/  /'
mkdir -p "$cache"
# Cached files are named after the generator's source, so a changed generator regenerates them.
gen_hash=$(cksum <"$here/src/gen.rs" | cut -d' ' -f1)
big=$cache/session-$big_bytes-seed1-$gen_hash.jsonl
tiny=$cache/session-65536-seed1-$gen_hash.jsonl
rm -f "$cache"/session-*-seed1-*.jsonl.tmp
if [[ ! -f $big ]] || (($(stat -c %s "$big") < big_bytes)); then
    echo "generating $big:"
    "$bin/pisess-bench-gen" --out "$big.tmp" --bytes "$big_bytes" --seed 1 | sed 's/^/  /'
    mv "$big.tmp" "$big"
else
    echo "using cached $big"
fi
[[ -f $tiny ]] || "$bin/pisess-bench-gen" --out "$tiny" --bytes 65536 --seed 1 >/dev/null

if [[ ! -x /usr/bin/time ]]; then
    echo "parse.sh: /usr/bin/time is missing (apt-get install -y time)" >&2
    exit 1
fi
# Prints "<max RSS KiB> <the reader's own summary line>".
measure_rss() {
    local out
    out=$(/usr/bin/time -v "$bin/pisess-bench-read" "$@" 2>&1)
    echo "$(awk -F': ' '/Maximum resident set size/ {print $2}' <<<"$out") $(grep '^bytes=' <<<"$out")"
}
# min over three runs for the baselines, max over two for the big file: the conservative way.
none_rss=()
tiny_rss=()
big_rss=()
for _ in 1 2 3; do
    read -r rss _ < <(measure_rss --no-read "$big")
    none_rss+=("$rss")
    read -r rss _ < <(measure_rss "$tiny")
    tiny_rss+=("$rss")
done
for _ in 1 2; do
    read -r rss big_line < <(measure_rss "$big")
    big_rss+=("$rss")
done
echo "reader on the big file: $big_line"
echo
printf '%-44s %s\n' "process (/usr/bin/time -v)" "max RSS, KiB, per run"
printf '%-44s %s\n' "baseline: pisess-bench-read --no-read" "${none_rss[*]}"
printf '%-44s %s\n' "read a 64 KiB session" "${tiny_rss[*]}"
printf '%-44s %s\n' "read the $((big_bytes >> 20)) MiB session" "${big_rss[*]}"
min() { printf '%s\n' "$@" | sort -n | head -1; }
max() { printf '%s\n' "$@" | sort -n | tail -1; }
awk -v none="$(min "${none_rss[@]}")" -v tiny="$(min "${tiny_rss[@]}")" -v big="$(max "${big_rss[@]}")" 'BEGIN {
    d = (big - none) / 1024
    printf "peak RSS above baseline: %.1f MiB (of which the reader costs %.1f MiB on a 64 KiB file, +%.1f MiB for the big one); target < 64 MiB: %s\n",
        d, (tiny - none) / 1024, (big - tiny) / 1024, (d < 64 ? "MET" : "NOT MET")
}'
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Instruction counts do not depend on how busy the machine is: the same comparison under
# callgrind (each variant runs once after one warm-up, so both sides pay the same extra).
if command -v valgrind >/dev/null; then
    echo
    echo "== 3. instructions (valgrind --tool=callgrind; load-independent)"
    declare -A ins
    for v in value/file typed/file value/mem typed/mem; do
        log=$(mktemp)
        valgrind --tool=callgrind --callgrind-out-file=/dev/null \
            "$bin/pisess-bench-parse" --file "$file" --runs 1 --only "$v" >"$log" 2>&1
        ins[$v]=$(awk '/Collected :/ {print $NF}' "$log")
        rm -f "$log"
        printf '%-12s %15s instructions\n' "$v" "${ins[$v]}"
    done
    awk -v vf="${ins[value/file]}" -v tf="${ins[typed/file]}" -v vm="${ins[value/mem]}" -v tm="${ins[typed/mem]}" 'BEGIN {
        printf "typed vs Value, instructions: from file %.2fx, in memory %.2fx; target >= 2x: %s\n",
            vf / tf, vm / tm, (vf / tf >= 2 && vm / tm >= 2 ? "MET" : "NOT MET")
    }'
fi
