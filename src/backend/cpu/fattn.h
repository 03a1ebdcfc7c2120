// Attention over a typed KV cache (kv.h), tiled in the manner of flash attention: no score
// matrix over the whole context, the KV cache read once per group of queries that share a KV
// head, and for long contexts and few tokens (decode) the context split across threads.
//
// The order of operations, the same for every ISA, tile shape, thread count and chunk size (so a
// token's output never depends on which other tokens share its batch):
//   The context of a query at position p is cut into segments of STRATA_KV_BLOCK positions at
//   fixed (absolute) boundaries; segment s holds keys [s B, min((s + 1) B, p + 1)).
//   Per segment:  s_j = (sum_d q[d] k_j[d]) * scale     (fmaf over d in order, from 0)
//                 m = max_j s_j;  p_j = exp(s_j - m)     (exp: one polynomial, see fattn_impl.h)
//                 l = sum of p_j over 16 lanes (lane j mod 16, in order), then a halving tree
//                 o[e] = sum_j p_j v_j[e]                (fmaf over j in order, from 0)
//   Segments are folded in order: the first gives (M, L, O) = (m, l, o); each next one
//                 M' = max(M, m), a = exp(M - M'), c = exp(m - M'),
//                 L = fmaf(L, a, l * c), O[e] = fmaf(O[e], a, o[e] * c), M = M'
//   out[e] = O[e] * (1 / L).
// Keys and values are converted to float exactly (F16, BF16, Q8_0 scale times int8); the query
// is taken as given (the CPU backend rounds it to the key type's dot format, as llama.cpp does).
//
// AMX (fattn_amx.c; an F16 cache on a CPU with AMX-BF16, STRATA_AMX=0 turns it off): the scores
// and the weighted values on bf16 tiles, each F16 key, value and query split exactly into two
// bf16 values and the softmax weights into two (16 of their bits), four tile products a step,
// summed in the tile unit's order. That replaces the fmaf orders above for s_j and o[e] (a few
// eps of difference, test_fattn bounds it against the other levels and float64); everything
// else holds, the independence of the batch included (every row and key is computed alike in
// any tile).
//
// This is not llama.cpp's order (its non-flash path takes one softmax over the whole row, its
// flash path one key at a time), so strata's attention output differs from llama.cpp's in the
// last bits; docs/correctness.md has the measured effect on the logits.
#ifndef STRATA_BACKEND_CPU_FATTN_H
#define STRATA_BACKEND_CPU_FATTN_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/cpu/kv.h"
#include "backend/cpu/pool.h"
#include "backend/cpu/kernels.h"
#include "quant/quant.h"

// One call: the queries of n_tok tokens of one layer, token t at position pos[t] attending to
// positions 0..pos[t] of the cache (which must hold them).
struct strata_fattn {
    const struct strata_kv_cache *kv;
    uint32_t layer;
    uint32_t n_head;          // query heads; n_head / kv->n_head_kv of them share a KV head
    int n_tok;
    const int32_t *pos;       // [n_tok]
    const float *q;           // [n_tok][n_head][dk]
    float *out;               // [n_tok][n_head][dv]
    float scale;              // on the dot products (1 / sqrt(dk))
};

// Per-thread scratch (query rows, scores, segment partials, converted keys and values), sized at
// creation for a cache's head dims and group size and for n_threads threads; the split of long
// contexts keeps its partials here too (grown on demand).
struct strata_fattn_ctx;
int strata_fattn_create(struct strata_fattn_ctx **out, int n_threads, enum strata_isa isa, uint32_t dk, uint32_t dv,
                        uint32_t group);
void strata_fattn_free(struct strata_fattn_ctx *c);
size_t strata_fattn_scratch_bytes(const struct strata_fattn_ctx *c);

// True if calls on a cache of these key and value types take AMX tiles (fattn_amx.c: the scores
// where the keys are F16, the weighted values where the values are, on an AVX-512 context of a
// CPU with AMX-BF16, unless STRATA_AMX=0 at creation). Their outputs differ from the other
// levels' in the last bits (test_fattn bounds them); every other property above holds.
bool strata_fattn_amx(const struct strata_fattn_ctx *c, uint32_t k_type, uint32_t v_type);

// Run one call on the pool. 0, or STRATA_ENOMEM when the split's partials cannot grow.
int strata_fattn_run(struct strata_fattn_ctx *c, struct strata_pool *pool, const struct strata_fattn *a);

#endif
