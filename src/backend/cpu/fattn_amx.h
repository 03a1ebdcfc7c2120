// The attention's scores and weighted values on AMX bf16 tiles (fattn_amx.c), for an F16 cache.
#ifndef STRATA_BACKEND_CPU_FATTN_AMX_H
#define STRATA_BACKEND_CPU_FATTN_AMX_H

#include <stddef.h>
#include <stdint.h>

// rows (1..64) query rows of dk (a multiple of 32) floats, rounded to F16, as bf16 hi and lo
// [ceil(rows / 16) * 16][dk] (the rows past `rows` zero).
void fattn_amx_split_queries(const float *q, int rows, uint32_t dk, uint16_t *qh, uint16_t *ql);
// The keys of `groups` groups of 16 positions of one KV head's segment in an F16 cache (kv.h's
// layout: [groups][dk][16]) as bf16 hi and lo in the tile unit's pair layout
// [dk / 2][STRATA_KV_BLOCK][2] (a fixed stride: the rows of a unit's tiles see different key counts).
void fattn_amx_keys_f16(const uint8_t *keys, int groups, uint32_t dk, uint16_t *kh, uint16_t *kl);
// s[r * s_stride + j] = (q_r . k_j) * scale for r < rows, j < 16 * groups (fattn_kernels.scores's
// contract, from the split queries and keys). s must hold ceil(rows / 16) * 16 rows.
void fattn_amx_scores(const uint16_t *qh, const uint16_t *ql, int rows, const uint16_t *kh, const uint16_t *kl,
                      int groups, uint32_t dk, float scale, float *s, size_t s_stride);

// The softmax weights of rows (1..64) rows (p[r * p_stride + j], j < nk) as bf16 hi and lo
// [ceil(rows / 16) * 16][STRATA_KV_BLOCK] (16 of their bits; zero past nk to a multiple of 32 and
// in the rows past `rows`).
void fattn_amx_split_weights(const float *p, size_t p_stride, int rows, int nk, uint16_t *ph, uint16_t *pl);
// The values of positions [0, nk rounded up to 32) of one KV head's segment in an F16 cache
// ([positions][dv], dv a multiple of 16) as bf16 hi and lo in pair layout [nk / 2][dv][2].
void fattn_amx_values_f16(const uint8_t *vals, int nk, uint32_t dv, uint16_t *vh, uint16_t *vl);
// o[r * dv + e] = sum_{j < nk} p[r][j] v[j][e] (fattn_kernels.pv's contract) from the split
// weights and values; o must hold ceil(rows / 16) * 16 rows.
void fattn_amx_pv(const uint16_t *ph, const uint16_t *pl, int rows, int nk, const uint16_t *vh, const uint16_t *vl,
                  uint32_t dv, float *o);

#endif
