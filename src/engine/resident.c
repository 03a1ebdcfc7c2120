// Every routed expert resident in backend memory (resident.h).
#include "engine/resident.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "util/log.h"
#include "util/time.h"

#define PIECE_BYTES ((size_t)64 << 20)   // read from the file, then uploaded, this much at a time

struct resident_layer {
    char *part[STRATA_EXPERT_PART_COUNT];     // backend memory: [n_expert][part_bytes]
    uint64_t part_bytes[STRATA_EXPERT_PART_COUNT];
    atomic_uint_fast64_t hits;
};

struct strata_resident {
    struct strata_backend *be;
    uint32_t n_layers, n_expert;
    struct resident_layer *layers;
    uint64_t bytes;
    double load_s;
    atomic_uint_fast64_t hits;
};

// One stacked tensor into backend memory, piece by piece.
static int upload_tensor(struct strata_resident *r, const struct strata_gguf_file *f, const struct strata_gguf_tensor *t,
                         char *dst, char *buf)
{
    for (uint64_t off = 0; off < t->n_bytes; off += PIECE_BYTES) {
        const uint64_t n = t->n_bytes - off < PIECE_BYTES ? t->n_bytes - off : PIECE_BYTES;
        int rc = strata_gguf_read_tensor(f, t, off, buf, n);
        if (rc == 0) rc = r->be->iface->upload(r->be->ctx, dst + off, buf, n);
        if (rc) return rc;
    }
    return 0;
}

int strata_resident_open(struct strata_resident **out, struct strata_backend *be, const struct strata_gguf_file *f,
                         const struct strata_expert_layout *lay)
{
    *out = NULL;
    struct strata_resident *r = calloc(1, sizeof *r);
    if (!r) return STRATA_ENOMEM;
    r->be = be;
    r->n_layers = lay->n_layers;
    r->n_expert = lay->n_expert;
    r->layers = calloc(lay->n_layers ? lay->n_layers : 1, sizeof *r->layers);
    char *buf = malloc(PIECE_BYTES);
    int rc = r->layers && buf ? 0 : STRATA_ENOMEM;
    const double t0 = strata_now();
    for (uint32_t l = 0; l < lay->n_layers && rc == 0; l++) {
        const struct strata_expert_layer *el = &lay->layers[l];
        struct resident_layer *rl = &r->layers[l];
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT && rc == 0; p++) {
            const struct strata_gguf_tensor *t = el->tensor[p];
            rl->part_bytes[p] = el->part_bytes[p];
            if (t->n_bytes != el->part_bytes[p] * lay->n_expert) {
                strata_log_error("resident experts: tensor '%s' holds %llu bytes, not %u experts of %llu", t->name,
                                 (unsigned long long)t->n_bytes, lay->n_expert, (unsigned long long)el->part_bytes[p]);
                rc = STRATA_EFORMAT;
                break;
            }
            rl->part[p] = be->iface->alloc(be->ctx, t->n_bytes, "routed experts");
            if (!rl->part[p]) {
                strata_log_error("resident experts: %s memory cannot hold every routed expert (%.0f MiB); "
                                 "--gpu-cache-mib N keeps N MiB of them there (strata run --help)",
                                 be->iface->name, (lay->full_residency_bytes - lay->dense_bytes) / 1048576.0);
                rc = STRATA_ENOMEM;
                break;
            }
            rc = upload_tensor(r, f, t, rl->part[p], buf);
            r->bytes += t->n_bytes;
        }
    }
    free(buf);
    if (rc == 0) rc = be->iface->sync(be->ctx);
    if (rc) {
        strata_resident_close(r);
        return rc;
    }
    r->load_s = strata_now() - t0;
    if (r->bytes)
        strata_log_info("resident experts: %.1f MiB of %u layers x %u experts in %s memory in %.2f s (%.2f GB/s)",
                        r->bytes / 1048576.0, r->n_layers, r->n_expert, be->iface->name, r->load_s,
                        r->load_s > 0 ? r->bytes / r->load_s / 1e9 : 0.0);
    *out = r;
    return 0;
}

void strata_resident_close(struct strata_resident *r)
{
    if (!r) return;
    for (uint32_t l = 0; r->layers && l < r->n_layers; l++)
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++)
            if (r->layers[l].part[p]) r->be->iface->release(r->be->ctx, r->layers[l].part[p]);
    free(r->layers);
    free(r);
}

uint64_t strata_resident_bytes(const struct strata_resident *r) { return r ? r->bytes : 0; }

static int res_prefetch(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n)
{
    (void)ctx, (void)moe_layer, (void)ids, (void)n;
    return 0;  // everything is resident
}

static int res_acquire(void *ctx, uint32_t moe_layer, const uint32_t *ids, int n, struct strata_expert_view *views)
{
    struct strata_resident *r = ctx;
    if (moe_layer >= r->n_layers) {
        strata_log_error("resident experts: MoE layer %u of %u", moe_layer, r->n_layers);
        return STRATA_EARG;
    }
    struct resident_layer *rl = &r->layers[moe_layer];
    for (int i = 0; i < n; i++) {
        if (ids[i] >= r->n_expert) {
            strata_log_error("resident experts: expert %u of %u", ids[i], r->n_expert);
            return STRATA_EARG;
        }
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) views[i].part[p] = rl->part[p] + ids[i] * rl->part_bytes[p];
    }
    atomic_fetch_add(&rl->hits, (uint_fast64_t)n);
    atomic_fetch_add(&r->hits, (uint_fast64_t)n);
    return 0;
}

static void res_release(void *ctx, uint32_t moe_layer, const struct strata_expert_view *views, int n)
{
    (void)ctx, (void)moe_layer, (void)views, (void)n;
}

static void res_stats(void *ctx, struct strata_experts_stats *st)
{
    const struct strata_resident *r = ctx;
    *st = (struct strata_experts_stats){
        .hits = atomic_load(&r->hits), .preload_bytes = r->bytes, .preload_s = r->load_s,
        .slots_per_layer = r->n_expert, .n_classes = 1, .full = true, .slot_bytes_total = r->bytes,
    };
}

static void res_layer_stats(void *ctx, uint32_t moe_layer, struct strata_experts_layer_stats *st)
{
    struct strata_resident *r = ctx;
    *st = (struct strata_experts_layer_stats){0};
    if (moe_layer < r->n_layers) st->hits = atomic_load(&r->layers[moe_layer].hits);
}

static int res_max_batch(void *ctx)
{
    const struct strata_resident *r = ctx;
    return r->n_expert ? (int)r->n_expert : 1;
}

static const struct strata_provider_i g_resident_iface = {
    .prefetch = res_prefetch,
    .acquire = res_acquire,
    .release = res_release,
    .stats = res_stats,
    .layer_stats = res_layer_stats,
    .max_batch = res_max_batch,
};

struct strata_expert_provider strata_resident_provider(struct strata_resident *r)
{
    return (struct strata_expert_provider){&g_resident_iface, r};
}
