// strata_deltanet_head with AVX2: the scalar reference's operations (deltanet.c), 8 value
// columns per register, tiles of up to 16 columns whose d key rows stay in L1 over the chunk's
// tokens. Products and sums are separate instructions (no fused multiply-add), so every lane
// rounds as the scalar code does.
#include <immintrin.h>

#include "backend/cpu/deltanet.h"

// Columns j0 .. j0 + 8 * nvec of the head, every token.
static inline __attribute__((always_inline)) void head_tile(const struct strata_deltanet_head *a, uint32_t j0,
                                                            const int nvec)
{
    const uint32_t d = a->d;
    float *S = a->S + j0;
    __m256 sk[2], sq[2], delta[2];
    const float *k = a->k;
    __m256 decay = _mm256_set1_ps(a->decay[0]);
    for (int u = 0; u < nvec; u++) sk[u] = _mm256_setzero_ps();
    for (uint32_t i = 0; i < d; i++) {
        const __m256 ki = _mm256_set1_ps(k[i]);
        for (int u = 0; u < nvec; u++) {
            const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(S + (size_t)i * d + 8 * u), decay);
            _mm256_storeu_ps(S + (size_t)i * d + 8 * u, s);
            sk[u] = _mm256_add_ps(sk[u], _mm256_mul_ps(s, ki));
        }
    }
    for (int t = 0; t < a->n_tok; t++) {
        const float *q = a->q + (size_t)t * a->qkv_stride, *v = a->v + (size_t)t * a->qkv_stride + j0;
        const __m256 beta = _mm256_set1_ps(a->beta[(size_t)t * a->gate_stride]);
        for (int u = 0; u < nvec; u++) {
            delta[u] = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + 8 * u), sk[u]), beta);
            sk[u] = _mm256_setzero_ps();
            sq[u] = _mm256_setzero_ps();
        }
        if (t + 1 < a->n_tok) {
            const float *kn = a->k + (size_t)(t + 1) * a->qkv_stride;
            decay = _mm256_set1_ps(a->decay[(size_t)(t + 1) * a->gate_stride]);
            for (uint32_t i = 0; i < d; i++) {
                const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]), kni = _mm256_set1_ps(kn[i]);
                float *Si = S + (size_t)i * d;
                for (int u = 0; u < nvec; u++) {
                    __m256 s = _mm256_add_ps(_mm256_loadu_ps(Si + 8 * u), _mm256_mul_ps(ki, delta[u]));
                    sq[u] = _mm256_add_ps(sq[u], _mm256_mul_ps(s, qi));
                    s = _mm256_mul_ps(s, decay);
                    sk[u] = _mm256_add_ps(sk[u], _mm256_mul_ps(s, kni));
                    _mm256_storeu_ps(Si + 8 * u, s);
                }
            }
            k = kn;
        } else {
            for (uint32_t i = 0; i < d; i++) {
                const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
                float *Si = S + (size_t)i * d;
                for (int u = 0; u < nvec; u++) {
                    const __m256 s = _mm256_add_ps(_mm256_loadu_ps(Si + 8 * u), _mm256_mul_ps(ki, delta[u]));
                    sq[u] = _mm256_add_ps(sq[u], _mm256_mul_ps(s, qi));
                    _mm256_storeu_ps(Si + 8 * u, s);
                }
            }
        }
        const __m256 scale = _mm256_set1_ps(a->scale);
        float *o = a->o + (size_t)t * a->o_stride + j0;
        for (int u = 0; u < nvec; u++) _mm256_storeu_ps(o + 8 * u, _mm256_mul_ps(sq[u], scale));
    }
}

void strata_deltanet_head_avx2(const struct strata_deltanet_head *a)
{
    uint32_t j0 = 0;
    for (; j0 + 16 <= a->d; j0 += 16) head_tile(a, j0, 2);
    for (; j0 < a->d; j0 += 8) head_tile(a, j0, 1);
}
