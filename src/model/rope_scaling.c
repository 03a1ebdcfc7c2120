// RoPE factors from the GGUF's rope keys, as llama.cpp's host code computes them (see
// rope_scaling.h).
#include "model/rope_scaling.h"

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

float strata_rope_mla_kq_scale(const struct strata_rope_ext *p, float yarn_log_mul, uint32_t head_k)
{
    // deepseek2.cpp: cancel rope_yarn's factor from attn_factor, then scale by the log multiplier
    const float l = logf(1.0f / p->freq_scale);
    const float attn_factor_org = p->attn_factor * (1.0f + 0.1f * l);
    const float mscale = attn_factor_org * (1.0f + 0.1f * yarn_log_mul * l);
    return 1.0f * mscale * mscale / sqrtf((float)head_k);
}
