#!/usr/bin/env bash
# The short form of run_merge_pair.sh (about 3 minutes): test_cuda with both diffs applied, then
# prompt 512 and decode 128 on the 48-layer Q4_K file, the base against both diffs, two rounds.
#   there: run(command="bash bench/device/pending/run_pair_quick.sh", carry=[".deps/pending", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/pending/2-cuda-2-mv-pair
timeout 120 "$b/test_cuda" > /tmp/test_cuda.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/test_cuda.log) fail=$(grep -c '^FAIL' /tmp/test_cuda.log)"
grep '^FAIL' /tmp/test_cuda.log | head -n 10
A=.deps/pending/0-base/strata B=$b/strata REPS=${REPS:-2} OUT=/tmp/ab WORK=/tmp/ab-Q4_K bash bench/device/cuda_ab.sh 2>&1 | tail -n 8
