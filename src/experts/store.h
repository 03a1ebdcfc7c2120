// The host expert store: the first expert provider (provider.h), a bounded cache of expert
// triplets in RAM in front of the GGUF.
//
// Every MoE layer owns the same number of slots; a slot holds one expert triplet (gate, up, down
// slices, each at its file offset's phase, layout.h) of its layer's size class. Misses are read
// through an I/O engine (io.h) into the least recently used free slot of the layer. A budget of
// "full" gives every layer n_expert slots and reads everything at open.
// docs/expert-store.md has the sizing rules, the locking and the memory bound.
#ifndef STRATA_EXPERTS_STORE_H
#define STRATA_EXPERTS_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/io.h"
#include "experts/layout.h"
#include "experts/provider.h"

struct strata_gguf_file;

// Which resident expert a miss replaces (strata sim's LFU and LRU, the same decisions exactly).
// LFU comes first so that a zeroed config gets it: on decode traces it missed 12% less than LRU
// in both the simulator and the engine (docs/expert-store.md, Policies).
// enum strata_cache_policy (lfu, lru) is in strata.h: the engine's parameters take it.

struct strata_experts_config {
    uint64_t cache_bytes;       // budget for expert slots; 0 = full residency
    bool no_classes;            // one uniform slot size (the largest triplet) for A/B runs
    enum strata_io_engine io;   // pread pool (buffered) or io_uring with O_DIRECT
    enum strata_cache_policy policy;
    int io_threads;             // pread threads / io_uring queue depth; 0: 4
    bool stats_layers;          // keep per-layer counters (always kept; this asks to report them)
    const char *trace_path;     // route trace output (written by the forward pass), or NULL
    struct strata_expert_pins pins;  // a pinned hot set, read at open (bounded caches only)
};

struct strata_store;

// Prepare the store for f as described by lay (both borrowed; they must outlive the store).
// cfg may be NULL (full residency, pread). STRATA_ENOMEM with a log line when the budget holds
// fewer than n_expert_used slots per layer (the minimum; the line gives the minimum MiB).
int strata_store_open(struct strata_store **out, struct strata_gguf_file *f, const struct strata_expert_layout *lay,
                      uint32_t n_expert_used, const struct strata_experts_config *cfg);
// Waits for reads still in flight (prefetches), then frees everything. No view may be held.
void strata_store_close(struct strata_store *st);
// The provider interface of the store; valid until strata_store_close.
struct strata_expert_provider strata_store_provider(struct strata_store *st);
// Bytes of expert slots allocated (what the budget bought).
uint64_t strata_store_resident_bytes(const struct strata_store *st);
// The one mapping that holds every slot (a VRAM tier page-locks it once for its copies).
void strata_store_slab(const struct strata_store *st, void **base, size_t *bytes);
const char *strata_cache_policy_name(enum strata_cache_policy p);

#endif
