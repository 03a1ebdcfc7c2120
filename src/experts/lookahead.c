// Router lookahead (lookahead.h): per MoE layer, the pending prediction as a mark per expert.
#include "experts/lookahead.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

struct strata_lookahead {
    struct strata_expert_provider p;
    uint32_t n_layers, n_expert, topk, k_prefetch;
    uint8_t *pred;                        // [n_layers][n_expert] the pending prediction
    bool *pending;                        // [n_layers]
    uint32_t *count;                      // [n_expert] tokens choosing each expert (scratch)
    uint8_t *rank;                        // [n_layers][n_expert] best rank a token gave it
    uint32_t *ids;                        // [n_expert] the prediction, most chosen first (scratch)
    struct strata_lookahead_stats *st;    // [n_layers]
};

int strata_lookahead_open(struct strata_lookahead **out, struct strata_expert_provider p, uint32_t n_layers,
                          uint32_t n_expert, uint32_t topk, uint32_t k_prefetch)
{
    *out = NULL;
    if (n_expert == 0 || topk == 0 || topk > n_expert) {
        strata_log_error("lookahead_open: top-%u of %u experts", topk, n_expert);
        return STRATA_EARG;
    }
    struct strata_lookahead *la = calloc(1, sizeof *la);
    if (!la) return STRATA_ENOMEM;
    la->p = p;
    la->n_layers = n_layers;
    la->n_expert = n_expert;
    la->topk = topk;
    la->k_prefetch = k_prefetch < topk ? k_prefetch : topk;
    la->pred = calloc((size_t)n_layers * n_expert + 1, 1);
    la->pending = calloc(n_layers + 1, sizeof *la->pending);
    la->count = calloc(n_expert, sizeof *la->count);
    la->rank = calloc((size_t)n_layers * n_expert + 1, 1);
    la->ids = calloc(n_expert, sizeof *la->ids);
    la->st = calloc(n_layers + 1, sizeof *la->st);
    if (!la->pred || !la->pending || !la->count || !la->rank || !la->ids || !la->st) {
        strata_lookahead_close(la);
        return STRATA_ENOMEM;
    }
    *out = la;
    return 0;
}

void strata_lookahead_close(struct strata_lookahead *la)
{
    if (!la) return;
    free(la->pred);
    free(la->pending);
    free(la->count);
    free(la->rank);
    free(la->ids);
    free(la->st);
    free(la);
}

// Turn one token's logits into the router's selection scores, in place.
static void scores(float *p, uint32_t X, enum strata_lookahead_gating gating, const float *bias)
{
    if (gating == STRATA_LOOKAHEAD_SIGMOID) {
        for (uint32_t e = 0; e < X; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
    } else if (bias) {  // without a bias the logits rank as the softmax does
        float max = p[0], sum = 0.0f;
        for (uint32_t e = 1; e < X; e++) max = p[e] > max ? p[e] : max;
        for (uint32_t e = 0; e < X; e++) sum += p[e] = expf(p[e] - max);
        for (uint32_t e = 0; e < X; e++) p[e] /= sum;
    }
    if (bias)
        for (uint32_t e = 0; e < X; e++) p[e] += bias[e];
}

int strata_lookahead_predict(struct strata_lookahead *la, uint32_t moe_layer, float *logits, int n,
                             enum strata_lookahead_gating gating, const float *bias)
{
    if (moe_layer >= la->n_layers || n <= 0) return 0;
    const uint32_t X = la->n_expert, K = la->topk;
    uint8_t *pred = la->pred + (size_t)moe_layer * X, *rank = la->rank + (size_t)moe_layer * X;
    memset(la->count, 0, X * sizeof *la->count);
    memset(pred, 0, X);
    memset(rank, 0xff, X);
    for (int t = 0; t < n; t++) {
        float *p = logits + (size_t)t * X;
        scores(p, X, gating, bias);
        // top-k by repeated selection (k is small); the earliest expert wins a tie, as routing
        for (uint32_t k = 0; k < K; k++) {
            int64_t best = -1;
            for (uint32_t e = 0; e < X; e++)
                if (p[e] != -INFINITY && (best < 0 || p[e] > p[best])) best = e;
            if (best < 0) break;
            pred[best] = 1;
            if (k < rank[best]) rank[best] = (uint8_t)k;
            la->count[best] += k < la->k_prefetch;
            p[best] = -INFINITY;
        }
    }
    struct strata_lookahead_stats *st = &la->st[moe_layer];
    uint32_t n_ids = 0;
    for (uint32_t e = 0; e < X; e++) {
        if (!pred[e]) continue;
        st->predicted++;
        st->rank_predicted[rank[e] < STRATA_LOOKAHEAD_RANKS ? rank[e] : STRATA_LOOKAHEAD_RANKS - 1]++;
        if (la->count[e]) la->ids[n_ids++] = e;
    }
    // most chosen first, then by the best rank (stable: lower id first among equals)
    for (uint32_t i = 1; i < n_ids; i++) {
        const uint32_t v = la->ids[i];
        uint32_t j = i;
        while (j > 0 && (la->count[la->ids[j - 1]] < la->count[v] ||
                         (la->count[la->ids[j - 1]] == la->count[v] && rank[la->ids[j - 1]] > rank[v]))) {
            la->ids[j] = la->ids[j - 1];
            j--;
        }
        la->ids[j] = v;
    }
    la->pending[moe_layer] = true;
    const int max = strata_provider_max_batch(la->p);
    const int n_ask = (int)n_ids < max ? (int)n_ids : max;
    st->prefetch_asked += (uint64_t)n_ask;
    return strata_provider_prefetch(la->p, moe_layer, la->ids, n_ask);
}

void strata_lookahead_observe(struct strata_lookahead *la, uint32_t moe_layer, const uint32_t *ids, int n)
{
    if (moe_layer >= la->n_layers || !la->pending[moe_layer]) return;
    const uint8_t *pred = la->pred + (size_t)moe_layer * la->n_expert;
    const uint8_t *rank = la->rank + (size_t)moe_layer * la->n_expert;
    struct strata_lookahead_stats *st = &la->st[moe_layer];
    st->chunks++;
    st->used += (uint64_t)n;
    for (int i = 0; i < n; i++) {
        if (ids[i] >= la->n_expert || !pred[ids[i]]) continue;
        st->correct++;
        st->rank_correct[rank[ids[i]] < STRATA_LOOKAHEAD_RANKS ? rank[ids[i]] : STRATA_LOOKAHEAD_RANKS - 1]++;
    }
    la->pending[moe_layer] = false;
}

void strata_lookahead_get_stats(const struct strata_lookahead *la, uint32_t moe_layer,
                                struct strata_lookahead_stats *st)
{
    if (moe_layer < la->n_layers) *st = la->st[moe_layer];
    else memset(st, 0, sizeof *st);
}
