# The set-up the bench scripts share; sourced by compare.sh, store.sh, skeleton.sh, parse.sh,
# migrate.sh and scaling.sh after they set `root` (the project) and CARGO_TARGET_DIR.
#
# bench_bin              prints the release binaries' folder: target/<host tuple>/release, as
#                        .cargo/config.toml names the host as the target.
# bench_machine [LABEL]  prints the machine (cores, CPU, memory), the load average, and the
#                        commit the tree is at, noting uncommitted changes (LABEL: a path list
#                        to limit that to, e.g. "formats/src formats/Cargo.toml").
# bench_corpus           sets `corpus` to the standard corpus: PISESS_CORPUS, else what
#                        ../shared/oracle/corpus prints (it builds the corpus when missing).
# bench_scratch NAME     sets and exports WORK: WORK if given (created), else a new mktemp
#                        folder NAME.XXXXXX, removed on exit.
# bench_work NAME        sets and exports WORK (a new mktemp folder NAME.XXXXXX, removed on
#                        exit, unless WORK is given), and CORPUS, a private copy in WORK of the
#                        corpus's top-level sessions, so that paths stay stable between imports.

bench_bin() {
    echo "$CARGO_TARGET_DIR/$(rustc -vV | sed -n 's/^host: //p')/release"
}

bench_machine() {
    echo "== machine"
    echo "nproc: $(nproc); cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    local paths=${1:-} at changed
    at=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')
    # shellcheck disable=SC2086 # the paths are a list
    git -C "$root" diff --quiet HEAD -- $paths 2>/dev/null || changed=" + uncommitted changes${paths:+ in $paths}"
    echo "tree at: $at${changed:-}"
}

bench_corpus() {
    if [[ -n ${PISESS_CORPUS:-} ]]; then
        corpus=$PISESS_CORPUS
    else
        corpus=$("$root/../shared/oracle/corpus")
    fi
}

bench_scratch() {
    if [[ -n ${WORK:-} ]]; then
        mkdir -p "$WORK"
    else
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
        trap 'rm -rf "$WORK"' EXIT
    fi
    export WORK
}

bench_work() {
    bench_corpus
    bench_scratch "$1"
    rm -rf "$WORK/corpus" && mkdir -p "$WORK/corpus"
    cp "$corpus"/*.jsonl "$WORK/corpus/"
    export CORPUS=$WORK/corpus
}
