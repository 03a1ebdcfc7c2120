// Tool calling in chat formats: tools, tool calls and tool results rendered exactly as the Qwen3
// and GLM-4.5 Jinja templates print them (the expected strings were printed by jinja2 with
// Hugging Face's settings — trim_blocks, lstrip_blocks, tojson as json.dumps — from Qwen3's
// tokenizer_config.json and GLM-4.5's chat_template.jinja), and tool calls parsed back out of
// generated text, including malformed, cut-off and streamed ones.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "tokenizer/tokenizer.h"
#include "util/log.h"

static const char WANT_QWEN_TOOLS[] =
    "<|im_start|>system\n"
    "You are helpful.\n"
    "\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"We"
    "ather in a city, in °C.\\nTab\\there\", \"parameters\": {\"type\": \"object\", \"propert"
    "ies\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\":"
    " 1.5}}, \"required\": [\"city\"]}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, return a json object with function name and arguments within <to"
    "ol_call></tool_call> XML tags:\n"
    "<tool_call>\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "Hi<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>\n"
    "the user wants weather\n"
    "</think>\n"
    "\n"
    "Let me check.\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2, \"units\":"
    " [\"c\", null, true]}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"get_time\", \"arguments\": {}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"temp\": 21}\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "12:00\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

static const char WANT_QWEN_PLAIN_LAST_ASSISTANT[] =
    "<|im_start|>system\n"
    "You are helpful.<|im_end|>\n"
    "<|im_start|>user\n"
    "Hi<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Hello!<|im_end|>\n"
    "<|im_start|>user\n"
    "Weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>\n"
    "the user wants weather\n"
    "</think>\n"
    "\n"
    "Let me check.\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2, \"units\":"
    " [\"c\", null, true]}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"get_time\", \"arguments\": {}}\n"
    "</tool_call><|im_end|>\n";

static const char WANT_GLM_TOOLS[] =
    "[gMASK]<sop><|system|>\n"
    "# Tools\n"
    "\n"
    "You may call one or more functions to assist with the user query.\n"
    "\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>\n"
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"We"
    "ather in a city, in °C.\\nTab\\there\", \"parameters\": {\"type\": \"object\", \"propert"
    "ies\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\", \"minimum\":"
    " 1.5}}, \"required\": [\"city\"]}}}\n"
    "</tools>\n"
    "\n"
    "For each function call, output the function name and arguments within the following XML "
    "format:\n"
    "<tool_call>{function-name}\n"
    "<arg_key>{arg-key-1}</arg_key>\n"
    "<arg_value>{arg-value-1}</arg_value>\n"
    "<arg_key>{arg-key-2}</arg_key>\n"
    "<arg_value>{arg-value-2}</arg_value>\n"
    "...\n"
    "</tool_call><|system|>\n"
    "You are helpful.<|user|>\n"
    "Hi<|assistant|>\n"
    "<think></think>\n"
    "Hello!<|user|>\n"
    "Weather in Paris?<|assistant|>\n"
    "<think>the user wants weather</think>\n"
    "Let me check.\n"
    "<tool_call>get_weather\n"
    "<arg_key>city</arg_key>\n"
    "<arg_value>Paris</arg_value>\n"
    "<arg_key>days</arg_key>\n"
    "<arg_value>2</arg_value>\n"
    "<arg_key>units</arg_key>\n"
    "<arg_value>[\"c\", null, true]</arg_value>\n"
    "</tool_call>\n"
    "<tool_call>get_time\n"
    "</tool_call><|observation|>\n"
    "<tool_response>\n"
    "{\"temp\": 21}\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "12:00\n"
    "</tool_response><|assistant|>";

static const char WANT_GLM_PLAIN[] =
    "[gMASK]<sop><|system|>\n"
    "You are helpful.<|user|>\n"
    "Hi<|assistant|>\n"
    "<think></think>\n"
    "Hello!<|user|>\n"
    "Weather in Paris?<|assistant|>";

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather in a "
    "city, in °C.\\nTab\\there\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{"
    "\"type\":\"string\"},\"days\":{\"type\":\"integer\",\"minimum\":1.5}},\"required\":[\"city\"]}}}]";

static const char QWEN3_MARKERS[] = "{%- if tools %}<|im_start|>system <tools> <tool_call>";
static const char GLM45_MARKERS[] = "[gMASK]<sop>{%- if tools -%}<tool_call><arg_key>";

static const struct strata_chat_tool_call CALLS[] = {
    {"get_weather", "{\"city\": \"Paris\", \"days\": 2, \"units\": [\"c\", null, true]}"},
    {"get_time", "{}"},
};

static const struct strata_chat_turn CONV[] = {
    {"system", "You are helpful.", NULL, 0},
    {"user", "Hi", NULL, 0},
    {"assistant", "<think>\nold thought\n</think>\n\nHello!", NULL, 0},
    {"user", "Weather in Paris?", NULL, 0},
    {"assistant", "<think>\nthe user wants weather\n</think>\n\nLet me check.", CALLS, 2},
    {"tool", "{\"temp\": 21}", NULL, 0},
    {"tool", "12:00", NULL, 0},
};

static void expect_render(const char *name, const char *tmpl, size_t n, const char *tools,
                          bool gen, const char *want)
{
    char *out = NULL;
    int rc = strata_chat_render_tools(tmpl, CONV, n, tools, gen, &out);
    CHECK(rc == 0 && strcmp(out, want) == 0, "%s: rc %d\n--- got\n%s\n--- want\n%s", name, rc,
          out ? out : "", want);
    free(out);
}

static void test_render(void)
{
    int before = g_failures;
    CHECK(strata_chat_tool_format(QWEN3_MARKERS) == STRATA_TOOLS_QWEN3, "qwen3 detected");
    CHECK(strata_chat_tool_format(GLM45_MARKERS) == STRATA_TOOLS_GLM45, "glm45 detected");
    CHECK(strata_chat_tool_format(NULL) == STRATA_TOOLS_NONE, "plain chatml has no tools");
    CHECK(strata_chat_tool_format("[gMASK]<sop><|user|>") == STRATA_TOOLS_NONE, "GLM-4 has none");
    expect_render("qwen3 tools", QWEN3_MARKERS, 7, TOOLS, true, WANT_QWEN_TOOLS);
    expect_render("qwen3 final assistant", QWEN3_MARKERS, 5, NULL, false,
                  WANT_QWEN_PLAIN_LAST_ASSISTANT);
    expect_render("glm45 tools", GLM45_MARKERS, 7, TOOLS, true, WANT_GLM_TOOLS);
    expect_render("glm45 plain", GLM45_MARKERS, 4, "[]", true, WANT_GLM_PLAIN);

    // Without a tool format, plain conversations still render and tools are refused.
    char *out = NULL;
    CHECK(strata_chat_render_tools(NULL, CONV, 2, NULL, true, &out) == 0 &&
          strcmp(out, "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi"
                      "<|im_end|>\n<|im_start|>assistant\n") == 0, "chatml without tools");
    free(out);
    out = NULL;
    CHECK(strata_chat_render_tools(NULL, CONV, 2, TOOLS, true, &out) == STRATA_EUNSUP && !out,
          "tools refused by a template without a tool format");
    CHECK(strata_chat_render_tools(NULL, CONV, 7, NULL, true, &out) == STRATA_EUNSUP && !out,
          "tool turns refused by a template without a tool format");
    CHECK(strata_chat_render_tools(QWEN3_MARKERS, CONV, 2, "{\"not\": \"an array\"}", true, &out)
              == STRATA_EARG && !out, "tools must be an array");
    const struct strata_chat_tool_call bad_args[] = {{"f", "[1, 2]"}};
    const struct strata_chat_turn bad[] = {{"assistant", "", bad_args, 1}};
    CHECK(strata_chat_render_tools(GLM45_MARKERS, bad, 1, NULL, true, &out) == STRATA_EARG && !out,
          "GLM-4.5 needs object arguments");
    const struct strata_chat_tool_call no_name[] = {{NULL, "{}"}};
    const struct strata_chat_turn bad2[] = {{"assistant", "", no_name, 1}};
    CHECK(strata_chat_render_tools(QWEN3_MARKERS, bad2, 1, NULL, true, &out) == STRATA_EARG,
          "a call needs a name");
    case_result("render tools (qwen3, glm45) as their Jinja templates do", before);
}

static void expect_parse(const char *name, enum strata_tool_format fmt, const char *text,
                         const char *tools, const char *want_content, size_t want_n,
                         const char *const *want_calls)
{
    char *content = NULL;
    struct strata_tool_call_out *calls = NULL;
    size_t n = 0;
    int rc = strata_chat_parse_tools(fmt, text, strlen(text), tools, &content, &calls, &n);
    CHECK(rc == 0, "%s: rc %d", name, rc);
    CHECK(content && strcmp(content, want_content) == 0, "%s: content '%s' want '%s'", name,
          content ? content : "(null)", want_content);
    CHECK(n == want_n, "%s: %zu calls, want %zu", name, n, want_n);
    for (size_t i = 0; i < n && i < want_n; i++) {
        CHECK(strcmp(calls[i].name, want_calls[2 * i]) == 0 &&
              strcmp(calls[i].arguments, want_calls[2 * i + 1]) == 0,
              "%s: call %zu %s(%s) want %s(%s)", name, i, calls[i].name, calls[i].arguments,
              want_calls[2 * i], want_calls[2 * i + 1]);
    }
    free(content);
    strata_chat_tool_calls_free(calls, n);
}

static void test_parse(void)
{
    int before = g_failures;
    const char *two[] = {"get_weather", "{\"city\":\"Paris\",\"days\":2}", "get_time", "{}"};
    expect_parse("qwen3 two calls", STRATA_TOOLS_QWEN3,
                 "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                 "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": "
                 "\"get_time\", \"arguments\": {}}\n</tool_call>",
                 NULL, "Let me check.", 2, two);
    expect_parse("qwen3 no call", STRATA_TOOLS_QWEN3, "  just text  ", NULL, "  just text  ", 0,
                 NULL);
    expect_parse("qwen3 bad json stays text", STRATA_TOOLS_QWEN3,
                 "a <tool_call>{\"name\": oops}</tool_call> b", NULL,
                 "a <tool_call>{\"name\": oops}</tool_call> b", 0, NULL);
    expect_parse("qwen3 text after the object stays text", STRATA_TOOLS_QWEN3,
                 "<tool_call>{\"name\": \"a\"}{\"name\": \"b\"}</tool_call>", NULL,
                 "<tool_call>{\"name\": \"a\"}{\"name\": \"b\"}</tool_call>", 0, NULL);
    expect_parse("qwen3 arguments not an object", STRATA_TOOLS_QWEN3,
                 "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", NULL,
                 "<tool_call>{\"name\": \"f\", \"arguments\": 3}</tool_call>", 0, NULL);
    const char *cut[] = {"get_time", "{}"};
    expect_parse("qwen3 call cut at the end", STRATA_TOOLS_QWEN3,
                 "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n", NULL, "", 1, cut);
    expect_parse("qwen3 call cut inside the JSON", STRATA_TOOLS_QWEN3,
                 "<tool_call>\n{\"name\": \"get_ti", NULL, "<tool_call>\n{\"name\": \"get_ti", 0,
                 NULL);
    expect_parse("none format ignores markers", STRATA_TOOLS_NONE,
                 "<tool_call>{\"name\": \"f\"}</tool_call>", NULL,
                 "<tool_call>{\"name\": \"f\"}</tool_call>", 0, NULL);

    // GLM-4.5: values typed by the schema (city is a string even if it looks like a number).
    const char *glm[] = {"get_weather", "{\"city\":\"1984\",\"days\":2,\"units\":[\"c\",null]}",
                         "get_time", "{}"};
    expect_parse("glm45 two calls", STRATA_TOOLS_GLM45,
                 "Checking.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>1984"
                 "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n<arg_key>units"
                 "</arg_key>\n<arg_value>[\"c\", null]</arg_value>\n</tool_call>\n<tool_call>"
                 "get_time\n</tool_call>",
                 TOOLS, "Checking.", 2, glm);
    const char *glm_untyped[] = {"lookup", "{\"q\":\"plain text\",\"n\":3}"};
    expect_parse("glm45 no schema", STRATA_TOOLS_GLM45,
                 "<tool_call>lookup<arg_key>q</arg_key><arg_value>plain text</arg_value>"
                 "<arg_key>n</arg_key><arg_value>3</arg_value></tool_call>",
                 NULL, "", 1, glm_untyped);
    expect_parse("glm45 broken pair stays text", STRATA_TOOLS_GLM45,
                 "<tool_call>f<arg_key>k</arg_key>oops</tool_call>", NULL,
                 "<tool_call>f<arg_key>k</arg_key>oops</tool_call>", 0, NULL);
    expect_parse("glm45 no name stays text", STRATA_TOOLS_GLM45, "<tool_call>\n</tool_call>", NULL,
                 "<tool_call>\n</tool_call>", 0, NULL);

    // Streaming: text before a call (or before what may become one) is safe to send.
    static const struct {
        const char *text;
        size_t safe;
    } s[] = {{"hello", 5}, {"hello <", 6}, {"hello <tool_c", 6}, {"a<tool_call>{", 1},
             {"a <b> c", 7}, {"x<tool_cal!", 11}, {"", 0}};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        size_t got = strata_chat_tool_safe_len(s[i].text, strlen(s[i].text));
        CHECK(got == s[i].safe, "safe_len('%s') = %zu, want %zu", s[i].text, got, s[i].safe);
    }
    case_result("parse tool calls out of generated text (qwen3, glm45, streaming)", before);
}

// Text that ends exactly at a page that may not be read: the parsers take (text, len), and a
// caller's buffer need not be NUL-terminated (found by tests/fuzz/fuzz_chat).
static void expect_parse_at_page_end(const char *name, enum strata_tool_format fmt, const char *text,
                                     const char *want_content, size_t want_n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = strlen(text);
    char *map = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(map != MAP_FAILED && mprotect(map + page, page, PROT_NONE) == 0, "%s: guard page", name);
    if (map == MAP_FAILED) return;
    char *at = map + page - len;
    memcpy(at, text, len);
    char *content = NULL;
    struct strata_tool_call_out *calls = NULL;
    size_t n = 0;
    int rc = strata_chat_parse_tools(fmt, at, len, NULL, &content, &calls, &n);
    CHECK(rc == 0 && content && strcmp(content, want_content) == 0 && n == want_n,
          "%s: rc %d content '%s' calls %zu", name, rc, content ? content : "(null)", n);
    free(content);
    strata_chat_tool_calls_free(calls, n);
    munmap(map, 2 * page);
}

static void test_parse_bounds(void)
{
    int before = g_failures;
    // a GLM-4.5 call cut inside its second "<arg_key>": the check of the marker read past the text
    expect_parse_at_page_end("glm45 cut in <arg_key>", STRATA_TOOLS_GLM45,
                             "<tool_call>f<arg_key>k</arg_key><arg_value>1</arg_value>\n<arg_",
                             "<tool_call>f<arg_key>k</arg_key><arg_value>1</arg_value>\n<arg_", 0);
    expect_parse_at_page_end("glm45 cut in <arg_value>", STRATA_TOOLS_GLM45,
                             "<tool_call>f<arg_key>k</arg_key><arg_va",
                             "<tool_call>f<arg_key>k</arg_key><arg_va", 0);
    expect_parse_at_page_end("qwen3 cut after the JSON", STRATA_TOOLS_QWEN3,
                             "<tool_call>{\"name\": \"get_time\"}\n", "", 1);
    // a NUL byte in a GLM-4.5 call cut its name to "" (found by tests/fuzz/fuzz_chat)
    static const char nul[] = "a<tool_call>\0f<arg_key>k</arg_key><arg_value>1</arg_value></tool_call>";
    char *content = NULL;
    struct strata_tool_call_out *calls = NULL;
    size_t n = 0;
    int rc = strata_chat_parse_tools(STRATA_TOOLS_GLM45, nul, sizeof nul - 1, NULL, &content, &calls, &n);
    CHECK(rc == 0 && n == 0, "glm45 NUL in a call: rc %d, %zu calls (name '%s')", rc, n, n ? calls[0].name : "");
    free(content);
    strata_chat_tool_calls_free(calls, n);
    case_result("parse tool calls from text that is not NUL-terminated or holds NULs", before);
}

int main(void)
{
    test_render();
    test_parse();
    test_parse_bounds();
    printf("%s\n", g_failures ? "FAILED" : "all passed");
    return g_failures ? 1 : 0;
}
