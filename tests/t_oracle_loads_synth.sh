#!/usr/bin/env bash
# llama.cpp must accept what `strata synth` writes: tiny qwen3moe models with F32, Q8_0 and Q4_K
# matrices (and one mixing them per tensor), and the tiny MLA (deepseek2, deepseek32, glm-dsa) and
# gpt-oss models, load and evaluate in the oracle with finite logits,
# and `strata inspect` reads the same files and agrees on the vocabulary size and the types;
# llama.cpp names each file's type from synth's general.file_type (FTYPE: "Q4_K - Medium"...).
# Skips (77) when node or the oracle packages are missing.
set -euo pipefail
root=${STRATA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
bin=${STRATA_BIN:-$root/build/strata}
. "$root/tests/oracle/lib.sh"

if [ ! -x "$bin" ]; then
    echo "FAIL: no strata binary at $bin (run make first)"
    exit 1
fi
oracle_available || exit 77

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# [ARCH=A PRESET=P] check NAME 'TENSOR=TYPE ...' SYNTH_ARGS...: the TENSOR=TYPE pairs are checked
# in strata inspect.
check() {
    local name=$1 want_types=$2
    shift 2
    local model="$tmp/$name.gguf"
    if ! "$bin" synth --arch "${ARCH:-qwen3moe}" --preset "${PRESET:-tiny}" --no-progress -o "$model" "$@"; then
        echo "FAIL $name: strata synth $* failed"
        fail=1
        return
    fi
    if ! "$bin" inspect "$model" >"$tmp/$name.inspect" 2>&1; then
        echo "FAIL $name: strata inspect failed:"
        tail -n 5 "$tmp/$name.inspect"
        fail=1
        return
    fi
    local out
    if ! out=$(oracle_run check_load.mjs --model "$model" --threads 1 --tokens 1,2,3,4,5 2>"$tmp/$name.err"); then
        echo "FAIL $name: llama.cpp did not load or evaluate it:"
        tail -n 5 "$tmp/$name.err"
        fail=1
        return
    fi
    echo "$name: $out"
    if [ -n "${FTYPE:-}" ] && [[ "$out" != *" desc=\"${ARCH:-qwen3moe} "*" $FTYPE\""* ]]; then
        echo "FAIL $name: llama.cpp does not describe it as $FTYPE (general.file_type)"
        fail=1
    fi
    local n_vocab inspect_vocab
    n_vocab=$(sed -n 's/.* n_vocab=\([0-9]*\) .*/\1/p' <<<"$out")
    inspect_vocab=$(sed -n 's/.*tokenizer\.ggml\.tokens .*\[str[a-z]* x \([0-9]*\)\].*/\1/p' "$tmp/$name.inspect" | head -n 1)
    if [ -z "$n_vocab" ] || [ "$n_vocab" != "$inspect_vocab" ]; then
        echo "FAIL $name: llama.cpp n_vocab '$n_vocab', strata inspect tokens '$inspect_vocab'"
        fail=1
    fi
    local pair tensor type
    for pair in $want_types; do
        tensor=${pair%%=*}
        type=${pair#*=}
        if ! grep -Eq "^ +${tensor//./\\.} +$type " "$tmp/$name.inspect"; then
            echo "FAIL $name: strata inspect does not list $tensor as $type:"
            grep -F "$tensor" "$tmp/$name.inspect" | head -n 2
            fail=1
        fi
    done
}

FTYPE='all F32' check f32 'blk.0.attn_q.weight=F32 blk.0.ffn_gate_exps.weight=F32' --type F32
FTYPE=Q8_0 check q8_0 'blk.0.attn_q.weight=Q8_0 blk.0.ffn_down_exps.weight=Q8_0' --type Q8_0
FTYPE='Q4_K - Medium' check q4_k 'blk.0.attn_q.weight=Q4_K blk.0.ffn_up_exps.weight=Q4_K' --type Q4_K
FTYPE='Q4_K - Medium' check mixed 'blk.0.attn_q.weight=Q8_0 blk.0.attn_v.weight=F32 blk.0.ffn_gate_exps.weight=Q4_K' \
    --type Q8_0 --type-overrides '_exps\.=Q4_K,attn_v=F32' --seed 7
# MLA: attn_k_b's rows (qk_nope = 128) take llama.cpp's quantizer fallback under a K-quant
ARCH=deepseek2 FTYPE='Q4_K - Medium' check ds2_q4_k 'blk.0.attn_k_b.weight=Q5_0 blk.0.attn_v_b.weight=Q4_K blk.1.ffn_gate_exps.weight=Q4_K' --type Q4_K
ARCH=deepseek32 FTYPE='all F32' check ds32_f32 'blk.0.indexer.attn_q_b.weight=F32 blk.4.nextn.eh_proj.weight=F32' --type F32
ARCH=glm-dsa PRESET=tiny-5.2 FTYPE=Q8_0 check glm5_q8_0 'blk.0.attn_q_a.weight=Q8_0 blk.0.indexer.k_norm.bias=F32' --type Q8_0
ARCH=gpt-oss FTYPE='MXFP4 MoE' check oss_mxfp4 'blk.0.ffn_up_exps.weight=MXFP4 blk.0.ffn_up_exps.bias=F32 blk.0.attn_sinks.weight=F32' \
    --type Q8_0 --type-overrides 'exps=MXFP4'

[ "$fail" -eq 0 ] || exit 1
echo "ok: llama.cpp loads every synthetic variant"
