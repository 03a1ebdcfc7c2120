// Private to the attention (fattn.c and its ISA files): the per-ISA kernel table and the portable
// bodies of its kernels, included by every ISA file so each compiles them with its own flags.
// Every multiply-add is an explicit fmaf and every sum has a fixed order, so vectorising a loop
// changes nothing: the scalar build, AVX2 and AVX-512 give the same bits (test_fattn checks).
#ifndef STRATA_BACKEND_CPU_FATTN_IMPL_H
#define STRATA_BACKEND_CPU_FATTN_IMPL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backend/cpu/fattn.h"

// Rows of one tile (queries of tokens sharing a KV head) at most; the scores of a tile are
// [FATTN_MAX_ROWS][STRATA_KV_BLOCK].
#define FATTN_MAX_ROWS 64

struct fattn_kernels {
    // s[r * s_stride + j] = (sum_d q[r * dk + d] * kt[g][d][j % 16]) * scale for the rows r < rows
    // and keys j < 16 * groups (kt: groups of [dk][16] floats).
    void (*scores)(const float *q, int rows, const float *kt, int groups, uint32_t dk, float scale, float *s,
                   size_t s_stride);
    // o[r * dv + e] = sum_{j < n_keys} p[r * p_stride + j] * v[j * dv + e].
    void (*pv)(const float *p, size_t p_stride, int rows, int n_keys, const float *v, uint32_t dv, float *o);
    // Row r's scores s[r][0..n_valid[r]) to exp(s - m) in place (zero from n_valid[r] to n_keys),
    // m[r] their maximum, l[r] their sum (fattn.h's lane order).
    void (*softmax)(float *s, size_t s_stride, int rows, const int *n_valid, int n_keys, float *m, float *l);
    // Q8_0 keys of `groups` groups (kv.h's layout) to floats [groups][dk][16] (exact).
    void (*keys_q8_0)(const uint8_t *keys, int groups, uint32_t dk, float *kt);
    // Fold a segment's (m, l, o[dv]) into the running (M, L, O) of one row (fattn.h); first: the
    // row's first segment.
    void (*fold)(float *M, float *L, float *O, float m, float l, const float *o, uint32_t dv, int first);
};

extern const struct fattn_kernels fattn_kernels_scalar;
extern const struct fattn_kernels fattn_kernels_avx2;
extern const struct fattn_kernels fattn_kernels_avx512;

static inline float fattn_bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

// IEEE half to float, exactly (as F16C's vcvtph2ps).
static inline float fattn_half(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0) {
        const float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    if (exp == 31) return fattn_bits_f(sign | 0x7f800000u | (mant << 13));
    return fattn_bits_f(sign | ((exp + 112) << 23) | (mant << 13));
}

// exp(x) for x <= 0 (softmax arguments are at most 0): Cody-Waite reduction to b in
// [-ln2/2, ln2/2], ggml's degree-5 polynomial, times 2^n built in the exponent bits; x < -87
// (below the smallest normal result) gives 0, and exp(0) is exactly 1. The argument is clamped
// to -87 before the integer conversion (as max_ps does in the vector version: NaN too).
static inline float fattn_exp(float x)
{
    const float xc = x > -87.0f ? x : -87.0f;
    const float r = 0x1.8p23f;
    const float z = fmaf(xc, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, xc));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    const int32_t e = (int32_t)n + 127;  // n in [-126, 0]
    const float p2 = fattn_bits_f((uint32_t)e << 23);
    return x < -87.0f ? 0.0f : j * p2;
}

// The 16 lanes summed as a halving tree: (i, i + 8), then (i, i + 4), (i, i + 2), (i, i + 1).
static inline float fattn_tree16(float *a)
{
    for (int h = 8; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) a[i] = a[i] + a[i + h];
    return a[0];
}

static inline void fattn_scores_body(const float *q, int rows, const float *kt, int groups, uint32_t dk, float scale,
                                     float *s, size_t s_stride)
{
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < groups; g++) {
            float acc[16] = {0};
            const float *k = kt + (size_t)g * dk * 16;
            for (uint32_t d = 0; d < dk; d++)
                for (int i = 0; i < 16; i++) acc[i] = fmaf(q[(size_t)r * dk + d], k[(size_t)d * 16 + i], acc[i]);
            for (int i = 0; i < 16; i++) s[(size_t)r * s_stride + 16 * g + i] = acc[i] * scale;
        }
}

static inline void fattn_pv_body(const float *p, size_t p_stride, int rows, int n_keys, const float *v, uint32_t dv,
                                 float *o)
{
    for (int r = 0; r < rows; r++) {
        float *orow = o + (size_t)r * dv;
        for (uint32_t e = 0; e < dv; e++) orow[e] = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            const float w = p[(size_t)r * p_stride + j];
            const float *vr = v + (size_t)j * dv;
            for (uint32_t e = 0; e < dv; e++) orow[e] = fmaf(w, vr[e], orow[e]);
        }
    }
}

static inline void fattn_softmax_body(float *s, size_t s_stride, int rows, const int *n_valid, int n_keys, float *m,
                                      float *l)
{
    for (int r = 0; r < rows; r++) {
        float *row = s + (size_t)r * s_stride;
        const int nv = n_valid[r];
        float mx = -INFINITY;
        for (int j = 0; j < nv; j++) mx = row[j] > mx ? row[j] : mx;
        float lanes[16] = {0};
        for (int j = 0; j < n_keys; j++) {
            const float e = j < nv ? fattn_exp(row[j] - mx) : 0.0f;
            row[j] = e;
            lanes[j % 16] = lanes[j % 16] + e;
        }
        m[r] = mx;
        l[r] = fattn_tree16(lanes);
    }
}

static inline void fattn_keys_q8_0_body(const uint8_t *keys, int groups, uint32_t dk, float *kt)
{
    const size_t blk_bytes = 16 * 2 + 32 * 16;
    for (int g = 0; g < groups; g++)
        for (uint32_t c = 0; c < dk / 32; c++) {
            const uint8_t *blk = keys + ((size_t)g * (dk / 32) + c) * blk_bytes;
            float d[16];
            for (int i = 0; i < 16; i++) {
                uint16_t h;
                memcpy(&h, blk + 2 * i, 2);
                d[i] = fattn_half(h);
            }
            float *out = kt + ((size_t)g * dk + 32 * c) * 16;
            for (int e = 0; e < 32; e++)
                for (int i = 0; i < 16; i++) out[e * 16 + i] = d[i] * (float)(int8_t)blk[32 + e * 16 + i];
        }
}

static inline void fattn_fold_body(float *M, float *L, float *O, float m, float l, const float *o, uint32_t dv, int first)
{
    if (first) {
        *M = m, *L = l;
        memcpy(O, o, (size_t)dv * sizeof(float));
        return;
    }
    const float mm = *M > m ? *M : m;
    const float a = fattn_exp(*M - mm), c = fattn_exp(m - mm);
    *L = fmaf(*L, a, l * c);
    for (uint32_t e = 0; e < dv; e++) O[e] = fmaf(O[e], a, o[e] * c);
    *M = mm;
}

// The kernel table NAME of the portable bodies, compiled with the including file's flags.
#define FATTN_PORTABLE_TABLE(name)                                                                             \
    static void scores_##name(const float *q, int rows, const float *kt, int groups, uint32_t dk, float scale,  \
                              float *s, size_t s_stride)                                                       \
    {                                                                                                          \
        fattn_scores_body(q, rows, kt, groups, dk, scale, s, s_stride);                                        \
    }                                                                                                          \
    static void pv_##name(const float *p, size_t p_stride, int rows, int n_keys, const float *v, uint32_t dv,   \
                          float *o)                                                                            \
    {                                                                                                          \
        fattn_pv_body(p, p_stride, rows, n_keys, v, dv, o);                                                    \
    }                                                                                                          \
    static void softmax_##name(float *s, size_t s_stride, int rows, const int *n_valid, int n_keys, float *m,    \
                               float *l)                                                                       \
    {                                                                                                          \
        fattn_softmax_body(s, s_stride, rows, n_valid, n_keys, m, l);                                          \
    }                                                                                                          \
    static void keys_q8_0_##name(const uint8_t *keys, int groups, uint32_t dk, float *kt)                      \
    {                                                                                                          \
        fattn_keys_q8_0_body(keys, groups, dk, kt);                                                            \
    }                                                                                                          \
    static void fold_##name(float *M, float *L, float *O, float m, float l, const float *o, uint32_t dv,        \
                            int first)                                                                         \
    {                                                                                                          \
        fattn_fold_body(M, L, O, m, l, o, dv, first);                                                          \
    }                                                                                                          \
    const struct fattn_kernels fattn_kernels_##name = {scores_##name, pv_##name, softmax_##name,             \
                                                       keys_q8_0_##name, fold_##name};

#endif
