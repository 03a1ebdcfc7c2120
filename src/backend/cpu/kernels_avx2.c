// AVX2 + FMA + F16C kernels: activation rounding (bit-identical to ref.c) and the dot products of
// every computable weight type, plus F16/BF16 dequantisation. Layouts in blocks.h.
//
// Quantized dot products compute each block's integer sums exactly in int32 lanes (maddubs of
// unsigned weight quants by signed activation quants, then madd by the sub-block scale) and
// only then scale by the block's float factors, so they differ from the reference only by the
// order of float accumulation (8 lanes, summed at the end). The quantized dot products are written
// once for 1..STRATA_DOT_TOKENS activation rows (STRATA_DOT_KERNELS in blocks.h).
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/kernels_impl.h"
#include "quant/fp16.h"

// ---- helpers --------------------------------------------------------------------------------

static inline float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

static inline __m256 load_f16x8(const uint16_t *p)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

static inline __m256 load_bf16x8(const uint16_t *p)
{
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The packs work per 128-bit lane; this puts the 4-byte groups back in element order.
static inline __m256i unshuffle_packed(__m256i b)
{
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// 32 int32 -> 32 int8 with signed saturation (NaN's INT32_MIN becomes -128), in order.
static inline __m256i pack_saturate_i8(__m256i a, __m256i b, __m256i c, __m256i d)
{
    return unshuffle_packed(_mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d)));
}

// 32 int32 -> their 32 low bytes (C's int -> int8 store), in order.
static inline __m256i pack_low_bytes(__m256i a, __m256i b, __m256i c, __m256i d)
{
    const __m256i ff = _mm256_set1_epi32(0xff);
    __m256i ab = _mm256_packus_epi32(_mm256_and_si256(a, ff), _mm256_and_si256(b, ff));
    __m256i cd = _mm256_packus_epi32(_mm256_and_si256(c, ff), _mm256_and_si256(d, ff));
    return unshuffle_packed(_mm256_packus_epi16(ab, cd));
}

// 8 int16 replicated into both 128-bit halves, and the control that broadcasts int16 lane k.
static inline __m256i scale_shuffle(int k)
{
    return _mm256_set1_epi16((short)((2 * k + 1) << 8 | 2 * k));
}

// Bit `bit` of every byte of qh, moved to bit 4 (the Q5_K high bit of sub-block `bit`).
static inline __m256i q5_high_bit(__m256i qh, int bit)
{
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    if (bit <= 4) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - bit), bit4);
    return _mm256_and_si256(_mm256_srli_epi16(qh, bit - 4), bit4);
}

// ---- dequantisation -------------------------------------------------------------------------

static void dequant_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16x8(h + i));
    for (; i < n; i++) dst[i] = _cvtsh_ss(h[i]);
}

static void dequant_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *b = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_bf16x8(b + i));
    for (; i < n; i++) dst[i] = strata_bf16_to_fp32(b[i]);
}

// ---- activation rounding --------------------------------------------------------------------

static void quantize_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) h[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

// 8 floats -> 8 bf16 (in the low 16 bits of each int32 lane), as strata_fp32_to_bf16.
static inline __m256i bf16_round8(__m256 x)
{
    __m256i u = _mm256_castps_si256(x);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                        _mm256_set1_epi32(0x7f800000));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

static void quantize_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *b = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = bf16_round8(_mm256_loadu_ps(src + i));
        __m256i hi = bf16_round8(_mm256_loadu_ps(src + i + 8));
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
        _mm256_storeu_si256((__m256i *)(b + i), packed);
    }
    for (; i < n; i++) b[i] = strata_fp32_to_bf16(src[i]);
}

static void quantize_q8_0(const float *src, void *dst, int64_t n)
{
    struct block_q8_0 *blk = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(src + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
        }
        float max = hmax_ps(amax);
        blk[b].d = _cvtss_sh(max / 127.0f, _MM_FROUND_TO_NEAREST_INT);
        __m256 id = _mm256_set1_ps(max != 0.0f ? 127.0f / max : 0.0f);
        __m256i q[4];
        for (int k = 0; k < 4; k++)
            q[k] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[k], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        _mm256_storeu_si256((__m256i *)blk[b].qs, pack_saturate_i8(q[0], q[1], q[2], q[3]));
    }
}

static void quantize_q8_k(const float *src, void *dst, int64_t n)
{
    struct block_q8_k *blk = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        __m256 amax_v = _mm256_setzero_ps();
        for (int i = 0; i < QK_K; i += 8)
            amax_v = _mm256_max_ps(amax_v, _mm256_andnot_ps(sign, _mm256_loadu_ps(src + i)));
        float amax = hmax_ps(amax_v);
        if (amax == 0.0f) {
            memset(&blk[b], 0, sizeof(blk[b]));
            continue;
        }
        // the reference keeps the first element of largest magnitude: its sign decides d's
        amax_v = _mm256_set1_ps(amax);
        float max = 0.0f;
        for (int i = 0; i < QK_K; i += 8) {
            __m256 x = _mm256_loadu_ps(src + i);
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, x), amax_v, _CMP_EQ_OQ));
            if (hit) {
                max = src[i + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        float iscale = -127.0f / max;
        __m256 iscale_v = _mm256_set1_ps(iscale);
        const __m256i q_max = _mm256_set1_epi32(127);
        for (int i = 0; i < QK_K; i += 32) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                __m256 scaled = _mm256_mul_ps(iscale_v, _mm256_loadu_ps(src + i + 8 * k));
                __m256 rounded = _mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(rounded), q_max);
            }
            _mm256_storeu_si256((__m256i *)(blk[b].qs + i), pack_low_bytes(q[0], q[1], q[2], q[3]));
        }
        // each 16's sum: the bytes biased to unsigned (x ^ 0x80 = x + 128), summed eight at a time
        // by SAD against zero, less 16 x 128
        for (int c = 0; c < 8; c++) {
            const __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c)),
                                               _mm256_set1_epi8((char)0x80));
            uint64_t s4[4];
            _mm256_storeu_si256((__m256i *)s4, _mm256_sad_epu8(u, _mm256_setzero_si256()));
            blk[b].bsums[2 * c] = (int16_t)((int)(s4[0] + s4[1]) - 16 * 128);
            blk[b].bsums[2 * c + 1] = (int16_t)((int)(s4[2] + s4[3]) - 16 * 128);
        }
        blk[b].d = 1.0f / iscale;
    }
}

// ---- dot products ---------------------------------------------------------------------------

// The float dot products share one loop; `load` widens 8 elements of the format to floats. It is
// inlined with a constant loader, so each instance compiles to its own straight loop.
typedef __m256 (*load8_fn)(const void *row, int64_t i);
typedef float (*load1_fn)(const void *row, int64_t i);

static inline __m256 load8_f32(const void *row, int64_t i) { return _mm256_loadu_ps((const float *)row + i); }
static inline __m256 load8_f16(const void *row, int64_t i) { return load_f16x8((const uint16_t *)row + i); }
static inline __m256 load8_bf16(const void *row, int64_t i) { return load_bf16x8((const uint16_t *)row + i); }
static inline float load1_f32(const void *row, int64_t i) { return ((const float *)row)[i]; }
static inline float load1_f16(const void *row, int64_t i) { return _cvtsh_ss(((const uint16_t *)row)[i]); }
static inline float load1_bf16(const void *row, int64_t i) { return strata_bf16_to_fp32(((const uint16_t *)row)[i]); }

static inline __attribute__((always_inline)) float dot_floats(int64_t n, const void *x, const void *y,
                                                              int64_t elem_bytes, load8_fn load, load1_fn load1)
{
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        strata_prefetch_stream((const char *)x + i * elem_bytes, 32 * (int)elem_bytes);
        acc0 = _mm256_fmadd_ps(load(x, i), load(y, i), acc0);
        acc1 = _mm256_fmadd_ps(load(x, i + 8), load(y, i + 8), acc1);
        acc2 = _mm256_fmadd_ps(load(x, i + 16), load(y, i + 16), acc2);
        acc3 = _mm256_fmadd_ps(load(x, i + 24), load(y, i + 24), acc3);
    }
    for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(load(x, i), load(y, i), acc0);
    float sum = strata_hsum256_ps(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < n; i++) sum += load1(x, i) * load1(y, i);
    return sum;
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_floats(n, w, a, 4, load8_f32, load1_f32);
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_floats(n, w, a, 2, load8_f16, load1_f16);
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *a)
{
    *s = dot_floats(n, w, a, 2, load8_bf16, load1_bf16);
}

// One Q8_0 weight block times an activation block: the 32 int8 products summed exactly in 8
// int32 lanes, then scaled into `acc`. maddubs needs an unsigned operand: |w| times a with w's
// sign, exact unless a = -128, which no quantizer of ours writes.
static inline __m256 q8_0_block(__m256i w, __m256i w_abs, float w_d, const struct block_q8_0 *y, __m256 acc)
{
    __m256i a = _mm256_loadu_si256((const __m256i *)y->qs);
    __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(a, w));
    __m256i isum = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
    __m256 d = _mm256_set1_ps(w_d * _cvtsh_ss(y->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

// Sub-block quants (unsigned, < 64) times activations, times the int16 scale in every lane of
// `scale`, as 8 int32 lanes.
static inline __m256i scaled_sub_block(__m256i quants, const int8_t *act, __m256i scale)
{
    __m256i pairs = _mm256_maddubs_epi16(quants, _mm256_loadu_si256((const __m256i *)act));
    return _mm256_madd_epi16(pairs, scale);
}

// The Q4_K / Q5_K block loop: d * sum(sc * q * a) - dmin * sum(m * bsums), per block, for nt
// activation rows. 32 bytes of qs (chunk j) hold sub-block 2j in their low nibbles and 2j + 1 in
// their high nibbles; `five` adds the fifth bits from qh. Each chunk's quants and scales are
// unpacked once and applied to every row; each row's integer sums are exact and its float
// operations do not depend on nt.
static inline __attribute__((always_inline)) void dot_k4_k5(int64_t n, float *s, const uint8_t *w, size_t block_bytes,
                                                            const void *const *act, int nt, bool five)
{
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    const __m128i dup_mins = _mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    __m256 acc[STRATA_DOT_TOKENS], acc_min[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = acc_min[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++, w += block_bytes) {
        strata_prefetch_stream(w, (int)block_bytes);
        // Q4_K and Q5_K share d, dmin and scales; qh and qs follow (blocks.h)
        const struct block_q4_k *head = (const struct block_q4_k *)w;
        const uint8_t *qs = five ? ((const struct block_q5_k *)w)->qs : head->qs;
        __m256i qh = five ? _mm256_loadu_si256((const __m256i *)((const struct block_q5_k *)w)->qh) : _mm256_setzero_si256();
        __m128i sm = strata_k_scales_sse(head->scales);
        __m256i mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(sm, dup_mins));
        __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));  // int16, both halves
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
        __m128 d_dmin_w = strata_two_halves(&head->d);
        for (int t = 0; t < nt; t++) {
            __m256i mins_dot = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[t]->bsums), mins16);
            __m128 d_dmin = _mm_mul_ps(d_dmin_w, _mm_set1_ps(y[t]->d));
            acc[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(d_dmin), _mm256_cvtepi32_ps(isum[t]), acc[t]);
            acc_min[t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(d_dmin)), _mm256_cvtepi32_ps(mins_dot), acc_min[t]);
        }
    }
    for (int t = 0; t < nt; t++) s[t] = strata_hsum256_ps(_mm256_sub_ps(acc[t], acc_min[t]));
}

// The int16 scales of Q6_K sub-blocks `first` and first + 1 (16 elements each), one per half of
// the register.
static inline __m256i q6_scale_pair(__m128i sc8, int first)
{
    __m128i ctrl = _mm_set_epi64x((long long)(0x0101010101010101ull * (uint64_t)(first + 1)),
                                  (long long)(0x0101010101010101ull * (uint64_t)first));
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, ctrl));
}

// The quants are stored with +32: dot(q - 32, a) = dot(q, a) - 32 * sum(a), and the sums of a
// per 16 elements are the activation's bsums. Per half of a block (128 elements: ql[64], qh[32],
// layout in blocks.h) four registers of 32 quants in element order, unpacked once for the nt
// activation rows.
static inline __attribute__((always_inline)) void dot_q6_k(int64_t n, float *s, const void *w, const void *const *act,
                                                           int nt)
{
    const struct block_q6_k *x = w;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    __m256 acc[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        strata_prefetch_stream(x + b, sizeof(struct block_q6_k));
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
        float d_w = _cvtsh_ss(x[b].d);
        for (int t = 0; t < nt; t++) {
            __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8), _mm256_loadu_si256((const __m256i *)y[t]->bsums));
            __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(offset, 5));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d_w * y[t]->d), _mm256_cvtepi32_ps(total), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) s[t] = strata_hsum256_ps(acc[t]);
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

// 4 rows: their accumulators take half of the 16 ymm
STRATA_DOT_KERNELS(q8_0, dot_q8_0_n, 4)
STRATA_DOT_KERNELS(q4_k, dot_q4_k_n, 4)
STRATA_DOT_KERNELS(q5_k, dot_q5_k_n, 4)
STRATA_DOT_KERNELS(q6_k, dot_q6_k, 4)

// Float dots have no multi-token variant here: 4 rows x 4 accumulators would not fit in 16 ymm.
#define VEC_DOT_MULTI_F32 NULL
#define VEC_DOT_MULTI_F16 NULL
#define VEC_DOT_MULTI_BF16 NULL
STRATA_SIMD_KERNEL_TABLE(strata_kernels_avx2_table, STRATA_ISA_AVX2)
