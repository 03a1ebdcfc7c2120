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
#define ATTN_GROUP STRATA_ATTN_GROUP

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

// Softmax of the scores s[p0 .. n_kv) in place, mx their maximum (without the sink): exp and their
// sum as a float tree per aligned group of VL cells, the groups added in double; masked cells
// (-inf) become 0.
static inline void attn_softmax(float *s, int p0, int n_kv, float mx, const float *sink, const int vl,
                                const int exp512)
{
    if (sink) mx = mx > *sink ? mx : *sink;
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
    if (sink) sum += (double)expf(*sink - mx);
    const float inv = (float)(1.0 / sum);
    for (int p = p0; p < n_kv; p++) s[p] *= inv;
}

// The tree of ggml's kernel over the nl lane accumulators of nd value dims (rows from `used` on
// read as zero: adding +0 changes nothing) into out; acc is overwritten.
static inline void attn_lane_tree(float (*acc)[ATTN_TILE], int used, int nl, int nd, float *out)
{
    static const float zero[ATTN_TILE];
    const float *row[ATTN_MAX_LANES];
    for (int r = 0; r < nl; r++) row[r] = r < used ? acc[r] : zero;
    for (int h = nl / 2; h >= 1; h /= 2) {
        for (int i = 0; i < h; i++) {
            for (int d = 0; d < nd; d++) acc[i][d] = row[i][d] + row[i + h][d];
            row[i] = acc[i];
        }
    }
    for (int d = 0; d < nd; d++) out[d] = row[0][d];
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
    attn_softmax(s, p0, n_kv, mx, a->sink, vl, exp512);

    // the weighted sum of values: nl lane accumulators per value dim (lane = cell mod nl), then
    // the tree of the kernel ggml uses. Lanes no cell reached hold zero and are left out of the
    // tree (adding +0 changes nothing: an accumulator that starts at +0 never becomes -0).
    const int nl = vl;
    const int used = p0 > 0 || vis ? nl : n_kv < nl ? n_kv : nl;
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
        attn_lane_tree(acc, used, nl, nd, a->out + d0);
    }
}

// attn_head_body for g queries that share everything but q, scores, out and sink (the heads of
// one token over one key head: MLA's single latent head): each key and value row is read once for
// the g of them. Every head's arithmetic is attn_head_body's, in its order, so each output has the
// same bits as attn_head_body on that query alone.
static inline void attn_heads_body(const struct strata_attn_query *a, int g, const int vl, const int exp512)
{
    const int n_kv = a->n_kv, p0 = a->kv_start;
    const uint8_t *vis = a->visible;
    float mx[ATTN_GROUP];
    for (int i = 0; i < g; i++) mx[i] = -INFINITY;
    for (int p = p0; p < n_kv; p++) {
        if (vis && !vis[p]) {
            for (int i = 0; i < g; i++) a[i].scores[p] = -INFINITY;
            continue;
        }
        const float *kp = attn_row(a->k, a->k_stride, a->kv_ring, p);
        for (int i = 0; i < g; i++) {
            const float sc = attn_dot(kp, a[i].q, a->D, vl) * a->scale;
            a[i].scores[p] = sc;
            mx[i] = sc > mx[i] ? sc : mx[i];
        }
    }
    for (int i = 0; i < g; i++) attn_softmax(a[i].scores, p0, n_kv, mx[i], a[i].sink, vl, exp512);
    const int nl = vl;
    const int used = p0 > 0 || vis ? nl : n_kv < nl ? n_kv : nl;
    for (uint32_t d0 = 0; d0 < a->Dv; d0 += ATTN_TILE) {
        const int nd = a->Dv - d0 < ATTN_TILE ? (int)(a->Dv - d0) : ATTN_TILE;
        float acc[ATTN_GROUP][16][ATTN_TILE];
        for (int i = 0; i < g; i++)
            for (int r = 0; r < used; r++)
                for (int d = 0; d < nd; d++) acc[i][r][d] = 0.0f;
        for (int p = p0, r = p0 % nl; p < n_kv; p++, r = r + 1 == nl ? 0 : r + 1) {
            if (vis && !vis[p]) continue;  // weight 0: the lanes are unchanged
            const float *vp = attn_row(a->v, a->v_stride, a->kv_ring, p) + d0;
            for (int i = 0; i < g; i++) {
                const float w = a[i].scores[p];
                float *ar = acc[i][r];
                for (int d = 0; d < nd; d++) ar[d] = fmaf(vp[d], w, ar[d]);
            }
        }
        for (int i = 0; i < g; i++) attn_lane_tree(acc[i], used, nl, nd, a[i].out + d0);
    }
}

// ---- rows: queries of several tokens and heads over one key head (strata_attn_rows) --------------
// Each query's arithmetic is attn_head_body's in its order; only the loops are tiled. Scores a
// row computes past its n_kv are dropped; its weights there are set to +0, so that the kqv can run
// every row of a tile over the same positions: fmaf(v, +0, acc) leaves acc as it is (acc is never
// -0), and a lane no cell of the row reached stays +0, which the tree adds without a change.

#define ATTN_MR 4    // query rows per kq tile
#define ATTN_NR 6    // positions per kq tile
#define ATTN_PB 96   // positions whose keys every row of the call takes in turn (they stay in cache)
#define ATTN_VR 6    // query rows per kqv tile

// s = (k_p . q) * scale for the rows a[0 .. mr) and positions [j0, j0 + nr), as attn_dot computes it.
static inline void attn_rows_kq_port(const struct strata_attn_query *a, int mr, int j0, int nr, const int vl)
{
    const int nl = 4 * vl;
    const uint32_t D = a->D, np = D & ~(uint32_t)(nl - 1);
    float acc[ATTN_MR][ATTN_NR][ATTN_MAX_LANES];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            for (int l = 0; l < nl; l++) acc[i][j][l] = 0.0f;
    for (uint32_t d = 0; d < np; d += (uint32_t)nl)
        for (int j = 0; j < nr; j++) {
            const float *x = a->k + (size_t)(j0 + j) * a->k_stride + d;
            for (int i = 0; i < mr; i++) {
                const float *y = a[i].q + d;
                float *ac = acc[i][j];
                for (int l = 0; l < nl; l++) ac[l] = fmaf(x[l], y[l], ac[l]);
            }
        }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            const float *x = a->k + (size_t)(j0 + j) * a->k_stride, *y = a[i].q;
            float s = attn_dot_reduce(acc[i][j], vl);
            for (uint32_t t = np; t < D; t++) s = fmaf(x[t], y[t], s);
            a[i].scores[j0 + j] = s * a->scale;
        }
}

// out[d0 .. d0 + nd) of the rows a[0 .. mr) from their weights over positions [P0, P) (P0 a
// multiple of 16: lane r takes the positions p = r mod vl).
static inline void attn_rows_kqv_port(const struct strata_attn_query *a, int mr, int P0, int P, uint32_t d0, int nd,
                                      const int vl)
{
    float acc[ATTN_VR][16][ATTN_TILE];
    for (int i = 0; i < mr; i++)
        for (int r = 0; r < vl; r++)
            for (int d = 0; d < nd; d++) acc[i][r][d] = 0.0f;
    for (int p = P0, r = 0; p < P; p++, r = r + 1 == vl ? 0 : r + 1) {
        const float *vp = a->v + (size_t)p * a->v_stride + d0;
        for (int i = 0; i < mr; i++) {
            const float w = a[i].scores[p];
            float *ar = acc[i][r];
            for (int d = 0; d < nd; d++) ar[d] = fmaf(vp[d], w, ar[d]);
        }
    }
    for (int i = 0; i < mr; i++) attn_lane_tree(acc[i], vl, vl, nd, a[i].out + d0);
}

// Row s[p0 .. n_kv) to its softmax weights as attn_head_body makes them: masked cells -inf (0 after),
// the maximum of the others and the sink, attn_softmax.
static inline void attn_rows_softmax_port(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink,
                                          const int vl, const int exp512)
{
    float mx = -INFINITY;
    for (int p = p0; p < n_kv; p++) {
        if (vis && !vis[p]) {
            s[p] = -INFINITY;
            continue;
        }
        mx = s[p] > mx ? s[p] : mx;
    }
    attn_softmax(s, p0, n_kv, mx, sink, vl, exp512);
}

typedef void (*attn_rows_kq_fn)(const struct strata_attn_query *a, int mr, int j0, int nr);
typedef void (*attn_rows_kqv_fn)(const struct strata_attn_query *a, int mr, int P0, int P, uint32_t d0, int nd);
typedef void (*attn_rows_softmax_fn)(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink);

static inline int attn_rows_reach(const struct strata_attn_query *a, int m)
{
    int r = 0;
    for (int i = 0; i < m; i++) r = a[i].n_kv > r ? a[i].n_kv : r;
    return r;
}

// Whether any of the rows a[0 .. m) sees a position of [j0, j0 + nr) (windows and masks only: the
// caller stops at the rows' reach).
static inline int attn_rows_any_visible(const struct strata_attn_query *a, int m, int j0, int nr)
{
    for (int i = 0; i < m; i++) {
        if (j0 + nr <= a[i].kv_start) continue;
        if (!a[i].visible) return 1;
        for (int j = 0; j < nr; j++)
            if (a[i].visible[j0 + j]) return 1;
    }
    return 0;
}

static inline void attn_rows_body(const struct strata_attn_query *a, int n, attn_rows_kq_fn kq,
                                  attn_rows_softmax_fn softmax, attn_rows_kqv_fn kqv)
{
    const int P = attn_rows_reach(a, n);
    // kq, a block of positions at a time for every row, tiles of ATTN_MR rows x ATTN_NR positions
    for (int p0 = 0; p0 < P; p0 += ATTN_PB) {
        const int pe = P - p0 < ATTN_PB ? P : p0 + ATTN_PB;
        for (int i0 = 0; i0 < n; i0 += ATTN_MR) {
            const int mr = n - i0 < ATTN_MR ? n - i0 : ATTN_MR, reach = attn_rows_reach(a + i0, mr);
            const int end = pe < reach ? pe : reach;
            for (int j0 = p0; j0 < end; j0 += ATTN_NR) {
                const int nr = end - j0 < ATTN_NR ? end - j0 : ATTN_NR;
                if (attn_rows_any_visible(a + i0, mr, j0, nr)) kq(a + i0, mr, j0, nr);
            }
        }
    }
    // softmax per row over its window (masked cells -inf, as attn_head_body; the sink in the
    // maximum and the sum)
    for (int i = 0; i < n; i++) softmax(a[i].scores, a[i].kv_start, a[i].n_kv, a[i].visible, a[i].sink);
    // kqv, tiles of ATTN_VR rows x ATTN_TILE value dims over the positions their rows reach, from
    // the first lane block any of them sees; weights outside a row's window +0 (attn_head_body's
    // lanes that no cell reached: adding +0 leaves the tree as it is)
    for (int i0 = 0; i0 < n; i0 += ATTN_VR) {
        const int mr = n - i0 < ATTN_VR ? n - i0 : ATTN_VR, reach = attn_rows_reach(a + i0, mr);
        int P0 = reach;
        for (int i = i0; i < i0 + mr; i++) P0 = a[i].kv_start < P0 ? a[i].kv_start : P0;
        P0 -= P0 % 16;
        for (int i = i0; i < i0 + mr; i++) {
            for (int p = P0; p < a[i].kv_start; p++) a[i].scores[p] = 0.0f;
            for (int p = a[i].n_kv; p < reach; p++) a[i].scores[p] = 0.0f;
        }
        for (uint32_t d0 = 0; d0 < a->Dv; d0 += ATTN_TILE) {
            const int nd = a->Dv - d0 < ATTN_TILE ? (int)(a->Dv - d0) : ATTN_TILE;
            kqv(a + i0, mr, P0, reach, d0, nd);
        }
    }
}

#endif
