#!/usr/bin/env bash
# Q8_0 / Q8_1 activations rounded eight blocks a warp (30th session, not yet run): a warp's eight
# blocks in one chain of 2 + 2 shuffle levels where one block a pass took 8 passes of 5 + 5 (the
# norms of a 2,048-wide row in a Q8_0 model, the attention merge's rounding for the output
# projection); the same values (the whole test_cuda; its rounding case against the CPU at rows of 1,024 and
# 1,440 elements, the last group partial). Then the Q8_0 file A (HEAD) against B, tokens the same.
#   here:  HEAD's build-cuda/strata into .deps/bin (strip); git apply cuda-5-q8-round.diff (on 6934fc8); its strata and test_cuda into
#          .deps/q8r (strip)
#   there: run(command="bash bench/device/pending/cuda_q8_round.sh", carry=[".deps/bin", ".deps/q8r", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 .deps/q8r/test_cuda > /tmp/tq.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/tq.log) fail=$(grep -c '^FAIL' /tmp/tq.log)"; grep -B4 '^FAIL' /tmp/tq.log | head -n 30
grep 'activation rounding' /tmp/tq.log
A=.deps/bin/strata B=.deps/q8r/strata ARGS="--warmup 1" TYPE=Q8_0 REPS=${REPS:-3} OUT=/tmp/abq WORK=/tmp/ab-Q8_0 \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 9
