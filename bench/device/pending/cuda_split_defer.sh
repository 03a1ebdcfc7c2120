#!/usr/bin/env bash
# The VRAM tier's split layer without its own final sync (STRATA_SPLIT_DEFER=1; 31st session, not
# yet run). A split layer (--gpu-miss auto) ends with a sync so that its experts' views can be
# released: the GPU finishes the copied experts and the CPU's add while the host waits, then the
# host queues the next layer's attention. Deferred, the views are released at the next drain (the
# next layer's routes coming down), and the host queues the next attention at once. The split
# profile of 2026-12-05 gave the sync 16.6 us and the next attention's launches 20.6 us of a 287 us
# layer. One binary, the switch off and on, interleaved at 50% and 25% of the experts in VRAM on
# the skewed 48-layer file, with the split profile of each run; then test_cuda with the switch on
# (its VRAM-tier cases run the split in chunks of 1 and 7 against the resident logits).
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda build/membw; into .deps/defer (strip)
#   there: run(command="bash bench/device/pending/cuda_split_defer.sh", carry=[".deps/defer", ".deps/lib"], timeout_s=420)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
b=.deps/defer/strata w=/tmp/defer
. bench/device/pending/skewed_tier.sh
one() {
    local o="$w/s$1.D$4.$3"
    STRATA_SPLIT_DEFER=$4 STRATA_SPLIT_PROF=1 STRATA_LOG=info tier_run "$o" --gpu-cache-mib "$2" --gpu-miss auto
    python3 bench/device/pending/tier_row.py "$o.json" "D$4" "$3" split_hit_rate cpu_experts miss_copied cpu_gbs pcie_gbs
    [ "$3" = 1 ] && grep -o 'split profile: .*' "$o.err" | sed 's/^/   /'
}
each_run "0 1" one
echo "host read: $(host_read)"
STRATA_SPLIT_DEFER=1 timeout 150 .deps/defer/test_cuda > "$w/tc.log" 2>&1
echo "test_cuda (STRATA_SPLIT_DEFER=1) rc=$? ok=$(grep -c '^ok' "$w/tc.log") fail=$(grep -c '^FAIL' "$w/tc.log")"
grep -B3 '^FAIL' "$w/tc.log" | head -n 20; grep -i 'VRAM tier' "$w/tc.log" | head -n 8
