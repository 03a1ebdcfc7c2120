// Model architectures strata knows and their hyperparameters, read from GGUF metadata.
// Every size comes from the file; nothing here is specific to one model. docs/architectures.md
// describes each architecture's blocks and the keys it reads.
#ifndef STRATA_ARCH_H
#define STRATA_ARCH_H

#include <stdbool.h>
#include <stdint.h>

struct gguf_file;

enum strata_arch {
    STRATA_ARCH_QWEN3MOE,
    STRATA_ARCH_GLM4MOE,
    STRATA_ARCH_QWEN3NEXT,
    STRATA_ARCH_QWEN35MOE,
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
    uint32_t n_layer;          // blocks run per token: block_count - nextn_predict_layers
    uint32_t n_layer_all;      // block_count (glm4moe/qwen3next count their nextn blocks in it)
    uint32_t n_layer_nextn;    // nextn_predict_layers: multi-token-prediction blocks, skipped
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
    bool expert_weights_norm;  // expert_weights_norm: renormalise the k weights (qwen: always)
    uint32_t expert_gating;    // expert_gating_func: 1 softmax, 2 sigmoid (glm4moe default)
    uint32_t n_expert_shared;  // expert_shared_count (glm4moe)
    uint32_t n_ff_shexp;       // shared-expert FFN width (qwen3next key, glm4moe F * shared)
    uint32_t n_layer_dense_lead; // leading_dense_block_count: blocks with a dense FFN (glm4moe)
    uint32_t n_ff;             // feed_forward_length: width of those dense FFNs
    // Gated delta-net linear attention (qwen3next, qwen35moe).
    uint32_t ssm_d_conv;       // ssm.conv_kernel: causal conv1d width
    uint32_t ssm_d_state;      // ssm.state_size: key and value head dimension
    uint32_t ssm_n_group;      // ssm.group_count: key heads
    uint32_t ssm_dt_rank;      // ssm.time_step_rank: value heads
    uint32_t ssm_d_inner;      // ssm.inner_size: value heads * state size
    uint32_t full_attn_interval; // full_attention_interval: every n-th block is full attention
    int32_t rope_sections[4];  // rope.dimension_sections (qwen35moe interleaved M-RoPE)
};

#define STRATA_GATING_SOFTMAX 1u
#define STRATA_GATING_SIGMOID 2u

// Whether block l of a hybrid model is a linear-attention (delta-net) block.
bool strata_hparams_is_recurrent(const struct strata_hparams *hp, uint32_t l);

// Read and validate the hyperparameters of a supported architecture. Unknown architectures
// give STRATA_EUNSUP with a line naming it; missing or inconsistent keys STRATA_EFORMAT.
int strata_hparams_load(struct strata_hparams *hp, const struct gguf_file *f);

#endif
