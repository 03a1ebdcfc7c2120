// ggml's polynomial exp of its AVX-512 builds on 16 lanes, for the files compiled with AVX-512
// (attention's softmax, SiLU): the bits of ggml_vexpf16 (util/ggml_float.h) in every lane.
#ifndef STRATA_VEXP_AVX512_H
#define STRATA_VEXP_AVX512_H

#include <immintrin.h>
#include <math.h>

// ggml_vexpf16 on 16 lanes, each operation of the scalar version in its order (the power of two
// of an exponent out of the normal range in two steps, |n| > 192 to 0 or inf).
static inline __m512 vexpf16(__m512 x)
{
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512i ni = _mm512_cvttps_epi32(n), e127 = _mm512_set1_epi32(127);
    const __m512 p2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ni, e127), 23));
    __m512 res = _mm512_mul_ps(j, p2);
    const __mmask16 hi = _mm512_cmpgt_epi32_mask(ni, e127), lo = _mm512_cmplt_epi32_mask(ni, _mm512_set1_epi32(-126));
    if (hi) {  // (j * 2^127) * 2^(n - 127)
        const __m512 ph = _mm512_castsi512_ps(_mm512_slli_epi32(ni, 23));
        res = _mm512_mask_mul_ps(res, hi, _mm512_mul_ps(j, _mm512_set1_ps(0x1p127f)), ph);
    }
    if (lo) {  // (j * 2^-126) * 2^(n + 126)
        const __m512 pl = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(ni, _mm512_set1_epi32(253)), 23));
        res = _mm512_mask_mul_ps(res, lo, _mm512_mul_ps(j, _mm512_set1_ps(0x1p-126f)), pl);
    }
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (big) {
        const __mmask16 neg = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
        res = _mm512_mask_mov_ps(res, big & neg, _mm512_setzero_ps());
        res = _mm512_mask_mov_ps(res, big & (__mmask16)~neg, _mm512_set1_ps(INFINITY));
    }
    return res;
}

#endif
