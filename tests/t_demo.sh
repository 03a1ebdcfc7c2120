#!/usr/bin/env bash
# `strata demo` (the README's first command) on a fresh cache folder: writes its model, generates
# with the experts streaming through a cache a quarter of their size and with all resident, and
# must report the same tokens both ways with a nonzero number of bytes read from disk.
set -u
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
out=$(XDG_CACHE_HOME="$dir" "$STRATA_BIN" demo -t 2 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "FAIL: strata demo exited $rc"; exit 1; }
echo "$out" | grep -q "the same 40 tokens both ways" || { echo "FAIL: no identical-output line"; exit 1; }
read_mib=$(echo "$out" | sed -n 's/.*, \([0-9]*\) MiB read from disk.*/\1/p')
[ -n "$read_mib" ] && [ "$read_mib" -gt 0 ] || { echo "FAIL: the streamed run read nothing from disk"; exit 1; }
# a second run reuses the model it wrote
XDG_CACHE_HOME="$dir" "$STRATA_BIN" demo -t 2 2>&1 | grep -q "writing a synthetic" && { echo "FAIL: model written twice"; exit 1; }
XDG_CACHE_HOME="$dir" "$STRATA_BIN" demo --bogus >/dev/null 2>&1; [ $? -eq 2 ] || { echo "FAIL: bad argument not rejected"; exit 1; }
echo "ok"
