// Probe for the long-prompt attention on AMX (docs/cpu.md, "What is left for long prompts"): the
// scores of 64 query rows x 256 keys x 128 dimensions, as fattn_avx512.c's F32 kernel computes
// them and as AMX bf16 tile products would, each F16 value split exactly into two bf16 values
// (top 8 significant bits + the rest) and the four products summed by TDPBF16PS (FOUR=0: three,
// dropping lo x lo). One thread, L1/L2-resident data, best of 200; the error of each against a
// float64 reference. Not part of the build (it needs AMX-BF16):
//   gcc -O2 -std=c11 -D_GNU_SOURCE -DFOUR=1 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl
//       -mavx512dq -mavx512vnni -mavx512bf16 -mamx-tile -mamx-int8 -mamx-bf16 -Isrc -Iinclude
//       bench/amx_scores.c -lm -o /tmp/amx_scores && /tmp/amx_scores
// (2026-12-06, a 2-core AMX VM: F32 92-98 GMAC/s, four products 231-257 (2.6-2.7x) with a max
// error of 3.0e-6 against F32's 7.9e-6; three products 2.8-2.9x but 1.7e-4.)
#include "backend/cpu/fattn_avx512.c"
#ifndef FOUR
#define FOUR 1
#endif
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
struct tcfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};
static uint16_t bf16_trunc(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
} // exact when f has <= 8 significant bits
static float bf16f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// split an f16-representable float into hi (top 8 significant bits, truncation) + lo (exact remainder)
static void split(float x, uint16_t *hi, uint16_t *lo)
{
    uint16_t h = bf16_trunc(x);
    float r = x - bf16f(h);
    *hi = h;
    *lo = bf16_trunc(r);
}
#define R 64
#define NK 256
#define DK 128
int main(void)
{
    syscall(SYS_arch_prctl, 0x1023, 18);
    struct tcfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.rows[t] = 16;
        c.colsb[t] = 64;
    }
    _tile_loadconfig(&c);
    static float q[R * DK] __attribute__((aligned(64))), kt[NK / 16 * DK * 16] __attribute__((aligned(64))),
        s1[R * NK] __attribute__((aligned(64))), s2[R * NK] __attribute__((aligned(64)));
    static float kf[NK][DK];
    srand(3);
    for (int i = 0; i < R * DK; i++)
        q[i] = _cvtsh_ss(_cvtss_sh(((rand() % 20001) - 10000) / 3000.0f, 0)); // q rounded to f16
    for (int j = 0; j < NK; j++)
        for (int d = 0; d < DK; d++) {
            kf[j][d] = _cvtsh_ss(_cvtss_sh(((rand() % 20001) - 10000) / 2500.0f, 0));
            kt[((j / 16) * DK + d) * 16 + j % 16] = kf[j][d];
        }
    // AMX operands: A = q rows [R][DK] bf16 hi/lo (row = 64 bytes per 32 dims); B = keys VNNI: [DK/2][NK][2]
    static uint16_t qh[R * DK] __attribute__((aligned(64))), ql[R * DK] __attribute__((aligned(64)));
    static uint16_t kh[DK / 2 * NK * 2] __attribute__((aligned(64))), kl[DK / 2 * NK * 2] __attribute__((aligned(64)));
    for (int i = 0; i < R * DK; i++)
        split(q[i], &qh[i], &ql[i]);
    for (int j = 0; j < NK; j++)
        for (int d = 0; d < DK; d++) {
            uint16_t h, l;
            split(kf[j][d], &h, &l);
            size_t at = ((size_t)(d / 2) * NK + j) * 2 + (d & 1);
            kh[at] = h;
            kl[at] = l;
        }
    const float scale = 0.088f;
    double best1 = 1e9, best2 = 1e9;
    for (int rep = 0; rep < 200; rep++) {
        double t0 = now();
        scores_avx512(q, R, kt, NK / 16, DK, scale, s1, NK);
        double t1 = now();
        for (int r0 = 0; r0 < R; r0 += 16) {
            for (int k0 = 0; k0 < NK; k0 += 64) {
                _tile_zero(4);
                _tile_zero(5);
                _tile_zero(6);
                _tile_zero(7);
                for (int d0 = 0; d0 < DK; d0 += 32) {
                    _tile_loadd(0, qh + r0 * DK + d0, DK * 2);
                    _tile_loadd(1, ql + r0 * DK + d0, DK * 2);
#define KB(t, kb)                                                                                                      \
    _tile_loadd(2, kh + ((size_t)(d0 / 2) * NK + k0 + 16 * kb) * 2, NK * 4);                                           \
    _tile_loadd(3, kl + ((size_t)(d0 / 2) * NK + k0 + 16 * kb) * 2, NK * 4);                                           \
    _tile_dpbf16ps(t, 0, 2);                                                                                           \
    _tile_dpbf16ps(t, 0, 3);                                                                                           \
    _tile_dpbf16ps(t, 1, 2);                                                                                           \
    if (FOUR)                                                                                                          \
        _tile_dpbf16ps(t, 1, 3);
                    KB(4, 0) KB(5, 1) KB(6, 2) KB(7, 3)
                }
                _tile_stored(4, s2 + r0 * NK + k0, NK * 4);
                _tile_stored(5, s2 + r0 * NK + k0 + 16, NK * 4);
                _tile_stored(6, s2 + r0 * NK + k0 + 32, NK * 4);
                _tile_stored(7, s2 + r0 * NK + k0 + 48, NK * 4);
            }
            for (int r = r0; r < r0 + 16; r++)
                for (int j = 0; j < NK; j += 16)
                    _mm512_store_ps(s2 + r * NK + j,
                                    _mm512_mul_ps(_mm512_load_ps(s2 + r * NK + j), _mm512_set1_ps(scale)));
        }
        double t2 = now();
        if (t1 - t0 < best1)
            best1 = t1 - t0;
        if (t2 - t1 < best2)
            best2 = t2 - t1;
    }
    double maxrel = 0, maxabs = 0, maxref = 0;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NK; j++) {
            double ref = 0;
            for (int d = 0; d < DK; d++)
                ref += (double)q[r * DK + d] * kf[j][d];
            ref *= scale;
            double e1 = fabs(s1[r * NK + j] - ref), e2 = fabs(s2[r * NK + j] - ref);
            if (e2 > maxabs)
                maxabs = e2;
            if (e1 > maxrel)
                maxrel = e1;
            if (fabs(ref) > maxref)
                maxref = fabs(ref);
        }
    double macs = (double)R * NK * DK;
    printf(
        "scores 64x256x128: avx512 f32 %.2f us (%.1f GMAC/s), amx bf16 x%d %.2f us (%.1f GMAC/s) -> %.2fx; max |err| "
        "f32 %.2e, amx %.2e (max |s| %.1f)\n",
        best1 * 1e6, macs / best1 / 1e9, 3 + FOUR, best2 * 1e6, macs / best2 / 1e9, best1 / best2, maxrel, maxabs,
        maxref);
    return 0;
}
