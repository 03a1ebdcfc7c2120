// The CUDA backend's block decoders and block terms (src/backend/cuda/decode.cuh), compiled for
// the host, against the CPU reference: runs wherever `make CUDA=1` builds, no GPU needed. For every
// quantized type, on fresh random blocks and activations (seed printed; --seed N):
//   - dequant_unit equals the CPU's scalar dequantisation bit for bit;
//   - a host walk of the kernels' scheme (units decoded to int8, integer dots per half, integer
//     scales and mins, one float term per block, terms added in block order) matches the CPU's
//     scalar dot products within (blocks + 8) * 1.2e-7 * 2 max|w| sum|x|;
//   - the element operations of ext.cu (ext.cuh: YaRN RoPE, the clamped SwiGLU, LayerNorm, the
//     Hadamard products, the indexer's scores as a warp adds them) against the CPU backend's
//     functions: bit for bit in the 16-lane orders; what goes through cos/sin/exp within two ulp
//     (glibc's float functions are not always correctly rounded, ext.cuh).
// The GPU kernels themselves are tested on a GPU by test_cuda.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/ext.cuh"

extern "C" {
#include "backend/cpu/kernels.h"
#include "backend/cpu/ops_ext.h"
#include "backend/cpu/rope_ext.h"
#include "check.h"
#include "model/rope_scaling.h"
}

static uint64_t g_rng;

template <int T>
static void check_type(const struct strata_kernels *ref)
{
    using Q = qtype<T>;
    const int f0 = g_failures;
    const uint32_t n_in = 1024, n_out = 24;
    const int n_tok = 3;
    const uint64_t rb = strata_type_row_bytes(T, n_in);
    uint8_t *w = (uint8_t *)calloc(rb * n_out + 64, 1);
    if (strata_quant_random(T, &g_rng, w, (int64_t)n_in * n_out, 0.5f)) exit(1);
    float *x = (float *)malloc(sizeof(float) * n_in * n_tok), *deq = (float *)malloc(sizeof(float) * n_in);
    for (uint32_t i = 0; i < n_in * n_tok; i++) x[i] = strata_rng_normal(&g_rng);
    const uint32_t vdt = Q::VDT;
    const size_t arb = strata_type_row_bytes(vdt, n_in);
    uint8_t *xq = (uint8_t *)calloc(arb * n_tok + 64, 1);
    for (int t = 0; t < n_tok; t++) ref->quantize[vdt](x + (size_t)t * n_in, xq + t * arb, n_in);
    float wmax = 0.0f;
    int bad_deq = 0, bad_dot = 0;
    for (uint32_t r = 0; r < n_out; r++) {
        const uint8_t *row = w + r * rb;
        ref->dequant[T](row, deq, n_in);
        for (uint32_t i = 0; i < n_in; i++) wmax = fmaxf(wmax, fabsf(deq[i]));
        for (uint32_t U = 0; U < n_in / 32; U++) {
            float v[32];
            dequant_unit<T>(row + (size_t)(U / Q::UPB) * Q::TS, (int)(U % Q::UPB), v);
            for (int i = 0; i < 32; i++) bad_deq += memcmp(&v[i], &deq[32 * U + i], 4) != 0;
        }
    }
    for (int t = 0; t < n_tok; t++) {
        const uint8_t *a = xq + t * arb;
        double sx = 0.0;
        for (uint32_t i = 0; i < n_in; i++) sx += fabsf(x[(size_t)t * n_in + i]);
        const double bound = (n_in / 32 + 8) * 1.2e-7 * 2.0 * wmax * sx * 1.01;
        for (uint32_t r = 0; r < n_out; r++) {
            const uint8_t *row = w + r * rb;
            float acc = 0.0f;
            for (uint32_t b = 0; b < n_in / Q::BS; b++) {
                const uint8_t *blk = row + (size_t)b * Q::TS;
                float d, dmin;
                Q::factors(blk, d, dmin);
                int iv = 0, im = 0;
                for (int u = 0; u < Q::UPB; u++) {
                    unit_q o;
                    Q::unit(blk, u, o);
                    const uint32_t e0 = b * Q::BS + 32 * u;  // first element of the unit
                    const int8_t *aq;
                    if (vdt == STRATA_TYPE_Q8_K) aq = (const int8_t *)(a + 292 * (e0 / 256) + 4 + e0 % 256);
                    else aq = (const int8_t *)(a + (vdt == STRATA_TYPE_Q8_1 ? 36 : 34) * (e0 / 32) + (vdt == STRATA_TYPE_Q8_1 ? 4 : 2));
                    int lo = 0, hi = 0;
                    for (int k = 0; k < 4; k++) {
                        int a0, a1;
                        memcpy(&a0, aq + 4 * k, 4);
                        memcpy(&a1, aq + 16 + 4 * k, 4);
                        lo = dp4a(o.q[k], a0, lo);
                        hi = dp4a(o.q[4 + k], a1, hi);
                    }
                    iv += o.sc[0] * lo + o.sc[1] * hi;
                    if (vdt == STRATA_TYPE_Q8_K) {
                        int16_t bs[2];
                        memcpy(bs, a + 292 * (e0 / 256) + 260 + 2 * ((e0 % 256) / 16), 4);
                        im += o.mn[0] * bs[0] + o.mn[1] * bs[1];
                    }
                }
                float term;
                if (vdt == STRATA_TYPE_Q8_K) {
                    float da;
                    memcpy(&da, a + 292 * b, 4);
                    term = term_k<Q::MIN>(d, dmin, da, iv, im);
                } else {
                    uint16_t hd, hs = 0;
                    const uint8_t *ab = a + (vdt == STRATA_TYPE_Q8_1 ? 36 : 34) * b;
                    memcpy(&hd, ab, 2);
                    if (vdt == STRATA_TYPE_Q8_1) memcpy(&hs, ab + 2, 2);
                    term = term_32<Q::MIN>(d, dmin, strata_fp16_to_fp32(hd), strata_fp16_to_fp32(hs), iv);
                }
                acc = fadd_rn(acc, term);
            }
            float want;
            ref->vec_dot[T](n_in, &want, row, a);
            if (!(fabs((double)acc - want) <= bound)) {
                if (bad_dot++ < 3)
                    printf("    %s row %u tok %d: scheme %.9g cpu %.9g (bound %.3g)\n", strata_type_name(T), r, t, acc, want, bound);
            }
        }
    }
    CHECK(bad_deq == 0, "%s: %d dequantised values differ from the CPU's", strata_type_name(T), bad_deq);
    CHECK(bad_dot == 0, "%s: %d dot products outside the bound", strata_type_name(T), bad_dot);
    char name[96];
    snprintf(name, sizeof name, "%s: decoders and block terms match the CPU", strata_type_name(T));
    case_result(name, f0);
    free(w), free(x), free(deq), free(xq);
}

// ---- the element operations of ext.cu (ext.cuh) against the CPU backend's -------------------------

static float rnd(float std) { return std * strata_rng_normal(&g_rng); }

// YaRN RoPE of gpt-oss (NEOX, base 150000, factor 32 over 4096) and of deepseek2's rope part (NORM,
// base 10000, factor 40, yarn_log_multiplier 0.1): each cos/sin within two ulp of the CPU's cache
// (glibc's cosf/sinf against the once-rounded double value, ext.cuh, times the YaRN factor), under
// 5% not bit for bit, and the rotation with the CPU's cache bit for bit.
static void check_rope_ext(void)
{
    const int f0 = g_failures;
    for (int c = 0; c < 2; c++) {
        const bool neox = c == 0;
        const struct strata_rope_scaling sc = {.yarn = true, .factor = neox ? 32.0f : 40.0f, .n_ctx_orig = 4096,
                                               .yarn_log_mul = neox ? 0.0f : 1.0f, .mscale_all_dims_fix = !neox,
                                               .attn_factor = 0.0f};
        struct strata_rope_ext e;
        strata_rope_ext_init(&e, 64, neox ? STRATA_ROPE_NEOX : STRATA_ROPE_NORM, neox ? 150000.0f : 10000.0f, &sc,
                             neox ? 131072 : 163840);
        const struct strata_cuda_rope_ext r = {.n_dims = e.n_dims, .freq_scale = e.freq_scale,
                                               .ext_factor = e.ext_factor, .theta_scale = e.theta_scale,
                                               .corr_dims = {e.corr_dims[0], e.corr_dims[1]},
                                               .mscale = strata_rope_ext_mscale(&e), .n_head = 1, .tok_stride = 64,
                                               .head_stride = 64, .neox = neox, .spare = {0}};
        int n = 0, off1 = 0, bad = 0, bad_rot = 0;
        for (int p = 0; p <= 5000; p += p < 64 ? 1 : 37) {
            float cs[64], x[64], y[64];
            strata_rope_ext_cache(cs, &e, p);
            for (uint32_t i = 0; i < 32; i++) {
                float co, si;
                rope_ext_cs(r, p, i, &co, &si);
                // an ulp of cos or sin, scaled by mscale (1.35 for gpt-oss), can round to two
                const uint32_t u0 = ulp_diff(co, cs[2 * i]), u1 = ulp_diff(si, cs[2 * i + 1]);
                n += 2, off1 += (u0 != 0) + (u1 != 0), bad += (u0 > 2) + (u1 > 2);
            }
            for (int i = 0; i < 64; i++) x[i] = y[i] = rnd(1.0f);
            strata_rope_ext_apply(x, cs, &e);
            for (uint32_t i = 0; i < 32; i++)
                rope_ext_rotate(y, neox ? i : 2 * i, neox ? 32 : 1, cs[2 * i], cs[2 * i + 1]);
            bad_rot += memcmp(x, y, sizeof x) != 0;
        }
        printf("    rope %s: %d of %d cos/sin an ulp or two from the CPU's (glibc's float functions)\n",
               neox ? "neox" : "norm", off1, n);
        CHECK(bad == 0, "rope %d: %d cos/sin more than two ulp from the CPU's", c, bad);
        CHECK(off1 * 20 < n, "rope %d: %d of %d cos/sin not the CPU's", c, off1, n);
        CHECK(bad_rot == 0, "rope %d: %d rotations differ from the CPU's", c, bad_rot);
    }
    case_result("ext.cuh: YaRN RoPE (NEOX, NORM) against rope_ext.c", f0);
}

// strata_swiglu_oai's steps in the CPU's order with the exponential given: the CPU's result with
// glibc's expf, the device's with the once-rounded one.
static float swiglu_oai_with_exp(float g, float u, float e, float limit)
{
    const float x = g > limit ? limit : g;
    const float uc = u < -limit ? -limit : u > limit ? limit : u;
    const float glu = x / (1.0f + e);
    return glu * (uc + 1.0f);
}

// The clamped SwiGLU: the device's steps are the CPU's bit for bit given the same exponential,
// and glibc's expf is within an ulp of the once-rounded one. The two results are not bounded in
// ulps: an ulp of the exponential at the bottom of its binade is two of a quotient at the top of
// its own, and the product doubles it again (seen: 3 ulps, about once in 60 runs of 4,096).
// LayerNorm bit for bit (16 lanes).
static void check_swiglu_layernorm(void)
{
    const int f0 = g_failures;
    enum { N = 4096 };
    static float g[N], u[N], y[N];
    for (int i = 0; i < N; i++) g[i] = rnd(6.0f), u[i] = rnd(6.0f);  // many past the clamp at 7
    g[0] = 7.0f, g[1] = 7.5f, u[2] = -9.0f, u[3] = 12.0f, g[4] = -80.0f, g[5] = 100.0f;
    const float alpha = 1.702f, limit = 7.0f;
    strata_swiglu_oai(y, g, u, N, alpha, limit);
    int exp_off = 0, exp_bad = 0, cpu_bad = 0, dev_bad = 0, off = 0;
    uint32_t worst = 0;
    for (int i = 0; i < N; i++) {
        const float z = alpha * -(g[i] > limit ? limit : g[i]);
        const float ec = expf(z), ed = exp_once(z);
        const uint32_t de = ulp_diff(ec, ed);
        exp_off += de != 0, exp_bad += de > 1;
        cpu_bad += ulp_diff(swiglu_oai_with_exp(g[i], u[i], ec, limit), y[i]) != 0;
        const float dev = swiglu_oai_1(g[i], u[i], alpha, limit);
        dev_bad += ulp_diff(swiglu_oai_with_exp(g[i], u[i], ed, limit), dev) != 0;
        const uint32_t d = ulp_diff(dev, y[i]);
        off += d != 0, worst = d > worst ? d : worst;
    }
    CHECK(cpu_bad == 0, "swiglu_oai: %d of the CPU's values are not its steps with glibc's expf", cpu_bad);
    CHECK(dev_bad == 0, "swiglu_oai: %d of the device's values are not the CPU's steps with its exp", dev_bad);
    CHECK(exp_bad == 0, "swiglu_oai: glibc's expf more than an ulp from the once-rounded exp %d times", exp_bad);
    printf("    swiglu_oai: expf an ulp off %d of %d times; %d values differ, by up to %u ulp\n", exp_off, N, off,
           worst);
    const uint32_t sizes[] = {128, 100, 7, 2048};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        const uint32_t n = sizes[c];
        float x[2048], w[2048], b[2048], ref[2048], part[128];
        for (uint32_t i = 0; i < n; i++) x[i] = rnd(2.0f) + 0.5f, w[i] = rnd(1.0f), b[i] = rnd(1.0f);
        strata_layernorm(ref, x, w, b, n, 1e-6f, 16);
        const float mean = layernorm_mean(x, n);
        for (uint32_t gi = 0; gi < n / 16; gi++) part[gi] = layernorm_group16(x + 16 * gi, mean);
        const float scale = layernorm_scale(x, part, n, mean, 1e-6f);
        int diff = 0;
        for (uint32_t i = 0; i < n; i++) diff += ulp_diff(layernorm_out(x[i], mean, scale, w, b, i), ref[i]) != 0;
        CHECK(diff == 0, "layernorm n %u: %d values differ from the CPU's (vl 16)", n, diff);
    }
    case_result("ext.cuh: clamped SwiGLU, LayerNorm in the 16-lane order", f0);
}

// The Hadamard products (both orders) and the indexer's scores as a warp computes them (lane
// shares, the shuffle tree, the tail) bit for bit against the CPU's 16-lane functions.
static void check_indexer_math(void)
{
    const int f0 = g_failures;
    enum { D = 128, H = 4, NKV = 50 };
    static float hm[D * D], q[H * D], k[NKV * D], w[H], y[D], sc[NKV];
    strata_hadamard_init(hm, D);
    const float v = (float)(1.0 / sqrtf((float)D));
    for (int i = 0; i < H * D; i++) q[i] = rnd(1.0f);
    for (int i = 0; i < NKV * D; i++) k[i] = rnd(1.0f);
    for (int h = 0; h < H; h++) w[h] = rnd(1.0f);
    int bad = 0;
    for (uint32_t i = 0; i < D; i++)
        for (uint32_t j = 0; j < D; j++) bad += hadamard_at(i, j, v) != hm[i * D + j];
    CHECK(bad == 0, "hadamard: %d entries differ from strata_hadamard_init's", bad);
    for (int rows = 1; rows <= 2; rows++) {
        strata_hadamard_apply(y, q, hm, D, rows, 16);
        bad = 0;
        for (uint32_t i = 0; i < D; i++) {
            const hadamard_row hr = {i, v};
            const float g = rows >= 2 ? dot_sgemm16(hr, q, D) : dot_vec16(hr, q, D);
            bad += ulp_diff(g, y[i]) != 0;
        }
        CHECK(bad == 0, "hadamard (%d rows a slice): %d of %d differ from the CPU's (vl 16)", rows, bad, D);
    }
    for (uint32_t d = 128; d >= 80; d -= 48) {  // 80: a tail of 16 past the 64-lane groups
        strata_indexer_scores(sc, q, w, H, d, k, d, NKV, 16);
        bad = 0;
        for (int p = 0; p < NKV; p++) {
            float s = 0.0f;
            for (int h = 0; h < H; h++) {
                const float *qh = q + h * d, *kp = k + (size_t)p * d;
                const uint32_t np = d & ~63u;
                float lane[32];
                for (int l = 0; l < 32; l++) lane[l] = dot_vec16_lane(qh, kp, np, l);
                for (int o = 16; o >= 1; o /= 2)  // __shfl_down_sync: lane l takes lane l + o
                    for (int l = 0; l + o < 32; l++) lane[l] = fadd_rn(lane[l], lane[l + o]);
                float qk = lane[0];
                for (uint32_t i = np; i < d; i++) qk = ffma_rn(qh[i], kp[i], qk);
                s = indexer_acc(s, qk, w[h]);
            }
            bad += ulp_diff(s, sc[p]) != 0;
        }
        CHECK(bad == 0, "indexer scores (d %u): %d of %d differ from the CPU's (vl 16)", d, bad, NKV);
    }
    case_result("ext.cuh: Hadamard products and indexer scores in the 16-lane orders", f0);
}

int main(int argc, char **argv)
{
    g_rng = (uint64_t)time(NULL);
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) g_rng = strtoull(argv[++i], NULL, 10);
    printf("seed %llu\n", (unsigned long long)g_rng);
    (void)upload_tables;  // the device copies; unused on the host
    const struct strata_kernels *ref = strata_kernels_for(STRATA_ISA_SCALAR);
#define CASE(T) check_type<STRATA_TYPE_##T>(ref);
    STRATA_CUDA_QTYPES(CASE)
#undef CASE
    check_rope_ext();
    check_swiglu_layernorm();
    check_indexer_math();
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
