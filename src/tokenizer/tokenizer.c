// Byte-level BPE tokenizer: vocabulary tables, special-token splitting, BPE by merge rank.
//
// Tables (all built at load, read-only afterwards, so one tokenizer serves many threads):
//   strings   every token text plus every merge part or result that is not a token, interned:
//             id [0, n_vocab) is the token with that id, later ids are the extra strings.
//             Bytes live in one arena; a hash table maps bytes -> string id.
//   pairs     (left string id, right string id) -> (merge rank, merged string id).
//   byte_sid  string id of the one-character GPT-2 form of each byte (the BPE start symbols).
//   pieces    [n_vocab] decoded bytes of each token (llama_token_to_piece with special = true).
//   specials  ids matched as a whole in text, longest text first.
//
// Tokenize: split the text at special tokens (each in turn, longest first, at every occurrence,
// as llama.cpp does); decode each remaining fragment to code points leniently (invalid byte ->
// U+FFFD), split it into words (pretok.c), re-encode each word to UTF-8, and run BPE on its bytes:
// repeatedly merge the adjacent pair with the lowest rank, leftmost first.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/internal.h"
#include "util/log.h"

// Token attributes, as llama.cpp derives them from token_type and from token texts.
#define ATTR_UNKNOWN      (1u << 0)
#define ATTR_UNUSED       (1u << 1)
#define ATTR_NORMAL       (1u << 2)
#define ATTR_CONTROL      (1u << 3)
#define ATTR_USER_DEFINED (1u << 4)
#define ATTR_BYTE         (1u << 5)
#define ATTR_EOG          (1u << 15)  // ours: ends generation
#define ATTR_SPECIAL      (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)

struct str_table {
    uint64_t *slots;  // high 32 bits: hash tag; low 32: string id + 1 (0 = empty)
    uint64_t mask;
};

struct pair_table {
    uint64_t *keys;   // left << 32 | right; PAIR_EMPTY = empty
    uint32_t *rank;
    uint32_t *result;
    uint64_t mask;
};
#define PAIR_EMPTY UINT64_MAX

struct strata_tokenizer {
    struct strata_tokenizer_info info;
    char *pre;
    struct strata_pretok_rules rules;
    bool ignore_merges;  // Llama-3: a word that is a whole token skips BPE

    uint32_t n_str, cap_str;
    uint64_t *str_off;   // [cap_str] offset in arena
    uint32_t *str_len;   // [cap_str]
    char *arena;
    size_t arena_len, arena_cap;
    struct str_table strs;

    uint16_t *attr;      // [n_vocab]
    struct pair_table pairs;
    uint32_t byte_sid[256];

    uint64_t *piece_off; // [n_vocab]
    uint32_t *piece_len; // [n_vocab]
    char *pieces;

    int32_t *specials;   // [info.n_special]
};

// Where the loaders' strings come from: GGUF string arrays or C string arrays.
struct str_list {
    const struct strata_gguf_str *g;
    char *const *c;
};

struct vocab_src {
    const char *model, *pre;
    uint32_t n_tokens;
    struct str_list tokens;
    const int32_t *types;   // or NULL: all normal
    uint32_t n_merges;
    struct str_list merges;
    int32_t bos, eos, eot, eom, pad, unk, sep;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos;   // -1: absent
};

// Pre-tokenizer families by tokenizer.ggml.pre value (llama.cpp's grouping).
struct pre_family {
    const char *name;
    struct strata_pretok_rules rules;
    bool ignore_merges;
    bool add_bos;
    bool no_default_bos;
};

#define QWEN2_RULES {false, 1}
#define QWEN35_RULES {true, 1}
#define LLAMA3_RULES {false, 3}

static const struct pre_family PRE_FAMILIES[] = {
    {"qwen2", QWEN2_RULES, false, false, false},
    {"deepseek-r1-qwen", QWEN2_RULES, false, false, false},
    {"kormo", QWEN2_RULES, false, false, false},
    {"f2llmv2", QWEN2_RULES, false, false, false},
    {"megrez", QWEN2_RULES, false, false, false},
    {"stablelm2", QWEN2_RULES, false, false, false},
    {"hunyuan", QWEN2_RULES, false, false, false},
    {"solar-open", QWEN2_RULES, false, false, false},
    {"grok-2", QWEN2_RULES, false, false, false},
    {"qwen35", QWEN35_RULES, false, false, false},
    {"llama3", LLAMA3_RULES, true, true, false},
    {"llama-v3", LLAMA3_RULES, true, true, false},
    {"llama-bpe", LLAMA3_RULES, true, true, false},
    {"falcon3", LLAMA3_RULES, true, true, false},
    {"falcon-h1", LLAMA3_RULES, true, true, false},
    {"pixtral", LLAMA3_RULES, true, true, false},
    {"midm-2.0", LLAMA3_RULES, true, true, false},
    {"lfm2", LLAMA3_RULES, true, true, false},
    {"jina-v5-nano", LLAMA3_RULES, true, true, false},
    {"dbrx", LLAMA3_RULES, false, false, false},
    {"smaug-bpe", LLAMA3_RULES, false, false, false},
    {"glm4", LLAMA3_RULES, false, false, true},
    {"chatglm-bpe", LLAMA3_RULES, false, false, true},
};
#define N_PRE_FAMILIES (sizeof(PRE_FAMILIES) / sizeof(PRE_FAMILIES[0]))

// Token texts llama.cpp treats specially when the metadata does not say (it marks them
// control). Where it picks one id among several candidates it takes whichever its hash map
// yields first; we take the lowest id.
static const char *const EOT_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>", NULL};
static const char *const EOM_TEXTS[] = {"<|eom_id|>", NULL};
static const char *const FIM_PRE_TEXTS[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
    "<|code_prefix|>", "<|prefix|>", NULL};
static const char *const FIM_SUF_TEXTS[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
    "<|code_suffix|>", "<|suffix|>", NULL};
static const char *const FIM_MID_TEXTS[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
    "<|code_middle|>", "<|middle|>", NULL};
static const char *const FIM_PAD_TEXTS[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const FIM_REP_TEXTS[] = {
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
static const char *const FIM_SEP_TEXTS[] = {"<|file_sep|>", NULL};
static const char *const EOG_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[", NULL};
// gpt-oss: always rendered, so always parsed.
static const char *const FORCE_USER_DEFINED_TEXTS[] = {
    "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};

// ---- GPT-2 byte map ----------------------------------------------------------------------------

// Printable Latin-1 bytes stand for themselves; the other 68 bytes (0x00-0x20, 0x7F-0xA0 and
// 0xAD), in byte order, become U+0100.., so that every byte has a visible, non-space character.
#define GPT2_LOW_END 0x20   // 0x00..0x20 -> U+0100..U+0120
#define GPT2_MID_LO  0x7F   // 0x7F..0xA0 -> U+0121..U+0142
#define GPT2_MID_HI  0xA0
#define GPT2_SHY     0xAD   // -> U+0143

uint32_t strata_gpt2_byte_cp(uint8_t b)
{
    if (b <= GPT2_LOW_END) {
        return 256 + b;
    }
    if (b >= GPT2_MID_LO && b <= GPT2_MID_HI) {
        return 256 + (GPT2_LOW_END + 1) + (b - GPT2_MID_LO);
    }
    if (b == GPT2_SHY) {
        return 256 + (GPT2_LOW_END + 1) + (GPT2_MID_HI - GPT2_MID_LO + 1);
    }
    return b;
}

int strata_gpt2_cp_byte(uint32_t cp)
{
    const uint32_t n_low = GPT2_LOW_END + 1, n_mid = GPT2_MID_HI - GPT2_MID_LO + 1;
    if (cp < 256) {
        bool remapped = cp <= GPT2_LOW_END || (cp >= GPT2_MID_LO && cp <= GPT2_MID_HI) ||
                        cp == GPT2_SHY;
        return remapped ? -1 : (int)cp;
    }
    uint32_t n = cp - 256;
    if (n < n_low) {
        return (int)n;
    }
    if (n < n_low + n_mid) {
        return (int)(GPT2_MID_LO + (n - n_low));
    }
    return n == n_low + n_mid ? GPT2_SHY : -1;
}

// ---- interned strings --------------------------------------------------------------------------

// Word-at-a-time mixing hash (token texts average ~7 bytes, so this is one or two rounds).
static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ len, w;
    for (; len >= 8; s += 8, len -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    w = 0;
    memcpy(&w, s, len);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static const char *str_bytes(const struct strata_tokenizer *t, uint32_t sid)
{
    return t->arena + t->str_off[sid];
}

// Slot index for s: holds its id + 1 (low half), or 0 where it would go. The hash's high bits
// ride along in the slot so that most mismatches are rejected without touching the arena.
static uint64_t str_slot(const struct strata_tokenizer *t, const char *s, size_t len)
{
    uint64_t h = hash_bytes(s, len), i = h & t->strs.mask, tag = h >> 32;
    for (;;) {
        uint64_t v = t->strs.slots[i];
        if (v == 0) {
            return i;
        }
        uint32_t sid = (uint32_t)v - 1;
        if ((v >> 32) == tag && t->str_len[sid] == len &&
            memcmp(str_bytes(t, sid), s, len) == 0) {
            return i;
        }
        i = (i + 1) & t->strs.mask;
    }
}

static uint64_t str_slot_value(const char *s, size_t len, uint32_t sid)
{
    return (hash_bytes(s, len) >> 32) << 32 | (sid + 1);
}

static int32_t str_find(const struct strata_tokenizer *t, const char *s, size_t len)
{
    uint64_t v = t->strs.slots[str_slot(t, s, len)];
    return v == 0 ? -1 : (int32_t)((uint32_t)v - 1);
}

static int str_table_grow(struct strata_tokenizer *t)
{
    uint64_t cap = (t->strs.mask + 1) * 2;
    uint64_t *slots = calloc(cap, sizeof(*slots));
    if (!slots) {
        return -ENOMEM;
    }
    free(t->strs.slots);
    t->strs.slots = slots;
    t->strs.mask = cap - 1;
    for (uint32_t sid = 0; sid < t->n_str; sid++) {
        const char *s = str_bytes(t, sid);
        slots[str_slot(t, s, t->str_len[sid])] = str_slot_value(s, t->str_len[sid], sid);
    }
    return 0;
}

// Intern s; *sid receives its id, *added whether it is new.
static int str_intern(struct strata_tokenizer *t, const char *s, size_t len, uint32_t *sid,
                      bool *added)
{
    uint64_t slot = str_slot(t, s, len);
    if (t->strs.slots[slot] != 0) {
        *sid = (uint32_t)t->strs.slots[slot] - 1;
        *added = false;
        return 0;
    }
    if (t->n_str == t->cap_str) {
        uint32_t cap = t->cap_str ? t->cap_str * 2 : 1024;
        uint64_t *off = realloc(t->str_off, cap * sizeof(*off));
        if (!off) {
            return -ENOMEM;
        }
        t->str_off = off;
        uint32_t *lens = realloc(t->str_len, cap * sizeof(*lens));
        if (!lens) {
            return -ENOMEM;
        }
        t->str_len = lens;
        t->cap_str = cap;
    }
    if (t->arena_len + len + 1 > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
        while (cap < t->arena_len + len + 1) {
            cap *= 2;
        }
        char *arena = realloc(t->arena, cap);
        if (!arena) {
            return -ENOMEM;
        }
        t->arena = arena;
        t->arena_cap = cap;
    }
    memcpy(t->arena + t->arena_len, s, len);
    t->arena[t->arena_len + len] = '\0';
    t->str_off[t->n_str] = t->arena_len;
    t->str_len[t->n_str] = (uint32_t)len;
    t->arena_len += len + 1;
    t->strs.slots[slot] = str_slot_value(s, len, t->n_str);
    *sid = t->n_str++;
    *added = true;
    if ((uint64_t)t->n_str * 2 > t->strs.mask + 1) {
        return str_table_grow(t);
    }
    return 0;
}

// ---- merge pairs -------------------------------------------------------------------------------

static uint64_t pair_hash(uint64_t key)
{
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15ull;
    return key ^ (key >> 32);
}

static uint64_t pair_slot(const struct pair_table *p, uint64_t key)
{
    uint64_t i = pair_hash(key) & p->mask;
    while (p->keys[i] != PAIR_EMPTY && p->keys[i] != key) {
        i = (i + 1) & p->mask;
    }
    return i;
}

// Rank and result of merging left+right, or false if no merge.
static bool pair_find(const struct pair_table *p, uint32_t left, uint32_t right, uint32_t *rank,
                      uint32_t *result)
{
    uint64_t i = pair_slot(p, (uint64_t)left << 32 | right);
    if (p->keys[i] == PAIR_EMPTY) {
        return false;
    }
    *rank = p->rank[i];
    *result = p->result[i];
    return true;
}

// ---- loading -----------------------------------------------------------------------------------

static void list_get(const struct str_list *l, uint64_t i, const char **s, size_t *len)
{
    if (l->g) {
        *s = l->g[i].s;
        *len = (size_t)l->g[i].len;
    } else {
        *s = l->c[i];
        *len = strlen(l->c[i]);
    }
}

static uint16_t attr_of_type(int32_t type)
{
    switch (type) {
    case STRATA_TOKEN_TYPE_NORMAL: return ATTR_NORMAL;
    case STRATA_TOKEN_TYPE_UNKNOWN: return ATTR_UNKNOWN;
    case STRATA_TOKEN_TYPE_CONTROL: return ATTR_CONTROL;
    case STRATA_TOKEN_TYPE_USER_DEFINED: return ATTR_USER_DEFINED;
    case STRATA_TOKEN_TYPE_UNUSED: return ATTR_UNUSED;
    case STRATA_TOKEN_TYPE_BYTE: return ATTR_BYTE;
    default: return 0;  // undefined: no text, never special
    }
}

static int32_t find_text(const struct strata_tokenizer *t, const char *text)
{
    int32_t sid = str_find(t, text, strlen(text));
    return sid >= 0 && (uint32_t)sid < t->info.n_vocab ? sid : STRATA_TOKEN_NULL;
}

// The first token (by id) whose text is in list, unless *id is already set; marks it control.
static void detect_by_text(struct strata_tokenizer *t, int32_t *id, const char *const *list)
{
    if (*id != STRATA_TOKEN_NULL) {
        return;
    }
    int32_t best = STRATA_TOKEN_NULL;
    for (const char *const *p = list; *p; p++) {
        int32_t found = find_text(t, *p);
        if (found != STRATA_TOKEN_NULL && (best == STRATA_TOKEN_NULL || found < best)) {
            best = found;
        }
    }
    if (best != STRATA_TOKEN_NULL) {
        *id = best;
        t->attr[best] |= ATTR_CONTROL;
    }
}

static void set_eog(struct strata_tokenizer *t, int32_t id)
{
    if (id != STRATA_TOKEN_NULL) {
        t->attr[id] |= ATTR_EOG;
    }
}

// llama.cpp's text-based fix-ups of token attributes and its end-of-generation set.
static void apply_token_heuristics(struct strata_tokenizer *t, struct vocab_src *src)
{
    struct strata_tokenizer_info *in = &t->info;
    detect_by_text(t, &in->eot, EOT_TEXTS);
    detect_by_text(t, &in->eom, EOM_TEXTS);
    detect_by_text(t, &src->fim_pre, FIM_PRE_TEXTS);
    detect_by_text(t, &src->fim_suf, FIM_SUF_TEXTS);
    detect_by_text(t, &src->fim_mid, FIM_MID_TEXTS);
    detect_by_text(t, &src->fim_pad, FIM_PAD_TEXTS);
    detect_by_text(t, &src->fim_rep, FIM_REP_TEXTS);
    detect_by_text(t, &src->fim_sep, FIM_SEP_TEXTS);

    set_eog(t, src->fim_pad);
    set_eog(t, src->fim_rep);
    set_eog(t, src->fim_sep);
    for (const char *const *p = EOG_TEXTS; *p; p++) {
        int32_t id = find_text(t, *p);
        if (id != STRATA_TOKEN_NULL) {
            t->attr[id] |= ATTR_EOG | ATTR_CONTROL;
        }
    }
    for (const char *const *p = FORCE_USER_DEFINED_TEXTS; *p; p++) {
        int32_t id = find_text(t, *p);
        if (id != STRATA_TOKEN_NULL) {
            t->attr[id] = (uint16_t)((t->attr[id] & ATTR_EOG) | ATTR_USER_DEFINED);
        }
    }
    set_eog(t, in->eos);
    set_eog(t, in->eot);
    set_eog(t, in->eom);

    // o200k_harmony / solar-open: "<|end|>" is not the end when <|return|>+<|call|> or
    // <|calls|>+<|flush|> exist; it is then an ordinary rendered token.
    int32_t end = find_text(t, "<|end|>");
    bool is_eog_end = end != STRATA_TOKEN_NULL && (t->attr[end] & ATTR_EOG);
    int32_t ret = find_text(t, "<|return|>"), call = find_text(t, "<|call|>");
    int32_t calls = find_text(t, "<|calls|>"), flush = find_text(t, "<|flush|>");
    bool has_call = (call != STRATA_TOKEN_NULL && (t->attr[call] & ATTR_EOG)) ||
                    (calls != STRATA_TOKEN_NULL && (t->attr[calls] & ATTR_EOG));
    bool has_ret = ret != STRATA_TOKEN_NULL && (t->attr[ret] & ATTR_EOG);
    bool has_flush = flush != STRATA_TOKEN_NULL && (t->attr[flush] & ATTR_EOG);
    if (is_eog_end && has_call && (has_ret || has_flush)) {
        t->attr[end] = ATTR_USER_DEFINED;
    }
    // gemma4 / paddleocr: "</s>" is not the end when "<|tool_response>" is.
    int32_t s_end = find_text(t, "</s>"), tool_resp = find_text(t, "<|tool_response>");
    if (s_end != STRATA_TOKEN_NULL && tool_resp != STRATA_TOKEN_NULL &&
        (t->attr[s_end] & ATTR_EOG) && (t->attr[tool_resp] & ATTR_EOG)) {
        t->attr[s_end] = ATTR_NORMAL;
    }
}

static int cmp_special(const void *a, const void *b, void *ctx)
{
    const struct strata_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (t->str_len[x] != t->str_len[y]) {
        return t->str_len[x] > t->str_len[y] ? -1 : 1;
    }
    return x < y ? -1 : x > y;
}

static int build_specials(struct strata_tokenizer *t)
{
    uint32_t n = 0;
    for (uint32_t id = 0; id < t->info.n_vocab; id++) {
        n += (t->attr[id] & ATTR_SPECIAL) != 0;
    }
    t->specials = malloc((n ? n : 1) * sizeof(*t->specials));
    if (!t->specials) {
        return -ENOMEM;
    }
    n = 0;
    for (uint32_t id = 0; id < t->info.n_vocab; id++) {
        if (t->attr[id] & ATTR_SPECIAL) {
            t->specials[n++] = (int32_t)id;
        }
    }
    t->info.n_special = n;
    qsort_r(t->specials, n, sizeof(*t->specials), cmp_special, t);
    return 0;
}

// Decoded bytes of a normal token: each character back to its byte. A character that stands
// for no byte is written as llama.cpp does: "[UNK_BYTE_0x<hex of its UTF-8>" + text + "]".
static size_t decode_normal(const char *text, size_t len, char *dst)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t n = 0, i = 0;
    while (i < len) {
        size_t used;
        uint32_t cp = strata_utf8_decode_lenient(s + i, len - i, &used);
        int b = strata_gpt2_cp_byte(cp);
        if (b >= 0) {
            if (dst) {
                dst[n] = (char)b;
            }
            n++;
        } else {
            static const char hex[] = "0123456789abcdef";
            uint8_t utf8[4];
            size_t k = strata_utf8_encode(cp, utf8);
            size_t add = 12 + 2 * k + len + 1;
            if (dst) {
                char *d = dst + n;
                memcpy(d, "[UNK_BYTE_0x", 12);
                d += 12;
                for (size_t j = 0; j < k; j++) {
                    *d++ = hex[utf8[j] >> 4];
                    *d++ = hex[utf8[j] & 15];
                }
                memcpy(d, text, len);
                d[len] = ']';
            }
            n += add;
        }
        i += used;
    }
    return n;
}

static uint8_t hex_digit(char c, bool *ok)
{
    if (c >= '0' && c <= '9') {
        return (uint8_t)(c - '0');
    }
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
        return (uint8_t)((c | 0x20) - 'a' + 10);
    }
    *ok = false;
    return 0;
}

// Byte of a "<0xAB>" token (strtol semantics: digits up to the first non-hex character).
static char byte_token_value(const char *text, size_t len)
{
    unsigned v = 0;
    bool ok = true;
    for (size_t i = 3; i < 5 && i < len && ok; i++) {
        uint8_t d = hex_digit(text[i], &ok);
        if (ok) {
            v = v * 16 + d;
        }
    }
    return (char)v;
}

static size_t piece_of(const struct strata_tokenizer *t, uint32_t id, char *dst)
{
    const char *text = str_bytes(t, id);
    size_t len = t->str_len[id];
    uint16_t a = t->attr[id];
    if (a & ATTR_SPECIAL) {
        if (dst) {
            memcpy(dst, text, len);
        }
        return len;
    }
    if (a & ATTR_NORMAL) {
        return decode_normal(text, len, dst);
    }
    if (a & ATTR_BYTE) {
        if (dst) {
            dst[0] = byte_token_value(text, len);
        }
        return 1;
    }
    return 0;
}

static int build_pieces(struct strata_tokenizer *t)
{
    uint32_t n = t->info.n_vocab;
    t->piece_off = malloc(n * sizeof(*t->piece_off));
    t->piece_len = malloc(n * sizeof(*t->piece_len));
    if (!t->piece_off || !t->piece_len) {
        return -ENOMEM;
    }
    uint64_t total = 0;
    for (uint32_t id = 0; id < n; id++) {
        size_t len = piece_of(t, id, NULL);
        t->piece_off[id] = total;
        t->piece_len[id] = (uint32_t)len;
        total += len;
    }
    t->pieces = malloc(total ? total : 1);
    if (!t->pieces) {
        return -ENOMEM;
    }
    for (uint32_t id = 0; id < n; id++) {
        piece_of(t, id, t->pieces + t->piece_off[id]);
    }
    return 0;
}

static int load_tokens(struct strata_tokenizer *t, const struct vocab_src *src)
{
    for (uint32_t id = 0; id < src->n_tokens; id++) {
        const char *s;
        size_t len;
        char empty_name[32];
        list_get(&src->tokens, id, &s, &len);
        if (len == 0) {  // llama.cpp renames empty tokens so they stay unique
            len = (size_t)snprintf(empty_name, sizeof(empty_name), "[EMPTY_%u]", id);
            s = empty_name;
        }
        if (len > UINT32_MAX / 2) {
            strata_log_error("strata_tokenizer_load: token %u is %zu bytes long", id, len);
            return STRATA_EFORMAT;
        }
        uint32_t sid;
        bool added;
        int rc = str_intern(t, s, len, &sid, &added);
        if (rc < 0) {
            return rc;
        }
        if (!added) {
            strata_log_error("strata_tokenizer_load: token %u '%.*s' duplicates token %u", id,
                             (int)(len < 64 ? len : 64), s, sid);
            return STRATA_EFORMAT;
        }
        int32_t type = src->types ? src->types[id] : STRATA_TOKEN_TYPE_NORMAL;
        t->attr[id] = attr_of_type(type);
    }
    return 0;
}

static int load_merges(struct strata_tokenizer *t, const struct vocab_src *src)
{
    uint64_t cap = 16;
    while (cap < (uint64_t)src->n_merges * 2) {
        cap *= 2;
    }
    t->pairs.keys = malloc(cap * sizeof(*t->pairs.keys));
    t->pairs.rank = malloc(cap * sizeof(*t->pairs.rank));
    t->pairs.result = malloc(cap * sizeof(*t->pairs.result));
    if (!t->pairs.keys || !t->pairs.rank || !t->pairs.result) {
        return -ENOMEM;
    }
    memset(t->pairs.keys, 0xFF, cap * sizeof(*t->pairs.keys));
    t->pairs.mask = cap - 1;

    char *joined = NULL;
    size_t joined_cap = 0;
    int rc = 0;
    for (uint32_t rank = 0; rank < src->n_merges && rc == 0; rank++) {
        const char *m;
        size_t len;
        list_get(&src->merges, rank, &m, &len);
        // "left right", split at the first space after the first byte (as llama.cpp does);
        // a merge without one can never apply
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp || sp + 1 == m + len) {
            continue;
        }
        size_t left_len = (size_t)(sp - m), right_len = len - left_len - 1;
        if (len > joined_cap) {
            free(joined);
            joined_cap = len * 2;
            joined = malloc(joined_cap);
            if (!joined) {
                return -ENOMEM;
            }
        }
        memcpy(joined, m, left_len);
        memcpy(joined + left_len, sp + 1, right_len);
        uint32_t left, right, result;
        bool added;
        if ((rc = str_intern(t, m, left_len, &left, &added)) < 0 ||
            (rc = str_intern(t, sp + 1, right_len, &right, &added)) < 0 ||
            (rc = str_intern(t, joined, len - 1, &result, &added)) < 0) {
            break;
        }
        uint64_t key = (uint64_t)left << 32 | right;
        uint64_t slot = pair_slot(&t->pairs, key);
        if (t->pairs.keys[slot] == PAIR_EMPTY) {  // a repeated pair keeps its first rank
            t->pairs.keys[slot] = key;
            t->pairs.rank[slot] = rank;
            t->pairs.result[slot] = result;
        }
    }
    free(joined);
    return rc;
}

static int create_from_src(struct strata_tokenizer **out, struct vocab_src *src)
{
    *out = NULL;
    if (!src->model || strcmp(src->model, "gpt2") != 0) {
        strata_log_error("strata_tokenizer_load: tokenizer model '%s' is not supported (only "
                         "byte-level BPE, 'gpt2')", src->model ? src->model : "(missing)");
        return STRATA_EUNSUP;
    }
    const struct pre_family *fam = NULL;
    for (size_t i = 0; src->pre && i < N_PRE_FAMILIES; i++) {
        if (strcmp(src->pre, PRE_FAMILIES[i].name) == 0) {
            fam = &PRE_FAMILIES[i];
        }
    }
    if (!fam) {
        strata_log_error("strata_tokenizer_load: pre-tokenizer '%s' is not supported (known: "
                         "qwen2, qwen35, llama3, glm4 and their aliases)",
                         src->pre ? src->pre : "(missing: llama.cpp's 'default')");
        return STRATA_EUNSUP;
    }
    if (src->n_tokens == 0 || src->n_tokens > INT32_MAX) {
        strata_log_error("strata_tokenizer_load: vocabulary has %u tokens", src->n_tokens);
        return STRATA_EFORMAT;
    }

    struct strata_tokenizer *t = calloc(1, sizeof(*t));
    if (!t) {
        return -ENOMEM;
    }
    int rc = -ENOMEM;
    t->info.n_vocab = src->n_tokens;
    t->info.n_merges = src->n_merges;
    t->pre = strdup(src->pre);
    t->rules = fam->rules;
    t->ignore_merges = fam->ignore_merges;
    uint64_t cap = 1024;
    while (cap < (uint64_t)src->n_tokens * 2) {  // merges rarely add strings: load stays <= 1/2
        cap *= 2;
    }
    t->strs.slots = calloc(cap, sizeof(*t->strs.slots));
    t->strs.mask = cap - 1;
    t->attr = calloc(src->n_tokens, sizeof(*t->attr));
    if (!t->pre || !t->strs.slots || !t->attr) {
        goto fail;
    }
    t->info.pre = t->pre;
    if ((rc = load_tokens(t, src)) < 0 || (rc = load_merges(t, src)) < 0) {
        goto fail;
    }
    for (unsigned b = 0; b < 256; b++) {
        uint8_t utf8[4];
        size_t k = strata_utf8_encode(strata_gpt2_byte_cp((uint8_t)b), utf8);
        bool added;
        if ((rc = str_intern(t, (const char *)utf8, k, &t->byte_sid[b], &added)) < 0) {
            goto fail;
        }
    }

    // special ids: llama.cpp's defaults for "gpt2" (bos = eos = 11, if in range), then the keys
    struct strata_tokenizer_info *in = &t->info;
    int32_t dflt = fam->no_default_bos ? STRATA_TOKEN_NULL : 11;
    in->bos = src->bos != STRATA_TOKEN_NULL ? src->bos : dflt;
    in->eos = src->eos != STRATA_TOKEN_NULL ? src->eos : 11;
    if (in->bos >= (int32_t)in->n_vocab) {
        in->bos = STRATA_TOKEN_NULL;
    }
    if (in->eos >= (int32_t)in->n_vocab) {
        in->eos = STRATA_TOKEN_NULL;
    }
    in->eot = src->eot;
    in->eom = src->eom;
    in->pad = src->pad;
    in->unk = src->unk;
    in->sep = src->sep;
    in->add_bos = src->add_bos >= 0 ? src->add_bos != 0 : fam->add_bos;
    in->add_eos = src->add_eos > 0;
    apply_token_heuristics(t, src);
    if ((rc = build_specials(t)) < 0 || (rc = build_pieces(t)) < 0) {
        goto fail;
    }
    *out = t;
    return 0;
fail:
    if (rc == -ENOMEM) {
        strata_log_error("strata_tokenizer_load: out of memory for %u tokens", src->n_tokens);
    }
    strata_tokenizer_free(t);
    return rc;
}

static int get_id(const struct strata_gguf_file *f, const char *key, uint32_t n_vocab, int32_t *id)
{
    uint32_t v;
    int rc = strata_gguf_get_u32(f, key, &v);
    *id = STRATA_TOKEN_NULL;
    if (rc == -ENOENT) {
        return 0;
    }
    if (rc < 0) {
        return rc;
    }
    if (v >= n_vocab) {  // llama.cpp ignores such an id with a warning
        strata_log_warn("strata_tokenizer_load: %s = %u is past the vocabulary (%u), ignored",
                        key, v, n_vocab);
        return 0;
    }
    *id = (int32_t)v;
    return 0;
}

static int get_flag(const struct strata_gguf_file *f, const char *key, int *flag)
{
    bool v;
    int rc = strata_gguf_get_bool(f, key, &v);
    *flag = rc == 0 ? v : -1;
    return rc == -ENOENT ? 0 : rc;
}

int strata_tokenizer_load(struct strata_tokenizer **out, const struct strata_gguf_file *f)
{
    struct vocab_src src;
    memset(&src, 0, sizeof(src));
    *out = NULL;
    int rc = strata_gguf_get_str(f, "tokenizer.ggml.model", &src.model);
    if (rc < 0 && rc != -ENOENT) {
        return rc;
    }
    if ((rc = strata_gguf_get_str(f, "tokenizer.ggml.pre", &src.pre)) < 0 && rc != -ENOENT) {
        return rc;
    }
    if (src.model && strcmp(src.model, "gpt2") != 0) {
        return create_from_src(out, &src);  // logs the unsupported model
    }
    const void *items;
    uint64_t n;
    if ((rc = strata_gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &items, &n)) < 0) {
        if (rc == -ENOENT) {
            strata_log_error("strata_tokenizer_load: %s has no tokenizer.ggml.tokens", f->path);
            return STRATA_EFORMAT;
        }
        return rc;
    }
    if (n == 0 || n > INT32_MAX) {
        strata_log_error("strata_tokenizer_load: %s has %llu tokens", f->path,
                         (unsigned long long)n);
        return STRATA_EFORMAT;
    }
    src.n_tokens = (uint32_t)n;
    src.tokens.g = items;
    rc = strata_gguf_get_arr(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &items, &n);
    if (rc == 0) {
        if (n < src.n_tokens) {
            strata_log_error("strata_tokenizer_load: %llu token types for %u tokens",
                             (unsigned long long)n, src.n_tokens);
            return STRATA_EFORMAT;
        }
        src.types = items;
    } else if (rc != -ENOENT) {
        return rc;
    }
    if ((rc = strata_gguf_get_arr(f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &items, &n)) < 0) {
        if (rc == -ENOENT) {
            strata_log_error("strata_tokenizer_load: %s has no tokenizer.ggml.merges", f->path);
            return STRATA_EFORMAT;
        }
        return rc;
    }
    if (n > UINT32_MAX) {
        strata_log_error("strata_tokenizer_load: %llu merges", (unsigned long long)n);
        return STRATA_EFORMAT;
    }
    src.n_merges = (uint32_t)n;
    src.merges.g = items;

    static const struct {
        const char *key;
        size_t field;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", offsetof(struct vocab_src, bos)},
        {"tokenizer.ggml.eos_token_id", offsetof(struct vocab_src, eos)},
        {"tokenizer.ggml.eot_token_id", offsetof(struct vocab_src, eot)},
        {"tokenizer.ggml.eom_token_id", offsetof(struct vocab_src, eom)},
        {"tokenizer.ggml.unknown_token_id", offsetof(struct vocab_src, unk)},
        {"tokenizer.ggml.seperator_token_id", offsetof(struct vocab_src, sep)},
        {"tokenizer.ggml.padding_token_id", offsetof(struct vocab_src, pad)},
        {"tokenizer.ggml.fim_pre_token_id", offsetof(struct vocab_src, fim_pre)},
        {"tokenizer.ggml.fim_suf_token_id", offsetof(struct vocab_src, fim_suf)},
        {"tokenizer.ggml.fim_mid_token_id", offsetof(struct vocab_src, fim_mid)},
        {"tokenizer.ggml.fim_pad_token_id", offsetof(struct vocab_src, fim_pad)},
        {"tokenizer.ggml.fim_rep_token_id", offsetof(struct vocab_src, fim_rep)},
        {"tokenizer.ggml.fim_sep_token_id", offsetof(struct vocab_src, fim_sep)},
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        int32_t *dst = (int32_t *)((char *)&src + ids[i].field);
        if ((rc = get_id(f, ids[i].key, src.n_tokens, dst)) < 0) {
            return rc;
        }
    }
    if ((rc = get_flag(f, "tokenizer.ggml.add_bos_token", &src.add_bos)) < 0 ||
        (rc = get_flag(f, "tokenizer.ggml.add_eos_token", &src.add_eos)) < 0) {
        return rc;
    }
    return create_from_src(out, &src);
}

int strata_tokenizer_create(struct strata_tokenizer **out, const struct strata_vocab *v)
{
    struct vocab_src src = {
        .model = v->model, .pre = v->pre, .n_tokens = v->n_tokens, .tokens = {NULL, v->tokens},
        .types = v->types, .n_merges = v->n_merges, .merges = {NULL, v->merges},
        .bos = v->bos, .eos = v->eos, .eot = v->eot, .eom = v->eom, .pad = v->pad,
        .unk = v->unk, .sep = v->sep,
        .fim_pre = STRATA_TOKEN_NULL, .fim_suf = STRATA_TOKEN_NULL, .fim_mid = STRATA_TOKEN_NULL,
        .fim_pad = STRATA_TOKEN_NULL, .fim_rep = STRATA_TOKEN_NULL, .fim_sep = STRATA_TOKEN_NULL,
        .add_bos = v->add_bos, .add_eos = v->add_eos,
    };
    int32_t *ids[] = {&src.bos, &src.eos, &src.eot, &src.eom, &src.pad, &src.unk, &src.sep};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        if (*ids[i] >= (int64_t)v->n_tokens || *ids[i] < 0) {
            *ids[i] = STRATA_TOKEN_NULL;
        }
    }
    return create_from_src(out, &src);
}

void strata_tokenizer_free(struct strata_tokenizer *t)
{
    if (!t) {
        return;
    }
    free(t->pre);
    free(t->str_off);
    free(t->str_len);
    free(t->arena);
    free(t->strs.slots);
    free(t->attr);
    free(t->pairs.keys);
    free(t->pairs.rank);
    free(t->pairs.result);
    free(t->piece_off);
    free(t->piece_len);
    free(t->pieces);
    free(t->specials);
    free(t);
}

const struct strata_tokenizer_info *strata_tokenizer_get_info(const struct strata_tokenizer *t)
{
    return &t->info;
}

const char *strata_tokenizer_pre_name(size_t i)
{
    return i < N_PRE_FAMILIES ? PRE_FAMILIES[i].name : NULL;
}

// ---- tokenize ----------------------------------------------------------------------------------

// A piece of the input: raw text [off, off + len), or a special token (id >= 0).
struct fragment {
    size_t off, len;
    int32_t id;
};

struct symbol {
    uint32_t sid;       // interned string id of the symbol's text
    int32_t prev, next; // neighbours in the word (-1: none)
    uint32_t start;     // first byte in the word
    uint32_t len;       // bytes; 0 once merged into its left neighbour
};

struct candidate {
    uint32_t rank;
    uint32_t left, right;  // symbol indices
    uint32_t left_sid, right_sid, result;
};

// Per-call working memory, grown to the largest fragment / word seen.
struct scratch {
    uint32_t *cps, *ends;
    size_t cap_cps;
    uint8_t *bytes;       // one word re-encoded as UTF-8
    char *encoded;        // one word in GPT-2 characters (ignore_merges lookups)
    struct symbol *syms;
    struct candidate *heap;
    size_t cap_word, n_heap, cap_heap;
    struct fragment *frags, *frags_next;
    size_t n_frags, cap_frags;
};

struct emitter {
    int32_t *out;
    size_t cap, n;
};

static void emit(struct emitter *e, int32_t id)
{
    if (e->n < e->cap) {
        e->out[e->n] = id;
    }
    e->n++;
}

static void *grow(void *p, size_t n, size_t size)
{
    return n > SIZE_MAX / size ? NULL : realloc(p, n * size);
}

static int scratch_reserve_cps(struct scratch *s, size_t n)
{
    if (n <= s->cap_cps) {
        return 0;
    }
    uint32_t *cps = grow(s->cps, n, sizeof(*cps));
    if (!cps) {
        return -ENOMEM;
    }
    s->cps = cps;
    uint32_t *ends = grow(s->ends, n, sizeof(*ends));
    if (!ends) {
        return -ENOMEM;
    }
    s->ends = ends;
    s->cap_cps = n;
    return 0;
}

static int scratch_reserve_word(struct scratch *s, size_t n_bytes)
{
    if (n_bytes <= s->cap_word) {
        return 0;
    }
    size_t cap = n_bytes * 2;
    void *p;
    if (!(p = grow(s->bytes, cap, 1))) {
        return -ENOMEM;
    }
    s->bytes = p;
    if (!(p = grow(s->encoded, cap, 2))) {
        return -ENOMEM;
    }
    s->encoded = p;
    if (!(p = grow(s->syms, cap, sizeof(*s->syms)))) {
        return -ENOMEM;
    }
    s->syms = p;
    s->cap_word = cap;
    return 0;
}

static bool cand_less(const struct candidate *a, const struct candidate *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static int heap_push(struct scratch *s, const struct candidate *c)
{
    if (s->n_heap == s->cap_heap) {
        size_t cap = s->cap_heap ? s->cap_heap * 2 : 64;
        struct candidate *h = grow(s->heap, cap, sizeof(*h));
        if (!h) {
            return -ENOMEM;
        }
        s->heap = h;
        s->cap_heap = cap;
    }
    size_t i = s->n_heap++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_less(c, &s->heap[parent])) {
            break;
        }
        s->heap[i] = s->heap[parent];
        i = parent;
    }
    s->heap[i] = *c;
    return 0;
}

static struct candidate heap_pop(struct scratch *s)
{
    struct candidate top = s->heap[0];
    struct candidate last = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) {
            break;
        }
        if (child + 1 < n && cand_less(&s->heap[child + 1], &s->heap[child])) {
            child++;
        }
        if (!cand_less(&s->heap[child], &last)) {
            break;
        }
        s->heap[i] = s->heap[child];
        i = child;
    }
    if (n > 0) {
        s->heap[i] = last;
    }
    return top;
}

static int push_pair(const struct strata_tokenizer *t, struct scratch *s, int32_t left,
                     int32_t right)
{
    if (left < 0 || right < 0) {
        return 0;
    }
    struct candidate c;
    c.left = (uint32_t)left;
    c.right = (uint32_t)right;
    c.left_sid = s->syms[left].sid;
    c.right_sid = s->syms[right].sid;
    if (!pair_find(&t->pairs, c.left_sid, c.right_sid, &c.rank, &c.result)) {
        return 0;
    }
    return heap_push(s, &c);
}

// Emit a final symbol: its token, or (only for vocabularies whose merges make strings that
// are not tokens) the tokens of its single GPT-2-encoded bytes, as llama.cpp falls back.
static void emit_symbol(const struct strata_tokenizer *t, const uint8_t *word,
                        const struct symbol *sym, struct emitter *e)
{
    if (sym->sid < t->info.n_vocab) {
        emit(e, (int32_t)sym->sid);
        return;
    }
    for (uint32_t i = 0; i < sym->len; i++) {
        uint32_t sid = t->byte_sid[word[sym->start + i]];
        const char *enc = str_bytes(t, sid);
        for (uint32_t j = 0; j < t->str_len[sid]; j++) {
            int32_t id = str_find(t, enc + j, 1);
            if (id >= 0 && (uint32_t)id < t->info.n_vocab) {
                emit(e, id);
            }
        }
    }
}

// BPE over one word of n raw bytes (in s->bytes).
static int bpe_word(const struct strata_tokenizer *t, struct scratch *s, size_t n,
                    struct emitter *e)
{
    const uint8_t *word = s->bytes;
    if (t->ignore_merges) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t sid = t->byte_sid[word[i]];
            memcpy(s->encoded + k, str_bytes(t, sid), t->str_len[sid]);
            k += t->str_len[sid];
        }
        int32_t id = str_find(t, s->encoded, k);
        if (id >= 0 && (uint32_t)id < t->info.n_vocab) {
            emit(e, id);
            return 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        s->syms[i] = (struct symbol){t->byte_sid[word[i]], (int32_t)i - 1,
                                     i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)i, 1};
    }
    s->n_heap = 0;
    int rc;
    for (size_t i = 1; i < n; i++) {
        if ((rc = push_pair(t, s, (int32_t)i - 1, (int32_t)i)) < 0) {
            return rc;
        }
    }
    while (s->n_heap > 0) {
        struct candidate c = heap_pop(s);
        struct symbol *l = &s->syms[c.left], *r = &s->syms[c.right];
        // stale: one side has since merged with something else
        if (l->len == 0 || r->len == 0 || l->next != (int32_t)c.right ||
            l->sid != c.left_sid || r->sid != c.right_sid) {
            continue;
        }
        l->len += r->len;
        l->sid = c.result;
        r->len = 0;
        l->next = r->next;
        if (r->next >= 0) {
            s->syms[r->next].prev = (int32_t)c.left;
        }
        if ((rc = push_pair(t, s, l->prev, (int32_t)c.left)) < 0 ||
            (rc = push_pair(t, s, (int32_t)c.left, l->next)) < 0) {
            return rc;
        }
    }
    for (int32_t i = 0; i >= 0; i = s->syms[i].next) {
        emit_symbol(t, word, &s->syms[i], e);
    }
    return 0;
}

static int tokenize_fragment(const struct strata_tokenizer *t, struct scratch *s,
                             const uint8_t *text, size_t len, struct emitter *e)
{
    int rc = scratch_reserve_cps(s, len);
    if (rc < 0) {
        return rc;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t used;
        s->cps[n++] = strata_utf8_decode_lenient(text + i, len - i, &used);
        i += used;
    }
    size_t n_words = strata_pretok_split(&t->rules, s->cps, n, s->ends);
    size_t start = 0;
    for (size_t w = 0; w < n_words; w++) {
        size_t end = s->ends[w];
        if ((rc = scratch_reserve_word(s, (end - start) * 4)) < 0) {
            return rc;
        }
        size_t nb = 0;
        for (size_t i = start; i < end; i++) {
            size_t k = strata_utf8_encode(s->cps[i], s->bytes + nb);
            if (k == 0) {
                strata_log_error("strata_tokenizer_encode: code point 0x%X is past U+10FFFF",
                                 (unsigned)s->cps[i]);
                return STRATA_EARG;
            }
            nb += k;
        }
        if ((rc = bpe_word(t, s, nb, e)) < 0) {
            return rc;
        }
        start = end;
    }
    return 0;
}

static int frags_reserve(struct scratch *s, size_t n)
{
    if (n <= s->cap_frags) {
        return 0;
    }
    size_t cap = n * 2;
    struct fragment *a = grow(s->frags, cap, sizeof(*a));
    if (!a) {
        return -ENOMEM;
    }
    s->frags = a;
    struct fragment *b = grow(s->frags_next, cap, sizeof(*b));
    if (!b) {
        return -ENOMEM;
    }
    s->frags_next = b;
    s->cap_frags = cap;
    return 0;
}

// Split the raw fragments at every occurrence of one special token (left to right).
static int split_at_special(const struct strata_tokenizer *t, struct scratch *s, const char *text,
                            int32_t id)
{
    const char *needle = str_bytes(t, (uint32_t)id);
    size_t nlen = t->str_len[id];
    size_t n_next = 0;
    for (size_t i = 0; i < s->n_frags; i++) {
        struct fragment f = s->frags[i];
        if (f.id >= 0 || f.len < nlen) {
            if (frags_reserve(s, n_next + 1) < 0) {
                return -ENOMEM;
            }
            s->frags_next[n_next++] = f;
            continue;
        }
        size_t pos = f.off, end = f.off + f.len;
        for (;;) {
            const char *hit = memmem(text + pos, end - pos, needle, nlen);
            if (frags_reserve(s, n_next + 2) < 0) {
                return -ENOMEM;
            }
            if (!hit) {
                if (end > pos) {
                    s->frags_next[n_next++] = (struct fragment){pos, end - pos, -1};
                }
                break;
            }
            size_t at = (size_t)(hit - text);
            if (at > pos) {
                s->frags_next[n_next++] = (struct fragment){pos, at - pos, -1};
            }
            s->frags_next[n_next++] = (struct fragment){at, nlen, id};
            pos = at + nlen;
        }
    }
    struct fragment *tmp = s->frags;
    s->frags = s->frags_next;
    s->frags_next = tmp;
    s->n_frags = n_next;
    return 0;
}

static void scratch_free(struct scratch *s)
{
    free(s->cps);
    free(s->ends);
    free(s->bytes);
    free(s->encoded);
    free(s->syms);
    free(s->heap);
    free(s->frags);
    free(s->frags_next);
}

int strata_tokenizer_encode(const struct strata_tokenizer *t, const char *text, size_t len,
                    bool parse_special, int32_t *out, size_t cap, size_t *n_out)
{
    struct scratch s;
    struct emitter e = {out, out ? cap : 0, 0};
    bool count_only = !out && cap == 0;
    int rc = 0;
    memset(&s, 0, sizeof(s));
    *n_out = 0;
    if (len == 0) {
        return 0;
    }
    if (!text || len > INT32_MAX) {  // symbol indices are 32-bit
        strata_log_error("strata_tokenizer_encode: text %s of %zu bytes", text ? "too long" : "NULL", len);
        return STRATA_EARG;
    }
    if ((rc = frags_reserve(&s, 16)) < 0) {
        goto done;
    }
    s.frags[0] = (struct fragment){0, len, -1};
    s.n_frags = 1;

    bool present[256] = {false};  // cheap filter: skip specials whose first byte never occurs
    for (size_t i = 0; i < len; i++) {
        present[(uint8_t)text[i]] = true;
    }
    for (uint32_t i = 0; i < t->info.n_special; i++) {
        int32_t id = t->specials[i];
        if (!parse_special && (t->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) {
            continue;
        }
        if (!present[(uint8_t)str_bytes(t, (uint32_t)id)[0]]) {
            continue;
        }
        if ((rc = split_at_special(t, &s, text, id)) < 0) {
            goto done;
        }
    }
    for (size_t i = 0; i < s.n_frags; i++) {
        const struct fragment *f = &s.frags[i];
        if (f->id >= 0) {
            emit(&e, f->id);
        } else if ((rc = tokenize_fragment(t, &s, (const uint8_t *)text + f->off, f->len,
                                           &e)) < 0) {
            goto done;
        }
    }
    *n_out = e.n;
    if (e.n > e.cap && !count_only) {
        strata_log_error("strata_tokenizer_encode: %zu tokens do not fit in %zu", e.n, e.cap);
        rc = -ENOSPC;
    }
done:
    if (rc == -ENOMEM) {
        strata_log_error("strata_tokenizer_encode: out of memory for %zu bytes of text", len);
    }
    scratch_free(&s);
    return rc;
}

int32_t strata_tokenizer_find(const struct strata_tokenizer *t, const char *text, size_t len)
{
    int32_t sid = str_find(t, text, len);
    return sid >= 0 && (uint32_t)sid < t->info.n_vocab ? sid : STRATA_TOKEN_NULL;
}

// ---- per-token queries -------------------------------------------------------------------------

int strata_token_to_piece(const struct strata_tokenizer *t, int32_t id, bool special,
                          const char **piece, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->info.n_vocab) {
        strata_log_error("strata_token_to_piece: token %d is outside the vocabulary (%u)", id,
                         t->info.n_vocab);
        return STRATA_EARG;
    }
    *piece = t->pieces + t->piece_off[id];
    *len = t->piece_len[id];
    if (!special && (t->attr[id] & (ATTR_CONTROL | ATTR_UNKNOWN))) {
        *len = 0;
    }
    return 0;
}

const char *strata_token_text(const struct strata_tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || (uint32_t)id >= t->info.n_vocab) {
        return NULL;
    }
    *len = t->str_len[id];
    return str_bytes(t, (uint32_t)id);
}

enum strata_token_type strata_token_type_of(const struct strata_tokenizer *t, int32_t id)
{
    if (id < 0 || (uint32_t)id >= t->info.n_vocab) {
        return STRATA_TOKEN_TYPE_UNDEFINED;
    }
    uint16_t a = t->attr[id];
    if (a & ATTR_USER_DEFINED) {
        return STRATA_TOKEN_TYPE_USER_DEFINED;
    }
    if (a & ATTR_CONTROL) {
        return STRATA_TOKEN_TYPE_CONTROL;
    }
    if (a & ATTR_UNKNOWN) {
        return STRATA_TOKEN_TYPE_UNKNOWN;
    }
    if (a & ATTR_BYTE) {
        return STRATA_TOKEN_TYPE_BYTE;
    }
    if (a & ATTR_UNUSED) {
        return STRATA_TOKEN_TYPE_UNUSED;
    }
    return (a & ATTR_NORMAL) ? STRATA_TOKEN_TYPE_NORMAL : STRATA_TOKEN_TYPE_UNDEFINED;
}

bool strata_tokenizer_is_eog(const struct strata_tokenizer *t, int32_t id)
{
    return id >= 0 && (uint32_t)id < t->info.n_vocab && (t->attr[id] & ATTR_EOG);
}
