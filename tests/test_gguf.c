// GGUF reader and writer tests: a round trip of every value type and several tensor types,
// hand-made broken files (each must fail with one clear line), truncation at every byte, a
// seeded byte-flip fuzz loop (run under ASan/UBSan by `make test SAN=1`), typed getters,
// writer misuse and write errors, and the open time of a file with real-model-sized metadata.
// Prints one line per case; exit 0 if all pass, 1 otherwise. Files live in a mkdtemp dir.
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "util/log.h"

#include "gguf_bytes.h"

#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char g_dir[64];

static const char *tmp_path(const char *name)
{
    static char buf[4][160];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

static uint64_t rng_next(uint64_t *s)  // splitmix64
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(uint8_t *p, uint64_t n, uint64_t seed)
{
    for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)rng_next(&seed);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(p, 1, n, fp) != n || fclose(fp) != 0) {
        printf("test: cannot write %s\n", path);
        exit(1);
    }
}

static void quiet_sink(enum strata_log_level level, const char *line, void *user)
{
    (void)level, (void)line, (void)user;
}

// ---- 1. round trip ---------------------------------------------------------------------------

struct tensor_spec {
    const char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[4];
};

static const struct tensor_spec g_tensors[] = {
    {"token_embd.weight", STRATA_TYPE_F32, 2, {8, 3}},
    {"blk.0.ffn_up_exps.weight", STRATA_TYPE_Q4_K, 3, {256, 2, 3}},
    {"blk.0.attn_q.weight", STRATA_TYPE_Q8_0, 2, {64, 5}},
    {"norm", STRATA_TYPE_F16, 1, {7}},
    {"blk.0.ffn_down_exps.weight", STRATA_TYPE_Q6_K, 4, {512, 1, 2, 2}},
    {"big", STRATA_TYPE_F32, 1, {3u << 20}},  // 12 MiB: larger than the writer's buffer
    {"ids", STRATA_TYPE_I32, 1, {5}},
};
#define N_TENSORS (sizeof g_tensors / sizeof g_tensors[0])

static const uint8_t u8s[] = {0, 1, 255};
static const int8_t i8s[] = {-128, 0, 127};
static const uint16_t u16s[] = {0, 65535};
static const int16_t i16s[] = {-32768, 32767};
static const uint32_t u32s[] = {0, 4000000000u, 7};
static const int32_t i32s[] = {INT32_MIN, -1, INT32_MAX};
static const uint64_t u64s[] = {0, UINT64_MAX};
static const int64_t i64s[] = {INT64_MIN, INT64_MAX};
static const float f32s[] = {1.5f, -0.0f, 3.4e38f};
static const double f64s[] = {1e-300, -2.5};
static const bool bools[] = {true, false, true};
static const char *const strs[] = {"a", "", "ünïcödé ✓", "with\ttab"};

struct scalar_array {
    const char *key;
    enum strata_gguf_type type;
    const void *items;
    uint64_t n;
    size_t elem;
};

#define SA(key, type, arr) {key, type, arr, sizeof arr / sizeof arr[0], sizeof arr[0]}
static const struct scalar_array g_arrays[] = {
    SA("arr.u8", GGUF_TYPE_UINT8, u8s),      SA("arr.i8", GGUF_TYPE_INT8, i8s),
    SA("arr.u16", GGUF_TYPE_UINT16, u16s),   SA("arr.i16", GGUF_TYPE_INT16, i16s),
    SA("arr.u32", GGUF_TYPE_UINT32, u32s),   SA("arr.i32", GGUF_TYPE_INT32, i32s),
    SA("arr.u64", GGUF_TYPE_UINT64, u64s),   SA("arr.i64", GGUF_TYPE_INT64, i64s),
    SA("arr.f32", GGUF_TYPE_FLOAT32, f32s),  SA("arr.f64", GGUF_TYPE_FLOAT64, f64s),
    SA("arr.bool", GGUF_TYPE_BOOL, bools),
};
#define N_ARRAYS (sizeof g_arrays / sizeof g_arrays[0])

// [[1, 2], [], [3]] of u32, and [[["x", "yz"]], []] of strings (depth 3).
static const uint32_t inner_a[] = {1, 2}, inner_c[] = {3};
static struct strata_gguf_str inner_strs[] = {{"x", 1}, {"yz", 2}};

static void nested_values(struct strata_gguf_value *two_level, struct strata_gguf_value *three_level,
                          struct strata_gguf_value inner[3], struct strata_gguf_value mid[2],
                          struct strata_gguf_value *leaf)
{
    const enum strata_gguf_type array = GGUF_TYPE_ARRAY, u32 = GGUF_TYPE_UINT32;
    inner[0] = (struct strata_gguf_value){.type = array, .arr = {u32, 2, (void *)inner_a}};
    inner[1] = (struct strata_gguf_value){.type = array, .arr = {u32, 0, NULL}};
    inner[2] = (struct strata_gguf_value){.type = array, .arr = {u32, 1, (void *)inner_c}};
    *two_level = (struct strata_gguf_value){.type = array, .arr = {array, 3, inner}};
    *leaf = (struct strata_gguf_value){.type = array, .arr = {GGUF_TYPE_STRING, 2, inner_strs}};
    mid[0] = (struct strata_gguf_value){.type = array, .arr = {array, 1, leaf}};
    mid[1] = (struct strata_gguf_value){.type = array, .arr = {array, 0, NULL}};
    *three_level = (struct strata_gguf_value){.type = array, .arr = {array, 2, mid}};
}

static uint8_t *tensor_bytes(int i, uint64_t n)
{
    uint8_t *p = malloc(n);
    if (!p) exit(1);
    fill(p, n, 1000 + (uint64_t)i);
    return p;
}

// Writes the round-trip file; tensor data goes in uneven pieces to exercise the streaming.
static int write_roundtrip(const char *path, uint32_t alignment, size_t n_tensors)
{
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    int rc = 0;
    rc |= strata_gguf_writer_set_str(w, "general.architecture", "test");
    rc |= strata_gguf_writer_set_u8(w, "s.u8", 200);
    rc |= strata_gguf_writer_set_i8(w, "s.i8", -100);
    rc |= strata_gguf_writer_set_u16(w, "s.u16", 60000);
    rc |= strata_gguf_writer_set_i16(w, "s.i16", -30000);
    rc |= strata_gguf_writer_set_u32(w, "s.replaced", 1);
    rc |= strata_gguf_writer_set_u32(w, "s.u32", 4000000000u);
    rc |= strata_gguf_writer_set_i32(w, "s.i32", -2000000000);
    rc |= strata_gguf_writer_set_u64(w, "s.u64", (1ull << 63) + 5);
    rc |= strata_gguf_writer_set_i64(w, "s.i64", -(1ll << 62));
    rc |= strata_gguf_writer_set_f32(w, "s.f32", 3.5f);
    rc |= strata_gguf_writer_set_f64(w, "s.f64", -1e300);
    rc |= strata_gguf_writer_set_bool(w, "s.true", true);
    rc |= strata_gguf_writer_set_bool(w, "s.false", false);
    rc |= strata_gguf_writer_set_str(w, "s.str", "hello");
    rc |= strata_gguf_writer_set_str(w, "s.empty", "");
    rc |= strata_gguf_writer_set_str(w, "s.utf8", "héllo wörld ✓ 日本語");
    rc |= strata_gguf_writer_set_u32(w, "s.replaced", 2);  // replaces, keeps its place
    for (size_t i = 0; i < N_ARRAYS; i++)
        rc |= strata_gguf_writer_set_arr(w, g_arrays[i].key, g_arrays[i].type, g_arrays[i].items,
                                  g_arrays[i].n);
    rc |= strata_gguf_writer_set_arr(w, "arr.empty", GGUF_TYPE_UINT32, NULL, 0);
    rc |= strata_gguf_writer_set_arr_str(w, "arr.str", strs, 4);
    struct strata_gguf_value two, three, inner[3], mid[2], leaf;
    nested_values(&two, &three, inner, mid, &leaf);
    rc |= strata_gguf_writer_set_value(w, "arr.nested2", &two);
    rc |= strata_gguf_writer_set_value(w, "arr.nested3", &three);
    if (alignment != GGUF_DEFAULT_ALIGNMENT) rc |= strata_gguf_writer_set_alignment(w, alignment);
    for (size_t i = 0; i < n_tensors; i++) {
        const struct tensor_spec *t = &g_tensors[i];
        int index = strata_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
        CHECK(index == (int)i, "add_tensor %s returned %d", t->name, index);
    }
    CHECK(rc == 0, "setting metadata failed: %s", strata_last_error());
    rc = strata_gguf_writer_open(w, path);
    for (size_t i = 0; i < n_tensors && !rc; i++) {
        uint64_t n = strata_gguf_writer_tensor_bytes(w, (int)i);
        uint8_t *data = tensor_bytes((int)i, n);
        rc = strata_gguf_writer_tensor_begin(w, (int)i);
        uint64_t done = 0;
        for (uint64_t piece = 1; done < n && !rc; piece = piece * 3 + 1) {
            uint64_t k = n - done < piece ? n - done : piece;
            if (i == 5 && done == 0) k = n;  // one call bigger than the buffer
            rc = strata_gguf_writer_write(w, data + done, k);
            done += k;
        }
        free(data);
    }
    if (!rc) rc = strata_gguf_writer_finish(w);
    strata_gguf_writer_free(w);
    return rc;
}

static void check_scalars(const struct strata_gguf_file *f)
{
    const struct strata_gguf_kv *kv;
#define SCALAR(key, t, member, want)                                                      \
    kv = strata_gguf_find_kv(f, key);                                                            \
    CHECK(kv && kv->value.type == t && kv->value.member == (want), "value of %s", key)
    SCALAR("s.u8", GGUF_TYPE_UINT8, u8, 200);
    SCALAR("s.i8", GGUF_TYPE_INT8, i8, -100);
    SCALAR("s.u16", GGUF_TYPE_UINT16, u16, 60000);
    SCALAR("s.i16", GGUF_TYPE_INT16, i16, -30000);
    SCALAR("s.u32", GGUF_TYPE_UINT32, u32, 4000000000u);
    SCALAR("s.i32", GGUF_TYPE_INT32, i32, -2000000000);
    SCALAR("s.u64", GGUF_TYPE_UINT64, u64, (1ull << 63) + 5);
    SCALAR("s.i64", GGUF_TYPE_INT64, i64, -(1ll << 62));
    SCALAR("s.f32", GGUF_TYPE_FLOAT32, f32, 3.5f);
    SCALAR("s.f64", GGUF_TYPE_FLOAT64, f64, -1e300);
    SCALAR("s.true", GGUF_TYPE_BOOL, b, true);
    SCALAR("s.false", GGUF_TYPE_BOOL, b, false);
    SCALAR("s.replaced", GGUF_TYPE_UINT32, u32, 2);
#undef SCALAR
    const char *s = NULL;
    CHECK(strata_gguf_get_str(f, "s.str", &s) == 0 && strcmp(s, "hello") == 0, "s.str");
    CHECK(strata_gguf_get_str(f, "s.empty", &s) == 0 && strcmp(s, "") == 0, "s.empty");
    CHECK(strata_gguf_get_str(f, "s.utf8", &s) == 0 && strcmp(s, "héllo wörld ✓ 日本語") == 0,
          "s.utf8");
    kv = strata_gguf_find_kv(f, "s.utf8");
    CHECK(kv && kv->value.str.len == strlen("héllo wörld ✓ 日本語"), "utf8 length");
}

static void check_arrays(const struct strata_gguf_file *f)
{
    const void *items;
    uint64_t n;
    for (size_t i = 0; i < N_ARRAYS; i++) {
        const struct scalar_array *a = &g_arrays[i];
        int rc = strata_gguf_get_arr(f, a->key, a->type, &items, &n);
        CHECK(rc == 0 && n == a->n && memcmp(items, a->items, n * a->elem) == 0, "array %s",
              a->key);
    }
    CHECK(strata_gguf_get_arr(f, "arr.empty", GGUF_TYPE_UINT32, &items, &n) == 0 && n == 0, "empty");
    CHECK(strata_gguf_get_arr(f, "arr.str", GGUF_TYPE_STRING, &items, &n) == 0 && n == 4, "arr.str");
    for (uint64_t i = 0; i < 4 && n == 4; i++) {
        const struct strata_gguf_str *s = &((const struct strata_gguf_str *)items)[i];
        CHECK(s->len == strlen(strs[i]) && strcmp(s->s, strs[i]) == 0, "arr.str[%d]", (int)i);
    }
    // [[1, 2], [], [3]]
    CHECK(strata_gguf_get_arr(f, "arr.nested2", GGUF_TYPE_ARRAY, &items, &n) == 0 && n == 3, "nested2");
    if (n == 3) {
        const struct strata_gguf_value *v = items;
        CHECK(v[0].type == GGUF_TYPE_ARRAY && v[0].arr.type == GGUF_TYPE_UINT32 &&
                  v[0].arr.n == 2 && memcmp(v[0].arr.items, inner_a, 8) == 0,
              "nested2[0]");
        CHECK(v[1].type == GGUF_TYPE_ARRAY && v[1].arr.n == 0, "nested2[1]");
        CHECK(v[2].arr.n == 1 && ((const uint32_t *)v[2].arr.items)[0] == 3, "nested2[2]");
    }
    // [[["x", "yz"]], []]
    CHECK(strata_gguf_get_arr(f, "arr.nested3", GGUF_TYPE_ARRAY, &items, &n) == 0 && n == 2, "nested3");
    if (n == 2) {
        const struct strata_gguf_value *v = items;
        CHECK(v[0].arr.type == GGUF_TYPE_ARRAY && v[0].arr.n == 1 && v[1].arr.n == 0,
              "nested3 middle");
        if (v[0].arr.n == 1) {
            const struct strata_gguf_value *leaf = v[0].arr.items;
            const struct strata_gguf_str *ls = leaf->arr.items;
            CHECK(leaf->arr.type == GGUF_TYPE_STRING && leaf->arr.n == 2 &&
                      strcmp(ls[0].s, "x") == 0 && strcmp(ls[1].s, "yz") == 0,
                  "nested3 leaf");
        }
    }
}

static void check_tensors(struct strata_gguf_file *f, uint32_t alignment, size_t n_tensors)
{
    CHECK(f->n_tensors == n_tensors, "n_tensors %llu", (unsigned long long)f->n_tensors);
    CHECK(f->data_offset % alignment == 0, "data offset %llu", (unsigned long long)f->data_offset);
    const uint8_t *map = strata_gguf_map(f);
    CHECK(map != NULL, "strata_gguf_map: %s", strata_last_error());
    for (size_t i = 0; i < n_tensors && i < f->n_tensors; i++) {
        const struct tensor_spec *spec = &g_tensors[i];
        const struct strata_gguf_tensor *t = strata_gguf_find_tensor(f, spec->name);
        CHECK(t == &f->tensors[i], "find_tensor %s", spec->name);
        if (!t) continue;
        uint64_t want_bytes = strata_type_row_bytes(spec->type, spec->ne[0]);
        for (uint32_t d = 1; d < spec->n_dims; d++) want_bytes *= spec->ne[d];
        CHECK(t->type == spec->type && t->n_dims == spec->n_dims && t->n_bytes == want_bytes,
              "tensor %s info", spec->name);
        for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++)
            CHECK(t->ne[d] == (d < spec->n_dims ? spec->ne[d] : 1), "%s ne[%u]", spec->name, d);
        CHECK(t->offset % alignment == 0 && t->file_offset == f->data_offset + t->offset,
              "%s offset", spec->name);
        uint8_t *want = tensor_bytes((int)i, t->n_bytes);
        uint8_t *got = malloc(t->n_bytes);
        CHECK(strata_gguf_read_tensor(f, t, 0, got, t->n_bytes) == 0 &&
                  memcmp(got, want, t->n_bytes) == 0,
              "read_tensor %s", spec->name);
        uint64_t off = t->n_bytes / 3, len = t->n_bytes / 2;
        memset(got, 0, t->n_bytes);
        CHECK(strata_gguf_read_tensor(f, t, off, got, len) == 0 && memcmp(got, want + off, len) == 0,
              "partial read_tensor %s", spec->name);
        const uint8_t *data = strata_gguf_tensor_data(f, t);
        CHECK(data && data == map + t->file_offset && memcmp(data, want, t->n_bytes) == 0 &&
                  (uintptr_t)data % alignment == 0,
              "tensor_data %s", spec->name);
        free(want);
        free(got);
    }
}

static void test_roundtrip(uint32_t alignment)
{
    int before = g_failures;
    const char *path = tmp_path("roundtrip.gguf");
    int rc = write_roundtrip(path, alignment, N_TENSORS);
    CHECK(rc == 0, "write: %s", strata_last_error());
    struct strata_gguf_file *f = NULL;
    rc = strata_gguf_open(&f, path);
    CHECK(rc == 0 && f, "open: %s", strata_last_error());
    if (f) {
        struct stat st;
        CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == f->file_size &&
                  f->file_size % alignment == 0,
              "file size %llu is padded to the alignment", (unsigned long long)f->file_size);
        CHECK(f->version == 3 && f->alignment == alignment, "version %u alignment %llu",
              f->version, (unsigned long long)f->alignment);
        // keys in insertion order; a replaced key keeps its first position
        CHECK(f->n_kv == 17 + N_ARRAYS + 4 + (alignment != GGUF_DEFAULT_ALIGNMENT), "n_kv %llu",
              (unsigned long long)f->n_kv);
        CHECK(f->n_kv > 5 && strcmp(f->kv[0].key.s, "general.architecture") == 0 &&
                  strcmp(f->kv[5].key.s, "s.replaced") == 0,
              "key order");
        uint32_t a = 0;
        CHECK((strata_gguf_get_u32(f, "general.alignment", &a) == 0) == (alignment != 32),
              "general.alignment is written only when not the default");
        check_scalars(f);
        check_arrays(f);
        check_tensors(f, alignment, N_TENSORS);
        strata_gguf_close(f);
    }
    char name[64];
    snprintf(name, sizeof name, "round trip (alignment %u)", alignment);
    case_result(name, before);
}

// ---- 2. broken files -------------------------------------------------------------------------

// The file must fail to open with a line naming the file and containing `word`.
static void expect_fail(const char *name, const struct bytes *b, const char *word)
{
    int before = g_failures;
    const char *path = tmp_path("broken.gguf");
    write_file(path, b->p, b->n);
    struct strata_gguf_file *f = (struct strata_gguf_file *)1;
    strata_log_set_sink(quiet_sink, NULL);
    int rc = strata_gguf_open(&f, path);
    strata_log_set_sink(NULL, NULL);
    const char *err = strata_last_error();
    CHECK(rc < 0 && f == NULL, "opened (rc %d)", rc);
    CHECK(strstr(err, path) != NULL, "message does not name the file: %s", err);
    CHECK(strstr(err, word) != NULL, "message lacks \"%s\": %s", word, err);
    if (rc == 0) strata_gguf_close(f);
    char label[128];
    snprintf(label, sizeof label, "reject %s", name);
    case_result(label, before);
    printf("       -> %s\n", err);
}

// A tiny valid file: two keys and one F32 tensor [8] at offset 0, followed by `extra`.
static void b_basic(struct bytes *b, uint32_t version)
{
    b->n = 0;
    b_header(b, version, 1, 2);
    b_kv_str(b, "general.architecture", "test");
    b_kv_u32(b, "a", 7);
    b_tensor(b, "w", 1, (const uint64_t[]){8}, STRATA_TYPE_F32, 0);
    b_pad(b, 32);
    b_zeros(b, 32);
}

// One F32 tensor with the given shape/type/offset after the header; `data` bytes of data.
static void b_one_tensor(struct bytes *b, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                         uint64_t offset, size_t data)
{
    b->n = 0;
    b_header(b, 3, 1, 0);
    b_tensor(b, "t", n_dims, ne, type, offset);
    b_pad(b, 32);
    b_zeros(b, data);
}

static void test_accepts(void)
{
    int before = g_failures;
    struct bytes b = {0};
    const char *path = tmp_path("valid.gguf");
    struct strata_gguf_file *f = NULL;
    for (uint32_t version = 2; version <= 3; version++) {
        b_basic(&b, version);
        write_file(path, b.p, b.n);
        int rc = strata_gguf_open(&f, path);
        CHECK(rc == 0 && f->version == version && f->n_tensors == 1 && f->data_offset % 32 == 0,
              "v%u: %s", version, strata_last_error());
        if (!rc) strata_gguf_close(f);
    }
    // No tensors and no padding after the metadata: valid (vocab-only files look like this).
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_kv_str(&b, "general.architecture", "x");
    write_file(path, b.p, b.n);
    int rc = strata_gguf_open(&f, path);
    CHECK(rc == 0 && f->n_tensors == 0, "no tensors: %s", strata_last_error());
    if (!rc) strata_gguf_close(f);
    free(b.p);
    case_result("accept hand-made v2, v3 and tensor-less files", before);
}

static void test_broken_headers(void)
{
    struct bytes b = {0};
    b_basic(&b, 3);
    memcpy(b.p, "GGML", 4);
    expect_fail("bad magic", &b, "magic");
    b.n = 3;
    expect_fail("file shorter than the magic", &b, "end of file");
    uint32_t versions[] = {1, 4, 0, 0x03000000};
    for (size_t i = 0; i < 4; i++) {
        b_basic(&b, versions[i]);
        char name[64];
        snprintf(name, sizeof name, "version %u", versions[i]);
        expect_fail(name, &b, "version");
    }
    const uint64_t huge[] = {1ull << 63, UINT64_MAX, 1ull << 40};
    for (size_t i = 0; i < 3; i++) {
        b_basic(&b, 3);
        memcpy(b.p + 16, &huge[i], 8);
        expect_fail("n_kv overflow", &b, "n_kv");
        b_basic(&b, 3);
        memcpy(b.p + 8, &huge[i], 8);
        expect_fail("n_tensors overflow", &b, "n_tensors");
    }
    free(b.p);
}

static void test_broken_metadata(void)
{
    struct bytes b = {0};
    const uint64_t huge[] = {1ull << 63, UINT64_MAX, 1ull << 60};
    for (size_t i = 0; i < 3; i++) {
        b_basic(&b, 3);
        memcpy(b.p + 24, &huge[i], 8);  // first key's length
        expect_fail("key length overflow", &b, "end of file");
        b.n = 0;  // string value length
        b_header(&b, 3, 0, 1);
        b_key(&b, "k", GGUF_TYPE_STRING);
        b_u64(&b, huge[i]);
        b_zeros(&b, 64);
        expect_fail("string value length overflow", &b, "end of file");
        uint32_t elem_types[] = {GGUF_TYPE_UINT32, GGUF_TYPE_UINT8, GGUF_TYPE_STRING,
                                 GGUF_TYPE_ARRAY};
        for (size_t e = 0; e < 4; e++) {
            b.n = 0;
            b_header(&b, 3, 0, 1);
            b_key(&b, "tokenizer.ggml.tokens", GGUF_TYPE_ARRAY);
            b_u32(&b, elem_types[e]);
            b_u64(&b, huge[i]);
            b_zeros(&b, 64);
            expect_fail("array count overflow", &b, "overflow");
        }
    }
    b.n = 0;
    b_header(&b, 3, 0, 2);
    b_kv_u32(&b, "same", 1);
    b_kv_u32(&b, "same", 2);
    expect_fail("duplicate key", &b, "duplicate");
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_kv_u32(&b, "", 1);
    expect_fail("empty key", &b, "empty");
    uint32_t bad_types[] = {GGUF_TYPE_COUNT, 0xffffffffu};
    for (size_t i = 0; i < 2; i++) {
        b.n = 0;
        b_header(&b, 3, 0, 1);
        b_key(&b, "k", bad_types[i]);
        b_zeros(&b, 16);
        expect_fail("unknown value type", &b, "type");
        b.n = 0;
        b_header(&b, 3, 0, 1);
        b_key(&b, "k", GGUF_TYPE_ARRAY);
        b_u32(&b, bad_types[i]);
        b_u64(&b, 1);
        b_zeros(&b, 16);
        expect_fail("unknown array element type", &b, "type");
    }
    b.n = 0;  // arrays of arrays nested 9 deep
    b_header(&b, 3, 0, 1);
    b_key(&b, "deep", GGUF_TYPE_ARRAY);
    for (int d = 0; d < 9; d++) {
        b_u32(&b, GGUF_TYPE_ARRAY);
        b_u64(&b, 1);
    }
    b_zeros(&b, 64);
    expect_fail("arrays nested too deep", &b, "nest");
    uint32_t bad_alignment[] = {0, 3, 48};
    for (size_t i = 0; i < 3; i++) {
        b.n = 0;
        b_header(&b, 3, 0, 1);
        b_kv_u32(&b, "general.alignment", bad_alignment[i]);
        expect_fail("bad alignment value", &b, "alignment");
    }
    b.n = 0;
    b_header(&b, 3, 0, 1);
    b_key(&b, "general.alignment", GGUF_TYPE_UINT64);
    b_u64(&b, 32);
    expect_fail("alignment of type u64", &b, "alignment");
    free(b.p);
}

static void test_broken_tensors(void)
{
    struct bytes b = {0};
    const uint64_t ne8[] = {8};
    b_one_tensor(&b, 1, ne8, STRATA_TYPE_F32, 0, 16);
    expect_fail("tensor data past the end", &b, "ends at");
    b_one_tensor(&b, 1, ne8, STRATA_TYPE_F32, 1024, 32);
    expect_fail("tensor offset past the end", &b, "ends at");
    b_one_tensor(&b, 1, ne8, STRATA_TYPE_F32, UINT64_MAX - 31, 32);
    expect_fail("tensor offset overflowing", &b, "overflows");
    b_one_tensor(&b, 1, ne8, STRATA_TYPE_F32, 4, 64);
    expect_fail("misaligned tensor offset", &b, "misaligned");
    uint32_t bad_types[] = {4, 5, 31, 36, 40, 200, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        b_one_tensor(&b, 1, ne8, bad_types[i], 0, 64);
        expect_fail("unknown tensor type", &b, "type");
    }
    b_one_tensor(&b, 5, (const uint64_t[]){1, 1, 1, 1, 8}, STRATA_TYPE_F32, 0, 64);
    expect_fail("n_dims 5", &b, "n_dims");
    b_one_tensor(&b, 0, ne8, STRATA_TYPE_F32, 0, 64);
    expect_fail("n_dims 0", &b, "n_dims");
    b_one_tensor(&b, 2, (const uint64_t[]){1ull << 32, 1ull << 32}, STRATA_TYPE_F32, 0, 64);
    expect_fail("element count overflow", &b, "overflow");
    b_one_tensor(&b, 2, (const uint64_t[]){1ull << 62, 2}, STRATA_TYPE_I8, 0, 64);
    expect_fail("element count past 2^63", &b, "overflow");
    b_one_tensor(&b, 1, (const uint64_t[]){1ull << 62}, STRATA_TYPE_F32, 0, 64);
    expect_fail("byte size overflow", &b, "overflow");
    b_one_tensor(&b, 1, (const uint64_t[]){1ull << 63}, STRATA_TYPE_F32, 0, 64);
    expect_fail("ne >= 2^63", &b, "ne[0]");
    b_one_tensor(&b, 2, (const uint64_t[]){8, 0}, STRATA_TYPE_F32, 0, 64);
    expect_fail("ne of 0", &b, "ne[1]");
    b_one_tensor(&b, 1, (const uint64_t[]){100}, STRATA_TYPE_Q4_K, 0, 4096);
    expect_fail("ne[0] not a multiple of the block size", &b, "block size");
    b.n = 0;  // tensor name length
    b_header(&b, 3, 1, 0);
    b_u64(&b, 1ull << 63);
    b_zeros(&b, 64);
    expect_fail("tensor name length overflow", &b, "end of file");
    b.n = 0;
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "w", 1, ne8, STRATA_TYPE_F32, 0);
    b_tensor(&b, "w", 1, ne8, STRATA_TYPE_F32, 32);
    b_pad(&b, 32);
    b_zeros(&b, 64);
    expect_fail("duplicate tensor names", &b, "duplicate");
    b.n = 0;
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "a", 1, (const uint64_t[]){16}, STRATA_TYPE_F32, 0);
    b_tensor(&b, "b", 1, ne8, STRATA_TYPE_F32, 32);
    b_pad(&b, 32);
    b_zeros(&b, 128);
    expect_fail("overlapping tensors", &b, "overlap");
    free(b.p);
}

static void read_whole(const char *path, struct bytes *b)
{
    FILE *fp = fopen(path, "rb");
    uint8_t chunk[4096];
    size_t n;
    b->n = 0;
    while (fp && (n = fread(chunk, 1, sizeof chunk, fp)) > 0) b_put(b, chunk, n);
    if (fp) fclose(fp);
}

// The small valid file for truncation and fuzzing: every kind of metadata, two tensors, and
// a last tensor whose size is a multiple of the alignment so no prefix is a valid file.
static void write_small(const char *path)
{
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    int rc = strata_gguf_writer_set_str(w, "general.architecture", "tiny");
    rc |= strata_gguf_writer_set_u32(w, "n", 3);
    rc |= strata_gguf_writer_set_f32(w, "eps", 1e-5f);
    rc |= strata_gguf_writer_set_bool(w, "flag", true);
    rc |= strata_gguf_writer_set_arr_str(w, "tokens", strs, 4);
    rc |= strata_gguf_writer_set_arr(w, "scores", GGUF_TYPE_FLOAT32, f32s, 3);
    struct strata_gguf_value two, three, inner[3], mid[2], leaf;
    nested_values(&two, &three, inner, mid, &leaf);
    rc |= strata_gguf_writer_set_value(w, "nested", &three);
    rc |= strata_gguf_writer_add_tensor(w, "a", STRATA_TYPE_F16, 1, (const uint64_t[]){6}) < 0;
    rc |= strata_gguf_writer_add_tensor(w, "b", STRATA_TYPE_F32, 2, (const uint64_t[]){4, 2}) < 0;
    rc |= strata_gguf_writer_open(w, path);
    uint8_t data[32];
    fill(data, sizeof data, 7);
    rc |= strata_gguf_writer_tensor_begin(w, 0) | strata_gguf_writer_write(w, data, 12);
    rc |= strata_gguf_writer_tensor_begin(w, 1) | strata_gguf_writer_write(w, data, 32);
    rc |= strata_gguf_writer_finish(w);
    strata_gguf_writer_free(w);
    CHECK(rc == 0, "writing the small file: %s", strata_last_error());
}

static void test_truncation(void)
{
    int before = g_failures;
    const char *path = tmp_path("truncated.gguf");
    write_small(path);
    struct bytes b = {0};
    read_whole(path, &b);
    struct strata_gguf_file *f = NULL;
    int rc = strata_gguf_open(&f, path);
    CHECK(rc == 0, "the full file opens: %s", strata_last_error());
    if (!rc) strata_gguf_close(f);
    strata_log_set_sink(quiet_sink, NULL);
    size_t opened = 0, unnamed = 0;
    for (size_t len = b.n; len-- > 0;) {
        if (truncate(path, (off_t)len) != 0) break;
        rc = strata_gguf_open(&f, path);
        if (rc == 0) {
            opened++;
            strata_gguf_close(f);
        } else if (!strstr(strata_last_error(), path) ||
                   !(strstr(strata_last_error(), "end of file") ||
                     strstr(strata_last_error(), "ends at"))) {
            if (!unnamed++) printf("    unexpected message at %zu bytes: %s\n", len,
                                   strata_last_error());
        }
    }
    strata_log_set_sink(NULL, NULL);
    CHECK(opened == 0, "%zu truncated files opened", opened);
    CHECK(unnamed == 0, "%zu truncations without an end-of-file message", unnamed);
    char name[96];
    snprintf(name, sizeof name, "truncation at each of %zu byte offsets", b.n);
    case_result(name, before);
    free(b.p);
}

// Touches everything an opened file exposes, so ASan sees any bad pointer or length.
static uint64_t walk(struct strata_gguf_file *f)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const struct strata_gguf_value *v = &f->kv[i].value;
        sum += strlen(f->kv[i].key.s) + v->type;
        if (v->type == GGUF_TYPE_ARRAY && v->arr.type == GGUF_TYPE_STRING)
            for (uint64_t j = 0; j < v->arr.n; j++)
                sum += strlen(((const struct strata_gguf_str *)v->arr.items)[j].s);
    }
    const uint8_t *map = strata_gguf_map(f);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct strata_gguf_tensor *t = &f->tensors[i];
        sum += strata_gguf_find_tensor(f, t->name) == t;
        if (t->n_bytes > 1u << 20) continue;
        uint8_t *buf = malloc(t->n_bytes);
        if (buf && strata_gguf_read_tensor(f, t, 0, buf, t->n_bytes) == 0) sum += buf[t->n_bytes - 1];
        free(buf);
        if (map) sum += map[t->file_offset + t->n_bytes - 1];
    }
    return sum;
}

static void test_fuzz(void)
{
    int before = g_failures;
    const char *src = tmp_path("fuzz_src.gguf"), *path = tmp_path("fuzz.gguf");
    write_small(src);
    struct bytes orig = {0}, b = {0};
    read_whole(src, &orig);
    uint64_t seed = 12345, sum = 0;
    int opened = 0, rejected = 0, silent = 0;
    const int iterations = 4000;
    strata_log_set_sink(quiet_sink, NULL);
    for (int it = 0; it < iterations; it++) {
        b.n = 0;
        b_put(&b, orig.p, orig.n);
        int flips = 1 + (int)(rng_next(&seed) % 4);
        for (int k = 0; k < flips; k++) {
            uint64_t r = rng_next(&seed);
            size_t pos = (size_t)(r % b.n);
            if (it % 3 == 0) pos %= 160;  // favour the header, where the counts live
            if (r >> 62 == 0)
                b.p[pos] = 0xff;  // saturate: huge counts and lengths
            else
                b.p[pos] ^= (uint8_t)(1u << (r >> 32 & 7));
        }
        write_file(path, b.p, b.n);
        struct strata_gguf_file *f = NULL;
        int rc = strata_gguf_open(&f, path);
        if (rc == 0) {
            opened++;
            sum += walk(f);
            strata_gguf_close(f);
        } else {
            rejected++;
            silent += strata_last_error()[0] == '\0';
        }
    }
    strata_log_set_sink(NULL, NULL);
    CHECK(silent == 0, "%d failures without a message", silent);
    char name[128];
    snprintf(name, sizeof name, "fuzz: %d byte-flipped files, %d opened, %d rejected (sum %llu)",
             iterations, opened, rejected, (unsigned long long)(sum & 0xff));
    case_result(name, before);
    free(orig.p);
    free(b.p);
}

// ---- 3. typed getters and reads --------------------------------------------------------------

static void test_getters(void)
{
    int before = g_failures;
    const char *path = tmp_path("getters.gguf");
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    int rc = strata_gguf_writer_set_u8(w, "u8", 200);
    rc |= strata_gguf_writer_set_i8(w, "i8", -5);
    rc |= strata_gguf_writer_set_u64(w, "u64.big", 1ull << 40);
    rc |= strata_gguf_writer_set_u64(w, "u64.small", 7);
    rc |= strata_gguf_writer_set_u32(w, "u32.big", 4000000000u);
    rc |= strata_gguf_writer_set_i64(w, "i64.neg", -1);
    rc |= strata_gguf_writer_set_i64(w, "i64.min32", INT32_MIN);
    rc |= strata_gguf_writer_set_i64(w, "i64.below32", (int64_t)INT32_MIN - 1);
    rc |= strata_gguf_writer_set_u64(w, "u64.max32", INT32_MAX);
    rc |= strata_gguf_writer_set_f32(w, "f32", 0.25f);
    rc |= strata_gguf_writer_set_f64(w, "f64", 0.5);
    rc |= strata_gguf_writer_set_f64(w, "f64.huge", 1e300);
    rc |= strata_gguf_writer_set_f64(w, "f64.inf", INFINITY);
    rc |= strata_gguf_writer_set_bool(w, "bool", true);
    rc |= strata_gguf_writer_set_str(w, "str", "s");
    rc |= strata_gguf_writer_set_arr(w, "arr", GGUF_TYPE_INT32, i32s, 3);
    rc |= strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_F32, 1, (const uint64_t[]){4}) < 0;
    rc |= strata_gguf_writer_open(w, path);
    rc |= strata_gguf_writer_tensor_begin(w, 0) | strata_gguf_writer_write(w, f32s, 12);
    rc |= strata_gguf_writer_write(w, f32s, 4) | strata_gguf_writer_finish(w);
    strata_gguf_writer_free(w);
    CHECK(rc == 0, "write: %s", strata_last_error());
    struct strata_gguf_file *f = NULL;
    if (strata_gguf_open(&f, path) != 0) {
        CHECK(0, "open: %s", strata_last_error());
        case_result("typed getters", before);
        return;
    }
    uint32_t u32;
    uint64_t u64;
    int32_t i32;
    float f32;
    bool b;
    const char *s;
    const void *items;
    uint64_t n;
    strata_log_set_sink(quiet_sink, NULL);
#define OK(call, cond) CHECK((call) == 0 && (cond), "%s: %s", #call, strata_last_error())
#define BAD(call, word)                                                                    \
    CHECK((call) == STRATA_EFORMAT && strstr(strata_last_error(), word), "%s -> %s", #call, \
          strata_last_error())
    OK(strata_gguf_get_u32(f, "u8", &u32), u32 == 200);
    OK(strata_gguf_get_u32(f, "u64.small", &u32), u32 == 7);
    OK(strata_gguf_get_u32(f, "u32.big", &u32), u32 == 4000000000u);
    BAD(strata_gguf_get_u32(f, "i8", &u32), "-5");
    BAD(strata_gguf_get_u32(f, "u64.big", &u32), "fit");
    BAD(strata_gguf_get_u32(f, "f32", &u32), "type");
    BAD(strata_gguf_get_u32(f, "str", &u32), "type");
    BAD(strata_gguf_get_u32(f, "bool", &u32), "type");
    OK(strata_gguf_get_u64(f, "u64.big", &u64), u64 == 1ull << 40);
    OK(strata_gguf_get_u64(f, "u8", &u64), u64 == 200);
    BAD(strata_gguf_get_u64(f, "i64.neg", &u64), "fit");
    OK(strata_gguf_get_i32(f, "i8", &i32), i32 == -5);
    OK(strata_gguf_get_i32(f, "i64.min32", &i32), i32 == INT32_MIN);
    OK(strata_gguf_get_i32(f, "u64.max32", &i32), i32 == INT32_MAX);
    BAD(strata_gguf_get_i32(f, "i64.below32", &i32), "fit");
    BAD(strata_gguf_get_i32(f, "u32.big", &i32), "fit");
    OK(strata_gguf_get_f32(f, "f32", &f32), f32 == 0.25f);
    OK(strata_gguf_get_f32(f, "f64", &f32), f32 == 0.5f);
    OK(strata_gguf_get_f32(f, "f64.inf", &f32), isinf(f32));
    BAD(strata_gguf_get_f32(f, "f64.huge", &f32), "fit");
    BAD(strata_gguf_get_f32(f, "u8", &f32), "type");
    OK(strata_gguf_get_bool(f, "bool", &b), b);
    BAD(strata_gguf_get_bool(f, "u8", &b), "type");
    OK(strata_gguf_get_str(f, "str", &s), strcmp(s, "s") == 0);
    BAD(strata_gguf_get_str(f, "arr", &s), "type");
    OK(strata_gguf_get_arr(f, "arr", GGUF_TYPE_INT32, &items, &n), n == 3);
    BAD(strata_gguf_get_arr(f, "arr", GGUF_TYPE_UINT32, &items, &n), "array");
    BAD(strata_gguf_get_arr(f, "str", GGUF_TYPE_STRING, &items, &n), "array");
    // absent: -ENOENT and no new error line
    strata_log_error("marker");
    CHECK(strata_gguf_get_u32(f, "missing", &u32) == -ENOENT &&
              strata_gguf_get_str(f, "missing", &s) == -ENOENT &&
              strata_gguf_get_arr(f, "missing", GGUF_TYPE_UINT8, &items, &n) == -ENOENT &&
              strcmp(strata_last_error(), "marker") == 0,
          "absent keys");
    CHECK(!strata_gguf_find_kv(f, "missing") && !strata_gguf_find_tensor(f, "missing") &&
              strata_gguf_find_tensor(f, "t") == &f->tensors[0],
          "find");
    const struct strata_gguf_tensor *t = &f->tensors[0];
    uint8_t buf[32];
    CHECK(strata_gguf_read_tensor(f, t, 8, buf, 9) == STRATA_EARG && strstr(strata_last_error(), "'t'"),
          "read past the tensor: %s", strata_last_error());
    CHECK(strata_gguf_read_tensor(f, t, UINT64_MAX, buf, 2) == STRATA_EARG, "offset overflow");
    CHECK(strata_gguf_read_tensor(f, t, 16, buf, 0) == 0, "empty read at the end");
    CHECK(strata_gguf_pread(f, f->file_size - 4, buf, 5) == STRATA_EARG &&
              strata_gguf_pread(f, UINT64_MAX - 1, buf, 4) == STRATA_EARG &&
              strata_gguf_pread(f, f->file_size - 4, buf, 4) == 0,
          "pread bounds");
    strata_log_set_sink(NULL, NULL);
#undef OK
#undef BAD
    strata_gguf_close(f);
    case_result("typed getters, lookups and read bounds", before);
}

// ---- 4. writer misuse and write errors -------------------------------------------------------

static void test_writer_errors(void)
{
    int before = g_failures;
    const uint64_t ne[] = {32};
    strata_log_set_sink(quiet_sink, NULL);
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    CHECK(strata_gguf_writer_write(w, "x", 1) == STRATA_EARG, "write before open");
    CHECK(strata_gguf_writer_set_alignment(w, 3) == STRATA_EARG, "alignment 3");
    CHECK(strata_gguf_writer_set_alignment(w, 0) == STRATA_EARG, "alignment 0");
    CHECK(strata_gguf_writer_set_u64(w, "general.alignment", 64) == STRATA_EARG, "u64 alignment key");
    CHECK(strata_gguf_writer_set_u32(w, "general.alignment", 48) == STRATA_EARG, "alignment key 48");
    CHECK(strata_gguf_writer_set_u32(w, "", 1) == STRATA_EARG, "empty key");
    CHECK(strata_gguf_writer_set_arr(w, "k", GGUF_TYPE_STRING, strs, 1) == STRATA_EARG, "arr of str");
    struct strata_gguf_value bad = {.type = GGUF_TYPE_COUNT};
    CHECK(strata_gguf_writer_set_value(w, "k", &bad) == STRATA_EARG, "bad value type");
    struct strata_gguf_value chain[10];  // 10 nested levels, one past the limit
    for (int d = 0; d < 10; d++)
        chain[d] = (struct strata_gguf_value){.type = GGUF_TYPE_ARRAY,
                                       .arr = {d < 9 ? GGUF_TYPE_ARRAY : GGUF_TYPE_UINT8,
                                               d < 9 ? 1 : 0, d < 9 ? &chain[d + 1] : NULL}};
    CHECK(strata_gguf_writer_set_value(w, "deep", &chain[0]) == STRATA_EARG, "too deep");
    CHECK(strata_gguf_writer_set_value(w, "deep8", &chain[2]) == 0, "8 levels: %s", strata_last_error());
    CHECK(strata_gguf_writer_add_tensor(w, "t", 4, 1, ne) == STRATA_EARG, "retired type");
    CHECK(strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_F32, 5, ne) == STRATA_EARG, "n_dims 5");
    CHECK(strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_Q4_K, 1, ne) == STRATA_EARG, "block size");
    const uint64_t ne_overflow[] = {1ull << 40, 1ull << 40};
    CHECK(strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_F32, 2, ne_overflow) == STRATA_EARG,
          "element overflow");
    CHECK(strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_F32, 1, (const uint64_t[]){1ull << 62}) ==
              STRATA_EARG,
          "byte size overflow");
    char long_name[65];
    memset(long_name, 'x', 64);
    long_name[64] = '\0';
    CHECK(strata_gguf_writer_add_tensor(w, long_name, STRATA_TYPE_F32, 1, ne) == STRATA_EARG,
          "64-byte name");
    CHECK(strata_gguf_writer_add_tensor(w, "t0", STRATA_TYPE_F32, 1, ne) == 0, "t0");
    CHECK(strata_gguf_writer_add_tensor(w, "t0", STRATA_TYPE_F32, 1, ne) == STRATA_EARG, "dup");
    CHECK(strata_gguf_writer_add_tensor(w, "t1", STRATA_TYPE_F32, 1, ne) == 1, "t1");
    CHECK(strata_gguf_writer_add_tensor(w, "t2", STRATA_TYPE_F32, 1, ne) == 2, "t2");
    CHECK(strata_gguf_writer_tensor_bytes(w, 1) == 128 && strata_gguf_writer_tensor_bytes(w, 3) == 0, "bytes");
    CHECK(strata_gguf_writer_open(w, tmp_path("nodir/x.gguf")) == -ENOENT, "open in a missing dir");
    const char *path = tmp_path("misuse.gguf");
    CHECK(strata_gguf_writer_open(w, path) == 0, "open: %s", strata_last_error());
    CHECK(strata_gguf_writer_set_u32(w, "late", 1) == STRATA_EARG, "set after open");
    CHECK(strata_gguf_writer_add_tensor(w, "late", STRATA_TYPE_F32, 1, ne) == STRATA_EARG,
          "add after open");
    CHECK(strata_gguf_writer_write(w, "x", 1) == STRATA_EARG, "write before begin");
    CHECK(strata_gguf_writer_tensor_begin(w, 1) == STRATA_EARG, "out of order");
    uint8_t data[256] = {0};
    CHECK(strata_gguf_writer_tensor_begin(w, 0) == 0 && strata_gguf_writer_write(w, data, 100) == 0, "t0 part");
    CHECK(strata_gguf_writer_tensor_begin(w, 1) == STRATA_EARG &&
              strstr(strata_last_error(), "100 of its 128"),
          "begin with previous incomplete: %s", strata_last_error());
    CHECK(strata_gguf_writer_write(w, data, 29) == STRATA_EARG, "too many bytes");
    CHECK(strata_gguf_writer_finish(w) == STRATA_EARG, "finish incomplete");
    CHECK(strata_gguf_writer_write(w, data, 28) == 0 && strata_gguf_writer_tensor_begin(w, 1) == 0 &&
              strata_gguf_writer_write(w, data, 128) == 0,
          "t0, t1");
    CHECK(strata_gguf_writer_finish(w) == STRATA_EARG && strstr(strata_last_error(), "'t2'"),
          "finish with a tensor missing: %s", strata_last_error());
    CHECK(strata_gguf_writer_tensor_begin(w, 2) == 0 && strata_gguf_writer_write(w, data, 128) == 0 &&
              strata_gguf_writer_tensor_begin(w, 3) == STRATA_EARG && strata_gguf_writer_finish(w) == 0,
          "complete: %s", strata_last_error());
    CHECK(strata_gguf_writer_finish(w) == STRATA_EARG, "finish twice");
    strata_gguf_writer_free(w);
    struct strata_gguf_file *f = NULL;
    CHECK(strata_gguf_open(&f, path) == 0 && f->n_tensors == 3, "misuse file opens: %s",
          strata_last_error());
    if (f) strata_gguf_close(f);
    strata_gguf_writer_free(strata_gguf_writer_new());  // freeing an unused writer
    w = strata_gguf_writer_new();                // freeing a writer abandoned mid-tensor
    strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_F32, 1, ne);
    if (strata_gguf_writer_open(w, path) == 0) strata_gguf_writer_tensor_begin(w, 0);
    strata_gguf_writer_free(w);
    if (access("/dev/full", W_OK) == 0) {  // every write fails with ENOSPC
        w = strata_gguf_writer_new();
        strata_gguf_writer_set_str(w, "general.architecture", "x");
        strata_gguf_writer_add_tensor(w, "t", STRATA_TYPE_F32, 1, (const uint64_t[]){1 << 22});
        static uint8_t big[1 << 24];
        int rc = strata_gguf_writer_open(w, "/dev/full");
        if (!rc) rc = strata_gguf_writer_tensor_begin(w, 0);
        if (!rc) rc = strata_gguf_writer_write(w, big, sizeof big);
        if (!rc) rc = strata_gguf_writer_finish(w);
        CHECK(rc == -ENOSPC && strstr(strata_last_error(), "/dev/full") &&
                  strstr(strata_last_error(), "No space"),
              "ENOSPC: rc %d %s", rc, strata_last_error());
        printf("       -> %s\n", strata_last_error());
        CHECK(strata_gguf_writer_finish(w) == -ENOSPC, "error is sticky");
        strata_gguf_writer_free(w);
    }
    strata_log_set_sink(NULL, NULL);
    case_result("writer misuse and write errors", before);
}

// ---- 5. open time at real-model metadata sizes -----------------------------------------------

static void test_open_speed(void)
{
    int before = g_failures;
    const char *path = tmp_path("speed.gguf");
    enum { N_VOCAB = 151936, N_TENSORS_BIG = 2000 };
    char **tokens = malloc(N_VOCAB * sizeof *tokens);
    char *text = malloc(N_VOCAB * 24);
    int32_t *types = malloc(N_VOCAB * sizeof *types);
    for (int i = 0; i < N_VOCAB; i++) {
        tokens[i] = text + (size_t)i * 24;
        snprintf(tokens[i], 24, "tok%d_%x", i, i * 2654435761u);
        types[i] = 1;
    }
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    const char *const *token_list = (const char *const *)tokens;
    int rc = strata_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", token_list, N_VOCAB);
    rc |= strata_gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", token_list, N_VOCAB);
    rc |= strata_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, N_VOCAB);
    char name[64];
    for (int i = 0; i < N_TENSORS_BIG; i++) {
        snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", i);
        rc |= strata_gguf_writer_add_tensor(w, name, STRATA_TYPE_Q8_0, 1, (const uint64_t[]){32}) < 0;
    }
    rc |= strata_gguf_writer_open(w, path);
    uint8_t block[34] = {0};
    for (int i = 0; i < N_TENSORS_BIG && !rc; i++)
        rc = strata_gguf_writer_tensor_begin(w, i) | strata_gguf_writer_write(w, block, sizeof block);
    if (!rc) rc = strata_gguf_writer_finish(w);
    strata_gguf_writer_free(w);
    CHECK(rc == 0, "write: %s", strata_last_error());
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct strata_gguf_file *f = NULL;
    rc = strata_gguf_open(&f, path);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    CHECK(rc == 0, "open: %s", strata_last_error());
    if (!rc) {
        int found = 0;
        for (int i = 0; i < N_TENSORS_BIG; i++) {
            snprintf(name, sizeof name, "blk.%d.ffn_up_exps.weight", i);
            const struct strata_gguf_tensor *t = strata_gguf_find_tensor(f, name);
            found += t && strcmp(t->name, name) == 0;
        }
        const void *items;
        uint64_t n;
        CHECK(found == N_TENSORS_BIG, "found %d tensors", found);
        CHECK(strata_gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &items, &n) == 0 &&
                  n == N_VOCAB &&
                  strcmp(((const struct strata_gguf_str *)items)[N_VOCAB - 1].s, tokens[N_VOCAB - 1]) == 0,
              "tokens");
        strata_gguf_close(f);
    }
    CHECK(ms < 1500, "open took %.1f ms", ms);  // a few ms normally; generous for ASan
    free(tokens);
    free(text);
    free(types);
    char label[128];
    snprintf(label, sizeof label, "open of 2x%d-string arrays and %d tensors: %.1f ms", N_VOCAB,
             N_TENSORS_BIG, ms);
    case_result(label, before);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/strata_gguf_XXXXXX");
    if (!mkdtemp(g_dir)) {
        printf("test_gguf: mkdtemp failed: %s\n", strerror(errno));
        return 1;
    }
    struct strata_gguf_file *f = NULL;
    strata_log_set_sink(quiet_sink, NULL);
    int rc = strata_gguf_open(&f, tmp_path("does-not-exist.gguf"));
    strata_log_set_sink(NULL, NULL);
    int before = g_failures;
    CHECK(rc == -ENOENT && f == NULL, "missing file: rc %d", rc);
    case_result("missing file gives -ENOENT", before);
    test_roundtrip(GGUF_DEFAULT_ALIGNMENT);
    test_roundtrip(64);
    test_roundtrip(4096);
    test_accepts();
    test_broken_headers();
    test_broken_metadata();
    test_broken_tensors();
    test_truncation();
    test_fuzz();
    test_getters();
    test_writer_errors();
    test_open_speed();
    const char *names[] = {"roundtrip.gguf", "broken.gguf", "valid.gguf", "truncated.gguf",
                           "fuzz_src.gguf", "fuzz.gguf", "getters.gguf", "misuse.gguf",
                           "speed.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) unlink(tmp_path(names[i]));
    if (rmdir(g_dir) != 0) printf("test_gguf: could not remove %s: %s\n", g_dir, strerror(errno));
    printf("%s: %d check(s) failed\n", g_failures ? "FAIL" : "PASS", g_failures);
    return g_failures ? 1 : 0;
}
