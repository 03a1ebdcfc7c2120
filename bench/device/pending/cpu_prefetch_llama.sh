#!/usr/bin/env bash
# The host A/B of 2026-12-07 (second), one call (about 5 minutes), 48-layer qwen3-30b-a3b Q4_K,
# 16 threads, F16 KV: prompts 512 (2 rounds, B and D; V= other variants) and 8,192 (D; V8=), B = 499613f (the AMX fused expert
# kernel and attention), D = 33865db (a prompt's panels claimed guided, the next panel asked for
# into L2; token blocks for the dense products; the AMX mins on the tile unit); llama.cpp's
# prompts 512 and 8,192 on the same file in the same call, one llama-bench each (issue 15's 3x
# goal).
#   here:  build 499613f and 33865db (make build/strata build/membw build/tests/test_gemm) into
#          .deps/ab/b and .deps/ab/d (strip --strip-debug);
#          bash bench/device/deps.sh; bash bench/device/llama_cpu_prebuild.sh
#   there: run(command="bash bench/device/pending/cpu_prefetch_llama.sh", carry=[".deps/ab", ".deps/lib", ".deps/llama-cpu"])
set -u
cd "$(dirname "$0")/../../.."
export WORK=/tmp/w LD_LIBRARY_PATH=$PWD/.deps/lib:$PWD/.deps/llama-cpu/lib
v=${V:-'B:.deps/ab/b D:.deps/ab/d'}
# SHORT=1: prompt 512 alone, one run each (about 2 minutes)
r512=2; [ -n "${SHORT:-}" ] && r512=1
MIN_GBS=${MIN_GBS:-60} SKIP_TESTS=1 REPS=$r512 GEMM_TOKENS= VARIANTS="$v" B=.deps/ab/d PROMPTS=512 \
    LLAMA=.deps/llama-cpu/b/bin/llama-bench LLAMA_PROMPTS=512 LLAMA_REPS=$r512 BUDGET_S=170 OUT=/tmp/o1 \
    bash bench/device/cpu_ab.sh 2>&1 | grep --line-buffered '^\['
[ -n "${SHORT:-}" ] && exit 0
MIN_GBS=${MIN_GBS:-60} SKIP_TESTS=1 REPS=1 GEMM_TOKENS= VARIANTS=${V8:-'D:.deps/ab/d'} B=.deps/ab/d PROMPTS=8192 \
    LLAMA=.deps/llama-cpu/b/bin/llama-bench LLAMA_PROMPTS=8192 LLAMA_REPS=1 BUDGET_S=260 OUT=/tmp/o2 \
    bash bench/device/cpu_ab.sh 2>&1 | grep --line-buffered '^\['
