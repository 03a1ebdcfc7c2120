// RoPE with YaRN context scaling, in both pair layouts, computed as ggml's CPU backend does
// (rope_yarn and ggml_rope_cache_init in ggml-cpu/ops.cpp, the corrections of
// ggml_rope_yarn_corr_dims, and the attention factor llama.cpp's context derives from the GGUF's
// rope.scaling keys), so that rotated q and k are bit-identical to llama.cpp's.
//
// Angle of pair i at position p: theta_extrap = p * base^(-2i/n_dims), accumulated in float as
// ggml does (theta *= theta_scale); theta_interp = freq_scale * theta_extrap. With YaRN
// (ext_factor != 0) the pair mixes the two by a ramp over the correction dims and both cos and
// sin are scaled by attn_factor * (1 + 0.1 ln(1 / freq_scale)); without, theta = theta_interp
// and the scale is attn_factor.
//
// Layouts: NORM rotates adjacent pairs (2i, 2i+1) (deepseek2, deepseek32, glm-dsa, and
// glm-dsa's indexer); NEOX rotates (i, i + n_dims/2) (gpt-oss, deepseek32's indexer, the
// qwen/glm4moe families). The x86 builds of ggml-cpu contract the rotation's first product into
// a fused multiply-add; so does strata_rope_ext_apply.
#ifndef STRATA_ROPE_EXT_H
#define STRATA_ROPE_EXT_H

#include <stdbool.h>
#include <stdint.h>

enum strata_rope_mode { STRATA_ROPE_NORM, STRATA_ROPE_NEOX };

struct strata_rope_ext {
    uint32_t n_dims;           // rotated dims (even)
    enum strata_rope_mode mode;
    float freq_base;
    float freq_scale;          // 1 / rope.scaling.factor (1: no scaling)
    float ext_factor;          // 1 with YaRN, else 0
    float attn_factor;         // llama.cpp's cparams.yarn_attn_factor
    float corr_dims[2];        // YaRN ramp: first and last dim pair index it spans
    float theta_scale;         // base^(-2 / n_dims)
};

// How a GGUF scales its rope (the keys llama.cpp reads; all optional).
struct strata_rope_scaling {
    bool yarn;                 // rope.scaling.type == "yarn" (linear and none: no YaRN)
    float factor;              // rope.scaling.factor (0: none)
    uint32_t n_ctx_orig;       // rope.scaling.original_context_length (0: context_length)
    float yarn_log_mul;        // rope.scaling.yarn_log_multiplier / 0.1, as deepseek2/deepseek32
                               // load it (0: absent, or an architecture that ignores it)
    bool mscale_all_dims_fix;  // deepseek2: mscale = mscale_all_dims when it is not 1
    float attn_factor;         // rope.scaling.attn_factor (1 when absent)
};

// Fill p for n_dims rotated dims; n_ctx_train is context_length (the YaRN default original
// context). Mirrors llama_context's yarn_attn_factor and ggml's correction dims.
void strata_rope_ext_init(struct strata_rope_ext *p, uint32_t n_dims, enum strata_rope_mode mode, float freq_base,
                          const struct strata_rope_scaling *sc, uint32_t n_ctx_train);

// cs[2i], cs[2i+1] = cos, sin of pair i at position pos, already scaled. [n_dims/2][2] floats.
void strata_rope_ext_cache(float *cs, const struct strata_rope_ext *p, int pos);

// Rotate the first n_dims floats of x in place with a cache from strata_rope_ext_cache.
void strata_rope_ext_apply(float *x, const float *cs, const struct strata_rope_ext *p);

// The kq scale deepseek2, deepseek32 and glm-dsa pass to attention: mscale^2 / sqrt(head_k),
// mscale = attn_factor * (1 + 0.1 ln(1/freq_scale)) * (1 + 0.1 * yarn_log_mul * ln(1/freq_scale))
// in llama.cpp's float arithmetic; head_k is the per-head key width before absorption
// (attention.key_length_mla).
float strata_rope_mla_kq_scale(const struct strata_rope_ext *p, float yarn_log_mul, uint32_t head_k);

#endif
