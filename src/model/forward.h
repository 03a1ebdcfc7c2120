// The forward pass: one for every architecture, written only against the backend interface
// (backend/backend.h). A pass takes the tokens of one or more sequences (each with its own KV
// cache or recurrent state and its positions), runs every layer over all of them at once, so that
// the sequences share each layer's expert fetches, and returns the logits each asks for. A
// token's results are bit-identical whatever else shares its pass.
//
// Per layer (what runs is decided by the layer's weights and flags, never by the architecture):
//   RMSNorm → attention (q/k/v projections, biases, per-head q/k norms, RoPE, the KV cache,
//   optional sigmoid output gate) or gated delta-net → output projection → residual;
//   RMSNorm → a dense SwiGLU FFN, or the router → host routing → expert fetches → SwiGLU experts
//   (each needed expert's tokens in one product) → weighted sum (+ shared expert) → residual.
// Then the final norm and the output head for the tokens that want logits.
//
// Memory: the scratch of a pass (activations of up to max_tok tokens) lives in the backend and
// belongs to one struct strata_forward, which runs one pass at a time (the engine serialises
// them). Sequence state (struct strata_seq_state) belongs to its session.
#ifndef STRATA_MODEL_FORWARD_H
#define STRATA_MODEL_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/lookahead.h"
#include "experts/provider.h"
#include "strata.h"  // enum strata_gpu_miss

struct strata_forward;
struct strata_model;
struct strata_vram;
struct strata_backend;

// What one sequence keeps between passes, in backend memory.
struct strata_seq_state {
    void *kv;                   // the backend's KV cache (kv_create), NULL without attention layers
    float *conv, *ssm;          // delta-net conv history and state (NULL without delta-net blocks)
    int n_ctx;
    uint64_t kv_pos_bytes;      // bytes of one position of one attention layer's cache (K and V)
};

// Allocate the state of a sequence of up to n_ctx positions with a KV cache of these types (enum
// strata_type: F32, F16, BF16, Q8_0; the backend says which it takes for this model). The
// recurrent state is zeroed; the KV cache may grow as positions are written. 0 or negative.
int strata_seq_state_alloc(struct strata_seq_state *st, const struct strata_model *m, int n_ctx, uint32_t k_type,
                           uint32_t v_type);
void strata_seq_state_free(struct strata_seq_state *st, const struct strata_model *m);
// Bytes its KV cache holds now.
uint64_t strata_seq_state_kv_bytes(const struct strata_seq_state *st, const struct strata_model *m);
// KV cache bytes per position of context with these types (all layers, keys and values).
// Whether every attention layer is plain causal attention (no window, sinks or latent cache): the
// KV caches such a model's attention takes in F16, BF16 and Q8_0 as well as F32.
bool strata_seq_kv_typed(const struct strata_model *m);
uint64_t strata_seq_kv_bytes_per_token(const struct strata_model *m, uint32_t k_type, uint32_t v_type);
// What a sequence of n_ctx positions takes at most (its KV cache full, the recurrent state): what
// the memory bound provisions for it.
uint64_t strata_seq_state_bytes(const struct strata_model *m, int n_ctx, uint32_t k_type, uint32_t v_type);
// Forget the recurrent state (the KV cache is overwritten as positions are evaluated again).
int strata_seq_state_reset(struct strata_seq_state *st, const struct strata_model *m);

// Every token's routed experts of one pass of a sequence: ids [n_tok][n_layers][k] (MoE layers
// only), in selection order. Called once per pass per sequence that asks, after the layers; a
// non-zero return (negative code) ends the pass with it.
typedef int (*strata_route_fn)(void *user, const int32_t *ids, int n_tok, uint32_t n_layers, uint32_t k);

// One sequence's part of a pass.
struct strata_fwd_seq {
    const int32_t *tokens;      // [n_tok] host, checked against the vocabulary by the caller
    int n_tok;
    int pos0;                   // position of tokens[0]; pos0 + n_tok <= state->n_ctx
    struct strata_seq_state *state;
    float *logits;              // host: [n_tok][n_vocab] when all_logits, else [n_vocab] for the
    bool all_logits;            //   last token; NULL: none
    int32_t *pick;              // host: the argmax (strata_argmax) of each of those rows, [n_tok] or
                                //   [1]; NULL: none. With logits NULL the rows stay in the backend.
    int top_k;                  // with top: the top_k best of each of those rows (strata_top_k),
    struct strata_token_logit *top; //   [n_tok][top_k] or [top_k]; 1 <= top_k <= STRATA_TOP_K_MAX
    strata_route_fn on_route;   // or NULL
    void *route_user;
};

// Time per phase of a pass (seconds), and the bytes each phase read: the weights of its products
// (each matrix once a call, the experts the pass computed) and, in attention, the KV cache rows
// of the positions attended (once a layer and sequence).
struct strata_fwd_stats {
    double t_embed, t_attn, t_linear_attn, t_router, t_experts, t_head;
    uint64_t b_attn, b_linear_attn, b_router, b_experts, b_head;
    // filled by the engine around the pass: its wall time and the host threads' share of it
    // (decode: one token a sequence)
    bool decode;
    int n_threads;             // 0: the backend has no thread pool
    struct strata_thread_stats threads;
};

// Scratch for passes of up to max_tok tokens over sequences of up to max_ctx positions, in the
// model's backend; routed experts come from `experts` (its context borrowed). 0 or negative.
int strata_forward_create(struct strata_forward **out, const struct strata_model *m,
                          struct strata_expert_provider experts, int max_tok, int max_ctx);
void strata_forward_free(struct strata_forward *f);
// Replace the expert provider (before the first pass and before set_prefetch): the engine sizes
// the expert cache after the scratch exists when it derives the cache from a memory bound.
void strata_forward_set_experts(struct strata_forward *f, struct strata_expert_provider experts);
// Router lookahead prefetch (experts/lookahead.h): `ahead` MoE layers ahead (0: off), a token's
// first k guesses prefetched (0: all top-k). 0 or negative.
int strata_forward_set_prefetch(struct strata_forward *f, int ahead, uint32_t k);
// Its guesses scored for one MoE layer (zeroes when off).
void strata_forward_lookahead_stats(const struct strata_forward *f, uint32_t moe_layer,
                                    struct strata_lookahead_stats *st);
int strata_forward_max_tok(const struct strata_forward *f);

// Misses of a VRAM tier served without a copy (issue 11; docs/expert-store.md, "Misses computed on
// the CPU"): in passes of at most the backend's moe_sparse_tok tokens, a layer's experts that the
// tier does not hold are either copied (the tier's acquire) or computed by `cpu` (a CPU backend)
// from `host`'s views (the host store behind the tier), as `mode` says: COPY every one (the output
// then does not depend on the budget), CPU every one (each then also prefetched into the tier),
// AUTO the split that a cost model measured on this run says ends first. NULL vram: off. 0 or negative.
int strata_forward_set_gpu_miss(struct strata_forward *f, struct strata_vram *vram, struct strata_expert_provider host,
                                struct strata_backend *cpu, enum strata_gpu_miss mode);
struct strata_gpu_miss_stats {
    uint64_t cpu_experts;       // expert-passes computed on the CPU
    uint64_t cpu_pairs;         // token-expert pairs they computed
    uint64_t copied;            // misses the split sent to the copy path
    uint64_t used, hits;        // experts the split layers used, and those the tier held (decode's own
                                // hit rate: a prompt's accesses, counted in the tier's, are not here)
    double cpu_s;               // wall time of their CPU products (the GPU ran the hits meanwhile)
    double s_cpu, s_pcie;       // the cost model's seconds per GB: CPU (per token), PCIe
};
void strata_forward_gpu_miss_stats(const struct strata_forward *f, struct strata_gpu_miss_stats *out);
// Let passes reach sequences of max_ctx positions (grows the backend's attention scratch).
int strata_forward_reserve_ctx(struct strata_forward *f, int max_ctx);
// One pass over seqs[0..n_seq) (their tokens together at most max_tok); adds its phase times to
// *st. 0 or negative (an expert read that failed after retries, a backend error; logged).
int strata_forward_run(struct strata_forward *f, const struct strata_fwd_seq *seqs, int n_seq,
                       struct strata_fwd_stats *st);

#endif
