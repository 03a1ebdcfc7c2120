// The expert provider: the one narrow interface through which the forward pass gets the weights
// of routed experts. The forward pass asks for the experts one MoE layer needs (so their reads
// are issued together), uses the returned views, then releases the layer.
//
// The implementation (store.c) is a bounded expert cache: every MoE layer owns the same number
// of slots; a slot holds one expert triplet (gate | up | down slices packed in that order) of
// its layer's size class. Misses are read from the GGUF through an I/O engine (io.h) and the
// least recently used unpinned slot of the layer is replaced. A budget of "full" gives every
// layer n_expert slots and reads everything at open, which is the old fully resident provider.
// docs/expert-store.md has the sizing rules and the memory overhead.
#ifndef STRATA_EXPERTS_H
#define STRATA_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/layout.h"

struct gguf_file;

enum strata_io_engine { STRATA_IO_PREAD, STRATA_IO_URING, STRATA_IO_COUNT };

struct strata_experts_config {
    uint64_t cache_bytes;       // budget for expert slots; 0 = full residency
    bool no_classes;            // one uniform slot size (the largest triplet) for A/B runs
    enum strata_io_engine io;   // pread pool (buffered) or io_uring with O_DIRECT
    int io_threads;             // pread threads / io_uring queue depth; 0: 4
    bool stats_layers;          // keep per-layer counters (always kept; this asks to report them)
    const char *trace_path;     // route trace output (written by the forward pass), or NULL
};

struct strata_expert_view {
    const void *part[STRATA_EXPERT_PART_COUNT];  // gate [F][E], up [F][E], down [E][F], in blocks
};

struct strata_experts_layer_stats {
    uint64_t hits, misses, evictions, bytes_read;
};

struct strata_experts_stats {
    uint64_t hits, misses, evictions;   // per expert acquired (a chunk's duplicates count once)
    uint64_t bytes_read;                // expert bytes read for misses (not the preload)
    uint64_t reads, retries;            // read requests issued, attempts repeated after a fault
    double io_wait_s;                   // wall time acquire spent waiting for reads
    uint64_t preload_bytes;             // bytes read at open (full residency)
    double preload_s;
    uint32_t slots_per_layer;
    uint32_t n_classes;                 // distinct slot sizes in use (1 when uniform)
    bool full;                          // every expert resident
    uint64_t slot_bytes_total;          // memory of all slots
    uint64_t io_buffer_bytes;           // O_DIRECT bounce buffers
};

struct strata_experts;

// Prepare the store for f as described by lay (both borrowed; they must outlive the store).
// cfg may be NULL (full residency, pread). STRATA_ENOMEM with a log line when the budget holds
// fewer than n_expert_used slots per layer (the minimum; the line gives the minimum MiB).
int strata_experts_open(struct strata_experts **out, struct gguf_file *f,
                        const struct strata_expert_layout *lay, uint32_t n_expert_used,
                        const struct strata_experts_config *cfg);
void strata_experts_close(struct strata_experts *ex);
// Most experts of one layer that can be acquired at once (the slots per layer). A chunk that
// needs more processes them in groups of this size.
int strata_experts_max_batch(const struct strata_experts *ex);
// Views of experts ids[0..n) of MoE layer moe_layer, same order; n <= max_batch, ids distinct.
// Valid until strata_experts_release(ex, moe_layer). 0 or negative (I/O error, logged; the
// failed experts are not cached, so a later call reads them again).
int strata_experts_acquire(struct strata_experts *ex, uint32_t moe_layer, const uint32_t *ids,
                           int n, struct strata_expert_view *views);
void strata_experts_release(struct strata_experts *ex, uint32_t moe_layer);
void strata_experts_get_stats(const struct strata_experts *ex, struct strata_experts_stats *st);
// Counters of one MoE layer; zeroes for a layer out of range.
void strata_experts_get_layer_stats(const struct strata_experts *ex, uint32_t moe_layer,
                                    struct strata_experts_layer_stats *st);
// Bytes of expert slots allocated (what the budget bought).
uint64_t strata_experts_resident_bytes(const struct strata_experts *ex);

const char *strata_io_engine_name(enum strata_io_engine e);

#endif
