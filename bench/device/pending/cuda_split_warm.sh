#!/usr/bin/env bash
# The VRAM tier's CPU share warmed (STRATA_SPLIT_WARM=N; 32nd session). While the host waits for
# a split layer's routes (60-75 us a layer, its cores idle), it guesses the layer's experts from
# the previous layer's rows (already on the host), and its threads read the guessed misses (at most
# N experts) into the caches, so the CPU's share reads them from there instead of DRAM. One binary,
# N = 0 and the values of $WARMS interleaved, at 50% and 25% of the experts in VRAM on the skewed
# 48-layer file, with the split profile of the first round; then the whole test_cuda (its VRAM-tier
# case runs the warming in chunks of 1 and 7 and checks its counts).
# Measured twice on 2026-12-07 (decode 0.58-0.70x; docs/expert-store.md) and held back: apply
# bench/device/pending/cuda-8-split-warm.diff before building.
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda build/membw; into .deps/warm (strip)
#   there: run(command="bash bench/device/pending/cuda_split_warm.sh", carry=[".deps/warm", ".deps/lib"], timeout_s=540)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
lscpu | grep -E 'Model name|L3' | sed 's/  */ /g'
b=.deps/warm/strata w=/tmp/warm
if [ "${TESTS_FIRST:-1}" = 1 ]; then
    timeout 200 .deps/warm/test_cuda > /tmp/tc.log 2>&1
    echo "test_cuda rc=$? ok=$(grep -c '^ok' /tmp/tc.log) fail=$(grep -c '^FAIL' /tmp/tc.log)"
    grep -B3 '^FAIL' /tmp/tc.log | head -n 20; grep -iE 'VRAM tier|warmed|misses (on|split)' /tmp/tc.log | head -n 12
fi
. bench/device/pending/skewed_tier.sh
one() {  # W: N experts at most; Nd: the lines demoted to L3; Nf: the copies started first
    local W=$4 D=0 F=0 o="$w/s$1.W$4.$3"
    case $W in *d) D=1 ;; *f) F=1 ;; esac
    STRATA_SPLIT_WARM=${W%[df]} STRATA_SPLIT_WARM_DEMOTE=$D STRATA_SPLIT_FETCH_FIRST=$F STRATA_SPLIT_PROF=1 STRATA_LOG=info \
        tier_run "$o" --gpu-cache-mib "$2" --gpu-miss auto
    python3 bench/device/pending/tier_row.py "$o.json" "W$W" "$3" split_hit_rate cpu_experts miss_copied cpu_gbs pcie_gbs \
        warmed warm_used warm_s
    [ "$3" = 1 ] && grep -o 'split profile: .*' "$o.err" | sed 's/^/   /'
}
BUDGET_S=${BUDGET_S:-240} each_run "0 ${WARMS:-3}" one
echo "host read: $(host_read)"
