// Elementwise and small blocks of the forward pass: RMS norm, add, SwiGLU, per-head norm + RoPE,
// KV-cache stores, routing top-k and the MoE combine. Each mirrors the CPU backend's float
// operations (src/compute/ops.c, src/model/*.c): the same roundings where they are cheap to keep
// (explicit _rn intrinsics, no fused multiply-adds the CPU does not fuse), so the two backends
// differ mostly in summation order.
#include <cuda_runtime.h>
#include <string.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/round.cuh"
#include "backend/cuda/route.cuh"

// ---- RMS norm ------------------------------------------------------------------------------------

// Sum of x^2 over a block's threads in double (the CPU adds float squares in double too).
__device__ double block_sum_d(double v, double *red)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < nw; w++) s += red[w];
    return s;
}

#define RN_REG 32  // elements per thread held in registers (rows up to 8192 with 256 threads)

// One row of the norm: y_i = (x_i * scale) * w_i with scale = 1 / sqrt(mean(x^2) + eps), each value
// handed to emit(i, y_i). The weights do not depend on the previous kernel: loaded before waiting
// for it; a row of up to RN_REG * blockDim.x elements is read once into registers (the same sums,
// element by element, as the two-pass form of longer rows).
template <typename Emit>
__device__ __forceinline__ void rmsnorm_row(const float *xr, const float *w, uint32_t n, float eps, double *red,
                                            Emit emit)
{
    if (n > RN_REG * blockDim.x) {  // long rows: two passes over x
        pdl_wait();
        double s = 0.0;
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) s += (double)__fmul_rn(xr[i], xr[i]);
        s = block_sum_d(s, red);
        const float mean = (float)(s / n);
        const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) emit(i, __fmul_rn(__fmul_rn(xr[i], scale), w[i]));
        return;
    }
    float wv[RN_REG], xv[RN_REG];
#pragma unroll
    for (int j = 0; j < RN_REG; j++) {
        const uint32_t i = threadIdx.x + j * blockDim.x;
        wv[j] = i < n ? w[i] : 0.0f;
    }
    pdl_wait();
#pragma unroll
    for (int j = 0; j < RN_REG; j++) {
        const uint32_t i = threadIdx.x + j * blockDim.x;
        xv[j] = i < n ? xr[i] : 0.0f;
    }
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < RN_REG; j++)
        if (threadIdx.x + j * blockDim.x < n) s += (double)__fmul_rn(xv[j], xv[j]);
    s = block_sum_d(s, red);
    const float mean = (float)(s / n);
    const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
#pragma unroll
    for (int j = 0; j < RN_REG; j++) {
        const uint32_t i = threadIdx.x + j * blockDim.x;
        if (i < n) emit(i, __fmul_rn(__fmul_rn(xv[j], scale), wv[j]));
    }
}

__global__ void k_rmsnorm(float *y, size_t y_stride, const float *x, size_t x_stride, const float *w, uint32_t n,
                          float eps)
{
    __shared__ double red[32];
    pdl_launch_dependents();
    float *yr = y + (size_t)blockIdx.x * y_stride;
    rmsnorm_row(x + (size_t)blockIdx.x * x_stride, w, n, eps, red, [yr](uint32_t i, float v) { yr[i] = v; });
}

// The same norm, the row also kept in shared memory and rounded to up to two activation formats.
__global__ void k_rmsnorm_q(float *y, size_t y_stride, const float *x, size_t x_stride, const float *w, uint32_t n,
                            float eps, struct strata_cuda_act a0, struct strata_cuda_act a1, int n_act)
{
    extern __shared__ float row[];
    __shared__ double red[32];
    pdl_launch_dependents();
    rmsnorm_row(x + (size_t)blockIdx.x * x_stride, w, n, eps, red, [](uint32_t i, float v) { row[i] = v; });
    __syncthreads();
    if (y)
        for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) y[(size_t)blockIdx.x * y_stride + i] = row[i];
    if (n_act > 0) quantize_row(row, a0, blockIdx.x);
    if (n_act > 1) quantize_row(row, a1, blockIdx.x);
}

int strata_cuda_rmsnorm_q(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                          const float *w, int n_rows, uint32_t n, float eps, struct strata_cuda_act *const *acts,
                          int n_acts)
{
    if (n_rows <= 0) return 0;
    struct strata_cuda_act q[2];
    memset(q, 0, sizeof q);  // q[0] goes to the kernel by value even when no format is rounded
    int nq = 0;
    for (int i = 0; i < n_acts; i++) {
        if (acts[i]->vdt == STRATA_TYPE_F32) {  // the float rows themselves
            if (!y) {
                strata_log_error("cuda: rmsnorm_q: F32 activations need the float output");
                return STRATA_EARG;
            }
            acts[i]->f = y;
            acts[i]->f_stride = y_stride;
            continue;
        }
        if (nq == 2 || acts[i]->n_in != n || (uint32_t)n_rows > acts[i]->n_rows) {
            strata_log_error("cuda: rmsnorm_q: %d activation formats / %u elements for rows of %u", n_acts,
                             acts[i]->n_in, n);
            return STRATA_EARG;
        }
        q[nq++] = *acts[i];
    }
    if (n > 12288) {  // more than the shared memory of one block without opting in: in two steps
        int rc = strata_cuda_rmsnorm(cu, y, y_stride, x, x_stride, w, n_rows, n, eps);
        for (int i = 0; i < nq && rc == 0; i++) rc = strata_cuda_quantize(cu, y, y_stride, n_rows, &q[i]);
        return rc;
    }
    CU_LAUNCH("k_rmsnorm_q", k_rmsnorm_q, n_rows, 256, (size_t)n * 4, y, y_stride, x, x_stride, w, n, eps,
              q[0], nq > 1 ? q[1] : q[0], nq);
    return 0;
}

int strata_cuda_rmsnorm(struct strata_cuda *cu, float *y, size_t y_stride, const float *x, size_t x_stride,
                        const float *w, int n_rows, uint32_t n, float eps)
{
    if (n_rows <= 0) return 0;
    CU_LAUNCH("k_rmsnorm", k_rmsnorm, n_rows, 256, 0, y, y_stride, x, x_stride, w, n, eps);
    return 0;
}

// ---- add, SwiGLU ------------------------------------------------------------------------------------

__global__ void k_add(float *y, const float *a, const float *b, size_t n)
{
    pdl_enter();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __fadd_rn(a[i], b[i]);
}

int strata_cuda_add(struct strata_cuda *cu, float *y, const float *a, const float *b, size_t n)
{
    if (n == 0) return 0;
    CU_LAUNCH("k_add", k_add, cdiv(n, 256) < 4096 ? cdiv(n, 256) : 4096, 256, 0, y, a, b, n);
    return 0;
}

__global__ void k_swiglu(float *y, size_t y_stride, const float *g, size_t g_stride, const float *u, size_t u_stride,
                         uint32_t n)
{
    pdl_enter();
    const size_t r = blockIdx.y;
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[r * y_stride + i] = __fmul_rn(silu_f(g[r * g_stride + i]), u[r * u_stride + i]);
}

int strata_cuda_swiglu(struct strata_cuda *cu, float *y, size_t y_stride, const float *g, size_t g_stride,
                       const float *u, size_t u_stride, int n_rows, uint32_t n)
{
    if (n_rows <= 0) return 0;
    const dim3 grid(cdiv(n, 256) < 64 ? cdiv(n, 256) : 64, n_rows);
    CU_LAUNCH("k_swiglu", k_swiglu, grid, 256, 0, y, y_stride, g, g_stride, u, u_stride, n);
    return 0;
}

// ---- per-head norm and RoPE ---------------------------------------------------------------------------

// One head at v: its RMS norm (double sum as the CPU; norm NULL: none), then NeoX RoPE on the
// first n_rot dims with the angle theta_i = pos * theta_scale^i built by repeated float products
// (ggml's cache, strata_rope_cache), and the fused rotation of strata_rope_apply. One warp.
__device__ void head_norm_rope(float *v, uint32_t D, uint32_t n_rot, const float *norm, float eps, const int *sections,
                               int p, float theta_scale, int lane)
{
    if (norm) {
        double s = 0.0;
        for (uint32_t i = lane; i < D; i += 32) s += (double)__fmul_rn(v[i], v[i]);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float mean = (float)(s / D);
        const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
        __syncwarp();
        for (uint32_t i = lane; i < D; i += 32) v[i] = __fmul_rn(__fmul_rn(v[i], scale), norm[i]);
        __syncwarp();
    }
    const uint32_t half = n_rot / 2;
    const int sect = sections[0] + sections[1] + sections[2] + sections[3];
    for (uint32_t i = lane; i < half; i += 32) {
        float theta = (float)p;
        for (uint32_t k = 0; k < i; k++) theta = __fmul_rn(theta, theta_scale);
        float c = cosf(theta), s = sinf(theta);
        if (sect > 0) {
            // qwen35moe interleaved M-RoPE, text positions: pairs outside the t/h/w sections turn
            // by position 0 (strata_rope_sections_mask)
            const int sector = (int)i % sect;
            const bool thw = (sector % 3 == 0 && sector < 3 * sections[0]) ||
                             (sector % 3 == 1 && sector < 3 * sections[1]) ||
                             (sector % 3 == 2 && sector < 3 * sections[2]);
            if (!thw) c = 1.0f, s = 0.0f;
        }
        const float x0 = v[i], x1 = v[i + half];
        v[i] = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
        v[i + half] = __fmaf_rn(x0, s, __fmul_rn(x1, c));
    }
    __syncwarp();
}

// One warp per (token, head).
__global__ void k_norm_rope(float *x, size_t x_stride, const int32_t *pos, struct strata_cuda_rope r,
                            float theta_scale)
{
    pdl_enter();
    const int t = blockIdx.y, h = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (h >= (int)r.n_head) return;
    float *v = x + (size_t)t * x_stride + (size_t)h * (r.head_stride ? r.head_stride : r.D);
    head_norm_rope(v, r.D, r.n_rot, r.norm, r.eps, r.sections, pos[t], theta_scale, lane);
}

// q heads, then k heads (then stored), then v heads copied into the cache; one warp each.
__global__ void k_qk_rope_store(struct strata_cuda_qk_rope r, float ts_q, float ts_k)
{
    pdl_enter();
    const int t = blockIdx.y, h = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    const int p = r.pos[t];
    if (h < (int)r.q.n_head) {
        float *v = r.qx + (size_t)t * r.q_stride + (size_t)h * (r.q.head_stride ? r.q.head_stride : r.q.D);
        head_norm_rope(v, r.q.D, r.q.n_rot, r.q.norm, r.q.eps, r.q.sections, p, ts_q, lane);
    } else if (h < (int)(r.q.n_head + r.k.n_head)) {
        const int kh = h - (int)r.q.n_head;
        float *v = r.kx + (size_t)t * r.k_stride + (size_t)kh * r.k.D;
        head_norm_rope(v, r.k.D, r.k.n_rot, r.k.norm, r.k.eps, r.k.sections, p, ts_k, lane);
        const size_t base = (size_t)p * r.kv_stride + (size_t)kh * r.k.D;
        for (uint32_t i = lane; i < r.k.D; i += 32) {
            if (r.kv_f16) ((__half *)r.k_cache)[base + i] = __float2half_rn(v[i]);
            else ((float *)r.k_cache)[base + i] = v[i];
        }
    } else if (h < (int)(r.q.n_head + 2 * r.k.n_head)) {
        const int vh = h - (int)(r.q.n_head + r.k.n_head);
        const float *v = r.vx + (size_t)t * r.v_stride + (size_t)vh * r.Dv;
        const size_t base = (size_t)p * r.kv_stride + (size_t)vh * r.Dv;
        for (uint32_t i = lane; i < r.Dv; i += 32) {
            if (r.kv_f16) ((__half *)r.v_cache)[base + i] = __float2half_rn(v[i]);
            else ((float *)r.v_cache)[base + i] = v[i];
        }
    }
}

// The CPU's powf, so the angles are the same floats.
static float theta_scale(const struct strata_cuda_rope *r) { return powf(r->freq_base, -2.0f / (float)r->n_rot); }

static int check_rope(const struct strata_cuda_rope *r)
{
    if (r->n_rot > r->D || r->n_rot % 2) {
        strata_log_error("cuda: rope: %u rotary dims of a %u-dim head", r->n_rot, r->D);
        return STRATA_EARG;
    }
    return 0;
}

int strata_cuda_qk_rope_store(struct strata_cuda *cu, const struct strata_cuda_qk_rope *r)
{
    if (r->n_tok <= 0) return 0;
    int rc = check_rope(&r->q);
    if (rc == 0) rc = check_rope(&r->k);
    if (rc) return rc;
    const dim3 grid(cdiv(r->q.n_head + 2 * r->k.n_head, 4), r->n_tok);
    CU_LAUNCH("k_qk_rope_store", k_qk_rope_store, grid, 128, 0, *r, theta_scale(&r->q), theta_scale(&r->k));
    return 0;
}

int strata_cuda_norm_rope(struct strata_cuda *cu, float *x, size_t x_stride, int n_tok, const int32_t *pos,
                          const struct strata_cuda_rope *r)
{
    if (n_tok <= 0) return 0;
    const int rc = check_rope(r);
    if (rc) return rc;
    const dim3 grid(cdiv(r->n_head, 4), n_tok);
    CU_LAUNCH("k_norm_rope", k_norm_rope, grid, 128, 0, x, x_stride, pos, *r, theta_scale(r));
    return 0;
}

// ---- KV cache store ------------------------------------------------------------------------------------

__global__ void k_kv_store(void *kc, void *vc, bool f16, size_t kc_stride, size_t vc_stride, const float *k,
                           size_t k_stride, const float *v, size_t v_stride, uint32_t kw, uint32_t vw, const int32_t *pos)
{
    pdl_enter();
    const int t = blockIdx.x;
    const size_t kbase = (size_t)pos[t] * kc_stride, vbase = (size_t)pos[t] * vc_stride;
    for (uint32_t i = threadIdx.x; i < kw; i += blockDim.x) {
        const float x = k[(size_t)t * k_stride + i];
        if (f16) ((__half *)kc)[kbase + i] = __float2half_rn(x);
        else ((float *)kc)[kbase + i] = x;
    }
    for (uint32_t i = threadIdx.x; i < vw; i += blockDim.x) {
        const float x = v[(size_t)t * v_stride + i];
        if (f16) ((__half *)vc)[vbase + i] = __float2half_rn(x);
        else ((float *)vc)[vbase + i] = x;
    }
}

int strata_cuda_kv_store(struct strata_cuda *cu, void *k_cache, void *v_cache, bool f16, size_t kc_stride, size_t vc_stride,
                         const float *k, size_t k_stride, const float *v, size_t v_stride, uint32_t k_width,
                         uint32_t v_width, const int32_t *pos, int n_tok)
{
    if (n_tok <= 0) return 0;
    CU_LAUNCH("k_kv_store", k_kv_store, n_tok, 256, 0, k_cache, v_cache, f16, kc_stride, vc_stride, k, k_stride, v,
              v_stride, k_width, v_width, pos);
    return 0;
}

// ---- routing ---------------------------------------------------------------------------------------------

// One block of 32 threads per token; X <= 32 PER.
template <int PER>
__global__ void k_route(struct strata_cuda_route r)
{
    pdl_enter();
    __shared__ int chosen[64];
    __shared__ float wsel[64];
    route_token<PER>(r, blockIdx.x, chosen, wsel, threadIdx.x);
}

int strata_cuda_route_topk(struct strata_cuda *cu, const struct strata_cuda_route *r)
{
    if (r->n_tok <= 0) return 0;
    if (r->X <= 0 || r->X > 1024 || r->K <= 0 || r->K > 64 || r->K > r->X) {
        strata_log_error("cuda: route_topk: %d of %d experts (at most 64 of 1024)", r->K, r->X);
        return STRATA_EARG;
    }
    struct strata_cuda_route k;  // the kernel's bytes with the spare ones zero whoever built *r (tape.cu)
    memset(&k, 0, sizeof k);
    k.logits = r->logits, k.bias = r->bias, k.n_tok = r->n_tok, k.X = r->X, k.K = r->K;
    k.sigmoid = r->sigmoid, k.norm = r->norm, k.scale = r->scale, k.ids = r->ids, k.weights = r->weights;
    if (r->X <= 128) CU_LAUNCH("k_route", k_route<4>, r->n_tok, 32, 0, k);
    else if (r->X <= 256) CU_LAUNCH("k_route", k_route<8>, r->n_tok, 32, 0, k);
    else CU_LAUNCH("k_route", k_route<32>, r->n_tok, 32, 0, k);
    return 0;
}

// ---- MoE combine -----------------------------------------------------------------------------------------

// x += (sum_k w_k d_k) + shared, the sum in selection order (k = 0 starts it), as the CPU.
__global__ void k_moe_combine(float *x, const float *rows, const float *weights, int K, uint32_t E,
                              const float *shared, const float *shared_gate)
{
    pdl_enter();
    const int t = blockIdx.y;
    float gate = 1.0f;
    if (shared && shared_gate) gate = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-shared_gate[t])));
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < E; i += gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (int k = 0; k < K; k++) {
            const float v = __fmul_rn(weights[(size_t)t * K + k], rows[((size_t)t * K + k) * E + i]);
            acc = k == 0 ? v : __fadd_rn(acc, v);
        }
        if (shared) {
            float sh = shared[(size_t)t * E + i];
            if (shared_gate) sh = __fmul_rn(sh, gate);
            acc = __fadd_rn(acc, sh);
        }
        x[(size_t)t * E + i] = __fadd_rn(x[(size_t)t * E + i], acc);
    }
}

int strata_cuda_moe_combine(struct strata_cuda *cu, float *x, const float *rows, const float *weights, int n_tok,
                            int K, uint32_t E, const float *shared, const float *shared_gate)
{
    if (n_tok <= 0) return 0;
    const dim3 grid(cdiv(E, 256) < 16 ? cdiv(E, 256) : 16, n_tok);
    CU_LAUNCH("k_moe_combine", k_moe_combine, grid, 256, 0, x, rows, weights, K, E, shared, shared_gate);
    return 0;
}

// ---- positions ---------------------------------------------------------------------------------------------

__global__ void k_pos_advance(int32_t *pos, int n, int delta)
{
    pdl_enter();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) pos[i] += delta;
}

int strata_cuda_pos_advance(struct strata_cuda *cu, int32_t *pos, int n, int delta)
{
    if (n <= 0) return 0;
    CU_LAUNCH("k_pos_advance", k_pos_advance, cdiv(n, 256), 256, 0, pos, n, delta);
    return 0;
}
