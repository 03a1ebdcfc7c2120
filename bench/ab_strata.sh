#!/usr/bin/env bash
# Two strata binaries on the same model, runs interleaved (A B B A A B ...) so both see the same load
# and the same places in the sequence (on the development VM, 2026-12-07, runs of one binary
# alternated slow and fast, the slow ones with 2-5 s more system time: A B A B gave B +10%; the
# cause is the guest's free page reporting, off while benchmarking with
# `echo 11 > /sys/module/page_reporting/parameters/page_reporting_order`, 9 to restore):
# decode and prompt tok/s of each, median of REPS, and the ratio B/A; a row per binary in
# results.tsv. For "speed unchanged" checks across a refactor. Each run's CPU time (user + sys,
# whole process: load, prompt, decode) is measured too: on a machine other jobs saturate, the wall
# clock mostly measures waiting for a core, the CPU time still the work.
#   bench/ab_strata.sh OLD_BIN NEW_BIN [ARCH=qwen3moe] [PRESET=qwen3-30b-a3b] [LAYERS=6] [TYPE=Q4_K]
#                      [THREADS=2] [PROMPT=128] [GEN=64] [REPS=5] [EXTRA="--cache-mib 600"]
# The model is the one bench_qwen3moe.sh uses ($BENCH_DIR, default /tmp/strata-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?old binary} B=${2:?new binary}
ARCH=${ARCH:-qwen3moe} PRESET=${PRESET:-qwen3-30b-a3b} LAYERS=${LAYERS:-6} TYPE=${TYPE:-Q4_K}
THREADS=${THREADS:-2} PROMPT=${PROMPT:-128} GEN=${GEN:-64} REPS=${REPS:-5} EXTRA=${EXTRA:-}
BENCH_DIR=${BENCH_DIR:-/tmp/strata-bench}
mkdir -p "$BENCH_DIR"
model="$BENCH_DIR/${PRESET}-L${LAYERS}-${TYPE}.gguf"
[ -f "$model" ] || "$B" synth --arch "$ARCH" --preset "$PRESET" --layers "$LAYERS" --type "$TYPE" -o "$model"
ids=$(awk -v n="$PROMPT" 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}')
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["stats"][sys.argv[1]])' "$1"; }
median() { sort -g | awk '{v[NR]=$1} END{print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
a_dec=(); a_pp=(); b_dec=(); b_pp=(); a_cpu=(); b_cpu=()
tf=$(mktemp)
for r in $(seq "$REPS"); do
  order="A B"; [ $((r % 2)) = 0 ] && order="B A"
  for which in $order; do
    bin=$A; [ $which = B ] && bin=$B
    # shellcheck disable=SC2086
    out=$(/usr/bin/time -o "$tf" -f "%U %S" "$bin" run -m "$model" --prompt-tokens "$ids" -n "$GEN" --temp 0 \
          --ignore-eos --json -t "$THREADS" $EXTRA)
    d=$(echo "$out" | field decode_tok_s); p=$(echo "$out" | field prompt_tok_s)
    c=$(awk '{print $1 + $2}' "$tf")
    if [ $which = A ]; then a_dec+=("$d"); a_pp+=("$p"); a_cpu+=("$c"); else b_dec+=("$d"); b_pp+=("$p"); b_cpu+=("$c"); fi
    echo "rep $r $which: prompt $p tok/s, decode $d tok/s, cpu $c s"
  done
done
ad=$(printf '%s\n' "${a_dec[@]}" | median); ap=$(printf '%s\n' "${a_pp[@]}" | median)
bd=$(printf '%s\n' "${b_dec[@]}" | median); bp=$(printf '%s\n' "${b_pp[@]}" | median)
ac=$(printf '%s\n' "${a_cpu[@]}" | median); bc=$(printf '%s\n' "${b_cpu[@]}" | median)
rm -f "$tf"
load1=$(cut -d' ' -f1-3 /proc/loadavg)
awk -v ad="$ad" -v ap="$ap" -v bd="$bd" -v bp="$bp" -v ac="$ac" -v bc="$bc" 'BEGIN{
  printf "median of the runs: A prompt %.1f decode %.2f tok/s cpu %.2f s, B prompt %.1f decode %.2f tok/s cpu %.2f s\n", ap, ad, ac, bp, bd, bc
  printf "ratio B/A: decode %.3f, prompt %.3f, cpu time %.3f\n", bd/ad, bp/ap, bc/ac }'
echo "load before $load0, after $load1"
d=$(date -u +%Y-%m-%dT%H:%M)
commit=$(git rev-parse --short HEAD)$(git diff --quiet || echo "+dirty")
machine="$(nproc)c-$(awk '/MemTotal/{printf "%.0fG", $2/1048576}' /proc/meminfo)-$(grep -m1 -o 'avx512f' /proc/cpuinfo || echo avx2)"
name=$(basename "$model" .gguf)
flags="-t $THREADS prompt=$PROMPT gen=$GEN median-of-$REPS interleaved $EXTRA"
for which in A B; do
  bin=$A dd=$ad pp=$ap; [ $which = B ] && bin=$B dd=$bd pp=$bp
  printf '%s\t%s\t%s\t%s\tstrata %s (%s)\t%s\t%.1f\t%.2f\t1.0\t\t\t\t\t%s\t%s\n' "$d" "$commit" "$machine" "$name" "$which" \
    "$(basename "$bin")" "$flags" "$pp" "$dd" "${KEPT:-yes}" \
    "${NOTE:-A/B}; B/A decode $(awk -v a="$bd" -v b="$ad" 'BEGIN{printf "%.3f", a/b}') prompt $(awk -v a="$bp" -v b="$ap" 'BEGIN{printf "%.3f", a/b}') cpu time $(awk -v a="$bc" -v b="$ac" 'BEGIN{printf "%.3f", a/b}') (A $ac s, B $bc s); load $load0 -> $load1" >> bench/results.tsv
done
