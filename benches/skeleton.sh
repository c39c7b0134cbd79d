#!/usr/bin/env bash
# Issue 3's import target measured from below (runs from any directory, ~3-6 minutes): how close
# to the parse floor can an importer built from the store's pieces get at all?
#
# Four subjects, interleaved (A B C D A B C D ...), RUNS rounds, each a whole process on the 20
# top-level sessions of the standard corpus (~128 MB), timed through pisess-bench-run (wall, and
# CPU = user+sys of the child from wait4):
#   floor     the measured parse floor: rayon + serde_json::Value on a 2-thread pool, one process
#             for all files (pisess-bench-skeleton floor; the same function as compare.sh's)
#   rows      pisess-bench-skeleton rows: 4 MiB chunks, ~64 KiB blocks, blake3 of every line and
#             LZ4 of every block on the 2-thread pool, the blocks and hashes into redb (one
#             transaction per file without fsync, then one durable commit; the inserts overlap
#             the next chunk's build, as in the import)
#   rows+ids  the same plus a typed parse of type/id/parentId/timestamp of every line and two
#             more redb tables (id -> key, key -> parent key)
#   import    `pisess import` of the same files into a fresh store
# Printed: min and median wall and CPU of each, the median wall as a ratio to the floor's (issue
# 3: import <= 2x), and median CPU / 2 as a ratio to the floor's wall (what the subject would take
# with both cores busy all the time: no importer of this design can beat that without dropping a
# piece). See pisess-bench-skeleton's header for what the skeletons leave out.
#
# Environment: RUNS (default 9), CARGO_TARGET_DIR (default <root>/target), PISESS_CORPUS (corpus
# folder; default: built by ../shared/oracle/corpus), WORK (scratch folder, default a temp dir).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck source=benches/common.sh
source "$here/common.sh"
export RUNS=${RUNS:-9}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
export BIN=$(bench_bin)

bench_machine

echo
echo "== building release binaries (target dir $CARGO_TARGET_DIR)"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-cli --bin pisess
cargo build --release --quiet --manifest-path "$root/Cargo.toml" -p pisess-benches \
    --bin pisess-bench-skeleton --bin pisess-bench-run

bench_work pisess-skeleton
echo "corpus: $(ls "$CORPUS"/*.jsonl | wc -l) files, $(cat "$CORPUS"/*.jsonl | wc -c) bytes, copied to $CORPUS"

python3 - <<'PY'
import os, statistics, subprocess

BIN, WORK, CORPUS = os.environ["BIN"], os.environ["WORK"], os.environ["CORPUS"]
RUNS = int(os.environ["RUNS"])
RUN = os.path.join(BIN, "pisess-bench-run")
SKEL = os.path.join(BIN, "pisess-bench-skeleton")
STORE = os.path.join(WORK, "store.redb")

def fresh():
    for suffix in ("", ".sources"):
        try:
            os.remove(STORE + suffix)
        except FileNotFoundError:
            pass

SUBJECTS = [
    ("floor", [SKEL, "floor", CORPUS, STORE]),
    ("rows", [SKEL, "rows", CORPUS, STORE]),
    ("rows+ids", [SKEL, "rows+ids", CORPUS, STORE]),
    ("import", [os.path.join(BIN, "pisess"), "import", CORPUS]),
]

def timed(cmd):
    fresh()
    env = dict(os.environ, PISESS_STORE=STORE)
    out = subprocess.run([RUN, "--"] + cmd, env=env, check=True, capture_output=True, text=True).stdout
    f = dict(kv.split("=") for kv in out.split())
    if f["exit"] != "0":
        raise SystemExit(f"{cmd} exited {f['exit']}")
    return int(f["wall_ns"]) / 1e9, int(f["cpu_ns"]) / 1e9

walls = {n: [] for n, _ in SUBJECTS}
cpus = {n: [] for n, _ in SUBJECTS}
for name, cmd in SUBJECTS:  # one untimed round: page cache and binaries warm
    timed(cmd)
for r in range(RUNS):
    order = SUBJECTS[r % len(SUBJECTS):] + SUBJECTS[:r % len(SUBJECTS)]
    for name, cmd in order:
        w, c = timed(cmd)
        walls[name].append(w)
        cpus[name].append(c)
fresh()

med = statistics.median
floor = med(walls["floor"])
print(f"\n== {RUNS} interleaved rounds (load average now {' '.join(open('/proc/loadavg').read().split()[:3])})")
print(f"{'subject':10} {'wall min':>10} {'wall med':>10} {'cpu min':>10} {'cpu med':>10} {'wall/floor':>11} {'cpu/2 / floor':>14}")
for name, _ in SUBJECTS:
    w, c = walls[name], cpus[name]
    print(f"{name:10} {min(w)*1e3:8.1f}ms {med(w)*1e3:8.1f}ms {min(c)*1e3:8.1f}ms {med(c)*1e3:8.1f}ms "
          f"{med(w)/floor:10.2f}x {med(c)/2/floor:13.2f}x")
PY
