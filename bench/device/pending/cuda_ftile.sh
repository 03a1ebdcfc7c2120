#!/usr/bin/env bash
# The prompt's F32 router tiled over rows (k_mv_ftile; 28th session, about 1 minute): test_cuda --mm
# (TESTS= for all; its mm cases compare the tiled kernel with the mat-vec of a token alone, bit for bit), then
# STRATA_CUDA_MV_FTILE=0 (A) against on (B), one binary, both --warmup 1, 48-layer qwen3-30b-a3b Q4_K.
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda; cp both into .deps/ftile; strip --strip-debug
#   there: run(command="bash bench/device/pending/cuda_ftile.sh", carry=[".deps/ftile", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/ftile
timeout 150 "$b/test_cuda" ${TESTS---mm} > /tmp/test_cuda.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/test_cuda.log) fail=$(grep -c '^FAIL' /tmp/test_cuda.log)"
grep -B4 '^FAIL' /tmp/test_cuda.log | head -n 16
grep 'mm F32' /tmp/test_cuda.log
A=$b/strata B=$b/strata ENV_A=STRATA_CUDA_MV_FTILE=0 ARGS="--warmup 1" REPS=${REPS:-1} OUT=/tmp/ab WORK=/tmp/ab-Q4_K \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 8
