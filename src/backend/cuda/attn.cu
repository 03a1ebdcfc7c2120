// Causal attention over an F32 or F16 KV cache, split-K for every batch size.
//
// The positions 0..pos[t] a query attends to are cut into chunks of ATTN_CHUNK; a block takes one
// chunk of one KV head for up to ATTN_TOK query tokens, stages the chunk's keys and values in
// shared memory ATTN_SUB positions at a time, and each warp runs the online softmax of one query
// head (of the KV head's group) for each of the block's tokens: a partial maximum, sum and
// unnormalised output per (token, head, chunk). A second kernel merges the chunks of each
// (token, head) in chunk order. Every (token, head) goes through the same chunks with the same
// operations whether it is alone (decode) or in a prompt of hundreds: a token's output never
// depends on its batch. Prompts share each staged chunk among ATTN_TOK tokens; long decodes
// spread over many chunks (flash-decoding).
//
// The options of backend.h's attention op (a sliding window, a visibility mask, MLA's latent rows
// as values, head dims past 256, key and value widths apart) go through a second chunk kernel,
// k_attn_part_ext, so that the plain one (qwen3moe's decode) keeps its code and its bits. It
// splits the query heads of a KV head over blocks (MLA: 128 heads of 576 share one KV head), stages
// one chunk's rows in rounds of registers and computes each (token, head) of the block in turn,
// one warp each: scores of the chunk's positions one per lane, masked ones -inf, the chunk's
// maximum, sum and weighted values. A chunk a token reaches but sees nothing of (window, mask)
// leaves maximum -inf, sum 0 and output 0, which the merge weighs 0; the merge reads only the
// chunks from the window's first on, so it never reads one the token did not write. Sinks join
// the merge: the maximum and, as exp(sink - max), the sum. MLA's latent case (keys up to 576) has its
// own chunk kernel, k_attn_mla (chunks of 64, 16 or 32 heads per block on register tiles); the
// older path (k_attn_part_ext) stays for A/B behind STRATA_CUDA_MLA_OLD=1.
#include <cuda_runtime.h>
#include <stdlib.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/round.cuh"

#define ATTN_CHUNK STRATA_CUDA_ATTN_CHUNK  // positions per chunk (the split, fixed): a decode token's blocks are many, each short
#define ATTN_SUB 32      // positions staged at a time
#define ATTN_TOK 8       // query tokens per block
#define ATTN_WARPS 8     // query heads per pass
#define ATTN_PASS_MAX 512  // most tokens per pass of the host loop (STRATA_CUDA_ATTN_PASS: 1 .. this; cuda.h)
#define ATTN_SCRATCH_MAX STRATA_CUDA_ATTN_SCRATCH_MAX  // floats of partial results a pass may fill (fewer tokens then)
#define ATTN_DMAX 256    // largest head dim
#define ATTN_SMEM_MAX (200 * 1024)

// Staging of one sub-chunk of keys and values: each thread holds up to KV_REG groups of 4
// consecutive elements of each in registers (one 16-byte load per group for F32, 8 bytes for F16),
// all issued at once, so a sub-chunk costs one memory latency; the next sub-chunk's loads are in
// flight while the current one is computed.
#define PART_STRIDE(Dv) STRATA_CUDA_ATTN_PART_STRIDE(Dv)
#define KV_REG (ATTN_SUB * ATTN_DMAX / 4 / (ATTN_WARPS * 32))
#define KSTRIDE(D) ((D) + 4)  // floats between staged keys: 16-byte rows, a quarter warp's float4 reads on distinct banks

__device__ __forceinline__ float4 kv_load4(const void *p, bool f16, size_t i)
{
    if (!f16) return *(const float4 *)((const float *)p + i);
    const uint2 u = *(const uint2 *)((const __half *)p + i);
    const float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}

struct kv_regs {
    float4 k[KV_REG], v[KV_REG];
};

__device__ __forceinline__ void kv_fetch(const struct strata_cuda_attn &a, uint32_t D, uint32_t Dv, int kvh, int s0,
                                         int ns, kv_regs &r)
{
    const uint32_t D4 = D / 4, V4 = Dv / 4;
#pragma unroll
    for (int j = 0; j < KV_REG; j++) {
        const uint32_t g = threadIdx.x + j * ATTN_WARPS * 32;
        if (g < (uint32_t)ns * D4)
            r.k[j] = kv_load4(a.k, a.kv_f16, (size_t)(s0 + g / D4) * a.kv_stride + (size_t)kvh * D + 4 * (g % D4));
        if (g < (uint32_t)ns * V4)
            r.v[j] = kv_load4(a.v, a.kv_f16, (size_t)(s0 + g / V4) * a.kv_stride + (size_t)kvh * Dv + 4 * (g % V4));
    }
}

// VS: floats between staged value rows.
__device__ __forceinline__ void kv_stage(uint32_t D, uint32_t Dv, int ns, const kv_regs &r, float *sk, float *sv,
                                         uint32_t VS)
{
    const uint32_t D4 = D / 4, V4 = Dv / 4;
#pragma unroll
    for (int j = 0; j < KV_REG; j++) {
        const uint32_t g = threadIdx.x + j * ATTN_WARPS * 32;
        if (g < (uint32_t)ns * D4) *(float4 *)(sk + (g / D4) * KSTRIDE(D) + 4 * (g % D4)) = r.k[j];
        if (g < (uint32_t)ns * V4) *(float4 *)(sv + (g / V4) * VS + 4 * (g % V4)) = r.v[j];
    }
}

// q . k over D dims of two 16-byte aligned rows in shared memory, the products added in dimension
// order (UNROLL: the loop's unroll, which does not change the order).
template <int UNROLL>
__device__ __forceinline__ float row_dot(const float *q, const float *k, uint32_t D)
{
    float dot = 0.0f;
#pragma unroll UNROLL
    for (uint32_t dd = 0; dd < D; dd += 4) {
        const float4 qv = *(const float4 *)(q + dd), kv = *(const float4 *)(k + dd);
        dot = __fmaf_rn(qv.x, kv.x, dot);
        dot = __fmaf_rn(qv.y, kv.y, dot);
        dot = __fmaf_rn(qv.z, kv.z, dot);
        dot = __fmaf_rn(qv.w, kv.w, dot);
    }
    return dot;
}

// One (token, head, chunk)'s scratch row from its warp: output dims lane + 32 j, then max and sum.
template <int J>
__device__ __forceinline__ void part_store(float *out, const float (&o)[J], float m, float l, uint32_t Dv, int lane)
{
#pragma unroll
    for (int j = 0; j < J; j++) {
        const uint32_t dd = lane + 32 * j;
        if (dd < Dv) out[dd] = o[j];
    }
    if (lane == 0) {
        out[Dv] = m;
        out[Dv + 1] = l;
    }
}

// scratch layout per (token, head, chunk): [Dv] output, then max, sum, two floats of padding (rows
// of 16 bytes for the merge's wide loads). NT: query tokens per block
// (1 for decode, ATTN_TOK for prompts); DK: the head dim (keys and values) when known at compile
// time (loops unrolled), 0: any. A token's operations are the same for every NT and DK.
template <int NT, int DK>
__global__ void __launch_bounds__(ATTN_WARPS * 32) k_attn_part(const struct strata_cuda_attn a, int t_begin,
                                                               int n_tok, int n_chunks)
{
    pdl_enter();
    extern __shared__ __align__(16) float sm[];
    const uint32_t D = DK ? DK : a.D, Dv = DK ? DK : a.Dv, G = a.H / a.Hkv;
    float *sk = sm;                                  // [ATTN_SUB][D + 4]
    float *sv = sk + ATTN_SUB * KSTRIDE(D);          // [ATTN_SUB][Dv]
    float *sq = sv + ATTN_SUB * Dv;                  // [NT][G][D] queries of the block
    const int chunk = blockIdx.x, kvh = blockIdx.y, tg = blockIdx.z * NT;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    // tokens of this block that reach this chunk
    int last = -1;  // largest position any of them attends to
    for (int i = 0; i < NT && tg + i < n_tok; i++) last = max(last, a.pos[t_begin + tg + i]);
    const int p0 = chunk * ATTN_CHUNK;
    if (p0 > last) return;
    const int p1 = min(p0 + ATTN_CHUNK, last + 1);
    const int ntk = min(NT, n_tok - tg);
    const uint32_t qh = a.q_head_stride ? a.q_head_stride : D;
    // the first sub-chunk's keys and values in flight while the queries are staged (one memory
    // latency for both: a decode block's life is a few of them)
    kv_regs r;
    kv_fetch(a, D, Dv, kvh, p0, min(ATTN_SUB, p1 - p0), r);
    for (uint32_t i = threadIdx.x; i < (uint32_t)ntk * G * D; i += blockDim.x) {
        const uint32_t tt = i / (G * D), hh = (i / D) % G, dd = i % D;
        sq[i] = a.q[(size_t)(t_begin + tg + tt) * a.q_stride + (size_t)(kvh * G + hh) * qh + dd];
    }
    // per (token, head) of this warp: running max, sum, output dims lane + 32 j
    constexpr int MAXJ = ATTN_DMAX / 32;
    const int nh = ((int)G + ATTN_WARPS - 1) / ATTN_WARPS;  // heads per warp
    for (int hp = 0; hp < nh; hp++) {
        const int hh = warp + ATTN_WARPS * hp;  // head within the group (uniform per warp)
        float m[NT], l[NT], o[NT][MAXJ];
#pragma unroll
        for (int i = 0; i < NT; i++) {
            m[i] = -INFINITY;
            l[i] = 0.0f;
#pragma unroll
            for (int j = 0; j < MAXJ; j++) o[i][j] = 0.0f;
        }
        if (hp > 0) kv_fetch(a, D, Dv, kvh, p0, min(ATTN_SUB, p1 - p0), r);
        for (int s0 = p0; s0 < p1; s0 += ATTN_SUB) {
            const int ns = min(ATTN_SUB, p1 - s0);
            __syncthreads();  // the previous sub-chunk (and the queries' staging) done
            kv_stage(D, Dv, ns, r, sk, sv, Dv);
            __syncthreads();
            if (s0 + ATTN_SUB < p1) kv_fetch(a, D, Dv, kvh, s0 + ATTN_SUB, min(ATTN_SUB, p1 - s0 - ATTN_SUB), r);
            if (hh >= (int)G) continue;
#pragma unroll
            for (int i = 0; i < NT; i++) {
                if (i >= ntk) break;
                const int pos = a.pos[t_begin + tg + i];
                if (s0 > pos) continue;
                // lane = position s0 + lane: its score, the products added in dimension order
                const float *q = sq + ((size_t)i * G + hh) * D;
                float sc = -INFINITY;
                const int pl = s0 + lane;
                if (lane < ns && pl <= pos) sc = __fmul_rn(row_dot<32>(q, sk + lane * KSTRIDE(D), D), a.scale);
                const float mx = fmaxf(m[i], warp_max(sc));
                const float alpha = expf(__fsub_rn(m[i], mx));   // 0 when m was -inf
                const float pr = sc == -INFINITY ? 0.0f : expf(__fsub_rn(sc, mx));
                l[i] = __fadd_rn(__fmul_rn(l[i], alpha), warp_sum(pr));
                m[i] = mx;
                float acc[MAXJ];
#pragma unroll
                for (int j = 0; j < MAXJ; j++) acc[j] = __fmul_rn(o[i][j], alpha);
#pragma unroll 8
                for (int pp = 0; pp < ns; pp++) {
                    const float w = __shfl_sync(0xffffffffu, pr, pp);
#pragma unroll
                    for (int j = 0; j < MAXJ; j++) {
                        const uint32_t dd = lane + 32 * j;
                        if (dd < Dv) acc[j] = __fmaf_rn(w, sv[pp * Dv + dd], acc[j]);
                    }
                }
#pragma unroll
                for (int j = 0; j < MAXJ; j++) o[i][j] = acc[j];
            }
        }
        if (hh >= (int)G) continue;
#pragma unroll
        for (int i = 0; i < NT; i++) {
            if (i >= ntk) break;
            if (p0 > a.pos[t_begin + tg + i]) continue;
            const int h = kvh * G + hh;
            part_store(a.scratch + (((size_t)(tg + i) * a.H + h) * n_chunks + chunk) * PART_STRIDE(Dv), o[i], m[i], l[i],
                       Dv, lane);
        }
    }
}

// ---- the plain case on the tensor cores ----------------------------------------------------------
//
// k_attn_mma takes what k_attn_part takes (head dims multiples of 8, values of 16) with the chunk's
// products on the tensor cores. A block takes one chunk (ATTN_CHUNK positions) of one KV head for
// up to nt tokens, whose (token, head) pairs are the rows of the query tile (a decode token's GQA
// group of 8 is one 8-row tile), in three steps with a barrier between them:
//   scores   S^T = K Q^T in tiles of 16 positions x 8 rows (mma m16n8k8, the head dim in steps
//            of 8), a warp a tile, into shared memory;
//   softmax  a warp a row, a lane a position: scaled, the positions past the row's own -inf, the
//            chunk's maximum and sum (warp_max, warp_sum), the weights in place of the scores;
//   values   O^T = V^T P^T in tiles of 16 value dims x 8 rows (the positions in 4 steps of 8), a
//            warp a tile, written as k_attn_part's scratch rows (output, maximum, sum).
// The tensor cores take TF32 (10 mantissa bits). Each F32 operand x is split into hi = tf32(x) and
// lo = tf32(x - hi) and a product taken as hi.lo + lo.hi + hi.hi (3xTF32; the dropped lo.lo is
// about 2^-22 of it), the three terms in their own accumulators, added at the end (hi.lo + lo.hi)
// + hi.hi: errors of F32's order, within 1e-5 of the CPU as the scalar kernel. An F16 cache's keys
// and values are exact in TF32 (lo = 0): two terms. Every element's chain of steps is fixed by its
// row, its position or dim and the shape; which warp computes it does not change it, so a decode
// token's few tiles spread over the warps (short chains) and a token has the same bits alone, in a
// decode pass or in a prompt. A row always takes all 32 positions of the chunk: past the block's
// last they have zero keys and values and weight 0, past the row's own weight 0 (zeros added).
#define MMA_PSTRIDE 36   // floats between rows of the scores / weights (32 positions): distinct banks
#define MMA_VSTRIDE(Dv) ((Dv) + 8)  // floats between staged value rows: a fragment's 32 loads on distinct banks
#define MMA_QSTRIDE(D) ((D) + 4)
#define MMA_QREG 8       // the queries' 16-byte loads a thread has in flight
#define MMA_NT_MAX 32    // tokens a block at most (a lane's position each)

__device__ __forceinline__ uint32_t tf32_rna(float x)
{
    uint32_t r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ void tf32_split(float x, uint32_t &hi, uint32_t &lo)
{
    hi = tf32_rna(x);
    lo = tf32_rna(__fsub_rn(x, __uint_as_float(hi)));
}

// c += a b for a 16 x 8 (row) tile a, 8 x 8 (col) b, F32 accumulators (m16n8k8, TF32 inputs).
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The three terms of a x b into c[0] (hi.lo), c[1] (lo.hi; not for F16, whose a is exact) and c[2]
// (hi.hi): a's four F32 elements x (the cache's), b's words split.
template <bool F16>
__device__ __forceinline__ void mma_terms(float (&c)[3][4], const float (&x)[4], uint32_t bh0, uint32_t bl0,
                                          uint32_t bh1, uint32_t bl1)
{
    uint32_t ah[4], al[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        if (F16) ah[i] = __float_as_uint(x[i]), al[i] = 0;
        else tf32_split(x[i], ah[i], al[i]);
    }
    mma_tf32(c[0], ah, bl0, bl1);
    if (!F16) mma_tf32(c[1], al, bh0, bh1);
    mma_tf32(c[2], ah, bh0, bh1);
}

template <bool F16>
__device__ __forceinline__ float terms_sum(const float (&c)[3][4], int i)
{
    return __fadd_rn(F16 ? c[0][i] : __fadd_rn(c[0][i], c[1][i]), c[2][i]);
}

// Shared memory of k_attn_mma for nt tokens a block: keys, values, scores, queries, maxima and sums.
__host__ __device__ __forceinline__ size_t mma_smem_floats(uint32_t D, uint32_t Dv, uint32_t G, int nt)
{
    const size_t rows = ((size_t)nt * G + 7) / 8 * 8;
    return (size_t)ATTN_CHUNK * KSTRIDE(D) + (size_t)ATTN_CHUNK * MMA_VSTRIDE(Dv) +
           rows * (MMA_PSTRIDE + MMA_QSTRIDE(D) + 2);
}

// DK: the head dim (keys and values alike) when known at compile time, 0: any (multiples of 8 /
// 16 up to ATTN_DMAX). F16: the cache's type.
template <int DK, bool F16>
__global__ void __launch_bounds__(ATTN_WARPS * 32) k_attn_mma(const struct strata_cuda_attn a, int t_begin, int n_tok,
                                                              int n_chunks, int nt)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    pdl_enter();
    extern __shared__ __align__(16) float sm[];
    const uint32_t D = DK ? DK : a.D, Dv = DK ? DK : a.Dv, G = a.H / a.Hkv;
    const uint32_t KS = KSTRIDE(D), VS = MMA_VSTRIDE(Dv), QS = MMA_QSTRIDE(D);
    const int chunk = blockIdx.x, kvh = blockIdx.y, tg = blockIdx.z * nt;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int ntk = min(nt, n_tok - tg);
    __shared__ int spos[MMA_NT_MAX];  // the block's tokens' positions (-1 past them)
    const int pl = lane < ntk ? a.pos[t_begin + tg + lane] : -1;  // one load a lane, all at once
    const int last = __reduce_max_sync(0xffffffffu, pl);  // the largest position a token of the block attends to
    if (warp == 0) spos[lane] = pl;
    const int p0 = chunk * ATTN_CHUNK;
    if (p0 > last) return;
    const int ns = min(ATTN_CHUNK, last + 1 - p0);
    const int nrows = ntk * (int)G, ntiles = (nrows + 7) / 8;
    float *sk = sm;                                  // [ATTN_CHUNK][KS]
    float *sv = sk + ATTN_CHUNK * KS;                // [ATTN_CHUNK][VS]
    float *ss = sv + ATTN_CHUNK * VS;                // [8 ntiles][MMA_PSTRIDE] scores, then weights
    float *sq = ss + ntiles * 8 * MMA_PSTRIDE;       // [8 ntiles][QS]
    float *sml = sq + ntiles * 8 * QS;               // [8 ntiles][2] maximum, sum
    kv_regs r;
    kv_fetch(a, D, Dv, kvh, p0, ns, r);  // in flight while the queries are staged
    // the queries, rows past the block's zero: MMA_QREG 16-byte loads a thread in flight at once (a
    // loop of one load each took a memory latency a float: most of a decode block's life)
    const uint32_t qh = a.q_head_stride ? a.q_head_stride : D, D4 = D / 4, nq4 = (uint32_t)ntiles * 8 * D4;
    for (uint32_t base = 0; base < nq4; base += MMA_QREG * ATTN_WARPS * 32) {
        float4 v[MMA_QREG];
#pragma unroll
        for (int j = 0; j < MMA_QREG; j++) {
            const uint32_t e = base + threadIdx.x + j * ATTN_WARPS * 32, row = e / D4;
            v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            if (e < nq4 && (int)row < nrows)
                v[j] = *(const float4 *)(a.q + (size_t)(t_begin + tg + row / G) * a.q_stride +
                                         (size_t)(kvh * G + row % G) * qh + 4 * (e % D4));
        }
#pragma unroll
        for (int j = 0; j < MMA_QREG; j++) {
            const uint32_t e = base + threadIdx.x + j * ATTN_WARPS * 32;
            if (e < nq4) *(float4 *)(sq + (e / D4) * QS + 4 * (e % D4)) = v[j];
        }
    }
    kv_stage(D, Dv, ns, r, sk, sv, VS);
    // the positions past the block's last: zero keys and values (weight 0 times a finite value)
    for (uint32_t i = threadIdx.x; i < (uint32_t)(ATTN_CHUNK - ns) * D; i += blockDim.x)
        sk[(ns + i / D) * KS + i % D] = 0.0f;
    for (uint32_t i = threadIdx.x; i < (uint32_t)(ATTN_CHUNK - ns) * Dv; i += blockDim.x)
        sv[(ns + i / Dv) * VS + i % Dv] = 0.0f;
    __syncthreads();
    // scores: tile w = 2 n + mt covers positions 16 mt .. 16 mt + 15 and rows 8 n .. 8 n + 7;
    // element i of a lane: position 16 mt + g + 8 (i >> 1), row 8 n + 2 t4 + (i & 1)
    for (int w = warp; w < 2 * ntiles; w += ATTN_WARPS) {
        const int n = w >> 1, mt = w & 1;
        float c[3][4] = {};  // the hi.lo, lo.hi and hi.hi terms
        const float *qr = sq + (8 * n + g) * QS + t4, *kr = sk + (16 * mt + g) * KS + t4;
#pragma unroll 8
        for (uint32_t d0 = 0; d0 < D; d0 += 8) {
            uint32_t bh0, bl0, bh1, bl1;
            tf32_split(qr[d0], bh0, bl0);
            tf32_split(qr[d0 + 4], bh1, bl1);
            const float x[4] = {kr[d0], kr[8 * KS + d0], kr[d0 + 4], kr[8 * KS + d0 + 4]};
            mma_terms<F16>(c, x, bh0, bl0, bh1, bl1);
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
            ss[(8 * n + 2 * t4 + (i & 1)) * MMA_PSTRIDE + 16 * mt + g + 8 * (i >> 1)] = terms_sum<F16>(c, i);
    }
    __syncthreads();
    // softmax: a warp a row, lane = position p0 + lane
    for (int row = warp; row < 8 * ntiles; row += ATTN_WARPS) {
        const int rp = row < nrows ? spos[row / (int)G] : -1;
        float *sr = ss + row * MMA_PSTRIDE;
        const float sc = p0 + lane <= rp ? __fmul_rn(sr[lane], a.scale) : -INFINITY;
        const float mx = warp_max(sc);  // -inf for a row that sees nothing here (not stored)
        const float pr = sc == -INFINITY ? 0.0f : expf(__fsub_rn(sc, mx));
        const float l = warp_sum(pr);
        sr[lane] = pr;
        if (lane == 0) sml[2 * row] = mx, sml[2 * row + 1] = l;
    }
    __syncthreads();
    // values: tile w = n vt + v covers dims 16 v .. 16 v + 15 and rows 8 n .. 8 n + 7; element i
    // of a lane: dim 16 v + g + 8 (i >> 1), row 8 n + 2 t4 + (i & 1)
    const int vt = (int)Dv / 16;
    for (int w = warp; w < ntiles * vt; w += ATTN_WARPS) {
        const int n = w / vt, v = w % vt;
        float c[3][4] = {};  // the hi.lo, lo.hi and hi.hi terms
        const float *pr = ss + (8 * n + g) * MMA_PSTRIDE + t4, *vr = sv + t4 * VS + 16 * v + g;
#pragma unroll
        for (int k0 = 0; k0 < ATTN_CHUNK; k0 += 8) {
            uint32_t bh0, bl0, bh1, bl1;
            tf32_split(pr[k0], bh0, bl0);
            tf32_split(pr[k0 + 4], bh1, bl1);
            const float x[4] = {vr[k0 * VS], vr[k0 * VS + 8], vr[(k0 + 4) * VS], vr[(k0 + 4) * VS + 8]};
            mma_terms<F16>(c, x, bh0, bl0, bh1, bl1);
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int row = 8 * n + 2 * t4 + e;
            if (row >= nrows) continue;
            const int t = tg + row / (int)G;
            if (p0 > spos[row / (int)G]) continue;  // its token does not reach this chunk
            float *out = a.scratch + (((size_t)t * a.H + kvh * G + row % (int)G) * n_chunks + chunk) * PART_STRIDE(Dv);
            out[16 * v + g] = terms_sum<F16>(c, e);
            out[16 * v + g + 8] = terms_sum<F16>(c, 2 + e);
            if (v == 0 && g == 0) {
                out[Dv] = sml[2 * row];
                out[Dv + 1] = sml[2 * row + 1];
            }
        }
    }
#endif
}

// The first position token `pos` sees (its sliding window's start; 0 without one).
__device__ __host__ __forceinline__ int attn_lo(int pos, uint32_t n_swa)
{
    return n_swa && pos + 1 > (int)n_swa ? pos + 1 - (int)n_swa : 0;
}

// Rows s0 .. s0 + ns - 1 of W elements (starting at element `off` of each row, rows `stride`
// apart) into shared memory, dst_stride floats apart: KV_REG 16- or 8-byte loads per thread in
// flight, then their stores, as many rounds as the rows need.
__device__ __forceinline__ void stage_rows(const void *src, bool f16, size_t stride, size_t off, uint32_t W, int s0,
                                           int ns, float *dst, uint32_t dst_stride)
{
    const uint32_t W4 = W / 4, n = (uint32_t)ns * W4;
    for (uint32_t base = 0; base < n; base += KV_REG * ATTN_WARPS * 32) {
        float4 r[KV_REG];
#pragma unroll
        for (int j = 0; j < KV_REG; j++) {
            const uint32_t g = base + threadIdx.x + j * ATTN_WARPS * 32;
            if (g < n) r[j] = kv_load4(src, f16, (size_t)(s0 + g / W4) * stride + off + 4 * (g % W4));
        }
#pragma unroll
        for (int j = 0; j < KV_REG; j++) {
            const uint32_t g = base + threadIdx.x + j * ATTN_WARPS * 32;
            if (g < n) *(float4 *)(dst + (g / W4) * dst_stride + 4 * (g % W4)) = r[j];
        }
    }
}

// One chunk of one KV head for the heads h0 .. h0 + hb - 1 of its group and up to nt tokens
// (grid: chunks from c_first, Hkv x slices of hb heads, token groups), with the options. The
// scratch rows are k_attn_part's. VJ: output dims per lane (Dv <= 32 VJ). A (token, head, chunk)
// takes the same operations whatever nt, hb and the other tokens: its scores in dimension order,
// the chunk's maximum and sum over the 32 lanes, its weighted values in position order (positions
// past its own weigh +0, which leaves every sum as it is).
template <int VJ>
__global__ void __launch_bounds__(ATTN_WARPS * 32) k_attn_part_ext(const struct strata_cuda_attn a, int t_begin,
                                                                   int n_tok, int n_chunks, int c_first, int nt,
                                                                   int hb, int n_slices)
{
    pdl_enter();
    extern __shared__ __align__(16) float sm[];
    const uint32_t D = a.D, Dv = a.Dv, G = a.H / a.Hkv;
    const int chunk = c_first + blockIdx.x, kvh = blockIdx.y / n_slices, h0 = blockIdx.y % n_slices * hb;
    const int tg = blockIdx.z * nt, ntk = min(nt, n_tok - tg), nhb = min(hb, (int)G - h0);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int p0 = chunk * ATTN_CHUNK;
    int last = -1;  // largest position a token of the block that reaches this chunk attends to
    for (int i = 0; i < ntk; i++) {
        const int pos = a.pos[t_begin + tg + i];
        if (p0 <= pos && p0 + ATTN_CHUNK > attn_lo(pos, a.n_swa)) last = max(last, pos);
    }
    if (last < 0 || nhb <= 0) return;
    const int ns = min(ATTN_CHUNK, last + 1 - p0);
    const uint32_t vrow = a.latent ? KSTRIDE(D) : Dv;  // floats between staged value rows
    float *sk = sm;                                                    // [ns][D + 4]
    float *sv = a.latent ? sk : sk + ATTN_CHUNK * KSTRIDE(D);         // [ns][Dv] (latent: the key rows)
    float *sq = sk + ATTN_CHUNK * KSTRIDE(D) + (a.latent ? 0 : ATTN_CHUNK * Dv);  // [ntk][hb][D]
    const uint32_t qh = a.q_head_stride ? a.q_head_stride : D;
    const uint32_t nq = (uint32_t)(ntk * hb) * D;
#pragma unroll 4
    for (uint32_t i = threadIdx.x; i < nq; i += blockDim.x) {
        const uint32_t tt = i / (hb * D), hh = (i / D) % hb, dd = i % D;
        if ((int)hh < nhb)
            sq[i] = a.q[(size_t)(t_begin + tg + tt) * a.q_stride + (size_t)(kvh * G + h0 + hh) * qh + dd];
    }
    stage_rows(a.k, a.kv_f16, a.kv_stride, (size_t)kvh * D, D, p0, ns, sk, KSTRIDE(D));
    if (!a.latent)
        stage_rows(a.v, a.kv_f16, a.v_stride ? a.v_stride : a.kv_stride, (size_t)kvh * Dv, Dv, p0, ns, sv, Dv);
    __syncthreads();
    for (int w = warp; w < ntk * nhb; w += ATTN_WARPS) {
        const int i = w / nhb, hh = w % nhb, t = t_begin + tg + i, pos = a.pos[t], lo = attn_lo(pos, a.n_swa);
        if (p0 > pos || p0 + ATTN_CHUNK <= lo) continue;  // this token does not reach the chunk
        const int pl = p0 + lane;
        bool seen = lane < ns && pl <= pos && pl >= lo;
        if (seen && a.visible) seen = a.visible[(size_t)t * a.visible_stride + pl] != 0;
        float sc = -INFINITY;
        if (seen) sc = __fmul_rn(row_dot<8>(sq + ((size_t)i * hb + hh) * D, sk + lane * KSTRIDE(D), D), a.scale);
        const float mx = warp_max(sc);  // -inf when the token sees nothing here
        const float pr = seen ? expf(__fsub_rn(sc, mx)) : 0.0f;
        const float l = warp_sum(pr);
        float o[VJ];
#pragma unroll
        for (int j = 0; j < VJ; j++) o[j] = 0.0f;
#pragma unroll 4
        for (int pp = 0; pp < ns; pp++) {
            const float wt = __shfl_sync(0xffffffffu, pr, pp);
#pragma unroll
            for (int j = 0; j < VJ; j++) {
                const uint32_t dd = lane + 32 * j;
                if (dd < Dv) o[j] = __fmaf_rn(wt, sv[pp * vrow + dd], o[j]);
            }
        }
        const int h = kvh * G + h0 + hh;
        part_store(a.scratch + (((size_t)(tg + i) * a.H + h) * n_chunks + chunk) * PART_STRIDE(Dv), o, mx, l, Dv, lane);
    }
}

// MLA's latent case (values: the first Dv floats of each key row; no V cache): chunks of MLA_CHUNK
// positions, each block one chunk of one token for PB query heads at once, so a chunk's keys are
// staged once for PB heads (not 16 (token, head) pairs) and a chunk's partial rows (Dv + 4 floats
// per head) cover twice the positions. The chunk goes through shared memory MLA_SUB positions at a
// time (the next sub-chunk's loads in flight in registers while the current one is computed), each
// sub-chunk in three steps, every thread on register tiles instead of one scalar chain per lane:
//   dots     thread: PB / 16 heads x 1 position, q . k in dimension order (one FMA chain each);
//   softmax  warp: PB / 8 heads, lane = position: masked ones -inf, the running maximum and sum
//            of the online softmax (the plain kernel's steps), the weights to shared memory;
//   values   thread: 2 output dims x PB heads, o = o alpha, then + w v in position order.
// A (token, head, chunk)'s operations depend only on its positions and the shape (the sub-chunks
// are fixed by position; the heads per block, PB, change who computes, not what), so a token has
// the same bits in any batch. A chunk the token sees nothing of (a mask hiding it whole) ends with
// maximum -inf, sum 0 and output 0 (alpha is 0, not exp(-inf + inf), while the maximum is -inf).
#define MLA_CHUNK 64     // positions per chunk (the split of the latent case, fixed)
#define MLA_SUB 16       // positions staged at a time
#define MLA_THREADS 256
#define MLA_KREG 9       // float4 per thread of a staged sub-chunk: keys up to MLA_DMAX floats
#define MLA_DMAX (MLA_KREG * MLA_THREADS * 4 / MLA_SUB)  // 576 (DeepSeek-V3, Kimi K2, GLM-5)
#define MLA_DVMAX (2 * MLA_THREADS)                      // 512: two output dims per thread

__device__ __forceinline__ void mla_fetch(const struct strata_cuda_attn &a, uint32_t D, int kvh, int s0, int ns,
                                          float4 (&r)[MLA_KREG])
{
    const uint32_t D4 = D / 4;
#pragma unroll
    for (int j = 0; j < MLA_KREG; j++) {
        const uint32_t g = threadIdx.x + j * MLA_THREADS;
        if (g < (uint32_t)ns * D4)
            r[j] = kv_load4(a.k, a.kv_f16, (size_t)(s0 + g / D4) * a.kv_stride + (size_t)kvh * D + 4 * (g % D4));
    }
}

__device__ __forceinline__ void mla_stage(uint32_t D, int ns, const float4 (&r)[MLA_KREG], float *sk)
{
    const uint32_t D4 = D / 4;
#pragma unroll
    for (int j = 0; j < MLA_KREG; j++) {
        const uint32_t g = threadIdx.x + j * MLA_THREADS;
        if (g < (uint32_t)ns * D4) *(float4 *)(sk + (g / D4) * KSTRIDE(D) + 4 * (g % D4)) = r[j];
    }
}

// One chunk of one token for the heads h0 .. h0 + hb - 1 (hb <= PB) of a KV head's group (grid:
// chunks from c_first, Hkv x slices of hb heads, the pass's tokens). The scratch rows are
// k_attn_part's, chunks of MLA_CHUNK.
template <int PB>
__global__ void __launch_bounds__(MLA_THREADS) k_attn_mla(const struct strata_cuda_attn a, int t_begin, int n_chunks,
                                                          int c_first, int hb, int n_slices)
{
    static_assert(PB % 16 == 0 && PB <= 32, "heads per block: 16 or 32");
    constexpr int QP = PB / 16;  // heads per thread in the dots
    constexpr int SP = PB / 8;   // heads per warp in the softmax
    pdl_enter();
    extern __shared__ __align__(16) float sm[];
    const uint32_t D = a.D, Dv = a.Dv, G = a.H / a.Hkv, ks = KSTRIDE(D);
    const int chunk = c_first + blockIdx.x, kvh = blockIdx.y / n_slices, h0 = blockIdx.y % n_slices * hb;
    const int nhb = min(hb, (int)G - h0), t = t_begin + blockIdx.z, pos = a.pos[t], lo = attn_lo(pos, a.n_swa);
    const int p0 = chunk * MLA_CHUNK;
    if (p0 > pos || p0 + MLA_CHUNK <= lo || nhb <= 0) return;  // the token does not reach this chunk
    const int p1 = min(p0 + MLA_CHUNK, pos + 1);                 // positions p0 .. p1 - 1 staged
    float *sq = sm;                     // [PB][D + 4] the heads' queries (zeros past nhb)
    float *sk = sq + PB * ks;           // [MLA_SUB][D + 4] keys; the values are their first Dv
    float *ss = sk + MLA_SUB * ks;      // [PB][MLA_SUB] dots
    float *sp = ss + PB * MLA_SUB;      // [MLA_SUB][PB] weights
    float *salpha = sp + MLA_SUB * PB;  // [PB] the outputs' rescale
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const uint32_t qh = a.q_head_stride ? a.q_head_stride : D;
    for (uint32_t i = tid; i < PB * D; i += MLA_THREADS) {
        const uint32_t hh = i / D, dd = i % D;
        sq[hh * ks + dd] =
            (int)hh < nhb ? a.q[(size_t)t * a.q_stride + (size_t)(kvh * G + h0 + hh) * qh + dd] : 0.0f;
    }
    float4 r[MLA_KREG];
    mla_fetch(a, D, kvh, p0, min(MLA_SUB, p1 - p0), r);
    // dots: position qpos of the sub-chunk, heads qrow + 16 k (a warp: 4 rows x 8 positions)
    const int qpos = (lane & 7) + 8 * (warp & 1), qrow = (warp >> 1) * 4 + (lane >> 3);
    float m[SP], l[SP];  // softmax: heads warp + 8 k
#pragma unroll
    for (int k = 0; k < SP; k++) {
        m[k] = -INFINITY;
        l[k] = 0.0f;
    }
    const bool pv = 2 * (uint32_t)tid < Dv;  // values: dims 2 tid, 2 tid + 1 of every head
    float2 o[PB];
#pragma unroll
    for (int k = 0; k < PB; k++) o[k] = make_float2(0.0f, 0.0f);
    for (int s0 = p0; s0 < p1; s0 += MLA_SUB) {
        const int ns = min(MLA_SUB, p1 - s0);
        __syncthreads();  // the previous sub-chunk's keys and weights read (and the queries staged)
        mla_stage(D, ns, r, sk);
        __syncthreads();
        if (s0 + MLA_SUB < p1) mla_fetch(a, D, kvh, s0 + MLA_SUB, min(MLA_SUB, p1 - s0 - MLA_SUB), r);
        {
            // rows past ns hold older keys (or nothing): their dots are computed and never used
            float acc[QP];
#pragma unroll
            for (int k = 0; k < QP; k++) acc[k] = 0.0f;
            const float *kr = sk + qpos * ks;
#pragma unroll 4
            for (uint32_t dd = 0; dd < D; dd += 4) {
                const float4 kv = *(const float4 *)(kr + dd);
#pragma unroll
                for (int k = 0; k < QP; k++) {
                    const float4 qv = *(const float4 *)(sq + (qrow + 16 * k) * ks + dd);
                    acc[k] = __fmaf_rn(qv.x, kv.x, acc[k]);
                    acc[k] = __fmaf_rn(qv.y, kv.y, acc[k]);
                    acc[k] = __fmaf_rn(qv.z, kv.z, acc[k]);
                    acc[k] = __fmaf_rn(qv.w, kv.w, acc[k]);
                }
            }
#pragma unroll
            for (int k = 0; k < QP; k++) ss[(qrow + 16 * k) * MLA_SUB + qpos] = acc[k];
        }
        __syncthreads();
        {
            const int pl = s0 + lane;
            bool seen = lane < ns && pl <= pos && pl >= lo;
            if (seen && a.visible) seen = a.visible[(size_t)t * a.visible_stride + pl] != 0;
#pragma unroll
            for (int k = 0; k < SP; k++) {
                const int hh = warp + 8 * k;
                const float sc = seen ? __fmul_rn(ss[hh * MLA_SUB + lane], a.scale) : -INFINITY;
                const float mx = fmaxf(m[k], warp_max(sc));
                const float alpha = m[k] == -INFINITY ? 0.0f : expf(__fsub_rn(m[k], mx));  // o and l are 0 then
                const float pr = seen ? expf(__fsub_rn(sc, mx)) : 0.0f;
                l[k] = __fadd_rn(__fmul_rn(l[k], alpha), warp_sum(pr));
                m[k] = mx;
                if (lane < MLA_SUB) sp[lane * PB + hh] = pr;
                if (lane == 0) salpha[hh] = alpha;
            }
        }
        __syncthreads();
        if (pv) {
#pragma unroll
            for (int k = 0; k < PB; k++) {
                const float al = salpha[k];
                o[k].x = __fmul_rn(o[k].x, al);
                o[k].y = __fmul_rn(o[k].y, al);
            }
            // positions past the token's (ns ends at it) or hidden weigh +0: every sum stays as it is
#pragma unroll 2
            for (int pp = 0; pp < ns; pp++) {
                const float2 v = *(const float2 *)(sk + pp * ks + 2 * tid);
#pragma unroll
                for (int g = 0; g < PB / 4; g++) {
                    const float4 w = *(const float4 *)(sp + pp * PB + 4 * g);
                    o[4 * g].x = __fmaf_rn(w.x, v.x, o[4 * g].x);
                    o[4 * g].y = __fmaf_rn(w.x, v.y, o[4 * g].y);
                    o[4 * g + 1].x = __fmaf_rn(w.y, v.x, o[4 * g + 1].x);
                    o[4 * g + 1].y = __fmaf_rn(w.y, v.y, o[4 * g + 1].y);
                    o[4 * g + 2].x = __fmaf_rn(w.z, v.x, o[4 * g + 2].x);
                    o[4 * g + 2].y = __fmaf_rn(w.z, v.y, o[4 * g + 2].y);
                    o[4 * g + 3].x = __fmaf_rn(w.w, v.x, o[4 * g + 3].x);
                    o[4 * g + 3].y = __fmaf_rn(w.w, v.y, o[4 * g + 3].y);
                }
            }
        }
    }
    const size_t cs = PART_STRIDE(Dv);
    float *part = a.scratch + (((size_t)blockIdx.z * a.H + kvh * G + h0) * n_chunks + chunk) * cs;  // head h0's row
    if (pv) {
#pragma unroll
        for (int k = 0; k < PB; k++)
            if (k < nhb) *(float2 *)(part + (size_t)k * n_chunks * cs + 2 * tid) = o[k];
    }
#pragma unroll
    for (int k = 0; k < SP; k++) {
        const int hh = warp + 8 * k;
        if (hh < nhb && lane == 0) {
            part[(size_t)hh * n_chunks * cs + Dv] = m[k];
            part[(size_t)hh * n_chunks * cs + Dv + 1] = l[k];
        }
    }
}

// Merge the chunks (of chunk_len positions) of each head of one token (one warp per head): the chunks' weights
// exp(m_c - M) side by side in the lanes, the sum of l_c weighted in a fixed butterfly, each output
// dimension summed over the chunks in chunk order; then the optional sigmoid gate, and the row
// rounded to the output projection's format when asked. The chunks are those from the token's
// window's first (all from 0 without a window); a head's sink joins M and, after the butterfly,
// the sum. A chunk the token saw nothing of (m_c = -inf) weighs 0, and a head that saw nothing at
// all gives zeros.
#define MERGE_CHUNKS 128 // chunks whose weights stay in shared memory (more: recomputed)
__device__ __forceinline__ float chunk_weight(float m, float M) { return m == -INFINITY ? 0.0f : expf(__fsub_rn(m, M)); }

__global__ void __launch_bounds__(1024) k_attn_merge(const struct strata_cuda_attn a, int t_begin, int n_chunks,
                                                     int chunk_len, struct strata_cuda_act act, int quantize)
{
    extern __shared__ float row[];  // [H * Dv]
    __shared__ float wts[32][MERGE_CHUNKS];
    pdl_enter();
    const int t = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    const size_t tt = (size_t)(t_begin + t);
    const int c_lo = attn_lo(a.pos[tt], a.n_swa) / chunk_len, nc = a.pos[tt] / chunk_len + 1 - c_lo;
    const uint32_t ghs = a.gate_head_stride ? a.gate_head_stride : a.Dv;
    const size_t cs = PART_STRIDE(a.Dv);
    for (uint32_t h = warp; h < a.H; h += nw) {
        const float *part = a.scratch + (((size_t)t * a.H + h) * n_chunks + c_lo) * cs;
        float M = -INFINITY;
        for (int c = lane; c < nc; c += 32) M = fmaxf(M, part[(size_t)c * cs + a.Dv]);
        M = warp_max(M);
        if (a.sinks) M = fmaxf(M, a.sinks[h]);
        float L = 0.0f;
        for (int c = lane; c < nc; c += 32) {
            const float e = chunk_weight(part[(size_t)c * cs + a.Dv], M);
            if (c < MERGE_CHUNKS) wts[warp % 32][c] = e;
            L = __fadd_rn(L, __fmul_rn(part[(size_t)c * cs + a.Dv + 1], e));
        }
        L = warp_sum(L);
        if (a.sinks) L = __fadd_rn(L, expf(__fsub_rn(a.sinks[h], M)));
        __syncwarp();
        const float inv = L > 0.0f ? __fdiv_rn(1.0f, L) : 0.0f;
        // lane: dimensions 4 l .. 4 l + 3 (and 128 on), each summed over the chunks in chunk order
        for (uint32_t d = 4 * lane; d < a.Dv; d += 128) {
            float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
            for (int c = 0; c < nc; c++) {
                const float e = c < MERGE_CHUNKS ? wts[warp % 32][c] : chunk_weight(part[(size_t)c * cs + a.Dv], M);
                const float4 p = *(const float4 *)(part + (size_t)c * cs + d);
                acc.x = __fmaf_rn(p.x, e, acc.x);
                acc.y = __fmaf_rn(p.y, e, acc.y);
                acc.z = __fmaf_rn(p.z, e, acc.z);
                acc.w = __fmaf_rn(p.w, e, acc.w);
            }
            const float r[4] = {acc.x, acc.y, acc.z, acc.w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                float v = __fmul_rn(r[k], inv);
                if (a.gate) {
                    const float g = a.gate[tt * a.gate_stride + (size_t)h * ghs + d + k];
                    v = __fmul_rn(v, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g))));
                }
                a.out[tt * a.out_stride + (size_t)h * a.Dv + d + k] = v;
                if (quantize) row[h * a.Dv + d + k] = v;
            }
        }
        __syncwarp();
    }
    if (quantize) {
        __syncthreads();
        quantize_row(row, act, (int)tt);
    }
}

// The same merge with a block per (token, head) (grid tokens x heads), for long contexts: the
// one-warp-a-head merge above ran a decode token's 32 heads in one block on one SM, each lane's
// output dims a chain of loads over every chunk (512 at 16,384 positions). Here a thread takes an
// output dim (a warp reads 128 contiguous bytes of a chunk's row), the chunks' weights are
// computed once into shared memory by the first warp, which adds L as the one-warp merge's lanes
// did (lane l the chunks l, l + 32, ... then the same butterfly), and every dim sums the chunks in
// chunk order, loading MERGE_BATCH chunks' values before adding them (a loop whose next load
// waited on the previous product took a memory latency a chunk: 204 us at 16,000 positions on an
// H100, 34 now): each (token, head) gets the operations, so the bits, of k_attn_merge. The rounding
// for the projection needs the token's whole row: the token's last head to finish (a ticket after
// a fence, `done` made zeroed at open and reset by that block) rounds it from the output.
#define MERGE_THREADS 128
#define MERGE_WTS 2048   // chunk weights kept in shared memory (more: recomputed; fewer with
                         // STRATA_CUDA_MERGE_WTS, read at open, so that tests reach that path)
#define MERGE_BATCH 16   // chunk values a thread loads before adding them
#define MERGE_TOK_CHUNKS 32  // passes of many tokens over at most this many chunks merge a block a token

__global__ void __launch_bounds__(MERGE_THREADS) k_attn_merge_heads(const struct strata_cuda_attn a, int t_begin,
                                                                    int n_chunks, int chunk_len,
                                                                    struct strata_cuda_act act, int quantize,
                                                                    uint32_t *done, int wts_cap)
{
    __shared__ float wts[MERGE_WTS];
    __shared__ float red[MERGE_THREADS / 32];
    __shared__ float s_m, s_inv;
    __shared__ uint32_t s_ticket;
    pdl_enter();
    const int t = blockIdx.x, h = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const size_t tt = (size_t)(t_begin + t);
    const int c_lo = attn_lo(a.pos[tt], a.n_swa) / chunk_len, nc = a.pos[tt] / chunk_len + 1 - c_lo;
    const uint32_t ghs = a.gate_head_stride ? a.gate_head_stride : a.Dv;
    const size_t cs = PART_STRIDE(a.Dv);
    const float *part = a.scratch + (((size_t)t * a.H + h) * n_chunks + c_lo) * cs;
    float M = -INFINITY;  // the largest chunk maximum: the same in any order
    for (int c = threadIdx.x; c < nc; c += MERGE_THREADS) M = fmaxf(M, part[(size_t)c * cs + a.Dv]);
    M = warp_max(M);
    if (lane == 0) red[warp] = M;
    __syncthreads();
    if (warp == 0) {
        M = lane < MERGE_THREADS / 32 ? red[lane] : -INFINITY;
        M = warp_max(M);
        if (a.sinks) M = fmaxf(M, a.sinks[h]);
        float L = 0.0f;
        for (int c0 = lane; c0 < nc; c0 += 32 * 8) {  // lane l: chunks l, l + 32, ... in order, 8 loaded at once
            float mk[8], lk[8];
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const int c = c0 + 32 * k;
                mk[k] = c < nc ? __ldg(part + (size_t)c * cs + a.Dv) : -INFINITY;
                lk[k] = c < nc ? __ldg(part + (size_t)c * cs + a.Dv + 1) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const int c = c0 + 32 * k;
                if (c >= nc) break;
                const float e = chunk_weight(mk[k], M);
                if (c < wts_cap) wts[c] = e;
                L = __fadd_rn(L, __fmul_rn(lk[k], e));
            }
        }
        L = warp_sum(L);
        if (a.sinks) L = __fadd_rn(L, expf(__fsub_rn(a.sinks[h], M)));
        if (lane == 0) s_m = M, s_inv = L > 0.0f ? __fdiv_rn(1.0f, L) : 0.0f;
    }
    __syncthreads();
    M = s_m;
    const float inv = s_inv;
    const int nk = min(nc, wts_cap);  // chunks whose weights are in shared memory
    for (uint32_t d = threadIdx.x; d < a.Dv; d += MERGE_THREADS) {
        // MERGE_BATCH chunks' values loaded before their products are added (in chunk order): a
        // loop whose loads wait on the previous product took one memory latency a chunk
        float acc = 0.0f;
        const float *pd = part + d;
        int c = 0;
        for (; c + MERGE_BATCH <= nk; c += MERGE_BATCH) {
            float p[MERGE_BATCH];
#pragma unroll
            for (int k = 0; k < MERGE_BATCH; k++) p[k] = __ldg(pd + (size_t)(c + k) * cs);
#pragma unroll
            for (int k = 0; k < MERGE_BATCH; k++) acc = __fmaf_rn(p[k], wts[c + k], acc);
        }
        for (; c < nk; c++) acc = __fmaf_rn(__ldg(pd + (size_t)c * cs), wts[c], acc);
        for (; c < nc; c++) acc = __fmaf_rn(part[(size_t)c * cs + d], chunk_weight(part[(size_t)c * cs + a.Dv], M), acc);
        float v = __fmul_rn(acc, inv);
        if (a.gate) {
            const float g = a.gate[tt * a.gate_stride + (size_t)h * ghs + d];
            v = __fmul_rn(v, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g))));
        }
        a.out[tt * a.out_stride + (size_t)h * a.Dv + d] = v;
    }
    if (!quantize) return;
    __threadfence();  // this block's outputs visible to the device before its ticket
    __syncthreads();
    if (threadIdx.x == 0) s_ticket = atomicAdd(&done[t], 1u);
    __syncthreads();
    if (s_ticket != a.H - 1) return;
    __threadfence();  // the other heads' outputs, after their tickets
    quantize_row(a.out + tt * a.out_stride, act, (int)tt);
    if (threadIdx.x == 0) done[t] = 0;
}

#define EXT_VJ_MAX 16      // k_attn_part_ext's output dims per lane at most: Dv <= 512
#define EXT_PAIRS_DECODE 16 // (token, head) pairs per block of k_attn_part_ext: decode (more blocks)
#define EXT_PAIRS 64        // prompts (each staged chunk shared by more)

static int g_attn_pass = STRATA_CUDA_ATTN_PASS_DEFAULT;

int strata_cuda_attn_init(struct strata_cuda *cu)
{
    const char *ap = getenv("STRATA_CUDA_ATTN_PASS");
    const int pass = ap ? atoi(ap) : 0;
    if (pass >= 1) g_attn_pass = pass < ATTN_PASS_MAX ? pass : ATTN_PASS_MAX;
    cu->attn_done = (uint32_t *)strata_cuda_alloc(cu, ATTN_PASS_MAX * sizeof(uint32_t), "attention merge tickets");
    if (!cu->attn_done) return STRATA_ENOMEM;
    CU_TRY(cudaMemsetAsync(cu->attn_done, 0, ATTN_PASS_MAX * sizeof(uint32_t), cu->stream));
#define SET_SMEM(NT, DK) CU_TRY(cudaFuncSetAttribute(k_attn_part<NT, DK>, cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_MAX))
    SET_SMEM(1, 0); SET_SMEM(1, 64); SET_SMEM(1, 128); SET_SMEM(1, 256);
    SET_SMEM(ATTN_TOK, 0); SET_SMEM(ATTN_TOK, 64); SET_SMEM(ATTN_TOK, 128); SET_SMEM(ATTN_TOK, 256);
#undef SET_SMEM
#define SET_SMEM(VJ) CU_TRY(cudaFuncSetAttribute(k_attn_part_ext<VJ>, cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_MAX))
    SET_SMEM(2); SET_SMEM(4); SET_SMEM(8); SET_SMEM(EXT_VJ_MAX);
#undef SET_SMEM
#define SET_SMEM(DK, F) CU_TRY(cudaFuncSetAttribute(k_attn_mma<DK, F>, cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_MAX))
    SET_SMEM(0, false); SET_SMEM(64, false); SET_SMEM(128, false); SET_SMEM(256, false);
    SET_SMEM(0, true); SET_SMEM(64, true); SET_SMEM(128, true); SET_SMEM(256, true);
#undef SET_SMEM
    CU_TRY(cudaFuncSetAttribute(k_attn_mla<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_MAX));
    CU_TRY(cudaFuncSetAttribute(k_attn_mla<32>, cudaFuncAttributeMaxDynamicSharedMemorySize, ATTN_SMEM_MAX));
    CU_TRY(cudaFuncSetAttribute(k_attn_merge, cudaFuncAttributeMaxDynamicSharedMemorySize, 16384 * 4));
    return 0;
}

// Tokens per pass: at most g_attn_pass, fewer where their partial results would pass
// ATTN_SCRATCH_MAX floats (long contexts), at least one. It does not change any token's result.
static int attn_pass(int n_tok, size_t chunks, uint32_t H, uint32_t Dv)
{
    const size_t per = (size_t)H * chunks * PART_STRIDE(Dv), fit = ATTN_SCRATCH_MAX / per;
    size_t p = (size_t)(n_tok < g_attn_pass ? n_tok : g_attn_pass);
    if (p > fit) p = fit > 0 ? fit : 1;
    return (int)p;
}

size_t strata_cuda_attn_scratch_floats(int n_tok, int max_ctx, uint32_t H, uint32_t Dv)
{
    return strata_cuda_attn_scratch_floats_pass(n_tok, max_ctx, H, Dv, g_attn_pass);
}

// The plain chunk kernel's shared memory (keys, values, the queries of nt tokens of a group).
static size_t plain_smem(const struct strata_cuda_attn *a, int nt)
{
    return ((size_t)ATTN_SUB * KSTRIDE(a->D) + (size_t)ATTN_SUB * a->Dv + (size_t)nt * (a->H / a->Hkv) * a->D) * 4;
}

// The plain chunk kernels take causal attention without a window, mask or latent rows, head dims
// up to ATTN_DMAX, keys and values of one stride and a group whose queries fit their shared memory.
static bool plain_case(const struct strata_cuda_attn *a)
{
    return !a->latent && !a->n_swa && !a->visible && (!a->v_stride || a->v_stride == a->kv_stride) &&
           a->D <= ATTN_DMAX && a->Dv <= ATTN_DMAX;
}

static bool plain_takes(const struct strata_cuda_attn *a, int nt)
{
    return plain_case(a) && plain_smem(a, nt) <= ATTN_SMEM_MAX;
}

// k_attn_mma also wants head dims of whole mma steps (keys: 8, values: 16), query rows on 16 bytes
// and a token's group in its shared memory; which kernel runs depends on the shape and the layout
// of the queries only, never on the batch.
static bool mma_takes(const struct strata_cuda *cu, const struct strata_cuda_attn *a)
{
    const uint32_t qh = a->q_head_stride ? a->q_head_stride : a->D;
    return cu->attn_mma && plain_case(a) && a->D % 8 == 0 && a->Dv % 16 == 0 && (uintptr_t)a->q % 16 == 0 &&
           a->q_stride % 4 == 0 && qh % 4 == 0 &&
           mma_smem_floats(a->D, a->Dv, a->H / a->Hkv, 1) * 4 <= ATTN_SMEM_MAX;
}

// k_attn_mma's tokens a block: one for decode; for prompts 8, or more where the group is small (a
// block's rows at least 64, a tile for each warp), fewer where they would not fit shared memory.
static int mma_tokens(const struct strata_cuda_attn *a)
{
    if (a->n_tok < 4) return 1;
    const uint32_t G = a->H / a->Hkv;
    int nt = G < 8 ? (int)(64 / G < MMA_NT_MAX ? 64 / G : MMA_NT_MAX) : ATTN_TOK;
    while (nt > 1 && mma_smem_floats(a->D, a->Dv, G, nt) * 4 > ATTN_SMEM_MAX) nt /= 2;
    return nt;
}

void strata_cuda_set_attn_mma(struct strata_cuda *cu, int on) { cu->attn_mma = on != 0 && cu->cc >= 80; }

// How k_attn_part_ext splits a launch: tokens and query heads per block, slices of a group.
struct ext_plan {
    int nt, hb, n_slices;
    size_t smem;
};

static int ext_plan(const struct strata_cuda_attn *a, struct ext_plan *p)
{
    const uint32_t G = a->H / a->Hkv;
    const size_t kv = ((size_t)ATTN_CHUNK * KSTRIDE(a->D) + (a->latent ? 0 : (size_t)ATTN_CHUNK * a->Dv)) * 4;
    const size_t q1 = (size_t)a->D * 4;  // one (token, head)'s query
    int nt = a->n_tok < 4 ? 1 : ATTN_TOK;
    while (nt > 1 && kv + nt * q1 > ATTN_SMEM_MAX) nt /= 2;
    if (a->Dv > 32 * EXT_VJ_MAX || kv + q1 > ATTN_SMEM_MAX) {
        strata_log_error("cuda: attention: head dims %u/%u%s: at most %d value dims and %d KiB of staged keys, values "
                         "and a query per block", a->D, a->Dv, a->latent ? " (latent)" : "", 32 * EXT_VJ_MAX,
                         ATTN_SMEM_MAX / 1024);
        return STRATA_EARG;
    }
    int hb = (nt == 1 ? EXT_PAIRS_DECODE : EXT_PAIRS) / nt;
    if (hb < 1) hb = 1;
    if (hb > (int)G) hb = (int)G;
    while (hb > 1 && kv + (size_t)nt * hb * q1 > ATTN_SMEM_MAX) hb--;
    p->n_slices = ((int)G + hb - 1) / hb;
    p->hb = ((int)G + p->n_slices - 1) / p->n_slices;  // the slices as even as they come
    p->nt = nt;
    p->smem = kv + (size_t)nt * p->hb * q1;
    return 0;
}

// k_attn_mla's shared memory: PB queries and MLA_SUB keys of D (+ 4) floats, dots, weights, rescales.
static size_t mla_smem(uint32_t D, int pb)
{
    return ((size_t)(pb + MLA_SUB) * KSTRIDE(D) + 2 * (size_t)pb * MLA_SUB + pb) * 4;
}

// k_attn_mla takes the latent case with keys up to MLA_DMAX floats and values up to MLA_DVMAX; it
// depends on the shape only (and the A/B switch), never on the batch: it fixes the chunks.
static bool mla_takes(const struct strata_cuda *cu, const struct strata_cuda_attn *a)
{
    return a->latent && !cu->mla_old && a->D <= MLA_DMAX && a->Dv <= MLA_DVMAX && mla_smem(a->D, 32) <= ATTN_SMEM_MAX;
}

void strata_cuda_set_mla_old(struct strata_cuda *cu, int old) { cu->mla_old = old != 0; }

int strata_cuda_attention(struct strata_cuda *cu, const struct strata_cuda_attn *a)
{
    if (a->n_tok <= 0) return 0;
    const size_t vs = a->latent ? a->kv_stride : a->v_stride ? a->v_stride : a->kv_stride;
    if (a->Hkv == 0 || a->H % a->Hkv || a->D % 4 || a->Dv % 4 || a->kv_stride % 4 || vs % 4 ||
        (a->latent && a->Dv > a->D)) {
        strata_log_error("cuda: attention: heads %u/%u of dims %u/%u%s, strides %zu/%zu (multiples of 4)", a->H, a->Hkv,
                         a->D, a->Dv, a->latent ? " (latent: values within the keys)" : "", a->kv_stride, vs);
        return STRATA_EARG;
    }
    const bool mla = mla_takes(cu, a);
    const int chunk_len = mla ? MLA_CHUNK : ATTN_CHUNK;
    const int n_chunks = a->max_pos / chunk_len + 1;
    struct strata_cuda_act act;
    memset(&act, 0, sizeof act);
    int quantize = 0;
    if (a->act && a->act->vdt == STRATA_TYPE_F32) {  // the float output itself
        a->act->f = a->out;
        a->act->f_stride = a->out_stride;
    } else if (a->act) {
        if (a->act->n_in != a->H * a->Dv || (uint32_t)a->n_tok > a->act->n_rows || (size_t)a->H * a->Dv > 16384) {
            strata_log_error("cuda: attention: output of %u x %u into %u-element activations (rounded rows: at most "
                             "16384 elements)", a->H, a->Dv, a->act->n_in);
            return STRATA_EARG;
        }
        act = *a->act;
        quantize = 1;
    }
    const int nt = a->n_tok < 4 ? 1 : ATTN_TOK;  // tokens per block (the same operations per token)
    const bool mma = !mla && mma_takes(cu, a);
    const int mnt = mma ? mma_tokens(a) : 0;
    const bool plain = !mla && !mma && plain_takes(a, nt);
    struct ext_plan ep = {0, 0, 0, 0};
    if (!plain && !mla && !mma) {
        const int rc = ext_plan(a, &ep);
        if (rc) return rc;
    }
    // chunks no token of the call reaches (behind every window) are not launched
    const int c_first = plain || mma || a->min_pos <= 0 ? 0 : attn_lo(a->min_pos, a->n_swa) / chunk_len;
    // The kernels see the positions in device memory only: max_pos and min_pos as the chunks they
    // span, so every decode step within the same chunks passes the same bytes (tape.cu replays it).
    struct strata_cuda_attn k = *a;
    k.max_pos = n_chunks * chunk_len - 1;
    k.min_pos = c_first * chunk_len;
    // k_attn_mla: PB heads per block (more blocks for a decode token, more reuse of keys in prompts)
    const int pb = a->n_tok < 4 ? 16 : 32, G = (int)(a->H / a->Hkv);
    const int mla_slices = (G + pb - 1) / pb, mla_hb = (G + mla_slices - 1) / mla_slices;
    const int vj = a->Dv <= 64 ? 2 : a->Dv <= 128 ? 4 : a->Dv <= 256 ? 8 : EXT_VJ_MAX;
    const int pass = attn_pass(a->n_tok, (size_t)n_chunks, a->H, a->Dv);
    // the plain kernels' head dim as a template argument where it is one of the common three
    const int dk = a->D == a->Dv && (a->D == 64 || a->D == 128 || a->D == 256) ? (int)a->D : 0;
    for (int t0 = 0; t0 < a->n_tok; t0 += pass) {
        const int n = a->n_tok - t0 < pass ? a->n_tok - t0 : pass;
        if (mma) {
            const dim3 grid(n_chunks, a->Hkv, cdiv(n, mnt));
            const size_t smem = mma_smem_floats(a->D, a->Dv, a->H / a->Hkv, mnt) * 4;
#define PART(DK, F)                                                                                                \
    if (dk == DK && a->kv_f16 == F) CU_LAUNCH("k_attn_mma", (k_attn_mma<DK, F>), grid, ATTN_WARPS * 32, smem, k, t0, n, \
                                              n_chunks, mnt)
            PART(0, false); PART(64, false); PART(128, false); PART(256, false);
            PART(0, true); PART(64, true); PART(128, true); PART(256, true);
#undef PART
        } else if (plain) {
            const dim3 grid(n_chunks, a->Hkv, cdiv(n, nt));
            const size_t smem = plain_smem(a, nt);
#define PART(NT, DK)                                                                                          \
    if (nt == NT && dk == DK) CU_LAUNCH("k_attn_part", (k_attn_part<NT, DK>), grid, ATTN_WARPS * 32, smem, k, t0, n, \
                                        n_chunks)
            PART(1, 0); PART(1, 64); PART(1, 128); PART(1, 256);
            PART(ATTN_TOK, 0); PART(ATTN_TOK, 64); PART(ATTN_TOK, 128); PART(ATTN_TOK, 256);
#undef PART
        } else if (mla) {
            const dim3 grid(n_chunks - c_first, a->Hkv * mla_slices, n);
            if (pb == 16)
                CU_LAUNCH("k_attn_mla", k_attn_mla<16>, grid, MLA_THREADS, mla_smem(a->D, 16), k, t0, n_chunks, c_first,
                          mla_hb, mla_slices);
            else
                CU_LAUNCH("k_attn_mla", k_attn_mla<32>, grid, MLA_THREADS, mla_smem(a->D, 32), k, t0, n_chunks, c_first,
                          mla_hb, mla_slices);
        } else {
            const dim3 grid(n_chunks - c_first, a->Hkv * ep.n_slices, cdiv(n, ep.nt));
#define PART(VJ)                                                                                                    \
    if (vj == VJ) CU_LAUNCH("k_attn_part_ext", k_attn_part_ext<VJ>, grid, ATTN_WARPS * 32, ep.smem, k, t0, n, n_chunks, \
                            c_first, ep.nt, ep.hb, ep.n_slices)
            PART(2); PART(4); PART(8); PART(EXT_VJ_MAX);
#undef PART
        }
        // The two merges give the same bits; a block a token is ~3% faster in prompts over few
        // chunks (512 tokens from 0: one block a token and no tickets), a block a head everywhere else
        const bool merge_tok = cu->merge_old > 0 || (cu->merge_old < 0 && n >= ATTN_TOK && n_chunks <= MERGE_TOK_CHUNKS);
        if (merge_tok) {
            const unsigned mt = a->H >= 32 ? 1024 : 32 * a->H;  // a warp per head
            CU_LAUNCH("k_attn_merge", k_attn_merge, n, mt, quantize ? (size_t)a->H * a->Dv * 4 : 0, k, t0, n_chunks,
                      chunk_len, act, quantize);
        } else {
            CU_LAUNCH("k_attn_merge_heads", k_attn_merge_heads, dim3(n, a->H), MERGE_THREADS, 0, k, t0, n_chunks,
                      chunk_len, act, quantize, cu->attn_done,
                      cu->merge_wts > 0 && cu->merge_wts < MERGE_WTS ? cu->merge_wts : MERGE_WTS);
        }
    }
    return 0;
}
