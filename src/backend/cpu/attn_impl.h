// The body of strata_attn_head (see attn.h), included by attn.c, attn_avx2.c and attn_avx512.c so
// that each compiles it with its own ISA flags (with FMA, fmaf becomes one instruction and the
// lane loops vectorise). Every fused multiply-add is an explicit fmaf: the build does not
// contract a*b+c on its own (-std=c11), so the results do not depend on the flags.
#ifndef STRATA_ATTN_IMPL_H
#define STRATA_ATTN_IMPL_H

#include <math.h>
#include <string.h>

#include "backend/cpu/attn.h"

#define ATTN_MAX_LANES 64   // 4 * VL for VL = 16
#define ATTN_TILE 64        // value dims per pass of the weighted sum

static inline float attn_bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t attn_f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// 2^n for -126 <= n <= 127.
static inline float attn_pow2i(int n) { return attn_bits_f((uint32_t)(n + 127) << 23); }

// ggml_v_expf of the AVX-512 builds: j * 2^n by vscalefps (one rounding).
static inline float attn_exp_avx512(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    const int ni = (int)n;
    // j * 2^n exactly rounded once: split the power when it is not a normal float
    if (ni > 127) return (j * attn_pow2i(127)) * attn_pow2i(ni - 127);
    if (ni < -126) return (j * attn_pow2i(-126)) * attn_pow2i(ni + 126);
    return j * attn_pow2i(ni);
}

// ggml_v_expf of the AVX2 builds: k + k*j with k = 2^n built in the exponent bits.
static inline float attn_exp_avx2(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = attn_f_bits(z) << 23;
    const float k = attn_bits_f(e + attn_f_bits(1.0f));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, 0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = attn_bits_f(g + 0x7f000000u);
    const float s2 = attn_bits_f(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

// The horizontal sum of VL lanes (_mm512_reduce_add_ps, or the AVX2 hsum / soft_max reduce):
// a pairwise tree that halves the lane count each step.
static inline float attn_hsum(float *a, const int vl)
{
    for (int h = vl / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) a[i] = a[i] + a[i + h];
    return a[0];
}

// ggml_vec_dot_f32's reduction of its 4·VL lanes (GGML_F32_VEC_REDUCE): halve to VL lanes, then
// _mm512_reduce_add_ps (VL 16), or for VL 8 halve to 4 and add neighbours (two hadd).
static inline float attn_dot_reduce(float *a, const int vl)
{
    for (int i = 0; i < 2 * vl; i++) a[i] = a[i] + a[i + 2 * vl];
    for (int i = 0; i < vl; i++) a[i] = a[i] + a[i + vl];
    if (vl == 16) return attn_hsum(a, 16);
    for (int i = 0; i < 4; i++) a[i] = a[i] + a[i + 4];
    return (a[0] + a[1]) + (a[2] + a[3]);
}

// ggml_vec_dot_f32(n, x, y).
static inline float attn_dot(const float *x, const float *y, uint32_t n, const int vl)
{
    const int nl = 4 * vl;
    float acc[ATTN_MAX_LANES];
    for (int i = 0; i < nl; i++) acc[i] = 0.0f;
    const uint32_t np = n & ~(uint32_t)(nl - 1);
    for (uint32_t i = 0; i < np; i += (uint32_t)nl)
        for (int j = 0; j < nl; j++) acc[j] = fmaf(x[i + j], y[i + j], acc[j]);
    float s = attn_dot_reduce(acc, vl);
    for (uint32_t i = np; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

static inline const float *attn_row(const float *base, size_t stride, int ring, int p)
{
    return base + (size_t)(ring ? p % ring : p) * stride;
}

static inline void attn_head_body(const struct strata_attn_query *a, const int vl, const int exp512)
{
    const int n_kv = a->n_kv, p0 = a->kv_start;
    const uint8_t *vis = a->visible;
    float *s = a->scores;

    // kq, scaled; the maximum (masked cells: -inf, as ggml's mask makes them)
    float mx = -INFINITY;
    for (int p = p0; p < n_kv; p++) {
        if (vis && !vis[p]) {
            s[p] = -INFINITY;
            continue;
        }
        s[p] = attn_dot(attn_row(a->k, a->k_stride, a->kv_ring, p), a->q, a->D, vl) * a->scale;
        mx = s[p] > mx ? s[p] : mx;
    }
    if (a->sink) mx = mx > *a->sink ? mx : *a->sink;

    // exp and their sum: a float tree per aligned group of VL cells, the groups added in double
    double sum = 0.0;
    for (int g = p0 / vl * vl; g < n_kv; g += vl) {
        float lane[16];
        const int m = n_kv - g < vl ? n_kv - g : vl;
        for (int i = 0; i < m; i++) {
            if (g + i < p0 || s[g + i] == -INFINITY) {
                lane[i] = 0.0f;
                if (g + i >= p0) s[g + i] = 0.0f;
                continue;
            }
            const float e = exp512 ? attn_exp_avx512(s[g + i] - mx) : attn_exp_avx2(s[g + i] - mx);
            s[g + i] = e;
            lane[i] = e;
        }
        for (int i = m; i < vl; i++) lane[i] = 0.0f;
        sum += (double)attn_hsum(lane, vl);
    }
    if (a->sink) sum += (double)expf(*a->sink - mx);
    const float inv = (float)(1.0 / sum);
    for (int p = p0; p < n_kv; p++) s[p] *= inv;

    // the weighted sum of values: nl lane accumulators per value dim (lane = cell mod nl), then
    // the tree of the kernel ggml uses. Lanes no cell reached hold zero and are left out of the
    // tree (adding +0 changes nothing: an accumulator that starts at +0 never becomes -0).
    const int nl = vl;
    const int used = p0 > 0 || vis ? nl : n_kv < nl ? n_kv : nl;
    static const float zero[ATTN_TILE];
    for (uint32_t d0 = 0; d0 < a->Dv; d0 += ATTN_TILE) {
        const int nd = a->Dv - d0 < ATTN_TILE ? (int)(a->Dv - d0) : ATTN_TILE;
        float acc[ATTN_MAX_LANES][ATTN_TILE];
        for (int r = 0; r < used; r++)
            for (int d = 0; d < nd; d++) acc[r][d] = 0.0f;
        for (int p = p0, r = p0 % nl; p < n_kv; p++, r = r + 1 == nl ? 0 : r + 1) {
            const float w = s[p];
            if (vis && !vis[p]) continue;  // weight 0: the lane is unchanged
            const float *vp = attn_row(a->v, a->v_stride, a->kv_ring, p) + d0;
            float *ar = acc[r];
            for (int d = 0; d < nd; d++) ar[d] = fmaf(vp[d], w, ar[d]);
        }
        // rows beyond `used` read as zero
        const float *row[ATTN_MAX_LANES];
        for (int r = 0; r < nl; r++) row[r] = r < used ? acc[r] : zero;
        for (int h = nl / 2; h >= 1; h /= 2) {
            for (int i = 0; i < h; i++) {
                for (int d = 0; d < nd; d++) acc[i][d] = row[i][d] + row[i + h][d];
                row[i] = acc[i];
            }
        }
        float *out = a->out + d0;
        for (int d = 0; d < nd; d++) out[d] = row[0][d];
    }
}

#endif
