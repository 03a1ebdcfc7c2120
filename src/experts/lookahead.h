// Router lookahead: guess the experts of a later MoE layer from an earlier hidden state and
// prefetch the ones not resident, so their reads run while the current layer computes.
//
// The forward pass, at MoE layer L, applies layer L+1's router (its ffn norm and gate) to L's
// residual stream and hands the logits to strata_lookahead_predict(L+1, ...); when it has routed
// L+1 for real it calls strata_lookahead_observe(L+1, used experts), which scores the guess
// (recall: the share of the used experts that were predicted; precision: the share of predicted
// experts that were used). A wrong guess costs only disk bandwidth: the output never depends on
// it (prefetch only fills free slots of that layer, never a pinned one).
//
// For a chunk of n tokens the prediction is the union of each token's top-k, ordered by how many
// tokens chose an expert (most first, then by the best rank a token gave it) and cut at the
// provider's max_batch (the slots of a layer), so the reads the chunk most needs start first.
//
// One lookahead belongs to one forward pass at a time (a session or the engine's batch loop);
// it is not locked.
#ifndef STRATA_EXPERTS_LOOKAHEAD_H
#define STRATA_EXPERTS_LOOKAHEAD_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/provider.h"

#define STRATA_LOOKAHEAD_RANKS 16

struct strata_lookahead_stats {
    uint64_t chunks;        // chunks of this layer that had a prediction
    uint64_t predicted;     // experts predicted (before the cut)
    uint64_t used;          // experts used by those chunks
    uint64_t correct;       // used and predicted
    uint64_t prefetch_asked;  // predicted experts handed to the provider's prefetch
    uint64_t rank_predicted[STRATA_LOOKAHEAD_RANKS];  // by the best rank a token gave the expert
    uint64_t rank_correct[STRATA_LOOKAHEAD_RANKS];    // of those, used
};

struct strata_lookahead;

// n_layers MoE layers of n_expert experts, top-k routing; each token's first k_prefetch guesses
// (by the router's rank) are prefetched, all k are scored. The provider is borrowed.
int strata_lookahead_open(struct strata_lookahead **out, struct strata_expert_provider p, uint32_t n_layers,
                          uint32_t n_expert, uint32_t topk, uint32_t k_prefetch);
void strata_lookahead_close(struct strata_lookahead *la);

enum strata_lookahead_gating { STRATA_LOOKAHEAD_SOFTMAX, STRATA_LOOKAHEAD_SIGMOID };

// Predict MoE layer moe_layer's experts from logits [n][n_expert] (its router applied to an earlier
// hidden state) and prefetch them. The ranking is the router's own: softmax or sigmoid
// probabilities plus the selection bias when the layer has one (bias [n_expert] or NULL). Scratch:
// overwrites logits. 0 or negative (the provider's refusal).
int strata_lookahead_predict(struct strata_lookahead *la, uint32_t moe_layer, float *logits, int n,
                             enum strata_lookahead_gating gating, const float *bias);
// The experts moe_layer really used for the chunk (each once): scores the pending prediction.
void strata_lookahead_observe(struct strata_lookahead *la, uint32_t moe_layer, const uint32_t *ids, int n);
void strata_lookahead_get_stats(const struct strata_lookahead *la, uint32_t moe_layer,
                                struct strata_lookahead_stats *st);

#endif
