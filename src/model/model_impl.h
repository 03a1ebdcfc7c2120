// Internal structures of a loaded model, shared by the loaders (qwen3moe.c, glm4moe.c,
// qwen3next.c), the loading helpers (model.c) and the forward pass (forward.c).
//
// A loader only reads tensors into struct strata_layer and sets the feature flags the forward
// pass reads (which attention or delta-net, biases, norms, gates, dense or routed FFN, shared
// expert); the forward pass never looks at the architecture. Every weight is a view in the
// backend's memory (struct strata_mat, or a const float * for F32 vectors).
#ifndef STRATA_MODEL_IMPL_H
#define STRATA_MODEL_IMPL_H

#include <stddef.h>

#include "backend/backend.h"
#include "experts/layout.h"
#include "model/model.h"
#include "model/schema.h"
#include "quant/quant.h"

// Weights of one gated delta-net (linear attention) block: dk = dv = ssm_d_state, nk key heads,
// nv value heads, C = 2*nk*dk + nv*dv conv channels (q | k | v).
struct strata_deltanet_layer {
    struct strata_mat qkv;        // [C][E]
    struct strata_mat z;          // [nv*dv][E] output gate (attn_gate)
    struct strata_mat ba;         // [2*nv][E] fused: per key head [r betas | r alphas], r = nv/nk
    struct strata_mat beta, alpha; // [nv][E] each when split (ba_split); data NULL otherwise
    bool ba_split;
    bool kv_tiled;                // value head h reads key head h % nk (else h / r)
    const float *conv_taps;       // [K][C] causal conv1d taps, transposed at load, F32
    const float *dt_bias;         // [nv]
    const float *a;               // [nv] -exp(A_log): decay rate, negative
    const float *norm;            // [dv] RMS norm of each head's output
    struct strata_mat out;        // [E][nv*dv]
    int32_t rs_slot;              // index of the block's conv and delta state in a sequence's state
};

// Multi-head latent attention weights (deepseek2, deepseek32, glm-dsa): QL q rank, KVL latent,
// R rope dims, nope = key_length_mla - R no-rope dims, Vh value dims per head.
struct strata_mla_layer {
    struct strata_mat wq_a;       // [QL][E]
    const float *q_a_norm;        // [QL]
    struct strata_mat wq_b;       // [H*(nope+R)][QL]
    struct strata_mat wkv_a;      // [KVL+R][E]: latent then the shared rope key
    const float *kv_a_norm;       // [KVL]
    struct strata_mat wk_b;       // H matrices [KVL][nope], one after the other (query absorption)
    struct strata_mat wv_b;       // H matrices [Vh][KVL] (value expansion)
};

// Sparse-attention indexer weights (deepseek32, glm-dsa) of a block that computes its own top-k:
// IH heads of ID dims, QL the q rank.
struct strata_indexer_layer {
    struct strata_mat wq_b;       // [IH*ID][QL] indexer.attn_q_b, on the normed q low-rank activation
    struct strata_mat wk;         // [ID][E] indexer.attn_k
    const float *k_norm, *k_norm_b; // [ID] LayerNorm weight and bias of the key, or NULL (glm-dsa)
    struct strata_mat proj;       // [IH][E] indexer.proj: the heads' weights
};

struct strata_layer {
    const float *attn_norm;       // [E]
    bool mla;                     // attention is MLA (weights in .mla; wo is [E][H*Vh])
    struct strata_mla_layer mla_w;
    bool sparse;                  // the attention sees only the indexer's top-k positions
    int32_t idx_slot;             // the block's slot in the indexer key cache when it computes its own
                                  // top-k (weights in .idx); -1: it reuses the last block's mask
    struct strata_indexer_layer idx;
    struct strata_mat wq;         // [H*D][E]; [H*2D][E] when q_gated
    struct strata_mat wk, wv;     // [Hkv*D][E]
    struct strata_mat wo;         // [E][H*D]
    const float *bq, *bk, *bv;    // [wq.n_out], [Hkv*D], [Hkv*D] projection biases, or NULL
    const float *q_norm, *k_norm; // [D] per-head RMS norms, or NULL
    bool q_gated;                 // wq gives per head [query D | gate D]; the attention output is
                                  // multiplied by sigmoid(gate)
    int32_t kv_slot;              // layer's index in a sequence's KV cache, -1: delta-net block
    struct strata_deltanet_layer dn; // delta-net weights when kv_slot < 0
    const float *ffn_norm;        // [E] norm before the FFN (post_attention_norm in glm/qwen3next)
    int32_t moe_index;            // the expert store's layer index, -1: dense FFN block
    struct strata_mat router;     // [X][E], F32
    struct strata_mat exp_gate, exp_up, exp_down;  // one routed expert [F][E], [F][E], [E][F]: type and
                                                   // shape; data comes from the expert provider
    const float *exp_probs_b;     // [X] expert selection bias, host memory (routing runs there), or NULL
    // gpt-oss: attention output bias, sinks, sliding window, router and expert biases, and the
    // clamped SwiGLU of its experts.
    const float *bo;              // [E] attn_output bias, or NULL
    const float *sinks;           // [H] attention sink logits, or NULL
    bool swa;                     // sliding-window block (hp.n_swa)
    const float *router_b;        // [X] router logit bias, host memory, or NULL
    const float *exp_gate_b, *exp_up_b, *exp_down_b; // [X][F], [X][F], [X][E] per-expert biases, or NULL
    bool swiglu_oai;              // experts' activation is gpt-oss's clamped SwiGLU
    struct strata_mat ffn_gate, ffn_up, ffn_down;  // dense FFN [Fd][E], [Fd][E], [E][Fd]
    struct strata_mat sh_gate, sh_up, sh_down;     // shared expert [Fs][E], [Fs][E], [E][Fs], or no data
    struct strata_mat sh_gate_inp; // [1][E] F32: shared expert scaled by sigmoid(this . h), or no data
};

// Host memory the model keeps: tensors read from the file (the backend's views on the CPU) and
// host copies the forward pass reads on the host.
struct strata_owned {
    void *p;
    size_t bytes;
};

struct strata_model {
    struct strata_gguf_file *file;
    struct strata_hparams hp;
    struct strata_expert_layout layout;
    struct strata_schema schema;  // the architecture's tensors: the loaders take shapes from it
    struct strata_backend *be;    // borrowed: the backend holding the weights
    struct strata_mat tok_embd;   // [V][E]
    struct strata_mat output;     // [V][E] (token_embd when tied)
    const float *output_norm;     // [E]
    struct strata_layer *layers;  // [n_layer]
    uint32_t n_kv_layers;         // layers with a KV cache (full attention)
    uint32_t n_rs_layers;         // delta-net layers (recurrent state)
    uint32_t n_idx_layers;        // blocks computing their own indexer top-k (indexer key cache)
    uint32_t max_act_dim;         // widest input of any product (sizes activation scratch)
    uint32_t max_q_dim;           // widest query projection (gated ones give query and gate)
    bool rope_mrope;              // interleaved M-RoPE sections (hp.rope_sections) apply
    bool rope_ext_on;             // RoPE through rope_ext (pair layout, YaRN) instead of plain NeoX
    struct strata_rope_ext rope_ext;
    struct strata_rope_ext idx_rope;  // the indexer's RoPE (glm-dsa NORM, deepseek32 NEOX pairs)
    float kq_scale;               // attention scale (MLA: with YaRN's mscale), 0: 1/sqrt(head_dim_k)
    bool route_exact;             // routing through model/routing.c (groups, softmax after top-k)
    uint64_t dense_bytes;
    struct strata_owned *owned;   // freed with the model
    size_t n_owned, cap_owned;
    // Host-memory backends (the CPU's views are these bytes): the dense tensors packed into one
    // mapping on huge pages (model.c, own_alloc), the first owned buffer; NULL: one buffer each
    char *arena;
    size_t arena_used, arena_cap;
    struct strata_mat *views;     // every backend view, released with the model
    size_t n_views, cap_views;
};

// The tensor `name` of the model's schema (model/schema.c), its shape checked against it: a
// weight matrix of any type the backend computes with (load_mat; a 3-D [ne0, ne1, ne2] is one view
// of ne1 * ne2 rows: MLA's per-head matrices), an F32 vector in the backend (2-D: ne1 vectors)
// (load_vec) or in host memory (load_vec_host, read by routing), an F32 matrix transposed to
// [ne0][ne1] (load_transposed: conv taps). A tensor the schema marks optional may be absent
// (zeroed view / NULL then); any other absence, shape or type mismatch is an error (logged).
int strata_model_load_mat(struct strata_model *m, const char *name, struct strata_mat *out);
int strata_model_load_vec(struct strata_model *m, const char *name, const float **out);
int strata_model_load_vec_host(struct strata_model *m, const char *name, const float **out);
int strata_model_load_transposed(struct strata_model *m, const char *name, const float **out);
// Whether the architecture's schema has a tensor of that name.
bool strata_model_has(const struct strata_model *m, const char *name);
// token_embd, output_norm and output (token_embd when absent: tied embeddings).
int strata_model_load_io(struct strata_model *m);
// Attention tensors of block l: attn_q ([E][2*H*D] when gated: per head query then gate),
// attn_k, attn_v, attn_output, and the q/k/v biases and per-head q/k norms the schema has.
int strata_model_load_attention(struct strata_model *m, uint32_t l, bool gated);
// Check the expert tensors of block l (MoE layer L->moe_index): shapes and types.
int strata_model_check_experts(struct strata_model *m, uint32_t l);

int strata_qwen3moe_load(struct strata_model *m);
int strata_glm4moe_load(struct strata_model *m);
int strata_qwen3next_load(struct strata_model *m);   // qwen3next and qwen35moe
int strata_deepseek2_load(struct strata_model *m);
int strata_gpt_oss_load(struct strata_model *m);

#endif
