#!/usr/bin/env bash
# Parity of strata with llama.cpp on the tiny synthetic gpt-oss model (attention sinks, a window
# of 32 in the even blocks, q/k/v/output biases, YaRN x32 NeoX RoPE, router bias, softmax over
# the top-2 of 8 experts, per-expert biases, the clamped SwiGLU): teacher-forced logits at 48
# positions and 32 greedy tokens (tolerances: parity_lib.sh) in F32, Q8_0 and with MXFP4 experts
# as released, prompt chunks of 1, 7 and 48 bit-identical, 1,100 positions at F32 (far past the
# window), and the MXFP4 model streamed through an expert cache below its experts' size. The oracle
# keeps every sliding-window position in its own cell (ORACLE_SWA_FULL): llama.cpp's default ring
# changes its summation order in the last bit, strata keeps lanes at absolute positions.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. "$STRATA_ROOT/tests/parity_lib.sh"
export ORACLE_SWA_FULL=1

parity_check gpt-oss tiny f32 "--type F32" 1e-4
parity_chunks f32
long=$(awk 'BEGIN{s=777; for(i=0;i<1100;i++){s=(s*1103515245+12345)%2147483648; printf "%s%d", (i?",":""), s%1021}}')
res=$(parity_logits "$dir/f32.gguf" f32_long "$long" 1e-4); rc=$?
echo "f32 1100 positions: $(echo "$res" | tail -n 1)"
[ $rc -eq 0 ] || { echo "$res" | head -n 10; echo "FAIL f32_long"; parity_fail=1; }
parity_full q8_0 && parity_check gpt-oss tiny q8_0 "--type Q8_0" q
parity_check gpt-oss tiny mxfp4 "--type Q8_0 --type-overrides exps=MXFP4" q
parity_streamed mxfp4 2
exit $parity_fail
