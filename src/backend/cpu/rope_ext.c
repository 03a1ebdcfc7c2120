// RoPE with YaRN in ggml's order of operations (see rope_ext.h). Every fused multiply-add is an
// explicit fmaf where the x86 ggml-cpu builds contract one (they compile ops.cpp with FMA and
// GCC's default contraction, which fuses the first product of a*b + c*d).
#include "backend/cpu/rope_ext.h"

#include <math.h>

static float yarn_ramp(float low, float high, int i0)
{
    const float y = (float)(i0 / 2 - low) / (high - low > 0.001f ? high - low : 0.001f);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

float strata_rope_ext_mscale(const struct strata_rope_ext *p)
{
    float mscale = p->attn_factor;
    if (p->ext_factor != 0.0f) mscale *= fmaf(0.1f, logf(1.0f / p->freq_scale), 1.0f);
    return mscale;
}

void strata_rope_ext_cache(float *cs, const struct strata_rope_ext *p, int pos)
{
    const float mscale = strata_rope_ext_mscale(p);
    float theta_extrap = (float)pos;
    for (uint32_t i0 = 0; i0 < p->n_dims; i0 += 2) {
        const float theta_interp = p->freq_scale * theta_extrap;
        float theta = theta_interp;
        if (p->ext_factor != 0.0f) {
            const float ramp_mix = yarn_ramp(p->corr_dims[0], p->corr_dims[1], (int)i0) * p->ext_factor;
            theta = fmaf(theta_interp, 1.0f - ramp_mix, theta_extrap * ramp_mix);
        }
        cs[i0] = cosf(theta) * mscale;
        cs[i0 + 1] = sinf(theta) * mscale;
        theta_extrap *= p->theta_scale;
    }
}

void strata_rope_ext_apply(float *x, const float *cs, const struct strata_rope_ext *p)
{
    // NORM pairs (2i, 2i+1); NEOX pairs (i, i + n/2)
    const uint32_t half = p->n_dims / 2;
    const uint32_t off = p->mode == STRATA_ROPE_NEOX ? half : 1;
    for (uint32_t i = 0; i < half; i++) {
        const uint32_t a = p->mode == STRATA_ROPE_NEOX ? i : 2 * i;
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[a], x1 = x[a + off];
        x[a] = fmaf(x0, c, -(x1 * s));
        x[a + off] = fmaf(x0, s, x1 * c);
    }
}
