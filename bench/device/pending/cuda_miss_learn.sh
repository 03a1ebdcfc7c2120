#!/usr/bin/env bash
# The VRAM tier in --gpu-miss auto learning from the experts the CPU computes (cuda-6-miss-learn.diff
# on 546e94e; 31st session, not yet run). On the skewed file (synth --route-skew 0.5) 50% of the
# experts in VRAM hit 59.5% where strata sim's LRU gives 77%: auto's CPU-computed misses never enter
# the tier. One binary, three settings interleaved at each share: STRATA_GPU_MISS_LEARN unset (0),
# 1 (every CPU-computed expert prefetched at low priority, as --gpu-miss cpu does) and 2 (taken in
# only over a victim used less often, strata_vram_learn under the default LFU policy); each run's
# decode and prompt tok/s, hit rate, CPU experts, copies, prefetches and learn counts from --json.
#   here:  git apply cuda-6-miss-learn.diff; make CUDA=1 build-cuda/strata; into .deps/learn (strip)
#   there: run(command="bash bench/device/pending/cuda_miss_learn.sh", carry=[".deps/learn", ".deps/lib"], timeout_s=580)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
b=.deps/learn/strata w=/tmp/learn
. bench/device/pending/skewed_tier.sh
one() {
    local o="$w/s$1.L$4.$3"
    STRATA_GPU_MISS_LEARN=$4 tier_run "$o" --gpu-cache-mib "$2" --gpu-miss auto
    python3 bench/device/pending/tier_row.py "$o.json" "L$4" "$3" hit_rate cpu_experts miss_copied pcie_bytes cpu_gbs \
        prefetched learned learn_refused
}
BUDGET_S=${BUDGET_S:-480} each_run "0 1 2" one
echo "host read: $(host_read)"
