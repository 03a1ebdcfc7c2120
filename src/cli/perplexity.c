// strata perplexity: the perplexity of a model over a text file, chunked the way llama.cpp's
// perplexity tool chunks it, so the two numbers can be compared. The text is tokenized (with bos
// when the model adds one) and cut into chunks of --ctx tokens (a tail shorter than a chunk is
// left out); each chunk is evaluated from an empty context with its first token replaced by bos,
// and only its second half is scored: the logits at positions ctx/2 .. ctx-2 predict the tokens
// after them, so every scored token has at least ctx/2 tokens of context. PPL = exp(mean of
// -log p(token)); the "+/-" is the standard error of that mean carried through exp, as llama.cpp
// prints it.
#include <cjson/cJSON.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "strata.h"
#include "util/time.h"

static char *read_text(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (f && n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = 0;
        *len = (size_t)n;
        fclose(f);
        return buf;
    }
    fprintf(stderr, "strata perplexity: cannot read '%s'\n", path);
    free(buf);
    if (f) fclose(f);
    return NULL;
}

// -log p(tok) under the softmax of logits[0..nv), in double.
static double nll_of(const float *logits, uint32_t nv, int32_t tok)
{
    float mx = logits[0];
    for (uint32_t i = 1; i < nv; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (uint32_t i = 0; i < nv; i++) sum += exp((double)logits[i] - mx);
    return log(sum) - ((double)logits[tok] - mx);
}

int cli_perplexity(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"ctx", required_argument, 0, 'c'},   {"threads", required_argument, 0, 't'},
        {"batch", required_argument, 0, 'b'}, {"chunks", required_argument, 0, 'N'},
        {"tokens-out", required_argument, 0, 'O'}, {"json", no_argument, 0, 'J'},
        {"help", no_argument, 0, 'h'},        CLI_STORE_OPTIONS, {0, 0, 0, 0}};
    struct strata_engine_params ep = strata_engine_default_params();
    struct cli_report_opts ro = {0};
    const char *text_path = NULL, *tokens_out = NULL;
    int n_ctx = 512, max_chunks = -1, c;
    bool json = false;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:f:c:t:b:h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'm': ep.model = optarg; break;
        case 'f': text_path = optarg; break;
        case 'c': bad = cli_parse_int(optarg, "--ctx", 4, 1 << 20, &n_ctx); break;
        case 't': bad = cli_parse_int(optarg, "-t", 1, 1024, &ep.n_threads); break;
        case 'b': bad = cli_parse_int(optarg, "-b", 1, 1 << 16, &ep.n_batch); break;
        case 'N': bad = cli_parse_int(optarg, "--chunks", 1, 1 << 30, &max_chunks); break;
        case 'O': tokens_out = optarg; break;
        case 'J': json = true; break;
        case 'h':
            printf("usage: strata perplexity -m MODEL.gguf -f TEXT [--ctx N] [--chunks N] [-t N] [-b N] [--json]\n"
                   "perplexity over TEXT in chunks of --ctx tokens (default 512) as llama.cpp's perplexity tool\n"
                   "computes it: each chunk from an empty context, first token bos, its second half scored\n"
                   "  --chunks N            at most N chunks\n"
                   "  --tokens-out FILE     write the chunks' token ids as evaluated (';' between chunks)\n%s",
                   cli_store_usage);
            return 0;
        CLI_CASE_STORE_OPTIONS: bad = cli_parse_store_opt(c, optarg, &ep, &ro); break;
        default:
            fprintf(stderr, "strata perplexity: bad option '%s' (see strata perplexity --help)\n", argv[optind - 1]);
            return 2;
        }
        if (bad) return 2;
    }
    if (!ep.model || !text_path) {
        fprintf(stderr, "strata perplexity: -m and -f are required\n");
        return 2;
    }
    size_t len = 0;
    char *text = read_text(text_path, &len);
    if (!text) return 2;
    ep.n_ctx = n_ctx;
    struct strata_engine *e = NULL;
    struct strata_session *s = NULL;
    int32_t *toks = NULL, *chunk = NULL;
    float *logits = NULL;
    size_t n_tok = 0;
    int rc = strata_engine_open(&e, &ep);
    struct strata_model_info info = {0};
    if (rc == 0) {
        strata_engine_info(e, &info);
        const size_t cap = len + 2;  // a token holds at least one byte; bos
        toks = malloc(cap * sizeof *toks);
        rc = toks ? strata_tokenize(e, text, len, info.add_bos, false, toks, cap, &n_tok) : STRATA_ENOMEM;
    }
    if (rc == 0 && n_tok < 2 * (size_t)n_ctx) {
        fprintf(stderr, "strata: error: perplexity: '%s' has %zu tokens; a context of %d needs at least %d\n",
                text_path, n_tok, n_ctx, 2 * n_ctx);
        rc = STRATA_EARG;
    }
    int n_chunk = rc == 0 ? (int)(n_tok / (size_t)n_ctx) : 0;
    if (max_chunks > 0 && n_chunk > max_chunks) n_chunk = max_chunks;
    FILE *tf = NULL;
    if (rc == 0 && tokens_out && !(tf = fopen(tokens_out, "w"))) {
        fprintf(stderr, "strata: error: perplexity: cannot write '%s'\n", tokens_out);
        rc = STRATA_EIO;
    }
    if (rc == 0) {
        chunk = malloc((size_t)n_ctx * sizeof *chunk);
        logits = malloc((size_t)n_ctx * info.n_vocab * sizeof *logits);
        if (!chunk || !logits) rc = STRATA_ENOMEM;
    }
    if (rc == 0) rc = strata_session_create(&s, e, NULL);
    const int first = n_ctx / 2;
    double nll = 0, nll2 = 0, t0 = strata_now();
    long count = 0;
    for (int i = 0; rc == 0 && i < n_chunk; i++) {
        memcpy(chunk, toks + (size_t)i * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (info.add_bos && info.bos >= 0) chunk[0] = info.bos;
        if (tf) {
            for (int j = 0; j < n_ctx; j++) fprintf(tf, "%s%d", j ? "," : (i ? ";" : ""), chunk[j]);
        }
        if (i > 0) rc = strata_session_reset(s);
        if (rc == 0) rc = strata_session_eval(s, chunk, n_ctx, logits, true);
        for (int p = first; rc == 0 && p < n_ctx - 1; p++) {
            const double v = nll_of(logits + (size_t)p * info.n_vocab, info.n_vocab, chunk[p + 1]);
            nll += v;
            nll2 += v * v;
            count++;
        }
        if (rc == 0 && !json) {
            fprintf(stderr, "[%d]%.4f%s", i + 1, exp(nll / count), i + 1 < n_chunk ? "," : "\n");
            fflush(stderr);
        }
    }
    if (tf && (fclose(tf) != 0) && rc == 0) rc = STRATA_EIO;
    if (rc == 0) {
        const double mean = nll / count, ppl = exp(mean);
        const double var = nll2 / count - mean * mean;
        const double err = count > 1 && var > 0 ? sqrt(var / (count - 1)) * ppl : 0;
        const double secs = strata_now() - t0;
        if (json) {
            cJSON *root = cJSON_CreateObject();
            cJSON_AddNumberToObject(root, "ppl", ppl);
            cJSON_AddNumberToObject(root, "ppl_err", err);
            cJSON_AddNumberToObject(root, "mean_nll", mean);
            cJSON_AddNumberToObject(root, "scored_tokens", (double)count);
            cJSON_AddNumberToObject(root, "chunks", n_chunk);
            cJSON_AddNumberToObject(root, "ctx", n_ctx);
            cJSON_AddNumberToObject(root, "text_tokens", (double)n_tok);
            cJSON_AddNumberToObject(root, "seconds", secs);
            cli_store_json(root, e, &ep, &ro, secs);
            char *out = cJSON_Print(root);
            cJSON_Delete(root);
            if (out) printf("%s\n", out);
            free(out);
        } else {
            printf("Final estimate: PPL = %.4f +/- %.5f   (%d chunks of %d tokens, %ld scored, %.1f tok/s)\n", ppl,
                   err, n_chunk, n_ctx, count, secs > 0 ? n_chunk * (double)n_ctx / secs : 0);
        }
    }
    free(text);
    free(toks);
    free(chunk);
    free(logits);
    strata_session_free(s);
    strata_engine_close(e);
    return rc == STRATA_EARG ? 2 : rc ? 1 : 0;
}
