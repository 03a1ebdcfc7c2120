#!/usr/bin/env bash
# Issue 15's host decode in one call: the dense arena (landed; STRATA_DENSE_ARENA=0 the old way),
# cpu-5-prefetch-items.diff's switches and cpu-6-pool-flags.diff's barrier, each decode with its
# layer profile (STRATA_DECODE_PROF=1: where the attention phase's 52-72 GB/s goes), after the
# pool's cost a run at 16 threads with and without the flags (test_cpu_rows --bench-pool).
#   here:  git apply bench/device/pending/cpu-5-prefetch-items.diff bench/device/pending/cpu-6-pool-flags.diff
#          make build/strata build/membw build/tests/test_cpu_rows
#          mkdir -p .deps/ab/b && cp build/strata build/membw build/tests/test_cpu_rows .deps/ab/b/
#          strip --strip-debug .deps/ab/b/*; bash bench/device/deps.sh (once: .deps/lib)
#          git apply -R bench/device/pending/cpu-5-prefetch-items.diff bench/device/pending/cpu-6-pool-flags.diff
#   there: run(command="bash bench/device/pending/cpu_prefetch_items.sh", carry=[".deps/ab", ".deps/lib"])
# Variants (one binary, each an environment): old (a mapping per tensor, the dots' prefetch two
# groups ahead), arena (landed), ahead (+ short rows' prefetch 8 KiB ahead), burst (+ each item's
# first rows asked for at once), flags (arena + the pool's per-worker end flags).
set -u
cd "$(dirname "$0")/../../.."
B=.deps/ab/b
export LD_LIBRARY_PATH=$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for f in 0 1 0 1; do
    echo "STRATA_POOL_FLAGS=$f: $(STRATA_POOL_FLAGS=$f timeout 60 "$B/test_cpu_rows" --bench-pool 16 | tr '\n' ';')"
done
w=$(mktemp -d)
mk() {  # a variant: NAME and its environment
    mkdir -p "$w/$1"
    printf '#!/bin/sh\n%s exec %s/strata "$@"\n' "$2" "$PWD/$B" > "$w/$1/strata"
    chmod +x "$w/$1/strata"
}
mk old "STRATA_DENSE_ARENA=0 STRATA_DOT_AHEAD=0"
mk arena "STRATA_DOT_AHEAD=0"
mk ahead ""
mk burst "STRATA_ITEM_BURST=1"
mk flags "STRATA_DOT_AHEAD=0 STRATA_POOL_FLAGS=1"
export STRATA_DECODE_PROF=1 STRATA_LOG=info
SKIP_TESTS=1 PROMPTS= GEMM_TOKENS= DECODE=${DECODE:-100} REPS=${REPS:-3} DECODE_BW_EACH=1 BUDGET_S=${BUDGET_S:-520} \
    VARIANTS="old:$w/old arena:$w/arena ahead:$w/ahead burst:$w/burst flags:$w/flags" \
    bash bench/device/cpu_ab.sh 2>&1 | grep -v '^strata: '
