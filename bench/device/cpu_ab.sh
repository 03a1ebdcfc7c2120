#!/usr/bin/env bash
# Two CPU builds of strata, A and B, on the host of a lent GPU machine (16 cores with AMX), in one
# call: B's kernel tests (test_gemm, test_cpu_mm, test_cpu_rows where B's directory has them: the
# GEMM's AMX level runs only there), the GEMM's rate of one thread on
# the expert shape for both (AMX, and B at AVX-512 with STRATA_AMX=0), then prompts on the
# 48-layer qwen3-30b-a3b Q4_K file, the two builds interleaved (A B A B ...), with each run's
# prompt tok/s and phases (decode: each phase's read rate in the decode passes too, from
# `decode_phase_bytes`, where the build reports it).
#
#   here:  build A's tree and B's (make build/strata build/membw build/tests/test_gemm
#          build/tests/test_cpu_mm build/tests/test_cpu_rows), copy each's binaries into .deps/ab/a
#          and .deps/ab/b (strip --strip-debug), and
#          bash bench/device/deps.sh once (.deps/lib: the shared libraries strata links)
#   there: run(command="bash bench/device/cpu_ab.sh", carry=[".deps/ab", ".deps/lib"])
#
# THREADS (16), LAYERS (48), PROMPTS ("512 8192"; empty: none), REPS (runs per build and prompt; 2), GEMM_TOKENS
# ("16 32 64"), TYPES (the GEMM bench's rows, "Q4_K Q5_K Q6_K Q8_0"), MTYPE (the model's type, Q4_K), BUDGET_S (500: later steps
# are skipped, and say so, past it). VARIANTS ("A:$A B:$B"): NAME:DIR[:VAR=VALUE | :-FLAGS] per
# variant, a build with an optional environment variable or extra `strata run` flags (`_` for a
# space: B2k:$B:-b_2048), for the GEMM bench and the prompts (the bench also runs B at AVX-512). SKIP_TESTS=1: no kernel tests; MIN_GBS=N: stop at once on a host whose read bandwidth (B's membw) is below N GB/s; DECODE=N: N tokens decoded after a 4-token prompt per variant and rep (with the byte floor where B's directory has membw; DECODE_BW_EACH=1: the bandwidth read again just before and just after each run, its share of both floors); PERF_DECODE=1: perf records that decode instead of a prompt; STRATA_DECODE_PROF=1 STRATA_LOG=info: each decode's steps a layer (forward.c); LLAMA=llama-bench: llama.cpp's prompt 512 (LLAMA_PROMPTS, LLAMA_REPS) (and decode) on the same file in the same call; WORK: where the model is written (kept
# there for a second call in the same command). PERF=DIR (with perf and its libraries, ld-linux-x86-64.so.2 among them):
# `perf record` of the last variant's first prompt after PERF_DELAY_MS (9000: past the load), its
# report in $OUT/perf.txt.
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
A=${A:-.deps/ab/a} B=${B:-.deps/ab/b}
THREADS=${THREADS:-16} LAYERS=${LAYERS:-48} PROMPTS=${PROMPTS-512 8192} REPS=${REPS:-2}
GEMM_TOKENS=${GEMM_TOKENS-16 32 64} TYPES=${TYPES:-Q4_K Q5_K Q6_K Q8_0} BUDGET_S=${BUDGET_S:-500}
MTYPE=${MTYPE:-Q4_K}
out=${OUT:-/tmp/cpu_ab}
mkdir -p "$out"
work=${WORK:-$(mktemp -d)}  # a WORK kept between calls of one session keeps the model
mkdir -p "$work"
t0=$SECONDS
log() { echo "[$((SECONDS - t0))s] $*" | tee -a "$out/log.txt"; }
left() { echo $((BUDGET_S - (SECONDS - t0))); }

log "host: $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), amx: $(grep -c -m1 amx_int8 /proc/cpuinfo)"
# The lent hosts differ and some are loaded (read bandwidth at 16 threads measured 149, 79 and 43
# GB/s on three calls of one day): with MIN_GBS and membw in B's directory, a host below it ends
# the call here instead of spending it on numbers that mean nothing.
# read_bw: B's membw at THREADS threads, GB/s (empty without membw)
read_bw() { [ -x "$B/membw" ] && "$B/membw" "$THREADS" | awk -F'read_gbs=' -v t="$THREADS" '$0 ~ "threads="t" " {split($2, v, " "); print v[1]}'; }
bw=$(read_bw)
[ -n "$bw" ] && log "read bandwidth $bw GB/s at $THREADS threads"
if [ -n "${MIN_GBS:-}" ] && [ -n "$bw" ] && awk -v b="$bw" -v m="$MIN_GBS" 'BEGIN{exit !(b < m)}'; then
    log "read bandwidth below MIN_GBS=$MIN_GBS: a loaded host, nothing measured"; exit 3
fi
for t in test_gemm test_cpu_mm test_cpu_rows; do
    [ -x "$B/$t" ] && [ -z "${SKIP_TESTS:-}" ] || continue
    timeout 150 "$B/$t" > "$out/b_$t.log" 2>&1
    log "B $t: rc=$? $(head -n 1 "$out/b_$t.log" | cut -c1-60) ... $(tail -n 1 "$out/b_$t.log")"
    grep -E 'FAIL|check failed' "$out/b_$t.log" | head -n 8 | tee -a "$out/log.txt"
done

VARIANTS=${VARIANTS:-A:$A B:$B}
# variant V: its name (which), directory (dir), environment assignment (var) and extra flags of
# strata run (flags, from a var of -FLAGS with _ for spaces)
variant() {
    IFS=: read -r which dir var <<< "$1"
    flags=()
    [ "${var:0:1}" = - ] && read -r -a flags <<< "${var//_/ }" && var=""
}
# perf_for V HZ WANT: pf, the perf record prefix for variant V's run when WANT is set, PERF is given,
# V is the last variant and no run was recorded yet; else empty
perf_for() {
    pf=()
    if [ -n "$3" ] && [ -n "${PERF:-}" ] && [ -z "${perf_done:-}" ] && [ "$1" = "${VARIANTS##* }" ]; then
        pf=("$PERF/ld-linux-x86-64.so.2" --library-path "$PERF" "$PERF/perf" record -F "$2" -D "${PERF_DELAY_MS:-9000}" -o "$out/perf.data" --)
        perf_done=1
    fi
}
pattern=$(echo "$TYPES" | sed 's/ /|/g')
for n in $GEMM_TOKENS; do
    for v in $VARIANTS "B_avx512:$B:STRATA_AMX=0"; do
        variant "$v"
        [ ${#flags[@]} -gt 0 ] && continue  # flags of strata run only
        env ${var:-} timeout 60 "$dir/test_gemm" --bench "$n" 8 2>&1 | grep -E "^($pattern) " |
            sed "s/^/$which: /" | tee -a "$out/log.txt"
    done
done

model=$work/qwen3-30b-a3b-L$LAYERS-$MTYPE.gguf
[ -f "$model" ] || log "synth $LAYERS layers of $MTYPE"
[ -f "$model" ] || timeout 180 "$B/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --layers "$LAYERS" --type "$MTYPE" -o "$model" \
    --no-progress > "$out/synth.log" 2>&1 || { log "synth failed: $(tail -n 1 "$out/synth.log")"; exit 1; }
field() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["stats"]; print(eval(sys.argv[2]))' "$@" 2>/dev/null; }
for p in $PROMPTS; do
    awk -v n="$p" 'BEGIN{s=4242; for(i=0;i<n;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}' > "$work/p$p.ids"
    for r in $(seq "$REPS"); do
        for v in $VARIANTS; do
            variant "$v"
            [ "$(left)" -lt 20 ] && { log "prompt $p $which rep $r skipped (budget)"; continue; }
            f=$out/run_p${p}_${which}_$r.json
            perf_for "$v" 999 "$([ -z "${PERF_DECODE:-}" ] && echo 1)"
            env ${var:-} timeout "$(left)" "${pf[@]}" "$dir/strata" run -m "$model" --prompt-tokens "@$work/p$p.ids" -n 1 --temp 0 --json \
                -t "$THREADS" -c $((p + 16)) --cache-type-k f16 --cache-type-v f16 "${flags[@]}" > "$f" 2> "${f%.json}.err" ||
                { log "prompt $p $which rep $r: rc=$? $(tail -n 1 "${f%.json}.err")"; continue; }
            log "prompt $p $which rep $r: $(field "$f" "'%.1f tok/s, gemm %s; phases %s' % (d['prompt_tok_s'], d.get('gemm'), ', '.join('%s %.3f' % (k, v) for k, v in d['phase_s'].items() if v > 0.001))")"
        done
    done
done
# decode after a 4-token prompt, DECODE tokens, the variants interleaved; with the floor where the
# variant's directory has membw (bytes per token as cpu_h200.sh counts them)
if [ -n "${DECODE:-}" ]; then
    echo 9707,1879,525,10 > "$work/p4.ids"
    bytes=$("$B/strata" inspect --json "$model" | python3 -c '
import json,sys; j=json.load(sys.stdin); k=j["metadata"]["qwen3moe.expert_used_count"]
b=sum(t["bytes"] for t in j["tensors"] if "_exps." not in t["name"] and t["name"]!="token_embd.weight")
b+=sum(k*l["triplet_bytes"] for l in j["totals"]["expert_triplets"]); print(b)')
    [ -n "$bw" ] && log "read bandwidth $bw GB/s at $THREADS threads, $bytes bytes a token: floor $(awk -v b="$bytes" -v w="$bw" 'BEGIN{printf "%.2f", w*1e9/b}') tok/s"
    for r in $(seq "$REPS"); do
        for v in $VARIANTS; do
            variant "$v"
            [ "$(left)" -lt 20 ] && { log "decode $which rep $r skipped (budget)"; continue; }
            f=$out/run_dec_${which}_$r.json
            perf_for "$v" 1999 "${PERF_DECODE:-}"
            bwb=""; [ -n "${DECODE_BW_EACH:-}" ] && bwb=$(read_bw)
            env ${var:-} timeout "$(left)" "${pf[@]}" "$dir/strata" run -m "$model" --prompt-tokens "@$work/p4.ids" -n "$DECODE" --temp 0 \
                --ignore-eos --json -t "$THREADS" -c $((DECODE + 32)) --cache-type-k f16 --cache-type-v f16 "${flags[@]}" > "$f" 2> "${f%.json}.err" ||
                { log "decode $which rep $r: rc=$? $(tail -n 1 "${f%.json}.err")"; continue; }
            tg=$(field "$f" "'%.2f' % d['decode_tok_s']")
            pct=""
            [ -n "$bw" ] && pct=$(awk -v t="$tg" -v b="$bytes" -v w="$bw" 'BEGIN{printf " (%.1f%% of the floor)", 100 * t * b / (w * 1e9)}')
            if [ -n "$bwb" ]; then  # the floor read just before and just after this run
                bwa=$(read_bw)
                pct="$pct$(awk -v t="$tg" -v b="$bytes" -v x="$bwb" -v y="$bwa" 'BEGIN{printf " [bandwidth %.1f before, %.1f after: %.1f%% / %.1f%% of those floors]", x, y, 100 * t * b / (x * 1e9), 100 * t * b / (y * 1e9)}')"
            fi
            log "decode $which rep $r: $tg tok/s$pct; $(field "$f" "'phases %s; read %s; passes %.3f s, alone %.3f s, busy %.1f thread-s, utilization %.3f' % (', '.join('%s %.3f' % (k, v) for k, v in d['phase_s'].items() if v > 0.001), ', '.join('%s %.1f GB/s' % (k, b / 1e9 / d['decode_phase_s'][k]) for k, b in d.get('decode_phase_bytes', {}).items() if b > 0 and d['decode_phase_s'].get(k, 0) > 0), d['threads']['decode']['pass_s'], d['threads']['decode']['serial_s'], d['threads']['decode']['busy_s'], d['threads']['decode']['utilization'])")"
            # STRATA_DECODE_PROF=1 STRATA_LOG=info in the environment: the steps of a layer
            grep -h 'decode profile' "${f%.json}.err" | sed "s/^strata: decode profile: /  $which: /" | tee -a "$out/log.txt"
        done
    done
fi
# the bandwidth again after the decode runs: the lent hosts' moves by a third within one call (other
# tenants: 123.5 at the start of one call, 171.6 three minutes later), so a share of the floor is a
# range between the two
if [ -n "${DECODE:-}" ]; then
    bw2=$(read_bw)
    [ -n "$bw2" ] && log "read bandwidth after the decode runs $bw2 GB/s at $THREADS threads (before: $bw); floor $(awk -v b="$bytes" -v w="$bw2" 'BEGIN{printf "%.2f", w*1e9/b}') tok/s"
fi
# llama.cpp on the same file and threads in the same call (LLAMA=path of a llama-bench built for
# this host, bench/device/llama_cpu_prebuild.sh): prompt 512 (LLAMA_PROMPTS: a comma list, such as
# 512,8192) and, with DECODE, tg DECODE, LLAMA_REPS runs each (REPS); F16 KV, flash attention. One
# llama-bench a test, so a test the budget cuts short leaves the others' results; prompts past
# 2,048 tokens without llama-bench's warmup run (a whole second run of the prompt).
llama_test() {  # name, then llama-bench's test flags
    local name=$1 f="$out/llama-$1.json"; shift
    [ "$(left)" -gt 20 ] || { log "llama-bench $name: skipped, past the budget"; return; }
    timeout "$(left)" "$LLAMA" -m "$model" -t "$THREADS" "$@" -fa 1 -ctk f16 -ctv f16 -o json > "$f" 2> "$out/llama.err" ||
        log "llama-bench $name: rc=$? $(tail -n 2 "$out/llama.err" | head -n 1)"
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1])): print("llama.cpp %s: %.2f tok/s (%s)" % ("prompt %d" % r["n_prompt"] if r["n_prompt"] else "decode %d" % r["n_gen"], r["avg_ts"], ", ".join("%.2f" % x for x in r["samples_ts"])))' \
        "$f" 2> /dev/null | while read -r l; do log "$l"; done
}
if [ -n "${LLAMA:-}" ]; then
    for lp in $(echo "${LLAMA_PROMPTS:-512}" | tr ',' ' '); do
        if [ "$lp" -gt 2048 ]; then llama_test "p$lp" -p "$lp" -n 0 -r "${LLAMA_REPS:-$REPS}" --no-warmup
        else llama_test "p$lp" -p "$lp" -n 0 -r "${LLAMA_REPS:-$REPS}"; fi
    done
    [ -n "${DECODE:-}" ] && llama_test "n$DECODE" -p 0 -n "$DECODE" -r "${LLAMA_REPS:-$REPS}"
fi
if [ -f "$out/perf.data" ]; then
    pp=("$PERF/ld-linux-x86-64.so.2" --library-path "$PERF" "$PERF/perf")
    main_tid=$("${pp[@]}" report -i "$out/perf.data" --stdio --no-children --sort pid 2> /dev/null |
        grep -E '^ +[0-9]' | awk '{print $2}' | cut -d: -f1 | sort -n | head -n 1)
    if [ -n "$main_tid" ]; then  # the calling thread's own samples: the work outside parallel runs and its share inside
        # (perf report --tid does not filter the percentages; perf script does)
        "${pp[@]}" script -i "$out/perf.data" --tid "$main_tid" -F ip,sym 2> /dev/null | awk 'NF >= 2 {n[$2]++; t++}
            END {for (s in n) printf "%7.2f%%  %6d  %s\n", 100 * n[s] / t, n[s], s}' | sort -rn | head -n 40 > "$out/perf_main.txt"
        log "perf, calling thread $main_tid (self, % of that thread's samples):"; head -n 30 "$out/perf_main.txt" | tee -a "$out/log.txt"
    fi
    "$PERF/ld-linux-x86-64.so.2" --library-path "$PERF" "$PERF/perf" report -i "$out/perf.data" --stdio --no-children \
        --sort symbol --percent-limit 0.5 2> "$out/perf_report.err" | grep -v '^$' | grep -E '^ +[0-9]' | head -n 40 > "$out/perf.txt"
    log "perf (self, top symbols):"; head -n 25 "$out/perf.txt" | tee -a "$out/log.txt"
    rm -f "$out/perf.data"
fi
log "done"
