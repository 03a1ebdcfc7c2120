// UTF-8 decoding and encoding for the tokenizer: the lenient decoder that mirrors llama.cpp
// (so that pre-tokenization sees the same code points) and a strict checker for the streaming
// detokenizer (so that only well-formed UTF-8 reaches the user).
#include "tokenizer/unicode.h"

uint32_t strata_utf8_decode_lenient(const uint8_t *s, size_t len, size_t *used)
{
    uint8_t b0 = s[0];
    size_t need;
    uint32_t cp;
    if (b0 < 0x80) {
        *used = 1;
        return b0;
    }
    if ((b0 & 0x40) == 0) {  // a continuation byte cannot start a sequence
        *used = 1;
        return STRATA_REPLACEMENT;
    }
    if ((b0 & 0x20) == 0) {
        need = 2;
        cp = b0 & 0x1F;
    } else if ((b0 & 0x10) == 0) {
        need = 3;
        cp = b0 & 0x0F;
    } else if ((b0 & 0x08) == 0) {
        need = 4;
        cp = b0 & 0x07;
    } else {  // F8..FF
        *used = 1;
        return STRATA_REPLACEMENT;
    }
    if (len < need) {
        *used = 1;
        return STRATA_REPLACEMENT;
    }
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *used = 1;
            return STRATA_REPLACEMENT;
        }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *used = need;
    return cp;
}

int strata_utf8_check(const uint8_t *s, size_t len)
{
    uint8_t b0 = s[0];
    int need;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 < 0x80) {
        return 1;
    }
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) {
            lo = 0xA0;  // no overlongs
        } else if (b0 == 0xED) {
            hi = 0x9F;  // no surrogates
        }
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) {
            lo = 0x90;
        } else if (b0 == 0xF4) {
            hi = 0x8F;  // <= U+10FFFF
        }
    } else {
        return -1;  // 80..C1, F5..FF never start a sequence
    }
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= len) {
            return 0;  // valid so far; the rest may arrive with the next token
        }
        uint8_t b = s[i];
        uint8_t min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
        if (b < min || b > max) {
            return -i;  // the bytes before this one form the maximal subpart
        }
    }
    return need;
}

size_t strata_utf8_encode(uint32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= STRATA_UNICODE_MAX) {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}
