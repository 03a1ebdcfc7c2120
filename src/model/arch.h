// Model architectures strata knows and their hyperparameters, read from GGUF metadata.
// Every size comes from the file; nothing here is specific to one model.
#ifndef STRATA_ARCH_H
#define STRATA_ARCH_H

#include <stdbool.h>
#include <stdint.h>

struct gguf_file;

enum strata_arch {
    STRATA_ARCH_QWEN3MOE,
    STRATA_ARCH_COUNT
};

const char *strata_arch_name(enum strata_arch arch);     // "qwen3moe" (GGUF's spelling)
int strata_arch_from_name(const char *name);             // -1 if unknown

struct strata_hparams {
    enum strata_arch arch;
    char name[128];            // general.name, or the file's base name
    uint32_t n_vocab;          // rows of token_embd
    uint32_t n_ctx_train;      // context_length
    uint32_t n_embd;           // embedding_length
    uint32_t n_layer;          // block_count
    uint32_t n_head;           // attention.head_count
    uint32_t n_head_kv;        // attention.head_count_kv (default n_head)
    uint32_t head_dim_k;       // attention.key_length (default n_embd / n_head)
    uint32_t head_dim_v;       // attention.value_length (default head_dim_k)
    uint32_t n_rot;            // rope.dimension_count (default head_dim_k)
    uint32_t n_expert;         // expert_count
    uint32_t n_expert_used;    // expert_used_count
    uint32_t n_ff_exp;         // expert_feed_forward_length
    float rms_eps;             // attention.layer_norm_rms_epsilon
    float rope_freq_base;      // rope.freq_base (default 10000)
    float expert_weights_scale; // expert_weights_scale (0: none)
};

// Read and validate the hyperparameters of a supported architecture. Unknown architectures
// give STRATA_EUNSUP with a line naming it; missing or inconsistent keys STRATA_EFORMAT.
int strata_hparams_load(struct strata_hparams *hp, const struct gguf_file *f);

#endif
