// Subcommands of the strata CLI and the argument parsers they share.
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "strata.h"

int cli_run(int argc, char **argv);
int cli_eval(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_perplexity(int argc, char **argv);
int cli_serve(int argc, char **argv);

// Parsers print "strata: NAME: ..." and return non-zero on bad input.
int cli_parse_int(const char *s, const char *name, long lo, long hi, int *out);
int cli_parse_u64(const char *s, const char *name, uint64_t *out);
int cli_parse_float(const char *s, const char *name, double lo, double hi, float *out);
// "1,2,3" -> malloc'd array (caller frees).
int cli_parse_ids(const char *s, const char *name, int32_t **out, int *n);
int cli_parse_id_seqs(const char *s, const char *name, int32_t **out, int *n, int **lens, int *n_seqs);

// Engine options of run, eval and serve (expert store, backend, KV cache types): getopt codes, their usage
// lines, the parser.
enum {
    CLI_OPT_CACHE_MIB = 1000, CLI_OPT_CACHE_CLASSES, CLI_OPT_IO, CLI_OPT_IO_THREADS,
    CLI_OPT_STATS_LAYERS, CLI_OPT_TRACE_OUT, CLI_OPT_CACHE_POLICY, CLI_OPT_BACKEND, CLI_OPT_GPU,
    CLI_OPT_PREFETCH, CLI_OPT_PREFETCH_K, CLI_OPT_CACHE_TYPE_K, CLI_OPT_CACHE_TYPE_V, CLI_OPT_MEM_MIB,
    CLI_OPT_GPU_CACHE_MIB, CLI_OPT_GPU_MISS, CLI_OPT_PIN_FROM, CLI_OPT_PIN_SHARE
};
#define CLI_STORE_OPTIONS                                                                          \
    {"cache-mib", required_argument, 0, CLI_OPT_CACHE_MIB},                                        \
        {"cache-classes", required_argument, 0, CLI_OPT_CACHE_CLASSES},                           \
        {"io", required_argument, 0, CLI_OPT_IO}, {"io-threads", required_argument, 0, CLI_OPT_IO_THREADS}, \
        {"stats-layers", no_argument, 0, CLI_OPT_STATS_LAYERS},                                    \
        {"trace-out", required_argument, 0, CLI_OPT_TRACE_OUT},                                    \
        {"cache-policy", required_argument, 0, CLI_OPT_CACHE_POLICY},                             \
        {"backend", required_argument, 0, CLI_OPT_BACKEND}, {"gpu", required_argument, 0, CLI_OPT_GPU},     \
        {"prefetch", required_argument, 0, CLI_OPT_PREFETCH},                                      \
        {"prefetch-k", required_argument, 0, CLI_OPT_PREFETCH_K},                                  \
        {"cache-type-k", required_argument, 0, CLI_OPT_CACHE_TYPE_K},                              \
        {"cache-type-v", required_argument, 0, CLI_OPT_CACHE_TYPE_V},                              \
        {"mem-mib", required_argument, 0, CLI_OPT_MEM_MIB},                                        \
        {"gpu-cache-mib", required_argument, 0, CLI_OPT_GPU_CACHE_MIB},                            \
        {"gpu-miss", required_argument, 0, CLI_OPT_GPU_MISS},                                      \
        {"pin-from", required_argument, 0, CLI_OPT_PIN_FROM},                                      \
        {"pin-share", required_argument, 0, CLI_OPT_PIN_SHARE}
#define CLI_CASE_STORE_OPTIONS                                                                     \
    case CLI_OPT_CACHE_MIB: case CLI_OPT_CACHE_CLASSES: case CLI_OPT_IO: case CLI_OPT_IO_THREADS:   \
    case CLI_OPT_STATS_LAYERS: case CLI_OPT_TRACE_OUT: case CLI_OPT_CACHE_POLICY: case CLI_OPT_BACKEND:   \
    case CLI_OPT_GPU: case CLI_OPT_PREFETCH: case CLI_OPT_PREFETCH_K: case CLI_OPT_CACHE_TYPE_K:    \
    case CLI_OPT_CACHE_TYPE_V: case CLI_OPT_MEM_MIB: case CLI_OPT_GPU_CACHE_MIB: case CLI_OPT_GPU_MISS:    \
    case CLI_OPT_PIN_FROM: case CLI_OPT_PIN_SHARE
extern const char *const cli_store_usage;

// What the CLI does with the statistics beside the engine's parameters.
struct cli_report_opts {
    bool stats_layers;          // per-layer expert counters in the summary / --json
    const char *trace_path;     // route trace of the session, or NULL
};
int cli_parse_store_opt(int c, const char *arg, struct strata_engine_params *p, struct cli_report_opts *r);
// The "experts" object of --json, and the one-line (plus per-layer) human summary.
void cli_store_json(cJSON *js, struct strata_engine *e, const struct strata_engine_params *p,
                    const struct cli_report_opts *r, double seconds);
void cli_store_summary(FILE *out, struct strata_engine *e, const struct strata_engine_params *p,
                       const struct cli_report_opts *r);
// The "kv_cache" object of --json for a session's stats: types, bytes in use now (the cache takes
// memory as the context fills), bytes per position of context, the context and its bytes when
// full (what --mem-mib provisions); and the same as one line of text.
void cli_kv_json(cJSON *js, struct strata_engine *e, const struct strata_stats *st);
void cli_kv_summary(FILE *out, struct strata_engine *e, const struct strata_stats *st);
// The "threads" object of --json (CPU backend: where the host threads' time went in the prompt and
// the decode passes) and its summary lines; nothing on a backend without a thread pool.
void cli_threads_json(cJSON *js, const struct strata_stats *st);
void cli_threads_summary(FILE *out, const struct strata_stats *st);
// The process's anonymous memory on huge pages now and the kernel's mode for them: "memory" in
// --json, a line of the summary.
void cli_memory_json(cJSON *js);
void cli_memory_summary(FILE *out);

int cli_sim(int argc, char **argv);
int cli_plan(int argc, char **argv);

#endif
