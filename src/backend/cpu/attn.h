// Causal softmax attention of one query head over an F32 key/value cache, computed with the
// order of operations of llama.cpp's x86 CPU backend (flash attention off, F32 KV cache), so that
// the attention output is bit-identical to llama.cpp's when q, k and v are.
//
// Why bit-identical matters: the attention output is the activation of the output projection,
// which ggml rounds to the weight's dot format (Q8_0 blocks for a Q8_0 attn_output, Q8_K for
// K-quants). A value that lands on a rounding tie in llama.cpp (x / d == k + 0.5 exactly) but one
// ulp beside it here rounds to the other int8 step; that step changes the token's residual by
// ~1e-3, and every later position attends to the token's keys and values in the next layers, so
// one such flip shows as a ~2e-3 logit difference at every position after it.
//
// What ggml computes (x86, the ggml-cpu variant llama.cpp loads: VL = 16 float lanes for the
// AVX-512 builds, 8 for the AVX2 ones):
//   kq    ggml_vec_dot_f32 over the head dim: 4·VL lane accumulators, lane = i mod 4·VL, fused
//         multiply-adds, then a pairwise tree (leftover dims added in order after it).
//   soft_max  s = kq · scale; e = ggml_v_expf(s − max) (a polynomial exp, not libm's); the sum
//         is taken per aligned group of VL cache cells as a float tree, added in double;
//         p = e · (float)(1 / sum).
//   kqv   more than one token in the batch: llamafile's tinyBLAS sgemm, VL lanes (lane = cell
//         mod VL) of fused multiply-adds and a tree sum. The KV cache holds a multiple of 256
//         cells, so masked cells only add zeros: the lanes follow the absolute cell index, which
//         is the position here. For a single-token batch (decode) ggml switches to
//         ggml_vec_dot_f32 order; strata keeps the sgemm order for every batch size, because a
//         token's logits must not depend on the chunk it was evaluated in (prompt chunk sizes
//         and the decode path give bit-identical results; llama.cpp's own batch-1 and batch-512
//         logits differ in the last bits for this reason).
//   masks  a sliding window, a sparse selection and the causal mask are -inf in the mask ggml
//         adds before the softmax: masked cells give exp = 0, which adds nothing to a group's
//         tree or to an accumulator lane, so strata skips them and keeps every lane and group at
//         its absolute position (llama.cpp with a full-size SWA cache places position p in cell
//         p; its default SWA cache is a ring of other cells, whose order differs in the last bit).
//   sinks  (soft_max_ext with sinks) the maximum includes the head's sink logit, and
//         expf(sink - max) (libm's expf, not ggml_v_expf) is added to the double sum.
//   MLA   (deepseek2, glm-dsa) is this with one key head of D = kv_lora_rank + n_rot shared by
//         every query head, the value being the first Dv = kv_lora_rank floats of the key row.
#ifndef STRATA_ATTN_H
#define STRATA_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels.h"

struct strata_attn_query {
    const float *q;     // [D]
    const float *k;     // key of position p at k + p * k_stride
    size_t k_stride;    // floats
    const float *v;     // value of position p at v + p * v_stride
    size_t v_stride;    // floats
    int n_kv;           // attends to positions 0 .. n_kv-1 (n_kv >= 1)
    uint32_t D, Dv;     // head dims of q/k and of v
    float scale;        // kq scale (1/sqrt(D))
    float *scores;      // scratch, n_kv floats
    float *out;         // [Dv]
    // Optional (zero: plain causal attention over 0 .. n_kv-1):
    int kv_start;           // first visible position (sliding window: n_kv - n_swa)
    int kv_ring;            // the cache holds position p at row p % kv_ring (0: at row p)
    const uint8_t *visible; // [n_kv] 0 masks a position (sparse attention's top-k), NULL: all
    const float *sink;      // this head's sink logit, part of the softmax only (gpt-oss)
};

// `isa`: the kernel level strata runs; AVX512 follows the AVX-512 ggml builds, the others the
// AVX2 ones.
void strata_attn_head(enum strata_isa isa, const struct strata_attn_query *a);
// g <= STRATA_ATTN_GROUP queries at once that share their key and value rows and every option
// but q, scores, out and sink (the heads of one token over one key head): each key and value row
// is read once for all of them; each result has the bits strata_attn_head gives it alone.
#define STRATA_ATTN_GROUP 8
void strata_attn_heads(enum strata_isa isa, const struct strata_attn_query *a, int g);
// n <= STRATA_ATTN_ROWS queries over one key head that share k, v, D, Dv and scale but each have
// their own q, n_kv, kv_start, visible, sink, scores and out (the heads of several tokens of a
// prompt over MLA's latent rows or over one key head of grouped-query attention); no ring. The kq
// and kqv run as products over tiles of queries x positions (each key and value row read once per
// tile); each result has the bits strata_attn_head gives it alone. Every scores buffer holds the
// largest n_kv of the call.
#define STRATA_ATTN_ROWS 32
void strata_attn_rows(enum strata_isa isa, const struct strata_attn_query *a, int n);

// Variants (attn.c scalar; attn_avx2.c / attn_avx512.c compiled with their ISA flags).
void strata_attn_head_vl8(const struct strata_attn_query *a);
void strata_attn_head_vl16(const struct strata_attn_query *a);
void strata_attn_head_vl8_avx2(const struct strata_attn_query *a);
void strata_attn_head_vl16_avx512(const struct strata_attn_query *a);
void strata_attn_heads_vl8(const struct strata_attn_query *a, int g);
void strata_attn_heads_vl16(const struct strata_attn_query *a, int g);
void strata_attn_heads_vl8_avx2(const struct strata_attn_query *a, int g);
void strata_attn_heads_vl16_avx512(const struct strata_attn_query *a, int g);
void strata_attn_rows_vl8(const struct strata_attn_query *a, int n);
void strata_attn_rows_vl16(const struct strata_attn_query *a, int n);
void strata_attn_rows_vl8_avx2(const struct strata_attn_query *a, int n);
void strata_attn_rows_vl16_avx512(const struct strata_attn_query *a, int n);
// The rows' softmax (masking, maximum, attn.h's order), exposed for its test.
void strata_attn_rows_softmax_vl16(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink);
void strata_attn_rows_softmax_vl16_avx512(float *s, int p0, int n_kv, const uint8_t *vis, const float *sink);

#endif
