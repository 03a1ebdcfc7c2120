#!/usr/bin/env bash
# The test suite on the GPU machine's host CPU (Intel Xeon with AVX-512 and AMX; the development
# machine is AMD), so issue 16's "passes on Intel and AMD" is shown by a run, not assumed. The
# machine has no node and no registry: node and the oracle's node_modules travel xz-packed in
# .deps/intel (made here with:
#   xz -7 -T2 -c "$(command -v node)" > .deps/intel/node.xz
#   tar -C tests/oracle --exclude=node_modules/node-llama-cpp/llama/gitRelease.bundle -cf - node_modules |
#       xz -7 -T2 > .deps/intel/oracle_nm.tar.xz
# ), the libraries as for every device build (bench/device/deps.sh). The server clients do not fit
# the 64 MiB a run may carry: the tests that need them skip, and say so.
#   run(command="bash bench/device/host_tests.sh", carry=[".deps/intel", ".deps/lib", ".deps/include"])
set -u
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/out}; mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p /tmp/nodebin && xz -dc .deps/intel/node.xz > /tmp/nodebin/node && chmod +x /tmp/nodebin/node
export PATH="/tmp/nodebin:$PATH"
tar -C tests/oracle -xJf .deps/intel/oracle_nm.tar.xz
lscpu | grep -E '^(Model name|CPU\(s\))'
grep -o -w -E 'avx512f|avx512_vnni|avx512_bf16|amx_int8|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
node --version
x="EXTRA_CFLAGS=-I$PWD/.deps/include EXTRA_LDLIBS=-L$PWD/.deps/lib"
# shellcheck disable=SC2086
make -j16 $x > "$out/build.log" 2>&1 || { echo "build failed"; tail -n 20 "$out/build.log"; exit 1; }
t0=$SECONDS
# shellcheck disable=SC2086
STRATA_TEST_JOBS=${JOBS:-8} timeout "${TEST_S:-520}" make test $x > "$out/test.log" 2>&1; rc=$?
grep -E '^(PASS|FAIL|SKIP)|passed' "$out/test.log"
echo "make test: rc=$rc in $((SECONDS - t0)) s"
# the logs of the tests that did not pass (few files come back from a run)
for n in $(grep -E '^FAIL' "$out/test.log" | awk '{print $2}'); do cp "build/tests/logs/$n.log" "$out/" 2>/dev/null; done
exit $rc
