// The engine's internals, shared by engine.c (open, info, statistics, text), session.c
// (sessions, evaluation, batching) and generate.c (sampling, generation). The public contract is
// include/strata.h.
//
// Locking: pass_mu is held for each forward pass (one at a time per engine: the forward scratch,
// the backend's scratch and its thread pool serve every session) and around reading the
// engine-wide counters; err_mu guards the engine's last error message. Everything else an engine
// holds is read-only after open (model, tokenizer, template), so text functions take no lock. A
// session's fields belong to the one thread using it; the engine-wide stats are updated under
// pass_mu.
#ifndef STRATA_ENGINE_H
#define STRATA_ENGINE_H

#include <pthread.h>

#include "backend/backend.h"
#include "engine/resident.h"
#include "engine/vram_dev.h"
#include "experts/store.h"
#include "experts/trace.h"
#include "experts/vram.h"
#include "model/forward.h"
#include "model/model.h"
#include "strata.h"
#include "tokenizer/tokenizer.h"

struct strata_engine {
    struct strata_engine_params params;
    struct strata_backend be;
    struct strata_model *m;
    struct strata_store *store;          // the host store (a backend in host memory, or behind the
                                         // VRAM tier), or NULL
    struct strata_resident *resident;    // every expert in backend memory (a GPU backend), or NULL
    struct strata_vram *vram;            // the VRAM tier over the store (--gpu-cache-mib N), or NULL
    struct strata_vram_dev vdev;         // its device (copy stream, the store's slab page-locked)
    struct strata_backend cpu_be;        // the CPU backend computing the tier's misses (--gpu-miss
                                         // cpu|auto), or zeroes
    struct strata_expert_provider experts;
    struct strata_tokenizer *tok;
    struct strata_forward *fwd;
    const char *chat_template;     // tokenizer.chat_template or NULL (borrowed from the file)
    const char *isa, *gemm;        // CPU kernels and GEMM level ("" on another backend)
    enum strata_kv_type kv_k, kv_v; // the KV cache types in use (params' with auto resolved)
    int n_ctx, n_batch;            // session defaults; n_batch is the forward scratch's size
    uint64_t mem_fixed;            // with a memory bound: what it holds besides the expert cache
    int n_seq_max, n_sessions;     // sessions the bound provisions; live sessions (under pass_mu)
    pthread_mutex_t pass_mu;
    struct strata_stats stats;     // phase times and tokens of every pass (under pass_mu)
    pthread_mutex_t err_mu;
    char errmsg[512];
};

struct strata_session {
    struct strata_engine *e;
    struct strata_seq_state state;
    int n_ctx, n_batch, n_past;
    struct strata_stats stats;
    strata_route_cb route_cb;
    void *route_user;
    struct strata_trace_writer *trace;   // strata_session_trace_file's writer, or NULL
    uint64_t kv_bytes;                   // its KV cache's bytes, as last counted in the engine's
};                                       // stats.kv_bytes (under pass_mu)

// enum strata_kv_type -> enum strata_type.
uint32_t strata_engine_kv_type(enum strata_kv_type t);
// What STRATA_KV_AUTO means for a model of these hyperparameters on the CPU backend (on_cpu) or
// another: F16 where the CPU runs attention that takes a typed cache, else F32 (the engine's
// sessions and strata plan's sizing).
enum strata_kv_type strata_engine_kv_auto(const struct strata_hparams *hp, bool on_cpu);
// Keep the calling thread's last error line as the engine's; returns rc.
int strata_engine_fail(struct strata_engine *e, int rc);
// The expert counters of every tier into st->experts.
void strata_engine_expert_stats(struct strata_engine *e, struct strata_stats *st);
// Add one pass's phase times and tokens to st.
void strata_stats_add_pass(struct strata_stats *st, const struct strata_fwd_stats *f, int n_tok);

#endif
