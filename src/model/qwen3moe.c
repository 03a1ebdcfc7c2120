// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): tensors, and the expert-tensor check every MoE
// architecture shares. The forward pass is forward.c's with what these weights switch on:
// per layer RMSNorm → GQA attention (per-head RMSNorm of q and k, NeoX RoPE) → residual →
// RMSNorm → softmax router, top-k renormalised → SwiGLU experts → weighted sum → residual.
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "util/log.h"

int strata_qwen3moe_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd;
    const uint64_t OD = (uint64_t)hp->n_head * hp->head_dim_v;
    if (hp->n_rot != hp->head_dim_k || hp->head_dim_k != hp->head_dim_v) {
        strata_log_error("model_load: %s: qwen3moe needs rope dims = key length = value length (%u, %u, %u)",
                         m->file->path, hp->n_rot, hp->head_dim_k, hp->head_dim_v);
        return STRATA_EFORMAT;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return STRATA_ENOMEM;
    m->n_kv_layers = hp->n_layer;
    m->max_act_dim = (uint32_t)(E > OD ? E : OD);
    int rc;
    if ((rc = strata_model_load_io(m))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct strata_layer *L = &m->layers[l];
        L->kv_slot = (int32_t)l;
        L->moe_index = (int32_t)l;
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), &L->attn_norm)) ||
            (rc = strata_model_load_attention(m, l, false)) ||
            (rc = strata_model_load_vec(m, NM("ffn_norm.weight"), &L->ffn_norm)) ||
            (rc = strata_model_load_mat(m, NM("ffn_gate_inp.weight"), &L->router)))
            return rc;
#undef NM
        if ((rc = strata_model_check_experts(m, l))) return rc;
    }
    return 0;
}

int strata_model_check_experts(struct strata_model *m, uint32_t l)
{
    const struct strata_hparams *hp = &m->hp;
    struct strata_layer *L = &m->layers[l];
    if (L->moe_index < 0 || (uint32_t)L->moe_index >= m->layout.n_layers ||
        m->layout.layers[L->moe_index].layer != (int)l) {
        strata_log_error("model_load: %s: layer %u has no expert tensors", m->file->path, l);
        return STRATA_EFORMAT;
    }
    const struct strata_expert_layer *el = &m->layout.layers[L->moe_index];
    struct strata_mat *mats[STRATA_EXPERT_PART_COUNT] = {&L->exp_gate, &L->exp_up, &L->exp_down};
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        const struct strata_gguf_tensor *t = el->tensor[p];
        const struct strata_tensor_spec *sp = strata_schema_find(&m->schema, t->name);
        if (!sp || t->ne[0] != sp->ne[0] || t->ne[1] != sp->ne[1] || t->ne[2] != sp->ne[2]) {
            strata_log_error("model_load: %s: tensor '%s' has shape [%llu,%llu,%llu], expected [%llu,%llu,%llu]",
                             m->file->path, t->name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
                             (unsigned long long)t->ne[2], (unsigned long long)(sp ? sp->ne[0] : 0),
                             (unsigned long long)(sp ? sp->ne[1] : 0), (unsigned long long)(sp ? sp->ne[2] : 0));
            return STRATA_EFORMAT;
        }
        if (!strata_type_computable(t->type) || !m->be->iface->supports_type(m->be->ctx, t->type)) {
            strata_log_error("model_load: %s: tensor '%s' has type %s, which strata cannot compute with yet",
                             m->file->path, t->name, strata_type_name(t->type));
            return STRATA_EUNSUP;
        }
        // the provider's views fill in data
        *mats[p] = (struct strata_mat){NULL, t->type, (uint32_t)sp->ne[0], (uint32_t)sp->ne[1],
                                       strata_type_row_bytes(t->type, sp->ne[0])};
    }
    if (hp->n_ff_exp > m->max_act_dim) m->max_act_dim = hp->n_ff_exp;
    return 0;
}
