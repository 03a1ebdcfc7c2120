// Matrix products of many tokens (prompts) on the tensor cores: int8 MMA (mma.sync m16n8k32, or
// m16n8k16 where a unit's halves have their own scales) on the exact integer values of the weight
// blocks against the int8 activation quants, grouped per expert for routed experts.
//
// Tile: 64 weight rows x 64 token rows per block of 4 warps (each 32 x 32), K in steps of 256
// elements (8 units). Per step the block decodes its weight rows' units into int8 in shared
// memory with the same decoders as the mat-vec (common.cuh), stages the activation quants, and
// each warp runs its MMAs one unit at a time: the MMA gives the unit's exact integer dot per
// (row, token); 32-element blocks turn it into their float term at once, 256-element blocks
// weigh it with the unit's integer scale and take one term per block at the end of the step.
// The terms are added in block order, as in mv.cu, so every output is bit-identical to the
// mat-vec's. Routed experts: a tile list (expert, first pair) built on the device
// (strata_cuda_moe_group) maps each block to 64 pairs of one expert.
#include <cuda_runtime.h>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/mm.cuh"

int strata_cuda_tables_mmq(void) { return upload_tables(); }

#define BM 64
#define BN 64
#define KS 256            // elements per step
#define LDS_ROW (KS + 16) // bytes per row of the int8 tiles (conflict-free fragment loads)
#define MMQ_STAGED 1      // opts: weights through staged<T> where aligned

struct mmq_smem {
    int8_t a[BM][LDS_ROW];
    int8_t b[BN][LDS_ROW];
    int sc[BM][16];       // unit scales, per half
    float d[BM][8];       // block factors: per unit for 32-element blocks, [.][0] for 256
    float dmin[BM][8];
    float da[BN][8];      // activation block scales, same indexing
    float as[BN][8];      // Q8_1 sums
    int8_t mnq[BM][16];   // unit mins (4 or 6 bits) per half, or per unit then 0s when the halves share one
    int8_t bsl[BN][16];   // Q8_K bsums as 128 * bsh + bsl, bsl in [0, 127], indexed as mnq (pairs summed
                          // per unit when the halves share mins)
    int8_t bsh[BN][16];
    int xrow[BN], yrow[BN];
};

__device__ __forceinline__ void mma_k32(int (&c)[4], const int (&a)[4], const int (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%11,%12,%13};\n"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(0), "r"(0), "r"(0), "r"(0));
}

__device__ __forceinline__ void mma_k16(int (&c)[4], int a0, int a1, int b0)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
}

template <int T>
__global__ void __launch_bounds__(128, 4) k_mmq(const struct mm_args a, const struct moe_tiles mt, int opts)
{
    pdl_enter();
    using Q = qtype<T>;
    extern __shared__ __align__(16) uint8_t smem_raw[];
    mmq_smem &s = *reinterpret_cast<mmq_smem *>(smem_raw);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
    const int row0 = blockIdx.x * BM;
    const uint8_t *W;

    // this tile's token rows
    if (mt.tiles) {
        if ((int)blockIdx.y >= *mt.n_tiles) return;
        const int e = mt.tiles[2 * blockIdx.y], off = mt.tiles[2 * blockIdx.y + 1];
        W = (const uint8_t *)a.w_table[e];
        const int beg = mt.first[e] + off, end = mt.first[e + 1];
        if (tid < BN) {
            const int i = beg + tid;
            const int p = i < end ? mt.sorted[i] : -1;
            s.xrow[tid] = p < 0 ? -1 : p / mt.x_div;
            s.yrow[tid] = p;
        }
    } else {
        W = (const uint8_t *)a.w;
        if (tid < BN) {
            const int t = blockIdx.y * BN + tid;
            s.xrow[tid] = t < a.n_tok ? (a.x_rows ? a.x_rows[t] : t / a.x_div) : -1;
            s.yrow[tid] = t < a.n_tok ? (a.y_rows ? a.y_rows[t] : t) : -1;
        }
    }

    const int n_units = (int)(a.n_in / 32), n_steps = (n_units + 7) / 8;
    // blocks at the alignment staged<T> reads (the mat-vec's stage keeps the same): 16-byte loads
    // instead of the generic decoder's byte and word loads, the same values
    const bool st = staged<T>::ON && (opts & MMQ_STAGED) && (((uintptr_t)W | (uintptr_t)a.row_bytes) & 15) == 0;
    const int wr = (warp & 1) * 32, wt = (warp >> 1) * 32;  // the warp's 32 rows and 32 tokens
    float acc[2][4][4];
    int iacc[2][4][4];
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f, iacc[i][j][e] = 0;

    for (int step = 0; step < n_steps; step++) {
        __syncthreads();  // the previous step's reads are done (and the row lists are written)
        // activations first, 64 token rows x 256 bytes by asynchronous copies: in flight while the
        // weights below are loaded and decoded (two memory round trips a step overlapped, not
        // one after the other)
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int piece = tid + 128 * k, tok = piece >> 4, part = piece & 15;
            const int xr = s.xrow[tok], kofs = step * KS + part * 16;
            if (xr >= 0 && kofs < (int)a.n_in) cp_async16(&s.b[tok][part * 16], a.x.qs + (size_t)xr * a.n_in + kofs);
            else *(int4 *)&s.b[tok][part * 16] = make_int4(0, 0, 0, 0);
        }
        cp_async_commit();
        // the next step's weight bytes into L2 (no registers, no wait): two threads a row, 128-byte
        // lines, so that next step's decoding loads wait on L2, not on HBM
        if (step + 1 < n_steps && row0 + (tid >> 1) < (int)a.n_out) {
            const size_t step_bytes = (size_t)(8 / Q::UPB) * Q::TS;
            const uint8_t *row = W + (size_t)(row0 + (tid >> 1)) * a.row_bytes;
            const uintptr_t beg = (uintptr_t)(row + (step + 1) * step_bytes);
            const uintptr_t end = (uintptr_t)row + min((size_t)(step + 2) * step_bytes, (size_t)a.row_bytes);
            for (uintptr_t p = (beg & ~(uintptr_t)127) + 128 * (tid & 1); p < end; p += 256) prefetch_l2((const void *)p);
        }
        // weights: 64 rows x 8 units, 4 per thread
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int q = tid + 128 * k, r = q >> 3, u = q & 7, U = step * 8 + u;
            const bool valid = row0 + r < (int)a.n_out && U < n_units;
            unit_q o;
            float d = 0.0f, dmin = 0.0f;
            if (valid) {
                const uint8_t *blk = W + (size_t)(row0 + r) * a.row_bytes + (size_t)(U / Q::UPB) * Q::TS;
                if (st) {
                    staged<T>::unit(blk, U % Q::UPB, o);
                    if (Q::UPB == 1 || u == 0) staged<T>::factors(blk, d, dmin);
                } else {
                    Q::unit(blk, U % Q::UPB, o);
                    if (Q::UPB == 1 || u == 0) Q::factors(blk, d, dmin);
                }
            } else {
#pragma unroll
                for (int i = 0; i < 8; i++) o.q[i] = 0;
                o.sc[0] = o.sc[1] = o.mn[0] = o.mn[1] = 0;
            }
            int4 *dst = (int4 *)&s.a[r][32 * u];
            dst[0] = make_int4(o.q[0], o.q[1], o.q[2], o.q[3]);
            dst[1] = make_int4(o.q[4], o.q[5], o.q[6], o.q[7]);
            s.sc[r][2 * u] = o.sc[0];
            s.sc[r][2 * u + 1] = o.sc[1];
            if (Q::SUB16) {
                s.mnq[r][2 * u] = (int8_t)o.mn[0];
                s.mnq[r][2 * u + 1] = (int8_t)o.mn[1];
            } else {
                s.mnq[r][u] = (int8_t)o.mn[0];
                s.mnq[r][8 + u] = 0;
            }
            if (Q::UPB == 1 || u == 0) {
                s.d[r][u] = d;
                s.dmin[r][u] = dmin;
            }
        }
        if (tid < BN) {
            const int tok = tid, xr = s.xrow[tok];
            if (Q::VDT == STRATA_TYPE_Q8_K) {
                s.da[tok][0] = xr >= 0 ? a.x.d[(size_t)xr * (a.n_in / 256) + step] : 0.0f;
                if (Q::MIN) {
                    const int16_t *bs = a.x.bsums + (size_t)xr * (a.n_in / 16) + 16 * step;
                    for (int h = 0; h < 16; h += 2) {
                        const int b0 = xr >= 0 ? bs[h] : 0, b1 = xr >= 0 ? bs[h + 1] : 0;
                        if (Q::SUB16) {
                            s.bsl[tok][h] = (int8_t)(b0 & 127), s.bsh[tok][h] = (int8_t)(b0 >> 7);
                            s.bsl[tok][h + 1] = (int8_t)(b1 & 127), s.bsh[tok][h + 1] = (int8_t)(b1 >> 7);
                        } else {
                            s.bsl[tok][h / 2] = (int8_t)((b0 + b1) & 127), s.bsh[tok][h / 2] = (int8_t)((b0 + b1) >> 7);
                            s.bsl[tok][8 + h / 2] = s.bsh[tok][8 + h / 2] = 0;
                        }
                    }
                }
            } else {
                for (int u = 0; u < 8; u++) {
                    const int U = step * 8 + u;
                    const bool ok = xr >= 0 && U < n_units;
                    s.da[tok][u] = ok ? a.x.d[(size_t)xr * n_units + U] : 0.0f;
                    if (Q::MIN) s.as[tok][u] = ok ? a.x.s[(size_t)xr * n_units + U] : 0.0f;
                }
            }
        }
        cp_async_wait_all();
        __syncthreads();
        // a warp whose 32 token slots are all empty (an expert's last tile, half full at ~32 pairs
        // an expert) has nothing to multiply: its outputs are never stored
        if (!__any_sync(0xffffffffu, s.yrow[wt + lane] >= 0)) continue;

        const int units = min(8, n_units - step * 8);
        for (int u = 0; u < units; u++) {
            int c[2][4][4];
            if (!Q::SUB16) {
                int af[2][4], bf[4][2];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const int8_t *ra = &s.a[wr + 16 * i + g][32 * u + 4 * t4];
                    const int8_t *rb = &s.a[wr + 16 * i + g + 8][32 * u + 4 * t4];
                    af[i][0] = *(const int *)ra;
                    af[i][1] = *(const int *)rb;
                    af[i][2] = *(const int *)(ra + 16);
                    af[i][3] = *(const int *)(rb + 16);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int8_t *p = &s.b[wt + 8 * j + g][32 * u + 4 * t4];
                    bf[j][0] = *(const int *)p;
                    bf[j][1] = *(const int *)(p + 16);
                }
#pragma unroll
                for (int i = 0; i < 2; i++)
#pragma unroll
                    for (int j = 0; j < 4; j++) mma_k32(c[i][j], af[i], bf[j]);
                if (Q::UPB == 1) {
                    // 32-element blocks: the block's float term now, per (row, token)
#pragma unroll
                    for (int i = 0; i < 2; i++)
#pragma unroll
                        for (int e2 = 0; e2 < 2; e2++) {
                            const int r = wr + 16 * i + g + 8 * e2;
                            const float d = s.d[r][u], dmin = s.dmin[r][u];
#pragma unroll
                            for (int j = 0; j < 4; j++)
#pragma unroll
                                for (int e1 = 0; e1 < 2; e1++) {
                                    const int tk = wt + 8 * j + 2 * t4 + e1;
                                    const float term = term_32<Q::MIN>(d, dmin, s.da[tk][u], Q::MIN ? s.as[tk][u] : 0.0f,
                                                                       c[i][j][2 * e2 + e1]);
                                    acc[i][j][2 * e2 + e1] = __fadd_rn(acc[i][j][2 * e2 + e1], term);
                                }
                        }
                } else {
#pragma unroll
                    for (int i = 0; i < 2; i++)
#pragma unroll
                        for (int e2 = 0; e2 < 2; e2++) {
                            const int sc = s.sc[wr + 16 * i + g + 8 * e2][2 * u];
#pragma unroll
                            for (int j = 0; j < 4; j++)
#pragma unroll
                                for (int e1 = 0; e1 < 2; e1++) iacc[i][j][2 * e2 + e1] += sc * c[i][j][2 * e2 + e1];
                        }
                }
            } else {
                // halves with their own scales: one k16 MMA per half
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    int af[2][2], bf[4];
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        af[i][0] = *(const int *)&s.a[wr + 16 * i + g][32 * u + 16 * h + 4 * t4];
                        af[i][1] = *(const int *)&s.a[wr + 16 * i + g + 8][32 * u + 16 * h + 4 * t4];
                    }
#pragma unroll
                    for (int j = 0; j < 4; j++) bf[j] = *(const int *)&s.b[wt + 8 * j + g][32 * u + 16 * h + 4 * t4];
#pragma unroll
                    for (int i = 0; i < 2; i++)
#pragma unroll
                        for (int j = 0; j < 4; j++) mma_k16(c[i][j], af[i][0], af[i][1], bf[j]);
#pragma unroll
                    for (int i = 0; i < 2; i++)
#pragma unroll
                        for (int e2 = 0; e2 < 2; e2++) {
                            const int sc = s.sc[wr + 16 * i + g + 8 * e2][2 * u + h];
#pragma unroll
                            for (int j = 0; j < 4; j++)
#pragma unroll
                                for (int e1 = 0; e1 < 2; e1++) iacc[i][j][2 * e2 + e1] += sc * c[i][j][2 * e2 + e1];
                        }
                }
            }
        }
        if (Q::UPB > 1) {
            // 256-element blocks: min total and the block's term, then the next block. The min total
            // sum_h mn[r][h] * bs[t][h] by two k16 MMAs, exact in int32 (the bsums split into
            // 128 * high + low, both int8; the mins are 4 or 6 bits).
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int cl[4] = {0, 0, 0, 0}, ch[4] = {0, 0, 0, 0};
                    if (Q::MIN) {
                        const int a0 = *(const int *)&s.mnq[wr + 16 * i + g][4 * t4];
                        const int a1 = *(const int *)&s.mnq[wr + 16 * i + g + 8][4 * t4];
                        mma_k16(cl, a0, a1, *(const int *)&s.bsl[wt + 8 * j + g][4 * t4]);
                        mma_k16(ch, a0, a1, *(const int *)&s.bsh[wt + 8 * j + g][4 * t4]);
                    }
#pragma unroll
                    for (int e2 = 0; e2 < 2; e2++) {
                        const int r = wr + 16 * i + g + 8 * e2;
                        const float d = s.d[r][0], dmin = s.dmin[r][0];
#pragma unroll
                        for (int e1 = 0; e1 < 2; e1++) {
                            const int tk = wt + 8 * j + 2 * t4 + e1, e = 2 * e2 + e1;
                            const int im = Q::MIN ? ch[e] * 128 + cl[e] : 0;
                            acc[i][j][e] = __fadd_rn(acc[i][j][e], term_k<Q::MIN>(d, dmin, s.da[tk][0], iacc[i][j][e], im));
                            iacc[i][j][e] = 0;
                        }
                    }
                }
        }
    }

#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int e2 = 0; e2 < 2; e2++) {
            const int r = row0 + wr + 16 * i + g + 8 * e2;
            if (r >= (int)a.n_out) continue;
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e1 = 0; e1 < 2; e1++) {
                    const int yr = s.yrow[wt + 8 * j + 2 * t4 + e1];
                    if (yr >= 0) mm_store(a, (size_t)yr, r, acc[i][j][2 * e2 + e1], 0.0f, false);
                }
        }
}

bool strata_cuda_mmq_supported(uint32_t type)
{
    switch (type) {
#define CASE(T) case STRATA_TYPE_##T:
        STRATA_CUDA_QTYPES(CASE)
#undef CASE
        return true;
    default: return false;
    }
}

int strata_cuda_mmq_init(void)
{
#define CASE(T)                                                                                                 \
    CU_TRY(cudaFuncSetAttribute(k_mmq<STRATA_TYPE_##T>, cudaFuncAttributeMaxDynamicSharedMemorySize, \
                                (int)sizeof(struct mmq_smem)));                                             \
    CU_TRY(cudaFuncSetAttribute(k_mmq<STRATA_TYPE_##T>, cudaFuncAttributePreferredSharedMemoryCarveout,     \
                                (int)cudaSharedmemCarveoutMaxShared));
    STRATA_CUDA_QTYPES(CASE)
#undef CASE
    return 0;
}

int strata_cuda_mmq_launch(struct strata_cuda *cu, const struct mm_args *a, const struct moe_tiles *mt, int max_tiles)
{
    static const struct moe_tiles none = {NULL, NULL, NULL, NULL, 1, 0};
    const dim3 grid(cdiv(a->n_out, BM), mt ? (unsigned)max_tiles : cdiv(a->n_tok, BN));
    if (grid.y == 0) return 0;
    const size_t sm = sizeof(struct mmq_smem);
    if (cu->prof)
        snprintf(cu->prof_tag, sizeof cu->prof_tag, "mmq%s %s %ux%u t%d", mt ? " experts" : "", strata_type_name(a->type),
                 a->n_out, a->n_in, a->n_tok);
    switch (a->type) {
#define CASE(T)                                                                                        \
    case STRATA_TYPE_##T: CU_LAUNCH("k_mmq", (k_mmq<STRATA_TYPE_##T>), grid, 128, sm, *a, mt ? *mt : none, cu->mmq_opts); break;
        STRATA_CUDA_QTYPES(CASE)
#undef CASE
    default:
        strata_log_error("cuda: no tensor-core kernel for weights of type %s", strata_type_name(a->type));
        return STRATA_EUNSUP;
    }
    return 0;
}

// ---- grouping routed pairs by expert ---------------------------------------------------------------

// One block: counts per expert, their prefix sums, each pair's place (pairs of one expert keep
// their order: one warp walks the pairs 32 at a time and ranks equal experts among the lanes),
// and the list of 64-pair tiles.
__global__ void k_moe_group(const int32_t *ids, int n_pairs, int n_expert, int32_t *first, int32_t *sorted,
                            int32_t *tiles, int32_t *n_tiles, int max_tiles)
{
    pdl_enter();
    extern __shared__ int32_t cnt[];  // [n_expert] counts, then cursors
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < n_pairs; p += blockDim.x) {
        const int e = ids[p];
        if (e >= 0 && e < n_expert) atomicAdd(&cnt[e], 1);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int pos = 0, nt = 0;
        for (int e = 0; e < n_expert; e++) {
            const int c = cnt[e];
            first[e] = pos;
            for (int off = 0; off < c && nt < max_tiles; off += 64) {
                tiles[2 * nt] = e;
                tiles[2 * nt + 1] = off;
                nt++;
            }
            cnt[e] = pos;  // cursor
            pos += c;
        }
        first[n_expert] = pos;
        *n_tiles = nt;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        for (int base = 0; base < n_pairs; base += 32) {
            const int p = base + lane;
            const int e = p < n_pairs ? ids[p] : -1;
            const bool ok = e >= 0 && e < n_expert;
            const unsigned peers = __match_any_sync(0xffffffffu, ok ? e : -1);
            const int rank = __popc(peers & ((1u << lane) - 1u));
            const int cur = ok ? cnt[e] : 0;
            __syncwarp();
            if (ok) sorted[cur + rank] = p;
            if (ok && rank == 0) cnt[e] = cur + __popc(peers);
            __syncwarp();
        }
    }
}

size_t strata_cuda_moe_groups_bytes(int n_expert, int n_pairs)
{
    const size_t max_tiles = (size_t)n_pairs / 64 + (size_t)(n_expert < n_pairs ? n_expert : n_pairs) + 1;
    return ((size_t)n_expert + 1 + (size_t)n_pairs + 2 * max_tiles + 1) * sizeof(int32_t);
}

void strata_cuda_moe_groups_init(struct strata_cuda_moe_groups *g, int n_expert, int n_pairs, void *buf)
{
    g->n_expert = n_expert;
    g->n_pairs = n_pairs;
    g->max_tiles = n_pairs / 64 + (n_expert < n_pairs ? n_expert : n_pairs) + 1;
    int32_t *p = (int32_t *)buf;
    g->first = p;
    p += n_expert + 1;
    g->sorted = p;
    p += n_pairs;
    g->tiles = p;
    p += 2 * g->max_tiles;
    g->n_tiles = p;
}

int strata_cuda_moe_group(struct strata_cuda *cu, const int32_t *ids, struct strata_cuda_moe_groups *g)
{
    if (g->n_expert <= 0 || g->n_expert > 4096) {
        strata_log_error("cuda: moe_group: %d experts (at most 4096)", g->n_expert);
        return STRATA_EARG;
    }
    g->ids = ids;
    CU_LAUNCH("k_moe_group", k_moe_group, 1, 1024, (size_t)g->n_expert * sizeof(int32_t), 
        ids, g->n_pairs, g->n_expert, g->first, g->sorted, g->tiles, g->n_tiles, g->max_tiles);
    return 0;
}
