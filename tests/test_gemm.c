// Tests of the integer GEMM (src/backend/cpu/gemm.h) for every type with a canonical form and
// every level this CPU runs that has it (scalar, AVX2, AVX-512 VNNI, AMX; the low-bit formats
// only the last two):
//   - the canonical one-token dot of each level equals the scalar one (the lowest level that has
//     the type) bit for bit, and is within its float-rounding bound of the exact dot (the scalar
//     reference of the kernel tables, which accumulates in double); the kernel tables' vec_dot of
//     each ISA is within the same kind of bound;
//   - the multi-token dot equals the one-token dot on every row, for 1..8 rows;
//   - strata_gemm_run equals the one-token dot bit for bit on every (row, token): jobs of 1..40
//     tokens, gathered activation rows and scattered outputs, jobs sharing activations, several
//     thread counts;
//   - integer extremes (largest quants, scales and activations) stay exact.
//   test_gemm [--seed N]          the tests
//   test_gemm --bench [T [E [TYPE]]]  GMAC/s of one thread: quant multi-dot, canonical multi-dot and
//                                 the GEMM, on E (default 8; 128 and more stream from RAM)
//                                 expert-shaped products of T tokens (default 8, 32), of
//                                 every type or of TYPE alone (Q4_K, ...); 768 x 2,048 (the
//                                 gate's shape), or 2,048 x 768 with STRATA_BENCH_DOWN=1
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
#include "check.h"
#include "util/log.h"

#define EPS32 (1.0 / 16777216.0)

static const uint32_t g_types[] = {STRATA_TYPE_Q8_0,    STRATA_TYPE_Q4_K,    STRATA_TYPE_Q5_K,   STRATA_TYPE_Q6_K,
                                   STRATA_TYPE_MXFP4,   STRATA_TYPE_Q4_0,    STRATA_TYPE_Q2_K,   STRATA_TYPE_Q3_K,
                                   STRATA_TYPE_IQ1_M,   STRATA_TYPE_IQ2_XXS, STRATA_TYPE_IQ2_XS, STRATA_TYPE_IQ3_XXS,
                                   STRATA_TYPE_IQ4_XS};
#define N_TYPES (sizeof g_types / sizeof g_types[0])


static void random_activations(uint64_t *rng, float *x, int64_t n)
{
    static const float scales[4] = {1.0f, 1e-3f, 40.0f, 3e-6f};
    const float scale = scales[strata_rng_next(rng) % 4];
    for (int64_t i = 0; i < n; i++) {
        x[i] = scale * strata_rng_normal(rng);
        if (strata_rng_next(rng) % 97 == 0) x[i] *= 25.0f;
    }
}

static size_t act_bytes(uint32_t type, int64_t n)
{
    return strata_type_row_bytes(strata_type_traits(type)->vec_dot_type, (uint64_t)n);
}

// Bound on |canonical - exact|: every product term passes through at most 2 * nb + 3 roundings
// (the factor product, the int->float conversion, one fma per block after it), so the error is
// within (2 nb + 4) eps S, with S the sum of |term| over the terms, here bounded by the sum of
// |dequantized w * dequantized a| over the elements (scale and min parts counted apart for the
// K-quants through |w| <= d sc |q| + dmin m).
static double term_sum(uint32_t type, int64_t n, const void *w, const void *a)
{
    const struct strata_kernels *ref = strata_kernels_for(STRATA_ISA_SCALAR);
    const uint32_t vt = strata_type_traits(type)->vec_dot_type;
    float *wf = xmalloc((size_t)n * 4), *af = xmalloc((size_t)n * 4);
    ref->dequant[type](w, wf, n);
    if (vt == STRATA_TYPE_Q8_0) {
        ref->dequant[vt](a, af, n);
    } else {  // Q8_K has no dequant in the table: d * qs
        const uint8_t *p = a;
        for (int64_t b = 0; b < n / 256; b++, p += 292) {
            float d;
            memcpy(&d, p, 4);
            for (int i = 0; i < 256; i++) af[b * 256 + i] = d * (float)(int8_t)p[4 + i];
        }
    }
    double s = 0.0;
    // K-quants with mins: |d sc q - dmin m| <= d sc q + dmin m, at most twice |w| + 2 dmin m; a
    // factor 4 over |w a| covers both parts of every element generously.
    const double k = (type == STRATA_TYPE_Q4_K || type == STRATA_TYPE_Q5_K || type == STRATA_TYPE_Q2_K) ? 4.0 : 1.0;
    for (int64_t i = 0; i < n; i++) s += k * fabs((double)wf[i] * af[i]);
    free(wf), free(af);
    return s;
}

// ---- canonical dots ---------------------------------------------------------------------------

static void test_dots(uint32_t type, int64_t n, uint64_t *rng)
{
    const int before = g_failures;
    const int rows = 6, n_act = 8;
    const size_t rb = strata_type_row_bytes(type, (uint64_t)n), ab = act_bytes(type, n);
    const uint32_t vt = strata_type_traits(type)->vec_dot_type;
    uint8_t *w = xmalloc(rb * rows), *a = xmalloc(ab * n_act);
    float *x = xmalloc((size_t)n * 4);
    strata_quant_random(type, rng, w, rows * n, 1.0f);
    for (int t = 0; t < n_act; t++) {
        random_activations(rng, x, n);
        strata_kernels_for(STRATA_ISA_SCALAR)->quantize[vt](x, a + t * ab, n);
    }
    int ref_level = 0;
    while (ref_level < STRATA_GEMM_LEVEL_COUNT && !(strata_gemm_level_runs((enum strata_gemm_level)ref_level) &&
                                                    strata_gemm_supports((enum strata_gemm_level)ref_level, type)))
        ref_level++;
    if (ref_level == STRATA_GEMM_LEVEL_COUNT) {
        printf("skip canonical dots %s: no level here has it\n", strata_type_name(type));
        free(w), free(a), free(x);
        return;
    }
    const strata_vec_dot_fn canon_ref = strata_gemm_vec_dot((enum strata_gemm_level)ref_level, type);
    const strata_vec_dot_fn exact = strata_kernels_for(STRATA_ISA_SCALAR)->vec_dot[type];
    const int nb = (int)(n / strata_type_traits(type)->block_size);
    double worst = 0.0;
    for (int r = 0; r < rows; r++)
        for (int t = 0; t < n_act; t++) {
            const void *wr = w + r * rb, *at = a + t * ab;
            float c, e;
            canon_ref(n, &c, wr, at);
            exact(n, &e, wr, at);
            const double S = term_sum(type, n, wr, at), tol = (2.0 * nb + 4) * EPS32 * S + EPS32 * fabs(e);
            CHECK(fabs((double)c - e) <= tol, "%s n=%lld row %d tok %d: canonical %.9g, exact %.9g, bound %.3g",
                  strata_type_name(type), (long long)n, r, t, c, e, tol);
            if (S > 0) worst = fmax(worst, fabs((double)c - e) / (EPS32 * S));
            for (int isa = STRATA_ISA_AVX2; isa < STRATA_ISA_COUNT; isa++) {
                const struct strata_kernels *k = strata_kernels_for((enum strata_isa)isa);
                if (!k) continue;
                float q;
                k->vec_dot[type](n, &q, wr, at);
                const double qtol = (nb + 16 + 4) * EPS32 * S + EPS32 * fabs(e);
                CHECK(fabs((double)q - e) <= qtol, "%s n=%lld [%s] quant vec_dot %.9g vs exact %.9g", strata_type_name(type),
                      (long long)n, strata_isa_name(k->isa), q, e);
            }
        }
    for (int lv = ref_level; lv < STRATA_GEMM_LEVEL_COUNT; lv++) {
        if (!strata_gemm_level_runs((enum strata_gemm_level)lv) || !strata_gemm_supports((enum strata_gemm_level)lv, type)) continue;
        const strata_vec_dot_fn dot = strata_gemm_vec_dot((enum strata_gemm_level)lv, type);
        const strata_vec_dot_multi_fn multi = strata_gemm_vec_dot_multi((enum strata_gemm_level)lv, type);
        for (int r = 0; r < rows; r++) {
            const void *wr = w + r * rb;
            float one[8], ref[8];
            const void *acts[8];
            for (int t = 0; t < n_act; t++) {
                acts[t] = a + t * ab;
                canon_ref(n, &ref[t], wr, acts[t]);
                dot(n, &one[t], wr, acts[t]);
                CHECK(!memcmp(&one[t], &ref[t], 4), "%s n=%lld [%s] row %d tok %d: dot %.9g, scalar %.9g",
                      strata_type_name(type), (long long)n, strata_gemm_level_name(lv), r, t, one[t], ref[t]);
            }
            for (int m = 1; m <= n_act; m++) {
                float s[8];
                multi(n, s, wr, acts, m);
                CHECK(!memcmp(s, one, (size_t)m * 4), "%s n=%lld [%s] multi-dot of %d rows differs from the dot",
                      strata_type_name(type), (long long)n, strata_gemm_level_name(lv), m);
            }
        }
        // one token against GEMM_DOT_ROWS consecutive weight rows (decode's products), from each start row
        const gemm_dot_rows_fn rows4 = strata_gemm_vec_dot_rows((enum strata_gemm_level)lv, type);
        for (int r0 = 0; rows4 && r0 + GEMM_DOT_ROWS <= rows; r0++)
            for (int t = 0; t < n_act; t++) {
                float s[GEMM_DOT_ROWS], one;
                rows4(n, s, w + r0 * rb, rb, a + t * ab);
                for (int i = 0; i < GEMM_DOT_ROWS; i++) {
                    dot(n, &one, w + (r0 + i) * rb, a + t * ab);
                    CHECK(!memcmp(&s[i], &one, 4), "%s n=%lld [%s] 4-row dot from row %d tok %d: row %d %.9g, dot %.9g",
                          strata_type_name(type), (long long)n, strata_gemm_level_name(lv), r0, t, r0 + i, s[i], one);
                }
            }
    }
    char name[96];
    snprintf(name, sizeof name, "canonical dots %s n=%lld (worst %.2f eps S)", strata_type_name(type), (long long)n, worst);
    case_result(name, before);
    free(w), free(a), free(x);
}

// ---- GEMM -------------------------------------------------------------------------------------

// One call of several jobs on one weight type: job j multiplies rows of W (n_out x n) with n_tok[j]
// activation rows taken through a permutation (x_rows) and scattered (y_rows); jobs 2k and 2k+1
// share their activation rows (as an expert's gate and up do).
static void test_gemm_case(uint32_t type, int64_t n, int n_out, const int *n_tok, int n_jobs, enum strata_gemm_level lv,
                           int threads, uint64_t *rng)
{
    const size_t rb = strata_type_row_bytes(type, (uint64_t)n), ab = act_bytes(type, n);
    const uint32_t vt = strata_type_traits(type)->vec_dot_type;
    int total = 0;
    for (int j = 0; j < n_jobs; j++) total += n_tok[j];
    uint8_t *w = xmalloc(rb * (size_t)n_out * (size_t)n_jobs), *a = xmalloc(ab * (size_t)total);
    float *x = xmalloc((size_t)n * 4);
    float *y = xmalloc((size_t)total * n_out * 4);
    int32_t *xr = xmalloc((size_t)total * 4), *yr = xmalloc((size_t)total * 4);
    strata_quant_random(type, rng, w, (int64_t)n_out * n_jobs * n, 1.0f);
    for (int t = 0; t < total; t++) {
        random_activations(rng, x, n);
        strata_kernels_for(STRATA_ISA_SCALAR)->quantize[vt](x, a + (size_t)t * ab, n);
    }
    // a random permutation of the rows for gathers and one for scatters
    for (int t = 0; t < total; t++) xr[t] = yr[t] = t;
    for (int t = total - 1; t > 0; t--) {
        int i = (int)(strata_rng_next(rng) % (uint64_t)(t + 1)), tmp = xr[t];
        xr[t] = xr[i], xr[i] = tmp;
        i = (int)(strata_rng_next(rng) % (uint64_t)(t + 1)), tmp = yr[t], yr[t] = yr[i], yr[i] = tmp;
    }
    struct strata_mm_job jobs[16];
    int first = 0;
    for (int j = 0; j < n_jobs; j++) {
        const int share = (j % 2 == 1 && n_tok[j] == n_tok[j - 1]) ? first - n_tok[j - 1] : first;
        jobs[j] = (struct strata_mm_job){{w + rb * (size_t)n_out * j, type, (uint32_t)n, (uint32_t)n_out, rb},
                                         a, ab, xr + share, n_tok[j], y, (size_t)n_out, yr + first};
        first += n_tok[j];
    }
    memset(y, 0xff, (size_t)total * n_out * 4);
    struct strata_pool *pool;
    struct strata_gemm *g;
    if (strata_pool_create(&pool, threads) || strata_gemm_create(&g, threads, lv)) {
        CHECK(0, "cannot create the pool or the GEMM");
        return;
    }
    CHECK(strata_gemm_run(g, pool, jobs, n_jobs) == 0, "gemm_run failed");
    const strata_vec_dot_fn ref = strata_gemm_vec_dot(lv, type);  // equal to the lower levels' (test_dots)
    int bad = 0;
    for (int j = 0; j < n_jobs; j++)
        for (int t = 0; t < jobs[j].n_tok; t++)
            for (int r = 0; r < n_out; r++) {
                float want;
                ref(n, &want, (const uint8_t *)jobs[j].w.data + (size_t)r * rb, a + (size_t)jobs[j].x_rows[t] * ab);
                const float got = y[(size_t)jobs[j].y_rows[t] * n_out + r];
                if (memcmp(&got, &want, 4) && bad++ < 5)
                    CHECK(0, "%s n=%lld [%s, %d threads] job %d token %d row %d: gemm %.9g, dot %.9g", strata_type_name(type),
                          (long long)n, strata_gemm_level_name(lv), threads, j, t, r, got, want);
            }
    CHECK(bad == 0, "%d results differ", bad);
    strata_gemm_free(g);
    strata_pool_free(pool);
    free(w), free(a), free(x), free(y), free(xr), free(yr);
}

static void test_gemm(uint32_t type, uint64_t *rng)
{
    static const int toks_a[] = {1, 2, 3, 5, 8, 9, 15, 16, 17, 33, 40, 7};
    static const int toks_b[] = {16, 16, 3, 3, 31, 31, 1, 1};
    const int64_t n = strata_type_traits(type)->block_size == 32 ? 320 : 512;  // 10 blocks of 32: a tail
    for (int lv = 0; lv < STRATA_GEMM_LEVEL_COUNT; lv++) {
        if (!strata_gemm_level_runs((enum strata_gemm_level)lv) || !strata_gemm_supports((enum strata_gemm_level)lv, type)) continue;
        const int before = g_failures;
        test_gemm_case(type, n, 37, toks_a, 12, (enum strata_gemm_level)lv, 1, rng);
        test_gemm_case(type, n, 21, toks_b, 8, (enum strata_gemm_level)lv, 3, rng);
        test_gemm_case(type, 2 * n, 70, (const int[]){24}, 1, (enum strata_gemm_level)lv, 2, rng);
        // more tiles than a token block holds (blocks of 4 tiles here, 1 MiB in a run): items of
        // 4 panels walking the tokens block by block, a last block of one tile, a short panel
        setenv("STRATA_GEMM_L2_TILES", "32768", 1);
        test_gemm_case(type, n, 70, (const int[]){100, 100, 37}, 3, (enum strata_gemm_level)lv, 3, rng);
        unsetenv("STRATA_GEMM_L2_TILES");
        char name[96];
        snprintf(name, sizeof name, "gemm %s [%s] equals the dot on every (row, token)", strata_type_name(type),
                 strata_gemm_level_name(lv));
        case_result(name, before);
    }
}

// Largest magnitudes every format allows: all-max quants, scales and mins, activations of +-127
// (and -128 where a Q8 quantizer can write it): the integer sums must stay exact, so the levels
// still agree bit for bit.
static void test_extremes(uint32_t type, uint64_t *rng)
{
    const int before = g_failures;
    const int64_t n = 512;
    const size_t rb = strata_type_row_bytes(type, (uint64_t)n), ab = act_bytes(type, n);
    uint8_t *w = xmalloc(rb), *a = xmalloc(ab * 16);
    strata_quant_random(type, rng, w, n, 1.0f);
    // every byte past each block's leading f16 factor(s) set: largest quants, scales, mins
    const size_t bb = strata_type_traits(type)->type_size;
    for (size_t b = 0; b < rb / bb; b++) {
        uint8_t *blk = w + b * bb;
        switch (type) {
        case STRATA_TYPE_Q8_0: memset(blk + 2, 0x7f, bb - 2); break;
        case STRATA_TYPE_Q4_K:
        case STRATA_TYPE_Q5_K: memset(blk + 4, 0xff, bb - 4); break;
        case STRATA_TYPE_Q6_K: memset(blk, 0xff, 192); memset(blk + 192, 0x80, 16); break;  // q = 63, scale -128
        case STRATA_TYPE_MXFP4: memset(blk + 1, b % 2 ? 0xff : 0x77, 16); break;            // -12 / +12
        case STRATA_TYPE_Q4_0: memset(blk + 2, 0x00, 16); break;                             // q - 8 = -8
        default: break;
        }
    }
    for (int t = 0; t < 16; t++) {
        uint8_t *p = a + t * ab;
        memset(p, 0, ab);
        if (strata_type_traits(type)->vec_dot_type == STRATA_TYPE_Q8_0) {
            for (size_t b = 0; b < ab / 34; b++) {
                const uint16_t one = 0x3c00;
                memcpy(p + b * 34, &one, 2);
                memset(p + b * 34 + 2, t % 2 ? 0x81 : 0x7f, 32);
            }
        } else {
            for (size_t b = 0; b < ab / 292; b++) {
                const float one = 1.0f;
                memcpy(p + b * 292, &one, 4);
                memset(p + b * 292 + 4, t % 2 ? 0x81 : 0x7f, 256);
                const int16_t bs = (int16_t)(16 * (t % 2 ? -127 : 127));
                for (int i = 0; i < 16; i++) memcpy(p + b * 292 + 260 + 2 * i, &bs, 2);
            }
        }
    }
    const strata_vec_dot_fn ref = strata_gemm_vec_dot(STRATA_GEMM_SCALAR, type);
    const strata_vec_dot_fn exact = strata_kernels_for(STRATA_ISA_SCALAR)->vec_dot[type];
    for (int t = 0; t < 2; t++) {
        float c, e;
        ref(n, &c, w, a + t * ab);
        exact(n, &e, w, a + t * ab);
        CHECK(fabs((double)c - e) <= 1e-5 * fabs(e) + 1e-30, "%s extremes tok %d: canonical %.9g, exact %.9g",
              strata_type_name(type), t, c, e);
    }
    for (int lv = STRATA_GEMM_AVX2; lv < STRATA_GEMM_LEVEL_COUNT; lv++) {
        if (!strata_gemm_level_runs((enum strata_gemm_level)lv)) continue;
        struct strata_pool *pool;
        struct strata_gemm *g;
        if (strata_pool_create(&pool, 1) || strata_gemm_create(&g, 1, (enum strata_gemm_level)lv)) continue;
        float y[16];
        struct strata_mm_job job = {{w, type, (uint32_t)n, 1, rb}, a, ab, NULL, 16, y, 1, NULL};
        CHECK(strata_gemm_run(g, pool, &job, 1) == 0, "gemm_run");
        for (int t = 0; t < 16; t++) {
            float want;
            ref(n, &want, w, a + t * ab);
            CHECK(!memcmp(&want, &y[t], 4), "%s extremes [%s] tok %d: gemm %.9g, dot %.9g", strata_type_name(type),
                  strata_gemm_level_name(lv), t, y[t], want);
        }
        strata_gemm_free(g);
        strata_pool_free(pool);
    }
    char name[64];
    snprintf(name, sizeof name, "integer extremes %s", strata_type_name(type));
    case_result(name, before);
    free(w), free(a);
}

// ---- benchmark --------------------------------------------------------------------------------

static double thread_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One thread: `experts` products of n_out x n weights with n_tok tokens each, as the quant
// kernels' multi-token dot, the canonical multi-token dot and the GEMM; GMAC/s of CPU time
// (insensitive to other load on the machine).
static void bench_type(uint32_t type, int n_tok, int experts, enum strata_gemm_level lv)
{
    // the expert shape of qwen3-30b-a3b's gate and up (STRATA_BENCH_DOWN=1: its down projection)
    const bool down = getenv("STRATA_BENCH_DOWN") != NULL;
    const int64_t n = down ? 768 : 2048;
    const int n_out = down ? 2048 : 768;
    const size_t rb = strata_type_row_bytes(type, (uint64_t)n), ab = act_bytes(type, n);
    const uint32_t vt = strata_type_traits(type)->vec_dot_type;
    uint64_t rng = 5;
    uint8_t *w = xmalloc(rb * n_out * experts), *a = xmalloc(ab * (size_t)n_tok);
    float *x = xmalloc((size_t)n * 4), *y = xmalloc((size_t)n_tok * n_out * 4);
    strata_quant_random(type, &rng, w, (int64_t)n_out * experts * n, 1.0f);
    for (int t = 0; t < n_tok; t++) {
        random_activations(&rng, x, n);
        strata_kernels()->quantize[vt](x, a + (size_t)t * ab, n);
    }
    const double macs = (double)n * n_out * experts * n_tok;
    double best[3] = {1e30, 1e30, 1e30};
    struct strata_pool *pool;
    struct strata_gemm *g;
    if (strata_pool_create(&pool, 1) || strata_gemm_create(&g, 1, lv)) return;
    struct strata_mm_job jobs[256];
    for (int e = 0; e < experts; e++)
        jobs[e] = (struct strata_mm_job){{w + rb * n_out * e, type, (uint32_t)n, (uint32_t)n_out, rb}, a, ab, NULL, n_tok, y,
                                         (size_t)n_out, NULL};
    strata_vec_dot_multi_fn multis[2] = {strata_kernels()->vec_dot_multi[type], strata_gemm_vec_dot_multi(lv, type)};
    for (int rep = 0; rep < 5; rep++) {
        for (int m = 0; m < 2; m++) {
            const double t0 = thread_seconds();
            for (int e = 0; e < experts; e++)
                for (int t = 0; t < n_tok; t += STRATA_DOT_TOKENS) {
                    const int na = n_tok - t < STRATA_DOT_TOKENS ? n_tok - t : STRATA_DOT_TOKENS;
                    const void *acts[STRATA_DOT_TOKENS];
                    for (int i = 0; i < na; i++) acts[i] = a + (size_t)(t + i) * ab;
                    for (int r = 0; r < n_out; r++) {
                        float s[STRATA_DOT_TOKENS];
                        const void *wr = w + rb * ((size_t)n_out * e + r);
                        if (multis[m]) multis[m](n, s, wr, acts, na);
                        else  // no quant multi-dot (MXFP4, Q4_0): the one-token dot per token, as ops.c
                            for (int i = 0; i < na; i++) strata_kernels()->vec_dot[type](n, &s[i], wr, acts[i]);
                        y[r] = s[0];
                    }
                }
            best[m] = fmin(best[m], thread_seconds() - t0);
        }
        const double t0 = thread_seconds();
        strata_gemm_run(g, pool, jobs, experts);
        best[2] = fmin(best[2], thread_seconds() - t0);
    }
    printf("%-5s %3d tokens [%s]: quant multi-dot %6.1f, canonical multi-dot %6.1f, gemm %6.1f GMAC/s\n",
           strata_type_name(type), n_tok, strata_gemm_level_name(lv), macs / best[0] / 1e9, macs / best[1] / 1e9,
           macs / best[2] / 1e9);
    strata_gemm_free(g);
    strata_pool_free(pool);
    free(w), free(a), free(x), free(y);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    if (argc >= 2 && strcmp(argv[1], "--bench") == 0) {
        const int toks[2] = {argc >= 3 ? atoi(argv[2]) : 8, argc >= 3 ? atoi(argv[2]) : 32};
        const enum strata_gemm_level lv = strata_gemm_level_for(strata_isa_detect());
        const int experts = argc >= 4 ? atoi(argv[3]) : 8;
        if (experts < 1 || experts > 256) return 2;
        for (size_t k = 0; k < N_TYPES; k++)
            for (int i = 0; i < (argc >= 3 ? 1 : 2) && strata_gemm_supports(lv, g_types[k]) &&
                            (argc < 5 || strcmp(argv[4], strata_type_name(g_types[k])) == 0);
                 i++)
                bench_type(g_types[k], toks[i], experts, lv);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "--seed") == 0) seed = strtoull(argv[2], NULL, 0);
    printf("seed %llu; levels:", (unsigned long long)seed);
    for (int lv = 0; lv < STRATA_GEMM_LEVEL_COUNT; lv++)
        if (strata_gemm_level_runs((enum strata_gemm_level)lv)) printf(" %s", strata_gemm_level_name(lv));
    printf("\n");
    uint64_t rng = seed;
    for (size_t k = 0; k < N_TYPES; k++) {
        const uint32_t type = g_types[k];
        const int64_t bs = strata_type_traits(type)->block_size;
        test_dots(type, bs, &rng);
        test_dots(type, 8 * bs, &rng);
        if (bs == 32) test_dots(type, 7 * bs, &rng);
        test_gemm(type, &rng);
        if (k < 6) test_extremes(type, &rng);  // the byte patterns of Q8_0, the K-quants, MXFP4, Q4_0
    }
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
