#!/usr/bin/env bash
# Parity of strata with llama.cpp on the tiny synthetic models with the sparse-attention indexer:
# deepseek32 (DeepSeek-V3.2-like: deepseek2 tiny's MLA, YaRN x40 and expert groups, plus a
# lightning indexer of 4 heads x 128 with NeoX rope in every block, top-32) and glm-dsa (GLM-5-like
# MLA without rope scaling, the indexer with adjacent-pair rope and a LayerNorm of eps 0; tiny-5.2
# computes the top-k in blocks 0-2 and reuses it in block 3, as GLM-5.2). With top-32, every
# position from 32 on attends to a subset chosen by the indexer, so the 48-position sequences
# already mask (16 positions), and the 1,100-position one masks 97% of the context at its end.
# The quantized checks run parity_lib.sh's sequences of 8 tokens, so their models take a top-4
# (`synth --indexer-top-k 4`): half of those positions are masked there too.
# Teacher-forced logits and 32 greedy tokens (tolerances: parity_lib.sh) in F32, Q8_0, Q4_K and a
# low-bit mix, prompt chunks of 1, 7 and 48 bit-identical, 1,100 positions at F32, and the
# quantized models streamed through an expert cache below their experts' size, bit-identical.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. "$STRATA_ROOT/tests/parity_lib.sh"

long=$(awk 'BEGIN{s=777; for(i=0;i<1100;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')
# parity_long NAME [b1]: the 1,100-position sequence on $dir/NAME.gguf at F32; with b1, then
# token by token (decode: the indexer splits each token's positions over the threads; 40 s here)
# bit-identical to it.
parity_long() {
    local res rc
    res=$(parity_logits "$dir/$1.gguf" "$1_long" "$long" 1e-4); rc=$?
    echo "$1 1100 positions: $(echo "$res" | tail -n 1)"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $1 long"; parity_fail=1; }
    [ "${2:-}" = b1 ] || return 0
    "$STRATA_BIN" eval -m "$dir/$1.gguf" --tokens "$long" --logits-out "$dir/$1_long.b1.f32" -t 2 -b 1 ||
        { echo "FAIL $1: strata eval -b 1"; parity_fail=1; return; }
    if cmp -s "$dir/$1_long.strata.f32" "$dir/$1_long.b1.f32"; then
        echo "$1 1100 positions one at a time: logits identical"
    else
        echo "FAIL $1: 1100 positions one at a time differ from the prompt chunks"; parity_fail=1
    fi
}

parity_check deepseek32 tiny ds32_f32 "--type F32" 1e-4
parity_chunks ds32_f32
parity_long ds32_f32
parity_check glm-dsa tiny glm_f32 "--type F32" 1e-4
parity_check glm-dsa tiny-5.2 glm52_f32 "--type F32" 1e-4
parity_chunks glm52_f32
parity_long glm52_f32 b1
parity_full ds32_q8_0 && parity_check deepseek32 tiny ds32_q8_0 "--type Q8_0 --indexer-top-k 4" q
parity_check deepseek32 tiny ds32_q4_k "--type Q4_K --indexer-top-k 4" q
parity_streamed ds32_q4_k 2
parity_full glm_q8_0 && parity_check glm-dsa tiny glm_q8_0 "--type Q8_0 --indexer-top-k 4" q
parity_full glm52_q8_0 && parity_check glm-dsa tiny-5.2 glm52_q8_0 "--type Q8_0 --indexer-top-k 4" q
parity_check glm-dsa tiny-5.2 glm52_q4_k "--type Q4_K --indexer-top-k 4" q
parity_streamed glm52_q4_k 2
# shaped like a dynamic low-bit release of GLM-5 (IQ1_M / IQ2_XXS / IQ2_XS experts, a Q2_K down
# projection, Q4_K attention and indexer, Q8_0 embeddings, Q6_K head), streamed at 1 MiB
if parity_full glm52_lowbit; then
    parity_check glm-dsa tiny-5.2 glm52_lowbit "--type Q4_K --indexer-top-k 4 --type-overrides blk\.1\.ffn_(gate|up|down)_exps=IQ1_M,blk\.2\.ffn_(gate|up)_exps=IQ2_XXS,blk\.2\.ffn_down_exps=Q2_K,blk\.3\.ffn_(gate|up|down)_exps=IQ2_XS,token_embd=Q8_0,^output\.weight=Q6_K" q
    parity_streamed glm52_lowbit 1
fi
exit $parity_fail
