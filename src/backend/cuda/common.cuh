// Private to src/backend/cuda: the checking macros, byte access helpers, the float terms of block
// dot products and warp helpers. The integer decoders of the block formats are in decode.cuh.
//
// Every quantized format is decoded the way src/quant/ref_lowbit.c decodes it: a 32-element
// "unit" of a block becomes 32 exact int8 values (packed four to an int32, element 4i + b in byte
// b of q[i]), two integer scales and two integer mins (one per 16 elements; equal where the format
// scales per 32), and each block has float factors d and dmin. A dot product sums q times the
// activation's int8 values exactly per 16 elements, weighs those sums with the integer scales in
// int32, and only then touches floats, once per block: the "term" of a block (block_term below).
// Both kernel families compute each block's term with the same float operations and add the
// terms of a row in block order, one after another, so a token's result is bit-identical whether
// it went through the mat-vec or the GEMM, alone or in a batch of any size.
#ifndef STRATA_CUDA_COMMON_CUH
#define STRATA_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include <atomic>  // before include/strata.h (through util/log.h), which names std::atomic_bool in C++

extern "C" {
#include "backend/cuda/cuda.h"
#include "quant/fp16.h"
#include "quant/quant.h"
#include "util/log.h"
}

// ---- error checking ---------------------------------------------------------------------------

// Every CUDA runtime call goes through CU_TRY (returns STRATA_EIO-style codes from the enclosing
// function after one log line naming the call) or CU_WARN (logs, goes on: cleanup paths).
#define CU_TRY(call)                                                                              \
    do {                                                                                          \
        cudaError_t cu_err_ = (call);                                                             \
        if (cu_err_ != cudaSuccess) {                                                             \
            strata_log_error("cuda: %s failed: %s (%s:%d)", #call, cudaGetErrorString(cu_err_),   \
                             __FILE__, __LINE__);                                                 \
            return strata_cuda_err(cu_err_);                                                      \
        }                                                                                         \
    } while (0)

#define CU_WARN(call)                                                                             \
    do {                                                                                          \
        cudaError_t cu_err_ = (call);                                                             \
        if (cu_err_ != cudaSuccess)                                                               \
            strata_log_warn("cuda: %s failed: %s (%s:%d)", #call, cudaGetErrorString(cu_err_),    \
                            __FILE__, __LINE__);                                                  \
    } while (0)

// After every launch: a bad configuration shows here, a fault in the kernel at the next sync.
#define CU_LAUNCHED(what) CU_TRY(cudaPeekAtLastError())

// cudaErrorMemoryAllocation -> STRATA_ENOMEM, the rest STRATA_EIO (a device fault or a bug).
static inline int strata_cuda_err(cudaError_t e)
{
    return e == cudaErrorMemoryAllocation ? STRATA_ENOMEM : STRATA_EIO;
}

// ---- portable helpers -------------------------------------------------------------------------
// The decoders and block terms compile for the host too (tests/test_cuda_host.cu checks them
// against the CPU reference on a machine without a GPU): each intrinsic has a portable twin.

#define HD __host__ __device__ __forceinline__

HD uint32_t vsub4(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    return __vsub4(a, b);
#else
    uint32_t r = 0;
    for (int k = 0; k < 32; k += 8) r |= (((a >> k) - (b >> k)) & 0xffu) << k;
    return r;
#endif
}

HD uint32_t vadd4(uint32_t a, uint32_t b)
{
#ifdef __CUDA_ARCH__
    return __vadd4(a, b);
#else
    uint32_t r = 0;
    for (int k = 0; k < 32; k += 8) r |= (((a >> k) + (b >> k)) & 0xffu) << k;
    return r;
#endif
}

// Bytes of {hi:lo} picked by the 4 selector nibbles (values 0..7).
HD uint32_t byte_perm(uint32_t lo, uint32_t hi, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    return __byte_perm(lo, hi, sel);
#else
    const uint64_t v = (uint64_t)hi << 32 | lo;
    uint32_t r = 0;
    for (int k = 0; k < 4; k++) r |= (uint32_t)((v >> (8 * ((sel >> (4 * k)) & 7u))) & 0xffu) << (8 * k);
    return r;
#endif
}

HD uint32_t funnel_r(uint32_t lo, uint32_t hi, uint32_t sh)
{
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, sh);
#else
    return (uint32_t)(((uint64_t)hi << 32 | lo) >> (sh & 31u));
#endif
}

HD uint32_t popc(uint32_t v)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)__popc(v);
#else
    return (uint32_t)__builtin_popcount(v);
#endif
}

HD int dp4a(int a, int b, int c)
{
#ifdef __CUDA_ARCH__
    return __dp4a(a, b, c);
#else
    for (int k = 0; k < 32; k += 8) c += (int)(int8_t)(a >> k) * (int)(int8_t)(b >> k);
    return c;
#endif
}

// ---- byte access --------------------------------------------------------------------------------

// The 4 bytes at p, any alignment: two aligned words and a funnel shift. Reads up to 7 bytes past
// p + 3, so every buffer this reads is padded (weights by STRATA_CUDA_PAD, staging buffers too).
HD uint32_t ld32(const uint8_t *p)
{
    const uintptr_t a = (uintptr_t)p;
    const uint32_t *w = (const uint32_t *)(a & ~(uintptr_t)3);
    return funnel_r(w[0], w[1], (uint32_t)(a & 3) * 8);
}

HD uint32_t ld16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

HD float h2f(uint32_t bits)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half((unsigned short)bits));
#else
    return strata_fp16_to_fp32((uint16_t)bits);
#endif
}

// 0xff in byte k where bit k of bits (k < 4) is set.
HD uint32_t bytemask4(uint32_t bits)
{
    return (((bits & 15u) * 0x00204081u) & 0x01010101u) * 0xffu;
}

// Byte k of g negated where bit k of the 4 sign bits is set (g holds magnitudes < 128).
HD uint32_t apply_signs4(uint32_t g, uint32_t bits)
{
    const uint32_t m = bytemask4(bits);
    return vsub4(g ^ m, m);
}

// IQ's 7 stored sign bits completed to 8: bit 7 makes the count of minus signs even.
HD uint32_t signs8(uint32_t bits7)
{
    bits7 &= 127u;
    return bits7 | (popc(bits7) & 1u) << 7;
}

// Four 4-bit indices (one per byte of v, values 0..15) looked up in a 16-entry int8 table held as
// 4 words: byte_perm picks among 8 bytes by the low 3 bits, bit 3 chooses the half.
HD uint32_t lookup16(uint32_t v, const uint32_t tbl[4])
{
    const uint32_t t = v & 0x07070707u;
    const uint32_t sel = (t & 0xffu) | ((t >> 4) & 0xf0u) | ((t >> 8) & 0xf00u) | ((t >> 12) & 0xf000u);
    const uint32_t lo = byte_perm(tbl[0], tbl[1], sel), hi = byte_perm(tbl[2], tbl[3], sel);
    const uint32_t m = ((v >> 3) & 0x01010101u) * 0xffu;
    return (lo & ~m) | (hi & m);
}

// Bit k of bits (k < 4) moved to bit 4 of byte k.
HD uint32_t fifth_bits4(uint32_t bits)
{
    return (((bits & 15u) * 0x00204081u) & 0x01010101u) << 4;
}

// ---- block terms: the float operations of one block's contribution ----------------------------

// IEEE float operations that no compiler fuses (host: ISO C++ without FMA contraction).
HD float fmul_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

HD float fsub_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

HD float fadd_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

HD float fdiv_rn(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}

// One rounding of a * b + c (the host's fmaf is the correctly rounded one too).
HD float ffma_rn(float a, float b, float c)
{
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return fmaf(a, b, c);
#endif
}

HD float fsqrt_rn(float a)
{
#ifdef __CUDA_ARCH__
    return __fsqrt_rn(a);
#else
    return sqrtf(a);
#endif
}

// Q8_K activations (256-element blocks): d, dmin the weight block's factors, da the activation's,
// isum the scaled integer dot, imin the min-weighted bsum total.
template <bool HAS_MIN>
HD float term_k(float d, float dmin, float da, int isum, int imin)
{
    const float t = fmul_rn(fmul_rn(d, da), (float)isum);
    if (!HAS_MIN) return t;
    return fsub_rn(t, fmul_rn(fmul_rn(dmin, da), (float)imin));
}

// Q8_0 / Q8_1 activations (32-element blocks): as = the Q8_1 block's d * sum(q) (Q4_1/Q5_1).
template <bool HAS_MIN>
HD float term_32(float d, float dmin, float da, float as, int isum)
{
    const float t = fmul_rn(fmul_rn(d, da), (float)isum);
    if (!HAS_MIN) return t;
    return fsub_rn(t, fmul_rn(dmin, as));
}

__device__ __forceinline__ float silu_f(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }

// ---- programmatic dependent launch (sm_90) ----------------------------------------------------------
// Every kernel is launched allowed to start before the previous one ends (strata_cuda_launch):
// it announces at once that its own dependents may be scheduled, may read what no earlier kernel
// writes (weights) before pdl_wait(), and calls pdl_wait() before reading or writing anything
// else. pdl_wait() returns when the previous kernel has completed and its writes are visible.
__device__ __forceinline__ void pdl_launch_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Both, for kernels that read nothing before their inputs.
__device__ __forceinline__ void pdl_enter()
{
    pdl_launch_dependents();
    pdl_wait();
}

// A 128-byte line of global memory into L2 (no register, no wait).
__device__ __forceinline__ void prefetch_l2(const void *p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// ---- asynchronous copies global -> shared (sm_80) -----------------------------------------------------

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem)
{
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Warp-wide helpers.
__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif
