#!/usr/bin/env bash
# cuda-1-merge-batch64.diff against the tree it applies to, in one call (about 2 minutes):
#   here:  make CUDA=1 build-cuda/strata build-cuda/tests/test_cuda; strip both into .deps/attn2/ (the base);
#          git apply bench/device/pending/cuda-1-merge-batch64.diff; the same build into .deps/attn3/
#   there: run(command="bash bench/device/pending/merge_batch64.sh", carry=[".deps/attn2", ".deps/attn3", ".deps/lib"])
# test_cuda --merge (the new merge's bits against the block-a-token merge), the attention op's
# bench of both builds twice, strata run after prompts of 16,384 and 4,096 (both builds, two
# rounds), then the whole test_cuda of the diff's build.
set -u
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH=$PWD/.deps/lib
out=${OUT:-/tmp/out}; mkdir -p "$out"
timeout 60 .deps/attn3/test_cuda --merge 2>&1 | tail -n 5
for b in attn2 attn3 attn2 attn3; do
    echo "== $b"
    timeout 60 .deps/$b/test_cuda --bench-attn 2>&1 | grep -E 'F32 decode|F16 decode at position 16000|prompt of|decode at position 16000' | head -n 9
done
for r in 1 2; do for b in attn2 attn3; do
    echo "== $b"
    REPS=1 MERGES=a PROMPTS="16384 4096" BIN=.deps/$b bash bench/device/cuda_attn_prof.sh run
done; done
timeout 100 .deps/attn3/test_cuda > "$out/test_cuda.log" 2>&1
echo "test_cuda (attn3) rc=$? $(grep -c '^ok' "$out/test_cuda.log") ok; $(tail -n 1 "$out/test_cuda.log")"
