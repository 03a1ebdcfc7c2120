# Shared steps of the llama.cpp parity tests (t_parity_qwen3moe.sh, t_parity_glm4moe.sh,
# t_parity_qwen3next.sh, t_parity_lowbit.sh). Source it after tests/oracle/lib.sh, with $dir a
# scratch folder.
#
# parity_check ARCH PRESET NAME TYPE_ARGS TOL [SHARE]
#   synthesises a tiny model of ARCH/PRESET with TYPE_ARGS (`strata synth` flags) and compares
#   strata's teacher-forced logits with llama.cpp's, then 32 greedy tokens after 16 prompt tokens.
#   Sets parity_fail=1 on a failure; leaves the (seed 7) model at $dir/NAME.gguf.
#   TOL 1e-4 (F32): one 48-token sequence ($PARITY_TOKENS), every position within 1e-4 relative
#     L2 error and the same argmax; greedy tokens identical.
#   TOL q (rounded activations: every quantized type, BF16), or a number (the bound): the models
#     of seeds $PARITY_SEEDS, each on 16 sequences of 8 tokens ($PARITY_SEQS, each from an empty
#     context), strata at every ISA level of $PARITY_ISAS (native, avx2, scalar), judged together:
#     at least the share SHARE ($PARITY_SHARE) of all positions agree with llama.cpp to 1e-5, every
#     position keeps the bound ($PARITY_BOUND for q), the argmax agrees except at near ties, and
#     greedy runs part only where llama.cpp itself is torn.
#
# The oracle's KV cache is F32 unless asked (tests/oracle/common.mjs), so strata's is too where it
# is compared with it (PARITY_KV; strata's own default is F16 where the attention takes it, and
# t_parity_kv.sh compares those caches with llama.cpp's).
PARITY_KV=(--cache-type-k f32 --cache-type-v f32)
#
# Why (docs/correctness.md has the numbers). F32 differs from llama.cpp only in float summation
# order: measured 5e-7 qwen3moe, 4e-7 glm4moe, 3e-6 qwen3next, 6e-6 over 1100 positions.
# With rounded activations every product first rounds its input to int8 blocks (bf16 for BF16),
# as ggml does; strata rounds the same way, so most positions agree to 1e-7. But where two
# engines' float inputs differ in the last bit an element can round to the other side of a step,
# and in these tiny random models one such flip moves later logits by up to 0.5 relative (through
# attention, routing and recurrent state, for the rest of the sequence). llama.cpp is not immune:
# its AVX2 and AVX-512 builds, and its batch sizes 1 and 512, part the same way, and on AMX CPUs
# it takes yet another path. So no per-position bound tells a flip from a bug; the share does:
# measured on AMD Zen (AVX-512) per seed and ISA, 48% (BF16) / 55% (qwen3next Q8_0) to 100% of
# positions agree to 1e-5, and 62% to 99% judged together; a bug (a wrong scale, nibble or sign)
# moves every position and leaves ~0% (F16's systematic 4e-4 leaves 4%). SHARE 0.4 sits between the two; the bound
# of 1 (twice the largest flip measured, 0.50 on glm4moe Q8_0; unrelated logits give ~1.4) only
# catches garbage. A flip can reorder two candidates closer than the noise, so an argmax may
# differ only at a near tie (llama.cpp ranks strata's choice within twice the largest logit
# difference of that position). F16 (TOL 1e-2, SHARE 0): llama.cpp rounds F16 products' inputs
# through a different path, so every position differs by ~4e-4 (measured 5.5e-4 at most, and
# llama.cpp's batch sizes 1 and 512 differ by 5.2e-4), never by a flip; the bound does the work.
parity_fail=0

# parity_full NAME: true in the full pass. Under STRATA_TEST_SHORT=1 (.ci/run's sanitizer pass,
# after the full pass judged every case) it says that case NAME is skipped and returns 1: a test
# then keeps the cases that run distinct strata code under the sanitizers (every architecture's
# F32 graph, one quantized model through the expert cache, prompt chunking, long contexts) and
# drops the other weight types, whose kernels the unit tests (test_quant, test_quant_lowbit,
# test_gemm) check at every ISA level under the same sanitizers, and whose llama.cpp runs would
# repeat the full pass's numbers at no gain.
parity_full() {
    [ -z "${STRATA_TEST_SHORT:-}" ] && return 0
    echo "skip $1 (STRATA_TEST_SHORT: judged in the full pass)"
    return 1
}
PARITY_SHARE=${PARITY_SHARE:-0.4}
PARITY_BOUND=${PARITY_BOUND:-1}
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
    "$STRATA_BIN" eval -m "$m" --tokens "$toks" --logits-out "$dir/$label.strata.f32" -t 2 "${PARITY_KV[@]}" ||
        { echo "strata eval failed"; return 1; }
    [ -f "$dir/$label.llama.f32" ] ||
        oracle_run logits.mjs --model "$m" --tokens "$toks" --out "$dir/$label.llama.f32" --threads 1 >/dev/null ||
        { echo "oracle logits failed"; return 1; }
    STRATA_TIES=$ties node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/$label.strata.f32" "$dir/$label.llama.f32" "$nv" "$tol"
}

# parity_greedy M NAME TIES: 32 greedy tokens of strata and llama.cpp after 16 prompt tokens.
parity_greedy() {
    local m=$1 name=$2 ties=$3
    local prompt16; prompt16=$(echo "$PARITY_TOKENS" | cut -d, -f1-16)
    local ours theirs
    ours=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$prompt16" -n 32 --temp 0 --ignore-eos --json -t 2 "${PARITY_KV[@]}" |
           node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).tokens)))')
    theirs=$(oracle_run generate.mjs --model "$m" --tokens "$prompt16" -n 32 --threads 1)
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

# Short sequences for the types with rounded activations: an activation-rounding flip moves the
# rest of its sequence (through the KV cache, routing, a recurrent state), so many short
# sequences let each flip spoil only a few positions while a bug still moves all of them.
PARITY_SEQS=$(awk 'BEGIN{s=4242; for(q=0;q<16;q++){if(q) printf ";"; for(i=0;i<8;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}}')
# The short pass (STRATA_TEST_SHORT=1) takes one seed at the native level.
if [ -n "${STRATA_TEST_SHORT:-}" ]; then
    PARITY_SEEDS=${PARITY_SEEDS:-7}; PARITY_ISAS=${PARITY_ISAS:-native}
fi
PARITY_SEEDS=${PARITY_SEEDS:-"7 8 9"}
PARITY_ISAS=${PARITY_ISAS:-"native avx2 scalar"}

# parity_seq_logits M OUT [ISA]: strata's logits of model M on each of $PARITY_SEQS, evaluated
# from an empty session each (strata eval's ';'), one after another in OUT; ISA: STRATA_ISA.
# One thread, here and for llama.cpp (every oracle run of the tests takes one): both give the
# same bits at any thread count (checked: logits and greedy tokens, F32 and quantized, every KV
# cache type), and a busy machine then costs the least: ggml's threads spin while they wait for
# each other, so two oracle threads on a loaded 2-core host took 2-3x the wall and CPU time of one.
parity_seq_logits() {
    local m=$1 out=$2 isa=${3:-native}
    if [ "$isa" = native ]; then
        "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_SEQS" --logits-out "$out" -t 1 "${PARITY_KV[@]}"
    else
        STRATA_ISA=$isa "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_SEQS" --logits-out "$out" -t 1 "${PARITY_KV[@]}"
    fi
}

# parity_check ARCH PRESET NAME TYPE_ARGS TOL [SHARE]: see the top of this file.
parity_check() {
    local arch=$1 preset=$2 name=$3 targs=$4 tol=$5 share=${6:-$PARITY_SHARE} m="$dir/$3.gguf"
    local res rc
    if [ "$tol" = "1e-4" ]; then  # F32: one sequence, every position within the tolerance
        # shellcheck disable=SC2086
        "$STRATA_BIN" synth --arch "$arch" --preset "$preset" --seed 7 $targs -o "$m" --no-progress ||
            { echo "FAIL $name: synth"; parity_fail=1; return; }
        res=$(parity_logits "$m" "$name" "$PARITY_TOKENS" "$tol" 0); rc=$?
        echo "$name logits: $(echo "$res" | tail -n 1)"
        [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $name: logits"; parity_fail=1; }
        parity_greedy "$m" "$name" 0
        return
    fi
    # Rounded activations: every seed's model, strata at every ISA level against llama.cpp on the
    # short sequences, judged together (the share, the bound TOL, argmax up to near ties).
    local seed isa gm nv first=1
    [ "$tol" = q ] && tol=$PARITY_BOUND
    : > "$dir/$name.all.strata.f32"; : > "$dir/$name.all.llama.f32"
    for seed in $PARITY_SEEDS; do
        gm="$dir/$name.s$seed.gguf"; [ $first = 1 ] && gm=$m
        # shellcheck disable=SC2086
        "$STRATA_BIN" synth --arch "$arch" --preset "$preset" --seed "$seed" $targs -o "$gm" --no-progress ||
            { echo "FAIL $name: synth seed $seed"; parity_fail=1; return; }
        oracle_run logits.mjs --model "$gm" --tokens "$PARITY_SEQS" --out "$dir/$name.llama.f32" --threads 1 \
            >/dev/null || { echo "FAIL $name: oracle logits seed $seed"; parity_fail=1; return; }
        for isa in $PARITY_ISAS; do
            parity_seq_logits "$gm" "$dir/$name.strata.f32" "$isa" ||
                { echo "FAIL $name: strata eval seed $seed $isa"; parity_fail=1; return; }
            cat "$dir/$name.strata.f32" >> "$dir/$name.all.strata.f32"
            cat "$dir/$name.llama.f32" >> "$dir/$name.all.llama.f32"
        done
        first=0
    done
    nv=$(parity_n_vocab "$m")
    res=$(STRATA_TIES=1 STRATA_SHARE=$share node "$STRATA_ROOT/tests/compare_logits.mjs" \
          "$dir/$name.all.strata.f32" "$dir/$name.all.llama.f32" "$nv" "$tol"); rc=$?
    echo "$name logits (seeds $PARITY_SEEDS x $PARITY_ISAS, $(echo "$PARITY_SEQS" | tr ';' '\n' | wc -l) sequences): $(echo "$res" | tail -n 1)"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $name: logits"; parity_fail=1; }
    parity_greedy "$m" "$name" 1
}

# parity_streamed NAME: the logits of $dir/NAME.gguf with the expert cache cut to MIB MiB equal
# the fully resident ones bit for bit (experts then stream from the file).
parity_streamed() {
    local name=$1 mib=$2 m="$dir/$1.gguf"
    "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_TOKENS" --logits-out "$dir/$name.resident.f32" -t 2 &&
        "$STRATA_BIN" eval -m "$m" --tokens "$PARITY_TOKENS" --logits-out "$dir/$name.stream.f32" -t 2 --cache-mib "$mib" ||
        { echo "FAIL $name: strata eval --cache-mib $mib"; parity_fail=1; return; }
    if cmp -s "$dir/$name.resident.f32" "$dir/$name.stream.f32"; then
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
