// The expert provider: the one narrow interface through which a forward pass gets the weights of
// routed experts (docs/architecture.md, "Seam 2"). A table of functions plus an opaque context,
// as ggml-backend: the host store (store.h) is the first implementation; a VRAM tier stacks on
// it (its misses become acquires on the host store, its views point into device memory).
//
// Protocol, per MoE layer:
//   prefetch(ids)            a hint: start reading experts that will probably be needed soon.
//                            Never blocks, never evicts a pinned expert, may do nothing.
//   acquire(ids) -> views    pins the experts and returns their views (in the consumer's memory),
//                            blocking only on those not resident yet. n <= max_batch, ids distinct.
//   acquire_start(ids)       optional (NULL: use acquire): the same decisions as acquire (the
//     -> views, ready        same hits, victims, reads and order), but it returns without
//   acquire_next(ids)        waiting for reads: the views of experts already resident are valid
//     -> views, ready        at once (ready[i] = 1), so the caller computes them while the
//                            others are read; each acquire_next waits until one or more of the
//                            others has landed, writes their views, marks them ready and says
//                            how many are still to come, so the caller computes each as it
//                            lands. Until the last one the caller holds every expert of the
//                            request pinned, as after acquire; a failed acquire_next unpins the
//                            experts not ready but leaves the ready ones pinned (the caller may
//                            still be computing them): the caller releases those.
//   release(views)           unpins them; the views must not be used afterwards.
//   fetch(ids)               optional (NULL where every expert is resident): the caller's next
//                            acquire of this layer will be ids, so start their reads now, at
//                            demand priority, into slots that hold none of ids and are not
//                            pinned (a pass of more experts than max_batch reads its next group
//                            while it computes the current one). Never blocks; a read it could
//                            not start is done by the acquire. Counted as misses when acquired.
// Pinning is a reference count per slot: several sessions, or the sequences of one batch, may
// hold views of the same layer (even of the same expert) at once. One caller holds at most
// max_batch views of one layer at a time (acquire, use, release, then the next group); callers
// on other threads may then wait for each other's releases, but never deadlock.
//
// Every implementation is safe to call from several threads at once and documents its locking.
// Whatever the cache sizes, prefetch and I/O do, a view holds exactly the expert's bytes of the
// file, so outputs never depend on them. A failed read is an error of the acquire (STRATA_EIO,
// logged in the caller's thread), never a silently skipped expert.
#ifndef STRATA_EXPERTS_PROVIDER_H
#define STRATA_EXPERTS_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "experts/layout.h"

struct strata_expert_view {
    const void *part[STRATA_EXPERT_PART_COUNT];  // gate [F][E], up [F][E], down [E][F], in blocks
};

struct strata_experts_layer_stats {
    uint64_t hits, misses, evictions, bytes_read;
    uint64_t prefetched;        // experts a prefetch started reading
    uint64_t prefetch_used;     // of those, acquired before being evicted
    uint64_t fetched;           // misses whose reads a fetch started before their acquire
    double io_wait_s;           // wall time acquires of this layer spent blocked
};

struct strata_experts_stats {
    uint64_t hits, misses, evictions;   // per expert acquired: resident or on the way / read now
    uint64_t bytes_read;                // expert bytes read after open (misses and prefetches)
    uint64_t reads, retries;            // read requests issued, attempts repeated after a fault
    double io_wait_s;                   // wall time acquires spent blocked (all callers): on reads,
                                        // and on slots being filled or held by other callers
    uint64_t prefetched, prefetch_used; // experts prefetched; of those, acquired before eviction
    uint64_t prefetch_cancelled;        // prefetches given up before their read started (an
                                        // acquire needed the slot for something else)
    uint64_t joined;                    // acquires that found their expert being read and waited
    uint64_t fetched;                   // misses whose reads a fetch started before their acquire
    uint64_t preload_bytes;             // bytes read at open (full residency, or the pinned hot set)
    double preload_s;
    uint32_t pinned;                    // experts pinned per layer (--pin-from), never evicted
    uint64_t pin_hits;                  // hits on pinned experts (counted in hits too)
    uint32_t slots_per_layer;
    uint32_t n_classes;                 // distinct slot sizes in use (1 when uniform)
    bool full;                          // every expert resident
    uint64_t slot_bytes_total;          // memory of all slots
    uint64_t io_buffer_bytes;           // I/O buffers beside the slots (0: reads land in the slots)
    int io_depth;                       // reads in flight at most (io_uring depth or pread threads)
    bool io_direct;                     // reads bypass the page cache (O_DIRECT)
};

struct strata_provider_i {
    // 0 or negative (bad arguments). Reads started are counted in prefetched.
    int (*prefetch)(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n);
    // Views of ids[0..n) in the same order. 0, or negative (STRATA_EARG, STRATA_EIO; logged, and
    // nothing stays pinned).
    int (*acquire)(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n, struct strata_expert_view *views);
    // Optional, both or neither (protocol above). start: 0 or negative as acquire (nothing pinned
    // on failure); views[i] is valid where ready[i] is 1. next: the same request, views and ready
    // (nonzero: already handed out; the caller may mark them as it likes); how many are still not
    // ready (0: done), or negative (logged; only the ready ones stay pinned).
    int (*acquire_start)(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n, struct strata_expert_view *views,
                         uint8_t *ready);
    int (*acquire_next)(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n, struct strata_expert_view *views,
                        uint8_t *ready);
    // views[0..n) exactly as an acquire of this layer returned them (any subset, in any order).
    void (*release)(void *ctx, uint32_t moe_layer, const struct strata_expert_view *views, int n);
    void (*stats)(void *ctx, struct strata_experts_stats *st);
    // Counters of one MoE layer; zeroes for a layer out of range.
    void (*layer_stats)(void *ctx, uint32_t moe_layer, struct strata_experts_layer_stats *st);
    // Most experts of one layer one caller may hold at once (the slots per layer).
    int (*max_batch)(void *ctx);
    // Optional (NULL: not needed): start reading ids[0..n), the caller's next acquire of the
    // layer (protocol above). 0 or negative (bad arguments).
    int (*fetch)(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n);
};

struct strata_expert_provider {
    const struct strata_provider_i *iface;
    void *ctx;
};

static inline int strata_provider_prefetch(struct strata_expert_provider p, uint32_t moe_layer,
                                           const uint32_t *ids, int n)
{
    return p.iface->prefetch(p.ctx, moe_layer, ids, n);
}

static inline int strata_provider_acquire(struct strata_expert_provider p, uint32_t moe_layer,
                                          const uint32_t *ids, int n, struct strata_expert_view *views)
{
    return p.iface->acquire(p.ctx, moe_layer, ids, n, views);
}

static inline void strata_provider_release(struct strata_expert_provider p, uint32_t moe_layer,
                                           const struct strata_expert_view *views, int n)
{
    p.iface->release(p.ctx, moe_layer, views, n);
}

static inline void strata_provider_stats(struct strata_expert_provider p, struct strata_experts_stats *st)
{
    p.iface->stats(p.ctx, st);
}

static inline void strata_provider_layer_stats(struct strata_expert_provider p, uint32_t moe_layer,
                                               struct strata_experts_layer_stats *st)
{
    p.iface->layer_stats(p.ctx, moe_layer, st);
}

static inline bool strata_provider_can_fetch(struct strata_expert_provider p) { return p.iface->fetch != NULL; }

// acquire_start where the provider has it; elsewhere a plain acquire, every view ready.
static inline int strata_provider_acquire_start(struct strata_expert_provider p, uint32_t moe_layer,
                                                const uint32_t *ids, int n, struct strata_expert_view *views,
                                                uint8_t *ready)
{
    if (p.iface->acquire_start) return p.iface->acquire_start(p.ctx, moe_layer, ids, n, views, ready);
    int rc = p.iface->acquire(p.ctx, moe_layer, ids, n, views);
    for (int i = 0; i < n; i++) ready[i] = 1;
    return rc;
}

static inline int strata_provider_acquire_next(struct strata_expert_provider p, uint32_t moe_layer,
                                               const uint32_t *ids, int n, struct strata_expert_view *views,
                                               uint8_t *ready)
{
    return p.iface->acquire_next ? p.iface->acquire_next(p.ctx, moe_layer, ids, n, views, ready) : 0;
}

// acquire_next until every view is written. 0 or negative (as acquire_next).
static inline int strata_provider_acquire_finish(struct strata_expert_provider p, uint32_t moe_layer,
                                                 const uint32_t *ids, int n, struct strata_expert_view *views,
                                                 uint8_t *ready)
{
    int left;
    while ((left = strata_provider_acquire_next(p, moe_layer, ids, n, views, ready)) > 0) {}
    return left;
}

static inline int strata_provider_fetch(struct strata_expert_provider p, uint32_t moe_layer, const uint32_t *ids, int n)
{
    return p.iface->fetch ? p.iface->fetch(p.ctx, moe_layer, ids, n) : 0;
}

static inline int strata_provider_max_batch(struct strata_expert_provider p)
{
    return p.iface->max_batch(p.ctx);
}

#endif
