// Chat formatting without a Jinja interpreter, the way llama.cpp's llama_chat_apply_template
// does it: recognise the template family from marker strings in the template text (tested in
// llama.cpp's order, so that the same text picks the same family), then print the messages
// with a fixed formatter for that family. Families llama.cpp knows but strata does not format
// are still recognised, so that they are refused by name instead of being mistaken for another.
//
// Tool calling (strata_chat_render_tools, strata_chat_parse_tools): the two tool formats of the
// supported MoE families are written out the way their Jinja templates print them, byte for
// byte: Qwen3 (ChatML with <tools> in the system turn and <tool_call>{JSON}</tool_call> in the
// output) and GLM-4.5 (<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>).
// Tools and arguments are JSON; Jinja's tojson (Python's json.dumps: ", " and ": " separators,
// non-ASCII kept) is reproduced by dump_py.
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/log.h"
#include "util/strbuf.h"

enum chat_family {
    CHAT_UNKNOWN,
    CHAT_CHATML,
    CHAT_CHATGLM3,
    CHAT_CHATGLM4,
    CHAT_GLMEDGE,
    CHAT_LLAMA3,
    CHAT_DEEPSEEK2,
    CHAT_DEEPSEEK3,
    CHAT_HARMONY,      // gpt-oss (llama.cpp's "gpt-oss": the Harmony format without channels)
    CHAT_KIMI_K2,
    CHAT_UNSUPPORTED,  // known to llama.cpp, not implemented here
};

struct detected {
    enum chat_family family;
    const char *name;
};


// s without leading and trailing ASCII whitespace (as llama.cpp's trim()).
static void sb_add_trimmed(struct strata_strbuf *b, const char *s)
{
    size_t start = 0, end = strlen(s);
    while (start < end && isspace((unsigned char)s[start])) {
        start++;
    }
    while (end > start && isspace((unsigned char)s[end - 1])) {
        end--;
    }
    strata_strbuf_put(b, s + start, end - start);
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
        {CHAT_DEEPSEEK3, "deepseek3"}, {CHAT_HARMONY, "gpt-oss"},
        {CHAT_KIMI_K2, "kimi-k2"},
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
    // the families llama.cpp tests between deepseek3 and gpt-oss, so that their templates keep
    // their own names
    static const struct {
        const char *a, *b;
        const char *name;
    } later[] = {
        {"[|assistant|]", "[|endofturn|]", "exaone"},
        {"rwkv-world", NULL, "rwkv-world"},
        {"<|start_of_role|>", NULL, "granite"},
        {"message['role'] + additional_special_tokens[0]", NULL, "gigachat"},
        {"<|role_start|>", NULL, "megrez"},
        {" Ассистент:", NULL, "yandex"},
        {"<role>ASSISTANT</role>", NULL, "bailing"},
        {"<|header_start|>", "<|header_end|>", "llama4"},
        {"<|endofuserprompt|>", NULL, "dots1"},
        {"<|extra_0|>", "<|extra_4|>", "hunyuan-moe"},
    };
    for (size_t i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
        if (has(tmpl, later[i].a) && (!later[i].b || has(tmpl, later[i].b))) {
            return (struct detected){CHAT_UNSUPPORTED, later[i].name};
        }
    }
    if (has(tmpl, "<|start|>") && has(tmpl, "<|channel|>")) {
        return (struct detected){CHAT_HARMONY, "gpt-oss"};
    }
    if (has(tmpl, "<｜hy_Assistant｜>")) {
        return (struct detected){CHAT_UNSUPPORTED, "hunyuan"};
    }
    if (has(tmpl, "<|im_assistant|>assistant<|im_middle|>")) {
        return (struct detected){CHAT_KIMI_K2, "kimi-k2"};
    }
    return (struct detected){CHAT_UNKNOWN, "unknown"};
}

static void format_glm(struct strata_strbuf *b, const struct strata_chat_msg *msgs, size_t n,
                       const char *sep)
{
    for (size_t i = 0; i < n; i++) {
        strata_strbuf_puts(b, "<|");
        strata_strbuf_puts(b, msgs[i].role);
        strata_strbuf_puts(b, "|>");
        strata_strbuf_puts(b, sep);
        strata_strbuf_puts(b, msgs[i].content);
    }
}

static void format_deepseek(struct strata_strbuf *b, const struct strata_chat_msg *msgs, size_t n,
                            bool v3)
{
    for (size_t i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (strcmp(role, "system") == 0) {
            strata_strbuf_puts(b, msgs[i].content);
            strata_strbuf_puts(b, "\n\n");
        } else if (strcmp(role, "user") == 0) {
            strata_strbuf_puts(b, v3 ? "<｜User｜>" : "User: ");
            strata_strbuf_puts(b, msgs[i].content);
            if (!v3) {
                strata_strbuf_puts(b, "\n\n");
            }
        } else if (strcmp(role, "assistant") == 0) {
            strata_strbuf_puts(b, v3 ? "<｜Assistant｜>" : "Assistant: ");
            strata_strbuf_puts(b, msgs[i].content);
            strata_strbuf_puts(b, "<｜end▁of▁sentence｜>");
        }
    }
}

const char *strata_chat_family(const char *template_text)
{
    return detect(template_text ? template_text : "chatml").name;
}

int strata_chat_render(const char *template_text, const struct strata_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char **out)
{
    *out = NULL;
    struct detected d = detect(template_text ? template_text : "chatml");
    if (d.family == CHAT_UNKNOWN || d.family == CHAT_UNSUPPORTED) {
        strata_log_error("strata_chat_render: chat template family '%s' is not supported "
                         "(supported: chatml, chatglm3, chatglm4, glmedge, llama3, deepseek2, "
                         "deepseek3, gpt-oss, kimi-k2)", d.name);
        return STRATA_EUNSUP;
    }
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            strata_log_error("strata_chat_render: message %zu has no %s", i,
                             msgs[i].role ? "content" : "role");
            return STRATA_EARG;
        }
    }
    struct strata_strbuf b = {NULL, 0, 0, false};
    strata_strbuf_put(&b, "", 0);  // an empty conversation still yields a string
    switch (d.family) {
    case CHAT_CHATML:
        for (size_t i = 0; i < n; i++) {
            strata_strbuf_puts(&b, "<|im_start|>");
            strata_strbuf_puts(&b, msgs[i].role);
            strata_strbuf_puts(&b, "\n");
            strata_strbuf_puts(&b, msgs[i].content);
            strata_strbuf_puts(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|im_start|>assistant\n");
        }
        break;
    case CHAT_CHATGLM3:
        strata_strbuf_puts(&b, "[gMASK]sop");
        format_glm(&b, msgs, n, "\n ");
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|assistant|>");
        }
        break;
    case CHAT_CHATGLM4:
        strata_strbuf_puts(&b, "[gMASK]<sop>");
        format_glm(&b, msgs, n, "\n");
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|assistant|>\n");
        }
        break;
    case CHAT_GLMEDGE:
        format_glm(&b, msgs, n, "\n");
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|assistant|>");
        }
        break;
    case CHAT_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            strata_strbuf_puts(&b, "<|start_header_id|>");
            strata_strbuf_puts(&b, msgs[i].role);
            strata_strbuf_puts(&b, "<|end_header_id|>\n\n");
            sb_add_trimmed(&b, msgs[i].content);
            strata_strbuf_puts(&b, "<|eot_id|>");
        }
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        }
        break;
    case CHAT_DEEPSEEK2:
        format_deepseek(&b, msgs, n, false);
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "Assistant:");
        }
        break;
    case CHAT_DEEPSEEK3:
        format_deepseek(&b, msgs, n, true);
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<｜Assistant｜>");
        }
        break;
    case CHAT_HARMONY:
        // <|start|>ROLE<|message|>CONTENT<|end|>, an assistant turn closed by <|return|>
        for (size_t i = 0; i < n; i++) {
            strata_strbuf_puts(&b, "<|start|>");
            strata_strbuf_puts(&b, msgs[i].role);
            strata_strbuf_puts(&b, "<|message|>");
            strata_strbuf_puts(&b, msgs[i].content);
            strata_strbuf_puts(&b, strcmp(msgs[i].role, "assistant") == 0 ? "<|return|>" : "<|end|>");
        }
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|start|>assistant");
        }
        break;
    case CHAT_KIMI_K2:
        for (size_t i = 0; i < n; i++) {
            const char *role = msgs[i].role;
            strata_strbuf_puts(&b, strcmp(role, "system") == 0      ? "<|im_system|>system<|im_middle|>"
                       : strcmp(role, "user") == 0      ? "<|im_user|>user<|im_middle|>"
                       : strcmp(role, "assistant") == 0 ? "<|im_assistant|>assistant<|im_middle|>"
                       : strcmp(role, "tool") == 0      ? "<|im_system|>tool<|im_middle|>"
                                                        : "");
            strata_strbuf_puts(&b, msgs[i].content);
            strata_strbuf_puts(&b, "<|im_end|>");
        }
        if (add_generation_prompt) {
            strata_strbuf_puts(&b, "<|im_assistant|>assistant<|im_middle|>");
        }
        break;
    default:
        break;
    }
    if (b.oom) {
        free(b.s);
        strata_log_error("strata_chat_render: out of memory formatting %zu messages", n);
        return -ENOMEM;
    }
    *out = b.s;
    return 0;
}

// ---- tool calling ------------------------------------------------------------------------------

static const char TOOL_CALL_OPEN[] = "<tool_call>";
static const char TOOL_CALL_CLOSE[] = "</tool_call>";

enum strata_tool_format strata_chat_tool_format(const char *template_text)
{
    const char *t = template_text ? template_text : "chatml";
    struct detected d = detect(t);
    if (d.family == CHAT_CHATML && has(t, TOOL_CALL_OPEN) && has(t, "<tools>")) {
        return STRATA_TOOLS_QWEN3;
    }
    if (d.family == CHAT_CHATGLM4 && has(t, TOOL_CALL_OPEN) && has(t, "<arg_key>")) {
        return STRATA_TOOLS_GLM45;
    }
    return STRATA_TOOLS_NONE;
}

// Python's json.dumps(x, ensure_ascii=False): what Jinja's tojson prints in HF templates.
static void dump_py_string(struct strata_strbuf *b, const char *s)
{
    strata_strbuf_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        switch (*p) {
        case '"': strata_strbuf_puts(b, "\\\""); break;
        case '\\': strata_strbuf_puts(b, "\\\\"); break;
        case '\n': strata_strbuf_puts(b, "\\n"); break;
        case '\r': strata_strbuf_puts(b, "\\r"); break;
        case '\t': strata_strbuf_puts(b, "\\t"); break;
        case '\b': strata_strbuf_puts(b, "\\b"); break;
        case '\f': strata_strbuf_puts(b, "\\f"); break;
        default:
            if (*p < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *p);
                strata_strbuf_puts(b, esc);
            } else {
                strata_strbuf_put(b, (const char *)p, 1);
            }
        }
    }
    strata_strbuf_puts(b, "\"");
}

static void dump_py_number(struct strata_strbuf *b, double v)
{
    char num[40];
    // range first: converting a double outside long long's range is undefined (found by fuzzing)
    if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(long long)v) {
        snprintf(num, sizeof num, "%lld", (long long)v);
    } else {
        // Python's repr: the shortest text that reads back as the same double.
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(num, sizeof num, "%.*g", prec, v);
            if (strtod(num, NULL) == v) {
                break;
            }
        }
    }
    strata_strbuf_puts(b, num);
}

static void dump_py(struct strata_strbuf *b, const cJSON *x)
{
    if (cJSON_IsObject(x) || cJSON_IsArray(x)) {
        bool obj = cJSON_IsObject(x);
        strata_strbuf_puts(b, obj ? "{" : "[");
        for (const cJSON *c = x->child; c; c = c->next) {
            if (obj) {
                dump_py_string(b, c->string ? c->string : "");
                strata_strbuf_puts(b, ": ");
            }
            dump_py(b, c);
            if (c->next) {
                strata_strbuf_puts(b, ", ");
            }
        }
        strata_strbuf_puts(b, obj ? "}" : "]");
    } else if (cJSON_IsString(x)) {
        dump_py_string(b, x->valuestring);
    } else if (cJSON_IsNumber(x)) {
        dump_py_number(b, x->valuedouble);
    } else if (cJSON_IsBool(x)) {
        strata_strbuf_puts(b, cJSON_IsTrue(x) ? "true" : "false");
    } else {
        strata_strbuf_puts(b, "null");
    }
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// [*s, *e) narrowed by Python's strip(), lstrip('\n') and rstrip('\n') as the templates use them.
static void strip_ws(const char **s, const char **e)
{
    while (*s < *e && is_ws(**s)) (*s)++;
    while (*e > *s && is_ws((*e)[-1])) (*e)--;
}

static const char *find_last(const char *s, const char *needle)
{
    const char *last = NULL;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) {
        last = p;
    }
    return last;
}

// The templates' split of an assistant turn at </think>: reasoning is what stands between the
// last <think> and the first </think>, content what follows the last </think>.
struct think_split {
    const char *content, *content_end;
    const char *reasoning, *reasoning_end;  // empty when the turn has no </think>
};

static struct think_split split_think(const char *content)
{
    struct think_split t = {content, content + strlen(content), content, content};
    const char *first_close = strstr(content, "</think>");
    if (!first_close) {
        return t;
    }
    t.content = find_last(content, "</think>") + strlen("</think>");
    while (*t.content == '\n') t.content++;
    t.reasoning_end = first_close;
    while (t.reasoning_end > content && t.reasoning_end[-1] == '\n') t.reasoning_end--;
    t.reasoning = content;
    for (const char *p = content; p && p < t.reasoning_end; p = strstr(p + 1, "<think>")) {
        if (strncmp(p, "<think>", 7) == 0 && p + 7 <= t.reasoning_end) {
            t.reasoning = p + 7;
        }
    }
    while (t.reasoning < t.reasoning_end && *t.reasoning == '\n') t.reasoning++;
    return t;
}

static int parse_tools(const char *tools_json, cJSON **tools)
{
    *tools = NULL;
    if (!tools_json || !*tools_json) {
        return 0;
    }
    cJSON *t = cJSON_Parse(tools_json);
    if (!cJSON_IsArray(t)) {
        cJSON_Delete(t);
        strata_log_error("strata_chat_render_tools: tools are not a JSON array");
        return STRATA_EARG;
    }
    *tools = t;
    return 0;
}

static void render_qwen3(struct strata_strbuf *b, const struct strata_chat_turn *m, size_t n,
                         const cJSON *tools, bool add_generation_prompt)
{
    bool sys0 = n > 0 && strcmp(m[0].role, "system") == 0;
    if (cJSON_GetArraySize(tools) > 0) {
        strata_strbuf_puts(b, "<|im_start|>system\n");
        if (sys0) {
            strata_strbuf_puts(b, m[0].content);
            strata_strbuf_puts(b, "\n\n");
        }
        strata_strbuf_puts(b, "# Tools\n\nYou may call one or more functions to assist with the user query."
                  "\n\nYou are provided with function signatures within <tools></tools> XML tags:"
                  "\n<tools>");
        for (const cJSON *t = tools->child; t; t = t->next) {
            strata_strbuf_puts(b, "\n");
            dump_py(b, t);
        }
        strata_strbuf_puts(b, "\n</tools>\n\nFor each function call, return a json object with function name "
                  "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                  "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
                  "</tool_call><|im_end|>\n");
    } else if (sys0) {
        strata_strbuf_puts(b, "<|im_start|>system\n");
        strata_strbuf_puts(b, m[0].content);
        strata_strbuf_puts(b, "<|im_end|>\n");
    }
    // The last user turn that is not a wrapped tool response: reasoning is kept after it.
    size_t last_query = n ? n - 1 : 0;
    for (size_t k = n; k-- > 0;) {
        const char *c = m[k].content;
        size_t len = strlen(c);
        bool wrapped = strncmp(c, "<tool_response>", 15) == 0 && len >= 16 &&
                       strcmp(c + len - 16, "</tool_response>") == 0;
        if (strcmp(m[k].role, "user") == 0 && !wrapped) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *role = m[i].role;
        if (strcmp(role, "user") == 0 || (strcmp(role, "system") == 0 && i > 0)) {
            strata_strbuf_puts(b, "<|im_start|>");
            strata_strbuf_puts(b, role);
            strata_strbuf_puts(b, "\n");
            strata_strbuf_puts(b, m[i].content);
            strata_strbuf_puts(b, "<|im_end|>\n");
        } else if (strcmp(role, "assistant") == 0) {
            struct think_split t = split_think(m[i].content);
            strata_strbuf_puts(b, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || t.reasoning_end > t.reasoning)) {
                const char *rs = t.reasoning, *re = t.reasoning_end;
                while (rs < re && *rs == '\n') rs++;
                while (re > rs && re[-1] == '\n') re--;
                strata_strbuf_puts(b, "<think>\n");
                strata_strbuf_put(b, rs, (size_t)(re - rs));
                strata_strbuf_puts(b, "\n</think>\n\n");
                while (t.content < t.content_end && *t.content == '\n') t.content++;
            }
            strata_strbuf_put(b, t.content, (size_t)(t.content_end - t.content));
            for (size_t j = 0; j < m[i].n_tool_calls; j++) {
                if (j > 0 || t.content_end > t.content) {
                    strata_strbuf_puts(b, "\n");
                }
                strata_strbuf_puts(b, "<tool_call>\n{\"name\": \"");
                strata_strbuf_puts(b, m[i].tool_calls[j].name);
                strata_strbuf_puts(b, "\", \"arguments\": ");
                strata_strbuf_puts(b, m[i].tool_calls[j].arguments);
                strata_strbuf_puts(b, "}\n</tool_call>");
            }
            strata_strbuf_puts(b, "<|im_end|>\n");
        } else if (strcmp(role, "tool") == 0) {
            if (i == 0 || strcmp(m[i - 1].role, "tool") != 0) {
                strata_strbuf_puts(b, "<|im_start|>user");
            }
            strata_strbuf_puts(b, "\n<tool_response>\n");
            strata_strbuf_puts(b, m[i].content);
            strata_strbuf_puts(b, "\n</tool_response>");
            if (i == n - 1 || strcmp(m[i + 1].role, "tool") != 0) {
                strata_strbuf_puts(b, "<|im_end|>\n");
            }
        }
    }
    if (add_generation_prompt) {
        strata_strbuf_puts(b, "<|im_start|>assistant\n");
    }
}

static int render_glm45(struct strata_strbuf *b, const struct strata_chat_turn *m, size_t n,
                        const cJSON *tools, bool add_generation_prompt)
{
    strata_strbuf_puts(b, "[gMASK]<sop>");
    if (cJSON_GetArraySize(tools) > 0) {
        strata_strbuf_puts(b, "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the "
                  "user query.\n\nYou are provided with function signatures within <tools></tools>"
                  " XML tags:\n<tools>\n");
        for (const cJSON *t = tools->child; t; t = t->next) {
            dump_py(b, t);
            strata_strbuf_puts(b, "\n");
        }
        strata_strbuf_puts(b, "</tools>\n\nFor each function call, output the function name and arguments "
                  "within the following XML format:\n<tool_call>{function-name}\n"
                  "<arg_key>{arg-key-1}</arg_key>\n<arg_value>{arg-value-1}</arg_value>\n"
                  "<arg_key>{arg-key-2}</arg_key>\n<arg_value>{arg-value-2}</arg_value>\n...\n"
                  "</tool_call>");
    }
    long last_user = -1;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].role, "user") == 0) last_user = (long)i;
    }
    for (size_t i = 0; i < n; i++) {
        const char *role = m[i].role;
        if (strcmp(role, "user") == 0 || strcmp(role, "system") == 0) {
            strata_strbuf_puts(b, role[0] == 'u' ? "<|user|>\n" : "<|system|>\n");
            strata_strbuf_puts(b, m[i].content);
        } else if (strcmp(role, "assistant") == 0) {
            struct think_split t = split_think(m[i].content);
            const char *rs = t.reasoning, *re = t.reasoning_end;
            strip_ws(&rs, &re);
            strata_strbuf_puts(b, "<|assistant|>");
            if ((long)i > last_user && t.reasoning_end > t.reasoning) {
                strata_strbuf_puts(b, "\n<think>");
                strata_strbuf_put(b, rs, (size_t)(re - rs));
                strata_strbuf_puts(b, "</think>");
            } else {
                strata_strbuf_puts(b, "\n<think></think>");
            }
            const char *cs = t.content, *ce = t.content_end;
            strip_ws(&cs, &ce);
            if (ce > cs) {
                strata_strbuf_puts(b, "\n");
                strata_strbuf_put(b, cs, (size_t)(ce - cs));
            }
            for (size_t j = 0; j < m[i].n_tool_calls; j++) {
                const struct strata_chat_tool_call *tc = &m[i].tool_calls[j];
                cJSON *args = cJSON_Parse(tc->arguments);
                if (!cJSON_IsObject(args)) {
                    cJSON_Delete(args);
                    strata_log_error("strata_chat_render_tools: arguments of tool call '%s' in "
                                     "message %zu are not a JSON object", tc->name, i);
                    return STRATA_EARG;
                }
                strata_strbuf_puts(b, "\n<tool_call>");
                strata_strbuf_puts(b, tc->name);
                strata_strbuf_puts(b, "\n");
                for (const cJSON *a = args->child; a; a = a->next) {
                    strata_strbuf_puts(b, "<arg_key>");
                    strata_strbuf_puts(b, a->string);
                    strata_strbuf_puts(b, "</arg_key>\n<arg_value>");
                    if (cJSON_IsString(a)) {
                        strata_strbuf_puts(b, a->valuestring);
                    } else {
                        dump_py(b, a);
                    }
                    strata_strbuf_puts(b, "</arg_value>\n");
                }
                strata_strbuf_puts(b, "</tool_call>");
                cJSON_Delete(args);
            }
        } else if (strcmp(role, "tool") == 0) {
            if (i == 0 || strcmp(m[i - 1].role, "tool") != 0) {
                strata_strbuf_puts(b, "<|observation|>");
            }
            strata_strbuf_puts(b, "\n<tool_response>\n");
            strata_strbuf_puts(b, m[i].content);
            strata_strbuf_puts(b, "\n</tool_response>");
        }
    }
    if (add_generation_prompt) {
        strata_strbuf_puts(b, "<|assistant|>");
    }
    return 0;
}

int strata_chat_render_tools(const char *template_text, const struct strata_chat_turn *msgs,
                            size_t n, const char *tools_json, bool add_generation_prompt,
                            char **out)
{
    *out = NULL;
    enum strata_tool_format fmt = strata_chat_tool_format(template_text);
    bool wants_tools = tools_json && *tools_json && strcmp(tools_json, "[]") != 0;
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            strata_log_error("strata_chat_render_tools: message %zu has no %s", i,
                             msgs[i].role ? "content" : "role");
            return STRATA_EARG;
        }
        for (size_t j = 0; j < msgs[i].n_tool_calls; j++) {
            if (!msgs[i].tool_calls[j].name || !msgs[i].tool_calls[j].arguments) {
                strata_log_error("strata_chat_render_tools: tool call %zu of message %zu has no %s",
                                 j, i, msgs[i].tool_calls[j].name ? "arguments" : "name");
                return STRATA_EARG;
            }
        }
        wants_tools |= msgs[i].n_tool_calls > 0 || strcmp(msgs[i].role, "tool") == 0;
    }
    if (fmt == STRATA_TOOLS_NONE) {
        if (wants_tools) {
            strata_log_error("strata_chat_render_tools: the chat template (%s) has no tool-call "
                             "format strata knows (Qwen3 or GLM-4.5)",
                             strata_chat_family(template_text));
            return STRATA_EUNSUP;
        }
        struct strata_chat_msg *plain = malloc((n ? n : 1) * sizeof *plain);
        if (!plain) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
            plain[i] = (struct strata_chat_msg){msgs[i].role, msgs[i].content};
        }
        int rc = strata_chat_render(template_text, plain, n, add_generation_prompt, out);
        free(plain);
        return rc;
    }
    cJSON *tools = NULL;
    int rc = parse_tools(tools_json, &tools);
    if (rc) {
        return rc;
    }
    struct strata_strbuf b = {NULL, 0, 0, false};
    strata_strbuf_put(&b, "", 0);
    if (fmt == STRATA_TOOLS_QWEN3) {
        render_qwen3(&b, msgs, n, tools, add_generation_prompt);
    } else {
        rc = render_glm45(&b, msgs, n, tools, add_generation_prompt);
    }
    cJSON_Delete(tools);
    if (rc == 0 && b.oom) {
        strata_log_error("strata_chat_render_tools: out of memory formatting %zu messages", n);
        rc = -ENOMEM;
    }
    if (rc) {
        free(b.s);
        return rc;
    }
    *out = b.s;
    return 0;
}

// ---- tool calls in generated text --------------------------------------------------------------

size_t strata_chat_tool_safe_len(const char *text, size_t len)
{
    const size_t m = sizeof TOOL_CALL_OPEN - 1;
    for (size_t i = 0; i < len; i++) {
        if (text[i] != '<') continue;
        size_t k = len - i < m ? len - i : m;
        if (memcmp(text + i, TOOL_CALL_OPEN, k) == 0) {
            return i;  // a call starts here, or may: its marker is cut by the end of the text
        }
    }
    return len;
}

static char *dup_range(const char *s, const char *e)
{
    char *d = malloc((size_t)(e - s) + 1);
    if (d) {
        memcpy(d, s, (size_t)(e - s));
        d[e - s] = '\0';
    }
    return d;
}

static const char *find_in(const char *s, const char *e, const char *needle)
{
    size_t n = strlen(needle);
    for (const char *p = s; p + n <= e; p++) {
        if (memcmp(p, needle, n) == 0) return p;
    }
    return NULL;
}

// The JSON schema type of parameter `key` of tool `name` ("" if unknown).
static const char *param_type(const cJSON *tools, const char *name, const char *key)
{
    for (const cJSON *t = tools ? tools->child : NULL; t; t = t->next) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!fn) fn = t;
        const cJSON *fname = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (!cJSON_IsString(fname) || strcmp(fname->valuestring, name) != 0) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetObjectItemCaseSensitive(props, key), "type");
        return cJSON_IsString(type) ? type->valuestring : "";
    }
    return "";
}

// Qwen3: {"name": ..., "arguments": {...}} between the markers.
static int parse_call_qwen3(const char *s, const char *e, struct strata_tool_call_out *out)
{
    strip_ws(&s, &e);
    // the whole body must be the object: text after it (a second object, a NUL byte) would
    // otherwise vanish from both the call and the content
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(s, (size_t)(e - s), &end, false);
    if (j && end != e) {
        cJSON_Delete(j);
        return 1;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
    cJSON *args = cJSON_GetObjectItemCaseSensitive(j, "arguments");
    if (!cJSON_IsString(name) || !*name->valuestring || (args && !cJSON_IsObject(args))) {
        cJSON_Delete(j);
        return 1;
    }
    out->name = strdup(name->valuestring);
    out->arguments = args ? cJSON_PrintUnformatted(args) : strdup("{}");
    cJSON_Delete(j);
    return out->name && out->arguments ? 0 : -ENOMEM;
}

// GLM-4.5: name, then <arg_key>k</arg_key><arg_value>v</arg_value> pairs. A value is JSON when
// it parses as JSON and the tool's schema does not declare the parameter a string.
static int parse_call_glm45(const char *s, const char *e, const cJSON *tools,
                            struct strata_tool_call_out *out)
{
    if (memchr(s, '\0', (size_t)(e - s))) return 1;  // C strings would cut the name, keys and values
    const char *name_end = find_in(s, e, "<arg_key>");
    if (!name_end) name_end = e;
    const char *ns = s, *ne = name_end;
    strip_ws(&ns, &ne);
    if (ne == ns) return 1;
    char *name = dup_range(ns, ne);
    cJSON *args = cJSON_CreateObject();
    if (!name || !args) goto oom;
    for (const char *p = name_end; p < e;) {
        while (p < e && is_ws(*p)) p++;
        if (p == e) break;
        const char *ks = p + strlen("<arg_key>"), *ke, *vs, *ve;
        // the text is [s, e), not NUL-terminated: no compare may run past e
        if (e - p < 9 || memcmp(p, "<arg_key>", 9) != 0 || !(ke = find_in(ks, e, "</arg_key>"))) goto bad;
        vs = ke + strlen("</arg_key>");
        while (vs < e && is_ws(*vs)) vs++;
        if (e - vs < 11 || memcmp(vs, "<arg_value>", 11) != 0) goto bad;
        vs += 11;
        if (!(ve = find_in(vs, e, "</arg_value>"))) goto bad;
        p = ve + strlen("</arg_value>");
        char *key = dup_range(ks, ke), *val = dup_range(vs, ve);
        cJSON *v = NULL;
        if (key && val && strcmp(param_type(tools, name, key), "string") != 0) {
            v = cJSON_Parse(val);
        }
        if (!v && val) v = cJSON_CreateString(val);
        bool ok = key && v && cJSON_AddItemToObject(args, key, v);
        if (!ok) cJSON_Delete(v);
        free(key);
        free(val);
        if (!ok) goto oom;
    }
    out->name = name;
    out->arguments = cJSON_PrintUnformatted(args);
    cJSON_Delete(args);
    return out->arguments ? 0 : -ENOMEM;
bad:
    free(name);
    cJSON_Delete(args);
    return 1;
oom:
    free(name);
    cJSON_Delete(args);
    return -ENOMEM;
}

void strata_chat_tool_calls_free(struct strata_tool_call_out *calls, size_t n)
{
    for (size_t i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

int strata_chat_parse_tools(enum strata_tool_format fmt, const char *text, size_t len,
                            const char *tools_json, char **content,
                            struct strata_tool_call_out **calls, size_t *n_calls)
{
    *content = NULL;
    *calls = NULL;
    *n_calls = 0;
    cJSON *tools = tools_json ? cJSON_Parse(tools_json) : NULL;
    struct strata_strbuf b = {NULL, 0, 0, false};
    strata_strbuf_put(&b, "", 0);
    struct strata_tool_call_out *list = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    const char *p = text, *end = text + len;
    while (fmt != STRATA_TOOLS_NONE && p < end) {
        const char *open = find_in(p, end, TOOL_CALL_OPEN);
        if (!open) break;
        const char *body = open + sizeof TOOL_CALL_OPEN - 1;
        const char *close = find_in(body, end, TOOL_CALL_CLOSE);
        const char *body_end = close ? close : end;  // a call cut off by the token limit
        struct strata_tool_call_out call = {NULL, NULL};
        int r = fmt == STRATA_TOOLS_QWEN3 ? parse_call_qwen3(body, body_end, &call)
                                          : parse_call_glm45(body, body_end, tools, &call);
        if (r < 0) {
            rc = r;
            break;
        }
        const char *next = close ? close + sizeof TOOL_CALL_CLOSE - 1 : end;
        if (r > 0) {  // not a well-formed call: it stays text, as the model wrote it
            strata_strbuf_put(&b, p, (size_t)(next - p));
            p = next;
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 4;
            struct strata_tool_call_out *grown = realloc(list, cap * sizeof *list);
            if (!grown) {
                free(call.name);
                free(call.arguments);
                rc = -ENOMEM;
                break;
            }
            list = grown;
        }
        list[n++] = call;
        strata_strbuf_put(&b, p, (size_t)(open - p));
        p = next;
    }
    strata_strbuf_put(&b, p, (size_t)(end - p));
    cJSON_Delete(tools);
    if (rc == 0 && b.oom) rc = -ENOMEM;
    if (rc) {
        strata_log_error("strata_chat_parse_tools: out of memory");
        free(b.s);
        strata_chat_tool_calls_free(list, n);
        return rc;
    }
    if (n) {  // the text around calls is whitespace the model put between them
        const char *s = b.s, *e = b.s + b.len;
        strip_ws(&s, &e);
        memmove(b.s, s, (size_t)(e - s));
        b.s[e - s] = '\0';
    }
    *content = b.s;
    *calls = list;
    *n_calls = n;
    return 0;
}
