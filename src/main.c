// strata command line: a thin client of libstrata.
//   strata synth   write a synthetic GGUF of a real architecture
//   strata inspect show a GGUF's metadata, tensors and expert byte totals
//   strata run     generate text
//   strata eval    teacher-forced logits of every position
//   strata serve   the HTTP server
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "quant/quant.h"
#include "tools/inspect.h"
#include "tools/synth.h"
#include "util/log.h"

static void usage(FILE *out)
{
    fprintf(out,
            "strata — run Mixture-of-Experts models larger than memory\n\n"
            "usage: strata <command> [options]\n\n"
            "commands:\n"
            "  run      -m MODEL -p PROMPT -n N   generate text (strata run --help)\n"
            "  eval     -m MODEL --tokens IDS --logits-out FILE   teacher-forced logits\n"
            "  inspect  MODEL.gguf [--json]     metadata, tensors, dense/expert byte totals\n"
            "  synth    --arch A --preset P -o OUT.gguf   write a synthetic model\n"
            "  demo                             a model larger than its expert cache, streamed and resident\n"
            "  perplexity -m MODEL -f TEXT      perplexity in llama.cpp's chunking (strata perplexity --help)\n"
            "  serve    -m MODEL                OpenAI/Anthropic-compatible HTTP server (strata serve --help)\n"
            "  sim      TRACE --slots N [--sweep]   replay a route trace through cache policies\n"
            "  plan     -m MODEL --ram-gib R    expert cache budget and byte-floor speed for a machine\n\n"
            "strata <command> --help shows that command's options.\n");
}

static int cmd_inspect(int argc, char **argv)
{
    bool json = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) json = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: strata inspect MODEL.gguf [--json]\n");
            return 0;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "strata inspect: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "strata inspect: one model at a time ('%s' and '%s')\n", path, argv[i]);
            return 2;
        } else
            path = argv[i];
    }
    if (!path) {
        fprintf(stderr, "strata inspect: no model given (usage: strata inspect MODEL.gguf [--json])\n");
        return 2;
    }
    return strata_inspect(path, json, stdout) ? 1 : 0;
}

static void synth_usage(FILE *out)
{
    // the architectures of the presets, each once, in table order
    char archs[256] = "";
    const struct strata_synth_preset_info *all = strata_synth_presets();
    for (const struct strata_synth_preset_info *p = all; p->name; p++) {
        bool seen = false;
        for (const struct strata_synth_preset_info *q = all; q < p && !seen; q++) seen = strcmp(q->arch, p->arch) == 0;
        if (!seen && strlen(archs) + strlen(p->arch) + 3 < sizeof archs)
            snprintf(archs + strlen(archs), sizeof archs - strlen(archs), "%s%s", archs[0] ? ", " : "", p->arch);
    }
    fprintf(out,
            "usage: strata synth --arch A --preset P -o OUT.gguf [options]\n\n"
            "  --arch A               architecture (%s)\n"
            "  --preset P             tiny, or the shape of a released model (--list)\n"
            "  -o, --out FILE         output path\n"
            "  --seed N               PRNG seed (default 1)\n"
            "  --type T               type of the weight matrices (F32 F16 BF16 Q8_0 Q4_K Q5_K Q6_K ...)\n"
            "  --type-overrides R=T,...  per-tensor types by extended regex on the name, first match wins\n"
            "  --layers N             fewer layers than the preset\n"
            "  --experts N            fewer experts per layer than the preset\n"
            "  --indexer-top-k N      the sparse-attention indexer's top-k (deepseek32, glm-dsa)\n"
            "  --vocab N              vocabulary size of the built-in tokenizer\n"
            "  --tokenizer FILE       embed a Hugging Face tokenizer.json\n"
            "  --chat-template FILE   jinja template file or tokenizer_config.json\n"
            "  --route-skew S         routers' rows scaled by exp(S * N(0,1)) per expert: hot and cold\n"
            "                         experts as trained routers have (0: none; 0.35 gives the\n"
            "                         concentration measured on Qwen3-30B-A3B, docs/server.md)\n"
            "  --list                 list presets\n"
            "  --no-progress          no progress bar\n",
            archs);
}

static int cmd_synth(int argc, char **argv)
{
    struct strata_synth_opts o = {.seed = 1, .type = -1, .progress = isatty(2)};
    const char *arch = NULL, *preset = NULL;
    static const struct option opts[] = {
        {"arch", required_argument, 0, 'a'},      {"preset", required_argument, 0, 'P'},
        {"out", required_argument, 0, 'o'},       {"seed", required_argument, 0, 's'},
        {"type", required_argument, 0, 't'},      {"type-overrides", required_argument, 0, 'O'},
        {"layers", required_argument, 0, 'l'},    {"experts", required_argument, 0, 'e'},
        {"vocab", required_argument, 0, 'v'},     {"tokenizer", required_argument, 0, 'k'},
        {"chat-template", required_argument, 0, 'c'}, {"list", no_argument, 0, 'L'},
        {"no-progress", no_argument, 0, 'N'},     {"help", no_argument, 0, 'h'},
        {"indexer-top-k", required_argument, 0, 'K'}, {"route-skew", required_argument, 0, 'R'},
        {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': arch = optarg; break;
        case 'P': preset = optarg; break;
        case 'o': o.out_path = optarg; break;
        case 's': if (cli_parse_u64(optarg, "--seed", &o.seed)) return 2; break;
        case 't':
            o.type = strata_type_from_name(optarg);
            if (o.type < 0 || !strata_type_computable((uint32_t)o.type)) {
                fprintf(stderr, "strata synth: --type '%s' is unknown or not supported\n", optarg);
                return 2;
            }
            break;
        case 'O': o.type_overrides = optarg; break;
        case 'l': if (cli_parse_int(optarg, "--layers", 1, 4096, &o.n_layer)) return 2; break;
        case 'e': if (cli_parse_int(optarg, "--experts", 1, 65536, &o.n_expert)) return 2; break;
        case 'K': if (cli_parse_int(optarg, "--indexer-top-k", 1, 1 << 20, &o.idx_top_k)) return 2; break;
        case 'v': if (cli_parse_int(optarg, "--vocab", 260, 1 << 22, &o.n_vocab)) return 2; break;
        case 'k': o.tokenizer_json = optarg; break;
        case 'R': if (cli_parse_float(optarg, "--route-skew", 0, 4, &o.route_skew)) return 2; break;
        case 'c': o.chat_template = optarg; break;
        case 'N': o.progress = false; break;
        case 'L':
            for (const struct strata_synth_preset_info *p = strata_synth_presets(); p->name; p++)
                printf("%-10s %-18s %s\n", p->arch, p->name, p->source);
            return 0;
        case 'h': synth_usage(stdout); return 0;
        default:
            fprintf(stderr, "strata synth: bad option '%s' (see strata synth --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "strata synth: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!arch || !preset || !o.out_path) {
        fprintf(stderr, "strata synth: --arch, --preset and -o are required (see strata synth --help)\n");
        return 2;
    }
    o.arch = arch;
    o.preset = preset;
    return strata_synth(&o) ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "inspect") == 0) return cmd_inspect(argc - 1, argv + 1);
    if (strcmp(cmd, "synth") == 0) return cmd_synth(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0) return cli_run(argc - 1, argv + 1);
    if (strcmp(cmd, "eval") == 0) return cli_eval(argc - 1, argv + 1);
    if (strcmp(cmd, "demo") == 0) return cli_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "perplexity") == 0) return cli_perplexity(argc - 1, argv + 1);
    if (strcmp(cmd, "perplexity") == 0) return cli_perplexity(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0) return cli_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "sim") == 0) return cli_sim(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0) return cli_plan(argc - 1, argv + 1);
    fprintf(stderr, "strata: unknown command '%s' (strata --help lists them)\n", cmd);
    return 2;
}
