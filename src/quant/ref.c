// Reference dequantisation and activation rounding of the formats strata computes with. Weight
// types here: F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K (the low-bit ones are decoded in
// ref_lowbit.c); activation formats: F32, F16, BF16, Q8_0, Q8_1, Q8_K. Block layouts are in
// blocks.h and lowbit.h. The dot products that consume these formats belong to the backends
// (backend/cpu/dot_ref.c is the scalar one every other variant is tested against).
//
// Activation rounding reproduces what llama.cpp's x86 build computes bit for bit (every SIMD
// variant must match these bytes).
#include <math.h>
#include <string.h>

#include "quant/fp16.h"
#include "quant/lowbit.h"

// ---- helpers --------------------------------------------------------------------------------

// What vcvtps2dq then two saturating packs (ggml's x86 quantize_row_q8_0) make of an already
// rounded float: NaN and values outside int32 become INT32_MIN, which saturates to -128.
static int8_t saturate_to_int8(float rounded)
{
    if (!(fabsf(rounded) < 2147483648.0f)) return -128;
    if (rounded > 127.0f) return 127;
    if (rounded < -128.0f) return -128;
    return (int8_t)rounded;
}

// ---- dequantisation -------------------------------------------------------------------------

static void dequant_f32(const void *src, float *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void dequant_f16(const void *src, float *dst, int64_t n)
{
    const uint16_t *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = strata_fp16_to_fp32(h[i]);
}

static void dequant_bf16(const void *src, float *dst, int64_t n)
{
    const uint16_t *b = src;
    for (int64_t i = 0; i < n; i++) dst[i] = strata_bf16_to_fp32(b[i]);
}

static void dequant_q8_0(const void *src, float *dst, int64_t n)
{
    const struct block_q8_0 *blk = src;
    for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
        float d = strata_fp16_to_fp32(blk[b].d);
        for (int i = 0; i < QK8_0; i++) dst[i] = d * blk[b].qs[i];
    }
}

static void dequant_q4_k(const void *src, float *dst, int64_t n)
{
    const struct block_q4_k *blk = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = strata_fp16_to_fp32(blk[b].d), dmin = strata_fp16_to_fp32(blk[b].dmin);
        uint64_t scales, mins;
        strata_k_scales(blk[b].scales, &scales, &mins);
        for (int sub = 0; sub < 8; sub++, dst += 32) {
            float scale = d * (float)(uint8_t)(scales >> (8 * sub));
            float min = dmin * (float)(uint8_t)(mins >> (8 * sub));
            const uint8_t *qs = blk[b].qs + 32 * (sub / 2);
            int shift = 4 * (sub & 1);
            for (int i = 0; i < 32; i++) dst[i] = scale * (float)((qs[i] >> shift) & 0xf) - min;
        }
    }
}

static void dequant_q5_k(const void *src, float *dst, int64_t n)
{
    const struct block_q5_k *blk = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        float d = strata_fp16_to_fp32(blk[b].d), dmin = strata_fp16_to_fp32(blk[b].dmin);
        uint64_t scales, mins;
        strata_k_scales(blk[b].scales, &scales, &mins);
        for (int sub = 0; sub < 8; sub++, dst += 32) {
            float scale = d * (float)(uint8_t)(scales >> (8 * sub));
            float min = dmin * (float)(uint8_t)(mins >> (8 * sub));
            const uint8_t *qs = blk[b].qs + 32 * (sub / 2);
            int shift = 4 * (sub & 1);
            for (int i = 0; i < 32; i++) {
                int q = ((qs[i] >> shift) & 0xf) | (((blk[b].qh[i] >> sub) & 1) << 4);
                dst[i] = scale * (float)q - min;
            }
        }
    }
}

static void dequant_q6_k(const void *src, float *dst, int64_t n)
{
    const struct block_q6_k *blk = src;
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        float d = strata_fp16_to_fp32(blk[b].d);
        for (int i = 0; i < QK_K; i++) {
            float scale = d * (float)blk[b].scales[i / 16];
            dst[i] = scale * (float)(strata_q6_k_quant(&blk[b], i) - 32);
        }
    }
}

// ---- activation rounding --------------------------------------------------------------------

static void quantize_f32(const float *src, void *dst, int64_t n)
{
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void quantize_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = strata_fp32_to_fp16(src[i]);
}

static void quantize_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *b = dst;
    for (int64_t i = 0; i < n; i++) b[i] = strata_fp32_to_bf16(src[i]);
}

// ggml's x86 quantize_row_q8_0: d = amax / 127 stored as f16, q = round_even(x * (127 / amax)).
// Multiplying by 127 / amax and rounding half to even is what the AVX path does; the portable
// ggml reference (x * (1 / d), roundf: half away from zero) differs only on ties and last-ulp
// cases, which random data almost never hits but values like k / 2 hit all the time.
static void quantize_q8_0(const float *src, void *dst, int64_t n)
{
    struct block_q8_0 *blk = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        float amax = 0.0f;
        for (int i = 0; i < QK8_0; i++) amax = fmaxf(amax, fabsf(src[i]));
        blk[b].d = strata_fp32_to_fp16(amax / 127.0f);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int i = 0; i < QK8_0; i++) {
            float scaled = src[i] * id;
            float rounded = fabsf(scaled) < 4194304.0f ? (float)strata_nearest_int(scaled) : scaled;
            blk[b].qs[i] = saturate_to_int8(rounded);
        }
    }
}

// ggml's quantize_row_q8_K (the x86 build uses the portable one): the element of largest
// magnitude, first one on ties, maps to -127, so d = 1 / (-127 / max) carries the opposite sign
// of that element. All-zero blocks get d = 0 (ggml leaves their bsums unwritten; we zero them).
static void quantize_q8_k(const float *src, void *dst, int64_t n)
{
    struct block_q8_k *blk = dst;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int i = 0; i < QK_K; i++) {
            if (fabsf(src[i]) > amax) {
                amax = fabsf(src[i]);
                max = src[i];
            }
        }
        if (amax == 0.0f) {
            memset(&blk[b], 0, sizeof(blk[b]));
            continue;
        }
        float iscale = -127.0f / max;
        for (int i = 0; i < QK_K; i++) {
            int32_t q = strata_nearest_int(iscale * src[i]);
            if (q > 127) q = 127;
            blk[b].qs[i] = (int8_t)(uint8_t)(q & 0xff);  // ggml's int -> int8 store keeps the low byte
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int i = 0; i < 16; i++) sum += blk[b].qs[16 * g + i];
            blk[b].bsums[g] = (int16_t)sum;
        }
        blk[b].d = 1.0f / iscale;
    }
}

// ggml's x86 quantize_row_q8_1: Q8_0's rounding (d = amax / 127 as f16, q = round_even(x * 127 /
// amax)) plus s = f16(d * sum q) with the unrounded d.
static void quantize_q8_1(const float *src, void *dst, int64_t n)
{
    struct block_q8_1 *blk = dst;
    for (int64_t b = 0; b < n / 32; b++, src += 32) {
        struct block_q8_0 q0;
        quantize_q8_0(src, &q0, 32);
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(src[i]));
        int32_t qsum = 0;
        for (int i = 0; i < 32; i++) qsum += q0.qs[i];
        blk[b].d = q0.d;
        blk[b].s = strata_fp32_to_fp16(amax / 127.0f * (float)qsum);
        memcpy(blk[b].qs, q0.qs, 32);
    }
}

// ---- lookups --------------------------------------------------------------------------------

static const strata_dequant_fn g_dequant[STRATA_TYPE_COUNT] = {
    [STRATA_TYPE_F32] = dequant_f32,
    [STRATA_TYPE_F16] = dequant_f16,
    [STRATA_TYPE_BF16] = dequant_bf16,
    [STRATA_TYPE_Q8_0] = dequant_q8_0,
    [STRATA_TYPE_Q4_K] = dequant_q4_k,
    [STRATA_TYPE_Q5_K] = dequant_q5_k,
    [STRATA_TYPE_Q6_K] = dequant_q6_k,
};

static const strata_quantize_fn g_quantize[STRATA_TYPE_COUNT] = {
    [STRATA_TYPE_F32] = quantize_f32,
    [STRATA_TYPE_F16] = quantize_f16,
    [STRATA_TYPE_BF16] = quantize_bf16,
    [STRATA_TYPE_Q8_0] = quantize_q8_0,
    [STRATA_TYPE_Q8_1] = quantize_q8_1,
    [STRATA_TYPE_Q8_K] = quantize_q8_k,
};

strata_dequant_fn strata_dequant_ref(uint32_t type)
{
    if (type >= STRATA_TYPE_COUNT) return NULL;
    return g_dequant[type] ? g_dequant[type] : strata_lowbit_dequant_ref(type);
}

strata_quantize_fn strata_quantize_ref(uint32_t type)
{
    return type < STRATA_TYPE_COUNT ? g_quantize[type] : NULL;
}

bool strata_type_computable(uint32_t type)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    return tr && strata_dequant_ref(type) && strata_quantize_ref(tr->vec_dot_type);
}
