// Engine options shared by run, eval and serve (--mem-mib, --cache-mib, --cache-classes,
// --cache-policy, --io, --io-threads, --prefetch, --prefetch-k, --stats-layers, --trace-out,
// --backend, --gpu, --gpu-cache-mib, --gpu-miss, --pin-from, --pin-share, --cache-type-k, --cache-type-v)
// and the store's part of the
// JSON output and the human summary.
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "util/mem.h"

const char *const cli_store_usage =
    "  --mem-mib N           bound the whole process to N MiB: the expert cache gets what is left\n"
    "                        after the dense weights, the KV cache at the full context (of each\n"
    "                        --parallel session), scratch and a reserve; too small a bound is refused\n"
    "                        naming the minimum\n"
    "  --cache-mib N|full    RAM for routed experts (default full: all resident, or what --mem-mib leaves)\n"
    "  --cache-classes on|off  one slot size per layer type (default on)\n"
    "  --cache-policy lfu|lru  which expert a miss replaces: the least frequently used so far\n"
    "                        (default) or the least recently used\n"
    "  --io pread|uring      expert reads: io_uring + O_DIRECT (default; pread pool where io_uring\n"
    "                        is unavailable) or a pread thread pool through the page cache\n"
    "  --io-threads N        pread threads / io_uring queue depth (default 4)\n"
    "  --prefetch N|off      router lookahead: guess the experts of the next N MoE layers from the\n"
    "                        current hidden state and read the missing ones while a layer\n"
    "                        computes (default off)\n"
    "  --prefetch-k N        prefetch a token's first N guesses only (default: all of its top-k)\n"
    "  --stats-layers        per-layer expert cache counters in the summary / --json\n"
    "  --trace-out FILE      write every token's expert ids per layer (strata sim replays it)\n"
    "  --pin-from TRACE      pin each layer's experts that TRACE (a --trace-out file of this model)\n"
    "                        used most in every bounded expert cache (RAM and VRAM): read at open,\n"
    "                        never evicted; the other slots follow --cache-policy\n"
    "  --pin-share F         share of each cache's slots per layer for them (default 0.25; at most\n"
    "                        all but one token's experts)\n"
    "  --backend auto|cpu|cuda  where the forward pass runs; auto (the default): cuda when strata\n"
    "                        was built with CUDA (make CUDA=1) and finds a GPU, else cpu; with\n"
    "                        cuda every weight is uploaded to the GPU at load, and every expert\n"
    "                        unless --gpu-cache-mib bounds them\n"
    "  --gpu-cache-mib N|full  VRAM for routed experts with --backend cuda (default full: all\n"
    "                        uploaded at load); N: a cache of VRAM slots filled from the host cache\n"
    "                        (--cache-mib) over PCIe, the file behind it\n"
    "  --gpu-miss auto|copy|cpu  an expert the VRAM cache misses in decode (passes of up to 8\n"
    "                        tokens): copy it over PCIe (output identical at every budget), compute\n"
    "                        it on the CPU from the host copy, or split the misses between the two\n"
    "                        as measured rates say ends first (auto, the default)\n"
    "  --gpu N               GPU index for --backend cuda (default 0)\n"
    "  --cache-type-k T      KV cache type of keys: auto (default), f32, f16, bf16, q8_0; auto is\n"
    "                        f16 (llama.cpp's default) on the CPU where the model's attention takes\n"
    "                        it, else f32; a sliding window, sinks or MLA take f32 only\n"
    "  --cache-type-v T      KV cache type of values, likewise\n";

static const char *const g_io_names[STRATA_IO_COUNT] = {"pread", "uring"};
static const char *const g_policy_names[STRATA_POLICY_COUNT] = {"lfu", "lru"};
static const char *const g_miss_names[STRATA_GPU_MISS_COUNT] = {"auto", "copy", "cpu"};

int cli_parse_store_opt(int c, const char *arg, struct strata_engine_params *p, struct cli_report_opts *r)
{
    switch (c) {
    case CLI_OPT_CACHE_MIB: {
        if (strcmp(arg, "full") == 0) {
            p->host_cache_bytes = 0;
            return 0;
        }
        uint64_t mib;
        if (cli_parse_u64(arg, "--cache-mib", &mib)) return 1;
        if (mib == 0 || mib > (1ull << 40)) {
            fprintf(stderr, "strata: --cache-mib: '%s' must be 1..2^40 or 'full'\n", arg);
            return 1;
        }
        p->host_cache_bytes = mib << 20;
        return 0;
    }
    case CLI_OPT_GPU_CACHE_MIB: {
        if (strcmp(arg, "full") == 0) {
            p->vram_cache_bytes = 0;
            return 0;
        }
        uint64_t mib;
        if (cli_parse_u64(arg, "--gpu-cache-mib", &mib)) return 1;
        if (mib == 0 || mib > (1ull << 40)) {
            fprintf(stderr, "strata: --gpu-cache-mib: '%s' must be 1..2^40 or 'full'\n", arg);
            return 1;
        }
        p->vram_cache_bytes = mib << 20;
        return 0;
    }
    case CLI_OPT_MEM_MIB: {
        uint64_t mib;
        if (cli_parse_u64(arg, "--mem-mib", &mib)) return 1;
        if (mib == 0 || mib > (1ull << 40)) {
            fprintf(stderr, "strata: --mem-mib: '%s' must be 1..2^40\n", arg);
            return 1;
        }
        p->memory_bound_bytes = mib << 20;
        return 0;
    }
    case CLI_OPT_CACHE_CLASSES:
        if (strcmp(arg, "on") && strcmp(arg, "off")) {
            fprintf(stderr, "strata: --cache-classes: '%s' is not on or off\n", arg);
            return 1;
        }
        p->cache_classes = strcmp(arg, "on") == 0;
        return 0;
    case CLI_OPT_IO:
        if (strcmp(arg, "pread") == 0) p->io = STRATA_IO_PREAD;
        else if (strcmp(arg, "uring") == 0) p->io = STRATA_IO_URING;
        else {
            fprintf(stderr, "strata: --io: '%s' is not pread or uring\n", arg);
            return 1;
        }
        return 0;
    case CLI_OPT_IO_THREADS: return cli_parse_int(arg, "--io-threads", 1, 256, &p->io_threads);
    case CLI_OPT_CACHE_POLICY:
        if (strcmp(arg, "lru") == 0) p->cache_policy = STRATA_POLICY_LRU;
        else if (strcmp(arg, "lfu") == 0) p->cache_policy = STRATA_POLICY_LFU;
        else {
            fprintf(stderr, "strata: --cache-policy: '%s' is not lfu or lru\n", arg);
            return 1;
        }
        return 0;
    case CLI_OPT_PREFETCH:
        if (strcmp(arg, "off") == 0) {
            p->prefetch_ahead = 0;
            return 0;
        }
        return cli_parse_int(arg, "--prefetch", 0, 8, &p->prefetch_ahead);
    case CLI_OPT_PREFETCH_K: return cli_parse_int(arg, "--prefetch-k", 1, 1024, &p->prefetch_k);
    case CLI_OPT_CACHE_TYPE_K:
    case CLI_OPT_CACHE_TYPE_V:
        if (strata_kv_type_parse(arg, c == CLI_OPT_CACHE_TYPE_K ? &p->cache_type_k : &p->cache_type_v)) {
            fprintf(stderr, "strata: %s: '%s' is not auto, f32, f16, bf16 or q8_0\n",
                    c == CLI_OPT_CACHE_TYPE_K ? "--cache-type-k" : "--cache-type-v", arg);
            return 1;
        }
        return 0;
    case CLI_OPT_STATS_LAYERS: r->stats_layers = true; return 0;
    case CLI_OPT_TRACE_OUT: r->trace_path = arg; return 0;
    case CLI_OPT_BACKEND:
        if (strcmp(arg, "auto") == 0) p->backend = STRATA_BACKEND_AUTO;
        else if (strcmp(arg, "cpu") == 0) p->backend = STRATA_BACKEND_CPU;
        else if (strcmp(arg, "cuda") == 0) p->backend = STRATA_BACKEND_CUDA;
        else {
            fprintf(stderr, "strata: --backend: '%s' is not auto, cpu or cuda\n", arg);
            return 1;
        }
        return 0;
    case CLI_OPT_GPU: return cli_parse_int(arg, "--gpu", 0, 1024, &p->gpu);
    case CLI_OPT_PIN_FROM: p->pin_from = arg; return 0;
    case CLI_OPT_PIN_SHARE: return cli_parse_float(arg, "--pin-share", 0.01, 1, &p->pin_share);
    case CLI_OPT_GPU_MISS:
        for (int m = 0; m < STRATA_GPU_MISS_COUNT; m++)
            if (strcmp(arg, g_miss_names[m]) == 0) {
                p->gpu_miss = (enum strata_gpu_miss)m;
                return 0;
            }
        fprintf(stderr, "strata: --gpu-miss: '%s' is not auto, copy or cpu\n", arg);
        return 1;
    default: return 1;
    }
}

void cli_store_json(cJSON *js, struct strata_engine *e, const struct strata_engine_params *p,
                    const struct cli_report_opts *r, double seconds)
{
    struct strata_stats all;
    strata_engine_stats(e, &all);
    const enum strata_tier tier = all.experts[STRATA_TIER_VRAM].present ? STRATA_TIER_VRAM : STRATA_TIER_HOST;
    const struct strata_expert_stats *st = &all.experts[tier];
    if (all.vram_total_bytes) {
        cJSON_AddNumberToObject(js, "vram_used_mib", all.vram_used_bytes / 1048576.0);
        cJSON_AddNumberToObject(js, "vram_peak_mib", all.vram_peak_bytes / 1048576.0);
        cJSON_AddNumberToObject(js, "vram_total_mib", all.vram_total_bytes / 1048576.0);
        cJSON_AddNumberToObject(js, "gpu_graphs_replayed", (double)all.gpu_graphs_replayed);
        cJSON_AddNumberToObject(js, "gpu_graphs_recorded", (double)all.gpu_graphs_recorded);
    }
    cJSON *o = cJSON_AddObjectToObject(js, "experts");
    cJSON_AddStringToObject(o, "tier", tier == STRATA_TIER_VRAM ? "vram" : "host");
    const uint64_t acc = st->hits + st->misses;
    cJSON_AddStringToObject(o, "cache", st->full ? "full" : "bounded");
    cJSON_AddNumberToObject(o, "cache_mib", st->slot_bytes / 1048576.0);
    cJSON_AddNumberToObject(o, "slots_per_layer", st->slots_per_layer);
    cJSON_AddNumberToObject(o, "classes", st->n_classes);
    cJSON_AddStringToObject(o, "policy", g_policy_names[p->cache_policy]);
    cJSON_AddStringToObject(o, "io", g_io_names[p->io]);
    cJSON_AddNumberToObject(o, "io_threads", st->io_depth);
    cJSON_AddBoolToObject(o, "io_direct", st->io_direct);
    cJSON_AddNumberToObject(o, "io_buffer_mib", st->io_buffer_bytes / 1048576.0);
    cJSON_AddNumberToObject(o, "hits", (double)st->hits);
    cJSON_AddNumberToObject(o, "misses", (double)st->misses);
    cJSON_AddNumberToObject(o, "evictions", (double)st->evictions);
    cJSON_AddNumberToObject(o, "hit_rate", acc ? (double)st->hits / (double)acc : 1.0);
    cJSON_AddNumberToObject(o, "bytes_read", (double)st->bytes_read);
    cJSON_AddNumberToObject(o, "reads", (double)st->reads);
    cJSON_AddNumberToObject(o, "retries", (double)st->retries);
    cJSON_AddNumberToObject(o, "io_wait_s", st->io_wait_s);
    cJSON_AddNumberToObject(o, "read_gbs", st->io_wait_s > 0 ? st->bytes_read / st->io_wait_s / 1e9 : 0);
    cJSON_AddNumberToObject(o, "prefetched", (double)st->prefetched);
    cJSON_AddNumberToObject(o, "prefetch_used", (double)st->prefetch_used);
    cJSON_AddNumberToObject(o, "prefetch_cancelled", (double)st->prefetch_cancelled);
    cJSON_AddNumberToObject(o, "joined", (double)st->joined);
    cJSON_AddNumberToObject(o, "fetched", (double)st->fetched);
    cJSON_AddNumberToObject(o, "prefetch_ahead", p->prefetch_ahead);
    if (p->pin_from) {
        cJSON_AddNumberToObject(o, "pinned", st->pinned);
        cJSON_AddNumberToObject(o, "pin_hits", (double)st->pin_hits);
    }
    if (st->guessed) {
        cJSON_AddNumberToObject(o, "prefetch_recall", st->guessed_used ? (double)st->guess_correct / st->guessed_used : 0);
        cJSON_AddNumberToObject(o, "prefetch_precision", (double)st->guess_correct / st->guessed);
    }
    if (tier == STRATA_TIER_VRAM && !st->full) {  // the VRAM tier over the host store
        cJSON_AddNumberToObject(o, "pcie_bytes", (double)st->bytes_read);
        cJSON_AddNumberToObject(o, "copy_wait_s", st->io_wait_s);
        cJSON_AddStringToObject(o, "miss", g_miss_names[p->gpu_miss]);
        cJSON_AddNumberToObject(o, "cpu_experts", (double)st->cpu_experts);
        cJSON_AddNumberToObject(o, "cpu_pairs", (double)st->cpu_pairs);
        cJSON_AddNumberToObject(o, "cpu_s", st->cpu_s);
        cJSON_AddNumberToObject(o, "miss_copied", (double)st->miss_copied);
        // decode's own hit rate (hit_rate above counts the prompts' accesses too)
        cJSON_AddNumberToObject(o, "split_used", (double)st->split_used);
        cJSON_AddNumberToObject(o, "split_hit_rate", st->split_used ? (double)st->split_hits / (double)st->split_used : 0);
        cJSON_AddNumberToObject(o, "cpu_gbs", st->cpu_gbps);
        cJSON_AddNumberToObject(o, "pcie_gbs", st->pcie_gbps);
        const struct strata_expert_stats *h = &all.experts[STRATA_TIER_HOST];
        const uint64_t ha = h->hits + h->misses;
        cJSON *ho = cJSON_AddObjectToObject(o, "host");
        cJSON_AddStringToObject(ho, "cache", h->full ? "full" : "bounded");
        cJSON_AddNumberToObject(ho, "cache_mib", h->slot_bytes / 1048576.0);
        cJSON_AddNumberToObject(ho, "slots_per_layer", h->slots_per_layer);
        cJSON_AddNumberToObject(ho, "hits", (double)h->hits);
        cJSON_AddNumberToObject(ho, "misses", (double)h->misses);
        cJSON_AddNumberToObject(ho, "evictions", (double)h->evictions);
        cJSON_AddNumberToObject(ho, "hit_rate", ha ? (double)h->hits / (double)ha : 1.0);
        cJSON_AddNumberToObject(ho, "bytes_read", (double)h->bytes_read);
        cJSON_AddNumberToObject(ho, "reads", (double)h->reads);
        cJSON_AddNumberToObject(ho, "io_wait_s", h->io_wait_s);
        if (p->pin_from) {
            cJSON_AddNumberToObject(ho, "pinned", h->pinned);
            cJSON_AddNumberToObject(ho, "pin_hits", (double)h->pin_hits);
        }
        cJSON_AddNumberToObject(ho, "preload_bytes", (double)h->preload_bytes);
        cJSON_AddNumberToObject(ho, "preload_s", h->preload_s);
    }
    cJSON_AddNumberToObject(o, "preload_bytes", (double)st->preload_bytes);
    cJSON_AddNumberToObject(o, "preload_s", st->preload_s);
    cJSON_AddNumberToObject(o, "seconds", seconds);
    if (r->stats_layers) {
        struct strata_model_info info;
        strata_engine_info(e, &info);
        cJSON *arr = cJSON_AddArrayToObject(o, "layers");
        for (uint32_t l = 0; l < info.n_layer; l++) {
            struct strata_layer_stats ls;
            strata_engine_layer_stats(e, tier, l, &ls);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "layer", l);
            cJSON_AddNumberToObject(x, "hits", (double)ls.hits);
            cJSON_AddNumberToObject(x, "misses", (double)ls.misses);
            cJSON_AddNumberToObject(x, "evictions", (double)ls.evictions);
            cJSON_AddNumberToObject(x, "bytes_read", (double)ls.bytes_read);
            cJSON_AddNumberToObject(x, "prefetched", (double)ls.prefetched);
            cJSON_AddNumberToObject(x, "prefetch_used", (double)ls.prefetch_used);
            cJSON_AddNumberToObject(x, "fetched", (double)ls.fetched);
            cJSON_AddNumberToObject(x, "io_wait_s", ls.io_wait_s);
            if (ls.guessed) {
                cJSON_AddNumberToObject(x, "prefetch_recall",
                                        ls.guessed_used ? (double)ls.guess_correct / ls.guessed_used : 0);
                cJSON_AddNumberToObject(x, "prefetch_precision", (double)ls.guess_correct / ls.guessed);
            }
            cJSON_AddItemToArray(arr, x);
        }
    }
}

void cli_kv_json(cJSON *js, struct strata_engine *e, const struct strata_stats *st)
{
    struct strata_model_info info;
    strata_engine_info(e, &info);
    cJSON *o = cJSON_AddObjectToObject(js, "kv_cache");
    cJSON_AddStringToObject(o, "type_k", info.cache_type_k);
    cJSON_AddStringToObject(o, "type_v", info.cache_type_v);
    cJSON_AddNumberToObject(o, "bytes", (double)st->kv_bytes);
    cJSON_AddNumberToObject(o, "bytes_per_token", (double)info.kv_bytes_per_token);
    cJSON_AddNumberToObject(o, "ctx", info.n_ctx);
    cJSON_AddNumberToObject(o, "ctx_bytes", (double)info.kv_bytes_per_token * info.n_ctx);
}

void cli_kv_summary(FILE *out, struct strata_engine *e, const struct strata_stats *st)
{
    struct strata_model_info info;
    strata_engine_info(e, &info);
    fprintf(out, "KV cache: %.1f MiB in use of %.1f MiB at the context of %d (%s/%s, %.0f bytes per context token)\n",
            st->kv_bytes / 1048576.0, (double)info.kv_bytes_per_token * info.n_ctx / 1048576.0, info.n_ctx,
            info.cache_type_k, info.cache_type_v, (double)info.kv_bytes_per_token);
}

static const char *const g_pass_kind[2] = {"prompt", "decode"};

void cli_threads_json(cJSON *js, const struct strata_stats *st)
{
    if (!st->n_threads) return;
    cJSON *o = cJSON_AddObjectToObject(js, "threads");
    cJSON_AddNumberToObject(o, "n", st->n_threads);
    for (int k = 0; k < 2; k++) {
        const struct strata_thread_stats *t = &st->threads[k];
        cJSON *p = cJSON_AddObjectToObject(o, g_pass_kind[k]);
        cJSON_AddNumberToObject(p, "passes", (double)t->passes);
        cJSON_AddNumberToObject(p, "runs", (double)t->runs);
        cJSON_AddNumberToObject(p, "pass_s", t->t_pass);
        cJSON_AddNumberToObject(p, "serial_s", t->t_pass - t->t_run);
        cJSON_AddNumberToObject(p, "runs_s", t->t_run);
        cJSON_AddNumberToObject(p, "tail_s", t->t_tail);
        cJSON_AddNumberToObject(p, "busy_s", t->t_busy);
        // the share of all threads' time in the passes spent working inside runs
        cJSON_AddNumberToObject(p, "utilization", t->t_pass > 0 ? t->t_busy / (st->n_threads * t->t_pass) : 0);
    }
}

void cli_threads_summary(FILE *out, const struct strata_stats *st)
{
    if (!st->n_threads) return;
    for (int k = 0; k < 2; k++) {
        const struct strata_thread_stats *t = &st->threads[k];
        if (!t->passes || t->t_pass <= 0) continue;
        const double n = st->n_threads, all = n * t->t_pass;
        fprintf(out,
                "threads, %s: %d threads working %.0f%% of %.2f s; one thread alone %.2f s (%.0f%%), idle inside "
                "%" PRIu64 " parallel runs %.0f%% (the caller waiting for the last thread %.3f s)\n",
                g_pass_kind[k], st->n_threads, 100.0 * t->t_busy / all, t->t_pass, t->t_pass - t->t_run,
                100.0 * (t->t_pass - t->t_run) / t->t_pass, t->runs, 100.0 * (n * t->t_run - t->t_busy) / all,
                t->t_tail);
    }
}

void cli_memory_json(cJSON *js)
{
    uint64_t anon, huge;
    if (!strata_anon_memory(&anon, &huge)) return;
    cJSON *o = cJSON_AddObjectToObject(js, "memory");
    cJSON_AddNumberToObject(o, "anon_mib", anon / 1048576.0);
    cJSON_AddNumberToObject(o, "anon_huge_mib", huge / 1048576.0);
    cJSON_AddStringToObject(o, "thp", strata_thp_mode());
}

void cli_memory_summary(FILE *out)
{
    uint64_t anon, huge;
    if (!strata_anon_memory(&anon, &huge) || anon == 0) return;
    const char *mode = strata_thp_mode();
    fprintf(out, "huge pages: %.0f of %.0f MiB of anonymous memory (%.0f%%; transparent huge pages: %s)%s\n",
            huge / 1048576.0, anon / 1048576.0, 100.0 * (double)huge / (double)anon, mode,
            strcmp(mode, "never") == 0 ? ": weights on 4 KiB pages, see docs/cpu.md" : "");
}

void cli_store_summary(FILE *out, struct strata_engine *e, const struct strata_engine_params *p,
                       const struct cli_report_opts *r)
{
    struct strata_stats all;
    strata_engine_stats(e, &all);
    const enum strata_tier tier = all.experts[STRATA_TIER_VRAM].present ? STRATA_TIER_VRAM : STRATA_TIER_HOST;
    const struct strata_expert_stats *st = &all.experts[tier];  // reassigned for the host line
    const uint64_t acc = st->hits + st->misses;
    if (tier == STRATA_TIER_VRAM && st->full)
        fprintf(out, "experts: all %.0f MiB resident in VRAM (%u per layer), uploaded in %.2f s\n",
                st->slot_bytes / 1048576.0, st->slots_per_layer, st->preload_s);
    if (tier == STRATA_TIER_VRAM && !st->full)
        fprintf(out, "experts: VRAM cache %.0f MiB (%u slots/layer, %u class%s), hit rate %.1f%% (%llu hits, %llu "
                     "misses, %llu evictions), %.1f MiB over PCIe, %.2f s waiting on copies\n",
                st->slot_bytes / 1048576.0, st->slots_per_layer, st->n_classes, st->n_classes == 1 ? "" : "es",
                acc ? 100.0 * (double)st->hits / (double)acc : 100.0, (unsigned long long)st->hits,
                (unsigned long long)st->misses, (unsigned long long)st->evictions, st->bytes_read / 1048576.0,
                st->io_wait_s);
    if (tier == STRATA_TIER_VRAM && !st->full && st->cpu_experts + st->miss_copied)
        fprintf(out, "experts: misses (--gpu-miss %s): %llu computed on the CPU (%llu token rows, %.2f s, %.1f GB/s), "
                     "%llu copied (%.1f GB/s); hit rate of the decode-sized passes %.1f%% (%llu of %llu experts)\n",
                g_miss_names[p->gpu_miss], (unsigned long long)st->cpu_experts, (unsigned long long)st->cpu_pairs,
                st->cpu_s, st->cpu_gbps, (unsigned long long)st->miss_copied, st->pcie_gbps,
                st->split_used ? 100.0 * (double)st->split_hits / (double)st->split_used : 0.0,
                (unsigned long long)st->split_hits, (unsigned long long)st->split_used);
    if (all.vram_total_bytes)
        fprintf(out, "vram: %.0f MiB used (peak %.0f MiB) of %.0f MiB; decode graphs: %llu passes replayed, %llu "
                     "recorded\n", all.vram_used_bytes / 1048576.0, all.vram_peak_bytes / 1048576.0,
                all.vram_total_bytes / 1048576.0, (unsigned long long)all.gpu_graphs_replayed,
                (unsigned long long)all.gpu_graphs_recorded);
    if (all.experts[STRATA_TIER_HOST].present) {
    st = &all.experts[STRATA_TIER_HOST];
    const uint64_t acc = st->hits + st->misses;
    fprintf(out,
            "experts: %s%s cache %.0f MiB (%u slots/layer, %u class%s), hit rate %.1f%% (%llu hits, %llu misses, "
            "%llu evictions), read %.1f MiB in %.2f s I/O wait (%.2f GB/s, %s)%s\n",
            tier == STRATA_TIER_VRAM ? "host: " : "", st->full ? "full" : "bounded", st->slot_bytes / 1048576.0,
            st->slots_per_layer, st->n_classes,
            st->n_classes == 1 ? "" : "es", acc ? 100.0 * (double)st->hits / (double)acc : 100.0,
            (unsigned long long)st->hits, (unsigned long long)st->misses, (unsigned long long)st->evictions,
            st->bytes_read / 1048576.0, st->io_wait_s, st->io_wait_s > 0 ? st->bytes_read / st->io_wait_s / 1e9 : 0.0,
            g_io_names[p->io], st->retries ? " (with retries)" : "");
    st = &all.experts[tier];
    }
    for (int t = STRATA_TIER_COUNT - 1; p->pin_from && t >= 0; t--)
        if (all.experts[t].present && !all.experts[t].full)
            fprintf(out, "pinned (--pin-from %s): %s%u experts per layer read at open (%.1f MiB in %.2f s), %llu hits "
                         "on them\n", p->pin_from, t == STRATA_TIER_VRAM ? "VRAM " : "", all.experts[t].pinned,
                    all.experts[t].preload_bytes / 1048576.0, all.experts[t].preload_s,
                    (unsigned long long)all.experts[t].pin_hits);
    if (p->prefetch_ahead)
        fprintf(out, "prefetch: %d layer%s ahead, %llu experts read ahead, %llu of them used, %llu given back; guesses "
                     "recall %.1f%%, precision %.1f%%\n", p->prefetch_ahead, p->prefetch_ahead == 1 ? "" : "s",
                (unsigned long long)st->prefetched, (unsigned long long)st->prefetch_used,
                (unsigned long long)st->prefetch_cancelled,
                st->guessed_used ? 100.0 * (double)st->guess_correct / st->guessed_used : 0.0,
                st->guessed ? 100.0 * (double)st->guess_correct / st->guessed : 0.0);
    if (!r->stats_layers) return;
    struct strata_model_info info;
    strata_engine_info(e, &info);
    for (uint32_t l = 0; l < info.n_layer; l++) {
        struct strata_layer_stats ls;
        strata_engine_layer_stats(e, tier, l, &ls);
        const uint64_t a = ls.hits + ls.misses;
        fprintf(out, "  layer %3u: hit rate %5.1f%%  hits %llu  misses %llu  evictions %llu  read %.1f MiB  I/O wait %.3f s",
                l, a ? 100.0 * (double)ls.hits / (double)a : 100.0, (unsigned long long)ls.hits,
                (unsigned long long)ls.misses, (unsigned long long)ls.evictions, ls.bytes_read / 1048576.0,
                ls.io_wait_s);
        if (ls.guessed)
            fprintf(out, "  prefetched %llu used %llu recall %.1f%%", (unsigned long long)ls.prefetched,
                    (unsigned long long)ls.prefetch_used,
                    ls.guessed_used ? 100.0 * (double)ls.guess_correct / (double)ls.guessed_used : 0.0);
        fputc('\n', out);
    }
}
