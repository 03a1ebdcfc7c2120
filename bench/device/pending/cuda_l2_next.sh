#!/usr/bin/env bash
# The next layer's dense weights into L2 while a decode layer's experts compute
# (cuda-9-l2-next.diff, 33rd session, not yet run): the moe op carries the next layer's q, k, v,
# o and router (backend.h's strata_moe_op.next) and k_mv_moe_down's blocks ask their share of those
# lines into L2 before they wait for the gate and up products (10.6 MB + 1 MB a layer of the Q4_K
# file, 90k lines over 65k threads). Those mat-vecs take 20 us of a 77 us layer and are bound by
# their loads' latency; from L2 they should take less. A hint, so the same tokens; test_cuda's
# moe_down case runs with ranges of odd lengths. One binary: STRATA_CUDA_L2_NEXT=0 against the
# default, Q4_K and Q8_0 (whose 42 MB of experts a layer may evict the lines before their use).
#   here:  git apply bench/device/pending/cuda-9-l2-next.diff; make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda;
#          mkdir -p .deps/l2 && cp build-cuda/strata build-cuda/tests/test_cuda .deps/l2/ && strip .deps/l2/*;
#          git apply -R bench/device/pending/cuda-9-l2-next.diff
#   there: run(command="bash bench/device/pending/cuda_l2_next.sh", carry=[".deps/l2", ".deps/lib"], timeout_s=560)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
trap 'rm -rf /tmp/l2-Q4_K /tmp/l2-Q8_0' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 .deps/l2/test_cuda > /tmp/tl.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/tl.log) fail=$(grep -c '^FAIL' /tmp/tl.log)"; grep -B4 '^FAIL' /tmp/tl.log | head -n 30
for t in Q4_K Q8_0; do
    echo "== qwen3-30b-a3b $t, A: STRATA_CUDA_L2_NEXT=0, B: on"
    A=.deps/l2/strata B=.deps/l2/strata ENV_A=STRATA_CUDA_L2_NEXT=0 ARGS="--warmup 1" TYPE=$t REPS=${REPS:-3} \
        OUT=/tmp/l2o-$t WORK=/tmp/l2-$t bash bench/device/cuda_ab.sh 2>&1 | tail -n 3
done
