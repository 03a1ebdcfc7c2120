#!/usr/bin/env bash
# Parity of strata with llama.cpp on tiny synthetic qwen3next models (delta-net blocks with a
# gated full-attention block every 4th, shared expert) in F32, Q8_0, Q4_K and Q6_K, and on
# qwen35moe in F32 and Q4_K: teacher-forced logits at 48 positions (tolerance 1e-4 F32, 2e-2
# quantized or twice llama.cpp's own batch-size noise: parity_lib.sh explains the measured noise) and 32 greedy tokens
# identical. Then the recurrent state over a long prompt: 1100 positions evaluated in chunks of
# 1, 7 and 512 give bit-identical logits, within 1e-4 of llama.cpp's; and the Q4_K model with
# the expert cache cut below the experts' size gives the same logits bit for bit.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. "$STRATA_ROOT/tests/parity_lib.sh"

parity_check qwen3next tiny f32 "--type F32" 1e-4
parity_full q8_0 && parity_check qwen3next tiny q8_0 "--type Q8_0" q
parity_check qwen3next tiny q4_k "--type Q4_K" q
parity_streamed q4_k 2
parity_full q6_k && parity_check qwen3next tiny q6_k "--type Q6_K" q
parity_check qwen35moe tiny q35_f32 "--type F32" 1e-4
parity_full q35_q4_k && parity_check qwen35moe tiny q35_q4_k "--type Q4_K" q

long=$(awk 'BEGIN{s=777; for(i=0;i<1100;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')
m="$dir/f32.gguf"
for b in 1 7 512; do
    "$STRATA_BIN" eval -m "$m" --tokens "$long" --logits-out "$dir/long.b$b.f32" -t 2 -b "$b" "${PARITY_KV[@]}" ||
        { echo "FAIL long: strata eval -b $b"; parity_fail=1; }
done
if cmp -s "$dir/long.b1.f32" "$dir/long.b7.f32" && cmp -s "$dir/long.b1.f32" "$dir/long.b512.f32"; then
    echo "long: 1100 positions, chunks of 1, 7 and 512 give identical logits"
else
    echo "FAIL long: logits depend on the chunk size"; parity_fail=1
fi
if oracle_run logits.mjs --model "$m" --tokens "$long" --out "$dir/long.llama.f32" --threads 1 >/dev/null; then
    res=$(node "$STRATA_ROOT/tests/compare_logits.mjs" "$dir/long.b7.f32" "$dir/long.llama.f32" "$(parity_n_vocab "$m")" 1e-4)
    rc=$?
    echo "long logits: $(echo "$res" | tail -n 1)"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL long: logits"; parity_fail=1; }
else
    echo "FAIL long: oracle logits"; parity_fail=1
fi
exit $parity_fail
