#!/usr/bin/env python3
"""The shapes and timings of benches/scaling.sh (see its header): each command at a size N and
4N, median of RUNS wall times, and the ratio of the two."""

import json
import os
import statistics
import subprocess
import sys
import time

BIN = os.environ["BIN"]
WORK = os.environ["WORK"]
RUNS = int(os.environ.get("RUNS", "3"))
LIMIT = float(os.environ.get("GROWTH_LIMIT", "6"))
SCALE = float(os.environ.get("SCALE", "1"))
PISESS = os.path.join(BIN, "pisess")
GEN = os.path.join(BIN, "pisess-bench-gen")


def env_for(store_dir):
    return {**os.environ, "HOME": store_dir, "PISESS_STORE": os.path.join(store_dir, "store.redb")}


def run(args, store_dir, ok=(0, 1)):
    t = time.perf_counter()
    p = subprocess.run(args, env=env_for(store_dir), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    if p.returncode not in ok:
        sys.exit(f"{args}: exit {p.returncode}: {p.stderr.decode(errors='replace')[:500]}")
    return wall


def line(o):
    return json.dumps(o, separators=(",", ":")) + "\n"


def header(sid, parent=None):
    h = {"type": "session", "version": 3, "id": sid, "timestamp": "2026-01-01T00:00:00.000Z",
         "cwd": "/home/dev/p"}
    if parent:
        h["parentSession"] = parent
    return line(h)


def message(i, parent, role, content):
    return line({"type": "message", "id": i, "parentId": parent,
                 "timestamp": "2026-01-01T00:00:01.000Z",
                 "message": {"role": role, "content": content, "timestamp": 1767225601000}})


def build_sessions(n, d):
    subprocess.run([GEN, "--out", os.path.join(d, "src"), "--sessions", str(n), "--bytes", "20K",
                    "--seed", "1"], check=True, stdout=subprocess.DEVNULL)
    run([PISESS, "import", os.path.join(d, "src")], d)


def build_forkchain(n, d):
    src = os.path.join(d, "src")
    os.makedirs(src)
    prev = None
    for k in range(n):
        path = os.path.join(src, f"c{k:06d}.jsonl")
        body = header(f"0190ffff-0000-7000-8000-{k:012d}", prev)
        body += message("b0", None, "user", "the shared start")
        body += message(f"own{k}", "b0", "user", f"fork {k}")
        with open(path, "w") as f:
            f.write(body)
        prev = path
    run([PISESS, "import", src], d)


def build_chain(n, d):
    f = os.path.join(d, "orig.jsonl")
    subprocess.run([GEN, "--out", f, "--chain", str(n)], check=True, stdout=subprocess.DEVNULL)


def build_wideargs(n, d):
    args = {f"k{i}": i for i in range(n)}
    args["path"] = "src/a.rs"
    body = header("0190abab-0000-7000-8000-000000000001")
    body += message("u1", None, "user", "go")
    body += line({"type": "message", "id": "a1", "parentId": "u1",
                  "timestamp": "2026-01-01T00:00:02.000Z",
                  "message": {"role": "assistant", "timestamp": 1767225602000, "content": [
                      {"type": "toolCall", "id": "c1", "name": "read", "arguments": args}]}})
    with open(os.path.join(d, "s.jsonl"), "w") as f:
        f.write(body)


def compact_fresh(d):
    # A fresh copy and store each time: compact writes to the session.
    s = os.path.join(d, "s.jsonl")
    for name in os.listdir(d):
        if name.startswith("store.redb"):
            os.remove(os.path.join(d, name))
    with open(os.path.join(d, "orig.jsonl"), "rb") as src, open(s, "wb") as dst:
        dst.write(src.read())
    run([PISESS, "import", s], d)
    return run([PISESS, "compact", s], d)


def import_fresh(d):
    for name in os.listdir(d):
        if name.startswith("store.redb"):
            os.remove(os.path.join(d, name))
    return run([PISESS, "import", os.path.join(d, "s.jsonl")], d)


# (shape, N, builder, [(label, timed(d))])
SHAPES = [
    ("sessions", 1000, build_sessions, [
        ("ls", lambda d: run([PISESS, "ls"], d)),
        ("stats", lambda d: run([PISESS, "stats"], d)),
        ("files '**'", lambda d: run([PISESS, "files", "**"], d)),
        ("grep -l the", lambda d: run([PISESS, "grep", "-l", "the"], d)),
    ]),
    ("forkchain", 16000, build_forkchain, [
        ("stats", lambda d: run([PISESS, "stats"], d)),
    ]),
    ("chain", 31250, build_chain, [
        ("compact (writing)", compact_fresh),
    ]),
    ("wideargs", 20000, build_wideargs, [
        ("import", import_fresh),
    ]),
]

flagged = []
for shape, n0, build, subjects in SHAPES:
    sizes = [int(n0 * SCALE), int(n0 * SCALE) * 4]
    print(f"\n== {shape}: N = {sizes[0]:,} and {sizes[1]:,} (load {os.getloadavg()[0]:.2f})")
    dirs = []
    for n in sizes:
        d = os.path.join(WORK, f"{shape}-{n}")
        os.makedirs(d, exist_ok=True)
        build(n, d)
        dirs.append(d)
    for label, timed in subjects:
        med = [statistics.median(timed(d) for _ in range(RUNS)) for d in dirs]
        ratio = med[1] / med[0] if med[0] > 0 else float("inf")
        verdict = "faster than linear" if ratio > LIMIT else "ok"
        if ratio > LIMIT:
            flagged.append(f"{shape} / {label}")
        print(f"  {label:<20} {med[0] * 1e3:9.1f} ms  {med[1] * 1e3:9.1f} ms  x{ratio:5.2f} "
              f"for x4 input  {verdict}")

print()
if flagged:
    print(f"growth above x{LIMIT:g} for x4 input: " + ", ".join(flagged))
    sys.exit(1)
print(f"every command grew by at most x{LIMIT:g} for x4 input")
