// Helpers shared by the GGUF reader (gguf_read.c), its lookups (gguf_query.c) and the writer
// (gguf_write.c): value-type sizes, a name hash index, an arena for parsed metadata, and
// full-length pread/write loops. Not part of the public interface.
#ifndef STRATA_GGUF_INTERNAL_H
#define STRATA_GGUF_INTERNAL_H

#include "gguf/gguf.h"

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GGUF is little-endian; strata reads and writes it with plain memcpy"
#endif

// Arrays of arrays nest at most this deep (an array at top level is depth 1). Real files use 1;
// the limit keeps a hostile file from recursing the parser off the stack.
#define GGUF_MAX_NESTING 8

// Bytes of one element of a scalar type in the file (bool is 1); 0 for STRING, ARRAY, invalid.
size_t strata_gguf_scalar_size(enum strata_gguf_type t);
// Fewest file bytes one element of type t can occupy (string: its u64 length; array: its u32
// type and u64 count). Used to bound counts by the bytes left before allocating.
uint64_t strata_gguf_min_elem_bytes(enum strata_gguf_type t);

// "812 bytes" under 1 MiB, else "812.0 MiB" / "3.2 GiB". Returns buf.
const char *strata_gguf_fmt_bytes(char buf[32], uint64_t n);

// Open-addressing hash of (bytes, len) -> id over borrowed strings; ids are array indices.
struct strata_gguf_name_slot {
    const char *s;    // borrowed; NULL: empty slot
    uint64_t len;
    uint64_t hash;
    uint64_t id;
};

struct strata_gguf_name_index {
    struct strata_gguf_name_slot *slots;  // [mask + 1]
    uint64_t mask;
};

// Room for n names at load factor <= 1/2. 0 or STRATA_ENOMEM (not logged).
int strata_gguf_index_init(struct strata_gguf_name_index *ix, uint64_t n);
void strata_gguf_index_free(struct strata_gguf_name_index *ix);
// Insert; if the name is already present returns the existing id and inserts nothing,
// else returns -1. The index must have been sized for every insert.
int64_t strata_gguf_index_insert(struct strata_gguf_name_index *ix, const char *s, uint64_t len, uint64_t id);
// Id of the name, or -1.
int64_t strata_gguf_index_find(const struct strata_gguf_name_index *ix, const char *s, uint64_t len);

// Bump allocator for everything parsed from the header; freed at once by strata_gguf_close.
struct strata_gguf_arena_chunk;
struct strata_gguf_arena {
    struct strata_gguf_arena_chunk *head;  // chunk being filled; dedicated large chunks follow it
};
// 8-byte aligned, never NULL for size 0. NULL when out of memory (not logged).
void *strata_gguf_arena_alloc(struct strata_gguf_arena *a, uint64_t size);
void strata_gguf_arena_free(struct strata_gguf_arena *a);

// What strata_gguf_file.index points to: storage and lookups private to the reader.
struct strata_gguf_file_private {
    struct strata_gguf_arena arena;        // kv array, tensor array, every string and array item
    struct strata_gguf_name_index keys;    // key -> kv index
    struct strata_gguf_name_index tensors; // tensor name -> tensor index
};

// pread exactly len bytes at off, retrying EINTR and short reads. On failure logs one line
// "fn: path: ..." and returns -errno, or STRATA_EIO if the file ended early.
int strata_gguf_pread_full(int fd, const char *fn, const char *path, uint64_t off, void *dst,
                    uint64_t len);

#endif
