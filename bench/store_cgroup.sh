#!/usr/bin/env bash
# Expert store under a memory cgroup (v1, root): a qwen3-30b-a3b-shaped Q4_K model with 6 layers
# (2.46 GB), limits of 50% and 25% of the file size (memory.limit_in_bytes counts the page cache).
# Per limit, in one run: (a) strata, expert cache inside the limit, io_uring + O_DIRECT;
# (b) strata with the minimum cache, pread through the OS page cache ("trust the OS");
# (c) llama.cpp (node-llama-cpp, mmap, CPU). Decode tok/s, bytes read per token, hit rate, the
# byte floor (miss bytes / disk GB/s + resident bytes / memory GB/s) and the ratios; one row per
# configuration appended to bench/results.tsv.
# Env: MODEL (default /tmp/q30b6_q4k.gguf, synthesised if absent), N (decode tokens, 16),
# LLAMA_N (8), LIMITS ("50 25"), SKIP_LLAMA, MEM_GBS (22: this machine, 2 threads, DESIGN.md), ORACLE_NODE_MODULES.
set -eu
cd "$(dirname "$0")/.."
bin=$PWD/build/strata
model=${MODEL:-/tmp/q30b6_q4k.gguf}
n=${N:-16}; llama_n=${LLAMA_N:-8}; mem_gbs=${MEM_GBS:-22}
export ORACLE_NODE_MODULES=${ORACLE_NODE_MODULES:-/tmp/oracle/node_modules}
[ -f "$model" ] || "$bin" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 6 --type Q4_K -o "$model" --no-progress
cg=/sys/fs/cgroup/memory/strata_bench
mkdir -p "$cg"
size=$(stat -c %s "$model")
commit=$(git rev-parse --short HEAD)
machine="$(nproc)cpu-$(awk '/MemTotal/ {printf "%.0fG", $2/1048576}' /proc/meminfo)"
results=bench/results.tsv
[ -f "$results" ] || printf 'date\tcommit\tmachine\tmodel\tengine\tflags\tprompt_tok_s\tdecode_tok_s\thit_rate\tbytes_per_token\tfloor_tok_s\tvs_floor\tvs_llama\tkept\tnote\n' >"$results"
out=$(mktemp -d /tmp/strata-bench.XXXXXX)
trap 'rm -rf "$out"; rmdir "$cg" 2>/dev/null || true' EXIT

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
incg() { bash -c 'echo $$ >'"$cg"'/cgroup.procs && exec "$@"' _ "$@"; }

# Disk: O_DIRECT sequential 1 MiB reads from the middle of the model.
drop
disk_gbs=$(dd if="$model" of=/dev/null bs=1M count=512 skip=$((size / 2097152)) iflag=direct 2>&1 |
           awk '/copied/ {print $(NF-1) * ($NF ~ /GB/ ? 1 : 0.001)}')
echo "disk ${disk_gbs} GB/s (O_DIRECT, 1 MiB), memory ${mem_gbs} GB/s (assumed)"
# Resident bytes per decoded token: dense weights except the embedding table (one row is read)
# plus the active experts.
read -r dense_tok active_tok < <(python3 - "$bin" "$model" <<'PY'
import json, subprocess, sys
d = json.loads(subprocess.run([sys.argv[1], "inspect", sys.argv[2], "--json"], capture_output=True, text=True).stdout)
print(d["totals"]["dense_bytes"], d["totals"]["expert_bytes"])
PY
)
echo "inspect: dense ${dense_tok} expert ${active_tok}"

strata_row() {  # limit_pct limit_bytes label flags...
    local pct=$1 lim=$2 label=$3; shift 3
    drop
    echo "$lim" >"$cg/memory.limit_in_bytes"
    if ! incg "$bin" run -m "$model" --prompt-tokens 1 -n $((n + 1)) --temp 0 -t 2 -c 256 -b 16 --ignore-eos --json "$@" >"$out/s.json" 2>"$out/s.err"; then
        echo "strata $label failed at ${pct}%: $(tail -1 "$out/s.err")"
        printf '%s\t%s\t%s\tqwen3-30b-a3b-L6-Q4_K\tstrata\t%s\t\t\t\t\t\t\t\tno\t%s\n' "$(date -u +%F)" "$commit" "$machine" "$label $*" "limit ${pct}%: failed: $(tail -1 "$out/s.err")" >>"$results"
        return
    fi
    python3 - "$out/s.json" "$pct" "$label $*" "$disk_gbs" "$mem_gbs" "$commit" "$machine" "$results" "$lim" <<'PY'
import json, sys, datetime
d = json.load(open(sys.argv[1])); st = d["stats"]; e = st["experts"]
pct, flags, disk, mem, commit, machine, results, lim = sys.argv[2:]
disk, mem = float(disk), float(mem)
tok = st["generated_tokens"]            # 1 prompt eval + (tok-1) decode evals
evals = tok                              # prompt of 1 token: every eval is one token
bytes_tok = e["bytes_read"] / evals
# active experts per token: 6 layers x 8 x triplet; resident dense read per token ~ dense - embedding
hp_active = 6 * 8 * 2654208
dense_tok = st["dense_bytes"] - 151936 * 2048 * 144 / 256
floor_s = (dense_tok + hp_active) / (mem * 1e9) + bytes_tok / (disk * 1e9)
floor = 1 / floor_s
tps = st["decode_tok_s"]
note = "limit %s%% (%.0f MiB): %.1f MB read/token, hit %.1f%%, cache %.0f MiB %s, io_wait %.2fs, peak RSS %.0f MiB" % (
    pct, int(lim) / 2**20, bytes_tok / 1e6, 100 * e["hit_rate"], e["cache_mib"], e["io"], e["io_wait_s"], st["peak_rss_mib"])
print("strata %-40s %6.2f tok/s  floor %6.2f  ratio %.2f  %s" % (flags, tps, floor, floor / tps if tps else 0, note))
with open(results, "a") as f:
    f.write("\t".join([datetime.date.today().isoformat(), commit, machine, "qwen3-30b-a3b-L6-Q4_K", "strata",
                       flags + " -t 2 -c 256 prompt=1 gen=%d" % (tok - 1), "", "%.3f" % tps, "%.3f" % e["hit_rate"],
                       "%d" % bytes_tok, "%.2f" % floor, "%.2f" % (floor / tps if tps else 0), "", "", note]) + "\n")
open(sys.argv[1] + ".tps", "w").write(str(tps))
PY
}

llama_row() {  # limit_pct limit_bytes
    local pct=$1 lim=$2
    drop
    echo "$lim" >"$cg/memory.limit_in_bytes"
    local rc=0
    timeout 900 bash -c 'echo $$ >'"$cg"'/cgroup.procs && exec node bench/store_llama.mjs --model "$0" --tokens 1 -n "$1" --threads 2 --ctx 256' \
        "$model" "$llama_n" >"$out/l.json" 2>"$out/l.err" || rc=$?
    local tps=0 note
    if [ $rc -eq 0 ]; then
        tps=$(python3 -c "import json; d=json.load(open('$out/l.json')); print(d['n']/d['decode_s'])")
        note="limit ${pct}%: llama.cpp mmap, ${llama_n} decode tokens"
    else
        note="limit ${pct}%: llama.cpp failed or timed out (rc $rc): $(tail -1 "$out/l.err")"
    fi
    echo "llama.cpp  ${tps} tok/s  ($note)"
    printf '%s\t%s\t%s\tqwen3-30b-a3b-L6-Q4_K\tllama.cpp\tnode-llama-cpp 3.22.1 -t 2 mmap\t\t%.3f\t\t\t\t\t\t\t%s\n' \
        "$(date -u +%F)" "$commit" "$machine" "$tps" "$note" >>"$results"
    echo "$tps" >"$out/llama_$pct.tps"
}

for pct in ${LIMITS:-50 25}; do
    lim=$((size * pct / 100))
    # Budget: the limit minus dense weights, KV, scratch, bounce buffers and ~100 MiB of runtime.
    cache=$(( (lim - dense_tok) / 1048576 - 130 ))
    [ $cache -ge 130 ] || cache=130   # the minimum: 8 slots per layer (122 MiB)
    strata_row $pct $lim "cache-in-limit" --cache-mib $cache --io uring
    strata_row $pct $lim "page-cache" --cache-mib 130 --io pread
    [ -n "${SKIP_LLAMA:-}" ] || llama_row $pct $lim
done
echo "rows appended to $results"
