// Byte layouts of the low-bit GGUF block formats (the legacy 32-element Q4_0/Q4_1/Q5_0/Q5_1, the
// K-quants Q2_K/Q3_K, the IQ formats, MXFP4) and the Q8_1 activation block, the small decoding
// helpers their kernels share, and the reference decoder (ref_lowbit.c). For src/quant and the
// backends' kernels.
//
// Layouts are ggml's (GGUF stores them verbatim); halves are IEEE binary16 bit patterns. In the
// IQ formats each group of 8 elements is one codebook entry (iq_grids.h) plus 8 sign bits; where
// only 7 sign bits are stored, the 8th makes the number of minus signs even.
#ifndef STRATA_QUANT_LOWBIT_H
#define STRATA_QUANT_LOWBIT_H

#include <stdint.h>

#include "quant/blocks.h"

// 32 elements: x = d * (q - 8), q in 0..15; element j < 16 is the low nibble of qs[j], j >= 16
// the high nibble of qs[j - 16] (the same split for every 32-element nibble format below).
struct block_q4_0 {
    uint16_t d;
    uint8_t qs[16];
};

// x = d * q + m, q in 0..15.
struct block_q4_1 {
    uint16_t d, m;
    uint8_t qs[16];
};

// x = d * (q - 16), q in 0..31; bit j of the little-endian qh word is bit 4 of element j.
struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};

// x = d * q + m, q in 0..31.
struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
};

// Activation format of Q4_1/Q5_1: x = d * qs[i]; s = d * sum(qs) (f16, from the unrounded d).
struct block_q8_1 {
    uint16_t d, s;
    int8_t qs[32];
};

// 32 elements: x = 2^(e - 128) * kvalues_mxfp4[q] (the table holds twice the E2M1 values).
struct block_mxfp4 {
    uint8_t e;
    uint8_t qs[16];
};

// 32 elements: x = d * kvalues_iq4nl[q].
struct block_iq4_nl {
    uint16_t d;
    uint8_t qs[16];
};

// 256 elements in 16 sub-blocks of 16: x = d * (sc & 15) * q - dmin * (sc >> 4), q in 0..3.
// Per half of 128 elements (qs += 32): element 32 * j + l (j 0..3, l 0..31) is bits 2j..2j+1 of
// qs[l].
struct block_q2_k {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
};

// 256 elements in 16 sub-blocks of 16: x = d * (sc - 32) * (q - 4 * !hbit), q in 0..3 laid out
// as in Q2_K; hbit of element 128 h + 32 j + l is bit 4 h + j of hmask[l]; the 6-bit scales:
// low nibbles in bytes 0..7 (sub-blocks 0..7 low, 8..15 high nibble), top 2 bits in bytes 8..11.
struct block_q3_k {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
};

// 8 groups of 32: qs[4g..4g+1] (as bytes) 4 grid indices, qs[4g+2..4g+3] (as a uint32) 4 x 7
// sign bits and a 4-bit scale s in the top bits: x = d * (2s + 1) / 8 * grid * sign.
struct block_iq2_xxs {
    uint16_t d;
    uint16_t qs[32];
};

// qs[i]: 9-bit grid index, 7 sign bits; scales[g]: 4-bit scale of each half of group g.
struct block_iq2_xs {
    uint16_t d;
    uint16_t qs[32];
    uint8_t scales[8];
};

// qs[0..31]: low 8 bits of the grid indices, qs[32..63]: 8 sign bits per 8 elements; qh[g] the
// top 2 bits of group g's 4 indices; scales as IQ2_XS.
struct block_iq2_s {
    uint16_t d;
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t scales[8];
};

// qs[0..63]: indices of 4-element grid entries; qs[64..95]: per group of 32 a uint32 of 4 x 7
// sign bits and a 4-bit scale: x = d * (2s + 1) / 4 * grid * sign.
struct block_iq3_xxs {
    uint16_t d;
    uint8_t qs[96];
};

// qs: low 8 bits of 4-element grid indices, qh[g] their 9th bits, signs: 8 per 8 elements,
// scales: a nibble per group of 32: x = d * (2s + 1) * grid * sign.
struct block_iq3_s {
    uint16_t d;
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t signs[32];
    uint8_t scales[4];
};

// qs: low 8 bits of 11-bit grid indices; qh[g]: bits 0..11 their top 3 bits (3 per 8 elements),
// 12..14 the scale s, 15 the sign of the shift: x = d * (2s + 1) * (grid +- 1/8).
struct block_iq1_s {
    uint16_t d;
    uint8_t qs[32];
    uint16_t qh[8];
};

// qs as IQ1_S; qh[k] per 8-element pair: bits 0-2 / 4-6 the index top bits, bit 3 / 7 the
// shift sign; scales: four uint16 holding 3-bit scales of the 16 sub-blocks of 16 in their low
// 12 bits and, in their top nibbles, the f16 block scale d.
struct block_iq1_m {
    uint8_t qs[32];
    uint8_t qh[16];
    uint8_t scales[8];
};

// 256 elements in 8 groups of 32: x = d * (ls - 32) * kvalues_iq4nl[q], ls the 6-bit scale
// (low nibble in scales_l, top 2 bits in scales_h); nibbles split as in IQ4_NL per group.
struct block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
};

_Static_assert(sizeof(struct block_q4_0) == 18, "Q4_0 block is 18 bytes");
_Static_assert(sizeof(struct block_q4_1) == 20, "Q4_1 block is 20 bytes");
_Static_assert(sizeof(struct block_q5_0) == 22, "Q5_0 block is 22 bytes");
_Static_assert(sizeof(struct block_q5_1) == 24, "Q5_1 block is 24 bytes");
_Static_assert(sizeof(struct block_q8_1) == 36, "Q8_1 block is 36 bytes");
_Static_assert(sizeof(struct block_mxfp4) == 17, "MXFP4 block is 17 bytes");
_Static_assert(sizeof(struct block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");
_Static_assert(sizeof(struct block_q2_k) == 84, "Q2_K block is 84 bytes");
_Static_assert(sizeof(struct block_q3_k) == 110, "Q3_K block is 110 bytes");
_Static_assert(sizeof(struct block_iq2_xxs) == 66, "IQ2_XXS block is 66 bytes");
_Static_assert(sizeof(struct block_iq2_xs) == 74, "IQ2_XS block is 74 bytes");
_Static_assert(sizeof(struct block_iq2_s) == 82, "IQ2_S block is 82 bytes");
_Static_assert(sizeof(struct block_iq3_xxs) == 98, "IQ3_XXS block is 98 bytes");
_Static_assert(sizeof(struct block_iq3_s) == 110, "IQ3_S block is 110 bytes");
_Static_assert(sizeof(struct block_iq1_s) == 50, "IQ1_S block is 50 bytes");
_Static_assert(sizeof(struct block_iq1_m) == 56, "IQ1_M block is 56 bytes");
_Static_assert(sizeof(struct block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

// The 8 sign bits of a 7-bit stored pattern: bit 7 makes the count of set bits even.
static inline uint8_t strata_iq_signs8(uint32_t bits7)
{
    bits7 &= 127;
    return (uint8_t)(bits7 | (uint32_t)(__builtin_popcount(bits7) & 1) << 7);
}

// MXFP4's E8M0 exponent as the float 2^(e - 128) (half the block scale: the value table holds
// doubled E2M1 values). e 0 and 1 give the subnormals 2^-128 and 2^-127; e 255 gives 2^127.
static inline float strata_e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// IQ1_M's f16 block scale, spread over the top nibbles of its four scale words.
static inline uint16_t strata_iq1m_d(const uint8_t *scales)
{
    uint16_t sc[4];
    __builtin_memcpy(sc, scales, 8);
    return (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
}

// Table entries [STRATA_TYPE_Q4_0] = prefix_q4_0, ... for every low-bit weight type.
#define STRATA_LOWBIT_ENTRIES(prefix)                                                              \
    [STRATA_TYPE_Q4_0] = prefix##_q4_0, [STRATA_TYPE_Q4_1] = prefix##_q4_1,                        \
    [STRATA_TYPE_Q5_0] = prefix##_q5_0, [STRATA_TYPE_Q5_1] = prefix##_q5_1,                        \
    [STRATA_TYPE_MXFP4] = prefix##_mxfp4, [STRATA_TYPE_IQ4_NL] = prefix##_iq4_nl,                  \
    [STRATA_TYPE_Q2_K] = prefix##_q2_k, [STRATA_TYPE_Q3_K] = prefix##_q3_k,                        \
    [STRATA_TYPE_IQ2_XXS] = prefix##_iq2_xxs, [STRATA_TYPE_IQ2_XS] = prefix##_iq2_xs,              \
    [STRATA_TYPE_IQ2_S] = prefix##_iq2_s, [STRATA_TYPE_IQ3_XXS] = prefix##_iq3_xxs,                \
    [STRATA_TYPE_IQ3_S] = prefix##_iq3_s, [STRATA_TYPE_IQ1_S] = prefix##_iq1_s,                    \
    [STRATA_TYPE_IQ1_M] = prefix##_iq1_m, [STRATA_TYPE_IQ4_XS] = prefix##_iq4_xs,

// One block decoded to exact integers: value[i] = d * scale[sub] * q[i] - dmin * min[sub], where
// sub = i / (block size / n_sub).
struct strata_lowbit_decoded {
    float d, dmin;         // block factors (dmin 0 where the format has no min)
    int n_sub;             // sub-blocks sharing one scale (and min): 1, 8 or 16
    int32_t scale[16];     // [n_sub]
    int32_t min[16];       // [n_sub]
    int8_t q[QK_K];        // [block size]
};

// Decode one block of a low-bit weight type (one of STRATA_LOWBIT_ENTRIES' types).
void strata_lowbit_decode(uint32_t type, const void *blk, struct strata_lowbit_decoded *o);
// Reference dequantisation of a low-bit type; NULL for other types.
strata_dequant_fn strata_lowbit_dequant_ref(uint32_t type);

// Random valid blocks of the low-bit types whose codes strata_quant_random cannot derive from
// uniform fields alone (IQ formats, MXFP4, IQ4_NL/IQ4_XS): uniform random codes, then the block
// scale set so the block's values have RMS std (times a log-normal jitter). Returns 0, or
// STRATA_EUNSUP for a type it does not handle.
int strata_lowbit_random(uint32_t type, uint64_t *rng, void *dst, int64_t n, float std);

#endif
