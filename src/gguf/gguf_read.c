// GGUF parser: reads the header, metadata and tensor infos of a file (layout in gguf.h) through
// a buffered reader over pread, checking every count, length and offset against the bytes the
// file has and against overflow before using or allocating for it. Tensor data is not read here.
#include "gguf/gguf_internal.h"

#include "quant/quant.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// Metadata is read in windows this large, so a 150k-entry token array costs a few syscalls.
#define READ_BUF_BYTES (1u << 20)
// Smallest tensor info: u64 name length, u32 n_dims, one u64 ne, u32 type, u64 offset.
#define MIN_TENSOR_INFO_BYTES (8 + 4 + 8 + 4 + 8)
// Smallest key/value: u64 key length, u32 type, one byte of value.
#define MIN_KV_BYTES (8 + 4 + 1)

struct reader {
    int fd;
    const char *path;
    uint64_t file_size;
    uint64_t pos;              // file offset of the next byte to parse; <= file_size
    uint8_t *buf;              // [READ_BUF_BYTES] window of the file
    uint64_t buf_off;          // file offset of buf[0]
    uint64_t buf_len;          // valid bytes in buf
    struct strata_gguf_arena *arena;
    char where[160];           // what is being parsed, for error lines ("key 'x'")
};

static uint64_t remaining(const struct reader *r) { return r->file_size - r->pos; }

static int oom(const struct reader *r, uint64_t bytes)
{
    strata_log_error("strata_gguf_open: %s: out of memory allocating %llu bytes for %s", r->path,
                     (unsigned long long)bytes, r->where);
    return STRATA_ENOMEM;
}

static int read_bytes_slow(struct reader *r, void *dst, uint64_t n)
{
    if (n > remaining(r)) {
        strata_log_error("strata_gguf_open: %s: unexpected end of file reading %s: %llu bytes needed "
                         "at offset %llu, file is %llu bytes (truncated?)",
                         r->path, r->where, (unsigned long long)n, (unsigned long long)r->pos,
                         (unsigned long long)r->file_size);
        return STRATA_EFORMAT;
    }
    uint8_t *out = dst;
    while (n > 0) {
        if (r->pos >= r->buf_off && r->pos < r->buf_off + r->buf_len) {
            uint64_t avail = r->buf_off + r->buf_len - r->pos;
            uint64_t take = n < avail ? n : avail;
            memcpy(out, r->buf + (r->pos - r->buf_off), take);
            out += take;
            r->pos += take;
            n -= take;
            continue;
        }
        if (n >= READ_BUF_BYTES) {  // large blob: straight into place, no double copy
            int rc = strata_gguf_pread_full(r->fd, "strata_gguf_open", r->path, r->pos, out, n);
            if (rc) return rc;
            r->pos += n;
            return 0;
        }
        uint64_t len = remaining(r) < READ_BUF_BYTES ? remaining(r) : READ_BUF_BYTES;
        int rc = strata_gguf_pread_full(r->fd, "strata_gguf_open", r->path, r->pos, r->buf, len);
        if (rc) return rc;
        r->buf_off = r->pos;
        r->buf_len = len;
    }
    return 0;
}

// Most reads are a few bytes inside the window: keep that path to one compare and a memcpy
// (a vocabulary is hundreds of thousands of short strings).
static inline int read_bytes(struct reader *r, void *dst, uint64_t n)
{
    uint64_t in_buf = r->pos - r->buf_off;  // wraps to huge if pos < buf_off: takes slow path
    if (in_buf < r->buf_len && n <= r->buf_len - in_buf) {
        memcpy(dst, r->buf + in_buf, n);
        r->pos += n;
        return 0;
    }
    return read_bytes_slow(r, dst, n);
}

static int read_u32(struct reader *r, uint32_t *v) { return read_bytes(r, v, sizeof *v); }
static int read_u64(struct reader *r, uint64_t *v) { return read_bytes(r, v, sizeof *v); }

static int read_str(struct reader *r, struct strata_gguf_str *out)
{
    uint64_t len;
    int rc = read_u64(r, &len);
    if (rc) return rc;
    if (len > remaining(r)) {
        strata_log_error("strata_gguf_open: %s: string of %llu bytes at offset %llu in %s runs past "
                         "the end of file (%llu bytes)",
                         r->path, (unsigned long long)len, (unsigned long long)r->pos, r->where,
                         (unsigned long long)r->file_size);
        return STRATA_EFORMAT;
    }
    char *s = strata_gguf_arena_alloc(r->arena, len + 1);
    if (!s) return oom(r, len + 1);
    rc = read_bytes(r, s, len);
    if (rc) return rc;
    s[len] = '\0';
    out->s = s;
    out->len = len;
    return 0;
}

static int read_type(struct reader *r, enum strata_gguf_type *out)
{
    uint32_t t;
    int rc = read_u32(r, &t);
    if (rc) return rc;
    if (t >= GGUF_TYPE_COUNT) {
        strata_log_error("strata_gguf_open: %s: unknown value type %u in %s at offset %llu", r->path,
                         t, r->where, (unsigned long long)(r->pos - 4));
        return STRATA_EFORMAT;
    }
    *out = (enum strata_gguf_type)t;
    return 0;
}

static int read_array(struct reader *r, struct strata_gguf_value *v, int depth);

// Value of type v->type (already set).
static int read_value(struct reader *r, struct strata_gguf_value *v, int depth)
{
    switch (v->type) {
    case GGUF_TYPE_STRING: return read_str(r, &v->str);
    case GGUF_TYPE_ARRAY: return read_array(r, v, depth + 1);
    case GGUF_TYPE_BOOL: {
        uint8_t byte;
        int rc = read_bytes(r, &byte, 1);
        if (!rc) v->b = byte != 0;  // llama.cpp accepts any byte; anything but 0 is true
        return rc;
    }
    default:  // scalars share the union's first bytes in little-endian order
        return read_bytes(r, &v->u64, strata_gguf_scalar_size(v->type));
    }
}

// Array body: u32 element type, u64 count, elements.
static int read_array(struct reader *r, struct strata_gguf_value *v, int depth)
{
    if (depth > GGUF_MAX_NESTING) {
        strata_log_error("strata_gguf_open: %s: arrays in %s nest deeper than %d levels", r->path,
                         r->where, GGUF_MAX_NESTING);
        return STRATA_EFORMAT;
    }
    enum strata_gguf_type type;
    uint64_t n;
    int rc = read_type(r, &type);
    if (!rc) rc = read_u64(r, &n);
    if (rc) return rc;
    uint64_t min_bytes = strata_gguf_min_elem_bytes(type);
    if (n > remaining(r) / min_bytes) {
        strata_log_error("strata_gguf_open: %s: array of %llu %s in %s needs more than the %llu bytes "
                         "left before the end of file (truncated, or a count "
                         "overflow)",
                         r->path, (unsigned long long)n, strata_gguf_type_name(type), r->where,
                         (unsigned long long)remaining(r));
        return STRATA_EFORMAT;
    }
    size_t elem_mem = type == GGUF_TYPE_STRING  ? sizeof(struct strata_gguf_str)
                      : type == GGUF_TYPE_ARRAY ? sizeof(struct strata_gguf_value)
                                                : strata_gguf_scalar_size(type);
    // n <= file size / min_bytes, so n * elem_mem (at most 3x the file) cannot overflow
    uint64_t mem = n * elem_mem;
    void *items = strata_gguf_arena_alloc(r->arena, mem);
    if (!items) return oom(r, mem);
    v->arr.type = type;
    v->arr.n = n;
    v->arr.items = items;
    if (type == GGUF_TYPE_STRING) {
        struct strata_gguf_str *strs = items;
        for (uint64_t i = 0; i < n; i++)
            if ((rc = read_str(r, &strs[i]))) return rc;
    } else if (type == GGUF_TYPE_ARRAY) {
        struct strata_gguf_value *vals = items;
        for (uint64_t i = 0; i < n; i++) {
            vals[i].type = GGUF_TYPE_ARRAY;
            if ((rc = read_array(r, &vals[i], depth + 1))) return rc;
        }
    } else {
        if ((rc = read_bytes(r, items, mem))) return rc;
        if (type == GGUF_TYPE_BOOL) {  // make every byte a valid C bool before it is read as one
            uint8_t *bytes = items;
            for (uint64_t i = 0; i < n; i++) bytes[i] = bytes[i] != 0;
        }
    }
    return 0;
}

static int read_header(struct reader *r, struct strata_gguf_file *f)
{
    char magic[4];
    snprintf(r->where, sizeof r->where, "the header");
    int rc = read_bytes(r, magic, 4);
    if (rc) return rc;
    if (memcmp(magic, "GGUF", 4) != 0) {
        strata_log_error("strata_gguf_open: %s: bad magic %02x %02x %02x %02x (expected \"GGUF\"): "
                         "not a GGUF file",
                         r->path, (uint8_t)magic[0], (uint8_t)magic[1], (uint8_t)magic[2],
                         (uint8_t)magic[3]);
        return STRATA_EFORMAT;
    }
    if ((rc = read_u32(r, &f->version))) return rc;
    if (f->version != 2 && f->version != 3) {
        const char *why = f->version == 1                ? " (v1 is no longer supported)"
                          : (f->version & 0xffff) == 0 ? " (byte-swapped: big-endian files "
                                                          "are not supported)"
                                                        : "";
        strata_log_error("strata_gguf_open: %s: unsupported GGUF version %u%s; strata reads versions "
                         "2 and 3",
                         r->path, f->version, why);
        return STRATA_EFORMAT;
    }
    if ((rc = read_u64(r, &f->n_tensors)) || (rc = read_u64(r, &f->n_kv))) return rc;
    // A corrupt count must fail here, before it sizes an allocation.
    if (f->n_kv > remaining(r) / MIN_KV_BYTES) {
        strata_log_error("strata_gguf_open: %s: n_kv %llu needs more than the %llu bytes left before "
                         "the end of file (truncated, or a count overflow)",
                         r->path, (unsigned long long)f->n_kv, (unsigned long long)remaining(r));
        return STRATA_EFORMAT;
    }
    if (f->n_tensors > remaining(r) / MIN_TENSOR_INFO_BYTES) {
        strata_log_error("strata_gguf_open: %s: n_tensors %llu needs more than the %llu bytes left "
                         "before the end of file (truncated, or a count overflow)",
                         r->path, (unsigned long long)f->n_tensors,
                         (unsigned long long)remaining(r));
        return STRATA_EFORMAT;
    }
    return 0;
}

// A zeroed array of n entries and a name index sized for them; NULL (logged) when out of
// memory. n was bounded by the file size in read_header, so n * entry_bytes cannot overflow.
static void *alloc_table(struct reader *r, uint64_t n, size_t entry_bytes,
                         struct strata_gguf_name_index *ix)
{
    void *table = strata_gguf_arena_alloc(r->arena, n * entry_bytes);
    if (!table) {
        oom(r, n * entry_bytes);
        return NULL;
    }
    memset(table, 0, n * entry_bytes);
    if (strata_gguf_index_init(ix, n)) {
        oom(r, n * 2 * sizeof(struct strata_gguf_name_slot));
        return NULL;
    }
    return table;
}

static int read_kvs(struct reader *r, struct strata_gguf_file *f, struct strata_gguf_file_private *priv)
{
    f->kv = alloc_table(r, f->n_kv, sizeof *f->kv, &priv->keys);
    if (!f->kv) return STRATA_ENOMEM;
    int rc;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        struct strata_gguf_kv *kv = &f->kv[i];
        snprintf(r->where, sizeof r->where, "key #%llu", (unsigned long long)i);
        rc = read_str(r, &kv->key);
        if (rc) return rc;
        if (kv->key.len == 0) {
            strata_log_error("strata_gguf_open: %s: key #%llu is empty", r->path, (unsigned long long)i);
            return STRATA_EFORMAT;
        }
        snprintf(r->where, sizeof r->where, "key '%.100s'", kv->key.s);
        int64_t prev = strata_gguf_index_insert(&priv->keys, kv->key.s, kv->key.len, i);
        if (prev >= 0) {
            strata_log_error("strata_gguf_open: %s: duplicate key '%.100s' (#%lld and #%llu)", r->path,
                             kv->key.s, (long long)prev, (unsigned long long)i);
            return STRATA_EFORMAT;
        }
        if ((rc = read_type(r, &kv->value.type))) return rc;
        if ((rc = read_value(r, &kv->value, 0))) return rc;
    }
    return 0;
}

static int read_alignment(struct reader *r, struct strata_gguf_file *f, struct strata_gguf_file_private *priv)
{
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = strata_gguf_index_find(&priv->keys, "general.alignment", strlen("general.alignment"));
    if (i < 0) return 0;
    const struct strata_gguf_value *v = &f->kv[i].value;
    if (v->type != GGUF_TYPE_UINT32) {
        strata_log_error("strata_gguf_open: %s: general.alignment has type %s, must be u32", r->path,
                         strata_gguf_type_name(v->type));
        return STRATA_EFORMAT;
    }
    if (v->u32 == 0 || (v->u32 & (v->u32 - 1)) != 0) {
        strata_log_error("strata_gguf_open: %s: general.alignment %u is not a power of two", r->path,
                         v->u32);
        return STRATA_EFORMAT;
    }
    f->alignment = v->u32;
    return 0;
}

// Shape, type and size of one tensor info (name already read).
static int check_shape(struct reader *r, struct strata_gguf_tensor *t)
{
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS) {
        strata_log_error("strata_gguf_open: %s: tensor '%.100s' has n_dims %u, must be 1..%d", r->path,
                         t->name, t->n_dims, GGUF_MAX_DIMS);
        return STRATA_EFORMAT;
    }
    const struct strata_type_traits *tr = strata_type_traits(t->type);
    if (!tr) {
        strata_log_error("strata_gguf_open: %s: tensor '%.100s' has unknown or retired tensor type %u",
                         r->path, t->name, t->type);
        return STRATA_EFORMAT;
    }
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (t->ne[d] == 0 || t->ne[d] > (uint64_t)INT64_MAX) {
            strata_log_error("strata_gguf_open: %s: tensor '%.100s' has ne[%u] = %llu, must be 1..2^63-1",
                             r->path, t->name, d, (unsigned long long)t->ne[d]);
            return STRATA_EFORMAT;
        }
        if (__builtin_mul_overflow(n, t->ne[d], &n) || n > (uint64_t)INT64_MAX) {
            strata_log_error("strata_gguf_open: %s: tensor '%.100s' element count overflows at ne[%u] = "
                             "%llu",
                             r->path, t->name, d, (unsigned long long)t->ne[d]);
            return STRATA_EFORMAT;
        }
    }
    t->n_elements = n;
    if (t->ne[0] % tr->block_size != 0) {
        strata_log_error("strata_gguf_open: %s: tensor '%.100s' of type %s has ne[0] = %llu, not a "
                         "multiple of its block size %u",
                         r->path, t->name, tr->name, (unsigned long long)t->ne[0],
                         tr->block_size);
        return STRATA_EFORMAT;
    }
    uint64_t row_bytes;
    if (__builtin_mul_overflow(t->ne[0] / tr->block_size, (uint64_t)tr->type_size, &row_bytes) ||
        __builtin_mul_overflow(row_bytes, n / t->ne[0], &t->n_bytes)) {
        strata_log_error("strata_gguf_open: %s: tensor '%.100s' byte size overflows", r->path, t->name);
        return STRATA_EFORMAT;
    }
    return 0;
}

static int read_tensor_infos(struct reader *r, struct strata_gguf_file *f,
                             struct strata_gguf_file_private *priv)
{
    f->tensors = alloc_table(r, f->n_tensors, sizeof *f->tensors, &priv->tensors);
    if (!f->tensors) return STRATA_ENOMEM;
    int rc;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct strata_gguf_tensor *t = &f->tensors[i];
        struct strata_gguf_str name;
        snprintf(r->where, sizeof r->where, "tensor info #%llu", (unsigned long long)i);
        rc = read_str(r, &name);
        if (rc) return rc;
        if (memchr(name.s, '\0', name.len)) {
            strata_log_error("strata_gguf_open: %s: name of tensor #%llu contains a NUL byte", r->path,
                             (unsigned long long)i);
            return STRATA_EFORMAT;
        }
        t->name = name.s;
        snprintf(r->where, sizeof r->where, "tensor '%.100s'", t->name);
        int64_t prev = strata_gguf_index_insert(&priv->tensors, name.s, name.len, i);
        if (prev >= 0) {
            strata_log_error("strata_gguf_open: %s: duplicate tensor name '%.100s' (#%lld and #%llu)",
                             r->path, t->name, (long long)prev, (unsigned long long)i);
            return STRATA_EFORMAT;
        }
        if ((rc = read_u32(r, &t->n_dims))) return rc;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS) return check_shape(r, t);
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        if ((rc = read_bytes(r, t->ne, t->n_dims * sizeof t->ne[0]))) return rc;
        if ((rc = read_u32(r, &t->type)) || (rc = read_u64(r, &t->offset))) return rc;
        if ((rc = check_shape(r, t))) return rc;
    }
    return 0;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const struct strata_gguf_tensor *x = *(const struct strata_gguf_tensor *const *)a;
    const struct strata_gguf_tensor *y = *(const struct strata_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

// Every tensor aligned, inside the file, and not overlapping another.
static int check_placement(struct reader *r, struct strata_gguf_file *f)
{
    char a[32], b[32];
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        struct strata_gguf_tensor *t = &f->tensors[i];
        if (t->offset % f->alignment != 0) {
            strata_log_error("strata_gguf_open: %s: tensor '%.100s' offset %llu is misaligned "
                             "(alignment %llu)",
                             r->path, t->name, (unsigned long long)t->offset,
                             (unsigned long long)f->alignment);
            return STRATA_EFORMAT;
        }
        uint64_t end;
        if (__builtin_add_overflow(f->data_offset, t->offset, &t->file_offset) ||
            __builtin_add_overflow(t->file_offset, t->n_bytes, &end)) {
            strata_log_error("strata_gguf_open: %s: tensor '%.100s' at offset %llu + %llu bytes "
                             "overflows 64 bits (far past the end of file)",
                             r->path, t->name, (unsigned long long)t->offset,
                             (unsigned long long)t->n_bytes);
            return STRATA_EFORMAT;
        }
        if (end > f->file_size) {
            strata_log_error("strata_gguf_open: %s: tensor '%.100s' ends at %s, file is %s "
                             "(offset %llu + %llu bytes past the end of file)",
                             r->path, t->name, strata_gguf_fmt_bytes(a, end),
                             strata_gguf_fmt_bytes(b, f->file_size), (unsigned long long)t->offset,
                             (unsigned long long)t->n_bytes);
            return STRATA_EFORMAT;
        }
    }
    if (f->n_tensors < 2) return 0;
    const struct strata_gguf_tensor **order = malloc(f->n_tensors * sizeof *order);
    if (!order) return oom(r, f->n_tensors * sizeof *order);
    for (uint64_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, cmp_by_offset);
    int rc = 0;
    for (uint64_t i = 1; i < f->n_tensors && !rc; i++) {
        if (order[i - 1]->offset + order[i - 1]->n_bytes > order[i]->offset) {
            strata_log_error("strata_gguf_open: %s: tensors '%.100s' and '%.100s' overlap (offsets "
                             "%llu and %llu)",
                             r->path, order[i - 1]->name, order[i]->name,
                             (unsigned long long)order[i - 1]->offset,
                             (unsigned long long)order[i]->offset);
            rc = STRATA_EFORMAT;
        }
    }
    free(order);
    return rc;
}

static int parse(struct reader *r, struct strata_gguf_file *f, struct strata_gguf_file_private *priv)
{
    int rc;
    if ((rc = read_header(r, f)) || (rc = read_kvs(r, f, priv)) ||
        (rc = read_alignment(r, f, priv)) || (rc = read_tensor_infos(r, f, priv)))
        return rc;
    // The data section starts at the next multiple of the alignment after the tensor infos.
    f->data_offset = (r->pos + f->alignment - 1) / f->alignment * f->alignment;
    return check_placement(r, f);
}

// ---- public --------------------------------------------------------------------------------

int strata_gguf_open(struct strata_gguf_file **out, const char *path)
{
    *out = NULL;
    struct strata_gguf_file *f = calloc(1, sizeof *f);
    struct strata_gguf_file_private *priv = calloc(1, sizeof *priv);
    char *path_copy = strdup(path);
    uint8_t *buf = malloc(READ_BUF_BYTES);
    if (!f || !priv || !path_copy || !buf) {
        strata_log_error("strata_gguf_open: %s: out of memory", path);
        free(f);
        free(priv);
        free(path_copy);
        free(buf);
        return STRATA_ENOMEM;
    }
    f->path = path_copy;
    f->index = priv;
    struct stat st;
    struct reader r = {.path = path, .buf = buf, .arena = &priv->arena};
    int rc = 0;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0 || fstat(f->fd, &st) != 0) {
        rc = -errno;
        strata_log_error("strata_gguf_open: %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = S_ISDIR(st.st_mode) ? -EISDIR : STRATA_EFORMAT;
        strata_log_error("strata_gguf_open: %s: not a regular file", path);
        goto fail;
    }
    f->file_size = (uint64_t)st.st_size;
    r.fd = f->fd;
    r.file_size = f->file_size;
    if ((rc = parse(&r, f, priv))) goto fail;
    free(buf);
    *out = f;
    return 0;
fail:
    free(buf);
    strata_gguf_close(f);
    return rc;
}

void strata_gguf_close(struct strata_gguf_file *f)
{
    if (!f) return;
    struct strata_gguf_file_private *priv = f->index;
    if (f->map) munmap(f->map, f->file_size);
    if (f->fd >= 0) close(f->fd);
    strata_gguf_index_free(&priv->keys);
    strata_gguf_index_free(&priv->tensors);
    strata_gguf_arena_free(&priv->arena);
    free(priv);
    free(f->path);
    free(f);
}
