#!/usr/bin/env bash
# The CPU targets of issue 15 on the H200 machine's host, in one command (the machine is bare and
# given back after the call): builds strata and llama.cpp (CPU, from the oracle's bundled source),
# runs the kernel tests there (AMX is only there), writes the qwen3-30b-a3b shape in Q4_K, and
# measures both engines on the same file and threads, then prints a table and writes
# $OUT/results.tsv (bench/results.tsv's columns), $OUT/table.md, $OUT/log.txt and the raw outputs in $OUT/raw.tar.gz.
#
#   here:  bash bench/device/prepare_deps.sh      (.deps: liburing, cJSON, llama.cpp source)
#   there: bash bench/device/cpu_h200.sh          (run tool, carry [".deps"])
#
# What it measures (THREADS threads, both engines F16 KV with flash attention for llama.cpp):
#   prompt 512 and PROMPT_LONG tokens, LAYERS layers                       target: >= 3x llama.cpp
#   decode after a 4-token prompt, LAYERS layers, against the byte floor   target: >= 90%
#   decode at DEPTHS tokens of context, DEPTH_LAYERS layers                target: >= 1.5x llama.cpp
# The depth runs use fewer layers than the others so that both engines can fill 32k tokens of
# context within the call (llama.cpp's 32k prompt at 48 layers alone would take most of it); per
# layer the work is the same, so the ratio carries over (the table says which layers each row had).
# Every step has a time limit and the whole stays within BUDGET_S seconds; a step that does not
# fit is skipped and says so.
#
# LLAMA_DIR=.deps/llama-cpu (bench/device/llama_cpu_prebuild.sh, here) carries llama-bench built
# for that CPU, so both engines fit one call: carry [".deps/include", ".deps/lib", ".deps/llama-cpu"].
# Else PART=strata or PART=llama measures one engine per call (a fresh machine each: building llama.cpp
# takes about 4 minutes there, and llama-bench's 8,192-token prompt with its warm-up about as long,
# so both engines do not fit one 10-minute call); the rows of the two calls are paired by hand.
# Nothing is measured while llama.cpp builds: the first run of this script (bench/device/logs/
# cpu_h200-e5b8dc0-overlapped.txt) measured strata beside the build and read 34 GB/s instead of ~91.
#
# Local check on a small model: THREADS=2 LAYERS=2 DEPTH_LAYERS=2 PROMPT_LONG=1024
#   DEPTHS="512 1024" LLAMA_DIR=/path/with/b/bin/llama-bench bash bench/device/cpu_h200.sh
# (NO_LLAMA=1: strata only; SKIP_TESTS=1: no kernel tests.)
set -u
cd "$(dirname "$0")/../.."
start=$(date +%s)
THREADS=${THREADS:-16} LAYERS=${LAYERS:-48} DEPTH_LAYERS=${DEPTH_LAYERS:-8}
PROMPT_LONG=${PROMPT_LONG:-8192} DEPTHS=${DEPTHS:-8192 32768} GEN=${GEN:-64} BUDGET_S=${BUDGET_S:-530}
SCALE_THREADS=${SCALE_THREADS:-2 8 $THREADS}  # the prompt's thread scaling (strata only)
PRESET=qwen3-30b-a3b TYPE=Q4_K
OUT=${OUT:-/tmp/cpu_h200_out}
mkdir -p "$OUT"
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
LLAMA_DIR=${LLAMA_DIR:-$work/llama}
: > "$OUT/log.txt"

elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((BUDGET_S - $(elapsed))); }
log() { echo "[$(elapsed)s] $*" | tee -a "$OUT/log.txt"; }
# limited CMD...: runs CMD with at most SECONDS (and never past the budget); 124 if cut
limited() {
    local want=$1 l; shift
    l=$(left)
    [ "$l" -lt 5 ] && { log "skipped (budget spent): $*"; return 124; }
    [ "$want" -gt "$l" ] && want=$l
    timeout "$want" "$@"
}
json() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@" 2>/dev/null; }

# the lent machine may be an H100's or an H200's: their hosts differ (bandwidth, CPU)
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
log "host: $(nproc) cpus, GPU ${gpu_name:-none}, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), amx: $(grep -c -m1 amx_int8 /proc/cpuinfo), transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
log "cpu flags of note: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx512|amx|avx_vnni)' | sort | xargs)"

# ---- builds: llama.cpp in the background, strata now ----------------------------------------------
PART=${PART:-all}
[ "$PART" = strata ] && NO_LLAMA=1
if [ -z "${NO_LLAMA:-}" ] && [ ! -x "$LLAMA_DIR/b/bin/llama-bench" ]; then
    (
        mkdir -p "$LLAMA_DIR/src" && tar -xJf .deps/llama-src.tar.xz -C "$LLAMA_DIR/src" &&
            cmake -S "$LLAMA_DIR/src" -B "$LLAMA_DIR/b" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
                -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF &&
            cmake --build "$LLAMA_DIR/b" -j "$((THREADS > 2 ? THREADS - 2 : 1))" --target llama-bench
    ) > "$OUT/llama_build.log" 2>&1 &
    llama_build=$!
fi
export LD_LIBRARY_PATH=$PWD/.deps/lib:$LLAMA_DIR/lib:${LD_LIBRARY_PATH:-}  # $LLAMA_DIR/lib: a prebuilt one's
log "building strata"
limited 240 make -j"$THREADS" EXTRA_CFLAGS="-I$PWD/.deps/include" EXTRA_LDLIBS="-L$PWD/.deps/lib" \
    build/strata build/membw build/tests/test_gemm build/tests/test_fattn > "$OUT/strata_build.log" 2>&1 ||
    { log "strata build failed:"; tail -n 20 "$OUT/strata_build.log" | tee -a "$OUT/log.txt"; exit 1; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo "+dirty")
if [ -n "${llama_build:-}" ]; then  # every measurement below runs on a quiet machine
    log "waiting for the llama.cpp build"
    while kill -0 "$llama_build" 2>/dev/null && [ "$(left)" -gt 30 ]; do sleep 2; done
    log "llama.cpp build: $(tail -n 1 "$OUT/llama_build.log")"
fi

# ---- kernel tests: the GEMM's AMX level runs only here ----------------------------------------------
if [ -n "${SKIP_TESTS:-}" ]; then log "kernel tests skipped (SKIP_TESTS)"; else
log "kernel tests"
limited 60 build/tests/test_gemm > "$OUT/test_gemm.log" 2>&1; log "test_gemm: rc=$? ($(tail -n 1 "$OUT/test_gemm.log")), $(head -n 1 "$OUT/test_gemm.log")"
limited 90 build/tests/test_fattn > "$OUT/test_fattn.log" 2>&1; log "test_fattn: rc=$? ($(tail -n 1 "$OUT/test_fattn.log"))"
limited 40 build/tests/test_gemm --bench 64 > "$OUT/gemm_bench.log" 2>&1
STRATA_AMX=0 limited 40 build/tests/test_gemm --bench 64 >> "$OUT/gemm_bench.log" 2>&1
sed 's/^/    /' "$OUT/gemm_bench.log" | tee -a "$OUT/log.txt"
fi

# ---- models, bandwidth, bytes per token ----------------------------------------------------------------
m48=$work/$PRESET-L$LAYERS-$TYPE.gguf md=$work/$PRESET-L$DEPTH_LAYERS-$TYPE.gguf
log "synth $LAYERS and $DEPTH_LAYERS layers"
for lm in "$LAYERS:$m48" "$DEPTH_LAYERS:$md"; do
    [ -f "${lm#*:}" ] || limited 120 build/strata synth --arch qwen3moe --preset $PRESET --layers "${lm%%:*}" --type $TYPE \
        -o "${lm#*:}" --no-progress >> "$OUT/synth.log" 2>&1 || { log "synth failed: $(tail -n 1 "$OUT/synth.log")"; exit 1; }
done
membw=$(build/membw "$THREADS" | awk -F'read_gbs=' -v t="$THREADS" '$0 ~ "threads="t" " {split($2, v, " "); print v[1]}')
# bytes one decoded token reads: every dense tensor but the embedding table, and k expert triplets
# per layer (as bench_qwen3moe.sh)
bytes=$(build/strata inspect --json "$m48" | python3 -c '
import json,sys; j=json.load(sys.stdin); k=j["metadata"]["qwen3moe.expert_used_count"]
b=sum(t["bytes"] for t in j["tensors"] if "_exps." not in t["name"] and t["name"]!="token_embd.weight")
b+=sum(k*l["triplet_bytes"] for l in j["totals"]["expert_triplets"]); print(b)')
floor=$(awk -v b="$bytes" -v bw="$membw" 'BEGIN{printf "%.2f", bw*1e9/b}')
log "read bandwidth $membw GB/s at $THREADS threads, $bytes bytes per token -> floor $floor tok/s"
ids() { awk -v n="$1" 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}'; }
for n in 4 512 "$PROMPT_LONG" $DEPTHS; do ids "$n" > "$work/p$n.ids"; done

# ---- strata ------------------------------------------------------------------------------------------------
kvflags=""
build/strata run --help 2>&1 | grep -q -- '--cache-type-k' && kvflags="--cache-type-k f16 --cache-type-v f16"
kvnote=${kvflags:+F16 KV}; kvnote=${kvnote:-F32 KV (this strata has no --cache-type-k)}
# srun NAME MODEL N_PROMPT N_GEN: strata run, JSON in $OUT/strata_NAME.json
srun() {
    local name=$1 m=$2 np=$3 ng=$4
    log "strata $name: $np prompt tokens, $ng generated"
    # shellcheck disable=SC2086
    limited "${LIMIT:-200}" build/strata run -m "$m" --prompt-tokens "@$work/p$np.ids" -n "$ng" --temp 0 --ignore-eos \
        --json -t "$THREADS" -c $((np + ng + 16)) $kvflags > "$OUT/strata_$name.json" 2> "$OUT/strata_$name.err" ||
        log "strata $name: rc=$? $(tail -n 1 "$OUT/strata_$name.err")"
}
if [ "$PART" != llama ]; then
    LIMIT=90 srun decode4 "$m48" 4 "$GEN"
    LIMIT=90 srun p512 "$m48" 512 16
    LIMIT=200 srun plong "$m48" "$PROMPT_LONG" 1
    for d in $DEPTHS; do LIMIT=150 srun "d$d" "$md" "$d" 32; done
    # thread scaling of one 512-token prompt on the DEPTH_LAYERS model: per thread, the 16-thread
    # prompt did about a fifth of what 2 threads of the development machine do
    for t in $SCALE_THREADS; do
        log "strata scale t$t: 512 prompt tokens, $DEPTH_LAYERS layers"
        limited 60 build/strata run -m "$md" --prompt-tokens "@$work/p512.ids" -n 1 --temp 0 --json -t "$t" -c 544 \
            $kvflags > "$OUT/strata_scale_t$t.json" 2> "$OUT/strata_scale_t$t.err" || log "scale t$t: rc=$?"
    done
fi

# ---- llama.cpp ---------------------------------------------------------------------------------------------
lb=$LLAMA_DIR/b/bin/llama-bench
if [ -z "${NO_LLAMA:-}" ] && [ -x "$lb" ]; then
    log "llama.cpp: prompt 512, decode $GEN ($LAYERS layers)"
    limited 120 "$lb" -m "$m48" -t "$THREADS" -p 512 -n "$GEN" -r 1 -fa 1 -o json > "$OUT/llama_main.json" 2> "$OUT/llama_main.err" ||
        log "llama-bench main: rc=$? $(tail -n 2 "$OUT/llama_main.err" | head -n 1)"
    log "llama.cpp: prompt $PROMPT_LONG ($LAYERS layers, no warm-up: one pass of it is minutes)"
    limited 240 "$lb" -m "$m48" -t "$THREADS" -p "$PROMPT_LONG" -n 0 -r 1 -fa 1 --no-warmup -o json > "$OUT/llama_long.json" 2> "$OUT/llama_long.err" ||
        log "llama-bench long: rc=$? $(tail -n 2 "$OUT/llama_long.err" | head -n 1)"
    log "llama.cpp: decode 32 at depths $DEPTHS ($DEPTH_LAYERS layers)"
    limited 300 "$lb" -m "$md" -t "$THREADS" -p 0 -n 32 -d "$(echo $DEPTHS | tr ' ' ,)" -r 1 -fa 1 -o json > "$OUT/llama_depth.json" 2> "$OUT/llama_depth.err" ||
        log "llama-bench depth: rc=$? $(tail -n 2 "$OUT/llama_depth.err" | head -n 1)"
else
    log "no llama-bench (build: $(tail -n 1 "$OUT/llama_build.log" 2>/dev/null))"
fi

# ---- table ----------------------------------------------------------------------------------------------------
sv() { json "$OUT/strata_$1.json" "round(d['stats']['$2'], 1)"; }
# lv FILE N_PROMPT N_GEN DEPTH: llama-bench's avg_ts of that test
lv() { json "$OUT/$1" "round([t['avg_ts'] for t in d if t['n_prompt']==$2 and t['n_gen']==$3 and t.get('n_depth',0)==$4][0], 1)"; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0>0 && b+0>0) printf "%.0f%%", 100*a/b; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0>0 && b+0>0) printf "%.2fx", a/b; else print "-" }'; }
gpu=$(echo "$gpu_name" | grep -o -i -m1 'h[0-9]00' | tr 'H' 'h')
date_s=$(date -u +%Y-%m-%dT%H:%M) machine="${gpu:-gpu}-host-${THREADS}t"
{
    echo "| $THREADS threads, $PRESET $TYPE | layers | strata | llama.cpp | ratio | target |"
    echo "|---|---|---|---|---|---|"
    sp=$(sv p512 prompt_tok_s) lp=$(lv llama_main.json 512 0 0)
    echo "| prompt 512 tok/s | $LAYERS | ${sp:--} | ${lp:--} | $(ratio "$sp" "$lp") | >= 3x |"
    sl=$(sv plong prompt_tok_s) ll=$(lv llama_long.json "$PROMPT_LONG" 0 0)
    echo "| prompt $PROMPT_LONG tok/s | $LAYERS | ${sl:--} | ${ll:--} | $(ratio "$sl" "$ll") | >= 3x |"
    sd=$(sv decode4 decode_tok_s) ld=$(lv llama_main.json 0 "$GEN" 0)
    echo "| decode, 4-token prompt tok/s | $LAYERS | ${sd:--} ($(pct "$sd" "$floor") of the floor, $floor) | ${ld:--} ($(pct "$ld" "$floor")) | $(ratio "$sd" "$ld") | >= 90% of the floor |"
    s5=$(sv p512 decode_tok_s)
    echo "| decode after 512 tok/s | $LAYERS | ${s5:--} | - | - | - |"
    for d in $DEPTHS; do
        a=$(sv "d$d" decode_tok_s) b=$(lv llama_depth.json 0 32 "$d")
        echo "| decode at $d context tok/s | $DEPTH_LAYERS | ${a:--} | ${b:--} | $(ratio "$a" "$b") | >= 1.5x |"
    done
    echo
    # where strata's threads' time went (the threads object of --json, when the build has it)
    for r in p512:prompt plong:prompt decode4:decode; do
        th=$(json "$OUT/strata_${r%%:*}.json" "'working %.0f%%, one thread alone %.3f s of %.3f s, idle inside %d runs %.3f thread-s' % (100*d['stats']['threads']['${r#*:}']['utilization'], d['stats']['threads']['${r#*:}']['serial_s'], d['stats']['threads']['${r#*:}']['pass_s'], d['stats']['threads']['${r#*:}']['runs'], d['stats']['threads']['n']*d['stats']['threads']['${r#*:}']['runs_s']-d['stats']['threads']['${r#*:}']['busy_s'])")
        [ -n "$th" ] && echo "strata threads, ${r%%:*} (${r#*:} passes): $th"
    done
    sc=""
    for t in $SCALE_THREADS; do
        v=$(json "$OUT/strata_scale_t$t.json" "'%.1f tok/s (%.0f%% working)' % (d['stats']['prompt_tok_s'], 100*d['stats']['threads']['prompt']['utilization'])")
        sc="$sc${sc:+, }$t threads ${v:--}"
    done
    echo "strata prompt 512 on $DEPTH_LAYERS layers by threads: $sc"
    # the weights' pages: 4 KiB pages made the first prompt several times slower on a VM (docs/cpu.md)
    mem=$(json "$OUT/strata_p512.json" "'%.0f of %.0f MiB of anonymous memory on huge pages (THP %s)' % (d['stats']['memory']['anon_huge_mib'], d['stats']['memory']['anon_mib'], d['stats']['memory']['thp'])")
    [ -n "$mem" ] && echo "strata memory after the 512-token run: $mem"
    lvl=$(json "$OUT/strata_p512.json" "'kernels %s, GEMM %s' % (d['stats']['isa'], d['stats'].get('gemm', '?'))")
    [ -n "$lvl" ] && echo "strata CPU levels: $lvl"
    echo
    echo "strata $commit, $kvnote; llama.cpp from node-llama-cpp's bundled source, -fa 1, F16 KV; read bandwidth $membw GB/s; $(elapsed) s"
} > "$OUT/table.md"
cat "$OUT/table.md" | tee -a "$OUT/log.txt"

# rows for bench/results.tsv (the lead appends them)
row() {  # engine model flags prompt decode bytes floor note
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t1.0\t%s\t%s\t%s\t%s\tyes\t%s\n' "$date_s" "$commit" "$machine" "$2" "$1" "$3" "$4" "$5" \
        "$6" "$7" "$(awk -v a="$5" -v f="$7" 'BEGIN{ if (a+0>0 && f+0>0) printf "%.2f", a/f }')" "$8" "$9"
}
{
    row strata "$PRESET-L$LAYERS-$TYPE" "-t $THREADS prompt=512,$PROMPT_LONG gen=$GEN ($kvnote)" "$sp" "$sd" "$bytes" "$floor" \
        "$(ratio "$sp" "$lp" | tr -d x)" "issue 15 H200 host; prompt $PROMPT_LONG: $sl tok/s ($(ratio "$sl" "$ll") llama.cpp); decode after 512: $s5"
    row llama.cpp "$PRESET-L$LAYERS-$TYPE" "-t $THREADS -p 512,$PROMPT_LONG -n $GEN -fa 1 F16 KV" "$lp" "$ld" "$bytes" "$floor" 1 \
        "llama-bench from node-llama-cpp's bundled source; prompt $PROMPT_LONG: $ll tok/s"
    for d in $DEPTHS; do
        a=$(sv "d$d" decode_tok_s) b=$(lv llama_depth.json 0 32 "$d")
        row strata "$PRESET-L$DEPTH_LAYERS-$TYPE" "-t $THREADS depth=$d gen=32 ($kvnote)" "$(sv "d$d" prompt_tok_s)" "$a" "" "" \
            "$(ratio "$a" "$b" | tr -d x)" "issue 15 H200 host; decode at $d context"
        row llama.cpp "$PRESET-L$DEPTH_LAYERS-$TYPE" "-t $THREADS -d $d -n 32 -fa 1 F16 KV" "" "$b" "" "" 1 "llama-bench, decode at depth $d"
    done
} > "$OUT/results.tsv"
log "done: $OUT/table.md, $OUT/results.tsv"
# the run tool brings back at most 8 files: the raw outputs (engines' JSON and stderr, builds,
# kernel tests) go into one archive beside the table, the rows and the log
raw=$(cd "$OUT" && ls | grep -vE '^(table\.md|results\.tsv|log\.txt|raw\.tar\.gz)$')
[ -n "$raw" ] && tar -C "$OUT" -czf "$OUT/raw.tar.gz" $raw && (cd "$OUT" && rm -f $raw)
