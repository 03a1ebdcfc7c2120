// The engine side of the server: slots and the scheduler thread, on the public API only.
//
// A slot is a session plus the tokens whose KV it holds (toks), so a request that shares a
// prefix with what a slot evaluated only evaluates the rest (prefix reuse; the session is cut
// back to the shared prefix, which recurrent models cannot do: they start over unless the
// prompt extends what they hold). Queued jobs go to the idle slot sharing the longest prefix
// with their prompt (least recently used on ties). The scheduler thread loops: start queued
// jobs on idle slots, then one step over every active slot at once — each slot's next prompt
// chunk or its pending decode token, all in one strata_eval_batch call, so concurrent decodes
// share each layer's expert fetches — then sample, append text, check stops and limits, and wake
// the HTTP threads waiting on the jobs. New prompts join between steps (continuous batching);
// cancelled jobs leave there too, their slot freed.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/sampler.h"
#include "server/server.h"
#include "util/log.h"
#include "util/time.h"

struct slot {
    struct strata_session *sess;
    int32_t *toks;             // [n_toks] tokens in the session's KV, prompt then generated
    int n_toks, cap_toks;
    struct srv_job *job;       // NULL when idle
    int n_prompt_done;         // prompt tokens of job in toks
    int32_t next;              // sampled, not evaluated yet (-1: none)
    struct strata_sampler *smp; // the job's sampler
    struct strata_detok dt;
    float *logits;             // [n_vocab] of the last evaluated token
    int32_t pick;              // its argmax, where the job samples greedily without logprobs
    struct strata_token_logit top[STRATA_TOP_K_MAX];  // its best, where it samples from those
    uint64_t last_used;
};

struct srv_sched {
    struct srv_config cfg;
    struct strata_engine *e;
    int n_vocab, n_ctx;
    struct slot *slots;
    int n_slots;

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;        // queue, slot assignment, stats, stop
    pthread_cond_t cv;
    bool stop;
    struct srv_job **queue;    // ring of q_cap = queue + parallel
    int q_head, q_len, q_cap;
    uint64_t tick;
    struct srv_sched_stats st;
    struct strata_batch_item *items;  // [n_slots] of one step
    int *item_slot;                   // [n_slots] slot of each item
};

static int slot_reserve(struct slot *sl, int n)
{
    if (n <= sl->cap_toks) return 0;
    int cap = sl->cap_toks ? sl->cap_toks : 256;
    while (cap < n) cap *= 2;
    int32_t *t = realloc(sl->toks, (size_t)cap * sizeof *t);
    if (!t) return STRATA_ENOMEM;
    sl->toks = t;
    sl->cap_toks = cap;
    return 0;
}

static int lcp(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

// Log-probabilities of the raw logits: the chosen token and the top n alternatives.
static void fill_logprobs(const float *logits, int n_vocab, int32_t id, int n_top,
                          struct srv_token_lp *lp)
{
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    lp->id = id;
    lp->logprob = (float)(logits[id] - lse);
    lp->n_top = 0;
    for (int i = 0; i < n_vocab; i++) {
        int k = lp->n_top;
        if (k == n_top && (k == 0 || logits[i] <= logits[lp->top_id[k - 1]])) continue;
        if (k < n_top) lp->n_top++;
        else k--;
        while (k > 0 && logits[lp->top_id[k - 1]] < logits[i]) {
            lp->top_id[k] = lp->top_id[k - 1];
            k--;
        }
        lp->top_id[k] = i;
    }
    for (int k = 0; k < lp->n_top; k++) lp->top_logprob[k] = (float)(logits[lp->top_id[k]] - lse);
}

// Under j->mu: append bytes of generated text.
static int job_append(struct srv_job *j, const char *s, size_t n)
{
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) return STRATA_ENOMEM;
        j->text = t;
        j->cap = cap;
    }
    memcpy(j->text + j->len, s, n);
    j->len += n;
    j->text[j->len] = '\0';
    return 0;
}

static void slot_finish(struct srv_sched *s, struct slot *sl, enum srv_finish why, const char *err)
{
    struct srv_job *j = sl->job;
    char tail[8];
    size_t n_tail = 0;
    strata_detok_flush(&sl->dt, tail, sizeof tail, &n_tail);
    pthread_mutex_lock(&j->mu);
    if (why != SRV_FINISH_STOP && n_tail) job_append(j, tail, n_tail);
    j->n_final = j->len;
    j->finish = why;
    if (err) snprintf(j->error, sizeof j->error, "%s", err);
    j->done = true;
    j->t_done = strata_now();
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_lock(&s->mu);
    s->st.active--;
    s->st.generated_tokens += (uint64_t)j->n_gen;
    sl->last_used = ++s->tick;
    pthread_mutex_unlock(&s->mu);
    sl->job = NULL;
    srv_job_unref(j);
}

// Under s->mu: put job j on idle slot sl, reusing the longest prefix the slot holds.
static int slot_start(struct srv_sched *s, struct slot *sl, struct srv_job *j)
{
    int keep = j->prefix_reuse ? lcp(sl->toks, sl->n_toks, j->prompt, j->n_prompt) : 0;
    if (keep >= j->n_prompt) keep = j->n_prompt - 1;  // the last prompt token gives the logits
    if (keep < sl->n_toks && strata_session_truncate(sl->sess, keep) != 0) {
        strata_session_reset(sl->sess);  // recurrent state: only extending reuses it
        keep = 0;
    }
    sl->n_toks = keep;
    int rc = slot_reserve(sl, j->n_prompt + j->max_tokens + 1);
    if (rc == 0) {
        strata_sampler_free(sl->smp);
        sl->smp = NULL;
        rc = strata_sampler_create(&sl->smp, s->e, &j->sp);
    }
    if (rc == 0 && j->top_logprobs >= 0) {
        j->lp = calloc((size_t)j->max_tokens, sizeof *j->lp);
        if (!j->lp) rc = STRATA_ENOMEM;
    }
    sl->job = j;
    sl->n_prompt_done = keep;
    sl->next = -1;
    strata_detok_init(&sl->dt, false);
    pthread_mutex_lock(&j->mu);
    j->n_cached = keep;
    j->started = true;
    j->t_start = strata_now();
    pthread_mutex_unlock(&j->mu);
    s->st.active++;
    s->st.requests++;
    s->st.prompt_tokens += (uint64_t)j->n_prompt;
    s->st.cached_tokens += (uint64_t)keep;
    return rc;
}

// Under s->mu: move queued jobs onto idle slots.
static void assign_queued(struct srv_sched *s)
{
    while (s->q_len > 0) {
        struct srv_job *j = s->queue[s->q_head];
        struct slot *best = NULL;
        int best_keep = -1;
        for (int i = 0; i < s->n_slots; i++) {
            struct slot *sl = &s->slots[i];
            if (sl->job) continue;
            int keep = j->prefix_reuse ? lcp(sl->toks, sl->n_toks, j->prompt, j->n_prompt) : 0;
            if (keep > best_keep || (keep == best_keep && sl->last_used < best->last_used)) {
                best = sl;
                best_keep = keep;
            }
        }
        if (!best) return;
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        s->st.queued = s->q_len;
        if (slot_start(s, best, j)) {
            pthread_mutex_unlock(&s->mu);
            slot_finish(s, best, SRV_FINISH_ERROR, "out of memory starting the request");
            pthread_mutex_lock(&s->mu);
        }
    }
}

// A token was sampled for sl's job: record it, extend the text, decide whether to go on.
static void slot_take_token(struct srv_sched *s, struct slot *sl, int32_t id)
{
    struct srv_job *j = sl->job;
    if (j->top_logprobs >= 0) fill_logprobs(sl->logits, s->n_vocab, id, j->top_logprobs, &j->lp[j->n_gen]);
    pthread_mutex_lock(&j->mu);
    j->n_gen++;
    if (j->n_gen == 1) j->t_first = strata_now();
    pthread_mutex_unlock(&j->mu);
    if (!j->ignore_eos && strata_token_is_eog(s->e, id)) {
        slot_finish(s, sl, SRV_FINISH_EOG, NULL);
        return;
    }
    // A piece of L bytes prints at most 3 * (L + 1) (every byte may become U+FFFD).
    char small[512], *piece = small;
    const char *raw = NULL;
    size_t np = 0, raw_len = 0, cap = sizeof small;
    int stop = -1;
    if (strata_token_piece(s->e, id, false, &raw, &raw_len) == 0 && 3 * (raw_len + 1) > cap) {
        cap = 3 * (raw_len + 1);
        piece = malloc(cap);
    }
    if (piece && strata_detokenize(s->e, &sl->dt, id, piece, cap, &np) == 0 && np) {
        pthread_mutex_lock(&j->mu);
        size_t from = j->len, at = 0, final_len = 0;
        if (job_append(j, piece, np) == 0) {
            stop = srv_stop_find(j->stop, j->n_stop, j->text, j->len, from, &at, &final_len);
            if (stop >= 0) {
                j->len = at;
                j->text[at] = '\0';
                j->stop_index = stop;
            }
            j->n_final = final_len;
        }
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
    }
    if (piece != small) free(piece);
    if (stop >= 0) {
        slot_finish(s, sl, SRV_FINISH_STOP, NULL);
    } else if (j->n_gen >= j->max_tokens || sl->n_toks + 1 > s->n_ctx) {
        slot_finish(s, sl, SRV_FINISH_LENGTH, NULL);
    } else {
        sl->next = id;
    }
}

// One step over every active slot in one strata_eval_batch: the pending decode token of each
// decoding slot, and prompt chunks within what is left of n_batch (at least one token each, so
// every prompt moves).
static void step(struct srv_sched *s)
{
    int n_decoding = 0;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        if (sl->job && atomic_load(&sl->job->cancel)) slot_finish(s, sl, SRV_FINISH_CANCELLED, NULL);
        else if (sl->job && sl->n_prompt_done == sl->job->n_prompt) n_decoding++;
    }
    int budget = s->cfg.n_batch - n_decoding, n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        struct slot *sl = &s->slots[i];
        struct srv_job *j = sl->job;
        if (!j) continue;
        struct strata_batch_item *it = &s->items[n];
        *it = (struct strata_batch_item){sl->sess, &sl->next, 1, sl->logits, false, NULL, 0, NULL};
        if (sl->n_prompt_done < j->n_prompt) {
            int left = j->n_prompt - sl->n_prompt_done;
            it->tokens = j->prompt + sl->n_prompt_done;
            it->n = left < budget ? left : budget > 1 ? budget : 1;
            budget -= it->n;
        }
        // without logprobs the token may depend on less than the row: greedy without a penalty on
        // its argmax, sampling with top-k and no penalty on its best k; the forward pass finds them
        // where the logits are (a GPU sends 4 or 8 k bytes instead of the row)
        const size_t n_history = (size_t)(sl->n_toks + it->n);
        const int k = strata_sampler_top_k(sl->smp, n_history);
        if (j->top_logprobs < 0 && strata_sampler_is_argmax(sl->smp, n_history)) {
            it->logits = NULL;
            it->pick = &sl->pick;
        } else if (j->top_logprobs < 0 && k > 0) {
            it->logits = NULL;
            it->top_k = k;
            it->top = sl->top;
        }
        s->item_slot[n++] = i;
    }
    if (n == 0) return;
    double t0 = strata_now();
    int rc = strata_eval_batch(s->e, s->items, n);
    double dt = strata_now() - t0;
    pthread_mutex_lock(&s->mu);
    s->st.busy_s += dt;
    if (n_decoding) s->st.decode_s += dt;
    s->st.forward_passes++;
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < n; k++) {
        struct slot *sl = &s->slots[s->item_slot[k]];
        const struct strata_batch_item *it = &s->items[k];
        if (rc) {
            // The passes may have stopped part way: what the sessions hold is unknown.
            strata_session_reset(sl->sess);
            sl->n_toks = 0;
            slot_finish(s, sl, SRV_FINISH_ERROR, strata_engine_errmsg(s->e));
            continue;
        }
        memcpy(sl->toks + sl->n_toks, it->tokens, (size_t)it->n * sizeof *it->tokens);
        sl->n_toks += it->n;
        if (sl->n_prompt_done < sl->job->n_prompt) {
            sl->n_prompt_done += it->n;
            if (sl->n_prompt_done < sl->job->n_prompt) continue;
        }
        int32_t id = it->pick  ? sl->pick
                     : it->top ? strata_sampler_sample_top(sl->smp, it->top, it->top_k, (size_t)sl->n_toks)
                               : strata_sample(sl->smp, sl->logits, sl->toks, (size_t)sl->n_toks);
        if (id < 0) {
            slot_finish(s, sl, SRV_FINISH_ERROR, "sampling failed");
            continue;
        }
        slot_take_token(s, sl, id);
    }
}

static void *sched_main(void *arg)
{
    struct srv_sched *s = arg;
    pthread_setname_np(pthread_self(), "strata-sched");
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        assign_queued(s);
        if (s->st.active == 0) {
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        step(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        if (s->slots[i].job) slot_finish(s, &s->slots[i], SRV_FINISH_CANCELLED, "server stopping");
    }
    return NULL;
}

int srv_sched_open(struct srv_sched **out, const struct srv_config *cfg)
{
    *out = NULL;
    struct srv_sched *s = calloc(1, sizeof *s);
    if (!s) return STRATA_ENOMEM;
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    struct strata_engine_params ep = cfg->ep;
    ep.model = cfg->model_path;
    ep.n_threads = cfg->n_threads;
    ep.n_ctx = cfg->n_ctx;
    ep.n_batch = cfg->n_batch;
    ep.n_seq_max = cfg->parallel;  // a memory bound provisions every slot's session
    int rc = strata_engine_open(&s->e, &ep);
    if (rc == 0) {
        struct strata_model_info info;
        strata_engine_info(s->e, &info);
        s->n_vocab = (int)info.n_vocab;
        s->n_slots = cfg->parallel;
        s->slots = calloc((size_t)s->n_slots, sizeof *s->slots);
        s->q_cap = cfg->queue + cfg->parallel;
        s->queue = calloc((size_t)s->q_cap, sizeof *s->queue);
        s->items = calloc((size_t)s->n_slots, sizeof *s->items);
        s->item_slot = calloc((size_t)s->n_slots, sizeof *s->item_slot);
        if (!s->slots || !s->queue || !s->items || !s->item_slot) rc = STRATA_ENOMEM;
    }
    for (int i = 0; rc == 0 && i < s->n_slots; i++) {
        struct strata_session_params sp = {cfg->n_ctx, cfg->n_batch};
        rc = strata_session_create(&s->slots[i].sess, s->e, &sp);
        if (rc == 0) {
            s->slots[i].logits = malloc((size_t)s->n_vocab * sizeof(float));
            if (!s->slots[i].logits) rc = STRATA_ENOMEM;
        }
    }
    if (rc == 0) {
        s->n_ctx = strata_session_n_ctx(s->slots[0].sess);
        struct strata_model_info info;
        strata_engine_info(s->e, &info);
        s->cfg.n_batch = info.n_batch;
        if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
            strata_log_error("serve: cannot start the scheduler thread");
            rc = STRATA_ENOMEM;
        } else {
            s->thread_started = true;
        }
    }
    if (rc) {
        srv_sched_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void srv_sched_close(struct srv_sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->thread_started) pthread_join(s->thread, NULL);
    while (s->q_len > 0) {
        struct srv_job *j = s->queue[s->q_head];
        s->q_head = (s->q_head + 1) % s->q_cap;
        s->q_len--;
        pthread_mutex_lock(&j->mu);
        j->done = true;
        j->finish = SRV_FINISH_CANCELLED;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        srv_job_unref(j);
    }
    for (int i = 0; s->slots && i < s->n_slots; i++) {
        strata_session_free(s->slots[i].sess);
        strata_sampler_free(s->slots[i].smp);
        free(s->slots[i].toks);
        free(s->slots[i].logits);
    }
    free(s->slots);
    free(s->queue);
    free(s->items);
    free(s->item_slot);
    strata_engine_close(s->e);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int srv_sched_submit(struct srv_sched *s, struct srv_job *j)
{
    pthread_mutex_lock(&s->mu);
    int rc = 0;
    int idle = 0;
    for (int i = 0; i < s->n_slots; i++) idle += s->slots[i].job == NULL;
    if (s->stop) {
        rc = -ECANCELED;
    } else if (s->q_len >= s->cfg.queue + idle) {
        rc = -EBUSY;
    } else {
        atomic_fetch_add(&j->refs, 1);
        j->t_submit = strata_now();
        s->queue[(s->q_head + s->q_len) % s->q_cap] = j;
        s->q_len++;
        s->st.queued = s->q_len;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void srv_sched_stats(struct srv_sched *s, struct srv_sched_stats *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    pthread_mutex_unlock(&s->mu);
    struct strata_stats es;
    strata_engine_stats(s->e, &es);
    memcpy(st->experts, es.experts, sizeof st->experts);
    st->kv_bytes = es.kv_bytes;
    st->n_threads = es.n_threads;
    memcpy(st->threads, es.threads, sizeof st->threads);
}

int srv_sched_n_ctx(const struct srv_sched *s)
{
    return s->n_ctx;
}

int srv_sched_n_vocab(const struct srv_sched *s)
{
    return s->n_vocab;
}

const struct strata_engine *srv_sched_engine(const struct srv_sched *s)
{
    return s->e;
}

int srv_sched_tokenize(const struct srv_sched *s, const char *text, int32_t **ids, int *n)
{
    size_t len = strlen(text), cap = 3 * len + 2, got = 0;
    int32_t *buf = malloc(cap * sizeof *buf);
    if (!buf) return STRATA_ENOMEM;
    int rc = strata_tokenize(s->e, text, len, true, true, buf, cap, &got);
    if (rc) {
        free(buf);
        return rc;
    }
    *ids = buf;
    *n = (int)got;
    return 0;
}

int srv_sched_piece(const struct srv_sched *s, int32_t id, const char **piece, size_t *len)
{
    return strata_token_piece(s->e, id, false, piece, len);
}
