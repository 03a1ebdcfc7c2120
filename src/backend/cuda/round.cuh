// Private to src/backend/cuda: rounding float rows to the activation formats (Q8_0, Q8_1, Q8_K,
// F16, BF16) bit for bit as the CPU reference (src/quant/ref*.c, ggml's x86 rules), as device
// functions a kernel can call on a row it has just produced (norms, attention outputs).
#ifndef STRATA_CUDA_ROUND_CUH
#define STRATA_CUDA_ROUND_CUH

#include "backend/cuda/common.cuh"

// ggml's nearest_int: the low 23 bits of v + 1.5 * 2^23, minus 2^22 (round half to even for
// |v| < 2^22, the same bits as the CPU for anything else).
__device__ __forceinline__ int nearest_int(float v)
{
    return (int)(__float_as_uint(__fadd_rn(v, 12582912.0f)) & 0x007fffffu) - 0x00400000;
}

// One Q8_0 / Q8_1 block per warp, lane = element.
template <bool Q81>
__device__ __forceinline__ void quant_q8_0_block(const float *x, int8_t *qs, float *d, float *s, int lane)
{
    const float v = x[lane];
    const float amax = warp_max(fabsf(v));
    const float dq = __fdiv_rn(amax, 127.0f);
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    const float scaled = __fmul_rn(v, id);
    int q;
    if (!(fabsf(scaled) < 2147483648.0f)) {
        q = -128;
    } else {
        const float r = fabsf(scaled) < 4194304.0f ? (float)nearest_int(scaled) : scaled;
        q = r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r;
    }
    qs[lane] = (int8_t)q;
    if (Q81) {
        int sum = q;
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) *s = __half2float(__float2half_rn(__fmul_rn(dq, (float)sum)));
    }
    if (lane == 0) *d = __half2float(__float2half_rn(dq));
}

// One Q8_K block per warp, lane = elements 8 lane .. 8 lane + 7.
__device__ __forceinline__ void quant_q8_k_block(const float *x, int8_t *qs, float *d, int16_t *bsums, int lane)
{
    float v[8];
    float amax = 0.0f;
    for (int i = 0; i < 8; i++) {
        v[i] = x[8 * lane + i];
        if (fabsf(v[i]) > amax) amax = fabsf(v[i]);
    }
    amax = warp_max(amax);
    // the first element of largest magnitude decides the sign of d (the CPU's strict '>' scan)
    int first = 256;
    for (int i = 7; i >= 0; i--)
        if (amax > 0.0f && fabsf(v[i]) == amax) first = 8 * lane + i;
    for (int o = 16; o > 0; o >>= 1) first = min(first, __shfl_xor_sync(0xffffffffu, first, o));
    if (amax == 0.0f) {
        for (int i = 0; i < 8; i++) qs[8 * lane + i] = 0;
        if (lane % 2 == 0) bsums[lane / 2] = 0;
        if (lane == 0) *d = 0.0f;
        return;
    }
    float mine = 0.0f;
    for (int i = 0; i < 8; i++)
        if (8 * lane + i == first) mine = v[i];
    const float max = __shfl_sync(0xffffffffu, mine, first / 8);
    const float iscale = __fdiv_rn(-127.0f, max);
    int sum = 0;
    for (int i = 0; i < 8; i++) {
        int q = nearest_int(__fmul_rn(iscale, v[i]));
        if (q > 127) q = 127;
        const int8_t b = (int8_t)(uint8_t)(q & 0xff);
        qs[8 * lane + i] = b;
        sum += b;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    if (lane % 2 == 0) bsums[lane / 2] = (int16_t)sum;
    if (lane == 0) *d = __fdiv_rn(1.0f, iscale);
}

__device__ __forceinline__ uint16_t bf16_round(float f)
{
    const uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 64u);
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

// Row `row` of a from the n_in floats at xr (global or shared memory), by all warps of the block.
__device__ __forceinline__ void quantize_row(const float *xr, const struct strata_cuda_act &a, int row)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    const size_t n = a.n_in;
    switch (a.vdt) {
    case STRATA_TYPE_Q8_0:
    case STRATA_TYPE_Q8_1:
        for (size_t b = warp; b < n / 32; b += nw) {
            const size_t bi = (size_t)row * (n / 32) + b;
            if (a.vdt == STRATA_TYPE_Q8_1)
                quant_q8_0_block<true>(xr + 32 * b, a.qs + (size_t)row * n + 32 * b, a.d + bi, a.s + bi, lane);
            else
                quant_q8_0_block<false>(xr + 32 * b, a.qs + (size_t)row * n + 32 * b, a.d + bi, NULL, lane);
        }
        break;
    case STRATA_TYPE_Q8_K:
        for (size_t b = warp; b < n / 256; b += nw)
            quant_q8_k_block(xr + 256 * b, a.qs + (size_t)row * n + 256 * b, a.d + (size_t)row * (n / 256) + b,
                             a.bsums + (size_t)row * (n / 16) + 16 * b, lane);
        break;
    case STRATA_TYPE_F16:
        for (size_t i = threadIdx.x; i < n; i += blockDim.x)
            a.h[(size_t)row * n + i] = __half_as_ushort(__float2half_rn(xr[i]));
        break;
    case STRATA_TYPE_BF16:
        for (size_t i = threadIdx.x; i < n; i += blockDim.x) a.h[(size_t)row * n + i] = bf16_round(xr[i]);
        break;
    default: break;
    }
}

#endif
