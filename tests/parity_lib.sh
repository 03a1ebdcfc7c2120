# Shared steps of the llama.cpp parity tests of the newer architectures (t_parity_glm4moe.sh,
# t_parity_qwen3next.sh). Source it after tests/oracle/lib.sh, with $dir a scratch folder.
#
# parity_check ARCH PRESET NAME TYPE_ARGS TOL
#   synthesises a tiny model, compares strata's teacher-forced logits on $PARITY_TOKENS with
#   llama.cpp's (relative L2 error per position within the tolerance, same argmax everywhere)
#   and 32 greedy tokens after the first 16 prompt tokens. Sets parity_fail=1 on a failure and
#   leaves the model at $dir/NAME.gguf.
#
# Tolerances, from measured noise. F32: 1e-4 (measured 4e-7 glm4moe, 3e-6 qwen3next, 6e-6 over
# 1100 positions). Quantized: activations are rounded to int8 blocks before each product, so
# where the two engines' float inputs differ by 1e-7 an element can round to the other side of a
# step; in these tiny random models one such event moves later logits by up to ~1.3e-2
# (measured: glm4moe tiny-air Q4_K with scalar kernels, positions 0-29 within 2.6e-7, then up to
# 1.0e-2 at positions that attend to token 30). Through a delta-net's recurrent state the event
# persists: llama.cpp itself moves by 1.1e-2 (qwen3next Q4_K) and 7.8e-2 (Q6_K) between batch
# sizes 512 and 1. So quantized types get TOL (2e-2), raised to twice llama.cpp's own
# batch-size disagreement when that is larger; the argmax must still agree at every position
# and the greedy tokens must be identical.
parity_fail=0
PARITY_TOKENS=$(awk 'BEGIN{s=12345; for(i=0;i<48;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')

parity_n_vocab() {
    "$STRATA_BIN" inspect --json "$1" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.tensors.find(t=>t.name=="token_embd.weight").shape[1])})'
}

# max_rel of a compare_logits.mjs summary line
parity_max_rel() { sed -n 's/.*max_rel=\([^ ]*\).*/\1/p'; }

parity_check() {
    local arch=$1 preset=$2 name=$3 targs=$4 tol=$5 m="$dir/$3.gguf"
    local prompt16; prompt16=$(echo "$PARITY_TOKENS" | cut -d, -f1-16)
    # shellcheck disable=SC2086
    "$STRATA_BIN" synth --arch "$arch" --preset "$preset" --seed 7 $targs -o "$m" --no-progress ||
        { echo "FAIL $name: synth"; parity_fail=1; return; }
    local nv; nv=$(parity_n_vocab "$m")
    "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_TOKENS" --logits-out "$dir/$name.strata.f32" -t 2 ||
        { echo "FAIL $name: strata eval"; parity_fail=1; return; }
    oracle_run logits.mjs --model "$m" --tokens "$PARITY_TOKENS" --out "$dir/$name.llama.f32" --threads 2 >/dev/null ||
        { echo "FAIL $name: oracle logits"; parity_fail=1; return; }
    if [ "$tol" != "1e-4" ]; then  # quantized: see the tolerance note above
        oracle_run logits.mjs --model "$m" --tokens "$PARITY_TOKENS" --out "$dir/$name.llama1.f32" --threads 2 \
            --batch 1 >/dev/null || { echo "FAIL $name: oracle logits, batch 1"; parity_fail=1; return; }
        local self; self=$(node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/$name.llama1.f32" "$dir/$name.llama.f32" \
                           "$nv" 1 | tail -n 1 | parity_max_rel)
        tol=$(awk -v t="$tol" -v s="$self" 'BEGIN{printf "%.3g", (2 * s > t ? 2 * s : t)}')
        echo "$name llama.cpp batch 1 vs 512: max_rel=$self -> tol $tol"
    fi
    local res rc
    res=$(node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/$name.strata.f32" "$dir/$name.llama.f32" "$nv" "$tol")
    rc=$?
    echo "$name logits: $(echo "$res" | tail -n 1)"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $name: logits"; parity_fail=1; }
    local ours theirs
    ours=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$prompt16" -n 32 --temp 0 --ignore-eos --json -t 2 |
           node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).tokens)))')
    theirs=$(oracle_run generate.mjs --model "$m" --tokens "$prompt16" -n 32 --threads 2)
    if [ "$ours" == "$theirs" ]; then echo "$name greedy: 32 tokens identical"
    else echo "FAIL $name greedy: strata $ours"; echo "                 llama.cpp $theirs"; parity_fail=1; fi
}

# parity_streamed NAME: the logits of $dir/NAME.gguf with the expert cache cut to MIB MiB equal
# the fully resident ones bit for bit (experts then stream from the file).
parity_streamed() {
    local name=$1 mib=$2 m="$dir/$1.gguf"
    "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_TOKENS" --logits-out "$dir/$name.stream.f32" -t 2 --cache-mib "$mib" ||
        { echo "FAIL $name: strata eval --cache-mib $mib"; parity_fail=1; return; }
    if cmp -s "$dir/$name.strata.f32" "$dir/$name.stream.f32"; then
        echo "$name streamed (--cache-mib $mib): logits identical to full residency"
    else
        echo "FAIL $name: logits with --cache-mib $mib differ from full residency"; parity_fail=1
    fi
}
