// Internals shared by the files of src/tokenizer/ (and the tokenizer's own tests): the
// tokenizer's tables, the in-memory vocabulary description that the loaders, the HF importer
// and the built-in vocabulary exchange, and the pre-tokenizer.
#ifndef STRATA_TOKENIZER_INTERNAL_H
#define STRATA_TOKENIZER_INTERNAL_H

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

// ---- pre-tokenizer ------------------------------------------------------------------------------

struct strata_pretok_rules {
    bool marks_in_words;  // Qwen3.5: \p{M} joins letters in words
    uint32_t max_digits;  // digits per word: 1 (Qwen) or 3 (Llama-3, GLM-4)
};

// Split cps[0..n) into words; ends[i] receives the end of word i (ends needs n entries).
// Returns the number of words.
size_t strata_pretok_split(const struct strata_pretok_rules *rules, const uint32_t *cps, size_t n,
                           uint32_t *ends);

// GPT-2's byte-to-unicode map: byte b is shown as the code point strata_gpt2_byte_cp(b); the
// inverse returns -1 for code points that stand for no byte.
uint32_t strata_gpt2_byte_cp(uint8_t b);
int strata_gpt2_cp_byte(uint32_t cp);

// ---- vocabulary description ---------------------------------------------------------------------

// A vocabulary as plain arrays, owned (every string is malloc'd). Ids absent: STRATA_TOKEN_NULL;
// add_bos/add_eos absent: -1.
struct strata_vocab {
    char *model;           // "gpt2"
    char *pre;             // "qwen2", ...
    uint32_t n_tokens;
    char **tokens;         // [n_tokens] NUL-terminated
    int32_t *types;        // [n_tokens] enum strata_token_type
    uint32_t n_merges;
    char **merges;         // [n_merges] "left right"
    int32_t bos, eos, eot, eom, pad, unk, sep;
    int add_bos, add_eos;
    char *chat_template;   // or NULL
    uint32_t cap_tokens, cap_merges;
};

void strata_vocab_init(struct strata_vocab *v);
void strata_vocab_free(struct strata_vocab *v);
// Append a copy of text[0..len) as the next token id. 0 or -ENOMEM.
int strata_vocab_add_token(struct strata_vocab *v, const char *text, size_t len, int32_t type);
int strata_vocab_add_merge(struct strata_vocab *v, const char *left, size_t left_len,
                           const char *right, size_t right_len);
// Set the tokenizer.* keys of a GGUF writer from v.
int strata_vocab_write(struct strata_gguf_writer *w, const struct strata_vocab *v);
// Build a tokenizer directly from v (v may be freed afterwards).
int strata_tokenizer_create(struct strata_tokenizer **out, const struct strata_vocab *v);

// Read a HF tokenizer.json (+ optional config/template) into v. opts may be NULL.
int strata_hf_read(struct strata_vocab *v, const char *tokenizer_json_path,
                   const char *chat_template_path, const struct strata_hf_import_opts *opts);
// Train the built-in vocabulary of n_vocab tokens into v.
int strata_builtin_build(struct strata_vocab *v, uint32_t n_vocab);

#endif
