// The float operations of the deepseek2 / deepseek32 / glm-dsa / gpt-oss ops (ext.cu), one element
// or one dot product at a time, compiled for the device and the host (tests/test_cuda_host.cu checks
// them against the CPU backend's functions on a machine without a GPU). Each is the CPU's sequence
// of roundings (backend/cpu/rope_ext.c, ops_ext.c, ops_ext_impl.h) written with the _rn helpers of
// common.cuh, which nvcc does not contract into fused multiply-adds the CPU does not do. Where the
// CPU's order depends on its ISA (the lanes of ggml's SIMD sums), these follow the AVX-512 builds
// (vl 16): an AVX2 machine's CPU backend differs from them in the last bits of those sums.
#ifndef STRATA_CUDA_EXT_CUH
#define STRATA_CUDA_EXT_CUH

#include "backend/cuda/common.cuh"

// Loops over lane registers unrolled on the device (the host compiler knows no such pragma).
#ifdef __CUDA_ARCH__
#define UNROLL_DEV _Pragma("unroll")
#else
#define UNROLL_DEV
#endif

// ---- libm ----------------------------------------------------------------------------------------
// The CPU calls glibc's cosf, sinf and expf, which are not correctly rounded everywhere: against the
// value rounded once from double they differ by one ulp in about 0.6% (cosf), 1% (sinf) and 0.06%
// (expf) of arguments (glibc 2.36, x86-64, measured on RoPE angles and on [-20, 20]). CUDA's own
// float cosf/sinf/expf carry up to 2 ulp of error, so the value is computed in double and rounded
// once (CUDA's double functions are within 2 ulp of double): the result then differs from the
// CPU's only where glibc's does from the correctly rounded float, by one ulp.
HD float cos_once(float x) { return (float)cos((double)x); }
HD float sin_once(float x) { return (float)sin((double)x); }
HD float exp_once(float x) { return (float)exp((double)x); }

// ---- RoPE with YaRN --------------------------------------------------------------------------------

// strata_rope_ext_cache's pair i at position p: the angle accumulated in float as ggml builds its
// cache (i products by theta_scale), YaRN's ramp between the correction dims, cos and sin scaled.
HD void rope_ext_cs(const struct strata_cuda_rope_ext &r, int p, uint32_t i, float *c, float *s)
{
    float theta_extrap = (float)p;
    for (uint32_t k = 0; k < i; k++) theta_extrap = fmul_rn(theta_extrap, r.theta_scale);
    const float theta_interp = fmul_rn(r.freq_scale, theta_extrap);
    float theta = theta_interp;
    if (r.ext_factor != 0.0f) {
        const float span = fsub_rn(r.corr_dims[1], r.corr_dims[0]);
        const float y = fdiv_rn(fsub_rn((float)i, r.corr_dims[0]), span > 0.001f ? span : 0.001f);
        const float mix = fmul_rn(fsub_rn(1.0f, fminf(1.0f, fmaxf(0.0f, y))), r.ext_factor);
        theta = ffma_rn(theta_interp, fsub_rn(1.0f, mix), fmul_rn(theta_extrap, mix));
    }
    *c = fmul_rn(cos_once(theta), r.mscale);
    *s = fmul_rn(sin_once(theta), r.mscale);
}

// strata_rope_ext_apply's rotation of the pair (a, a + off).
HD void rope_ext_rotate(float *x, uint32_t a, uint32_t off, float c, float s)
{
    const float x0 = x[a], x1 = x[a + off];
    x[a] = ffma_rn(x0, c, -fmul_rn(x1, s));
    x[a + off] = ffma_rn(x0, s, fmul_rn(x1, c));
}

// ---- clamped SwiGLU, LayerNorm ---------------------------------------------------------------------

// strata_swiglu_oai of one element.
HD float swiglu_oai_1(float g, float u, float alpha, float limit)
{
    const float x = g > limit ? limit : g;
    const float uc = u < -limit ? -limit : u > limit ? limit : u;
    const float glu = fdiv_rn(x, fadd_rn(1.0f, exp_once(fmul_rn(alpha, -x))));
    return fmul_rn(glu, fadd_rn(uc, 1.0f));
}

// _mm512_reduce_add_ps's tree over 16 lanes (ggml_hsum_lanes, vl 16); a is overwritten.
HD float hsum16(float *a)
{
    // each step with a constant bound: nvcc leaves a nest of h /= 2 loops rolled, in local memory
UNROLL_DEV
    for (int i = 0; i < 8; i++) a[i] = fadd_rn(a[i], a[i + 8]);
UNROLL_DEV
    for (int i = 0; i < 4; i++) a[i] = fadd_rn(a[i], a[i + 4]);
    a[0] = fadd_rn(a[0], a[2]), a[1] = fadd_rn(a[1], a[3]);
    return fadd_rn(a[0], a[1]);
}

// strata_layernorm's mean: the floats summed in double in order.
HD float layernorm_mean(const float *x, uint32_t n)
{
    double s = 0.0;
    for (uint32_t i = 0; i < n; i++) s += (double)x[i];
    return fdiv_rn((float)s, (float)n);
}

// The float sum of the centred squares of one group of 16 (ggml_vec_cvar_f32's lanes).
HD float layernorm_group16(const float *x, float mean)
{
    float lane[16];
UNROLL_DEV
    for (int j = 0; j < 16; j++) {
        const float c = fsub_rn(x[j], mean);
        lane[j] = fmul_rn(c, c);
    }
    return hsum16(lane);
}

// 1 / sqrt(variance + eps) from the groups' sums part[0 .. n/16) (added in double in group order)
// and the tail of x past the last whole group.
HD float layernorm_scale(const float *x, const float *part, uint32_t n, float mean, float eps)
{
    double var = 0.0;
    const uint32_t ng = n / 16;
    for (uint32_t g = 0; g < ng; g++) var += (double)part[g];
    for (uint32_t i = ng * 16; i < n; i++) {
        const float c = fsub_rn(x[i], mean);
        var += (double)fmul_rn(c, c);
    }
    const float variance = (float)(var / n);
    return fdiv_rn(1.0f, fsqrt_rn(fadd_rn(variance, eps)));
}

// One output: ((x - mean) * scale) * w + b (w, b NULL: left out).
HD float layernorm_out(float x, float mean, float scale, const float *w, const float *b, uint32_t i)
{
    float y = fmul_rn(fsub_rn(x, mean), scale);
    if (w) y = fmul_rn(y, w[i]);
    if (b) y = fadd_rn(y, b[i]);
    return y;
}

// ---- the indexer -------------------------------------------------------------------------------------

// Entry (i, j) of strata_hadamard_init's matrix (Sylvester's construction: the sign flips once per
// bit that i and j share), v its first entry (float)(1 / sqrt(d)).
HD float hadamard_at(uint32_t i, uint32_t j, float v) { return popc(i & j) & 1u ? -v : v; }

// Row i of the Hadamard matrix, or a row of floats, as an element accessor of the dots below.
struct hadamard_row {
    uint32_t i;
    float v;
    HD float operator()(uint32_t j) const { return hadamard_at(i, j, v); }
};
struct float_row {
    const float *a;
    HD float operator()(uint32_t j) const { return a[j]; }
};

// tinyBLAS's F32 product for 16 lanes (strata_dot_sgemm, vl 16): lane = index mod 16, fused
// multiply-adds, the tree of the lanes. n a multiple of 16.
template <class A>
HD float dot_sgemm16(A a, const float *y, uint32_t n)
{
    float acc[16];
UNROLL_DEV
    for (int j = 0; j < 16; j++) acc[j] = 0.0f;
    for (uint32_t l = 0; l < n; l += 16)
UNROLL_DEV
        for (int j = 0; j < 16; j++) acc[j] = ffma_rn(a(l + j), y[l + j], acc[j]);
    return hsum16(acc);
}

// ggml_vec_dot_f32 of the AVX-512 builds (attn_dot, vl 16): 64 lane accumulators over the whole
// groups of 64, halved twice, the 16-lane tree, then the tail one fused multiply-add at a time.
template <class A>
HD float dot_vec16(A a, const float *y, uint32_t n)
{
    float acc[64];
UNROLL_DEV
    for (int j = 0; j < 64; j++) acc[j] = 0.0f;
    const uint32_t np = n & ~63u;
    for (uint32_t i = 0; i < np; i += 64)
UNROLL_DEV
        for (int j = 0; j < 64; j++) acc[j] = ffma_rn(a(i + j), y[i + j], acc[j]);
UNROLL_DEV
    for (int j = 0; j < 32; j++) acc[j] = fadd_rn(acc[j], acc[j + 32]);
UNROLL_DEV
    for (int j = 0; j < 16; j++) acc[j] = fadd_rn(acc[j], acc[j + 16]);
    float s = hsum16(acc);
    for (uint32_t i = np; i < n; i++) s = ffma_rn(a(i), y[i], s);
    return s;
}

// Lane l (< 32) of dot_vec16 spread over a warp: accumulators l and l + 32 over the first np
// elements (a multiple of 64), added as the reduction's first step does. The warp then adds lane
// l + 16 to lane l, and so on down the 16-lane tree, and goes on with the tail (ext.cu).
HD float dot_vec16_lane(const float *x, const float *y, uint32_t np, int l)
{
    float a0 = 0.0f, a1 = 0.0f;
    for (uint32_t i = 0; i < np; i += 64) {
        a0 = ffma_rn(x[i + l], y[i + l], a0);
        a1 = ffma_rn(x[i + l + 32], y[i + l + 32], a1);
    }
    return fadd_rn(a0, a1);
}

// One head's term of a position's score: sc + relu(q . k) * w, fused as the CPU fuses it.
HD float indexer_acc(float sc, float qk, float w) { return ffma_rn(qk > 0.0f ? qk : 0.0f, w, sc); }

#endif
