// The strided row operations the backend interface (backend.h) asks for beyond the fused kernels
// of ops.cu: rows added with a stride or a broadcast bias, the sigmoid gate, row copies, and the
// MoE combine over routed rows addressed through a route table. Each rounds exactly as the CPU
// backend (backend/cpu/cpu.c) does: explicit _rn operations, no fused multiply-adds.
#include <climits>

#include <cuda_runtime.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"

// Grid of (column blocks, rows): column blocks cover n with a stride loop, rows go along y (and z
// beyond 65535 rows).
static dim3 row_grid(int n_rows, uint32_t n)
{
    const unsigned cx = cdiv(n, 256) < 32 ? cdiv(n, 256) : 32;
    const unsigned ry = n_rows < 65535 ? (unsigned)n_rows : 65535;
    return dim3(cx, ry, cdiv((size_t)n_rows, 65535));
}

__device__ __forceinline__ size_t row_of() { return (size_t)blockIdx.z * 65535 + blockIdx.y; }

__global__ void k_add_rows(float *y, size_t y_stride, const float *x, size_t x_stride, int n_rows, uint32_t n)
{
    pdl_enter();
    const size_t r = row_of();
    if (r >= (size_t)n_rows) return;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[r * y_stride + i] = __fadd_rn(y[r * y_stride + i], x[r * x_stride + i]);
}

int strata_cuda_add_rows(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                         int n_rows, uint32_t n)
{
    if (n_rows <= 0 || n == 0) return 0;
    CU_LAUNCH("k_add_rows", k_add_rows, row_grid(n_rows, n), 256, 0, y, y_stride, x, x_stride, n_rows, n);
    return 0;
}

__global__ void k_mul_sigmoid(float *y, size_t y_stride, const float *g, size_t g_stride, bool per_row, int n_rows,
                              uint32_t n)
{
    pdl_enter();
    const size_t r = row_of();
    if (r >= (size_t)n_rows) return;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float gv = g[r * g_stride + (per_row ? 0 : i)];
        const float s = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-gv)));
        y[r * y_stride + i] = __fmul_rn(y[r * y_stride + i], s);
    }
}

int strata_cuda_mul_sigmoid(struct strata_cuda *cu, float *y, size_t y_stride, const float *g, size_t g_stride,
                            bool g_per_row, int n_rows, uint32_t n)
{
    if (n_rows <= 0 || n == 0) return 0;
    CU_LAUNCH("k_mul_sigmoid", k_mul_sigmoid, row_grid(n_rows, n), 256, 0, y, y_stride, g, g_stride, g_per_row, n_rows,
              n);
    return 0;
}

__global__ void k_copy_rows(float *y, size_t y_stride, const float *x, size_t x_stride, int n_rows, uint32_t n)
{
    pdl_enter();
    const size_t r = row_of();
    if (r >= (size_t)n_rows) return;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[r * y_stride + i] = x[r * x_stride + i];
}

int strata_cuda_copy_rows(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                          int n_rows, uint32_t n)
{
    if (n_rows <= 0 || n == 0) return 0;
    CU_LAUNCH("k_copy_rows", k_copy_rows, row_grid(n_rows, n), 256, 0, y, y_stride, x, x_stride, n_rows, n);
    return 0;
}

// x[t] += (sum_k w[t][k] rows[route_of[t][k]]) (+ shared[t]), the sum in selection order.
__global__ void k_moe_combine_routed(float *x, const float *rows, const int32_t *route_of, const float *weight,
                                     const float *shared, int n_tok, int K, uint32_t n)
{
    pdl_enter();
    const size_t t = row_of();
    if (t >= (size_t)n_tok) return;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const float v = __fmul_rn(weight[t * K + k], rows[(size_t)route_of[t * K + k] * n + i]);
            acc = k == 0 ? v : __fadd_rn(acc, v);
        }
        if (shared) acc = __fadd_rn(acc, shared[t * n + i]);
        x[t * n + i] = __fadd_rn(x[t * n + i], acc);
    }
}

int strata_cuda_moe_combine_routed(struct strata_cuda *cu, float *x, const float *rows, const int32_t *route_of,
                                   const float *weight, const float *shared, int n_tok, int K, uint32_t n)
{
    if (n_tok <= 0 || n == 0) return 0;
    CU_LAUNCH("k_moe_combine_routed", k_moe_combine_routed, row_grid(n_tok, n), 256, 0, x, rows, route_of, weight,
              shared, n_tok, K, n);
    return 0;
}

// ids[r] = the first index of the largest of row r (NaN never wins; 0 when none is above -inf):
// sample/sampler.c's strata_argmax. A block a row: each thread the first of its stride's largest
// (a strided scan meets its indices in order, so a strict > keeps the first), then the candidates
// merged by value, the lower index on a tie: the merge's order does not change the result.
#define ARGMAX_THREADS 1024

__device__ __forceinline__ void argmax_merge(float &v, int &i, float ov, int oi)
{
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
}

__global__ void __launch_bounds__(ARGMAX_THREADS) k_argmax(int32_t *ids, const float *x, int n_rows, uint32_t n)
{
    pdl_enter();
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    const float *row = x + (size_t)blockIdx.x * n;
    float v = -INFINITY;
    int i = INT_MAX;
    for (uint32_t j = threadIdx.x; j < n; j += ARGMAX_THREADS) {
        const float e = row[j];
        if (e > v) v = e, i = (int)j;
    }
    for (int o = 16; o > 0; o >>= 1) argmax_merge(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) sv[w] = v, si[w] = i;
    __syncthreads();
    if (w) return;
    v = sv[lane], i = si[lane];
    for (int o = 16; o > 0; o >>= 1) argmax_merge(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
    if (lane == 0) ids[blockIdx.x] = i == INT_MAX ? 0 : i;
}

int strata_cuda_argmax(struct strata_cuda *cu, int32_t *ids, const float *x, int n_rows, uint32_t n)
{
    if (n_rows <= 0) return 0;
    if (n > (uint32_t)INT_MAX) {
        strata_log_error("cuda: argmax over rows of %u", n);
        return STRATA_EARG;
    }
    CU_LAUNCH("k_argmax", k_argmax, n_rows, ARGMAX_THREADS, 0, ids, x, n_rows, n);
    return 0;
}
