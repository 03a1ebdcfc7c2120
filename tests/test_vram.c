// The VRAM expert tier (experts/vram.c) without a GPU: a fake device whose memory is host memory
// and whose copies are memcpy (counted, optionally held back by a gate or failed on purpose), over
// the real host store of a synthetic model with a bounded host cache. Checks: views hold exactly
// the file's bytes; hits, misses, evictions, bytes over "PCIe" and copies add up; pins (an expert
// in use is never evicted: an acquire that needs its slot waits for the release); all-or-nothing
// acquires; fetch and prefetch never evict a pinned expert and are counted; a joined fill; LRU and
// LFU replace what the store would; a failed copy fails the acquire cleanly and the next one
// works; four threads with overlapping random groups (also under TSAN=1); a pinned hot set;
// strata sim's two-tier replay equals the tier's and the host store's misses.
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "experts/layout.h"
#include "experts/provider.h"
#include "experts/store.h"
#include "experts/vram.h"
#include "experts/trace.h"
#include "gguf/gguf.h"
#include "tools/sim.h"
#include "tools/synth.h"
#include "util/log.h"

#include "check.h"

static void drop_line(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

// ---- the fake device -----------------------------------------------------------------------------

struct fake_dev {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate_closed;              // copies wait while closed
    int fail_at;                   // the n-th copy (1-based) fails, 0: none
    atomic_int copies;
    atomic_ullong bytes;
    atomic_int allocs;
    atomic_int bound;
};

static void *fd_alloc(void *ctx, size_t bytes, const char *what)
{
    (void)what;
    struct fake_dev *d = ctx;
    atomic_fetch_add(&d->allocs, 1);
    return malloc(bytes);
}
static void fd_free(void *ctx, void *p)
{
    struct fake_dev *d = ctx;
    atomic_fetch_sub(&d->allocs, 1);
    free(p);
}
static int fd_bind(void *ctx)
{
    atomic_fetch_add(&((struct fake_dev *)ctx)->bound, 1);
    return 0;
}
static int fd_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    struct fake_dev *d = ctx;
    pthread_mutex_lock(&d->mu);
    while (d->gate_closed) pthread_cond_wait(&d->cv, &d->mu);
    const int k = atomic_fetch_add(&d->copies, 1) + 1;
    const bool fail = d->fail_at && k == d->fail_at;
    pthread_mutex_unlock(&d->mu);
    if (fail) return STRATA_EIO;
    memcpy(dst, src, bytes);
    atomic_fetch_add(&d->bytes, bytes);
    return 0;
}
static int fd_wait(void *ctx)
{
    (void)ctx;
    return 0;
}
static const struct strata_vram_dev_i g_fd_iface = {fd_alloc, fd_free, fd_bind, fd_copy, fd_wait};

static void gate(struct fake_dev *d, bool closed)
{
    pthread_mutex_lock(&d->mu);
    d->gate_closed = closed;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

// ---- fixtures ------------------------------------------------------------------------------------

static char g_dir[] = "/tmp/strata-test-vram-XXXXXX";

struct ref {
    const struct strata_expert_layout *lay;
    char **part;                   // [layer * 3 + part] -> [n_expert][part_bytes]
};

static bool view_ok(const struct ref *r, uint32_t l, uint32_t e, const struct strata_expert_view *v)
{
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        const uint64_t pb = r->lay->layers[l].part_bytes[p];
        if (memcmp(r->part[l * STRATA_EXPERT_PART_COUNT + p] + e * pb, v->part[p], pb) != 0) return false;
    }
    return true;
}

struct tier {
    struct fake_dev dev;
    struct strata_store *store;
    struct strata_vram *vram;
    struct strata_expert_provider p;
};

// host: host cache in slots per layer (0: full); vram: slots per layer.
static int tier_open(struct tier *t, struct strata_gguf_file *f, const struct strata_expert_layout *lay,
                     uint32_t host_slots, uint32_t vram_slots, enum strata_cache_policy pol, int batch)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->dev.mu, NULL);
    pthread_cond_init(&t->dev.cv, NULL);
    const struct strata_experts_config hc = {
        .cache_bytes = host_slots ? strata_expert_layout_min_budget(lay, host_slots) : 0, .io = STRATA_IO_PREAD,
        .policy = pol};
    int rc = strata_store_open(&t->store, f, lay, 2, &hc);
    if (rc) return rc;
    const struct strata_vram_config vc = {.budget = strata_expert_layout_min_budget(lay, vram_slots), .policy = pol,
                                          .batch = batch};
    rc = strata_vram_open(&t->vram, (struct strata_vram_dev){&g_fd_iface, &t->dev}, strata_store_provider(t->store),
                          lay, 2, &vc);
    if (rc) {
        strata_store_close(t->store);
        return rc;
    }
    t->p = strata_vram_provider(t->vram);
    return 0;
}

static void tier_close(struct tier *t)
{
    strata_vram_close(t->vram);
    strata_store_close(t->store);
    CHECK(atomic_load(&t->dev.allocs) == 0, "device memory freed (%d left)", atomic_load(&t->dev.allocs));
    pthread_mutex_destroy(&t->dev.mu);
    pthread_cond_destroy(&t->dev.cv);
}

// ---- cases ---------------------------------------------------------------------------------------

static void test_basic(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 4, 4, STRATA_POLICY_LRU, 0) == 0, "open");
    CHECK(strata_provider_max_batch(t.p) == 4, "max_batch %d", strata_provider_max_batch(t.p));
    const uint64_t tb = lay->layers[1].triplet_bytes;
    struct strata_expert_view v[4];
    uint32_t ids[4] = {3, 7, 1, 9};
    CHECK(strata_provider_acquire(t.p, 1, ids, 4, v) == 0, "acquire");
    for (int i = 0; i < 4; i++) CHECK(view_ok(ref, 1, ids[i], &v[i]), "expert %u bytes", ids[i]);
    strata_provider_release(t.p, 1, v, 4);
    struct strata_experts_stats s;
    strata_provider_stats(t.p, &s);
    CHECK(s.misses == 4 && s.hits == 0 && s.evictions == 0 && s.bytes_read == 4 * tb && s.reads == 4,
          "first: %llu misses %llu hits %llu bytes %llu copies", (unsigned long long)s.misses,
          (unsigned long long)s.hits, (unsigned long long)s.bytes_read, (unsigned long long)s.reads);
    CHECK(atomic_load(&t.dev.bytes) == 4 * tb, "PCIe bytes %llu", (unsigned long long)atomic_load(&t.dev.bytes));
    CHECK(atomic_load(&t.dev.bound) == 1, "copy thread bound once");
    CHECK(!s.full && s.slots_per_layer == 4, "not full, 4 slots");
    // again: all hits, nothing copied
    CHECK(strata_provider_acquire(t.p, 1, ids, 4, v) == 0, "acquire again");
    for (int i = 0; i < 4; i++) CHECK(view_ok(ref, 1, ids[i], &v[i]), "expert %u bytes (hit)", ids[i]);
    strata_provider_release(t.p, 1, v, 4);
    strata_provider_stats(t.p, &s);
    CHECK(s.hits == 4 && s.misses == 4 && s.reads == 4, "hits %llu", (unsigned long long)s.hits);
    // LRU: 3 and 7 touched last as 9; touch 3, then two new experts evict 7 and 1 (least recent)
    uint32_t a[1] = {3};
    CHECK(strata_provider_acquire(t.p, 1, a, 1, v) == 0, "touch 3");
    strata_provider_release(t.p, 1, v, 1);
    uint32_t nw[2] = {20, 21};
    CHECK(strata_provider_acquire(t.p, 1, nw, 2, v) == 0, "new");
    for (int i = 0; i < 2; i++) CHECK(view_ok(ref, 1, nw[i], &v[i]), "expert %u bytes (new)", nw[i]);
    strata_provider_release(t.p, 1, v, 2);
    strata_provider_stats(t.p, &s);
    CHECK(s.evictions == 2, "evictions %llu", (unsigned long long)s.evictions);
    uint32_t keep[2] = {3, 9};
    const uint64_t m0 = s.misses;
    CHECK(strata_provider_acquire(t.p, 1, keep, 2, v) == 0, "kept");
    strata_provider_release(t.p, 1, v, 2);
    strata_provider_stats(t.p, &s);
    CHECK(s.misses == m0, "3 and 9 stayed (LRU evicted 7 and 1): misses %llu -> %llu", (unsigned long long)m0,
          (unsigned long long)s.misses);
    struct strata_experts_layer_stats ls;
    strata_provider_layer_stats(t.p, 1, &ls);
    CHECK(ls.misses == s.misses && ls.hits == s.hits, "layer 1 holds every access");
    strata_provider_layer_stats(t.p, 0, &ls);
    CHECK(ls.misses == 0 && ls.hits == 0, "layer 0 untouched");
    strata_log_set_sink(drop_line, NULL);
    CHECK(strata_provider_acquire(t.p, 1, ids, 5, v) == STRATA_EARG, "more than max_batch refused");
    strata_log_set_sink(NULL, NULL);
    tier_close(&t);
    case_result("vram: views, hits, misses, LRU evictions, bytes over PCIe", before);
}

// acquire_ready pins only what is READY (never waits, never copies), says where the others stand,
// and its pins hold against evictions; note_cpu counts misses served by the CPU.
static void test_ready(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 0, 4, STRATA_POLICY_LRU, 0) == 0, "open");
    struct strata_expert_view v[4], r[4];
    uint32_t ids[2] = {5, 6};
    CHECK(strata_provider_acquire(t.p, 2, ids, 2, v) == 0, "acquire 5, 6");
    strata_provider_release(t.p, 2, v, 2);
    const int copies0 = atomic_load(&t.dev.copies);
    uint32_t want[4] = {6, 11, 5, 12};
    uint8_t state[4];
    memset(r, 0, sizeof r);
    CHECK(strata_vram_acquire_ready(t.vram, 2, want, 4, r, state) == 2, "two ready");
    CHECK(state[0] == STRATA_VRAM_READY && state[2] == STRATA_VRAM_READY && state[1] == STRATA_VRAM_ABSENT &&
              state[3] == STRATA_VRAM_ABSENT,
          "states %d %d %d %d", state[0], state[1], state[2], state[3]);
    CHECK(view_ok(ref, 2, 6, &r[0]) && view_ok(ref, 2, 5, &r[2]), "ready views hold the bytes");
    CHECK(r[1].part[0] == NULL && r[3].part[0] == NULL, "absent ones untouched");
    CHECK(atomic_load(&t.dev.copies) == copies0, "nothing copied");
    // the two pinned ones survive a full layer's worth of new experts
    uint32_t fill[2] = {20, 21};
    CHECK(strata_provider_acquire(t.p, 2, fill, 2, v) == 0, "two more");
    strata_provider_release(t.p, 2, v, 2);
    uint32_t more[2] = {22, 23};
    CHECK(strata_provider_acquire(t.p, 2, more, 2, v) == 0, "two more again (evicting 20, 21, not the pinned)");
    strata_provider_release(t.p, 2, v, 2);
    CHECK(view_ok(ref, 2, 6, &r[0]) && view_ok(ref, 2, 5, &r[2]), "pinned views still hold the bytes");
    const struct strata_expert_view held[2] = {r[0], r[2]};
    strata_provider_release(t.p, 2, held, 2);
    // a queued prefetch reads as FILLING until it lands (the copy gate closed)
    gate(&t.dev, true);
    uint32_t pf[1] = {30};
    CHECK(strata_provider_prefetch(t.p, 2, pf, 1) == 0, "prefetch 30");
    CHECK(strata_vram_acquire_ready(t.vram, 2, pf, 1, r, state) == 0 && state[0] == STRATA_VRAM_FILLING,
          "30 filling: %d", state[0]);
    gate(&t.dev, false);
    struct strata_experts_stats s0, s1;
    strata_provider_stats(t.p, &s0);
    uint32_t cpu[2] = {11, 12};
    strata_vram_note_cpu(t.vram, 2, cpu, 2);
    strata_provider_stats(t.p, &s1);
    struct strata_vram_extra x;
    strata_vram_extra_stats(t.vram, &x);
    CHECK(s1.misses == s0.misses + 2 && s1.hits == s0.hits && x.cpu_experts == 2, "CPU misses counted: %llu -> %llu, %llu",
          (unsigned long long)s0.misses, (unsigned long long)s1.misses, (unsigned long long)x.cpu_experts);
    CHECK(x.copy_bytes == (uint64_t)x.copies * lay->layers[2].triplet_bytes, "copy bytes %llu for %llu copies",
          (unsigned long long)x.copy_bytes, (unsigned long long)x.copies);
    tier_close(&t);
    case_result("vram: acquire_ready pins only ready experts, note_cpu counts CPU misses", before);
}

static void test_lfu(struct strata_gguf_file *f, const struct strata_expert_layout *lay)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 0, 2, STRATA_POLICY_LFU, 0) == 0, "open");
    struct strata_expert_view v[2];
    uint32_t e0[1] = {5}, e1[1] = {6}, e2[1] = {8};
    for (int k = 0; k < 3; k++) {  // 5 used three times
        CHECK(strata_provider_acquire(t.p, 0, e0, 1, v) == 0, "5");
        strata_provider_release(t.p, 0, v, 1);
    }
    CHECK(strata_provider_acquire(t.p, 0, e1, 1, v) == 0, "6");  // 6 most recent, once
    strata_provider_release(t.p, 0, v, 1);
    CHECK(strata_provider_acquire(t.p, 0, e2, 1, v) == 0, "8");  // LFU evicts 6, not 5
    strata_provider_release(t.p, 0, v, 1);
    struct strata_experts_stats s0, s1;
    strata_provider_stats(t.p, &s0);
    CHECK(strata_provider_acquire(t.p, 0, e0, 1, v) == 0, "5 again");
    strata_provider_release(t.p, 0, v, 1);
    strata_provider_stats(t.p, &s1);
    CHECK(s1.hits == s0.hits + 1, "LFU kept the frequent expert");
    tier_close(&t);
    case_result("vram: LFU keeps the frequent expert", before);
}

struct blocked {
    struct strata_expert_provider p;
    const struct ref *ref;
    uint32_t layer, ids[2];
    atomic_int done;
    int rc;
    bool ok;
};

static void *blocked_acquire(void *arg)
{
    struct blocked *b = arg;
    struct strata_expert_view v[2];
    b->rc = strata_provider_acquire(b->p, b->layer, b->ids, 2, v);
    if (b->rc == 0) {
        b->ok = view_ok(b->ref, b->layer, b->ids[0], &v[0]) && view_ok(b->ref, b->layer, b->ids[1], &v[1]);
        strata_provider_release(b->p, b->layer, v, 2);
    }
    atomic_store(&b->done, 1);
    return NULL;
}

// Every slot pinned: prefetch and fetch do nothing, a second acquirer waits (all or nothing) and
// the pinned experts' bytes never change; after the release it proceeds, evicting them.
static void test_pins(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 3, 2, STRATA_POLICY_LFU, 0) == 0, "open");
    struct strata_expert_view v[2];
    uint32_t ids[2] = {0, 1};
    CHECK(strata_provider_acquire(t.p, 2, ids, 2, v) == 0, "pin both slots");
    uint32_t other[3] = {4, 5, 6};
    CHECK(strata_provider_prefetch(t.p, 2, other, 3) == 0, "prefetch");
    CHECK(strata_provider_fetch(t.p, 2, other, 2) == 0, "fetch");
    struct strata_experts_stats s;
    strata_provider_stats(t.p, &s);
    CHECK(s.prefetched == 0 && s.evictions == 0, "nothing pinned replaced (%llu prefetched, %llu evicted)",
          (unsigned long long)s.prefetched, (unsigned long long)s.evictions);
    struct blocked b = {.p = t.p, .ref = ref, .layer = 2, .ids = {4, 5}};
    pthread_t th;
    pthread_create(&th, NULL, blocked_acquire, &b);
    usleep(50 * 1000);
    CHECK(atomic_load(&b.done) == 0, "the second acquirer waits for the pinned slots");
    CHECK(view_ok(ref, 2, 0, &v[0]) && view_ok(ref, 2, 1, &v[1]), "pinned experts intact while it waits");
    strata_provider_release(t.p, 2, v, 1);  // one slot free is not enough for two misses
    usleep(30 * 1000);
    CHECK(atomic_load(&b.done) == 0, "all or nothing: one free slot is not enough");
    CHECK(view_ok(ref, 2, 1, &v[1]), "the still pinned expert intact");
    strata_provider_release(t.p, 2, v + 1, 1);
    pthread_join(th, NULL);
    CHECK(b.rc == 0 && b.ok, "then it gets its experts (rc %d)", b.rc);
    strata_provider_stats(t.p, &s);
    CHECK(s.evictions == 2 && s.misses == 4, "evictions %llu misses %llu", (unsigned long long)s.evictions,
          (unsigned long long)s.misses);
    // fetch of free slots: counted as misses and fetched when acquired, copied before
    uint32_t nx[2] = {10, 11};
    CHECK(strata_provider_fetch(t.p, 2, nx, 2) == 0, "fetch");
    CHECK(strata_provider_acquire(t.p, 2, nx, 2, v) == 0, "acquire fetched");
    CHECK(view_ok(ref, 2, 10, &v[0]) && view_ok(ref, 2, 11, &v[1]), "fetched bytes");
    strata_provider_release(t.p, 2, v, 2);
    strata_provider_stats(t.p, &s);
    CHECK(s.fetched == 2 && s.misses == 6, "fetched %llu misses %llu", (unsigned long long)s.fetched,
          (unsigned long long)s.misses);
    // prefetch, then acquire: used
    uint32_t pf[1] = {12};
    CHECK(strata_provider_prefetch(t.p, 2, pf, 1) == 0, "prefetch");
    CHECK(strata_provider_acquire(t.p, 2, pf, 1, v) == 0 && view_ok(ref, 2, 12, &v[0]), "acquire prefetched");
    strata_provider_release(t.p, 2, v, 1);
    strata_provider_stats(t.p, &s);
    CHECK(s.prefetched == 1 && s.prefetch_used == 1, "prefetched %llu used %llu", (unsigned long long)s.prefetched,
          (unsigned long long)s.prefetch_used);
    tier_close(&t);
    case_result("vram: pins, all-or-nothing, fetch and prefetch never evict an expert in use", before);
}

// A copy held back: a second acquirer of the same expert joins the fill (one copy), and a
// prefetch queued behind is promoted when acquired.
static void test_join(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 0, 4, STRATA_POLICY_LRU, 0) == 0, "open");
    gate(&t.dev, true);
    uint32_t pf[1] = {7};
    CHECK(strata_provider_prefetch(t.p, 0, pf, 1) == 0, "prefetch 7 (held at the gate)");
    struct blocked b = {.p = t.p, .ref = ref, .layer = 0, .ids = {7, 8}}, b2 = {.p = t.p, .ref = ref, .layer = 0, .ids = {8, 7}};
    pthread_t th, th2;
    pthread_create(&th, NULL, blocked_acquire, &b);
    pthread_create(&th2, NULL, blocked_acquire, &b2);
    usleep(50 * 1000);
    CHECK(atomic_load(&b.done) == 0 && atomic_load(&b2.done) == 0, "both wait at the gate");
    gate(&t.dev, false);
    pthread_join(th, NULL);
    pthread_join(th2, NULL);
    CHECK(b.rc == 0 && b.ok && b2.rc == 0 && b2.ok, "both get the bytes");
    struct strata_experts_stats s;
    strata_provider_stats(t.p, &s);
    CHECK(s.prefetched == 1 && s.prefetch_used == 1 && s.reads == 2, "prefetched %llu used %llu copies %llu",
          (unsigned long long)s.prefetched, (unsigned long long)s.prefetch_used, (unsigned long long)s.reads);
    tier_close(&t);
    case_result("vram: a prefetch in flight is joined, not copied twice", before);
}

static void test_fault(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 0, 2, STRATA_POLICY_LRU, 1) == 0, "open");
    t.dev.fail_at = 2;  // the second part copy of the first expert
    struct strata_expert_view v[2];
    uint32_t ids[2] = {2, 3};
    strata_log_set_sink(drop_line, NULL);
    CHECK(strata_provider_acquire(t.p, 1, ids, 2, v) == STRATA_EIO, "a failed copy fails the acquire");
    strata_log_set_sink(NULL, NULL);
    CHECK(strata_provider_acquire(t.p, 1, ids, 2, v) == 0, "the next acquire copies again");
    CHECK(view_ok(ref, 1, 2, &v[0]) && view_ok(ref, 1, 3, &v[1]), "bytes after the fault");
    strata_provider_release(t.p, 1, v, 2);
    tier_close(&t);
    case_result("vram: a failed copy fails cleanly, the next acquire works", before);
}

struct worker {
    pthread_t th;
    struct strata_expert_provider p;
    const struct ref *ref;
    uint64_t seed;
    atomic_int *bad;
    uint64_t acquired;
};

static uint32_t next_rand(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return (uint32_t)(*x >> 11);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    const struct strata_expert_layout *lay = w->ref->lay;
    const int mb = strata_provider_max_batch(w->p);
    struct strata_expert_view v[16];
    uint32_t ids[16];
    for (int it = 0; it < 200; it++) {
        const uint32_t l = next_rand(&w->seed) % lay->n_layers;
        const int n = 1 + (int)(next_rand(&w->seed) % (uint32_t)mb);
        int k = 0;
        while (k < n) {  // distinct ids from the first 12 experts: much overlap between threads
            const uint32_t e = next_rand(&w->seed) % 12;
            bool dup = false;
            for (int j = 0; j < k; j++) dup |= ids[j] == e;
            if (!dup) ids[k++] = e;
        }
        if (it % 5 == 0) strata_provider_prefetch(w->p, (l + 1) % lay->n_layers, ids, k);
        if (strata_provider_acquire(w->p, l, ids, k, v)) {
            atomic_fetch_add(w->bad, 1);
            continue;
        }
        for (int j = 0; j < k; j++)
            if (!view_ok(w->ref, l, ids[j], &v[j])) atomic_fetch_add(w->bad, 1);
        strata_provider_release(w->p, l, v, k);
        w->acquired += (uint64_t)k;
    }
    return NULL;
}

static void test_threads(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct tier t;
    CHECK(tier_open(&t, f, lay, 5, 4, STRATA_POLICY_LFU, 3) == 0, "open");
    atomic_int bad = 0;
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.p = t.p, .ref = ref, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), .bad = &bad};
        pthread_create(&w[i].th, NULL, work, &w[i]);
    }
    uint64_t acquired = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(w[i].th, NULL);
        acquired += w[i].acquired;
    }
    CHECK(atomic_load(&bad) == 0, "%d bad views or failed acquires", atomic_load(&bad));
    struct strata_experts_stats s;
    strata_provider_stats(t.p, &s);
    CHECK(s.hits + s.misses == acquired, "hits %llu + misses %llu = %llu acquired", (unsigned long long)s.hits,
          (unsigned long long)s.misses, (unsigned long long)acquired);
    CHECK(s.reads == (uint64_t)atomic_load(&t.dev.copies) / 3, "copies %llu, part copies %d",
          (unsigned long long)s.reads, atomic_load(&t.dev.copies));
    uint64_t tb = 0;
    for (uint32_t l = 0; l < lay->n_layers; l++) tb = lay->layers[l].triplet_bytes;  // all layers alike here
    CHECK(s.bytes_read == s.reads * tb && s.bytes_read == atomic_load(&t.dev.bytes), "bytes %llu over PCIe %llu",
          (unsigned long long)s.bytes_read, (unsigned long long)atomic_load(&t.dev.bytes));
    tier_close(&t);
    case_result("vram: four threads, overlapping groups, counters add up", before);
}

static void test_min(struct strata_gguf_file *f, const struct strata_expert_layout *lay)
{
    const int before = g_failures;
    struct strata_store *st;
    CHECK(strata_store_open(&st, f, lay, 2, NULL) == 0, "store");
    struct fake_dev d = {0};
    struct strata_vram *v = NULL;
    const struct strata_vram_config vc = {.budget = strata_expert_layout_min_budget(lay, 2) - 1};
    strata_log_set_sink(drop_line, NULL);
    CHECK(strata_vram_open(&v, (struct strata_vram_dev){&g_fd_iface, &d}, strata_store_provider(st), lay, 2, &vc) ==
              STRATA_ENOMEM && !v,
          "below one token's experts per layer: refused");
    strata_log_set_sink(NULL, NULL);
    strata_store_close(st);
    case_result("vram: a budget below the minimum is refused", before);
}

// A pinned hot set (--pin-from): the host store reads its share at open, the tier copies its
// share at open through the copy thread (not counted as misses or PCIe traffic of the run); the
// pinned experts hit and are never evicted however much else goes through the other slots;
// max_batch is the unpinned slots; a failed copy of a pinned expert fails the open cleanly.
static void test_pinned(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    const uint32_t L = lay->n_layers, X = lay->n_expert;
    uint32_t *rank = malloc((size_t)L * X * sizeof *rank);
    for (uint32_t l = 0; l < L; l++)
        for (uint32_t i = 0; i < X; i++) rank[l * X + i] = (i * 7 + l * 3 + 5) % X;  // a permutation (X = 32)
    struct tier t;
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.dev.mu, NULL);
    pthread_cond_init(&t.dev.cv, NULL);
    const struct strata_expert_pins pins = {rank, 0.5};
    const struct strata_experts_config hc = {.cache_bytes = strata_expert_layout_min_budget(lay, 8),
                                             .io = STRATA_IO_PREAD, .pins = pins};
    CHECK(strata_store_open(&t.store, f, lay, 2, &hc) == 0, "host store with pins");
    struct strata_experts_stats hs;
    strata_provider_stats(strata_store_provider(t.store), &hs);
    CHECK(hs.pinned == 4 && strata_provider_max_batch(strata_store_provider(t.store)) == 4 && hs.misses == 0 &&
              hs.bytes_read == 0 && hs.preload_bytes > 0,
          "host: %u pinned of 8 slots, max_batch %d, preload %llu", hs.pinned,
          strata_provider_max_batch(strata_store_provider(t.store)), (unsigned long long)hs.preload_bytes);
    const struct strata_vram_config vc = {.budget = strata_expert_layout_min_budget(lay, 6), .pins = pins};
    CHECK(strata_vram_open(&t.vram, (struct strata_vram_dev){&g_fd_iface, &t.dev}, strata_store_provider(t.store),
                           lay, 2, &vc) == 0, "tier with pins");
    t.p = strata_vram_provider(t.vram);
    struct strata_experts_stats s;
    strata_provider_stats(t.p, &s);
    uint64_t pin_bytes = 0;
    for (uint32_t l = 0; l < L; l++) pin_bytes += 3 * lay->layers[l].triplet_bytes;
    CHECK(s.pinned == 3 && strata_provider_max_batch(t.p) == 3, "VRAM: %u pinned of 6 slots, max_batch %d", s.pinned,
          strata_provider_max_batch(t.p));
    CHECK(s.misses == 0 && s.hits == 0 && s.bytes_read == 0 && s.reads == 0 && s.preload_bytes == pin_bytes,
          "open's copies are the preload: %llu misses, %llu bytes, preload %llu of %llu", (unsigned long long)s.misses,
          (unsigned long long)s.bytes_read, (unsigned long long)s.preload_bytes, (unsigned long long)pin_bytes);
    CHECK(atomic_load(&t.dev.copies) == (int)(3 * L * STRATA_EXPERT_PART_COUNT), "pinned copied at open: %d parts",
          atomic_load(&t.dev.copies));
    // churn every other expert of layer 1 through the three other slots, twice
    struct strata_expert_view v[3];
    uint32_t others[32];
    int n_other = 0;
    for (uint32_t e = 0; e < X; e++)
        if (e != rank[X + 0] && e != rank[X + 1] && e != rank[X + 2]) others[n_other++] = e;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i + 3 <= n_other; i += 3) {
            CHECK(strata_provider_acquire(t.p, 1, &others[i], 3, v) == 0, "churn");
            for (int j = 0; j < 3; j++) CHECK(view_ok(ref, 1, others[i + j], &v[j]), "churned expert bytes");
            strata_provider_release(t.p, 1, v, 3);
        }
    const int copies = atomic_load(&t.dev.copies);
    uint32_t hot[3] = {rank[X + 2], rank[X + 0], rank[X + 1]};
    CHECK(strata_provider_acquire(t.p, 1, hot, 3, v) == 0, "pinned");
    for (int j = 0; j < 3; j++) CHECK(view_ok(ref, 1, hot[j], &v[j]), "pinned expert %u bytes", hot[j]);
    strata_provider_release(t.p, 1, v, 3);
    uint8_t state[3];
    CHECK(strata_vram_acquire_ready(t.vram, 1, hot, 3, v, state) == 3, "pinned: READY");
    strata_provider_release(t.p, 1, v, 3);
    strata_provider_stats(t.p, &s);
    CHECK(atomic_load(&t.dev.copies) == copies && s.pin_hits == 6, "pinned stayed: %d new copies, %llu pin hits",
          atomic_load(&t.dev.copies) - copies, (unsigned long long)s.pin_hits);
    uint32_t four[4] = {others[0], others[1], others[2], others[3]};
    strata_log_set_sink(drop_line, NULL);
    CHECK(strata_provider_acquire(t.p, 1, four, 4, v) == STRATA_EARG, "more than the unpinned slots: refused");
    strata_log_set_sink(NULL, NULL);
    tier_close(&t);
    // a failed copy of a pinned expert fails the open, leaving nothing behind
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.dev.mu, NULL);
    pthread_cond_init(&t.dev.cv, NULL);
    t.dev.fail_at = 4;
    CHECK(strata_store_open(&t.store, f, lay, 2, &hc) == 0, "host store");
    strata_log_set_sink(drop_line, NULL);
    CHECK(strata_vram_open(&t.vram, (struct strata_vram_dev){&g_fd_iface, &t.dev}, strata_store_provider(t.store),
                           lay, 2, &vc) == STRATA_EIO && !t.vram, "a failed pinned copy fails the open");
    strata_log_set_sink(NULL, NULL);
    tier_close(&t);
    free(rank);
    case_result("vram: a pinned hot set is copied at open, hits and is never evicted", before);
}

// strata sim's two tiers (strata_sim_replay2) against the real ones: decode tokens (each layer's
// experts acquired in ascending order, as a pass does) through 4 VRAM slots over 8 host slots, LRU
// and LFU; the VRAM misses and the host misses (its reads from the file) are what the simulator says.
static void test_sim_two_tiers(struct strata_gguf_file *f, const struct strata_expert_layout *lay)
{
    const int before = g_failures;
    struct strata_trace tr = {.n_layers = lay->n_layers, .n_expert = lay->n_expert, .topk = 2, .n_tokens = 300};
    tr.ids = malloc(tr.n_tokens * tr.n_layers * 2 * sizeof *tr.ids);
    tr.chunk = malloc(tr.n_tokens * sizeof *tr.chunk);
    uint64_t x = 12345;
    for (uint64_t t = 0; t < tr.n_tokens; t++) {
        tr.chunk[t] = (uint32_t)t;
        for (uint32_t l = 0; l < tr.n_layers; l++) {
            int32_t *g = &tr.ids[(t * tr.n_layers + l) * 2];
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            g[0] = (int32_t)((x >> 33) % 12);  // a skewed few, so the policies differ
            g[1] = (int32_t)((g[0] + 1 + (x >> 45) % (tr.n_expert - 1)) % tr.n_expert);
            if (g[0] > g[1]) {
                const int32_t y = g[0];
                g[0] = g[1];
                g[1] = y;
            }
        }
    }
    for (int pol = 0; pol < 2; pol++) {
        struct tier t;
        CHECK(tier_open(&t, f, lay, 8, 4, pol == 0 ? STRATA_POLICY_LRU : STRATA_POLICY_LFU, 0) == 0, "open");
        struct strata_expert_view v[2];
        for (uint64_t k = 0; k < tr.n_tokens; k++)
            for (uint32_t l = 0; l < tr.n_layers; l++) {
                const uint32_t ids[2] = {(uint32_t)tr.ids[(k * tr.n_layers + l) * 2],
                                         (uint32_t)tr.ids[(k * tr.n_layers + l) * 2 + 1]};
                CHECK(strata_provider_acquire(t.p, l, ids, 2, v) == 0, "acquire");
                strata_provider_release(t.p, l, v, 2);
            }
        struct strata_experts_stats vs, hs;
        strata_provider_stats(t.p, &vs);
        strata_provider_stats(strata_store_provider(t.store), &hs);
        struct strata_sim_result sv, sh;
        const struct strata_sim_opts so = {0};
        CHECK(strata_sim_replay2(&tr, pol == 0 ? STRATA_SIM_LRU : STRATA_SIM_LFU, 4, 8, &so, &sv, &sh) == 0, "sim");
        CHECK(vs.misses == sv.misses && hs.misses == sh.misses && hs.hits == sh.hits && hs.misses > 0 && hs.hits > 0 &&
                  vs.hits > 0,
              "%s: VRAM misses %llu (sim %llu), host misses %llu hits %llu (sim %llu %llu)", pol ? "LFU" : "LRU",
              (unsigned long long)vs.misses, (unsigned long long)sv.misses, (unsigned long long)hs.misses,
              (unsigned long long)hs.hits, (unsigned long long)sh.misses, (unsigned long long)sh.hits);
        tier_close(&t);
    }
    free(tr.ids);
    free(tr.chunk);
    case_result("vram: strata sim's two tiers miss as the VRAM tier and the host store do", before);
}

int main(void)
{
    if (!mkdtemp(g_dir)) return 1;
    char path[256];
    snprintf(path, sizeof path, "%s/m.gguf", g_dir);
    struct strata_synth_opts o = {.arch = "qwen3moe", .preset = "tiny", .out_path = path, .seed = 5,
                                  .type = -1, .n_layer = 3, .n_expert = 32};
    if (strata_synth(&o)) return 1;
    struct strata_gguf_file *f;
    struct strata_expert_layout lay;
    if (strata_gguf_open(&f, path) || strata_expert_layout_init(&lay, f)) return 1;
    struct ref ref = {&lay, calloc((size_t)lay.n_layers * STRATA_EXPERT_PART_COUNT, sizeof(char *))};
    for (uint32_t l = 0; l < lay.n_layers; l++)
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
            const struct strata_gguf_tensor *t = lay.layers[l].tensor[p];
            char *b = malloc(t->n_bytes);
            if (!b || strata_gguf_read_tensor(f, t, 0, b, t->n_bytes)) return 1;
            ref.part[l * STRATA_EXPERT_PART_COUNT + p] = b;
        }
    test_basic(f, &lay, &ref);
    test_lfu(f, &lay);
    test_ready(f, &lay, &ref);
    test_pins(f, &lay, &ref);
    test_join(f, &lay, &ref);
    test_fault(f, &lay, &ref);
    test_threads(f, &lay, &ref);
    test_min(f, &lay);
    test_pinned(f, &lay, &ref);
    test_sim_two_tiers(f, &lay);
    for (uint32_t i = 0; i < lay.n_layers * STRATA_EXPERT_PART_COUNT; i++) free(ref.part[i]);
    free(ref.part);
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
    unlink(path);
    rmdir(g_dir);
    if (g_failures) {
        fprintf(stderr, "%d checks failed\n", g_failures);
        return 1;
    }
    return 0;
}
