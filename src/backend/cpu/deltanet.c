// The delta rule of one value head, scalar: the reference its AVX2 / AVX-512 variants
// (deltanet_avx2.c, deltanet_avx512.c) reproduce bit for bit. S is stored [d key][d value], so
// that the d sums of a head (one per value column) run side by side in lanes of up to 16 columns.
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/deltanet.h"

#include <stdbool.h>

// The delta rule of one value head, scalar. Per token t, for every value column j (in lanes of up
// to 16 columns; each column's arithmetic is independent of the others):
//   S[i][j] *= decay_t                  for every key row i (the whole state first)
//   sk_j = sum_i S[i][j] * k_t[i]        from 0.0f, i = 0, 1, ...
//   delta_j = (v_t[j] - sk_j) * beta_t
//   S[i][j] += k_t[i] * delta_j;  sq_j = sum_i S[i][j] * q_t[i]   (row by row, S updated first)
//   o_t[j] = sq_j * scale
// Token t+1's decay and S^T k ride on token t's pass over the rows, so each token reads and
// writes S once; the operations on each element are the same, in the same order.
void strata_deltanet_head(const struct strata_deltanet_head *a)
{
    const uint32_t d = a->d;
    for (uint32_t j0 = 0; j0 < d; j0 += 16) {
        const uint32_t w = d - j0 < 16 ? d - j0 : 16;
        float *S = a->S + j0;
        float sk[16], sq[16], delta[16];
        const float *k = a->k;
        float decay = a->decay[0];
        for (uint32_t j = 0; j < w; j++) sk[j] = 0.0f;
        for (uint32_t i = 0; i < d; i++)
            for (uint32_t j = 0; j < w; j++) {
                S[(size_t)i * d + j] *= decay;
                sk[j] += S[(size_t)i * d + j] * k[i];
            }
        for (int t = 0; t < a->n_tok; t++) {
            const float *q = a->q + (size_t)t * a->qkv_stride, *v = a->v + (size_t)t * a->qkv_stride + j0;
            const float beta = a->beta[(size_t)t * a->gate_stride];
            const bool next = t + 1 < a->n_tok;
            const float *kn = next ? a->k + (size_t)(t + 1) * a->qkv_stride : NULL;
            decay = next ? a->decay[(size_t)(t + 1) * a->gate_stride] : 0.0f;
            for (uint32_t j = 0; j < w; j++) {
                delta[j] = (v[j] - sk[j]) * beta;
                sk[j] = 0.0f;
                sq[j] = 0.0f;
            }
            for (uint32_t i = 0; i < d; i++) {
                float *Si = S + (size_t)i * d;
                for (uint32_t j = 0; j < w; j++) {
                    Si[j] += k[i] * delta[j];
                    sq[j] += Si[j] * q[i];
                }
                if (next)
                    for (uint32_t j = 0; j < w; j++) {
                        Si[j] *= decay;
                        sk[j] += Si[j] * kn[i];
                    }
            }
            float *o = a->o + (size_t)t * a->o_stride + j0;
            for (uint32_t j = 0; j < w; j++) o[j] = sq[j] * a->scale;
            k = kn;
        }
    }
}
