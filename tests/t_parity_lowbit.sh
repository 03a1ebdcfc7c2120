#!/usr/bin/env bash
# Parity of strata with llama.cpp on tiny synthetic qwen3moe models in the low-bit formats: one
# model per type (every weight matrix in that type, so embeddings, attention, experts and the
# head all go through its kernels; norms and routers F32), and a model shaped like a real dynamic
# quant (IQ1_M / IQ2_XXS / IQ2_XS expert layers mixed, Q2_K and IQ4_XS down projections, Q4_K /
# Q6_K attention, Q8_0 embeddings, F32 head), which also runs streamed with a small expert cache
# and must give the same logits bit for bit. Each: teacher-forced logits at 48 positions and 32
# greedy tokens identical. Tolerance: 2e-2, raised to twice llama.cpp's own disagreement between
# batch sizes 512 and 1 (parity_lib.sh: activations rounded to int8 blocks make rare rounding
# flips; the measured errors are printed, so the margin is visible in the log).
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. "$STRATA_ROOT/tests/parity_lib.sh"
types=${PARITY_LOWBIT_TYPES:-"Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K IQ4_NL IQ4_XS MXFP4 IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M"}
for t in $types; do
    name=$(echo "$t" | tr 'A-Z' 'a-z')
    parity_full "$name" && parity_check qwen3moe tiny "$name" "--type $t" q
done
if [ -z "${PARITY_LOWBIT_TYPES:-}" ]; then
    parity_check qwen3moe tiny dynamic "--type Q4_K --type-overrides blk\.0\.ffn_(gate|up|down)_exps=IQ1_M,blk\.1\.ffn_(gate|up)_exps=IQ2_XXS,blk\.1\.ffn_down_exps=Q2_K,blk\.2\.ffn_(gate|up|down)_exps=IQ2_XS,blk\.3\.ffn_(gate|up)_exps=IQ3_XXS,blk\.3\.ffn_down_exps=IQ4_XS,attn_(v|output)\.weight=Q6_K,token_embd=Q8_0,^output\.weight=F32" q
    parity_streamed dynamic 1
fi
exit $parity_fail
