#!/usr/bin/env bash
# The host A/B of 2026-12-07, one call (about 7 minutes), 48-layer qwen3-30b-a3b Q4_K, 16 threads:
#   prompts 512 and 8,192: A = 7607c9e (before the AMX fused expert kernel and the AMX attention),
#     B = 499613f (both), with llama.cpp's prompts 512 and 8,192 on the same file (one run each);
#   decode 100 after 4 tokens: B against C = e6981d4 (decode's weights prefetched into L2, 8 KiB
#     ahead, and the output head on the GEMM's 4-row dot), with the read bandwidth before and after.
#   here:  build 7607c9e, 499613f and e6981d4 (make build/strata build/membw build/tests/test_gemm)
#          into .deps/ab/a, .deps/ab/b, .deps/ab/c (strip --strip-debug); bash bench/device/deps.sh;
#          bash bench/device/llama_cpu_prebuild.sh
#   there: run(command="bash bench/device/pending/cpu_amx_prefetch.sh", carry=[".deps/ab", ".deps/lib", ".deps/llama-cpu"])
set -u
cd "$(dirname "$0")/../../.."
export WORK=/tmp/w LD_LIBRARY_PATH=$PWD/.deps/lib:$PWD/.deps/llama-cpu/lib
# LEAN=1: B alone on the prompts and one decode each (about 4 minutes)
prompt_variants='A:.deps/ab/a B:.deps/ab/b' dreps=2
[ -n "${LEAN:-}" ] && prompt_variants='B:.deps/ab/b' dreps=1
MIN_GBS=${MIN_GBS:-60} SKIP_TESTS=1 REPS=${REPS:-1} GEMM_TOKENS= VARIANTS="$prompt_variants" \
    LLAMA=.deps/llama-cpu/b/bin/llama-bench LLAMA_PROMPTS=512,8192 LLAMA_REPS=1 BUDGET_S=380 OUT=/tmp/o1 \
    bash bench/device/cpu_ab.sh 2>&1 | grep '^\['
SKIP_TESTS=1 REPS=$dreps PROMPTS= GEMM_TOKENS= DECODE=100 A=.deps/ab/b B=.deps/ab/c VARIANTS='B:.deps/ab/b C:.deps/ab/c' \
    BUDGET_S=150 OUT=/tmp/o2 bash bench/device/cpu_ab.sh 2>&1 | grep '^\['
