// The CPU backend's products (cpu_mm) give every token the same bits whatever call it is in:
// for every computable weight type, at every ISA level this CPU runs and several thread counts,
// 128 tokens through one call and through calls of 1, 7, 8, 16 and 33 tokens give identical
// rows (backend.h, "Determinism"). Each call has the shapes the forward pass makes: two matrices
// on the same activations (gate and up), a gathered and scattered subset of the tokens (an
// expert) on the second matrix again (consecutive jobs on one matrix, as the output head of
// several sequences) and a matrix of another type beside them. The types with a canonical integer form
// (gemm.h) go through the GEMM driver, whose tile kernel takes the larger calls and the
// canonical dots the smaller ones; the others through the quant kernels' dots. Q8_0, the K-quants,
// MXFP4 and Q4_0 must take the GEMM at every level (gpt-oss's experts are MXFP4): a type that
// fell back to the quant dots would still pass the bit checks, so that is checked too.
//   test_cpu_mm [--seed N]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/gemm.h"
#include "check.h"

enum { N_IN = 512, N_OUT = 40, N_TOK = 128, N_OPS = 4 };


struct mats {
    void *w[N_OPS];
    uint32_t type[N_OPS];
};

// y_all[op][N_TOK][N_OUT]: the tokens t0 .. t0 + n - 1 of every op through one mm call. Op 2
// (the expert) takes the tokens with t % 3 != 1 of the call, gathered and scattered.
static int run_call(const struct strata_backend *be, const struct mats *m, const float *x, int t0, int n, float *y_all)
{
    struct strata_mm_op ops[N_OPS];
    int32_t rows[N_TOK];
    int n_sub = 0;
    for (int t = 0; t < n; t++)
        if ((t0 + t) % 3 != 1) rows[n_sub++] = t;
    for (int o = 0; o < N_OPS; o++) {
        const struct strata_mat w = {m->w[o], m->type[o], N_IN, N_OUT, strata_type_row_bytes(m->type[o], N_IN)};
        float *y = y_all + (size_t)o * N_TOK * N_OUT + (size_t)t0 * N_OUT;
        ops[o] = (struct strata_mm_op){.w = w, .x = x + (size_t)t0 * N_IN, .x_stride = N_IN, .x_n = n, .n_tok = n,
                                       .y = y, .y_stride = N_OUT};
        if (o == 2) ops[o].x_rows = rows, ops[o].y_rows = rows, ops[o].n_tok = n_sub;
    }
    return be->iface->mm(be->ctx, ops, N_OPS);
}

static void test_type(const struct strata_backend *be, uint32_t type, const float *x, uint64_t *rng, const char *where)
{
    static const int chunks[] = {1, 7, 8, 16, 33};
    const int f0 = g_failures;
    struct mats m;
    // ops 0, 1 and 2: the type under test; op 3: another type in the same call
    const uint32_t other = type == STRATA_TYPE_Q8_0 ? STRATA_TYPE_F16 : STRATA_TYPE_Q8_0;
    for (int o = 0; o < N_OPS; o++) {
        m.type[o] = o == 3 ? other : type;
        if (o == 2) {  // the matrix of op 1 again (consecutive jobs on one matrix: one unit)
            m.w[o] = m.w[1];
            continue;
        }
        const size_t bytes = strata_type_row_bytes(m.type[o], N_IN) * N_OUT;
        m.w[o] = xmalloc(bytes);
        CHECK(strata_quant_random(m.type[o], rng, m.w[o], (int64_t)N_IN * N_OUT, 1.0f) == 0, "weights of %s",
              strata_type_name(m.type[o]));
    }
    const size_t ybytes = sizeof(float) * N_OPS * N_TOK * N_OUT;
    float *ref = xmalloc(ybytes), *y = xmalloc(ybytes);
    memset(ref, 0xff, ybytes);
    CHECK(run_call(be, &m, x, 0, N_TOK, ref) == 0, "mm of %d tokens", N_TOK);
    for (size_t ci = 0; ci < sizeof chunks / sizeof chunks[0]; ci++) {
        memset(y, 0xff, ybytes);
        for (int t0 = 0; t0 < N_TOK; t0 += chunks[ci]) {
            const int n = N_TOK - t0 < chunks[ci] ? N_TOK - t0 : chunks[ci];
            CHECK(run_call(be, &m, x, t0, n, y) == 0, "mm of %d tokens", n);
        }
        for (int o = 0; o < N_OPS; o++)
            for (int t = 0; t < N_TOK; t++) {
                if (o == 2 && t % 3 == 1) continue;
                const float *a = ref + ((size_t)o * N_TOK + t) * N_OUT, *b = y + ((size_t)o * N_TOK + t) * N_OUT;
                if (memcmp(a, b, sizeof(float) * N_OUT) == 0) continue;
                int r = 0;
                while (a[r] == b[r] || (a[r] != a[r] && b[r] != b[r])) r++;
                CHECK(0, "%s: op %d (%s) token %d row %d: %.9g in one call of %d, %.9g in calls of %d", where, o,
                      strata_type_name(m.type[o]), t, r, a[r], N_TOK, b[r], chunks[ci]);
                t = N_TOK, o = N_OPS;  // one line per chunk size
            }
    }
    const enum strata_gemm_level lv = strata_gemm_level_for(strata_isa_detect());
    static const uint32_t everywhere[] = {STRATA_TYPE_Q8_0, STRATA_TYPE_Q4_K, STRATA_TYPE_Q5_K, STRATA_TYPE_Q6_K,
                                          STRATA_TYPE_MXFP4, STRATA_TYPE_Q4_0};
    for (size_t i = 0; i < sizeof everywhere / sizeof everywhere[0]; i++)
        CHECK(type != everywhere[i] || strata_gemm_supports(lv, type), "%s: %s has no GEMM at %s", where,
              strata_type_name(type), strata_gemm_level_name(lv));
    char name[160];
    snprintf(name, sizeof name, "%s %-8s (%s): calls of 1, 7, 8, 16, 33 tokens = one call of %d, bit for bit", where,
             strata_type_name(type), strata_gemm_supports(lv, type) ? "gemm" : "quant dots", N_TOK);
    case_result(name, f0);
    for (int o = 0; o < N_OPS; o++)
        if (o != 2) free(m.w[o]);
    free(ref), free(y);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    if (argc >= 3 && strcmp(argv[1], "--seed") == 0) seed = strtoull(argv[2], NULL, 0);
    printf("seed %llu\n", (unsigned long long)seed);
    uint64_t rng = seed;
    float *x = xmalloc(sizeof(float) * N_TOK * N_IN);
    static const float scales[4] = {1.0f, 1e-3f, 40.0f, 3e-6f};
    for (int t = 0; t < N_TOK; t++) {
        const float s = scales[strata_rng_next(&rng) % 4];
        for (int i = 0; i < N_IN; i++) x[t * N_IN + i] = s * strata_rng_normal(&rng);
    }
    const char *env = getenv("STRATA_ISA");
    char *saved = env ? strdup(env) : NULL;
    const enum strata_isa best = strata_isa_detect();
    for (int isa = (int)best; isa >= 0; isa--) {
        setenv("STRATA_ISA", strata_isa_name((enum strata_isa)isa), 1);
        for (int nth = isa == (int)best ? 1 : 2; nth <= 3; nth += isa == (int)best ? 2 : 2) {
            struct strata_backend be;
            if (strata_backend_cpu_open(&be, nth, false) != 0) {
                CHECK(0, "cpu backend at %s with %d threads", strata_isa_name((enum strata_isa)isa), nth);
                continue;
            }
            char where[64];
            snprintf(where, sizeof where, "%s x%d", strata_isa_name((enum strata_isa)isa), nth);
            for (uint32_t type = 0; type < STRATA_TYPE_COUNT; type++)
                if (strata_type_computable(type) && be.iface->supports_type(be.ctx, type) &&
                    N_IN % strata_type_traits(type)->block_size == 0)
                    test_type(&be, type, x, &rng, where);
            be.iface->free(be.ctx);
        }
    }
    if (saved) setenv("STRATA_ISA", saved, 1), free(saved);
    else unsetenv("STRATA_ISA");
    free(x);
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
