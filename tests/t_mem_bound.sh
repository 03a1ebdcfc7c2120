#!/usr/bin/env bash
# --mem-mib bounds the whole process: on a Qwen3-30B-A3B-shaped model (2 layers, 32 experts,
# Q4_K) whose experts do not fit, peak RSS stays under N across prompt lengths, chunk sizes,
# contexts, thread counts and both I/O engines (the margin is printed: it is what the engine's
# reserve covers); a bound below the minimum is refused with one line naming it; --cache-mib
# above what the bound leaves is refused; and, where a memory cgroup can be made (root, cgroup v1
# or v2), the same runs under a cgroup limit of exactly N are not killed.
set -u
dir=$(mktemp -d); trap 'rm -rf "$dir"; [ -n "${cg:-}" ] && rmdir "$cg" 2>/dev/null' EXIT
m="$dir/m.gguf"
"$STRATA_BIN" synth --arch qwen3moe --preset qwen3-30b-a3b --layers 2 --experts 32 --vocab 8192 --type Q4_K \
    -o "$m" --no-progress || { echo "FAIL: synth"; exit 1; }
fail=0
prompt=$(awk 'BEGIN{s=5; for(i=0;i<600;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), 1+s%8000}}')
short=$(echo "$prompt" | cut -d, -f1-8)

# The minimum, from the refusal of a bound far too small.
msg=$("$STRATA_BIN" run -m "$m" --prompt-tokens "$short" -n 4 --mem-mib 16 -c 1024 2>&1); rc=$?
echo "$msg"
min=$(echo "$msg" | sed -n 's/.*the minimum is \([0-9]*\) MiB.*/\1/p')
if [ $rc -eq 0 ] || [ -z "$min" ] || [ "$(echo "$msg" | wc -l)" -ne 1 ]; then
    echo "FAIL: --mem-mib 16 was not refused with one line naming the minimum"; fail=1; min=400
fi
# At the minimum itself it runs.
"$STRATA_BIN" run -m "$m" --prompt-tokens "$short" -n 4 --mem-mib "$min" -c 1024 >/dev/null 2>&1 ||
    { echo "FAIL: --mem-mib $min (the stated minimum) does not run"; fail=1; }
# --cache-mib beyond what the bound leaves
"$STRATA_BIN" run -m "$m" --prompt-tokens "$short" -n 4 --mem-mib $((min + 20)) --cache-mib 4000 -c 1024 >/dev/null 2>"$dir/err"
[ $? -ne 0 ] && grep -q "over the memory bound" "$dir/err" ||
    { echo "FAIL: --cache-mib over the bound not refused"; cat "$dir/err"; fail=1; }

cg=""
if [ "$(id -u)" -eq 0 ] && [ -z "${STRATA_TEST_SHORT:-}" ]; then
    if [ -d /sys/fs/cgroup/memory ]; then cg=/sys/fs/cgroup/memory/strata-mem-$$; lim=memory.limit_in_bytes
    elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
        cg=/sys/fs/cgroup/strata-mem-$$; lim=memory.max
    fi
    mkdir "$cg" 2>/dev/null || cg=""
fi
if [ -n "$cg" ]; then echo "cgroup: $cg"
elif [ -z "${STRATA_TEST_SHORT:-}" ]; then echo "no memory cgroup here (not root, or no controller): RSS only"
fi

# Under AddressSanitizer its shadow of what the run allocates and its quarantine of what it frees
# (the pass scratch, each session's state) grow the process past what the engine accounts: on
# 2026-12-07 the ASan build's peak went 29 MiB further above its bound than the plain build's
# (-2.8 against -26.0 MiB on "3 sequences", the same expert cache), so 32 MiB more is allowed
# there; the plain build (and the cgroup runs, which the sanitizer pass leaves out) keep the bound.
san_mib=0
grep -qa __asan_init "$STRATA_BIN" && san_mib=32 && echo "AddressSanitizer build: $san_mib MiB allowed over each bound"

# run NAME MIB ARGS...: peak RSS within MIB, and under a cgroup of MIB not killed
check() {
    local name=$1 mib=$2; shift 2
    local js peak
    js=$("$STRATA_BIN" eval -m "$m" --mem-mib "$mib" --json --logits-out "$dir/l.f32" "$@" 2>"$dir/err") ||
        { echo "FAIL $name: eval --mem-mib $mib: $(cat "$dir/err")"; fail=1; return; }
    peak=$(echo "$js" | sed -n 's/.*"peak_rss_mib":[^0-9]*\([0-9.]*\).*/\1/p')
    cache=$(echo "$js" | sed -n 's/.*"cache_mib":[^0-9]*\([0-9.]*\).*/\1/p' | head -n 1)
    printf '%-34s bound %5d MiB  peak RSS %7.1f MiB  margin %6.1f MiB  expert cache %7.1f MiB\n' \
        "$name" "$mib" "$peak" "$(echo "$mib - $peak" | bc)" "${cache:-0}"
    if [ "$(echo "$peak > $mib + $san_mib" | bc)" = 1 ]; then echo "FAIL $name: peak RSS over the bound"; fail=1; fi
    if [ -n "$cg" ]; then
        echo $((mib << 20)) > "$cg/$lim"
        bash -c "echo \$\$ > '$cg/cgroup.procs'; exec \"\$0\" \"\$@\"" "$STRATA_BIN" eval -m "$m" --mem-mib "$mib" \
            --logits-out "$dir/l.f32" "$@" >/dev/null 2>"$dir/err"
        local rc=$?
        [ $rc -eq 0 ] || { echo "FAIL $name: under a cgroup of $mib MiB: exit $rc $(tail -n 1 "$dir/err")"; fail=1; }
    fi
}
# The short pass (STRATA_TEST_SHORT=1: .ci/run's sanitizer pass, after the full pass checked the
# bounds) runs every configuration once at the tightest bound, where eviction is busiest, and
# leaves out the looser bound and the cgroup repeats: they rerun the same code.
mibs="$((min + 40)) $((min + 300))"
if [ -n "${STRATA_TEST_SHORT:-}" ]; then
    mibs=$((min + 40))
    echo "STRATA_TEST_SHORT: bound $mibs only, no cgroup runs (judged in the full pass)"
fi
for mib in $mibs; do
    check "short prompt, -b 512, -c 1024" "$mib" --tokens "$short" -c 1024
    check "600 tokens, -b 512, -c 1024" "$mib" --tokens "$prompt" -c 1024
    check "600 tokens, -b 16, -c 1024" "$mib" --tokens "$prompt" -c 1024 -b 16
    check "600 tokens, -c 4096" "$((mib + 200))" --tokens "$prompt" -c 4096
    check "600 tokens, -t 1, --io pread" "$mib" --tokens "$prompt" -c 1024 -t 1 --io pread
    check "600 tokens, -t 2, --io uring" "$mib" --tokens "$prompt" -c 1024 -t 2 --io uring
    check "3 sequences (sessions one after another)" "$mib" --tokens "$short;$short;$prompt" -c 1024
done
exit $fail
