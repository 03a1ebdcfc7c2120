// HTTP on libmicrohttpd, one thread per connection: routing, the body limit, the API key,
// errors in each API's shape, streamed responses (server-sent events) and client disconnects.
//
// A generation request is parsed by its API (openai.c, anthropic.c), rendered and tokenized
// (request.c) and queued as a job for the scheduler (sched.c). The connection's thread then
// waits on the job: for a plain response until it is done, for a stream through the content
// reader callback, which turns new text into events as it comes. Both poll the socket while
// waiting, so a client that goes away cancels its job at the next step and frees its session.
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/api.h"
#include "util/log.h"
#include "util/mem.h"
#include "util/time.h"

extern const char srv_page_html[];
extern const unsigned srv_page_html_len;

struct srv_ctx {
    struct srv_config cfg;
    char model_id[256];
    _Atomic(struct srv_sched *) sched;  // NULL while the model loads
    atomic_bool stopping;
    atomic_uint_least64_t by_status[6];  // responses by status class: 1xx..5xx, [0] unused
    atomic_uint_least64_t disconnects;
    double t_start;
};

enum conn_phase { PHASE_BODY, PHASE_STREAM, PHASE_DONE };

struct conn {
    struct srv_ctx *ctx;
    struct strata_strbuf body;
    bool too_large;
    enum conn_phase phase;
    const struct srv_api_ops *api;
    struct srv_request req;
    struct srv_job *job;
    struct srv_stream st;
    bool tools;              // split tool calls out of the output
    size_t seen;             // job text already looked at (final part)
    struct strata_strbuf out;      // events not yet handed to libmicrohttpd
    size_t out_pos;
    int fd;
};

// ---- small helpers ------------------------------------------------------------------------------

static bool client_gone(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static enum MHD_Result send_body(struct conn *c, struct MHD_Connection *mc, int status,
                                 const char *type, const char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(mc, (unsigned)status, r);
    MHD_destroy_response(r);
    if (status >= 100 && status < 600) atomic_fetch_add(&c->ctx->by_status[status / 100], 1);
    return ret;
}

static enum MHD_Result send_json(struct conn *c, struct MHD_Connection *mc, int status, struct strata_strbuf *b)
{
    if (b->oom) return send_body(c, mc, 500, "text/plain", "out of memory\n", 14);
    return send_body(c, mc, status, "application/json", b->s ? b->s : "{}", b->s ? b->len : 2);
}

static enum MHD_Result send_error(struct conn *c, struct MHD_Connection *mc, int status, const char *msg)
{
    struct strata_strbuf b = {0};
    (c->api ? c->api->error : srv_openai_error)(status, msg, &b);
    enum MHD_Result r = send_json(c, mc, status, &b);
    free(b.s);
    return r;
}

// Constant time in the length of the given key.
static bool key_equal(const char *given, const char *want)
{
    size_t a = strlen(given), b = strlen(want);
    unsigned char diff = a != b;
    for (size_t i = 0; i < a; i++) diff |= (unsigned char)given[i] ^ (unsigned char)want[i % (b ? b : 1)];
    return diff == 0;
}

static bool authorized(const struct srv_ctx *ctx, struct MHD_Connection *mc)
{
    if (!ctx->cfg.api_key) return true;
    const char *x = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "x-api-key");
    if (x && key_equal(x, ctx->cfg.api_key)) return true;
    const char *auth = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    return auth && strncasecmp(auth, "Bearer ", 7) == 0 && key_equal(auth + 7, ctx->cfg.api_key);
}

// ---- plain endpoints ------------------------------------------------------------------------------

static enum MHD_Result get_models(struct conn *c, struct MHD_Connection *mc)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", c->ctx->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddStringToObject(m, "type", "model");  // Anthropic's fields beside OpenAI's
    cJSON_AddStringToObject(m, "display_name", c->ctx->model_id);
    cJSON_AddNumberToObject(m, "created", (double)(long)c->ctx->t_start);
    cJSON_AddStringToObject(m, "created_at", "1970-01-01T00:00:00Z");
    cJSON_AddStringToObject(m, "owned_by", "strata");
    cJSON_AddItemToArray(data, m);
    cJSON_AddBoolToObject(o, "has_more", false);
    cJSON_AddStringToObject(o, "first_id", c->ctx->model_id);
    cJSON_AddStringToObject(o, "last_id", c->ctx->model_id);
    struct strata_strbuf b = {0};
    srv_strbuf_json(&b, o);
    cJSON_Delete(o);
    enum MHD_Result r = send_json(c, mc, 200, &b);
    free(b.s);
    return r;
}

static enum MHD_Result get_metrics(struct conn *c, struct MHD_Connection *mc)
{
    struct srv_ctx *ctx = c->ctx;
    struct srv_sched *s = atomic_load(&ctx->sched);
    struct srv_sched_stats st = {0};
    if (s) srv_sched_stats(s, &st);
    struct strata_strbuf b = {0};
    strata_strbuf_printf(&b, "# TYPE strata_up gauge\nstrata_up %d\n", s != NULL);
    strata_strbuf_puts(&b, "# TYPE strata_http_responses_total counter\n");
    for (int k = 1; k < 6; k++)
        strata_strbuf_printf(&b, "strata_http_responses_total{class=\"%dxx\"} %llu\n", k,
                       (unsigned long long)atomic_load(&ctx->by_status[k]));
    strata_strbuf_printf(&b,
                   "# TYPE strata_client_disconnects_total counter\nstrata_client_disconnects_total %llu\n"
                   "# TYPE strata_requests_total counter\nstrata_requests_total %llu\n"
                   "# TYPE strata_prompt_tokens_total counter\nstrata_prompt_tokens_total %llu\n"
                   "# TYPE strata_prompt_tokens_cached_total counter\nstrata_prompt_tokens_cached_total %llu\n"
                   "# TYPE strata_generated_tokens_total counter\nstrata_generated_tokens_total %llu\n"
                   "# TYPE strata_forward_passes_total counter\nstrata_forward_passes_total %llu\n"
                   "# TYPE strata_forward_seconds_total counter\nstrata_forward_seconds_total %.6f\n"
                   "# TYPE strata_decode_seconds_total counter\nstrata_decode_seconds_total %.6f\n"
                   "# TYPE strata_decode_tokens_per_second gauge\nstrata_decode_tokens_per_second %.3f\n"
                   "# TYPE strata_requests_active gauge\nstrata_requests_active %d\n"
                   "# TYPE strata_queue_depth gauge\nstrata_queue_depth %d\n"
                   "# TYPE strata_kv_cache_bytes gauge\nstrata_kv_cache_bytes %llu\n",
                   (unsigned long long)atomic_load(&ctx->disconnects), (unsigned long long)st.requests,
                   (unsigned long long)st.prompt_tokens, (unsigned long long)st.cached_tokens,
                   (unsigned long long)st.generated_tokens, (unsigned long long)st.forward_passes,
                   st.busy_s, st.decode_s, st.decode_s > 0 ? st.generated_tokens / st.decode_s : 0.0, st.active,
                   st.queued, (unsigned long long)st.kv_bytes);
    static const char *const tier_name[STRATA_TIER_COUNT] = {"ram", "vram"};
    static const char *const metric[] = {"hits_total", "misses_total", "evictions_total", "read_bytes_total",
                                         "io_wait_seconds_total", "cache_bytes"};
    for (size_t k = 0; k < sizeof metric / sizeof metric[0]; k++) {
        strata_strbuf_printf(&b, "# TYPE strata_expert_%s %s\n", metric[k], k == 5 ? "gauge" : "counter");
        for (int t = 0; t < STRATA_TIER_COUNT; t++) {
            const struct strata_expert_stats *e = &st.experts[t];
            if (!e->present && t != STRATA_TIER_HOST) continue;
            const double v[] = {(double)e->hits, (double)e->misses, (double)e->evictions, (double)e->bytes_read,
                                e->io_wait_s, (double)e->slot_bytes};
            strata_strbuf_printf(&b, "strata_expert_%s{tier=\"%s\"} %.15g\n", metric[k], tier_name[t], v[k]);
        }
    }
    if (st.n_threads) {  // the CPU backend's threads: serial, working, idle inside parallel runs
        strata_strbuf_printf(&b, "# TYPE strata_cpu_threads gauge\nstrata_cpu_threads %d\n"
                                 "# TYPE strata_cpu_thread_seconds_total counter\n", st.n_threads);
        static const char *const pass[2] = {"prompt", "decode"};
        for (int k = 0; k < 2; k++) {
            const struct strata_thread_stats *t = &st.threads[k];
            const double n = st.n_threads;
            // serial: the other threads' time while one thread ran alone
            const double v[3] = {(n - 1) * (t->t_pass - t->t_run), t->t_busy, n * t->t_run - t->t_busy};
            static const char *const kind[3] = {"idle_serial", "busy", "idle_in_runs"};
            for (int i = 0; i < 3; i++)
                strata_strbuf_printf(&b, "strata_cpu_thread_seconds_total{pass=\"%s\",kind=\"%s\"} %.6f\n", pass[k],
                                     kind[i], v[i]);
        }
    }
    uint64_t anon, huge;  // the weights' pages: 4 KiB pages made prompts several times slower on a VM
    if (strata_anon_memory(&anon, &huge)) {
        strata_strbuf_printf(&b,
                             "# TYPE strata_memory_anon_bytes gauge\nstrata_memory_anon_bytes %" PRIu64 "\n"
                             "# TYPE strata_memory_anon_huge_bytes gauge\nstrata_memory_anon_huge_bytes %" PRIu64 "\n"
                             "# TYPE strata_thp_mode gauge\nstrata_thp_mode{mode=\"%s\"} 1\n",
                             anon, huge, strata_thp_mode());
    }
    enum MHD_Result r = send_body(c, mc, 200, "text/plain; version=0.0.4", b.s ? b.s : "", b.len);
    free(b.s);
    return r;
}

// ---- generation ---------------------------------------------------------------------------------

// Under no lock: copy the job's final text and state.
static void job_snapshot(struct srv_job *j, struct strata_strbuf *text, size_t *n_final, bool *done)
{
    pthread_mutex_lock(&j->mu);
    text->len = 0;
    strata_strbuf_put(text, j->text ? j->text : "", j->n_final);
    *n_final = j->n_final;
    *done = j->done;
    pthread_mutex_unlock(&j->mu);
}

// How much of text[0..n) may go out as content now: all of it without tools; with tools, up to
// a possible tool call and not its leading whitespace (dropped if a call follows).
static size_t sendable(const struct conn *c, const char *text, size_t n)
{
    if (!c->tools) return n;
    size_t safe = strata_chat_tool_safe_len(text, n);
    while (safe > c->st.sent && strchr(" \t\r\n", text[safe - 1])) safe--;
    return safe > c->st.sent ? safe : c->st.sent;
}

static void stream_error(struct conn *c, const char *msg)
{
    struct strata_strbuf e = {0};
    c->api->error(500, msg, &e);
    if (c->req.api == SRV_API_MESSAGES) strata_strbuf_printf(&c->out, "event: error\ndata: %s\n\n", e.s ? e.s : "{}");
    else strata_strbuf_printf(&c->out, "data: %s\n\n", e.s ? e.s : "{}");
    free(e.s);
}

// Wait a little for the job, then turn what is new into events in c->out.
static void stream_produce(struct conn *c)
{
    struct srv_job *j = c->job;
    srv_job_wait(j, c->seen, 100);
    struct strata_strbuf text = {0};
    size_t n_final;
    bool done;
    job_snapshot(j, &text, &n_final, &done);
    const char *model = c->ctx->model_id;
    size_t upto = sendable(c, text.s ? text.s : "", n_final);
    if (upto > c->st.sent) {
        c->api->stream_text(&c->req, &c->st, model, text.s + c->st.sent, upto - c->st.sent, &c->out);
        c->st.sent = upto;
    }
    c->seen = n_final;
    if (done) {
        if (j->finish == SRV_FINISH_ERROR) {
            stream_error(c, j->error[0] ? j->error : "generation failed");
        } else if (j->finish != SRV_FINISH_CANCELLED) {
            struct srv_result res;
            if (srv_make_result(atomic_load(&c->ctx->sched), &c->req, j, &res) == 0) {
                // The content not sent yet: what follows the sent part (without its leading
                // whitespace, which the result trims) in the result's content.
                const char *sent = text.s ? text.s : "";
                size_t lead = 0;
                while (lead < c->st.sent && strchr(" \t\r\n", sent[lead])) lead++;
                size_t k = c->st.sent - lead, clen = strlen(res.content);
                if (res.n_calls == 0) {
                    if (j->len > c->st.sent)
                        c->api->stream_text(&c->req, &c->st, model, res.text + c->st.sent, j->len - c->st.sent, &c->out);
                } else if (k <= clen && strncmp(res.content, sent + lead, k) == 0 && clen > k) {
                    c->api->stream_text(&c->req, &c->st, model, res.content + k, clen - k, &c->out);
                }
                c->api->stream_end(&c->req, &c->st, model, &res, &c->out);
            } else {
                stream_error(c, "out of memory");
            }
            srv_result_free(&res);
        }
        c->phase = PHASE_DONE;
    }
    free(text.s);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct conn *c = cls;
    for (;;) {
        if (c->out.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (c->out_pos < c->out.len) {
            size_t n = c->out.len - c->out_pos < max ? c->out.len - c->out_pos : max;
            memcpy(buf, c->out.s + c->out_pos, n);
            c->out_pos += n;
            if (c->out_pos == c->out.len) c->out.len = c->out_pos = 0;
            return (ssize_t)n;
        }
        if (c->phase == PHASE_DONE) return MHD_CONTENT_READER_END_OF_STREAM;
        if (atomic_load(&c->ctx->stopping) || client_gone(c->fd)) {
            atomic_store(&c->job->cancel, true);
            atomic_fetch_add(&c->ctx->disconnects, 1);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        stream_produce(c);
    }
}

static enum MHD_Result generate(struct conn *c, struct MHD_Connection *mc)
{
    struct srv_ctx *ctx = c->ctx;
    struct srv_sched *s = atomic_load(&ctx->sched);
    if (!s) return send_error(c, mc, 503, "the model is still loading");
    char err[512] = "";
    if (c->api->parse(c->body.s ? c->body.s : "", c->body.len, &c->req, err, sizeof err)) {
        return send_error(c, mc, 400, err[0] ? err : "bad request");
    }
    int status = srv_build_job(s, &c->req, ctx->cfg.max_tokens, &c->job, err, sizeof err);
    if (status) return send_error(c, mc, status, err);
    if (c->api == &srv_anthropic_count_tokens) {
        struct strata_strbuf b = {0};
        strata_strbuf_printf(&b, "{\"input_tokens\":%d}", c->job->n_prompt);
        enum MHD_Result ret = send_json(c, mc, 200, &b);
        free(b.s);
        return ret;
    }
    if (ctx->cfg.no_prefix_reuse) c->job->prefix_reuse = false;
    c->tools = c->req.api != SRV_API_COMPLETIONS && c->req.tools_json &&
               strata_engine_tool_format(srv_sched_engine(s)) != STRATA_TOOLS_NONE;
    int rc = srv_sched_submit(s, c->job);
    if (rc == -EBUSY) return send_error(c, mc, 429, "too many requests are queued; retry later");
    if (rc) return send_error(c, mc, 503, "the server is stopping");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    c->fd = ci ? ci->connect_fd : -1;
    if (c->req.stream) {
        c->api->stream_begin(&c->req, &c->st, ctx->model_id, c->job->n_prompt, &c->out);
        c->phase = PHASE_STREAM;
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, c, NULL);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        enum MHD_Result ret = MHD_queue_response(mc, 200, r);
        MHD_destroy_response(r);
        atomic_fetch_add(&ctx->by_status[2], 1);
        return ret;
    }
    for (;;) {
        srv_job_wait(c->job, (size_t)-1, 100);
        pthread_mutex_lock(&c->job->mu);
        bool done = c->job->done;
        pthread_mutex_unlock(&c->job->mu);
        if (done) break;
        if (atomic_load(&ctx->stopping) || client_gone(c->fd)) {
            atomic_store(&c->job->cancel, true);
            atomic_fetch_add(&ctx->disconnects, 1);
            return MHD_NO;  // closes the connection
        }
    }
    if (c->job->finish == SRV_FINISH_ERROR) return send_error(c, mc, 500, c->job->error[0] ? c->job->error : "generation failed");
    if (c->job->finish == SRV_FINISH_CANCELLED) return send_error(c, mc, 503, "the server is stopping");
    struct srv_result res;
    struct strata_strbuf b = {0};
    rc = srv_make_result(s, &c->req, c->job, &res);
    if (rc == 0) rc = c->api->respond(&c->req, &res, ctx->model_id, c->job, s, &b);
    srv_result_free(&res);
    enum MHD_Result ret = rc ? send_error(c, mc, 500, "out of memory") : send_json(c, mc, 200, &b);
    free(b.s);
    return ret;
}

// ---- routing ------------------------------------------------------------------------------------

static enum MHD_Result route(struct conn *c, struct MHD_Connection *mc, const char *url, const char *method)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    bool post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0) {
        if (!get) return send_error(c, mc, 405, "use GET");
        return send_body(c, mc, 200, "text/html; charset=utf-8", srv_page_html, srv_page_html_len);
    }
    if (strcmp(url, "/health") == 0) {
        bool up = atomic_load(&c->ctx->sched) != NULL;
        const char *b = up ? "{\"status\":\"ok\"}" : "{\"status\":\"loading\"}";
        return send_body(c, mc, up ? 200 : 503, "application/json", b, strlen(b));
    }
    if (!authorized(c->ctx, mc)) return send_error(c, mc, 401, "invalid or missing API key");
    if (strcmp(url, "/metrics") == 0) return get ? get_metrics(c, mc) : send_error(c, mc, 405, "use GET");
    if (strcmp(url, "/v1/models") == 0) return get ? get_models(c, mc) : send_error(c, mc, 405, "use GET");
    if (c->api) {
        if (!post) return send_error(c, mc, 405, "use POST");
        if (c->too_large) return send_error(c, mc, 413, "the request body is too large");
        return generate(c, mc);
    }
    return send_error(c, mc, 404, "no such endpoint");
}

static const struct srv_api_ops *api_of(const char *url)
{
    if (strcmp(url, "/v1/chat/completions") == 0 || strcmp(url, "/chat/completions") == 0) return &srv_openai_chat;
    if (strcmp(url, "/v1/completions") == 0 || strcmp(url, "/completions") == 0) return &srv_openai_completions;
    if (strcmp(url, "/v1/messages") == 0) return &srv_anthropic_messages;
    if (strcmp(url, "/v1/messages/count_tokens") == 0) return &srv_anthropic_count_tokens;
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    struct srv_ctx *ctx = cls;
    struct conn *c = *state;
    if (!c) {
        pthread_setname_np(pthread_self(), "strata-http");  // its CPU time apart in /proc (bench)
        c = calloc(1, sizeof *c);
        if (!c) return MHD_NO;
        c->ctx = ctx;
        c->fd = -1;
        c->api = api_of(url);
        *state = c;
        // Refuse early what will be refused anyway, before reading a body.
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > ctx->cfg.max_body) c->too_large = true;
        if (c->api && !authorized(ctx, mc)) return send_error(c, mc, 401, "invalid or missing API key");
        if (c->too_large) return send_error(c, mc, 413, "the request body is too large");
        return MHD_YES;
    }
    if (*upload_size) {
        if (!c->too_large && c->body.len + *upload_size > ctx->cfg.max_body) {
            c->too_large = true;
            free(c->body.s);
            c->body = (struct strata_strbuf){0};
        }
        if (!c->too_large) strata_strbuf_put(&c->body, upload, *upload_size);
        *upload_size = 0;
        return c->body.oom ? MHD_NO : MHD_YES;
    }
    return route(c, mc, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **state, enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)mc;
    struct conn *c = *state;
    if (!c) return;
    if (c->job) {
        if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK) atomic_store(&c->job->cancel, true);
        srv_job_unref(c->job);
    }
    srv_request_free(&c->req);
    free(c->body.s);
    free(c->out.s);
    free(c);
    *state = NULL;
}

// ---- main ---------------------------------------------------------------------------------------

// libmicrohttpd's messages (mostly clients that went away) at debug level.
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    strata_log_debug("serve: libmicrohttpd: %s", line);
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int srv_main(const struct srv_config *cfg)
{
    struct srv_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return STRATA_ENOMEM;
    ctx->cfg = *cfg;
    ctx->t_start = (double)time(NULL);
    snprintf(ctx->model_id, sizeof ctx->model_id, "%s", cfg->model_id ? cfg->model_id : base_name(cfg->model_path));

    // Signals are taken by sigwait below; every thread started from here inherits the mask.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai) {
        strata_log_error("serve: cannot resolve host '%s': %s", cfg->host, gai_strerror(gai));
        free(ctx);
        return STRATA_EARG;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, ctx, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, ctx, MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        strata_log_error("serve: cannot listen on %s:%d: %s", cfg->host, cfg->port, strerror(errno));
        free(ctx);
        return STRATA_EIO;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "strata serve: listening on http://%s:%u (loading %s)\n", cfg->host,
            di ? (unsigned)di->port : (unsigned)cfg->port, cfg->model_path);

    // Test hook: STRATA_SERVE_LOAD_GATE=PATH holds the load back while PATH exists (60 s at most),
    // so that tests see the loading state for as long as they need, whatever the machine's speed.
    const char *gate = getenv("STRATA_SERVE_LOAD_GATE");
    for (int i = 0; gate && *gate && i < 6000 && access(gate, F_OK) == 0; i++) nanosleep(&(struct timespec){0, 10000000}, NULL);

    struct srv_sched *s = NULL;
    double t0 = strata_now();
    int rc = srv_sched_open(&s, cfg);
    if (rc == 0) {
        atomic_store(&ctx->sched, s);
        fprintf(stderr, "strata serve: model '%s' ready in %.1f s, %d parallel sessions of %d tokens\n",
                ctx->model_id, strata_now() - t0, cfg->parallel, srv_sched_n_ctx(s));
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "strata serve: stopping (signal %d)\n", sig);
    }
    atomic_store(&ctx->stopping, true);
    MHD_stop_daemon(d);
    srv_sched_close(s);
    free(ctx);
    return rc;
}
