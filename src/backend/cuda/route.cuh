// Private to src/backend/cuda: one token's routing by one warp (ops.cu k_route).
#ifndef STRATA_CUDA_ROUTE_CUH
#define STRATA_CUDA_ROUTE_CUH

#include "backend/cuda/common.cuh"

// expf rounded from double: correctly rounded (bar astronomically rare cases), which is what
// glibc's expf gives in all but a tiny fraction of inputs, so the probabilities, and the experts
// chosen from them, are the host's.
__device__ __forceinline__ float expf_cr(float x) { return (float)exp((double)x); }

// A score as an unsigned key in the same order (no NaN; -0 < +0 does not occur: probabilities
// are >= 0 and p + b = 0 rounds to +0).
__device__ __forceinline__ uint32_t score_key(float s)
{
    const uint32_t u = __float_as_uint(s);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

// Token t of r by the 32 lanes of one warp, lane l holding experts l, l + 32, ... (PER of them, X
// <= 32 PER) in registers; chosen [K] and wsel [K] are the warp's shared scratch. The rule of
// model/route.c: softmax (its sum in double, in expert order) or sigmoid; top-k by probability
// (+ bias), the highest score first and the lowest index among equal scores; the unbiased
// probabilities of the k renormalised (when norm) and scaled.
template <int PER>
__device__ __forceinline__ void route_token(const struct strata_cuda_route &r, int t, int *chosen, float *wsel,
                                            int lane)
{
    const float *lg = r.logits + (size_t)t * r.X;
    float p[PER], sc[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) {
        const int e = 32 * j + lane;
        p[j] = e < r.X ? lg[e] : 0.0f;
    }
    if (r.sigmoid) {
#pragma unroll
        for (int j = 0; j < PER; j++) p[j] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf_cr(-p[j])));
    } else {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < PER; j++)
            if (32 * j + lane < r.X) mx = fmaxf(mx, p[j]);
        mx = warp_max(mx);
#pragma unroll
        for (int j = 0; j < PER; j++) p[j] = 32 * j + lane < r.X ? expf_cr(__fsub_rn(p[j], mx)) : 0.0f;
        // every lane adds all X in expert order (the shuffles do not wait for the sum)
        double sum = 0.0;
#pragma unroll
        for (int j = 0; j < PER; j++)
            for (int l = 0; l < 32 && 32 * j + l < r.X; l++) sum += __shfl_sync(0xffffffffu, p[j], l);
        const float inv = (float)(1.0 / sum);
#pragma unroll
        for (int j = 0; j < PER; j++) p[j] = __fmul_rn(p[j], inv);
    }
#pragma unroll
    for (int j = 0; j < PER; j++) sc[j] = r.bias && 32 * j + lane < r.X ? __fadd_rn(p[j], r.bias[32 * j + lane]) : p[j];
    uint32_t taken = 0;
    for (int k = 0; k < r.K; k++) {
        // this lane's best untaken expert (ascending index: strict '>' keeps the lowest), then the
        // warp's: the largest (score, ~index) key
        uint64_t key = 0;
        float bp = 0.0f;
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int e = 32 * j + lane;
            if (e >= r.X || (taken >> j & 1u)) continue;
            const uint64_t kj = (uint64_t)score_key(sc[j]) << 32 | (uint32_t)~e;
            if (kj > key) key = kj, bp = p[j];
        }
        for (int o = 16; o > 0; o >>= 1) {
            const uint64_t ok = __shfl_xor_sync(0xffffffffu, key, o);
            const float op = __shfl_xor_sync(0xffffffffu, bp, o);
            if (ok > key) key = ok, bp = op;
        }
        const int e = (int)~(uint32_t)key;
        if (lane == e % 32) taken |= 1u << (e / 32);
        if (lane == 0) chosen[k] = e, wsel[k] = bp;
    }
    __syncwarp();
    if (lane == 0) {
        float sum = 0.0f;
        for (int k = 0; k < r.K; k++) sum = __fadd_rn(sum, wsel[k]);
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        if (!r.norm) sum = 1.0f;
        for (int k = 0; k < r.K; k++) {
            float v = __fdiv_rn(wsel[k], sum);
            if (r.scale != 0.0f && r.scale != 1.0f) v = __fmul_rn(v, r.scale);
            r.ids[(size_t)t * r.K + k] = chosen[k];
            r.weights[(size_t)t * r.K + k] = v;
        }
    }
}

#endif
