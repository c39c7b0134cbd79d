#!/usr/bin/env bash
# Issue 6 numbers: migrating a folder of 1,000 v1/v2 session files.
#
#  1. the reference: pi's own migration, one file at a time (`../shared/oracle/oracle migrate
#     FILE`, a Node process per file, as a script migrating a folder with pi would do). 1,000
#     runs take many minutes, so a random sample of SAMPLE files (default 100, fixed seed) is
#     timed and the time is extrapolated to the whole folder by bytes (the sample's share of the
#     folder's bytes); the count-based extrapolation is printed too.
#  2. `pisess migrate DIR --out OUT --jobs 1` and `--jobs 2` (release build), RUNS times each,
#     alternating, the output folder removed (untimed) before every run.
#
# Targets: pisess --jobs 1 (median) at least 20x faster than the reference; --jobs 2 at least
# 1.7x faster than --jobs 1 (medians; min also printed). All figures come from the same run.
#
# The folder is generated once and cached (PISESS_BENCH_CACHE, default benches/.cache,
# git-ignored): DISTINCT sources made with `../shared/oracle/gen --profile v1|v2` at sizes
# spaced geometrically from ~10 KB to ~5 MB, then 1,000 files made as copies of them, each with
# its own header `id` (so every copy migrates to different ids).
#
# Environment: RUNS (default 5), SAMPLE (default 100), FILES (default 1000), DISTINCT (default
# 36), CARGO_TARGET_DIR (default <root>/target), PISESS_BENCH_CACHE, PISESS_ORACLE.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=benches/common.sh
source "$here/common.sh"
runs=${RUNS:-5}
sample=${SAMPLE:-100}
nfiles=${FILES:-1000}
distinct=${DISTINCT:-36}
cache=${PISESS_BENCH_CACHE:-$here/.cache}
oracle=${PISESS_ORACLE:-$root/../shared/oracle/oracle}
gen=$root/../shared/oracle/gen
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
pisess=$(bench_bin)/pisess

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

bench_machine

echo
echo "== building pisess (release, target dir $CARGO_TARGET_DIR)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-cli

# --- the folder -------------------------------------------------------------------------------
src_dir=$cache/migrate-sources-$distinct
folder=$cache/migrate-folder-$nfiles-$distinct
mkdir -p "$src_dir"
# Entries per source: geometric from 7 (~10 KB) to 3,600 (~5 MB); about 1.4 KB per entry.
entries_for() { awk -v i="$1" -v n="$2" 'BEGIN { printf "%d", 7 * exp(log(3600 / 7) * i / (n - 1)) }'; }
if [[ ! -f $src_dir/.done ]]; then
    echo
    echo "== generating $distinct distinct sources in $src_dir (once)"
    for ((i = 0; i < distinct; i++)); do
        profile=v1
        ((i % 2)) && profile=v2
        e=$(entries_for "$i" "$distinct")
        "$gen" --out "$src_dir/src-$i.jsonl" --profile "$profile" --seed $((600 + i)) \
            --entries "$e" >/dev/null
    done
    touch "$src_dir/.done"
fi
if [[ ! -f $folder/.done ]]; then
    echo
    echo "== making $nfiles files in $folder (once)"
    rm -rf "$folder"
    for ((k = 0; k < nfiles; k++)); do
        i=$((k % distinct))
        d=$folder/project-$((k % 20))
        mkdir -p "$d"
        # The header is the first line; give each copy its own session id.
        sed "1s/\"id\":\"\\([^\"]*\\)\"/\"id\":\"\\1-$k\"/" "$src_dir/src-$i.jsonl" \
            >"$d/session-$(printf %04d $k).jsonl"
    done
    touch "$folder/.done"
fi
files=$(find "$folder" -name '*.jsonl' | wc -l)
bytes=$(find "$folder" -name '*.jsonl' -printf '%s\n' | awk '{ s += $1 } END { print s }')
smallest=$(find "$folder" -name '*.jsonl' -printf '%s\n' | sort -n | head -1)
largest=$(find "$folder" -name '*.jsonl' -printf '%s\n' | sort -n | tail -1)
echo "folder: $files files, $bytes bytes (smallest $smallest, largest $largest)"
echo "versions: $(grep -l -m1 '"version":2' -r "$folder" --include='*.jsonl' | wc -l) v2, the rest v1"
# Warm the page cache for everyone alike.
cat "$folder"/*/*.jsonl >/dev/null

out=$(mktemp -d "${TMPDIR:-/tmp}/pisess-migrate-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT

# --- the reference ----------------------------------------------------------------------------
echo
echo "== reference: $oracle migrate FILE, one process per file, on a random sample of $sample"
find "$folder" -name '*.jsonl' | sort >"$out/all"
shuf -n "$sample" --random-source=<(yes 6) "$out/all" >"$out/sample"
sample_bytes=$(xargs -a "$out/sample" stat -c %s | awk '{ s += $1 } END { print s }')
"$oracle" migrate "$(head -1 "$out/sample")" >/dev/null # first use may install things
t0=$(now)
while read -r f; do
    "$oracle" migrate "$f" >/dev/null
done <"$out/sample"
t1=$(now)
ref_sample=$(secs "$t0" "$t1")
ref_bytes=$(awk -v t="$ref_sample" -v b="$bytes" -v s="$sample_bytes" 'BEGIN { printf "%.1f", t * b / s }')
ref_count=$(awk -v t="$ref_sample" -v n="$files" -v s="$sample" 'BEGIN { printf "%.1f", t * n / s }')
echo "sample: $sample files, $sample_bytes bytes, ${ref_sample} s"
echo "extrapolated to the folder: ${ref_bytes} s by bytes, ${ref_count} s by count"
echo "(the ratio below uses the larger of the two: $(awk -v a="$ref_bytes" -v b="$ref_count" 'BEGIN { print (a > b ? "bytes" : "count") }'))"
ref=$(awk -v a="$ref_bytes" -v b="$ref_count" 'BEGIN { print (a > b ? a : b) }')
# A conservative check: the smaller one.
ref_low=$(awk -v a="$ref_bytes" -v b="$ref_count" 'BEGIN { print (a < b ? a : b) }')

# --- pisess -----------------------------------------------------------------------------------
echo
echo "== pisess migrate DIR --out OUT --jobs 1 / --jobs 2 ($runs runs each, alternating)"
j1=()
j2=()
for ((r = 0; r < runs; r++)); do
    for j in 1 2; do
        rm -rf "$out/o"
        sync
        t0=$(now)
        "$pisess" migrate "$folder" --out "$out/o" --jobs "$j" --json >"$out/summary-$j.jsonl"
        t1=$(now)
        t=$(secs "$t0" "$t1")
        if [[ $j == 1 ]]; then j1+=("$t"); else j2+=("$t"); fi
        echo "  run $((r + 1)) --jobs $j: ${t} s"
    done
done
tail -1 "$out/summary-1.jsonl"
stat_of() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { printf "%s %s", a[1], a[int((NR + 1) / 2)] }'; }
read -r j1_min j1_med <<<"$(stat_of "${j1[@]}")"
read -r j2_min j2_med <<<"$(stat_of "${j2[@]}")"

echo
echo "== results (load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
printf '%-34s %10s %10s\n' "" "min s" "median s"
printf '%-34s %10s %10s\n' "reference (extrapolated)" "$ref" "$ref"
printf '%-34s %10s %10s\n' "pisess --jobs 1" "$j1_min" "$j1_med"
printf '%-34s %10s %10s\n' "pisess --jobs 2" "$j2_min" "$j2_med"
awk -v r="$ref" -v rl="$ref_low" -v a="$j1_med" -v b="$j2_med" -v am="$j1_min" -v bm="$j2_min" 'BEGIN {
    printf "pisess --jobs 1 vs reference: %.1fx (median; %.1fx with the lower extrapolation)  target >= 20x: %s\n", r / a, rl / a, (rl / a >= 20 ? "met" : "NOT met")
    printf "pisess --jobs 2 vs reference: %.1fx (median)\n", r / b
    printf "--jobs 2 vs --jobs 1: %.2fx (medians), %.2fx (mins)  target >= 1.7x: %s\n", a / b, am / bm, (a / b >= 1.7 ? "met" : "NOT met")
}'
