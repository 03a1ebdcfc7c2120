#!/usr/bin/env bash
# The FFN norm in the output projection's epilogue (docs/cuda.md, "What is left for speed", item 6,
# third step; diff bench/device/pending/cuda-3-norm-fuse.diff), about 4 minutes: the diff's
# test_cuda (the norm-fuse cases first, then the whole test), then prompt 512 and decode 128 on the
# 48-layer Q4_K file, main's HEAD (A) against the diff (B), two rounds; then the diff with
# STRATA_CUDA_NORM_FUSE=0 (its separate norm) against the diff, one round.
#   there: run(command="bash bench/device/pending/cuda-3-norm-fuse.sh",
#              carry=[".deps/pending/0-base", ".deps/pending/3-norm-fuse", ".deps/lib"])
# (the two builds and the libraries: 57 MiB; all of .deps/pending passes the 64 MiB a call carries)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/pending/3-norm-fuse
timeout 60 "$b/test_cuda" --norm-fuse > /tmp/test_norm.log 2>&1
echo "test_cuda --norm-fuse rc=$? ok=$(grep -c '^ok' /tmp/test_norm.log) fail=$(grep -c '^FAIL' /tmp/test_norm.log)"
grep -B3 '^FAIL' /tmp/test_norm.log | head -n 20
timeout 120 "$b/test_cuda" > /tmp/test_cuda.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/test_cuda.log) fail=$(grep -c '^FAIL' /tmp/test_cuda.log)"
grep '^FAIL' /tmp/test_cuda.log | head -n 10
A=.deps/pending/0-base/strata B=$b/strata REPS=${REPS:-2} OUT=/tmp/ab WORK=/tmp/ab-Q4_K bash bench/device/cuda_ab.sh 2>&1 | tail -n 8
echo "-- the diff, STRATA_CUDA_NORM_FUSE=0 (A) against on (B):"
A=$b/strata B=$b/strata ENV_A=STRATA_CUDA_NORM_FUSE=0 REPS=1 OUT=/tmp/ab2 WORK=/tmp/ab-Q4_K bash bench/device/cuda_ab.sh 2>&1 | tail -n 3
