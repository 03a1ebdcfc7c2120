#!/usr/bin/env bash
# Runs every test of the suite: the C test programs built into $STRATA_BUILD/tests/ and the shell
# tests tests/t_*.sh. A test exits 0 (pass), 77 (skip: e.g. no GPU, no oracle) or anything else
# (fail). Output of each test goes to $STRATA_BUILD/tests/logs/NAME.log; failures print its tail.
# Last line: "N passed, N failed, N skipped".
# STRATA_TESTS="name1 name2" runs only those.
set -u
cd "$(dirname "$0")/.."
build=${STRATA_BUILD:-build}
export STRATA_BIN="$PWD/$build/strata"
export STRATA_BUILD_DIR="$PWD/$build"
export STRATA_ROOT="$PWD"
logs="$build/tests/logs"; mkdir -p "$logs"

# The llama.cpp oracle (tests/oracle) and the HTTP clients of the server tests (tests/server) come
# from the committed npm locks: installed here once when npm is present, so the parity tests never
# skip silently. STRATA_NO_INSTALL=1 leaves them alone; without npm the tests that need them skip
# and say why.
install_npm() {
    local d=$1 what=$2; shift 2
    [ -d "$d/node_modules" ] && return 0
    [ "$d" = tests/oracle ] && [ -n "${ORACLE_NODE_MODULES:-}" ] && return 0
    if [ -n "${STRATA_NO_INSTALL:-}" ]; then echo "note: $what not installed (STRATA_NO_INSTALL): tests that need it skip"; return 0; fi
    if ! command -v npm >/dev/null 2>&1; then
        echo "note: npm not found: $what cannot be installed, the tests that need it skip (apt-get install npm)"
        return 0
    fi
    echo "installing $what from $d/package-lock.json (once)"
    (cd "$d" && npm ci "$@" --no-audit --no-fund --loglevel=error) >"$logs/npm-$(basename "$d").log" 2>&1 ||
        echo "note: npm ci in $d failed ($logs/npm-$(basename "$d").log): the tests that need it skip"
}
install_npm tests/oracle "the llama.cpp oracle" --omit=optional
install_npm tests/server "the OpenAI and Anthropic clients"
pass=0; fail=0; skip=0; failed=()
tests=()
for t in "$build"/tests/test_*; do [ -x "$t" ] && [ -f "$t" ] && tests+=("$t"); done
for t in tests/t_*.sh; do [ -f "$t" ] && tests+=("$t"); done
for t in "${tests[@]}"; do
  name=$(basename "$t"); name=${name%.sh}
  if [ -n "${STRATA_TESTS:-}" ] && [[ " $STRATA_TESTS " != *" $name "* ]]; then continue; fi
  start=$EPOCHREALTIME
  case "$t" in *.sh) bash "$t" >"$logs/$name.log" 2>&1 ;; *) "$t" >"$logs/$name.log" 2>&1 ;; esac
  rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN{printf "%.1f", b-a}')
  if [ $rc -eq 0 ]; then pass=$((pass+1)); echo "PASS $name (${secs}s)"
  elif [ $rc -eq 77 ]; then skip=$((skip+1)); echo "SKIP $name: $(tail -n 1 "$logs/$name.log")"
  else fail=$((fail+1)); failed+=("$name"); echo "FAIL $name (rc=$rc, ${secs}s)"; tail -n 20 "$logs/$name.log" | sed 's/^/    /'
  fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
