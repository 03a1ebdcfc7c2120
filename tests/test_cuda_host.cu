// The CUDA backend's block decoders and block terms (src/backend/cuda/decode.cuh), compiled for
// the host, against the CPU reference: runs wherever `make CUDA=1` builds, no GPU needed. For every
// quantized type, on fresh random blocks and activations (seed printed; --seed N):
//   - dequant_unit equals the CPU's scalar dequantisation bit for bit;
//   - a host walk of the kernels' scheme (units decoded to int8, integer dots per half, integer
//     scales and mins, one float term per block, terms added in block order) matches the CPU's
//     scalar dot products within (blocks + 8) * 1.2e-7 * 2 max|w| sum|x|.
// The GPU kernels themselves are tested on a GPU by test_cuda.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/decode.cuh"

extern "C" {
#include "backend/cpu/kernels.h"
#include "check.h"
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
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
