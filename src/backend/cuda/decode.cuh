// Private to src/backend/cuda: the integer decoders of every weight block format and the tables
// they read, shared by the mat-vec (mv.cu), the tensor-core GEMM (mmq.cu) and dequantisation
// (quant.cu). See common.cuh for the scheme.
//
// Without relocatable device code a __device__ table cannot be shared between .cu files, so each
// file that includes this holds its own copy and exports an uploader (strata_cuda_tables_FILE),
// which strata_cuda_open calls.
#ifndef STRATA_CUDA_DECODE_CUH
#define STRATA_CUDA_DECODE_CUH

#include <string.h>

#include "backend/cuda/common.cuh"

extern "C" {
#include "quant/iq_grids.h"
}

// ---- tables -------------------------------------------------------------------------------------

static __device__ uint2 g_iq2xxs_grid[256];
static __device__ uint2 g_iq2xs_grid[512];
static __device__ uint2 g_iq2s_grid[1024];
static __device__ uint32_t g_iq3xxs_grid[256];
static __device__ uint32_t g_iq3s_grid[512];
static __device__ uint2 g_iq1s_grid[2048];
static __constant__ uint32_t c_kvalues_iq4nl[4];
static __constant__ uint32_t c_kvalues_mxfp4[4];

// Table entries: the device copies in kernels, the host tables (quant/iq_grids.c) on the host.
#ifdef __CUDA_ARCH__
#define GRID64(name, i) g_##name[i]
#define GRID32(name, i) g_##name[i]
#else
#define GRID64(name, i) make_uint2((uint32_t)strata_##name[i], (uint32_t)(strata_##name[i] >> 32))
#define GRID32(name, i) strata_##name[i]
#endif

// This file's copy of the tables from the host ones (quant/iq_grids.c).
static int upload_tables(void)
{
    CU_TRY(cudaMemcpyToSymbol(g_iq2xxs_grid, strata_iq2xxs_grid, sizeof strata_iq2xxs_grid));
    CU_TRY(cudaMemcpyToSymbol(g_iq2xs_grid, strata_iq2xs_grid, sizeof strata_iq2xs_grid));
    CU_TRY(cudaMemcpyToSymbol(g_iq2s_grid, strata_iq2s_grid, sizeof strata_iq2s_grid));
    CU_TRY(cudaMemcpyToSymbol(g_iq3xxs_grid, strata_iq3xxs_grid, sizeof strata_iq3xxs_grid));
    CU_TRY(cudaMemcpyToSymbol(g_iq3s_grid, strata_iq3s_grid, sizeof strata_iq3s_grid));
    CU_TRY(cudaMemcpyToSymbol(g_iq1s_grid, strata_iq1s_grid, sizeof strata_iq1s_grid));
    CU_TRY(cudaMemcpyToSymbol(c_kvalues_iq4nl, strata_kvalues_iq4nl, 16));
    CU_TRY(cudaMemcpyToSymbol(c_kvalues_mxfp4, strata_kvalues_mxfp4, 16));
    return 0;
}

// ---- decoders -----------------------------------------------------------------------------------

// One 32-element unit: q[8] packed int8, scales and mins of its two halves.
struct unit_q {
    int q[8];
    int sc[2], mn[2];
};

// Traits and decoders of each computable quantized type. For each: BS elements per block, TS
// bytes per block, UPB units per block, VDT the activation format, MIN whether the block has a
// min term (Q8_K bsums or Q8_1 sums), SUB16 whether the two halves of a unit have their own
// scales, factors() the block's float d and dmin, unit() unit u.
template <int T> struct qtype;

#define QT_HEAD(bs, ts, vdt, has_min, sub16)                                \
    static constexpr int BS = bs, TS = ts, UPB = bs / 32, VDT = vdt;        \
    static constexpr bool MIN = has_min, SUB16 = sub16;

template <> struct qtype<STRATA_TYPE_Q8_0> {
    QT_HEAD(32, 34, STRATA_TYPE_Q8_0, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int, unit_q &o)
    {
        for (int i = 0; i < 8; i++) o.q[i] = (int)ld32(b + 2 + 4 * i);
        o.sc[0] = o.sc[1] = 1; o.mn[0] = o.mn[1] = 0;
    }
};

HD void nibbles32(const uint8_t *qs, unit_q &o, uint32_t offset4)
{
    for (int i = 0; i < 4; i++) {
        const uint32_t w = ld32(qs + 4 * i);
        o.q[i] = (int)vsub4(w & 0x0f0f0f0fu, offset4);
        o.q[4 + i] = (int)vsub4((w >> 4) & 0x0f0f0f0fu, offset4);
    }
}

// which: 0 the IQ4_NL values, 1 MXFP4's
HD void nibbles32_table(const uint8_t *qs, unit_q &o, int which)
{
    uint32_t t[4];
#ifdef __CUDA_ARCH__
    for (int k = 0; k < 4; k++) t[k] = which ? c_kvalues_mxfp4[k] : c_kvalues_iq4nl[k];
#else
    memcpy(t, which ? strata_kvalues_mxfp4 : strata_kvalues_iq4nl, 16);
#endif
    for (int i = 0; i < 4; i++) {
        const uint32_t w = ld32(qs + 4 * i);
        o.q[i] = (int)lookup16(w & 0x0f0f0f0fu, t);
        o.q[4 + i] = (int)lookup16((w >> 4) & 0x0f0f0f0fu, t);
    }
}

HD void one_scale(unit_q &o, int mn)
{
    o.sc[0] = o.sc[1] = 1;
    o.mn[0] = o.mn[1] = mn;
}

template <> struct qtype<STRATA_TYPE_Q4_0> {
    QT_HEAD(32, 18, STRATA_TYPE_Q8_0, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int, unit_q &o) { nibbles32(b + 2, o, 0x08080808u); one_scale(o, 0); }
};

// Q4_1 / Q5_1: x = d q + m, recorded as dmin = -m with min 1 (the Q8_1 sum carries the rest).
template <> struct qtype<STRATA_TYPE_Q4_1> {
    QT_HEAD(32, 20, STRATA_TYPE_Q8_1, true, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = -h2f(ld16(b + 2)); }
    static HD void unit(const uint8_t *b, int, unit_q &o) { nibbles32(b + 4, o, 0u); one_scale(o, 1); }
};

HD void add_fifth_bits(uint32_t qh, unit_q &o, uint32_t offset4)
{
    for (int i = 0; i < 4; i++) {
        o.q[i] = (int)vsub4((uint32_t)o.q[i] | fifth_bits4(qh >> (4 * i)), offset4);
        o.q[4 + i] = (int)vsub4((uint32_t)o.q[4 + i] | fifth_bits4(qh >> (16 + 4 * i)), offset4);
    }
}

template <> struct qtype<STRATA_TYPE_Q5_0> {
    QT_HEAD(32, 22, STRATA_TYPE_Q8_0, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int, unit_q &o)
    {
        nibbles32(b + 6, o, 0u);
        add_fifth_bits(ld32(b + 2), o, 0x10101010u);
        one_scale(o, 0);
    }
};

template <> struct qtype<STRATA_TYPE_Q5_1> {
    QT_HEAD(32, 24, STRATA_TYPE_Q8_1, true, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = -h2f(ld16(b + 2)); }
    static HD void unit(const uint8_t *b, int, unit_q &o)
    {
        nibbles32(b + 8, o, 0u);
        add_fifth_bits(ld32(b + 4), o, 0u);
        one_scale(o, 1);
    }
};

template <> struct qtype<STRATA_TYPE_IQ4_NL> {
    QT_HEAD(32, 18, STRATA_TYPE_Q8_0, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int, unit_q &o) { nibbles32_table(b + 2, o, 0); one_scale(o, 0); }
};

// 2^(e - 128): half the E8M0 scale (the value table holds doubled E2M1 values).
HD float e8m0_half(uint32_t e)
{
    const uint32_t bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

template <> struct qtype<STRATA_TYPE_MXFP4> {
    QT_HEAD(32, 17, STRATA_TYPE_Q8_0, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = e8m0_half(b[0]); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int, unit_q &o) { nibbles32_table(b + 1, o, 1); one_scale(o, 0); }
};

// Q2_K: 16 sub-blocks of 16; element 128 h + 32 j + l is bits 2j..2j+1 of qs[32 h + l].
template <> struct qtype<STRATA_TYPE_Q2_K> {
    QT_HEAD(256, 84, STRATA_TYPE_Q8_K, true, true)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b + 80)); dmin = h2f(ld16(b + 82)); }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const int h = u >> 2, j = u & 3;
        for (int i = 0; i < 8; i++) o.q[i] = (int)((ld32(b + 16 + 32 * h + 4 * i) >> (2 * j)) & 0x03030303u);
        for (int k = 0; k < 2; k++) {
            const uint32_t s = b[2 * u + k];
            o.sc[k] = (int)(s & 15u);
            o.mn[k] = (int)(s >> 4);
        }
    }
};

template <> struct qtype<STRATA_TYPE_Q3_K> {
    QT_HEAD(256, 110, STRATA_TYPE_Q8_K, false, true)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b + 108)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const int h = u >> 2, j = u & 3;
        for (int i = 0; i < 8; i++) {
            const uint32_t q2 = (ld32(b + 32 + 32 * h + 4 * i) >> (2 * j)) & 0x03030303u;
            const uint32_t hb = (ld32(b + 4 * i) >> (4 * h + j)) & 0x01010101u;
            o.q[i] = (int)vsub4(q2, (hb ^ 0x01010101u) << 2);
        }
        const uint8_t *sc = b + 96;
        for (int k = 0; k < 2; k++) {
            const int s = 2 * u + k;
            const uint32_t low4 = s < 8 ? sc[s] & 15u : sc[s - 8] >> 4;
            const uint32_t high2 = (sc[8 + (s & 3)] >> (2 * (s >> 2))) & 3u;
            o.sc[k] = (int)(low4 | high2 << 4) - 32;
            o.mn[k] = 0;
        }
    }
};

// Scale and min j (0..7) of the 12 packed bytes of Q4_K/Q5_K.
HD void k_scale_min(const uint8_t *s, int j, int &sc, int &mn)
{
    if (j < 4) {
        sc = s[j] & 63;
        mn = s[j + 4] & 63;
    } else {
        sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

template <> struct qtype<STRATA_TYPE_Q4_K> {
    QT_HEAD(256, 144, STRATA_TYPE_Q8_K, true, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = h2f(ld16(b + 2)); }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint8_t *qs = b + 16 + 32 * (u >> 1);
        const int shift = 4 * (u & 1);
        for (int i = 0; i < 8; i++) o.q[i] = (int)((ld32(qs + 4 * i) >> shift) & 0x0f0f0f0fu);
        int sc, mn;
        k_scale_min(b + 4, u, sc, mn);
        o.sc[0] = o.sc[1] = sc;
        o.mn[0] = o.mn[1] = mn;
    }
};

template <> struct qtype<STRATA_TYPE_Q5_K> {
    QT_HEAD(256, 176, STRATA_TYPE_Q8_K, true, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = h2f(ld16(b + 2)); }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint8_t *qs = b + 48 + 32 * (u >> 1);
        const int shift = 4 * (u & 1);
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (ld32(qs + 4 * i) >> shift) & 0x0f0f0f0fu;
            const uint32_t hi = (ld32(b + 16 + 4 * i) >> u) & 0x01010101u;
            o.q[i] = (int)(lo | hi << 4);
        }
        int sc, mn;
        k_scale_min(b + 4, u, sc, mn);
        o.sc[0] = o.sc[1] = sc;
        o.mn[0] = o.mn[1] = mn;
    }
};

template <> struct qtype<STRATA_TYPE_Q6_K> {
    QT_HEAD(256, 210, STRATA_TYPE_Q8_K, false, true)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b + 208)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const int h = u >> 2, j = u & 3;
        const uint8_t *ql = b + 64 * h + 32 * (j & 1), *qh = b + 128 + 32 * h;
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (ld32(ql + 4 * i) >> (4 * (j >> 1))) & 0x0f0f0f0fu;
            const uint32_t hi = (ld32(qh + 4 * i) >> (2 * j)) & 0x03030303u;
            o.q[i] = (int)vsub4(lo | hi << 4, 0x20202020u);
        }
        o.sc[0] = (int)(int8_t)b[192 + 2 * u];
        o.sc[1] = (int)(int8_t)b[192 + 2 * u + 1];
        o.mn[0] = o.mn[1] = 0;
    }
};

HD void grid8_signed(uint2 g, uint32_t s8, int *q)
{
    q[0] = (int)apply_signs4(g.x, s8);
    q[1] = (int)apply_signs4(g.y, s8 >> 4);
}

template <> struct qtype<STRATA_TYPE_IQ2_XXS> {
    QT_HEAD(256, 66, STRATA_TYPE_Q8_K, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)) * 0.125f; dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint32_t idx = ld32(b + 2 + 8 * u), sgn = ld32(b + 6 + 8 * u);
        for (int l = 0; l < 4; l++) grid8_signed(GRID64(iq2xxs_grid, (idx >> (8 * l)) & 255u), signs8(sgn >> (7 * l)), o.q + 2 * l);
        o.sc[0] = o.sc[1] = 2 * (int)(sgn >> 28) + 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

template <> struct qtype<STRATA_TYPE_IQ2_XS> {
    QT_HEAD(256, 74, STRATA_TYPE_Q8_K, false, true)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)) * 0.125f; dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        for (int l = 0; l < 4; l++) {
            const uint32_t v = ld16(b + 2 + 2 * (4 * u + l));
            grid8_signed(GRID64(iq2xs_grid, v & 511u), signs8(v >> 9), o.q + 2 * l);
        }
        const uint32_t s = b[66 + u];
        o.sc[0] = 2 * (int)(s & 15u) + 1;
        o.sc[1] = 2 * (int)(s >> 4) + 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

template <> struct qtype<STRATA_TYPE_IQ2_S> {
    QT_HEAD(256, 82, STRATA_TYPE_Q8_K, false, true)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)) * 0.125f; dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint32_t qh = b[66 + u];
        for (int l = 0; l < 4; l++) {
            const int k = 4 * u + l;
            const uint32_t idx = b[2 + k] | ((qh >> (2 * l)) & 3u) << 8;
            grid8_signed(GRID64(iq2s_grid, idx), b[34 + k], o.q + 2 * l);
        }
        const uint32_t s = b[74 + u];
        o.sc[0] = 2 * (int)(s & 15u) + 1;
        o.sc[1] = 2 * (int)(s >> 4) + 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

template <> struct qtype<STRATA_TYPE_IQ3_XXS> {
    QT_HEAD(256, 98, STRATA_TYPE_Q8_K, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)) * 0.25f; dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint32_t sgn = ld32(b + 66 + 4 * u);
        for (int l = 0; l < 4; l++) {
            const uint8_t *idx = b + 2 + 8 * u + 2 * l;
            const uint2 g = make_uint2(GRID32(iq3xxs_grid, idx[0]), GRID32(iq3xxs_grid, idx[1]));
            grid8_signed(g, signs8(sgn >> (7 * l)), o.q + 2 * l);
        }
        o.sc[0] = o.sc[1] = 2 * (int)(sgn >> 28) + 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

template <> struct qtype<STRATA_TYPE_IQ3_S> {
    QT_HEAD(256, 110, STRATA_TYPE_Q8_K, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint32_t qh = b[66 + u];
        for (int l = 0; l < 4; l++) {
            const uint8_t *idx = b + 2 + 8 * u + 2 * l;
            const uint32_t i0 = idx[0] | ((qh >> (2 * l)) & 1u) << 8, i1 = idx[1] | ((qh >> (2 * l + 1)) & 1u) << 8;
            grid8_signed(make_uint2(GRID32(iq3s_grid, i0), GRID32(iq3s_grid, i1)), b[74 + 4 * u + l], o.q + 2 * l);
        }
        o.sc[0] = o.sc[1] = 2 * (int)((b[106 + u / 2] >> (4 * (u & 1))) & 15u) + 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

// 8 elements of IQ1: 8 * grid + shift (grid bytes are int8 in -1..1, shift +-1).
HD void iq1_grid8(uint32_t idx, bool negative_shift, int *q)
{
    const uint2 g = GRID64(iq1s_grid, idx);
    const uint32_t sh = negative_shift ? 0xffffffffu : 0x01010101u;
    q[0] = (int)vadd4((g.x << 3) & 0xf8f8f8f8u, sh);
    q[1] = (int)vadd4((g.y << 3) & 0xf8f8f8f8u, sh);
}

template <> struct qtype<STRATA_TYPE_IQ1_S> {
    QT_HEAD(256, 50, STRATA_TYPE_Q8_K, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)) * 0.125f; dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        const uint32_t qh = ld16(b + 34 + 2 * u);
        for (int l = 0; l < 4; l++) iq1_grid8(b[2 + 4 * u + l] | ((qh >> (3 * l)) & 7u) << 8, qh & 0x8000u, o.q + 2 * l);
        o.sc[0] = o.sc[1] = 2 * (int)((qh >> 12) & 7u) + 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

template <> struct qtype<STRATA_TYPE_IQ1_M> {
    QT_HEAD(256, 56, STRATA_TYPE_Q8_K, false, true)
    static HD void factors(const uint8_t *b, float &d, float &dmin)
    {
        const uint32_t s0 = ld16(b + 48), s1 = ld16(b + 50), s2 = ld16(b + 52), s3 = ld16(b + 54);
        d = h2f((s0 >> 12) | ((s1 >> 8) & 0x00f0u) | ((s2 >> 4) & 0x0f00u) | (s3 & 0xf000u)) * 0.125f;
        dmin = 0.0f;
    }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        for (int l = 0; l < 4; l++) {
            const int k = 4 * u + l;
            const uint32_t qhb = b[32 + k / 2];
            const uint32_t nib = k & 1 ? qhb >> 4 : qhb & 15u;
            iq1_grid8(b[k] | (nib & 7u) << 8, nib & 8u, o.q + 2 * l);
        }
        const uint32_t sw = ld16(b + 48 + 2 * (u / 2));
        for (int k = 0; k < 2; k++) {
            const int h = 2 * u + k;
            o.sc[k] = 2 * (int)((sw >> (3 * (h % 4))) & 7u) + 1;
        }
        o.mn[0] = o.mn[1] = 0;
    }
};

template <> struct qtype<STRATA_TYPE_IQ4_XS> {
    QT_HEAD(256, 136, STRATA_TYPE_Q8_K, false, false)
    static HD void factors(const uint8_t *b, float &d, float &dmin) { d = h2f(ld16(b)); dmin = 0.0f; }
    static HD void unit(const uint8_t *b, int u, unit_q &o)
    {
        nibbles32_table(b + 8 + 16 * u, o, 0);
        const int ls = (int)((b[4 + u / 2] >> (4 * (u & 1))) & 15u) | (int)((ld16(b + 2) >> (2 * u)) & 3u) << 4;
        o.sc[0] = o.sc[1] = ls - 32;
        o.mn[0] = o.mn[1] = 0;
    }
};

// 32 bits from a 2-aligned address as two halves.
__device__ __forceinline__ uint32_t ld32_h(const uint8_t *p)
{
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

// Decoders of blocks staged in shared memory from a 16-byte aligned row (mv.cu): the values of
// unit() and factors() through aligned loads where the format keeps its fields aligned (Q4_K and
// Q5_K blocks of 144 and 176 bytes stay 16-aligned, Q8_0's and Q6_K's of 34 and 210 bytes
// 2-aligned). ld32 takes any address (two words and a funnel shift, generic 64-bit addressing):
// about 70 instructions for a Q4_K unit's 32 nibbles against 20 here. The other types: ON false.
template <int T> struct staged {
    static constexpr bool ON = false;
    static __device__ void factors(const uint8_t *, float &, float &) {}
    static __device__ void unit(const uint8_t *, int, unit_q &) {}
};

// The 32 bytes at p (16-aligned) as eight words.
__device__ __forceinline__ void ld256(const uint8_t *p, uint32_t *w)
{
    const uint4 v0 = ((const uint4 *)p)[0], v1 = ((const uint4 *)p)[1];
    w[0] = v0.x, w[1] = v0.y, w[2] = v0.z, w[3] = v0.w, w[4] = v1.x, w[5] = v1.y, w[6] = v1.z, w[7] = v1.w;
}

// Unit u's scale and min of a Q4_K/Q5_K block b (4-aligned) from its 12 packed bytes as three
// words (k_scale_min's values).
__device__ __forceinline__ void k_unit_scales(const uint8_t *b, int u, unit_q &o)
{
    const uint32_t s0 = *(const uint32_t *)(b + 4), s1 = *(const uint32_t *)(b + 8), s2 = *(const uint32_t *)(b + 12);
    const int sh = 8 * (u & 3);
    int sc, mn;
    if (u < 4) {
        sc = (int)(s0 >> sh & 63u);
        mn = (int)(s1 >> sh & 63u);
    } else {
        sc = (int)((s2 >> sh & 15u) | (s0 >> sh >> 6 & 3u) << 4);
        mn = (int)((s2 >> sh >> 4 & 15u) | (s1 >> sh >> 6 & 3u) << 4);
    }
    o.sc[0] = o.sc[1] = sc;
    o.mn[0] = o.mn[1] = mn;
}

template <> struct staged<STRATA_TYPE_Q4_K> {
    static constexpr bool ON = true;
    static __device__ __forceinline__ void factors(const uint8_t *b, float &d, float &dmin)
    {
        const uint32_t w = *(const uint32_t *)b;
        d = h2f(w & 0xffffu);
        dmin = h2f(w >> 16);
    }
    static __device__ __forceinline__ void unit(const uint8_t *b, int u, unit_q &o)
    {
        uint32_t w[8];
        ld256(b + 16 + 32 * (u >> 1), w);
        const int shift = 4 * (u & 1);
#pragma unroll
        for (int i = 0; i < 8; i++) o.q[i] = (int)((w[i] >> shift) & 0x0f0f0f0fu);
        k_unit_scales(b, u, o);
    }
};

template <> struct staged<STRATA_TYPE_Q5_K> {
    static constexpr bool ON = true;
    static __device__ __forceinline__ void factors(const uint8_t *b, float &d, float &dmin)
    {
        staged<STRATA_TYPE_Q4_K>::factors(b, d, dmin);
    }
    static __device__ __forceinline__ void unit(const uint8_t *b, int u, unit_q &o)
    {
        uint32_t w[8], h[8];
        ld256(b + 48 + 32 * (u >> 1), w);
        ld256(b + 16, h);
        const int shift = 4 * (u & 1);
#pragma unroll
        for (int i = 0; i < 8; i++) o.q[i] = (int)(((w[i] >> shift) & 0x0f0f0f0fu) | ((h[i] >> u) & 0x01010101u) << 4);
        k_unit_scales(b, u, o);
    }
};

template <> struct staged<STRATA_TYPE_Q8_0> {
    static constexpr bool ON = true;
    static __device__ __forceinline__ void factors(const uint8_t *b, float &d, float &dmin)
    {
        d = h2f(*(const uint16_t *)b);
        dmin = 0.0f;
    }
    static __device__ __forceinline__ void unit(const uint8_t *b, int, unit_q &o)
    {
#pragma unroll
        for (int i = 0; i < 8; i++) o.q[i] = (int)ld32_h(b + 2 + 4 * i);
        o.sc[0] = o.sc[1] = 1;
        o.mn[0] = o.mn[1] = 0;
    }
};

// Q6_K blocks of 210 bytes stay 2-aligned.
template <> struct staged<STRATA_TYPE_Q6_K> {
    static constexpr bool ON = true;
    static __device__ __forceinline__ void factors(const uint8_t *b, float &d, float &dmin)
    {
        d = h2f(*(const uint16_t *)(b + 208));
        dmin = 0.0f;
    }
    static __device__ __forceinline__ void unit(const uint8_t *b, int u, unit_q &o)
    {
        const int h = u >> 2, j = u & 3;
        const uint8_t *ql = b + 64 * h + 32 * (j & 1), *qh = b + 128 + 32 * h;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const uint32_t lo = (ld32_h(ql + 4 * i) >> (4 * (j >> 1))) & 0x0f0f0f0fu;
            const uint32_t hi = (ld32_h(qh + 4 * i) >> (2 * j)) & 0x03030303u;
            o.q[i] = (int)vsub4(lo | hi << 4, 0x20202020u);
        }
        const uint32_t s = *(const uint16_t *)(b + 192 + 2 * u);
        o.sc[0] = (int)(int8_t)(s & 0xffu);
        o.sc[1] = (int)(int8_t)(s >> 8);
        o.mn[0] = o.mn[1] = 0;
    }
};

// The quantized weight types with a kernel, as a list for dispatch switches.
#define STRATA_CUDA_QTYPES(X)                                                                  \
    X(Q8_0) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(IQ4_NL) X(MXFP4) X(Q2_K) X(Q3_K) X(Q4_K) X(Q5_K) \
    X(Q6_K) X(IQ2_XXS) X(IQ2_XS) X(IQ2_S) X(IQ3_XXS) X(IQ3_S) X(IQ1_S) X(IQ1_M) X(IQ4_XS)

// ---- dequantisation ------------------------------------------------------------------------------

// The CPU reference's formula per type (ref.c for Q8_0 and the K-quants it holds, ref_lowbit.c
// for the others), with the same float roundings.
template <int T>
HD void dequant_unit(const uint8_t *blk, int u, float *out)
{
    using Q = qtype<T>;
    float d, dmin;
    Q::factors(blk, d, dmin);
    unit_q o;
    Q::unit(blk, u, o);
    for (int i = 0; i < 32; i++) {
        const int q = (int)(int8_t)((uint32_t)o.q[i / 4] >> (8 * (i % 4)));
        const int h = i / 16;
        float v;
        if (T == STRATA_TYPE_Q8_0) {
            v = fmul_rn(d, (float)q);
        } else if (T == STRATA_TYPE_Q4_K || T == STRATA_TYPE_Q5_K) {
            v = fsub_rn(fmul_rn(fmul_rn(d, (float)o.sc[h]), (float)q), fmul_rn(dmin, (float)o.mn[h]));
        } else if (T == STRATA_TYPE_Q6_K) {
            v = fmul_rn(fmul_rn(d, (float)o.sc[h]), (float)q);
        } else {
            v = fsub_rn(fmul_rn(d, (float)(o.sc[h] * q)), fmul_rn(dmin, (float)o.mn[h]));
        }
        out[i] = v;
    }
}

#endif
