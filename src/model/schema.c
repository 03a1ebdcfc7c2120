// Tensor schemas (schema.h): the tensor lists of qwen3moe, glm4moe and qwen3next / qwen35moe
// from their hyperparameters, in the converters' order, and the pieces they share.
#include "model/schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/arch.h"
#include "util/log.h"

int strata_schema_add(struct strata_schema *s, const char *name, bool f32, float mean, float std, uint32_t n_dims,
                      uint64_t ne0, uint64_t ne1, uint64_t ne2)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct strata_tensor_spec *items = realloc(s->items, cap * sizeof *items);
        if (!items) return STRATA_ENOMEM;
        s->items = items;
        s->cap = cap;
    }
    struct strata_tensor_spec *t = &s->items[s->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = n_dims;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = ne2;
    t->ne[3] = 1;
    t->f32 = f32;
    t->mean = mean;
    t->std = std;
    return 0;
}

// Mark the last tensor added.
static void last_optional(struct strata_schema *s) { s->items[s->n - 1].optional = true; }

void strata_schema_free(struct strata_schema *s)
{
    free(s->items);
    memset(s, 0, sizeof *s);
}

const struct strata_tensor_spec *strata_schema_find(const struct strata_schema *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i].name, name) == 0) return &s->items[i];
    return NULL;
}

#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)

int strata_schema_moe(struct strata_schema *s, uint32_t l, uint64_t E, uint64_t F, uint64_t X)
{
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc;
    if ((rc = strata_schema_add(s, NM("ffn_gate_inp.weight"), true, 0.0f, 2.0f * s_in, 2, E, X, 1)) ||
        (rc = strata_schema_add(s, NM("ffn_gate_exps.weight"), false, 0.0f, s_in, 3, E, F, X)) ||
        (rc = strata_schema_add(s, NM("ffn_up_exps.weight"), false, 0.0f, s_in, 3, E, F, X)) ||
        (rc = strata_schema_add(s, NM("ffn_down_exps.weight"), false, 0.0f, 1.0f / sqrtf((float)F), 3, F, E, X)))
        return rc;
    return 0;
}

int strata_schema_ffn(struct strata_schema *s, uint32_t l, const char *gate, const char *up, const char *down,
                      uint64_t E, uint64_t ff)
{
    char n[96];
    int rc;
    const float s_in = 1.0f / sqrtf((float)E);
    snprintf(n, sizeof n, "blk.%u.%s.weight", l, gate);
    if ((rc = strata_schema_add(s, n, false, 0.0f, s_in, 2, E, ff, 1))) return rc;
    snprintf(n, sizeof n, "blk.%u.%s.weight", l, up);
    if ((rc = strata_schema_add(s, n, false, 0.0f, s_in, 2, E, ff, 1))) return rc;
    snprintf(n, sizeof n, "blk.%u.%s.weight", l, down);
    return strata_schema_add(s, n, false, 0.0f, 1.0f / sqrtf((float)ff), 2, ff, E, 1);
}

int strata_schema_glm_ffn(struct strata_schema *s, uint32_t l, uint64_t E, uint32_t n_dense, uint64_t Fd,
                          uint64_t F, uint64_t Fs, uint64_t X, uint32_t n_trunk)
{
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc;
    if (l < n_dense) {
        if ((rc = strata_schema_ffn(s, l, "ffn_gate", "ffn_up", "ffn_down", E, Fd))) return rc;
    } else if ((rc = strata_schema_moe(s, l, E, F, X)) ||
               (rc = strata_schema_add(s, NM("exp_probs_b.bias"), true, 0.0f, 0.1f, 1, X, 1, 1)) ||
               (rc = strata_schema_ffn(s, l, "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", E, Fs))) {
        return rc;
    }
    if (l >= n_trunk &&
        ((rc = strata_schema_add(s, NM("nextn.eh_proj.weight"), false, 0.0f, s_in, 2, 2 * E, E, 1)) ||
         (rc = strata_schema_add(s, NM("nextn.enorm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
         (rc = strata_schema_add(s, NM("nextn.hnorm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
         (rc = strata_schema_add(s, NM("nextn.shared_head_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1))))
        return rc;
    return 0;
}

// token_embd first; output_norm and output (absent: tied to token_embd) last.
static int head_tensors(struct strata_schema *s, const struct strata_hparams *hp)
{
    const uint64_t E = hp->n_embd;
    int rc = strata_schema_add(s, "output_norm.weight", true, 1.0f, 0.1f, 1, E, 1, 1);
    if (rc == 0) rc = strata_schema_add(s, "output.weight", false, 0.0f, 1.0f / sqrtf((float)E), 2, E, hp->n_vocab, 1);
    if (rc == 0) last_optional(s);
    return rc;
}

// Full attention of block l: q ([E][2HD] when gated: per head query then gate), k, v, output,
// optionally the q/k/v biases (biases: glm4moe) and per-head q/k norms.
static int attention_tensors(struct strata_schema *s, const struct strata_hparams *hp, uint32_t l, bool gated,
                             bool biases)
{
    const uint64_t E = hp->n_embd, H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim_k, Dv = hp->head_dim_v;
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc;
    if ((rc = strata_schema_add(s, NM("attn_q.weight"), false, 0.0f, s_in, 2, E, (gated ? 2 : 1) * H * D, 1)) ||
        (rc = strata_schema_add(s, NM("attn_k.weight"), false, 0.0f, s_in, 2, E, Hkv * D, 1)) ||
        (rc = strata_schema_add(s, NM("attn_v.weight"), false, 0.0f, s_in, 2, E, Hkv * Dv, 1)))
        return rc;
    if (biases &&
        ((rc = strata_schema_add(s, NM("attn_q.bias"), true, 0.0f, 0.1f, 1, H * D, 1, 1)) ||
         (rc = strata_schema_add(s, NM("attn_k.bias"), true, 0.0f, 0.1f, 1, Hkv * D, 1, 1)) ||
         (rc = strata_schema_add(s, NM("attn_v.bias"), true, 0.0f, 0.1f, 1, Hkv * Dv, 1, 1))))
        return rc;
    return strata_schema_add(s, NM("attn_output.weight"), false, 0.0f, 1.0f / sqrtf((float)(H * Dv)), 2, H * Dv, E, 1);
}

static int qk_norms(struct strata_schema *s, const struct strata_hparams *hp, uint32_t l)
{
    char n[96];
    int rc;
    if ((rc = strata_schema_add(s, NM("attn_q_norm.weight"), true, 1.0f, 0.1f, 1, hp->head_dim_k, 1, 1)) ||
        (rc = strata_schema_add(s, NM("attn_k_norm.weight"), true, 1.0f, 0.1f, 1, hp->head_dim_k, 1, 1)))
        return rc;
    return 0;
}

static int qwen3moe_schema(struct strata_schema *s, const struct strata_hparams *hp)
{
    const uint64_t E = hp->n_embd;
    char n[96];
    int rc = 0;
    for (uint32_t l = 0; l < hp->n_layer && rc == 0; l++) {
        if ((rc = strata_schema_add(s, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = attention_tensors(s, hp, l, false, false)) || (rc = qk_norms(s, hp, l)) ||
            (rc = strata_schema_add(s, NM("ffn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_moe(s, l, E, hp->n_ff_exp, hp->n_expert)))
            break;
    }
    return rc;
}

// glm4moe: the trunk's blocks, then n_layer_nextn prediction blocks (decoding never runs them).
static int glm4moe_schema(struct strata_schema *s, const struct strata_hparams *hp, const struct strata_schema_opts *o)
{
    const uint64_t E = hp->n_embd;
    char n[96];
    int rc = 0;
    for (uint32_t l = 0; l < hp->n_layer + hp->n_layer_nextn && rc == 0; l++) {
        if ((rc = strata_schema_add(s, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = attention_tensors(s, hp, l, false, true)) ||
            (rc = strata_schema_add(s, NM("post_attention_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)))
            break;
        if (o->qk_norm) {
            if ((rc = qk_norms(s, hp, l))) break;
            s->items[s->n - 1].optional = s->items[s->n - 2].optional = true;
        }
        rc = strata_schema_glm_ffn(s, l, E, hp->n_layer_dense_lead, hp->n_ff, hp->n_ff_exp, hp->n_ff_shexp,
                                   hp->n_expert, hp->n_layer);
    }
    return rc;
}

// qwen3next / qwen35moe: delta-net blocks with a gated full-attention block every
// full_attn_interval; every block routed experts and a sigmoid-gated shared expert.
static int qwen3next_schema(struct strata_schema *s, const struct strata_hparams *hp)
{
    const uint64_t E = hp->n_embd, dk = hp->ssm_d_state, nk = hp->ssm_n_group, nv = hp->ssm_dt_rank;
    const uint64_t C = 2 * nk * dk + nv * dk;
    const bool split_ba = hp->arch == STRATA_ARCH_QWEN35MOE;
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc = 0;
    for (uint32_t l = 0; l < hp->n_layer && rc == 0; l++) {
        if ((rc = strata_schema_add(s, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(s, NM("post_attention_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)))
            break;
        if (!strata_hparams_is_recurrent(hp, l)) {
            if ((rc = attention_tensors(s, hp, l, true, false)) || (rc = qk_norms(s, hp, l))) break;
        } else {
            if ((rc = strata_schema_add(s, NM("attn_qkv.weight"), false, 0.0f, s_in, 2, E, C, 1)) ||
                (rc = strata_schema_add(s, NM("attn_gate.weight"), false, 0.0f, s_in, 2, E, nv * dk, 1)) ||
                (rc = strata_schema_add(s, NM("ssm_conv1d.weight"), true, 0.0f, 1.0f / sqrtf((float)hp->ssm_d_conv),
                                        2, hp->ssm_d_conv, C, 1)) ||
                (rc = strata_schema_add(s, NM("ssm_dt.bias"), true, 0.0f, 1.0f, 1, nv, 1, 1)) ||
                (rc = strata_schema_add(s, NM("ssm_a"), true, -0.5f, 0.5f, 1, nv, 1, 1)) ||
                (rc = strata_schema_add(s, NM("ssm_norm.weight"), true, 1.0f, 0.1f, 1, dk, 1, 1)) ||
                (rc = strata_schema_add(s, NM("ssm_out.weight"), false, 0.0f, 1.0f / sqrtf((float)(nv * dk)), 2,
                                        nv * dk, E, 1)))
                break;
            s->items[s->n - 3].negative = true;  // ssm_a
            if (split_ba && ((rc = strata_schema_add(s, NM("ssm_beta.weight"), false, 0.0f, s_in, 2, E, nv, 1)) ||
                             (rc = strata_schema_add(s, NM("ssm_alpha.weight"), false, 0.0f, s_in, 2, E, nv, 1))))
                break;
            if (!split_ba && (rc = strata_schema_add(s, NM("ssm_ba.weight"), false, 0.0f, s_in, 2, E, 2 * nv, 1)))
                break;
        }
        if ((rc = strata_schema_moe(s, l, E, hp->n_ff_exp, hp->n_expert)) ||
            (rc = strata_schema_add(s, NM("ffn_gate_inp_shexp.weight"), true, 0.0f, 2.0f * s_in, 1, E, 1, 1)))
            break;
        last_optional(s);
        rc = strata_schema_ffn(s, l, "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", E, hp->n_ff_shexp);
    }
    return rc;
}

// The sparse-attention indexer of block l (deepseek32, glm-dsa): every tensor optional in
// glm-dsa as llama.cpp loads them (its blocks that reuse the last top-k need none; the loader
// asks for the products in the blocks that compute their own), required in deepseek32.
static int indexer_tensors(struct strata_schema *s, const struct strata_hparams *hp, uint32_t l)
{
    const uint64_t E = hp->n_embd, QL = hp->q_lora_rank, IH = hp->idx_n_head, ID = hp->idx_head_dim;
    const bool opt = hp->arch == STRATA_ARCH_GLM_DSA;
    const size_t first = s->n;
    char n[96];
    int rc;
    if ((rc = strata_schema_add(s, NM("indexer.k_norm.weight"), true, 1.0f, 0.1f, 1, ID, 1, 1)) ||
        (rc = strata_schema_add(s, NM("indexer.k_norm.bias"), true, 0.0f, 0.1f, 1, ID, 1, 1)) ||
        (rc = strata_schema_add(s, NM("indexer.proj.weight"), false, 0.0f, 1.0f / sqrtf((float)E), 2, E, IH, 1)) ||
        (rc = strata_schema_add(s, NM("indexer.attn_k.weight"), false, 0.0f, 1.0f / sqrtf((float)E), 2, E, ID, 1)) ||
        (rc = strata_schema_add(s, NM("indexer.attn_q_b.weight"), false, 0.0f, 1.0f / sqrtf((float)QL), 2, QL, IH * ID,
                                1)))
        return rc;
    for (size_t i = first; opt && i < s->n; i++) s->items[i].optional = true;
    return 0;
}

// deepseek2 (loader: model/deepseek2.c): MLA attention (q low-rank pair, kv projection to the
// latent and a shared rope key, per-head absorption attn_k_b [nope, KVL, H] and expansion
// attn_v_b [KVL, Vh, H]), then the GLM/DeepSeek FFN half (selection bias optional, as llama.cpp).
static int deepseek2_schema(struct strata_schema *s, const struct strata_hparams *hp)
{
    const uint64_t E = hp->n_embd, H = hp->n_head, R = hp->n_rot, QL = hp->q_lora_rank, KVL = hp->kv_lora_rank;
    const uint64_t NOPE = hp->head_dim_k_mla - R, VH = hp->head_dim_v_mla;
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc = 0;
    for (uint32_t l = 0; l < hp->n_layer + hp->n_layer_nextn && rc == 0; l++) {
        if ((rc = strata_schema_add(s, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(s, NM("attn_q_a_norm.weight"), true, 1.0f, 0.1f, 1, QL, 1, 1)) ||
            (rc = strata_schema_add(s, NM("attn_kv_a_norm.weight"), true, 1.0f, 0.1f, 1, KVL, 1, 1)) ||
            (rc = strata_schema_add(s, NM("attn_q_a.weight"), false, 0.0f, s_in, 2, E, QL, 1)) ||
            (rc = strata_schema_add(s, NM("attn_q_b.weight"), false, 0.0f, 1.0f / sqrtf((float)QL), 2, QL,
                                    H * (NOPE + R), 1)) ||
            (rc = strata_schema_add(s, NM("attn_kv_a_mqa.weight"), false, 0.0f, s_in, 2, E, KVL + R, 1)) ||
            (rc = strata_schema_add(s, NM("attn_k_b.weight"), false, 0.0f, 1.0f / sqrtf((float)NOPE), 3, NOPE, KVL, H)) ||
            (rc = strata_schema_add(s, NM("attn_v_b.weight"), false, 0.0f, 1.0f / sqrtf((float)KVL), 3, KVL, VH, H)) ||
            (rc = strata_schema_add(s, NM("attn_output.weight"), false, 0.0f, 1.0f / sqrtf((float)(H * VH)), 2, H * VH,
                                    E, 1)) ||
            (rc = strata_schema_add(s, NM("ffn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)))
            break;
        if (hp->idx_n_head && (rc = indexer_tensors(s, hp, l))) break;
        if ((rc = strata_schema_glm_ffn(s, l, E, hp->n_layer_dense_lead, hp->n_ff, hp->n_ff_exp, hp->n_ff_shexp,
                                        hp->n_expert, hp->n_layer)))
            break;
        if (l >= hp->n_layer_dense_lead) {
            struct strata_tensor_spec *b = (struct strata_tensor_spec *)strata_schema_find(s, NM("exp_probs_b.bias"));
            if (b) b->optional = true;
        }
    }
    return rc;
}

// gpt-oss (loader: model/gpt_oss.c): biased attention with sinks, post-attention norm, biased
// router and experts.
static int gpt_oss_schema(struct strata_schema *s, const struct strata_hparams *hp)
{
    const uint64_t E = hp->n_embd, H = hp->n_head, F = hp->n_ff_exp, X = hp->n_expert;
    char n[96];
    int rc = 0;
    for (uint32_t l = 0; l < hp->n_layer && rc == 0; l++) {
        if ((rc = strata_schema_add(s, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(s, NM("post_attention_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = attention_tensors(s, hp, l, false, true)) ||
            (rc = strata_schema_add(s, NM("attn_output.bias"), true, 0.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(s, NM("attn_sinks.weight"), true, 0.0f, 1.0f, 1, H, 1, 1)) ||
            (rc = strata_schema_moe(s, l, E, F, X)) ||
            (rc = strata_schema_add(s, NM("ffn_gate_inp.bias"), true, 0.0f, 0.5f, 1, X, 1, 1)) ||
            (rc = strata_schema_add(s, NM("ffn_gate_exps.bias"), true, 0.0f, 0.1f, 2, F, X, 1)) ||
            (rc = strata_schema_add(s, NM("ffn_up_exps.bias"), true, 0.0f, 0.1f, 2, F, X, 1)) ||
            (rc = strata_schema_add(s, NM("ffn_down_exps.bias"), true, 0.0f, 0.1f, 2, E, X, 1)))
            break;
    }
    return rc;
}

#undef NM

int strata_schema_build(const struct strata_hparams *hp, const struct strata_schema_opts *o, struct strata_schema *s)
{
    static const struct strata_schema_opts none = {0};
    if (!o) o = &none;
    memset(s, 0, sizeof *s);
    int rc = strata_schema_add(s, "token_embd.weight", false, 0.0f, 1.0f, 2, hp->n_embd, hp->n_vocab, 1);
    if (rc == 0) {
        switch (hp->arch) {
        case STRATA_ARCH_QWEN3MOE: rc = qwen3moe_schema(s, hp); break;
        case STRATA_ARCH_GLM4MOE: rc = glm4moe_schema(s, hp, o); break;
        case STRATA_ARCH_QWEN3NEXT:
        case STRATA_ARCH_QWEN35MOE: rc = qwen3next_schema(s, hp); break;
        case STRATA_ARCH_DEEPSEEK2:
        case STRATA_ARCH_DEEPSEEK32:
        case STRATA_ARCH_GLM_DSA: rc = deepseek2_schema(s, hp); break;
        case STRATA_ARCH_GPT_OSS: rc = gpt_oss_schema(s, hp); break;
        default:
            strata_log_error("schema: no tensor schema for %s yet", strata_arch_name(hp->arch));
            rc = STRATA_EUNSUP;
        }
    }
    if (rc == 0) rc = head_tensors(s, hp);
    if (rc) strata_schema_free(s);
    return rc;
}
