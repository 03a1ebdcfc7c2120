// The attention's scores and weighted values on AMX bf16 tiles (fattn.h, "AMX"), for an F16
// cache: 16 query rows x 16 keys (16 value elements) a C tile, TDPBF16PS over the dimensions
// (the keys) 32 at a time. The weighted values' part is below, after the scores.
//
// Exact products. An F16 value has 11 significant bits; its top 8 (the float's bits truncated to
// bf16) and the other 3 are two bf16 values that sum to it exactly. The keys are F16 and the
// queries are rounded to F16 (as the CPU backend rounds them to the key type's dot format before
// the attention; done again here, where it changes nothing), so
//   q . k = qh . kh + qh . kl + ql . kh + ql . kl
// with every product exact in float: four tile products a step, summed in the tile unit's order.
// That order is not the portable bodies' (fattn_impl.h), so scores differ from the other ISAs' in
// the last bits (test_fattn bounds the difference; one probe: largest error against float64
// 3.0e-6 where the F32 kernel's was 7.9e-6, bench/amx_scores.c). It is the same for every row,
// tile and chunk, so a token's output still does not depend on its batch.
#include <immintrin.h>
#include <string.h>

#include "backend/cpu/amx.h"
#include "backend/cpu/fattn_amx.h"
#include "backend/cpu/kv.h"

// Floats of F16 value to (hi, lo) bf16 words: hi the truncation, lo the exact remainder's.
static inline void split16(__m512 x, __m512i *hi, __m512i *lo)
{
    const __m512i mask = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i xb = _mm512_castps_si512(x), hb = _mm512_and_si512(xb, mask);
    *hi = hb;
    *lo = _mm512_and_si512(_mm512_castps_si512(_mm512_sub_ps(x, _mm512_castsi512_ps(hb))), mask);
}

// Two floats' bf16 words (in the upper halves of a and b) as pairs: a's in the low half of each
// dword, b's in the high.
static inline __m512i pair(__m512i a, __m512i b)
{
    return _mm512_or_si512(_mm512_srli_epi32(a, 16), b);
}

// The upper words of a's dwords then of b's: 32 bf16 in element order.
static inline __m512i pack_upper(__m512i a, __m512i b)
{
    const __m512i idx = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25,
                                         23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi16(a, idx, b);
}

void fattn_amx_split_queries(const float *q, int rows, uint32_t dk, uint16_t *qh, uint16_t *ql)
{
    const int padded = (rows + 15) / 16 * 16;
    for (int r = 0; r < padded; r++)
        for (uint32_t d = 0; d < dk; d += 32) {
            __m512i h[2], l[2];
            for (int i = 0; i < 2; i++) {
                const __m512 x = r < rows ? _mm512_loadu_ps(q + (size_t)r * dk + d + 16 * i) : _mm512_setzero_ps();
                const __m256i h16 = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                split16(_mm512_cvtph_ps(h16), &h[i], &l[i]);
            }
            _mm512_storeu_si512(qh + (size_t)r * dk + d, pack_upper(h[0], h[1]));
            _mm512_storeu_si512(ql + (size_t)r * dk + d, pack_upper(l[0], l[1]));
        }
}

void fattn_amx_keys_f16(const uint8_t *keys, int groups, uint32_t dk, uint16_t *kh, uint16_t *kl)
{
    const size_t nkp = STRATA_KV_BLOCK;
    for (int g = 0; g < groups; g++)
        for (uint32_t d = 0; d < dk; d += 2) {
            const uint16_t *row = (const uint16_t *)keys + ((size_t)g * dk + d) * 16;
            __m512i h0, l0, h1, l1;
            split16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)row)), &h0, &l0);
            split16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 16))), &h1, &l1);
            const size_t at = ((size_t)(d / 2) * nkp + (size_t)g * 16) * 2;
            _mm512_storeu_si512(kh + at, pair(h0, h1));
            _mm512_storeu_si512(kl + at, pair(l0, l1));
        }
}

// C tile t += the four products of A (tiles 0 and 1: hi and lo) and B (2 and 3: the hi and lo
// words at bh and bl, rows `stride` bytes apart).
#define FOUR_PRODUCTS(t, bh, bl, stride)                                                                   \
    do {                                                                                                   \
        _tile_loadd(2, bh, stride);                                                                        \
        _tile_loadd(3, bl, stride);                                                                        \
        _tile_dpbf16ps(t, 0, 2);                                                                           \
        _tile_dpbf16ps(t, 0, 3);                                                                           \
        _tile_dpbf16ps(t, 1, 2);                                                                           \
        _tile_dpbf16ps(t, 1, 3);                                                                           \
    } while (0)

static inline void zero_c(void)
{
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
}

// A's hi and lo (tiles 0 and 1) from the 16 rows at hi and lo, `stride` bytes apart.
static inline void load_a(const uint16_t *hi, const uint16_t *lo, long stride)
{
    _tile_loadd(0, hi, stride);
    _tile_loadd(1, lo, stride);
}

// The first n (1..4) of C tiles 4..7 to out, out + 16, ... (rows `stride` bytes apart).
static inline void store_c(float *out, long stride, int n)
{
    _tile_stored(4, out, stride);
    if (n > 1) _tile_stored(5, out + 16, stride);
    if (n > 2) _tile_stored(6, out + 32, stride);
    if (n > 3) _tile_stored(7, out + 48, stride);
}

// Key block kb of the 64 keys from k0 (tiles 2, 3: their hi, lo words) into C tile 4 + kb.
#define KEY_BLOCK(t, kb)                                                                                   \
    FOUR_PRODUCTS(t, kh + ((size_t)(d0 / 2) * nkp + k0 + 16 * (kb)) * 2,                                   \
                  kl + ((size_t)(d0 / 2) * nkp + k0 + 16 * (kb)) * 2, (long)nkp * 4)

void fattn_amx_scores(const uint16_t *qh, const uint16_t *ql, int rows, const uint16_t *kh, const uint16_t *kl,
                      int groups, uint32_t dk, float scale, float *s, size_t s_stride)
{
    strata_amx_configure();
    const size_t nkp = STRATA_KV_BLOCK, nk = (size_t)groups * 16;
    const __m512 sc = _mm512_set1_ps(scale);
    for (int r0 = 0; r0 < rows; r0 += 16) {
        for (size_t k0 = 0; k0 < nk; k0 += 64) {
            const int nkb = nk - k0 >= 64 ? 4 : (int)(nk - k0) / 16;
            zero_c();
            for (uint32_t d0 = 0; d0 < dk; d0 += 32) {
                load_a(qh + (size_t)r0 * dk + d0, ql + (size_t)r0 * dk + d0, (long)dk * 2);
                KEY_BLOCK(4, 0);
                if (nkb > 1) KEY_BLOCK(5, 1);
                if (nkb > 2) KEY_BLOCK(6, 2);
                if (nkb > 3) KEY_BLOCK(7, 3);
            }
            float *out = s + (size_t)r0 * s_stride + k0;
            store_c(out, (long)(s_stride * sizeof(float)), nkb);
            const int nr = rows - r0 < 16 ? rows - r0 : 16;
            for (int r = 0; r < nr; r++)
                for (int kb = 0; kb < nkb; kb++) {
                    float *p = out + (size_t)r * s_stride + 16 * kb;
                    _mm512_storeu_ps(p, _mm512_mul_ps(_mm512_loadu_ps(p), sc));
                }
        }
    }
}

// ---- the weighted values ------------------------------------------------------------------------
//
// Values F16 (split exactly as the keys); the softmax weights p in [0, 1] are floats of 24
// significant bits, split into hi (the truncation to bf16) and lo (the remainder rounded to bf16):
// 16 of their bits, a relative error below 2^-17 a weight (llama.cpp's CPU flash attention adds
// the weighted F16 values into an F16 sum, 2^-11 a step).

void fattn_amx_split_weights(const float *p, size_t p_stride, int rows, int nk, uint16_t *ph, uint16_t *pl)
{
    const int padded = (rows + 15) / 16 * 16, nk32 = (nk + 31) / 32 * 32;
    for (int r = 0; r < padded; r++)
        for (int j = 0; j < nk32; j += 32) {
            __m512i h[2];
            __m512 rest[2];
            for (int i = 0; i < 2; i++) {
                const int at = j + 16 * i, left = nk - at;
                const __mmask16 m = r >= rows || left <= 0 ? 0 : left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
                const __m512 x = _mm512_maskz_loadu_ps(m, p + (size_t)r * p_stride + at);
                h[i] = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0xffff0000u));
                rest[i] = _mm512_sub_ps(x, _mm512_castsi512_ps(h[i]));
            }
            _mm512_storeu_si512(ph + (size_t)r * STRATA_KV_BLOCK + j, pack_upper(h[0], h[1]));
            _mm512_storeu_si512(pl + (size_t)r * STRATA_KV_BLOCK + j, (__m512i)_mm512_cvtne2ps_pbh(rest[1], rest[0]));
        }
}

void fattn_amx_values_f16(const uint8_t *vals, int nk, uint32_t dv, uint16_t *vh, uint16_t *vl)
{
    const int nk32 = (nk + 31) / 32 * 32;
    for (int j = 0; j < nk32; j += 2)
        for (uint32_t e = 0; e < dv; e += 16) {
            const uint16_t *v0 = (const uint16_t *)vals + (size_t)j * dv + e, *v1 = v0 + dv;
            __m512i h0, l0, h1, l1;
            split16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)v0)), &h0, &l0);
            split16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)v1)), &h1, &l1);
            const size_t at = ((size_t)(j / 2) * dv + e) * 2;
            _mm512_storeu_si512(vh + at, pair(h0, h1));
            _mm512_storeu_si512(vl + at, pair(l0, l1));
        }
}

// Value columns cb of the 64 from e0 (tiles 2, 3: their hi, lo words) into C tile 4 + cb.
#define VALUE_BLOCK(t, cb)                                                                                 \
    FOUR_PRODUCTS(t, vh + ((size_t)(j0 / 2) * dv + e0 + 16 * (cb)) * 2,                                    \
                  vl + ((size_t)(j0 / 2) * dv + e0 + 16 * (cb)) * 2, (long)dv * 4)

void fattn_amx_pv(const uint16_t *ph, const uint16_t *pl, int rows, int nk, const uint16_t *vh, const uint16_t *vl,
                  uint32_t dv, float *o)
{
    strata_amx_configure();
    const int nk32 = (nk + 31) / 32 * 32;
    for (int r0 = 0; r0 < rows; r0 += 16)
        for (uint32_t e0 = 0; e0 < dv; e0 += 64) {
            const int ncb = dv - e0 >= 64 ? 4 : (int)(dv - e0) / 16;
            zero_c();
            for (int j0 = 0; j0 < nk32; j0 += 32) {
                const size_t at = (size_t)r0 * STRATA_KV_BLOCK + (size_t)j0;
                load_a(ph + at, pl + at, STRATA_KV_BLOCK * 2);
                VALUE_BLOCK(4, 0);
                if (ncb > 1) VALUE_BLOCK(5, 1);
                if (ncb > 2) VALUE_BLOCK(6, 2);
                if (ncb > 3) VALUE_BLOCK(7, 3);
            }
            store_c(o + (size_t)r0 * dv + e0, (long)(dv * sizeof(float)), ncb);
        }
}
