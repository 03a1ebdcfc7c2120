#!/usr/bin/env bash
# `strata plan`'s prediction checked against the engine at the same budget. For each cache size:
#   1. a run with one prompt (seed 1) writes a route trace (the trace a user would give plan);
#   2. `strata plan --cache-mib C --trace T` predicts misses per token and decode tok/s (its
#      byte floor, and the overlapped bound);
#   3. REPS runs with another prompt (seed 2; out of sample) at the same cache measure decode
#      tok/s, misses per evaluated token and hit rate; medians.
# Prints predicted vs measured and appends one row per cache size to bench/results.tsv.
#   MODEL=/tmp/q30b6_q8.gguf CACHES="231 1331" N=48 REPS=3 THREADS=2 [CURVE=bench/curves/x.tsv]
#   [MEM_GBS=G] [EXTRA="--prefetch 1"] [KEPT=no NOTE="why"] bench/plan_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/strata}
MODEL=${MODEL:?MODEL=path to a model}
CACHES=${CACHES:-231 1331} N=${N:-48} REPS=${REPS:-3} THREADS=${THREADS:-2} CURVE=${CURVE:-}
MEM_GBS=${MEM_GBS:-} EXTRA=${EXTRA:-} KEPT=${KEPT:-yes} NOTE=${NOTE:-}
MODEL_NAME=${MODEL_NAME:-$(basename "$MODEL" .gguf)}
dir=$(mktemp -d /tmp/strata-plancheck.XXXXXX)
trap 'rm -rf "$dir"' EXIT
commit="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include || echo +dirty)"
for c in $CACHES; do
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    "$BIN" run -m "$MODEL" -p "Once upon a time 1" -n "$N" --seed 1 -t "$THREADS" --cache-mib "$c" \
        --trace-out "$dir/t.trace" >/dev/null 2>&1
    # shellcheck disable=SC2046
    "$BIN" plan -m "$MODEL" --cache-mib "$c" --trace "$dir/t.trace" --ctx 256 \
        $([ -n "$CURVE" ] && echo --disk-curve "$CURVE") $([ -n "$MEM_GBS" ] && echo --mem-gbs "$MEM_GBS") \
        >"$dir/plan.$c.txt"
    for r in $(seq "$REPS"); do
        # shellcheck disable=SC2086
        "$BIN" run -m "$MODEL" -p "Once upon a time 2" -n "$N" --seed 2 -t "$THREADS" --cache-mib "$c" --json \
            $EXTRA 2>/dev/null >"$dir/run.$c.$r.json"
    done
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    python3 - "$dir" "$c" "$REPS" "$N" "$THREADS" "$commit" "$MODEL_NAME" "$KEPT" \
        "load $load0 -> $load1${CURVE:+; disk curve $CURVE}${EXTRA:+; engine $EXTRA}${NOTE:+; $NOTE}" <<'PY'
import json, os, re, statistics as S, sys, time
d, c, reps, n, threads, commit, model, kept, note = sys.argv[1:]
plan = open(os.path.join(d, f"plan.{c}.txt")).read()
num = lambda pat: float(re.search(pat, plan).group(1))
p_hit = num(r"expected hit rate\s+([\d.]+) %") / 100
p_miss = num(r"misses per token\s+([\d.]+) experts")
p_tps = num(r"byte floor\s+([\d.]+) tok/s")
p_over = num(r"overlapped bound\s+([\d.]+) tok/s")
p_ms = num(r"time per token\s+([\d.]+) ms")
disk = re.search(r"disk\s+([\d.]+ GB/s[^\n]*)", plan).group(1).strip()
mem = re.search(r"memory ([\d.]+) GB/s", plan).group(1)
runs = [json.load(open(os.path.join(d, f"run.{c}.{r}.json")))["stats"] for r in range(1, int(reps) + 1)]
tps = S.median(s["decode_tok_s"] for s in runs)
hit = S.median(s["experts"]["hit_rate"] for s in runs)
miss = S.median(s["experts"]["misses"] / (s["prompt_tokens"] + s["generated_tokens"]) for s in runs)
wait = S.median(s["experts"]["io_wait_s"] * 1e3 / (s["prompt_tokens"] + s["generated_tokens"]) for s in runs)
each = ", ".join("%.2f" % s["decode_tok_s"] for s in runs)
print(f"--cache-mib {c}: predicted {p_tps:.2f} tok/s ({p_ms:.1f} ms/token; overlapped bound {p_over:.2f}), "
      f"{p_miss:.2f} misses/token, hit {p_hit:.3f}; measured {tps:.2f} tok/s (median of {reps}: "
      f"{each}), {miss:.2f} misses/token, hit {hit:.3f}, "
      f"io_wait {wait:.1f} ms/token; measured/predicted tok/s {tps / p_tps:.2f}, misses {miss / p_miss:.2f}")
row = [time.strftime("%Y-%m-%dT%H:%M"), commit, "2c-24G-avx512f" if os.cpu_count() == 2 else f"{os.cpu_count()}c",
       model, "strata plan vs run", f"--cache-mib {c} -t {threads} -n {n}, plan from a seed-1 trace, runs seed 2 x{reps}",
       "", f"{tps:.3f}", f"{hit:.4f}", "", f"{p_tps:.3f}", f"{tps / p_tps:.2f}", "", kept,
       f"issue 13 (bench/plan_check.sh): plan predicted {p_tps:.2f} tok/s ({p_ms:.1f} ms/token, memory {mem} GB/s, "
       f"disk {disk}; overlapped bound {p_over:.2f}) and {p_miss:.2f} misses/token (hit {p_hit:.3f}); the engine ran "
       f"{tps:.2f} tok/s ({each}), {miss:.2f} misses/token "
       f"(hit {hit:.3f}), io_wait {wait:.1f} ms/token: measured/predicted tok/s {tps / p_tps:.2f}, misses "
       f"{miss / p_miss:.2f}; floor_tok_s = plan's prediction; {note}"]
with open("bench/results.tsv", "a") as f: f.write("\t".join(row) + "\n")
PY
done
