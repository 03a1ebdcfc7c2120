#!/usr/bin/env bash
# strata perplexity against llama.cpp on the same chunks: strata's perplexity of a text (docs/,
# chunks of 128 tokens, llama.cpp's perplexity-tool chunking) and the one computed from
# llama.cpp's logits of exactly the chunks strata evaluated (--tokens-out) agree: F32 within
# 1e-5 relative (measured 3.7e-8), Q4_K within 5e-3 (measured 7.8e-4 on AMD Zen: activation
# rounding flips move a few positions' logits by ~1e-2, and the mean over 252 scored tokens
# less). Bad input: a missing file and a text shorter than two chunks give one line and exit 2.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
cat "$STRATA_ROOT"/docs/*.md > "$dir/text.txt"
fail=0
ppl_from_logits() {  # LOGITS TOKENS CTX N_VOCAB -> ppl in llama.cpp's formula
    node -e '
        const fs = require("fs"), [lf, tf, cs, nvs] = process.argv.slice(1), ctx = Number(cs), nv = Number(nvs);
        const b = fs.readFileSync(lf), L = new Float32Array(b.buffer, b.byteOffset, b.length / 4);
        const chunks = fs.readFileSync(tf, "utf8").trim().split(";").map(c => c.split(",").map(Number));
        let nll = 0, count = 0;
        chunks.forEach((t, i) => {
            for (let p = ctx >> 1; p < ctx - 1; p++) {
                const row = L.subarray((i * ctx + p) * nv, (i * ctx + p + 1) * nv);
                let mx = -Infinity; for (const v of row) mx = Math.max(mx, v);
                let s = 0; for (const v of row) s += Math.exp(v - mx);
                nll += Math.log(s) - (row[t[p + 1]] - mx); count++;
            }
        });
        console.log(Math.exp(nll / count));' "$@"
}
for ty in F32 Q4_K; do
    m="$dir/$ty.gguf"
    "$STRATA_BIN" synth --arch qwen3moe --preset tiny --seed 7 --type $ty -o "$m" --no-progress || { echo "FAIL synth"; exit 1; }
    js=$("$STRATA_BIN" perplexity -m "$m" -f "$dir/text.txt" --ctx 128 --chunks 4 --json -t 2 \
         --tokens-out "$dir/toks.txt" --cache-type-k f32 --cache-type-v f32) || { echo "FAIL $ty: strata perplexity"; fail=1; continue; }
    ours=$(echo "$js" | sed -n 's/.*"ppl":[^0-9]*\([0-9.e+-]*\).*/\1/p' | head -n 1)
    oracle_run logits.mjs --model "$m" --tokens "@$dir/toks.txt" --out "$dir/l.f32" --threads 1 >/dev/null ||
        { echo "FAIL $ty: oracle logits"; fail=1; continue; }
    nv=$("$STRATA_BIN" inspect --json "$m" | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.tensors.find(t=>t.name=="token_embd.weight").shape[1])})')
    theirs=$(ppl_from_logits "$dir/l.f32" "$dir/toks.txt" 128 "$nv")
    tol=1e-5; [ $ty = F32 ] || tol=5e-3
    rel=$(node -e 'const [a,b]=process.argv.slice(1).map(Number); console.log(Math.abs(a-b)/b)' "$ours" "$theirs")
    echo "$ty: strata PPL $ours, from llama.cpp's logits $theirs, relative difference $rel (bound $tol)"
    node -e 'process.exit(Number(process.argv[1]) <= Number(process.argv[2]) ? 0 : 1)' "$rel" "$tol" ||
        { echo "FAIL $ty: perplexity differs"; fail=1; }
done
"$STRATA_BIN" perplexity -m "$dir/F32.gguf" -f "$dir/nonexistent.txt" 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < "$dir/err")" -eq 1 ] || { echo "FAIL: missing file: rc $rc, $(cat "$dir/err")"; fail=1; }
head -c 300 "$dir/text.txt" > "$dir/short.txt"
"$STRATA_BIN" perplexity -m "$dir/F32.gguf" -f "$dir/short.txt" --ctx 128 2>"$dir/err"; rc=$?
[ $rc -eq 2 ] && grep -q "needs at least 256" "$dir/err" || { echo "FAIL: short text: rc $rc, $(cat "$dir/err")"; fail=1; }
exit $fail
