// The CUDA backend (backend.h) over the kernels of cuda.h: device memory, one stream, every op of
// the forward pass a launch (or a few) on it.
//
// Products. mm rounds each distinct activation block of a call once (as the CPU backend: the same
// formats, the same bits), where a block is (x, stride, rows, width, format) and a product whose
// rows continue a block right after its end (the down projections of a layer's experts, each on
// its own rows of one buffer) extends that block instead of starting one. Products of the same
// shape and format whose rows follow one another (a layer's experts: rows grouped by expert, the
// gather lists and outputs contiguous) and that have few rows each become one mat-vec launch over
// a table of weight pointers (the slot table of cuda.h); a product of many rows of one weight goes
// through the tensor-core GEMM. Both give the same bits, so a token's result does not depend on
// its batch. The tables go up through a pinned ring that is reused after every full drain of the
// stream (download, sync).
//
// Decode graphs (STRATA_CUDA_GRAPH=0 turns them off). The second pass of a shape (tokens, sequences, their
// lengths and contexts) is recorded and captured from batch_begin on (tape.cu); the passes of that
// shape after it replay the captured graphs where every launch matches the record (the step's
// data lives in device memory and the ring, whose offsets repeat from pass to pass since every
// pass ends in a drain), and leave them at the first launch that does not. The capture ends at the
// pass's first drain (the logits' download, a sync, a scratch that grows); what follows runs on
// the stream. The first pass of a shape is never recorded: it grows the scratch.
//
// Attention takes every option of the op (attn.cu): sliding windows and sinks (gpt-oss), MLA's
// latent cache (keys only: kv_create gets head_dim_v 0) and the indexer's mask (deepseek2,
// glm-dsa), keys and values of different widths. The other ops those architectures add (copy,
// layernorm, swiglu_oai, the indexer, RoPE with YaRN and the NORM pair layout) are ext.cu's and
// rows.cu's.
#include "backend/cuda/backend_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/rope_ext.h"
#include "backend/cuda/cuda.h"
#include "quant/quant.h"
#include "util/log.h"

#define MAX_OPS 2048                 // products in one mm call (backend/cpu/ops.h's job limit)
#define RING_BYTES ((size_t)8 << 20) // pinned tables and small uploads of one pass
#define SMALL_UPLOAD ((size_t)64 << 10)

struct act_block {
    const float *x;
    size_t x_stride;
    int n_rows;
    uint32_t n_in, vdt;
    bool gathered;                   // an op reads it through a row list (no extension then)
    size_t offset;                   // in act_buf
    struct strata_cuda_act act;
};

struct cuda_ctx {
    struct strata_cuda *cu;
    char *act_buf;                   // device: rounded activations of one mm call
    size_t act_cap;
    float *attn_scratch;             // device
    size_t attn_cap;                 // floats
    char *ring_host, *ring_dev;      // pinned host / device, RING_BYTES each
    size_t ring_used;
    const struct strata_batch *batch;
    struct act_block blocks[MAX_OPS];
    int block_of[MAX_OPS];
    uint32_t row_off[MAX_OPS];       // first row of op i in its block
    struct strata_cuda_act views[MAX_OPS];
    bool done[MAX_OPS];
    int group[MAX_OPS];
    void *grp_buf;                   // device: the grouping of a prompt's routed pairs (moe)
    size_t grp_cap;
    struct strata_cuda_info info;
    void *pre_buf;                   // device: attention output rounded for the next product
    size_t pre_cap;
    struct act_block pre;            // that block (pre_valid: the next mm may take it as is)
    bool pre_valid;
    float *idx_scores;               // device: the indexer's scores of one launch group
    size_t idx_cap;                  // bytes
    bool graphs;                     // decode graphs (off with STRATA_CUDA_GRAPH=0)
    uint64_t last_key;               // shape of the last pass (0: none)
};

// ---- memory ------------------------------------------------------------------------------------

static void *cuda_be_alloc(void *vctx, size_t bytes, const char *what)
{
    struct cuda_ctx *c = vctx;
    return strata_cuda_alloc(c->cu, bytes + STRATA_CUDA_PAD, what);
}

static int settle(struct cuda_ctx *c);

// The pre block (rows rounded ahead by the step that wrote them: the attention's output, a norm
// given the next products' format) stays valid until something may write those rows: every op
// that writes memory drops it, except where the written range is known not to meet it.
static void pre_drop(struct cuda_ctx *c) { c->pre_valid = false; }

// Whether floats [p, p + n) meet the rows the pre block was rounded from; drops it if so.
static void pre_clobber(struct cuda_ctx *c, const void *p, size_t bytes)
{
    if (!c->pre_valid) return;
    const char *a = (const char *)c->pre.x;
    const char *e = a + ((size_t)(c->pre.n_rows - 1) * c->pre.x_stride + c->pre.n_in) * sizeof(float);
    if ((const char *)p < e && (const char *)p + bytes > a) c->pre_valid = false;
}

// Whether the pre block holds rows x (stride, count, width) rounded to vdt.
static bool pre_takes(const struct cuda_ctx *c, const float *x, size_t x_stride, int n_rows, uint32_t n_in,
                      uint32_t vdt)
{
    const struct act_block *pb = &c->pre;
    return c->pre_valid && pb->x == x && pb->x_stride == x_stride && pb->n_rows == n_rows && pb->n_in == n_in &&
           pb->vdt == vdt;
}

static void cuda_be_release(void *vctx, void *p)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);  // the address may come back for other rows
    if (settle(c)) strata_log_warn("cuda backend: a decode graph failed before a release");
    strata_cuda_free(c->cu, p);
}

// Ends a decode pass's record or replay: what it holds back is launched, and the rest of the pass
// runs on the stream (called before anything that drains it).
static int settle(struct cuda_ctx *c) { return strata_cuda_tape_end(c->cu); }

// Room for `bytes` in the ring (256-aligned); drains the stream and starts over when full.
static int ring_take(struct cuda_ctx *c, size_t bytes, size_t *off)
{
    bytes = (bytes + 255) & ~(size_t)255;
    if (c->ring_used + bytes > RING_BYTES) {
        int rc = settle(c);
        if (rc == 0) rc = strata_cuda_sync(c->cu);
        if (rc) return rc;
        c->ring_used = 0;
    }
    *off = c->ring_used;
    c->ring_used += bytes;
    return 0;
}

static int cuda_be_sync(void *vctx)
{
    struct cuda_ctx *c = vctx;
    int rc = settle(c);
    if (rc == 0) rc = strata_cuda_sync(c->cu);
    if (rc == 0) c->ring_used = 0;
    return rc;
}

// Small uploads are queued on the stream through the ring (no drain); large ones go through the
// pinned staging of cuda.h.
static int cuda_be_upload(void *vctx, void *dst, const void *src, size_t bytes)
{
    struct cuda_ctx *c = vctx;
    if (bytes == 0) return 0;
    pre_clobber(c, dst, bytes);
    if (bytes <= SMALL_UPLOAD && c->ring_host) {
        size_t off;
        int rc = ring_take(c, bytes, &off);
        if (rc) return rc;
        memcpy(c->ring_host + off, src, bytes);
        return strata_cuda_copy_async(c->cu, dst, c->ring_host + off, bytes);
    }
    int rc = settle(c);
    if (rc) return rc;
    return strata_cuda_upload_staged(c->cu, dst, src, bytes, NULL, NULL);
}

static int cuda_be_download(void *vctx, void *dst, const void *src, size_t bytes)
{
    struct cuda_ctx *c = vctx;
    if (bytes == 0) return 0;
    int rc = settle(c);
    if (rc == 0) rc = strata_cuda_download(c->cu, dst, src, bytes);
    if (rc == 0) c->ring_used = 0;  // the stream is drained
    return rc;
}

static int cuda_be_memset(void *vctx, void *dst, int value, size_t bytes)
{
    struct cuda_ctx *c = vctx;
    pre_clobber(c, dst, bytes);
    return strata_cuda_memset(c->cu, dst, value, bytes);
}

static int cuda_be_weight_load(void *vctx, const struct strata_mat *host, struct strata_mat *view, bool *copied)
{
    struct cuda_ctx *c = vctx;
    const size_t bytes = (size_t)host->n_out * host->row_bytes;
    *copied = false;
    void *d = strata_cuda_alloc(c->cu, bytes + STRATA_CUDA_PAD, "weights");
    if (!d) return STRATA_ENOMEM;
    int rc = strata_cuda_memset(c->cu, (char *)d + bytes, 0, STRATA_CUDA_PAD);
    if (rc == 0) rc = strata_cuda_upload_staged(c->cu, d, host->data, bytes, NULL, NULL);
    if (rc) {
        strata_cuda_free(c->cu, d);
        return rc;
    }
    *view = *host;
    view->data = d;
    *copied = true;
    return 0;
}

static void cuda_be_weight_free(void *vctx, struct strata_mat *view)
{
    struct cuda_ctx *c = vctx;
    strata_cuda_free(c->cu, (void *)view->data);
    view->data = NULL;
}

// Device scratch of at least `want` bytes (drains the stream before giving the old one back).
static int grow(struct cuda_ctx *c, void **buf, size_t *cap, size_t want, const char *what)
{
    if (want <= *cap) return 0;
    int rc = settle(c);
    if (rc == 0) rc = strata_cuda_sync(c->cu);
    if (rc) return rc;
    strata_cuda_free(c->cu, *buf);
    *buf = NULL;
    *cap = 0;
    void *p = strata_cuda_alloc(c->cu, want + STRATA_CUDA_PAD, what);
    if (!p) return STRATA_ENOMEM;
    *buf = p;
    *cap = want;
    return 0;
}

static int cuda_be_reserve(void *vctx, const struct strata_backend_reserve *r)
{
    struct cuda_ctx *c = vctx;
    // two blocks of the widest rows in the largest format (gate and up: one block; q/k/v: up to
    // three of fewer rows), as the CPU backend sizes its own
    const uint32_t n = (r->max_n_in + 255) / 256 * 256;
    const uint32_t fmts[] = {STRATA_TYPE_Q8_0, STRATA_TYPE_Q8_1, STRATA_TYPE_Q8_K, STRATA_TYPE_F16};
    size_t act = 0;
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        const size_t b = strata_cuda_act_bytes(fmts[i], n, (uint32_t)r->max_rows);
        if (b > act) act = b;
    }
    return grow(c, (void **)&c->act_buf, &c->act_cap, 2 * act, "activations");
}

static bool cuda_be_supports_type(void *vctx, uint32_t type)
{
    (void)vctx;
    return strata_type_computable(type) && strata_cuda_type_supported(type);
}

static int cuda_be_batch_begin(void *vctx, const struct strata_batch *b)
{
    struct cuda_ctx *c = vctx;
    c->batch = b;
    c->pre_valid = false;
    int rc = settle(c);  // a pass that ended without a drain (none does now)
    if (rc || !c->graphs) return rc;
    uint64_t key = 1469598103934665603ull;  // FNV-1a over the shape
#define MIX(v) (key = (key ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(b->n_tok);
    MIX(b->n_seq);
    for (int s = 0; s < b->n_seq; s++) {
        MIX(b->seq[s].n_tok);
        MIX(b->seq[s].n_ctx);
    }
#undef MIX
    const bool again = key == c->last_key;
    c->last_key = key;
    if (!again || b->n_tok > STRATA_CUDA_MV_MAX_TOK) return 0;
    if (c->ring_used > RING_BYTES / 2) {  // the ring must not fill while recording
        rc = strata_cuda_sync(c->cu);
        if (rc) return rc;
        c->ring_used = 0;
    }
    return strata_cuda_tape_begin(c->cu, key ? key : 1);
}

// ---- products ----------------------------------------------------------------------------------

static uint32_t act_bs(uint32_t vdt)
{
    return vdt == STRATA_TYPE_Q8_K ? 256 : vdt == STRATA_TYPE_Q8_0 || vdt == STRATA_TYPE_Q8_1 ? 32 : 1;
}

// The rows of `a` from row r on.
static struct strata_cuda_act act_from(const struct strata_cuda_act *a, uint32_t r)
{
    struct strata_cuda_act v = *a;
    if (r == 0) return v;
    const size_t n = a->n_in, bs = act_bs(a->vdt);
    if (v.qs) v.qs += (size_t)r * n;
    if (v.d) v.d += (size_t)r * (n / bs);
    if (v.s) v.s += (size_t)r * (n / 32);
    if (v.bsums) v.bsums += (size_t)r * (n / 16);
    if (v.h) v.h += (size_t)r * n;
    if (v.f) v.f += (size_t)r * v.f_stride;
    v.n_rows -= r;
    return v;
}

// The distinct activation blocks of a call, their rounding, and each op's view of its rows.
static int round_activations(struct cuda_ctx *c, const struct strata_mm_op *ops, int n_ops)
{
    int n_blocks = 0;
    for (int i = 0; i < n_ops; i++) {
        const struct strata_mm_op *op = &ops[i];
        const uint32_t vdt = strata_type_traits(op->w.type)->vec_dot_type;
        const int rows = op->x_rows ? op->x_n : op->n_tok;
        int b = 0;
        c->row_off[i] = 0;
        for (; b < n_blocks; b++) {
            struct act_block *ab = &c->blocks[b];
            if (ab->x_stride != op->x_stride || ab->n_in != op->w.n_in || ab->vdt != vdt) continue;
            if (ab->x == op->x && ab->n_rows >= rows) break;
            // rows right after the block's end, read without a row list: the block grows
            if (!op->x_rows && !ab->gathered && op->x == ab->x + (size_t)ab->n_rows * ab->x_stride) {
                c->row_off[i] = (uint32_t)ab->n_rows;
                ab->n_rows += rows;
                break;
            }
        }
        if (b == n_blocks) {
            c->blocks[b] = (struct act_block){.x = op->x, .x_stride = op->x_stride, .n_rows = rows,
                                              .n_in = op->w.n_in, .vdt = vdt};
            n_blocks++;
        }
        if (op->x_rows) c->blocks[b].gathered = true;
        c->block_of[i] = b;
    }
    size_t total = 0;
    for (int b = 0; b < n_blocks; b++) {
        struct act_block *ab = &c->blocks[b];
        ab->offset = total;
        if (ab->vdt != STRATA_TYPE_F32) {
            const size_t bytes = strata_cuda_act_bytes(ab->vdt, ab->n_in, (uint32_t)ab->n_rows);
            if (bytes == 0) {
                strata_log_error("cuda backend: mm: rows of %u elements cannot be rounded to %s", ab->n_in,
                                 strata_type_name(ab->vdt));
                return STRATA_EARG;
            }
            total += bytes;
        }
    }
    int rc = grow(c, (void **)&c->act_buf, &c->act_cap, total, "activations");
    for (int b = 0; b < n_blocks && rc == 0; b++) {
        struct act_block *ab = &c->blocks[b];
        if (pre_takes(c, ab->x, ab->x_stride, ab->n_rows, ab->n_in, ab->vdt)) {  // rounded by what wrote it
            ab->act = c->pre.act;
            continue;
        }
        strata_cuda_act_init(&ab->act, ab->vdt, ab->n_in, (uint32_t)ab->n_rows, c->act_buf + ab->offset);
        rc = strata_cuda_quantize(c->cu, ab->x, ab->x_stride, ab->n_rows, &ab->act);
    }
    for (int i = 0; i < n_ops && rc == 0; i++) c->views[i] = act_from(&c->blocks[c->block_of[i]].act, c->row_off[i]);
    return rc;
}

static struct strata_cuda_mm mm_of(const struct strata_mm_op *op, const struct strata_cuda_act *x)
{
    return (struct strata_cuda_mm){.w = op->w.data, .type = op->w.type, .n_in = op->w.n_in, .n_out = op->w.n_out,
                                   .row_bytes = op->w.row_bytes, .x = x, .x_rows = op->x_rows, .n_tok = op->n_tok,
                                   .y = op->y, .y_stride = op->y_stride, .y_rows = op->y_rows, .add = op->add};
}

// Whether op j continues the run that starts with op i and has `rows` rows so far: the same
// weight shape and format, the same activation block, rows and outputs right after the run's.
static bool continues(const struct cuda_ctx *c, const struct strata_mm_op *ops, int i, int j, int rows)
{
    const struct strata_mm_op *a = &ops[i], *b = &ops[j];
    if (b->w.type != a->w.type || b->w.n_in != a->w.n_in || b->w.n_out != a->w.n_out ||
        b->w.row_bytes != a->w.row_bytes || c->block_of[j] != c->block_of[i] || b->y_stride != a->y_stride ||
        b->y_rows || b->y != a->y + (size_t)rows * a->y_stride)
        return false;
    if (a->x_rows) return b->x_rows == a->x_rows + rows;
    return !b->x_rows && c->row_off[j] == c->row_off[i] + (uint32_t)rows;
}

static bool small_op(const struct strata_mm_op *op)
{
    return op->n_tok > 0 && op->n_tok <= STRATA_CUDA_MV_MAX_TOK && !op->y_rows && !op->add;
}

// Whether op j can be stacked onto op i's mat-vec launch: plain weights of the same format and
// inputs, the same activation rows and tokens.
static bool stackable(const struct cuda_ctx *c, const struct strata_mm_op *ops, int i, int j)
{
    const struct strata_mm_op *a = &ops[i], *b = &ops[j];
    return small_op(b) && !b->x_rows && b->w.type == a->w.type && b->w.n_in == a->w.n_in &&
           b->w.row_bytes == a->w.row_bytes && b->n_tok == a->n_tok && c->block_of[j] == c->block_of[i] &&
           c->row_off[j] == c->row_off[i] && b->w.data && a->w.data && !a->add && !b->add;
}

// Ops group[0..n) (one run) as one launch over a table of their weights.
static int run_table(struct cuda_ctx *c, const struct strata_mm_op *ops, const int *group, int n)
{
    int rows = 0;
    for (int g = 0; g < n; g++) rows += ops[group[g]].n_tok;
    const size_t tab_bytes = (size_t)n * sizeof(void *), ids_off = (tab_bytes + 15) / 16 * 16;
    size_t off;
    int rc = ring_take(c, ids_off + (size_t)rows * sizeof(int32_t), &off);
    if (rc) return rc;
    const void **tab = (const void **)(c->ring_host + off);
    int32_t *ids = (int32_t *)(c->ring_host + off + ids_off);
    int r = 0;
    for (int g = 0; g < n; g++) {
        tab[g] = ops[group[g]].w.data;
        for (int t = 0; t < ops[group[g]].n_tok; t++) ids[r++] = g;
    }
    rc = strata_cuda_copy_async(c->cu, c->ring_dev + off, c->ring_host + off, ids_off + (size_t)rows * sizeof(int32_t));
    if (rc) return rc;
    struct strata_cuda_mm m = mm_of(&ops[group[0]], &c->views[group[0]]);
    m.w = NULL;
    m.w_table = (const void *const *)(c->ring_dev + off);
    m.w_ids = (const int32_t *)(c->ring_dev + off + ids_off);
    m.n_tok = rows;
    return strata_cuda_mm_run(c->cu, &m, 1);
}

static int cuda_be_mm(void *vctx, const struct strata_mm_op *ops, int n_ops)
{
    struct cuda_ctx *c = vctx;
    if (n_ops > MAX_OPS) {
        strata_log_error("cuda backend: mm: %d products in one call (at most %d)", n_ops, MAX_OPS);
        return STRATA_EARG;
    }
    int rc = round_activations(c, ops, n_ops);
    if (rc) return rc;
    memset(c->done, 0, (size_t)n_ops * sizeof c->done[0]);
    for (int i = 0; i < n_ops && rc == 0; i++) {
        if (c->done[i] || ops[i].n_tok <= 0) continue;
        c->done[i] = true;
        int n = 1, rows = ops[i].n_tok;
        c->group[0] = i;
        if (small_op(&ops[i]))
            for (int j = i + 1; j < n_ops; j++)
                if (!c->done[j] && small_op(&ops[j]) && continues(c, ops, i, j, rows)) {
                    c->done[j] = true;
                    c->group[n++] = j;
                    rows += ops[j].n_tok;
                }
        if (n > 1) {
            rc = run_table(c, ops, c->group, n);
            continue;
        }
        struct strata_cuda_mm m = mm_of(&ops[i], &c->views[i]);
        // other plain products of the same rows (q, k and v): stacked into one mat-vec launch
        if (small_op(&ops[i]) && !ops[i].x_rows)
            for (int j = i + 1; j < n_ops && m.n_seg < 2; j++)
                if (!c->done[j] && stackable(c, ops, i, j)) {
                    c->done[j] = true;
                    m.seg[m.n_seg++] = (struct strata_cuda_mm_seg){.w = ops[j].w.data, .y = ops[j].y,
                                                                   .y_stride = ops[j].y_stride, .n_out = ops[j].w.n_out};
                }
        rc = strata_cuda_mm_run(c->cu, &m, 1);
    }
    for (int i = 0; i < n_ops && c->pre_valid; i++) {
        if (ops[i].y_rows) pre_drop(c);
        else if (ops[i].n_tok > 0)
            pre_clobber(c, ops[i].y, ((size_t)(ops[i].n_tok - 1) * ops[i].y_stride + ops[i].w.n_out) * sizeof(float));
    }
    return rc;
}

static int cuda_be_get_rows(void *vctx, const struct strata_mat *w, const int32_t *ids, int n, float *out)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    return strata_cuda_get_rows_dev(c->cu, w->data, w->type, w->n_in, w->row_bytes, ids, n, out);
}

// ---- elementwise -------------------------------------------------------------------------------

static int cuda_be_rmsnorm(void *vctx, float *y, size_t y_stride, const float *x, size_t x_stride, const float *w,
                           int n_rows, uint32_t n, float eps)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    return strata_cuda_rmsnorm(c->cu, y, y_stride, x, x_stride, w, n_rows, n, eps);
}

// The norm with its rows rounded for the next products in the same launch (the pre block, which
// round_activations and the moe op then take instead of rounding them again).
static int cuda_be_rmsnorm_q(void *vctx, float *y, size_t y_stride, const float *x, size_t x_stride, const float *w,
                             int n_rows, uint32_t n, float eps, uint32_t next_vdt)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    const size_t bytes = next_vdt && next_vdt != STRATA_TYPE_F32 && n_rows > 0
                             ? strata_cuda_act_bytes(next_vdt, n, (uint32_t)n_rows) : 0;
    if (bytes == 0) return strata_cuda_rmsnorm(c->cu, y, y_stride, x, x_stride, w, n_rows, n, eps);
    int rc = grow(c, &c->pre_buf, &c->pre_cap, bytes, "activations");
    if (rc) return rc;
    c->pre = (struct act_block){.x = y, .x_stride = y_stride, .n_rows = n_rows, .n_in = n, .vdt = next_vdt};
    strata_cuda_act_init(&c->pre.act, next_vdt, n, (uint32_t)n_rows, c->pre_buf);
    struct strata_cuda_act *acts[1] = {&c->pre.act};
    rc = strata_cuda_rmsnorm_q(c->cu, y, y_stride, x, x_stride, w, n_rows, n, eps, acts, 1);
    if (rc == 0) c->pre_valid = true;
    return rc;
}

static int cuda_be_rope(void *vctx, const struct strata_rope_op *op)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    if (op->ext) {  // YaRN, the pair layout (n_rot and freq_base unused), as the CPU's rope_ext.c
        const struct strata_rope_ext *e = op->ext;
        const struct strata_cuda_rope_ext r = {
            .n_dims = e->n_dims, .neox = e->mode == STRATA_ROPE_NEOX, .freq_scale = e->freq_scale,
            .ext_factor = e->ext_factor, .theta_scale = e->theta_scale, .corr_dims = {e->corr_dims[0], e->corr_dims[1]},
            .mscale = strata_rope_ext_mscale(e), .n_head = op->n_head, .tok_stride = op->tok_stride,
            .head_stride = op->head_stride,
        };
        return strata_cuda_rope_ext(c->cu, op->x, op->n_tok, op->pos, &r);
    }
    struct strata_cuda_rope r = {.n_head = op->n_head, .D = op->n_rot, .n_rot = op->n_rot,
                                 .head_stride = (uint32_t)(op->head_stride ? op->head_stride : op->n_rot),
                                 .freq_base = op->freq_base};
    if (op->sections) memcpy(r.sections, op->sections, sizeof r.sections);
    return strata_cuda_norm_rope(c->cu, op->x, op->tok_stride, op->n_tok, op->pos, &r);
}

// A sequence's KV cache: rows [n_layers][n_ctx][n_head_kv * head_dim] of keys and of values, F32
// or F16 (the attention kernel's two formats; keys and values alike).
struct cuda_kv {
    void *k, *v;
    bool f16;
    size_t bytes;
    float *ik;                       // the indexer's keys [idx_layers][n_ctx][idx_dim] F32, or NULL
    uint32_t idx_layers, idx_dim;
};

static int cuda_be_kv_create(void *vctx, const struct strata_kv_params *p, void **out)
{
    *out = NULL;
    const bool f16 = p->k_type == STRATA_TYPE_F16;
    if ((p->k_type != STRATA_TYPE_F32 && !f16) || p->v_type != p->k_type) {
        strata_log_error("cuda backend: a %s / %s KV cache: CUDA has f32 / f32 and f16 / f16 (use --backend cpu)",
                         strata_type_name(p->k_type), strata_type_name(p->v_type));
        return STRATA_EUNSUP;
    }
    struct cuda_kv *kv = calloc(1, sizeof *kv);
    if (!kv) return STRATA_ENOMEM;
    const size_t rows = (size_t)p->n_layers * (size_t)p->n_ctx * p->n_head_kv, elt = f16 ? 2 : 4;
    const size_t kb = rows * p->head_dim_k * elt, vb = rows * p->head_dim_v * elt;
    kv->f16 = f16;
    kv->bytes = kb + vb;
    kv->k = cuda_be_alloc(vctx, kb ? kb : 64, "KV cache");
    kv->v = vb ? cuda_be_alloc(vctx, vb, "KV cache") : NULL;
    int rc = kv->k && (!vb || kv->v) ? 0 : STRATA_ENOMEM;
    if (rc == 0) rc = cuda_be_memset(vctx, kv->k, 0, kb ? kb : 64);
    if (rc == 0 && vb) rc = cuda_be_memset(vctx, kv->v, 0, vb);
    const size_t ikb = (size_t)p->idx_layers * (size_t)p->n_ctx * p->idx_dim * sizeof(float);
    if (rc == 0 && ikb) {
        kv->idx_layers = p->idx_layers, kv->idx_dim = p->idx_dim;
        kv->bytes += ikb;
        kv->ik = cuda_be_alloc(vctx, ikb, "indexer keys");
        rc = kv->ik ? cuda_be_memset(vctx, kv->ik, 0, ikb) : STRATA_ENOMEM;
    }
    if (rc) {
        if (kv->k) cuda_be_release(vctx, kv->k);
        if (kv->v) cuda_be_release(vctx, kv->v);
        if (kv->ik) cuda_be_release(vctx, kv->ik);
        free(kv);
        return rc;
    }
    *out = kv;
    return 0;
}

static void cuda_be_kv_free(void *vctx, void *vkv)
{
    struct cuda_kv *kv = vkv;
    if (!kv) return;
    if (kv->k) cuda_be_release(vctx, kv->k);
    if (kv->v) cuda_be_release(vctx, kv->v);
    if (kv->ik) cuda_be_release(vctx, kv->ik);
    free(kv);
}

static size_t cuda_be_kv_bytes(void *vctx, const void *vkv)
{
    (void)vctx;
    const struct cuda_kv *kv = vkv;
    return kv ? kv->bytes : 0;
}

// Attention of every sequence; with `rope`, the queries and keys of each sequence are normed,
// rotated and stored in one launch (qk_rope_store) instead of the plain store.
static int attention(struct cuda_ctx *c, const struct strata_attn_op *op, const struct strata_attn_rope_op *rope)
{
    const struct strata_batch *b = op->batch;
    // MLA caches only keys ([latent | rope key] rows); the values are the latent in them
    const size_t KD = (size_t)op->n_head_kv * op->head_dim_k, VD = op->latent_kv ? 0 : (size_t)op->n_head_kv * op->head_dim_v;
    if (rope && (op->latent_kv || op->n_swa || op->sinks || op->visible || KD != VD)) {
        strata_log_error("cuda backend: attention_rope takes plain attention with keys and values of one width");
        return STRATA_EARG;
    }
    int rc = 0;
    // the output rounded for the product that follows (it then skips its own rounding)
    const size_t OD0 = (size_t)op->n_head * op->head_dim_v;
    const uint32_t nv = op->next_vdt;
    const size_t pre_bytes = nv && nv != STRATA_TYPE_F32 && OD0 <= 16384
                                 ? strata_cuda_act_bytes(nv, (uint32_t)OD0, (uint32_t)b->n_tok) : 0;
    c->pre_valid = false;
    if (pre_bytes) rc = grow(c, &c->pre_buf, &c->pre_cap, pre_bytes, "activations");
    if (pre_bytes && rc == 0) {
        c->pre = (struct act_block){.x = op->out, .x_stride = OD0, .n_rows = b->n_tok, .n_in = (uint32_t)OD0, .vdt = nv};
        strata_cuda_act_init(&c->pre.act, nv, (uint32_t)OD0, (uint32_t)b->n_tok, c->pre_buf);
    }
    for (int s = 0; s < b->n_seq && rc == 0; s++) {
        const struct strata_seq *sq = &b->seq[s];
        const size_t need = strata_cuda_attn_scratch_floats(sq->n_tok, sq->n_ctx, op->n_head, op->head_dim_v);
        rc = grow(c, (void **)&c->attn_scratch, &c->attn_cap, need * sizeof(float), "attention scratch");
        if (rc) break;
        const struct cuda_kv *kv = sq->kv;
        const size_t elt = kv->f16 ? 2 : 4;
        char *kc = (char *)kv->k + (size_t)op->kv_slot * sq->n_ctx * KD * elt;
        char *vc = VD ? (char *)kv->v + (size_t)op->kv_slot * sq->n_ctx * VD * elt : NULL;
        const int32_t *pos = b->pos + sq->tok0;
        if (rope) {
            struct strata_cuda_qk_rope r = {
                .qx = rope->q + (size_t)sq->tok0 * op->q_tok_stride, .kx = rope->k + (size_t)sq->tok0 * KD,
                .vx = op->v + (size_t)sq->tok0 * VD, .q_stride = op->q_tok_stride, .k_stride = KD, .v_stride = VD,
                .q = {.n_head = op->n_head, .D = op->head_dim_k, .n_rot = rope->n_rot,
                      .head_stride = (uint32_t)(op->q_head_stride ? op->q_head_stride : op->head_dim_k),
                      .freq_base = rope->freq_base, .eps = rope->eps, .norm = rope->q_norm},
                .k = {.n_head = op->n_head_kv, .D = op->head_dim_k, .n_rot = rope->n_rot, .head_stride = op->head_dim_k,
                      .freq_base = rope->freq_base, .eps = rope->eps, .norm = rope->k_norm},
                .Dv = op->head_dim_v, .k_cache = kc, .v_cache = vc, .kv_f16 = kv->f16, .kv_stride = KD, .pos = pos,
                .n_tok = sq->n_tok,
            };
            if (rope->sections) {
                memcpy(r.q.sections, rope->sections, sizeof r.q.sections);
                memcpy(r.k.sections, rope->sections, sizeof r.k.sections);
            }
            rc = strata_cuda_qk_rope_store(c->cu, &r);
        } else {
            rc = strata_cuda_kv_store(c->cu, kc, vc, kv->f16, KD, VD, op->k + (size_t)sq->tok0 * KD, KD,
                                      VD ? op->v + (size_t)sq->tok0 * VD : NULL, VD, (uint32_t)KD, (uint32_t)VD, pos,
                                      sq->n_tok);
        }
        if (rc) break;
        const size_t OD = (size_t)op->n_head * op->head_dim_v;
        const size_t vis_stride = op->visible_stride ? op->visible_stride : (size_t)sq->n_ctx;
        struct strata_cuda_attn a = {
            .q = op->q + (size_t)sq->tok0 * op->q_tok_stride, .q_stride = op->q_tok_stride,
            .q_head_stride = (uint32_t)op->q_head_stride, .k = kc, .v = vc, .kv_f16 = kv->f16, .kv_stride = KD,
            .v_stride = VD, .latent = op->latent_kv,
            .H = op->n_head, .Hkv = op->n_head_kv, .D = op->head_dim_k, .Dv = op->head_dim_v, .scale = op->scale,
            .n_swa = op->n_swa, .sinks = op->sinks,
            .visible = op->visible ? op->visible + (size_t)sq->tok0 * vis_stride : NULL, .visible_stride = vis_stride,
            .pos = pos, .n_tok = sq->n_tok, .max_pos = sq->pos0 + sq->n_tok - 1, .min_pos = sq->pos0,
            .out = op->out + (size_t)sq->tok0 * OD, .out_stride = OD, .scratch = c->attn_scratch,
        };
        struct strata_cuda_act rows;  // this sequence's rows of the rounded output
        if (pre_bytes) {
            rows = act_from(&c->pre.act, (uint32_t)sq->tok0);
            a.act = &rows;
        }
        rc = strata_cuda_attention(c->cu, &a);
    }
    if (rc == 0 && pre_bytes) c->pre_valid = true;
    return rc;
}

static int cuda_be_attention(void *vctx, const struct strata_attn_op *op)
{
    return attention(vctx, op, NULL);
}

static int cuda_be_attention_rope(void *vctx, const struct strata_attn_rope_op *op)
{
    return attention(vctx, op->attn, op);
}

static int cuda_be_deltanet(void *vctx, const struct strata_deltanet_op *op)
{
    struct cuda_ctx *c = vctx;
    const struct strata_batch *b = op->batch;
    const uint32_t nv = op->nv, d = op->d, C = 2 * op->nk * d + nv * d, K1 = op->conv_k - 1;
    int rc = 0;
    pre_drop(c);
    for (int s = 0; s < b->n_seq && rc == 0; s++) {
        const struct strata_seq *sq = &b->seq[s];
        const size_t t0 = (size_t)sq->tok0;
        const struct strata_cuda_deltanet p = {
            .C = C, .K1 = K1, .nk = op->nk, .nv = nv, .d = d, .tiled = op->kv_tiled, .split_ba = op->ba_split,
            .n_tok = sq->n_tok, .eps = op->eps,
            .qkv = op->qkv + t0 * C, .z = op->z + t0 * nv * d,
            .ba = op->ba_split ? op->ba + t0 * nv : op->ba + t0 * 2 * nv,
            .alpha = op->ba_split ? op->ba + (size_t)b->n_tok * nv + t0 * nv : NULL,
            .taps = op->conv_taps, .dt_bias = op->dt_bias, .a = op->a, .norm = op->norm,
            .conv_state = sq->conv + (size_t)op->rs_slot * K1 * C,
            .ssm_state = sq->ssm + (size_t)op->rs_slot * nv * d * d,
            .conv_out = op->work, .gates = op->work + (size_t)sq->n_tok * C,
            .out = op->out + t0 * nv * d,
        };
        rc = strata_cuda_deltanet(c->cu, &p);
    }
    return rc;
}

static int cuda_be_swiglu(void *vctx, float *y, const float *g, const float *u, size_t n)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    // rows of 64Ki elements (the kernel's row width is 32-bit), then the rest
    const uint32_t W = 1u << 16;
    const size_t full = n / W;
    int rc = strata_cuda_swiglu(c->cu, y, W, g, W, u, W, (int)full, W);
    if (rc == 0 && n % W)
        rc = strata_cuda_swiglu(c->cu, y + full * W, 0, g + full * W, 0, u + full * W, 0, 1, (uint32_t)(n % W));
    return rc;
}

static int cuda_be_copy(void *vctx, float *y, size_t y_stride, const float *x, size_t x_stride, int n_rows, uint32_t n)
{
    struct cuda_ctx *c = vctx;
    if (n_rows <= 0 || n == 0) return 0;
    pre_clobber(c, y, ((size_t)(n_rows - 1) * y_stride + n) * sizeof(float));
    return strata_cuda_copy_rows(c->cu, y, y_stride, x, x_stride, n_rows, n);
}

static int cuda_be_layernorm(void *vctx, float *y, const float *x, const float *w, const float *b, int n_rows,
                             uint32_t n, float eps)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    return strata_cuda_layernorm(c->cu, y, x, w, b, n_rows, n, eps);
}

static int cuda_be_swiglu_oai(void *vctx, float *y, const float *g, const float *u, size_t n, float alpha,
                              float limit)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    return strata_cuda_swiglu_oai(c->cu, y, g, u, n, alpha, limit);
}

// The indexer of each sequence of the pass on its own keys (the sequence's KV cache, layer
// idx_slot of its indexer rows), the scores in a scratch that grows with the longest context.
static int cuda_be_indexer(void *vctx, const struct strata_indexer_op *op)
{
    struct cuda_ctx *c = vctx;
    const struct strata_batch *b = op->batch;
    int rc = 0;
    pre_drop(c);
    for (int s = 0; s < b->n_seq && rc == 0; s++) {
        const struct strata_seq *sq = &b->seq[s];
        const struct cuda_kv *kv = sq->kv;
        if (sq->n_tok <= 0) continue;
        if (!kv || op->idx_slot >= kv->idx_layers || op->d != kv->idx_dim) {
            strata_log_error("cuda backend: indexer: layer %u of %u-float keys, the KV cache has %u layers of %u",
                             op->idx_slot, op->d, kv ? kv->idx_layers : 0, kv ? kv->idx_dim : 0);
            return STRATA_EARG;
        }
        const int max_pos = sq->pos0 + sq->n_tok - 1;
        const size_t stride = op->visible_stride ? op->visible_stride : (size_t)sq->n_ctx;
        rc = grow(c, (void **)&c->idx_scores, &c->idx_cap,
                  strata_cuda_indexer_scratch_floats(sq->n_tok, max_pos) * sizeof(float), "indexer scores");
        if (rc) break;
        const size_t t0 = (size_t)sq->tok0;
        const struct strata_cuda_indexer p = {
            .q = op->q + t0 * op->n_head * op->d, .k = op->k + t0 * op->d, .w = op->w + t0 * op->n_head,
            .w_scale = op->w_scale, .keys = kv->ik + (size_t)op->idx_slot * sq->n_ctx * op->d, .pos = b->pos + t0,
            .n_tok = sq->n_tok, .n_ctx = sq->n_ctx, .max_pos = max_pos, .n_head = op->n_head, .d = op->d,
            .top_k = op->top_k, .visible = op->visible + t0 * stride, .visible_stride = stride,
            .scores = c->idx_scores,
        };
        rc = strata_cuda_indexer(c->cu, &p);
    }
    return rc;
}

static int cuda_be_add(void *vctx, float *y, const float *x, size_t x_stride, int n_rows, uint32_t n)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    if (x_stride == n) return strata_cuda_add(c->cu, y, y, x, (size_t)n_rows * n);
    return strata_cuda_add_rows(c->cu, y, n, x, x_stride, n_rows, n);
}

static int cuda_be_mul_sigmoid(void *vctx, float *y, size_t y_stride, const float *g, size_t g_stride, bool g_per_row,
                               int n_rows, uint32_t n)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    return strata_cuda_mul_sigmoid(c->cu, y, y_stride, g, g_stride, g_per_row, n_rows, n);
}

static int cuda_be_moe_combine(void *vctx, const struct strata_moe_combine_op *op)
{
    struct cuda_ctx *c = vctx;
    pre_drop(c);
    return strata_cuda_moe_combine_routed(c->cu, op->x, op->rows, op->route_of, op->weight, op->shared, op->n_tok,
                                          op->k, op->n);
}

static int cuda_be_argmax(void *vctx, int32_t *ids, const float *x, int n_rows, uint32_t n)
{
    struct cuda_ctx *c = vctx;
    pre_clobber(c, ids, (size_t)n_rows * sizeof *ids);
    return strata_cuda_argmax(c->cu, ids, x, n_rows, n);
}

static int cuda_be_topk(void *vctx, struct strata_token_logit *out, const float *x, int n_rows, uint32_t n, int k)
{
    struct cuda_ctx *c = vctx;
    pre_clobber(c, out, (size_t)n_rows * (size_t)k * sizeof *out);
    return strata_cuda_topk(c->cu, out, x, n_rows, n, k);
}

static int cuda_be_route(void *vctx, const struct strata_route_params *p, const float *logits, int n_tok, int32_t *ids,
                         float *weights)
{
    struct cuda_ctx *c = vctx;
    pre_clobber(c, ids, (size_t)n_tok * p->n_used * sizeof(int32_t));
    pre_clobber(c, weights, (size_t)n_tok * p->n_used * sizeof(float));
    const struct strata_cuda_route r = {.logits = logits, .bias = p->bias, .n_tok = n_tok, .X = (int)p->n_expert,
                                        .K = (int)p->n_used, .sigmoid = p->sigmoid, .norm = p->norm,
                                        .scale = p->scale, .ids = ids, .weights = weights};
    return strata_cuda_route_topk(c->cu, &r);
}

// Rows rounded for `w` in the activation buffer at byte `off` (F32: the rows themselves).
static int round_rows(struct cuda_ctx *c, const struct strata_mat *w, const float *x, int rows, size_t off,
                      struct strata_cuda_act *a)
{
    strata_cuda_act_init(a, strata_type_traits(w->type)->vec_dot_type, w->n_in, (uint32_t)rows, c->act_buf + off);
    return strata_cuda_quantize(c->cu, x, w->n_in, rows, a);
}

// The routed experts of a layer from device routes. Decode (few tokens): gate and up with SwiGLU
// in one mat-vec launch over the pairs' slot-table entries, the SwiGLU rows rounded, the down
// projection with the weighted sum, the shared row and the residual in one launch. Prompts: the
// pairs grouped by expert on the device, gate and up through the grouped GEMM, SwiGLU, down
// through the grouped GEMM, the combine. Every path gives the bits of the host-routed products.
static int cuda_be_moe(void *vctx, const struct strata_moe_op *op)
{
    struct cuda_ctx *c = vctx;
    const int n = op->n_tok, K = op->k, P = n * K;
    if (P <= 0) return 0;
    const struct strata_mat *wg = &op->gate, *wu = &op->up, *wd = &op->down;
    const uint32_t E = wg->n_in, F = wg->n_out, Eo = wd->n_out, X = op->n_expert;
    if (wu->type != wg->type || wu->n_in != E || wu->n_out != F || wu->row_bytes != wg->row_bytes || wd->n_in != F ||
        K > 32) {
        strata_log_error("cuda backend: moe: gate %s [%u][%u], up %s [%u][%u], down [%u][%u], %d experts per token",
                         strata_type_name(wg->type), F, E, strata_type_name(wu->type), wu->n_out, wu->n_in, Eo,
                         wd->n_in, K);
        return STRATA_EARG;
    }
    if (op->sparse && n > STRATA_CUDA_MV_MAX_TOK) {
        strata_log_error("cuda backend: moe: a sparse expert table for %d tokens (at most %d)", n,
                         STRATA_CUDA_MV_MAX_TOK);
        return STRATA_EARG;
    }
    const uint32_t vg = strata_type_traits(wg->type)->vec_dot_type, vd = strata_type_traits(wd->type)->vec_dot_type;
    const size_t bh = vg == STRATA_TYPE_F32 ? 0 : strata_cuda_act_bytes(vg, E, (uint32_t)n);
    const size_t bs = vd == STRATA_TYPE_F32 ? 0 : strata_cuda_act_bytes(vd, F, (uint32_t)P);
    if ((vg != STRATA_TYPE_F32 && bh == 0) || (vd != STRATA_TYPE_F32 && bs == 0)) {
        strata_log_error("cuda backend: moe: rows of %u / %u elements cannot be rounded", E, F);
        return STRATA_EARG;
    }
    const size_t off_s = (bh + 255) / 256 * 256;
    int rc = grow(c, (void **)&c->act_buf, &c->act_cap, off_s + bs, "activations");
    struct strata_cuda_act ah, as;
    if (rc == 0) {
        if (pre_takes(c, op->h, E, n, E, vg)) ah = c->pre.act;  // the norm rounded it
        else rc = round_rows(c, wg, op->h, n, 0, &ah);
    }
    if (rc) return rc;
    pre_clobber(c, op->x, ((size_t)n * Eo) * sizeof(float));
    const void *const *tg = op->table, *const *tu = op->table + X, *const *td = op->table + 2 * (size_t)X;
    if (n <= STRATA_CUDA_MV_MAX_TOK) {
        const struct strata_cuda_mm gu = {.w_table = tg, .w2_table = tu, .w_ids = op->ids, .type = wg->type,
                                          .n_in = E, .n_out = F, .row_bytes = wg->row_bytes, .x = &ah, .x_div = K,
                                          .n_tok = P, .y = op->gate_out, .y_stride = F};
        rc = strata_cuda_mm_run(c->cu, &gu, 1);
        if (rc == 0) rc = round_rows(c, wd, op->gate_out, P, off_s, &as);
        if (rc) return rc;
        const struct strata_cuda_mm dn = {.w_table = td, .w_ids = op->ids, .type = wd->type, .n_in = F, .n_out = Eo,
                                          .row_bytes = wd->row_bytes, .x = &as, .n_tok = P, .y = op->down_out,
                                          .y_stride = Eo};
        return strata_cuda_moe_down(c->cu, &dn, n, K, op->weight, op->x, op->shared, NULL);
    }
    rc = grow(c, &c->grp_buf, &c->grp_cap, strata_cuda_moe_groups_bytes((int)X, P), "expert groups");
    if (rc) return rc;
    struct strata_cuda_moe_groups g;
    strata_cuda_moe_groups_init(&g, (int)X, P, c->grp_buf);
    rc = strata_cuda_moe_group(c->cu, op->ids, &g);
    if (rc) return rc;
    const struct strata_cuda_moe_mm gu[2] = {
        {.w_table = tg, .type = wg->type, .n_in = E, .n_out = F, .row_bytes = wg->row_bytes, .x = &ah, .x_div = K,
         .y = op->gate_out, .y_stride = F},
        {.w_table = tu, .type = wu->type, .n_in = E, .n_out = F, .row_bytes = wu->row_bytes, .x = &ah, .x_div = K,
         .y = op->up_out, .y_stride = F},
    };
    rc = strata_cuda_moe_mm_run(c->cu, &g, gu, 2);
    if (rc == 0) rc = strata_cuda_swiglu(c->cu, op->gate_out, F, op->gate_out, F, op->up_out, F, P, F);
    if (rc == 0) rc = round_rows(c, wd, op->gate_out, P, off_s, &as);
    if (rc) return rc;
    const struct strata_cuda_moe_mm dn = {.w_table = td, .type = wd->type, .n_in = F, .n_out = Eo,
                                          .row_bytes = wd->row_bytes, .x = &as, .x_div = 1, .y = op->down_out,
                                          .y_stride = Eo};
    rc = strata_cuda_moe_mm_run(c->cu, &g, &dn, 1);
    if (rc) return rc;
    return strata_cuda_moe_combine(c->cu, op->x, op->down_out, op->weight, n, K, Eo, op->shared, NULL);
}

static void cuda_be_mem_info(void *vctx, struct strata_backend_mem *out)
{
    struct cuda_ctx *c = vctx;
    struct strata_cuda_info now;  // the free memory of this moment
    strata_cuda_get_info(c->cu, &now);
    struct strata_cuda_tape_stats t;
    strata_cuda_tape_stats(c->cu, &t);
    *out = (struct strata_backend_mem){.device = c->info.name, .used = strata_cuda_bytes_used(c->cu),
                                       .peak = strata_cuda_bytes_peak(c->cu), .total = c->info.total_bytes,
                                       .free = now.free_bytes, .graphs_replayed = t.replayed,
                                       .graphs_recorded = t.recorded};
}

// ---- lifecycle ---------------------------------------------------------------------------------

static void cuda_be_free(void *vctx)
{
    struct cuda_ctx *c = vctx;
    if (!c) return;
    if (settle(c)) strata_log_warn("cuda backend: the last decode graph failed");
    if (c->graphs) {
        struct strata_cuda_tape_stats t;
        strata_cuda_tape_stats(c->cu, &t);
        strata_log_info("cuda backend: decode graphs: %llu passes replayed, %llu recorded, %llu left at a difference; "
                        "%llu segment graphs built, %llu updated; last record %llu launches in %llu segments; host "
                        "%.0f us a replayed pass, %.0f us to its first segment",
                        (unsigned long long)t.replayed, (unsigned long long)t.recorded, (unsigned long long)t.diverged,
                        (unsigned long long)t.builds, (unsigned long long)t.updates, (unsigned long long)t.launches,
                        (unsigned long long)t.segments, t.walk_us, t.first_us);
    }
    strata_cuda_host_free(c->ring_host);
    strata_cuda_close(c->cu);  // gives back every device allocation
    free(c);
}

static const struct strata_backend_i g_cuda_iface = {
    .name = "cuda",
    .host_memory = false,
    .mm_add = true,
    .moe_sparse_tok = STRATA_CUDA_MV_MAX_TOK,
    .free = cuda_be_free,
    .alloc = cuda_be_alloc,
    .release = cuda_be_release,
    .upload = cuda_be_upload,
    .download = cuda_be_download,
    .memset = cuda_be_memset,
    .weight_load = cuda_be_weight_load,
    .weight_free = cuda_be_weight_free,
    .reserve = cuda_be_reserve,
    .supports_type = cuda_be_supports_type,
    .sync = cuda_be_sync,
    .kv_create = cuda_be_kv_create,
    .kv_free = cuda_be_kv_free,
    .kv_bytes = cuda_be_kv_bytes,
    .batch_begin = cuda_be_batch_begin,
    .mm = cuda_be_mm,
    .get_rows = cuda_be_get_rows,
    .rmsnorm = cuda_be_rmsnorm,
    .rope = cuda_be_rope,
    .attention = cuda_be_attention,
    .deltanet = cuda_be_deltanet,
    .swiglu = cuda_be_swiglu,
    .add = cuda_be_add,
    .mul_sigmoid = cuda_be_mul_sigmoid,
    .moe_combine = cuda_be_moe_combine,
    .argmax = cuda_be_argmax,
    .topk = cuda_be_topk,
    .copy = cuda_be_copy,
    .layernorm = cuda_be_layernorm,
    .swiglu_oai = cuda_be_swiglu_oai,
    .indexer = cuda_be_indexer,
    .route = cuda_be_route,
    .rmsnorm_q = cuda_be_rmsnorm_q,
    .moe = cuda_be_moe,
    .attention_rope = cuda_be_attention_rope,
    .mem_info = cuda_be_mem_info,
};

bool strata_backend_cuda_found(const char **why)
{
    return strata_cuda_device_count(why) > 0;
}

int strata_backend_cuda_open(struct strata_backend *out, int gpu)
{
    *out = (struct strata_backend){0};
    struct cuda_ctx *c = calloc(1, sizeof *c);
    if (!c) return STRATA_ENOMEM;
    int rc = strata_cuda_open(&c->cu, gpu);
    if (rc) {
        free(c);
        return rc;
    }
    strata_cuda_get_info(c->cu, &c->info);
    const char *g = getenv("STRATA_CUDA_GRAPH");
    c->graphs = !(g && strcmp(g, "0") == 0);
    c->ring_host = strata_cuda_host_alloc(RING_BYTES);
    c->ring_dev = strata_cuda_alloc(c->cu, RING_BYTES, "upload ring");
    if (!c->ring_host || !c->ring_dev) {
        if (!c->ring_host) strata_log_error("cuda backend: cannot allocate %zu bytes of pinned host memory", RING_BYTES);
        cuda_be_free(c);
        return STRATA_ENOMEM;
    }
    strata_cuda_tape_host_range(c->cu, c->ring_host, RING_BYTES);
    strata_log_info("cuda backend: device %d, %s (compute %d.%d, %d SMs, %.0f MiB)", gpu, c->info.name,
                    c->info.cc_major, c->info.cc_minor, c->info.n_sm, c->info.total_bytes / 1048576.0);
    *out = (struct strata_backend){&g_cuda_iface, c};
    return 0;
}
