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
// prompt is split into chunks. The order of operations is ggml's CPU kernel's: S^T k and S^T q
// are sums over the key index i from i = 0, one product at a time, no multiply-add fused.
// S is stored [nv][d key][d value], so that the d sums of a head (one per value column) run side
// by side in vector lanes, each in that order: the scalar reference and the AVX2 / AVX-512
// variants (deltanet_avx2.c, deltanet_avx512.c) give the same bits.
// The conv history is stored [K-1][C], time-major, so a token's channels are contiguous.
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/deltanet.h"
#include "model/model_impl.h"
#include "util/log.h"

struct strata_deltanet_state {
    uint32_t n_rs, C, K1, nv, nk, d;  // layers, channels, conv history (K-1), heads, head size
    void (*head)(const struct strata_deltanet_head *);  // the delta rule for the CPU's ISA
    float *conv;        // [n_rs][K-1][C] last K-1 inputs of each channel, oldest first
    float *taps;        // [n_rs][K][C] the layers' conv taps, transposed so channels are contiguous
    float *ssm;         // [n_rs][nv][d key][d value] delta-rule state
    float *qkv;         // [n_batch][C] projection
    float *conv_out;    // [n_batch][C] after conv and SiLU (q, k then L2-normalised)
    float *z;           // [n_batch][nv*d] output gate
    float *ba;          // [n_batch][2*nv] beta/alpha projections (fused or split)
    float *beta, *decay; // [n_batch][nv] sigmoid(beta), exp(log-decay)
    float *core;        // [n_batch][nv*d] per-head outputs, then gated-normed
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
    const enum strata_isa isa = m->kernels->isa;
    st->head = isa == STRATA_ISA_AVX512 && st->d % 16 == 0 ? strata_deltanet_head_avx512
               : isa >= STRATA_ISA_AVX2 && st->d % 8 == 0  ? strata_deltanet_head_avx2
                                                            : strata_deltanet_head;
    const size_t B = (size_t)n_batch, V = (size_t)st->nv * st->d;
    const size_t sizes[] = {(size_t)st->n_rs * st->C * st->K1, (size_t)st->n_rs * st->C * (st->K1 + 1),
                            (size_t)st->n_rs * st->nv * st->d * st->d,
                            B * st->C, B * st->C, B * V, B * 2 * st->nv, B * st->nv, B * st->nv, B * V};
    float **bufs[] = {&st->conv, &st->taps, &st->ssm, &st->qkv, &st->conv_out, &st->z, &st->ba, &st->beta, &st->decay,
                      &st->core};
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
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const struct strata_deltanet_layer *dn = &m->layers[l].dn;
        if (m->layers[l].kv_slot >= 0 || !dn->conv) continue;
        float *tt = st->taps + (size_t)dn->rs_slot * st->C * (st->K1 + 1);
        for (uint32_t c = 0; c < st->C; c++)
            for (uint32_t k = 0; k <= st->K1; k++) tt[(size_t)k * st->C + c] = dn->conv[(size_t)c * (st->K1 + 1) + k];
    }
    *out = st;
    return 0;
}

void strata_deltanet_state_free(struct strata_deltanet_state *st)
{
    if (!st) return;
    float *bufs[] = {st->conv, st->taps, st->ssm, st->qkv, st->conv_out, st->z, st->ba, st->beta, st->decay, st->core};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(st);
}

void strata_deltanet_state_reset(struct strata_deltanet_state *st)
{
    memset(st->conv, 0, (size_t)st->n_rs * st->C * st->K1 * sizeof(float));
    memset(st->ssm, 0, (size_t)st->n_rs * st->nv * st->d * st->d * sizeof(float));
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

struct conv_job {
    struct strata_deltanet_state *st;
    const float *taps;     // this layer's [K][C]
    float *hist;           // this layer's [K-1][C]
    int n_tok;
    float eps;
    atomic_int next;
};

// Causal conv1d and SiLU over blocks of d channels (one key or value head each), then the L2 norm
// of the q and k heads. Channel c's input j of the window is history row j (j < K-1) or token
// j - (K-1); token t's sum runs over its K window inputs t .. t+K-1 in order, in float, as ggml's.
// The last K-1 inputs become the new history.
static void conv_worker(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    struct conv_job *j = arg;
    struct strata_deltanet_state *st = j->st;
    const uint32_t C = st->C, K1 = st->K1, K = K1 + 1, d = st->d, n = (uint32_t)j->n_tok;
    int b0, b1;
    while (strata_chunk_next(&j->next, (int)(C / d), 1, &b0, &b1)) {
        for (int b = b0; b < b1; b++) {
            const uint32_t c0 = (uint32_t)b * d;
            for (uint32_t t = 0; t < n; t++) {
                float *out = st->conv_out + (size_t)t * C + c0;
                for (uint32_t c = 0; c < d; c++) out[c] = 0.0f;
                for (uint32_t k = 0; k < K; k++) {
                    const uint32_t w = t + k;
                    const float *x = (w < K1 ? j->hist + (size_t)w * C : st->qkv + (size_t)(w - K1) * C) + c0;
                    const float *tap = j->taps + (size_t)k * C + c0;
                    for (uint32_t c = 0; c < d; c++) out[c] += x[c] * tap[c];
                }
                for (uint32_t c = 0; c < d; c++) out[c] = strata_silu(out[c]);
                if (c0 < 2 * st->nk * d) l2_norm(out, d, j->eps);
            }
            // history row i <- window input n + i (a later history row, or a token), rows in order
            for (uint32_t i = 0; i < K1; i++) {
                const uint32_t w = n + i;
                const float *x = (w < K1 ? j->hist + (size_t)w * C : st->qkv + (size_t)(w - K1) * C) + c0;
                memcpy(j->hist + (size_t)i * C + c0, x, d * sizeof(float));
            }
        }
    }
}

struct rec_job {
    struct strata_deltanet_state *st;
    float *S;              // this layer's [nv][d][d]
    const float *norm;     // [d] gated RMS norm weights
    float eps;
    int n_tok;
    bool tiled;            // qwen35moe: value head h reads key head h % nk (else h / r)
    atomic_int next;
};

// The delta rule over the chunk's tokens, then the gated RMS norm of the outputs, one value head
// per work item.
static void rec_worker(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    struct rec_job *j = arg;
    struct strata_deltanet_state *st = j->st;
    const uint32_t d = st->d, nv = st->nv, nk = st->nk, r = nv / nk, C = st->C;
    int h0, h1;
    while (strata_chunk_next(&j->next, (int)nv, 1, &h0, &h1)) {
        for (int h = h0; h < h1; h++) {
            const uint32_t kh = j->tiled ? (uint32_t)h % nk : (uint32_t)h / r;
            const struct strata_deltanet_head a = {
                .S = j->S + (size_t)h * d * d,
                .q = st->conv_out + (size_t)kh * d,
                .k = st->conv_out + (size_t)nk * d + (size_t)kh * d,
                .v = st->conv_out + (size_t)2 * nk * d + (size_t)h * d,
                .qkv_stride = C,
                .decay = st->decay + h,
                .beta = st->beta + h,
                .gate_stride = nv,
                .o = st->core + (size_t)h * d,
                .o_stride = (size_t)nv * d,
                .n_tok = j->n_tok,
                .d = d,
                .scale = 1.0f / sqrtf((float)d),
            };
            st->head(&a);
            for (int t = 0; t < j->n_tok; t++) {
                float *o = st->core + (size_t)t * nv * d + (size_t)h * d;
                const float *z = st->z + (size_t)t * nv * d + (size_t)h * d;
                strata_rmsnorm(o, o, j->norm, d, j->eps);
                for (uint32_t i = 0; i < d; i++) o[i] *= strata_silu(z[i]);
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
    const uint32_t E = hp->n_embd, C = st->C, nv = st->nv, d = st->d, r = nv / st->nk;
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
            st->decay[(size_t)t * nv + h] = expf(softplus * dn->a[h]);
        }

    struct conv_job cj = {.st = st, .taps = st->taps + rs * C * (st->K1 + 1), .hist = st->conv + rs * C * st->K1, .n_tok = n,
                          .eps = hp->rms_eps};
    atomic_init(&cj.next, 0);
    strata_pool_run(s->pool, conv_worker, &cj);

    struct rec_job rj = {.st = st, .S = st->ssm + rs * nv * d * d, .norm = dn->norm, .eps = hp->rms_eps,
                         .n_tok = n, .tiled = hp->arch == STRATA_ARCH_QWEN35MOE};
    atomic_init(&rj.next, 0);
    strata_pool_run(s->pool, rec_worker, &rj);

    // Output projection, residual.
    const struct strata_mat *wo[1] = {&dn->out};
    float *yo = s->o;
    strata_project(s, wo, &yo, 1, st->core, n);
    for (size_t i = 0; i < (size_t)n * E; i++) s->x[i] += s->o[i];
    return 0;
}
