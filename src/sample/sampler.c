// Sampler chain over one logits row [n_vocab]: penalty, top-k, top-p, min-p, temperature, draw.
//
// Candidates live in s->cand[0..n), starting in id order (cand[i].id == i), so the penalty can
// index them directly. Selection of the k best uses an in-place heap (O(n log k), no extra
// memory) under one total order (logit descending, then id ascending), so results never depend
// on the algorithm's tie handling. top-p without top-k first selects the best 256 (enough for
// peaked distributions) and radix-sorts the whole vocabulary only when their mass falls short.
#include "sample/sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

// First prefix tried by top-p when nothing is sorted yet; most real distributions put their
// top-p mass well inside it.
#define TOP_P_FIRST_PREFIX 256

// Distinct window tokens the penalized top-k takes when the window is all history
// (repeat_last_n -1); more, and the full path runs.
#define PENALTY_WINDOW_SCRATCH 256

// ---- random numbers: splitmix64 seeds xoshiro256** ----

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t st[4])
{
    const uint64_t result = rotl64(st[1] * 5, 7) * 9;
    const uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return result;
}

// Uniform in [0, 1) with 53 random bits.
static double uniform01(uint64_t st[4]) { return (double)(xoshiro_next(st) >> 11) * 0x1.0p-53; }

// ---- candidate ordering and selection ----

static bool better(const struct strata_sampler_candidate *a, const struct strata_sampler_candidate *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void swap_cand(struct strata_sampler_candidate *a, struct strata_sampler_candidate *b)
{
    struct strata_sampler_candidate t = *a;
    *a = *b;
    *b = t;
}

// Heap of h[0..m) whose root is the worst element.
static void sift_down_worst(struct strata_sampler_candidate *h, size_t m, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < m && better(&h[w], &h[l])) w = l;
        if (r < m && better(&h[w], &h[r])) w = r;
        if (w == i) return;
        swap_cand(&h[i], &h[w]);
        i = w;
    }
}

// Permutes c[0..n) so that c[0..m) holds the m best in descending order; the rest stay behind
// it in some order. m <= n.
static void select_best(struct strata_sampler_candidate *c, size_t n, size_t m)
{
    if (m == 0) return;
    for (size_t i = m / 2; i-- > 0;) sift_down_worst(c, m, i);
    for (size_t i = m; i < n; i++) {
        if (better(&c[i], &c[0])) {
            swap_cand(&c[i], &c[0]);
            sift_down_worst(c, m, 0);
        }
    }
    // Heap sort: moving the worst to the end each time leaves c[0..m) descending.
    for (size_t end = m - 1; end > 0; end--) {
        swap_cand(&c[0], &c[end]);
        sift_down_worst(c, end, 0);
    }
}

static float max_logit(const struct strata_sampler_candidate *c, size_t n, bool sorted)
{
    if (sorted) return c[0].logit;
    float m = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit > m) m = c[i].logit;
    return m;
}

// Sets c[i].p = softmax over c[0..n) of the logits; returns false if every logit is -inf.
static bool softmax(struct strata_sampler_candidate *c, size_t n, bool sorted)
{
    const float m = max_logit(c, n, sorted);
    if (m == -INFINITY) return false;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        float e = expf(c[i].logit - m);
        c[i].p = e;
        sum += e;
    }
    const float inv = (float)(1.0 / sum);
    for (size_t i = 0; i < n; i++) c[i].p *= inv;
    return true;
}

// ---- chain steps ----

// The distinct tokens among the last repeat_last_n of history, each once: window_begin starts a
// scan (a new stamp) and gives its first index; window_next gives the next distinct token (1), the
// end (0), or STRATA_EARG for an id outside the vocabulary.
static size_t window_begin(struct strata_sampler *s, size_t n_history)
{
    const struct strata_sampler_params *p = &s->params;
    size_t window = p->repeat_last_n < 0 ? n_history : (size_t)p->repeat_last_n;
    if (window > n_history) window = n_history;
    if (++s->stamp == 0) {
        memset(s->seen, 0, (size_t)s->n_vocab * sizeof *s->seen);
        s->stamp = 1;
    }
    return n_history - window;
}

static int window_next(struct strata_sampler *s, const int32_t *history, size_t n_history, size_t *i, int32_t *t)
{
    for (; *i < n_history; (*i)++) {
        *t = history[*i];
        if (*t < 0 || *t >= s->n_vocab) {
            strata_log_error("strata_sampler_sample: history[%zu] = %d is outside the vocabulary of %d", *i, (int)*t,
                             (int)s->n_vocab);
            return STRATA_EARG;
        }
        if (s->seen[*t] == s->stamp) continue;
        s->seen[*t] = s->stamp;
        (*i)++;
        return 1;
    }
    return 0;
}

static float penalized(const struct strata_sampler_params *p, float l)
{
    return l <= 0.0f ? l * p->repeat_penalty : l / p->repeat_penalty;
}

// Applies the penalty once per distinct token of the window to cand, which must still be in id
// order. Checks the ids it reads.
static int apply_penalty(struct strata_sampler *s, const int32_t *history, size_t n_history)
{
    size_t i = window_begin(s, n_history);
    int32_t t;
    int r;
    while ((r = window_next(s, history, n_history, &i, &t)) > 0)
        s->cand[t].logit = penalized(&s->params, s->cand[t].logit);
    return r;
}

// Radix key whose ascending order is descending logit order (NaN was replaced by -inf; -0 is
// folded into +0 so that the two tie, as they do for better()).
static uint32_t desc_key(float logit)
{
    if (logit == 0.0f) logit = 0.0f;
    uint32_t u;
    memcpy(&u, &logit, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending float order as unsigned
    return ~u;
}

#define RADIX_BITS 11
#define RADIX_SIZE (1u << RADIX_BITS)

// One stable counting pass of a radix sort on the key's digit `shift`.
static void radix_pass(const struct strata_sampler_candidate *src, struct strata_sampler_candidate *dst,
                       size_t n, int shift, uint32_t *count)
{
    uint32_t sum = 0;
    for (uint32_t d = 0; d < RADIX_SIZE; d++) {
        uint32_t c = count[d];
        count[d] = sum;
        sum += c;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t d = (desc_key(src[i].logit) >> shift) & (RADIX_SIZE - 1);
        dst[count[d]++] = src[i];
    }
}

// Sorts all n_vocab candidates of c (a permutation of the ids 0..n-1) into descending order,
// ties by ascending id: a scatter by id restores id order, then three stable 11-bit passes
// (c -> tmp -> c -> tmp -> c). O(n), where a comparison sort of 151k tokens costs ~25 ms.
static void sort_all(struct strata_sampler_candidate *c, struct strata_sampler_candidate *tmp, size_t n)
{
    static const int shifts[3] = {0, RADIX_BITS, 2 * RADIX_BITS};
    uint32_t count[3][RADIX_SIZE];
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++) {
        uint32_t k = desc_key(c[i].logit);
        for (int pass = 0; pass < 3; pass++) count[pass][(k >> shifts[pass]) & (RADIX_SIZE - 1)]++;
        tmp[c[i].id] = c[i];
    }
    radix_pass(tmp, c, n, shifts[0], count[0]);
    radix_pass(c, tmp, n, shifts[1], count[1]);
    radix_pass(tmp, c, n, shifts[2], count[2]);
}

// Keeps the smallest descending prefix whose probability reaches top_p (at least one).
// Returns the new size; leaves cand sorted over it. Unsorted input is the whole vocabulary.
static size_t apply_top_p(struct strata_sampler *s, size_t n, bool *sorted, float top_p)
{
    struct strata_sampler_candidate *c = s->cand;
    if (!softmax(c, n, *sorted)) return 1;  // all -inf: keep the first
    size_t have = n;  // length of the prefix known to be in descending order
    if (!*sorted) {
        STRATA_ASSERT(n == (size_t)s->n_vocab);  // nothing filtered yet: sort_all's precondition
        have = n > 4 * TOP_P_FIRST_PREFIX ? TOP_P_FIRST_PREFIX : n;
        if (have == n) sort_all(c, s->sorted_tmp, n);
        else select_best(c, n, have);
    }
    *sorted = true;
    double cum = 0.0;
    for (size_t i = 0;; i++) {
        if (i == have) {
            // Flat distribution: the mass is not in the first prefix; sort everything.
            sort_all(c, s->sorted_tmp, n);
            have = n;
        }
        cum += c[i].p;
        if (cum >= top_p || i + 1 == n) return i + 1;
    }
}

// Keeps tokens whose logit is within log(min_p) of the maximum (p_i >= min_p * p_max),
// preserving order; the maximum always stays.
static size_t apply_min_p(struct strata_sampler_candidate *c, size_t n, bool sorted, float min_p)
{
    const float m = max_logit(c, n, sorted);
    const float threshold = m + logf(min_p);
    if (sorted) {
        size_t k = 1;
        while (k < n && c[k].logit >= threshold) k++;
        return k;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].logit >= threshold) c[k++] = c[i];
    if (k == 0) {  // min_p of 1 with rounding, or all -inf: keep the best one
        size_t best = 0;
        for (size_t i = 1; i < n; i++)
            if (better(&c[i], &c[best])) best = i;
        c[0] = c[best];
        k = 1;
    }
    return k;
}

static bool penalty_active(const struct strata_sampler_params *p, size_t n_history)
{
    return p->repeat_penalty != 1.0f && p->repeat_last_n != 0 && n_history > 0;
}

// Greedy without penalty: argmax straight from the caller's row, NaN skipped, first wins.
// The first index of the largest logit (NaN never wins; 0 when none is above -inf), as a scalar
// scan of "logits[i] > best" gives it, in two steps that vectorize: the maximum of each block of
// ARGMAX_BLOCK over 16 independent lanes (a maximum does not depend on the order it is taken in),
// the first block that reaches the largest, then the first index in that block equal to it. A
// greedy step reads the whole vocabulary once per token, on one thread: 151,936 logits took
// ~0.25 ms with the scalar scan (1.4% of a 2-thread decode step, more of a faster one).
#define ARGMAX_BLOCK 1024

static float block_max(const float *x, int32_t n)
{
    float lane[16];
    for (int j = 0; j < 16; j++) lane[j] = -INFINITY;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    for (; i < n; i++) lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    float m = -INFINITY;
    for (int j = 0; j < 16; j++) m = lane[j] > m ? lane[j] : m;
    return m;
}

static int32_t argmax_row(const float *logits, int32_t n)
{
    float best_l = -INFINITY;
    int32_t best_b = -1;
    for (int32_t b = 0; b < n; b += ARGMAX_BLOCK) {
        const float m = block_max(logits + b, n - b < ARGMAX_BLOCK ? n - b : ARGMAX_BLOCK);
        if (m > best_l) best_l = m, best_b = b;
    }
    if (best_b < 0) return 0;
    for (int32_t i = best_b;; i++)
        if (logits[i] == best_l) return i;
}

// The k best of a row by better()'s order (logit descending, then id ascending; NaN counts as
// -inf) without writing a candidate per token: a heap of the first k whose root is the worst,
// then blocks of TOPK_BLOCK whose maximum is not above the root skipped whole (a later token
// enters only with a larger logit: on a tie its id is higher; NaN compares false and never does),
// then a heap sort. On a 151,936-token row this reads the logits about once, as the greedy scan
// does (a candidate per token and a heap test per token took ~0.3 ms a sampled token).
#define TOPK_BLOCK 64

static bool tl_better(const struct strata_token_logit *a, const struct strata_token_logit *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void tl_sift_down_worst(struct strata_token_logit *h, int m, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < m && tl_better(&h[w], &h[l])) w = l;
        if (r < m && tl_better(&h[w], &h[r])) w = r;
        if (w == i) return;
        const struct strata_token_logit t = h[i];
        h[i] = h[w], h[w] = t;
        i = w;
    }
}

void strata_top_k(const float *x, int32_t n, int k, struct strata_token_logit *out)
{
    STRATA_ASSERT(k >= 1 && k <= n);
    struct strata_token_logit *h = out;
    for (int i = 0; i < k; i++) h[i] = (struct strata_token_logit){i, isnan(x[i]) ? -INFINITY : x[i]};
    for (int i = k / 2; i-- > 0;) tl_sift_down_worst(h, k, i);
    for (int32_t i = k; i < n; i += TOPK_BLOCK) {
        const int32_t len = n - i < TOPK_BLOCK ? n - i : TOPK_BLOCK;
        if (!(block_max(x + i, len) > h[0].logit)) continue;
        for (int32_t j = i; j < i + len; j++)
            if (x[j] > h[0].logit) {  // NaN compares false
                h[0] = (struct strata_token_logit){j, x[j]};
                tl_sift_down_worst(h, k, 0);
            }
    }
    for (int end = k - 1; end > 0; end--) {
        const struct strata_token_logit t = h[0];
        h[0] = h[end], h[end] = t;
        tl_sift_down_worst(h, end, 0);
    }
}

int32_t strata_argmax(const float *x, int32_t n)
{
    return n > 0 ? argmax_row(x, n) : 0;
}

bool strata_sampler_is_argmax(const struct strata_sampler *s, size_t n_history)
{
    return s->params.temperature <= 0.0f && !penalty_active(&s->params, n_history);
}

static int check_call(const struct strata_sampler *s, const float *logits, const int32_t *history,
                      size_t n_history)
{
    if (!s || !s->cand || !logits || (n_history > 0 && !history)) {
        strata_log_error("strata_sampler_sample: %s is NULL",
                         !s || !s->cand ? "sampler" : !logits ? "logits" : "history");
        return STRATA_EARG;
    }
    return 0;
}

// ---- public ----

struct strata_sampler_params strata_sampler_default_params(void)
{
    return (struct strata_sampler_params){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .seed = 0,
    };
}

int strata_sampler_init(struct strata_sampler *s, struct strata_sampler_params params, int32_t n_vocab)
{
    memset(s, 0, sizeof *s);
    const char *bad = NULL;
    double value = 0;
    if (n_vocab <= 0) bad = "n_vocab", value = n_vocab;
    else if (isnan(params.temperature)) bad = "temperature", value = params.temperature;
    else if (params.top_k < 0) bad = "top_k", value = params.top_k;
    else if (!(params.top_p >= 0.0f && params.top_p <= 1.0f)) bad = "top_p", value = params.top_p;
    else if (!(params.min_p >= 0.0f && params.min_p <= 1.0f)) bad = "min_p", value = params.min_p;
    else if (!(params.repeat_penalty > 0.0f && isfinite(params.repeat_penalty)))
        bad = "repeat_penalty", value = params.repeat_penalty;
    else if (params.repeat_last_n < -1) bad = "repeat_last_n", value = params.repeat_last_n;
    if (bad) {
        strata_log_error("strata_sampler_init: %s = %g is out of range", bad, value);
        return STRATA_EARG;
    }
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->sorted_tmp = malloc((size_t)n_vocab * sizeof *s->sorted_tmp);
    s->seen = calloc((size_t)n_vocab, sizeof *s->seen);
    // the row's best: top_k, and with a penalty as many more as the window has distinct tokens
    s->win_cap = params.repeat_last_n > 0 ? (size_t)params.repeat_last_n : PENALTY_WINDOW_SCRATCH;
    if (s->win_cap > (size_t)n_vocab) s->win_cap = (size_t)n_vocab;
    const size_t top_cap = (params.top_k > 0 && params.top_k < n_vocab ? (size_t)params.top_k : 1) + s->win_cap;
    s->top = malloc(top_cap * sizeof *s->top);
    s->win = malloc(s->win_cap * sizeof *s->win);
    if (!s->cand || !s->sorted_tmp || !s->seen || !s->top || !s->win) {
        strata_log_error("strata_sampler_init: cannot allocate scratch for %d tokens", (int)n_vocab);
        strata_sampler_clear(s);
        return STRATA_ENOMEM;
    }
    s->params = params;
    s->n_vocab = n_vocab;
    strata_sampler_seed(s, params.seed);
    return 0;
}

void strata_sampler_clear(struct strata_sampler *s)
{
    if (!s) return;
    free(s->cand);
    free(s->sorted_tmp);
    free(s->seen);
    free(s->top);
    free(s->win);
    s->top = NULL;
    s->win = NULL;
    s->cand = NULL;
    s->sorted_tmp = NULL;
    s->seen = NULL;
}

void strata_sampler_seed(struct strata_sampler *s, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
    s->params.seed = seed;
}

// k > 0 when the draw depends only on the row's k best (the sampler then selects them itself).
static int row_top_k(const struct strata_sampler *s, size_t n_history)
{
    const struct strata_sampler_params *p = &s->params;
    return p->temperature > 0.0f && !penalty_active(p, n_history) && p->top_k > 0 && p->top_k < s->n_vocab
               ? p->top_k
               : 0;
}

int strata_sampler_top_k(const struct strata_sampler *s, size_t n_history)
{
    const int k = row_top_k(s, n_history);
    return k <= STRATA_TOP_K_MAX ? k : 0;
}

// The chain after top-k over the k best, c[0..n) in descending order: top-p, min-p, temperature,
// the probabilities.
static int chain_after_top_k(struct strata_sampler *s, size_t n, bool sorted)
{
    const struct strata_sampler_params *p = &s->params;
    struct strata_sampler_candidate *c = s->cand;
    if (p->top_p < 1.0f && n > 1) n = apply_top_p(s, n, &sorted, p->top_p);
    if (p->min_p > 0.0f && n > 1) n = apply_min_p(c, n, sorted, p->min_p);

    const float inv_temp = 1.0f / p->temperature;
    for (size_t i = 0; i < n; i++) c[i].logit *= inv_temp;
    if (!softmax(c, n, sorted)) {
        // Every surviving logit is -inf: there is no distribution; take the first (best) one.
        for (size_t i = 0; i < n; i++) c[i].p = i == 0 ? 1.0f : 0.0f;
    }
    return (int)n;
}

// The k best as the chain's candidates.
static void take_top(struct strata_sampler *s, const struct strata_token_logit *top, int k)
{
    for (int i = 0; i < k; i++) s->cand[i] = (struct strata_sampler_candidate){top[i].id, top[i].logit, 0.0f};
}

// Top-k (or greedy's top 1) after a repetition penalty, without a candidate per token: the
// penalty only changes the window's distinct tokens W, so the k best of the penalized row are the
// best k among W's penalized logits and the row's best k + |W| that are not in W (a token outside
// those has at least k tokens not in W ahead of it). Sets c[0..k) as the full path's
// select_best does (the same order). 1 when done, 0 when W has more tokens than the scratch (the
// caller takes the full path), or a negative code for a history id outside the vocabulary.
static int penalized_top_k(struct strata_sampler *s, const float *logits, const int32_t *history, size_t n_history,
                           int k)
{
    size_t i = window_begin(s, n_history), nw = 0;
    int32_t t;
    int r;
    while ((r = window_next(s, history, n_history, &i, &t)) > 0) {
        if (nw == s->win_cap) return 0;
        s->win[nw++] = t;
    }
    if (r < 0) return r;
    const size_t kk = (size_t)k + nw;
    if (kk >= (size_t)s->n_vocab) return 0;
    strata_top_k(logits, s->n_vocab, (int)kk, s->top);
    struct strata_sampler_candidate *c = s->cand;
    size_t m = 0;
    for (size_t j = 0; j < kk; j++)
        if (s->seen[s->top[j].id] != s->stamp)
            c[m++] = (struct strata_sampler_candidate){s->top[j].id, s->top[j].logit, 0.0f};
    for (size_t j = 0; j < nw; j++) {
        const float l = logits[s->win[j]];
        c[m++] = (struct strata_sampler_candidate){s->win[j], penalized(&s->params, isnan(l) ? -INFINITY : l), 0.0f};
    }
    select_best(c, m, (size_t)k);
    return 1;
}

int strata_sampler_filter(struct strata_sampler *s, const float *logits, const int32_t *history,
                          size_t n_history, const struct strata_sampler_candidate **out)
{
    int rc = check_call(s, logits, history, n_history);
    if (rc < 0) return rc;
    const struct strata_sampler_params *p = &s->params;
    struct strata_sampler_candidate *c = s->cand;
    const size_t n_vocab = (size_t)s->n_vocab;
    *out = c;

    if (p->temperature <= 0.0f && !penalty_active(p, n_history)) {
        int32_t best = argmax_row(logits, s->n_vocab);
        c[0] = (struct strata_sampler_candidate){best, logits[best], 1.0f};
        return 1;
    }
    const int k = row_top_k(s, n_history);
    if (k > 0) {  // the k best straight from the row
        strata_top_k(logits, s->n_vocab, k, s->top);
        take_top(s, s->top, k);
        return chain_after_top_k(s, (size_t)k, true);
    }
    if (penalty_active(p, n_history) && (p->temperature <= 0.0f || (p->top_k > 0 && p->top_k < s->n_vocab))) {
        const int kp = p->temperature <= 0.0f ? 1 : p->top_k;
        rc = penalized_top_k(s, logits, history, n_history, kp);
        if (rc < 0) return rc;
        if (rc == 1 && p->temperature <= 0.0f) {
            c[0].p = 1.0f;
            return 1;
        }
        if (rc == 1) return chain_after_top_k(s, (size_t)kp, true);
    }

    for (size_t i = 0; i < n_vocab; i++) {
        float l = logits[i];
        c[i] = (struct strata_sampler_candidate){(int32_t)i, isnan(l) ? -INFINITY : l, 0.0f};
    }
    if (penalty_active(p, n_history)) {
        rc = apply_penalty(s, history, n_history);
        if (rc < 0) return rc;
    }
    if (p->temperature <= 0.0f) {
        size_t best = 0;
        for (size_t i = 1; i < n_vocab; i++)
            if (c[i].logit > c[best].logit) best = i;
        c[0] = c[best];
        c[0].p = 1.0f;
        return 1;
    }
    size_t n = n_vocab;
    bool sorted = false;
    if (p->top_k > 0 && (size_t)p->top_k < n) {
        select_best(c, n, (size_t)p->top_k);
        n = (size_t)p->top_k;
        sorted = true;
    }
    return chain_after_top_k(s, n, sorted);
}

// A draw from the n filtered candidates.
static int32_t draw(struct strata_sampler *s, const struct strata_sampler_candidate *c, int n)
{
    if (n == 1) {
        // Draw anyway when sampling, so that the random sequence does not depend on how many
        // candidates survived (as llama.cpp's dist sampler does).
        if (s->params.temperature > 0.0f) (void)uniform01(s->rng);
        return c[0].id;
    }
    // Walk the cumulative mass to a uniform target; the strict comparison never selects a
    // token of probability 0, and the last token is reached since target < total.
    double total = 0.0;
    for (int i = 0; i < n; i++) total += c[i].p;
    const double target = uniform01(s->rng) * total;
    double run = 0.0;
    for (int i = 0; i < n; i++) {
        run += c[i].p;
        if (run > target) return c[i].id;
    }
    for (int i = n - 1; i > 0; i--)
        if (c[i].p > 0.0f) return c[i].id;
    return c[0].id;
}

int32_t strata_sampler_sample(struct strata_sampler *s, const float *logits, const int32_t *history,
                              size_t n_history)
{
    const struct strata_sampler_candidate *c;
    int n = strata_sampler_filter(s, logits, history, n_history, &c);
    if (n < 0) return n;
    return draw(s, c, n);
}

int32_t strata_sampler_sample_top(struct strata_sampler *s, const struct strata_token_logit *top, int k,
                                  size_t n_history)
{
    const int want = s && s->cand ? strata_sampler_top_k(s, n_history) : 0;
    if (!top || want == 0 || k != want) {
        strata_log_error("strata_sampler_sample_top: %d candidates where the sampler takes %d from the row", k, want);
        return STRATA_EARG;
    }
    for (int i = 0; i < k; i++)
        if (top[i].id < 0 || top[i].id >= s->n_vocab || isnan(top[i].logit) ||
            (i > 0 && !tl_better(&top[i - 1], &top[i]))) {
            strata_log_error("strata_sampler_sample_top: candidate %d (id %d) is not in the row's best-first order", i,
                             (int)top[i].id);
            return STRATA_EARG;
        }
    take_top(s, top, k);
    const int n = chain_after_top_k(s, (size_t)k, true);
    return draw(s, s->cand, n);
}
