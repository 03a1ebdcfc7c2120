// Activation rounding (F32 rows to Q8_0 / Q8_1 / Q8_K / F16 / BF16, bit-identical to the CPU
// reference in src/quant/ref*.c, which is ggml's x86 rounding), dequantisation of weight rows
// (embedding lookups; the same float formula per type as the CPU reference), and the IQ tables.
#include <cuda_runtime.h>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/round.cuh"

int strata_cuda_tables_quant(void) { return upload_tables(); }

// ---- activation layout ----------------------------------------------------------------------------

static uint32_t act_block(uint32_t vdt)
{
    switch (vdt) {
    case STRATA_TYPE_Q8_0:
    case STRATA_TYPE_Q8_1: return 32;
    case STRATA_TYPE_Q8_K: return 256;
    case STRATA_TYPE_F16:
    case STRATA_TYPE_BF16:
    case STRATA_TYPE_F32: return 1;
    default: return 0;
    }
}

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

size_t strata_cuda_act_bytes(uint32_t vdt, uint32_t n_in, uint32_t n_rows)
{
    const uint32_t bs = act_block(vdt);
    if (bs == 0 || n_in % bs) return 0;
    const size_t r = n_rows;
    switch (vdt) {
    case STRATA_TYPE_Q8_0: return align256(r * n_in) + align256(r * (n_in / 32) * 4);
    case STRATA_TYPE_Q8_1: return align256(r * n_in) + 2 * align256(r * (n_in / 32) * 4);
    case STRATA_TYPE_Q8_K: return align256(r * n_in) + align256(r * (n_in / 256) * 4) + align256(r * (n_in / 16) * 2);
    case STRATA_TYPE_F16:
    case STRATA_TYPE_BF16: return align256(r * n_in * 2);
    default: return 0;  // F32 needs no buffer
    }
}

void strata_cuda_act_init(struct strata_cuda_act *a, uint32_t vdt, uint32_t n_in, uint32_t n_rows, void *buf)
{
    memset(a, 0, sizeof *a);
    a->vdt = vdt;
    a->n_in = n_in;
    a->n_rows = n_rows;
    char *p = (char *)buf;
    const size_t r = n_rows;
    switch (vdt) {
    case STRATA_TYPE_Q8_0:
    case STRATA_TYPE_Q8_1:
    case STRATA_TYPE_Q8_K: {
        const uint32_t bs = act_block(vdt);
        a->qs = (int8_t *)p;
        p += align256(r * n_in);
        a->d = (float *)p;
        p += align256(r * (n_in / bs) * 4);
        if (vdt == STRATA_TYPE_Q8_1) a->s = (float *)p;
        if (vdt == STRATA_TYPE_Q8_K) a->bsums = (int16_t *)p;
        break;
    }
    case STRATA_TYPE_F16:
    case STRATA_TYPE_BF16: a->h = (uint16_t *)p; break;
    default: break;
    }
}

__global__ void k_quantize(const float *x, size_t x_stride, struct strata_cuda_act a)
{
    pdl_enter();
    quantize_row(x + (size_t)blockIdx.x * x_stride, a, blockIdx.x);
}

int strata_cuda_quantize(struct strata_cuda *cu, const float *x, size_t x_stride, int n_rows, struct strata_cuda_act *a)
{
    if (n_rows <= 0) return 0;
    if ((uint32_t)n_rows > a->n_rows || act_block(a->vdt) == 0 || a->n_in % act_block(a->vdt)) {
        strata_log_error("cuda: quantize: %d rows of %u into a %s buffer of %u rows", n_rows, a->n_in,
                         strata_type_name(a->vdt), a->n_rows);
        return STRATA_EARG;
    }
    if (a->vdt == STRATA_TYPE_F32) {
        a->f = x;
        a->f_stride = x_stride;
        return 0;
    }
    CU_LAUNCH("k_quantize", k_quantize, n_rows, 256, 0, x, x_stride, *a);
    return 0;
}

// ---- dequantisation -----------------------------------------------------------------------------

template <int T>
__global__ void k_get_rows_q(const uint8_t *w, uint64_t row_bytes, uint32_t n_in, const int32_t *rows, float *out)
{
    pdl_enter();
    using Q = qtype<T>;
    const uint8_t *row = w + (uint64_t)rows[blockIdx.x] * row_bytes;
    float *o = out + (size_t)blockIdx.x * n_in;
    for (uint32_t U = threadIdx.x; U < n_in / 32; U += blockDim.x) {
        float v[32];
        dequant_unit<T>(row + (size_t)(U / Q::UPB) * Q::TS, (int)(U % Q::UPB), v);
        for (int i = 0; i < 32; i++) o[32 * U + i] = v[i];
    }
}

__global__ void k_get_rows_f(const uint8_t *w, uint32_t type, uint64_t row_bytes, uint32_t n_in, const int32_t *rows,
                             float *out)
{
    pdl_enter();
    const uint8_t *row = w + (uint64_t)rows[blockIdx.x] * row_bytes;
    float *o = out + (size_t)blockIdx.x * n_in;
    for (uint32_t i = threadIdx.x; i < n_in; i += blockDim.x) {
        if (type == STRATA_TYPE_F32) o[i] = ((const float *)row)[i];
        else if (type == STRATA_TYPE_F16) o[i] = h2f(((const uint16_t *)row)[i]);
        else o[i] = __uint_as_float((uint32_t)((const uint16_t *)row)[i] << 16);
    }
}

int strata_cuda_get_rows_dev(struct strata_cuda *cu, const void *w, uint32_t type, uint32_t n_in, uint64_t row_bytes,
                             const int32_t *rows, int n, float *out)
{
    if (n <= 0) return 0;
    const uint8_t *wb = (const uint8_t *)w;
    switch (type) {
#define CASE(T)                                                                                   \
    case STRATA_TYPE_##T:                                                                         \
        CU_LAUNCH("k_get_rows_q", (k_get_rows_q<STRATA_TYPE_##T>), n, 128, 0, wb, row_bytes, n_in, rows, out); \
        break;
        STRATA_CUDA_QTYPES(CASE)
#undef CASE
    case STRATA_TYPE_F32:
    case STRATA_TYPE_F16:
    case STRATA_TYPE_BF16: CU_LAUNCH("k_get_rows_f", k_get_rows_f, n, 256, 0, wb, type, row_bytes, n_in, rows, out); break;
    default:
        strata_log_error("cuda: no CUDA kernel for rows of type %s", strata_type_name(type));
        return STRATA_EUNSUP;
    }
    return 0;
}

int strata_cuda_get_rows(struct strata_cuda *cu, const void *w, uint32_t type, uint32_t n_in, uint64_t row_bytes,
                         const int32_t *rows, int n, float *out)
{
    // the row list travels as kernel-visible memory: a small device buffer kept by the context
    if (n <= 0) return 0;
    if ((size_t)n > cu->rows_cap) {
        if (cu->rows_dev) strata_cuda_free(cu, cu->rows_dev);
        cu->rows_cap = (size_t)n < 4096 ? 4096 : (size_t)n;
        cu->rows_dev = (int32_t *)strata_cuda_alloc(cu, cu->rows_cap * sizeof(int32_t), "row indices");
        if (!cu->rows_dev) {
            cu->rows_cap = 0;
            return STRATA_ENOMEM;
        }
    }
    const int rc = strata_cuda_copy_async(cu, cu->rows_dev, rows, (size_t)n * sizeof(int32_t));
    if (rc) return rc;
    return strata_cuda_get_rows_dev(cu, w, type, n_in, row_bytes, cu->rows_dev, n, out);
}
