// Routing on the host, shared by every backend: from router logits to each token's experts and
// weights, and the grouping of a pass's (token, expert) pairs by expert, so that each expert's
// tokens go through one product.
#ifndef STRATA_MODEL_ROUTE_H
#define STRATA_MODEL_ROUTE_H

#include <stdint.h>

#include "backend/backend.h"

// Softmax (or sigmoid) over all experts of each token's logits [n][n_expert] (overwritten with
// the probabilities); the n_used best by probability plus the selection bias, first on ties;
// weights are the unbiased probabilities, renormalised over the chosen ones when p->norm (sum
// floored at 2^-14), then scaled. sel and weight: [n][n_used] in selection order.
void strata_route_topk(const struct strata_route_params *p, float *logits, int n, int32_t *sel, float *weight);

// A pass's pairs grouped by expert: rows r of expert e are first[e] .. first[e] + count[e] - 1,
// tokens ascending within an expert, experts ascending.
struct strata_route_groups {
    int32_t *count, *first;  // [n_expert]
    int32_t *tok_of;         // [n * n_used] token of each row
    int32_t *route_of;       // [n][n_used] row of each selection
    uint32_t *used;          // [n_expert] the experts with rows, ascending
    int n_used_experts;
};

void strata_route_group(const int32_t *sel, int n, uint32_t n_used, uint32_t n_expert, struct strata_route_groups *g);

#endif
