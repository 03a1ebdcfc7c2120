#!/usr/bin/env bash
# Runs every test of the suite: the C test programs built into $STRATA_BUILD/tests/ and the shell
# tests tests/t_*.sh. A test exits 0 (pass), 77 (skip: e.g. no GPU, no oracle) or anything else
# (fail). Output of each test goes to $STRATA_BUILD/tests/logs/NAME.log; failures print its tail.
# One line per test as it ends ("PASS NAME (12.3s)"); last line: "N passed, N failed, N skipped".
# STRATA_TESTS="name1 name2" runs only those.
# Tests run side by side: STRATA_TEST_JOBS at a time, else make's -jN (`make -j2 test`), else one.
# Each test's output stays in its own log, and its result line and (on failure) its tail are
# printed together when it ends. The longest tests (by the time each took last in this build
# folder, $logs/NAME.secs; the known long ones first when there is none) start first, so the
# slowest does not begin last. Every test is independent (its own mktemp folder, servers on
# port 0); none asserts a duration, and peak-RSS and cgroup bounds are per process.
set -u
cd "$(dirname "$0")/.."
build=${STRATA_BUILD:-build}
export STRATA_BIN="$PWD/$build/strata"
export STRATA_BUILD_DIR="$PWD/$build"
export STRATA_ROOT="$PWD"
logs="$build/tests/logs"; mkdir -p "$logs"

# The llama.cpp oracle (tests/oracle) and the HTTP clients of the server tests (tests/server) come
# from the committed npm locks: installed here once when npm is present, so the parity tests never
# skip silently. STRATA_NO_INSTALL=1 leaves them alone; without npm the tests that need them skip
# and say why.
install_npm() {
    local d=$1 what=$2; shift 2
    [ -d "$d/node_modules" ] && return 0
    [ "$d" = tests/oracle ] && [ -n "${ORACLE_NODE_MODULES:-}" ] && return 0
    if [ -n "${STRATA_NO_INSTALL:-}" ]; then echo "note: $what not installed (STRATA_NO_INSTALL): tests that need it skip"; return 0; fi
    if ! command -v npm >/dev/null 2>&1; then
        echo "note: npm not found: $what cannot be installed, the tests that need it skip (apt-get install npm)"
        return 0
    fi
    echo "installing $what from $d/package-lock.json (once)"
    (cd "$d" && npm ci "$@" --no-audit --no-fund --loglevel=error) >"$logs/npm-$(basename "$d").log" 2>&1 ||
        echo "note: npm ci in $d failed ($logs/npm-$(basename "$d").log): the tests that need it skip"
}
install_npm tests/oracle "the llama.cpp oracle" --omit=optional
install_npm tests/server "the OpenAI and Anthropic clients"

# How many at once: STRATA_TEST_JOBS, else make's -jN (a bare -j: one per core), else 1.
jobs=${STRATA_TEST_JOBS:-}
if [ -z "$jobs" ]; then
    jobs=1
    for f in ${MAKEFLAGS:-}; do
        case "$f" in -j) jobs=$(nproc) ;; -j[0-9]*) jobs=${f#-j} ;; esac
    done
fi
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || jobs=1

tests=()
for t in "$build"/tests/test_*; do [ -x "$t" ] && [ -f "$t" ] && tests+=("$t"); done
for t in tests/t_*.sh; do [ -f "$t" ] && tests+=("$t"); done
# Known long tests, longest first: the order when this build folder has no timings yet.
long="t_parity_lowbit t_parity_qwen3moe t_mem_bound t_parity_dsa t_parity_qwen3next t_parity_glm4moe t_parity_deepseek2"
declare -A path=()
order=()
for t in "${tests[@]}"; do
    name=$(basename "$t"); name=${name%.sh}
    if [ -n "${STRATA_TESTS:-}" ] && [[ " $STRATA_TESTS " != *" $name "* ]]; then continue; fi
    path[$name]=$t
    w=$(cat "$logs/$name.secs" 2>/dev/null) || w=""
    if [ -z "$w" ]; then
        w=0; i=0
        for l in $long; do i=$((i + 1)); [ "$l" = "$name" ] && w=$((10000 - i)); done
    fi
    order+=("$w $name")
done
mapfile -t order < <(printf '%s\n' "${order[@]}" | sort -s -k1,1 -g -r | cut -d' ' -f2)

status=$(mktemp -d); trap 'rm -rf "$status"' EXIT
pass=0; fail=0; skip=0; failed=()
running=()

# Runs one test (in the background when jobs > 1); its exit status and seconds go to $status/NAME.
run_one() {
    local name=$1 t=${path[$1]} start=$EPOCHREALTIME rc
    case "$t" in *.sh) bash "$t" >"$logs/$name.log" 2>&1 ;; *) "$t" >"$logs/$name.log" 2>&1 ;; esac
    rc=$?
    echo "$rc $(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')" >"$status/$name.tmp"
    mv "$status/$name.tmp" "$status/$name"
}

report() {
    local name=$1 rc secs
    read -r rc secs <"$status/$name"
    if [ "$rc" -eq 0 ]; then pass=$((pass+1)); echo "PASS $name (${secs}s)"
    elif [ "$rc" -eq 77 ]; then skip=$((skip+1)); echo "SKIP $name: $(tail -n 1 "$logs/$name.log")"
    else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (rc=$rc, ${secs}s)"; tail -n 20 "$logs/$name.log" | sed 's/^/    /'
    fi
    [ "$rc" -eq 77 ] || echo "$secs" >"$logs/$name.secs"
}

# Reports the tests that have ended; returns 1 if none had.
reap() {
    local name left=() any=1
    for name in "${running[@]}"; do
        if [ -f "$status/$name" ]; then report "$name"; any=0; else left+=("$name"); fi
    done
    running=("${left[@]}")
    return $any
}

for name in "${order[@]}"; do
    if [ "$jobs" -le 1 ]; then run_one "$name"; report "$name"; continue; fi
    while [ ${#running[@]} -ge "$jobs" ]; do reap || wait -n; done
    run_one "$name" &
    running+=("$name")
done
while [ ${#running[@]} -gt 0 ]; do reap || wait -n; done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
