#!/usr/bin/env bash
# Here (no GPU needed): builds the CUDA binaries to try the pending diffs on the GPU machine in one
# call. For the base checkout and then after each diff of PATCHES in turn (applied on top of each
# other in a scratch worktree), `make CUDA=1` strata, stripped, into .deps/pending/<i>-<name>/
# (0-base first), and test_cuda for the last (all diffs; the call carries at most 64 MiB). Then:
#   run(command="bash bench/device/pending/run.sh", carry=[".deps/pending", ".deps/lib"])
# PATCHES (default: every *.diff here, in name order); bench/device/deps.sh must have made .deps/lib.
# TESTS_ONLY=1 keeps every build's test_cuda instead (for tests.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
patches=${PATCHES:-$(ls bench/device/pending/*.diff 2>/dev/null || true)}
[ -n "$patches" ] || [ "${TESTS_ONLY:-0}" = 1 ] || { echo "prepare.sh: no diffs in bench/device/pending" >&2; exit 1; }
out=$root/.deps/pending
rm -rf "$out" && mkdir -p "$out"
wt=$(mktemp -d)
git worktree add -q --detach "$wt" HEAD
trap 'git worktree remove --force "$wt"' EXIT
build() {  # build NAME
    (cd "$wt" && make -s -j"$(nproc)" CUDA=1 build-cuda/strata build-cuda/tests/test_cuda > /dev/null)
    mkdir -p "$out/$1"
    cp "$wt/build-cuda/strata" "$wt/build-cuda/tests/test_cuda" "$out/$1/"
    strip "$out/$1/strata" "$out/$1/test_cuda"
    echo "built $1"
}
build 0-base
i=1
for p in $patches; do
    (cd "$wt" && git apply "$root/$p")
    build "$i-$(basename "$p" .diff)"
    i=$((i + 1))
done
# TESTS_ONLY=1: every build's test_cuda and no strata (tests.sh: which build fails a test);
# otherwise every build's strata and the last one's test_cuda (run.sh)
if [ "${TESTS_ONLY:-0}" = 1 ]; then
    rm -f "$out"/*/strata
else
    ls -d "$out"/*/ | head -n -1 | while read -r d; do rm -f "$d/test_cuda"; done
fi
du -sh "$out"
