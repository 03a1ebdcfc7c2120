// AVX-512 (F/BW/VL/DQ + VNNI) kernels: activation rounding (bit-identical to ref.c) and the dot
// products of every computable weight type, plus F16/BF16 dequantisation. Layouts in blocks.h.
//
// The K-quant dot products unpack 64 weight quants per zmm in element order, multiply them with
// the activations by maddubs (int16 pairs, exact: |q| < 64, |a| <= 127) and fold in the
// sub-block scales with VNNI's vpdpwssd (int16 pair x int16 scale -> int32 accumulate), so each
// block's integer sum is exact before its float scale is applied; the float accumulation order
// (16 lanes, summed at the end) is the only difference from the reference. Every dot product is
// written once for 1..STRATA_DOT_TOKENS activation rows (STRATA_DOT_KERNELS in blocks.h).
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/kernels_impl.h"
#include "quant/fp16.h"

#define ROUND_EVEN (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

// ---- helpers --------------------------------------------------------------------------------

static inline __m512 load_f16x16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

static inline __m512 load_bf16x16(const uint16_t *p)
{
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

static inline __m512 maskz_load_f16(__mmask16 m, const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

static inline __m512 maskz_load_bf16(__mmask16 m, const uint16_t *p)
{
    __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

static inline __mmask16 tail_mask(int64_t remaining)
{
    return (__mmask16)((1u << remaining) - 1);
}

// vpermw indices for sub-block scales: int16 lane i takes scale first + i / run (run = the int16
// lanes per sub-block after maddubs: 16 for 32-element sub-blocks, 8 for 16-element ones).
static inline __m512i scale_index(int first, int run)
{
    short idx[32];
    for (int i = 0; i < 32; i++) idx[i] = (short)(first + i / run);
    return _mm512_loadu_si512(idx);
}

// ---- dequantisation -------------------------------------------------------------------------

static void dequant_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_f16x16(h + i));
    if (i < n) _mm512_mask_storeu_ps(dst + i, tail_mask(n - i), maskz_load_f16(tail_mask(n - i), h + i));
}

static void dequant_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *b = src;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(dst + i, load_bf16x16(b + i));
    if (i < n) _mm512_mask_storeu_ps(dst + i, tail_mask(n - i), maskz_load_bf16(tail_mask(n - i), b + i));
}

// ---- activation rounding --------------------------------------------------------------------

static void quantize_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(h + i), _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        __m256i packed = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, src + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(h + i, m, packed);
    }
}

// 16 floats -> 16 bf16 as strata_fp32_to_bf16 (round to nearest even, NaN made quiet). Not
// vcvtneps2bf16: that one flushes denormals, ggml's conversion does not.
static inline __m256i bf16_round16(__m512 x)
{
    __m512i u = _mm512_castps_si512(x);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                               _mm512_set1_epi32(0x7f800000));
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, quiet));
}

static void quantize_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *b = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm256_storeu_si256((__m256i *)(b + i), bf16_round16(_mm512_loadu_ps(src + i)));
    if (i < n) {
        __mmask16 m = tail_mask(n - i);
        _mm256_mask_storeu_epi16(b + i, m, bf16_round16(_mm512_maskz_loadu_ps(m, src + i)));
    }
}

static void quantize_q8_0(const float *src, void *dst, int64_t n)
{
    struct block_q8_0 *blk = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        __m512 v0 = _mm512_loadu_ps(src), v1 = _mm512_loadu_ps(src + 16);
        float max = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        blk[b].d = _cvtss_sh(max / 127.0f, _MM_FROUND_TO_NEAREST_INT);
        __m512 id = _mm512_set1_ps(max != 0.0f ? 127.0f / max : 0.0f);
        __m512i q0 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v0, id), ROUND_EVEN));
        __m512i q1 = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(v1, id), ROUND_EVEN));
        // signed saturation, as the AVX2 path's packs (NaN's INT32_MIN -> -128)
        _mm_storeu_si128((__m128i *)blk[b].qs, _mm512_cvtsepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(blk[b].qs + 16), _mm512_cvtsepi32_epi8(q1));
    }
}

static void quantize_q8_k(const float *src, void *dst, int64_t n)
{
    struct block_q8_k *blk = dst;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        __m512 amax_v = _mm512_setzero_ps();
        for (int i = 0; i < QK_K; i += 16) amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(_mm512_loadu_ps(src + i)));
        float amax = _mm512_reduce_max_ps(amax_v);
        if (amax == 0.0f) {
            memset(&blk[b], 0, sizeof(blk[b]));
            continue;
        }
        // the reference keeps the first element of largest magnitude: its sign decides d's
        amax_v = _mm512_set1_ps(amax);
        float max = 0.0f;
        for (int i = 0; i < QK_K; i += 16) {
            __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(src + i)), amax_v, _CMP_EQ_OQ);
            if (hit) {
                max = src[i + __builtin_ctz(hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m512 iscale_v = _mm512_set1_ps(iscale);
        const __m512i q_max = _mm512_set1_epi32(127);
        for (int g = 0; g < QK_K / 16; g++) {
            __m512 scaled = _mm512_mul_ps(iscale_v, _mm512_loadu_ps(src + 16 * g));
            __m512 rounded = _mm512_roundscale_ps(scaled, ROUND_EVEN);
            __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(rounded), q_max);
            // the reference stores the low byte (INT32_MIN from inf/NaN becomes 0)
            _mm_storeu_si128((__m128i *)(blk[b].qs + 16 * g), _mm512_cvtepi32_epi8(q));
        }
        // each 16's sum: the bytes biased to unsigned (x ^ 0x80 = x + 128), summed eight at a time
        // by SAD against zero, less 16 x 128 (a horizontal reduction a group took half the time)
        for (int c = 0; c < 4; c++) {
            const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(blk[b].qs + 64 * c), _mm512_set1_epi8((char)0x80));
            uint64_t s8[8];
            _mm512_storeu_si512(s8, _mm512_sad_epu8(u, _mm512_setzero_si512()));
            for (int k = 0; k < 4; k++) blk[b].bsums[4 * c + k] = (int16_t)((int)(s8[2 * k] + s8[2 * k + 1]) - 16 * 128);
        }
        blk[b].d = 1.0f / iscale;
    }
}

// ---- dot products ---------------------------------------------------------------------------

// The float dot products share one loop; `load` widens 16 elements (fewer under a mask) of the
// format to floats. Inlined with a constant loader, each instance is its own straight loop.
typedef __m512 (*load16_fn)(const void *row, int64_t i, __mmask16 m);

static inline __m512 load16_f32(const void *row, int64_t i, __mmask16 m)
{
    return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

static inline __m512 load16_f16(const void *row, int64_t i, __mmask16 m)
{
    return maskz_load_f16(m, (const uint16_t *)row + i);
}

static inline __m512 load16_bf16(const void *row, int64_t i, __mmask16 m)
{
    return maskz_load_bf16(m, (const uint16_t *)row + i);
}

// Each weight vector is loaded once for the nt (1..STRATA_DOT_TOKENS) activation rows y[t]; each
// row has its own accumulators and the same float operations whatever nt is.
static inline __attribute__((always_inline)) void dot_floats(int64_t n, float *s, const void *x, const void *const *y,
                                                             int nt, int64_t elem_bytes, load16_fn load)
{
    const __mmask16 all = 0xffff;
    __m512 acc0[STRATA_DOT_TOKENS], acc1[STRATA_DOT_TOKENS], acc2[STRATA_DOT_TOKENS], acc3[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = acc2[t] = acc3[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        strata_prefetch_stream((const char *)x + i * elem_bytes, 64 * (int)elem_bytes);
        __m512 w0 = load(x, i, all), w1 = load(x, i + 16, all), w2 = load(x, i + 32, all), w3 = load(x, i + 48, all);
        for (int t = 0; t < nt; t++) {
            acc0[t] = _mm512_fmadd_ps(w0, load(y[t], i, all), acc0[t]);
            acc1[t] = _mm512_fmadd_ps(w1, load(y[t], i + 16, all), acc1[t]);
            acc2[t] = _mm512_fmadd_ps(w2, load(y[t], i + 32, all), acc2[t]);
            acc3[t] = _mm512_fmadd_ps(w3, load(y[t], i + 48, all), acc3[t]);
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m512 w0 = load(x, i, all);
        for (int t = 0; t < nt; t++) acc0[t] = _mm512_fmadd_ps(w0, load(y[t], i, all), acc0[t]);
    }
    if (i < n) {
        __m512 w0 = load(x, i, tail_mask(n - i));
        for (int t = 0; t < nt; t++) acc1[t] = _mm512_fmadd_ps(w0, load(y[t], i, tail_mask(n - i)), acc1[t]);
    }
    for (int t = 0; t < nt; t++)
        s[t] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0[t], acc1[t]), _mm512_add_ps(acc2[t], acc3[t])));
}

// One Q8_0 weight block times an activation block, in 256-bit registers (a block is 32 bytes;
// two per zmm cost more in shuffles than they save): vpdpbusd wants an unsigned operand, so |w|
// times a with w's sign (a is never -128).
static inline __m256 q8_0_block(__m256i w, __m256i w_abs, float w_d, const struct block_q8_0 *y, __m256 acc)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i isum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w_abs, _mm256_sign_epi8(a, w));
    __m256 d = _mm256_set1_ps(w_d * _cvtsh_ss(y->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

// The Q4_K / Q5_K block loop: d * sum(sc * q * a) - dmin * sum(m * bsums), per block, for nt
// activation rows. A block's quants and scales are unpacked once (64 quants per zmm; the scales
// in int16 lanes matching maddubs' pairs) and applied to every row: maddubs (int16 pairs, exact:
// |q| < 64, |a| <= 127), then VNNI's vpdpwssd folds in the sub-block scales (int16 pair x int16
// scale -> int32). Each row's integer sums are exact; its float operations do not depend on nt.
static inline __attribute__((always_inline)) void dot_k4_k5(int64_t n, float *s, const uint8_t *w, size_t block_bytes,
                                                            const void *const *act, int nt, bool five)
{
    const __m512i idx0 = scale_index(0, 16), idx1 = scale_index(2, 16), idx2 = scale_index(4, 16), idx3 = scale_index(6, 16);
    const __m256i dup_mins = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i sel0 = five ? q5_select(0) : zero, sel1 = five ? q5_select(1) : zero;
    const __m512i sel2 = five ? q5_select(2) : zero, sel3 = five ? q5_select(3) : zero;
    __m512 acc[STRATA_DOT_TOKENS];
    __m256 acc_min[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps(), acc_min[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += block_bytes) {
        strata_prefetch_stream(w, (int)block_bytes);
        // Q4_K and Q5_K share d, dmin and scales; qh and qs follow (blocks.h)
        const struct block_q4_k *head = (const struct block_q4_k *)w;
        const uint8_t *qs = five ? ((const struct block_q5_k *)w)->qs : head->qs;
        __m512i qh = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)((const struct block_q5_k *)w)->qh)) : zero;
        const __m512i *qh_p = five ? &qh : NULL;
        // scales in int16 lanes 0..7, mins in 8..15; the mins doubled to meet the bsums pairs
        __m256i sm16 = _mm256_cvtepu8_epi16(strata_k_scales_sse(head->scales));
        __m256i mins = _mm256_permutexvar_epi16(dup_mins, sm16);
        __m512i scales = _mm512_castsi256_si512(sm16);
        __m512i q0 = k_chunk_quants(qs, qh_p, sel0), q1 = k_chunk_quants(qs + 32, qh_p, sel1);
        __m512i q2 = k_chunk_quants(qs + 64, qh_p, sel2), q3 = k_chunk_quants(qs + 96, qh_p, sel3);
        __m512i sc0 = _mm512_permutexvar_epi16(idx0, scales), sc1 = _mm512_permutexvar_epi16(idx1, scales);
        __m512i sc2 = _mm512_permutexvar_epi16(idx2, scales), sc3 = _mm512_permutexvar_epi16(idx3, scales);
        __m128 d_dmin_w = strata_two_halves(&head->d);
        for (int t = 0; t < nt; t++) {
            const struct block_q8_k *y = (const struct block_q8_k *)act[t] + b;
            __m256i mins_dot = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), mins);
            __m512i isum0 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(q0, _mm512_loadu_si512(y->qs)), sc0);
            __m512i isum1 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(q1, _mm512_loadu_si512(y->qs + 64)), sc1);
            isum0 = _mm512_dpwssd_epi32(isum0, _mm512_maddubs_epi16(q2, _mm512_loadu_si512(y->qs + 128)), sc2);
            isum1 = _mm512_dpwssd_epi32(isum1, _mm512_maddubs_epi16(q3, _mm512_loadu_si512(y->qs + 192)), sc3);
            __m128 d_dmin = _mm_mul_ps(d_dmin_w, _mm_set1_ps(y->d));
            acc[t] = _mm512_fmadd_ps(_mm512_broadcastss_ps(d_dmin), _mm512_cvtepi32_ps(_mm512_add_epi32(isum0, isum1)), acc[t]);
            acc_min[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(d_dmin)), _mm256_cvtepi32_ps(mins_dot), acc_min[t]);
        }
    }
    for (int t = 0; t < nt; t++) {
        __m256 folded = _mm256_add_ps(_mm512_castps512_ps256(acc[t]), _mm512_extractf32x8_ps(acc[t], 1));
        s[t] = strata_hsum256_ps(_mm256_sub_ps(folded, acc_min[t]));
    }
}

// One half (128 elements) of a Q6_K block, ql[64] and qh[32] (layout in blocks.h), as two zmm of
// quants in element order.
static inline void q6_half_quants(const uint8_t *ql64, const uint8_t *qh32, __m512i *q_first, __m512i *q_second)
{
    const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
    __m512i ql = _mm512_loadu_si512(ql64);
    // qh bits 0-1 / 2-3 (elements 0..63) land in bits 0-1, bits 4-5 / 6-7 in bits 4-5
    __m512i qh = broadcast_shift(qh32, 0, 2);
    // (high & 0x30) | (low & 0x0f): ternary-logic function a | (b & c) = 0xf8
    *q_first = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45), ql, low4, 0xf8);
    *q_second = _mm512_ternarylogic_epi32(_mm512_and_si512(qh, bits45), _mm512_srli_epi16(ql, 4), low4, 0xf8);
}

// The quants are stored with +32: dot(q - 32, a) = dot(q, a) - 32 * sum(a), and the sums of a
// per 16 elements are the activation's bsums. A block's quants and int16 scales (one per 16
// elements) are unpacked once for the nt activation rows, as in dot_k4_k5.
static inline __attribute__((always_inline)) void dot_q6_k(int64_t n, float *s, const void *w, const void *const *act,
                                                           int nt)
{
    const struct block_q6_k *x = w;
    const __m512i idx0 = scale_index(0, 8), idx1 = scale_index(4, 8), idx2 = scale_index(8, 8), idx3 = scale_index(12, 8);
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        strata_prefetch_stream(x + b, sizeof(struct block_q6_k));
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        __m512i scales = _mm512_castsi256_si512(sc16);
        __m512i q0, q1, q2, q3;
        q6_half_quants(x[b].ql, x[b].qh, &q0, &q1);
        q6_half_quants(x[b].ql + 64, x[b].qh + 32, &q2, &q3);
        __m512i sc0 = _mm512_permutexvar_epi16(idx0, scales), sc1 = _mm512_permutexvar_epi16(idx1, scales);
        __m512i sc2 = _mm512_permutexvar_epi16(idx2, scales), sc3 = _mm512_permutexvar_epi16(idx3, scales);
        float d_w = _cvtsh_ss(x[b].d);
        for (int t = 0; t < nt; t++) {
            const struct block_q8_k *y = (const struct block_q8_k *)act[t] + b;
            __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y->bsums));
            __m512i isum0 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(q0, _mm512_loadu_si512(y->qs)), sc0);
            __m512i isum1 = _mm512_dpwssd_epi32(zero, _mm512_maddubs_epi16(q2, _mm512_loadu_si512(y->qs + 128)), sc2);
            isum0 = _mm512_dpwssd_epi32(isum0, _mm512_maddubs_epi16(q1, _mm512_loadu_si512(y->qs + 64)), sc1);
            isum1 = _mm512_dpwssd_epi32(isum1, _mm512_maddubs_epi16(q3, _mm512_loadu_si512(y->qs + 192)), sc3);
            __m512i total = _mm512_sub_epi32(_mm512_add_epi32(isum0, isum1), _mm512_zextsi256_si512(_mm256_slli_epi32(offset, 5)));
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(d_w * y->d), _mm512_cvtepi32_ps(total), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) s[t] = _mm512_reduce_add_ps(acc[t]);
}

static inline __attribute__((always_inline)) void dot_f32_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_floats(n, s, w, a, nt, 4, load16_f32);
}

static inline __attribute__((always_inline)) void dot_f16_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_floats(n, s, w, a, nt, 2, load16_f16);
}

static inline __attribute__((always_inline)) void dot_bf16_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_floats(n, s, w, a, nt, 2, load16_bf16);
}

static inline __attribute__((always_inline)) void dot_q8_0_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    strata_dot_q8_0(n, s, w, a, nt, q8_0_block);
}

static inline __attribute__((always_inline)) void dot_q4_k_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_k4_k5(n, s, w, sizeof(struct block_q4_k), a, nt, false);
}

static inline __attribute__((always_inline)) void dot_q5_k_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_k4_k5(n, s, w, sizeof(struct block_q5_k), a, nt, true);
}

// float dots: 4 accumulators per row, so 4 rows fill the 32 zmm
STRATA_DOT_KERNELS(f32, dot_f32_n, 4)
STRATA_DOT_KERNELS(f16, dot_f16_n, 4)
STRATA_DOT_KERNELS(bf16, dot_bf16_n, 4)
STRATA_DOT_KERNELS(q8_0, dot_q8_0_n, 8)
STRATA_DOT_KERNELS(q4_k, dot_q4_k_n, 8)
STRATA_DOT_KERNELS(q5_k, dot_q5_k_n, 8)
STRATA_DOT_KERNELS(q6_k, dot_q6_k, 8)

#define VEC_DOT_MULTI_F32 vec_dot_multi_f32
#define VEC_DOT_MULTI_F16 vec_dot_multi_f16
#define VEC_DOT_MULTI_BF16 vec_dot_multi_bf16
STRATA_SIMD_KERNEL_TABLE(strata_kernels_avx512_table, STRATA_ISA_AVX512)
