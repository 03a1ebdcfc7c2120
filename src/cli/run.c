// strata run / eval / demo: generation with streamed text and a summary, teacher-forced logits,
// and the self-contained demo on a synthetic model; clients of the public API (strata.h).
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
#include "strata.h"
#include "tools/synth.h"
#include "util/time.h"

struct run_opts {
    const char *prompt, *prompt_tokens;
    int n_predict, warmup;
    struct strata_engine_params ep;
    struct cli_report_opts ro;
    struct strata_sampling sp;
    bool chat, stream, json, ignore_eos;
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
            "  -b, --batch N         prompt chunk size (default 2048 on the CPU, 512 on a GPU or with --mem-mib)\n"
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
            "  --json                print one JSON object: text, token ids, statistics\n"
            "  --warmup N            evaluate the prompt N times in sessions of their own first (as\n"
            "                        llama-bench's warmup run), so that the timed prompt finds kernels,\n"
            "                        buffers and the expert cache warm; the expert counters include them\n"
            "                        (default 0)\n");
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
        {"warmup", required_argument, 0, 'W'},   {"help", no_argument, 0, 'h'},
        CLI_STORE_OPTIONS, {0, 0, 0, 0}};
    o->n_predict = 128;
    o->sp = strata_sampling_default();
    o->ep = strata_engine_default_params();
    o->stream = true;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "m:p:n:t:c:b:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': o->ep.model = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'P': o->prompt_tokens = optarg; break;
        case 'n': bad = cli_parse_int(optarg, "-n", 0, 1 << 24, &o->n_predict); break;
        case 't': bad = cli_parse_int(optarg, "-t", 1, 1024, &o->ep.n_threads); break;
        case 'c': bad = cli_parse_int(optarg, "-c", 1, 1 << 24, &o->ep.n_ctx); break;
        case 'b': bad = cli_parse_int(optarg, "-b", 1, 1 << 16, &o->ep.n_batch); break;
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
        case 'W': bad = cli_parse_int(optarg, "--warmup", 0, 100, &o->warmup); break;
        case 'h': run_usage(stdout); return -1;
        CLI_CASE_STORE_OPTIONS: bad = cli_parse_store_opt(c, optarg, &o->ep, &o->ro); break;
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
    if (!o->ep.model) {
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
static int tokenize_prompt(const struct run_opts *o, const struct strata_engine *e, int32_t **ids, int *n)
{
    if (o->prompt_tokens) return cli_parse_ids(o->prompt_tokens, "--prompt-tokens", ids, n) ? STRATA_EARG : 0;
    char *text = NULL;
    if (o->chat) {
        struct strata_chat_msg msg = {"user", o->prompt};
        int rc = strata_chat_apply(e, &msg, 1, true, &text);
        if (rc) return rc;
    }
    const char *src = text ? text : o->prompt;
    const size_t len = strlen(src), cap = 3 * len + 2;
    size_t got = 0;
    int32_t *buf = malloc(cap * sizeof *buf);
    int rc = buf ? strata_tokenize(e, src, len, true, true, buf, cap, &got) : STRATA_ENOMEM;
    free(text);
    if (rc) {
        free(buf);
        return rc;
    }
    *ids = buf;
    *n = (int)got;
    return 0;
}

// Streams each token's text as it comes.
static int stream_token(void *user, int32_t tok, const char *text, size_t len)
{
    (void)user;
    (void)tok;
    if (len) {
        fwrite(text, 1, len, stdout);
        fflush(stdout);
    }
    return 0;
}

// The phases of strata_phase_stats, their names in --json and in the summary, and their values.
#define N_PHASES 5
static const char *const g_phase_json[N_PHASES] = {"attention", "linear_attention", "routing", "experts", "head"};
static const char *const g_phase_name[N_PHASES] = {"attention", "linear attention", "routing", "experts", "head"};

static void phase_values(const struct strata_phase_stats *p, double t[N_PHASES], uint64_t bytes[N_PHASES])
{
    const double tv[N_PHASES] = {p->t_attn, p->t_linear_attn, p->t_router, p->t_experts, p->t_head};
    const uint64_t bv[N_PHASES] = {p->bytes_attn, p->bytes_linear_attn, p->bytes_router, p->bytes_experts, p->bytes_head};
    memcpy(t, tv, sizeof tv);
    memcpy(bytes, bv, sizeof bv);
}

static void print_json(const struct run_opts *o, struct strata_engine *e, const int32_t *prompt, int n_prompt,
                       const struct strata_generate_result *r, const struct strata_stats *st, double t_load)
{
    struct strata_model_info info;
    strata_engine_info(e, &info);
    const double prompt_tps = r->t_prompt > 0 ? n_prompt / r->t_prompt : 0;
    // The first generated token comes from the prompt's logits: decode speed counts the evals.
    const int n_decode_evals = r->n_generated > 0 ? r->n_generated - 1 : 0;
    const double gen_tps = r->t_decode > 0 && n_decode_evals ? n_decode_evals / r->t_decode : 0;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "text", r->text ? r->text : "");
    cJSON *pt = cJSON_AddArrayToObject(root, "prompt_tokens");
    for (int i = 0; i < n_prompt; i++) cJSON_AddItemToArray(pt, cJSON_CreateNumber(prompt[i]));
    cJSON *gt = cJSON_AddArrayToObject(root, "tokens");
    for (int i = 0; i < r->n_generated; i++) cJSON_AddItemToArray(gt, cJSON_CreateNumber(r->tokens[i]));
    cJSON_AddStringToObject(root, "stop", r->stop == STRATA_STOP_EOG ? "eog" : "length");
    cJSON *js = cJSON_AddObjectToObject(root, "stats");
    cJSON_AddNumberToObject(js, "load_s", t_load);
    cJSON_AddNumberToObject(js, "prompt_tokens", n_prompt);
    cJSON_AddNumberToObject(js, "prompt_s", r->t_prompt);
    cJSON_AddNumberToObject(js, "prompt_tok_s", prompt_tps);
    cJSON_AddNumberToObject(js, "generated_tokens", r->n_generated);
    cJSON_AddNumberToObject(js, "decode_s", r->t_decode);
    cJSON_AddNumberToObject(js, "decode_tok_s", gen_tps);
    cJSON_AddNumberToObject(js, "peak_rss_mib", peak_rss_mib());
    cJSON_AddNumberToObject(js, "dense_bytes", (double)info.dense_bytes);
    cJSON_AddNumberToObject(js, "expert_bytes_resident", (double)info.expert_bytes);
    cJSON *ph = cJSON_AddObjectToObject(js, "phase_s");
    cJSON_AddNumberToObject(ph, "embed", st->t_embed);
    cJSON_AddNumberToObject(ph, "attention", st->t_attn);
    cJSON_AddNumberToObject(ph, "linear_attention", st->t_linear_attn);
    cJSON_AddNumberToObject(ph, "routing", st->t_router);
    cJSON_AddNumberToObject(ph, "experts", st->t_experts);
    cJSON_AddNumberToObject(ph, "head", st->t_head);
    // the bytes of all passes, and the decode passes' times and bytes
    double p_t[N_PHASES], dt[N_PHASES];
    uint64_t pbytes[N_PHASES], dbytes[N_PHASES];
    phase_values(&st->phases[0], p_t, pbytes);
    phase_values(&st->phases[1], dt, dbytes);
    cJSON *pb = cJSON_AddObjectToObject(js, "phase_bytes"), *dph = cJSON_AddObjectToObject(js, "decode_phase_s");
    cJSON *dpb = cJSON_AddObjectToObject(js, "decode_phase_bytes");
    for (int i = 0; i < N_PHASES; i++) {
        cJSON_AddNumberToObject(pb, g_phase_json[i], (double)(pbytes[i] + dbytes[i]));
        cJSON_AddNumberToObject(dph, g_phase_json[i], dt[i]);
        cJSON_AddNumberToObject(dpb, g_phase_json[i], (double)dbytes[i]);
    }
    cJSON_AddStringToObject(js, "isa", info.isa);
    cJSON_AddStringToObject(js, "gemm", info.gemm);
    cli_kv_json(js, e, st);
    cli_threads_json(js, st);
    cli_memory_json(js);
    cli_store_json(js, e, &o->ep, &o->ro, r->t_prompt + r->t_decode);
    char *out = cJSON_Print(root);
    cJSON_Delete(root);
    if (out) printf("%s\n", out);
    free(out);
}

// What each phase of the decode passes read and how fast: its bytes over its time, against the
// machine's bandwidth (a prompt's passes are the compute's). Only the CPU backend (a thread pool)
// times its phases as they run; a GPU's are the host's, so there the bytes alone.
static void phase_rates(FILE *out, const struct strata_stats *st)
{
    double t[N_PHASES];
    uint64_t bytes[N_PHASES], any = 0;
    phase_values(&st->phases[1], t, bytes);
    for (int i = 0; i < N_PHASES; i++) any |= bytes[i];
    if (!any) return;
    fprintf(out, "decode read:");
    for (int i = 0, first = 1; i < N_PHASES; i++) {
        if (!bytes[i]) continue;
        fprintf(out, "%s %s %.2f GB", first ? "" : ",", g_phase_name[i], bytes[i] / 1e9);
        if (st->n_threads && t[i] > 0) fprintf(out, " (%.1f GB/s)", bytes[i] / 1e9 / t[i]);
        first = 0;
    }
    fprintf(out, "\n");
}

static void print_summary(const struct run_opts *o, struct strata_engine *e, int n_prompt,
                          const struct strata_generate_result *r, const struct strata_stats *st)
{
    struct strata_model_info info;
    strata_engine_info(e, &info);
    const double prompt_tps = r->t_prompt > 0 ? n_prompt / r->t_prompt : 0;
    const int n_decode_evals = r->n_generated > 0 ? r->n_generated - 1 : 0;
    const double gen_tps = r->t_decode > 0 && n_decode_evals ? n_decode_evals / r->t_decode : 0;
    if (!o->stream && r->text) fputs(r->text, stdout);
    printf("\n");
    fprintf(stderr,
            "\nprompt: %d tokens in %.2f s (%.1f tok/s)   generated: %d tokens, %.2f tok/s%s\n"
            "time: attention %.2f s, linear attention %.2f s, routing %.2f s, experts %.2f s, head %.2f s   "
            "peak memory %.0f MiB (dense %.0f MiB, experts %.0f MiB)\n",
            n_prompt, r->t_prompt, prompt_tps, r->n_generated, gen_tps,
            r->stop == STRATA_STOP_EOG ? " (stopped at end of generation)" : "", st->t_attn, st->t_linear_attn,
            st->t_router, st->t_experts, st->t_head, peak_rss_mib(), info.dense_bytes / 1048576.0,
            info.expert_bytes / 1048576.0);
    phase_rates(stderr, st);
    cli_kv_summary(stderr, e, st);
    cli_threads_summary(stderr, st);
    cli_memory_summary(stderr);
    cli_store_summary(stderr, e, &o->ep, &o->ro);
}

static int do_run(const struct run_opts *o)
{
    struct strata_engine *e = NULL;
    struct strata_session *s = NULL;
    struct strata_generate_result r = {0};
    int32_t *ids = NULL;
    int n_prompt = 0, rc;
    double t_load = strata_now();
    if ((rc = strata_engine_open(&e, &o->ep))) goto out;
    t_load = strata_now() - t_load;
    if ((rc = tokenize_prompt(o, e, &ids, &n_prompt))) goto out;
    for (int w = 0; w < o->warmup && rc == 0; w++) {  // throwaway sessions: the prompt, no logits
        if ((rc = strata_session_create(&s, e, NULL))) goto out;
        if (n_prompt < strata_session_n_ctx(s)) rc = strata_session_eval(s, ids, n_prompt, NULL, false);
        strata_session_free(s);
        s = NULL;
    }
    if (rc) goto out;
    if ((rc = strata_session_create(&s, e, NULL))) goto out;
    if (o->ro.trace_path && (rc = strata_session_trace_file(s, o->ro.trace_path))) goto out;
    const int n_ctx = strata_session_n_ctx(s);
    if (n_prompt >= n_ctx) {
        fprintf(stderr, "strata: error: run: the prompt has %d tokens, the context holds %d (raise -c)\n", n_prompt,
                n_ctx);
        rc = STRATA_EARG;
        goto out;
    }
    const struct strata_generate_params gp = {
        .n_predict = o->n_predict, .sampling = o->sp, .ignore_eos = o->ignore_eos,
        .on_token = o->stream ? stream_token : NULL,
    };
    if ((rc = strata_generate(s, ids, n_prompt, &gp, &r))) goto out;
    struct strata_stats st;
    strata_session_stats(s, &st);
    if (o->json) print_json(o, e, ids, n_prompt, &r, &st, t_load);
    else print_summary(o, e, n_prompt, &r, &st);
out:
    strata_generate_result_free(&r);
    free(ids);
    strata_session_free(s);
    strata_engine_close(e);
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
    const char *tokens = NULL, *out_path = NULL;
    struct strata_engine_params ep = strata_engine_default_params();
    struct cli_report_opts ro = {0};
    bool json = false;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:t:c:b:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': ep.model = optarg; break;
        case 'k': tokens = optarg; break;
        case 'o': out_path = optarg; break;
        case 't': bad = cli_parse_int(optarg, "-t", 1, 1024, &ep.n_threads); break;
        case 'c': bad = cli_parse_int(optarg, "-c", 1, 1 << 24, &ep.n_ctx); break;
        case 'b': bad = cli_parse_int(optarg, "-b", 1, 1 << 16, &ep.n_batch); break;
        case 'J': json = true; break;
        case 'h':
            printf("usage: strata eval -m MODEL.gguf --tokens 1,2,3[;4,5,..] --logits-out FILE [-t N] [-c CTX] [-b BATCH]\n"
                   "writes the raw float32 logits of every position as [positions][vocab]; sequences separated\n"
                   "by ';' are each evaluated in a new session, their rows one after another\n"
                   "  --json                print expert-store statistics as JSON on stdout\n%s",
                   cli_store_usage);
            return 0;
        CLI_CASE_STORE_OPTIONS: bad = cli_parse_store_opt(c, optarg, &ep, &ro); break;
        default:
            fprintf(stderr, "strata eval: bad option '%s' (see strata eval --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (!ep.model || !tokens || !out_path) {
        fprintf(stderr, "strata eval: -m, --tokens and --logits-out are required\n");
        return 2;
    }
    int32_t *ids = NULL;
    int n = 0, *seq_len = NULL, n_seqs = 0, longest = 0;
    if (cli_parse_id_seqs(tokens, "--tokens", &ids, &n, &seq_len, &n_seqs)) return 2;
    for (int q = 0; q < n_seqs; q++) longest = seq_len[q] > longest ? seq_len[q] : longest;
    struct strata_engine *e = NULL;
    struct strata_session *s = NULL;
    float *logits = NULL;
    FILE *f = NULL;
    if (!ep.n_ctx && longest > 4096) ep.n_ctx = longest;
    int rc = strata_engine_open(&e, &ep);
    double t_eval = strata_now();
    if (rc == 0) rc = strata_session_create(&s, e, NULL);
    if (rc == 0 && ro.trace_path) rc = strata_session_trace_file(s, ro.trace_path);
    if (rc == 0) {
        struct strata_model_info info;
        strata_engine_info(e, &info);
        const size_t nv = info.n_vocab;
        logits = malloc((size_t)n * nv * sizeof *logits);
        if (!logits) rc = STRATA_ENOMEM;
        for (int q = 0, at = 0; rc == 0 && q < n_seqs; at += seq_len[q++]) {
            if (q > 0) {  // every sequence from an empty context
                strata_session_free(s);
                s = NULL;
                rc = strata_session_create(&s, e, NULL);
                if (rc == 0 && ro.trace_path) rc = strata_session_trace_file(s, ro.trace_path);
            }
            if (rc == 0) rc = strata_session_eval(s, ids + at, seq_len[q], logits + (size_t)at * nv, true);
        }
        t_eval = strata_now() - t_eval;
        if (rc == 0) {
            f = fopen(out_path, "wb");
            if (!f || fwrite(logits, sizeof *logits, (size_t)n * nv, f) != (size_t)n * nv || fclose(f) != 0) {
                fprintf(stderr, "strata: error: eval: cannot write '%s': %s\n", out_path, strerror(errno));
                rc = STRATA_EIO;
            }
        }
        if (rc == 0 && json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddNumberToObject(root, "tokens", n);
            cJSON_AddNumberToObject(root, "eval_s", t_eval);
            cJSON_AddNumberToObject(root, "peak_rss_mib", peak_rss_mib());
            cJSON_AddNumberToObject(root, "dense_bytes", (double)info.dense_bytes);
            struct strata_stats sst;
            strata_session_stats(s, &sst);
            cli_kv_json(root, e, &sst);
            cli_threads_json(root, &sst);
            cli_store_json(root, e, &ep, &ro, t_eval);
            char *txt = cJSON_Print(root);
            cJSON_Delete(root);
            if (txt) printf("%s\n", txt);
            free(txt);
        } else if (rc == 0) {
            fprintf(stderr, "eval: %d tokens in %.2f s, peak memory %.0f MiB\n", n, t_eval, peak_rss_mib());
            struct strata_stats sst;
            strata_session_stats(s, &sst);
            cli_kv_summary(stderr, e, &sst);
            cli_threads_summary(stderr, &sst);
            if (ro.stats_layers || ep.host_cache_bytes) cli_store_summary(stderr, e, &ep, &ro);
        }
    }
    free(logits);
    free(ids);
    free(seq_len);
    strata_session_free(s);
    strata_engine_close(e);
    return rc ? 1 : 0;
}

