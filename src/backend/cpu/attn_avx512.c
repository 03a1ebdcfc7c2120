// strata_attn_head for the AVX-512 ggml builds (16 lanes), compiled with AVX-512 + FMA; the tiles
// of strata_attn_rows in intrinsics (the portable ones in attn_impl.h are the reference).
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include <immintrin.h>

#include "backend/cpu/attn_impl.h"
#include "backend/cpu/vexp_avx512.h"

void strata_attn_head_vl16_avx512(const struct strata_attn_query *a) { attn_head_body(a, 16, 1); }
void strata_attn_heads_vl16_avx512(const struct strata_attn_query *a, int g) { attn_heads_body(a, g, 16, 1); }

// The 16 lanes summed as ggml_hsum_lanes does: (i, i + 8), (i, i + 4), (i, i + 2), (i, i + 1).
static inline float hsum16(__m512 v)
{
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// attn_rows_kq_port for 16 lanes: the 64 lane accumulators of a dot are 4 vectors (lane 16c + l);
// each vector c is its own chain over d = 64 s + 16 c, so the tile runs c at a time with
// ATTN_MR x ATTN_NR chains in registers. Missing rows and positions of a tail tile repeat the
// first and are not stored.
static void kq16(const struct strata_attn_query *a, int mr, int j0, int nr)
{
    const float *q[ATTN_MR], *k[ATTN_NR];
    for (int i = 0; i < ATTN_MR; i++) q[i] = a[i < mr ? i : 0].q;
    for (int j = 0; j < ATTN_NR; j++) k[j] = a->k + (size_t)(j0 + (j < nr ? j : 0)) * a->k_stride;
    const uint32_t D = a->D, np = D & ~63u;
    __m512 part[4][ATTN_MR][ATTN_NR];
    for (int c = 0; c < 4; c++) {
        __m512 acc[ATTN_MR][ATTN_NR];
#pragma GCC unroll 8
        for (int i = 0; i < ATTN_MR; i++)
#pragma GCC unroll 8
            for (int j = 0; j < ATTN_NR; j++) acc[i][j] = _mm512_setzero_ps();
        for (uint32_t d = 16u * (uint32_t)c; d < np; d += 64) {
            __m512 qv[ATTN_MR];
#pragma GCC unroll 8
            for (int i = 0; i < ATTN_MR; i++) qv[i] = _mm512_loadu_ps(q[i] + d);
#pragma GCC unroll 8
            for (int j = 0; j < ATTN_NR; j++) {
                const __m512 kv = _mm512_loadu_ps(k[j] + d);
#pragma GCC unroll 8
                for (int i = 0; i < ATTN_MR; i++) acc[i][j] = _mm512_fmadd_ps(kv, qv[i], acc[i][j]);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < ATTN_MR; i++)
#pragma GCC unroll 8
            for (int j = 0; j < ATTN_NR; j++) part[c][i][j] = acc[i][j];
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            // attn_dot_reduce: lanes (i, i + 32), then (i, i + 16), then the 16-lane tree
            const __m512 v = _mm512_add_ps(_mm512_add_ps(part[0][i][j], part[2][i][j]),
                                           _mm512_add_ps(part[1][i][j], part[3][i][j]));
            float s = hsum16(v);
            for (uint32_t t = np; t < D; t++) s = fmaf(k[j][t], q[i][t], s);
            a[i].scores[j0 + j] = s * a->scale;
        }
}

// attn_rows_kqv_port for 16 lanes: lane r (positions r, r + 16, ...) of ATTN_VR rows x 64 value
// dims in registers at a time, the 16 lanes' sums kept for the tree.
static void kqv16(const struct strata_attn_query *a, int mr, int P0, int P, uint32_t d0, int nd)
{
    const float *w[ATTN_VR];
    for (int i = 0; i < ATTN_VR; i++) w[i] = a[i < mr ? i : 0].scores;
    __mmask16 m[4];
    for (int k = 0; k < 4; k++) {
        const int left = nd - 16 * k;
        m[k] = left >= 16 ? (__mmask16)0xffff : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1);
    }
    __m512 part[16][ATTN_VR][4];
    for (int r = 0; r < 16; r++) {
        __m512 acc[ATTN_VR][4];
#pragma GCC unroll 8
        for (int i = 0; i < ATTN_VR; i++)
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) acc[i][k] = _mm512_setzero_ps();
        for (int p = P0 + r; p < P; p += 16) {
            const float *vp = a->v + (size_t)p * a->v_stride + d0;
            const char *pf = (const char *)(vp + 32 * a->v_stride);
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + 64, _MM_HINT_T0);
            _mm_prefetch(pf + 128, _MM_HINT_T0);
            _mm_prefetch(pf + 192, _MM_HINT_T0);
            __m512 vv[4];
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) vv[k] = _mm512_maskz_loadu_ps(m[k], vp + 16 * k);
#pragma GCC unroll 8
            for (int i = 0; i < ATTN_VR; i++) {
                const __m512 wb = _mm512_set1_ps(w[i][p]);
#pragma GCC unroll 4
                for (int k = 0; k < 4; k++) acc[i][k] = _mm512_fmadd_ps(vv[k], wb, acc[i][k]);
            }
        }
        for (int i = 0; i < ATTN_VR; i++)
            for (int k = 0; k < 4; k++) part[r][i][k] = acc[i][k];
    }
    // attn_lane_tree: (r, r + 8), (r, r + 4), (r, r + 2), (r, r + 1)
    for (int h = 8; h >= 1; h /= 2)
        for (int r = 0; r < h; r++)
            for (int i = 0; i < mr; i++)
                for (int k = 0; k < 4; k++) part[r][i][k] = _mm512_add_ps(part[r][i][k], part[r + h][i][k]);
    for (int i = 0; i < mr; i++)
        for (int k = 0; k < 4; k++) _mm512_mask_storeu_ps(a[i].out + d0 + 16 * k, m[k], part[0][i][k]);
}

// attn_rows_softmax_port for 16 lanes: the maximum by lanes (max_ps keeps its second operand
// unless the first is greater, as the scalar loop; which of two zeros wins changes no s - max),
// attn_softmax's groups of 16 cells as vectors, from the group holding p0 (its cells before p0
// neither read nor written, a 0 in the group's sum), the sink in the maximum and the sum.
static inline __mmask16 rows_cells(int g, int p0, int n_kv)
{
    __mmask16 t = n_kv - g >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n_kv - g)) - 1);
    if (g < p0) t &= (__mmask16)(0xffffu << (p0 - g));
    return t;
}

void strata_attn_rows_softmax_vl16_avx512(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink)
{
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const int g0 = p0 - p0 % 16;
    __m512 mv = ninf;
    for (int g = g0; g < n_kv; g += 16) {
        const __mmask16 t = rows_cells(g, p0, n_kv);
        __m512 v = _mm512_mask_loadu_ps(ninf, t, s + g);
        if (vis) {
            const __mmask16 seen = _mm_test_epi8_mask(_mm_maskz_loadu_epi8(t, vis + g), _mm_set1_epi8(-1));
            v = _mm512_mask_mov_ps(ninf, seen, v);
            _mm512_mask_storeu_ps(s + g, t, v);
        }
        mv = _mm512_max_ps(v, mv);
    }
    float lane[16], mx = -INFINITY;
    _mm512_storeu_ps(lane, mv);
    for (int i = 0; i < 16; i++) mx = lane[i] > mx ? lane[i] : mx;
    if (sink) mx = mx > *sink ? mx : *sink;
    const __m512 m = _mm512_set1_ps(mx);
    double sum = 0.0;
    for (int g = g0; g < n_kv; g += 16) {
        const __mmask16 t = rows_cells(g, p0, n_kv);
        const __m512 v = _mm512_maskz_loadu_ps(t, s + g);
        const __mmask16 live = t & _mm512_cmp_ps_mask(v, ninf, _CMP_NEQ_UQ);
        const __m512 e = _mm512_maskz_mov_ps(live, vexpf16(_mm512_sub_ps(v, m)));
        _mm512_mask_storeu_ps(s + g, t, e);
        sum += (double)hsum16(e);
    }
    if (sink) sum += (double)expf(*sink - mx);
    const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
    for (int g = g0; g < n_kv; g += 16) {
        const __mmask16 t = rows_cells(g, p0, n_kv);
        _mm512_mask_storeu_ps(s + g, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, s + g), inv));
    }
}

void strata_attn_rows_vl16_avx512(const struct strata_attn_query *a, int n)
{
    attn_rows_body(a, n, kq16, strata_attn_rows_softmax_vl16_avx512, kqv16);
}
