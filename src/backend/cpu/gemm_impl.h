// Private to the GEMM (gemm.c and its ISA files): the canonical integer form of each weight
// type, the byte layouts of unpacked weight rows ("records") and of activation tiles, and the
// per-level kernel table. The canonical arithmetic is described in gemm.h.
//
// Lanes. A kernel's vector holds 16 int32 lanes (AVX-512, AMX), one per token of a group of 16;
// every weight access is a broadcast of 4 values to all lanes. Jobs with few tokens (below the
// level's min_tokens) take the multi-token dot instead, which is faster there.
//
// Record of one weight row of n elements (nb blocks of qb, nsub = qb / sb sub-blocks each):
//   w[n]               int8 values in element order
//   w2[n]              split records only (see below), at off_w2
//   sc[nb][nsub]       int32 sub-block scales
//   corr[nb]           int32 128 * sum_j sc[j] * sum_{i in j} w[i]: what adding 128 to every
//                      activation byte adds to S1 (vpdpbusd wants an unsigned operand: the
//                      activations where w may be negative; w itself where it never is, and
//                      then corr is not used)
//   dw[nb]             float block factor
//   ndmin[nb]          float -dmin                                   (types with mins)
//   mp[nb][nsub / 2]   two int16 mins m[2k] | m[2k+1] << 16 per int32  (types with mins, not
//                      split)
//   mb[nb][32]         split records with mins: bf16 (m[j], m[j]) for j < 8, then 16 zeros (the
//                      A row of the mins' TDPBF16PS, K padded to the tiles' 64 bytes)
// Split records (the formats a level's `split` names: Q4_K and Q5_K at AMX). Every sub-block
// scale, 0..63, is 8 hi + lo with hi and lo in 0..7, and the values are stored twice as
// unsigned bytes: w[i] * lo of its sub-block in w, w[i] * hi in w2 (at most 31 * 7 = 217). Then
// S1 = sum_i w[i] a[i] + 8 sum_i w2[i] a[i], both sums over the whole block with no scale
// between sub-blocks: two products of full tile width per 64 values and one extraction per block
// instead of one narrow product and one extraction per sub-block. sc is not stored. The mins term
// sum_j m[j] asum[j] is a tile product too: with a sub-block sum asum = 128 h + l (h in -32..31,
// l in 0..127), 128 h, l and m are exact in bf16, and mb . hl = sum_j m[j] 128 h[j] + m[j] l[j]
// in fp32 has every product and partial sum an integer below 2^24: exact, the int32 sum's float.
// Activation tile of `lanes` tokens (lanes past the group's tokens are zero):
//   a[nb][qb / 4][lanes][4]    4 consecutive int8 values of the lane's token, + 128 (as uint8)
//                              where the level's kernel wants that (plus128, signed weights)
//   da[nb][lanes]              float activation factor of each block
//   asum[nb][nsub / 2][lanes]  two int16 sub-block sums of the activations per int32 (mins, not
//                              split)
//   hl[nb + 1][nsub][lanes]    split formats with mins: each sub-block sum a as bf16 (128 h, l),
//                              a = 128 h + l, l in 0..127; block nb is zero (the 16-row B tile of
//                              block b takes block b + 1's rows too, which mb's zeros multiply)
#ifndef STRATA_BACKEND_CPU_GEMM_IMPL_H
#define STRATA_BACKEND_CPU_GEMM_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels_impl.h"

#define GEMM_MAX_LANES 16
#define GEMM_CALL_TILES 4  // the most tiles one panel or fused call takes (max_tiles, fused_tiles)

struct gemm_format {
    uint32_t wtype;     // weight type
    uint32_t atype;     // activation (dot) type: Q8_0 or Q8_K
    uint32_t qb;        // elements per float factor (block)
    uint32_t sb;        // elements per integer scale (sub-block)
    bool mins;          // has the dmin * mins term
    bool unit_scale;    // every sc is 1 (Q8_0): the kernels skip the multiply
    bool wu8;           // every w is in 0..127 (Q4_K, Q5_K): an unsigned operand as it is
};

struct gemm_rec_layout {
    uint32_t n, nb, nsub;
    size_t off_w2;      // split records: the second values (0 if not split)
    size_t off_sc, off_corr, off_dw, off_ndmin, off_mp;
    size_t off_mb;      // split records with mins: the bf16 mins rows (0 if none)
    size_t bytes;       // multiple of 64
};

struct gemm_tile_layout {
    uint32_t lanes, nb;
    size_t off_da, off_asum;
    size_t off_hl;      // split formats with mins: the bf16 (128 h, l) rows (0 if none)
    size_t bytes;       // multiple of 64
};

// NULL if `wtype` has no canonical form.
const struct gemm_format *gemm_format_of(uint32_t wtype);
// split: the level's records of this format are split (gemm_kernels.split), and its tiles carry hl.
void gemm_rec_layout_init(struct gemm_rec_layout *L, const struct gemm_format *f, uint32_t n, bool split);
void gemm_tile_layout_init(struct gemm_tile_layout *T, const struct gemm_format *f, uint32_t n, uint32_t lanes,
                           bool split);

// Unpack one weight row (n elements of f->wtype) into its record.
void gemm_unpack_row(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec);
// Build the tile of n_act (1..lanes) activation rows in f->atype; plus128: store a + 128.
void gemm_build_tile(const struct gemm_format *f, const struct gemm_tile_layout *T, const void *const *act, int n_act,
                     bool plus128, uint8_t *tile);

// For each of n_rows records (recs + r * L->bytes) and each of the n_tiles tiles:
// out[(r * n_tiles + i) * lanes + l] = canonical dot of row r with the token of lane l of tile i.
typedef void (*gemm_panel_fn)(const struct gemm_format *f, const struct gemm_rec_layout *L,
                              const struct gemm_tile_layout *T, const uint8_t *recs, int n_rows,
                              const uint8_t *const *tiles, int n_tiles, float *out);

typedef void (*gemm_unpack_fn)(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row,
                               uint8_t *rec);


struct gemm_kernels {
    uint32_t lanes;         // tokens per tile
    bool plus128;           // tile bytes are a + 128 for formats whose weights may be negative
    int rows_per_panel;     // weight rows unpacked together by the driver
    int max_tiles;          // tiles one panel call takes
    int min_tokens;         // jobs with fewer tokens take the multi-token dot (faster there)
    int min_tokens_b32;     // the same for the blocks of 32 (Q8_0, MXFP4, Q4_0; 0: min_tokens),
                            // whose multi-token dot is slower than the tile kernel sooner
    // true for the formats whose records are split at this level (see above); NULL: none
    bool (*split)(const struct gemm_format *f);
    gemm_unpack_fn unpack;  // gemm_unpack_row, or the level's own (the same bytes but corr where
                            // the level's kernel does not read it)
    gemm_panel_fn panel;    // NULL: every job takes the multi-token dot
    // Optional, for the formats `fuses` names: n_rows (1..rows_per_panel) rows of packed
    // weights (row_bytes apart) times n_tiles (<= fused_tiles) tiles into out as panel() does,
    // unpacking as it goes instead of into records (for jobs of few tiles: a prompt's experts);
    // next, next_bytes: what the thread reads after this call (the next panel's rows, NULL if
    // unknown), asked for into L2 a piece a row as it unpacks, so that the next call does not
    // start on misses.
    bool (*fuses)(const struct gemm_format *f);
    int fused_tiles;        // <= GEMM_CALL_TILES
    void (*fused)(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                  const uint8_t *rows, size_t row_bytes, int n_rows, const uint8_t *const *tiles, int n_tiles,
                  float *out, const uint8_t *next, size_t next_bytes);
    // Tile i of a panel call's results to its tokens' output rows: y[l][r] = out[(r * n_tiles + i)
    // * lanes + l] for l < n_act, r < n_rows (out has rows_per_panel rows, those past n_rows
    // unwritten but allocated); NULL: a scalar loop.
    void (*scatter)(const float *out, int n_tiles, int i, float *const *y, int n_act, int n_rows);
    // prepare / release the calling thread's tile state (AMX); NULL if none. prepare returns 0
    // or a negative code.
    int (*thread_prepare)(void);
    strata_vec_dot_fn vec_dot[STRATA_TYPE_COUNT];
    strata_vec_dot_multi_fn vec_dot_multi[STRATA_TYPE_COUNT];
    // One token against GEMM_DOT_ROWS consecutive weight rows (row_bytes apart), each result
    // the bits of vec_dot on that row alone; NULL where the level has none.
    gemm_dot_rows_fn vec_dot_rows[STRATA_TYPE_COUNT];
};

// gemm_unpack_row in AVX-512 (the AVX-512 and AMX levels), and its low-bit formats (whose
// canonical form exists only there: lowbit_avx512.c, from the same block decoders as its dots).
void gemm_unpack_avx512(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec);
// The AVX-512 level's tile kernel (the AMX level's for the formats whose records are not split),
// and its scatter (16 rows x 16 tokens transposed in registers, a masked store a token).
void gemm_scatter_avx512(const float *out, int n_tiles, int i, float *const *y, int n_act, int n_rows);
void gemm_panel_avx512(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                       const uint8_t *recs, int n_rows, const uint8_t *const *tiles, int n_tiles, float *out);
void gemm_unpack_lowbit_avx512(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row,
                               uint8_t *rec);

extern const struct gemm_kernels gemm_kernels_scalar;
extern const struct gemm_kernels gemm_kernels_avx2;
extern const struct gemm_kernels gemm_kernels_avx512;
extern const struct gemm_kernels gemm_kernels_amx;

// Pointers to the typed fields of a record / tile.
static inline const int32_t *rec_sc(const struct gemm_rec_layout *L, const uint8_t *rec) { return (const int32_t *)(rec + L->off_sc); }
static inline const int32_t *rec_corr(const struct gemm_rec_layout *L, const uint8_t *rec) { return (const int32_t *)(rec + L->off_corr); }
static inline const float *rec_dw(const struct gemm_rec_layout *L, const uint8_t *rec) { return (const float *)(rec + L->off_dw); }
static inline const float *rec_ndmin(const struct gemm_rec_layout *L, const uint8_t *rec) { return (const float *)(rec + L->off_ndmin); }
static inline const int32_t *rec_mp(const struct gemm_rec_layout *L, const uint8_t *rec) { return (const int32_t *)(rec + L->off_mp); }
static inline const uint8_t *rec_w2(const struct gemm_rec_layout *L, const uint8_t *rec) { return rec + L->off_w2; }
static inline const uint8_t *rec_mb(const struct gemm_rec_layout *L, const uint8_t *rec) { return rec + L->off_mb; }
static inline const float *tile_da(const struct gemm_tile_layout *T, const uint8_t *tile) { return (const float *)(tile + T->off_da); }
static inline const int32_t *tile_asum(const struct gemm_tile_layout *T, const uint8_t *tile) { return (const int32_t *)(tile + T->off_asum); }
static inline const uint8_t *tile_hl(const struct gemm_tile_layout *T, const uint8_t *tile) { return tile + T->off_hl; }

// Piece k of `bytes` bytes at p into L2, pieces of `step` bytes (step = bytes / pieces rounded up:
// the next item's rows asked for a piece at a time while this item computes, so the requests are
// spread out rather than filling the line buffers at once).
static inline void gemm_prefetch_piece(const uint8_t *p, size_t bytes, size_t step, size_t k)
{
    const size_t off = step * k;
    if (off < bytes) strata_prefetch_l2(p + off, (int)(bytes - off < step ? bytes - off : step));
}

#ifdef __AVX2__
#include <immintrin.h>
#include <string.h>

#include "quant/iq_grids.h"

// The blocks of 32 against Q8_0 (Q8_0, MXFP4, Q4_0): the 32 int8 values of the block at blk in
// element order, and its float factor (f16 d, or MXFP4's 2^(e - 128)). `type` is a constant
// after inlining. Nibble formats: element j < 16 the low nibble of qs[j], j >= 16 the high one.
static inline __attribute__((always_inline)) __m256i gemm_b32_values(const uint8_t *blk, uint32_t type)
{
    if (type == STRATA_TYPE_Q8_0) return _mm256_loadu_si256((const __m256i *)((const struct block_q8_0 *)blk)->qs);
    const __m128i b = _mm_loadu_si128((const __m128i *)(type == STRATA_TYPE_MXFP4 ? ((const struct block_mxfp4 *)blk)->qs
                                                                                  : ((const struct block_q4_0 *)blk)->qs));
    const __m256i q = _mm256_and_si256(_mm256_setr_m128i(b, _mm_srli_epi16(b, 4)), _mm256_set1_epi8(15));
    if (type == STRATA_TYPE_MXFP4)
        return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)strata_kvalues_mxfp4)), q);
    return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
}

static inline __attribute__((always_inline)) float gemm_b32_factor(const uint8_t *blk, uint32_t type)
{
    if (type == STRATA_TYPE_MXFP4) return strata_e8m0_half(blk[0]);
    uint16_t d;
    memcpy(&d, blk, 2);  // Q8_0 and Q4_0 start with their f16 d
    return _cvtsh_ss(d);
}

static inline __attribute__((always_inline)) size_t gemm_b32_bytes(uint32_t type)
{
    return type == STRATA_TYPE_MXFP4 ? sizeof(struct block_mxfp4)
           : type == STRATA_TYPE_Q4_0 ? sizeof(struct block_q4_0) : sizeof(struct block_q8_0);
}

// vec_dot_T and vec_dot_multi_T (T: q8_0, mxfp4, q4_0) from the including file's always-inline
// dot_b32(n, s, w, act, nt, type), up to max_nt activation rows per call of it.
#define GEMM_B32_DOT(name, TYPE)                                                                   \
    static inline __attribute__((always_inline)) void dot_##name(int64_t n, float *s, const void *w, \
                                                                 const void *const *a, int nt)     \
    {                                                                                              \
        dot_b32(n, s, w, a, nt, TYPE);                                                             \
    }
#define GEMM_B32_DOTS(max_nt)                                                                      \
    GEMM_B32_DOT(q8_0, STRATA_TYPE_Q8_0)                                                           \
    GEMM_B32_DOT(mxfp4, STRATA_TYPE_MXFP4)                                                         \
    GEMM_B32_DOT(q4_0, STRATA_TYPE_Q4_0)                                                           \
    STRATA_DOT_KERNELS(q8_0, dot_q8_0, max_nt)                                                     \
    STRATA_DOT_KERNELS(mxfp4, dot_mxfp4, max_nt)                                                   \
    STRATA_DOT_KERNELS(q4_0, dot_q4_0, max_nt)
#endif

#ifdef __AVX512F__
#include <immintrin.h>
#include <string.h>

// Block b of a Q4_K / Q5_K row for the unpacking: writes the record's dw and ndmin of the block
// (the caller writes its mins, mp or mb), and gives its quants, its high bits (Q5_K; zero for
// Q4_K, where `five` is false) and its scales and mins (strata_k_scales_sse: bytes 0..7 the
// scales, 8..15 the mins). Prefetches a block's bytes `ahead` bytes past it
// (STRATA_PREFETCH_AHEAD where rows are read one after the other).
static inline __attribute__((always_inline)) __m128i gemm_k45_block(const struct gemm_rec_layout *L, const void *row,
                                                                     uint32_t b, bool five, uint8_t *rec,
                                                                     const uint8_t **qs, __m512i *qh, long ahead)
{
    const size_t bb = five ? sizeof(struct block_q5_k) : sizeof(struct block_q4_k);
    const uint8_t *blk = (const uint8_t *)row + b * bb;
    strata_prefetch_bytes(blk + ahead, (int)bb);
    const struct block_q4_k *head = (const struct block_q4_k *)blk;
    *qs = five ? ((const struct block_q5_k *)blk)->qs : head->qs;
    *qh = five ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)((const struct block_q5_k *)blk)->qh))
               : _mm512_setzero_si512();
    const __m128i sm = strata_k_scales_sse(head->scales);
    ((float *)(rec + L->off_dw))[b] = _cvtsh_ss(head->d);
    ((float *)(rec + L->off_ndmin))[b] = -_cvtsh_ss(head->dmin);
    return sm;
}

// The 4 bytes at p broadcast to every int32 lane (the tile kernels' weight and scale operand).
static inline __attribute__((always_inline)) __m512i gemm_bcast4(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}
#endif

#endif
