#!/usr/bin/env bash
# Is the CUDA prompt's gap to llama.cpp a first-pass cost? (28th session, about 3 minutes.)
# llama-bench's pp512 runs a warmup prompt first and times warm ones; `strata run` timed its first
# pass. One binary (HEAD + `run --warmup`), 48-layer qwen3-30b-a3b Q4_K, prompt 512 then 128:
#  1. A = no warmup, B = --warmup 1, two rounds (cuda_ab.sh);
#  2. the first pass's kernels (STRATA_CUDA_PROF=1, -n 1), then a warm one's (--warmup 1 adds its
#     launches to the same table: the difference is the first pass's).
#   here:  make CUDA=1 build-cuda/strata; cp into .deps/warm; strip --strip-debug
#   there: run(command="bash bench/device/pending/cuda_warm_prompt.sh", carry=[".deps/warm", ".deps/lib"])
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib CUDA_MODULE_LOADING=EAGER
nvidia-smi --query-gpu=name --format=csv,noheader
b=.deps/warm/strata
A=$b B=$b ARGS_B="--warmup 1" REPS=${REPS:-2} OUT=/tmp/ab WORK=/tmp/ab-Q4_K bash bench/device/cuda_ab.sh 2>&1 | tail -n 8
m=/tmp/ab-Q4_K/q3-30b-Q4_K.gguf
for w in 0 1; do
    echo "-- STRATA_CUDA_PROF=1, --warmup $w, prompt 512, 1 generated"
    STRATA_CUDA_PROF=1 timeout 120 $b run -m $m --prompt-tokens @/tmp/ab-Q4_K/prompt.txt -n 1 --temp 0 -c 1024 -b 512 \
        --backend cuda --warmup $w 2>&1 | grep -E 'cuda profile|prompt:' | head -n 22
done
