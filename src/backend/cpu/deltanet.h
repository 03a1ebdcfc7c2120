// The CPU backend's delta-net op and the gated delta rule of one value head over a sequence's
// tokens, its inner loop: the scalar reference (deltanet.c) and its AVX2 / AVX-512 variants, which
// give the same bits (deltanet.c has the order of float operations every variant keeps).
#ifndef STRATA_BACKEND_CPU_DELTANET_H
#define STRATA_BACKEND_CPU_DELTANET_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/pool.h"

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

// The delta-net op on the pool, with the delta rule of `isa`.
void strata_cpu_deltanet(struct strata_pool *pool, enum strata_isa isa, const struct strata_deltanet_op *op);

#endif
