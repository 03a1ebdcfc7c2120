// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): tensors, and the forward pass of one prompt chunk
// that every architecture shares (glm4moe.c and qwen3next.c only load weights; blocks.c and
// deltanet.c hold the blocks qwen3moe lacks).
//
// Per layer: RMSNorm → GQA attention (optional q/k/v biases, per-head RMSNorm of q and k, NeoX
// RoPE on the first n_rot dims, F32 KV cache, optional sigmoid output gate) → residual →
// RMSNorm → router (softmax, or sigmoid with a selection bias; top-k; weights renormalised and
// scaled) → SwiGLU experts (each needed expert fetched once per chunk, its tokens batched) →
// weighted sum (+ shared expert) → residual.
// Activations are rounded to each weight's dot format before every product, as ggml does.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/cpu/attn.h"
#include "gguf/gguf.h"
#include "model/model_impl.h"
#include "util/log.h"

int strata_qwen3moe_load(struct strata_model *m)
{
    const struct strata_hparams *hp = &m->hp;
    const uint64_t E = hp->n_embd, X = hp->n_expert;
    const uint64_t OD = (uint64_t)hp->n_head * hp->head_dim_v;
    if (hp->n_rot != hp->head_dim_k || hp->head_dim_k != hp->head_dim_v) {
        strata_log_error("model_load: %s: qwen3moe needs rope dims = key length = value length (%u, %u, %u)",
                         m->file->path, hp->n_rot, hp->head_dim_k, hp->head_dim_v);
        return STRATA_EFORMAT;
    }
    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return STRATA_ENOMEM;
    m->n_kv_layers = hp->n_layer;
    m->max_act_dim = (uint32_t)(E > OD ? E : OD);
    int rc;
    if ((rc = strata_model_load_io(m))) return rc;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        struct strata_layer *L = &m->layers[l];
        L->kv_slot = (int32_t)l;
        L->moe_index = (int32_t)l;
        char n[96];
#define NM(s) (snprintf(n, sizeof n, "blk.%u." s, l), n)
        if ((rc = strata_model_load_vec(m, NM("attn_norm.weight"), E, &L->attn_norm)) ||
            (rc = strata_model_load_attention(m, l, false, true)) ||
            (rc = strata_model_load_vec(m, NM("ffn_norm.weight"), E, &L->ffn_norm)) ||
            (rc = strata_model_load_mat(m, NM("ffn_gate_inp.weight"), E, X, true, &L->router)))
            return rc;
#undef NM
        if ((rc = strata_model_check_experts(m, l))) return rc;
    }
    return 0;
}

int strata_model_check_experts(struct strata_model *m, uint32_t l)
{
    const struct strata_hparams *hp = &m->hp;
    const struct strata_layer *L = &m->layers[l];
    const uint64_t E = hp->n_embd;
    if (L->moe_index < 0 || (uint32_t)L->moe_index >= m->layout.n_layers ||
        m->layout.layers[L->moe_index].layer != (int)l) {
        strata_log_error("model_load: %s: layer %u has no expert tensors", m->file->path, l);
        return STRATA_EFORMAT;
    }
    const struct strata_expert_layer *el = &m->layout.layers[L->moe_index];
    const uint64_t want[3][2] = {{E, hp->n_ff_exp}, {E, hp->n_ff_exp}, {hp->n_ff_exp, E}};
    for (int p = 0; p < STRATA_EXPERT_PART_COUNT; p++) {
        const struct strata_gguf_tensor *t = el->tensor[p];
        if (t->ne[0] != want[p][0] || t->ne[1] != want[p][1]) {
            strata_log_error("model_load: %s: tensor '%s' has shape [%llu,%llu,%llu], expected [%llu,%llu,%u]",
                             m->file->path, t->name, (unsigned long long)t->ne[0],
                             (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                             (unsigned long long)want[p][0], (unsigned long long)want[p][1], hp->n_expert);
            return STRATA_EFORMAT;
        }
        if (!strata_type_computable(t->type)) {
            strata_log_error("model_load: %s: tensor '%s' has type %s, which strata cannot compute with yet",
                             m->file->path, t->name, strata_type_name(t->type));
            return STRATA_EUNSUP;
        }
    }
    if (hp->n_ff_exp > m->max_act_dim) m->max_act_dim = hp->n_ff_exp;
    return 0;
}

// ---- attention ---------------------------------------------------------------------------------

struct attn_job {
    struct strata_session *s;
    int layer, n_tok;
    atomic_int next;
};

static void attn_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct attn_job *j = arg;
    struct strata_session *s = j->s;
    const struct strata_hparams *hp = &s->m->hp;
    const int H = (int)hp->n_head, D = (int)hp->head_dim_k, Dv = (int)hp->head_dim_v;
    const int group = H / (int)hp->n_head_kv;
    const size_t KD = (size_t)hp->n_head_kv * D, VD = (size_t)hp->n_head_kv * Dv;
    const size_t kv_layer = (size_t)s->n_ctx * (KD > VD ? KD : VD);
    const size_t slot = (size_t)s->m->layers[j->layer].kv_slot;
    const float *kc = s->k_cache + slot * kv_layer;
    const float *vc = s->v_cache + slot * kv_layer;
    const float scale = 1.0f / sqrtf((float)D);
    float *scores = s->att_scratch + (size_t)ith * s->n_ctx;
    int i0, i1;
    while (strata_chunk_next(&j->next, j->n_tok * H, 1, &i0, &i1)) {
        const int t = i0 / H, h = i0 % H, kvh = h / group;
        const int n_kv = s->n_past + t + 1;  // causal: positions 0..pos
        // in llama.cpp's order of operations, so the output-projection activations round alike
        const struct strata_attn_query aq = {
            .q = s->q + (size_t)t * H * D + (size_t)h * D,
            .k = kc + (size_t)kvh * D, .k_stride = KD,
            .v = vc + (size_t)kvh * Dv, .v_stride = VD,
            .n_kv = n_kv, .D = (uint32_t)D, .Dv = (uint32_t)Dv, .scale = scale,
            .scores = scores,
            .out = s->attn + (size_t)t * H * Dv + (size_t)h * Dv,
        };
        strata_attn_head(s->m->kernels->isa, &aq);
    }
}

// Quantize n rows of x for weight `w` into buf, unless the previous call already produced the
// same format from the same rows (prev_vdt tracks it).
static const void *act_for(struct strata_session *s, const struct strata_mat *w, const float *x, int n,
                           void *buf, int *prev_vdt)
{
    const int vdt = (int)strata_type_traits(w->type)->vec_dot_type;
    if (*prev_vdt != vdt) {
        strata_act_quantize(s->m->kernels, w->type, x, n, w->n_in, buf);
        *prev_vdt = vdt;
    }
    return buf;
}

int strata_attention_block(struct strata_session *s, int l, int n)
{
    struct strata_model *m = s->m;
    const struct strata_hparams *hp = &m->hp;
    const struct strata_layer *L = &m->layers[l];
    const uint32_t E = hp->n_embd, H = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim_k;
    const size_t KD = (size_t)Hkv * D, VD = (size_t)Hkv * hp->head_dim_v;
    const size_t kv_layer = (size_t)s->n_ctx * (KD > VD ? KD : VD);

    for (int t = 0; t < n; t++)
        strata_rmsnorm(s->h + (size_t)t * E, s->x + (size_t)t * E, L->attn_norm, E, hp->rms_eps);

    // q, k, v in one parallel region; each gets activations in its own dot format.
    int vdt_a = -1, vdt_b = -1;
    const void *xq = act_for(s, &L->wq, s->h, n, s->act_a, &vdt_a);
    const void *xk = (int)strata_type_traits(L->wk.type)->vec_dot_type == vdt_a
                         ? xq : act_for(s, &L->wk, s->h, n, s->act_b, &vdt_b);
    const void *xv = (int)strata_type_traits(L->wv.type)->vec_dot_type == vdt_a ? xq
                     : (int)strata_type_traits(L->wv.type)->vec_dot_type == vdt_b ? xk : NULL;
    // NULL: three distinct formats, so v is quantized and computed on its own after q and k.
    const size_t arb_q = strata_act_row_bytes(L->wq.type, E), arb_k = strata_act_row_bytes(L->wk.type, E);
    struct strata_mm_job jobs[3] = {
        {L->wq, xq, arb_q, NULL, n, s->q, L->wq.n_out, NULL},
        {L->wk, xk, arb_k, NULL, n, s->k, L->wk.n_out, NULL},
        {L->wv, xv, strata_act_row_bytes(L->wv.type, E), NULL, n, s->v, L->wv.n_out, NULL},
    };
    if (xv) {
        strata_mm_run(s->pool, m->kernels, jobs, 3);
    } else {
        strata_mm_run(s->pool, m->kernels, jobs, 2);
        int vdt_c = -1;
        jobs[2].xq = act_for(s, &L->wv, s->h, n, s->act_b, &vdt_c);
        strata_mm_run(s->pool, m->kernels, &jobs[2], 1);
    }

    // Biases; a gated query row [H][query | gate] is split so q is [H][D] like the others.
    for (int t = 0; t < n; t++) {
        float *q = s->q + (size_t)t * L->wq.n_out, *k = s->k + (size_t)t * KD, *v = s->v + (size_t)t * VD;
        if (L->bq) for (size_t i = 0; i < L->wq.n_out; i++) q[i] += L->bq[i];
        if (L->bk) for (size_t i = 0; i < KD; i++) k[i] += L->bk[i];
        if (L->bv) for (size_t i = 0; i < VD; i++) v[i] += L->bv[i];
    }
    if (L->q_gated)
        for (int t = 0; t < n; t++)  // in place: row t's halves go to rows t of [n][H*D]
            for (uint32_t h = 0; h < H; h++) {
                const float *src = s->q + (size_t)t * 2 * H * D + (size_t)h * 2 * D;
                memcpy(s->q_gate + (size_t)t * H * D + (size_t)h * D, src + D, D * sizeof(float));
                memmove(s->q + (size_t)t * H * D + (size_t)h * D, src, D * sizeof(float));
            }

    // Per-head norms, RoPE, and the new keys and values into the cache.
    float cs[2048];
    STRATA_ASSERT(hp->n_rot <= 2048);
    float *kc = s->k_cache + (size_t)L->kv_slot * kv_layer, *vc = s->v_cache + (size_t)L->kv_slot * kv_layer;
    for (int t = 0; t < n; t++) {
        const int pos = s->n_past + t;
        strata_rope_cache(cs, hp->n_rot, pos, hp->rope_freq_base);
        strata_rope_sections_mask(hp, cs);
        for (uint32_t h = 0; h < H; h++) {
            float *q = s->q + (size_t)t * H * D + (size_t)h * D;
            if (L->q_norm) strata_rmsnorm(q, q, L->q_norm, D, hp->rms_eps);
            strata_rope_apply(q, cs, hp->n_rot);
        }
        for (uint32_t h = 0; h < Hkv; h++) {
            float *k = s->k + (size_t)t * KD + (size_t)h * D;
            if (L->k_norm) strata_rmsnorm(k, k, L->k_norm, D, hp->rms_eps);
            strata_rope_apply(k, cs, hp->n_rot);
        }
        memcpy(kc + (size_t)pos * KD, s->k + (size_t)t * KD, KD * sizeof(float));
        memcpy(vc + (size_t)pos * VD, s->v + (size_t)t * VD, VD * sizeof(float));
    }

    struct attn_job aj = {.s = s, .layer = l, .n_tok = n};
    atomic_init(&aj.next, 0);
    strata_pool_run(s->pool, attn_worker, &aj);
    if (L->q_gated)
        for (size_t i = 0; i < (size_t)n * H * hp->head_dim_v; i++)
            s->attn[i] *= 1.0f / (1.0f + expf(-s->q_gate[i]));

    int vdt_o = -1;
    const void *xo = act_for(s, &L->wo, s->attn, n, s->act_a, &vdt_o);
    struct strata_mm_job oj = {L->wo, xo, strata_act_row_bytes(L->wo.type, L->wo.n_in), NULL, n, s->o, E, NULL};
    strata_mm_run(s->pool, m->kernels, &oj, 1);
    for (size_t i = 0; i < (size_t)n * E; i++) s->x[i] += s->o[i];
    return 0;
}

// ---- routed experts ----------------------------------------------------------------------------

// Router: softmax (qwen) or sigmoid (glm) over all experts; top-k by probability plus the
// layer's selection bias if any; weights are the unbiased probabilities, renormalised over the
// k when the model asks, then scaled.
static void route_tokens(struct strata_session *s, int l, int n)
{
    struct strata_model *m = s->m;
    const struct strata_hparams *hp = &m->hp;
    const struct strata_layer *L = &m->layers[l];
    const int X = (int)hp->n_expert, K = (int)hp->n_expert_used;
    const uint32_t E = hp->n_embd;
    int vdt = -1;
    const void *xr = act_for(s, &L->router, s->h, n, s->act_a, &vdt);
    struct strata_mm_job rj = {L->router, xr, strata_act_row_bytes(L->router.type, E), NULL, n,
                               s->router_logits, (size_t)X, NULL};
    strata_mm_run(s->pool, m->kernels, &rj, 1);

    // Count pairs per expert, then lay them out sorted by (expert, token).
    memset(s->expert_count, 0, (size_t)X * sizeof(int32_t));
    int32_t *sel = s->idx_b;       // [n][K] chosen experts, selection order
    float *selw = s->gate_out;     // [n][K] their weights (scratch: gate_out is free here)
    for (int t = 0; t < n; t++) {
        float *p = s->router_logits + (size_t)t * X;
        if (hp->expert_gating == STRATA_GATING_SIGMOID)
            for (int e = 0; e < X; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        else
            strata_softmax(p, X);
        const float *bias = L->exp_probs_b;
        int32_t *st = sel + (size_t)t * K;
        float *wt = selw + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int best = -1;
            float best_score = 0.0f;
            for (int e = 0; e < X; e++) {
                bool taken = false;
                for (int j = 0; j < k; j++) taken |= st[j] == e;
                const float score = bias ? p[e] + bias[e] : p[e];
                if (!taken && (best < 0 || score > best_score)) {
                    best = e;
                    best_score = score;
                }
            }
            st[k] = best;
            wt[k] = p[best];
        }
        float sum = 0.0f;
        for (int k = 0; k < K; k++) sum += wt[k];
        if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
        if (!hp->expert_weights_norm) sum = 1.0f;
        for (int k = 0; k < K; k++) {
            wt[k] /= sum;
            if (hp->expert_weights_scale != 0.0f && hp->expert_weights_scale != 1.0f)
                wt[k] *= hp->expert_weights_scale;
            s->expert_count[st[k]]++;
        }
        if (s->trace_ids)
            memcpy(s->trace_ids + ((size_t)t * m->layout.n_layers + (size_t)L->moe_index) * K, st, (size_t)K * sizeof *st);
    }
    int32_t pos = 0;
    for (int e = 0; e < X; e++) {
        s->expert_first[e] = pos;
        pos += s->expert_count[e];
        s->expert_count[e] = 0;
    }
    for (int t = 0; t < n; t++)
        for (int k = 0; k < K; k++) {
            const int e = sel[(size_t)t * K + k];
            const int32_t r = s->expert_first[e] + s->expert_count[e]++;
            s->routes[r] = (struct strata_route){t, e, selw[(size_t)t * K + k]};
            s->route_of[(size_t)t * K + k] = r;
        }
}

int strata_moe_block(struct strata_session *s, int l, int n)
{
    struct strata_model *m = s->m;
    const struct strata_hparams *hp = &m->hp;
    const struct strata_layer *L = &m->layers[l];
    const uint32_t moe_l = (uint32_t)L->moe_index;
    const struct strata_expert_layer *el = &m->layout.layers[moe_l];
    const int X = (int)hp->n_expert, K = (int)hp->n_expert_used;
    const uint32_t E = hp->n_embd, F = hp->n_ff_exp;
    double t0 = strata_now();

    for (int t = 0; t < n; t++)
        strata_rmsnorm(s->h + (size_t)t * E, s->x + (size_t)t * E, L->ffn_norm, E, hp->rms_eps);
    route_tokens(s, l, n);
    double t1 = strata_now();
    s->stats.t_router += t1 - t0;

    // The experts this chunk needs, each once. A bounded cache holds max_batch experts of a layer
    // at a time, so a chunk needing more runs them in groups: each group is acquired, computed
    // and released before the next. Every (token, expert) row is computed the same way in any
    // grouping, so the output does not depend on the cache size.
    int n_used = 0;
    for (int e = 0; e < X; e++)
        if (s->expert_count[e]) s->expert_ids[n_used++] = (uint32_t)e;
    const int max_group = strata_experts_max_batch(m->experts);

    const uint32_t tg = el->tensor[STRATA_EXPERT_GATE]->type, tu = el->tensor[STRATA_EXPERT_UP]->type;
    const uint32_t td = el->tensor[STRATA_EXPERT_DOWN]->type;
    const struct strata_mat mg = {NULL, tg, E, F, strata_type_row_bytes(tg, E)};
    const struct strata_mat mu = {NULL, tu, E, F, strata_type_row_bytes(tu, E)};
    const struct strata_mat md = {NULL, td, F, E, strata_type_row_bytes(td, F)};
    const size_t arb_d = strata_act_row_bytes(td, F);
    const int n_pairs = n * K;
    int32_t *tok_of_route = s->idx_a;
    int32_t *route_ids = s->idx_b;
    for (int r = 0; r < n_pairs; r++) {
        tok_of_route[r] = s->routes[r].token;
        route_ids[r] = r;
    }

    for (int g0 = 0; g0 < n_used; g0 += max_group) {
        const int g1 = n_used - g0 < max_group ? n_used : g0 + max_group;
        int rc = strata_experts_acquire(m->experts, moe_l, s->expert_ids + g0, g1 - g0, s->views + g0);
        if (rc) return rc;
        // The down activations below overwrite act_a, so each group quantizes h again.
        int vdt_a = -1, vdt_b = -1;
        const void *xg = act_for(s, &mg, s->h, n, s->act_a, &vdt_a);
        const void *xu = (int)strata_type_traits(tu)->vec_dot_type == vdt_a
                             ? xg : act_for(s, &mu, s->h, n, s->act_b, &vdt_b);

        // gate and up of every expert of the group in one parallel region, then down in another.
        struct strata_mm_job jobs[STRATA_MM_MAX_JOBS];
        STRATA_ASSERT(2 * (g1 - g0) <= STRATA_MM_MAX_JOBS);
        int nj = 0;
        for (int i = g0; i < g1; i++) {
            const int e = (int)s->expert_ids[i];
            const int first = s->expert_first[e], cnt = s->expert_count[e];
            struct strata_mat g = mg, u = mu;
            g.data = s->views[i].part[STRATA_EXPERT_GATE];
            u.data = s->views[i].part[STRATA_EXPERT_UP];
            jobs[nj++] = (struct strata_mm_job){g, xg, strata_act_row_bytes(tg, E), tok_of_route + first, cnt,
                                                s->gate_out, F, route_ids + first};
            jobs[nj++] = (struct strata_mm_job){u, xu, strata_act_row_bytes(tu, E), tok_of_route + first, cnt,
                                                s->up_out, F, route_ids + first};
        }
        strata_mm_run(s->pool, m->kernels, jobs, nj);

        // Routes are sorted by expert, so the group's rows are one contiguous range.
        const int e_first = (int)s->expert_ids[g0], e_last = (int)s->expert_ids[g1 - 1];
        const int r0 = s->expert_first[e_first], r1 = s->expert_first[e_last] + s->expert_count[e_last];
        for (size_t i = (size_t)r0 * F; i < (size_t)r1 * F; i++)
            s->gate_out[i] = strata_silu(s->gate_out[i]) * s->up_out[i];
        strata_act_quantize(m->kernels, td, s->gate_out + (size_t)r0 * F, r1 - r0, F,
                            (char *)s->act_a + (size_t)r0 * arb_d);
        nj = 0;
        for (int i = g0; i < g1; i++) {
            const int e = (int)s->expert_ids[i];
            const int first = s->expert_first[e], cnt = s->expert_count[e];
            struct strata_mat d = md;
            d.data = s->views[i].part[STRATA_EXPERT_DOWN];
            jobs[nj++] = (struct strata_mm_job){d, s->act_a, arb_d, route_ids + first, cnt,
                                                s->down_out, E, route_ids + first};
        }
        strata_mm_run(s->pool, m->kernels, jobs, nj);
        strata_experts_release(m->experts, moe_l);
    }
    if (L->sh_down.data) strata_shared_expert(s, l, n);

    // Weighted sum in selection order (+ the shared expert), then the residual.
    for (int t = 0; t < n; t++) {
        float *x = s->x + (size_t)t * E;
        float *acc = s->o;
        for (int k = 0; k < K; k++) {
            const struct strata_route *r = &s->routes[s->route_of[(size_t)t * K + k]];
            const float *d = s->down_out + (size_t)s->route_of[(size_t)t * K + k] * E;
            for (uint32_t i = 0; i < E; i++) acc[i] = k == 0 ? r->weight * d[i] : acc[i] + r->weight * d[i];
        }
        if (L->sh_down.data) {
            const float *sh = s->ffn_out + (size_t)t * E;
            for (uint32_t i = 0; i < E; i++) x[i] += acc[i] + sh[i];
        } else {
            for (uint32_t i = 0; i < E; i++) x[i] += acc[i];
        }
    }
    s->stats.t_experts += strata_now() - t1;
    return 0;
}

// ---- whole chunk -------------------------------------------------------------------------------

int strata_model_forward(struct strata_session *s, const int32_t *tokens, int n, float *logits,
                         bool all_logits)
{
    struct strata_model *m = s->m;
    const struct strata_hparams *hp = &m->hp;
    const uint32_t E = hp->n_embd;
    double t0 = strata_now();
    strata_dequant_fn deq = m->kernels->dequant[m->tok_embd.type];
    for (int t = 0; t < n; t++)
        deq((const char *)m->tok_embd.data + (size_t)tokens[t] * m->tok_embd.row_bytes, s->x + (size_t)t * E, E);
    s->stats.t_embed += strata_now() - t0;

    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const struct strata_layer *L = &m->layers[l];
        double ta = strata_now();
        int rc;
        if (L->kv_slot >= 0) {
            rc = strata_attention_block(s, (int)l, n);
            s->stats.t_attn += strata_now() - ta;
        } else {
            rc = strata_deltanet_block(s, (int)l, n);
            s->stats.t_linear_attn += strata_now() - ta;
        }
        if (rc == 0) rc = L->moe_index >= 0 ? strata_moe_block(s, (int)l, n) : strata_dense_ffn_block(s, (int)l, n);
        if (rc) return rc;
    }

    if (m->trace) {
        int rc = strata_trace_write(m->trace, s->trace_ids, n);
        if (rc) return rc;
    }

    if (!logits) return 0;
    double th = strata_now();
    const int first = all_logits ? 0 : n - 1, n_out = n - first;
    for (int t = first; t < n; t++)
        strata_rmsnorm(s->h + (size_t)(t - first) * E, s->x + (size_t)t * E, m->output_norm, E, hp->rms_eps);
    int vdt = -1;
    const void *xh = act_for(s, &m->output, s->h, n_out, s->act_a, &vdt);
    struct strata_mm_job hj = {m->output, xh, strata_act_row_bytes(m->output.type, E), NULL, n_out, logits,
                               hp->n_vocab, NULL};
    strata_mm_run(s->pool, m->kernels, &hj, 1);
    s->stats.t_head += strata_now() - th;
    return 0;
}
