// AMX level of the GEMM (Sapphire Rapids and later: AMX-TILE, AMX-INT8, AMX-BF16 and AVX-512
// VBMI): the tile kernel on tile registers; the canonical dots, and the unpacking of the types
// without split records, are the AVX-512 level's.
//
// Q4_K and Q5_K (split records, gemm_impl.h). A panel's 16 records and two activation tiles:
// tmm4 / tmm5 = the 16 rows' w and w2 over 64 values, tmm6 / tmm7 = the two tiles' 16 tokens over
// the same 64 (4 bytes a token a row, the VNNI kernel's layout without the + 128), and four C
// tiles, w . a and w2 . a per activation tile, accumulate the block's 4 steps (TDPBUSD: the
// values are unsigned). Per block the C tiles are stored once and S1 = C + 8 C2 is exact, and the
// mins' sums come from one TDPBF16PS a tile, exact (gemm_impl.h); the block's float part (dw * da,
// dmin * da) is the VNNI kernel's, the same bits. The mins on the tiles instead of four vpdpwssd a
// row (one thread, test_gemm --bench T E Q4_K, medians of 7 interleaved runs): 128 tokens x 16
// experts 352 -> 362 GMAC/s, 32 x 64 247 -> 264, 16 x 64 171 -> 168 (noise: +-5%).
// A Q4_K job whose tokens fit one panel call (a prompt's experts: ~32 tokens each) takes the
// fused kernel instead, which unpacks the panel's rows a block at a time into a buffer that
// stays in L1 and multiplies it at once (fused_split), asking for the thread's next panel into L2
// as it goes.
//
// The other types take the AVX-512 level's unpacking and tile kernel: on the one AMX host measured
// (test_gemm --bench, one thread, 768 x 2048 experts) the AMX kernel that extracted C per
// sub-block ran Q8_0 at 58-91 GMAC/s and Q6_K at 60-81 from 16 to 64 tokens, vpdpbusd at 79-146
// and 81-143.
//
// The tile data state needs the kernel's permission (arch_prctl ARCH_REQ_XCOMP_PERM, once per
// process); strata_gemm_level_runs asks for it and reports AMX unavailable when refused. A thread
// configures its tiles once and keeps them configured.
#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/cpu/amx.h"
#include "backend/cpu/gemm_impl.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int g_perm = -1;
static pthread_once_t g_perm_once = PTHREAD_ONCE_INIT;

static void request_permission(void)
{
    g_perm = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 0 : -1;
}

static int amx_prepare(void)
{
    pthread_once(&g_perm_once, request_permission);
    return g_perm;
}

// Palette 1, the eight tiles 16 rows x 64 bytes.
struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

static __thread bool g_configured;

void strata_amx_configure(void)
{
    if (g_configured) return;
    struct tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    // gcc 12 does not see ldtilecfg read the struct: without the barrier it dropped the rows and
    // column widths as dead stores once this function was no longer static (a #GP on the
    // all-zero palette)
    __asm__ volatile("" : : "r"(&c) : "memory");
    _tile_loadconfig(&c);
    g_configured = true;
}

// ---- split records (Q4_K, Q5_K) ----------------------------------------------------------------

// g_pieces[8 p0 + p1]: 16 words p0 (a zmm's lower half, sub-block j), 16 words p1 (upper, j + 1).
#define W16(p) p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p
#define PAIR(p0, p1) {W16(p0), W16(p1)}
#define ROW8(p0) PAIR(p0, 0), PAIR(p0, 1), PAIR(p0, 2), PAIR(p0, 3), PAIR(p0, 4), PAIR(p0, 5), PAIR(p0, 6), PAIR(p0, 7)
static const uint16_t g_pieces[64][32] __attribute__((aligned(64))) = {ROW8(0), ROW8(1), ROW8(2), ROW8(3),
                                                                      ROW8(4), ROW8(5), ROW8(6), ROW8(7)};
#undef ROW8
#undef PAIR
#undef W16

// The 64 values q (0..31) of sub-blocks j (lower half) and j + 1 (upper) times their pieces p0, p1
// (0..7): one 16-bit multiply takes a word's two bytes at once, since no byte's product exceeds
// 217 (no carry into the next byte) and the upper byte's product stays within the word. A load
// and a multiply where a byte table lookup took three shuffles a piece (with the float part
// below, unpack + panel 8-10% faster on one AMX core, 2,048 values x 32 tokens).
static inline __m512i times_pieces(__m512i q, int p0, int p1)
{
    return _mm512_mullo_epi16(q, _mm512_load_si512(g_pieces[8 * p0 + p1]));
}

// Block b of a Q4_K / Q5_K row as split values into w and w2 (QK_K bytes each) and the block's
// record fields (gemm_k45_block, which prefetches `ahead` bytes past the block; mb here).
static inline __attribute__((always_inline)) void split_block(const struct gemm_rec_layout *L, const void *row,
                                                               uint32_t b, bool five, uint8_t *rec, uint8_t *w,
                                                               uint8_t *w2, long ahead)
{
    const uint8_t *qs;
    __m512i qh;
    uint8_t sc[16];  // 8 scales (0..63), 8 mins
    const __m128i sm = gemm_k45_block(L, row, b, five, rec, &qs, &qh, ahead);
    _mm_storeu_si128((__m128i *)sc, sm);
    // m is exact in bf16, the upper half of its float: copied into the lower half
    const __m256i m = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
    const __m256i upper = _mm256_set_epi8(15, 14, 15, 14, 11, 10, 11, 10, 7, 6, 7, 6, 3, 2, 3, 2,
                                          15, 14, 15, 14, 11, 10, 11, 10, 7, 6, 7, 6, 3, 2, 3, 2);
    _mm512_storeu_si512(rec + L->off_mb + (size_t)b * 64, _mm512_zextsi256_si512(_mm256_shuffle_epi8(m, upper)));
    for (int c = 0; c < 4; c++) {
        const __m512i q = k_chunk_quants(qs + 32 * c, five ? &qh : NULL, five ? q5_select(c) : _mm512_setzero_si512());
        const int s0 = sc[2 * c], s1 = sc[2 * c + 1];
        _mm512_storeu_si512(w + 64 * c, times_pieces(q, s0 & 7, s1 & 7));
        _mm512_storeu_si512(w2 + 64 * c, times_pieces(q, s0 >> 3, s1 >> 3));
    }
}

static void unpack_split(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec)
{
    const bool five = f->wtype == STRATA_TYPE_Q5_K;
    for (uint32_t b = 0; b < L->nb; b++)
        split_block(L, row, b, five, rec, rec + (size_t)b * QK_K, rec + L->off_w2 + (size_t)b * QK_K,
                    STRATA_PREFETCH_AHEAD);
}

static bool split_amx(const struct gemm_format *f)
{
    return f->wtype == STRATA_TYPE_Q4_K || f->wtype == STRATA_TYPE_Q5_K;
}

static void unpack_amx(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec)
{
    if (split_amx(f)) unpack_split(f, L, row, rec);
    else gemm_unpack_avx512(f, L, row, rec);
}

// Block b's float part for the 16 rows and G tiles (the records' block rb), from its C tiles in
// c and its mins in s2 (block_tiles), into out's tiles i0 .. i0 + G - 1 of ot a row:
// S1 = C + 8 C2, then the VNNI kernel's operations (the same bits; block 0 starts the sums from
// zero, so out needs no clearing). The rows' factors are broadcast from memory (this part took as
// long as the tile products and the two do not overlap, see panel_split).
static inline __attribute__((always_inline)) void block_floats(const struct gemm_rec_layout *L,
                                                                const struct gemm_tile_layout *T, const uint8_t *recs,
                                                                int n_rows, const uint8_t *const *tiles, float *out,
                                                                const int G, uint32_t b, uint32_t rb, int32_t (*c)[16][16],
                                                                float (*s2)[16][16], int ot, int i0)
{
    for (int i = 0; i < G; i++) {
        const __m512 d = _mm512_load_ps(tile_da(T, tiles[i]) + (size_t)b * 16);
        for (int r = 0; r < 16; r++) {
            const uint8_t *rec = recs + (size_t)(r < n_rows ? r : n_rows - 1) * L->bytes;
            const __m512i s1 = _mm512_add_epi32(_mm512_load_si512(c[2 * i][r]),
                                                _mm512_slli_epi32(_mm512_load_si512(c[2 * i + 1][r]), 3));
            float *acc = out + ((size_t)r * ot + i0 + i) * 16;
            const __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(rec_dw(L, rec)[rb]), d),
                                             _mm512_cvtepi32_ps(s1), b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(acc));
            const __m512 nd = _mm512_mul_ps(_mm512_set1_ps(rec_ndmin(L, rec)[rb]), d);
            _mm512_store_ps(acc, _mm512_fmadd_ps(nd, _mm512_load_ps(s2[i][r]), a));
        }
    }
}

// Block b's tile products for the 16 rows (row r's block values at w + r * stride, its w2 and mb
// rows likewise) and the G activation tiles: w . a into c[2i], w2 . a into c[2i + 1], and the
// mins mb . hl (gemm_impl.h, exact) into s2[i]. The mins go first, so that their result is stored
// long before block_floats reads it: on tiles 2, 3 and 7, which one tile's products leave free
// (stored with the C tiles), or stored at once for two tiles.
static inline __attribute__((always_inline)) void block_tiles(const uint8_t *w, const uint8_t *w2, const uint8_t *mb,
                                                               long stride, const struct gemm_tile_layout *T,
                                                               const uint8_t *const *tiles, const int G, uint32_t b,
                                                               int32_t (*c)[16][16], float (*s2)[16][16])
{
    _tile_zero(2);
    if (G == 1) {
        _tile_loadd(3, mb, stride);
        _tile_loadd(7, tile_hl(T, tiles[0]) + (size_t)b * 8 * 64, 64);
        _tile_dpbf16ps(2, 3, 7);
    } else {
        _tile_zero(3);
        _tile_loadd(4, mb, stride);
        _tile_loadd(6, tile_hl(T, tiles[0]) + (size_t)b * 8 * 64, 64);
        _tile_loadd(7, tile_hl(T, tiles[1]) + (size_t)b * 8 * 64, 64);
        _tile_dpbf16ps(2, 4, 6);
        _tile_dpbf16ps(3, 4, 7);
        _tile_stored(2, s2[0], 64);
        _tile_stored(3, s2[1], 64);
        _tile_zero(2);
        _tile_zero(3);
    }
    _tile_zero(0);
    _tile_zero(1);
    for (int s = 0; s < 4; s++) {
        const size_t step = ((size_t)b * (QK_K / 4) + 16 * s) * 64;
        _tile_loadd(4, w + 64 * s, stride);
        _tile_loadd(5, w2 + 64 * s, stride);
        _tile_loadd(6, tiles[0] + step, 64);
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 5, 6);
        if (G == 2) {
            _tile_loadd(7, tiles[1] + step, 64);
            _tile_dpbusd(2, 4, 7);
            _tile_dpbusd(3, 5, 7);
        }
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    if (G == 1) {
        _tile_stored(2, s2[0], 64);
    } else {
        _tile_stored(2, c[2], 64);
        _tile_stored(3, c[3], 64);
    }
}

// 16 split records times G (1 or 2) tiles, accumulated in out[(r * G + i) * 16 + t] (all 16
// rows: those past n_rows repeat the last record and are not scattered). The tile unit and the
// vector units did not overlap on the core measured: a block's products issued before the
// previous block's float part (each with its own C buffer) took the sum of the two, as did the
// products interleaved with unrelated vector work, so the blocks are done one after the other.
static inline __attribute__((always_inline)) void panel_split(const struct gemm_rec_layout *L,
                                                               const struct gemm_tile_layout *T, const uint8_t *recs,
                                                               int n_rows, const uint8_t *const *tiles, float *out,
                                                               const int G)
{
    int32_t c[4][16][16] __attribute__((aligned(64)));
    float s2[2][16][16] __attribute__((aligned(64)));
    const long stride = (long)L->bytes;
    const uint8_t *w = recs, *w2 = rec_w2(L, recs), *mb = rec_mb(L, recs);
    for (uint32_t b = 0; b < L->nb; b++) {
        block_tiles(w + (size_t)b * QK_K, w2 + (size_t)b * QK_K, mb + (size_t)b * 64, stride, T, tiles, G, b, c, s2);
        block_floats(L, T, recs, n_rows, tiles, out, G, b, b, c, s2, G, 0);
    }
}

// Fused (split formats, a job of up to FUSED_TILES tiles: a prompt's experts, ~32 tokens each).
// The 16 rows come straight from their packed form, a block at a time: the rows' block b is
// unpacked into a buffer that stays in L1 (FUSED_REC bytes a row: w, w2, then the block's mb, dw
// and ndmin as a one-block record) and multiplied at once with every tile, two at a time. Unpack
// + panel write the panel's whole records out (64 KiB for 2048 values) and read them back from L2
// for each pair of tiles.
#define FUSED_REC 640
#define FUSED_TILES 4
static inline __attribute__((always_inline)) void fused_split(const struct gemm_format *f,
                                                               const struct gemm_tile_layout *T, const uint8_t *rows,
                                                               size_t row_bytes, int n_rows, uint32_t nb,
                                                               const uint8_t *const *tiles, int n_tiles, float *out,
                                                               const uint8_t *next, size_t next_bytes)
{
    uint8_t buf[16 * FUSED_REC] __attribute__((aligned(64)));
    int32_t c[4][16][16] __attribute__((aligned(64)));
    float s2[2][16][16] __attribute__((aligned(64)));
    const bool five = f->wtype == STRATA_TYPE_Q5_K;
    const size_t bb = five ? sizeof(struct block_q5_k) : sizeof(struct block_q4_k);
    const struct gemm_rec_layout M = {.n = QK_K, .nb = 1, .nsub = QK_K / 32, .off_w2 = 256, .off_mb = 512,
                                      .off_dw = 576, .off_ndmin = 580, .bytes = FUSED_REC};
    const size_t step = (next_bytes + 16 * nb - 1) / (16 * nb);  // the next rows in 16 nb pieces
    for (uint32_t b = 0; b < nb; b++) {
        // each row prefetches its next block; the last block, the first of the row 16 rows on
        // (the next panel, which the next item of some thread reads): one block ahead was 6-13%
        // faster than 2, 4 or 8, and without the next panel's rows, rows of 3 blocks (768
        // values) were slower than unpack + panel
        const long ahead = b + 1 < nb ? (long)bb : 16 * (long)row_bytes - (long)(b * bb);
        for (int r = 0; r < 16; r++) {
            const uint8_t *row = rows + (size_t)(r < n_rows ? r : n_rows - 1) * row_bytes + (size_t)b * bb;
            uint8_t *rec = buf + (size_t)r * FUSED_REC;
            split_block(&M, row, 0, five, rec, rec, rec + 256, ahead);
            if (next) gemm_prefetch_piece(next, next_bytes, step, 16 * b + (size_t)r);  // spread over the unpacking
        }
        int i = 0;
        for (; i + 2 <= n_tiles; i += 2) {
            block_tiles(buf, buf + 256, buf + 512, FUSED_REC, T, tiles + i, 2, b, c, s2);
            block_floats(&M, T, buf, 16, tiles + i, out, 2, b, 0, c, s2, n_tiles, i);
        }
        if (i < n_tiles) {
            block_tiles(buf, buf + 256, buf + 512, FUSED_REC, T, tiles + i, 1, b, c, s2);
            block_floats(&M, T, buf, 16, tiles + i, out, 1, b, 0, c, s2, n_tiles, i);
        }
    }
}

// Q4_K only. One thread, 64 experts streamed from RAM, 16 to 32 tokens (test_gemm --bench T 64):
// Q4_K's fused kernel 18-35% faster than unpack + panel on 2,048 x 768 and 768 x 2,048 experts,
// Q5_K's from 7% slower to 12% faster (level on the whole).
static bool fuses_amx(const struct gemm_format *f)
{
    return f->wtype == STRATA_TYPE_Q4_K;
}

static void fused_amx(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                      const uint8_t *rows, size_t row_bytes, int n_rows, const uint8_t *const *tiles, int n_tiles,
                      float *out, const uint8_t *next, size_t next_bytes)
{
    strata_amx_configure();
    fused_split(f, T, rows, row_bytes, n_rows, L->nb, tiles, n_tiles, out, next, next_bytes);
}

static void panel_amx(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                      const uint8_t *recs, int n_rows, const uint8_t *const *tiles, int n_tiles, float *out)
{
    if (!split_amx(f)) {
        gemm_panel_avx512(f, L, T, recs, n_rows, tiles, n_tiles, out);
        return;
    }
    strata_amx_configure();
    if (n_tiles == 2) panel_split(L, T, recs, n_rows, tiles, out, 2);
    else panel_split(L, T, recs, n_rows, tiles, out, 1);
}

const struct gemm_kernels gemm_kernels_amx = {
    .lanes = 16,
    .plus128 = true,  // the AVX-512 kernel's (the split formats' values are unsigned: no + 128)
    .rows_per_panel = 16,
    .max_tiles = 2,
    .min_tokens = 9,
    .min_tokens_b32 = 2,  // the AVX-512 kernel's crossover (gemm_avx512.c)
    .split = split_amx,
    .unpack = unpack_amx,
    .panel = panel_amx,
    .fuses = fuses_amx,
    .fused = fused_amx,
    .fused_tiles = FUSED_TILES,
    .scatter = gemm_scatter_avx512,
    .thread_prepare = amx_prepare,
};
