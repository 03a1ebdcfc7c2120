// AVX-512 (F/BW/VL/DQ + VNNI) dot products of the low-bit formats (lowbit.h); every entry left
// NULL (dequantisation, the other types) comes from the AVX2 table through dispatch.c.
//
// Each zmm step decodes two groups of 32 weights (64 elements) into 64 byte magnitudes and a
// 64-bit sign mask (Q2_K/Q3_K: unsigned values, their offsets taken off through the activation's
// bsums); the signs go onto the int8 activations with a masked subtract from zero (the AVX2
// kernels' vpsignb, which has no 512-bit form), vpmaddubsw multiplies and pairs them (exact:
// |w| <= 127, |a| <= 127) and VNNI's vpdpwssd applies the integer sub-block scales of the four
// 16-element quarters while accumulating int32. Grid entries come by vpgather; the 7-bit stored
// sign patterns of IQ2/IQ3 become 8 bits in a scalar register for 8 grid entries at once (pdep,
// then each byte's parity in its top bit). A block's int32 sums are scaled once by d_w * d_a in
// float, so the integer part is exact and only the float accumulation order (16 lanes) differs
// from the reference. Q4_1 takes blocks of 32 two per zmm (vpdpbusd of the unsigned nibbles).
//
// The 256-element types are written once for 1..STRATA_DOT_TOKENS activation rows (a block
// decoded once, then applied to each row): vec_dot is that code at one row, so vec_dot_multi
// agrees with it bit for bit. Q4_1 has no multi-token dot (vec_dot per token).
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/gemm_impl.h"
#include "backend/cpu/kernels_impl.h"
#include "quant/fp16.h"
#include "quant/iq_grids.h"

#define INLINE static inline __attribute__((always_inline))

// ---- helpers --------------------------------------------------------------------------------

// Eight 7-bit patterns, one per byte (bit 7 clear), with bit 7 set where it makes the byte's
// count of set bits even: the 8 sign bits of 8 grid entries (strata_iq_signs8 per byte).
INLINE uint64_t even_signs8x8(uint64_t s)
{
    uint64_t p = s ^ (s << 4);  // bit 7 of each byte ends as the parity of bits 0..6 of that byte
    p ^= p << 2;
    p ^= p << 1;
    return s | (p & 0x8080808080808080ull);
}

// Sign words of two IQ2_XXS / IQ3_XXS groups (4 x 7 bits each in bits 0..27) as a 64-bit mask.
INLINE __mmask64 signs_2x28(uint32_t s0, uint32_t s1)
{
    uint64_t both = (uint64_t)(s0 & 0x0fffffff) | (uint64_t)(s1 & 0x0fffffff) << 28;
    return _cvtu64_mask64(even_signs8x8(_pdep_u64(both, 0x7f7f7f7f7f7f7f7full)));
}

// a with the weights' signs: negated where k is set.
INLINE __m512i apply_signs(__m512i a, __mmask64 k)
{
    return _mm512_mask_sub_epi8(a, k, _mm512_setzero_si512(), a);
}

// acc + sum of 64 products |w| * signed a, each 4-element dword lane weighted by its int16
// scale pair (scale in both halves of the dword).
INLINE __m512i dot64(__m512i acc, __m512i mag, __m512i signed_act, __m512i scale_pairs)
{
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(mag, signed_act), scale_pairs);
}

// int32 lanes v (< 2^15) as the int16 pair (v, v).
INLINE __m512i pairs16(__m512i v) { return _mm512_or_si512(v, _mm512_slli_epi32(v, 16)); }

INLINE __m512i load_act(const int8_t *q) { return _mm512_loadu_si512((const void *)q); }

// Eight 8-byte grid entries by index.
INLINE __m512i grid64x8(const uint64_t *grid, __m512i idx)
{
    return _mm512_i64gather_epi64(idx, (const void *)grid, 8);
}

INLINE float hsum512(__m512 v) { return _mm512_reduce_add_ps(v); }

// ---- blocks of 256 against Q8_K ---------------------------------------------------------------

// The IQ formats in two steps: head() reads a block's float factor and its sub-block scales (as
// int16 pairs, one per dword); pair(j) decodes groups 2j and 2j + 1 into magnitudes, a sign mask
// and the scale pairs of their four quarters. The dot products run them once per block for up
// to STRATA_DOT_TOKENS activation rows.
struct iq_pair {
    __m512i mag, scale;
    __mmask64 neg;
};

INLINE float head_iq2_xxs(const void *w, __m512i *ls)
{
    const struct block_iq2_xxs *x = w;
    // (2s + 1) of group g from dword 2g + 1 (its sign/scale word): (word >> 27) | 1
    __m512i words = _mm512_loadu_si512((const void *)x->qs);
    *ls = pairs16(_mm512_or_si512(_mm512_srli_epi32(words, 27), _mm512_set1_epi32(1)));
    return _cvtsh_ss(x->d) * 0.125f;
}

INLINE struct iq_pair pair_iq2_xxs(const void *w, __m512i ls, int j)
{
    const struct block_iq2_xxs *x = w;
    const uint8_t *qs = (const uint8_t *)x->qs + 16 * j;  // per group: 4 index bytes, a sign/scale word
    uint64_t g0, g1;
    memcpy(&g0, qs, 8);
    memcpy(&g1, qs + 8, 8);
    __m512i idx = _mm512_cvtepu8_epi64(_mm_cvtsi64_si128((long long)((g0 & 0xffffffffu) | g1 << 32)));
    __m512i pick = _mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3);
    return (struct iq_pair){.mag = grid64x8(strata_iq2xxs_grid, idx),
                            .scale = _mm512_permutexvar_epi32(_mm512_add_epi32(pick, _mm512_set1_epi32(4 * j)), ls),
                            .neg = signs_2x28((uint32_t)(g0 >> 32), (uint32_t)(g1 >> 32))};
}

INLINE float head_iq2_xs(const void *w, __m512i *ls)
{
    const struct block_iq2_xs *x = w;
    // 2 * nibble + 1 of the 16 quarter scales in element order (low nibble first), one per dword
    __m128i sc = _mm_loadl_epi64((const __m128i *)x->scales);
    __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(sc, _mm_set1_epi8(15)),
                                    _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15)));
    __m512i v = _mm512_cvtepu8_epi32(nib);
    *ls = pairs16(_mm512_add_epi32(_mm512_add_epi32(v, v), _mm512_set1_epi32(1)));
    return _cvtsh_ss(x->d) * 0.125f;
}

INLINE struct iq_pair pair_iq2_xs(const void *w, __m512i ls, int j)
{
    const struct block_iq2_xs *x = w;
    __m128i q = _mm_loadu_si128((const __m128i *)(x->qs + 8 * j));  // 8 x (9-bit index, 7 signs)
    __m512i idx = _mm512_and_si512(_mm512_cvtepu16_epi64(q), _mm512_set1_epi64(511));
    __m128i s7 = _mm_srli_epi16(q, 9);
    uint64_t signs = even_signs8x8((uint64_t)_mm_cvtsi128_si64(_mm_packus_epi16(s7, s7)));
    __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return (struct iq_pair){.mag = grid64x8(strata_iq2xs_grid, idx),
                            .scale = _mm512_permutexvar_epi32(_mm512_add_epi32(pick, _mm512_set1_epi32(4 * j)), ls),
                            .neg = _cvtu64_mask64(signs)};
}

INLINE float head_iq3_xxs(const void *w, __m512i *ls)
{
    const struct block_iq3_xxs *x = w;
    // (2s + 1) of group g from its sign/scale word: (word >> 27) | 1
    __m256i words = _mm256_loadu_si256((const __m256i *)(x->qs + 64));
    *ls = pairs16(_mm512_zextsi256_si512(_mm256_or_si256(_mm256_srli_epi32(words, 27), _mm256_set1_epi32(1))));
    return _cvtsh_ss(x->d) * 0.25f;
}

INLINE struct iq_pair pair_iq3_xxs(const void *w, __m512i ls, int j)
{
    const struct block_iq3_xxs *x = w;
    uint32_t sgn[2];
    memcpy(sgn, x->qs + 64 + 8 * j, 8);
    __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x->qs + 16 * j)));
    __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return (struct iq_pair){.mag = _mm512_i32gather_epi32(idx, (const void *)strata_iq3xxs_grid, 4),
                            .scale = _mm512_permutexvar_epi32(_mm512_add_epi32(pick, _mm512_set1_epi32(2 * j)), ls),
                            .neg = signs_2x28(sgn[0], sgn[1])};
}

INLINE float head_iq1_m(const void *w, __m512i *ls)
{
    const struct block_iq1_m *x = w;
    uint64_t sc;
    memcpy(&sc, x->scales, 8);
    // 2s + 1 of the 16 quarters, one per dword: quarter 4j + k is bits 3k..3k+2 of word j
    __m512i words = _mm512_mask_set1_epi32(_mm512_set1_epi32((int)sc), 0xff00, (int)(sc >> 32));
    __m512i v = _mm512_srlv_epi32(words, _mm512_setr_epi32(0, 3, 6, 9, 16, 19, 22, 25, 0, 3, 6, 9, 16, 19, 22, 25));
    v = _mm512_and_si512(v, _mm512_set1_epi32(7));
    *ls = pairs16(_mm512_or_si512(_mm512_add_epi32(v, v), _mm512_set1_epi32(1)));
    return _cvtsh_ss(strata_iq1m_d(x->scales)) * 0.125f;
}

// 8 * grid + shift by grid byte & 3 (0, 1, -1 -> 0, 1, 3), as magnitude and sign; vpshufb reads
// its table from the entry's own 128-bit lane, whose halves may hold different shift signs: odd
// entries index the upper 8 bytes.
INLINE struct iq_pair pair_iq1_m(const void *w, __m512i ls, int j)
{
    const struct block_iq1_m *x = w;
    const __m512i mag_plus = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 9, 0, 7, 1, 9, 0, 7, 1, 9, 0, 7, 1, 9, 0, 7));
    const __m512i mag_minus = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 7, 0, 9, 1, 7, 0, 9, 1, 7, 0, 9, 1, 7, 0, 9));
    const __m512i neg_plus = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1));
    const __m512i neg_minus = _mm512_broadcast_i32x4(_mm_setr_epi8(1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1));
    const __m512i odd8 = _mm512_setr_epi64(0, 0x0808080808080808ll, 0, 0x0808080808080808ll, 0, 0x0808080808080808ll,
                                           0, 0x0808080808080808ll);
    const __m512i top_shift = _mm512_setr_epi64(0, 4, 8, 12, 16, 20, 24, 28);
    uint32_t qh;  // per grid entry k: bits 4k..4k+2 the index's top bits, bit 4k+3 its shift sign
    memcpy(&qh, x->qh + 4 * j, 4);
    __m512i top = _mm512_and_si512(_mm512_srlv_epi64(_mm512_set1_epi64((long long)qh << 8), top_shift),
                                   _mm512_set1_epi64(0x700));
    __m512i idx = _mm512_or_si512(_mm512_cvtepu8_epi64(_mm_loadl_epi64((const __m128i *)(x->qs + 8 * j))), top);
    __m512i code = _mm512_or_si512(_mm512_and_si512(grid64x8(strata_iq1s_grid, idx), _mm512_set1_epi8(3)), odd8);
    __mmask8 minus = (__mmask8)_pext_u32(qh, 0x88888888u);
    __m512i neg = _mm512_shuffle_epi8(_mm512_mask_blend_epi64(minus, neg_plus, neg_minus), code);
    __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    return (struct iq_pair){.mag = _mm512_shuffle_epi8(_mm512_mask_blend_epi64(minus, mag_plus, mag_minus), code),
                            .scale = _mm512_permutexvar_epi32(_mm512_add_epi32(pick, _mm512_set1_epi32(4 * j)), ls),
                            .neg = _mm512_test_epi8_mask(neg, neg)};
}

// The canonical float part (backend/cpu/gemm.h) of a block: S1 of row t = the sum of isum[t]'s
// lanes (and S2 = the sum of isum[8 + t]'s, the min term, where `mins`), then
// acc = fmaf(d * d_a, S1, acc) (and acc = fmaf(-dmin * d_a, S2, acc)); several rows in lanes.
INLINE void canonical_tail(float d, float ndmin, bool mins, __m512i *isum, __m512i rows, const void *const *a, int64_t b,
                           int nt, float *acc1, __m256 *accv)
{
    if (nt == 1) {
        const float da = ((const struct block_q8_k *)a[0])[b].d;
        *acc1 = __builtin_fmaf(d * da, (float)strata_hsum512_epi32(isum[0]), *acc1);
        if (mins) *acc1 = __builtin_fmaf(ndmin * da, (float)strata_hsum512_epi32(isum[8]), *acc1);
        return;
    }
    const __m512 st = _mm512_cvtepi32_ps(strata_reduce16_epi32(isum));  // lanes 0..7 S1, 8..15 S2
    const __m256 da = strata_q8k_factors(rows, b, nt);
    *accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(d), da), _mm512_castps512_ps256(st), *accv);
    if (mins) *accv = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(ndmin), da), _mm512_extractf32x8_ps(st, 1), *accv);
}

INLINE void iq_canonical_tail(float d, __m512i *isum, __m512i rows, const void *const *a, int64_t b, int nt, float *acc1,
                              __m256 *accv)
{
    canonical_tail(d, 0.0f, false, isum, rows, a, b, nt, acc1, accv);
}

// s[t] = dot(w, a[t]) for t < nt (a compile-time constant after inlining): each block decoded
// once; per row the same operations in the same order whatever nt, so vec_dot (nt = 1) and
// vec_dot_multi agree bit for bit. The float part is the canonical one (backend/cpu/gemm.h), so
// these are also what the GEMM computes.
#define IQ_DOT_N(name, block_type)                                                                  \
    INLINE void dot_n_##name(int64_t n, float *s, const void *w, const void *const *a, int nt)    \
    {                                                                                              \
        const uint8_t *x = w;                                                                      \
        float acc1 = 0.0f;                                                                         \
        __m256 accv = _mm256_setzero_ps();                                                         \
        const __m512i rows = strata_row_addresses(a, nt);                                          \
        for (int64_t b = 0; b < n / QK_K; b++, x += sizeof(struct block_type)) {                   \
            strata_prefetch_ahead(x, (int)sizeof(struct block_type));                              \
            __m512i ls, isum[16];                                                                  \
            float d = head_##name(x, &ls);                                                         \
            _Pragma("GCC unroll 16") for (int t = 0; t < 16; t++) isum[t] = _mm512_setzero_si512(); \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)                                    \
            {                                                                                      \
                struct iq_pair p = pair_##name(x, ls, j);                                          \
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++) {                                                     \
                    const struct block_q8_k *y = (const struct block_q8_k *)a[t] + b;              \
                    __m512i sa = apply_signs(load_act(y->qs + 64 * j), p.neg);                     \
                    isum[t] = dot64(isum[t], p.mag, sa, p.scale);                                  \
                }                                                                                  \
            }                                                                                      \
            iq_canonical_tail(d, isum, rows, a, b, nt, &acc1, &accv);                              \
        }                                                                                          \
        strata_store_results(s, acc1, accv, nt);                                                   \
    }                                                                                              \
    STRATA_DOT_KERNELS(name, dot_n_##name, STRATA_DOT_TOKENS)

// Int32 lanes v (|v| < 2^15, any sign) as the int16 pair (v, v).
INLINE __m512i signed_pairs16(__m512i v)
{
    return _mm512_or_si512(_mm512_and_si512(v, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(v, 16));
}

// Activations of groups j and 4 + j (elements 32 j.. and 128 + 32 j..): the Q2_K/Q3_K layout
// holds both in bits 2j..2j+1 of the same 64 qs bytes.
INLINE __m512i load_act_k(const int8_t *q, int j)
{
    __m256i lo = _mm256_loadu_si256((const __m256i *)(q + 32 * j));
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), _mm256_loadu_si256((const __m256i *)(q + 128 + 32 * j)), 1);
}

// Q2_K / Q3_K in two steps as the IQ formats: head() reads a block's factors, the 16 sub-block
// scales (int16 pairs, one per dword) and the int16 weights of the activation's 16-element sums
// (bsums); pair(j) decodes groups j and 4 + j as unsigned values.
struct kq_head {
    float d, dmin;   // dmin: Q2_K's min factor
    __m512i scale;
    __m256i bsum_w;  // Q2_K: the mins (subtracted in float); Q3_K: the scales (4 x, in the integer sum)
};

// Q3_K: q + 4 * hbit (0..7, unsigned) against a; the constant 4 comes off through the
// activation's bsums, so the block's integer sum is the reference's exactly.
INLINE struct kq_head head_q3_k(const void *w)
{
    const struct block_q3_k *x = w;
    // 16 x (sc - 32): low nibbles from bytes 0..7 (low, then high nibbles), top 2 bits of
    // sub-block j from bits 2 (j / 4) of byte 8 + j % 4
    uint32_t top;
    memcpy(&top, x->scales + 8, 4);
    __m128i lo8 = _mm_loadl_epi64((const __m128i *)x->scales);
    __m128i low4 = _mm_unpacklo_epi64(_mm_and_si128(lo8, _mm_set1_epi8(15)),
                                      _mm_and_si128(_mm_srli_epi16(lo8, 4), _mm_set1_epi8(15)));
    __m128i high2 = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    __m128i sc8 = _mm_sub_epi8(_mm_or_si128(low4, _mm_slli_epi16(high2, 4)), _mm_set1_epi8(32));
    return (struct kq_head){.d = _cvtsh_ss(x->d), .scale = signed_pairs16(_mm512_cvtepi8_epi32(sc8)),
                            .bsum_w = _mm256_cvtepi8_epi16(sc8)};
}

INLINE __m512i pair_q3_k(const void *w, int j)
{
    const struct block_q3_k *x = w;
    __m512i bits = _mm512_loadu_si512((const void *)x->qs);
    __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)x->hmask));
    __m512i hsel = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)), _mm256_set1_epi8((char)(16 << j)), 1);
    __m512i q = _mm512_and_si512(_mm512_srli_epi16(bits, 2 * j), _mm512_set1_epi8(3));
    return _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(hm, hsel), q, _mm512_set1_epi8(4));
}

// Q2_K: the min term dmin * sum (sc >> 4) * bsum is subtracted in float.
INLINE struct kq_head head_q2_k(const void *w)
{
    const struct block_q2_k *x = w;
    __m128i sc = _mm_loadu_si128((const __m128i *)x->scales);
    __m128i m8 = _mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15));
    return (struct kq_head){.d = _cvtsh_ss(x->d), .dmin = _cvtsh_ss(x->dmin),
                            .scale = pairs16(_mm512_cvtepu8_epi32(_mm_and_si128(sc, _mm_set1_epi8(15)))),
                            .bsum_w = _mm256_cvtepu8_epi16(m8)};
}

INLINE __m512i pair_q2_k(const void *w, int j)
{
    const struct block_q2_k *x = w;
    return _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512((const void *)x->qs), 2 * j), _mm512_set1_epi8(3));
}

// As IQ_DOT_N; q2 selects the min term (Q2_K: S2 = the sum of mins x bsums, folded in with
// -dmin d_a), else the bsum term is integer (Q3_K).
#define KQ_DOT_N(name, block_type, q2)                                                             \
    INLINE void dot_n_##name(int64_t n, float *s, const void *w, const void *const *a, int nt)    \
    {                                                                                              \
        const uint8_t *x = w;                                                                      \
        const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 8, 8, 8, 8, 9, 9, 9, 9);    \
        float acc1 = 0.0f;                                                                         \
        __m256 accv = _mm256_setzero_ps();                                                         \
        const __m512i rows = strata_row_addresses(a, nt);                                          \
        for (int64_t b = 0; b < n / QK_K; b++, x += sizeof(struct block_type)) {                   \
            strata_prefetch_ahead(x, (int)sizeof(struct block_type));                              \
            struct kq_head h = head_##name(x);                                                     \
            __m512i isum[16];                                                                      \
            _Pragma("GCC unroll 16") for (int t = 0; t < 16; t++) isum[t] = _mm512_setzero_si512(); \
            _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)                                   \
            {                                                                                      \
                const struct block_q8_k *y = (const struct block_q8_k *)a[t] + b;                  \
                __m256i bw = _mm256_madd_epi16(h.bsum_w, _mm256_loadu_si256((const __m256i *)y->bsums)); \
                if (q2) isum[8 + t] = _mm512_zextsi256_si512(bw);                                  \
                else isum[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_zextsi256_si512(_mm256_slli_epi32(bw, 2))); \
            }                                                                                      \
            _Pragma("GCC unroll 4") for (int j = 0; j < 4; j++)                                    \
            {                                                                                      \
                __m512i q = pair_##name(x, j);                                                     \
                __m512i sc = _mm512_permutexvar_epi32(_mm512_add_epi32(pick, _mm512_set1_epi32(2 * j)), h.scale); \
                _Pragma("GCC unroll 8") for (int t = 0; t < nt; t++)                               \
                {                                                                                  \
                    const struct block_q8_k *y = (const struct block_q8_k *)a[t] + b;              \
                    isum[t] = dot64(isum[t], q, load_act_k(y->qs, j), sc);                         \
                }                                                                                  \
            }                                                                                      \
            canonical_tail(h.d, -h.dmin, q2, isum, rows, a, b, nt, &acc1, &accv);                  \
        }                                                                                          \
        strata_store_results(s, acc1, accv, nt);                                                   \
    }                                                                                              \
    STRATA_DOT_KERNELS(name, dot_n_##name, STRATA_DOT_TOKENS)

// Two groups' 32 nibble bytes as 64 values 0..15 in element order (per group: low nibbles, then
// high nibbles).
INLINE __m512i nibbles64(const uint8_t *qs0, const uint8_t *qs1)
{
    __m256i b = _mm256_setr_m128i(_mm_loadu_si128((const __m128i *)qs0), _mm_loadu_si128((const __m128i *)qs1));
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(b), _mm256_srli_epi16(b, 4), 1);  // lo0 lo1 hi0 hi1
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm512_and_si512(z, _mm512_set1_epi8(15));
}

// IQ4_XS as the IQ formats (head/pair): |kvalue| by one table, the sign from the nibble
// (kvalues_iq4nl is negative exactly for nibbles 0..7).
INLINE float head_iq4_xs(const void *w, __m512i *ls)
{
    const struct block_iq4_xs *x = w;
    uint32_t lo;
    memcpy(&lo, x->scales_l, 4);
    uint64_t ls8 = _pdep_u64(lo, 0x0f0f0f0f0f0f0f0full) | _pdep_u64(x->scales_h, 0x3030303030303030ull);
    __m512i v = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128((long long)ls8)), _mm512_set1_epi32(32));
    *ls = signed_pairs16(v);
    return _cvtsh_ss(x->d);
}

INLINE struct iq_pair pair_iq4_xs(const void *w, __m512i ls, int j)
{
    const struct block_iq4_xs *x = w;
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_setr_epi8(127, 104, 83, 65, 49, 35, 22, 10, 1, 13, 25, 38, 53, 69, 89, 113));  // |kvalues_iq4nl|
    __m512i nib = nibbles64(x->qs + 32 * j, x->qs + 32 * j + 16);
    __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return (struct iq_pair){.mag = _mm512_shuffle_epi8(table, nib),
                            .scale = _mm512_permutexvar_epi32(_mm512_add_epi32(pick, _mm512_set1_epi32(2 * j)), ls),
                            .neg = _mm512_testn_epi8_mask(nib, _mm512_set1_epi8(8))};
}

IQ_DOT_N(iq2_xxs, block_iq2_xxs)
IQ_DOT_N(iq2_xs, block_iq2_xs)
IQ_DOT_N(iq3_xxs, block_iq3_xxs)
IQ_DOT_N(iq1_m, block_iq1_m)
IQ_DOT_N(iq4_xs, block_iq4_xs)
KQ_DOT_N(q3_k, block_q3_k, 0)
KQ_DOT_N(q2_k, block_q2_k, 1)


// ---- the GEMM's records (backend/cpu/gemm_impl.h) of these formats ----------------------------------

// corr of a block from its 256 stored values and its sub-block scales (sb 16 or 32).
INLINE int32_t block_corr(const int8_t *w, const int32_t *sc, int sb)
{
    int32_t cr = 0;
    for (int c = 0; c < 4; c++) {
        uint64_t s8[8];  // sums of 8 values + 128 each
        _mm512_storeu_si512(s8, _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(w + 64 * c), _mm512_set1_epi8((char)0x80)),
                                                _mm512_setzero_si512()));
        for (int k = 0; k < 8; k++) cr += sc[(64 * c + 8 * k) / sb] * ((int32_t)s8[k] - 8 * 128);
    }
    return 128 * cr;
}

// The integer scale of 4-value lane l of a pair's scale register (the low int16 of its dword).
INLINE int32_t lane_scale(const int32_t *lanes, int l) { return (int16_t)(lanes[l] & 0xffff); }

// IQ formats: values with their signs, one scale per sb values (16 or 32).
#define IQ_UNPACK(name, block_type, sb)                                                            \
    static void unpack_##name(const struct gemm_rec_layout *L, const void *row, uint8_t *rec)      \
    {                                                                                              \
        int8_t *w = (int8_t *)rec;                                                                 \
        int32_t *sc = (int32_t *)(rec + L->off_sc), *corr = (int32_t *)(rec + L->off_corr);        \
        float *dw = (float *)(rec + L->off_dw);                                                    \
        for (uint32_t b = 0; b < L->nb; b++) {                                                     \
            const uint8_t *x = (const uint8_t *)row + b * sizeof(struct block_type);               \
            strata_prefetch_ahead(x, (int)sizeof(struct block_type));                              \
            __m512i ls;                                                                            \
            dw[b] = head_##name(x, &ls);                                                           \
            int32_t *bsc = sc + b * (QK_K / (sb));                                                 \
            for (int j = 0; j < 4; j++) {                                                          \
                struct iq_pair p = pair_##name(x, ls, j);                                          \
                __m512i v = _mm512_mask_sub_epi8(p.mag, p.neg, _mm512_setzero_si512(), p.mag);     \
                _mm512_storeu_si512(w + (size_t)b * QK_K + 64 * j, v);                             \
                int32_t lanes[16];                                                                 \
                _mm512_storeu_si512(lanes, p.scale);                                               \
                for (int k = 0; k < 64 / (sb); k++) bsc[j * (64 / (sb)) + k] = lane_scale(lanes, k * (sb) / 4); \
            }                                                                                      \
            corr[b] = block_corr(w + (size_t)b * QK_K, bsc, sb);                                   \
        }                                                                                          \
    }

IQ_UNPACK(iq2_xxs, block_iq2_xxs, 32)
IQ_UNPACK(iq2_xs, block_iq2_xs, 16)
IQ_UNPACK(iq3_xxs, block_iq3_xxs, 32)
IQ_UNPACK(iq1_m, block_iq1_m, 16)
IQ_UNPACK(iq4_xs, block_iq4_xs, 32)

// Q2_K / Q3_K: pair(j) holds groups j and 4 + j (values 32 j.. and 128 + 32 j..); 16 sub-block
// scales. Q3_K's values are q + 4 hbit - 4 (its offset in the value); Q2_K's are q (unsigned),
// its min term the record's mins.
#define KQ_UNPACK(name, block_type, q2)                                                            \
    static void unpack_##name(const struct gemm_rec_layout *L, const void *row, uint8_t *rec)      \
    {                                                                                              \
        int8_t *w = (int8_t *)rec;                                                                 \
        int32_t *sc = (int32_t *)(rec + L->off_sc), *corr = (int32_t *)(rec + L->off_corr);        \
        int32_t *mp = (int32_t *)(rec + L->off_mp);                                                \
        float *dw = (float *)(rec + L->off_dw), *ndmin = (float *)(rec + L->off_ndmin);            \
        for (uint32_t b = 0; b < L->nb; b++) {                                                     \
            const uint8_t *x = (const uint8_t *)row + b * sizeof(struct block_type);               \
            strata_prefetch_ahead(x, (int)sizeof(struct block_type));                              \
            struct kq_head h = head_##name(x);                                                     \
            int32_t lanes[16];                                                                     \
            _mm512_storeu_si512(lanes, h.scale);                                                   \
            for (int k = 0; k < 16; k++) sc[b * 16 + k] = lane_scale(lanes, k);                    \
            int8_t *bw = w + (size_t)b * QK_K;                                                     \
            for (int j = 0; j < 4; j++) {                                                          \
                __m512i v = pair_##name(x, j);                                                     \
                if (!(q2)) v = _mm512_sub_epi8(v, _mm512_set1_epi8(4));                            \
                _mm256_storeu_si256((__m256i *)(bw + 32 * j), _mm512_castsi512_si256(v));          \
                _mm256_storeu_si256((__m256i *)(bw + 128 + 32 * j), _mm512_extracti64x4_epi64(v, 1)); \
            }                                                                                      \
            corr[b] = block_corr(bw, sc + b * 16, 16);                                             \
            dw[b] = h.d;                                                                           \
            if (q2) {                                                                              \
                _mm256_storeu_si256((__m256i *)(mp + b * 8), h.bsum_w);                            \
                ndmin[b] = -h.dmin;                                                                \
            }                                                                                      \
        }                                                                                          \
    }

KQ_UNPACK(q3_k, block_q3_k, 0)
KQ_UNPACK(q2_k, block_q2_k, 1)

void gemm_unpack_lowbit_avx512(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec)
{
    switch (f->wtype) {
    case STRATA_TYPE_IQ2_XXS: unpack_iq2_xxs(L, row, rec); break;
    case STRATA_TYPE_IQ2_XS: unpack_iq2_xs(L, row, rec); break;
    case STRATA_TYPE_IQ3_XXS: unpack_iq3_xxs(L, row, rec); break;
    case STRATA_TYPE_IQ1_M: unpack_iq1_m(L, row, rec); break;
    case STRATA_TYPE_IQ4_XS: unpack_iq4_xs(L, row, rec); break;
    case STRATA_TYPE_Q3_K: unpack_q3_k(L, row, rec); break;
    case STRATA_TYPE_Q2_K: unpack_q2_k(L, row, rec); break;
    default: break;
    }
}

// ---- blocks of 32 against Q8_1 ----------------------------------------------------------------

// Q4_1, four blocks per step (two per zmm): vpdpbusd of the nibbles (unsigned) with the
// activations, the block factors d_w * d_a per 256-bit half, the min terms m * s (the
// activation's f16 sum, as the reference) summed in a vector; the f16 fields of four blocks are
// converted together.
INLINE float q4_1_tail(const struct block_q4_1 *x, const struct block_q8_1 *y, __m512 *acc)
{
    __m128i q = _mm_loadu_si128((const __m128i *)x->qs);
    __m256i wv = _mm256_and_si256(_mm256_setr_m128i(q, _mm_srli_epi16(q, 4)), _mm256_set1_epi8(15));
    __m256i isum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), wv, _mm256_loadu_si256((const __m256i *)y->qs));
    __m512 f = _mm512_set1_ps(_cvtsh_ss(x->d) * _cvtsh_ss(y->d));
    *acc = _mm512_fmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(isum)), f, *acc);
    return _cvtsh_ss(x->m) * _cvtsh_ss(y->s);
}

// Two blocks' 32 activation bytes in one zmm.
INLINE __m512i load_act_2x32(const struct block_q8_1 *y)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y[0].qs)),
                              _mm256_loadu_si256((const __m256i *)y[1].qs), 1);
}

// The (d, m) / (d, s) half pairs of four consecutive blocks of `stride` bytes as floats.
INLINE __m256 halves_4x2(const uint8_t *p, size_t stride)
{
    uint32_t h[4];
    for (int i = 0; i < 4; i++) memcpy(&h[i], p + i * stride, 4);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

static void vec_dot_q4_1(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_1 *x = w;
    const struct block_q8_1 *y = a;
    const int64_t nb = n / 32;
    const __m512i pick01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512i pick23 = _mm512_setr_epi32(4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6);
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_min = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        strata_prefetch_ahead(x + b, 4 * (int)sizeof(struct block_q4_1));
        // d_w d_a and m s of the four blocks in alternate lanes
        __m512 f = _mm512_castps256_ps512(_mm256_mul_ps(halves_4x2((const uint8_t *)(x + b), sizeof(*x)),
                                                         halves_4x2((const uint8_t *)(y + b), sizeof(*y))));
        acc_min = _mm256_mask_add_ps(acc_min, 0xaa, acc_min, _mm512_castps512_ps256(f));
        __m512i s01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles64(x[b].qs, x[b + 1].qs), load_act_2x32(y + b));
        __m512i s23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), nibbles64(x[b + 2].qs, x[b + 3].qs), load_act_2x32(y + b + 2));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), _mm512_permutexvar_ps(pick01, f), acc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s23), _mm512_permutexvar_ps(pick23, f), acc);
    }
    float min_sum = hsum512(_mm512_zextps256_ps512(acc_min));
    for (; b < nb; b++) min_sum += q4_1_tail(x + b, y + b, &acc);
    *s = hsum512(acc) + min_sum;
}

const struct strata_kernels strata_lowbit_avx512_table = {
    .isa = STRATA_ISA_AVX512,
    .vec_dot = {[STRATA_TYPE_IQ2_XXS] = vec_dot_iq2_xxs, [STRATA_TYPE_IQ2_XS] = vec_dot_iq2_xs,
                [STRATA_TYPE_IQ3_XXS] = vec_dot_iq3_xxs, [STRATA_TYPE_IQ1_M] = vec_dot_iq1_m,
                [STRATA_TYPE_Q3_K] = vec_dot_q3_k, [STRATA_TYPE_Q2_K] = vec_dot_q2_k,
                [STRATA_TYPE_IQ4_XS] = vec_dot_iq4_xs, [STRATA_TYPE_Q4_1] = vec_dot_q4_1},
    .vec_dot_multi = {[STRATA_TYPE_IQ2_XXS] = vec_dot_multi_iq2_xxs, [STRATA_TYPE_IQ2_XS] = vec_dot_multi_iq2_xs,
                      [STRATA_TYPE_IQ3_XXS] = vec_dot_multi_iq3_xxs, [STRATA_TYPE_IQ1_M] = vec_dot_multi_iq1_m,
                      [STRATA_TYPE_IQ4_XS] = vec_dot_multi_iq4_xs, [STRATA_TYPE_Q3_K] = vec_dot_multi_q3_k,
                      [STRATA_TYPE_Q2_K] = vec_dot_multi_q2_k},
};
