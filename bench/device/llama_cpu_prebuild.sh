#!/usr/bin/env bash
# Here: llama-bench for the GPU machines' host CPUs (Intel Xeon with AVX-512 VNNI/BF16 and AMX),
# built from the oracle's bundled source (.deps/llama-src.tar.xz, deps.sh) with ggml's AVX-512,
# VNNI and AMX int8 kernels on (its paths for the K-quants), into .deps/llama-cpu/b/bin with the
# shared libraries it needs beyond libc in .deps/llama-cpu/lib. Not -march=sapphirerapids: the
# compiler then uses any Sapphire Rapids instruction anywhere, and on one lent host (2026-12-05,
# "Intel(R) Xeon(R) Processor", AMX present) every llama-bench run died of an illegal instruction;
# the base is x86-64-v3 and each extension is the one ggml's option names.
# ggml's AMX kernels are off unless AMX=1: on the H100 machine's host (2026-12-05, kernel
# 6.18.44-fc-v1272-gpu, AMX permission granted) every thread of llama-bench built with them died
# of an invalid opcode at a `tilezero` (ggml configures the tiles once per thread; strata's AMX
# GEMM, which loads its tile configuration at each kernel call, runs there). Without them ggml takes
# its AVX-512 VNNI paths, the ones it uses on any CPU without AMX.
# Building it there took about 4 of a call's 10 minutes, so that strata and llama.cpp did not fit
# one call; carried prebuilt, both engines run on the same host in one call:
#   run(command="LLAMA_DIR=.deps/llama-cpu bash bench/device/cpu_h200.sh",
#       carry=[".deps/include", ".deps/lib", ".deps/llama-cpu"])
# About 5 minutes on 2 cores, 15 MB.
set -euo pipefail
amx=$([ "${AMX:-0}" = 1 ] && echo ON || echo OFF)
cd "$(dirname "$0")/../.."
[ -f .deps/llama-src.tar.xz ] || { echo "llama_cpu_prebuild: run bench/device/deps.sh first" >&2; exit 1; }
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/src" && tar -xJf .deps/llama-src.tar.xz -C "$w/src"
cmake -S "$w/src" -B "$w/b" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DCMAKE_C_FLAGS=-march=x86-64-v3 -DCMAKE_CXX_FLAGS=-march=x86-64-v3 \
    -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON \
    -DGGML_AVX512_VNNI=ON -DGGML_AMX_TILE=$amx -DGGML_AMX_INT8=$amx \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF > "$w/cmake.log"
cmake --build "$w/b" -j "$(nproc)" --target llama-bench > "$w/build.log"
out=.deps/llama-cpu
rm -rf "$out" && mkdir -p "$out/b/bin" "$out/lib"
cp "$w/b/bin/llama-bench" "$out/b/bin/" && strip "$out/b/bin/llama-bench"
ldd "$out/b/bin/llama-bench" | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libpthread|libdl|ld-linux)\./ {print $3}' |
    while read -r so; do cp -L "$so" "$out/lib/"; done
du -sh "$out"
