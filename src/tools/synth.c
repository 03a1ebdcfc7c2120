// strata synth: synthetic GGUF models of real architectures.
//
// A preset is the hyperparameter set of a released model (from its public config.json) or a tiny
// test shape. Weight matrices get random valid blocks of the chosen type (strata_quant_random);
// routers and norms stay F32 as real converters keep them. Each tensor's data comes from its own
// PRNG stream seeded by (seed, tensor name), so the bytes of a tensor do not depend on the order
// or on the other tensors. Data is generated in chunks and streamed to disk: the file never has
// to fit in memory.
#include "tools/synth.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/schema.h"
#include "quant/quant.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/time.h"

struct preset {
    const char *arch, *name, *source;
    uint32_t n_vocab, n_ctx, n_embd, n_layer, n_head, n_head_kv, head_dim;
    uint32_t n_expert, n_expert_used, n_ff_exp;
    float rope_base, rms_eps;
    enum strata_type default_type;
    // Fields of the newer architectures (0: absent / the default).
    uint32_t n_rot;             // rotary dims when partial (0: head_dim)
    uint32_t n_nextn;           // multi-token-prediction blocks after the trunk (in block_count)
    uint32_t n_expert_shared;   // glm4moe shared experts (width n_ff_exp each)
    uint32_t n_dense_lead;      // glm4moe leading blocks with a dense FFN of width n_ff
    uint32_t n_ff;
    bool qk_norm;               // glm4moe per-head q/k RMS norms (GLM-4.5/4.7 have them, Air not)
    float expert_weights_scale; // glm4moe routed_scaling_factor
    uint32_t ssm_d_conv, ssm_d_state, ssm_n_group, ssm_dt_rank;  // qwen3next delta-net
    uint32_t full_attn_interval;
    uint32_t n_ff_shexp;        // qwen3next shared expert width
    int32_t rope_sections[4];   // qwen35moe interleaved M-RoPE sections
    // Multi-head latent attention (deepseek2, deepseek32, glm-dsa): head_dim is the cached key
    // width kv_lora_rank + n_rot (MQA over the latent), head_dim_v the latent width.
    uint32_t head_dim_v;        // attention.value_length when it differs from head_dim
    uint32_t q_lora_rank, kv_lora_rank;
    uint32_t qk_nope, v_head_mla; // per-head query/key no-rope width and value width
    uint32_t n_expert_groups, n_group_used; // group-limited routing (DeepSeek-V3)
    float rope_scale;           // YaRN factor (0: no rope scaling)
    uint32_t rope_orig_ctx;     // YaRN original context length
    float yarn_log_mul;         // rope.scaling.yarn_log_multiplier as converters write it (0.1*mscale_all_dim)
    uint32_t idx_n_head, idx_head_dim, idx_top_k; // sparse-attention indexer (glm-dsa, deepseek32)
    uint32_t idx_shared_period; // glm-dsa: every n-th block computes its top-k, others reuse (0: all)
    uint32_t n_swa;             // gpt-oss sliding window (every other block, from the first)
    enum strata_type expert_type; // routed experts' type when no --type is given (0: default_type)
};

static const struct preset g_presets[] = {
    {"qwen3moe", "tiny", "test shape: K-quant-compatible rows (256), 4 layers, 8 experts top-2",
     1024, 4096, 256, 4, 4, 2, 64, 8, 2, 256, 1000000.0f, 1e-6f, STRATA_TYPE_Q8_0, .n_rot = 0},
    {"qwen3moe", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B config.json",
     151936, 40960, 2048, 48, 32, 4, 128, 128, 8, 768, 1000000.0f, 1e-6f, STRATA_TYPE_Q4_K, .n_rot = 0},
    {"qwen3moe", "qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B config.json",
     151936, 40960, 4096, 94, 64, 4, 128, 128, 8, 1536, 1000000.0f, 1e-6f, STRATA_TYPE_Q4_K, .n_rot = 0},
    // glm4moe: q/k/v biases, partial rotary (half the head), sigmoid routing with a selection bias,
    // one shared expert, leading dense blocks; one nextn block after the trunk as real files have.
    {.arch = "glm4moe", .name = "tiny", .source = "test shape: GLM-4.7-like (q/k norms, scale 2.5), 3+1 layers, 8 experts top-2",
     .n_vocab = 1024, .n_ctx = 4096, .n_embd = 256, .n_layer = 3, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_base = 1000000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 32, .n_nextn = 1, .n_expert_shared = 1, .n_dense_lead = 1,
     .n_ff = 512, .qk_norm = true, .expert_weights_scale = 2.5f},
    {.arch = "glm4moe", .name = "tiny-air", .source = "test shape: GLM-4.5-Air-like (no q/k norms, scale 1), 3+1 layers",
     .n_vocab = 1024, .n_ctx = 4096, .n_embd = 256, .n_layer = 3, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_base = 1000000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 32, .n_nextn = 1, .n_expert_shared = 1, .n_dense_lead = 1,
     .n_ff = 512, .expert_weights_scale = 1.0f},
    {.arch = "glm4moe", .name = "glm-4.5-air", .source = "zai-org/GLM-4.5-Air config.json",
     .n_vocab = 151552, .n_ctx = 131072, .n_embd = 4096, .n_layer = 46, .n_head = 96, .n_head_kv = 8,
     .head_dim = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 1408, .rope_base = 1000000.0f,
     .rms_eps = 1e-5f, .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1,
     .n_dense_lead = 1, .n_ff = 10944, .expert_weights_scale = 1.0f},
    {.arch = "glm4moe", .name = "glm-4.7", .source = "zai-org/GLM-4.7 config.json (GLM-4.5/4.6 shape)",
     .n_vocab = 151552, .n_ctx = 202752, .n_embd = 5120, .n_layer = 92, .n_head = 96, .n_head_kv = 8,
     .head_dim = 128, .n_expert = 160, .n_expert_used = 8, .n_ff_exp = 1536, .rope_base = 1000000.0f,
     .rms_eps = 1e-5f, .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1,
     .n_dense_lead = 3, .n_ff = 12288, .qk_norm = true, .expert_weights_scale = 2.5f},
    // qwen3next: three delta-net blocks then one gated full-attention block, 512 experts top-10
    // plus a gated shared expert. Tiny: value heads twice the key heads, as in the real models.
    {.arch = "qwen3next", .name = "tiny", .source = "test shape: 8 layers (every 4th full attention), 8 experts top-2",
     .n_vocab = 1024, .n_ctx = 4096, .n_embd = 256, .n_layer = 8, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_base = 10000000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 16, .ssm_d_conv = 4, .ssm_d_state = 32, .ssm_n_group = 4,
     .ssm_dt_rank = 8, .full_attn_interval = 4, .n_ff_shexp = 512},
    {.arch = "qwen3next", .name = "qwen3-next-80b-a3b", .source = "Qwen/Qwen3-Next-80B-A3B-Instruct config.json",
     .n_vocab = 151936, .n_ctx = 262144, .n_embd = 2048, .n_layer = 48, .n_head = 16, .n_head_kv = 2,
     .head_dim = 256, .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 512, .rope_base = 10000000.0f,
     .rms_eps = 1e-6f, .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .ssm_d_conv = 4, .ssm_d_state = 128,
     .ssm_n_group = 16, .ssm_dt_rank = 32, .full_attn_interval = 4, .n_ff_shexp = 512},
    // qwen35moe: qwen3next with separate beta/alpha projections, key heads tiled (not repeated
    // in place) over the value heads, and interleaved M-RoPE (text positions: plain RoPE).
    {.arch = "qwen35moe", .name = "tiny", .source = "test shape: 8 layers (every 4th full attention), 8 experts top-2",
     .n_vocab = 1024, .n_ctx = 4096, .n_embd = 256, .n_layer = 8, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_base = 10000000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 16, .ssm_d_conv = 4, .ssm_d_state = 32, .ssm_n_group = 4,
     .ssm_dt_rank = 8, .full_attn_interval = 4, .n_ff_shexp = 512, .rope_sections = {3, 3, 2, 0}},
    {.arch = "qwen35moe", .name = "qwen3.5-397b-a17b", .source = "Qwen/Qwen3.5-397B-A17B config.json (text part)",
     .n_vocab = 248320, .n_ctx = 262144, .n_embd = 4096, .n_layer = 60, .n_head = 32, .n_head_kv = 2,
     .head_dim = 256, .n_expert = 512, .n_expert_used = 10, .n_ff_exp = 1024, .rope_base = 10000000.0f,
     .rms_eps = 1e-6f, .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .ssm_d_conv = 4, .ssm_d_state = 128,
     .ssm_n_group = 16, .ssm_dt_rank = 64, .full_attn_interval = 4, .n_ff_shexp = 1024,
     .rope_sections = {11, 11, 10, 0}},
    // deepseek2: multi-head latent attention (q and kv low-rank projections, the kv latent plus
    // one rope key cached per token), YaRN, leading dense blocks, sigmoid routing with a selection
    // bias inside expert groups, one shared expert. Tiny: the latent and q rank at 256 so K-quants
    // fit (attn_k_b's rows of qk_nope fall back as real quantizers do).
    {.arch = "deepseek2", .name = "tiny", .source = "test shape: DeepSeek-V3-like MLA + YaRN x40, 1+3 layers, 16 experts in 4 groups (2 used) top-4",
     .n_vocab = 1024, .n_ctx = 163840, .n_embd = 256, .n_layer = 4, .n_head = 4, .n_head_kv = 1, .head_dim = 320,
     .head_dim_v = 256, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .rope_base = 10000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 64, .n_expert_shared = 1, .n_dense_lead = 1, .n_ff = 512,
     .expert_weights_scale = 2.5f, .q_lora_rank = 256, .kv_lora_rank = 256, .qk_nope = 128, .v_head_mla = 128,
     .n_expert_groups = 4, .n_group_used = 2, .rope_scale = 40.0f, .rope_orig_ctx = 4096, .yarn_log_mul = 0.1f},
    {.arch = "deepseek2", .name = "deepseek-v3", .source = "deepseek-ai/DeepSeek-V3 config.json (also R1, V3.1)",
     .n_vocab = 129280, .n_ctx = 163840, .n_embd = 7168, .n_layer = 61, .n_head = 128, .n_head_kv = 1, .head_dim = 576,
     .head_dim_v = 512, .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 2048, .rope_base = 10000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_expert_shared = 1, .n_dense_lead = 3, .n_ff = 18432,
     .expert_weights_scale = 2.5f, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope = 128, .v_head_mla = 128,
     .n_expert_groups = 8, .n_group_used = 4, .rope_scale = 40.0f, .rope_orig_ctx = 4096, .yarn_log_mul = 0.1f},
    {.arch = "deepseek2", .name = "kimi-k2", .source = "moonshotai/Kimi-K2-Instruct config.json",
     .n_vocab = 163840, .n_ctx = 131072, .n_embd = 7168, .n_layer = 61, .n_head = 64, .n_head_kv = 1, .head_dim = 576,
     .head_dim_v = 512, .n_expert = 384, .n_expert_used = 8, .n_ff_exp = 2048, .rope_base = 50000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_expert_shared = 1, .n_dense_lead = 1, .n_ff = 18432,
     .expert_weights_scale = 2.827f, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope = 128, .v_head_mla = 128,
     .n_expert_groups = 1, .n_group_used = 1, .rope_scale = 32.0f, .rope_orig_ctx = 4096, .yarn_log_mul = 0.1f},
    // deepseek32 (DeepSeek-V3.2): deepseek2 plus the sparse-attention indexer in every block; one
    // nextn block after the trunk.
    {.arch = "deepseek32", .name = "tiny", .source = "test shape: deepseek2 tiny + indexer (4 heads x 128, top-32), 1+3+1 layers",
     .n_vocab = 1024, .n_ctx = 163840, .n_embd = 256, .n_layer = 4, .n_head = 4, .n_head_kv = 1, .head_dim = 320,
     .head_dim_v = 256, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .rope_base = 10000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1, .n_dense_lead = 1, .n_ff = 512,
     .expert_weights_scale = 2.5f, .q_lora_rank = 256, .kv_lora_rank = 256, .qk_nope = 128, .v_head_mla = 128,
     .n_expert_groups = 4, .n_group_used = 2, .rope_scale = 40.0f, .rope_orig_ctx = 4096, .yarn_log_mul = 0.1f,
     .idx_n_head = 4, .idx_head_dim = 128, .idx_top_k = 32},
    {.arch = "deepseek32", .name = "deepseek-v3.2", .source = "deepseek-ai/DeepSeek-V3.2-Exp config.json",
     .n_vocab = 129280, .n_ctx = 163840, .n_embd = 7168, .n_layer = 61, .n_head = 128, .n_head_kv = 1, .head_dim = 576,
     .head_dim_v = 512, .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 2048, .rope_base = 10000.0f, .rms_eps = 1e-6f,
     .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1, .n_dense_lead = 3,
     .n_ff = 18432, .expert_weights_scale = 2.5f, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope = 128,
     .v_head_mla = 128, .n_expert_groups = 8, .n_group_used = 4, .rope_scale = 40.0f, .rope_orig_ctx = 4096,
     .yarn_log_mul = 0.1f, .idx_n_head = 64, .idx_head_dim = 128, .idx_top_k = 2048},
    // glm-dsa (GLM-5.x): MLA + indexer as deepseek32 (interleaved rope in the indexer too), GLM
    // routing (sigmoid + bias, no groups), no rope scaling; GLM-5.2 computes the indexer's top-k
    // in some blocks and reuses it in the others (attention.indexer.types).
    {.arch = "glm-dsa", .name = "tiny", .source = "test shape: GLM-5-like MLA + indexer (4 heads x 128, top-32), 1+3+1 layers",
     .n_vocab = 1024, .n_ctx = 202752, .n_embd = 256, .n_layer = 4, .n_head = 4, .n_head_kv = 1, .head_dim = 320,
     .head_dim_v = 256, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .rope_base = 1000000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1, .n_dense_lead = 1, .n_ff = 512,
     .expert_weights_scale = 2.5f, .q_lora_rank = 256, .kv_lora_rank = 256, .qk_nope = 128, .v_head_mla = 256,
     .idx_n_head = 4, .idx_head_dim = 128, .idx_top_k = 32},
    {.arch = "glm-dsa", .name = "tiny-5.2", .source = "test shape: glm-dsa tiny with GLM-5.2's shared indexer blocks (F F F S)",
     .n_vocab = 1024, .n_ctx = 1048576, .n_embd = 256, .n_layer = 4, .n_head = 4, .n_head_kv = 1, .head_dim = 320,
     .head_dim_v = 256, .n_expert = 16, .n_expert_used = 4, .n_ff_exp = 256, .rope_base = 1000000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1, .n_dense_lead = 1, .n_ff = 512,
     .expert_weights_scale = 2.5f, .q_lora_rank = 256, .kv_lora_rank = 256, .qk_nope = 128, .v_head_mla = 256,
     .idx_n_head = 4, .idx_head_dim = 128, .idx_top_k = 32, .idx_shared_period = 2},
    {.arch = "glm-dsa", .name = "glm-5", .source = "zai-org/GLM-5 config.json (GlmMoeDsaConfig defaults)",
     .n_vocab = 154880, .n_ctx = 202752, .n_embd = 6144, .n_layer = 78, .n_head = 64, .n_head_kv = 1, .head_dim = 576,
     .head_dim_v = 512, .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 2048, .rope_base = 1000000.0f,
     .rms_eps = 1e-5f, .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1,
     .n_dense_lead = 3, .n_ff = 12288, .expert_weights_scale = 2.5f, .q_lora_rank = 2048, .kv_lora_rank = 512,
     .qk_nope = 192, .v_head_mla = 256, .idx_n_head = 32, .idx_head_dim = 128, .idx_top_k = 2048},
    {.arch = "glm-dsa", .name = "glm-5.2", .source = "zai-org/GLM-5.2 (GLM-5 shape, 1M context, shared indexer blocks)",
     .n_vocab = 154880, .n_ctx = 1048576, .n_embd = 6144, .n_layer = 78, .n_head = 64, .n_head_kv = 1, .head_dim = 576,
     .head_dim_v = 512, .n_expert = 256, .n_expert_used = 8, .n_ff_exp = 2048, .rope_base = 1000000.0f,
     .rms_eps = 1e-5f, .default_type = STRATA_TYPE_Q4_K, .n_rot = 64, .n_nextn = 1, .n_expert_shared = 1,
     .n_dense_lead = 3, .n_ff = 12288, .expert_weights_scale = 2.5f, .q_lora_rank = 2048, .kv_lora_rank = 512,
     .qk_nope = 192, .v_head_mla = 256, .idx_n_head = 32, .idx_head_dim = 128, .idx_top_k = 2048,
     .idx_shared_period = 4},
    // gpt-oss: attention sinks, sliding-window blocks alternating with full ones, biases
    // everywhere, YaRN, softmax over the chosen experts' logits, clamped SwiGLU; the released
    // files keep the experts in MXFP4.
    {.arch = "gpt-oss", .name = "tiny", .source = "test shape: 4 layers (window 32 / full), 8 experts top-2, YaRN x32",
     .n_vocab = 1024, .n_ctx = 131072, .n_embd = 256, .n_layer = 4, .n_head = 8, .n_head_kv = 2, .head_dim = 64,
     .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 256, .rope_base = 150000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .rope_scale = 32.0f, .rope_orig_ctx = 4096, .n_swa = 32},
    {.arch = "gpt-oss", .name = "gpt-oss-20b", .source = "openai/gpt-oss-20b config.json",
     .n_vocab = 201088, .n_ctx = 131072, .n_embd = 2880, .n_layer = 24, .n_head = 64, .n_head_kv = 8, .head_dim = 64,
     .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880, .rope_base = 150000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .rope_scale = 32.0f, .rope_orig_ctx = 4096, .n_swa = 128,
     .expert_type = STRATA_TYPE_MXFP4},
    {.arch = "gpt-oss", .name = "gpt-oss-120b", .source = "openai/gpt-oss-120b config.json",
     .n_vocab = 201088, .n_ctx = 131072, .n_embd = 2880, .n_layer = 36, .n_head = 64, .n_head_kv = 8, .head_dim = 64,
     .n_expert = 128, .n_expert_used = 4, .n_ff_exp = 2880, .rope_base = 150000.0f, .rms_eps = 1e-5f,
     .default_type = STRATA_TYPE_Q8_0, .rope_scale = 32.0f, .rope_orig_ctx = 4096, .n_swa = 128,
     .expert_type = STRATA_TYPE_MXFP4},
};
#define N_PRESETS (sizeof g_presets / sizeof g_presets[0])

const struct strata_synth_preset_info *strata_synth_presets(void)
{
    static struct strata_synth_preset_info info[N_PRESETS + 1];
    for (size_t i = 0; i < N_PRESETS; i++)
        info[i] = (struct strata_synth_preset_info){g_presets[i].arch, g_presets[i].name,
                                                    g_presets[i].source};
    return info;
}

// One tensor to write: its name, shape, type and the distribution of its values.
struct synth_tensor {
    char name[96];
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];
    uint32_t type;
    float std;       // of the random values
    float mean;      // added (norm weights sit around 1)
    bool negative;   // write -|x| (ssm_a holds -exp(A_log), a decay that must stay below 0)
    float row_skew;  // F32 rows scaled by exp(row_skew * N(0,1)), one factor a row (a router's
                     // rows are its experts); 0: none
};

// Type overrides "REGEX=T,REGEX=T": compiled once, first match wins.
struct override {
    regex_t re;
    int type;
};

struct overrides {
    struct override items[64];
    int n;
};

static void overrides_free(struct overrides *ov)
{
    for (int i = 0; i < ov->n; i++) regfree(&ov->items[i].re);
    ov->n = 0;
}

static int overrides_parse(struct overrides *ov, const char *spec)
{
    ov->n = 0;
    if (!spec || !*spec) return 0;
    char *copy = strdup(spec);
    if (!copy) return STRATA_ENOMEM;
    int rc = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strrchr(item, '=');
        if (!eq || eq == item) {
            strata_log_error("synth: --type-overrides: '%s' is not REGEX=TYPE", item);
            rc = STRATA_EARG;
            break;
        }
        *eq = 0;
        int type = strata_type_from_name(eq + 1);
        if (type < 0 || !strata_type_computable((uint32_t)type)) {
            strata_log_error("synth: --type-overrides: type '%s' is unknown or not supported", eq + 1);
            rc = STRATA_EARG;
            break;
        }
        if (ov->n == (int)(sizeof ov->items / sizeof ov->items[0])) {
            strata_log_error("synth: --type-overrides: more than 64 rules");
            rc = STRATA_EARG;
            break;
        }
        if (regcomp(&ov->items[ov->n].re, item, REG_EXTENDED | REG_NOSUB) != 0) {
            strata_log_error("synth: --type-overrides: invalid regular expression '%s'", item);
            rc = STRATA_EARG;
            break;
        }
        ov->items[ov->n++].type = type;
    }
    free(copy);
    if (rc) overrides_free(ov);
    return rc;
}

static int overrides_type(const struct overrides *ov, const char *name, int dflt)
{
    for (int i = 0; i < ov->n; i++)
        if (regexec(&ov->items[i].re, name, 0, NULL, 0) == 0) return ov->items[i].type;
    return dflt;
}

// ---- deepseek2 / deepseek32 / glm-dsa (multi-head latent attention) and gpt-oss ------------------

// Tensors of an MLA model (llama.cpp's deepseek2, deepseek32, glm-dsa loaders; shapes in GGUF
// order). Per block: q through a low-rank pair with an RMS norm between; one kv projection
// giving the latent (normed) and a shared rope key; the per-head key absorption attn_k_b
// [qk_nope, kv_lora, H] and value expansion attn_v_b [kv_lora, v_head, H]. deepseek32 and glm-dsa
// add the indexer. nextn blocks follow the trunk as the converters write them.
static int mla_tensors(struct strata_schema *tl, const struct preset *p, uint32_t n_vocab, uint32_t n_layer,
                       uint32_t n_expert)
{
    const uint64_t E = p->n_embd, H = p->n_head, R = p->n_rot;
    const uint64_t QL = p->q_lora_rank, KVL = p->kv_lora_rank, NOPE = p->qk_nope, VH = p->v_head_mla;
    const uint64_t IH = p->idx_n_head, ID = p->idx_head_dim;
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc = strata_schema_add(tl, "token_embd.weight", false, 0.0f, 1.0f, 2, E, n_vocab, 1);
    for (uint32_t l = 0; l < n_layer + p->n_nextn && rc == 0; l++) {
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_schema_add(tl, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_q_a_norm.weight"), true, 1.0f, 0.1f, 1, QL, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_kv_a_norm.weight"), true, 1.0f, 0.1f, 1, KVL, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_q_a.weight"), false, 0.0f, s_in, 2, E, QL, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_q_b.weight"), false, 0.0f, 1.0f / sqrtf((float)QL), 2, QL, H * (NOPE + R), 1)) ||
            (rc = strata_schema_add(tl, NM("attn_kv_a_mqa.weight"), false, 0.0f, s_in, 2, E, KVL + R, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_k_b.weight"), false, 0.0f, 1.0f / sqrtf((float)NOPE), 3, NOPE, KVL, H)) ||
            (rc = strata_schema_add(tl, NM("attn_v_b.weight"), false, 0.0f, 1.0f / sqrtf((float)KVL), 3, KVL, VH, H)) ||
            (rc = strata_schema_add(tl, NM("attn_output.weight"), false, 0.0f, 1.0f / sqrtf((float)(H * VH)), 2, H * VH, E, 1)) ||
            (rc = strata_schema_add(tl, NM("ffn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)))
            break;
        if (IH &&
            ((rc = strata_schema_add(tl, NM("indexer.k_norm.weight"), true, 1.0f, 0.1f, 1, ID, 1, 1)) ||
             (rc = strata_schema_add(tl, NM("indexer.k_norm.bias"), true, 0.0f, 0.1f, 1, ID, 1, 1)) ||
             (rc = strata_schema_add(tl, NM("indexer.proj.weight"), false, 0.0f, s_in, 2, E, IH, 1)) ||
             (rc = strata_schema_add(tl, NM("indexer.attn_k.weight"), false, 0.0f, s_in, 2, E, ID, 1)) ||
             (rc = strata_schema_add(tl, NM("indexer.attn_q_b.weight"), false, 0.0f, 1.0f / sqrtf((float)QL), 2, QL, IH * ID, 1))))
            break;
        if ((rc = strata_schema_glm_ffn(tl, l, E, p->n_dense_lead, p->n_ff, p->n_ff_exp,
                                        (uint64_t)p->n_ff_exp * p->n_expert_shared, n_expert, n_layer)))
            break;
#undef NM
    }
    if (rc == 0) rc = strata_schema_add(tl, "output_norm.weight", true, 1.0f, 0.1f, 1, E, 1, 1);
    if (rc == 0) rc = strata_schema_add(tl, "output.weight", false, 0.0f, s_in, 2, E, n_vocab, 1);
    return rc;
}

// Tensors of a gpt-oss model (llama.cpp's openai-moe loader): biases on q/k/v/output, the
// router and every expert matrix ([F or E, X] per expert set), one sink logit per head.
static int gptoss_tensors(struct strata_schema *tl, const struct preset *p, uint32_t n_vocab, uint32_t n_layer,
                          uint32_t n_expert)
{
    const uint64_t E = p->n_embd, D = p->head_dim, H = p->n_head, Hkv = p->n_head_kv;
    const uint64_t F = p->n_ff_exp, X = n_expert;
    const float s_in = 1.0f / sqrtf((float)E);
    char n[96];
    int rc = strata_schema_add(tl, "token_embd.weight", false, 0.0f, 1.0f, 2, E, n_vocab, 1);
    for (uint32_t l = 0; l < n_layer && rc == 0; l++) {
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_schema_add(tl, NM("attn_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("post_attention_norm.weight"), true, 1.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_q.weight"), false, 0.0f, s_in, 2, E, H * D, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_k.weight"), false, 0.0f, s_in, 2, E, Hkv * D, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_v.weight"), false, 0.0f, s_in, 2, E, Hkv * D, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_q.bias"), true, 0.0f, 0.1f, 1, H * D, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_k.bias"), true, 0.0f, 0.1f, 1, Hkv * D, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_v.bias"), true, 0.0f, 0.1f, 1, Hkv * D, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_output.weight"), false, 0.0f, 1.0f / sqrtf((float)(H * D)), 2, H * D, E, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_output.bias"), true, 0.0f, 0.1f, 1, E, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("attn_sinks.weight"), true, 0.0f, 1.0f, 1, H, 1, 1)) ||
            (rc = strata_schema_moe(tl, l, E, F, X)) ||
            (rc = strata_schema_add(tl, NM("ffn_gate_inp.bias"), true, 0.0f, 0.5f, 1, X, 1, 1)) ||
            (rc = strata_schema_add(tl, NM("ffn_gate_exps.bias"), true, 0.0f, 0.1f, 2, F, X, 1)) ||
            (rc = strata_schema_add(tl, NM("ffn_up_exps.bias"), true, 0.0f, 0.1f, 2, F, X, 1)) ||
            (rc = strata_schema_add(tl, NM("ffn_down_exps.bias"), true, 0.0f, 0.1f, 2, E, X, 1)))
            break;
#undef NM
    }
    if (rc == 0) rc = strata_schema_add(tl, "output_norm.weight", true, 1.0f, 0.1f, 1, E, 1, 1);
    if (rc == 0) rc = strata_schema_add(tl, "output.weight", false, 0.0f, s_in, 2, E, n_vocab, 1);
    return rc;
}

// Keys of the MLA architectures and gpt-oss, as llama.cpp's converters write them.
static int write_mla_gptoss_hparams(struct strata_gguf_writer *w, const struct preset *p, uint32_t n_layer)
{
    char k[128];
    const char *a = p->arch;
    int rc = 0;
#define K(s) (snprintf(k, sizeof k, "%s." s, a), k)
    if (p->rope_scale > 0.0f &&
        ((rc = strata_gguf_writer_set_str(w, K("rope.scaling.type"), "yarn")) ||
         (rc = strata_gguf_writer_set_f32(w, K("rope.scaling.factor"), p->rope_scale)) ||
         (rc = strata_gguf_writer_set_u32(w, K("rope.scaling.original_context_length"), p->rope_orig_ctx))))
        return rc;
    if (p->yarn_log_mul > 0.0f &&
        (rc = strata_gguf_writer_set_f32(w, K("rope.scaling.yarn_log_multiplier"), p->yarn_log_mul)))
        return rc;
    if (p->n_swa) return strata_gguf_writer_set_u32(w, K("attention.sliding_window"), p->n_swa);
    if ((rc = strata_gguf_writer_set_u32(w, K("attention.q_lora_rank"), p->q_lora_rank)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.kv_lora_rank"), p->kv_lora_rank)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.key_length_mla"), p->qk_nope + p->n_rot)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.value_length_mla"), p->v_head_mla)) ||
        (rc = strata_gguf_writer_set_u32(w, K("expert_shared_count"), p->n_expert_shared)) ||
        (rc = strata_gguf_writer_set_u32(w, K("leading_dense_block_count"), p->n_dense_lead)) ||
        (rc = strata_gguf_writer_set_u32(w, K("feed_forward_length"), p->n_ff)) ||
        (rc = strata_gguf_writer_set_f32(w, K("expert_weights_scale"), p->expert_weights_scale)) ||
        (rc = strata_gguf_writer_set_bool(w, K("expert_weights_norm"), true)) ||
        (rc = strata_gguf_writer_set_u32(w, K("expert_gating_func"), 2)))
        return rc;
    if (p->n_nextn && (rc = strata_gguf_writer_set_u32(w, K("nextn_predict_layers"), p->n_nextn))) return rc;
    if (p->n_expert_groups &&
        ((rc = strata_gguf_writer_set_u32(w, K("expert_group_count"), p->n_expert_groups)) ||
         (rc = strata_gguf_writer_set_u32(w, K("expert_group_used_count"), p->n_group_used))))
        return rc;
    if (p->idx_n_head &&
        ((rc = strata_gguf_writer_set_u32(w, K("attention.indexer.head_count"), p->idx_n_head)) ||
         (rc = strata_gguf_writer_set_u32(w, K("attention.indexer.key_length"), p->idx_head_dim)) ||
         (rc = strata_gguf_writer_set_u32(w, K("attention.indexer.top_k"), p->idx_top_k))))
        return rc;
    if (p->idx_shared_period) {
        // GLM-5.2's pattern: the first two blocks compute their own top-k, then one in every
        // idx_shared_period; the others reuse the last computed one.
        bool types[1024];
        if (n_layer > 1024) return STRATA_EARG;
        for (uint32_t l = 0; l < n_layer; l++) types[l] = l < 2 || (l - 2) % p->idx_shared_period == 0;
        if ((rc = strata_gguf_writer_set_arr(w, K("attention.indexer.types"), GGUF_TYPE_BOOL, types, n_layer))) return rc;
    }
#undef K
    return 0;
}

// Keys of the newer architectures (the ones llama.cpp requires).
static int write_arch_hparams(struct strata_gguf_writer *w, const struct preset *p)
{
    char k[128];
    const char *a = p->arch;
    int rc = 0;
#define K(s) (snprintf(k, sizeof k, "%s." s, a), k)
    if (strcmp(a, "glm4moe") == 0) {
        if ((rc = strata_gguf_writer_set_u32(w, K("expert_shared_count"), p->n_expert_shared)) ||
            (rc = strata_gguf_writer_set_u32(w, K("leading_dense_block_count"), p->n_dense_lead)) ||
            (rc = strata_gguf_writer_set_u32(w, K("feed_forward_length"), p->n_ff)) ||
            (rc = strata_gguf_writer_set_f32(w, K("expert_weights_scale"), p->expert_weights_scale)) ||
            (rc = strata_gguf_writer_set_bool(w, K("expert_weights_norm"), true)) ||
            (rc = strata_gguf_writer_set_u32(w, K("expert_gating_func"), 2)) ||
            (rc = strata_gguf_writer_set_u32(w, K("nextn_predict_layers"), p->n_nextn)))
            return rc;
    } else if (p->ssm_d_state) {
        if ((rc = strata_gguf_writer_set_u32(w, K("ssm.conv_kernel"), p->ssm_d_conv)) ||
            (rc = strata_gguf_writer_set_u32(w, K("ssm.state_size"), p->ssm_d_state)) ||
            (rc = strata_gguf_writer_set_u32(w, K("ssm.group_count"), p->ssm_n_group)) ||
            (rc = strata_gguf_writer_set_u32(w, K("ssm.time_step_rank"), p->ssm_dt_rank)) ||
            (rc = strata_gguf_writer_set_u32(w, K("ssm.inner_size"), p->ssm_d_state * p->ssm_dt_rank)) ||
            (rc = strata_gguf_writer_set_u32(w, K("full_attention_interval"), p->full_attn_interval)) ||
            (rc = strata_gguf_writer_set_u32(w, K("expert_shared_feed_forward_length"), p->n_ff_shexp)))
            return rc;
        if (p->rope_sections[0] &&
            (rc = strata_gguf_writer_set_arr(w, K("rope.dimension_sections"), GGUF_TYPE_INT32, p->rope_sections, 4)))
            return rc;
    }
#undef K
    return 0;
}

// llama.cpp's LLAMA_FTYPE for a file whose weight matrices are mostly `type` (the value its
// loader guesses from the most common type when general.file_type is absent; K-quants of 3 to 5
// bits are the "_M" mixes, MXFP4 the MoE mix of llama-quantize). -1 for types without one.
int strata_synth_llama_ftype(uint32_t type)
{
    static const struct {
        uint32_t type;
        int ftype;
    } map[] = {
        {STRATA_TYPE_F32, 0},      {STRATA_TYPE_F16, 1},      {STRATA_TYPE_Q4_0, 2},
        {STRATA_TYPE_Q4_1, 3},     {STRATA_TYPE_Q8_0, 7},     {STRATA_TYPE_Q5_0, 8},
        {STRATA_TYPE_Q5_1, 9},     {STRATA_TYPE_Q2_K, 10},    {STRATA_TYPE_Q3_K, 12},
        {STRATA_TYPE_Q4_K, 15},    {STRATA_TYPE_Q5_K, 17},    {STRATA_TYPE_Q6_K, 18},
        {STRATA_TYPE_IQ2_XXS, 19}, {STRATA_TYPE_IQ2_XS, 20},  {STRATA_TYPE_IQ3_XXS, 23},
        {STRATA_TYPE_IQ1_S, 24},   {STRATA_TYPE_IQ4_NL, 25},  {STRATA_TYPE_IQ3_S, 26},
        {STRATA_TYPE_IQ2_S, 28},   {STRATA_TYPE_IQ4_XS, 30},  {STRATA_TYPE_IQ1_M, 31},
        {STRATA_TYPE_BF16, 32},    {STRATA_TYPE_TQ1_0, 36},   {STRATA_TYPE_TQ2_0, 37},
        {STRATA_TYPE_MXFP4, 38},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (map[i].type == type) return map[i].ftype;
    }
    return -1;
}

// gguf-py's model_weight_count_rounded_notation(n, min_digits=2): "30B", "3.3B", "12M", "0.5K".
static void rounded_notation(char *out, size_t cap, uint64_t n)
{
    double v = (double)n;
    const char *suffix = "K";
    double scaled = v * 1e-3;
    if (v > 1e12) scaled = v * 1e-12, suffix = "T";
    else if (v > 1e9) scaled = v * 1e-9, suffix = "B";
    else if (v > 1e6) scaled = v * 1e-6, suffix = "M";
    char digits[32];
    snprintf(digits, sizeof digits, "%.0f", scaled);  // Python's round(): half to even, as %.0f
    const char *d = digits;
    while (*d == '0') d++;
    int fix = 2 - (int)strlen(d);
    snprintf(out, cap, "%.*f%s", fix > 0 ? fix : 0, scaled, suffix);
}

// general.file_type from the type holding most weight-matrix elements, general.size_label as
// gguf-py counts it ("{experts}x{shared + one expert's parameters}" for MoE files).
static int write_general_sizes(struct strata_gguf_writer *w, const struct synth_tensor *items, size_t n)
{
    uint64_t per_type[STRATA_TYPE_COUNT] = {0}, shared = 0, expert = 0, expert_sum = 0, n_exp_tensors = 0;
    for (size_t i = 0; i < n; i++) {
        const struct synth_tensor *t = &items[i];
        uint64_t size = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) size *= t->ne[d];
        if (t->n_dims > 1 && t->type < STRATA_TYPE_COUNT) per_type[t->type] += size;
        if (strstr(t->name, "_exps.") && t->n_dims >= 3) {
            uint64_t count = t->ne[strstr(t->name, ".bias") ? t->n_dims - 2 : t->n_dims - 1];
            expert += size / count;
            expert_sum += count;
            n_exp_tensors++;
        } else {
            shared += size;
        }
    }
    uint32_t mostly = STRATA_TYPE_F32;
    for (uint32_t ty = 0; ty < STRATA_TYPE_COUNT; ty++) {
        if (per_type[ty] > per_type[mostly]) mostly = ty;
    }
    int ftype = strata_synth_llama_ftype(mostly);
    char label[64], count[32];
    uint64_t n_expert = n_exp_tensors ? expert_sum / n_exp_tensors : 0;
    rounded_notation(count, sizeof count, n_expert ? shared + expert : shared);
    if (n_expert) snprintf(label, sizeof label, "%llux%s", (unsigned long long)n_expert, count);
    else snprintf(label, sizeof label, "%s", count);
    int rc = strata_gguf_writer_set_str(w, "general.size_label", label);
    if (rc == 0 && ftype >= 0) rc = strata_gguf_writer_set_u32(w, "general.file_type", (uint32_t)ftype);
    return rc;
}

static int write_hparams(struct strata_gguf_writer *w, const struct preset *p, const char *model_name,
                         uint32_t n_layer, uint32_t n_expert)
{
    char k[128];
    const char *a = p->arch;
#define K(s) (snprintf(k, sizeof k, "%s." s, a), k)
    int rc = 0;
    if ((rc = strata_gguf_writer_set_str(w, "general.architecture", a)) ||
        (rc = strata_gguf_writer_set_str(w, "general.name", model_name)) ||
        (rc = strata_gguf_writer_set_u32(w, K("context_length"), p->n_ctx)) ||
        (rc = strata_gguf_writer_set_u32(w, K("embedding_length"), p->n_embd)) ||
        (rc = strata_gguf_writer_set_u32(w, K("block_count"), n_layer + p->n_nextn)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.head_count"), p->n_head)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.head_count_kv"), p->n_head_kv)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.key_length"), p->head_dim)) ||
        (rc = strata_gguf_writer_set_u32(w, K("attention.value_length"), p->head_dim_v ? p->head_dim_v : p->head_dim)) ||
        (rc = strata_gguf_writer_set_f32(w, K("attention.layer_norm_rms_epsilon"), p->rms_eps)) ||
        (rc = strata_gguf_writer_set_f32(w, K("rope.freq_base"), p->rope_base)) ||
        (rc = strata_gguf_writer_set_u32(w, K("rope.dimension_count"), p->n_rot ? p->n_rot : p->head_dim)) ||
        (rc = strata_gguf_writer_set_u32(w, K("expert_count"), n_expert)) ||
        (rc = strata_gguf_writer_set_u32(w, K("expert_used_count"), p->n_expert_used)) ||
        (rc = strata_gguf_writer_set_u32(w, K("expert_feed_forward_length"), p->n_ff_exp)))
        return rc;
#undef K
    if (p->kv_lora_rank || p->n_swa) return write_mla_gptoss_hparams(w, p, n_layer);
    return write_arch_hparams(w, p);
}

// The type llama.cpp's quantizer writes when a row of n_in does not fit the chosen type's block
// (llama-quant.cpp tensor_type_fallback): MLA's attn_k_b rows of qk_nope (128) under a K-quant.
static uint32_t synth_type_fallback(uint32_t type, uint64_t n_in)
{
    if (n_in % strata_type_traits(type)->block_size == 0) return type;
    switch (type) {
    case STRATA_TYPE_IQ1_S: case STRATA_TYPE_IQ1_M: case STRATA_TYPE_IQ2_XXS: case STRATA_TYPE_IQ2_XS:
    case STRATA_TYPE_IQ2_S: case STRATA_TYPE_IQ3_XXS: case STRATA_TYPE_IQ3_S: case STRATA_TYPE_IQ4_XS:
        type = STRATA_TYPE_IQ4_NL; break;
    case STRATA_TYPE_Q2_K: case STRATA_TYPE_Q3_K: type = STRATA_TYPE_Q4_0; break;
    case STRATA_TYPE_Q4_K: type = STRATA_TYPE_Q5_0; break;
    case STRATA_TYPE_Q5_K: type = STRATA_TYPE_Q5_1; break;
    case STRATA_TYPE_Q6_K: type = STRATA_TYPE_Q8_0; break;
    default: return type;
    }
    return n_in % strata_type_traits(type)->block_size == 0 ? type : STRATA_TYPE_F16;
}

static uint64_t hash_name(uint64_t seed, const char *s)
{
    uint64_t h = seed ^ 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

struct progress {
    bool on;
    uint64_t total, done;
    double start, last;
};

static void progress_show(struct progress *pr, bool final)
{
    if (!pr->on) return;
    double t = strata_now();
    if (!final && t - pr->last < 0.2) return;
    pr->last = t;
    double frac = pr->total ? (double)pr->done / (double)pr->total : 1.0;
    int bar = (int)(frac * 30);
    double mbs = pr->done / 1048576.0 / (t - pr->start + 1e-9);
    fprintf(stderr, "\r[%.*s%*s] %5.1f%%  %.0f / %.0f MiB  %.0f MiB/s", bar,
            "##############################", 30 - bar, "", frac * 100.0, pr->done / 1048576.0,
            pr->total / 1048576.0, mbs);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

// Generate and stream one tensor's data in chunks of whole rows.
static int write_tensor_data(struct strata_gguf_writer *w, int index, const struct synth_tensor *t,
                             uint64_t seed, void *buf, uint64_t buf_bytes, float *fbuf,
                             struct progress *pr)
{
    const uint64_t row_elems = t->ne[0];
    const uint64_t row_bytes = strata_type_row_bytes(t->type, row_elems);
    uint64_t n_rows = t->ne[1] * t->ne[2] * t->ne[3];
    uint64_t rows_per_chunk = buf_bytes / row_bytes;
    if (rows_per_chunk == 0) rows_per_chunk = 1;
    uint64_t rng = hash_name(seed, t->name);
    uint64_t skew_rng = hash_name(seed ^ 0x736b6577ull, t->name);
    int rc = strata_gguf_writer_tensor_begin(w, index);
    for (uint64_t r = 0; r < n_rows && rc == 0; r += rows_per_chunk) {
        uint64_t nr = n_rows - r < rows_per_chunk ? n_rows - r : rows_per_chunk;
        if (t->mean != 0.0f) {
            // Only F32 tensors (norms) have a mean; their rows are short.
            for (uint64_t i = 0; i < nr * row_elems; i++) {
                fbuf[i] = t->mean + t->std * strata_rng_normal(&rng);
                if (t->negative) fbuf[i] = -fabsf(fbuf[i]);
            }
            memcpy(buf, fbuf, nr * row_bytes);
        } else {
            rc = strata_quant_random(t->type, &rng, buf, (int64_t)(nr * row_elems), t->std);
            if (rc) {
                strata_log_error("synth: cannot synthesise type %s", strata_type_name(t->type));
                return rc;
            }
            if (t->row_skew > 0.0f) {
                // The factors come from their own stream, so the values they scale are the
                // bytes the same seed writes without a skew.
                for (uint64_t i = 0; i < nr; i++) {
                    const float f = expf(t->row_skew * strata_rng_normal(&skew_rng));
                    float *row = (float *)buf + i * row_elems;
                    for (uint64_t j = 0; j < row_elems; j++) row[j] *= f;
                }
            }
        }
        rc = strata_gguf_writer_write(w, buf, nr * row_bytes);
        pr->done += nr * row_bytes;
        progress_show(pr, false);
    }
    return rc;
}

// The hyperparameters a file written from preset p declares (write_hparams), for its tensor
// schema (model/schema.c: the loaders check files against the same list).
static void preset_hparams(const struct preset *p, uint32_t n_vocab, uint32_t n_layer, uint32_t n_expert,
                           struct strata_hparams *hp)
{
    memset(hp, 0, sizeof *hp);
    hp->arch = (enum strata_arch)strata_arch_from_name(p->arch);
    hp->n_vocab = n_vocab;
    hp->n_ctx_train = p->n_ctx;
    hp->n_embd = p->n_embd;
    hp->n_layer = n_layer;
    hp->n_layer_nextn = p->n_nextn;
    hp->n_layer_all = n_layer + p->n_nextn;
    hp->n_head = p->n_head;
    hp->n_head_kv = p->n_head_kv;
    hp->head_dim_k = p->head_dim;
    hp->head_dim_v = p->head_dim_v ? p->head_dim_v : p->head_dim;
    hp->n_rot = p->n_rot ? p->n_rot : p->head_dim;
    hp->n_expert = n_expert;
    hp->n_expert_used = p->n_expert_used;
    hp->n_ff_exp = p->n_ff_exp;
    hp->n_ff = p->n_ff;
    hp->n_layer_dense_lead = p->n_dense_lead;
    hp->n_expert_shared = p->n_expert_shared;
    hp->n_ff_shexp = p->n_expert_shared ? p->n_ff_exp * p->n_expert_shared : p->n_ff_shexp;
    hp->ssm_d_conv = p->ssm_d_conv;
    hp->ssm_d_state = p->ssm_d_state;
    hp->ssm_n_group = p->ssm_n_group;
    hp->ssm_dt_rank = p->ssm_dt_rank;
    hp->ssm_d_inner = p->ssm_d_state * p->ssm_dt_rank;
    hp->full_attn_interval = p->full_attn_interval;
}

int strata_synth(const struct strata_synth_opts *o)
{
    const struct preset *p = NULL;
    for (size_t i = 0; i < N_PRESETS; i++)
        if (strcmp(g_presets[i].arch, o->arch) == 0 && strcmp(g_presets[i].name, o->preset) == 0)
            p = &g_presets[i];
    if (!p) {
        if (strata_arch_from_name(o->arch) < 0)
            strata_log_error("synth: unknown architecture '%s' (see strata synth --list)", o->arch);
        else
            strata_log_error("synth: no preset '%s' for %s (see strata synth --list)", o->preset, o->arch);
        return STRATA_EARG;
    }
    struct preset custom;
    if (o->idx_top_k > 0) {  // a small top-k makes short test sequences sparse
        if (!p->idx_n_head) {
            strata_log_error("synth: --indexer-top-k: %s has no sparse-attention indexer", o->arch);
            return STRATA_EARG;
        }
        custom = *p;
        custom.idx_top_k = (uint32_t)o->idx_top_k;
        p = &custom;
    }
    uint32_t n_layer = o->n_layer > 0 ? (uint32_t)o->n_layer : p->n_layer;
    uint32_t n_expert = o->n_expert > 0 ? (uint32_t)o->n_expert : p->n_expert;
    if (n_layer <= p->n_dense_lead) {  // the loaders want a MoE layer after the dense ones
        strata_log_error("synth: --layers %u leaves no MoE layer after the preset's %u leading dense layers: use at "
                         "least %u", n_layer, p->n_dense_lead, p->n_dense_lead + 1);
        return STRATA_EARG;
    }
    if (p->full_attn_interval && n_layer < p->full_attn_interval) {  // the loader wants a full-attention layer
        strata_log_error("synth: --layers %u is below the preset's full-attention interval (one full-attention "
                         "layer in %u): use at least %u", n_layer, p->full_attn_interval, p->full_attn_interval);
        return STRATA_EARG;
    }
    if (n_expert < p->n_expert_used) {
        strata_log_error("synth: --experts %u is below the preset's experts used per token (%u)",
                         n_expert, p->n_expert_used);
        return STRATA_EARG;
    }
    if (p->n_expert_groups > 1 && (n_expert % p->n_expert_groups || n_expert / p->n_expert_groups < 2 ||
                                   p->n_group_used * (n_expert / p->n_expert_groups) < p->n_expert_used)) {
        strata_log_error("synth: --experts %u does not split into the preset's %u expert groups (%u used, %u experts "
                         "per token): use a multiple of %u of at least %u",
                         n_expert, p->n_expert_groups, p->n_group_used, p->n_expert_used, p->n_expert_groups,
                         2 * p->n_expert_groups > p->n_expert_used * p->n_expert_groups / p->n_group_used
                             ? 2 * p->n_expert_groups
                             : p->n_expert_used * p->n_expert_groups / p->n_group_used);
        return STRATA_EARG;
    }
    int wt = o->type >= 0 ? o->type : (int)p->default_type;
    if (!strata_type_computable((uint32_t)wt)) {
        strata_log_error("synth: type %s is not supported for weights", strata_type_name((uint32_t)wt));
        return STRATA_EARG;
    }

    struct overrides ov;
    int rc = overrides_parse(&ov, o->type_overrides);
    if (rc) return rc;

    struct strata_gguf_writer *w = strata_gguf_writer_new();
    struct strata_schema sch = {0};
    struct synth_tensor *items = NULL;
    void *buf = NULL;
    float *fbuf = NULL;
    if (!w) {
        rc = STRATA_ENOMEM;
        goto done;
    }
    char model_name[160];
    snprintf(model_name, sizeof model_name, "strata-synth %s %s", p->name, strata_type_name((uint32_t)wt));
    if ((rc = write_hparams(w, p, model_name, n_layer, n_expert))) goto done;
    // general.* as convert_hf_to_gguf.py writes them; file_type and size_label depend on the
    // tensors and are filled in once they are known (a key set again keeps its place)
    if ((rc = strata_gguf_writer_set_str(w, "general.type", "model")) ||
        (rc = strata_gguf_writer_set_str(w, "general.basename", "strata-synth")) ||
        (rc = strata_gguf_writer_set_str(w, "general.finetune", p->name)) ||
        (rc = strata_gguf_writer_set_str(w, "general.size_label", "")) ||
        (rc = strata_gguf_writer_set_u32(w, "general.quantization_version", 2)) ||
        (rc = strata_gguf_writer_set_u32(w, "general.file_type", 0)))
        goto done;
    // a skewed file says so (strata inspect shows it; loaders ignore keys they do not know)
    if (o->route_skew > 0.0f && (rc = strata_gguf_writer_set_f32(w, "strata.synth.route_skew", o->route_skew)))
        goto done;

    uint32_t n_vocab = o->n_vocab > 0 ? (uint32_t)o->n_vocab : p->n_vocab;
    if (o->tokenizer_json) {
        // Real files pad the vocabulary to the model's embedding rows (151936 for Qwen3) with
        // unused tokens; a preset of a released model does the same.
        struct strata_hf_import_opts io = {.pre = NULL, .n_vocab_min = n_vocab};
        rc = strata_tokenizer_import_hf_ex(w, o->tokenizer_json, o->chat_template, &io, &n_vocab);
    }
    else
        rc = strata_tokenizer_write_builtin(w, n_vocab);
    if (rc) goto done;

    if (p->kv_lora_rank) {
        rc = mla_tensors(&sch, p, n_vocab, n_layer, n_expert);
    } else if (p->n_swa) {
        rc = gptoss_tensors(&sch, p, n_vocab, n_layer, n_expert);
    } else {
        struct strata_hparams hp;
        preset_hparams(p, n_vocab, n_layer, n_expert, &hp);
        const struct strata_schema_opts so = {.qk_norm = p->qk_norm};
        rc = strata_schema_build(&hp, &so, &sch);
    }
    if (rc) goto done;
    items = calloc(sch.n ? sch.n : 1, sizeof *items);
    if (!items) {
        rc = STRATA_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < sch.n; i++) {
        const struct strata_tensor_spec *sp = &sch.items[i];
        struct synth_tensor *t = &items[i];
        snprintf(t->name, sizeof t->name, "%s", sp->name);
        t->n_dims = sp->n_dims;
        memcpy(t->ne, sp->ne, sizeof t->ne);
        t->type = sp->f32 ? STRATA_TYPE_F32 : (uint32_t)wt;
        t->mean = sp->mean;
        t->std = sp->std;
        t->negative = sp->negative;
        static const char router[] = ".ffn_gate_inp.weight";
        const size_t nl = strlen(t->name), sl = sizeof router - 1;
        if (o->route_skew > 0.0f && t->n_dims == 2 && nl > sl && strcmp(t->name + nl - sl, router) == 0)
            t->row_skew = o->route_skew;
    }

    uint64_t total = 0, max_row = 0;
    for (size_t i = 0; i < sch.n; i++) {
        struct synth_tensor *t = &items[i];
        const int ot = t->n_dims > 1 && strstr(t->name, ".bias") ? -1 : overrides_type(&ov, t->name, -1);
        if (ot >= 0 && t->n_dims == 1 && ot != STRATA_TYPE_F32) {
            // Norms and biases are F32 in every real converter and in strata's loader.
            strata_log_error("synth: --type-overrides: '%s' is a norm or bias and stays F32", t->name);
            rc = STRATA_EARG;
            goto done;
        }
        if (ot < 0 && o->type < 0 && p->expert_type && strstr(t->name, "_exps.weight")) t->type = p->expert_type;
        if (ot >= 0) t->type = (uint32_t)ot;
        if (t->n_dims > 1) t->type = synth_type_fallback(t->type, t->ne[0]);
        if (t->row_skew > 0.0f && t->type != STRATA_TYPE_F32) {
            strata_log_error("synth: --route-skew scales F32 routers; '%s' is %s", t->name,
                             strata_type_name(t->type));
            rc = STRATA_EARG;
            goto done;
        }
        const struct strata_type_traits *tr = strata_type_traits(t->type);
        if (t->ne[0] % tr->block_size) {
            strata_log_error("synth: tensor '%s' has rows of %llu, not a multiple of %s's block of %u",
                             t->name, (unsigned long long)t->ne[0], tr->name, tr->block_size);
            rc = STRATA_EARG;
            goto done;
        }
        int idx = strata_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
        if (idx < 0) {
            rc = idx;
            goto done;
        }
        total += strata_gguf_writer_tensor_bytes(w, idx);
        uint64_t rb = strata_type_row_bytes(t->type, t->ne[0]);
        if (rb > max_row) max_row = rb;
        if (t->ne[0] * 4 > max_row) max_row = t->ne[0] * 4;
    }

    if ((rc = write_general_sizes(w, items, sch.n))) goto done;

    const uint64_t chunk = 8ull << 20;
    uint64_t buf_bytes = max_row > chunk ? max_row : chunk;
    buf = malloc(buf_bytes);
    fbuf = malloc(buf_bytes);
    if (!buf || !fbuf) {
        strata_log_error("synth: out of memory for a %llu-byte chunk", (unsigned long long)buf_bytes);
        rc = STRATA_ENOMEM;
        goto done;
    }
    if ((rc = strata_gguf_writer_open(w, o->out_path))) goto done;
    struct progress pr = {o->progress, total, 0, strata_now(), 0};
    for (size_t i = 0; i < sch.n && rc == 0; i++)
        rc = write_tensor_data(w, (int)i, &items[i], o->seed, buf, buf_bytes, fbuf, &pr);
    if (rc == 0) rc = strata_gguf_writer_finish(w);
    progress_show(&pr, true);

done:
    if (rc && o->out_path) unlink(o->out_path);
    strata_gguf_writer_free(w);
    overrides_free(&ov);
    strata_schema_free(&sch);
    free(items);
    free(buf);
    free(fbuf);
    return rc;
}
