# Sourced by the pending VRAM-tier scripts (cuda_miss_learn.sh, cuda_split_defer.sh,
# cuda_split_warm.sh): with $b (the strata binary) and $w (the work folder) set, writes the 48-layer
# qwen3-30b-a3b Q4_K file routed like Qwen3's (synth --route-skew 0.5) unless it is there, and a
# 512-token prompt; sets m (the file), exp_mib (its expert MiB, 15552) and removes $w when the
# script exits (17 GB: the next call on the machine needs the disk); prints the GPU and the host's
# read rate. Then:
#   host_read                 the host's read rate at 16 threads (membw beside $b)
#   each_run "V1 V2 .." FN    for each share of $SHARES (50 25), round of $REPS (2) and variant,
#                             FN SHARE MIB ROUND VARIANT, until $BUDGET_S (250) seconds are spent
#   tier_run OUT [ARGS]       strata run of the prompt, 128 decoded, --json into OUT.json, stderr
#                             into OUT.err, with ARGS (the budget and miss mode) added
host_read() { [ -x "$(dirname "$b")/membw" ] && "$(dirname "$b")/membw" 16 | grep -o 'threads=16 .*' | head -n 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p "$w"
trap 'rm -rf "$w"' EXIT
m="$w/q3-30b-Q4_K.gguf"
[ -f "$m" ] || "$b" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 48 --type Q4_K --route-skew 0.5 -o "$m" --no-progress ||
    { echo "synth failed"; exit 1; }
exp_mib=$("$b" inspect "$m" --json | python3 -c '
import json, sys
print(int(sum(t["bytes"] for t in json.load(sys.stdin)["tensors"] if "_exps." in t["name"]) / 1048576))')
echo "expert MiB $exp_mib (15552 expected)"
python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range(512)))" > "$w/prompt.txt"
echo "host read: $(host_read)"
each_run() {
    local t0=$SECONDS share mib i v
    for share in ${SHARES:-50 25}; do
        mib=$((exp_mib * share / 100))
        echo "== $share% ($mib MiB)"
        for i in $(seq "${REPS:-2}"); do
            for v in $1; do
                [ $((SECONDS - t0)) -gt "${BUDGET_S:-250}" ] && { echo "budget spent: $share% round $i $v skipped"; continue; }
                "$2" "$share" "$mib" "$i" "$v"
            done
        done
    done
}
tier_run() {
    local out=$1
    shift
    timeout 150 "$b" run -m "$m" --prompt-tokens "@$w/prompt.txt" -n 128 --temp 0 --ignore-eos -c 1024 -b 512 \
        --backend cuda --json --warmup 1 "$@" > "$out.json" 2> "$out.err" || { echo "run $out failed"; tail -n 3 "$out.err"; }
}
