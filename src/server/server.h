// strata serve: an OpenAI- and Anthropic-compatible HTTP server over one engine.
//
// Layers (each file one job):
//   http.c       libmicrohttpd glue: routing, body limit, API key, errors, SSE, disconnects
//   openai.c     /v1/chat/completions and /v1/completions: request parsing, responses, chunks
//   anthropic.c  /v1/messages: request parsing, responses, events
//   request.c    what the two APIs share: sampling fields, stops, tools, prompt rendering
//   sched.c      the engine side: slots (sessions with their cached tokens), the scheduler
//                thread that runs one forward pass at a time over every active session
//   page.c       the chat page at / (page.html, embedded at build time)
// Threads: one per HTTP connection (libmicrohttpd's thread-per-connection mode) and one
// scheduler thread. They meet in struct srv_job, under its mutex.
#ifndef STRATA_SERVER_H
#define STRATA_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "strata.h"
#include "util/strbuf.h"

struct srv_config {
    const char *model_path;
    const char *model_id;     // name in /v1/models and responses (default: file name)
    const char *host;         // default 127.0.0.1
    int port;                 // 0: any free port (printed)
    int parallel;             // sessions decoding at once
    int queue;                // requests waiting for a session before 429
    const char *api_key;      // NULL: no check
    int n_ctx, n_batch, n_threads;  // per session context; prompt tokens per forward pass
    size_t max_body;          // request body bytes (413 beyond)
    int max_tokens;           // cap on generated tokens per request (0: context)
    bool no_prefix_reuse;     // every request starts from an empty session
    struct strata_engine_params ep;   // expert cache, I/O and backend (the fields above set the rest)
};

// Runs until SIGINT/SIGTERM. 0 on a clean shutdown, negative if it could not start.
int srv_main(const struct srv_config *cfg);

// ---- jobs: one generation request between an HTTP thread and the scheduler --------------------

#define SRV_MAX_STOP 8
#define SRV_MAX_TOP_LOGPROBS 20

enum srv_finish {
    SRV_FINISH_NONE,
    SRV_FINISH_EOG,        // end-of-generation token
    SRV_FINISH_STOP,       // a stop string (stop_index says which)
    SRV_FINISH_LENGTH,     // max_tokens or the context
    SRV_FINISH_CANCELLED,  // client went away
    SRV_FINISH_ERROR,
};

struct srv_token_lp {          // one generated token's log-probabilities (when asked for)
    int32_t id;
    float logprob;
    int n_top;
    int32_t top_id[SRV_MAX_TOP_LOGPROBS];
    float top_logprob[SRV_MAX_TOP_LOGPROBS];
};

struct srv_job {
    // Set before srv_sched_submit, read-only afterwards.
    int32_t *prompt;           // [n_prompt] token ids, owned
    int n_prompt;
    int max_tokens;            // > 0
    struct strata_sampling sp;
    char *stop[SRV_MAX_STOP];  // owned
    int n_stop;
    int top_logprobs;          // -1: no log-probabilities; 0..20 alternatives per token
    bool prefix_reuse;
    bool ignore_eos;           // keep generating after an end-of-generation token

    atomic_bool cancel;        // set by the HTTP side when the client goes away
    atomic_int refs;           // HTTP side + scheduler; the last srv_job_unref frees

    // Written by the scheduler under mu; cv signals every change.
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *text;                // generated text, NUL-terminated; a matched stop string removed
    size_t len, cap;
    size_t n_final;            // text[0..n_final) is final (cannot become part of a stop string)
    struct srv_token_lp *lp;   // [n_gen] when top_logprobs >= 0
    int n_gen;                 // tokens generated (the end-of-generation token counts)
    int n_cached;              // prompt tokens whose KV was reused
    bool started, done;
    enum srv_finish finish;
    int stop_index;            // which stop string matched
    char error[256];
    double t_submit, t_start, t_first, t_done;  // strata_now() seconds
};

struct srv_job *srv_job_new(void);
void srv_job_unref(struct srv_job *j);
// Wait until the job has text beyond *seen or is done, or timeout_ms passed. Called unlocked.
void srv_job_wait(struct srv_job *j, size_t seen, int timeout_ms);

// ---- scheduler ----------------------------------------------------------------------------------

struct srv_sched;

struct srv_sched_stats {
    uint64_t requests, prompt_tokens, cached_tokens, generated_tokens;
    double decode_s;           // wall time of forward passes that decoded
    double busy_s;             // wall time of all forward passes
    uint64_t forward_passes;
    int active, queued;
    struct strata_expert_stats experts[STRATA_TIER_COUNT];   // per tier (present says which exist)
    uint64_t kv_bytes;         // KV cache memory of every slot's session now
    int n_threads;             // the CPU backend's threads (0 on a GPU) and where their time went
    struct strata_thread_stats threads[2];   // [0] prompt passes, [1] decode passes
};

// Loads the model (slow) and starts the scheduler thread.
int srv_sched_open(struct srv_sched **out, const struct srv_config *cfg);
void srv_sched_close(struct srv_sched *s);
// Queue a job (takes a reference). -EBUSY when the queue is full, -ECANCELED when closing.
int srv_sched_submit(struct srv_sched *s, struct srv_job *j);
void srv_sched_stats(struct srv_sched *s, struct srv_sched_stats *st);

int srv_sched_n_ctx(const struct srv_sched *s);
int srv_sched_n_vocab(const struct srv_sched *s);
// The engine, for its tokenizer and chat functions (thread-safe).
const struct strata_engine *srv_sched_engine(const struct srv_sched *s);
// text -> ids (bos added as the model wants, special tokens parsed). *ids malloc'd.
int srv_sched_tokenize(const struct srv_sched *s, const char *text, int32_t **ids, int *n);
// A token's bytes (may be part of a UTF-8 character).
int srv_sched_piece(const struct srv_sched *s, int32_t id, const char **piece, size_t *len);

// ---- small shared helpers ----------------------------------------------------------------------

// Stop strings: the index of the first stop string found in text[from..len) (as a match that
// may start before `from` but ends after it), its position in *at; -1 if none. *final_len gets
// how much of the text cannot become the start of a stop string.
int srv_stop_find(char *const *stops, int n_stop, const char *text, size_t len, size_t from,
                  size_t *at, size_t *final_len);

#endif
