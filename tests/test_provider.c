// The host store through the expert provider interface, from several threads at once: threads
// acquire, check and release random groups of experts (overlapping, so the same expert is often
// wanted by two threads while its read is in flight) and send prefetch hints, on a cache far
// smaller than the experts, for both I/O engines. Every view must hold exactly the file's bytes
// while it is held, nothing may deadlock, and the counters must add up. Also: pin counts (a slot
// held by two callers survives one release), prefetch then acquire (counted as used, bytes
// right), prefetch never evicting a pinned expert, and a lasting read fault under concurrency
// failing cleanly in every thread that needs the expert; acquires in steps (acquire_start, then
// acquire_next as the experts land) among the threads, and alone against acquire's decisions. Built with
// TSAN=1 this runs under ThreadSanitizer.
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "experts/layout.h"
#include "experts/lookahead.h"
#include "experts/provider.h"
#include "experts/store.h"
#include "gguf/gguf.h"
#include "tools/synth.h"
#include "util/log.h"

#include "check.h"

#define N_THREADS 4
#define N_ITERS 300

static void drop_line(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

// Expected errors are not printed. Set only while no other thread logs.
static void quiet(bool on) { strata_log_set_sink(on ? drop_line : NULL, NULL); }

static char g_dir[] = "/tmp/strata-test-provider-XXXXXX";

struct ref {                       // the file's expert bytes, read once single-threaded
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
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return (uint32_t)(*x >> 11);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    const struct strata_expert_layout *lay = w->ref->lay;
    const int max = strata_provider_max_batch(w->p);
    for (int it = 0; it < N_ITERS; it++) {
        const uint32_t l = next_rand(&w->seed) % lay->n_layers;
        // 1..max distinct ids, skewed to low ids so threads collide on the same experts
        uint32_t ids[64];
        int n = 1 + (int)(next_rand(&w->seed) % (uint32_t)max);
        int k = 0;
        while (k < n) {
            const uint32_t e = next_rand(&w->seed) % (lay->n_expert / 2 + next_rand(&w->seed) % (lay->n_expert / 2));
            bool dup = false;
            for (int j = 0; j < k; j++) dup |= ids[j] == e;
            if (!dup) ids[k++] = e;
        }
        if (it % 3 == 0) {
            uint32_t hint[4];
            for (int j = 0; j < 4; j++) hint[j] = next_rand(&w->seed) % lay->n_expert;
            if (strata_provider_prefetch(w->p, (l + 1) % lay->n_layers, hint, 4)) atomic_fetch_add(w->bad, 1);
        }
        struct strata_expert_view v[64];
        if (it % 2) {  // in two steps: the ready views at once, the others after finish
            uint8_t ready[64];
            if (strata_provider_acquire_start(w->p, l, ids, n, v, ready)) {
                atomic_fetch_add(w->bad, 1);
                continue;
            }
            // each expert as it lands: views valid once marked, the count going down to 0
            int left = n, now;
            for (;;) {
                now = 0;
                for (int j = 0; j < n; j++)
                    if (ready[j]) {
                        now++;
                        if (!view_ok(w->ref, l, ids[j], &v[j])) atomic_fetch_add(w->bad, 1);
                    }
                if (n - now > left || (n - now == left && left != n)) atomic_fetch_add(w->bad, 1);
                left = n - now;
                if (left == 0) break;
                const int r = strata_provider_acquire_next(w->p, l, ids, n, v, ready);
                if (r < 0 || r >= left) {
                    atomic_fetch_add(w->bad, 1);
                    break;
                }
            }
            if (left) continue;
        } else if (strata_provider_acquire(w->p, l, ids, n, v)) {
            atomic_fetch_add(w->bad, 1);
            continue;
        }
        for (int j = 0; j < n; j++)
            if (!view_ok(w->ref, l, ids[j], &v[j])) atomic_fetch_add(w->bad, 1);
        if (it % 7 == 0) usleep(100);  // hold a while, so others wait for free slots
        for (int j = 0; j < n; j++)
            if (!view_ok(w->ref, l, ids[j], &v[j])) atomic_fetch_add(w->bad, 1);
        strata_provider_release(w->p, l, v, n);
        w->acquired += (uint64_t)n;
    }
    return NULL;
}

static void test_threads(const char *path, struct strata_gguf_file *f, const struct strata_expert_layout *lay,
                         const struct ref *ref, enum strata_io_engine io, int depth)
{
    const int before = g_failures;
    struct strata_experts_config cfg = {.cache_bytes = 6 * lay->layers[0].slot_bytes * lay->n_layers, .io = io,
                                        .io_threads = depth};
    struct strata_store *st;
    CHECK(strata_store_open(&st, f, lay, 2, &cfg) == 0, "open %s", path);
    struct strata_expert_provider p = strata_store_provider(st);
    CHECK(strata_provider_max_batch(p) == 6, "6 slots per layer, got %d", strata_provider_max_batch(p));
    atomic_int bad = 0;
    struct worker w[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (struct worker){.p = p, .ref = ref, .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1), .bad = &bad};
        CHECK(pthread_create(&w[i].th, NULL, work, &w[i]) == 0, "thread");
    }
    uint64_t acquired = 0;
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(w[i].th, NULL);
        acquired += w[i].acquired;
    }
    CHECK(atomic_load(&bad) == 0, "%d bad views or failed calls", atomic_load(&bad));
    struct strata_experts_stats s;
    strata_provider_stats(p, &s);
    CHECK(s.hits + s.misses == acquired, "hits %llu + misses %llu != %llu acquired", (unsigned long long)s.hits,
          (unsigned long long)s.misses, (unsigned long long)acquired);
    CHECK(s.prefetch_used <= s.prefetched && s.misses > 0 && s.hits > 0, "counters");
    printf("    %s depth %d: %llu acquired, %llu misses, %llu prefetched (%llu used), %llu joined a read in flight\n",
           strata_io_engine_name(io), depth, (unsigned long long)acquired, (unsigned long long)s.misses,
           (unsigned long long)s.prefetched, (unsigned long long)s.prefetch_used, (unsigned long long)s.joined);
    strata_store_close(st);
    char name[64];
    snprintf(name, sizeof name, "%d threads, %s", N_THREADS, strata_io_engine_name(io));
    case_result(name, before);
}

// Pin counts and prefetch, single-threaded and exact.
static void test_pins_and_prefetch(struct strata_gguf_file *f, const struct strata_expert_layout *lay,
                                   const struct ref *ref, enum strata_io_engine io)
{
    const int before = g_failures;
    struct strata_experts_config cfg = {.cache_bytes = 3 * lay->layers[0].slot_bytes * lay->n_layers, .io = io};
    struct strata_store *st;
    CHECK(strata_store_open(&st, f, lay, 2, &cfg) == 0, "open");
    struct strata_expert_provider p = strata_store_provider(st);
    struct strata_expert_view a[3], b[3], c[3];
    const uint32_t x[2] = {1, 2}, y[1] = {2}, z[3] = {3, 4, 5};
    CHECK(strata_provider_acquire(p, 0, x, 2, a) == 0, "acquire {1,2}");
    CHECK(strata_provider_acquire(p, 0, y, 1, b) == 0, "acquire {2} again (a second holder)");
    CHECK(b[0].part[0] == a[1].part[0], "the same slot");
    strata_provider_release(p, 0, a, 2);
    // 2 is still pinned by b: a prefetch of three experts into 3 slots may only use the other two.
    CHECK(strata_provider_prefetch(p, 0, z, 3) == 0, "prefetch");
    CHECK(view_ok(ref, 0, 2, &b[0]), "a pinned expert is never evicted by a prefetch");
    struct strata_experts_layer_stats ls;
    strata_provider_layer_stats(p, 0, &ls);
    CHECK(ls.prefetched == 2, "prefetched %llu, expected 2 (one slot pinned)", (unsigned long long)ls.prefetched);
    strata_provider_release(p, 0, b, 1);
    const uint32_t z2[2] = {3, 4};
    CHECK(strata_provider_acquire(p, 0, z2, 2, c) == 0, "acquire the prefetched");
    CHECK(view_ok(ref, 0, 3, &c[0]) && view_ok(ref, 0, 4, &c[1]), "prefetched bytes");
    strata_provider_layer_stats(p, 0, &ls);
    CHECK(ls.prefetch_used == 2 && ls.hits == 3 && ls.misses == 2, "used %llu hits %llu misses %llu",
          (unsigned long long)ls.prefetch_used, (unsigned long long)ls.hits, (unsigned long long)ls.misses);
    strata_provider_release(p, 0, c, 2);
    // A fetch (the caller's next acquire) while {3} is pinned, the slots holding {2, 3, 4}: of
    // {4, 6, 7}, 4 is resident and not pinned; the misses may only replace 2 (neither pinned nor
    // wanted), so 6 is read now and 7 by the acquire; both count as misses, 4 as a hit.
    struct strata_expert_view d[1], e3[3];
    const uint32_t three[1] = {3}, nxt[3] = {4, 6, 7};
    CHECK(strata_provider_acquire(p, 0, three, 1, d) == 0, "acquire {3}");
    CHECK(strata_provider_can_fetch(p) && strata_provider_fetch(p, 0, nxt, 3) == 0, "fetch");
    CHECK(view_ok(ref, 0, 3, &d[0]), "a pinned expert is never replaced by a fetch");
    strata_provider_release(p, 0, d, 1);
    struct strata_experts_layer_stats l0;
    strata_provider_layer_stats(p, 0, &l0);
    CHECK(strata_provider_acquire(p, 0, nxt, 3, e3) == 0, "acquire the fetched");
    for (int j = 0; j < 3; j++) CHECK(view_ok(ref, 0, nxt[j], &e3[j]), "fetched bytes of %u", nxt[j]);
    strata_provider_layer_stats(p, 0, &ls);
    CHECK(ls.hits - l0.hits == 1 && ls.misses - l0.misses == 2 && ls.fetched - l0.fetched == 1,
          "after fetch: hits +%llu misses +%llu fetched +%llu", (unsigned long long)(ls.hits - l0.hits),
          (unsigned long long)(ls.misses - l0.misses), (unsigned long long)(ls.fetched - l0.fetched));
    strata_provider_release(p, 0, e3, 3);
    // Out of range requests are refused.
    quiet(true);
    const uint32_t four[4] = {0, 1, 2, 3}, big[1] = {1000};
    CHECK(strata_provider_acquire(p, 0, four, 4, c) == STRATA_EARG, "more than max_batch");
    CHECK(strata_provider_acquire(p, 0, big, 1, c) == STRATA_EARG, "expert out of range");
    CHECK(strata_provider_prefetch(p, lay->n_layers, big, 1) == STRATA_EARG, "layer out of range");
    quiet(false);
    strata_store_close(st);
    char name[64];
    snprintf(name, sizeof name, "pins and prefetch, %s", strata_io_engine_name(io));
    case_result(name, before);
}

// Wrong guesses give their slots back: prefetch three experts into a layer of three slots, then
// acquire three others at once. Prefetches whose reads have not started are cancelled, the rest
// waited for; the acquire's bytes are right either way. One pread thread serves one hint read at a
// time, so over a few rounds some prefetches are still queued when the acquire comes.
static void test_cancel(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref)
{
    const int before = g_failures;
    struct strata_experts_config cfg = {.cache_bytes = 3 * lay->layers[0].slot_bytes * lay->n_layers,
                                        .io = STRATA_IO_PREAD, .io_threads = 1};
    struct strata_store *st;
    CHECK(strata_store_open(&st, f, lay, 2, &cfg) == 0, "open");
    struct strata_expert_provider p = strata_store_provider(st);
    struct strata_expert_view v[3];
    for (uint32_t round = 0; round < 8; round++) {
        const uint32_t guess[3] = {round * 3 % 30, round * 3 % 30 + 1, round * 3 % 30 + 2};
        const uint32_t want[3] = {30 - round, 31, 20 + round % 4};
        CHECK(strata_provider_prefetch(p, 1, guess, 3) == 0, "prefetch");
        CHECK(strata_provider_acquire(p, 1, want, 3, v) == 0, "acquire");
        for (int j = 0; j < 3; j++) CHECK(view_ok(ref, 1, want[j], &v[j]), "bytes of %u", want[j]);
        strata_provider_release(p, 1, v, 3);
    }
    struct strata_experts_stats s;
    strata_provider_stats(p, &s);
    struct strata_experts_layer_stats ls;
    strata_provider_layer_stats(p, 1, &ls);
    printf("    %llu prefetches read, %llu cancelled before their read\n", (unsigned long long)ls.prefetched,
           (unsigned long long)s.prefetch_cancelled);
    CHECK(s.prefetch_cancelled > 0, "some prefetch was cancelled");
    CHECK(ls.prefetched + s.prefetch_cancelled <= 24, "counted once");
    strata_store_close(st);
    case_result("wrong guesses cancelled", before);
}

// acquire_start / next make acquire's decisions: a store served in steps and one served by
// acquire end every step of the same sequence with the same counters, the ready views are the
// hits and hold their bytes at once, and each acquire_next marks one or more more. A lasting
// fault: acquire_next fails, the ready view stays pinned until released, and nothing else does
// (a later acquire of every slot gets through).
struct slots_worker {
    pthread_t th;
    struct strata_expert_provider p;
    uint32_t ids[4];
    int rc;
};

static void *slots_work(void *arg)
{
    struct slots_worker *w = arg;
    struct strata_expert_view v[4];
    w->rc = strata_provider_acquire(w->p, 0, w->ids, 4, v);
    if (w->rc == 0) strata_provider_release(w->p, 0, v, 4);
    return NULL;
}

static void test_split(struct strata_gguf_file *f, const struct strata_expert_layout *lay, const struct ref *ref,
                       enum strata_io_engine io)
{
    const int before = g_failures;
    struct strata_experts_config cfg = {.cache_bytes = 4 * lay->layers[0].slot_bytes * lay->n_layers, .io = io,
                                        .policy = STRATA_POLICY_LRU};
    struct strata_store *one = NULL, *two = NULL;
    CHECK(strata_store_open(&one, f, lay, 2, &cfg) == 0 && strata_store_open(&two, f, lay, 2, &cfg) == 0, "open");
    if (!one || !two) {
        strata_store_close(one);
        return;
    }
    struct strata_expert_provider p1 = strata_store_provider(one), p2 = strata_store_provider(two);
    const uint32_t seq[6][4] = {{1, 2}, {2, 3}, {1, 4}, {5, 6, 2}, {7, 1, 3, 8}, {8, 9}};
    const int len[6] = {2, 2, 2, 3, 4, 2};
    for (int i = 0; i < 6; i++) {
        struct strata_expert_view a[4], b[4];
        uint8_t ready[4];
        struct strata_experts_layer_stats s1, s2, t1;
        strata_provider_layer_stats(p1, 0, &t1);
        CHECK(strata_provider_acquire(p1, 0, seq[i], len[i], a) == 0, "acquire step %d", i);
        CHECK(strata_provider_acquire_start(p2, 0, seq[i], len[i], b, ready) == 0, "start step %d", i);
        strata_provider_layer_stats(p1, 0, &s1);
        int n_ready = 0;
        for (int j = 0; j < len[i]; j++) {
            n_ready += ready[j];
            if (ready[j]) CHECK(view_ok(ref, 0, seq[i][j], &b[j]), "step %d: ready view of %u", i, seq[i][j]);
        }
        CHECK((uint64_t)n_ready == s1.hits - t1.hits, "step %d: %d ready, %llu hits", i, n_ready,
              (unsigned long long)(s1.hits - t1.hits));
        for (int left = len[i] - n_ready, r; left > 0; left = r) {
            r = strata_provider_acquire_next(p2, 0, seq[i], len[i], b, ready);
            CHECK(r >= 0 && r < left, "step %d: acquire_next %d with %d to come", i, r, left);
            if (r < 0 || r >= left) break;
        }
        for (int j = 0; j < len[i]; j++)
            CHECK(view_ok(ref, 0, seq[i][j], &b[j]) && view_ok(ref, 0, seq[i][j], &a[j]), "step %d: bytes", i);
        strata_provider_layer_stats(p2, 0, &s2);
        CHECK(s1.hits == s2.hits && s1.misses == s2.misses && s1.evictions == s2.evictions,
              "step %d: acquire %llu/%llu/%llu, in two steps %llu/%llu/%llu (hits/misses/evictions)", i,
              (unsigned long long)s1.hits, (unsigned long long)s1.misses, (unsigned long long)s1.evictions,
              (unsigned long long)s2.hits, (unsigned long long)s2.misses, (unsigned long long)s2.evictions);
        strata_provider_release(p1, 0, a, len[i]);
        strata_provider_release(p2, 0, b, len[i]);
    }
    strata_store_close(one);
    strata_store_close(two);

    // Expert 1 read (attempts 1-3), every later read fails.
    setenv("STRATA_IO_FAULT", "4:eio:1000000", 1);
    CHECK(strata_store_open(&one, f, lay, 2, &cfg) == 0, "open");
    p1 = strata_store_provider(one);
    struct strata_expert_view v[4];
    uint8_t ready[4];
    const uint32_t first[1] = {1}, pair[2] = {1, 5};
    CHECK(strata_provider_acquire(p1, 0, first, 1, v) == 0, "acquire {1}");
    strata_provider_release(p1, 0, v, 1);
    quiet(true);
    CHECK(strata_provider_acquire_start(p1, 0, pair, 2, v, ready) == 0 && ready[0] && !ready[1], "start {1, 5}");
    CHECK(view_ok(ref, 0, 1, &v[0]), "the ready view");
    CHECK(strata_provider_acquire_next(p1, 0, pair, 2, v, ready) == STRATA_EIO, "acquire_next fails");
    CHECK(view_ok(ref, 0, 1, &v[0]), "the ready view is still pinned");
    strata_provider_release(p1, 0, v, 1);
    // All four slots for four other experts: waits forever if a slot were still pinned.
    struct slots_worker w = {.p = p1, .ids = {10, 11, 12, 13}};
    CHECK(pthread_create(&w.th, NULL, slots_work, &w) == 0, "thread");
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 20;
    if (pthread_timedjoin_np(w.th, NULL, &until) != 0) {
        fprintf(stderr, "FAIL: a slot stayed pinned after a failed finish (the acquire of every slot hangs)\n");
        exit(1);
    }
    CHECK(w.rc == STRATA_EIO, "every slot free again: the acquire ran (and its reads failed), got %d", w.rc);
    quiet(false);
    strata_store_close(one);

    // Two misses and three good reads among their six (reads 4-6; every later one fails). Which
    // parts those are is the I/O's completion order (io_uring's reaper, or the pread threads'
    // race), not the submission's: expert 5 read right, or 6, or neither. acquire_next fails once
    // every read is in, an expert whose parts all landed is ready with its bytes and stays
    // cached, and a failed one is never ready.
    setenv("STRATA_IO_FAULT", "7:eio:1000000", 1);
    CHECK(strata_store_open(&one, f, lay, 2, &cfg) == 0, "open");
    p1 = strata_store_provider(one);
    const uint32_t three[3] = {1, 5, 6};
    CHECK(strata_provider_acquire(p1, 0, first, 1, v) == 0, "acquire {1}");
    strata_provider_release(p1, 0, v, 1);
    quiet(true);
    CHECK(strata_provider_acquire_start(p1, 0, three, 3, v, ready) == 0 && ready[0] && !ready[1] && !ready[2],
          "start {1, 5, 6}");
    int r;
    while ((r = strata_provider_acquire_next(p1, 0, three, 3, v, ready)) > 0) {}
    CHECK(r == STRATA_EIO && !(ready[1] && ready[2]), "acquire_next ends in EIO with a miss failed, got %d", r);
    quiet(false);
    uint32_t good = 0;
    for (int j = 0; j < 3; j++)
        if (ready[j]) {
            CHECK(view_ok(ref, 0, three[j], &v[j]), "ready view of %u", three[j]);
            strata_provider_release(p1, 0, &v[j], 1);
            if (j > 0) good = three[j];
        }
    if (good) {  // read right: a hit now, no read (every read would fail)
        struct strata_experts_layer_stats ls0, ls1;
        strata_provider_layer_stats(p1, 0, &ls0);
        const int rc = strata_provider_acquire(p1, 0, &good, 1, v);
        CHECK(rc == 0 && view_ok(ref, 0, good, &v[0]), "expert %u cached", good);
        strata_provider_layer_stats(p1, 0, &ls1);
        CHECK(ls1.hits == ls0.hits + 1, "a hit");
        if (rc == 0) strata_provider_release(p1, 0, v, 1);
    }
    strata_store_close(one);
    unsetenv("STRATA_IO_FAULT");
    char name[64];
    snprintf(name, sizeof name, "acquire in steps, %s", strata_io_engine_name(io));
    case_result(name, before);
}

struct fault_worker {
    pthread_t th;
    struct strata_expert_provider p;
    bool stepped;                  // acquire_start / acquire_next instead of acquire
    int rc;
};

static void *fault_work(void *arg)
{
    struct fault_worker *w = arg;
    const uint32_t ids[2] = {7, 8};
    struct strata_expert_view v[2];
    if (w->stepped) {  // joins the others' reads or reads itself, and sees them fail as they land
        uint8_t ready[2];
        w->rc = strata_provider_acquire_start(w->p, 1, ids, 2, v, ready);
        while (w->rc == 0 && !(ready[0] && ready[1])) w->rc = strata_provider_acquire_next(w->p, 1, ids, 2, v, ready) < 0
                                                              ? STRATA_EIO : 0;
        if (w->rc == 0) strata_provider_release(w->p, 1, v, 2);
        return NULL;
    }
    w->rc = strata_provider_acquire(w->p, 1, ids, 2, v);
    if (w->rc == 0) strata_provider_release(w->p, 1, v, 2);
    return NULL;
}

// A lasting fault: every thread wanting the experts gets STRATA_EIO, none gets a view.
static void test_fault_threads(struct strata_gguf_file *f, const struct strata_expert_layout *lay, enum strata_io_engine io)
{
    const int before = g_failures;
    setenv("STRATA_IO_FAULT", "1:eio:1000000", 1);
    struct strata_experts_config cfg = {.cache_bytes = 4 * lay->layers[0].slot_bytes * lay->n_layers, .io = io};
    struct strata_store *st;
    CHECK(strata_store_open(&st, f, lay, 2, &cfg) == 0, "open");
    struct fault_worker w[N_THREADS];
    quiet(true);
    for (int i = 0; i < N_THREADS; i++) {
        w[i] = (struct fault_worker){.p = strata_store_provider(st), .stepped = i % 2 == 1};
        pthread_create(&w[i].th, NULL, fault_work, &w[i]);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(w[i].th, NULL);
        CHECK(w[i].rc == STRATA_EIO, "thread %d: %d", i, w[i].rc);
    }
    quiet(false);
    strata_store_close(st);
    unsetenv("STRATA_IO_FAULT");
    char name[64];
    snprintf(name, sizeof name, "lasting fault in %d threads, %s", N_THREADS, strata_io_engine_name(io));
    case_result(name, before);
}

// A provider that only records prefetch calls, for the lookahead.
struct fake {
    uint32_t layer, ids[64];
    int n, calls, max_batch;
};
static int fake_prefetch(void *ctx, uint32_t l, const uint32_t *ids, int n)
{
    struct fake *f = ctx;
    f->layer = l;
    f->n = n;
    memcpy(f->ids, ids, (size_t)n * sizeof *ids);
    f->calls++;
    return 0;
}
static int fake_max_batch(void *ctx) { return ((struct fake *)ctx)->max_batch; }
static const struct strata_provider_i g_fake_iface = {.prefetch = fake_prefetch, .max_batch = fake_max_batch};

// The lookahead's ranking, chunk union, k_prefetch cut, max_batch cut and scoring.
static void test_lookahead(void)
{
    const int before = g_failures;
    struct fake f = {.max_batch = 3};
    struct strata_lookahead *la;
    CHECK(strata_lookahead_open(&la, (struct strata_expert_provider){&g_fake_iface, &f}, 2, 8, 2, 2) == 0, "open");
    // one token: top-2 of the logits are 5 then 2 (softmax ranks as the logits)
    float one[8] = {0.1f, 0.2f, 3.0f, 0.0f, -1.0f, 4.0f, 0.3f, 0.2f};
    CHECK(strata_lookahead_predict(la, 1, one, 1, STRATA_LOOKAHEAD_SOFTMAX, NULL) == 0, "predict");
    CHECK(f.calls == 1 && f.layer == 1 && f.n == 2 && f.ids[0] == 5 && f.ids[1] == 2, "decode guess %d: %u %u", f.n,
          f.ids[0], f.ids[1]);
    const uint32_t used[2] = {2, 7};
    strata_lookahead_observe(la, 1, used, 2);
    struct strata_lookahead_stats st;
    strata_lookahead_get_stats(la, 1, &st);
    CHECK(st.chunks == 1 && st.used == 2 && st.correct == 1 && st.predicted == 2, "scored: %llu of %llu",
          (unsigned long long)st.correct, (unsigned long long)st.used);
    CHECK(st.rank_predicted[0] == 1 && st.rank_correct[0] == 0 && st.rank_correct[1] == 1, "by rank");
    // three tokens: the union ordered by how many tokens chose an expert (6 and 1 by two, each a
    // token's first choice: lower id first), then 4 and 7 (one token's second choice), cut at 3
    float three[3][8] = {{0, 0, 0, 0, 0, 0, 5, 4}, {0, 3, 0, 0, 0, 0, 5, 0}, {0, 3, 0, 0, 2, 0, 1, 0}};
    CHECK(strata_lookahead_predict(la, 0, &three[0][0], 3, STRATA_LOOKAHEAD_SOFTMAX, NULL) == 0, "predict chunk");
    CHECK(f.n == 3 && f.ids[0] == 1 && f.ids[1] == 6 && f.ids[2] == 4, "chunk guess %d: %u %u %u", f.n, f.ids[0],
          f.ids[1], f.ids[2]);
    // a selection bias moves an expert into the top-k (sigmoid gating, as glm)
    const float bias[8] = {0, 0, 0, 0, 0, 0, 0, 10.0f};
    float b[8] = {1, 2, 3, 4, 5, 6, 7, -3};
    CHECK(strata_lookahead_predict(la, 0, b, 1, STRATA_LOOKAHEAD_SIGMOID, bias) == 0 && f.ids[0] == 7 && f.ids[1] == 6,
          "bias: %u %u", f.ids[0], f.ids[1]);
    strata_lookahead_close(la);
    // k_prefetch 1: only each token's first guess is prefetched, both are scored
    CHECK(strata_lookahead_open(&la, (struct strata_expert_provider){&g_fake_iface, &f}, 2, 8, 2, 1) == 0, "open");
    float c[8] = {0.1f, 0.2f, 3.0f, 0.0f, -1.0f, 4.0f, 0.3f, 0.2f};
    CHECK(strata_lookahead_predict(la, 1, c, 1, STRATA_LOOKAHEAD_SOFTMAX, NULL) == 0 && f.n == 1 && f.ids[0] == 5,
          "k_prefetch 1: %d", f.n);
    strata_lookahead_get_stats(la, 1, &st);
    CHECK(st.predicted == 2 && st.prefetch_asked == 1, "scored 2, asked 1");
    strata_lookahead_close(la);
    case_result("lookahead", before);
}

int main(void)
{
    if (!mkdtemp(g_dir)) return 1;
    test_lookahead();
    char path[256];
    snprintf(path, sizeof path, "%s/m.gguf", g_dir);
    struct strata_synth_opts o = {.arch = "qwen3moe", .preset = "tiny", .out_path = path, .seed = 11,
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
    test_cancel(f, &lay, &ref);
    for (int io = 0; io < STRATA_IO_COUNT; io++) {
        test_pins_and_prefetch(f, &lay, &ref, (enum strata_io_engine)io);
        test_split(f, &lay, &ref, (enum strata_io_engine)io);
        test_threads(path, f, &lay, &ref, (enum strata_io_engine)io, io == STRATA_IO_URING ? 8 : 3);
        test_fault_threads(f, &lay, (enum strata_io_engine)io);
    }
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
    printf("test_provider: all checks passed\n");
    return 0;
}
