#!/usr/bin/env bash
# Runs every libFuzzer harness of build-fuzz/fuzz/ (make fuzz) for FUZZ_SECONDS each (default 25),
# starting from its committed seed corpus (copied: new inputs do not touch tests/fuzz/corpus/).
# Fails if any harness crashes, leaks, times out or reports a sanitizer error; the input that did
# it is kept in build-fuzz/artifacts/ (reproduce: build-fuzz/fuzz/fuzz_NAME FILE).
# FUZZ_ONLY="gguf chat" runs a subset; FUZZ_JOBS=N runs N harnesses at once (default: the cores).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FUZZ_BUILD:-build-fuzz}
secs=${FUZZ_SECONDS:-25}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$B/artifacts"
# FUZZ_JOBS harnesses at a time (default: one per core; libFuzzer runs one process per harness,
# so each still gets its FUZZ_SECONDS of one core); each one's lines print when it ends.
jobs=${FUZZ_JOBS:-$(nproc)}
fuzz_one() {
    local bin=$1 name=$2 log="$B/artifacts/$2.log"
    mkdir -p "$work/$name"
    cp tests/fuzz/corpus/"$name"/* "$work/$name"/ 2>/dev/null
    if "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=1100000 \
        -artifact_prefix="$B/artifacts/$name-" "$work/$name" >"$log" 2>&1; then
        printf 'fuzz %-10s ok   %s\n' "$name" "$(grep -E '^Done|#[0-9]+.*DONE' "$log" | tail -1)" >"$work/$name.out"
    else
        { printf 'fuzz %-10s FAILED (log: %s)\n' "$name" "$log"
          grep -E 'ERROR|SUMMARY|runtime error|abort|Test unit written' "$log" | head -8; } >"$work/$name.out"
        touch "$work/failed"
    fi
    mv "$work/$name.out" "$work/$name.done"
}
running=()
reap() {
    local n left=() any=1
    for n in "${running[@]}"; do
        if [ -f "$work/$n.done" ]; then cat "$work/$n.done"; any=0; else left+=("$n"); fi
    done
    running=("${left[@]}")
    return $any
}
for bin in "$B"/fuzz/fuzz_*; do
    name=${bin##*/fuzz_}
    if [ -n "${FUZZ_ONLY:-}" ] && [[ " $FUZZ_ONLY " != *" $name "* ]]; then continue; fi
    while [ ${#running[@]} -ge "$jobs" ]; do reap || wait -n; done
    fuzz_one "$bin" "$name" &
    running+=("$name")
done
while [ ${#running[@]} -gt 0 ]; do reap || wait -n; done
failed=0
[ -f "$work/failed" ] && failed=1
exit $failed
