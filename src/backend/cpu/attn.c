// Attention in ggml's order of operations (see attn.h): the dispatch and the portable variants
// (fmaf is a library call without FMA flags: correct, slower; used only on CPUs without AVX2).
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/attn_impl.h"
#include "util/log.h"

void strata_attn_head_vl8(const struct strata_attn_query *a) { attn_head_body(a, 8, 0); }
void strata_attn_head_vl16(const struct strata_attn_query *a) { attn_head_body(a, 16, 1); }
void strata_attn_heads_vl8(const struct strata_attn_query *a, int g) { attn_heads_body(a, g, 8, 0); }
void strata_attn_heads_vl16(const struct strata_attn_query *a, int g) { attn_heads_body(a, g, 16, 1); }

static void kq8(const struct strata_attn_query *a, int mr, int j0, int nr) { attn_rows_kq_port(a, mr, j0, nr, 8); }
static void kq16(const struct strata_attn_query *a, int mr, int j0, int nr) { attn_rows_kq_port(a, mr, j0, nr, 16); }
static void kqv8(const struct strata_attn_query *a, int mr, int P0, int P, uint32_t d0, int nd)
{
    attn_rows_kqv_port(a, mr, P0, P, d0, nd, 8);
}
static void kqv16(const struct strata_attn_query *a, int mr, int P0, int P, uint32_t d0, int nd)
{
    attn_rows_kqv_port(a, mr, P0, P, d0, nd, 16);
}
static void softmax8(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink)
{
    attn_rows_softmax_port(s, p0, n_kv, vis, sink, 8, 0);
}
void strata_attn_rows_vl8(const struct strata_attn_query *a, int n) { attn_rows_body(a, n, kq8, softmax8, kqv8); }
void strata_attn_rows_softmax_vl16(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink)
{
    attn_rows_softmax_port(s, p0, n_kv, vis, sink, 16, 1);
}
void strata_attn_rows_vl16(const struct strata_attn_query *a, int n)
{
    attn_rows_body(a, n, kq16, strata_attn_rows_softmax_vl16, kqv16);
}

void strata_attn_head(enum strata_isa isa, const struct strata_attn_query *a)
{
    switch (isa) {
    case STRATA_ISA_AVX512: strata_attn_head_vl16_avx512(a); break;
    case STRATA_ISA_AVX2: strata_attn_head_vl8_avx2(a); break;
    default: strata_attn_head_vl8(a); break;
    }
}

void strata_attn_heads(enum strata_isa isa, const struct strata_attn_query *a, int g)
{
    STRATA_ASSERT(g >= 1 && g <= STRATA_ATTN_GROUP);
    switch (isa) {
    case STRATA_ISA_AVX512: strata_attn_heads_vl16_avx512(a, g); break;
    case STRATA_ISA_AVX2: strata_attn_heads_vl8_avx2(a, g); break;
    default: strata_attn_heads_vl8(a, g); break;
    }
}

void strata_attn_rows(enum strata_isa isa, const struct strata_attn_query *a, int n)
{
    STRATA_ASSERT(n >= 1 && n <= STRATA_ATTN_ROWS);
    switch (isa) {
    case STRATA_ISA_AVX512: strata_attn_rows_vl16_avx512(a, n); break;
    case STRATA_ISA_AVX2: strata_attn_rows_vl8_avx2(a, n); break;
    default: strata_attn_rows_vl8(a, n); break;
    }
}
