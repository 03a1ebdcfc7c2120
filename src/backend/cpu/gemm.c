// The GEMM driver (tiles, panels, the pool), the canonical integer form of each weight type
// (unpacking, in portable C: it runs once per weight row and call, not per token), and the
// scalar level: the reference tile kernel and the canonical one-token dots. The arithmetic is
// defined in gemm.h; fmaf here is the C library's correctly rounded fused multiply-add, which
// is what the SIMD levels' vfmadd computes, so every level gives the same bits.
#include "backend/cpu/gemm.h"

#include <cpuid.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/amx.h"
#include "backend/cpu/gemm_impl.h"
#include "quant/fp16.h"
#include "quant/iq_grids.h"
#include "quant/lowbit.h"
#include "util/log.h"
#include "util/mem.h"

// ---- formats --------------------------------------------------------------------------------

static const struct gemm_format g_formats[] = {
    {STRATA_TYPE_Q8_0, STRATA_TYPE_Q8_0, QK8_0, QK8_0, false, true, false},
    // blocks of 32 against Q8_0 like Q8_0: one float factor and the int8 values of each block
    {STRATA_TYPE_MXFP4, STRATA_TYPE_Q8_0, 32, 32, false, true, false},
    {STRATA_TYPE_Q4_0, STRATA_TYPE_Q8_0, 32, 32, false, true, false},
    {STRATA_TYPE_Q4_K, STRATA_TYPE_Q8_K, QK_K, 32, true, false, true},
    {STRATA_TYPE_Q5_K, STRATA_TYPE_Q8_K, QK_K, 32, true, false, true},
    {STRATA_TYPE_Q6_K, STRATA_TYPE_Q8_K, QK_K, 16, false, false, false},
    // the low-bit formats: canonical at the AVX-512 and AMX levels only (lowbit_avx512.c)
    {STRATA_TYPE_IQ2_XXS, STRATA_TYPE_Q8_K, QK_K, 32, false, false, false},
    {STRATA_TYPE_IQ2_XS, STRATA_TYPE_Q8_K, QK_K, 16, false, false, false},
    {STRATA_TYPE_IQ3_XXS, STRATA_TYPE_Q8_K, QK_K, 32, false, false, false},
    {STRATA_TYPE_IQ1_M, STRATA_TYPE_Q8_K, QK_K, 16, false, false, false},
    {STRATA_TYPE_IQ4_XS, STRATA_TYPE_Q8_K, QK_K, 32, false, false, false},
    {STRATA_TYPE_Q3_K, STRATA_TYPE_Q8_K, QK_K, 16, false, false, false},
    {STRATA_TYPE_Q2_K, STRATA_TYPE_Q8_K, QK_K, 16, true, false, true},
};

const struct gemm_format *gemm_format_of(uint32_t wtype)
{
    for (size_t i = 0; i < sizeof g_formats / sizeof g_formats[0]; i++)
        if (g_formats[i].wtype == wtype) return &g_formats[i];
    return NULL;
}

bool strata_gemm_supports(enum strata_gemm_level level, uint32_t wtype)
{
    return gemm_format_of(wtype) != NULL && strata_gemm_vec_dot(level, wtype) != NULL;
}

static size_t round64(size_t x) { return (x + 63) & ~(size_t)63; }

void gemm_rec_layout_init(struct gemm_rec_layout *L, const struct gemm_format *f, uint32_t n, bool split)
{
    L->n = n;
    L->nb = n / f->qb;
    L->nsub = f->qb / f->sb;
    size_t off = round64(n);
    L->off_w2 = split ? off : 0;
    off += split ? round64(n) : 0;
    L->off_mb = split && f->mins ? off : 0;
    off += split && f->mins ? (size_t)L->nb * 64 : 0;
    L->off_sc = off, off += (size_t)L->nb * L->nsub * 4;
    L->off_corr = off, off += (size_t)L->nb * 4;
    L->off_dw = off, off += (size_t)L->nb * 4;
    L->off_ndmin = off, off += f->mins ? (size_t)L->nb * 4 : 0;
    L->off_mp = off, off += f->mins && !split ? (size_t)L->nb * (L->nsub / 2) * 4 : 0;
    L->bytes = round64(off);
}

void gemm_tile_layout_init(struct gemm_tile_layout *T, const struct gemm_format *f, uint32_t n, uint32_t lanes,
                           bool split)
{
    T->lanes = lanes;
    T->nb = n / f->qb;
    const size_t nsub = f->qb / f->sb;
    size_t off = (size_t)n * lanes;
    T->off_da = off, off += (size_t)T->nb * lanes * 4;
    T->off_asum = off, off += f->mins && !split ? (size_t)T->nb * (nsub / 2) * lanes * 4 : 0;
    T->off_hl = split && f->mins ? off : 0;
    off += split && f->mins ? (T->nb + 1) * nsub * lanes * 4 : 0;
    T->bytes = round64(off);
}

// One weight block in canonical form: qb values, nsub scales, the factors, the mins.
struct canon_block {
    int8_t w[QK_K];
    int32_t sc[QK_K / 16];
    int32_t m[QK_K / 16];
    float dw, ndmin;
};

static void canon_block_of(const struct gemm_format *f, const uint8_t *blk, struct canon_block *c)
{
    switch (f->wtype) {
    case STRATA_TYPE_Q8_0: {
        const struct block_q8_0 *x = (const struct block_q8_0 *)blk;
        memcpy(c->w, x->qs, QK8_0);
        c->sc[0] = 1;
        c->dw = strata_fp16_to_fp32(x->d);
        c->ndmin = 0.0f;
        break;
    }
    case STRATA_TYPE_MXFP4:
    case STRATA_TYPE_Q4_0: {
        // element j < 16 the low nibble of qs[j], j >= 16 the high nibble of qs[j - 16] (lowbit.h);
        // MXFP4: the table value (twice E2M1) and 2^(e - 128), Q4_0: q - 8 and d
        const bool mx = f->wtype == STRATA_TYPE_MXFP4;
        const uint8_t *qs = mx ? ((const struct block_mxfp4 *)blk)->qs : ((const struct block_q4_0 *)blk)->qs;
        for (int i = 0; i < 32; i++) {
            const int q = (qs[i % 16] >> (4 * (i / 16))) & 0xf;
            c->w[i] = (int8_t)(mx ? strata_kvalues_mxfp4[q] : q - 8);
        }
        c->sc[0] = 1;
        c->dw = mx ? strata_e8m0_half(((const struct block_mxfp4 *)blk)->e) : strata_fp16_to_fp32(((const struct block_q4_0 *)blk)->d);
        c->ndmin = 0.0f;
        break;
    }
    case STRATA_TYPE_Q4_K:
    case STRATA_TYPE_Q5_K: {
        // Q4_K and Q5_K share d, dmin and the scales (blocks.h)
        const struct block_q4_k *h = (const struct block_q4_k *)blk;
        const bool five = f->wtype == STRATA_TYPE_Q5_K;
        const uint8_t *qs = five ? ((const struct block_q5_k *)blk)->qs : h->qs;
        const uint8_t *qh = five ? ((const struct block_q5_k *)blk)->qh : NULL;
        for (int i = 0; i < QK_K; i++) {
            int q = (qs[32 * (i / 64) + i % 32] >> (4 * ((i / 32) & 1))) & 0xf;
            if (qh) q |= ((qh[i % 32] >> (i / 32)) & 1) << 4;
            c->w[i] = (int8_t)q;
        }
        uint64_t scales, mins;
        strata_k_scales(h->scales, &scales, &mins);
        for (int j = 0; j < 8; j++) {
            c->sc[j] = (uint8_t)(scales >> (8 * j));
            c->m[j] = (uint8_t)(mins >> (8 * j));
        }
        c->dw = strata_fp16_to_fp32(h->d);
        c->ndmin = -strata_fp16_to_fp32(h->dmin);
        break;
    }
    case STRATA_TYPE_Q6_K: {
        const struct block_q6_k *x = (const struct block_q6_k *)blk;
        for (int i = 0; i < QK_K; i++) {
            int half = i / 128, l = i % 32, quarter = (i % 128) / 32;
            const uint8_t *ql = x->ql + 64 * half, *qh = x->qh + 32 * half;
            int lo = (ql[l + 32 * (quarter & 1)] >> (4 * (quarter >> 1))) & 0xf;
            int hi = (qh[l] >> (2 * quarter)) & 3;
            c->w[i] = (int8_t)((lo | hi << 4) - 32);
        }
        for (int j = 0; j < 16; j++) c->sc[j] = x->scales[j];
        c->dw = strata_fp16_to_fp32(x->d);
        c->ndmin = 0.0f;
        break;
    }
    default:
        STRATA_ASSERT(!"gemm: type without a canonical form");
    }
}

static size_t block_bytes(const struct gemm_format *f)
{
    return strata_type_traits(f->wtype)->type_size;
}

void gemm_unpack_row(const struct gemm_format *f, const struct gemm_rec_layout *L, const void *row, uint8_t *rec)
{
    const size_t bb = block_bytes(f);
    int8_t *w = (int8_t *)rec;
    int32_t *sc = (int32_t *)(rec + L->off_sc), *corr = (int32_t *)(rec + L->off_corr);
    float *dw = (float *)(rec + L->off_dw), *ndmin = (float *)(rec + L->off_ndmin);
    int32_t *mp = (int32_t *)(rec + L->off_mp);
    struct canon_block c;
    for (uint32_t b = 0; b < L->nb; b++) {
        canon_block_of(f, (const uint8_t *)row + b * bb, &c);
        memcpy(w + (size_t)b * f->qb, c.w, f->qb);
        int32_t cr = 0;
        for (uint32_t j = 0; j < L->nsub; j++) {
            int32_t wsum = 0;
            for (uint32_t i = 0; i < f->sb; i++) wsum += c.w[j * f->sb + i];
            sc[b * L->nsub + j] = c.sc[j];
            cr += c.sc[j] * wsum;
        }
        corr[b] = 128 * cr;
        dw[b] = c.dw;
        if (f->mins) {
            ndmin[b] = c.ndmin;
            for (uint32_t k = 0; k < L->nsub / 2; k++)
                mp[b * (L->nsub / 2) + k] = (int32_t)((uint32_t)(uint16_t)c.m[2 * k] | (uint32_t)c.m[2 * k + 1] << 16);
        }
    }
}

// The activation block b of a row in the format's dot type: values, factor, sub-block sums.
static const int8_t *act_block(const struct gemm_format *f, const void *act, uint32_t b, float *da)
{
    if (f->atype == STRATA_TYPE_Q8_K) {
        const struct block_q8_k *y = (const struct block_q8_k *)act + b;
        *da = y->d;
        return y->qs;
    }
    const struct block_q8_0 *y = (const struct block_q8_0 *)act + b;
    *da = strata_fp16_to_fp32(y->d);
    return y->qs;
}

// Sum of the activations of sub-block j of block b (Q8_K: from its bsums, as every kernel).
static int32_t act_sub_sum(const struct gemm_format *f, const void *act, uint32_t b, uint32_t j)
{
    if (f->atype == STRATA_TYPE_Q8_K) {
        const struct block_q8_k *y = (const struct block_q8_k *)act + b;
        int32_t s = 0;
        for (uint32_t g = j * f->sb / 16; g < (j + 1) * f->sb / 16; g++) s += y->bsums[g];
        return s;
    }
    const struct block_q8_0 *y = (const struct block_q8_0 *)act + b;
    int32_t s = 0;
    for (uint32_t i = j * f->sb; i < (j + 1) * f->sb; i++) s += y->qs[i];
    return s;
}

void gemm_build_tile(const struct gemm_format *f, const struct gemm_tile_layout *T, const void *const *act, int n_act,
                     bool plus128, uint8_t *tile)
{
    const uint32_t lanes = T->lanes, nsub = f->qb / f->sb;
    memset(tile, 0, T->bytes);
    float *da = (float *)(tile + T->off_da);
    int32_t *asum = (int32_t *)(tile + T->off_asum);
    for (uint32_t l = 0; l < lanes && (int)l < n_act; l++) {
        const void *row = act[l];
        for (uint32_t b = 0; b < T->nb; b++) {
            float d;
            const int8_t *a = act_block(f, row, b, &d);
            uint8_t *dst = tile + (size_t)b * f->qb * lanes + (size_t)l * 4;
            for (uint32_t k = 0; k < f->qb / 4; k++)
                for (int i = 0; i < 4; i++)
                    dst[(size_t)k * lanes * 4 + i] = (uint8_t)a[4 * k + i] ^ (plus128 ? 0x80 : 0);
            da[b * lanes + l] = d;
            for (uint32_t k = 0; T->off_hl && k < nsub; k++) {
                const int32_t s = act_sub_sum(f, row, b, k), lo = s & 127;
                uint16_t *hl = (uint16_t *)(tile + T->off_hl) + ((b * nsub + k) * lanes + l) * 2;
                hl[0] = strata_fp32_to_bf16((float)(s - lo));
                hl[1] = strata_fp32_to_bf16((float)lo);
            }
            if (f->mins && !T->off_hl)
                for (uint32_t k = 0; k < nsub / 2; k++) {
                    const uint32_t lo = (uint16_t)act_sub_sum(f, row, b, 2 * k);
                    const uint32_t hi = (uint16_t)act_sub_sum(f, row, b, 2 * k + 1);
                    asum[(b * (nsub / 2) + k) * lanes + l] = (int32_t)(lo | hi << 16);
                }
        }
    }
}

// ---- scalar level -----------------------------------------------------------------------------

static void panel_scalar(const struct gemm_format *f, const struct gemm_rec_layout *L, const struct gemm_tile_layout *T,
                         const uint8_t *recs, int n_rows, const uint8_t *const *tiles, int n_tiles, float *out)
{
    const uint32_t lanes = T->lanes, nsub = L->nsub;
    for (int r = 0; r < n_rows; r++) {
        const uint8_t *rec = recs + (size_t)r * L->bytes;
        const int8_t *w = (const int8_t *)rec;
        const int32_t *sc = rec_sc(L, rec), *mp = rec_mp(L, rec);
        const float *dw = rec_dw(L, rec), *ndmin = rec_ndmin(L, rec);
        for (int ti = 0; ti < n_tiles; ti++) {
            const float *da = tile_da(T, tiles[ti]);
            const int32_t *asum = tile_asum(T, tiles[ti]);
            for (uint32_t l = 0; l < lanes; l++) {
                float acc = 0.0f;
                for (uint32_t b = 0; b < L->nb; b++) {
                    const int8_t *a = (const int8_t *)tiles[ti] + (size_t)b * f->qb * lanes + (size_t)l * 4;
                    int32_t s1 = 0;
                    for (uint32_t j = 0; j < nsub; j++) {
                        int32_t part = 0;
                        for (uint32_t i = j * f->sb; i < (j + 1) * f->sb; i++)
                            part += w[(size_t)b * f->qb + i] * a[(size_t)(i / 4) * lanes * 4 + i % 4];
                        s1 += part * sc[b * nsub + j];
                    }
                    const float d = da[b * lanes + l];
                    acc = fmaf(dw[b] * d, (float)s1, acc);
                    if (f->mins) {
                        int32_t s2 = 0;
                        for (uint32_t k = 0; k < nsub / 2; k++) {
                            const int32_t m = mp[b * (nsub / 2) + k], s = asum[(b * (nsub / 2) + k) * lanes + l];
                            s2 += (int16_t)(m & 0xffff) * (int16_t)(s & 0xffff) + (int16_t)(m >> 16) * (int16_t)(s >> 16);
                        }
                        acc = fmaf(ndmin[b] * d, (float)s2, acc);
                    }
                }
                out[((size_t)r * n_tiles + ti) * lanes + l] = acc;
            }
        }
    }
}

// The canonical dot of one weight row with one activation row, straight from the blocks.
static float canon_dot(const struct gemm_format *f, int64_t n, const void *w, const void *act)
{
    const size_t bb = block_bytes(f);
    const uint32_t nsub = f->qb / f->sb;
    struct canon_block c;
    float acc = 0.0f;
    for (uint32_t b = 0; b < (uint32_t)(n / f->qb); b++) {
        canon_block_of(f, (const uint8_t *)w + b * bb, &c);
        float d;
        const int8_t *a = act_block(f, act, b, &d);
        int32_t s1 = 0, s2 = 0;
        for (uint32_t j = 0; j < nsub; j++) {
            int32_t part = 0;
            for (uint32_t i = j * f->sb; i < (j + 1) * f->sb; i++) part += c.w[i] * a[i];
            s1 += part * c.sc[j];
            if (f->mins) s2 += c.m[j] * act_sub_sum(f, act, b, j);
        }
        acc = fmaf(c.dw * d, (float)s1, acc);
        if (f->mins) acc = fmaf(c.ndmin * d, (float)s2, acc);
    }
    return acc;
}

#define SCALAR_DOTS(name, TYPE)                                                                    \
    static void canon_vec_dot_##name(int64_t n, float *s, const void *w, const void *a)            \
    {                                                                                              \
        *s = canon_dot(gemm_format_of(TYPE), n, w, a);                                             \
    }                                                                                              \
    static void canon_vec_dot_multi_##name(int64_t n, float *s, const void *w, const void *const *a, int n_act) \
    {                                                                                              \
        for (int t = 0; t < n_act; t++) s[t] = canon_dot(gemm_format_of(TYPE), n, w, a[t]);         \
    }
SCALAR_DOTS(q8_0, STRATA_TYPE_Q8_0)
SCALAR_DOTS(mxfp4, STRATA_TYPE_MXFP4)
SCALAR_DOTS(q4_0, STRATA_TYPE_Q4_0)
SCALAR_DOTS(q4_k, STRATA_TYPE_Q4_K)
SCALAR_DOTS(q5_k, STRATA_TYPE_Q5_K)
SCALAR_DOTS(q6_k, STRATA_TYPE_Q6_K)

const struct gemm_kernels gemm_kernels_scalar = {
    .lanes = 16,
    .plus128 = false,
    .rows_per_panel = 16,
    .max_tiles = 2,
    .min_tokens = 2,
    .unpack = gemm_unpack_row,
    .panel = panel_scalar,
    .vec_dot = {
        [STRATA_TYPE_Q8_0] = canon_vec_dot_q8_0,
        [STRATA_TYPE_MXFP4] = canon_vec_dot_mxfp4,
        [STRATA_TYPE_Q4_0] = canon_vec_dot_q4_0,
        [STRATA_TYPE_Q4_K] = canon_vec_dot_q4_k,
        [STRATA_TYPE_Q5_K] = canon_vec_dot_q5_k,
        [STRATA_TYPE_Q6_K] = canon_vec_dot_q6_k,
    },
    .vec_dot_multi = {
        [STRATA_TYPE_Q8_0] = canon_vec_dot_multi_q8_0,
        [STRATA_TYPE_MXFP4] = canon_vec_dot_multi_mxfp4,
        [STRATA_TYPE_Q4_0] = canon_vec_dot_multi_q4_0,
        [STRATA_TYPE_Q4_K] = canon_vec_dot_multi_q4_k,
        [STRATA_TYPE_Q5_K] = canon_vec_dot_multi_q5_k,
        [STRATA_TYPE_Q6_K] = canon_vec_dot_multi_q6_k,
    },
};

// ---- levels -----------------------------------------------------------------------------------

static const char *const g_level_names[STRATA_GEMM_LEVEL_COUNT] = {"scalar", "avx2", "avx512", "amx"};
static const struct gemm_kernels *const g_levels[STRATA_GEMM_LEVEL_COUNT] = {
    &gemm_kernels_scalar, &gemm_kernels_avx2, &gemm_kernels_avx512, &gemm_kernels_amx};

const char *strata_gemm_level_name(enum strata_gemm_level level)
{
    return (unsigned)level < STRATA_GEMM_LEVEL_COUNT ? g_level_names[level] : "?";
}

// AMX-TILE, AMX-INT8 and AMX-BF16 (cpuid leaf 7, edx bits 24, 25 and 22: the split formats' mins
// are bf16 products), AVX-512 VBMI (ecx bit 1: the split records' unpacking; every AMX CPU has
// both), and the tile data state enabled by the OS for this process (Linux grants it on request:
// arch_prctl ARCH_REQ_XCOMP_PERM).
static bool g_amx_ok;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

static void amx_probe(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    if (!((d >> 24) & 1) || !((d >> 25) & 1) || !((d >> 22) & 1) || !((c >> 1) & 1)) return;
    g_amx_ok = gemm_kernels_amx.thread_prepare && gemm_kernels_amx.thread_prepare() == 0;
}

bool strata_gemm_level_runs(enum strata_gemm_level level)
{
    switch (level) {
    case STRATA_GEMM_SCALAR: return true;
    case STRATA_GEMM_AVX2: return strata_kernels_for(STRATA_ISA_AVX2) != NULL;
    case STRATA_GEMM_AVX512: return strata_kernels_for(STRATA_ISA_AVX512) != NULL;
    case STRATA_GEMM_AMX:
        if (!strata_kernels_for(STRATA_ISA_AVX512)) return false;
        pthread_once(&g_amx_once, amx_probe);
        return g_amx_ok;
    default: return false;
    }
}

// STRATA_AMX=0 keeps every kernel off the tiles (the GEMM and the attention alike).
static bool amx_wanted(void)
{
    const char *env = getenv("STRATA_AMX");
    return !(env && strcmp(env, "0") == 0);
}

bool strata_amx_bf16_runs(void)
{
    return amx_wanted() && strata_gemm_level_runs(STRATA_GEMM_AMX);
}

enum strata_gemm_level strata_gemm_level_for(enum strata_isa isa)
{
    if (isa == STRATA_ISA_AVX512) {
        if (amx_wanted() && strata_gemm_level_runs(STRATA_GEMM_AMX)) return STRATA_GEMM_AMX;
        return STRATA_GEMM_AVX512;
    }
    return isa == STRATA_ISA_AVX2 ? STRATA_GEMM_AVX2 : STRATA_GEMM_SCALAR;
}

// The low-bit formats' canonical dots are their AVX-512 kernels themselves (lowbit_avx512.c).
strata_vec_dot_fn strata_gemm_vec_dot(enum strata_gemm_level level, uint32_t wtype)
{
    if ((unsigned)level >= STRATA_GEMM_LEVEL_COUNT || wtype >= STRATA_TYPE_COUNT || !gemm_format_of(wtype)) return NULL;
    if (level == STRATA_GEMM_AMX) level = STRATA_GEMM_AVX512;
    if (g_levels[level]->vec_dot[wtype]) return g_levels[level]->vec_dot[wtype];
    return level == STRATA_GEMM_AVX512 ? strata_lowbit_avx512_table.vec_dot[wtype] : NULL;
}

strata_vec_dot_multi_fn strata_gemm_vec_dot_multi(enum strata_gemm_level level, uint32_t wtype)
{
    if ((unsigned)level >= STRATA_GEMM_LEVEL_COUNT || wtype >= STRATA_TYPE_COUNT || !gemm_format_of(wtype)) return NULL;
    if (level == STRATA_GEMM_AMX) level = STRATA_GEMM_AVX512;
    if (g_levels[level]->vec_dot_multi[wtype]) return g_levels[level]->vec_dot_multi[wtype];
    return level == STRATA_GEMM_AVX512 ? strata_lowbit_avx512_table.vec_dot_multi[wtype] : NULL;
}

gemm_dot_rows_fn strata_gemm_vec_dot_rows(enum strata_gemm_level level, uint32_t wtype)
{
    if ((unsigned)level >= STRATA_GEMM_LEVEL_COUNT || wtype >= STRATA_TYPE_COUNT || !gemm_format_of(wtype)) return NULL;
    if (level == STRATA_GEMM_AMX) level = STRATA_GEMM_AVX512;
    return g_levels[level]->vec_dot_rows[wtype];
}

// ---- driver -----------------------------------------------------------------------------------

// A job's activation tiles up to GEMM_L2_TILES bytes are multiplied by a panel's records in one
// pass; a job with more (a 2,048-token chunk's dense products: 4.3 MiB of tiles for 2,048 inputs,
// one thread's GEMM 183 GMAC/s at 2,048 tokens against 285 at 512 on the development machine)
// walks them in blocks of that size, each block through GEMM_BLOCK_PANELS panels, so that the
// block and the panels' records (280 KiB for 2,048 inputs) share a core's L2 (2 MiB here).
#define GEMM_L2_TILES (1u << 20)
#define GEMM_BLOCK_PANELS 4

// Per job of one call: its format, layouts, and where its tiles are.
struct job_plan {
    const struct gemm_format *f;
    struct gemm_rec_layout L;
    struct gemm_tile_layout T;
    size_t tile_off;             // first tile of the job in g->tiles
    int n_groups;                // tiles (token groups of `lanes`)
    int owner;                   // job whose tiles these are (itself, or an earlier identical one)
    int item0;                   // first phase-2 item of the job
    bool small;                  // few tokens: the multi-token dot, no tiles
    int n_unit;                  // small jobs on the same matrix right after it, itself included,
                                 // whose tokens its items serve (0: served by an earlier job's)
    int item_rows;               // weight rows per item: a panel, GEMM_BLOCK_PANELS of them for a
                                 // job of token blocks, or more for small jobs
    int block_tiles;             // tiles a token block (all of them unless the job has more than
                                 // fit the L2 budget with its panels' records)
};

struct strata_gemm {
    enum strata_gemm_level level;
    const struct gemm_kernels *k;
    int n_threads;
    bool guided;                 // items claimed guided (STRATA_GEMM_GUIDED=0: one at a time, for measuring)
    size_t l2_tiles;             // GEMM_L2_TILES (STRATA_GEMM_L2_TILES: the tests' small blocks)
    uint8_t *tiles;              // activation tiles of one call
    size_t tiles_bytes;
    uint8_t **panels;            // [n_threads] unpacked weight rows
    size_t panel_bytes;
    float **outs;                // [n_threads] [rows_per_panel][lanes] results before scatter
    struct job_plan *plan;       // [STRATA_MM_MAX_JOBS] of the current call
    uint8_t *tile_items;         // int [2][tile_items_cap]: (job, group) of phase 1
    size_t tile_items_bytes;
};

struct gemm_call {
    struct strata_gemm *g;
    const struct strata_mm_job *jobs;
    struct job_plan *plan;
    int n_jobs;
    int n_tile_items;            // phase 1: (owner job, group) pairs
    int *tile_item_job, *tile_item_group;
    int n_items;                 // phase 2: (job, panel) pairs
    bool guided;                 // items claimed several at a time (strata_chunk_next_guided)
    atomic_int next;
};

int strata_gemm_create(struct strata_gemm **out, int n_threads, enum strata_gemm_level level)
{
    *out = NULL;
    if (n_threads < 1 || (unsigned)level >= STRATA_GEMM_LEVEL_COUNT || !strata_gemm_level_runs(level)) {
        strata_log_error("gemm_create: level %s with %d threads is not available here", strata_gemm_level_name(level),
                         n_threads);
        return STRATA_EARG;
    }
    struct strata_gemm *g = calloc(1, sizeof *g);
    if (!g) return STRATA_ENOMEM;
    g->level = level;
    const char *guided = getenv("STRATA_GEMM_GUIDED");
    g->guided = !(guided && guided[0] == '0');
    const char *l2 = getenv("STRATA_GEMM_L2_TILES");
    const long l2_tiles = l2 ? atol(l2) : 0;
    g->l2_tiles = l2_tiles > 0 ? (size_t)l2_tiles : GEMM_L2_TILES;
    g->k = g_levels[level];
    g->n_threads = n_threads;
    g->panels = calloc((size_t)n_threads, sizeof *g->panels);
    g->outs = calloc((size_t)n_threads, sizeof *g->outs);
    g->plan = calloc(STRATA_MM_MAX_JOBS, sizeof *g->plan);
    if (!g->panels || !g->outs || !g->plan) {
        strata_gemm_free(g);
        return STRATA_ENOMEM;
    }
    for (int i = 0; i < n_threads; i++) {
        const int call_tiles = g->k->fused_tiles > g->k->max_tiles ? g->k->fused_tiles : g->k->max_tiles;
        const size_t out_bytes = (size_t)g->k->rows_per_panel * (size_t)call_tiles * g->k->lanes * sizeof(float);
        void *o = NULL;
        if (posix_memalign(&o, 64, out_bytes)) {
            strata_gemm_free(g);
            return STRATA_ENOMEM;
        }
        memset(o, 0, out_bytes);  // a level's scatter may read the rows a short panel leaves unwritten
        g->outs[i] = o;
    }
    *out = g;
    return 0;
}

void strata_gemm_free(struct strata_gemm *g)
{
    if (!g) return;
    for (int i = 0; g->panels && i < g->n_threads; i++) free(g->panels[i]);
    for (int i = 0; g->outs && i < g->n_threads; i++) free(g->outs[i]);
    free(g->panels);
    free(g->outs);
    strata_big_free(g->tiles, g->tiles_bytes);
    free(g->plan);
    free(g->tile_items);
    free(g);
}

enum strata_gemm_level strata_gemm_level(const struct strata_gemm *g) { return g->level; }

size_t strata_gemm_scratch_bytes(const struct strata_gemm *g)
{
    return g->tiles_bytes + (size_t)g->n_threads * g->panel_bytes;
}

static int grow(uint8_t **p, size_t *have, size_t want)
{
    if (want <= *have) return 0;
    void *q = NULL;
    if (posix_memalign(&q, 64, want)) {
        strata_log_error("gemm_run: cannot grow scratch to %zu bytes", want);
        return STRATA_ENOMEM;
    }
    memset(q, 0, want);  // the AMX kernel loads whole 16-row tiles, past a short panel's rows
    free(*p);
    *p = q;
    *have = want;
    return 0;
}

// The activation tiles: the largest scratch (tens of MiB for a prompt's experts), so on huge pages
// (the kernel's zeroed pages: the first touch of 4 KiB pages cost 0.2 s for 38 MB on the
// development VM, in the middle of the first long prompt) and grown by a quarter more than asked
// (a prompt's layers route slightly different token counts; each growth was a fresh buffer).
static int grow_tiles(struct strata_gemm *g, size_t want)
{
    if (want <= g->tiles_bytes) return 0;
    want += want / 4;
    void *q = strata_big_alloc(want);
    if (!q) {
        strata_log_error("gemm_run: cannot grow scratch to %zu bytes", want);
        return STRATA_ENOMEM;
    }
    strata_big_free(g->tiles, g->tiles_bytes);
    g->tiles = q;
    g->tiles_bytes = want;
    return 0;
}

static const void *act_row(const struct strata_mm_job *j, int t)
{
    const int xr = j->x_rows ? j->x_rows[t] : t;
    return (const char *)j->xq + (size_t)xr * j->xq_stride;
}

static bool same_activations(const struct strata_mm_job *a, const struct strata_mm_job *b, const struct job_plan *pa,
                             const struct job_plan *pb)
{
    return a->xq == b->xq && a->xq_stride == b->xq_stride && a->x_rows == b->x_rows && a->n_tok == b->n_tok &&
           pa->f == pb->f && a->w.n_in == b->w.n_in;
}

// Phase 1, item i: one activation tile of a job.
static void tile_item(const struct gemm_call *c, int i)
{
    const struct gemm_kernels *k = c->g->k;
    const int j = c->tile_item_job[i], grp = c->tile_item_group[i];
    const struct strata_mm_job *job = &c->jobs[j];
    const struct job_plan *p = &c->plan[j];
    const int t0 = grp * (int)k->lanes;
    const int n_act = job->n_tok - t0 < (int)k->lanes ? job->n_tok - t0 : (int)k->lanes;
    const void *act[GEMM_MAX_LANES];
    for (int t = 0; t < n_act; t++) act[t] = act_row(job, t0 + t);
    gemm_build_tile(p->f, &p->T, act, n_act, k->plus128 && !p->f->wu8, c->g->tiles + p->tile_off + (size_t)grp * p->T.bytes);
}

static void tile_worker(void *arg, int ith, int nth)
{
    (void)ith;
    struct gemm_call *c = arg;
    int i0, i1;
    while (c->guided ? strata_chunk_next_guided(&c->next, c->n_tile_items, nth, &i0, &i1)
                     : strata_chunk_next(&c->next, c->n_tile_items, 1, &i0, &i1))
        for (int i = i0; i < i1; i++) tile_item(c, i);
}

// Few tokens: the canonical multi-token dot on the packed rows (the same results, no tiles), for
// the tokens of n_unit consecutive jobs on one matrix (the output head of several sequences: the
// rows are read once for all of them), up to STRATA_DOT_TOKENS of them per pass over the rows.
static void small_job_rows(enum strata_gemm_level level, const struct strata_mm_job *jobs, int n_unit, int r0, int r1)
{
    const struct strata_mat *w = &jobs[0].w;
    strata_vec_dot_multi_fn multi = strata_gemm_vec_dot_multi(level, w->type);
    gemm_dot_rows_fn rows = strata_gemm_vec_dot_rows(level, w->type);
    const void *x[STRATA_DOT_TOKENS];
    float *y[STRATA_DOT_TOKENS];
    int n_left = 0;
    for (int j = 0; j < n_unit; j++) n_left += jobs[j].n_tok;
    for (int j = 0, t = 0; n_left > 0;) {
        const int n_act = n_left < STRATA_DOT_TOKENS ? n_left : STRATA_DOT_TOKENS;
        for (int i = 0; i < n_act; i++, t++) {
            while (t == jobs[j].n_tok) j++, t = 0;
            const struct strata_mm_job *job = &jobs[j];
            x[i] = act_row(job, t);
            y[i] = job->y + (size_t)(job->y_rows ? job->y_rows[t] : t) * job->y_stride;
        }
        n_left -= n_act;
        int r = r0;
        if (n_act == 1 && rows) {  // one token: GEMM_DOT_ROWS rows at a time, the same bits
            for (; r + GEMM_DOT_ROWS <= r1; r += GEMM_DOT_ROWS)
                rows((int64_t)w->n_in, y[0] + r, (const char *)w->data + (size_t)r * w->row_bytes, w->row_bytes, x[0]);
        }
        for (; r < r1; r++) {
            float s[STRATA_DOT_TOKENS];
            multi((int64_t)w->n_in, s, (const char *)w->data + (size_t)r * w->row_bytes, x, n_act);
            for (int i = 0; i < n_act; i++) y[i][r] = s[i];
        }
    }
}

// The job of phase-2 item i0, from *jp, the job of the thread's previous item (items are claimed
// in increasing order).
static int job_of_item(const struct gemm_call *c, int i0, int *jp)
{
    int j = *jp;
    while (j + 1 < c->n_jobs && c->plan[j + 1].item0 <= i0) j++;
    while (c->plan[j].item0 > i0) j--;
    return *jp = j;
}

// The packed weight rows item i0 reads (*bytes of them from the return), NULL for a small job's.
static const uint8_t *item_rows(const struct gemm_call *c, int i0, int j, size_t *bytes)
{
    const struct strata_mm_job *job = &c->jobs[j];
    const struct job_plan *p = &c->plan[j];
    if (p->small) return NULL;
    const int r0 = (i0 - p->item0) * p->item_rows;
    const int nr = (int)job->w.n_out - r0 < p->item_rows ? (int)job->w.n_out - r0 : p->item_rows;
    *bytes = (size_t)nr * job->w.row_bytes;
    return (const uint8_t *)job->w.data + (size_t)r0 * job->w.row_bytes;
}

// Item i0 of phase 2 (of job j): a small job's rows through the canonical dots, or a panel of a
// job's rows unpacked and multiplied by its tiles. next, next_bytes: the rows of the thread's next
// item (NULL if not known), asked for into L2 while this one computes.
static void panel_item(const struct gemm_call *c, int i0, int j, uint8_t *panel, float *out, const uint8_t *next,
                       size_t next_bytes)
{
    struct strata_gemm *g = c->g;
    const struct gemm_kernels *k = g->k;
    const int lanes = (int)k->lanes;
    const struct strata_mm_job *job = &c->jobs[j];
    const struct job_plan *p = &c->plan[j];
    const int r0 = (i0 - p->item0) * p->item_rows;
    if (p->small) {
        const int r1 = r0 + p->item_rows < (int)job->w.n_out ? r0 + p->item_rows : (int)job->w.n_out;
        small_job_rows(g->level, job, p->n_unit, r0, r1);
        return;
    }
    size_t bytes;
    const uint8_t *rows = item_rows(c, i0, j, &bytes);
    const int nr = (int)(bytes / job->w.row_bytes);
    // few tiles: the level's fused kernel where it has one, all of them in one call (no records)
    const bool fused = k->fused && k->fuses(p->f) && p->n_groups <= k->fused_tiles;
    const int rpp = k->rows_per_panel, n_panels = fused ? 1 : (nr + rpp - 1) / rpp;
    for (int r = 0; r < nr && !fused; r++)
        k->unpack(p->f, &p->L, rows + (size_t)r * job->w.row_bytes, panel + (size_t)r * p->L.bytes);
    const struct job_plan *owner = &c->plan[p->owner];
    const int per_call = fused ? p->n_groups : k->max_tiles;
    const int n_calls = n_panels * ((p->n_groups + per_call - 1) / per_call);
    const size_t step = (next_bytes + (size_t)n_calls - 1) / (size_t)n_calls;  // the next rows a piece a call
    int call = 0;
    // a token block's tiles stay in L2 while every panel of the item multiplies them
    for (int tb = 0; tb < p->n_groups; tb += p->block_tiles) {
        const int tb_end = tb + p->block_tiles < p->n_groups ? tb + p->block_tiles : p->n_groups;
        for (int q = 0; q < n_panels; q++) {
            const int pr0 = q * rpp, pnr = nr - pr0 < rpp ? nr - pr0 : rpp;
            for (int grp = tb; grp < tb_end; grp += per_call, call++) {
                const int n_tiles = tb_end - grp < per_call ? tb_end - grp : per_call;
                const uint8_t *tiles[GEMM_CALL_TILES];
                for (int i = 0; i < n_tiles; i++)
                    tiles[i] = g->tiles + owner->tile_off + (size_t)(grp + i) * owner->T.bytes;
                if (fused) {
                    k->fused(p->f, &p->L, &p->T, rows, job->w.row_bytes, nr, tiles, n_tiles, out, next, next_bytes);
                } else {
                    if (next) gemm_prefetch_piece(next, next_bytes, step, (size_t)call);
                    k->panel(p->f, &p->L, &p->T, panel + (size_t)pr0 * p->L.bytes, pnr, tiles, n_tiles, out);
                }
                for (int i = 0; i < n_tiles; i++) {
                    const int t0 = (grp + i) * lanes, n_act = job->n_tok - t0 < lanes ? job->n_tok - t0 : lanes;
                    float *y[GEMM_MAX_LANES];
                    for (int l = 0; l < n_act; l++)
                        y[l] = job->y + (size_t)(job->y_rows ? job->y_rows[t0 + l] : t0 + l) * job->y_stride + r0 + pr0;
                    if (k->scatter) {
                        k->scatter(out, n_tiles, i, y, n_act, pnr);
                        continue;
                    }
                    for (int l = 0; l < n_act; l++)
                        for (int r = 0; r < pnr; r++) y[l][r] = out[((size_t)r * n_tiles + i) * lanes + l];
                }
            }
        }
    }
}

static void panel_worker(void *arg, int ith, int nth)
{
    struct gemm_call *c = arg;
    const struct gemm_kernels *k = c->g->k;
    uint8_t *panel = c->g->panels[ith];
    float *out = c->g->outs[ith];
    if (k->thread_prepare && k->thread_prepare() != 0) STRATA_ASSERT(!"gemm: tile state lost");
    int i0, i1, j = 0;
    while (c->guided ? strata_chunk_next_guided(&c->next, c->n_items, nth, &i0, &i1)
                     : strata_chunk_next(&c->next, c->n_items, 1, &i0, &i1)) {
        job_of_item(c, i0, &j);
        for (int i = i0; i < i1; i++) {
            const int ji = j;  // item i's job; j moves on to item i + 1's
            size_t next_bytes = 0;
            const uint8_t *next = i + 1 < i1 ? item_rows(c, i + 1, job_of_item(c, i + 1, &j), &next_bytes) : NULL;
            panel_item(c, i, ji, panel, out, next, next_bytes);
        }
    }
}

int strata_gemm_run(struct strata_gemm *g, struct strata_pool *pool, const struct strata_mm_job *jobs, int n_jobs)
{
    STRATA_ASSERT(n_jobs >= 0 && n_jobs <= STRATA_MM_MAX_JOBS);
    STRATA_ASSERT(strata_pool_size(pool) <= g->n_threads);
    if (n_jobs == 0) return 0;
    const struct gemm_kernels *k = g->k;
    struct job_plan *plan = g->plan;
    size_t tiles = 0, panel_want = 0;  // panel_want: the largest item's records
    int n_tile_items = 0, n_items = 0, lead = -1;
    for (int j = 0; j < n_jobs; j++) {
        struct job_plan *p = &plan[j];
        p->f = gemm_format_of(jobs[j].w.type);
        STRATA_ASSERT(strata_gemm_supports(g->level, jobs[j].w.type) && jobs[j].w.n_in % p->f->qb == 0);
        gemm_rec_layout_init(&p->L, p->f, jobs[j].w.n_in, k->split && k->split(p->f));
        gemm_tile_layout_init(&p->T, p->f, jobs[j].w.n_in, k->lanes, k->split && k->split(p->f));
        p->n_groups = (jobs[j].n_tok + (int)k->lanes - 1) / (int)k->lanes;
        const int min_tok = p->f->qb == 32 && k->min_tokens_b32 ? k->min_tokens_b32 : k->min_tokens;
        p->small = !k->panel || jobs[j].n_tok < min_tok;
        p->owner = j;
        for (int i = 0; i < j && !p->small; i++)
            if (!plan[i].small && plan[i].owner == i && same_activations(&jobs[i], &jobs[j], &plan[i], p)) {
                p->owner = i;
                break;
            }
        p->tile_off = tiles;
        if (!p->small && p->owner == j) {
            tiles += (size_t)p->n_groups * p->T.bytes;
            n_tile_items += p->n_groups;
        }
        p->item0 = n_items;
        p->n_unit = 1;
        if (p->small && lead >= 0 && strata_mat_same(&jobs[lead].w, &jobs[j].w)) {
            plan[lead].n_unit++;  // its tokens go with the leader's, on the leader's items
            p->n_unit = 0;
            continue;
        }
        lead = p->small ? j : -1;
        // Small jobs stream their rows once (decode): items of up to 64 rows, enough of them
        // for balance (8 a thread), few enough that the shared counter is not the cost (one
        // item of 16 rows of the output head was a contended atomic per 18 KiB).
        p->item_rows = k->rows_per_panel;
        p->block_tiles = p->n_groups;
        if (!p->small && p->n_groups > k->fused_tiles) {  // token blocks (GEMM_L2_TILES)
            const int bt = (int)(g->l2_tiles / p->T.bytes) & ~1;
            const int block = bt < 2 * k->max_tiles ? 2 * k->max_tiles : bt;
            if (p->n_groups > block) p->block_tiles = block, p->item_rows = GEMM_BLOCK_PANELS * k->rows_per_panel;
        }
        if (p->small) {
            const uint32_t want = jobs[j].w.n_out / (8u * (uint32_t)strata_pool_size(pool));
            p->item_rows = want < 16 ? 16 : want > 64 ? 64 : (int)want;
        }
        n_items += (int)((jobs[j].w.n_out + (uint32_t)p->item_rows - 1) / (uint32_t)p->item_rows);
        if (!p->small && p->L.bytes * (size_t)p->item_rows > panel_want) panel_want = p->L.bytes * (size_t)p->item_rows;
    }
    int rc = grow_tiles(g, tiles);
    for (int i = 0; rc == 0 && i < g->n_threads; i++) {
        size_t have = g->panel_bytes;
        rc = grow(&g->panels[i], &have, panel_want);
    }
    if (rc == 0 && panel_want > g->panel_bytes) g->panel_bytes = panel_want;
    if (rc == 0) rc = grow(&g->tile_items, &g->tile_items_bytes, (size_t)n_tile_items * 2 * sizeof(int));
    if (rc) return rc;
    int *item_job = (int *)g->tile_items, *item_group = item_job + n_tile_items;
    for (int j = 0, n = 0; j < n_jobs; j++)
        if (!plan[j].small && plan[j].owner == j)
            for (int grp = 0; grp < plan[j].n_groups; grp++) item_job[n] = j, item_group[n++] = grp;
    struct gemm_call c = {.g = g, .jobs = jobs, .plan = plan, .n_jobs = n_jobs, .n_tile_items = n_tile_items,
                          .tile_item_job = item_job, .tile_item_group = item_group, .n_items = n_items,
                          .guided = g->guided};
    if (n_tile_items) {
        atomic_init(&c.next, 0);
        strata_pool_run(pool, tile_worker, &c);
    }
    atomic_init(&c.next, 0);
    strata_pool_run(pool, panel_worker, &c);
    return 0;
}
