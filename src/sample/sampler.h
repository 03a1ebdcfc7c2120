// Token sampler: turns one row of logits [n_vocab] into a token id.
//
// temperature <= 0 is greedy: the argmax (lowest id on ties, as llama.cpp's greedy sampler),
// after the repetition penalty if one is set. Otherwise the llama.cpp chain, in its order:
// repetition penalty over the last repeat_last_n history tokens (positive logits divided,
// negative multiplied, once per distinct token), top-k, top-p, min-p, temperature, then a draw
// from the softmax with a seeded xoshiro256** generator, so a seed fixes the token sequence.
// All scratch is allocated by init; sampling allocates nothing.
#ifndef STRATA_SAMPLE_SAMPLER_H
#define STRATA_SAMPLE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata.h"  // struct strata_token_logit

struct strata_sampler_params {
    float temperature;     // <= 0: greedy; else logits are divided by it before the draw
    int top_k;             // keep the k largest logits; 0 disables
    float top_p;           // keep the smallest most-likely set with probability >= top_p; 1 disables
    float min_p;           // keep tokens with p >= min_p * p_max; 0 disables
    float repeat_penalty;  // 1 disables
    int repeat_last_n;     // window of history tokens penalised; 0 disables, -1 = all history
    uint64_t seed;
};

// One candidate token of the filtered distribution.
struct strata_sampler_candidate {
    int32_t id;
    float logit;  // after penalty and temperature
    float p;      // probability among the surviving candidates (set by strata_sampler_filter)
};

struct strata_sampler {
    struct strata_sampler_params params;
    int32_t n_vocab;
    struct strata_sampler_candidate *cand;  // [n_vocab] scratch, owned
    struct strata_sampler_candidate *sorted_tmp;  // [n_vocab] radix sort buffer, owned
    struct strata_token_logit *top;         // [top_k + win_cap] the row's best when the chain starts there
    int32_t *win;                           // [win_cap] a penalty window's distinct tokens
    size_t win_cap;
    uint32_t *seen;                         // [n_vocab] stamps that count each history token once
    uint32_t stamp;
    uint64_t rng[4];                        // xoshiro256** state
};

// llama.cpp's defaults: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, no repetition
// penalty (1.0, window 64), seed 0.
struct strata_sampler_params strata_sampler_default_params(void);

// Checks params (top_k >= 0, top_p and min_p in [0,1], repeat_penalty > 0, repeat_last_n >= -1,
// n_vocab > 0) and allocates the scratch. 0 or a negative STRATA_E* code.
int strata_sampler_init(struct strata_sampler *s, struct strata_sampler_params params, int32_t n_vocab);
void strata_sampler_clear(struct strata_sampler *s);

// Restarts the random sequence as if freshly initialised with `seed`.
void strata_sampler_seed(struct strata_sampler *s, uint64_t seed);

// Samples one token from logits [n_vocab] (read only; NaN counts as -inf). history holds the
// tokens so far (prompt and generated), oldest first; only its last repeat_last_n are read, and
// it may be NULL when n_history is 0. Returns the token id, or a negative STRATA_E* code.
int32_t strata_sampler_sample(struct strata_sampler *s, const float *logits, const int32_t *history,
                              size_t n_history);

// The first index of the largest of x[0..n) (NaN never wins; 0 when none is above -inf): the
// token greedy sampling picks from a row. A backend's argmax op gives the same index.
int32_t strata_argmax(const float *x, int32_t n);

// Whether sampling with n_history tokens of history is the plain argmax of the logits (greedy
// without a repetition penalty): the caller may then ask the forward pass for the pick alone.
bool strata_sampler_is_argmax(const struct strata_sampler *s, size_t n_history);

// The k best of x[0..n) (1 <= k <= n) into out[0..k): logit descending, ties by lower id, NaN as
// -inf (its logit then -inf). The candidates the sampler's top-k keeps; a backend's topk op gives
// the same.
void strata_top_k(const float *x, int32_t n, int k, struct strata_token_logit *out);

// k > 0 when the draw with n_history tokens of history depends only on the row's k best (sampling
// without a repetition penalty, top-k on, below the vocabulary and at most STRATA_TOP_K_MAX): the
// caller may then ask the forward pass for those (strata_batch_item.top) and draw with
// strata_sampler_sample_top; else 0.
int strata_sampler_top_k(const struct strata_sampler *s, size_t n_history);

// The draw strata_sampler_sample makes from the row, given only the row's k best as
// strata_top_k gives them (k = strata_sampler_top_k). The same token and random state. The id,
// or STRATA_EARG when k is not what the sampler takes or the candidates are not in that order.
int32_t strata_sampler_sample_top(struct strata_sampler *s, const struct strata_token_logit *top, int k,
                                  size_t n_history);

// Runs the chain up to the draw and exposes the surviving candidates with their probabilities,
// for tests and for reporting log-probabilities. Sets *out to s's scratch (borrowed until the
// next call on s): in descending logit order (ties: lower id first) when top-k or top-p sorted
// them, else in id order. Greedy mode leaves one candidate, p = 1. Does not advance the random
// state. Returns the number of candidates (>= 1) or a negative STRATA_E* code.
int strata_sampler_filter(struct strata_sampler *s, const float *logits, const int32_t *history,
                          size_t n_history, const struct strata_sampler_candidate **out);

#endif
