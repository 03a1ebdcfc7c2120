// Pre-tokenizer: splits a run of code points into words before BPE, by hand instead of with a
// regex engine. The patterns are those of Qwen2 / Qwen3.5 / Llama-3 (GLM-4 uses Llama-3's):
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,K} |
//   ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// with K = 1 (Qwen) or 3 (Llama-3), and \p{L} widened to [\p{L}\p{M}] for Qwen3.5. The
// alternatives are tried in order at each position, as llama.cpp's hand-written matcher does;
// its behaviour (not a regex engine's) is the reference, including at the end of the text,
// which it treats as "nothing follows" for the (?!\S) look-ahead.
#include "tokenizer/internal.h"

// Class bits of the code point at a position; 0 past the end, so that no test matches there.
#define AT_PRESENT 0x01
#define AT_WORD    0x02  // letter (or mark, where marks join words)
#define AT_NUMBER  0x04
#define AT_SPACE   0x08

static unsigned class_at(const struct strata_pretok_rules *rules, const uint32_t *cps, size_t n,
                         size_t i)
{
    if (i >= n) {
        return 0;
    }
    uint8_t ucd = strata_ucd_get(cps[i]);
    enum strata_ucat cat = (enum strata_ucat)(ucd & STRATA_UCD_CLASS_MASK);
    unsigned bits = AT_PRESENT;
    if (cat == STRATA_UCAT_LETTER || (rules->marks_in_words && cat == STRATA_UCAT_MARK)) {
        bits |= AT_WORD;
    }
    if (cat == STRATA_UCAT_NUMBER) {
        bits |= AT_NUMBER;
    }
    if (ucd & STRATA_UCD_WHITESPACE) {
        bits |= AT_SPACE;
    }
    return bits;
}

static uint32_t ascii_lower(uint32_t c)
{
    // Only ASCII letters lower-case to the letters the contractions use (no other code point
    // has a simple lowercase mapping to s t m d r e v l), so ASCII folding is exact here.
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

static bool is_crlf(uint32_t c)
{
    return c == '\r' || c == '\n';
}

// End of the word that starts at pos (always > pos).
static size_t word_end(const struct strata_pretok_rules *rules, const uint32_t *cps, size_t n,
                       size_t pos)
{
    uint32_t c = cps[pos];
    unsigned here = class_at(rules, cps, n, pos);

    // 's 't 're 've 'm 'll 'd, any case
    if (c == '\'' && pos + 1 < n) {
        uint32_t c1 = ascii_lower(cps[pos + 1]);
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
            return pos + 2;
        }
        if (pos + 2 < n) {
            uint32_t c2 = ascii_lower(cps[pos + 2]);
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                return pos + 3;
            }
        }
    }

    // one optional non-letter, non-digit, non-newline prefix, then letters
    if (!is_crlf(c) && !(here & AT_NUMBER)) {
        if ((here & AT_WORD) || (class_at(rules, cps, n, pos + 1) & AT_WORD)) {
            size_t end = pos + 1;
            while (class_at(rules, cps, n, end) & AT_WORD) {
                end++;
            }
            return end;
        }
    }

    // digits, in groups of at most max_digits
    if (here & AT_NUMBER) {
        size_t end = pos + 1;
        while (end - pos < rules->max_digits && (class_at(rules, cps, n, end) & AT_NUMBER)) {
            end++;
        }
        return end;
    }

    // optional space, then a run of "other" characters, then any newlines
    unsigned first = c == ' ' ? class_at(rules, cps, n, pos + 1) : here;
    if (!(first & (AT_SPACE | AT_WORD | AT_NUMBER))) {
        size_t end = pos + (c == ' ');
        for (;;) {
            unsigned k = class_at(rules, cps, n, end);
            if (!(k & AT_PRESENT) || (k & (AT_SPACE | AT_WORD | AT_NUMBER))) {
                break;
            }
            end++;
        }
        while (end < n && is_crlf(cps[end])) {
            end++;
        }
        return end;
    }

    // whitespace run: up to its last newline if it has one; otherwise all of it, except that
    // a run of two or more followed by more text leaves its last character to the next word
    size_t n_space = 0, after_newline = 0;
    while (class_at(rules, cps, n, pos + n_space) & AT_SPACE) {
        if (is_crlf(cps[pos + n_space])) {
            after_newline = pos + n_space + 1;
        }
        n_space++;
    }
    if (after_newline > 0) {
        return after_newline;
    }
    if (n_space > 1 && pos + n_space < n) {
        return pos + n_space - 1;
    }
    if (n_space > 0) {
        return pos + n_space;
    }
    return pos + 1;
}

size_t strata_pretok_split(const struct strata_pretok_rules *rules, const uint32_t *cps, size_t n,
                           uint32_t *ends)
{
    size_t n_words = 0, pos = 0;
    while (pos < n) {
        pos = word_end(rules, cps, n, pos);
        ends[n_words++] = (uint32_t)pos;
    }
    return n_words;
}
