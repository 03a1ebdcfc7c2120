// AVX-512 VNNI level of the GEMM: the tile kernel (16 tokens in the lanes of a zmm, 4 weight
// rows at a time) and the canonical dots (gemm.h) of Q8_0, MXFP4, Q4_0 (one code for the
// blocks of 32 against Q8_0: dot_b32), Q4_K, Q5_K and Q6_K.
//
// Tile kernel. The tile holds 4 consecutive activation bytes of 16 tokens per zmm, + 128 so that
// they are the unsigned operand of vpdpbusd; each instruction multiplies them with 4 weight bytes
// of one row broadcast to every lane (an embedded-broadcast memory operand) and adds the 4
// products into the token's int32 lane. Per sub-block: the lanes times the row's integer scale
// (vpmulld); per block: minus the record's 128 correction, then one fused multiply-add per lane
// with dw * da, and the mins as int16 pairs (vpdpwssd) with one more. Two accumulators per row
// alternate across the 4-byte steps so that 8 vpdpbusd chains are in flight.
//
// Canonical dots. The block loops of the quant kernels (element-order unpacking, maddubs, the
// sub-block scales folded in by vpdpwssd) with the canonical float part: the block's int32
// lanes are summed to one integer, then the same scalar fmaf sequence as every level.
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "backend/cpu/gemm_impl.h"

#define ROWS 4   // weight rows per register tile

// ---- tile kernel ------------------------------------------------------------------------------

// ROWS records times G tiles; X accumulators per (record, tile) alternate over the 4-byte steps
// so that 8 vpdpbusd chains are in flight.
static inline __attribute__((always_inline)) void panel_body(const struct gemm_rec_layout *L,
                                                              const struct gemm_tile_layout *T, const uint8_t *recs,
                                                              int n_rows, const uint8_t *const *tiles, float *out,
                                                              const uint32_t qb, const uint32_t sb, const bool mins,
                                                              const bool unit, const bool wu8, const int G)
{
    enum { X_MAX = 2 };
    const int X = G == 1 ? 2 : 1;
    const uint32_t nb = L->nb, nsub = qb / sb, steps = sb / 4;
    for (int r0 = 0; r0 < n_rows; r0 += ROWS) {
        const uint8_t *rec[ROWS];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < ROWS; i++) rec[i] = recs + (size_t)(r0 + i < n_rows ? r0 + i : n_rows - 1) * L->bytes;
        __m512 acc[ROWS][2];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < ROWS; i++)
            _Pragma("GCC unroll 2")
            for (int t = 0; t < G; t++) acc[i][t] = _mm512_setzero_ps();
        for (uint32_t b = 0; b < nb; b++) {
            __m512i s1[ROWS][2];
            _Pragma("GCC unroll 8")
            for (int i = 0; i < ROWS; i++)
                _Pragma("GCC unroll 2")
                for (int t = 0; t < G; t++) s1[i][t] = _mm512_setzero_si512();
            for (uint32_t j = 0; j < nsub; j++) {
                __m512i x[ROWS][2][X_MAX];
                _Pragma("GCC unroll 8")
                for (int i = 0; i < ROWS; i++)
                    _Pragma("GCC unroll 2")
                    for (int t = 0; t < G; t++)
                        _Pragma("GCC unroll 2")
                        for (int u = 0; u < X; u++) x[i][t][u] = _mm512_setzero_si512();
                const size_t step0 = (size_t)b * (qb / 4) + j * steps;  // 4-byte step of the row
                _Pragma("GCC unroll 8")
                for (uint32_t k = 0; k < steps; k++) {
                    __m512i a[2];
                    _Pragma("GCC unroll 2")
                    for (int t = 0; t < G; t++) a[t] = _mm512_load_si512(tiles[t] + (step0 + k) * 64);
                    _Pragma("GCC unroll 8")
                    for (int i = 0; i < ROWS; i++) {
                        const __m512i w = gemm_bcast4(rec[i] + (step0 + k) * 4);
                        _Pragma("GCC unroll 2")
                        for (int t = 0; t < G; t++)
                            x[i][t][k % X] = wu8 ? _mm512_dpbusd_epi32(x[i][t][k % X], w, a[t])
                                                 : _mm512_dpbusd_epi32(x[i][t][k % X], a[t], w);
                    }
                }
                _Pragma("GCC unroll 8")
                for (int i = 0; i < ROWS; i++) {
                    const __m512i sc = unit ? _mm512_setzero_si512() : gemm_bcast4(rec_sc(L, rec[i]) + (size_t)b * nsub + j);
                    _Pragma("GCC unroll 2")
                    for (int t = 0; t < G; t++) {
                        const __m512i part = X == 2 ? _mm512_add_epi32(x[i][t][0], x[i][t][X - 1]) : x[i][t][0];
                        s1[i][t] = _mm512_add_epi32(s1[i][t], unit ? part : _mm512_mullo_epi32(part, sc));
                    }
                }
            }
            __m512 d[2];
            _Pragma("GCC unroll 2")
            for (int t = 0; t < G; t++) d[t] = _mm512_load_ps(tile_da(T, tiles[t]) + (size_t)b * 16);
            _Pragma("GCC unroll 8")
            for (int i = 0; i < ROWS; i++) {
                const __m512i corr = wu8 ? _mm512_setzero_si512() : gemm_bcast4(rec_corr(L, rec[i]) + b);
                const __m512 dw = _mm512_castsi512_ps(gemm_bcast4(rec_dw(L, rec[i]) + b));
                _Pragma("GCC unroll 2")
                for (int t = 0; t < G; t++)
                    acc[i][t] = _mm512_fmadd_ps(_mm512_mul_ps(dw, d[t]), _mm512_cvtepi32_ps(_mm512_sub_epi32(s1[i][t], corr)),
                                                acc[i][t]);
            }
            if (mins) {
                _Pragma("GCC unroll 8")
                for (int i = 0; i < ROWS; i++) {
                    const int32_t *mp = rec_mp(L, rec[i]) + (size_t)b * (nsub / 2);
                    const __m512 ndmin = _mm512_castsi512_ps(gemm_bcast4(rec_ndmin(L, rec[i]) + b));
                    _Pragma("GCC unroll 2")
                    for (int t = 0; t < G; t++) {
                        const int32_t *asum = tile_asum(T, tiles[t]) + (size_t)b * (nsub / 2) * 16;
                        __m512i s2 = _mm512_setzero_si512();
                        _Pragma("GCC unroll 8")
                        for (uint32_t k = 0; k < nsub / 2; k++)
                            s2 = _mm512_dpwssd_epi32(s2, _mm512_load_si512(asum + k * 16), gemm_bcast4(mp + k));
                        acc[i][t] = _mm512_fmadd_ps(_mm512_mul_ps(ndmin, d[t]), _mm512_cvtepi32_ps(s2), acc[i][t]);
                    }
                }
            }
        }
        for (int i = 0; i < ROWS && r0 + i < n_rows; i++)
            for (int t = 0; t < G; t++) _mm512_store_ps(out + ((size_t)(r0 + i) * G + t) * 16, acc[i][t]);
    }
}

#define PANEL(qb, sb, mins, unit, wu8)                                                          \
    do {                                                                                        \
        if (n_tiles == 2) panel_body(L, T, recs, n_rows, tiles, out, qb, sb, mins, unit, wu8, 2); \
        else panel_body(L, T, recs, n_rows, tiles, out, qb, sb, mins, unit, wu8, 1);              \
    } while (0)

void gemm_panel_avx512(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                         const uint8_t *recs, int n_rows, const uint8_t *const *tiles, int n_tiles, float *out)
{
    switch (f->wtype) {
    case STRATA_TYPE_Q8_0:
    case STRATA_TYPE_MXFP4:
    case STRATA_TYPE_Q4_0: PANEL(QK8_0, QK8_0, false, true, false); break;
    case STRATA_TYPE_Q4_K:
    case STRATA_TYPE_Q5_K: PANEL(QK_K, 32, true, false, true); break;
    case STRATA_TYPE_Q6_K:
    case STRATA_TYPE_IQ2_XS:
    case STRATA_TYPE_IQ1_M:
    case STRATA_TYPE_Q3_K: PANEL(QK_K, 16, false, false, false); break;
    case STRATA_TYPE_IQ2_XXS:
    case STRATA_TYPE_IQ3_XXS:
    case STRATA_TYPE_IQ4_XS: PANEL(QK_K, 32, false, false, false); break;
    case STRATA_TYPE_Q2_K: PANEL(QK_K, 16, true, false, true); break;
    default: break;
    }
}

// ---- canonical dots ---------------------------------------------------------------------------

// One row's integer sums of 4 blocks reduced together: pair(a, b) holds a's and b's lanes summed
// in pairs, interleaved (a, b, a, b per 128 bits); pair64(pair(v0, v1), pair(v2, v3)) holds
// v0..v3 per 128 bits, and fold4 sums the 128-bit parts: lane i = the sum of every lane of v_i
// (4 shuffles a block for S1 and S2 instead of 7 with a horizontal sum each).
static inline __attribute__((always_inline)) __m512i strata_pair_epi32(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
}
static inline __attribute__((always_inline)) __m512i strata_pair64_epi32(__m512i a, __m512i b)
{
    return _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
}
static inline __attribute__((always_inline)) __m128i strata_fold4_epi32(__m512i v)
{
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
static inline __attribute__((always_inline)) __m256i strata_pair256_epi32(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}
static inline __attribute__((always_inline)) __m256i strata_pair64_256_epi32(__m256i a, __m256i b)
{
    return _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}
static inline __attribute__((always_inline)) __m128i strata_fold4_256_epi32(__m256i v)
{
    return _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
}

// The canonical float part of up to 4 blocks (n_valid) in order: acc = fmaf(f1[i], r1[i], acc)
// and, with mins, acc = fmaf(f2[i], r2[i], acc) after it. Lanes by shuffles: a store and scalar
// loads would stall on store forwarding in the accumulator's chain.
static inline __attribute__((always_inline)) float fmaf_group4(float acc, __m128 r1, const float *f1, __m128 r2,
                                                               const float *f2, bool mins, int64_t n_valid)
{
    const __m128 l1[4] = {r1, _mm_movehdup_ps(r1), _mm_movehl_ps(r1, r1), _mm_shuffle_ps(r1, r1, 3)};
    const __m128 l2[4] = {r2, _mm_movehdup_ps(r2), _mm_movehl_ps(r2, r2), _mm_shuffle_ps(r2, r2, 3)};
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++) {
        if (i >= n_valid) break;
        acc = __builtin_fmaf(f1[i], _mm_cvtss_f32(l1[i]), acc);
        if (mins) acc = __builtin_fmaf(f2[i], _mm_cvtss_f32(l2[i]), acc);
    }
    return acc;
}

// vpermw indices: int16 lane i takes scale first + i / run.
static inline __m512i scale_index(int first, int run)
{
    short idx[32];
    for (int i = 0; i < 32; i++) idx[i] = (short)(first + i / run);
    return _mm512_loadu_si512(idx);
}

// One half (128 elements) of a Q6_K block as two zmm of quants in element order.
static inline void q6_half_quants(const uint8_t *ql64, const uint8_t *qh32, __m512i *q_first, __m512i *q_second)
{
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    __m512i ql = _mm512_loadu_si512(ql64);
    __m512i qh = broadcast_shift(qh32, 0, 2);
    *q_first = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45), ql, low4, 0xf8);
    *q_second = _mm512_ternarylogic_epi32(_mm512_and_si512(qh, bits45), _mm512_srli_epi16(ql, 4), low4, 0xf8);
}

// ---- scatter ----------------------------------------------------------------------------------

void gemm_scatter_avx512(const float *out, int n_tiles, int i, float *const *y, int n_act, int n_rows)
{
    __m512 v[16], t[16];
    _Pragma("GCC unroll 16")
    for (int r = 0; r < 16; r++) v[r] = _mm512_load_ps(out + ((size_t)r * n_tiles + i) * 16);
    // Rows (2i, 2i + 1) interleaved, then pairs of them: t[4i + j]'s 128-bit lane k holds token
    // 4k + j of rows 4i .. 4i + 3.
    _Pragma("GCC unroll 8")
    for (int p = 0; p < 8; p++) {
        t[2 * p] = _mm512_unpacklo_ps(v[2 * p], v[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(v[2 * p], v[2 * p + 1]);
    }
    _Pragma("GCC unroll 4")
    for (int q = 0; q < 4; q++) {
        const __m512d a = _mm512_castps_pd(t[4 * q]), b = _mm512_castps_pd(t[4 * q + 1]);
        const __m512d c = _mm512_castps_pd(t[4 * q + 2]), d = _mm512_castps_pd(t[4 * q + 3]);
        v[4 * q] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        v[4 * q + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        v[4 * q + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        v[4 * q + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    // Token 4k + j: lane k of v[j], v[4 + j], v[8 + j], v[12 + j].
    const __mmask16 m = (__mmask16)((1u << n_rows) - 1);
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        const __m512 p0 = _mm512_shuffle_f32x4(v[j], v[4 + j], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 p1 = _mm512_shuffle_f32x4(v[j], v[4 + j], _MM_SHUFFLE(3, 1, 3, 1));
        const __m512 q0 = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], _MM_SHUFFLE(2, 0, 2, 0));
        const __m512 q1 = _mm512_shuffle_f32x4(v[8 + j], v[12 + j], _MM_SHUFFLE(3, 1, 3, 1));
        t[j] = _mm512_shuffle_f32x4(p0, q0, _MM_SHUFFLE(2, 0, 2, 0));
        t[4 + j] = _mm512_shuffle_f32x4(p1, q1, _MM_SHUFFLE(2, 0, 2, 0));
        t[8 + j] = _mm512_shuffle_f32x4(p0, q0, _MM_SHUFFLE(3, 1, 3, 1));
        t[12 + j] = _mm512_shuffle_f32x4(p1, q1, _MM_SHUFFLE(3, 1, 3, 1));
    }
    for (int l = 0; l < n_act; l++) _mm512_mask_storeu_ps(y[l], m, t[l]);
}

// ---- unpacking ---------------------------------------------------------------------------------

// The blocks of 32 against Q8_0 (Q8_0, MXFP4, Q4_0): their values, scale 1, corr, the factor.
static inline __attribute__((always_inline)) void unpack_b32(const struct gemm_rec_layout *L, const void *row,
                                                             uint8_t *rec, const uint32_t type)
{
    int8_t *w = (int8_t *)rec;
    int32_t *sc = (int32_t *)(rec + L->off_sc), *corr = (int32_t *)(rec + L->off_corr);
    float *dw = (float *)(rec + L->off_dw);
    const size_t bb = gemm_b32_bytes(type);
    for (uint32_t b = 0; b < L->nb; b++) {
        const uint8_t *x = (const uint8_t *)row + b * bb;
        strata_prefetch_ahead(x, (int)bb);
        const __m256i q = gemm_b32_values(x, type);
        _mm256_storeu_si256((__m256i *)(w + (size_t)b * 32), q);
        // sum of (w + 128) over the block, minus 32 * 128
        const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
        const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
        sc[b] = 1;
        corr[b] = 128 * ((int32_t)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128);
        dw[b] = gemm_b32_factor(x, type);
    }
}

// gemm_unpack_row (gemm.c) in AVX-512: the same record bytes, but corr is not written for
// Q4_K/Q5_K (their unsigned weights need no correction in the tile kernel).
void gemm_unpack_avx512(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec)
{
    int8_t *w = (int8_t *)rec;
    int32_t *sc = (int32_t *)(rec + L->off_sc), *corr = (int32_t *)(rec + L->off_corr);
    float *dw = (float *)(rec + L->off_dw);
    const __m512i zero = _mm512_setzero_si512();
    switch (f->wtype) {
    case STRATA_TYPE_Q4_K:
    case STRATA_TYPE_Q5_K: {
        const bool five = f->wtype == STRATA_TYPE_Q5_K;
        for (uint32_t b = 0; b < L->nb; b++) {
            const uint8_t *qs;
            __m512i qh;
            const __m128i sm = gemm_k45_block(L, row, b, five, rec, &qs, &qh, STRATA_PREFETCH_AHEAD);  // 8 scales, 8 mins
            _mm256_storeu_si256((__m256i *)(sc + b * 8), _mm256_cvtepu8_epi32(sm));
            _mm_storeu_si128((__m128i *)(rec + L->off_mp + (size_t)b * 16), _mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)));
            for (int c = 0; c < 4; c++)
                _mm512_storeu_si512(w + (size_t)b * QK_K + 64 * c, k_chunk_quants(qs + 32 * c, five ? &qh : NULL, five ? q5_select(c) : zero));
        }
        break;
    }
    case STRATA_TYPE_Q6_K: {
        // corr: the sums of 8 values (vpsadbw of q = w + 32) times the scale of their sub-block
        int32_t idx[4][16];
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 16; i++) idx[c][i] = 4 * c + i / 4;
        const struct block_q6_k *x = row;
        for (uint32_t b = 0; b < L->nb; b++) {
            strata_prefetch_ahead(x + b, sizeof(struct block_q6_k));
            __m512i q[4];
            q6_half_quants(x[b].ql, x[b].qh, &q[0], &q[1]);
            q6_half_quants(x[b].ql + 64, x[b].qh + 32, &q[2], &q[3]);
            const __m512i s16 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)x[b].scales));
            _mm512_storeu_si512(sc + b * 16, s16);
            __m512i acc = zero;
            for (int c = 0; c < 4; c++) {
                _mm512_storeu_si512(w + (size_t)b * QK_K + 64 * c, _mm512_sub_epi8(q[c], _mm512_set1_epi8(32)));
                const __m512i sums = _mm512_sub_epi64(_mm512_sad_epu8(q[c], zero), _mm512_set1_epi64(8 * 32));
                acc = _mm512_add_epi64(acc, _mm512_mul_epi32(sums, _mm512_permutexvar_epi32(_mm512_loadu_si512(idx[c]), s16)));
            }
            corr[b] = 128 * (int32_t)_mm512_reduce_add_epi64(acc);
            dw[b] = _cvtsh_ss(x[b].d);
        }
        break;
    }
    case STRATA_TYPE_Q8_0: unpack_b32(L, row, rec, STRATA_TYPE_Q8_0); break;
    case STRATA_TYPE_MXFP4: unpack_b32(L, row, rec, STRATA_TYPE_MXFP4); break;
    case STRATA_TYPE_Q4_0: unpack_b32(L, row, rec, STRATA_TYPE_Q4_0); break;
    default:
        gemm_unpack_lowbit_avx512(f, L, row, rec);
    }
}

// A Q4_K / Q5_K block decoded for the canonical dots (dot_k4_k5 and its four-row form): the 256
// quants as 4 zmm in element order, each chunk's int16 scales matching maddubs' pairs, the mins
// doubled to meet the bsums pairs, d and -dmin. The constants are made once per dot (k45_consts).
struct k45_consts {
    __m512i idx[4], sel[4];
    __m256i dup_mins;
};

struct k45_block {
    __m512i q[4], sc[4];
    __m256i mins;
    float dw, ndmin;
};

static inline __attribute__((always_inline)) struct k45_consts k45_consts(bool five)
{
    struct k45_consts c;
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        c.idx[j] = scale_index(2 * j, 16);
        c.sel[j] = five ? q5_select(j) : _mm512_setzero_si512();
    }
    c.dup_mins = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    return c;
}

static inline __attribute__((always_inline)) struct k45_block k45_decode(const uint8_t *w, const struct k45_consts *c,
                                                                          bool five)
{
    // Q4_K and Q5_K share d, dmin and scales; qh and qs follow (blocks.h)
    const struct block_q4_k *head = (const struct block_q4_k *)w;
    const uint8_t *qs = five ? ((const struct block_q5_k *)w)->qs : head->qs;
    __m512i qh = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)((const struct block_q5_k *)w)->qh))
                      : _mm512_setzero_si512();
    const __m512i *qh_p = five ? &qh : NULL;
    const __m256i sm16 = _mm256_cvtepu8_epi16(strata_k_scales_sse(head->scales));
    const __m512i scales = _mm512_castsi256_si512(sm16);
    struct k45_block k;
    _Pragma("GCC unroll 4")
    for (int j = 0; j < 4; j++) {
        k.q[j] = k_chunk_quants(qs + 32 * j, qh_p, c->sel[j]);
        k.sc[j] = _mm512_permutexvar_epi16(c->idx[j], scales);
    }
    k.mins = _mm256_permutexvar_epi16(c->dup_mins, sm16);
    k.dw = _cvtsh_ss(head->d);
    k.ndmin = -_cvtsh_ss(head->dmin);
    return k;
}

// A decoded block against activation block y: S1, the 16 int32 lanes of sc * q * a (exact), and
// S2, the 8 int32 lanes of the mins times y's bsums.
static inline __attribute__((always_inline)) void k45_sums(const struct k45_block *k, const struct block_q8_k *y,
                                                           __m512i *s1, __m256i *s2)
{
    const __m512i zero = _mm512_setzero_si512();
    *s2 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), k->mins);
    __m512i isum0 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(k->q[0], _mm512_loadu_si512(y->qs)), k->sc[0]);
    __m512i isum1 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(k->q[1], _mm512_loadu_si512(y->qs + 64)), k->sc[1]);
    isum0 = _mm512_dpwssd_epi32(isum0, _mm512_maddubs_epi16(k->q[2], _mm512_loadu_si512(y->qs + 128)), k->sc[2]);
    isum1 = _mm512_dpwssd_epi32(isum1, _mm512_maddubs_epi16(k->q[3], _mm512_loadu_si512(y->qs + 192)), k->sc[3]);
    *s1 = _mm512_add_epi32(isum0, isum1);
}

static inline __attribute__((always_inline)) void dot_k4_k5(int64_t n, float *s, const uint8_t *w, size_t block_bytes,
                                                            const void *const *act, int nt, bool five)
{
    const struct k45_consts kc = k45_consts(five);
    const __m512i zero = _mm512_setzero_si512();
    float acc1 = 0.0f;                  // one row
    __m256 accv = _mm256_setzero_ps();  // several rows, one per lane
    const __m512i rows = strata_row_addresses(act, nt);
    const int64_t nb = n / QK_K;
    // One row: the S1 and S2 lanes of 4 blocks are reduced together (pairs as they come, then
    // one fold: 4 shuffles a block instead of 7), then the blocks' fmaf in order.
    for (int64_t b0 = 0; b0 < nb; b0 += 4) {
        __m512i s1_prev = zero, s1_pair[2];
        __m256i s2_prev = _mm256_setzero_si256(), s2_pair[2];
        float f1[4] = {0}, f2[4] = {0};
        _Pragma("GCC unroll 4")
        for (int i = 0; i < 4; i++) {
            const int64_t b = b0 + i;
            if (b >= nb) {  // past the row's end: zero sums, no fmaf
                if (nt == 1) {
                    if (i % 2 == 0) s1_prev = zero, s2_prev = _mm256_setzero_si256();
                    else s1_pair[i / 2] = strata_pair_epi32(s1_prev, zero), s2_pair[i / 2] = strata_pair256_epi32(s2_prev, _mm256_setzero_si256());
                }
                continue;
            }
            strata_prefetch_ahead(w, (int)block_bytes);
            const struct k45_block kb = k45_decode(w, &kc, five);
            const float dw = kb.dw, ndmin = kb.ndmin;
            __m512i sums[16];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < nt; t++) {
                const struct block_q8_k *y = (const struct block_q8_k *)act[t] + b;
                __m512i s1;
                __m256i mins_dot;
                k45_sums(&kb, y, &s1, &mins_dot);
                if (nt == 1) {  // one row: its two sums into the pairs of the group
                    if (i % 2 == 0) s1_prev = s1, s2_prev = mins_dot;
                    else s1_pair[i / 2] = strata_pair_epi32(s1_prev, s1), s2_pair[i / 2] = strata_pair256_epi32(s2_prev, mins_dot);
                    f1[i] = dw * y->d;
                    f2[i] = ndmin * y->d;
                } else {
                    sums[t] = s1;
                    sums[8 + t] = _mm512_zextsi256_si512(mins_dot);
                }
            }
            if (nt > 1) {
                // lanes 0..7: S1 of each row, 8..15: S2; the same fmaf per row as above, in lanes
                _Pragma("GCC unroll 8")
                for (int t = nt; t < 8; t++) sums[t] = sums[8 + t] = zero;
                const __m512 st = _mm512_cvtepi32_ps(strata_reduce16_epi32(sums));
                const __m256 yd = strata_q8k_factors(rows, b, nt);
                accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dw), yd), _mm512_castps512_ps256(st), accv);
                accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(ndmin), yd), _mm512_extractf32x8_ps(st, 1), accv);
            }
            w += block_bytes;
        }
        if (nt == 1) {
            const __m128 r1 = _mm_cvtepi32_ps(strata_fold4_epi32(strata_pair64_epi32(s1_pair[0], s1_pair[1])));
            const __m128 r2 = _mm_cvtepi32_ps(strata_fold4_256_epi32(strata_pair64_256_epi32(s2_pair[0], s2_pair[1])));
            acc1 = fmaf_group4(acc1, r1, f1, r2, f2, true, nb - b0);
        }
        }
    strata_store_results(s, acc1, accv, nt);
}

static inline __attribute__((always_inline)) void dot_q6_k(int64_t n, float *s, const void *w, const void *const *act,
                                                           int nt)
{
    const struct block_q6_k *x = w;
    const __m512i idx0 = scale_index(0, 8), idx1 = scale_index(4, 8), idx2 = scale_index(8, 8), idx3 = scale_index(12, 8);
    const __m512i zero = _mm512_setzero_si512();
    float acc1 = 0.0f;
    __m256 accv = _mm256_setzero_ps();
    const __m512i rows = strata_row_addresses(act, nt);
    const int64_t nb = n / QK_K;
    // One row: the sums of 4 blocks reduced together, as in dot_k4_k5.
    for (int64_t b0 = 0; b0 < nb; b0 += 4) {
        __m512i s1_prev = zero, s1_pair[2];
        float f1[4] = {0};
        _Pragma("GCC unroll 4")
        for (int i = 0; i < 4; i++) {
            const int64_t b = b0 + i;
            if (b >= nb) {  // past the row's end: zero sums, no fmaf
                if (nt == 1) {
                    if (i % 2 == 0) s1_prev = zero;
                    else s1_pair[i / 2] = strata_pair_epi32(s1_prev, zero);
                }
                continue;
            }
            strata_prefetch_ahead(x + b, sizeof(struct block_q6_k));
            __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
            __m512i scales = _mm512_castsi256_si512(sc16);
            __m512i q0, q1, q2, q3;
            q6_half_quants(x[b].ql, x[b].qh, &q0, &q1);
            q6_half_quants(x[b].ql + 64, x[b].qh + 32, &q2, &q3);
            __m512i sc0 = _mm512_permutexvar_epi16(idx0, scales), sc1 = _mm512_permutexvar_epi16(idx1, scales);
            __m512i sc2 = _mm512_permutexvar_epi16(idx2, scales), sc3 = _mm512_permutexvar_epi16(idx3, scales);
            const float dw = _cvtsh_ss(x[b].d);
            __m512i sums[16];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < nt; t++) {
                const struct block_q8_k *y = (const struct block_q8_k *)act[t] + b;
                __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
                __m512i isum0 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(q0, _mm512_loadu_si512(y->qs)), sc0);
                __m512i isum1 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(q2, _mm512_loadu_si512(y->qs + 128)), sc2);
                isum0 = _mm512_dpwssd_epi32(isum0, _mm512_maddubs_epi16(q1, _mm512_loadu_si512(y->qs + 64)), sc1);
                isum1 = _mm512_dpwssd_epi32(isum1, _mm512_maddubs_epi16(q3, _mm512_loadu_si512(y->qs + 192)), sc3);
                __m512i total = _mm512_sub_epi32(_mm512_add_epi32(isum0, isum1), _mm512_zextsi256_si512(_mm256_slli_epi32(offset, 5)));
                if (nt == 1) {
                    if (i % 2 == 0) s1_prev = total;
                    else s1_pair[i / 2] = strata_pair_epi32(s1_prev, total);
                    f1[i] = dw * y->d;
                } else {
                    sums[t] = total;
                }
            }
            if (nt > 1) {
                _Pragma("GCC unroll 16")
                for (int t = nt; t < 16; t++) sums[t] = zero;
                const __m512 st = _mm512_cvtepi32_ps(strata_reduce16_epi32(sums));
                accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(dw), strata_q8k_factors(rows, b, nt)), _mm512_castps512_ps256(st), accv);
            }
        }
        if (nt == 1) {
            const __m128 r1 = _mm_cvtepi32_ps(strata_fold4_epi32(strata_pair64_epi32(s1_pair[0], s1_pair[1])));
            acc1 = fmaf_group4(acc1, r1, f1, r1, f1, false, nb - b0);
        }
    }
    strata_store_results(s, acc1, accv, nt);
}

// The float factor d (f16) of block b of each of nt Q8_0 rows at `rows` (lanes past nt zero).
static inline __attribute__((always_inline)) __m256 q8_0_factors(__m512i rows, int64_t b, int nt)
{
    const __m512i at = _mm512_add_epi64(rows, _mm512_set1_epi64(b * (int64_t)sizeof(struct block_q8_0)));
    const __m256i d32 = _mm512_mask_i64gather_epi32(_mm256_setzero_si256(), (__mmask8)((1u << nt) - 1), at, NULL, 1);
    return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(d32));  // the f16 is the low half of each loaded dword
}

// Two blocks of 32 (at blk0, blk1) as one zmm: the values of blk0 in element order in the low 256
// bits, blk1's in the high.
static inline __attribute__((always_inline)) __m512i b32_pair_values(const uint8_t *blk0, const uint8_t *blk1, uint32_t type)
{
    if (type == STRATA_TYPE_Q8_0)
        return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)blk0)->qs)),
                                  _mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)blk1)->qs), 1);
    const size_t off = type == STRATA_TYPE_MXFP4 ? offsetof(struct block_mxfp4, qs) : offsetof(struct block_q4_0, qs);
    // qs0, qs0, qs1, qs1 per 128 bits, the second copy of each shifted by 4: the nibbles in order
    const __m512i r = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk0 + off)))),
                                         _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk1 + off))), 1);
    const __m512i q = _mm512_and_si512(_mm512_srlv_epi64(r, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(15));
    if (type == STRATA_TYPE_MXFP4)
        return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)strata_kvalues_mxfp4)), q);
    return _mm512_sub_epi8(q, _mm512_set1_epi8(8));
}

// Blocks of 32 against Q8_0 (Q8_0, MXFP4, Q4_0: gemm_b32_values). One row: four blocks per step,
// two per zmm (b32_pair_values), their 8-lane sums reduced together by shuffles, four fmaf. Several rows: two blocks per step, the
// 8-lane sums of every (row, block) reduced together (reduce16), the rows' fmaf in lanes.
static inline __attribute__((always_inline)) void dot_b32(int64_t n, float *s, const void *w, const void *const *act,
                                                          int nt, const uint32_t type)
{
    const uint8_t *x = w;
    const size_t bb = gemm_b32_bytes(type);
    const int64_t nb = n / QK8_0;
    if (nt == 1) {
        const struct block_q8_0 *y = act[0];
        float acc = 0.0f;
        int64_t b = 0;
        const __m512i zero = _mm512_setzero_si512();
        for (; b + 4 <= nb; b += 4) {
            strata_prefetch_ahead(x + b * bb, 4 * (int)bb);
            __m512i is[2];
            for (int i = 0; i < 2; i++) {
                const __m512i wq = b32_pair_values(x + (b + 2 * i) * bb, x + (b + 2 * i + 1) * bb, type);
                const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[b + 2 * i].qs)),
                                                     _mm256_loadu_si256((const __m256i *)y[b + 2 * i + 1].qs), 1);
                is[i] = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wq), _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(wq), zero, a));
            }
            // is[0]: blocks b (lanes 0..7) and b + 1, is[1]: b + 2 and b + 3. Per 128 bits: the
            // 4 lanes of is[0] summed, then is[1]'s (lanes 0, 1), then the two 128-bit parts of
            // each block; lanes 0, 8, 1, 9 are then the sums of blocks b .. b + 3.
            const __m512i p = strata_pair_epi32(is[0], is[1]);
            const __m512i q = strata_pair64_epi32(p, p);
            const __m512i h = _mm512_add_epi32(q, _mm512_shuffle_i32x4(q, q, _MM_SHUFFLE(2, 3, 0, 1)));
            const __m128i sums = _mm512_castsi512_si128(_mm512_permutexvar_epi32(_mm512_castsi128_si512(_mm_setr_epi32(0, 8, 1, 9)), h));
            float f1[4];
            for (int i = 0; i < 4; i++) f1[i] = gemm_b32_factor(x + (b + i) * bb, type) * _cvtsh_ss(y[b + i].d);
            const __m128 r1 = _mm_cvtepi32_ps(sums);
            acc = fmaf_group4(acc, r1, f1, r1, f1, false, 4);
        }
        for (; b < nb; b++) {
            const __m256i wq = gemm_b32_values(x + b * bb, type);
            const __m256i is = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(wq),
                                                   _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[b].qs), wq));
            acc = __builtin_fmaf(gemm_b32_factor(x + b * bb, type) * _cvtsh_ss(y[b].d), (float)strata_hsum256_epi32(is), acc);
        }
        s[0] = acc;
        return;
    }
    // TP rows (nt padded to 2, 4 or 8) times 16 / TP blocks per step fill the 16 registers reduce16
    // takes; lane i * TP + t of the result is block b + i of row t.
    const int TP = nt <= 2 ? 2 : nt <= 4 ? 4 : 8, BPS = 16 / TP;
    const __m512i rows = strata_row_addresses(act, nt), zero = _mm512_setzero_si512();
    __m256 accv = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b += BPS) {
        strata_prefetch_ahead(x + b * bb, BPS * (int)bb);
        const int nblk = nb - b < BPS ? (int)(nb - b) : BPS;
        __m512i sums[16];
        _Pragma("GCC unroll 8")
        for (int i = 0; i < BPS; i++) {
            const __m256i wq = i < nblk ? gemm_b32_values(x + (b + i) * bb, type) : _mm256_setzero_si256();
            const __m256i wa = _mm256_abs_epi8(wq);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < TP; t++) {
                if (t >= nt || i >= nblk) {
                    sums[TP * i + t] = zero;
                    continue;
                }
                const struct block_q8_0 *y = (const struct block_q8_0 *)act[t] + b + i;
                sums[TP * i + t] = _mm512_zextsi256_si512(_mm256_dpbusd_epi32(
                    _mm256_setzero_si256(), wa, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), wq)));
            }
        }
        const __m512 st = _mm512_cvtepi32_ps(strata_reduce16_epi32(sums));
        for (int i = 0; i < nblk; i++) {
            // block b + i's TP lanes down to lanes 0..TP-1
            const __m256 si = _mm512_castps512_ps256(_mm512_permutexvar_ps(_mm512_add_epi32(_mm512_set1_epi32(TP * i),
                                                                                              _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0)), st));
            accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(gemm_b32_factor(x + (b + i) * bb, type)), q8_0_factors(rows, b + i, nt)), si, accv);
        }
    }
    strata_store_results(s, 0.0f, accv, nt);
}


static inline __attribute__((always_inline)) void dot_q4_k_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_k4_k5(n, s, w, sizeof(struct block_q4_k), a, nt, false);
}

static inline __attribute__((always_inline)) void dot_q5_k_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_k4_k5(n, s, w, sizeof(struct block_q5_k), a, nt, true);
}

// dot_b32's one-row loop for GEMM_DOT_ROWS rows of one token: per step of 4 blocks the rows' 8
// pair registers (rows 0..3 of blocks b, b + 1, then of b + 2, b + 3) reduce together, each
// 128-bit lane of the result one block of the 4 rows, and the rows' accumulators are the lanes
// of one register: lane r takes fmaf(factor * d, sum, acc) of its row's blocks in order, the
// float operations of dot_b32 on that row alone (the same bits; test_gemm).
static inline __attribute__((always_inline)) void dot_b32_rows(int64_t n, float *s, const void *w, size_t row_bytes,
                                                               const void *act, const uint32_t type)
{
    enum { R = GEMM_DOT_ROWS };
    _Static_assert(GEMM_DOT_ROWS == 4, "the reduction and the factors below are written for 4 rows");
    const uint8_t *x[R];
    for (int r = 0; r < R; r++) x[r] = (const uint8_t *)w + (size_t)r * row_bytes;
    const struct block_q8_0 *y = act;
    const size_t bb = gemm_b32_bytes(type);
    const int64_t nb = n / QK8_0;
    const __m512i zero = _mm512_setzero_si512();
    __m128 acc = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        // the same 4 blocks 2 R rows on, into L2 (as dot_k4_k5_rows)
        for (int r = 0; r < R; r++) strata_prefetch_l2(x[r] + (size_t)(2 * R) * row_bytes + (size_t)b * bb, 4 * (int)bb);
        __m512i v[2 * R];
        for (int i = 0; i < 2; i++) {
            const __m512i a = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[b + 2 * i].qs)),
                                                 _mm256_loadu_si256((const __m256i *)y[b + 2 * i + 1].qs), 1);
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) {
                const __m512i wq = b32_pair_values(x[r] + (b + 2 * i) * bb, x[r] + (b + 2 * i + 1) * bb, type);
                v[R * i + r] = _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(wq), _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(wq), zero, a));
            }
        }
        // 128-bit lanes of each register: lane L's 4 int32 of v0..v3 (v4..v7) summed into lane L of
        // h[0] (h[1]); a block is two of those lanes
        __m512i g[4], h[2];
        for (int i = 0; i < 4; i++)
            g[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
        for (int i = 0; i < 2; i++)
            h[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(g[2 * i], g[2 * i + 1]), _mm512_unpackhi_epi64(g[2 * i], g[2 * i + 1]));
        const __m512 sums = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_shuffle_i32x4(h[0], h[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                                                _mm512_shuffle_i32x4(h[0], h[1], _MM_SHUFFLE(3, 1, 3, 1))));
        const __m128 blk[4] = {_mm512_castps512_ps128(sums), _mm512_extractf32x4_ps(sums, 1), _mm512_extractf32x4_ps(sums, 2),
                               _mm512_extractf32x4_ps(sums, 3)};
        _Pragma("GCC unroll 4")
        for (int i = 0; i < 4; i++) {
            const float d = _cvtsh_ss(y[b + i].d);
            const __m128 f = _mm_setr_ps(gemm_b32_factor(x[0] + (b + i) * bb, type) * d, gemm_b32_factor(x[1] + (b + i) * bb, type) * d,
                                         gemm_b32_factor(x[2] + (b + i) * bb, type) * d, gemm_b32_factor(x[3] + (b + i) * bb, type) * d);
            acc = _mm_fmadd_ps(f, blk[i], acc);
        }
    }
    float out[R];
    _mm_storeu_ps(out, acc);
    for (; b < nb; b++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)y[b].qs);
        for (int r = 0; r < R; r++) {
            const __m256i wq = gemm_b32_values(x[r] + b * bb, type);
            const __m256i is = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(wq), _mm256_sign_epi8(a, wq));
            out[r] = __builtin_fmaf(gemm_b32_factor(x[r] + b * bb, type) * _cvtsh_ss(y[b].d), (float)strata_hsum256_epi32(is), out[r]);
        }
    }
    for (int r = 0; r < R; r++) s[r] = out[r];
}

// dot_k4_k5's one-row arithmetic for GEMM_DOT_ROWS rows of one token (decode's products): a
// block's activation is loaded once for the rows, the rows' S1 and S2 of two blocks reduce
// together (one strata_reduce16_epi32), and the rows' fmaf chains run in the lanes of one register,
// lane r the operations of dot_k4_k5 on row r alone, block after block (the same bits; test_gemm).
static inline __attribute__((always_inline)) void dot_k4_k5_rows(int64_t n, float *s, const void *w, size_t row_bytes,
                                                                 const void *act, size_t block_bytes, bool five)
{
    enum { R = GEMM_DOT_ROWS };
    _Static_assert(GEMM_DOT_ROWS == 4, "two blocks of 4 rows fill the 16 sums of one reduction");
    const uint8_t *x[R];
    for (int r = 0; r < R; r++) x[r] = (const uint8_t *)w + (size_t)r * row_bytes;
    const struct block_q8_k *y = act;
    const struct k45_consts kc = k45_consts(five);
    const __m512i zero = _mm512_setzero_si512();
    const int64_t nb = n / QK_K;
    __m128 acc = _mm_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += 2) {
        __m512i sums[16];  // block b0 + i: S1 of rows 0..3 in 8i..8i+3, S2 in 8i+4..8i+7
        float f1[2][R], f2[2][R];
        _Pragma("GCC unroll 2")
        for (int i = 0; i < 2; i++) {
            const int64_t b = b0 + i;
            if (b >= nb) {  // past the row's end: zero sums, no fmaf
                for (int r = 0; r < 2 * R; r++) sums[8 * i + r] = zero;
                continue;
            }
            _Pragma("GCC unroll 4")
            for (int r = 0; r < R; r++) {
                const uint8_t *blk = x[r] + (size_t)b * block_bytes;
                // the same block 2 R rows on: the group after the next (decode's items run on
                // through consecutive rows), into L2 while this one computes (2 R rows of Q4_K are
                // 9 KiB, about the one-token dots' STRATA_PREFETCH_STREAM); a prefetch a fixed
                // number of bytes ahead of each row would reach only into the next group's first row
                strata_prefetch_l2(blk + (size_t)(2 * R) * row_bytes, (int)block_bytes);
                const struct k45_block kb = k45_decode(blk, &kc, five);
                __m256i s2;
                k45_sums(&kb, y + b, &sums[8 * i + r], &s2);
                sums[8 * i + R + r] = _mm512_zextsi256_si512(s2);
                f1[i][r] = kb.dw * y[b].d;
                f2[i][r] = kb.ndmin * y[b].d;
            }
        }
        const __m512 st = _mm512_cvtepi32_ps(strata_reduce16_epi32(sums));
        acc = _mm_fmadd_ps(_mm_loadu_ps(f1[0]), _mm512_castps512_ps128(st), acc);
        acc = _mm_fmadd_ps(_mm_loadu_ps(f2[0]), _mm512_extractf32x4_ps(st, 1), acc);
        if (b0 + 1 < nb) {
            acc = _mm_fmadd_ps(_mm_loadu_ps(f1[1]), _mm512_extractf32x4_ps(st, 2), acc);
            acc = _mm_fmadd_ps(_mm_loadu_ps(f2[1]), _mm512_extractf32x4_ps(st, 3), acc);
        }
    }
    _mm_storeu_ps(s, acc);
}

static void rows_q4_k(int64_t n, float *s, const void *w, size_t rb, const void *a)
{
    dot_k4_k5_rows(n, s, w, rb, a, sizeof(struct block_q4_k), false);
}

static void rows_q5_k(int64_t n, float *s, const void *w, size_t rb, const void *a)
{
    dot_k4_k5_rows(n, s, w, rb, a, sizeof(struct block_q5_k), true);
}

static void rows_q8_0(int64_t n, float *s, const void *w, size_t rb, const void *a) { dot_b32_rows(n, s, w, rb, a, STRATA_TYPE_Q8_0); }
static void rows_mxfp4(int64_t n, float *s, const void *w, size_t rb, const void *a) { dot_b32_rows(n, s, w, rb, a, STRATA_TYPE_MXFP4); }
static void rows_q4_0(int64_t n, float *s, const void *w, size_t rb, const void *a) { dot_b32_rows(n, s, w, rb, a, STRATA_TYPE_Q4_0); }

GEMM_B32_DOTS(8)
STRATA_DOT_KERNELS(q4_k, dot_q4_k_n, 8)
STRATA_DOT_KERNELS(q5_k, dot_q5_k_n, 8)
STRATA_DOT_KERNELS(q6_k, dot_q6_k, 8)

const struct gemm_kernels gemm_kernels_avx512 = {
    .lanes = 16,
    .plus128 = true,
    .rows_per_panel = 16,
    .max_tiles = 2,
    .min_tokens = 9,  // below, the multi-token dot is faster (test_gemm --bench)
    // blocks of 32: the tile kernel from 2 tokens (test_gemm --bench T, one thread, GMAC/s, multi
    // dot / tile kernel at 2, 4, 8 tokens: MXFP4 14.1 / 17.5, 22.4 / 34.7, 31.3 / 69.0; Q8_0
    // 15.0 / 20.1, 24.5 / 39.6, 36.2 / 78.8)
    .min_tokens_b32 = 2,
    .unpack = gemm_unpack_avx512,
    .panel = gemm_panel_avx512,
    .scatter = gemm_scatter_avx512,
    .vec_dot = {
        [STRATA_TYPE_Q8_0] = vec_dot_q8_0,
        [STRATA_TYPE_MXFP4] = vec_dot_mxfp4,
        [STRATA_TYPE_Q4_0] = vec_dot_q4_0,
        [STRATA_TYPE_Q4_K] = vec_dot_q4_k,
        [STRATA_TYPE_Q5_K] = vec_dot_q5_k,
        [STRATA_TYPE_Q6_K] = vec_dot_q6_k,
    },
    .vec_dot_multi = {
        [STRATA_TYPE_Q8_0] = vec_dot_multi_q8_0,
        [STRATA_TYPE_MXFP4] = vec_dot_multi_mxfp4,
        [STRATA_TYPE_Q4_0] = vec_dot_multi_q4_0,
        [STRATA_TYPE_Q4_K] = vec_dot_multi_q4_k,
        [STRATA_TYPE_Q5_K] = vec_dot_multi_q5_k,
        [STRATA_TYPE_Q6_K] = vec_dot_multi_q6_k,
    },
    .vec_dot_rows = {
        [STRATA_TYPE_Q8_0] = rows_q8_0,
        [STRATA_TYPE_MXFP4] = rows_mxfp4,
        [STRATA_TYPE_Q4_0] = rows_q4_0,
        [STRATA_TYPE_Q4_K] = rows_q4_k,
        [STRATA_TYPE_Q5_K] = rows_q5_k,
    },
};
