#!/usr/bin/env bash
# Prepares .deps/ in the repository root for a run on the GPU machine (shared/DEVICE.md): the
# liburing and cJSON headers and libraries strata links with, and llama.cpp's source from the
# oracle's npm package (tests/oracle or $ORACLE_NODE_MODULES) as a tarball. Run it here, add
# /.deps/ to .git/info/exclude, and name .deps in the run's carry list.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .deps/include .deps/lib
grep -qx '/.deps/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null ||
    echo '/.deps/' >> "$(git rev-parse --git-common-dir)/info/exclude"
inc=$(dirname "$(dpkg -L liburing-dev | grep '/liburing.h$')")
lib=$(dirname "$(dpkg -L liburing-dev | grep '/liburing.a$')")
cp -r "$inc/liburing.h" "$inc/liburing" "$inc/cjson" .deps/include/
cp "$lib/liburing.a" .deps/lib/ && cp -L "$lib/libcjson.so" "$lib/libcjson.so.1" .deps/lib/
if [ ! -f .deps/llama-src.tar.xz ]; then
    nm=tests/oracle/node_modules
    [ -d "$nm/node-llama-cpp" ] || nm=${ORACLE_NODE_MODULES:?install the oracle (tests/oracle: npm ci --omit=optional)}
    src=$(mktemp -d)
    git clone -q "$nm/node-llama-cpp/llama/gitRelease.bundle" "$src"
    tar -C "$src" --exclude=./.git --exclude=./models --exclude=./docs --exclude=./gguf-py \
        --exclude='./tools/server/public*' -cJf .deps/llama-src.tar.xz .
    rm -rf "$src"
fi
du -sh .deps
