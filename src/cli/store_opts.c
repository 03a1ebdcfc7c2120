// Expert-store options shared by run and eval (--cache-mib, --cache-classes, --io, --io-threads,
// --stats-layers, --trace-out) and the store's part of the JSON output and the human summary.
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

const char *const cli_store_usage =
    "  --cache-mib N|full    RAM for routed experts (default full: all resident)\n"
    "  --cache-classes on|off  one slot size per layer type (default on)\n"
    "  --cache-policy lfu|lru  which expert a miss replaces: the least frequently used so far\n"
    "                        (default) or the least recently used\n"
    "  --io pread|uring      expert reads: io_uring + O_DIRECT (default; pread pool where io_uring\n"
    "                        is unavailable) or a pread thread pool through the page cache\n"
    "  --io-threads N        pread threads / io_uring queue depth (default 4)\n"
    "  --stats-layers        per-layer expert cache counters in the summary / --json\n"
    "  --trace-out FILE      write every token's expert ids per layer (strata sim replays it)\n";

int cli_parse_store_opt(int c, const char *arg, struct strata_experts_config *cfg)
{
    switch (c) {
    case CLI_OPT_CACHE_MIB: {
        if (strcmp(arg, "full") == 0) {
            cfg->cache_bytes = 0;
            return 0;
        }
        uint64_t mib;
        if (cli_parse_u64(arg, "--cache-mib", &mib)) return 1;
        if (mib == 0 || mib > (1ull << 40)) {
            fprintf(stderr, "strata: --cache-mib: '%s' must be 1..2^40 or 'full'\n", arg);
            return 1;
        }
        cfg->cache_bytes = mib << 20;
        return 0;
    }
    case CLI_OPT_CACHE_CLASSES:
        if (strcmp(arg, "on") && strcmp(arg, "off")) {
            fprintf(stderr, "strata: --cache-classes: '%s' is not on or off\n", arg);
            return 1;
        }
        cfg->no_classes = strcmp(arg, "off") == 0;
        return 0;
    case CLI_OPT_IO:
        if (strcmp(arg, "pread") == 0) cfg->io = STRATA_IO_PREAD;
        else if (strcmp(arg, "uring") == 0) cfg->io = STRATA_IO_URING;
        else {
            fprintf(stderr, "strata: --io: '%s' is not pread or uring\n", arg);
            return 1;
        }
        return 0;
    case CLI_OPT_IO_THREADS: return cli_parse_int(arg, "--io-threads", 1, 256, &cfg->io_threads);
    case CLI_OPT_CACHE_POLICY:
        if (strcmp(arg, "lru") == 0) cfg->policy = STRATA_POLICY_LRU;
        else if (strcmp(arg, "lfu") == 0) cfg->policy = STRATA_POLICY_LFU;
        else {
            fprintf(stderr, "strata: --cache-policy: '%s' is not lfu or lru\n", arg);
            return 1;
        }
        return 0;
    case CLI_OPT_STATS_LAYERS: cfg->stats_layers = true; return 0;
    case CLI_OPT_TRACE_OUT: cfg->trace_path = arg; return 0;
    default: return 1;
    }
}

void cli_store_json(cJSON *js, const struct strata_model *m, const struct strata_experts_config *cfg,
                    double seconds)
{
    struct strata_experts_stats st;
    strata_model_expert_stats(m, &st);
    cJSON *o = cJSON_AddObjectToObject(js, "experts");
    const uint64_t acc = st.hits + st.misses;
    cJSON_AddStringToObject(o, "cache", st.full ? "full" : "bounded");
    cJSON_AddNumberToObject(o, "cache_mib", st.slot_bytes_total / 1048576.0);
    cJSON_AddNumberToObject(o, "slots_per_layer", st.slots_per_layer);
    cJSON_AddNumberToObject(o, "classes", st.n_classes);
    cJSON_AddStringToObject(o, "policy", strata_cache_policy_name(cfg->policy));
    cJSON_AddStringToObject(o, "io", strata_io_engine_name(cfg->io));
    cJSON_AddNumberToObject(o, "io_threads", st.io_depth);
    cJSON_AddBoolToObject(o, "io_direct", st.io_direct);
    cJSON_AddNumberToObject(o, "io_buffer_mib", st.io_buffer_bytes / 1048576.0);
    cJSON_AddNumberToObject(o, "hits", (double)st.hits);
    cJSON_AddNumberToObject(o, "misses", (double)st.misses);
    cJSON_AddNumberToObject(o, "evictions", (double)st.evictions);
    cJSON_AddNumberToObject(o, "hit_rate", acc ? (double)st.hits / (double)acc : 1.0);
    cJSON_AddNumberToObject(o, "bytes_read", (double)st.bytes_read);
    cJSON_AddNumberToObject(o, "reads", (double)st.reads);
    cJSON_AddNumberToObject(o, "retries", (double)st.retries);
    cJSON_AddNumberToObject(o, "io_wait_s", st.io_wait_s);
    cJSON_AddNumberToObject(o, "read_gbs", st.io_wait_s > 0 ? st.bytes_read / st.io_wait_s / 1e9 : 0);
    cJSON_AddNumberToObject(o, "prefetched", (double)st.prefetched);
    cJSON_AddNumberToObject(o, "prefetch_used", (double)st.prefetch_used);
    cJSON_AddNumberToObject(o, "joined", (double)st.joined);
    cJSON_AddNumberToObject(o, "preload_bytes", (double)st.preload_bytes);
    cJSON_AddNumberToObject(o, "preload_s", st.preload_s);
    cJSON_AddNumberToObject(o, "seconds", seconds);
    if (cfg->stats_layers) {
        cJSON *arr = cJSON_AddArrayToObject(o, "layers");
        const uint32_t L = strata_model_hparams(m)->n_layer;
        for (uint32_t l = 0; l < L; l++) {
            struct strata_experts_layer_stats ls;
            strata_model_expert_layer_stats(m, l, &ls);
            cJSON *x = cJSON_CreateObject();
            cJSON_AddNumberToObject(x, "layer", l);
            cJSON_AddNumberToObject(x, "hits", (double)ls.hits);
            cJSON_AddNumberToObject(x, "misses", (double)ls.misses);
            cJSON_AddNumberToObject(x, "evictions", (double)ls.evictions);
            cJSON_AddNumberToObject(x, "bytes_read", (double)ls.bytes_read);
            cJSON_AddNumberToObject(x, "prefetched", (double)ls.prefetched);
            cJSON_AddNumberToObject(x, "prefetch_used", (double)ls.prefetch_used);
            cJSON_AddItemToArray(arr, x);
        }
    }
}

void cli_store_summary(FILE *out, const struct strata_model *m, const struct strata_experts_config *cfg)
{
    struct strata_experts_stats st;
    strata_model_expert_stats(m, &st);
    const uint64_t acc = st.hits + st.misses;
    fprintf(out,
            "experts: %s cache %.0f MiB (%u slots/layer, %u class%s), hit rate %.1f%% (%llu hits, %llu misses, "
            "%llu evictions), read %.1f MiB in %.2f s I/O wait (%.2f GB/s, %s)%s\n",
            st.full ? "full" : "bounded", st.slot_bytes_total / 1048576.0, st.slots_per_layer, st.n_classes,
            st.n_classes == 1 ? "" : "es", acc ? 100.0 * (double)st.hits / (double)acc : 100.0,
            (unsigned long long)st.hits, (unsigned long long)st.misses, (unsigned long long)st.evictions,
            st.bytes_read / 1048576.0, st.io_wait_s, st.io_wait_s > 0 ? st.bytes_read / st.io_wait_s / 1e9 : 0.0,
            strata_io_engine_name(cfg->io), st.retries ? " (with retries)" : "");
    if (!cfg->stats_layers) return;
    const uint32_t L = strata_model_hparams(m)->n_layer;
    for (uint32_t l = 0; l < L; l++) {
        struct strata_experts_layer_stats ls;
        strata_model_expert_layer_stats(m, l, &ls);
        const uint64_t a = ls.hits + ls.misses;
        fprintf(out, "  layer %3u: hit rate %5.1f%%  hits %llu  misses %llu  evictions %llu  read %.1f MiB\n", l,
                a ? 100.0 * (double)ls.hits / (double)a : 100.0, (unsigned long long)ls.hits,
                (unsigned long long)ls.misses, (unsigned long long)ls.evictions, ls.bytes_read / 1048576.0);
    }
}
