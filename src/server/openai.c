// The OpenAI API: /v1/chat/completions and /v1/completions requests, their responses and their
// server-sent event chunks, and OpenAI's error shape.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/api.h"

static int parse_tool_calls(struct srv_request *r, const cJSON *tc, struct strata_chat_turn *t,
                            size_t i, char *err, size_t errlen)
{
    if (!tc || cJSON_IsNull(tc)) return 0;
    if (!cJSON_IsArray(tc)) {
        snprintf(err, errlen, "messages[%zu].tool_calls must be an array", i);
        return 1;
    }
    int n = cJSON_GetArraySize(tc);
    struct strata_chat_tool_call *calls = realloc(r->calls, (r->n_calls + (size_t)n + 1) * sizeof *calls);
    if (!calls) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    r->calls = calls;
    // turns point into calls by index until parsing ends (the array may move): see fix_calls
    t->tool_calls = (const void *)(uintptr_t)r->n_calls;
    t->n_tool_calls = (size_t)n;
    size_t k = 0;
    for (const cJSON *c = tc->child; c; c = c->next, k++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(name) || !(cJSON_IsString(args) || cJSON_IsObject(args))) {
            snprintf(err, errlen, "messages[%zu].tool_calls[%zu] needs function.name and function.arguments", i, k);
            return 1;
        }
        const char *a = cJSON_IsString(args) ? args->valuestring : srv_request_own(r, cJSON_PrintUnformatted(args));
        if (!a) {
            snprintf(err, errlen, "out of memory");
            return 1;
        }
        r->calls[r->n_calls++] = (struct strata_chat_tool_call){name->valuestring, a};
    }
    return 0;
}

static void fix_calls(struct srv_request *r)
{
    for (size_t i = 0; i < r->n_turns; i++) {
        if (r->turns[i].n_tool_calls) r->turns[i].tool_calls = r->calls + (uintptr_t)r->turns[i].tool_calls;
        else r->turns[i].tool_calls = NULL;
    }
}

// tools: [{"type": "function", "function": {...}}], kept as given (the template prints them).
static int parse_tools(struct srv_request *r, char *err, size_t errlen)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(r->root, "tools");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(r->root, "tool_choice");
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools)) {
        snprintf(err, errlen, "'tools' must be an array");
        return 1;
    }
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name"))) {
            snprintf(err, errlen, "tools[%d] needs function.name", i);
            return 1;
        }
    }
    if (cJSON_IsString(choice) && strcmp(choice->valuestring, "none") == 0) return 0;
    r->tools_json = cJSON_PrintUnformatted(tools);
    if (!r->tools_json) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    return 0;
}

static int parse_common(struct srv_request *r, char *err, size_t errlen)
{
    const cJSON *o = r->root;
    long l;
    bool f;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (model && !cJSON_IsString(model) && !cJSON_IsNull(model)) {
        snprintf(err, errlen, "'model' must be a string");
        return 1;
    }
    r->model = cJSON_IsString(model) ? model->valuestring : NULL;
    if (srv_get_int(o, "max_tokens", 1, 1L << 30, &l, &f, err, errlen)) return 1;
    if (f) r->max_tokens = (int)l;
    if (srv_get_int(o, "max_completion_tokens", 1, 1L << 30, &l, &f, err, errlen)) return 1;
    if (f) r->max_tokens = (int)l;
    if (srv_get_int(o, "n", 1, 1, &l, &f, err, errlen)) return 1;
    if (srv_get_sampling(o, r, 2, err, errlen)) return 1;
    if (srv_get_stops(o, "stop", r, err, errlen)) return 1;
    if (srv_get_bool(o, "stream", &r->stream, err, errlen)) return 1;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (so && !cJSON_IsNull(so) && (!cJSON_IsObject(so) || srv_get_bool(so, "include_usage", &r->include_usage, err, errlen))) {
        if (!*err) snprintf(err, errlen, "'stream_options' must be an object");
        return 1;
    }
    return 0;
}

static int parse_chat(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen)
{
    r->api = SRV_API_CHAT;
    if (srv_parse_body(body, len, r, err, errlen) || parse_common(r, err, errlen)) return 1;
    bool logprobs = false;
    long top = 0;
    if (srv_get_bool(r->root, "logprobs", &logprobs, err, errlen)) return 1;
    if (srv_get_int(r->root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &top, NULL, err, errlen)) return 1;
    r->top_logprobs = logprobs ? (int)top : -1;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(r->root, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        snprintf(err, errlen, "'messages' must be a non-empty array");
        return 1;
    }
    r->turns = calloc((size_t)cJSON_GetArraySize(msgs), sizeof *r->turns);
    if (!r->turns) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    size_t i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
        size_t k = 0;
        while (cJSON_IsString(role) && k < 5 && strcmp(role->valuestring, roles[k]) != 0) k++;
        if (!cJSON_IsString(role) || k == 5) {
            snprintf(err, errlen, "messages[%zu].role must be system, developer, user, assistant or tool", i);
            return 1;
        }
        char what[48];
        snprintf(what, sizeof what, "messages[%zu]", i);
        struct strata_chat_turn *t = &r->turns[r->n_turns++];
        t->role = k == 1 ? "system" : roles[k];
        t->content = srv_text_content(r, cJSON_GetObjectItemCaseSensitive(m, "content"), what, err, errlen);
        if (!t->content) return 1;
        if (parse_tool_calls(r, cJSON_GetObjectItemCaseSensitive(m, "tool_calls"), t, i, err, errlen)) return 1;
    }
    fix_calls(r);
    if (parse_tools(r, err, errlen)) return 1;
    srv_take_prefill(r);
    return 0;
}

static int parse_completions(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen)
{
    r->api = SRV_API_COMPLETIONS;
    if (srv_parse_body(body, len, r, err, errlen) || parse_common(r, err, errlen)) return 1;
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(r->root, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (cJSON_IsString(p)) {
        r->prompt = p->valuestring;
        return 0;
    }
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0 && cJSON_IsNumber(p->child)) {
        int n = cJSON_GetArraySize(p), i = 0;
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        if (!ids || !srv_request_own(r, (char *)ids)) {
            snprintf(err, errlen, "out of memory");
            return 1;
        }
        for (const cJSON *t = p->child; t; t = t->next) {
            if (!cJSON_IsNumber(t) || t->valuedouble < 0 || t->valuedouble > 2147483647.0 ||
                t->valuedouble != (double)(int32_t)t->valuedouble) {
                snprintf(err, errlen, "'prompt' token ids must be whole numbers >= 0");
                return 1;
            }
            ids[i++] = (int32_t)t->valuedouble;
        }
        r->prompt_ids = ids;
        r->n_prompt_ids = n;
        return 0;
    }
    snprintf(err, errlen, "'prompt' must be a string or an array of token ids");
    return 1;
}

static const char *finish_reason(const struct srv_result *res)
{
    return strcmp(res->finish, "eog") == 0 ? "stop" : res->finish;
}

static void add_usage(cJSON *o, const struct srv_result *res)
{
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", res->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", res->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", res->prompt_tokens + res->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", res->cached_tokens);
}

static cJSON *tool_calls_json(const struct srv_result *res, bool with_index)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < res->n_calls; i++) {
        char id[40];
        srv_make_id(id, sizeof id, "call_");
        cJSON *c = cJSON_CreateObject();
        if (with_index) cJSON_AddNumberToObject(c, "index", (double)i);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(fn, "name", res->calls[i].name);
        cJSON_AddStringToObject(fn, "arguments", res->calls[i].arguments);
        cJSON_AddItemToArray(a, c);
    }
    return a;
}

// OpenAI's token log-probability entry: the token's text, its bytes, its log-probability.
static cJSON *lp_entry(const struct srv_sched *s, int32_t id, float logprob)
{
    const char *piece = "";
    size_t n = 0;
    srv_sched_piece(s, id, &piece, &n);
    char *text = strndup(piece, n);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "token", text ? text : "");
    free(text);
    cJSON_AddNumberToObject(e, "logprob", logprob);
    cJSON *bytes = cJSON_AddArrayToObject(e, "bytes");
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)piece[i]));
    return e;
}

static cJSON *logprobs_json(const struct srv_job *j, const struct srv_sched *s)
{
    cJSON *lp = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(lp, "content");
    for (int t = 0; t < j->n_gen && j->lp; t++) {
        const struct srv_token_lp *x = &j->lp[t];
        cJSON *e = lp_entry(s, x->id, x->logprob);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < x->n_top; k++) cJSON_AddItemToArray(top, lp_entry(s, x->top_id[k], x->top_logprob[k]));
        cJSON_AddItemToArray(content, e);
    }
    return lp;
}

static int respond(const struct srv_request *r, const struct srv_result *res, const char *model_id,
                   const struct srv_job *j, const struct srv_sched *s, struct strata_strbuf *out)
{
    bool chat = r->api == SRV_API_CHAT;
    char id[48];
    srv_make_id(id, sizeof id, chat ? "chatcmpl-" : "cmpl-");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", chat ? "chat.completion" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)time(NULL));
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToArray(choices, c);
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) {
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        if (res->n_calls && !*res->content) cJSON_AddNullToObject(m, "content");
        else cJSON_AddStringToObject(m, "content", res->content);
        if (res->n_calls) cJSON_AddItemToObject(m, "tool_calls", tool_calls_json(res, false));
        if (r->top_logprobs >= 0) cJSON_AddItemToObject(c, "logprobs", logprobs_json(j, s));
        else cJSON_AddNullToObject(c, "logprobs");
    } else {
        cJSON_AddStringToObject(c, "text", res->content);
        cJSON_AddNullToObject(c, "logprobs");
    }
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(res));
    add_usage(o, res);
    srv_strbuf_json(out, o);
    cJSON_Delete(o);
    return out->oom ? -1 : 0;
}

static cJSON *chunk(const struct srv_request *r, const struct srv_stream *st, const char *model_id,
                    cJSON **choice)
{
    bool chat = r->api == SRV_API_CHAT;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", st->id);
    cJSON_AddStringToObject(o, "object", chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(o, "created", (double)st->created);
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices");
    if (choice) {
        *choice = cJSON_CreateObject();
        cJSON_AddNumberToObject(*choice, "index", 0);
        cJSON_AddItemToArray(choices, *choice);
    }
    return o;
}

static void emit(struct strata_strbuf *out, cJSON *o)
{
    strata_strbuf_puts(out, "data: ");
    srv_strbuf_json(out, o);
    strata_strbuf_puts(out, "\n\n");
    cJSON_Delete(o);
}

static void stream_text(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                        const char *text, size_t n, struct strata_strbuf *out)
{
    cJSON *c;
    cJSON *o = chunk(r, st, model_id, &c);
    char *t = strndup(text, n);
    if (r->api == SRV_API_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddStringToObject(d, "content", t ? t : "");
        cJSON_AddNullToObject(c, "logprobs");
    } else {
        cJSON_AddStringToObject(c, "text", t ? t : "");
        cJSON_AddNullToObject(c, "logprobs");
    }
    free(t);
    cJSON_AddNullToObject(c, "finish_reason");
    emit(out, o);
}

static void stream_begin(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                         int prompt_tokens, struct strata_strbuf *out)
{
    (void)prompt_tokens;
    srv_make_id(st->id, sizeof st->id, r->api == SRV_API_CHAT ? "chatcmpl-" : "cmpl-");
    st->created = (long)time(NULL);
    if (r->api != SRV_API_CHAT) return;
    cJSON *c;
    cJSON *o = chunk(r, st, model_id, &c);
    cJSON *d = cJSON_AddObjectToObject(c, "delta");
    cJSON_AddStringToObject(d, "role", "assistant");
    cJSON_AddStringToObject(d, "content", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddNullToObject(c, "finish_reason");
    emit(out, o);
}

static void stream_end(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                       const struct srv_result *res, struct strata_strbuf *out)
{
    cJSON *c;
    if (res->n_calls) {
        cJSON *o = chunk(r, st, model_id, &c);
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        cJSON_AddItemToObject(d, "tool_calls", tool_calls_json(res, true));
        cJSON_AddNullToObject(c, "logprobs");
        cJSON_AddNullToObject(c, "finish_reason");
        emit(out, o);
    }
    cJSON *o = chunk(r, st, model_id, &c);
    if (r->api == SRV_API_CHAT) cJSON_AddObjectToObject(c, "delta");
    else cJSON_AddStringToObject(c, "text", "");
    cJSON_AddNullToObject(c, "logprobs");
    cJSON_AddStringToObject(c, "finish_reason", finish_reason(res));
    emit(out, o);
    if (r->include_usage) {
        o = chunk(r, st, model_id, NULL);
        add_usage(o, res);
        emit(out, o);
    }
    strata_strbuf_puts(out, "data: [DONE]\n\n");
}

void srv_openai_error(int status, const char *message, struct strata_strbuf *out)
{
    const char *type = status == 401 ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 429 ? "rate_limit_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    cJSON *o = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", message);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    if (status == 401) cJSON_AddStringToObject(e, "code", "invalid_api_key");
    else cJSON_AddNullToObject(e, "code");
    srv_strbuf_json(out, o);
    cJSON_Delete(o);
}

const struct srv_api_ops srv_openai_chat = {
    "chat.completions", parse_chat, respond, stream_begin, stream_text, stream_end, srv_openai_error,
};
const struct srv_api_ops srv_openai_completions = {
    "completions", parse_completions, respond, stream_begin, stream_text, stream_end, srv_openai_error,
};
