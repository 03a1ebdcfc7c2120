// AMX level of the GEMM (Sapphire Rapids and later: AMX-TILE + AMX-INT8): the tile kernel on
// tile registers; unpacking and the canonical dots are the AVX-512 level's.
//
// Per sub-block of every block: tmm1 = 16 weight rows x sb values (the records, one row per tile
// row), tmm2 = the activation tile's sb / 4 steps (16 tokens x 4 bytes per row, the layout the
// VNNI kernel uses, here without the + 128), tmm0 = tmm1 . tmm2: C[row][token] is the exact
// sub-block sum sum_i w[i] a[i] (TDPBUSD for Q4_K/Q5_K, whose values are unsigned; TDPBSSD for
// the signed ones). C is stored and every row times its integer scale is added to the block's
// S1 in zmm; the block's float part is the VNNI kernel's, so the results are the same bits.
//
// The tile data state needs the kernel's permission (arch_prctl ARCH_REQ_XCOMP_PERM, once per
// process); strata_gemm_level_runs asks for it and reports AMX unavailable when refused.
#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

// Palette 1: tile 0 C (16 x 16 int32), tile 1 A (16 rows x k bytes), tile 2 B (k / 4 rows x 64).
struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

static void configure(uint32_t k)
{
    struct tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = 16, c.colsb[0] = 64;
    c.rows[1] = 16, c.colsb[1] = (uint16_t)k;
    c.rows[2] = (uint8_t)(k / 4), c.colsb[2] = 64;
    _tile_loadconfig(&c);
}

// Up to 16 records (recs, stride L->bytes; rows past n_rows are read but not stored) times one
// tile: out[r * 16 + t].
static inline __attribute__((always_inline)) void panel_body(const struct gemm_rec_layout *L,
                                                              const struct gemm_tile_layout *T, const uint8_t *recs,
                                                              int n_rows, const uint8_t *tile, float *out,
                                                              const uint32_t qb, const uint32_t sb, const bool mins,
                                                              const bool unit, const bool wu8)
{
    const uint32_t nb = L->nb, nsub = qb / sb, steps = sb / 4;
    int32_t c[16][16] __attribute__((aligned(64)));
    __m512 acc[16];
    for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
    const float *da = tile_da(T, tile);
    const int32_t *asum = tile_asum(T, tile);
    for (uint32_t b = 0; b < nb; b++) {
        __m512i s1[16];
        for (int r = 0; r < 16; r++) s1[r] = _mm512_setzero_si512();
        for (uint32_t j = 0; j < nsub; j++) {
            _tile_zero(0);
            _tile_loadd(1, recs + (size_t)b * qb + j * sb, (long)L->bytes);
            _tile_loadd(2, tile + ((size_t)b * (qb / 4) + j * steps) * 64, 64);
            if (wu8) _tile_dpbusd(0, 1, 2);
            else _tile_dpbssd(0, 1, 2);
            _tile_stored(0, c, 64);
            for (int r = 0; r < 16; r++) {
                const __m512i part = _mm512_load_si512(c[r]);
                const int rr = r < n_rows ? r : n_rows - 1;
                s1[r] = _mm512_add_epi32(s1[r], unit ? part : _mm512_mullo_epi32(part, gemm_bcast4(rec_sc(L, recs + (size_t)rr * L->bytes) + (size_t)b * nsub + j)));
            }
        }
        const __m512 d = _mm512_load_ps(da + (size_t)b * 16);
        for (int r = 0; r < 16; r++) {
            const uint8_t *rec = recs + (size_t)(r < n_rows ? r : n_rows - 1) * L->bytes;
            const __m512 dw = _mm512_castsi512_ps(gemm_bcast4(rec_dw(L, rec) + b));
            acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(dw, d), _mm512_cvtepi32_ps(s1[r]), acc[r]);
            if (mins) {
                const int32_t *mp = rec_mp(L, rec) + (size_t)b * (nsub / 2);
                __m512i s2 = _mm512_setzero_si512();
                for (uint32_t k = 0; k < nsub / 2; k++)
                    s2 = _mm512_dpwssd_epi32(s2, _mm512_load_si512(asum + ((size_t)b * (nsub / 2) + k) * 16), gemm_bcast4(mp + k));
                const __m512 ndmin = _mm512_castsi512_ps(gemm_bcast4(rec_ndmin(L, rec) + b));
                acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(ndmin, d), _mm512_cvtepi32_ps(s2), acc[r]);
            }
        }
    }
    for (int r = 0; r < n_rows; r++) _mm512_store_ps(out + (size_t)r * 16, acc[r]);
}

static void panel_amx(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                      const uint8_t *recs, int n_rows, const uint8_t *const *tiles, int n_tiles, float *out)
{
    (void)n_tiles;  // one tile per call (max_tiles = 1)
    configure(f->sb);
    switch (f->wtype) {
    case STRATA_TYPE_Q8_0:
    case STRATA_TYPE_MXFP4:
    case STRATA_TYPE_Q4_0: panel_body(L, T, recs, n_rows, tiles[0], out, QK8_0, QK8_0, false, true, false); break;
    case STRATA_TYPE_Q4_K:
    case STRATA_TYPE_Q5_K: panel_body(L, T, recs, n_rows, tiles[0], out, QK_K, 32, true, false, true); break;
    case STRATA_TYPE_Q6_K:
    case STRATA_TYPE_IQ2_XS:
    case STRATA_TYPE_IQ1_M:
    case STRATA_TYPE_Q3_K: panel_body(L, T, recs, n_rows, tiles[0], out, QK_K, 16, false, false, false); break;
    case STRATA_TYPE_IQ2_XXS:
    case STRATA_TYPE_IQ3_XXS:
    case STRATA_TYPE_IQ4_XS: panel_body(L, T, recs, n_rows, tiles[0], out, QK_K, 32, false, false, false); break;
    case STRATA_TYPE_Q2_K: panel_body(L, T, recs, n_rows, tiles[0], out, QK_K, 16, true, false, true); break;
    default: break;
    }
    _tile_release();
}

const struct gemm_kernels gemm_kernels_amx = {
    .lanes = 16,
    .plus128 = false,  // TDPBSSD takes both operands signed
    .rows_per_panel = 16,
    .max_tiles = 1,
    .min_tokens = 9,
    .unpack = gemm_unpack_avx512,
    .panel = panel_amx,
    .thread_prepare = amx_prepare,
};
