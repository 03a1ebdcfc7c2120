// RoPE with YaRN in ggml's order of operations (see rope_ext.h). Every fused multiply-add is an
// explicit fmaf where the x86 ggml-cpu builds contract one (they compile ops.cpp with FMA and
// GCC's default contraction, which fuses the first product of a*b + c*d); everything llama.cpp
// computes on the host (the attention factor, the kq scale) is plain float arithmetic, as
// libllama and libggml-base are built without FMA.
#include "backend/cpu/rope_ext.h"

#include <math.h>

#include "util/log.h"

// ggml_rope_yarn_corr_dim: the dim at which a pair turns n_rot times over n_ctx_orig positions.
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base)
{
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

static float get_mscale(float scale, float mscale)
{
    return scale <= 1.0f ? 1.0f : (0.1f * mscale * logf(scale) + 1.0f);
}

void strata_rope_ext_init(struct strata_rope_ext *p, uint32_t n_dims, enum strata_rope_mode mode, float freq_base,
                          const struct strata_rope_scaling *sc, uint32_t n_ctx_train)
{
    STRATA_ASSERT(n_dims % 2 == 0 && n_dims > 0);
    *p = (struct strata_rope_ext){.n_dims = n_dims, .mode = mode, .freq_base = freq_base, .freq_scale = 1.0f,
                                  .attn_factor = 1.0f};
    const bool scaled = sc && sc->factor > 0.0f;
    if (scaled) p->freq_scale = 1.0f / sc->factor;
    if (sc && sc->yarn && scaled) {
        // llama_context: ext_factor 1 for YaRN; the attention factor that, multiplied by
        // rope_yarn's own 1 + 0.1 ln(factor), gives get_mscale(mscale) / get_mscale(all dims).
        p->ext_factor = 1.0f;
        const float factor = 1.0f / p->freq_scale;
        float af;
        if (sc->yarn_log_mul != 0.0f) {
            const float mscale_all_dims = sc->yarn_log_mul;
            const float mscale = sc->mscale_all_dims_fix && mscale_all_dims != 1.0f ? mscale_all_dims : 1.0f;
            af = get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dims);
        } else {
            af = get_mscale(factor, 1.0f);
        }
        af *= 1.0f / (1.0f + 0.1f * logf(factor));
        p->attn_factor = af;
    }
    if (sc && sc->attn_factor != 0.0f) p->attn_factor *= sc->attn_factor;
    const uint32_t n_ctx_orig = sc && sc->n_ctx_orig ? sc->n_ctx_orig : n_ctx_train;
    // ggml_rope_yarn_corr_dims with llama.cpp's beta_fast 32, beta_slow 1
    const float start = floorf(yarn_corr_dim((int)n_dims, (int)n_ctx_orig, 32.0f, freq_base));
    const float end = ceilf(yarn_corr_dim((int)n_dims, (int)n_ctx_orig, 1.0f, freq_base));
    p->corr_dims[0] = start > 0.0f ? start : 0.0f;
    p->corr_dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
    p->theta_scale = powf(freq_base, -2.0f / (float)n_dims);
}

static float yarn_ramp(float low, float high, int i0)
{
    const float y = (float)(i0 / 2 - low) / (high - low > 0.001f ? high - low : 0.001f);
    return 1.0f - fminf(1.0f, fmaxf(0.0f, y));
}

void strata_rope_ext_cache(float *cs, const struct strata_rope_ext *p, int pos)
{
    float theta_extrap = (float)pos;
    for (uint32_t i0 = 0; i0 < p->n_dims; i0 += 2) {
        const float theta_interp = p->freq_scale * theta_extrap;
        float theta = theta_interp;
        float mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) {
            const float ramp_mix = yarn_ramp(p->corr_dims[0], p->corr_dims[1], (int)i0) * p->ext_factor;
            theta = fmaf(theta_interp, 1.0f - ramp_mix, theta_extrap * ramp_mix);
            mscale *= fmaf(0.1f, logf(1.0f / p->freq_scale), 1.0f);
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

float strata_rope_mla_kq_scale(const struct strata_rope_ext *p, float yarn_log_mul, uint32_t head_k)
{
    // deepseek2.cpp: cancel rope_yarn's factor from attn_factor, then scale by the log multiplier
    const float l = logf(1.0f / p->freq_scale);
    const float attn_factor_org = p->attn_factor * (1.0f + 0.1f * l);
    const float mscale = attn_factor_org * (1.0f + 0.1f * yarn_log_mul * l);
    return 1.0f * mscale * mscale / sqrtf((float)head_k);
}
