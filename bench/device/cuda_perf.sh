#!/usr/bin/env bash
# One device call for the CUDA decode work: tests (and the end-to-end ones again with decode graphs),
# the Q4_K benchmark with A/B runs of the same binary under each AB_ENV, a kernel profile of a few
# decode steps, then Q8_0 while time is left.
#   run(command="BIN=.deps/bin COMMIT=abc1234 bash bench/device/cuda_perf.sh", carry=[".deps"], timeout_s=330)
set -u
cd "$(dirname "$0")/../.."
t0=$SECONDS
out=${OUT:-/tmp/out}; mkdir -p "$out"
# the path before device routing; without decode graphs
export AB_ENV=${AB_ENV-STRATA_HOST_ROUTE=1 STRATA_SEPARATE_ROPE=1;STRATA_CUDA_GRAPH=0}
PHASES="test bench" TYPES=Q4_K TEST_S=${TEST_S:-150} bash bench/device/cuda_backend.sh
if [ -n "${GRAPH_TEST_S:-60}" ]; then
    export LD_LIBRARY_PATH="$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    STRATA_CUDA_GRAPH=0 timeout "${GRAPH_TEST_S:-60}" "${BIN:-build-cuda/tests}/test_cuda" --backend \
        > "$out/test_cuda_graph.log" 2>&1
    echo "test_cuda --backend with STRATA_CUDA_GRAPH=0: rc=$? $(grep -c '^ok' "$out/test_cuda_graph.log") ok, $(grep -c '^FAIL' "$out/test_cuda_graph.log") FAIL"
    grep -v '^ok' "$out/test_cuda_graph.log" | grep -v '^    ' | head -n 20
fi
NCU_S=${NCU_S:-60} bash bench/device/cuda_profile.sh
if [ $((SECONDS - t0)) -lt "${Q8_AFTER_S:-120}" ]; then
    PHASES=bench TYPES=Q8_0 RUN_S=60 AB_ENV="${Q8_AB_ENV-STRATA_CUDA_GRAPH=0}" bash bench/device/cuda_backend.sh
else
    echo "cuda_perf: Q8_0 skipped ($((SECONDS - t0)) s used)"
fi
echo "cuda_perf: $((SECONDS - t0)) s"
