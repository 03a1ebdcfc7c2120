#!/usr/bin/env bash
# Expert I/O on the GPU machine's host CPU, in one command (the machine is bare and given back
# after each call): build strata, write the qwen3-30b-a3b shape (48 layers, Q4_K, 17.2 GB),
# measure the disk's random-read curve, then decode with --cache-mib at 25% and 50% of the expert
# bytes, 16 threads, greedy (so every configuration decodes the same tokens), comparing
#   base_lru_d4   the engine before this work (075d342: bounce-buffered O_DIRECT, 4 in flight,
#                 LRU), built from .deps/base-src.tar.gz when it was carried
#   lru_d4        LRU, 4 reads in flight, no prefetch, reads straight into the slots
#   lru_d16       LRU, 16 in flight
#   lfu_d16       LFU (the default policy), 16 in flight
#   lru_d16_pf1   LRU, 16 in flight, router lookahead one MoE layer ahead
#   lfu_d16_pf1   LFU + lookahead 1        lfu_d16_pf2   LFU + lookahead 2 layers ahead
# and checks `strata sim` (the trace of lru_d4: LRU/LFU/ARC/HOT/Belady misses) and `strata plan`'s
# predicted decode speed (that trace, the measured curve, 4 in flight) against the lru_d4 run.
# Prints a table; everything lands in $OUT: table.txt, rows.tsv (bench/results.tsv format, to
# append there), disk_curve.tsv, sim_*.txt, plan_*.txt, the runs' JSON and logs.
#
# There (with .deps carried: bash bench/device/deps.sh here first):
#   run(command="bash bench/device/prefetch_h200.sh", carry=[".deps"])
# Here, small (a quick check of the script itself):
#   LAYERS=4 N=8 OUT=/tmp/pf bash bench/device/prefetch_h200.sh
# Env: LAYERS (48), TYPE (Q4_K), N (decode tokens, 24), THREADS (nproc, at most 16), SHARES
# ("25 50"), CONFIGS (names above, most telling first), CURVE_S (seconds per curve point, 0.4),
# BUDGET_S (no run starts after this many seconds, 510, so the table is written inside the
# device's 10 minutes), MODEL (path; synthesised when absent), OUT (default: a new folder under
# /tmp). Expected there: about 6 minutes.
set -eu
cd "$(dirname "$0")/../.."
root=$PWD
layers=${LAYERS:-48}; type=${TYPE:-Q4_K}; n=${N:-24}; shares=${SHARES:-"25 50"}
threads=${THREADS:-$(nproc)}; [ "$threads" -gt 16 ] && threads=16
configs=${CONFIGS:-"base_lru_d4 lru_d4 lfu_d16_pf1 lfu_d16 lru_d16 lru_d16_pf1 lfu_d16_pf2"}
t_start=$(date +%s); budget_s=${BUDGET_S:-510}   # runs stop being started after this, so the table gets written
out=${OUT:-$(mktemp -d /tmp/strata-prefetch.XXXXXX)}; mkdir -p "$out"
model=${MODEL:-/tmp/strata-q30b-L$layers-$type.gguf}
log() { echo "[$(date +%T)] $*" | tee -a "$out/progress.log"; }

log "build ($(nproc) cores)"
jobs=$(nproc)
if [ -d .deps ]; then
    export LD_LIBRARY_PATH=$root/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    make -j"$jobs" build/strata build/membw EXTRA_CFLAGS="-I$root/.deps/include" EXTRA_LDLIBS="-L$root/.deps/lib" \
        >"$out/build.log" 2>&1
else
    make -j"$jobs" build/strata build/membw >"$out/build.log" 2>&1
fi
mem_gbs=${MEM_GBS:-$(build/membw "$threads" | awk -F'[= ]' -v t="$threads" '$2 == t {v = $4} END {print v}')}
bin=$root/build/strata
base_bin=
if [ -f .deps/base-src.tar.gz ]; then
    base=$(mktemp -d /tmp/strata-base.XXXXXX)
    tar -xzf .deps/base-src.tar.gz -C "$base"
    make -C "$base" -j"$jobs" build/strata EXTRA_CFLAGS="-I$root/.deps/include" EXTRA_LDLIBS="-L$root/.deps/lib" \
        >"$out/build_base.log" 2>&1 && base_bin=$base/build/strata || log "baseline build failed (build_base.log)"
fi
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo "+dirty")
machine="$(nproc)c-$(awk '/MemTotal/{printf "%.0fG", $2/1048576}' /proc/meminfo)-$(grep -m1 -o 'avx512f' /proc/cpuinfo || echo avx2)"
"$bin" run --help 2>&1 | grep -q -- '--prefetch ' && has_prefetch=1 || has_prefetch=0
"$bin" run --help 2>&1 | grep -q -- '--cache-policy' && has_policy=1 || has_policy=0

if [ ! -f "$model" ]; then
    log "synth $model (qwen3-30b-a3b, $layers layers, $type)"
    "$bin" synth --arch qwen3moe --preset qwen3-30b-a3b --layers "$layers" --type "$type" -o "$model" --no-progress
fi
expert_bytes=$("$bin" inspect "$model" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["expert_bytes"])')
log "model $(stat -c %s "$model") bytes, experts $expert_bytes bytes, memory ${mem_gbs:-?} GB/s ($threads threads); disk curve (${CURVE_S:-0.4} s per point)"
"$bin" plan -m "$model" --measure-disk --seconds "${CURVE_S:-0.4}" --curve-out "$out/disk_curve.tsv" >"$out/disk_curve.txt"
cat "$out/disk_curve.txt"

# name -> flags; empty when this build lacks what the configuration needs
flags_of() {
    local c=$1 f=""
    case $c in *_d4*) f="--io-threads 4" ;; *_d16*) f="--io-threads 16" ;; esac
    case $c in base_*) f="--io-threads 4" ;;
               lru_*) [ $has_policy = 1 ] && f="$f --cache-policy lru" ;;
               lfu_*) [ $has_policy = 1 ] || { echo; return; }; f="$f --cache-policy lfu" ;; esac
    case $c in *_pf1) [ $has_prefetch = 1 ] || { echo; return; }; f="$f --prefetch 1" ;;
               *_pf2) [ $has_prefetch = 1 ] || { echo; return; }; f="$f --prefetch 2" ;; esac
    echo "$f"
}

prompt="The history of the expert store begins"
: >"$out/rows.tsv"
for share in $shares; do
    mib=$((expert_bytes * share / 100 / 1048576))
    for c in $configs; do
        if [ $(( $(date +%s) - t_start )) -gt "$budget_s" ]; then log "skip $c at $share%: past BUDGET_S=$budget_s s"; continue; fi
        f=$(flags_of "$c")
        if [ -z "$f" ]; then log "skip $c: this build has no $( [ $has_prefetch = 1 ] || echo --prefetch ) $( [ $has_policy = 1 ] || echo --cache-policy)"; continue; fi
        extra=""; [ "$c" = lru_d4 ] && extra="--trace-out $out/trace_$share.trace"
        b=$bin
        if [ "$c" = base_lru_d4 ]; then
            [ -n "$base_bin" ] || { log "skip $c: no .deps/base-src.tar.gz built"; continue; }
            b=$base_bin; f="--io-threads 4"
        fi
        log "share $share% (--cache-mib $mib) $c: $f"
        sync
        "$b" run -m "$model" -p "$prompt" -n "$n" -t "$threads" --temp 0 --cache-mib "$mib" --stats-layers \
            --json $f $extra >"$out/run_${share}_$c.json" 2>"$out/run_${share}_$c.err" || {
            log "run failed: $(tail -n 1 "$out/run_${share}_$c.err")"; continue; }
    done
    if [ -f "$out/trace_$share.trace" ]; then
        "$bin" sim "$out/trace_$share.trace" --cache-mib "$mib" -m "$model" >"$out/sim_$share.txt" || true
        "$bin" plan -m "$model" --cache-mib "$mib" --trace "$out/trace_$share.trace" \
            --disk-curve "$out/disk_curve.tsv" --io-threads 4 --cache-policy lru --mem-gbs "${mem_gbs:-60}" >"$out/plan_$share.txt" || true
    fi
done

python3 - "$out" "$commit" "$machine" "$layers" "$type" "$threads" "$n" "$shares" "$configs" <<'PY' | tee "$out/table.txt"
import json, os, sys, time, re
out, commit, machine, layers, typ, threads, n, shares, configs = sys.argv[1:]
model = f"qwen3-30b-a3b-L{layers}-{typ}"
date = time.strftime("%Y-%m-%dT%H:%M")
rows = []
print(f"{'share':>5} {'config':<12} {'tok/s':>6} {'hit':>6} {'miss/tok':>8} {'pf/tok':>7} {'pf_used':>7} "
      f"{'recall':>6} {'MB/tok':>7} {'GB/s':>5} {'wait ms/tok':>11} {'vs base':>9}")
for share in shares.split():
    base = None
    for c in configs.split():
        p = f"{out}/run_{share}_{c}.json"
        if not os.path.exists(p) or os.path.getsize(p) == 0: continue
        d = json.load(open(p)); s = d.get("stats", d); e = s["experts"]
        toks = s["generated_tokens"] + s["prompt_tokens"]
        wait = 1e3 * e["io_wait_s"] / toks
        if c == "base_lru_d4" or (c == "lru_d4" and base is None): base = wait
        mb = e["bytes_read"] / toks / 1e6
        rec = e.get("prefetch_recall")
        ratio = wait / base if base else float("nan")
        print(f"{share:>5} {c:<12} {s['decode_tok_s']:6.2f} {e['hit_rate']:6.3f} {e['misses']/toks:8.2f} "
              f"{e.get('prefetched',0)/toks:7.2f} {e.get('prefetch_used',0)/toks:7.2f} "
              f"{(f'{rec:.3f}' if rec is not None else '-'):>6} {mb:7.1f} {e['read_gbs']:5.2f} {wait:11.1f} {ratio:9.2f}")
        flags = f"-t {threads} --cache-mib {e['cache_mib']:.0f} ({share}% of experts) {c} n={n} greedy"
        note = (f"io_wait {wait:.1f} ms/token ({ratio:.2f}x the plain-LRU baseline), {mb:.0f} MB read/token at {e['read_gbs']:.2f} GB/s, "
                f"prefetched {e.get('prefetched',0)/toks:.2f}/token used {e.get('prefetch_used',0)/toks:.2f}"
                + (f", recall {rec:.3f} precision {e.get('prefetch_precision',0):.3f}" if rec is not None else ""))
        rows.append([date, commit, machine, model, "strata run", flags, f"{s.get('prompt_tok_s',0):.2f}",
                     f"{s['decode_tok_s']:.3f}", f"{e['hit_rate']:.4f}", f"{e['bytes_read']/toks:.0f}", "", "", "",
                     "no", note])
    sp, pp = f"{out}/sim_{share}.txt", f"{out}/plan_{share}.txt"
    if os.path.exists(sp):
        lines = [l.split() for l in open(sp) if re.match(r"\s*\d", l)]
        hdr = [l for l in open(sp) if "LRU_misses" in l]
        if lines and hdr:
            names = [h.replace("_misses", "") for h in hdr[0].split() if h.endswith("_misses")]
            vals = lines[-1]
            per = {nm: float(vals[3 + 3 * i]) for i, nm in enumerate(names)}
            print(f"      sim at {vals[0]} slots/layer, misses/token: " + ", ".join(f"{k} {v:.2f}" for k, v in per.items()))
            rows.append([date, commit, machine, model, "strata sim", f"--cache-mib ({share}%) {vals[0]} slots, trace of lru_d4",
                         "", "", "", "", "", "", "", "no", "misses/token " + ", ".join(f"{k} {v:.2f}" for k, v in per.items())])
    if os.path.exists(pp):
        txt = open(pp).read()
        m = re.search(r"byte floor\s+([\d.]+) tok/s", txt)
        b = f"{out}/run_{share}_lru_d4.json"
        if m and os.path.exists(b) and os.path.getsize(b):
            meas = json.load(open(b))["stats"]["decode_tok_s"]
            pred = float(m.group(1))
            print(f"      plan predicts {pred:.2f} tok/s for lru_d4, measured {meas:.2f} ({meas/pred:.2f} of the prediction)")
            rows.append([date, commit, machine, model, "strata plan", f"--cache-mib ({share}%) --trace lru_d4 --disk-curve --io-threads 4",
                         "", f"{pred:.3f}", "", "", f"{pred:.3f}", f"{meas/pred:.3f}", "", "no",
                         f"predicted decode {pred:.2f} tok/s, measured lru_d4 {meas:.2f}"])
with open(f"{out}/rows.tsv", "w") as f:
    for r in rows: f.write("\t".join(r) + "\n")
PY
log "done: $out (rows.tsv has $(wc -l <"$out/rows.tsv") rows for bench/results.tsv)"
