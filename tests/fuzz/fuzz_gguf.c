// libFuzzer harness: the GGUF reader (strata_gguf_open on arbitrary bytes), its typed getters,
// tensor reads by pread and through the mapping, and the tokenizer built from the metadata.
#include "fuzz_util.h"

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_quiet();
    return 0;
}

static void query(const struct strata_gguf_file *f)
{
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const char *key = f->kv[i].key.s;
        uint32_t u32;
        uint64_t u64;
        int32_t i32;
        float f32;
        bool b;
        const char *s;
        const void *items;
        uint64_t n;
        (void)strata_gguf_get_u32(f, key, &u32);
        (void)strata_gguf_get_u64(f, key, &u64);
        (void)strata_gguf_get_i32(f, key, &i32);
        (void)strata_gguf_get_f32(f, key, &f32);
        (void)strata_gguf_get_bool(f, key, &b);
        if (strata_gguf_get_str(f, key, &s) == 0) (void)strlen(s);
        for (int t = 0; t < GGUF_TYPE_COUNT; t++) {
            (void)strata_gguf_get_arr(f, key, (enum strata_gguf_type)t, &items, &n);
        }
        (void)strata_gguf_type_name(f->kv[i].value.type);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fz_memfile(data, size, path, sizeof path);
    struct strata_gguf_file *f = NULL;
    if (strata_gguf_open(&f, path) == 0) {
        query(f);
        uint8_t buf[64];
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const struct strata_gguf_tensor *t = &f->tensors[i];
            if (strata_gguf_find_tensor(f, t->name) == NULL) abort();
            uint64_t len = t->n_bytes < sizeof buf ? t->n_bytes : sizeof buf;
            (void)strata_gguf_read_tensor(f, t, 0, buf, len);
            (void)strata_gguf_read_tensor(f, t, t->n_bytes - len, buf, len);
            const uint8_t *p = strata_gguf_tensor_data(f, t);
            if (p && t->n_bytes) {
                volatile uint8_t x = p[0] ^ p[t->n_bytes - 1];
                (void)x;
            }
        }
        struct strata_tokenizer *tok = NULL;
        if (strata_tokenizer_load(&tok, f) == 0) {
            static const char text[] = "Hello, world! <|im_end|> 123 \xc3\xa9\xe4\xb8\xad \xf0\x9f\x98\x80\n\n  x";
            int32_t ids[3 * sizeof text];
            size_t n = 0;
            if (strata_tokenizer_encode(tok, text, sizeof text - 1, true, ids, 3 * sizeof text, &n) == 0) {
                struct strata_detok d;
                strata_detok_init(&d, true);
                char out[4096];
                size_t n_out;
                for (size_t i = 0; i < n; i++) {
                    (void)strata_detok_push(&d, tok, ids[i], out, sizeof out, &n_out);
                }
            }
            strata_tokenizer_free(tok);
        }
        strata_gguf_close(f);
    }
    close(fd);
    return 0;
}
