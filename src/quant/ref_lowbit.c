// Reference decoding and dequantisation of the low-bit formats (lowbit.h): Q4_0, Q4_1, Q5_0,
// Q5_1, MXFP4, IQ4_NL (blocks of 32), Q2_K, Q3_K, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S,
// IQ1_M, IQ4_XS (blocks of 256).
//
// Every format is first decoded, one block at a time, into exact integers: value[i] =
// d * scale[sub] * q[i] - dmin * min[sub] with int8 q, small integer scales and mins, and float
// block factors d, dmin (the IQ scales (2s + 1) / 8 and IQ1's shift of +-1/8 become integers by
// moving the power of two into d). The scalar reference dot products (backend/cpu/dot_ref.c)
// sum q * activation exactly per sub-block from the same decoding.
#include <math.h>
#include <string.h>

#include "quant/fp16.h"
#include "quant/iq_grids.h"
#include "quant/lowbit.h"

// ---- decoders -------------------------------------------------------------------------------

static void nibbles32(const uint8_t *qs, int8_t *q, const int8_t *table, int offset)
{
    for (int j = 0; j < 16; j++) {
        q[j] = (int8_t)(table ? table[qs[j] & 15] : (qs[j] & 15) - offset);
        q[j + 16] = (int8_t)(table ? table[qs[j] >> 4] : (qs[j] >> 4) - offset);
    }
}

static void fifth_bits(const uint8_t *qh4, int8_t *q)
{
    uint32_t qh;
    memcpy(&qh, qh4, 4);
    for (int j = 0; j < 32; j++) q[j] = (int8_t)(q[j] | ((qh >> j) & 1) << 4);
}

static void one_sub(struct strata_lowbit_decoded *o, float d)
{
    o->d = d;
    o->dmin = 0.0f;
    o->n_sub = 1;
    o->scale[0] = 1;
    o->min[0] = 0;
}

static void decode_q4_0(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_q4_0 *x = blk;
    one_sub(o, strata_fp16_to_fp32(x->d));
    nibbles32(x->qs, o->q, NULL, 8);
}

// Q4_1 / Q5_1: x = d q + m, recorded as dmin = -m, min = 1.
static void decode_q4_1(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_q4_1 *x = blk;
    one_sub(o, strata_fp16_to_fp32(x->d));
    o->dmin = -strata_fp16_to_fp32(x->m);
    o->min[0] = 1;
    nibbles32(x->qs, o->q, NULL, 0);
}

static void decode_q5_0(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_q5_0 *x = blk;
    one_sub(o, strata_fp16_to_fp32(x->d));
    nibbles32(x->qs, o->q, NULL, 0);
    fifth_bits(x->qh, o->q);
    for (int j = 0; j < 32; j++) o->q[j] = (int8_t)(o->q[j] - 16);
}

static void decode_q5_1(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_q5_1 *x = blk;
    one_sub(o, strata_fp16_to_fp32(x->d));
    o->dmin = -strata_fp16_to_fp32(x->m);
    o->min[0] = 1;
    nibbles32(x->qs, o->q, NULL, 0);
    fifth_bits(x->qh, o->q);
}

static void decode_mxfp4(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_mxfp4 *x = blk;
    one_sub(o, strata_e8m0_half(x->e));
    nibbles32(x->qs, o->q, strata_kvalues_mxfp4, 0);
}

static void decode_iq4_nl(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq4_nl *x = blk;
    one_sub(o, strata_fp16_to_fp32(x->d));
    nibbles32(x->qs, o->q, strata_kvalues_iq4nl, 0);
}

// Element 128 h + 32 j + l of Q2_K/Q3_K: bits 2j..2j+1 of qs[32 h + l].
static int two_bits(const uint8_t *qs, int e)
{
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}

static void decode_q2_k(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_q2_k *x = blk;
    o->d = strata_fp16_to_fp32(x->d);
    o->dmin = strata_fp16_to_fp32(x->dmin);
    o->n_sub = 16;
    for (int j = 0; j < 16; j++) {
        o->scale[j] = x->scales[j] & 15;
        o->min[j] = x->scales[j] >> 4;
    }
    for (int e = 0; e < QK_K; e++) o->q[e] = (int8_t)two_bits(x->qs, e);
}

static void decode_q3_k(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_q3_k *x = blk;
    o->d = strata_fp16_to_fp32(x->d);
    o->dmin = 0.0f;
    o->n_sub = 16;
    for (int j = 0; j < 16; j++) {
        int low4 = j < 8 ? x->scales[j] & 15 : x->scales[j - 8] >> 4;
        int high2 = (x->scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        o->scale[j] = (low4 | high2 << 4) - 32;
        o->min[j] = 0;
    }
    for (int e = 0; e < QK_K; e++) {
        int hbit = (x->hmask[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) & 1;
        o->q[e] = (int8_t)(two_bits(x->qs, e) - (hbit ? 0 : 4));
    }
}

// 8 elements from a grid entry of unsigned bytes and 8 sign bits.
static void signed_grid8(uint64_t entry, uint8_t signs, int8_t *q)
{
    for (int j = 0; j < 8; j++) {
        int v = (int)((entry >> (8 * j)) & 0xff);
        q[j] = (int8_t)(signs >> j & 1 ? -v : v);
    }
}

// As signed_grid8 from two 4-element entries.
static void signed_grid4x2(uint32_t lo, uint32_t hi, uint8_t signs, int8_t *q)
{
    signed_grid8((uint64_t)hi << 32 | lo, signs, q);
}

static void k_sub_init(struct strata_lowbit_decoded *o, float d, int n_sub)
{
    o->d = d;
    o->dmin = 0.0f;
    o->n_sub = n_sub;
    memset(o->min, 0, sizeof(o->min));
}

static void decode_iq2_xxs(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq2_xxs *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d) * 0.125f, 8);
    for (int g = 0; g < 8; g++) {
        uint8_t idx[4];
        uint32_t sgn;
        memcpy(idx, x->qs + 4 * g, 4);
        memcpy(&sgn, x->qs + 4 * g + 2, 4);
        o->scale[g] = 2 * (int)(sgn >> 28) + 1;
        for (int l = 0; l < 4; l++)
            signed_grid8(strata_iq2xxs_grid[idx[l]], strata_iq_signs8(sgn >> (7 * l)), o->q + 32 * g + 8 * l);
    }
}

static void decode_iq2_xs(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq2_xs *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d) * 0.125f, 16);
    for (int h = 0; h < 16; h++) o->scale[h] = 2 * ((x->scales[h / 2] >> (4 * (h & 1))) & 15) + 1;
    for (int k = 0; k < 32; k++)
        signed_grid8(strata_iq2xs_grid[x->qs[k] & 511], strata_iq_signs8(x->qs[k] >> 9), o->q + 8 * k);
}

static void decode_iq2_s(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq2_s *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d) * 0.125f, 16);
    for (int h = 0; h < 16; h++) o->scale[h] = 2 * ((x->scales[h / 2] >> (4 * (h & 1))) & 15) + 1;
    for (int k = 0; k < 32; k++) {
        int idx = x->qs[k] | ((x->qh[k / 4] >> (2 * (k % 4))) & 3) << 8;
        signed_grid8(strata_iq2s_grid[idx], x->qs[32 + k], o->q + 8 * k);
    }
}

static void decode_iq3_xxs(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq3_xxs *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d) * 0.25f, 8);
    for (int g = 0; g < 8; g++) {
        uint32_t sgn;
        memcpy(&sgn, x->qs + 64 + 4 * g, 4);
        o->scale[g] = 2 * (int)(sgn >> 28) + 1;
        for (int l = 0; l < 4; l++) {
            const uint8_t *idx = x->qs + 8 * g + 2 * l;
            signed_grid4x2(strata_iq3xxs_grid[idx[0]], strata_iq3xxs_grid[idx[1]],
                           strata_iq_signs8(sgn >> (7 * l)), o->q + 32 * g + 8 * l);
        }
    }
}

static void decode_iq3_s(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq3_s *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d), 8);
    for (int g = 0; g < 8; g++) {
        o->scale[g] = 2 * ((x->scales[g / 2] >> (4 * (g & 1))) & 15) + 1;
        for (int l = 0; l < 4; l++) {
            const uint8_t *idx = x->qs + 8 * g + 2 * l;
            int i0 = idx[0] | ((x->qh[g] >> (2 * l)) & 1) << 8;
            int i1 = idx[1] | ((x->qh[g] >> (2 * l + 1)) & 1) << 8;
            signed_grid4x2(strata_iq3s_grid[i0], strata_iq3s_grid[i1], x->signs[4 * g + l],
                           o->q + 32 * g + 8 * l);
        }
    }
}

// 8 elements of IQ1: 8 * grid + shift (grid bytes in -1..1, shift +-1).
static void iq1_grid8(int idx, int shift, int8_t *q)
{
    uint64_t entry = strata_iq1s_grid[idx];
    for (int j = 0; j < 8; j++) q[j] = (int8_t)(8 * (int8_t)(entry >> (8 * j)) + shift);
}

static void decode_iq1_s(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq1_s *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d) * 0.125f, 8);
    for (int g = 0; g < 8; g++) {
        uint16_t qh = x->qh[g];
        o->scale[g] = 2 * ((qh >> 12) & 7) + 1;
        int shift = qh & 0x8000 ? -1 : 1;
        for (int l = 0; l < 4; l++)
            iq1_grid8(x->qs[4 * g + l] | ((qh >> (3 * l)) & 7) << 8, shift, o->q + 32 * g + 8 * l);
    }
}

static void decode_iq1_m(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq1_m *x = blk;
    uint16_t sc[4];
    memcpy(sc, x->scales, 8);
    k_sub_init(o, strata_fp16_to_fp32(strata_iq1m_d(x->scales)) * 0.125f, 16);
    for (int h = 0; h < 16; h++) o->scale[h] = 2 * ((sc[h / 4] >> (3 * (h % 4))) & 7) + 1;
    for (int k = 0; k < 32; k++) {
        uint8_t qh = x->qh[k / 2];
        int nib = k & 1 ? qh >> 4 : qh & 15;
        iq1_grid8(x->qs[k] | (nib & 7) << 8, nib & 8 ? -1 : 1, o->q + 8 * k);
    }
}

static void decode_iq4_xs(const void *blk, struct strata_lowbit_decoded *o)
{
    const struct block_iq4_xs *x = blk;
    k_sub_init(o, strata_fp16_to_fp32(x->d), 8);
    for (int g = 0; g < 8; g++) {
        int ls = ((x->scales_l[g / 2] >> (4 * (g & 1))) & 15) | ((x->scales_h >> (2 * g)) & 3) << 4;
        o->scale[g] = ls - 32;
        nibbles32(x->qs + 16 * g, o->q + 32 * g, strata_kvalues_iq4nl, 0);
    }
}

// ---- per-type descriptions ------------------------------------------------------------------

typedef void (*decode_fn)(const void *blk, struct strata_lowbit_decoded *o);

struct lowbit_format {
    decode_fn decode;
    uint32_t block_size, type_size;
};

static const struct lowbit_format g_formats[STRATA_TYPE_COUNT] = {
    [STRATA_TYPE_Q4_0] = {decode_q4_0, 32, sizeof(struct block_q4_0)},
    [STRATA_TYPE_Q4_1] = {decode_q4_1, 32, sizeof(struct block_q4_1)},
    [STRATA_TYPE_Q5_0] = {decode_q5_0, 32, sizeof(struct block_q5_0)},
    [STRATA_TYPE_Q5_1] = {decode_q5_1, 32, sizeof(struct block_q5_1)},
    [STRATA_TYPE_MXFP4] = {decode_mxfp4, 32, sizeof(struct block_mxfp4)},
    [STRATA_TYPE_IQ4_NL] = {decode_iq4_nl, 32, sizeof(struct block_iq4_nl)},
    [STRATA_TYPE_Q2_K] = {decode_q2_k, QK_K, sizeof(struct block_q2_k)},
    [STRATA_TYPE_Q3_K] = {decode_q3_k, QK_K, sizeof(struct block_q3_k)},
    [STRATA_TYPE_IQ2_XXS] = {decode_iq2_xxs, QK_K, sizeof(struct block_iq2_xxs)},
    [STRATA_TYPE_IQ2_XS] = {decode_iq2_xs, QK_K, sizeof(struct block_iq2_xs)},
    [STRATA_TYPE_IQ2_S] = {decode_iq2_s, QK_K, sizeof(struct block_iq2_s)},
    [STRATA_TYPE_IQ3_XXS] = {decode_iq3_xxs, QK_K, sizeof(struct block_iq3_xxs)},
    [STRATA_TYPE_IQ3_S] = {decode_iq3_s, QK_K, sizeof(struct block_iq3_s)},
    [STRATA_TYPE_IQ1_S] = {decode_iq1_s, QK_K, sizeof(struct block_iq1_s)},
    [STRATA_TYPE_IQ1_M] = {decode_iq1_m, QK_K, sizeof(struct block_iq1_m)},
    [STRATA_TYPE_IQ4_XS] = {decode_iq4_xs, QK_K, sizeof(struct block_iq4_xs)},
};

static void dequant_type(uint32_t type, const void *src, float *dst, int64_t n)
{
    const struct lowbit_format *f = &g_formats[type];
    const uint8_t *blk = src;
    struct strata_lowbit_decoded o;
    for (int64_t b = 0; b < n / f->block_size; b++, blk += f->type_size, dst += f->block_size) {
        f->decode(blk, &o);
        int sub_len = (int)f->block_size / o.n_sub;
        for (uint32_t i = 0; i < f->block_size; i++) {
            int s = (int)i / sub_len;
            dst[i] = o.d * (float)(o.scale[s] * o.q[i]) - o.dmin * (float)o.min[s];
        }
    }
}

void strata_lowbit_decode(uint32_t type, const void *blk, struct strata_lowbit_decoded *o)
{
    g_formats[type].decode(blk, o);
}

#define LOWBIT_DEQUANT(name, TYPE)                                                    \
    static void dequant_##name(const void *src, float *dst, int64_t n)               \
    {                                                                                 \
        dequant_type(STRATA_TYPE_##TYPE, src, dst, n);                                \
    }

LOWBIT_DEQUANT(q4_0, Q4_0)
LOWBIT_DEQUANT(q4_1, Q4_1)
LOWBIT_DEQUANT(q5_0, Q5_0)
LOWBIT_DEQUANT(q5_1, Q5_1)
LOWBIT_DEQUANT(mxfp4, MXFP4)
LOWBIT_DEQUANT(iq4_nl, IQ4_NL)
LOWBIT_DEQUANT(q2_k, Q2_K)
LOWBIT_DEQUANT(q3_k, Q3_K)
LOWBIT_DEQUANT(iq2_xxs, IQ2_XXS)
LOWBIT_DEQUANT(iq2_xs, IQ2_XS)
LOWBIT_DEQUANT(iq2_s, IQ2_S)
LOWBIT_DEQUANT(iq3_xxs, IQ3_XXS)
LOWBIT_DEQUANT(iq3_s, IQ3_S)
LOWBIT_DEQUANT(iq1_s, IQ1_S)
LOWBIT_DEQUANT(iq1_m, IQ1_M)
LOWBIT_DEQUANT(iq4_xs, IQ4_XS)

static const strata_dequant_fn g_dequant[STRATA_TYPE_COUNT] = {STRATA_LOWBIT_ENTRIES(dequant)};

strata_dequant_fn strata_lowbit_dequant_ref(uint32_t type)
{
    return type < STRATA_TYPE_COUNT ? g_dequant[type] : NULL;
}
