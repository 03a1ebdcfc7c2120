#!/usr/bin/env bash
# Decode and prompt speed at depth on the CPU, strata against llama.cpp (the pinned oracle,
# node-llama-cpp) on the same synthetic GGUF, same prompt ids, threads and KV type (llama.cpp with
# flash attention, which its quantized and F16 V caches need); each REP runs both engines, one
# after the other. Prints one line per engine and run.
#   bench/depth_cpu.sh [LAYERS=2] [DEPTH=8192] [GEN=32] [THREADS=2] [KV=f16] [REPS=2]
# (issue 15's depth targets are for the H200 host: bench/device/cpu_h200.sh; this is the same
# measurement on the development machine, in minutes: DEPTH=32768 takes about 8.)
set -euo pipefail
cd "$(dirname "$0")/.."
LAYERS=${LAYERS:-2} DEPTH=${DEPTH:-8192} GEN=${GEN:-32} THREADS=${THREADS:-2} KV=${KV:-f16} REPS=${REPS:-2}
BENCH_DIR=${BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$BENCH_DIR"
make -s -j2 build/strata
. tests/oracle/lib.sh
oracle_available || { echo "bench needs the oracle: cd tests/oracle && npm ci --omit=optional"; exit 1; }
m="$BENCH_DIR/qwen3-30b-a3b-L$LAYERS-Q4_K.gguf"
[ -f "$m" ] || build/strata synth --arch qwen3moe --preset qwen3-30b-a3b --layers "$LAYERS" --type Q4_K -o "$m" --no-progress
awk -v n="$DEPTH" 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}' \
    > "$BENCH_DIR/depth.ids"
ctx=$((DEPTH + GEN + 16))
echo "qwen3-30b-a3b shape, $LAYERS layers, Q4_K, $THREADS threads, $KV KV, a prompt of $DEPTH then $GEN decoded; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$REPS"); do
    build/strata run -m "$m" --prompt-tokens "@$BENCH_DIR/depth.ids" -n "$GEN" --temp 0 --ignore-eos --json -t "$THREADS" \
        -c "$ctx" -b 512 --cache-type-k "$KV" --cache-type-v "$KV" 2> /dev/null |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s).stats;
          console.log(`strata run ${process.argv[1]}: prompt ${j.prompt_tok_s.toFixed(1)} tok/s, decode ${j.decode_tok_s.toFixed(2)} tok/s, phases ${JSON.stringify(j.phase_s)}`)})' "$r"
    oracle_run ../../bench/llama_bench.mjs --model "$m" --tokens "@$BENCH_DIR/depth.ids" -n "$GEN" --threads "$THREADS" \
        --ctx "$ctx" --cache-type-k "$KV" --cache-type-v "$KV" --flash-attn |
        node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
          console.log(`llama.cpp run ${process.argv[1]}: prompt ${j.prompt_tok_s.toFixed(1)} tok/s, decode ${j.decode_tok_s.toFixed(2)} tok/s`)})' "$r"
done
