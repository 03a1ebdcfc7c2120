// The strided row operations the backend interface (backend.h) asks for beyond the fused kernels
// of ops.cu: rows added with a stride or a broadcast bias, the sigmoid gate, row copies, and the
// MoE combine over routed rows addressed through a route table. Each rounds exactly as the CPU
// backend (backend/cpu/cpu.c) does: explicit _rn operations, no fused multiply-adds.
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
