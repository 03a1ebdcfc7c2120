// The expert store's first entry points, kept until the forward pass uses the provider interface
// (provider.h, store.h): a store whose views stay pinned until the whole layer is released.
// New code opens a strata_store and calls its provider.
#ifndef STRATA_EXPERTS_H
#define STRATA_EXPERTS_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/layout.h"
#include "experts/provider.h"
#include "experts/store.h"

struct strata_gguf_file;
struct strata_experts;

// As strata_store_open.
int strata_experts_open(struct strata_experts **out, struct strata_gguf_file *f,
                        const struct strata_expert_layout *lay, uint32_t n_expert_used,
                        const struct strata_experts_config *cfg);
void strata_experts_close(struct strata_experts *ex);
// The provider of the store underneath (for code moving to the interface).
struct strata_expert_provider strata_experts_provider(struct strata_experts *ex);
int strata_experts_max_batch(const struct strata_experts *ex);
// As the provider's acquire; the views stay valid until strata_experts_release(ex, moe_layer).
// One caller at a time per layer.
int strata_experts_acquire(struct strata_experts *ex, uint32_t moe_layer, const uint32_t *ids,
                           int n, struct strata_expert_view *views);
void strata_experts_release(struct strata_experts *ex, uint32_t moe_layer);
void strata_experts_get_stats(const struct strata_experts *ex, struct strata_experts_stats *st);
void strata_experts_get_layer_stats(const struct strata_experts *ex, uint32_t moe_layer,
                                    struct strata_experts_layer_stats *st);
uint64_t strata_experts_resident_bytes(const struct strata_experts *ex);

#endif
