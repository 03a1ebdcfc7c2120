// Integer GEMM for prompt processing: one weight matrix times many activation rows, for the
// weight types that have a canonical integer form (Q8_0, MXFP4, Q4_0, the K-quants, and at
// AVX-512 Q2_K, Q3_K and some IQ formats).
//
// The canonical form. A weight row is a sequence of blocks (32 elements for Q8_0, MXFP4 and
// Q4_0, 256 for the K-quants); each block has a float factor dw, integer sub-block scales sc[j]
// (sub-blocks of 32 or 16 elements) and int8 values w; Q4_K/Q5_K also have a float factor dmin
// and integer mins m[j]. The activation row is in the weight type's dot format (Q8_0 or Q8_K
// blocks: int8 a and a float factor da per block). (MXFP4 and Q4_0 have Q8_0's form: one
// sub-block of scale 1, w the table value kvalues_mxfp4[q] (twice E2M1) or q - 8, dw 2^(e - 128)
// or the f16 d. The low-bit formats decompose likewise: their grid or table values with signs as
// w, their quarter or group scales as sc, the block's float factor (with its constant, e.g.
// 0.125) as dw; Q3_K's offset is inside w, Q2_K's minimum is the mins term.)
// Every result, for every ISA and every number of tokens, is
//
//   acc = 0
//   for each block b, in order:
//       S1 = sum_j sc[j] * sum_{i in sub-block j} w[i] * a[i]            (exact int32)
//       acc = fmaf(dw * da, (float)S1, acc)
//       [mins] S2 = sum_j m[j] * sum_{i in sub-block j} a[i]               (exact int32)
//       [mins] acc = fmaf(-dmin * da, (float)S2, acc)
//   result = acc
//
// The integer sums are exact in any order, and the float operations of one (row, token) pair
// are the same sequence whatever the ISA, the tile shape or the number of tokens, so a token's
// result is bit-identical between the one-token dot (decode), the multi-token dot, this GEMM
// with its tokens in lanes (AVX2, AVX-512 VNNI) and AMX tiles, and the scalar reference: a
// prompt evaluated in chunks of any size gives the same logits as token by token.
//
// How it differs from the kernels in src/quant (quant.h's vec_dot): those fold each block's
// integer products into 8 or 16 lanes, convert and accumulate each lane in float and sum the
// lanes at the end (the K-quants' min term in its own lane accumulator); here a block's integer
// sum is reduced to one int32 first and the blocks are accumulated in one float. Both are
// within float rounding of the exact dot (tests/test_gemm.c bounds both against the scalar
// reference, which accumulates in double).
#ifndef STRATA_BACKEND_CPU_GEMM_H
#define STRATA_BACKEND_CPU_GEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/ops.h"
#include "backend/cpu/pool.h"
#include "backend/cpu/kernels.h"
#include "quant/quant.h"

// Kernel levels of the GEMM: the ISA levels of quant.h plus AMX tiles (AVX-512 + AMX-INT8 and
// AMX-BF16, with the tile state granted by the kernel).
enum strata_gemm_level {
    STRATA_GEMM_SCALAR,
    STRATA_GEMM_AVX2,
    STRATA_GEMM_AVX512,
    STRATA_GEMM_AMX,
    STRATA_GEMM_LEVEL_COUNT
};

// Best level this CPU runs at ISA `isa` or below (AMX only with isa == AVX512, and only where
// STRATA_AMX is not "0").
enum strata_gemm_level strata_gemm_level_for(enum strata_isa isa);
// True if `wtype` has a canonical integer form at `level` (the GEMM and the canonical dots).
bool strata_gemm_supports(enum strata_gemm_level level, uint32_t wtype);
const char *strata_gemm_level_name(enum strata_gemm_level level);
// False if this CPU cannot run `level`.
bool strata_gemm_level_runs(enum strata_gemm_level level);

// The canonical one-token dot of `wtype` at `level` (AMX uses the AVX-512 one), and the
// multi-token one (up to STRATA_DOT_TOKENS rows; each result equal to the one-token dot).
// NULL if unsupported.
strata_vec_dot_fn strata_gemm_vec_dot(enum strata_gemm_level level, uint32_t wtype);
strata_vec_dot_multi_fn strata_gemm_vec_dot_multi(enum strata_gemm_level level, uint32_t wtype);
// One token against GEMM_DOT_ROWS consecutive rows (row_bytes apart) of `wtype` at `level`, each
// result the bits of strata_gemm_vec_dot on that row (decode's products: the rows' float chains
// overlap and the activation blocks are loaded once for all of them); NULL where the level has
// none (then the one-token dot row by row).
#define GEMM_DOT_ROWS 4
typedef void (*gemm_dot_rows_fn)(int64_t n, float *s, const void *w, size_t row_bytes, const void *a);
gemm_dot_rows_fn strata_gemm_vec_dot_rows(enum strata_gemm_level level, uint32_t wtype);

// Scratch of the GEMM: per-thread unpacked weight panels and the activation tiles of one call.
// Grown on demand (the first prompt chunk), reused afterwards.
struct strata_gemm;
int strata_gemm_create(struct strata_gemm **out, int n_threads, enum strata_gemm_level level);
void strata_gemm_free(struct strata_gemm *g);
enum strata_gemm_level strata_gemm_level(const struct strata_gemm *g);
// Bytes of scratch it holds now (reported in the statistics).
size_t strata_gemm_scratch_bytes(const struct strata_gemm *g);

// Run every job (each with a supported weight type and xq in its dot format) on the pool: the
// activation rows of each job are rearranged into tiles of 16 tokens once (jobs with the same
// rows share them), then every thread takes panels of 16 weight rows, unpacks them once and
// multiplies them with every tile (AVX-512 VNNI: vpdpbusd, 16 tokens per zmm; AMX: TDPBUSD /
// TDPBSSD). Jobs with fewer tokens than the level's threshold (9 at AVX-512, where the two are
// as fast), and every job at the AVX2 and scalar levels but the scalar level's test path, take
// the canonical multi-token dot; consecutive such jobs on the same matrix (the output head of
// several sequences) pass over its rows once for all their tokens. Results are bit-identical to
// strata_gemm_vec_dot on each (row, token).
// At most STRATA_MM_MAX_JOBS jobs. 0, or STRATA_ENOMEM when the scratch cannot grow.
int strata_gemm_run(struct strata_gemm *g, struct strata_pool *pool, const struct strata_mm_job *jobs,
                    int n_jobs);

#endif
