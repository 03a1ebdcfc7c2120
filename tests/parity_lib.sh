# Shared steps of the llama.cpp parity tests (t_parity_qwen3moe.sh, t_parity_glm4moe.sh,
# t_parity_qwen3next.sh, t_parity_lowbit.sh). Source it after tests/oracle/lib.sh, with $dir a
# scratch folder.
#
# parity_check ARCH PRESET NAME TYPE_ARGS TOL
#   synthesises a tiny model (seed $PARITY_SEED, default 7), compares strata's teacher-forced logits on $PARITY_TOKENS with
#   llama.cpp's (relative L2 error per position within the tolerance, same argmax everywhere
#   up to near ties) and 32 greedy tokens after the first 16 prompt tokens. Sets parity_fail=1
#   on a failure and leaves the model at $dir/NAME.gguf, strata's logits at $dir/NAME.strata.f32.
#
# Tolerances, from measured noise (docs/correctness.md has the numbers).
# F32 (TOL 1e-4): measured 5e-7 qwen3moe, 4e-7 glm4moe, 3e-6 qwen3next, 6e-6 over 1100 positions.
# Quantized: activations are rounded to int8 blocks before each product, so where two engines'
# float inputs differ in the last bit an element can round to the other side of a step; in these
# tiny random models one such event moves later logits by up to ~2e-2, and through routing or a
# delta-net's recurrent state it persists. llama.cpp is not immune: its own AVX2 build and its
# AVX-512 build differ on the same file by 1.4e-2 (Q8_0), 9.6e-3 (Q4_K), 1.8e-2 (Q6_K), and its
# batch sizes 1 and 512 by up to 7.8e-2 (qwen3next Q6_K); on AMX CPUs it takes yet another path
# for Q8_0/K-quant weights. So quantized types get TOL (2e-2), raised to twice llama.cpp's own
# batch-size disagreement on the same model when that is larger. Such a flip can reorder two
# candidates whose logits are closer than that, so an argmax may differ only at a near tie
# (llama.cpp ranks strata's choice within twice the largest logit difference of that position),
# and greedy runs may part only where llama.cpp itself is torn: teacher-forced on the prompt plus
# llama.cpp's greedy tokens, every position must agree as above, and at the step where the runs
# parted llama.cpp's own logits must rank strata's token first or within a near tie.
parity_fail=0
PARITY_TOKENS=$(awk 'BEGIN{s=12345; for(i=0;i<48;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')

parity_n_vocab() {
    "$STRATA_BIN" inspect --json "$1" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.tensors.find(t=>t.name=="token_embd.weight").shape[1])})'
}

# max_rel of a compare_logits.mjs summary line
parity_max_rel() { sed -n 's/.*max_rel=\([^ ]*\).*/\1/p'; }

# parity_logits M LABEL TOKENS TOL [TIES]: strata's and llama.cpp's logits of model M on TOKENS
# ($dir/LABEL.strata.f32, $dir/LABEL.llama.f32; llama.cpp's are reused when that file exists)
# compared; prints the comparison, returns its status. TIES=1 allows near ties (see above).
parity_logits() {
    local m=$1 label=$2 toks=$3 tol=$4 ties=${5:-0} nv
    nv=$(parity_n_vocab "$m")
    "$STRATA_BIN" eval -m "$m" --tokens "$toks" --logits-out "$dir/$label.strata.f32" -t 2 ||
        { echo "strata eval failed"; return 1; }
    [ -f "$dir/$label.llama.f32" ] ||
        oracle_run logits.mjs --model "$m" --tokens "$toks" --out "$dir/$label.llama.f32" --threads 2 >/dev/null ||
        { echo "oracle logits failed"; return 1; }
    STRATA_TIES=$ties node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/$label.strata.f32" "$dir/$label.llama.f32" "$nv" "$tol"
}

# parity_greedy M NAME TIES: 32 greedy tokens of strata and llama.cpp after 16 prompt tokens.
parity_greedy() {
    local m=$1 name=$2 ties=$3
    local prompt16; prompt16=$(echo "$PARITY_TOKENS" | cut -d, -f1-16)
    local ours theirs
    ours=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$prompt16" -n 32 --temp 0 --ignore-eos --json -t 2 |
           node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).tokens)))')
    theirs=$(oracle_run generate.mjs --model "$m" --tokens "$prompt16" -n 32 --threads 2)
    if [ "$ours" == "$theirs" ]; then echo "$name greedy: 32 tokens identical"; return; fi
    if [ "$ties" != 1 ]; then
        echo "FAIL $name greedy: strata $ours"; echo "                 llama.cpp $theirs"; parity_fail=1; return
    fi
    local k; k=$(node -e 'const a=JSON.parse(process.argv[1]), b=JSON.parse(process.argv[2]);
                          let k=0; while (k < a.length && a[k] === b[k]) k++; console.log(k)' "$ours" "$theirs")
    local forced res rc verdict nv
    forced="$prompt16,$(echo "$theirs" | tr -d '[] ')"
    nv=$(parity_n_vocab "$m")
    res=$(parity_logits "$m" "$name.greedy" "$forced" 1 1); rc=$?
    verdict=$(node -e '
        const fs = require("fs"), rd = f => { const b = fs.readFileSync(f); return new Float32Array(b.buffer, b.byteOffset, b.length / 4); };
        const [sf, lf, nvs, ps, toks] = process.argv.slice(1), S = rd(sf), L = rd(lf), nv = Number(nvs), p = Number(ps), t = Number(toks);
        let best = 0, diff = 0;
        for (let i = 0; i < nv; i++) { if (L[p * nv + i] > L[p * nv + best]) best = i; diff = Math.max(diff, Math.abs(L[p * nv + i] - S[p * nv + i])); }
        const gap = L[p * nv + best] - L[p * nv + t];
        console.log((gap <= 2 * diff ? "ok" : "bad") + ` llama.cpp teacher-forced ranks strata token ${t} ${gap === 0 ? "first" : "below " + best + " by " + gap.toExponential(2)}, max diff ${diff.toExponential(2)}`);
        ' "$dir/$name.greedy.strata.f32" "$dir/$name.greedy.llama.f32" "$nv" $((15 + k)) \
        "$(node -e 'console.log(JSON.parse(process.argv[1])[process.argv[2]])' "$ours" "$k")")
    if [ $rc -eq 0 ] && [ "${verdict%% *}" = ok ]; then
        echo "$name greedy: $k tokens identical, then parted where $verdict"
    else
        echo "FAIL $name greedy after $k tokens: strata $ours"; echo "    llama.cpp $theirs"
        echo "$res" | head -n 10; echo "    $verdict"; parity_fail=1
    fi
}

parity_check() {
    local arch=$1 preset=$2 name=$3 targs=$4 tol=$5 m="$dir/$3.gguf" ties=0
    # shellcheck disable=SC2086
    "$STRATA_BIN" synth --arch "$arch" --preset "$preset" --seed "${PARITY_SEED:-7}" $targs -o "$m" --no-progress ||
        { echo "FAIL $name: synth"; parity_fail=1; return; }
    if [ "$tol" != "1e-4" ]; then  # quantized: see the tolerance note above
        ties=1
        local nv; nv=$(parity_n_vocab "$m")
        oracle_run logits.mjs --model "$m" --tokens "$PARITY_TOKENS" --out "$dir/$name.llama1.f32" --threads 2 \
            --batch 1 >/dev/null &&
            oracle_run logits.mjs --model "$m" --tokens "$PARITY_TOKENS" --out "$dir/$name.llama.f32" --threads 2 \
            >/dev/null || { echo "FAIL $name: oracle logits"; parity_fail=1; return; }
        local self; self=$(node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/$name.llama1.f32" "$dir/$name.llama.f32" \
                           "$nv" 1 | tail -n 1 | parity_max_rel)
        tol=$(awk -v t="$tol" -v s="$self" 'BEGIN{printf "%.3g", (2 * s > t ? 2 * s : t)}')
        echo "$name llama.cpp batch 1 vs 512: max_rel=$self -> tol $tol"
    fi
    local res rc
    res=$(parity_logits "$m" "$name" "$PARITY_TOKENS" "$tol" "$ties"); rc=$?
    echo "$name logits: $(echo "$res" | tail -n 1)"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $name: logits"; parity_fail=1; }
    parity_greedy "$m" "$name" "$ties"
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

# parity_chunks NAME: $dir/NAME.gguf evaluated on $PARITY_TOKENS in prompt chunks of 1, 7 and 48
# tokens gives bit-identical logits (a token's result must not depend on its chunk: decode is
# the chunk of 1).
parity_chunks() {
    local name=$1 m="$dir/$1.gguf" b
    for b in 1 7 48; do
        "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_TOKENS" --logits-out "$dir/$name.b$b.f32" -t 2 -b "$b" ||
            { echo "FAIL $name: strata eval -b $b"; parity_fail=1; return; }
    done
    if cmp -s "$dir/$name.b1.f32" "$dir/$name.b7.f32" && cmp -s "$dir/$name.b1.f32" "$dir/$name.b48.f32"; then
        echo "$name: prompt chunks of 1, 7 and 48 give identical logits"
    else
        echo "FAIL $name: logits depend on the prompt chunk size"; parity_fail=1
    fi
}
