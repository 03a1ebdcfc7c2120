# Shell helpers for tests that call the llama.cpp oracle. Source it from a tests/t_*.sh:
#   . "$STRATA_ROOT/tests/oracle/lib.sh"
#   oracle_available || exit 77          # skip (with a reason on the last line) if absent
#   oracle_run check_load.mjs --model m.gguf
# ORACLE_TIMEOUT (seconds, default 300) bounds each run: llama.cpp can hang or abort on bad
# input, and a test must fail rather than stall the suite.

ORACLE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# node-llama-cpp's folder: $ORACLE_NODE_MODULES when it has it, else tests/oracle/node_modules
# (common.mjs looks in the same order). Prints it.
oracle_node_modules() {
    if [ -n "${ORACLE_NODE_MODULES:-}" ] && [ -f "$ORACLE_NODE_MODULES/node-llama-cpp/package.json" ]; then
        echo "$ORACLE_NODE_MODULES"
    elif [ -f "$ORACLE_DIR/node_modules/node-llama-cpp/package.json" ]; then
        echo "$ORACLE_DIR/node_modules"
    else
        return 1
    fi
}

# The reference on a CPU with AMX. ggml scores its CPU builds against the CPU at start-up
# (docs/correctness.md) and takes `sapphirerapids` there, whose AMX kernels compute Q8_0 and
# K-quant products through another path (other activation rounding) and abort on the MLA models
# (deepseek2 and glm-dsa Q8_0 in graph_reserve; deepseek2 Q4_K gave logits that agree with none
# of strata's levels, which agree with llama.cpp's AVX-512 build on AMD), measured on the GPU
# machine's Xeon (bench/device/host_tests.sh). The tests there take llama.cpp's best build without
# AMX instead: node-llama-cpp and its linux-x64 prebuilt copied into $STRATA_BUILD/oracle-noamx
# without libggml-cpu-sapphirerapids.so (the other packages linked), made once under a lock and
# used through ORACLE_NODE_MODULES. ORACLE_AMX=1 keeps the AMX build (benchmarks do: they time
# llama.cpp as users run it), ORACLE_AMX=0 makes the copy on any CPU. Prints the folder, or
# nothing where there is nothing to do.
oracle_noamx_modules() {
    [ -n "${ORACLE_NODE_MODULES:-}" ] && return 0
    case "${ORACLE_AMX:-auto}" in
    1) return 0 ;;
    0) ;;  # the copy without AMX on any CPU (to check it where there is no AMX)
    *) grep -qw amx_int8 /proc/cpuinfo 2>/dev/null || return 0 ;;
    esac
    local src="$ORACLE_DIR/node_modules"
    [ -f "$src/@node-llama-cpp/linux-x64/package.json" ] || return 0
    local root=${STRATA_ROOT:-$(cd "$ORACLE_DIR/../.." && pwd)}
    local dst="$root/${STRATA_BUILD:-build}/oracle-noamx"
    mkdir -p "$dst" || return 0
    (
        flock 9
        [ -f "$dst/ready" ] && [ "$dst/ready" -nt "$ORACLE_DIR/package-lock.json" ] && exit 0
        rm -rf "$dst/node_modules" "$dst/ready"
        mkdir -p "$dst/node_modules/@node-llama-cpp"
        for e in "$src"/* "$src"/.[!.]*; do
            [ -e "$e" ] || continue
            case "${e##*/}" in node-llama-cpp | @node-llama-cpp) continue ;; esac
            ln -s "$e" "$dst/node_modules/${e##*/}"
        done
        for e in "$src"/@node-llama-cpp/*; do
            [ "${e##*/}" = linux-x64 ] || ln -s "$e" "$dst/node_modules/@node-llama-cpp/${e##*/}"
        done
        # copies, so that node resolves the prebuilt (and ggml its backends) from here
        cp -r "$src/@node-llama-cpp/linux-x64" "$dst/node_modules/@node-llama-cpp/" &&
            rm -f "$dst/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-cpu-sapphirerapids.so" &&
            tar -C "$src" --exclude=node-llama-cpp/llama/gitRelease.bundle -cf - node-llama-cpp |
                tar -C "$dst/node_modules" -xf - && touch "$dst/ready"
    ) 9>"$dst/lock"
    [ -f "$dst/ready" ] && echo "$dst/node_modules"
}
if _nm=$(oracle_noamx_modules) && [ -n "$_nm" ]; then export ORACLE_NODE_MODULES="$_nm"; fi
unset _nm

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
