#!/usr/bin/env bash
# The chat page of strata serve in headless Chromium (tests/server/page.mjs): two turns of a
# conversation streamed into the page, a screenshot in $STRATA_BUILD_DIR/tests/server-page.png.
# Needs Debian's chromium and the npm packages of tests/server, else skips.
set -u
root=${STRATA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || { echo "skip: no $chromium (apt-get install chromium)"; exit 77; }
[ -d "$root/tests/server/node_modules/playwright-core" ] || { echo "skip: no playwright-core (cd tests/server && npm ci)"; exit 77; }
. "$root/tests/server/lib.sh"
dir=$(mktemp -d)
cleanup() { [ -n "${SRV_PID:-}" ] && kill -KILL "$SRV_PID" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
"$STRATA_BIN" synth --arch qwen3moe --preset tiny -o "$dir/m.gguf" --no-progress || { echo "synth failed"; exit 1; }
srv_start "$dir/srv.log" -m "$dir/m.gguf" -t 2 --api-key pagekey --alias tiny-qwen3moe || exit 1
shot="${STRATA_BUILD_DIR:-$root/build}/tests/server-page.png"
mkdir -p "$(dirname "$shot")"
fail=0
(cd "$root/tests/server" && HOME="$dir" timeout 300 node page.mjs "$SRV_URL" pagekey "$shot") || fail=1
srv_stop || { echo "FAIL server exit status"; fail=1; }
exit $fail
