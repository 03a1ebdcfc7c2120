// Sessions: KV cache, chunk scratch (allocated once), the compute pool, prompt chunking. The
// scratch and recurrent state of the newer architectures is allocated by blocks.c.
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "util/log.h"
#include "util/time.h"

static void *xalloc(size_t bytes, int *rc)
{
    void *p = NULL;
    if (*rc) return NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) {
        strata_log_error("session_create: out of memory (%zu bytes)", bytes);
        *rc = STRATA_ENOMEM;
        return NULL;
    }
    memset(p, 0, bytes);
    return p;
}

// Largest activation row (bytes) any weight of the model needs for n elements.
static size_t max_act_row(const struct strata_model *m, uint32_t n)
{
    size_t best = (size_t)n * sizeof(float);
    for (int t = 0; t < STRATA_TYPE_COUNT; t++)
        if (strata_type_computable((uint32_t)t)) {
            const uint32_t vdt = strata_type_traits((uint32_t)t)->vec_dot_type;
            const uint32_t bs = strata_type_traits(vdt)->block_size;
            size_t b = strata_type_row_bytes(vdt, (n + bs - 1) / bs * bs);
            if (b > best) best = b;
        }
    (void)m;
    return best;
}

int strata_session_create(struct strata_session **out, struct strata_model *m,
                          const struct strata_session_params *p)
{
    *out = NULL;
    const struct strata_hparams *hp = &m->hp;
    int n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? (int)hp->n_ctx_train : 4096);
    int n_batch = p->n_batch > 0 ? p->n_batch : 512;
    if (n_ctx > (1 << 24) || n_batch > (1 << 16)) {
        strata_log_error("session_create: context %d / batch %d out of range", n_ctx, n_batch);
        return STRATA_EARG;
    }
    if (n_batch > n_ctx) n_batch = n_ctx;
    struct strata_session *s = calloc(1, sizeof *s);
    if (!s) return STRATA_ENOMEM;
    s->m = m;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    int rc = strata_pool_create(&s->pool, p->n_threads);
    if (rc) {
        free(s);
        return rc;
    }
    const size_t B = (size_t)n_batch, E = hp->n_embd, K = hp->n_expert_used, X = hp->n_expert;
    // q holds [H][query | gate] rows before the split when the attention is gated (qwen3next).
    const size_t QD = (size_t)hp->n_head * hp->head_dim_k * (hp->arch == STRATA_ARCH_QWEN3NEXT ||
                                                             hp->arch == STRATA_ARCH_QWEN35MOE ? 2 : 1);
    const size_t KD = (size_t)hp->n_head_kv * hp->head_dim_k;
    const size_t VD = (size_t)hp->n_head_kv * hp->head_dim_v, OD = (size_t)hp->n_head * hp->head_dim_v;
    const size_t F = hp->n_ff_exp;
    const size_t kv_layer = (size_t)n_ctx * (KD > VD ? KD : VD);
    s->k_cache = xalloc(m->n_kv_layers * kv_layer * sizeof(float), &rc);
    s->v_cache = xalloc(m->n_kv_layers * kv_layer * sizeof(float), &rc);
    s->x = xalloc(B * E * sizeof(float), &rc);
    s->h = xalloc(B * E * sizeof(float), &rc);
    s->q = xalloc(B * QD * sizeof(float), &rc);
    s->k = xalloc(B * KD * sizeof(float), &rc);
    s->v = xalloc(B * VD * sizeof(float), &rc);
    s->attn = xalloc(B * OD * sizeof(float), &rc);
    s->o = xalloc(B * E * sizeof(float), &rc);
    s->router_logits = xalloc(B * X * sizeof(float), &rc);
    s->routes = xalloc(B * K * sizeof *s->routes, &rc);
    s->route_of = xalloc(B * K * sizeof *s->route_of, &rc);
    s->gate_out = xalloc(B * K * F * sizeof(float), &rc);
    s->up_out = xalloc(B * K * F * sizeof(float), &rc);
    s->down_out = xalloc(B * K * E * sizeof(float), &rc);
    size_t dim_max = E > QD ? E : QD;
    if (OD > dim_max) dim_max = OD;
    if (F > dim_max) dim_max = F;
    if (m->max_act_dim > dim_max) dim_max = m->max_act_dim;
    s->act_bytes = B * K * max_act_row(m, (uint32_t)dim_max);
    s->act_a = xalloc(s->act_bytes, &rc);
    s->act_b = xalloc(s->act_bytes, &rc);
    s->idx_a = xalloc(B * K * sizeof(int32_t), &rc);
    s->idx_b = xalloc(B * K * sizeof(int32_t), &rc);
    s->expert_ids = xalloc(X * sizeof(uint32_t), &rc);
    s->views = xalloc(X * sizeof *s->views, &rc);
    s->expert_first = xalloc(X * sizeof(int32_t), &rc);
    s->expert_count = xalloc(X * sizeof(int32_t), &rc);
    s->att_scratch = xalloc((size_t)strata_pool_size(s->pool) * (size_t)n_ctx * sizeof(float), &rc);
    s->logits_tmp = xalloc((size_t)hp->n_vocab * sizeof(float), &rc);
    if (m->trace) s->trace_ids = xalloc(B * m->layout.n_layers * K * sizeof(int32_t), &rc);
    if (rc == 0) rc = strata_session_alloc_extra(s);
    if (rc) {
        strata_session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void strata_session_free(struct strata_session *s)
{
    if (!s) return;
    strata_pool_free(s->pool);
    strata_session_free_extra(s);
    void *bufs[] = {s->k_cache, s->v_cache, s->x, s->h, s->q, s->k, s->v, s->attn, s->o,
                    s->router_logits, s->routes, s->route_of, s->gate_out, s->up_out, s->down_out,
                    s->act_a, s->act_b, s->idx_a, s->idx_b, s->expert_ids, s->views,
                    s->expert_first, s->expert_count, s->att_scratch, s->logits_tmp, s->trace_ids};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(s);
}

int strata_session_n_ctx(const struct strata_session *s) { return s->n_ctx; }
int strata_session_n_past(const struct strata_session *s) { return s->n_past; }
void strata_session_reset(struct strata_session *s)
{
    s->n_past = 0;
    strata_session_reset_extra(s);
}
void strata_session_stats(const struct strata_session *s, struct strata_phase_stats *st) { *st = s->stats; }

int strata_session_eval(struct strata_session *s, const int32_t *tokens, int n, float *logits,
                        bool all_logits)
{
    const struct strata_hparams *hp = &s->m->hp;
    if (n <= 0) return 0;
    if (n > s->n_ctx - s->n_past) {
        strata_log_error("session_eval: %d tokens after %d do not fit in the context of %d", n,
                         s->n_past, s->n_ctx);
        return STRATA_EARG;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= hp->n_vocab) {
            strata_log_error("session_eval: token id %d at position %d is outside the vocabulary (%u)",
                             tokens[i], i, hp->n_vocab);
            return STRATA_EARG;
        }
    for (int done = 0; done < n;) {
        int chunk = n - done < s->n_batch ? n - done : s->n_batch;
        bool last = done + chunk == n;
        float *out = NULL;
        if (logits && all_logits) out = logits + (size_t)done * hp->n_vocab;
        else if (logits && last) out = logits;
        int rc = strata_model_forward(s, tokens + done, chunk, out, all_logits);
        if (rc) return rc;
        s->n_past += chunk;
        done += chunk;
        s->stats.n_tokens += (uint64_t)chunk;
        s->stats.n_chunks++;
    }
    return 0;
}
