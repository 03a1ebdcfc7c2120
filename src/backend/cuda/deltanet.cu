// Gated delta-net (qwen3next, qwen35moe) on the GPU: the equations and the order of float
// operations of src/model/deltanet.c (which also documents them), in three kernels per layer:
//   gates: beta = sigmoid(b), decay = exp(softplus(a + dt_bias) * A) per (token, value head);
//   conv:  causal conv1d over each channel's history and the chunk (taps in order, unfused
//          products), SiLU, L2 norm of the q and k heads; the last K-1 inputs become the history;
//   rule:  per value head one block, thread j owning value column j of the state in registers,
//          tokens one after another (S decays, S^T k, the delta update, S^T q, all sums over the
//          key index from 0 without fused multiply-adds, as the CPU), then the head output's RMS
//          norm times SiLU(z).
// Tokens are processed in order, so the state and outputs do not depend on how a prompt is cut.
#include <cuda_runtime.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"

#define DN_K1_MAX 8   // conv history (kernel width - 1)

__global__ void k_dn_gates(const struct strata_cuda_deltanet p)
{
    pdl_enter();
    const int t = blockIdx.x;
    const uint32_t nv = p.nv, r = p.nv / p.nk;
    for (uint32_t h = threadIdx.x; h < nv; h += blockDim.x) {
        float b, a;
        if (p.split_ba) {
            b = p.ba[(size_t)t * nv + h];
            a = p.alpha[(size_t)t * nv + h];
        } else {
            const float *row = p.ba + (size_t)t * 2 * nv + (size_t)(h / r) * 2 * r;
            b = row[h % r];
            a = row[r + h % r];
        }
        const float x = __fadd_rn(a, p.dt_bias[h]);
        const float softplus = x > 20.0f ? x : logf(__fadd_rn(1.0f, expf(x)));
        p.gates[(size_t)t * 2 * nv + h] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-b)));
        p.gates[(size_t)t * 2 * nv + nv + h] = expf(__fmul_rn(softplus, p.a[h]));
    }
}

// One block per head-sized group of channels (d threads): q and k groups get the L2 norm.
__global__ void k_dn_conv(const struct strata_cuda_deltanet p)
{
    pdl_enter();
    __shared__ double red[32];
    const uint32_t C = p.C, K1 = p.K1, d = p.d, c = blockIdx.x * d + threadIdx.x;
    const bool normed = blockIdx.x * d < 2 * p.nk * d;
    float tap[DN_K1_MAX + 1];
    for (uint32_t k = 0; k <= K1; k++) tap[k] = p.taps[(size_t)k * C + c];
    for (int t = 0; t < p.n_tok; t++) {
        float out = 0.0f;
        for (uint32_t k = 0; k <= K1; k++) {
            const uint32_t w = (uint32_t)t + k;
            const float x = w < K1 ? p.conv_state[(size_t)w * C + c] : p.qkv[(size_t)(w - K1) * C + c];
            out = __fadd_rn(out, __fmul_rn(x, tap[k]));
        }
        out = silu_f(out);
        if (normed) {
            double s = (double)__fmul_rn(out, out);
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
            __syncthreads();
            if (lane == 0) red[warp] = s;
            __syncthreads();
            double sum = 0.0;
            for (uint32_t w = 0; w < d / 32; w++) sum += red[w];
            const float mean = (float)(sum / d);
            const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, __fdiv_rn(p.eps, (float)d))));
            const float post = __fdiv_rn(1.0f, __fsqrt_rn((float)d));
            out = __fmul_rn(__fmul_rn(out, scale), post);
        }
        p.conv_out[(size_t)t * C + c] = out;
    }
    // new history: window inputs n .. n + K1 - 1 (read all before writing any)
    float hist[DN_K1_MAX];
    for (uint32_t i = 0; i < K1; i++) {
        const uint32_t w = (uint32_t)p.n_tok + i;
        hist[i] = w < K1 ? p.conv_state[(size_t)w * C + c] : p.qkv[(size_t)(w - K1) * C + c];
    }
    for (uint32_t i = 0; i < K1; i++) p.conv_state[(size_t)i * C + c] = hist[i];
}

template <int D>
__global__ void __launch_bounds__(D) k_dn_rule(const struct strata_cuda_deltanet p)
{
    pdl_enter();
    __shared__ float sq[D], sk[D], skn[D];
    __shared__ double red[32];
    const uint32_t h = blockIdx.x, j = threadIdx.x, C = p.C, nk = p.nk, nv = p.nv, r = nv / nk;
    const uint32_t kh = p.tiled ? h % nk : h / r;
    const float *qb = p.conv_out + (size_t)kh * D, *kb = p.conv_out + (size_t)nk * D + (size_t)kh * D;
    const float *vb = p.conv_out + (size_t)2 * nk * D + (size_t)h * D;
    float *S = p.ssm_state + (size_t)h * D * D;
    float s[D];
#pragma unroll
    for (int i = 0; i < D; i++) s[i] = S[(size_t)i * D + j];
    const float scale = __fdiv_rn(1.0f, __fsqrt_rn((float)D));
    const int n = p.n_tok;
    // token 0's decay and S^T k
    sk[j] = kb[j];
    __syncthreads();
    float decay = p.gates[nv + h], skj = 0.0f;
#pragma unroll
    for (int i = 0; i < D; i++) {
        s[i] = __fmul_rn(s[i], decay);
        skj = __fadd_rn(skj, __fmul_rn(s[i], sk[i]));
    }
    for (int t = 0; t < n; t++) {
        const bool next = t + 1 < n;
        __syncthreads();
        sq[j] = qb[(size_t)t * C + j];
        sk[j] = kb[(size_t)t * C + j];
        if (next) skn[j] = kb[(size_t)(t + 1) * C + j];
        __syncthreads();
        const float beta = p.gates[(size_t)t * 2 * nv + h];
        decay = next ? p.gates[(size_t)(t + 1) * 2 * nv + nv + h] : 0.0f;
        const float delta = __fmul_rn(__fsub_rn(vb[(size_t)t * C + j], skj), beta);
        float sqj = 0.0f;
        skj = 0.0f;
#pragma unroll
        for (int i = 0; i < D; i++) {
            s[i] = __fadd_rn(s[i], __fmul_rn(sk[i], delta));
            sqj = __fadd_rn(sqj, __fmul_rn(s[i], sq[i]));
            if (next) {
                s[i] = __fmul_rn(s[i], decay);
                skj = __fadd_rn(skj, __fmul_rn(s[i], skn[i]));
            }
        }
        // head output, its RMS norm and the SiLU(z) gate
        const float o = __fmul_rn(sqj, scale);
        double sum = (double)__fmul_rn(o, o);
        for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
        if ((j & 31) == 0) red[j >> 5] = sum;
        __syncthreads();
        double tot = 0.0;
        for (int w = 0; w < D / 32; w++) tot += red[w];
        const float mean = (float)(tot / D);
        const float rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, p.eps)));
        const size_t oi = (size_t)t * nv * D + (size_t)h * D + j;
        p.out[oi] = __fmul_rn(__fmul_rn(__fmul_rn(o, rs), p.norm[j]), silu_f(p.z[oi]));
    }
#pragma unroll
    for (int i = 0; i < D; i++) S[(size_t)i * D + j] = s[i];
}

int strata_cuda_deltanet(struct strata_cuda *cu, const struct strata_cuda_deltanet *p)
{
    if (p->n_tok <= 0) return 0;
    if (p->K1 > DN_K1_MAX || p->nk == 0 || p->nv % p->nk || p->C != 2 * p->nk * p->d + p->nv * p->d ||
        (p->d != 32 && p->d != 64 && p->d != 128)) {
        strata_log_error("cuda: delta-net with head size %u, %u/%u heads, conv width %u: no CUDA kernel for it",
                         p->d, p->nk, p->nv, p->K1 + 1);
        return STRATA_EUNSUP;
    }
    CU_LAUNCH("k_dn_gates", k_dn_gates, p->n_tok, 128, 0, *p);
    CU_LAUNCH("k_dn_conv", k_dn_conv, p->C / p->d, p->d, 0, *p);
    switch (p->d) {
    case 32: CU_LAUNCH("k_dn_rule", (k_dn_rule<32>), p->nv, 32, 0, *p); break;
    case 64: CU_LAUNCH("k_dn_rule", (k_dn_rule<64>), p->nv, 64, 0, *p); break;
    default: CU_LAUNCH("k_dn_rule", (k_dn_rule<128>), p->nv, 128, 0, *p); break;
    }
    return 0;
}
