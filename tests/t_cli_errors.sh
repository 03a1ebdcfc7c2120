#!/usr/bin/env bash
# Bad input gets one clear error line and a clean non-zero exit: missing files, wrong flags,
# corrupt and truncated GGUFs, unsupported architectures and types, prompts longer than the
# context, token ids outside the vocabulary. Never a crash (exit >= 128) or a silent success.
set -u
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail=0
m="$dir/tiny.gguf"
"$STRATA_BIN" synth --arch qwen3moe --preset tiny -o "$m" --no-progress || { echo "synth failed"; exit 1; }

# expect NAME WANT_RC PATTERN CMD...: exit status WANT_RC, stderr matching PATTERN, no crash.
expect() {
    local name=$1 want=$2 pat=$3; shift 3
    "$@" >"$dir/out" 2>"$dir/err"
    local rc=$?
    if [ $rc -ne "$want" ] || ! grep -qiE "$pat" "$dir/err"; then
        echo "FAIL $name: exit $rc (want $want), stderr: $(head -c 300 "$dir/err")"
        fail=1
    else
        echo "ok   $name: $(head -n 1 "$dir/err")"
    fi
}

expect no-command      2 "usage"                 "$STRATA_BIN"
expect bad-command     2 "unknown command"       "$STRATA_BIN" frobnicate
expect run-no-model    2 "no model"              "$STRATA_BIN" run -p hi
expect run-bad-flag    2 "bad option"            "$STRATA_BIN" run -m "$m" -p hi --bogus
expect run-bad-number  2 "not a whole number"    "$STRATA_BIN" run -m "$m" -p hi -n lots
expect run-missing     1 "no such file|cannot open" "$STRATA_BIN" run -m "$dir/nope.gguf" -p hi
expect run-long-prompt 1 "context"               "$STRATA_BIN" run -m "$m" -p "$(printf 'word %.0s' $(seq 200))" -c 16
expect eval-bad-token  1 "outside the vocabulary" "$STRATA_BIN" eval -m "$m" --tokens 1,2,999999 --logits-out "$dir/l.f32"
expect eval-bad-list   2 "token ids"             "$STRATA_BIN" eval -m "$m" --tokens 1,x,3 --logits-out "$dir/l.f32"
expect run-bad-backend 2 "not auto, cpu or cuda"       "$STRATA_BIN" run -m "$m" -p hi --backend tpu
expect run-bad-gpu-miss 2 "not auto, copy or cpu" "$STRATA_BIN" run -m "$m" -p hi --gpu-miss maybe
expect run-bad-warmup  2 "warmup"                "$STRATA_BIN" run -m "$m" -p hi --warmup -3
# Without a GPU (or a CUDA build) --backend cuda says why and exits; with one it would just run.
command -v nvidia-smi >/dev/null 2>&1 ||
    expect eval-no-cuda 1 "CUDA" "$STRATA_BIN" eval -m "$m" --tokens 1,2 --logits-out "$dir/l.f32" --backend cuda --gpu 0
expect inspect-missing 1 "no such file|cannot open" "$STRATA_BIN" inspect "$dir/nope.gguf"
expect synth-bad-arch  1 "unknown architecture|arch" "$STRATA_BIN" synth --arch llama9 --preset tiny -o "$dir/x.gguf"
expect synth-bad-type  2 "type"                  "$STRATA_BIN" synth --arch qwen3moe --preset tiny --type Q9_Z -o "$dir/x.gguf"
expect synth-bad-regex 1 "regular expression"    "$STRATA_BIN" synth --arch qwen3moe --preset tiny --type-overrides '(=Q8_0' -o "$dir/x.gguf"
expect synth-norm-type 1 "stays F32"             "$STRATA_BIN" synth --arch qwen3moe --preset tiny --type-overrides 'attn_norm=Q4_K' -o "$dir/x.gguf"
printf '{"model":{"type":"BPE","vocab":{"a":88888882,"b":3},"merges":["a b"]},"added_tokens":[]}' > "$dir/sparse.json"
expect synth-sparse-vocab 1 "ids may go unused"  "$STRATA_BIN" synth --arch qwen3moe --preset tiny --tokenizer "$dir/sparse.json" -o "$dir/x.gguf"
expect synth-bad-skew  2 "route-skew"            "$STRATA_BIN" synth --arch qwen3moe --preset tiny --route-skew -1 -o "$dir/x.gguf"
expect synth-skew-type 1 "scales F32 routers"    "$STRATA_BIN" synth --arch qwen3moe --preset tiny --route-skew 0.5 --type-overrides 'ffn_gate_inp=Q8_0' -o "$dir/x.gguf"
expect synth-no-moe-layer 1 "leaves no MoE layer" "$STRATA_BIN" synth --arch deepseek2 --preset tiny --layers 1 -o "$dir/x.gguf"
expect synth-no-full-attn 1 "full-attention interval" "$STRATA_BIN" synth --arch qwen35moe --preset tiny --layers 3 -o "$dir/x.gguf"

# --pin-from: a missing trace, a corrupt one, one of another model.
"$STRATA_BIN" eval -m "$m" --tokens 1,2,3 --logits-out "$dir/l.f32" --trace-out "$dir/ok.trace" >/dev/null 2>&1
printf '# model=x layers=3 experts=4 topk=2 tokens=1\n0 1 | 2 3 | 1 3\n' >"$dir/other.trace"
{ head -n 1 "$dir/ok.trace"; echo "0 1 | x"; } >"$dir/corrupt.trace"
expect pin-missing 1 "cannot read"  "$STRATA_BIN" eval -m "$m" --tokens 1,2 --logits-out "$dir/l.f32" --cache-mib 1 --pin-from "$dir/nope.trace"
expect pin-corrupt 1 "corrupt.trace:2" "$STRATA_BIN" eval -m "$m" --tokens 1,2 --logits-out "$dir/l.f32" --cache-mib 1 --pin-from "$dir/corrupt.trace"
expect pin-other   1 "the trace is of" "$STRATA_BIN" run -m "$m" -p hi --cache-mib 1 --pin-from "$dir/other.trace"
expect pin-share   2 "pin-share"    "$STRATA_BIN" run -m "$m" -p hi --pin-share 2

# A truncated copy and a copy with a corrupted header.
head -c 100000 "$m" > "$dir/trunc.gguf"
expect inspect-truncated 1 "trunc|end of file|ends at" "$STRATA_BIN" inspect "$dir/trunc.gguf"
expect run-truncated     1 "trunc|end of file|ends at" "$STRATA_BIN" run -m "$dir/trunc.gguf" -p hi
{ printf 'GGUX'; tail -c +5 "$m"; } > "$dir/magic.gguf"
expect inspect-magic 1 "magic" "$STRATA_BIN" inspect "$dir/magic.gguf"
# Same file, architecture renamed (same length so offsets stay valid): unsupported, not a crash.
LC_ALL=C sed 's/qwen3moe/qwen9moe/g' "$m" > "$dir/arch.gguf"
expect run-unsupported-arch 1 "not supported" "$STRATA_BIN" run -m "$dir/arch.gguf" -p hi
# --warmup evaluates the prompt in throwaway sessions first: the timed run's tokens are the same.
toks() { "$STRATA_BIN" run -m "$m" -p "the warm cat" -n 8 --temp 0 --ignore-eos --json -t 2 "$@" 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["tokens"])'; }
t0=$(toks) t2=$(toks --warmup 2)
if [ -n "$t0" ] && [ "$t0" = "$t2" ]; then echo "ok   run-warmup: the same tokens ($t0)"
else echo "FAIL run-warmup: '$t0' without, '$t2' with --warmup 2"; fail=1; fi
exit $fail
