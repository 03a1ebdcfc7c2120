#!/usr/bin/env bash
# Puts what the GPU machine lacks (liburing, cJSON and libmicrohttpd headers and libraries,
# /work/shared/DEVICE.md) and the baseline engine's source into .deps/ of this checkout, ignored by git, so a device run
# can carry it:
#   bash bench/device/deps.sh          # here, once
#   run(command="bash bench/device/prefetch_h200.sh", carry=[".deps"])   # there
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .deps/include .deps/lib
inc=$(dirname "$(dpkg -L liburing-dev | grep '/liburing.h$')")
lib=$(dirname "$(dpkg -L liburing-dev | grep '/liburing.a$')")
cp -r "$inc/liburing.h" "$inc/liburing" "$inc/cjson" .deps/include/
cp "$lib/liburing.a" .deps/lib/ && cp -L "$lib/libcjson.so" "$lib/libcjson.so.1" .deps/lib/
# binaries built here link liburing dynamically: the device has no liburing.so.2
uring_so=$(ldconfig -p | awk '$1 == "liburing.so.2" {print $NF; exit}')
[ -n "$uring_so" ] && cp -L "$uring_so" .deps/lib/
# libmicrohttpd (strata serve is linked into the same binary) and what it needs beyond libc
mhd=$(dpkg -L libmicrohttpd-dev | grep '/libmicrohttpd.so$')
cp "$(dirname "$(dpkg -L libmicrohttpd-dev | grep '/microhttpd.h$')")/microhttpd.h" .deps/include/
soname=$(objdump -p "$mhd" | awk '/SONAME/ {print $2}')
cp -L "$mhd" .deps/lib/ && cp -L "$mhd" ".deps/lib/$soname"
ldd "$mhd" | awk '$3 ~ /^\// && $1 !~ /^(libc|libm|libpthread|libdl|ld-linux)/ {print $3}' | while read -r so; do
    cp -L "$so" .deps/lib/
done
# The engine before the provider and the new I/O path (bounce-buffered O_DIRECT, 4 in flight,
# LRU), built there as the baseline "base_lru_d4".
git archive "${BASE_COMMIT:-075d342}" Makefile src | gzip >.deps/base-src.tar.gz
# llama.cpp's source as the oracle's npm package ships it (a git bundle), for the CUDA build of
# llama-bench there (bench/device/cuda_vram.sh LLAMA=1); models and docs left out.
bundle=tests/oracle/node_modules/node-llama-cpp/llama/gitRelease.bundle
if [ -f "$bundle" ] && [ ! -f .deps/llama-src.tar.xz ]; then
    src=$(mktemp -d)
    git clone -q "$bundle" "$src" 2>/dev/null
    tar -C "$src" --exclude=./.git --exclude=./models --exclude=./docs --exclude=./gguf-py \
        --exclude='./tools/server/public*' -cJf .deps/llama-src.tar.xz .
    rm -rf "$src"
fi
exclude="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.deps/' "$exclude" 2>/dev/null || echo '/.deps/' >>"$exclude"
du -sh .deps
