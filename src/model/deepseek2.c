// deepseek2 (DeepSeek-V2/V3/R1/V3.1, Kimi-K2), deepseek32 (DeepSeek-V3.2) and glm-dsa (GLM-5.x):
// tensors and feature flags. The forward pass is
// forward.c's with what these weights switch on (docs/architectures.md has llama.cpp's semantics):
//   multi-head latent attention: q through attn_q_a, an RMS norm and attn_q_b (per head no-rope
//   then rope dims); attn_kv_a_mqa gives the latent (RMS-normed, cached) and one rope key shared
//   by the heads; the no-rope query is absorbed per head through attn_k_b, the heads attend over
//   the cached [latent | rope key] rows with the latent as value, and attn_v_b expands each head's
//   result before attn_output; RoPE on adjacent pairs with YaRN, the kq scale with YaRN's mscale;
//   leading dense SwiGLU blocks, then sigmoid routing with a selection bias inside expert groups,
//   normalised and scaled weights, and the shared expert added ungated.
// deepseek32 and glm-dsa add the sparse-attention indexer: per block (glm-dsa: the blocks its
// indexer types mark; the others reuse the last mask) a lightning indexer over its own key cache
// picks the top-k positions each token's attention sees.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "model/rope_scaling.h"
#include "util/log.h"

// The MLA attention tensors of block l.
static int load_mla(struct strata_model *m, uint32_t l)
{
    const struct strata_hparams *hp = &m->hp;
    struct strata_layer *L = &m->layers[l];
    struct strata_mla_layer *w = &L->mla_w;
    char n[96];
    int rc;
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if (hp->q_lora_rank == 0) {
        strata_log_error("model_load: %s: MLA without attention.q_lora_rank (DeepSeek-V2-Lite's plain attn_q) is "
                         "not supported", m->file->path);
        return STRATA_EUNSUP;
    }
    if ((rc = strata_model_load_mat(m, NM("attn_q_a.weight"), &w->wq_a)) ||
        (rc = strata_model_load_vec(m, NM("attn_q_a_norm.weight"), &w->q_a_norm)) ||
        (rc = strata_model_load_mat(m, NM("attn_q_b.weight"), &w->wq_b)) ||
        (rc = strata_model_load_mat(m, NM("attn_kv_a_mqa.weight"), &w->wkv_a)) ||
        (rc = strata_model_load_vec(m, NM("attn_kv_a_norm.weight"), &w->kv_a_norm)) ||
        (rc = strata_model_load_mat(m, NM("attn_k_b.weight"), &w->wk_b)) ||
        (rc = strata_model_load_mat(m, NM("attn_v_b.weight"), &w->wv_b)) ||
        (rc = strata_model_load_mat(m, NM("attn_output.weight"), &L->wo)))
        return rc;
#undef NM
    L->mla = true;
    return 0;
}

// The sparse-attention indexer of block l (deepseek32, glm-dsa): a block that computes its own
// top-k gets a slot in the indexer key cache and its products (required there, also in glm-dsa
// whose schema marks them optional); the others reuse the last computed mask.
static int load_indexer(struct strata_model *m, uint32_t l)
{
    struct strata_layer *L = &m->layers[l];
    struct strata_indexer_layer *w = &L->idx;
    char n[96];
    int rc;
    L->sparse = true;
    L->idx_slot = -1;
    if (!strata_hparams_bit(m->hp.idx_full, l)) return 0;
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if ((rc = strata_model_load_mat(m, NM("indexer.attn_q_b.weight"), &w->wq_b)) ||
        (rc = strata_model_load_mat(m, NM("indexer.attn_k.weight"), &w->wk)) ||
        (rc = strata_model_load_mat(m, NM("indexer.proj.weight"), &w->proj)) ||
        (rc = strata_model_load_vec(m, NM("indexer.k_norm.weight"), &w->k_norm)) ||
        (rc = strata_model_load_vec(m, NM("indexer.k_norm.bias"), &w->k_norm_b)))
        return rc;
    if (!w->wq_b.data || !w->wk.data || !w->proj.data) {
        strata_log_error("model_load: %s: block %u computes its indexer top-k but lacks %s", m->file->path, l,
                         !w->wq_b.data ? NM("indexer.attn_q_b.weight") : !w->wk.data ? NM("indexer.attn_k.weight")
                                                                                      : NM("indexer.proj.weight"));
        return STRATA_EFORMAT;
    }
#undef NM
    L->idx_slot = (int32_t)m->n_idx_layers++;
    return 0;
}

int strata_deepseek2_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, H = hp->n_head;
    const uint64_t R = hp->n_rot, KVL = hp->kv_lora_rank, NOPE = hp->head_dim_k_mla - R, VH = hp->head_dim_v_mla;
    const uint64_t Fs = hp->n_ff_shexp;
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return STRATA_ENOMEM;
    m->n_kv_layers = hp->n_layer;
    // widest product input and query: q_a rows, q_b rows, the absorbed queries, the heads' values
    uint64_t act = E;
    const uint64_t widths[] = {hp->q_lora_rank, H * VH, hp->n_ff, Fs, KVL, NOPE};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) act = widths[i] > act ? widths[i] : act;
    m->max_act_dim = (uint32_t)act;
    m->max_q_dim = (uint32_t)(H * (KVL + R));
    // llama.cpp's context takes mscale = mscale_all_dims for deepseek2 only (not deepseek32)
    const struct strata_rope_scaling sc = {.yarn = hp->rope_yarn, .factor = hp->rope_scale,
                                           .n_ctx_orig = hp->rope_n_ctx_orig, .yarn_log_mul = hp->yarn_log_mul,
                                           .mscale_all_dims_fix = hp->arch == STRATA_ARCH_DEEPSEEK2,
                                           .attn_factor = hp->rope_attn_factor};
    strata_rope_ext_init(&m->rope_ext, hp->n_rot, STRATA_ROPE_NORM, hp->rope_freq_base, &sc, hp->n_ctx_train);
    m->rope_ext_on = true;
    // the indexer rotates the first R dims of its heads: GLM adjacent pairs, DeepSeek-V3.2 NeoX halves
    if (hp->idx_n_head)
        strata_rope_ext_init(&m->idx_rope, hp->n_rot, hp->arch == STRATA_ARCH_GLM_DSA ? STRATA_ROPE_NORM : STRATA_ROPE_NEOX,
                             hp->rope_freq_base, &sc, hp->n_ctx_train);
    m->kq_scale = strata_rope_mla_kq_scale(&m->rope_ext, hp->yarn_log_mul, hp->head_dim_k_mla);
    m->route_exact = true;
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
        L->idx_slot = -1;
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), &L->attn_norm)) || (rc = load_mla(m, l)) ||
            (hp->idx_n_head && (rc = load_indexer(m, l))) ||
            (rc = strata_model_load_vec(m, NM("ffn_norm.weight"), &L->ffn_norm)))
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
