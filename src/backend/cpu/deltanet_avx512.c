// strata_deltanet_head with AVX-512: the scalar reference's operations (deltanet.c), 16 value
// columns per register, tiles of up to 64 columns whose d key rows stay in L1 over the chunk's
// tokens. Products and sums are separate instructions (no fused multiply-add), so every lane
// rounds as the scalar code does.
#include <immintrin.h>

#include "backend/cpu/deltanet.h"

// Columns j0 .. j0 + 16 * nvec of the head, every token.
static inline __attribute__((always_inline)) void head_tile(const struct strata_deltanet_head *a, uint32_t j0,
                                                            const int nvec)
{
    const uint32_t d = a->d;
    float *S = a->S + j0;
    __m512 sk[4], sq[4], delta[4];
    const float *k = a->k;
    __m512 decay = _mm512_set1_ps(a->decay[0]);
    for (int u = 0; u < nvec; u++) sk[u] = _mm512_setzero_ps();
    for (uint32_t i = 0; i < d; i++) {
        const __m512 ki = _mm512_set1_ps(k[i]);
        for (int u = 0; u < nvec; u++) {
            const __m512 s = _mm512_mul_ps(_mm512_loadu_ps(S + (size_t)i * d + 16 * u), decay);
            _mm512_storeu_ps(S + (size_t)i * d + 16 * u, s);
            sk[u] = _mm512_add_ps(sk[u], _mm512_mul_ps(s, ki));
        }
    }
    for (int t = 0; t < a->n_tok; t++) {
        const float *q = a->q + (size_t)t * a->qkv_stride, *v = a->v + (size_t)t * a->qkv_stride + j0;
        const __m512 beta = _mm512_set1_ps(a->beta[(size_t)t * a->gate_stride]);
        for (int u = 0; u < nvec; u++) {
            delta[u] = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(v + 16 * u), sk[u]), beta);
            sk[u] = _mm512_setzero_ps();
            sq[u] = _mm512_setzero_ps();
        }
        if (t + 1 < a->n_tok) {
            const float *kn = a->k + (size_t)(t + 1) * a->qkv_stride;
            decay = _mm512_set1_ps(a->decay[(size_t)(t + 1) * a->gate_stride]);
            for (uint32_t i = 0; i < d; i++) {
                const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]), kni = _mm512_set1_ps(kn[i]);
                float *Si = S + (size_t)i * d;
                for (int u = 0; u < nvec; u++) {
                    __m512 s = _mm512_add_ps(_mm512_loadu_ps(Si + 16 * u), _mm512_mul_ps(ki, delta[u]));
                    sq[u] = _mm512_add_ps(sq[u], _mm512_mul_ps(s, qi));
                    s = _mm512_mul_ps(s, decay);
                    sk[u] = _mm512_add_ps(sk[u], _mm512_mul_ps(s, kni));
                    _mm512_storeu_ps(Si + 16 * u, s);
                }
            }
            k = kn;
        } else {
            for (uint32_t i = 0; i < d; i++) {
                const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
                float *Si = S + (size_t)i * d;
                for (int u = 0; u < nvec; u++) {
                    const __m512 s = _mm512_add_ps(_mm512_loadu_ps(Si + 16 * u), _mm512_mul_ps(ki, delta[u]));
                    sq[u] = _mm512_add_ps(sq[u], _mm512_mul_ps(s, qi));
                    _mm512_storeu_ps(Si + 16 * u, s);
                }
            }
        }
        const __m512 scale = _mm512_set1_ps(a->scale);
        float *o = a->o + (size_t)t * a->o_stride + j0;
        for (int u = 0; u < nvec; u++) _mm512_storeu_ps(o + 16 * u, _mm512_mul_ps(sq[u], scale));
    }
}

void strata_deltanet_head_avx512(const struct strata_deltanet_head *a)
{
    uint32_t j0 = 0;
    for (; j0 + 64 <= a->d; j0 += 64) head_tile(a, j0, 4);
    for (; j0 < a->d; j0 += 16) head_tile(a, j0, 1);
}
