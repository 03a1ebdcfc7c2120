#!/usr/bin/env bash
# k_attn_mma against llama.cpp (29th session): compute-sanitizer memcheck of test_cuda's attention
# cases, then cuda_check.sh's parity phase (every model of cuda_parity_models.txt: logits,
# greedy, chunks of 1/7/48 and the 1,100-position prompts bit for bit), results to $OUT.
#   here:  bash bench/device/cuda_parity.sh prep /tmp/cpar .deps/cpar; strata and test_cuda of
#          build-cuda into .deps/cpar/bin (strip), .deps/lib's files into .deps/cpar/lib
#   there: run(command="bash bench/device/pending/cuda_attn_mma_parity.sh", carry=[".deps/cpar"])
#   here:  tar xJf parity.tar.xz; bash bench/device/cuda_parity.sh compare /tmp/cpar <dir>/p
set -u
cd "$(dirname "$0")/../../.."
d=.deps/cpar
export LD_LIBRARY_PATH=$PWD/$d/lib CUDA_MODULE_LOADING=EAGER
if [ -z "${NO_MEMCHECK:-}" ] && command -v compute-sanitizer > /dev/null; then
    timeout 150 compute-sanitizer --tool memcheck --print-limit 20 "$d/bin/test_cuda" --attention > /tmp/memcheck.log 2>&1
    echo "memcheck (test_cuda --attention): rc=$? $(grep -c '^ok' /tmp/memcheck.log) ok, $(grep -E 'ERROR SUMMARY' /tmp/memcheck.log | tail -n 1)"
    grep -E -m 10 'Invalid|out of bounds|misaligned|^FAIL' /tmp/memcheck.log
else
    echo "no compute-sanitizer"
fi
bash bench/device/cuda_check.sh "$d" parity 2>&1 | tail -n 30
# files come back at most 16 MiB each: the results in pieces (cat par_* > parity.tar.xz here)
out=${OUT:-/tmp/out}
[ -f "$out/parity.tar.xz" ] && split -b 15M -a 1 "$out/parity.tar.xz" "$out/par_" && rm "$out/parity.tar.xz" && ls -la "$out"
