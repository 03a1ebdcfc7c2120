// Tests of the low-bit formats (Q4_0, Q4_1, Q5_0, Q5_1, MXFP4, IQ4_NL, Q2_K, Q3_K, IQ2_XXS,
// IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS) and of Q8_1 activation rounding, on fresh
// random blocks (strata_quant_random) and activations:
//   - every ISA's dot product against the scalar reference, and the scalar reference against
//     float64 products of the dequantised rows;
//   - activation rounding bit-exact across ISAs; multi-token dots bit-exact to vec_dot;
//   - synthetic blocks have the requested spread;
//   - known answers from llama.cpp itself, when its prebuilt CPU libraries are installed (the
//     oracle's node_modules): strata's dequantisation equals ggml's dequantize_row_* (this proves
//     the grid tables and layouts), Q8_1 rounding equals ggml's quantize_row_q8_1 byte for byte,
//     and strata's dot products equal ggml's vec_dot on the same bytes within float rounding.
//
//   test_quant_lowbit [--seed N]
//   test_quant_lowbit --bench [--ggml LIB.so]   GB/s of weight bytes per type and ISA (64 MiB of
//                                               weights, one thread) next to the read floor
//
// Tolerance of dot products: |x - y| <= 1e-5 * S + 1e-6 |y|, S = sum |w_i a_i| (float rounding of
// block factors and of accumulation is ~1e-7 S; a wrong code or scale is ~1e-2 S or more).
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/kernels.h"
#include "quant/quant.h"

static int g_failures;
static long g_checks;

#define CHECK(cond, ...)                                            \
    do {                                                            \
        g_checks++;                                                 \
        if (!(cond) && g_failures++ < 40) {                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);             \
            printf(__VA_ARGS__);                                    \
            printf("\n");                                           \
        }                                                           \
    } while (0)

struct lowbit_type {
    uint32_t type;
    const char *ggml_name;  // ggml's suffix: dequantize_row_<name>, ggml_vec_dot_<name>_q8_<vdt>
};

static const struct lowbit_type g_types[] = {
    {STRATA_TYPE_Q4_0, "q4_0"},       {STRATA_TYPE_Q4_1, "q4_1"},     {STRATA_TYPE_Q5_0, "q5_0"},
    {STRATA_TYPE_Q5_1, "q5_1"},       {STRATA_TYPE_MXFP4, "mxfp4"},   {STRATA_TYPE_IQ4_NL, "iq4_nl"},
    {STRATA_TYPE_Q2_K, "q2_K"},       {STRATA_TYPE_Q3_K, "q3_K"},     {STRATA_TYPE_IQ2_XXS, "iq2_xxs"},
    {STRATA_TYPE_IQ2_XS, "iq2_xs"},   {STRATA_TYPE_IQ2_S, "iq2_s"},   {STRATA_TYPE_IQ3_XXS, "iq3_xxs"},
    {STRATA_TYPE_IQ3_S, "iq3_s"},     {STRATA_TYPE_IQ1_S, "iq1_s"},   {STRATA_TYPE_IQ1_M, "iq1_m"},
    {STRATA_TYPE_IQ4_XS, "iq4_xs"},
};
#define N_TYPES (sizeof(g_types) / sizeof(g_types[0]))

typedef void (*ggml_dequant_fn)(const void *x, float *y, int64_t k);
typedef void (*ggml_quantize_fn)(const float *x, void *y, int64_t k);
typedef void (*ggml_vec_dot_fn)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by,
                                int nrc);

struct ggml_libs {
    void *base, *cpu;
};

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

// ---- llama.cpp's kernels (optional) -----------------------------------------------------------

// libggml-base.so and libggml-cpu-VARIANT.so from the oracle's prebuilt (or `cpu_lib`): the
// haswell variant by default, which any AVX2 machine runs.
static int open_ggml(struct ggml_libs *g, const char *cpu_lib)
{
    char dir[4096], path[4200];
    memset(g, 0, sizeof(*g));
    const char *root = getenv("STRATA_ROOT"), *nm = getenv("ORACLE_NODE_MODULES");
    const char *rel = "@node-llama-cpp/linux-x64/bins/linux-x64";
    if (cpu_lib) {
        const char *slash = strrchr(cpu_lib, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - cpu_lib) : 1, slash ? cpu_lib : ".");
    } else {
        snprintf(dir, sizeof(dir), "%s/tests/oracle/node_modules/%s", root ? root : ".", rel);
        snprintf(path, sizeof(path), "%s/libggml-base.so", dir);
        if (access(path, R_OK) != 0 && nm) snprintf(dir, sizeof(dir), "%s/%s", nm, rel);
    }
    snprintf(path, sizeof(path), "%s/libggml-base.so", dir);
    g->base = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!g->base) return -1;
    if (cpu_lib) snprintf(path, sizeof(path), "%s", cpu_lib);
    else snprintf(path, sizeof(path), "%s/libggml-cpu-haswell.so", dir);
    g->cpu = dlopen(path, RTLD_NOW);
    if (!g->cpu) return -1;
    void (*init)(void) = (void (*)(void))dlsym(g->cpu, "ggml_cpu_init");
    if (init) init();
    return 0;
}

static const char *vdt_suffix(uint32_t vdt)
{
    return vdt == STRATA_TYPE_Q8_K ? "q8_K" : vdt == STRATA_TYPE_Q8_1 ? "q8_1" : "q8_0";
}

static ggml_vec_dot_fn ggml_dot(const struct ggml_libs *g, const struct lowbit_type *t)
{
    char name[64];
    snprintf(name, sizeof(name), "ggml_vec_dot_%s_%s", t->ggml_name,
             vdt_suffix(strata_type_traits(t->type)->vec_dot_type));
    return g->cpu ? (ggml_vec_dot_fn)dlsym(g->cpu, name) : NULL;
}

// ---- helpers ---------------------------------------------------------------------------------

// Activations shaped like a transformer's: normal, with a few large outliers.
static void random_activations(uint64_t *rng, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = strata_rng_normal(rng);
        if (strata_rng_uniform(rng) < 0.01f) x[i] *= 20.0f;
    }
}

static bool close_enough(double x, double y, double S)
{
    return fabs(x - y) <= 1e-5 * S + 1e-6 * fabs(y);
}

// ---- tests -----------------------------------------------------------------------------------

static void test_type(const struct lowbit_type *t, int64_t n, const struct ggml_libs *g, uint64_t *rng)
{
    const uint32_t type = t->type, vdt = strata_type_traits(type)->vec_dot_type;
    const char *name = strata_type_name(type);
    const struct strata_kernels *ref = strata_kernels_for(STRATA_ISA_SCALAR);
    size_t wb = strata_type_row_bytes(type, n), ab = strata_type_row_bytes(vdt, n);
    uint8_t *w = xmalloc(wb), *act = xmalloc(ab), *act2 = xmalloc(ab);
    float *x = xmalloc(n * sizeof(float)), *wf = xmalloc(n * sizeof(float)), *af = xmalloc(n * sizeof(float));
    float *gf = xmalloc(n * sizeof(float));

    CHECK(strata_type_computable(type), "%s computable", name);
    CHECK(strata_quant_random(type, rng, w, n, 0.02f) == 0, "%s random blocks", name);
    random_activations(rng, x, n);
    ref->quantize[vdt](x, act, n);
    ref->dequant[type](w, wf, n);

    // synthetic spread: RMS near the requested 0.02 (over >= 8 blocks: the scales jitter per block)
    double ss = 0.0;
    for (int64_t i = 0; i < n; i++) ss += (double)wf[i] * wf[i];
    double rms = sqrt(ss / n);
    CHECK(n < 2048 || (rms > 0.012 && rms < 0.032), "%s n=%lld: RMS %.4f of synthetic blocks, asked 0.02", name, (long long)n, rms);

    // scalar dot against float64 products of the dequantised rows
    double exact = 0.0, S = 0.0;
    {
        // dequantise the activation row from its blocks
        if (vdt == STRATA_TYPE_Q8_K) {
            for (int64_t b = 0; b < n / 256; b++) {
                float d;
                memcpy(&d, act + b * 292, 4);
                for (int i = 0; i < 256; i++) af[b * 256 + i] = d * (int8_t)act[b * 292 + 4 + i];
            }
        } else {
            size_t bsz = vdt == STRATA_TYPE_Q8_1 ? 36 : 34, off = bsz - 32;
            for (int64_t b = 0; b < n / 32; b++) {
                uint16_t h;
                memcpy(&h, act + b * bsz, 2);
                float d;
                ref->dequant[STRATA_TYPE_F16](&h, &d, 1);
                for (int i = 0; i < 32; i++) af[b * 32 + i] = d * (int8_t)act[b * bsz + off + i];
            }
        }
        for (int64_t i = 0; i < n; i++) {
            exact += (double)wf[i] * af[i];
            S += fabs((double)wf[i] * af[i]);
        }
    }
    float s_ref;
    ref->vec_dot[type](n, &s_ref, w, act);
    // Q4_1/Q5_1 use the activation's f16 sum s for the min term: allow its rounding (2^-11 of
    // |m| sum |a|) on top
    double slack = 0.0;
    if (vdt == STRATA_TYPE_Q8_1)
        for (int64_t i = 0; i < n; i++) slack += fabs((double)af[i]) * 0.06 / 2048.0;
    CHECK(fabs(s_ref - exact) <= 1e-5 * S + slack + 1e-6 * fabs(exact),
          "%s n=%lld: scalar dot %.9g, float64 of dequantised rows %.9g (S %.3g)", name, (long long)n, s_ref, exact, S);

    // every ISA against the scalar reference: activation bytes identical, dot within rounding
    for (int isa = 1; isa < STRATA_ISA_COUNT; isa++) {
        const struct strata_kernels *k = strata_kernels_for((enum strata_isa)isa);
        if (!k) continue;
        k->quantize[vdt](x, act2, n);
        CHECK(memcmp(act, act2, ab) == 0, "%s n=%lld: %s activation rounding differs from scalar", name,
              (long long)n, strata_isa_name((enum strata_isa)isa));
        float s;
        k->vec_dot[type](n, &s, w, act);
        CHECK(close_enough(s, s_ref, S), "%s n=%lld: %s dot %.9g, scalar %.9g (S %.3g)", name, (long long)n,
              strata_isa_name((enum strata_isa)isa), s, s_ref, S);
        k->dequant[type](w, gf, n);
        CHECK(memcmp(gf, wf, n * sizeof(float)) == 0, "%s: %s dequant differs from scalar", name,
              strata_isa_name((enum strata_isa)isa));
    }

    // llama.cpp's own kernels on the same bytes
    if (g->base) {
        char fname[64];
        snprintf(fname, sizeof(fname), "dequantize_row_%s", t->ggml_name);
        ggml_dequant_fn gdq = (ggml_dequant_fn)dlsym(g->base, fname);
        CHECK(gdq != NULL, "ggml has %s", fname);
        if (gdq) {
            gdq(w, gf, n);
            int bad = 0;
            for (int64_t i = 0; i < n; i++)
                if (!(fabsf(gf[i] - wf[i]) <= 2.5e-7f * fabsf(gf[i]))) bad++;
            CHECK(bad == 0, "%s n=%lld: %d of %lld values differ from ggml's %s", name, (long long)n, bad,
                  (long long)n, fname);
        }
        ggml_vec_dot_fn gdot = ggml_dot(g, t);
        CHECK(gdot != NULL, "ggml has a vec_dot for %s", name);
        if (gdot) {
            float s;
            gdot((int)n, &s, 0, w, 0, act, 0, 1);
            CHECK(close_enough(s_ref, s, S), "%s n=%lld: dot %.9g, ggml's %.9g (S %.3g)", name, (long long)n,
                  s_ref, s, S);
        }
    }
    free(w), free(act), free(act2), free(x), free(wf), free(af), free(gf);
}

// vec_dot_multi, where a table has one, against vec_dot of the same table on each row, bit for
// bit (results must not depend on how a matmul groups its tokens), for every row count.
static void test_multi(const struct lowbit_type *t, int64_t n, uint64_t *rng)
{
    const uint32_t type = t->type, vdt = strata_type_traits(type)->vec_dot_type;
    const size_t ab = strata_type_row_bytes(vdt, n);
    uint8_t *w = xmalloc(strata_type_row_bytes(type, n)), *act = xmalloc(STRATA_DOT_TOKENS * ab);
    float *x = xmalloc(n * sizeof(float));
    strata_quant_random(type, rng, w, n, 0.02f);
    const void *rows[STRATA_DOT_TOKENS];
    for (int r = 0; r < STRATA_DOT_TOKENS; r++) {
        random_activations(rng, x, n);
        strata_kernels_for(STRATA_ISA_SCALAR)->quantize[vdt](x, act + r * ab, n);
        rows[r] = act + r * ab;
    }
    for (int isa = 0; isa < STRATA_ISA_COUNT; isa++) {
        const struct strata_kernels *k = strata_kernels_for((enum strata_isa)isa);
        if (!k || !k->vec_dot_multi[type]) continue;
        float want[STRATA_DOT_TOKENS];
        for (int r = 0; r < STRATA_DOT_TOKENS; r++) k->vec_dot[type](n, &want[r], w, rows[r]);
        for (int n_act = 1; n_act <= STRATA_DOT_TOKENS; n_act++) {
            float got[STRATA_DOT_TOKENS];
            k->vec_dot_multi[type](n, got, w, rows + STRATA_DOT_TOKENS - n_act, n_act);
            for (int r = 0; r < n_act; r++)
                CHECK(!memcmp(&got[r], &want[STRATA_DOT_TOKENS - n_act + r], sizeof(float)),
                      "%s n=%lld: %s vec_dot_multi of %d rows, row %d: %.9g, vec_dot %.9g", strata_type_name(type),
                      (long long)n, strata_isa_name((enum strata_isa)isa), n_act, r, got[r],
                      want[STRATA_DOT_TOKENS - n_act + r]);
        }
    }
    free(w), free(act), free(x);
}

// Q8_1 rounding against ggml's x86 quantize_row_q8_1, byte for byte, with ties and zeros.
static void test_q8_1(const struct ggml_libs *g, uint64_t *rng)
{
    const int64_t n = 1024;
    float *x = xmalloc(n * sizeof(float));
    uint8_t *ours = xmalloc(36 * n / 32), *theirs = xmalloc(36 * n / 32);
    random_activations(rng, x, n);
    for (int i = 0; i < 32; i++) x[64 + i] = 0.0f;                        // an all-zero block
    for (int i = 0; i < 32; i++) x[128 + i] = (float)(i - 16) * 0.5f;     // halves: ties
    x[200] = 1e-30f;
    strata_kernels_for(STRATA_ISA_SCALAR)->quantize[STRATA_TYPE_Q8_1](x, ours, n);
    ggml_quantize_fn q = g->cpu ? (ggml_quantize_fn)dlsym(g->cpu, "quantize_row_q8_1") : NULL;
    if (q) {
        q(x, theirs, n);
        CHECK(memcmp(ours, theirs, 36 * n / 32) == 0, "Q8_1 rounding differs from ggml's quantize_row_q8_1");
    }
    free(x), free(ours), free(theirs);
}

// ---- benchmark ---------------------------------------------------------------------------------

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One thread streaming the buffer with 256-bit loads and prefetch: the bandwidth a kernel can reach.
__attribute__((target("avx2"))) static double read_floor_gbps(const uint8_t *p, size_t bytes)
{
    double best = 1e30;
    __m256i acc = _mm256_setzero_si256();
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now_seconds();
        __m256i a0 = _mm256_setzero_si256(), a1 = a0;
        for (size_t i = 0; i + 64 <= bytes; i += 64) {
            __builtin_prefetch(p + i + 2048, 0, 3);
            a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
            a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        }
        acc = _mm256_xor_si256(acc, _mm256_xor_si256(a0, a1));
        best = fmin(best, now_seconds() - t0);
    }
    volatile int sink = _mm256_extract_epi32(acc, 0);
    (void)sink;
    return (double)bytes / best / 1e9;
}

static double bench_rows(strata_vec_dot_fn fn, ggml_vec_dot_fn gfn, int64_t n, const uint8_t *w, size_t row_bytes,
                         int64_t rows, const void *act, float *out, int reps)
{
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_seconds();
        for (int64_t r = 0; r < rows; r++) {
            if (fn) fn(n, &out[r], w + r * row_bytes, act);
            else gfn((int)n, &out[r], 0, w + r * row_bytes, 0, act, 0, 1);
        }
        best = fmin(best, now_seconds() - t0);
    }
    return (double)row_bytes * (double)rows / best / 1e9;
}

static int run_bench(const char *ggml_lib)
{
    const int64_t n = 4096;
    const size_t set_bytes = 64u << 20;
    struct ggml_libs g;
    if (open_ggml(&g, ggml_lib) != 0) {
        if (ggml_lib) printf("cannot load llama.cpp's kernels: %s\n", dlerror());
        memset(&g, 0, sizeof(g));
    }
    uint8_t *w = xmalloc(set_bytes);
    float *x = xmalloc(n * sizeof(float)), *out = xmalloc(set_bytes / 256 * sizeof(float));
    uint8_t *act = xmalloc(n * 4);
    uint64_t rng = 1;
    memset(w, 1, set_bytes);
    double floor = __builtin_cpu_supports("avx2") ? read_floor_gbps(w, set_bytes) : NAN;
    printf("single-thread read floor on %zu MiB: %.1f GB/s; rows of %lld elements, one activation row\n",
           set_bytes >> 20, floor, (long long)n);
    printf("%-8s %-7s %10s %9s\n", "type", "isa", "GB/s", "of floor");
    random_activations(&rng, x, n);
    for (size_t k = 0; k < N_TYPES; k++) {
        uint32_t type = g_types[k].type, vt = strata_type_traits(type)->vec_dot_type;
        size_t row_bytes = strata_type_row_bytes(type, n);
        int64_t rows = (int64_t)(set_bytes / row_bytes);
        strata_quant_random(type, &rng, w, rows * n, 0.02f);
        strata_kernels_for(STRATA_ISA_SCALAR)->quantize[vt](x, act, n);
        strata_vec_dot_fn prev = NULL;
        for (int isa = -1; isa < STRATA_ISA_COUNT; isa++) {
            const struct strata_kernels *tab = isa >= 0 ? strata_kernels_for((enum strata_isa)isa) : NULL;
            ggml_vec_dot_fn gfn = isa < 0 ? ggml_dot(&g, &g_types[k]) : NULL;
            if (!tab && !gfn) continue;
            strata_vec_dot_fn fn = tab ? tab->vec_dot[type] : NULL;
            if (tab && fn == prev) continue;  // the ISA reuses the kernel of the one below
            prev = fn ? fn : prev;
            double gbps = bench_rows(fn, gfn, n, w, row_bytes, rows, act, out, isa == 0 ? 1 : 4);
            printf("%-8s %-7s %10.2f %9.2f\n", strata_type_name(type), tab ? strata_isa_name(tab->isa) : "ggml",
                   gbps, gbps / floor);
            fflush(stdout);
        }
    }
    free(w), free(x), free(out), free(act);
    return 0;
}

// ---- main ------------------------------------------------------------------------------------

int main(int argc, char **argv)
{
    uint64_t seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    const char *ggml_lib = NULL;
    bool bench = false;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--bench")) bench = true;
        else if (!strcmp(argv[i], "--ggml") && i + 1 < argc) ggml_lib = argv[++i];
        else {
            printf("usage: %s [--seed N] | --bench [--ggml path/libggml-cpu-VARIANT.so]\n", argv[0]);
            return 2;
        }
    }
    if (bench) return run_bench(ggml_lib);
    printf("test_quant_lowbit: seed %llu (reproduce with --seed %llu)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    uint64_t rng = seed;
    struct ggml_libs g;
    if (open_ggml(&g, ggml_lib) != 0) {
        printf("llama.cpp's CPU libraries not found: known-answer checks against ggml skipped\n");
        memset(&g, 0, sizeof(g));
    } else {
        printf("known answers from llama.cpp's prebuilt libggml-base.so / libggml-cpu-haswell.so\n");
    }
    test_q8_1(&g, &rng);
    for (size_t k = 0; k < N_TYPES; k++) {
        static const int64_t sizes[] = {256, 512, 2816, 4096};
        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
            test_type(&g_types[k], sizes[s], &g, &rng);
            test_multi(&g_types[k], sizes[s], &rng);
        }
        if (strata_type_traits(g_types[k].type)->block_size == 32) {  // odd block counts: kernels' tails
            test_type(&g_types[k], 96, &g, &rng);
            test_type(&g_types[k], 224, &g, &rng);
        }
    }
    if (g_failures) {
        printf("test_quant_lowbit: %d of %ld checks failed (seed %llu)\n", g_failures, g_checks,
               (unsigned long long)seed);
        return 1;
    }
    printf("test_quant_lowbit: all %ld checks passed\n", g_checks);
    return 0;
}
