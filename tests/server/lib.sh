# Helpers for the server tests: start `strata serve` on a free loopback port and wait until it
# answers, stop it and check that it exited cleanly.
#   srv_start LOG ARGS...   sets SRV_PID and SRV_URL (fails after 60 s without /health = 200)
#   srv_stop                SIGINT, then the exit status of the server (0 = clean)

srv_start() {
    local log=$1; shift
    "$STRATA_BIN" serve --port 0 "$@" >"$log" 2>&1 &
    SRV_PID=$!
    local port="" i
    for i in $(seq 600); do
        port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" 2>/dev/null | grep -o '[0-9]*$' || true)
        if [ -n "$port" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ]; then
            SRV_URL="http://127.0.0.1:$port"
            return 0
        fi
        kill -0 "$SRV_PID" 2>/dev/null || { echo "server exited: $(tail -n 5 "$log")"; return 1; }
        sleep 0.1
    done
    echo "server did not come up: $(tail -n 5 "$log")"
    return 1
}

srv_stop() {
    kill -INT "$SRV_PID" 2>/dev/null
    local i
    for i in $(seq 300); do
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$SRV_PID" 2>/dev/null; then
        echo "server did not stop within 30 s"
        kill -KILL "$SRV_PID"
        wait "$SRV_PID" 2>/dev/null
        return 1
    fi
    wait "$SRV_PID"
}
