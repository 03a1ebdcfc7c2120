// The gated delta-net op of the CPU backend (backend.h, struct strata_deltanet_op): gates, the
// causal conv, and the delta rule of each value head, whose scalar reference is here and whose
// AVX2 / AVX-512 variants (deltanet_avx2.c, deltanet_avx512.c) reproduce it bit for bit.
//
// The delta rule's order of operations is ggml's CPU kernel's: S^T k and S^T q are sums over the
// key index i from i = 0, one product at a time, no multiply-add fused. S is stored
// [nv][d key][d value], so that the d sums of a head (one per value column) run side by side in
// vector lanes, each in that order. Tokens are processed one after another, so the state (and
// the logits) depend neither on the ISA nor on how a prompt is split into chunks. The conv
// history is stored [K-1][C], time-major, so a token's channels are contiguous.
// The lane loops have run-time trip counts, which -O2's cost model does not vectorise in gcc 12.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/deltanet.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "backend/cpu/ops.h"

// The delta rule of one value head, scalar. Per token t, for every value column j (in lanes of up
// to 16 columns; each column's arithmetic is independent of the others):
//   S[i][j] *= decay_t                  for every key row i (the whole state first)
//   sk_j = sum_i S[i][j] * k_t[i]        from 0.0f, i = 0, 1, ...
//   delta_j = (v_t[j] - sk_j) * beta_t
//   S[i][j] += k_t[i] * delta_j;  sq_j = sum_i S[i][j] * q_t[i]   (row by row, S updated first)
//   o_t[j] = sq_j * scale
// Token t+1's decay and S^T k ride on token t's pass over the rows, so each token reads and
// writes S once; the operations on each element are the same, in the same order.
void strata_deltanet_head(const struct strata_deltanet_head *a)
{
    const uint32_t d = a->d;
    for (uint32_t j0 = 0; j0 < d; j0 += 16) {
        const uint32_t w = d - j0 < 16 ? d - j0 : 16;
        float *S = a->S + j0;
        float sk[16], sq[16], delta[16];
        const float *k = a->k;
        float decay = a->decay[0];
        for (uint32_t j = 0; j < w; j++) sk[j] = 0.0f;
        for (uint32_t i = 0; i < d; i++)
            for (uint32_t j = 0; j < w; j++) {
                S[(size_t)i * d + j] *= decay;
                sk[j] += S[(size_t)i * d + j] * k[i];
            }
        for (int t = 0; t < a->n_tok; t++) {
            const float *q = a->q + (size_t)t * a->qkv_stride, *v = a->v + (size_t)t * a->qkv_stride + j0;
            const float beta = a->beta[(size_t)t * a->gate_stride];
            const bool next = t + 1 < a->n_tok;
            const float *kn = next ? a->k + (size_t)(t + 1) * a->qkv_stride : NULL;
            decay = next ? a->decay[(size_t)(t + 1) * a->gate_stride] : 0.0f;
            for (uint32_t j = 0; j < w; j++) {
                delta[j] = (v[j] - sk[j]) * beta;
                sk[j] = 0.0f;
                sq[j] = 0.0f;
            }
            for (uint32_t i = 0; i < d; i++) {
                float *Si = S + (size_t)i * d;
                for (uint32_t j = 0; j < w; j++) {
                    Si[j] += k[i] * delta[j];
                    sq[j] += Si[j] * q[i];
                }
                if (next)
                    for (uint32_t j = 0; j < w; j++) {
                        Si[j] *= decay;
                        sk[j] += Si[j] * kn[i];
                    }
            }
            float *o = a->o + (size_t)t * a->o_stride + j0;
            for (uint32_t j = 0; j < w; j++) o[j] = sq[j] * a->scale;
            k = kn;
        }
    }
}

// ---- the delta-net op ----------------------------------------------------------------------------

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
    const float *qkv;      // the sequence's [n_tok][C] conv inputs
    float *conv_out;       // its [n_tok][C] outputs
    const float *taps;     // [K][C]
    float *hist;           // the sequence's [K-1][C] for this layer
    uint32_t C, K1, d, nk;
    int n_tok;
    float eps;
    enum strata_isa isa;   // the SiLU loops' level (the same bits at every level)
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
    const uint32_t C = j->C, K1 = j->K1, K = K1 + 1, d = j->d, n = (uint32_t)j->n_tok;
    int b0, b1;
    while (strata_chunk_next(&j->next, (int)(C / d), 1, &b0, &b1)) {
        for (int b = b0; b < b1; b++) {
            const uint32_t c0 = (uint32_t)b * d;
            for (uint32_t t = 0; t < n; t++) {
                float *out = j->conv_out + (size_t)t * C + c0;
                for (uint32_t c = 0; c < d; c++) out[c] = 0.0f;
                for (uint32_t k = 0; k < K; k++) {
                    const uint32_t w = t + k;
                    const float *x = (w < K1 ? j->hist + (size_t)w * C : j->qkv + (size_t)(w - K1) * C) + c0;
                    const float *tap = j->taps + (size_t)k * C + c0;
                    for (uint32_t c = 0; c < d; c++) out[c] += x[c] * tap[c];
                }
                strata_swiglu_rows(j->isa, out, out, NULL, d);
                if (c0 < 2 * j->nk * d) l2_norm(out, d, j->eps);
            }
            // history row i <- window input n + i (a later history row, or a token), rows in order
            for (uint32_t i = 0; i < K1; i++) {
                const uint32_t w = n + i;
                const float *x = (w < K1 ? j->hist + (size_t)w * C : j->qkv + (size_t)(w - K1) * C) + c0;
                memcpy(j->hist + (size_t)i * C + c0, x, d * sizeof(float));
            }
        }
    }
}

struct rec_job {
    void (*head)(const struct strata_deltanet_head *);
    float *S;              // the sequence's [nv][d][d] for this layer
    const float *conv_out; // its [n_tok][C]
    const float *beta, *decay;  // its [n_tok][nv]
    const float *z;        // its [n_tok][nv*d]
    float *out;            // its [n_tok][nv*d]
    const float *norm;     // [d] gated RMS norm weights
    uint32_t C, d, nv, nk;
    float eps;
    int n_tok;
    bool tiled;            // value head h reads key head h % nk (else h / r)
    enum strata_isa isa;
    atomic_int next;
};

// The delta rule over the sequence's tokens, then the gated RMS norm of the outputs, one value
// head per work item.
static void rec_worker(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    struct rec_job *j = arg;
    const uint32_t d = j->d, nv = j->nv, nk = j->nk, r = nv / nk, C = j->C;
    int h0, h1;
    while (strata_chunk_next(&j->next, (int)nv, 1, &h0, &h1)) {
        for (int h = h0; h < h1; h++) {
            const uint32_t kh = j->tiled ? (uint32_t)h % nk : (uint32_t)h / r;
            const struct strata_deltanet_head a = {
                .S = j->S + (size_t)h * d * d,
                .q = j->conv_out + (size_t)kh * d,
                .k = j->conv_out + (size_t)nk * d + (size_t)kh * d,
                .v = j->conv_out + (size_t)2 * nk * d + (size_t)h * d,
                .qkv_stride = C,
                .decay = j->decay + h,
                .beta = j->beta + h,
                .gate_stride = nv,
                .o = j->out + (size_t)h * d,
                .o_stride = (size_t)nv * d,
                .n_tok = j->n_tok,
                .d = d,
                .scale = 1.0f / sqrtf((float)d),
            };
            j->head(&a);
            for (int t = 0; t < j->n_tok; t++) {
                float *o = j->out + (size_t)t * nv * d + (size_t)h * d;
                const float *z = j->z + (size_t)t * nv * d + (size_t)h * d;
                strata_rmsnorm(o, o, j->norm, d, j->eps);
                strata_swiglu_rows(j->isa, o, z, o, d);  // o * silu(z): the same product
            }
        }
    }
}

void strata_cpu_deltanet(struct strata_pool *pool, enum strata_isa isa, const struct strata_deltanet_op *op)
{
    const struct strata_batch *b = op->batch;
    const int n = b->n_tok;
    const uint32_t nk = op->nk, nv = op->nv, d = op->d, r = nv / nk, C = 2 * nk * d + nv * d, K1 = op->conv_k - 1;
    float *conv_out = op->work, *beta = conv_out + (size_t)n * C, *decay = beta + (size_t)n * nv;
    // Gates: beta from the fused [nk][r betas | r alphas] rows or the split projections.
    for (int t = 0; t < n; t++)
        for (uint32_t h = 0; h < nv; h++) {
            float bv, av;
            if (op->ba_split) {
                bv = op->ba[(size_t)t * nv + h];
                av = op->ba[(size_t)n * nv + (size_t)t * nv + h];
            } else {
                const float *row = op->ba + (size_t)t * 2 * nv + (size_t)(h / r) * 2 * r;
                bv = row[h % r];
                av = row[r + h % r];
            }
            const float x = av + op->dt_bias[h];
            const float softplus = x > 20.0f ? x : logf(1.0f + expf(x));
            beta[(size_t)t * nv + h] = 1.0f / (1.0f + expf(-bv));
            decay[(size_t)t * nv + h] = expf(softplus * op->a[h]);
        }
    void (*head)(const struct strata_deltanet_head *) =
        isa == STRATA_ISA_AVX512 && d % 16 == 0 ? strata_deltanet_head_avx512
        : isa >= STRATA_ISA_AVX2 && d % 8 == 0  ? strata_deltanet_head_avx2
                                                 : strata_deltanet_head;
    // Each sequence through its own history and state, its tokens in order.
    for (int si = 0; si < b->n_seq; si++) {
        const struct strata_seq *sq = &b->seq[si];
        const size_t t0 = (size_t)sq->tok0;
        struct conv_job cj = {.qkv = op->qkv + t0 * C, .conv_out = conv_out + t0 * C, .taps = op->conv_taps,
                              .hist = sq->conv + (size_t)op->rs_slot * C * K1, .C = C, .K1 = K1, .d = d, .nk = nk,
                              .n_tok = sq->n_tok, .eps = op->eps, .isa = isa};
        atomic_init(&cj.next, 0);
        strata_pool_run(pool, conv_worker, &cj);
        struct rec_job rj = {.head = head, .S = sq->ssm + (size_t)op->rs_slot * nv * d * d,
                             .conv_out = conv_out + t0 * C, .beta = beta + t0 * nv, .decay = decay + t0 * nv,
                             .z = op->z + t0 * nv * d, .out = op->out + t0 * nv * d, .norm = op->norm,
                             .C = C, .d = d, .nv = nv, .nk = nk, .eps = op->eps, .n_tok = sq->n_tok,
                             .tiled = op->kv_tiled, .isa = isa};
        atomic_init(&rj.next, 0);
        strata_pool_run(pool, rec_worker, &rj);
    }
}
