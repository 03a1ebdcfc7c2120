// Expert selection for one token in the order of llama.cpp's build_moe_ffn (ggml's CPU ops), for
// every gating the supported architectures use: softmax over all experts (qwen), sigmoid with a
// selection bias (glm4moe, deepseek2, glm-dsa), DeepSeek-V3's group-limited selection, and
// gpt-oss's softmax over the chosen experts' logits. Host code shared by every backend: the
// router logits come back from the backend before it runs.
//
//   probs       softmax(logits) | sigmoid(logits) | logits (softmax-after-top-k)
//   selection   probs + bias (the bias only chooses; weights stay unbiased)
//   groups      (n_groups > 1) each group scores the sum of its two best selection values; all
//               but the n_group_used best groups are set to -inf
//   top-k       the n_used largest selection values, in descending order (ggml's argsort; ties,
//               which ggml leaves to std::sort, go to the lower index here)
//   weights     probs of the chosen; softmax over them (softmax-after-top-k); divided by their
//               sum (double, clamped below at 2^-14) when normalising; times the scale unless it
//               is 0 or 1
#ifndef STRATA_ROUTING_H
#define STRATA_ROUTING_H

#include <stdbool.h>
#include <stdint.h>

#include "model/arch.h"

struct strata_route_cfg {
    uint32_t n_expert, n_used;
    uint32_t gating;          // STRATA_GATING_SOFTMAX, _SIGMOID (model/arch.h), _SOFTMAX_WEIGHT
    uint32_t n_groups;        // expert_group_count (0 or 1: no groups); n_expert % n_groups == 0
    uint32_t n_group_used;    // expert_group_used_count
    bool norm;                // expert_weights_norm
    float scale;              // expert_weights_scale (0: none)
    int vl;                   // float lanes of the ggml build followed (strata_isa_lanes)
};

// ggml_soft_max without a mask, in place over n floats: groups of vl through ggml_v_expf, their
// float tree added in double, the tail after the last full group through libm's expf.
void strata_softmax_ggml(float *x, int n, int vl);

// logits: [n_expert] router outputs (plus the router bias, if the model has one); overwritten.
// bias: [n_expert] selection bias or NULL. ids, w: [n_used] out. scratch: 2 * n_expert floats.
void strata_route_select(const struct strata_route_cfg *c, float *logits, const float *bias, int32_t *ids,
                         float *w, float *scratch);

#endif
