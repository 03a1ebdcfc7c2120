// The first expert-store entry points (experts.h) on top of the provider: each layer remembers
// the views of its last acquires, and releasing the layer releases them.
#include <stdlib.h>

#include "experts/experts.h"
#include "util/log.h"

struct strata_experts {
    struct strata_store *store;
    struct strata_expert_provider p;
    uint32_t n_layers;
    int max_batch;
    struct strata_expert_view *held;  // [n_layers][max_batch]
    int *n_held;                      // [n_layers]
};

int strata_experts_open(struct strata_experts **out, struct strata_gguf_file *f,
                        const struct strata_expert_layout *lay, uint32_t n_expert_used,
                        const struct strata_experts_config *cfg)
{
    *out = NULL;
    struct strata_experts *ex = calloc(1, sizeof *ex);
    if (!ex) return STRATA_ENOMEM;
    int rc = strata_store_open(&ex->store, f, lay, n_expert_used, cfg);
    if (rc) {
        free(ex);
        return rc;
    }
    ex->p = strata_store_provider(ex->store);
    ex->n_layers = lay->n_layers;
    ex->max_batch = strata_provider_max_batch(ex->p);
    ex->held = calloc((size_t)ex->n_layers * (size_t)(ex->max_batch ? ex->max_batch : 1), sizeof *ex->held);
    ex->n_held = calloc(ex->n_layers ? ex->n_layers : 1, sizeof *ex->n_held);
    if (!ex->held || !ex->n_held) {
        strata_experts_close(ex);
        return STRATA_ENOMEM;
    }
    *out = ex;
    return 0;
}

void strata_experts_close(struct strata_experts *ex)
{
    if (!ex) return;
    strata_store_close(ex->store);
    free(ex->held);
    free(ex->n_held);
    free(ex);
}

struct strata_expert_provider strata_experts_provider(struct strata_experts *ex) { return ex->p; }

int strata_experts_max_batch(const struct strata_experts *ex) { return ex->max_batch; }

int strata_experts_acquire(struct strata_experts *ex, uint32_t moe_layer, const uint32_t *ids, int n,
                           struct strata_expert_view *views)
{
    if (moe_layer < ex->n_layers && n > ex->max_batch - ex->n_held[moe_layer]) {
        strata_log_error("experts_acquire: layer %u / %d experts out of range (%u layers, %d slots, %d held)",
                         moe_layer, n, ex->n_layers, ex->max_batch, ex->n_held[moe_layer]);
        return STRATA_EARG;
    }
    int rc = strata_provider_acquire(ex->p, moe_layer, ids, n, views);
    if (rc) return rc;
    struct strata_expert_view *h = ex->held + (size_t)moe_layer * (size_t)ex->max_batch;
    for (int i = 0; i < n; i++) h[ex->n_held[moe_layer]++] = views[i];
    return 0;
}

void strata_experts_release(struct strata_experts *ex, uint32_t moe_layer)
{
    if (moe_layer >= ex->n_layers) return;
    strata_provider_release(ex->p, moe_layer, ex->held + (size_t)moe_layer * (size_t)ex->max_batch,
                            ex->n_held[moe_layer]);
    ex->n_held[moe_layer] = 0;
}

void strata_experts_get_stats(const struct strata_experts *ex, struct strata_experts_stats *st)
{
    strata_provider_stats(ex->p, st);
}

void strata_experts_get_layer_stats(const struct strata_experts *ex, uint32_t moe_layer,
                                    struct strata_experts_layer_stats *st)
{
    strata_provider_layer_stats(ex->p, moe_layer, st);
}

uint64_t strata_experts_resident_bytes(const struct strata_experts *ex)
{
    return strata_store_resident_bytes(ex->store);
}
