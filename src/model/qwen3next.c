// qwen3next (Qwen3-Next-80B-A3B) and qwen35moe (Qwen3.5 MoE, e.g. 397B-A17B): tensors. The
// forward pass is forward.c's with what these weights switch on:
//   every full_attention_interval-th block: attention whose query projection gives, per head,
//   the query then a gate; per-head q/k RMS norms, NeoX RoPE on the first n_rot dims, output
//   times sigmoid(gate);
//   the other blocks: gated delta-net linear attention (deltanet.c);
//   every block: post_attention_norm, softmax router top-k renormalised, and a shared expert
//   scaled by sigmoid(ffn_gate_inp_shexp . h).
// qwen35moe differs by separate beta and alpha projections, key heads tiled over the value heads
// and the interleaved M-RoPE section mask (flags set here).
#include <stdio.h>
#include <stdlib.h>

#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "util/log.h"

// Tensors of one delta-net block.
static int load_deltanet(struct strata_model *m, uint32_t l, struct strata_deltanet_layer *dn)
{
    const struct strata_hparams *hp = &m->hp;
    char n[96];
    int rc;
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if ((rc = strata_model_load_mat(m, NM("attn_qkv.weight"), &dn->qkv)) ||
        (rc = strata_model_load_mat(m, NM("attn_gate.weight"), &dn->z)) ||
        (rc = strata_model_load_transposed(m, NM("ssm_conv1d.weight"), &dn->conv_taps)) ||
        (rc = strata_model_load_vec(m, NM("ssm_dt.bias"), &dn->dt_bias)) ||
        (rc = strata_model_load_vec(m, NM("ssm_a"), &dn->a)) ||
        (rc = strata_model_load_vec(m, NM("ssm_norm.weight"), &dn->norm)) ||
        (rc = strata_model_load_mat(m, NM("ssm_out.weight"), &dn->out)))
        return rc;
    // qwen35moe: separate beta and alpha projections, key heads tiled over the value heads
    dn->ba_split = dn->kv_tiled = hp->arch == STRATA_ARCH_QWEN35MOE;
    if (hp->arch == STRATA_ARCH_QWEN35MOE)
        rc = strata_model_load_mat(m, NM("ssm_beta.weight"), &dn->beta);
    if (hp->arch == STRATA_ARCH_QWEN35MOE && rc == 0)
        rc = strata_model_load_mat(m, NM("ssm_alpha.weight"), &dn->alpha);
    if (hp->arch != STRATA_ARCH_QWEN35MOE)
        rc = strata_model_load_mat(m, NM("ssm_ba.weight"), &dn->ba);
#undef NM
    return rc;
}

int strata_qwen3next_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, Fs = hp->n_ff_shexp;
    if (hp->head_dim_k != hp->head_dim_v) {
        strata_log_error("model_load: %s: %s needs key length = value length (%u, %u)", m->file->path,
                         strata_arch_name(hp->arch), hp->head_dim_k, hp->head_dim_v);
        return STRATA_EFORMAT;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return STRATA_ENOMEM;
    m->rope_mrope = hp->arch == STRATA_ARCH_QWEN35MOE;
    const uint64_t OD = (uint64_t)hp->n_head * hp->head_dim_v, VDn = (uint64_t)hp->ssm_d_inner;
    m->max_act_dim = (uint32_t)E;
    if (OD > m->max_act_dim) m->max_act_dim = (uint32_t)OD;
    if (VDn > m->max_act_dim) m->max_act_dim = (uint32_t)VDn;
    if (Fs > m->max_act_dim) m->max_act_dim = (uint32_t)Fs;
    int rc;
    if ((rc = strata_model_load_io(m))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct strata_layer *L = &m->layers[l];
        L->moe_index = (int32_t)l;
        L->kv_slot = -1;
        L->dn.rs_slot = -1;
        if (strata_hparams_is_recurrent(hp, l)) {
            L->dn.rs_slot = (int32_t)m->n_rs_layers++;
            rc = load_deltanet(m, l, &L->dn);
        } else {
            L->kv_slot = (int32_t)m->n_kv_layers++;
            rc = strata_model_load_attention(m, l, true);
        }
        if (rc) return rc;
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), &L->attn_norm)) ||
            (rc = strata_model_load_vec(m, NM("post_attention_norm.weight"), &L->ffn_norm)) ||
            (rc = strata_model_load_mat(m, NM("ffn_gate_inp.weight"), &L->router)))
            return rc;
        if (Fs && ((rc = strata_model_load_mat(m, NM("ffn_gate_shexp.weight"), &L->sh_gate)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_up_shexp.weight"), &L->sh_up)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_down_shexp.weight"), &L->sh_down)) ||
                   (rc = strata_model_load_mat(m, NM("ffn_gate_inp_shexp.weight"), &L->sh_gate_inp))))
            return rc;
#undef NM
        if ((rc = strata_model_check_experts(m, l))) return rc;
    }
    return 0;
}
