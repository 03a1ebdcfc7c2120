#!/usr/bin/env bash
# Parity of strata with llama.cpp on tiny synthetic qwen3moe models, per weight type and on a
# model mixing types across layers: teacher-forced logits at 48 positions (relative L2 error per
# position within the tolerance, argmax equal up to near ties) and 32 greedy tokens. Tolerances
# from measured noise (tests/parity_lib.sh, docs/correctness.md): 1e-4 for F32, 1e-2 for F16 and
# BF16 (one element rounded to half precision moves by far less than an int8 step), 2e-2 for the
# quantized types; each raised to twice llama.cpp's own batch-size disagreement when larger.
# The measured errors are printed, so the margin is visible in the log. F32 and Q4_K also check
# that prompt chunks of 1, 7 and 48 tokens give bit-identical logits.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. "$STRATA_ROOT/tests/parity_lib.sh"

parity_check qwen3moe tiny f32  "--type F32"  1e-4
parity_chunks f32
parity_full q8_0 && parity_check qwen3moe tiny q8_0 "--type Q8_0" q
parity_check qwen3moe tiny q4_k "--type Q4_K" q
parity_chunks q4_k
parity_full q5_k && parity_check qwen3moe tiny q5_k "--type Q5_K" q
parity_full q6_k && parity_check qwen3moe tiny q6_k "--type Q6_K" q
parity_full f16 && parity_check qwen3moe tiny f16  "--type F16"  1e-2 0
parity_full bf16 && parity_check qwen3moe tiny bf16 "--type BF16" q
# A dynamic-quant-like mix: Q4_K experts, Q5_K/Q6_K in some layers, Q8_0 attention, F32 head,
# also streamed through an expert cache far below the experts' size (bit-identical logits).
parity_check qwen3moe tiny mix "--type Q4_K --type-overrides blk\.0\.ffn_down=Q6_K,blk\.1\.ffn_(gate|up)_exps=Q5_K,attn_(q|k|v)\.weight=Q8_0,attn_output=Q6_K,^output\.weight=F32" q
parity_streamed mix 2
exit $parity_fail
