// Model loading: dense weights read from the file into host memory and handed to the backend as
// views (the CPU backend keeps the host bytes; a GPU backend copies them, and the host bytes are
// freed). Each architecture's file (qwen3moe.c, glm4moe.c, qwen3next.c) loads its tensors with
// these helpers and sets the feature flags the forward pass (forward.c) reads.
#include "model/model_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/log.h"
#include "util/mem.h"

static int own_push(struct strata_model *m, void *p, size_t bytes)
{
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 256;
        struct strata_owned *o = realloc(m->owned, cap * sizeof *o);
        if (!o) return STRATA_ENOMEM;
        m->owned = o;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = (struct strata_owned){p, bytes};
    return 0;
}

// The arena for the dense tensors of a backend that computes on host memory (the CPU keeps the
// bytes it is given as its views): one mapping of the file's dense bytes on 2 MiB pages
// (strata_big_alloc), which the tensors fill in load order, 64-byte aligned; its untouched end
// holds no memory. A mapping per tensor put those under 2 MiB (k and v, routers, norms: 2.2 MB a
// layer of the qwen3-30b-a3b shape in Q4_K) on 4 KiB pages, where a decode step's reads miss the
// TLB at every page, and rounded each larger one up to whole huge pages (1.5 MiB of memory for
// nothing for each of q and o, whose 4.5 MiB end inside a third huge page). STRATA_DENSE_ARENA=0: a mapping per tensor (comparisons).
static void arena_open(struct strata_model *m)
{
    const char *env = getenv("STRATA_DENSE_ARENA");
    if (!m->be->iface->host_memory || (env && env[0] == '0')) return;
    const size_t cap = (size_t)m->layout.dense_bytes + 64 * (size_t)m->file->n_tensors + 4096;
    char *p = strata_big_alloc(cap);
    if (!p) return;  // a mapping per tensor then
    if (own_push(m, p, cap)) {
        strata_big_free(p, cap);
        return;
    }
    m->arena = p;
    m->arena_cap = cap;
}

// Host memory of `bytes`, owned by the model (64-byte aligned, zeroed): from the arena while it
// has room, else a mapping of its own.
static void *own_alloc(struct strata_model *m, size_t bytes, const char *what)
{
    if (m->arena) {
        const size_t off = (m->arena_used + 63) & ~(size_t)63;
        if (off <= m->arena_cap && bytes <= m->arena_cap - off) {
            m->arena_used = off + bytes;
            return m->arena + off;
        }
    }
    void *buf = strata_big_alloc(bytes);
    if (!buf || own_push(m, buf, bytes)) {
        strata_big_free(buf, bytes);
        strata_log_error("model_load: out of memory for '%s' (%zu bytes)", what, bytes);
        return NULL;
    }
    return buf;
}

// Give the last buffer own_alloc returned back (the backend copied it: a backend with the arena
// keeps host memory as its views and copies none).
static void own_drop_last(struct strata_model *m)
{
    STRATA_ASSERT(!m->arena);
    struct strata_owned *o = &m->owned[--m->n_owned];
    strata_big_free(o->p, o->bytes);
}

// Read a whole tensor into host memory owned by the model.
static int read_tensor(struct strata_model *m, const struct strata_gguf_tensor *t, void **out)
{
    void *buf = own_alloc(m, t->n_bytes, t->name);
    if (!buf) return STRATA_ENOMEM;
    int rc = strata_gguf_read_tensor(m->file, t, 0, buf, t->n_bytes);
    if (rc) return rc;
    m->dense_bytes += t->n_bytes;
    *out = buf;
    return 0;
}

// The backend view of host matrix `host` (the last owned buffer); the host bytes are freed when
// the backend copied them.
static int make_view(struct strata_model *m, const struct strata_mat *host, struct strata_mat *view)
{
    if (m->n_views == m->cap_views) {
        size_t cap = m->cap_views ? m->cap_views * 2 : 256;
        struct strata_mat *v = realloc(m->views, cap * sizeof *v);
        if (!v) return STRATA_ENOMEM;
        m->views = v;
        m->cap_views = cap;
    }
    bool copied = false;
    int rc = m->be->iface->weight_load(m->be->ctx, host, view, &copied);
    if (rc) return rc;
    m->views[m->n_views++] = *view;
    if (copied) own_drop_last(m);
    return 0;
}

// Read tensor t ([n_out][n_in] of its type) and make its backend view.
static int load_view(struct strata_model *m, const struct strata_gguf_tensor *t, uint64_t n_in, uint64_t n_out,
                     struct strata_mat *out)
{
    void *data;
    int rc = read_tensor(m, t, &data);
    if (rc) return rc;
    const struct strata_mat host = {data, t->type, (uint32_t)n_in, (uint32_t)n_out,
                                    strata_type_row_bytes(t->type, n_in)};
    return make_view(m, &host, out);
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

// The schema's entry for `name` (every tensor a loader asks for must be in it).
static const struct strata_tensor_spec *spec_of(const struct strata_model *m, const char *name)
{
    const struct strata_tensor_spec *sp = strata_schema_find(&m->schema, name);
    if (!sp) strata_log_error("model_load: %s: tensor '%s' is not in %s's schema", m->file->path, name,
                              strata_arch_name(m->hp.arch));
    return sp;
}

bool strata_model_has(const struct strata_model *m, const char *name)
{
    return strata_schema_find(&m->schema, name) != NULL;
}

// The file's tensor for spec sp with its shape checked; *t NULL (and 0) when an optional one is
// absent.
static int find_checked(struct strata_model *m, const struct strata_tensor_spec *sp,
                        const struct strata_gguf_tensor **t)
{
    *t = find(m, sp->name, !sp->optional);
    if (!*t) return sp->optional ? 0 : STRATA_EFORMAT;
    return check_shape(m, *t, sp->ne[0], sp->ne[1], sp->ne[2]);
}

// An F32 tensor (norms, biases, routers, conv taps): its spec and the file's tensor (NULL when an
// optional one is absent).
static int find_f32(struct strata_model *m, const char *name, const struct strata_tensor_spec **spec,
                    const struct strata_gguf_tensor **out)
{
    const struct strata_tensor_spec *sp = spec_of(m, name);
    if (!sp) return STRATA_EFORMAT;
    const struct strata_gguf_tensor *t;
    int rc = find_checked(m, sp, &t);
    if (rc) return rc;
    if (t && t->type != STRATA_TYPE_F32) {
        strata_log_error("model_load: %s: tensor '%s' is %s; norms, biases and routers must be F32",
                         m->file->path, name, strata_type_name(t->type));
        return STRATA_EUNSUP;
    }
    *spec = sp;
    *out = t;
    return 0;
}

int strata_model_load_vec(struct strata_model *m, const char *name, const float **out)
{
    *out = NULL;
    const struct strata_tensor_spec *sp;
    const struct strata_gguf_tensor *t;
    int rc = find_f32(m, name, &sp, &t);
    if (rc || !t) return rc;
    struct strata_mat view;
    if ((rc = load_view(m, t, sp->ne[0], sp->ne[1] * sp->ne[2], &view))) return rc;
    *out = view.data;
    return 0;
}

int strata_model_load_vec_host(struct strata_model *m, const char *name, const float **out)
{
    *out = NULL;
    const struct strata_tensor_spec *sp;
    const struct strata_gguf_tensor *t;
    int rc = find_f32(m, name, &sp, &t);
    if (rc || !t) return rc;
    return read_tensor(m, t, (void **)out);
}

int strata_model_load_transposed(struct strata_model *m, const char *name, const float **out)
{
    *out = NULL;
    const struct strata_tensor_spec *sp;
    const struct strata_gguf_tensor *t;
    int rc = find_f32(m, name, &sp, &t);
    if (rc || !t) return rc;
    const uint64_t n_in = sp->ne[0], n_out = sp->ne[1];
    float *src = malloc(t->n_bytes ? t->n_bytes : 1);  // the file's layout, not kept
    if (!src) return STRATA_ENOMEM;
    if ((rc = strata_gguf_read_tensor(m->file, t, 0, src, t->n_bytes))) {
        free(src);
        return rc;
    }
    float *tr = own_alloc(m, (size_t)n_in * n_out * sizeof(float), name);
    if (!tr) {
        free(src);
        return STRATA_ENOMEM;
    }
    m->dense_bytes += t->n_bytes;
    for (uint64_t o = 0; o < n_out; o++)
        for (uint64_t i = 0; i < n_in; i++) tr[i * n_out + o] = src[o * n_in + i];
    free(src);
    const struct strata_mat host = {tr, STRATA_TYPE_F32, (uint32_t)n_out, (uint32_t)n_in, n_out * sizeof(float)};
    struct strata_mat view;
    if ((rc = make_view(m, &host, &view))) return rc;
    *out = view.data;
    return 0;
}

int strata_model_load_mat(struct strata_model *m, const char *name, struct strata_mat *out)
{
    memset(out, 0, sizeof *out);
    const struct strata_tensor_spec *sp = spec_of(m, name);
    if (!sp) return STRATA_EFORMAT;
    const struct strata_gguf_tensor *t;
    int rc = find_checked(m, sp, &t);
    if (rc || !t) return rc;
    if (!strata_type_computable(t->type)) {
        strata_log_error("model_load: %s: tensor '%s' has type %s, which strata cannot compute with yet",
                         m->file->path, name, strata_type_name(t->type));
        return STRATA_EUNSUP;
    }
    if (!m->be->iface->supports_type(m->be->ctx, t->type)) {
        strata_log_error("model_load: %s: tensor '%s' has type %s, which the %s backend cannot compute with",
                         m->file->path, name, strata_type_name(t->type), m->be->iface->name);
        return STRATA_EUNSUP;
    }
    return load_view(m, t, sp->ne[0], sp->ne[1] * sp->ne[2], out);
}

int strata_model_load_io(struct strata_model *m)
{
    int rc;
    if ((rc = strata_model_load_mat(m, "token_embd.weight", &m->tok_embd)) ||
        (rc = strata_model_load_vec(m, "output_norm.weight", &m->output_norm)) ||
        (rc = strata_model_load_mat(m, "output.weight", &m->output)))
        return rc;
    if (!m->output.data) m->output = m->tok_embd;  // tied embeddings
    return 0;
}

int strata_model_load_attention(struct strata_model *m, uint32_t l, bool gated)
{
    struct strata_layer *L = &m->layers[l];
    char n[96];
    int rc;
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
    if ((rc = strata_model_load_mat(m, NM("attn_q.weight"), &L->wq)) ||
        (rc = strata_model_load_mat(m, NM("attn_k.weight"), &L->wk)) ||
        (rc = strata_model_load_mat(m, NM("attn_v.weight"), &L->wv)) ||
        (rc = strata_model_load_mat(m, NM("attn_output.weight"), &L->wo)))
        return rc;
    // the architecture's schema says which of the biases and per-head norms it has
    const char *vecs[5] = {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_q_norm.weight", "attn_k_norm.weight"};
    const float **dst[5] = {&L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm};
    for (int i = 0; i < 5; i++) {
        snprintf(n, sizeof n, "blk.%u.%s", l, vecs[i]);
        if (strata_model_has(m, n) && (rc = strata_model_load_vec(m, n, dst[i]))) return rc;
    }
#undef NM
    L->q_gated = gated;
    if (L->wq.n_out > m->max_q_dim) m->max_q_dim = L->wq.n_out;
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
    case STRATA_ARCH_GLM_DSA: return strata_deepseek2_load(m);
    case STRATA_ARCH_GPT_OSS: return strata_gpt_oss_load(m);
    case STRATA_ARCH_COUNT: break;
    }
    return STRATA_EUNSUP;
}

int strata_model_load(struct strata_model **out, const char *path, struct strata_backend *be)
{
    *out = NULL;
    struct strata_model *m = calloc(1, sizeof *m);
    if (!m) return STRATA_ENOMEM;
    m->be = be;
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
    // the loaders take every tensor's shape from the schema (optional q/k norms included)
    const struct strata_schema_opts so = {.qk_norm = true};
    if (rc == 0) rc = strata_schema_build(&m->hp, &so, &m->schema);
    if (rc == 0) arena_open(m);
    if (rc == 0) rc = load_arch(m);
    if (rc) {
        strata_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void strata_model_free(struct strata_model *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_views; i++) m->be->iface->weight_free(m->be->ctx, &m->views[i]);
    free(m->views);
    for (size_t i = 0; i < m->n_owned; i++) strata_big_free(m->owned[i].p, m->owned[i].bytes);
    free(m->owned);
    free(m->layers);
    strata_expert_layout_free(&m->layout);
    strata_schema_free(&m->schema);
    strata_gguf_close(m->file);
    free(m);
}

const struct strata_hparams *strata_model_hparams(const struct strata_model *m) { return &m->hp; }
const struct strata_gguf_file *strata_model_file(const struct strata_model *m) { return m->file; }
struct strata_gguf_file *strata_model_file_rw(struct strata_model *m) { return m->file; }
const struct strata_expert_layout *strata_model_expert_layout(const struct strata_model *m) { return &m->layout; }
uint64_t strata_model_dense_bytes(const struct strata_model *m) { return m->dense_bytes; }

void strata_model_mem_info(const struct strata_model *m, struct strata_model_mem *out)
{
    *out = (struct strata_model_mem){.arena_used = m->arena_used, .arena_cap = m->arena_cap, .aligned = true};
    for (size_t i = 0; i < m->n_views; i++) {
        const struct strata_mat *v = &m->views[i];
        const uint64_t bytes = (uint64_t)v->row_bytes * v->n_out;
        const char *p = v->data;
        if (m->arena && p >= m->arena && p < m->arena + m->arena_used) {
            out->views_in_arena += bytes;
            out->aligned &= ((uintptr_t)p & 63) == 0;
        } else {
            out->views_outside += bytes;
        }
    }
}
