// strata serve: options -> the HTTP server (src/server/).
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "server/server.h"

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: strata serve -m MODEL.gguf [options]\n\n"
            "OpenAI (/v1/chat/completions, /v1/completions) and Anthropic (/v1/messages) API,\n"
            "a chat page at /, /health, /metrics (Prometheus), /v1/models.\n\n"
            "  -m, --model FILE      GGUF model\n"
            "  --host ADDR           address to listen on (default 127.0.0.1: this machine only)\n"
            "  --port N              port (default 8080; 0 picks a free one, printed at start)\n"
            "  --parallel N          requests generating at once (default 4)\n"
            "  --queue N             requests waiting beyond those before 429 (default 64)\n"
            "  --api-key KEY         require 'Authorization: Bearer KEY' or 'x-api-key: KEY'\n"
            "                        (also read from STRATA_API_KEY)\n"
            "  --alias NAME          model name in responses and /v1/models (default: file name)\n"
            "  -c, --ctx N           context per session (default: min(model, 4096))\n"
            "  -b, --batch N         prompt tokens per forward pass (default 2048 on the CPU, 512 on a GPU or with --mem-mib)\n"
            "  -t, --threads N       compute threads (default: all cores)\n"
            "  --max-body N          request body limit in KiB (default 4096)\n"
            "  --max-tokens N        cap on tokens generated per request (default: the context)\n"
            "  --no-prefix-reuse     evaluate every prompt from the start\n");
    fputs(cli_store_usage, out);
}

int cli_serve(int argc, char **argv)
{
    enum { O_HOST = 2000, O_PORT, O_PARALLEL, O_QUEUE, O_KEY, O_ALIAS, O_MAX_BODY, O_MAX_TOKENS, O_NO_REUSE };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},      {"host", required_argument, 0, O_HOST},
        {"port", required_argument, 0, O_PORT},    {"parallel", required_argument, 0, O_PARALLEL},
        {"queue", required_argument, 0, O_QUEUE},  {"api-key", required_argument, 0, O_KEY},
        {"alias", required_argument, 0, O_ALIAS},  {"ctx", required_argument, 0, 'c'},
        {"batch", required_argument, 0, 'b'},      {"threads", required_argument, 0, 't'},
        {"max-body", required_argument, 0, O_MAX_BODY}, {"max-tokens", required_argument, 0, O_MAX_TOKENS},
        {"no-prefix-reuse", no_argument, 0, O_NO_REUSE}, {"help", no_argument, 0, 'h'},
        CLI_STORE_OPTIONS,                         {0, 0, 0, 0}};
    struct srv_config cfg = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .queue = 64,
                             .max_body = 4096u << 10, .ep = strata_engine_default_params()};
    struct cli_report_opts ro = {0};   // the server reports through /metrics
    cfg.api_key = getenv("STRATA_API_KEY");
    if (cfg.api_key && !*cfg.api_key) cfg.api_key = NULL;
    int max_body_kib = 4096, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:c:b:t:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': cfg.model_path = optarg; break;
        case O_HOST: cfg.host = optarg; break;
        case O_PORT: bad = cli_parse_int(optarg, "--port", 0, 65535, &cfg.port); break;
        case O_PARALLEL: bad = cli_parse_int(optarg, "--parallel", 1, 256, &cfg.parallel); break;
        case O_QUEUE: bad = cli_parse_int(optarg, "--queue", 0, 1 << 16, &cfg.queue); break;
        case O_KEY: cfg.api_key = optarg; break;
        case O_ALIAS: cfg.model_id = optarg; break;
        case 'c': bad = cli_parse_int(optarg, "-c", 1, 1 << 24, &cfg.n_ctx); break;
        case 'b': bad = cli_parse_int(optarg, "-b", 1, 1 << 16, &cfg.n_batch); break;
        case 't': bad = cli_parse_int(optarg, "-t", 1, 1024, &cfg.n_threads); break;
        case O_MAX_BODY: bad = cli_parse_int(optarg, "--max-body", 1, 1 << 20, &max_body_kib); break;
        case O_MAX_TOKENS: bad = cli_parse_int(optarg, "--max-tokens", 1, 1 << 24, &cfg.max_tokens); break;
        case O_NO_REUSE: cfg.no_prefix_reuse = true; break;
        case 'h': serve_usage(stdout); return 0;
        CLI_CASE_STORE_OPTIONS: bad = cli_parse_store_opt(c, optarg, &cfg.ep, &ro); break;
        default:
            fprintf(stderr, "strata serve: bad option '%s' (see strata serve --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "strata serve: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!cfg.model_path) {
        fprintf(stderr, "strata serve: no model given (-m MODEL.gguf)\n");
        return 2;
    }
    cfg.max_body = (size_t)max_body_kib << 10;
    return srv_main(&cfg) ? 1 : 0;
}
