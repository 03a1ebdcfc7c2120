// The backend interface (docs/architecture.md, "Seam 1"): everything the forward pass computes,
// as a table of functions over an opaque context, in the manner of ggml-backend. The CPU backend
// (backend/cpu/cpu.c) is the reference implementation; a GPU backend fills the same table.
//
// Memory. Every pointer an op takes is in the backend's memory ("backend memory": host memory
// for the CPU backend, device memory for a GPU one) unless the comment says "host". The forward
// pass never reads backend memory directly: it moves data with upload / download. A backend
// pointer may be offset with ordinary pointer arithmetic (the forward pass addresses rows).
// Weights are views (struct strata_mat) whose data is backend memory; weight_load makes one from
// a host matrix read from the GGUF.
//
// Ordering. Ops run in the order they are called, each seeing the results of the ones before it
// (a GPU backend queues them on one stream). download and sync wait for everything queued. An op
// returns 0 or a negative STRATA_E* code after one log line (a GPU launch failure); the CPU
// backend's ops cannot fail.
//
// Determinism. A backend is bit-reproducible across runs, thread counts and chunk sizes, and a
// token's results never depend on which other tokens share its pass (mm rows, attention and
// delta-net of one sequence are computed the same way whatever else is in the batch).
//
// One pass at a time. A backend serves one forward pass at a time (the engine serialises them);
// its scratch is shared by all sessions of the engine.
//
// Graph capture. Nothing here needs a host read of backend memory inside a pass except the
// router logits the forward pass downloads to route on the host (when experts have to be
// fetched; with route and moe and every expert resident, routing stays on the device).
// Positions and sequence descriptors are given before the ops of a pass (batch_begin), so a GPU
// backend can replay a recorded decode step with new contents.
#ifndef STRATA_BACKEND_H
#define STRATA_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata.h"  // enum strata_backend_kind

// A weight matrix y = W x: n_out rows of n_in elements in `type` blocks, row after row.
struct strata_mat {
    const void *data;   // [n_out][row_bytes], backend memory (host memory before weight_load)
    uint32_t type;      // enum strata_type
    uint32_t n_in;      // GGUF ne[0]
    uint32_t n_out;     // GGUF ne[1]
    uint64_t row_bytes;
};

// Whether a and b have the same format and shape (their weights may differ).
static inline bool strata_mat_same_shape(const struct strata_mat *a, const struct strata_mat *b)
{
    return a->type == b->type && a->n_in == b->n_in && a->n_out == b->n_out && a->row_bytes == b->row_bytes;
}

// Whether a and b are the same matrix: the same weights in the same format and shape.
static inline bool strata_mat_same(const struct strata_mat *a, const struct strata_mat *b)
{
    return a->data == b->data && strata_mat_same_shape(a, b);
}

// One product of an mm call: y[y_row(t)][0..w.n_out) = W · x[x_row(t)] for t in 0..n_tok, where
// x_row(t) = x_rows ? x_rows[t] : t and likewise y_row. x holds float rows; the backend rounds
// them to the weight type's dot format itself (ggml's vec_dot_type on the CPU), once per distinct
// (x, x_stride, x_n, format) within one call.
struct strata_mm_op {
    struct strata_mat w;
    const float *x;          // activation rows, x_stride floats apart
    size_t x_stride;
    int x_n;                 // rows of x the op may read (x_rows index below it); with x_rows NULL, n_tok
    const int32_t *x_rows;   // [n_tok] gather list in backend memory, or NULL
    int n_tok;
    float *y;
    size_t y_stride;         // floats between output rows
    const int32_t *y_rows;   // [n_tok] scatter list in backend memory, or NULL
    const float *add;        // added to each result row (same layout as y, may be y), or NULL; only
                             // for backends with mm_add
};

// One sequence (session) in a forward pass. Its tokens are rows tok0 .. tok0 + n_tok - 1 of the
// pass, at positions pos0 .. pos0 + n_tok - 1 of the sequence.
struct strata_seq {
    int tok0, n_tok, pos0;
    int n_ctx;               // positions its KV cache holds
    void *kv;                // its KV cache (kv_create), or NULL without attention layers
    float *conv;             // delta-net conv history [n_rs_layers][K - 1][C], oldest row first
    float *ssm;              // delta-net state [n_rs_layers][nv][d key][d value]
};

// The tokens of one forward pass: sequences in row order, each one's tokens contiguous.
struct strata_batch {
    int n_tok, n_seq;
    const struct strata_seq *seq;   // host [n_seq]; valid from batch_begin to the pass's end
    const int32_t *pos;             // [n_tok] each token's position in its sequence
};

// RoPE beyond plain NeoX (deepseek2, deepseek32, glm-dsa, gpt-oss): the pair layout and YaRN
// scaling, with the factors llama.cpp's context derives from the GGUF's rope keys (host code
// fills it: model/rope_scaling.h; backend/cpu/rope_ext.c has the CPU kernel and the formulas).
// Pair i at position p turns by theta = freq_scale * p * base^(-2i/n_dims) (the power accumulated
// in float as ggml builds its cache), mixed with the unscaled angle over a ramp between the
// correction dims when ext_factor != 0; cos and sin are scaled by attn_factor (times
// 1 + 0.1 ln(1 / freq_scale) under YaRN).
enum strata_rope_mode { STRATA_ROPE_NORM, STRATA_ROPE_NEOX };  // pairs (2i, 2i+1) | (i, i + n/2)
struct strata_rope_ext {
    uint32_t n_dims;           // rotated dims (even)
    enum strata_rope_mode mode;
    float freq_base;
    float freq_scale;          // 1 / rope.scaling.factor (1: no scaling)
    float ext_factor;          // 1 with YaRN, else 0
    float attn_factor;         // llama.cpp's cparams.yarn_attn_factor
    float corr_dims[2];        // YaRN ramp: first and last dim pair it spans
    float theta_scale;         // base^(-2 / n_dims)
};

// RoPE (NeoX: pairs (i, i + n_rot/2), i < n_rot/2, angle pos * freq_base^(-2i/n_rot) accumulated
// in float as ggml builds its cache) on the first n_rot dims of n_head heads of every token,
// in place; with `ext`, as it says instead (x may then point into a head, e.g. MLA's rope part).
struct strata_rope_op {
    float *x;                // head h of token t at x + t * tok_stride + h * head_stride
    size_t tok_stride, head_stride;
    int n_tok;
    uint32_t n_head;
    const int32_t *pos;      // [n_tok]
    uint32_t n_rot;
    float freq_base;
    // Interleaved M-RoPE for text (qwen35moe): the pairs of the fourth section turn by position 0
    // (not at all). NULL: plain NeoX.
    const int32_t *sections; // host [4], or NULL
    const struct strata_rope_ext *ext;  // host: layout and YaRN (n_rot, freq_base unused), or NULL
};

// Causal softmax attention of every token of the pass over its own sequence's KV cache. First
// the pass's keys and values are stored into each sequence's cache at the tokens' positions
// (layer kv_slot; the cache grows to hold them, rounding them to its types), then each token
// attends to positions 0 .. its own. With a key type other than F32 the query is rounded to the
// key type's dot format first (ggml's vec_dot_type: F16, BF16, Q8_0 blocks along the head), as
// llama.cpp rounds it for its product with the cache.
struct strata_attn_op {
    const struct strata_batch *batch;
    uint32_t kv_slot;
    const float *q;          // head h of token t at q + t * q_tok_stride + h * q_head_stride
    size_t q_tok_stride, q_head_stride;
    const float *k;          // [n_tok][n_head_kv * head_dim_k]
    const float *v;          // [n_tok][n_head_kv * head_dim_v]
    float *out;              // [n_tok][n_head * head_dim_v]
    uint32_t n_head, n_head_kv, head_dim_k, head_dim_v;
    float scale;             // kq scale, 1/sqrt(head_dim_k)
    // Optional (zero: the above). ggml's order of operations with any of them is in
    // backend/cpu/attn.h; masked positions add exact zeros at their absolute lanes.
    bool latent_kv;          // MLA: the key row of a token is [latent (head_dim_v) | rope key], its
                             // value is the row's first head_dim_v floats: no V cache, v unused
    uint32_t n_swa;          // sliding window: a token at p sees positions c with p - c < n_swa (0: all)
    const float *sinks;      // [n_head] sink logits joining each head's softmax (gpt-oss), or NULL
    const uint8_t *visible;  // token t's row at visible + t * visible_stride: 0 hides a position
    size_t visible_stride;   //   (the indexer's top-k), or NULL; stride 0: the token's sequence's n_ctx
    uint32_t next_vdt;       // hint: the very next op is an mm of `out` rows in this activation
                             // format (0: unknown); a backend may round them while it writes them
};

// Attention with its queries and keys prepared in the same op (the optional attention_rope op):
// the per-head RMS norms (q_norm / k_norm over head_dim_k, NULL: none; sums as rmsnorm), NeoX
// RoPE on the first n_rot dims (sections: qwen35moe's M-RoPE mask, as rope), the keys and values
// stored, then attention as the attention op. q and k are rewritten in place as rmsnorm and rope
// would; no YaRN, pair layout, MLA, window, sinks or mask (the forward pass keeps the separate
// ops for those).
struct strata_attn_rope_op {
    const struct strata_attn_op *attn;  // q, k as attn's, writable: attn->q, attn->k
    float *q, *k;
    const float *q_norm, *k_norm;       // [head_dim_k] or NULL
    float eps;
    uint32_t n_rot;
    float freq_base;
    const int32_t *sections;            // host [4], or NULL
};

// The sparse-attention indexer of every token of the pass (deepseek32, glm-dsa): q and k are
// multiplied by the d x d Walsh-Hadamard matrix (entries +-1/sqrt(d); ggml's sgemm order for the
// n_head query rows of a token, ggml_vec_dot_f32's for its one key row), the keys stored in the
// indexer layer idx_slot of the sequence's KV cache (strata_kv_params' idx_layers) at the tokens'
// positions; then per token t at position p
// and cached position c <= p: score = sum over heads h (in order) of relu(q[t][h] . k(c)) * w[t][h]
// (the accumulation fused), and visible[t][c] = 1 for the top_k highest scores (all when p < top_k;
// equal scores at the boundary kept as std::partial_sort's heap keeps them), 0 elsewhere (up to
// the sequence's n_ctx). The weights are first multiplied by w_scale (ggml_scale: one float
// product each) unless it is 0.
struct strata_indexer_op {
    const struct strata_batch *batch;
    uint32_t idx_slot;
    float *q;                // [n_tok][n_head][d], roped; overwritten with its Hadamard product
    float *k;                // [n_tok][d], normed and roped; likewise
    float *w;                // [n_tok][n_head] head weights; overwritten with w * w_scale
    float w_scale;           // llama.cpp's 1/sqrt(d * n_head); 0: w is already scaled
    uint8_t *visible;        // out: token t's row at visible + t * visible_stride
    size_t visible_stride;   // 0: the token's sequence's n_ctx
    uint32_t n_head, d, top_k;
};

// The gated delta-net of every sequence of the pass (linear attention between its projections):
// gates, causal conv1d + SiLU, L2 norm of q and k, the delta rule, gated RMS norm. Per token,
// with nk key heads, nv value heads (r = nv / nk), head size d, C = 2*nk*d + nv*d channels:
//   beta_h = sigmoid(b_h); decay_h = exp(softplus(a_h + dt_bias_h) * a_log_h)
//   c = SiLU(conv1d(qkv)) over K taps of each channel's history; q, k = L2(c's key heads)
//   per value head h (key head h / r, or h % nk when kv_tiled):
//     S *= decay; S += k (beta (v - S^T k))^T; o = S^T q / sqrt(d)
//   out_h = RMSNorm(o_h) * norm * SiLU(z_h)
// Each sequence's conv history and state (rs_slot) carry over from its previous pass.
struct strata_deltanet_op {
    const struct strata_batch *batch;
    uint32_t rs_slot;
    const float *qkv;        // [n_tok][C] the projection feeding the conv
    const float *z;          // [n_tok][nv * d] output gate
    const float *ba;         // fused: [n_tok][nk][r betas | r alphas]; split: [n_tok][nv] betas,
    bool ba_split;           //   then [n_tok][nv] alphas at ba + n_tok * nv
    const float *conv_taps;  // [K][C] (taps of one time step contiguous over channels)
    const float *dt_bias;    // [nv]
    const float *a;          // [nv] -exp(A_log)
    const float *norm;       // [d]
    float *out;              // [n_tok][nv * d]
    float *work;             // scratch, n_tok * (C + 2 * nv) floats
    uint32_t nk, nv, d, conv_k;
    bool kv_tiled;
    float eps;
};

// MoE output: x[t] += sum_k weight[t][k] * rows[route_of[t][k]] (+ shared[t]), the sum taken in
// selection order k = 0, 1, ... and added to x as one term.
struct strata_moe_combine_op {
    float *x;                // [n_tok][n]
    const float *rows;       // [pairs][n] routed expert outputs
    const int32_t *route_of; // [n_tok][k]
    const float *weight;     // [n_tok][k]
    const float *shared;     // [n_tok][n] shared-expert output, or NULL
    int n_tok, k;
    uint32_t n;
};

// The KV cache of one sequence, in the backend's own layout (the attention op is its only reader
// and writer).
struct strata_kv_params {
    uint32_t n_layers;       // attention layers (the ops' kv_slot < n_layers)
    uint32_t n_head_kv, head_dim_k, head_dim_v;  // head_dim_v 0: no V cache (latent_kv)
    int n_ctx;               // positions it may hold
    uint32_t k_type, v_type; // enum strata_type: F32, F16, BF16 or Q8_0
    bool plain;              // no attention op on it uses latent_kv, n_swa, sinks or visible
    uint32_t idx_layers, idx_dim; // the indexer's keys: idx_layers layers of idx_dim F32 per position
                             // (the blocks computing their own top-k), grown with the positions
                             // as the attention's (0: none)
};

// Largest work the engine will ask of the backend, so it can size its scratch up front. May be
// called again with larger values (a new session with a longer context).
struct strata_backend_reserve {
    int max_tok;             // tokens in one pass
    int max_rows;            // activation rows of one mm call (tokens x experts per token)
    uint32_t max_n_in;       // widest input of any product
    uint32_t rows_n_in;      // widest input of the products with more rows than tokens (the routed
                             // experts' down projection); 0: max_n_in
    int max_ctx;             // longest KV cache
};

// Routing of one MoE layer (the optional route op; the host routing of model/ computes the same).
struct strata_route_params {
    uint32_t n_expert, n_used;
    bool sigmoid;            // sigmoid gating (else softmax)
    bool norm;               // renormalise the chosen weights
    float scale;             // multiply the weights (0 or 1: none)
    const float *bias;       // [n_expert] selection bias added to the scores (backend memory), or NULL
};

// The routed experts of one MoE layer from device routes (the optional moe op, beside route): per
// token t and choice k, y = down_e(silu(gate_e h[t]) * up_e h[t]) with e = ids[t][k], then
// x[t] += sum_k weight[t][k] * y_k (+ shared[t]), the sum in selection order as moe_combine: the
// same values as the mm / swiglu / mm / moe_combine sequence of the host-routed path.
struct strata_moe_op {
    const float *h;          // [n_tok][n_in] the normed input
    float *x;                // [n_tok][down.n_out] the residual, added to
    const int32_t *ids;      // [n_tok][k] from route
    const float *weight;     // [n_tok][k]
    const void *const *table; // [3][n_expert] the gate, up and down matrices of each expert (backend
                             // memory: a table of backend pointers)
    struct strata_mat gate, up, down;  // shapes and types of one expert's matrices (data unused)
    const float *shared;     // [n_tok][down.n_out] shared-expert output, or NULL
    int n_tok, k;
    uint32_t n_expert;
    float *gate_out, *up_out, *down_out;  // scratch [n_tok * k][gate.n_out] twice, [n_tok * k][down.n_out]
    bool sparse;             // table entries of selected experts may be NULL: those experts add
                             // nothing (computed elsewhere); only for n_tok <= the backend's moe_sparse_tok
};

// Device memory of a GPU backend and its decode graphs (mem_info).
struct strata_backend_mem {
    const char *device;      // the device's name (borrowed from the backend)
    uint64_t used, peak;     // bytes the backend holds now / held at most
    uint64_t total;          // the device's memory
    uint64_t free;           // the device's free memory now (all processes; the driver's count)
    uint64_t graphs_replayed, graphs_recorded;  // decode passes replayed from a captured graph / recorded
};

typedef void (*strata_host_part_fn)(void *arg, int part, int i0, int i1);

// The host threads' time (threads_info): struct strata_pool_counters of the CPU backend's pool.
struct strata_backend_threads {
    int n_threads;
    uint64_t runs;           // parallel runs
    double run_s;            // the calling thread's seconds inside runs
    double tail_s;           // of those, waiting for the last thread to finish
    double busy_s;           // every thread's seconds of work inside runs, summed
};

struct strata_backend_i {
    const char *name;        // "cpu", "cuda"
    bool host_memory;        // backend memory is the process's own: ops may take host buffers (the
                             // forward pass then writes logits straight into the caller's array)
    bool alloc_zeroed;       // alloc returns zeroed memory: the forward pass does not clear its
                             // scratch, which would commit every page (strata_backend_params.lazy_memory)
    int moe_sparse_tok;      // most tokens of a moe op with a sparse table (0: never sparse)
    bool mm_add;             // mm honours strata_mm_op.add (the output projection adds the residual
                             // in its epilogue instead of a separate add)
    void (*free)(void *ctx);

    // ---- memory ----
    // bytes of backend memory (64-byte aligned; contents undefined unless alloc_zeroed), NULL with
    // one log line naming `what` when out of memory.
    void *(*alloc)(void *ctx, size_t bytes, const char *what);
    void (*release)(void *ctx, void *p);
    int (*upload)(void *ctx, void *dst, const void *src_host, size_t bytes);
    int (*download)(void *ctx, void *dst_host, const void *src, size_t bytes);
    int (*memset)(void *ctx, void *dst, int value, size_t bytes);
    // A view of host matrix `host` in backend memory: the CPU keeps the host pointer, a GPU
    // uploads. *copied tells the caller whether it may free the host bytes now.
    int (*weight_load)(void *ctx, const struct strata_mat *host, struct strata_mat *view, bool *copied);
    void (*weight_free)(void *ctx, struct strata_mat *view);
    int (*reserve)(void *ctx, const struct strata_backend_reserve *r);
    // Whether the backend multiplies with weights of this type.
    bool (*supports_type)(void *ctx, uint32_t type);
    int (*sync)(void *ctx);

    // ---- KV caches ----
    // A sequence's KV cache for p; memory may be taken as positions are written (the CPU grows it
    // in blocks of 256). 0, STRATA_EUNSUP with one line for types this backend's attention does
    // not take (the CPU: F32 only unless plain; Q8_0 needs head dims divisible by 32), STRATA_ENOMEM.
    int (*kv_create)(void *ctx, const struct strata_kv_params *p, void **kv);
    void (*kv_free)(void *ctx, void *kv);
    // Bytes of backend memory the cache holds now.
    size_t (*kv_bytes)(void *ctx, const void *kv);

    // ---- ops of a forward pass ----
    // Starts a pass over `b` (b and b->seq stay valid until the next batch_begin).
    int (*batch_begin)(void *ctx, const struct strata_batch *b);
    // All ops of one call run in one parallel region (one launch group): products that share
    // nothing may come together.
    int (*mm)(void *ctx, const struct strata_mm_op *ops, int n_ops);
    // out[i][0..w.n_in) = row ids[i] of w, dequantised (the embedding).
    int (*get_rows)(void *ctx, const struct strata_mat *w, const int32_t *ids, int n, float *out);
    // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w (sum of squares in double, as ggml); y may be x.
    int (*rmsnorm)(void *ctx, float *y, size_t y_stride, const float *x, size_t x_stride, const float *w,
                   int n_rows, uint32_t n, float eps);
    int (*rope)(void *ctx, const struct strata_rope_op *op);
    int (*attention)(void *ctx, const struct strata_attn_op *op);
    int (*deltanet)(void *ctx, const struct strata_deltanet_op *op);
    // y[i] = silu(g[i]) * u[i] for n elements; y may be g.
    int (*swiglu)(void *ctx, float *y, const float *g, const float *u, size_t n);
    // y[r][i] += x[r * x_stride + i] for rows r < n_rows of n elements (x_stride 0: one row added
    // to every row, a bias).
    int (*add)(void *ctx, float *y, const float *x, size_t x_stride, int n_rows, uint32_t n);
    // y[r * y_stride + i] *= sigmoid(g[r * g_stride + (g_per_row ? 0 : i)]).
    int (*mul_sigmoid)(void *ctx, float *y, size_t y_stride, const float *g, size_t g_stride, bool g_per_row,
                       int n_rows, uint32_t n);
    int (*moe_combine)(void *ctx, const struct strata_moe_combine_op *op);
    // ids[r] = the first index of the largest of x[r][0..n) (NaN never wins; 0 when none is above
    // -inf), as sample/sampler.h's strata_argmax, for n_rows rows: a greedy token picked where the
    // logits are. Required where host_memory is false (the forward pass runs strata_argmax on host
    // memory itself).
    int (*argmax)(void *ctx, int32_t *ids, const float *x, int n_rows, uint32_t n);
    // out[r][0..k) = the k best of x[r][0..n) (1 <= k <= min(n, STRATA_TOP_K_MAX)) as
    // sample/sampler.h's strata_top_k gives them (logit descending, ties by the lower index, NaN as
    // -inf), for n_rows rows: what sampling with top-k draws from, selected where the logits are.
    // Optional: without it (and on host memory) the forward pass selects on the host.
    int (*topk)(void *ctx, struct strata_token_logit *out, const float *x, int n_rows, uint32_t n, int k);
    // ---- the ops deepseek2 / deepseek32 / glm-dsa / gpt-oss add (docs/architectures.md); a
    // backend may leave them NULL until it runs those architectures (the CPU ops behind them:
    // backend/cpu/ops_ext.h, rope_ext.h, attn.h) ----
    // y[r * y_stride + i] = x[r * x_stride + i] for n_rows rows of n elements (MLA assembles its
    // queries from two products).
    int (*copy)(void *ctx, float *y, size_t y_stride, const float *x, size_t x_stride, int n_rows, uint32_t n);
    // y[r] = (x[r] - mean) / sqrt(var + eps) * w + b over rows of n (ggml_norm: mean and variance
    // summed in double, the squares in lane groups; then ggml_mul, ggml_add); w, b may be NULL.
    int (*layernorm)(void *ctx, float *y, const float *x, const float *w, const float *b, int n_rows, uint32_t n,
                     float eps);
    // gpt-oss's clamped SwiGLU: with x = min(g, limit), y = x / (1 + exp(-alpha x)) *
    // (clamp(u, -limit, limit) + 1) for n elements; y may be g.
    int (*swiglu_oai)(void *ctx, float *y, const float *g, const float *u, size_t n, float alpha, float limit);
    int (*indexer)(void *ctx, const struct strata_indexer_op *op);

    // ---- optional (NULL: not offered) ----
    // Routing on the device, for a layer whose experts are all resident in this backend's memory
    // (no host round trip): from logits [n_tok][n_expert] into ids [n_tok][n_used] and weights
    // [n_tok][n_used], selecting exactly what model/route.c selects on the host.
    int (*route)(void *ctx, const struct strata_route_params *p, const float *logits, int n_tok, int32_t *ids,
                 float *weights);
    // rmsnorm, as a hint that the next products reading y take activations in format next_vdt
    // (a type's vec_dot_type): the backend may round them in the same step. Results as rmsnorm.
    int (*rmsnorm_q)(void *ctx, float *y, size_t y_stride, const float *x, size_t x_stride, const float *w,
                     int n_rows, uint32_t n, float eps, uint32_t next_vdt);
    int (*attention_rope)(void *ctx, const struct strata_attn_rope_op *op);
    // The routed experts of a layer from route's ids and weights (struct strata_moe_op), for a
    // layer whose experts are all resident: no host round trip, one launch group per layer.
    int (*moe)(void *ctx, const struct strata_moe_op *op);
    // Device memory in use (GPU backends; NULL on the CPU, whose memory is the process's).
    void (*mem_info)(void *ctx, struct strata_backend_mem *out);
    // Where the host threads' time went (the CPU backend's pool; NULL elsewhere).
    void (*threads_info)(void *ctx, struct strata_backend_threads *out);
    // Host-side work of a pass split among the backend's host threads (the CPU backend's pool):
    // fn(arg, part, i0, i1) over contiguous parts [i0, i1) of [0, n), at most max_parts of them
    // (part < max_parts: the caller's scratch slot), all done on return. NULL: the caller runs
    // fn(arg, 0, 0, n) itself.
    void (*host_for)(void *ctx, strata_host_part_fn fn, void *arg, int n, int max_parts);
};

struct strata_backend {
    const struct strata_backend_i *iface;
    void *ctx;
};

struct strata_backend_params {
    enum strata_backend_kind kind;
    int n_threads;           // CPU threads (0: all cores); the CPU backend owns its thread pool
    int gpu;                 // device index (GPU backends)
    // A host-memory backend may leave its large buffers (the forward scratch) uncommitted until
    // first written, so a short prompt does not pay for the largest chunk's scratch. Only where
    // nothing sizes a memory bound from the process's resident memory after open (engine.c).
    bool lazy_memory;
};

// Open the backend `p` asks for (auto: the CUDA backend when strata was built with it and a
// usable device is found, else the CPU; STRATA_BACKEND=cpu|cuda in the environment overrides auto). 0, or STRATA_EUNSUP with one line when that backend is not built in or finds no
// device, STRATA_ENOMEM.
int strata_backend_open(struct strata_backend *out, const struct strata_backend_params *p);
void strata_backend_close(struct strata_backend *be);
const char *strata_backend_kind_name(enum strata_backend_kind kind);   // "auto", "cpu", "cuda"

#endif
