// CPU operations the MLA, sparse-attention (DSA) and gpt-oss blocks add, each in the order of
// operations of ggml's x86 CPU backend so that its output is bit-identical to llama.cpp's when
// its inputs are. `vl` is the float lanes of the ggml build strata follows (16 for AVX-512, 8 for
// AVX2 and below, as strata_isa_lanes gives).
//
//   dot_sgemm    tinyBLAS's F32 product of one output element (llamafile sgemm, which ggml uses
//                for F32 x F32 products whose activations are contiguous): vl lanes, lane =
//                index mod vl, fused multiply-adds, then the pairwise tree of the lanes.
//   layernorm    ggml_norm (mean in double, centred squares in vl groups, eps inside the sqrt),
//                then ggml_mul by the weight and ggml_add of the bias.
//   swiglu_oai   gpt-oss's clamped SwiGLU: min(g, limit) * sigmoid(alpha * min(g, limit)) *
//                (clamp(u, -limit, limit) + 1), libm's expf.
//   hadamard     the orthonormal Walsh-Hadamard matrix llama.cpp multiplies the indexer's q and k
//                by (entries +-1/sqrt(n)), applied as an F32 matmul: llamafile's sgemm order
//                when the product has at least two activation rows per slice (q: one per
//                indexer head), ggml_vec_dot_f32's when it has one (k: one key per token).
//   indexer      ggml_lightning_indexer: per cached key, sum over heads of relu(q_h . k) * w_h
//                in head order (ggml_vec_dot_f32 per head, the accumulation fused), plus the mask.
//   top_k        the k largest of n scores (ggml_top_k), as a 0/1 mask of the positions; equal
//                scores at the boundary kept as libstdc++'s heap selection keeps them.
#ifndef STRATA_OPS_EXT_H
#define STRATA_OPS_EXT_H

#include <stdint.h>

#include "backend/cpu/kernels.h"

static inline int strata_isa_lanes(enum strata_isa isa) { return isa == STRATA_ISA_AVX512 ? 16 : 8; }

float strata_dot_sgemm(const float *a, const float *b, uint32_t n, int vl);

// y = norm(x) * w + b over n floats (w, b may be NULL).
void strata_layernorm(float *y, const float *x, const float *w, const float *b, uint32_t n, float eps, int vl);

void strata_swiglu_oai(float *y, const float *gate, const float *up, uint32_t n, float alpha, float limit);

// h: [n][n], n a power of two >= 2.
void strata_hadamard_init(float *h, uint32_t n);
// y = h x (y != x); rows_per_slice: the activation rows of ggml's product (sgemm from 2).
void strata_hadamard_apply(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice, int vl);

// score[p] = sum_h relu(q[h] . k(p)) * w[h] for p in [0, n_kv); k(p) = k + p * k_stride,
// q: [n_head][d]. Positions not in `visible` (NULL: all) get -inf, as the causal mask gives.
void strata_indexer_scores(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                           const float *k, size_t k_stride, int n_kv, int vl);

// The same two at the kernel level strata runs (`isa`: AVX512 follows the 16-lane ggml builds,
// the others the 8-lane ones), compiled with that ISA's flags; bit-identical to the above.
// hadamard's n must be a multiple of 16.
void strata_hadamard_apply_isa(enum strata_isa isa, float *y, const float *x, const float *h, uint32_t n,
                               int rows_per_slice);
void strata_indexer_scores_isa(enum strata_isa isa, float *score, const float *q, const float *w, uint32_t n_head,
                               uint32_t d, const float *k, size_t k_stride, int n_kv);
void strata_hadamard_apply_avx2(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice);
void strata_hadamard_apply_avx512(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice);
void strata_indexer_scores_avx2(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                                const float *k, size_t k_stride, int n_kv);
void strata_indexer_scores_avx512(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                                  const float *k, size_t k_stride, int n_kv);

// sel[p] = 1 for the top_k largest of score[0..n) (all of them when n <= top_k), else 0, with
// ties at the boundary resolved as ggml_top_k's std::partial_sort (libstdc++) resolves them.
// heap: top_k ints of scratch.
void strata_top_k_mask(uint8_t *sel, const float *score, int n, int top_k, int32_t *heap);

struct strata_pool;
struct strata_indexer_op;

// Floats of scratch strata_cpu_indexer needs for a pool of n_threads: per thread n_ctx scores,
// top_k heap entries and d values.
size_t strata_cpu_indexer_scratch(int n_threads, int n_ctx, uint32_t top_k, uint32_t d);
// The backend's indexer op (backend.h) on the CPU: the Hadamard products and the key store for
// every token, then each token's scores and top-k mask, both spread over the pool's threads.
// hadamard: [d][d] from strata_hadamard_init.
// keys[s]: sequence s's rows of this indexer layer, [n_ctx][d], committed up to its last position.
void strata_cpu_indexer(struct strata_pool *pool, enum strata_isa isa, const struct strata_indexer_op *op,
                        float *const *keys, const float *hadamard, float *scratch);

#endif
