# Sourced by the pending VRAM-tier scripts (cuda_miss_learn.sh, cuda_split_defer.sh): with $b (the
# strata binary) and $w (the work folder) set, writes the 48-layer qwen3-30b-a3b Q4_K file routed
# like Qwen3's (synth --route-skew 0.5) unless it is there, and a 512-token prompt; sets m (the
# file), exp_mib (its expert MiB, 15552) and removes $w when the script exits (17 GB: the next
# call on the machine needs the disk).
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
