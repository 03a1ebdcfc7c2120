// The forward pass of every architecture (forward.h), against the backend interface only.
//
// Activations live in backend scratch: x the residual stream [n][E], h the normed input of the
// block [n][E], o a block's output [n][E]. Routing runs on the host: the router logits come back
// with download, model/route.c picks and groups, the gather lists and weights go back up with
// upload. Experts come from the expert provider (experts/provider.h) through acquire / release, in
// groups of at most max_batch per layer. A backend with the route and moe ops routes on the device
// instead when every expert is resident (device_moe): no host round trip inside the pass.
#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "experts/lookahead.h"
#include "experts/provider.h"
#include "experts/vram.h"
#include "model/model_impl.h"
#include "model/route.h"
#include "model/routing.h"
#include "sample/sampler.h"
#include "util/log.h"
#include "util/time.h"

#define LOGIT_ROWS 16   // output-head rows per product (the logits scratch holds this many)
#define ROUTE_PARTS 64     // host routing: at most this many threads share a pass's tokens
#define ROUTE_PAR_MIN 32   // and only passes of this many tokens (a token routes in a few us)

#define TRY(call)                     \
    do {                              \
        if ((rc = (call)) != 0) return rc; \
    } while (0)

enum { SP_DENSE, SP_ROUTE, SP_READY, SP_HITS, SP_CPU, SP_ACQ, SP_OP2, SP_ADD, SP_SYNC, SP_REL, SP_N };
// STRATA_DECODE_PROF=1: host seconds of a one-token pass's steps, summed over layers, printed at
// free. The CPU backend's ops return when done, so these are the steps' times there; a GPU
// backend's are the host's time to queue them.
enum {
    DP_ANORM, DP_QKV, DP_QKROPE, DP_ATTN, DP_O, DP_FNORM, DP_ROUTER, DP_ROUTE, DP_GATEUP, DP_SWIGLU, DP_DOWN,
    DP_EXPERTS, DP_COMBINE, DP_N
};
static const char *const dp_names[DP_N] = {
    "attention norm", "q/k/v product", "q/k norms + rope", "attention (+ KV store)", "output product + residual",
    "ffn norm", "router product", "routing", "experts' gate + up", "experts' activation", "experts' down",
    "experts' pins", "shared expert + combine"};

static const char *const sp_names[SP_N] = {"dense (previous split's end to this block)", "router + routes down",
                                           "ready pins + split", "hits op + copies out", "CPU share",
                                           "copies' wait", "copied op", "CPU sums up + add", "sync",
                                           "release"};

struct strata_forward {
    const struct strata_model *m;
    struct strata_backend *be;
    const struct strata_backend_i *bi;
    void *bc;
    struct strata_expert_provider experts;
    int max_tok, max_ctx;
    uint64_t *bytes_to;           // the phase the products' weight bytes count to (strata_fwd_stats)
    // backend scratch
    float *x, *h, *o;             // [B][E]
    float *q, *k, *v, *attn;      // [B][max_q_dim], [B][Hkv*D], [B][Hkv*Dv], [B][H*Dv]
    float *router_logits;         // [B][X]
    float *gate_out, *up_out;     // [B*K][F]
    float *down_out;              // [B*K][E]
    float *ffn_a, *ffn_b;         // [B][max(Fd, Fs)]
    float *ffn_out;               // [B][E] shared expert output
    float *dn_qkv, *dn_z, *dn_ba, *dn_core, *dn_work;  // delta-net [B][C], [B][nv*d], [B][2nv], [B][nv*d], work
    float *mla_qa, *mla_qb, *mla_vb; // MLA: [B][QL] q rank, [B][H*(nope+R)] queries, [B][H*Vh] values
    float *idx_q, *idx_k, *idx_w;    // indexer: [B][IH*ID] queries, [B][ID] keys, [B][IH] head weights
    uint8_t *visible;                // indexer: [B][vis_ctx] the top-k mask of the last block computing it
    size_t vis_ctx;                  //   (its rows' stride: the longest context reserved)
    float *route_scratch;         // host [ROUTE_PARTS][2X] (model/routing.c), a part of the tokens each
    int route_vl;                 // lanes of the ggml build routing follows: a softmax over 16 or
                                  // more experts sums them in groups of it (the AVX-512 builds: 16)
    float *logits;                // [LOGIT_ROWS][V] (host-memory backends: the rows that want
                                  //   picks without logits; made at create, so a memory bound counts it)
    int32_t *picks;               // [LOGIT_ROWS] the argmax op's output (not on host memory)
    struct strata_token_logit *tops; // [LOGIT_ROWS][STRATA_TOP_K_MAX] the topk op's output (where there is one)
    int32_t *ids, *pos;           // [B]
    int32_t *tok_of, *route_of;   // [B*K]
    float *weight;                // [B*K]
    void *bufs[32];               // every backend buffer above, for free
    int n_bufs;
    // host
    float *logits_host;           // [B][X] router logits, then probabilities
    int32_t *picks_host;          // [LOGIT_ROWS]
    struct strata_token_logit *tops_host; // [LOGIT_ROWS][STRATA_TOP_K_MAX]
    float *row_host;              // [V] a row's logits, where the backend has no topk op
    int32_t *sel;                 // [B][K]
    float *selw;                  // [B][K]
    struct strata_route_groups g; // count/first [X], tok_of/route_of [B*K], used [X]
    struct strata_expert_view *views;  // [X]
    uint64_t *order_scratch;      // [X] strata_expert_pass_order
    uint8_t *ready;               // [X] experts_block: 0 not handed over yet, 1 handed over, 2 computed
    int *split_idx;               // [X] experts_block: the experts of the batch to compute
    struct strata_mm_op *ops;     // [n_ops] the expert products of one group, the heads of a pass
    int n_ops;
    int32_t *trace_ids;           // [B][n_moe][K]
    int32_t *ids_host, *pos_host; // [B]
    struct strata_seq *seqs;      // [B]
    struct strata_batch batch;
    int want_trace;
    struct strata_lookahead *lookahead;  // router lookahead prefetch, or NULL
    int prefetch_ahead;                  // MoE layers it looks ahead
    // device routing (backends with route and moe, every expert resident)
    void **exp_tables;            // backend [n_moe][3][X] expert matrix pointers, or NULL
    float *probs_b;               // backend [n_moe][X] selection biases
    uint8_t *tables_built;        // host [n_moe]: bit 0 the expert table, bit 1 the selection biases
    const void **tab_host;        // host [3][X] one layer's table on its way up
    // VRAM misses computed on the CPU (strata_forward_set_gpu_miss)
    struct strata_vram *vram;     // the tier (NULL: every miss is copied)
    struct strata_expert_provider host;  // the host store behind it
    struct strata_backend *cpu;   // the CPU backend that computes them
    enum strata_gpu_miss miss_mode;
    float *cpu_sum_dev;           // backend [B][E] their weighted sums
    float *c_h, *c_gate, *c_up, *c_down, *c_sum, *c_w;  // host [Bs][E], [Bs*K][F] x2, [Bs*K][E], [Bs][E], [B][K]
    int32_t *c_pack;              // host: ids [B][K], weight bits [B][K], then h's rows (one download)
    size_t h_off;                 // where h starts in the routes' allocation (int32 units)
    uint8_t *c_state, *c_where;   // host [X]: per used expert / per expert id
    uint32_t *c_hit, *c_copy, *c_cpu;  // host [X]
    struct strata_expert_view *c_views, *c_hviews;  // host [X]
    // A split layer's views are released at the next drain (the next layer's routes coming down,
    // or the pass's end) instead of after a sync of their own, so the host queues the next layer's
    // attention while the GPU finishes this layer's experts (STRATA_SPLIT_DEFER=0: the sync)
    bool defer;
    struct strata_expert_view *d_views;  // host [2X]: hits, then copies, of layer d_ml
    int d_hit, d_np, d_ml;
    struct strata_mm_op *c_ops;   // host [2X]
    double s_cpu, s_pcie;         // measured seconds per expert byte: on the CPU (per token), over PCIe
    uint64_t cpu_calls;           // CPU shares computed (the first, cold one is not measured)
    int since_cpu;                // layers with misses since the CPU last computed one
    struct strata_gpu_miss_stats miss_st;
    // STRATA_SPLIT_PROF=1: host seconds of moe_split's steps (SP_*), printed at free
    bool sp_on;
    double sp[SP_N], sp_end;
    uint64_t sp_calls;
    int sp_last_ml;
    bool dp_on, dp_pass;          // STRATA_DECODE_PROF=1; this pass is one token
    double dp[DP_N], dp_t;
    uint64_t dp_layers;
    bool host_route;              // STRATA_HOST_ROUTE=1: route on the host anyway (comparisons)
    bool separate_rope;           // STRATA_SEPARATE_ROPE=1: no attention_rope (comparisons)
};

// The decode profile's step i ends now (STRATA_DECODE_PROF, one-token passes).
static inline void dp_mark(struct strata_forward *f, int i)
{
    if (!f->dp_pass) return;
    const double now = strata_now();
    f->dp[i] += now - f->dp_t;
    f->dp_t = now;
}

// ---- sequence state -----------------------------------------------------------------------------

static size_t conv_floats(const struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const size_t C = 2 * (size_t)hp->ssm_n_group * hp->ssm_d_state + (size_t)hp->ssm_dt_rank * hp->ssm_d_state;
    return (size_t)m->n_rs_layers * (hp->ssm_d_conv - 1) * C;
}

static size_t ssm_floats(const struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    return (size_t)m->n_rs_layers * hp->ssm_dt_rank * hp->ssm_d_state * hp->ssm_d_state;
}

static float *be_floats(struct strata_backend *be, size_t n, const char *what, int *rc)
{
    if (*rc) return NULL;
    float *p = be->iface->alloc(be->ctx, (n ? n : 1) * sizeof(float), what);
    if (!p) *rc = STRATA_ENOMEM;
    else if (!be->iface->alloc_zeroed) *rc = be->iface->memset(be->ctx, p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

bool strata_seq_kv_typed(const struct strata_model *m)
{
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const struct strata_layer *L = &m->layers[l];
        if (L->kv_slot >= 0 && (L->mla || L->swa || L->sinks)) return false;
    }
    return true;
}

// The KV cache of a sequence as the backend is asked for it: plain unless a layer's attention
// has a window, sinks or a latent cache.
static struct strata_kv_params kv_params(const struct strata_model *m, int n_ctx, uint32_t k_type, uint32_t v_type)
{
    const bool plain = strata_seq_kv_typed(m);
    return (struct strata_kv_params){
        .n_layers = m->n_kv_layers, .n_head_kv = m->hp.n_head_kv, .head_dim_k = m->hp.head_dim_k,
        // MLA caches the latent in the key rows and reads its values there: no V cache
        .head_dim_v = m->hp.kv_lora_rank ? 0 : m->hp.head_dim_v,
        .n_ctx = n_ctx, .k_type = k_type, .v_type = v_type, .plain = plain,
        // the indexer's keys, F32 (llama.cpp's K type, which the CPU's latent caches take only)
        .idx_layers = m->n_idx_layers, .idx_dim = m->n_idx_layers ? m->hp.idx_head_dim : 0,
    };
}

// Bytes of one position of one attention layer's cache: its keys and values.
static uint64_t kv_layer_pos_bytes(const struct strata_kv_params *p)
{
    return (uint64_t)p->n_head_kv * (strata_type_row_bytes(p->k_type, p->head_dim_k) +
                                     (p->head_dim_v ? strata_type_row_bytes(p->v_type, p->head_dim_v) : 0));
}

uint64_t strata_seq_kv_bytes_per_token(const struct strata_model *m, uint32_t k_type, uint32_t v_type)
{
    const struct strata_kv_params p = kv_params(m, 1, k_type, v_type);
    return (uint64_t)p.n_layers * kv_layer_pos_bytes(&p) + (uint64_t)p.idx_layers * p.idx_dim * sizeof(float);
}

uint64_t strata_seq_state_bytes(const struct strata_model *m, int n_ctx, uint32_t k_type, uint32_t v_type)
{
    uint64_t n = (uint64_t)n_ctx * strata_seq_kv_bytes_per_token(m, k_type, v_type);
    if (m->n_rs_layers) n += (uint64_t)(conv_floats(m) + ssm_floats(m)) * sizeof(float);
    return n;
}

void strata_forward_set_experts(struct strata_forward *f, struct strata_expert_provider experts)
{
    f->experts = experts;
    if (f->tables_built) memset(f->tables_built, 0, f->m->layout.n_layers ? f->m->layout.n_layers : 1);
}

int strata_seq_state_alloc(struct strata_seq_state *st, const struct strata_model *m, int n_ctx, uint32_t k_type,
                           uint32_t v_type)
{
    memset(st, 0, sizeof *st);
    int rc = 0;
    st->n_ctx = n_ctx;
    if (m->n_kv_layers) {
        const struct strata_kv_params p = kv_params(m, n_ctx, k_type, v_type);
        st->kv_pos_bytes = kv_layer_pos_bytes(&p);
        rc = m->be->iface->kv_create(m->be->ctx, &p, &st->kv);
    }
    if (m->n_rs_layers) {
        st->conv = be_floats(m->be, conv_floats(m), "delta-net state", &rc);
        st->ssm = be_floats(m->be, ssm_floats(m), "delta-net state", &rc);
    }
    if (rc) strata_seq_state_free(st, m);
    return rc;
}

void strata_seq_state_free(struct strata_seq_state *st, const struct strata_model *m)
{
    if (st->kv) m->be->iface->kv_free(m->be->ctx, st->kv);
    float *bufs[] = {st->conv, st->ssm};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i]) m->be->iface->release(m->be->ctx, bufs[i]);
    memset(st, 0, sizeof *st);
}

uint64_t strata_seq_state_kv_bytes(const struct strata_seq_state *st, const struct strata_model *m)
{
    return st->kv ? m->be->iface->kv_bytes(m->be->ctx, st->kv) : 0;
}

int strata_seq_state_reset(struct strata_seq_state *st, const struct strata_model *m)
{
    if (!m->n_rs_layers) return 0;
    int rc = m->be->iface->memset(m->be->ctx, st->conv, 0, conv_floats(m) * sizeof(float));
    if (rc == 0) rc = m->be->iface->memset(m->be->ctx, st->ssm, 0, ssm_floats(m) * sizeof(float));
    return rc;
}

// ---- scratch ------------------------------------------------------------------------------------

static void *scratch(struct strata_forward *f, size_t bytes, const char *what, int *rc)
{
    if (*rc) return NULL;
    STRATA_ASSERT(f->n_bufs < (int)(sizeof f->bufs / sizeof f->bufs[0]));
    void *p = f->bi->alloc(f->bc, bytes ? bytes : 64, what);
    if (!p) {
        *rc = STRATA_ENOMEM;
        return NULL;
    }
    if (!f->bi->alloc_zeroed) *rc = f->bi->memset(f->bc, p, 0, bytes ? bytes : 64);
    f->bufs[f->n_bufs++] = p;
    return p;
}

static void *host_zalloc(size_t bytes, int *rc)
{
    if (*rc) return NULL;
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p) {
        strata_log_error("forward_create: out of memory (%zu bytes of scratch)", bytes);
        *rc = STRATA_ENOMEM;
    }
    return p;
}

int strata_forward_reserve_ctx(struct strata_forward *f, int max_ctx)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    if (max_ctx < f->max_ctx) max_ctx = f->max_ctx;
    uint32_t n_in = m->max_act_dim;
    if (hp->n_embd > n_in) n_in = hp->n_embd;
    if (m->max_q_dim > n_in) n_in = m->max_q_dim;
    const struct strata_backend_reserve r = {
        .max_tok = f->max_tok,
        .max_rows = f->max_tok * (int)hp->n_expert_used,
        .max_n_in = n_in,
        .rows_n_in = hp->n_ff_exp ? hp->n_ff_exp : n_in,
        .max_ctx = max_ctx,
    };
    int rc = f->bi->reserve(f->bc, &r);
    if (rc == 0 && m->n_idx_layers && (size_t)max_ctx > f->vis_ctx) {  // the indexer's mask rows
        uint8_t *vis = f->bi->alloc(f->bc, (size_t)f->max_tok * (size_t)max_ctx, "indexer mask");
        if (!vis) return STRATA_ENOMEM;
        if (f->visible) f->bi->release(f->bc, f->visible);
        f->visible = vis;
        f->vis_ctx = (size_t)max_ctx;
    }
    if (rc == 0) f->max_ctx = max_ctx;
    return rc;
}

// The ops the model's blocks call that a backend may leave NULL (backend.h): one line naming the
// first missing one.
static int check_ops(const struct strata_model *m)
{
    const struct strata_backend_i *bi = m->be->iface;
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const struct strata_layer *L = &m->layers[l];
        // idx_slot means something only in sparse blocks (other architectures leave it 0)
        const bool own_idx = L->sparse && L->idx_slot >= 0;
        const char *missing = L->swiglu_oai && !bi->swiglu_oai ? "the clamped SwiGLU (swiglu_oai)"
                              : L->mla && !bi->copy            ? "the row copy of multi-head latent attention"
                              : own_idx && !bi->layernorm     ? "LayerNorm (layernorm, the sparse-attention indexer's)"
                              : own_idx && !bi->indexer       ? "sparse-attention indexer (indexer)"
                                                                   : NULL;
        if (missing) {
            strata_log_error("forward_create: the %s backend cannot run %s yet: it has no %s op (use --backend cpu)",
                             bi->name, strata_arch_name(m->hp.arch), missing);
            return STRATA_EUNSUP;
        }
    }
    return 0;
}

int strata_forward_create(struct strata_forward **out, const struct strata_model *m,
                          struct strata_expert_provider experts, int max_tok, int max_ctx)
{
    *out = NULL;
    const int rc_ops = check_ops(m);
    if (rc_ops) return rc_ops;
    struct strata_forward *f = calloc(1, sizeof *f);
    if (!f) return STRATA_ENOMEM;
    const struct strata_hparams *hp = &m->hp;
    f->m = m;
    f->be = m->be;
    f->bi = m->be->iface;
    f->bc = m->be->ctx;
    f->experts = experts;
    f->max_tok = max_tok;
    const char *sp = getenv("STRATA_SPLIT_PROF");
    f->sp_on = sp && *sp && *sp != '0';
    const size_t B = (size_t)max_tok, E = hp->n_embd, K = hp->n_expert_used, X = hp->n_expert;
    const size_t KD = (size_t)hp->n_head_kv * hp->head_dim_k, VD = (size_t)hp->n_head_kv * hp->head_dim_v;
    const size_t OD = (size_t)hp->n_head * hp->head_dim_v, F = hp->n_ff_exp;
    const size_t Fd = hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp;
    const size_t nv = hp->ssm_dt_rank, d = hp->ssm_d_state;
    const size_t C = 2 * (size_t)hp->ssm_n_group * d + nv * d;
    const size_t fl = sizeof(float);
    int rc = 0;
    f->x = scratch(f, B * E * fl, "activations", &rc);
    // h (the norms' output) lives after the routes: see route_of below
    f->o = scratch(f, B * E * fl, "activations", &rc);
    f->q = scratch(f, B * m->max_q_dim * fl, "activations", &rc);
    f->k = scratch(f, B * KD * fl, "activations", &rc);
    f->v = scratch(f, B * VD * fl, "activations", &rc);
    f->attn = scratch(f, B * OD * fl, "activations", &rc);
    f->router_logits = scratch(f, B * X * fl, "router logits", &rc);
    f->gate_out = scratch(f, B * K * F * fl, "expert activations", &rc);
    f->up_out = scratch(f, B * K * F * fl, "expert activations", &rc);
    f->down_out = scratch(f, B * K * E * fl, "expert activations", &rc);
    f->ffn_a = scratch(f, B * (Fd ? Fd : 1) * fl, "FFN activations", &rc);
    f->ffn_b = scratch(f, B * (Fd ? Fd : 1) * fl, "FFN activations", &rc);
    f->ffn_out = scratch(f, B * E * fl, "FFN activations", &rc);
    if (m->n_rs_layers) {
        f->dn_qkv = scratch(f, B * C * fl, "delta-net activations", &rc);
        f->dn_z = scratch(f, B * nv * d * fl, "delta-net activations", &rc);
        f->dn_ba = scratch(f, B * 2 * nv * fl, "delta-net activations", &rc);
        f->dn_core = scratch(f, B * nv * d * fl, "delta-net activations", &rc);
        f->dn_work = scratch(f, B * (C + 2 * nv) * fl, "delta-net activations", &rc);
    }
    if (hp->kv_lora_rank) {
        const size_t R = hp->n_rot, NOPE = hp->head_dim_k_mla - R, H = hp->n_head;
        f->mla_qa = scratch(f, B * hp->q_lora_rank * fl, "MLA activations", &rc);
        f->mla_qb = scratch(f, B * H * (NOPE + R) * fl, "MLA activations", &rc);
        f->mla_vb = scratch(f, B * H * hp->head_dim_v_mla * fl, "MLA activations", &rc);
    }
    if (m->n_idx_layers) {
        const size_t IH = hp->idx_n_head, ID = hp->idx_head_dim;
        f->idx_q = scratch(f, B * IH * ID * fl, "indexer activations", &rc);
        f->idx_k = scratch(f, B * ID * fl, "indexer activations", &rc);
        f->idx_w = scratch(f, B * IH * fl, "indexer activations", &rc);
    }
    f->route_scratch = host_zalloc(ROUTE_PARTS * 2 * X * fl, &rc);
    f->route_vl = 16;
    const size_t lrows = B < LOGIT_ROWS ? B : LOGIT_ROWS;
    STRATA_ASSERT(f->bi->host_memory || f->bi->argmax);
    f->logits = scratch(f, lrows * hp->n_vocab * fl, "logits", &rc);
    if (!f->bi->host_memory) f->picks = scratch(f, lrows * sizeof(int32_t), "picks", &rc);
    f->picks_host = host_zalloc(lrows * sizeof(int32_t), &rc);
    if (!f->bi->host_memory && f->bi->topk)
        f->tops = scratch(f, lrows * STRATA_TOP_K_MAX * sizeof(struct strata_token_logit), "top candidates", &rc);
    f->tops_host = host_zalloc(lrows * STRATA_TOP_K_MAX * sizeof(struct strata_token_logit), &rc);
    if (!f->bi->host_memory && !f->bi->topk) f->row_host = host_zalloc(hp->n_vocab * fl, &rc);
    f->ids = scratch(f, B * sizeof(int32_t), "token ids", &rc);
    f->pos = scratch(f, B * sizeof(int32_t), "positions", &rc);
    f->tok_of = scratch(f, B * K * sizeof(int32_t), "routes", &rc);
    // ids, weights and the norms' output rows in one allocation: one download brings a small
    // pass's routes and the input of its experts (strata_forward_set_gpu_miss)
    f->h_off = (2 * B * K + 63) / 64 * 64;
    f->route_of = scratch(f, (f->h_off + B * E) * sizeof(int32_t), "routes and activations", &rc);
    f->weight = f->route_of ? (float *)(f->route_of + B * K) : NULL;
    f->h = f->route_of ? (float *)(f->route_of + f->h_off) : NULL;
    f->logits_host = host_zalloc(B * X * fl, &rc);
    f->sel = host_zalloc(B * K * sizeof(int32_t), &rc);
    f->selw = host_zalloc(B * K * fl, &rc);
    f->g.count = host_zalloc(X * sizeof(int32_t), &rc);
    f->g.first = host_zalloc(X * sizeof(int32_t), &rc);
    f->g.tok_of = host_zalloc(B * K * sizeof(int32_t), &rc);
    f->g.route_of = host_zalloc(B * K * sizeof(int32_t), &rc);
    f->g.used = host_zalloc(X * sizeof(uint32_t), &rc);
    f->views = host_zalloc(X * sizeof *f->views, &rc);
    f->order_scratch = host_zalloc(X * sizeof *f->order_scratch, &rc);
    f->ready = host_zalloc(X * sizeof *f->ready, &rc);
    f->split_idx = host_zalloc(X * sizeof *f->split_idx, &rc);
    f->n_ops = 2 * X > hp->n_head ? 2 * (int)X : (int)hp->n_head;
    f->ops = host_zalloc((size_t)f->n_ops * sizeof *f->ops, &rc);
    f->trace_ids = host_zalloc(B * (m->layout.n_layers ? m->layout.n_layers : 1) * K * sizeof(int32_t), &rc);
    f->ids_host = host_zalloc(B * sizeof(int32_t), &rc);
    f->pos_host = host_zalloc(B * sizeof(int32_t), &rc);
    f->seqs = host_zalloc(B * sizeof *f->seqs, &rc);
    if (f->bi->route && f->bi->moe && m->layout.n_layers && X) {
        const size_t nm = m->layout.n_layers;
        f->exp_tables = scratch(f, nm * 3 * X * sizeof(void *), "expert tables", &rc);
        f->probs_b = scratch(f, nm * X * fl, "expert tables", &rc);
        f->tables_built = host_zalloc(nm, &rc);
        f->tab_host = host_zalloc(3 * X * sizeof(void *), &rc);
        const char *hr = getenv("STRATA_HOST_ROUTE");
        f->host_route = hr && *hr && *hr != '0';
    }
    const char *sr = getenv("STRATA_SEPARATE_ROPE");
    f->separate_rope = sr && *sr && *sr != '0';
    const char *dp = getenv("STRATA_DECODE_PROF");
    f->dp_on = dp && *dp && *dp != '0';
    if (rc == 0) rc = strata_forward_reserve_ctx(f, max_ctx);
    if (rc) {
        strata_forward_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

// A host-clock profile's table (STRATA_SPLIT_PROF, STRATA_DECODE_PROF): microseconds a call of
// each step and its share.
static void log_profile(const char *what, const char *calls, const char *const *names, const double *s, int n,
                        uint64_t n_calls)
{
    if (!n_calls) return;
    double tot = 0;
    for (int i = 0; i < n; i++) tot += s[i];
    strata_log_info("%s: %llu %s, %.1f us each", what, (unsigned long long)n_calls, calls, 1e6 * tot / (double)n_calls);
    for (int i = 0; i < n; i++)
        strata_log_info("%s: %-44s %8.2f us %5.1f%%", what, names[i], 1e6 * s[i] / (double)n_calls,
                        tot > 0 ? 100.0 * s[i] / tot : 0.0);
}

void strata_forward_free(struct strata_forward *f)
{
    if (!f) return;
    if (f->sp_on) log_profile("split profile", "layer calls", sp_names, f->sp, SP_N, f->sp_calls);
    if (f->dp_on) log_profile("decode profile", "layer steps", dp_names, f->dp, DP_N, f->dp_layers);
    for (int i = 0; i < f->n_bufs; i++) f->bi->release(f->bc, f->bufs[i]);
    if (f->visible) f->bi->release(f->bc, f->visible);
    void *host[] = {f->route_scratch, f->logits_host, f->picks_host, f->tops_host, f->row_host, f->sel, f->selw,
                    f->g.count, f->g.first, f->g.tok_of, f->g.route_of,
                    f->g.used, f->views, f->order_scratch, f->ready, f->split_idx, f->ops, f->trace_ids, f->ids_host, f->pos_host, f->seqs,
                    f->tables_built, (void *)f->tab_host, f->c_gate, f->c_up, f->c_down, f->c_sum,
                    f->c_w, f->c_pack, f->c_state, f->c_where, f->c_hit, f->c_copy, f->c_cpu, f->c_views,
                    f->c_hviews, f->c_ops, f->d_views};
    for (size_t i = 0; i < sizeof host / sizeof host[0]; i++) free(host[i]);
    strata_lookahead_close(f->lookahead);
    free(f);
}

int strata_forward_set_prefetch(struct strata_forward *f, int ahead, uint32_t k)
{
    strata_lookahead_close(f->lookahead);
    f->lookahead = NULL;
    f->prefetch_ahead = 0;
    const struct strata_hparams *hp = &f->m->hp;
    if (ahead <= 0 || f->m->layout.n_layers == 0) return 0;
    int rc = strata_lookahead_open(&f->lookahead, f->experts, f->m->layout.n_layers, hp->n_expert,
                                   hp->n_expert_used, k ? k : hp->n_expert_used);
    if (rc == 0) f->prefetch_ahead = ahead;
    return rc;
}

void strata_forward_lookahead_stats(const struct strata_forward *f, uint32_t moe_layer,
                                    struct strata_lookahead_stats *st)
{
    if (f->lookahead) strata_lookahead_get_stats(f->lookahead, moe_layer, st);
    else memset(st, 0, sizeof *st);
}

int strata_forward_set_gpu_miss(struct strata_forward *f, struct strata_vram *vram, struct strata_expert_provider host,
                                struct strata_backend *cpu, enum strata_gpu_miss mode)
{
    f->vram = NULL;
    if (!vram || mode == STRATA_GPU_MISS_COPY) return 0;
    const struct strata_hparams *hp = &f->m->hp;
    const int bs = f->max_tok < f->bi->moe_sparse_tok ? f->max_tok : f->bi->moe_sparse_tok;
    if (bs <= 0 || !f->exp_tables || !cpu) return 0;  // the backend has no sparse moe op: copies only
    const size_t B = (size_t)f->max_tok, Bs = (size_t)bs, E = hp->n_embd, F = hp->n_ff_exp, K = hp->n_expert_used,
                 X = hp->n_expert, fl = sizeof(float);
    int rc = 0;
    if (!f->c_pack) {
        f->cpu_sum_dev = scratch(f, Bs * E * fl, "CPU experts' sums", &rc);
        f->c_gate = host_zalloc(Bs * K * F * fl, &rc);
        f->c_up = host_zalloc(Bs * K * F * fl, &rc);
        f->c_down = host_zalloc(Bs * K * E * fl, &rc);
        f->c_sum = host_zalloc(Bs * E * fl, &rc);
        f->c_w = host_zalloc(B * K * fl, &rc);
        f->c_pack = host_zalloc((f->h_off + Bs * E) * sizeof(int32_t), &rc);
        f->c_h = f->c_pack ? (float *)(f->c_pack + f->h_off) : NULL;
        f->c_state = host_zalloc(X, &rc);
        f->c_where = host_zalloc(X, &rc);
        f->c_hit = host_zalloc(X * sizeof(uint32_t), &rc);
        f->c_copy = host_zalloc(X * sizeof(uint32_t), &rc);
        f->c_cpu = host_zalloc(X * sizeof(uint32_t), &rc);
        f->c_views = host_zalloc(2 * X * sizeof *f->c_views, &rc);
        f->c_hviews = host_zalloc(X * sizeof *f->c_hviews, &rc);
        f->d_views = host_zalloc(2 * X * sizeof *f->d_views, &rc);
        f->c_ops = host_zalloc(2 * X * sizeof *f->c_ops, &rc);
        if (rc) return rc;
        uint32_t n_in = hp->n_embd > hp->n_ff_exp ? hp->n_embd : hp->n_ff_exp;
        const struct strata_backend_reserve r = {.max_tok = bs, .max_rows = bs * (int)K, .max_n_in = n_in,
                                                 .rows_n_in = hp->n_ff_exp, .max_ctx = 1};
        if ((rc = cpu->iface->reserve(cpu->ctx, &r))) return rc;
    }
    f->vram = vram;
    f->host = host;
    f->cpu = cpu;
    f->miss_mode = mode;
    f->s_cpu = 1 / 25e9;   // priors (even) until the run measures both
    f->s_pcie = 1 / 25e9;
    f->cpu_calls = 0;
    f->since_cpu = 0;
    const char *dv = getenv("STRATA_SPLIT_DEFER");
    f->defer = !(dv && dv[0] == '0');
    f->d_ml = -1;
    return 0;
}

void strata_forward_gpu_miss_stats(const struct strata_forward *f, struct strata_gpu_miss_stats *out)
{
    *out = f->miss_st;
    out->s_cpu = f->s_cpu * 1e9;
    out->s_pcie = f->s_pcie * 1e9;
}

int strata_forward_max_tok(const struct strata_forward *f) { return f->max_tok; }

// ---- blocks -------------------------------------------------------------------------------------

static uint64_t mat_bytes(const struct strata_mat *w) { return (uint64_t)w->row_bytes * w->n_out; }

// The backend's mm, the call's weight bytes counted to the current phase: consecutive ops on one
// matrix (the head of several sequences), which the backends read once for all, once.
static int mm_call(struct strata_forward *f, const struct strata_mm_op *ops, int n)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || ops[i - 1].w.data != ops[i].w.data) b += mat_bytes(&ops[i].w);
    if (f->bytes_to) *f->bytes_to += b;
    return f->bi->mm(f->bc, ops, n);
}

// y_i = W_i h for the weights of one block on the same n rows (one mm call).
static int project(struct strata_forward *f, const struct strata_mat *const *w, float *const *y, int nw,
                   const float *x, int n)
{
    struct strata_mm_op ops[4];
    STRATA_ASSERT(nw <= 4);
    for (int i = 0; i < nw; i++)
        ops[i] = (struct strata_mm_op){*w[i], x, w[i]->n_in, n, NULL, n, y[i], w[i]->n_out, NULL, NULL};
    return mm_call(f, ops, nw);
}

static int attention_out(struct strata_forward *f, const struct strata_layer *L, int n, size_t qs);

// RMS norm of n rows of the residual stream into y, with the hint that products of `next`'s type
// read y next (a backend with rmsnorm_q may round them in the same step).
static int norm_before(struct strata_forward *f, float *y, const float *w, int n, const struct strata_mat *next)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd;
    if (f->bi->rmsnorm_q)
        return f->bi->rmsnorm_q(f->bc, y, E, f->x, E, w, n, E, hp->rms_eps,
                                strata_type_traits(next->type)->vec_dot_type);
    return f->bi->rmsnorm(f->bc, y, E, f->x, E, w, n, E, hp->rms_eps);
}

static int attention_block(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim_k, Dv = hp->head_dim_v;
    const size_t KD = (size_t)Hkv * D, VD = (size_t)Hkv * Dv, QW = L->wq.n_out;
    int rc;
    TRY(norm_before(f, f->h, L->attn_norm, n, &L->wq));
    dp_mark(f, DP_ANORM);
    const struct strata_mat *w[3] = {&L->wq, &L->wk, &L->wv};
    float *y[3] = {f->q, f->k, f->v};
    TRY(project(f, w, y, 3, f->h, n));
    dp_mark(f, DP_QKV);
    if (L->bq) TRY(f->bi->add(f->bc, f->q, L->bq, 0, n, (uint32_t)QW));
    if (L->bk) TRY(f->bi->add(f->bc, f->k, L->bk, 0, n, (uint32_t)KD));
    if (L->bv) TRY(f->bi->add(f->bc, f->v, L->bv, 0, n, (uint32_t)VD));
    // A gated query row is [H][query D | gate D]: the heads are 2D apart.
    const size_t qs = L->q_gated ? 2 * (size_t)D : D;
    const struct strata_attn_op ao = {
        .batch = &f->batch, .kv_slot = (uint32_t)L->kv_slot,
        .q = f->q, .q_tok_stride = QW, .q_head_stride = qs, .k = f->k, .v = f->v, .out = f->attn,
        .n_head = H, .n_head_kv = Hkv, .head_dim_k = D, .head_dim_v = Dv, .scale = 1.0f / sqrtf((float)D),
        .n_swa = L->swa ? hp->n_swa : 0, .sinks = L->sinks,
        // the output projection follows at once unless the output gate comes first
        .next_vdt = L->q_gated ? 0 : strata_type_traits(L->wo.type)->vec_dot_type,
    };
    if (f->bi->attention_rope && !f->separate_rope && !m->rope_ext_on && !ao.n_swa && !ao.sinks) {
        // the backend norms, rotates and stores the queries and keys itself
        const struct strata_attn_rope_op ar = {
            .attn = &ao, .q = f->q, .k = f->k, .q_norm = L->q_norm, .k_norm = L->k_norm, .eps = hp->rms_eps,
            .n_rot = hp->n_rot, .freq_base = hp->rope_freq_base, .sections = m->rope_mrope ? hp->rope_sections : NULL,
        };
        TRY(f->bi->attention_rope(f->bc, &ar));
        dp_mark(f, DP_ATTN);
        return attention_out(f, L, n, qs);
    }
    if (L->q_norm) TRY(f->bi->rmsnorm(f->bc, f->q, qs, f->q, qs, L->q_norm, n * (int)H, D, hp->rms_eps));
    const int32_t *sections = m->rope_mrope ? hp->rope_sections : NULL;
    const struct strata_rope_ext *ext = m->rope_ext_on ? &m->rope_ext : NULL;  // pair layout, YaRN
    const struct strata_rope_op rq = {.x = f->q, .tok_stride = QW, .head_stride = qs, .n_tok = n, .n_head = H,
                                      .pos = f->pos, .n_rot = hp->n_rot, .freq_base = hp->rope_freq_base,
                                      .sections = sections, .ext = ext};
    TRY(f->bi->rope(f->bc, &rq));
    if (L->k_norm) TRY(f->bi->rmsnorm(f->bc, f->k, D, f->k, D, L->k_norm, n * (int)Hkv, D, hp->rms_eps));
    const struct strata_rope_op rk = {.x = f->k, .tok_stride = KD, .head_stride = D, .n_tok = n, .n_head = Hkv,
                                      .pos = f->pos, .n_rot = hp->n_rot, .freq_base = hp->rope_freq_base,
                                      .sections = sections, .ext = ext};
    TRY(f->bi->rope(f->bc, &rk));
    dp_mark(f, DP_QKROPE);
    TRY(f->bi->attention(f->bc, &ao));
    dp_mark(f, DP_ATTN);
    return attention_out(f, L, n, qs);
}

// The output gate, the output projection and the residual of an attention block.
static int attention_out(struct strata_forward *f, const struct strata_layer *L, int n, size_t qs)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd, H = hp->n_head, D = hp->head_dim_k, Dv = hp->head_dim_v;
    int rc;
    if (L->q_gated) TRY(f->bi->mul_sigmoid(f->bc, f->attn, Dv, f->q + D, qs, false, n * (int)H, Dv));
    const struct strata_mat *wo[1] = {&L->wo};
    if (f->bi->mm_add && !L->bo) {  // x += Wo attn in one product (the same sum as the add below)
        const struct strata_mm_op op = {L->wo, f->attn, L->wo.n_in, n, NULL, n, f->x, E, NULL, f->x};
        TRY(mm_call(f, &op, 1));
        dp_mark(f, DP_O);
        return 0;
    }
    TRY(project(f, wo, &f->o, 1, f->attn, n));
    if (L->bo) TRY(f->bi->add(f->bc, f->o, L->bo, 0, n, E));
    TRY(f->bi->add(f->bc, f->x, f->o, E, n, E));
    dp_mark(f, DP_O);
    return 0;
}

// The sparse-attention indexer of a block that computes its own top-k (deepseek32, glm-dsa), as
// llama.cpp's lightning indexer: queries from the normed q low-rank activation (f->mla_qa), the
// key LayerNorm-ed, both rotated on their first R dims, then the backend's indexer op (Hadamard
// products, the key cache, scores and the top-k mask into f->visible, which the blocks that reuse
// it read until the next block computing its own).
static int indexer(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t IH = hp->idx_n_head, ID = hp->idx_head_dim, R = hp->n_rot;
    int rc;
    const struct strata_mat *wq[1] = {&L->idx.wq_b};
    TRY(project(f, wq, &f->idx_q, 1, f->mla_qa, n));
    TRY(f->bi->layernorm(f->bc, f->idx_k, f->idx_k, L->idx.k_norm, L->idx.k_norm_b, n, ID, hp->norm_eps));
    const struct strata_rope_op rq = {.x = f->idx_q, .tok_stride = (size_t)IH * ID, .head_stride = ID, .n_tok = n,
                                      .n_head = IH, .pos = f->pos, .n_rot = R, .ext = &m->idx_rope};
    TRY(f->bi->rope(f->bc, &rq));
    const struct strata_rope_op rk = {.x = f->idx_k, .tok_stride = ID, .head_stride = ID, .n_tok = n, .n_head = 1,
                                      .pos = f->pos, .n_rot = R, .ext = &m->idx_rope};
    TRY(f->bi->rope(f->bc, &rk));
    const struct strata_indexer_op op = {
        .batch = &f->batch, .idx_slot = (uint32_t)L->idx_slot, .q = f->idx_q, .k = f->idx_k, .w = f->idx_w,
        .w_scale = 1.0f / sqrtf((float)(ID * IH)), .visible = f->visible, .visible_stride = f->vis_ctx,
        .n_head = IH, .d = ID, .top_k = hp->idx_top_k,
    };
    return f->bi->indexer(f->bc, &op);
}

// Multi-head latent attention (deepseek2 family), as llama.cpp's absorbed form: the latent and the
// shared rope key are cached ([KVL | R] per position, f->k holds the pass's rows), each head's
// no-rope query goes through its attn_k_b matrix into latent space, the heads attend with the
// latent as value, and attn_v_b expands each head's result.
static int mla_attention_block(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const struct strata_mla_layer *w = &L->mla_w;
    const uint32_t E = hp->n_embd, H = hp->n_head, R = hp->n_rot, KVL = hp->kv_lora_rank, QL = hp->q_lora_rank;
    const uint32_t NOPE = hp->head_dim_k_mla - R, VH = hp->head_dim_v_mla;
    const size_t QB = (size_t)H * (NOPE + R), QA = (size_t)H * (KVL + R), KR = (size_t)KVL + R;
    int rc;
    TRY(f->bi->rmsnorm(f->bc, f->h, E, f->x, E, L->attn_norm, n, E, hp->rms_eps));
    // the indexer's key and head weights read the same normed input
    const struct strata_mat *wa[4] = {&w->wq_a, &w->wkv_a, &L->idx.wk, &L->idx.proj};
    float *ya[4] = {f->mla_qa, f->k, f->idx_k, f->idx_w};
    TRY(project(f, wa, ya, L->idx_slot >= 0 ? 4 : 2, f->h, n));
    TRY(f->bi->rmsnorm(f->bc, f->mla_qa, QL, f->mla_qa, QL, w->q_a_norm, n, QL, hp->rms_eps));
    if (L->idx_slot >= 0) TRY(indexer(f, L, n));
    TRY(f->bi->rmsnorm(f->bc, f->k, KR, f->k, KR, w->kv_a_norm, n, KVL, hp->rms_eps));
    const struct strata_rope_op rk = {.x = f->k + KVL, .tok_stride = KR, .n_tok = n, .n_head = 1, .pos = f->pos,
                                      .n_rot = R, .ext = &m->rope_ext};
    TRY(f->bi->rope(f->bc, &rk));
    const struct strata_mat *wb[1] = {&w->wq_b};
    TRY(project(f, wb, &f->mla_qb, 1, f->mla_qa, n));
    const struct strata_rope_op rq = {.x = f->mla_qb + NOPE, .tok_stride = QB, .head_stride = NOPE + R, .n_tok = n,
                                      .n_head = H, .pos = f->pos, .n_rot = R, .ext = &m->rope_ext};
    TRY(f->bi->rope(f->bc, &rq));
    // per head: q_abs = attn_k_b[h] q_nope into the query's latent part, then its rope part
    struct strata_mm_op *ops = f->ops;
    for (uint32_t h = 0; h < H; h++) {
        struct strata_mat wk = w->wk_b;
        wk.n_out = KVL;
        wk.data = (const char *)w->wk_b.data + (size_t)h * KVL * w->wk_b.row_bytes;
        ops[h] = (struct strata_mm_op){wk, f->mla_qb + (size_t)h * (NOPE + R), QB, n, NULL, n,
                                       f->q + (size_t)h * (KVL + R), QA, NULL, NULL};
    }
    TRY(mm_call(f, ops, (int)H));
    TRY(f->bi->copy(f->bc, f->q + KVL, KR, f->mla_qb + NOPE, NOPE + R, n * (int)H, R));
    const struct strata_attn_op ao = {
        .batch = &f->batch, .kv_slot = (uint32_t)L->kv_slot,
        .q = f->q, .q_tok_stride = QA, .q_head_stride = KR, .k = f->k, .v = NULL, .out = f->attn,
        .n_head = H, .n_head_kv = 1, .head_dim_k = (uint32_t)KR, .head_dim_v = KVL, .scale = m->kq_scale,
        .latent_kv = true, .visible = L->sparse ? f->visible : NULL, .visible_stride = f->vis_ctx,
    };
    TRY(f->bi->attention(f->bc, &ao));
    for (uint32_t h = 0; h < H; h++) {
        struct strata_mat wv = w->wv_b;
        wv.n_out = VH;
        wv.data = (const char *)w->wv_b.data + (size_t)h * VH * w->wv_b.row_bytes;
        ops[h] = (struct strata_mm_op){wv, f->attn + (size_t)h * KVL, (size_t)H * KVL, n, NULL, n,
                                       f->mla_vb + (size_t)h * VH, (size_t)H * VH, NULL, NULL};
    }
    TRY(mm_call(f, ops, (int)H));
    const struct strata_mat *wo[1] = {&L->wo};
    TRY(project(f, wo, &f->o, 1, f->mla_vb, n));
    return f->bi->add(f->bc, f->x, f->o, E, n, E);
}

static int deltanet_block(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_hparams *hp = &f->m->hp;
    const struct strata_deltanet_layer *dn = &L->dn;
    const uint32_t E = hp->n_embd, nv = hp->ssm_dt_rank;
    int rc;
    TRY(f->bi->rmsnorm(f->bc, f->h, E, f->x, E, L->attn_norm, n, E, hp->rms_eps));
    // qkv, z and the beta/alpha rows (fused as [nk][r betas | r alphas], or split)
    const struct strata_mat *w[4] = {&dn->qkv, &dn->z, dn->ba_split ? &dn->beta : &dn->ba, &dn->alpha};
    float *y[4] = {f->dn_qkv, f->dn_z, f->dn_ba, f->dn_ba + (size_t)n * nv};
    TRY(project(f, w, y, dn->ba_split ? 4 : 3, f->h, n));
    const struct strata_deltanet_op op = {
        .batch = &f->batch, .rs_slot = (uint32_t)dn->rs_slot, .qkv = f->dn_qkv, .z = f->dn_z, .ba = f->dn_ba,
        .ba_split = dn->ba_split, .conv_taps = dn->conv_taps, .dt_bias = dn->dt_bias, .a = dn->a, .norm = dn->norm,
        .out = f->dn_core, .work = f->dn_work, .nk = hp->ssm_n_group, .nv = nv, .d = hp->ssm_d_state,
        .conv_k = hp->ssm_d_conv, .kv_tiled = dn->kv_tiled, .eps = hp->rms_eps,
    };
    TRY(f->bi->deltanet(f->bc, &op));
    const struct strata_mat *wo[1] = {&dn->out};
    TRY(project(f, wo, &f->o, 1, f->dn_core, n));
    return f->bi->add(f->bc, f->x, f->o, E, n, E);
}

// out[n][E] = down(silu(gate h) * up h) for a SwiGLU FFN (dense or shared expert).
static int swiglu_ffn(struct strata_forward *f, const struct strata_mat *gate, const struct strata_mat *up,
                      const struct strata_mat *down, int n, float *out)
{
    int rc;
    const struct strata_mat *gu[2] = {gate, up};
    float *gu_out[2] = {f->ffn_a, f->ffn_b};
    TRY(project(f, gu, gu_out, 2, f->h, n));
    TRY(f->bi->swiglu(f->bc, f->ffn_a, f->ffn_a, f->ffn_b, (size_t)n * gate->n_out));
    const struct strata_mat *d[1] = {down};
    return project(f, d, &out, 1, f->ffn_a, n);
}

static int dense_ffn_block(struct strata_forward *f, const struct strata_layer *L, int n, struct strata_fwd_stats *st)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd;
    const double t0 = strata_now();
    int rc;
    f->bytes_to = &st->b_experts;
    TRY(f->bi->rmsnorm(f->bc, f->h, E, f->x, E, L->ffn_norm, n, E, hp->rms_eps));
    TRY(swiglu_ffn(f, &L->ffn_gate, &L->ffn_up, &L->ffn_down, n, f->o));
    TRY(f->bi->add(f->bc, f->x, f->o, E, n, E));
    st->t_experts += strata_now() - t0;
    return 0;
}

// The shared expert on h into ffn_out, scaled by sigmoid(sh_gate_inp . h) when the layer has it.
static int shared_expert(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const uint32_t E = f->m->hp.n_embd;
    int rc;
    TRY(swiglu_ffn(f, &L->sh_gate, &L->sh_up, &L->sh_down, n, f->ffn_out));
    if (!L->sh_gate_inp.data) return 0;
    const struct strata_mat *g[1] = {&L->sh_gate_inp};
    TRY(project(f, g, &f->ffn_a, 1, f->h, n));   // one gate logit per token; ffn_a is free again
    return f->bi->mul_sigmoid(f->bc, f->ffn_out, E, f->ffn_a, 1, true, n, E);
}

// Host routing of tokens [t0, t1) with scratch slot `part`: the router's bias (ggml adds it to the
// logits before gating), then the gate and the top-k.
struct route_job {
    struct strata_forward *f;
    const struct strata_layer *L;
    const struct strata_route_params *rp;
    const struct strata_route_cfg *rc;
};

static void route_tokens(void *arg, int part, int t0, int t1)
{
    const struct route_job *j = arg;
    struct strata_forward *f = j->f;
    const uint32_t X = j->rp->n_expert, K = j->rp->n_used;
    float *logits = f->logits_host + (size_t)t0 * X;
    if (j->L->router_b)
        for (int t = t0; t < t1; t++)
            for (uint32_t e = 0; e < X; e++) f->logits_host[(size_t)t * X + e] += j->L->router_b[e];
    if (f->m->route_exact) {
        float *scratch = f->route_scratch + (size_t)part * 2 * X;
        for (int t = t0; t < t1; t++)
            strata_route_select(j->rc, f->logits_host + (size_t)t * X, j->L->exp_probs_b, f->sel + (size_t)t * K,
                                f->selw + (size_t)t * K, scratch);
    } else {
        strata_route_topk(j->rp, logits, t1 - t0, f->sel + (size_t)t0 * K, f->selw + (size_t)t0 * K);
    }
}

// Router and routing: on the device where the backend routes (route_of then holds the ids and
// weight the weights, on_device true), else on the host with the grouped routes and weights
// uploaded.
// Whether a pass of n tokens may split a VRAM tier's misses between copies and the CPU.
static bool split_ok(const struct strata_forward *f, int n)
{
    return f->vram && f->miss_mode != STRATA_GPU_MISS_COPY && n <= f->bi->moe_sparse_tok;
}

static int route(struct strata_forward *f, const struct strata_layer *L, int n, bool *on_device)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t X = hp->n_expert, K = hp->n_expert_used;
    int rc;
    const struct strata_mat *w[1] = {&L->router};
    TRY(project(f, w, &f->router_logits, 1, f->h, n));
    dp_mark(f, DP_ROUTER);
    const uint32_t ml = (uint32_t)L->moe_index;
    if (f->exp_tables && !f->host_route && !m->route_exact && !L->router_b && K <= 32 && X <= 1024 &&
        ml < m->layout.n_layers) {
        // the backend's routing, as the resident pass routes (the same selections and weight bits,
        // whichever tier the experts come from); the ids come back for the provider
        if (L->exp_probs_b && !(f->tables_built[ml] & 2)) {
            TRY(f->bi->upload(f->bc, f->probs_b + (size_t)ml * X, L->exp_probs_b, X * sizeof(float)));
            f->tables_built[ml] |= 2;
        }
        const struct strata_route_params dp = {
            .n_expert = X, .n_used = K, .sigmoid = hp->expert_gating == STRATA_GATING_SIGMOID,
            .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale,
            .bias = L->exp_probs_b ? f->probs_b + (size_t)ml * X : NULL,
        };
        TRY(f->bi->route(f->bc, &dp, f->router_logits, n, f->route_of, f->weight));
        if (split_ok(f, n)) {  // the weights and the input rows too, for experts the CPU may compute
            const size_t BK = (size_t)f->max_tok * K;
            TRY(f->bi->download(f->bc, f->c_pack, f->route_of, (f->h_off + (size_t)n * hp->n_embd) * sizeof(int32_t)));
            memcpy(f->sel, f->c_pack, (size_t)n * K * sizeof(int32_t));
            memcpy(f->c_w, f->c_pack + BK, (size_t)n * K * sizeof(float));
        } else {
            TRY(f->bi->download(f->bc, f->sel, f->route_of, (size_t)n * K * sizeof(int32_t)));
        }
        if (f->want_trace)
            for (int t = 0; t < n; t++)
                memcpy(f->trace_ids + ((size_t)t * m->layout.n_layers + ml) * K, f->sel + (size_t)t * K,
                       K * sizeof(int32_t));
        strata_route_group(f->sel, n, K, X, &f->g);
        *on_device = true;  // route_of holds the ids, weight the weights; the grouping is uploaded by the caller if wanted
        return 0;
    }
    *on_device = false;
    TRY(f->bi->download(f->bc, f->logits_host, f->router_logits, (size_t)n * X * sizeof(float)));
    const struct strata_route_params rp = {
        .n_expert = X, .n_used = K, .sigmoid = hp->expert_gating == STRATA_GATING_SIGMOID,
        .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale, .bias = L->exp_probs_b,
    };
    const struct strata_route_cfg rc_ = {X, K, hp->expert_gating, hp->n_expert_groups, hp->n_group_used,
                                         hp->expert_weights_norm, hp->expert_weights_scale, f->route_vl};
    struct route_job rj = {f, L, &rp, &rc_};
    // each token's routing is its own: a prompt's tokens are shared among the host threads
    if (n >= ROUTE_PAR_MIN && f->bi->host_for) f->bi->host_for(f->bc, route_tokens, &rj, n, ROUTE_PARTS);
    else route_tokens(&rj, 0, 0, n);
    if (f->want_trace)
        for (int t = 0; t < n; t++)
            memcpy(f->trace_ids + ((size_t)t * m->layout.n_layers + (size_t)L->moe_index) * K, f->sel + (size_t)t * K,
                   K * sizeof(int32_t));
    strata_route_group(f->sel, n, K, X, &f->g);
    TRY(f->bi->upload(f->bc, f->tok_of, f->g.tok_of, (size_t)n * K * sizeof(int32_t)));
    TRY(f->bi->upload(f->bc, f->route_of, f->g.route_of, (size_t)n * K * sizeof(int32_t)));
    return f->bi->upload(f->bc, f->weight, f->selw, (size_t)n * K * sizeof(float));
}

// Router lookahead: the next prefetch_ahead MoE layers' routers applied to this layer's residual
// stream guess their experts, and the missing ones are read while this layer computes
// (experts/lookahead.h). Uses o and the host router logits, both free at this point.
static int lookahead(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t E = hp->n_embd, X = hp->n_expert;
    int rc;
    const struct strata_layer *next = L;
    for (int a = 0; a < f->prefetch_ahead; a++) {
        do next++;
        while (next < m->layers + hp->n_layer && next->moe_index < 0);
        if (next >= m->layers + hp->n_layer) return 0;
        TRY(f->bi->rmsnorm(f->bc, f->o, E, f->x, E, next->ffn_norm, n, E, hp->rms_eps));
        const struct strata_mat *w[1] = {&next->router};
        TRY(project(f, w, &f->router_logits, 1, f->o, n));
        TRY(f->bi->download(f->bc, f->logits_host, f->router_logits, (size_t)n * X * sizeof(float)));
        TRY(strata_lookahead_predict(f->lookahead, (uint32_t)next->moe_index, f->logits_host, n,
                                     hp->expert_gating == STRATA_GATING_SIGMOID ? STRATA_LOOKAHEAD_SIGMOID
                                                                               : STRATA_LOOKAHEAD_SOFTMAX,
                                     next->exp_probs_b));
    }
    return 0;
}

// The products of the pass's experts g->used[idx[0..k)] (their views in f->views): gate and up
// of all of them in one product call, the activation, then down in another.
static int experts_compute(struct strata_forward *f, const struct strata_layer *L, int n, const int *idx, int k)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd, F = hp->n_ff_exp;
    const struct strata_route_groups *g = &f->g;
    struct strata_mm_op *ops = f->ops;
    int no = 0, rc;
    for (int j = 0; j < k; j++) {
        const int i = idx[j];
        const uint32_t e = g->used[i];
        const int first = g->first[e], cnt = g->count[e];
        struct strata_mat wg = L->exp_gate, wu = L->exp_up;
        wg.data = f->views[i].part[STRATA_EXPERT_GATE];
        wu.data = f->views[i].part[STRATA_EXPERT_UP];
        ops[no++] = (struct strata_mm_op){wg, f->h, E, n, f->tok_of + first, cnt, f->gate_out + (size_t)first * F, F, NULL, NULL};
        ops[no++] = (struct strata_mm_op){wu, f->h, E, n, f->tok_of + first, cnt, f->up_out + (size_t)first * F, F, NULL, NULL};
    }
    rc = mm_call(f, ops, no);
    dp_mark(f, DP_GATEUP);
    for (int j = 0; j < k && rc == 0 && L->exp_up_b; j++) {  // per-expert biases (gpt-oss)
        const uint32_t e = g->used[idx[j]];
        const size_t first = (size_t)g->first[e];
        rc = f->bi->add(f->bc, f->up_out + first * F, L->exp_up_b + (size_t)e * F, 0, g->count[e], F);
        if (rc == 0) rc = f->bi->add(f->bc, f->gate_out + first * F, L->exp_gate_b + (size_t)e * F, 0, g->count[e], F);
    }
    // rows are grouped by expert: the activation over each run of these experts whose rows
    // follow each other (one run when they are the whole pass in id order)
    for (int j = 0; j < k && rc == 0;) {
        const size_t r0 = (size_t)g->first[g->used[idx[j]]];
        size_t r1 = r0 + (size_t)g->count[g->used[idx[j]]];
        for (j++; j < k && (size_t)g->first[g->used[idx[j]]] == r1; j++) r1 += (size_t)g->count[g->used[idx[j]]];
        if (L->swiglu_oai)
            rc = f->bi->swiglu_oai(f->bc, f->gate_out + r0 * F, f->gate_out + r0 * F, f->up_out + r0 * F,
                                   (r1 - r0) * F, 1.702f, 7.0f);
        else
            rc = f->bi->swiglu(f->bc, f->gate_out + r0 * F, f->gate_out + r0 * F, f->up_out + r0 * F, (r1 - r0) * F);
    }
    dp_mark(f, DP_SWIGLU);
    no = 0;
    for (int j = 0; j < k && rc == 0; j++) {
        const int i = idx[j];
        const uint32_t e = g->used[i];
        const int first = g->first[e], cnt = g->count[e];
        struct strata_mat wd = L->exp_down;
        wd.data = f->views[i].part[STRATA_EXPERT_DOWN];
        ops[no++] = (struct strata_mm_op){wd, f->gate_out + (size_t)first * F, F, cnt, NULL, cnt,
                                          f->down_out + (size_t)first * E, E, NULL, NULL};
    }
    if (rc == 0) rc = mm_call(f, ops, no);
    dp_mark(f, DP_DOWN);
    for (int j = 0; j < k && rc == 0 && L->exp_down_b; j++) {
        const uint32_t e = g->used[idx[j]];
        rc = f->bi->add(f->bc, f->down_out + (size_t)g->first[e] * E, L->exp_down_b + (size_t)e * E, 0, g->count[e], E);
    }
    return rc;
}

// After a failed acquire_next or finish: the group's ready views are still pinned.
static void release_ready(struct strata_forward *f, uint32_t moe_l, int g0, int g1)
{
    for (int i = g0; i < g1; i++)
        if (f->ready[i]) strata_provider_release(f->experts, moe_l, f->views + i, 1);
}

// The experts of a pass, each fetched once. A bounded cache holds max_batch experts of a layer at
// a time, so a pass needing more runs them in groups (strata_expert_pass_group: the experts most
// tokens need first, half the slots per group): each group is acquired, the next group's reads
// are started (the provider's fetch), the group is computed and released. Within a group, the
// experts already resident are computed while the others are read (acquire_start), then the
// others in the batches they land in (acquire_next). Every (token, expert) row is computed the same way in any grouping and order, so the
// output depends neither on the cache size nor on the other sequences in the pass.
static int experts_block(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const uint32_t moe_l = (uint32_t)L->moe_index;
    struct strata_route_groups *g = &f->g;
    const int n_used = g->n_used_experts, max_batch = strata_provider_max_batch(f->experts);
    const int max_group = strata_provider_can_fetch(f->experts) ? strata_expert_pass_group(n_used, max_batch) : max_batch;
    if (max_group < n_used) strata_expert_pass_order(g->used, n_used, g->count, f->order_scratch);
    int rc;
    for (int g0 = 0; g0 < n_used; g0 += max_group) {
        const int g1 = n_used - g0 < max_group ? n_used : g0 + max_group;
        uint8_t *ready = f->ready + g0;
        TRY(strata_provider_acquire_start(f->experts, moe_l, g->used + g0, g1 - g0, f->views + g0, ready));
        if (g1 < n_used) {  // the next group reads while this one computes
            const int g2 = n_used - g1 < max_group ? n_used : g1 + max_group;
            rc = strata_provider_fetch(f->experts, moe_l, g->used + g1, g2 - g1);
            if (rc) {  // bad arguments: the group is finished and given back
                if (strata_provider_acquire_finish(f->experts, moe_l, g->used + g0, g1 - g0, f->views + g0, ready) == 0)
                    strata_provider_release(f->experts, moe_l, f->views + g0, g1 - g0);
                else
                    release_ready(f, moe_l, g0, g1);
                return rc;
            }
        }
        // the next layers' guesses go out once this layer's own misses are queued
        rc = g0 == 0 && f->lookahead ? lookahead(f, L, n) : 0;
        // the resident experts first, then each batch of the others as it lands, in pass order
        // (ready: 0 not yet, 1 handed out, 2 computed)
        int left = g1 - g0;
        for (;;) {
            int k = 0;
            for (int i = g0; i < g1; i++)
                if (f->ready[i] == 1) f->split_idx[k++] = i, f->ready[i] = 2;
            left -= k;
            if (rc == 0 && k) rc = experts_compute(f, L, n, f->split_idx, k);
            if (left == 0) break;
            const int rn = strata_provider_acquire_next(f->experts, moe_l, g->used + g0, g1 - g0, f->views + g0, ready);
            if (rn < 0) {  // the others are unpinned; the ready ones once their products are done
                (void)f->bi->sync(f->bc);
                release_ready(f, moe_l, g0, g1);
                return rn;
            }
        }
        // the products must be done with the views before they are released
        if (rc == 0) rc = f->bi->sync(f->bc);
        strata_provider_release(f->experts, moe_l, f->views + g0, g1 - g0);
        if (rc) return rc;
    }
    return 0;
}

// Whether a layer's experts run from device routes (the backend's route and moe ops): the routing
// is route.c's plain top-k, nothing needs the routes on the host (traces, the lookahead), and
// every expert of the layer is resident, so the table of their matrices (built at the first use:
// one acquire of all experts, the views kept) stays valid.
static int device_moe(struct strata_forward *f, const struct strata_layer *L, bool *use)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t X = hp->n_expert, K = hp->n_expert_used, ml = (uint32_t)L->moe_index;
    *use = false;
    if (!f->exp_tables || f->host_route || m->route_exact || L->router_b || L->exp_up_b || L->exp_gate_b ||
        L->exp_down_b || L->swiglu_oai || f->want_trace || f->lookahead || K > 32 || X > 1024 ||
        ml >= m->layout.n_layers)
        return 0;
    if (!(f->tables_built[ml] & 1)) {
        struct strata_experts_stats es;
        strata_provider_stats(f->experts, &es);
        if (!es.full || strata_provider_max_batch(f->experts) < (int)X) return 0;
        int rc;
        for (uint32_t e = 0; e < X; e++) f->g.used[e] = e;
        TRY(strata_provider_acquire(f->experts, ml, f->g.used, (int)X, f->views));
        const void **tab = f->tab_host;
        for (uint32_t e = 0; e < X; e++) {
            tab[e] = f->views[e].part[STRATA_EXPERT_GATE];
            tab[X + e] = f->views[e].part[STRATA_EXPERT_UP];
            tab[2 * X + e] = f->views[e].part[STRATA_EXPERT_DOWN];
        }
        // resident views never move: the table outlives the release
        strata_provider_release(f->experts, ml, f->views, (int)X);
        TRY(f->bi->upload(f->bc, f->exp_tables + (size_t)ml * 3 * X, tab, 3 * X * sizeof(void *)));
        if (L->exp_probs_b)
            TRY(f->bi->upload(f->bc, f->probs_b + (size_t)ml * X, L->exp_probs_b, X * sizeof(float)));
        f->tables_built[ml] = 3;  // the table and the selection biases
    }
    *use = true;
    return 0;
}

static uint64_t expert_bytes(const struct strata_layer *L)
{
    return mat_bytes(&L->exp_gate) + mat_bytes(&L->exp_up) + mat_bytes(&L->exp_down);
}

// The backend's moe op over the layer's slot table, the device routes in route_of / weight; the
// bytes of n_used experts counted to the phase.
static int layer_moe(struct strata_forward *f, const struct strata_layer *L, int n, uint32_t n_used)
{
    const struct strata_hparams *hp = &f->m->hp;
    if (f->bytes_to) *f->bytes_to += n_used * expert_bytes(L);
    const uint32_t X = hp->n_expert, K = hp->n_expert_used, ml = (uint32_t)L->moe_index;
    const struct strata_moe_op op = {
        .h = f->h, .x = f->x, .ids = f->route_of, .weight = f->weight,
        .table = (const void *const *)(f->exp_tables + (size_t)ml * 3 * X),
        .gate = L->exp_gate, .up = L->exp_up, .down = L->exp_down,
        .shared = L->sh_down.data ? f->ffn_out : NULL, .n_tok = n, .k = (int)K, .n_expert = X,
        .gate_out = f->gate_out, .up_out = f->up_out, .down_out = f->down_out,
    };
    return f->bi->moe(f->bc, &op);
}

// Router, device routing and the experts in one go (device_moe said yes).
static int moe_device(struct strata_forward *f, const struct strata_layer *L, int n, struct strata_fwd_stats *st,
                      double t0)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t X = hp->n_expert, K = hp->n_expert_used, ml = (uint32_t)L->moe_index;
    int rc;
    const struct strata_route_params rp = {
        .n_expert = X, .n_used = K, .sigmoid = hp->expert_gating == STRATA_GATING_SIGMOID,
        .norm = hp->expert_weights_norm, .scale = hp->expert_weights_scale,
        .bias = L->exp_probs_b ? f->probs_b + (size_t)ml * X : NULL,
    };
    const struct strata_mat *w[1] = {&L->router};
    TRY(project(f, w, &f->router_logits, 1, f->h, n));
    TRY(f->bi->route(f->bc, &rp, f->router_logits, n, f->route_of, f->weight));
    const double t1 = strata_now();
    st->t_router += t1 - t0;
    f->bytes_to = &st->b_experts;
    if (L->sh_down.data) TRY(shared_expert(f, L, n));
    // the routes stay on the device: at most n K experts, at most all of them
    TRY(layer_moe(f, L, n, (uint64_t)n * K < X ? (uint32_t)n * K : X));
    st->t_experts += strata_now() - t1;
    return 0;
}

// Experts of a bounded cache (host RAM or VRAM tier) from device routes, when a layer's experts of
// the pass fit the cache at once: acquired, their device pointers put in the layer's slot table,
// and the backend's moe op runs them, the kernels of the fully resident pass. So the output is the
// same bits whichever tier each expert came from.
static bool moe_op_ok(const struct strata_forward *f, const struct strata_layer *L)
{
    return f->bi->moe && !L->exp_up_b && !L->exp_gate_b && !L->exp_down_b && !L->swiglu_oai;
}

static bool tiered_moe_ok(const struct strata_forward *f, const struct strata_layer *L)
{
    return moe_op_ok(f, L) && f->g.n_used_experts <= strata_provider_max_batch(f->experts);
}

static int moe_tiered(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t X = hp->n_expert, ml = (uint32_t)L->moe_index;
    struct strata_route_groups *g = &f->g;
    int rc;
    TRY(strata_provider_acquire(f->experts, ml, g->used, g->n_used_experts, f->views));
    if (f->lookahead) rc = lookahead(f, L, n);
    // entries of experts this pass does not use are stale and never read
    const void **tab = f->tab_host;
    for (int i = 0; i < g->n_used_experts; i++) {
        const uint32_t e = g->used[i];
        tab[e] = f->views[i].part[STRATA_EXPERT_GATE];
        tab[X + e] = f->views[i].part[STRATA_EXPERT_UP];
        tab[2 * X + e] = f->views[i].part[STRATA_EXPERT_DOWN];
    }
    if (rc == 0) rc = f->bi->upload(f->bc, f->exp_tables + (size_t)ml * 3 * X, tab, 3 * X * sizeof(void *));
    if (rc == 0 && L->sh_down.data) rc = shared_expert(f, L, n);
    if (rc == 0) rc = layer_moe(f, L, n, (uint32_t)g->n_used_experts);
    // the kernels must be done with the views before they are released
    if (rc == 0) rc = f->bi->sync(f->bc);
    strata_provider_release(f->experts, ml, f->views, g->n_used_experts);
    return rc;
}

// ---- VRAM misses computed on the CPU --------------------------------------------------------------

// The products of the CPU's experts c_cpu[0..nc) for their tokens (rows of c_h), their weighted
// sums per token in selection order into c_sum. The host views are held only here.
static int cpu_experts(struct strata_forward *f, const struct strata_layer *L, int n, int nc)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd, F = hp->n_ff_exp, K = hp->n_expert_used, ml = (uint32_t)L->moe_index;
    const struct strata_route_groups *g = &f->g;
    const struct strata_backend_i *ci = f->cpu->iface;
    void *cc = f->cpu->ctx;
    int rc;
    TRY(strata_provider_acquire(f->host, ml, f->c_cpu, nc, f->c_hviews));
    int no = 0;
    for (int i = 0; i < nc; i++) {
        const uint32_t e = f->c_cpu[i];
        const int first = g->first[e], cnt = g->count[e];
        struct strata_mat wg = L->exp_gate, wu = L->exp_up;
        wg.data = f->c_hviews[i].part[STRATA_EXPERT_GATE];
        wu.data = f->c_hviews[i].part[STRATA_EXPERT_UP];
        f->c_ops[no++] = (struct strata_mm_op){wg, f->c_h, E, n, g->tok_of + first, cnt, f->c_gate + (size_t)first * F, F, NULL, NULL};
        f->c_ops[no++] = (struct strata_mm_op){wu, f->c_h, E, n, g->tok_of + first, cnt, f->c_up + (size_t)first * F, F, NULL, NULL};
    }
    rc = ci->mm(cc, f->c_ops, no);
    for (int i = 0; i < nc && rc == 0; i++) {
        const uint32_t e = f->c_cpu[i];
        const size_t first = (size_t)g->first[e];
        rc = ci->swiglu(cc, f->c_gate + first * F, f->c_gate + first * F, f->c_up + first * F, (size_t)g->count[e] * F);
    }
    no = 0;
    for (int i = 0; i < nc && rc == 0; i++) {
        const uint32_t e = f->c_cpu[i];
        const int first = g->first[e], cnt = g->count[e];
        struct strata_mat wd = L->exp_down;
        wd.data = f->c_hviews[i].part[STRATA_EXPERT_DOWN];
        f->c_ops[no++] = (struct strata_mm_op){wd, f->c_gate + (size_t)first * F, F, cnt, NULL, cnt,
                                               f->c_down + (size_t)first * E, E, NULL, NULL};
    }
    if (rc == 0) rc = ci->mm(cc, f->c_ops, no);
    strata_provider_release(f->host, ml, f->c_hviews, nc);
    if (rc) return rc;
    for (int t = 0; t < n; t++) {
        float *sum = f->c_sum + (size_t)t * E;
        bool any = false;
        for (uint32_t k = 0; k < K; k++) {
            const int32_t e = f->sel[(size_t)t * K + k];
            if (f->c_where[e] != 3) continue;
            const float w = f->c_w[(size_t)t * K + k];
            const float *d = f->c_down + (size_t)g->route_of[(size_t)t * K + k] * E;
            if (!any)
                for (uint32_t i = 0; i < E; i++) sum[i] = w * d[i];
            else
                for (uint32_t i = 0; i < E; i++) sum[i] += w * d[i];
            any = true;
        }
        if (!any) memset(sum, 0, E * sizeof(float));
    }
    return 0;
}

// One sparse moe op over the layer's table with only the experts whose c_where is `which`.
static int split_moe(struct strata_forward *f, const struct strata_layer *L, int n, uint8_t which, bool shared)
{
    const uint32_t X = f->m->hp.n_expert, K = f->m->hp.n_expert_used, ml = (uint32_t)L->moe_index;
    const void **tab = f->tab_host;
    for (int i = 0; i < f->g.n_used_experts; i++) {
        const uint32_t e = f->g.used[i];
        const bool mine = f->c_where[e] == which;
        tab[e] = mine ? f->c_views[i].part[STRATA_EXPERT_GATE] : NULL;
        tab[X + e] = mine ? f->c_views[i].part[STRATA_EXPERT_UP] : NULL;
        tab[2 * X + e] = mine ? f->c_views[i].part[STRATA_EXPERT_DOWN] : NULL;
    }
    int rc;
    TRY(f->bi->upload(f->bc, f->exp_tables + (size_t)ml * 3 * X, tab, 3 * X * sizeof(void *)));
    const struct strata_moe_op op = {
        .h = f->h, .x = f->x, .ids = f->route_of, .weight = f->weight,
        .table = (const void *const *)(f->exp_tables + (size_t)ml * 3 * X),
        .gate = L->exp_gate, .up = L->exp_up, .down = L->exp_down,
        .shared = shared && L->sh_down.data ? f->ffn_out : NULL, .n_tok = n, .k = (int)K, .n_expert = X,
        .gate_out = f->gate_out, .up_out = f->up_out, .down_out = f->down_out, .sparse = true,
    };
    return f->bi->moe(f->bc, &op);
}

#define EWMA(old, now) ((old) > 0 ? 0.75 * (old) + 0.25 * (now) : (now))

// Releases the n_hit experts acquire_ready pinned (the READY ones among the nu used, in order).
// The views acquire_ready pinned (the READY ones among the nu used) into out, in order.
static void gather_hits(const struct strata_forward *f, int nu, struct strata_expert_view *out)
{
    for (int j = 0, h = 0; j < nu; j++)
        if (f->c_state[j] == STRATA_VRAM_READY) out[h++] = f->c_views[j];
}

static void release_hits(struct strata_forward *f, uint32_t ml, int nu, int n_hit)
{
    gather_hits(f, nu, f->c_hviews);
    strata_provider_release(f->experts, ml, f->c_hviews, n_hit);
}

// The views a split layer left pinned (f->defer), released once the stream holds no
// kernel that reads them: after a drain, which the caller has done (the next layer's routes came
// down) or asks for (sync: the pass's end or an error).
static int release_deferred(struct strata_forward *f, bool sync)
{
    if (f->d_ml < 0) return 0;
    const int rc = sync ? f->bi->sync(f->bc) : 0;
    const uint32_t ml = (uint32_t)f->d_ml;
    if (f->d_hit) strata_provider_release(f->experts, ml, f->d_views, f->d_hit);
    if (f->d_np) strata_provider_release(f->experts, ml, f->d_views + f->d_hit, f->d_np);
    f->d_ml = -1;
    return rc;
}

// Charges the time since *t to step i and moves *t on.
static inline void sp_mark(struct strata_forward *f, int i, double *t)
{
    if (!f->sp_on) return;
    const double now = strata_now();
    f->sp[i] += now - *t;
    *t = now;
}

// A layer's experts of a small pass from device routes, split three ways: the ones the VRAM tier
// holds run at once on the GPU (a sparse moe op with the shared expert), while the CPU computes
// its share of the misses from the host copies and the copy thread brings the rest; then a second
// sparse op runs the copied ones and the CPU's weighted sums are added. The share: each miss (the
// most-routed first) goes where the cost model's projected finish is earlier: the CPU at
// s_cpu seconds per expert byte per token, PCIe at s_pcie per byte (both measured on this run;
// the copy of one already on its way is counted). Returns 1 (nothing done) when the pass's misses
// do not fit the tiers' batches; the caller then takes the copy path.
static int moe_split(struct strata_forward *f, const struct strata_layer *L, int n)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd, ml = (uint32_t)L->moe_index;
    const struct strata_route_groups *g = &f->g;
    const int nu = g->n_used_experts;
    const uint64_t tb = f->m->layout.layers[ml].triplet_bytes;
    double tp = f->sp_on ? strata_now() : 0;
    release_deferred(f, false);  // the routes' download drained the stream
    int rc = strata_vram_acquire_ready(f->vram, ml, g->used, nu, f->c_views, f->c_state);
    if (rc < 0) return rc;
    const int n_hit = rc, slots = strata_provider_max_batch(f->experts), hb = strata_provider_max_batch(f->host);
    int nh = 0, np = 0, nc = 0;
    double t_copy = 0, t_cpu = 0;
    // auto: a rate goes stale when its path is never taken, so the CPU gets one miss after 8
    // layers without any (a copy is measured whenever one happens); after 48 when its rate is
    // under a quarter of PCIe's (a busy CPU: each probe then costs a millisecond or more)
    bool force = f->miss_mode == STRATA_GPU_MISS_AUTO && f->since_cpu >= (f->s_cpu < 4 * f->s_pcie ? 8 : 48);
    for (int i = 0; i < nu; i++) {
        const uint32_t e = g->used[i];
        if (f->c_state[i] == STRATA_VRAM_READY) {
            f->c_where[e] = 1;
            f->c_hit[nh++] = e;
        } else if (f->c_state[i] == STRATA_VRAM_FILLING) {  // on its way: join it
            f->c_where[e] = 2;
            f->c_copy[np++] = e;
            t_copy += (double)tb * f->s_pcie;
        } else {
            f->c_where[e] = 0;
        }
    }
    // the misses, most-routed first (a copy serves all of an expert's tokens for one transfer)
    for (int pass = n; pass >= 1; pass--)
        for (int i = 0; i < nu; i++) {
            const uint32_t e = g->used[i];
            const int cnt = g->count[e];
            if (f->c_where[e] != 0 || cnt != pass) continue;
            const double cc = (double)tb * (double)cnt * f->s_cpu, cp = (double)tb * f->s_pcie;
            bool cpu = f->miss_mode == STRATA_GPU_MISS_CPU || force || t_cpu + cc <= t_copy + cp;
            force = false;
            if (cpu && nc >= hb) cpu = false;
            if (!cpu && n_hit + np >= slots) cpu = true;
            if (cpu && nc >= hb) {  // neither path has room for this pass: the copy path's groups
                release_hits(f, ml, nu, n_hit);
                return 1;
            }
            if (cpu) {
                f->c_where[e] = 3;
                f->c_cpu[nc++] = e;
                t_cpu += cc;
            } else {
                f->c_where[e] = 2;
                f->c_copy[np++] = e;
                t_copy += cp;
            }
        }
    if (nc) f->since_cpu = 0;
    else if (np) f->since_cpu++;
    f->miss_st.used += (uint64_t)nu;  // each a hit, computed on the CPU or copied
    f->miss_st.hits += (uint64_t)n_hit;
    if (f->bytes_to) *f->bytes_to += (uint64_t)nu * expert_bytes(L);  // on the GPU or the CPU
    rc = 0;  // the CPU's input rows came down with the routes
    sp_mark(f, SP_READY, &tp);
    // the router lookahead's guesses for the next layers go out (low priority: after this layer's copies)
    if (rc == 0 && f->lookahead) rc = lookahead(f, L, n);
    // the GPU starts on the hits (and the shared expert) now
    if (rc == 0 && L->sh_down.data) rc = shared_expert(f, L, n);
    if (rc == 0 && (nh || L->sh_down.data)) rc = split_moe(f, L, n, 1, true);
    // the copies start, the CPU computes its share meanwhile
    if (rc == 0 && np) rc = strata_provider_fetch(f->experts, ml, f->c_copy, np);
    struct strata_vram_extra x0;
    strata_vram_extra_stats(f->vram, &x0);
    sp_mark(f, SP_HITS, &tp);
    if (rc == 0 && nc) {
        const double t0 = strata_now();
        rc = cpu_experts(f, L, n, nc);
        const double dt = strata_now() - t0;
        uint64_t pairs = 0;
        for (int i = 0; i < nc; i++) pairs += (uint64_t)g->count[f->c_cpu[i]];
        if (rc == 0) {
            strata_vram_note_cpu(f->vram, ml, f->c_cpu, nc);
            if (f->cpu_calls++ > 0) f->s_cpu = EWMA(f->s_cpu, dt / ((double)tb * (double)pairs));
            f->miss_st.cpu_experts += (uint64_t)nc;
            f->miss_st.cpu_pairs += pairs;
            f->miss_st.cpu_s += dt;
            if (f->miss_mode == STRATA_GPU_MISS_CPU)  // the tier learns what is used
                (void)strata_provider_prefetch(f->experts, ml, f->c_cpu, nc);
        }
        sp_mark(f, SP_CPU, &tp);
    }
    // the copies: their views (acquire waits for the ones still on their way)
    struct strata_expert_view *pv = f->c_views + nu;
    if (rc == 0 && np) {
        rc = strata_provider_acquire(f->experts, ml, f->c_copy, np, pv);
        sp_mark(f, SP_ACQ, &tp);
        if (rc == 0) {
            struct strata_vram_extra x1;
            strata_vram_extra_stats(f->vram, &x1);
            if (x1.copy_bytes > x0.copy_bytes && x1.copy_s > x0.copy_s)
                f->s_pcie = EWMA(f->s_pcie, (x1.copy_s - x0.copy_s) / (double)(x1.copy_bytes - x0.copy_bytes));
            f->miss_st.copied += (uint64_t)np;
            // into c_views at their experts' places in g->used
            for (int j = 0, c = 0; j < nu && c < np; j++)
                if (f->c_where[g->used[j]] == 2) {
                    for (int q = 0; q < np; q++)
                        if (f->c_copy[q] == g->used[j]) f->c_views[j] = pv[q];
                    c++;
                }
            rc = split_moe(f, L, n, 2, false);
            sp_mark(f, SP_OP2, &tp);
        } else {
            np = 0;  // nothing stays pinned after a failed acquire
        }
    }
    if (rc == 0 && nc) {
        rc = f->bi->upload(f->bc, f->cpu_sum_dev, f->c_sum, (size_t)n * E * sizeof(float));
        if (rc == 0) rc = f->bi->add(f->bc, f->x, f->cpu_sum_dev, E, n, E);
        sp_mark(f, SP_ADD, &tp);
    }
    // the kernels must be done with the views before they are released: at the next drain, or
    // (STRATA_SPLIT_DEFER=0, or after an error) now, after a sync
    gather_hits(f, nu, f->d_views);
    memcpy(f->d_views + n_hit, pv, (size_t)np * sizeof *pv);
    f->d_hit = n_hit;
    f->d_np = np;
    f->d_ml = (int)ml;
    if (!f->defer || rc != 0) {
        const int src = release_deferred(f, true);
        if (rc == 0) rc = src;
        sp_mark(f, SP_SYNC, &tp);
    }
    if (f->sp_on) {
        sp_mark(f, SP_REL, &tp);
        f->sp_calls++;
        f->sp_end = tp;
        f->sp_last_ml = (int)ml;
    }
    return rc;
}

static int moe_block(struct strata_forward *f, const struct strata_layer *L, int n, struct strata_fwd_stats *st)
{
    const struct strata_hparams *hp = &f->m->hp;
    const uint32_t E = hp->n_embd;
    const double t0 = strata_now();
    int rc;
    bool dev;
    TRY(device_moe(f, L, &dev));
    TRY(norm_before(f, f->h, L->ffn_norm, n, &L->exp_gate));
    dp_mark(f, DP_FNORM);
    f->bytes_to = &st->b_router;
    if (dev) return moe_device(f, L, n, st, t0);
    bool routed_dev;
    if (f->sp_on && f->sp_end > 0 && L->moe_index == f->sp_last_ml + 1) f->sp[SP_DENSE] += t0 - f->sp_end;
    TRY(route(f, L, n, &routed_dev));
    if (f->lookahead) strata_lookahead_observe(f->lookahead, (uint32_t)L->moe_index, f->g.used, f->g.n_used_experts);
    dp_mark(f, DP_ROUTE);
    const double t1 = strata_now();
    if (f->sp_on) f->sp[SP_ROUTE] += t1 - t0;
    st->t_router += t1 - t0;
    f->bytes_to = &st->b_experts;
    if (routed_dev && split_ok(f, n) && moe_op_ok(f, L)) {  // more experts than VRAM slots: the CPU takes the rest
        rc = moe_split(f, L, n);
        if (rc <= 0) {
            st->t_experts += strata_now() - t1;
            return rc;
        }
    }
    if (routed_dev && tiered_moe_ok(f, L)) {
        TRY(moe_tiered(f, L, n));
        st->t_experts += strata_now() - t1;
        return 0;
    }
    if (routed_dev) {  // the grouped routes for the products below
        const size_t b = (size_t)n * hp->n_expert_used * sizeof(int32_t);
        TRY(f->bi->upload(f->bc, f->tok_of, f->g.tok_of, b));
        TRY(f->bi->upload(f->bc, f->route_of, f->g.route_of, b));
    }
    TRY(experts_block(f, L, n));
    dp_mark(f, DP_EXPERTS);
    if (L->sh_down.data) TRY(shared_expert(f, L, n));
    // weighted sum in selection order (+ the shared expert), then the residual
    const struct strata_moe_combine_op co = {f->x, f->down_out, f->route_of, f->weight,
                                             L->sh_down.data ? f->ffn_out : NULL, n, (int)hp->n_expert_used, E};
    TRY(f->bi->moe_combine(f->bc, &co));
    dp_mark(f, DP_COMBINE);
    st->t_experts += strata_now() - t1;
    return 0;
}

// The final norm and the output head for the rows that want logits or picks. On a host-memory
// backend, the rows that want logits go straight into the caller's arrays, every sequence's rows in
// one product call (one op each, on the same matrix: the backend reads it once for all of them,
// which is most of a decode step's head when several sessions decode together), and their picks
// are taken from there. Every other row goes through the logits scratch, LOGIT_ROWS at a time of
// any sequences together (head_group): a download for the rows that want logits, and for those that
// want only the pick, the backend's argmax and a download of 4 bytes a row (a GPU's decode step
// then does not wait for 600 KB of logits to cross PCIe into pageable memory); for those that want
// a sampler's candidates (top), the backend's topk and 8 bytes a candidate.
struct head_seg {
    int s, r0, nr;              // rows r0 .. r0 + nr of sequence s (indices in its logits array)
};

// The k best of each of the group's nr rows into tops_host ([nr][k]): on the host from the
// scratch, by the backend's topk op and a download of 8 bytes a candidate, or (a backend without
// the op) a row's download and strata_top_k.
static int head_tops(struct strata_forward *f, int nr, int k)
{
    const uint32_t V = f->m->hp.n_vocab;
    int rc;
    if (f->bi->host_memory) {
        for (int r = 0; r < nr; r++)
            strata_top_k(f->logits + (size_t)r * V, (int32_t)V, k, f->tops_host + (size_t)r * k);
    } else if (f->bi->topk) {
        TRY(f->bi->topk(f->bc, f->tops, f->logits, nr, V, k));
        TRY(f->bi->download(f->bc, f->tops_host, f->tops, (size_t)nr * k * sizeof *f->tops_host));
    } else {
        for (int r = 0; r < nr; r++) {
            TRY(f->bi->download(f->bc, f->row_host, f->logits + (size_t)r * V, V * sizeof(float)));
            strata_top_k(f->row_host, (int32_t)V, k, f->tops_host + (size_t)r * k);
        }
    }
    return 0;
}

static int head_group(struct strata_forward *f, const struct strata_fwd_seq *seqs, const struct head_seg *seg,
                      int n_seg, int nr)
{
    const uint32_t V = f->m->hp.n_vocab;
    const struct strata_mat *w[1] = {&f->m->output};
    int rc;
    TRY(project(f, w, &f->logits, 1, f->h, nr));
    bool picks = false;
    int k = 0;  // the most candidates any row wants: a row's best k' are the first k' of its best k
    for (int i = 0; i < n_seg; i++) {
        const struct strata_fwd_seq *sq = &seqs[seg[i].s];
        picks |= sq->pick != NULL;
        if (sq->top && sq->top_k > k) k = sq->top_k;
    }
    if (picks && !f->bi->host_memory) TRY(f->bi->argmax(f->bc, f->picks, f->logits, nr, V));
    int row = 0;
    for (int i = 0; i < n_seg; i++) {
        const struct strata_fwd_seq *sq = &seqs[seg[i].s];
        if (sq->logits)
            TRY(f->bi->download(f->bc, sq->logits + (size_t)seg[i].r0 * V, f->logits + (size_t)row * V,
                                (size_t)seg[i].nr * V * sizeof(float)));
        row += seg[i].nr;
    }
    if (k) {
        TRY(head_tops(f, nr, k));
        row = 0;
        for (int i = 0; i < n_seg; i++) {
            const struct strata_fwd_seq *sq = &seqs[seg[i].s];
            for (int r = 0; sq->top && r < seg[i].nr; r++)
                memcpy(sq->top + (size_t)(seg[i].r0 + r) * sq->top_k, f->tops_host + (size_t)(row + r) * k,
                       (size_t)sq->top_k * sizeof *sq->top);
            row += seg[i].nr;
        }
    }
    if (!picks) return 0;
    if (f->bi->host_memory)
        for (int r = 0; r < nr; r++) f->picks_host[r] = strata_argmax(f->logits + (size_t)r * V, (int32_t)V);
    else TRY(f->bi->download(f->bc, f->picks_host, f->picks, (size_t)nr * sizeof(int32_t)));
    row = 0;
    for (int i = 0; i < n_seg; i++) {
        const struct strata_fwd_seq *sq = &seqs[seg[i].s];
        if (sq->pick) memcpy(sq->pick + seg[i].r0, f->picks_host + row, (size_t)seg[i].nr * sizeof(int32_t));
        row += seg[i].nr;
    }
    return 0;
}

static int head(struct strata_forward *f, const struct strata_fwd_seq *seqs, int n_seq)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t E = hp->n_embd, V = hp->n_vocab;
    const int group = f->max_tok < LOGIT_ROWS ? f->max_tok : LOGIT_ROWS;
    int rc;
    bool scratch_rows = false;
    if (f->bi->host_memory) {
        int no = 0, row = 0;
        for (int s = 0; s < n_seq; s++) {
            const struct strata_fwd_seq *sq = &seqs[s];
            scratch_rows |= !sq->logits && (sq->pick || sq->top);
            if (!sq->logits) continue;
            const int first = sq->all_logits ? 0 : sq->n_tok - 1, nr = sq->n_tok - first;
            TRY(f->bi->rmsnorm(f->bc, f->h + (size_t)row * E, E, f->x + (size_t)(f->seqs[s].tok0 + first) * E, E,
                               m->output_norm, nr, E, hp->rms_eps));
            f->ops[no++] = (struct strata_mm_op){m->output, f->h + (size_t)row * E, E, nr, NULL, nr, sq->logits, V,
                                                 NULL, NULL};
            row += nr;
            if (no == f->n_ops) {
                TRY(mm_call(f, f->ops, no));
                no = row = 0;
            }
        }
        if (no) TRY(mm_call(f, f->ops, no));
        for (int s = 0; s < n_seq; s++) {
            const struct strata_fwd_seq *sq = &seqs[s];
            if (!sq->logits) continue;
            const int nr = sq->all_logits ? sq->n_tok : 1;
            for (int r = 0; sq->pick && r < nr; r++) sq->pick[r] = strata_argmax(sq->logits + (size_t)r * V, (int32_t)V);
            for (int r = 0; sq->top && r < nr; r++)
                strata_top_k(sq->logits + (size_t)r * V, (int32_t)V, sq->top_k, sq->top + (size_t)r * sq->top_k);
        }
        if (!scratch_rows) return 0;
    }
    struct head_seg seg[LOGIT_ROWS];
    int n_seg = 0, nr = 0;
    for (int s = 0; s < n_seq; s++) {
        const struct strata_fwd_seq *sq = &seqs[s];
        const bool wants = sq->pick || sq->top;  // a pick or candidates
        if (f->bi->host_memory ? sq->logits || !wants : !sq->logits && !wants) continue;
        const int first = sq->all_logits ? 0 : sq->n_tok - 1;
        for (int r = first; r < sq->n_tok;) {
            const int take = sq->n_tok - r < group - nr ? sq->n_tok - r : group - nr;
            TRY(f->bi->rmsnorm(f->bc, f->h + (size_t)nr * E, E, f->x + (size_t)(f->seqs[s].tok0 + r) * E, E,
                               m->output_norm, take, E, hp->rms_eps));
            seg[n_seg++] = (struct head_seg){s, r - first, take};
            nr += take, r += take;
            if (nr == group) {
                TRY(head_group(f, seqs, seg, n_seg, nr));
                n_seg = nr = 0;
            }
        }
    }
    return nr ? head_group(f, seqs, seg, n_seg, nr) : 0;
}

// ---- the pass -----------------------------------------------------------------------------------

static int forward_run(struct strata_forward *f, const struct strata_fwd_seq *seqs, int n_seq,
                       struct strata_fwd_stats *st);

int strata_forward_run(struct strata_forward *f, const struct strata_fwd_seq *seqs, int n_seq,
                       struct strata_fwd_stats *st)
{
    const int rc = forward_run(f, seqs, n_seq, st);
    // a split layer's deferred views: drained by the head's download or the final sync when rc is
    // 0; after an error, waited for here
    const int drc = release_deferred(f, rc != 0);
    return rc ? rc : drc;
}

static int forward_run(struct strata_forward *f, const struct strata_fwd_seq *seqs, int n_seq,
                       struct strata_fwd_stats *st)
{
    const struct strata_model *m = f->m;
    const struct strata_hparams *hp = &m->hp;
    int n = 0, rc;
    f->want_trace = 0;
    f->bytes_to = NULL;  // set per phase below
    for (int s = 0; s < n_seq; s++) {
        const struct strata_fwd_seq *sq = &seqs[s];
        STRATA_ASSERT(sq->n_tok > 0 && n + sq->n_tok <= f->max_tok && sq->pos0 + sq->n_tok <= sq->state->n_ctx &&
                      sq->state->n_ctx <= f->max_ctx);
        f->seqs[s] = (struct strata_seq){.tok0 = n, .n_tok = sq->n_tok, .pos0 = sq->pos0, .n_ctx = sq->state->n_ctx,
                                         .kv = sq->state->kv,
                                         .conv = sq->state->conv, .ssm = sq->state->ssm};
        for (int t = 0; t < sq->n_tok; t++) {
            f->ids_host[n + t] = sq->tokens[t];
            f->pos_host[n + t] = sq->pos0 + t;
        }
        n += sq->n_tok;
        f->want_trace |= sq->on_route != NULL;
    }
    f->batch = (struct strata_batch){n, n_seq, f->seqs, f->pos};
    double t0 = strata_now();
    TRY(f->bi->upload(f->bc, f->ids, f->ids_host, (size_t)n * sizeof(int32_t)));
    TRY(f->bi->upload(f->bc, f->pos, f->pos_host, (size_t)n * sizeof(int32_t)));
    TRY(f->bi->batch_begin(f->bc, &f->batch));
    TRY(f->bi->get_rows(f->bc, &m->tok_embd, f->ids, n, f->x));
    st->t_embed += strata_now() - t0;

    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const struct strata_layer *L = &m->layers[l];
        const double ta = strata_now();
        f->dp_pass = f->dp_on && n == 1 && L->kv_slot >= 0 && !L->mla && L->moe_index >= 0;
        if (f->dp_pass) f->dp_t = ta, f->dp_layers++;
        f->bytes_to = L->kv_slot >= 0 ? &st->b_attn : &st->b_linear_attn;
        for (int s = 0; s < n_seq && L->kv_slot >= 0; s++) {  // the cache rows attended, once a layer
            const uint64_t ctx = (uint64_t)seqs[s].pos0 + (uint64_t)seqs[s].n_tok;
            st->b_attn += (L->swa && hp->n_swa && ctx > hp->n_swa ? hp->n_swa : ctx) * seqs[s].state->kv_pos_bytes;
        }
        if (L->kv_slot >= 0) {
            TRY(L->mla ? mla_attention_block(f, L, n) : attention_block(f, L, n));
            st->t_attn += strata_now() - ta;
        } else {
            TRY(deltanet_block(f, L, n));
            st->t_linear_attn += strata_now() - ta;
        }
        TRY(L->moe_index >= 0 ? moe_block(f, L, n, st) : dense_ffn_block(f, L, n, st));
    }

    for (int s = 0; s < n_seq; s++)
        if (seqs[s].on_route)
            TRY(seqs[s].on_route(seqs[s].route_user,
                                 f->trace_ids + (size_t)f->seqs[s].tok0 * m->layout.n_layers * hp->n_expert_used,
                                 seqs[s].n_tok, m->layout.n_layers, hp->n_expert_used));

    f->dp_pass = false;
    const double th = strata_now();
    f->bytes_to = &st->b_head;
    rc = head(f, seqs, n_seq);
    f->bytes_to = NULL;
    TRY(rc);
    TRY(f->bi->sync(f->bc));
    st->t_head += strata_now() - th;
    return 0;
}
