// Fully resident expert provider: every MoE layer's stacked gate/up/down tensors are read into
// memory at open; a view is a pointer into them.
#include <stdlib.h>
#include <string.h>

#include "experts/experts.h"
#include "gguf/gguf.h"
#include "util/log.h"

struct strata_experts {
    const struct strata_expert_layout *lay;
    void **data;               // [n_layers * 3] stacked tensor bytes
    uint64_t resident_bytes;
    struct strata_experts_stats stats;
};

int strata_experts_open(struct strata_experts **out, struct gguf_file *f,
                        const struct strata_expert_layout *lay)
{
    *out = NULL;
    struct strata_experts *ex = calloc(1, sizeof *ex);
    if (!ex) return STRATA_ENOMEM;
    ex->lay = lay;
    ex->data = calloc((size_t)lay->n_layers * STRATA_EXPERT_PART_COUNT + 1, sizeof *ex->data);
    if (!ex->data) {
        free(ex);
        return STRATA_ENOMEM;
    }
    for (uint32_t l = 0; l < lay->n_layers; l++) {
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
            const struct gguf_tensor *t = lay->layers[l].tensor[p];
            void *buf = NULL;
            if (posix_memalign(&buf, 64, t->n_bytes ? t->n_bytes : 64)) {
                strata_log_error("experts_open: out of memory for '%s' (%llu bytes)", t->name,
                                 (unsigned long long)t->n_bytes);
                strata_experts_close(ex);
                return STRATA_ENOMEM;
            }
            ex->data[l * STRATA_EXPERT_PART_COUNT + p] = buf;
            int rc = gguf_read_tensor(f, t, 0, buf, t->n_bytes);
            if (rc) {
                strata_experts_close(ex);
                return rc;
            }
            ex->resident_bytes += t->n_bytes;
        }
    }
    *out = ex;
    return 0;
}

void strata_experts_close(struct strata_experts *ex)
{
    if (!ex) return;
    for (uint32_t i = 0; i < ex->lay->n_layers * STRATA_EXPERT_PART_COUNT; i++) free(ex->data[i]);
    free(ex->data);
    free(ex);
}

int strata_experts_acquire(struct strata_experts *ex, uint32_t moe_layer, const uint32_t *ids,
                           int n, struct strata_expert_view *views)
{
    STRATA_ASSERT(moe_layer < ex->lay->n_layers);
    const struct strata_expert_layer *el = &ex->lay->layers[moe_layer];
    for (int i = 0; i < n; i++) {
        STRATA_ASSERT(ids[i] < ex->lay->n_expert);
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++)
            views[i].part[p] = (const char *)ex->data[moe_layer * STRATA_EXPERT_PART_COUNT + p] +
                               (size_t)ids[i] * el->part_bytes[p];
    }
    ex->stats.hits += (uint64_t)n;
    return 0;
}

void strata_experts_release(struct strata_experts *ex, uint32_t moe_layer)
{
    (void)ex;
    (void)moe_layer;
}

void strata_experts_get_stats(const struct strata_experts *ex, struct strata_experts_stats *st)
{
    *st = ex->stats;
}

uint64_t strata_experts_resident_bytes(const struct strata_experts *ex) { return ex->resident_bytes; }
