#!/usr/bin/env bash
# Q8_K activations rounded four blocks a warp (cuda-7-q8k-round.diff on 613d95b; 30th session, not
# yet run), the K-quant models' counterpart of the Q8_0 change that gave Q8_0 decode 1.152x: the
# attention merge's last block (4 warps) rounds a token's whole output row for the output
# projection, 16 Q8_K blocks on qwen3-30b-a3b (4 passes of each warp, now 1) and 48 on glm-4.5-air
# (96 heads of 128: 12 passes, now 3); the norms of 4,096-wide rows 2 -> 1. Same values (test_cuda's
# rounding case against the CPU, rows of 1,024, 1,280 (a partial group) and 1,440). The whole
# test_cuda, then A (HEAD) against B on qwen3-30b-a3b Q4_K (48 layers) and on glm-4.5-air Q4_K (12
# of its 46 layers: the A/B's file name is cuda_ab.sh's, the shape is glm's).
#   here:  HEAD's build-cuda/strata in .deps/bin (strip); git apply cuda-7-q8k-round.diff; its strata
#          and test_cuda into .deps/q8k (strip)
#   there: run(command="bash bench/device/pending/cuda_q8k_round.sh", carry=[".deps/bin", ".deps/q8k", ".deps/lib"], timeout_s=500)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
trap 'rm -rf /tmp/ab-Q4_K /tmp/ab-glm' EXIT  # the models: the next call on this machine needs the disk
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 .deps/q8k/test_cuda > /tmp/tk.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/tk.log) fail=$(grep -c '^FAIL' /tmp/tk.log)"; grep -B4 '^FAIL' /tmp/tk.log | head -n 30
grep 'activation rounding' /tmp/tk.log
echo "== qwen3-30b-a3b Q4_K"
A=.deps/bin/strata B=.deps/q8k/strata ARGS="--warmup 1" REPS=${REPS:-3} OUT=/tmp/abk WORK=/tmp/ab-Q4_K \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 3
echo "== glm-4.5-air Q4_K, 12 layers"
mkdir -p /tmp/ab-glm
[ -f /tmp/ab-glm/q3-30b-Q4_K.gguf ] || .deps/bin/strata synth --arch glm4moe --preset glm-4.5-air --layers 12 --type Q4_K \
    -o /tmp/ab-glm/q3-30b-Q4_K.gguf --no-progress
A=.deps/bin/strata B=.deps/q8k/strata ARGS="--warmup 1" REPS=${REPS:-3} OUT=/tmp/abg WORK=/tmp/ab-glm \
    bash bench/device/cuda_ab.sh 2>&1 | tail -n 3
