// Internal structures of models and sessions, shared by the architecture files.
#ifndef STRATA_MODEL_IMPL_H
#define STRATA_MODEL_IMPL_H

#include <stddef.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/pool.h"
#include "experts/experts.h"
#include "experts/layout.h"
#include "experts/trace.h"
#include "model/model.h"
#include "util/time.h"

// Weights of one gated delta-net (linear attention) block: dk = dv = ssm_d_state, nk key heads,
// nv value heads, C = 2*nk*dk + nv*dv conv channels (q | k | v).
struct strata_deltanet_layer {
    struct strata_mat qkv;        // [C][E]
    struct strata_mat z;          // [nv*dv][E] output gate (attn_gate)
    struct strata_mat ba;         // [2*nv][E] qwen3next: per key head [r betas | r alphas], r = nv/nk
    struct strata_mat beta, alpha; // [nv][E] each (qwen35moe); data NULL when ba is used
    const float *conv;            // [C][K] causal conv1d taps, F32
    const float *dt_bias;         // [nv]
    const float *a;               // [nv] -exp(A_log): decay rate, negative
    const float *norm;            // [dv] RMS norm of each head's output
    struct strata_mat out;        // [E][nv*dv]
    int32_t rs_slot;              // index of the block's conv and delta state in the session
};

struct strata_layer {
    const float *attn_norm;       // [E]
    struct strata_mat wq;         // [H*D][E]; [H*2D][E] when q_gated
    struct strata_mat wk, wv;     // [Hkv*D][E]
    struct strata_mat wo;         // [E][H*D]
    const float *bq, *bk, *bv;    // [H*D], [Hkv*D], [Hkv*D] projection biases (glm4moe), or NULL
    const float *q_norm, *k_norm; // [D], or NULL (glm4moe without q/k norms)
    bool q_gated;                 // qwen3next: wq gives per head [query D | gate D]; the attention
                                  // output is multiplied by sigmoid(gate)
    int32_t kv_slot;              // layer's index in the KV cache, -1: delta-net block
    struct strata_deltanet_layer dn; // delta-net weights when kv_slot < 0
    const float *ffn_norm;        // [E] norm before the FFN (post_attention_norm in glm/qwen3next)
    int32_t moe_index;            // the expert store's layer index, -1: dense FFN block
    struct strata_mat router;     // [X][E], F32
    const float *exp_probs_b;     // [X] expert selection bias (glm4moe), or NULL
    struct strata_mat ffn_gate, ffn_up, ffn_down;  // dense FFN [Fd][E], [Fd][E], [E][Fd]
    struct strata_mat sh_gate, sh_up, sh_down;     // shared expert [Fs][E], [Fs][E], [E][Fs], or no data
    struct strata_mat sh_gate_inp; // [1][E] F32: shared expert scaled by sigmoid(this . h), or no data
};

struct strata_owned {
    void *p;
    size_t bytes;
};

struct strata_model {
    struct strata_gguf_file *file;
    struct strata_hparams hp;
    struct strata_expert_layout layout;
    struct strata_experts *experts;
    struct strata_trace_writer *trace;  // route trace (--trace-out), or NULL
    const struct strata_kernels *kernels;
    struct strata_mat tok_embd;   // [V][E]
    struct strata_mat output;     // [V][E] (token_embd when tied)
    const float *output_norm;     // [E]
    struct strata_layer *layers;  // [n_layer]
    uint32_t n_kv_layers;         // layers with a KV cache (full attention)
    uint32_t n_rs_layers;         // delta-net layers (recurrent state)
    uint32_t max_act_dim;         // widest input of any product (sizes activation scratch)
    uint64_t dense_bytes;
    struct strata_owned *owned;   // tensor buffers, freed with the model
    size_t n_owned, cap_owned;
};

// One routed (token, expert) pair of a chunk; pairs are sorted by expert then token.
struct strata_route {
    int32_t token;     // row in the chunk
    int32_t expert;
    float weight;
};

struct strata_session {
    struct strata_model *m;
    struct strata_pool *pool;
    int n_ctx, n_batch, n_past;
    float *k_cache, *v_cache;     // [n_layer][n_ctx][Hkv*D]
    // chunk scratch, sized for n_batch tokens
    float *x, *h, *q, *k, *v, *attn, *o;     // [n_batch][...]
    float *router_logits;                     // [n_batch][X]
    struct strata_route *routes;              // [n_batch*K]
    int32_t *route_of;                        // [n_batch][K]: index into routes, selection order
    float *gate_out, *up_out, *down_out;      // [n_batch*K][F] / [n_batch*K][E]
    void *act_a, *act_b;                      // quantized activations, act_bytes each
    size_t act_bytes;
    int32_t *idx_a, *idx_b;                   // [n_batch*K] row index lists
    uint32_t *expert_ids;                     // [X]
    struct strata_expert_view *views;         // [X]
    int32_t *expert_first, *expert_count;     // [X]
    float *q_gate;                            // [n_batch][H*D] attention output gate (q_gated)
    float *ffn_a, *ffn_b;                     // [n_batch][max(Fd, Fs)] dense / shared FFN
    float *ffn_out;                           // [n_batch][E] shared expert output
    struct strata_deltanet_state *dn;         // delta-net state and scratch, NULL without
    float *att_scratch;                       // [n_threads][n_ctx]
    float *logits_tmp;                        // [n_vocab]
    int32_t *trace_ids;                       // [n_batch][n_layer][K] when tracing, else NULL
    struct strata_phase_stats stats;
};

int strata_model_load_vec(struct strata_model *m, const char *name, uint64_t n, const float **out);
int strata_model_load_mat(struct strata_model *m, const char *name, uint64_t n_in, uint64_t n_out,
                          bool required, struct strata_mat *out);

// An F32 vector that may be absent (*out NULL then).
int strata_model_load_vec_opt(struct strata_model *m, const char *name, uint64_t n, const float **out);
// token_embd, output_norm and output (token_embd when absent: tied embeddings).
int strata_model_load_io(struct strata_model *m);
// Attention tensors of block l: attn_q ([E][2*H*D] when gated: per head query then gate),
// attn_k, attn_v, attn_output, the optional q/k/v biases, and the q/k norms (required or
// optional).
int strata_model_load_attention(struct strata_model *m, uint32_t l, bool gated, bool norms_required);

int strata_qwen3moe_load(struct strata_model *m);
int strata_glm4moe_load(struct strata_model *m);
int strata_qwen3next_load(struct strata_model *m);   // qwen3next and qwen35moe
// Forward n tokens (n <= n_batch) at positions s->n_past..; logits as in strata_session_eval.
// One forward for every architecture: each block is attention or delta-net, then a dense FFN
// or routed experts (plus a shared expert), as the layer's weights say.
int strata_model_forward(struct strata_session *s, const int32_t *tokens, int n, float *logits,
                         bool all_logits);

// Pieces of the forward pass shared by the architectures (qwen3moe.c, blocks.c, deltanet.c).
// Each reads s->x (the residual stream [n][E]) and adds its block's output to it.
int strata_attention_block(struct strata_session *s, int l, int n);
int strata_moe_block(struct strata_session *s, int l, int n);
int strata_dense_ffn_block(struct strata_session *s, int l, int n);
int strata_deltanet_block(struct strata_session *s, int l, int n);
// The shared expert of layer l on s->h into s->ffn_out (gated when the layer has a gate).
void strata_shared_expert(struct strata_session *s, int l, int n);
// Run y_i = W_i x for weights w[0..nw) on the same n rows of x (stride: each w's n_in), rounding
// x to each weight's dot format once per distinct format. Outputs have stride n_out.
void strata_project(struct strata_session *s, const struct strata_mat *const *w, float *const *y, int nw,
                    const float *x, int n);
// Load the expert tensors of block l as MoE layer L->moe_index, checking shapes and types.
int strata_model_check_experts(struct strata_model *m, uint32_t l);
// Session scratch the newer architectures need (q gate, FFN buffers, delta-net state); freed
// by strata_session_free_extra. strata_session_reset_extra forgets the recurrent state.
int strata_session_alloc_extra(struct strata_session *s);
void strata_session_free_extra(struct strata_session *s);
void strata_session_reset_extra(struct strata_session *s);
int strata_deltanet_state_create(struct strata_deltanet_state **out, const struct strata_model *m, int n_batch);
void strata_deltanet_state_free(struct strata_deltanet_state *st);
void strata_deltanet_state_reset(struct strata_deltanet_state *st);
// Interleaved M-RoPE (qwen35moe) for text positions: the pairs fed by the fourth section turn
// by position 0, i.e. not at all. cs as from strata_rope_cache.
void strata_rope_sections_mask(const struct strata_hparams *hp, float *cs);


#endif
