#!/usr/bin/env bash
# Expert store end to end on a synthetic model whose experts (102 MiB) are many times the small
# budgets used here:
#  - logits bit-identical (cmp) for every cache size from the minimum to full, both I/O engines,
#    1..8 I/O threads, classes on/off, LFU/LRU, router lookahead prefetch off, 1 and 2 layers
#    ahead, with prompt chunks that need more experts than fit;
#  - prefetch happens (experts prefetched and then used) and is scored (recall in the JSON);
#  - a prompt chunk whose experts do not fit reads each of them once (groups of half the slots,
#    the next group fetched while one computes), also per layer in the JSON;
#  - peak RSS under a small budget stays within dense + KV + scratch + budget + overhead;
#  - injected faults: a retried EIO gives the same logits, a lasting one a clean error (exit 1);
#  - strata sim's LRU and LFU reproduce the engine's misses from the run's own trace (chunked
#    prompt), and --cache-policy lfu gives the same logits;
#  - strata plan and strata sim --sweep run and print what they promise.
set -eu
bin=${STRATA_BIN:?}
dir=$(mktemp -d /tmp/strata-t-store.XXXXXX)
trap 'rm -rf "$dir"' EXIT
m=$dir/m.gguf
"$bin" synth --arch qwen3moe --preset tiny --layers 8 --experts 64 -o "$m" --no-progress
toks=$(awk 'BEGIN{for(i=0;i<40;i++) printf "%s%d", (i?",":""), (i*37+11)%1000}')
jget() { python3 -c "import json,sys; d=json.load(open('$1')); print(eval('d'+sys.argv[1]))" "$2"; }

"$bin" eval -m "$m" --tokens "$toks" -b 16 -c 64 --logits-out "$dir/full.bin" --json >"$dir/full.json"
[ "$(jget "$dir/full.json" "['experts']['cache']")" = full ]
n=0
for args in "--cache-mib 4" "--cache-mib 4 --io uring" "--cache-mib 4 --io uring --io-threads 1" \
            "--cache-mib 5 --io-threads 1" "--cache-mib 7 --io-threads 8" "--cache-mib 13 --io uring --io-threads 8" \
            "--cache-mib 30 --cache-classes off" "--cache-mib 60 --io uring" "--cache-mib full --io uring" \
            "--cache-mib 4 -b 1" "--cache-mib 9 -b 40 -t 1" "--cache-mib 4 --prefetch 1" \
            "--cache-mib 5 --io uring --prefetch 2 -b 1" "--cache-mib 13 --io pread --io-threads 1 --prefetch 1 -b 1" \
            "--cache-mib 30 --io uring --io-threads 8 --prefetch 1 --prefetch-k 1 --cache-policy lru" \
            "--cache-mib 9 -b 40 --prefetch 1" "--cache-mib 4 -b 40 --io uring --prefetch 1"; do
    "$bin" eval -m "$m" --tokens "$toks" -b 16 -c 64 --logits-out "$dir/x.bin" --json $args >"$dir/x.json"
    cmp "$dir/full.bin" "$dir/x.bin" || { echo "logits differ with $args"; exit 1; }
    n=$((n+1))
done
echo "determinism: $n configurations bit-identical to full residency"
"$bin" eval -m "$m" --tokens "$toks" -b 1 -c 64 --logits-out "$dir/x.bin" --cache-mib 8 --prefetch 1 --json >"$dir/p.json"
python3 - "$dir/p.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["experts"]
print(f"prefetch 1 at 8 MiB: prefetched {e['prefetched']}, used {e['prefetch_used']}, recall {e['prefetch_recall']:.3f}, "
      f"precision {e['prefetch_precision']:.3f}, demand misses {e['misses']}")
sys.exit(0 if e["prefetched"] > 0 and 0 < e["prefetch_used"] <= e["prefetched"] and 0 < e["prefetch_recall"] <= 1 else 1)
PY

# One chunk of 40 tokens on a cold cache of 4 slots per layer (its experts are 23-46 per layer):
# every expert of a layer's union is read exactly once (bytes read = union x triplet), all but
# the first group's while the previous group computed (fetched); each layer reports its I/O wait.
for io in pread uring; do
    "$bin" eval -m "$m" --tokens "$toks" -b 40 -c 64 --logits-out "$dir/x.bin" --cache-mib 4 --io $io --stats-layers \
        --json --trace-out "$dir/c.trace" >"$dir/c.json"
    cmp "$dir/full.bin" "$dir/x.bin"
    python3 - "$dir/c.json" "$dir/c.trace" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))["experts"]
rows = [r for r in open(sys.argv[2]) if not r.startswith("#")]
uni = [set() for _ in e["layers"]]
for r in rows:
    for l, g in enumerate(r.split("|")):
        uni[l].update(g.split())
slots = e["slots_per_layer"]
triplet = {x["bytes_read"] // x["misses"] for x in e["layers"]}
for l, x in enumerate(e["layers"]):
    n = len(uni[l])
    assert n > slots, (l, n, slots)
    assert x["misses"] == n and x["hits"] == 0, (l, x, n)
    assert x["bytes_read"] == n * min(triplet) and len(triplet) == 1, (l, x, triplet)
    assert x["fetched"] == n - slots // 2, (l, x, n)
    assert x["io_wait_s"] >= 0
print(f"chunk of 40 at {slots} slots/layer ({e['io']}): every layer's {min(len(u) for u in uni)}.."
      f"{max(len(u) for u in uni)} experts read once each, {e['fetched']} of {e['misses']} fetched while computing")
PY
done

# Below the minimum (2 slots per layer = 3.2 MiB here) the run refuses with the minimum named.
if "$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/x.bin" --cache-mib 3 2>"$dir/err"; then
    echo "3 MiB should be below the minimum"; exit 1
fi
grep -q "the minimum is 2" "$dir/err"

# Peak RSS: dense + KV (-c 64: 0.5 MiB) + scratch + budget + 16 MiB documented overhead
# (runtime, tokenizer, chunk scratch, I/O buffers), and far below full residency. Under
# AddressSanitizer its own shadow memory and quarantine add to the process (measured over the
# plain build's peak on the same run: 18.6 MiB on 2026-12-04 at 051ec66, 22.9 MiB after the GEMM
# joined cpu_mm, whose scratch grows and is freed into the quarantine); 24 MiB more is allowed for
# them, and they are left out of both sides of the comparison with full residency.
san_mib=0
grep -qa __asan_init "$bin" && san_mib=24
for io in pread uring "uring --prefetch 2"; do
    "$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/x.bin" --cache-mib 4 --io $io --json >"$dir/r.json"
    rss=$(jget "$dir/r.json" "['peak_rss_mib']")
    bound=$(python3 -c "import json; d=json.load(open('$dir/r.json')); e=d['experts']; print(d['dense_bytes']/2**20 + 0.5 + e['cache_mib'] + e['io_buffer_mib'] + 16 + $san_mib)")
    full_rss=$(jget "$dir/full.json" "['peak_rss_mib']")
    echo "peak RSS ($io, 4 MiB cache): $rss MiB, bound $bound MiB; full residency $full_rss MiB"
    python3 -c "import sys; sys.exit(0 if $rss <= $bound and $rss - $san_mib < ($full_rss - $san_mib) / 4 else 1)" ||
        { echo "RSS over bound"; exit 1; }
done

# Faults: one failed attempt is retried (same logits); a lasting one ends the request cleanly.
for io in pread uring; do
    STRATA_IO_FAULT=5:eio:1 "$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/x.bin" --cache-mib 4 --io $io --json >"$dir/f.json"
    cmp "$dir/full.bin" "$dir/x.bin"
    [ "$(jget "$dir/f.json" "['experts']['retries']")" = 1 ]
    set +e
    STRATA_IO_FAULT=7:short:1000000 "$bin" eval -m "$m" --tokens "$toks" -c 64 --logits-out "$dir/y.bin" --cache-mib 4 --io $io 2>"$dir/err"
    rc=$?
    set -e
    [ $rc -eq 1 ] || { echo "lasting fault: exit $rc, expected 1"; cat "$dir/err"; exit 1; }
    grep -q "failed after 3 tries: short read" "$dir/err"
    [ ! -e "$dir/y.bin" ]
done
echo "faults: retried and reported"

# Trace + sim: LRU replay equals the engine (chunks of 8 tokens need more experts than 5 slots).
"$bin" eval -m "$m" --tokens "$toks" -b 8 -c 64 --logits-out "$dir/x.bin" --cache-mib 8 --cache-policy lru --json \
    --trace-out "$dir/t.trace" >"$dir/s.json"
head -1 "$dir/t.trace" | grep -Eq '^# model=[^ ]+ layers=8 experts=64 topk=2 tokens=40 *$'
[ "$(grep -vc '^#' "$dir/t.trace")" = 40 ]
grep -v '^#' "$dir/t.trace" | head -1 | grep -Eq '^([0-9]+ [0-9]+ \| ){7}[0-9]+ [0-9]+$'
slots=$(jget "$dir/s.json" "['experts']['slots_per_layer']")
engine=$(jget "$dir/s.json" "['experts']['misses']")
sim=$("$bin" sim "$dir/t.trace" --cache-mib 8 -m "$m" | awk '$1=="'"$slots"'" {print $3}')
echo "engine misses $engine, sim LRU misses $sim at $slots slots per layer"
[ "$engine" = "$sim" ]
# LFU (the default), token by token (where it decides differently from LRU): bit-identical
# logits, and the simulator's LFU column equals the engine.
"$bin" eval -m "$m" --tokens "$toks" -b 1 -c 64 --logits-out "$dir/l.bin" --cache-mib 8 --json \
    --trace-out "$dir/l.trace" >"$dir/l.json"
cmp "$dir/full.bin" "$dir/l.bin" || { echo "logits differ with LFU"; exit 1; }
engine=$(jget "$dir/l.json" "['experts']['misses']")
read -r lru sim < <("$bin" sim "$dir/l.trace" --cache-mib 8 -m "$m" | awk '$1=="'"$slots"'" {print $3, $6}')
echo "LFU: engine misses $engine, sim LFU misses $sim (LRU would miss $lru)"
[ "$engine" = "$sim" ] && [ "$lru" != "$sim" ]
# A pinned hot set learned from another prompt's trace (--pin-from): the same logits, the pinned
# experts read at open and hit, and strata sim --pin-from reproduces the engine's misses (LFU, LRU).
toks2=$(awk 'BEGIN{for(i=0;i<40;i++) printf "%s%d", (i?",":""), (i*53+7)%1000}')
"$bin" eval -m "$m" --tokens "$toks2" -b 1 -c 64 --logits-out "$dir/y.bin" --cache-mib 8 --trace-out "$dir/a.trace" >/dev/null
for pol in lfu lru; do
    "$bin" eval -m "$m" --tokens "$toks" -b 1 -c 64 --logits-out "$dir/x.bin" --cache-mib 8 --cache-policy $pol --json \
        --pin-from "$dir/a.trace" >"$dir/pin.json"
    cmp "$dir/full.bin" "$dir/x.bin" || { echo "logits differ with --pin-from ($pol)"; exit 1; }
    engine=$(jget "$dir/pin.json" "['experts']['misses']")
    col=$([ $pol = lru ] && echo 3 || echo 6)
    sim=$("$bin" sim "$dir/l.trace" --cache-mib 8 -m "$m" --pin-from "$dir/a.trace" | awk '$1=="'"$slots"'" {print $'$col'}')
    read -r pinned pin_hits pre < <(python3 -c "import json; e=json.load(open('$dir/pin.json'))['experts']; print(e['pinned'], e['pin_hits'], e['preload_bytes'])")
    echo "--pin-from ($pol): $pinned pinned per layer, $pin_hits hits on them, engine misses $engine, sim $sim"
    [ "$engine" = "$sim" ] && [ "$pinned" -ge 1 ] && [ "$pin_hits" -gt 0 ] && [ "$pre" -gt 0 ]
done
"$bin" sim "$dir/t.trace" --sweep --plot "$dir/p.svg" >"$dir/sweep.txt"
grep -q "Belady" "$dir/sweep.txt" && grep -q "<svg" "$dir/p.svg" && grep -q "polyline" "$dir/p.svg"
"$bin" plan -m "$m" --ram-gib 0.04 --reserve-gib 0 --disk-gbs 1 --ctx 64 --trace "$dir/t.trace" >"$dir/plan.txt"
cat "$dir/plan.txt"
grep -q "dense bytes" "$dir/plan.txt" && grep -q "byte floor" "$dir/plan.txt" && grep -q "overlapped bound" "$dir/plan.txt" && grep -Eq "plan: --cache-mib [0-9]+ " "$dir/plan.txt"
# Two tiers (sim --gpu-slots): over a full host cache the VRAM tier misses what one cache of those
# slots misses and the host none; over a bounded one the host misses at most what VRAM missed.
one=$("$bin" sim "$dir/l.trace" --slots 5 | awk '$1=="5" {print $3, $6}')
read -r vlru vlfu < <("$bin" sim "$dir/l.trace" --gpu-slots 5 | awk '$1=="LRU" {a=$2; h=$5} $1=="LFU" {print a, $2; if (h != 0 || $5 != 0) exit 1}')
echo "two tiers over a full host cache: VRAM LRU/LFU misses $vlru $vlfu, one tier $one"
[ "$vlru $vlfu" = "$one" ]
"$bin" sim "$dir/l.trace" --gpu-slots 4 --slots 8 --pin-from "$dir/a.trace" >"$dir/two.txt"
cat "$dir/two.txt"
awk '$1=="LFU" {exit !($5 > 0 && $5 <= $2)}' "$dir/two.txt"
# plan for the VRAM tier: a split, predictions per --gpu-miss mode, the minimum when it does not fit
"$bin" plan -m "$m" --gpu-mib 1050 --gpu-reserve-mib 1000 --ctx 64 --cache-mib 30 --disk-gbs 1 --trace "$dir/l.trace" >"$dir/gplan.txt"
cat "$dir/gplan.txt"
grep -Eq "plan: --backend cuda --gpu-cache-mib [0-9]+ .* --cache-mib [0-9]+" "$dir/gplan.txt"
for mode in auto copy cpu; do grep -Eq -- "--gpu-miss $mode +[0-9.]+ tok/s predicted" "$dir/gplan.txt"; done
"$bin" plan -m "$m" --gpu-mib 1028 --gpu-reserve-mib 1000 --ctx 64 | grep -q "does not fit: .* the minimum is"
"$bin" plan -m "$m" --gpu-mib 4000 --ctx 64 | grep -q "gpu-cache-mib full"
"$bin" plan -m "$m" --ram-gib 1.2 --ctx 64 | grep -q "plan: --cache-mib full"
"$bin" plan -m "$m" --ram-gib 1 --ctx 64 --disk-gbs 1 | grep -q "does not fit"
echo "t_store: ok"
