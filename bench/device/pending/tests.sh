#!/usr/bin/env bash
# There (the GPU machine), after `TESTS_ONLY=1 bash bench/device/pending/prepare.sh` here: which
# build fails a test. Each build's `test_cuda --mm` (the rounding, dequantisation and plain
# products, seconds) at the seeds of SEEDS (the first: a seed that failed), then the first failing
# build's case again under compute-sanitizer's TOOLS (default racecheck, SAN_S seconds each; FULL=1
# adds the whole test_cuda of the last build at the first seed). Logs in $OUT/tests-*.log.
#   run(command="bash bench/device/pending/tests.sh", carry=[".deps/pending", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
out=${OUT:-/tmp/out}; mkdir -p "$out"
seeds=${SEEDS:-1796512023 1}
t0=$SECONDS
first_bad=""
mapfile -t builds < <(ls -d .deps/pending/*/ | sed 's#/$##')
for b in "${builds[@]}"; do
    n=$(basename "$b")
    for s in $seeds; do
        timeout 120 "$b/test_cuda" --mm --seed "$s" > "$out/tests-$n-$s.log" 2>&1
        rc=$?
        echo "$n seed $s: rc=$rc ok=$(grep -c '^ok' "$out/tests-$n-$s.log") fail=$(grep -c '^FAIL ' "$out/tests-$n-$s.log") ($((SECONDS - t0)) s)"
        grep '^FAIL ' "$out/tests-$n-$s.log" | head -n 8
        [ $rc -ne 0 ] && [ -z "$first_bad" ] && first_bad="$b $s"
    done
done
if [ -n "$first_bad" ] && command -v compute-sanitizer > /dev/null; then
    set -- $first_bad
    for tool in ${TOOLS:-racecheck}; do
        timeout "${SAN_S:-90}" compute-sanitizer --tool $tool --print-limit 20 "$1/test_cuda" --mm --seed "$2" > "$out/tests-$tool.log" 2>&1
        echo "compute-sanitizer $tool on $(basename "$1") seed $2: rc=$? ($((SECONDS - t0)) s)"
        grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Race|Invalid|^FAIL ' "$out/tests-$tool.log" | head -n 12
    done
fi
[ "${FULL:-0}" = 1 ] || { echo "pending/tests.sh: $((SECONDS - t0)) s"; exit 0; }
last=${builds[-1]}
s=${seeds%% *}
timeout 200 "$last/test_cuda" --seed "$s" > "$out/tests-full-$s.log" 2>&1
echo "$(basename "$last") whole test_cuda seed $s: rc=$? ok=$(grep -c '^ok' "$out/tests-full-$s.log") fail=$(grep -c '^FAIL ' "$out/tests-full-$s.log") ($((SECONDS - t0)) s)"
grep '^FAIL ' "$out/tests-full-$s.log" | head -n 10
echo "pending/tests.sh: $((SECONDS - t0)) s"
