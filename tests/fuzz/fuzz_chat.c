// libFuzzer harness: the chat formats (every built-in family, with and without tools) and the
// tool-call parsers of generated text (Qwen3 <tool_call> JSON, GLM-4.5 <arg_key>/<arg_value>).
// Input: one mode byte, then fields separated by the byte 0xFF.
//   mode % 3 == 0: parse tool calls. Fields: tools JSON, generated text (not NUL-terminated).
//   mode % 3 == 1: render with tools. Fields: tools JSON, then per turn role, content and its
//                  calls (name 0xFE arguments 0xFE name ...). The template is picked by mode.
//   mode % 3 == 2: render without tools, same turns; the first field is the template text.
#include "fuzz_util.h"

#include "tokenizer/tokenizer.h"

static const char *const TEMPLATES[] = {
    "{{ '<|im_start|>' }}<tools></tools><tool_call></tool_call>",  // Qwen3 with tools
    "[gMASK]<sop><tool_call><arg_key></arg_key><arg_value>",        // GLM-4.5 with tools
    "chatml", "chatglm3", "chatglm4", "glmedge", "llama3", "deepseek2", "deepseek3", "gpt-oss",
    "kimi-k2", NULL,
};
#define N_TEMPLATES (sizeof TEMPLATES / sizeof TEMPLATES[0])
#define MAX_TURNS 8
#define MAX_CALLS 4

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_quiet();
    return 0;
}

static void parse(enum strata_tool_format fmt, struct fz_fields *f)
{
    char *tools = fz_next(f);
    size_t len = (size_t)(f->end - f->p);
    char *text = fz_copy(f->p, len);
    char *content = NULL;
    struct strata_tool_call_out *calls = NULL;
    size_t n_calls = 0;
    if (strata_chat_parse_tools(fmt, text, len, *tools ? tools : NULL, &content, &calls, &n_calls) == 0) {
        if (strlen(content) > len) abort();
        for (size_t i = 0; i < n_calls; i++) {
            if (!calls[i].name || !calls[i].arguments || !*calls[i].name) abort();
        }
        // without calls the text comes back as written
        if (n_calls == 0 && !memchr(text, '\0', len) && (strlen(content) != len || memcmp(content, text, len))) {
            fprintf(stderr, "fuzz_chat: text without calls changed\n");
            abort();
        }
        free(content);
        strata_chat_tool_calls_free(calls, n_calls);
    }
    if (strata_chat_tool_safe_len(text, len) > len) abort();
    free(text);
    free(tools);
}

struct turns {
    struct strata_chat_turn t[MAX_TURNS];
    struct strata_chat_msg m[MAX_TURNS];
    struct strata_chat_tool_call calls[MAX_TURNS][MAX_CALLS];
    char *owned[MAX_TURNS * 3];
    size_t n, n_owned;
};

static void read_turns(struct turns *ts, struct fz_fields *f)
{
    while (ts->n < MAX_TURNS && f->p < f->end) {
        struct strata_chat_turn *t = &ts->t[ts->n];
        char *role = fz_next(f), *content = fz_next(f), *calls = fz_next(f);
        ts->owned[ts->n_owned++] = role;
        ts->owned[ts->n_owned++] = content;
        ts->owned[ts->n_owned++] = calls;
        t->role = role;
        t->content = content;
        t->tool_calls = ts->calls[ts->n];
        t->n_tool_calls = 0;
        // calls: name 0xFE arguments 0xFE ... cut in place
        char *p = calls;
        while (*p && t->n_tool_calls < MAX_CALLS) {
            char *name = p, *args = strchr(p, '\xFE');
            if (args) *args++ = '\0';
            else args = p + strlen(p);
            char *next = strchr(args, '\xFE');
            if (next) *next++ = '\0';
            else next = args + strlen(args);
            ts->calls[ts->n][t->n_tool_calls++] = (struct strata_chat_tool_call){name, args};
            p = next;
        }
        ts->m[ts->n] = (struct strata_chat_msg){role, content};
        ts->n++;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    uint8_t mode = data[0];
    struct fz_fields f = {data + 1, data + size};
    if (mode % 3 == 0) {
        parse((mode / 3) & 1 ? STRATA_TOOLS_GLM45 : STRATA_TOOLS_QWEN3, &f);
        return 0;
    }
    char *first = fz_next(&f);
    struct turns ts = {0};
    read_turns(&ts, &f);
    bool gen = (mode / 3) & 1;
    char *out = NULL;
    if (mode % 3 == 1) {
        const char *tmpl = TEMPLATES[(mode / 6) % N_TEMPLATES];
        (void)strata_chat_tool_format(tmpl);
        if (strata_chat_render_tools(tmpl, ts.t, ts.n, *first ? first : NULL, gen, &out) == 0) free(out);
    } else {
        (void)strata_chat_family(first);
        (void)strata_chat_tool_format(first);
        if (strata_chat_render(first, ts.m, ts.n, gen, &out) == 0) free(out);
        out = NULL;
        if (strata_chat_render_tools(first, ts.t, ts.n, NULL, gen, &out) == 0) free(out);
    }
    for (size_t i = 0; i < ts.n_owned; i++) free(ts.owned[i]);
    free(first);
    return 0;
}
