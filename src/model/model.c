// Model loading (dense weights resident, experts through the provider); each architecture's
// file (qwen3moe.c, glm4moe.c, qwen3next.c) loads its tensors. The forward pass is in qwen3moe.c.
#include "model/model_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/log.h"
#include "util/mem.h"

// Read a whole tensor into 64-byte aligned memory owned by the model.
static int load_tensor(struct strata_model *m, const struct strata_gguf_tensor *t, void **out)
{
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 256;
        struct strata_owned *o = realloc(m->owned, cap * sizeof *o);
        if (!o) return STRATA_ENOMEM;
        m->owned = o;
        m->cap_owned = cap;
    }
    void *buf = strata_big_alloc(t->n_bytes);
    if (!buf) {
        strata_log_error("model_load: out of memory for '%s' (%llu bytes)", t->name,
                         (unsigned long long)t->n_bytes);
        return STRATA_ENOMEM;
    }
    m->owned[m->n_owned++] = (struct strata_owned){buf, t->n_bytes};
    int rc = strata_gguf_read_tensor(m->file, t, 0, buf, t->n_bytes);
    if (rc) return rc;
    m->dense_bytes += t->n_bytes;
    *out = buf;
    return 0;
}

static const struct strata_gguf_tensor *find(const struct strata_model *m, const char *name, bool required)
{
    const struct strata_gguf_tensor *t = strata_gguf_find_tensor(m->file, name);
    if (!t && required) strata_log_error("model_load: %s: tensor '%s' missing", m->file->path, name);
    return t;
}

static int check_shape(const struct strata_model *m, const struct strata_gguf_tensor *t, uint64_t ne0,
                       uint64_t ne1, uint64_t ne2)
{
    uint64_t want[3] = {ne0, ne1, ne2};
    for (int d = 0; d < 3; d++) {
        uint64_t have = d < (int)t->n_dims ? t->ne[d] : 1;
        if (have != want[d]) {
            strata_log_error("model_load: %s: tensor '%s' has shape [%llu,%llu,%llu], expected [%llu,%llu,%llu]",
                             m->file->path, t->name, (unsigned long long)t->ne[0],
                             (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1),
                             (unsigned long long)(t->n_dims > 2 ? t->ne[2] : 1), (unsigned long long)ne0,
                             (unsigned long long)ne1, (unsigned long long)ne2);
            return STRATA_EFORMAT;
        }
    }
    return 0;
}

int strata_model_load_vec(struct strata_model *m, const char *name, uint64_t n, const float **out)
{
    const struct strata_gguf_tensor *t = find(m, name, true);
    if (!t) return STRATA_EFORMAT;
    int rc = check_shape(m, t, n, 1, 1);
    if (rc) return rc;
    if (t->type != STRATA_TYPE_F32) {
        strata_log_error("model_load: %s: tensor '%s' is %s; norms, biases and routers must be F32",
                         m->file->path, name, strata_type_name(t->type));
        return STRATA_EUNSUP;
    }
    return load_tensor(m, t, (void **)out);
}

int strata_model_load_mat(struct strata_model *m, const char *name, uint64_t n_in, uint64_t n_out,
                          bool required, struct strata_mat *out)
{
    memset(out, 0, sizeof *out);
    const struct strata_gguf_tensor *t = find(m, name, required);
    if (!t) return required ? STRATA_EFORMAT : 0;
    int rc = check_shape(m, t, n_in, n_out, 1);
    if (rc) return rc;
    if (!strata_type_computable(t->type)) {
        strata_log_error("model_load: %s: tensor '%s' has type %s, which strata cannot compute with yet",
                         m->file->path, name, strata_type_name(t->type));
        return STRATA_EUNSUP;
    }
    void *data;
    if ((rc = load_tensor(m, t, &data))) return rc;
    *out = (struct strata_mat){data, t->type, (uint32_t)n_in, (uint32_t)n_out,
                               strata_type_row_bytes(t->type, n_in)};
    return 0;
}

int strata_model_load_vec_opt(struct strata_model *m, const char *name, uint64_t n, const float **out)
{
    *out = NULL;
    if (!strata_gguf_find_tensor(m->file, name)) return 0;
    return strata_model_load_vec(m, name, n, out);
}

int strata_model_load_io(struct strata_model *m)
{
    const uint64_t E = m->hp.n_embd, V = m->hp.n_vocab;
    int rc;
    if ((rc = strata_model_load_mat(m, "token_embd.weight", E, V, true, &m->tok_embd)) ||
        (rc = strata_model_load_vec(m, "output_norm.weight", E, &m->output_norm)) ||
        (rc = strata_model_load_mat(m, "output.weight", E, V, false, &m->output)))
        return rc;
    if (!m->output.data) m->output = m->tok_embd;  // tied embeddings
    return 0;
}

int strata_model_load_attention(struct strata_model *m, uint32_t l, bool gated, bool norms_required)
{
    const struct strata_hparams *hp = &m->hp;
    struct strata_layer *L = &m->layers[l];
    const uint64_t E = hp->n_embd, D = hp->head_dim_k;
    const uint64_t QD = (uint64_t)hp->n_head * D, KD = (uint64_t)hp->n_head_kv * D;
    const uint64_t VD = (uint64_t)hp->n_head_kv * hp->head_dim_v, OD = (uint64_t)hp->n_head * hp->head_dim_v;
    char n[96];
    int rc;
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if ((rc = strata_model_load_mat(m, NM("attn_q.weight"), E, gated ? 2 * QD : QD, true, &L->wq)) ||
        (rc = strata_model_load_mat(m, NM("attn_k.weight"), E, KD, true, &L->wk)) ||
        (rc = strata_model_load_mat(m, NM("attn_v.weight"), E, VD, true, &L->wv)) ||
        (rc = strata_model_load_mat(m, NM("attn_output.weight"), OD, E, true, &L->wo)) ||
        (rc = strata_model_load_vec_opt(m, NM("attn_q.bias"), gated ? 2 * QD : QD, &L->bq)) ||
        (rc = strata_model_load_vec_opt(m, NM("attn_k.bias"), KD, &L->bk)) ||
        (rc = strata_model_load_vec_opt(m, NM("attn_v.bias"), VD, &L->bv)))
        return rc;
    if (norms_required &&
        ((rc = strata_model_load_vec(m, NM("attn_q_norm.weight"), D, &L->q_norm)) ||
         (rc = strata_model_load_vec(m, NM("attn_k_norm.weight"), D, &L->k_norm))))
        return rc;
    if (!norms_required &&
        ((rc = strata_model_load_vec_opt(m, NM("attn_q_norm.weight"), D, &L->q_norm)) ||
         (rc = strata_model_load_vec_opt(m, NM("attn_k_norm.weight"), D, &L->k_norm))))
        return rc;
#undef NM
    L->q_gated = gated;
    return 0;
}

static int load_arch(struct strata_model *m)
{
    switch (m->hp.arch) {
    case STRATA_ARCH_QWEN3MOE: return strata_qwen3moe_load(m);
    case STRATA_ARCH_GLM4MOE: return strata_glm4moe_load(m);
    case STRATA_ARCH_QWEN3NEXT:
    case STRATA_ARCH_QWEN35MOE: return strata_qwen3next_load(m);
    case STRATA_ARCH_DEEPSEEK2:
    case STRATA_ARCH_DEEPSEEK32:
    case STRATA_ARCH_GLM_DSA:
    case STRATA_ARCH_GPT_OSS:
        // synth, inspect and plan know them; running them waits for the shared forward pass
        strata_log_error("model_load: %s: running %s is not supported yet (inspect and plan are)", m->file->path,
                         strata_arch_name(m->hp.arch));
        return STRATA_EUNSUP;
    case STRATA_ARCH_COUNT: break;
    }
    return STRATA_EUNSUP;
}

int strata_model_load(struct strata_model **out, const char *path, const struct strata_model_params *p)
{
    static const struct strata_model_params defaults = {0};
    if (!p) p = &defaults;
    *out = NULL;
    struct strata_model *m = calloc(1, sizeof *m);
    if (!m) return STRATA_ENOMEM;
    int rc = strata_gguf_open(&m->file, path);
    if (rc == 0) rc = strata_hparams_load(&m->hp, m->file);
    if (rc == 0) rc = strata_expert_layout_init(&m->layout, m->file);
    // Experts of the nextn blocks after the trunk are never run: keep them out of the store.
    if (rc == 0) strata_expert_layout_limit(&m->layout, m->hp.n_layer);
    if (rc == 0 && m->layout.n_expert != m->hp.n_expert) {
        strata_log_error("model_load: %s: expert tensors hold %u experts, metadata says %u", path,
                         m->layout.n_expert, m->hp.n_expert);
        rc = STRATA_EFORMAT;
    }
    if (rc == 0) rc = load_arch(m);
    if (rc == 0)
        rc = strata_experts_open(&m->experts, m->file, &m->layout, m->hp.n_expert_used, &p->experts);
    if (rc == 0 && p->experts.trace_path) {
        const char *name = NULL;
        strata_gguf_get_str(m->file, "general.name", &name);
        rc = strata_trace_open(&m->trace, p->experts.trace_path, name, m->layout.n_layers, m->hp.n_expert,
                               m->hp.n_expert_used);
    }
    if (rc) {
        strata_model_free(m);
        return rc;
    }
    m->kernels = strata_kernels();
    *out = m;
    return 0;
}

void strata_model_free(struct strata_model *m)
{
    if (!m) return;
    strata_trace_close(m->trace);
    strata_experts_close(m->experts);
    for (size_t i = 0; i < m->n_owned; i++) strata_big_free(m->owned[i].p, m->owned[i].bytes);
    free(m->owned);
    free(m->layers);
    strata_expert_layout_free(&m->layout);
    strata_gguf_close(m->file);
    free(m);
}

const struct strata_hparams *strata_model_hparams(const struct strata_model *m) { return &m->hp; }
const struct strata_gguf_file *strata_model_file(const struct strata_model *m) { return m->file; }
uint64_t strata_model_dense_bytes(const struct strata_model *m) { return m->dense_bytes; }
uint64_t strata_model_expert_bytes(const struct strata_model *m)
{
    return strata_experts_resident_bytes(m->experts);
}

void strata_model_expert_stats(const struct strata_model *m, struct strata_experts_stats *st)
{
    strata_experts_get_stats(m->experts, st);
}

void strata_model_expert_layer_stats(const struct strata_model *m, uint32_t layer,
                                     struct strata_experts_layer_stats *st)
{
    strata_experts_get_layer_stats(m->experts, layer, st);
}
