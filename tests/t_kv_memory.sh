#!/usr/bin/env bash
# The KV cache takes memory as the context fills, not for -c at the start: on a qwen3-30b-a3b-shaped
# model (2 layers, 32 experts, Q4_K; 8 KiB of F32 KV per position), peak RSS of a short prompt at
# -c 32768 (256 MiB of KV when full) is within MARGIN_MIB of the same run at -c 1024, for the F32
# rows and the typed (F16) cache; the statistics say the bytes in use, per context token and at the
# full context; and the logits are the same bits at either context, in one chunk or in chunks that
# cross the cache's 256-position blocks.
# (-b 512 in both runs: the prompt scratch follows the chunk size, whose default grows with -c up to
# 2,048 on the CPU. The last check: that scratch is committed as it is used.)
set -u
MARGIN_MIB=${MARGIN_MIB:-16}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
m="$dir/m.gguf"
"$STRATA_BIN" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 2 --experts 32 --vocab 8192 --type Q4_K \
    -o "$m" --no-progress || { echo "FAIL: synth"; exit 1; }
fail=0
short=$(awk 'BEGIN{s=7; for(i=0;i<8;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), 1+s%8000}}')
long=$(awk 'BEGIN{s=9; for(i=0;i<300;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), 1+s%8000}}')
field() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);
  console.log(process.argv[1].split(".").reduce((o,k)=>o[k],j))})' "$1"; }

for kv in f32 f16; do
    for c in 1024 32768; do
        js=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$short" -n 8 --temp 0 --ignore-eos -t 2 -c $c -b 512 \
             --cache-type-k $kv --cache-type-v $kv --json 2>"$dir/err") || { echo "FAIL: run -c $c $kv: $(cat "$dir/err")"; fail=1; continue; }
        eval "rss_$c=$(echo "$js" | field stats.peak_rss_mib)"
        bytes=$(echo "$js" | field stats.kv_cache.bytes); per=$(echo "$js" | field stats.kv_cache.bytes_per_token)
        ctx=$(echo "$js" | field stats.kv_cache.ctx); ctx_bytes=$(echo "$js" | field stats.kv_cache.ctx_bytes)
        echo "$kv -c $c: peak RSS $(eval echo \$rss_$c) MiB, KV in use $bytes bytes, $per bytes per context token, $ctx_bytes at the context of $ctx"
        [ "$ctx" = $c ] && [ "$ctx_bytes" = $((per * c)) ] || { echo "FAIL: $kv -c $c: ctx / ctx_bytes"; fail=1; }
        # 16 positions in use: one block of 256 positions at most (F32 rows: rounded to pages)
        if [ "$bytes" -le 0 ] || [ "$bytes" -gt $((per * 256 + 65536)) ]; then
            echo "FAIL: $kv -c $c: $bytes bytes in use for 16 positions (a block is $((per * 256)))"; fail=1
        fi
    done
    d=$(echo "$rss_32768 - $rss_1024" | bc)
    echo "$kv: peak RSS at -c 32768 minus -c 1024: $d MiB (margin $MARGIN_MIB MiB; the full context would be $((per * 32768 >> 20)) MiB)"
    if [ "$(echo "$d > $MARGIN_MIB" | bc)" = 1 ]; then echo "FAIL: $kv: -c 32768 costs $d MiB more"; fail=1; fi
    # the same logits at either context, one chunk or chunks of 100 (positions 256..299 in a new block)
    "$STRATA_BIN" eval -m "$m" --tokens "$long" -c 1024 -t 2 --cache-type-k $kv --cache-type-v $kv \
        --logits-out "$dir/a.f32" 2>/dev/null || { echo "FAIL: eval $kv"; fail=1; }
    "$STRATA_BIN" eval -m "$m" --tokens "$long" -c 32768 -b 100 -t 2 --cache-type-k $kv --cache-type-v $kv \
        --logits-out "$dir/b.f32" 2>/dev/null || { echo "FAIL: eval $kv -c 32768"; fail=1; }
    cmp -s "$dir/a.f32" "$dir/b.f32" && echo "$kv: logits identical at -c 1024 and -c 32768 -b 100" ||
        { echo "FAIL: $kv: logits differ between -c 1024 and -c 32768 -b 100"; fail=1; }
done
# the text summary names it, with the types auto (the default) chose: f16 for this model's plain
# attention, f32 for gpt-oss's (sliding windows and sinks take F32 only)
"$STRATA_BIN" eval -m "$m" --tokens "$short" -c 4096 -t 2 --logits-out "$dir/a.f32" 2>"$dir/err" >/dev/null
grep -q "KV cache: .* in use of 16.0 MiB at the context of 4096 (f16/f16, 4096 bytes per context token)" "$dir/err" ||
    { echo "FAIL: eval's KV line (auto: f16)"; cat "$dir/err"; fail=1; }
"$STRATA_BIN" synth --arch gpt-oss --preset tiny --type F32 -o "$dir/oss.gguf" --no-progress || { echo "FAIL: synth gpt-oss"; exit 1; }
"$STRATA_BIN" eval -m "$dir/oss.gguf" --tokens 1,2,3 -c 256 -t 2 --logits-out "$dir/o.f32" 2>"$dir/err" >/dev/null &&
    grep -q "KV cache: .*(f32/f32," "$dir/err" || { echo "FAIL: gpt-oss's KV line (auto: f32)"; cat "$dir/err"; fail=1; }
"$STRATA_BIN" eval -m "$dir/oss.gguf" --tokens 1,2,3 -c 256 -t 2 --logits-out "$dir/o.f32" --cache-type-k f16 2>"$dir/err" >/dev/null &&
    { echo "FAIL: gpt-oss took an f16 cache"; fail=1; }
grep -q "plain" "$dir/err" || { echo "FAIL: gpt-oss with --cache-type-k f16: no clear error"; cat "$dir/err"; fail=1; }
# The prompt scratch takes memory as a prompt's rows reach it too: a short prompt at the default
# chunk (2,048 here; about 415 MiB more scratch than -b 512 on this model, all of it committed
# before 2026-12-06) within SCRATCH_MARGIN_MIB of the same run at -b 512 (huge pages: each large
# buffer commits its first 2 MiB, about 75 MiB in all here)
SCRATCH_MARGIN_MIB=${SCRATCH_MARGIN_MIB:-160}
for b in 512 default; do
    flag=(); [ $b = default ] || flag=(-b $b)
    js=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$short" -n 8 --temp 0 --ignore-eos -t 2 -c 4096 "${flag[@]}" --json          2>"$dir/err") || { echo "FAIL: run -b $b: $(cat "$dir/err")"; fail=1; continue; }
    eval "srss_$b=$(echo "$js" | field stats.peak_rss_mib)"
done
d=$(echo "${srss_default:-0} - ${srss_512:-0}" | bc)
echo "prompt scratch: peak RSS of a short prompt at the default chunk minus -b 512: $d MiB (margin $SCRATCH_MARGIN_MIB)"
if [ "$(echo "$d > $SCRATCH_MARGIN_MIB" | bc)" = 1 ]; then echo "FAIL: the default chunk's scratch costs $d MiB at a short prompt"; fail=1; fi
[ $fail -eq 0 ] && echo "ok"
exit $fail
