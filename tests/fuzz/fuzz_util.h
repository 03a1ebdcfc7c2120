// Helpers shared by the libFuzzer harnesses of tests/fuzz/: input as exact-size heap copies (so
// that ASan sees any read past the end), as a file the readers can open by path, and split into
// fields.
#ifndef STRATA_FUZZ_UTIL_H
#define STRATA_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

// data[0..n) in a heap block of exactly n bytes (not NUL-terminated).
static inline char *fz_copy(const uint8_t *data, size_t n)
{
    char *p = malloc(n ? n : 1);
    if (!p) abort();
    if (n) memcpy(p, data, n);
    return p;
}

// data[0..n) as a NUL-terminated string in a block of exactly n + 1 bytes.
static inline char *fz_str(const uint8_t *data, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) abort();
    if (n) memcpy(p, data, n);
    p[n] = '\0';
    return p;
}

// An anonymous in-memory file holding data, reachable at the path written to path
// ("/proc/self/fd/N"). Returns the descriptor (close it when done).
static inline int fz_memfile(const uint8_t *data, size_t n, char *path, size_t cap)
{
    int fd = memfd_create("strata-fuzz", 0);
    if (fd < 0) abort();
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

// Fields separated by the byte 0xFF (never part of valid UTF-8): field i of the input as a
// NUL-terminated copy, "" past the last; *rest_* track the remainder.
struct fz_fields {
    const uint8_t *p, *end;
};

static inline char *fz_next(struct fz_fields *f)
{
    const uint8_t *s = f->p;
    while (f->p < f->end && *f->p != 0xFF) f->p++;
    char *out = fz_str(s, (size_t)(f->p - s));
    if (f->p < f->end) f->p++;
    return out;
}

// Library errors are expected on bad input: keep the fuzzer's output readable.
static inline void fz_drop_log(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

static inline void fz_quiet(void)
{
    strata_log_set_sink(fz_drop_log, NULL);
}

#endif
