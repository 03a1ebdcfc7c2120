// The elementwise steps a decode step runs on the calling thread (cpu.c: below STRATA_PAR_MIN),
// with AVX2 + FMA: the same operations as the scalar loops of cpu.c and ops.c, element by element,
// 8 at a time. Products and sums stay separate where the scalar code rounds them apart (this file
// is built with -std=c11, so the compiler contracts nothing), and the rotation's fmaf is the
// single-rounding FMA instruction: the same bits as the scalar code on every element.
#include <immintrin.h>
#include <math.h>

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

// strata_rmsnorm, 8 squares at a time: the squares rounded to float (one product each, as the
// scalar loop), widened and added in 16 double chains; the bound of ops.c's mean_sq decides the
// float or sends the row to the one chain; then (x * scale) * w, two roundings as the scalar loop.
void strata_rmsnorm_avx2(float *y, const float *x, const float *w, uint32_t n, float eps)
{
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        const __m256 qa = _mm256_mul_ps(a, a), qb = _mm256_mul_ps(b, b);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(qa)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(qa, 1)));
        s2 = _mm256_add_pd(s2, _mm256_cvtps_pd(_mm256_castps256_ps128(qb)));
        s3 = _mm256_add_pd(s3, _mm256_cvtps_pd(_mm256_extractf128_ps(qb, 1)));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = strata_mean_sq_decide(x, n, sum);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 vs = _mm256_set1_ps(scale);
    i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

// ggml_vexpf16's operations 8 lanes at a time (fused multiply-adds where it has fmaf; the
// polynomial of vexp_avx512.h, which AVX2 code cannot include), 2^n built in the exponent bits;
// lanes whose n is past the normal powers (|x| above about 87) take the scalar function, which
// splits the power as vscalefps rounds. u NULL: silu(g) alone.
void strata_swiglu_avx2(float *y, const float *g, const float *u, size_t n)
{
    const __m256 r = _mm256_set1_ps(0x1.8p23f), zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f);
    const __m256 lim = _mm256_set1_ps(126.0f), absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i), xn = _mm256_sub_ps(zero, x);
        const __m256 z = _mm256_fmadd_ps(xn, _mm256_set1_ps(0x1.715476p+0f), r);
        const __m256 nn = _mm256_sub_ps(z, r);
        const __m256 b = _mm256_fnmadd_ps(nn, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                          _mm256_fnmadd_ps(nn, _mm256_set1_ps(0x1.62e4p-1f), xn));
        const __m256 uu = _mm256_mul_ps(b, b);
        const __m256 j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), uu,
                            _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
            uu, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, one));
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(nn, absm), lim, _CMP_NLE_UQ))) {
            strata_swiglu_scalar(y + i, g + i, u ? u + i : NULL, 8);
            continue;
        }
        const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nn), _mm256_set1_epi32(127)), 23);
        const __m256 ex = _mm256_mul_ps(j, _mm256_castsi256_ps(e));
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, ex));
        _mm256_storeu_ps(y + i, u ? _mm256_mul_ps(s, _mm256_loadu_ps(u + i)) : s);
    }
    strata_swiglu_scalar(y + i, g + i, u ? u + i : NULL, n - i);
}
