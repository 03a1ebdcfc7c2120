// The KV cache of one sequence: keys and values of every attention layer in F32, F16, BF16 or
// Q8_0, in blocks of STRATA_KV_BLOCK positions allocated as the context fills (not for the whole
// context up front), laid out for the tiled attention (fattn.h).
//
// Block of positions [b * B, (b + 1) * B), B = STRATA_KV_BLOCK, for layer l and KV head h:
//   keys    transposed in groups of 16 positions: [B / 16][dk][16] elements, so that a query
//           times 16 keys is dk fused multiply-adds of one broadcast by one vector;
//           Q8_0: [B / 16][dk / 32] of {16 f16 scales (one per key), [32][16] int8}, the key's
//           blocks of 32 elements along dk as llama.cpp quantizes them
//   values  row per position: [B][dv] elements (Q8_0: dv / 32 blocks of 34 bytes)
// Rounding to F16, BF16 and Q8_0 is the activation rounding of the kernel tables, which is what
// llama.cpp's copy into its KV cache computes.
#ifndef STRATA_BACKEND_CPU_KV_H
#define STRATA_BACKEND_CPU_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/kernels.h"
#include "backend/cpu/pool.h"
#include "quant/quant.h"

#define STRATA_KV_BLOCK 256   // positions per block (and per attention segment, fattn.h)

struct strata_kv_cache {
    uint32_t k_type, v_type;      // STRATA_TYPE_F32 / F16 / BF16 / Q8_0
    uint32_t n_layers, n_head_kv, dk, dv;
    uint32_t n_ctx;               // positions it may hold (a multiple of nothing; blocks cover it)
    uint32_t n_blocks;            // blocks allocated so far (positions [0, n_blocks * B))
    size_t k_head_bytes;          // keys of one head in one block
    size_t v_head_bytes;          // values of one head in one block
    size_t layer_bytes;           // one layer in one block: n_head_kv * (k_head_bytes + v_head_bytes)
    size_t block_bytes;           // one block: n_layers * layer_bytes
    uint8_t **blocks;             // [ceil(n_ctx / B)], NULL until allocated
    void *row_k, *row_v;          // one head's key / value rounded to its type (write scratch)
    const struct strata_kernels *kernels;  // activation rounding
};

// True if `type` can be a KV cache type (F32, F16, BF16, Q8_0).
bool strata_kv_type_ok(uint32_t type);
// "f32" / "f16" / "bf16" / "q8_0" (case-insensitive; llama.cpp's --cache-type-k names) -> type,
// or -1.
int strata_kv_type_from_name(const char *name);

// A cache for n_layers layers of n_head_kv heads of dk / dv elements, up to n_ctx positions.
// Allocates no block yet. Q8_0 needs dk (keys) / dv (values) divisible by 32. 0, STRATA_EARG
// (one log line) or STRATA_ENOMEM.
int strata_kv_create(struct strata_kv_cache *kv, uint32_t n_layers, uint32_t n_head_kv, uint32_t dk, uint32_t dv,
                     uint32_t n_ctx, uint32_t k_type, uint32_t v_type, const struct strata_kernels *kernels);
void strata_kv_free(struct strata_kv_cache *kv);
// Make positions [0, n_pos) writable: allocates (zeroed) the blocks that are missing, zeroing
// them on pool's threads (NULL: the caller's) when they are a MiB or more. 0, or STRATA_ENOMEM /
// STRATA_EARG (n_pos > n_ctx).
int strata_kv_reserve(struct strata_kv_cache *kv, uint32_t n_pos, struct strata_pool *pool);
// Write position pos of layer l: k [n_head_kv][dk], v [n_head_kv][dv] floats. The block must be
// reserved.
void strata_kv_store(struct strata_kv_cache *kv, uint32_t l, uint32_t pos, const float *k, const float *v);
// The same with the caller's scratch row_k (dk * 4 bytes) instead of the cache's: threads may
// store different positions at once.
void strata_kv_store_with(struct strata_kv_cache *kv, uint32_t l, uint32_t pos, const float *k, const float *v,
                          void *row_k);
// Bytes allocated now, and per position of context (all layers, keys and values).
size_t strata_kv_bytes(const struct strata_kv_cache *kv);
double strata_kv_bytes_per_token(const struct strata_kv_cache *kv);

// The keys / values of head h of layer l in block b (layouts above).
static inline const uint8_t *strata_kv_keys(const struct strata_kv_cache *kv, uint32_t l, uint32_t h, uint32_t b)
{
    return kv->blocks[b] + l * kv->layer_bytes + (size_t)h * (kv->k_head_bytes + kv->v_head_bytes);
}
static inline const uint8_t *strata_kv_values(const struct strata_kv_cache *kv, uint32_t l, uint32_t h, uint32_t b)
{
    return strata_kv_keys(kv, l, h, b) + kv->k_head_bytes;
}

#endif
