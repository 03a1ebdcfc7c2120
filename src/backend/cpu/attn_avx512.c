// strata_attn_head for the AVX-512 ggml builds (16 lanes), compiled with AVX-512 + FMA.
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/attn_impl.h"

void strata_attn_head_vl16_avx512(const struct strata_attn_query *a) { attn_head_body(a, 16, 1); }
void strata_attn_heads_vl16_avx512(const struct strata_attn_query *a, int g) { attn_heads_body(a, g, 16, 1); }
