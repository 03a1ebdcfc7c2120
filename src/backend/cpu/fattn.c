// Tiled attention over the typed KV cache (fattn.h): the driver and the scalar kernels.
//
// Work. The query rows of a call are the (token, head) pairs of each KV head, n_tok * group of
// them, cut into tiles of FATTN_MAX_ROWS. A unit of up to FATTN_MAX_TILES consecutive tiles of
// one KV head walks the segments of its context: converts a segment's keys and values to float
// where the cache is not F32 (once for all its tiles: at long contexts that conversion streams
// the cache from memory, and did so once per tile), then per tile computes the scores, the
// softmax and the weighted values of all its rows at once and folds them into each row's
// running state. When there are too few tiles to keep the threads busy (decode: one token) and
// the context has several segments, the segments of a tile are spread over the threads instead,
// each writing its partial (m, l, o) per row, and a second pass folds them in segment order;
// both ways compute the same partials and fold them in the same order, whatever the unit.
#include "backend/cpu/fattn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/amx.h"
#include "backend/cpu/fattn_amx.h"
#include "backend/cpu/fattn_impl.h"
#include "util/log.h"

FATTN_PORTABLE_TABLE(scalar)

// ---- context ----------------------------------------------------------------------------------

// Tiles of one KV head that share a segment's converted keys and values. Four keep a unit's
// queries and states (4 x 65 KB) beside the converted segment (256 KB) within a megabyte.
#define FATTN_MAX_TILES 4

struct thread_scratch {
    float *q;        // [FATTN_MAX_TILES][FATTN_MAX_ROWS][dk] the unit's query rows
    float *s;        // [FATTN_MAX_ROWS][B] scores, then weights
    float *o;        // [FATTN_MAX_ROWS][dv] the segment's weighted values
    float *state;    // [FATTN_MAX_TILES][FATTN_MAX_ROWS][dv + 2] running (M, L, O) per row
    float *kt;       // [B][dk] keys converted to float
    float *v;        // [B][dv] values converted to float
    float *m, *l;    // [FATTN_MAX_ROWS]
    int *n_valid;    // [FATTN_MAX_ROWS]
    uint16_t *qh, *ql;  // AMX: [FATTN_MAX_TILES][FATTN_MAX_ROWS][dk] the unit's queries as bf16 hi, lo
    uint16_t *kh, *kl;  // AMX: [dk / 2][B][2] the segment's keys as bf16 hi, lo
    uint16_t *vh, *vl;  // AMX: [B / 2][dv][2] its values
    uint16_t *ph, *pl;  // AMX: [FATTN_MAX_ROWS][B] a tile's softmax weights
};

struct strata_fattn_ctx {
    const struct fattn_kernels *k;
    const struct strata_kernels *qk;   // dequantisation of the cache types
    bool amx;                          // F16 caches on AMX bf16 tiles (strata_fattn_amx)
    int n_threads;
    uint32_t dk, dv, group;
    struct thread_scratch *th;
    float *partials;                   // split: [tile][segment][row][dv + 2]
    size_t partials_floats;
    size_t scratch_bytes;
};

int strata_fattn_create(struct strata_fattn_ctx **out, int n_threads, enum strata_isa isa, uint32_t dk, uint32_t dv,
                        uint32_t group)
{
    *out = NULL;
    const struct strata_kernels *qk = strata_kernels_for(isa);
    if (n_threads < 1 || !qk || dk == 0 || dv == 0 || group == 0) {
        strata_log_error("fattn_create: %d threads, isa %s, head dims %u/%u, group %u", n_threads, strata_isa_name(isa), dk,
                         dv, group);
        return STRATA_EARG;
    }
    struct strata_fattn_ctx *c = calloc(1, sizeof *c);
    if (!c) return STRATA_ENOMEM;
    c->k = isa == STRATA_ISA_AVX512 ? &fattn_kernels_avx512 : isa == STRATA_ISA_AVX2 ? &fattn_kernels_avx2 : &fattn_kernels_scalar;
    c->qk = qk;
    c->n_threads = n_threads;
    c->dk = dk, c->dv = dv, c->group = group;
    c->th = calloc((size_t)n_threads, sizeof *c->th);
    if (!c->th) {
        free(c);
        return STRATA_ENOMEM;
    }
    c->amx = isa == STRATA_ISA_AVX512 && dk % 32 == 0 && dv % 16 == 0 && strata_amx_bf16_runs();
    const size_t R = FATTN_MAX_ROWS, T = FATTN_MAX_TILES, B = STRATA_KV_BLOCK;
    // AMX: the split queries, keys, values and weights, two bf16 a float
    const size_t amx_floats = c->amx ? T * R * dk + B * dk + B * dv + R * B : 0;
    const size_t floats = T * R * dk + R * B + R * dv + T * R * (dv + 2) + B * dk + B * dv + 2 * R + amx_floats;
    for (int i = 0; i < n_threads; i++) {
        struct thread_scratch *t = &c->th[i];
        void *p = NULL;
        if (posix_memalign(&p, 64, floats * sizeof(float) + R * sizeof(int))) {
            strata_fattn_free(c);
            return STRATA_ENOMEM;
        }
        memset(p, 0, floats * sizeof(float) + R * sizeof(int));
        float *f = p;
        t->q = f, f += T * R * dk;
        t->s = f, f += R * B;
        t->o = f, f += R * dv;
        t->state = f, f += T * R * (dv + 2);
        t->kt = f, f += B * dk;
        t->v = f, f += B * dv;
        t->m = f, f += R;
        t->l = f, f += R;
        if (c->amx) {
            t->qh = (uint16_t *)f, t->ql = t->qh + T * R * dk, f += T * R * dk;
            t->kh = (uint16_t *)f, t->kl = t->kh + B * dk, f += B * dk;
            t->vh = (uint16_t *)f, t->vl = t->vh + B * dv, f += B * dv;
            t->ph = (uint16_t *)f, t->pl = t->ph + R * B, f += R * B;
        }
        t->n_valid = (int *)f;
        c->scratch_bytes += floats * sizeof(float) + R * sizeof(int);
    }
    *out = c;
    return 0;
}

void strata_fattn_free(struct strata_fattn_ctx *c)
{
    if (!c) return;
    for (int i = 0; c->th && i < c->n_threads; i++) free(c->th[i].q);
    free(c->th);
    free(c->partials);
    free(c);
}

bool strata_fattn_amx(const struct strata_fattn_ctx *c, uint32_t k_type, uint32_t v_type)
{
    return c->amx && (k_type == STRATA_TYPE_F16 || v_type == STRATA_TYPE_F16);
}

size_t strata_fattn_scratch_bytes(const struct strata_fattn_ctx *c)
{
    return c->scratch_bytes + c->partials_floats * sizeof(float);
}

// ---- one segment --------------------------------------------------------------------------------

struct call {
    struct strata_fattn_ctx *c;
    const struct strata_fattn *a;
    int n_rows;          // query rows per KV head: n_tok * group
    int tiles_per_head;  // ceil(n_rows / FATTN_MAX_ROWS)
    int tile_rows;       // rows of a full tile: min(n_rows, FATTN_MAX_ROWS)
    int tiles_per_unit;  // tiles of one KV head that tile_worker takes together, 1..FATTN_MAX_TILES
    int max_segs;        // segments of the longest context in the call
    bool split;
    bool amx;            // the scores on AMX tiles (an F16 key cache on a context that has them)
    bool amx_pv;         // the weighted values on AMX tiles (an F16 value cache)
    atomic_int next;
};

// Row i (of one KV head's rows): token i / group, query head kvh * group + i % group.
static int row_token(const struct call *cl, int i) { return i / (int)cl->c->group; }

// Rows of tile k of a KV head (its first row is k * FATTN_MAX_ROWS).
static int tile_rows(const struct call *cl, int k)
{
    const int left = cl->n_rows - k * FATTN_MAX_ROWS;
    return left < FATTN_MAX_ROWS ? left : FATTN_MAX_ROWS;
}

// Rows [i0, i0 + rows) of KV head kvh: their query rows into q; returns the largest position.
static int load_queries(const struct call *cl, uint32_t kvh, int i0, int rows, float *q)
{
    const struct strata_fattn *a = cl->a;
    const uint32_t dk = cl->c->dk, G = cl->c->group;
    int max_pos = 0;
    for (int r = 0; r < rows; r++) {
        const int i = i0 + r, tok = row_token(cl, i);
        const uint32_t head = kvh * G + (uint32_t)(i % (int)G);
        memcpy(q + (size_t)r * dk, a->q + ((size_t)tok * a->n_head + head) * dk, dk * sizeof(float));
        if (a->pos[tok] > max_pos) max_pos = a->pos[tok];
    }
    return max_pos;
}

// Keys of segment seg that each of the rows [i0, i0 + rows) sees: n_valid[r] (0 for rows whose
// context ends before the segment). Returns the largest.
static int segment_keys(const struct call *cl, int i0, int rows, int seg, int *n_valid)
{
    const int B = STRATA_KV_BLOCK, base = seg * B;
    int nk = 0;
    for (int r = 0; r < rows; r++) {
        const int p = cl->a->pos[row_token(cl, i0 + r)] + 1 - base;
        n_valid[r] = p <= 0 ? 0 : p > B ? B : p;
        if (n_valid[r] > nk) nk = n_valid[r];
    }
    return nk;
}

// Keys [0, nk) of segment seg of KV head kvh in float ([groups][dk][16]) and their values
// ([nk][dv]): the cache's own (F32) or converted into t->kt and t->v.
static void segment_floats(const struct call *cl, uint32_t kvh, int seg, int nk, struct thread_scratch *t,
                           const float **kt, const float **v)
{
    const struct strata_kv_cache *kv = cl->a->kv;
    const struct strata_fattn_ctx *c = cl->c;
    const int groups = (nk + 15) / 16;
    const uint8_t *keys = strata_kv_keys(kv, cl->a->layer, kvh, (uint32_t)seg);
    const uint8_t *vals = strata_kv_values(kv, cl->a->layer, kvh, (uint32_t)seg);
    *kt = (const float *)keys, *v = (const float *)vals;
    if (cl->amx) {
        fattn_amx_keys_f16(keys, groups, c->dk, t->kh, t->kl);
        *kt = NULL;
    } else if (kv->k_type == STRATA_TYPE_Q8_0) {
        c->k->keys_q8_0(keys, groups, c->dk, t->kt);
        *kt = t->kt;
    } else if (kv->k_type != STRATA_TYPE_F32) {
        c->qk->dequant[kv->k_type](keys, t->kt, (int64_t)groups * 16 * c->dk);
        *kt = t->kt;
    }
    if (cl->amx_pv) {
        fattn_amx_values_f16(vals, nk, c->dv, t->vh, t->vl);
        *v = NULL;
    } else if (kv->v_type != STRATA_TYPE_F32) {
        c->qk->dequant[kv->v_type](vals, t->v, (int64_t)nk * c->dv);
        *v = t->v;
    }
}

// Asks for part `part` of `parts` of the bytes [p, p + bytes) to come into the cache (L2). A unit
// asks for the next segment's keys and values a part before each of its tiles, so that their
// conversion does not wait on memory (it did, about 5% of the attention at 8,192 positions).
static void prefetch_part(const uint8_t *p, size_t bytes, int part, int parts)
{
    const size_t b0 = bytes * (size_t)part / (size_t)parts, b1 = bytes * (size_t)(part + 1) / (size_t)parts;
    for (size_t b = b0 & ~(size_t)63; b < b1; b += 64) __builtin_prefetch(p + b, 0, 2);
}

// The partial (m, l, o) of a segment for the query rows of tile k of the unit (q; AMX: t->qh, t->ql
// at tile k), row r seeing n_valid[r] of the nk keys kt (AMX: t->kh, t->kl) and values v: into
// t->m, t->l, t->o.
static void segment_rows(const struct call *cl, int k, const float *q, int rows, const int *n_valid, int nk,
                         const float *kt, const float *v, struct thread_scratch *t)
{
    const struct strata_fattn_ctx *c = cl->c;
    const size_t B = STRATA_KV_BLOCK, at = (size_t)k * FATTN_MAX_ROWS * c->dk;
    if (cl->amx)
        fattn_amx_scores(t->qh + at, t->ql + at, rows, t->kh, t->kl, (nk + 15) / 16, c->dk, cl->a->scale, t->s, B);
    else
        c->k->scores(q, rows, kt, (nk + 15) / 16, c->dk, cl->a->scale, t->s, B);
    c->k->softmax(t->s, B, rows, n_valid, nk, t->m, t->l);
    if (cl->amx_pv) {
        fattn_amx_split_weights(t->s, B, rows, nk, t->ph, t->pl);
        fattn_amx_pv(t->ph, t->pl, rows, nk, t->vh, t->vl, c->dv, t->o);
    } else {
        c->k->pv(t->s, B, rows, nk, v, c->dv, t->o);
    }
}

// The output row of row r (state: M, L, O[dv]).
static void finish_row(const struct call *cl, uint32_t kvh, int i, const float *state)
{
    const struct strata_fattn *a = cl->a;
    const uint32_t dv = cl->c->dv, G = cl->c->group;
    const int tok = row_token(cl, i);
    float *out = a->out + ((size_t)tok * a->n_head + kvh * G + (uint32_t)(i % (int)G)) * dv;
    const float inv = 1.0f / state[1];
    for (uint32_t e = 0; e < dv; e++) out[e] = state[2 + e] * inv;
}

// ---- the two ways of splitting the work -----------------------------------------------------------

// A unit (tiles_per_unit consecutive tiles of one KV head) walks all its segments, converting each
// once for its tiles.
static void tile_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct call *cl = arg;
    const struct strata_fattn_ctx *c = cl->c;
    struct thread_scratch *t = &c->th[ith];
    const size_t R = FATTN_MAX_ROWS, dk = c->dk, dv = c->dv;
    const int B = STRATA_KV_BLOCK, per_unit = cl->tiles_per_unit;
    const struct strata_kv_cache *kv = cl->a->kv;
    const int units_per_head = (cl->tiles_per_head + per_unit - 1) / per_unit;
    const int n_units = (int)kv->n_head_kv * units_per_head;
    int u0, u1;
    while (strata_chunk_next(&cl->next, n_units, 1, &u0, &u1)) {
        const uint32_t kvh = (uint32_t)(u0 / units_per_head);
        const int tile0 = (u0 % units_per_head) * per_unit;
        const int n_tiles = cl->tiles_per_head - tile0 < per_unit ? cl->tiles_per_head - tile0 : per_unit;
        int max_pos[FATTN_MAX_TILES], unit_max = 0;
        for (int k = 0; k < n_tiles; k++) {
            max_pos[k] = load_queries(cl, kvh, (tile0 + k) * FATTN_MAX_ROWS, tile_rows(cl, tile0 + k), t->q + k * R * dk);
            if (cl->amx)
                fattn_amx_split_queries(t->q + k * R * dk, tile_rows(cl, tile0 + k), (uint32_t)dk, t->qh + k * R * dk,
                                        t->ql + k * R * dk);
            if (max_pos[k] > unit_max) unit_max = max_pos[k];
        }
        for (int seg = 0; seg <= unit_max / B; seg++) {
            const float *kt, *v;
            segment_floats(cl, kvh, seg, unit_max + 1 - seg * B < B ? unit_max + 1 - seg * B : B, t, &kt, &v);
            const uint8_t *next = seg < unit_max / B ? strata_kv_keys(kv, cl->a->layer, kvh, (uint32_t)seg + 1) : NULL;
            for (int k = 0; k < n_tiles; k++) {
                if (next) prefetch_part(next, kv->k_head_bytes + kv->v_head_bytes, k, n_tiles);
                if (seg > max_pos[k] / B) continue;
                const int i0 = (tile0 + k) * FATTN_MAX_ROWS, rows = tile_rows(cl, tile0 + k);
                const int nk = segment_keys(cl, i0, rows, seg, t->n_valid);
                segment_rows(cl, k, t->q + k * R * dk, rows, t->n_valid, nk, kt, v, t);
                for (int r = 0; r < rows; r++) {
                    if (t->n_valid[r] == 0) continue;
                    float *st = t->state + (k * R + (size_t)r) * (dv + 2);
                    c->k->fold(&st[0], &st[1], st + 2, t->m[r], t->l[r], t->o + r * dv, (uint32_t)dv, seg == 0);
                }
            }
        }
        for (int k = 0; k < n_tiles; k++)
            for (int r = 0; r < tile_rows(cl, tile0 + k); r++)
                finish_row(cl, kvh, (tile0 + k) * FATTN_MAX_ROWS + r, t->state + (k * R + (size_t)r) * (dv + 2));
    }
}

static float *partial_at(const struct call *cl, int tile, int seg, int r)
{
    const size_t per_row = cl->c->dv + 2;
    return cl->c->partials + (((size_t)tile * cl->max_segs + (size_t)seg) * cl->tile_rows + (size_t)r) * per_row;
}

// One (tile, segment) per unit: the partials.
static void split_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct call *cl = arg;
    const struct strata_fattn_ctx *c = cl->c;
    struct thread_scratch *t = &c->th[ith];
    const uint32_t dv = c->dv;
    const int n_tiles = (int)cl->a->kv->n_head_kv * cl->tiles_per_head;
    int u0, u1;
    while (strata_chunk_next(&cl->next, n_tiles * cl->max_segs, 1, &u0, &u1)) {
        const int tile = u0 / cl->max_segs, seg = u0 % cl->max_segs;
        const uint32_t kvh = (uint32_t)(tile / cl->tiles_per_head);
        const int i0 = (tile % cl->tiles_per_head) * FATTN_MAX_ROWS, rows = tile_rows(cl, tile % cl->tiles_per_head);
        const int max_pos = load_queries(cl, kvh, i0, rows, t->q);
        if (seg > max_pos / STRATA_KV_BLOCK) continue;
        if (cl->amx) fattn_amx_split_queries(t->q, rows, c->dk, t->qh, t->ql);
        const int nk = segment_keys(cl, i0, rows, seg, t->n_valid);
        const float *kt, *v;
        segment_floats(cl, kvh, seg, nk, t, &kt, &v);
        segment_rows(cl, 0, t->q, rows, t->n_valid, nk, kt, v, t);
        for (int r = 0; r < rows; r++) {
            float *p = partial_at(cl, tile, seg, r);
            p[0] = t->m[r], p[1] = t->l[r];
            if (t->n_valid[r]) memcpy(p + 2, t->o + (size_t)r * dv, dv * sizeof(float));
        }
    }
}

// One row per unit: fold its segments' partials in order.
static void fold_worker(void *arg, int ith, int nth)
{
    (void)nth;
    struct call *cl = arg;
    const struct strata_fattn_ctx *c = cl->c;
    struct thread_scratch *t = &c->th[ith];
    const uint32_t dv = c->dv;
    const int n_units = (int)cl->a->kv->n_head_kv * cl->n_rows;
    int u0, u1;
    while (strata_chunk_next(&cl->next, n_units, 1, &u0, &u1)) {
        const uint32_t kvh = (uint32_t)(u0 / cl->n_rows);
        const int i = u0 % cl->n_rows, tile = (int)kvh * cl->tiles_per_head + i / FATTN_MAX_ROWS, r = i % FATTN_MAX_ROWS;
        const int n_seg = cl->a->pos[row_token(cl, i)] / STRATA_KV_BLOCK + 1;
        float *st = t->state;
        for (int seg = 0; seg < n_seg; seg++) {
            const float *p = partial_at(cl, tile, seg, r);
            c->k->fold(&st[0], &st[1], st + 2, p[0], p[1], p + 2, dv, seg == 0);
        }
        finish_row(cl, kvh, i, st);
    }
}

int strata_fattn_run(struct strata_fattn_ctx *c, struct strata_pool *pool, const struct strata_fattn *a)
{
    const struct strata_kv_cache *kv = a->kv;
    STRATA_ASSERT(kv->dk == c->dk && kv->dv == c->dv && a->n_head == kv->n_head_kv * c->group);
    STRATA_ASSERT(strata_pool_size(pool) <= c->n_threads);
    if (a->n_tok <= 0) return 0;
    struct call cl = {.c = c, .a = a, .n_rows = a->n_tok * (int)c->group, .amx = c->amx && kv->k_type == STRATA_TYPE_F16,
                      .amx_pv = c->amx && kv->v_type == STRATA_TYPE_F16};
    cl.tiles_per_head = (cl.n_rows + FATTN_MAX_ROWS - 1) / FATTN_MAX_ROWS;
    cl.tile_rows = cl.n_rows < FATTN_MAX_ROWS ? cl.n_rows : FATTN_MAX_ROWS;
    int max_pos = 0;
    for (int t = 0; t < a->n_tok; t++) {
        STRATA_ASSERT(a->pos[t] >= 0 && (uint32_t)a->pos[t] < kv->n_blocks * STRATA_KV_BLOCK);
        if (a->pos[t] > max_pos) max_pos = a->pos[t];
    }
    cl.max_segs = max_pos / STRATA_KV_BLOCK + 1;
    const int n_tiles = (int)kv->n_head_kv * cl.tiles_per_head;
    cl.split = cl.max_segs > 1 && n_tiles < 2 * strata_pool_size(pool);
    if (!cl.split) {
        // The tiles of a call cost about the same, so the busiest thread does ceil(units / threads)
        // units of tiles_per_unit tiles: the most tiles a unit that keep that at its least (16
        // threads, 160 tiles: 2 a unit, 10 tiles each, where 4 a unit would give some 12).
        const int threads = strata_pool_size(pool);
        int busiest = 0;
        for (int per_unit = 1; per_unit <= FATTN_MAX_TILES; per_unit++) {
            const int units = (int)kv->n_head_kv * ((cl.tiles_per_head + per_unit - 1) / per_unit);
            const int tiles = (units + threads - 1) / threads * per_unit;
            if (per_unit == 1 || tiles <= busiest) cl.tiles_per_unit = per_unit, busiest = tiles;
        }
        atomic_init(&cl.next, 0);
        strata_pool_run(pool, tile_worker, &cl);
        return 0;
    }
    const size_t want = (size_t)n_tiles * cl.max_segs * cl.tile_rows * (c->dv + 2);
    if (want > c->partials_floats) {
        void *p = NULL;
        if (posix_memalign(&p, 64, want * sizeof(float))) {
            strata_log_error("fattn_run: out of memory for %zu bytes of partials", want * sizeof(float));
            return STRATA_ENOMEM;
        }
        free(c->partials);
        c->partials = p;
        c->partials_floats = want;
    }
    atomic_init(&cl.next, 0);
    strata_pool_run(pool, split_worker, &cl);
    atomic_init(&cl.next, 0);
    strata_pool_run(pool, fold_worker, &cl);
    return 0;
}
