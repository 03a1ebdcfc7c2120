// Import of a Hugging Face tokenizer.json (+ tokenizer_config.json or a Jinja file) into
// tokenizer.ggml.* metadata, following llama.cpp's converter (convert_hf_to_gguf.py):
//   ids          dense 0..max id; holes become "[PAD<id>]" of type unused
//   token types  added tokens: control if "special" or shaped like "<|...|>" / "<｜...｜>",
//                otherwise user-defined (with U+2581 turned into a space); the rest normal
//   merges       "a b" strings; [a, b] pairs are joined with one space
// Not reproduced: the converter's encode/decode round trip of non-normalized added tokens
// (a no-op for byte-level vocabularies) and bos/eos ids from config.json (defaults below).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "gguf/gguf.h"
#include "tokenizer/internal.h"
#include "util/log.h"

#define MAX_JSON_BYTES (1ull << 30)

static int read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        int err = errno;
        strata_log_error("strata_tokenizer_import_hf: cannot open %s: %s", path, strerror(err));
        return -err;
    }
    int rc = 0;
    long size = -1;
    if (fseek(fp, 0, SEEK_END) == 0) {
        size = ftell(fp);
    }
    if (size < 0 || (unsigned long long)size > MAX_JSON_BYTES || fseek(fp, 0, SEEK_SET) != 0) {
        strata_log_error("strata_tokenizer_import_hf: %s: size %ld unusable (limit 1 GiB)", path,
                         size);
        fclose(fp);
        return STRATA_EFORMAT;
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        strata_log_error("strata_tokenizer_import_hf: no memory for %s (%ld bytes)", path, size);
        rc = -ENOMEM;
    } else if (fread(buf, 1, (size_t)size, fp) != (size_t)size) {
        strata_log_error("strata_tokenizer_import_hf: short read of %s", path);
        rc = STRATA_EIO;
    }
    fclose(fp);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[size] = '\0';
    *data = buf;
    *len = (size_t)size;
    return 0;
}

// The same text test as the converter's does_token_look_special.
static bool looks_special(const char *s)
{
    size_t n = strlen(s);
    static const char *const exact[] = {"<pad>", "<mask>", "<2mass>", "[@BOS@]", NULL};
    for (const char *const *p = exact; *p; p++) {
        if (strcmp(s, *p) == 0) {
            return true;
        }
    }
    struct {
        const char *open, *close;
    } shapes[] = {{"<|", "|>"}, {"<｜", "｜>"}, {"<unused", ">"}};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        size_t lo = strlen(shapes[i].open), lc = strlen(shapes[i].close);
        if (n >= lo && n >= lc && memcmp(s, shapes[i].open, lo) == 0 &&
            memcmp(s + n - lc, shapes[i].close, lc) == 0) {
            return true;
        }
    }
    return false;
}

// User-defined tokens are stored pre-normalized: SentencePiece's U+2581 becomes a space.
static char *replace_lower_one_eighth_block(const char *s)
{
    static const char bar[] = "\xe2\x96\x81";
    char *out = malloc(strlen(s) + 1), *d = out;
    if (!out) {
        return NULL;
    }
    while (*s) {
        if (strncmp(s, bar, 3) == 0) {
            *d++ = ' ';
            s += 3;
        } else {
            *d++ = *s++;
        }
    }
    *d = '\0';
    return out;
}

// A token given as "text" or {"content": "text"} in tokenizer_config.json; NULL otherwise.
static const char *config_token(const cJSON *cfg, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) {
        v = cJSON_GetObjectItemCaseSensitive(v, "content");
    }
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int32_t id_of(char *const *tokens, uint32_t n, const char *text)
{
    for (uint32_t i = n; i-- > 0;) {  // added tokens sit at the end: search from there
        if (tokens[i] && strcmp(tokens[i], text) == 0) {
            return (int32_t)i;
        }
    }
    return STRATA_TOKEN_NULL;
}

// chat_template of a tokenizer_config.json: a string, or a list of {name, template} where
// "default" wins.
static const char *config_template(const cJSON *cfg)
{
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    if (cJSON_IsString(ct)) {
        return ct->valuestring;
    }
    const char *first = NULL;
    const cJSON *item;
    if (!cJSON_IsArray(ct)) {
        return NULL;
    }
    cJSON_ArrayForEach(item, ct) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(item, "name");
        const cJSON *tmpl = cJSON_GetObjectItemCaseSensitive(item, "template");
        if (!cJSON_IsString(tmpl)) {
            continue;
        }
        if (cJSON_IsString(name) && strcmp(name->valuestring, "default") == 0) {
            return tmpl->valuestring;
        }
        if (!first) {
            first = tmpl->valuestring;
        }
    }
    return first;
}

// Template file: a JSON object (tokenizer_config.json) or raw Jinja text.
static int read_config(struct strata_vocab *v, const char *path, cJSON **cfg_out)
{
    char *data;
    size_t len;
    *cfg_out = NULL;
    int rc = read_file(path, &data, &len);
    if (rc < 0) {
        return rc;
    }
    cJSON *cfg = cJSON_ParseWithLength(data, len);
    if (cJSON_IsObject(cfg)) {
        const char *tmpl = config_template(cfg);
        if (tmpl && !(v->chat_template = strdup(tmpl))) {
            rc = -ENOMEM;
        }
        *cfg_out = cfg;
    } else {
        cJSON_Delete(cfg);
        v->chat_template = data;  // raw Jinja
        data = NULL;
    }
    free(data);
    return rc;
}

static int put_token(char **tokens, uint32_t n, int64_t id, const char *text, const char *path)
{
    if (id < 0 || id >= n) {
        strata_log_error("strata_tokenizer_import_hf: %s: token '%s' has id %lld", path, text,
                         (long long)id);
        return STRATA_EFORMAT;
    }
    if (tokens[id]) {
        if (strcmp(tokens[id], text) == 0) {
            return 0;
        }
        strata_log_error("strata_tokenizer_import_hf: %s: id %lld is both '%s' and '%s'", path,
                         (long long)id, tokens[id], text);
        return STRATA_EFORMAT;
    }
    tokens[id] = strdup(text);
    return tokens[id] ? 0 : -ENOMEM;
}

static int read_merges(struct strata_vocab *v, const cJSON *merges, const char *path)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        int rc;
        if (cJSON_IsString(m)) {
            const char *s = m->valuestring;
            const char *sp = s[0] ? strchr(s + 1, ' ') : NULL;
            if (!sp) {
                strata_log_error("strata_tokenizer_import_hf: %s: merge '%s' has no space", path,
                                 s);
                return STRATA_EFORMAT;
            }
            rc = strata_vocab_add_merge(v, s, (size_t)(sp - s), sp + 1, strlen(sp + 1));
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1))) {
            const char *a = cJSON_GetArrayItem(m, 0)->valuestring;
            const char *b = cJSON_GetArrayItem(m, 1)->valuestring;
            rc = strata_vocab_add_merge(v, a, strlen(a), b, strlen(b));
        } else {
            strata_log_error("strata_tokenizer_import_hf: %s: merge %u is neither \"a b\" nor "
                             "[a, b]", path, v->n_merges);
            return STRATA_EFORMAT;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

#define STRATA_HF_MAX_UNUSED_IDS 65536

// Fill v->tokens / v->types from model.vocab and added_tokens.
static int read_tokens(struct strata_vocab *v, const cJSON *vocab, const cJSON *added,
                       uint32_t n_min, const char *path)
{
    int64_t max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > INT32_MAX - 1) {
            strata_log_error("strata_tokenizer_import_hf: %s: vocab entry '%s' has a bad id",
                             path, e->string);
            return STRATA_EFORMAT;
        }
        max_id = e->valueint > max_id ? e->valueint : max_id;
    }
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > INT32_MAX - 1 ||
            !cJSON_IsString(content)) {
            strata_log_error("strata_tokenizer_import_hf: %s: an added token lacks id/content",
                             path);
            return STRATA_EFORMAT;
        }
        max_id = id->valueint > max_id ? id->valueint : max_id;
    }
    // Real vocabularies number their tokens densely (a few holes at most); ids far beyond the
    // count would make a table of mostly padding (a fuzzed file asked for 88 million rows).
    const int64_t n_given = (int64_t)cJSON_GetArraySize(vocab) + (int64_t)cJSON_GetArraySize(added);
    if (max_id + 1 - n_given > STRATA_HF_MAX_UNUSED_IDS) {
        strata_log_error("strata_tokenizer_import_hf: %s: token ids run to %lld but only %lld tokens are given "
                         "(at most %d ids may go unused)",
                         path, (long long)max_id, (long long)n_given, STRATA_HF_MAX_UNUSED_IDS);
        return STRATA_EFORMAT;
    }
    uint32_t n = (uint32_t)(max_id + 1) > n_min ? (uint32_t)(max_id + 1) : n_min;
    if (n == 0) {
        strata_log_error("strata_tokenizer_import_hf: %s: empty vocabulary", path);
        return STRATA_EFORMAT;
    }
    char **tokens = calloc(n, sizeof(*tokens));
    int32_t *types = malloc(n * sizeof(*types));
    int rc = (!tokens || !types) ? -ENOMEM : 0;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        types[i] = STRATA_TOKEN_TYPE_NORMAL;
    }
    for (e = vocab ? vocab->child : NULL; rc == 0 && e; e = e->next) {
        rc = put_token(tokens, n, e->valueint, e->string, path);
    }
    for (e = added ? added->child : NULL; rc == 0 && e; e = e->next) {
        int64_t id = cJSON_GetObjectItemCaseSensitive(e, "id")->valueint;
        const char *content = cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring;
        bool special = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special"));
        if (special || looks_special(content)) {
            types[id] = STRATA_TOKEN_TYPE_CONTROL;
            rc = put_token(tokens, n, id, content, path);
        } else {
            types[id] = STRATA_TOKEN_TYPE_USER_DEFINED;
            char *text = replace_lower_one_eighth_block(content);
            rc = text ? put_token(tokens, n, id, text, path) : -ENOMEM;
            free(text);
        }
    }
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        if (!tokens[i]) {
            char name[32];
            snprintf(name, sizeof(name), "[PAD%u]", i);
            types[i] = STRATA_TOKEN_TYPE_UNUSED;
            rc = (tokens[i] = strdup(name)) ? 0 : -ENOMEM;
        }
    }
    if (rc < 0) {
        for (uint32_t i = 0; tokens && i < n; i++) {
            free(tokens[i]);
        }
        free(tokens);
        free(types);
        return rc;
    }
    v->tokens = tokens;
    v->types = types;
    v->n_tokens = v->cap_tokens = n;
    return 0;
}

// bos/eos/pad: from the config when it names them, else Qwen's conventions.
static void pick_special_ids(struct strata_vocab *v, const cJSON *cfg)
{
    const char *eos = config_token(cfg, "eos_token");
    const char *bos = config_token(cfg, "bos_token");
    const char *pad = config_token(cfg, "pad_token");
    const char *unk = config_token(cfg, "unk_token");
    int32_t endoftext = id_of(v->tokens, v->n_tokens, "<|endoftext|>");
    int32_t im_end = id_of(v->tokens, v->n_tokens, "<|im_end|>");
    v->eos = eos ? id_of(v->tokens, v->n_tokens, eos) : im_end;
    if (v->eos == STRATA_TOKEN_NULL) {
        v->eos = endoftext;
    }
    // llama.cpp would guess eot from the token texts in hash-map order; name it instead
    v->eot = im_end;
    v->bos = bos ? id_of(v->tokens, v->n_tokens, bos) : endoftext;
    v->pad = pad ? id_of(v->tokens, v->n_tokens, pad) : endoftext;
    v->unk = unk ? id_of(v->tokens, v->n_tokens, unk) : STRATA_TOKEN_NULL;
    const cJSON *add_bos = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
    const cJSON *add_eos = cJSON_GetObjectItemCaseSensitive(cfg, "add_eos_token");
    v->add_bos = cJSON_IsBool(add_bos) ? cJSON_IsTrue(add_bos) : 0;
    if (cJSON_IsBool(add_eos)) {
        v->add_eos = cJSON_IsTrue(add_eos);
    }
}

int strata_hf_read(struct strata_vocab *v, const char *tokenizer_json_path,
                   const char *chat_template_path, const struct strata_hf_import_opts *opts)
{
    const char *path = tokenizer_json_path;
    char *data = NULL;
    size_t len;
    cJSON *root = NULL, *cfg = NULL;
    strata_vocab_init(v);
    int rc = read_file(path, &data, &len);
    if (rc < 0) {
        return rc;
    }
    root = cJSON_ParseWithLength(data, len);
    free(data);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!root) {
        strata_log_error("strata_tokenizer_import_hf: %s is not valid JSON", path);
        rc = STRATA_EFORMAT;
    } else if (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") != 0) {
        strata_log_error("strata_tokenizer_import_hf: %s: model.type is %s, only BPE is "
                         "supported", path, cJSON_IsString(type) ? type->valuestring : "missing");
        rc = STRATA_EUNSUP;
    } else if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges) ||
               (added && !cJSON_IsArray(added))) {
        strata_log_error("strata_tokenizer_import_hf: %s: model.vocab, model.merges or "
                         "added_tokens missing or of the wrong JSON type", path);
        rc = STRATA_EFORMAT;
    }
    if (rc == 0) {
        rc = read_tokens(v, vocab, added, opts ? opts->n_vocab_min : 0, path);
    }
    if (rc == 0) {
        rc = read_merges(v, merges, path);
    }
    if (rc == 0 && chat_template_path) {
        rc = read_config(v, chat_template_path, &cfg);
    }
    if (rc == 0) {
        pick_special_ids(v, cfg);
        v->model = strdup("gpt2");
        v->pre = strdup(opts && opts->pre ? opts->pre : "qwen2");
        if (!v->model || !v->pre) {
            rc = -ENOMEM;
        }
    }
    if (rc == -ENOMEM) {
        strata_log_error("strata_tokenizer_import_hf: out of memory reading %s", path);
    }
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    if (rc < 0) {
        strata_vocab_free(v);
    }
    return rc;
}

int strata_tokenizer_import_hf_ex(struct strata_gguf_writer *w, const char *tokenizer_json_path,
                                  const char *chat_template_path,
                                  const struct strata_hf_import_opts *opts,
                                  uint32_t *n_vocab_out)
{
    struct strata_vocab v;
    int rc = strata_hf_read(&v, tokenizer_json_path, chat_template_path, opts);
    if (rc < 0) {
        return rc;
    }
    rc = strata_vocab_write(w, &v);
    if (rc == 0 && n_vocab_out) {
        *n_vocab_out = v.n_tokens;
    }
    strata_vocab_free(&v);
    return rc;
}

int strata_tokenizer_import_hf(struct strata_gguf_writer *w, const char *tokenizer_json_path,
                               const char *chat_template_path, uint32_t *n_vocab_out)
{
    return strata_tokenizer_import_hf_ex(w, tokenizer_json_path, chat_template_path, NULL,
                                         n_vocab_out);
}
