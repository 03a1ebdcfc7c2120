// Blocks the newer architectures add to the qwen3moe forward pass: the dense SwiGLU FFN of
// glm4moe's leading blocks, the shared expert (ungated in glm4moe, sigmoid-gated in qwen3next),
// the session scratch they need, and the M-RoPE section mask of qwen35moe.
//
// Every product goes through strata_project, which rounds the input rows to each weight's dot
// format once per distinct format, as ggml does.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/log.h"

void strata_project(struct strata_session *s, const struct strata_mat *const *w, float *const *y, int nw,
                    const float *x, int n)
{
    const struct strata_kernels *k = s->m->kernels;
    struct strata_mm_job jobs[8];
    STRATA_ASSERT(nw <= 8);
    bool done[8] = {false};
    // One group per distinct dot format: quantize x once into act_a, run the group's products
    // in one parallel region.
    for (int first = 0; first < nw; first++) {
        if (done[first]) continue;
        const uint32_t vdt = strata_type_traits(w[first]->type)->vec_dot_type;
        strata_act_quantize(k, w[first]->type, x, n, w[first]->n_in, s->act_a);
        int nj = 0;
        for (int i = first; i < nw; i++) {
            if (done[i] || strata_type_traits(w[i]->type)->vec_dot_type != vdt) continue;
            STRATA_ASSERT(w[i]->n_in == w[first]->n_in);
            jobs[nj++] = (struct strata_mm_job){*w[i], s->act_a, strata_act_row_bytes(w[i]->type, w[i]->n_in),
                                                NULL, n, y[i], w[i]->n_out, NULL};
            done[i] = true;
        }
        strata_mm_run(s->pool, k, jobs, nj);
    }
}

// out[n][E] = down(silu(gate h) * up h) for a SwiGLU FFN (dense or shared expert).
static void swiglu_ffn(struct strata_session *s, const struct strata_mat *gate, const struct strata_mat *up,
                       const struct strata_mat *down, int n, float *out)
{
    const struct strata_mat *gu[2] = {gate, up};
    float *gu_out[2] = {s->ffn_a, s->ffn_b};
    strata_project(s, gu, gu_out, 2, s->h, n);
    const size_t F = gate->n_out;
    for (size_t i = 0; i < (size_t)n * F; i++) s->ffn_a[i] = strata_silu(s->ffn_a[i]) * s->ffn_b[i];
    const struct strata_mat *d[1] = {down};
    strata_project(s, d, &out, 1, s->ffn_a, n);
}

int strata_dense_ffn_block(struct strata_session *s, int l, int n)
{
    const struct strata_hparams *hp = &s->m->hp;
    const struct strata_layer *L = &s->m->layers[l];
    const uint32_t E = hp->n_embd;
    double t0 = strata_now();
    for (int t = 0; t < n; t++)
        strata_rmsnorm(s->h + (size_t)t * E, s->x + (size_t)t * E, L->ffn_norm, E, hp->rms_eps);
    swiglu_ffn(s, &L->ffn_gate, &L->ffn_up, &L->ffn_down, n, s->o);
    for (size_t i = 0; i < (size_t)n * E; i++) s->x[i] += s->o[i];
    s->stats.t_experts += strata_now() - t0;
    return 0;
}

void strata_shared_expert(struct strata_session *s, int l, int n)
{
    const struct strata_layer *L = &s->m->layers[l];
    const uint32_t E = s->m->hp.n_embd;
    swiglu_ffn(s, &L->sh_gate, &L->sh_up, &L->sh_down, n, s->ffn_out);
    if (!L->sh_gate_inp.data) return;
    // One gate logit per token; ffn_a is free again after the FFN.
    const struct strata_mat *g[1] = {&L->sh_gate_inp};
    float *gl = s->ffn_a;
    strata_project(s, g, &gl, 1, s->h, n);
    for (int t = 0; t < n; t++) {
        const float gate = 1.0f / (1.0f + expf(-gl[t]));
        float *o = s->ffn_out + (size_t)t * E;
        for (uint32_t i = 0; i < E; i++) o[i] *= gate;
    }
}

void strata_rope_sections_mask(const struct strata_hparams *hp, float *cs)
{
    const int32_t *sec = hp->rope_sections;
    const int sect_dims = sec[0] + sec[1] + sec[2] + sec[3];
    if (hp->arch != STRATA_ARCH_QWEN35MOE || sect_dims <= 0) return;
    // Interleaved sections: pair i belongs to t, h, w by i mod 3 while inside their sections;
    // t, h and w all carry the token position, the rest (the fourth section) position 0.
    for (uint32_t i = 0; i < hp->n_rot / 2; i++) {
        const int sector = (int)i % sect_dims;
        const bool thw = (sector % 3 == 0 && sector < 3 * sec[0]) || (sector % 3 == 1 && sector < 3 * sec[1]) ||
                         (sector % 3 == 2 && sector < 3 * sec[2]);
        if (!thw) {
            cs[2 * i] = 1.0f;
            cs[2 * i + 1] = 0.0f;
        }
    }
}

static float *alloc_floats(size_t n, int *rc)
{
    void *p = NULL;
    if (*rc) return NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float))) {
        strata_log_error("session_create: out of memory (%zu floats of scratch)", n);
        *rc = STRATA_ENOMEM;
        return NULL;
    }
    memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

int strata_session_alloc_extra(struct strata_session *s)
{
    const struct strata_model *m = s->m;
    const struct strata_hparams *hp = &m->hp;
    const size_t B = (size_t)s->n_batch, E = hp->n_embd;
    size_t f = hp->n_ff > hp->n_ff_shexp ? hp->n_ff : hp->n_ff_shexp;
    if (f < 1) f = 1;
    int rc = 0;
    s->q_gate = alloc_floats(B * hp->n_head * hp->head_dim_k, &rc);
    s->ffn_a = alloc_floats(B * f, &rc);
    s->ffn_b = alloc_floats(B * f, &rc);
    s->ffn_out = alloc_floats(B * E, &rc);
    if (rc == 0 && m->n_rs_layers) rc = strata_deltanet_state_create(&s->dn, m, s->n_batch);
    return rc;
}

void strata_session_free_extra(struct strata_session *s)
{
    free(s->q_gate);
    free(s->ffn_a);
    free(s->ffn_b);
    free(s->ffn_out);
    strata_deltanet_state_free(s->dn);
    s->q_gate = s->ffn_a = s->ffn_b = s->ffn_out = NULL;
    s->dn = NULL;
}

void strata_session_reset_extra(struct strata_session *s)
{
    if (s->dn) strata_deltanet_state_reset(s->dn);
}
