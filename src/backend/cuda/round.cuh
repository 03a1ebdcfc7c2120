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

// Eight Q8_0 / Q8_1 blocks per warp (the 256 elements from block b0): lanes 4g .. 4g + 3 take block
// b0 + g, eight elements each, so a block's maximum and sum cross 2 shuffle levels instead of 5 and
// a warp rounds 8 blocks in one chain where a block a pass took 8. The values are those of one
// block a warp: the maximum of the same 32 magnitudes (fmaxf, any order), the same scales and
// quants, the sum an exact integer. Blocks at or past nb (the row's last group) are skipped.
template <bool Q81>
__device__ __forceinline__ void quant_q8_0_group(const float *x, int8_t *qs, float *d, float *s, size_t b0, size_t nb,
                                                 int lane)
{
    const size_t b = b0 + (size_t)(lane >> 2);
    const bool ok = b < nb;  // the same for a block's four lanes
    const int e0 = 32 * (int)(lane >> 2) + 8 * (lane & 3);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = ok ? x[32 * b0 + e0 + i] : 0.0f;
    float amax = fabsf(v[0]);  // NaN only where all 32 are, as the tree of fmaxf over the lanes was
#pragma unroll
    for (int i = 1; i < 8; i++) amax = fmaxf(amax, fabsf(v[i]));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    const float dq = __fdiv_rn(amax, 127.0f);
    const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
    int sum = 0;
    uint32_t packed[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float scaled = __fmul_rn(v[i], id);
        int q;
        if (!(fabsf(scaled) < 2147483648.0f)) {
            q = -128;
        } else {
            const float r = fabsf(scaled) < 4194304.0f ? (float)nearest_int(scaled) : scaled;
            q = r > 127.0f ? 127 : r < -128.0f ? -128 : (int)r;
        }
        sum += q;
        packed[i / 4] |= (uint32_t)(uint8_t)(int8_t)q << (8 * (i % 4));
    }
    if (Q81) {
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    }
    if (!ok) return;
    int8_t *q8 = qs + 32 * b0 + e0;
    if (((uintptr_t)q8 & 7) == 0) {
        *(uint2 *)q8 = make_uint2(packed[0], packed[1]);
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) q8[i] = (int8_t)(packed[i / 4] >> (8 * (i % 4)));
    }
    if ((lane & 3) == 0) {
        d[b] = __half2float(__float2half_rn(dq));
        if (Q81) s[b] = __half2float(__float2half_rn(__fmul_rn(dq, (float)sum)));
    }
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
        for (size_t b0 = 8 * (size_t)warp; b0 < n / 32; b0 += 8 * (size_t)nw) {
            const size_t r0 = (size_t)row * (n / 32);
            if (a.vdt == STRATA_TYPE_Q8_1)
                quant_q8_0_group<true>(xr, a.qs + (size_t)row * n, a.d + r0, a.s + r0, b0, n / 32, lane);
            else
                quant_q8_0_group<false>(xr, a.qs + (size_t)row * n, a.d + r0, NULL, b0, n / 32, lane);
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
