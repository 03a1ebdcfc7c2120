// Hyperparameters from GGUF metadata ("<arch>.<key>"), with the defaults llama.cpp applies.
#include "model/arch.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/log.h"

static const char *const g_arch_names[STRATA_ARCH_COUNT] = {
    [STRATA_ARCH_QWEN3MOE] = "qwen3moe",
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

static int get_u32(const struct gguf_file *f, const struct strata_hparams *hp, const char *key,
                   uint32_t *out, bool required)
{
    char k[128];
    int rc = gguf_get_u32(f, akey(k, sizeof k, hp, key), out);
    if (rc == -ENOENT && required) {
        strata_log_error("hparams: %s: missing required key '%s'", f->path, k);
        return STRATA_EFORMAT;
    }
    return rc == -ENOENT ? 0 : rc;
}

static int get_f32(const struct gguf_file *f, const struct strata_hparams *hp, const char *key,
                   float *out, bool required)
{
    char k[128];
    int rc = gguf_get_f32(f, akey(k, sizeof k, hp, key), out);
    if (rc == -ENOENT && required) {
        strata_log_error("hparams: %s: missing required key '%s'", f->path, k);
        return STRATA_EFORMAT;
    }
    return rc == -ENOENT ? 0 : rc;
}

static int bad(const struct gguf_file *f, const char *what, uint64_t v)
{
    strata_log_error("hparams: %s: %s (%llu)", f->path, what, (unsigned long long)v);
    return STRATA_EFORMAT;
}

int strata_hparams_load(struct strata_hparams *hp, const struct gguf_file *f)
{
    memset(hp, 0, sizeof *hp);
    const char *arch_name = NULL;
    if (gguf_get_str(f, "general.architecture", &arch_name) != 0) {
        strata_log_error("hparams: %s: no general.architecture string", f->path);
        return STRATA_EFORMAT;
    }
    int arch = strata_arch_from_name(arch_name);
    if (arch < 0) {
        strata_log_error("hparams: %s: architecture '%s' is not supported (strata runs: qwen3moe)",
                         f->path, arch_name);
        return STRATA_EUNSUP;
    }
    hp->arch = (enum strata_arch)arch;
    const char *name = NULL;
    if (gguf_get_str(f, "general.name", &name) == 0)
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
        (rc = get_f32(f, hp, "expert_weights_scale", &hp->expert_weights_scale, false)))
        return rc;

    if (hp->n_embd == 0 || hp->n_embd > (1u << 20)) return bad(f, "embedding_length out of range", hp->n_embd);
    if (hp->n_layer == 0 || hp->n_layer > 4096) return bad(f, "block_count out of range", hp->n_layer);
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

    const struct gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    if (!emb) {
        strata_log_error("hparams: %s: tensor 'token_embd.weight' missing", f->path);
        return STRATA_EFORMAT;
    }
    if (emb->ne[1] == 0 || emb->ne[1] > (1u << 24)) return bad(f, "vocabulary size out of range", emb->ne[1]);
    hp->n_vocab = (uint32_t)emb->ne[1];
    return 0;
}
