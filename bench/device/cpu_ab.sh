#!/usr/bin/env bash
# Two CPU builds of strata, A and B, on the host of a lent GPU machine (16 cores with AMX), in one
# call: B's kernel tests (the GEMM's AMX level runs only there), the GEMM's rate of one thread on
# the expert shape for both (AMX, and B at AVX-512 with STRATA_AMX=0), then prompts on the
# 48-layer qwen3-30b-a3b Q4_K file, the two builds interleaved (A B A B ...), with each run's
# prompt tok/s and phases.
#
#   here:  build A's tree and B's (make build/strata build/tests/test_gemm build/tests/test_cpu_mm),
#          copy each's three binaries into .deps/ab/a and .deps/ab/b (strip --strip-debug), and
#          bash bench/device/deps.sh once (.deps/lib: the shared libraries strata links)
#   there: run(command="bash bench/device/cpu_ab.sh", carry=[".deps/ab", ".deps/lib"])
#
# THREADS (16), LAYERS (48), PROMPTS ("512 8192"), REPS (runs per build and prompt; 2), GEMM_TOKENS
# ("16 32 64"), TYPES (the GEMM bench's rows, "Q4_K Q5_K Q6_K Q8_0"), BUDGET_S (500: later steps
# are skipped, and say so, past it). VARIANTS ("A:$A B:$B"): NAME:DIR[:VAR=VALUE | :-FLAGS] per
# variant, a build with an optional environment variable or extra `strata run` flags (`_` for a
# space: B2k:$B:-b_2048), for the GEMM bench and the prompts (the bench also runs B at AVX-512). SKIP_TESTS=1: no kernel tests; WORK: where the model is written (kept
# there for a second call in the same command). PERF=DIR (with perf and its libraries, ld-linux-x86-64.so.2 among them):
# `perf record` of the last variant's first prompt after PERF_DELAY_MS (9000: past the load), its
# report in $OUT/perf.txt.
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib
A=${A:-.deps/ab/a} B=${B:-.deps/ab/b}
THREADS=${THREADS:-16} LAYERS=${LAYERS:-48} PROMPTS=${PROMPTS:-512 8192} REPS=${REPS:-2}
GEMM_TOKENS=${GEMM_TOKENS-16 32 64} TYPES=${TYPES:-Q4_K Q5_K Q6_K Q8_0} BUDGET_S=${BUDGET_S:-500}
out=${OUT:-/tmp/cpu_ab}
mkdir -p "$out"
work=${WORK:-$(mktemp -d)}  # a WORK kept between calls of one session keeps the model
mkdir -p "$work"
t0=$SECONDS
log() { echo "[$((SECONDS - t0))s] $*" | tee -a "$out/log.txt"; }
left() { echo $((BUDGET_S - (SECONDS - t0))); }

log "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), amx: $(grep -c -m1 amx_int8 /proc/cpuinfo)"
for t in test_gemm test_cpu_mm; do
    [ -x "$B/$t" ] && [ -z "${SKIP_TESTS:-}" ] || continue
    timeout 150 "$B/$t" > "$out/b_$t.log" 2>&1
    log "B $t: rc=$? $(head -n 1 "$out/b_$t.log" | cut -c1-60) ... $(tail -n 1 "$out/b_$t.log")"
    grep -E 'FAIL|check failed' "$out/b_$t.log" | head -n 8 | tee -a "$out/log.txt"
done

VARIANTS=${VARIANTS:-A:$A B:$B}
pattern=$(echo "$TYPES" | sed 's/ /|/g')
for n in $GEMM_TOKENS; do
    for v in $VARIANTS "B_avx512:$B:STRATA_AMX=0"; do
        IFS=: read -r name dir var <<< "$v"
        [ "${var:0:1}" = - ] && continue  # flags of strata run only
        env ${var:-} timeout 60 "$dir/test_gemm" --bench "$n" 8 2>&1 | grep -E "^($pattern) " |
            sed "s/^/$name: /" | tee -a "$out/log.txt"
    done
done

model=$work/qwen3-30b-a3b-L$LAYERS-Q4_K.gguf
[ -f "$model" ] || log "synth $LAYERS layers"
[ -f "$model" ] || timeout 180 "$B/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --layers "$LAYERS" --type Q4_K -o "$model" \
    --no-progress > "$out/synth.log" 2>&1 || { log "synth failed: $(tail -n 1 "$out/synth.log")"; exit 1; }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["stats"]; print(eval(sys.argv[2]))' "$@" 2>/dev/null; }
for p in $PROMPTS; do
    awk -v n="$p" 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}' > "$work/p$p.ids"
    for r in $(seq "$REPS"); do
        for v in $VARIANTS; do
            IFS=: read -r which dir var <<< "$v"
            flags=()
            [ "${var:0:1}" = - ] && read -r -a flags <<< "${var//_/ }" && var=""
            [ "$(left)" -lt 20 ] && { log "prompt $p $which rep $r skipped (budget)"; continue; }
            f=$out/run_p${p}_${which}_$r.json
            pf=()
            if [ -n "${PERF:-}" ] && [ -z "${perf_done:-}" ] && [ "$v" = "${VARIANTS##* }" ]; then
                pf=("$PERF/ld-linux-x86-64.so.2" --library-path "$PERF" "$PERF/perf" record -F 999 -D "${PERF_DELAY_MS:-9000}" -o "$out/perf.data" --)
                perf_done=1
            fi
            env ${var:-} timeout "$(left)" "${pf[@]}" "$dir/strata" run -m "$model" --prompt-tokens "@$work/p$p.ids" -n 1 --temp 0 --json \
                -t "$THREADS" -c $((p + 16)) --cache-type-k f16 --cache-type-v f16 "${flags[@]}" > "$f" 2> "${f%.json}.err" ||
                { log "prompt $p $which rep $r: rc=$? $(tail -n 1 "${f%.json}.err")"; continue; }
            log "prompt $p $which rep $r: $(field "$f" "'%.1f tok/s, gemm %s; phases %s' % (d['prompt_tok_s'], d.get('gemm'), ', '.join('%s %.3f' % (k, v) for k, v in d['phase_s'].items() if v > 0.001))")"
        done
    done
done
if [ -f "$out/perf.data" ]; then
    "$PERF/ld-linux-x86-64.so.2" --library-path "$PERF" "$PERF/perf" report -i "$out/perf.data" --stdio --no-children \
        --sort symbol --percent-limit 0.5 2> /dev/null | grep -v '^$' | grep -E '^ +[0-9]' | head -n 40 > "$out/perf.txt"
    log "perf (self, top symbols):"; head -n 25 "$out/perf.txt" | tee -a "$out/log.txt"
    rm -f "$out/perf.data"
fi
log "done"
