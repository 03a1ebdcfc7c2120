// Cache-policy simulator over route traces (see sim.h). Per layer the trace becomes a list of
// access groups; each policy keeps, per expert, resident / last use / frequency / CRF / next use,
// and scans the n_expert entries for a victim on a miss (n_expert is at most a few hundred).
#include "tools/sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define LRFU_LAMBDA 0.05

struct groups {
    uint32_t *ids;       // all groups' ids back to back
    uint32_t *start;     // [n_groups + 1]
    uint64_t *next_use;  // [total ids]: index of the next group using the same id, UINT64_MAX if none
    uint64_t n_groups;
};

const char *strata_sim_policy_name(enum strata_sim_policy p)
{
    static const char *const names[STRATA_SIM_COUNT] = {"LRU", "LFU", "LRFU", "Belady"};
    return p < STRATA_SIM_COUNT ? names[p] : "?";
}

static int cmp_u32(const void *a, const void *b)
{
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

// The access groups of layer l, in the engine's order.
static int build_groups(const struct strata_trace *t, uint32_t l, uint32_t n_slots, bool chunks, struct groups *g)
{
    const uint32_t K = t->topk, X = t->n_expert;
    memset(g, 0, sizeof *g);
    g->ids = malloc(t->n_tokens * K * sizeof *g->ids + 1);
    g->start = malloc((t->n_tokens * K + 2) * sizeof *g->start);
    g->next_use = malloc(t->n_tokens * K * sizeof *g->next_use + 1);
    uint8_t *seen = calloc(X, 1);
    uint32_t *uni = malloc(((size_t)X + 1) * sizeof *uni);
    if (!g->ids || !g->start || !g->next_use || !seen || !uni) {
        free(seen);
        free(uni);
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
                if (!seen[e]) {
                    seen[e] = 1;
                    uni[n_uni++] = e;
                }
            }
        qsort(uni, n_uni, sizeof *uni, cmp_u32);
        for (uint32_t i = 0; i < n_uni; i++) {
            seen[uni[i]] = 0;
            if (i % n_slots == 0) g->start[g->n_groups++] = (uint32_t)n_ids;
            g->ids[n_ids++] = uni[i];
        }
        t0 = t1;
    }
    g->start[g->n_groups] = (uint32_t)n_ids;
    // Next use, scanning backwards with the last group index seen per expert.
    uint64_t *last = malloc((size_t)X * sizeof *last);
    if (!last) {
        free(seen);
        free(uni);
        return STRATA_ENOMEM;
    }
    for (uint32_t e = 0; e < X; e++) last[e] = UINT64_MAX;
    for (uint64_t gi = g->n_groups; gi-- > 0;)
        for (uint32_t i = g->start[gi]; i < g->start[gi + 1]; i++) {
            g->next_use[i] = last[g->ids[i]];
            last[g->ids[i]] = gi;
        }
    free(last);
    free(seen);
    free(uni);
    return 0;
}

static void free_groups(struct groups *g)
{
    free(g->ids);
    free(g->start);
    free(g->next_use);
}

struct pstate {
    uint8_t *resident, *pinned;
    uint64_t *last, *freq, *next_use;
    double *crf;
};

// Lower score = evicted first.
static double score(enum strata_sim_policy p, const struct pstate *s, uint32_t e, uint64_t now)
{
    switch (p) {
    case STRATA_SIM_LRU: return (double)s->last[e];
    case STRATA_SIM_LFU: return (double)s->freq[e] + (double)s->last[e] / ((double)now + 2.0);
    case STRATA_SIM_LRFU: return s->crf[e] * pow(2.0, -LRFU_LAMBDA * (double)(now - s->last[e]));
    case STRATA_SIM_BELADY: return s->next_use[e] == UINT64_MAX ? -HUGE_VAL : -(double)s->next_use[e];
    default: return 0;
    }
}

int strata_sim_run(const struct strata_trace *t, enum strata_sim_policy p, uint32_t n_slots, bool chunks,
                   struct strata_sim_result *r)
{
    memset(r, 0, sizeof *r);
    if (p >= STRATA_SIM_COUNT || n_slots < t->topk || t->n_expert == 0) {
        strata_log_error("sim_run: %u slots per layer is below top-k %u (or policy %d unknown)", n_slots, t->topk,
                         (int)p);
        return STRATA_EARG;
    }
    const uint32_t X = t->n_expert;
    if (n_slots > X) n_slots = X;
    struct pstate s;
    s.resident = malloc(X);
    s.pinned = malloc(X);
    s.last = malloc(X * sizeof *s.last);
    s.freq = malloc(X * sizeof *s.freq);
    s.next_use = malloc(X * sizeof *s.next_use);
    s.crf = malloc(X * sizeof *s.crf);
    int rc = s.resident && s.pinned && s.last && s.freq && s.next_use && s.crf ? 0 : STRATA_ENOMEM;
    for (uint32_t l = 0; l < t->n_layers && rc == 0; l++) {
        struct groups g;
        if ((rc = build_groups(t, l, n_slots, chunks, &g))) {
            free_groups(&g);
            break;
        }
        memset(s.resident, 0, X);
        memset(s.pinned, 0, X);
        memset(s.last, 0, X * sizeof *s.last);
        memset(s.freq, 0, X * sizeof *s.freq);
        memset(s.crf, 0, X * sizeof *s.crf);
        uint32_t n_res = 0;
        uint64_t now = 0;
        for (uint64_t gi = 0; gi < g.n_groups; gi++) {
            const uint32_t a = g.start[gi], b = g.start[gi + 1];
            for (uint32_t i = a; i < b; i++) s.pinned[g.ids[i]] = 1;
            for (uint32_t i = a; i < b; i++) {
                const uint32_t e = g.ids[i];
                if (s.resident[e]) {
                    r->hits++;
                    continue;
                }
                r->misses++;
                if (n_res == n_slots) {
                    int64_t v = -1;
                    double best = 0;
                    for (uint32_t x = 0; x < X; x++) {
                        if (!s.resident[x] || s.pinned[x]) continue;
                        const double sc = score(p, &s, x, now);
                        if (v < 0 || sc < best) {
                            v = x;
                            best = sc;
                        }
                    }
                    STRATA_ASSERT(v >= 0);  // a group holds at most n_slots experts
                    s.resident[v] = 0;
                    n_res--;
                }
                s.resident[e] = 1;
                n_res++;
            }
            // Recency, frequency, CRF and next use in the group's order, as the engine ticks.
            for (uint32_t i = a; i < b; i++) {
                const uint32_t e = g.ids[i];
                now++;
                s.crf[e] = 1.0 + s.crf[e] * pow(2.0, -LRFU_LAMBDA * (double)(now - s.last[e]));
                s.last[e] = now;
                s.freq[e]++;
                s.next_use[e] = g.next_use[i];
                s.pinned[e] = 0;
            }
        }
        free_groups(&g);
    }
    r->tokens = t->n_tokens;
    free(s.resident);
    free(s.pinned);
    free(s.last);
    free(s.freq);
    free(s.next_use);
    free(s.crf);
    return rc;
}
