// Tests of src/quant: fp16/bf16 conversions, hand-computed known answers for every block format,
// every computable type x shape x ISA against the scalar reference and against an independent
// float64 re-derivation written here from the block layouts, exact integer sums, extreme values,
// activation rounding bit-exact across ISAs, synthetic blocks, dispatch.
//
//   test_quant [--seed N]                 the tests (random data: the seed is printed)
//   test_quant --bench [--ggml LIB.so]    GB/s of weight bytes per kernel and ISA on 64 MiB of
//                                         weights; with --ggml, also llama.cpp's kernels from
//                                         that libggml-cpu-*.so (libggml-base.so beside it)
//
// Float tolerances. Let S = sum_i |w_i * a_i|, with the scale and min parts of w counted
// separately (|d sc q| + |dmin m|), and eps = 2^-24. The scalar reference computes each
// block's integer sum exactly, rounds the block factor d_w * d_a once in float and accumulates
// in double, so it is within 3 eps S (+ eps |result| for the final float) of the exact float64
// dot. A SIMD kernel adds each term (one fma: one rounding) into one of several float lanes, then
// sums the lanes: any term passes through at most `depth` roundings, depth = (terms per lane) +
// log2(lanes) + 3, so |simd - scalar| <= (depth + 4) eps S + eps |scalar|. Terms per lane are at
// most the block count (quantized types: one term per block and lane) or n / 32 + 11 (float
// types: 4 accumulators of 8 or 16 lanes, then up to 3 vectors and 7 scalars of tail).
#include <dlfcn.h>
#include <float.h>
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "quant/fp16.h"
#include "backend/cpu/kernels.h"
#include "quant/quant.h"
#include "util/log.h"

#define EPS32 (1.0 / 16777216.0)

static int g_failures;
static long g_checks;
static double g_worst_ref, g_worst_simd;  // largest observed errors, in units of eps * S
static uint64_t g_seed;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        g_checks++;                                                               \
        if (!(cond)) {                                                            \
            if (g_failures++ < 40) {                                              \
                printf("FAIL %s:%d: ", __FILE__, __LINE__);                       \
                printf(__VA_ARGS__);                                              \
                printf("\n");                                                     \
            }                                                                     \
        }                                                                         \
    } while (0)

static const uint32_t g_computable[] = {STRATA_TYPE_F32,  STRATA_TYPE_F16,  STRATA_TYPE_BF16, STRATA_TYPE_Q8_0,
                                        STRATA_TYPE_Q4_K, STRATA_TYPE_Q5_K, STRATA_TYPE_Q6_K};
#define N_COMPUTABLE (sizeof(g_computable) / sizeof(g_computable[0]))

static uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static float rdf32(const uint8_t *p) { float v; memcpy(&v, p, 4); return v; }
static void wr16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

// ---- independent re-derivation of the formats (float64, element by element) -----------------

// IEEE binary16 from its definition, not through fp16.h.
static double half_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t b) { return strata_f32_from_bits((uint32_t)b << 16); }

// bf16 from its fields with the exponent unbounded (0x7f80 is 2^128, the rounding neighbour of
// the largest finite bf16).
static double bf16_unbounded(uint16_t b)
{
    int e = (b >> 7) & 255, f = b & 127;
    double v = e == 0 ? ldexp(f, -133) : ldexp(128 + f, e - 134);
    return b & 0x8000 ? -v : v;
}

// The 6-bit scale and min of sub-block j of Q4_K/Q5_K, from the 12 packed bytes.
static void k_scale_min(const uint8_t *b, int j, int *sc, int *m)
{
    if (j < 4) {
        *sc = b[j] & 63;
        *m = b[j + 4] & 63;
    } else {
        *sc = (b[j + 4] & 0xf) | (b[j - 4] >> 6) << 4;
        *m = (b[j + 4] >> 4) | (b[j] >> 6) << 4;
    }
}

// Element e of the block at `blk`: value = *scaled - *min_part (min_part 0 for formats without).
static void derive(uint32_t type, const uint8_t *blk, int e, double *scaled, double *min_part)
{
    *min_part = 0.0;
    switch (type) {
    case STRATA_TYPE_F32: *scaled = rdf32(blk + 4 * e); return;
    case STRATA_TYPE_F16: *scaled = half_value(rd16(blk + 2 * e)); return;
    case STRATA_TYPE_BF16: *scaled = bf16_value(rd16(blk + 2 * e)); return;
    case STRATA_TYPE_Q8_0: *scaled = half_value(rd16(blk)) * (int8_t)blk[2 + e]; return;
    case STRATA_TYPE_Q4_0: case STRATA_TYPE_Q4_1: case STRATA_TYPE_Q5_0: case STRATA_TYPE_Q5_1: {
        bool has_min = type == STRATA_TYPE_Q4_1 || type == STRATA_TYPE_Q5_1;
        bool five = type == STRATA_TYPE_Q5_0 || type == STRATA_TYPE_Q5_1;
        const uint8_t *qs = blk + (has_min ? 4 : 2) + (five ? 4 : 0);
        int q = e < 16 ? qs[e] & 15 : qs[e - 16] >> 4;
        if (five) {
            uint32_t qh;
            memcpy(&qh, blk + (has_min ? 4 : 2), 4);
            q |= (int)((qh >> e) & 1) << 4;
        }
        double d = half_value(rd16(blk));
        if (has_min) {
            *scaled = d * q;
            *min_part = -half_value(rd16(blk + 2));
        } else {
            *scaled = d * (q - (five ? 16 : 8));
        }
        return;
    }
    case STRATA_TYPE_Q2_K: {  // scales[16] qs[64] d dmin
        int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
        int q = (blk[16 + 32 * half + l] >> (2 * quarter)) & 3;
        int sc = blk[e / 16] & 15, m = blk[e / 16] >> 4;
        *scaled = half_value(rd16(blk + 80)) * sc * q;
        *min_part = half_value(rd16(blk + 82)) * m;
        return;
    }
    case STRATA_TYPE_Q3_K: {  // hmask[32] qs[64] scales[12] d
        int half = e / 128, quarter = (e % 128) / 32, l = e % 32, j = e / 16;
        const uint8_t *sb = blk + 96;
        int low4 = j < 8 ? sb[j] & 15 : sb[j - 8] >> 4;
        int high2 = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
        int q = (blk[32 + 32 * half + l] >> (2 * quarter)) & 3;
        if (!(blk[l] & (1 << (4 * half + quarter)))) q -= 4;
        *scaled = half_value(rd16(blk + 108)) * ((low4 | high2 << 4) - 32) * q;
        return;
    }
    case STRATA_TYPE_Q4_K: case STRATA_TYPE_Q5_K: {  // d dmin scales[12] [qh[32]] qs[128]
        int sub = e / 32, sc, m;
        k_scale_min(blk + 4, sub, &sc, &m);
        const uint8_t *qs = blk + (type == STRATA_TYPE_Q5_K ? 48 : 16);
        uint8_t byte = qs[32 * (e / 64) + e % 32];
        int q = sub & 1 ? byte >> 4 : byte & 15;
        if (type == STRATA_TYPE_Q5_K) q += ((blk[16 + e % 32] >> sub) & 1) * 16;
        *scaled = half_value(rd16(blk)) * sc * q;
        *min_part = half_value(rd16(blk + 2)) * m;
        return;
    }
    case STRATA_TYPE_Q6_K: {  // ql[128] qh[64] scales[16] d
        int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
        uint8_t lbyte = blk[64 * half + 32 * (quarter & 1) + l];
        int q = (quarter >= 2 ? lbyte >> 4 : lbyte & 15) | ((blk[128 + 32 * half + l] >> (2 * quarter)) & 3) << 4;
        *scaled = half_value(rd16(blk + 208)) * (int8_t)blk[192 + e / 16] * (q - 32);
        return;
    }
    default:
        *scaled = NAN;
    }
}

// Whole rows: values[i] = scaled - min, and the two parts separately (for the bound S).
static void derive_row(uint32_t type, const void *row, int64_t n, double *value, double *scaled, double *minp)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *blk = (const uint8_t *)row + (i / tr->block_size) * tr->type_size;
        double s, m;
        derive(type, blk, (int)(i % tr->block_size), &s, &m);
        value[i] = s - m;
        if (scaled) scaled[i] = s;
        if (minp) minp[i] = m;
    }
}

// Activation formats: Q8_K is f32 d, int8 qs[256], int16 bsums[16].
static void derive_act(uint32_t type, const void *row, int64_t n, double *value)
{
    if (type != STRATA_TYPE_Q8_K) {
        derive_row(type, row, n, value, NULL, NULL);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *blk = (const uint8_t *)row + (i / 256) * 292;
        value[i] = (double)rdf32(blk) * (int8_t)blk[4 + i % 256];
    }
}

// ---- fp16 / bf16 conversions --------------------------------------------------------------

static bool cpu_has_f16c(void)
{
    return __builtin_cpu_supports("avx2");  // every AVX2 CPU has F16C; clang 14 can't ask "f16c"
}

__attribute__((target("f16c"))) static uint16_t f16c_from_float(float f)
{
    return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("f16c"))) static float f16c_to_float(uint16_t h)
{
    return _cvtsh_ss(h);
}

static bool same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || strata_f32_to_bits(a) == strata_f32_to_bits(b);
}

static void test_fp16(uint64_t *rng)
{
    bool f16c = cpu_has_f16c();
    for (uint32_t h = 0; h < 65536; h++) {
        float f = strata_fp16_to_fp32((uint16_t)h);
        double want = half_value((uint16_t)h);
        CHECK(isnan(want) ? isnan(f) : (double)f == want, "fp16 %04x -> %g, want %g", h, f, want);
        if (!isnan(f)) CHECK(strata_fp32_to_fp16(f) == h, "fp16 %04x round trip gives %04x", h, strata_fp32_to_fp16(f));
        else CHECK((strata_fp32_to_fp16(f) & 0x7c00) == 0x7c00 && (strata_fp32_to_fp16(f) & 0x3ff), "NaN %04x", h);
        // F16C keeps NaN payloads and quiets them; fp16.h does not: NaN-ness is what counts
        if (f16c) CHECK(same_float(f, f16c_to_float((uint16_t)h)), "fp16 %04x: %g vs F16C %g", h, f, f16c_to_float((uint16_t)h));
    }
    // every rounding boundary: the midpoint of two neighbouring halves and the floats beside it
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float lo = strata_fp16_to_fp32((uint16_t)h);
        float hi = h + 1 == 0x7c00 ? 65536.0f : (float)half_value((uint16_t)(h + 1));  // inf's neighbour
        float mid = (float)(((double)lo + (double)hi) / 2);  // exact: halves have 11 bits
        float probes[3] = {mid, nextafterf(mid, 0.0f), nextafterf(mid, INFINITY)};
        uint16_t want[3] = {(uint16_t)(h & 1 ? h + 1 : h), (uint16_t)h, (uint16_t)(h + 1)};
        for (int k = 0; k < 3; k++) {
            for (int neg = 0; neg < 2; neg++) {
                float x = neg ? -probes[k] : probes[k];
                uint16_t w = (uint16_t)(want[k] | (neg ? 0x8000 : 0));
                CHECK(strata_fp32_to_fp16(x) == w, "fp16(%a) = %04x, want %04x", x, strata_fp32_to_fp16(x), w);
                if (f16c) CHECK(f16c_from_float(x) == w, "F16C(%a) = %04x, want %04x", x, f16c_from_float(x), w);
            }
        }
    }
    if (f16c) {
        for (int i = 0; i < 2000000; i++) {
            float x = strata_f32_from_bits((uint32_t)strata_rng_next(rng));
            if (isnan(x)) continue;
            CHECK(strata_fp32_to_fp16(x) == f16c_from_float(x), "fp16(%a) = %04x, F16C %04x", x,
                  strata_fp32_to_fp16(x), f16c_from_float(x));
        }
    }
    // bf16: round trip of all 65536 and rounding of random floats against a float64 derivation
    for (uint32_t b = 0; b < 65536; b++) {
        float f = strata_bf16_to_fp32((uint16_t)b);
        if (isnan(f)) CHECK(isnan(strata_bf16_to_fp32(strata_fp32_to_bf16(f))), "bf16 NaN %04x", b);
        else CHECK(strata_fp32_to_bf16(f) == b, "bf16 %04x round trip gives %04x", b, strata_fp32_to_bf16(f));
    }
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)strata_rng_next(rng);
        if (i & 1) u &= 0xffff8000u | (strata_rng_next(rng) & 1 ? 0x7fff : 0);  // many exact ties
        float x = strata_f32_from_bits(u);
        if (isnan(x) || isinf(x)) continue;
        uint16_t down = (uint16_t)(u >> 16), up = (uint16_t)(down + 1);
        double dd = fabs((double)x - bf16_unbounded(down)), du = fabs(bf16_unbounded(up) - (double)x);
        uint16_t want = u & 0xffff ? (dd < du ? down : du < dd ? up : (down & 1 ? up : down)) : down;
        CHECK(strata_fp32_to_bf16(x) == want, "bf16(%a) = %04x, want %04x", x, strata_fp32_to_bf16(x), want);
    }
    CHECK(strata_fp32_to_bf16(strata_f32_from_bits(0x7f800001u)) == 0x7fc0, "bf16 of a signalling NaN is quiet");
}

// ---- known answers: hand-built blocks, values computed by hand from the layouts -------------

struct known {
    int index;
    float value;
};

// Checks dequantisation of one hand-built row by every ISA's table and by derive().
static void check_known(const char *what, uint32_t type, const uint8_t *row, int64_t n,
                        const struct known *want, int n_want, const struct strata_kernels **tabs, int n_tabs)
{
    float *out = xmalloc((size_t)n * sizeof(float));
    double *derived = xmalloc((size_t)n * sizeof(double));
    derive_row(type, row, n, derived, NULL, NULL);
    for (int t = 0; t < n_tabs; t++) {
        tabs[t]->dequant[type](row, out, n);
        for (int k = 0; k < n_want; k++)
            CHECK(out[want[k].index] == want[k].value, "%s [%s] element %d = %.9g, hand-computed %.9g", what,
                  strata_isa_name(tabs[t]->isa), want[k].index, out[want[k].index], want[k].value);
    }
    for (int k = 0; k < n_want; k++)
        CHECK(derived[want[k].index] == want[k].value, "%s: test's own derivation of element %d = %.9g, want %.9g",
              what, want[k].index, derived[want[k].index], want[k].value);
    free(out);
    free(derived);
}

static void test_known_dequant(const struct strata_kernels **tabs, int n_tabs)
{
    uint8_t blk[256 * 4];

    const uint16_t halves[6] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8400, 0x3555};
    const struct known f16[6] = {{0, 1.0f}, {1, -2.0f}, {2, 65504.0f}, {3, 5.9604644775390625e-08f},
                                 {4, -6.103515625e-05f}, {5, 0.333251953125f}};
    memcpy(blk, halves, sizeof(halves));
    check_known("F16", STRATA_TYPE_F16, blk, 6, f16, 6, tabs, n_tabs);

    const uint16_t bf[4] = {0x3f80, 0xc040, 0x4049, 0x0001};
    const struct known bf16[4] = {{0, 1.0f}, {1, -3.0f}, {2, 3.140625f}, {3, 9.18354961579912115e-41f}};
    memcpy(blk, bf, sizeof(bf));
    check_known("BF16", STRATA_TYPE_BF16, blk, 4, bf16, 4, tabs, n_tabs);

    // Q8_0: d = 0.5, q[i] = i - 16
    wr16(blk, 0x3800);
    for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(i - 16);
    const struct known q8_0[4] = {{0, -8.0f}, {1, -7.5f}, {16, 0.0f}, {31, 7.5f}};
    check_known("Q8_0", STRATA_TYPE_Q8_0, blk, 32, q8_0, 4, tabs, n_tabs);

    // Q4_K: d = 1, dmin = 0.5; scales 1,2,3,4,5,6,7,63 and mins 0,1,2,3,4,5,6,40 packed by hand:
    // bytes 0-3 = sc0..3 | (sc4..7 >> 4) << 6 = 1, 2, 3, 4 + (3 << 6); bytes 4-7 likewise for the
    // mins = 0, 1, 2, 3 + (2 << 6); bytes 8-11 = (sc & 15) | (m & 15) << 4 for 4..7 = 0x45, 0x56,
    // 0x67, 0x8f. qs[i] = 0x70 | (i % 16): even sub-blocks read i % 16, odd ones read 7.
    const uint8_t k_scales[12] = {1, 2, 3, 196, 0, 1, 2, 131, 0x45, 0x56, 0x67, 0x8f};
    memset(blk, 0, sizeof(blk));
    wr16(blk, 0x3c00);
    wr16(blk + 2, 0x3800);
    memcpy(blk + 4, k_scales, 12);
    for (int i = 0; i < 128; i++) blk[16 + i] = (uint8_t)(0x70 | (i % 16));
    // e.g. 33: sub-block 1, 2 * 7 - 0.5 * 1; 200: sub-block 6, q = 104 % 16 = 8: 7 * 8 - 0.5 * 6
    const struct known q4_k[8] = {{0, 0.0f},   {5, 5.0f},    {33, 13.5f},  {100, 26.5f},
                                  {200, 53.0f}, {223, 102.0f}, {224, 421.0f}, {255, 421.0f}};
    check_known("Q4_K", STRATA_TYPE_Q4_K, blk, 256, q4_k, 8, tabs, n_tabs);

    // Q5_K: the same, with qh[l] = 0xff for l < 16 (every sub-block adds 16), 0 otherwise.
    memset(blk, 0, sizeof(blk));
    wr16(blk, 0x3c00);
    wr16(blk + 2, 0x3800);
    memcpy(blk + 4, k_scales, 12);
    for (int l = 0; l < 16; l++) blk[16 + l] = 0xff;
    for (int i = 0; i < 128; i++) blk[48 + i] = (uint8_t)(0x70 | (i % 16));
    // e.g. 239: sub-block 7, l = 15: q = 7 + 16, 63 * 23 - 0.5 * 40
    const struct known q5_k[9] = {{0, 16.0f},   {5, 21.0f},   {20, 4.0f},     {33, 45.5f},   {100, 90.5f},
                                  {200, 165.0f}, {239, 1429.0f}, {240, 421.0f}, {255, 421.0f}};
    check_known("Q5_K", STRATA_TYPE_Q5_K, blk, 256, q5_k, 9, tabs, n_tabs);

    // Q6_K: ql[i] = i, qh[i] = 0xe4 (bit pairs 0, 1, 2, 3 from the bottom), scales[j] = j - 8,
    // d = 0.5. E.g. 40: ql[40] low = 8, high pair 1: q = 24, 0.5 * -6 * (24 - 32) = 24;
    // 200: ql[72] high = 4, pair 2: q = 36, 0.5 * 4 * 4 = 8.
    memset(blk, 0, sizeof(blk));
    for (int i = 0; i < 128; i++) blk[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++) blk[128 + i] = 0xe4;
    for (int j = 0; j < 16; j++) blk[192 + j] = (uint8_t)(j - 8);
    wr16(blk + 208, 0x3800);
    const struct known q6_k[8] = {{0, 128.0f}, {17, 108.5f}, {40, 24.0f}, {70, 0.0f},
                                  {90, -1.5f}, {127, -9.5f}, {200, 8.0f}, {255, 80.5f}};
    check_known("Q6_K", STRATA_TYPE_Q6_K, blk, 256, q6_k, 8, tabs, n_tabs);
}

static void test_known_quantize(const struct strata_kernels **tabs, int n_tabs)
{
    for (int t = 0; t < n_tabs; t++) {
        const struct strata_kernels *k = tabs[t];
        const char *isa = strata_isa_name(k->isa);

        // Q8_0: amax 127 makes the multiplier exactly 1; ties round to even (62.5 -> 62)
        float x[512] = {127.0f, 62.5f, 63.5f, -0.5f, -1.5f, 2.5f, -127.0f, 0.4f};
        const int8_t want_q8_0[8] = {127, 62, 64, 0, -2, 2, -127, 0};
        uint8_t out[1024];
        k->quantize[STRATA_TYPE_Q8_0](x, out, 32);
        CHECK(rd16(out) == 0x3c00, "[%s] Q8_0 d = %04x, want 3c00", isa, rd16(out));
        for (int i = 0; i < 8; i++)
            CHECK((int8_t)out[2 + i] == want_q8_0[i], "[%s] Q8_0 q[%d] = %d, want %d", isa, i, (int8_t)out[2 + i], want_q8_0[i]);

        // Q8_K: the first element of largest magnitude (-127 at 5, not 127 at 9) maps to -127,
        // so d = 1; in block 1 the largest is +127, so d = -1 and the quants flip sign.
        memset(x, 0, sizeof(x));
        x[0] = 3.0f, x[1] = 2.5f, x[2] = -3.5f, x[5] = -127.0f, x[9] = 127.0f;
        x[256] = 127.0f, x[257] = 1.5f, x[258] = -2.5f;
        k->quantize[STRATA_TYPE_Q8_K](x, out, 512);
        const int8_t want_b0[10] = {3, 2, -4, 0, 0, -127, 0, 0, 0, 127};
        CHECK(rdf32(out) == 1.0f, "[%s] Q8_K d = %g, want 1", isa, rdf32(out));
        for (int i = 0; i < 10; i++)
            CHECK((int8_t)out[4 + i] == want_b0[i], "[%s] Q8_K q[%d] = %d, want %d", isa, i, (int8_t)out[4 + i], want_b0[i]);
        CHECK((int16_t)rd16(out + 260) == 1 && rd16(out + 262) == 0, "[%s] Q8_K bsums %d %d, want 1 0", isa,
              (int16_t)rd16(out + 260), (int16_t)rd16(out + 262));
        CHECK(rdf32(out + 292) == -1.0f, "[%s] Q8_K block 1 d = %g, want -1", isa, rdf32(out + 292));
        CHECK((int8_t)out[296] == -127 && (int8_t)out[297] == -2 && (int8_t)out[298] == 2,
              "[%s] Q8_K block 1 q = %d %d %d, want -127 -2 2", isa, (int8_t)out[296], (int8_t)out[297], (int8_t)out[298]);
        CHECK((int16_t)rd16(out + 292 + 260) == -127, "[%s] Q8_K block 1 bsum %d", isa, (int16_t)rd16(out + 292 + 260));

        // F16: ties to even at 1 + 2^-11 and in the subnormals; 65520 is the overflow boundary
        // F16: ties to even at 1 + 2^-11 and in the subnormals; 65520 is the overflow boundary.
        // Repeated over 70 elements so that the SIMD loops, not only their tails, see them.
        const float f16_in[7] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 65519.0f, 0x1p-25f, 3 * 0x1p-25f, -0x1p-25f};
        const uint16_t f16_want[7] = {0x3c00, 0x3c02, 0x7c00, 0x7bff, 0x0000, 0x0002, 0x8000};
        for (int i = 0; i < 70; i++) x[i] = f16_in[i % 7];
        k->quantize[STRATA_TYPE_F16](x, out, 70);
        for (int i = 0; i < 70; i++)
            CHECK(rd16(out + 2 * i) == f16_want[i % 7], "[%s] f16(%a) = %04x, want %04x", isa, x[i], rd16(out + 2 * i), f16_want[i % 7]);

        const float bf_in[5] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), strata_f32_from_bits(0x7f800001u), FLT_MAX};
        const uint16_t bf_want[5] = {0x3f80, 0x3f82, 0xbf80, 0x7fc0, 0x7f80};
        for (int i = 0; i < 70; i++) x[i] = bf_in[i % 5];
        k->quantize[STRATA_TYPE_BF16](x, out, 70);
        for (int i = 0; i < 70; i++)
            CHECK(rd16(out + 2 * i) == bf_want[i % 5], "[%s] bf16(%a) = %04x, want %04x", isa, x[i], rd16(out + 2 * i), bf_want[i % 5]);
    }
}

// ---- every computable type x shape x ISA on random data --------------------------------------

// Float roundings a SIMD kernel may stack on one term (see the header comment).
static double simd_depth(uint32_t type, int64_t n)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    return tr->is_quantized ? (double)(n / tr->block_size) + 8.0 : (double)(n / 32) + 16.0;
}

// A random activation row: normal values of a random scale, with a few outliers.
static void random_activations(uint64_t *rng, float *x, int64_t n)
{
    static const float scales[4] = {1.0f, 1e-3f, 40.0f, 3e-6f};
    float scale = scales[strata_rng_next(rng) % 4];
    for (int64_t i = 0; i < n; i++) {
        x[i] = scale * strata_rng_normal(rng);
        if (strata_rng_next(rng) % 97 == 0) x[i] *= 25.0f;
    }
}

static void test_random_type(uint32_t type, int64_t n, const struct strata_kernels **tabs, int n_tabs, uint64_t *rng)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    uint32_t vt = tr->vec_dot_type;
    size_t w_bytes = strata_type_row_bytes(type, (uint64_t)n), a_bytes = strata_type_row_bytes(vt, (uint64_t)n);
    // weight rows in GGUF need only 2-byte alignment: test them at an offset of 2 (4 for F32)
    size_t offset = type == STRATA_TYPE_F32 ? 4 : 2;
    uint8_t *w_buf = xmalloc(w_bytes + offset), *w = w_buf + offset;
    uint8_t *act_ref = xmalloc(a_bytes), *act = xmalloc(a_bytes);
    float *x = xmalloc((size_t)n * sizeof(float)), *deq_ref = xmalloc((size_t)n * sizeof(float));
    float *deq = xmalloc((size_t)n * sizeof(float));
    double *wv = xmalloc((size_t)n * sizeof(double)), *ws = xmalloc((size_t)n * sizeof(double));
    double *wm = xmalloc((size_t)n * sizeof(double)), *av = xmalloc((size_t)n * sizeof(double));
    static const float stds[3] = {1.0f, 0.02f, 30.0f};

    for (int trial = 0; trial < 3; trial++) {
        CHECK(strata_quant_random(type, rng, w, n, stds[trial]) == 0, "random %s", tr->name);
        derive_row(type, w, n, wv, ws, wm);

        tabs[0]->dequant[type](w, deq_ref, n);
        for (int64_t i = 0; i < n; i++) {
            double tol = 4 * EPS32 * (fabs(ws[i]) + fabs(wm[i]));
            if (!(fabs(deq_ref[i] - wv[i]) <= tol)) {
                CHECK(0, "%s n=%lld dequant[%lld] = %.9g, derived %.9g", tr->name, (long long)n, (long long)i, deq_ref[i], wv[i]);
                break;
            }
        }
        for (int t = 1; t < n_tabs; t++) {
            tabs[t]->dequant[type](w, deq, n);
            CHECK(!memcmp(deq, deq_ref, (size_t)n * sizeof(float)), "%s n=%lld [%s] dequant differs from scalar",
                  tr->name, (long long)n, strata_isa_name(tabs[t]->isa));
        }

        random_activations(rng, x, n);
        tabs[0]->quantize[vt](x, act_ref, n);
        for (int t = 1; t < n_tabs; t++) {
            tabs[t]->quantize[vt](x, act, n);
            CHECK(!memcmp(act, act_ref, a_bytes), "%s n=%lld [%s] quantize differs from scalar", strata_type_name(vt),
                  (long long)n, strata_isa_name(tabs[t]->isa));
        }

        derive_act(vt, act_ref, n, av);
        double exact = 0.0, bound = 0.0;
        for (int64_t i = 0; i < n; i++) {
            exact += wv[i] * av[i];
            bound += (fabs(ws[i]) + fabs(wm[i])) * fabs(av[i]);
        }
        float ref;
        tabs[0]->vec_dot[type](n, &ref, w, act_ref);
        if (bound > 0) g_worst_ref = fmax(g_worst_ref, fabs(ref - exact) / (EPS32 * bound));
        CHECK(fabs(ref - exact) <= 3 * EPS32 * bound + EPS32 * fabs(exact) + 1e-37,
              "%s n=%lld scalar dot %.9g, float64 %.9g (S %.3g)", tr->name, (long long)n, ref, exact, bound);
        for (int t = 1; t < n_tabs; t++) {
            float got;
            tabs[t]->vec_dot[type](n, &got, w, act_ref);
            double tol = (simd_depth(type, n) + 4) * EPS32 * bound + EPS32 * fabs(ref) + 1e-37;
            if (bound > 0) g_worst_simd = fmax(g_worst_simd, fabs(got - ref) / (EPS32 * bound));
            CHECK(fabs(got - ref) <= tol, "%s n=%lld [%s] dot %.9g, scalar %.9g, diff %.3g > tol %.3g", tr->name,
                  (long long)n, strata_isa_name(tabs[t]->isa), got, ref, fabs(got - ref), tol);
        }
    }
    free(w_buf), free(act_ref), free(act), free(x), free(deq_ref), free(deq);
    free(wv), free(ws), free(wm), free(av);
}

// ---- multi-token dot products ------------------------------------------------------------------

// vec_dot_multi against vec_dot of the same table on each of its rows, bit for bit (a matmul's
// results must not depend on how its tokens are grouped), for every row count, on rows of
// different scales.
static void test_multi_token(uint32_t type, int64_t n, const struct strata_kernels **tabs, int n_tabs, uint64_t *rng)
{
    uint32_t vt = strata_type_traits(type)->vec_dot_type;
    size_t w_bytes = strata_type_row_bytes(type, (uint64_t)n), a_bytes = strata_type_row_bytes(vt, (uint64_t)n);
    size_t offset = type == STRATA_TYPE_F32 ? 4 : 2;  // GGUF rows are only 2-byte aligned
    uint8_t *w_buf = xmalloc(w_bytes + offset), *w = w_buf + offset;
    uint8_t *act = xmalloc(STRATA_DOT_TOKENS * a_bytes);
    float *x = xmalloc((size_t)n * sizeof(float));
    for (int t = 0; t < n_tabs; t++) {
        if (!tabs[t]->vec_dot_multi[type]) continue;
        CHECK(strata_quant_random(type, rng, w, n, 1.0f) == 0, "random %s", strata_type_name(type));
        const void *rows[STRATA_DOT_TOKENS];
        float want[STRATA_DOT_TOKENS];
        for (int r = 0; r < STRATA_DOT_TOKENS; r++) {
            random_activations(rng, x, n);
            tabs[t]->quantize[vt](x, act + r * a_bytes, n);
            rows[r] = act + r * a_bytes;
            tabs[t]->vec_dot[type](n, &want[r], w, rows[r]);
        }
        for (int n_act = 1; n_act <= STRATA_DOT_TOKENS; n_act++) {
            float got[STRATA_DOT_TOKENS];
            // the last n_act rows, so each count sees other data in its first slot
            tabs[t]->vec_dot_multi[type](n, got, w, rows + STRATA_DOT_TOKENS - n_act, n_act);
            for (int r = 0; r < n_act; r++) {
                float ref = want[STRATA_DOT_TOKENS - n_act + r];
                CHECK(!memcmp(&got[r], &ref, sizeof(float)), "%s n=%lld [%s] vec_dot_multi of %d rows, row %d: %.9g, "
                      "vec_dot %.9g", strata_type_name(type), (long long)n, strata_isa_name(tabs[t]->isa), n_act, r,
                      got[r], ref);
            }
        }
    }
    free(w_buf), free(act), free(x);
}

// ---- exact integer sums -----------------------------------------------------------------------

// Block scales of 1 and activations in {-1, 0, 1}: every partial sum is an integer below 2^24,
// so every kernel, whatever its order, must return the exact integer dot product.
static void unit_scales(uint32_t type, uint8_t *w, int64_t n)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    for (int64_t b = 0; b < n / tr->block_size; b++) {
        uint8_t *blk = w + b * tr->type_size;
        if (type == STRATA_TYPE_Q8_0 || type == STRATA_TYPE_Q4_K || type == STRATA_TYPE_Q5_K) wr16(blk, 0x3c00);
        if (type == STRATA_TYPE_Q4_K || type == STRATA_TYPE_Q5_K) wr16(blk + 2, 0x3c00);
        if (type == STRATA_TYPE_Q6_K) wr16(blk + 208, 0x3c00);
    }
}

// An activation row whose dequantised values are exactly `values` (integers, |v| <= 127).
static void build_act(uint32_t vt, const int8_t *values, int64_t n, uint8_t *act)
{
    for (int64_t i = 0; i < n; i++) {
        switch (vt) {
        case STRATA_TYPE_F32: { float f = values[i]; memcpy(act + 4 * i, &f, 4); break; }
        case STRATA_TYPE_F16: wr16(act + 2 * i, strata_fp32_to_fp16(values[i])); break;
        case STRATA_TYPE_BF16: wr16(act + 2 * i, strata_fp32_to_bf16(values[i])); break;
        case STRATA_TYPE_Q8_0:
            if (i % 32 == 0) wr16(act + (i / 32) * 34, 0x3c00);
            act[(i / 32) * 34 + 2 + i % 32] = (uint8_t)values[i];
            break;
        case STRATA_TYPE_Q8_K: {
            uint8_t *blk = act + (i / 256) * 292;
            if (i % 256 == 0) {
                float one = 1.0f;
                memcpy(blk, &one, 4);
                memset(blk + 260, 0, 32);
            }
            blk[4 + i % 256] = (uint8_t)values[i];
            int16_t bsum = (int16_t)rd16(blk + 260 + 2 * ((i % 256) / 16));
            wr16(blk + 260 + 2 * ((i % 256) / 16), (uint16_t)(bsum + values[i]));
            break;
        }
        }
    }
}

// Weights of float types: small integers, so products and sums are exact.
static void small_int_weights(uint32_t type, uint64_t *rng, uint8_t *w, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((int)(strata_rng_next(rng) % 129) - 64);
        if (type == STRATA_TYPE_F32) memcpy(w + 4 * i, &v, 4);
        else wr16(w + 2 * i, type == STRATA_TYPE_F16 ? strata_fp32_to_fp16(v) : strata_fp32_to_bf16(v));
    }
}

static void check_exact_dot(const char *what, uint32_t type, const uint8_t *w, const int8_t *a_int, int64_t n,
                            const struct strata_kernels **tabs, int n_tabs, double rel_tol)
{
    uint32_t vt = strata_type_traits(type)->vec_dot_type;
    uint8_t *act = xmalloc(strata_type_row_bytes(vt, (uint64_t)n));
    double *wv = xmalloc((size_t)n * sizeof(double));
    build_act(vt, a_int, n, act);
    derive_row(type, w, n, wv, NULL, NULL);
    double exact = 0.0;
    for (int64_t i = 0; i < n; i++) exact += wv[i] * a_int[i];
    for (int t = 0; t < n_tabs; t++) {
        float got;
        tabs[t]->vec_dot[type](n, &got, w, act);
        CHECK(fabs(got - exact) <= rel_tol * fabs(exact), "%s %s n=%lld [%s] dot %.9g, exact %.17g", what,
              strata_type_name(type), (long long)n, strata_isa_name(tabs[t]->isa), got, exact);
    }
    free(act);
    free(wv);
}

static void test_exact_sums(const struct strata_kernels **tabs, int n_tabs, uint64_t *rng)
{
    static const int64_t sizes[2] = {256, 2048};
    for (size_t k = 0; k < N_COMPUTABLE; k++) {
        uint32_t type = g_computable[k];
        for (int s = 0; s < 2; s++) {
            int64_t n = sizes[s];
            uint8_t *w = xmalloc(strata_type_row_bytes(type, (uint64_t)n));
            int8_t *a = xmalloc((size_t)n);
            if (strata_type_traits(type)->is_quantized) {
                strata_quant_random(type, rng, w, n, 1.0f);
                unit_scales(type, w, n);
            } else {
                small_int_weights(type, rng, w, n);
            }
            for (int64_t i = 0; i < n; i++) a[i] = (int8_t)((int)(strata_rng_next(rng) % 3) - 1);
            check_exact_dot("exact", type, w, a, n, tabs, n_tabs, 0.0);
            free(w);
            free(a);
        }
    }
}

// The types this file re-derives (the low-bit formats are tested in test_quant_lowbit.c).
static bool listed_computable(uint32_t type)
{
    for (size_t k = 0; k < N_COMPUTABLE; k++)
        if (g_computable[k] == type) return true;
    return false;
}

// Largest quants, scales and activations: int16 overflow or saturation in a kernel would be off
// by far more than float rounding.
static void test_extremes(const struct strata_kernels **tabs, int n_tabs)
{
    const int64_t n = 1024;
    uint8_t *w = xmalloc(4 * n);  // >= a row of any type
    int8_t a[1024];
    for (int pattern = 0; pattern < 3; pattern++) {
        for (int64_t i = 0; i < n; i++) a[i] = pattern == 0 ? 127 : pattern == 1 ? -127 : (i & 1 ? 127 : -127);
        for (int variant = 0; variant < 2; variant++) {
            uint8_t fill = variant ? 0x00 : 0xff;
            for (uint32_t type = 0; type < STRATA_TYPE_COUNT; type++) {
                if (!listed_computable(type) || !strata_type_traits(type)->is_quantized) continue;
                const struct strata_type_traits *tr = strata_type_traits(type);
                memset(w, fill, strata_type_row_bytes(type, (uint64_t)n));
                for (int64_t b = 0; b < n / tr->block_size; b++) {
                    uint8_t *blk = w + b * tr->type_size;
                    if (type == STRATA_TYPE_Q8_0) memset(blk + 2, variant ? 0x80 : 0x7f, 32);  // -128 or 127
                    if (type == STRATA_TYPE_Q6_K) memset(blk + 192, variant ? 0x7f : 0x80, 16);  // 127 or -128
                    if (type == STRATA_TYPE_Q4_K || type == STRATA_TYPE_Q5_K) memset(blk + 4, 0xff, 12);  // 63s
                }
                unit_scales(type, w, n);
                check_exact_dot("extreme", type, w, a, n, tabs, n_tabs, 16 * EPS32);
            }
        }
    }
    free(w);
}

// ---- edge cases -------------------------------------------------------------------------------

static void test_edge_cases(const struct strata_kernels **tabs, int n_tabs, uint64_t *rng)
{
    const int64_t n = 1024;
    float *x = xmalloc(n * sizeof(float));
    uint8_t *ref = xmalloc(n * 4 + 64), *got = xmalloc(n * 4 + 64), *w = xmalloc(n * 4);

    // an all-zero activation row gives exactly 0 whatever the weights
    memset(x, 0, n * sizeof(float));
    for (size_t k = 0; k < N_COMPUTABLE; k++) {
        uint32_t type = g_computable[k], vt = strata_type_traits(type)->vec_dot_type;
        strata_quant_random(type, rng, w, n, 1.0f);
        for (int t = 0; t < n_tabs; t++) {
            float s = 1.0f;
            tabs[t]->quantize[vt](x, got, n);
            tabs[t]->vec_dot[type](n, &s, w, got);
            CHECK(s == 0.0f, "%s [%s] dot with a zero row = %g", strata_type_name(type), strata_isa_name(tabs[t]->isa), s);
        }
    }

    // blocks of huge, infinite, tiny and denormal values, ties and zeros: every ISA rounds them
    // to the same bytes as the reference
    static const float specials[] = {1e30f, -3e38f, FLT_MAX, INFINITY, -INFINITY, 1e-40f, -1e-38f, 1e-45f,
                                     0.0f, -0.0f, 0.5f, 1.5f, -2.5f, 65504.0f, 65520.0f, 6e-8f};
    const int n_specials = (int)(sizeof(specials) / sizeof(specials[0]));
    for (int row = 0; row < 40; row++) {
        random_activations(rng, x, n);
        for (int blk = 0; blk < n / 256; blk++) {
            int kind = (int)(strata_rng_next(rng) % 4);
            for (int i = 0; i < 256 && kind; i++) {
                float v = specials[strata_rng_next(rng) % (uint64_t)n_specials];
                if (kind == 1) x[256 * blk + i] = v;                   // all special
                if (kind == 2 && i % 17 == 0) x[256 * blk + i] = v;    // a few specials
                if (kind == 3) x[256 * blk + i] = (i % 5 == 0) ? v * 1e-3f : 0.0f;
            }
        }
        static const uint32_t vts[4] = {STRATA_TYPE_F16, STRATA_TYPE_BF16, STRATA_TYPE_Q8_0, STRATA_TYPE_Q8_K};
        for (int v = 0; v < 4; v++) {
            size_t bytes = strata_type_row_bytes(vts[v], (uint64_t)n);
            tabs[0]->quantize[vts[v]](x, ref, n);
            for (int t = 1; t < n_tabs; t++) {
                tabs[t]->quantize[vts[v]](x, got, n);
                CHECK(!memcmp(ref, got, bytes), "%s [%s] rounds special values differently (row %d)",
                      strata_type_name(vts[v]), strata_isa_name(tabs[t]->isa), row);
            }
        }
    }
    free(x), free(ref), free(got), free(w);
}

// ---- synthetic blocks and the generator -------------------------------------------------------

static int g_log_lines;
static char g_last_line[256];

static void count_lines(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)user;
    g_log_lines++;
    snprintf(g_last_line, sizeof(g_last_line), "%s", line);
}

static void test_random_blocks(uint64_t *rng)
{
    static const uint32_t types[] = {STRATA_TYPE_F32,  STRATA_TYPE_F16,  STRATA_TYPE_BF16, STRATA_TYPE_Q8_0,
                                     STRATA_TYPE_Q4_K, STRATA_TYPE_Q5_K, STRATA_TYPE_Q6_K, STRATA_TYPE_Q4_0,
                                     STRATA_TYPE_Q4_1, STRATA_TYPE_Q5_0, STRATA_TYPE_Q5_1, STRATA_TYPE_Q2_K,
                                     STRATA_TYPE_Q3_K};
    const int64_t n = 256 * 64;
    uint8_t *a = xmalloc(n * 4), *b = xmalloc(n * 4);
    double *v = xmalloc(n * sizeof(double));
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        uint32_t type = types[k];
        size_t bytes = strata_type_row_bytes(type, n);
        for (int s = 0; s < 2; s++) {
            float std = s ? 0.03f : 1.0f;
            uint64_t state = *rng, copy = *rng;
            strata_rng_next(rng);
            CHECK(strata_quant_random(type, &state, a, n, std) == 0, "random %s", strata_type_name(type));
            CHECK(strata_quant_random(type, &copy, b, n, std) == 0 && !memcmp(a, b, bytes) && state == copy,
                  "random %s is not deterministic", strata_type_name(type));
            derive_row(type, a, n, v, NULL, NULL);
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < n; i++) sum += v[i], sq += v[i] * v[i];
            double mean = sum / n, sd = sqrt(sq / n - mean * mean);
            CHECK(sd > std / 1.5 && sd < std * 1.5, "random %s std %g, asked %g", strata_type_name(type), sd, std);
            CHECK(fabs(mean) < 0.5 * std, "random %s mean %g (std %g)", strata_type_name(type), mean, std);
        }
    }

    // the generator itself
    double sum = 0, sq = 0, umin = 1, umax = 0;
    for (int i = 0; i < 100000; i++) {
        double z = strata_rng_normal(rng), u = strata_rng_uniform(rng);
        sum += z, sq += z * z;
        umin = fmin(umin, u), umax = fmax(umax, u);
    }
    CHECK(fabs(sum / 1e5) < 0.02 && fabs(sq / 1e5 - 1) < 0.02, "normal: mean %g, E[z^2] %g", sum / 1e5, sq / 1e5);
    CHECK(umin >= 0 && umax < 1 && umin < 1e-3 && umax > 0.999, "uniform range [%g, %g]", umin, umax);
    uint64_t s1 = 42, s2 = 42;
    CHECK(strata_rng_next(&s1) == strata_rng_next(&s2) && s1 == s2, "splitmix64 is deterministic");
    s1 = 0;
    CHECK(strata_rng_next(&s1) == 0xe220a8397b1dcdafull, "splitmix64(0) is the published first value");

    // refusals: one error line each, naming the function
    strata_log_set_sink(count_lines, NULL);
    g_log_lines = 0;
    CHECK(strata_quant_random(STRATA_TYPE_TQ1_0, rng, a, 256, 1.0f) == STRATA_EUNSUP, "TQ1_0 is not synthesised yet");
    CHECK(g_log_lines == 1 && strstr(g_last_line, "strata_quant_random"), "one line: '%s'", g_last_line);
    CHECK(strata_quant_random(STRATA_TYPE_Q4_K, rng, a, 100, 1.0f) == STRATA_EARG, "n not a multiple of 256");
    CHECK(strata_quant_random(STRATA_TYPE_Q4_K, rng, a, 256, -1.0f) == STRATA_EARG, "negative std");
    CHECK(strata_quant_random(4, rng, a, 256, 1.0f) == STRATA_EARG, "retired type id 4");
    CHECK(g_log_lines == 4, "%d log lines for 4 refusals", g_log_lines);
    strata_log_set_sink(NULL, NULL);
    free(a), free(b), free(v);
}

// ---- dispatch ---------------------------------------------------------------------------------

static void test_dispatch(void)
{
    const struct strata_kernels *scalar = strata_kernels_for(STRATA_ISA_SCALAR);
    CHECK(scalar && scalar->isa == STRATA_ISA_SCALAR, "scalar table");
    CHECK(strata_kernels_for(STRATA_ISA_COUNT) == NULL, "no table past the last ISA");
    // what the hardware runs (strata_isa_detect may be lowered by STRATA_ISA in the environment)
    enum strata_isa best = STRATA_ISA_SCALAR;
    while (best + 1 < STRATA_ISA_COUNT && strata_kernels_for((enum strata_isa)(best + 1))) best++;
    CHECK(strata_isa_detect() <= best, "detect %s above what the CPU runs", strata_isa_name(strata_isa_detect()));
    CHECK(strata_kernels() == strata_kernels_for(strata_isa_detect()), "strata_kernels is the detected table");
    for (int isa = 0; isa < STRATA_ISA_COUNT; isa++) {
        const struct strata_kernels *k = strata_kernels_for((enum strata_isa)isa);
        CHECK((k != NULL) == (isa <= (int)best), "table of %s: %p, best %s", strata_isa_name((enum strata_isa)isa),
              (const void *)k, strata_isa_name(best));
        if (!k) continue;
        CHECK(k->isa == (enum strata_isa)isa, "table isa");
        for (uint32_t t = 0; t < STRATA_TYPE_COUNT; t++) {
            if (!strata_type_computable(t)) continue;
            uint32_t vt = strata_type_traits(t)->vec_dot_type;
            CHECK(k->dequant[t] && k->vec_dot[t] && k->quantize[vt], "%s table lacks %s", strata_isa_name(k->isa),
                  strata_type_name(t));
        }
        // the K-quants and Q8_0 of real files have multi-token dots in every SIMD table
        static const uint32_t hot[4] = {STRATA_TYPE_Q8_0, STRATA_TYPE_Q4_K, STRATA_TYPE_Q5_K, STRATA_TYPE_Q6_K};
        for (int h = 0; h < 4; h++)
            CHECK((k->vec_dot_multi[hot[h]] != NULL) == (isa != STRATA_ISA_SCALAR), "%s table: vec_dot_multi of %s is %p",
                  strata_isa_name(k->isa), strata_type_name(hot[h]), (void *)k->vec_dot_multi[hot[h]]);
    }
    for (size_t k = 0; k < N_COMPUTABLE; k++) CHECK(strata_type_computable(g_computable[k]), "computable");
    CHECK(!strata_type_computable(STRATA_TYPE_TQ1_0) && !strata_type_computable(STRATA_TYPE_Q8_1) &&
              !strata_type_computable(STRATA_TYPE_Q8_K) && !strata_type_computable(4) && !strata_type_computable(999),
          "not computable");
    CHECK(!strcmp(strata_isa_name(STRATA_ISA_AVX2), "avx2") && !strcmp(strata_isa_name(STRATA_ISA_COUNT), "?"), "names");

    const char *saved = getenv("STRATA_ISA");
    char *copy = saved ? strdup(saved) : NULL;
    unsetenv("STRATA_ISA");
    CHECK(strata_isa_detect() == best, "without STRATA_ISA the best ISA");
    setenv("STRATA_ISA", "scalar", 1);
    CHECK(strata_isa_detect() == STRATA_ISA_SCALAR, "STRATA_ISA=scalar");
    setenv("STRATA_ISA", "avx2", 1);
    CHECK(strata_isa_detect() == (best < STRATA_ISA_AVX2 ? best : STRATA_ISA_AVX2), "STRATA_ISA=avx2");
    strata_log_set_sink(count_lines, NULL);
    setenv("STRATA_ISA", "sse9", 1);
    CHECK(strata_isa_detect() == best, "an unknown STRATA_ISA is ignored");
    strata_log_set_sink(NULL, NULL);
    if (copy) setenv("STRATA_ISA", copy, 1);
    else unsetenv("STRATA_ISA");
    free(copy);
}

// ---- benchmark ---------------------------------------------------------------------------------

typedef void (*ggml_vec_dot_fn)(int n, float *s, size_t bs, const void *x, size_t bx, const void *y, size_t by, int nrc);

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One thread streaming through the buffer with 256-bit loads (and software prefetch 2 KiB
// ahead, as the kernels do): the bandwidth a kernel can reach.
__attribute__((target("avx2"))) static double read_floor_gbps(const uint8_t *p, size_t bytes)
{
    double best = 1e30;
    __m256i acc = _mm256_setzero_si256();
    for (int rep = 0; rep < 8; rep++) {
        double t0 = now_seconds();
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t i = 0; i + 128 <= bytes; i += 128) {
            __builtin_prefetch(p + i + 2048, 0, 3);
            __builtin_prefetch(p + i + 2048 + 64, 0, 3);
            a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(p + i)));
            a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
            a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
            a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
        }
        acc = _mm256_xor_si256(acc, _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3)));
        best = fmin(best, now_seconds() - t0);
    }
    volatile int sink = _mm256_extract_epi32(acc, 0);
    (void)sink;
    return (double)bytes / best / 1e9;
}

// Best of `reps` passes of a dot product of every row with one activation row, in GB/s of weights.
static double bench_rows(strata_vec_dot_fn fn, ggml_vec_dot_fn gfn, int64_t n, const uint8_t *w, size_t row_bytes,
                         int64_t rows, int64_t passes, const void *act, float *out, int reps)
{
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_seconds();
        for (int64_t p = 0; p < passes; p++) {
            for (int64_t r = 0; r < rows; r++) {
                if (fn) fn(n, &out[r], w + r * row_bytes, act);
                else gfn((int)n, &out[r], 0, w + r * row_bytes, 0, act, 0, 1);
            }
        }
        best = fmin(best, now_seconds() - t0);
    }
    return (double)row_bytes * (double)rows * (double)passes / best / 1e9;
}

// As bench_rows for vec_dot_multi of STRATA_DOT_TOKENS rows: GB/s of weights times tokens, so it
// compares with bench_rows' figure directly.
static double bench_rows_multi(strata_vec_dot_multi_fn fn, int64_t n, const uint8_t *w, size_t row_bytes, int64_t rows,
                            int64_t passes, const void *const *act, float *out, int reps)
{
    double best = 1e30;
    for (int rep = 0; rep < reps; rep++) {
        double t0 = now_seconds();
        for (int64_t p = 0; p < passes; p++)
            for (int64_t r = 0; r < rows; r++) fn(n, &out[STRATA_DOT_TOKENS * r], w + r * row_bytes, act, STRATA_DOT_TOKENS);
        best = fmin(best, now_seconds() - t0);
    }
    return (double)row_bytes * (double)rows * (double)passes * STRATA_DOT_TOKENS / best / 1e9;
}

static const char *ggml_dot_name(uint32_t type)
{
    switch (type) {
    case STRATA_TYPE_F32: return "ggml_vec_dot_f32";
    case STRATA_TYPE_F16: return "ggml_vec_dot_f16";
    case STRATA_TYPE_BF16: return "ggml_vec_dot_bf16";
    case STRATA_TYPE_Q8_0: return "ggml_vec_dot_q8_0_q8_0";
    case STRATA_TYPE_Q4_K: return "ggml_vec_dot_q4_K_q8_K";
    case STRATA_TYPE_Q5_K: return "ggml_vec_dot_q5_K_q8_K";
    case STRATA_TYPE_Q6_K: return "ggml_vec_dot_q6_K_q8_K";
    default: return NULL;
    }
}

// libggml-cpu-*.so needs libggml-base.so from the same folder loaded first.
static void *open_ggml(const char *cpu_lib)
{
    char base[4096];
    const char *slash = strrchr(cpu_lib, '/');
    int dir_len = slash ? (int)(slash - cpu_lib) : 1;
    snprintf(base, sizeof(base), "%.*s/libggml-base.so", dir_len, slash ? cpu_lib : ".");
    if (!dlopen(base, RTLD_NOW | RTLD_GLOBAL) || !dlopen(cpu_lib, RTLD_NOW)) {
        printf("cannot load llama.cpp's kernels: %s\n", dlerror());
        return NULL;
    }
    void *lib = dlopen(cpu_lib, RTLD_NOW);
    void (*init)(void) = (void (*)(void))dlsym(lib, "ggml_cpu_init");
    if (init) init();
    return lib;
}

static int run_bench(const char *ggml_lib)
{
    const int64_t n = 4096;
    const size_t set_bytes = 64u << 20, hot_bytes = 256u << 10;
    void *ggml = ggml_lib ? open_ggml(ggml_lib) : NULL;
    if (ggml_lib && !ggml) return 1;
    uint8_t *w = xmalloc(set_bytes + 64);
    float *x = xmalloc(n * sizeof(float)), *out = xmalloc((set_bytes / 1024) * sizeof(float));
    uint8_t *act = xmalloc(n * 4);
    uint64_t rng = 1;
    memset(w, 1, set_bytes);
    double floor = __builtin_cpu_supports("avx2") ? read_floor_gbps(w, set_bytes) : NAN;
    printf("single-thread read floor on %zu MiB: %.1f GB/s; rows of %lld elements, one activation row\n",
           set_bytes >> 20, floor, (long long)n);
    printf("%-5s %-7s %12s %10s %12s %10s %12s\n", "type", "isa", "64MiB GB/s", "of floor", "256KiB GB/s", "ns/row",
           "multi GB/s");
    printf("%-5s %-7s %12s %10s %12s %10s %12s\n", "", "", "(from RAM)", "", "(in cache)", "(cache)", "(x tokens)");
    random_activations(&rng, x, n);
    for (size_t k = 0; k < N_COMPUTABLE; k++) {
        uint32_t type = g_computable[k], vt = strata_type_traits(type)->vec_dot_type;
        size_t row_bytes = strata_type_row_bytes(type, n);
        int64_t rows = (int64_t)(set_bytes / row_bytes), hot_rows = (int64_t)(hot_bytes / row_bytes);
        strata_quant_random(type, &rng, w, rows * n, 1.0f);
        strata_kernels_for(STRATA_ISA_SCALAR)->quantize[vt](x, act, n);
        for (int isa = -1; isa < STRATA_ISA_COUNT; isa++) {
            const struct strata_kernels *tab = isa >= 0 ? strata_kernels_for((enum strata_isa)isa) : NULL;
            ggml_vec_dot_fn gfn = isa < 0 && ggml ? (ggml_vec_dot_fn)dlsym(ggml, ggml_dot_name(type)) : NULL;
            if (!tab && !gfn) continue;
            strata_vec_dot_fn fn = tab ? tab->vec_dot[type] : NULL;
            // best of several runs: the machine may be shared, and the best run is the one that
            // measured the kernel rather than its neighbours
            bool slow = isa == STRATA_ISA_SCALAR;
            double cold = bench_rows(fn, gfn, n, w, row_bytes, rows, 1, act, out, slow ? 1 : 8);
            double hot = bench_rows(fn, gfn, n, w, row_bytes, hot_rows, slow ? 1 : 16, act, out, slow ? 1 : 40);
            // vec_dot_multi on copies of the row, weights in cache: per token, comparable with `hot`
            const void *acts[STRATA_DOT_TOKENS];
            for (int r = 0; r < STRATA_DOT_TOKENS; r++) acts[r] = act;
            strata_vec_dot_multi_fn multi = tab ? tab->vec_dot_multi[type] : NULL;
            double hot4 = multi ? bench_rows_multi(multi, n, w, row_bytes, hot_rows, 16, acts, out, 40) : NAN;
            printf("%-5s %-7s %12.1f %10.2f %12.1f %10.0f %12.1f\n", strata_type_name(type),
                   tab ? strata_isa_name(tab->isa) : "ggml", cold, cold / floor, hot, row_bytes / hot, hot4);
            fflush(stdout);
        }
    }
    free(w), free(x), free(out), free(act);
    return 0;
}

// ---- main ----------------------------------------------------------------------------------

int main(int argc, char **argv)
{
    const char *ggml_lib = NULL;
    bool bench = false;
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--bench")) bench = true;
        else if (!strcmp(argv[i], "--ggml") && i + 1 < argc) ggml_lib = argv[++i];
        else {
            printf("usage: %s [--seed N] | --bench [--ggml path/libggml-cpu-VARIANT.so]\n", argv[0]);
            return 2;
        }
    }
    if (bench) return run_bench(ggml_lib);

    printf("test_quant: seed %llu (reproduce with --seed %llu)\n", (unsigned long long)g_seed,
           (unsigned long long)g_seed);
    uint64_t rng = g_seed;
    const struct strata_kernels *tabs[STRATA_ISA_COUNT];
    int n_tabs = 0;
    for (int isa = 0; isa < STRATA_ISA_COUNT; isa++)
        if (strata_kernels_for((enum strata_isa)isa)) tabs[n_tabs++] = strata_kernels_for((enum strata_isa)isa);
    printf("ISAs tested:");
    for (int t = 0; t < n_tabs; t++) printf(" %s", strata_isa_name(tabs[t]->isa));
    printf("\n");

    test_dispatch();
    test_fp16(&rng);
    test_known_dequant(tabs, n_tabs);
    test_known_quantize(tabs, n_tabs);
    for (size_t k = 0; k < N_COMPUTABLE; k++) {
        uint32_t type = g_computable[k];
        uint32_t bs = strata_type_traits(type)->block_size;
        static const int64_t common[4] = {256, 512, 2560, 4096};
        static const int64_t odd_floats[5] = {1, 7, 33, 100, 4097}, odd_q8_0[2] = {32, 224};
        for (int s = 0; s < 4; s++) {
            test_random_type(type, common[s], tabs, n_tabs, &rng);
            test_multi_token(type, common[s], tabs, n_tabs, &rng);
        }
        if (bs == 1)
            for (int s = 0; s < 5; s++) {
                test_random_type(type, odd_floats[s], tabs, n_tabs, &rng);
                test_multi_token(type, odd_floats[s], tabs, n_tabs, &rng);
            }
        if (bs == 32)
            for (int s = 0; s < 2; s++) {
                test_random_type(type, odd_q8_0[s], tabs, n_tabs, &rng);
                test_multi_token(type, odd_q8_0[s], tabs, n_tabs, &rng);
            }
    }
    test_exact_sums(tabs, n_tabs, &rng);
    test_extremes(tabs, n_tabs);
    test_edge_cases(tabs, n_tabs, &rng);
    test_random_blocks(&rng);

    if (g_failures) {
        printf("test_quant: %d of %ld checks failed (seed %llu)\n", g_failures, g_checks, (unsigned long long)g_seed);
        return 1;
    }
    printf("largest dot errors seen: scalar vs float64 %.2f eps*S, SIMD vs scalar %.2f eps*S\n", g_worst_ref, g_worst_simd);
    printf("test_quant: all %ld checks passed\n", g_checks);
    return 0;
}
