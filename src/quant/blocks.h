// Private to src/quant: the byte layout of the block formats strata computes with, the helpers
// every kernel variant shares, and the per-ISA kernel tables that dispatch.c completes.
//
// Layouts are ggml's (GGUF stores them verbatim). Halves are IEEE binary16 bit patterns. Weight
// blocks need 2-byte alignment (GGUF rows of 34- or 210-byte blocks start at even offsets);
// Q8_K activation blocks need 4-byte alignment.
#ifndef STRATA_QUANT_BLOCKS_H
#define STRATA_QUANT_BLOCKS_H

#include <stdint.h>

#include "quant/quant.h"

#define QK8_0 32   // elements per Q8_0 block
#define QK_K 256   // elements per K-quant super-block

// 32 elements: x[i] = d * qs[i].
struct block_q8_0 {
    uint16_t d;          // f16 scale
    int8_t qs[QK8_0];
};

// 256 elements in 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], q in 0..15.
// Sub-block 2k holds the low nibbles of qs[32k..32k+31], sub-block 2k+1 their high nibbles.
struct block_q4_k {
    uint16_t d;          // f16 scale of the 6-bit sub-block scales
    uint16_t dmin;       // f16 scale of the 6-bit sub-block mins
    uint8_t scales[12];  // 8 scales + 8 mins, 6 bits each (see strata_k_scales)
    uint8_t qs[QK_K / 2];
};

// As Q4_K with a fifth bit: q in 0..31; bit (sub-block index) of qh[i % 32] is q's bit 4.
struct block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};

// 256 elements in 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q in 0..63.
// Per half of 128 elements (ql += 64, qh += 32): element l (0..31) takes ql[l] low nibble and
// qh[l] bits 0-1; l + 32: ql[l + 32] low, qh[l] bits 2-3; l + 64: ql[l] high, qh[l] bits 4-5;
// l + 96: ql[l + 32] high, qh[l] bits 6-7.
struct block_q6_k {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
};

// Activation format of the K-quants: x[i] = d * qs[i]; bsums[j] = sum of qs[16j..16j+15].
struct block_q8_k {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};

_Static_assert(sizeof(struct block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(struct block_q4_k) == 144, "Q4_K block is 144 bytes");
_Static_assert(sizeof(struct block_q5_k) == 176, "Q5_K block is 176 bytes");
_Static_assert(sizeof(struct block_q6_k) == 210, "Q6_K block is 210 bytes");
_Static_assert(sizeof(struct block_q8_k) == 292, "Q8_K block is 292 bytes");

// Unpack the 12 scale bytes of Q4_K/Q5_K into 8 scales and 8 mins (one byte each, 0..63).
// Bytes 0-3 hold scales 0-3 in their low 6 bits and bits 4-5 of scales 4-7 in their top 2;
// bytes 4-7 likewise for mins; bytes 8-11 hold the low nibbles of scales 4-7 (low) and mins 4-7
// (high). Returned as little-endian uint64 so SIMD code can move them in one register.
static inline void strata_k_scales(const uint8_t *packed, uint64_t *scales, uint64_t *mins)
{
    uint32_t w0, w1, w2;
    __builtin_memcpy(&w0, packed, 4);
    __builtin_memcpy(&w1, packed + 4, 4);
    __builtin_memcpy(&w2, packed + 8, 4);
    uint32_t sc_lo = w0 & 0x3f3f3f3fu;
    uint32_t mn_lo = w1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | (((w0 >> 6) & 0x03030303u) << 4);
    uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0fu) | (((w1 >> 6) & 0x03030303u) << 4);
    *scales = (uint64_t)sc_hi << 32 | sc_lo;
    *mins = (uint64_t)mn_hi << 32 | mn_lo;
}

// The x86 build of ggml rounds with round-to-nearest-even (ggml's nearest_int adds 1.5 * 2^23;
// its SIMD paths use vroundps): this is that rounding for |v| < 2^22, done in two statements so
// no compiler fuses the caller's multiply into the add. Out-of-range values (inf, NaN) give
// what nearest_int gives: the low 23 bits of the sum minus 2^22.
static inline int32_t strata_nearest_int(float v)
{
    float biased = v + 12582912.0f;
    uint32_t bits;
    __builtin_memcpy(&bits, &biased, 4);
    return (int32_t)(bits & 0x007fffffu) - 0x00400000;
}

// Weight rows stream from memory once per token: a dot product that computes for ~20 cycles per
// block leaves too few cache misses in flight for the hardware prefetchers alone, and reaches
// under half the single-thread read bandwidth. Each SIMD kernel therefore prefetches the weight
// bytes this far ahead of the block it reads (measured on Sapphire Rapids: 1 KiB gives 70%, 2 KiB
// and more the full read bandwidth). Past the end of a row it prefetches the next row, which is
// where the next dot product of a matmul usually reads; prefetches never fault.
#ifndef STRATA_PREFETCH_AHEAD
#define STRATA_PREFETCH_AHEAD 2048
#endif

// Prefetch AHEAD bytes past the `bytes` bytes at p, one request per 64 bytes: called for each
// block of a contiguous row, successive requests are at most 64 bytes apart, so every line is
// requested; once inlined with a constant size there is no loop or branch.
static inline void strata_prefetch_ahead(const void *p, int bytes)
{
    const char *c = (const char *)p + STRATA_PREFETCH_AHEAD;
    for (int off = 0; off < bytes; off += 64) __builtin_prefetch(c + off, 0, 3);
}

#ifdef __AVX2__
#include <immintrin.h>

// strata_k_scales in one register: bytes 0..7 the scales, 8..15 the mins. Reads 16 bytes from
// `packed` (the 12 scale bytes and 4 bytes of what follows them in the block).
static inline __m128i strata_k_scales_sse(const uint8_t *packed)
{
    __m128i v = _mm_loadu_si128((const __m128i *)packed);  // dwords w0 w1 w2 (w3 unused)
    // low bits: w0 & 0x3f.., w2 & 0x0f.., w1 & 0x3f.., (w2 >> 4) & 0x0f..
    __m128i low = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    low = _mm_and_si128(low, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    // bits 4-5 of scales/mins 4..7: the top two bits of the bytes of w0 / w1
    __m128i high = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    high = _mm_and_si128(high, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(low, high);
}

static inline float strata_hsum256_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// The Q8_0 x Q8_0 loop of the SIMD files for nt (1..STRATA_DOT_TOKENS) activation rows: each
// weight block is loaded once (quants and their magnitudes, maddubs/vpdpbusd want an unsigned
// operand) and `block` adds one row's scaled block sum into that row's 8 float lanes. Two
// accumulators per row, weights prefetched. Every row goes through the same float operations
// whatever nt is, so vec_dot (nt = 1) and vec_dot_x4 agree bit for bit.
typedef __m256 (*strata_q8_0_step)(__m256i w, __m256i w_abs, float w_d, const struct block_q8_0 *a, __m256 acc);

static inline __attribute__((always_inline)) void strata_dot_q8_0(int64_t n, float *s, const void *w,
                                                                  const void *const *a, int nt, strata_q8_0_step block)
{
    const struct block_q8_0 *x = w;
    __m256 acc0[STRATA_DOT_TOKENS], acc1[STRATA_DOT_TOKENS];
    for (int t = 0; t < nt; t++) acc0[t] = acc1[t] = _mm256_setzero_ps();
    int64_t nb = n / QK8_0, b = 0;
    for (; b + 2 <= nb; b += 2) {
        strata_prefetch_ahead(x + b, 2 * sizeof(struct block_q8_0));
        __m256i w0 = _mm256_loadu_si256((const __m256i *)x[b].qs), w1 = _mm256_loadu_si256((const __m256i *)x[b + 1].qs);
        __m256i abs0 = _mm256_abs_epi8(w0), abs1 = _mm256_abs_epi8(w1);
        float d0 = _cvtsh_ss(x[b].d), d1 = _cvtsh_ss(x[b + 1].d);
        for (int t = 0; t < nt; t++) {
            const struct block_q8_0 *y = (const struct block_q8_0 *)a[t] + b;
            acc0[t] = block(w0, abs0, d0, y, acc0[t]);
            acc1[t] = block(w1, abs1, d1, y + 1, acc1[t]);
        }
    }
    if (b < nb) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)x[b].qs);
        for (int t = 0; t < nt; t++)
            acc0[t] = block(w0, _mm256_abs_epi8(w0), _cvtsh_ss(x[b].d), (const struct block_q8_0 *)a[t] + b, acc0[t]);
    }
    for (int t = 0; t < nt; t++) s[t] = strata_hsum256_ps(_mm256_add_ps(acc0[t], acc1[t]));
}

// The two f16 at p (d and dmin of Q4_K/Q5_K) as floats in lanes 0 and 1; the kernels multiply
// them by each activation block's scale.
static inline __m128 strata_two_halves(const void *p)
{
    int32_t pair;
    __builtin_memcpy(&pair, p, 4);
    return _mm_cvtph_ps(_mm_cvtsi32_si128(pair));
}
#endif

// vec_dot_NAME and vec_dot_multi_NAME from one always-inline `dot_n(n, s, w, a, nt)` that handles
// nt activation rows a[0..nt) (weights decoded once per block, each row with its own accumulators
// and the same float operations whatever nt is). Each row count is its own instance with a
// constant nt, so the single-token dot is the loop it always was and the multi-token results
// are bit-identical to it. max_nt (<= STRATA_DOT_TOKENS) is what the kernel's accumulators leave
// room for in registers; more rows are done max_nt at a time.
#define STRATA_DOT_KERNELS(name, dot_n, max_nt)                                                      \
    static void vec_dot_##name(int64_t n, float *s, const void *w, const void *a)                    \
    {                                                                                                \
        dot_n(n, s, w, &a, 1);                                                                       \
    }                                                                                                \
    static void vec_dot_multi_##name(int64_t n, float *s, const void *w, const void *const *a, int n_act) \
    {                                                                                                \
        _Static_assert((max_nt) >= 1 && (max_nt) <= STRATA_DOT_TOKENS, "row count");                \
        for (; n_act > 0; n_act -= (max_nt), s += (max_nt), a += (max_nt)) {                         \
            switch (n_act < (max_nt) ? n_act : (max_nt)) {                                           \
            case 1: dot_n(n, s, w, a, 1); break;                                                     \
            case 2: dot_n(n, s, w, a, 2); break;                                                     \
            case 3: dot_n(n, s, w, a, 3); break;                                                     \
            case 4: dot_n(n, s, w, a, 4); break;                                                     \
            case 5: dot_n(n, s, w, a, 5); break;                                                     \
            case 6: dot_n(n, s, w, a, 6); break;                                                     \
            case 7: dot_n(n, s, w, a, 7); break;                                                     \
            default: dot_n(n, s, w, a, (max_nt)); break;                                             \
            }                                                                                        \
        }                                                                                            \
    }

// The table of a SIMD file: every file defines static kernels of these names, and the names (or
// NULL) of its multi-token float dots as VEC_DOT_MULTI_F32/F16/BF16.
#define STRATA_SIMD_KERNEL_TABLE(table_name, table_isa)               \
    const struct strata_kernels table_name = {                        \
        .isa = table_isa,                                             \
        .dequant = {                                                  \
            [STRATA_TYPE_F16] = dequant_f16,                          \
            [STRATA_TYPE_BF16] = dequant_bf16,                        \
        },                                                            \
        .quantize = {                                                 \
            [STRATA_TYPE_F16] = quantize_f16,                         \
            [STRATA_TYPE_BF16] = quantize_bf16,                       \
            [STRATA_TYPE_Q8_0] = quantize_q8_0,                       \
            [STRATA_TYPE_Q8_K] = quantize_q8_k,                       \
        },                                                            \
        .vec_dot = {                                                  \
            [STRATA_TYPE_F32] = vec_dot_f32,                          \
            [STRATA_TYPE_F16] = vec_dot_f16,                          \
            [STRATA_TYPE_BF16] = vec_dot_bf16,                        \
            [STRATA_TYPE_Q8_0] = vec_dot_q8_0,                        \
            [STRATA_TYPE_Q4_K] = vec_dot_q4_k,                        \
            [STRATA_TYPE_Q5_K] = vec_dot_q5_k,                        \
            [STRATA_TYPE_Q6_K] = vec_dot_q6_k,                        \
        },                                                            \
        .vec_dot_multi = {                                            \
            [STRATA_TYPE_F32] = VEC_DOT_MULTI_F32,                    \
            [STRATA_TYPE_F16] = VEC_DOT_MULTI_F16,                    \
            [STRATA_TYPE_BF16] = VEC_DOT_MULTI_BF16,                  \
            [STRATA_TYPE_Q8_0] = vec_dot_multi_q8_0,                  \
            [STRATA_TYPE_Q4_K] = vec_dot_multi_q4_k,                  \
            [STRATA_TYPE_Q5_K] = vec_dot_multi_q5_k,                  \
            [STRATA_TYPE_Q6_K] = vec_dot_multi_q6_k,                  \
        },                                                            \
    };

// Partial kernel tables of each ISA (NULL where the variant has none); dispatch.c completes them
// from the lower ISA. Each is defined in the file of its ISA.
extern const struct strata_kernels strata_kernels_scalar_table;
extern const struct strata_kernels strata_kernels_avx2_table;
extern const struct strata_kernels strata_kernels_avx512_table;

#endif
