// Model architectures strata knows and their hyperparameters, read from GGUF metadata.
// Every size comes from the file; nothing here is specific to one model. docs/architectures.md
// describes each architecture's blocks and the keys it reads.
#ifndef STRATA_ARCH_H
#define STRATA_ARCH_H

#include <stdbool.h>
#include <stdint.h>

struct strata_gguf_file;

enum strata_arch {
    STRATA_ARCH_QWEN3MOE,
    STRATA_ARCH_GLM4MOE,
    STRATA_ARCH_QWEN3NEXT,
    STRATA_ARCH_QWEN35MOE,
    STRATA_ARCH_DEEPSEEK2,     // DeepSeek-V2/V3/R1/V3.1, Kimi-K2: multi-head latent attention
    STRATA_ARCH_DEEPSEEK32,    // DeepSeek-V3.2: deepseek2 + the sparse-attention indexer
    STRATA_ARCH_GLM_DSA,       // GLM-5.x: MLA + indexer (GGUF spelling "glm-dsa")
    STRATA_ARCH_GPT_OSS,       // gpt-oss (llama.cpp's openai-moe)
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
    // RoPE scaling (rope.scaling.*): YaRN in deepseek2/deepseek32/gpt-oss.
    bool rope_yarn;            // rope.scaling.type == "yarn"
    float rope_scale;          // rope.scaling.factor (0: none)
    uint32_t rope_n_ctx_orig;  // rope.scaling.original_context_length (0: n_ctx_train)
    float rope_attn_factor;    // rope.scaling.attn_factor (0: 1)
    float yarn_log_mul;        // rope.scaling.yarn_log_multiplier / 0.1 (deepseek2/deepseek32)
    // Multi-head latent attention (deepseek2, deepseek32, glm-dsa): head_dim_k is then the
    // cached key (kv_lora_rank + n_rot), head_dim_v the latent (kv_lora_rank), n_head_kv 1.
    uint32_t q_lora_rank;      // attention.q_lora_rank (0: a plain attn_q, DeepSeek-V2-Lite)
    uint32_t kv_lora_rank;     // attention.kv_lora_rank (0: not MLA)
    uint32_t head_dim_k_mla;   // attention.key_length_mla: per-head no-rope + rope key width
    uint32_t head_dim_v_mla;   // attention.value_length_mla: per-head value width
    uint32_t n_expert_groups;  // expert_group_count (DeepSeek-V3: 8; 0 or 1: no groups)
    uint32_t n_group_used;     // expert_group_used_count
    // Sparse-attention indexer (deepseek32, glm-dsa).
    uint32_t idx_n_head;       // attention.indexer.head_count (0: no indexer)
    uint32_t idx_head_dim;     // attention.indexer.key_length (a power of two, >= 64)
    uint32_t idx_top_k;        // attention.indexer.top_k
    uint64_t idx_full[64];     // bit l: block l computes its own top-k (else reuses the last)
    float norm_eps;            // LayerNorm eps of the indexer key (0 for glm-dsa, as llama.cpp)
    // gpt-oss.
    uint32_t n_swa;            // attention.sliding_window (0: none)
    uint64_t swa_layers[64];   // bit l: block l is sliding-window
    float rope_freq_base_swa;  // rope.freq_base_swa (default rope.freq_base)
};


static inline bool strata_hparams_bit(const uint64_t *bits, uint32_t l) { return l < 4096 && (bits[l / 64] >> (l % 64)) & 1; }

// Bytes of KV cache per token over all blocks run, elem_bytes per cached value, as llama.cpp
// sizes its cache: K and V for GQA blocks, only the latent + rope key for MLA blocks, plus the
// indexer's key in the blocks that compute their own top-k; sliding-window blocks counted as
// full ones (llama.cpp's default ring for them is smaller).
uint64_t strata_hparams_kv_bytes_per_token(const struct strata_hparams *hp, uint32_t elem_bytes);
// Whether the model's attention takes a typed (F16, BF16, Q8_0) KV cache: no latent cache (MLA),
// sliding window or sinks, from the hyperparameters alone (strata_seq_kv_typed decides the same
// from the loaded layers for the backend; test_engine checks they agree). What the CPU's default
// cache type (auto, strata_engine_kv_auto) is F16 for.
bool strata_hparams_kv_typed(const struct strata_hparams *hp);

#define STRATA_GATING_SOFTMAX 1u
#define STRATA_GATING_SIGMOID 2u
#define STRATA_GATING_SOFTMAX_WEIGHT 3u  // gpt-oss: softmax over the chosen experts' logits

// Whether block l of a hybrid model is a linear-attention (delta-net) block.
bool strata_hparams_is_recurrent(const struct strata_hparams *hp, uint32_t l);

// Read and validate the hyperparameters of a supported architecture. Unknown architectures
// give STRATA_EUNSUP with a line naming it; missing or inconsistent keys STRATA_EFORMAT.
int strata_hparams_load(struct strata_hparams *hp, const struct strata_gguf_file *f);

#endif
