// glm4moe (GLM-4.5, GLM-4.5-Air, GLM-4.6, GLM-4.7): tensors. The forward pass is the shared one
// (qwen3moe.c) with what these weights switch on:
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

static int load_optional_vec(struct strata_model *m, const char *name, uint64_t n, const float **out)
{
    *out = NULL;
    if (!gguf_find_tensor(m->file, name)) return 0;
    return strata_model_load_vec(m, name, n, out);
}

int strata_glm4moe_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, V = hp->n_vocab, X = hp->n_expert, D = hp->head_dim_k;
    const uint64_t QD = (uint64_t)hp->n_head * D, KD = (uint64_t)hp->n_head_kv * D;
    const uint64_t VD = (uint64_t)hp->n_head_kv * hp->head_dim_v, OD = (uint64_t)hp->n_head * hp->head_dim_v;
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
    if ((rc = strata_model_load_mat(m, "token_embd.weight", E, V, true, &m->tok_embd)) ||
        (rc = strata_model_load_vec(m, "output_norm.weight", E, &m->output_norm)) ||
        (rc = strata_model_load_mat(m, "output.weight", E, V, false, &m->output)))
        return rc;
    if (!m->output.data) m->output = m->tok_embd;  // tied embeddings
    int32_t moe_index = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct strata_layer *L = &m->layers[l];
        const bool dense = l < hp->n_layer_dense_lead;
        L->kv_slot = (int32_t)l;
        L->moe_index = dense ? -1 : moe_index++;
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), E, &L->attn_norm)) ||
            (rc = strata_model_load_mat(m, NM("attn_q.weight"), E, QD, true, &L->wq)) ||
            (rc = strata_model_load_mat(m, NM("attn_k.weight"), E, KD, true, &L->wk)) ||
            (rc = strata_model_load_mat(m, NM("attn_v.weight"), E, VD, true, &L->wv)) ||
            (rc = strata_model_load_mat(m, NM("attn_output.weight"), OD, E, true, &L->wo)) ||
            (rc = load_optional_vec(m, NM("attn_q.bias"), QD, &L->bq)) ||
            (rc = load_optional_vec(m, NM("attn_k.bias"), KD, &L->bk)) ||
            (rc = load_optional_vec(m, NM("attn_v.bias"), VD, &L->bv)) ||
            (rc = load_optional_vec(m, NM("attn_q_norm.weight"), D, &L->q_norm)) ||
            (rc = load_optional_vec(m, NM("attn_k_norm.weight"), D, &L->k_norm)) ||
            (rc = strata_model_load_vec(m, NM("post_attention_norm.weight"), E, &L->ffn_norm)))
            return rc;
        if (dense) {
            if ((rc = strata_model_load_mat(m, NM("ffn_gate.weight"), E, hp->n_ff, true, &L->ffn_gate)) ||
                (rc = strata_model_load_mat(m, NM("ffn_up.weight"), E, hp->n_ff, true, &L->ffn_up)) ||
                (rc = strata_model_load_mat(m, NM("ffn_down.weight"), hp->n_ff, E, true, &L->ffn_down)))
                return rc;
            continue;
        }
        if ((rc = strata_model_load_mat(m, NM("ffn_gate_inp.weight"), E, X, true, &L->router)) ||
            (rc = strata_model_load_vec(m, NM("exp_probs_b.bias"), X, &L->exp_probs_b)))
            return rc;
        if (Fs && ((rc = strata_model_load_mat(m, NM("ffn_gate_shexp.weight"), E, Fs, true, &L->sh_gate)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_up_shexp.weight"), E, Fs, true, &L->sh_up)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_down_shexp.weight"), Fs, E, true, &L->sh_down))))
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
