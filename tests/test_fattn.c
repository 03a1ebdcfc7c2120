// Tests of the typed KV cache (src/backend/cpu/kv.h) and the tiled attention (fattn.h):
//   - the cache holds what was stored: keys and values read back through the layouts equal the
//     input rounded to the cache type (F32, F16, BF16, Q8_0), and blocks are allocated only as
//     positions are reserved, with the bytes per token the layout implies;
//   - the portable kernels and the AVX2 / AVX-512 ones give the same bits (exp, softmax, scores,
//     weighted values), and so does a whole call at every ISA;
//   - attention output is within float rounding of a float64 softmax over the cached (exactly
//     converted) keys and values, for every cache type, group size 1..12 and contexts of 1..3
//     segments;
//   - a token's output does not depend on its chunk (all tokens at once, one by one, random
//     chunks) nor on the thread count (tiles or the split of the context across threads);
//   - F32: close to the ggml-order attention strata had before (compute/attn.h).
//   test_fattn [--seed N]
//   test_fattn --bench CTX [THREADS [TOKENS]]   decode (1 token) and prompt (TOKENS, default 64)
//       attention at the last positions of a context of CTX, qwen3-30b-a3b shape, F16 cache
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cpu/fattn_impl.h"
#include "check.h"
#include "backend/cpu/attn.h"
#include "quant/fp16.h"
#include "util/log.h"

static const uint32_t g_kv_types[] = {STRATA_TYPE_F32, STRATA_TYPE_F16, STRATA_TYPE_BF16, STRATA_TYPE_Q8_0};


static void random_fill(uint64_t *rng, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = scale * strata_rng_normal(rng);
}

// Key d of position pos, head h, layer l as the cache holds it (converted exactly to float).
static float cached_key(const struct strata_kv_cache *kv, uint32_t l, uint32_t h, uint32_t pos, uint32_t d)
{
    const uint32_t b = pos / STRATA_KV_BLOCK, j = pos % STRATA_KV_BLOCK, g = j / 16, lane = j % 16;
    const uint8_t *keys = strata_kv_keys(kv, l, h, b);
    switch (kv->k_type) {
    case STRATA_TYPE_F32: return ((const float *)keys)[((size_t)g * kv->dk + d) * 16 + lane];
    case STRATA_TYPE_F16: return strata_fp16_to_fp32(((const uint16_t *)keys)[((size_t)g * kv->dk + d) * 16 + lane]);
    case STRATA_TYPE_BF16: return strata_bf16_to_fp32(((const uint16_t *)keys)[((size_t)g * kv->dk + d) * 16 + lane]);
    default: {
        const uint8_t *blk = keys + ((size_t)g * (kv->dk / 32) + d / 32) * (16 * 2 + 32 * 16);
        uint16_t hd;
        memcpy(&hd, blk + 2 * lane, 2);
        return strata_fp16_to_fp32(hd) * (float)(int8_t)blk[32 + (d % 32) * 16 + lane];
    }
    }
}

static float cached_value(const struct strata_kv_cache *kv, uint32_t l, uint32_t h, uint32_t pos, uint32_t e)
{
    const uint32_t b = pos / STRATA_KV_BLOCK, j = pos % STRATA_KV_BLOCK;
    const uint8_t *row = strata_kv_values(kv, l, h, b) + (size_t)j * strata_type_row_bytes(kv->v_type, kv->dv);
    float tmp[1024];
    strata_kernels_for(STRATA_ISA_SCALAR)->dequant[kv->v_type](row, tmp, kv->dv);
    return tmp[e];
}

// ---- the cache ----------------------------------------------------------------------------------

// New blocks are zeroed also when the pool's threads do it (each a share of every block's pages):
// blocks of 12 layers are 1.2 MiB, above the size the pool takes; the heap is made to hand back
// memory that was dirty, so a block nobody zeroed would show.
static void test_cache_zeroed_on_pool(void)
{
    const int before = g_failures;
    struct strata_pool *pool = NULL;
    CHECK(strata_pool_create(&pool, 3) == 0, "pool");
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    struct strata_kv_cache kv;
    CHECK(strata_kv_create(&kv, 12, 4, 128, 128, 1024, STRATA_TYPE_F16, STRATA_TYPE_F16, strata_kernels()) == 0,
          "kv_create");
    const size_t dirty_bytes = 4 * kv.block_bytes + (1 << 20);
    unsigned char *dirty = malloc(dirty_bytes);
    if (dirty) memset(dirty, 0xA5, dirty_bytes);
    __asm__ volatile("" : : "r"(dirty) : "memory");  // the stores stay
    free(dirty);
    CHECK(kv.block_bytes >= ((size_t)1 << 20), "block of %zu bytes", kv.block_bytes);
    CHECK(pool && strata_kv_reserve(&kv, 1000, pool) == 0 && kv.n_blocks == 4, "four blocks on the pool");
    size_t nonzero = 0;
    for (uint32_t b = 0; b < kv.n_blocks; b++)
        for (size_t i = 0; i < kv.block_bytes; i++) nonzero += ((const unsigned char *)kv.blocks[b])[i] != 0;
    CHECK(nonzero == 0, "%zu bytes of the new blocks are not zero", nonzero);
    strata_kv_free(&kv);
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    strata_pool_free(pool);
    case_result("kv blocks zeroed on the pool's threads", before);
}

static void test_cache(uint32_t type, uint64_t *rng)
{
    const int before = g_failures;
    const uint32_t L = 3, H = 2, dk = 64, dv = 96, n_ctx = 700;
    struct strata_kv_cache kv;
    CHECK(strata_kv_create(&kv, L, H, dk, dv, n_ctx, type, type, strata_kernels()) == 0, "kv_create");
    CHECK(strata_kv_bytes(&kv) == 0, "no block before the first reserve");
    CHECK(strata_kv_reserve(&kv, 10, NULL) == 0 && kv.n_blocks == 1, "one block for 10 positions");
    CHECK(strata_kv_reserve(&kv, 257, NULL) == 0 && kv.n_blocks == 2, "two blocks for 257 positions");
    CHECK(strata_kv_reserve(&kv, 701, NULL) != 0, "past the context is refused");
    CHECK(strata_kv_bytes(&kv) == 2 * kv.block_bytes, "bytes of two blocks");
    const double want = (double)L * H *
                        ((double)strata_type_row_bytes(type == STRATA_TYPE_Q8_0 ? type : type, dk) +
                         (double)strata_type_row_bytes(type, dv));
    CHECK(fabs(strata_kv_bytes_per_token(&kv) - want) < 1e-9, "bytes per token %.1f, expected %.1f",
          strata_kv_bytes_per_token(&kv), want);
    float k[2 * 96], v[2 * 96];
    uint8_t rk[512], rv[512];
    const struct strata_kernels *sk = strata_kernels_for(STRATA_ISA_SCALAR);
    for (uint32_t pos = 0; pos < 300; pos += 37) {
        for (uint32_t l = 0; l < L; l++) {
            random_fill(rng, k, H * dk, 1.5f);
            random_fill(rng, v, H * dv, 0.7f);
            strata_kv_store(&kv, l, pos, k, v);
            for (uint32_t h = 0; h < H; h++) {
                // what the cache type makes of the row (F32: itself)
                float kq[96], vq[96];
                if (type == STRATA_TYPE_F32) {
                    memcpy(kq, k + h * dk, dk * 4), memcpy(vq, v + h * dv, dv * 4);
                } else {
                    sk->quantize[type](k + h * dk, rk, dk), sk->dequant[type](rk, kq, dk);
                    sk->quantize[type](v + h * dv, rv, dv), sk->dequant[type](rv, vq, dv);
                }
                for (uint32_t d = 0; d < dk; d++)
                    CHECK(cached_key(&kv, l, h, pos, d) == kq[d], "%s key pos %u head %u d %u", strata_type_name(type), pos, h, d);
                for (uint32_t e = 0; e < dv; e++)
                    CHECK(cached_value(&kv, l, h, pos, e) == vq[e], "%s value pos %u head %u e %u", strata_type_name(type),
                          pos, h, e);
            }
        }
    }
    strata_kv_free(&kv);
    char name[64];
    snprintf(name, sizeof name, "kv cache %s: layout, blocks, bytes per token", strata_type_name(type));
    case_result(name, before);
}

// ---- kernels across ISAs ------------------------------------------------------------------------

static void test_kernels(uint64_t *rng)
{
    const int before = g_failures;
    const struct fattn_kernels *tabs[3] = {&fattn_kernels_scalar, strata_kernels_for(STRATA_ISA_AVX2) ? &fattn_kernels_avx2 : NULL,
                                           strata_kernels_for(STRATA_ISA_AVX512) ? &fattn_kernels_avx512 : NULL};
    // exp over its whole range, through the softmax of one row with a maximum of 0
    enum { N = 4096 };
    float *x = xmalloc(N * 4), *ref = xmalloc(N * 4), *got = xmalloc(N * 4);
    for (int i = 0; i < N; i++) x[i] = i == 0 ? 0.0f : -(float)i * 0.0226f * (float)(1 + i % 7) / 7.0f;
    float m, l, mr, lr;
    int nv = N;
    memcpy(ref, x, N * 4);
    fattn_kernels_scalar.softmax(ref, N, 1, &nv, N, &mr, &lr);
    double worst = 0;
    for (int i = 0; i < N; i++)
        if (x[i] > -80) worst = fmax(worst, fabs(ref[i] - exp((double)x[i])) / exp((double)x[i]));
    CHECK(worst < 4e-7, "exp relative error %.2g", worst);
    CHECK(ref[0] == 1.0f, "exp(0) = %.9g", ref[0]);
    for (int t = 1; t < 3; t++) {
        if (!tabs[t]) continue;
        memcpy(got, x, N * 4);
        tabs[t]->softmax(got, N, 1, &nv, N, &m, &l);
        CHECK(!memcmp(got, ref, N * 4) && m == mr && l == lr, "softmax of ISA %d differs", t);
    }
    // scores and weighted values of odd shapes
    const uint32_t dk = 80, dv = 48;
    const int rows = 11, groups = 5, nk = 70;
    float *q = xmalloc(rows * dk * 4), *kt = xmalloc(groups * 16 * dk * 4), *v = xmalloc(nk * dv * 4);
    float *s0 = xmalloc(rows * 96 * 4), *s1 = xmalloc(rows * 96 * 4), *o0 = xmalloc(rows * dv * 4), *o1 = xmalloc(rows * dv * 4);
    random_fill(rng, q, rows * dk, 1.0f);
    random_fill(rng, kt, groups * 16 * dk, 1.0f);
    random_fill(rng, v, nk * dv, 1.0f);
    fattn_kernels_scalar.scores(q, rows, kt, groups, dk, 0.11f, s0, 96);
    fattn_kernels_scalar.pv(s0, 96, rows, nk, v, dv, o0);
    for (int t = 1; t < 3; t++) {
        if (!tabs[t]) continue;
        tabs[t]->scores(q, rows, kt, groups, dk, 0.11f, s1, 96);
        tabs[t]->pv(s1, 96, rows, nk, v, dv, o1);
        for (int r = 0; r < rows; r++)
            CHECK(!memcmp(s0 + r * 96, s1 + r * 96, groups * 16 * 4), "scores of ISA %d row %d differ", t, r);
        CHECK(!memcmp(o0, o1, rows * dv * 4), "weighted values of ISA %d differ", t);
    }
    free(x), free(ref), free(got), free(q), free(kt), free(v), free(s0), free(s1), free(o0), free(o1);
    case_result("kernels: exp accuracy, the same bits at every ISA", before);
}

// ---- whole calls --------------------------------------------------------------------------------

struct fixture {
    struct strata_kv_cache kv;
    uint32_t L, Hkv, G, dk, dv;
    int n;           // positions filled
    float *q;        // [n][H][dk]
    int32_t *pos;    // [n]
    float *kc, *vc;  // layer 1 as cached, in float: [n][Hkv][dk], [n][Hkv][dv]
};

static void fixture_init(struct fixture *f, uint32_t type, uint32_t Hkv, uint32_t G, uint32_t dk, uint32_t dv, int n,
                         uint64_t *rng)
{
    f->L = 2, f->Hkv = Hkv, f->G = G, f->dk = dk, f->dv = dv, f->n = n;
    CHECK(strata_kv_create(&f->kv, f->L, Hkv, dk, dv, (uint32_t)n, type, type, strata_kernels()) == 0, "kv_create");
    CHECK(strata_kv_reserve(&f->kv, (uint32_t)n, NULL) == 0, "kv_reserve");
    float *k = xmalloc(Hkv * dk * 4), *v = xmalloc(Hkv * dv * 4);
    for (int p = 0; p < n; p++)
        for (uint32_t l = 0; l < f->L; l++) {
            random_fill(rng, k, Hkv * dk, 1.0f);
            random_fill(rng, v, Hkv * dv, 1.0f);
            strata_kv_store(&f->kv, l, (uint32_t)p, k, v);
        }
    free(k), free(v);
    f->q = xmalloc((size_t)n * Hkv * G * dk * 4);
    random_fill(rng, f->q, (size_t)n * Hkv * G * dk, 1.5f);
    if (type == STRATA_TYPE_F16)  // the CPU backend rounds the queries to the key type's dot format
        for (size_t i = 0; i < (size_t)n * Hkv * G * dk; i++) f->q[i] = strata_fp16_to_fp32(strata_fp32_to_fp16(f->q[i]));
    f->pos = xmalloc((size_t)n * 4);
    for (int p = 0; p < n; p++) f->pos[p] = p;
    f->kc = xmalloc((size_t)n * Hkv * dk * 4), f->vc = xmalloc((size_t)n * Hkv * dv * 4);
    for (int j = 0; j < n; j++)
        for (uint32_t h = 0; h < Hkv; h++) {
            for (uint32_t e = 0; e < dk; e++) f->kc[((size_t)j * Hkv + h) * dk + e] = cached_key(&f->kv, 1, h, (uint32_t)j, e);
            for (uint32_t e = 0; e < dv; e++) f->vc[((size_t)j * Hkv + h) * dv + e] = cached_value(&f->kv, 1, h, (uint32_t)j, e);
        }
}

static void fixture_free(struct fixture *f)
{
    strata_kv_free(&f->kv);
    free(f->q), free(f->pos), free(f->kc), free(f->vc);
}

// Output of tokens [t0, t1) of layer 1 in chunks of `chunk` tokens, on a pool and context made
// for `isa` and `threads` (given, or made here when pool is NULL).
static void run_on(struct fixture *f, int t0, int t1, int chunk, struct strata_pool *pool, struct strata_fattn_ctx *c,
                   float *out)
{
    const uint32_t H = f->Hkv * f->G;
    for (int t = t0; t < t1; t += chunk) {
        const int n = t1 - t < chunk ? t1 - t : chunk;
        struct strata_fattn a = {&f->kv, 1, H, n, f->pos + t, f->q + (size_t)t * H * f->dk,
                                 out + (size_t)(t - t0) * H * f->dv, 1.0f / sqrtf((float)f->dk)};
        CHECK(strata_fattn_run(c, pool, &a) == 0, "fattn_run");
    }
}

static void run_chunks(struct fixture *f, int t0, int t1, int chunk, enum strata_isa isa, int threads, float *out)
{
    struct strata_pool *pool;
    struct strata_fattn_ctx *c;
    if (strata_pool_create(&pool, threads) || strata_fattn_create(&c, threads, isa, f->dk, f->dv, f->G)) {
        CHECK(0, "cannot create the pool or the attention context");
        return;
    }
    run_on(f, t0, t1, chunk, pool, c, out);
    strata_fattn_free(c);
    strata_pool_free(pool);
}

// float64 softmax over the cached keys and values.
static void reference(const struct fixture *f, int t, uint32_t head, double *out)
{
    const uint32_t kvh = head / f->G, H = f->Hkv * f->G;
    const float *q = f->q + ((size_t)t * H + head) * f->dk;
    const int n = f->pos[t] + 1;
    double *s = malloc((size_t)n * sizeof(double)), mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        double d = 0;
        for (uint32_t e = 0; e < f->dk; e++) d += (double)q[e] * f->kc[((size_t)j * f->Hkv + kvh) * f->dk + e];
        s[j] = d / sqrt((double)f->dk);
        mx = fmax(mx, s[j]);
    }
    for (int j = 0; j < n; j++) sum += (s[j] = exp(s[j] - mx));
    for (uint32_t e = 0; e < f->dv; e++) {
        double o = 0;
        for (int j = 0; j < n; j++) o += s[j] * f->vc[((size_t)j * f->Hkv + kvh) * f->dv + e];
        out[e] = o / sum;
    }
    free(s);
}

static void test_calls(uint32_t type, uint32_t Hkv, uint32_t G, uint32_t dk, uint32_t dv, int n, uint64_t *rng)
{
    const int before = g_failures;
    struct fixture f;
    fixture_init(&f, type, Hkv, G, dk, dv, n, rng);
    const uint32_t H = Hkv * G;
    const size_t out_floats = (size_t)n * H * dv;
    float *all = xmalloc(out_floats * 4), *one = xmalloc(out_floats * 4), *mixed = xmalloc(out_floats * 4);
    const enum strata_isa best = strata_isa_detect();
    run_chunks(&f, 0, n, n, best, 2, all);
    run_chunks(&f, 0, n, 1, best, 2, one);      // decode: the split across threads where long
    CHECK(!memcmp(all, one, out_floats * 4), "token by token differs from one chunk");
    for (int t = 0; t < n;) {                    // random chunk sizes, one thread
        const int c = 1 + (int)(strata_rng_next(rng) % 37);
        const int m = n - t < c ? n - t : c;
        run_chunks(&f, t, t + m, m, best, 1, mixed + (size_t)t * H * dv);
        t += m;
    }
    CHECK(!memcmp(all, mixed, out_floats * 4), "random chunks differ from one chunk");
    // The ISAs give the same bits; the AMX scores (F16 keys) are checked against them by a bound.
    struct strata_fattn_ctx *probe = NULL;
    bool amx = false;
    if (strata_fattn_create(&probe, 1, best, dk, dv, G) == 0) amx = strata_fattn_amx(probe, type, type);
    strata_fattn_free(probe);
    float *plain = all;
    if (amx) {
        plain = xmalloc(out_floats * 4);
        setenv("STRATA_AMX", "0", 1);
        run_chunks(&f, 0, n, n, best, 2, plain);
        unsetenv("STRATA_AMX");
        // the weights keep 16 of their bits on the tiles (2^-17 relative each), so an output,
        // a convex combination of values, moves by at most 2^-17 of the largest value; twice that
        // leaves the scores' rounding (a few eps) room
        double d = 0, vmax = 0;
        for (size_t i = 0; i < out_floats; i++) d = fmax(d, fabs(all[i] - plain[i]));
        for (size_t i = 0; i < (size_t)n * Hkv * dv; i++) vmax = fmax(vmax, fabs(f.vc[i]));
        CHECK(d < 0x1p-16 * vmax, "AMX differs from %s by %.3g (values up to %.3g)", strata_isa_name(best), d, vmax);
    }
    for (int isa = 0; isa < STRATA_ISA_COUNT; isa++) {
        if ((enum strata_isa)isa == best || !strata_kernels_for((enum strata_isa)isa)) continue;
        run_chunks(&f, 0, n, n, (enum strata_isa)isa, 2, mixed);
        CHECK(!memcmp(plain, mixed, out_floats * 4), "ISA %s differs from %s", strata_isa_name((enum strata_isa)isa),
              strata_isa_name(best));
    }
    if (plain != all) free(plain);
    // against float64, on a sample of tokens and heads: each output element is a convex
    // combination of values, so its error is a few eps of the values' magnitude
    double worst = 0, ref[512];
    for (int t = 0; t < n; t += n / 7 + 1)
        for (uint32_t h = 0; h < H; h += 1 + H / 3) {
            reference(&f, t, h, ref);
            for (uint32_t e = 0; e < dv; e++) worst = fmax(worst, fabs(all[((size_t)t * H + h) * dv + e] - ref[e]));
        }
    CHECK(worst < 2e-5, "largest error against float64 %.3g", worst);
    if (type == STRATA_TYPE_F32 && dk == dv) {
        // the ggml-order attention of compute/attn.h on the same keys and values
        double diff = 0;
        const float *kc = f.kc, *vc = f.vc;
        float *scores = xmalloc((size_t)n * 4);
        float old[512];
        for (int t = 0; t < n; t += n / 5 + 1)
            for (uint32_t h = 0; h < H; h++) {
                const struct strata_attn_query aq = {.q = f.q + ((size_t)t * H + h) * dk,
                                                     .k = kc + (size_t)(h / G) * dk, .k_stride = (size_t)Hkv * dk,
                                                     .v = vc + (size_t)(h / G) * dv, .v_stride = (size_t)Hkv * dv,
                                                     .n_kv = t + 1, .D = dk, .Dv = dv, .scale = 1.0f / sqrtf((float)dk),
                                                     .scores = scores, .out = old};
                strata_attn_head(best, &aq);
                for (uint32_t e = 0; e < dv; e++) diff = fmax(diff, fabs(old[e] - all[((size_t)t * H + h) * dv + e]));
            }
        CHECK(diff < 2e-5, "differs from the ggml-order attention by %.3g", diff);
        free(scores);
    }
    char name[128];
    snprintf(name, sizeof name, "attention %s%s Hkv=%u group=%u dk=%u dv=%u ctx=%d (error %.2g)", strata_type_name(type),
             amx ? " [amx]" : "", Hkv, G, dk, dv, n, worst);
    case_result(name, before);
    free(all), free(one), free(mixed);
    fixture_free(&f);
}

// ---- benchmark ----------------------------------------------------------------------------------

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void bench(int ctx, int threads, int n_prompt)
{
    uint64_t rng = 1;
    struct fixture f;
    const uint32_t Hkv = 4, G = 8, dk = 128, dv = 128;
    f.L = 2, f.Hkv = Hkv, f.G = G, f.dk = dk, f.dv = dv, f.n = ctx;
    f.kc = f.vc = NULL;
    if (strata_kv_create(&f.kv, 2, Hkv, dk, dv, (uint32_t)ctx, STRATA_TYPE_F16, STRATA_TYPE_F16, strata_kernels()) ||
        strata_kv_reserve(&f.kv, (uint32_t)ctx, NULL))
        return;
    float *k = xmalloc(Hkv * dk * 4), *v = xmalloc(Hkv * dv * 4);
    for (int p = 0; p < ctx; p++) {
        random_fill(&rng, k, Hkv * dk, 1.0f), random_fill(&rng, v, Hkv * dv, 1.0f);
        strata_kv_store(&f.kv, 1, (uint32_t)p, k, v);
    }
    f.q = xmalloc((size_t)n_prompt * Hkv * G * dk * 4);
    random_fill(&rng, f.q, (size_t)n_prompt * Hkv * G * dk, 1.0f);
    f.pos = xmalloc(n_prompt * 4);
    float *out = xmalloc((size_t)n_prompt * Hkv * G * dv * 4);
    struct strata_pool *pool;
    struct strata_fattn_ctx *c;
    if (strata_pool_create(&pool, threads) || strata_fattn_create(&c, threads, strata_isa_detect(), dk, dv, G)) return;
    for (int mode = 0; mode < 2; mode++) {
        const int n = mode == 0 ? 1 : n_prompt;
        for (int t = 0; t < n; t++) f.pos[t] = ctx - n + t;
        double best = 1e30, best_cpu = 1e30;
        for (int rep = 0; rep < 5; rep++) {
            const double t0 = now(), c0 = (double)clock() / CLOCKS_PER_SEC;
            run_on(&f, 0, n, n, pool, c, out);
            best = fmin(best, now() - t0);
            best_cpu = fmin(best_cpu, (double)clock() / CLOCKS_PER_SEC - c0);
        }
        double keys = 0;  // causal: token t sees pos[t] + 1 keys
        for (int t = 0; t < n; t++) keys += f.pos[t] + 1;
        const double bytes = (double)ctx * Hkv * (dk + dv) * 2, flops = 2.0 * Hkv * G * keys * (dk + dv);
        printf("ctx %d, %d threads, %s %d token%s: %.2f ms (%.1f GB/s of cache, %.1f GFLOP/s; per CPU second %.1f GFLOP)\n",
               ctx, threads, mode == 0 ? "decode" : "prompt", n, n == 1 ? "" : "s", best * 1e3, bytes / best / 1e9, flops / best / 1e9,
               flops / best_cpu / 1e9);
    }
    strata_fattn_free(c);
    strata_pool_free(pool);
    free(k), free(v), free(out);
    fixture_free(&f);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 3 && strcmp(argv[1], "--bench") == 0) {
        bench(atoi(argv[2]), argc >= 4 ? atoi(argv[3]) : 2, argc >= 5 ? atoi(argv[4]) : 64);
        return 0;
    }
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    if (argc >= 3 && strcmp(argv[1], "--seed") == 0) seed = strtoull(argv[2], NULL, 0);
    printf("seed %llu\n", (unsigned long long)seed);
    uint64_t rng = seed;
    for (size_t i = 0; i < sizeof g_kv_types / sizeof g_kv_types[0]; i++) test_cache(g_kv_types[i], &rng);
    test_cache_zeroed_on_pool();
    test_kernels(&rng);
    for (size_t i = 0; i < sizeof g_kv_types / sizeof g_kv_types[0]; i++) {
        test_calls(g_kv_types[i], 2, 4, 64, 64, 300, &rng);
        test_calls(g_kv_types[i], 1, 12, 128, 128, 520, &rng);
    }
    test_calls(STRATA_TYPE_F32, 3, 1, 96, 64, 270, &rng);
    test_calls(STRATA_TYPE_F16, 2, 2, 64, 64, 1, &rng);
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
