#!/usr/bin/env bash
# One device call for the CUDA decode profile and the VRAM expert tier (issues 10 and 11), on the
# qwen3-30b-a3b shape (48 layers, strata synth):
#   1. test_cuda_host and test_cuda (kernels, the backend end to end against the CPU backend);
#   2. every expert in VRAM: prompt / decode speed, then the same run with STRATA_CUDA_PROF=1 (GPU
#      time per launch) and without decode graphs (STRATA_CUDA_GRAPH=0);
#   3. --gpu-cache-mib at each share of the expert bytes in VRAM_SHARES (host cache full): speed,
#      tokens compared with the resident run (the same kernels compute every expert, so they must
#      be identical), per-tier statistics; a profile of the smallest budget;
#   4. a budget below one token's experts per layer, and one beyond the device's memory: one error
#      line each, naming the minimum / the free memory.
# Rows go to bench/results.tsv (copied to $OUT/results.tsv), logs and profiles to $OUT.
#
#   bash bench/device/deps.sh && make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda{,_host}
#   cp build-cuda/strata build-cuda/tests/test_cuda build-cuda/tests/test_cuda_host .deps/bin/
#   run(command="BIN=.deps/bin COMMIT=$(git rev-parse --short HEAD) bash bench/device/cuda_vram.sh",
#       carry=[".deps"], timeout_s=500)
#
# Environment: BIN (binaries, default build-cuda), TYPE (Q4_K), LAYERS (48), PROMPT (512), GEN (128),
# VRAM_SHARES ("50 25", percent of the expert bytes), DISK_SHARE (unset; see below), MISS_MODES ("auto": --gpu-miss values run at each share; MODE+pf adds --prefetch 1), TEST_S (120, 0 skips the tests), GRAPH (1; 0 skips
# the decode-graph run), HOSTROUTE (1; 0 skips the STRATA_HOST_ROUTE=1 run), BUDGET_S
# (420: later phases are skipped past it), BASE_ARGS (more strata run flags for the resident run,
# e.g. "--warmup 1": a warm prompt, as llama-bench times), SKEW (synth --route-skew: 0.5 routes
# like Qwen3-30B-A3B's measured counts, docs/server.md; unset: random routers, every expert about
# as likely), LLAMA_CFGS (llama-bench's splits,
# KEY:FLAGS separated by ';', default "all:;50:-ncmoe 24;25:-ncmoe 36"; issue 11 also quotes
# "cpu:-ncmoe 48;8of48:-ncmoe 40"), VPROF (1; 0 skips the profile of the smallest budget), PIN (0; 1 adds each share's run with --pin-from a trace of
# another prompt), COMMIT.
# llama.cpp CUDA is not built here (5 minutes there); the rows compare with shared/DEVICE.md's
# numbers for this shape: Q4_K all in VRAM 299 / 6,455; -ncmoe 48 35.1 / 184; -ncmoe 36 (25% of the
# experts in VRAM) 49.5 / 241; -ncmoe 24 (50%) 66.7 / 402; Q8_0 279 / 9,080, 24.6 / 194, 31.9 / 205 (8/48).
set -u
cd "$(dirname "$0")/../.."
root=$PWD
out=${OUT:-/tmp/out}; mkdir -p "$out"
exec > >(tee -a "$out/log.txt") 2>&1
export LD_LIBRARY_PATH="$root/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CUDA_MODULE_LOADING=EAGER
t0=$SECONDS
bin=${BIN:-$root/build-cuda}
tbin=${BIN:-$root/build-cuda/tests}
type=${TYPE:-Q4_K} layers=${LAYERS:-48} P=${PROMPT:-512} G=${GEN:-128}
commit=${COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
summary=()
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader
# the rows' machine and the HBM rate of the byte floor: the H200's measured copy (DEVICE.md); an
# H100 SXM's is taken as 3,000 GB/s (3.35 TB/s peak at the H200's 89% copy share; not measured)
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)" in
    *H100*) mach=h100 hbm=3000 ;;
    *) mach=h200 hbm=4260 ;;
esac
late() { [ $((SECONDS - t0)) -gt "${BUDGET_S:-420}" ]; }
# LLAMA=1: llama.cpp CUDA built here from .deps/llama-src.tar.xz (bench/device/deps.sh notes; about 5
# minutes, in the background while the tests and the GPU-only resident runs go; the VRAM tier's runs,
# which compute on the host CPU too, wait for it), then llama-bench on the same
# file: everything in VRAM, and the static splits at the VRAM shares (-ncmoe: layers' experts on the CPU)
if [ "${LLAMA:-0}" = 1 ]; then
    ll=${LLAMA_DIR:-/tmp/llama-cuda}  # llama_cuda_build.sh's folder (a warm machine's build is reused)
    LLAMA_DIR=$ll bash "$root/bench/device/llama_cuda_build.sh" "$out/llama_build.log" 14 &
    llama_pid=$!
fi

if [ "${TEST_S:-120}" != 0 ]; then
    "$tbin/test_cuda_host" > "$out/test_cuda_host.log" 2>&1
    summary+=("test_cuda_host: rc=$? $(tail -n 1 "$out/test_cuda_host.log")")
    tt=$SECONDS
    timeout "${TEST_S:-120}" "$tbin/test_cuda" > "$out/test_cuda.log" 2>&1; rc=$?
    grep -v '^ok' "$out/test_cuda.log" | grep -v '^    ' | head -n 30
    summary+=("test_cuda: rc=$rc, $(grep -c '^ok' "$out/test_cuda.log") ok, $(grep -c '^FAIL' "$out/test_cuda.log") FAIL, $((SECONDS - tt)) s")
    "$tbin/test_cuda" --bench-attn 2>&1 | tee "$out/bench_attn.txt" | tail -n 6
fi

w=${WORK:-/tmp/cv}; mkdir -p "$w"
m="$w/q3-30b-$type${SKEW:+-skew$SKEW}.gguf" name="qwen3-30b-a3b-L$layers-$type${SKEW:+-skew$SKEW}"
python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range($P)))" > "$w/prompt.txt"
ts=$SECONDS
# shellcheck disable=SC2086
"$bin/strata" synth --arch qwen3moe --preset qwen3-30b-a3b --layers "$layers" --type "$type" ${SKEW:+--route-skew $SKEW} \
    -o "$m" --no-progress ||
    { echo "synth failed"; exit 1; }
echo "synth $type: $((SECONDS - ts)) s, $(du -h "$m" | cut -f1)"
# bytes a decoded token reads (every tensor but the embedding, the routed experts' K of X) and the
# routed experts' bytes
read -r bpt exp_bytes < <("$bin/strata" inspect "$m" --json | python3 -c '
import json, sys
j = json.load(sys.stdin); md = j["metadata"]
v = lambda k: md[k]["value"] if isinstance(md[k], dict) else md[k]
arch = v("general.architecture")
X, K = v(arch + ".expert_count"), v(arch + ".expert_used_count")
b = e = 0
for t in j["tensors"]:
    if t["name"] == "token_embd.weight": continue
    if "_exps." in t["name"]: b += t["bytes"] * K / X; e += t["bytes"]
    else: b += t["bytes"]
print(int(b), int(e))')
echo "bytes per token $bpt, expert bytes $exp_bytes"

# the budget errors first (they need only the file): below the minimum, beyond the device
if ! late; then
    "$bin/strata" run -m "$m" -p "hi" -n 2 --backend cuda --gpu-cache-mib 1 > /dev/null 2> "$out/tiny.err"
    summary+=("--gpu-cache-mib 1: rc=$? $(grep -i 'error\|minimum' "$out/tiny.err" | head -n 2 | tr '\n' ' ')")
    # more VRAM than the device has: the pre-flight check refuses before the upload, in one line
    "$bin/strata" run -m "$m" -p "hi" -n 2 --backend cuda --gpu-cache-mib 150000 > /dev/null 2> "$out/huge.err"
    summary+=("--gpu-cache-mib 150000: rc=$? $(grep -i 'error\|free\|vram' "$out/huge.err" | head -n 2 | tr '\n' ' ')")
fi

case $type in Q8_0) lp=9080 ld=279 ;; Q4_K) lp=6455 ld=299 ;; *) lp=0 ld=0 ;; esac

# run TAG ENV FLAGS...: one strata run, its JSON in $w/TAG.json, stderr in $out/TAG.err
run() {
    local tag=$1 envs=$2; shift 2
    env $envs timeout "${RUN_S:-150}" "$bin/strata" run -m "$m" --prompt-tokens "@$w/prompt.txt" -n "$G" --temp 0 \
        --ignore-eos -c 1024 -b "$P" --backend "${BACKEND:-cuda}" --json "$@" > "$w/$tag.json" 2> "$out/$tag.err"
    local rc=$?
    [ $rc -eq 0 ] || { echo "$tag: rc=$rc"; tail -n 3 "$out/$tag.err"; }
    return $rc
}

# fields of a run's JSON: prompt decode load vram_peak same_tokens_as_base tiers...
facts() {
    python3 - "$w/$1.json" "$w/${2:-base}.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); s = r["stats"]
try: same = "same" if json.load(open(sys.argv[2]))["tokens"][:len(r["tokens"])] == r["tokens"] else "DIFFERENT"
except Exception: same = "n/a"
ex = s.get("experts", {}) or {}
def tier(d):
    if not isinstance(d, dict) or not d: return ""
    keys = ("hit_rate", "hits", "misses", "evictions", "pcie_bytes", "copy_wait_s", "bytes_read", "io_wait_s",
            "cpu_experts", "cpu_s", "cpu_gbs", "miss_copied", "pcie_gbs", "split_used", "split_hit_rate", "prefetched",
            "prefetch_used")
    return " ".join(f"{k}={d[k]:.4g}" if isinstance(d.get(k), float) else f"{k}={d.get(k)}" for k in keys if k in d)
print(f'{s["prompt_tok_s"]:.1f} {s["decode_tok_s"]:.2f} {s["load_s"]:.1f} {s.get("vram_peak_mib", 0):.0f} {same}')
print("vram: " + tier(ex)); print("host: " + tier(ex.get("host", {})))
EOF
}

ratio() { python3 -c 'import sys; a, b = map(float, sys.argv[1:3]); print(f"{a / b:.{sys.argv[3]}f}" if b else 0)' "$1" "$2" "$3"; }

row() {  # engine flags prompt decode vs_llama kept note
    local floor
    floor=$(ratio "${HBM_GBS:-$hbm}e9" "$bpt" 1)
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t1.0\t%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M)" "$commit" \
        "$mach" "$name" "$1" "$2" "$3" "$4" "$bpt" "$floor" "$(ratio "$4" "$floor" 3)" "$5" "$6" "$7" |
        tee -a "$root/bench/results.tsv" >> "$out/results.tsv"
}

# shellcheck disable=SC2086
if run base "" ${BASE_ARGS:-}; then
    { read -r p d l v same; read -r t1; read -r t2; } < <(facts base)
    row "strata cuda" "--backend cuda prompt=$P gen=$G ${BASE_ARGS:-}, every expert in VRAM" "$p" "$d" "$(ratio "$d" "$ld" 3)" yes \
        "load ${l}s, VRAM peak $v MiB; prompt vs llama.cpp $(ratio "$p" "$lp" 3) ($lp), decode vs $ld (DEVICE.md, not this run)"
    summary+=("resident: prompt $p decode $d load $l s VRAM $v MiB")
    base_p=$p base_d=$d
fi
if [ "${PROF:-1}" != 0 ] && ! late && run prof "STRATA_CUDA_PROF=1"; then
    { read -r p d l v same; read -r t1; read -r t2; } < <(facts prof)
    summary+=("resident, STRATA_CUDA_PROF=1: prompt $p decode $d ($same tokens)")
    grep '^cuda profile' "$out/prof.err" | head -n 45
fi
if [ "${HOSTROUTE:-1}" != 0 ] && ! late && run hostroute "STRATA_HOST_ROUTE=1"; then
    { read -r p d l v same; read -r t1; read -r t2; } < <(facts hostroute)
    summary+=("resident, STRATA_HOST_ROUTE=1 (the VRAM tier's routing path): prompt $p decode $d ($same tokens)")
fi
if [ "${GRAPH:-1}" != 0 ] && ! late && run graph "STRATA_CUDA_GRAPH=0"; then
    { read -r p d l v same; read -r t1; read -r t2; } < <(facts graph)
    row "strata cuda (STRATA_CUDA_GRAPH=0)" "--backend cuda prompt=$P gen=$G, no decode graphs" "$p" "$d" \
        "$(ratio "$d" "$ld" 3)" no "the same binary and model without decode graphs ($same tokens as with)"
    summary+=("resident, no graphs: prompt $p decode $d ($same tokens)")
fi

declare -A llama_p llama_d llama_f
# llama-bench's splits on the same file (after its build): run before the VRAM tier's rows, so
# those compare with the same run's numbers (they compared with DEVICE.md's otherwise, which on
# 2026-12-07 were 1.4-1.7x slower than the same run's on a skewed file)
llama_benches() {
    [ -n "${llama_pid:-}" ] || return 0
    local tw=$SECONDS lp_ ld_ cfg key extra
    wait "$llama_pid"; echo "llama.cpp build: rc=$? (waited $((SECONDS - tw)) s)"; tail -n 2 "$out/llama_build.log"
    llama_pid=
    local lb="$ll/b/bin/llama-bench"
    IFS=';' read -r -a cfgs <<< "${LLAMA_CFGS:-all:;50:-ncmoe 24;25:-ncmoe 36}"
    for cfg in "${cfgs[@]}"; do
        key=${cfg%%:*} extra=${cfg#*:}
        if "$lb" -m "$m" -ngl 99 $extra -t 16 -p "$P" -n "$G" -r 2 -o json > "$w/llama_$key.json" 2> "$out/llama_$key.err"; then
            read -r lp_ ld_ < <(python3 "$root/bench/device/llama_ts.py" "$w/llama_$key.json")
            llama_p[$key]=$lp_ llama_d[$key]=$ld_ llama_f[$key]=$extra
            row "llama.cpp cuda" "llama-bench -ngl 99 $extra -t 16 p=$P n=$G (same file, same run)" "$lp_" "$ld_" 1 yes \
                "llama.cpp de3ff81 (the oracle npm bundle) built there with GGML_CUDA, sm_90"
            summary+=("llama.cpp ${extra:-all in VRAM}: prompt $lp_ decode $ld_")
        else
            summary+=("llama.cpp $key failed: $(tail -n 1 "$out/llama_$key.err")")
        fi
    done
}
# The VRAM tier computes misses on the host CPU: llama.cpp's build (14 compile jobs) must be done
# before it runs. On 2026-12-07 it was not: the CPU's experts ran at 0.3 GB/s under the build, the
# cost model sent every miss over PCIe, and the 25% row read 29.95 tok/s where the same binary alone
# on that machine kind gives 65.2 (bench/device/logs/cuda-vram-cpu-h100.txt).
if [ -n "${llama_pid:-}" ] && [ -n "${VRAM_SHARES-50 25}" ]; then
    tb=$SECONDS
    while kill -0 "$llama_pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "${LLAMA_DEADLINE_S:-440}" ]; do sleep 2; done
    echo "waited $((SECONDS - tb)) s for llama.cpp's build before the VRAM tier's runs"
    kill -0 "$llama_pid" 2>/dev/null || llama_benches
fi
for share in ${VRAM_SHARES-50 25}; do
    late && { summary+=("VRAM $share%: skipped (time)"); continue; }
    mib=$((exp_bytes * share / 100 / 1048576))
    case "$type:$share" in Q4_K:25) sp=241 sd=49.5 split="-ncmoe 36" ;; Q4_K:50) sp=402 sd=66.7 split="-ncmoe 24" ;;
        Q8_0:*) sp=205 sd=31.9 split="8/48 layers" ;; *) sp=0 sd=0 split="?" ;; esac
    cpu_p=$([ "$type" = Q8_0 ] && echo 194 || echo 184) cpu_src=DEVICE.md
    [ -n "${llama_p[cpu]:-}" ] && cpu_p=${llama_p[cpu]} cpu_src="same run"
    src="DEVICE.md"
    if [ -n "${llama_d[$share]:-}" ]; then sd=${llama_d[$share]} sp=${llama_p[$share]} split=${llama_f[$share]} src="same run"; fi
    for miss in ${MISS_MODES:-auto}; do
    late && { summary+=("VRAM $share% --gpu-miss $miss: skipped (time)"); continue; }
    tag="vram$share-$miss"
    mflags=(--gpu-miss "${miss%+pf}")
    [ "${miss%+pf}" != "$miss" ] && mflags+=(--prefetch 1)   # MODE+pf: with the router lookahead
    if run "$tag" "" --gpu-cache-mib "$mib" "${mflags[@]}"; then
        { read -r p d l v same; read -r t1; read -r t2; } < <(facts "$tag")
        row "strata cuda vram $share% miss=$miss" "--backend cuda --gpu-cache-mib $mib ($share% of the experts) ${mflags[*]} prompt=$P gen=$G" \
            "$p" "$d" "$(ratio "$d" "$sd" 3)" yes \
            "tokens $same as resident; vs llama.cpp split at equal VRAM ($split: $sd / $sp, $src): decode $(ratio "$d" "$sd" 3), prompt vs experts-on-CPU $cpu_p ($cpu_src): $(ratio "$p" "$cpu_p" 2); $t1; $t2"
        summary+=("VRAM $share% ($mib MiB) --gpu-miss $miss: prompt $p decode $d, tokens $same; $t1 | $t2")
        grep -i 'vram experts' "$out/$tag.err" | head -n 3
        # PIN=1: the same budget with a hot set pinned from another prompt's trace (every expert in
        # VRAM, a different prompt, gen 64): tokens must be the resident run's, the speed the row's
        if [ "${PIN:-0}" = 1 ] && ! late; then
            [ -f "$w/other.trace" ] || {
                python3 -c "import random; r=random.Random(11); print(','.join(str(r.randrange(1, 1000)) for _ in range(128)))" > "$w/other.txt"
                timeout "${RUN_S:-150}" "$bin/strata" run -m "$m" --prompt-tokens "@$w/other.txt" -n 64 --temp 0 --ignore-eos \
                    -c 1024 --backend cuda --trace-out "$w/other.trace" > /dev/null 2> "$out/trace.err" ||
                    echo "trace run failed: $(tail -n 1 "$out/trace.err")"
            }
            if [ -f "$w/other.trace" ] && run "$tag-pin" "" --gpu-cache-mib "$mib" "${mflags[@]}" --pin-from "$w/other.trace"; then
                { read -r p2 d2 l v same; read -r t1; read -r t2; } < <(facts "$tag-pin")
                row "strata cuda vram $share% miss=$miss --pin-from" "--gpu-cache-mib $mib ${mflags[*]} --pin-from (another prompt's trace, share 0.25) prompt=$P gen=$G" \
                    "$p2" "$d2" "$(ratio "$d2" "$d" 3)" yes "vs_llama column: against the same run without pins ($d); tokens $same as resident; $t1; $t2"
                summary+=("VRAM $share% --gpu-miss $miss --pin-from: prompt $p2 decode $d2 (without: $d), tokens $same; $t1 | $t2")
                grep -i 'pinned' "$out/$tag-pin.err" | head -n 2
            fi
        fi
    fi
    done
done
# DISK_SHARE=S: a model bigger than the GPU and the host cache together: S% of the experts in VRAM
# and S% in the host cache, the rest read from the file (O_DIRECT) on every host miss; DISK_GEN
# tokens (32) with --gpu-miss copy (tokens must be the resident run's) and auto, against the floor of
# the disk bytes a token reads at the rate the reads ran
if [ -n "${DISK_SHARE:-}" ] && ! late; then
    mib=$((exp_bytes * DISK_SHARE / 100 / 1048576))
    GEN_SAVE=$G; G=${DISK_GEN:-32}
    # a 4-token prompt: the bytes read are then nearly all decode's (the prompt's 4 tokens count too)
    cp "$w/prompt.txt" "$w/prompt.full"; cut -d, -f1-4 "$w/prompt.full" > "$w/prompt.txt"; P_SAVE=$P; P=4
    run disk-base ""   # every expert in VRAM, the same prompt: the tokens to match
    for miss in copy auto; do
        late && break
        if run "disk-$miss" "" --gpu-cache-mib "$mib" --cache-mib "$mib" --gpu-miss "$miss"; then
            { read -r p d l v same; read -r t1; read -r t2; } < <(facts "disk-$miss" disk-base)
            fl=$(python3 - "$w/disk-$miss.json" "$G" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1])); x = r["stats"]["experts"]; h = x.get("host", x)
n = int(sys.argv[2]) + 4
mb = h["bytes_read"] / n / 1e6; gbs = h["bytes_read"] / h["io_wait_s"] / 1e9 if h["io_wait_s"] else 0
print(f"{mb:.0f} MB/token from the file at {gbs:.2f} GB/s: floor {gbs * 1e3 / mb if mb else 0:.2f} tok/s")
EOF2
)
            row "strata cuda vram+host $DISK_SHARE% miss=$miss" "--gpu-cache-mib $mib --cache-mib $mib --gpu-miss $miss gen=$G" \
                "$p" "$d" "" yes "bigger than VRAM + host cache: tokens $same as resident (first $G); $fl; $t1; $t2"
            summary+=("VRAM $DISK_SHARE% + host $DISK_SHARE% --gpu-miss $miss: decode $d, tokens $same; $fl | $t1 | $t2")
        fi
    done
    G=$GEN_SAVE; P=$P_SAVE; cp "$w/prompt.full" "$w/prompt.txt"
fi
last=${VRAM_SHARES-50 25}; last=${last##* }
if [ -n "$last" ] && [ "${VPROF:-1}" != 0 ] && ! late; then
    mib=$((exp_bytes * last / 100 / 1048576))
    GEN_SAVE=$G; G=32
    run vprof "STRATA_CUDA_PROF=1" --gpu-cache-mib "$mib" &&
        grep '^cuda profile' "$out/vprof.err" | head -n 30
    G=$GEN_SAVE
fi
# llama.cpp here if it did not run before the tier (no shares, or its build still going then)
while [ -n "${llama_pid:-}" ] && kill -0 "$llama_pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "${LLAMA_DEADLINE_S:-440}" ]; do
    sleep 2
done
if [ -n "${llama_pid:-}" ] && kill -0 "$llama_pid" 2>/dev/null; then
    summary+=("llama.cpp: its build was not done by ${LLAMA_DEADLINE_S:-440} s; no llama.cpp rows")
    pkill -f "cmake --build $ll/b" 2>/dev/null
    llama_pid=
fi
llama_benches
# the resident row was written before llama.cpp ran (its ratios are DEVICE.md's): the same run's here
if [ -n "${base_d:-}" ] && [ -n "${llama_d[all]:-}" ]; then
    summary+=("resident vs llama.cpp all in VRAM, same run: prompt $(ratio "$base_p" "${llama_p[all]}" 3), decode $(ratio "$base_d" "${llama_d[all]}" 3)")
fi
rm -f "$m"
echo "---- summary ($((SECONDS - t0)) s)"
printf '%s\n' "${summary[@]}"
[ -f "$out/results.tsv" ] && cat "$out/results.tsv"
