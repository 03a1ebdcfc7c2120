#!/usr/bin/env bash
# One device call for the CUDA decode work: tests and the Q4_K benchmark (with an A/B run of the
# same binary under AB_ENV), a kernel profile of a few decode steps, then Q8_0 while time is left.
#   run(command="BIN=.deps/bin COMMIT=abc1234 bash bench/device/cuda_perf.sh", carry=[".deps"], timeout_s=300)
set -u
cd "$(dirname "$0")/../.."
t0=$SECONDS
export AB_ENV=${AB_ENV-STRATA_HOST_ROUTE=1 STRATA_SEPARATE_ROPE=1}   # the path before device routing
PHASES="test bench" TYPES=Q4_K TEST_S=${TEST_S:-150} bash bench/device/cuda_backend.sh
NCU_S=${NCU_S:-60} bash bench/device/cuda_profile.sh
if [ $((SECONDS - t0)) -lt "${Q8_AFTER_S:-120}" ]; then
    PHASES=bench TYPES=Q8_0 RUN_S=60 bash bench/device/cuda_backend.sh
else
    echo "cuda_perf: Q8_0 skipped ($((SECONDS - t0)) s used)"
fi
echo "cuda_perf: $((SECONDS - t0)) s"
