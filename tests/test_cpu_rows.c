// The CPU backend's per-row ops on its pool: rmsnorm, rope (plain, M-RoPE sections, YaRN
// layout), swiglu, swiglu_oai, add, moe_combine and the activation rounding of mm give the same
// bits on 1 thread and on 3 (each thread a share of the rows), for a prompt-sized pass (on the
// pool) and a decode-sized one (on the calling thread), with odd sizes so that the shares and
// swiglu's runs of 64 end mid-row. And the pool's account of where its threads' time went
// (threads_info: runs, time in runs, the caller's wait for the last thread, work summed).
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/ops.h"
#include "backend/cpu/pool.h"
#include "quant/quant.h"

#include "check.h"
#include "util/time.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static float frand(float scale)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return scale * ((float)(g_rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f);
}

static float *fill(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand(scale);
    return p;
}

enum { N_OUT = 10 };

// Every op once on backend be over inputs made from seed; outputs into out[0..N_OUT).
static void run_ops(struct strata_backend *be, int n_tok, uint64_t seed, float **out, size_t *len)
{
    const struct strata_backend_i *bi = be->iface;
    void *c = be->ctx;
    const uint32_t E = 1000, H = 5, D = 64, K = 3, F = 333;
    g_rng = seed;
    const struct strata_backend_reserve r = {.max_tok = n_tok, .max_rows = n_tok * (int)K, .max_n_in = E,
                                             .max_ctx = 64};
    CHECK(bi->reserve(c, &r) == 0, "reserve");
    int32_t *pos = malloc((size_t)n_tok * sizeof *pos), *route = malloc((size_t)n_tok * K * sizeof *route);
    for (int t = 0; t < n_tok; t++) pos[t] = 7 * t + 3;
    for (int i = 0; i < n_tok * (int)K; i++) route[i] = (i * 7 + 1) % (n_tok * (int)K);
    float *x = fill((size_t)n_tok * E, 2.0f), *w = fill(E, 1.0f);
    int o = 0;
    // rmsnorm, into a wider stride
    len[o] = (size_t)n_tok * (E + 8);
    out[o] = calloc(len[o], sizeof(float));
    CHECK(bi->rmsnorm(c, out[o], E + 8, x, E, w, n_tok, E, 1e-6f) == 0, "rmsnorm");
    o++;
    // rope: plain NeoX, with M-RoPE sections, and the YaRN layout of rope_ext
    const int32_t sec[4] = {11, 11, 10, 0};
    // YaRN at factor 4 (ramp over pairs 8..20), NeoX pairs
    const struct strata_rope_ext ext = {.n_dims = D, .mode = STRATA_ROPE_NEOX, .freq_base = 10000.0f,
                                        .freq_scale = 0.25f, .ext_factor = 1.0f, .attn_factor = 1.0f,
                                        .corr_dims = {8.0f, 20.0f}, .theta_scale = 0.75f};
    for (int v = 0; v < 3; v++, o++) {
        len[o] = (size_t)n_tok * H * D;
        out[o] = fill(len[o], 1.0f);
        const struct strata_rope_op op = {.x = out[o], .tok_stride = H * D, .head_stride = D, .n_tok = n_tok,
                                          .n_head = H, .pos = pos, .n_rot = D, .freq_base = 1e6f,
                                          .sections = v == 1 ? sec : NULL, .ext = v == 2 ? &ext : NULL};
        CHECK(bi->rope(c, &op) == 0, "rope %d", v);
    }
    // swiglu and swiglu_oai over n_tok * F + 5 floats (not a multiple of 64)
    const size_t nf = (size_t)n_tok * F + 5;
    float *g = fill(nf, 6.0f), *u = fill(nf, 6.0f);
    len[o] = nf;
    out[o] = malloc(nf * sizeof(float));
    CHECK(bi->swiglu(c, out[o], g, u, nf) == 0, "swiglu");
    o++;
    len[o] = nf;
    out[o] = malloc(nf * sizeof(float));
    CHECK(bi->swiglu_oai(c, out[o], g, u, nf, 1.702f, 7.0f) == 0, "swiglu_oai");
    o++;
    // add, from a strided x
    len[o] = (size_t)n_tok * E;
    out[o] = fill(len[o], 1.0f);
    CHECK(bi->add(c, out[o], x, E, n_tok, E - 3) == 0, "add");
    o++;
    // moe_combine, with and without a shared expert
    float *rows = fill((size_t)n_tok * K * E, 1.0f), *wt = fill((size_t)n_tok * K, 1.0f), *sh = fill((size_t)n_tok * E, 1.0f);
    for (int v = 0; v < 2; v++, o++) {
        len[o] = (size_t)n_tok * E;
        out[o] = fill(len[o], 1.0f);
        const struct strata_moe_combine_op op = {.x = out[o], .rows = rows, .route_of = route, .weight = wt,
                                                 .shared = v ? sh : NULL, .n_tok = n_tok, .k = (int)K, .n = E};
        CHECK(bi->moe_combine(c, &op) == 0, "moe_combine");
    }
    // mm: its activation rounding (Q8_K for Q4_K, Q8_0 for Q8_0) of the same rows in two blocks
    const uint32_t n_in = 512, n_out = 37;
    struct strata_mat wq[2] = {{.type = STRATA_TYPE_Q4_K, .n_in = n_in, .n_out = n_out},
                               {.type = STRATA_TYPE_Q8_0, .n_in = n_in, .n_out = n_out}};
    void *wdata[2];
    for (int m = 0; m < 2; m++) {
        wq[m].row_bytes = strata_type_row_bytes(wq[m].type, n_in);
        wdata[m] = malloc(wq[m].row_bytes * n_out);
        uint64_t rs = seed + (uint64_t)m;
        CHECK(strata_quant_random(wq[m].type, &rs, wdata[m], (int64_t)n_in * n_out, 0.05f) == 0, "weights");
        wq[m].data = wdata[m];
    }
    float *xa = fill((size_t)n_tok * n_in, 3.0f);
    len[o] = (size_t)n_tok * n_out * 2;
    out[o] = malloc(len[o] * sizeof(float));
    const struct strata_mm_op ops[2] = {
        {wq[0], xa, n_in, n_tok, NULL, n_tok, out[o], n_out, NULL, NULL},
        {wq[1], xa, n_in, n_tok, NULL, n_tok, out[o] + (size_t)n_tok * n_out, n_out, NULL, NULL}};
    CHECK(bi->mm(c, ops, 2) == 0, "mm");
    o++;
    CHECK(o == N_OUT, "outputs");
    free(pos), free(route), free(x), free(w), free(g), free(u), free(rows), free(wt), free(sh), free(xa);
    free(wdata[0]), free(wdata[1]);
}

// Thread ith sleeps 2 + 10 * ith ms: sleeping, not spinning, so that the figures do not depend on
// how many cores the machine has. The gaps are wide so that a loaded machine (CI runs the parity
// tests beside this one), which oversleeps by milliseconds, cannot close them.
static void sleep_by_rank(void *arg, int ith, int nth)
{
    (void)arg, (void)nth;
    const struct timespec ts = {0, (2 + 10 * ith) * 1000000L};
    nanosleep(&ts, NULL);
}

static void pool_counters_case(void)
{
    const int f0 = g_failures;
    struct strata_pool *p = NULL;
    CHECK(strata_pool_create(&p, 3) == 0, "pool");
    if (!p) return;
    struct strata_pool_counters c0, c1;
    strata_pool_counters(p, &c0);
    CHECK(c0.n_threads == 3 && c0.runs == 0 && c0.run_s == 0 && c0.busy_s == 0 && c0.tail_s == 0, "fresh counters");
    const int R = 5;
    for (int r = 0; r < R; r++) strata_pool_run(p, sleep_by_rank, NULL);
    strata_pool_counters(p, &c1);
    // each run: the threads work 2 + 12 + 22 ms and the run lasts >= 22 ms; the caller (2 ms) waits
    // 20 ms for the last one, less whatever its own sleep overran (10 ms of margin), and never the 2 ms
    // of its own work (a sleep never ends early); the work cannot exceed the threads' time in the runs
    CHECK(c1.runs == (uint64_t)R, "runs %llu", (unsigned long long)c1.runs);
    CHECK(c1.busy_s >= R * 0.036 && c1.busy_s <= 3 * c1.run_s + 1e-6, "busy %.4f s, runs %.4f s", c1.busy_s, c1.run_s);
    CHECK(c1.run_s >= R * 0.022, "runs %.4f s", c1.run_s);
    CHECK(c1.tail_s >= R * 0.010 && c1.tail_s <= c1.run_s - R * 0.0019, "tail %.4f s of %.4f s", c1.tail_s, c1.run_s);
    strata_pool_free(p);
    // one thread: the run is the work, no one to wait for
    CHECK(strata_pool_create(&p, 1) == 0, "pool");
    if (p) {
        strata_pool_run(p, sleep_by_rank, NULL);
        strata_pool_counters(p, &c1);
        CHECK(c1.runs == 1 && c1.busy_s >= 0.002 && c1.tail_s == 0 && c1.busy_s <= c1.run_s, "one thread: busy %.4f run %.4f",
              c1.busy_s, c1.run_s);
        strata_pool_free(p);
    }
    // the backend reports its pool's counters
    struct strata_backend be;
    const struct strata_backend_params bp = {STRATA_BACKEND_CPU, 2, 0, false};
    CHECK(strata_backend_open(&be, &bp) == 0, "open");
    CHECK(be.iface->threads_info != NULL, "threads_info offered");
    if (be.iface->threads_info) {
        struct strata_backend_threads t0, t1;
        be.iface->threads_info(be.ctx, &t0);
        float *a[N_OUT];
        size_t la[N_OUT];
        run_ops(&be, 301, 7, a, la);
        for (int i = 0; i < N_OUT; i++) free(a[i]);
        be.iface->threads_info(be.ctx, &t1);
        CHECK(t1.n_threads == 2 && t1.runs > t0.runs && t1.run_s > t0.run_s && t1.busy_s > t0.busy_s &&
                  t1.busy_s - t0.busy_s <= 2 * (t1.run_s - t0.run_s) + 1e-6,
              "backend counters: %llu runs, %.5f s in runs, %.5f s busy", (unsigned long long)(t1.runs - t0.runs),
              t1.run_s - t0.run_s, t1.busy_s - t0.busy_s);
    }
    strata_backend_close(&be);
    case_result("the pool's counters: runs, time in runs, the wait for the last thread, work", f0);
}

// rmsnorm's mean of squares from eight chains (and the AVX2 norm's sixteen) gives ggml's one-chain
// float on every row, and the AVX2 norm the scalar one's bits: random
// rows of many lengths and scales (wide ranges too, where the small squares round away), rows
// whose mean is exactly halfway between two floats (the bound cannot decide: the one chain
// runs), and rows with an infinity or a NaN.
// strata_rmsnorm_avx2 against the scalar strata_rmsnorm, bit for bit (NaNs as NaNs); true where
// the CPU has no AVX2
static bool same_norm(const float *x, uint32_t n)
{
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return true;
    static float w[4096], a[4096], b[4096];
    for (uint32_t i = 0; i < n; i++) w[i] = 0.5f + (float)(i % 7) * 0.25f;
    strata_rmsnorm(a, x, w, n, 1e-6f);
    strata_rmsnorm_avx2(b, x, w, n, 1e-6f);
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof a[i]) != 0 && !(isnan(a[i]) && isnan(b[i]))) return false;
    return true;
}

// SwiGLU's SiLU (ops.h: ggml_v_silu of the AVX-512 builds) in the AVX2 and AVX-512 loops against
// the scalar function, element by element, over x from -130 to 130 in steps of 2^-7 (the polynomial,
// the powers past the normal floats: e^-x subnormal from x = 87.3, infinite below x = -88.7) and
// signed zeros; and that the polynomial is not libm's (x / (1 + expf(-x)) rounds otherwise on
// about a fifth of the points; the parity tests hold the polynomial to llama.cpp's own values).
static void silu_case(void)
{
    const int f0 = g_failures;
    const size_t n = 2 * 130 * 128 + 3;
    float *g = malloc(n * sizeof *g), *u = malloc(n * sizeof *u), *ys = malloc(n * sizeof *ys), *yv = malloc(n * sizeof *yv);
    for (size_t i = 0; i + 3 < n; i++) g[i] = -130.0f + (float)i / 128.0f, u[i] = 1.0f + (float)(i % 7) / 8.0f;
    g[n - 3] = 0.0f, g[n - 2] = -0.0f, g[n - 1] = 1e-30f, u[n - 3] = u[n - 2] = u[n - 1] = 1.0f;
    for (size_t i = 0; i < n; i++) ys[i] = strata_silu(g[i]) * u[i];
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    for (int k = 0; k < 4; k++) {  // AVX2, AVX-512, each with u and without (silu alone)
        if (!(k & 1 ? avx512 : avx2)) continue;
        const float *uk = k < 2 ? u : NULL;
        if (!uk)
            for (size_t i = 0; i < n; i++) ys[i] = strata_silu(g[i]);
        memset(yv, 0, n * sizeof *yv);
        (k & 1 ? strata_swiglu_avx512 : strata_swiglu_avx2)(yv, g, uk, n);
        size_t bad = 0, first = n;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&ys[i], &yv[i], sizeof(float)) != 0) bad++, first = first < n ? first : i;
        CHECK(bad == 0, "%s %s: %zu of %zu elements differ from the scalar SiLU (first x = %g: %a against %a)",
              uk ? "swiglu" : "silu", k & 1 ? "avx512" : "avx2", bad, n, first < n ? g[first] : 0.0f,
              first < n ? yv[first] : 0.0f, first < n ? ys[first] : 0.0f);
    }
    // where x / (1 + expf(-x)) rounds otherwise
    size_t differ = 0;
    for (size_t i = 0; i + 3 < n; i++) {
        const float libm = g[i] / (1.0f + expf(-g[i]));
        differ += memcmp(&libm, &(float){strata_silu(g[i])}, sizeof(float)) != 0;
    }
    CHECK(differ > 0, "the polynomial SiLU differs from libm's somewhere in the sweep");
    CHECK(strata_silu(0.0f) == 0.0f && strata_silu(-200.0f) == -0.0f && strata_silu(200.0f) == 200.0f,
          "silu(0) %g, silu(-200) %g, silu(200) %g", strata_silu(0.0f), strata_silu(-200.0f), strata_silu(200.0f));
    free(g), free(u), free(ys), free(yv);
    printf("     silu: the polynomial's bits differ from libm's on %zu of %zu points of the sweep\n", differ, n - 3);
    case_result("SiLU and SwiGLU: the AVX2 and AVX-512 loops give the scalar function's bits from -130 to 130", f0);
}

static void mean_sq_case(void)
{
    const int f0 = g_failures;
    static const uint32_t lens[] = {1, 2, 7, 8, 9, 64, 128, 129, 1000, 2048, 4096};
    float *x = malloc(4096 * sizeof *x);
    int bad = 0, rows = 0;
    g_rng = 7;
    for (int rep = 0; rep < 300; rep++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++, rows++) {
            const uint32_t n = lens[l];
            for (uint32_t i = 0; i < n; i++) {
                const float v = frand(1.0f);
                // every third row spans about 40 binades (squares from 1e-12 to 1e12)
                x[i] = rep % 3 == 0 ? v * powf(10.0f, frand(6.0f)) : v * (float)(1 + rep % 7);
            }
            bad += strata_mean_sq(x, n) != strata_mean_sq_chain(x, n);
            bad += !same_norm(x, n);
        }
    // x0 = 1, x1 = 1 + k 2^-11 with k odd and x1^2 in [3, 4): x1^2 is exact, 1 + x1^2 in [4, 5)
    // has its last bit at 2^-22, so the mean (half of it) is a midpoint of floats in [2, 2.5)
    int mid = 0, crafted = 0;
    for (int k = 1501; k < 2048; k += 2, rows++, crafted++) {
        x[0] = 1.0f;
        x[1] = 1.0f + (float)k * 0x1p-11f;
        const double sum = 1.0 + (double)(x[1] * x[1]), m = sum / 2;
        mid += (double)(float)m != m;
        bad += strata_mean_sq(x, 2) != strata_mean_sq_chain(x, 2);
        for (int i = 2; i < 32; i++) x[i] = 0.0f;  // the same midpoint through the 16-wide loop
        bad += !same_norm(x, 32);
    }
    CHECK(mid == crafted, "%d of the %d crafted rows' means are midpoints", mid, crafted);
    const float specials[] = {INFINITY, -INFINITY, NAN};
    for (int i = 0; i < 3; i++, rows++) {
        for (uint32_t j = 0; j < 100; j++) x[j] = frand(1.0f);
        x[37] = specials[i];
        const float a = strata_mean_sq(x, 100), b = strata_mean_sq_chain(x, 100);
        bad += memcmp(&a, &b, sizeof a) != 0 || !same_norm(x, 100);
    }
    CHECK(bad == 0, "mean of squares: %d of %d rows differ from the one chain", bad, rows);
    free(x);
    case_result("rmsnorm's mean of squares: eight chains give the one chain's float (random, midpoint and "
                "non-finite rows)", f0);
}

// --bench-pool [threads]: what a run of the pool costs besides its work, the caller's wall time a
// run of 20,000: an empty function, and items claimed guided (strata_chunk_next_guided) over 768
// empty items (a decode step's gate and up items at 16 threads). A decode step makes about 7 runs
// a layer, 337 a token on 48 layers.
struct claim_job {
    atomic_int next;
    int n;
};

static void empty_fn(void *arg, int ith, int nth) { (void)arg, (void)ith, (void)nth; }

static void claim_fn(void *arg, int ith, int nth)
{
    (void)ith;
    struct claim_job *j = arg;
    int b, e;
    while (strata_chunk_next_guided(&j->next, j->n, nth, &b, &e)) __asm__ volatile("" ::: "memory");
}

static int bench_pool(int threads)
{
    struct strata_pool *p = NULL;
    if (strata_pool_create(&p, threads) != 0) return 1;
    const int R = 20000;
    for (int k = 0; k < 2; k++) {
        struct claim_job j = {.n = 768};
        for (int r = 0; r < 1000; r++) strata_pool_run(p, empty_fn, NULL);  // warm: the workers spinning
        const double t0 = strata_now();
        for (int r = 0; r < R; r++) {
            if (k == 1) atomic_store_explicit(&j.next, 0, memory_order_relaxed);
            strata_pool_run(p, k ? claim_fn : empty_fn, k ? (void *)&j : NULL);
        }
        const double us = (strata_now() - t0) * 1e6 / R;
        printf("pool %d threads: %.2f us a run (%s)\n", strata_pool_size(p), us,
               k ? "768 empty items claimed guided" : "empty");
    }
    strata_pool_free(p);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--bench-pool") == 0) return bench_pool(argc >= 3 ? atoi(argv[2]) : 0);
    mean_sq_case();
    silu_case();
    static const char *const names[N_OUT] = {"rmsnorm", "rope", "rope M-RoPE", "rope YaRN", "swiglu", "swiglu_oai",
                                             "add", "moe_combine", "moe_combine + shared", "mm rounding"};
    for (int pass = 0; pass < 2; pass++) {
        const int n_tok = pass ? 3 : 301;  // decode-sized: below the pool's threshold
        const int f0 = g_failures;
        struct strata_backend one, three;
        const struct strata_backend_params p1 = {STRATA_BACKEND_CPU, 1, 0, false}, p3 = {STRATA_BACKEND_CPU, 3, 0, false};
        CHECK(strata_backend_open(&one, &p1) == 0 && strata_backend_open(&three, &p3) == 0, "open");
        float *a[N_OUT], *b[N_OUT];
        size_t la[N_OUT], lb[N_OUT];
        run_ops(&one, n_tok, 42, a, la);
        run_ops(&three, n_tok, 42, b, lb);
        for (int i = 0; i < N_OUT; i++) {
            CHECK(la[i] == lb[i] && memcmp(a[i], b[i], la[i] * sizeof(float)) == 0, "%d tokens: %s differs on 3 threads",
                  n_tok, names[i]);
            free(a[i]);
            free(b[i]);
        }
        // the scalar kernels' backend: the ISA paths of the elementwise ops (rows_avx2.c) give the
        // scalar loops' bits
        setenv("STRATA_ISA", "scalar", 1);
        struct strata_backend sc;
        CHECK(strata_backend_open(&sc, &p3) == 0, "open scalar");
        unsetenv("STRATA_ISA");
        run_ops(&sc, n_tok, 42, b, lb);
        run_ops(&one, n_tok, 42, a, la);
        for (int i = 0; i < N_OUT; i++) {
            CHECK(la[i] == lb[i] && memcmp(a[i], b[i], la[i] * sizeof(float)) == 0,
                  "%d tokens: %s differs between the scalar kernels and the CPU's best", n_tok, names[i]);
            free(a[i]);
            free(b[i]);
        }
        strata_backend_close(&sc);
        strata_backend_close(&one);
        strata_backend_close(&three);
        char name[96];
        snprintf(name, sizeof name, "%d tokens: every per-row op the same bits on 1 and 3 threads, scalar and best ISA", n_tok);
        case_result(name, f0);
    }
    pool_counters_case();
    printf("%s (%d failed checks)\n", g_failures ? "FAIL" : "ok", g_failures);
    return g_failures ? 1 : 0;
}
