// AVX2 dot products of the low-bit formats (lowbit.h). Dequantisation, Q8_1 rounding and any
// entry left NULL come from the scalar table; the AVX-512 table reuses these kernels.
//
// One scheme for every format: each group of 32 weights is decoded into 32 byte magnitudes
// (unsigned) and a sign mask; the signs are moved onto the int8 activations (vpsignb), so one
// vpmaddubsw multiplies and pairs them (|w| <= 127, |a| <= 127: no int16 saturation), one
// vpmaddwd applies the integer sub-block scales of the two 16-element halves, and the block's
// int32 sums are scaled once by d_w * d_a in float. Grid entries are gathered with scalar loads
// (4 x 8 or 8 x 4 bytes per group); 8 sign bits per 8 weights are spread to bytes by a shuffle and
// a compare. Minimum terms (Q2_K, Q4_1/Q5_1) use the activation's block sums as the reference does.
#include <string.h>

#include "backend/cpu/kernels_impl.h"
#include "quant/fp16.h"
#include "quant/iq_grids.h"

#define INLINE static inline __attribute__((always_inline))

// 32 sign bits (bit j of byte k: weight 8k + j) to a byte mask, 0xff where negative.
INLINE __m256i sign_mask(uint32_t bits)
{
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                            2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), spread);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
}

// Activations with the weights' signs: negated where mask is set.
INLINE __m256i apply_signs(__m256i a, __m256i mask)
{
    return _mm256_sign_epi8(a, _mm256_or_si256(mask, _mm256_set1_epi8(1)));
}

// Sum of 32 products, the two 16-element halves weighted by their scales: 8 int32 lanes.
INLINE __m256i group_dot(__m256i mag, __m256i signed_act, int scale_lo, int scale_hi)
{
    __m256i p = _mm256_maddubs_epi16(mag, signed_act);
    __m256i sc = _mm256_setr_m128i(_mm_set1_epi16((short)scale_lo), _mm_set1_epi16((short)scale_hi));
    return _mm256_madd_epi16(p, sc);
}

// For signed weights w: |w| against sign(w) * a.
INLINE __m256i signed_group_dot(__m256i w, __m256i a, int scale_lo, int scale_hi)
{
    return group_dot(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w), scale_lo, scale_hi);
}

INLINE __m256i load_act(const int8_t *q) { return _mm256_loadu_si256((const __m256i *)q); }

INLINE __m256i grid64x4(const uint64_t *grid, int i0, int i1, int i2, int i3)
{
    return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1], (long long)grid[i0]);
}

INLINE uint32_t signs4x7(uint32_t packed)
{
    return (uint32_t)strata_iq_signs8(packed) | (uint32_t)strata_iq_signs8(packed >> 7) << 8 |
           (uint32_t)strata_iq_signs8(packed >> 14) << 16 | (uint32_t)strata_iq_signs8(packed >> 21) << 24;
}

// 16 nibbles -> 32 bytes through a 16-entry table: low nibbles first (weights 0..15), then high.
INLINE __m256i nibbles_lookup(const uint8_t *qs, __m256i table)
{
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    __m256i n = _mm256_setr_m128i(b, _mm_srli_epi16(b, 4));
    return _mm256_shuffle_epi8(table, _mm256_and_si256(n, _mm256_set1_epi8(15)));
}

INLINE __m256i table16(const int8_t *t)
{
    __m128i v = _mm_loadu_si128((const __m128i *)t);
    return _mm256_setr_m128i(v, v);
}

// ---- blocks of 256 against Q8_K ---------------------------------------------------------------

// Each step returns one block's scaled int32 sums (8 lanes); *d is the block's float factor
// (times 1 / 8 etc. as the scalar reference decodes it), *min_sum the integer min term.

INLINE __m256i blk_iq2_xxs(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq2_xxs *x = w;
    *d = strata_fp16_to_fp32(x->d) * 0.125f;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        uint8_t idx[4];
        uint32_t sgn;
        memcpy(idx, x->qs + 4 * g, 4);
        memcpy(&sgn, x->qs + 4 * g + 2, 4);
        int ls = 2 * (int)(sgn >> 28) + 1;
        __m256i mag = grid64x4(strata_iq2xxs_grid, idx[0], idx[1], idx[2], idx[3]);
        __m256i a = apply_signs(load_act(y->qs + 32 * g), sign_mask(signs4x7(sgn)));
        acc = _mm256_add_epi32(acc, group_dot(mag, a, ls, ls));
    }
    return acc;
}

INLINE __m256i blk_iq2_xs(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq2_xs *x = w;
    *d = strata_fp16_to_fp32(x->d) * 0.125f;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const uint16_t *q = x->qs + 4 * g;
        __m256i mag = grid64x4(strata_iq2xs_grid, q[0] & 511, q[1] & 511, q[2] & 511, q[3] & 511);
        uint32_t s = (uint32_t)strata_iq_signs8(q[0] >> 9) | (uint32_t)strata_iq_signs8(q[1] >> 9) << 8 |
                     (uint32_t)strata_iq_signs8(q[2] >> 9) << 16 | (uint32_t)strata_iq_signs8(q[3] >> 9) << 24;
        __m256i a = apply_signs(load_act(y->qs + 32 * g), sign_mask(s));
        int sc = x->scales[g];
        acc = _mm256_add_epi32(acc, group_dot(mag, a, 2 * (sc & 15) + 1, 2 * (sc >> 4) + 1));
    }
    return acc;
}

INLINE __m256i blk_iq2_s(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq2_s *x = w;
    *d = strata_fp16_to_fp32(x->d) * 0.125f;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 4 * g;
        int qh = x->qh[g];
        __m256i mag = grid64x4(strata_iq2s_grid, q[0] | (qh & 3) << 8, q[1] | (qh & 12) << 6,
                               q[2] | (qh & 48) << 4, q[3] | (qh & 192) << 2);
        uint32_t s;
        memcpy(&s, x->qs + 32 + 4 * g, 4);
        __m256i a = apply_signs(load_act(y->qs + 32 * g), sign_mask(s));
        int sc = x->scales[g];
        acc = _mm256_add_epi32(acc, group_dot(mag, a, 2 * (sc & 15) + 1, 2 * (sc >> 4) + 1));
    }
    return acc;
}

INLINE __m256i blk_iq3_xxs(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq3_xxs *x = w;
    *d = strata_fp16_to_fp32(x->d) * 0.25f;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 8 * g;
        uint32_t sgn;
        memcpy(&sgn, x->qs + 64 + 4 * g, 4);
        const uint32_t *gr = strata_iq3xxs_grid;
        __m256i mag = _mm256_setr_epi32((int)gr[q[0]], (int)gr[q[1]], (int)gr[q[2]], (int)gr[q[3]], (int)gr[q[4]],
                                        (int)gr[q[5]], (int)gr[q[6]], (int)gr[q[7]]);
        int ls = 2 * (int)(sgn >> 28) + 1;
        __m256i a = apply_signs(load_act(y->qs + 32 * g), sign_mask(signs4x7(sgn)));
        acc = _mm256_add_epi32(acc, group_dot(mag, a, ls, ls));
    }
    return acc;
}

INLINE __m256i blk_iq3_s(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq3_s *x = w;
    *d = strata_fp16_to_fp32(x->d);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 8 * g;
        int qh = x->qh[g];
        const uint32_t *gr = strata_iq3s_grid;
        __m256i mag = _mm256_setr_epi32(
            (int)gr[q[0] | (qh << 8 & 256)], (int)gr[q[1] | (qh << 7 & 256)], (int)gr[q[2] | (qh << 6 & 256)],
            (int)gr[q[3] | (qh << 5 & 256)], (int)gr[q[4] | (qh << 4 & 256)], (int)gr[q[5] | (qh << 3 & 256)],
            (int)gr[q[6] | (qh << 2 & 256)], (int)gr[q[7] | (qh << 1 & 256)]);
        uint32_t s;
        memcpy(&s, x->signs + 4 * g, 4);
        __m256i a = apply_signs(load_act(y->qs + 32 * g), sign_mask(s));
        int ls = 2 * ((x->scales[g / 2] >> (4 * (g & 1))) & 15) + 1;
        acc = _mm256_add_epi32(acc, group_dot(mag, a, ls, ls));
    }
    return acc;
}

// 4 IQ1 entries (int8 -1..1) as 8 * grid + shift, shifts per entry.
INLINE __m256i iq1_weights(int i0, int i1, int i2, int i3, __m256i shift)
{
    __m256i g = grid64x4(strata_iq1s_grid, i0, i1, i2, i3);
    return _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), shift);
}

INLINE __m256i blk_iq1_s(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq1_s *x = w;
    *d = strata_fp16_to_fp32(x->d) * 0.125f;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 4 * g;
        int qh = x->qh[g];
        __m256i wv = iq1_weights(q[0] | (qh & 7) << 8, q[1] | (qh >> 3 & 7) << 8, q[2] | (qh >> 6 & 7) << 8,
                                 q[3] | (qh >> 9 & 7) << 8, _mm256_set1_epi8(qh & 0x8000 ? -1 : 1));
        int ls = 2 * ((qh >> 12) & 7) + 1;
        acc = _mm256_add_epi32(acc, signed_group_dot(wv, load_act(y->qs + 32 * g), ls, ls));
    }
    return acc;
}

INLINE __m256i blk_iq1_m(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq1_m *x = w;
    uint16_t sc[4];
    memcpy(sc, x->scales, 8);
    *d = strata_fp16_to_fp32(strata_iq1m_d(x->scales)) * 0.125f;
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        const uint8_t *q = x->qs + 4 * g;
        int h0 = x->qh[2 * g], h1 = x->qh[2 * g + 1];
        __m256i shift = _mm256_setr_epi64x(h0 & 8 ? -1ll : 0x0101010101010101ll, h0 & 128 ? -1ll : 0x0101010101010101ll,
                                           h1 & 8 ? -1ll : 0x0101010101010101ll, h1 & 128 ? -1ll : 0x0101010101010101ll);
        __m256i wv = iq1_weights(q[0] | (h0 & 7) << 8, q[1] | (h0 & 0x70) << 4, q[2] | (h1 & 7) << 8,
                                 q[3] | (h1 & 0x70) << 4, shift);
        int s = sc[g / 2] >> (6 * (g & 1));
        acc = _mm256_add_epi32(acc, signed_group_dot(wv, load_act(y->qs + 32 * g), 2 * (s & 7) + 1,
                                                     2 * ((s >> 3) & 7) + 1));
    }
    return acc;
}

INLINE __m256i blk_iq4_xs(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_iq4_xs *x = w;
    *d = strata_fp16_to_fp32(x->d);
    const __m256i table = table16(strata_kvalues_iq4nl);
    __m256i acc = _mm256_setzero_si256();
    for (int g = 0; g < 8; g++) {
        int ls = ((x->scales_l[g / 2] >> (4 * (g & 1))) & 15) | ((x->scales_h >> (2 * g)) & 3) << 4;
        __m256i wv = nibbles_lookup(x->qs + 16 * g, table);
        acc = _mm256_add_epi32(acc, signed_group_dot(wv, load_act(y->qs + 32 * g), ls - 32, ls - 32));
    }
    return acc;
}

// Q2_K: 2-bit magnitudes; its min term is returned through the scalar path below.
INLINE __m256i blk_q2_k(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_q2_k *x = w;
    *d = strata_fp16_to_fp32(x->d);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int j = 0; j < 4; j++) {
            int g = 4 * h + j;
            __m256i mag = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), _mm256_set1_epi8(3));
            acc = _mm256_add_epi32(acc, group_dot(mag, load_act(y->qs + 32 * g), x->scales[2 * g] & 15,
                                                  x->scales[2 * g + 1] & 15));
        }
    }
    return acc;
}

INLINE __m256i blk_q3_k(const void *w, const struct block_q8_k *y, float *d)
{
    const struct block_q3_k *x = w;
    *d = strata_fp16_to_fp32(x->d);
    int scale[16];
    for (int j = 0; j < 16; j++) {
        int low4 = j < 8 ? x->scales[j] & 15 : x->scales[j - 8] >> 4;
        scale[j] = (low4 | ((x->scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
    }
    __m256i hm = _mm256_loadu_si256((const __m256i *)x->hmask);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i bits = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * h));
        for (int j = 0; j < 4; j++) {
            int g = 4 * h + j;
            __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), _mm256_set1_epi8(3));
            __m256i hb = _mm256_and_si256(hm, _mm256_set1_epi8((char)(1 << g)));
            __m256i low = _mm256_and_si256(_mm256_cmpeq_epi8(hb, _mm256_setzero_si256()), _mm256_set1_epi8(4));
            acc = _mm256_add_epi32(acc, signed_group_dot(_mm256_sub_epi8(q, low), load_act(y->qs + 32 * g),
                                                         scale[2 * g], scale[2 * g + 1]));
        }
    }
    return acc;
}

INLINE float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

typedef __m256i (*block_fn)(const void *w, const struct block_q8_k *y, float *d);

INLINE float dot_256(int64_t n, const void *w, size_t type_size, const void *a, block_fn blk, int q2_k_min)
{
    const uint8_t *x = w;
    const struct block_q8_k *y = a;
    __m256 acc = _mm256_setzero_ps();
    float min_sum = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++, x += type_size) {
        strata_prefetch_ahead(x, (int)type_size);
        float d;
        __m256i isum = blk(x, &y[b], &d);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * y[b].d), acc);
        if (q2_k_min) {
            const struct block_q2_k *q2 = (const struct block_q2_k *)x;
            __m256i m = _mm256_cvtepu8_epi16(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)q2->scales), 4));
            m = _mm256_and_si256(m, _mm256_set1_epi16(15));
            __m256i bs = _mm256_loadu_si256((const __m256i *)y[b].bsums);
            __m256i prod = _mm256_madd_epi16(m, bs);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
            s4 = _mm_hadd_epi32(s4, s4);
            s4 = _mm_hadd_epi32(s4, s4);
            min_sum += strata_fp16_to_fp32(q2->dmin) * y[b].d * (float)_mm_cvtsi128_si32(s4);
        }
    }
    return hsum_ps(acc) - min_sum;
}

#define DOT_256(name, block_type, q2_min)                                                    \
    static void vec_dot_##name(int64_t n, float *s, const void *w, const void *a)            \
    {                                                                                         \
        *s = dot_256(n, w, sizeof(struct block_type), a, blk_##name, q2_min);                 \
    }

DOT_256(iq2_xxs, block_iq2_xxs, 0)
DOT_256(iq2_xs, block_iq2_xs, 0)
DOT_256(iq2_s, block_iq2_s, 0)
DOT_256(iq3_xxs, block_iq3_xxs, 0)
DOT_256(iq3_s, block_iq3_s, 0)
DOT_256(iq1_s, block_iq1_s, 0)
DOT_256(iq1_m, block_iq1_m, 0)
DOT_256(iq4_xs, block_iq4_xs, 0)
DOT_256(q2_k, block_q2_k, 1)
DOT_256(q3_k, block_q3_k, 0)

// ---- blocks of 32 against Q8_0 / Q8_1 ---------------------------------------------------------

// 16 bytes of nibbles as 32 unsigned values 0..15 (low nibbles first).
INLINE __m256i nibbles(const uint8_t *qs)
{
    __m128i b = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_setr_m128i(b, _mm_srli_epi16(b, 4)), _mm256_set1_epi8(15));
}

// Bit 4 of each weight from the 32-bit qh word, as 0x10 bytes.
INLINE __m256i fifth_bits(const uint8_t *qh4)
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    return _mm256_and_si256(sign_mask(qh), _mm256_set1_epi8(16));
}

// weights -> signed int8 of one 32-block, *d its float factor, *m its min (Q4_1/Q5_1) or 0.
INLINE __m256i w_q4_0(const void *w, float *d, float *m)
{
    const struct block_q4_0 *x = w;
    *d = strata_fp16_to_fp32(x->d), *m = 0.0f;
    return _mm256_sub_epi8(nibbles(x->qs), _mm256_set1_epi8(8));
}

INLINE __m256i w_q5_0(const void *w, float *d, float *m)
{
    const struct block_q5_0 *x = w;
    *d = strata_fp16_to_fp32(x->d), *m = 0.0f;
    return _mm256_sub_epi8(_mm256_or_si256(nibbles(x->qs), fifth_bits(x->qh)), _mm256_set1_epi8(16));
}

INLINE __m256i w_q4_1(const void *w, float *d, float *m)
{
    const struct block_q4_1 *x = w;
    *d = strata_fp16_to_fp32(x->d), *m = strata_fp16_to_fp32(x->m);
    return nibbles(x->qs);
}

INLINE __m256i w_q5_1(const void *w, float *d, float *m)
{
    const struct block_q5_1 *x = w;
    *d = strata_fp16_to_fp32(x->d), *m = strata_fp16_to_fp32(x->m);
    return _mm256_or_si256(nibbles(x->qs), fifth_bits(x->qh));
}

INLINE __m256i w_iq4_nl(const void *w, float *d, float *m)
{
    const struct block_iq4_nl *x = w;
    *d = strata_fp16_to_fp32(x->d), *m = 0.0f;
    return nibbles_lookup(x->qs, table16(strata_kvalues_iq4nl));
}

INLINE __m256i w_mxfp4(const void *w, float *d, float *m)
{
    const struct block_mxfp4 *x = w;
    *d = strata_e8m0_half(x->e), *m = 0.0f;
    return nibbles_lookup(x->qs, table16(strata_kvalues_mxfp4));
}

typedef __m256i (*w32_fn)(const void *w, float *d, float *m);

INLINE float dot_32(int64_t n, const void *w, size_t type_size, const void *a, w32_fn decode, int q8_1)
{
    const uint8_t *x = w, *y = a;
    const size_t act_size = q8_1 ? sizeof(struct block_q8_1) : sizeof(struct block_q8_0);
    __m256 acc = _mm256_setzero_ps();
    float min_sum = 0.0f;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t b = 0; b < n / 32; b++, x += type_size, y += act_size) {
        strata_prefetch_ahead(x, (int)type_size);
        float d, m;
        __m256i wv = decode(x, &d, &m);
        uint16_t ad;
        memcpy(&ad, y, 2);
        __m256i av = load_act((const int8_t *)(y + act_size - 32));
        __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(av, wv)), ones);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * strata_fp16_to_fp32(ad)), acc);
        if (q8_1) {
            uint16_t as;
            memcpy(&as, y + 2, 2);
            min_sum += m * strata_fp16_to_fp32(as);
        }
    }
    return hsum_ps(acc) + min_sum;
}

#define DOT_32(name, block_type, q8_1)                                                       \
    static void vec_dot_##name(int64_t n, float *s, const void *w, const void *a)            \
    {                                                                                         \
        *s = dot_32(n, w, sizeof(struct block_type), a, w_##name, q8_1);                      \
    }

DOT_32(q4_0, block_q4_0, 0)
DOT_32(q5_0, block_q5_0, 0)
DOT_32(q4_1, block_q4_1, 1)
DOT_32(q5_1, block_q5_1, 1)
DOT_32(iq4_nl, block_iq4_nl, 0)
DOT_32(mxfp4, block_mxfp4, 0)

const struct strata_kernels strata_lowbit_avx2_table = {
    .isa = STRATA_ISA_AVX2,
    .vec_dot = {STRATA_LOWBIT_ENTRIES(vec_dot)},
};
