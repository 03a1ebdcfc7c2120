#!/usr/bin/env bash
# The split-K merge's loads in one round trip (cuda-4-merge-prefetch.diff on b9d3874; 29th session,
# not yet run): k_attn_merge_heads loaded the chunks' maxima, then (its first warp) their maxima
# and sums again, then each dim's values, three dependent memory round trips a decode layer; now
# the maxima, sums and the first 16 chunks' values go out at once, the rest reads shared memory
# and registers in the same order (the same bits). test_cuda --merge / --attention (both merges
# bit for bit, with small weight caps), --bench-attn of both, then A (HEAD) against B, tokens
# must be the same.
#   here:  HEAD's build-cuda/strata into .deps/bin (strip); git apply the diff; make CUDA=1
#          build-cuda/strata build-cuda/tests/test_cuda; both into .deps/mpre (strip)
#   there: run(command="bash bench/device/pending/cuda_merge_prefetch.sh", carry=[".deps/bin", ".deps/mpre", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
for t in --merge --attention; do
    timeout 150 .deps/mpre/test_cuda $t > /tmp/tc.log 2>&1
    echo "test_cuda $t rc=$? ok=$(grep -c '^ok' /tmp/tc.log) fail=$(grep -c '^FAIL' /tmp/tc.log)"; grep -B3 '^FAIL' /tmp/tc.log | head -n 20
done
timeout 100 .deps/mpre/test_cuda --bench-attn 2>&1 | grep -E 'chunks:|F32 decode|prompt of' | head -n 9
A=.deps/bin/strata B=.deps/mpre/strata ARGS="--warmup 1" REPS=${REPS:-3} OUT=/tmp/ab WORK=/tmp/ab-Q4_K \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 9
