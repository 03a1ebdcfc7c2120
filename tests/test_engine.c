// The public engine API (include/strata.h) on tiny synthetic models (qwen3moe, and qwen3next for
// the delta-net's recurrent state): two sessions of one engine evaluated concurrently from two
// threads give bit for bit the logits each gives alone; so do two sessions sharing forward passes
// in strata_eval_batch, also with an expert cache far below the experts' size; generation stops at
// stop strings (text cut before the match, never shown to the token callback) and at the cancel
// flag; errors come back as codes with the engine's last error message. Built with TSAN=1 this
// runs under ThreadSanitizer.
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "check.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "model/forward.h"
#include "model/model.h"
#include "sample/sampler.h"
#include "strata.h"
#include "tools/synth.h"
#include "util/log.h"
#include "util/mem.h"

#define N_PROMPT 21
#define N_STEPS 6   // single-token evaluations after the prompt

static char g_dir[] = "/tmp/strata-test-engine-XXXXXX";

static void drop_line(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

// Expected errors are not printed. Set only while no other thread logs.
static void quiet(bool on) { strata_log_set_sink(on ? drop_line : NULL, NULL); }

// The token sequence of a session: a prompt, then one token at a time.
static void tokens_of(int which, int32_t *t, int n)
{
    uint32_t s = 1234u + 977u * (uint32_t)which;
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        t[i] = (int32_t)((s >> 8) % 1000u);
    }
}

// Evaluate sequence `which` on s: the prompt with every position's logits, then the steps; all
// logits into out ([N_PROMPT + N_STEPS][n_vocab]).
static int run_sequence(struct strata_session *s, int which, float *out, size_t n_vocab)
{
    int32_t t[N_PROMPT + N_STEPS];
    tokens_of(which, t, N_PROMPT + N_STEPS);
    int rc = strata_session_eval(s, t, N_PROMPT, out, true);
    for (int i = 0; i < N_STEPS && rc == 0; i++)
        rc = strata_session_eval(s, &t[N_PROMPT + i], 1, out + (size_t)(N_PROMPT + i) * n_vocab, false);
    return rc;
}

struct worker {
    pthread_t th;
    struct strata_engine *e;
    int which, rounds;
    float *out;
    size_t n_vocab;
    int rc;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct strata_session *s = NULL;
    w->rc = strata_session_create(&s, w->e, NULL);
    for (int r = 0; r < w->rounds && w->rc == 0; r++) {
        w->rc = strata_session_reset(s);
        if (w->rc == 0) w->rc = run_sequence(s, w->which, w->out, w->n_vocab);
    }
    strata_session_free(s);
    return NULL;
}

static int count_passes(void *user, const int32_t *ids, int n_tok, uint32_t n_layers, uint32_t k)
{
    (void)ids, (void)n_layers, (void)k;
    *(int *)user += n_tok;
    return 0;
}

// Alone, then two threads at once, then both in strata_eval_batch: the same bits.
// ctx1: the second session's context (0: the engine's), so that sequences of different lengths
// share passes.
static void test_sessions(const char *model, uint64_t cache_bytes, const char *label, int ctx1)
{
    const int before = g_failures;
    struct strata_engine_params p = strata_engine_default_params();
    p.model = model;
    p.n_threads = 2;
    p.n_batch = 8;   // prompts take several passes
    p.host_cache_bytes = cache_bytes;
    struct strata_engine *e = NULL;
    int rc = strata_engine_open(&e, &p);
    CHECK(rc == 0, "%s: engine_open: %s", label, strata_last_error());
    if (rc) return;
    struct strata_model_info info;
    strata_engine_info(e, &info);
    const size_t V = info.n_vocab, per = (size_t)(N_PROMPT + N_STEPS) * V;
    float *ref = calloc(2 * per, sizeof(float)), *got = calloc(2 * per, sizeof(float));
    struct strata_session *s[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        const struct strata_session_params sp = {.n_ctx = i ? ctx1 : 0};
        CHECK(strata_session_create(&s[i], e, &sp) == 0, "%s: session_create", label);
        CHECK(run_sequence(s[i], i, ref + i * per, V) == 0, "%s: alone %d: %s", label, i, strata_engine_errmsg(e));
    }

    // two threads, each its own session, two rounds
    struct worker w[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct worker){.e = e, .which = i, .rounds = 2, .out = got + i * per, .n_vocab = V};
        pthread_create(&w[i].th, NULL, worker_main, &w[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(w[i].th, NULL);
        CHECK(w[i].rc == 0, "%s: thread %d: %s", label, i, strata_engine_errmsg(e));
        CHECK(memcmp(ref + i * per, got + i * per, per * sizeof(float)) == 0,
              "%s: session %d run concurrently differs from alone", label, i);
    }

    // both sessions' prompts in shared passes (different lengths), then their steps together
    memset(got, 0, 2 * per * sizeof(float));
    int32_t t[2][N_PROMPT + N_STEPS];
    int routed[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        tokens_of(i, t[i], N_PROMPT + N_STEPS);
        strata_session_reset(s[i]);
        strata_session_set_route_cb(s[i], count_passes, &routed[i]);
    }
    struct strata_batch_item items[2] = {{s[0], t[0], N_PROMPT, got, true, NULL, 0, NULL},
                                         {s[1], t[1], N_PROMPT - 5, got + per, true, NULL, 0, NULL}};
    CHECK(strata_eval_batch(e, items, 2) == 0, "%s: eval_batch: %s", label, strata_engine_errmsg(e));
    items[1] = (struct strata_batch_item){s[1], t[1] + N_PROMPT - 5, 5, got + per + (size_t)(N_PROMPT - 5) * V, true, NULL, 0, NULL};
    CHECK(strata_eval_batch(e, &items[1], 1) == 0, "%s: eval_batch tail", label);
    for (int k = 0; k < N_STEPS; k++) {
        struct strata_batch_item step[2] = {
            {s[0], &t[0][N_PROMPT + k], 1, got + (size_t)(N_PROMPT + k) * V, false, NULL, 0, NULL},
            {s[1], &t[1][N_PROMPT + k], 1, got + per + (size_t)(N_PROMPT + k) * V, false, NULL, 0, NULL}};
        CHECK(strata_eval_batch(e, step, 2) == 0, "%s: eval_batch step %d", label, k);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(memcmp(ref + i * per, got + i * per, per * sizeof(float)) == 0,
              "%s: session %d in shared passes differs from alone", label, i);
        CHECK(routed[i] == (info.n_moe_layers ? N_PROMPT + N_STEPS : 0), "%s: route callback saw %d tokens of %d",
              label, routed[i], N_PROMPT + N_STEPS);
        CHECK(strata_session_n_past(s[i]) == N_PROMPT + N_STEPS, "%s: n_past %d", label, strata_session_n_past(s[i]));
    }
    // picks: the argmax of each row logits would get, with the logits or without them (the rows
    // then stay in the forward pass's scratch, several sessions' rows in one group)
    int32_t pk[2][N_PROMPT + N_STEPS];
    for (int i = 0; i < 2; i++) {
        strata_session_reset(s[i]);
        strata_session_set_route_cb(s[i], NULL, NULL);
        for (int j = 0; j < N_PROMPT + N_STEPS; j++) pk[i][j] = -1;
    }
    float *last = calloc(V, sizeof(float));
    struct strata_batch_item pitems[2] = {{s[0], t[0], N_PROMPT, NULL, true, pk[0], 0, NULL},
                                          {s[1], t[1], N_PROMPT, last, false, &pk[1][N_PROMPT - 1], 0, NULL}};
    CHECK(strata_eval_batch(e, pitems, 2) == 0, "%s: eval_batch with picks: %s", label, strata_engine_errmsg(e));
    CHECK(memcmp(last, ref + per + (size_t)(N_PROMPT - 1) * V, V * sizeof(float)) == 0, "%s: logits beside a pick",
          label);
    for (int k = 0; k < N_STEPS; k++) {
        struct strata_batch_item step[2] = {{s[0], &t[0][N_PROMPT + k], 1, NULL, false, &pk[0][N_PROMPT + k], 0, NULL},
                                            {s[1], &t[1][N_PROMPT + k], 1, NULL, false, &pk[1][N_PROMPT + k], 0, NULL}};
        CHECK(strata_eval_batch(e, step, 2) == 0, "%s: eval_batch pick step %d", label, k);
    }
    int bad_picks = 0;
    for (int i = 0; i < 2; i++)
        for (int j = i ? N_PROMPT - 1 : 0; j < N_PROMPT + N_STEPS; j++)
            bad_picks += pk[i][j] != strata_argmax(ref + i * per + (size_t)j * V, (int32_t)V);
    CHECK(bad_picks == 0, "%s: %d picks differ from the argmax of the logits", label, bad_picks);
    // the best k of each row (a sampler's candidates): every row of session 0 without logits and
    // session 1's last row beside its logits and a pick, then steps where the two ask for different
    // k in one group; each = strata_top_k of the reference row
    enum { K0 = 40, K1 = STRATA_TOP_K_MAX };
    struct strata_token_logit *tp0 = calloc((size_t)(N_PROMPT + N_STEPS) * K0, sizeof *tp0);
    struct strata_token_logit *tp1 = calloc(K1, sizeof *tp1), *want = calloc(K1, sizeof *want);
    for (int i = 0; i < 2; i++) strata_session_reset(s[i]);
    int32_t pick1 = -1;
    struct strata_batch_item titems[2] = {{s[0], t[0], N_PROMPT, NULL, true, NULL, K0, tp0},
                                          {s[1], t[1], N_PROMPT, last, false, &pick1, 7, tp1}};
    CHECK(strata_eval_batch(e, titems, 2) == 0, "%s: eval_batch with top: %s", label, strata_engine_errmsg(e));
    const float *row1 = ref + per + (size_t)(N_PROMPT - 1) * V;
    strata_top_k(row1, (int32_t)V, 7, want);
    CHECK(memcmp(tp1, want, 7 * sizeof *want) == 0 && memcmp(last, row1, V * sizeof(float)) == 0 &&
              pick1 == strata_argmax(row1, (int32_t)V),
          "%s: top 7, logits and pick of one row together", label);
    int bad_top = 0;
    for (int k = 0; k < N_STEPS; k++) {
        struct strata_token_logit *t0 = tp0 + (size_t)(N_PROMPT + k) * K0;
        struct strata_batch_item step[2] = {{s[0], &t[0][N_PROMPT + k], 1, NULL, false, NULL, K0, t0},
                                            {s[1], &t[1][N_PROMPT + k], 1, NULL, false, NULL, K1, tp1}};
        CHECK(strata_eval_batch(e, step, 2) == 0, "%s: eval_batch top step %d", label, k);
        strata_top_k(ref + per + (size_t)(N_PROMPT + k) * V, (int32_t)V, K1, want);
        bad_top += memcmp(tp1, want, K1 * sizeof *want) != 0;
    }
    for (int j = 0; j < N_PROMPT + N_STEPS; j++) {
        strata_top_k(ref + (size_t)j * V, (int32_t)V, K0, want);
        bad_top += memcmp(tp0 + (size_t)j * K0, want, K0 * sizeof *want) != 0;
    }
    CHECK(bad_top == 0, "%s: %d rows' best differ from strata_top_k of the logits", label, bad_top);
    struct strata_batch_item bad = {s[0], t[0], 1, NULL, false, NULL, STRATA_TOP_K_MAX + 1, tp1};
    quiet(true);
    CHECK(strata_eval_batch(e, &bad, 1) == STRATA_EARG, "%s: top_k past STRATA_TOP_K_MAX", label);
    bad.top_k = 0;
    CHECK(strata_eval_batch(e, &bad, 1) == STRATA_EARG, "%s: top_k 0 with top", label);
    quiet(false);
    free(tp0);
    free(tp1);
    free(want);
    free(last);
    struct strata_batch_item twice[2] = {{s[0], t[0], 1, NULL, false, NULL, 0, NULL}, {s[0], t[0], 1, NULL, false, NULL, 0, NULL}};
    quiet(true);
    CHECK(strata_eval_batch(e, twice, 2) == STRATA_EARG, "%s: a session twice in one batch", label);
    quiet(false);
    struct strata_stats st;
    strata_engine_stats(e, &st);
    CHECK(st.n_tokens > 0 && st.experts[STRATA_TIER_HOST].present, "%s: engine stats", label);
    for (int i = 0; i < 2; i++) strata_session_free(s[i]);
    free(ref);
    free(got);
    strata_engine_close(e);
    case_result(label, before);
}

struct collect {
    char text[4096];
    size_t len;
    int calls;
};

static int collect_cb(void *user, int32_t tok, const char *text, size_t len)
{
    (void)tok;
    struct collect *c = user;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
    }
    c->calls++;
    return 0;
}

// Stop strings, the callback's text, cancellation and errors.

// Whether want[0..n) are the tokens a loop of strata_session_eval's logits and strata_sample
// gives after the prompt with these sampling params.
static bool generation_is_loop(struct strata_engine *e, const int32_t *prompt, int n_prompt,
                               const struct strata_sampling *sp, const int32_t *want, int n)
{
    struct strata_session *m = NULL;
    struct strata_sampler *smp = NULL;
    struct strata_model_info info;
    strata_engine_info(e, &info);
    float *lg = malloc(info.n_vocab * sizeof(float));
    int32_t *hist = malloc((size_t)(n_prompt + n) * sizeof *hist);
    bool same = lg && hist && strata_session_create(&m, e, NULL) == 0 && strata_sampler_create(&smp, e, sp) == 0 &&
                strata_session_eval(m, prompt, n_prompt, lg, false) == 0 && n > 0;
    if (same) memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    for (int k = 0; same && k < n; k++) {
        hist[n_prompt + k] = strata_sample(smp, lg, hist, (size_t)(n_prompt + k));
        same = hist[n_prompt + k] == want[k] &&
               (k == n - 1 || strata_session_eval(m, &hist[n_prompt + k], 1, lg, false) == 0);
    }
    free(lg);
    free(hist);
    strata_sampler_free(smp);
    strata_session_free(m);
    return same;
}

static void test_generate(const char *model)
{
    const int before = g_failures;
    struct strata_engine_params p = strata_engine_default_params();
    p.model = model;
    p.n_threads = 2;
    struct strata_engine *e = NULL;
    if (strata_engine_open(&e, &p)) {
        CHECK(0, "engine_open: %s", strata_last_error());
        return;
    }
    struct strata_session *s = NULL;
    strata_session_create(&s, e, NULL);
    int32_t prompt[64];
    size_t n_prompt = 0;
    CHECK(strata_tokenize(e, "The expert store", 16, true, true, prompt, 64, &n_prompt) == 0, "tokenize");
    struct strata_generate_params gp = {.n_predict = 40, .sampling = strata_sampling_default(), .ignore_eos = true};
    gp.sampling.temperature = 0;
    struct collect c = {0};
    gp.on_token = collect_cb;
    gp.user = &c;
    struct strata_generate_result full;
    CHECK(strata_generate(s, prompt, (int)n_prompt, &gp, &full) == 0, "generate: %s", strata_engine_errmsg(e));
    CHECK(full.n_generated == 40 && full.stop == STRATA_STOP_LENGTH, "40 tokens, stop %d", (int)full.stop);
    CHECK(c.len == full.text_len && memcmp(c.text, full.text, c.len) == 0, "callback text = result text");
    // greedy generation takes the forward pass's picks, sampled generation with top-k its
    // candidates: the tokens a loop of logits and the sampler gives
    CHECK(generation_is_loop(e, prompt, (int)n_prompt, &gp.sampling, full.tokens, 40),
          "greedy generation = the logits' loop");
    {
        struct strata_generate_params sp = {.n_predict = 40, .sampling = strata_sampling_default(), .ignore_eos = true};
        sp.sampling.seed = 3;
        struct strata_session *g = NULL;
        struct strata_generate_result sr;
        CHECK(strata_session_create(&g, e, NULL) == 0 && strata_generate(g, prompt, (int)n_prompt, &sp, &sr) == 0,
              "sampled generate: %s", strata_engine_errmsg(e));
        CHECK(generation_is_loop(e, prompt, (int)n_prompt, &sp.sampling, sr.tokens, sr.n_generated),
              "sampled generation (top-k from the forward pass) = the logits' loop");
        sp.sampling.repeat_penalty = 1.1f;  // a penalty: the logits, not the candidates
        strata_session_reset(g);
        strata_generate_result_free(&sr);
        CHECK(strata_generate(g, prompt, (int)n_prompt, &sp, &sr) == 0 &&
                  generation_is_loop(e, prompt, (int)n_prompt, &sp.sampling, sr.tokens, sr.n_generated),
              "sampled generation with a penalty = the logits' loop");
        strata_generate_result_free(&sr);
        strata_session_free(g);
    }
    // where the host threads' time went: one prompt pass, 39 decode passes (the first token comes
    // from the prompt's logits), each with its time in runs within the pass and the work within
    // the threads' time in runs
    struct strata_stats st;
    strata_session_stats(s, &st);
    CHECK(st.n_threads == 2, "threads %d", st.n_threads);
    CHECK(st.threads[0].passes == 1 && st.threads[1].passes == 39, "passes: prompt %llu, decode %llu",
          (unsigned long long)st.threads[0].passes, (unsigned long long)st.threads[1].passes);
    for (int k = 0; k < 2; k++) {
        const struct strata_thread_stats *t = &st.threads[k];
        CHECK(t->runs > 0 && t->t_pass > 0 && t->t_run > 0 && t->t_run <= t->t_pass && t->t_tail <= t->t_run &&
                  t->t_busy > 0 && t->t_busy <= 2 * t->t_run + 1e-6,
              "threads[%d]: %llu runs, pass %.4f s, runs %.4f s, tail %.4f s, busy %.4f s", k,
              (unsigned long long)t->runs, t->t_pass, t->t_run, t->t_tail, t->t_busy);
    }

    // A stop string from the middle of that text: the same run ends before it.
    if (full.text_len > 12) {
        char stop[5];
        memcpy(stop, full.text + full.text_len / 2, 4);
        stop[4] = 0;
        const char *first = strstr(full.text, stop);
        const char *stops[2] = {"\x01never", stop};
        gp.stop = stops;
        gp.n_stop = 2;
        struct collect c2 = {0};
        gp.user = &c2;
        struct strata_generate_result r;
        strata_session_reset(s);
        CHECK(strata_generate(s, prompt, (int)n_prompt, &gp, &r) == 0, "generate with a stop string");
        CHECK(r.stop == STRATA_STOP_STRING && r.stop_index == 1, "stop %d index %d", (int)r.stop, r.stop_index);
        CHECK(r.text_len == (size_t)(first - full.text) && memcmp(r.text, full.text, r.text_len) == 0,
              "text cut before the stop string (%zu vs %zu)", r.text_len, (size_t)(first - full.text));
        CHECK(c2.len == r.text_len && memcmp(c2.text, r.text, r.text_len) == 0, "the callback never saw the stop string");
        strata_generate_result_free(&r);
        gp.stop = NULL;
        gp.n_stop = 0;
    }

    // Cancelled before the first token.
    atomic_bool cancel;
    atomic_init(&cancel, true);
    gp.cancel = &cancel;
    gp.user = &c;
    struct strata_generate_result rc;
    strata_session_reset(s);
    CHECK(strata_generate(s, prompt, (int)n_prompt, &gp, &rc) == 0 && rc.stop == STRATA_STOP_CANCEL &&
              rc.n_generated == 0, "cancel: stop %d after %d tokens", (int)rc.stop, rc.n_generated);
    strata_generate_result_free(&rc);
    strata_generate_result_free(&full);

    // Errors: a code, and the engine's last error says why.
    quiet(true);
    int32_t bad = 999999;
    CHECK(strata_session_eval(s, &bad, 1, NULL, false) == STRATA_EARG, "bad token");
    CHECK(strstr(strata_engine_errmsg(e), "outside the vocabulary") != NULL, "errmsg: %s", strata_engine_errmsg(e));
    struct strata_session *big = NULL;
    struct strata_session_params sp = {.n_ctx = -1};
    CHECK(strata_session_create(&big, e, &sp) == STRATA_EARG && !big, "negative context");
    strata_session_free(s);
    strata_engine_close(e);
    struct strata_engine_params none = strata_engine_default_params();
    none.model = "/nonexistent/model.gguf";
    CHECK(strata_engine_open(&e, &none) < 0 && !e, "missing model");
    none.model = model;
    none.backend = STRATA_BACKEND_COUNT;
    CHECK(strata_engine_open(&e, &none) == STRATA_EARG, "bad backend");
    quiet(false);
    case_result("generate: stop strings, callback text, cancel, errors", before);
}

// Truncating a session and evaluating other tokens after the kept positions gives the logits
// of a fresh session fed the same sequence; a recurrent model refuses to go back.
static void test_truncate(const char *moe, const char *next)
{
    int before = g_failures;
    struct strata_engine_params ep = strata_engine_default_params();
    ep.model = moe;
    ep.n_threads = 2;
    struct strata_engine *e = NULL;
    struct strata_session *a = NULL, *b = NULL;
    CHECK(strata_engine_open(&e, &ep) == 0, "open: %s", strata_last_error());
    struct strata_model_info info;
    strata_engine_info(e, &info);
    const size_t V = info.n_vocab;
    int32_t t[N_PROMPT], u[N_PROMPT];
    tokens_of(1, t, N_PROMPT);
    tokens_of(2, u, N_PROMPT);
    const int keep = 9;
    memcpy(u, t, keep * sizeof *u);  // u shares t's first `keep` tokens
    float *la = malloc((N_PROMPT - keep) * V * sizeof *la), *lb = malloc(N_PROMPT * V * sizeof *lb);
    CHECK(la && lb && strata_session_create(&a, e, NULL) == 0 && strata_session_create(&b, e, NULL) == 0,
          "sessions");
    if (la && lb && a && b) {
        CHECK(strata_session_eval(a, t, N_PROMPT, NULL, false) == 0, "eval t");
        CHECK(strata_session_truncate(a, keep) == 0 && strata_session_n_past(a) == keep, "truncate");
        CHECK(strata_session_eval(a, u + keep, N_PROMPT - keep, la, true) == 0, "eval the rest of u");
        CHECK(strata_session_eval(b, u, N_PROMPT, lb, true) == 0, "eval u fresh");
        CHECK(memcmp(la, lb + keep * V, (N_PROMPT - keep) * V * sizeof *la) == 0,
              "logits after truncation differ from a fresh evaluation");
        quiet(true);
        CHECK(strata_session_truncate(a, N_PROMPT + 1) == STRATA_EARG, "past n_past refused");
        quiet(false);
    }
    free(la);
    free(lb);
    strata_session_free(a);
    strata_session_free(b);
    strata_engine_close(e);
    ep.model = next;
    e = NULL;
    a = NULL;
    CHECK(strata_engine_open(&e, &ep) == 0 && strata_session_create(&a, e, NULL) == 0, "open qwen3next");
    if (a) {
        CHECK(strata_session_eval(a, t, N_PROMPT, NULL, false) == 0, "eval t");
        CHECK(strata_session_truncate(a, N_PROMPT) == 0, "truncating to n_past is a no-op");
        quiet(true);
        CHECK(strata_session_truncate(a, keep) == STRATA_EUNSUP, "recurrent state cannot go back");
        quiet(false);
    }
    strata_session_free(a);
    strata_engine_close(e);
    case_result("truncate = fresh evaluation; recurrent models refuse", before);
}

// A backend without the ops only some architectures call (the CUDA backend's set today: no indexer,
// layernorm, row copy or clamped SwiGLU): the architectures that do not call them get their
// forward pass; one that does is refused with STRATA_EUNSUP (one error line) at forward_create.
static void test_op_check(const char *moe, const char *next, const char *dsa)
{
    struct strata_backend cpu;
    if (strata_backend_cpu_open(&cpu, 1, false)) {
        CHECK(false, "op check: a CPU backend");
        return;
    }
    struct strata_backend_i lean = *cpu.iface;
    lean.indexer = NULL, lean.layernorm = NULL, lean.copy = NULL, lean.swiglu_oai = NULL;
    struct strata_backend be = {&lean, cpu.ctx};
    const struct {
        const char *path;
        bool runs;
    } cases[] = {{moe, true}, {next, true}, {dsa, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct strata_model *m = NULL;
        if (strata_model_load(&m, cases[i].path, &be)) {
            CHECK(false, "op check: load %s", cases[i].path);
            continue;
        }
        struct strata_forward *f = NULL;
        quiet(true);
        const int rc = strata_forward_create(&f, m, (struct strata_expert_provider){0}, 4, 64);
        quiet(false);
        CHECK(cases[i].runs ? rc == 0 && f : rc == STRATA_EUNSUP && !f,
              "op check: %s %s on a backend without indexer/layernorm/copy/swiglu_oai (rc %d)", cases[i].path,
              cases[i].runs ? "runs" : "is refused", rc);
        strata_forward_free(f);
        strata_model_free(m);
    }
    strata_backend_close(&cpu);
}

static int synth(const char *arch, const char *preset, int idx_top_k, const char *path)
{
    struct strata_synth_opts o = {.arch = arch, .preset = preset, .out_path = path, .seed = 5, .type = -1,
                                  .idx_top_k = idx_top_k};
    return strata_synth(&o);
}

// Which models' attention takes a typed KV cache: decided from the loaded layers
// (strata_seq_kv_typed, what the backend is told) and from the hyperparameters alone
// (strata_hparams_kv_typed, what auto's F16 rests on, in the engine and strata plan); both must
// agree, per architecture.
static void test_kv_typed(void)
{
    static const struct {
        const char *arch, *preset;
        bool typed;
    } cases[] = {{"qwen3moe", "tiny", true},  {"qwen3next", "tiny", true}, {"qwen35moe", "tiny", true},
                 {"glm4moe", "tiny", true},   {"gpt-oss", "tiny", false},  {"deepseek2", "tiny", false},
                 {"glm-dsa", "tiny-5.2", false}};
    struct strata_backend cpu;
    if (strata_backend_cpu_open(&cpu, 1, false)) {
        CHECK(false, "kv typed: a CPU backend");
        return;
    }
    const int before = g_failures;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/kv_%s.gguf", g_dir, cases[i].arch);
        struct strata_model *m = NULL;
        if (synth(cases[i].arch, cases[i].preset, 0, path) || strata_model_load(&m, path, &cpu)) {
            CHECK(false, "kv typed: %s", cases[i].arch);
            unlink(path);
            continue;
        }
        const bool layers = strata_seq_kv_typed(m), hparams = strata_hparams_kv_typed(strata_model_hparams(m));
        CHECK(layers == cases[i].typed && hparams == cases[i].typed,
              "kv typed: %s: the layers say %d, the hyperparameters %d, expected %d", cases[i].arch, layers, hparams,
              cases[i].typed);
        strata_model_free(m);
        unlink(path);
    }
    strata_backend_close(&cpu);
    printf("%s kv typed: the layers and the hyperparameters agree on 7 architectures\n", g_failures == before ? "ok  " : "FAIL");
}

// The dense weights on the CPU backend (model.c's arena): every view of the loaded model inside
// the one mapping, 64-byte aligned, the mapping's use between the dense bytes read and those plus
// the alignment; STRATA_DENSE_ARENA=0 gives a mapping per tensor and no arena. Per architecture.
static void test_dense_arena(void)
{
    static const struct {
        const char *arch, *preset;
    } cases[] = {{"qwen3moe", "tiny"}, {"qwen3next", "tiny"}, {"qwen35moe", "tiny"}, {"glm4moe", "tiny"},
                 {"gpt-oss", "tiny"},  {"deepseek2", "tiny"}, {"glm-dsa", "tiny-5.2"}};
    struct strata_backend cpu;
    if (strata_backend_cpu_open(&cpu, 1, false)) {
        CHECK(false, "dense arena: a CPU backend");
        return;
    }
    const int before = g_failures;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/arena_%s.gguf", g_dir, cases[i].arch);
        if (synth(cases[i].arch, cases[i].preset, 0, path)) {
            CHECK(false, "dense arena: synth %s", cases[i].arch);
            continue;
        }
        for (int off = 0; off < 2; off++) {
            if (off) setenv("STRATA_DENSE_ARENA", "0", 1);
            struct strata_model *m = NULL;
            const int rc = strata_model_load(&m, path, &cpu);
            unsetenv("STRATA_DENSE_ARENA");
            if (rc) {
                CHECK(false, "dense arena: load %s", cases[i].arch);
                continue;
            }
            struct strata_model_mem mi;
            strata_model_mem_info(m, &mi);
            const uint64_t dense = strata_model_dense_bytes(m),
                           slack = 64 * strata_model_file(m)->n_tensors;
            if (off)
                CHECK(mi.arena_cap == 0 && mi.views_in_arena == 0 && mi.views_outside > 0,
                      "dense arena off: %s: cap %zu, %llu bytes of views inside, %llu outside", cases[i].arch,
                      mi.arena_cap, (unsigned long long)mi.views_in_arena, (unsigned long long)mi.views_outside);
            else
                CHECK(mi.arena_cap > 0 && mi.views_outside == 0 && mi.views_in_arena > 0 && mi.aligned &&
                          mi.arena_used >= dense && mi.arena_used <= dense + slack && mi.arena_used <= mi.arena_cap,
                      "dense arena: %s: %zu of %zu bytes used for %llu dense bytes, views %llu inside, %llu "
                      "outside, aligned %d",
                      cases[i].arch, mi.arena_used, mi.arena_cap, (unsigned long long)dense,
                      (unsigned long long)mi.views_in_arena, (unsigned long long)mi.views_outside, mi.aligned);
            strata_model_free(m);
        }
        unlink(path);
    }
    strata_backend_close(&cpu);
    printf("%s dense arena: every view in one aligned mapping on 7 architectures, none with it off\n",
           g_failures == before ? "ok  " : "FAIL");
}

// The huge-page report of `strata run` (util/mem.h): the kernel's mode read from its bracket, and
// the anonymous memory counted, a big buffer's bytes included once touched.
static void test_memory_report(void)
{
    const int before = g_failures;
    CHECK(strcmp(strata_thp_mode_parse("always [madvise] never\n"), "madvise") == 0, "bracketed madvise");
    CHECK(strcmp(strata_thp_mode_parse("[always] madvise never"), "always") == 0, "bracketed always");
    CHECK(strcmp(strata_thp_mode_parse("always madvise [never]"), "never") == 0, "bracketed never");
    CHECK(strcmp(strata_thp_mode_parse("always madvise never"), "") == 0, "no bracket");
    CHECK(strcmp(strata_thp_mode_parse(NULL), "") == 0, "NULL");
    const char *mode = strata_thp_mode();
    uint64_t anon0, huge0, anon1, huge1;
    if (!strata_anon_memory(&anon0, &huge0)) {
        printf("ok   memory report: no /proc/self/smaps_rollup here (mode \"%s\")\n", mode);
        return;
    }
    const size_t bytes = (size_t)64 << 20;
    char *p = strata_big_alloc(bytes);
    CHECK(p != NULL, "strata_big_alloc of 64 MiB");
    if (!p) return;
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    CHECK(strata_anon_memory(&anon1, &huge1), "second read");
    CHECK(huge0 <= anon0 && huge1 <= anon1, "huge %llu of %llu, then %llu of %llu", (unsigned long long)huge0, (unsigned long long)anon0, (unsigned long long)huge1, (unsigned long long)anon1);
    CHECK(anon1 >= anon0 + bytes - ((size_t)4 << 20), "anonymous %llu -> %llu", (unsigned long long)anon0,
          (unsigned long long)anon1);  // the touched buffer is counted
    strata_big_free(p, bytes);
    printf("%s memory report: anonymous %+.1f MiB for a 64 MiB buffer, %+.1f MiB of it on huge pages (THP \"%s\")\n",
           g_failures == before ? "ok  " : "FAIL", (anon1 - (double)anon0) / 1048576.0,
           (huge1 - (double)huge0) / 1048576.0, mode);
}

// The bytes each phase read (strata_stats.phases): a 3-token prompt, then five
// passes of one token on the tiny qwen3moe (F16 KV) against the file's tensors: a decode pass
// reads every layer's q, k, v and output matrices and the cache rows of positions 0..p, every
// router, top-k experts' gate, up and down a layer, and the head where it wants logits (the last
// pass does not); the prompt passes' phases hold the prompt's pass.
static uint64_t tensor_bytes(const struct strata_gguf_file *g, const char *fmt, int l)
{
    char name[96];
    snprintf(name, sizeof name, fmt, l);
    const struct strata_gguf_tensor *t = strata_gguf_find_tensor(g, name);
    CHECK(t != NULL, "tensor %s", name);
    return t ? t->n_bytes : 0;
}

static void test_phase_bytes(const char *model)
{
    const int before = g_failures;
    struct strata_gguf_file *g = NULL;
    if (strata_gguf_open(&g, model)) {
        CHECK(0, "gguf_open");
        return;
    }
    uint32_t n_layer = 0, n_expert = 0, n_used = 0, n_head_kv = 0, dk = 0, dv = 0;
    CHECK(strata_gguf_get_u32(g, "qwen3moe.block_count", &n_layer) == 0 &&
              strata_gguf_get_u32(g, "qwen3moe.expert_count", &n_expert) == 0 &&
              strata_gguf_get_u32(g, "qwen3moe.expert_used_count", &n_used) == 0 &&
              strata_gguf_get_u32(g, "qwen3moe.attention.head_count_kv", &n_head_kv) == 0 &&
              strata_gguf_get_u32(g, "qwen3moe.attention.key_length", &dk) == 0 &&
              strata_gguf_get_u32(g, "qwen3moe.attention.value_length", &dv) == 0,
          "hparams");
    uint64_t attn = 0, router = 0, experts = 0;
    for (uint32_t l = 0; l < n_layer; l++) {
        attn += tensor_bytes(g, "blk.%d.attn_q.weight", (int)l) + tensor_bytes(g, "blk.%d.attn_k.weight", (int)l) +
                tensor_bytes(g, "blk.%d.attn_v.weight", (int)l) + tensor_bytes(g, "blk.%d.attn_output.weight", (int)l);
        router += tensor_bytes(g, "blk.%d.ffn_gate_inp.weight", (int)l);
        experts += (tensor_bytes(g, "blk.%d.ffn_gate_exps.weight", (int)l) +
                    tensor_bytes(g, "blk.%d.ffn_up_exps.weight", (int)l) +
                    tensor_bytes(g, "blk.%d.ffn_down_exps.weight", (int)l)) / n_expert * n_used;
    }
    const struct strata_gguf_tensor *out = strata_gguf_find_tensor(g, "output.weight");
    const uint64_t head = out ? out->n_bytes : tensor_bytes(g, "token_embd.weight", 0);
    const uint64_t kv_pos = (uint64_t)n_head_kv * (strata_type_row_bytes(STRATA_TYPE_F16, dk) +
                                                   strata_type_row_bytes(STRATA_TYPE_F16, dv));
    strata_gguf_close(g);
    struct strata_engine_params p = strata_engine_default_params();
    p.model = model;
    p.n_threads = 2;
    p.cache_type_k = p.cache_type_v = STRATA_KV_F16;
    struct strata_engine *e = NULL;
    if (strata_engine_open(&e, &p)) {
        CHECK(0, "engine_open: %s", strata_last_error());
        return;
    }
    struct strata_session *s = NULL;
    CHECK(strata_session_create(&s, e, NULL) == 0, "session");
    const int P = 5;
    struct strata_model_info info;
    strata_engine_info(e, &info);
    float *logits = malloc(info.n_vocab * sizeof(float));
    const int32_t prompt[3] = {11, 12, 13};
    CHECK(s && strata_session_eval(s, prompt, 3, NULL, false) == 0, "prompt");  // a prompt pass first
    for (int t = 0; t < P && s && logits; t++) {  // the last pass without logits: no head
        const int32_t tok = 100 + 7 * t;
        CHECK(strata_session_eval(s, &tok, 1, t < P - 1 ? logits : NULL, false) == 0, "eval %d", t);
    }
    free(logits);
    struct strata_stats st;
    if (s) strata_session_stats(s, &st);
    const struct strata_phase_stats *pp = &st.phases[0], *d = &st.phases[1];
    const uint64_t kv = kv_pos * n_layer * (uint64_t)(4 + 5 + 6 + 7 + 8);  // positions 0..p at p = 3..7
    CHECK(s && d->bytes_attn == P * attn + kv, "attention %llu, expected %llu", (unsigned long long)d->bytes_attn,
          (unsigned long long)(P * attn + kv));
    CHECK(s && d->bytes_router == P * router && d->bytes_experts == P * experts && d->bytes_head == (P - 1) * head &&
              d->bytes_linear_attn == 0,
          "routing %llu / %llu, experts %llu / %llu, head %llu / %llu", (unsigned long long)d->bytes_router,
          (unsigned long long)(P * router), (unsigned long long)d->bytes_experts, (unsigned long long)(P * experts),
          (unsigned long long)d->bytes_head, (unsigned long long)((P - 1) * head));
    // the prompt's pass: its weights once (its experts: between top-k and all of those its three
    // tokens route to), its three cache rows, no head (no logits asked); the phase times add up
    // to the totals
    CHECK(s && pp->bytes_attn == attn + 3 * kv_pos * n_layer && pp->bytes_router == router &&
              pp->bytes_experts >= experts && pp->bytes_experts <= 3 * experts && pp->bytes_head == 0 &&
              d->t_attn <= st.t_attn && d->t_experts <= st.t_experts && pp->t_attn + d->t_attn <= st.t_attn * (1 + 1e-12),
          "prompt pass: attention %llu, routing %llu, experts %llu, head %llu", (unsigned long long)pp->bytes_attn,
          (unsigned long long)pp->bytes_router, (unsigned long long)pp->bytes_experts, (unsigned long long)pp->bytes_head);
    strata_session_free(s);
    strata_engine_close(e);
    printf("%s phase bytes: five one-token passes after a prompt read the file's attention, router, top-k expert and "
           "head bytes (where logits are wanted) and the F16 cache rows attended\n", g_failures == before ? "ok  " : "FAIL");
}

int main(void)
{
    test_memory_report();
    if (!mkdtemp(g_dir)) return 1;
    char moe[256], next[256], dsa[256];
    snprintf(moe, sizeof moe, "%s/qwen3moe.gguf", g_dir);
    snprintf(next, sizeof next, "%s/qwen3next.gguf", g_dir);
    snprintf(dsa, sizeof dsa, "%s/glm-dsa.gguf", g_dir);
    // glm-dsa with GLM-5.2's shared indexer blocks and a top-8: the 27 positions are sparse from 8
    if (synth("qwen3moe", "tiny", 0, moe) || synth("qwen3next", "tiny", 0, next) ||
        synth("glm-dsa", "tiny-5.2", 8, dsa))
        return 1;
    test_sessions(moe, 0, "qwen3moe: concurrent and batched sessions = alone", 0);
    test_sessions(moe, 3u << 20, "qwen3moe, 3 MiB expert cache: concurrent and batched sessions = alone", 0);
    test_sessions(next, 0, "qwen3next: concurrent and batched sessions = alone", 0);
    test_sessions(dsa, 0, "glm-dsa (indexer top-8), contexts of 64 and the engine's: concurrent and batched = alone",
                  64);
    test_generate(moe);
    test_phase_bytes(moe);
    test_truncate(moe, next);
    test_op_check(moe, next, dsa);
    test_kv_typed();
    test_dense_arena();
    unlink(moe);
    unlink(next);
    unlink(dsa);
    rmdir(g_dir);
    printf("%s\n", g_failures ? "FAIL" : "ok");
    return g_failures ? 1 : 0;
}
