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
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/defer/strata w=/tmp/defer
. bench/device/pending/skewed_tier.sh
echo "host read: $(.deps/defer/membw 16 | grep -o 'threads=16 .*' | head -n 1)"
t0=$SECONDS
for share in ${SHARES:-50 25}; do
    mib=$((exp_mib * share / 100))
    echo "== $share% ($mib MiB)"
    for i in $(seq "${REPS:-2}"); do
        for D in 0 1; do
            [ $((SECONDS - t0)) -gt "${BUDGET_S:-250}" ] && { echo "budget spent: $share% rep $i D$D skipped"; continue; }
            STRATA_SPLIT_DEFER=$D STRATA_SPLIT_PROF=1 STRATA_LOG=info timeout 120 "$b" run -m "$m" --prompt-tokens "@$w/prompt.txt" \
                -n 128 --temp 0 --ignore-eos -c 1024 -b 512 --backend cuda --json --warmup 1 --gpu-cache-mib "$mib" \
                --gpu-miss auto > "$w/s$share.D$D.$i.json" 2> "$w/s$share.D$D.$i.err" || { echo "D$D run $i failed"; tail -n 3 "$w/s$share.D$D.$i.err"; }
            python3 - "$w/s$share.D$D.$i.json" "D$D" "$i" <<'PY'
import json, sys
try: j = json.load(open(sys.argv[1]))
except Exception: sys.exit(0)
s = j["stats"]; t = s["experts"]
print(sys.argv[2], "run", sys.argv[3], "decode", round(s["decode_tok_s"], 2), "prompt", round(s["prompt_tok_s"], 1),
      "split_hit_rate", round(t.get("split_hit_rate", 0), 4), "cpu_experts", t.get("cpu_experts"), "miss_copied", t.get("miss_copied"),
      "cpu_gbs", round(t.get("cpu_gbs", 0), 1),
      "pcie_gbs", round(t.get("pcie_gbs", 0), 1))
PY
            [ "$i" = 1 ] && grep -o 'split profile: .*' "$w/s$share.D$D.$i.err" | sed 's/^/   /'
        done
    done
done
echo "host read: $(.deps/defer/membw 16 | grep -o 'threads=16 .*' | head -n 1)"
STRATA_SPLIT_DEFER=1 timeout 150 .deps/defer/test_cuda > "$w/tc.log" 2>&1
echo "test_cuda (STRATA_SPLIT_DEFER=1) rc=$? ok=$(grep -c '^ok' "$w/tc.log") fail=$(grep -c '^FAIL' "$w/tc.log")"
grep -B3 '^FAIL' "$w/tc.log" | head -n 20; grep -i 'VRAM tier' "$w/tc.log" | head -n 8
