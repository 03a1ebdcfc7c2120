// Expert selection in llama.cpp's order (see routing.h).
#include "model/routing.h"

#include <math.h>

#include "model/arch.h"
#include "util/ggml_float.h"
#include "util/log.h"

void strata_softmax_ggml(float *x, int n, int vl)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = mx > x[i] ? mx : x[i];
    double sum = 0.0;
    int i = 0;
    for (; i + vl - 1 < n; i += vl) {
        float lane[16];
        for (int j = 0; j < vl; j++) {
            x[i + j] = vl == 16 ? ggml_vexpf16(x[i + j] - mx) : ggml_vexpf8(x[i + j] - mx);
            lane[j] = x[i + j];
        }
        sum += (double)ggml_hsum_lanes(lane, vl);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) x[j] *= inv;
}

// The n largest of v[0..m) by value, descending; ties to the lower index. out: n indices.
static void top_n(const float *v, int m, int n, int32_t *out)
{
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int e = 0; e < m; e++) {
            bool taken = false;
            for (int j = 0; j < k && !taken; j++) taken = out[j] == e;
            if (!taken && (best < 0 || v[e] > v[best])) best = e;
        }
        out[k] = best;
    }
}

void strata_route_select(const struct strata_route_cfg *c, float *logits, const float *bias, int32_t *ids,
                         float *w, float *scratch)
{
    const int X = (int)c->n_expert, K = (int)c->n_used;
    STRATA_ASSERT(K >= 1 && K <= X);
    float *probs = logits, *sel = scratch, *gscore = scratch + X;
    if (c->gating == STRATA_GATING_SOFTMAX)
        strata_softmax_ggml(probs, X, c->vl);
    else if (c->gating == STRATA_GATING_SIGMOID)
        for (int e = 0; e < X; e++) probs[e] = 1.0f / (1.0f + expf(-probs[e]));
    for (int e = 0; e < X; e++) sel[e] = bias ? probs[e] + bias[e] : probs[e];

    if (c->n_groups > 1) {
        const int G = (int)c->n_groups, per = X / G;
        STRATA_ASSERT(X % G == 0 && per >= 2 && c->n_group_used >= 1 && (int)c->n_group_used <= G);
        for (int g = 0; g < G; g++) {
            int32_t two[2];
            top_n(sel + g * per, per, 2, two);
            // ggml_sum_rows of the two: a double sum rounded once
            gscore[g] = (float)((double)sel[g * per + two[0]] + (double)sel[g * per + two[1]]);
        }
        int32_t keep[64];
        STRATA_ASSERT(G <= 64);
        top_n(gscore, G, (int)c->n_group_used, keep);
        for (int g = 0; g < G; g++) {
            bool kept = false;
            for (uint32_t j = 0; j < c->n_group_used && !kept; j++) kept = keep[j] == g;
            if (!kept)
                for (int e = 0; e < per; e++) sel[g * per + e] = -INFINITY;
        }
    }
    top_n(sel, X, K, ids);
    for (int k = 0; k < K; k++) w[k] = probs[ids[k]];
    if (c->gating == STRATA_GATING_SOFTMAX_WEIGHT) strata_softmax_ggml(w, K, c->vl);
    if (c->norm) {
        double s = 0.0;
        for (int k = 0; k < K; k++) s += (double)w[k];
        float sum = (float)s;
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        for (int k = 0; k < K; k++) w[k] /= sum;
    }
    if (c->scale != 0.0f && c->scale != 1.0f)
        for (int k = 0; k < K; k++) w[k] *= c->scale;
}
