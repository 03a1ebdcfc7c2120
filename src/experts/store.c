// The expert store: a bounded cache of expert triplets with one LRU per MoE layer.
//
// Memory: one anonymous mapping holds every slot, layer after layer:
//   [layer 0: n_slots x slot_size(0)] [layer 1: n_slots x slot_size(1)] ...
// A slot holds one expert triplet packed as gate | up | down (the part_bytes of its layer); the
// slot size is the layer's 4 KiB-aligned triplet (its size class) or, uniform, the largest one.
// Pages are touched only when a slot is first filled, so resident memory grows to the budget and
// no further.
//
// Per layer: slot_expert[slot] (-1 empty), expert_slot[expert] (-1 absent), last_use[slot] (LRU
// tick) and pin_gen[slot] (the slot is pinned while pin_gen equals the layer's current generation;
// release bumps the generation, so unpinning is O(1)). A miss takes an empty slot, else the least
// recently used unpinned one. Because acquire takes at most n_slots distinct experts, a slot is
// always available.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "experts/experts.h"
#include "experts/io.h"
#include "gguf/gguf.h"
#include "util/log.h"
#include "util/time.h"

struct layer_cache {
    char *base;                  // [n_slots][slot_size]
    uint64_t slot_size;
    int32_t *slot_expert;        // [n_slots]
    int32_t *expert_slot;        // [n_expert]
    uint64_t *last_use;          // [n_slots]
    uint64_t *pin_gen;           // [n_slots]
    uint64_t gen;                // current pin generation (starts at 1)
    struct strata_experts_layer_stats st;
};

struct strata_experts {
    const struct strata_expert_layout *lay;
    struct strata_experts_config cfg;
    struct strata_slot_plan plan;
    struct strata_io *io;
    struct layer_cache *lc;      // [n_layers]
    void *slab;                  // the mapping of all slots
    size_t slab_bytes;
    uint64_t tick;
    struct strata_io_req *reqs;  // [n_expert * 3] one batch of reads
    int32_t *miss_slot;          // [n_expert] slots filled by the current batch
    struct strata_experts_stats stats;
};

// Queue the three ranges of expert e of layer l into slot s.
static int queue_reads(struct strata_experts *ex, uint32_t l, uint32_t e, int32_t s, int n_reqs)
{
    const struct strata_expert_layer *el = &ex->lay->layers[l];
    char *dst = ex->lc[l].base + (size_t)s * ex->lc[l].slot_size;
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        const uint64_t pb = el->part_bytes[p];
        ex->reqs[n_reqs++] = (struct strata_io_req){el->tensor[p]->file_offset + (uint64_t)e * pb, pb, dst};
        dst += pb;
    }
    return n_reqs;
}

static void fill_view(const struct strata_experts *ex, uint32_t l, int32_t s, struct strata_expert_view *v)
{
    const struct strata_expert_layer *el = &ex->lay->layers[l];
    const char *p = ex->lc[l].base + (size_t)s * ex->lc[l].slot_size;
    for (int i = 0; i < STRATA_EXPERT_PART_COUNT; i++) {
        v->part[i] = p;
        p += el->part_bytes[i];
    }
}

// Least recently used unpinned slot of a layer (empty slots first).
static int32_t victim(const struct strata_experts *ex, const struct layer_cache *c)
{
    int32_t best = -1;
    for (uint32_t s = 0; s < ex->plan.n_slots; s++) {
        if (c->pin_gen[s] == c->gen) continue;
        if (c->slot_expert[s] < 0) return (int32_t)s;
        if (best < 0 || c->last_use[s] < c->last_use[best]) best = (int32_t)s;
    }
    return best;
}

static void drop_slot(struct layer_cache *c, int32_t s)
{
    if (c->slot_expert[s] >= 0) c->expert_slot[c->slot_expert[s]] = -1;
    c->slot_expert[s] = -1;
    c->last_use[s] = 0;
}

// Read every expert of every layer (full residency), one layer per batch.
static int preload(struct strata_experts *ex)
{
    const double t0 = strata_now();
    for (uint32_t l = 0; l < ex->lay->n_layers; l++) {
        int n = 0;
        for (uint32_t e = 0; e < ex->lay->n_expert; e++) n = queue_reads(ex, l, e, (int32_t)e, n);
        int rc = strata_io_read(ex->io, ex->reqs, n);
        if (rc) return rc;
        for (uint32_t e = 0; e < ex->lay->n_expert; e++) {
            ex->lc[l].slot_expert[e] = (int32_t)e;
            ex->lc[l].expert_slot[e] = (int32_t)e;
        }
        ex->stats.preload_bytes += ex->lay->layers[l].triplet_bytes * ex->lay->n_expert;
    }
    ex->stats.preload_s = strata_now() - t0;
    return 0;
}

int strata_experts_open(struct strata_experts **out, struct gguf_file *f,
                        const struct strata_expert_layout *lay, uint32_t n_expert_used,
                        const struct strata_experts_config *cfg)
{
    *out = NULL;
    struct strata_experts_config def = {0};
    if (!cfg) cfg = &def;
    if (cfg->io >= STRATA_IO_COUNT || cfg->io_threads < 0 || cfg->io_threads > 256) {
        strata_log_error("experts_open: I/O engine %d with %d threads is not valid (threads 0..256)",
                         (int)cfg->io, cfg->io_threads);
        return STRATA_EARG;
    }
    if (n_expert_used == 0 || (lay->n_layers && n_expert_used > lay->n_expert)) {
        strata_log_error("experts_open: %u experts used per token of %u", n_expert_used, lay->n_expert);
        return STRATA_EARG;
    }
    struct strata_experts *ex = calloc(1, sizeof *ex);
    if (!ex) return STRATA_ENOMEM;
    ex->lay = lay;
    ex->cfg = *cfg;
    ex->cfg.trace_path = NULL;  // the forward pass owns the trace; do not keep a borrowed pointer
    strata_expert_layout_plan(lay, cfg->cache_bytes, !cfg->no_classes, &ex->plan);
    ex->stats.full = cfg->cache_bytes == 0 || ex->plan.n_slots == lay->n_expert;
    ex->stats.slots_per_layer = ex->plan.n_slots;
    ex->stats.n_classes = ex->plan.n_classes;
    if (lay->n_layers == 0) {
        *out = ex;
        return 0;
    }
    int rc = 0;
    if (ex->plan.n_slots < n_expert_used) {
        const uint64_t min = strata_expert_layout_min_budget(lay, n_expert_used);
        strata_log_error("experts_open: a cache of %.1f MiB holds %u slots per layer; the minimum is %u "
                         "(one token's experts), %llu MiB",
                         cfg->cache_bytes / 1048576.0, ex->plan.n_slots, n_expert_used,
                         (unsigned long long)((min + 1048575) >> 20));
        free(ex);
        return STRATA_ENOMEM;
    }
    const uint32_t L = lay->n_layers, X = lay->n_expert, S = ex->plan.n_slots;
    uint64_t max_part = 0;
    for (uint32_t l = 0; l < L; l++)
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++)
            if (lay->layers[l].part_bytes[p] > max_part) max_part = lay->layers[l].part_bytes[p];
    ex->slab_bytes = ex->plan.total_bytes;
    ex->slab = mmap(NULL, ex->slab_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ex->lc = calloc(L, sizeof *ex->lc);
    ex->reqs = calloc((size_t)X * STRATA_EXPERT_PART_COUNT, sizeof *ex->reqs);
    ex->miss_slot = calloc(X, sizeof *ex->miss_slot);
    if (ex->slab == MAP_FAILED || !ex->lc || !ex->reqs || !ex->miss_slot) {
        if (ex->slab == MAP_FAILED) ex->slab = NULL;
        strata_log_error("experts_open: out of memory for %u slots per layer (%.1f MiB)", S,
                         ex->slab_bytes / 1048576.0);
        strata_experts_close(ex);
        return STRATA_ENOMEM;
    }
    char *base = ex->slab;
    for (uint32_t l = 0; l < L; l++) {
        struct layer_cache *c = &ex->lc[l];
        c->slot_size = strata_expert_layout_slot_size(lay, &ex->plan, l);
        c->base = base;
        base += (size_t)S * c->slot_size;
        c->slot_expert = malloc(S * sizeof *c->slot_expert);
        c->expert_slot = malloc(X * sizeof *c->expert_slot);
        c->last_use = calloc(S, sizeof *c->last_use);
        c->pin_gen = calloc(S, sizeof *c->pin_gen);
        c->gen = 1;
        if (!c->slot_expert || !c->expert_slot || !c->last_use || !c->pin_gen) {
            strata_experts_close(ex);
            return STRATA_ENOMEM;
        }
        memset(c->slot_expert, 0xff, S * sizeof *c->slot_expert);
        memset(c->expert_slot, 0xff, X * sizeof *c->expert_slot);
    }
    ex->stats.slot_bytes_total = ex->slab_bytes;
    if ((rc = strata_io_open(&ex->io, f->path, cfg->io, cfg->io_threads, max_part))) {
        strata_experts_close(ex);
        return rc;
    }
    ex->stats.io_buffer_bytes = strata_io_buffer_bytes(ex->io);
    if (ex->stats.full && (rc = preload(ex))) {
        strata_experts_close(ex);
        return rc;
    }
    *out = ex;
    return 0;
}

void strata_experts_close(struct strata_experts *ex)
{
    if (!ex) return;
    strata_io_close(ex->io);
    if (ex->lc)
        for (uint32_t l = 0; l < ex->lay->n_layers; l++) {
            free(ex->lc[l].slot_expert);
            free(ex->lc[l].expert_slot);
            free(ex->lc[l].last_use);
            free(ex->lc[l].pin_gen);
        }
    free(ex->lc);
    if (ex->slab) munmap(ex->slab, ex->slab_bytes);
    free(ex->reqs);
    free(ex->miss_slot);
    free(ex);
}

int strata_experts_max_batch(const struct strata_experts *ex) { return (int)ex->plan.n_slots; }

int strata_experts_acquire(struct strata_experts *ex, uint32_t moe_layer, const uint32_t *ids,
                           int n, struct strata_expert_view *views)
{
    if (moe_layer >= ex->lay->n_layers || n < 0 || (uint32_t)n > ex->plan.n_slots) {
        strata_log_error("experts_acquire: layer %u / %d experts out of range (%u layers, %u slots)", moe_layer,
                         n, ex->lay->n_layers, ex->plan.n_slots);
        return STRATA_EARG;
    }
    struct layer_cache *c = &ex->lc[moe_layer];
    // Hits first, so that their slots are pinned before any miss looks for a victim.
    for (int i = 0; i < n; i++) {
        if (ids[i] >= ex->lay->n_expert) {
            strata_log_error("experts_acquire: expert %u of layer %u out of range (%u experts)", ids[i],
                             moe_layer, ex->lay->n_expert);
            return STRATA_EARG;
        }
        const int32_t s = c->expert_slot[ids[i]];
        if (s >= 0 && c->pin_gen[s] == c->gen) {  // a duplicate id in this request: read once
            continue;
        }
        if (s >= 0) {
            c->pin_gen[s] = c->gen;
            c->st.hits++;
        }
    }
    int n_miss = 0, n_reqs = 0;
    for (int i = 0; i < n; i++) {
        if (c->expert_slot[ids[i]] >= 0) continue;
        const int32_t s = victim(ex, c);
        STRATA_ASSERT(s >= 0);  // n <= n_slots and only this request's slots are pinned
        if (c->slot_expert[s] >= 0) c->st.evictions++;
        drop_slot(c, s);
        c->slot_expert[s] = (int32_t)ids[i];
        c->expert_slot[ids[i]] = s;
        c->pin_gen[s] = c->gen;
        ex->miss_slot[n_miss++] = s;
        n_reqs = queue_reads(ex, moe_layer, ids[i], s, n_reqs);
        c->st.misses++;
        c->st.bytes_read += ex->lay->layers[moe_layer].triplet_bytes;
    }
    if (n_reqs) {
        const double t0 = strata_now();
        int rc = strata_io_read(ex->io, ex->reqs, n_reqs);
        ex->stats.io_wait_s += strata_now() - t0;
        if (rc) {
            // Whatever landed is not trusted: forget every slot of this batch.
            for (int i = 0; i < n_miss; i++) drop_slot(c, ex->miss_slot[i]);
            c->gen++;
            return rc;
        }
    }
    // Every access gets its own tick in the order of ids, so LRU has no ties and strata sim can
    // replay the same order.
    for (int i = 0; i < n; i++) {
        const int32_t s = c->expert_slot[ids[i]];
        c->last_use[s] = ++ex->tick;
        fill_view(ex, moe_layer, s, &views[i]);
    }
    return 0;
}

void strata_experts_release(struct strata_experts *ex, uint32_t moe_layer)
{
    if (moe_layer < ex->lay->n_layers) ex->lc[moe_layer].gen++;
}

void strata_experts_get_stats(const struct strata_experts *ex, struct strata_experts_stats *st)
{
    *st = ex->stats;
    st->hits = st->misses = st->evictions = st->bytes_read = 0;
    for (uint32_t l = 0; l < ex->lay->n_layers; l++) {
        st->hits += ex->lc[l].st.hits;
        st->misses += ex->lc[l].st.misses;
        st->evictions += ex->lc[l].st.evictions;
        st->bytes_read += ex->lc[l].st.bytes_read;
    }
    if (ex->io) {
        struct strata_io_counters ioc;
        strata_io_get_counters(ex->io, &ioc);
        st->reads = ioc.reads;
        st->retries = ioc.retries;
    }
}

void strata_experts_get_layer_stats(const struct strata_experts *ex, uint32_t moe_layer,
                                    struct strata_experts_layer_stats *st)
{
    if (moe_layer < ex->lay->n_layers) *st = ex->lc[moe_layer].st;
    else memset(st, 0, sizeof *st);
}

uint64_t strata_experts_resident_bytes(const struct strata_experts *ex) { return ex->slab_bytes; }

const char *strata_io_engine_name(enum strata_io_engine e)
{
    static const char *const names[STRATA_IO_COUNT] = {"pread", "uring"};
    return e < STRATA_IO_COUNT ? names[e] : "?";
}
