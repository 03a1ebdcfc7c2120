// Pieces of the GGUF code used by both the reader and the writer: value-type sizes and names,
// the name hash index, the metadata arena and the full-length pread loop.
#include "gguf/gguf_internal.h"

#include "util/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// One pread/write call moves at most this much: Linux caps a single transfer near 2 GiB.
#define GGUF_IO_CHUNK (1ull << 30)
// Arena chunk payload; requests above a quarter of it get a chunk of their own so a large
// token array does not waste the rest of a shared chunk.
#define GGUF_ARENA_CHUNK (1u << 20)

struct strata_gguf_arena_chunk {
    struct strata_gguf_arena_chunk *next;
    uint64_t used;
    uint64_t cap;
    uint64_t pad;  // keeps the payload after the header 16-byte aligned
};

static const struct {
    const char *name;
    size_t size;  // bytes of one scalar in the file; 0 for string and array
} g_value_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"u8", 1},    [GGUF_TYPE_INT8] = {"i8", 1},
    [GGUF_TYPE_UINT16] = {"u16", 2},  [GGUF_TYPE_INT16] = {"i16", 2},
    [GGUF_TYPE_UINT32] = {"u32", 4},  [GGUF_TYPE_INT32] = {"i32", 4},
    [GGUF_TYPE_FLOAT32] = {"f32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},
    [GGUF_TYPE_STRING] = {"str", 0},  [GGUF_TYPE_ARRAY] = {"arr", 0},
    [GGUF_TYPE_UINT64] = {"u64", 8},  [GGUF_TYPE_INT64] = {"i64", 8},
    [GGUF_TYPE_FLOAT64] = {"f64", 8},
};

const char *strata_gguf_type_name(enum strata_gguf_type t)
{
    if ((unsigned)t >= GGUF_TYPE_COUNT) return "?";
    return g_value_types[t].name;
}

size_t strata_gguf_scalar_size(enum strata_gguf_type t)
{
    if ((unsigned)t >= GGUF_TYPE_COUNT) return 0;
    return g_value_types[t].size;
}

uint64_t strata_gguf_min_elem_bytes(enum strata_gguf_type t)
{
    if (t == GGUF_TYPE_STRING) return 8;
    if (t == GGUF_TYPE_ARRAY) return 4 + 8;
    return strata_gguf_scalar_size(t);
}

const char *strata_gguf_fmt_bytes(char buf[32], uint64_t n)
{
    if (n < (1ull << 20))
        snprintf(buf, 32, "%llu bytes", (unsigned long long)n);
    else if (n < (1ull << 30))
        snprintf(buf, 32, "%.1f MiB", (double)n / (1 << 20));
    else
        snprintf(buf, 32, "%.1f GiB", (double)n / (1 << 30));
    return buf;
}

// ---- name index ----------------------------------------------------------------------------

static uint64_t name_hash(const char *s, uint64_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (uint64_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

int strata_gguf_index_init(struct strata_gguf_name_index *ix, uint64_t n)
{
    uint64_t cap = 16;
    while (cap / 2 < n) {
        if (cap > (UINT64_MAX >> 2) / sizeof *ix->slots) return STRATA_ENOMEM;
        cap <<= 1;
    }
    ix->slots = calloc(cap, sizeof *ix->slots);
    if (!ix->slots) return STRATA_ENOMEM;
    ix->mask = cap - 1;
    return 0;
}

void strata_gguf_index_free(struct strata_gguf_name_index *ix)
{
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}

// Slot holding the name, or the empty slot where it would go.
static struct strata_gguf_name_slot *index_probe(const struct strata_gguf_name_index *ix, const char *s,
                                          uint64_t len, uint64_t hash)
{
    for (uint64_t i = hash & ix->mask;; i = (i + 1) & ix->mask) {
        struct strata_gguf_name_slot *slot = &ix->slots[i];
        if (!slot->s) return slot;
        if (slot->hash == hash && slot->len == len && memcmp(slot->s, s, len) == 0) return slot;
    }
}

int64_t strata_gguf_index_insert(struct strata_gguf_name_index *ix, const char *s, uint64_t len, uint64_t id)
{
    uint64_t hash = name_hash(s, len);
    struct strata_gguf_name_slot *slot = index_probe(ix, s, len, hash);
    if (slot->s) return (int64_t)slot->id;
    *slot = (struct strata_gguf_name_slot){s, len, hash, id};
    return -1;
}

int64_t strata_gguf_index_find(const struct strata_gguf_name_index *ix, const char *s, uint64_t len)
{
    if (!ix->slots) return -1;
    const struct strata_gguf_name_slot *slot = index_probe(ix, s, len, name_hash(s, len));
    return slot->s ? (int64_t)slot->id : -1;
}

// ---- arena ---------------------------------------------------------------------------------

static struct strata_gguf_arena_chunk *chunk_new(uint64_t cap)
{
    if (cap > SIZE_MAX - sizeof(struct strata_gguf_arena_chunk)) return NULL;
    struct strata_gguf_arena_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = NULL;
    c->used = 0;
    c->cap = cap;
    return c;
}

void *strata_gguf_arena_alloc(struct strata_gguf_arena *a, uint64_t size)
{
    if (size > UINT64_MAX - 8) return NULL;
    size = (size + 7) & ~7ull;
    if (size == 0) size = 8;
    if (size > GGUF_ARENA_CHUNK / 4) {
        struct strata_gguf_arena_chunk *c = chunk_new(size);
        if (!c) return NULL;
        c->used = size;
        if (a->head) {
            c->next = a->head->next;
            a->head->next = c;
        } else {
            a->head = c;
        }
        return c + 1;
    }
    if (!a->head || a->head->cap - a->head->used < size) {
        struct strata_gguf_arena_chunk *c = chunk_new(GGUF_ARENA_CHUNK);
        if (!c) return NULL;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)(a->head + 1) + a->head->used;
    a->head->used += size;
    return p;
}

void strata_gguf_arena_free(struct strata_gguf_arena *a)
{
    struct strata_gguf_arena_chunk *c = a->head;
    while (c) {
        struct strata_gguf_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
}

// ---- I/O -----------------------------------------------------------------------------------

int strata_gguf_pread_full(int fd, const char *fn, const char *path, uint64_t off, void *dst,
                    uint64_t len)
{
    char *p = dst;
    while (len > 0) {
        size_t want = len < GGUF_IO_CHUNK ? (size_t)len : (size_t)GGUF_IO_CHUNK;
        if (off > (uint64_t)INT64_MAX) {
            strata_log_error("%s: %s: offset %llu is beyond what pread can address", fn, path,
                             (unsigned long long)off);
            return STRATA_EIO;
        }
        ssize_t r = pread(fd, p, want, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            int err = errno;
            strata_log_error("%s: %s: read of %zu bytes at offset %llu failed: %s", fn, path,
                             want, (unsigned long long)off, strerror(err));
            return -err;
        }
        if (r == 0) {
            strata_log_error("%s: %s: unexpected end of file at offset %llu (%llu bytes still "
                             "wanted; was the file truncated while open?)",
                             fn, path, (unsigned long long)off, (unsigned long long)len);
            return STRATA_EIO;
        }
        p += r;
        off += (uint64_t)r;
        len -= (uint64_t)r;
    }
    return 0;
}
