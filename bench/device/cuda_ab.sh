#!/usr/bin/env bash
# A/B of two strata CUDA builds in one device call: the same model (qwen3-30b-a3b shape, strata
# synth), the same prompt, runs interleaved A B A B ..., every expert in VRAM; prints each run's
# prompt and decode tok/s, the medians and B/A, and whether B's tokens equal A's.
#   cp <base build>/strata .deps/bin/strata_a; cp build-cuda/strata .deps/bin/strata_b
#   run(command="bash bench/device/cuda_ab.sh", carry=[".deps/bin", ".deps/lib"])
# Environment: A, B (binaries, default .deps/bin/strata_a and strata_b), ENV_A, ENV_B (environment
# of each side, e.g. A=B=.deps/bin/strata ENV_A=STRATA_CUDA_MV_ROWS=1: one binary, a switch), ARGS_A, ARGS_B (more
# strata run flags for one side, e.g. ARGS_B="--warmup 1"), TYPE (Q4_K), LAYERS (48),
# PROMPT (512), GEN (128), REPS (3), ARGS (more strata run flags for both), WORK (the model's folder: a
# model already there, e.g. cuda_vram.sh's WORK=/tmp/cv, is used as it is), ARCH and PRESET (another
# shape: e.g. ARCH=glm4moe PRESET=glm-4.5-air LAYERS=12; the file is then named after the preset).
set -u
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_MODULE_LOADING=EAGER
out=${OUT:-/tmp/out}; mkdir -p "$out"
a=${A:-.deps/bin/strata_a} b=${B:-.deps/bin/strata_b}
type=${TYPE:-Q4_K} layers=${LAYERS:-48} P=${PROMPT:-512} G=${GEN:-128}
w=${WORK:-/tmp/ab}; mkdir -p "$w"
arch=${ARCH:-qwen3moe} preset=${PRESET:-qwen3-30b-a3b}
m="$w/q3-30b-$type.gguf"; [ "$preset" = qwen3-30b-a3b ] || m="$w/$preset-L$layers-$type.gguf"
[ -f "$m" ] || "$a" synth --arch "$arch" --preset "$preset" --layers "$layers" --type "$type" -o "$m" --no-progress ||
    { echo "synth failed"; exit 1; }
python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range($P)))" > "$w/prompt.txt"
for i in $(seq "${REPS:-3}"); do
    for v in a b; do
        bin=$a e=${ENV_A:-} x=${ARGS_A:-}; [ $v = b ] && bin=$b e=${ENV_B:-} x=${ARGS_B:-}
        # shellcheck disable=SC2086
        env $e timeout 200 "$bin" run -m "$m" --prompt-tokens "@$w/prompt.txt" -n "$G" --temp 0 --ignore-eos -c 1024 -b "$P" \
            --backend cuda --json ${ARGS:-} $x > "$w/$v.$i.json" 2> "$out/$v.$i.err" || { echo "$v run $i failed"; tail -n 3 "$out/$v.$i.err"; }
    done
done
python3 - "$w" "${REPS:-3}" <<'PY'
import json, statistics, sys
w, reps = sys.argv[1], int(sys.argv[2])
res = {"a": [], "b": []}; toks = {}
for i in range(1, reps + 1):
    for v in "ab":
        try: j = json.load(open(f"{w}/{v}.{i}.json"))
        except Exception: continue
        res[v].append((j["stats"]["prompt_tok_s"], j["stats"]["decode_tok_s"])); toks.setdefault(v, j["tokens"])
        print(f"{v} run {i}: prompt {j['stats']['prompt_tok_s']:.1f} decode {j['stats']['decode_tok_s']:.2f}")
med = {v: (statistics.median(x[0] for x in r), statistics.median(x[1] for x in r)) for v, r in res.items() if r}
for v in med: print(f"{v} median: prompt {med[v][0]:.1f} decode {med[v][1]:.2f}")
if "a" in med and "b" in med:
    print(f"B/A: prompt {med['b'][0] / med['a'][0]:.3f} decode {med['b'][1] / med['a'][1]:.3f}; tokens "
          + ("same" if toks.get("a") == toks.get("b") else "DIFFERENT"))
PY
