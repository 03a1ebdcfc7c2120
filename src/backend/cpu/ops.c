// CPU forward-pass operations and the batched matmul driver.
#include "backend/cpu/ops.h"

#include <math.h>
#include <string.h>

#include "util/log.h"

// Jobs are run in units: a run of consecutive jobs on the same weight matrix (the output head
// of several sequences of a pass) is one unit, whose chunks of rows each serve every token of
// those jobs, so the matrix is read once for all of them.
struct mm_batch {
    const struct strata_kernels *k;
    const struct strata_mm_job *jobs;
    int n_units;
    int chunk_rows;
    int unit_job[STRATA_MM_MAX_JOBS + 1];          // first job of each unit; [n_units] = n_jobs
    int unit_chunk_start[STRATA_MM_MAX_JOBS + 1];  // first global chunk of each unit; [n_units] = total
    atomic_int next;
};

static void mm_worker(void *arg, int ith, int nth)
{
    (void)ith;
    (void)nth;
    struct mm_batch *b = arg;
    const int total = b->unit_chunk_start[b->n_units];
    int c0, c1;
    int u = 0;
    while (strata_chunk_next(&b->next, total, 1, &c0, &c1)) {
        while (b->unit_chunk_start[u + 1] <= c0) u++;
        while (b->unit_chunk_start[u] > c0) u--;
        const int j0 = b->unit_job[u], j1 = b->unit_job[u + 1];
        const struct strata_mat *w = &b->jobs[j0].w;
        const int r0 = (c0 - b->unit_chunk_start[u]) * b->chunk_rows;
        const int r1 = r0 + b->chunk_rows < (int)w->n_out ? r0 + b->chunk_rows : (int)w->n_out;
        strata_vec_dot_fn dot = b->k->vec_dot[w->type];
        strata_vec_dot_multi_fn multi = b->k->vec_dot_multi[w->type];
        const char *wbase = w->data;
        int n_left = 0;
        for (int j = j0; j < j1; j++) n_left += b->jobs[j].n_tok;
        // groups of tokens (of the unit's jobs in order) through the multi-token dot, which
        // decodes each weight block once for all of them; the chunk's rows stay in cache from one
        // group to the next. A last single token goes through vec_dot (the same result).
        int j = j0, t = 0;
        while (n_left > 0) {
            const int n_act = !multi || n_left == 1 ? 1 : n_left < STRATA_DOT_TOKENS ? n_left : STRATA_DOT_TOKENS;
            const void *x[STRATA_DOT_TOKENS];
            float *y[STRATA_DOT_TOKENS];
            for (int i = 0; i < n_act; i++, t++) {
                while (t == b->jobs[j].n_tok) j++, t = 0;
                const struct strata_mm_job *job = &b->jobs[j];
                const int xr = job->x_rows ? job->x_rows[t] : t;
                const int yr = job->y_rows ? job->y_rows[t] : t;
                x[i] = (const char *)job->xq + (size_t)xr * job->xq_stride;
                y[i] = job->y + (size_t)yr * job->y_stride;
            }
            n_left -= n_act;
            if (n_act == 1) {
                for (int r = r0; r < r1; r++) dot((int64_t)w->n_in, &y[0][r], wbase + (size_t)r * w->row_bytes, x[0]);
                continue;
            }
            for (int r = r0; r < r1; r++) {
                float s[STRATA_DOT_TOKENS];
                multi((int64_t)w->n_in, s, wbase + (size_t)r * w->row_bytes, x, n_act);
                for (int i = 0; i < n_act; i++) y[i][r] = s[i];
            }
        }
    }
}

void strata_mm_run(struct strata_pool *pool, const struct strata_kernels *k,
                   const struct strata_mm_job *jobs, int n_jobs)
{
    STRATA_ASSERT(n_jobs >= 0 && n_jobs <= STRATA_MM_MAX_JOBS);
    if (n_jobs == 0) return;
    struct mm_batch b = {.k = k, .jobs = jobs};
    uint64_t rows = 0;
    for (int j = 0; j < n_jobs; j++) {
        STRATA_ASSERT(k->vec_dot[jobs[j].w.type] != NULL);
        if (j == 0 || !strata_mat_same(&jobs[j].w, &jobs[j - 1].w)) {
            b.unit_job[b.n_units++] = j;
            rows += jobs[j].w.n_out;
        }
    }
    b.unit_job[b.n_units] = n_jobs;
    // Enough chunks for balance (8 per thread), few enough that a chunk amortises its
    // scheduling; with many tokens a chunk of rows is reused across them from cache (64 rows of
    // Q4_K at n_in 2048 are 72 KiB, in L2 across token groups; 16, 32 and 128 measured the same
    // within noise on qwen3-30b-a3b-shaped prompts).
    const int nth = strata_pool_size(pool);
    uint64_t chunk = rows / ((uint64_t)nth * 8);
    if (chunk < 4) chunk = 4;
    if (chunk > 64) chunk = 64;
    b.chunk_rows = (int)chunk;
    int total = 0;
    for (int u = 0; u < b.n_units; u++) {
        b.unit_chunk_start[u] = total;
        total += (int)((jobs[b.unit_job[u]].w.n_out + chunk - 1) / chunk);
    }
    b.unit_chunk_start[b.n_units] = total;
    atomic_init(&b.next, 0);
    strata_pool_run(pool, mm_worker, &b);
}

size_t strata_act_row_bytes(uint32_t wtype, uint32_t n)
{
    const struct strata_type_traits *tr = strata_type_traits(wtype);
    return (size_t)strata_type_row_bytes(tr->vec_dot_type, n);
}

void strata_act_quantize(const struct strata_kernels *k, uint32_t wtype, const float *x, int n_rows,
                         uint32_t n, void *out)
{
    const uint32_t vdt = strata_type_traits(wtype)->vec_dot_type;
    const size_t rb = strata_type_row_bytes(vdt, n);
    strata_quantize_fn q = k->quantize[vdt];
    STRATA_ASSERT(q != NULL);
    for (int r = 0; r < n_rows; r++) q(x + (size_t)r * n, (char *)out + (size_t)r * rb, n);
}

// ggml's mean of squares: the float squares added in double in one chain, in order, the quotient
// rounded to float.
float strata_mean_sq_chain(const float *x, uint32_t n)
{
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    return (float)(sum / n);
}

// The same float, 8 chains at a time. The squares are non-negative, so any order of adding them in
// double lands within (n - 1) 2^-53 of their exact sum S, relatively: this order's sum and the
// single chain's are within 2 (n - 1) 2^-53 S of each other, and d = 4 n 2^-53 sum bounds that with
// room. Rounding (divide, then to float) keeps order, so where sum - d and sum + d give the same
// float the chain gives it too; else (about one row in 2^15, or a NaN or an infinity) the chain
// runs. Bit for bit the single chain's result, in about an eighth of its dependent adds.
float strata_mean_sq(const float *x, uint32_t n)
{
    double s[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += (double)(x[i + k] * x[i + k]);
    for (; i < n; i++) s[0] += (double)(x[i] * x[i]);
    return strata_mean_sq_decide(x, n, ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])));
}

float strata_mean_sq_decide(const float *x, uint32_t n, double sum)
{
    const double d = sum * (double)n * 0x1p-51;
    const float lo = (float)((sum - d) / n), hi = (float)((sum + d) / n);
    return lo == hi ? lo : strata_mean_sq_chain(x, n);
}

void strata_rmsnorm(float *y, const float *x, const float *w, uint32_t n, float eps)
{
    const float scale = 1.0f / sqrtf(strata_mean_sq(x, n) + eps);
    for (uint32_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void strata_rmsnorm_rows(float *y, size_t y_stride, const float *x, size_t x_stride, const float *w, int n_rows,
                         uint32_t n, float eps)
{
    for (int r = 0; r < n_rows; r++) strata_rmsnorm(y + (size_t)r * y_stride, x + (size_t)r * x_stride, w, n, eps);
}

void strata_rope_cache(float *cs, uint32_t n_rot, int pos, float freq_base)
{
    const float theta_scale = powf(freq_base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (uint32_t i = 0; i < n_rot / 2; i++) {
        cs[2 * i] = cosf(theta);
        cs[2 * i + 1] = sinf(theta);
        theta *= theta_scale;
    }
}

void strata_rope_apply(float *x, const float *cs, uint32_t n_rot)
{
    const uint32_t half = n_rot / 2;
    for (uint32_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = x[i], x1 = x[i + half];
        // fused as in llama.cpp's x86 build (the compiler contracts ggml's rotate_pairs this way)
        x[i] = fmaf(x0, c, -(x1 * s));
        x[i + half] = fmaf(x0, s, x1 * c);
    }
}
