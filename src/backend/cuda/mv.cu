// Matrix-vector products for few tokens (decode): one warp per weight row. The row's bytes go to
// the warp's stage in shared memory with 16-byte asynchronous copies (block formats of 17..210
// bytes are not word aligned; whole rows up to ~4.5 KB in one go, so every warp has its row in
// flight at once), issued before the kernel waits for the previous one when the weight does not
// depend on it (programmatic dependent launch). Each lane decodes one 32-element unit into
// registers and takes its integer dot with the activation (dp4a); the integer sums of a block are
// combined exactly across the lanes that share it, each block gives one float term (common.cuh),
// and one lane per token adds the terms in block order. Float weights (F32/F16/BF16) use a plain
// FMA loop per lane and a fixed butterfly, rows of 2,048 or more in four parts (MV_FPARTS).
//
// Routed experts: w_table[w_ids[t]] picks each token row's matrix (one launch for all experts of a
// layer); gate and up of SwiGLU run together (w2), giving silu(gate) * up; the down projection can
// fold in the weighted sum of the experts and the residual (k_mv_moe_down), which is exactly the
// separate product and strata_cuda_moe_combine, in fewer launches.
#include <cuda_runtime.h>

#include "backend/cuda/decode.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/mm.cuh"

static int ftile_init(void);
int strata_cuda_tables_mv(void)
{
    const int rc = upload_tables();
    return rc ? rc : ftile_init();
}

#define MV_WARPS 4
#define MV_STAGE 4608  // bytes of stage per warp
#define MV_MAX_NT 4    // tokens per block column

// Weight matrix of token row t.
__device__ __forceinline__ const uint8_t *mm_weight(const struct mm_args &a, int t, int which)
{
    if (a.w_table) return (const uint8_t *)(which ? a.w2_table : a.w_table)[a.w_ids[t]];
    return (const uint8_t *)(which ? a.w2 : a.w);
}

// Queue the copy of global [g, g + bytes) into stage + the returned offset (g's phase in 16).
__device__ __forceinline__ int stage_issue(uint8_t *stage, const uint8_t *g, int bytes, int lane)
{
    const uint8_t *base = (const uint8_t *)((uintptr_t)g & ~(uintptr_t)15);
    const int n16 = (int)((g + bytes - base + 15) / 16);
    for (int p = lane; p < n16; p += 32) cp_async16(stage + 16 * p, base + 16 * p);
    return (int)(g - base);
}

// Bytes a staged range of `bytes` may need: alignment phase, whole pieces, the decoders' over-read.
__device__ __host__ __forceinline__ int stage_need(int bytes) { return (bytes + 15 + 15) / 16 * 16 + 16; }

// Integer dot of a unit with 32 activation quants: the two halves apart.
__device__ __forceinline__ void dot_unit(const unit_q &o, const int8_t *aq, int &lo, int &hi)
{
    const int4 a0 = __ldg((const int4 *)aq), a1 = __ldg((const int4 *)aq + 1);
    lo = __dp4a(o.q[0], a0.x, __dp4a(o.q[1], a0.y, __dp4a(o.q[2], a0.z, __dp4a(o.q[3], a0.w, 0))));
    hi = __dp4a(o.q[4], a1.x, __dp4a(o.q[5], a1.y, __dp4a(o.q[6], a1.z, __dp4a(o.q[7], a1.w, 0))));
}

// The term of one unit (u, the unit's index in its row; blk, its block's) against activation row
// xrow: the integer sums of the lanes that share the block combined exactly (every lane calls it);
// the block's first lane gets the block's float term.
template <int T>
__device__ __forceinline__ float unit_term(const unit_q &o, float d, float dmin, bool valid, const struct mm_args &a,
                                           size_t xrow, size_t u, size_t blk)
{
    using Q = qtype<T>;
    int iv = 0, im = 0;
    if (valid) {
        int lo, hi;
        dot_unit(o, a.x.qs + xrow * a.n_in + 32 * u, lo, hi);
        iv = o.sc[0] * lo + o.sc[1] * hi;
        if (Q::VDT == STRATA_TYPE_Q8_K && Q::MIN) {
            const int16_t *bs = a.x.bsums + xrow * (a.n_in / 16) + 2 * u;
            im = o.mn[0] * bs[0] + o.mn[1] * bs[1];
        }
    }
    float term = 0.0f;
    if (Q::UPB > 1) {
#pragma unroll
        for (int m = 1; m < Q::UPB; m <<= 1) {
            iv += __shfl_xor_sync(0xffffffffu, iv, m);
            if (Q::MIN) im += __shfl_xor_sync(0xffffffffu, im, m);
        }
        if (valid) term = term_k<Q::MIN>(d, dmin, a.x.d[xrow * (a.n_in / 256) + blk], iv, im);
    } else if (valid) {
        const size_t bi = xrow * (a.n_in / 32) + u;
        term = term_32<Q::MIN>(d, dmin, a.x.d[bi], Q::MIN ? a.x.s[bi] : 0.0f, iv);
    }
    return term;
}

// Units per lane in one pass of the unit loops: more loads in flight per warp where the registers
// allow (one token row); it changes no operation or order.
template <int NT> __device__ __host__ constexpr int mv_un() { return NT == 1 ? 2 : 1; }

// Blocks fb .. fb + nb of a row, staged at sb (block fb first), against the activation rows xr[i]
// of nt tokens: lane i adds the blocks' terms, in order, to acc (its token's sum). tsum is the
// warp's [NT][32 UN] scratch (at most MV_MAX_NT * 32 floats). Each lane takes UN units of a pass.
template <int T, int NT, int UN = mv_un<NT>()>
__device__ __forceinline__ void staged_dot(const uint8_t *sb, int fb, int nb, const struct mm_args &a, const int *xr,
                                           int nt, float *tsum, int lane, float &acc)
{
    using Q = qtype<T>;
    static_assert(NT * UN <= MV_MAX_NT, "tsum holds MV_MAX_NT * 32 floats");
    const int units = nb * Q::UPB;
    const bool a16 = ((uintptr_t)sb & 15) == 0;  // the row was 16-aligned (staged<T>'s loads)
    for (int u0 = 0; u0 < units; u0 += 32 * UN) {
        unit_q o[UN];
        float d[UN], dmin[UN];
        bool valid[UN];
#pragma unroll
        for (int k = 0; k < UN; k++) {
            const int ul = u0 + 32 * k + lane;
            valid[k] = ul < units;
            d[k] = dmin[k] = 0.0f;
            if (valid[k]) {
                const uint8_t *b = sb + (ul / Q::UPB) * Q::TS;
                if (staged<T>::ON && a16) {
                    staged<T>::unit(b, ul % Q::UPB, o[k]);
                    staged<T>::factors(b, d[k], dmin[k]);
                } else {
                    Q::unit(b, ul % Q::UPB, o[k]);
                    Q::factors(b, d[k], dmin[k]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < NT; i++) {
            if (NT > 1 && i >= nt) break;  // one token: no test, the shuffles stay uniform
#pragma unroll
            for (int k = 0; k < UN; k++) {
                const int ul = u0 + 32 * k + lane;
                tsum[32 * UN * i + 32 * k + lane] = unit_term<T>(o[k], d[k], dmin[k], valid[k], a, (size_t)xr[i],
                                                                 (size_t)fb * Q::UPB + ul, (size_t)(fb + ul / Q::UPB));
            }
        }
        __syncwarp();
        if (lane < nt) {
            const int nblk = min(32 * UN, units - u0) / Q::UPB;
            for (int j = 0; j < nblk; j++) acc = __fadd_rn(acc, tsum[32 * UN * lane + j * Q::UPB]);
        }
        __syncwarp();
    }
}

// kn whole rows of nb blocks each, row j staged at sb + soff[j] (soff[j] < 0: a row computed
// elsewhere, worth 0), against activation rows xrow0 + j (one token row each): lane j ends with row
// j's dot. The rows' units are spread over the lanes together (UN per lane per pass), and each row's
// block terms are added in block order from 0: the operations of staged_dot for each row alone.
template <int T, int UN>
__device__ __forceinline__ void staged_dot_rows(const uint8_t *sb, const int *soff, int kn, int nb,
                                                const struct mm_args &a, size_t xrow0, float *tsum, int lane,
                                                float &acc)
{
    using Q = qtype<T>;
    static_assert(UN <= MV_MAX_NT, "tsum holds MV_MAX_NT * 32 floats");
    const int upr = nb * Q::UPB, units = kn * upr;
    for (int u0 = 0; u0 < units; u0 += 32 * UN) {
        unit_q o[UN];
        float d[UN], dmin[UN];
        bool valid[UN];
        int row[UN], u[UN];
#pragma unroll
        for (int k = 0; k < UN; k++) {
            const int ul = u0 + 32 * k + lane;
            row[k] = min(ul / upr, kn - 1), u[k] = ul - row[k] * upr;
            valid[k] = ul < units && soff[row[k]] >= 0;
            d[k] = dmin[k] = 0.0f;
            if (valid[k]) {
                const uint8_t *r = sb + soff[row[k]], *b = r + (u[k] / Q::UPB) * Q::TS;
                if (staged<T>::ON && ((uintptr_t)r & 15) == 0) {
                    staged<T>::unit(b, u[k] % Q::UPB, o[k]);
                    staged<T>::factors(b, d[k], dmin[k]);
                } else {
                    Q::unit(b, u[k] % Q::UPB, o[k]);
                    Q::factors(b, d[k], dmin[k]);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < UN; k++)
            tsum[32 * k + lane] = unit_term<T>(o[k], d[k], dmin[k], valid[k], a, xrow0 + row[k], (size_t)u[k],
                                               (size_t)(u[k] / Q::UPB));
        __syncwarp();
        if (lane < kn) {  // this lane's row's blocks among the pass's units, in order
            const int lo = max(u0, lane * upr), hi = min(u0 + 32 * UN, (lane + 1) * upr);
            for (int ul = lo; ul < hi; ul += Q::UPB) acc = __fadd_rn(acc, tsum[ul - u0]);
        }
        __syncwarp();
    }
}

// Blocks per stage of type T (whole blocks, with room for alignment and over-read).
template <int T> __device__ __forceinline__ int stage_blocks() { return (MV_STAGE - 48) / qtype<T>::TS; }

// A whole row against nt tokens, staged in pieces of at most stage_blocks(); `first_off` >= 0 when
// the caller already queued the first piece (its offset).
template <int T, int NT>
__device__ __forceinline__ float mv_row(const uint8_t *row, const struct mm_args &a, const int *xr, int nt,
                                        uint8_t *stage, float *tsum, int lane, int first_off)
{
    using Q = qtype<T>;
    const int n_blocks = (int)(a.n_in / Q::BS), bps = stage_blocks<T>();
    float acc = 0.0f;
    for (int fb = 0; fb < n_blocks; fb += bps) {
        const int nb = min(bps, n_blocks - fb);
        int off = first_off;
        if (fb > 0 || off < 0) {
            off = stage_issue(stage, row + (size_t)fb * Q::TS, nb * Q::TS, lane);
            cp_async_commit();
        }
        cp_async_wait_all();
        __syncwarp();
        staged_dot<T, NT>(stage + off, fb, nb, a, xr, nt, tsum, lane, acc);
        __syncwarp();
    }
    return acc;
}

// Activation rows of the block's tokens t0 .. t0 + nt (the missing ones repeat t0's).
template <int NT>
__device__ __forceinline__ void token_rows(const struct mm_args &a, int t0, int nt, int *xr)
{
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const int t = t0 + (i < nt ? i : 0);
        xr[i] = a.x_rows ? a.x_rows[t] : t / a.x_div;
    }
}

// Float weights: lane l takes elements l, l + 32, ... in order (one FMA each), then a butterfly.
template <int T>
__device__ __forceinline__ float load_w(const uint8_t *row, uint32_t e)
{
    if (T == STRATA_TYPE_F32) return __ldg((const float *)row + e);
    const uint32_t h = __ldg((const unsigned short *)row + e);
    return T == STRATA_TYPE_F16 ? h2f(h) : __uint_as_float(h << 16);
}

template <int T>
__device__ __forceinline__ float load_x(const struct strata_cuda_act &x, size_t xrow, uint32_t e)
{
    if (T == STRATA_TYPE_F32) return x.f[xrow * x.f_stride + e];
    const uint32_t h = x.h[xrow * x.n_in + e];
    return T == STRATA_TYPE_F16 ? h2f(h) : __uint_as_float(h << 16);
}

// Four consecutive elements from e on: one 16-byte (F32) or 8-byte (F16, BF16) load when `vec`,
// else four loads; the same values either way.
__device__ __forceinline__ float4 h4_to_f4(uint2 u, bool f16)
{
    const uint32_t h[4] = {u.x & 0xffffu, u.x >> 16, u.y & 0xffffu, u.y >> 16};
    if (f16) return make_float4(h2f(h[0]), h2f(h[1]), h2f(h[2]), h2f(h[3]));
    return make_float4(__uint_as_float(h[0] << 16), __uint_as_float(h[1] << 16), __uint_as_float(h[2] << 16),
                       __uint_as_float(h[3] << 16));
}

template <int T>
__device__ __forceinline__ float4 load_w4(const uint8_t *row, uint32_t e, bool vec)
{
    if (vec) {
        if (T == STRATA_TYPE_F32) return __ldg((const float4 *)((const float *)row + e));
        return h4_to_f4(__ldg((const uint2 *)((const unsigned short *)row + e)), T == STRATA_TYPE_F16);
    }
    return make_float4(load_w<T>(row, e), load_w<T>(row, e + 1), load_w<T>(row, e + 2), load_w<T>(row, e + 3));
}

template <int T>
__device__ __forceinline__ float4 load_x4(const struct strata_cuda_act &x, size_t xrow, uint32_t e, bool vec)
{
    if (vec) {
        if (T == STRATA_TYPE_F32) return *(const float4 *)(x.f + xrow * x.f_stride + e);
        return h4_to_f4(*(const uint2 *)(x.h + xrow * x.n_in + e), T == STRATA_TYPE_F16);
    }
    return make_float4(load_x<T>(x, xrow, e), load_x<T>(x, xrow, e + 1), load_x<T>(x, xrow, e + 2),
                       load_x<T>(x, xrow, e + 3));
}

template <int T>
__device__ __forceinline__ bool x_aligned(const struct strata_cuda_act &x, size_t xrow)
{
    if (T == STRATA_TYPE_F32) return ((uintptr_t)(x.f + xrow * x.f_stride) & 15) == 0;
    return ((uintptr_t)(x.h + xrow * x.n_in) & 7) == 0;
}

// Float rows are cut into MV_FPARTS(n_in) parts of consecutive groups of four elements (a pure
// function of the row's width, so that every kernel and batch adds a row the same way): k_mv gives
// each part a warp of the row's block (a short chain of loads each, where one warp per row left the
// router's 128 rows of 2,048 on a quarter of the multiprocessors), k_mv_moe_down's single warp
// takes the parts one after another; the parts' sums are added in part order.
#define MV_FPARTS(n_in) ((n_in) >= 2048 ? MV_WARPS : 1)

// Part p of P of a float row: lane i gets token i's sum of the part. Lane l takes the part's groups
// of four elements l, l + 32, ... (each group's products added in element order, wide loads where
// the rows are aligned), then a fixed butterfly; the last n_in % 4 elements belong to the group
// right after the last whole one (in the last part).
template <int T, int NT>
__device__ __forceinline__ float mv_part_f(const uint8_t *row, const struct mm_args &a, const int *xr, int nt, int lane,
                                           int p, int P)
{
    float s[NT];
    bool vec = ((uintptr_t)row & (T == STRATA_TYPE_F32 ? 15 : 7)) == 0;
#pragma unroll
    for (int i = 0; i < NT; i++) {
        s[i] = 0.0f;
        if (i < nt) vec = vec && x_aligned<T>(a.x, (size_t)xr[i]);
    }
    const uint32_t G = a.n_in / 4, g0 = G * (uint32_t)p / (uint32_t)P, g1 = G * (uint32_t)(p + 1) / (uint32_t)P;
#pragma unroll 4
    for (uint32_t e = 4 * (g0 + lane); e < 4 * g1; e += 128) {
        const float4 w = load_w4<T>(row, e, vec);
#pragma unroll
        for (int i = 0; i < NT; i++)
            if (i < nt) {
                const float4 x = load_x4<T>(a.x, (size_t)xr[i], e, vec);
                s[i] = __fmaf_rn(w.x, x.x, s[i]);
                s[i] = __fmaf_rn(w.y, x.y, s[i]);
                s[i] = __fmaf_rn(w.z, x.z, s[i]);
                s[i] = __fmaf_rn(w.w, x.w, s[i]);
            }
    }
    if (p == P - 1 && 4 * G < a.n_in && (uint32_t)lane == (G - g0) % 32)
        for (uint32_t e = 4 * G; e < a.n_in; e++) {
            const float w = load_w<T>(row, e);
#pragma unroll
            for (int i = 0; i < NT; i++)
                if (i < nt) s[i] = __fmaf_rn(w, load_x<T>(a.x, (size_t)xr[i], e), s[i]);
        }
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < NT; i++) {
        const float v = warp_sum(s[i]);
        if (lane == i) mine = v;
    }
    return mine;
}

// A whole float row by one warp: its parts in order, their sums added in part order.
template <int T, int NT>
__device__ __forceinline__ float mv_row_f(const uint8_t *row, const struct mm_args &a, const int *xr, int nt, int lane)
{
    const int P = MV_FPARTS(a.n_in);
    float acc = 0.0f;
    for (int p = 0; p < P; p++) {
        const float v = mv_part_f<T, NT>(row, a, xr, nt, lane, p, P);
        acc = p == 0 ? v : __fadd_rn(acc, v);
    }
    return acc;
}

template <int T> __host__ __device__ constexpr bool is_float_type()
{
    return T == STRATA_TYPE_F32 || T == STRATA_TYPE_F16 || T == STRATA_TYPE_BF16;
}

// One warp per weight row; NT token rows per block column; lane i ends with token i's result.
template <int T, int NT>
__global__ void __launch_bounds__(MV_WARPS * 32) k_mv(const struct mm_args a)
{
    __shared__ __align__(16) uint8_t stage_all[MV_WARPS][is_float_type<T>() ? 16 : MV_STAGE];
    __shared__ float tsum_all[MV_WARPS][MV_MAX_NT * 32];
    pdl_launch_dependents();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // float rows of MV_FPARTS(n_in) = MV_WARPS parts: one row per block, a part per warp
    const int fparts = is_float_type<T>() ? MV_FPARTS(a.n_in) : 1;
    const int row = fparts > 1 ? (int)blockIdx.x : (int)blockIdx.x * MV_WARPS + warp;
    const int t0 = blockIdx.y * NT;
    const bool swiglu = a.w2 || a.w2_table;
    // the row's matrix among stacked ones (else w itself), its output and its row there
    const void *wp;
    float *yp;
    size_t ys;
    int lr;
    mm_segment(a, row, wp, yp, ys, lr);
    int first_off = -1;
    // a plain weight does not depend on the previous kernel: its first stage is queued now, and the
    // rest of its bytes (a float row, a row past the stage, the up row of SwiGLU) are fetched into
    // L2 by the first block column while the previous kernel still runs
    if (!a.w_table && row < (int)a.n_out) {
        const uint8_t *wr = (const uint8_t *)wp + (size_t)lr * a.row_bytes;
        size_t staged = 0;
        if constexpr (!is_float_type<T>()) {
            const int nb = min(stage_blocks<T>(), (int)(a.n_in / qtype<T>::BS));
            first_off = stage_issue(stage_all[warp], wr, nb * qtype<T>::TS, lane);
            cp_async_commit();
            staged = (size_t)nb * qtype<T>::TS;
        }
        if (blockIdx.y == 0) {
            for (size_t o = staged + 128 * (size_t)lane; o < a.row_bytes; o += 32 * 128) prefetch_l2(wr + o);
            if (a.w2)
                for (size_t o = 128 * (size_t)lane; o < a.row_bytes; o += 32 * 128)
                    prefetch_l2((const uint8_t *)a.w2 + (size_t)row * a.row_bytes + o);
        }
    }
    pdl_wait();
    if (row >= (int)a.n_out) return;
    if (a.w_table && !mm_weight(a, t0, 0)) return;  // an expert computed elsewhere (a sparse table)
    const int nt = min(NT, a.n_tok - t0);
    int xr[NT];
    token_rows<NT>(a, t0, nt, xr);
    const uint8_t *w1 = a.w_table ? mm_weight(a, t0, 0) + (size_t)row * a.row_bytes
                                  : (const uint8_t *)wp + (size_t)lr * a.row_bytes;
    float acc, acc2 = 0.0f;
    if constexpr (is_float_type<T>()) {
        if (fparts > 1) {  // this warp's part; the first warp adds the parts in order
            __shared__ float part_all[2][MV_WARPS][MV_MAX_NT];
            const float p1 = mv_part_f<T, NT>(w1, a, xr, nt, lane, warp, fparts);
            const float p2 = swiglu ? mv_part_f<T, NT>(mm_weight(a, t0, 1) + (size_t)row * a.row_bytes, a, xr, nt,
                                                       lane, warp, fparts)
                                    : 0.0f;
            if (lane < nt) part_all[0][warp][lane] = p1, part_all[1][warp][lane] = p2;
            __syncthreads();
            if (warp > 0) return;
            acc = acc2 = 0.0f;
            if (lane < nt)
                for (int p = 0; p < fparts; p++) {
                    acc = p == 0 ? part_all[0][p][lane] : __fadd_rn(acc, part_all[0][p][lane]);
                    acc2 = p == 0 ? part_all[1][p][lane] : __fadd_rn(acc2, part_all[1][p][lane]);
                }
        } else {
            acc = mv_row_f<T, NT>(w1, a, xr, nt, lane);
            if (swiglu) acc2 = mv_row_f<T, NT>(mm_weight(a, t0, 1) + (size_t)row * a.row_bytes, a, xr, nt, lane);
        }
    } else if (swiglu && first_off < 0 && 2 * stage_need((int)a.row_bytes) <= MV_STAGE) {
        // gate and up rows staged together (one memory latency), each one piece as mv_row would
        const uint8_t *w2 = mm_weight(a, t0, 1) + (size_t)row * a.row_bytes;
        const int need = stage_need((int)a.row_bytes), nb = (int)(a.n_in / qtype<T>::BS);
        const int o1 = stage_issue(stage_all[warp], w1, (int)a.row_bytes, lane);
        const int o2 = stage_issue(stage_all[warp] + need, w2, (int)a.row_bytes, lane);
        cp_async_commit();
        cp_async_wait_all();
        __syncwarp();
        acc = 0.0f;
        staged_dot<T, NT>(stage_all[warp] + o1, 0, nb, a, xr, nt, tsum_all[warp], lane, acc);
        staged_dot<T, NT>(stage_all[warp] + need + o2, 0, nb, a, xr, nt, tsum_all[warp], lane, acc2);
    } else {
        acc = mv_row<T, NT>(w1, a, xr, nt, stage_all[warp], tsum_all[warp], lane, first_off);
        if (swiglu)
            acc2 = mv_row<T, NT>(mm_weight(a, t0, 1) + (size_t)row * a.row_bytes, a, xr, nt, stage_all[warp],
                                 tsum_all[warp], lane, -1);
    }
    if (lane < nt) {
        if (a.n_seg) yp[(size_t)(t0 + lane) * ys + lr] = acc;
        else mm_store(a, a.y_rows ? a.y_rows[t0 + lane] : t0 + lane, row, acc, acc2, swiglu);
    }
}

// The down projection of a token's K routed experts and their weighted sum into the residual:
// x[t][r] += w_0 d_0 + w_1 d_1 + ... (+ shared[t][r] * sigmoid(shared_gate[t])), d_k = W_{e_k}[r] .
// act[t K + k], the operations of k_mv and k_moe_combine in the same order.
template <int T>
__global__ void __launch_bounds__(MV_WARPS * 32) k_mv_moe_down(const struct mm_args a, int K, const float *weights,
                                                               float *x, const float *shared, const float *shared_gate)
{
    __shared__ __align__(16) uint8_t stage_all[MV_WARPS][is_float_type<T>() ? 16 : MV_STAGE];
    __shared__ float tsum_all[MV_WARPS][MV_MAX_NT * 32];
    __shared__ float d_all[MV_WARPS][32];
    pdl_enter();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int row = blockIdx.x * MV_WARPS + warp, t = blockIdx.y;
    if (row >= (int)a.n_out) return;
    float *d = d_all[warp];
    // the K experts' matrices, looked up by lanes 0..K-1 at once (not one dependent pair of loads
    // after another)
    unsigned long long mine = 0;
    if (lane < K) mine = (unsigned long long)a.w_table[a.w_ids[t * K + lane]];
#define EXPERT_BASE(j) __shfl_sync(0xffffffffu, mine, (j))
#define EXPERT_ROW(j) ((const uint8_t *)EXPERT_BASE(j) + (size_t)row * a.row_bytes)
    // rows of several experts at once when they fit the stage, their units spread over the lanes
    __shared__ int soff_all[MV_WARPS][32];
    int *soff = soff_all[warp];
    int k = 0;
    while (k < K) {
        int kn = 1;
        if constexpr (!is_float_type<T>()) {
            const int need = stage_need((int)a.row_bytes);
            kn = min(K - k, max(1, (MV_STAGE - 16) / need));
            if (need > MV_STAGE - 16) kn = 1;
            if (kn > 1) {
                for (int j = 0; j < kn; j++) {
                    const uint8_t *wr = EXPERT_ROW(k + j);
                    const bool here = EXPERT_BASE(k + j) != 0;
                    if (here) (void)stage_issue(stage_all[warp] + j * need, wr, (int)a.row_bytes, lane);
                    if (lane == j) soff[j] = here ? j * need + (int)((uintptr_t)wr & 15) : -1;
                }
                cp_async_commit();
                cp_async_wait_all();
                __syncwarp();
                float acc = 0.0f;
                staged_dot_rows<T, MV_MAX_NT>(stage_all[warp], soff, kn, (int)(a.n_in / qtype<T>::BS), a,
                                              (size_t)t * K + k, tsum_all[warp], lane, acc);
                if (lane < kn) d[k + lane] = acc;
                __syncwarp();
                k += kn;
                continue;
            }
        }
        const int p = t * K + k;
        const uint8_t *wr = EXPERT_ROW(k);
        const int xr[1] = {p};
        float v;
        if (!EXPERT_BASE(k)) {  // computed elsewhere (a sparse table): adds nothing here
            v = 0.0f;
        } else if constexpr (is_float_type<T>()) {
            v = mv_row_f<T, 1>(wr, a, xr, 1, lane);
        } else {
            v = mv_row<T, 1>(wr, a, xr, 1, stage_all[warp], tsum_all[warp], lane, -1);
        }
        if (lane == 0) d[k] = v;
        __syncwarp();
        k += 1;
    }
#undef EXPERT_ROW
#undef EXPERT_BASE
    __syncwarp();
    if (lane == 0) {
        float acc = 0.0f;
        for (int j = 0; j < K; j++) {
            const float v = __fmul_rn(weights[(size_t)t * K + j], d[j]);
            acc = j == 0 ? v : __fadd_rn(acc, v);
        }
        if (shared) {
            float sh = shared[(size_t)t * a.n_out + row];
            if (shared_gate) sh = __fmul_rn(sh, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-shared_gate[t]))));
            acc = __fadd_rn(acc, sh);
        }
        x[(size_t)t * a.n_out + row] = __fadd_rn(x[(size_t)t * a.n_out + row], acc);
    }
}

// Many tokens against a plain F32 matrix (a prompt's router): k_mv reads each block's MV_MAX_NT
// activation rows again for every weight row (512 MB from L2 for a 128 x 2,048 router at 512
// tokens). Here a block stages its tokens' rows in shared memory once and takes FTILE_ROWS weight
// rows, each row's parts a warp apiece through mv_part_f, which then reads the staged rows: the
// same lanes, groups, FMAs and butterfly per (row, token), and the parts added in order as k_mv
// adds them, so the same bits as k_mv in any batch.
#define FTILE_ROWS 16
#define FTILE_SMEM_MAX (96 * 1024)  // the staged rows' bytes at most (n_in <= 6,144 at MV_MAX_NT tokens)

static bool ftile_takes(const struct mm_args *a)
{
    return a->type == STRATA_TYPE_F32 && !a->w_table && !a->w2 && !a->w2_table && a->n_seg == 0 &&
           a->n_tok >= 4 * MV_MAX_NT && MV_FPARTS(a->n_in) == MV_WARPS && a->n_in % 4 == 0 &&
           (size_t)MV_MAX_NT * a->n_in * sizeof(float) <= FTILE_SMEM_MAX;
}

__global__ void __launch_bounds__(MV_WARPS * 32) k_mv_ftile(const struct mm_args a)
{
    extern __shared__ __align__(16) float xs[];  // [MV_MAX_NT][n_in]
    __shared__ float part_all[FTILE_ROWS][MV_WARPS][MV_MAX_NT];
    pdl_launch_dependents();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int r0 = blockIdx.x * FTILE_ROWS, t0 = blockIdx.y * MV_MAX_NT;
    // the rows do not depend on the previous kernel: into L2 while it runs
    if (blockIdx.y == 0)
        for (int r = r0; r < r0 + FTILE_ROWS && r < (int)a.n_out; r++)
            for (size_t o = 128 * (size_t)threadIdx.x; o < a.row_bytes; o += 128 * MV_WARPS * 32)
                prefetch_l2((const uint8_t *)a.w + (size_t)r * a.row_bytes + o);
    pdl_wait();
    const int nt = min(MV_MAX_NT, a.n_tok - t0);
    int xr[MV_MAX_NT];
    token_rows<MV_MAX_NT>(a, t0, nt, xr);
    const uint32_t n4 = a.n_in / 4;
    for (int i = 0; i < nt; i++) {
        const float4 *src = (const float4 *)(a.x.f + (size_t)xr[i] * a.x.f_stride);
        float4 *dst = (float4 *)(xs + (size_t)i * a.n_in);
        const bool al = ((uintptr_t)src & 15) == 0;
        for (uint32_t j = threadIdx.x; j < n4; j += MV_WARPS * 32) {
            if (al) {
                dst[j] = __ldg(src + j);
            } else {
                const float *sf = (const float *)src + 4 * j;
                dst[j] = make_float4(sf[0], sf[1], sf[2], sf[3]);
            }
        }
    }
    __syncthreads();
    struct mm_args b = a;
    b.x.f = xs;
    b.x.f_stride = a.n_in;
    b.x_rows = NULL;
    int lr[MV_MAX_NT];
#pragma unroll
    for (int i = 0; i < MV_MAX_NT; i++) lr[i] = i;
    for (int r = 0; r < FTILE_ROWS && r0 + r < (int)a.n_out; r++) {
        const uint8_t *w1 = (const uint8_t *)a.w + (size_t)(r0 + r) * a.row_bytes;
        const float p = mv_part_f<STRATA_TYPE_F32, MV_MAX_NT>(w1, b, lr, nt, lane, warp, MV_WARPS);
        if (lane < nt) part_all[r][warp][lane] = p;
    }
    __syncthreads();
    for (int k = threadIdx.x; k < FTILE_ROWS * MV_MAX_NT; k += MV_WARPS * 32) {
        const int r = k / MV_MAX_NT, i = k % MV_MAX_NT, row = r0 + r;
        if (row >= (int)a.n_out || i >= nt) continue;
        float acc = part_all[r][0][i];
        for (int q = 1; q < MV_WARPS; q++) acc = __fadd_rn(acc, part_all[r][q][i]);
        mm_store(a, a.y_rows ? a.y_rows[t0 + i] : t0 + i, row, acc, 0.0f, false);
    }
}

static int ftile_init(void)
{
    CU_TRY(cudaFuncSetAttribute(k_mv_ftile, cudaFuncAttributeMaxDynamicSharedMemorySize, FTILE_SMEM_MAX));
    return 0;
}

int strata_cuda_mv_launch(struct strata_cuda *cu, const struct mm_args *a)
{
    // routed experts: one token row per matrix, so one row per block column
    const int nt = a->w_table || a->n_tok == 1 ? 1 : MV_MAX_NT;
    const bool fl = a->type == STRATA_TYPE_F32 || a->type == STRATA_TYPE_F16 || a->type == STRATA_TYPE_BF16;
    const dim3 grid(fl && MV_FPARTS(a->n_in) > 1 ? a->n_out : cdiv(a->n_out, MV_WARPS), cdiv(a->n_tok, nt));
    const unsigned th = MV_WARPS * 32;
    if (cu->prof)
        snprintf(cu->prof_tag, sizeof cu->prof_tag, "mv%s %s %ux%u t%d%s%s", a->w_table ? " experts" : "",
                 strata_type_name(a->type), a->n_out, a->n_in, a->n_tok, a->w2 || a->w2_table ? " swiglu" : "",
                 a->n_seg ? " stacked" : "");
    if (ftile_takes(a) && cu->mv_ftile) {
        const dim3 tg(cdiv(a->n_out, FTILE_ROWS), cdiv(a->n_tok, MV_MAX_NT));
        CU_LAUNCH("mv", k_mv_ftile, tg, th, (size_t)MV_MAX_NT * a->n_in * sizeof(float), *a);
        return 0;
    }
    switch (a->type) {
#define CASE(T)                                                                                   \
    case STRATA_TYPE_##T:                                                                         \
        if (nt == 1) CU_LAUNCH("mv", (k_mv<STRATA_TYPE_##T, 1>), grid, th, 0, *a);               \
        else CU_LAUNCH("mv", (k_mv<STRATA_TYPE_##T, MV_MAX_NT>), grid, th, 0, *a);               \
        break;
        STRATA_CUDA_QTYPES(CASE)
        CASE(F32)
        CASE(F16)
        CASE(BF16)
#undef CASE
    default:
        strata_log_error("cuda: no CUDA kernel for weights of type %s", strata_type_name(a->type));
        return STRATA_EUNSUP;
    }
    return 0;
}

int strata_cuda_mv_moe_down_launch(struct strata_cuda *cu, const struct mm_args *a, int n_tok, int K,
                                   const float *weights, float *x, const float *shared, const float *shared_gate)
{
    if (K > 32) {
        strata_log_error("cuda: moe_down: %d experts per token (at most 32)", K);
        return STRATA_EARG;
    }
    const dim3 grid(cdiv(a->n_out, MV_WARPS), n_tok);
    const unsigned th = MV_WARPS * 32;
    if (cu->prof)
        snprintf(cu->prof_tag, sizeof cu->prof_tag, "moe_down %s %ux%u t%d k%d", strata_type_name(a->type), a->n_out,
                 a->n_in, n_tok, K);
    switch (a->type) {
#define CASE(T)                                                                                                \
    case STRATA_TYPE_##T:                                                                                      \
        CU_LAUNCH("moe_down", k_mv_moe_down<STRATA_TYPE_##T>, grid, th, 0, *a, K, weights, x, shared, shared_gate); \
        break;
        STRATA_CUDA_QTYPES(CASE)
        CASE(F32)
        CASE(F16)
        CASE(BF16)
#undef CASE
    default:
        strata_log_error("cuda: no CUDA kernel for weights of type %s", strata_type_name(a->type));
        return STRATA_EUNSUP;
    }
    return 0;
}
