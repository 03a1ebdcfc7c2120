#!/usr/bin/env bash
# The plain attention's chunks on the tensor cores (k_attn_mma, 3xTF32; 29th session): the whole
# test_cuda (its attention cases run both chunk kernels on four shapes, CPU within 1e-5, decode =
# prompt bit for bit), the attention alone (--bench-attn: both kernels), then
# STRATA_CUDA_ATTN_MMA=0 (A) against the default (B), one binary, --warmup 1, 48-layer qwen3-30b-a3b Q4_K.
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda; cp both into .deps/mma; strip --strip-debug
#   there: run(command="bash bench/device/pending/cuda_attn_mma.sh", carry=[".deps/mma", ".deps/lib"])
# TESTS=--attention: the attention cases only; SKIP_AB=1: no A/B.
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/mma
timeout 200 "$b/test_cuda" ${TESTS-} > /tmp/test_cuda.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/test_cuda.log) fail=$(grep -c '^FAIL' /tmp/test_cuda.log)"
grep -B4 '^FAIL' /tmp/test_cuda.log | head -n 30
grep 'attention (' /tmp/test_cuda.log
timeout 100 "$b/test_cuda" --bench-attn 2>&1 | grep -v '^ok' | head -n 40
[ -n "${SKIP_AB:-}" ] && exit 0
A=$b/strata B=$b/strata ENV_A=STRATA_CUDA_ATTN_MMA=0 ARGS="--warmup 1" REPS=${REPS:-2} OUT=/tmp/ab WORK=/tmp/ab-Q4_K \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 8
