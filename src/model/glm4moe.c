// glm4moe (GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7): tensors. The forward pass is forward.c's
// with what these weights switch on:
//   attention with q/k/v biases, optional per-head q/k RMS norms (the 355B models have them,
//   Air not), NeoX RoPE on the first n_rot dims of each head (half of it in the real models);
//   leading_dense_block_count blocks with a dense SwiGLU FFN, the rest MoE: sigmoid router,
//   top-k chosen on sigmoid + exp_probs_b, weighted by the unbiased sigmoid, normalised
//   (expert_weights_norm), scaled (expert_weights_scale), plus shared experts added ungated.
// The nextn (multi-token prediction) blocks after the trunk are never loaded: hparams counts
// them out of n_layer and the expert layout drops their experts.
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "util/log.h"

int strata_glm4moe_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd;
    const uint64_t OD = (uint64_t)hp->n_head * hp->head_dim_v;
    const uint64_t Fs = hp->n_ff_shexp;
    if (hp->head_dim_k != hp->head_dim_v) {
        strata_log_error("model_load: %s: glm4moe needs key length = value length (%u, %u)", m->file->path,
                         hp->head_dim_k, hp->head_dim_v);
        return STRATA_EFORMAT;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return STRATA_ENOMEM;
    m->n_kv_layers = hp->n_layer;
    m->max_act_dim = (uint32_t)(E > OD ? E : OD);
    if (hp->n_ff > m->max_act_dim) m->max_act_dim = hp->n_ff;
    if (Fs > m->max_act_dim) m->max_act_dim = (uint32_t)Fs;
    int rc;
    if ((rc = strata_model_load_io(m))) return rc;
    int32_t moe_index = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct strata_layer *L = &m->layers[l];
        const bool dense = l < hp->n_layer_dense_lead;
        L->kv_slot = (int32_t)l;
        L->moe_index = dense ? -1 : moe_index++;
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), &L->attn_norm)) ||
            (rc = strata_model_load_attention(m, l, false)) ||
            (rc = strata_model_load_vec(m, NM("post_attention_norm.weight"), &L->ffn_norm)))
            return rc;
        if (dense) {
            if ((rc = strata_model_load_mat(m, NM("ffn_gate.weight"), &L->ffn_gate)) ||
                (rc = strata_model_load_mat(m, NM("ffn_up.weight"), &L->ffn_up)) ||
                (rc = strata_model_load_mat(m, NM("ffn_down.weight"), &L->ffn_down)))
                return rc;
            continue;
        }
        if ((rc = strata_model_load_mat(m, NM("ffn_gate_inp.weight"), &L->router)) ||
            (rc = strata_model_load_vec_host(m, NM("exp_probs_b.bias"), &L->exp_probs_b)))
            return rc;
        if (Fs && ((rc = strata_model_load_mat(m, NM("ffn_gate_shexp.weight"), &L->sh_gate)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_up_shexp.weight"), &L->sh_up)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_down_shexp.weight"), &L->sh_down))))
            return rc;
#undef NM
        if ((rc = strata_model_check_experts(m, l))) return rc;
    }
    if ((uint32_t)moe_index != m->layout.n_layers) {
        strata_log_error("model_load: %s: %u MoE blocks, but %u blocks have expert tensors", m->file->path,
                         (unsigned)moe_index, m->layout.n_layers);
        return STRATA_EFORMAT;
    }
    return 0;
}
