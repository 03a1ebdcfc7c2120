// The gated delta rule of one value head over a chunk's tokens, the inner loop of the delta-net
// (linear attention) blocks: the scalar reference (deltanet.c) and its AVX2 / AVX-512 variants,
// which give the same bits (model/deltanet.c has the equations and the order of float operations
// every variant keeps, so the results depend neither on the ISA nor on the chunk size).
#ifndef STRATA_BACKEND_CPU_DELTANET_H
#define STRATA_BACKEND_CPU_DELTANET_H

#include <stddef.h>
#include <stdint.h>

struct strata_deltanet_head {
    float *S;                 // [d key][d value] the head's state, updated in place
    const float *q, *k, *v;   // token t's [d] at + t * qkv_stride (q, k L2-normalised)
    size_t qkv_stride;
    const float *decay, *beta; // token t's at + t * gate_stride
    size_t gate_stride;
    float *o;                 // token t's [d] output at o + t * o_stride
    size_t o_stride;
    int n_tok;
    uint32_t d;
    float scale;              // 1/sqrt(d)
};
void strata_deltanet_head(const struct strata_deltanet_head *a);
void strata_deltanet_head_avx2(const struct strata_deltanet_head *a);   // d % 8 == 0
void strata_deltanet_head_avx512(const struct strata_deltanet_head *a); // d % 16 == 0

#endif
