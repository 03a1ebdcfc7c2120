#!/usr/bin/env bash
# Expert store with mixed low-bit expert layers, as real dynamic quants have them: a model whose
# expert layers are IQ1_M, IQ2_XXS, IQ2_XS and IQ2_XXS (triplets of 42.0, 49.5, 55.5 KiB: 44, 52
# and 56 KiB slots) gets one size class per distinct slot size, and the cache holds exactly
# n_slots x (sum of the layers' own slot sizes): no slot padded to the largest class. With
# --cache-classes off every slot is the largest (the waste the classes avoid). Logits streamed
# through the small cache are bit-identical to full residency, and the bytes read per miss of each
# layer are that layer's own triplet size.
set -eu
bin=${STRATA_BIN:?}
dir=$(mktemp -d /tmp/strata-t-store-lowbit.XXXXXX)
trap 'rm -rf "$dir"' EXIT
m=$dir/m.gguf
"$bin" synth --arch qwen3moe --preset tiny --experts 64 --seed 7 --type Q8_0 --type-overrides \
    'blk\.0\.ffn_(gate|up|down)_exps=IQ1_M,blk\.1\.ffn_(gate|up|down)_exps=IQ2_XXS,blk\.2\.ffn_(gate|up|down)_exps=IQ2_XS,blk\.3\.ffn_(gate|up|down)_exps=IQ2_XXS' \
    -o "$m" --no-progress
toks=$(awk 'BEGIN{for(i=0;i<24;i++) printf "%s%d", (i?",":""), (i*37+11)%1000}')
"$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/full.bin" -t 2 2>/dev/null
"$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/s.bin" -t 2 --cache-mib 4 --stats-layers --json >"$dir/s.json" 2>/dev/null
"$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/u.bin" -t 2 --cache-mib 4 --cache-classes off --json >"$dir/u.json" 2>/dev/null
cmp "$dir/full.bin" "$dir/s.bin" || { echo "streamed logits differ from full residency"; exit 1; }
cmp "$dir/full.bin" "$dir/u.bin" || { echo "uniform-slot logits differ from full residency"; exit 1; }
python3 - "$dir/s.json" "$dir/u.json" <<'PY'
import json, sys
def experts(path):
    d = json.load(open(path))
    return (d.get("stats") or d)["experts"]
s, u = experts(sys.argv[1]), experts(sys.argv[2])
row = lambda n_el, bs, ts: n_el // bs * ts
trip = {"IQ1_M": 3 * row(256 * 256, 256, 56), "IQ2_XXS": 3 * row(256 * 256, 256, 66), "IQ2_XS": 3 * row(256 * 256, 256, 74)}
layers = ["IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_XXS"]
slot = lambda b: (b + 4095) // 4096 * 4096
sizes = [slot(trip[t]) for t in layers]
n = s["slots_per_layer"]
want = n * sum(sizes)
print(f"classes {s['classes']} (distinct slot sizes {sorted(set(sizes))}), {n} slots/layer, cache {s['cache_mib']*2**20:.0f} B = "
      f"{n} x {sum(sizes)} (padded to the largest it would be {n * len(layers) * max(sizes)})")
print(f"--cache-classes off: classes {u['classes']}, {u['slots_per_layer']} slots/layer, cache {u['cache_mib']*2**20:.0f} B")
ok = s["classes"] == 3 and n >= 16 and abs(s["cache_mib"] * 2**20 - want) < 1 and u["classes"] == 1
ok = ok and abs(u["cache_mib"] * 2**20 - u["slots_per_layer"] * len(layers) * max(sizes)) < 1
for L in s["layers"]:
    if L["misses"]:
        per = L["bytes_read"] / L["misses"]
        print(f"layer {L['layer']} ({layers[L['layer']]}): {L['misses']} misses, {per:.0f} B read per miss (triplet {trip[layers[L['layer']]]})")
        ok = ok and per == trip[layers[L["layer"]]]
sys.exit(0 if ok else 1)
PY
echo "mixed low-bit expert layers: one class per slot size, no padded slot, logits identical"
