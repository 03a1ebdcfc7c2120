// The body of strata_attn_head (see attn.h), included by attn.c, attn_avx2.c and attn_avx512.c so
// that each compiles it with its own ISA flags (with FMA, fmaf becomes one instruction and the
// lane loops vectorise). Every fused multiply-add is an explicit fmaf: the build does not
// contract a*b+c on its own (-std=c11), so the results do not depend on the flags.
#ifndef STRATA_ATTN_IMPL_H
#define STRATA_ATTN_IMPL_H

#include <math.h>
#include <string.h>

#include "backend/cpu/attn.h"
#include "util/ggml_float.h"

#define ATTN_MAX_LANES 64   // 4 * VL for VL = 16
#define ATTN_TILE 64        // value dims per pass of the weighted sum

// ggml_vec_dot_f32's reduction of its 4·VL lanes (GGML_F32_VEC_REDUCE): halve to VL lanes, then
// _mm512_reduce_add_ps (VL 16), or for VL 8 halve to 4 and add neighbours (two hadd).
static inline float attn_dot_reduce(float *a, const int vl)
{
    for (int i = 0; i < 2 * vl; i++) a[i] = a[i] + a[i + 2 * vl];
    for (int i = 0; i < vl; i++) a[i] = a[i] + a[i + vl];
    if (vl == 16) return ggml_hsum_lanes(a, 16);
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
            const float e = exp512 ? ggml_vexpf16(s[g + i] - mx) : ggml_vexpf8(s[g + i] - mx);
            s[g + i] = e;
            lane[i] = e;
        }
        for (int i = m; i < vl; i++) lane[i] = 0.0f;
        sum += (double)ggml_hsum_lanes(lane, vl);
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
