// Selections over long rows (the logits: 151,936 floats a row for Qwen3): backend.h's argmax (a
// greedy pick) and topk (a sampler's candidates), so that a token costs a few bytes of download
// instead of the row. One block a row streams it at about 19 GB/s (the argmax over one 1,024-thread
// block took 32.6 us in ncu on an H100, a radix select of four such passes more than the row's
// download and the host's selection together): here a row is split over blocks, read at the
// chip's rate, and what needs the whole row (the argmax's merge, the top-k's cut) reads the blocks'
// small results. Rows go SEL_ROWS a launch through the context's selection scratch (cu->sel).
#include <climits>

#include <cuda_runtime.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"

#define SEL_THREADS 256
#define SEL_CHUNK 4096        // argmax: elements a block (16 a thread)
#define SEL_ROWS 32           // rows a launch
#define SEL_MAX_BLOCKS 128    // argmax: blocks a row (longer rows take longer chunks)
#define TOPK_GROUP 64         // top-k: elements whose largest key the first step keeps
#define TOPK_GROUPS_WARP 8    // groups a warp in the first step
#define TOPK_MAX_GROUPS 4096  // rows of up to 262,144 take the two-step top-k
#define TOPK_MAX_CAND 2048    // candidates the second step sorts
#define TOPK_THREADS 1024

struct sel_scratch {
    float part_v[SEL_ROWS * SEL_MAX_BLOCKS];  // argmax: each block's first largest
    int32_t part_i[SEL_ROWS * SEL_MAX_BLOCKS];
    uint32_t done[SEL_ROWS];                  // argmax: blocks of the row finished (the last resets it)
    uint32_t gkey[SEL_ROWS * TOPK_MAX_GROUPS];  // top-k: each group's largest key
};

// The scratch is made and zeroed when the context opens (strata_cuda_open; 557 KB): made at a
// first selection inside a captured decode pass, its zeroing would be a node of that graph, and
// an abandoned capture would leave the argmax's counts as cudaMalloc left them.
int strata_cuda_select_init(struct strata_cuda *cu)
{
    cu->sel = strata_cuda_alloc(cu, sizeof(struct sel_scratch), "selection scratch");
    if (!cu->sel) return STRATA_ENOMEM;
    CU_TRY(cudaMemsetAsync(cu->sel, 0, sizeof(struct sel_scratch), cu->stream));
    CU_TRY(cudaStreamSynchronize(cu->stream));
    return 0;
}

// ---- argmax ------------------------------------------------------------------------------------

// ids[r] = the first index of the largest of row r (NaN never wins; 0 when none is above -inf):
// sample/sampler.c's strata_argmax. Each thread keeps the first of its stride's largest (a strided
// scan meets its indices in order, so a strict > keeps the first); candidates merge by value, the
// lower index on a tie, which no order of merging changes. A row of one block writes its answer;
// otherwise each block leaves its best in the scratch and the row's last block to finish (a ticket
// after a fence) merges them and resets the row's count for the next launch.
__device__ __forceinline__ void argmax_merge(float &v, int &i, float ov, int oi)
{
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
}

__device__ __forceinline__ void argmax_warp(float &v, int &i)
{
    for (int o = 16; o > 0; o >>= 1) argmax_merge(v, i, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o));
}

__global__ void __launch_bounds__(SEL_THREADS) k_argmax(int32_t *ids, const float *x, uint32_t n, uint32_t chunk,
                                                       struct sel_scratch *sc)
{
    pdl_enter();
    __shared__ float sv[SEL_THREADS / 32];
    __shared__ int si[SEL_THREADS / 32];
    const int y = blockIdx.y, nb = gridDim.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *row = x + (size_t)y * n;
    const uint32_t beg = blockIdx.x * chunk, end = min(n, beg + chunk);
    float v = -INFINITY;
    int i = INT_MAX;
    for (uint32_t j0 = beg + tid; j0 < end; j0 += 4 * SEL_THREADS) {
        float e[4];  // four loads in flight, then compared in index order
#pragma unroll
        for (int u = 0; u < 4; u++) e[u] = j0 + u * SEL_THREADS < end ? __ldg(row + j0 + u * SEL_THREADS) : -INFINITY;
#pragma unroll
        for (int u = 0; u < 4; u++)
            if (e[u] > v) v = e[u], i = (int)(j0 + u * SEL_THREADS);
    }
    argmax_warp(v, i);
    if (lane == 0) sv[w] = v, si[w] = i;
    __syncthreads();
    if (w) return;
    v = lane < SEL_THREADS / 32 ? sv[lane] : -INFINITY;
    i = lane < SEL_THREADS / 32 ? si[lane] : INT_MAX;
    argmax_warp(v, i);
    if (nb == 1) {
        if (lane == 0) ids[y] = i == INT_MAX ? 0 : i;
        return;
    }
    uint32_t ticket = 0;
    if (lane == 0) {
        sc->part_v[y * SEL_MAX_BLOCKS + blockIdx.x] = v;
        sc->part_i[y * SEL_MAX_BLOCKS + blockIdx.x] = i;
        __threadfence();
        ticket = atomicAdd(&sc->done[y], 1u);
    }
    if (__shfl_sync(0xffffffffu, ticket, 0) != (uint32_t)nb - 1) return;
    __threadfence();
    __syncwarp();  // lane 0's acquire (its atomic, then the fence) ordered before every lane's loads
    v = -INFINITY, i = INT_MAX;
    for (int b = lane; b < nb; b += 32)
        argmax_merge(v, i, __ldcg(&sc->part_v[y * SEL_MAX_BLOCKS + b]), __ldcg(&sc->part_i[y * SEL_MAX_BLOCKS + b]));
    argmax_warp(v, i);
    if (lane == 0) ids[y] = i == INT_MAX ? 0 : i, sc->done[y] = 0;
}

int strata_cuda_argmax(struct strata_cuda *cu, int32_t *ids, const float *x, int n_rows, uint32_t n)
{
    if (n_rows <= 0) return 0;
    if (n > (uint32_t)INT_MAX) {
        strata_log_error("cuda: argmax over rows of %u", n);
        return STRATA_EARG;
    }
    unsigned nb = cdiv(n, SEL_CHUNK);
    nb = nb < 1 ? 1 : nb > SEL_MAX_BLOCKS ? SEL_MAX_BLOCKS : nb;
    const uint32_t chunk = n ? cdiv(n, nb) : 1;
    struct sel_scratch *sc = nb > 1 ? (struct sel_scratch *)cu->sel : NULL;
    for (int r0 = 0; r0 < n_rows; r0 += SEL_ROWS) {
        const unsigned rows = n_rows - r0 < SEL_ROWS ? (unsigned)(n_rows - r0) : SEL_ROWS;
        CU_LAUNCH("k_argmax", k_argmax, dim3(nb, rows), SEL_THREADS, 0, ids + r0, x + (size_t)r0 * n, n, chunk, sc);
    }
    return 0;
}

// ---- top-k -------------------------------------------------------------------------------------

// backend.h's topk: each row's k best as sample/sampler.c's strata_top_k orders them (logit
// descending, the lower index on a tie, NaN as -inf, -0 as +0; the logits themselves written, NaN
// as -inf). An element's key is an unsigned number in that order of logits; with its index as
// (key << 32 | ~index) it is a 64-bit number unique in the row whose descending order is the order
// above. Two steps:
//  1. (many blocks a row) each group of 64 elements' largest key;
//  2. (a block a row) T, the k-th largest group key: at least k elements (one a group) are >= T,
//     so the k best are among the elements >= T, which lie in the groups whose key is >= T (about
//     k of them on real logits); those elements are gathered and sorted (bitonic, in shared
//     memory), the first k written. Where more than TOPK_MAX_CAND elements are >= T (many ties:
//     few distinct logits) or the row has more than TOPK_MAX_GROUPS groups, the block selects
//     from the whole row instead: a radix select of the k-th key a byte a pass, the keys above it,
//     and the first of those equal to it in index order.
__device__ __forceinline__ uint32_t topk_key(float f)
{
    if (f != f) return 0x007fffffu;  // NaN: -inf's key
    const uint32_t b = f == 0.0f ? 0u : __float_as_uint(f);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ unsigned long long topk_comp(uint32_t key, uint32_t j)
{
    return (unsigned long long)key << 32 | (uint32_t)~j;
}

// The slot of each lane with `in` among the warp's, after *counter (one atomic a warp); every lane
// of the warp calls it.
__device__ __forceinline__ uint32_t warp_append(bool in, uint32_t *counter)
{
    const uint32_t b = __ballot_sync(0xffffffffu, in), lane = threadIdx.x & 31;
    uint32_t base = 0;
    if (lane == 0 && b) base = atomicAdd(counter, (uint32_t)__popc(b));
    return __shfl_sync(0xffffffffu, base, 0) + __popc(b & ((1u << lane) - 1u));
}

// Step 1: grid (groups / (8 warps x TOPK_GROUPS_WARP), rows); missing elements count as key 0,
// below every element's.
__global__ void __launch_bounds__(SEL_THREADS) k_topk_groups(const float *x, uint32_t n, struct sel_scratch *sc)
{
    pdl_enter();
    const int y = blockIdx.y, lane = threadIdx.x & 31;
    const float *row = x + (size_t)y * n;
    const uint32_t G = (n + TOPK_GROUP - 1) / TOPK_GROUP;
    const uint32_t g0 = (blockIdx.x * (SEL_THREADS / 32) + (threadIdx.x >> 5)) * TOPK_GROUPS_WARP;
    uint32_t m[TOPK_GROUPS_WARP];
#pragma unroll
    for (int u = 0; u < TOPK_GROUPS_WARP; u++) {
        const uint32_t j = (g0 + u) * TOPK_GROUP + lane;
        const uint32_t a = j < n ? topk_key(__ldg(row + j)) : 0u, b = j + 32 < n ? topk_key(__ldg(row + j + 32)) : 0u;
        m[u] = a > b ? a : b;
    }
#pragma unroll
    for (int u = 0; u < TOPK_GROUPS_WARP; u++) {
        const uint32_t r = __reduce_max_sync(0xffffffffu, m[u]);
        if (lane == 0 && g0 + u < G) sc->gkey[y * TOPK_MAX_GROUPS + g0 + u] = r;
    }
}

// The k-th largest (counted with repeats) of the keys key(0 .. m) by the whole block, a byte a
// pass from the top: a histogram of the keys that match the bytes found so far (warp-aggregated
// shared atomics), then warp 0 finds the digit holding the need-th largest. *need_out: how many
// keys equal to the result belong to the k largest. 1 <= k <= m.
template <class Key>
__device__ uint32_t block_kth_largest(Key key, uint32_t m, uint32_t k, uint32_t *hist, uint32_t *bcast,
                                      uint32_t *need_out)
{
    const int tid = threadIdx.x, lane = tid & 31;
    uint32_t prefix = 0, mask = 0, need = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (uint32_t i0 = 0; i0 < m; i0 += blockDim.x) {  // whole warps: __match_any_sync
            const uint32_t i = i0 + tid;
            const uint32_t kk = i < m ? key(i) : 0u;
            const bool in = i < m && (kk & mask) == prefix;
            const uint32_t d = in ? (kk >> shift) & 255u : 256u;
            const uint32_t peers = __match_any_sync(0xffffffffu, d);
            if (in && lane == __ffs(peers) - 1) atomicAdd(&hist[d], (uint32_t)__popc(peers));
        }
        __syncthreads();
        if (tid < 32) {  // lane l: digits 255 - 8 l down to 248 - 8 l
            uint32_t c[8], s = 0;
#pragma unroll
            for (int u = 0; u < 8; u++) c[u] = hist[255 - 8 * lane - u], s += c[u];
            uint32_t incl = s;
            for (int o = 1; o < 32; o <<= 1) {
                const uint32_t t = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += t;
            }
            uint32_t above = incl - s;
            if (above < need && need <= incl) {
#pragma unroll
                for (int u = 0; u < 8; u++) {
                    if (above + c[u] >= need) {
                        bcast[0] = prefix | (uint32_t)(255 - 8 * lane - u) << shift;
                        bcast[1] = need - above;
                        break;
                    }
                    above += c[u];
                }
            }
        }
        __syncthreads();
        prefix = bcast[0], need = bcast[1], mask |= 255u << shift;
        __syncthreads();  // everyone has read bcast and hist before the next pass clears it
    }
    *need_out = need;
    return prefix;
}

struct row_key {
    const float *row;
    __device__ uint32_t operator()(uint32_t i) const { return topk_key(row[i]); }
};
struct smem_key {
    const uint32_t *k;
    __device__ uint32_t operator()(uint32_t i) const { return k[i]; }
};

__global__ void __launch_bounds__(TOPK_THREADS) k_topk_pick(struct strata_token_logit *out, const float *x, uint32_t n,
                                                           int k, const struct sel_scratch *sc)
{
    pdl_enter();
    __shared__ uint32_t gk[TOPK_MAX_GROUPS];
    __shared__ uint16_t glist[TOPK_MAX_GROUPS];
    __shared__ unsigned long long cand[TOPK_MAX_CAND];
    __shared__ uint32_t hist[256], bcast[2], s_warp[TOPK_THREADS / 32], s_n, s_ng;
    const int y = blockIdx.x, tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    const float *row = x + (size_t)y * n;
    const uint32_t G = (n + TOPK_GROUP - 1) / TOPK_GROUP;
    uint32_t C = TOPK_MAX_CAND + 1, need = 0;
    if (tid == 0) s_n = 0, s_ng = 0;
    if (sc) {
        for (uint32_t g = tid; g < G; g += TOPK_THREADS) gk[g] = sc->gkey[y * TOPK_MAX_GROUPS + g];
        __syncthreads();
        const uint32_t T = G > (uint32_t)k ? block_kth_largest(smem_key{gk}, G, (uint32_t)k, hist, bcast, &need) : 0u;
        for (uint32_t g0 = 0; g0 < G; g0 += TOPK_THREADS) {
            const uint32_t g = g0 + tid;
            const bool in = g < G && gk[g] >= T;
            const uint32_t at = warp_append(in, &s_ng);
            if (in) glist[at] = (uint16_t)g;
        }
        __syncthreads();
        const uint32_t ng = s_ng;
        for (uint32_t q = w; q < ng; q += TOPK_THREADS / 32) {
            const uint32_t g = glist[q];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t j = g * TOPK_GROUP + 32 * h + lane;
                const uint32_t kk = j < n ? topk_key(row[j]) : 0u;
                const bool in = j < n && kk >= T;
                const uint32_t at = warp_append(in, &s_n);
                if (in && at < TOPK_MAX_CAND) cand[at] = topk_comp(kk, j);
            }
        }
        __syncthreads();
        C = s_n;
    }
    if (C > TOPK_MAX_CAND) {  // the whole row: the k-th key, the keys above it, the first `need` equal
        __syncthreads();
        const uint32_t T = block_kth_largest(row_key{row}, n, (uint32_t)k, hist, bcast, &need);
        if (tid == 0) s_n = 0;
        __syncthreads();
        for (uint32_t j0 = 0; j0 < n; j0 += TOPK_THREADS) {
            const uint32_t j = j0 + tid;
            const uint32_t kk = j < n ? topk_key(row[j]) : 0u;
            const uint32_t at = warp_append(j < n && kk > T, &s_n);
            if (j < n && kk > T) cand[at] = topk_comp(kk, j);
        }
        __syncthreads();
        uint32_t base = s_n, left = need;  // k - need above T; then tiles in index order
        for (uint32_t j0 = 0; j0 < n && left > 0; j0 += TOPK_THREADS) {
            const uint32_t j = j0 + tid;
            const bool eq = j < n && topk_key(row[j]) == T;
            const uint32_t b = __ballot_sync(0xffffffffu, eq);
            if (lane == 0) s_warp[w] = __popc(b);
            __syncthreads();
            uint32_t before = 0, total = 0;
            for (int i = 0; i < TOPK_THREADS / 32; i++) before += i < w ? s_warp[i] : 0, total += s_warp[i];
            const uint32_t r = before + __popc(b & ((1u << lane) - 1u));
            if (eq && r < left) cand[base + r] = topk_comp(T, j);
            const uint32_t took = total < left ? total : left;
            base += took, left -= took;
            __syncthreads();
        }
        C = (uint32_t)k;
    }
    // bitonic sort, descending, padded with zeros (below every element's number) to a power of two
    uint32_t P = 2;
    while (P < C) P <<= 1;
    for (uint32_t i = C + tid; i < P; i += TOPK_THREADS) cand[i] = 0;
    __syncthreads();
    for (uint32_t size = 2; size <= P; size <<= 1)
        for (uint32_t stride = size / 2; stride > 0; stride >>= 1) {
            for (uint32_t t = tid; t < P / 2; t += TOPK_THREADS) {
                const uint32_t i = (t / stride) * 2 * stride + t % stride, j = i + stride;
                const unsigned long long a = cand[i], b = cand[j];
                if ((a < b) == ((i & size) == 0)) cand[i] = b, cand[j] = a;
            }
            __syncthreads();
        }
    struct strata_token_logit *o = out + (size_t)y * k;
    for (int i = tid; i < k; i += TOPK_THREADS) {
        const int id = (int)~(uint32_t)cand[i];
        const float v = row[id];
        o[i] = {id, v != v ? -INFINITY : v};
    }
}

int strata_cuda_topk(struct strata_cuda *cu, struct strata_token_logit *out, const float *x, int n_rows, uint32_t n,
                     int k)
{
    if (n_rows <= 0) return 0;
    if (n > (uint32_t)INT_MAX || k < 1 || k > STRATA_TOP_K_MAX || (uint32_t)k > n) {
        strata_log_error("cuda: topk of %d over rows of %u", k, n);
        return STRATA_EARG;
    }
    const uint32_t G = cdiv(n, TOPK_GROUP);
    struct sel_scratch *sc = G <= TOPK_MAX_GROUPS ? (struct sel_scratch *)cu->sel : NULL;
    for (int r0 = 0; r0 < n_rows; r0 += SEL_ROWS) {
        const unsigned rows = n_rows - r0 < SEL_ROWS ? (unsigned)(n_rows - r0) : SEL_ROWS;
        const float *xr = x + (size_t)r0 * n;
        if (sc)
            CU_LAUNCH("k_topk_groups", k_topk_groups, dim3(cdiv(G, SEL_THREADS / 32 * TOPK_GROUPS_WARP), rows),
                      SEL_THREADS, 0, xr, n, sc);
        CU_LAUNCH("k_topk_pick", k_topk_pick, rows, TOPK_THREADS, 0, out + (size_t)r0 * k, xr, n, k,
                  (const struct sel_scratch *)sc);
    }
    return 0;
}
