// strata run / eval / demo: generation with streamed text and a summary, teacher-forced logits,
// and the self-contained demo on a synthetic model.
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "backend/cpu/kernels.h"
#include "quant/quant.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"
#include "tools/synth.h"
#include "util/log.h"
#include "util/time.h"

struct run_opts {
    const char *model, *prompt, *prompt_tokens;
    int n_predict, n_threads, n_ctx, n_batch;
    struct strata_sampler_params sp;
    bool chat, stream, json, ignore_eos;
    struct strata_experts_config ec;
};

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static void run_usage(FILE *out)
{
    fprintf(out,
            "usage: strata run -m MODEL.gguf -p PROMPT [options]\n\n"
            "  -m, --model FILE      GGUF model\n"
            "  -p, --prompt TEXT     prompt text\n"
            "  --prompt-tokens IDS   prompt as token ids (1,2,3, or @FILE holding them) instead of text\n"
            "  -n, --n-predict N     tokens to generate (default 128)\n"
            "  -t, --threads N       compute threads (default: all cores)\n"
            "  -c, --ctx N           context length (default: min(model, 4096))\n"
            "  -b, --batch N         prompt chunk size (default 512)\n"
            "  --temp T              temperature, 0 = greedy (default 0.8)\n"
            "  --top-k N             (default 40, 0 = off)\n"
            "  --top-p P             (default 0.95, 1 = off)\n"
            "  --min-p P             (default 0.05, 0 = off)\n"
            "  --repeat-penalty R    (default 1 = off)\n"
            "  --repeat-last-n N     (default 64)\n"
            "  --seed N              sampling seed (default 0)\n"
            "  --chat                apply the model's chat template to the prompt (one user turn)\n"
            "  --ignore-eos          keep generating after an end-of-generation token\n"
            "  --no-stream           print the text at the end, not as it is generated\n"
            "  --json                print one JSON object: text, token ids, statistics\n");
    fputs(cli_store_usage, out);
}

static int parse_run(int argc, char **argv, struct run_opts *o)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},    {"prompt", required_argument, 0, 'p'},
        {"prompt-tokens", required_argument, 0, 'P'}, {"n-predict", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'},  {"ctx", required_argument, 0, 'c'},
        {"batch", required_argument, 0, 'b'},    {"temp", required_argument, 0, 'T'},
        {"top-k", required_argument, 0, 'K'},    {"top-p", required_argument, 0, 'U'},
        {"min-p", required_argument, 0, 'M'},    {"repeat-penalty", required_argument, 0, 'R'},
        {"repeat-last-n", required_argument, 0, 'L'}, {"seed", required_argument, 0, 'S'},
        {"chat", no_argument, 0, 'C'},           {"ignore-eos", no_argument, 0, 'I'},
        {"no-stream", no_argument, 0, 'N'},      {"json", no_argument, 0, 'J'},
        {"help", no_argument, 0, 'h'},           CLI_STORE_OPTIONS, {0, 0, 0, 0}};
    o->n_predict = 128;
    o->sp = strata_sampler_default_params();
    o->ec.io = STRATA_IO_URING;  // faster than pread, measured in docs/expert-store.md
    o->stream = true;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:n:t:c:b:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'P': o->prompt_tokens = optarg; break;
        case 'n': bad = cli_parse_int(optarg, "-n", 0, 1 << 24, &o->n_predict); break;
        case 't': bad = cli_parse_int(optarg, "-t", 1, 1024, &o->n_threads); break;
        case 'c': bad = cli_parse_int(optarg, "-c", 1, 1 << 24, &o->n_ctx); break;
        case 'b': bad = cli_parse_int(optarg, "-b", 1, 1 << 16, &o->n_batch); break;
        case 'T': bad = cli_parse_float(optarg, "--temp", 0, 100, &o->sp.temperature); break;
        case 'K': bad = cli_parse_int(optarg, "--top-k", 0, 1 << 24, &o->sp.top_k); break;
        case 'U': bad = cli_parse_float(optarg, "--top-p", 0, 1, &o->sp.top_p); break;
        case 'M': bad = cli_parse_float(optarg, "--min-p", 0, 1, &o->sp.min_p); break;
        case 'R': bad = cli_parse_float(optarg, "--repeat-penalty", 0.01, 100, &o->sp.repeat_penalty); break;
        case 'L': bad = cli_parse_int(optarg, "--repeat-last-n", -1, 1 << 24, &o->sp.repeat_last_n); break;
        case 'S': bad = cli_parse_u64(optarg, "--seed", &o->sp.seed); break;
        case 'C': o->chat = true; break;
        case 'I': o->ignore_eos = true; break;
        case 'N': o->stream = false; break;
        case 'J': o->json = true; o->stream = false; break;
        case 'h': run_usage(stdout); return -1;
        case CLI_OPT_CACHE_MIB: case CLI_OPT_CACHE_CLASSES: case CLI_OPT_IO: case CLI_OPT_IO_THREADS:
        case CLI_OPT_STATS_LAYERS: case CLI_OPT_TRACE_OUT: case CLI_OPT_CACHE_POLICY: bad = cli_parse_store_opt(c, optarg, &o->ec); break;
        default:
            fprintf(stderr, "strata run: bad option '%s' (see strata run --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "strata run: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!o->model) {
        fprintf(stderr, "strata run: no model given (-m MODEL.gguf)\n");
        return 2;
    }
    if (!o->prompt && !o->prompt_tokens) {
        fprintf(stderr, "strata run: no prompt given (-p TEXT or --prompt-tokens IDS)\n");
        return 2;
    }
    if (o->prompt && o->prompt_tokens) {
        fprintf(stderr, "strata run: give -p or --prompt-tokens, not both\n");
        return 2;
    }
    return 0;
}

// Prompt -> token ids: chat template, bos, special tokens parsed.
static int tokenize_prompt(const struct run_opts *o, const struct strata_tokenizer *tok,
                           const struct strata_gguf_file *f, int32_t **ids, int *n)
{
    if (o->prompt_tokens) return cli_parse_ids(o->prompt_tokens, "--prompt-tokens", ids, n) ? STRATA_EARG : 0;
    char *text = NULL;
    if (o->chat) {
        const char *tmpl = NULL;
        strata_gguf_get_str(f, "tokenizer.chat_template", &tmpl);
        struct strata_chat_msg msg = {"user", o->prompt};
        int rc = strata_chat_apply(tmpl, &msg, 1, true, &text);
        if (rc) return rc;
    }
    const char *src = text ? text : o->prompt;
    size_t len = strlen(src);
    const struct strata_tokenizer_info *info = strata_tokenizer_get_info(tok);
    size_t cap = 3 * len + 2, got = 0;
    int32_t *buf = malloc(cap * sizeof *buf);
    if (!buf) {
        free(text);
        return STRATA_ENOMEM;
    }
    size_t off = 0;
    if (info->add_bos && info->bos >= 0) buf[off++] = info->bos;
    int rc = strata_tokenize(tok, src, len, true, buf + off, cap - off, &got);
    free(text);
    if (rc) {
        free(buf);
        return rc;
    }
    *ids = buf;
    *n = (int)(off + got);
    return 0;
}

static int do_run(const struct run_opts *o)
{
    struct strata_model *m = NULL;
    struct strata_tokenizer *tok = NULL;
    struct strata_session *s = NULL;
    struct strata_sampler smp = {0};
    int32_t *ids = NULL;
    float *logits = NULL;
    char *text = NULL;
    size_t text_len = 0, text_cap = 0;
    int n_prompt = 0, rc;
    struct strata_model_params mp = {.experts = o->ec};
    double t_load = strata_now();
    if ((rc = strata_model_load(&m, o->model, &mp))) goto out;
    t_load = strata_now() - t_load;
    const struct strata_hparams *hp = strata_model_hparams(m);
    if ((rc = strata_tokenizer_load(&tok, strata_model_file(m)))) goto out;
    if ((rc = tokenize_prompt(o, tok, strata_model_file(m), &ids, &n_prompt))) goto out;
    struct strata_session_params sp = {o->n_ctx, o->n_batch, o->n_threads};
    if ((rc = strata_session_create(&s, m, &sp))) goto out;
    const int n_ctx = strata_session_n_ctx(s);
    if (n_prompt >= n_ctx) {
        strata_log_error("run: the prompt has %d tokens, the context holds %d (raise -c)", n_prompt, n_ctx);
        rc = STRATA_EARG;
        goto out;
    }
    int n_predict = o->n_predict;
    if (n_prompt + n_predict > n_ctx) n_predict = n_ctx - n_prompt;
    int32_t *all = realloc(ids, (size_t)(n_prompt + n_predict + 1) * sizeof *all);
    if (!all) {
        rc = STRATA_ENOMEM;
        goto out;
    }
    ids = all;
    if ((rc = strata_sampler_init(&smp, o->sp, (int32_t)hp->n_vocab))) goto out;
    logits = malloc((size_t)hp->n_vocab * sizeof *logits);
    if (!logits) {
        rc = STRATA_ENOMEM;
        goto out;
    }

    double t0 = strata_now();
    if ((rc = strata_session_eval(s, ids, n_prompt, logits, false))) goto out;
    double t_prompt = strata_now() - t0;

    struct strata_detok dt;
    strata_detok_init(&dt, false);
    char piece[1024];
    int n_gen = 0;
    bool stopped_eog = false;
    double t1 = strata_now();
    while (n_gen < n_predict) {
        int32_t id = strata_sampler_sample(&smp, logits, ids, (size_t)(n_prompt + n_gen));
        if (id < 0) {
            rc = id;
            goto out;
        }
        ids[n_prompt + n_gen++] = id;
        if (!o->ignore_eos && strata_token_is_eog(tok, id)) {
            stopped_eog = true;
            break;
        }
        size_t np = 0;
        if (strata_detok_push(&dt, tok, id, piece, sizeof piece, &np) == 0 && np) {
            if (o->stream) {
                fwrite(piece, 1, np, stdout);
                fflush(stdout);
            }
            if (text_len + np + 1 > text_cap) {
                text_cap = (text_len + np + 1) * 2;
                char *t = realloc(text, text_cap);
                if (!t) {
                    rc = STRATA_ENOMEM;
                    goto out;
                }
                text = t;
            }
            memcpy(text + text_len, piece, np);
            text_len += np;
            text[text_len] = 0;
        }
        if (n_gen == n_predict) break;
        if ((rc = strata_session_eval(s, &id, 1, logits, false))) goto out;
    }
    double t_gen = strata_now() - t1;
    size_t np = 0;
    strata_detok_flush(&dt, piece, sizeof piece, &np);
    if (np && o->stream) fwrite(piece, 1, np, stdout);
    if (np) {
        char *t = realloc(text, text_len + np + 1);
        if (t) {
            text = t;
            memcpy(text + text_len, piece, np);
            text_len += np;
            text[text_len] = 0;
        }
    }

    struct strata_phase_stats st;
    strata_session_stats(s, &st);
    const double prompt_tps = t_prompt > 0 ? n_prompt / t_prompt : 0;
    // The first generated token comes from the prompt's logits: decode speed counts the evals.
    const int n_decode_evals = n_gen > 0 ? n_gen - 1 : 0;
    const double gen_tps = t_gen > 0 && n_decode_evals ? n_decode_evals / t_gen : 0;
    if (o->json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "text", text ? text : "");
        cJSON *pt = cJSON_AddArrayToObject(root, "prompt_tokens");
        for (int i = 0; i < n_prompt; i++) cJSON_AddItemToArray(pt, cJSON_CreateNumber(ids[i]));
        cJSON *gt = cJSON_AddArrayToObject(root, "tokens");
        for (int i = 0; i < n_gen; i++) cJSON_AddItemToArray(gt, cJSON_CreateNumber(ids[n_prompt + i]));
        cJSON_AddStringToObject(root, "stop", stopped_eog ? "eog" : "length");
        cJSON *js = cJSON_AddObjectToObject(root, "stats");
        cJSON_AddNumberToObject(js, "load_s", t_load);
        cJSON_AddNumberToObject(js, "prompt_tokens", n_prompt);
        cJSON_AddNumberToObject(js, "prompt_s", t_prompt);
        cJSON_AddNumberToObject(js, "prompt_tok_s", prompt_tps);
        cJSON_AddNumberToObject(js, "generated_tokens", n_gen);
        cJSON_AddNumberToObject(js, "decode_s", t_gen);
        cJSON_AddNumberToObject(js, "decode_tok_s", gen_tps);
        cJSON_AddNumberToObject(js, "peak_rss_mib", peak_rss_mib());
        cJSON_AddNumberToObject(js, "dense_bytes", (double)strata_model_dense_bytes(m));
        cJSON_AddNumberToObject(js, "expert_bytes_resident", (double)strata_model_expert_bytes(m));
        cJSON *ph = cJSON_AddObjectToObject(js, "phase_s");
        cJSON_AddNumberToObject(ph, "embed", st.t_embed);
        cJSON_AddNumberToObject(ph, "attention", st.t_attn);
        cJSON_AddNumberToObject(ph, "linear_attention", st.t_linear_attn);
        cJSON_AddNumberToObject(ph, "routing", st.t_router);
        cJSON_AddNumberToObject(ph, "experts", st.t_experts);
        cJSON_AddNumberToObject(ph, "head", st.t_head);
        cJSON_AddStringToObject(js, "isa", strata_isa_name(strata_isa_detect()));
        cli_store_json(js, m, &o->ec, t_prompt + t_gen);
        char *out = cJSON_Print(root);
        cJSON_Delete(root);
        if (out) printf("%s\n", out);
        free(out);
    } else {
        if (!o->stream && text) fputs(text, stdout);
        printf("\n");
        fprintf(stderr,
                "\nprompt: %d tokens in %.2f s (%.1f tok/s)   generated: %d tokens, %.2f tok/s%s\n"
                "time: attention %.2f s, linear attention %.2f s, routing %.2f s, experts %.2f s, head %.2f s   "
                "peak memory %.0f MiB (dense %.0f MiB, experts %.0f MiB)\n",
                n_prompt, t_prompt, prompt_tps, n_gen, gen_tps, stopped_eog ? " (stopped at end of generation)" : "",
                st.t_attn, st.t_linear_attn, st.t_router, st.t_experts, st.t_head, peak_rss_mib(),
                strata_model_dense_bytes(m) / 1048576.0, strata_model_expert_bytes(m) / 1048576.0);
        cli_store_summary(stderr, m, &o->ec);
    }
out:
    free(text);
    free(logits);
    free(ids);
    strata_sampler_free(&smp);
    strata_session_free(s);
    strata_tokenizer_free(tok);
    strata_model_free(m);
    return rc ? 1 : 0;
}

int cli_run(int argc, char **argv)
{
    struct run_opts o = {0};
    int rc = parse_run(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    return do_run(&o);
}

// ---- eval ----------------------------------------------------------------------------------------

int cli_eval(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"tokens", required_argument, 0, 'k'},
        {"logits-out", required_argument, 0, 'o'}, {"threads", required_argument, 0, 't'},
        {"ctx", required_argument, 0, 'c'},     {"batch", required_argument, 0, 'b'},
        {"json", no_argument, 0, 'J'},          {"help", no_argument, 0, 'h'},
        CLI_STORE_OPTIONS,                      {0, 0, 0, 0}};
    const char *model = NULL, *tokens = NULL, *out_path = NULL;
    struct strata_experts_config ec = {.io = STRATA_IO_URING};
    bool json = false;
    int n_threads = 0, n_ctx = 0, n_batch = 0, c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:t:c:b:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': model = optarg; break;
        case 'k': tokens = optarg; break;
        case 'o': out_path = optarg; break;
        case 't': bad = cli_parse_int(optarg, "-t", 1, 1024, &n_threads); break;
        case 'c': bad = cli_parse_int(optarg, "-c", 1, 1 << 24, &n_ctx); break;
        case 'b': bad = cli_parse_int(optarg, "-b", 1, 1 << 16, &n_batch); break;
        case 'J': json = true; break;
        case 'h':
            printf("usage: strata eval -m MODEL.gguf --tokens 1,2,3 --logits-out FILE [-t N] [-c CTX] [-b BATCH]\n"
                   "writes the raw float32 logits of every position as [positions][vocab]\n"
                   "  --json                print expert-store statistics as JSON on stdout\n%s",
                   cli_store_usage);
            return 0;
        case CLI_OPT_CACHE_MIB: case CLI_OPT_CACHE_CLASSES: case CLI_OPT_IO: case CLI_OPT_IO_THREADS:
        case CLI_OPT_STATS_LAYERS: case CLI_OPT_TRACE_OUT: case CLI_OPT_CACHE_POLICY: bad = cli_parse_store_opt(c, optarg, &ec); break;
        default:
            fprintf(stderr, "strata eval: bad option '%s' (see strata eval --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (!model || !tokens || !out_path) {
        fprintf(stderr, "strata eval: -m, --tokens and --logits-out are required\n");
        return 2;
    }
    int32_t *ids = NULL;
    int n = 0;
    if (cli_parse_ids(tokens, "--tokens", &ids, &n)) return 2;
    struct strata_model *m = NULL;
    struct strata_session *s = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    struct strata_model_params mp = {.experts = ec};
    int rc = strata_model_load(&m, model, &mp);
    double t_eval = strata_now();
    if (rc == 0) {
        struct strata_session_params sp = {n_ctx ? n_ctx : (n > 4096 ? n : 0), n_batch, n_threads};
        rc = strata_session_create(&s, m, &sp);
    }
    if (rc == 0) {
        const size_t nv = strata_model_hparams(m)->n_vocab;
        logits = malloc((size_t)n * nv * sizeof *logits);
        if (!logits) rc = STRATA_ENOMEM;
        if (rc == 0) rc = strata_session_eval(s, ids, n, logits, true);
        t_eval = strata_now() - t_eval;
        if (rc == 0) {
            f = fopen(out_path, "wb");
            if (!f || fwrite(logits, sizeof *logits, (size_t)n * nv, f) != (size_t)n * nv || fclose(f) != 0) {
                strata_log_error("eval: cannot write '%s': %s", out_path, strerror(errno));
                rc = STRATA_EIO;
            }
        }
    }
    if (rc == 0 && json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddNumberToObject(root, "tokens", n);
        cJSON_AddNumberToObject(root, "eval_s", t_eval);
        cJSON_AddNumberToObject(root, "peak_rss_mib", peak_rss_mib());
        cJSON_AddNumberToObject(root, "dense_bytes", (double)strata_model_dense_bytes(m));
        cli_store_json(root, m, &ec, t_eval);
        char *txt = cJSON_Print(root);
        cJSON_Delete(root);
        if (txt) printf("%s\n", txt);
        free(txt);
    } else if (rc == 0 && (ec.stats_layers || ec.cache_bytes)) {
        cli_store_summary(stderr, m, &ec);
    }
    free(logits);
    free(ids);
    strata_session_free(s);
    strata_model_free(m);
    return rc ? 1 : 0;
}

// ---- demo ----------------------------------------------------------------------------------------

int cli_demo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    const char *dir = getenv("XDG_CACHE_HOME");
    char path[4096];
    if (dir && *dir) snprintf(path, sizeof path, "%s/strata-demo-tiny.gguf", dir);
    else snprintf(path, sizeof path, "/tmp/strata-demo-tiny-%d.gguf", (int)getuid());
    struct stat stbuf;
    if (stat(path, &stbuf) != 0) {
        struct strata_synth_opts so = {.arch = "qwen3moe", .preset = "tiny", .out_path = path, .seed = 1,
                                       .type = -1, .progress = false};
        fprintf(stderr, "strata demo: writing the tiny synthetic qwen3moe model to %s\n", path);
        if (strata_synth(&so)) return 1;
    }
    fprintf(stderr, "strata demo: running it (random weights, so the text is noise)\n\n");
    struct run_opts o = {0};
    char *args[] = {"run", "-m", path, "-p", "The expert store streams weights from disk", "-n", "48", NULL};
    int rc = parse_run(7, args, &o);
    if (rc) return rc;
    return do_run(&o);
}
