// Gated delta-net linear attention (qwen3next, qwen35moe): the blocks that are not full
// attention, and their recurrent state.
//
// Per token x (after the block's RMSNorm), with nk key heads, nv value heads (r = nv/nk value
// heads per key head), head size d (keys and values alike) and C = 2*nk*d + nv*d channels:
//   qkv = W_qkv x [C]; z = W_gate x [nv*d]; beta, alpha per value head from W_ba (or W_beta, W_alpha)
//   causal conv1d of width K over each channel's history (K-1 values kept between chunks), SiLU
//   q, k = L2-normalised key-head slices; v = the value slices
//   per value head h:  S *= exp(softplus(alpha + dt_bias) * a)      (a < 0: a decay)
//                      S += k (beta * (v - S^T k))^T                 (the delta rule)
//                      o = S^T q / sqrt(d)
//   out = W_out [RMSNorm(o_h) * SiLU(z_h) for each h]
// Tokens are processed one after another, so the state (and the logits) do not depend on how a
// prompt is split into chunks. S is stored transposed, [nv][d value][d key], so each value row
// is contiguous (the same layout and the same order of operations as ggml's CPU kernel).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model_impl.h"
#include "util/log.h"

struct strata_deltanet_state {
    uint32_t n_rs, C, K1, nv, nk, d;  // layers, channels, conv history (K-1), heads, head size
    float *conv;        // [n_rs][C][K-1] last K-1 inputs of each channel
    float *ssm;         // [n_rs][nv][d][d] delta-rule state, transposed
    float *qkv;         // [n_batch][C] projection
    float *conv_out;    // [n_batch][C] after conv and SiLU (q, k then L2-normalised)
    float *z;           // [n_batch][nv*d] output gate
    float *ba;          // [n_batch][2*nv] beta/alpha projections (fused or split)
    float *beta, *g;    // [n_batch][nv] sigmoid(beta), log-decay
    float *core;        // [n_batch][nv*d] per-head outputs, then gated-normed
    float *window;      // [K-1 + n_batch] one channel's conv input
};

int strata_deltanet_state_create(struct strata_deltanet_state **out, const struct strata_model *m, int n_batch)
{
    const struct strata_hparams *hp = &m->hp;
    struct strata_deltanet_state *st = calloc(1, sizeof *st);
    if (!st) return STRATA_ENOMEM;
    st->n_rs = m->n_rs_layers;
    st->nv = hp->ssm_dt_rank;
    st->nk = hp->ssm_n_group;
    st->d = hp->ssm_d_state;
    st->C = 2 * st->nk * st->d + st->nv * st->d;
    st->K1 = hp->ssm_d_conv - 1;
    const size_t B = (size_t)n_batch, V = (size_t)st->nv * st->d;
    const size_t sizes[] = {(size_t)st->n_rs * st->C * st->K1, (size_t)st->n_rs * st->nv * st->d * st->d,
                            B * st->C, B * st->C, B * V, B * 2 * st->nv, B * st->nv, B * st->nv, B * V,
                            st->K1 + B};
    float **bufs[] = {&st->conv, &st->ssm, &st->qkv, &st->conv_out, &st->z, &st->ba, &st->beta, &st->g,
                      &st->core, &st->window};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        void *p = NULL;
        if (posix_memalign(&p, 64, (sizes[i] ? sizes[i] : 1) * sizeof(float))) {
            strata_log_error("session_create: out of memory for delta-net state (%zu floats)", sizes[i]);
            strata_deltanet_state_free(st);
            return STRATA_ENOMEM;
        }
        memset(p, 0, (sizes[i] ? sizes[i] : 1) * sizeof(float));
        *bufs[i] = p;
    }
    *out = st;
    return 0;
}

void strata_deltanet_state_free(struct strata_deltanet_state *st)
{
    if (!st) return;
    float *bufs[] = {st->conv, st->ssm, st->qkv, st->conv_out, st->z, st->ba, st->beta, st->g, st->core, st->window};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(st);
}

void strata_deltanet_state_reset(struct strata_deltanet_state *st)
{
    memset(st->conv, 0, (size_t)st->n_rs * st->C * st->K1 * sizeof(float));
    memset(st->ssm, 0, (size_t)st->n_rs * st->nv * st->d * st->d * sizeof(float));
}

// Causal conv1d over each channel: history (K-1 values) then the chunk's n values; the last K-1
// inputs become the new history. The sum runs over the taps in order, in float, as ggml's.
static void conv_chunk(struct strata_deltanet_state *st, const float *taps, float *hist, int n)
{
    const uint32_t C = st->C, K1 = st->K1, K = K1 + 1;
    float *w = st->window;
    for (uint32_t c = 0; c < C; c++) {
        memcpy(w, hist + (size_t)c * K1, K1 * sizeof(float));
        for (int t = 0; t < n; t++) w[K1 + t] = st->qkv[(size_t)t * C + c];
        const float *tc = taps + (size_t)c * K;
        for (int t = 0; t < n; t++) {
            float sum = 0.0f;
            for (uint32_t k = 0; k < K; k++) sum += w[t + k] * tc[k];
            st->conv_out[(size_t)t * C + c] = strata_silu(sum);
        }
        memcpy(hist + (size_t)c * K1, w + n, K1 * sizeof(float));
    }
}

// x / sqrt(sum x^2 + eps), as ggml gets it: RMS norm with eps/n, then a 1/sqrt(n) scale.
static void l2_norm(float *x, uint32_t n, float eps)
{
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps / (float)n);
    const float post = 1.0f / sqrtf((float)n);
    for (uint32_t i = 0; i < n; i++) x[i] = (x[i] * scale) * post;
}

struct rec_job {
    struct strata_deltanet_state *st;
    float *S;              // this layer's [nv][d][d]
    int n_tok;
    bool tiled;            // qwen35moe: value head h reads key head h % nk (else h / r)
    atomic_int next;
};

// The delta rule for one value head over the chunk's tokens, one token after another.
static void rec_worker(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    struct rec_job *j = arg;
    struct strata_deltanet_state *st = j->st;
    const uint32_t d = st->d, nv = st->nv, nk = st->nk, r = nv / nk, C = st->C;
    const float scale = 1.0f / sqrtf((float)d);
    int h0, h1;
    while (strata_chunk_next(&j->next, (int)nv, 1, &h0, &h1)) {
        for (int h = h0; h < h1; h++) {
            const uint32_t kh = j->tiled ? (uint32_t)h % nk : (uint32_t)h / r;
            float *S = j->S + (size_t)h * d * d;
            for (int t = 0; t < j->n_tok; t++) {
                const float *row = st->conv_out + (size_t)t * C;
                const float *q = row + (size_t)kh * d, *k = row + (size_t)nk * d + (size_t)kh * d;
                const float *v = row + (size_t)2 * nk * d + (size_t)h * d;
                const float decay = expf(st->g[(size_t)t * nv + h]), beta = st->beta[(size_t)t * nv + h];
                float *o = st->core + (size_t)t * nv * d + (size_t)h * d;
                for (size_t i = 0; i < (size_t)d * d; i++) S[i] *= decay;
                for (uint32_t vj = 0; vj < d; vj++) {
                    float *Sj = S + (size_t)vj * d;
                    float sk = 0.0f;
                    for (uint32_t i = 0; i < d; i++) sk += Sj[i] * k[i];
                    const float delta = (v[vj] - sk) * beta;
                    float sq = 0.0f;
                    for (uint32_t i = 0; i < d; i++) {
                        Sj[i] += k[i] * delta;
                        sq += Sj[i] * q[i];
                    }
                    o[vj] = sq * scale;
                }
            }
        }
    }
}

int strata_deltanet_block(struct strata_session *s, int l, int n)
{
    struct strata_model *m = s->m;
    const struct strata_hparams *hp = &m->hp;
    const struct strata_layer *L = &m->layers[l];
    const struct strata_deltanet_layer *dn = &L->dn;
    struct strata_deltanet_state *st = s->dn;
    const uint32_t E = hp->n_embd, C = st->C, nv = st->nv, nk = st->nk, d = st->d, r = nv / nk;
    const size_t rs = (size_t)dn->rs_slot;

    for (int t = 0; t < n; t++)
        strata_rmsnorm(s->h + (size_t)t * E, s->x + (size_t)t * E, L->attn_norm, E, hp->rms_eps);

    // Projections: qkv, z and the beta/alpha rows (fused as [nk][r betas | r alphas], or split).
    const bool split = dn->beta.data != NULL;
    const struct strata_mat *w[4] = {&dn->qkv, &dn->z, split ? &dn->beta : &dn->ba, &dn->alpha};
    float *y[4] = {st->qkv, st->z, st->ba, st->ba + (size_t)n * nv};
    strata_project(s, w, y, split ? 4 : 3, s->h, n);
    for (int t = 0; t < n; t++)
        for (uint32_t h = 0; h < nv; h++) {
            float b, a;
            if (split) {
                b = st->ba[(size_t)t * nv + h];
                a = st->ba[(size_t)n * nv + (size_t)t * nv + h];
            } else {
                const float *row = st->ba + (size_t)t * 2 * nv + (size_t)(h / r) * 2 * r;
                b = row[h % r];
                a = row[r + h % r];
            }
            const float x = a + dn->dt_bias[h];
            const float softplus = x > 20.0f ? x : logf(1.0f + expf(x));
            st->beta[(size_t)t * nv + h] = 1.0f / (1.0f + expf(-b));
            st->g[(size_t)t * nv + h] = softplus * dn->a[h];
        }

    conv_chunk(st, dn->conv, st->conv + rs * C * st->K1, n);
    for (int t = 0; t < n; t++)
        for (uint32_t h = 0; h < 2 * nk; h++) l2_norm(st->conv_out + (size_t)t * C + (size_t)h * d, d, hp->rms_eps);

    struct rec_job rj = {.st = st, .S = st->ssm + rs * nv * d * d, .n_tok = n,
                         .tiled = hp->arch == STRATA_ARCH_QWEN35MOE};
    atomic_init(&rj.next, 0);
    strata_pool_run(s->pool, rec_worker, &rj);

    // Gated RMSNorm per head, output projection, residual.
    for (int t = 0; t < n; t++)
        for (uint32_t h = 0; h < nv; h++) {
            float *o = st->core + (size_t)t * nv * d + (size_t)h * d;
            const float *z = st->z + (size_t)t * nv * d + (size_t)h * d;
            strata_rmsnorm(o, o, dn->norm, d, hp->rms_eps);
            for (uint32_t i = 0; i < d; i++) o[i] *= strata_silu(z[i]);
        }
    const struct strata_mat *wo[1] = {&dn->out};
    float *yo = s->o;
    strata_project(s, wo, &yo, 1, st->core, n);
    for (size_t i = 0; i < (size_t)n * E; i++) s->x[i] += s->o[i];
    return 0;
}
