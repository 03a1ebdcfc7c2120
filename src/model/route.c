// Host routing (route.h): top-k selection as llama.cpp's MoE graph computes it, and the grouping
// of pairs by expert.
#include "model/route.h"

#include <math.h>
#include <string.h>

// In-place softmax of n values (max subtracted, sum in double).
static void softmax(float *x, int n)
{
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void strata_route_topk(const struct strata_route_params *p, float *logits, int n, int32_t *sel, float *weight)
{
    const int X = (int)p->n_expert, K = (int)p->n_used;
    for (int t = 0; t < n; t++) {
        float *pr = logits + (size_t)t * X;
        if (p->sigmoid)
            for (int e = 0; e < X; e++) pr[e] = 1.0f / (1.0f + expf(-pr[e]));
        else
            softmax(pr, X);
        int32_t *st = sel + (size_t)t * K;
        float *wt = weight + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int best = -1;
            float best_score = 0.0f;
            for (int e = 0; e < X; e++) {
                bool taken = false;
                for (int j = 0; j < k; j++) taken |= st[j] == e;
                const float score = p->bias ? pr[e] + p->bias[e] : pr[e];
                if (!taken && (best < 0 || score > best_score)) {
                    best = e;
                    best_score = score;
                }
            }
            st[k] = best;
            wt[k] = pr[best];
        }
        float sum = 0.0f;
        for (int k = 0; k < K; k++) sum += wt[k];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        if (!p->norm) sum = 1.0f;
        for (int k = 0; k < K; k++) {
            wt[k] /= sum;
            if (p->scale != 0.0f && p->scale != 1.0f) wt[k] *= p->scale;
        }
    }
}

void strata_route_group(const int32_t *sel, int n, uint32_t n_used, uint32_t n_expert, struct strata_route_groups *g)
{
    const int K = (int)n_used;
    memset(g->count, 0, n_expert * sizeof *g->count);
    for (int i = 0; i < n * K; i++) g->count[sel[i]]++;
    int32_t pos = 0;
    g->n_used_experts = 0;
    for (uint32_t e = 0; e < n_expert; e++) {
        g->first[e] = pos;
        pos += g->count[e];
        if (g->count[e]) g->used[g->n_used_experts++] = e;
        g->count[e] = 0;
    }
    for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) {
            const int e = sel[(size_t)t * K + k];
            const int32_t r = g->first[e] + g->count[e]++;
            g->tok_of[r] = t;
            g->route_of[(size_t)t * K + k] = r;
        }
}
