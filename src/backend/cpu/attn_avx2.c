// strata_attn_head for the AVX2 ggml builds (8 lanes), compiled with AVX2 + FMA.
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/attn_impl.h"

void strata_attn_head_vl8_avx2(const struct strata_attn_query *a) { attn_head_body(a, 8, 0); }
void strata_attn_heads_vl8_avx2(const struct strata_attn_query *a, int g) { attn_heads_body(a, g, 8, 0); }

static void kq8(const struct strata_attn_query *a, int mr, int j0, int nr) { attn_rows_kq_port(a, mr, j0, nr, 8); }
static void kqv8(const struct strata_attn_query *a, int mr, int P0, int P, uint32_t d0, int nd)
{
    attn_rows_kqv_port(a, mr, P0, P, d0, nd, 8);
}
static void softmax8(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink)
{
    attn_rows_softmax_port(s, p0, n_kv, vis, sink, 8, 0);
}
void strata_attn_rows_vl8_avx2(const struct strata_attn_query *a, int n) { attn_rows_body(a, n, kq8, softmax8, kqv8); }
