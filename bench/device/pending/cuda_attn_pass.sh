#!/usr/bin/env bash
# The prompt's attention in fewer host passes (28th session, about 3 minutes): STRATA_CUDA_ATTN_PASS=512
# (one part and one merge launch a layer for a 512-token prompt instead of 8 + 8 of 64 tokens;
# the same operations a token, so the same bits) against the default 64, one binary:
# test_cuda with it on, then cuda_ab.sh (both sides --warmup 1), 48-layer qwen3-30b-a3b Q4_K.
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda; cp both into .deps/pass; strip --strip-debug
#   there: run(command="bash bench/device/pending/cuda_attn_pass.sh", carry=[".deps/pass", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/pass
STRATA_CUDA_ATTN_PASS=512 timeout 150 "$b/test_cuda" > /tmp/test_cuda.log 2>&1
echo "test_cuda (pass 512) rc=$? ok=$(grep -c '^ok' /tmp/test_cuda.log) fail=$(grep -c '^FAIL' /tmp/test_cuda.log)"
grep '^FAIL' /tmp/test_cuda.log | head -n 10
A=$b/strata B=$b/strata ENV_B=STRATA_CUDA_ATTN_PASS=512 ARGS="--warmup 1" REPS=${REPS:-2} OUT=/tmp/ab WORK=/tmp/ab-Q4_K \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 8
