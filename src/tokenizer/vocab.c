// In-memory vocabulary (struct strata_vocab): the form the HF importer and the built-in
// vocabulary produce, written to GGUF as tokenizer.* metadata or turned into a tokenizer.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/internal.h"
#include "util/log.h"

void strata_vocab_init(struct strata_vocab *v)
{
    memset(v, 0, sizeof(*v));
    v->bos = v->eos = v->eot = v->eom = v->pad = v->unk = v->sep = STRATA_TOKEN_NULL;
    v->add_bos = v->add_eos = -1;
}

void strata_vocab_free(struct strata_vocab *v)
{
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        free(v->tokens[i]);
    }
    for (uint32_t i = 0; i < v->n_merges; i++) {
        free(v->merges[i]);
    }
    free(v->tokens);
    free(v->types);
    free(v->merges);
    free(v->model);
    free(v->pre);
    free(v->chat_template);
    strata_vocab_init(v);
}

static char *copy_bytes(const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (p) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

int strata_vocab_add_token(struct strata_vocab *v, const char *text, size_t len, int32_t type)
{
    if (v->n_tokens == v->cap_tokens) {
        uint32_t cap = v->cap_tokens ? v->cap_tokens * 2 : 1024;
        char **tokens = realloc(v->tokens, cap * sizeof(*tokens));
        if (!tokens) {
            return -ENOMEM;
        }
        v->tokens = tokens;
        int32_t *types = realloc(v->types, cap * sizeof(*types));
        if (!types) {
            return -ENOMEM;
        }
        v->types = types;
        v->cap_tokens = cap;
    }
    char *copy = copy_bytes(text, len);
    if (!copy) {
        return -ENOMEM;
    }
    v->tokens[v->n_tokens] = copy;
    v->types[v->n_tokens] = type;
    v->n_tokens++;
    return 0;
}

int strata_vocab_add_merge(struct strata_vocab *v, const char *left, size_t left_len,
                           const char *right, size_t right_len)
{
    if (v->n_merges == v->cap_merges) {
        uint32_t cap = v->cap_merges ? v->cap_merges * 2 : 1024;
        char **merges = realloc(v->merges, cap * sizeof(*merges));
        if (!merges) {
            return -ENOMEM;
        }
        v->merges = merges;
        v->cap_merges = cap;
    }
    char *m = malloc(left_len + right_len + 2);
    if (!m) {
        return -ENOMEM;
    }
    memcpy(m, left, left_len);
    m[left_len] = ' ';
    memcpy(m + left_len + 1, right, right_len);
    m[left_len + 1 + right_len] = '\0';
    v->merges[v->n_merges++] = m;
    return 0;
}

int strata_vocab_write(struct strata_gguf_writer *w, const struct strata_vocab *v)
{
    int rc;
    if ((rc = strata_gguf_writer_set_str(w, "tokenizer.ggml.model", v->model ? v->model : "gpt2")) < 0 ||
        (rc = strata_gguf_writer_set_str(w, "tokenizer.ggml.pre", v->pre ? v->pre : "qwen2")) < 0 ||
        (rc = strata_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens",
                                      (const char *const *)v->tokens, v->n_tokens)) < 0 ||
        (rc = strata_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, v->types,
                                  v->n_tokens)) < 0 ||
        (rc = strata_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges",
                                      (const char *const *)v->merges, v->n_merges)) < 0) {
        return rc;
    }
    const struct {
        const char *key;
        int32_t id;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", v->bos},     {"tokenizer.ggml.eos_token_id", v->eos},
        {"tokenizer.ggml.eot_token_id", v->eot},     {"tokenizer.ggml.eom_token_id", v->eom},
        {"tokenizer.ggml.padding_token_id", v->pad}, {"tokenizer.ggml.unknown_token_id", v->unk},
        {"tokenizer.ggml.seperator_token_id", v->sep},
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        if (ids[i].id >= 0 && (rc = strata_gguf_writer_set_u32(w, ids[i].key, (uint32_t)ids[i].id)) < 0) {
            return rc;
        }
    }
    if (v->add_bos >= 0 &&
        (rc = strata_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos != 0)) < 0) {
        return rc;
    }
    if (v->add_eos >= 0 &&
        (rc = strata_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos != 0)) < 0) {
        return rc;
    }
    if (v->chat_template &&
        (rc = strata_gguf_writer_set_str(w, "tokenizer.chat_template", v->chat_template)) < 0) {
        return rc;
    }
    return 0;
}
