// Sampling and the generation loop (include/strata.h): prompt, then sample → detokenize → stop
// checks → evaluate, one token at a time, with stop strings held back from the token callback
// until they can no longer match.
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "sample/sampler.h"
#include "util/log.h"
#include "util/time.h"

static struct strata_sampler_params sampler_params(const struct strata_sampling *p)
{
    return (struct strata_sampler_params){p->temperature, p->top_k, p->top_p, p->min_p, p->repeat_penalty,
                                          p->repeat_last_n, p->seed};
}

struct strata_sampling strata_sampling_default(void)
{
    const struct strata_sampler_params d = strata_sampler_default_params();
    return (struct strata_sampling){d.temperature, d.top_k, d.top_p, d.min_p, d.repeat_penalty, d.repeat_last_n, d.seed};
}

int strata_sampler_create(struct strata_sampler **out, const struct strata_engine *e, const struct strata_sampling *p)
{
    *out = NULL;
    struct strata_sampler *smp = calloc(1, sizeof *smp);
    if (!smp) return STRATA_ENOMEM;
    int rc = strata_sampler_init(smp, sampler_params(p), (int32_t)strata_model_hparams(e->m)->n_vocab);
    if (rc) {
        free(smp);
        return strata_engine_fail((struct strata_engine *)e, rc);
    }
    *out = smp;
    return 0;
}

void strata_sampler_free(struct strata_sampler *smp)
{
    if (!smp) return;
    strata_sampler_clear(smp);
    free(smp);
}

int32_t strata_sample(struct strata_sampler *smp, const float *logits, const int32_t *history, size_t n_history)
{
    return strata_sampler_sample(smp, logits, history, n_history);
}

int strata_sample_top_k(const struct strata_sampler *smp, size_t n_history)
{
    return strata_sampler_top_k(smp, n_history);
}

int32_t strata_sample_top(struct strata_sampler *smp, const struct strata_token_logit *top, int k, size_t n_history)
{
    return strata_sampler_sample_top(smp, top, k, n_history);
}

// ---- generation -----------------------------------------------------------------------------------

// The generated text and how much of it the callback has seen.
struct text_out {
    char *s;
    size_t len, cap, released;
    const char *const *stop;
    int n_stop;
};

static int text_append(struct text_out *t, const char *p, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = (t->len + n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) return STRATA_ENOMEM;
        t->s = s;
        t->cap = cap;
    }
    memcpy(t->s + t->len, p, n);
    t->len += n;
    t->s[t->len] = 0;
    return 0;
}

// The earliest stop string in the text (cut there: *index set, true), else false.
static bool text_stop(struct text_out *t, size_t searched, int *index)
{
    size_t best = t->len + 1;
    for (int i = 0; i < t->n_stop; i++) {
        const size_t sl = strlen(t->stop[i]);
        const size_t from = searched > sl ? searched - sl : 0;
        const char *hit = t->len >= sl ? memmem(t->s + from, t->len - from, t->stop[i], sl) : NULL;
        if (hit && (size_t)(hit - t->s) < best) {
            best = (size_t)(hit - t->s);
            *index = i;
        }
    }
    if (best > t->len) return false;
    t->len = best;
    t->s[best] = 0;
    return true;
}

// Bytes at the end of the text that begin some stop string (held back from the callback).
static size_t text_held(const struct text_out *t)
{
    size_t held = 0;
    for (int i = 0; i < t->n_stop; i++) {
        const size_t sl = strlen(t->stop[i]);
        for (size_t k = sl - 1; k > held; k--)
            if (k <= t->len - t->released && memcmp(t->s + t->len - k, t->stop[i], k) == 0) {
                held = k;
                break;
            }
    }
    return held;
}

static int check_params(const struct strata_generate_params *p, int n_prompt)
{
    if (n_prompt < 1 || p->n_predict < 0 || p->n_stop < 0 || (p->n_stop && !p->stop)) {
        strata_log_error("generate: %d prompt tokens, n_predict %d, %d stop strings", n_prompt, p->n_predict, p->n_stop);
        return STRATA_EARG;
    }
    for (int i = 0; i < p->n_stop; i++)
        if (!p->stop[i] || !p->stop[i][0]) {
            strata_log_error("generate: stop string %d is empty", i);
            return STRATA_EARG;
        }
    return 0;
}

// What an evaluation leaves for the choice of the next token: where the sampler takes the plain
// argmax (greedy, no penalty) the pick; where it starts from the row's k best (top-k, no
// penalty) those; else the logits. A GPU then picks or selects on the device.
struct choice {
    float *logits;  // [n_vocab]
    int32_t pick;   // >= 0: the pick
    int top_k;      // > 0: top[0..top_k) the row's best
    struct strata_token_logit top[STRATA_TOP_K_MAX];
};

// Evaluate n tokens for the choice of the next one, which the sampler makes with n_history tokens
// of history.
static int eval_next(struct strata_session *s, const int32_t *tokens, int n, const struct strata_sampler *smp,
                     size_t n_history, struct choice *c)
{
    const bool argmax = strata_sampler_is_argmax(smp, n_history);
    c->pick = -1;
    c->top_k = argmax ? 0 : strata_sampler_top_k(smp, n_history);
    float *logits = argmax || c->top_k ? NULL : c->logits;
    int32_t *pick = argmax ? &c->pick : NULL;
    struct strata_batch_item it = {s, tokens, n, logits, false, pick, c->top_k, c->top_k ? c->top : NULL};
    return strata_eval_batch(s->e, &it, 1);
}

static int32_t choose(struct strata_sampler *smp, const struct choice *c, const int32_t *hist, size_t n_history)
{
    if (c->pick >= 0) return c->pick;
    if (c->top_k) return strata_sampler_sample_top(smp, c->top, c->top_k, n_history);
    return strata_sampler_sample(smp, c->logits, hist, n_history);
}

static bool cancelled(const struct strata_generate_params *p)
{
    return p->cancel && atomic_load(p->cancel);
}

// The loop after the prompt: sample, detokenize, stop checks, evaluate the token.
static int decode(struct strata_session *s, const struct strata_generate_params *p, struct strata_sampler *smp,
                  struct choice *c, int32_t *hist, int n_prompt, int n_predict, struct text_out *t,
                  struct strata_generate_result *r)
{
    struct strata_engine *e = s->e;
    struct strata_detok dt;
    strata_detok_init(&dt, false);
    char piece[1024];
    int n_gen = 0, rc = 0;
    r->stop = STRATA_STOP_LENGTH;
    while (n_gen < n_predict) {
        if (cancelled(p)) {
            r->stop = STRATA_STOP_CANCEL;
            break;
        }
        const int32_t id = choose(smp, c, hist, (size_t)(n_prompt + n_gen));
        if (id < 0) return id;
        hist[n_prompt + n_gen++] = id;
        if (!p->ignore_eos && strata_tokenizer_is_eog(e->tok, id)) {
            r->stop = STRATA_STOP_EOG;
            if (p->on_token && p->on_token(p->user, id, "", 0)) r->stop = STRATA_STOP_CALLBACK;
            break;
        }
        size_t np = 0;
        const size_t searched = t->len;
        if (strata_detok_push(&dt, e->tok, id, piece, sizeof piece, &np) == 0 && np &&
            (rc = text_append(t, piece, np)))
            return rc;
        const bool stopped = text_stop(t, searched, &r->stop_index);
        const size_t upto = stopped ? t->len : t->len - text_held(t);
        const size_t from = t->released;
        t->released = upto > from ? upto : from;
        if (p->on_token && p->on_token(p->user, id, t->s ? t->s + from : "", t->released - from) && !stopped) {
            r->stop = STRATA_STOP_CALLBACK;
            break;
        }
        if (stopped) {
            r->stop = STRATA_STOP_STRING;
            break;
        }
        if (n_gen == n_predict) break;
        if ((rc = eval_next(s, &id, 1, smp, (size_t)(n_prompt + n_gen), c))) return rc;
    }
    r->n_generated = n_gen;
    if (r->stop == STRATA_STOP_STRING) return 0;
    // what is left: an unfinished character, and text held back for stop strings
    size_t np = 0;
    strata_detok_flush(&dt, piece, sizeof piece, &np);
    if (np && (rc = text_append(t, piece, np))) return rc;
    if (t->len > t->released && p->on_token) p->on_token(p->user, -1, t->s + t->released, t->len - t->released);
    t->released = t->len;
    return 0;
}

int strata_generate(struct strata_session *s, const int32_t *prompt, int n_prompt, const struct strata_generate_params *p,
                    struct strata_generate_result *r)
{
    memset(r, 0, sizeof *r);
    struct strata_engine *e = s->e;
    int rc = check_params(p, n_prompt);
    if (rc) return strata_engine_fail(e, rc);
    const uint32_t V = strata_model_hparams(e->m)->n_vocab;
    struct strata_sampler smp = {0};
    struct text_out t = {.stop = p->stop, .n_stop = p->n_stop};
    struct choice *c = malloc(sizeof *c);
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t *hist = malloc(((size_t)n_prompt + (size_t)p->n_predict + 1) * sizeof *hist);
    rc = c && logits && hist ? strata_sampler_init(&smp, sampler_params(&p->sampling), (int32_t)V) : STRATA_ENOMEM;
    if (rc == 0) {
        c->logits = logits;
        memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
        r->n_prompt = n_prompt;
        const double t0 = strata_now();
        rc = eval_next(s, prompt, n_prompt, &smp, (size_t)n_prompt, c);
        r->t_prompt = strata_now() - t0;
    }
    if (rc == 0) {
        int n_predict = p->n_predict;
        if (s->n_past + n_predict > s->n_ctx) n_predict = s->n_ctx - s->n_past;
        const double t1 = strata_now();
        rc = decode(s, p, &smp, c, hist, n_prompt, n_predict, &t, r);
        r->t_decode = strata_now() - t1;
    }
    if (rc == 0 && !t.s) rc = text_append(&t, "", 0);
    if (rc == 0) {
        r->text = t.s;
        r->text_len = t.len;
        r->tokens = malloc(((size_t)r->n_generated + 1) * sizeof *r->tokens);
        if (!r->tokens) rc = STRATA_ENOMEM;
        else memcpy(r->tokens, hist + n_prompt, (size_t)r->n_generated * sizeof *r->tokens);
    }
    strata_sampler_clear(&smp);
    free(c);
    free(logits);
    free(hist);
    if (rc) {
        if (r->text != t.s) free(t.s);
        strata_generate_result_free(r);
    }
    return strata_engine_fail(e, rc);
}

void strata_generate_result_free(struct strata_generate_result *r)
{
    free(r->text);
    free(r->tokens);
    r->text = NULL;
    r->tokens = NULL;
}
