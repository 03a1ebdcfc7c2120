#!/usr/bin/env bash
# The CUDA backend's F16 KV cache against its F32 one, for the step that lets `auto` pick F16 on
# CUDA too (docs/cuda.md). One call on the GPU machine:
#   here:  make CUDA=1; mkdir -p .deps/kvcheck/bin; strip --strip-debug -o .deps/kvcheck/bin/strata build-cuda/strata
#          bash bench/device/deps.sh   (.deps/lib)
#   there: run(command="bash bench/device/cuda_kv_f16.sh parity speed", carry=[".deps/kvcheck", ".deps/lib"])
# parity: tiny qwen3moe, qwen3next, qwen35moe and glm4moe models (F32 weights, seed 7: the same
#   bytes as `strata synth` gives here; their sha256 is printed) evaluated on 600 positions with
#   F16 and F32 caches, logits to $OUT/logits/ARCH.KV.f32, and prompt chunks of 1, 7 and 512 compared;
#   here: tests/compare_logits.mjs against the oracle's logits with the same cache type
#   (tests/oracle logits.mjs --cache-type-k f16 --cache-type-v f16), bounds of tests/t_parity_kv.sh.
# speed: a 16-layer qwen3-30b-a3b Q4_K file, 128 tokens decoded after prompts of 512 and 4,096
#   (PROMPTS="..." for others), F32 against F16, two rounds interleaved.
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
S=${STRATA:-.deps/kvcheck/bin/strata} W=${WORK:-/tmp/kv} out=${OUT:-/tmp/kv_out}
mkdir -p "$W" "$out/logits"
toks=$(awk -v n=600 'BEGIN{s=12345; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')
for phase in "$@"; do
    case $phase in
    parity)
        for a in qwen3moe qwen3next qwen35moe glm4moe; do
            "$S" synth --arch "$a" --preset tiny --seed 7 --type F32 -o "$W/$a.gguf" --no-progress 2>/dev/null
            echo "$a $(sha256sum "$W/$a.gguf" | cut -c1-16)"
            for kv in f16 f32; do
                "$S" eval -m "$W/$a.gguf" --tokens "$toks" --logits-out "$out/logits/$a.$kv.f32" -t 2 --backend cuda \
                    --cache-type-k $kv --cache-type-v $kv 2> "$W/err.txt" > /dev/null
                echo "$a $kv eval rc=$? $(grep -i 'error\|KV cache' "$W/err.txt" | head -n 2)"
            done
            for b in 1 7; do
                "$S" eval -m "$W/$a.gguf" --tokens "$toks" --logits-out "$W/$a.b$b.f32" -t 2 --backend cuda -b $b \
                    --cache-type-k f16 --cache-type-v f16 2> /dev/null > /dev/null
            done
            if cmp -s "$W/$a.b1.f32" "$W/$a.b7.f32" && cmp -s "$W/$a.b1.f32" "$out/logits/$a.f16.f32"; then
                echo "$a f16: chunks of 1, 7 and 512 identical"
            else
                echo "$a f16: chunks DIFFER"
            fi
        done ;;
    speed)
        "$S" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 16 --type Q4_K -o "$W/m.gguf" --no-progress > /dev/null 2>&1 ||
            { echo "synth failed"; continue; }
        for p in ${PROMPTS:-512 4096}; do
            awk -v n=$p 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}' > "$W/p$p.ids"
        done
        for r in 1 2; do for p in ${PROMPTS:-512 4096}; do for kv in f32 f16; do
            "$S" run -m "$W/m.gguf" --prompt-tokens "@$W/p$p.ids" -n 128 --temp 0 --ignore-eos --json --backend cuda \
                -c $((p + 200)) --cache-type-k $kv --cache-type-v $kv 2> /dev/null |
                python3 -c "import json,sys; d=json.load(sys.stdin)['stats']; print('rep $r prompt $p $kv: prompt %.1f decode %.2f tok/s' % (d['prompt_tok_s'], d['decode_tok_s']))"
        done; done; done ;;
    *) echo "unknown phase $phase (parity, speed)"; exit 2 ;;
    esac
done
