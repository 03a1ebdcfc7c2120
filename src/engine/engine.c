// The engine (include/strata.h): opening a model on a backend with its expert store, tokenizer
// and forward scratch; model information, statistics and the last error; tokens, text and chat.
#include "engine/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend/cpu/gemm.h"
#include "backend/cpu/kernels.h"
#include "experts/trace.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "util/log.h"
#include "util/time.h"

struct strata_engine_params strata_engine_default_params(void)
{
    return (struct strata_engine_params){
        .backend = STRATA_BACKEND_AUTO,
        .io = STRATA_IO_URING,  // faster than pread, measured in docs/expert-store.md
        .cache_classes = true,
    };
}

static const char *const g_kv_type_names[STRATA_KV_COUNT] = {"auto", "f32", "f16", "bf16", "q8_0"};
// auto's entry is never used for a cache (open_parts_on resolves it)
static const uint32_t g_kv_types[STRATA_KV_COUNT] = {STRATA_TYPE_F32, STRATA_TYPE_F32, STRATA_TYPE_F16,
                                                     STRATA_TYPE_BF16, STRATA_TYPE_Q8_0};

const char *strata_kv_type_name(enum strata_kv_type t)
{
    return (unsigned)t < STRATA_KV_COUNT ? g_kv_type_names[t] : "?";
}

int strata_kv_type_parse(const char *name, enum strata_kv_type *out)
{
    for (int t = 0; name && t < STRATA_KV_COUNT; t++)
        if (strcasecmp(name, g_kv_type_names[t]) == 0) {
            *out = (enum strata_kv_type)t;
            return 0;
        }
    strata_log_error("KV cache type '%s': strata has auto, f32, f16, bf16 and q8_0", name ? name : "(null)");
    return STRATA_EARG;
}

uint32_t strata_engine_kv_type(enum strata_kv_type t) { return g_kv_types[t]; }

enum strata_kv_type strata_engine_kv_auto(const struct strata_hparams *hp, bool on_cpu)
{
    return on_cpu && strata_hparams_kv_typed(hp) ? STRATA_KV_F16 : STRATA_KV_F32;
}

int strata_engine_fail(struct strata_engine *e, int rc)
{
    if (!e || rc == 0) return rc;
    pthread_mutex_lock(&e->err_mu);
    snprintf(e->errmsg, sizeof e->errmsg, "%s", strata_last_error());
    pthread_mutex_unlock(&e->err_mu);
    return rc;
}

const char *strata_engine_errmsg(const struct strata_engine *e)
{
    return e ? e->errmsg : strata_last_error();
}

static int check_params(const struct strata_engine_params *p)
{
    if (!p || !p->model) {
        strata_log_error("engine_open: no model path given");
        return STRATA_EARG;
    }
    if ((unsigned)p->backend >= STRATA_BACKEND_COUNT || (unsigned)p->io >= STRATA_IO_COUNT ||
        (unsigned)p->cache_policy >= STRATA_POLICY_COUNT || (unsigned)p->cache_type_k >= STRATA_KV_COUNT ||
        (unsigned)p->cache_type_v >= STRATA_KV_COUNT || (unsigned)p->gpu_miss >= STRATA_GPU_MISS_COUNT) {
        strata_log_error("engine_open: backend %d / io %d / cache policy %d / KV types %d, %d out of range",
                         (int)p->backend, (int)p->io, (int)p->cache_policy, (int)p->cache_type_k,
                         (int)p->cache_type_v);
        return STRATA_EARG;
    }
    if (p->prefetch_ahead < 0 || p->prefetch_ahead > 8 || p->prefetch_k < 0 || p->prefetch_k > 1024) {
        strata_log_error("engine_open: prefetch %d layers ahead (0..8), %d guesses per token out of range",
                         p->prefetch_ahead, p->prefetch_k);
        return STRATA_EARG;
    }
    if (p->pin_share < 0 || p->pin_share > 1) {
        strata_log_error("engine_open: a pin share of %g is not in 0..1", (double)p->pin_share);
        return STRATA_EARG;
    }
    if (p->n_threads < 0 || p->n_threads > 1024 || p->io_threads < 0 || p->io_threads > 256 || p->gpu < 0 ||
        p->n_ctx < 0 || p->n_ctx > (1 << 24) || p->n_batch < 0 || p->n_batch > (1 << 16)) {
        strata_log_error("engine_open: threads %d, io threads %d, gpu %d, context %d or batch %d out of range",
                         p->n_threads, p->io_threads, p->gpu, p->n_ctx, p->n_batch);
        return STRATA_EARG;
    }
    return 0;
}

// What a memory bound keeps beside the expert slots, the dense weights, the sessions' state and
// the process's own memory at open: the store's tables and read rings, the lookahead, thread
// stacks, allocator slack, the libraries' and the file's metadata pages. Measured over prompt
// lengths, chunk sizes, contexts, threads and both I/O engines (tests/t_mem_bound.sh prints the
// margins): a pass of 512 tokens adds about 24 MiB beyond the accounted parts (with a reserve of
// 32 MiB peak RSS came within 8 MiB of the bound, once the dense weights were no longer counted
// twice), so the reserve is 64 MiB: that, and headroom for larger machines (more threads,
// deeper queues).
#define MEM_RESERVE_BYTES (64ull << 20)

// The process's anonymous resident memory (resident less file-backed pages: the libraries are in
// the reserve). The dense weights are in it: the model reads them into its own memory at load
// (a GPU backend copies them to the device and frees the host copy).
static uint64_t anon_rss_bytes(void)
{
    unsigned long size = 0, resident = 0, shared = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu %lu", &size, &resident, &shared) != 3 || shared > resident) resident = shared = 0;
        fclose(f);
    }
    return (uint64_t)(resident - shared) * (uint64_t)sysconf(_SC_PAGESIZE);
}

#define MIB(x) ((double)(x) / 1048576.0)

// With a memory bound: what it holds besides the expert cache (the process's own memory now, with
// the dense weights, the tokenizer and the forward scratch; every provisioned session's state at
// the full context; the reserve), and the expert cache it leaves (*cache, 0 when the bound is too
// small: logged with the minimum).
static int size_memory_bound(struct strata_engine *e, uint64_t *cache)
{
    const struct strata_engine_params *p = &e->params;
    const uint64_t bound = p->memory_bound_bytes, dense = strata_model_dense_bytes(e->m);
    const uint64_t kv = strata_seq_state_bytes(e->m, e->n_ctx, g_kv_types[e->kv_k], g_kv_types[e->kv_v]);
    const uint64_t rss = anon_rss_bytes();
    e->mem_fixed = rss + (uint64_t)e->n_seq_max * kv + MEM_RESERVE_BYTES;
    const struct strata_expert_layout *lay = strata_model_expert_layout(e->m);
    const uint64_t min_cache = lay->n_layers && e->be.iface->host_memory
                                   ? strata_expert_layout_min_budget(lay, strata_model_hparams(e->m)->n_expert_used)
                                   : 0;
    if (bound < e->mem_fixed + min_cache) {
        strata_log_error("engine_open: a memory bound of %.0f MiB is too small: the minimum is %.0f MiB (the process "
                         "so far %.0f, of which dense weights %.0f; %d session(s) of %d positions %.0f, reserve %.0f, "
                         "the smallest expert cache %.0f)",
                         MIB(bound), MIB(e->mem_fixed + min_cache) + 1, MIB(rss),
                         MIB(e->be.iface->host_memory ? dense : 0), e->n_seq_max, e->n_ctx,
                         MIB((uint64_t)e->n_seq_max * kv), MIB(MEM_RESERVE_BYTES), MIB(min_cache));
        return STRATA_ENOMEM;
    }
    *cache = bound - e->mem_fixed;
    return 0;
}

// The memory bound against what was opened: the accounted parts plus the expert slots.
static int check_memory_bound(const struct strata_engine *e)
{
    const uint64_t bound = e->params.memory_bound_bytes;
    if (!bound || !e->store) return 0;
    const uint64_t need = e->mem_fixed + strata_store_resident_bytes(e->store);
    if (need <= bound) return 0;
    strata_log_error("engine_open: the expert cache of %.0f MiB and the rest (%.0f MiB) need %.0f MiB, over the memory "
                     "bound of %.0f MiB (leave --cache-mib out and the bound sizes the cache)",
                     MIB(strata_store_resident_bytes(e->store)), MIB(e->mem_fixed), MIB(need), MIB(bound));
    return STRATA_ENOMEM;
}

static void close_parts(struct strata_engine *e)
{
    strata_forward_free(e->fwd);
    strata_tokenizer_free(e->tok);
    strata_vram_close(e->vram);
    strata_vram_dev_close(&e->vdev);
    if (e->cpu_be.iface) strata_backend_close(&e->cpu_be);
    e->cpu_be = (struct strata_backend){0};
    strata_store_close(e->store);
    strata_resident_close(e->resident);
    strata_model_free(e->m);
    strata_backend_close(&e->be);
    e->fwd = NULL;
    e->tok = NULL;
    e->store = NULL;
    e->vram = NULL;
    e->resident = NULL;
    e->m = NULL;
    e->chat_template = NULL;
}

static int open_experts(struct strata_engine *e, uint64_t cache, struct strata_expert_pins pins);

// --pin-from: the trace's experts of each MoE layer by use, most first (*rank: [n_layers][n_expert],
// the caller frees it). One error line when the trace cannot be read or is of another model.
static int load_pin_rank(const struct strata_engine *e, uint32_t **rank)
{
    const char *path = e->params.pin_from;
    const struct strata_expert_layout *lay = strata_model_expert_layout(e->m);
    const struct strata_hparams *hp = strata_model_hparams(e->m);
    struct strata_trace t;
    *rank = NULL;
    int rc = strata_trace_load(&t, path);
    if (rc) return rc;
    if (t.n_layers != lay->n_layers || t.n_expert != hp->n_expert || t.topk != hp->n_expert_used) {
        strata_log_error("engine_open: --pin-from %s: the trace is of %u MoE layers x %u experts (top-%u), the model "
                         "has %u x %u (top-%u)", path, t.n_layers, t.n_expert, t.topk, lay->n_layers, hp->n_expert,
                         hp->n_expert_used);
        rc = STRATA_EARG;
    } else if (t.n_tokens == 0) {
        strata_log_error("engine_open: --pin-from %s: the trace has no tokens", path);
        rc = STRATA_EARG;
    }
    if (rc == 0 && !(*rank = malloc((size_t)t.n_layers * t.n_expert * sizeof **rank))) rc = STRATA_ENOMEM;
    for (uint32_t l = 0; rc == 0 && l < t.n_layers; l++) rc = strata_trace_rank(&t, l, *rank + (size_t)l * t.n_expert);
    if (rc) {
        free(*rank);
        *rank = NULL;
    }
    strata_trace_free(&t);
    return rc;
}

// A GPU backend, before the model is uploaded: what the device must hold at least (the dense
// weights, the expert slots: every expert, or the --gpu-cache-mib tier's, and every provisioned
// session's KV cache at the full context, at the smaller of the K and V element sizes; scratch not
// counted) against its free memory now. One line naming the numbers when it cannot fit.
static int check_vram(const struct strata_engine *e)
{
    const struct strata_engine_params *p = &e->params;
    struct strata_backend_mem bm = {0};
    e->be.iface->mem_info(e->be.ctx, &bm);
    if (bm.free == 0) return 0;  // not known: the allocations will say
    struct strata_gguf_file *f = NULL;
    struct strata_hparams hp;
    struct strata_expert_layout lay = {0};
    int rc = strata_gguf_open(&f, p->model);
    if (rc == 0) rc = strata_hparams_load(&hp, f);
    if (rc == 0) rc = strata_expert_layout_init(&lay, f);
    if (rc) {  // the model load reports it
        strata_expert_layout_free(&lay);
        strata_gguf_close(f);
        return 0;
    }
    uint64_t experts = lay.expert_bytes;
    if (p->vram_cache_bytes && lay.n_layers) {
        struct strata_slot_plan vp;
        strata_expert_layout_plan(&lay, p->vram_cache_bytes, p->cache_classes, &vp);
        if (vp.n_slots < lay.n_expert) experts = vp.total_bytes;
    }
    // q8_0: 34 bytes per 32, counted as 1; auto as f32, what it is on a GPU backend (the only
    // one this check runs for)
    static const uint32_t elem[STRATA_KV_COUNT] = {4, 4, 2, 2, 1};
    const uint32_t kv_elem = elem[p->cache_type_k] < elem[p->cache_type_v] ? elem[p->cache_type_k] : elem[p->cache_type_v];
    const int n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp.n_ctx_train < 4096 ? (int)hp.n_ctx_train : 4096);
    const int n_seq = p->n_seq_max > 0 ? p->n_seq_max : 1;
    const uint64_t kv = strata_hparams_kv_bytes_per_token(&hp, kv_elem) * (uint64_t)n_ctx * (uint64_t)n_seq;
    const uint64_t need = lay.dense_bytes + experts + kv;
    if (need > bm.free) {
        strata_log_error("engine_open: the GPU needs at least %.0f MiB (dense weights %.0f, experts %.0f, KV cache of %d "
                         "session(s) at %d positions %.0f; scratch besides) and %s has %.0f MiB free of %.0f: lower "
                         "--gpu-cache-mib (the minimum is one token's experts, %.0f MiB), --ctx or --parallel",
                         MIB(need), MIB(lay.dense_bytes), MIB(experts), n_seq, n_ctx, MIB(kv),
                         bm.device ? bm.device : "the device", MIB(bm.free), MIB(bm.total),
                         lay.n_layers ? MIB(strata_expert_layout_min_budget(&lay, hp.n_expert_used)) : 0.0);
        rc = STRATA_ENOMEM;
    }
    strata_expert_layout_free(&lay);
    strata_gguf_close(f);
    return rc;
}

static int open_parts_on(struct strata_engine *e, enum strata_backend_kind kind)
{
    const struct strata_engine_params *p = &e->params;
    const struct strata_backend_params bp = {kind, p->n_threads, p->gpu, !p->memory_bound_bytes};
    int rc = strata_backend_open(&e->be, &bp);
    if (rc == 0 && !e->be.iface->host_memory && e->be.iface->mem_info) rc = check_vram(e);
    if (rc == 0) rc = strata_model_load(&e->m, p->model, &e->be);
    if (rc) return rc;
    const struct strata_hparams *hp = strata_model_hparams(e->m);
    if ((rc = strata_tokenizer_load(&e->tok, strata_model_file(e->m)))) return rc;
    strata_gguf_get_str(strata_model_file(e->m), "tokenizer.chat_template", &e->chat_template);
    e->n_ctx = p->n_ctx > 0 ? p->n_ctx : (hp->n_ctx_train < 4096 ? (int)hp->n_ctx_train : 4096);
    const bool on_cpu = strcmp(e->be.iface->name, "cpu") == 0;
    // Prompt chunks: every chunk computes every expert its tokens route to once, so on the CPU,
    // where unpacking and streaming an expert's weights is a large share of a chunk, 2,048 tokens
    // (llama.cpp's default logical batch) run a long prompt about 1.24x faster than 512 (16-core
    // host, 8,192 tokens, docs/cpu.md) for more scratch (qwen3-30b-a3b: 343 MiB more than at 512,
    // committed only as a long prompt's rows reach it: lazy_memory below). Under a memory
    // bound that memory goes to the expert cache instead, and GPU backends keep 512.
    e->n_batch = p->n_batch > 0 ? p->n_batch : on_cpu && !p->memory_bound_bytes ? 2048 : 512;
    if (e->n_batch > e->n_ctx) e->n_batch = e->n_ctx;
    e->n_seq_max = p->n_seq_max > 0 ? p->n_seq_max : 1;
    const enum strata_isa isa = on_cpu ? strata_isa_detect() : STRATA_ISA_SCALAR;
    e->isa = on_cpu ? strata_isa_name(isa) : "";
    e->gemm = on_cpu ? strata_gemm_level_name(strata_gemm_level_for(isa)) : "";
    // the KV cache types: auto is F16 (llama.cpp's default: half the memory of F32, and the CPU's
    // long-context decode about 1.5x faster, docs/cpu.md) where the CPU backend runs attention that
    // takes a typed cache, else F32; the types are refused now, not at the first session, when the
    // backend cannot serve this model's attention with them
    const enum strata_kv_type kv_auto = strata_engine_kv_auto(hp, on_cpu);
    e->kv_k = p->cache_type_k == STRATA_KV_AUTO ? kv_auto : p->cache_type_k;
    e->kv_v = p->cache_type_v == STRATA_KV_AUTO ? kv_auto : p->cache_type_v;
    struct strata_seq_state probe;
    if ((rc = strata_seq_state_alloc(&probe, e->m, 1, g_kv_types[e->kv_k], g_kv_types[e->kv_v]))) return rc;
    strata_seq_state_free(&probe, e->m);
    // The scratch first, its provider set once the expert cache is sized: a memory bound sizes
    // the cache from what the rest takes.
    if ((rc = strata_forward_create(&e->fwd, e->m, (struct strata_expert_provider){0}, e->n_batch, e->n_ctx)))
        return rc;
    uint64_t cache = p->host_cache_bytes;
    if (p->memory_bound_bytes) {
        uint64_t left;
        if ((rc = size_memory_bound(e, &left))) return rc;
        const struct strata_expert_layout *lay = strata_model_expert_layout(e->m);
        if (!cache && left < lay->full_residency_bytes - lay->dense_bytes) cache = left;  // else all resident
    }
    const struct strata_expert_layout *lay = strata_model_expert_layout(e->m);
    uint32_t *pin_rank = NULL;
    if (p->pin_from && lay->n_layers && (rc = load_pin_rank(e, &pin_rank))) return rc;
    const struct strata_expert_pins pins = {pin_rank, p->pin_share};
    rc = open_experts(e, cache, pins);
    free(pin_rank);
    if (rc) return rc;
    strata_forward_set_experts(e->fwd, e->experts);
    if (e->cpu_be.iface &&
        (rc = strata_forward_set_gpu_miss(e->fwd, e->vram, strata_store_provider(e->store), &e->cpu_be, p->gpu_miss)))
        return rc;
    if ((rc = check_memory_bound(e))) return rc;
    return strata_forward_set_prefetch(e->fwd, p->prefetch_ahead, (uint32_t)p->prefetch_k);
}

// The expert tiers: the host store (CPU backend, or behind a bounded VRAM tier), the VRAM tier, or
// every expert resident on the device.
static int open_experts(struct strata_engine *e, uint64_t cache, struct strata_expert_pins pins)
{
    const struct strata_engine_params *p = &e->params;
    const struct strata_hparams *hp = strata_model_hparams(e->m);
    const struct strata_expert_layout *lay = strata_model_expert_layout(e->m);
    int rc;
    const struct strata_experts_config ec = {
        .cache_bytes = cache, .no_classes = !p->cache_classes, .io = p->io,
        .io_threads = p->io_threads, .policy = p->cache_policy, .pins = pins,
    };
    struct strata_slot_plan vplan = {0};
    if (!e->be.iface->host_memory && p->vram_cache_bytes)
        strata_expert_layout_plan(lay, p->vram_cache_bytes, p->cache_classes, &vplan);
    if (e->be.iface->host_memory) {
        if ((rc = strata_store_open(&e->store, strata_model_file_rw(e->m), lay, hp->n_expert_used, &ec)))
            return rc;
        e->experts = strata_store_provider(e->store);
    } else if (p->vram_cache_bytes && lay->n_layers && vplan.n_slots < lay->n_expert) {
        // The VRAM tier: bounded device slots over the host store (--cache-mib), over the file.
        if ((rc = strata_store_open(&e->store, strata_model_file_rw(e->m), lay, hp->n_expert_used, &ec))) return rc;
        void *slab;
        size_t slab_bytes;
        strata_store_slab(e->store, &slab, &slab_bytes);
        if ((rc = strata_vram_dev_open(&e->vdev, &e->be, p->gpu, slab, slab_bytes))) return rc;
        const struct strata_vram_config vc = {
            .budget = p->vram_cache_bytes, .no_classes = !p->cache_classes, .policy = p->cache_policy, .pins = pins,
        };
        if ((rc = strata_vram_open(&e->vram, e->vdev, strata_store_provider(e->store), lay, hp->n_expert_used, &vc)))
            return rc;
        e->experts = strata_vram_provider(e->vram);
        if (p->gpu_miss != STRATA_GPU_MISS_COPY) {  // the CPU computes misses (all, or its share)
            // all cores but one (the copy thread's) unless --threads says
            long nc = sysconf(_SC_NPROCESSORS_ONLN);
            const struct strata_backend_params cp = {STRATA_BACKEND_CPU, p->n_threads ? p->n_threads : nc > 2 ? (int)nc - 1 : 1, 0,
                                                     false};
            if ((rc = strata_backend_open(&e->cpu_be, &cp))) return rc;
        }
        strata_log_info("vram experts: %.1f MiB of VRAM slots (%u per layer of %u) over a host cache of %.1f MiB",
                        strata_vram_slot_bytes(e->vram) / 1048576.0, vplan.n_slots, lay->n_expert,
                        strata_store_resident_bytes(e->store) / 1048576.0);
    } else {
        if ((rc = strata_resident_open(&e->resident, &e->be, strata_model_file(e->m), lay))) return rc;
        e->experts = strata_resident_provider(e->resident);
    }
    return 0;
}
static int open_parts(struct strata_engine *e)
{
    int rc = open_parts_on(e, e->params.backend);
    if (rc == STRATA_EUNSUP && e->params.backend == STRATA_BACKEND_AUTO &&
        (!e->be.iface || !e->be.iface->host_memory)) {
        strata_log_warn("engine_open: the GPU backend cannot run this model (%s); using the CPU backend",
                        strata_last_error());
        close_parts(e);
        rc = open_parts_on(e, STRATA_BACKEND_CPU);
    }
    return rc;
}

int strata_engine_open(struct strata_engine **out, const struct strata_engine_params *p)
{
    *out = NULL;
    int rc = check_params(p);
    if (rc) return rc;
    struct strata_engine *e = calloc(1, sizeof *e);
    if (!e) return STRATA_ENOMEM;
    e->params = *p;
    pthread_mutex_init(&e->pass_mu, NULL);
    pthread_mutex_init(&e->err_mu, NULL);
    if ((rc = open_parts(e))) {
        strata_engine_close(e);
        return rc;
    }
    *out = e;
    return 0;
}

void strata_engine_close(struct strata_engine *e)
{
    if (!e) return;
    close_parts(e);
    pthread_mutex_destroy(&e->pass_mu);
    pthread_mutex_destroy(&e->err_mu);
    free(e);
}

void strata_engine_info(const struct strata_engine *e, struct strata_model_info *out)
{
    const struct strata_hparams *hp = strata_model_hparams(e->m);
    const struct strata_tokenizer_info *ti = strata_tokenizer_get_info(e->tok);
    *out = (struct strata_model_info){
        .arch = strata_arch_name(hp->arch),
        .name = hp->name,
        .backend = e->be.iface->name,
        .isa = e->isa,
        .gemm = e->gemm,
        .n_vocab = hp->n_vocab,
        .n_ctx_train = hp->n_ctx_train,
        .n_embd = hp->n_embd,
        .n_layer = hp->n_layer,
        .n_moe_layers = strata_model_expert_layout(e->m)->n_layers,
        .n_expert = hp->n_expert,
        .n_expert_used = hp->n_expert_used,
        .bos = ti->bos,
        .eos = ti->eos,
        .add_bos = ti->add_bos,
        .dense_bytes = strata_model_dense_bytes(e->m),
        .expert_bytes = e->store ? strata_store_resident_bytes(e->store) : strata_resident_bytes(e->resident),
        .mem_other_bytes = e->params.memory_bound_bytes ? e->mem_fixed : 0,
        .n_ctx = e->n_ctx,
        .n_batch = e->n_batch,
        .cache_type_k = strata_kv_type_name(e->kv_k),
        .cache_type_v = strata_kv_type_name(e->kv_v),
        .kv_bytes_per_token = strata_seq_kv_bytes_per_token(e->m, g_kv_types[e->kv_k], g_kv_types[e->kv_v]),
    };
}

// ---- statistics ----------------------------------------------------------------------------------

void strata_stats_add_pass(struct strata_stats *st, const struct strata_fwd_stats *f, int n_tok)
{
    st->t_embed += f->t_embed;
    st->t_attn += f->t_attn;
    st->t_linear_attn += f->t_linear_attn;
    st->t_router += f->t_router;
    st->t_experts += f->t_experts;
    st->t_head += f->t_head;
    struct strata_phase_stats *ph = &st->phases[f->decode];
    ph->t_attn += f->t_attn;
    ph->t_linear_attn += f->t_linear_attn;
    ph->t_router += f->t_router;
    ph->t_experts += f->t_experts;
    ph->t_head += f->t_head;
    ph->bytes_attn += f->b_attn;
    ph->bytes_linear_attn += f->b_linear_attn;
    ph->bytes_router += f->b_router;
    ph->bytes_experts += f->b_experts;
    ph->bytes_head += f->b_head;
    if (f->n_threads) st->n_threads = f->n_threads;
    struct strata_thread_stats *th = &st->threads[f->decode];
    th->passes++;
    th->runs += f->threads.runs;
    th->t_pass += f->threads.t_pass;
    th->t_run += f->threads.t_run;
    th->t_tail += f->threads.t_tail;
    th->t_busy += f->threads.t_busy;
    st->n_tokens += (uint64_t)n_tok;
    st->n_passes++;
}

void strata_engine_expert_stats(struct strata_engine *e, struct strata_stats *st)
{
    struct strata_experts_stats x;
    strata_provider_stats(e->experts, &x);
    if (e->be.iface->mem_info) {
        struct strata_backend_mem bm;
        e->be.iface->mem_info(e->be.ctx, &bm);
        st->vram_used_bytes = bm.used;
        st->vram_peak_bytes = bm.peak;
        st->vram_total_bytes = bm.total;
        st->gpu_graphs_replayed = bm.graphs_replayed;
        st->gpu_graphs_recorded = bm.graphs_recorded;
    }

    if (e->resident) {  // every expert in the GPU's memory: the VRAM tier, no host tier
        st->experts[STRATA_TIER_HOST] = (struct strata_expert_stats){0};
        st->experts[STRATA_TIER_VRAM] = (struct strata_expert_stats){
            .present = true, .full = true, .hits = x.hits, .preload_bytes = x.preload_bytes,
            .preload_s = x.preload_s, .slots_per_layer = x.slots_per_layer, .n_classes = x.n_classes,
            .slot_bytes = x.slot_bytes_total,
        };
        return;
    }
    // The tier the forward pass talks to gets the lookahead's guesses.
    const enum strata_tier front = e->vram ? STRATA_TIER_VRAM : STRATA_TIER_HOST;
    st->experts[STRATA_TIER_VRAM] = (struct strata_expert_stats){0};
    if (e->vram) {  // bytes_read: over PCIe; reads: experts copied; io_wait_s: acquires waiting on copies
        st->experts[STRATA_TIER_VRAM] = (struct strata_expert_stats){
            .present = true, .full = x.full, .hits = x.hits, .misses = x.misses, .evictions = x.evictions,
            .bytes_read = x.bytes_read, .reads = x.reads, .io_wait_s = x.io_wait_s, .prefetched = x.prefetched,
            .prefetch_used = x.prefetch_used, .joined = x.joined, .fetched = x.fetched,
            .slots_per_layer = x.slots_per_layer, .n_classes = x.n_classes, .slot_bytes = x.slot_bytes_total,
            .io_depth = x.io_depth, .pinned = x.pinned, .pin_hits = x.pin_hits, .preload_bytes = x.preload_bytes,
            .preload_s = x.preload_s,
        };
        struct strata_gpu_miss_stats ms;
        pthread_mutex_lock(&e->pass_mu);
        strata_forward_gpu_miss_stats(e->fwd, &ms);
        pthread_mutex_unlock(&e->pass_mu);
        struct strata_expert_stats *vs = &st->experts[STRATA_TIER_VRAM];
        vs->cpu_experts = ms.cpu_experts;
        vs->cpu_pairs = ms.cpu_pairs;
        vs->miss_copied = ms.copied;
        vs->split_used = ms.used;
        vs->split_hits = ms.hits;
        vs->cpu_s = ms.cpu_s;
        vs->cpu_gbps = ms.cpu_experts && ms.s_cpu > 0 ? 1 / ms.s_cpu : 0;
        vs->pcie_gbps = ms.copied && ms.s_pcie > 0 ? 1 / ms.s_pcie : 0;
        strata_provider_stats(strata_store_provider(e->store), &x);
    }
    st->experts[STRATA_TIER_HOST] = (struct strata_expert_stats){
        .present = true, .full = x.full, .hits = x.hits, .misses = x.misses, .evictions = x.evictions,
        .bytes_read = x.bytes_read, .reads = x.reads, .retries = x.retries, .io_wait_s = x.io_wait_s,
        .prefetched = x.prefetched, .prefetch_used = x.prefetch_used, .joined = x.joined,
        .fetched = x.fetched,
        .prefetch_cancelled = x.prefetch_cancelled,
        .preload_bytes = x.preload_bytes,
        .preload_s = x.preload_s, .slots_per_layer = x.slots_per_layer, .n_classes = x.n_classes,
        .slot_bytes = x.slot_bytes_total, .io_buffer_bytes = x.io_buffer_bytes, .io_depth = x.io_depth,
        .io_direct = x.io_direct, .pinned = x.pinned, .pin_hits = x.pin_hits,
    };
    // the lookahead belongs to the forward pass: read between passes
    pthread_mutex_lock(&e->pass_mu);
    for (uint32_t l = 0; l < strata_model_expert_layout(e->m)->n_layers; l++) {
        struct strata_lookahead_stats la;
        strata_forward_lookahead_stats(e->fwd, l, &la);
        st->experts[front].guessed += la.predicted;
        st->experts[front].guessed_used += la.used;
        st->experts[front].guess_correct += la.correct;
    }
    pthread_mutex_unlock(&e->pass_mu);
}

void strata_engine_stats(struct strata_engine *e, struct strata_stats *out)
{
    pthread_mutex_lock(&e->pass_mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->pass_mu);
    strata_engine_expert_stats(e, out);
}

void strata_engine_layer_stats(struct strata_engine *e, enum strata_tier tier, uint32_t layer,
                               struct strata_layer_stats *out)
{
    *out = (struct strata_layer_stats){0};
    const bool vram = e->resident || e->vram;
    if (tier != STRATA_TIER_VRAM && tier != STRATA_TIER_HOST) return;
    if (tier == STRATA_TIER_VRAM ? !vram : !e->store) return;
    struct strata_experts_layer_stats ls;
    strata_provider_layer_stats(tier == STRATA_TIER_HOST && e->vram ? strata_store_provider(e->store) : e->experts,
                                layer, &ls);
    struct strata_lookahead_stats la;
    pthread_mutex_lock(&e->pass_mu);
    strata_forward_lookahead_stats(e->fwd, layer, &la);
    pthread_mutex_unlock(&e->pass_mu);
    *out = (struct strata_layer_stats){ls.hits, ls.misses, ls.evictions, ls.bytes_read, ls.prefetched, ls.prefetch_used,
                                       la.predicted, la.used, la.correct, ls.fetched, ls.io_wait_s};
}

// ---- tokens and text -----------------------------------------------------------------------------

int strata_tokenize(const struct strata_engine *e, const char *text, size_t len, bool add_bos, bool parse_special,
                    int32_t *out, size_t cap, size_t *n)
{
    const struct strata_tokenizer_info *info = strata_tokenizer_get_info(e->tok);
    const size_t off = add_bos && info->add_bos && info->bos >= 0 ? 1 : 0;
    size_t got = 0;
    int rc = strata_tokenizer_encode(e->tok, text, len, parse_special, cap > off ? out + off : NULL,
                                     cap > off ? cap - off : 0, &got);
    *n = got + off;
    if (rc == 0 && *n > cap) {
        strata_log_error("tokenize: %zu tokens do not fit in %zu", *n, cap);
        rc = -ENOSPC;
    }
    if (rc == 0 && off) out[0] = info->bos;
    return strata_engine_fail((struct strata_engine *)e, rc);
}

bool strata_token_is_eog(const struct strata_engine *e, int32_t tok)
{
    return strata_tokenizer_is_eog(e->tok, tok);
}

int strata_token_piece(const struct strata_engine *e, int32_t tok, bool special, const char **piece, size_t *len)
{
    return strata_engine_fail((struct strata_engine *)e, strata_token_to_piece(e->tok, tok, special, piece, len));
}

int strata_detokenize(const struct strata_engine *e, struct strata_detok *d, int32_t tok, char *out, size_t cap,
                      size_t *n)
{
    return strata_engine_fail((struct strata_engine *)e, strata_detok_push(d, e->tok, tok, out, cap, n));
}

int strata_chat_apply(const struct strata_engine *e, const struct strata_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char **out)
{
    return strata_engine_fail((struct strata_engine *)e,
                              strata_chat_render(e->chat_template, msgs, n, add_generation_prompt, out));
}

const char *strata_engine_chat_template(const struct strata_engine *e) { return e->chat_template; }

enum strata_tool_format strata_engine_tool_format(const struct strata_engine *e)
{
    return strata_chat_tool_format(e->chat_template);
}

int strata_chat_apply_tools(const struct strata_engine *e, const struct strata_chat_turn *msgs, size_t n,
                            const char *tools_json, bool add_generation_prompt, char **out)
{
    return strata_engine_fail((struct strata_engine *)e, strata_chat_render_tools(e->chat_template, msgs, n, tools_json,
                                                                                  add_generation_prompt, out));
}
