// RoPE with YaRN context scaling (struct strata_rope_ext, backend.h), in both pair layouts,
// computed as ggml's CPU backend does (rope_yarn and ggml_rope_cache_init in ggml-cpu/ops.cpp),
// so that rotated q and k are bit-identical to llama.cpp's. The factors come from the host
// (model/rope_scaling.h).
//
// Angle of pair i at position p: theta_extrap = p * base^(-2i/n_dims), accumulated in float as
// ggml does (theta *= theta_scale); theta_interp = freq_scale * theta_extrap. With YaRN
// (ext_factor != 0) the pair mixes the two by a ramp over the correction dims and both cos and
// sin are scaled by attn_factor * (1 + 0.1 ln(1 / freq_scale)); without, theta = theta_interp
// and the scale is attn_factor. The x86 builds of ggml-cpu contract the first product of
// a*b + c*d into a fused multiply-add (the theta mix, the rotation); so does this.
#ifndef STRATA_ROPE_EXT_H
#define STRATA_ROPE_EXT_H

#include "backend/backend.h"

// The factor cos and sin are scaled by: attn_factor, times 1 + 0.1 ln(1 / freq_scale) under YaRN
// (libm's logf; the CUDA backend takes it from here so that the two use the same float).
float strata_rope_ext_mscale(const struct strata_rope_ext *p);

// cs[2i], cs[2i+1] = cos, sin of pair i at position pos, already scaled. [n_dims/2][2] floats.
void strata_rope_ext_cache(float *cs, const struct strata_rope_ext *p, int pos);

// Rotate the first n_dims floats of x in place with a cache from strata_rope_ext_cache.
void strata_rope_ext_apply(float *x, const float *cs, const struct strata_rope_ext *p);

#endif
