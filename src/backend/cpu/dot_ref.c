// Scalar reference dot products of every type strata computes with: F32, F16, BF16, Q8_0, Q4_K,
// Q5_K, Q6_K, and the low-bit formats of quant/lowbit.h (activations in Q8_0 or Q8_1 blocks of
// 32, or Q8_K blocks of 256), with the scalar table of the CPU backend.
//
// Each block's integer sums are computed exactly, scaled with the same float products as ggml,
// and accumulated in double, so this is the most accurate of the variants; the SIMD ones differ
// only by float accumulation order and are tested against it. The low-bit formats go through
// quant's reference decoder (exact integers per block).
#include "backend/cpu/kernels_impl.h"
#include "quant/fp16.h"

// ---- dot products ---------------------------------------------------------------------------

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)x[i] * y[i];
    *s = (float)sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)strata_fp16_to_fp32(x[i]) * strata_fp16_to_fp32(y[i]);
    *s = (float)sum;
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)strata_bf16_to_fp32(x[i]) * strata_bf16_to_fp32(y[i]);
    *s = (float)sum;
}

static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q8_0 *x = w, *y = a;
    double sum = 0.0;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int32_t isum = 0;
        for (int i = 0; i < QK8_0; i++) isum += x[b].qs[i] * y[b].qs[i];
        float d = strata_fp16_to_fp32(x[b].d) * strata_fp16_to_fp32(y[b].d);
        sum += (double)d * isum;
    }
    *s = (float)sum;
}

// Q4_K and Q5_K share this: quants[] holds the 256 unsigned quants of one block in element order.
// The min term uses the activation's bsums (two per 32-element sub-block), as every variant does.
static double k_block_dot(const uint8_t *quants, uint16_t d16, uint16_t dmin16,
                          const uint8_t *packed_scales, const struct block_q8_k *y)
{
    uint64_t scales, mins;
    strata_k_scales(packed_scales, &scales, &mins);
    int32_t isum = 0, imin = 0;
    for (int sub = 0; sub < 8; sub++) {
        int32_t part = 0;
        for (int i = 0; i < 32; i++) part += quants[32 * sub + i] * y->qs[32 * sub + i];
        isum += part * (int32_t)(uint8_t)(scales >> (8 * sub));
        imin += (y->bsums[2 * sub] + y->bsums[2 * sub + 1]) * (int32_t)(uint8_t)(mins >> (8 * sub));
    }
    float d = strata_fp16_to_fp32(d16) * y->d;
    float dmin = strata_fp16_to_fp32(dmin16) * y->d;
    return (double)d * isum - (double)dmin * imin;
}

static void vec_dot_q4_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q4_k *x = w;
    const struct block_q8_k *y = a;
    double sum = 0.0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t quants[QK_K];
        for (int i = 0; i < QK_K; i++)
            quants[i] = (x[b].qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 0xf;
        sum += k_block_dot(quants, x[b].d, x[b].dmin, x[b].scales, &y[b]);
    }
    *s = (float)sum;
}

static void vec_dot_q5_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q5_k *x = w;
    const struct block_q8_k *y = a;
    double sum = 0.0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t quants[QK_K];
        for (int i = 0; i < QK_K; i++) {
            int lo = (x[b].qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 0xf;
            quants[i] = (uint8_t)(lo | ((x[b].qh[i % 32] >> (i / 32)) & 1) << 4);
        }
        sum += k_block_dot(quants, x[b].d, x[b].dmin, x[b].scales, &y[b]);
    }
    *s = (float)sum;
}

static void vec_dot_q6_k(int64_t n, float *s, const void *w, const void *a)
{
    const struct block_q6_k *x = w;
    const struct block_q8_k *y = a;
    double sum = 0.0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int32_t isum = 0;
        for (int sub = 0; sub < 16; sub++) {
            int32_t part = 0;
            for (int i = 16 * sub; i < 16 * sub + 16; i++)
                part += (strata_q6_k_quant(&x[b], i) - 32) * y[b].qs[i];
            isum += part * x[b].scales[sub];
        }
        float d = strata_fp16_to_fp32(x[b].d) * y[b].d;
        sum += (double)d * isum;
    }
    *s = (float)sum;
}

// Blocks of 32 against Q8_0 (Q8_1 when `q8_1`: the min term uses the activation's s = d sum q).
static void dot_32(uint32_t type, int64_t n, float *s, const void *w, const void *a, int q8_1)
{
    const uint32_t type_size = strata_type_traits(type)->type_size;
    const uint8_t *blk = w;
    double sum = 0.0;
    struct strata_lowbit_decoded o;
    for (int64_t b = 0; b < n / 32; b++, blk += type_size) {
        strata_lowbit_decode(type, blk, &o);
        const int8_t *aq;
        float ad, as = 0.0f;
        if (q8_1) {
            const struct block_q8_1 *y = (const struct block_q8_1 *)a + b;
            aq = y->qs, ad = strata_fp16_to_fp32(y->d), as = strata_fp16_to_fp32(y->s);
        } else {
            const struct block_q8_0 *y = (const struct block_q8_0 *)a + b;
            aq = y->qs, ad = strata_fp16_to_fp32(y->d);
        }
        int32_t isum = 0;
        for (int i = 0; i < 32; i++) isum += o.q[i] * aq[i];
        sum += (double)(o.d * ad) * isum - (double)o.dmin * o.min[0] * as;
    }
    *s = (float)sum;
}

// Blocks of 256 against Q8_K; the min term uses the activation's bsums.
static void dot_256(uint32_t type, int64_t n, float *s, const void *w, const void *a)
{
    const uint32_t type_size = strata_type_traits(type)->type_size;
    const uint8_t *blk = w;
    const struct block_q8_k *y = a;
    double sum = 0.0;
    struct strata_lowbit_decoded o;
    for (int64_t b = 0; b < n / QK_K; b++, blk += type_size) {
        strata_lowbit_decode(type, blk, &o);
        int sub_len = QK_K / o.n_sub;
        int64_t isum = 0, imin = 0;
        for (int j = 0; j < o.n_sub; j++) {
            int32_t part = 0, bsum = 0;
            for (int i = j * sub_len; i < (j + 1) * sub_len; i++) part += o.q[i] * y[b].qs[i];
            for (int k = j * sub_len / 16; k < (j + 1) * sub_len / 16; k++) bsum += y[b].bsums[k];
            isum += (int64_t)part * o.scale[j];
            imin += (int64_t)bsum * o.min[j];
        }
        sum += (double)(o.d * y[b].d) * (double)isum - (double)(o.dmin * y[b].d) * (double)imin;
    }
    *s = (float)sum;
}

// ---- low-bit wrappers -----------------------------------------------------------------------

#define LOWBIT_KERNELS(name, TYPE, dot_call)                                          \
    static void vec_dot_##name(int64_t n, float *s, const void *w, const void *a)     \
    {                                                                                 \
        dot_call;                                                                     \
    }

LOWBIT_KERNELS(q4_0, Q4_0, dot_32(STRATA_TYPE_Q4_0, n, s, w, a, 0))
LOWBIT_KERNELS(q4_1, Q4_1, dot_32(STRATA_TYPE_Q4_1, n, s, w, a, 1))
LOWBIT_KERNELS(q5_0, Q5_0, dot_32(STRATA_TYPE_Q5_0, n, s, w, a, 0))
LOWBIT_KERNELS(q5_1, Q5_1, dot_32(STRATA_TYPE_Q5_1, n, s, w, a, 1))
LOWBIT_KERNELS(mxfp4, MXFP4, dot_32(STRATA_TYPE_MXFP4, n, s, w, a, 0))
LOWBIT_KERNELS(iq4_nl, IQ4_NL, dot_32(STRATA_TYPE_IQ4_NL, n, s, w, a, 0))
LOWBIT_KERNELS(q2_k, Q2_K, dot_256(STRATA_TYPE_Q2_K, n, s, w, a))
LOWBIT_KERNELS(q3_k, Q3_K, dot_256(STRATA_TYPE_Q3_K, n, s, w, a))
LOWBIT_KERNELS(iq2_xxs, IQ2_XXS, dot_256(STRATA_TYPE_IQ2_XXS, n, s, w, a))
LOWBIT_KERNELS(iq2_xs, IQ2_XS, dot_256(STRATA_TYPE_IQ2_XS, n, s, w, a))
LOWBIT_KERNELS(iq2_s, IQ2_S, dot_256(STRATA_TYPE_IQ2_S, n, s, w, a))
LOWBIT_KERNELS(iq3_xxs, IQ3_XXS, dot_256(STRATA_TYPE_IQ3_XXS, n, s, w, a))
LOWBIT_KERNELS(iq3_s, IQ3_S, dot_256(STRATA_TYPE_IQ3_S, n, s, w, a))
LOWBIT_KERNELS(iq1_s, IQ1_S, dot_256(STRATA_TYPE_IQ1_S, n, s, w, a))
LOWBIT_KERNELS(iq1_m, IQ1_M, dot_256(STRATA_TYPE_IQ1_M, n, s, w, a))
LOWBIT_KERNELS(iq4_xs, IQ4_XS, dot_256(STRATA_TYPE_IQ4_XS, n, s, w, a))

// Dequantisation and activation rounding are quant/'s references, filled in by dispatch.c.
const struct strata_kernels strata_kernels_scalar_table = {
    .isa = STRATA_ISA_SCALAR,
    .vec_dot = {
        [STRATA_TYPE_F32] = vec_dot_f32,
        [STRATA_TYPE_F16] = vec_dot_f16,
        [STRATA_TYPE_BF16] = vec_dot_bf16,
        [STRATA_TYPE_Q8_0] = vec_dot_q8_0,
        [STRATA_TYPE_Q4_K] = vec_dot_q4_k,
        [STRATA_TYPE_Q5_K] = vec_dot_q5_k,
        [STRATA_TYPE_Q6_K] = vec_dot_q6_k,
        STRATA_LOWBIT_ENTRIES(vec_dot)
    },
};
