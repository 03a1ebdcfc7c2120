// The VRAM expert tier: a bounded cache of expert triplets in device memory in front of a host
// provider (the host store, itself in front of the GGUF), behind the expert provider interface.
//
// Slots are sized as the host store's (the same size classes and part offsets, layout.h), in one
// device allocation. A miss claims a free slot (empty first, then by the policy: LFU or LRU, as
// the store) and queues its fill; one copy thread takes queued fills of one layer in batches,
// acquires their host views from the host provider (blocking there on disk reads if the host
// cache misses too), queues the parts' copies on a dedicated stream, waits for them, releases the
// host views and publishes the slots. Views handed out are device pointers (the kernels read them
// through their slot tables). Pins, FILLING / READY states, all-or-nothing acquires, fetch and
// prefetch follow provider.h and the store exactly; docs/expert-store.md ("The VRAM tier").
//
// The device is a table of functions, so the tier runs without a GPU in tests (a fake device that
// copies with memcpy): alloc / free device memory, copy host -> device (asynchronous on the copy
// stream), wait for every queued copy, and bind (the copy thread's device) before the first copy.
#ifndef STRATA_EXPERTS_VRAM_H
#define STRATA_EXPERTS_VRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "experts/layout.h"
#include "experts/provider.h"
#include "strata.h"  // enum strata_cache_policy

struct strata_vram_dev_i {
    // bytes of device memory, NULL with one log line naming `what` when out of memory.
    void *(*alloc)(void *ctx, size_t bytes, const char *what);
    void (*free)(void *ctx, void *p);
    // Optional: called once on the copy thread before its first copy (CUDA: the thread's device).
    int (*bind)(void *ctx);
    // Queue a copy of host bytes into device memory on the copy stream (src stays valid until wait).
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes);
    // Until every queued copy has landed.
    int (*wait)(void *ctx);
};

struct strata_vram_dev {
    const struct strata_vram_dev_i *iface;
    void *ctx;
};

struct strata_vram_config {
    uint64_t budget;                 // bytes of VRAM slots (> 0; at least one token's experts per layer)
    bool no_classes;                 // one uniform slot size
    enum strata_cache_policy policy;
    int batch;                       // most experts one copy batch moves (0: 16; at most the host's max_batch)
    struct strata_expert_pins pins;  // a pinned hot set, copied in at open through the copy thread
};

// Copy-thread counters beyond struct strata_experts_stats.
struct strata_vram_extra {
    uint64_t copies;                 // experts copied (demand, fetch and prefetch)
    uint64_t batches;                // copy batches (one wait each)
    double copy_s;                   // wall time the copy thread waited for its copies to land
    double host_s;                   // wall time it waited for the host provider (reads from disk)
    uint64_t cpu_experts;            // misses computed on the CPU instead (strata_vram_note_cpu)
    uint64_t copy_bytes;             // bytes of the experts copied (copy_bytes / copy_s: the PCIe rate)
};

struct strata_vram;

// A tier over `host` (borrowed, it must outlive the tier) for the experts of lay. STRATA_ENOMEM
// with one line naming the minimum when the budget holds fewer than n_expert_used slots per layer,
// or when the device has no room for the slots. With cfg->pins, the pinned experts are copied in
// (by the copy thread, from the host provider) before it returns; a failed copy fails the open.
int strata_vram_open(struct strata_vram **out, struct strata_vram_dev dev, struct strata_expert_provider host,
                     const struct strata_expert_layout *lay, uint32_t n_expert_used,
                     const struct strata_vram_config *cfg);
// Waits for fills still queued (prefetches), then frees everything. No view may be held.
void strata_vram_close(struct strata_vram *v);
struct strata_expert_provider strata_vram_provider(struct strata_vram *v);
uint64_t strata_vram_slot_bytes(const struct strata_vram *v);   // device memory of the slots
void strata_vram_extra_stats(struct strata_vram *v, struct strata_vram_extra *out);

// Where an expert of a layer stands in the tier (strata_vram_acquire_ready).
enum { STRATA_VRAM_ABSENT, STRATA_VRAM_FILLING, STRATA_VRAM_READY };

// Pin those of ids[0..n) that are READY and give their views (views[i] for state[i] READY; the
// others' views untouched), counted as hits (or as fetched misses); never waits, never claims a
// slot or starts a copy. state[i] says where each one stands. Release the pinned ones as views of
// an acquire. Returns how many it pinned, or negative (bad arguments). For the caller that serves
// the others another way (a copy through acquire, or the CPU: strata_vram_note_cpu).
int strata_vram_acquire_ready(struct strata_vram *v, uint32_t moe_layer, const uint32_t *ids, int n,
                              struct strata_expert_view *views, uint8_t *state);
// Count ids[0..n) as misses of the layer served without VRAM (computed on the CPU from the host
// copy): misses, the policy's use counts, and cpu_experts.
void strata_vram_note_cpu(struct strata_vram *v, uint32_t moe_layer, const uint32_t *ids, int n);

#endif
