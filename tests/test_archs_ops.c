// The operations the MLA, sparse-attention and gpt-oss blocks add (compute/rope_ext, the
// attention's window / ring / sparse / sink options, compute/ops_ext, model/routing), each
// against a plain float64 reference on fresh random inputs, at both lane widths strata follows.
// Bit-identity with ggml's own ops is checked outside the suite (docs/architectures.md says
// how); here the reference catches semantic errors: a wrong pair layout, ramp, scale, mask,
// group or order shows as an error far above float rounding.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/route.h"
#include "check.h"
#include "route_ref.h"
#include "backend/backend.h"
#include "backend/cpu/attn.h"
#include "backend/cpu/pool.h"
#include "backend/cpu/ops_ext.h"
#include "backend/cpu/rope_ext.h"
#include "model/rope_scaling.h"
#include "model/arch.h"
#include "model/routing.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double urand(void)  // [0, 1)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) * (1.0 / 9007199254740992.0);
}
static float frand(float s) { return (float)((urand() * 2.0 - 1.0) * s); }

// ---- RoPE with YaRN -----------------------------------------------------------------------

// The YaRN rotation in double (HF's LlamaYaRNScaledRotaryEmbedding as llama.cpp applies it).
static void rope_ref(double *y, const float *x, int n_dims, int neox, double base, double factor, int yarn,
                     int n_ctx_orig, double attn_factor, int pos)
{
    const double fs = factor > 0 ? 1.0 / factor : 1.0;
    const double pi = 3.14159265358979323846;
    double lo = floor(n_dims * log(n_ctx_orig / (32.0 * 2 * pi)) / (2 * log(base)));
    double hi = ceil(n_dims * log(n_ctx_orig / (1.0 * 2 * pi)) / (2 * log(base)));
    lo = lo > 0 ? lo : 0;
    hi = hi < n_dims - 1 ? hi : n_dims - 1;
    for (int i = 0; i < n_dims; i++) y[i] = x[i];
    for (int i = 0; i < n_dims / 2; i++) {
        const double te = pos * pow(base, -2.0 * i / n_dims), ti = fs * te;
        double theta = ti, m = attn_factor;
        if (yarn) {
            double r = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
            r = 1.0 - fmin(1.0, fmax(0.0, r));
            theta = ti * (1 - r) + te * r;
            m *= 1.0 + 0.1 * log(1.0 / fs);
        }
        const int a = neox ? i : 2 * i, b = neox ? i + n_dims / 2 : 2 * i + 1;
        y[a] = x[a] * cos(theta) * m - x[b] * sin(theta) * m;
        y[b] = x[a] * sin(theta) * m + x[b] * cos(theta) * m;
    }
}

static void test_rope(void)
{
    const int f0 = g_failures;
    struct {
        int neox, yarn;
        float base, factor, log_mul;
        int fix;
        double want_attn_factor;  // what llama.cpp's context derives (its log line)
    } cases[] = {
        {0, 1, 10000.0f, 40.0f, 1.0f, 1, 1.0 / (1.0 + 0.1 * log(40.0))},  // deepseek2: mscale ratio 1
        {1, 1, 150000.0f, 32.0f, 0.0f, 0, 1.0},                          // gpt-oss: get_mscale cancels
        {0, 0, 1000000.0f, 0.0f, 0.0f, 0, 1.0},                          // glm-dsa: none
        {1, 1, 10000.0f, 4.0f, 0.7f, 1, (1 + 0.07 * log(4.0)) / (1 + 0.07 * log(4.0)) / (1 + 0.1 * log(4.0))},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int D = 64;
        struct strata_rope_scaling sc = {.yarn = cases[c].yarn, .factor = cases[c].factor, .n_ctx_orig = 4096,
                                         .yarn_log_mul = cases[c].log_mul, .mscale_all_dims_fix = cases[c].fix};
        struct strata_rope_ext p;
        strata_rope_ext_init(&p, D, cases[c].neox ? STRATA_ROPE_NEOX : STRATA_ROPE_NORM, cases[c].base, &sc, 163840);
        CHECK(fabs(p.attn_factor - cases[c].want_attn_factor) < 1e-6, "case %zu attn_factor %.9g, want %.9g", c,
              p.attn_factor, cases[c].want_attn_factor);
        double max_err = 0;
        for (int pos = 0; pos < 300; pos += 7) {
            float x[64], cs[64];
            double y[64];
            for (int i = 0; i < D; i++) x[i] = frand(2.0f);
            rope_ref(y, x, D, cases[c].neox, cases[c].base, cases[c].factor, cases[c].yarn, 4096, p.attn_factor, pos);
            strata_rope_ext_cache(cs, &p, pos);
            strata_rope_ext_apply(x, cs, &p);
            // the float angle accumulates ~1 ulp per pair: bound ~ pos * n_dims * 2^-24
            const double tol = 1e-5 + 4.0 * pos * D * 6e-8;
            for (int i = 0; i < D; i++) {
                const double e = fabs(x[i] - y[i]);
                max_err = e > max_err ? e : max_err;
                CHECK(e <= tol, "case %zu pos %d dim %d: %.9g vs %.9g", c, pos, i, x[i], y[i]);
                if (e > tol) return;
            }
        }
        printf("    rope case %zu (%s%s): max abs error %.2g\n", c, cases[c].neox ? "neox" : "norm",
               cases[c].yarn ? ", yarn" : "", max_err);
    }
    // deepseek2's kq scale: mscale^2 / sqrt(192) with mscale = 1 + 0.1 ln 40 (log_mul 1) times
    // the cancelled attention factor, i.e. 1 here
    struct strata_rope_scaling sc = {.yarn = true, .factor = 40.0f, .n_ctx_orig = 4096, .yarn_log_mul = 1.0f,
                                     .mscale_all_dims_fix = true};
    struct strata_rope_ext p;
    strata_rope_ext_init(&p, 64, STRATA_ROPE_NORM, 10000.0f, &sc, 163840);
    const double m = 1.0 + 0.1 * log(40.0);
    CHECK(fabs(strata_rope_mla_kq_scale(&p, 1.0f, 192) - m * m / sqrt(192.0)) < 1e-6, "kq scale %.9g vs %.9g",
          strata_rope_mla_kq_scale(&p, 1.0f, 192), m * m / sqrt(192.0));
    case_result("rope_ext: NORM/NEOX pairs, YaRN ramp and attention factor, MLA kq scale", f0);
}

// ---- attention options --------------------------------------------------------------------

static void attn_ref(double *out, const struct strata_attn_query *a)
{
    double mx = -INFINITY;
    double *s = malloc(sizeof(double) * (size_t)a->n_kv);
    for (int p = a->kv_start; p < a->n_kv; p++) {
        const float *k = a->k + (size_t)(a->kv_ring ? p % a->kv_ring : p) * a->k_stride;
        double d = 0;
        for (uint32_t i = 0; i < a->D; i++) d += (double)k[i] * a->q[i];
        s[p] = d * a->scale;
        if (a->visible && !a->visible[p]) s[p] = -INFINITY;
        mx = s[p] > mx ? s[p] : mx;
    }
    if (a->sink && *a->sink > mx) mx = *a->sink;
    double sum = a->sink ? exp(*a->sink - mx) : 0.0;
    for (int p = a->kv_start; p < a->n_kv; p++) sum += exp(s[p] - mx);
    for (uint32_t d = 0; d < a->Dv; d++) out[d] = 0;
    for (int p = a->kv_start; p < a->n_kv; p++) {
        const double w = exp(s[p] - mx) / sum;
        const float *v = a->v + (size_t)(a->kv_ring ? p % a->kv_ring : p) * a->v_stride;
        for (uint32_t d = 0; d < a->Dv; d++) out[d] += w * v[d];
    }
    free(s);
}

static void test_attention(void)
{
    const int f0 = g_failures;
    enum { NKV = 300, D = 320, DV = 256, RING = 72 };
    float *kv = malloc(sizeof(float) * NKV * D), q[D], out[DV], scores[NKV], sink = 1.5f;
    uint8_t vis[NKV];
    double ref[DV];
    for (int i = 0; i < NKV * D; i++) kv[i] = frand(1.0f);
    struct {
        const char *name;
        int window, ring, sparse, sink;
    } cases[] = {
        {"causal", 0, 0, 0, 0},          {"MLA latent (v = key prefix)", 0, 0, 0, 0},
        {"sliding window 40", 40, 0, 0, 0}, {"window 40 over a ring of 72", 40, RING, 0, 0},
        {"sparse selection", 0, 0, 1, 0}, {"sinks", 0, 0, 0, 1},
        {"window + ring + sinks", 33, RING, 0, 1},
    };
    for (int isa = 0; isa < 2; isa++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            for (int n_kv = 1; n_kv <= NKV; n_kv += 37) {
                for (int i = 0; i < D; i++) q[i] = frand(1.0f);
                for (int p = 0; p < NKV; p++) vis[p] = urand() < 0.7 || p == n_kv - 1;
                const int win = cases[c].window;
                struct strata_attn_query a = {
                    .q = q, .k = kv, .k_stride = D, .v = kv, .v_stride = D, .n_kv = n_kv, .D = D,
                    .Dv = c == 1 ? DV : 64, .scale = 1.0f / sqrtf(192.0f), .scores = scores, .out = out,
                    .kv_start = win && n_kv > win ? n_kv - win : 0, .kv_ring = cases[c].ring,
                    .visible = cases[c].sparse ? vis : NULL, .sink = cases[c].sink ? &sink : NULL,
                };
                if (c != 1) a.v = kv + 64;  // a separate value slice of each row
                if (isa) strata_attn_head_vl16(&a);
                else strata_attn_head_vl8(&a);
                attn_ref(ref, &a);
                for (uint32_t d = 0; d < a.Dv; d++)
                    CHECK(fabs(out[d] - ref[d]) <= 2e-6 + 2e-6 * fabs(ref[d]), "%s n_kv %d dim %u: %.9g vs %.9g",
                          cases[c].name, n_kv, d, out[d], ref[d]);
            }
        }
    free(kv);
    case_result("attention: MLA latent, sliding window, ring cache, sparse selection, sinks", f0);
}

// The four builds of strata_attn_head (portable 8 / 16 lanes, AVX2, AVX-512) that the grouped-head
// and row variants are compared with, variant v each, and whether this CPU runs variant v.
static void (*const attn_single[4])(const struct strata_attn_query *) = {
    strata_attn_head_vl8, strata_attn_head_vl16, strata_attn_head_vl8_avx2, strata_attn_head_vl16_avx512};

static bool attn_variant_runs(int v)
{
    const enum strata_isa have = strata_isa_detect();
    return !(v == 2 && have < STRATA_ISA_AVX2) && !(v == 3 && have < STRATA_ISA_AVX512);
}

// Grouped heads (strata_attn_heads: the heads of a token over one latent row, or over one key head's
// key and value rows in grouped-query attention, read once) give each head the bits of
// strata_attn_head alone, at every variant, g = 1..8, with and without the mask, a window, sinks
// and values apart from the keys.
static void test_attention_heads(void)
{
    const int f0 = g_failures;
    enum { NKV = 300, D = 320, DV = 256, G = STRATA_ATTN_GROUP };
    float *kv = malloc(sizeof(float) * NKV * D), q[G][D], out[G][DV], one[DV], scores[G][NKV], sinks[G];
    float *vals = malloc(sizeof(float) * NKV * DV);  // grouped-query attention: values apart from the keys
    uint8_t vis[NKV];
    for (int i = 0; i < NKV * D; i++) kv[i] = frand(1.0f);
    for (int i = 0; i < NKV * DV; i++) vals[i] = frand(1.0f);
    void (*group[])(const struct strata_attn_query *, int) = {strata_attn_heads_vl8, strata_attn_heads_vl16,
                                                              strata_attn_heads_vl8_avx2, strata_attn_heads_vl16_avx512};
    for (int v = 0; v < 4; v++) {
        if (!attn_variant_runs(v)) continue;
        for (int c = 0; c < 5; c++)  // plain, sparse, window, sinks, the values apart (grouped-query)
            for (int g = 1; g <= G; g++)
                for (int n_kv = 1; n_kv <= NKV; n_kv += 61) {
                    struct strata_attn_query a[G];
                    for (int p = 0; p < NKV; p++) vis[p] = urand() < 0.3 || p == n_kv - 1;
                    for (int i = 0; i < g; i++) {
                        for (int d = 0; d < D; d++) q[i][d] = frand(1.0f);
                        sinks[i] = frand(2.0f);
                        a[i] = (struct strata_attn_query){
                            .q = q[i], .k = kv, .k_stride = D, .v = c == 4 ? vals : kv, .v_stride = c == 4 ? DV : D,
                            .n_kv = n_kv, .D = D, .Dv = DV,
                            .scale = 1.0f / sqrtf(192.0f), .scores = scores[i], .out = out[i],
                            .kv_start = c == 2 && n_kv > 40 ? n_kv - 40 : 0, .visible = c == 1 ? vis : NULL,
                            .sink = c == 3 ? &sinks[i] : NULL,
                        };
                    }
                    group[v](a, g);
                    for (int i = 0; i < g; i++) {
                        struct strata_attn_query b = a[i];
                        b.out = one;
                        attn_single[v](&b);
                        CHECK(memcmp(one, out[i], sizeof one) == 0, "variant %d case %d g %d head %d n_kv %d differs",
                              v, c, g, i, n_kv);
                    }
                }
    }
    free(kv);
    free(vals);
    case_result("attention, heads grouped over one latent row or one key head's rows: the bits of each head alone", f0);
}

// Rows (strata_attn_rows: the heads of several tokens over the latent rows or one key head, as
// tiled products) give each query the bits of strata_attn_head alone, at every variant: head dims
// with and without a remainder past the lane blocks, tiles cut at every size, rows of consecutive
// tokens (n_kv rising by one per token), plain, with the sparse mask, and with a sliding window,
// sinks and values apart from the keys (gpt-oss).
static void test_attention_rows(void)
{
    const int f0 = g_failures;
    enum { NKV = 230, DMAX = 320, R = STRATA_ATTN_ROWS };
    static const uint32_t dims[][2] = {{320, 256}, {200, 136}, {40, 24}};
    float *kv = malloc(sizeof(float) * NKV * DMAX), (*q)[DMAX] = malloc(sizeof(float) * R * DMAX);
    float (*out)[DMAX] = malloc(sizeof(float) * R * DMAX), one[DMAX], (*scores)[NKV] = malloc(sizeof(float) * R * NKV);
    uint8_t (*vis)[NKV] = malloc((size_t)R * NKV);
    float sinks[R];
    for (int i = 0; i < NKV * DMAX; i++) kv[i] = frand(1.0f);
    void (*rows[])(const struct strata_attn_query *, int) = {strata_attn_rows_vl8, strata_attn_rows_vl16,
                                                             strata_attn_rows_vl8_avx2, strata_attn_rows_vl16_avx512};
    for (int v = 0; v < 4; v++) {
        if (!attn_variant_runs(v)) continue;
        for (size_t dc = 0; dc < sizeof dims / sizeof dims[0]; dc++)
            for (int mode = 0; mode < 3; mode++)  // plain, sparse, window + sinks + separate values
                for (int n = 1; n <= R; n += n < 8 ? 1 : 5) {
                    const int heads = 1 + (int)(urand() * 5), base = 1 + (int)(urand() * (NKV - 1 - R));
                    const int swa = 1 + (int)(urand() * 60);
                    const int sparse = mode == 1;
                    struct strata_attn_query a[R];
                    for (int i = 0; i < n; i++) {
                        const int t = i / heads, n_kv = base + t;
                        for (uint32_t d = 0; d < dims[dc][0]; d++) q[i][d] = frand(1.0f);
                        for (int p = 0; p < NKV; p++) vis[t][p] = urand() < 0.3 || p == n_kv - 1;
                        sinks[i] = frand(4.0f);
                        a[i] = (struct strata_attn_query){
                            .q = q[i], .k = kv, .k_stride = DMAX, .v = mode == 2 ? kv + 7 : kv, .v_stride = DMAX,
                            .n_kv = n_kv, .D = dims[dc][0], .Dv = dims[dc][1], .scale = 1.0f / sqrtf(192.0f),
                            .scores = scores[i], .out = out[i], .visible = sparse ? vis[t] : NULL,
                            .kv_start = mode == 2 && n_kv > swa ? n_kv - swa : 0, .sink = mode == 2 ? &sinks[i] : NULL,
                        };
                    }
                    rows[v](a, n);
                    for (int i = 0; i < n; i++) {
                        struct strata_attn_query b = a[i];
                        b.out = one;
                        attn_single[v](&b);
                        CHECK(memcmp(one, out[i], sizeof(float) * b.Dv) == 0,
                              "variant %d dims %u/%u mode %d n %d row %d n_kv %d start %d differs", v, b.D, b.Dv, mode, n,
                              i, b.n_kv, b.kv_start);
                    }
                }
    }
    free(kv), free(q), free(out), free(scores), free(vis);
    case_result("attention rows, tiled over tokens and heads of one key head (windows, sinks): the bits of each alone", f0);
}

// The rows' vector softmax (AVX-512) against the portable one, bit for bit: scores spread from 0
// down past the smallest normal and subnormal results of the exp (-87 .. -104) and past its cut at
// 192 binades, masked cells, -inf and NaN cells (a NaN score makes the row NaN: the sign of those
// NaNs is left out of the comparison), every tail length, windows that start inside a group of 16
// (the cells before them untouched) and sinks.
static int same_bits_or_nan(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (!(isnan(a[i]) && isnan(b[i])) && memcmp(&a[i], &b[i], sizeof(float)) != 0) return 0;
    return 1;
}

static void test_attention_rows_softmax(void)
{
    const int f0 = g_failures;
    if (strata_isa_detect() < STRATA_ISA_AVX512) {
        case_result("attention rows softmax: AVX-512 absent, skipped", f0);
        return;
    }
    enum { N = 400 };
    float a[N], b[N];
    uint8_t vis[N];
    for (int c = 0; c < 300; c++) {
        const int n_kv = 1 + c % N, sparse = c % 3 == 1;
        const float spread = c % 4 == 0 ? 1.0f : c % 4 == 1 ? 30.0f : c % 4 == 2 ? 120.0f : 300.0f;
        for (int p = 0; p < N; p++) {
            a[p] = frand(spread) + (c % 5 == 0 ? 100.0f : 0.0f);
            vis[p] = urand() < 0.6;
            if (c % 7 == 3 && urand() < 0.05) a[p] = -INFINITY;
            if (c == 299 && p == 5) a[p] = NAN;
        }
        const int p0 = c % 3 == 2 ? (c * 7) % n_kv : 0;
        const float sinkv = frand(spread), *sink = c % 4 == 3 ? &sinkv : NULL;
        memcpy(b, a, sizeof a);
        strata_attn_rows_softmax_vl16(a, p0, n_kv, sparse ? vis : NULL, sink);
        strata_attn_rows_softmax_vl16_avx512(b, p0, n_kv, sparse ? vis : NULL, sink);
        CHECK(same_bits_or_nan(a, b, N), "case %d p0 %d n_kv %d spread %g differs", c, p0, n_kv, spread);
    }
    // the exp's whole range on its own: one cell at 0 (the maximum), the others at -x
    for (int c = 0; c < 64; c++) {
        for (int p = 0; p < N; p++) a[p] = p == 0 ? 0.0f : -(float)(c * N + p) * (200.0f / (64 * N));
        memcpy(b, a, sizeof a);
        strata_attn_rows_softmax_vl16(a, 0, N, NULL, NULL);
        strata_attn_rows_softmax_vl16_avx512(b, 0, N, NULL, NULL);
        CHECK(memcmp(a, b, sizeof a) == 0, "exp sweep %d differs", c);
    }
    case_result("attention rows softmax: AVX-512 lanes give the portable bits (subnormal exp, masks, tails, windows, sinks)", f0);
}

// ---- small ops ----------------------------------------------------------------------------

static void test_small_ops(void)
{
    int f0 = g_failures;
    float g[512], u[512], y[512];
    for (int i = 0; i < 512; i++) {
        g[i] = frand(12.0f);
        u[i] = frand(12.0f);
    }
    strata_swiglu_oai(y, g, u, 512, 1.702f, 7.0f);
    for (int i = 0; i < 512; i++) {
        const double x = g[i] < 7.0 ? g[i] : 7.0, v = fmax(-7.0, fmin(7.0, u[i]));
        const double r = x / (1 + exp(-1.702 * x)) * (v + 1);
        CHECK(fabs(y[i] - r) <= 1e-6 * (1 + fabs(r)), "swiglu_oai %d: %.9g vs %.9g", i, y[i], r);
    }
    case_result("swiglu_oai: clamped gate (above) and up (both sides), sigmoid(1.702 x), up + 1", f0);

    f0 = g_failures;
    for (int vl = 8; vl <= 16; vl += 8)
        for (int n = 1; n <= 300; n += 23) {
            float x[300], w[300], b[300], o[300];
            for (int i = 0; i < n; i++) {
                x[i] = frand(3.0f) + 0.5f;
                w[i] = frand(1.0f);
                b[i] = frand(1.0f);
            }
            const float eps = n % 2 ? 1e-6f : 0.0f;
            strata_layernorm(o, x, w, b, (uint32_t)n, eps, vl);
            double mean = 0, var = 0;
            for (int i = 0; i < n; i++) mean += x[i];
            mean /= n;
            for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
            var /= n;
            for (int i = 0; i < n && n > 1; i++) {
                const double r = (x[i] - mean) / sqrt(var + eps) * w[i] + b[i];
                CHECK(fabs(o[i] - r) <= 1e-5 * (1 + fabs(r)), "layernorm n %d i %d: %.9g vs %.9g", n, i, o[i], r);
            }
        }
    case_result("layernorm: (x - mean) / sqrt(var + eps) * w + b, eps 0 as glm-dsa loads it", f0);

    f0 = g_failures;
    for (int vl = 8; vl <= 16; vl += 8)
        for (int n = 1; n <= 70; n += 3) {
            float x[70];
            double r[70], s = 0, mx = -INFINITY;
            for (int i = 0; i < n; i++) {
                x[i] = frand(8.0f);
                mx = fmax(mx, x[i]);
            }
            for (int i = 0; i < n; i++) s += (r[i] = exp(x[i] - mx));
            strata_softmax_ggml(x, n, vl);
            for (int i = 0; i < n; i++)
                CHECK(fabs(x[i] - r[i] / s) <= 1e-6, "softmax vl %d n %d i %d: %.9g vs %.9g", vl, n, i, x[i], r[i] / s);
        }
    case_result("softmax in ggml's order (vl groups by the polynomial exp, the tail by libm)", f0);

    f0 = g_failures;
    {
        enum { N = 128 };
        static float h[N * N];
        float x[N], y[N], z[N];
        strata_hadamard_init(h, N);
        for (int i = 0; i < N; i++) x[i] = frand(1.0f);
        for (int rows = 1; rows <= 4; rows += 3) {
            strata_hadamard_apply(y, x, h, N, rows, 16);
            strata_hadamard_apply(z, y, h, N, rows, 8);
            for (int i = 0; i < N; i++) CHECK(fabs(z[i] - x[i]) < 1e-5, "H H x != x at %d: %.9g vs %.9g", i, z[i], x[i]);
            for (int i = 0; i < N; i++) {
                double r = 0;
                for (int j = 0; j < N; j++) r += (double)h[i * N + j] * x[j];
                CHECK(fabs(y[i] - r) < 1e-5, "H x at %d: %.9g vs %.9g", i, y[i], r);
            }
        }
        // entries +-1/sqrt(N): Walsh-Hadamard sign pattern (-1)^popcount(i & j)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                const double want = (__builtin_popcount((unsigned)(i & j)) % 2 ? -1.0 : 1.0) / sqrt((double)N);
                CHECK(fabs(h[i * N + j] - want) < 1e-7, "h[%d][%d] %.9g vs %.9g", i, j, h[i * N + j], want);
            }
    }
    case_result("hadamard: Walsh sign pattern, orthonormal, products in both ggml orders", f0);
}

// ---- the indexer ---------------------------------------------------------------------------

static void test_indexer(void)
{
    const int f0 = g_failures;
    enum { IH = 4, DI = 128, NKV = 400, TOPK = 32 };
    float q[IH * DI], w[IH], score[NKV];
    int32_t heap[TOPK];
    float *k = malloc(sizeof(float) * NKV * DI);
    uint8_t sel[NKV];
    for (int i = 0; i < IH * DI; i++) q[i] = frand(1.0f);
    for (int i = 0; i < IH; i++) w[i] = frand(1.0f);
    for (int i = 0; i < NKV * DI; i++) k[i] = frand(1.0f);
    for (int vl = 8; vl <= 16; vl += 8) {
        strata_indexer_scores(score, q, w, IH, DI, k, DI, NKV, vl);
        for (int p = 0; p < NKV; p++) {
            double r = 0;
            for (int h = 0; h < IH; h++) {
                double d = 0;
                for (int i = 0; i < DI; i++) d += (double)q[h * DI + i] * k[p * DI + i];
                r += (d > 0 ? d : 0) * w[h];
            }
            CHECK(fabs(score[p] - r) <= 1e-5 * (1 + fabs(r)), "indexer score %d: %.9g vs %.9g", p, score[p], r);
        }
    }
    // the ISA-compiled variants equal the portable ones bit for bit, at the level this CPU has
    {
        const enum strata_isa top = strata_isa_detect();
        float s1[NKV], s2[NKV], y1[DI], y2[DI];
        static float hm[DI * DI];
        strata_hadamard_init(hm, DI);
        for (int isa = STRATA_ISA_AVX2; isa <= (int)top; isa++) {
            const int vl = isa == STRATA_ISA_AVX512 ? 16 : 8;
            strata_indexer_scores(s1, q, w, IH, DI, k, DI, NKV, vl);
            strata_indexer_scores_isa((enum strata_isa)isa, s2, q, w, IH, DI, k, DI, NKV);
            CHECK(memcmp(s1, s2, sizeof s1) == 0, "indexer scores of %s differ from the portable ones",
                  strata_isa_name((enum strata_isa)isa));
            for (int rows = 1; rows <= 2; rows++) {
                strata_hadamard_apply(y1, q, hm, DI, rows, vl);
                strata_hadamard_apply_isa((enum strata_isa)isa, y2, q, hm, DI, rows);
                CHECK(memcmp(y1, y2, sizeof y1) == 0, "hadamard (%d rows) of %s differs from the portable one", rows,
                      strata_isa_name((enum strata_isa)isa));
            }
        }
    }
    for (int n = 1; n <= NKV; n += 57) {
        strata_top_k_mask(sel, score, n, TOPK, heap);
        int cnt = 0;
        for (int p = 0; p < n; p++) cnt += sel[p];
        CHECK(cnt == (n < TOPK ? n : TOPK), "n %d: %d selected", n, cnt);
        // every selected score >= every unselected one
        float min_sel = INFINITY, max_un = -INFINITY;
        for (int p = 0; p < n; p++) {
            if (sel[p]) min_sel = fminf(min_sel, score[p]);
            else max_un = fmaxf(max_un, score[p]);
        }
        CHECK(min_sel >= max_un, "n %d: selected min %.9g < unselected max %.9g", n, min_sel, max_un);
    }
    // equal scores at the boundary: libstdc++'s heap keeps the first ones it met unless a strictly
    // better one evicts them, and the evicted one is the heap's top (outcomes of std::partial_sort
    // with ggml's comparator, g++ 12; 20,000 random tie-heavy cases agreed with it)
    for (int p = 0; p < 64; p++) score[p] = p < 10 ? 5.0f : 1.0f;
    strata_top_k_mask(sel, score, 64, 20, heap);
    int low = 0;
    for (int p = 10; p < 20; p++) low += sel[p];
    CHECK(low == 10 && !sel[20], "ties: %d of positions 10..19 taken", low);
    {
        static const float s2[12] = {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 3, 0};
        strata_top_k_mask(sel, s2, 12, 5, heap);
        char got[13] = {0};
        for (int p = 0; p < 12; p++) got[p] = sel[p] ? '1' : '0';
        CHECK(strcmp(got, "010101010010") == 0, "heap eviction order: %s", got);
    }
    free(k);
    case_result("indexer: sum of relu(q.k) * w per head, top-k mask (ties kept as std::partial_sort keeps them)", f0);
}

// The indexer op over a pass of two sequences (one continuing at position 40, one new), on a pool
// of 2 threads, against the same steps done token by token with the portable primitives.
static void test_indexer_op(void)
{
    const int f0 = g_failures;
    enum { IH = 4, DI = 128, NCTX = 96, TOPK = 16, N0 = 40, NA = 20, NB = 30, n = NA + NB };
    static float q[n * IH * DI], k[n * DI], w[n * IH], cache[2 * 2 * NCTX * DI], ref_cache[2 * 2 * NCTX * DI];
    static float hm[DI * DI], qr[IH * DI], kr[DI], sc[NCTX];
    static uint8_t vis[n * NCTX], rvis[NCTX];
    int32_t pos[n], heap[TOPK];
    strata_hadamard_init(hm, DI);
    for (int i = 0; i < n * IH * DI; i++) q[i] = frand(1.0f);
    for (int i = 0; i < n * DI; i++) k[i] = frand(1.0f);
    for (int i = 0; i < n * IH; i++) w[i] = frand(1.0f);
    for (int i = 0; i < 2 * 2 * NCTX * DI; i++) ref_cache[i] = cache[i] = frand(1.0f);  // earlier keys
    for (int t = 0; t < n; t++) pos[t] = t < NA ? N0 + t : t - NA;
    // sequence caches [2 slots][NCTX][DI] each; the op runs on slot 1
    const struct strata_seq seqs[2] = {{.tok0 = 0, .n_tok = NA, .pos0 = N0, .n_ctx = NCTX},
                                       {.tok0 = NA, .n_tok = NB, .pos0 = 0, .n_ctx = NCTX}};
    float *const keys[2] = {cache + NCTX * DI, cache + 3 * NCTX * DI};  // slot 1 of each
    const struct strata_batch b = {.n_tok = n, .n_seq = 2, .seq = seqs, .pos = pos};
    static float q0[n * IH * DI], k0[n * DI];
    memcpy(q0, q, sizeof q);
    memcpy(k0, k, sizeof k);
    struct strata_pool *pool = NULL;
    CHECK(strata_pool_create(&pool, 2) == 0, "pool");
    const enum strata_isa isa = strata_isa_detect() == STRATA_ISA_AVX512 ? STRATA_ISA_AVX512 : STRATA_ISA_AVX2;
    const int vl = isa == STRATA_ISA_AVX512 ? 16 : 8;
    float *scratch = malloc(sizeof(float) * strata_cpu_indexer_scratch(2, NCTX, TOPK, DI));
    const struct strata_indexer_op op = {.batch = &b, .idx_slot = 1, .q = q, .k = k, .w = w, .visible = vis,
                                         .n_head = IH, .d = DI, .top_k = TOPK};
    if (pool) strata_cpu_indexer(pool, isa, &op, keys, hm, scratch);
    // reference: keys of the whole pass stored first, then each token's scores
    for (int t = 0; t < n; t++) {
        float *c = ref_cache + (t < NA ? 0 : 2 * NCTX * DI) + (size_t)NCTX * DI;
        strata_hadamard_apply(kr, k0 + t * DI, hm, DI, 1, vl);
        memcpy(c + (size_t)pos[t] * DI, kr, sizeof kr);
    }
    for (int t = 0; t < n && pool; t++) {
        const float *c = ref_cache + (t < NA ? 0 : 2 * NCTX * DI) + (size_t)NCTX * DI;
        for (int h = 0; h < IH; h++) strata_hadamard_apply(qr + h * DI, q0 + (t * IH + h) * DI, hm, DI, IH, vl);
        CHECK(memcmp(qr, q + t * IH * DI, sizeof qr) == 0, "token %d: rotated query differs", t);
        strata_indexer_scores(sc, qr, w + t * IH, IH, DI, c, DI, pos[t] + 1, vl);
        memset(rvis, 0, sizeof rvis);
        strata_top_k_mask(rvis, sc, pos[t] + 1, TOPK, heap);
        CHECK(memcmp(rvis, vis + t * NCTX, NCTX) == 0, "token %d (position %d): mask differs", t, pos[t]);
    }
    CHECK(memcmp(cache, ref_cache, sizeof cache) == 0, "the stored keys differ");
    int ones = 0;
    for (int c = 0; c < NCTX; c++) ones += vis[(NA - 1) * NCTX + c];
    CHECK(ones == TOPK, "last token of the first sequence keeps %d positions", ones);
    strata_pool_free(pool);
    free(scratch);
    case_result("indexer op: keys stored per sequence before scoring, masks of a two-sequence pass", f0);
}

// The indexer op at decode (fewer tokens than threads: the positions are split over the threads):
// two sequences of different contexts, one token each past several chunks of positions, on a pool
// of 3 threads, against the portable primitives.
static void test_indexer_op_decode(void)
{
    const int f0 = g_failures;
    enum { IH = 4, DI = 128, C0 = 1100, C1 = 800, TOPK = 64, n = 2 };
    static float q[n * IH * DI], k[n * DI], w[n * IH], cache0[C0 * DI], cache1[C1 * DI];
    static float hm[DI * DI], qr[IH * DI], sc[C0];
    static uint8_t vis[n * C0], rvis[C0];
    int32_t pos[n] = {1000, 700}, heap[TOPK];
    strata_hadamard_init(hm, DI);
    for (int i = 0; i < n * IH * DI; i++) q[i] = frand(1.0f);
    for (int i = 0; i < n * DI; i++) k[i] = frand(1.0f);
    for (int i = 0; i < n * IH; i++) w[i] = frand(1.0f);
    for (int i = 0; i < C0 * DI; i++) cache0[i] = frand(1.0f);
    for (int i = 0; i < C1 * DI; i++) cache1[i] = frand(1.0f);
    static float q0[n * IH * DI], w0[n * IH];
    memcpy(q0, q, sizeof q);
    memcpy(w0, w, sizeof w);
    const struct strata_seq seqs[2] = {{.tok0 = 0, .n_tok = 1, .pos0 = pos[0], .n_ctx = C0},
                                       {.tok0 = 1, .n_tok = 1, .pos0 = pos[1], .n_ctx = C1}};
    float *const keys[2] = {cache0, cache1};
    const struct strata_batch b = {.n_tok = n, .n_seq = 2, .seq = seqs, .pos = pos};
    struct strata_pool *pool = NULL;
    CHECK(strata_pool_create(&pool, 3) == 0, "pool");
    const enum strata_isa isa = strata_isa_detect() == STRATA_ISA_AVX512 ? STRATA_ISA_AVX512 : STRATA_ISA_AVX2;
    const int vl = isa == STRATA_ISA_AVX512 ? 16 : 8;
    float *scratch = malloc(sizeof(float) * strata_cpu_indexer_scratch(3, C0, TOPK, DI));
    const float ws = 0.0625f;
    const struct strata_indexer_op op = {.batch = &b, .idx_slot = 0, .q = q, .k = k, .w = w, .w_scale = ws,
                                         .visible = vis, .visible_stride = C0, .n_head = IH, .d = DI, .top_k = TOPK};
    if (pool) strata_cpu_indexer(pool, isa, &op, keys, hm, scratch);
    for (int t = 0; t < n && pool; t++) {
        const float *c = keys[t];
        float wt[IH];
        for (int h = 0; h < IH; h++) {
            strata_hadamard_apply(qr + h * DI, q0 + (t * IH + h) * DI, hm, DI, IH, vl);
            wt[h] = w0[t * IH + h] * ws;
        }
        CHECK(memcmp(wt, w + t * IH, sizeof wt) == 0, "token %d: scaled weights differ", t);
        strata_indexer_scores(sc, qr, wt, IH, DI, c, DI, pos[t] + 1, vl);
        memset(rvis, 0, sizeof rvis);
        strata_top_k_mask(rvis, sc, pos[t] + 1, TOPK, heap);
        CHECK(memcmp(rvis, vis + t * C0, t ? C1 : C0) == 0, "token %d (position %d): mask differs", t, pos[t]);
    }
    strata_pool_free(pool);
    free(scratch);
    case_result("indexer op at decode: positions split over 3 threads, sequences of 1,100 and 800 positions", f0);
}

// ---- routing --------------------------------------------------------------------------------

// Reference in double: the same rules, as the model cards state them.
static void route_ref(const struct strata_route_cfg *c, const float *logits, const float *bias, int32_t *ids,
                      double *w, double *margin)
{
    const int X = (int)c->n_expert, K = (int)c->n_used;
    double probs[256], sel[256];
    double mx = -INFINITY, s = 0;
    for (int e = 0; e < X; e++) mx = fmax(mx, logits[e]);
    for (int e = 0; e < X; e++) {
        if (c->gating == STRATA_GATING_SOFTMAX) s += exp(logits[e] - mx);
        probs[e] = c->gating == STRATA_GATING_SIGMOID ? 1 / (1 + exp(-(double)logits[e])) : logits[e];
    }
    if (c->gating == STRATA_GATING_SOFTMAX)
        for (int e = 0; e < X; e++) probs[e] = exp(logits[e] - mx) / s;
    for (int e = 0; e < X; e++) sel[e] = probs[e] + (bias ? bias[e] : 0);
    *margin = INFINITY;
    if (c->n_groups > 1) {
        const int G = (int)c->n_groups, per = X / G;
        double gs[64];
        for (int g = 0; g < G; g++) {
            double a = -INFINITY, b = -INFINITY;
            for (int e = 0; e < per; e++) {
                const double v = sel[g * per + e];
                if (v > a) {
                    b = a;
                    a = v;
                } else if (v > b) {
                    b = v;
                }
            }
            gs[g] = a + b;
        }
        int keep[64] = {0};
        for (uint32_t j = 0; j < c->n_group_used; j++) {
            int best = -1;
            for (int g = 0; g < G; g++)
                if (!keep[g] && (best < 0 || gs[g] > gs[best])) best = g;
            keep[best] = 1;
        }
        double lo_kept = INFINITY, hi_drop = -INFINITY;
        for (int g = 0; g < G; g++) {
            if (keep[g]) lo_kept = fmin(lo_kept, gs[g]);
            else hi_drop = fmax(hi_drop, gs[g]);
        }
        *margin = lo_kept - hi_drop;
        for (int g = 0; g < G; g++)
            if (!keep[g])
                for (int e = 0; e < per; e++) sel[g * per + e] = -INFINITY;
    }
    int taken[256] = {0};
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < X; e++)
            if (!taken[e] && (best < 0 || sel[e] > sel[best])) best = e;
        taken[best] = 1;
        ids[k] = best;
    }
    for (int k = 0; k + 1 < K; k++) *margin = fmin(*margin, sel[ids[k]] - sel[ids[k + 1]]);
    double next = -INFINITY;
    for (int e = 0; e < X; e++)
        if (!taken[e]) next = fmax(next, sel[e]);
    if (next > -INFINITY) *margin = fmin(*margin, sel[ids[K - 1]] - next);
    double sum = 0, wmx = -INFINITY;
    for (int k = 0; k < K; k++) {
        w[k] = probs[ids[k]];
        wmx = fmax(wmx, w[k]);
    }
    if (c->gating == STRATA_GATING_SOFTMAX_WEIGHT) {
        double z = 0;
        for (int k = 0; k < K; k++) z += exp(w[k] - wmx);
        for (int k = 0; k < K; k++) w[k] = exp(w[k] - wmx) / z;
    }
    for (int k = 0; k < K; k++) sum += w[k];
    for (int k = 0; k < K; k++) {
        if (c->norm) w[k] /= sum;
        if (c->scale != 0) w[k] *= c->scale;
    }
}

static void test_routing(void)
{
    const int f0 = g_failures;
    struct {
        const char *name;
        struct strata_route_cfg c;
        int bias;
    } cases[] = {
        {"qwen softmax top-8 of 128", {128, 8, STRATA_GATING_SOFTMAX, 0, 0, true, 0, 16}, 0},
        {"deepseek-v3 sigmoid+bias, 8 groups of 32 (4 used), top-8, x2.5",
         {256, 8, STRATA_GATING_SIGMOID, 8, 4, true, 2.5f, 16}, 1},
        {"tiny deepseek2: 4 groups of 4 (2 used), top-4", {16, 4, STRATA_GATING_SIGMOID, 4, 2, true, 2.5f, 8}, 1},
        {"glm: sigmoid+bias top-8 of 160, no groups", {160, 8, STRATA_GATING_SIGMOID, 1, 1, true, 2.5f, 16}, 1},
        {"gpt-oss: softmax over the top-4 of 32", {32, 4, STRATA_GATING_SOFTMAX_WEIGHT, 0, 0, false, 0, 16}, 0},
    };
    int compared = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const struct strata_route_cfg *cfg = &cases[c].c;
        for (int rep = 0; rep < 200; rep++) {
            float logits[256] = {0}, copy[256], bias[256] = {0}, scratch[512], w[16];
            int32_t ids[16], rids[16];
            double rw[16], margin;
            for (uint32_t e = 0; e < cfg->n_expert; e++) {
                logits[e] = frand(3.0f);
                bias[e] = frand(0.2f);
            }
            memcpy(copy, logits, sizeof logits);
            route_ref(cfg, copy, cases[c].bias ? bias : NULL, rids, rw, &margin);
            strata_route_select(cfg, logits, cases[c].bias ? bias : NULL, ids, w, scratch);
            if (margin < 1e-5) continue;  // a near tie: float and double may choose differently
            compared++;
            for (uint32_t k = 0; k < cfg->n_used; k++) {
                CHECK(ids[k] == rids[k], "%s rep %d: expert %u is %d, want %d", cases[c].name, rep, k, ids[k], rids[k]);
                CHECK(fabs(w[k] - rw[k]) <= 1e-6 * (1 + fabs(rw[k])), "%s rep %d: weight %u %.9g vs %.9g",
                      cases[c].name, rep, k, w[k], rw[k]);
            }
        }
    }
    CHECK(compared > 900, "only %d routings compared (too many near ties)", compared);
    printf("    %d routings compared\n", compared);
    case_result("routing: softmax, sigmoid + bias, expert groups, softmax after top-k, norm, scale", f0);
}

// strata_route_topk's picks against its selection as first written (route_ref.h): the same ids
// and weight bits, with ties (logits from 4 values), NaN and infinite logits, a bias, sigmoid and
// softmax, and an expert count past the bitset's stack size.
static void test_route_topk(void)
{
    const int f0 = g_failures;
    static float logits[2048], probs[2048], bias[2048];
    const uint32_t xs[] = {8, 128, 160, 2000};
    int bad = 0, runs = 0;
    for (size_t xi = 0; xi < sizeof xs / sizeof xs[0]; xi++)
        for (int rep = 0; rep < 60; rep++, runs++) {
            const uint32_t X = xs[xi], K = X < 8 ? X : 8;
            for (uint32_t e = 0; e < X; e++) {
                logits[e] = rep % 3 == 0 ? (float)(rand() % 4) : frand(4.0f);
                bias[e] = frand(0.5f);
            }
            if (rep % 5 == 1) logits[rep % X] = NAN;
            if (rep % 7 == 2) logits[(rep * 3) % X] = INFINITY;
            const struct strata_route_params p = {.n_expert = X, .n_used = K, .sigmoid = rep % 2 == 1,
                                                  .norm = rep % 4 != 3, .scale = rep % 4 == 0 ? 2.5f : 0.0f,
                                                  .bias = rep % 3 == 2 ? bias : NULL};
            int32_t sel[8], rsel[8];
            float w[8], rw[8];
            memcpy(probs, logits, X * sizeof *probs);
            strata_route_topk(&p, probs, 1, sel, w);  // probs: the probabilities after the call
            route_picks_ref(probs, p.bias, (int)X, (int)K, p.norm, p.scale, rsel, rw);
            for (uint32_t k = 0; k < K; k++) bad += sel[k] != rsel[k] || memcmp(&w[k], &rw[k], sizeof w[k]) != 0;
        }
    CHECK(bad == 0, "route_topk: %d of %d picks differ from the first selection loop", bad, runs * 8);
    case_result("route_topk: the bitset selection picks as the scan of the picks so far (ties, NaN, bias, 2000 experts)",
                f0);
}

int main(void)
{
    test_route_topk();
    test_rope();
    test_attention();
    test_small_ops();
    test_indexer();
    test_attention_heads();
    test_attention_rows();
    test_attention_rows_softmax();
    test_indexer_op();
    test_indexer_op_decode();
    test_routing();
    printf("%s (%d failed checks)\n", g_failures ? "FAIL" : "ok", g_failures);
    return g_failures ? 1 : 0;
}
