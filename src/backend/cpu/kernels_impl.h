// Private to the CPU kernels (dot_ref.c, kernels_*.c, lowbit_*.c, dispatch.c): weight prefetch,
// the SIMD helpers the variants share, the macros that build each file's table, and the partial
// per-ISA tables dispatch.c completes.
#ifndef STRATA_BACKEND_CPU_KERNELS_IMPL_H
#define STRATA_BACKEND_CPU_KERNELS_IMPL_H

#include <stdint.h>

#include "backend/cpu/kernels.h"
#include "quant/blocks.h"
#include "quant/lowbit.h"

// Weight rows stream from memory once per token: a dot product that computes for ~20 cycles per
// block leaves too few cache misses in flight for the hardware prefetchers alone, and reaches
// under half the single-thread read bandwidth. Each SIMD kernel therefore prefetches the weight
// bytes this far ahead of the block it reads (measured on Sapphire Rapids: 1 KiB gives 70%, 2 KiB
// and more the full read bandwidth). Past the end of a row it prefetches the next row, which is
// where the next dot product of a matmul usually reads; prefetches never fault.
#ifndef STRATA_PREFETCH_AHEAD
#define STRATA_PREFETCH_AHEAD 2048
#endif

// Prefetch the `bytes` bytes at p, one request per 64 bytes (every line of a block when called for
// each block of a contiguous run); once inlined with a constant size there is no loop or branch.
static inline void strata_prefetch_bytes(const void *p, int bytes)
{
    for (int off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)p + off, 0, 3);
}

// Prefetch AHEAD bytes past the `bytes` bytes at p: called for each block of a contiguous row,
// successive requests are at most 64 bytes apart, so every line is requested.
static inline void strata_prefetch_ahead(const void *p, int bytes)
{
    strata_prefetch_bytes((const char *)p + STRATA_PREFETCH_AHEAD, bytes);
}

// The one-token dots (decode, the head) stream their weights once and do little with each byte,
// so a core that waits for a line does nothing else: with 2 KiB ahead into L1 the Q4_K dot read
// 17-21 GB/s from memory on one core of the development machine, against 23 from L2. Their
// weights are asked for into L2 (prefetcht2: no L1 fill buffer held to the end) and 8 KiB ahead:
// 21-23 GB/s, the rate of the L2-resident rows (test_quant --bench).
#define STRATA_PREFETCH_STREAM 8192
static inline void strata_prefetch_l2(const void *p, int bytes)
{
    for (int off = 0; off < bytes; off += 64) __builtin_prefetch((const char *)p + off, 0, 1);
}

static inline void strata_prefetch_stream(const void *p, int bytes)
{
    strata_prefetch_l2((const char *)p + STRATA_PREFETCH_STREAM, bytes);
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

static inline int32_t strata_hsum256_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
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

#ifdef __AVX512F__
// ---- the canonical float part (gemm.h) of the AVX-512 dots --------------------------------------
// A block's int32 lanes are reduced to one exact integer and accumulated with one fmaf per block;
// for several activation rows the lanes of every (row, sum) are reduced together (a transposed
// tree), and the rows' fmaf run in the lanes of one register, each the same operation as alone.

static inline int32_t strata_hsum512_epi32(__m512i v)
{
    return strata_hsum256_epi32(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

// r[i] = the sum of the 16 int32 lanes of v[i], for 16 registers (a transpose-and-add tree).
static inline __attribute__((always_inline)) __m512i strata_reduce16_epi32(const __m512i *v)
{
    __m512i a[8], b[4], c[2];
    _Pragma("GCC unroll 8")
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
    _Pragma("GCC unroll 4")
    for (int i = 0; i < 4; i++)
        b[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_epi64(a[2 * i], a[2 * i + 1]));
    _Pragma("GCC unroll 2")
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_add_epi32(_mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_epi32(_mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                            _mm512_shuffle_i32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The addresses of the nt activation rows (lanes past nt: 0, never loaded).
static inline __attribute__((always_inline)) __m512i strata_row_addresses(const void *const *act, int nt)
{
    return _mm512_maskz_loadu_epi64((__mmask8)((1u << nt) - 1), act);
}

// The float factor d of block b of each Q8_K row at `rows` (lanes past nt zero).
static inline __attribute__((always_inline)) __m256 strata_q8k_factors(__m512i rows, int64_t b, int nt)
{
    const __m512i at = _mm512_add_epi64(rows, _mm512_set1_epi64(b * (int64_t)sizeof(struct block_q8_k)));
    return _mm512_mask_i64gather_ps(_mm256_setzero_ps(), (__mmask8)((1u << nt) - 1), at, NULL, 1);
}

// The results of a dot: acc1 for one row, lane t of accv for row t of several.
static inline __attribute__((always_inline)) void strata_store_results(float *s, float acc1, __m256 accv, int nt)
{
    if (nt == 1) {
        s[0] = acc1;
        return;
    }
    float out[8];
    _mm256_storeu_ps(out, accv);
    for (int t = 0; t < nt; t++) s[t] = out[t];
}

// ---- Q4_K / Q5_K quants (the dots, the GEMM's unpacking) ----------------------------------------

// 32 bytes broadcast to both halves of a zmm, each half shifted right by its own count of bits
// per 64-bit lane (which is per byte, for counts < 8, once the caller masks the bits it wants).
static inline __m512i broadcast_shift(const uint8_t *p, int lower_shift, int upper_shift)
{
    __m512i b = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    __m512i shifts = _mm512_inserti64x4(_mm512_set1_epi64(lower_shift), _mm256_set1_epi64x(upper_shift), 1);
    return _mm512_srlv_epi64(b, shifts);
}

// The 64 quants of chunk j (0..3) of a Q4_K/Q5_K block in element order: qs[32j..32j+31] low
// nibbles (sub-block 2j), then their high nibbles (2j + 1), plus 16 where `qh` has bit 2j / 2j + 1
// (Q5_K; NULL for Q4_K).
static inline __m512i k_chunk_quants(const uint8_t *qs32, const __m512i *qh, __m512i qh_select)
{
    __m512i q = _mm512_and_si512(broadcast_shift(qs32, 0, 4), _mm512_set1_epi8(0x0f));
    if (qh) q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(*qh, qh_select), q, _mm512_set1_epi8(16));
    return q;
}

// Bit masks selecting, per byte, qh bit 2j (low half of the zmm) and 2j + 1 (high half).
static inline __m512i q5_select(int j)
{
    return _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * j))), _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
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

// Partial kernel tables of the low-bit types per SIMD ISA (the scalar ones are in
// strata_kernels_scalar_table); dispatch.c fills the empty entries of the main tables from them
// (then completes each ISA from the one below).
extern const struct strata_kernels strata_lowbit_avx2_table;
extern const struct strata_kernels strata_lowbit_avx512_table;

#endif
