// The CPU backend (backend.h): host memory, one persistent thread pool, the kernel table of the
// CPU's instruction set. Products, attention and the delta-net run on the pool; the elementwise
// ops are cheap enough to run on the calling thread.
//
// Activation rounding: mm rounds each distinct activation block (x, stride, rows, format) of a
// call once into the context's scratch (act), then runs every product of the call in one
// parallel region (ops.c). The scratch is sized by reserve and grows if a call needs more.
//
// Products of the weight types with a canonical integer form at this ISA (gemm.h: Q8_0, MXFP4,
// Q4_0 and the K-quants everywhere, the IQ formats and Q2_K/Q3_K at AVX-512) run through the GEMM driver: the
// tile kernel where a job has enough tokens, the canonical multi-token or one-token dot below
// that, all of them the same float order, so a token's result is the same bits in a call of 1
// or 128 tokens (backend.h, "Determinism"). The output head too: decode's 4-row canonical dot
// reads it faster than the quant kernels' one-row dot. The other types keep the quant kernels'
// dots (ops.c), whose multi-token dot rounds as their one-token dot. Which path a matrix takes
// depends only on the matrix. STRATA_CPU_GEMM=0 keeps every matrix on the quant kernels (a
// diagnostic: other bits, the same within the process).
#include "backend/cpu/cpu.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/attn.h"
#include "backend/cpu/deltanet.h"
#include "backend/cpu/fattn.h"
#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/kv.h"
#include "backend/cpu/ops_ext.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/pool.h"
#include "backend/cpu/rope_ext.h"
#include "util/log.h"
#include "util/mem.h"

// One activation block of an mm call already rounded into act.
struct act_block {
    const float *x;
    size_t x_stride;
    int n_rows;
    uint32_t n_in, vdt;
    size_t offset, row_bytes;
};

struct cpu_ctx {
    bool lazy;                       // large buffers left uncommitted (strata_backend_params)
    struct lazy_map { void *p; size_t bytes; } maps[64];  // those buffers, for cpu_release
    int n_maps;
    pthread_mutex_t maps_mu;         // sessions may be created from several threads (strata.h)
    struct strata_pool *pool;
    const struct strata_kernels *k;
    char *act;                       // rounded activations of one mm call
    size_t act_cap;
    struct act_block blocks[STRATA_MM_MAX_JOBS];
    struct strata_mm_job jobs[STRATA_MM_MAX_JOBS];
    struct strata_gemm *gemm;        // canonical products (NULL: STRATA_CPU_GEMM=0)
    float *att_scratch;              // [n_threads][STRATA_ATTN_GROUP][att_ctx] attention scores (F32 rows)
    int att_ctx;
    float *rows_scratch;             // [n_threads][STRATA_ATTN_ROWS][att_ctx] scores of the MLA tiles
    size_t rows_scratch_cap;
    struct strata_fattn_ctx *fa;     // tiled attention over typed caches, for one head shape
    float *fa_q;                     // [fa_q_cap] a sequence's queries, rounded for the key type
    size_t fa_q_cap;
    uint32_t fa_dims[3];             // its dk, dv, group
    void *fa_round;                  // a query head in the key type's dot format, one a thread
    size_t fa_round_cap;
    float *store_scratch;            // rotated keys and values and a rounded key row, one a thread
    size_t store_scratch_cap;
    float *row;                      // [n_threads][row_cap] moe_combine accumulators
    uint32_t row_cap;
    int32_t *tok_seq;                // [tok_cap] sequence of each token of the pass
    int tok_cap;
    float *idx_h;                    // [idx_d][idx_d] the indexer's Walsh-Hadamard matrix
    size_t idx_h_cap;
    uint32_t idx_d;
    float *idx_scratch;              // the indexer's per-thread scores and heaps (ops_ext.h)
    size_t idx_scratch_cap;
    float **idx_keys;                // [n_seq] each sequence's rows of one indexer layer
    size_t idx_keys_cap;
    const struct strata_batch *batch;
};

// ---- memory ------------------------------------------------------------------------------------

#define LAZY_MIN_BYTES ((size_t)2 << 20)  // a huge page

// Zeroed buffers. Lazy (no memory bound): 2 MiB or more from a fresh mapping on huge pages, which
// the kernel commits as rows are first written; else committed here, so that the resident memory
// after open is what a memory bound is sized from.
static void *cpu_alloc(void *ctx, size_t bytes, const char *what)
{
    struct cpu_ctx *c = ctx;
    void *p = NULL;
    if (c->lazy && bytes >= LAZY_MIN_BYTES) {
        pthread_mutex_lock(&c->maps_mu);
        if (c->n_maps < (int)(sizeof c->maps / sizeof c->maps[0]) && (p = strata_big_alloc(bytes)))
            c->maps[c->n_maps++] = (struct lazy_map){p, bytes};
        pthread_mutex_unlock(&c->maps_mu);
    }
    if (!p) p = strata_zalloc_aligned(bytes);
    if (!p) strata_log_error("cpu backend: out of memory for %s (%zu bytes)", what, bytes);
    return p;
}

static void cpu_release(void *ctx, void *p)
{
    struct cpu_ctx *c = ctx;
    size_t bytes = 0;
    pthread_mutex_lock(&c->maps_mu);
    for (int i = 0; p && i < c->n_maps; i++)
        if (c->maps[i].p == p) {
            bytes = c->maps[i].bytes;
            c->maps[i] = c->maps[--c->n_maps];
            break;
        }
    pthread_mutex_unlock(&c->maps_mu);
    if (bytes) strata_big_free(p, bytes);
    else free(p);
}

static int cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

static int cpu_memset(void *ctx, void *dst, int value, size_t bytes)
{
    (void)ctx;
    memset(dst, value, bytes);
    return 0;
}

static int cpu_weight_load(void *ctx, const struct strata_mat *host, struct strata_mat *view, bool *copied)
{
    (void)ctx;
    *view = *host;
    *copied = false;
    return 0;
}

static void cpu_weight_free(void *ctx, struct strata_mat *view)
{
    (void)ctx;
    (void)view;
}

static int grow(void **buf, size_t *cap, size_t want, const char *what)
{
    if (want <= *cap) return 0;
    void *p = strata_zalloc_aligned(want);
    if (!p) {
        strata_log_error("cpu backend: out of memory for %s (%zu bytes)", what, want);
        return STRATA_ENOMEM;
    }
    free(*buf);
    *buf = p;
    *cap = want;
    return 0;
}

// Largest activation row (bytes) of n elements in any dot format.
static size_t max_act_row(uint32_t n)
{
    size_t best = (size_t)n * sizeof(float);
    for (uint32_t t = 0; t < STRATA_TYPE_COUNT; t++)
        if (strata_type_computable(t)) {
            const uint32_t vdt = strata_type_traits(t)->vec_dot_type;
            const uint32_t bs = strata_type_traits(vdt)->block_size;
            const size_t b = strata_type_row_bytes(vdt, (n + bs - 1) / bs * bs);
            if (b > best) best = b;
        }
    return best;
}

static int cpu_reserve(void *vctx, const struct strata_backend_reserve *r)
{
    struct cpu_ctx *c = vctx;
    const size_t nth = (size_t)strata_pool_size(c->pool);
    size_t att_cap = (size_t)c->att_ctx * nth * STRATA_ATTN_GROUP * sizeof(float);
    size_t row_cap = (size_t)c->row_cap * nth * sizeof(float);
    size_t tok_cap = (size_t)c->tok_cap * sizeof(int32_t);
    // The rounded activations of one mm call: a call's blocks are its distinct inputs, of the
    // pass's tokens (q/k/v, the experts' gate and up gathering their tokens from one input: up to
    // two formats) or of every token's experts (each expert's down on its own rows, one format);
    // the widest rows of any format (the matrices' types are not known here). What a call needs
    // beyond this is grown then.
    const size_t rows_in = r->rows_n_in ? r->rows_n_in : r->max_n_in;
    const size_t tok_act = (size_t)r->max_tok * max_act_row(r->max_n_in);
    const size_t rows_act = (size_t)r->max_rows * max_act_row((uint32_t)(rows_in < r->max_n_in ? rows_in : r->max_n_in));
    int rc = grow((void **)&c->act, &c->act_cap, 2 * (tok_act > rows_act ? tok_act : rows_act), "activations");
    if (rc == 0)
        rc = grow((void **)&c->att_scratch, &att_cap, (size_t)r->max_ctx * nth * STRATA_ATTN_GROUP * sizeof(float),
                  "attention scores");
    if (rc == 0) rc = grow((void **)&c->row, &row_cap, (size_t)r->max_n_in * nth * sizeof(float), "combine rows");
    if (rc == 0) rc = grow((void **)&c->tok_seq, &tok_cap, (size_t)r->max_tok * sizeof(int32_t), "token map");
    if (rc) return rc;
    c->att_ctx = (int)(att_cap / nth / STRATA_ATTN_GROUP / sizeof(float));
    c->row_cap = (uint32_t)(row_cap / nth / sizeof(float));
    c->tok_cap = (int)(tok_cap / sizeof(int32_t));
    return 0;
}

static bool cpu_supports_type(void *vctx, uint32_t type)
{
    const struct cpu_ctx *c = vctx;
    return strata_type_computable(type) && c->k->vec_dot[type] != NULL;
}

static int cpu_sync(void *ctx)
{
    (void)ctx;
    return 0;
}

// ---- products ----------------------------------------------------------------------------------

static int cpu_batch_begin(void *vctx, const struct strata_batch *b)
{
    struct cpu_ctx *c = vctx;
    STRATA_ASSERT(b->n_tok <= c->tok_cap);
    c->batch = b;
    for (int s = 0; s < b->n_seq; s++)
        for (int t = 0; t < b->seq[s].n_tok; t++) c->tok_seq[b->seq[s].tok0 + t] = s;
    return 0;
}

static bool uses_gemm(const struct cpu_ctx *c, const struct strata_mat *w)
{
    return c->gemm && strata_gemm_supports(strata_gemm_level(c->gemm), w->type);
}

// The elementwise ops and the activation rounding are per row (per token, per element range):
// a prompt pass is large enough that they run on the pool, each thread a contiguous share of the
// rows; every row is computed by the same code as on one thread, so the bits do not depend on the
// split. Below STRATA_PAR_MIN floats of work (decode) the calling thread does it alone: waking
// the pool costs more than that.
#define STRATA_PAR_MIN 32768

struct rows_job {
    void (*fn)(const struct rows_job *j, int r0, int r1, int ith);
    struct cpu_ctx *c;
    int n;                           // rows
    const void *op;                  // the op's arguments
    float *y;
    const float *x, *w, *g, *u;
    size_t y_stride, x_stride;
    uint32_t n_in;
    float eps;                       // rmsnorm
    size_t len;                      // swiglu: floats in all (rows are runs of 64)
    float alpha, limit;              // swiglu_oai
};

static void rows_worker(void *arg, int ith, int nth)
{
    const struct rows_job *j = arg;
    const int r0 = (int)((int64_t)j->n * ith / nth), r1 = (int)((int64_t)j->n * (ith + 1) / nth);
    if (r0 < r1) j->fn(j, r0, r1, ith);
}

// fn over rows [0, n), on the pool when work (floats touched) is large enough.
static void run_rows(struct cpu_ctx *c, struct rows_job *j, size_t work)
{
    j->c = c;
    if (work < STRATA_PAR_MIN || j->n < 2 || strata_pool_size(c->pool) == 1) j->fn(j, 0, j->n, 0);
    else strata_pool_run(c->pool, rows_worker, j);
}

// Rounding rows of one activation block into the scratch.
static void round_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    (void)ith;
    const struct act_block *ab = j->op;
    const strata_quantize_fn q = j->c->k->quantize[ab->vdt];
    for (int r = r0; r < r1; r++)
        q(ab->x + (size_t)r * ab->x_stride, j->c->act + ab->offset + (size_t)r * ab->row_bytes, ab->n_in);
}

static int cpu_mm(void *vctx, const struct strata_mm_op *ops, int n_ops)
{
    struct cpu_ctx *c = vctx;
    STRATA_ASSERT(n_ops >= 0 && n_ops <= STRATA_MM_MAX_JOBS);
    // The distinct activation blocks and their place in the scratch, then the rounding.
    int n_blocks = 0;
    size_t total = 0;
    int block_of[STRATA_MM_MAX_JOBS];
    for (int i = 0; i < n_ops; i++) {
        const struct strata_mm_op *op = &ops[i];
        const uint32_t vdt = strata_type_traits(op->w.type)->vec_dot_type;
        const int rows = op->x_rows ? op->x_n : op->n_tok;
        int b = 0;
        while (b < n_blocks && !(c->blocks[b].x == op->x && c->blocks[b].x_stride == op->x_stride &&
                                 c->blocks[b].n_rows == rows && c->blocks[b].n_in == op->w.n_in &&
                                 c->blocks[b].vdt == vdt))
            b++;
        if (b == n_blocks) {
            const size_t rb = strata_type_row_bytes(vdt, op->w.n_in);
            c->blocks[b] = (struct act_block){op->x, op->x_stride, rows, op->w.n_in, vdt, total, rb};
            total += (size_t)rows * rb;
            n_blocks++;
        }
        block_of[i] = b;
    }
    int rc = grow((void **)&c->act, &c->act_cap, total, "activations");
    if (rc) return rc;
    for (int b = 0; b < n_blocks; b++) {
        const struct act_block *ab = &c->blocks[b];
        STRATA_ASSERT(c->k->quantize[ab->vdt] != NULL);
        struct rows_job j = {.fn = round_rows, .n = ab->n_rows, .op = ab};
        run_rows(c, &j, (size_t)ab->n_rows * ab->n_in);
    }
    // the GEMM's jobs first, then the quant kernels' ones, each in call order (ops.c groups
    // consecutive jobs on one matrix)
    int n_gemm = 0;
    for (int pass = 0, n = 0; pass < 2; pass++)
        for (int i = 0; i < n_ops; i++) {
            const struct strata_mm_op *op = &ops[i];
            if (uses_gemm(c, &op->w) != (pass == 0)) continue;
            const struct act_block *ab = &c->blocks[block_of[i]];
            c->jobs[n++] = (struct strata_mm_job){op->w, c->act + ab->offset, ab->row_bytes, op->x_rows, op->n_tok,
                                                  op->y, op->y_stride, op->y_rows};
            if (pass == 0) n_gemm = n;
        }
    if (n_gemm) {
        rc = strata_gemm_run(c->gemm, c->pool, c->jobs, n_gemm);
        if (rc) return rc;
    }
    strata_mm_run(c->pool, c->k, c->jobs + n_gemm, n_ops - n_gemm);
    return 0;
}

static int cpu_get_rows(void *vctx, const struct strata_mat *w, const int32_t *ids, int n, float *out)
{
    const struct cpu_ctx *c = vctx;
    strata_dequant_fn deq = c->k->dequant[w->type];
    for (int t = 0; t < n; t++)
        deq((const char *)w->data + (size_t)ids[t] * w->row_bytes, out + (size_t)t * w->n_in, w->n_in);
    return 0;
}

// ---- elementwise -------------------------------------------------------------------------------

static void rmsnorm_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    (void)ith;
    if (j->c->k->isa >= STRATA_ISA_AVX2) {  // the same bits, 8 elements at a time (rows_avx2.c)
        for (int r = r0; r < r1; r++)
            strata_rmsnorm_avx2(j->y + (size_t)r * j->y_stride, j->x + (size_t)r * j->x_stride, j->w, j->n_in, j->eps);
        return;
    }
    strata_rmsnorm_rows(j->y + (size_t)r0 * j->y_stride, j->y_stride, j->x + (size_t)r0 * j->x_stride, j->x_stride,
                        j->w, r1 - r0, j->n_in, j->eps);
}

static int cpu_rmsnorm(void *ctx, float *y, size_t y_stride, const float *x, size_t x_stride, const float *w,
                       int n_rows, uint32_t n, float eps)
{
    struct rows_job j = {.fn = rmsnorm_rows, .n = n_rows, .y = y, .x = x, .w = w, .y_stride = y_stride,
                         .x_stride = x_stride, .n_in = n, .eps = eps};
    run_rows(ctx, &j, (size_t)n_rows * n);
    return 0;
}

// Interleaved M-RoPE for text positions: pair i belongs to t, h, w by i mod 3 while inside their
// sections; t, h and w all carry the token position, the rest (the fourth section) position 0.
static void rope_sections_mask(const int32_t *sec, uint32_t n_rot, float *cs)
{
    const int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    if (sect_dims <= 0) return;
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        const int sector = (int)i % sect_dims;
        const bool thw = (sector % 3 == 0 && sector < 3 * sec[0]) || (sector % 3 == 1 && sector < 3 * sec[1]) ||
                         (sector % 3 == 2 && sector < 3 * sec[2]);
        if (!thw) {
            cs[2 * i] = 1.0f;
            cs[2 * i + 1] = 0.0f;
        }
    }
}

static void rope_rows(const struct rows_job *j, int t0, int t1, int ith)
{
    (void)ith;
    const struct strata_rope_op *op = j->op;
    void (*apply)(float *, const float *, uint32_t) =
        j->c->k->isa >= STRATA_ISA_AVX2 ? strata_rope_apply_avx2 : strata_rope_apply;
    float cs[2048];
    for (int t = t0; t < t1; t++) {
        if (op->ext) {
            strata_rope_ext_cache(cs, op->ext, op->pos[t]);
            for (uint32_t h = 0; h < op->n_head; h++)
                strata_rope_ext_apply(op->x + (size_t)t * op->tok_stride + (size_t)h * op->head_stride, cs, op->ext);
        } else {
            strata_rope_cache(cs, op->n_rot, op->pos[t], op->freq_base);
            if (op->sections) rope_sections_mask(op->sections, op->n_rot, cs);
            for (uint32_t h = 0; h < op->n_head; h++)
                apply(op->x + (size_t)t * op->tok_stride + (size_t)h * op->head_stride, cs, op->n_rot);
        }
    }
}

static int cpu_rope(void *ctx, const struct strata_rope_op *op)
{
    STRATA_ASSERT(op->ext ? op->ext->n_dims <= 2048 : op->n_rot <= 2048);
    struct rows_job j = {.fn = rope_rows, .n = op->n_tok, .op = op};
    // the cache's sines and cosines cost about ten rotations of a pair
    run_rows(ctx, &j, (size_t)op->n_tok * (op->ext ? op->ext->n_dims : op->n_rot) * (op->n_head + 10));
    return 0;
}

static int cpu_copy_rows(void *ctx, float *y, size_t y_stride, const float *x, size_t x_stride, int n_rows, uint32_t n)
{
    (void)ctx;
    for (int r = 0; r < n_rows; r++) memcpy(y + (size_t)r * y_stride, x + (size_t)r * x_stride, n * sizeof *y);
    return 0;
}

// The flat activations in runs of 64 floats (a row of rows_job), the last one short.
static void swiglu_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    (void)ith;
    const size_t i0 = (size_t)r0 * 64, i1 = (size_t)r1 * 64 < j->len ? (size_t)r1 * 64 : j->len;
    strata_swiglu_rows(j->c->k->isa, j->y + i0, j->g + i0, j->u + i0, i1 - i0);
}

static void swiglu_oai_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    (void)ith;
    const size_t i0 = (size_t)r0 * 64, i1 = (size_t)r1 * 64 < j->len ? (size_t)r1 * 64 : j->len;
    strata_swiglu_oai(j->y + i0, j->g + i0, j->u + i0, (uint32_t)(i1 - i0), j->alpha, j->limit);
}

static int cpu_swiglu_oai(void *ctx, float *y, const float *g, const float *u, size_t n, float alpha, float limit)
{
    struct rows_job j = {.fn = swiglu_oai_rows, .n = (int)((n + 63) / 64), .y = y, .g = g, .u = u, .len = n,
                         .alpha = alpha, .limit = limit};
    STRATA_ASSERT(n <= (size_t)INT32_MAX * 64);
    run_rows(ctx, &j, 8 * n);
    return 0;
}

static int cpu_layernorm(void *vctx, float *y, const float *x, const float *w, const float *b, int n_rows, uint32_t n,
                         float eps)
{
    struct cpu_ctx *c = vctx;
    const int vl = strata_isa_lanes(c->k->isa);
    for (int r = 0; r < n_rows; r++) strata_layernorm(y + (size_t)r * n, x + (size_t)r * n, w, b, n, eps, vl);
    return 0;
}

static int cpu_swiglu(void *ctx, float *y, const float *g, const float *u, size_t n)
{
    struct rows_job j = {.fn = swiglu_rows, .n = (int)((n + 63) / 64), .y = y, .g = g, .u = u, .len = n};
    STRATA_ASSERT(n <= (size_t)INT32_MAX * 64);
    run_rows(ctx, &j, 8 * n);  // an exp a float
    return 0;
}

static void add_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    (void)ith;
    for (int r = r0; r < r1; r++) {
        float *yr = j->y + (size_t)r * j->n_in;
        const float *xr = j->x + (size_t)r * j->x_stride;
        for (uint32_t i = 0; i < j->n_in; i++) yr[i] += xr[i];
    }
}

static int cpu_add(void *ctx, float *y, const float *x, size_t x_stride, int n_rows, uint32_t n)
{
    struct rows_job j = {.fn = add_rows, .n = n_rows, .y = y, .x = x, .x_stride = x_stride, .n_in = n};
    run_rows(ctx, &j, (size_t)n_rows * n);
    return 0;
}

static int cpu_mul_sigmoid(void *ctx, float *y, size_t y_stride, const float *g, size_t g_stride, bool g_per_row,
                           int n_rows, uint32_t n)
{
    (void)ctx;
    for (int r = 0; r < n_rows; r++) {
        float *yr = y + (size_t)r * y_stride;
        const float *gr = g + (size_t)r * g_stride;
        if (g_per_row) {
            const float gate = 1.0f / (1.0f + expf(-gr[0]));
            for (uint32_t i = 0; i < n; i++) yr[i] *= gate;
        } else {
            for (uint32_t i = 0; i < n; i++) yr[i] *= 1.0f / (1.0f + expf(-gr[i]));
        }
    }
    return 0;
}

// The weighted sum of a token's expert rows: acc = w * d for the first, acc + w * d after, then
// x += acc (+ the shared expert's row). A decode step runs it on the calling thread (16 K products
// a layer); with AVX2 8 elements at a time, the same bits (rows_avx2.c).
static void combine_rows(const struct rows_job *j, int t0, int t1, int ith)
{
    const struct strata_moe_combine_op *op = j->op;
    const bool v = j->c->k->isa >= STRATA_ISA_AVX2;
    float *acc = j->c->row + (size_t)ith * j->c->row_cap;
    for (int t = t0; t < t1; t++) {
        float *x = op->x + (size_t)t * op->n;
        const float *sh = op->shared ? op->shared + (size_t)t * op->n : NULL;
        for (int k = 0; k < op->k; k++) {
            const float w = op->weight[(size_t)t * op->k + k];
            const float *d = op->rows + (size_t)op->route_of[(size_t)t * op->k + k] * op->n;
            if (v) {
                if (k == 0) strata_scale_row_avx2(acc, d, w, op->n);
                else strata_axpy_row_avx2(acc, d, w, op->n);
            } else {
                for (uint32_t i = 0; i < op->n; i++) acc[i] = k == 0 ? w * d[i] : acc[i] + w * d[i];
            }
        }
        if (v) {
            strata_add_rows2_avx2(x, acc, sh, op->n);
        } else if (sh) {
            for (uint32_t i = 0; i < op->n; i++) x[i] += acc[i] + sh[i];
        } else {
            for (uint32_t i = 0; i < op->n; i++) x[i] += acc[i];
        }
    }
}

static int cpu_moe_combine(void *vctx, const struct strata_moe_combine_op *op)
{
    struct cpu_ctx *c = vctx;
    STRATA_ASSERT(op->n <= c->row_cap);
    struct rows_job j = {.fn = combine_rows, .n = op->n_tok, .op = op};
    run_rows(c, &j, (size_t)op->n_tok * op->n * (size_t)(op->k + 2));
    return 0;
}

// ---- KV caches ---------------------------------------------------------------------------------

// A sequence's cache: typed and in blocks (kv.h, read by the tiled attention) when every attention
// op on it is plain and a type is not F32, else F32 rows for the ggml-order attention with its
// options (attn.h).
// The rows are address space for the whole context that takes memory as positions fill: blocks
// of STRATA_KV_BLOCK positions of every layer are committed before they are first written, so the
// resident cache follows the filled context (--mem-mib still provisions the full context).
struct cpu_kv {
    bool typed;
    struct strata_kv_cache c;        // typed
    float *k, *v;                    // rows: [n_layers][n_ctx][n_head_kv * head_dim_k / _v]; v NULL
    size_t k_map, v_map;             //   without a V cache (latent_kv); mapping lengths
    size_t k_pos, v_pos;             // bytes of one position of one layer
    float *ik;                       // the indexer's keys [n_ik_layers][n_ctx][idx_dim], or NULL
    size_t ik_map, ik_pos;
    int n_layers, n_ik_layers, n_ctx;
    int n_commit;                    // positions [0, n_commit) committed in every layer
};

// Committing positions [from, from + len) of layers [r0, r1) (the K and V rows, then the
// indexer's keys as layers n_layers ..): the kernel's page faults, each layer's on one thread.
struct kv_commit_job {
    struct cpu_kv *kv;
    size_t from, len;
    atomic_int rc;
};

// Commit [off, off + len) of p (STRATA_ENOMEM when the kernel cannot), then write each of its
// pages once, the bytes kept (an atomic or of 0: the commit runs before any thread writes these
// positions, the first page may hold earlier ones). On a VM with shadow paging (the development
// VM; the GPU machines' firecracker hosts) the first user access to a page the kernel populated
// costs several microseconds (6.7 measured here), which the decode's K/V row copy, on the calling
// thread, paid once a page; the commit pays it in parallel.
static int commit_touched(void *p, size_t off, size_t len)
{
    const int rc = strata_commit_pages(p, off, len);
    if (rc || !len) return rc;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (uintptr_t a = ((uintptr_t)p + off) & ~(page - 1); a < (uintptr_t)p + off + len; a += page)
        __atomic_fetch_or((unsigned char *)a, 0, __ATOMIC_RELAXED);
    return 0;
}

static void kv_commit_layers(const struct rows_job *j, int r0, int r1, int ith)
{
    (void)ith;
    struct kv_commit_job *cj = (struct kv_commit_job *)j->op;
    const struct cpu_kv *kv = cj->kv;
    for (int l = r0; l < r1; l++) {
        int rc;
        if (l < kv->n_layers) {
            const size_t row0 = (size_t)l * kv->n_ctx + cj->from;
            rc = commit_touched(kv->k, row0 * kv->k_pos, cj->len * kv->k_pos);
            if (rc == 0 && kv->v) rc = commit_touched(kv->v, row0 * kv->v_pos, cj->len * kv->v_pos);
        } else {
            const size_t row0 = (size_t)(l - kv->n_layers) * kv->n_ctx + cj->from;
            rc = commit_touched(kv->ik, row0 * kv->ik_pos, cj->len * kv->ik_pos);
        }
        if (rc) atomic_store(&cj->rc, rc);
    }
}

// Commit the blocks of positions [0, n_pos) of every layer that are not yet: the layers shared
// among the threads when a prompt's blocks are many pages (a 512-token prompt of 6 layers of F32
// rows is 12 MiB, 3,072 page faults: 20 ms on the development VM, on one thread while the others
// waited).
static int kv_rows_commit(struct cpu_ctx *c, struct cpu_kv *kv, int n_pos)
{
    if (n_pos <= kv->n_commit) return 0;
    int want = (n_pos + STRATA_KV_BLOCK - 1) / STRATA_KV_BLOCK * STRATA_KV_BLOCK;
    if (want > kv->n_ctx) want = kv->n_ctx;
    struct kv_commit_job cj = {.kv = kv, .from = (size_t)kv->n_commit, .len = (size_t)(want - kv->n_commit)};
    atomic_init(&cj.rc, 0);
    const size_t bytes = cj.len * ((kv->k_pos + kv->v_pos) * (size_t)kv->n_layers + kv->ik_pos * (size_t)kv->n_ik_layers);
    struct rows_job j = {.fn = kv_commit_layers, .n = kv->n_layers + kv->n_ik_layers, .op = &cj};
    // work in floats, as run_rows counts it: one page fault costs about what a thread's share of
    // STRATA_PAR_MIN floats of elementwise work does
    run_rows(c, &j, bytes / 4096 * (STRATA_PAR_MIN / 64));
    const int rc = atomic_load(&cj.rc);
    if (rc) {
        strata_log_error("kv: out of memory for KV positions %d..%d (%zu bytes)", kv->n_commit, want - 1, bytes);
        return rc;
    }
    kv->n_commit = want;
    return 0;
}

static int cpu_kv_create(void *vctx, const struct strata_kv_params *p, void **out)
{
    struct cpu_ctx *c = vctx;
    *out = NULL;
    if (!p->plain && (p->k_type != STRATA_TYPE_F32 || p->v_type != STRATA_TYPE_F32)) {
        strata_log_error("kv_create: a %s / %s KV cache needs plain attention; this model's (sliding window, sinks "
                         "or latent cache) takes f32 only", strata_type_name(p->k_type), strata_type_name(p->v_type));
        return STRATA_EUNSUP;
    }
    struct cpu_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return STRATA_ENOMEM;
    // F32 keeps the rows and the ggml-order attention: its output rounds into the output
    // projection's int8 activations as llama.cpp's does (the tiled order moves one in a few
    // thousand across a step, which quantized-weight parity notices)
    kv->typed = p->plain && !(p->k_type == STRATA_TYPE_F32 && p->v_type == STRATA_TYPE_F32);
    kv->n_ctx = p->n_ctx;
    int rc = 0;
    if (kv->typed) {
        rc = strata_kv_create(&kv->c, p->n_layers, p->n_head_kv, p->head_dim_k, p->head_dim_v, (uint32_t)p->n_ctx,
                              p->k_type, p->v_type, c->k);
        if (rc == STRATA_EARG) rc = STRATA_EUNSUP;
    } else {
        kv->n_layers = (int)p->n_layers;
        kv->k_pos = (size_t)p->n_head_kv * p->head_dim_k * sizeof(float);
        kv->v_pos = (size_t)p->n_head_kv * p->head_dim_v * sizeof(float);
        const size_t rows = (size_t)p->n_layers * (size_t)p->n_ctx;
        kv->k_map = rows * kv->k_pos, kv->v_map = rows * kv->v_pos;
        kv->k = strata_reserve_pages(kv->k_map);
        kv->v = kv->v_map ? strata_reserve_pages(kv->v_map) : NULL;
        kv->n_ik_layers = (int)p->idx_layers;
        kv->ik_pos = (size_t)p->idx_dim * sizeof(float);
        kv->ik_map = (size_t)p->idx_layers * (size_t)p->n_ctx * kv->ik_pos;
        kv->ik = kv->ik_map ? strata_reserve_pages(kv->ik_map) : NULL;
        if (!kv->k || (kv->v_map && !kv->v) || (kv->ik_map && !kv->ik)) {
            strata_log_error("kv_create: no address space for a KV cache of %zu bytes",
                             kv->k_map + kv->v_map + kv->ik_map);
            rc = STRATA_ENOMEM;
        }
    }
    if (rc) {
        strata_release_pages(kv->k, kv->k_map);
        strata_release_pages(kv->v, kv->v_map);
        strata_release_pages(kv->ik, kv->ik_map);
        free(kv);
        return rc;
    }
    *out = kv;
    return 0;
}

static void cpu_kv_free(void *vctx, void *vkv)
{
    (void)vctx;
    struct cpu_kv *kv = vkv;
    if (!kv) return;
    if (kv->typed) strata_kv_free(&kv->c);
    strata_release_pages(kv->k, kv->k_map);
    strata_release_pages(kv->v, kv->v_map);
    strata_release_pages(kv->ik, kv->ik_map);
    free(kv);
}

static size_t cpu_kv_bytes(void *vctx, const void *vkv)
{
    (void)vctx;
    const struct cpu_kv *kv = vkv;
    if (!kv) return 0;
    if (kv->typed) return strata_kv_bytes(&kv->c);
    return (size_t)kv->n_commit *
           ((size_t)kv->n_layers * (kv->k_pos + (kv->v ? kv->v_pos : 0)) + (size_t)kv->n_ik_layers * kv->ik_pos);
}

// The indexer's Hadamard matrix is built on the first call with its d and its scratch grows with
// the longest sequence of a pass (both once per session shape, not per token); its keys live in
// each sequence's KV cache, committed with the attention's positions.
static int cpu_indexer(void *vctx, const struct strata_indexer_op *op)
{
    struct cpu_ctx *c = vctx;
    int max_ctx = 0, rc;
    for (int s = 0; s < op->batch->n_seq; s++)
        if (op->batch->seq[s].n_ctx > max_ctx) max_ctx = op->batch->seq[s].n_ctx;
    if (op->d != c->idx_d) {
        if ((rc = grow((void **)&c->idx_h, &c->idx_h_cap, (size_t)op->d * op->d * sizeof(float), "indexer matrix")))
            return rc;
        strata_hadamard_init(c->idx_h, op->d);
        c->idx_d = op->d;
    }
    const size_t want = strata_cpu_indexer_scratch(strata_pool_size(c->pool), max_ctx, op->top_k, op->d);
    if ((rc = grow((void **)&c->idx_scratch, &c->idx_scratch_cap, want * sizeof(float), "indexer scores")) ||
        (rc = grow((void **)&c->idx_keys, &c->idx_keys_cap, (size_t)op->batch->n_seq * sizeof(float *), "indexer keys")))
        return rc;
    for (int s = 0; s < op->batch->n_seq; s++) {
        const struct strata_seq *sq = &op->batch->seq[s];
        struct cpu_kv *kv = sq->kv;
        STRATA_ASSERT(kv && !kv->typed && op->idx_slot < (uint32_t)kv->n_ik_layers && op->d * sizeof(float) == kv->ik_pos);
        if ((rc = kv_rows_commit(c, kv, sq->pos0 + sq->n_tok))) return rc;
        c->idx_keys[s] = kv->ik + (size_t)op->idx_slot * kv->n_ctx * op->d;
    }
    strata_cpu_indexer(c->pool, c->k->isa, op, c->idx_keys, c->idx_h, c->idx_scratch);
    return 0;
}

// ---- attention ---------------------------------------------------------------------------------

struct attn_job {
    const struct cpu_ctx *c;
    const struct strata_attn_op *op;
    int per;                         // heads of a token per work item
    atomic_int next;
};

static void attn_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct attn_job *j = arg;
    const struct strata_attn_op *op = j->op;
    const struct strata_batch *b = op->batch;
    const int H = (int)op->n_head, D = (int)op->head_dim_k, Dv = (int)op->head_dim_v;
    const int group = H / (int)op->n_head_kv;
    const size_t KD = (size_t)op->n_head_kv * D, VD = (size_t)op->n_head_kv * Dv;
    float *scores = j->c->att_scratch + (size_t)ith * STRATA_ATTN_GROUP * j->c->att_ctx;
    const int per = j->per, n_hg = (H + per - 1) / per;
    struct strata_attn_query aq[STRATA_ATTN_GROUP];
    int i0, i1;
    while (strata_chunk_next(&j->next, b->n_tok * n_hg, 1, &i0, &i1)) {
        const int t = i0 / n_hg, h0 = i0 % n_hg * per, g = H - h0 < per ? H - h0 : per, kvh = h0 / group;
        const struct strata_seq *sq = &b->seq[j->c->tok_seq[t]];
        const struct cpu_kv *kv = sq->kv;
        const float *kc = kv->k + (size_t)op->kv_slot * sq->n_ctx * KD;
        // MLA: the value is the latent prefix of the key row
        const float *vc = op->latent_kv ? kc : kv->v + (size_t)op->kv_slot * sq->n_ctx * VD;
        const int n_kv = b->pos[t] + 1;  // causal: positions 0..pos
        // in llama.cpp's order of operations, so the output-projection activations round alike
        for (int i = 0; i < g; i++) {
            const int h = h0 + i;
            aq[i] = (struct strata_attn_query){
                .q = op->q + (size_t)t * op->q_tok_stride + (size_t)h * op->q_head_stride,
                .k = kc + (size_t)kvh * D, .k_stride = KD,
                .v = op->latent_kv ? kc + (size_t)kvh * D : vc + (size_t)kvh * Dv, .v_stride = op->latent_kv ? KD : VD,
                .n_kv = n_kv,
                .D = (uint32_t)D, .Dv = (uint32_t)Dv, .scale = op->scale,
                .scores = scores + (size_t)i * j->c->att_ctx,
                .out = op->out + (size_t)t * H * Dv + (size_t)h * Dv,
                .kv_start = op->n_swa && n_kv > (int)op->n_swa ? n_kv - (int)op->n_swa : 0,
                .visible = op->visible ? op->visible + (size_t)t * (op->visible_stride ? op->visible_stride : (size_t)sq->n_ctx)
                                       : NULL,
                .sink = op->sinks ? op->sinks + h : NULL,
            };
        }
        if (g == 1) strata_attn_head(j->c->k->isa, &aq[0]);
        else if (!op->latent_kv && !op->visible) strata_attn_rows(j->c->k->isa, aq, g);  // tiles in registers
        else strata_attn_heads(j->c->k->isa, aq, g);
    }
}

// Several tokens (a prompt): the (token, head) rows of each sequence and key head (MLA: the one
// latent head; grouped-query attention: the query heads of each key head), token-major, in items
// of up to `per` rows that strata_attn_rows computes as tiled products over the key and value
// rows. An item whose token sees under a quarter of its positions (the indexer's top-k over a long
// context) takes the grouped heads instead, which skip the masked positions' dots. The same bits
// either way, and those of attn_worker's heads one at a time.
struct attn_rows_job {
    const struct cpu_ctx *c;
    const struct strata_attn_op *op;
    float *scratch;                  // [n_threads][STRATA_ATTN_ROWS][n_ctx]
    size_t scratch_ctx;
    int per;
    atomic_int next;
};

static bool rows_sparse(const uint8_t *vis, int n_kv)
{
    int seen = 0;
    for (int p = 0; p < n_kv; p++) seen += vis[p] != 0;
    return 4 * seen < n_kv;
}

static void attn_rows_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct attn_rows_job *j = arg;
    const struct strata_attn_op *op = j->op;
    const struct strata_batch *b = op->batch;
    const int H = (int)op->n_head, HKV = (int)op->n_head_kv, group = H / HKV, per = j->per;
    float *scores = j->scratch + (size_t)ith * STRATA_ATTN_ROWS * j->scratch_ctx;
    int n_items = 0;
    for (int s = 0; s < b->n_seq; s++) n_items += HKV * ((b->seq[s].n_tok * group + per - 1) / per);
    struct strata_attn_query aq[STRATA_ATTN_ROWS];
    int i0, i1;
    while (strata_chunk_next(&j->next, n_items, 1, &i0, &i1)) {
        int s = 0, item = i0;
        for (;; s++) {
            const int n = HKV * ((b->seq[s].n_tok * group + per - 1) / per);
            if (item < n) break;
            item -= n;
        }
        const struct strata_seq *sq = &b->seq[s];
        const int n_rows = sq->n_tok * group, per_kvh = (n_rows + per - 1) / per, kvh = item / per_kvh;
        const struct cpu_kv *kv = sq->kv;
        const size_t D = op->head_dim_k, Dv = op->head_dim_v, KD = (size_t)HKV * D, VD = (size_t)HKV * Dv;
        const float *kc = kv->k + (size_t)op->kv_slot * sq->n_ctx * KD + (size_t)kvh * D;
        // MLA: the value is the latent prefix of the key row
        const float *vc = op->latent_kv ? kc : kv->v + (size_t)op->kv_slot * sq->n_ctx * VD + (size_t)kvh * Dv;
        const size_t vis_stride = op->visible_stride ? op->visible_stride : (size_t)sq->n_ctx;
        const int r0 = item % per_kvh * per, r1 = r0 + per < n_rows ? r0 + per : n_rows;
        for (int r = r0; r < r1; r++) {
            const int t = sq->tok0 + r / group, h = kvh * group + r % group, n_kv = b->pos[t] + 1;
            aq[r - r0] = (struct strata_attn_query){
                .q = op->q + (size_t)t * op->q_tok_stride + (size_t)h * op->q_head_stride,
                .k = kc, .k_stride = KD, .v = vc, .v_stride = op->latent_kv ? KD : VD,
                .n_kv = n_kv, .D = (uint32_t)D, .Dv = (uint32_t)Dv, .scale = op->scale,
                .scores = scores + (size_t)(r - r0) * j->scratch_ctx,
                .out = op->out + (size_t)t * H * Dv + (size_t)h * Dv,
                .kv_start = op->n_swa && n_kv > (int)op->n_swa ? n_kv - (int)op->n_swa : 0,
                .visible = op->visible ? op->visible + (size_t)t * vis_stride : NULL,
                .sink = op->sinks ? op->sinks + h : NULL,
            };
        }
        const int n = r1 - r0;
        if (!op->visible || !rows_sparse(aq[0].visible, aq[0].n_kv)) {
            strata_attn_rows(j->c->k->isa, aq, n);
            continue;
        }
        // the heads of one token at a time, STRATA_ATTN_GROUP of them
        for (int a0 = 0; a0 < n;) {
            int g = 1;
            while (a0 + g < n && g < STRATA_ATTN_GROUP && aq[a0 + g].visible == aq[a0].visible) g++;
            if (g == 1) strata_attn_head(j->c->k->isa, &aq[a0]);
            else strata_attn_heads(j->c->k->isa, aq + a0, g);
            a0 += g;
        }
    }
}

// llama.cpp rotates what goes into a quantized cache (llama-kv-cache.cpp, attn_rot_k / attn_rot_v):
// with a quantized key type and dk % 64 == 0, queries and keys by H_nk, nk the largest power of two
// dividing dk; with a quantized value type and dv % 64 == 0, values by H_64 and the attention output
// back by H_64 (H orthonormal and symmetric, so H H = I and q . k is unchanged in exact arithmetic).
// H_n is Sylvester's Walsh-Hadamard matrix / sqrt(n), applied to consecutive chunks of n elements.
static uint32_t rot_dim_k(uint32_t type, uint32_t dk)
{
    if (type != STRATA_TYPE_Q8_0 || dk % 64) return 0;
    uint32_t n = 64;
    while (dk % (2 * n) == 0) n *= 2;
    return n;
}
static uint32_t rot_dim_v(uint32_t type, uint32_t dv) { return type == STRATA_TYPE_Q8_0 && dv % 64 == 0 ? 64 : 0; }

// x <- H_n x over the chunks of n of x[0..len), in ggml's order (ggml_compute_forward_fwht: the
// scale first, then butterflies of width 1, 2, 4, ...; each element's operations are fixed, so a
// vector version gives the same bits).
static void fwht(float *x, size_t len, uint32_t n)
{
    const float scale = 1.0f / sqrtf((float)n);
    for (size_t c = 0; c + n <= len; c += n) {
        float *r = x + c;
        for (uint32_t i = 0; i < n; i++) r[i] *= scale;
        for (uint32_t w = 1; w < n; w <<= 1)
            for (uint32_t i = 0; i < n; i += 2 * w)
                for (uint32_t j = 0; j < w; j++) {
                    const float u = r[i + j], v = r[i + w + j];
                    r[i + j] = u + v;
                    r[i + w + j] = u - v;
                }
    }
}

// The queries of one sequence's tokens [tok0, tok0 + n) into c->fa_q as [n][n_head][dk], rotated
// as above and rounded to the key type's dot format and back (exact in float), as llama.cpp
// rounds them.
struct query_job {
    const struct strata_attn_op *op;
    int tok0;
    uint32_t rot, vdt;
    size_t round_bytes;              // a thread's share of fa_round
};

static void query_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    const struct query_job *q = j->op;
    const struct strata_attn_op *op = q->op;
    struct cpu_ctx *c = j->c;
    const uint32_t H = op->n_head, dk = op->head_dim_k;
    void *round = (char *)c->fa_round + (size_t)ith * q->round_bytes;
    for (int t = r0; t < r1; t++)
        for (uint32_t h = 0; h < H; h++) {
            const float *src = op->q + (size_t)(q->tok0 + t) * op->q_tok_stride + (size_t)h * op->q_head_stride;
            float *dst = c->fa_q + ((size_t)t * H + h) * dk;
            memcpy(dst, src, dk * sizeof(float));
            if (q->rot) fwht(dst, dk, q->rot);
            if (q->vdt != STRATA_TYPE_F32) {
                c->k->quantize[q->vdt](dst, round, dk);
                c->k->dequant[q->vdt](round, dst, dk);
            }
        }
}

static int fattn_queries(struct cpu_ctx *c, const struct strata_attn_op *op, uint32_t k_type, int tok0, int n)
{
    const uint32_t H = op->n_head, dk = op->head_dim_k;
    const size_t nth = (size_t)strata_pool_size(c->pool);
    struct query_job q = {op, tok0, rot_dim_k(k_type, dk), strata_type_traits(k_type)->vec_dot_type, 0};
    q.round_bytes = (strata_type_row_bytes(q.vdt, dk) + 63) / 64 * 64;
    int rc = grow((void **)&c->fa_q, &c->fa_q_cap, (size_t)n * H * dk * sizeof(float), "attention queries");
    if (rc == 0) rc = grow(&c->fa_round, &c->fa_round_cap, nth * q.round_bytes, "attention queries");
    if (rc) return rc;
    struct rows_job j = {.fn = query_rows, .n = n, .op = &q};
    run_rows(c, &j, (size_t)n * H * dk);
    return 0;
}

// Storing a sequence's keys and values in its typed cache, tokens shared among the threads: each
// thread rotates (Q8_0) and rounds in its own scratch, and positions own their bytes of a block.
struct store_job {
    const struct strata_attn_op *op;
    struct strata_kv_cache *kv;
    int tok0;
    uint32_t rk, rv;
    size_t KD, VD, per;              // floats of a thread's scratch
};

static void store_rows(const struct rows_job *j, int r0, int r1, int ith)
{
    const struct store_job *s = j->op;
    const struct strata_attn_op *op = s->op;
    float *rot = j->c->store_scratch + (size_t)ith * s->per;
    for (int t = s->tok0 + r0; t < s->tok0 + r1; t++) {
        const float *k = op->k + (size_t)t * s->KD, *v = op->v + (size_t)t * s->VD;
        if (s->rk) {
            memcpy(rot, k, s->KD * sizeof(float));
            fwht(rot, s->KD, s->rk);
            k = rot;
        }
        if (s->rv) {
            memcpy(rot + s->KD, v, s->VD * sizeof(float));
            fwht(rot + s->KD, s->VD, s->rv);
            v = rot + s->KD;
        }
        strata_kv_store_with(s->kv, op->kv_slot, (uint32_t)op->batch->pos[t], k, v, rot + s->KD + s->VD);
    }
}

// Plain attention over typed caches: each sequence's keys and values stored, then its queries
// through the tiled attention (fattn.h), one sequence at a time over the whole pool.
static int attention_typed(struct cpu_ctx *c, const struct strata_attn_op *op)
{
    const struct strata_batch *b = op->batch;
    const size_t KD = (size_t)op->n_head_kv * op->head_dim_k, VD = (size_t)op->n_head_kv * op->head_dim_v;
    if (op->latent_kv || op->n_swa || op->sinks || op->visible) {
        strata_log_error("cpu attention: a typed KV cache takes plain causal attention only");
        return STRATA_EUNSUP;
    }
    const uint32_t group = op->n_head / op->n_head_kv;
    const int nth = strata_pool_size(c->pool);
    int rc;
    for (int s = 0; s < b->n_seq; s++) {
        const struct strata_seq *sq = &b->seq[s];
        struct strata_kv_cache *kv = &((struct cpu_kv *)sq->kv)->c;
        STRATA_ASSERT(kv->dk == op->head_dim_k && kv->dv == op->head_dim_v && kv->n_head_kv == op->n_head_kv);
        if ((rc = strata_kv_reserve(kv, (uint32_t)(sq->pos0 + sq->n_tok), c->pool))) return rc;
        struct store_job sj = {op, kv, sq->tok0, rot_dim_k(kv->k_type, kv->dk), rot_dim_v(kv->v_type, kv->dv), KD, VD, 0};
        sj.per = (KD + VD + kv->dk + 15) / 16 * 16;
        if ((rc = grow((void **)&c->store_scratch, &c->store_scratch_cap, (size_t)nth * sj.per * sizeof(float),
                       "attention keys")))
            return rc;
        struct rows_job j = {.fn = store_rows, .n = sq->n_tok, .op = &sj};
        run_rows(c, &j, (size_t)sq->n_tok * (KD + VD));
    }
    for (int s = 0; s < b->n_seq; s++) {
        const struct strata_seq *sq = &b->seq[s];
        const struct strata_kv_cache *kv = &((const struct cpu_kv *)sq->kv)->c;
        if (!c->fa || c->fa_dims[0] != kv->dk || c->fa_dims[1] != kv->dv || c->fa_dims[2] != group) {
            strata_fattn_free(c->fa);
            c->fa = NULL;
            if ((rc = strata_fattn_create(&c->fa, nth, c->k->isa, kv->dk, kv->dv, group))) return rc;
            c->fa_dims[0] = kv->dk, c->fa_dims[1] = kv->dv, c->fa_dims[2] = group;
        }
        if ((rc = fattn_queries(c, op, kv->k_type, sq->tok0, sq->n_tok))) return rc;
        const struct strata_fattn a = {
            .kv = kv, .layer = op->kv_slot, .n_head = op->n_head, .n_tok = sq->n_tok, .pos = b->pos + sq->tok0,
            .q = c->fa_q, .out = op->out + (size_t)sq->tok0 * op->n_head * op->head_dim_v, .scale = op->scale,
        };
        if ((rc = strata_fattn_run(c->fa, c->pool, &a))) return rc;
        const uint32_t rv = rot_dim_v(kv->v_type, kv->dv);
        if (rv) fwht(a.out, (size_t)sq->n_tok * op->n_head * kv->dv, rv);
    }
    return 0;
}

static int cpu_attention(void *vctx, const struct strata_attn_op *op)
{
    struct cpu_ctx *c = vctx;
    const struct strata_batch *b = op->batch;
    if (b->n_seq > 0 && ((const struct cpu_kv *)b->seq[0].kv)->typed) return attention_typed(c, op);
    const size_t KD = (size_t)op->n_head_kv * op->head_dim_k, VD = (size_t)op->n_head_kv * op->head_dim_v;
    for (int s = 0; s < b->n_seq; s++) {
        const struct strata_seq *sq = &b->seq[s];
        struct cpu_kv *kv = sq->kv;
        STRATA_ASSERT(!kv->typed && sq->pos0 + sq->n_tok <= sq->n_ctx && sq->n_ctx <= c->att_ctx);
        int rc = kv_rows_commit(c, kv, sq->pos0 + sq->n_tok);
        if (rc) return rc;
        float *kc = kv->k + (size_t)op->kv_slot * sq->n_ctx * KD;
        float *vc = op->latent_kv ? NULL : kv->v + (size_t)op->kv_slot * sq->n_ctx * VD;
        for (int t = sq->tok0; t < sq->tok0 + sq->n_tok; t++) {
            memcpy(kc + (size_t)b->pos[t] * KD, op->k + (size_t)t * KD, KD * sizeof(float));
            if (!op->latent_kv) memcpy(vc + (size_t)b->pos[t] * VD, op->v + (size_t)t * VD, VD * sizeof(float));
        }
    }
    // Several tokens (a prompt): tiles of rows, as many as leave every thread two items or more;
    // one token (decode): the heads below, grouped for MLA
    if (b->n_tok > 1) {
        // scores up to the furthest position of the batch (the scratch follows the filled context,
        // as the KV rows do, not -c: 32 rows per thread)
        int n_ctx = 1;
        for (int t = 0; t < b->n_tok; t++) n_ctx = b->pos[t] + 1 > n_ctx ? b->pos[t] + 1 : n_ctx;
        const size_t nth = (size_t)strata_pool_size(c->pool);
        int rc = grow((void **)&c->rows_scratch, &c->rows_scratch_cap,
                      nth * STRATA_ATTN_ROWS * (size_t)n_ctx * sizeof(float), "attention row scores");
        if (rc) return rc;
        int per = b->n_tok * (int)op->n_head / (2 * (int)nth);
        per = per < 1 ? 1 : per > STRATA_ATTN_ROWS ? STRATA_ATTN_ROWS : per;
        struct attn_rows_job rj = {.c = c, .op = op, .scratch = c->rows_scratch, .scratch_ctx = (size_t)n_ctx, .per = per};
        atomic_init(&rj.next, 0);
        strata_pool_run(c->pool, attn_rows_worker, &rj);
        return 0;
    }
    // MLA: the heads of a token share the one latent row of each position, so a work item takes up
    // to STRATA_ATTN_GROUP of them and reads each row once for all (the same bits per head), as
    // many as leave every thread two items or more (decode on many cores). Grouped-query
    // attention: the query heads of one key head likewise, a divisor of the group, as many as
    // leave half the threads an item. A long context's key and value rows are most of a decode
    // step's bytes, and one head an item read them once per query head (8 times on the
    // qwen3-30b-a3b shape: an 8,192-token context decoded 4x slower in F32 than in F16).
    int per = 1;
    const int nth = strata_pool_size(c->pool);
    if (op->latent_kv) {
        per = b->n_tok * (int)op->n_head / (2 * nth);
        per = per < 1 ? 1 : per > STRATA_ATTN_GROUP ? STRATA_ATTN_GROUP : per;
    } else if (op->n_head_kv > 0 && op->n_head > op->n_head_kv) {
        const int group = (int)(op->n_head / op->n_head_kv);
        for (int d = group < STRATA_ATTN_GROUP ? group : STRATA_ATTN_GROUP; d > 1; d--)
            if (group % d == 0 && b->n_tok * (int)op->n_head / d >= (nth + 1) / 2) {
                per = d;
                break;
            }
    }
    struct attn_job aj = {.c = c, .op = op, .per = per};
    atomic_init(&aj.next, 0);
    strata_pool_run(c->pool, attn_worker, &aj);
    return 0;
}

static int cpu_deltanet(void *vctx, const struct strata_deltanet_op *op)
{
    struct cpu_ctx *c = vctx;
    strata_cpu_deltanet(c->pool, c->k->isa, op);
    return 0;
}

// ---- lifecycle ---------------------------------------------------------------------------------

static void cpu_free(void *vctx)
{
    struct cpu_ctx *c = vctx;
    if (!c) return;
    strata_pool_free(c->pool);
    strata_gemm_free(c->gemm);
    free(c->act);
    free(c->att_scratch);
    free(c->rows_scratch);
    strata_fattn_free(c->fa);
    free(c->fa_q);
    free(c->fa_round);
    free(c->store_scratch);
    free(c->row);
    free(c->tok_seq);
    free(c->idx_keys);
    free(c->idx_h);
    free(c->idx_scratch);
    pthread_mutex_destroy(&c->maps_mu);
    free(c);
}

static void cpu_threads_info(void *vctx, struct strata_backend_threads *out)
{
    struct cpu_ctx *c = vctx;
    struct strata_pool_counters pc;
    strata_pool_counters(c->pool, &pc);
    *out = (struct strata_backend_threads){pc.n_threads, pc.runs, pc.run_s, pc.tail_s, pc.busy_s};
}

struct host_for_job {
    strata_host_part_fn fn;
    void *arg;
    int n, parts;
};

static void host_for_worker(void *varg, int ith, int nth)
{
    (void)nth;
    const struct host_for_job *j = varg;
    if (ith >= j->parts) return;
    const int i0 = (int)((int64_t)j->n * ith / j->parts), i1 = (int)((int64_t)j->n * (ith + 1) / j->parts);
    if (i0 < i1) j->fn(j->arg, ith, i0, i1);
}

static void cpu_host_for(void *vctx, strata_host_part_fn fn, void *arg, int n, int max_parts)
{
    struct cpu_ctx *c = vctx;
    int parts = strata_pool_size(c->pool);
    if (parts > max_parts) parts = max_parts;
    if (parts > n) parts = n;
    if (parts <= 1) {
        if (n > 0) fn(arg, 0, 0, n);
        return;
    }
    struct host_for_job j = {fn, arg, n, parts};
    strata_pool_run(c->pool, host_for_worker, &j);
}

static const struct strata_backend_i g_cpu_iface = {
    .name = "cpu",
    .host_memory = true,
    .alloc_zeroed = true,
    .free = cpu_free,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .memset = cpu_memset,
    .weight_load = cpu_weight_load,
    .weight_free = cpu_weight_free,
    .reserve = cpu_reserve,
    .supports_type = cpu_supports_type,
    .sync = cpu_sync,
    .kv_create = cpu_kv_create,
    .kv_free = cpu_kv_free,
    .kv_bytes = cpu_kv_bytes,
    .batch_begin = cpu_batch_begin,
    .mm = cpu_mm,
    .get_rows = cpu_get_rows,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .attention = cpu_attention,
    .deltanet = cpu_deltanet,
    .swiglu = cpu_swiglu,
    .add = cpu_add,
    .mul_sigmoid = cpu_mul_sigmoid,
    .moe_combine = cpu_moe_combine,
    // the ops of deepseek2 / deepseek32 / glm-dsa / gpt-oss; device routing: not offered
    .copy = cpu_copy_rows,
    .layernorm = cpu_layernorm,
    .swiglu_oai = cpu_swiglu_oai,
    .indexer = cpu_indexer,
    .route = NULL,
    .threads_info = cpu_threads_info,
    .host_for = cpu_host_for,
};

int strata_backend_cpu_open(struct strata_backend *out, int n_threads, bool lazy_memory)
{
    *out = (struct strata_backend){0};
    struct cpu_ctx *c = calloc(1, sizeof *c);
    if (!c) return STRATA_ENOMEM;
    c->lazy = lazy_memory;
    pthread_mutex_init(&c->maps_mu, NULL);
    c->k = strata_kernels();
    int rc = strata_pool_create(&c->pool, n_threads);
    if (rc) {
        free(c);
        return rc;
    }
    const char *env = getenv("STRATA_CPU_GEMM");
    if (!(env && strcmp(env, "0") == 0)) {
        rc = strata_gemm_create(&c->gemm, strata_pool_size(c->pool), strata_gemm_level_for(c->k->isa));
        if (rc) {
            cpu_free(c);
            return rc;
        }
    }
    *out = (struct strata_backend){&g_cpu_iface, c};
    return 0;
}
