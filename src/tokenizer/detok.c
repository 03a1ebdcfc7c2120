// Streaming detokenizer: turns token pieces (arbitrary bytes) into well-formed UTF-8 as they
// arrive. State is the unfinished start of one character (at most 3 bytes) carried from one
// token to the next; everything else goes straight out. Invalid bytes become U+FFFD, one per
// maximal invalid subpart (Unicode's recommended practice, as browsers and Python do).
#include <errno.h>
#include <string.h>

#include "tokenizer/internal.h"
#include "util/log.h"

static const char REPLACEMENT_UTF8[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

struct sink {
    char *out;
    size_t cap, n;
    bool full;
};

static void put(struct sink *s, const void *bytes, size_t len)
{
    if (s->n + len > s->cap) {
        s->full = true;
        return;
    }
    memcpy(s->out + s->n, bytes, len);
    s->n += len;
}

void strata_detok_init(struct strata_detok *d, bool special)
{
    memset(d, 0, sizeof(*d));
    d->special = special;
}

int strata_detok_push(struct strata_detok *d, const struct strata_tokenizer *t, int32_t id,
                      char *out, size_t cap, size_t *n_out)
{
    const char *piece;
    size_t len;
    *n_out = 0;
    int rc = strata_token_to_piece(t, id, d->special, &piece, &len);
    if (rc < 0) {
        return rc;
    }
    const uint8_t *p = (const uint8_t *)piece;
    struct sink s = {out, cap, 0, false};
    uint8_t pending[4];
    size_t n_pending = d->n_pending, i = 0;
    memcpy(pending, d->pending, n_pending);

    // finish (or reject) the character left over from the previous token
    if (n_pending > 0 && len > 0) {
        uint8_t tmp[4];
        size_t take = len < 4 - n_pending ? len : 4 - n_pending;
        memcpy(tmp, pending, n_pending);
        memcpy(tmp + n_pending, p, take);
        int r = strata_utf8_check(tmp, n_pending + take);
        if (r > 0) {
            put(&s, tmp, (size_t)r);
            i = (size_t)r - n_pending;
            n_pending = 0;
        } else if (r < 0) {
            // the kept bytes were a valid prefix, so the bad byte is the piece's first
            put(&s, REPLACEMENT_UTF8, sizeof(REPLACEMENT_UTF8));
            n_pending = 0;
        } else {
            memcpy(pending + n_pending, p, take);
            n_pending += take;
            i = take;
        }
    }
    while (i < len) {
        int r = strata_utf8_check(p + i, len - i);
        if (r > 0) {
            put(&s, p + i, (size_t)r);
            i += (size_t)r;
        } else if (r < 0) {
            put(&s, REPLACEMENT_UTF8, sizeof(REPLACEMENT_UTF8));
            i += (size_t)-r;
        } else {
            memcpy(pending, p + i, len - i);  // an unfinished character: at most 3 bytes
            n_pending = len - i;
            i = len;
        }
    }
    if (s.full) {
        strata_log_error("strata_detok_push: token %d needs more than %zu bytes of output", id,
                         cap);
        return -ENOSPC;
    }
    memcpy(d->pending, pending, n_pending);
    d->n_pending = (uint8_t)n_pending;
    *n_out = s.n;
    return 0;
}

int strata_detok_flush(struct strata_detok *d, char *out, size_t cap, size_t *n_out)
{
    *n_out = 0;
    if (d->n_pending == 0) {
        return 0;
    }
    if (cap < sizeof(REPLACEMENT_UTF8)) {
        strata_log_error("strata_detok_flush: needs 3 bytes of output, got %zu", cap);
        return -ENOSPC;
    }
    memcpy(out, REPLACEMENT_UTF8, sizeof(REPLACEMENT_UTF8));
    *n_out = sizeof(REPLACEMENT_UTF8);
    d->n_pending = 0;
    return 0;
}
