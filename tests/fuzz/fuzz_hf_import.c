// libFuzzer harness: importing a Hugging Face tokenizer.json (and a tokenizer_config.json or
// Jinja chat template), writing the GGUF metadata, reading it back and tokenizing with it.
// Input: the tokenizer.json bytes, then optionally the byte 0xFF and the config's bytes.
#include "fuzz_util.h"

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sep = memchr(data, 0xFF, size);
    size_t json_len = sep ? (size_t)(sep - data) : size;
    char json_path[64], config_path[64], gguf_path[64];
    int json_fd = fz_memfile(data, json_len, json_path, sizeof json_path);
    int config_fd = -1;
    if (sep) {
        config_fd = fz_memfile(sep + 1, size - json_len - 1, config_path, sizeof config_path);
    }
    int gguf_fd = fz_memfile(NULL, 0, gguf_path, sizeof gguf_path);
    struct strata_gguf_writer *w = strata_gguf_writer_new();
    uint32_t n_vocab = 0;
    int rc = strata_tokenizer_import_hf(w, json_path, sep ? config_path : NULL, &n_vocab);
    if (rc == 0) rc = strata_gguf_writer_open(w, gguf_path);
    if (rc == 0) rc = strata_gguf_writer_finish(w);
    strata_gguf_writer_free(w);
    struct strata_gguf_file *f = NULL;
    struct strata_tokenizer *t = NULL;
    if (rc == 0 && strata_gguf_open(&f, gguf_path) == 0 && strata_tokenizer_load(&t, f) == 0) {
        if (strata_tokenizer_get_info(t)->n_vocab != n_vocab) abort();
        static const char text[] = "<|im_start|>user\nHello world, 123!<|im_end|> \xe4\xb8\xad\xf0\x9f\x98\x80";
        int32_t ids[3 * sizeof text];
        size_t n = 0;
        (void)strata_tokenizer_encode(t, text, sizeof text - 1, true, ids, 3 * sizeof text, &n);
        const char *tmpl = NULL;
        if (strata_gguf_get_str(f, "tokenizer.chat_template", &tmpl) == 0) {
            struct strata_chat_msg msgs[] = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}};
            char *out = NULL;
            if (strata_chat_render(tmpl, msgs, 3, true, &out) == 0) free(out);
        }
        strata_tokenizer_free(t);
    }
    strata_gguf_close(f);
    close(gguf_fd);
    if (config_fd >= 0) close(config_fd);
    close(json_fd);
    return 0;
}
