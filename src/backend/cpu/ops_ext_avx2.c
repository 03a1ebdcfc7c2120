// The indexer's scores and the Hadamard product for the AVX2 ggml builds (8 lanes), compiled with
// AVX2 + FMA (ops_ext_impl.h has the bodies).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/ops_ext_impl.h"

void strata_hadamard_apply_avx2(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice)
{
    ops_ext_hadamard_body(y, x, h, n, rows_per_slice, 8);
}

void strata_indexer_scores_avx2(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                                const float *k, size_t k_stride, int n_kv)
{
    ops_ext_indexer_body(score, q, w, n_head, d, k, k_stride, n_kv, 8);
}
