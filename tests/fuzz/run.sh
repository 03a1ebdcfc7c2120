#!/usr/bin/env bash
# Runs every libFuzzer harness of build-fuzz/fuzz/ (make fuzz) for FUZZ_SECONDS each (default 25),
# starting from its committed seed corpus (copied: new inputs do not touch tests/fuzz/corpus/).
# Fails if any harness crashes, leaks, times out or reports a sanitizer error; the input that did
# it is kept in build-fuzz/artifacts/ (reproduce: build-fuzz/fuzz/fuzz_NAME FILE).
# FUZZ_ONLY="gguf chat" runs a subset.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FUZZ_BUILD:-build-fuzz}
secs=${FUZZ_SECONDS:-25}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$B/artifacts"
failed=0
for bin in "$B"/fuzz/fuzz_*; do
    name=${bin##*/fuzz_}
    if [ -n "${FUZZ_ONLY:-}" ] && [[ " $FUZZ_ONLY " != *" $name "* ]]; then continue; fi
    mkdir -p "$work/$name"
    cp tests/fuzz/corpus/"$name"/* "$work/$name"/ 2>/dev/null
    log="$B/artifacts/$name.log"
    if "$bin" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=1100000 \
        -artifact_prefix="$B/artifacts/$name-" "$work/$name" >"$log" 2>&1; then
        printf 'fuzz %-10s ok   %s\n' "$name" "$(grep -E '^Done|#[0-9]+.*DONE' "$log" | tail -1)"
    else
        printf 'fuzz %-10s FAILED (log: %s)\n' "$name" "$log"
        grep -E 'ERROR|SUMMARY|runtime error|abort|Test unit written' "$log" | head -8
        failed=1
    fi
done
exit $failed
