// A loaded model and an inference session over it.
//
// strata_model holds the dense weights (resident, read once at load) and the expert provider.
// strata_session holds what one sequence needs: the KV cache, the scratch of one prompt chunk,
// the compute pool and the statistics. Prompts are processed in chunks of up to n_batch tokens
// with batched matmuls; within a chunk each needed expert is fetched once.
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/experts.h"
#include "model/arch.h"

struct strata_gguf_file;
struct strata_model;
struct strata_session;

struct strata_model_params {
    bool use_mmap;   // reserved; weights are read into memory
    struct strata_experts_config experts;  // expert cache budget, I/O engine, route trace
};

// Open a GGUF and load its weights. 0 or negative (one error line logged).
int strata_model_load(struct strata_model **out, const char *path, const struct strata_model_params *p);
void strata_model_free(struct strata_model *m);
const struct strata_hparams *strata_model_hparams(const struct strata_model *m);
const struct strata_gguf_file *strata_model_file(const struct strata_model *m);
uint64_t strata_model_dense_bytes(const struct strata_model *m);   // resident non-expert weights
uint64_t strata_model_expert_bytes(const struct strata_model *m);  // expert weights in memory
// Expert store counters (whole model, or one MoE layer).
void strata_model_expert_stats(const struct strata_model *m, struct strata_experts_stats *st);
void strata_model_expert_layer_stats(const struct strata_model *m, uint32_t layer,
                                     struct strata_experts_layer_stats *st);

struct strata_session_params {
    int n_ctx;      // context length (tokens); 0: min(model's, 4096)
    int n_batch;    // prompt chunk size; 0: 512
    int n_threads;  // 0: all cores
};

// Time and work per phase of the forward pass, accumulated over the session.
struct strata_phase_stats {
    double t_embed, t_attn, t_router, t_experts, t_head;  // seconds
    double t_linear_attn;   // gated delta-net blocks (qwen3next); t_attn is full attention
    uint64_t n_tokens;      // tokens evaluated
    uint64_t n_chunks;      // forward calls (chunks)
};

int strata_session_create(struct strata_session **out, struct strata_model *m,
                          const struct strata_session_params *p);
void strata_session_free(struct strata_session *s);
int strata_session_n_ctx(const struct strata_session *s);
int strata_session_n_past(const struct strata_session *s);
// Forget the sequence (KV cache positions) but keep the statistics.
void strata_session_reset(struct strata_session *s);
// Evaluate n tokens at positions n_past.. (split into chunks of n_batch). logits receives
// [n][n_vocab] floats when all_logits, else [n_vocab] for the last token; may be NULL.
// 0 or negative: STRATA_EARG for a token id out of range or a context overflow (logged).
int strata_session_eval(struct strata_session *s, const int32_t *tokens, int n, float *logits,
                        bool all_logits);
void strata_session_stats(const struct strata_session *s, struct strata_phase_stats *st);

#endif
