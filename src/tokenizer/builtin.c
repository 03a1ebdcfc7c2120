// Built-in byte-level BPE vocabulary for synthetic models: learned here, at call time, by plain
// BPE training on a short English text embedded below, so the result is deterministic and needs
// no files. Layout of the n_vocab ids:
//   [0, 256)                 byte b is token b, written in GPT-2's byte-to-unicode form
//   [256, 256 + n_learned)   one token per merge that made a new string, in training order
//   ...                      "[PAD<id>]" unused tokens if the text ran out of merges
//   the last three           <|endoftext|>, <|im_start|>, <|im_end|> (control)
// Training: words come from the same Qwen2 pre-tokenizer that tokenizes; each step merges the
// most frequent adjacent pair (ties: the smaller left id, then the smaller right id).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "tokenizer/internal.h"
#include "util/log.h"

static const char TRAINING_TEXT[] =
    "The lighthouse keeper woke before the sun, as he had done every morning for thirty-one "
    "years. He climbed the one hundred and twelve steps of the tower, wiped the salt from the "
    "great lens, and wrote the weather into his book: wind from the north-west, light rain, "
    "visibility four miles. Then he made tea, and while the kettle was heating he watched the "
    "fishing boats leave the harbour one after another.\n\n"
    "It's a quiet life, people told him, and they were right. But quiet is not the same as "
    "empty. There was always something to repair: a hinge, a window, the old radio that only "
    "worked when it wanted to. There were letters to answer and a small garden to keep alive "
    "against the wind. In the evenings he read books about ships, stars and distant cities, and "
    "sometimes he wrote short notes in the margins for whoever would read them next.\n\n"
    "One autumn a young woman arrived with a notebook and a camera. She said she was studying "
    "the coast, measuring how fast the cliffs were falling into the sea. \"About a metre every "
    "ten years,\" she explained, \"but it isn't even. Some winters take much more.\" He showed "
    "her the records his predecessors had kept since 1887, pages of careful handwriting about "
    "storms, wrecks and the price of lamp oil. She photographed every page.\n\n"
    "They talked about the sea for hours. She asked why he had stayed so long, and he said that "
    "he liked knowing exactly what he was for. The light turns, the ships see it, and they do "
    "not hit the rocks. Not many jobs are that simple. She laughed and said that her own work "
    "was the opposite: she measured things that nobody could stop, and wrote reports that few "
    "people would read.\n\n"
    "When she left, she promised to send him a copy of her study. It arrived in the spring: "
    "two hundred and forty pages, with maps, tables and a chapter about the lighthouse itself. "
    "The numbers were worse than she had guessed. At the present rate, the cliff would reach "
    "the tower in about ninety years. He read the chapter twice, then put the report on the "
    "shelf next to the old record books, where it seemed to belong.\n\n"
    "Today the light is automatic. A computer switches it on at dusk and off at dawn, and a "
    "technician visits twice a year to check the batteries and the software. The keeper's "
    "cottage has become a small museum. Visitors can read the weather books, see the brass "
    "instruments, and climb the same steps he climbed. On the wall near the door there is a "
    "photograph of him in his blue coat, standing next to the lens, and under it a line from "
    "one of his notes: \"Keep the glass clean and the log honest; the rest takes care of "
    "itself.\"\n\n"
    "Questions people often ask at the museum:\n"
    "1. How far can the light be seen? About 22 nautical miles in clear weather.\n"
    "2. How often does it flash? Twice every 15 seconds.\n"
    "3. What fuel did it use? Oil until 1921, then gas, then electricity from 1958.\n"
    "4. Can I stay the night? No, but the cottage next door is a guest house from May to "
    "September.\n\n"
    "def flash_pattern(seconds):\n"
    "    # two flashes, then darkness until the period ends\n"
    "    return [0.5, 1.0, 0.5] + [0.0] * (seconds - 2)\n\n"
    "The children who visit like the stairs best. They count them out loud, they're tired by "
    "the top, and then they forget about it when they see the view: the whole bay, the town, "
    "the islands, and on a good day the mountains far to the east. We'll keep the tower open "
    "as long as the cliff allows, the guide tells them. After that, the light will move inland, "
    "and somebody will write a new book about the new tower.\n";

#define N_BYTES 256
#define N_SPECIAL 3
static const char *const SPECIAL_TOKENS[N_SPECIAL] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>"};

static const char CHATML_TEMPLATE[] =
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// A distinct word of the text: its symbols (token ids) and how often it occurs.
struct train_word {
    int32_t *syms;
    uint32_t n_syms;
    uint32_t count;
};

struct pair_count {
    uint64_t key;  // left id << 32 | right id
    uint32_t count;
};

struct trainer {
    struct train_word *words;
    uint32_t n_words;
    struct strata_vocab *v;
    struct pair_count *pairs;  // one entry per adjacent pair occurrence (scratch)
};

static int cmp_word(const void *a, const void *b)
{
    const struct train_word *x = a, *y = b;
    uint32_t n = x->n_syms < y->n_syms ? x->n_syms : y->n_syms;
    int c = memcmp(x->syms, y->syms, n * sizeof(int32_t));
    if (c != 0) {
        return c;
    }
    return (x->n_syms > y->n_syms) - (x->n_syms < y->n_syms);
}

// Split the text into words (Qwen2 rules) and merge duplicates into counts.
static int collect_words(struct trainer *tr)
{
    static const struct strata_pretok_rules rules = {false, 1};
    const uint8_t *text = (const uint8_t *)TRAINING_TEXT;
    size_t len = sizeof(TRAINING_TEXT) - 1, n = 0;
    uint32_t *cps = malloc(len * sizeof(*cps)), *ends = malloc(len * sizeof(*ends));
    size_t *byte_at = malloc((len + 1) * sizeof(*byte_at));
    tr->words = calloc(len, sizeof(*tr->words));
    int rc = 0;
    if (!cps || !ends || !byte_at || !tr->words) {
        rc = -ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < len;) {
        size_t used;
        byte_at[n] = i;
        cps[n++] = strata_utf8_decode_lenient(text + i, len - i, &used);
        i += used;
    }
    byte_at[n] = len;
    size_t n_words = strata_pretok_split(&rules, cps, n, ends), start = 0;
    for (size_t w = 0; w < n_words; w++) {
        size_t b0 = byte_at[start], b1 = byte_at[ends[w]];
        struct train_word *tw = &tr->words[w];
        tw->syms = malloc((b1 - b0) * sizeof(int32_t));
        if (!tw->syms) {
            rc = -ENOMEM;
            goto done;
        }
        for (size_t b = b0; b < b1; b++) {
            tw->syms[tw->n_syms++] = text[b];
        }
        tw->count = 1;
        tr->n_words++;
        start = ends[w];
    }
    qsort(tr->words, tr->n_words, sizeof(*tr->words), cmp_word);
    uint32_t kept = 0;
    for (uint32_t i = 0; i < tr->n_words; i++) {
        if (kept > 0 && cmp_word(&tr->words[kept - 1], &tr->words[i]) == 0) {
            tr->words[kept - 1].count++;
            free(tr->words[i].syms);
        } else {
            tr->words[kept++] = tr->words[i];
        }
    }
    tr->n_words = kept;
done:
    free(cps);
    free(ends);
    free(byte_at);
    return rc;
}

static int cmp_pair(const void *a, const void *b)
{
    const struct pair_count *x = a, *y = b;
    return (x->key > y->key) - (x->key < y->key);
}

// The most frequent adjacent pair; false when no word has two symbols left.
static bool best_pair(struct trainer *tr, int32_t *left, int32_t *right)
{
    size_t n = 0;
    for (uint32_t w = 0; w < tr->n_words; w++) {
        const struct train_word *tw = &tr->words[w];
        for (uint32_t i = 0; i + 1 < tw->n_syms; i++) {
            tr->pairs[n].key = (uint64_t)tw->syms[i] << 32 | (uint32_t)tw->syms[i + 1];
            tr->pairs[n++].count = tw->count;
        }
    }
    if (n == 0) {
        return false;
    }
    qsort(tr->pairs, n, sizeof(*tr->pairs), cmp_pair);
    uint64_t best_key = 0;
    uint32_t best = 0;
    for (size_t i = 0; i < n;) {  // sorted by key, so the first maximum has the smallest ids
        uint64_t key = tr->pairs[i].key;
        uint32_t sum = 0;
        for (; i < n && tr->pairs[i].key == key; i++) {
            sum += tr->pairs[i].count;
        }
        if (sum > best) {
            best = sum;
            best_key = key;
        }
    }
    *left = (int32_t)(best_key >> 32);
    *right = (int32_t)(uint32_t)best_key;
    return true;
}

static void apply_merge(struct trainer *tr, int32_t left, int32_t right, int32_t merged)
{
    for (uint32_t w = 0; w < tr->n_words; w++) {
        struct train_word *tw = &tr->words[w];
        uint32_t out = 0;
        for (uint32_t i = 0; i < tw->n_syms; i++) {
            if (i + 1 < tw->n_syms && tw->syms[i] == left && tw->syms[i + 1] == right) {
                tw->syms[out++] = merged;
                i++;
            } else {
                tw->syms[out++] = tw->syms[i];
            }
        }
        tw->n_syms = out;
    }
}

static int32_t find_token(const struct strata_vocab *v, const char *s)
{
    for (uint32_t i = 0; i < v->n_tokens; i++) {
        if (strcmp(v->tokens[i], s) == 0) {
            return (int32_t)i;
        }
    }
    return STRATA_TOKEN_NULL;
}

// Learn merges until there are n_target tokens or the text has no pairs left.
static int train(struct trainer *tr, uint32_t n_target)
{
    struct strata_vocab *v = tr->v;
    tr->pairs = malloc(sizeof(TRAINING_TEXT) * sizeof(*tr->pairs));
    if (!tr->pairs) {
        return -ENOMEM;
    }
    int32_t left, right;
    int rc = 0;
    while (v->n_tokens < n_target && best_pair(tr, &left, &right)) {
        const char *a = v->tokens[left], *b = v->tokens[right];
        size_t la = strlen(a), lb = strlen(b);
        char *joined = malloc(la + lb + 1);
        if (!joined) {
            return -ENOMEM;
        }
        memcpy(joined, a, la);
        memcpy(joined + la, b, lb + 1);
        // two different pairs can spell the same string: reuse the token, keep both merges
        int32_t merged = find_token(v, joined);
        if (merged == STRATA_TOKEN_NULL) {
            merged = (int32_t)v->n_tokens;
            rc = strata_vocab_add_token(v, joined, la + lb, STRATA_TOKEN_TYPE_NORMAL);
        }
        free(joined);
        if (rc == 0) {
            rc = strata_vocab_add_merge(v, v->tokens[left], la, v->tokens[right], lb);
        }
        if (rc < 0) {
            return rc;
        }
        apply_merge(tr, left, right, merged);
    }
    return 0;
}

int strata_builtin_build(struct strata_vocab *v, uint32_t n_vocab)
{
    strata_vocab_init(v);
    if (n_vocab < N_BYTES + N_SPECIAL || n_vocab > INT32_MAX) {
        strata_log_error("strata_tokenizer_write_builtin: n_vocab %u is outside [%u, %d]", n_vocab,
                         N_BYTES + N_SPECIAL, INT32_MAX);
        return STRATA_EARG;
    }
    struct trainer tr;
    memset(&tr, 0, sizeof(tr));
    tr.v = v;
    int rc = 0;
    for (unsigned b = 0; b < N_BYTES && rc == 0; b++) {
        uint8_t utf8[4];
        size_t k = strata_utf8_encode(strata_gpt2_byte_cp((uint8_t)b), utf8);
        rc = strata_vocab_add_token(v, (const char *)utf8, k, STRATA_TOKEN_TYPE_NORMAL);
    }
    if (rc == 0) {
        rc = collect_words(&tr);
    }
    if (rc == 0) {
        rc = train(&tr, n_vocab - N_SPECIAL);
    }
    while (rc == 0 && v->n_tokens < n_vocab - N_SPECIAL) {
        char name[32];
        int len = snprintf(name, sizeof(name), "[PAD%u]", v->n_tokens);
        rc = strata_vocab_add_token(v, name, (size_t)len, STRATA_TOKEN_TYPE_UNUSED);
    }
    for (int i = 0; i < N_SPECIAL && rc == 0; i++) {
        rc = strata_vocab_add_token(v, SPECIAL_TOKENS[i], strlen(SPECIAL_TOKENS[i]),
                                    STRATA_TOKEN_TYPE_CONTROL);
    }
    if (rc == 0) {
        v->bos = (int32_t)n_vocab - 3;  // <|endoftext|>, as Qwen's GGUFs have it
        v->eos = (int32_t)n_vocab - 1;  // <|im_end|>
        v->eot = (int32_t)n_vocab - 1;
        v->pad = (int32_t)n_vocab - 3;
        v->add_bos = 0;
        v->model = strdup("gpt2");
        v->pre = strdup("qwen2");
        v->chat_template = strdup(CHATML_TEMPLATE);
        if (!v->model || !v->pre || !v->chat_template) {
            rc = -ENOMEM;
        }
    }
    for (uint32_t w = 0; w < tr.n_words; w++) {
        free(tr.words[w].syms);
    }
    free(tr.words);
    free(tr.pairs);
    if (rc == -ENOMEM) {
        strata_log_error("strata_tokenizer_write_builtin: out of memory for %u tokens", n_vocab);
    }
    if (rc < 0) {
        strata_vocab_free(v);
    }
    return rc;
}

int strata_tokenizer_write_builtin(struct strata_gguf_writer *w, uint32_t n_vocab)
{
    struct strata_vocab v;
    int rc = strata_builtin_build(&v, n_vocab);
    if (rc < 0) {
        return rc;
    }
    rc = strata_vocab_write(w, &v);
    strata_vocab_free(&v);
    return rc;
}
