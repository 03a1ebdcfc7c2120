// AVX2 level of the GEMM: the canonical dots (gemm.h) of Q8_0, MXFP4, Q4_0, Q4_K, Q5_K and Q6_K, the block
// loops of the quant kernels with the canonical float part. There is no tile kernel: without
// VNNI, 4 bytes of 8 tokens times 4 broadcast weight bytes cost maddubs, a sign fix-up and madd
// per 32 products, and a tile kernel built that way ran at half the multi-token dot's speed
// (Q4_K, 32 tokens: 18.7 against 36 GMAC/s), so every job takes the multi-token dot.
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm_impl.h"

// ---- canonical dots ---------------------------------------------------------------------------

static inline __m256i scale_shuffle(int k)
{
    return _mm256_set1_epi16((short)((2 * k + 1) << 8 | 2 * k));
}

static inline __m256i q5_high_bit(__m256i qh, int bit)
{
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    if (bit <= 4) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - bit), bit4);
    return _mm256_and_si256(_mm256_srli_epi16(qh, bit - 4), bit4);
}

static inline __m256i scaled_sub_block(__m256i quants, const int8_t *act, __m256i scale)
{
    __m256i pairs = _mm256_maddubs_epi16(quants, _mm256_loadu_si256((const __m256i *)act));
    return _mm256_madd_epi16(pairs, scale);
}

static inline __attribute__((always_inline)) void dot_k4_k5(int64_t n, float *s, const uint8_t *w, size_t block_bytes,
                                                            const void *const *act, int nt, bool five)
{
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m128i dup_mins = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    float acc[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++, w += block_bytes) {
        strata_prefetch_ahead(w, (int)block_bytes);
        const struct block_q4_k *head = (const struct block_q4_k *)w;
        const uint8_t *qs = five ? ((const struct block_q5_k *)w)->qs : head->qs;
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)((const struct block_q5_k *)w)->qh) : _mm256_setzero_si256();
        __m128i sm = strata_k_scales_sse(head->scales);
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_mins));
        __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        const struct block_q8_k *y[STRATA_DOT_TOKENS];
        __m256i isum[STRATA_DOT_TOKENS];
        for (int t = 0; t < nt; t++) y[t] = (const struct block_q8_k *)act[t] + b, isum[t] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if (five) {
                lo = _mm256_or_si256(lo, q5_high_bit(qh, 2 * j));
                hi = _mm256_or_si256(hi, q5_high_bit(qh, 2 * j + 1));
            }
            __m256i sc_lo = _mm256_shuffle_epi8(scales, scale_shuffle(2 * j));
            __m256i sc_hi = _mm256_shuffle_epi8(scales, scale_shuffle(2 * j + 1));
            for (int t = 0; t < nt; t++)
                isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(scaled_sub_block(lo, y[t]->qs + 64 * j, sc_lo),
                                                                     scaled_sub_block(hi, y[t]->qs + 64 * j + 32, sc_hi)));
        }
        const float dw = _cvtsh_ss(head->d), ndmin = -_cvtsh_ss(head->dmin);
        for (int t = 0; t < nt; t++) {
            __m256i mins_dot = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t]->bsums), mins16);
            acc[t] = __builtin_fmaf(dw * y[t]->d, (float)strata_hsum256_epi32(isum[t]), acc[t]);
            acc[t] = __builtin_fmaf(ndmin * y[t]->d, (float)strata_hsum256_epi32(mins_dot), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) s[t] = acc[t];
}

static inline __m256i q6_scale_pair(__m128i sc8, int first)
{
    __m128i ctrl = _mm_set_epi64x((long long)(0x0101010101010101ull * (uint64_t)(first + 1)),
                                  (long long)(0x0101010101010101ull * (uint64_t)first));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, ctrl));
}

static inline __attribute__((always_inline)) void dot_q6_k(int64_t n, float *s, const void *w, const void *const *act,
                                                           int nt)
{
    const struct block_q6_k *x = w;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    float acc[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        strata_prefetch_ahead(x + b, sizeof(struct block_q6_k));
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        const struct block_q8_k *y[STRATA_DOT_TOKENS];
        __m256i isum[STRATA_DOT_TOKENS];
        for (int t = 0; t < nt; t++) y[t] = (const struct block_q8_k *)act[t] + b, isum[t] = _mm256_setzero_si256();
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[b].ql + 64 * half, *qh = x[b].qh + 32 * half;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45)),
                _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(h, bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45)),
            };
            for (int k = 0; k < 4; k++) {
                __m256i scale = q6_scale_pair(sc8, 8 * half + 2 * k);
                for (int t = 0; t < nt; t++)
                    isum[t] = _mm256_add_epi32(isum[t], scaled_sub_block(q[k], y[t]->qs + 128 * half + 32 * k, scale));
            }
        }
        const float dw = _cvtsh_ss(x[b].d);
        for (int t = 0; t < nt; t++) {
            __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), _mm256_loadu_si256((const __m256i *)y[t]->bsums));
            __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(offset, 5));
            acc[t] = __builtin_fmaf(dw * y[t]->d, (float)strata_hsum256_epi32(total), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) s[t] = acc[t];
}

// Blocks of 32 against Q8_0 (Q8_0, MXFP4, Q4_0: gemm_b32_values), four per step.
static inline __attribute__((always_inline)) void dot_b32(int64_t n, float *s, const void *w, const void *const *act,
                                                          int nt, const uint32_t type)
{
    const uint8_t *x = w;
    const size_t bb = gemm_b32_bytes(type);
    float acc[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = 0.0f;
    const int64_t nb = n / QK8_0;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        strata_prefetch_ahead(x + b * bb, 4 * (int)bb);
        __m256i wq[4], wa[4];
        float dw[4];
        for (int i = 0; i < 4; i++) {
            wq[i] = gemm_b32_values(x + (b + i) * bb, type);
            wa[i] = _mm256_abs_epi8(wq[i]);
            dw[i] = gemm_b32_factor(x + (b + i) * bb, type);
        }
        for (int t = 0; t < nt; t++) {
            const struct block_q8_0 *y = (const struct block_q8_0 *)act[t] + b;
            __m256i is[4];
            for (int i = 0; i < 4; i++)
                is[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(wa[i], _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y[i].qs), wq[i])),
                                          _mm256_set1_epi16(1));
            __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
            __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            int32_t si[4];
            _mm_storeu_si128((__m128i *)si, sums);
            for (int i = 0; i < 4; i++) acc[t] = __builtin_fmaf(dw[i] * _cvtsh_ss(y[i].d), (float)si[i], acc[t]);
        }
    }
    for (; b < nb; b++) {
        const __m256i wq = gemm_b32_values(x + b * bb, type), wa = _mm256_abs_epi8(wq);
        const float dw = gemm_b32_factor(x + b * bb, type);
        for (int t = 0; t < nt; t++) {
            const struct block_q8_0 *y = (const struct block_q8_0 *)act[t] + b;
            __m256i is = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)y->qs), wq)),
                                           _mm256_set1_epi16(1));
            acc[t] = __builtin_fmaf(dw * _cvtsh_ss(y->d), (float)strata_hsum256_epi32(is), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) s[t] = acc[t];
}


static inline __attribute__((always_inline)) void dot_q4_k_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_k4_k5(n, s, w, sizeof(struct block_q4_k), a, nt, false);
}

static inline __attribute__((always_inline)) void dot_q5_k_n(int64_t n, float *s, const void *w, const void *const *a, int nt)
{
    dot_k4_k5(n, s, w, sizeof(struct block_q5_k), a, nt, true);
}

GEMM_B32_DOTS(4)
STRATA_DOT_KERNELS(q4_k, dot_q4_k_n, 4)
STRATA_DOT_KERNELS(q5_k, dot_q5_k_n, 4)
STRATA_DOT_KERNELS(q6_k, dot_q6_k, 4)

const struct gemm_kernels gemm_kernels_avx2 = {
    .lanes = 8,
    .rows_per_panel = 16,
    .max_tiles = 1,
    .unpack = gemm_unpack_row,
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
};
