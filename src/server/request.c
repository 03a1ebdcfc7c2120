// Request handling shared by the OpenAI and Anthropic front ends: the JSON body and its typed
// fields, sampling and stop fields, the prompt (chat template with tools, or raw text) turned
// into a job, and a finished job turned into content and tool calls.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "server/api.h"
#include "util/log.h"

void srv_request_free(struct srv_request *r)
{
    for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->turns);
    free(r->calls);
    free(r->tools_json);
    cJSON_Delete(r->root);
    memset(r, 0, sizeof *r);
}

char *srv_request_own(struct srv_request *r, char *s)
{
    if (!s) return NULL;
    char **o = realloc(r->owned, (r->n_owned + 1) * sizeof *o);
    if (!o) {
        free(s);
        return NULL;
    }
    r->owned = o;
    r->owned[r->n_owned++] = s;
    return s;
}

int srv_parse_body(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen)
{
    const char *end = NULL;
    r->root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!r->root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        snprintf(err, errlen, "the request body is not valid JSON (error near byte %zu of %zu)", at, len);
        return 1;
    }
    if (!cJSON_IsObject(r->root)) {
        snprintf(err, errlen, "the request body must be a JSON object");
        return 1;
    }
    r->top_logprobs = -1;
    r->prefix_reuse = true;
    r->sp = strata_sampling_default();
    return 0;
}

int srv_get_number(const cJSON *o, const char *key, double lo, double hi, double *out, bool *found,
                   char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (found) *found = false;
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi) {
        snprintf(err, errlen, "'%s' must be a number from %g to %g", key, lo, hi);
        return 1;
    }
    *out = v->valuedouble;
    if (found) *found = true;
    return 0;
}

int srv_get_int(const cJSON *o, const char *key, long lo, long hi, long *out, bool *found,
                char *err, size_t errlen)
{
    double d = 0;
    bool f = false;
    if (srv_get_number(o, key, (double)lo, (double)hi, &d, &f, err, errlen)) return 1;
    if (f && d != floor(d)) {
        snprintf(err, errlen, "'%s' must be a whole number", key);
        return 1;
    }
    if (f) *out = (long)d;
    if (found) *found = f;
    return 0;
}

int srv_get_bool(const cJSON *o, const char *key, bool *out, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        snprintf(err, errlen, "'%s' must be true or false", key);
        return 1;
    }
    *out = cJSON_IsTrue(v);
    return 0;
}

int srv_get_sampling(const cJSON *o, struct srv_request *r, double temp_max, char *err, size_t errlen)
{
    double d;
    long l;
    bool f;
    if (srv_get_number(o, "temperature", 0, temp_max, &d, &f, err, errlen)) return 1;
    if (f) r->sp.temperature = (float)d;
    if (srv_get_number(o, "top_p", 0, 1, &d, &f, err, errlen)) return 1;
    if (f) r->sp.top_p = (float)d;
    if (srv_get_number(o, "min_p", 0, 1, &d, &f, err, errlen)) return 1;
    if (f) r->sp.min_p = (float)d;
    if (srv_get_number(o, "repeat_penalty", 0.01, 100, &d, &f, err, errlen)) return 1;
    if (f) r->sp.repeat_penalty = (float)d;
    if (srv_get_int(o, "top_k", 0, 1L << 30, &l, &f, err, errlen)) return 1;
    if (f) r->sp.top_k = (int)l;
    if (srv_get_number(o, "seed", -9007199254740992.0, 9007199254740992.0, &d, &f, err, errlen)) return 1;
    if (f) {
        r->sp.seed = (uint64_t)(int64_t)d;
        r->has_seed = true;
    }
    if (srv_get_bool(o, "cache_prompt", &r->prefix_reuse, err, errlen)) return 1;
    if (srv_get_bool(o, "ignore_eos", &r->ignore_eos, err, errlen)) return 1;
    return 0;
}

int srv_get_stops(const cJSON *o, const char *key, struct srv_request *r, char *err, size_t errlen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        if (*v->valuestring) r->stop[r->n_stop++] = v->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > SRV_MAX_STOP) {
        snprintf(err, errlen, "'%s' must be a string or an array of at most %d strings", key, SRV_MAX_STOP);
        return 1;
    }
    for (const cJSON *s = v->child; s; s = s->next) {
        if (!cJSON_IsString(s)) {
            snprintf(err, errlen, "'%s' must hold strings only", key);
            return 1;
        }
        if (*s->valuestring) r->stop[r->n_stop++] = s->valuestring;
    }
    return 0;
}

const char *srv_text_content(struct srv_request *r, const cJSON *content, const char *what,
                             char *err, size_t errlen)
{
    if (!content || cJSON_IsNull(content)) return "";
    if (cJSON_IsString(content)) return content->valuestring;
    if (!cJSON_IsArray(content)) {
        snprintf(err, errlen, "%s: content must be a string or an array of text parts", what);
        return NULL;
    }
    struct strata_strbuf b = {0};
    strata_strbuf_put(&b, "", 0);
    for (const cJSON *p = content->child; p; p = p->next) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (cJSON_IsString(p)) {
            strata_strbuf_puts(&b, p->valuestring);
        } else if (cJSON_IsString(type) && strcmp(type->valuestring, "text") == 0 && cJSON_IsString(text)) {
            strata_strbuf_puts(&b, text->valuestring);
        } else {
            snprintf(err, errlen, "%s: only text content parts are supported (got type '%s')", what,
                     cJSON_IsString(type) ? type->valuestring : "?");
            free(b.s);
            return NULL;
        }
    }
    if (b.oom || !srv_request_own(r, b.s)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return b.s;
}

void srv_take_prefill(struct srv_request *r)
{
    if (r->n_turns > 0) {
        const struct strata_chat_turn *last = &r->turns[r->n_turns - 1];
        if (strcmp(last->role, "assistant") == 0 && last->n_tool_calls == 0) {
            r->prefill = last->content;
            r->n_turns--;
        }
    }
}

void srv_make_id(char *out, size_t cap, const char *prefix)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    unsigned char rnd[24];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < sizeof rnd; i++) rnd[i] = (unsigned char)(t >> (8 * (i % 8))) ^ (unsigned char)(i * 37);
    }
    size_t n = (size_t)snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof rnd && n + 1 < cap; i++) out[n++] = digits[rnd[i] % (sizeof digits - 1)];
    out[n < cap ? n : cap - 1] = '\0';
}

void srv_strbuf_json(struct strata_strbuf *b, const cJSON *v)
{
    char *s = cJSON_PrintUnformatted(v);
    if (!s) {
        b->oom = true;
        return;
    }
    strata_strbuf_puts(b, s);
    free(s);
}

static int render_prompt(struct srv_sched *s, const struct srv_request *r, char **text)
{
    if (r->api == SRV_API_COMPLETIONS) {
        *text = strdup(r->prompt ? r->prompt : "");
        return *text ? 0 : STRATA_ENOMEM;
    }
    int rc = strata_chat_apply_tools(srv_sched_engine(s), r->turns, r->n_turns,
                                     r->tools_json, true, text);
    if (rc == 0 && r->prefill && *r->prefill) {
        size_t a = strlen(*text), b = strlen(r->prefill);
        char *t = realloc(*text, a + b + 1);
        if (!t) {
            free(*text);
            *text = NULL;
            return STRATA_ENOMEM;
        }
        memcpy(t + a, r->prefill, b + 1);
        *text = t;
    }
    return rc;
}

int srv_build_job(struct srv_sched *s, const struct srv_request *r, int max_tokens_cap,
                  struct srv_job **out, char *err, size_t errlen)
{
    *out = NULL;
    struct srv_job *j = srv_job_new();
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return 500;
    }
    int rc;
    if (r->prompt_ids) {
        j->prompt = malloc((size_t)(r->n_prompt_ids ? r->n_prompt_ids : 1) * sizeof *j->prompt);
        rc = j->prompt ? 0 : STRATA_ENOMEM;
        if (rc == 0) memcpy(j->prompt, r->prompt_ids, (size_t)r->n_prompt_ids * sizeof *j->prompt);
        j->n_prompt = r->n_prompt_ids;
        for (int i = 0; rc == 0 && i < r->n_prompt_ids; i++) {
            if (r->prompt_ids[i] >= srv_sched_n_vocab(s)) {
                strata_log_error("prompt: token id %d is outside the vocabulary (%d)", (int)r->prompt_ids[i],
                                 srv_sched_n_vocab(s));
                rc = STRATA_EARG;
            }
        }
    } else {
        char *text = NULL;
        rc = render_prompt(s, r, &text);
        if (rc == 0) rc = srv_sched_tokenize(s, text, &j->prompt, &j->n_prompt);
        free(text);
    }
    const int n_ctx = srv_sched_n_ctx(s);
    int status = 0;
    if (rc == STRATA_ENOMEM || rc == -ENOMEM) {
        snprintf(err, errlen, "out of memory");
        status = 500;
    } else if (rc) {
        snprintf(err, errlen, "%s", strata_last_error());
        status = 400;
    } else if (j->n_prompt == 0) {
        snprintf(err, errlen, "the prompt is empty");
        status = 400;
    } else if (j->n_prompt >= n_ctx) {
        snprintf(err, errlen, "the prompt has %d tokens, the context holds %d", j->n_prompt, n_ctx);
        status = 400;
    }
    if (status) {
        srv_job_unref(j);
        return status;
    }
    int room = n_ctx - j->n_prompt;
    j->max_tokens = r->max_tokens > 0 ? r->max_tokens : room;
    if (j->max_tokens > room) j->max_tokens = room;
    if (max_tokens_cap > 0 && j->max_tokens > max_tokens_cap) j->max_tokens = max_tokens_cap;
    j->sp = r->sp;
    if (!r->has_seed && getrandom(&j->sp.seed, sizeof j->sp.seed, 0) != (ssize_t)sizeof j->sp.seed) {
        j->sp.seed = (uint64_t)time(NULL);
    }
    j->top_logprobs = r->top_logprobs;
    j->prefix_reuse = r->prefix_reuse;
    j->ignore_eos = r->ignore_eos;
    for (int i = 0; i < r->n_stop; i++) {
        j->stop[i] = strdup(r->stop[i]);
        if (!j->stop[i]) {
            srv_job_unref(j);
            snprintf(err, errlen, "out of memory");
            return 500;
        }
        j->n_stop = i + 1;
    }
    *out = j;
    return 0;
}

static bool has_tools(const struct srv_request *r)
{
    return r->tools_json && strcmp(r->tools_json, "[]") != 0;
}

int srv_make_result(struct srv_sched *s, const struct srv_request *r, struct srv_job *j,
                    struct srv_result *res)
{
    memset(res, 0, sizeof *res);
    res->text = j->text ? j->text : "";
    res->len = j->len;
    res->prompt_tokens = j->n_prompt;
    res->completion_tokens = j->n_gen;
    res->cached_tokens = j->n_cached;
    res->finish = j->finish == SRV_FINISH_STOP ? "stop" : j->finish == SRV_FINISH_LENGTH ? "length" : "eog";
    res->stop_word = j->stop_index >= 0 ? j->stop[j->stop_index] : NULL;
    enum strata_tool_format fmt = strata_engine_tool_format(srv_sched_engine(s));
    if (!has_tools(r) || fmt == STRATA_TOOLS_NONE) {
        res->content = strndup(res->text, res->len);
        return res->content ? 0 : STRATA_ENOMEM;
    }
    // Calls may begin in the prefill (a conversation that ends inside an assistant turn); the
    // content is what was generated, outside calls.
    size_t np = r->prefill ? strlen(r->prefill) : 0;
    char *full = malloc(np + res->len + 1);
    if (!full) return STRATA_ENOMEM;
    memcpy(full, r->prefill ? r->prefill : "", np);
    memcpy(full + np, res->text, res->len);
    full[np + res->len] = '\0';
    char *content = NULL;
    int rc = strata_chat_parse_tools(fmt, full, np + res->len, r->tools_json, &content, &res->calls,
                                     &res->n_calls);
    free(content);
    free(full);
    if (rc) return rc;
    struct strata_tool_call_out *own = NULL;
    size_t n_own = 0;
    rc = strata_chat_parse_tools(fmt, res->text, res->len, r->tools_json, &res->content, &own, &n_own);
    strata_chat_tool_calls_free(own, n_own);
    if (rc) return rc;
    if (res->n_calls) {
        size_t a = 0, e = strlen(res->content);
        while (a < e && strchr(" \t\r\n", res->content[a])) a++;
        while (e > a && strchr(" \t\r\n", res->content[e - 1])) e--;
        memmove(res->content, res->content + a, e - a);
        res->content[e - a] = '\0';
        res->finish = "tool_calls";
    }
    return 0;
}

void srv_result_free(struct srv_result *res)
{
    free(res->content);
    strata_chat_tool_calls_free(res->calls, res->n_calls);
    memset(res, 0, sizeof *res);
}
