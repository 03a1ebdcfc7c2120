// What the OpenAI and Anthropic front ends share: the parsed request, the table of functions
// each API fills (parse, respond, stream events, error shape), and the helpers of request.c.
#ifndef STRATA_SERVER_API_H
#define STRATA_SERVER_API_H

#include <cjson/cJSON.h>

#include "server/server.h"

enum srv_api { SRV_API_CHAT, SRV_API_COMPLETIONS, SRV_API_MESSAGES, SRV_API_COUNT };

struct srv_request {
    enum srv_api api;
    cJSON *root;                          // the body; owns the borrowed strings below
    struct strata_chat_turn *turns;       // [n_turns] conversation (chat APIs)
    size_t n_turns;
    struct strata_chat_tool_call *calls;  // storage of every turn's tool calls
    size_t n_calls;
    char **owned;                         // strings built while parsing, freed with the request
    size_t n_owned;
    char *tools_json;                     // OpenAI-form tool array (owned) or NULL
    const char *prompt;                   // /v1/completions text
    const int32_t *prompt_ids;            // /v1/completions token ids (owned when set)
    int n_prompt_ids;
    const char *prefill;                  // a final assistant turn, continued by the model
    const char *model;
    int max_tokens;                       // 0: not given
    struct strata_sampling sp;
    bool has_seed;
    char *stop[SRV_MAX_STOP];             // borrowed from root
    int n_stop;
    bool stream, include_usage;
    int top_logprobs;                     // -1: no logprobs
    bool prefix_reuse;
    bool ignore_eos;
};

// The outcome of a finished job in the API's terms.
struct srv_result {
    const char *text;                     // generated text (the job's)
    size_t len;
    char *content;                        // text without tool calls (owned)
    struct strata_tool_call_out *calls;   // owned
    size_t n_calls;
    const char *finish;                   // "eog", "stop", "length", "tool_calls"
    const char *stop_word;                // matched stop string or NULL
    int prompt_tokens, completion_tokens, cached_tokens;
};

// Streaming state, one per streamed response.
struct srv_stream {
    char id[48];
    long created;
    size_t sent;                          // bytes of job text sent as content
    bool content_open;                    // Anthropic: a text block is open
    int block;                            // Anthropic: index of the next content block
};

struct srv_ctx;                           // http.c's server (model id, scheduler, config)

struct srv_api_ops {
    const char *name;
    // Parse and check a body; on error fill err and return non-zero (400).
    int (*parse)(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen);
    // Complete response body for a finished job.
    int (*respond)(const struct srv_request *r, const struct srv_result *res, const char *model_id,
                   const struct srv_job *j, const struct srv_sched *s, struct strata_strbuf *out);
    void (*stream_begin)(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                         int prompt_tokens, struct strata_strbuf *out);
    void (*stream_text)(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                        const char *text, size_t n, struct strata_strbuf *out);
    void (*stream_end)(const struct srv_request *r, struct srv_stream *st, const char *model_id,
                       const struct srv_result *res, struct strata_strbuf *out);
    // Error body in the API's shape.
    void (*error)(int status, const char *message, struct strata_strbuf *out);
};

extern const struct srv_api_ops srv_openai_chat, srv_openai_completions, srv_anthropic_messages,
    srv_anthropic_count_tokens;
void srv_openai_error(int status, const char *message, struct strata_strbuf *out);

// ---- request.c ----------------------------------------------------------------------------------

void srv_request_free(struct srv_request *r);
// Body -> root object; err on failure.
int srv_parse_body(const char *body, size_t len, struct srv_request *r, char *err, size_t errlen);
// Optional fields: absent is fine, a wrong type or range is an error naming the field.
int srv_get_number(const cJSON *o, const char *key, double lo, double hi, double *out, bool *found,
                   char *err, size_t errlen);
int srv_get_int(const cJSON *o, const char *key, long lo, long hi, long *out, bool *found,
                char *err, size_t errlen);
int srv_get_bool(const cJSON *o, const char *key, bool *out, char *err, size_t errlen);
// Sampling fields shared by every API (temperature, top_p, top_k, min_p, seed, repeat_penalty).
int srv_get_sampling(const cJSON *o, struct srv_request *r, double temp_max, char *err, size_t errlen);
// A string or an array of strings (at most SRV_MAX_STOP): the stop strings.
int srv_get_stops(const cJSON *o, const char *key, struct srv_request *r, char *err, size_t errlen);
// Keep a malloc'd string until the request is freed; NULL on failure (s freed).
char *srv_request_own(struct srv_request *r, char *s);
// Content given as a string or an array of {"type": "text", "text": ...} parts -> one string.
const char *srv_text_content(struct srv_request *r, const cJSON *content, const char *what,
                             char *err, size_t errlen);
// Ends the conversation: a final assistant turn without tool calls becomes the prefill.
void srv_take_prefill(struct srv_request *r);

// Prompt text -> job (tokens, limits, sampling); HTTP status and err on failure.
int srv_build_job(struct srv_sched *s, const struct srv_request *r, int max_tokens_cap,
                  struct srv_job **out, char *err, size_t errlen);
// Finished job -> result (content and tool calls split as the request's tools ask).
int srv_make_result(struct srv_sched *s, const struct srv_request *r, struct srv_job *j,
                    struct srv_result *res);
void srv_result_free(struct srv_result *res);
// Random id with a prefix ("chatcmpl-", "msg_", "call_", "toolu_").
void srv_make_id(char *out, size_t cap, const char *prefix);
// The JSON text of a cJSON value, appended.
void srv_strbuf_json(struct strata_strbuf *b, const cJSON *v);

#endif
