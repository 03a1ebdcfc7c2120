// Random valid blocks of the IQ formats, IQ4_NL/IQ4_XS and MXFP4 for tests, benchmarks and
// synthetic models.
//
// Every code field of these formats is valid at any bit pattern (grid indices cover their whole
// grids, sign and scale fields all their values), so the codes are uniform random bytes and
// every kernel path is exercised. The block scale is then chosen per block: the block is
// decoded with a unit scale, its RMS measured, and d set to std / RMS times a log-normal jitter
// (sigma 0.25) that mimics the spread of scales in real models. MXFP4's scale is a power of two
// (its E8M0 exponent), rounded from that target in log2.
#include <math.h>
#include <string.h>

#include "quant/fp16.h"
#include "quant/lowbit.h"
#include "util/log.h"

#define D_JITTER 0.25  // sigma of log(d) across blocks

static void fill_random_bytes(uint64_t *rng, uint8_t *dst, size_t len)
{
    while (len) {
        uint64_t r = strata_rng_next(rng);
        size_t k = len < 8 ? len : 8;
        memcpy(dst, &r, k);
        dst += k;
        len -= k;
    }
}

// Where each format keeps its block scale.
enum scale_kind { SCALE_F16_AT_0, SCALE_IQ1M, SCALE_E8M0 };

static enum scale_kind scale_kind_of(uint32_t type)
{
    return type == STRATA_TYPE_IQ1_M ? SCALE_IQ1M : type == STRATA_TYPE_MXFP4 ? SCALE_E8M0 : SCALE_F16_AT_0;
}

static void set_iq1m_d(uint8_t *blk, uint16_t h)
{
    uint8_t *sc = blk + 48;  // four little-endian uint16: the top nibble of each holds 4 bits of d
    for (int k = 0; k < 4; k++) sc[2 * k + 1] = (uint8_t)((sc[2 * k + 1] & 0x0f) | ((h >> (4 * k)) & 15) << 4);
}

static void set_scale(uint32_t type, uint8_t *blk, double d)
{
    switch (scale_kind_of(type)) {
    case SCALE_E8M0: {
        double e = round(log2(d)) + 128.0;
        blk[0] = (uint8_t)fmin(fmax(e, 2.0), 254.0);
        return;
    }
    case SCALE_IQ1M:
        set_iq1m_d(blk, strata_fp32_to_fp16((float)fmin(d, 65504.0)));
        return;
    default: {
        uint16_t h = strata_fp32_to_fp16((float)fmin(d, 65504.0));
        memcpy(blk, &h, 2);
    }
    }
}

int strata_lowbit_random(uint32_t type, uint64_t *rng, void *dst, int64_t n, float std)
{
    switch (type) {
    case STRATA_TYPE_IQ2_XXS: case STRATA_TYPE_IQ2_XS: case STRATA_TYPE_IQ2_S:
    case STRATA_TYPE_IQ3_XXS: case STRATA_TYPE_IQ3_S: case STRATA_TYPE_IQ1_S:
    case STRATA_TYPE_IQ1_M: case STRATA_TYPE_IQ4_NL: case STRATA_TYPE_IQ4_XS:
    case STRATA_TYPE_MXFP4:
        break;
    default:
        return STRATA_EUNSUP;
    }
    const struct strata_type_traits *tr = strata_type_traits(type);
    strata_dequant_fn dequant = strata_lowbit_dequant_ref(type);
    float values[QK_K];
    uint8_t *blk = dst;
    for (int64_t b = 0; b < n / tr->block_size; b++, blk += tr->type_size) {
        fill_random_bytes(rng, blk, tr->type_size);
        set_scale(type, blk, 1.0);
        dequant(blk, values, tr->block_size);
        double ss = 0.0;
        for (uint32_t i = 0; i < tr->block_size; i++) ss += (double)values[i] * values[i];
        double rms = sqrt(ss / tr->block_size);
        double jitter = exp(D_JITTER * strata_rng_normal(rng) - D_JITTER * D_JITTER / 2);
        set_scale(type, blk, rms > 0.0 ? std / rms * jitter : 0.0);
    }
    return 0;
}
