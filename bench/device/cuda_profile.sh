#!/usr/bin/env bash
# Kernel times of a few decode steps of the CUDA backend on the GPU machine (Nsight Compute, one
# metric, clocks left alone): the qwen3-30b-a3b shape cut to LAYERS layers, a short prompt, GEN
# decoded tokens; prints the time per kernel name (sum, count, mean) of the decode passes and
# writes the raw CSV to $OUT/ncu.csv.
#   BIN=DIR (strata built with CUDA=1)  TYPE=Q4_K  LAYERS=2  GEN=4  NCU_S=90
#   NCU_ARGS (default --cache-control none: the activations stay in L2 between kernels, as in a run)
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
bin=${BIN:-build-cuda}
export LD_LIBRARY_PATH="$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # liburing.so.2 (deps.sh)
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
[ -n "$ncu" ] || { echo "cuda_profile: no ncu"; exit 0; }
w=$(mktemp -d)
"$bin/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --layers "${LAYERS:-2}" --type "${TYPE:-Q4_K}" \
    -o "$w/m.gguf" --no-progress || exit 0
timeout "${NCU_S:-90}" "$ncu" --clock-control none ${NCU_ARGS:---cache-control none} --metrics gpu__time_duration.sum --csv \
    "$bin/strata" run -m "$w/m.gguf" --prompt-tokens 1,2,3,4,5,6,7,8 -n "${GEN:-4}" --temp 0 --ignore-eos -c 256 \
    --backend cuda > "$out/ncu.csv" 2> "$out/ncu.err"
echo "cuda_profile: ncu rc=$?, $(wc -l < "$out/ncu.csv") lines"
tail -n 3 "$out/ncu.err"
python3 - "$out/ncu.csv" "${GEN:-4}" <<'PY'
import csv, sys, collections
rows = []
with open(sys.argv[1]) as f:
    lines = [l for l in f if l.startswith('"')]
for r in csv.DictReader(lines):
    if r.get("Metric Name") == "gpu__time_duration.sum":
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "ns")
        v *= {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3, "ms": 1e3}.get(unit, 1e-3)
        rows.append((r["Kernel Name"][:70], v))
if not rows:
    print("no kernel rows"); sys.exit(0)
# the decode passes: the last GEN-1 of them hold the same kernels; take the tail third
tail = rows[len(rows) * 2 // 3:]
agg = collections.OrderedDict()
for n, v in tail:
    s, c = agg.get(n, (0.0, 0))
    agg[n] = (s + v, c + 1)
tot = sum(s for s, _ in agg.values())
print(f"kernels (last third of {len(rows)} launches): {len(tail)} launches, {tot:.1f} us")
for n, (s, c) in sorted(agg.items(), key=lambda x: -x[1][0]):
    print(f"  {s:9.1f} us {100 * s / tot:5.1f}%  {c:4d} x {s / c:7.2f} us  {n}")
PY
rm -rf "$w"
