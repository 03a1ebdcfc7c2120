// strata plan (see plan.h). Memory: dense + KV + scratch + reserve, the rest to the expert cache,
// converted to slots with the store's own plan (layout.c). Misses per token come from an LFU (or
// LRU) replay of a trace at that slot count, or from uniform routing (a layer hits with probability
// slots / experts). Floor: resident bytes per token / RAM bandwidth + miss bytes / disk bandwidth.
#include "tools/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda.h"
#include "engine/engine.h"
#include "experts/layout.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "tools/sim.h"
#include "util/log.h"
#include "util/time.h"

int strata_disk_point(const char *path, uint64_t read_bytes, int depth, double seconds, struct strata_disk_point *out)
{
    memset(out, 0, sizeof *out);
    if (read_bytes == 0 || read_bytes % 4096 || read_bytes > (64u << 20) || depth < 1 || depth > 256) {
        strata_log_error("disk_point: read size %llu (a multiple of 4 KiB up to 64 MiB) / depth %d (1..256)",
                         (unsigned long long)read_bytes, depth);
        return STRATA_EARG;
    }
    int fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        strata_log_error("disk_point: cannot open %s with O_DIRECT: %s", path, strerror(errno));
        return -errno;
    }
    const off_t size = lseek(fd, 0, SEEK_END);
    const uint64_t lo = (uint64_t)size / 2, span = (uint64_t)size - lo;
    struct io_uring ring;
    void *buf = NULL;
    int rc = 0;
    if (span < read_bytes * 4) {
        strata_log_error("disk_point: %s (%lld bytes) is too small for %llu-byte random reads", path,
                         (long long)size, (unsigned long long)read_bytes);
        close(fd);
        return STRATA_EARG;
    }
    if (posix_memalign(&buf, 4096, (size_t)read_bytes * (size_t)depth)) {
        close(fd);
        return STRATA_ENOMEM;
    }
    if ((rc = io_uring_queue_init((unsigned)depth, &ring, 0)) < 0) {
        strata_log_error("disk_point: io_uring_queue_init(%d): %s", depth, strerror(-rc));
        free(buf);
        close(fd);
        return rc;
    }
    uint64_t x = 0x2545f4914f6cdd1dull ^ read_bytes ^ ((uint64_t)depth << 40);
    double *started = calloc((size_t)depth, sizeof *started);
    uint64_t n_done = 0, bytes = 0;
    double lat = 0;
    const double t0 = strata_now();
    int in_flight = 0;
    bool stop = false;
    while (rc == 0 && (in_flight > 0 || !stop)) {
        for (int b = 0; b < depth && !stop && in_flight < depth; b++) {
            if (started[b] > 0) continue;
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const uint64_t off = (lo + x % (span - read_bytes)) & ~(uint64_t)4095;
            struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
            io_uring_prep_read(sqe, fd, (char *)buf + (size_t)b * read_bytes, (unsigned)read_bytes, off);
            io_uring_sqe_set_data64(sqe, (uint64_t)b);
            started[b] = strata_now();
            in_flight++;
        }
        struct io_uring_cqe *cqe;
        int e = io_uring_submit_and_wait(&ring, 1);
        if (e < 0 && e != -EINTR) rc = e;
        while (rc == 0 && io_uring_peek_cqe(&ring, &cqe) == 0) {
            const int b = (int)io_uring_cqe_get_data64(cqe);
            if (cqe->res < 0) rc = cqe->res;
            else bytes += (uint64_t)cqe->res;
            io_uring_cqe_seen(&ring, cqe);
            lat += strata_now() - started[b];
            started[b] = 0;
            in_flight--;
            n_done++;
        }
        stop = strata_now() - t0 >= seconds && n_done >= 3 * (uint64_t)depth;
    }
    const double dt = strata_now() - t0;
    if (rc < 0) strata_log_error("disk_point: read of %s: %s", path, strerror(-rc));
    io_uring_queue_exit(&ring);
    free(started);
    free(buf);
    close(fd);
    if (rc) return rc;
    *out = (struct strata_disk_point){read_bytes, depth, (double)bytes / dt / 1e9, 1e3 * lat / (double)n_done};
    return 0;
}

int strata_disk_curve_measure(const char *path, const uint64_t *sizes, int n_sizes, const int *depths, int n_depths,
                              double seconds, struct strata_disk_curve *c, FILE *progress)
{
    static const uint64_t def_sizes[] = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20};
    static const int def_depths[] = {1, 2, 4, 8, 16, 32};
    if (n_sizes <= 0) sizes = def_sizes, n_sizes = (int)(sizeof def_sizes / sizeof *def_sizes);
    if (n_depths <= 0) depths = def_depths, n_depths = (int)(sizeof def_depths / sizeof *def_depths);
    memset(c, 0, sizeof *c);
    for (int i = 0; i < n_sizes; i++)
        for (int j = 0; j < n_depths; j++) {
            if (c->n == STRATA_DISK_CURVE_MAX) return STRATA_EARG;
            int rc = strata_disk_point(path, sizes[i], depths[j], seconds, &c->p[c->n]);
            if (rc) return rc;
            if (progress)
                fprintf(progress, "%8.0f %5d %8.3f %8.2f\n", sizes[i] / 1024.0, depths[j], c->p[c->n].gbs,
                        c->p[c->n].ms);
            c->n++;
        }
    return 0;
}

int strata_disk_curve_save(const struct strata_disk_curve *c, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        strata_log_error("disk_curve_save: cannot write %s: %s", path, strerror(errno));
        return -errno;
    }
    fprintf(f, "# read_kib depth gbs ms\n");
    for (int i = 0; i < c->n; i++)
        fprintf(f, "%.0f\t%d\t%.4f\t%.3f\n", c->p[i].read_bytes / 1024.0, c->p[i].depth, c->p[i].gbs, c->p[i].ms);
    if (fclose(f)) {
        strata_log_error("disk_curve_save: cannot write %s", path);
        return STRATA_EIO;
    }
    return 0;
}

int strata_disk_curve_load(struct strata_disk_curve *c, const char *path)
{
    memset(c, 0, sizeof *c);
    FILE *f = fopen(path, "r");
    if (!f) {
        strata_log_error("disk_curve_load: cannot open %s: %s", path, strerror(errno));
        return -errno;
    }
    char line[256];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n') continue;
        double kib, gbs, ms;
        int depth;
        if (sscanf(line, "%lf %d %lf %lf", &kib, &depth, &gbs, &ms) != 4 || kib < 4 || kib > 65536 || depth < 1 ||
            depth > 256 || !(gbs > 0 && gbs < 1e4) || c->n == STRATA_DISK_CURVE_MAX) {
            strata_log_error("disk_curve_load: %s:%d is not 'read_kib depth gbs ms' (or more than %d points)", path,
                             lineno, STRATA_DISK_CURVE_MAX);
            rc = STRATA_EFORMAT;
            break;
        }
        c->p[c->n++] = (struct strata_disk_point){(uint64_t)(kib * 1024), depth, gbs, ms};
    }
    fclose(f);
    if (rc == 0 && c->n == 0) {
        strata_log_error("disk_curve_load: %s has no points", path);
        rc = STRATA_EFORMAT;
    }
    return rc;
}

double strata_disk_curve_gbs(const struct strata_disk_curve *c, uint64_t read_bytes, int depth)
{
    // the depth: the largest measured one <= depth, else the smallest
    int d = -1;
    for (int i = 0; i < c->n; i++)
        if (c->p[i].depth <= depth && c->p[i].depth > d) d = c->p[i].depth;
    if (d < 0)
        for (int i = 0; i < c->n; i++)
            if (d < 0 || c->p[i].depth < d) d = c->p[i].depth;
    const struct strata_disk_point *below = NULL, *above = NULL;
    for (int i = 0; i < c->n; i++) {
        const struct strata_disk_point *p = &c->p[i];
        if (p->depth != d) continue;
        if (p->read_bytes <= read_bytes && (!below || p->read_bytes > below->read_bytes)) below = p;
        if (p->read_bytes >= read_bytes && (!above || p->read_bytes < above->read_bytes)) above = p;
    }
    if (!below) return above ? above->gbs : 0;
    if (!above || above->read_bytes == below->read_bytes) return below->gbs;
    const double t = (log2((double)read_bytes) - log2((double)below->read_bytes)) /
                     (log2((double)above->read_bytes) - log2((double)below->read_bytes));
    return below->gbs + t * (above->gbs - below->gbs);
}

// The disk at the engine's reads: one request per expert part, as many in flight as the I/O depth
// allows and a layer's misses fill (3 parts per missed expert), never fewer than 1; given, from the
// curve, or measured now (only when there are misses to price).
struct disk_rate {
    double gbs;
    const char *src;
    uint64_t read_bytes;
    int depth;
};

static int disk_rate(const struct strata_plan_opts *o, const struct strata_expert_layout *lay,
                     const struct strata_disk_curve *curve, double miss_per_token, bool needed, struct disk_rate *d)
{
    uint64_t part_sum = 0;
    for (uint32_t l = 0; l < lay->n_layers; l++)
        for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) part_sum += lay->layers[l].part_bytes[p];
    d->read_bytes = ((part_sum / (lay->n_layers * STRATA_EXPERT_PART_COUNT)) + 4095) & ~(uint64_t)4095;
    const int io_depth = o->io_depth > 0 ? o->io_depth : 4;
    const double reads_per_layer = STRATA_EXPERT_PART_COUNT * miss_per_token / lay->n_layers;
    d->depth = reads_per_layer < io_depth ? (int)(reads_per_layer + 0.5) : io_depth;
    if (d->depth < 1) d->depth = 1;
    d->gbs = o->disk_gbs;
    d->src = "given";
    if (d->gbs <= 0 && curve->n) {
        d->gbs = strata_disk_curve_gbs(curve, d->read_bytes, d->depth);
        d->src = "the measured curve";
    } else if (d->gbs <= 0 && needed) {
        struct strata_disk_point pt;
        int rc = strata_disk_point(o->model, d->read_bytes, d->depth, 2.0, &pt);
        if (rc) return rc;
        d->gbs = pt.gbs;
        d->src = "measured now";
    }
    return 0;
}

// The VRAM tier's plan: the device holds the dense weights, the KV cache, the scratch, a reserve
// and the expert slots; the host holds the expert cache behind them (the dense weights leave it
// after the upload). Decode per token: a fixed GPU time per layer plus the resident bytes over
// HBM, and the VRAM misses: copied over PCIe (--gpu-miss copy), computed by the CPU at memory
// bandwidth (cpu), or split between the two so both finish together (auto: miss bytes / (PCIe +
// memory)); the host cache's misses come from the disk on top. Nothing overlapped but the auto
// split itself.
struct gpu_plan_in {
    const struct strata_hparams *hp;
    const struct strata_expert_layout *lay;
    const struct strata_trace *tr;       // or NULL (uniform routing)
    const struct strata_disk_curve *curve;
    uint64_t kv, scratch, dense_per_token, sum_triplet;
};

static int plan_gpu(const struct strata_plan_opts *o, const struct gpu_plan_in *in, FILE *out)
{
    const double MiB = 1048576.0, GiB = 1073741824.0;
    const struct strata_expert_layout *lay = in->lay;
    const uint32_t X = lay->n_expert, K = in->hp->n_expert_used, L = lay->n_layers;
    const double hbm = o->hbm_gbs > 0 ? o->hbm_gbs : 4800, pcie = o->pcie_gbs > 0 ? o->pcie_gbs : 45;
    const double layer_us = o->gpu_layer_us >= 0 ? o->gpu_layer_us : 107, mem = o->mem_gbs > 0 ? o->mem_gbs : 12.0;
    const uint64_t gpu_reserve = (uint64_t)((o->gpu_reserve_mib > 0 ? o->gpu_reserve_mib : 1024) * MiB);
    const uint64_t gpu_fixed = lay->dense_bytes + in->kv + in->scratch + gpu_reserve;
    const uint64_t gpu = (uint64_t)(o->gpu_mib * MiB);
    struct strata_slot_plan full, vplan, hplan;
    strata_expert_layout_plan(lay, 0, true, &full);
    const uint64_t vbudget = o->gpu_cache_mib ? o->gpu_cache_mib << 20 : gpu > gpu_fixed ? gpu - gpu_fixed : 0;
    if (vbudget >= full.total_bytes) vplan = full;
    else if (vbudget > 0) strata_expert_layout_plan(lay, vbudget, true, &vplan);
    else memset(&vplan, 0, sizeof vplan);
    // the host: the expert cache and the forward scratch; every expert unless RAM or --cache-mib says
    const uint64_t host_fixed = in->scratch + (uint64_t)(o->reserve_gib * GiB), ram = (uint64_t)(o->ram_gib * GiB);
    const uint64_t hbudget = o->cache_mib ? o->cache_mib << 20 : o->ram_gib <= 0 ? 0 : ram > host_fixed ? ram - host_fixed : 1;
    if (hbudget == 0 || hbudget >= full.total_bytes) hplan = full;
    else strata_expert_layout_plan(lay, hbudget, true, &hplan);

    if (o->gpu_cache_mib)
        fprintf(out, "gpu: --gpu-cache-mib %llu given; on the device besides: dense weights %.1f MiB, KV %.1f MiB, "
                     "scratch %.1f MiB\n", (unsigned long long)o->gpu_cache_mib, lay->dense_bytes / MiB,
                in->kv / MiB, in->scratch / MiB);
    else
        fprintf(out, "gpu: %.0f MiB = dense weights %.1f + KV %.1f + scratch %.1f + reserve %.0f + experts %.1f MiB\n",
                o->gpu_mib, lay->dense_bytes / MiB, in->kv / MiB, in->scratch / MiB, gpu_reserve / MiB, vbudget / MiB);
    fprintf(out, "machine: HBM %.0f GB/s, %.0f us per layer on the GPU, PCIe %.1f GB/s, CPU %.1f GB/s of expert bytes "
                 "(--mem-gbs)\n", hbm, layer_us, pcie, mem);
    if (vplan.n_slots < K) {
        fprintf(out, "plan: does not fit: %.1f MiB of VRAM left for experts, the minimum is %.1f MiB (%u slots per layer; "
                     "--gpu-mib %.0f with the rest above)\n", vbudget / MiB,
                strata_expert_layout_min_budget(lay, K) / MiB, K, (gpu_fixed + strata_expert_layout_min_budget(lay, K)) / MiB);
        return 0;
    }
    if (hplan.n_slots < K) {
        fprintf(out, "plan: does not fit: %.1f MiB of RAM left for the host cache, the minimum is %.1f MiB\n",
                hbudget / MiB, strata_expert_layout_min_budget(lay, K) / MiB);
        return 0;
    }
    const bool vfull = vplan.n_slots >= X, hfull = vfull || hplan.n_slots >= X;
    double v_miss = 0, h_miss = 0, v_hit = 1, h_hit = 1;  // per token; hit rates of each tier's accesses
    const char *how = "uniform routing";
    if (!vfull && in->tr) {
        struct strata_sim_result v, h;
        const struct strata_sim_opts so = {0};
        int rc = strata_sim_replay2(in->tr, o->lru ? STRATA_SIM_LRU : STRATA_SIM_LFU, vplan.n_slots,
                                    hfull ? X : hplan.n_slots, &so, &v, &h);
        if (rc) return rc;
        const double n = v.tokens ? (double)v.tokens : 1;
        v_miss = (double)v.misses / n;
        h_miss = (double)h.misses / n;
        v_hit = v.hits + v.misses ? (double)v.hits / (double)(v.hits + v.misses) : 1;
        h_hit = h.hits + h.misses ? (double)h.hits / (double)(h.hits + h.misses) : 1;
        how = o->lru ? "LRU replay of the trace, two tiers" : "LFU replay of the trace, two tiers";
    } else if (!vfull) {
        v_hit = (double)vplan.n_slots / X;
        v_miss = (1 - v_hit) * K * L;
        h_miss = hfull ? 0 : (1 - (double)hplan.n_slots / X) * K * L;
        if (h_miss > v_miss) h_miss = v_miss;
        h_hit = v_miss > 0 ? 1 - h_miss / v_miss : 1;
    }
    const double triplet = (double)in->sum_triplet / L, active = (double)in->sum_triplet * K;
    const double miss_b = v_miss * triplet, disk_b = h_miss * triplet;
    struct disk_rate dr;
    int rc = disk_rate(o, lay, in->curve, h_miss, disk_b > 0, &dr);
    if (rc) return rc;
    const double t_fixed = in->hp->n_layer * layer_us * 1e-6;
    const double t_hbm = ((double)in->dense_per_token + active - miss_b) / (hbm * 1e9);
    const double t_disk = disk_b > 0 ? disk_b / (dr.gbs * 1e9) : 0;
    const double t_mode[3] = {miss_b / ((pcie + mem) * 1e9), miss_b / (pcie * 1e9), miss_b / (mem * 1e9)};
    static const char *const mode[3] = {"auto", "copy", "cpu"};
    char vflag[32], hflag[32];
    if (vfull) snprintf(vflag, sizeof vflag, "full");
    else snprintf(vflag, sizeof vflag, "%llu", (unsigned long long)(vplan.total_bytes >> 20));
    if (hplan.n_slots >= X) snprintf(hflag, sizeof hflag, "full");
    else snprintf(hflag, sizeof hflag, "%llu", (unsigned long long)(hplan.total_bytes >> 20));
    fprintf(out, "plan: --backend cuda --gpu-cache-mib %s (%u of %u experts per layer in VRAM)", vflag, vplan.n_slots, X);
    if (!vfull) fprintf(out, " --cache-mib %s (%u per layer in RAM)", hflag, hplan.n_slots);
    fprintf(out, "\n");
    if (vfull) {
        fprintf(out, "  every expert resident in VRAM: %.1f MiB per token over HBM\n",
                ((double)in->dense_per_token + active) / MiB);
        fprintf(out, "  decode                 %10.2f tok/s (%.2f ms per token: %.2f fixed + %.3f HBM); byte floor %.0f "
                     "tok/s\n", 1 / (t_fixed + t_hbm), 1e3 * (t_fixed + t_hbm), 1e3 * t_fixed, 1e3 * t_hbm, 1 / t_hbm);
        return 0;
    }
    fprintf(out, "  VRAM hit rate          %10.1f %% (%s)\n", 100 * v_hit, how);
    fprintf(out, "  VRAM misses per token  %10.2f experts, %.1f MiB\n", v_miss, miss_b / MiB);
    fprintf(out, "  host misses per token  %10.2f experts, %.1f MiB (host hit rate %.1f %%)", h_miss, disk_b / MiB,
            100 * h_hit);
    if (disk_b > 0) fprintf(out, ", disk %.2f GB/s (%s)", dr.gbs, dr.src);
    fprintf(out, "\n");
    fprintf(out, "  per token              %10.2f ms fixed GPU time + %.3f ms HBM + %.2f ms disk, and the misses:\n",
            1e3 * t_fixed, 1e3 * t_hbm, 1e3 * t_disk);
    for (int m = 0; m < 3; m++)
        fprintf(out, "  --gpu-miss %-4s        %10.2f tok/s predicted (misses %.2f ms; byte floor %.1f tok/s)\n", mode[m],
                1 / (t_fixed + t_hbm + t_disk + t_mode[m]), 1e3 * t_mode[m], 1 / (t_hbm + t_disk + t_mode[m]));
    return 0;
}

int strata_plan(const struct strata_plan_opts *o, FILE *out)
{
    struct strata_gguf_file *f = NULL;
    struct strata_hparams hp;
    struct strata_expert_layout lay = {0};
    struct strata_trace tr = {0};
    int rc = strata_gguf_open(&f, o->model);
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
    struct strata_disk_curve curve = {0};
    if (rc == 0 && o->disk_curve) rc = strata_disk_curve_load(&curve, o->disk_curve);
    if (rc) goto out;
    const double GiB = 1073741824.0, MiB = 1048576.0;
    const int n_ctx = o->n_ctx > 0 ? o->n_ctx : 4096;
    const double mem = o->mem_gbs > 0 ? o->mem_gbs : 12.0;
    // the KV cache at the default type, auto's, on the CPU or (a GPU plan) the device
    const bool gpu_plan = o->gpu_mib > 0 || o->gpu_cache_mib;
    const uint32_t kv_elem = strata_engine_kv_auto(&hp, !gpu_plan) == STRATA_KV_F16 ? 2 : 4;
    const uint64_t kv = strata_hparams_kv_bytes_per_token(&hp, kv_elem) * (uint64_t)n_ctx;
    // Chunk scratch of the forward pass at 512 tokens, and the runtime (roughly, rounded up).
    uint64_t scratch = 512ull * (hp.n_embd * 8ull + (uint64_t)hp.n_expert_used * hp.n_ff_exp * 3 +
                                 hp.n_expert) * sizeof(float) + (16ull << 20);
    if (gpu_plan)  // the GPU attention's partial results of a 512-token chunk at the default pass
        scratch += sizeof(float) * strata_cuda_attn_scratch_floats_pass(512, n_ctx, hp.n_head, hp.head_dim_v,
                                                                        STRATA_CUDA_ATTN_PASS_DEFAULT);
    const uint64_t reserve = (uint64_t)(o->reserve_gib * GiB);
    const uint64_t ram = (uint64_t)(o->ram_gib * GiB);
    const uint64_t fixed = lay.dense_bytes + kv + scratch + reserve;
    struct strata_slot_plan full, plan;
    strata_expert_layout_plan(&lay, 0, true, &full);
    const uint64_t budget = o->cache_mib ? o->cache_mib << 20 : ram > fixed ? ram - fixed : 0;
    // (a plan of budget 0 means full residency, so an empty budget is priced by hand)
    if (budget >= full.total_bytes) plan = full;
    else if (budget > 0) strata_expert_layout_plan(&lay, budget, true, &plan);
    else memset(&plan, 0, sizeof plan);
    uint64_t sum_triplet = 0, active = 0;
    for (uint32_t l = 0; l < lay.n_layers; l++) sum_triplet += lay.layers[l].triplet_bytes;
    active = sum_triplet * hp.n_expert_used;
    const struct strata_gguf_tensor *emb = strata_gguf_find_tensor(f, "token_embd.weight");
    const uint64_t dense_per_token = lay.dense_bytes - (emb && strata_gguf_find_tensor(f, "output.weight") ? emb->n_bytes : 0);

    fprintf(out, "model: %s\n", o->model);
    fprintf(out, "  layers %u, experts %u (top-%u), %u MoE layers\n", hp.n_layer, hp.n_expert, hp.n_expert_used,
            lay.n_layers);
    fprintf(out, "  dense bytes            %10.1f MiB\n", lay.dense_bytes / MiB);
    fprintf(out, "  expert bytes           %10.1f MiB\n", lay.expert_bytes / MiB);
    fprintf(out, "  full residency         %10.1f MiB (dense + %u experts x slots, %u size class%s:",
            (lay.dense_bytes + full.total_bytes) / MiB, lay.n_expert, lay.n_classes, lay.n_classes == 1 ? "" : "es");
    for (uint32_t c = 0; c < lay.n_classes && c < 64; c++) fprintf(out, " %.0f KiB", lay.class_bytes[c] / 1024.0);
    fprintf(out, ")\n");
    fprintf(out, "  KV cache (ctx %d, %s) %10.1f MiB\n", n_ctx, kv_elem == 2 ? "f16" : "f32", kv / MiB);
    fprintf(out, "  scratch + runtime      %10.1f MiB\n", scratch / MiB);
    if (gpu_plan) {
        const struct gpu_plan_in in = {&hp, &lay, o->trace ? &tr : NULL, &curve, kv, scratch, dense_per_token,
                                       sum_triplet};
        rc = plan_gpu(o, &in, out);
        goto out;
    }
    if (o->cache_mib) fprintf(out, "machine: --cache-mib %llu given, memory %.1f GB/s\n",
                              (unsigned long long)o->cache_mib, mem);
    else fprintf(out, "machine: %.1f GiB RAM, %.1f GiB reserved, memory %.1f GB/s\n", o->ram_gib, reserve / GiB, mem);
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
        if ((rc = strata_sim_run(&tr, o->lru ? STRATA_SIM_LRU : STRATA_SIM_LFU, plan.n_slots, false, &r))) goto out;
        miss_per_token = r.tokens ? (double)r.misses / (double)r.tokens : 0;
        hit_rate = r.hits + r.misses ? (double)r.hits / (double)(r.hits + r.misses) : 1.0;
        miss_bytes = miss_per_token * (double)sum_triplet / lay.n_layers;
    } else {
        const double p_miss = 1.0 - (double)plan.n_slots / lay.n_expert;
        hit_rate = 1.0 - p_miss;
        miss_per_token = p_miss * hp.n_expert_used * lay.n_layers;
        miss_bytes = p_miss * (double)active;
    }
    struct disk_rate dr;
    if ((rc = disk_rate(o, &lay, &curve, miss_per_token, miss_bytes > 0, &dr))) goto out;
    const double disk = dr.gbs;
    const char *disk_src = dr.src;
    const uint64_t read_bytes = dr.read_bytes;
    const int depth = dr.depth;
    const double mem_s = (double)(dense_per_token + active) / (mem * 1e9);
    const double io_s = miss_bytes > 0 ? miss_bytes / (disk * 1e9) : 0;
    char flag[32];
    if (plan.n_slots >= lay.n_expert) snprintf(flag, sizeof flag, "full");
    else snprintf(flag, sizeof flag, "%llu", (unsigned long long)(plan.total_bytes >> 20));
    fprintf(out, "plan: --cache-mib %s  (%.1f MiB of slots, %u slots per layer, %s)\n", flag,
            plan.total_bytes / MiB, plan.n_slots, plan.uniform ? "uniform slots" : "size classes");
    fprintf(out, "  expected hit rate      %10.1f %% (%s)\n", 100 * hit_rate,
            !o->trace ? "uniform routing" : o->lru ? "LRU replay of the trace" : "LFU replay of the trace");
    fprintf(out, "  misses per token       %10.2f experts, %.1f MiB\n", miss_per_token, miss_bytes / MiB);
    fprintf(out, "  resident bytes / token %10.1f MiB\n", (dense_per_token + active) / MiB);
    if (miss_bytes > 0)
        fprintf(out, "  disk                   %10.2f GB/s (%s: %.0f KiB reads, %d in flight)\n", disk, disk_src,
                read_bytes / 1024.0, depth);
    fprintf(out, "  time per token         %10.1f ms (memory %.1f + disk %.1f, not overlapped)\n",
            1e3 * (mem_s + io_s), 1e3 * mem_s, 1e3 * io_s);
    fprintf(out, "  byte floor             %10.2f tok/s (the predicted decode speed)\n",
            mem_s + io_s > 0 ? 1.0 / (mem_s + io_s) : 0);
    // Prefetch can at best hide one of the two behind the other.
    const double over_s = mem_s > io_s ? mem_s : io_s;
    if (io_s > 0)
        fprintf(out, "  overlapped bound       %10.2f tok/s (memory and disk fully overlapped by prefetch; I/O wait "
                     ">= %.1f ms/token)\n", 1.0 / over_s, io_s > mem_s ? 1e3 * (io_s - mem_s) : 0.0);
out:
    strata_trace_free(&tr);
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
    return rc;
}
