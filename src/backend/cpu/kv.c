// The typed KV cache in blocks (layout in kv.h).
#include "backend/cpu/kv.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "quant/blocks.h"
#include "backend/cpu/kernels.h"
#include "util/log.h"

bool strata_kv_type_ok(uint32_t type)
{
    return type == STRATA_TYPE_F32 || type == STRATA_TYPE_F16 || type == STRATA_TYPE_BF16 || type == STRATA_TYPE_Q8_0;
}

int strata_kv_type_from_name(const char *name)
{
    static const struct {
        const char *name;
        uint32_t type;
    } names[] = {{"f32", STRATA_TYPE_F32}, {"f16", STRATA_TYPE_F16}, {"bf16", STRATA_TYPE_BF16}, {"q8_0", STRATA_TYPE_Q8_0}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(name, names[i].name) == 0) return (int)names[i].type;
    return -1;
}

// Bytes of the keys of one head in one block.
static size_t key_bytes(uint32_t type, uint32_t dk)
{
    const size_t groups = STRATA_KV_BLOCK / 16;
    if (type == STRATA_TYPE_Q8_0) return groups * (dk / 32) * (16 * 2 + 32 * 16);
    return groups * dk * 16 * (type == STRATA_TYPE_F32 ? 4 : 2);
}

int strata_kv_create(struct strata_kv_cache *kv, uint32_t n_layers, uint32_t n_head_kv, uint32_t dk, uint32_t dv,
                     uint32_t n_ctx, uint32_t k_type, uint32_t v_type, const struct strata_kernels *kernels)
{
    memset(kv, 0, sizeof *kv);
    if (!strata_kv_type_ok(k_type) || !strata_kv_type_ok(v_type)) {
        strata_log_error("kv_create: KV cache types %s / %s: strata has f32, f16, bf16 and q8_0", strata_type_name(k_type),
                         strata_type_name(v_type));
        return STRATA_EARG;
    }
    if ((k_type == STRATA_TYPE_Q8_0 && dk % 32) || (v_type == STRATA_TYPE_Q8_0 && dv % 32) || dk == 0 || dv == 0) {
        strata_log_error("kv_create: head dims %u / %u do not fit a %s / %s cache (q8_0 needs multiples of 32)", dk, dv,
                         strata_type_name(k_type), strata_type_name(v_type));
        return STRATA_EARG;
    }
    kv->k_type = k_type, kv->v_type = v_type;
    kv->n_layers = n_layers, kv->n_head_kv = n_head_kv, kv->dk = dk, kv->dv = dv;
    kv->n_ctx = n_ctx;
    kv->kernels = kernels;
    kv->k_head_bytes = key_bytes(k_type, dk);
    kv->v_head_bytes = (size_t)STRATA_KV_BLOCK * strata_type_row_bytes(v_type, dv);
    kv->layer_bytes = (size_t)n_head_kv * (kv->k_head_bytes + kv->v_head_bytes);
    kv->block_bytes = (size_t)n_layers * kv->layer_bytes;
    const size_t max_blocks = ((size_t)n_ctx + STRATA_KV_BLOCK - 1) / STRATA_KV_BLOCK;
    kv->blocks = calloc(max_blocks ? max_blocks : 1, sizeof *kv->blocks);
    kv->row_k = malloc((size_t)dk * 4);
    kv->row_v = malloc((size_t)dv * 4);
    if (!kv->blocks || !kv->row_k || !kv->row_v) {
        strata_kv_free(kv);
        return STRATA_ENOMEM;
    }
    return 0;
}

void strata_kv_free(struct strata_kv_cache *kv)
{
    for (uint32_t b = 0; kv->blocks && b < kv->n_blocks; b++) free(kv->blocks[b]);
    free(kv->blocks);
    free(kv->row_k);
    free(kv->row_v);
    memset(kv, 0, sizeof *kv);
}

// Zeroing blocks [b0, b1): each thread a contiguous share of every block's pages (their first
// touch: the page faults of a prompt's new blocks, 25 MB a block of 48 layers of F16).
struct zero_job {
    struct strata_kv_cache *kv;
    uint32_t b0, b1;
};

static void zero_worker(void *arg, int ith, int nth)
{
    const struct zero_job *z = arg;
    const size_t bytes = z->kv->block_bytes, pages = (bytes + 4095) / 4096;
    const size_t p0 = pages * (size_t)ith / (size_t)nth, p1 = pages * (size_t)(ith + 1) / (size_t)nth;
    const size_t o0 = p0 * 4096, o1 = p1 * 4096 < bytes ? p1 * 4096 : bytes;
    for (uint32_t b = z->b0; b < z->b1 && o0 < o1; b++) memset((char *)z->kv->blocks[b] + o0, 0, o1 - o0);
}

int strata_kv_reserve(struct strata_kv_cache *kv, uint32_t n_pos, struct strata_pool *pool)
{
    if (n_pos > kv->n_ctx) {
        strata_log_error("kv_reserve: %u positions do not fit the context of %u", n_pos, kv->n_ctx);
        return STRATA_EARG;
    }
    const uint32_t want = (n_pos + STRATA_KV_BLOCK - 1) / STRATA_KV_BLOCK, b0 = kv->n_blocks;
    while (kv->n_blocks < want) {
        void *p = NULL;
        if (posix_memalign(&p, 4096, kv->block_bytes)) {
            strata_log_error("kv_reserve: out of memory for KV block %u (%zu bytes)", kv->n_blocks, kv->block_bytes);
            struct zero_job z = {kv, b0, kv->n_blocks};  // the blocks kept are zeroed as promised
            zero_worker(&z, 0, 1);
            return STRATA_ENOMEM;
        }
        kv->blocks[kv->n_blocks++] = p;
    }
    // zeroed: keys of positions not written yet are read (times a zero weight) by the tiles
    struct zero_job z = {kv, b0, kv->n_blocks};
    if (pool && strata_pool_size(pool) > 1 && (size_t)(kv->n_blocks - b0) * kv->block_bytes >= ((size_t)1 << 20))
        strata_pool_run(pool, zero_worker, &z);
    else
        zero_worker(&z, 0, 1);
    return 0;
}

void strata_kv_store(struct strata_kv_cache *kv, uint32_t l, uint32_t pos, const float *k, const float *v)
{
    strata_kv_store_with(kv, l, pos, k, v, kv->row_k);
}

void strata_kv_store_with(struct strata_kv_cache *kv, uint32_t l, uint32_t pos, const float *k, const float *v,
                          void *row_k)
{
    const uint32_t b = pos / STRATA_KV_BLOCK, j = pos % STRATA_KV_BLOCK, g = j / 16, lane = j % 16;
    STRATA_ASSERT(b < kv->n_blocks && l < kv->n_layers);
    const uint32_t dk = kv->dk, dv = kv->dv;
    const size_t v_row = strata_type_row_bytes(kv->v_type, dv);
    for (uint32_t h = 0; h < kv->n_head_kv; h++) {
        uint8_t *keys = (uint8_t *)strata_kv_keys(kv, l, h, b);
        uint8_t *vals = (uint8_t *)strata_kv_values(kv, l, h, b);
        const float *kh = k + (size_t)h * dk, *vh = v + (size_t)h * dv;
        switch (kv->k_type) {
        case STRATA_TYPE_F32: {
            float *kt = (float *)keys + (size_t)g * dk * 16;
            for (uint32_t d = 0; d < dk; d++) kt[(size_t)d * 16 + lane] = kh[d];
            break;
        }
        case STRATA_TYPE_F16:
        case STRATA_TYPE_BF16: {
            kv->kernels->quantize[kv->k_type](kh, row_k, dk);
            const uint16_t *r = row_k;
            uint16_t *kt = (uint16_t *)keys + (size_t)g * dk * 16;
            for (uint32_t d = 0; d < dk; d++) kt[(size_t)d * 16 + lane] = r[d];
            break;
        }
        default: {  // Q8_0
            kv->kernels->quantize[STRATA_TYPE_Q8_0](kh, row_k, dk);
            const struct block_q8_0 *r = row_k;
            uint8_t *grp = keys + (size_t)g * (dk / 32) * (16 * 2 + 32 * 16);
            for (uint32_t c = 0; c < dk / 32; c++) {
                uint8_t *blk = grp + (size_t)c * (16 * 2 + 32 * 16);
                memcpy(blk + 2 * lane, &r[c].d, 2);
                for (int i = 0; i < 32; i++) blk[32 + i * 16 + lane] = (uint8_t)r[c].qs[i];
            }
            break;
        }
        }
        uint8_t *vr = vals + (size_t)j * v_row;
        if (kv->v_type == STRATA_TYPE_F32) memcpy(vr, vh, (size_t)dv * 4);
        else kv->kernels->quantize[kv->v_type](vh, vr, dv);
    }
}

size_t strata_kv_bytes(const struct strata_kv_cache *kv) { return (size_t)kv->n_blocks * kv->block_bytes; }

double strata_kv_bytes_per_token(const struct strata_kv_cache *kv)
{
    return (double)kv->block_bytes / STRATA_KV_BLOCK;
}
