// The VRAM expert tier (vram.h): device slots in front of a host provider, filled by one copy
// thread.
//
// Per layer: slots[n_slots] (expert, state, pin count, LRU tick, flags), expert_slot[n_expert]
// (-1 when absent), freq[n_expert] (LFU). A slot is EMPTY, FILLING (queued or being copied; it
// already maps its expert, so a second acquirer joins it instead of copying again) or READY.
// Victims are chosen as in the store (store.c): never pinned or FILLING, never an expert of the
// request at hand; empty first, prefetched-and-unused last, then LFU (ties LRU) or LRU.
//
// Fills wait in two queues, demand (acquire, fetch) before low (prefetch); an acquire that joins
// a queued prefetch moves it to the demand queue. The copy thread takes up to `batch` fills of
// the first queued layer, acquires their host views (one host acquire, so the host store reads
// its misses in parallel), queues every part's copy, waits once, releases the host views and
// publishes the slots READY (or, on a failure, EMPTY with the error kept for the acquirer that
// owns the fill; one that only joined starts over and copies it itself).
//
// Locking: one mutex (mu) for the tables, queues and counters; cv is broadcast when a fill lands
// or a pin count drops to zero; work_cv wakes the copy thread. The copy thread never holds mu
// while it calls the host provider or the device. Lock order: mu, then nothing (the host provider
// is called without mu).
#include "experts/vram.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/time.h"

enum { V_EMPTY, V_FILLING, V_READY };

// Weight kernels read whole aligned words up to 7 bytes past a block (STRATA_CUDA_PAD).
#define VRAM_PAD 64

struct vslot {
    int32_t expert;              // -1 when empty
    uint8_t state;
    bool unused_prefetch;        // filled by a prefetch, not acquired since
    bool fetched;                // filled by a fetch, not acquired since
    bool queued_low;             // in the low queue (not started)
    bool pinned;                 // the pinned hot set: copied at open, never replaced
    uint32_t ref;
    uint64_t last_use;
    int rc;                      // a failed fill's error, for the acquirer that owns it
};

struct vlayer {
    char *base;                  // device [n_slots][slot_size]
    uint64_t slot_size;
    struct vslot *slots;
    int32_t *expert_slot;
    uint64_t *freq;
    struct strata_experts_layer_stats st;
};

struct qent {
    uint32_t layer;
    int32_t slot;
};

struct queue {
    struct qent *e;
    int n;
};

struct strata_vram {
    struct strata_vram_dev dev;
    struct strata_expert_provider host;
    const struct strata_expert_layout *lay;
    struct strata_vram_config cfg;
    struct strata_slot_plan plan;
    uint32_t n_pin;              // pinned slots per layer (the first n_pin of each layer)
    uint64_t pin_hits, pin_bytes;
    double pin_s;
    struct vlayer *lc;
    void *mem;                   // device memory of every slot
    uint8_t *mark;               // [n_expert] scratch under mu
    pthread_mutex_t mu;
    pthread_cond_t cv, work_cv;
    pthread_t th;
    bool th_started, stop;
    struct queue dq, lq;         // demand, low
    int batch;
    uint64_t tick;
    uint64_t joined, copies, batches, cpu_experts, copy_bytes;
    double io_wait_s, copy_s, host_s;
    // the copy thread's batch
    uint32_t *b_ids;
    int32_t *b_slot;
    struct strata_expert_view *b_host;
};

static const struct strata_provider_i g_vram_iface;

// ---- slots and queues (under mu) ---------------------------------------------------------------

static char *vslot_ptr(const struct strata_vram *v, uint32_t l, int32_t s)
{
    return v->lc[l].base + (size_t)s * v->lc[l].slot_size;
}

static void vfill_view(const struct strata_vram *v, uint32_t l, int32_t s, struct strata_expert_view *out)
{
    uint64_t off[STRATA_EXPERT_PART_COUNT];
    strata_expert_part_offsets(&v->lay->layers[l], (uint32_t)v->lc[l].slots[s].expert, off);
    const char *p = vslot_ptr(v, l, s);
    for (int i = 0; i < STRATA_EXPERT_PART_COUNT; i++) out->part[i] = p + off[i];
}

static int32_t vvictim(const struct strata_vram *v, const struct vlayer *c)
{
    const bool lfu = v->cfg.policy == STRATA_POLICY_LFU;
    int32_t best = -1;
    for (uint32_t s = 0; s < v->plan.n_slots; s++) {
        const struct vslot *sl = &c->slots[s];
        if (sl->ref || sl->state == V_FILLING || sl->pinned) continue;
        if (sl->expert < 0) return (int32_t)s;
        if (v->mark[sl->expert]) continue;
        if (best < 0) {
            best = (int32_t)s;
            continue;
        }
        const struct vslot *b = &c->slots[best];
        if (sl->unused_prefetch != b->unused_prefetch) {
            if (b->unused_prefetch) best = (int32_t)s;
            continue;
        }
        const uint64_t fs = lfu ? c->freq[sl->expert] : 0, fb = lfu ? c->freq[b->expert] : 0;
        if (fs < fb || (fs == fb && sl->last_use < b->last_use)) best = (int32_t)s;
    }
    return best;
}

static void vdrop(struct vlayer *c, int32_t s)
{
    struct vslot *sl = &c->slots[s];
    if (sl->expert >= 0 && c->expert_slot[sl->expert] == s) c->expert_slot[sl->expert] = -1;
    sl->expert = -1;
    sl->state = V_EMPTY;
    sl->unused_prefetch = sl->fetched = sl->queued_low = false;
    sl->last_use = 0;
}

static void push(struct queue *q, uint32_t l, int32_t s) { q->e[q->n++] = (struct qent){l, s}; }

static bool remove_entry(struct queue *q, uint32_t l, int32_t s)
{
    for (int i = 0; i < q->n; i++)
        if (q->e[i].layer == l && q->e[i].slot == s) {
            memmove(&q->e[i], &q->e[i + 1], (size_t)(q->n - i - 1) * sizeof q->e[0]);
            q->n--;
            return true;
        }
    return false;
}

// Give slot s of layer l to expert e (FILLING) and queue its fill.
static void vclaim(struct strata_vram *v, uint32_t l, int32_t s, uint32_t e, bool low)
{
    struct vlayer *c = &v->lc[l];
    struct vslot *sl = &c->slots[s];
    if (sl->expert >= 0) {
        c->st.evictions++;
        vdrop(c, s);
    }
    sl->expert = (int32_t)e;
    sl->state = V_FILLING;
    sl->rc = 0;
    sl->queued_low = low;
    c->expert_slot[e] = s;
    c->st.bytes_read += v->lay->layers[l].triplet_bytes;
    push(low ? &v->lq : &v->dq, l, s);
    pthread_cond_signal(&v->work_cv);
}

// ---- the copy thread ---------------------------------------------------------------------------

// Take up to batch queued fills of the first queued layer (demand queue first). Under mu.
static int take_batch(struct strata_vram *v, uint32_t *layer)
{
    struct queue *q = v->dq.n ? &v->dq : &v->lq;
    if (q->n == 0) return 0;
    const uint32_t l = q->e[0].layer;
    int n = 0, keep = 0;
    for (int i = 0; i < q->n; i++) {
        if (q->e[i].layer == l && n < v->batch) {
            const int32_t s = q->e[i].slot;
            v->lc[l].slots[s].queued_low = false;
            v->b_slot[n] = s;
            v->b_ids[n] = (uint32_t)v->lc[l].slots[s].expert;
            n++;
        } else {
            q->e[keep++] = q->e[i];
        }
    }
    q->n = keep;
    *layer = l;
    return n;
}

static void *copy_main(void *arg)
{
    struct strata_vram *v = arg;
    const int bind_rc = v->dev.iface->bind ? v->dev.iface->bind(v->dev.ctx) : 0;
    pthread_mutex_lock(&v->mu);
    for (;;) {
        while (!v->stop && v->dq.n == 0 && v->lq.n == 0) pthread_cond_wait(&v->work_cv, &v->mu);
        if (v->dq.n == 0 && v->lq.n == 0) break;  // stopping, nothing left
        uint32_t l = 0;  // (set by take_batch; gcc -O1 cannot see it)
        const int n = take_batch(v, &l);
        pthread_mutex_unlock(&v->mu);

        // The slots of this batch are FILLING: nobody else touches them or their memory.
        const struct strata_expert_layer *el = &v->lay->layers[l];
        int rc = bind_rc;
        double t0 = strata_now();
        if (rc == 0) rc = strata_provider_acquire(v->host, l, v->b_ids, n, v->b_host);
        const double t1 = strata_now();
        if (rc == 0) {
            for (int i = 0; i < n && rc == 0; i++) {
                uint64_t off[STRATA_EXPERT_PART_COUNT];
                strata_expert_part_offsets(el, v->b_ids[i], off);
                char *dst = vslot_ptr(v, l, v->b_slot[i]);
                for (int p = 0; p < STRATA_EXPERT_PART_COUNT && rc == 0; p++)
                    rc = v->dev.iface->copy(v->dev.ctx, dst + off[p], v->b_host[i].part[p], el->part_bytes[p]);
            }
            const int wrc = v->dev.iface->wait(v->dev.ctx);  // even after a failed copy: the host views are released next
            if (rc == 0) rc = wrc;
            strata_provider_release(v->host, l, v->b_host, n);
        }
        const double t2 = strata_now();

        pthread_mutex_lock(&v->mu);
        v->host_s += t1 - t0;
        v->copy_s += t2 - t1;
        v->batches++;
        struct vlayer *c = &v->lc[l];
        for (int i = 0; i < n; i++) {
            struct vslot *sl = &c->slots[v->b_slot[i]];
            if (rc == 0) {
                sl->state = V_READY;
                v->copies++;
                v->copy_bytes += el->triplet_bytes;
            } else {
                c->st.bytes_read -= el->triplet_bytes;  // counted when claimed, never copied
                if (sl->ref == 0) {
                    vdrop(c, v->b_slot[i]);
                } else {  // an acquirer holds it: it sees EMPTY with the error
                    const uint32_t ref = sl->ref;
                    vdrop(c, v->b_slot[i]);
                    sl->ref = ref;
                    sl->rc = rc;
                }
            }
        }
        pthread_cond_broadcast(&v->cv);
    }
    pthread_mutex_unlock(&v->mu);
    return NULL;
}

// ---- the provider ------------------------------------------------------------------------------

static int vcheck(const struct strata_vram *v, const char *fn, uint32_t l, const uint32_t *ids, int n, int max)
{
    if (l >= v->lay->n_layers || n < 0 || n > max) {
        strata_log_error("vram experts %s: layer %u / %d experts out of range (%u layers, %u slots)", fn, l, n,
                         v->lay->n_layers, v->plan.n_slots);
        return STRATA_EARG;
    }
    for (int i = 0; i < n; i++)
        if (ids[i] >= v->lay->n_expert) {
            strata_log_error("vram experts %s: expert %u of layer %u out of range (%u experts)", fn, ids[i], l,
                             v->lay->n_expert);
            return STRATA_EARG;
        }
    return 0;
}

// views[i] holds the acquire's bookkeeping for ids[i] until the end (as store.c).
static void vnote(struct strata_expert_view *w, int32_t s, bool own)
{
    w->part[0] = (const void *)(uintptr_t)s;
    w->part[1] = (const void *)(uintptr_t)own;
}
static int32_t vnoted(const struct strata_expert_view *w) { return (int32_t)(uintptr_t)w->part[0]; }
static bool vnoted_own(const struct strata_expert_view *w) { return (uintptr_t)w->part[1] != 0; }

static void vunpin_noted(struct strata_vram *v, struct vlayer *c, const struct strata_expert_view *views, int n)
{
    for (int i = 0; i < n; i++) {
        struct vslot *sl = &c->slots[vnoted(&views[i])];
        if (--sl->ref == 0 && sl->state == V_EMPTY) sl->rc = 0;
    }
    pthread_cond_broadcast(&v->cv);
}

// Pin a slot an acquire found mapped to its expert and count the access: a hit, or the miss of a
// fetch that brought it (under mu).
static void vpin_found(struct strata_vram *v, struct vlayer *c, struct vslot *sl)
{
    sl->ref++;
    if (sl->fetched) {
        sl->fetched = false;
        c->st.misses++;
        c->st.fetched++;
    } else {
        c->st.hits++;
        v->pin_hits += sl->pinned;
    }
    if (sl->unused_prefetch) {
        sl->unused_prefetch = false;
        c->st.prefetch_used++;
    }
}

static int vram_acquire(void *ctx, uint32_t l, const uint32_t *ids, int n, struct strata_expert_view *views)
{
    struct strata_vram *v = ctx;
    int rc = vcheck(v, "acquire", l, ids, n, (int)(v->plan.n_slots - v->n_pin));
    if (rc) return rc;
    struct vlayer *c = &v->lc[l];
    double waited_s = 0;
    pthread_mutex_lock(&v->mu);
    for (;;) {
        int need = 0, avail = 0;
        for (int i = 0; i < n; i++) {
            v->mark[ids[i]] = 1;
            need += c->expert_slot[ids[i]] < 0;
        }
        for (uint32_t s = 0; s < v->plan.n_slots; s++) {
            const struct vslot *sl = &c->slots[s];
            avail += !sl->ref && sl->state != V_FILLING && !sl->pinned && !(sl->expert >= 0 && v->mark[sl->expert]);
        }
        for (int i = 0; i < n; i++) v->mark[ids[i]] = 0;
        if (need > avail) {  // all or nothing: wait for releases and fills
            const double t0 = strata_now();
            pthread_cond_wait(&v->cv, &v->mu);
            waited_s += strata_now() - t0;
            continue;
        }
        for (int i = 0; i < n; i++) {
            const int32_t s = c->expert_slot[ids[i]];
            vnote(&views[i], -1, false);
            if (s < 0) continue;
            struct vslot *sl = &c->slots[s];
            vpin_found(v, c, sl);
            if (sl->state == V_FILLING) {
                v->joined++;
                if (sl->queued_low && remove_entry(&v->lq, l, s)) {  // wanted now: demand priority
                    sl->queued_low = false;
                    push(&v->dq, l, s);
                    pthread_cond_signal(&v->work_cv);
                }
            }
            vnote(&views[i], s, false);
        }
        for (int i = 0; i < n; i++) v->mark[ids[i]] = 1;
        for (int i = 0; i < n; i++) {
            if (vnoted(&views[i]) >= 0) continue;
            int32_t s = c->expert_slot[ids[i]];
            if (s >= 0) {  // a duplicate id of this request
                c->slots[s].ref++;
                vnote(&views[i], s, false);
                continue;
            }
            s = vvictim(v, c);
            STRATA_ASSERT(s >= 0);  // counted above
            vclaim(v, l, s, ids[i], false);
            c->slots[s].ref = 1;
            c->st.misses++;
            vnote(&views[i], s, true);
        }
        for (int i = 0; i < n; i++) v->mark[ids[i]] = 0;
        for (int i = 0; i < n; i++) {
            c->slots[vnoted(&views[i])].last_use = ++v->tick;
            c->freq[ids[i]]++;
        }
        const double t0 = strata_now();
        bool waited = false;
        for (;;) {
            bool pending = false;
            for (int i = 0; i < n && !pending; i++) pending = c->slots[vnoted(&views[i])].state == V_FILLING;
            if (!pending) break;
            waited = true;
            pthread_cond_wait(&v->cv, &v->mu);
        }
        if (waited) waited_s += strata_now() - t0;
        // A fill of this acquire that failed ends it; one it only joined makes it start over.
        int failed = 0;
        bool lost = false;
        for (int i = 0; i < n; i++) {
            const struct vslot *sl = &c->slots[vnoted(&views[i])];
            if (sl->state == V_READY && sl->expert == (int32_t)ids[i]) continue;
            if (vnoted_own(&views[i]) && sl->rc && !failed) failed = sl->rc;
            lost = true;
        }
        if (failed || lost) {
            vunpin_noted(v, c, views, n);
            if (failed) {
                v->io_wait_s += waited_s;
                c->st.io_wait_s += waited_s;
                pthread_mutex_unlock(&v->mu);
                strata_log_error("vram experts: filling experts of MoE layer %u failed", l);
                return failed;
            }
            continue;
        }
        for (uint32_t s = 0; s < v->plan.n_slots; s++)
            if (c->slots[s].state == V_READY) c->slots[s].unused_prefetch = false;
        for (int i = 0; i < n; i++) vfill_view(v, l, vnoted(&views[i]), &views[i]);
        v->io_wait_s += waited_s;
        c->st.io_wait_s += waited_s;
        pthread_mutex_unlock(&v->mu);
        return 0;
    }
}

int strata_vram_acquire_ready(struct strata_vram *v, uint32_t l, const uint32_t *ids, int n,
                              struct strata_expert_view *views, uint8_t *state)
{
    int rc = vcheck(v, "acquire_ready", l, ids, n, (int)v->lay->n_expert);
    if (rc) return rc;
    struct vlayer *c = &v->lc[l];
    int got = 0;
    pthread_mutex_lock(&v->mu);
    for (int i = 0; i < n; i++) {
        const int32_t s = c->expert_slot[ids[i]];
        state[i] = s < 0 ? STRATA_VRAM_ABSENT : c->slots[s].state == V_READY ? STRATA_VRAM_READY : STRATA_VRAM_FILLING;
        if (state[i] != STRATA_VRAM_READY) continue;
        struct vslot *sl = &c->slots[s];
        vpin_found(v, c, sl);
        sl->last_use = ++v->tick;
        c->freq[ids[i]]++;
        vfill_view(v, l, s, &views[i]);
        got++;
    }
    pthread_mutex_unlock(&v->mu);
    return got;
}

void strata_vram_note_cpu(struct strata_vram *v, uint32_t l, const uint32_t *ids, int n)
{
    if (vcheck(v, "note_cpu", l, ids, n, (int)v->lay->n_expert)) return;
    struct vlayer *c = &v->lc[l];
    pthread_mutex_lock(&v->mu);
    for (int i = 0; i < n; i++) c->freq[ids[i]]++;
    c->st.misses += (uint64_t)n;
    v->cpu_experts += (uint64_t)n;
    pthread_mutex_unlock(&v->mu);
}

// fetch (the caller's next acquire: demand priority, counted as misses when acquired) or
// prefetch (a guess: low priority, counted in prefetched). Never replaces an expert of its own
// request or a pinned or filling slot; never blocks. The host provider gets the same hint for
// the experts VRAM lacks, so its disk reads start now too.
static int vstart(struct strata_vram *v, const char *fn, uint32_t l, const uint32_t *ids, int n, bool fetch)
{
    int rc = vcheck(v, fn, l, ids, n, (int)v->lay->n_expert);
    if (rc) return rc;
    struct vlayer *c = &v->lc[l];
    uint32_t *miss = malloc((size_t)(n ? n : 1) * sizeof *miss);
    int n_miss = 0;
    pthread_mutex_lock(&v->mu);
    for (int i = 0; i < n; i++) v->mark[ids[i]] = 1;
    for (int i = 0; i < n; i++) {
        if (c->expert_slot[ids[i]] >= 0) continue;
        const int32_t s = vvictim(v, c);
        if (s < 0) break;
        if (miss) miss[n_miss++] = ids[i];
        vclaim(v, l, s, ids[i], !fetch);
        if (fetch) {
            c->slots[s].fetched = true;
        } else {
            c->slots[s].unused_prefetch = true;
            c->st.prefetched++;
        }
        c->slots[s].last_use = ++v->tick;
    }
    for (int i = 0; i < n; i++) v->mark[ids[i]] = 0;
    pthread_mutex_unlock(&v->mu);
    if (miss && n_miss) {
        if (fetch && strata_provider_can_fetch(v->host)) {
            const int hb = strata_provider_max_batch(v->host);
            rc = strata_provider_fetch(v->host, l, miss, n_miss < hb ? n_miss : hb);
        } else if (!fetch) {
            rc = strata_provider_prefetch(v->host, l, miss, n_miss);
        }
    }
    free(miss);
    return rc;
}

static int vram_prefetch(void *ctx, uint32_t l, const uint32_t *ids, int n)
{
    return vstart(ctx, "prefetch", l, ids, n, false);
}

static int vram_fetch(void *ctx, uint32_t l, const uint32_t *ids, int n) { return vstart(ctx, "fetch", l, ids, n, true); }

static void vram_release(void *ctx, uint32_t l, const struct strata_expert_view *views, int n)
{
    struct strata_vram *v = ctx;
    if (l >= v->lay->n_layers) return;
    struct vlayer *c = &v->lc[l];
    const size_t span = (size_t)v->plan.n_slots * c->slot_size;
    bool freed = false;
    pthread_mutex_lock(&v->mu);
    for (int i = 0; i < n; i++) {
        const char *p = views[i].part[STRATA_EXPERT_GATE];
        STRATA_ASSERT(p >= c->base && p < c->base + span);
        struct vslot *sl = &c->slots[(size_t)(p - c->base) / c->slot_size];
        STRATA_ASSERT(sl->ref > 0);
        freed |= --sl->ref == 0;
    }
    if (freed) pthread_cond_broadcast(&v->cv);
    pthread_mutex_unlock(&v->mu);
}

static void vram_stats(void *ctx, struct strata_experts_stats *out)
{
    struct strata_vram *v = ctx;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&v->mu);
    for (uint32_t l = 0; l < v->lay->n_layers; l++) {
        const struct strata_experts_layer_stats *s = &v->lc[l].st;
        out->hits += s->hits;
        out->misses += s->misses;
        out->evictions += s->evictions;
        out->bytes_read += s->bytes_read;
        out->prefetched += s->prefetched;
        out->prefetch_used += s->prefetch_used;
        out->fetched += s->fetched;
    }
    out->io_wait_s = v->io_wait_s;
    out->joined = v->joined;
    out->reads = v->copies;
    out->pin_hits = v->pin_hits;
    out->pinned = v->n_pin;
    out->preload_bytes = v->pin_bytes;
    out->preload_s = v->pin_s;
    pthread_mutex_unlock(&v->mu);
    out->slots_per_layer = v->plan.n_slots;
    out->n_classes = v->plan.n_classes;
    out->full = v->plan.n_slots == v->lay->n_expert;
    out->slot_bytes_total = v->plan.total_bytes;
    out->io_depth = v->batch;
}

static void vram_layer_stats(void *ctx, uint32_t l, struct strata_experts_layer_stats *out)
{
    struct strata_vram *v = ctx;
    memset(out, 0, sizeof *out);
    if (l >= v->lay->n_layers) return;
    pthread_mutex_lock(&v->mu);
    *out = v->lc[l].st;
    pthread_mutex_unlock(&v->mu);
}

static int vram_max_batch(void *ctx)
{
    const struct strata_vram *v = ctx;
    return (int)(v->plan.n_slots - v->n_pin);
}

static const struct strata_provider_i g_vram_iface = {
    .prefetch = vram_prefetch,
    .fetch = vram_fetch,
    .acquire = vram_acquire,
    .release = vram_release,
    .stats = vram_stats,
    .layer_stats = vram_layer_stats,
    .max_batch = vram_max_batch,
};

// ---- open / close ------------------------------------------------------------------------------

// Copy the pinned hot set into the first n_pin slots of every layer through the copy thread (the
// host provider reads what it lacks) and wait for it; the slots are held (ref) while they fill, so
// a failed copy leaves its error there. Afterwards the copies do not count as misses or PCIe
// traffic of the run: they are the tier's preload.
static int load_pins(struct strata_vram *v, struct strata_expert_pins pins, uint32_t n_expert_used)
{
    const uint32_t X = v->lay->n_expert, P = strata_expert_pin_count(v->plan.n_slots, X, n_expert_used, pins.share);
    const double t0 = strata_now();
    int rc = 0;
    pthread_mutex_lock(&v->mu);
    for (uint32_t l = 0; l < v->lay->n_layers && rc == 0; l++)
        for (uint32_t i = 0; i < P; i++) {
            const uint32_t e = pins.rank[(size_t)l * X + i];
            if (e >= X || v->lc[l].expert_slot[e] >= 0) {
                strata_log_error("vram experts: pinned expert %u of layer %u is out of range or given twice", e, l);
                rc = STRATA_EARG;
                break;
            }
            vclaim(v, l, (int32_t)i, e, false);
            v->lc[l].slots[i].ref = 1;
            v->lc[l].slots[i].pinned = true;
        }
    for (uint32_t l = 0; l < v->lay->n_layers; l++)
        for (uint32_t i = 0; i < P; i++) {
            struct vslot *sl = &v->lc[l].slots[i];
            if (!sl->pinned) continue;
            while (sl->state == V_FILLING) pthread_cond_wait(&v->cv, &v->mu);
            if (sl->state != V_READY && rc == 0) rc = sl->rc ? sl->rc : STRATA_EIO;
            sl->ref = 0;
        }
    for (uint32_t l = 0; l < v->lay->n_layers; l++) {
        v->pin_bytes += v->lc[l].st.bytes_read;
        v->lc[l].st.bytes_read = 0;
    }
    v->n_pin = P;
    v->copies = v->batches = v->copy_bytes = 0;
    v->copy_s = v->host_s = 0;
    v->pin_s = strata_now() - t0;
    pthread_mutex_unlock(&v->mu);
    if (rc) strata_log_error("vram experts: copying the pinned hot set failed");
    return rc;
}

int strata_vram_open(struct strata_vram **out, struct strata_vram_dev dev, struct strata_expert_provider host,
                     const struct strata_expert_layout *lay, uint32_t n_expert_used,
                     const struct strata_vram_config *cfg)
{
    *out = NULL;
    if (!cfg || cfg->budget == 0 || cfg->policy >= STRATA_POLICY_COUNT || cfg->batch < 0 || n_expert_used == 0 ||
        (lay->n_layers && n_expert_used > lay->n_expert)) {
        strata_log_error("vram experts: a budget of %llu bytes, policy %d, batch %d, %u experts used: not valid",
                         cfg ? (unsigned long long)cfg->budget : 0ull, cfg ? (int)cfg->policy : -1,
                         cfg ? cfg->batch : -1, n_expert_used);
        return STRATA_EARG;
    }
    struct strata_vram *v = calloc(1, sizeof *v);
    if (!v) return STRATA_ENOMEM;
    pthread_mutex_init(&v->mu, NULL);
    pthread_cond_init(&v->cv, NULL);
    pthread_cond_init(&v->work_cv, NULL);
    v->dev = dev;
    v->host = host;
    v->lay = lay;
    v->cfg = *cfg;
    strata_expert_layout_plan(lay, cfg->budget, !cfg->no_classes, &v->plan);
    const int hb = lay->n_layers ? strata_provider_max_batch(host) : 1;
    v->batch = cfg->batch ? cfg->batch : 16;
    if (v->batch > hb) v->batch = hb;
    if (v->batch < 1) v->batch = 1;
    if (lay->n_layers == 0) {
        *out = v;
        return 0;
    }
    if (v->plan.n_slots < n_expert_used) {
        const uint64_t min = strata_expert_layout_min_budget(lay, n_expert_used);
        strata_log_error("vram experts: --gpu-cache-mib %.0f holds %u slots per layer; the minimum is %u (one "
                         "token's experts), %llu MiB",
                         cfg->budget / 1048576.0, v->plan.n_slots, n_expert_used,
                         (unsigned long long)((min + 1048575) >> 20));
        strata_vram_close(v);
        return STRATA_ENOMEM;
    }
    const uint32_t L = lay->n_layers, X = lay->n_expert, S = v->plan.n_slots;
    v->lc = calloc(L, sizeof *v->lc);
    v->mark = calloc(X, 1);
    v->dq.e = calloc((size_t)L * S, sizeof *v->dq.e);
    v->lq.e = calloc((size_t)L * S, sizeof *v->lq.e);
    v->b_ids = calloc((size_t)v->batch, sizeof *v->b_ids);
    v->b_slot = calloc((size_t)v->batch, sizeof *v->b_slot);
    v->b_host = calloc((size_t)v->batch, sizeof *v->b_host);
    if (!v->lc || !v->mark || !v->dq.e || !v->lq.e || !v->b_ids || !v->b_slot || !v->b_host) {
        strata_vram_close(v);
        return STRATA_ENOMEM;
    }
    v->mem = dev.iface->alloc(dev.ctx, v->plan.total_bytes + VRAM_PAD, "the VRAM expert slots");
    if (!v->mem) {
        strata_log_error("vram experts: no device memory for %u slots per layer (%.1f MiB); lower --gpu-cache-mib",
                         S, v->plan.total_bytes / 1048576.0);
        strata_vram_close(v);
        return STRATA_ENOMEM;
    }
    char *base = v->mem;
    for (uint32_t l = 0; l < L; l++) {
        struct vlayer *c = &v->lc[l];
        c->slot_size = strata_expert_layout_slot_size(lay, &v->plan, l);
        c->base = base;
        base += (size_t)S * c->slot_size;
        c->slots = calloc(S, sizeof *c->slots);
        c->expert_slot = malloc(X * sizeof *c->expert_slot);
        c->freq = calloc(X, sizeof *c->freq);
        if (!c->slots || !c->expert_slot || !c->freq) {
            strata_vram_close(v);
            return STRATA_ENOMEM;
        }
        for (uint32_t s = 0; s < S; s++) c->slots[s].expert = -1;
        memset(c->expert_slot, 0xff, X * sizeof *c->expert_slot);
    }
    if (pthread_create(&v->th, NULL, copy_main, v) != 0) {
        strata_log_error("vram experts: cannot start the copy thread");
        strata_vram_close(v);
        return STRATA_ENOMEM;
    }
    v->th_started = true;
    int rc;
    if (cfg->pins.rank && (rc = load_pins(v, cfg->pins, n_expert_used))) {
        strata_vram_close(v);
        return rc;
    }
    *out = v;
    return 0;
}

void strata_vram_close(struct strata_vram *v)
{
    if (!v) return;
    if (v->th_started) {
        pthread_mutex_lock(&v->mu);
        v->stop = true;
        pthread_cond_signal(&v->work_cv);
        pthread_mutex_unlock(&v->mu);
        pthread_join(v->th, NULL);
    }
    if (v->lc)
        for (uint32_t l = 0; l < v->lay->n_layers; l++) {
            free(v->lc[l].slots);
            free(v->lc[l].expert_slot);
            free(v->lc[l].freq);
        }
    if (v->mem) v->dev.iface->free(v->dev.ctx, v->mem);
    free(v->lc);
    free(v->mark);
    free(v->dq.e);
    free(v->lq.e);
    free(v->b_ids);
    free(v->b_slot);
    free(v->b_host);
    pthread_mutex_destroy(&v->mu);
    pthread_cond_destroy(&v->cv);
    pthread_cond_destroy(&v->work_cv);
    free(v);
}

struct strata_expert_provider strata_vram_provider(struct strata_vram *v)
{
    return (struct strata_expert_provider){&g_vram_iface, v};
}

uint64_t strata_vram_slot_bytes(const struct strata_vram *v) { return v ? v->plan.total_bytes : 0; }

void strata_vram_extra_stats(struct strata_vram *v, struct strata_vram_extra *out)
{
    pthread_mutex_lock(&v->mu);
    *out = (struct strata_vram_extra){v->copies, v->batches, v->copy_s, v->host_s, v->cpu_experts, v->copy_bytes};
    pthread_mutex_unlock(&v->mu);
}
