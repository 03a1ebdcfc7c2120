#!/usr/bin/env bash
# Issue 10's other shapes against llama.cpp CUDA in one call (first run 2026-12-07, log bench/device/logs/cuda-shapes-llama-6934fc8-h100.txt): qwen3-next-
# 80b-a3b (48 layers, Q4_K, about 45 GB: the real layer count) and glm-4.5-air (Q4_K, LAYERS_AIR
# layers of its 46: the whole model's ~60 GB does not fit the machine's 64 GB disk beside the
# build), every weight in VRAM, prompt 512 / 128 decoded, strata warm (--warmup 1, as llama-bench
# times) against llama-bench -ngl 99 -r 2 on the same file. llama.cpp's CUDA build (about 3-5
# minutes) runs in the background while the first model is written and run; its bench waits for it.
#   here:  make CUDA=1 build-cuda/strata; cp build-cuda/strata .deps/bin/ (strip --strip-debug)
#   there: run(command="bash bench/device/cuda_shapes_llama.sh", carry=[".deps/bin", ".deps/lib", ".deps/llama-src.tar.xz"], timeout_s=590)
# Rows to $OUT/rows.tsv (bench/results.tsv's columns; machine from nvidia-smi).
set -u
cd "$(dirname "$0")/../.."
root=$PWD out=${OUT:-/tmp/out}; mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export LD_LIBRARY_PATH=$root/.deps/lib CUDA_MODULE_LOADING=EAGER
t0=$SECONDS
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); echo "$gpu"; df -h /tmp | tail -n 1
case "$gpu" in *H100*) mach=h100 ;; *) mach=h200 ;; esac
b=$root/.deps/bin/strata w=/tmp/shapes; mkdir -p "$w"
ll=${LLAMA_DIR:-/tmp/llama-cuda}  # llama_cuda_build.sh's folder (a warm machine's build is reused)
LLAMA_DIR=$ll NICE=10 bash "$root/bench/device/llama_cuda_build.sh" "$out/llama_build.log" 12 &
lpid=$!
python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range(512)))" > "$w/prompt.txt"
row() {  # model engine flags prompt decode note
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t1.0\t\t\t\t\tyes\t%s\n' "$(date -u +%Y-%m-%dT%H:%M)" "${COMMIT:-unknown}" "$mach" \
        "$1" "$2" "$3" "$4" "$5" "$6" | tee -a "$out/rows.tsv"
}
shape() {  # arch preset layers name
    local m="$w/$4.gguf" ts=$SECONDS
    "$b" synth --arch "$1" --preset "$2" --layers "$3" --type Q4_K -o "$m" --no-progress || { echo "synth $4 failed"; return; }
    echo "synth $4: $((SECONDS - ts)) s, $(du -h "$m" | cut -f1)"
    timeout 240 "$b" run -m "$m" --prompt-tokens "@$w/prompt.txt" -n 128 --temp 0 --ignore-eos -c 1024 -b 512 \
        --backend cuda --warmup 1 --json > "$w/$4.json" 2> "$out/$4.err"
    echo "strata $4: rc=$?"; grep -E 'prompt:|vram:' "$out/$4.err" | head -n 3
    local sp sd
    read -r sp sd < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["stats"]; print(round(s["prompt_tok_s"],1), round(s["decode_tok_s"],2))' "$w/$4.json" 2>/dev/null)
    [ -n "${sp:-}" ] && row "$4" "strata cuda" "--backend cuda prompt=512 gen=128 --warmup 1, every weight in VRAM" "$sp" "$sd" "same run as llama.cpp's row below"
    while kill -0 "$lpid" 2>/dev/null && [ $((SECONDS - t0)) -lt 480 ]; do sleep 2; done
    if kill -0 "$lpid" 2>/dev/null; then echo "llama.cpp build not done by 480 s"; rm -f "$m"; return; fi
    local lb="$ll/b/bin/llama-bench"
    [ -x "$lb" ] || { echo "no llama-bench"; tail -n 5 "$out/llama_build.log"; rm -f "$m"; return; }
    if timeout 200 "$lb" -m "$m" -ngl 99 -t 16 -p 512 -n 128 -r 2 -o json > "$w/$4.llama.json" 2> "$out/$4.llama.err"; then
        local lp ld
        read -r lp ld < <(python3 "$root/bench/device/llama_ts.py" "$w/$4.llama.json")
        row "$4" "llama.cpp cuda" "llama-bench -ngl 99 -t 16 p=512 n=128 -r 2 (same file, same run)" "$lp" "$ld" \
            "llama.cpp de3ff81 (the oracle npm bundle) built there with GGML_CUDA, sm_90"
        [ -n "${sp:-}" ] && python3 -c 'import sys; a,b,c,d=map(float,sys.argv[1:5]); print(f"{sys.argv[5]}: strata/llama.cpp prompt {a/c:.3f} decode {b/d:.3f}")' "$sp" "$sd" "$lp" "$ld" "$4"
    else
        echo "llama-bench $4 failed: $(tail -n 2 "$out/$4.llama.err")"
    fi
    rm -f "$m"
}
shape qwen3next qwen3-next-80b-a3b 48 qwen3-next-80b-a3b-L48-Q4_K
shape glm4moe glm-4.5-air "${LAYERS_AIR:-24}" "glm-4.5-air-L${LAYERS_AIR:-24}-Q4_K"
echo "---- $((SECONDS - t0)) s"
