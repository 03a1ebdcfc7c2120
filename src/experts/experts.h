// The expert provider: the one narrow interface through which the forward pass gets the weights
// of routed experts. The forward pass asks for all experts one MoE layer needs at once (so an
// implementation can issue their reads together), uses the returned views, then releases the
// layer. Today's implementation keeps every expert resident; the bounded, streaming expert store
// replaces it behind this interface.
#ifndef STRATA_EXPERTS_H
#define STRATA_EXPERTS_H

#include <stdint.h>

#include "experts/layout.h"

struct gguf_file;

struct strata_expert_view {
    const void *part[STRATA_EXPERT_PART_COUNT];  // gate [F][E], up [F][E], down [E][F], in blocks
};

struct strata_experts_stats {
    uint64_t hits, misses, bytes_read;
};

struct strata_experts;

// Load (or prepare to stream) the experts of f as described by lay (borrowed; both must outlive
// the provider). 0 or negative.
int strata_experts_open(struct strata_experts **out, struct gguf_file *f,
                        const struct strata_expert_layout *lay);
void strata_experts_close(struct strata_experts *ex);
// Views of experts ids[0..n) of MoE layer index moe_layer (0..lay->n_layers), same order.
// Valid until strata_experts_release(ex, moe_layer). 0 or negative (I/O error, logged).
int strata_experts_acquire(struct strata_experts *ex, uint32_t moe_layer, const uint32_t *ids,
                           int n, struct strata_expert_view *views);
void strata_experts_release(struct strata_experts *ex, uint32_t moe_layer);
void strata_experts_get_stats(const struct strata_experts *ex, struct strata_experts_stats *st);
// Bytes of expert weights held in memory.
uint64_t strata_experts_resident_bytes(const struct strata_experts *ex);

#endif
