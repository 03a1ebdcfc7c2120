// The MLA / sparse-attention / gpt-oss operations in ggml's x86 order (see ops_ext.h). The lane
// helpers (ggml_vec_dot_f32's reduction, the vl-lane tree, ggml_v_expf) are attention's.
#include "backend/cpu/ops_ext.h"

#include <math.h>
#include <string.h>

#include "backend/cpu/ops_ext_impl.h"

#include <stdatomic.h>

#include "backend/backend.h"
#include "backend/topk_heap.h"
#include "backend/cpu/pool.h"
#include "util/log.h"

float strata_dot_sgemm(const float *a, const float *b, uint32_t n, int vl)
{
    STRATA_ASSERT(n % (uint32_t)vl == 0);
    return vl == 16 ? ops_ext_dot_sgemm(a, b, n, 16) : ops_ext_dot_sgemm(a, b, n, 8);
}

void strata_layernorm(float *y, const float *x, const float *w, const float *b, uint32_t n, float eps, int vl)
{
    double s = 0.0;
    for (uint32_t i = 0; i < n; i++) s += (double)x[i];
    const float mean = (float)s / (float)n;
    // ggml_vec_cvar_f32: centred values, their squares summed per vl group as a tree, in double
    double var = 0.0;
    uint32_t i = 0;
    for (; i + (uint32_t)vl <= n; i += (uint32_t)vl) {
        float lane[16];
        for (int j = 0; j < vl; j++) {
            y[i + j] = x[i + j] - mean;
            lane[j] = y[i + j] * y[i + j];
        }
        var += (double)ggml_hsum_lanes(lane, vl);
    }
    for (; i < n; i++) {
        y[i] = x[i] - mean;
        var += (double)(y[i] * y[i]);
    }
    const float variance = (float)(var / n);
    const float scale = 1.0f / sqrtf(variance + eps);
    for (uint32_t j = 0; j < n; j++) {
        y[j] *= scale;
        if (w) y[j] *= w[j];
        if (b) y[j] += b[j];
    }
}

void strata_swiglu_oai(float *y, const float *gate, const float *up, uint32_t n, float alpha, float limit)
{
    for (uint32_t k = 0; k < n; k++) {
        const float x = gate[k] > limit ? limit : gate[k];
        const float u = up[k] < -limit ? -limit : up[k] > limit ? limit : up[k];
        const float glu = x / (1.0f + expf(alpha * -x));
        y[k] = glu * (u + 1.0f);
    }
}

void strata_hadamard_init(float *h, uint32_t n)
{
    STRATA_ASSERT(n >= 2 && (n & (n - 1)) == 0);
    memset(h, 0, (size_t)n * n * sizeof *h);
    h[0] = (float)(1.0 / sqrtf((float)n));
    for (uint32_t s = 1; s < n; s *= 2)
        for (uint32_t i = 0; i < s; i++)
            for (uint32_t j = 0; j < s; j++) {
                const float v = h[(size_t)i * n + j];
                h[(size_t)(i + s) * n + j] = v;
                h[(size_t)i * n + j + s] = v;
                h[(size_t)(i + s) * n + j + s] = -v;
            }
}

void strata_hadamard_apply(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice, int vl)
{
    STRATA_ASSERT(n % (uint32_t)vl == 0);
    if (vl == 16) ops_ext_hadamard_body(y, x, h, n, rows_per_slice, 16);
    else ops_ext_hadamard_body(y, x, h, n, rows_per_slice, 8);
}

void strata_indexer_scores(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                           const float *k, size_t k_stride, int n_kv, int vl)
{
    if (vl == 16) ops_ext_indexer_body(score, q, w, n_head, d, k, k_stride, n_kv, 16);
    else ops_ext_indexer_body(score, q, w, n_head, d, k, k_stride, n_kv, 8);
}

void strata_hadamard_apply_isa(enum strata_isa isa, float *y, const float *x, const float *h, uint32_t n,
                               int rows_per_slice)
{
    STRATA_ASSERT(n % 16 == 0);
    switch (isa) {
    case STRATA_ISA_AVX512: strata_hadamard_apply_avx512(y, x, h, n, rows_per_slice); break;
    case STRATA_ISA_AVX2: strata_hadamard_apply_avx2(y, x, h, n, rows_per_slice); break;
    default: strata_hadamard_apply(y, x, h, n, rows_per_slice, 8); break;
    }
}

void strata_indexer_scores_isa(enum strata_isa isa, float *score, const float *q, const float *w, uint32_t n_head,
                               uint32_t d, const float *k, size_t k_stride, int n_kv)
{
    switch (isa) {
    case STRATA_ISA_AVX512: strata_indexer_scores_avx512(score, q, w, n_head, d, k, k_stride, n_kv); break;
    case STRATA_ISA_AVX2: strata_indexer_scores_avx2(score, q, w, n_head, d, k, k_stride, n_kv); break;
    default: strata_indexer_scores(score, q, w, n_head, d, k, k_stride, n_kv, 8); break;
    }
}

void strata_top_k_mask(uint8_t *sel, const float *score, int n, int top_k, int32_t *heap)
{
    STRATA_ASSERT(top_k >= 1);  // the model loader refuses 0
    if (n <= top_k) {
        memset(sel, 1, (size_t)n);
        return;
    }
    // __heap_select(first, first + k, first + n): make_heap of the first k, then each later
    // position strictly better than the top pops it (backend/topk_heap.h)
    strata_topk_make(score, heap, top_k);
    for (int32_t i = top_k; i < n; i++) strata_topk_offer(score, heap, top_k, i);
    memset(sel, 0, (size_t)n);
    for (int i = 0; i < top_k; i++) sel[heap[i]] = 1;
}

// ---- the indexer op ----------------------------------------------------------------------------

struct indexer_job {
    const struct strata_indexer_op *op;
    float *const *keys;
    enum strata_isa isa;
    const float *hadamard;
    float *scratch;
    size_t per_thread;
    int n_chunk;             // split mode: position chunks per token (0: one token per work item)
    atomic_int next;
};

#define IDX_CHUNK 256        // positions of one work item in split mode

// The sequence of token t of the pass (its index in the batch).
static int seq_of(const struct strata_batch *b, int t)
{
    for (int s = 0; s < b->n_seq; s++)
        if (t >= b->seq[s].tok0 && t < b->seq[s].tok0 + b->seq[s].n_tok) return s;
    STRATA_ASSERT(!"token outside every sequence of the pass");
    return 0;
}

// Hadamard products of every token's query heads and key, the key stored at its position.
static void indexer_rotate(void *arg, int ith, int nth)
{
    (void)nth;
    struct indexer_job *j = arg;
    const struct strata_indexer_op *op = j->op;
    float *tmp = j->scratch + (size_t)ith * j->per_thread;
    const uint32_t d = op->d;
    int t0, t1;
    while (strata_chunk_next(&j->next, op->batch->n_tok, 1, &t0, &t1)) {
        for (int t = t0; t < t1; t++) {
            float *q = op->q + (size_t)t * op->n_head * d, *k = op->k + (size_t)t * d;
            for (uint32_t h = 0; h < op->n_head; h++) {
                strata_hadamard_apply_isa(j->isa, tmp, q + (size_t)h * d, j->hadamard, d, (int)op->n_head);
                memcpy(q + (size_t)h * d, tmp, d * sizeof *tmp);
            }
            strata_hadamard_apply_isa(j->isa, tmp, k, j->hadamard, d, 1);
            memcpy(k, tmp, d * sizeof *tmp);
            memcpy(j->keys[seq_of(op->batch, t)] + (size_t)op->batch->pos[t] * d, k, d * sizeof *k);
            if (op->w_scale != 0.0f)
                for (uint32_t h = 0; h < op->n_head; h++) op->w[(size_t)t * op->n_head + h] *= op->w_scale;
        }
    }
}

// Scores of every cached position up to the token's own, and its top-k mask.
static void indexer_select(void *arg, int ith, int nth)
{
    (void)nth;
    struct indexer_job *j = arg;
    const struct strata_indexer_op *op = j->op;
    float *score = j->scratch + (size_t)ith * j->per_thread;
    int t0, t1;
    while (strata_chunk_next(&j->next, op->batch->n_tok, 1, &t0, &t1)) {
        for (int t = t0; t < t1; t++) {
            const int s = seq_of(op->batch, t);
            const struct strata_seq *sq = &op->batch->seq[s];
            const int n_kv = op->batch->pos[t] + 1;
            int32_t *heap = (int32_t *)(score + sq->n_ctx);
            uint8_t *vis = op->visible + (size_t)t * (op->visible_stride ? op->visible_stride : (size_t)sq->n_ctx);
            strata_indexer_scores_isa(j->isa, score, op->q + (size_t)t * op->n_head * op->d, op->w + (size_t)t * op->n_head,
                                      op->n_head, op->d, j->keys[s], op->d, n_kv);
            strata_top_k_mask(vis, score, n_kv, (int)op->top_k, heap);
            memset(vis + n_kv, 0, (size_t)(sq->n_ctx - n_kv));
        }
    }
}

// Fewer tokens than threads (decode): the scores of each token's positions in chunks spread over
// the threads (a position's score is computed alone, so the bits are those of one pass), into the
// token's own slot of the scratch ...
static void indexer_score_split(void *arg, int ith, int nth)
{
    (void)ith, (void)nth;
    struct indexer_job *j = arg;
    const struct strata_indexer_op *op = j->op;
    int i0, i1;
    while (strata_chunk_next(&j->next, op->batch->n_tok * j->n_chunk, 1, &i0, &i1)) {
        for (int i = i0; i < i1; i++) {
            const int t = i / j->n_chunk, c0 = (i % j->n_chunk) * IDX_CHUNK, n_kv = op->batch->pos[t] + 1;
            if (c0 >= n_kv) continue;
            const int n = n_kv - c0 < IDX_CHUNK ? n_kv - c0 : IDX_CHUNK;
            strata_indexer_scores_isa(j->isa, j->scratch + (size_t)t * j->per_thread + c0,
                                      op->q + (size_t)t * op->n_head * op->d, op->w + (size_t)t * op->n_head, op->n_head,
                                      op->d, j->keys[seq_of(op->batch, t)] + (size_t)c0 * op->d, op->d, n);
        }
    }
}

// ... then each token's top-k mask from its slot.
static void indexer_mask_split(void *arg, int ith, int nth)
{
    (void)ith, (void)nth;
    struct indexer_job *j = arg;
    const struct strata_indexer_op *op = j->op;
    int t0, t1;
    while (strata_chunk_next(&j->next, op->batch->n_tok, 1, &t0, &t1)) {
        for (int t = t0; t < t1; t++) {
            const struct strata_seq *sq = &op->batch->seq[seq_of(op->batch, t)];
            const int n_kv = op->batch->pos[t] + 1;
            float *score = j->scratch + (size_t)t * j->per_thread;
            uint8_t *vis = op->visible + (size_t)t * (op->visible_stride ? op->visible_stride : (size_t)sq->n_ctx);
            strata_top_k_mask(vis, score, n_kv, (int)op->top_k, (int32_t *)(score + sq->n_ctx));
            memset(vis + n_kv, 0, (size_t)(sq->n_ctx - n_kv));
        }
    }
}

size_t strata_cpu_indexer_scratch(int n_threads, int n_ctx, uint32_t top_k, uint32_t d)
{
    return (size_t)n_threads * ((size_t)n_ctx + top_k + d);
}

void strata_cpu_indexer(struct strata_pool *pool, enum strata_isa isa, const struct strata_indexer_op *op,
                        float *const *keys, const float *hadamard, float *scratch)
{
    int max_ctx = 0;
    for (int s = 0; s < op->batch->n_seq; s++)
        if (op->batch->seq[s].n_ctx > max_ctx) max_ctx = op->batch->seq[s].n_ctx;
    struct indexer_job j = {.op = op, .keys = keys, .isa = isa, .hadamard = hadamard, .scratch = scratch,
                            .per_thread = (size_t)max_ctx + op->top_k + op->d};
    atomic_init(&j.next, 0);
    strata_pool_run(pool, indexer_rotate, &j);
    atomic_store(&j.next, 0);
    int max_kv = 0;
    for (int t = 0; t < op->batch->n_tok; t++)
        if (op->batch->pos[t] + 1 > max_kv) max_kv = op->batch->pos[t] + 1;
    // fewer tokens than threads (each token's slot fits the scratch of one thread): split the
    // positions when there are enough of them to share
    if (op->batch->n_tok < strata_pool_size(pool) && max_kv > IDX_CHUNK) {
        j.n_chunk = (max_kv + IDX_CHUNK - 1) / IDX_CHUNK;
        strata_pool_run(pool, indexer_score_split, &j);
        atomic_store(&j.next, 0);
        strata_pool_run(pool, indexer_mask_split, &j);
        return;
    }
    strata_pool_run(pool, indexer_select, &j);
}
