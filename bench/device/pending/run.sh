#!/usr/bin/env bash
# There (the GPU machine): test_cuda of the last build prepare.sh made (every diff applied), then
# for each build after the base an A/B of its prompt and decode against the build before it
# (bench/device/cuda_ab.sh, 48-layer qwen3-30b-a3b shape, TYPE Q4_K by default, REPS 3), and ncu's
# detail of its GEMM launches (NCU=0: none).
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
out=${OUT:-/tmp/out}; mkdir -p "$out"
t0=$SECONDS
mapfile -t builds < <(ls -d .deps/pending/*/ | sed 's#/$##')
prev=${builds[0]}
for b in "${builds[@]:1}"; do
    n=$(basename "$b")
    if [ -x "$b/test_cuda" ]; then
        timeout 240 "$b/test_cuda" > "$out/test_cuda-$n.log" 2>&1
        echo "$n: test_cuda rc=$? ok=$(grep -c '^ok' "$out/test_cuda-$n.log") fail=$(grep -c '^FAIL' "$out/test_cuda-$n.log") ($((SECONDS - t0)) s)"
        grep '^FAIL' "$out/test_cuda-$n.log" | head -n 10
    fi
    echo "$n against $(basename "$prev"):"
    A=$prev/strata B=$b/strata REPS=${REPS:-3} OUT=/tmp/ab WORK=/tmp/ab-${TYPE:-Q4_K} bash bench/device/cuda_ab.sh 2>&1 | tail -n 3
    case $n in *topk*)  # sampled decoding is what it changes
        echo "$n against $(basename "$prev"), sampled (--temp 0.8 --seed 7):"
        A=$prev/strata B=$b/strata REPS=${REPS:-3} ARGS="--temp 0.8 --seed 7" OUT=/tmp/ab WORK=/tmp/ab-${TYPE:-Q4_K} \
            bash bench/device/cuda_ab.sh 2>&1 | tail -n 3 ;;
    esac
    [ "${NCU:-1}" = 1 ] && BIN=$b KERNEL=k_mmq COUNT=4 NCU_S=60 OUT=/tmp/ncu bash bench/device/cuda_ncu_detail.sh 2>&1 |
        grep -E 'k_mmq|Duration|Achieved Occ|Registers Per|long_scoreboard' | head -n 20
    prev=$b
done
echo "pending/run.sh: $((SECONDS - t0)) s"
