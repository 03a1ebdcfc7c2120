#!/usr/bin/env bash
# Load and abuse test of strata serve on loopback (tests/server/load.mjs): 64 concurrent
# clients, malformed and truncated JSON, bodies over the limit, unknown fields, garbage,
# disconnects mid-stream. The server must keep serving, answer no 5xx, end with no request
# active and the same greedy text, and exit cleanly on SIGINT (under `make test SAN=1` that
# includes LeakSanitizer's check for leaks at exit). Needs node (no npm packages).
set -u
root=${STRATA_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
command -v node >/dev/null || { echo "skip: no node"; exit 77; }
. "$root/tests/server/lib.sh"
dir=$(mktemp -d)
cleanup() { [ -n "${SRV_PID:-}" ] && kill -KILL "$SRV_PID" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
"$STRATA_BIN" synth --arch qwen3moe --preset tiny -o "$dir/m.gguf" --no-progress || { echo "synth failed"; exit 1; }
srv_start "$dir/srv.log" -m "$dir/m.gguf" -t 2 --parallel 4 --queue 64 --max-body 1024 -c 1024 || exit 1
fail=0
timeout 600 node "$root/tests/server/load.mjs" "$SRV_URL" 64 4 || fail=1
srv_stop || { echo "FAIL server exit status"; fail=1; }
grep -v 'Closing connection\|listening on\|ready in\|stopping' "$dir/srv.log" | head -n 20
if grep -q 'ERROR: \(Address\|Leak\)Sanitizer\|runtime error' "$dir/srv.log"; then fail=1; fi
exit $fail
