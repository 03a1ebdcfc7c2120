#!/usr/bin/env bash
# The CUDA backend on the GPU machine (shared/DEVICE.md), in one call: build with CUDA=1, the CUDA
# tests (kernels and the backend end to end against the CPU backend), and decode / prompt speed of
# `strata run --backend cuda` on the qwen3-30b-a3b shape (strata synth, 48 layers, every weight and
# expert in VRAM), rows appended to bench/results.tsv (copied to $OUT/results.tsv).
#
#   bash bench/device/deps.sh                                   # here, once: .deps/ (carried)
#   run(command="bash bench/device/cuda_backend.sh", carry=[".deps"])
# The device copies the landing checkout (/work/main), not a helper's worktree: .deps must be in
# the repository root the run takes, and the binaries link liburing.so.2 (deps.sh copies it).
#
# Environment:
#   PHASES="build test bench"  what to do (default all three)
#   BIN=DIR                    use strata, test_cuda, test_cuda_host from DIR instead of building
#   TYPES="Q4_K Q8_0"          weight types of the benchmark model (one synth each, deleted after)
#   LAYERS=48                  layers of the benchmark model (another PRESET: its own unless given)
#   ARCH=qwen3moe PRESET=qwen3-30b-a3b  its shape (issue 10 also asks for ARCH=qwen3next
#                              PRESET=qwen3-next-80b-a3b and ARCH=glm4moe PRESET=glm-4.5-air); the
#                              llama.cpp figures of DEVICE.md are for the default shape only
#   PROMPT=512 GEN=128         prompt tokens (one pass) and decoded tokens of the benchmark run
#   LLAMA_BENCH=PATH           a llama-bench built with CUDA, run on the same files; LLAMA_BUILD=1
#                              builds one from .deps/llama-src.tar.xz (about 5 minutes there).
#                              Without either, the rows compare with the llama.cpp CUDA numbers
#                              measured there before (DEVICE.md: Q8_0 279 / 9,080, Q4_K 299 / 6,455)
#   BUDGET_S=400               skip the remaining benchmark models after this many seconds
#   COMMIT=abc1234             the commit the rows name (the device copy may have no .git)
#   AB_ENV="STRATA_HOST_ROUTE=1;STRATA_CUDA_GRAPH=0"  also run strata with each of these
#                              environments (';' between them) on each model, a row each: the same
#                              binary with or without a feature, in the same run
#   HBM_GBS=4260               measured HBM bandwidth for the byte floor (DEVICE.md: copy 4.26 TB/s)
set -u
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-/tmp/out}; mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export LD_LIBRARY_PATH="$root/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_MODULE_LOADING=EAGER   # kernels loaded at start, not inside the timed passes
phases=${PHASES:-build test bench}
t0=$SECONDS
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
nproc; uptime

bin=${BIN:-$root/build-cuda}
tbin=${BIN:-$root/build-cuda/tests}
case " $phases " in *" build "*)
    if [ -z "${BIN:-}" ]; then
        tb=$SECONDS
        make -j"$(nproc)" CUDA=1 EXTRA_CFLAGS="-I$root/.deps/include" EXTRA_LDLIBS="-L$root/.deps/lib" \
            build-cuda/strata build-cuda/tests/test_cuda build-cuda/tests/test_cuda_host > "$out/build.log" 2>&1
        rc=$?
        tail -n 5 "$out/build.log"
        summary+=("build: rc=$rc in $((SECONDS - tb)) s")
    fi ;;
esac

case " $phases " in *" test "*)
    "$tbin/test_cuda_host" > "$out/test_cuda_host.log" 2>&1
    summary+=("test_cuda_host: rc=$? $(tail -n 1 "$out/test_cuda_host.log")")
    tt=$SECONDS
    timeout "${TEST_S:-180}" "$tbin/test_cuda" > "$out/test_cuda.log" 2>&1; rc=$?
    grep -v '^ok' "$out/test_cuda.log" | grep -v '^    ' | head -n 40
    grep '^    ' "$out/test_cuda.log" | head -n 80
    summary+=("test_cuda: rc=$rc, $(grep -c '^ok' "$out/test_cuda.log") ok, $(grep -c '^FAIL' "$out/test_cuda.log") FAIL, $((SECONDS - tt)) s")
    ;;
esac

# Bytes a decoded token reads: every tensor but the embedding, the routed experts' K of X.
bytes_per_token() {
    "$bin/strata" inspect "$1" --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
md = j["metadata"]
arch = md["general.architecture"]["value"] if isinstance(md["general.architecture"], dict) else md["general.architecture"]
def mv(k):
    v = md[arch + "." + k]
    return v["value"] if isinstance(v, dict) else v
X, K = mv("expert_count"), mv("expert_used_count")
b = 0
for t in j["tensors"]:
    if t["name"] == "token_embd.weight": continue
    b += t["bytes"] * K / X if "_exps." in t["name"] else t["bytes"]
print(int(b))'
}

# a / b with n decimals (0 when b is empty or 0); the machine there has no awk.
ratio() {
    python3 -c 'import sys; a, b = sys.argv[1], sys.argv[2]; print(f"{float(a) / float(b):.{int(sys.argv[3])}f}" if b and float(b) else 0)' "$1" "$2" "$3"
}

row() {  # model engine flags prompt decode bytes vs_llama kept note
    local bpt=$6 floor vs
    floor=$(ratio "${HBM_GBS:-4260}e9" "$bpt" 1)
    vs=$(ratio "$5" "$floor" 3)
    printf '%s\t%s\th200\t%s\t%s\t%s\t%s\t%s\t1.0\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M)" \
        "${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}" "$1" "$2" "$3" "$4" "$5" "$bpt" \
        "$floor" "$vs" "$7" "$8" "$9" | tee -a "$root/bench/results.tsv" >> "$out/results.tsv"
}

case " $phases " in *" bench "*)
    if [ -n "${LLAMA_BUILD:-}" ] && [ -z "${LLAMA_BENCH:-}" ]; then
        ll=${LLAMA_DIR:-/tmp/llama-cuda}  # llama_cuda_build.sh's folder (a warm machine's build is reused)
        LLAMA_DIR=$ll bash "$root/bench/device/llama_cuda_build.sh" "$out/llama_build.log" &
        llama_pid=$!
    fi
    w=${WORK:-/tmp/cb}; mkdir -p "$w"
    prompt=$(python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range(${PROMPT:-512})))")
    echo "$prompt" > "$w/prompt.txt"
    for type in ${TYPES:-Q4_K Q8_0}; do
        if [ $((SECONDS - t0)) -gt "${BUDGET_S:-400}" ]; then summary+=("bench $type: skipped (time)"); continue; fi
        arch=${ARCH:-qwen3moe} preset=${PRESET:-qwen3-30b-a3b}
        layers=${LAYERS-48}; [ -n "${PRESET:-}" ] && layers=${LAYERS:-}  # another shape: its own layers unless given
        m="$w/$preset-$type.gguf" name="$preset${layers:+-L$layers}-$type"
        ts=$SECONDS
        "$bin/strata" synth --arch "$arch" --preset "$preset" ${layers:+--layers "$layers"} --type "$type" -o "$m" \
            --no-progress || { summary+=("synth $type failed"); continue; }
        echo "synth $type: $((SECONDS - ts)) s, $(du -h "$m" | cut -f1)"
        bpt=$(bytes_per_token "$m")
        tr=$SECONDS
        timeout "${RUN_S:-240}" "$bin/strata" run -m "$m" --prompt-tokens "@$w/prompt.txt" -n "${GEN:-128}" --temp 0 --ignore-eos -c 1024 \
            -b "${PROMPT:-512}" --backend cuda --json > "$w/run.json" 2> "$w/run.err"; rc=$?
        tail -n 6 "$w/run.err"
        if [ $rc -eq 0 ]; then
            read -r pt dt load vram < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
print(round(s["prompt_tok_s"], 1), round(s["decode_tok_s"], 2), round(s["load_s"], 1), round(s.get("vram_peak_mib", 0)))' "$w/run.json")
            case $preset:$type in qwen3-30b-a3b:Q8_0) lp=9080 ld=279 ;; qwen3-30b-a3b:Q4_K) lp=6455 ld=299 ;; *) lp= ld= ;; esac
            note="llama.cpp from DEVICE.md (not this run)"
            if [ -n "${LLAMA_BENCH:-}" ] || [ -n "${llama_pid:-}" ]; then
                [ -n "${llama_pid:-}" ] && { wait "$llama_pid"; LLAMA_BENCH="$ll/b/bin/llama-bench"; llama_pid=; }
                if "$LLAMA_BENCH" -m "$m" -ngl 99 -p "${PROMPT:-512}" -n 128 -r 2 -o json > "$w/llama.json" 2>/dev/null; then
                    read -r lp ld < <(python3 "$root/bench/device/llama_ts.py" "$w/llama.json")
                    note="llama-bench CUDA same file, same run"
                    row "$name" "llama.cpp" "-ngl 99 p=${PROMPT:-512} n=128" "$lp" "$ld" "$bpt" 1 yes "$note"
                fi
            fi
            vsl=$(ratio "$dt" "$ld" 3)
            vsp=$(ratio "$pt" "$lp" 3)
            row "$name" "strata cuda" "--backend cuda prompt=${PROMPT:-512} gen=${GEN:-128} (decode after the prompt)" \
                "$pt" "$dt" "$bpt" "$vsl" yes \
                "load ${load}s, VRAM peak ${vram} MiB; prompt vs llama.cpp ${vsp} ($lp), decode ${vsl} ($ld); $note"
            summary+=("$name: prompt $pt tok/s, decode $dt tok/s (llama.cpp $lp / $ld), load ${load}s, $((SECONDS - tr)) s")
            IFS=';' read -ra ab_envs <<< "${AB_ENV:-}"
            for ab in "${ab_envs[@]}"; do
                [ -n "$ab" ] || continue
                if env $ab timeout "${RUN_S:-240}" "$bin/strata" run -m "$m" \
                    --prompt-tokens "@$w/prompt.txt" -n "${GEN:-128}" --temp 0 --ignore-eos -c 1024 -b "${PROMPT:-512}" \
                    --backend cuda --json > "$w/run_ab.json" 2> "$w/run_ab.err"; then
                    read -r pt2 dt2 < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
print(round(s["prompt_tok_s"], 1), round(s["decode_tok_s"], 2))' "$w/run_ab.json")
                    row "$name" "strata cuda ($ab)" "--backend cuda prompt=${PROMPT:-512} gen=${GEN:-128}, env $ab" \
                        "$pt2" "$dt2" "$bpt" "$(ratio "$dt2" "$ld" 3)" no "the same binary and model with $ab (comparison)"
                    summary+=("$name with $ab: prompt $pt2 tok/s, decode $dt2 tok/s")
                else
                    summary+=("$name with $ab: failed: $(tail -n 1 "$w/run_ab.err")")
                fi
                grep -i "graph" "$w/run_ab.err" | tail -n 2
            done
        else
            summary+=("$name: strata run failed (rc=$rc): $(tail -n 1 "$w/run.err")")
        fi
        rm -f "$m"
    done
    ;;
esac
echo "---- summary ($((SECONDS - t0)) s)"
printf '%s\n' "${summary[@]}"
[ -f "$out/results.tsv" ] && cat "$out/results.tsv"
