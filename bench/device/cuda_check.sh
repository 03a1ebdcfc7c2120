#!/usr/bin/env bash
# One call on the GPU machine (see shared/DEVICE.md): the CUDA kernel tests, the parity evals and
# the decode/prompt benchmarks, everything built on the development machine and carried in one
# ignored folder (the device reaches no registry and keeps nothing between calls).
#
#   bash bench/device/cuda_check.sh DIR PHASE...     DIR: the carried folder (binaries, models,
#                                                    libraries); results under $OUT
# Phases:
#   kernels   test_cuda_host, test_cuda, test_cuda under compute-sanitizer memcheck, test_cuda --bench
#   parity    strata eval --backend cuda on every DIR/models/*.gguf with its DIR/models/*.tokens,
#             logits to $OUT/logits/ (compared on the development machine with tests/compare_logits.mjs)
#   bench     strata's decode/prompt benchmarks and llama-bench (CUDA) on synthetic real shapes
# Everything printed also goes to $OUT/log.txt; the last lines are a short summary.
set -u
dir=$(cd "$1" && pwd); shift
out=${OUT:-/tmp/out}; mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
summary=()
t_start=$SECONDS
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem --format=csv,noheader
uptime

phase_kernels() {
    "$dir/bin/test_cuda_host" | tail -n 3
    summary+=("test_cuda_host: $?")
    "$dir/bin/test_cuda" > "$out/test_cuda.log" 2>&1; local rc=$?
    grep -v '^ok' "$out/test_cuda.log" | head -n 60
    summary+=("test_cuda: rc=$rc, $(grep -c '^ok' "$out/test_cuda.log") ok, $(grep -c '^FAIL' "$out/test_cuda.log") FAIL")
    if command -v compute-sanitizer > /dev/null; then
        timeout 240 compute-sanitizer --tool memcheck --print-limit 20 "$dir/bin/test_cuda" --seed 11 > "$out/memcheck.log" 2>&1
        summary+=("memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.log" | tail -n 1)")
        grep -E -m 20 'Invalid|ERROR|out of bounds|misaligned' "$out/memcheck.log"
    fi
    STRATA_CUDA_PDL=0 "$dir/bin/test_cuda" --bench > "$out/bench_kernels_nopdl.log" 2>&1
    grep "ms/token" "$out/bench_kernels_nopdl.log" | sed 's/^/no PDL: /'
    "$dir/bin/test_cuda" --bench > "$out/bench_kernels.log" 2>&1
    summary+=("bench_kernels: rc=$?")
    cat "$out/bench_kernels.log"
}

# One parity model: synth (same seed as the development machine), CUDA logits teacher-forced on
# the parity tokens and on llama.cpp's greedy continuation, 32 greedy tokens, and for some models
# the chunk sizes 1 and 7 (and a 1100-position prompt) compared bit for bit.
parity_model() {
    local P="$dir/parity" w=/tmp/parity r="$out/p" name=$1 arch=$2 preset=$3 targs=$4
    local strata=("$dir/bin/strata")
    [ -n "${STRATA_RUN_TIMEOUT:-}" ] && strata=(timeout "$STRATA_RUN_TIMEOUT" "$dir/bin/strata")
    local m="$w/$name.gguf" toks prompt16 long bad=0
    toks=$(cat "$P/tokens"); prompt16=$(cat "$P/prompt16"); long=$(cat "$P/long")
    # shellcheck disable=SC2086
    "$dir/bin/strata" synth --arch "$arch" --preset "$preset" --seed 7 $targs -o "$m" --no-progress > /dev/null
    sha256sum "$m" | cut -d' ' -f1 > "$r/$name.sha256"
    "${strata[@]}" eval -m "$m" --tokens "$toks" --logits-out "$r/$name.cuda.f32" --backend cuda || bad=1
    "${strata[@]}" run -m "$m" --prompt-tokens "$prompt16" -n 32 --temp 0 --ignore-eos --json --backend cuda \
        > "$r/$name.greedy.json" || bad=1
    # teacher-forced on the prompt and its own greedy tokens (up to where the runs part, the same
    # contexts as llama.cpp's, which the comparison uses)
    local forced
    forced="$prompt16,$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["tokens"])))' "$r/$name.greedy.json")"
    "${strata[@]}" eval -m "$m" --tokens "$forced" --logits-out "$r/$name.forced.cuda.f32" --backend cuda || bad=1
    case " ${CHUNK_MODELS:-f32 q8_0 q4_k mix iq2_xxs dynamic glm_q4_k air_q4_k next_q4_k q35_q4_k gptoss_q8_0 ds2_q4_k ds32_q8_0 dsa52_q4_k} " in
    *" $name "*)
        for b in 1 7; do
            "${strata[@]}" eval -m "$m" --tokens "$toks" --logits-out "$w/$name.b$b.f32" --backend cuda -b $b || bad=1
        done
        if cmp -s "$w/$name.b1.f32" "$r/$name.cuda.f32" && cmp -s "$w/$name.b7.f32" "$r/$name.cuda.f32"; then
            echo "$name: chunks of 1, 7 and 48 give identical logits on the GPU" > "$r/$name.chunks"
        else
            echo "FAIL $name: chunks of 1, 7 and 48 differ on the GPU" > "$r/$name.chunks"
        fi ;;
    esac
    case " ${LONG_MODELS:-next_f32 q8_0 gptoss_f32 ds2_f32 dsa_f32} " in *" $name "*)
        for b in 1 7 512; do
            "${strata[@]}" eval -m "$m" --tokens "$long" --logits-out "$w/$name.long.b$b.f32" --backend cuda -b $b || bad=1
        done
        if cmp -s "$w/$name.long.b1.f32" "$w/$name.long.b512.f32" && cmp -s "$w/$name.long.b7.f32" "$w/$name.long.b512.f32"; then
            echo "$name long: 1100 positions in chunks of 1, 7 and 512 identical on the GPU" >> "$r/$name.chunks"
        else
            echo "FAIL $name long: 1100 positions in chunks of 1, 7 and 512 differ on the GPU" >> "$r/$name.chunks"
        fi
        cp "$w/$name.long.b512.f32" "$r/" ;;
    esac
    [ $bad = 0 ] || echo "FAIL $name: a strata run failed" >> "$r/$name.chunks"
    rm -f "$m"
}

# A few parity models one after another (as the parity phase below, for all of them), each strata
# run bounded, the whole phase bounded by QUICK_S.
phase_quick() {
    mkdir -p /tmp/parity "$out/p"
    local n=0 t0=$SECONDS name arch preset targs tol
    for want in ${QUICK:-q4_k q8_0 next_q4_k q35_q4_k glm_q4_k iq2_xxs dynamic}; do
        [ $((SECONDS - t0)) -lt "${QUICK_S:-35}" ] || break
        while IFS=';' read -r name arch preset targs tol; do
            [ "$name" = "$want" ] || continue
            STRATA_RUN_TIMEOUT=15 parity_model "$name" "$arch" "$preset" "$targs" > "$out/p/$name.log" 2>&1
            n=$((n + 1))
        done < "$dir/parity/models.txt"
    done
    cat "$out"/p/*.chunks > "$out/p/chunks.txt" 2>/dev/null
    cat "$out/p/chunks.txt"
    summary+=("parity (quick): $n models in $((SECONDS - t0)) s")
    tar -C "$out" -cJf "$out/parity.tar.xz" p && rm -rf "$out/p"
}

# Every parity model, one after another: processes sharing the GPU time-slice it, and the 8 at a
# time this phase used to run crawled past every call's limit (this session's two tries packed
# nothing). Each strata run is bounded (STRATA_RUN_TIMEOUT, 30 s), and what is done is packed
# even if the call is cut short (the EXIT trap).
phase_parity() {
    mkdir -p /tmp/parity "$out/p"
    trap 'pack_parity' EXIT
    local n=0 t0=$SECONDS name arch preset targs tol
    while IFS=';' read -r name arch preset targs tol; do
        [ -n "$name" ] || continue
        STRATA_RUN_TIMEOUT=${STRATA_RUN_TIMEOUT:-30} parity_model "$name" "$arch" "$preset" "$targs" > "$out/p/$name.log" 2>&1
        n=$((n + 1))
    done < "$dir/parity/models.txt"
    trap - EXIT
    pack_parity
    summary+=("parity: $n models on the GPU in $((SECONDS - t0)) s; $(grep -c FAIL "$out/parity_chunks.txt") failures in chunk checks/runs")
}

# The parity results into $OUT/parity.tar.xz (the files of $OUT come back only a few at a time).
pack_parity() {
    [ -d "$out/p" ] || return 0
    cat "$out"/p/*.chunks > "$out/p/chunks.txt" 2>/dev/null
    cp "$out/p/chunks.txt" "$out/parity_chunks.txt" 2>/dev/null
    cat "$out/p/chunks.txt" 2>/dev/null
    grep -h -m 3 -i 'error' "$out"/p/*.log 2>/dev/null | head -n 20
    tar -C "$out" -cJf "$out/parity.tar.xz" p && rm -rf "$out/p"
}

# Decode and prompt speed of strata (CUDA) and llama.cpp (CUDA, llama-bench, when carried) on one
# synthetic file of a real shape: BENCH="arch preset layers type ..." quadruples.
bench_model() {
    local arch=$1 preset=$2 layers=$3 type=$4 w=/tmp/bench
    local name="$preset-L$layers-$type" m="$w/$preset-L$layers-$type.gguf"
    mkdir -p "$w"
    local t0=$SECONDS
    "$dir/bin/strata" synth --arch "$arch" --preset "$preset" --layers "$layers" --type "$type" -o "$m" --no-progress \
        || { summary+=("$name: synth failed"); return; }
    echo "synth $name: $((SECONDS - t0)) s, $(du -h "$m" | cut -f1)"
    local p512 tg pp bpt
    p512=$(awk 'BEGIN{s=42; for(i=0;i<512;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%150000}}')
    # one run: the prompt of 512 (prompt speed), then 128 decode steps after it
    "$dir/bin/strata" run -m "$m" --prompt-tokens "$p512" -n 129 --temp 0 --ignore-eos --json --backend cuda -c 1024 \
        > "$out/strata_$name.json" 2> "$out/strata_$name.err"
    tg=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["stats"]["decode_tok_s"],1))' "$out/strata_$name.json" 2>/dev/null)
    pp=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["stats"]["prompt_tok_s"],1))' "$out/strata_$name.json" 2>/dev/null)
    bpt=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stats"]["bytes_per_token"])' "$out/strata_$name.json" 2>/dev/null)
    tail -n 3 "$out/strata_$name.err"
    local line="$name strata: decode ${tg:-?} tok/s, prompt(512) ${pp:-?} tok/s, ${bpt:-?} B/token"
    if [ -x "$dir/bin/llama-bench" ]; then
        "$dir/bin/llama-bench" -m "$m" -p 512 -n 128 -r 2 -ngl 99 -o json > "$out/llama_$name.json" 2> "$out/llama_$name.err"
        local ll
        ll=$(python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))
pp=[x["avg_ts"] for x in r if x["n_prompt"]>0]; tg=[x["avg_ts"] for x in r if x["n_gen"]>0]
print("decode %.1f tok/s, prompt(512) %.1f tok/s" % (tg[0], pp[0]))' "$out/llama_$name.json" 2>/dev/null)
        line="$line | llama.cpp: ${ll:-failed (see llama_$name.err)}"
    fi
    echo "$line"
    summary+=("$line")
    rm -f "$m"
}

phase_bench() {
    local b=(${BENCH:-qwen3moe qwen3-30b-a3b 48 Q8_0 qwen3moe qwen3-30b-a3b 48 Q4_K qwen3next qwen3-next-80b-a3b 16 Q4_K glm4moe glm-4.5-air 12 Q4_K})
    for ((i = 0; i < ${#b[@]}; i += 4)); do bench_model "${b[i]}" "${b[i+1]}" "${b[i+2]}" "${b[i+3]}"; done
}

for p in "$@"; do
    echo "=== phase $p ($((SECONDS - t_start)) s)"
    "phase_$p"
done
echo "=== summary ($((SECONDS - t_start)) s)"
printf '%s\n' "${summary[@]}"
