// Bodies of the heavy ops_ext operations (the indexer's scores and the Hadamard product),
// included by ops_ext.c (portable) and ops_ext_avx2.c / ops_ext_avx512.c (compiled with their
// ISA flags, where fmaf is one instruction and the lane loops vectorise), as attn_impl.h is.
#ifndef STRATA_OPS_EXT_IMPL_H
#define STRATA_OPS_EXT_IMPL_H

#include "backend/cpu/attn_impl.h"
#include "backend/cpu/ops_ext.h"

static inline float ops_ext_dot_sgemm(const float *a, const float *b, uint32_t n, const int vl)
{
    float acc[16] = {0};
    for (uint32_t l = 0; l < n; l += (uint32_t)vl)
        for (int j = 0; j < vl; j++) acc[j] = fmaf(a[l + j], b[l + j], acc[j]);
    return ggml_hsum_lanes(acc, vl);
}

static inline void ops_ext_hadamard_body(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice,
                                         const int vl)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] = rows_per_slice >= 2 ? ops_ext_dot_sgemm(h + (size_t)i * n, x, n, vl) : attn_dot(h + (size_t)i * n, x, n, vl);
}

static inline void ops_ext_indexer_body(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                                        const float *k, size_t k_stride, int n_kv, const int vl)
{
    for (int p = 0; p < n_kv; p++) {
        const float *kp = k + (size_t)p * k_stride;
        float sc = 0.0f;
        for (uint32_t h = 0; h < n_head; h++) {
            const float qk = attn_dot(q + (size_t)h * d, kp, d, vl);
            sc = fmaf(qk > 0.0f ? qk : 0.0f, w[h], sc);
        }
        score[p] = sc;
    }
}

#endif
