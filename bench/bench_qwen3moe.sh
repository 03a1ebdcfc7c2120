#!/usr/bin/env bash
# Decode and prompt speed of strata and llama.cpp on the same synthetic GGUF of real per-layer
# shape (default qwen3moe qwen3-30b-a3b; e.g. ARCH=qwen3next PRESET=qwen3-next-80b-a3b), layers
# reduced to fit in RAM, same threads, same prompt, in one run; ratios to llama.cpp and to the
# RAM-bandwidth floor; strata's time share of the attention blocks (full and linear); a row per
# engine in results.tsv.
#   bench/bench_qwen3moe.sh [ARCH=qwen3moe] [PRESET=qwen3-30b-a3b] [LAYERS=6] [TYPE=Q4_K]
#                           [THREADS=2] [PROMPT=128] [GEN=64] [REPS=3] [EXPERTS=N] [EXPS_TYPE=T]
# EXPERTS (default: the preset's) cuts the experts per layer so that a 256-expert shape fits
# (a token reads its k experts whatever the count). EXPS_TYPE gives the routed experts their own
# type (EXPS_TYPE=MXFP4 with TYPE=Q8_0 is llama-quantize's MXFP4_MOE, gpt-oss as released).
# The model goes to $BENCH_DIR (default /tmp/strata-bench). Needs the oracle (tests/oracle).
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-qwen3moe} PRESET=${PRESET:-qwen3-30b-a3b}
export ARCH
LAYERS=${LAYERS:-6} EXPERTS=${EXPERTS:-} TYPE=${TYPE:-Q4_K} THREADS=${THREADS:-2} PROMPT=${PROMPT:-128} GEN=${GEN:-64} REPS=${REPS:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$BENCH_DIR"
make -s -j2 build/strata build/membw
ORACLE_AMX=${ORACLE_AMX:-1}  # llama.cpp as users run it (its AMX build on AMX CPUs)
. tests/oracle/lib.sh
oracle_available || { echo "bench needs the oracle: cd tests/oracle && npm ci --omit=optional"; exit 1; }
EXPS_TYPE=${EXPS_TYPE:-}
model="$BENCH_DIR/${PRESET}-L${LAYERS}${EXPERTS:+-E$EXPERTS}-${TYPE}${EXPS_TYPE:+-exps-$EXPS_TYPE}.gguf"
[ -f "$model" ] || build/strata synth --arch "$ARCH" --preset "$PRESET" --layers "$LAYERS" ${EXPERTS:+--experts "$EXPERTS"} \
    --type "$TYPE" ${EXPS_TYPE:+--type-overrides "exps=$EXPS_TYPE"} -o "$model"
# prompt ids below the vocabulary (DeepSeek-V3's has 129,280 tokens; the ids stay those of earlier
# rows wherever the vocabulary holds 150,000)
n_vocab=$(build/strata inspect --json "$model" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{
 const j=JSON.parse(s); console.log(j.tensors.find(t=>t.name=="token_embd.weight").shape[1])})')
ids=$(awk -v n="$PROMPT" -v v="$n_vocab" 'BEGIN{m=v<150000?v:150000; s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%m}}')
echo "$ids" > "$BENCH_DIR/prompt.ids"
membw=$(build/membw "$THREADS" | awk -F= -v t="$THREADS" '$0 ~ "threads="t" " {print $3 + 0}')
# Bytes one decoded token reads: every dense tensor but the embedding table (one row) and the
# nextn (MTP) blocks after the trunk (neither engine runs them), and k expert triplets per layer.
bytes=$(build/strata inspect --json "$model" | node -e '
let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
 const k=j.metadata[process.env.ARCH+".expert_used_count"];
 const trunk=j.metadata[process.env.ARCH+".block_count"]-(j.metadata[process.env.ARCH+".nextn_predict_layers"]||0);
 let b=0; for(const t of j.tensors){ const m=/^blk\.(\d+)\./.exec(t.name);
  if(/_exps\./.test(t.name)||t.name==="token_embd.weight"||(m&&+m[1]>=trunk)) continue; b+=t.bytes; }
 for(const l of j.totals.expert_triplets) b+=k*l.triplet_bytes;
 console.log(b);})')
best() { sort -g | tail -n 1; }
s_dec=(); s_pp=(); l_dec=(); l_pp=()
for r in $(seq "$REPS"); do
  # the context llama_bench.mjs gives llama.cpp (strata's default, 4,096, would refuse longer prompts)
  out=$(build/strata run -m "$model" --prompt-tokens "$ids" -n "$GEN" --temp 0 --ignore-eos --json -t "$THREADS" \
        -c $((PROMPT + GEN + 8)))
  s_pp+=("$(echo "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).stats.prompt_tok_s))')")
  s_dec+=("$(echo "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).stats.decode_tok_s))')")
  # Shares of strata's forward time in full attention and in linear attention (delta-net).
  attn_share=$(echo "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const p=JSON.parse(s).stats.phase_s;
    let t=0; for (const k in p) t+=p[k]; console.log((p.attention/t).toFixed(3) + " full, " + (p.linear_attention/t).toFixed(3) + " linear")})')
  out=$(oracle_run ../../bench/llama_bench.mjs --model "$model" --tokens "@$BENCH_DIR/prompt.ids" -n "$GEN" --threads "$THREADS")
  l_pp+=("$(echo "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).prompt_tok_s))')")
  l_dec+=("$(echo "$out" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).decode_tok_s))')")
done
sd=$(printf '%s\n' "${s_dec[@]}" | best); sp=$(printf '%s\n' "${s_pp[@]}" | best)
ld=$(printf '%s\n' "${l_dec[@]}" | best); lp=$(printf '%s\n' "${l_pp[@]}" | best)
floor=$(awk -v b="$bytes" -v bw="$membw" 'BEGIN{printf "%.2f", bw*1e9/b}')
commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo "+dirty")
machine="$(nproc)c-$(awk '/MemTotal/{printf "%.0fG", $2/1048576}' /proc/meminfo)-$(grep -m1 -o 'avx512f' /proc/cpuinfo || echo avx2)"
name=$(basename "$model" .gguf)
awk -v sd="$sd" -v sp="$sp" -v ld="$ld" -v lp="$lp" -v b="$bytes" -v bw="$membw" -v f="$floor" 'BEGIN{
  printf "model bytes/token %.1f MB, RAM read bandwidth %.1f GB/s -> floor %.2f tok/s\n", b/1e6, bw, f
  printf "%-10s %12s %12s %10s %10s\n", "engine", "prompt tok/s", "decode tok/s", "GB/s", "of floor"
  printf "%-10s %12.1f %12.2f %10.2f %9.0f%%\n", "strata", sp, sd, sd*b/1e9, 100*sd/f
  printf "%-10s %12.1f %12.2f %10.2f %9.0f%%\n", "llama.cpp", lp, ld, ld*b/1e9, 100*ld/f
  printf "ratio strata/llama.cpp: decode %.2fx, prompt %.2fx\n", sd/ld, sp/lp }'
echo "strata forward time in attention: $attn_share"
d=$(date -u +%Y-%m-%dT%H:%M)
flags="-t $THREADS prompt=$PROMPT gen=$GEN best-of-$REPS"
printf '%s\t%s\t%s\t%s\tstrata\t%s\t%.1f\t%.2f\t1.0\t%s\t%s\t%.2f\t%.2f\t%s\t%s\n' "$d" "$commit" "$machine" "$name" "$flags" "$sp" "$sd" "$bytes" "$floor" \
  "$(awk -v a="$sd" -v f="$floor" 'BEGIN{print a/f}')" "$(awk -v a="$sd" -v b="$ld" 'BEGIN{print a/b}')" "${KEPT:-yes}" "${NOTE:-all resident}; attention share $attn_share" >> bench/results.tsv
printf '%s\t%s\t%s\t%s\tllama.cpp\t%s\t%.1f\t%.2f\t1.0\t%s\t%s\t%.2f\t1\t%s\t%s\n' "$d" "$commit" "$machine" "$name" "$flags" "$lp" "$ld" "$bytes" "$floor" \
  "$(awk -v a="$ld" -v f="$floor" 'BEGIN{print a/f}')" "${KEPT:-yes}" "node-llama-cpp 3.22.1 CPU, F32 KV, mmap" >> bench/results.tsv
