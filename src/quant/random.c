// Synthetic data: the splitmix64 generator strata uses everywhere, and random but valid blocks of
// each weight format for tests, benchmarks and synthetic models.
//
// Quantized blocks get uniformly random quants, sub-block scales and mins (every bit pattern is a
// valid block, so random bytes exercise every code path of a kernel), then positive f16 block
// scales chosen so the dequantised values have the requested standard deviation on average: for
// each format, `std_per_d` below is the standard deviation of the values when d = 1, derived
// from the uniform distributions of the fields. A log-normal jitter (sigma 0.25) on d per block
// mimics the spread of scales in real models. Where a format has a min (or an offset), it is
// tied to d so that values are centred on zero on average.
#include <math.h>
#include <string.h>

#include "quant/fp16.h"
#include "quant/lowbit.h"
#include "quant/quant.h"
#include "util/log.h"

#define D_JITTER 0.25  // sigma of log(d) across blocks

struct random_layout {
    uint32_t type;
    int d_offset;        // byte offset of the f16 block scale
    int min_offset;      // byte offset of the f16 min / dmin, -1 if none
    double min_per_d;    // that field = min_per_d * d (centres the values)
    double std_per_d;    // std of the dequantised values at d = 1
};

// Offsets from the block layouts (ggml's): Q2_K = scales[16] qs[64] d dmin; Q3_K = hmask[32]
// qs[64] scales[12] d; Q6_K = ql[128] qh[64] scales[16] d; the others start with d (then m/dmin).
// std_per_d: Q4_0 E[(q-8)^2] = 21.5 -> 4.637; Q4_1 var(q) = 21.25 -> 4.610; Q5_0 85.5 -> 9.247;
// Q5_1 85.25 -> 9.233; Q8_0 q uniform in -127..127 -> 73.61; Q2_K (sc, m in 0..15, q in 0..3,
// dmin = 1.5 d): sqrt(77.5 * 1.25 + 2 * 2.25 * 21.25) = 13.87; Q3_K ((sc - 32) in -32..31,
// q in -4..3): sqrt(341.5 * 5.5) = 43.34; Q4_K (sc, m in 0..63, q in 0..15, dmin = 7.5 d):
// sqrt(1333.5 * 21.25 + 2 * 56.25 * 341.25) = 258.3; Q5_K (q in 0..31, dmin = 15.5 d):
// sqrt(1333.5 * 85.25 + 2 * 240.25 * 341.25) = 526.9; Q6_K (int8 scales, q - 32 in -32..31):
// sqrt(5461.5 * 341.5) = 1365.7.
static const struct random_layout g_layouts[] = {
    {STRATA_TYPE_Q4_0, 0, -1, 0.0, 4.637},
    {STRATA_TYPE_Q4_1, 0, 2, -7.5, 4.610},
    {STRATA_TYPE_Q5_0, 0, -1, 0.0, 9.247},
    {STRATA_TYPE_Q5_1, 0, 2, -15.5, 9.233},
    {STRATA_TYPE_Q8_0, 0, -1, 0.0, 73.61},
    {STRATA_TYPE_Q2_K, 80, 82, 1.5, 13.87},
    {STRATA_TYPE_Q3_K, 108, -1, 0.0, 43.34},
    {STRATA_TYPE_Q4_K, 0, 2, 7.5, 258.3},
    {STRATA_TYPE_Q5_K, 0, 2, 15.5, 526.9},
    {STRATA_TYPE_Q6_K, 208, -1, 0.0, 1365.7},
};

// ---- generator ------------------------------------------------------------------------------

uint64_t strata_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

float strata_rng_uniform(uint64_t *state)
{
    return (float)(strata_rng_next(state) >> 40) * (1.0f / 16777216.0f);  // 24 bits: exact
}

// Box-Muller with the cosine branch only, so each value costs two draws and no hidden state.
float strata_rng_normal(uint64_t *state)
{
    double u1 = ((double)(strata_rng_next(state) >> 11) + 1.0) * 0x1p-53;  // (0, 1]: log finite
    double u2 = (double)(strata_rng_next(state) >> 11) * 0x1p-53;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// ---- blocks ---------------------------------------------------------------------------------

static void fill_random_bytes(uint64_t *rng, uint8_t *dst, size_t len)
{
    while (len >= 8) {
        uint64_t r = strata_rng_next(rng);
        memcpy(dst, &r, 8);
        dst += 8;
        len -= 8;
    }
    if (len) {
        uint64_t r = strata_rng_next(rng);
        memcpy(dst, &r, len);
    }
}

static void put_f16(uint8_t *dst, double v)
{
    uint16_t h = strata_fp32_to_fp16((float)v);
    memcpy(dst, &h, 2);
}

static void random_blocks(const struct random_layout *lay, uint32_t type_size, uint64_t *rng,
                          uint8_t *dst, int64_t n_blocks, float std)
{
    double d_mean = std / (lay->std_per_d * exp(D_JITTER * D_JITTER / 2));
    for (int64_t b = 0; b < n_blocks; b++, dst += type_size) {
        fill_random_bytes(rng, dst, type_size);
        if (lay->type == STRATA_TYPE_Q8_0) {
            // ggml never writes -128 into Q8_0 (its quants are round(x / d) with d = amax / 127)
            for (int i = 0; i < 32; i++)
                if (dst[2 + i] == 0x80) dst[2 + i] = (uint8_t)(strata_rng_next(rng) & 0x7f);
        }
        double d = fmin(d_mean * exp(D_JITTER * strata_rng_normal(rng)), 65504.0);
        put_f16(dst + lay->d_offset, d);
        if (lay->min_offset >= 0) put_f16(dst + lay->min_offset, lay->min_per_d * d);
    }
}

int strata_quant_random(uint32_t type, uint64_t *rng, void *dst, int64_t n, float std)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    if (!tr) {
        strata_log_error("strata_quant_random: type id %u is not a tensor type", type);
        return STRATA_EARG;
    }
    if (n < 0 || n % tr->block_size || !(std >= 0.0f && std <= 1e30f)) {
        strata_log_error("strata_quant_random: %s n=%lld std=%g: n must be a multiple of %u and "
                         "std finite and >= 0", tr->name, (long long)n, std, tr->block_size);
        return STRATA_EARG;
    }
    if (type == STRATA_TYPE_F32 || type == STRATA_TYPE_F16 || type == STRATA_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float v = std * strata_rng_normal(rng);
            if (type == STRATA_TYPE_F32) {
                ((float *)dst)[i] = v;
            } else {
                uint16_t h = type == STRATA_TYPE_F16 ? strata_fp32_to_fp16(v) : strata_fp32_to_bf16(v);
                memcpy((uint8_t *)dst + 2 * i, &h, 2);
            }
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(g_layouts) / sizeof(g_layouts[0]); i++) {
        if (g_layouts[i].type != type) continue;
        random_blocks(&g_layouts[i], tr->type_size, rng, dst, n / tr->block_size, std);
        return 0;
    }
    int rc = strata_lowbit_random(type, rng, dst, n, std);
    if (rc != STRATA_EUNSUP) return rc;
    strata_log_error("strata_quant_random: cannot synthesise %s blocks yet", tr->name);
    return STRATA_EUNSUP;
}
