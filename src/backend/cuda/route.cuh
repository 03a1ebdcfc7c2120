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
        // The host adds all X in double, in expert order. Where every nonzero p has an exponent of
        // at least ceil(log2 X) - 29, each p is a multiple of 2^(ceil(log2 X) - 52) and every sum of
        // them is below 2^53 such units: no addition rounds, so any order gives the host's sum, and
        // the warp adds it as a tree. Otherwise every lane adds all X in expert order.
        const int lg = r.X > 1 ? 32 - __clz(r.X - 1) : 0;
        bool exact = true;
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int e8 = (int)(__float_as_uint(p[j]) >> 23 & 0xff) - 127;
            exact &= p[j] == 0.0f || e8 >= lg - 29;
        }
        double sum = 0.0;
        if (__all_sync(0xffffffffu, exact)) {
#pragma unroll
            for (int j = 0; j < PER; j++) sum += (double)p[j];
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        } else {
#pragma unroll
            for (int j = 0; j < PER; j++)
                for (int l = 0; l < 32 && 32 * j + l < r.X; l++) sum += __shfl_sync(0xffffffffu, p[j], l);
        }
        const float inv = (float)(1.0 / sum);
#pragma unroll
        for (int j = 0; j < PER; j++) p[j] = __fmul_rn(p[j], inv);
    }
#pragma unroll
    for (int j = 0; j < PER; j++) sc[j] = r.bias && 32 * j + lane < r.X ? __fadd_rn(p[j], r.bias[32 * j + lane]) : p[j];
    // top-k: per round, each lane's best untaken expert (ascending index with a strict '>' keeps the
    // lowest among equal scores), the warp's largest score, then the lowest index holding it
    uint32_t taken = 0;
    for (int k = 0; k < r.K; k++) {
        uint32_t key = 0;
        int best = 0x7fffffff;
#pragma unroll
        for (int j = 0; j < PER; j++) {
            const int e = 32 * j + lane;
            if (e >= r.X || (taken >> j & 1u)) continue;
            const uint32_t kj = score_key(sc[j]);
            if (kj > key || best == 0x7fffffff) key = kj, best = e;
        }
        const uint32_t top = __reduce_max_sync(0xffffffffu, key);
        const int e = (int)__reduce_min_sync(0xffffffffu, key == top && best != 0x7fffffff ? (uint32_t)best : 0xffffffffu);
        if (lane == e % 32) {
            taken |= 1u << (e / 32);
            float pe = 0.0f;
#pragma unroll
            for (int j = 0; j < PER; j++)
                if (j == e / 32) pe = p[j];
            chosen[k] = e, wsel[k] = pe;
        }
    }
    __syncwarp();
    // the selected probabilities added in selection order (every lane the same sum), then divided,
    // a lane per choice
    float sum = 1.0f;
    if (r.norm) {
        sum = 0.0f;
        for (int k = 0; k < r.K; k++) sum = __fadd_rn(sum, wsel[k]);
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
    }
    for (int k = lane; k < r.K; k += 32) {
        float v = __fdiv_rn(wsel[k], sum);
        if (r.scale != 0.0f && r.scale != 1.0f) v = __fmul_rn(v, r.scale);
        r.ids[(size_t)t * r.K + k] = chosen[k];
        r.weights[(size_t)t * r.K + k] = v;
    }
}

#endif
