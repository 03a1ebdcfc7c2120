// Lookups on an opened GGUF file: keys and tensors by name (hashed), typed metadata getters
// with range-checked integer conversion, and tensor bytes by pread or read-only mapping.
#include "gguf/gguf_internal.h"

#include "util/log.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>

const struct strata_gguf_kv *strata_gguf_find_kv(const struct strata_gguf_file *f, const char *key)
{
    const struct strata_gguf_file_private *priv = f->index;
    int64_t i = strata_gguf_index_find(&priv->keys, key, strlen(key));
    return i < 0 ? NULL : &f->kv[i];
}

const struct strata_gguf_tensor *strata_gguf_find_tensor(const struct strata_gguf_file *f, const char *name)
{
    const struct strata_gguf_file_private *priv = f->index;
    int64_t i = strata_gguf_index_find(&priv->tensors, name, strlen(name));
    return i < 0 ? NULL : &f->tensors[i];
}

// ---- typed getters -------------------------------------------------------------------------

// An integer value split so any target range can be checked without wider types:
// negative values keep `s`, non-negative ones `u`.
struct int_value {
    bool negative;
    int64_t s;
    uint64_t u;
};

static bool as_int(const struct strata_gguf_value *v, struct int_value *out)
{
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed = true;
    switch (v->type) {
    case GGUF_TYPE_UINT8: u = v->u8, is_signed = false; break;
    case GGUF_TYPE_UINT16: u = v->u16, is_signed = false; break;
    case GGUF_TYPE_UINT32: u = v->u32, is_signed = false; break;
    case GGUF_TYPE_UINT64: u = v->u64, is_signed = false; break;
    case GGUF_TYPE_INT8: s = v->i8; break;
    case GGUF_TYPE_INT16: s = v->i16; break;
    case GGUF_TYPE_INT32: s = v->i32; break;
    case GGUF_TYPE_INT64: s = v->i64; break;
    default: return false;
    }
    out->negative = is_signed && s < 0;
    out->s = s;
    out->u = is_signed ? (s < 0 ? 0 : (uint64_t)s) : u;
    return true;
}

// The key's value, or NULL: absent keys are not logged, optional keys are common.
static const struct strata_gguf_value *lookup(const struct strata_gguf_file *f, const char *key)
{
    const struct strata_gguf_kv *kv = strata_gguf_find_kv(f, key);
    return kv ? &kv->value : NULL;
}

static int wrong_type(const struct strata_gguf_file *f, const char *fn, const char *key,
                      const struct strata_gguf_value *v, const char *want)
{
    strata_log_error("%s: %s: key '%s' has type %s, expected %s", fn, f->path, key,
                     strata_gguf_type_name(v->type), want);
    return STRATA_EFORMAT;
}

static int out_of_range(const struct strata_gguf_file *f, const char *fn, const char *key,
                        const struct int_value *iv, const char *want)
{
    if (iv->negative)
        strata_log_error("%s: %s: key '%s' value %lld does not fit in %s", fn, f->path, key,
                         (long long)iv->s, want);
    else
        strata_log_error("%s: %s: key '%s' value %llu does not fit in %s", fn, f->path, key,
                         (unsigned long long)iv->u, want);
    return STRATA_EFORMAT;
}

int strata_gguf_get_u32(const struct strata_gguf_file *f, const char *key, uint32_t *out)
{
    const struct strata_gguf_value *v = lookup(f, key);
    struct int_value iv;
    if (!v) return -ENOENT;
    if (!as_int(v, &iv)) return wrong_type(f, __func__, key, v, "an integer");
    if (iv.negative || iv.u > UINT32_MAX) return out_of_range(f, __func__, key, &iv, "u32");
    *out = (uint32_t)iv.u;
    return 0;
}

int strata_gguf_get_u64(const struct strata_gguf_file *f, const char *key, uint64_t *out)
{
    const struct strata_gguf_value *v = lookup(f, key);
    struct int_value iv;
    if (!v) return -ENOENT;
    if (!as_int(v, &iv)) return wrong_type(f, __func__, key, v, "an integer");
    if (iv.negative) return out_of_range(f, __func__, key, &iv, "u64");
    *out = iv.u;
    return 0;
}

int strata_gguf_get_i32(const struct strata_gguf_file *f, const char *key, int32_t *out)
{
    const struct strata_gguf_value *v = lookup(f, key);
    struct int_value iv;
    if (!v) return -ENOENT;
    if (!as_int(v, &iv)) return wrong_type(f, __func__, key, v, "an integer");
    if (iv.negative ? iv.s < INT32_MIN : iv.u > INT32_MAX)
        return out_of_range(f, __func__, key, &iv, "i32");
    *out = iv.negative ? (int32_t)iv.s : (int32_t)iv.u;
    return 0;
}

int strata_gguf_get_f32(const struct strata_gguf_file *f, const char *key, float *out)
{
    const struct strata_gguf_value *v = lookup(f, key);
    if (!v) return -ENOENT;
    if (v->type == GGUF_TYPE_FLOAT32) {
        *out = v->f32;
        return 0;
    }
    if (v->type != GGUF_TYPE_FLOAT64) return wrong_type(f, __func__, key, v, "f32 or f64");
    if (isfinite(v->f64) && fabs(v->f64) > FLT_MAX) {
        strata_log_error("%s: %s: key '%s' value %g does not fit in f32", __func__, f->path, key,
                         v->f64);
        return STRATA_EFORMAT;
    }
    *out = (float)v->f64;
    return 0;
}

int strata_gguf_get_bool(const struct strata_gguf_file *f, const char *key, bool *out)
{
    const struct strata_gguf_value *v = lookup(f, key);
    if (!v) return -ENOENT;
    if (v->type != GGUF_TYPE_BOOL) return wrong_type(f, __func__, key, v, "bool");
    *out = v->b;
    return 0;
}

int strata_gguf_get_str(const struct strata_gguf_file *f, const char *key, const char **out)
{
    const struct strata_gguf_value *v = lookup(f, key);
    if (!v) return -ENOENT;
    if (v->type != GGUF_TYPE_STRING) return wrong_type(f, __func__, key, v, "str");
    *out = v->str.s;
    return 0;
}

int strata_gguf_get_arr(const struct strata_gguf_file *f, const char *key, enum strata_gguf_type type,
                 const void **items, uint64_t *n)
{
    const struct strata_gguf_value *v = lookup(f, key);
    if (!v) return -ENOENT;
    if (v->type != GGUF_TYPE_ARRAY || v->arr.type != type) {
        strata_log_error("%s: %s: key '%s' is %s%s%s, expected an array of %s", __func__,
                         f->path, key, v->type == GGUF_TYPE_ARRAY ? "an array of " : "",
                         strata_gguf_type_name(v->type == GGUF_TYPE_ARRAY ? v->arr.type : v->type),
                         v->type == GGUF_TYPE_ARRAY ? "" : " (not an array)",
                         strata_gguf_type_name(type));
        return STRATA_EFORMAT;
    }
    *items = v->arr.items;
    *n = v->arr.n;
    return 0;
}

// ---- tensor data ---------------------------------------------------------------------------

int strata_gguf_pread(const struct strata_gguf_file *f, uint64_t file_off, void *dst, uint64_t len)
{
    if (file_off > f->file_size || len > f->file_size - file_off) {
        strata_log_error("strata_gguf_pread: %s: range of %llu bytes at offset %llu is past the end "
                         "of file (%llu bytes)",
                         f->path, (unsigned long long)len, (unsigned long long)file_off,
                         (unsigned long long)f->file_size);
        return STRATA_EARG;
    }
    return strata_gguf_pread_full(f->fd, "strata_gguf_pread", f->path, file_off, dst, len);
}

int strata_gguf_read_tensor(const struct strata_gguf_file *f, const struct strata_gguf_tensor *t, uint64_t off,
                     void *dst, uint64_t len)
{
    if (off > t->n_bytes || len > t->n_bytes - off) {
        strata_log_error("strata_gguf_read_tensor: %s: range of %llu bytes at offset %llu is outside "
                         "tensor '%s' (%llu bytes)",
                         f->path, (unsigned long long)len, (unsigned long long)off, t->name,
                         (unsigned long long)t->n_bytes);
        return STRATA_EARG;
    }
    return strata_gguf_pread_full(f->fd, "strata_gguf_read_tensor", f->path, t->file_offset + off, dst, len);
}

const void *strata_gguf_map(struct strata_gguf_file *f)
{
    if (f->map) return f->map;
    if (f->file_size > SIZE_MAX) {
        strata_log_error("strata_gguf_map: %s: %llu bytes do not fit the address space", f->path,
                         (unsigned long long)f->file_size);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)f->file_size, PROT_READ, MAP_SHARED, f->fd, 0);
    if (p == MAP_FAILED) {
        strata_log_error("strata_gguf_map: %s: mmap of %llu bytes failed: %s", f->path,
                         (unsigned long long)f->file_size, strerror(errno));
        return NULL;
    }
    f->map = p;
    return p;
}

const void *strata_gguf_tensor_data(struct strata_gguf_file *f, const struct strata_gguf_tensor *t)
{
    const uint8_t *base = strata_gguf_map(f);
    return base ? base + t->file_offset : NULL;
}
