#!/usr/bin/env bash
# Three held-back CUDA changes in one binary and one call (34th session): cuda-9-l2-next.diff (the
# next layer's q, k, v, o and router asked into L2 by the down launch's blocks; STRATA_CUDA_L2_NEXT=0
# off) and the shared expert in the moe launches (STRATA_MOE_SHARED=0 off). test_cuda first (both
# changes' cases), then A/B with one switch each: qwen3-30b-a3b 48 layers (no shared expert) for
# the L2 hint, glm-4.5-air and qwen3-next-80b-a3b at 12 layers for the shared expert, and one
# decode with the in-run timeline (STRATA_CUDA_TIMELINE=1, cuda-11-timeline.diff).
#   here:  git apply bench/device/pending/cuda-12-combo.diff   (= cuda-9-l2-next + cuda-10-moe-shared + cuda-11-timeline)
#          make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda
#          mkdir -p .deps/combo && cp build-cuda/strata build-cuda/tests/test_cuda .deps/combo/ && strip .deps/combo/*
#          git apply -R bench/device/pending/cuda-12-combo.diff
#   there: run(command="LIMIT_S=480 bash bench/device/pending/cuda_combo.sh", carry=[".deps/combo", ".deps/lib"], timeout_s=520)
# LIMIT_S: the call's time; the A/Bs that would not fit are skipped (the order is what matters most
# first: tests, the shared expert on glm-4.5-air, the timeline, the L2 hint, qwen3-next).
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
B=.deps/combo
trap 'rm -rf /tmp/cmb-* /tmp/tc.log' EXIT
nvidia-smi --query-gpu=name --format=csv,noheader
t0=$(date +%s)
timeout ${TEST_S:-150} $B/test_cuda > /tmp/tc.log 2>&1
echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/tc.log) fail=$(grep -c '^FAIL' /tmp/tc.log) in $(( $(date +%s) - t0 )) s"
grep -i "shared\|chunks of 1" /tmp/tc.log | head -n 24; grep -B6 '^FAIL' /tmp/tc.log | head -n 40
ab() {  # name arch preset layers switch; skipped when the call's time (LIMIT_S) would not hold it
    if [ $(( $(date +%s) - t0 )) -gt $(( ${LIMIT_S:-480} - 100 )) ]; then echo "== $1 on $3: skipped (time)"; return; fi
    echo "== $1: $3, $4 layers, Q4_K; A: $5, B: default ($(( $(date +%s) - t0 )) s)"
    A=$B/strata B=$B/strata ENV_A=$5 ARCH=$2 PRESET=$3 LAYERS=$4 ARGS="--warmup 1" TYPE=Q4_K REPS=${REPS:-2} \
        OUT=/tmp/cmb-o-$2 WORK=/tmp/cmb-$2 bash bench/device/cuda_ab.sh 2>&1 | tail -n 7
    rm -rf "/tmp/cmb-$2"
}
ab "shared in moe" glm4moe glm-4.5-air 12 STRATA_MOE_SHARED=0
# one decode with each launch's time in the run (STRATA_CUDA_TIMELINE=1: graphs and programmatic
# dependent launch as they are); 8 layers of qwen3-30b-a3b (a layer's launches as in 48)
if [ $(( $(date +%s) - t0 )) -lt $(( ${LIMIT_S:-480} - 60 )) ]; then
    mkdir -p /tmp/cmb-tl
    $B/strata synth --arch qwen3moe --preset qwen3-30b-a3b --layers 8 --type Q4_K -o /tmp/cmb-tl/m.gguf --no-progress
    echo "== timeline: qwen3-30b-a3b 8 layers Q4_K, 4-token prompt, 256 decoded ($(( $(date +%s) - t0 )) s)"
    STRATA_CUDA_TIMELINE=1 STRATA_LOG=info timeout 60 $B/strata run -m /tmp/cmb-tl/m.gguf --prompt-tokens 1,2,3,4 \
        -n 256 --temp 0 --ignore-eos -c 1024 --backend cuda 2>&1 | grep -E "timeline|generated" | head -n 45
    rm -rf /tmp/cmb-tl
fi
ab "L2 next" qwen3moe qwen3-30b-a3b 48 STRATA_CUDA_L2_NEXT=0
ab "shared in moe" qwen3next qwen3-next-80b-a3b 12 STRATA_MOE_SHARED=0
echo "done in $(( $(date +%s) - t0 )) s"
