#!/usr/bin/env bash
# The VRAM tier in --gpu-miss auto learning from the experts the CPU computes (cuda-6-miss-learn.diff
# on 1b0a429; 30th session, not yet run). On the skewed file (synth --route-skew 0.5) 50% of the
# experts in VRAM hit 59.5% where strata sim's LRU gives 77%: auto's CPU-computed misses never enter
# the tier. STRATA_GPU_MISS_LEARN=1 prefetches them at low priority, as --gpu-miss cpu does. One
# binary, the switch off (A) and on (B), interleaved, at each share; hit rates, CPU experts and
# copies from each run's --json. Expected: a higher hit rate; whether the prefetches' host-memory
# reads cost the CPU's share more than the hits save is what this measures.
#   here:  git apply cuda-6-miss-learn.diff; make CUDA=1 build-cuda/strata; into .deps/learn (strip)
#   there: run(command="bash bench/device/pending/cuda_miss_learn.sh", carry=[".deps/learn", ".deps/lib"], timeout_s=500)
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/learn/strata w=/tmp/learn; mkdir -p "$w"
m="$w/q3-30b-Q4_K.gguf"
[ -f "$m" ] || "$b" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 48 --type Q4_K --route-skew 0.5 -o "$m" --no-progress ||
    { echo "synth failed"; exit 1; }
exp_mib=$("$b" inspect "$m" --json | python3 -c '
import json, sys
print(int(sum(t["bytes"] for t in json.load(sys.stdin)["tensors"] if "_exps." in t["name"]) / 1048576))')
echo "expert MiB $exp_mib (15552 expected)"
for share in ${SHARES:-50 25}; do
    mib=$((exp_mib * share / 100))
    echo "== $share% ($mib MiB)"
    A=$b B=$b ENV_B=STRATA_GPU_MISS_LEARN=1 ARGS="--warmup 1 --gpu-cache-mib $mib --gpu-miss auto" REPS=${REPS:-2} \
        OUT=/tmp/learn-out-$share WORK=$w timeout 400 bash bench/device/cuda_ab.sh 2>&1 | tail -n 3
    python3 - "$w" "${REPS:-2}" <<'PY'
import json, sys
w, reps = sys.argv[1], int(sys.argv[2])
for v in "ab":
    for i in range(1, reps + 1):
        try: j = json.load(open(f"{w}/{v}.{i}.json"))
        except Exception: continue
        t = j["stats"]["experts"]  # the VRAM tier (its host tier under "host")
        print(v, i, "hit_rate", round(t.get("hit_rate", 0), 4), "cpu_experts", t.get("cpu_experts"),
              "miss_copied", t.get("miss_copied"), "pcie_gb", round(t.get("pcie_bytes", 0) / 1e9, 1),
              "cpu_gbs", t.get("cpu_gbs"), "prefetched", t.get("prefetched"))
PY
done
