// Sessions (include/strata.h): each one a sequence with its own KV cache / recurrent state in the
// backend, evaluated through the engine's one forward pass, one pass at a time (pass_mu).
// strata_eval_batch puts several sessions' tokens into the same passes, so each expert a pass
// needs is fetched once for all of them; each session's results are those it would get alone.
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "gguf/gguf.h"
#include "util/log.h"
#include "util/time.h"

int strata_session_create(struct strata_session **out, struct strata_engine *e, const struct strata_session_params *p)
{
    *out = NULL;
    const struct strata_session_params dflt = {0};
    if (!p) p = &dflt;
    const int n_ctx = p->n_ctx > 0 ? p->n_ctx : e->n_ctx;
    int n_batch = p->n_batch > 0 ? p->n_batch : e->n_batch;
    if (p->n_ctx < 0 || n_ctx > (1 << 24) || p->n_batch < 0 || n_batch > (1 << 16)) {
        strata_log_error("session_create: context %d / batch %d out of range", p->n_ctx, p->n_batch);
        return strata_engine_fail(e, STRATA_EARG);
    }
    if (n_batch > n_ctx) n_batch = n_ctx;
    if (n_batch > e->n_batch) n_batch = e->n_batch;
    struct strata_session *s = calloc(1, sizeof *s);
    if (!s) return strata_engine_fail(e, STRATA_ENOMEM);
    s->e = e;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    int rc = 0;
    pthread_mutex_lock(&e->pass_mu);  // the backend's scratch grows for a longer context
    if (e->params.memory_bound_bytes && (e->n_sessions >= e->n_seq_max || n_ctx > e->n_ctx)) {
        strata_log_error("session_create: the memory bound provisions %d session(s) of %d positions (%d open, %d "
                         "asked for)", e->n_seq_max, e->n_ctx, e->n_sessions, n_ctx);
        rc = STRATA_ENOMEM;
    }
    if (rc == 0) rc = strata_forward_reserve_ctx(e->fwd, n_ctx);
    const bool counted = rc == 0;
    if (counted) e->n_sessions++;
    pthread_mutex_unlock(&e->pass_mu);
    if (rc == 0)
        rc = strata_seq_state_alloc(&s->state, e->m, n_ctx, strata_engine_kv_type(e->kv_k),
                                    strata_engine_kv_type(e->kv_v));
    if (rc == 0) {
        pthread_mutex_lock(&e->pass_mu);
        s->kv_bytes = strata_seq_state_kv_bytes(&s->state, e->m);
        e->stats.kv_bytes += s->kv_bytes;
        pthread_mutex_unlock(&e->pass_mu);
    } else if (counted) {  // the state's allocation failed
        pthread_mutex_lock(&e->pass_mu);
        e->n_sessions--;
        pthread_mutex_unlock(&e->pass_mu);
    }
    if (rc) {
        free(s);
        return strata_engine_fail(e, rc);
    }
    *out = s;
    return 0;
}

void strata_session_free(struct strata_session *s)
{
    if (!s) return;
    strata_seq_state_free(&s->state, s->e->m);
    pthread_mutex_lock(&s->e->pass_mu);
    s->e->stats.kv_bytes -= s->kv_bytes;
    s->e->n_sessions--;
    pthread_mutex_unlock(&s->e->pass_mu);
    if (s->trace && strata_trace_close(s->trace)) strata_engine_fail(s->e, STRATA_EIO);
    free(s);
}

int strata_session_n_ctx(const struct strata_session *s) { return s->n_ctx; }
int strata_session_n_past(const struct strata_session *s) { return s->n_past; }

int strata_session_reset(struct strata_session *s)
{
    s->n_past = 0;
    return strata_engine_fail(s->e, strata_seq_state_reset(&s->state, s->e->m));
}

int strata_session_truncate(struct strata_session *s, int n)
{
    if (n < 0 || n > s->n_past) {
        strata_log_error("session_truncate: %d positions of %d", n, s->n_past);
        return strata_engine_fail(s->e, STRATA_EARG);
    }
    if (n == s->n_past) return 0;
    if (s->state.conv || s->state.ssm) {
        strata_log_error("session_truncate: the model keeps a recurrent state, which cannot go back from "
                         "position %d to %d", s->n_past, n);
        return strata_engine_fail(s->e, STRATA_EUNSUP);
    }
    s->n_past = n;  // attention reads only positions it has written again since
    return 0;
}

void strata_session_set_route_cb(struct strata_session *s, strata_route_cb cb, void *user)
{
    s->route_cb = cb;
    s->route_user = user;
}

static int trace_cb(void *user, const int32_t *ids, int n_tok, uint32_t n_layers, uint32_t k)
{
    (void)n_layers;
    (void)k;
    return strata_trace_write(user, ids, n_tok);
}

int strata_session_trace_file(struct strata_session *s, const char *path)
{
    struct strata_engine *e = s->e;
    const struct strata_hparams *hp = strata_model_hparams(e->m);
    const char *name = NULL;
    strata_gguf_get_str(strata_model_file(e->m), "general.name", &name);
    struct strata_trace_writer *w = NULL;
    int rc = strata_trace_open(&w, path, name, strata_model_expert_layout(e->m)->n_layers, hp->n_expert,
                               hp->n_expert_used);
    if (rc) return strata_engine_fail(e, rc);
    if (s->trace && strata_trace_close(s->trace)) strata_engine_fail(e, STRATA_EIO);
    s->trace = w;
    strata_session_set_route_cb(s, trace_cb, w);
    return 0;
}

void strata_session_stats(const struct strata_session *s, struct strata_stats *out)
{
    *out = s->stats;
    out->kv_bytes = s->kv_bytes;
    strata_engine_expert_stats(s->e, out);
}

// ---- evaluation ------------------------------------------------------------------------------------

static int check_tokens(const struct strata_session *s, const int32_t *tokens, int n)
{
    const uint32_t n_vocab = strata_model_hparams(s->e->m)->n_vocab;
    if (n > s->n_ctx - s->n_past) {
        strata_log_error("session_eval: %d tokens after %d do not fit in the context of %d", n, s->n_past, s->n_ctx);
        return STRATA_EARG;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab) {
            strata_log_error("session_eval: token id %d at position %d is outside the vocabulary (%u)", tokens[i], i,
                             n_vocab);
            return STRATA_EARG;
        }
    return 0;
}

// One item's progress through the passes of a strata_eval_batch call.
struct item_state {
    struct strata_batch_item *it;
    int done;
};

// Run passes until every item is evaluated: each pass takes, item by item, up to the session's
// n_batch of its remaining tokens while the engine's n_batch allows.
static int run_passes(struct strata_engine *e, struct item_state *st, int n_items, struct strata_fwd_seq *seqs,
                      int *seq_item)
{
    const uint32_t V = strata_model_hparams(e->m)->n_vocab;
    for (;;) {
        int n_seq = 0, n_tok = 0;
        for (int i = 0; i < n_items && n_tok < e->n_batch; i++) {
            struct strata_batch_item *it = st[i].it;
            struct strata_session *s = it->s;
            const int left = it->n - st[i].done;
            if (left <= 0) continue;
            int chunk = left < s->n_batch ? left : s->n_batch;
            if (chunk > e->n_batch - n_tok) chunk = e->n_batch - n_tok;
            const bool last = st[i].done + chunk == it->n;
            float *logits = NULL;
            int32_t *pick = NULL;
            struct strata_token_logit *top = NULL;
            if (it->all_logits) {
                if (it->logits) logits = it->logits + (size_t)st[i].done * V;
                if (it->pick) pick = it->pick + st[i].done;
                if (it->top) top = it->top + (size_t)st[i].done * (size_t)it->top_k;
            } else if (last) {
                logits = it->logits, pick = it->pick, top = it->top;
            }
            seqs[n_seq] = (struct strata_fwd_seq){.tokens = it->tokens + st[i].done, .n_tok = chunk, .pos0 = s->n_past,
                                                  .state = &s->state, .logits = logits, .all_logits = it->all_logits,
                                                  .pick = pick, .top_k = top ? it->top_k : 0, .top = top,
                                                  .on_route = s->route_cb, .route_user = s->route_user};
            seq_item[n_seq++] = i;
            n_tok += chunk;
        }
        if (n_seq == 0) return 0;
        struct strata_fwd_stats fs = {0};
        pthread_mutex_lock(&e->pass_mu);
        struct strata_backend_threads th0 = {0}, th1 = {0};
        if (e->be.iface->threads_info) e->be.iface->threads_info(e->be.ctx, &th0);
        const double t0 = strata_now();
        int rc = strata_forward_run(e->fwd, seqs, n_seq, &fs);
        fs.threads.t_pass = strata_now() - t0;
        fs.decode = n_tok == n_seq;
        if (e->be.iface->threads_info) {
            e->be.iface->threads_info(e->be.ctx, &th1);
            fs.n_threads = th1.n_threads;
            fs.threads.runs = th1.runs - th0.runs;
            fs.threads.t_run = th1.run_s - th0.run_s;
            fs.threads.t_tail = th1.tail_s - th0.tail_s;
            fs.threads.t_busy = th1.busy_s - th0.busy_s;
        }
        if (rc == 0) strata_stats_add_pass(&e->stats, &fs, n_tok);
        for (int k = 0; k < n_seq; k++) {  // the caches grew (also in a pass that failed)
            struct strata_session *s = st[seq_item[k]].it->s;
            const uint64_t now = strata_seq_state_kv_bytes(&s->state, e->m);
            e->stats.kv_bytes += now - s->kv_bytes;
            s->kv_bytes = now;
        }
        pthread_mutex_unlock(&e->pass_mu);
        if (rc) return rc;
        for (int k = 0; k < n_seq; k++) {
            struct item_state *is = &st[seq_item[k]];
            struct strata_session *s = is->it->s;
            s->n_past += seqs[k].n_tok;
            is->done += seqs[k].n_tok;
            strata_stats_add_pass(&s->stats, &fs, seqs[k].n_tok);
        }
    }
}

int strata_session_eval(struct strata_session *s, const int32_t *tokens, int n, float *logits, bool all_logits)
{
    if (n <= 0) return 0;
    int rc = check_tokens(s, tokens, n);
    if (rc) return strata_engine_fail(s->e, rc);
    struct strata_batch_item item = {s, tokens, n, logits, all_logits, NULL, 0, NULL};
    struct item_state st = {&item, 0};
    struct strata_fwd_seq seq;
    int seq_item;
    return strata_engine_fail(s->e, run_passes(s->e, &st, 1, &seq, &seq_item));
}

int strata_eval_batch(struct strata_engine *e, struct strata_batch_item *items, int n_items)
{
    if (n_items < 0) {
        strata_log_error("eval_batch: %d items", n_items);
        return strata_engine_fail(e, STRATA_EARG);
    }
    for (int i = 0; i < n_items; i++) {
        if (!items[i].s || items[i].s->e != e || items[i].n < 0) {
            strata_log_error("eval_batch: item %d has no session of this engine or a negative count", i);
            return strata_engine_fail(e, STRATA_EARG);
        }
        for (int j = 0; j < i; j++)
            if (items[j].s == items[i].s) {
                strata_log_error("eval_batch: items %d and %d are the same session", j, i);
                return strata_engine_fail(e, STRATA_EARG);
            }
        if (items[i].top && (items[i].top_k < 1 || items[i].top_k > STRATA_TOP_K_MAX ||
                             (uint32_t)items[i].top_k > strata_model_hparams(e->m)->n_vocab)) {
            strata_log_error("eval_batch: item %d asks for the %d best of each row (1 .. %d, at most the vocabulary)", i,
                             items[i].top_k, STRATA_TOP_K_MAX);
            return strata_engine_fail(e, STRATA_EARG);
        }
        int rc = check_tokens(items[i].s, items[i].tokens, items[i].n);
        if (rc) return strata_engine_fail(e, rc);
    }
    struct item_state *st = calloc((size_t)n_items + 1, sizeof *st);
    struct strata_fwd_seq *seqs = calloc((size_t)n_items + 1, sizeof *seqs);
    int *seq_item = calloc((size_t)n_items + 1, sizeof *seq_item);
    int rc = st && seqs && seq_item ? 0 : STRATA_ENOMEM;
    for (int i = 0; i < n_items && rc == 0; i++) st[i].it = &items[i];
    if (rc == 0) rc = run_passes(e, st, n_items, seqs, seq_item);
    free(st);
    free(seqs);
    free(seq_item);
    return strata_engine_fail(e, rc);
}
