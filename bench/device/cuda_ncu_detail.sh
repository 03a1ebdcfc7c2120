#!/usr/bin/env bash
# Nsight Compute's detail (speed of light, occupancy, warp stall reasons, scheduler, launch) for a
# few launches of one kernel family of the CUDA backend, on the qwen3-30b-a3b shape cut to LAYERS
# layers: where a kernel's time goes (issue, latency, memory), before changing it.
#   run(command="BIN=.deps/bin KERNEL=k_mmq PROMPT=512 bash bench/device/cuda_ncu_detail.sh", carry=[".deps/bin", ".deps/lib"])
# KERNEL (a regex on the kernel name, default k_mmq), SKIP launches of it first (default 0), COUNT
# launches (default 4), PROMPT tokens (default 512), GEN (default 1), TYPE (Q4_K), LAYERS (2),
# NCU_S (time limit, default 120). The report goes to $OUT/ncu_detail.txt and its summary to stdout.
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
bin=${BIN:-build-cuda}
export LD_LIBRARY_PATH="$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
[ -n "$ncu" ] || { echo "cuda_ncu_detail: no ncu"; exit 0; }
# warp stall reasons, cycles an issued instruction: smsp__average_warps_issue_stalled_<reason>_per_issue_active
stalls=$(for r in long_scoreboard short_scoreboard barrier wait mio_throttle lg_throttle math_pipe_throttle not_selected \
    no_instruction dispatch_stall membar drain imc_miss branch_resolving selected; do
    printf 'smsp__average_warps_issue_stalled_%s_per_issue_active.ratio,' "$r"; done)
stalls=${stalls%,}
w=$(mktemp -d)
"$bin/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --layers "${LAYERS:-2}" --type "${TYPE:-Q4_K}" \
    -o "$w/m.gguf" --no-progress || exit 0
python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range(${PROMPT:-512})))" > "$w/p.txt"
timeout "${NCU_S:-120}" "$ncu" --clock-control none --kernel-name "regex:${KERNEL:-k_mmq}" \
    --launch-skip "${SKIP:-0}" --launch-count "${COUNT:-4}" \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SchedulerStats --section MemoryWorkloadAnalysis --metrics "$stalls" \
    "$bin/strata" run -m "$w/m.gguf" --prompt-tokens "@$w/p.txt" -n "${GEN:-1}" --temp 0 --ignore-eos \
    -c $((${PROMPT:-512} + 16)) -b "${PROMPT:-512}" --backend cuda > "$out/ncu_detail.txt" 2> "$out/ncu_detail.err"
echo "cuda_ncu_detail: ncu rc=$?, $(wc -l < "$out/ncu_detail.txt") lines"
tail -n 3 "$out/ncu_detail.err"
grep -E '^  [a-z_]+.*\(|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit|Grid Size|Dynamic Shared|Compute \(SM\) Throughput|Memory Throughput|Warp Cycles Per Issued|Issued Warp Per|No Eligible|issue_stalled|L1/TEX Hit|L2 Hit' "$out/ncu_detail.txt" | head -n 120
rm -rf "$w"
