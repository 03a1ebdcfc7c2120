#!/usr/bin/env bash
# Parity of strata with llama.cpp on tiny synthetic qwen3moe models, per weight type and on a
# model mixing types across layers: teacher-forced logits at 48 positions (relative L2 error per
# position within the type's tolerance, same argmax everywhere) and 32 greedy tokens identical.
# Tolerances: 1e-4 for F32, 1e-3 for the quantized types and F16, 1e-2 for BF16 (measured
# noise, docs/correctness.md); the measured errors are
# printed so the margin is visible in the log.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail=0
# 48 prompt tokens spread over the vocabulary (deterministic).
tokens=$(awk 'BEGIN{s=12345; for(i=0;i<48;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')
prompt16=$(echo "$tokens" | cut -d, -f1-16)

check() {  # name type_args tol
    local name=$1 targs=$2 tol=$3 m="$dir/$1.gguf"
    # shellcheck disable=SC2086
    "$STRATA_BIN" synth --arch qwen3moe --preset tiny --seed 7 $targs -o "$m" --no-progress || { echo "FAIL $name: synth"; fail=1; return; }
    local nv; nv=$("$STRATA_BIN" inspect --json "$m" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.tensors.find(t=>t.name=="token_embd.weight").shape[1])})')
    "$STRATA_BIN" eval -m "$m" --tokens "$tokens" --logits-out "$dir/$name.strata.f32" -t 2 || { echo "FAIL $name: strata eval"; fail=1; return; }
    oracle_run logits.mjs --model "$m" --tokens "$tokens" --out "$dir/$name.llama.f32" --threads 2 >/dev/null || { echo "FAIL $name: oracle logits"; fail=1; return; }
    local res; res=$(node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/$name.strata.f32" "$dir/$name.llama.f32" "$nv" "$tol")
    local rc=$?
    echo "$name logits: $(echo "$res" | tail -n 1)"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $name: logits"; fail=1; }
    local ours theirs
    ours=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$prompt16" -n 32 --temp 0 --ignore-eos --json -t 2 |
           node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).tokens)))')
    theirs=$(oracle_run generate.mjs --model "$m" --tokens "$prompt16" -n 32 --threads 2)
    if [ "$ours" == "$theirs" ]; then echo "$name greedy: 32 tokens identical"
    else echo "FAIL $name greedy: strata $ours"; echo "                 llama.cpp $theirs"; fail=1; fi
}

check f32  "--type F32"  1e-4
check q8_0 "--type Q8_0" 1e-3
check q4_k "--type Q4_K" 1e-3
check q5_k "--type Q5_K" 1e-3
check q6_k "--type Q6_K" 1e-3
check f16  "--type F16"  1e-3
# BF16: llama.cpp itself moves by 3.9e-3 between batch sizes on these files (docs/correctness.md).
check bf16 "--type BF16" 1e-2
# A dynamic-quant-like mix: Q4_K experts, Q5_K/Q6_K in some layers, Q8_0 attention, F32 head.
check mix  "--type Q4_K --type-overrides blk\.0\.ffn_down=Q6_K,blk\.1\.ffn_(gate|up)_exps=Q5_K,attn_(q|k|v)\.weight=Q8_0,attn_output=Q6_K,^output\.weight=F32" 1e-3
exit $fail
