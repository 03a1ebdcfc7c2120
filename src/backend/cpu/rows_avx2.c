// The elementwise steps a decode step runs on the calling thread (cpu.c: below STRATA_PAR_MIN),
// with AVX2 + FMA: the same operations as the scalar loops of cpu.c and ops.c, element by element,
// 8 at a time. Products and sums stay separate where the scalar code rounds them apart (this file
// is built with -std=c11, so the compiler contracts nothing), and the rotation's fmaf is the
// single-rounding FMA instruction: the same bits as the scalar code on every element.
#include <immintrin.h>

#include "backend/cpu/ops.h"

void strata_scale_row_avx2(float *acc, const float *d, float w, uint32_t n)
{
    const __m256 vw = _mm256_set1_ps(w);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_mul_ps(vw, _mm256_loadu_ps(d + i)));
    for (; i < n; i++) acc[i] = w * d[i];
}

void strata_axpy_row_avx2(float *acc, const float *d, float w, uint32_t n)
{
    const __m256 vw = _mm256_set1_ps(w);
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i,
                         _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(vw, _mm256_loadu_ps(d + i))));
    for (; i < n; i++) acc[i] = acc[i] + w * d[i];
}

void strata_add_rows2_avx2(float *x, const float *acc, const float *sh, uint32_t n)
{
    uint32_t i = 0;
    if (sh) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i),
                                                  _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_loadu_ps(sh + i))));
        for (; i < n; i++) x[i] += acc[i] + sh[i];
    } else {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(acc + i)));
        for (; i < n; i++) x[i] += acc[i];
    }
}

void strata_rope_apply_avx2(float *x, const float *cs, uint32_t n_rot)
{
    const uint32_t half = n_rot / 2;
    uint32_t i = 0;
    for (; i + 8 <= half; i += 8) {
        // cs holds (cos, sin) pairs: 16 floats, split into 8 cosines and 8 sines
        const __m256 a = _mm256_loadu_ps(cs + 2 * i), b = _mm256_loadu_ps(cs + 2 * i + 8);
        const __m256 lo = _mm256_permute2f128_ps(a, b, 0x20), hi = _mm256_permute2f128_ps(a, b, 0x31);
        const __m256 c = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
        const __m256 s = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
        const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + half);
        _mm256_storeu_ps(x + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
        _mm256_storeu_ps(x + i + half, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
    }
    for (; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[i], x1 = x[i + half];
        x[i] = __builtin_fmaf(x0, c, -(x1 * s));
        x[i + half] = __builtin_fmaf(x0, s, x1 * c);
    }
}
