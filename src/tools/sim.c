// Cache-policy simulator over route traces (see sim.h). Per layer the trace becomes a list of
// access groups; each policy keeps, per expert, resident / last use / frequency / CRF / next use,
// and scans the n_expert entries for a victim on a miss (n_expert is at most a few hundred).
#include "tools/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "experts/layout.h"
#include "util/log.h"

#define LRFU_LAMBDA 0.05

struct groups {
    uint32_t *ids;       // all groups' ids back to back
    uint32_t *start;     // [n_groups + 1]
    uint64_t *next_use;  // [total ids]: index of the next group using the same id, UINT64_MAX if none
    uint8_t *cont;       // [n_groups]: the group continues the previous group's pass, which stays
                         // pinned while this one is read (the engine fetches it meanwhile)
    uint8_t *one;        // [n_groups]: the group is a one-token pass's (decode, not a prompt chunk)
    uint64_t n_groups;
    uint64_t n_one;      // one-token passes (the same in every layer)
};

const char *strata_sim_policy_name(enum strata_sim_policy p)
{
    static const char *const names[STRATA_SIM_COUNT] = {"LRU", "LFU", "LRFU", "ARC", "HOT", "Belady"};
    return p < STRATA_SIM_COUNT ? names[p] : "?";
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// Next use of every access (for Belady), scanning backwards with the last group index seen per expert.
static int set_next_use(struct groups *g, uint32_t X)
{
    uint64_t *last = malloc((size_t)X * sizeof *last);
    if (!last) return STRATA_ENOMEM;
    for (uint32_t e = 0; e < X; e++) last[e] = UINT64_MAX;
    for (uint64_t gi = g->n_groups; gi-- > 0;)
        for (uint32_t i = g->start[gi]; i < g->start[gi + 1]; i++) {
            g->next_use[i] = last[g->ids[i]];
            last[g->ids[i]] = gi;
        }
    free(last);
    return 0;
}

// The access groups of layer l, in the engine's order and grouping (strata_expert_pass_group).
static int build_groups(const struct strata_trace *t, uint32_t l, uint32_t n_slots, bool chunks, struct groups *g)
{
    const uint32_t K = t->topk, X = t->n_expert;
    memset(g, 0, sizeof *g);
    g->ids = malloc(t->n_tokens * K * sizeof *g->ids + 1);
    g->start = malloc((t->n_tokens * K + 2) * sizeof *g->start);
    g->next_use = malloc(t->n_tokens * K * sizeof *g->next_use + 1);
    g->cont = calloc(t->n_tokens * K + 2, 1);
    g->one = calloc(t->n_tokens * K + 2, 1);
    uint8_t *seen = calloc(X, 1);
    uint32_t *uni = malloc(((size_t)X + 1) * sizeof *uni);
    int32_t *count = calloc((size_t)X + 1, sizeof *count);
    uint64_t *scratch = malloc(((size_t)X + 1) * sizeof *scratch);
    if (!g->ids || !g->start || !g->next_use || !g->cont || !g->one || !seen || !uni || !count || !scratch) {
        free(seen);
        free(uni);
        free(count);
        free(scratch);
        return STRATA_ENOMEM;
    }
    uint64_t n_ids = 0;
    for (uint64_t t0 = 0; t0 < t->n_tokens;) {
        uint64_t t1 = t0 + 1;
        if (chunks)
            while (t1 < t->n_tokens && t->chunk[t1] == t->chunk[t0]) t1++;
        uint32_t n_uni = 0;
        for (uint64_t tok = t0; tok < t1; tok++)
            for (uint32_t k = 0; k < K; k++) {
                const uint32_t e = (uint32_t)t->ids[(tok * t->n_layers + l) * K + k];
                count[e]++;
                if (!seen[e]) {
                    seen[e] = 1;
                    uni[n_uni++] = e;
                }
            }
        g->n_one += t1 - t0 == 1;
        qsort(uni, n_uni, sizeof *uni, cmp_u32);
        const uint32_t per = (uint32_t)strata_expert_pass_group((int)n_uni, (int)n_slots);
        if (per < n_uni) strata_expert_pass_order(uni, (int)n_uni, count, scratch);
        for (uint32_t i = 0; i < n_uni; i++) {
            seen[uni[i]] = 0;
            count[uni[i]] = 0;
            if (i % per == 0) {
                g->cont[g->n_groups] = i > 0;
                g->one[g->n_groups] = t1 - t0 == 1;
                g->start[g->n_groups++] = (uint32_t)n_ids;
            }
            g->ids[n_ids++] = uni[i];
        }
        t0 = t1;
    }
    g->start[g->n_groups] = (uint32_t)n_ids;
    free(seen);
    free(uni);
    free(count);
    free(scratch);
    return set_next_use(g, X);
}

static void free_groups(struct groups *g)
{
    free(g->ids);
    free(g->start);
    free(g->next_use);
    free(g->cont);
    free(g->one);
}

struct pstate {
    uint8_t *resident, *pinned, *hot;
    uint64_t *last, *freq, *next_use;
    double *crf;
    uint8_t *list;       // ARC: which list an expert is on
    double arc_p;        // ARC: target size of T1
    uint32_t n_list[5];  // ARC: sizes of the lists
};

enum { ARC_NONE, ARC_T1, ARC_T2, ARC_B1, ARC_B2 };

// Lower score = evicted first.
static double score(enum strata_sim_policy p, const struct pstate *s, uint32_t e, uint64_t now)
{
    switch (p) {
    case STRATA_SIM_LRU: return (double)s->last[e];
    case STRATA_SIM_LFU: return (double)s->freq[e] + (double)s->last[e] / ((double)now + 2.0);
    case STRATA_SIM_LRFU: return s->crf[e] * pow(2.0, -LRFU_LAMBDA * (double)(now - s->last[e]));
    case STRATA_SIM_HOT: return (double)s->last[e] + (s->hot[e] ? 1e30 : 0.0);
    case STRATA_SIM_BELADY: return s->next_use[e] == UINT64_MAX ? -HUGE_VAL : -(double)s->next_use[e];
    default: return 0;
    }
}

void strata_sim_hot_set(const struct strata_trace *t, uint32_t l, uint32_t n_hot, uint8_t *hot)
{
    const uint32_t X = t->n_expert;
    memset(hot, 0, X);
    uint32_t *order = malloc((size_t)X * sizeof *order);
    if (order && strata_trace_rank(t, l, order) == 0)
        for (uint32_t h = 0; h < n_hot && h < X; h++) hot[order[h]] = 1;
    free(order);
}

// ARC's least recently used unpinned expert of a list (-1 if none).
static int64_t arc_lru(const struct pstate *s, uint32_t X, uint8_t list, bool skip_pinned)
{
    int64_t v = -1;
    for (uint32_t e = 0; e < X; e++)
        if (s->list[e] == list && !(skip_pinned && s->pinned[e]) && (v < 0 || s->last[e] < s->last[v])) v = e;
    return v;
}

static void arc_move(struct pstate *s, uint32_t e, uint8_t to)
{
    s->n_list[s->list[e]]--;
    s->list[e] = to;
    s->n_list[to]++;
    s->resident[e] = to == ARC_T1 || to == ARC_T2;
}

// ARC's REPLACE: evict from T1 to B1 or from T2 to B2 (skipping pinned experts).
static void arc_replace(struct pstate *s, uint32_t X, bool in_b2)
{
    const double t1 = s->n_list[ARC_T1];
    bool from_t1 = t1 >= 1 && ((in_b2 && t1 == s->arc_p) || t1 > s->arc_p);
    int64_t v = arc_lru(s, X, from_t1 ? ARC_T1 : ARC_T2, true);
    if (v < 0) {
        from_t1 = !from_t1;
        v = arc_lru(s, X, from_t1 ? ARC_T1 : ARC_T2, true);
    }
    STRATA_ASSERT(v >= 0);  // a group holds at most n_slots experts
    arc_move(s, (uint32_t)v, from_t1 ? ARC_B1 : ARC_B2);
}

// One ARC request for e (cache of c): true on a hit.
static bool arc_request(struct pstate *s, uint32_t X, uint32_t c, uint32_t e)
{
    const uint8_t where = s->list[e];
    if (where == ARC_T1 || where == ARC_T2) {
        arc_move(s, e, ARC_T2);
        return true;
    }
    const uint32_t b1 = s->n_list[ARC_B1], b2 = s->n_list[ARC_B2];
    const bool full = s->n_list[ARC_T1] + s->n_list[ARC_T2] >= c;
    if (where == ARC_B1) {
        s->arc_p = fmin((double)c, s->arc_p + fmax((double)b2 / b1, 1.0));
        if (full) arc_replace(s, X, false);
        arc_move(s, e, ARC_T2);
        return false;
    }
    if (where == ARC_B2) {
        s->arc_p = fmax(0.0, s->arc_p - fmax((double)b1 / b2, 1.0));
        if (full) arc_replace(s, X, true);
        arc_move(s, e, ARC_T2);
        return false;
    }
    const uint32_t l1 = s->n_list[ARC_T1] + b1, total = l1 + s->n_list[ARC_T2] + b2;
    if (l1 >= c) {
        if (s->n_list[ARC_T1] < c) {
            arc_move(s, (uint32_t)arc_lru(s, X, ARC_B1, false), ARC_NONE);
            if (full) arc_replace(s, X, false);
        } else {
            int64_t v = arc_lru(s, X, ARC_T1, true);
            if (v < 0) v = arc_lru(s, X, ARC_T2, true);
            STRATA_ASSERT(v >= 0);
            arc_move(s, (uint32_t)v, ARC_NONE);
        }
    } else if (total >= c) {
        if (total >= 2 * c && b2 > 0) arc_move(s, (uint32_t)arc_lru(s, X, ARC_B2, false), ARC_NONE);
        if (full) arc_replace(s, X, false);
    }
    arc_move(s, e, ARC_T1);
    return false;
}

int strata_sim_run(const struct strata_trace *t, enum strata_sim_policy p, uint32_t n_slots, bool chunks,
                   struct strata_sim_result *r)
{
    const struct strata_sim_opts o = {.chunks = chunks};
    return strata_sim_replay(t, p, n_slots, &o, r);
}

static void reset_state(struct pstate *s, uint32_t X)
{
    memset(s->resident, 0, X);
    memset(s->pinned, 0, X);
    memset(s->last, 0, X * sizeof *s->last);
    memset(s->freq, 0, X * sizeof *s->freq);
    memset(s->crf, 0, X * sizeof *s->crf);
    memset(s->list, 0, X);
    memset(s->n_list, 0, sizeof s->n_list);
    s->n_list[ARC_NONE] = X;
    s->arc_p = 0;
}

// One layer's groups through one cache of n_slots policy slots (pin[e]: pinned experts, always
// hits). miss (optional): each group's misses become a group of the next tier, cut at miss_batch
// (the copy thread's batches), so a tier below replays exactly what this one missed.
static void replay_layer(enum strata_sim_policy p, struct pstate *s, const struct groups *g, uint32_t X,
                         uint32_t n_slots, const uint8_t *pin, struct strata_sim_result *r, struct groups *miss,
                         uint32_t miss_batch)
{
    uint32_t n_res = 0;
    uint64_t now = 0;
    for (uint64_t gi = 0; gi < g->n_groups; gi++) {
        const uint32_t a = g->start[gi], b = g->start[gi + 1];
        const uint32_t pa = g->cont[gi] ? g->start[gi - 1] : a;  // the previous group, still pinned
        for (uint32_t i = pa; i < b; i++) s->pinned[g->ids[i]] = 1;
        uint32_t n_missed = 0;
        const bool one = g->one[gi];
        for (uint32_t i = a; i < b; i++) {
            const uint32_t e = g->ids[i];
            if (pin[e]) {  // pinned at open, never evicted
                r->hits++;
                r->decode_hits += one;
                continue;
            }
            bool hit;
            if (p == STRATA_SIM_ARC) {
                now++;
                s->last[e] = now;  // ARC orders its lists by this access
                hit = arc_request(s, X, n_slots, e);
            } else if (!(hit = s->resident[e])) {
                if (n_res == n_slots) {
                    int64_t v = -1;
                    double best = 0;
                    for (uint32_t x = 0; x < X; x++) {
                        if (!s->resident[x] || s->pinned[x]) continue;
                        const double sc = score(p, s, x, now);
                        if (v < 0 || sc < best) {
                            v = x;
                            best = sc;
                        }
                    }
                    STRATA_ASSERT(v >= 0);  // a group holds at most n_slots experts
                    s->resident[v] = 0;
                    n_res--;
                }
                s->resident[e] = 1;
                n_res++;
            }
            if (hit) {
                r->hits++;
                r->decode_hits += one;
                continue;
            }
            r->misses++;
            r->decode_misses += one;
            if (miss) {
                if (n_missed++ % miss_batch == 0) {
                    // a new group of the next tier: it starts where the groups so far end
                    miss->start[miss->n_groups + 1] = miss->start[miss->n_groups];
                    miss->one[miss->n_groups] = one;
                    miss->n_groups++;
                }
                miss->ids[miss->start[miss->n_groups]++] = e;
            }
        }
        // Recency, frequency, CRF and next use in the group's order, as the engine ticks.
        for (uint32_t i = a; i < b; i++) {
            const uint32_t e = g->ids[i];
            if (p == STRATA_SIM_ARC) {
                s->pinned[e] = 0;
                continue;
            }
            now++;
            s->crf[e] = 1.0 + s->crf[e] * pow(2.0, -LRFU_LAMBDA * (double)(now - s->last[e]));
            s->last[e] = now;
            s->freq[e]++;
            s->next_use[e] = g->next_use[i];
            s->pinned[e] = 0;
        }
        for (uint32_t i = pa; i < a; i++) s->pinned[g->ids[i]] = 0;
    }
}

static int check_trace(const char *what, const struct strata_trace *u, const struct strata_trace *t)
{
    if (u->n_layers == t->n_layers && u->n_expert == t->n_expert) return 0;
    strata_log_error("sim_run: the %s trace has %u layers x %u experts, the replayed one %u x %u", what, u->n_layers,
                     u->n_expert, t->n_layers, t->n_expert);
    return STRATA_EARG;
}

int strata_sim_replay2(const struct strata_trace *t, enum strata_sim_policy p, uint32_t vram_slots,
                       uint32_t host_slots, const struct strata_sim_opts *o, struct strata_sim_result *vram,
                       struct strata_sim_result *host)
{
    const int n_tiers = host ? 2 : 1;
    uint32_t slots[2] = {vram_slots, host_slots};
    struct strata_sim_result *res[2] = {vram, host};
    for (int k = 0; k < n_tiers; k++) memset(res[k], 0, sizeof *res[k]);
    for (int k = 0; k < n_tiers; k++)
        if (p >= STRATA_SIM_COUNT || slots[k] < t->topk || t->n_expert == 0) {
            strata_log_error("sim_run: %u slots per layer is below top-k %u (or policy %d unknown)", slots[k], t->topk,
                             (int)p);
            return STRATA_EARG;
        }
    const uint32_t X = t->n_expert;
    const struct strata_trace *hot_from = o->hot_from ? o->hot_from : t, *pin_from = o->pin_from;
    int rc = p == STRATA_SIM_HOT ? check_trace("hot-set", hot_from, t) : 0;
    if (rc == 0 && pin_from) rc = check_trace("pin", pin_from, t);
    if (rc) return rc;
    struct pstate s;
    s.resident = malloc(X);
    s.pinned = malloc(X);
    s.last = malloc(X * sizeof *s.last);
    s.freq = malloc(X * sizeof *s.freq);
    s.next_use = malloc(X * sizeof *s.next_use);
    s.crf = malloc(X * sizeof *s.crf);
    s.hot = calloc(X, 1);
    s.list = calloc(X, 1);
    uint8_t *pin = calloc(X, 1);
    rc = s.resident && s.pinned && s.last && s.freq && s.next_use && s.crf && s.hot && s.list && pin ? 0 : STRATA_ENOMEM;
    uint32_t n_pin[2] = {0, 0};
    for (int k = 0; k < n_tiers; k++) {
        if (slots[k] > X) slots[k] = X;
        n_pin[k] = pin_from ? strata_expert_pin_count(slots[k], X, t->topk, o->pin_share) : 0;
        res[k]->n_pinned = n_pin[k];
        slots[k] -= n_pin[k];  // the policy's slots, and the engine's max_batch
    }
    // the copy thread's batches: up to 16, at most what the host store hands out at once
    const uint32_t batch = slots[1] < 16 ? slots[1] : 16;
    uint64_t n_one = 0;  // one-token passes (decode), as build_groups cuts them
    for (uint32_t l = 0; l < t->n_layers && rc == 0; l++) {
        struct groups g[2];
        memset(g, 0, sizeof g);
        rc = build_groups(t, l, slots[0], o->chunks, &g[0]);
        n_one = g[0].n_one;
        const uint64_t n_acc = g[0].start ? g[0].start[g[0].n_groups] : 0;
        if (rc == 0 && n_tiers == 2) {
            g[1].ids = malloc(n_acc * sizeof *g[1].ids + 1);
            g[1].start = calloc(n_acc + 2, sizeof *g[1].start);
            g[1].next_use = malloc(n_acc * sizeof *g[1].next_use + 1);
            g[1].cont = calloc(n_acc + 2, 1);
            g[1].one = calloc(n_acc + 2, 1);
            if (!g[1].ids || !g[1].start || !g[1].next_use || !g[1].cont || !g[1].one) rc = STRATA_ENOMEM;
        }
        for (int k = 0; k < n_tiers && rc == 0; k++) {
            const uint32_t n_hot =
                strata_expert_pin_count(slots[k], X, t->topk, o->hot_share > 0 ? o->hot_share : 0.5);
            reset_state(&s, X);
            memset(s.hot, 0, X);
            if (p == STRATA_SIM_HOT) strata_sim_hot_set(hot_from, l, n_hot, s.hot);
            memset(pin, 0, X);
            if (n_pin[k]) strata_sim_hot_set(pin_from, l, n_pin[k], pin);
            if (k == 1 && n_pin[1] == 0 && slots[1] >= X) {  // a full host cache: every expert read at open
                res[1]->hits += g[1].start[g[1].n_groups];
                for (uint64_t gi = 0; gi < g[1].n_groups; gi++)
                    if (g[1].one[gi]) res[1]->decode_hits += g[1].start[gi + 1] - g[1].start[gi];
                break;
            }
            if (k == 1) rc = set_next_use(&g[1], X);
            if (rc == 0)
                replay_layer(p, &s, &g[k], X, slots[k], pin, res[k], k + 1 < n_tiers ? &g[k + 1] : NULL, batch);
        }
        for (int k = 0; k < 2; k++) free_groups(&g[k]);
    }
    for (int k = 0; k < n_tiers; k++) {
        res[k]->tokens = t->n_tokens;
        res[k]->decode_tokens = n_one;
    }
    free(s.resident);
    free(s.pinned);
    free(s.last);
    free(s.freq);
    free(s.next_use);
    free(s.crf);
    free(s.hot);
    free(s.list);
    free(pin);
    return rc;
}

int strata_sim_replay(const struct strata_trace *t, enum strata_sim_policy p, uint32_t n_slots,
                      const struct strata_sim_opts *o, struct strata_sim_result *r)
{
    return strata_sim_replay2(t, p, n_slots, 0, o, r, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cmp_u64_desc(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

static double median_of(double *v, uint32_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int strata_route_stats(const struct strata_trace *t, uint32_t sessions, struct strata_route_stats *r)
{
    const uint32_t L = t->n_layers, X = t->n_expert, K = t->topk;
    if (sessions < 1 || t->n_tokens < 2ull * sessions) {
        strata_log_error("route stats: a trace of %llu tokens is too short for %u sessions",
                         (unsigned long long)t->n_tokens, sessions);
        return STRATA_EARG;
    }
    uint64_t *count = calloc(X, sizeof *count);
    uint32_t *seen = calloc(X, sizeof *seen);
    double *cover = malloc(L * sizeof *cover), *top = malloc(L * sizeof *top);
    double *prev = malloc(L * sizeof *prev), *dist = malloc(L * sizeof *dist);
    int rc = count && seen && cover && top && prev && dist ? 0 : STRATA_ENOMEM;
    const uint64_t T = t->n_tokens, span = T / sessions;
    uint32_t stamp = 0;
    for (uint32_t l = 0; l < L && rc == 0; l++) {
        memset(count, 0, X * sizeof *count);
        for (uint64_t tok = 0; tok < T; tok++)
            for (uint32_t k = 0; k < K; k++) count[t->ids[(tok * L + l) * K + k]]++;
        qsort(count, X, sizeof *count, cmp_u64_desc);  // the most-picked first
        const uint64_t picks = T * K;
        uint64_t acc = 0;
        uint32_t n = 0;
        while (n < X && acc * 10 < picks * 9) acc += count[n++];
        cover[l] = n;
        top[l] = (double)count[0] / (double)picks;
        // temporal locality: token tok's experts that tok - 1 had
        uint64_t shared = 0;
        for (uint64_t tok = 1; tok < T; tok++) {
            stamp++;
            for (uint32_t k = 0; k < K; k++) seen[t->ids[((tok - 1) * L + l) * K + k]] = stamp;
            for (uint32_t k = 0; k < K; k++) shared += seen[t->ids[(tok * L + l) * K + k]] == stamp;
        }
        prev[l] = (double)shared / (double)((T - 1) * K);
        // sessions tokens span apart: tok, tok + span, ...
        uint64_t distinct = 0;
        for (uint64_t tok = 0; tok < span; tok++) {
            stamp++;
            for (uint32_t s = 0; s < sessions; s++)
                for (uint32_t k = 0; k < K; k++) {
                    const int32_t e = t->ids[((tok + s * span) * L + l) * K + k];
                    distinct += seen[e] != stamp;
                    seen[e] = stamp;
                }
        }
        dist[l] = (double)distinct / (double)span;
    }
    if (rc == 0) {
        r->cover90 = median_of(cover, L);
        r->top_share = median_of(top, L);
        r->prev_overlap = median_of(prev, L);
        r->distinct = median_of(dist, L);
        r->sessions = sessions;
    }
    free(count);
    free(seen);
    free(cover);
    free(top);
    free(prev);
    free(dist);
    return rc;
}
