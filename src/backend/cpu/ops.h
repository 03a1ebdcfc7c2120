// CPU operations of the forward pass on float rows, and the batched matrix multiply that runs
// every weight product through the kernel table (activations rounded to the weight type's dot
// format first, as ggml does).
#ifndef STRATA_OPS_H
#define STRATA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/pool.h"
#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "util/ggml_float.h"

// One product of a batch: y[y_row(t)][0..n_out) = W · act[x_row(t)] for t in 0..n_tok.
struct strata_mm_job {
    struct strata_mat w;
    const void *xq;          // activation rows already in w's vec_dot type
    size_t xq_stride;        // bytes between activation rows
    const int32_t *x_rows;   // activation row of each token (NULL: t)
    int n_tok;
    float *y;
    size_t y_stride;         // floats between output rows
    const int32_t *y_rows;   // output row of each token (NULL: t)
};

#define STRATA_MM_MAX_JOBS 2048

// Run all jobs of a batch on the pool (one parallel region; rows split dynamically).
// At most STRATA_MM_MAX_JOBS jobs.
void strata_mm_run(struct strata_pool *pool, const struct strata_kernels *k,
                   const struct strata_mm_job *jobs, int n_jobs);

// Bytes of one activation row of n elements in the vec_dot type of weight type `wtype`.
size_t strata_act_row_bytes(uint32_t wtype, uint32_t n);
// Round n_rows rows of x (stride n floats) to the vec_dot type of `wtype`, rows of
// strata_act_row_bytes bytes each.
void strata_act_quantize(const struct strata_kernels *k, uint32_t wtype, const float *x, int n_rows,
                         uint32_t n, void *out);

// y = x / sqrt(mean(x^2) + eps) * w, as ggml (sum of squares in double, in one chain: the same
// bits, from eight chains checked against a bound, falling back to the one chain where that bound
// cannot decide the float).
void strata_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps);
// mean(x^2) as a float: ggml's one chain, and the bounded eight-chain path strata_rmsnorm takes
// (the two agree on every input; test_cpu_rows checks it).
float strata_mean_sq_chain(const float *x, uint32_t n);
float strata_mean_sq(const float *x, uint32_t n);
// The mean from sum, the squares of x added in double in any order: its float where the bound
// decides it, else the one chain's.
float strata_mean_sq_decide(const float *x, uint32_t n, double sum);
// strata_rmsnorm of n_rows rows (strided).
void strata_rmsnorm_rows(float *y, size_t y_stride, const float *x, size_t x_stride, const float *w, int n_rows,
                         uint32_t n, float eps);
// NeoX RoPE of one head in two steps: the [n_rot/2][cos, sin] table of a position (the angle
// pos * base^(-2i/n_rot) accumulated in float the way ggml builds its cache), then the rotation
// of pairs (i, i + n_rot/2), i < n_rot/2.
void strata_rope_cache(float *cs, uint32_t n_rot, int pos, float freq_base);
void strata_rope_apply(float *x, const float *cs, uint32_t n_rot);
// rows_avx2.c: the same bits as the scalar loops, 8 elements at a time (CPUs with AVX2 and FMA):
// acc = w * d; acc = acc + w * d; x += acc (+ sh when not NULL); strata_rope_apply.
void strata_scale_row_avx2(float *acc, const float *d, float w, uint32_t n);
void strata_axpy_row_avx2(float *acc, const float *d, float w, uint32_t n);
void strata_add_rows2_avx2(float *x, const float *acc, const float *sh, uint32_t n);
void strata_rope_apply_avx2(float *x, const float *cs, uint32_t n_rot);
void strata_rmsnorm_avx2(float *y, const float *x, const float *w, uint32_t n, float eps);
// SiLU as ggml's vector paths compute it on the AVX-512 builds (ggml_v_silu: x / (1 + e^(0 - x))
// with the polynomial exp of util/ggml_float.h), which every FFN row of llama.cpp's takes (their
// widths are multiples of 16; only a row's last n mod 16 elements take libm's expf there). The
// AVX2 and AVX-512 loops below give these bits too, so every ISA level gives the same SwiGLU.
static inline float strata_silu(float x) { return x / (1.0f + ggml_vexpf16(0.0f - x)); }
// y = silu(g) * u over n elements (u NULL: silu(g)), the bits of strata_silu, y may be g or u
// (rows_avx2.c, ops_ext_avx512.c); strata_swiglu_rows takes the loop of the CPU's level.
void strata_swiglu_avx2(float *y, const float *g, const float *u, size_t n);
void strata_swiglu_avx512(float *y, const float *g, const float *u, size_t n);
static inline void strata_swiglu_scalar(float *y, const float *g, const float *u, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = u ? strata_silu(g[i]) * u[i] : strata_silu(g[i]);
}
static inline void strata_swiglu_rows(enum strata_isa isa, float *y, const float *g, const float *u, size_t n)
{
    if (isa >= STRATA_ISA_AVX512) strata_swiglu_avx512(y, g, u, n);
    else if (isa >= STRATA_ISA_AVX2) strata_swiglu_avx2(y, g, u, n);
    else strata_swiglu_scalar(y, g, u, n);
}

#endif
