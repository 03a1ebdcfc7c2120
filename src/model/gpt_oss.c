// gpt-oss (llama.cpp's openai-moe): tensors and feature flags. The forward pass is forward.c's
// with what these weights switch on (docs/architectures.md has llama.cpp's semantics):
//   attention with q/k/v and output biases, NeoX RoPE with YaRN, a sink logit per head joining
//   the softmax, and a sliding window in every block the sliding-window pattern marks (the even
//   ones); post_attention_norm; router logits plus a bias, the top-k of the logits and a softmax
//   over the chosen ones (no renormalisation); per-expert biases after each expert product and
//   the clamped SwiGLU (alpha 1.702, limit 7) between them.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "model/rope_scaling.h"
#include "util/log.h"

int strata_gpt_oss_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, F = hp->n_ff_exp;
    const uint64_t OD = (uint64_t)hp->n_head * hp->head_dim_v;
    if (hp->head_dim_k != hp->head_dim_v || hp->n_rot != hp->head_dim_k) {
        strata_log_error("model_load: %s: gpt-oss needs key length = value length = rope dims (%u, %u, %u)",
                         m->file->path, hp->head_dim_k, hp->head_dim_v, hp->n_rot);
        return STRATA_EFORMAT;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return STRATA_ENOMEM;
    m->n_kv_layers = hp->n_layer;
    m->max_act_dim = (uint32_t)(E > OD ? E : OD);
    if (F > m->max_act_dim) m->max_act_dim = (uint32_t)F;
    const struct strata_rope_scaling sc = {.yarn = hp->rope_yarn, .factor = hp->rope_scale,
                                           .n_ctx_orig = hp->rope_n_ctx_orig, .attn_factor = hp->rope_attn_factor};
    strata_rope_ext_init(&m->rope_ext, hp->n_rot, STRATA_ROPE_NEOX, hp->rope_freq_base, &sc, hp->n_ctx_train);
    m->rope_ext_on = true;
    m->route_exact = true;
    if (hp->rope_freq_base_swa != hp->rope_freq_base) {
        strata_log_error("model_load: %s: a sliding-window rope base of its own (%g) is not supported", m->file->path,
                         hp->rope_freq_base_swa);
        return STRATA_EUNSUP;
    }
    int rc;
    if ((rc = strata_model_load_io(m))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct strata_layer *L = &m->layers[l];
        L->kv_slot = (int32_t)l;
        L->moe_index = (int32_t)l;
        L->swa = strata_hparams_bit(hp->swa_layers, l);
        L->swiglu_oai = true;
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), &L->attn_norm)) ||
            (rc = strata_model_load_attention(m, l, false)) ||
            (rc = strata_model_load_vec(m, NM("attn_output.bias"), &L->bo)) ||
            (rc = strata_model_load_vec(m, NM("attn_sinks.weight"), &L->sinks)) ||
            (rc = strata_model_load_vec(m, NM("post_attention_norm.weight"), &L->ffn_norm)) ||
            (rc = strata_model_load_mat(m, NM("ffn_gate_inp.weight"), &L->router)) ||
            (rc = strata_model_load_vec_host(m, NM("ffn_gate_inp.bias"), &L->router_b)) ||
            (rc = strata_model_load_vec(m, NM("ffn_gate_exps.bias"), &L->exp_gate_b)) ||
            (rc = strata_model_load_vec(m, NM("ffn_up_exps.bias"), &L->exp_up_b)) ||
            (rc = strata_model_load_vec(m, NM("ffn_down_exps.bias"), &L->exp_down_b)))
            return rc;
#undef NM
        if ((rc = strata_model_check_experts(m, l))) return rc;
    }
    if (m->layout.n_layers != hp->n_layer) {
        strata_log_error("model_load: %s: %u blocks, but %u have expert tensors", m->file->path, hp->n_layer,
                         m->layout.n_layers);
        return STRATA_EFORMAT;
    }
    return 0;
}
