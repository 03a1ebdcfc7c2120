// strata plan (see plan.h). Memory: dense + KV + scratch + reserve, the rest to the expert cache,
// converted to slots with the store's own plan (layout.c). Misses per token come from an LRU
// replay of a trace at that slot count, or from uniform routing (a layer hits with probability
// slots / experts). Floor: resident bytes per token / RAM bandwidth + miss bytes / disk bandwidth.
#include "tools/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "experts/layout.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "tools/sim.h"
#include "util/log.h"
#include "util/time.h"

int strata_plan_disk_gbs(const char *path, uint64_t max_bytes, double *gbs)
{
    const size_t chunk = 1 << 20;
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        strata_log_error("plan_disk_gbs: cannot open %s: %s", path, strerror(errno));
        return -errno;
    }
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, chunk)) {
        close(fd);
        return STRATA_ENOMEM;
    }
    uint64_t got = 0;
    const double t0 = strata_now();
    // Start in the middle of the file: its head was just read for the metadata.
    off_t size = lseek(fd, 0, SEEK_END);
    off_t off = size > (off_t)(2 * max_bytes) ? (size / 2) & ~(off_t)4095 : 0;
    while (got < max_bytes) {
        ssize_t k = pread(fd, buf, chunk, off);
        if (k <= 0) break;
        got += (uint64_t)k;
        off += k;
    }
    const double dt = strata_now() - t0;
    free(buf);
    close(fd);
    if (got == 0 || dt <= 0) {
        strata_log_error("plan_disk_gbs: could not read %s", path);
        return STRATA_EIO;
    }
    *gbs = (double)got / dt / 1e9;
    return 0;
}

int strata_plan(const struct strata_plan_opts *o, FILE *out)
{
    struct gguf_file *f = NULL;
    struct strata_hparams hp;
    struct strata_expert_layout lay = {0};
    struct strata_trace tr = {0};
    int rc = gguf_open(&f, o->model);
    if (rc == 0) rc = strata_hparams_load(&hp, f);
    if (rc == 0) rc = strata_expert_layout_init(&lay, f);
    if (rc == 0 && lay.n_layers == 0) {
        strata_log_error("plan: %s has no routed experts", o->model);
        rc = STRATA_EUNSUP;
    }
    if (rc == 0 && o->trace) {
        rc = strata_trace_load(&tr, o->trace);
        if (rc == 0 && (tr.n_layers != lay.n_layers || tr.n_expert != lay.n_expert)) {
            strata_log_error("plan: trace %s has %u layers x %u experts, the model %u x %u", o->trace, tr.n_layers,
                             tr.n_expert, lay.n_layers, lay.n_expert);
            rc = STRATA_EARG;
        }
    }
    double disk = o->disk_gbs;
    if (rc == 0 && disk <= 0) rc = strata_plan_disk_gbs(o->model, 256ull << 20, &disk);
    if (rc) goto out;
    const double GiB = 1073741824.0, MiB = 1048576.0;
    const int n_ctx = o->n_ctx > 0 ? o->n_ctx : 4096;
    const double mem = o->mem_gbs > 0 ? o->mem_gbs : 12.0;
    const uint64_t kv = strata_hparams_kv_bytes_per_token(&hp, sizeof(float)) * (uint64_t)n_ctx;
    // Chunk scratch of the forward pass at 512 tokens, and the runtime (roughly, rounded up).
    const uint64_t scratch = 512ull * (hp.n_embd * 8ull + (uint64_t)hp.n_expert_used * hp.n_ff_exp * 3 +
                                       hp.n_expert) * sizeof(float) + (16ull << 20);
    const uint64_t reserve = (uint64_t)(o->reserve_gib * GiB);
    const uint64_t ram = (uint64_t)(o->ram_gib * GiB);
    const uint64_t fixed = lay.dense_bytes + kv + scratch + reserve;
    struct strata_slot_plan full, plan;
    strata_expert_layout_plan(&lay, 0, true, &full);
    const uint64_t budget = ram > fixed ? ram - fixed : 0;
    // (a plan of budget 0 means full residency, so an empty budget is priced by hand)
    if (budget >= full.total_bytes) plan = full;
    else if (budget > 0) strata_expert_layout_plan(&lay, budget, true, &plan);
    else memset(&plan, 0, sizeof plan);
    uint64_t sum_triplet = 0, active = 0;
    for (uint32_t l = 0; l < lay.n_layers; l++) sum_triplet += lay.layers[l].triplet_bytes;
    active = sum_triplet * hp.n_expert_used;
    const struct gguf_tensor *emb = gguf_find_tensor(f, "token_embd.weight");
    const uint64_t dense_per_token = lay.dense_bytes - (emb && gguf_find_tensor(f, "output.weight") ? emb->n_bytes : 0);

    fprintf(out, "model: %s\n", o->model);
    fprintf(out, "  layers %u, experts %u (top-%u), %u MoE layers\n", hp.n_layer, hp.n_expert, hp.n_expert_used,
            lay.n_layers);
    fprintf(out, "  dense bytes            %10.1f MiB\n", lay.dense_bytes / MiB);
    fprintf(out, "  expert bytes           %10.1f MiB\n", lay.expert_bytes / MiB);
    fprintf(out, "  full residency         %10.1f MiB (dense + %u experts x slots, %u size class%s:",
            (lay.dense_bytes + full.total_bytes) / MiB, lay.n_expert, lay.n_classes, lay.n_classes == 1 ? "" : "es");
    for (uint32_t c = 0; c < lay.n_classes && c < 64; c++) fprintf(out, " %.0f KiB", lay.class_bytes[c] / 1024.0);
    fprintf(out, ")\n");
    fprintf(out, "  KV cache (ctx %d)      %10.1f MiB\n", n_ctx, kv / MiB);
    fprintf(out, "  scratch + runtime      %10.1f MiB\n", scratch / MiB);
    fprintf(out, "machine: %.1f GiB RAM, %.1f GiB reserved, disk %.2f GB/s%s, memory %.1f GB/s\n", o->ram_gib,
            reserve / GiB, disk, o->disk_gbs > 0 ? "" : " (measured)", mem);
    if (plan.n_slots < hp.n_expert_used) {
        fprintf(out, "plan: does not fit: %.1f MiB left for experts, the minimum is %.1f MiB (%u slots per layer)\n",
                budget / MiB, strata_expert_layout_min_budget(&lay, hp.n_expert_used) / MiB, hp.n_expert_used);
        goto out;
    }
    double miss_per_token = 0, miss_bytes = 0, hit_rate;
    if (plan.n_slots >= lay.n_expert) {
        hit_rate = 1.0;
    } else if (o->trace) {
        struct strata_sim_result r;
        if ((rc = strata_sim_run(&tr, STRATA_SIM_LRU, plan.n_slots, false, &r))) goto out;
        miss_per_token = r.tokens ? (double)r.misses / (double)r.tokens : 0;
        hit_rate = r.hits + r.misses ? (double)r.hits / (double)(r.hits + r.misses) : 1.0;
        miss_bytes = miss_per_token * (double)sum_triplet / lay.n_layers;
    } else {
        const double p_miss = 1.0 - (double)plan.n_slots / lay.n_expert;
        hit_rate = 1.0 - p_miss;
        miss_per_token = p_miss * hp.n_expert_used * lay.n_layers;
        miss_bytes = p_miss * (double)active;
    }
    const double floor_s = (double)(dense_per_token + active) / (mem * 1e9) + miss_bytes / (disk * 1e9);
    char flag[32];
    if (plan.n_slots >= lay.n_expert) snprintf(flag, sizeof flag, "full");
    else snprintf(flag, sizeof flag, "%llu", (unsigned long long)(plan.total_bytes >> 20));
    fprintf(out, "plan: --cache-mib %s  (%.1f MiB of slots, %u slots per layer, %s)\n", flag,
            plan.total_bytes / MiB, plan.n_slots, plan.uniform ? "uniform slots" : "size classes");
    fprintf(out, "  expected hit rate      %10.1f %% (%s)\n", 100 * hit_rate,
            o->trace ? "LRU replay of the trace" : "uniform routing");
    fprintf(out, "  misses per token       %10.2f experts, %.1f MiB\n", miss_per_token, miss_bytes / MiB);
    fprintf(out, "  resident bytes / token %10.1f MiB\n", (dense_per_token + active) / MiB);
    fprintf(out, "  byte floor             %10.2f tok/s\n", floor_s > 0 ? 1.0 / floor_s : 0);
out:
    strata_trace_free(&tr);
    strata_expert_layout_free(&lay);
    gguf_close(f);
    return rc;
}
