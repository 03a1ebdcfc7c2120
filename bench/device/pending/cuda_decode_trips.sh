#!/usr/bin/env bash
# A decode layer's attention in fewer dependent memory round trips (cuda-4-decode-trips.diff on
# 21825a9; 29th session, not yet run), the same bits:
#  - k_attn_merge_heads loaded the chunks' maxima, then (its first warp) maxima and sums again,
#    then each dim's values: three round trips; now the maxima, sums and the first 16 chunks'
#    values go out at once and the rest reads shared memory and registers in the same order;
#  - k_attn_mma's decode blocks (one token) fetch their chunk's rows up to the cache's end
#    (strata_cuda_attn.kv_rows, new) and stage the queries before the position arrives, staging
#    only the rows up to it: two round trips -> one.
# test_cuda --merge / --attention (both merges bit for bit with small weight caps; a decode token
# over a cache of NaN past its position = the prompt's row), --bench-attn, then A (HEAD) against
# B, tokens must be the same.
#   here:  HEAD's build-cuda/strata into .deps/bin (strip); git apply the diff; make CUDA=1
#          build-cuda/strata build-cuda/tests/test_cuda; both into .deps/mpre (strip)
#   there: run(command="bash bench/device/pending/cuda_decode_trips.sh", carry=[".deps/bin", ".deps/mpre", ".deps/lib"])
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
