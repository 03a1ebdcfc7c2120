// The byte layout of the block formats strata computes with (besides the low-bit ones in
// lowbit.h) and the small decoding helpers the reference code and every backend's kernels share.
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

// The 6-bit quant of element i (0..255) of a Q6_K block, before the -32 offset.
static inline int strata_q6_k_quant(const struct block_q6_k *blk, int i)
{
    int half = i / 128, l = i % 32, quarter = (i % 128) / 32;
    const uint8_t *ql = blk->ql + 64 * half, *qh = blk->qh + 32 * half;
    int lo = (ql[l + 32 * (quarter & 1)] >> (4 * (quarter >> 1))) & 0xf;
    int hi = (qh[l] >> (2 * quarter)) & 3;
    return lo | hi << 4;
}

#endif
