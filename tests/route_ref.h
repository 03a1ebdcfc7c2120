// The tests' reference for the host top-k routing (model/route.c, strata_route_topk): its selection
// as first written, each pick scanning every expert and the picks so far (the first untaken expert,
// replaced by a later untaken one scoring more), then the weights normalised and scaled as it does.
#ifndef STRATA_TESTS_ROUTE_REF_H
#define STRATA_TESTS_ROUTE_REF_H

#include <stdbool.h>
#include <stdint.h>

// The K picks of X probabilities p (bias: the selection bias or NULL) into st, their weights into wt.
static inline void route_picks_ref(const float *p, const float *bias, int X, int K, bool norm, float scale,
                                   int32_t *st, float *wt)
{
    for (int k = 0; k < K; k++) {
        int best = -1;
        float best_score = 0.0f;
        for (int e = 0; e < X; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= st[j] == e;
            const float score = bias ? p[e] + bias[e] : p[e];
            if (!taken && (best < 0 || score > best_score)) best = e, best_score = score;
        }
        st[k] = best;
        wt[k] = p[best];
    }
    float sum = 0.0f;
    for (int k = 0; k < K; k++) sum += wt[k];
    if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
    if (!norm) sum = 1.0f;
    for (int k = 0; k < K; k++) {
        wt[k] /= sum;
        if (scale != 0.0f && scale != 1.0f) wt[k] *= scale;
    }
}

#endif
