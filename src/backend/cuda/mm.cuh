// Private to src/backend/cuda: the kernel-side arguments of one matrix product (a strata_cuda_mm
// with its activation descriptor by value) and the launchers of the two kernel families.
#ifndef STRATA_CUDA_MM_CUH
#define STRATA_CUDA_MM_CUH

#include "backend/cuda/common.cuh"

STRATA_CUDA_ARGS_BEGIN
struct mm_args {
    const void *w;
    const void *const *w_table;
    const int32_t *w_ids;
    const void *w2;
    const void *const *w2_table;
    uint32_t type, n_in, n_out;
    uint32_t spare;                             // 0
    uint64_t row_bytes;
    struct strata_cuda_act x;
    const int32_t *x_rows;
    int x_div;      // without x_rows: token row t reads activation row t / x_div
    int n_tok;
    float *y;
    size_t y_stride;
    const int32_t *y_rows;
    const float *add;
    const float *bias;
    int n_seg;                                  // stacked matrices after w (strata_cuda_mm.seg)
    uint32_t seg_first[2];                      // first launch row of each
    uint32_t spare2;                            // 0
    const void *seg_w[2];
    float *seg_y[2];
    size_t seg_y_stride[2];
};
STRATA_CUDA_ARGS_END

// The matrix of launch row `row` of stacked plain weights: its weights, output, row within it.
__device__ __forceinline__ void mm_segment(const struct mm_args &a, int row, const void *&w, float *&y, size_t &ys,
                                           int &r)
{
    w = a.w, y = a.y, ys = a.y_stride, r = row;
    for (int s = 0; s < a.n_seg; s++)
        if ((uint32_t)row >= a.seg_first[s]) w = a.seg_w[s], y = a.seg_y[s], ys = a.seg_y_stride[s], r = row - (int)a.seg_first[s];
}

// y = acc (+ bias) (+ add), or silu(acc) * acc2: the epilogue both kernel families share. yr is
// the output row.
__device__ __forceinline__ void mm_store(const struct mm_args &a, size_t yr, int row, float v, float v2, bool swiglu)
{
    if (swiglu) v = __fmul_rn(silu_f(v), v2);
    if (a.bias) v = __fadd_rn(v, a.bias[row]);
    if (a.add) v = __fadd_rn(a.add[yr * a.y_stride + row], v);
    a.y[yr * a.y_stride + row] = v;
}

// Routed experts grouped by expert for the GEMM (see strata_cuda_moe_groups).
STRATA_CUDA_ARGS_BEGIN
struct moe_tiles {
    const int32_t *first, *sorted, *tiles, *n_tiles;
    int x_div;     // activation row of pair p: p / x_div
    int spare;     // 0
};
STRATA_CUDA_ARGS_END

int strata_cuda_mv_launch(struct strata_cuda *cu, const struct mm_args *a);
// Routed down projection with the weighted sum and the residual (mv.cu k_mv_moe_down).
int strata_cuda_mv_moe_down_launch(struct strata_cuda *cu, const struct mm_args *a, int n_tok, int K,
                                   const float *weights, float *x, const float *shared, const float *shared_gate);
// GEMM over one plain weight for n_tok token rows, or over routed experts grouped by expert.
// Grouped (mt non-NULL): a.w_table per expert, token rows from the tiles, y row = pair index.
int strata_cuda_mmq_launch(struct strata_cuda *cu, const struct mm_args *a, const struct moe_tiles *mt, int max_tiles);
int strata_cuda_mmq_init(void);
bool strata_cuda_mmq_supported(uint32_t type);

#endif
