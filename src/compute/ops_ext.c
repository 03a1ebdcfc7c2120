// The MLA / sparse-attention / gpt-oss operations in ggml's x86 order (see ops_ext.h). The lane
// helpers (ggml_vec_dot_f32's reduction, the vl-lane tree, ggml_v_expf) are attention's.
#include "compute/ops_ext.h"

#include <math.h>
#include <string.h>

#include "compute/attn_impl.h"
#include "util/log.h"

float strata_dot_sgemm(const float *a, const float *b, uint32_t n, int vl)
{
    STRATA_ASSERT(n % (uint32_t)vl == 0);
    float acc[16] = {0};
    for (uint32_t l = 0; l < n; l += (uint32_t)vl)
        for (int j = 0; j < vl; j++) acc[j] = fmaf(a[l + j], b[l + j], acc[j]);
    return attn_hsum(acc, vl);
}

void strata_softmax_ggml(float *x, int n, int vl)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = mx > x[i] ? mx : x[i];
    double sum = 0.0;
    int i = 0;
    for (; i + vl - 1 < n; i += vl) {
        float lane[16];
        for (int j = 0; j < vl; j++) {
            x[i + j] = vl == 16 ? attn_exp_avx512(x[i + j] - mx) : attn_exp_avx2(x[i + j] - mx);
            lane[j] = x[i + j];
        }
        sum += (double)attn_hsum(lane, vl);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) x[j] *= inv;
}

void strata_layernorm(float *y, const float *x, const float *w, const float *b, uint32_t n, float eps, int vl)
{
    double s = 0.0;
    for (uint32_t i = 0; i < n; i++) s += (double)x[i];
    const float mean = (float)s / (float)n;
    // ggml_vec_cvar_f32: centred values, their squares summed per vl group as a tree, in double
    double var = 0.0;
    uint32_t i = 0;
    for (; i + (uint32_t)vl <= n; i += (uint32_t)vl) {
        float lane[16];
        for (int j = 0; j < vl; j++) {
            y[i + j] = x[i + j] - mean;
            lane[j] = y[i + j] * y[i + j];
        }
        var += (double)attn_hsum(lane, vl);
    }
    for (; i < n; i++) {
        y[i] = x[i] - mean;
        var += (double)(y[i] * y[i]);
    }
    const float variance = (float)(var / n);
    const float scale = 1.0f / sqrtf(variance + eps);
    for (uint32_t j = 0; j < n; j++) {
        y[j] *= scale;
        if (w) y[j] *= w[j];
        if (b) y[j] += b[j];
    }
}

void strata_swiglu_oai(float *y, const float *gate, const float *up, uint32_t n, float alpha, float limit)
{
    for (uint32_t k = 0; k < n; k++) {
        const float x = gate[k] > limit ? limit : gate[k];
        const float u = up[k] < -limit ? -limit : up[k] > limit ? limit : up[k];
        const float glu = x / (1.0f + expf(alpha * -x));
        y[k] = glu * (u + 1.0f);
    }
}

void strata_hadamard_init(float *h, uint32_t n)
{
    STRATA_ASSERT(n >= 2 && (n & (n - 1)) == 0);
    memset(h, 0, (size_t)n * n * sizeof *h);
    h[0] = (float)(1.0 / sqrtf((float)n));
    for (uint32_t s = 1; s < n; s *= 2)
        for (uint32_t i = 0; i < s; i++)
            for (uint32_t j = 0; j < s; j++) {
                const float v = h[(size_t)i * n + j];
                h[(size_t)(i + s) * n + j] = v;
                h[(size_t)i * n + j + s] = v;
                h[(size_t)(i + s) * n + j + s] = -v;
            }
}

void strata_hadamard_apply(float *y, const float *x, const float *h, uint32_t n, int rows_per_slice, int vl)
{
    for (uint32_t i = 0; i < n; i++)
        y[i] = rows_per_slice >= 2 ? strata_dot_sgemm(h + (size_t)i * n, x, n, vl) : attn_dot(h + (size_t)i * n, x, n, vl);
}

void strata_indexer_scores(float *score, const float *q, const float *w, uint32_t n_head, uint32_t d,
                           const float *k, size_t k_stride, int n_kv, int vl)
{
    for (int p = 0; p < n_kv; p++) {
        const float *kp = k + (size_t)p * k_stride;
        float sc = 0.0f;
        for (uint32_t h = 0; h < n_head; h++) {
            const float qk = attn_dot(q + (size_t)h * d, kp, d, vl);
            sc = fmaf(qk > 0.0f ? qk : 0.0f, w[h], sc);
        }
        score[p] = sc;
    }
}

// The k-th largest of v[0..n) (1 <= k <= n) by quickselect on a copy; v is clobbered.
static float kth_largest(float *v, int n, int k)
{
    int lo = 0, hi = n - 1;
    const int target = k - 1;
    while (lo < hi) {
        const float pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot) i++;
            while (v[j] < pivot) j--;
            if (i <= j) {
                const float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (target <= j) hi = j;
        else if (target >= i) lo = i;
        else break;
    }
    return v[target];
}

void strata_top_k_mask(uint8_t *sel, const float *score, int n, int top_k, float *tmp)
{
    if (n <= top_k) {
        memset(sel, 1, (size_t)n);
        return;
    }
    memcpy(tmp, score, (size_t)n * sizeof *tmp);
    const float kth = kth_largest(tmp, n, top_k);
    int taken = 0;
    for (int p = 0; p < n; p++) {
        sel[p] = score[p] > kth;
        taken += sel[p];
    }
    for (int p = 0; p < n && taken < top_k; p++)
        if (score[p] == kth) {
            sel[p] = 1;
            taken++;
        }
}
