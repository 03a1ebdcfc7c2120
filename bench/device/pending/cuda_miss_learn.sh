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
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/learn/strata w=/tmp/learn
. bench/device/pending/skewed_tier.sh
membw() { [ -x .deps/learn/membw ] && .deps/learn/membw 16 | grep -o 'threads=16 .*' | head -n 1; }
echo "host read: $(membw)"
t0=$SECONDS
for share in ${SHARES:-50 25}; do
    mib=$((exp_mib * share / 100))
    echo "== $share% ($mib MiB)"
    for i in $(seq "${REPS:-2}"); do
        for L in 0 1 2; do
            [ $((SECONDS - t0)) -gt "${BUDGET_S:-480}" ] && { echo "budget spent: $share% rep $i L$L skipped"; continue; }
            STRATA_GPU_MISS_LEARN=$L timeout 150 "$b" run -m "$m" --prompt-tokens "@$w/prompt.txt" -n 128 --temp 0 --ignore-eos \
                -c 1024 -b 512 --backend cuda --json --warmup 1 --gpu-cache-mib "$mib" --gpu-miss auto \
                > "$w/s$share.L$L.$i.json" 2> "$w/s$share.L$L.$i.err" || { echo "L$L run $i failed"; tail -n 3 "$w/s$share.L$L.$i.err"; }
            python3 - "$w/s$share.L$L.$i.json" "L$L" "$i" <<'PY'
import json, sys
try: j = json.load(open(sys.argv[1]))
except Exception: sys.exit(0)
s = j["stats"]; t = s["experts"]
print(sys.argv[2], "run", sys.argv[3], "decode", round(s["decode_tok_s"], 2), "prompt", round(s["prompt_tok_s"], 1),
      "hit_rate", round(t.get("hit_rate", 0), 4), "cpu_experts", t.get("cpu_experts"), "miss_copied", t.get("miss_copied"),
      "pcie_gb", round(t.get("pcie_bytes", 0) / 1e9, 1), "cpu_gbs", round(t.get("cpu_gbs", 0), 1),
      "prefetched", t.get("prefetched"), "learned", t.get("learned"), "refused", t.get("learn_refused"))
PY
        done
    done
done
echo "host read: $(membw)"
