// AMX level of the GEMM (Sapphire Rapids and later: AMX-TILE + AMX-INT8, and AVX-512 VBMI): the
// tile kernel on tile registers; the canonical dots, and the unpacking of the types without split
// records, are the AVX-512 level's.
//
// Q4_K and Q5_K (split records, gemm_impl.h). A panel's 16 records and two activation tiles:
// tmm4 / tmm5 = the 16 rows' w and w2 over 64 values, tmm6 / tmm7 = the two tiles' 16 tokens over
// the same 64 (4 bytes a token a row, the VNNI kernel's layout without the + 128), and four C
// tiles, w . a and w2 . a per activation tile, accumulate the block's 4 steps (TDPBUSD: the
// values are unsigned). Per block the C tiles are stored once and S1 = C + 8 C2 is exact; the
// block's float part (dw * da, the mins by vpdpwssd) is the VNNI kernel's, the same bits.
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

static void configure(void)
{
    if (g_configured) return;
    struct tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) c.rows[t] = 16, c.colsb[t] = 64;
    _tile_loadconfig(&c);
    g_configured = true;
}

// ---- split records (Q4_K, Q5_K) ----------------------------------------------------------------

// g_mul[p][v] = p * v for the pieces p (0..7) of a scale and the values v (0..31).
static const uint8_t g_mul[8][32] __attribute__((aligned(32))) = {
#define M(p) {0 * p, 1 * p, 2 * p, 3 * p, 4 * p, 5 * p, 6 * p, 7 * p, 8 * p, 9 * p, 10 * p, 11 * p, 12 * p, 13 * p, \
              14 * p, 15 * p, 16 * p, 17 * p, 18 * p, 19 * p, 20 * p, 21 * p, 22 * p, 23 * p, 24 * p, 25 * p,     \
              26 * p, 27 * p, 28 * p, 29 * p, 30 * p, 31 * p}
    M(0), M(1), M(2), M(3), M(4), M(5), M(6), M(7)
#undef M
};

// The 64 values q (0..31) of sub-blocks j (lower half) and j + 1 (upper) times their pieces p0, p1.
static inline __m512i times_pieces(__m512i q, int p0, int p1)
{
    const __m512i table = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)g_mul[p0])),
                                             _mm256_load_si256((const __m256i *)g_mul[p1]), 1);
    const __m512i upper = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi8(32), 1);
    return _mm512_permutexvar_epi8(_mm512_or_si512(q, upper), table);
}

static void unpack_split(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec)
{
    uint8_t *w = rec, *w2 = rec + L->off_w2;
    const bool five = f->wtype == STRATA_TYPE_Q5_K;
    const __m512i zero = _mm512_setzero_si512();
    for (uint32_t b = 0; b < L->nb; b++) {
        const uint8_t *qs;
        __m512i qh;
        uint8_t sc[16];  // 8 scales (0..63), 8 mins
        _mm_storeu_si128((__m128i *)sc, gemm_k45_block(L, row, b, five, rec, &qs, &qh));
        for (int c = 0; c < 4; c++) {
            const __m512i q = k_chunk_quants(qs + 32 * c, five ? &qh : NULL, five ? q5_select(c) : zero);
            const int s0 = sc[2 * c], s1 = sc[2 * c + 1];
            _mm512_storeu_si512(w + (size_t)b * QK_K + 64 * c, times_pieces(q, s0 & 7, s1 & 7));
            _mm512_storeu_si512(w2 + (size_t)b * QK_K + 64 * c, times_pieces(q, s0 >> 3, s1 >> 3));
        }
    }
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

// 16 split records times G (1 or 2) tiles, accumulated in out[(r * G + i) * 16 + t] (all 16
// rows: those past n_rows repeat the last record and are not scattered).
static inline __attribute__((always_inline)) void panel_split(const struct gemm_rec_layout *L,
                                                               const struct gemm_tile_layout *T, const uint8_t *recs,
                                                               int n_rows, const uint8_t *const *tiles, float *out,
                                                               const int G)
{
    int32_t c[4][16][16] __attribute__((aligned(64)));
    memset(out, 0, sizeof(float) * 16 * (size_t)G * 16);
    const long stride = (long)L->bytes;
    const uint8_t *w = recs, *w2 = rec_w2(L, recs);
    for (uint32_t b = 0; b < L->nb; b++) {
        _tile_zero(0);
        _tile_zero(1);
        if (G == 2) {
            _tile_zero(2);
            _tile_zero(3);
        }
        for (int s = 0; s < 4; s++) {
            const size_t at = (size_t)b * QK_K + 64 * s, step = ((size_t)b * (QK_K / 4) + 16 * s) * 64;
            _tile_loadd(4, w + at, stride);
            _tile_loadd(5, w2 + at, stride);
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
        if (G == 2) {
            _tile_stored(2, c[2], 64);
            _tile_stored(3, c[3], 64);
        }
        for (int i = 0; i < G; i++) {
            const __m512 d = _mm512_load_ps(tile_da(T, tiles[i]) + (size_t)b * 16);
            const int32_t *asum = tile_asum(T, tiles[i]) + (size_t)b * 4 * 16;
            for (int r = 0; r < 16; r++) {
                const uint8_t *rec = recs + (size_t)(r < n_rows ? r : n_rows - 1) * L->bytes;
                const __m512i s1 = _mm512_add_epi32(_mm512_load_si512(c[2 * i][r]), _mm512_slli_epi32(_mm512_load_si512(c[2 * i + 1][r]), 3));
                const __m512 dw = _mm512_castsi512_ps(gemm_bcast4(rec_dw(L, rec) + b));
                float *acc = out + ((size_t)r * G + i) * 16;
                __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(dw, d), _mm512_cvtepi32_ps(s1), _mm512_load_ps(acc));
                const int32_t *mp = rec_mp(L, rec) + (size_t)b * 4;
                __m512i s2 = _mm512_setzero_si512();
                for (int k = 0; k < 4; k++) s2 = _mm512_dpwssd_epi32(s2, _mm512_load_si512(asum + k * 16), gemm_bcast4(mp + k));
                const __m512 ndmin = _mm512_castsi512_ps(gemm_bcast4(rec_ndmin(L, rec) + b));
                _mm512_store_ps(acc, _mm512_fmadd_ps(_mm512_mul_ps(ndmin, d), _mm512_cvtepi32_ps(s2), a));
            }
        }
    }
}

static void panel_amx(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                      const uint8_t *recs, int n_rows, const uint8_t *const *tiles, int n_tiles, float *out)
{
    if (!split_amx(f)) {
        gemm_panel_avx512(f, L, T, recs, n_rows, tiles, n_tiles, out);
        return;
    }
    configure();
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
    .scatter = gemm_scatter_avx512,
    .thread_prepare = amx_prepare,
};
