// The ops deepseek2, deepseek32, glm-dsa and gpt-oss add to the forward pass: RoPE with YaRN in
// either pair layout, gpt-oss's clamped SwiGLU, LayerNorm, and the sparse-attention indexer
// (Walsh-Hadamard products of q and k, the key cache, per-position scores, the top-k mask). The
// float operations are those of ext.cuh, the CPU backend's in its order; this file only spreads
// them over threads where that does not change a sum's order:
//   - LayerNorm's double sums are added by one thread in the CPU's order (the rows are short: the
//     indexer's keys, 128 floats), the 16-float groups between them in parallel;
//   - an indexer score is one warp per cached position: lane l holds accumulators l and l + 32 of
//     ggml_vec_dot_f32's 64, and the shuffles add them in the tree of _mm512_reduce_add_ps;
//   - the top-k is one warp per token running libstdc++'s heap selection (backend/topk_heap.h, the
//     CPU's code) in lane 0; the warp only skips, 32 positions at a time, those not strictly better
//     than the heap's top, which the sequential loop would skip too (the top never decreases).
#include <cuda_runtime.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/ext.cuh"
#include "backend/topk_heap.h"

#define IDX_SCORE_FLOATS ((size_t)1 << 24)  // the scores of one launch: a prompt takes its tokens in groups
#define IDX_POS_BLOCK 64                    // positions per block of the score kernel (8 warps)
#define IDX_MAX_TOPK 12288                  // the heap in the 48 KiB of shared memory of one block

// ---- RoPE with YaRN --------------------------------------------------------------------------------

// One block per token: the token's cos/sin pairs into shared memory, then every pair of every head.
__global__ void k_rope_ext(float *x, const int32_t *pos, struct strata_cuda_rope_ext r)
{
    extern __shared__ float cs[];  // [n_dims / 2][2]
    pdl_enter();
    const int t = blockIdx.x;
    const uint32_t half = r.n_dims / 2;
    const int p = pos[t];
    for (uint32_t i = threadIdx.x; i < half; i += blockDim.x) rope_ext_cs(r, p, i, &cs[2 * i], &cs[2 * i + 1]);
    __syncthreads();
    float *xt = x + (size_t)t * r.tok_stride;
    for (uint32_t j = threadIdx.x; j < r.n_head * half; j += blockDim.x) {
        const uint32_t h = j / half, i = j % half;
        rope_ext_rotate(xt + (size_t)h * r.head_stride, r.neox ? i : 2 * i, r.neox ? half : 1, cs[2 * i],
                        cs[2 * i + 1]);
    }
}

int strata_cuda_rope_ext(struct strata_cuda *cu, float *x, int n_tok, const int32_t *pos,
                         const struct strata_cuda_rope_ext *r)
{
    if (n_tok <= 0 || r->n_head == 0) return 0;
    if (r->n_dims == 0 || r->n_dims % 2 || r->n_dims > 2048 || (r->n_head > 1 && r->head_stride < r->n_dims)) {
        strata_log_error("cuda: rope_ext: %u rotated dims, %u heads %zu floats apart", r->n_dims, r->n_head,
                         r->head_stride);
        return STRATA_EARG;
    }
    CU_LAUNCH("k_rope_ext", k_rope_ext, n_tok, 128, (size_t)r->n_dims * sizeof(float), x, pos, *r);
    return 0;
}

// ---- clamped SwiGLU -----------------------------------------------------------------------------------

__global__ void k_swiglu_oai(float *y, const float *g, const float *u, size_t n, float alpha, float limit)
{
    pdl_enter();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = swiglu_oai_1(g[i], u[i], alpha, limit);
}

int strata_cuda_swiglu_oai(struct strata_cuda *cu, float *y, const float *g, const float *u, size_t n, float alpha,
                           float limit)
{
    if (n == 0) return 0;
    CU_LAUNCH("k_swiglu_oai", k_swiglu_oai, cdiv(n, 256) < 4096 ? cdiv(n, 256) : 4096, 256, 0, y, g, u, n, alpha,
              limit);
    return 0;
}

// ---- LayerNorm ------------------------------------------------------------------------------------------

// One block per row. Every read of the row comes before the first write (y may be x).
__global__ void k_layernorm(float *y, const float *x, const float *w, const float *b, uint32_t n, float eps)
{
    extern __shared__ float part[];  // [n / 16] the groups' sums of squares
    __shared__ float mean_s, scale_s;
    pdl_enter();
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = y + (size_t)blockIdx.x * n;
    if (threadIdx.x == 0) mean_s = layernorm_mean(xr, n);
    __syncthreads();
    const float mean = mean_s;
    for (uint32_t g = threadIdx.x; g < n / 16; g += blockDim.x) part[g] = layernorm_group16(xr + 16 * g, mean);
    __syncthreads();
    if (threadIdx.x == 0) scale_s = layernorm_scale(xr, part, n, mean, eps);
    __syncthreads();
    const float scale = scale_s;
    for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = layernorm_out(xr[i], mean, scale, w, b, i);
}

int strata_cuda_layernorm(struct strata_cuda *cu, float *y, const float *x, const float *w, const float *b,
                          int n_rows, uint32_t n, float eps)
{
    if (n_rows <= 0 || n == 0) return 0;
    if (n / 16 * sizeof(float) > 48 * 1024) {
        strata_log_error("cuda: layernorm: rows of %u floats (at most %u)", n, 48 * 1024 / 4 * 16);
        return STRATA_EARG;
    }
    CU_LAUNCH("k_layernorm", k_layernorm, n_rows, 128, (size_t)(n / 16) * sizeof(float), y, x, w, b, n, eps);
    return 0;
}

// ---- the indexer ----------------------------------------------------------------------------------------

// Block (r, t): row r of token t (query head r < n_head, the key at r == n_head) multiplied by the
// Hadamard matrix: the queries in tinyBLAS's order when the product has two rows or more per token
// (strata_hadamard_apply's rows_per_slice), the key in ggml_vec_dot_f32's. The key also goes to the
// cache at its position, and the key's block scales the token's head weights.
__global__ void k_idx_rotate(struct strata_cuda_indexer p, float v)
{
    extern __shared__ float xs[];  // [d] the row before its product
    pdl_enter();
    const uint32_t r = blockIdx.x, d = p.d;
    const int t = blockIdx.y;
    const bool key = r == p.n_head;
    float *x = key ? p.k + (size_t)t * d : p.q + ((size_t)t * p.n_head + r) * d;
    for (uint32_t i = threadIdx.x; i < d; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    const bool sgemm = !key && p.n_head >= 2;
    float *cached = key ? p.keys + (size_t)p.pos[t] * d : NULL;
    for (uint32_t i = threadIdx.x; i < d; i += blockDim.x) {
        const hadamard_row hr = {i, v};
        const float y = sgemm ? dot_sgemm16(hr, xs, d) : dot_vec16(hr, xs, d);
        x[i] = y;
        if (key) cached[i] = y;
    }
    if (key && p.w_scale != 0.0f)
        for (uint32_t h = threadIdx.x; h < p.n_head; h += blockDim.x)
            p.w[(size_t)t * p.n_head + h] = fmul_rn(p.w[(size_t)t * p.n_head + h], p.w_scale);
}

// dot_vec16 of x and y (n floats) over a warp; every lane gets the result.
__device__ __forceinline__ float warp_dot_vec16(const float *x, const float *y, uint32_t n, int lane)
{
    const uint32_t np = n & ~63u;
    float v = dot_vec16_lane(x, y, np, lane);
#pragma unroll
    for (int o = 16; o >= 1; o /= 2) v = fadd_rn(v, __shfl_down_sync(0xffffffffu, v, o));
    float s = __shfl_sync(0xffffffffu, v, 0);
    for (uint32_t i = np; i < n; i++) s = ffma_rn(x[i], y[i], s);
    return s;
}

// Block (c, g): positions [64c, 64c + 64) of token t0 + g, one warp per position, its score the
// heads' terms added in head order; into row g of the scores (max_pos + 1 floats a row).
__global__ void k_idx_scores(struct strata_cuda_indexer p, int t0)
{
    pdl_enter();
    const int t = t0 + (int)blockIdx.y, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n_kv = p.pos[t] + 1, c1 = min(n_kv, (int)(blockIdx.x + 1) * IDX_POS_BLOCK);
    const float *q = p.q + (size_t)t * p.n_head * p.d, *w = p.w + (size_t)t * p.n_head;
    float *score = p.scores + (size_t)blockIdx.y * (p.max_pos + 1);
    for (int c = (int)blockIdx.x * IDX_POS_BLOCK + warp; c < c1; c += (int)(blockDim.x >> 5)) {
        const float *kc = p.keys + (size_t)c * p.d;
        float sc = 0.0f;
        for (uint32_t h = 0; h < p.n_head; h++) sc = indexer_acc(sc, warp_dot_vec16(q + (size_t)h * p.d, kc, p.d, lane), w[h]);
        if (lane == 0) score[c] = sc;
    }
}

// One warp per token t0 + blockIdx.x: its visible row over n_ctx bytes, the top_k of its scores.
__global__ void k_idx_topk(struct strata_cuda_indexer p, int t0)
{
    extern __shared__ int32_t heap[];  // [top_k]
    pdl_enter();
    const int t = t0 + (int)blockIdx.x, lane = threadIdx.x, n = p.pos[t] + 1, k = (int)p.top_k;
    const float *sc = p.scores + (size_t)blockIdx.x * (p.max_pos + 1);
    uint8_t *vis = p.visible + (size_t)t * p.visible_stride;
    const bool all = n <= k;
    for (int c = lane; c < p.n_ctx; c += 32) vis[c] = all && c < n;
    if (all) return;
    if (lane == 0) strata_topk_make(sc, heap, k);
    __syncwarp();
    for (int base = k; base < n; base += 32) {
        const int i = base + lane;
        const float s = i < n ? sc[i] : 0.0f;
        // lanes strictly better than the top; the first of them replaces it (lane 0), then the
        // lanes after it are compared with the new top
        unsigned cand = __ballot_sync(0xffffffffu, i < n && s > sc[heap[0]]);
        while (cand) {
            const int j = __ffs(cand) - 1;
            if (lane == 0) strata_topk_adjust(sc, heap, 0, k, base + j);
            __syncwarp();
            const unsigned later = j == 31 ? 0u : ~0u << (j + 1);
            cand = later & __ballot_sync(0xffffffffu, i < n && s > sc[heap[0]]);
        }
    }
    __syncwarp();  // the zeros above are written before the ones
    for (int i = lane; i < k; i += 32) vis[heap[i]] = 1;
}

size_t strata_cuda_indexer_scratch_floats(int n_tok, int max_pos)
{
    const size_t row = (size_t)max_pos + 1;
    size_t g = IDX_SCORE_FLOATS / row;
    if (g < 1) g = 1;
    if (g > (size_t)n_tok) g = (size_t)n_tok;
    if (g > 65535) g = 65535;
    return g * row;
}

int strata_cuda_indexer(struct strata_cuda *cu, const struct strata_cuda_indexer *p)
{
    if (p->n_tok <= 0) return 0;
    const uint32_t d = p->d;
    if (d < 16 || (d & (d - 1)) || d > 8192 || p->n_head == 0 || p->n_tok > 65535 || p->top_k == 0 ||
        p->top_k > IDX_MAX_TOPK ||
        p->max_pos < 0 || p->max_pos >= p->n_ctx || p->visible_stride < (size_t)p->n_ctx) {
        strata_log_error("cuda: indexer: %d tokens, %u heads of %u, top %u, position %d of %d, mask rows of %zu",
                         p->n_tok, p->n_head, d, p->top_k, p->max_pos, p->n_ctx, p->visible_stride);
        return STRATA_EARG;
    }
    const float v = (float)(1.0 / sqrtf((float)d));  // strata_hadamard_init's entry
    CU_LAUNCH("k_idx_rotate", k_idx_rotate, dim3(p->n_head + 1, p->n_tok), 128, (size_t)d * sizeof(float), *p, v);
    const size_t row = (size_t)p->max_pos + 1;
    const int group = (int)(strata_cuda_indexer_scratch_floats(p->n_tok, p->max_pos) / row);
    for (int t0 = 0; t0 < p->n_tok; t0 += group) {
        const int g = p->n_tok - t0 < group ? p->n_tok - t0 : group;
        CU_LAUNCH("k_idx_scores", k_idx_scores, dim3(cdiv(row, IDX_POS_BLOCK), g), 256, 0, *p, t0);
        CU_LAUNCH("k_idx_topk", k_idx_topk, g, 32, (size_t)p->top_k * sizeof(int32_t), *p, t0);
    }
    return 0;
}
