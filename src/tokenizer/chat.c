// Chat formatting without a Jinja interpreter, the way llama.cpp's llama_chat_apply_template
// does it: recognise the template family from marker strings in the template text (tested in
// llama.cpp's order, so that the same text picks the same family), then print the messages
// with a fixed formatter for that family. Families llama.cpp knows but strata does not format
// are still recognised, so that they are refused by name instead of being mistaken for another.
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/log.h"

enum chat_family {
    CHAT_UNKNOWN,
    CHAT_CHATML,
    CHAT_CHATGLM3,
    CHAT_CHATGLM4,
    CHAT_GLMEDGE,
    CHAT_LLAMA3,
    CHAT_DEEPSEEK2,
    CHAT_DEEPSEEK3,
    CHAT_UNSUPPORTED,  // known to llama.cpp, not implemented here
};

struct detected {
    enum chat_family family;
    const char *name;
};

struct strbuf {
    char *s;
    size_t len, cap;
    bool oom;
};

static void sb_put(struct strbuf *b, const char *s, size_t n)
{
    if (b->oom) {
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            cap *= 2;
        }
        char *p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void sb_add(struct strbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

// s without leading and trailing ASCII whitespace (as llama.cpp's trim()).
static void sb_add_trimmed(struct strbuf *b, const char *s)
{
    size_t start = 0, end = strlen(s);
    while (start < end && isspace((unsigned char)s[start])) {
        start++;
    }
    while (end > start && isspace((unsigned char)s[end - 1])) {
        end--;
    }
    sb_put(b, s + start, end - start);
}

static bool has(const char *tmpl, const char *marker)
{
    return strstr(tmpl, marker) != NULL;
}

static struct detected detect(const char *tmpl)
{
    static const struct detected by_name[] = {
        {CHAT_CHATML, "chatml"},       {CHAT_CHATGLM3, "chatglm3"},
        {CHAT_CHATGLM4, "chatglm4"},   {CHAT_GLMEDGE, "glmedge"},
        {CHAT_LLAMA3, "llama3"},       {CHAT_DEEPSEEK2, "deepseek2"},
        {CHAT_DEEPSEEK3, "deepseek3"},
    };
    for (size_t i = 0; i < sizeof(by_name) / sizeof(by_name[0]); i++) {
        if (strcmp(tmpl, by_name[i].name) == 0) {
            return by_name[i];
        }
    }
    if (has(tmpl, "<|im_start|>")) {
        if (has(tmpl, "<|im_sep|>")) {
            return (struct detected){CHAT_UNSUPPORTED, "phi4"};
        }
        if (has(tmpl, "<end_of_utterance>")) {
            return (struct detected){CHAT_UNSUPPORTED, "smolvlm"};
        }
        return (struct detected){CHAT_CHATML, "chatml"};
    }
    if (strncmp(tmpl, "mistral", 7) == 0 || has(tmpl, "[INST]")) {
        return (struct detected){CHAT_UNSUPPORTED, "mistral/llama2"};
    }
    if (has(tmpl, "<|assistant|>") && has(tmpl, "<|end|>")) {
        return (struct detected){CHAT_UNSUPPORTED, "phi3"};
    }
    if (has(tmpl, "[gMASK]<sop>")) {
        return (struct detected){CHAT_CHATGLM4, "chatglm4"};
    }
    if (has(tmpl, "<|assistant|>") && has(tmpl, "<|user|>")) {
        if (has(tmpl, "<|tool_declare|>")) {
            return (struct detected){CHAT_UNSUPPORTED, "exaone-moe"};
        }
        if (has(tmpl, "</s>")) {
            return (struct detected){CHAT_UNSUPPORTED, "falcon3"};
        }
        return (struct detected){CHAT_GLMEDGE, "glmedge"};
    }
    if (has(tmpl, "<|{{ item['role'] }}|>") && has(tmpl, "<|begin_of_image|>")) {
        return (struct detected){CHAT_GLMEDGE, "glmedge"};
    }
    static const struct {
        const char *a, *b;
        const char *name;
    } others[] = {
        {"<|user|>", "<|endoftext|>", "zephyr"},
        {"bos_token + message['role']", NULL, "monarch"},
        {"<start_of_turn>", NULL, "gemma"},
        {"'\\n\\nAssistant: ' + eos_token", NULL, "orion"},
        {"GPT4 Correct ", NULL, "openchat"},
        {"USER: ", "ASSISTANT: ", "vicuna"},
        {"### Instruction:", "<|EOT|>", "deepseek"},
        {"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "command-r"},
    };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        if (has(tmpl, others[i].a) && (!others[i].b || has(tmpl, others[i].b))) {
            return (struct detected){CHAT_UNSUPPORTED, others[i].name};
        }
    }
    if (has(tmpl, "<|start_header_id|>") && has(tmpl, "<|end_header_id|>")) {
        return (struct detected){CHAT_LLAMA3, "llama3"};
    }
    if (has(tmpl, "[gMASK]sop")) {
        return (struct detected){CHAT_CHATGLM3, "chatglm3"};
    }
    if (has(tmpl, "<用户>")) {
        return (struct detected){CHAT_UNSUPPORTED, "minicpm"};
    }
    if (has(tmpl, "'Assistant: ' + message['content'] + eos_token")) {
        return (struct detected){CHAT_DEEPSEEK2, "deepseek2"};
    }
    if (has(tmpl, "<｜Assistant｜>") && has(tmpl, "<｜User｜>") &&
        has(tmpl, "<｜end▁of▁sentence｜>")) {
        return (struct detected){CHAT_DEEPSEEK3, "deepseek3"};
    }
    return (struct detected){CHAT_UNKNOWN, "unknown"};
}

static void format_glm(struct strbuf *b, const struct strata_chat_msg *msgs, size_t n,
                       const char *sep)
{
    for (size_t i = 0; i < n; i++) {
        sb_add(b, "<|");
        sb_add(b, msgs[i].role);
        sb_add(b, "|>");
        sb_add(b, sep);
        sb_add(b, msgs[i].content);
    }
}

static void format_deepseek(struct strbuf *b, const struct strata_chat_msg *msgs, size_t n,
                            bool v3)
{
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (strcmp(role, "system") == 0) {
            sb_add(b, msgs[i].content);
            sb_add(b, "\n\n");
        } else if (strcmp(role, "user") == 0) {
            sb_add(b, v3 ? "<｜User｜>" : "User: ");
            sb_add(b, msgs[i].content);
            if (!v3) {
                sb_add(b, "\n\n");
            }
        } else if (strcmp(role, "assistant") == 0) {
            sb_add(b, v3 ? "<｜Assistant｜>" : "Assistant: ");
            sb_add(b, msgs[i].content);
            sb_add(b, "<｜end▁of▁sentence｜>");
        }
    }
}

const char *strata_chat_family(const char *template_text)
{
    return detect(template_text ? template_text : "chatml").name;
}

int strata_chat_apply(const char *template_text, const struct strata_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char **out)
{
    *out = NULL;
    struct detected d = detect(template_text ? template_text : "chatml");
    if (d.family == CHAT_UNKNOWN || d.family == CHAT_UNSUPPORTED) {
        strata_log_error("strata_chat_apply: chat template family '%s' is not supported "
                         "(supported: chatml, chatglm3, chatglm4, glmedge, llama3, deepseek2, "
                         "deepseek3)", d.name);
        return STRATA_EUNSUP;
    }
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            strata_log_error("strata_chat_apply: message %zu has no %s", i,
                             msgs[i].role ? "content" : "role");
            return STRATA_EARG;
        }
    }
    struct strbuf b = {NULL, 0, 0, false};
    sb_put(&b, "", 0);  // an empty conversation still yields a string
    switch (d.family) {
    case CHAT_CHATML:
        for (size_t i = 0; i < n; i++) {
            sb_add(&b, "<|im_start|>");
            sb_add(&b, msgs[i].role);
            sb_add(&b, "\n");
            sb_add(&b, msgs[i].content);
            sb_add(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt) {
            sb_add(&b, "<|im_start|>assistant\n");
        }
        break;
    case CHAT_CHATGLM3:
        sb_add(&b, "[gMASK]sop");
        format_glm(&b, msgs, n, "\n ");
        if (add_generation_prompt) {
            sb_add(&b, "<|assistant|>");
        }
        break;
    case CHAT_CHATGLM4:
        sb_add(&b, "[gMASK]<sop>");
        format_glm(&b, msgs, n, "\n");
        if (add_generation_prompt) {
            sb_add(&b, "<|assistant|>\n");
        }
        break;
    case CHAT_GLMEDGE:
        format_glm(&b, msgs, n, "\n");
        if (add_generation_prompt) {
            sb_add(&b, "<|assistant|>");
        }
        break;
    case CHAT_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            sb_add(&b, "<|start_header_id|>");
            sb_add(&b, msgs[i].role);
            sb_add(&b, "<|end_header_id|>\n\n");
            sb_add_trimmed(&b, msgs[i].content);
            sb_add(&b, "<|eot_id|>");
        }
        if (add_generation_prompt) {
            sb_add(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        }
        break;
    case CHAT_DEEPSEEK2:
        format_deepseek(&b, msgs, n, false);
        if (add_generation_prompt) {
            sb_add(&b, "Assistant:");
        }
        break;
    case CHAT_DEEPSEEK3:
        format_deepseek(&b, msgs, n, true);
        if (add_generation_prompt) {
            sb_add(&b, "<｜Assistant｜>");
        }
        break;
    default:
        break;
    }
    if (b.oom) {
        free(b.s);
        strata_log_error("strata_chat_apply: out of memory formatting %zu messages", n);
        return -ENOMEM;
    }
    *out = b.s;
    return 0;
}
