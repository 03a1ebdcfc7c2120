// The Anthropic Messages API: /v1/messages requests (system, content blocks, tool_use and
// tool_result blocks, stop_sequences), responses, the streamed events (message_start,
// content_block_start/delta/stop, message_delta, message_stop), count_tokens and Anthropic's
// error shape.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"

static struct strata_chat_turn *add_turn(struct srv_request *r, size_t *cap, const char *role,
                                         const char *content)
{
    if (r->n_turns == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        struct strata_chat_turn *t = realloc(r->turns, *cap * sizeof *t);
        if (!t) return NULL;
        r->turns = t;
    }
    struct strata_chat_turn *t = &r->turns[r->n_turns++];
    *t = (struct strata_chat_turn){role, content, NULL, 0};
    return t;
}

// One message's content blocks -> turns: text blocks join into one turn of the message's role,
// tool_use blocks become tool calls of an assistant turn, tool_result blocks "tool" turns.
static int parse_blocks(struct srv_request *r, size_t *cap, const char *role, const cJSON *content,
                        size_t i, char *err, size_t errlen)
{
    char what[48];
    snprintf(what, sizeof what, "messages[%zu]", i);
    if (!cJSON_IsArray(content)) {
        const char *text = srv_text_content(r, content, what, err, errlen);
        return text && add_turn(r, cap, role, text) ? 0 : (*err ? 1 : (snprintf(err, errlen, "out of memory"), 1));
    }
    struct strata_strbuf text = {0};
    strata_strbuf_put(&text, "", 0);
    size_t first_call = r->n_calls, k = 0;
    for (const cJSON *b = content->child; b; b = b->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(b, "type");
        const char *ty = cJSON_IsString(type) ? type->valuestring : "";
        if (strcmp(ty, "text") == 0 && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "text"))) {
            strata_strbuf_puts(&text, cJSON_GetObjectItemCaseSensitive(b, "text")->valuestring);
        } else if (strcmp(ty, "tool_use") == 0 && strcmp(role, "assistant") == 0) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(b, "name");
            const cJSON *input = cJSON_GetObjectItemCaseSensitive(b, "input");
            if (!cJSON_IsString(name) || !cJSON_IsObject(input)) {
                snprintf(err, errlen, "%s.content[%zu]: tool_use needs name and an input object", what, k);
                goto fail;
            }
            struct strata_chat_tool_call *c = realloc(r->calls, (r->n_calls + 1) * sizeof *c);
            char *args = srv_request_own(r, cJSON_PrintUnformatted(input));
            if (!c || !args) {
                if (c) r->calls = c;
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            r->calls = c;
            r->calls[r->n_calls++] = (struct strata_chat_tool_call){name->valuestring, args};
        } else if (strcmp(ty, "tool_result") == 0 && strcmp(role, "user") == 0) {
            char rwhat[64];
            snprintf(rwhat, sizeof rwhat, "%s.content[%zu]", what, k);
            const char *res = srv_text_content(r, cJSON_GetObjectItemCaseSensitive(b, "content"), rwhat, err, errlen);
            if (!res || !add_turn(r, cap, "tool", res)) {
                if (!*err) snprintf(err, errlen, "out of memory");
                goto fail;
            }
        } else {
            snprintf(err, errlen, "%s.content[%zu]: block type '%s' is not supported in a %s message", what, k,
                     ty, role);
            goto fail;
        }
    }
    if (text.oom) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (text.len || r->n_calls > first_call || k == 0) {
        struct strata_chat_turn *t = add_turn(r, cap, role, srv_request_own(r, text.s));
        text.s = NULL;
        if (!t || !t->content) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        t->tool_calls = (const void *)(uintptr_t)first_call;  // an index until fix_calls
        t->n_tool_calls = r->n_calls - first_call;
    }
    free(text.s);
    return 0;
fail:
    free(text.s);
    return 1;
}

// tools: [{"name", "description", "input_schema"}] -> the OpenAI form the templates print.
static int parse_tools(struct srv_request *r, char *err, size_t errlen)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(r->root, "tools");
    const cJSON *choice = cJSON_GetObjectItemCaseSensitive(r->root, "tool_choice");
    const cJSON *ctype = cJSON_GetObjectItemCaseSensitive(choice, "type");
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools)) {
        snprintf(err, errlen, "tools: must be an array");
        return 1;
    }
    cJSON *out = cJSON_CreateArray();
    int i = 0;
    for (const cJSON *t = tools->child; t; t = t->next, i++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "input_schema");
        if (!cJSON_IsString(name) || (schema && !cJSON_IsObject(schema))) {
            snprintf(err, errlen, "tools.%d: needs a name and an input_schema object", i);
            cJSON_Delete(out);
            return 1;
        }
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "function");
        cJSON *fn = cJSON_AddObjectToObject(o, "function");
        cJSON_AddStringToObject(fn, "name", name->valuestring);
        if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
        if (schema) cJSON_AddItemToObject(fn, "parameters", cJSON_Duplicate(schema, 1));
        cJSON_AddItemToArray(out, o);
    }
    if (!(cJSON_IsString(ctype) && strcmp(ctype->valuestring, "none") == 0)) {
        r->tools_json = cJSON_PrintUnformatted(out);
    }
    cJSON_Delete(out);
    return 0;
}

static int parse_request(const char *body, size_t len, struct srv_request *r, bool need_max_tokens,
                         char *err, size_t errlen)
{
    r->api = SRV_API_MESSAGES;
    if (srv_parse_body(body, len, r, err, errlen)) return 1;
    const cJSON *o = r->root;
    long l;
    bool f;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (!cJSON_IsString(model)) {
        snprintf(err, errlen, "model: Field required (a string)");
        return 1;
    }
    r->model = model->valuestring;
    if (srv_get_int(o, "max_tokens", 1, 1L << 30, &l, &f, err, errlen)) return 1;
    if (!f && need_max_tokens) {
        snprintf(err, errlen, "max_tokens: Field required");
        return 1;
    }
    r->max_tokens = f ? (int)l : 1;
    if (srv_get_sampling(o, r, 1, err, errlen)) return 1;
    if (srv_get_stops(o, "stop_sequences", r, err, errlen)) return 1;
    if (srv_get_bool(o, "stream", &r->stream, err, errlen)) return 1;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0) {
        snprintf(err, errlen, "messages: must be a non-empty array");
        return 1;
    }
    size_t cap = 0;
    const cJSON *system = cJSON_GetObjectItemCaseSensitive(o, "system");
    if (system && !cJSON_IsNull(system)) {
        const char *s = srv_text_content(r, system, "system", err, errlen);
        if (!s || !add_turn(r, &cap, "system", s)) {
            if (!*err) snprintf(err, errlen, "out of memory");
            return 1;
        }
    }
    size_t i = 0;
    for (const cJSON *m = msgs->child; m; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant"))) {
            snprintf(err, errlen, "messages.%zu.role: must be 'user' or 'assistant'", i);
            return 1;
        }
        if (parse_blocks(r, &cap, role->valuestring[0] == 'u' ? "user" : "assistant",
                         cJSON_GetObjectItemCaseSensitive(m, "content"), i, err, errlen)) return 1;
    }
    for (size_t t = 0; t < r->n_turns; t++) {
        r->turns[t].tool_calls = r->turns[t].n_tool_calls ? r->calls + (uintptr_t)r->turns[t].tool_calls : NULL;
    }
    if (parse_tools(r, err, errlen)) return 1;
    srv_take_prefill(r);
    return 0;
}

static int parse(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen)
{
    return parse_request(body, len, r, true, err, errlen);
}

static int parse_count(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen)
{
    return parse_request(body, len, r, false, err, errlen);
}

static const char *stop_reason(const struct srv_result *res)
{
    if (strcmp(res->finish, "tool_calls") == 0) return "tool_use";
    if (strcmp(res->finish, "length") == 0) return "max_tokens";
    if (strcmp(res->finish, "stop") == 0) return "stop_sequence";
    return "end_turn";
}

static cJSON *tool_use_block(const struct strata_tool_call_out *c, bool streamed)
{
    char id[40];
    srv_make_id(id, sizeof id, "toolu_");
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "type", "tool_use");
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddStringToObject(b, "name", c->name);
    cJSON *input = streamed ? cJSON_CreateObject() : cJSON_Parse(c->arguments);
    cJSON_AddItemToObject(b, "input", input ? input : cJSON_CreateObject());
    return b;
}

static void add_usage(cJSON *o, int input_tokens, int output_tokens, int cached)
{
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "input_tokens", input_tokens);
    cJSON_AddNumberToObject(u, "output_tokens", output_tokens);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
}

static int respond(const struct srv_request *r, const struct srv_result *res, const char *model_id,
                   const struct srv_job *j, const struct srv_sched *s, struct strata_strbuf *out)
{
    (void)r;
    (void)j;
    (void)s;
    char id[48];
    srv_make_id(id, sizeof id, "msg_");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", model_id);
    cJSON *content = cJSON_AddArrayToObject(o, "content");
    if (*res->content || !res->n_calls) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", res->content);
        cJSON_AddItemToArray(content, b);
    }
    for (size_t i = 0; i < res->n_calls; i++) cJSON_AddItemToArray(content, tool_use_block(&res->calls[i], false));
    cJSON_AddStringToObject(o, "stop_reason", stop_reason(res));
    if (res->stop_word) cJSON_AddStringToObject(o, "stop_sequence", res->stop_word);
    else cJSON_AddNullToObject(o, "stop_sequence");
    add_usage(o, res->prompt_tokens, res->completion_tokens, res->cached_tokens);
    srv_strbuf_json(out, o);
    cJSON_Delete(o);
    return out->oom ? -1 : 0;
}

static void event(struct strata_strbuf *out, const char *name, cJSON *o)
{
    cJSON_AddStringToObject(o, "type", name);
    // "type" first, as Anthropic sends it
    cJSON *type = cJSON_DetachItemFromObjectCaseSensitive(o, "type");
    type->next = o->child;
    if (o->child) o->child->prev = type;
    o->child = type;
    strata_strbuf_printf(out, "event: %s\ndata: ", name);
    srv_strbuf_json(out, o);
    strata_strbuf_puts(out, "\n\n");
    cJSON_Delete(o);
}

static void block_start_text(struct srv_stream *st, struct strata_strbuf *out)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", st->block);
    cJSON *b = cJSON_AddObjectToObject(o, "content_block");
    cJSON_AddStringToObject(b, "type", "text");
    cJSON_AddStringToObject(b, "text", "");
    event(out, "content_block_start", o);
    st->content_open = true;
}

static void block_stop(struct srv_stream *st, struct strata_strbuf *out)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", st->block++);
    event(out, "content_block_stop", o);
    st->content_open = false;
}

static void stream_begin(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                         int prompt_tokens, struct strata_strbuf *out)
{
    (void)r;
    srv_make_id(st->id, sizeof st->id, "msg_");
    cJSON *o = cJSON_CreateObject();
    cJSON *m = cJSON_AddObjectToObject(o, "message");
    cJSON_AddStringToObject(m, "id", st->id);
    cJSON_AddStringToObject(m, "type", "message");
    cJSON_AddStringToObject(m, "role", "assistant");
    cJSON_AddStringToObject(m, "model", model_id);
    cJSON_AddArrayToObject(m, "content");
    cJSON_AddNullToObject(m, "stop_reason");
    cJSON_AddNullToObject(m, "stop_sequence");
    add_usage(m, prompt_tokens, 0, 0);
    event(out, "message_start", o);
    block_start_text(st, out);
    event(out, "ping", cJSON_CreateObject());
}

static void stream_text(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                        const char *text, size_t n, struct strata_strbuf *out)
{
    (void)r;
    (void)model_id;
    if (!st->content_open) block_start_text(st, out);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "index", st->block);
    cJSON *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", "text_delta");
    char *t = strndup(text, n);
    cJSON_AddStringToObject(d, "text", t ? t : "");
    free(t);
    event(out, "content_block_delta", o);
}

static void stream_end(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                       const struct srv_result *res, struct strata_strbuf *out)
{
    (void)r;
    (void)model_id;
    if (st->content_open) block_stop(st, out);
    for (size_t i = 0; i < res->n_calls; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", st->block);
        cJSON_AddItemToObject(o, "content_block", tool_use_block(&res->calls[i], true));
        event(out, "content_block_start", o);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "index", st->block);
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "type", "input_json_delta");
        cJSON_AddStringToObject(d, "partial_json", res->calls[i].arguments);
        event(out, "content_block_delta", o);
        block_stop(st, out);
    }
    cJSON *o = cJSON_CreateObject();
    cJSON *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "stop_reason", stop_reason(res));
    if (res->stop_word) cJSON_AddStringToObject(d, "stop_sequence", res->stop_word);
    else cJSON_AddNullToObject(d, "stop_sequence");
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "output_tokens", res->completion_tokens);
    event(out, "message_delta", o);
    event(out, "message_stop", cJSON_CreateObject());
}

static void error(int status, const char *message, struct strata_strbuf *out)
{
    const char *type = status == 401 ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 413 ? "request_too_large"
                       : status == 429 ? "rate_limit_error"
                       : status == 503 ? "overloaded_error"
                       : status >= 500 ? "api_error"
                                       : "invalid_request_error";
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "error");
    cJSON *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddStringToObject(e, "message", message);
    srv_strbuf_json(out, o);
    cJSON_Delete(o);
}

const struct srv_api_ops srv_anthropic_messages = {
    "messages", parse, respond, stream_begin, stream_text, stream_end, error,
};
// /v1/messages/count_tokens: parsed and rendered as a message, answered by http.c.
const struct srv_api_ops srv_anthropic_count_tokens = {
    "count_tokens", parse_count, NULL, NULL, NULL, NULL, error,
};
