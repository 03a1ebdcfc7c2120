// The attention kernels (fattn_impl.h) in AVX-512: scores as 8 query rows x 32 keys of register
// accumulators (a broadcast query value times 16 keys per fused multiply-add, over dk), the
// weighted values as 4 rows x 64 value elements, the softmax with fattn_exp in 16 lanes. Each
// computes exactly the operations of the portable bodies, in the same order per element.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include <immintrin.h>

#include "backend/cpu/fattn_impl.h"

static void scores_avx512(const float *q, int rows, const float *kt, int groups, uint32_t dk, float scale, float *s,
                          size_t s_stride)
{
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int nr = rows - r0 < 8 ? rows - r0 : 8;
        const float *qr[8];
        for (int r = 0; r < 8; r++) qr[r] = q + (size_t)(r0 + (r < nr ? r : nr - 1)) * dk;
        for (int g0 = 0; g0 < groups; g0 += 2) {
            const int two = g0 + 1 < groups;
            const float *k0 = kt + (size_t)g0 * dk * 16, *k1 = two ? k0 + (size_t)dk * 16 : k0;
            __m512 acc[8][2];
            for (int r = 0; r < 8; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
            for (uint32_t d = 0; d < dk; d++) {
                const __m512 a = _mm512_load_ps(k0 + (size_t)d * 16), b = _mm512_load_ps(k1 + (size_t)d * 16);
                for (int r = 0; r < 8; r++) {
                    const __m512 qv = _mm512_set1_ps(qr[r][d]);
                    acc[r][0] = _mm512_fmadd_ps(qv, a, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(qv, b, acc[r][1]);
                }
            }
            for (int r = 0; r < nr; r++) {
                float *out = s + (size_t)(r0 + r) * s_stride + (size_t)g0 * 16;
                _mm512_storeu_ps(out, _mm512_mul_ps(acc[r][0], sc));
                if (two) _mm512_storeu_ps(out + 16, _mm512_mul_ps(acc[r][1], sc));
            }
        }
    }
}

static void pv_avx512(const float *p, size_t p_stride, int rows, int n_keys, const float *v, uint32_t dv, float *o)
{
    if (dv % 16) {
        fattn_pv_body(p, p_stride, rows, n_keys, v, dv, o);
        return;
    }
    for (int r0 = 0; r0 < rows; r0 += 4) {
        const int nr = rows - r0 < 4 ? rows - r0 : 4;
        const float *pr[4];
        for (int r = 0; r < 4; r++) pr[r] = p + (size_t)(r0 + (r < nr ? r : nr - 1)) * p_stride;
        for (uint32_t e0 = 0; e0 < dv; e0 += 64) {
            const int nv = dv - e0 < 64 ? (int)(dv - e0) / 16 : 4;
            __m512 acc[4][4];
            for (int r = 0; r < 4; r++)
                for (int i = 0; i < 4; i++) acc[r][i] = _mm512_setzero_ps();
            if (nv == 4) {
                for (int j = 0; j < n_keys; j++) {
                    const float *vr = v + (size_t)j * dv + e0;
                    const __m512 v0 = _mm512_loadu_ps(vr), v1 = _mm512_loadu_ps(vr + 16);
                    const __m512 v2 = _mm512_loadu_ps(vr + 32), v3 = _mm512_loadu_ps(vr + 48);
                    for (int r = 0; r < 4; r++) {
                        const __m512 w = _mm512_set1_ps(pr[r][j]);
                        acc[r][0] = _mm512_fmadd_ps(w, v0, acc[r][0]);
                        acc[r][1] = _mm512_fmadd_ps(w, v1, acc[r][1]);
                        acc[r][2] = _mm512_fmadd_ps(w, v2, acc[r][2]);
                        acc[r][3] = _mm512_fmadd_ps(w, v3, acc[r][3]);
                    }
                }
            } else {
                for (int j = 0; j < n_keys; j++) {
                    const float *vr = v + (size_t)j * dv + e0;
                    for (int r = 0; r < 4; r++) {
                        const __m512 w = _mm512_set1_ps(pr[r][j]);
                        for (int i = 0; i < nv; i++) acc[r][i] = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 16 * i), acc[r][i]);
                    }
                }
            }
            for (int r = 0; r < nr; r++)
                for (int i = 0; i < nv; i++) _mm512_storeu_ps(o + (size_t)(r0 + r) * dv + e0 + 16 * i, acc[r][i]);
        }
    }
}

// fattn_exp in 16 lanes, operation for operation.
static inline __m512 exp16(__m512 x)
{
    const __m512 xc = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));  // NaN -> -87, as fattn_exp
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(xc, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), xc));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    const __m512i e = _mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(127));
    const __m512 res = _mm512_mul_ps(j, _mm512_castsi512_ps(_mm512_slli_epi32(e, 23)));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ), res);
}

static void softmax_avx512(float *s, size_t s_stride, int rows, const int *n_valid, int n_keys, float *m, float *l)
{
    for (int r = 0; r < rows; r++) {
        float *row = s + (size_t)r * s_stride;
        const int nv = n_valid[r];
        __m512 mx = _mm512_set1_ps(-INFINITY);
        for (int j = 0; j < nv; j += 16) {
            const __mmask16 k = nv - j >= 16 ? 0xffff : (__mmask16)((1u << (nv - j)) - 1);
            mx = _mm512_mask_max_ps(mx, k, mx, _mm512_maskz_loadu_ps(k, row + j));
        }
        const float mxs = _mm512_reduce_max_ps(mx);
        const __m512 mv = _mm512_set1_ps(mxs);
        __m512 lanes = _mm512_setzero_ps();
        for (int j = 0; j < n_keys; j += 16) {
            const __mmask16 k = nv - j >= 16 ? 0xffff : nv - j <= 0 ? 0 : (__mmask16)((1u << (nv - j)) - 1);
            const __mmask16 all = n_keys - j >= 16 ? 0xffff : (__mmask16)((1u << (n_keys - j)) - 1);
            const __m512 e = _mm512_maskz_mov_ps(k, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), mv)));
            _mm512_mask_storeu_ps(row + j, all, e);
            lanes = _mm512_add_ps(lanes, e);
        }
        float a[16];
        _mm512_storeu_ps(a, lanes);
        m[r] = mxs;
        l[r] = fattn_tree16(a);
    }
}

static void keys_q8_0_avx512(const uint8_t *keys, int groups, uint32_t dk, float *kt)
{
    const size_t blk_bytes = 16 * 2 + 32 * 16;
    for (int g = 0; g < groups; g++)
        for (uint32_t c = 0; c < dk / 32; c++) {
            const uint8_t *blk = keys + ((size_t)g * (dk / 32) + c) * blk_bytes;
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)blk));
            float *out = kt + ((size_t)g * dk + 32 * c) * 16;
            for (int e = 0; e < 32; e++)
                _mm512_storeu_ps(out + e * 16,
                                 _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk + 32 + e * 16))))));
        }
}

static void fold_avx512(float *M, float *L, float *O, float m, float l, const float *o, uint32_t dv, int first)
{
    fattn_fold_body(M, L, O, m, l, o, dv, first);
}

const struct fattn_kernels fattn_kernels_avx512 = {scores_avx512, pv_avx512, softmax_avx512, keys_q8_0_avx512,
                                                   fold_avx512};
