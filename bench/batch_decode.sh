#!/usr/bin/env bash
# The engine side of `strata serve`'s concurrency without HTTP (bench/batch_decode.c): STREAMS
# sessions decoding together in one strata_eval_batch per step against one session alone, on the
# synthetic model of bench/bench_serve.sh with the expert cache at half the experts, with the time
# of each phase per step. BINS lists builds of batch_decode to compare (e.g. one of main and one
# of a change), run in turn REPS times; a row per build (medians) in bench/results.tsv.
#   bench/batch_decode.sh [BINS="build/batch_decode"] [STREAMS=4] [GEN=24] [REPS=3] [SAME=0]
#                         [CACHE_MIB=half the experts] [SKEW=0] [KEPT=yes] [NOTE=...]
# SAME=1 gives every session the same prompt (the same experts: reads fully shared). SKEW=S takes
# bench_serve.sh's model made with --route-skew S (0.5: routing as concentrated as Qwen3-30B-A3B's).
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:-build/batch_decode} STREAMS=${STREAMS:-4} GEN=${GEN:-24} REPS=${REPS:-3} SAME=${SAME:-0}
KEPT=${KEPT:-yes} NOTE=${NOTE:-} THREADS=${THREADS:-2} SKEW=${SKEW:-0}
name=qwen3-30b-a3b-L6-Q4_K-qwen3tok$([ "$SKEW" = 0 ] || echo "-skew$SKEW")
model=${BENCH_DIR:-/tmp/strata-bench}/$name.gguf
[ -f "$model" ] || { echo "no $model: run bench/bench_serve.sh${SKEW:+ with SKEW=$SKEW} once (it makes it)"; exit 1; }
make -s -j2 build/strata build/batch_decode
expert_mib=$(build/strata inspect --json "$model" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(Math.round(JSON.parse(s).totals.expert_bytes/1048576)))')
CACHE_MIB=${CACHE_MIB:-$((expert_mib / 2))}
prompts=()
[ "$SAME" = 1 ] && prompts=("The expert store streams weights from disk")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$REPS"); do
    i=0
    for b in $BINS; do
        "$b" "$model" "$CACHE_MIB" "$THREADS" "$STREAMS" "$GEN" 1 "${prompts[@]}" | tee -a "$out/$i"
        i=$((i + 1))
    done
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo +dirty)
machine="$(nproc)c-$(awk '/MemTotal/{printf "%dG", $2/1048576+0.5}' /proc/meminfo)-$(grep -q avx512f /proc/cpuinfo && echo avx512f || echo avx2)"
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
i=0
for b in $BINS; do
    f="$out/$i"; i=$((i + 1))
    col() { grep "^$1 " "$f" | awk -v k="$2" '{for (j = 1; j <= NF; j++) if ($j == k) {print $(j + 1); break}}' | median; }
    alone=$(grep '^alone ' "$f" | awk '{print $4}' | median) together=$(grep '^together ' "$f" | awk '{print $4}' | median)
    ratio=$(awk -v a="$together" -v b="$alone" 'BEGIN{printf "%.2f", a/b}')
    phases() { echo "step $(grep "^$1 " "$f" | awk '{print $7}' | median) ms: attn $(col "$1" attn) router $(col "$1" router) experts $(col "$1" experts) (io_wait $(grep "^$1 " "$f" | awk '{gsub(/\)/,""); for (j = 1; j <= NF; j++) if ($j == "(io_wait") print $(j+1)}' | median)) head $(col "$1" head), experts/layer/step $(grep "^$1 " "$f" | awk -F'experts/layer/step' '{split($2, a, ","); print a[1] + 0}' | median)"; }
    what="$STREAMS sessions $([ "$SAME" = 1 ] && echo "of one prompt " || echo "")in one strata_eval_batch a step, ${ratio}x one alone ($alone tok/s); alone: $(phases alone); together: $(phases together)"
    echo "$b: $what"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t\t%s\t\t\t\t\t\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M)" "$commit" "$machine" \
        "$name" "strata batch_decode x$STREAMS${b:+ ($b)}" \
        "-t $THREADS --cache-mib $CACHE_MIB of $expert_mib gen=$GEN median-of-$REPS" "$together" "$KEPT" \
        "$what; load $load${NOTE:+; $NOTE}" >> bench/results.tsv
done
