// strata's public API (docs/architecture.md, "Seam 3"): the header the CLI, the server and
// examples/ include, and nothing else of the library.
//
// Handles. An engine holds one model, one backend (CPU or GPU), one expert provider and one
// compute thread pool; sessions are sequences over it, each with its own KV cache / recurrent
// state. Both are opaque; create with *_open / *_create, release with *_close / *_free.
//
// Errors. Functions return 0 (or a count) on success and a negative code on failure: -errno
// values from the system, or one of the STRATA_E* codes below. The failing call also logs one
// line (stderr by default) and keeps it as the last error of its engine (strata_engine_errmsg)
// and of the calling thread (strata_last_error).
//
// Threads. Calls on different sessions of one engine may come from different threads at once:
// the engine runs one forward pass at a time (a mutex around each pass; strata_eval_batch
// merges several sessions into one pass) and every session's results are the same as if it ran
// alone. One session is used by one thread at a time. Tokenizer and chat functions only read the
// engine and may be called from any thread. strata_engine_close must come after every session
// is freed.
//
// Ownership. Pointers returned are borrowed from the engine until strata_engine_close unless a
// comment says the caller frees them.
#ifndef STRATA_H
#define STRATA_H

#ifdef __cplusplus  // the header is valid C++ too (the CUDA backend's .cu files include it)
#include <atomic>
using std::atomic_bool;
#else
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_EFORMAT   (-1001)  // malformed input file or data
#define STRATA_EUNSUP    (-1002)  // valid but unsupported (architecture, type, feature, device)
#define STRATA_EARG      (-1003)  // bad argument from the caller / user
#define STRATA_ENOMEM    (-1004)  // allocation failed or over the memory budget
#define STRATA_EIO       (-1005)  // I/O failed after retries

struct strata_engine;
struct strata_session;

// ---- engine ------------------------------------------------------------------------------------

enum strata_backend_kind { STRATA_BACKEND_AUTO, STRATA_BACKEND_CPU, STRATA_BACKEND_CUDA, STRATA_BACKEND_COUNT };
// How routed experts are read from the file on a cache miss: a pool of pread threads through the
// page cache, or io_uring with O_DIRECT (the pread pool where io_uring is unavailable).
enum strata_io_engine { STRATA_IO_PREAD, STRATA_IO_URING, STRATA_IO_COUNT };
// Which expert a cache miss replaces: the least frequently used so far (ties: least recently),
// or the least recently used.
enum strata_cache_policy { STRATA_POLICY_LFU, STRATA_POLICY_LRU, STRATA_POLICY_COUNT };
// What a GPU does with a routed expert its VRAM tier misses (passes of up to 8 tokens; larger
// passes always copy): copy it over PCIe (the output is then the same bits at every VRAM budget),
// compute it on the CPU from the host copy (CPU rounding rules), or split the misses between the
// two as a cost model measured on the run says ends first (auto, the default).
enum strata_gpu_miss { STRATA_GPU_MISS_AUTO, STRATA_GPU_MISS_COPY, STRATA_GPU_MISS_CPU, STRATA_GPU_MISS_COUNT };
// Element type of the KV cache's keys or values (llama.cpp's --cache-type-k / --cache-type-v
// names: f32, f16, bf16, q8_0). F16, BF16 and Q8_0 round each key and value as llama.cpp's copy
// into its cache rounds them, and the query is rounded to the key type's dot format as llama.cpp
// rounds it (docs/cpu.md). Architectures whose attention has a sliding window, sinks or a latent
// (MLA) cache take F32 only. AUTO (the default, 0): F16, llama.cpp's default, on the CPU backend
// where the model's attention takes a typed cache (plain causal attention: qwen3moe, qwen3next,
// qwen35moe, glm4moe), else F32 (those with a window, sinks or MLA, and the CUDA backend, where
// F16 matches llama.cpp's too but is no faster than F32, docs/cuda.md). strata_engine_info
// names the types in use.
enum strata_kv_type { STRATA_KV_AUTO, STRATA_KV_F32, STRATA_KV_F16, STRATA_KV_BF16, STRATA_KV_Q8_0, STRATA_KV_COUNT };
// "auto", "f32", "f16", "bf16", "q8_0" ("?" out of range).
const char *strata_kv_type_name(enum strata_kv_type t);
// The type of a name above (case-insensitive). 0, or STRATA_EARG for another name.
int strata_kv_type_parse(const char *name, enum strata_kv_type *out);

struct strata_engine_params {
    const char *model;             // GGUF path
    int n_threads;                 // compute threads (0: all cores)
    enum strata_backend_kind backend;
    int gpu;                       // device index for a GPU backend
    uint64_t host_cache_bytes;     // RAM for routed experts (0: all resident)
    uint64_t vram_cache_bytes;     // VRAM for routed experts with a GPU backend (0: every expert
                                   // resident); else a cache of VRAM slots over the host cache
    uint64_t memory_bound_bytes;   // whole-process bound (0: none). With host_cache_bytes 0 the
                                   // expert cache is what remains after the process so far, the
                                   // dense weights, n_seq_max sessions' KV at n_ctx and a runtime
                                   // reserve; open fails naming the minimum when that is too small
    int n_seq_max;                 // sessions the memory bound provisions (0: 1); more are refused
    enum strata_io_engine io;
    int io_threads;                // pread threads / io_uring queue depth (0: 4)
    bool cache_classes;            // one slot size class per distinct expert size (else uniform)
    enum strata_cache_policy cache_policy;
    enum strata_gpu_miss gpu_miss; // VRAM tier misses: auto (default), copy, cpu
    int prefetch_ahead;            // router lookahead prefetch: guess the experts of the next N MoE
                                   // layers and read the missing ones while a layer computes (0: off)
    int prefetch_k;                // prefetch a token's first k guesses (0: all of its top-k)
    const char *pin_from;          // route trace (strata's --trace-out format) whose most used experts
                                   // per layer are pinned in each bounded expert cache (host and VRAM):
                                   // read at open, never evicted (NULL: none)
    float pin_share;               // share of each cache's slots per layer for them (0: 0.25), at
                                   // most all but one token's experts
    int n_ctx;                     // default context of sessions (0: min(model's, 4096))
    int n_batch;                   // most tokens in one forward pass (0: 512)
    enum strata_kv_type cache_type_k;  // KV cache types of sessions (default AUTO: F16 where it
    enum strata_kv_type cache_type_v;  //   can, as llama.cpp's default, else F32)
};

// Defaults: all cores, backend auto, full residency, io_uring, classes on, LFU, KV cache types
// auto (F16 where the model and backend take it, else F32).
struct strata_engine_params strata_engine_default_params(void);
// Load the model and start the backend. 0 or negative; *out NULL on failure (the reason is in
// strata_last_error()).
int strata_engine_open(struct strata_engine **out, const struct strata_engine_params *p);
void strata_engine_close(struct strata_engine *e);
// The last error line of a call on this engine or its sessions ("" if none). Borrowed until the
// next failing call on the engine.
const char *strata_engine_errmsg(const struct strata_engine *e);
// The last error line logged by the calling thread ("" if none), for failures without an engine.
const char *strata_last_error(void);

struct strata_model_info {
    const char *arch;              // "qwen3moe", ...
    const char *name;              // general.name or the file's base name
    const char *backend;           // "cpu", "cuda"
    const char *isa;               // CPU kernels in use: "scalar", "avx2", "avx512"
    const char *gemm;              // the CPU GEMM's level (prompts): "scalar", "avx2", "avx512", "amx"
    uint32_t n_vocab, n_ctx_train, n_embd, n_layer, n_moe_layers, n_expert, n_expert_used;
    int32_t bos, eos;              // -1 when absent
    bool add_bos;                  // prompts start with bos
    uint64_t dense_bytes;          // resident non-expert weights
    uint64_t expert_bytes;         // memory of the expert cache slots
    uint64_t mem_other_bytes;      // with a memory bound: what it provisions besides the expert
                                   // cache (dense weights, sessions' KV, scratch, reserve); else 0
    int n_ctx, n_batch;            // the engine's session defaults
    const char *cache_type_k, *cache_type_v;  // KV cache types in use ("f32", "f16", ...; never "auto")
    uint64_t kv_bytes_per_token;   // KV cache bytes per position of context (all layers, K and V)
};
void strata_engine_info(const struct strata_engine *e, struct strata_model_info *out);

// ---- statistics ----------------------------------------------------------------------------------

enum strata_tier { STRATA_TIER_HOST, STRATA_TIER_VRAM, STRATA_TIER_COUNT };

struct strata_expert_stats {
    bool present;                  // this tier exists
    bool full;                     // every expert resident
    uint64_t hits, misses, evictions;
    uint64_t bytes_read, reads, retries;
    double io_wait_s;              // time acquires spent waiting for reads
    uint64_t prefetched, prefetch_used;
    uint64_t prefetch_cancelled;   // prefetches given back before their read started
    uint64_t guessed, guessed_used, guess_correct;  // lookahead: experts guessed, experts the
                                   // guessed layers used, used and guessed (recall = correct / used)
    uint64_t joined;               // acquires that found their expert being read and waited for it
    uint64_t fetched;              // misses of a pass's later group read while the previous computed
    uint64_t preload_bytes;        // read at open (full residency, or the pinned hot set)
    double preload_s;
    uint32_t pinned;               // experts pinned per layer (pin_from); never evicted
    uint64_t pin_hits;             // hits on them (counted in hits too)
    uint32_t slots_per_layer, n_classes;
    uint64_t slot_bytes;           // memory of all slots
    uint64_t io_buffer_bytes;      // I/O buffers beside the slots
    int io_depth;                  // reads in flight at most
    bool io_direct;                // reads bypass the page cache
    // VRAM tier with --gpu-miss cpu|auto: misses computed on the CPU from the host copy instead
    uint64_t cpu_experts;          // expert-passes computed on the CPU (counted in misses)
    uint64_t cpu_pairs;            // token-expert pairs among them
    uint64_t miss_copied;          // misses the split copied
    uint64_t split_used, split_hits; // experts the split's (decode-sized) passes used, and the VRAM hits among them
    double cpu_s;                  // wall time of the CPU's expert products
    double cpu_gbps, pcie_gbps;    // the cost model's measured rates (GB/s of expert bytes)
};

// Where the host threads' time went in forward passes: t_pass wall seconds; of those t_run inside
// parallel runs (the rest ran on one thread while the others idled: routing, waits on expert
// reads, small ops), t_tail the calling thread waiting for the last one at the end of a run;
// t_busy every thread's seconds of work in runs, summed (n_threads * t_run - t_busy: thread time
// idle inside runs).
struct strata_thread_stats {
    uint64_t passes, runs;
    double t_pass, t_run, t_tail, t_busy;
};

struct strata_stats {
    // time per phase of the forward passes (seconds)
    double t_embed, t_attn, t_linear_attn, t_router, t_experts, t_head;
    // the same phases of the prompt passes [0] and of the decode passes [1] (one token a sequence),
    // with the bytes each read: the weights of its products (each matrix once a product call; the
    // experts a pass computed, or n_tok times top-k of them, at most all, where the routes stay
    // on the GPU) and, in attention, the KV cache rows of the positions attended, once a layer
    // and sequence. bytes / time is a phase's read rate, to set against the machine's bandwidth.
    struct strata_phase_stats {
        double t_attn, t_linear_attn, t_router, t_experts, t_head;
        uint64_t bytes_attn, bytes_linear_attn, bytes_router, bytes_experts, bytes_head;
    } phases[2];
    uint64_t n_tokens;             // tokens evaluated
    uint64_t n_passes;             // forward passes
    uint64_t kv_bytes;             // KV cache memory allocated now (it grows in blocks as the
                                   // context fills): the session's own, or every live session's
    struct strata_expert_stats experts[STRATA_TIER_COUNT];   // engine-wide (also in session stats)
    uint64_t vram_used_bytes;      // GPU backend: device memory strata holds (weights, experts,
    uint64_t vram_peak_bytes;      //   KV caches, scratch), its peak, and the device's total;
    uint64_t vram_total_bytes;     //   0 on the CPU backend (engine-wide, also in session stats)
    uint64_t gpu_graphs_replayed;  // GPU backend: decode passes replayed from a captured graph and
    uint64_t gpu_graphs_recorded;  //   passes captured for it (STRATA_CUDA_GRAPH; engine-wide)
    // the host threads in the passes (CPU backend; n_threads 0 elsewhere), [0] for prompt passes
    // (some sequence with more than one token), [1] for decode passes (one token a sequence)
    int n_threads;
    struct strata_thread_stats threads[2];
};

struct strata_layer_stats {
    uint64_t hits, misses, evictions, bytes_read;
    uint64_t prefetched, prefetch_used;
    uint64_t guessed, guessed_used, guess_correct;  // the lookahead's, for this layer
    uint64_t fetched;              // misses read while the pass's previous group computed
    double io_wait_s;              // acquires of this layer blocked on reads (all sessions)
};

// Engine-wide: every pass of every session.
void strata_engine_stats(struct strata_engine *e, struct strata_stats *out);
// Expert counters of MoE layer `layer` (0 .. n_moe_layers-1) of a tier; zeroes when out of range.
void strata_engine_layer_stats(struct strata_engine *e, enum strata_tier tier, uint32_t layer,
                               struct strata_layer_stats *out);

// ---- tokens and text -----------------------------------------------------------------------------

// Tokenize text[0..len) (bos first when add_bos and the model has one). parse_special: control
// tokens written in the text (e.g. "<|im_start|>") become those tokens. At most cap ids go to
// out; *n gets the full count. 0, -ENOSPC when cap was too small (call again with cap >= *n),
// STRATA_EARG for invalid text.
int strata_tokenize(const struct strata_engine *e, const char *text, size_t len, bool add_bos,
                    bool parse_special, int32_t *out, size_t cap, size_t *n);
bool strata_token_is_eog(const struct strata_engine *e, int32_t tok);
// The raw bytes of one token (not necessarily valid UTF-8); *piece borrowed. special: control
// tokens give their text. 0 or STRATA_EARG.
int strata_token_piece(const struct strata_engine *e, int32_t tok, bool special, const char **piece, size_t *len);

// Streaming detokenizer: only complete, valid UTF-8 comes out; a token ending inside a character
// is held until the next completes it. Plain value type, one per stream.
struct strata_detok {
    uint8_t pending[4];            // start of an incomplete character
    uint8_t n_pending;
    bool special;                  // print control tokens' text
};
void strata_detok_init(struct strata_detok *d, bool special);
// Append the text token `tok` completes to out (at most 3 * (piece length + 1) bytes); *n bytes
// written. 0, -ENOSPC (nothing consumed), STRATA_EARG (bad id).
int strata_detokenize(const struct strata_engine *e, struct strata_detok *d, int32_t tok, char *out, size_t cap,
                      size_t *n);
// What is left (U+FFFD for an unfinished character); cap >= 3.
int strata_detok_flush(struct strata_detok *d, char *out, size_t cap, size_t *n);

// ---- chat ----------------------------------------------------------------------------------------

struct strata_chat_msg {
    const char *role;              // "system", "user", "assistant", ...
    const char *content;
};

// Render a conversation with the model's chat template (ChatML, GLM-4, Llama-3 and DeepSeek
// families are recognised; no template: ChatML). *out is NUL-terminated; the caller frees it.
// STRATA_EUNSUP for a template family strata does not implement.
int strata_chat_apply(const struct strata_engine *e, const struct strata_chat_msg *msgs, size_t n,
                      bool add_generation_prompt, char **out);

// The model's chat template text (tokenizer.chat_template), or NULL when the file has none.
const char *strata_engine_chat_template(const struct strata_engine *e);

// Tool calling: how the model writes calls (from its template), conversations with tools and
// calls, and the calls parsed back out of generated text.
enum strata_tool_format { STRATA_TOOLS_NONE, STRATA_TOOLS_QWEN3, STRATA_TOOLS_GLM45, STRATA_TOOLS_COUNT };
enum strata_tool_format strata_engine_tool_format(const struct strata_engine *e);

struct strata_chat_tool_call {
    const char *name;
    const char *arguments;         // JSON object text, as the OpenAI API carries it
};

struct strata_chat_turn {
    const char *role;              // "system", "user", "assistant", "tool" (a tool's result)
    const char *content;
    const struct strata_chat_tool_call *tool_calls;  // assistant turns
    size_t n_tool_calls;
};

// As strata_chat_apply, plus tools (tools_json: a JSON array of OpenAI tool objects, or NULL).
// STRATA_EUNSUP for tools with a template that has no tool format; STRATA_EARG for malformed
// tools or call arguments.
int strata_chat_apply_tools(const struct strata_engine *e, const struct strata_chat_turn *msgs, size_t n,
                            const char *tools_json, bool add_generation_prompt, char **out);

struct strata_tool_call_out {
    char *name;
    char *arguments;               // compact JSON object text
};

// Split generated text into content and tool calls (calls not well formed stay in the
// content). *content and *calls are the caller's (free and strata_chat_tool_calls_free).
int strata_chat_parse_tools(enum strata_tool_format fmt, const char *text, size_t len, const char *tools_json,
                            char **content, struct strata_tool_call_out **calls, size_t *n_calls);
void strata_chat_tool_calls_free(struct strata_tool_call_out *calls, size_t n);
// Streaming: the length of text[0..len) that is content for sure (before any "<tool_call>").
size_t strata_chat_tool_safe_len(const char *text, size_t len);

// ---- sessions ------------------------------------------------------------------------------------

struct strata_session_params {
    int n_ctx;                     // positions (0: the engine's default)
    int n_batch;                   // most of its tokens in one pass (0: the engine's n_batch)
};

// Every token's routed experts of one forward pass over a session's tokens: ids
// [n_tok][n_layers][k] (MoE layers only, selection order). Return 0, or a negative code to stop
// the evaluation with it.
typedef int (*strata_route_cb)(void *user, const int32_t *ids, int n_tok, uint32_t n_layers, uint32_t k);

int strata_session_create(struct strata_session **out, struct strata_engine *e, const struct strata_session_params *p);
void strata_session_free(struct strata_session *s);
int strata_session_n_ctx(const struct strata_session *s);
int strata_session_n_past(const struct strata_session *s);
// Forget the sequence (positions and recurrent state); statistics are kept.
int strata_session_reset(struct strata_session *s);
// Keep the first n positions and forget the rest, so a prompt that shares them goes on from
// there (a server's prefix reuse). 0 <= n <= n_past. A model with recurrent state (delta-net)
// cannot go back: STRATA_EUNSUP unless n == n_past (reset starts over).
int strata_session_truncate(struct strata_session *s, int n);
void strata_session_set_route_cb(struct strata_session *s, strata_route_cb cb, void *user);
// Write every token's routed experts to a route trace file (the text format strata sim replays)
// from now on, in place of a route callback; the file is completed when the session is freed.
int strata_session_trace_file(struct strata_session *s, const char *path);
// This session's passes (phase times, tokens) and the engine's expert counters.
void strata_session_stats(const struct strata_session *s, struct strata_stats *out);

// Evaluate n tokens at positions n_past .. (in passes of up to n_batch). logits receives
// [n][n_vocab] floats when all_logits, else [n_vocab] for the last token; may be NULL.
// STRATA_EARG for a token outside the vocabulary or past the context (nothing evaluated).
int strata_session_eval(struct strata_session *s, const int32_t *tokens, int n, float *logits, bool all_logits);

// Several sessions' tokens in one forward pass per n_batch tokens (continuous batching: each
// expert a pass needs is fetched once for all). Every item as strata_session_eval; each session
// at most once per call. Each session's results are bit-identical to evaluating it alone.
// pick, when not NULL, receives the greedy token of each row logits would get ([n] when
// all_logits, else [1]): the first index of the largest logit (NaN never wins; 0 when none is
// above -inf), what greedy sampling without a penalty takes. logits may then be NULL: a GPU then
// picks on the device and sends 4 bytes a row instead of the row.
// top, when not NULL, receives the top_k (1 .. STRATA_TOP_K_MAX, at most n_vocab) best tokens of
// each of those rows ([n][top_k] or [top_k]): logit descending, ties by the lower id, NaN as -inf;
// what sampling with top-k and no penalty starts from (strata_sample_top_k). logits may then be
// NULL too: a GPU selects them on the device and sends 8 bytes a candidate instead of the row.
struct strata_token_logit {
    int32_t id;
    float logit;
};
#define STRATA_TOP_K_MAX 256
struct strata_batch_item {
    struct strata_session *s;
    const int32_t *tokens;
    int n;
    float *logits;
    bool all_logits;
    int32_t *pick;
    int top_k;
    struct strata_token_logit *top;
};
int strata_eval_batch(struct strata_engine *e, struct strata_batch_item *items, int n_items);

// ---- sampling and generation ---------------------------------------------------------------------

// temperature <= 0 is greedy (argmax, lowest id on ties). Otherwise llama.cpp's chain in its
// order: repetition penalty over the last repeat_last_n tokens, top-k, top-p, min-p,
// temperature, a seeded draw.
struct strata_sampling {
    float temperature;             // default 0.8
    int top_k;                     // 0: off (default 40)
    float top_p;                   // 1: off (default 0.95)
    float min_p;                   // 0: off (default 0.05)
    float repeat_penalty;          // 1: off (default)
    int repeat_last_n;             // default 64; -1: all history
    uint64_t seed;
};
struct strata_sampling strata_sampling_default(void);

struct strata_sampler;
int strata_sampler_create(struct strata_sampler **out, const struct strata_engine *e, const struct strata_sampling *p);
void strata_sampler_free(struct strata_sampler *smp);
// One token from logits [n_vocab] given the history (prompt and generated so far). The id, or a
// negative code.
int32_t strata_sample(struct strata_sampler *smp, const float *logits, const int32_t *history, size_t n_history);
// k > 0 when strata_sample's draw with n_history tokens of history depends only on the row's k
// best (sampling with a top-k of at most STRATA_TOP_K_MAX and no repetition penalty): an
// evaluation may then ask for those
// (strata_batch_item.top, top_k = k) instead of the logits, and strata_sample_top draws the same
// token from them with the same random state. 0 otherwise.
int strata_sample_top_k(const struct strata_sampler *smp, size_t n_history);
int32_t strata_sample_top(struct strata_sampler *smp, const struct strata_token_logit *top, int k, size_t n_history);

enum strata_stop_reason { STRATA_STOP_LENGTH, STRATA_STOP_EOG, STRATA_STOP_STRING, STRATA_STOP_CALLBACK,
                          STRATA_STOP_CANCEL };

// Called with each generated token and the text released with it (may be empty; see
// strata_generate); return non-zero to stop after it.
typedef int (*strata_token_cb)(void *user, int32_t tok, const char *text, size_t len);

struct strata_generate_params {
    int n_predict;                 // most tokens to generate (the context may end it earlier)
    struct strata_sampling sampling;
    bool ignore_eos;               // keep going after end-of-generation tokens
    const char *const *stop;       // stop strings (n_stop of them); the text ends before the match
    int n_stop;
    strata_token_cb on_token;      // or NULL
    void *user;
    const atomic_bool *cancel;     // set from another thread to stop (or NULL)
};

struct strata_generate_result {
    int n_prompt, n_generated;     // tokens
    enum strata_stop_reason stop;
    int stop_index;                // which stop string matched (STRATA_STOP_STRING)
    char *text;                    // generated text (malloc'd, NUL-terminated; the caller frees)
    size_t text_len;
    int32_t *tokens;               // [n_generated] (malloc'd; the caller frees)
    double t_prompt, t_decode;     // seconds
};

// Evaluate the prompt after what the session holds, then sample and evaluate up to n_predict
// tokens (fewer when the context ends first). on_token gets every generated token with the text
// it releases: text that might begin a stop string is held back until it cannot, and at the end
// what remains comes in one last call with tok -1. 0 (the result filled, also when stopped by the
// cancel flag or the callback) or negative.
int strata_generate(struct strata_session *s, const int32_t *prompt, int n_prompt, const struct strata_generate_params *p,
                    struct strata_generate_result *r);
void strata_generate_result_free(struct strata_generate_result *r);

#ifdef __cplusplus
}
#endif

#endif
