#!/usr/bin/env bash
# I/O wait that router lookahead prefetch removes, per MoE layer: `strata run` with and without
# --prefetch AHEAD at one cache size, runs interleaved (off, on, off, on, ...), medians of REPS.
# Prints per layer: I/O wait ms per token without and with prefetch, what prefetch removed, the
# guesses' recall and precision; appends one row per configuration to bench/results.tsv (the
# per-layer numbers in the note). Per token = per evaluated token (prompt + decode).
#   MODEL=/tmp/q30b6_q8.gguf CACHE=1331 N=32 REPS=3 AHEAD=1 THREADS=2 bench/prefetch_layers.sh
#   (KEPT=no NOTE="..." to mark the rows discarded, with the reason)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/strata}
MODEL=${MODEL:?MODEL=path to a model}
CACHE=${CACHE:-1331} N=${N:-32} REPS=${REPS:-3} AHEAD=${AHEAD:-1} THREADS=${THREADS:-2}
PROMPT=${PROMPT:-Once upon a time 2} SEED=${SEED:-2} KEPT=${KEPT:-yes} NOTE=${NOTE:-}
MODEL_NAME=${MODEL_NAME:-$(basename "$MODEL" .gguf)}
dir=$(mktemp -d /tmp/strata-pflayers.XXXXXX)
trap 'rm -rf "$dir"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$REPS"); do
    for pf in off "$AHEAD"; do
        "$BIN" run -m "$MODEL" -p "$PROMPT" -n "$N" --seed "$SEED" -t "$THREADS" --cache-mib "$CACHE" \
            --prefetch "$pf" --stats-layers --json 2>/dev/null >"$dir/$pf.$r.json"
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$dir" "$REPS" "$AHEAD" "$MODEL" "$CACHE" "$N" "$THREADS" "$KEPT" "load $load0 -> $load1${NOTE:+; $NOTE}" \
    "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include || echo +dirty)" "$MODEL_NAME" <<'PY'
import json, os, statistics as S, sys, time
d, reps, ahead, model, cache, n, threads, kept, note, commit, model_name = sys.argv[1:]
reps = int(reps)
def load(pf):
    out = []
    for r in range(1, reps + 1):
        j = json.load(open(os.path.join(d, f"{pf}.{r}.json")))
        st = j["stats"]
        out.append((st, st["experts"], st["prompt_tokens"] + st["generated_tokens"]))
    return out
runs = {"off": load("off"), ahead: load(ahead)}
L = len(runs["off"][0][1]["layers"])
def med(xs): return S.median(xs)
print(f"{'layer':>5} {'off ms/tok':>10} {'on ms/tok':>10} {'removed':>8} {'recall':>7} {'precision':>9}")
per = []
for l in range(L):
    off = med([e["layers"][l]["io_wait_s"] * 1e3 / t for _, e, t in runs["off"]])
    on = med([e["layers"][l]["io_wait_s"] * 1e3 / t for _, e, t in runs[ahead]])
    rec = med([e["layers"][l].get("prefetch_recall", 0) for _, e, t in runs[ahead]])
    pre = med([e["layers"][l].get("prefetch_precision", 0) for _, e, t in runs[ahead]])
    per.append((off, on, rec, pre))
    print(f"{l:>5} {off:>10.1f} {on:>10.1f} {off - on:>8.1f} {rec:>7.3f} {pre:>9.3f}")
rows = []
for pf, rs in runs.items():
    dec = med([s["decode_tok_s"] for s, _, _ in rs])
    hit = med([e["hit_rate"] for _, e, _ in rs])
    bpt = med([e["bytes_read"] / t for _, e, t in rs])
    wait = med([e["io_wait_s"] * 1e3 / t for _, e, t in rs])
    col = 0 if pf == "off" else 1
    layers = ", ".join(f"L{l} {p[col]:.0f}" + (f" (recall {p[2]:.2f})" if col else "") for l, p in enumerate(per))
    print(f"prefetch {pf}: decode {dec:.2f} tok/s, io_wait {wait:.1f} ms/token, hit {hit:.3f}, {bpt / 1e6:.1f} MB read/token")
    rows.append([time.strftime("%Y-%m-%dT%H:%M"), commit, "2c-24G-avx512f" if os.cpu_count() == 2 else f"{os.cpu_count()}c",
                 model_name, "strata run",
                 f"-t {threads} --cache-mib {cache} --prefetch {pf} -n {n} x{reps} interleaved --stats-layers",
                 "", f"{dec:.3f}", f"{hit:.4f}", f"{bpt:.0f}", "", "", "", kept,
                 f"issue 13 per-layer I/O wait (bench/prefetch_layers.sh): {wait:.1f} ms/token in all; per layer ms/token: {layers}; "
                 f"removed by prefetch {ahead}: " + ", ".join(f"L{l} {p[0] - p[1]:.0f}" for l, p in enumerate(per)) + f"; {note}"])
with open("bench/results.tsv", "a") as f:
    for r in rows: f.write("\t".join(r) + "\n")
PY
