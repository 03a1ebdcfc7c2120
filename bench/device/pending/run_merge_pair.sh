#!/usr/bin/env bash
# cuda-1-merge-batch64.diff and cuda-2-mv-pair.diff in one call (about 6 minutes):
#   here:  PATCHES="bench/device/pending/cuda-1-merge-batch64.diff bench/device/pending/cuda-2-mv-pair.diff" \
#              bash bench/device/pending/prepare.sh
#   there: run(command="bash bench/device/pending/run_merge_pair.sh", carry=[".deps/pending", ".deps/lib"])
# test_cuda of the last build (both diffs) and the A/Bs of run.sh (prompt 512 and decode on the
# 48-layer Q4_K file: the merge against the base, the pairs against the merge), then decode after
# prompts of 16,384 and 4,096 positions (16-layer file) for the base and the merge build, two
# rounds: the merge's gain is at long positions.
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
NCU=0 REPS=${REPS:-3} bash bench/device/pending/run.sh
for r in 1 2; do
    for b in 0-base 1-cuda-1-merge-batch64; do
        echo "== $b"
        REPS=1 MERGES=a PROMPTS="16384 4096" BIN=.deps/pending/$b bash bench/device/cuda_attn_prof.sh run
    done
done
