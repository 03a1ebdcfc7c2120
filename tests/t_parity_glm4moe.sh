#!/usr/bin/env bash
# Parity of strata with llama.cpp on tiny synthetic glm4moe models: GLM-4.7-like (q/k norms,
# routed weights scaled by 2.5) in F32, Q8_0, Q4_K and Q6_K, and GLM-4.5-Air-like (no q/k norms)
# in F32 and Q4_K. Each: teacher-forced logits at 48 positions (tolerance 1e-4 F32, 2e-2
# quantized: parity_lib.sh explains the measured noise) and 32 greedy tokens identical. Both models carry a nextn block,
# as real files do, which llama.cpp and strata skip. The Q4_K model also runs with the expert
# cache cut below the experts' size and must give the same logits bit for bit.
set -u
. "$STRATA_ROOT/tests/oracle/lib.sh"
oracle_available || exit 77
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
. "$STRATA_ROOT/tests/parity_lib.sh"

parity_check glm4moe tiny f32 "--type F32" 1e-4
parity_full q8_0 && parity_check glm4moe tiny q8_0 "--type Q8_0" q
parity_check glm4moe tiny q4_k "--type Q4_K" q
parity_streamed q4_k 1
parity_full q6_k && parity_check glm4moe tiny q6_k "--type Q6_K" q
parity_check glm4moe tiny-air air_f32 "--type F32" 1e-4
parity_full air_q4_k && parity_check glm4moe tiny-air air_q4_k "--type Q4_K" q
exit $parity_fail
