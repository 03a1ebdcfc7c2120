// The host expert store (store.h): a bounded cache of expert triplets with one LRU per MoE layer,
// behind the expert provider interface (provider.h).
//
// Memory: one anonymous mapping holds every slot, layer after layer:
//   [layer 0: n_slots x slot_size(0)] [layer 1: n_slots x slot_size(1)] ...
// A slot holds one expert triplet, its parts placed at their file offsets' phases (layout.h) so
// O_DIRECT reads land in place. Pages are touched only when a slot is first filled, so resident
// memory grows to the budget and no further.
//
// Per layer: slots[n_slots] (expert, state, pin count, LRU tick), expert_slot[n_expert] (-1 when
// absent) and fills[n_slots] (the reads of a slot being filled). A slot is EMPTY, FILLING (its
// reads are in flight; it already maps its expert, so a second acquirer finds it and waits
// instead of reading it again) or READY. A slot may be replaced only when it is not pinned and
// not FILLING: empty slots first, then the least recently used. A pinned hot set (--pin-from,
// layout.h) takes the first slots of each layer at open and is never replaced; the others are
// the policy's, and max_batch counts only them.
//
// Locking: one mutex (mu) guards every slot table, the LRU ticks and the counters; one condition
// variable (cv) is broadcast whenever a fill lands or a pin count drops to zero. Reads are never
// waited on under mu: an acquire pins what is there, claims victims for its misses (marking them
// FILLING), queues their reads and sleeps on cv until its slots are READY. The I/O engine's
// completion callback takes mu to publish a prefetched slot; a demand fill is published by its
// acquirer once all of its reads are in, so a failed batch is dropped as a whole. Lock order:
// mu, then the I/O engine's own lock (submit and promote are called under mu; the engine calls
// back without its lock held). An acquire pins all or nothing: when its misses need more free
// slots than the layer has now, it pins nothing and waits for releases, which is why callers
// that each hold at most max_batch views of a layer cannot deadlock.
#include "experts/store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/time.h"

enum slot_state { SLOT_EMPTY, SLOT_FILLING, SLOT_READY };

struct fill {                            // the reads of one slot being filled
    struct strata_io_ticket t;
    struct strata_io_req req[STRATA_EXPERT_PART_COUNT];
    struct strata_store *st;
    uint32_t layer;
    int32_t slot;
    bool demand;                         // by an acquire, which publishes it; else a prefetch
    bool done;                           // every read has landed or failed
    int rc;
};

struct slot {
    int32_t expert;                      // -1 when empty
    uint8_t state;                       // enum slot_state
    bool unused_prefetch;                // filled by a prefetch, not acquired since
    bool fetched;                        // filled by a fetch (a known next acquire), not acquired since
    bool pinned;                         // the pinned hot set: read at open, never replaced
    uint32_t ref;                        // views handed out and not released
    uint64_t last_use;                   // LRU tick
};

struct layer_cache {
    char *base;                          // [n_slots][slot_size]
    uint64_t slot_size;
    struct slot *slots;                  // [n_slots]
    int32_t *expert_slot;                // [n_expert]
    uint64_t *freq;                      // [n_expert] acquires of each expert so far (LFU)
    struct fill *fills;                  // [n_slots]
    struct strata_experts_layer_stats st;
};

struct strata_store {
    const struct strata_expert_layout *lay;
    struct strata_experts_config cfg;
    struct strata_slot_plan plan;
    uint32_t n_pin;                      // pinned slots per layer (the first n_pin of each layer)
    uint64_t pin_hits;
    struct strata_io *io;
    struct layer_cache *lc;              // [n_layers]
    void *slab;                          // the mapping of all slots
    size_t slab_bytes;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t tick;
    uint8_t *mark;                       // [n_expert] scratch of one acquire, under mu
    int n_filling;                       // slots FILLING (close waits for them)
    double io_wait_s;
    uint64_t joined, cancelled;
    struct strata_experts_stats base_stats;  // the fields fixed at open
};

static const struct strata_provider_i g_store_iface;

// ---- slots (all under mu) ----------------------------------------------------------------------

static char *slot_ptr(const struct strata_store *st, uint32_t l, int32_t s)
{
    return st->lc[l].base + (size_t)s * st->lc[l].slot_size;
}

static void fill_view(const struct strata_store *st, uint32_t l, int32_t s, struct strata_expert_view *v)
{
    uint64_t off[STRATA_EXPERT_PART_COUNT];
    strata_expert_part_offsets(&st->lay->layers[l], (uint32_t)st->lc[l].slots[s].expert, off);
    const char *p = slot_ptr(st, l, s);
    for (int i = 0; i < STRATA_EXPERT_PART_COUNT; i++) v->part[i] = p + off[i];
}

// The slot a miss or a prefetch replaces, or -1: only slots nobody holds, nobody is filling and
// whose expert is not marked (a prefetch's or fetch's own request); empty ones first, then by the policy (LRU: least recently used; LFU: fewest accesses of its
// expert so far, ties least recently used), and prefetched experts not acquired yet last (a
// prefetch is a guess for the layer's next acquire; it loses this protection after that).
static int32_t victim(const struct strata_store *st, const struct layer_cache *c)
{
    const bool lfu = st->cfg.policy == STRATA_POLICY_LFU;
    int32_t best = -1;
    for (uint32_t s = 0; s < st->plan.n_slots; s++) {
        const struct slot *sl = &c->slots[s];
        if (sl->ref || sl->state == SLOT_FILLING || sl->pinned) continue;
        if (sl->expert < 0) return (int32_t)s;
        if (st->mark[sl->expert]) continue;
        if (best < 0) {
            best = (int32_t)s;
            continue;
        }
        const struct slot *b = &c->slots[best];
        if (sl->unused_prefetch != b->unused_prefetch) {
            if (b->unused_prefetch) best = (int32_t)s;
            continue;
        }
        const uint64_t fs = lfu ? c->freq[sl->expert] : 0, fb = lfu ? c->freq[b->expert] : 0;
        if (fs < fb || (fs == fb && sl->last_use < b->last_use)) best = (int32_t)s;
    }
    return best;
}

static void drop_slot(struct layer_cache *c, int32_t s)
{
    struct slot *sl = &c->slots[s];
    if (sl->expert >= 0 && c->expert_slot[sl->expert] == s) c->expert_slot[sl->expert] = -1;
    sl->expert = -1;
    sl->state = SLOT_EMPTY;
    sl->unused_prefetch = false;
    sl->fetched = false;
    sl->last_use = 0;
}

static void fill_done(void *user, struct strata_io_ticket *t, int rc);

// Give slot s of layer l to expert e and describe its reads (not submitted yet).
static struct fill *claim_slot(struct strata_store *st, uint32_t l, int32_t s, uint32_t e, bool demand)
{
    struct layer_cache *c = &st->lc[l];
    struct slot *sl = &c->slots[s];
    if (sl->expert >= 0) {
        c->st.evictions++;
        drop_slot(c, s);
    }
    sl->expert = (int32_t)e;
    sl->state = SLOT_FILLING;
    c->expert_slot[e] = s;
    st->n_filling++;
    const struct strata_expert_layer *el = &st->lay->layers[l];
    uint64_t off[STRATA_EXPERT_PART_COUNT];
    strata_expert_part_offsets(el, e, off);
    struct fill *f = &c->fills[s];
    char *base = slot_ptr(st, l, s);
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++)
        f->req[p] = (struct strata_io_req){el->tensor[p]->file_offset + (uint64_t)e * el->part_bytes[p],
                                           el->part_bytes[p], base + off[p], el->paged};
    f->t = (struct strata_io_ticket){.reqs = f->req, .n = STRATA_EXPERT_PART_COUNT, .low = !demand,
                                     .done = fill_done, .user = f};
    f->st = st;
    f->layer = l;
    f->slot = s;
    f->demand = demand;
    f->done = false;
    f->rc = 0;
    c->st.bytes_read += el->triplet_bytes;
    return f;
}

// Queue a claimed slot's reads. A refused submission (a malformed request: never expected) ends
// the fill at once as failed.
static void submit_fill(struct strata_store *st, struct fill *f)
{
    int rc = strata_io_submit(st->io, &f->t);
    if (rc == 0) return;
    f->t.failed_req = 0;
    f->t.failed_err = 0;
    f->done = true;
    f->rc = rc;
    if (!f->demand) {
        drop_slot(&st->lc[f->layer], f->slot);
        st->n_filling--;
    }
}

// I/O completion (on an I/O thread): a prefetched slot is published (or dropped) here; a demand
// fill is published by its acquirer.
static void fill_done(void *user, struct strata_io_ticket *t, int rc)
{
    (void)t;
    struct fill *f = user;
    struct strata_store *st = f->st;
    pthread_mutex_lock(&st->mu);
    f->done = true;
    f->rc = rc;
    if (!f->demand) {
        struct layer_cache *c = &st->lc[f->layer];
        if (rc == 0) c->slots[f->slot].state = SLOT_READY;
        else drop_slot(c, f->slot);  // a later acquire reads it again and reports a lasting fault
        st->n_filling--;
    }
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

// ---- the provider ------------------------------------------------------------------------------

static int check_request(const struct strata_store *st, const char *fn, uint32_t l, const uint32_t *ids, int n,
                         int max)
{
    if (l >= st->lay->n_layers || n < 0 || n > max) {
        strata_log_error("experts_%s: layer %u / %d experts out of range (%u layers, %u slots)", fn, l, n,
                         st->lay->n_layers, st->plan.n_slots);
        return STRATA_EARG;
    }
    for (int i = 0; i < n; i++)
        if (ids[i] >= st->lay->n_expert) {
            strata_log_error("experts_%s: expert %u of layer %u out of range (%u experts)", fn, ids[i], l,
                             st->lay->n_expert);
            return STRATA_EARG;
        }
    return 0;
}

// While an acquire runs, views[i] holds its bookkeeping for ids[i]: the slot, and whether this
// acquire fills it. The real views are written at the end.
static void note(struct strata_expert_view *v, int32_t s, bool own)
{
    v->part[0] = (const void *)(uintptr_t)s;
    v->part[1] = (const void *)(uintptr_t)own;
}
static int32_t noted_slot(const struct strata_expert_view *v) { return (int32_t)(uintptr_t)v->part[0]; }
static bool noted_own(const struct strata_expert_view *v) { return (uintptr_t)v->part[1] != 0; }

// The error of a failed fill for its acquirer: an I/O error's own line goes to this thread (a
// refused submission has logged already). Under mu, before the dropped slot's fill is reused.
static int fill_error(const struct strata_store *st, const struct fill *f)
{
    return f->rc == STRATA_EIO ? strata_io_ticket_error(st->io, &f->t) : f->rc;
}

// Unpin the experts of a request noted in views[0..n), but those marked in skip (NULL: none).
static void unpin_noted(struct strata_store *st, struct layer_cache *c, const struct strata_expert_view *views,
                        const uint8_t *skip, int n)
{
    for (int i = 0; i < n; i++)
        if (!(skip && skip[i])) c->slots[noted_slot(&views[i])].ref--;
    pthread_cond_broadcast(&st->cv);
}

// The first half of an acquire (under mu): waits until the layer has free slots for every miss,
// pins the hits, claims victims for the misses and queues their reads, and ticks every access.
// views[i] then holds the bookkeeping of ids[i] (note()).
static void acquire_pin(struct strata_store *st, uint32_t l, const uint32_t *ids, int n,
                        struct strata_expert_view *views, double *waited_s)
{
    struct layer_cache *c = &st->lc[l];
    for (;;) {
        // All or nothing: are there free slots for every miss right now? A prefetch this acquire
        // does not want whose read has not started yet gives its slot back (a wrong guess then
        // costs nothing); one already reading is waited for.
        int need = 0, avail = 0;
        for (int i = 0; i < n; i++) {
            st->mark[ids[i]] = 1;
            need += c->expert_slot[ids[i]] < 0;
        }
        for (uint32_t s = 0; s < st->plan.n_slots; s++) {
            const struct slot *sl = &c->slots[s];
            avail += !sl->ref && sl->state != SLOT_FILLING && !sl->pinned && !(sl->expert >= 0 && st->mark[sl->expert]);
        }
        for (uint32_t s = 0; s < st->plan.n_slots && need > avail; s++) {
            const struct slot *sl = &c->slots[s];
            if (sl->state == SLOT_FILLING && !c->fills[s].demand && !sl->fetched && !sl->ref && !st->mark[sl->expert] &&
                strata_io_cancel(st->io, &c->fills[s].t)) {
                drop_slot(c, (int32_t)s);
                st->n_filling--;
                st->cancelled++;
                c->st.prefetched--;  // counted when read, and it never was
                c->st.bytes_read -= st->lay->layers[l].triplet_bytes;
                avail++;
            }
        }
        for (int i = 0; i < n; i++) st->mark[ids[i]] = 0;
        if (need <= avail) break;
        const double t0 = strata_now();
        pthread_cond_wait(&st->cv, &st->mu);
        *waited_s += strata_now() - t0;
    }
    // Hits first, so their slots are pinned before any miss looks for a victim.
    for (int i = 0; i < n; i++) {
        const int32_t s = c->expert_slot[ids[i]];
        note(&views[i], -1, false);
        if (s < 0) continue;
        struct slot *sl = &c->slots[s];
        sl->ref++;
        if (sl->fetched) {  // a miss whose read started early
            sl->fetched = false;
            c->st.misses++;
            c->st.fetched++;
        } else {
            c->st.hits++;
            st->pin_hits += sl->pinned;
        }
        if (sl->unused_prefetch) {
            sl->unused_prefetch = false;
            c->st.prefetch_used++;
        }
        if (sl->state == SLOT_FILLING) {
            st->joined++;
            if (!c->fills[s].demand) strata_io_promote(st->io, &c->fills[s].t);
        }
        note(&views[i], s, false);
    }
    for (int i = 0; i < n; i++) {
        if (noted_slot(&views[i]) >= 0) continue;
        int32_t s = c->expert_slot[ids[i]];
        if (s >= 0) {  // a duplicate id of this request: read once
            c->slots[s].ref++;
            note(&views[i], s, false);
            continue;
        }
        s = victim(st, c);
        STRATA_ASSERT(s >= 0);  // counted above
        struct fill *f = claim_slot(st, l, s, ids[i], true);
        c->slots[s].ref = 1;
        c->st.misses++;
        note(&views[i], s, true);
        submit_fill(st, f);
    }
    // Every access gets its own tick in the order of ids, so LRU has no ties and strata sim
    // replays the same order; LFU counts it.
    for (int i = 0; i < n; i++) {
        c->slots[noted_slot(&views[i])].last_use = ++st->tick;
        c->freq[ids[i]]++;
    }
}

// The second half (under mu): sleeps until this acquire's reads are in and the slots it joined
// are published, then publishes its fills, or drops them all if a read failed. 0; or the read's
// error, with every expert of the request unpinned; or 0 with *lost set when a slot it joined was
// dropped (another caller's or a prefetch's failed read), with every expert unpinned.
static int acquire_wait(struct strata_store *st, uint32_t l, const uint32_t *ids, int n,
                        struct strata_expert_view *views, double *waited_s, bool *lost)
{
    struct layer_cache *c = &st->lc[l];
    const double t0 = strata_now();
    bool waited = false;
    for (;;) {
        bool pending = false;
        for (int i = 0; i < n && !pending; i++) {
            const int32_t s = noted_slot(&views[i]);
            pending = noted_own(&views[i]) ? !c->fills[s].done : c->slots[s].state == SLOT_FILLING;
        }
        if (!pending) break;
        waited = true;
        pthread_cond_wait(&st->cv, &st->mu);
    }
    if (waited) *waited_s += strata_now() - t0;

    const struct fill *failed = NULL;
    for (int i = 0; i < n; i++)
        if (noted_own(&views[i]) && c->fills[noted_slot(&views[i])].rc && !failed)
            failed = &c->fills[noted_slot(&views[i])];
    for (int i = 0; i < n; i++) {
        if (!noted_own(&views[i])) continue;
        const int32_t s = noted_slot(&views[i]);
        if (failed) drop_slot(c, s);
        else c->slots[s].state = SLOT_READY;
        st->n_filling--;
    }
    *lost = false;
    int rc = 0;
    if (failed) {
        rc = fill_error(st, failed);
    } else {
        for (int i = 0; i < n && !*lost; i++) {
            const struct slot *sl = &c->slots[noted_slot(&views[i])];
            *lost = sl->state != SLOT_READY || sl->expert != (int32_t)ids[i];
        }
    }
    if (failed || *lost) unpin_noted(st, c, views, NULL, n);
    return rc;
}

// The layer's prefetches were guesses for the acquire that just ended: what it did not use is
// ordinary now (under mu).
static void prefetches_settle(const struct strata_store *st, struct layer_cache *c)
{
    for (uint32_t s = 0; s < st->plan.n_slots; s++)
        if (c->slots[s].state == SLOT_READY) c->slots[s].unused_prefetch = false;
}

// The end of an acquire that succeeded (under mu): its prefetches settled, the views written.
static void acquire_publish(struct strata_store *st, uint32_t l, int n, struct strata_expert_view *views,
                            double waited_s)
{
    struct layer_cache *c = &st->lc[l];
    prefetches_settle(st, c);
    pthread_cond_broadcast(&st->cv);
    for (int i = 0; i < n; i++) fill_view(st, l, noted_slot(&views[i]), &views[i]);
    st->io_wait_s += waited_s;
    c->st.io_wait_s += waited_s;
}

static int store_acquire(void *ctx, uint32_t l, const uint32_t *ids, int n, struct strata_expert_view *views)
{
    struct strata_store *st = ctx;
    int rc = check_request(st, "acquire", l, ids, n, (int)(st->plan.n_slots - st->n_pin));
    if (rc) return rc;
    double waited_s = 0;  // blocked on reads, or on slots being filled or held elsewhere
    bool lost = true;
    pthread_mutex_lock(&st->mu);
    while (rc == 0 && lost) {
        acquire_pin(st, l, ids, n, views, &waited_s);
        rc = acquire_wait(st, l, ids, n, views, &waited_s, &lost);
    }
    if (rc == 0) acquire_publish(st, l, n, views, waited_s);
    else {
        st->io_wait_s += waited_s;
        st->lc[l].st.io_wait_s += waited_s;
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

// acquire_start: the acquire's decisions (hits, victims, reads, ticks) exactly as store_acquire
// makes them; the views of experts already resident are written and marked ready, the others
// keep their notes for acquire_next.
static int store_acquire_start(void *ctx, uint32_t l, const uint32_t *ids, int n, struct strata_expert_view *views,
                               uint8_t *ready)
{
    struct strata_store *st = ctx;
    int rc = check_request(st, "acquire", l, ids, n, (int)(st->plan.n_slots - st->n_pin));
    if (rc) return rc;
    struct layer_cache *c = &st->lc[l];
    double waited_s = 0;
    pthread_mutex_lock(&st->mu);
    acquire_pin(st, l, ids, n, views, &waited_s);
    for (int i = 0; i < n; i++) {
        const int32_t s = noted_slot(&views[i]);
        ready[i] = !noted_own(&views[i]) && c->slots[s].state == SLOT_READY;
        if (ready[i]) fill_view(st, l, s, &views[i]);
    }
    st->io_wait_s += waited_s;
    c->st.io_wait_s += waited_s;
    pthread_mutex_unlock(&st->mu);
    return 0;
}

// Publish the fills of a stepped acquire that are in (under mu): READY, or dropped when a read
// failed; their notes become those of a joined slot. With wait, first sleeps until every one of
// them is in. The first failed fill, or NULL.
static const struct fill *publish_own(struct strata_store *st, struct layer_cache *c, int n,
                                      struct strata_expert_view *views, const uint8_t *ready, bool wait,
                                      double *waited_s)
{
    for (bool busy = wait; busy;) {
        busy = false;
        for (int i = 0; i < n && !busy; i++)
            busy = !ready[i] && noted_own(&views[i]) && !c->fills[noted_slot(&views[i])].done;
        if (busy) {
            const double t0 = strata_now();
            pthread_cond_wait(&st->cv, &st->mu);
            *waited_s += strata_now() - t0;
        }
    }
    const struct fill *failed = NULL;
    for (int i = 0; i < n; i++) {
        if (ready[i] || !noted_own(&views[i])) continue;
        const int32_t s = noted_slot(&views[i]);
        if (!c->fills[s].done) continue;
        if (c->fills[s].rc) {
            if (!failed) failed = &c->fills[s];
            drop_slot(c, s);
        } else {
            c->slots[s].state = SLOT_READY;
        }
        st->n_filling--;
        note(&views[i], s, false);
    }
    return failed;
}

// acquire_next: sleeps until one or more of the experts not ready has landed (this acquire's own
// reads, or the slots it joined), publishes this acquire's fills among them as they land, writes
// their views and marks them ready. A slot it joined that was dropped (another caller's or a
// prefetch's failed read) is acquired again on its own. Returns how many are still not ready; or
// an error, once every read of the request has finished: the failed fills dropped, the others
// published, every expert not marked ready unpinned.
static int store_acquire_next(void *ctx, uint32_t l, const uint32_t *ids, int n, struct strata_expert_view *views,
                              uint8_t *ready)
{
    struct strata_store *st = ctx;
    struct layer_cache *c = &st->lc[l];
    double waited_s = 0;
    int rc = 0, pending = 0;
    pthread_mutex_lock(&st->mu);
    // Sleep until something of the request is in: an own fill done, or a joined slot no longer
    // filling.
    for (;;) {
        bool in = false;
        pending = 0;
        for (int i = 0; i < n && !in; i++) {
            if (ready[i]) continue;
            const int32_t s = noted_slot(&views[i]);
            in = noted_own(&views[i]) ? c->fills[s].done : c->slots[s].state != SLOT_FILLING;
            pending++;
        }
        if (in || !pending) break;
        const double t0 = strata_now();
        pthread_cond_wait(&st->cv, &st->mu);
        waited_s += strata_now() - t0;
    }
    const struct fill *failed = publish_own(st, c, n, views, ready, false, &waited_s);
    if (failed) {
        (void)publish_own(st, c, n, views, ready, true, &waited_s);  // the request's other reads
        rc = fill_error(st, failed);
    }
    // Views of what landed; a joined slot that was dropped is acquired again on its own (the
    // others stay pinned; it needs one slot, and this caller holds at most max_batch).
    for (int i = 0; i < n && rc == 0; i++) {
        if (ready[i]) continue;
        const int32_t s = noted_slot(&views[i]);
        const struct slot *sl = &c->slots[s];
        if (sl->state == SLOT_FILLING) continue;
        if (sl->state != SLOT_READY || sl->expert != (int32_t)ids[i]) {
            // this request's own reads first (they wait on nothing but the I/O): a slot it still
            // fills would stay SLOT_FILLING while it waits below on another acquire's slot, and
            // that acquire may be waiting on this one's (a deadlock test_provider's lasting fault
            // hit about once in 70 runs)
            const struct fill *own_failed = publish_own(st, c, n, views, ready, true, &waited_s);
            if (own_failed) {
                failed = own_failed;
                rc = fill_error(st, own_failed);
                break;
            }
            c->slots[s].ref--;
            bool again = true;
            while (rc == 0 && again) {
                acquire_pin(st, l, &ids[i], 1, &views[i], &waited_s);
                rc = acquire_wait(st, l, &ids[i], 1, &views[i], &waited_s, &again);
            }
            if (rc) {  // settled and unpinned by acquire_wait (the own reads were published
                       // above): marked while the others are unpinned
                ready[i] = 2;
                unpin_noted(st, c, views, ready, n);
                ready[i] = 0;
                break;
            }
        }
        fill_view(st, l, noted_slot(&views[i]), &views[i]);
        ready[i] = 1;
    }
    if (failed) unpin_noted(st, c, views, ready, n);  // rc set above
    pending = 0;
    for (int i = 0; i < n; i++) pending += !ready[i];
    if (rc == 0 && pending == 0) prefetches_settle(st, c);
    pthread_cond_broadcast(&st->cv);
    st->io_wait_s += waited_s;
    c->st.io_wait_s += waited_s;
    pthread_mutex_unlock(&st->mu);
    return rc ? rc : pending;
}

// A prefetch (a guess: low priority, counted in prefetched) or a fetch (the caller's next acquire:
// normal priority, counted as misses when acquired). Neither replaces an expert of its own
// request; the reads are published by fill_done.
static int start_reads(struct strata_store *st, const char *fn, uint32_t l, const uint32_t *ids, int n, bool fetch)
{
    int rc = check_request(st, fn, l, ids, n, (int)st->lay->n_expert);
    if (rc) return rc;
    struct layer_cache *c = &st->lc[l];
    pthread_mutex_lock(&st->mu);
    for (int i = 0; i < n; i++) st->mark[ids[i]] = 1;
    for (int i = 0; i < n; i++) {
        if (c->expert_slot[ids[i]] >= 0) continue;  // resident or on its way
        const int32_t s = victim(st, c);
        if (s < 0) break;                           // every slot pinned, filling or wanted: a hint only
        struct fill *f = claim_slot(st, l, s, ids[i], false);
        if (fetch) {
            f->t.low = false;
            c->slots[s].fetched = true;
        } else {
            c->slots[s].unused_prefetch = true;
            c->st.prefetched++;
        }
        c->slots[s].last_use = ++st->tick;
        submit_fill(st, f);
    }
    for (int i = 0; i < n; i++) st->mark[ids[i]] = 0;
    pthread_mutex_unlock(&st->mu);
    return 0;
}

static int store_prefetch(void *ctx, uint32_t l, const uint32_t *ids, int n)
{
    return start_reads(ctx, "prefetch", l, ids, n, false);
}

static int store_fetch(void *ctx, uint32_t l, const uint32_t *ids, int n)
{
    return start_reads(ctx, "fetch", l, ids, n, true);
}

static void store_release(void *ctx, uint32_t l, const struct strata_expert_view *views, int n)
{
    struct strata_store *st = ctx;
    if (l >= st->lay->n_layers) return;
    struct layer_cache *c = &st->lc[l];
    const size_t span = (size_t)st->plan.n_slots * c->slot_size;
    bool freed = false;
    pthread_mutex_lock(&st->mu);
    for (int i = 0; i < n; i++) {
        const char *p = views[i].part[STRATA_EXPERT_GATE];
        STRATA_ASSERT(p >= c->base && p < c->base + span);  // a view of this layer
        struct slot *sl = &c->slots[(size_t)(p - c->base) / c->slot_size];
        STRATA_ASSERT(sl->ref > 0);
        freed |= --sl->ref == 0;
    }
    if (freed) pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

static void store_stats(void *ctx, struct strata_experts_stats *out)
{
    struct strata_store *st = ctx;
    pthread_mutex_lock(&st->mu);
    *out = st->base_stats;
    for (uint32_t l = 0; l < st->lay->n_layers; l++) {
        const struct strata_experts_layer_stats *s = &st->lc[l].st;
        out->hits += s->hits;
        out->misses += s->misses;
        out->evictions += s->evictions;
        out->bytes_read += s->bytes_read;
        out->prefetched += s->prefetched;
        out->prefetch_used += s->prefetch_used;
        out->fetched += s->fetched;
    }
    out->io_wait_s = st->io_wait_s;
    out->joined = st->joined;
    out->pin_hits = st->pin_hits;
    out->prefetch_cancelled = st->cancelled;
    pthread_mutex_unlock(&st->mu);
    if (st->io) {
        struct strata_io_counters ioc;
        strata_io_get_counters(st->io, &ioc);
        out->reads = ioc.reads;
        out->retries = ioc.retries;
    }
}

static void store_layer_stats(void *ctx, uint32_t l, struct strata_experts_layer_stats *out)
{
    struct strata_store *st = ctx;
    memset(out, 0, sizeof *out);
    if (l >= st->lay->n_layers) return;
    pthread_mutex_lock(&st->mu);
    *out = st->lc[l].st;
    pthread_mutex_unlock(&st->mu);
}

static int store_max_batch(void *ctx)
{
    const struct strata_store *st = ctx;
    return (int)(st->plan.n_slots - st->n_pin);
}

static const struct strata_provider_i g_store_iface = {
    .prefetch = store_prefetch,
    .fetch = store_fetch,
    .acquire = store_acquire,
    .acquire_start = store_acquire_start,
    .acquire_next = store_acquire_next,
    .release = store_release,
    .stats = store_stats,
    .layer_stats = store_layer_stats,
    .max_batch = store_max_batch,
};

// ---- open / close ------------------------------------------------------------------------------

// Read n experts of every layer into its first n slots at open, one layer per batch: every expert
// (full residency: rank NULL, n = n_expert), or the pinned hot set (the first n of each layer's
// rank, [n_layers][n_expert]; those slots are never replaced).
static int preload(struct strata_store *st, const uint32_t *rank, uint32_t n)
{
    const double t0 = strata_now();
    const uint32_t X = st->lay->n_expert;
    struct strata_io_req *reqs = calloc((size_t)n * STRATA_EXPERT_PART_COUNT, sizeof *reqs);
    if (!reqs) return STRATA_ENOMEM;
    int rc = 0;
    for (uint32_t l = 0; l < st->lay->n_layers && rc == 0; l++) {
        struct layer_cache *c = &st->lc[l];
        uint32_t got = 0;
        for (; got < n; got++) {
            const uint32_t e = rank ? rank[(size_t)l * X + got] : got;
            if (e >= X || c->expert_slot[e] >= 0) {
                strata_log_error("experts_open: pinned expert %u of layer %u is out of range or given twice", e, l);
                rc = STRATA_EARG;
                break;
            }
            const struct fill *f = claim_slot(st, l, (int32_t)got, e, true);
            memcpy(&reqs[(size_t)got * STRATA_EXPERT_PART_COUNT], f->req, sizeof f->req);
        }
        if (rc == 0) rc = strata_io_read(st->io, reqs, (int)(n * STRATA_EXPERT_PART_COUNT));
        for (uint32_t i = 0; i < got; i++) {
            c->slots[i].state = SLOT_READY;
            c->slots[i].pinned = rank != NULL;
        }
        st->n_filling -= (int)got;
        c->st.bytes_read = 0;
        st->base_stats.preload_bytes += st->lay->layers[l].triplet_bytes * got;
    }
    free(reqs);
    st->base_stats.preload_s = strata_now() - t0;
    return rc;
}

int strata_store_open(struct strata_store **out, struct strata_gguf_file *f, const struct strata_expert_layout *lay,
                      uint32_t n_expert_used, const struct strata_experts_config *cfg)
{
    *out = NULL;
    struct strata_experts_config def = {0};
    if (!cfg) cfg = &def;
    if (cfg->io >= STRATA_IO_COUNT || cfg->io_threads < 0 || cfg->io_threads > 256 ||
        cfg->policy >= STRATA_POLICY_COUNT) {
        strata_log_error("experts_open: I/O engine %d with %d threads (0..256), policy %d is not valid", (int)cfg->io,
                         cfg->io_threads, (int)cfg->policy);
        return STRATA_EARG;
    }
    if (n_expert_used == 0 || (lay->n_layers && n_expert_used > lay->n_expert)) {
        strata_log_error("experts_open: %u experts used per token of %u", n_expert_used, lay->n_expert);
        return STRATA_EARG;
    }
    struct strata_store *st = calloc(1, sizeof *st);
    if (!st) return STRATA_ENOMEM;
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->lay = lay;
    st->cfg = *cfg;
    st->cfg.trace_path = NULL;  // the forward pass owns the trace; do not keep a borrowed pointer
    strata_expert_layout_plan(lay, cfg->cache_bytes, !cfg->no_classes, &st->plan);
    st->base_stats.full = cfg->cache_bytes == 0 || st->plan.n_slots == lay->n_expert;
    st->base_stats.slots_per_layer = st->plan.n_slots;
    st->base_stats.n_classes = st->plan.n_classes;
    if (lay->n_layers == 0) {
        *out = st;
        return 0;
    }
    int rc = 0;
    if (st->plan.n_slots < n_expert_used) {
        const uint64_t min = strata_expert_layout_min_budget(lay, n_expert_used);
        strata_log_error("experts_open: a cache of %.1f MiB holds %u slots per layer; the minimum is %u "
                         "(one token's experts), %llu MiB",
                         cfg->cache_bytes / 1048576.0, st->plan.n_slots, n_expert_used,
                         (unsigned long long)((min + 1048575) >> 20));
        strata_store_close(st);
        return STRATA_ENOMEM;
    }
    const uint32_t L = lay->n_layers, X = lay->n_expert, S = st->plan.n_slots;
    uint64_t max_part = 0;
    for (uint32_t l = 0; l < L; l++)
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++)
            if (lay->layers[l].part_bytes[p] > max_part) max_part = lay->layers[l].part_bytes[p];
    st->slab_bytes = st->plan.total_bytes;
    // On huge pages (util/mem.h): fewer TLB misses streaming experts, and on hosts that map a
    // guest's pages at their first user access (shadow paging), one such fault per 2 MiB instead of
    // per 4 KiB: the slots are filled by the kernel (O_DIRECT, pread), so the first prompt was the
    // first user access to every page (6.7 us each on the development VM, 3.4 s of a 2 GiB slab).
    st->slab = strata_big_alloc(st->slab_bytes);
    if (st->slab && st->slab_bytes >= ((size_t)1 << 30) && strcmp(strata_thp_mode(), "never") == 0)
        strata_log_warn("transparent huge pages are off (/sys/kernel/mm/transparent_hugepage/enabled: never): the "
                        "%.0f MiB expert cache is on 4 KiB pages, which made the first prompt several times slower "
                        "on a VM (docs/cpu.md); 'madvise' lets strata ask for huge pages",
                        st->slab_bytes / 1048576.0);
    // A bounded cache is committed at open (STRATA_SLAB_POPULATE=0 leaves it to the reads): an
    // O_DIRECT read into a page not mapped yet faults it in inside the read, and under a memory
    // limit each such fault waits for reclaim. Measured under a cgroup of 50% of the 6-layer Q8_0
    // file (docs/expert-store.md): io_wait 1.3-2.5 s -> 0.46 s for 32 tokens, decode 15.8 -> 28.3
    // tok/s (22.8 -> 28.6 over 128 tokens), for 0.5 s more at open.
    const char *pop = getenv("STRATA_SLAB_POPULATE");
    if (st->slab && S < X && !(pop && strcmp(pop, "0") == 0)) {
        const double t0 = strata_now();
        if (strata_commit_pages(st->slab, 0, st->slab_bytes) != 0) {
            strata_log_error("experts_open: out of memory committing the expert cache (%.1f MiB)",
                             st->slab_bytes / 1048576.0);
            strata_store_close(st);
            return STRATA_ENOMEM;
        }
        strata_log_info("expert cache: %.1f MiB committed at open in %.2f s", st->slab_bytes / 1048576.0,
                        strata_now() - t0);
    }
    st->lc = calloc(L, sizeof *st->lc);
    st->mark = calloc(X, 1);
    if (!st->slab || !st->lc || !st->mark) {
        strata_log_error("experts_open: out of memory for %u slots per layer (%.1f MiB)", S,
                         st->slab_bytes / 1048576.0);
        strata_store_close(st);
        return STRATA_ENOMEM;
    }
    char *base = st->slab;
    for (uint32_t l = 0; l < L; l++) {
        struct layer_cache *c = &st->lc[l];
        c->slot_size = strata_expert_layout_slot_size(lay, &st->plan, l);
        c->base = base;
        base += (size_t)S * c->slot_size;
        c->slots = calloc(S, sizeof *c->slots);
        c->expert_slot = malloc(X * sizeof *c->expert_slot);
        c->freq = calloc(X, sizeof *c->freq);
        c->fills = calloc(S, sizeof *c->fills);
        if (!c->slots || !c->expert_slot || !c->freq || !c->fills) {
            strata_store_close(st);
            return STRATA_ENOMEM;
        }
        for (uint32_t s = 0; s < S; s++) c->slots[s].expert = -1;
        memset(c->expert_slot, 0xff, X * sizeof *c->expert_slot);
    }
    st->base_stats.slot_bytes_total = st->slab_bytes;
    if ((rc = strata_io_open(&st->io, f->path, cfg->io, cfg->io_threads, max_part))) {
        strata_store_close(st);
        return rc;
    }
    st->base_stats.io_depth = strata_io_depth(st->io);
    st->base_stats.io_direct = strata_io_direct(st->io);
    if (st->base_stats.full && (rc = preload(st, NULL, X))) {
        strata_store_close(st);
        return rc;
    }
    if (!st->base_stats.full && cfg->pins.rank) {
        st->n_pin = strata_expert_pin_count(S, X, n_expert_used, cfg->pins.share);
        st->base_stats.pinned = st->n_pin;
        if (st->n_pin && (rc = preload(st, cfg->pins.rank, st->n_pin))) {
            strata_store_close(st);
            return rc;
        }
    }
    *out = st;
    return 0;
}

void strata_store_close(struct strata_store *st)
{
    if (!st) return;
    pthread_mutex_lock(&st->mu);
    while (st->n_filling > 0) pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
    strata_io_close(st->io);
    if (st->lc)
        for (uint32_t l = 0; l < st->lay->n_layers; l++) {
            free(st->lc[l].slots);
            free(st->lc[l].expert_slot);
            free(st->lc[l].freq);
            free(st->lc[l].fills);
        }
    free(st->lc);
    strata_big_free(st->slab, st->slab_bytes);
    free(st->mark);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st);
}

struct strata_expert_provider strata_store_provider(struct strata_store *st)
{
    return (struct strata_expert_provider){&g_store_iface, st};
}

uint64_t strata_store_resident_bytes(const struct strata_store *st) { return st->slab_bytes; }

void strata_store_slab(const struct strata_store *st, void **base, size_t *bytes)
{
    *base = st->slab;
    *bytes = st->slab_bytes;
}

const char *strata_cache_policy_name(enum strata_cache_policy p)
{
    static const char *const names[STRATA_POLICY_COUNT] = {"lfu", "lru"};
    return p < STRATA_POLICY_COUNT ? names[p] : "?";
}
