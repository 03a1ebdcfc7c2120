// The CUDA kernels of strata behind a C interface (built with `make CUDA=1`): one device, one
// stream, device memory, and launch wrappers for every operation of the forward pass. The CUDA
// backend (backend.c) implements the backend interface over these; the kernel test
// (tests/test_cuda.c) checks each against the CPU reference.
//
// Conventions: every pointer named "device" is device memory of the context's device (from
// strata_cuda_alloc); every launch goes on the context's stream and returns 0 or a negative
// STRATA_E* code after one log line (a failed launch, or a fault surfacing at a sync). Float rows
// are row-major with explicit strides in floats. Nothing here allocates per call except where
// said; the caller owns every buffer.
//
// Numerics: activations are rounded to each weight type's dot format exactly as the CPU backend
// rounds them (Q8_0, Q8_1, Q8_K, F16, BF16 with ggml's x86 rules, bit for bit), and every
// quantized dot sums each block's integers exactly, so the CUDA and CPU backends differ only in
// the order of float additions. Within the CUDA backend a token's result never depends on how
// many other tokens share its launch (mv.cu and mmq.cu add the same block terms in the same order).
#ifndef STRATA_BACKEND_CUDA_H
#define STRATA_BACKEND_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Structs that kernels take by value have no padding: a decode graph is replayed only where each
// launch's argument bytes equal the recorded launch's (tape.cu), and padding would hold whatever
// the stack held. The bytes they do not use are fields named spare, zero from the initializers.
#define STRATA_CUDA_ARGS_BEGIN _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic error \"-Wpadded\"")
#define STRATA_CUDA_ARGS_END _Pragma("GCC diagnostic pop")

// Device buffers holding weights are padded by this many bytes: the decoders read whole aligned
// words, up to 7 bytes past a block's last byte.
#define STRATA_CUDA_PAD 64

struct strata_cuda;
struct strata_token_logit;  // strata.h

struct strata_cuda_info {
    char name[256];
    int device, cc_major, cc_minor, n_sm;
    int driver_version, runtime_version;   // 13000 = 13.0
    uint64_t total_bytes, free_bytes;
};

// Number of usable devices (0 when there is no driver, no device, or the driver is older than
// the runtime); *why gets a one-line reason when 0 (static string).
int strata_cuda_device_count(const char **why);
// Open device `device` (one stream, the IQ tables uploaded). 0, or STRATA_EUNSUP with one line:
// no device, an index out of range, a driver older than this build's runtime, compute
// capability below 8.0.
int strata_cuda_open(struct strata_cuda **out, int device);
void strata_cuda_close(struct strata_cuda *cu);
void strata_cuda_get_info(struct strata_cuda *cu, struct strata_cuda_info *info);

// ---- memory ----------------------------------------------------------------------------------

// Device memory (256-byte aligned, not zeroed); NULL with one line naming `what` when the device
// is out of memory. Counted in strata_cuda_bytes_used.
void *strata_cuda_alloc(struct strata_cuda *cu, size_t bytes, const char *what);
void strata_cuda_free(struct strata_cuda *cu, void *p);
uint64_t strata_cuda_bytes_used(const struct strata_cuda *cu);
uint64_t strata_cuda_bytes_peak(const struct strata_cuda *cu);
// Synchronous copies (the stream is drained first).
int strata_cuda_upload(struct strata_cuda *cu, void *dst, const void *src, size_t bytes);
int strata_cuda_download(struct strata_cuda *cu, void *dst, const void *src, size_t bytes);
int strata_cuda_memset(struct strata_cuda *cu, void *dst, int value, size_t bytes);
// Copy from host memory through a pinned staging buffer (large uploads at full PCIe speed);
// progress(user, done, total) after each piece when given.
int strata_cuda_upload_staged(struct strata_cuda *cu, void *dst, const void *src, size_t bytes,
                              void (*progress)(void *user, uint64_t done, uint64_t total), void *user);
// Queue an async copy on the stream (src must stay valid until the next sync).
int strata_cuda_copy_async(struct strata_cuda *cu, void *dst, const void *src, size_t bytes);
int strata_cuda_sync(struct strata_cuda *cu);

// ---- activations -----------------------------------------------------------------------------

// Rows rounded to a dot format, struct of arrays in device memory (strata_cuda_act_init lays them
// out in one buffer of strata_cuda_act_bytes).
STRATA_CUDA_ARGS_BEGIN
struct strata_cuda_act {
    uint32_t vdt;      // STRATA_TYPE_Q8_0, Q8_1, Q8_K, F16, BF16 or F32
    uint32_t n_in;     // elements per row (a multiple of the format's block)
    uint32_t n_rows;   // capacity
    uint32_t spare;    // 0
    int8_t *qs;        // Q8_*: [n_rows][n_in]
    float *d;          // Q8_*: [n_rows][n_in / block] scales (Q8_0/Q8_1: the f16 value as float)
    float *s;          // Q8_1: [n_rows][n_in / 32] f16(d * sum q) as float
    int16_t *bsums;    // Q8_K: [n_rows][n_in / 16] sums of 16 quants
    uint16_t *h;       // F16 / BF16: [n_rows][n_in]
    const float *f;    // F32: the unrounded rows themselves (set by strata_cuda_quantize)
    size_t f_stride;   // floats between F32 rows
};
STRATA_CUDA_ARGS_END

// Bytes for n_rows rows of n_in elements in format vdt (0 for an unknown format).
size_t strata_cuda_act_bytes(uint32_t vdt, uint32_t n_in, uint32_t n_rows);
// Lay out `a` in the device buffer buf (strata_cuda_act_bytes large).
void strata_cuda_act_init(struct strata_cuda_act *a, uint32_t vdt, uint32_t n_in, uint32_t n_rows, void *buf);
// Round n_rows float rows x (device, x_stride floats apart) into a (same rounding as the CPU).
// For F32 it only records x.
int strata_cuda_quantize(struct strata_cuda *cu, const float *x, size_t x_stride, int n_rows,
                         struct strata_cuda_act *a);

// ---- products --------------------------------------------------------------------------------

// Whether a weight type has CUDA kernels (every type strata computes with on the CPU).
bool strata_cuda_type_supported(uint32_t type);

// One matrix product of a batch: y[y_row(t)] = W_t · x[x_row(t)] (+ add[y_row(t)]) for t < n_tok.
// W_t is the matrix at w, or, for routed experts, w_table[w_ids[t]] (the slot table of one layer
// and matrix: device pointers indexed by expert id, so whoever fills it, the fully resident
// model or a VRAM expert cache, decides where each expert lives).
struct strata_cuda_mm {
    const void *w;               // device [n_out][row_bytes], or NULL when w_table is used
    const void *const *w_table;  // device [n_expert] device pointers
    const int32_t *w_ids;        // device [n_tok] expert of each token row
    uint32_t type, n_in, n_out;
    uint64_t row_bytes;
    const struct strata_cuda_act *x;  // in the weight type's dot format
    const int32_t *x_rows;       // device [n_tok] or NULL: row t / x_div
    int x_div;                   // 0 or 1: row t (routed gate/up: n_expert_used)
    int n_tok;
    float *y;                    // device
    size_t y_stride;             // floats
    const int32_t *y_rows;       // device [n_tok] or NULL
    const float *add;            // device, same layout as y, added to the result (may equal y), or NULL
    const float *bias;           // device [n_out] added to every row, or NULL
    // SwiGLU fused (mv only): with w2 (same type, shape and x as w/w_table+w2_off) the result is
    // silu(W x) * (W2 x).
    const void *w2;              // device, or NULL
    const void *const *w2_table; // with w_table: second matrix per expert
    // Stacked plain matrices (mv only; q, k and v of a layer in one launch): rows n_out .. of the
    // launch belong to seg[0], then seg[1], each with its own weights, output and row count; the
    // same type, inputs, activations and tokens as w. No add, bias, w2 or y_rows then.
    int n_seg;
    struct strata_cuda_mm_seg {
        const void *w;
        float *y;
        size_t y_stride;
        uint32_t n_out;
    } seg[2];
};

// Run the products of one batch (each may use a different weight and format). Products with more
// than STRATA_CUDA_MV_MAX_TOK tokens of one plain weight go through the tensor-core GEMM, the rest
// through the mat-vec kernels; both give the same bits.
#define STRATA_CUDA_MV_MAX_TOK 8
int strata_cuda_mm_run(struct strata_cuda *cu, const struct strata_cuda_mm *ops, int n_ops);
// Force a kernel family (tests): 0 auto, 1 mat-vec only, 2 GEMM wherever it applies.
void strata_cuda_set_mm_path(struct strata_cuda *cu, int path);

// Routed experts of a prompt chunk grouped by expert: pairs p (token p / n_used, its p % n_used-th
// choice) with experts ids[p]; computes for each pair y[p] = W_{ids[p]} x[x_row(p)] where x_row(p)
// is p / x_div (x_div = n_used for gate/up, 1 for down). Grouping (sorted by expert, then pair)
// is done on the device into `grp` (strata_cuda_moe_group).
struct strata_cuda_moe_groups {
    const int32_t *ids;  // device [n_pairs] the expert of each pair (set by strata_cuda_moe_group)
    int32_t *first;    // device [n_expert + 1]
    int32_t *sorted;   // device [n_pairs] pair indices by (expert, pair)
    int32_t *tiles;    // device [max_tiles][2] (expert, first pair offset) of each 64-pair tile
    int32_t *n_tiles;  // device [1]
    int n_expert, n_pairs, max_tiles;
};
size_t strata_cuda_moe_groups_bytes(int n_expert, int n_pairs);
void strata_cuda_moe_groups_init(struct strata_cuda_moe_groups *g, int n_expert, int n_pairs, void *buf);
int strata_cuda_moe_group(struct strata_cuda *cu, const int32_t *ids, struct strata_cuda_moe_groups *g);

struct strata_cuda_moe_mm {
    const void *const *w_table;  // device [n_expert]
    uint32_t type, n_in, n_out;
    uint64_t row_bytes;
    const struct strata_cuda_act *x;
    int x_div;
    float *y;                    // device [n_pairs][y_stride]
    size_t y_stride;
};
int strata_cuda_moe_mm_run(struct strata_cuda *cu, const struct strata_cuda_moe_groups *g,
                           const struct strata_cuda_moe_mm *ops, int n_ops);

// Routed down projection of n_tok tokens with K experts each (op: w_table, w_ids [n_tok * K], x the
// rounded SwiGLU rows [n_tok * K], n_out = the embedding width), the weighted sum of the K rows in
// selection order (weights [n_tok][K]), an optional shared row times sigmoid(shared_gate[t]), added
// to x [n_tok][n_out]: bit for bit the product followed by strata_cuda_moe_combine, in one launch.
int strata_cuda_moe_down(struct strata_cuda *cu, const struct strata_cuda_mm *op, int n_tok, int K,
                         const float *weights, float *x, const float *shared, const float *shared_gate);

// Rows of a weight matrix (embedding lookup): out[t] = dequant(W[rows[t]]) for t < n, rows on
// the host (checked < n_out by the caller), out device [n][n_in].
int strata_cuda_get_rows(struct strata_cuda *cu, const void *w, uint32_t type, uint32_t n_in, uint64_t row_bytes,
                         const int32_t *rows, int n, float *out);
// The same with the rows' indices in device memory.
int strata_cuda_get_rows_dev(struct strata_cuda *cu, const void *w, uint32_t type, uint32_t n_in,
                             uint64_t row_bytes, const int32_t *rows, int n, float *out);

// ---- elementwise and blocks ------------------------------------------------------------------

// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * w for n_rows rows of n (strides in floats; y may be x).
int strata_cuda_rmsnorm(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                        const float *w, int n_rows, uint32_t n, float eps);
// The same, also rounding each row to the formats of acts[0..n_acts) (at most two besides F32; an
// F32 act gets y itself, which must then be given) in the same launch.
int strata_cuda_rmsnorm_q(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                          const float *w, int n_rows, uint32_t n, float eps, struct strata_cuda_act *const *acts,
                          int n_acts);
// y = a + b (n floats, any may alias).
int strata_cuda_add(struct strata_cuda *cu, float *y, const float *a, const float *b, size_t n);
// y[t][i] = silu(g[t][i]) * u[t][i] for n_rows rows of n (strides in floats).
int strata_cuda_swiglu(struct strata_cuda *cu, float *y, size_t y_stride, const float *g, size_t g_stride,
                       const float *u, size_t u_stride, int n_rows, uint32_t n);

// Per token t: per-head RMS norm (norm may be NULL) and NeoX RoPE on the first n_rot dims of
// n_head heads of dim D at x + t * x_stride + h * D, position pos[t] (device). freq_base as ggml;
// sections (4 ints or NULL) turns on qwen35moe's interleaved M-RoPE mask (text positions).
STRATA_CUDA_ARGS_BEGIN
struct strata_cuda_rope {
    uint32_t n_head, D, n_rot;
    uint32_t head_stride;        // floats between heads (0: D; gated queries interleave [q | gate])
    float freq_base, eps;
    const float *norm;           // device [D] or NULL
    int sections[4];             // all 0: plain NeoX
};
int strata_cuda_norm_rope(struct strata_cuda *cu, float *x, size_t x_stride, int n_tok, const int32_t *pos,
                          const struct strata_cuda_rope *r);
// Queries and keys of n_tok tokens normed and rotated in place, keys and values stored into the
// cache at pos[t], in one launch (strata_cuda_norm_rope twice and strata_cuda_kv_store).
struct strata_cuda_qk_rope {
    float *qx, *kx;              // device [n_tok][q_stride] / [n_tok][k_stride]
    const float *vx;             // device [n_tok][v_stride]
    size_t q_stride, k_stride, v_stride;
    struct strata_cuda_rope q, k; // k.n_head = KV heads
    void *k_cache, *v_cache;     // this layer's, [ctx][kv_stride]
    size_t kv_stride;
    const int32_t *pos;          // device [n_tok]
    uint32_t Dv;
    int n_tok;
    bool kv_f16;
    uint8_t spare[7];            // 0
};
int strata_cuda_qk_rope_store(struct strata_cuda *cu, const struct strata_cuda_qk_rope *r);

// Causal attention over a KV cache: query token t (q at q + t * q_stride, H heads of D) attends
// to positions 0 .. pos[t] of the cache (k at k + p * kv_stride + kvh * D, v at v + p * v_stride +
// kvh * Dv, F32 or F16 elements), head h reads kv head h / (H / Hkv). out[t] = [H][Dv]. The result
// of a token depends only on its own query and the cache: every token uses the same split of the
// positions into chunks and the same order of merging them, whatever the batch. The options are
// backend.h's strata_attn_op's (zero: off): a sliding window, sinks, a visibility mask, MLA's
// latent rows as values.
struct strata_cuda_attn {
    const float *q; size_t q_stride;
    const void *k, *v;           // device cache of this layer (v unused with latent)
    size_t kv_stride;            // elements between positions of k
    uint32_t q_head_stride;      // floats between query heads (0: D)
    uint32_t H, Hkv, D, Dv;
    float scale;
    const int32_t *pos;          // device [n_tok]
    int n_tok, max_pos;          // max_pos: largest pos[t] (sizes the grid)
    float *out; size_t out_stride;
    const float *gate;           // device [n_tok][gate_stride] or NULL: out *= sigmoid(gate)
    size_t gate_stride;
    struct strata_cuda_act *act; // or NULL: the output rows also rounded into act (row = token)
    float *scratch;              // device, strata_cuda_attn_scratch_floats
    // the options
    size_t v_stride;             // elements between positions of v (0: kv_stride)
    const float *sinks;          // device [H] sink logits joining each head's softmax, or NULL
    const uint8_t *visible;      // device: token t's row at visible + t * visible_stride, 0 hides a
    size_t visible_stride;       //   position (the indexer's top-k), or NULL
    uint32_t gate_head_stride;   // floats between heads' gates (0: Dv)
    uint32_t n_swa;              // sliding window: token at p sees c with p - c < n_swa (0: all)
    int min_pos;                 // a lower bound of every pos[t] (0: unknown; skips chunks behind a window)
    bool kv_f16;
    bool latent;                 // MLA: the value of a position is the first Dv elements of its key row
    uint16_t spare;              // 0
};
STRATA_CUDA_ARGS_END
// The attention's partial results: a (token, head, chunk of STRATA_CUDA_ATTN_CHUNK positions) row
// of Dv outputs, max, sum and two floats of padding, for passes of up to `pass` tokens (the host
// loop's; STRATA_CUDA_ATTN_PASS_DEFAULT unless STRATA_CUDA_ATTN_PASS is set in the environment), at most
// STRATA_CUDA_ATTN_SCRATCH_MAX floats a pass (fewer tokens then). The floats of scratch any pass of
// up to n_tok tokens below position max_ctx needs: a pass with fewer chunks takes more tokens, up
// to the cap, hence the one extra token's worth. Plain C: strata plan prices it too.
#define STRATA_CUDA_ATTN_CHUNK 32
#define STRATA_CUDA_ATTN_PASS_DEFAULT 512
#define STRATA_CUDA_ATTN_SCRATCH_MAX ((size_t)64 << 20)
#define STRATA_CUDA_ATTN_PART_STRIDE(Dv) ((Dv) + 4)
static inline size_t strata_cuda_attn_scratch_floats_pass(int n_tok, int max_ctx, uint32_t H, uint32_t Dv, int pass)
{
    const size_t chunks = ((size_t)max_ctx + STRATA_CUDA_ATTN_CHUNK - 1) / STRATA_CUDA_ATTN_CHUNK;
    const size_t per = (size_t)H * chunks * STRATA_CUDA_ATTN_PART_STRIDE(Dv);
    const size_t all = (size_t)(n_tok < pass ? n_tok : pass) * per;
    return all < STRATA_CUDA_ATTN_SCRATCH_MAX + per ? all : STRATA_CUDA_ATTN_SCRATCH_MAX + per;
}
// strata_cuda_attn_scratch_floats_pass at the pass the backend runs.
size_t strata_cuda_attn_scratch_floats(int n_tok, int max_ctx, uint32_t H, uint32_t Dv);
int strata_cuda_attention(struct strata_cuda *cu, const struct strata_cuda_attn *a);
// MLA (latent) attention's kernel (A/B in tests and benchmarks): 0 k_attn_mla, 1 the older
// k_attn_part_ext (also STRATA_CUDA_MLA_OLD=1 at open). Each gives a token the same bits in any batch.
void strata_cuda_set_mla_old(struct strata_cuda *cu, int old);
// The plain attention's chunks on the tensor cores (1, the default on sm_80 and later) or through the
// scalar kernel (0, as STRATA_CUDA_ATTN_MMA=0): tests run both. A run keeps one (a token's bits
// depend on it).
void strata_cuda_set_attn_mma(struct strata_cuda *cu, int on);
// Store n_tok rows of new keys and values into the caches at positions pos[t] (device; rows
// kc_stride and vc_stride elements apart), as F32 or F16 (round to nearest even). v_width 0: no
// values (v_cache, v unused).
int strata_cuda_kv_store(struct strata_cuda *cu, void *k_cache, void *v_cache, bool f16, size_t kc_stride, size_t vc_stride,
                         const float *k, size_t k_stride, const float *v, size_t v_stride, uint32_t k_width,
                         uint32_t v_width, const int32_t *pos, int n_tok);

// Routing on the device, selecting exactly what the host routing (model) selects: per token,
// softmax or sigmoid of the logits [n_tok][X], top-k by probability (+ bias when given), the
// unbiased probabilities of the k renormalised (when norm) and scaled (scale not 0 or 1).
STRATA_CUDA_ARGS_BEGIN
struct strata_cuda_route {
    const float *logits;         // device [n_tok][X]
    const float *bias;           // device [X] or NULL
    int32_t *ids;                // device [n_tok][K] out
    float *weights;              // device [n_tok][K] out
    int n_tok, X, K;
    float scale;
    bool sigmoid, norm;
    uint8_t spare[6];            // 0
};
STRATA_CUDA_ARGS_END
int strata_cuda_route_topk(struct strata_cuda *cu, const struct strata_cuda_route *r);

// Weighted sum of routed rows in selection order, plus optional shared rows, into the residual:
// x[t] += sum_k w[t][k] * rows[t * K + k] (+ shared[t] * sigmoid(shared_gate[t]) when given).
int strata_cuda_moe_combine(struct strata_cuda *cu, float *x, const float *rows, const float *weights, int n_tok,
                            int K, uint32_t E, const float *shared, const float *shared_gate);

// Gated delta-net (qwen3next / qwen35moe), one layer over a chunk of tokens, in place on the
// layer's state. See deltanet.cu for the equations (those of src/model/deltanet.c).
STRATA_CUDA_ARGS_BEGIN
struct strata_cuda_deltanet {
    uint32_t C, K1, nk, nv, d;   // channels, conv history (K - 1), key/value heads, head size
    int n_tok;
    float eps;
    bool tiled;                  // qwen35moe: value head h reads key head h % nk (else h / (nv/nk))
    bool split_ba;               // qwen35moe: beta [n][nv] and alpha [n][nv] apart (else fused ba)
    uint16_t spare;              // 0
    const float *qkv;            // device [n][C] projection
    const float *z;              // device [n][nv*d]
    const float *ba;             // device: fused [n][2*nv] (per key head [r betas | r alphas]), or betas [n][nv]
    const float *alpha;          // device [n][nv] when split_ba
    const float *taps;           // device [K][C] conv taps, transposed
    const float *dt_bias, *a;    // device [nv]
    const float *norm;           // device [d]
    float *conv_state;           // device [K-1][C]
    float *ssm_state;            // device [nv][d][d]
    float *conv_out;             // device scratch [n][C]
    float *gates;                // device scratch [n][2*nv] (beta, decay)
    float *out;                  // device [n][nv*d] gated, normed head outputs
};
STRATA_CUDA_ARGS_END
int strata_cuda_deltanet(struct strata_cuda *cu, const struct strata_cuda_deltanet *p);

// pos[i] += delta on the device (a captured decode step moves its own position forward).
int strata_cuda_pos_advance(struct strata_cuda *cu, int32_t *pos, int n, int delta);

// ---- the ops of deepseek2 / deepseek32 / glm-dsa / gpt-oss (ext.cu) ---------------------------------
// Each follows the CPU backend's order of float operations (backend/cpu/rope_ext.c, ops_ext.c; for
// the sums whose order depends on the CPU's ISA, the AVX-512 builds': 16 float lanes).

// RoPE with YaRN in either pair layout (backend.h's strata_rope_ext) on n_dims dims of n_head heads
// per token: head h of token t at x + t * tok_stride + h * head_stride (x may point inside a head,
// MLA's rope part), position pos[t] (device).
STRATA_CUDA_ARGS_BEGIN
struct strata_cuda_rope_ext {
    uint32_t n_dims;             // even, at most 2048
    float freq_scale, ext_factor, theta_scale;
    float corr_dims[2];
    float mscale;                // strata_rope_ext_mscale (libm's logf, on the host)
    uint32_t n_head;
    size_t tok_stride, head_stride;
    bool neox;                   // pairs (i, i + n_dims/2); else (2i, 2i+1)
    uint8_t spare[7];            // 0
};
STRATA_CUDA_ARGS_END
int strata_cuda_rope_ext(struct strata_cuda *cu, float *x, int n_tok, const int32_t *pos,
                         const struct strata_cuda_rope_ext *r);

// gpt-oss's clamped SwiGLU over n floats (y may be g): x = min(g, limit),
// y = x / (1 + exp(-alpha x)) * (clamp(u, -limit, limit) + 1).
int strata_cuda_swiglu_oai(struct strata_cuda *cu, float *y, const float *g, const float *u, size_t n, float alpha,
                           float limit);

// LayerNorm of n_rows contiguous rows of n (y may be x): (x - mean) / sqrt(var + eps) * w + b, w and
// b device [n] or NULL, the sums in ggml_norm's order for 16 lanes.
int strata_cuda_layernorm(struct strata_cuda *cu, float *y, const float *x, const float *w, const float *b,
                          int n_rows, uint32_t n, float eps);

// The sparse-attention indexer of one sequence's tokens (backend.h's strata_indexer_op): q and k
// multiplied by the d x d Walsh-Hadamard matrix, k stored at its position in keys, then per token
// the scores of positions 0 .. pos[t] and the top-k mask of libstdc++'s heap selection
// (backend/topk_heap.h), written over n_ctx bytes of its visible row.
STRATA_CUDA_ARGS_BEGIN
struct strata_cuda_indexer {
    float *q;                    // device [n_tok][n_head][d], rewritten with its product
    float *k;                    // device [n_tok][d], likewise
    float *w;                    // device [n_tok][n_head], multiplied by w_scale in place (0: as is)
    float *keys;                 // device [n_ctx][d]: the sequence's rows of this indexer layer
    const int32_t *pos;          // device [n_tok]
    int n_tok, n_ctx, max_pos;   // max_pos: the largest pos[t] (sizes the scores), < n_ctx
    uint32_t n_head, d, top_k;   // d a power of two >= 16; 1 <= top_k <= 12288
    float w_scale;
    uint32_t spare;              // 0
    uint8_t *visible;            // device: token t's row at visible + t * visible_stride
    size_t visible_stride;
    float *scores;               // device scratch of strata_cuda_indexer_scratch_floats floats
};
STRATA_CUDA_ARGS_END
size_t strata_cuda_indexer_scratch_floats(int n_tok, int max_pos);
int strata_cuda_indexer(struct strata_cuda *cu, const struct strata_cuda_indexer *p);

// ---- rows (rows.cu): the strided forms the backend interface asks for ----------------------------

// y[r * y_stride + i] += x[r * x_stride + i] for n_rows rows of n (x_stride 0: a bias on every row).
int strata_cuda_add_rows(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                         int n_rows, uint32_t n);
// y[r * y_stride + i] *= sigmoid(g[r * g_stride + (g_per_row ? 0 : i)]).
int strata_cuda_mul_sigmoid(struct strata_cuda *cu, float *y, size_t y_stride, const float *g, size_t g_stride,
                            bool g_per_row, int n_rows, uint32_t n);
// y[r * y_stride + i] = x[r * x_stride + i].
int strata_cuda_copy_rows(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                          int n_rows, uint32_t n);
// x[t] += sum_k weight[t][k] * rows[route_of[t][k]] (+ shared[t]), in selection order (backend.h's
// moe_combine; all device pointers).
int strata_cuda_moe_combine_routed(struct strata_cuda *cu, float *x, const float *rows, const int32_t *route_of,
                                   const float *weight, const float *shared, int n_tok, int K, uint32_t n);
// ids[r] = the first index of the largest of x[r][0..n) (NaN never wins; 0 when none is above
// -inf) for n_rows rows: backend.h's argmax.
int strata_cuda_argmax(struct strata_cuda *cu, int32_t *ids, const float *x, int n_rows, uint32_t n);
// out[r][0..k) = the k best of x[r][0..n) as strata_top_k orders them, for n_rows rows:
// backend.h's topk. 1 <= k <= min(n, STRATA_TOP_K_MAX).
int strata_cuda_topk(struct strata_cuda *cu, struct strata_token_logit *out, const float *x, int n_rows, uint32_t n,
                     int k);

// Page-locked host memory (NULL when the driver refuses), for asynchronous uploads.
void *strata_cuda_host_alloc(size_t bytes);
void strata_cuda_host_free(void *p);
// Page-lock an existing host range once (cudaHostRegister; the VRAM expert tier registers the host
// expert store's slab at open), so copies from it run at pinned speed with no staging. 0, or
// STRATA_EUNSUP with one warning line when the driver refuses (copies from it then stay pageable).
int strata_cuda_host_register(void *p, size_t bytes);
void strata_cuda_host_unregister(void *p);

// ---- copies of the VRAM expert tier ------------------------------------------------------------

// A stream of its own on a device, for host -> device copies beside the compute stream (the VRAM
// expert tier's fills). Used from one thread: bind sets that thread's device first.
struct strata_cuda_copier;
int strata_cuda_copier_open(struct strata_cuda_copier **out, int device);
void strata_cuda_copier_close(struct strata_cuda_copier *c);
int strata_cuda_copier_bind(struct strata_cuda_copier *c);
// Queue a copy (src: host memory, best registered; dst: device memory).
int strata_cuda_copier_copy(struct strata_cuda_copier *c, void *dst, const void *src, size_t bytes);
// Until every queued copy has landed.
int strata_cuda_copier_wait(struct strata_cuda_copier *c);

// ---- CUDA graphs of the decode step ------------------------------------------------------------

// Decode passes replayed as graphs (tape.cu). tape_begin at a pass's start with the shape's key
// (0: none): the first pass of a key is captured and recorded, launched in segments as it goes;
// each later pass with that key is checked launch by launch against the record and replays the
// recorded graphs, or leaves the record at the first difference (and the next pass records again).
// tape_end at the pass's first drain (the context's own drains end it too).
int strata_cuda_tape_begin(struct strata_cuda *cu, uint64_t key);
int strata_cuda_tape_end(struct strata_cuda *cu);
// Host memory a replayed copy may read (written once per pass before the graph runs: the ring).
void strata_cuda_tape_host_range(struct strata_cuda *cu, const void *p, size_t bytes);
struct strata_cuda_tape_stats {
    uint64_t recorded, replayed, diverged;   // passes
    uint64_t builds, updates;                // segment graphs instantiated anew / updated in place
    uint64_t launches, segments;             // of the last record
    double walk_us;                          // host time of a replayed pass, begin to end (mean)
    double first_us;                         // until its first segment was launched (mean)
};
void strata_cuda_tape_stats(const struct strata_cuda *cu, struct strata_cuda_tape_stats *s);

// One graph of everything queued between begin and end_launch, launched then and again by
// graph_launch (tests: a pass replayed without the host).
int strata_cuda_graph_begin(struct strata_cuda *cu);
int strata_cuda_graph_end_launch(struct strata_cuda *cu);
int strata_cuda_graph_launch(struct strata_cuda *cu);

// Elapsed milliseconds between two points on the stream (timing helper for benchmarks).
int strata_cuda_timer_ms(struct strata_cuda *cu, int start, float *ms);

#endif
