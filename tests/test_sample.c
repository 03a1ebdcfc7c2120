// Sampler tests: greedy argmax and ties, seed determinism, frequencies of many draws against a
// known distribution, top-k / top-p / min-p on known inputs and against a brute-force sort on a
// 151,936-token vocabulary, repetition penalty semantics, parameter checks.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/sampler.h"
#include "util/log.h"

#include "check.h"

static struct strata_sampler_params plain(float temperature)
{
    struct strata_sampler_params p = strata_sampler_default_params();
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.seed = 1234;
    return p;
}

static void init_ok(struct strata_sampler *s, struct strata_sampler_params p, int32_t n_vocab)
{
    int rc = strata_sampler_init(s, p, n_vocab);
    if (rc != 0) {
        fprintf(stderr, "FAIL: strata_sampler_init returned %d\n", rc);
        exit(1);
    }
}

static void test_greedy(void)
{
    struct strata_sampler s;
    init_ok(&s, plain(0.0f), 6);
    const float a[6] = {0.1f, 3.0f, -1.0f, 2.5f, 3.0f, 0.0f};
    CHECK(strata_sampler_sample(&s, a, NULL, 0) == 1, "argmax with a tie at 1 and 4 must be 1");
    const float b[6] = {NAN, -INFINITY, 0.5f, NAN, 0.5f, 0.25f};
    CHECK(strata_sampler_sample(&s, b, NULL, 0) == 2, "NaN is skipped, tie goes to the lower id");
    const float c[6] = {-5, -4, -3, -2, -1, -0.5f};
    CHECK(strata_sampler_sample(&s, c, NULL, 0) == 5, "all negative");
    strata_sampler_clear(&s);

    // llama.cpp applies the penalty before its temperature-0 argmax, and so do we.
    struct strata_sampler_params p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    init_ok(&s, p, 6);
    const int32_t hist[2] = {1, 4};
    CHECK(strata_sampler_sample(&s, a, hist, 2) == 3, "penalised 1 and 4 fall to 1.5, leaving 3 (2.5)");
    CHECK(strata_sampler_sample(&s, a, hist, 0) == 1, "no history, no penalty");
    strata_sampler_clear(&s);
}

static void test_determinism(void)
{
    enum { V = 1000, DRAWS = 2000 };
    float *logits = malloc(V * sizeof *logits);
    int32_t *run1 = malloc(DRAWS * sizeof *run1), *run2 = malloc(DRAWS * sizeof *run2);
    uint64_t x = 42;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)((x >> 40) % 1000) / 250.0f;
    }
    struct strata_sampler_params p = strata_sampler_default_params();
    p.top_k = 0;
    p.seed = 7;
    struct strata_sampler s1, s2;
    init_ok(&s1, p, V);
    init_ok(&s2, p, V);
    for (int i = 0; i < DRAWS; i++) run1[i] = strata_sampler_sample(&s1, logits, run1, (size_t)i);
    for (int i = 0; i < DRAWS; i++) run2[i] = strata_sampler_sample(&s2, logits, run2, (size_t)i);
    CHECK(memcmp(run1, run2, DRAWS * sizeof *run1) == 0, "same seed, same tokens");
    int distinct = 0;
    for (int i = 1; i < DRAWS; i++) distinct += run1[i] != run1[0];
    CHECK(distinct > 0, "sampling at temperature 0.8 over %d tokens never varied", V);

    strata_sampler_seed(&s1, 8);
    int differ = 0;
    for (int i = 0; i < DRAWS; i++) differ += strata_sampler_sample(&s1, logits, NULL, 0) != run1[i];
    CHECK(differ > 0, "seed 8 gave the same %d tokens as seed 7", DRAWS);
    strata_sampler_seed(&s2, 7);
    int again = 0;
    for (int i = 0; i < DRAWS; i++) again += strata_sampler_sample(&s2, logits, run1, (size_t)i) == run1[i];
    CHECK(again == DRAWS, "reseeding restarts the sequence (%d of %d equal)", again, DRAWS);
    strata_sampler_clear(&s1);
    strata_sampler_clear(&s2);
    free(logits);
    free(run1);
    free(run2);
}

// Draws n tokens and checks each frequency against want[] within 5 standard deviations.
static void check_frequencies(struct strata_sampler *s, const float *logits, int v, const double *want,
                              int n, const char *what)
{
    int count[16] = {0};
    for (int i = 0; i < n; i++) {
        int32_t t = strata_sampler_sample(s, logits, NULL, 0);
        if (t < 0 || t >= v) {
            CHECK(0, "%s: token %d out of range", what, (int)t);
            return;
        }
        count[t]++;
    }
    for (int t = 0; t < v; t++) {
        double f = (double)count[t] / n;
        double sigma = sqrt(want[t] * (1.0 - want[t]) / n);
        if (want[t] == 0.0) CHECK(count[t] == 0, "%s: token %d drawn %d times, want never", what, t, count[t]);
        else CHECK(fabs(f - want[t]) <= 5.0 * sigma, "%s: token %d frequency %.4f, want %.4f +- %.4f",
                   what, t, f, want[t], 5.0 * sigma);
    }
}

static void test_distribution(void)
{
    const double prob[5] = {0.4, 0.3, 0.15, 0.1, 0.05};
    float logits[5];
    for (int i = 0; i < 5; i++) logits[i] = (float)log(prob[i]) + 3.0f;  // shift must not matter
    struct strata_sampler s;
    init_ok(&s, plain(1.0f), 5);
    check_frequencies(&s, logits, 5, prob, 200000, "temperature 1");
    strata_sampler_clear(&s);

    // Temperature 2 takes the square root of the probabilities before renormalising.
    double want[5], sum = 0;
    for (int i = 0; i < 5; i++) sum += want[i] = sqrt(prob[i]);
    for (int i = 0; i < 5; i++) want[i] /= sum;
    init_ok(&s, plain(2.0f), 5);
    check_frequencies(&s, logits, 5, want, 200000, "temperature 2");
    strata_sampler_clear(&s);

    // top-k 2 renormalises the two best.
    struct strata_sampler_params p = plain(1.0f);
    p.top_k = 2;
    const double top2[5] = {0.4 / 0.7, 0.3 / 0.7, 0, 0, 0};
    init_ok(&s, p, 5);
    check_frequencies(&s, logits, 5, top2, 100000, "top-k 2");
    strata_sampler_clear(&s);
}

static void test_top_k(void)
{
    const float logits[8] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f, 4.0f, 3.0f, 0.0f};
    struct strata_sampler_params p = plain(1.0f);
    p.top_k = 4;
    struct strata_sampler s;
    init_ok(&s, p, 8);
    const struct strata_sampler_candidate *c;
    int n = strata_sampler_filter(&s, logits, NULL, 0, &c);
    const int32_t want[4] = {1, 3, 5, 2};  // 5, 5 (lower id first), 4, then 3 at id 2 before id 6
    CHECK(n == 4, "top-k 4 kept %d", n);
    for (int i = 0; i < 4 && i < n; i++) CHECK(c[i].id == want[i], "rank %d is %d, want %d", i, c[i].id, want[i]);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += c[i].p;
    CHECK(fabs(sum - 1.0) < 1e-6, "probabilities sum to %g", sum);
    strata_sampler_clear(&s);

    p.top_k = 100;  // larger than the vocabulary: no-op
    init_ok(&s, p, 8);
    CHECK(strata_sampler_filter(&s, logits, NULL, 0, &c) == 8, "top-k beyond n_vocab keeps all");
    strata_sampler_clear(&s);
}

static void test_top_p_min_p_small(void)
{
    const double prob[4] = {0.5, 0.25, 0.15, 0.1};
    float logits[4];
    // Scrambled ids so that the unsorted paths are exercised: token i has prob[order[i]].
    const int order[4] = {2, 0, 3, 1};
    for (int i = 0; i < 4; i++) logits[i] = (float)log(prob[order[i]]);
    const struct strata_sampler_candidate *c;
    struct strata_sampler s;
    struct {
        float top_p, min_p;
        int top_k, want_n;
    } cases[] = {
        {0.70f, 0.0f, 0, 2},  // 0.5 + 0.25 >= 0.7
        {0.80f, 0.0f, 0, 3},
        {0.45f, 0.0f, 0, 1},
        {0.0f, 0.0f, 0, 1},   // top_p 0 keeps the best, as llama.cpp
        {1.0f, 0.25f, 0, 3},  // p >= 0.125
        {1.0f, 0.40f, 0, 2},  // p >= 0.2
        {1.0f, 0.40f, 4, 2},  // sorted path of min-p
        {1.0f, 1.00f, 0, 1},
        {0.80f, 0.40f, 0, 2}, // top-p 3, then min-p on those
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        struct strata_sampler_params p = plain(1.0f);
        p.top_p = cases[k].top_p;
        p.min_p = cases[k].min_p;
        p.top_k = cases[k].top_k;
        init_ok(&s, p, 4);
        int n = strata_sampler_filter(&s, logits, NULL, 0, &c);
        CHECK(n == cases[k].want_n, "case %zu (top_p %.2f min_p %.2f top_k %d): kept %d, want %d", k,
              cases[k].top_p, cases[k].min_p, cases[k].top_k, n, cases[k].want_n);
        // Whatever survives must be the most likely ones: ids 1 (0.5), 3 (0.25), 0 (0.15).
        const int32_t rank[3] = {1, 3, 0};
        for (int i = 0; i < n; i++) {
            int found = 0;
            for (int j = 0; j < cases[k].want_n && j < 3; j++) found |= c[i].id == rank[j];
            CHECK(found, "case %zu: token %d should have been filtered", k, c[i].id);
        }
        for (int d = 0; d < 2000; d++) {
            int32_t t = strata_sampler_sample(&s, logits, NULL, 0);
            int found = 0;
            for (int j = 0; j < cases[k].want_n && j < 3; j++) found |= t == rank[j];
            if (!found) {
                CHECK(0, "case %zu: drew filtered token %d", k, (int)t);
                break;
            }
        }
        strata_sampler_clear(&s);
    }
}

struct ref {
    float logit;
    int32_t id;
};

static int ref_cmp(const void *pa, const void *pb)
{
    const struct ref *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

// Big vocabulary with many tied logits, against qsort: top-k order and the top-p prefix, on a
// flat distribution (top-p needs most of the vocabulary: the full-sort path) and a peaked one
// (the mass sits in ~100 tokens: the first-prefix path).
static void check_large_vocab(const float *logits, int V, const char *what)
{
    struct ref *ref = malloc((size_t)V * sizeof *ref);
    for (int i = 0; i < V; i++) ref[i] = (struct ref){logits[i], i};
    qsort(ref, (size_t)V, sizeof *ref, ref_cmp);
    double m = ref[0].logit, sum = 0;
    for (int i = 0; i < V; i++) sum += exp(ref[i].logit - m);

    const struct strata_sampler_candidate *c;
    struct strata_sampler s;
    struct strata_sampler_params p = plain(1.0f);
    p.top_k = 40;
    init_ok(&s, p, V);
    int n = strata_sampler_filter(&s, logits, NULL, 0, &c);
    CHECK(n == 40, "%s: top-k 40 kept %d", what, n);
    for (int i = 0; i < n; i++)
        if (c[i].id != ref[i].id) {
            CHECK(0, "%s: top-k rank %d: %d, want %d", what, i, c[i].id, ref[i].id);
            break;
        }
    strata_sampler_clear(&s);

    const float top_ps[3] = {0.5f, 0.9f, 0.999f};
    for (int k = 0; k < 3; k++) {
        p = plain(1.0f);
        p.top_p = top_ps[k];
        init_ok(&s, p, V);
        n = strata_sampler_filter(&s, logits, NULL, 0, &c);
        double cum = 0;
        int want = 0;
        while (want < V) {
            cum += exp(ref[want].logit - m) / sum;
            want++;
            if (cum >= top_ps[k]) break;
        }
        // Float vs double summation may move the cut by a token at a tie of the threshold.
        CHECK(abs(n - want) <= 1, "%s: top-p %.3f kept %d, brute force %d", what, top_ps[k], n, want);
        for (int i = 0; i < n && i < want; i++)
            if (c[i].id != ref[i].id) {
                CHECK(0, "%s: top-p %.3f rank %d: %d, want %d", what, top_ps[k], i, c[i].id, ref[i].id);
                break;
            }
        strata_sampler_clear(&s);
    }
    free(ref);
}

// Top-k without a penalty reads the row itself and skips blocks that cannot enter (sampler.c's
// top_k_row): the same ids in the same order as sorting every token, on rows made to break a
// block skip (ascending rows enter every block; NaN, infinities, both zeros and ties at the
// cut, inside and across the 64-logit blocks) and k around the block size.
static void test_top_k_rows(void)
{
    enum { V = 5000 };
    static float row[V];
    static struct ref ref[V];
    const int ks[] = {1, 2, 40, 63, 64, 65, 1000, V - 1};
    int bad = 0, cases = 0;
    for (int shape = 0; shape < 7; shape++) {
        uint64_t x = 7 + (uint64_t)shape;
        for (int i = 0; i < V; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            const int r = (int)((x >> 33) % 16);
            switch (shape) {
            case 0: row[i] = (float)i * 0.01f; break;            // ascending: every block enters
            case 1: row[i] = (float)(V - i) * 0.01f; break;      // descending: none does
            case 2: row[i] = 1.5f; break;                        // one tie everywhere
            case 3: row[i] = NAN; break;                         // nothing: the first k ids
            case 4: row[i] = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : r == 3 ? -0.0f
                           : r == 4 ? 0.0f : (float)r; break;    // every special value, few levels
            case 5: row[i] = i < 100 ? NAN : (float)(i % 7); break;  // NaN first, then ties across blocks
            default: row[i] = r < 14 ? -INFINITY : (float)(r - 14); break;  // mostly -inf
            }
        }
        for (int i = 0; i < V; i++) ref[i] = (struct ref){isnan(row[i]) ? -INFINITY : row[i], i};
        qsort(ref, V, sizeof *ref, ref_cmp);
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
            struct strata_sampler s;
            struct strata_sampler_params p = plain(1.0f);
            p.top_k = ks[k];
            init_ok(&s, p, V);
            const struct strata_sampler_candidate *c;
            const int n = strata_sampler_filter(&s, row, NULL, 0, &c);
            cases++;
            int wrong = n != ks[k];
            for (int i = 0; !wrong && i < n; i++) wrong = c[i].id != ref[i].id;
            if (wrong) CHECK(0, "row shape %d, top-k %d: kept %d, or ranks differ from a full sort", shape, ks[k], n);
            bad += wrong;
            strata_sampler_clear(&s);
        }
    }
    CHECK(bad == 0, "top-k from the row: %d of %d cases differ from a full sort", bad, cases);
}

static void silent(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

// strata_sampler_sample_top from the row's best (what a forward pass hands over instead of the
// row) draws what strata_sampler_sample draws from the row: the same tokens over a sequence of
// draws (so the same random state), for chains with top-p and min-p; a wrong k or order refused.
static void test_sample_top(void)
{
    enum { V = 3000 };
    static float row[V];
    uint64_t x = 5;
    int differ = 0, draws = 0;
    const struct {
        int top_k;
        float top_p, min_p, temp;
    } chains[] = {{40, 0.95f, 0.05f, 0.8f}, {5, 1.0f, 0.0f, 1.5f}, {256, 0.5f, 0.0f, 0.7f}, {1, 1.0f, 0.0f, 1.0f}};
    for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
        struct strata_sampler a, b;
        struct strata_sampler_params p = strata_sampler_default_params();
        p.top_k = chains[c].top_k, p.top_p = chains[c].top_p, p.min_p = chains[c].min_p;
        p.temperature = chains[c].temp, p.seed = 11 + c;
        init_ok(&a, p, V);
        init_ok(&b, p, V);
        CHECK(strata_sampler_top_k(&a, 0) == p.top_k, "chain %zu: takes the row's best %d", c, p.top_k);
        struct strata_token_logit top[256];
        for (int d = 0; d < 200; d++) {
            for (int i = 0; i < V; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                row[i] = (float)((x >> 33) % 500) / 50.0f;  // ties
            }
            strata_top_k(row, V, p.top_k, top);
            differ += strata_sampler_sample(&a, row, NULL, 0) != strata_sampler_sample_top(&b, top, p.top_k, 0);
            draws++;
        }
        if (c == 0) {
            strata_log_set_sink(silent, NULL);
            CHECK(strata_sampler_sample_top(&b, top, p.top_k - 1, 0) == STRATA_EARG, "a wrong k is refused");
            const struct strata_token_logit t0 = top[0];
            top[0] = top[1], top[1] = t0;
            CHECK(strata_sampler_sample_top(&b, top, p.top_k, 0) == STRATA_EARG, "candidates out of order refused");
            strata_log_set_sink(NULL, NULL);
        }
        strata_sampler_clear(&a);
        strata_sampler_clear(&b);
    }
    CHECK(differ == 0, "sampling from the row's best: %d of %d draws differ from sampling the row", differ, draws);
    struct strata_sampler s;
    struct strata_sampler_params p = strata_sampler_default_params();
    p.repeat_penalty = 1.1f;
    init_ok(&s, p, V);
    CHECK(strata_sampler_top_k(&s, 0) == 40 && strata_sampler_top_k(&s, 3) == 0,
          "a penalty with history needs the row");
    strata_sampler_clear(&s);
    p = strata_sampler_default_params();
    p.top_k = 0;
    init_ok(&s, p, V);
    CHECK(strata_sampler_top_k(&s, 0) == 0, "top-k off needs the row");
    strata_sampler_clear(&s);
    p.top_k = STRATA_TOP_K_MAX + 1;
    init_ok(&s, p, V);
    CHECK(strata_sampler_top_k(&s, 0) == 0, "top-k past STRATA_TOP_K_MAX: the row (the sampler selects itself)");
    strata_sampler_clear(&s);
}

// Top-k and greedy after a repetition penalty (sampler.c's penalized_top_k: the row's best k +
// |window| and the window's penalized logits) against penalizing a copy of the row and sorting it
// all: windows with repeats, with NaN, negative and tied logits, longer than the history, all
// history (-1) with more distinct tokens than the scratch (the full path), and greedy.
static void test_penalized_top_k(void)
{
    enum { V = 4000, H = 600 };
    static float row[V];
    static struct ref ref[V];
    static int32_t hist[H];
    uint64_t x = 21;
    int bad = 0, cases = 0;
    const struct {
        int top_k, last_n, n_hist;
        float temp, penalty;
    } cs[] = {{40, 64, 100, 1.0f, 1.3f}, {5, 64, 30, 1.0f, 0.7f}, {256, 16, 600, 1.0f, 2.0f},
              {40, -1, 600, 1.0f, 1.3f}, {40, -1, 100, 1.0f, 1.3f}, {0, 64, 100, 0.0f, 1.3f}, {0, -1, 600, 0.0f, 1.5f}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++)
        for (int rep = 0; rep < 20; rep++) {
            for (int i = 0; i < V; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                const int q = (int)((x >> 33) % 64);
                row[i] = q == 0 ? NAN : (float)((int)((x >> 40) % 400) - 200) / 40.0f;  // ties, both signs
            }
            for (int i = 0; i < cs[c].n_hist; i++) {
                x = x * 6364136223846793005ull + 1442695040888963407ull;
                // favour high-logit tokens and repeats: the penalty then moves the cut
                hist[i] = (int32_t)((x >> 33) % 3 ? (x >> 40) % 150 : (x >> 40) % V);
                if ((x >> 20) % 2) row[hist[i]] = 5.0f;
            }
            const int n_hist = cs[c].n_hist;
            const size_t window = cs[c].last_n < 0 || cs[c].last_n > n_hist ? (size_t)n_hist : (size_t)cs[c].last_n;
            for (int i = 0; i < V; i++) ref[i] = (struct ref){isnan(row[i]) ? -INFINITY : row[i], i};
            static bool done[V];
            memset(done, 0, sizeof done);
            for (size_t i = (size_t)n_hist - window; i < (size_t)n_hist; i++) {
                const int32_t t = hist[i];
                if (done[t]) continue;
                done[t] = true;
                ref[t].logit = ref[t].logit <= 0.0f ? ref[t].logit * cs[c].penalty : ref[t].logit / cs[c].penalty;
            }
            qsort(ref, V, sizeof *ref, ref_cmp);
            struct strata_sampler sm;
            struct strata_sampler_params p = plain(cs[c].temp);
            p.top_k = cs[c].top_k, p.repeat_penalty = cs[c].penalty, p.repeat_last_n = cs[c].last_n;
            init_ok(&sm, p, V);
            const struct strata_sampler_candidate *cand;
            const int n = strata_sampler_filter(&sm, row, hist, (size_t)n_hist, &cand);
            const int want = cs[c].temp <= 0.0f ? 1 : cs[c].top_k;
            int wrong = n != want;
            for (int i = 0; !wrong && i < n; i++) wrong = cand[i].id != ref[i].id;
            if (wrong) CHECK(0, "penalty case %zu rep %d: kept %d, or ranks differ from the full sort", c, rep, n);
            bad += wrong, cases++;
            strata_sampler_clear(&sm);
        }
    CHECK(bad == 0, "penalized top-k: %d of %d cases differ from penalizing and sorting the row", bad, cases);
}

static void test_large_vocab(void)
{
    enum { V = 151936 };
    float *logits = malloc(V * sizeof *logits);
    uint64_t x = 99;
    for (int i = 0; i < V; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        logits[i] = (float)((x >> 33) % 2000) / 100.0f - 10.0f;  // 2000 levels: many ties
    }
    check_large_vocab(logits, V, "flat");
    float *peaked = malloc(V * sizeof *peaked);
    for (int i = 0; i < V; i++) peaked[i] = logits[i] + (i % 1500 == 7 ? 30.0f : 0.0f);
    check_large_vocab(peaked, V, "peaked");
    free(peaked);

    struct strata_sampler s;
    struct strata_sampler_params p;
    // Speed, printed: the default chain and the top-p-only chain per token.
    const struct {
        const char *name;
        int top_k;
        float top_p;
        float repeat_penalty;
    } chains[3] = {{"default (top-k 40)", 40, 0.95f, 1.0f},
                   {"top-k 40, penalty 1.1", 40, 0.95f, 1.1f},
                   {"top-k off, top-p 0.95", 0, 0.95f, 1.1f}};
    for (int k = 0; k < 3; k++) {
        p = strata_sampler_default_params();
        p.top_k = chains[k].top_k;
        p.top_p = chains[k].top_p;
        p.repeat_penalty = chains[k].repeat_penalty;
        init_ok(&s, p, V);
        int32_t hist[64];
        for (int i = 0; i < 64; i++) hist[i] = i * 997;
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        enum { DRAWS = 200 };
        for (int i = 0; i < DRAWS; i++) CHECK(strata_sampler_sample(&s, logits, hist, 64) >= 0, "draw failed");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = ((double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6) / DRAWS;
        printf("%-24s %.3f ms/token over %d tokens\n", chains[k].name, ms, V);
        strata_sampler_clear(&s);
    }
    free(logits);
}

static int n_error_lines;

static void count_lines(enum strata_log_level level, const char *line, void *user)
{
    (void)user;
    (void)line;
    if (level == STRATA_LOG_ERROR) n_error_lines++;
}

static void test_penalty(void)
{
    const float logits[5] = {2.0f, -2.0f, 1.0f, 0.5f, 0.0f};
    struct strata_sampler_params p = plain(1.0f);
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = -1;
    struct strata_sampler s;
    const struct strata_sampler_candidate *c;
    init_ok(&s, p, 5);
    const int32_t hist[4] = {0, 1, 0, 4};  // 0 twice: penalised once, as llama.cpp
    int n = strata_sampler_filter(&s, logits, hist, 4, &c);
    const float want[5] = {1.0f, -4.0f, 1.0f, 0.5f, 0.0f};
    CHECK(n == 5, "no filter, kept %d", n);
    for (int i = 0; i < n; i++) CHECK(c[i].id == i && c[i].logit == want[i], "token %d: logit %g, want %g",
                                      c[i].id, c[i].logit, want[i]);
    // The penalty works on a copy: the same call again gives the same result.
    n = strata_sampler_filter(&s, logits, hist, 4, &c);
    CHECK(n == 5 && c[0].logit == 1.0f, "second call saw %g", n > 0 ? c[0].logit : 0.0f);
    strata_sampler_clear(&s);

    p.repeat_last_n = 2;  // window {0, 4}: token 1 not penalised
    init_ok(&s, p, 5);
    n = strata_sampler_filter(&s, logits, hist, 4, &c);
    CHECK(n == 5 && c[0].logit == 1.0f && c[1].logit == -2.0f, "window 2: %g %g", c[0].logit, c[1].logit);
    strata_sampler_clear(&s);

    p.repeat_last_n = 0;  // disabled
    init_ok(&s, p, 5);
    n = strata_sampler_filter(&s, logits, hist, 4, &c);
    CHECK(n == 5 && c[0].logit == 2.0f && c[1].logit == -2.0f, "window 0: %g %g", c[0].logit, c[1].logit);
    strata_sampler_clear(&s);

    p.repeat_last_n = 64;  // window longer than the history
    init_ok(&s, p, 5);
    const int32_t bad[2] = {1, 5};
    strata_log_set_sink(count_lines, NULL);
    CHECK(strata_sampler_sample(&s, logits, bad, 2) == STRATA_EARG, "history id 5 of a 5-token vocabulary");
    CHECK(n_error_lines == 1 && strstr(strata_last_error(), "history[1] = 5"), "one line naming the value: %s",
          strata_last_error());
    CHECK(strata_sampler_sample(&s, logits, NULL, 3) == STRATA_EARG, "NULL history with n_history 3");
    CHECK(strata_sampler_sample(&s, NULL, NULL, 0) == STRATA_EARG, "NULL logits");
    CHECK(n_error_lines == 3, "%d error lines for 3 errors", n_error_lines);
    strata_log_set_sink(NULL, NULL);
    strata_sampler_clear(&s);
}

static void test_params(void)
{
    struct strata_sampler s;
    struct strata_sampler_params p = strata_sampler_default_params();
    CHECK(strata_sampler_init(&s, p, 0) == STRATA_EARG, "n_vocab 0");
    p.top_k = -1;
    CHECK(strata_sampler_init(&s, p, 10) == STRATA_EARG, "top_k -1");
    p = strata_sampler_default_params();
    p.top_p = 1.5f;
    CHECK(strata_sampler_init(&s, p, 10) == STRATA_EARG, "top_p 1.5");
    p = strata_sampler_default_params();
    p.min_p = NAN;
    CHECK(strata_sampler_init(&s, p, 10) == STRATA_EARG, "min_p NaN");
    p = strata_sampler_default_params();
    p.repeat_penalty = 0.0f;
    CHECK(strata_sampler_init(&s, p, 10) == STRATA_EARG, "repeat_penalty 0");
    p = strata_sampler_default_params();
    p.repeat_last_n = -2;
    CHECK(strata_sampler_init(&s, p, 10) == STRATA_EARG, "repeat_last_n -2");
    p = strata_sampler_default_params();
    CHECK(strata_sampler_init(&s, p, 10) == 0, "defaults");
    strata_sampler_clear(&s);
    strata_sampler_clear(&s);  // idempotent
}

// The greedy pick over a large vocabulary (the blocked argmax) against the scalar scan's rule, on
// rows built to break it: the maximum tied across blocks and inside one, in the last partial
// block, NaN around it, -0 and +0 as the maximum, every logit -inf or NaN (id 0).
static int32_t scalar_argmax(const float *l, int n)
{
    int32_t best = 0;
    float b = -INFINITY;
    for (int i = 0; i < n; i++)
        if (l[i] > b) b = l[i], best = i;
    return best;
}

static void test_greedy_large(void)
{
    const int n = 151936 + 7;  // not a multiple of the blocks or the lanes
    float *l = malloc((size_t)n * sizeof *l);
    struct strata_sampler s;
    init_ok(&s, plain(0.0f), n);
    uint64_t rng = 99;
    for (int trial = 0; trial < 12; trial++) {
        for (int i = 0; i < n; i++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            l[i] = (float)(int)(rng >> 52) * 0.25f - 512.0f;  // coarse: ties are common
        }
        const int a = (int)(rng % (uint64_t)n), b = (int)((rng >> 20) % (uint64_t)n);
        switch (trial % 6) {
        case 0: l[a] = l[b] = 1e6f; break;                       // a tie, maybe across blocks
        case 1: l[n - 1] = 1e6f; break;                          // in the last partial block
        case 2: l[a] = NAN, l[b] = 1e6f, l[b > 0 ? b - 1 : 1] = NAN; break;
        case 3: for (int i = 0; i < n; i++) l[i] = i % 3 ? -1.0f : -0.0f;
                l[b] = 0.0f; break;                              // -0 first, +0 later: the same
        case 4: for (int i = 0; i < n; i++) l[i] = i % 2 ? NAN : -INFINITY; break;
        default: break;                                          // the random row
        }
        const int32_t want = scalar_argmax(l, n), got = strata_sampler_sample(&s, l, NULL, 0);
        CHECK(got == want, "trial %d: greedy id %d, the scalar scan's %d", trial, (int)got, (int)want);
    }
    strata_sampler_clear(&s);
    free(l);
}

int main(void)
{
    test_params();
    test_greedy();
    test_greedy_large();
    test_determinism();
    test_distribution();
    test_top_k();
    test_top_k_rows();
    test_sample_top();
    test_penalized_top_k();
    test_top_p_min_p_small();
    test_penalty();
    test_large_vocab();
    if (g_failures) {
        fprintf(stderr, "test_sample: %d checks failed\n", g_failures);
        return 1;
    }
    printf("test_sample: all checks passed\n");
    return 0;
}
