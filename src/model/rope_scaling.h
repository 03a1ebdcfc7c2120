// The RoPE factors llama.cpp derives on the host from a GGUF's rope keys (llama_context's
// yarn_attn_factor, ggml_rope_yarn_corr_dims with beta_fast 32 / beta_slow 1, and the MLA
// attention scale of deepseek2.cpp), for struct strata_rope_ext (backend/backend.h). Plain
// float arithmetic, as libllama and libggml-base are built without FMA.
#ifndef STRATA_ROPE_SCALING_H
#define STRATA_ROPE_SCALING_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"

// How a GGUF scales its rope (the keys llama.cpp reads; all optional).
struct strata_rope_scaling {
    bool yarn;                 // rope.scaling.type == "yarn" (linear and none: no YaRN)
    float factor;              // rope.scaling.factor (0: none)
    uint32_t n_ctx_orig;       // rope.scaling.original_context_length (0: context_length)
    float yarn_log_mul;        // rope.scaling.yarn_log_multiplier / 0.1, as deepseek2/deepseek32
                               // load it (0: absent, or an architecture that ignores it)
    bool mscale_all_dims_fix;  // deepseek2: mscale = mscale_all_dims when it is not 1
    float attn_factor;         // rope.scaling.attn_factor (0 or 1: none)
};

// Fill p for n_dims rotated dims; n_ctx_train is context_length (the YaRN default original
// context).
void strata_rope_ext_init(struct strata_rope_ext *p, uint32_t n_dims, enum strata_rope_mode mode, float freq_base,
                          const struct strata_rope_scaling *sc, uint32_t n_ctx_train);

// The kq scale deepseek2, deepseek32 and glm-dsa pass to attention: mscale^2 / sqrt(head_k),
// mscale = attn_factor * (1 + 0.1 ln(1/freq_scale)) * (1 + 0.1 * yarn_log_mul * ln(1/freq_scale))
// in llama.cpp's float arithmetic; head_k is the per-head key width before absorption
// (attention.key_length_mla).
float strata_rope_mla_kq_scale(const struct strata_rope_ext *p, float yarn_log_mul, uint32_t head_k);

#endif
