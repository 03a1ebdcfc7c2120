// The engine side of `strata serve`'s concurrency, without HTTP: N sessions decoding together in
// one strata_eval_batch per step (what the server's scheduler does) against one session alone,
// the repetitions interleaved. Public API only (include/strata.h).
//
//   build/batch_decode MODEL.gguf CACHE_MIB THREADS STREAMS GEN REPS [PROMPT...]
//
// Each session gets a prompt (round robin over PROMPT..., default four short ones) and decodes
// greedily; one more session, of the first prompt, decodes alone. Before measuring, all of them
// decode GEN tokens together (warming the expert cache). Then per repetition: the extra session
// decodes GEN tokens alone, then the STREAMS decode GEN tokens together (given one prompt, they
// stay in step: every token routed alike, the bound of sharing). Printed per measurement: tok/s (aggregate), the time of each phase per step,
// expert bytes read per token, distinct experts per MoE layer per step (from the hits and
// misses), io_wait per step.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "strata.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct stream {
    struct strata_session *s;
    float *logits;
    int32_t next;
};

static int32_t argmax(const float *x, int n)
{
    int32_t b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

// n steps of streams [0, k) together. 0 or negative.
static int decode(struct strata_engine *e, struct stream *st, int k, int n, int n_vocab,
                  struct strata_batch_item *items)
{
    for (int step = 0; step < n; step++) {
        for (int i = 0; i < k; i++) items[i] = (struct strata_batch_item){st[i].s, &st[i].next, 1, st[i].logits, false};
        int rc = strata_eval_batch(e, items, k);
        if (rc) return rc;
        for (int i = 0; i < k; i++) st[i].next = argmax(st[i].logits, n_vocab);
    }
    return 0;
}

static void report(const char *what, int k, int n, double dt, const struct strata_stats *a,
                   const struct strata_stats *b, int n_moe)
{
    const struct strata_expert_stats *xa = &a->experts[STRATA_TIER_HOST], *xb = &b->experts[STRATA_TIER_HOST];
    const double steps = n, toks = (double)k * n;
    const double acq = (double)(xb->hits - xa->hits + xb->misses - xa->misses);
    printf("%-9s %2d streams: %6.2f tok/s  step %6.1f ms: attn %5.1f router %4.1f experts %6.1f (io_wait %5.1f) "
           "head %5.1f  | experts/layer/step %5.1f, MB read/token %5.1f\n",
           what, k, toks / dt, 1e3 * dt / steps, 1e3 * (b->t_attn - a->t_attn) / steps,
           1e3 * (b->t_router - a->t_router) / steps, 1e3 * (b->t_experts - a->t_experts) / steps,
           1e3 * (xb->io_wait_s - xa->io_wait_s) / steps, 1e3 * (b->t_head - a->t_head) / steps,
           acq / steps / n_moe, (double)(xb->bytes_read - xa->bytes_read) / toks / 1e6);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: %s MODEL.gguf CACHE_MIB|full THREADS STREAMS GEN REPS [PROMPT...]\n", argv[0]);
        return 2;
    }
    static const char *const dflt[] = {"The expert store streams weights from disk",
                                       "Mixture of experts models route each token",
                                       "A cache that is smaller than the model", "Four requests share one forward pass"};
    const char *const *prompts = argc > 7 ? (const char *const *)argv + 7 : dflt;
    const int n_prompts = argc > 7 ? argc - 7 : 4;
    const int k = atoi(argv[4]), gen = atoi(argv[5]), reps = atoi(argv[6]);
    struct strata_engine_params ep = strata_engine_default_params();
    ep.model = argv[1];
    ep.host_cache_bytes = strcmp(argv[2], "full") ? (uint64_t)atoll(argv[2]) << 20 : 0;
    ep.n_threads = atoi(argv[3]);
    ep.n_ctx = 1024;
    struct strata_engine *e = NULL;
    if (k < 1 || gen < 1 || reps < 1 || strata_engine_open(&e, &ep)) {
        fprintf(stderr, "cannot open %s: %s\n", argv[1], strata_last_error());
        return 1;
    }
    struct strata_model_info info;
    strata_engine_info(e, &info);
    struct stream *st = calloc((size_t)k + 1, sizeof *st);
    struct strata_batch_item *items = calloc((size_t)k + 1, sizeof *items);
    int rc = st && items ? 0 : STRATA_ENOMEM;
    for (int i = 0; i <= k && rc == 0; i++) {
        const char *p = prompts[i < k ? i % n_prompts : 0];
        int32_t ids[512];
        size_t n = 0;
        rc = strata_session_create(&st[i].s, e, NULL);
        if (rc == 0) rc = strata_tokenize(e, p, strlen(p), true, false, ids, 512, &n);
        st[i].logits = malloc((size_t)info.n_vocab * sizeof(float));
        if (rc == 0 && !st[i].logits) rc = STRATA_ENOMEM;
        if (rc == 0) rc = strata_session_eval(st[i].s, ids, (int)n, st[i].logits, false);
        if (rc == 0) st[i].next = argmax(st[i].logits, (int)info.n_vocab);
    }
    if (rc == 0) rc = decode(e, st, k + 1, gen, (int)info.n_vocab, items);  // warm the cache
    for (int r = 0; r < reps && rc == 0; r++) {
        for (int pass = 0; pass < 2 && rc == 0; pass++) {
            const int kk = pass ? k : 1;
            struct strata_stats a, b;
            strata_engine_stats(e, &a);
            const double t0 = now();
            rc = decode(e, pass ? st : st + k, kk, gen, (int)info.n_vocab, items);
            const double dt = now() - t0;
            strata_engine_stats(e, &b);
            if (rc == 0) report(pass ? "together" : "alone", kk, gen, dt, &a, &b, (int)info.n_moe_layers);
        }
    }
    if (rc) fprintf(stderr, "error: %s\n", strata_engine_errmsg(e));
    for (int i = 0; i <= k; i++) {
        strata_session_free(st[i].s);
        free(st[i].logits);
    }
    free(st);
    free(items);
    strata_engine_close(e);
    return rc ? 1 : 0;
}
