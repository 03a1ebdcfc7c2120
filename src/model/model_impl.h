// Internal structures of models and sessions, shared by the architecture files.
#ifndef STRATA_MODEL_IMPL_H
#define STRATA_MODEL_IMPL_H

#include <stddef.h>

#include "compute/ops.h"
#include "compute/pool.h"
#include "experts/experts.h"
#include "experts/layout.h"
#include "experts/trace.h"
#include "model/model.h"

struct strata_layer {
    const float *attn_norm;       // [E]
    struct strata_mat wq;         // [H*D][E]
    struct strata_mat wk, wv;     // [Hkv*D][E]
    struct strata_mat wo;         // [E][H*D]
    const float *q_norm, *k_norm; // [D]
    const float *ffn_norm;        // [E]
    struct strata_mat router;     // [X][E], F32
};

struct strata_owned {
    void *p;
    size_t bytes;
};

struct strata_model {
    struct gguf_file *file;
    struct strata_hparams hp;
    struct strata_expert_layout layout;
    struct strata_experts *experts;
    struct strata_trace_writer *trace;  // route trace (--trace-out), or NULL
    const struct strata_kernels *kernels;
    struct strata_mat tok_embd;   // [V][E]
    struct strata_mat output;     // [V][E] (token_embd when tied)
    const float *output_norm;     // [E]
    struct strata_layer *layers;  // [n_layer]
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
    float *att_scratch;                       // [n_threads][n_ctx]
    float *logits_tmp;                        // [n_vocab]
    int32_t *trace_ids;                       // [n_batch][n_layer][K] when tracing, else NULL
    struct strata_phase_stats stats;
};

int strata_model_load_vec(struct strata_model *m, const char *name, uint64_t n, const float **out);
int strata_model_load_mat(struct strata_model *m, const char *name, uint64_t n_in, uint64_t n_out,
                          bool required, struct strata_mat *out);

int strata_qwen3moe_load(struct strata_model *m);
// Forward n tokens (n <= n_batch) at positions s->n_past..; logits as in strata_session_eval.
int strata_qwen3moe_forward(struct strata_session *s, const int32_t *tokens, int n, float *logits,
                            bool all_logits);

double strata_now(void);

#endif
