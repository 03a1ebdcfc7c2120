// ggml's x86 float primitives that fix an order of operations, for code that must give ggml's
// bits whether it runs in a backend (attention, the MoE and indexer ops) or on the host (the
// router's softmax): the polynomial expf of its AVX2 and AVX-512 builds (ggml_v_expf) and the
// pairwise tree its horizontal sums take. Every fused multiply-add is an explicit fmaf.
#ifndef STRATA_GGML_FLOAT_H
#define STRATA_GGML_FLOAT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ggml_bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t ggml_f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// 2^n for -126 <= n <= 127.
static inline float ggml_pow2i(int n) { return ggml_bits_f((uint32_t)(n + 127) << 23); }

// ggml_v_expf of the AVX-512 builds: j * 2^n by vscalefps (one rounding).
static inline float ggml_vexpf16(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, fmaf(0x1.ffffecp-1f, b, 1.0f));
    const int ni = (int)n;
    // j * 2^n exactly rounded once: split the power when it is not a normal float
    if (ni > 127) return (j * ggml_pow2i(127)) * ggml_pow2i(ni - 127);
    if (ni < -126) return (j * ggml_pow2i(-126)) * ggml_pow2i(ni + 126);
    return j * ggml_pow2i(ni);
}

// ggml_v_expf of the AVX2 builds: k + k*j with k = 2^n built in the exponent bits.
static inline float ggml_vexpf8(float x)
{
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = ggml_f_bits(z) << 23;
    const float k = ggml_bits_f(e + ggml_f_bits(1.0f));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                         u, 0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = ggml_bits_f(g + 0x7f000000u);
    const float s2 = ggml_bits_f(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

// The horizontal sum of VL lanes (_mm512_reduce_add_ps, or the AVX2 hsum / soft_max reduce):
// a pairwise tree that halves the lane count each step.
static inline float ggml_hsum_lanes(float *a, const int vl)
{
    for (int h = vl / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) a[i] = a[i] + a[i + h];
    return a[0];
}

#endif
