// Hyperparameters from GGUF metadata ("<arch>.<key>"), with the defaults llama.cpp applies.
#include "model/arch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/log.h"

static const char *const g_arch_names[STRATA_ARCH_COUNT] = {
    [STRATA_ARCH_QWEN3MOE] = "qwen3moe",
    [STRATA_ARCH_GLM4MOE] = "glm4moe",
    [STRATA_ARCH_QWEN3NEXT] = "qwen3next",
    [STRATA_ARCH_QWEN35MOE] = "qwen35moe",
    [STRATA_ARCH_DEEPSEEK2] = "deepseek2",
    [STRATA_ARCH_DEEPSEEK32] = "deepseek32",
    [STRATA_ARCH_GLM_DSA] = "glm-dsa",
    [STRATA_ARCH_GPT_OSS] = "gpt-oss",
};

const char *strata_arch_name(enum strata_arch arch)
{
    return (unsigned)arch < STRATA_ARCH_COUNT ? g_arch_names[arch] : "?";
}

int strata_arch_from_name(const char *name)
{
    for (int i = 0; i < STRATA_ARCH_COUNT; i++)
        if (strcmp(g_arch_names[i], name) == 0) return i;
    return -1;
}

// "<arch>.<key>" into buf.
static const char *akey(char *buf, size_t cap, const struct strata_hparams *hp, const char *key)
{
    snprintf(buf, cap, "%s.%s", strata_arch_name(hp->arch), key);
    return buf;
}

static int get_u32(const struct strata_gguf_file *f, const struct strata_hparams *hp, const char *key,
                   uint32_t *out, bool required)
{
    char k[128];
    int rc = strata_gguf_get_u32(f, akey(k, sizeof k, hp, key), out);
    if (rc == -ENOENT && required) {
        strata_log_error("hparams: %s: missing required key '%s'", f->path, k);
        return STRATA_EFORMAT;
    }
    return rc == -ENOENT ? 0 : rc;
}

static int get_f32(const struct strata_gguf_file *f, const struct strata_hparams *hp, const char *key,
                   float *out, bool required)
{
    char k[128];
    int rc = strata_gguf_get_f32(f, akey(k, sizeof k, hp, key), out);
    if (rc == -ENOENT && required) {
        strata_log_error("hparams: %s: missing required key '%s'", f->path, k);
        return STRATA_EFORMAT;
    }
    return rc == -ENOENT ? 0 : rc;
}

static int get_bool(const struct strata_gguf_file *f, const struct strata_hparams *hp, const char *key, bool *out)
{
    char k[128];
    int rc = strata_gguf_get_bool(f, akey(k, sizeof k, hp, key), out);
    return rc == -ENOENT ? 0 : rc;
}

static int bad(const struct strata_gguf_file *f, const char *what, uint64_t v)
{
    strata_log_error("hparams: %s: %s (%llu)", f->path, what, (unsigned long long)v);
    return STRATA_EFORMAT;
}

bool strata_hparams_is_recurrent(const struct strata_hparams *hp, uint32_t l)
{
    if (hp->arch != STRATA_ARCH_QWEN3NEXT && hp->arch != STRATA_ARCH_QWEN35MOE) return false;
    return l < hp->n_layer && (l + 1) % hp->full_attn_interval != 0;
}

// glm4moe: leading dense blocks, shared experts, sigmoid routing with weight norm and scale.
static int load_glm4moe(struct strata_hparams *hp, const struct strata_gguf_file *f)
{
    int rc;
    hp->expert_gating = 0;
    hp->expert_weights_norm = false;  // llama.cpp's default for this architecture
    if ((rc = get_u32(f, hp, "expert_shared_count", &hp->n_expert_shared, true)) ||
        (rc = get_u32(f, hp, "leading_dense_block_count", &hp->n_layer_dense_lead, false)) ||
        (rc = get_u32(f, hp, "feed_forward_length", &hp->n_ff, hp->n_layer_dense_lead > 0)) ||
        (rc = get_bool(f, hp, "expert_weights_norm", &hp->expert_weights_norm)) ||
        (rc = get_u32(f, hp, "expert_gating_func", &hp->expert_gating, false)))
        return rc;
    if (hp->expert_gating == 0) hp->expert_gating = STRATA_GATING_SIGMOID;
    if (hp->expert_gating != STRATA_GATING_SIGMOID && hp->expert_gating != STRATA_GATING_SOFTMAX)
        return bad(f, "expert_gating_func is neither softmax (1) nor sigmoid (2)", hp->expert_gating);
    if (hp->n_expert_shared > 64) return bad(f, "expert_shared_count out of range", hp->n_expert_shared);
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
    if (hp->n_layer_dense_lead > hp->n_layer) return bad(f, "leading_dense_block_count above block count", hp->n_layer_dense_lead);
    if (hp->n_ff > (1u << 20)) return bad(f, "feed_forward_length out of range", hp->n_ff);
    char k[128];
    if (strata_gguf_find_kv(f, akey(k, sizeof k, hp, "rope.dimension_sections")) != NULL) {
        const void *items;
        uint64_t n;
        if (strata_gguf_get_arr(f, k, GGUF_TYPE_INT32, &items, &n) == 0)
            for (uint64_t i = 0; i < n; i++)
                if (((const int32_t *)items)[i] != 0) {
                    strata_log_error("hparams: %s: glm4moe with M-RoPE sections (multimodal) is not supported", f->path);
                    return STRATA_EUNSUP;
                }
    }
    return 0;
}

// qwen3next / qwen35moe: delta-net geometry, shared expert width, attention interval.
static int load_qwen3next(struct strata_hparams *hp, const struct strata_gguf_file *f)
{
    int rc;
    hp->full_attn_interval = 4;
    hp->expert_weights_norm = true;
    hp->expert_gating = STRATA_GATING_SOFTMAX;
    if ((rc = get_u32(f, hp, "ssm.conv_kernel", &hp->ssm_d_conv, true)) ||
        (rc = get_u32(f, hp, "ssm.state_size", &hp->ssm_d_state, true)) ||
        (rc = get_u32(f, hp, "ssm.group_count", &hp->ssm_n_group, true)) ||
        (rc = get_u32(f, hp, "ssm.time_step_rank", &hp->ssm_dt_rank, true)) ||
        (rc = get_u32(f, hp, "ssm.inner_size", &hp->ssm_d_inner, true)) ||
        (rc = get_u32(f, hp, "full_attention_interval", &hp->full_attn_interval, false)) ||
        (rc = get_u32(f, hp, "feed_forward_length", &hp->n_ff, false)) ||
        (rc = get_u32(f, hp, "expert_shared_feed_forward_length", &hp->n_ff_shexp, false)))
        return rc;
    if (hp->n_ff_shexp == 0) hp->n_ff_shexp = hp->n_ff;
    if (hp->ssm_d_conv == 0 || hp->ssm_d_conv > 64) return bad(f, "ssm.conv_kernel out of range", hp->ssm_d_conv);
    if (hp->ssm_d_state == 0 || hp->ssm_d_state > 1024) return bad(f, "ssm.state_size out of range", hp->ssm_d_state);
    if (hp->ssm_n_group == 0 || hp->ssm_dt_rank == 0 || hp->ssm_dt_rank > 4096 || hp->ssm_dt_rank % hp->ssm_n_group)
        return bad(f, "ssm.time_step_rank is not a multiple of ssm.group_count", hp->ssm_dt_rank);
    if (hp->ssm_d_inner != hp->ssm_d_state * hp->ssm_dt_rank)
        return bad(f, "ssm.inner_size differs from state_size * time_step_rank", hp->ssm_d_inner);
    if (hp->full_attn_interval == 0 || hp->full_attn_interval > hp->n_layer_all)
        return bad(f, "full_attention_interval out of range", hp->full_attn_interval);
    if (hp->n_ff_shexp > (1u << 20)) return bad(f, "shared expert FFN width out of range", hp->n_ff_shexp);
    if (hp->arch == STRATA_ARCH_QWEN35MOE) {
        char k[128];
        const void *items;
        uint64_t n;
        rc = strata_gguf_get_arr(f, akey(k, sizeof k, hp, "rope.dimension_sections"), GGUF_TYPE_INT32, &items, &n);
        if (rc || n < 3 || n > 4) {
            strata_log_error("hparams: %s: '%s' must be an array of 3 or 4 int32", f->path, k);
            return STRATA_EFORMAT;
        }
        for (uint64_t i = 0; i < n; i++) {
            hp->rope_sections[i] = ((const int32_t *)items)[i];
            if (hp->rope_sections[i] < 0 || hp->rope_sections[i] > 4096) return bad(f, "rope section out of range", 0);
        }
    }
    return 0;
}

// rope.scaling.*: YaRN (deepseek2, deepseek32, gpt-oss), linear, none.
static int load_rope_scaling(struct strata_hparams *hp, const struct strata_gguf_file *f)
{
    char k[128];
    const char *type = NULL;
    int rc = strata_gguf_get_str(f, akey(k, sizeof k, hp, "rope.scaling.type"), &type);
    if (rc && rc != -ENOENT) return rc;
    if (type && strcmp(type, "yarn") != 0 && strcmp(type, "linear") != 0 && strcmp(type, "none") != 0) {
        strata_log_error("hparams: %s: rope scaling '%s' is not supported (yarn, linear, none)", f->path, type);
        return STRATA_EUNSUP;
    }
    hp->rope_yarn = type && strcmp(type, "yarn") == 0;
    if ((rc = get_f32(f, hp, "rope.scaling.factor", &hp->rope_scale, false)) ||
        (rc = get_u32(f, hp, "rope.scaling.original_context_length", &hp->rope_n_ctx_orig, false)) ||
        (rc = get_f32(f, hp, "rope.scaling.attn_factor", &hp->rope_attn_factor, false)))
        return rc;
    if (type && strcmp(type, "none") == 0) hp->rope_scale = 0.0f;
    if (!(hp->rope_scale >= 0.0f && hp->rope_scale < 1e6f)) return bad(f, "rope.scaling.factor out of range", 0);
    if (hp->arch == STRATA_ARCH_DEEPSEEK2 || hp->arch == STRATA_ARCH_DEEPSEEK32) {
        // the converter writes 0.1 * mscale_all_dim; llama.cpp undoes the 0.1
        if ((rc = get_f32(f, hp, "rope.scaling.yarn_log_multiplier", &hp->yarn_log_mul, false))) return rc;
        hp->yarn_log_mul /= 0.1f;
    }
    return 0;
}

// deepseek2 / deepseek32 / glm-dsa: MLA dims, GLM/DeepSeek routing, the indexer.
static int load_mla(struct strata_hparams *hp, const struct strata_gguf_file *f)
{
    int rc;
    const bool dsa = hp->arch != STRATA_ARCH_DEEPSEEK2;
    hp->expert_gating = 0;
    hp->expert_weights_norm = false;
    if ((rc = get_u32(f, hp, "attention.q_lora_rank", &hp->q_lora_rank, dsa)) ||
        (rc = get_u32(f, hp, "attention.kv_lora_rank", &hp->kv_lora_rank, true)) ||
        (rc = get_u32(f, hp, "attention.key_length_mla", &hp->head_dim_k_mla, false)) ||
        (rc = get_u32(f, hp, "attention.value_length_mla", &hp->head_dim_v_mla, false)) ||
        (rc = get_u32(f, hp, "expert_shared_count", &hp->n_expert_shared, true)) ||
        (rc = get_u32(f, hp, "leading_dense_block_count", &hp->n_layer_dense_lead, false)) ||
        (rc = get_u32(f, hp, "feed_forward_length", &hp->n_ff, hp->n_layer_dense_lead > 0)) ||
        (rc = get_bool(f, hp, "expert_weights_norm", &hp->expert_weights_norm)) ||
        (rc = get_u32(f, hp, "expert_gating_func", &hp->expert_gating, hp->arch == STRATA_ARCH_DEEPSEEK32)) ||
        (rc = get_u32(f, hp, "expert_group_count", &hp->n_expert_groups, false)) ||
        (rc = get_u32(f, hp, "expert_group_used_count", &hp->n_group_used, false)))
        return rc;
    if (hp->head_dim_k_mla == 0 || hp->head_dim_v_mla == 0) {
        strata_log_error("hparams: %s: MLA without key_length_mla/value_length_mla (a legacy file with "
                         "attn_kv_b) is not supported: convert it again", f->path);
        return STRATA_EUNSUP;
    }
    if (hp->expert_gating == 0)  // llama.cpp's defaults: glm-dsa sigmoid, deepseek2 softmax
        hp->expert_gating = hp->arch == STRATA_ARCH_GLM_DSA ? STRATA_GATING_SIGMOID : STRATA_GATING_SOFTMAX;
    if (hp->expert_gating != STRATA_GATING_SIGMOID && hp->expert_gating != STRATA_GATING_SOFTMAX)
        return bad(f, "expert_gating_func is neither softmax (1) nor sigmoid (2)", hp->expert_gating);
    if (hp->kv_lora_rank == 0 || hp->kv_lora_rank > 65536) return bad(f, "kv_lora_rank out of range", hp->kv_lora_rank);
    if (hp->q_lora_rank > 65536) return bad(f, "q_lora_rank out of range", hp->q_lora_rank);
    if (hp->head_dim_k_mla <= hp->n_rot || hp->head_dim_k_mla > 4096 || hp->head_dim_v_mla > 4096)
        return bad(f, "key_length_mla not above rope.dimension_count", hp->head_dim_k_mla);
    if (hp->head_dim_k != hp->kv_lora_rank + hp->n_rot || hp->head_dim_v != hp->kv_lora_rank || hp->n_head_kv != 1)
        return bad(f, "MLA needs key_length = kv_lora_rank + rope dims, value_length = kv_lora_rank, one kv head",
                   hp->head_dim_k);
    if (hp->n_expert_shared > 64) return bad(f, "expert_shared_count out of range", hp->n_expert_shared);
    hp->n_ff_shexp = hp->n_ff_exp * hp->n_expert_shared;
    if (hp->n_layer_dense_lead > hp->n_layer) return bad(f, "leading_dense_block_count above block count", hp->n_layer_dense_lead);
    if (hp->n_ff > (1u << 20)) return bad(f, "feed_forward_length out of range", hp->n_ff);
    if (hp->n_expert_groups > 1 &&
        (hp->n_expert_groups > 64 || hp->n_expert % hp->n_expert_groups || hp->n_expert / hp->n_expert_groups < 2 ||
         hp->n_group_used == 0 || hp->n_group_used >= hp->n_expert_groups ||
         hp->n_group_used * (hp->n_expert / hp->n_expert_groups) < hp->n_expert_used))
        return bad(f, "expert_group_count / expert_group_used_count inconsistent with the experts", hp->n_expert_groups);
    if (!dsa) return 0;

    hp->norm_eps = hp->arch == STRATA_ARCH_DEEPSEEK32 ? 1e-6f : 0.0f;  // llama.cpp never sets it for glm-dsa
    if ((rc = get_u32(f, hp, "attention.indexer.head_count", &hp->idx_n_head, true)) ||
        (rc = get_u32(f, hp, "attention.indexer.key_length", &hp->idx_head_dim, true)) ||
        (rc = get_u32(f, hp, "attention.indexer.top_k", &hp->idx_top_k, true)))
        return rc;
    if (hp->idx_n_head == 0 || hp->idx_n_head > 1024) return bad(f, "indexer head_count out of range", hp->idx_n_head);
    if (hp->idx_head_dim < 64 || hp->idx_head_dim > 1024 || (hp->idx_head_dim & (hp->idx_head_dim - 1)) ||
        hp->idx_head_dim < hp->n_rot)
        return bad(f, "indexer key_length must be a power of two from 64 to 1024, at least the rope dims", hp->idx_head_dim);
    if (hp->idx_top_k == 0) return bad(f, "indexer top_k is 0", 0);
    for (uint32_t l = 0; l < hp->n_layer; l++) hp->idx_full[l / 64] |= 1ull << (l % 64);
    if (hp->arch == STRATA_ARCH_GLM_DSA) {
        char k[128];
        const void *items;
        uint64_t n;
        rc = strata_gguf_get_arr(f, akey(k, sizeof k, hp, "attention.indexer.types"), GGUF_TYPE_BOOL, &items, &n);
        if (rc == 0) {
            if (n != hp->n_layer) return bad(f, "attention.indexer.types length differs from the blocks run", n);
            memset(hp->idx_full, 0, sizeof hp->idx_full);
            for (uint32_t l = 0; l < hp->n_layer; l++)
                if (((const uint8_t *)items)[l]) hp->idx_full[l / 64] |= 1ull << (l % 64);
        } else if (rc != -ENOENT) {
            return rc;
        } else if (hp->n_ctx_train >= (1u << 20)) {
            // llama.cpp's built-in GLM-5.2 pattern: blocks 0, 1, 2, then every fourth
            memset(hp->idx_full, 0, sizeof hp->idx_full);
            for (uint32_t l = 0; l < hp->n_layer; l++)
                if (l < 2 || (l - 2) % 4 == 0) hp->idx_full[l / 64] |= 1ull << (l % 64);
        }
        if (!(hp->idx_full[0] & 1)) return bad(f, "the first block must compute its indexer top-k", 0);
    }
    return 0;
}

// gpt-oss: sliding-window blocks, sinks, softmax after top-k.
static int load_gpt_oss(struct strata_hparams *hp, const struct strata_gguf_file *f)
{
    int rc;
    hp->expert_gating = STRATA_GATING_SOFTMAX_WEIGHT;
    hp->expert_weights_norm = false;
    hp->rope_freq_base_swa = hp->rope_freq_base;
    if ((rc = get_u32(f, hp, "attention.sliding_window", &hp->n_swa, true)) ||
        (rc = get_f32(f, hp, "rope.freq_base_swa", &hp->rope_freq_base_swa, false)))
        return rc;
    if (hp->n_swa == 0) return bad(f, "attention.sliding_window is 0", 0);
    // attention.sliding_window_pattern: a bool per block, or n (blocks l % n < n - 1 slide); 2
    char k[128];
    const void *items;
    uint64_t n;
    uint32_t pattern = 2;
    rc = strata_gguf_get_arr(f, akey(k, sizeof k, hp, "attention.sliding_window_pattern"), GGUF_TYPE_BOOL, &items, &n);
    if (rc == 0) {
        if (n < hp->n_layer) return bad(f, "attention.sliding_window_pattern shorter than the blocks", n);
        for (uint32_t l = 0; l < hp->n_layer; l++)
            if (((const uint8_t *)items)[l]) hp->swa_layers[l / 64] |= 1ull << (l % 64);
        return 0;
    }
    if ((rc = get_u32(f, hp, "attention.sliding_window_pattern", &pattern, false))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++)
        if (pattern == 0 || l % pattern < pattern - 1) hp->swa_layers[l / 64] |= 1ull << (l % 64);
    return 0;
}

uint64_t strata_hparams_kv_bytes_per_token(const struct strata_hparams *hp, uint32_t elem_bytes)
{
    const uint64_t per_layer = hp->kv_lora_rank ? (uint64_t)hp->kv_lora_rank + hp->n_rot
                                                : (uint64_t)hp->n_head_kv * (hp->head_dim_k + hp->head_dim_v);
    uint64_t n = 0;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        if (!strata_hparams_is_recurrent(hp, l)) n += per_layer;
        if (hp->idx_n_head && strata_hparams_bit(hp->idx_full, l)) n += hp->idx_head_dim;  // its own top-k only
    }
    return n * elem_bytes;
}

bool strata_hparams_kv_typed(const struct strata_hparams *hp)
{
    return !hp->kv_lora_rank && !hp->n_swa && hp->arch != STRATA_ARCH_GPT_OSS;  // gpt-oss: sinks
}

int strata_hparams_load(struct strata_hparams *hp, const struct strata_gguf_file *f)
{
    memset(hp, 0, sizeof *hp);
    const char *arch_name = NULL;
    if (strata_gguf_get_str(f, "general.architecture", &arch_name) != 0) {
        strata_log_error("hparams: %s: no general.architecture string", f->path);
        return STRATA_EFORMAT;
    }
    int arch = strata_arch_from_name(arch_name);
    if (arch < 0) {
        strata_log_error("hparams: %s: architecture '%s' is not supported (strata runs: qwen3moe, glm4moe, qwen3next, "
                         "qwen35moe; knows deepseek2, deepseek32, glm-dsa, gpt-oss)", f->path, arch_name);
        return STRATA_EUNSUP;
    }
    hp->arch = (enum strata_arch)arch;
    const char *name = NULL;
    if (strata_gguf_get_str(f, "general.name", &name) == 0)
        snprintf(hp->name, sizeof hp->name, "%s", name);
    else {
        const char *base = strrchr(f->path, '/');
        snprintf(hp->name, sizeof hp->name, "%s", base ? base + 1 : f->path);
    }

    int rc = 0;
    hp->rope_freq_base = 10000.0f;
    if ((rc = get_u32(f, hp, "context_length", &hp->n_ctx_train, true)) ||
        (rc = get_u32(f, hp, "embedding_length", &hp->n_embd, true)) ||
        (rc = get_u32(f, hp, "block_count", &hp->n_layer, true)) ||
        (rc = get_u32(f, hp, "attention.head_count", &hp->n_head, true)) ||
        (rc = get_u32(f, hp, "attention.head_count_kv", &hp->n_head_kv, false)) ||
        (rc = get_u32(f, hp, "attention.key_length", &hp->head_dim_k, false)) ||
        (rc = get_u32(f, hp, "attention.value_length", &hp->head_dim_v, false)) ||
        (rc = get_u32(f, hp, "rope.dimension_count", &hp->n_rot, false)) ||
        (rc = get_u32(f, hp, "expert_count", &hp->n_expert, true)) ||
        (rc = get_u32(f, hp, "expert_used_count", &hp->n_expert_used, true)) ||
        (rc = get_u32(f, hp, "expert_feed_forward_length", &hp->n_ff_exp, true)) ||
        (rc = get_f32(f, hp, "attention.layer_norm_rms_epsilon", &hp->rms_eps, true)) ||
        (rc = get_f32(f, hp, "rope.freq_base", &hp->rope_freq_base, false)) ||
        (rc = get_f32(f, hp, "expert_weights_scale", &hp->expert_weights_scale, false)) ||
        (rc = get_u32(f, hp, "nextn_predict_layers", &hp->n_layer_nextn, false)))
        return rc;

    if (hp->n_embd == 0 || hp->n_embd > (1u << 20)) return bad(f, "embedding_length out of range", hp->n_embd);
    if (hp->n_layer == 0 || hp->n_layer > 4096) return bad(f, "block_count out of range", hp->n_layer);
    if (hp->n_layer_nextn >= hp->n_layer) return bad(f, "nextn_predict_layers not below block_count", hp->n_layer_nextn);
    hp->n_layer_all = hp->n_layer;
    hp->n_layer -= hp->n_layer_nextn;
    if (hp->n_head == 0 || hp->n_head > 4096) return bad(f, "attention.head_count out of range", hp->n_head);
    if (hp->n_head_kv == 0) hp->n_head_kv = hp->n_head;
    if (hp->n_head % hp->n_head_kv) return bad(f, "head_count is not a multiple of head_count_kv", hp->n_head_kv);
    if (hp->head_dim_k == 0) {
        if (hp->n_embd % hp->n_head) return bad(f, "embedding_length not divisible by head_count", hp->n_embd);
        hp->head_dim_k = hp->n_embd / hp->n_head;
    }
    if (hp->head_dim_v == 0) hp->head_dim_v = hp->head_dim_k;
    if (hp->head_dim_k > 4096 || hp->head_dim_v > 4096) return bad(f, "head dimension out of range", hp->head_dim_k);
    if (hp->n_rot == 0) hp->n_rot = hp->head_dim_k;
    if (hp->n_rot > hp->head_dim_k || hp->n_rot % 2) return bad(f, "rope.dimension_count invalid", hp->n_rot);
    if (hp->n_expert == 0 || hp->n_expert > 65536) return bad(f, "expert_count out of range", hp->n_expert);
    if (hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return bad(f, "expert_used_count out of range", hp->n_expert_used);
    if (hp->n_ff_exp == 0 || hp->n_ff_exp > (1u << 20)) return bad(f, "expert_feed_forward_length out of range", hp->n_ff_exp);
    if (!(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f)) return bad(f, "layer_norm_rms_epsilon out of range", 0);
    if (hp->n_ctx_train == 0) hp->n_ctx_train = 4096;
    hp->expert_weights_norm = true;
    hp->expert_gating = STRATA_GATING_SOFTMAX;
    if ((rc = load_rope_scaling(hp, f))) return rc;
    if (hp->arch == STRATA_ARCH_GLM4MOE && (rc = load_glm4moe(hp, f))) return rc;
    if ((hp->arch == STRATA_ARCH_DEEPSEEK2 || hp->arch == STRATA_ARCH_DEEPSEEK32 || hp->arch == STRATA_ARCH_GLM_DSA) &&
        (rc = load_mla(hp, f)))
        return rc;
    if (hp->arch == STRATA_ARCH_GPT_OSS && (rc = load_gpt_oss(hp, f))) return rc;
    if ((hp->arch == STRATA_ARCH_QWEN3NEXT || hp->arch == STRATA_ARCH_QWEN35MOE) && (rc = load_qwen3next(hp, f)))
        return rc;

    const struct strata_gguf_tensor *emb = strata_gguf_find_tensor(f, "token_embd.weight");
    if (!emb) {
        strata_log_error("hparams: %s: tensor 'token_embd.weight' missing", f->path);
        return STRATA_EFORMAT;
    }
    if (emb->ne[1] == 0 || emb->ne[1] > (1u << 24)) return bad(f, "vocabulary size out of range", emb->ne[1]);
    hp->n_vocab = (uint32_t)emb->ne[1];
    return 0;
}
