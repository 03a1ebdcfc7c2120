#!/usr/bin/env bash
# llama.cpp CUDA's llama-bench (sm_90) built on the GPU machine from .deps/llama-src.tar.xz (the
# oracle npm package's bundled source) into a fixed folder, LLAMA_DIR (/tmp/llama-cuda): a call
# chained on the same warm machine finds the build done (cmake then takes seconds), which saves its
# 3-5 minutes. The device scripts run it in the background while they measure strata.
#   bash bench/device/llama_cuda_build.sh LOG [JOBS]     the binary: $LLAMA_DIR/b/bin/llama-bench
# NICE: the compile jobs' niceness (0).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
log=$1 jobs=${2:-$(nproc)} ll=${LLAMA_DIR:-/tmp/llama-cuda}
[ -f "$ll/CMakeLists.txt" ] || { mkdir -p "$ll" && tar -xJf "$root/.deps/llama-src.tar.xz" -C "$ll"; } || exit 1
cmake -S "$ll" -B "$ll/b" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 > "$log" 2>&1 &&
    nice -n "${NICE:-0}" cmake --build "$ll/b" -j "$jobs" --target llama-bench >> "$log" 2>&1
