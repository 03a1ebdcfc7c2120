// libFuzzer harness: the server's request parsing, called as functions (no HTTP): the JSON body
// of /v1/chat/completions, /v1/completions, /v1/messages and /v1/messages/count_tokens checked
// and turned into a conversation, then rendered with the Qwen3 and GLM-4.5 tool formats the
// way a job's prompt is. The first byte picks the endpoint, the rest is the body (not
// NUL-terminated, as the HTTP layer hands it over).
#include "fuzz_util.h"

#include "server/api.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_quiet();
    return 0;
}

static const struct srv_api_ops *const APIS[] = {
    &srv_openai_chat, &srv_openai_completions, &srv_anthropic_messages, &srv_anthropic_count_tokens,
};
static const char *const TEMPLATES[] = {
    "{{ '<|im_start|>' }}<tools></tools><tool_call></tool_call>",  // Qwen3 with tools
    "[gMASK]<sop><tool_call><arg_key></arg_key><arg_value>",        // GLM-4.5 with tools
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const struct srv_api_ops *api = APIS[data[0] % 4];
    char *body = fz_copy(data + 1, size - 1);
    struct srv_request r = {0};
    char err[256] = "";
    if (api->parse(body, size - 1, &r, err, sizeof err) == 0) {
        if (r.n_stop < 0 || r.n_stop > SRV_MAX_STOP) abort();
        for (int i = 0; i < r.n_stop; i++) (void)strlen(r.stop[i]);
        for (size_t i = 0; i < r.n_turns; i++) {
            if (!r.turns[i].role || !r.turns[i].content) abort();
        }
        if (r.prompt) (void)strlen(r.prompt);
        if (r.n_turns) {
            char *out = NULL;
            const char *tmpl = TEMPLATES[data[0] / 4 % 2];
            if (strata_chat_render_tools(tmpl, r.turns, r.n_turns, r.tools_json, true, &out) == 0) free(out);
        }
    } else if (!err[0]) {
        abort();  // a refused request always says why
    }
    srv_request_free(&r);
    free(body);
    return 0;
}
