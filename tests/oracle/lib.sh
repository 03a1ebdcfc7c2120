# Shell helpers for tests that call the llama.cpp oracle. Source it from a tests/t_*.sh:
#   . "$STRATA_ROOT/tests/oracle/lib.sh"
#   oracle_available || exit 77          # skip (with a reason on the last line) if absent
#   oracle_run check_load.mjs --model m.gguf
# ORACLE_TIMEOUT (seconds, default 300) bounds each run: llama.cpp can hang or abort on bad
# input, and a test must fail rather than stall the suite.

ORACLE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# node-llama-cpp's folder: tests/oracle/node_modules, else $ORACLE_NODE_MODULES. Prints it.
oracle_node_modules() {
    if [ -f "$ORACLE_DIR/node_modules/node-llama-cpp/package.json" ]; then
        echo "$ORACLE_DIR/node_modules"
    elif [ -n "${ORACLE_NODE_MODULES:-}" ] && [ -f "$ORACLE_NODE_MODULES/node-llama-cpp/package.json" ]; then
        echo "$ORACLE_NODE_MODULES"
    else
        return 1
    fi
}

# Returns 0 if node >= 20 and node-llama-cpp with its linux-x64 prebuilt are installed; else
# prints why (one line, which the test runner shows for a skipped test) and returns 1.
oracle_available() {
    if ! command -v node >/dev/null 2>&1; then
        echo "oracle unavailable: node is not installed"
        return 1
    fi
    local major
    major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if [ "$major" -lt 20 ]; then
        echo "oracle unavailable: node $major is older than 20"
        return 1
    fi
    local nm
    if ! nm=$(oracle_node_modules); then
        echo "oracle unavailable: run 'npm ci --omit=optional' in tests/oracle or set ORACLE_NODE_MODULES"
        return 1
    fi
    if [ ! -f "$nm/@node-llama-cpp/linux-x64/package.json" ]; then
        echo "oracle unavailable: $nm has no @node-llama-cpp/linux-x64 prebuilt"
        return 1
    fi
    return 0
}

# oracle_run SCRIPT ARGS...: runs tests/oracle/SCRIPT (".mjs" may be left off) under node with
# a timeout; stdout and the exit status are the script's (124 on timeout).
oracle_run() {
    local script=$1
    shift
    case "$script" in *.mjs) ;; *) script="$script.mjs" ;; esac
    timeout "${ORACLE_TIMEOUT:-300}" node "$ORACLE_DIR/$script" "$@"
}
