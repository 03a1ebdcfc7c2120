#!/usr/bin/env bash
# Why the VRAM tier's CPU misses ran at 0.3 GB/s on an H100 host (29th session; cuda_vram.sh there:
# 131 experts computed on the CPU in 1.12 s, then the cost model sent every miss over PCIe; decode
# 29.95 tok/s at 25% against 58 on an H200 on 12-04): the 25% share with --gpu-miss auto, cpu and
# copy (STRATA_SPLIT_PROF=1: where a layer's time goes), and the CPU backend alone on the same file.
#   run(command="bash bench/device/pending/cuda_vram_cpu.sh", carry=[".deps/bin", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader; nproc; lscpu | grep -E 'Model name|^CPU\(s\)|NUMA node\(s\)'
b=.deps/bin/strata w=/tmp/cv; mkdir -p $w; m=$w/q3-30b-Q4_K.gguf
[ -f $m ] || $b synth --arch qwen3moe --preset qwen3-30b-a3b --layers 48 --type Q4_K -o $m --no-progress
python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(1, 1000)) for _ in range(512)))" > $w/prompt.txt
for mode in cpu auto copy; do
    echo "== --gpu-miss $mode, 25% (3888 MiB)"
    STRATA_SPLIT_PROF=1 timeout 120 $b run -m $m --prompt-tokens @$w/prompt.txt -n 64 --temp 0 --ignore-eos -c 1024 -b 512 \
        --backend cuda --gpu-cache-mib 3888 --gpu-miss $mode > $w/$mode.out 2> $w/$mode.err
    echo "rc=$?"; grep -v '^\s*$' $w/$mode.err | tail -n 28
done
echo "== the CPU backend alone, 16 threads"
timeout 120 $b run -m $m --prompt-tokens @$w/prompt.txt -n 32 --temp 0 --ignore-eos -c 1024 -b 512 --backend cpu -t 16 \
    2>&1 >/dev/null | grep -E 'decode|prompt|tok/s' | head -n 6
