#!/usr/bin/env bash
# Expert store under a memory cgroup (v1, root): a qwen3-30b-a3b-shaped model with 6 layers,
# limits of 50% and 25% of the file size (memory.limit_in_bytes counts the page cache).
# Per limit, in one run: (a) strata bounded with --mem-mib LIMIT (the expert cache is what the
# engine derives), io_uring + O_DIRECT; (a') the same with --cache-mib from the formula below;
# (b) strata with the minimum cache, pread through the OS page cache ("trust the OS");
# (c) llama.cpp (node-llama-cpp, mmap, CPU). Decode tok/s, bytes read per token, hit rate, the
# byte floor (resident bytes / memory GB/s + bytes read / disk GB/s) and the ratios; one row per
# configuration appended to bench/results.tsv (the median of REPS runs), kept=yes for the fastest
# of each limit.
# Bytes read per token: what the process read from the disk during decode (/proc/PID/io
# read_bytes, sampled every 0.2 s, over the decode window; the same measure for all three).
# vs_floor = tok/s / floor tok/s (1 = at the floor), vs_llama = tok/s / llama.cpp tok/s.
# Use Q8_0 for the llama.cpp leg on x86: llama.cpp repacks Q4_K into anonymous memory on AVX2 /
# AVX-512 (RSS ~2x the file), which no cgroup limit below the file size survives.
# Env: MODEL (default /tmp/q30b6_q8.gguf), TYPE (for synthesising MODEL when absent: Q8_0),
# N (strata decode tokens, 16), LLAMA_N (8), REPS (runs per configuration, interleaved; the row
# is the median run, 1), LIMITS ("50 25"), SKIP_LLAMA, LLAMA_TIMEOUT (900 s), PREFETCH (N: one more
# strata configuration, the cache-in-limit one with --prefetch N), CACHES ("MiB ...": one more
# strata configuration per size, --cache-mib MiB with io_uring, for a sweep under the limit),
# ENV_B ("VAR=VALUE ...": the mem-bound configuration once more with these in its environment, an
# A/B of an engine switch in the same interleaved run),
# MEM_GBS (default: build/membw 2, else 22), STRATA (the binary, build/strata; a copy keeps a
# rebuild during the run out of it), QUIET_WAIT, ORACLE_NODE_MODULES.
set -eu
cd "$(dirname "$0")/.."
bin=${STRATA:-$PWD/build/strata}
model=${MODEL:-/tmp/q30b6_q8.gguf}
n=${N:-16}; llama_n=${LLAMA_N:-8}; reps=${REPS:-1}; llama_timeout=${LLAMA_TIMEOUT:-900}
export ORACLE_NODE_MODULES=${ORACLE_NODE_MODULES:-/tmp/oracle/node_modules}
[ -f "$model" ] || "$bin" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 6 --type "${TYPE:-Q8_0}" -o "$model" --no-progress
cg=/sys/fs/cgroup/memory/strata_bench
mkdir -p "$cg"
size=$(stat -c %s "$model")
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src Makefile || echo "+dirty")
machine="$(nproc)c-$(awk '/MemTotal/{printf "%.0fG", $2/1048576}' /proc/meminfo)-$(grep -m1 -o 'avx512f' /proc/cpuinfo || echo avx2)"
results=bench/results.tsv
[ -f "$results" ] || printf 'date\tcommit\tmachine\tmodel\tengine\tflags\tprompt_tok_s\tdecode_tok_s\thit_rate\tbytes_per_token\tfloor_tok_s\tvs_floor\tvs_llama\tkept\tnote\n' >"$results"
out=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'rm -rf "$out"; rmdir "$cg" 2>/dev/null || true' EXIT

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

busy() { local c a b d e f g h i; read -r c a b d e f g h i _ </proc/stat; echo $((a + b + d + g + h + i)); }
# Waits (at most QUIET_WAIT s, 120) until the other processes use under 0.2 cores over 2 s.
wait_quiet() {
    local t=0 b0 b1 hz; hz=$(getconf CLK_TCK)
    while [ $t -lt "${QUIET_WAIT:-120}" ]; do
        b0=$(busy); sleep 2; b1=$(busy); t=$((t + 2))
        [ $(( (b1 - b0) * 10 )) -le $((2 * hz * 2)) ] && return 0
    done
    echo "CPU still busy after ${QUIET_WAIT:-120} s; measuring anyway"
}

# run_in_cg STDOUT STDERR SAMPLES TIMEOUT_S cmd...: runs cmd in the cgroup (peak usage reset),
# samples "time read_bytes VmHWM_kB stdout_written cpu_ticks" every 0.2 s until it exits and
# writes "busy_ticks_before busy_ticks_after start end" of the whole machine to SAMPLES.cpu (the
# other processes' CPU use during the run); returns its status.
run_in_cg() {
    local o=$1 e=$2 s=$3 tmo=$4; shift 4
    wait_quiet
    echo 0 >"$cg/memory.max_usage_in_bytes"
    : >"$s"
    local b0 ts; b0=$(busy); ts=$EPOCHREALTIME
    bash -c 'echo $$ >'"$cg"'/cgroup.procs && exec "$@"' _ "$@" >"$o" 2>"$e" &
    local pid=$! t0=${EPOCHREALTIME/./} k v rb hwm st killed=
    while kill -0 "$pid" 2>/dev/null; do
        rb=; hwm=; st=()
        { while read -r k v; do [ "$k" = read_bytes: ] && rb=$v; done </proc/$pid/io; } 2>/dev/null || true
        { while read -r k v _; do [ "$k" = VmHWM: ] && hwm=$v; done </proc/$pid/status; } 2>/dev/null || true
        { read -r -a st </proc/$pid/stat; } 2>/dev/null || true
        [ -n "$rb" ] && [ ${#st[@]} -gt 14 ] &&
            echo "$EPOCHREALTIME $rb ${hwm:-0} $([ -s "$o" ] && echo 1 || echo 0) $((st[13] + st[14]))" >>"$s"
        if [ -z "$killed" ] && [ $(( (${EPOCHREALTIME/./} - t0) / 1000000 )) -ge "$tmo" ]; then
            kill "$pid"; killed=1; echo "timed out after ${tmo}s" >>"$e"
        fi
        sleep 0.2
    done
    echo "$EPOCHREALTIME - - dead -" >>"$s"
    echo "$b0 $(busy) $ts $EPOCHREALTIME" >"$s.cpu"
    wait "$pid"
}

# Disk: O_DIRECT sequential 1 MiB reads from the middle of the model. Memory: the best of 3
# runs of build/membw with 2 threads. Both on a quiet machine.
wait_quiet
drop
disk_gbs=$(dd if="$model" of=/dev/null bs=1M count=512 skip=$((size / 2097152)) iflag=direct 2>&1 |
           awk '/copied/ {print $(NF-1) * ($NF ~ /GB/ ? 1 : 0.001)}')
if [ -n "${MEM_GBS:-}" ]; then mem_gbs=$MEM_GBS; mem_src=given
elif [ -x build/membw ]; then
    mem_gbs=$(for i in 1 2 3; do build/membw 2; done | awk -F= '/threads=2 / && $3 + 0 > m {m = $3 + 0} END {print m}')
    mem_src="build/membw 2, best of 3"
else mem_gbs=22; mem_src="assumed"; fi
echo "disk ${disk_gbs} GB/s (O_DIRECT, 1 MiB), memory ${mem_gbs} GB/s (${mem_src})"
# From the model: its name, bytes read per token from RAM (dense weights but the embedding table,
# of which one row is read, plus the k active experts per layer) and the minimum cache (k slots
# per layer; uniform slots of the largest size below 16 per layer), in MiB.
read -r name resident_tok min_cache < <("$bin" inspect "$model" --json | python3 -c '
import json, math, os, sys
d = json.load(sys.stdin); tot = d["totals"]; md = d["metadata"]
arch = md["general.architecture"]; k = md[arch + ".expert_used_count"]
trip = tot["expert_triplets"]
types = {t for l in trip for t in l["types"].split("/")}
words = str(md.get("general.name", "")).split()
base = words[1] if len(words) > 1 and words[0] == "strata-synth" else os.path.basename(d["path"]).rsplit(".", 1)[0]
name = "%s-L%d-%s" % (base, md[arch + ".block_count"], "/".join(sorted(types)))
embd = sum(t["bytes"] for t in d["tensors"] if t["name"] == "token_embd.weight")
resident = tot["dense_bytes"] - embd + k * sum(l["triplet_bytes"] for l in trip)
min_cache = math.ceil(k * len(trip) * max(l["slot_bytes"] for l in trip) / 2**20) + 1
print(name, resident, min_cache)')
echo "model ${name}: ${size} bytes, read from RAM per token ${resident_tok}, minimum cache ${min_cache} MiB"
dense=$("$bin" inspect "$model" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["totals"]["dense_bytes"])')

# row ENGINE PCT LIMIT FLAGS: reads $out/o (JSON), $out/e, $out/s and the exit status $rc,
# appends one pending row to $out/rows_PCT and prints a line.
row() {
    python3 - "$@" "$out" "$rc" "$disk_gbs" "$mem_gbs" "$resident_tok" "$commit" "$machine" "$name" "$n" "$llama_n" "$(cat "$cg/memory.max_usage_in_bytes")" <<'PY'
import json, os, sys, datetime
engine, pct, lim, flags, out, rc, disk, mem, resident, commit, machine, name, n, llama_n, cg_peak = sys.argv[1:]
disk, mem, resident, rc, lim = float(disk), float(mem), float(resident), int(rc), int(lim)
err = open(out + "/e").read().strip().splitlines()
samples = [l.split() for l in open(out + "/s").read().splitlines()]
def fail(why):
    print("%-9s %-36s failed at %s%%: %s" % (engine, flags, pct, why))
    return ["", "", "", "", "", "limit %s%% (%.0f MiB): failed: %s" % (pct, lim / 2**20, why)]
def decode_disk_bytes(decode_s):
    # The decode window ends when the result appeared (llama.cpp writes it at once) or the process
    # exited (strata's stdout is flushed at exit): between t_lo and t_hi. The window
    # [t_hi - decode_s, t_lo] lies inside decode; its read rate x decode_s = bytes read in decode.
    live = [(float(t), int(b), w == "1") for t, b, _, w, _ in samples if b != "-"]
    end = next((i for i, x in enumerate(live) if x[2]), None)
    if end:
        t_lo, t_hi = live[end - 1][0], live[end][0]
    else:
        t_lo, t_hi = live[-1][0], float(samples[-1][0])
    a = t_hi - decode_s
    if t_lo - a < 1.0 or a < live[0][0]:
        return None
    def at(t):
        for (t0, b0, _), (t1, b1, _) in zip(live, live[1:]):
            if t0 <= t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
        return live[-1][1]
    return (at(t_lo) - at(a)) / (t_lo - a) * decode_s
hwm = max([int(x[2]) for x in samples if x[2] != "-"] or [0]) / 1024
b0, b1, t0, t1 = map(float, open(out + "/s.cpu").read().split())
own = max([int(x[4]) for x in samples if x[4] != "-"] or [0])
others = (b1 - b0 - own) / os.sysconf("SC_CLK_TCK") / (t1 - t0)
common = "limit %s%% (%.0f MiB), cgroup peak %.0f MiB, peak RSS %.0f MiB, other processes %.2f cores" % (
    pct, lim / 2**20, int(cg_peak) / 2**20, hwm, max(others, 0))
if engine == "strata":
    try:
        d = json.load(open(out + "/o"))
    except Exception:
        d = None
    if rc != 0 or d is None:
        cols = fail("rc %d%s: %s" % (rc, " (OOM-killed)" if rc == 137 else "", err[-1] if err else ""))
        tps = 0
    else:
        st = d["stats"]; e = st["experts"]
        tps, decode_s, ndec = st["decode_tok_s"], st["decode_s"], st["generated_tokens"] - 1
        req_tok = e["bytes_read"] / st["generated_tokens"]     # 1 prompt eval + ndec decode evals
        disk_b = decode_disk_bytes(decode_s)
        b_tok = disk_b / ndec if disk_b is not None else req_tok
        floor = 1 / (resident / (mem * 1e9) + b_tok / (disk * 1e9))
        note = "%s; disk read %.1f MB/token in decode, strata requested %.1f MB/token (all evals), hit %.1f%%, cache %.0f MiB %s, io_wait %.2fs" % (
            common, b_tok / 1e6, req_tok / 1e6, 100 * e["hit_rate"], e["cache_mib"], e["io"], e["io_wait_s"])
        cols = ["%.3f" % tps, "%.3f" % e["hit_rate"], "%d" % b_tok, "%.2f" % floor, "%.2f" % (tps / floor), note]
        print("%-9s %-36s %6.2f tok/s  floor %6.2f  %.2fx floor time  %s" % (engine, flags, tps, floor, floor / tps if tps else 0, note))
    flags += " -t 2 -c 256 prompt=1 gen=%s" % n
else:
    try:
        d = json.loads(open(out + "/o").read().strip().splitlines()[-1])
    except Exception:
        d = None
    if rc != 0 or d is None:
        why = "rc %d%s: %s" % (rc, " (OOM-killed)" if rc == 137 else "", err[-1] if err else "")
        cols = fail(why)
        tps = 0
    else:
        tps = d["n"] / d["decode_s"]
        disk_b = decode_disk_bytes(d["decode_s"])
        b_tok = disk_b / d["n"] if disk_b is not None else 0
        floor = 1 / (resident / (mem * 1e9) + b_tok / (disk * 1e9))
        note = "%s; disk read %.1f MB/token in decode, prompt eval %.1f s" % (common, b_tok / 1e6, d["prompt_s"])
        cols = ["%.3f" % tps, "", "%d" % b_tok, "%.2f" % floor, "%.2f" % (tps / floor), note]
        print("%-9s %-36s %6.2f tok/s  floor %6.2f  %.2fx floor time  %s" % (engine, flags, tps, floor, floor / tps if tps else 0, note))
    flags += " -t 2 -c 256 prompt=1 gen=%s" % llama_n
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M")
with open("%s/rows_%s" % (out, pct), "a") as f:
    f.write("\t".join([date, commit, machine, name, engine, flags, ""] + cols[:5] + ["@VS_LLAMA@", "@KEPT@", cols[5]]) + "\n")
PY
}

# One row per configuration of limit PCT: the run of median decode speed (REPS runs, interleaved),
# with vs_llama and kept (the fastest configuration of the limit) filled in.
finish() {
    python3 - "$out/rows_$1" "$results" <<'PY'
import sys
runs = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
tps = lambda r: float(r[7]) if r[7] else 0.0
configs = {}
for r in runs:
    configs.setdefault((r[4], r[5]), []).append(r)
rows = []
for rs in configs.values():
    s = sorted(rs, key=tps)
    r = s[(len(s) - 1) // 2]
    if len(s) > 1:
        r[14] += "; median of %d runs (%s tok/s)" % (len(s), ", ".join("%.2f" % tps(x) for x in rs))
    rows.append(r)
llama = next((tps(r) for r in rows if r[4] == "llama.cpp"), 0.0)
best = max(range(len(rows)), key=lambda i: tps(rows[i]))
with open(sys.argv[2], "a") as f:
    for i, r in enumerate(rows):
        r[12] = ("1" if r[4] == "llama.cpp" else "%.2f" % (tps(r) / llama)) if llama > 0 and tps(r) > 0 else "n/a"
        r[13] = "yes" if i == best and tps(r) > 0 else "no"
        f.write("\t".join(r) + "\n")
        print("%-9s %-60s %8.3f tok/s  vs llama.cpp %s  kept %s" % (r[4], r[5], tps(r), r[12], r[13]))
PY
}

strata_row() {  # limit_pct limit_bytes label flags...
    local pct=$1 lim=$2 label=$3; shift 3
    drop
    echo "$lim" >"$cg/memory.limit_in_bytes"
    rc=0
    run_in_cg "$out/o" "$out/e" "$out/s" 600 env ${STRATA_ENV:-} "$bin" run -m "$model" --prompt-tokens 1 -n $((n + 1)) --temp 0 -t 2 -c 256 -b 16 --ignore-eos --json "$@" || rc=$?
    row strata "$pct" "$lim" "$label $*"
}

llama_row() {  # limit_pct limit_bytes
    local pct=$1 lim=$2
    drop
    echo "$lim" >"$cg/memory.limit_in_bytes"
    rc=0
    run_in_cg "$out/o" "$out/e" "$out/s" "$llama_timeout" node bench/store_llama.mjs --model "$model" --tokens 1 -n "$llama_n" --threads 2 --ctx 256 || rc=$?
    row llama.cpp "$pct" "$lim" "node-llama-cpp 3.22.1 mmap"
}

for pct in ${LIMITS:-50 25}; do
    lim=$((size * pct / 100))
    # Budget: the limit minus dense weights, KV, scratch, bounce buffers and ~100 MiB of runtime.
    cache=$(( (lim - dense) / 1048576 - 130 ))
    [ $cache -ge "$min_cache" ] || cache=$min_cache
    for rep in $(seq "$reps"); do
        # the whole process bounded by the limit itself (--mem-mib: strata derives its expert cache)
        strata_row $pct $lim "mem-bound" --mem-mib $((lim / 1048576)) --io uring
        strata_row $pct $lim "cache-in-limit" --cache-mib $cache --io uring
        strata_row $pct $lim "page-cache" --cache-mib "$min_cache" --io pread
        [ -z "${PREFETCH:-}" ] || strata_row $pct $lim "cache-in-limit" --cache-mib $cache --io uring --prefetch "$PREFETCH"
        for c in ${CACHES:-}; do strata_row $pct $lim "cache-sweep" --cache-mib "$c" --io uring; done
        [ -z "${ENV_B:-}" ] || STRATA_ENV="$ENV_B" strata_row $pct $lim "mem-bound $ENV_B" --mem-mib $((lim / 1048576)) --io uring
        [ -n "${SKIP_LLAMA:-}" ] || llama_row $pct $lim
    done
    finish $pct
done
echo "rows appended to $results"
