// AVX2 + FMA + F16C kernels: activation rounding (bit-identical to ref.c) and the dot products of
// every computable weight type, plus F16/BF16 dequantisation. Layouts in blocks.h.
//
// Quantized dot products compute each block's integer sums exactly in int32 lanes (maddubs of
// unsigned weight quants by signed activation quants, then madd by the sub-block scale) and
// only then scale by the block's float factors, so they differ from the reference only by the
// order of float accumulation (8 lanes, summed at the end).
#include <immintrin.h>
#include <string.h>

#include "quant/blocks.h"
#include "quant/fp16.h"

// ---- helpers --------------------------------------------------------------------------------

static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

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

// Unpacked Q4_K/Q5_K sub-block scales (as int16, both halves) and the dot of the mins with the
// activation's bsums (8 int32 lanes, two bsums per min).
static inline __m256i k_scales_and_mins(const uint8_t *packed, const int16_t *bsums, __m256i *mins_dot)
{
    uint64_t scales, mins;
    strata_k_scales(packed, &scales, &mins);
    const __m128i dup = _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    __m256i mins16 = _mm256_cvtepu8_epi16(_mm_shuffle_epi8(_mm_cvtsi64_si128((long long)mins), dup));
    *mins_dot = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), mins16);
    __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128((long long)scales));
    return _mm256_broadcastsi128_si256(sc16);
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
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += blk[b].qs[16 * g + i];
            blk[b].bsums[g] = (int16_t)sum;
        }
        blk[b].d = 1.0f / iscale;
    }
}

// ---- dot products ---------------------------------------------------------------------------

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * k), _mm256_loadu_ps(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8)
        acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += x[i] * y[i];
    *s = sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_f16x8(x + i + 8 * k), load_f16x8(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_f16x8(x + i), load_f16x8(y + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += _cvtsh_ss(x[i]) * _cvtsh_ss(y[i]);
    *s = sum;
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_bf16x8(x + i + 8 * k), load_bf16x8(y + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_bf16x8(x + i), load_bf16x8(y + i), acc[0]);
    float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) sum += strata_bf16_to_fp32(x[i]) * strata_bf16_to_fp32(y[i]);
    *s = sum;
}

// Sum of w[i] * a[i] over 32 int8 pairs, in 8 int32 lanes. maddubs needs an unsigned operand:
// |w| times a with w's sign, exact unless a = -128, which no quantizer of ours writes.
static inline __m256i dot_i8x32(__m256i w, __m256i a)
{
    __m256i pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w, *y = a;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t nb = n / QK8_0, b = 0;
    for (; b + 2 <= nb; b += 2) {
        for (int k = 0; k < 2; k++) {
            __m256i isum = dot_i8x32(_mm256_loadu_si256((const __m256i *)x[b + k].qs),
                                     _mm256_loadu_si256((const __m256i *)y[b + k].qs));
            __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b + k].d) * _cvtsh_ss(y[b + k].d));
            acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[k]);
        }
    }
    for (; b < nb; b++) {
        __m256i isum = dot_i8x32(_mm256_loadu_si256((const __m256i *)x[b].qs),
                                 _mm256_loadu_si256((const __m256i *)y[b].qs));
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d));
        acc[0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc[0]);
    }
    *s = hsum_ps(_mm256_add_ps(acc[0], acc[1]));
}

// One 32-element sub-block: unsigned quants (< 64) times activations, times the scale in int16
// lane k of `scales`, as 8 int32 lanes.
static inline __m256i scaled_sub_block(__m256i quants, const int8_t *act, __m256i scales, int k)
{
    __m256i pairs = _mm256_maddubs_epi16(quants, _mm256_loadu_si256((const __m256i *)act));
    return _mm256_madd_epi16(pairs, _mm256_shuffle_epi8(scales, scale_shuffle(k)));
}

static void vec_dot_q4_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_k *x = w;
    const struct block_q8_k *y = a;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m256i mins_dot;
        __m256i scales = k_scales_and_mins(x[b].scales, y[b].bsums, &mins_dot);
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            isum[0] = _mm256_add_epi32(isum[0], scaled_sub_block(lo, y[b].qs + 64 * j, scales, 2 * j));
            isum[1] = _mm256_add_epi32(isum[1], scaled_sub_block(hi, y[b].qs + 64 * j + 32, scales, 2 * j + 1));
        }
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d) * y[b].d);
        __m256 dmin = _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * y[b].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(isum[0], isum[1])), acc);
        acc_min = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(mins_dot), acc_min);
    }
    *s = hsum_ps(_mm256_sub_ps(acc, acc_min));
}

// Bit `bit` of every byte of qh, moved to bit 4 (the Q5_K high bit of sub-block `bit`).
static inline __m256i q5_high_bit(__m256i qh, int bit)
{
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    if (bit <= 4) return _mm256_and_si256(_mm256_slli_epi16(qh, 4 - bit), bit4);
    return _mm256_and_si256(_mm256_srli_epi16(qh, bit - 4), bit4);
}

static void vec_dot_q5_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_k *x = w;
    const struct block_q8_k *y = a;
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m256i mins_dot;
        __m256i scales = k_scales_and_mins(x[b].scales, y[b].bsums, &mins_dot);
        __m256i qh = _mm256_loadu_si256((const __m256i *)x[b].qh);
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int j = 0; j < 4; j++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low4), q5_high_bit(qh, 2 * j));
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low4), q5_high_bit(qh, 2 * j + 1));
            isum[0] = _mm256_add_epi32(isum[0], scaled_sub_block(lo, y[b].qs + 64 * j, scales, 2 * j));
            isum[1] = _mm256_add_epi32(isum[1], scaled_sub_block(hi, y[b].qs + 64 * j + 32, scales, 2 * j + 1));
        }
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d) * y[b].d);
        __m256 dmin = _mm256_set1_ps(_cvtsh_ss(x[b].dmin) * y[b].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(isum[0], isum[1])), acc);
        acc_min = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(mins_dot), acc_min);
    }
    *s = hsum_ps(_mm256_sub_ps(acc, acc_min));
}

// 32 elements of Q6_K (two sub-blocks of 16) times activations, each half of the register times
// its own sub-block scale (int8 scales sc[first], sc[first + 1]), as 8 int32 lanes.
static inline __m256i q6_chunk(__m256i quants, const int8_t *act, __m128i sc8, int first)
{
    __m128i ctrl = _mm_set_epi64x((long long)(0x0101010101010101ull * (uint64_t)(first + 1)),
                                  (long long)(0x0101010101010101ull * (uint64_t)first));
    __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, ctrl));
    __m256i pairs = _mm256_maddubs_epi16(quants, _mm256_loadu_si256((const __m256i *)act));
    return _mm256_madd_epi16(pairs, scale);
}

// The quants are stored with +32: dot(q - 32, a) = dot(q, a) - 32 * sum(a), and the sums of a
// per 16 elements are the activation's bsums.
static void vec_dot_q6_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q6_k *x = w;
    const struct block_q8_k *y = a;
    const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / QK_K; b++) {
        __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        __m256i offset = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8),
                                           _mm256_loadu_si256((const __m256i *)y[b].bsums));
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int half = 0; half < 2; half++) {
            const uint8_t *ql = x[b].ql + 64 * half;
            const int8_t *act = y[b].qs + 128 * half;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * half));
            __m256i q0 = _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45));
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(h, bits45));
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                         _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45));
            int first = 8 * half;
            isum[0] = _mm256_add_epi32(isum[0], q6_chunk(q0, act, sc8, first));
            isum[1] = _mm256_add_epi32(isum[1], q6_chunk(q1, act + 32, sc8, first + 2));
            isum[0] = _mm256_add_epi32(isum[0], q6_chunk(q2, act + 64, sc8, first + 4));
            isum[1] = _mm256_add_epi32(isum[1], q6_chunk(q3, act + 96, sc8, first + 6));
        }
        __m256i total = _mm256_sub_epi32(_mm256_add_epi32(isum[0], isum[1]), _mm256_slli_epi32(offset, 5));
        __m256 d = _mm256_set1_ps(_cvtsh_ss(x[b].d) * y[b].d);
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(total), acc);
    }
    *s = hsum_ps(acc);
}

const struct strata_kernels strata_kernels_avx2_table = {
    .isa = STRATA_ISA_AVX2,
    .dequant = {
        [STRATA_TYPE_F16] = dequant_f16,
        [STRATA_TYPE_BF16] = dequant_bf16,
    },
    .quantize = {
        [STRATA_TYPE_F16] = quantize_f16,
        [STRATA_TYPE_BF16] = quantize_bf16,
        [STRATA_TYPE_Q8_0] = quantize_q8_0,
        [STRATA_TYPE_Q8_K] = quantize_q8_k,
    },
    .vec_dot = {
        [STRATA_TYPE_F32] = vec_dot_f32,
        [STRATA_TYPE_F16] = vec_dot_f16,
        [STRATA_TYPE_BF16] = vec_dot_bf16,
        [STRATA_TYPE_Q8_0] = vec_dot_q8_0,
        [STRATA_TYPE_Q4_K] = vec_dot_q4_k,
        [STRATA_TYPE_Q5_K] = vec_dot_q5_k,
        [STRATA_TYPE_Q6_K] = vec_dot_q6_k,
    },
};
