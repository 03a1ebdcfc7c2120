#!/usr/bin/env bash
# Issue 15's host decode: the dense arena (landed, STRATA_DENSE_ARENA=0 for the old way) and the
# held-back cpu-5-prefetch-items.diff's switches, in one call on the 16-core host, each decode with
# its layer profile (STRATA_DECODE_PROF=1: where the attention phase's 52-72 GB/s goes).
#   here:  git apply bench/device/pending/cpu-5-prefetch-items.diff && make build/strata build/membw
#          mkdir -p .deps/ab/b .deps/ab/old && cp build/strata build/membw .deps/ab/b/ && strip --strip-debug .deps/ab/b/*
#          printf '#!/bin/sh\nSTRATA_DENSE_ARENA=0 STRATA_DOT_AHEAD=0 exec "$(dirname "$0")/../b/strata" "$@"\n' > .deps/ab/old/strata
#          chmod +x .deps/ab/old/strata; bash bench/device/deps.sh (once: .deps/lib)
#          git apply -R bench/device/pending/cpu-5-prefetch-items.diff
#   there: run(command="bash bench/device/pending/cpu_prefetch_items.sh", carry=[".deps/ab", ".deps/lib"])
# Variants: old (a mapping per tensor, prefetch two groups ahead), the arena alone, the arena with
# the short rows' prefetch 8 KiB ahead, and that with each item's first rows asked for at once.
set -u
cd "$(dirname "$0")/../../.."
export STRATA_DECODE_PROF=1 STRATA_LOG=info
SKIP_TESTS=1 PROMPTS= GEMM_TOKENS= DECODE=${DECODE:-100} REPS=${REPS:-3} DECODE_BW_EACH=1 BUDGET_S=${BUDGET_S:-520} \
    VARIANTS="old:.deps/ab/old arena:.deps/ab/b:STRATA_DOT_AHEAD=0 ahead:.deps/ab/b burst:.deps/ab/b:STRATA_ITEM_BURST=1" \
    bash bench/device/cpu_ab.sh 2>&1 | grep -v '^strata: '
