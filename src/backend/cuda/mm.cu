// Matrix product dispatch: checks each product's shapes and formats, and sends it to the mat-vec
// (few tokens, routed experts of a decode step, fused SwiGLU, float weights) or the tensor-core
// GEMM (many tokens of one weight; routed experts grouped by expert). Both give the same bits.
#include <cuda_runtime.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/mm.cuh"

bool strata_cuda_type_supported(uint32_t type)
{
    return type == STRATA_TYPE_F32 || type == STRATA_TYPE_F16 || type == STRATA_TYPE_BF16 ||
           strata_cuda_mmq_supported(type);
}

void strata_cuda_set_mm_path(struct strata_cuda *cu, int path) { cu->mm_path = path; }

static int check_op(const char *what, uint32_t type, uint32_t n_in, uint32_t n_out, uint64_t row_bytes,
                    const struct strata_cuda_act *x)
{
    const struct strata_type_traits *tr = strata_type_traits(type);
    if (!tr || !strata_cuda_type_supported(type)) {
        strata_log_error("cuda: %s: no CUDA kernel for weights of type %s", what, strata_type_name(type));
        return STRATA_EUNSUP;
    }
    if (n_in == 0 || n_out == 0 || n_in % 32 && tr->block_size != 1 || row_bytes != strata_type_row_bytes(type, n_in)) {
        strata_log_error("cuda: %s: %s matrix [%u][%u] with rows of %llu bytes", what, tr->name, n_out, n_in,
                         (unsigned long long)row_bytes);
        return STRATA_EARG;
    }
    if (!x || x->vdt != tr->vec_dot_type || x->n_in != n_in) {
        strata_log_error("cuda: %s: %s weights of %u inputs need %s activations of %u, got %s of %u", what, tr->name,
                         n_in, strata_type_name(tr->vec_dot_type), n_in, x ? strata_type_name(x->vdt) : "none",
                         x ? x->n_in : 0);
        return STRATA_EARG;
    }
    return 0;
}

static struct mm_args to_args(const struct strata_cuda_mm *op)
{
    struct mm_args a;
    memset(&a, 0, sizeof a);
    a.w = op->w;
    a.w_table = op->w_table;
    a.w_ids = op->w_ids;
    a.w2 = op->w2;
    a.w2_table = op->w2_table;
    a.type = op->type;
    a.n_in = op->n_in;
    a.n_out = op->n_out;
    a.row_bytes = op->row_bytes;
    a.x = *op->x;
    a.x_rows = op->x_rows;
    a.x_div = op->x_div > 1 ? op->x_div : 1;
    a.n_tok = op->n_tok;
    a.y = op->y;
    a.y_stride = op->y_stride;
    a.y_rows = op->y_rows;
    a.add = op->add;
    a.bias = op->bias;
    a.n_seg = op->n_seg;
    for (int i = 0; i < op->n_seg; i++) {
        a.seg_first[i] = a.n_out;
        a.seg_w[i] = op->seg[i].w;
        a.seg_y[i] = op->seg[i].y;
        a.seg_y_stride[i] = op->seg[i].y_stride;
        a.n_out += op->seg[i].n_out;
    }
    return a;
}

int strata_cuda_mm_run(struct strata_cuda *cu, const struct strata_cuda_mm *ops, int n_ops)
{
    for (int i = 0; i < n_ops; i++) {
        const struct strata_cuda_mm *op = &ops[i];
        if (op->n_tok <= 0) continue;
        int rc = check_op("mm", op->type, op->n_in, op->n_out, op->row_bytes, op->x);
        if (rc) return rc;
        if (!op->w && !(op->w_table && op->w_ids)) {
            strata_log_error("cuda: mm: no weights");
            return STRATA_EARG;
        }
        if (op->n_seg < 0 || op->n_seg > 2 ||
            (op->n_seg && (op->w_table || op->w2 || op->y_rows || op->add || op->bias || op->n_tok > STRATA_CUDA_MV_MAX_TOK))) {
            strata_log_error("cuda: mm: %d stacked matrices with a table, SwiGLU, output rows, add or bias", op->n_seg);
            return STRATA_EARG;
        }
        const struct mm_args a = to_args(op);
        const bool gemm_ok = strata_cuda_mmq_supported(op->type) && !op->w_table && !op->w2 && !op->n_seg;
        const bool gemm = gemm_ok && (cu->mm_path == 2 || (cu->mm_path == 0 && op->n_tok > STRATA_CUDA_MV_MAX_TOK));
        rc = gemm ? strata_cuda_mmq_launch(cu, &a, NULL, 0) : strata_cuda_mv_launch(cu, &a);
        if (rc) return rc;
    }
    return 0;
}

int strata_cuda_moe_mm_run(struct strata_cuda *cu, const struct strata_cuda_moe_groups *g,
                           const struct strata_cuda_moe_mm *ops, int n_ops)
{
    for (int i = 0; i < n_ops; i++) {
        const struct strata_cuda_moe_mm *op = &ops[i];
        int rc = check_op("moe_mm", op->type, op->n_in, op->n_out, op->row_bytes, op->x);
        if (rc) return rc;
        struct strata_cuda_mm m;
        memset(&m, 0, sizeof m);
        m.w_table = op->w_table;
        m.w_ids = g->ids;
        m.type = op->type;
        m.n_in = op->n_in;
        m.n_out = op->n_out;
        m.row_bytes = op->row_bytes;
        m.x = op->x;
        m.x_div = op->x_div;
        m.n_tok = g->n_pairs;
        m.y = op->y;
        m.y_stride = op->y_stride;
        struct mm_args a = to_args(&m);
        if (strata_cuda_mmq_supported(op->type) && cu->mm_path != 1) {
            const struct moe_tiles mt = {g->first, g->sorted, g->tiles, g->n_tiles, a.x_div, 0};
            rc = strata_cuda_mmq_launch(cu, &a, &mt, g->max_tiles);
        } else {
            rc = strata_cuda_mv_launch(cu, &a);  // one pair per block column: float experts
        }
        if (rc) return rc;
    }
    return 0;
}

int strata_cuda_moe_down(struct strata_cuda *cu, const struct strata_cuda_mm *op, int n_tok, int K,
                         const float *weights, float *x, const float *shared, const float *shared_gate)
{
    if (n_tok <= 0) return 0;
    int rc = check_op("moe_down", op->type, op->n_in, op->n_out, op->row_bytes, op->x);
    if (rc) return rc;
    if (!op->w_table || !op->w_ids || op->n_tok != n_tok * K) {
        strata_log_error("cuda: moe_down: needs the slot table, the expert ids and %d x %d token rows", n_tok, K);
        return STRATA_EARG;
    }
    const struct mm_args a = to_args(op);
    return strata_cuda_mv_moe_down_launch(cu, &a, n_tok, K, weights, x, shared, shared_gate);
}
