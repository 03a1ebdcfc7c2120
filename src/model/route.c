// Host routing (route.h): top-k selection as llama.cpp's MoE graph computes it, and the grouping
// of pairs by expert.
#include "model/route.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define ROUTE_MAX_EXPERTS 1024

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
    float score_buf[ROUTE_MAX_EXPERTS], *score = score_buf;
    uint64_t taken_buf[ROUTE_MAX_EXPERTS / 64], *taken = taken_buf;
    if (X > ROUTE_MAX_EXPERTS) {  // no such model yet: the scratch from the heap
        score = malloc((size_t)X * sizeof *score);
        taken = malloc(((size_t)X + 63) / 64 * sizeof *taken);
        STRATA_ASSERT(score && taken);
    }
    for (int t = 0; t < n; t++) {
        float *pr = logits + (size_t)t * X;
        if (p->sigmoid)
            for (int e = 0; e < X; e++) pr[e] = 1.0f / (1.0f + expf(-pr[e]));
        else
            softmax(pr, X);
        int32_t *st = sel + (size_t)t * K;
        float *wt = weight + (size_t)t * K;
        // each pick: the first untaken expert, replaced by any later untaken one that scores more
        // (so ties go to the lower id, and a NaN first untaken stays); the scores once, the taken
        // ones in a bitset (a decode step of 128 experts and 8 picks: 8 x 128 tests, not 8 x 128 x 8)
        memset(taken, 0, ((size_t)X + 63) / 64 * sizeof *taken);
        for (int e = 0; e < X; e++) score[e] = p->bias ? pr[e] + p->bias[e] : pr[e];
        for (int k = 0; k < K; k++) {
            int best = -1;
            float best_score = 0.0f;
            for (int e = 0; e < X; e++) {
                if (taken[e >> 6] >> (e & 63) & 1) continue;
                if (best < 0 || score[e] > best_score) {
                    best = e;
                    best_score = score[e];
                }
            }
            taken[best >> 6] |= 1ull << (best & 63);
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
    if (score != score_buf) {
        free(score);
        free(taken);
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
