// GGUF v3 reader and writer — the only code in strata that parses or emits the file format.
//
// File layout (little-endian):
//   magic "GGUF" u32 version (3) | u64 n_tensors | u64 n_kv
//   n_kv × { gguf string key | u32 value type | value }
//   n_tensors × { gguf string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
//   padding to general.alignment (default 32)
//   tensor data; each tensor's offset is relative to this data section and aligned.
// A gguf string is u64 length + bytes (no NUL). An array is u32 element type + u64 count +
// elements (arrays of arrays nest).
//
// The reader loads metadata and tensor infos only; every count, length and offset is checked
// against the file size and against overflow before use. Tensor bytes are read with pread by
// (offset, length) or through an optional read-only mapping.
#ifndef STRATA_GGUF_H
#define STRATA_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

enum strata_gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
};

struct strata_gguf_str {
    char *s;       // NUL-terminated copy (the file's bytes may contain NULs; len is authoritative)
    uint64_t len;  // bytes, excluding the terminator
};

struct strata_gguf_value {
    enum strata_gguf_type type;
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
        struct strata_gguf_str str;
        struct {
            enum strata_gguf_type type;  // element type
            uint64_t n;           // element count
            void *items;          // scalar types: packed C array (uint32_t*, float*, bool*...);
                                  // STRING: struct strata_gguf_str[n]; ARRAY: struct strata_gguf_value[n]
        } arr;
    };
};

struct strata_gguf_kv {
    struct strata_gguf_str key;
    struct strata_gguf_value value;
};

struct strata_gguf_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];  // GGUF order: ne[0] is the row length (innermost); unused = 1
    uint32_t type;               // enum strata_type
    uint64_t offset;             // relative to the data section
    uint64_t file_offset;        // absolute: data_offset + offset
    uint64_t n_elements;
    uint64_t n_bytes;            // from the type table
};

struct strata_gguf_file {
    char *path;
    int fd;
    uint64_t file_size;
    uint32_t version;
    uint64_t alignment;          // general.alignment or 32
    uint64_t data_offset;        // start of the tensor data section
    uint64_t n_kv;
    struct strata_gguf_kv *kv;          // [n_kv]
    uint64_t n_tensors;
    struct strata_gguf_tensor *tensors; // [n_tensors], file order
    void *map;                   // read-only mapping of the whole file, or NULL
    void *index;                 // private: name -> tensor hash
};

// Open and parse a GGUF file (metadata and tensor infos only). On success *out owns the file
// and must be released with strata_gguf_close. On failure returns a negative code, logs one line that
// names the file and what is wrong, and *out is NULL.
int strata_gguf_open(struct strata_gguf_file **out, const char *path);
void strata_gguf_close(struct strata_gguf_file *f);

// Lookups. Return NULL / negative if absent. Pointers are borrowed until strata_gguf_close.
const struct strata_gguf_kv *strata_gguf_find_kv(const struct strata_gguf_file *f, const char *key);
const struct strata_gguf_tensor *strata_gguf_find_tensor(const struct strata_gguf_file *f, const char *name);

// Typed getters: 0 on success; -ENOENT if absent (no log: optional keys are common);
// STRATA_EFORMAT with a log line if present with the wrong type or out of range.
// Integer getters accept any integer type whose value fits.
int strata_gguf_get_u32(const struct strata_gguf_file *f, const char *key, uint32_t *out);
int strata_gguf_get_u64(const struct strata_gguf_file *f, const char *key, uint64_t *out);
int strata_gguf_get_i32(const struct strata_gguf_file *f, const char *key, int32_t *out);
int strata_gguf_get_f32(const struct strata_gguf_file *f, const char *key, float *out);  // f32 or f64
int strata_gguf_get_bool(const struct strata_gguf_file *f, const char *key, bool *out);
int strata_gguf_get_str(const struct strata_gguf_file *f, const char *key, const char **out);  // borrowed
// Array getter: element type must match `type`; *items / *n borrowed.
int strata_gguf_get_arr(const struct strata_gguf_file *f, const char *key, enum strata_gguf_type type,
                 const void **items, uint64_t *n);

const char *strata_gguf_type_name(enum strata_gguf_type t);

// Read `len` bytes at `off` within tensor t into dst (pread, retried on EINTR/short reads).
// Checks off+len against the tensor size. 0 or negative.
int strata_gguf_read_tensor(const struct strata_gguf_file *f, const struct strata_gguf_tensor *t, uint64_t off,
                     void *dst, uint64_t len);
// pread of an absolute file range, same retry and bounds checks.
int strata_gguf_pread(const struct strata_gguf_file *f, uint64_t file_off, void *dst, uint64_t len);
// Map the file read-only (once; later calls return the same mapping). NULL on failure (logged).
const void *strata_gguf_map(struct strata_gguf_file *f);
// Pointer to a tensor's bytes in the mapping (maps on demand). NULL on failure.
const void *strata_gguf_tensor_data(struct strata_gguf_file *f, const struct strata_gguf_tensor *t);

// ---- writer ------------------------------------------------------------------------------------
// Usage: w = strata_gguf_writer_new(); set metadata; add tensor infos; strata_gguf_writer_open(w, path) writes
// the header; then for each tensor in the order added: strata_gguf_writer_tensor_begin(w, i) (writes the
// alignment padding) and strata_gguf_writer_write(w, bytes, len) any number of times until the tensor's
// n_bytes are written; strata_gguf_writer_finish(w) checks every tensor was written completely, flushes
// and closes. Metadata keys keep insertion order; setting a key twice replaces its value.
struct strata_gguf_writer;

struct strata_gguf_writer *strata_gguf_writer_new(void);
void strata_gguf_writer_free(struct strata_gguf_writer *w);
int strata_gguf_writer_set_u8(struct strata_gguf_writer *w, const char *key, uint8_t v);
int strata_gguf_writer_set_i8(struct strata_gguf_writer *w, const char *key, int8_t v);
int strata_gguf_writer_set_u16(struct strata_gguf_writer *w, const char *key, uint16_t v);
int strata_gguf_writer_set_i16(struct strata_gguf_writer *w, const char *key, int16_t v);
int strata_gguf_writer_set_u32(struct strata_gguf_writer *w, const char *key, uint32_t v);
int strata_gguf_writer_set_i32(struct strata_gguf_writer *w, const char *key, int32_t v);
int strata_gguf_writer_set_u64(struct strata_gguf_writer *w, const char *key, uint64_t v);
int strata_gguf_writer_set_i64(struct strata_gguf_writer *w, const char *key, int64_t v);
int strata_gguf_writer_set_f32(struct strata_gguf_writer *w, const char *key, float v);
int strata_gguf_writer_set_f64(struct strata_gguf_writer *w, const char *key, double v);
int strata_gguf_writer_set_bool(struct strata_gguf_writer *w, const char *key, bool v);
int strata_gguf_writer_set_str(struct strata_gguf_writer *w, const char *key, const char *v);
// Array of scalars: `items` is a packed C array of n elements of `type` (copied).
int strata_gguf_writer_set_arr(struct strata_gguf_writer *w, const char *key, enum strata_gguf_type type,
                        const void *items, uint64_t n);
// Array of strings (copied).
int strata_gguf_writer_set_arr_str(struct strata_gguf_writer *w, const char *key, const char *const *strs,
                            uint64_t n);
// Any value, including nested arrays (deep-copied).
int strata_gguf_writer_set_value(struct strata_gguf_writer *w, const char *key, const struct strata_gguf_value *v);
// Alignment of the data section (sets general.alignment when != 32). Before strata_gguf_writer_open.
int strata_gguf_writer_set_alignment(struct strata_gguf_writer *w, uint32_t alignment);
// Add a tensor info; returns its index (>= 0) or negative. ne in GGUF order.
int strata_gguf_writer_add_tensor(struct strata_gguf_writer *w, const char *name, uint32_t type,
                           uint32_t n_dims, const uint64_t *ne);
uint64_t strata_gguf_writer_tensor_bytes(const struct strata_gguf_writer *w, int index);
int strata_gguf_writer_open(struct strata_gguf_writer *w, const char *path);
int strata_gguf_writer_tensor_begin(struct strata_gguf_writer *w, int index);
int strata_gguf_writer_write(struct strata_gguf_writer *w, const void *data, uint64_t len);
int strata_gguf_writer_finish(struct strata_gguf_writer *w);

#endif
