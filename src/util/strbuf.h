// A growable NUL-terminated string for code that builds text (chat prompts, JSON responses,
// server-sent events). Start from {0}; every call keeps s NUL-terminated once anything was
// added, and a failed allocation sets oom and makes later calls no-ops (check it once at the
// end). The caller frees s.
#ifndef STRATA_UTIL_STRBUF_H
#define STRATA_UTIL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strata_strbuf {
    char *s;
    size_t len, cap;
    bool oom;
};

void strata_strbuf_put(struct strata_strbuf *b, const char *s, size_t n);
void strata_strbuf_puts(struct strata_strbuf *b, const char *s);
void strata_strbuf_printf(struct strata_strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
