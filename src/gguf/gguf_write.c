// Streaming GGUF v3 writer. Metadata and tensor infos are collected in memory; strata_gguf_writer_open
// lays out the data section (each tensor at the next multiple of the alignment, the order they
// were added) and writes the header; tensor bytes then stream through an 8 MiB buffer, so a
// model far larger than RAM can be written. The file ends padded to the alignment, as
// llama.cpp's writer does (its reader loads the padded data blob).
#include "gguf/gguf_internal.h"

#include "quant/quant.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WRITE_BUF_BYTES (8u << 20)
// One write(2) moves at most this much (Linux caps a single transfer near 2 GiB).
#define WRITE_CHUNK (1u << 30)
// llama.cpp stores tensor names in a 64-byte field with a NUL; longer names break its reader.
#define MAX_TENSOR_NAME 63

struct writer_kv {
    char *key;
    struct strata_gguf_value value;  // deep-owned: strings and items are malloc'd
};

struct writer_tensor {
    char *name;
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS];  // GGUF order, unused = 1
    uint32_t type;
    uint64_t n_bytes;
    uint64_t offset;             // in the data section; set by strata_gguf_writer_open
};

enum writer_state { WRITER_SETUP, WRITER_OPEN, WRITER_DONE };

struct strata_gguf_writer {
    struct writer_kv *kv;              // [n_kv], insertion order
    uint64_t n_kv, cap_kv;
    struct writer_tensor *tensors;     // [n_tensors], write order
    uint64_t n_tensors, cap_tensors;
    struct strata_gguf_name_index names;      // tensor name -> index, sized for cap_tensors
    uint32_t alignment;
    enum writer_state state;
    int fd;
    char *path;
    uint8_t *buf;                      // [WRITE_BUF_BYTES]
    uint64_t buf_len;
    uint64_t pos;                      // bytes written or buffered so far = file offset
    uint64_t data_offset;
    int64_t cur;                       // tensor being written, -1 before the first
    uint64_t cur_written;              // its bytes received so far
    int error;                         // first I/O failure; later calls return it unlogged
};

static const uint8_t g_zeros[4096];

// ---- owned values --------------------------------------------------------------------------

static void value_free(struct strata_gguf_value *v)
{
    if (v->type == GGUF_TYPE_STRING) {
        free(v->str.s);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        if (v->arr.type == GGUF_TYPE_STRING) {
            struct strata_gguf_str *strs = v->arr.items;
            for (uint64_t i = 0; i < v->arr.n; i++) free(strs[i].s);
        } else if (v->arr.type == GGUF_TYPE_ARRAY) {
            struct strata_gguf_value *vals = v->arr.items;
            for (uint64_t i = 0; i < v->arr.n; i++) value_free(&vals[i]);
        }
        free(v->arr.items);
    }
    memset(v, 0, sizeof *v);  // type 0 (u8) owns nothing, so a second free is harmless
}

static int str_copy(struct strata_gguf_str *dst, const struct strata_gguf_str *src, const char *fn,
                    const char *key)
{
    if (!src->s && src->len) {
        strata_log_error("%s: key '%s': string of %llu bytes has no data", fn, key,
                         (unsigned long long)src->len);
        return STRATA_EARG;
    }
    if (src->len >= SIZE_MAX || !(dst->s = malloc(src->len + 1))) {
        strata_log_error("%s: key '%s': out of memory for a string of %llu bytes", fn, key,
                         (unsigned long long)src->len);
        return STRATA_ENOMEM;
    }
    if (src->len) memcpy(dst->s, src->s, src->len);
    dst->s[src->len] = '\0';
    dst->len = src->len;
    return 0;
}

// Deep copy with validation. On failure dst owns nothing.
static int value_copy(struct strata_gguf_value *dst, const struct strata_gguf_value *src, int depth,
                      const char *fn, const char *key)
{
    memset(dst, 0, sizeof *dst);
    if ((unsigned)src->type >= GGUF_TYPE_COUNT) {
        strata_log_error("%s: key '%s': unknown value type %u", fn, key, (unsigned)src->type);
        return STRATA_EARG;
    }
    if (src->type == GGUF_TYPE_STRING) {
        int rc = str_copy(&dst->str, &src->str, fn, key);
        if (!rc) dst->type = GGUF_TYPE_STRING;
        return rc;
    }
    if (src->type != GGUF_TYPE_ARRAY) {
        *dst = *src;
        if (src->type == GGUF_TYPE_BOOL) dst->b = src->b != 0;
        return 0;
    }
    enum strata_gguf_type et = src->arr.type;
    uint64_t n = src->arr.n;
    if (depth >= GGUF_MAX_NESTING || (unsigned)et >= GGUF_TYPE_COUNT || (n && !src->arr.items)) {
        strata_log_error("%s: key '%s': invalid array (element type %u, %llu items, depth %d of "
                         "at most %d)",
                         fn, key, (unsigned)et, (unsigned long long)n, depth + 1,
                         GGUF_MAX_NESTING);
        return STRATA_EARG;
    }
    size_t elem = et == GGUF_TYPE_STRING  ? sizeof(struct strata_gguf_str)
                  : et == GGUF_TYPE_ARRAY ? sizeof(struct strata_gguf_value)
                                          : strata_gguf_scalar_size(et);
    void *items = n <= SIZE_MAX / elem ? calloc(n ? n : 1, elem) : NULL;
    if (!items) {
        strata_log_error("%s: key '%s': out of memory for %llu array items", fn, key,
                         (unsigned long long)n);
        return STRATA_ENOMEM;
    }
    dst->type = GGUF_TYPE_ARRAY;
    dst->arr.type = et;
    dst->arr.n = n;
    dst->arr.items = items;
    int rc = 0;
    if (et == GGUF_TYPE_STRING) {
        const struct strata_gguf_str *in = src->arr.items;
        struct strata_gguf_str *out = items;
        for (uint64_t i = 0; i < n && !rc; i++) rc = str_copy(&out[i], &in[i], fn, key);
    } else if (et == GGUF_TYPE_ARRAY) {
        const struct strata_gguf_value *in = src->arr.items;
        for (uint64_t i = 0; i < n && !rc; i++) {
            if (in[i].type != GGUF_TYPE_ARRAY) {
                strata_log_error("%s: key '%s': item %llu of an array of arrays has type %s",
                                 fn, key, (unsigned long long)i, strata_gguf_type_name(in[i].type));
                rc = STRATA_EARG;
            } else {
                rc = value_copy(&((struct strata_gguf_value *)items)[i], &in[i], depth + 1, fn, key);
            }
        }
    } else if (n) {
        memcpy(items, src->arr.items, n * elem);
        if (et == GGUF_TYPE_BOOL) {  // read as bytes: a caller's bool array may hold any byte
            uint8_t *bytes = items;
            for (uint64_t i = 0; i < n; i++) bytes[i] = bytes[i] != 0;
        }
    }
    if (rc) value_free(dst);
    return rc;
}

// ---- metadata ------------------------------------------------------------------------------

static int check_setup(struct strata_gguf_writer *w, const char *fn, const char *what)
{
    if (w->state == WRITER_SETUP) return 0;
    strata_log_error("%s: %s after strata_gguf_writer_open: the header is already written", fn, what);
    return STRATA_EARG;
}

// Takes ownership of *v (freed on failure).
static int store_kv(struct strata_gguf_writer *w, const char *fn, const char *key, struct strata_gguf_value *v)
{
    int rc = check_setup(w, fn, "metadata set");
    if (!rc && (!key || !key[0])) {
        strata_log_error("%s: empty or NULL key", fn);
        rc = STRATA_EARG;
    }
    if (!rc && strcmp(key, "general.alignment") == 0) {
        if (v->type != GGUF_TYPE_UINT32 || v->u32 == 0 || (v->u32 & (v->u32 - 1))) {
            strata_log_error("%s: general.alignment must be a u32 power of two (got type %s)", fn,
                             strata_gguf_type_name(v->type));
            rc = STRATA_EARG;
        } else {
            w->alignment = v->u32;
        }
    }
    if (rc) {
        value_free(v);
        return rc;
    }
    for (uint64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {  // replace in place: keeps insertion order
            value_free(&w->kv[i].value);
            w->kv[i].value = *v;
            return 0;
        }
    }
    if (w->n_kv == w->cap_kv) {
        uint64_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        struct writer_kv *kv = realloc(w->kv, cap * sizeof *kv);
        if (!kv) goto nomem;
        w->kv = kv;
        w->cap_kv = cap;
    }
    char *key_copy = strdup(key);
    if (!key_copy) goto nomem;
    w->kv[w->n_kv++] = (struct writer_kv){key_copy, *v};
    return 0;
nomem:
    strata_log_error("%s: out of memory adding key '%s'", fn, key);
    value_free(v);
    return STRATA_ENOMEM;
}

static int set_copy(struct strata_gguf_writer *w, const char *fn, const char *key,
                    const struct strata_gguf_value *v)
{
    struct strata_gguf_value owned;
    int rc = value_copy(&owned, v, 0, fn, key ? key : "(null)");
    return rc ? rc : store_kv(w, fn, key, &owned);
}

#define DEFINE_SETTER(suffix, ctype, gtype, member)                                        \
    int strata_gguf_writer_set_##suffix(struct strata_gguf_writer *w, const char *key, ctype v)          \
    {                                                                                      \
        struct strata_gguf_value val = {.type = gtype, .member = v};                              \
        return store_kv(w, __func__, key, &val);                                           \
    }

DEFINE_SETTER(u8, uint8_t, GGUF_TYPE_UINT8, u8)
DEFINE_SETTER(i8, int8_t, GGUF_TYPE_INT8, i8)
DEFINE_SETTER(u16, uint16_t, GGUF_TYPE_UINT16, u16)
DEFINE_SETTER(i16, int16_t, GGUF_TYPE_INT16, i16)
DEFINE_SETTER(u32, uint32_t, GGUF_TYPE_UINT32, u32)
DEFINE_SETTER(i32, int32_t, GGUF_TYPE_INT32, i32)
DEFINE_SETTER(u64, uint64_t, GGUF_TYPE_UINT64, u64)
DEFINE_SETTER(i64, int64_t, GGUF_TYPE_INT64, i64)
DEFINE_SETTER(f32, float, GGUF_TYPE_FLOAT32, f32)
DEFINE_SETTER(f64, double, GGUF_TYPE_FLOAT64, f64)
DEFINE_SETTER(bool, bool, GGUF_TYPE_BOOL, b)

int strata_gguf_writer_set_str(struct strata_gguf_writer *w, const char *key, const char *v)
{
    if (!v) {
        strata_log_error("%s: key '%s': NULL string", __func__, key ? key : "(null)");
        return STRATA_EARG;
    }
    struct strata_gguf_value val = {.type = GGUF_TYPE_STRING, .str = {(char *)v, strlen(v)}};
    return set_copy(w, __func__, key, &val);
}

int strata_gguf_writer_set_arr(struct strata_gguf_writer *w, const char *key, enum strata_gguf_type type,
                        const void *items, uint64_t n)
{
    if (strata_gguf_scalar_size(type) == 0) {
        strata_log_error("%s: key '%s': element type %s is not a scalar (use "
                         "strata_gguf_writer_set_arr_str or strata_gguf_writer_set_value)",
                         __func__, key ? key : "(null)", strata_gguf_type_name(type));
        return STRATA_EARG;
    }
    struct strata_gguf_value val = {.type = GGUF_TYPE_ARRAY, .arr = {type, n, (void *)items}};
    return set_copy(w, __func__, key, &val);
}

int strata_gguf_writer_set_arr_str(struct strata_gguf_writer *w, const char *key, const char *const *strs,
                            uint64_t n)
{
    const char *k = key ? key : "(null)";
    if (n && !strs) {
        strata_log_error("%s: key '%s': NULL array of %llu strings", __func__, k,
                         (unsigned long long)n);
        return STRATA_EARG;
    }
    struct strata_gguf_str *items = n <= SIZE_MAX / sizeof *items ? calloc(n ? n : 1, sizeof *items)
                                                           : NULL;
    if (!items) {
        strata_log_error("%s: key '%s': out of memory for %llu strings", __func__, k,
                         (unsigned long long)n);
        return STRATA_ENOMEM;
    }
    struct strata_gguf_value val = {.type = GGUF_TYPE_ARRAY, .arr = {GGUF_TYPE_STRING, n, items}};
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i]) {
            strata_log_error("%s: key '%s': string %llu is NULL", __func__, k,
                             (unsigned long long)i);
            value_free(&val);
            return STRATA_EARG;
        }
        struct strata_gguf_str in = {(char *)strs[i], strlen(strs[i])};
        int rc = str_copy(&items[i], &in, __func__, k);
        if (rc) {
            value_free(&val);
            return rc;
        }
    }
    return store_kv(w, __func__, key, &val);
}

int strata_gguf_writer_set_value(struct strata_gguf_writer *w, const char *key, const struct strata_gguf_value *v)
{
    return set_copy(w, __func__, key, v);
}

int strata_gguf_writer_set_alignment(struct strata_gguf_writer *w, uint32_t alignment)
{
    int rc = check_setup(w, __func__, "alignment set");
    if (rc) return rc;
    if (alignment == 0 || (alignment & (alignment - 1))) {
        strata_log_error("%s: alignment %u is not a power of two", __func__, alignment);
        return STRATA_EARG;
    }
    bool present = false;
    for (uint64_t i = 0; i < w->n_kv; i++)
        present |= strcmp(w->kv[i].key, "general.alignment") == 0;
    if (alignment == GGUF_DEFAULT_ALIGNMENT && !present) {
        w->alignment = alignment;
        return 0;
    }
    return strata_gguf_writer_set_u32(w, "general.alignment", alignment);
}

// ---- tensor infos --------------------------------------------------------------------------

static int check_tensor(const char *fn, const char *name, uint32_t type, uint32_t n_dims,
                        const uint64_t *ne, uint64_t *n_bytes)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    if (!tr) {
        strata_log_error("%s: tensor '%s': unknown tensor type %u", fn, name, type);
        return STRATA_EARG;
    }
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS || !ne) {
        strata_log_error("%s: tensor '%s': n_dims %u, must be 1..%d", fn, name, n_dims,
                         GGUF_MAX_DIMS);
        return STRATA_EARG;
    }
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] == 0 || ne[d] > (uint64_t)INT64_MAX ||
            __builtin_mul_overflow(n, ne[d], &n) || n > (uint64_t)INT64_MAX) {
            strata_log_error("%s: tensor '%s': ne[%u] = %llu is zero or overflows the element "
                             "count",
                             fn, name, d, (unsigned long long)ne[d]);
            return STRATA_EARG;
        }
    }
    if (ne[0] % tr->block_size) {
        strata_log_error("%s: tensor '%s': ne[0] = %llu is not a multiple of the %s block "
                         "size %u",
                         fn, name, (unsigned long long)ne[0], tr->name, tr->block_size);
        return STRATA_EARG;
    }
    uint64_t row_bytes;
    if (__builtin_mul_overflow(ne[0] / tr->block_size, (uint64_t)tr->type_size, &row_bytes) ||
        __builtin_mul_overflow(row_bytes, n / ne[0], n_bytes)) {
        strata_log_error("%s: tensor '%s': byte size overflows", fn, name);
        return STRATA_EARG;
    }
    return 0;
}

// Doubles the tensor array and rebuilds the name index for the new capacity.
static int grow_tensors(struct strata_gguf_writer *w)
{
    uint64_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
    if (cap > INT_MAX) return STRATA_ENOMEM;
    struct writer_tensor *t = realloc(w->tensors, cap * sizeof *t);
    if (!t) return STRATA_ENOMEM;
    w->tensors = t;
    struct strata_gguf_name_index names;
    if (strata_gguf_index_init(&names, cap)) return STRATA_ENOMEM;
    for (uint64_t i = 0; i < w->n_tensors; i++)
        strata_gguf_index_insert(&names, t[i].name, strlen(t[i].name), i);
    strata_gguf_index_free(&w->names);
    w->names = names;
    w->cap_tensors = cap;
    return 0;
}

int strata_gguf_writer_add_tensor(struct strata_gguf_writer *w, const char *name, uint32_t type,
                           uint32_t n_dims, const uint64_t *ne)
{
    int rc = check_setup(w, __func__, "tensor added");
    if (rc) return rc;
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > MAX_TENSOR_NAME) {
        strata_log_error("%s: tensor name '%.80s' is %zu bytes, must be 1..%d (llama.cpp's limit)",
                         __func__, name ? name : "(null)", len, MAX_TENSOR_NAME);
        return STRATA_EARG;
    }
    uint64_t n_bytes;
    if ((rc = check_tensor(__func__, name, type, n_dims, ne, &n_bytes))) return rc;
    if (strata_gguf_index_find(&w->names, name, len) >= 0) {
        strata_log_error("%s: duplicate tensor name '%s'", __func__, name);
        return STRATA_EARG;
    }
    if (w->n_tensors == w->cap_tensors && grow_tensors(w)) {
        strata_log_error("%s: out of memory adding tensor '%s'", __func__, name);
        return STRATA_ENOMEM;
    }
    char *name_copy = strdup(name);
    if (!name_copy) {
        strata_log_error("%s: out of memory adding tensor '%s'", __func__, name);
        return STRATA_ENOMEM;
    }
    struct writer_tensor *t = &w->tensors[w->n_tensors];
    *t = (struct writer_tensor){.name = name_copy, .n_dims = n_dims, .type = type,
                                .n_bytes = n_bytes};
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    strata_gguf_index_insert(&w->names, name_copy, len, w->n_tensors);
    return (int)w->n_tensors++;
}

uint64_t strata_gguf_writer_tensor_bytes(const struct strata_gguf_writer *w, int index)
{
    if (index < 0 || (uint64_t)index >= w->n_tensors) return 0;
    return w->tensors[index].n_bytes;
}

// ---- buffered output -----------------------------------------------------------------------

static int write_full(struct strata_gguf_writer *w, const char *fn, const uint8_t *p, uint64_t n,
                      uint64_t file_off)
{
    while (n > 0) {
        size_t want = n < WRITE_CHUNK ? (size_t)n : WRITE_CHUNK;
        ssize_t r = write(w->fd, p, want);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int err = r < 0 ? errno : EIO;  // a zero-byte write would loop forever
            strata_log_error("%s: %s: write of %zu bytes at offset %llu failed: %s", fn, w->path,
                             want, (unsigned long long)file_off, strerror(err));
            w->error = -err;
            return w->error;
        }
        p += r;
        n -= (uint64_t)r;
        file_off += (uint64_t)r;
    }
    return 0;
}

static int flush(struct strata_gguf_writer *w, const char *fn)
{
    if (w->error) return w->error;
    int rc = write_full(w, fn, w->buf, w->buf_len, w->pos - w->buf_len);
    w->buf_len = 0;
    return rc;
}

static int put(struct strata_gguf_writer *w, const char *fn, const void *p, uint64_t n)
{
    if (w->error) return w->error;
    if (n == 0) return 0;
    if (n > WRITE_BUF_BYTES - w->buf_len) {
        int rc = flush(w, fn);
        if (rc) return rc;
        if (n >= WRITE_BUF_BYTES) {  // large tensor chunk: skip the copy
            rc = write_full(w, fn, p, n, w->pos);
            w->pos += n;
            return rc;
        }
    }
    memcpy(w->buf + w->buf_len, p, n);
    w->buf_len += n;
    w->pos += n;
    return 0;
}

static int put_u32(struct strata_gguf_writer *w, const char *fn, uint32_t v) { return put(w, fn, &v, 4); }
static int put_u64(struct strata_gguf_writer *w, const char *fn, uint64_t v) { return put(w, fn, &v, 8); }

static int put_str(struct strata_gguf_writer *w, const char *fn, const char *s, uint64_t len)
{
    int rc = put_u64(w, fn, len);
    return rc ? rc : put(w, fn, s, len);
}

// Zeros up to file offset `target`.
static int pad_to(struct strata_gguf_writer *w, const char *fn, uint64_t target)
{
    int rc = 0;
    while (!rc && w->pos < target) {
        uint64_t n = target - w->pos < sizeof g_zeros ? target - w->pos : sizeof g_zeros;
        rc = put(w, fn, g_zeros, n);
    }
    return rc;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// A value's body; arrays of arrays write each inner array without its own type tag.
static int put_value(struct strata_gguf_writer *w, const char *fn, const struct strata_gguf_value *v)
{
    switch (v->type) {
    case GGUF_TYPE_STRING: return put_str(w, fn, v->str.s, v->str.len);
    case GGUF_TYPE_BOOL: {
        uint8_t byte = v->b;
        return put(w, fn, &byte, 1);
    }
    case GGUF_TYPE_ARRAY: break;
    default: return put(w, fn, &v->u64, strata_gguf_scalar_size(v->type));
    }
    int rc = put_u32(w, fn, v->arr.type);
    if (!rc) rc = put_u64(w, fn, v->arr.n);
    if (v->arr.type == GGUF_TYPE_STRING) {
        const struct strata_gguf_str *s = v->arr.items;
        for (uint64_t i = 0; i < v->arr.n && !rc; i++) rc = put_str(w, fn, s[i].s, s[i].len);
    } else if (v->arr.type == GGUF_TYPE_ARRAY) {
        const struct strata_gguf_value *a = v->arr.items;
        for (uint64_t i = 0; i < v->arr.n && !rc; i++) rc = put_value(w, fn, &a[i]);
    } else if (!rc) {  // bools were normalised to 0/1 bytes when stored
        rc = put(w, fn, v->arr.items, v->arr.n * strata_gguf_scalar_size(v->arr.type));
    }
    return rc;
}

// ---- streaming -----------------------------------------------------------------------------

struct strata_gguf_writer *strata_gguf_writer_new(void)
{
    struct strata_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) {
        strata_log_error("strata_gguf_writer_new: out of memory");
        return NULL;
    }
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    w->fd = -1;
    w->cur = -1;
    return w;
}

void strata_gguf_writer_free(struct strata_gguf_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    for (uint64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        value_free(&w->kv[i].value);
    }
    for (uint64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    strata_gguf_index_free(&w->names);
    free(w->kv);
    free(w->tensors);
    free(w->path);
    free(w->buf);
    free(w);
}

// Data-section offsets: each tensor at the next multiple of the alignment after the previous.
static int layout_tensors(struct strata_gguf_writer *w, const char *fn, const char *path)
{
    uint64_t end = 0;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        struct writer_tensor *t = &w->tensors[i];
        bool overflow = end > UINT64_MAX - w->alignment;
        if (!overflow) {
            t->offset = align_up(end, w->alignment);
            overflow = __builtin_add_overflow(t->offset, t->n_bytes, &end);
        }
        if (overflow) {
            strata_log_error("%s: %s: data section size overflows at tensor '%s'", fn, path,
                             t->name);
            return STRATA_EARG;
        }
    }
    return 0;
}

int strata_gguf_writer_open(struct strata_gguf_writer *w, const char *path)
{
    const char *fn = __func__;
    int rc = 0;
    if (w->state != WRITER_SETUP) {
        strata_log_error("%s: %s: writer was already opened", fn, path);
        return STRATA_EARG;
    }
    if ((rc = layout_tensors(w, fn, path))) return rc;
    w->path = strdup(path);
    w->buf = malloc(WRITE_BUF_BYTES);
    if (!w->path || !w->buf) {
        strata_log_error("%s: %s: out of memory", fn, path);
        free(w->path);
        free(w->buf);
        w->path = NULL;
        w->buf = NULL;
        return STRATA_ENOMEM;
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {  // the writer stays in setup: the caller may try another path
        rc = -errno;
        strata_log_error("%s: %s: %s", fn, path, strerror(errno));
        free(w->path);
        free(w->buf);
        w->path = NULL;
        w->buf = NULL;
        return rc;
    }
    w->state = WRITER_OPEN;
    rc = put(w, fn, "GGUF", 4);
    if (!rc) rc = put_u32(w, fn, 3);
    if (!rc) rc = put_u64(w, fn, w->n_tensors);
    if (!rc) rc = put_u64(w, fn, w->n_kv);
    for (uint64_t i = 0; i < w->n_kv && !rc; i++) {
        const struct writer_kv *kv = &w->kv[i];
        rc = put_str(w, fn, kv->key, strlen(kv->key));
        if (!rc) rc = put_u32(w, fn, kv->value.type);
        if (!rc) rc = put_value(w, fn, &kv->value);
    }
    for (uint64_t i = 0; i < w->n_tensors && !rc; i++) {
        const struct writer_tensor *t = &w->tensors[i];
        rc = put_str(w, fn, t->name, strlen(t->name));
        if (!rc) rc = put_u32(w, fn, t->n_dims);
        if (!rc) rc = put(w, fn, t->ne, t->n_dims * sizeof t->ne[0]);
        if (!rc) rc = put_u32(w, fn, t->type);
        if (!rc) rc = put_u64(w, fn, t->offset);
    }
    if (!rc) rc = pad_to(w, fn, align_up(w->pos, w->alignment));
    w->data_offset = w->pos;
    return rc;
}

// The tensor being written has all its bytes (or none has been started).
static int check_complete(struct strata_gguf_writer *w, const char *fn)
{
    if (w->cur < 0 || w->cur_written == w->tensors[w->cur].n_bytes) return 0;
    strata_log_error("%s: %s: tensor '%s' got %llu of its %llu bytes", fn, w->path,
                     w->tensors[w->cur].name, (unsigned long long)w->cur_written,
                     (unsigned long long)w->tensors[w->cur].n_bytes);
    return STRATA_EARG;
}

static int check_open(struct strata_gguf_writer *w, const char *fn)
{
    if (w->state != WRITER_OPEN) {
        strata_log_error("%s: writer is not open (call strata_gguf_writer_open first, once)", fn);
        return STRATA_EARG;
    }
    return w->error;
}

int strata_gguf_writer_tensor_begin(struct strata_gguf_writer *w, int index)
{
    int rc = check_open(w, __func__);
    if (rc) return rc;
    if ((rc = check_complete(w, __func__))) return rc;
    int64_t expected = w->cur + 1;
    if (index != expected || index < 0 || (uint64_t)index >= w->n_tensors) {
        if (expected < (int64_t)w->n_tensors)
            strata_log_error("%s: %s: tensor #%d begun, but tensors are written in the order "
                             "added: next is #%lld '%s'",
                             __func__, w->path, index, (long long)expected,
                             w->tensors[expected].name);
        else
            strata_log_error("%s: %s: tensor #%d begun, but all %llu tensors are written",
                             __func__, w->path, index, (unsigned long long)w->n_tensors);
        return STRATA_EARG;
    }
    if ((rc = pad_to(w, __func__, w->data_offset + w->tensors[index].offset))) return rc;
    w->cur = index;
    w->cur_written = 0;
    return 0;
}

int strata_gguf_writer_write(struct strata_gguf_writer *w, const void *data, uint64_t len)
{
    int rc = check_open(w, __func__);
    if (rc) return rc;
    if (w->cur < 0) {
        strata_log_error("%s: %s: no tensor begun (call strata_gguf_writer_tensor_begin)", __func__,
                         w->path);
        return STRATA_EARG;
    }
    const struct writer_tensor *t = &w->tensors[w->cur];
    if (len > t->n_bytes - w->cur_written) {
        strata_log_error("%s: %s: tensor '%s' is %llu bytes; %llu written, %llu more is too "
                         "many",
                         __func__, w->path, t->name, (unsigned long long)t->n_bytes,
                         (unsigned long long)w->cur_written, (unsigned long long)len);
        return STRATA_EARG;
    }
    if ((rc = put(w, __func__, data, len))) return rc;
    w->cur_written += len;
    return 0;
}

int strata_gguf_writer_finish(struct strata_gguf_writer *w)
{
    const char *fn = __func__;
    int rc = check_open(w, fn);
    if (rc) return rc;
    if ((rc = check_complete(w, fn))) return rc;
    if ((uint64_t)(w->cur + 1) != w->n_tensors) {
        strata_log_error("%s: %s: only %lld of %llu tensors were written; next is '%s'", fn,
                         w->path, (long long)(w->cur + 1), (unsigned long long)w->n_tensors,
                         w->tensors[w->cur + 1].name);
        return STRATA_EARG;
    }
    if ((rc = pad_to(w, fn, align_up(w->pos, w->alignment))) || (rc = flush(w, fn))) return rc;
    int fd = w->fd;
    w->fd = -1;
    w->state = WRITER_DONE;
    if (close(fd) != 0) {  // NFS and some filesystems report deferred write errors here
        rc = -errno;
        strata_log_error("%s: %s: close failed: %s", fn, w->path, strerror(errno));
        return rc;
    }
    return 0;
}
