#!/usr/bin/env bash
# The CUDA attention at long contexts, one call on the GPU machine, phases in the order given:
#   merge  test_cuda --merge (the two merges bit for bit)
#   tests  test_cuda whole (its merge cases included)
#   bench  test_cuda --bench-attn (decode of the qwen3-30b-a3b shape at positions 128 .. 16,000, F32
#          and F16 caches, then MLA) with the merge a block a token (STRATA_CUDA_MERGE_OLD=1) and a
#          block a head
#   run    strata run on a 16-layer qwen3-30b-a3b Q4_K file: prompts of PROMPTS (512 16384) then 128
#          decoded, the merges of MERGES interleaved (STRATA_CUDA_MERGE_OLD: 1 a block a token, 0 a
#          block a head, a: the engine's choice; "1 0"), REPS (2) rounds
#   ncu    Nsight Compute on --bench-attn: each k_attn_part / k_attn_merge* launch's time, grouped by
#          the part kernel's grid (its chunks: the position)
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda; strip both into .deps/attn/ (BIN)
#   there: run(command="bash bench/device/cuda_attn_prof.sh tests bench run ncu", carry=[".deps/attn", ".deps/lib"])
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=${BIN:-.deps/attn}
out=${OUT:-/tmp/out}; mkdir -p "$out"
W=${WORK:-/tmp/attn}; mkdir -p "$W"
for phase in "$@"; do
    case $phase in
    merge)
        timeout 120 "$bin/test_cuda" --merge 2>&1 | tail -n 6 ;;
    tests)
        timeout "${TESTS_S:-240}" "$bin/test_cuda" > "$out/test_cuda.log" 2>&1
        echo "test_cuda rc=$? $(grep -c '^ok' "$out/test_cuda.log") ok; $(tail -n 1 "$out/test_cuda.log")"
        grep -E 'FAIL|merge' "$out/test_cuda.log" | head -n 20 ;;
    bench)
        for old in 1 0; do
            echo "== merge $([ $old = 1 ] && echo 'a block a token (old)' || echo 'a block a head')"
            STRATA_CUDA_MERGE_OLD=$old timeout 120 "$bin/test_cuda" --bench-attn 2>&1 | grep -E 'decode at|prompt of|^attention'
        done ;;
    run)
        [ -f "$W/m.gguf" ] || "$bin/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 16 --type Q4_K -o "$W/m.gguf" \
            --no-progress > /dev/null 2>&1 || { echo "synth failed"; continue; }
        for p in ${PROMPTS:-512 16384}; do
            awk -v n=$p 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}' > "$W/p$p.ids"
        done
        for r in $(seq "${REPS:-2}"); do for p in ${PROMPTS:-512 16384}; do for old in ${MERGES:-1 0}; do
            STRATA_CUDA_MERGE_OLD=$old "$bin/strata" run -m "$W/m.gguf" --prompt-tokens "@$W/p$p.ids" -n 128 --temp 0 --ignore-eos \
                --json --backend cuda -c $((p + 200)) 2> /dev/null > "$W/r.json"
            python3 -c "import json,sys; j=json.load(open(sys.argv[1])); d=j['stats']; print('rep $r prompt $p merge_old $old: prompt %.1f decode %.2f tok/s, tokens %s' % (d['prompt_tok_s'], d['decode_tok_s'], __import__('hashlib').md5(str(j.get('tokens')).encode()).hexdigest()[:10]))" "$W/r.json"
        done; done; done ;;
    ncu)
        ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n 1)
        [ -n "$ncu" ] || { echo "no ncu"; continue; }
        timeout "${NCU_S:-150}" "$ncu" --clock-control none --cache-control none -k 'regex:k_attn_(part|merge)' \
            --metrics gpu__time_duration.sum,launch__grid_size --csv "$bin/test_cuda" --bench-attn > "$out/ncu.csv" 2> "$out/ncu.err"
        echo "ncu rc=$? $(wc -l < "$out/ncu.csv") lines"
        python3 - "$out/ncu.csv" <<'PY'
import csv, sys, collections
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
launch = collections.OrderedDict()
for r in csv.DictReader(lines):
    d = launch.setdefault(r["ID"], {"name": r["Kernel Name"].split("(")[0].split("<")[0]})
    v = float(r["Metric Value"].replace(",", ""))
    if r["Metric Name"] == "gpu__time_duration.sum":
        d["us"] = v * {"ns": 1e-3, "nsecond": 1e-3, "usecond": 1, "us": 1, "msecond": 1e3}.get(r.get("Metric Unit", "ns"), 1e-3)
    else:
        d["grid"] = int(v)
segs = []  # runs of launches with the same part grid (a position; F32 then F16 repeat them)
for d in launch.values():
    if "part" in d["name"] and (not segs or segs[-1]["grid"] != d.get("grid")):
        segs.append({"grid": d.get("grid"), "part": [], "merge": [], "name": d["name"]})
    if segs:
        segs[-1]["part" if "part" in d["name"] else "merge"].append(d.get("us", 0.0))
med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")
for s in segs:
    print("%-16s grid %6s: %3d launches, part median %8.1f us, merge median %8.1f us" %
          (s["name"], s["grid"], len(s["part"]), med(s["part"]), med(s["merge"])))
PY
        ;;
    *) echo "unknown phase $phase (merge, tests, bench, run, ncu)"; exit 2 ;;
    esac
done
