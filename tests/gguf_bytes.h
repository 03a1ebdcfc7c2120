// Hand-assembly of GGUF bytes for loader tests: lets a test write any field with any value,
// including the broken ones the writer refuses to produce. Little-endian, as GGUF is.
#ifndef STRATA_TESTS_GGUF_BYTES_H
#define STRATA_TESTS_GGUF_BYTES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bytes {
    uint8_t *p;  // [n] of [cap]
    size_t n, cap;
};

static void b_put(struct bytes *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            fprintf(stderr, "test: out of memory\n");
            exit(1);
        }
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void b_u32(struct bytes *b, uint32_t v) { b_put(b, &v, 4); }
static void b_u64(struct bytes *b, uint64_t v) { b_put(b, &v, 8); }

static void b_str(struct bytes *b, const char *s)
{
    b_u64(b, strlen(s));
    b_put(b, s, strlen(s));
}

static void b_header(struct bytes *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b_put(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}

// key, u32 value type, then the caller appends the value (or use the helpers below).
static void b_key(struct bytes *b, const char *key, uint32_t type)
{
    b_str(b, key);
    b_u32(b, type);
}

static void b_kv_u32(struct bytes *b, const char *key, uint32_t v)
{
    b_key(b, key, 4);  // GGUF_TYPE_UINT32
    b_u32(b, v);
}

static void b_kv_str(struct bytes *b, const char *key, const char *v)
{
    b_key(b, key, 8);  // GGUF_TYPE_STRING
    b_str(b, v);
}

static void b_tensor(struct bytes *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                     uint32_t type, uint64_t offset)
{
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) b_u64(b, ne[d]);
    b_u32(b, type);
    b_u64(b, offset);
}

static void b_zeros(struct bytes *b, size_t n)
{
    static const uint8_t z[256];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        b_put(b, z, k);
        n -= k;
    }
}

static void b_pad(struct bytes *b, size_t align) { b_zeros(b, (align - b->n % align) % align); }

#endif
