// The indexer's scores and the Hadamard product for the AVX-512 ggml builds (16 lanes), compiled with
// AVX-512 + FMA (ops_ext_impl.h has the bodies).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/ops_ext_impl.h"

#include <immintrin.h>
#include <math.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/vexp_avx512.h"

void strata_hadamard_apply_avx512(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice)
{
    ops_ext_hadamard_body(y, x, h, n, rows_per_slice, 16);
}

void strata_indexer_scores_avx512(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                              const float *k, size_t k_stride, int n_kv)
{
    ops_ext_indexer_body(score, q, w, n_head, d, k, k_stride, n_kv, 16);
}

// ggml_v_silu of the AVX-512 builds, times u (NULL: none): the bits of strata_silu (ops.h).
void strata_swiglu_avx512(float *y, const float *g, const float *u, size_t n)
{
    const __m512 zero = _mm512_setzero_ps(), one = _mm512_set1_ps(1.0f);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(g + i);
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, vexpf16(_mm512_sub_ps(zero, x))));
        _mm512_storeu_ps(y + i, u ? _mm512_mul_ps(s, _mm512_loadu_ps(u + i)) : s);
    }
    strata_swiglu_scalar(y + i, g + i, u ? u + i : NULL, n - i);
}
