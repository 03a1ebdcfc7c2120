#!/usr/bin/env bash
# The host call of 2026-12-07 (28th session), about 6 minutes, 48-layer qwen3-30b-a3b Q4_K, 16
# threads, F16 KV. E = HEAD + moe_tok (a decode token's experts in one run).
#  1. decode, 100 tokens after 4, E with STRATA_MOE_TOK=0 (the steps apart, HEAD's path) against E
#     (the one run), interleaved, 3 rounds, with the byte floor (issue 15's 90%);
#  2. prompts 512 and 8,192 of E and llama.cpp's in the same call, one llama-bench each (issue 15's
#     3x goal; the prompt path is HEAD's).
#   here:  make build/strata build/membw; cp both into .deps/ab/e; strip --strip-debug;
#          bash bench/device/deps.sh; bash bench/device/llama_cpu_prebuild.sh
#   there: run(command="bash bench/device/pending/cpu_moetok_llama.sh", carry=[".deps/ab", ".deps/lib", ".deps/llama-cpu"])
set -u
cd "$(dirname "$0")/../../.."
export WORK=/tmp/w LD_LIBRARY_PATH=$PWD/.deps/lib:$PWD/.deps/llama-cpu/lib
MIN_GBS=${MIN_GBS:-60} SKIP_TESTS=1 REPS=${DREPS:-3} GEMM_TOKENS= PROMPTS= DECODE=100 B=.deps/ab/e \
    VARIANTS="M0:.deps/ab/e:STRATA_MOE_TOK=0 M1:.deps/ab/e" BUDGET_S=200 OUT=/tmp/o0 \
    bash bench/device/cpu_ab.sh 2>&1 | grep --line-buffered '^\['
[ -n "${SHORT:-}" ] && exit 0
MIN_GBS=${MIN_GBS:-60} SKIP_TESTS=1 REPS=1 GEMM_TOKENS= VARIANTS='E:.deps/ab/e' B=.deps/ab/e PROMPTS="512 8192" \
    LLAMA=.deps/llama-cpu/b/bin/llama-bench LLAMA_PROMPTS="512 8192" LLAMA_REPS=1 BUDGET_S=330 OUT=/tmp/o1 \
    bash bench/device/cpu_ab.sh 2>&1 | grep --line-buffered '^\['
