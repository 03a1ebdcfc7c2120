// The top-k selection of ggml_top_k (std::partial_sort with "a before b" = score[a] > score[b]) as
// libstdc++ runs it, shared by the CPU backend (backend/cpu/ops_ext.c) and the CUDA indexer
// (backend/cuda/ext.cu) so that both keep the same positions, ties included.
//
// libstdc++'s __heap_select makes a heap of the first k positions whose top is the weakest kept
// one; a later position replaces the top only when strictly better. Which of several equal scores
// stay therefore depends on the heap's layout (ReLU makes exact ties common in the indexer: every
// score whose heads are all negative is 0), so the same heap is built here: __make_heap,
// __adjust_heap and __push_heap of libstdc++'s stl_heap.h, on int32 positions. The heap is
// h[0..len), the scores are read through sc[position].
#ifndef STRATA_TOPK_HEAP_H
#define STRATA_TOPK_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define STRATA_TOPK_FN static __host__ __device__ __forceinline__
#else
#define STRATA_TOPK_FN static inline
#endif

STRATA_TOPK_FN bool strata_topk_before(const float *sc, int32_t a, int32_t b) { return sc[a] > sc[b]; }

// __push_heap: v rises from `hole` towards `top` past parents it goes before.
STRATA_TOPK_FN void strata_topk_push(const float *sc, int32_t *h, int hole, int top, int32_t v)
{
    int parent = (hole - 1) / 2;
    while (hole > top && strata_topk_before(sc, h[parent], v)) {
        h[hole] = h[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    h[hole] = v;
}

// __adjust_heap: the hole at `hole` sinks to a leaf along the children that go before, then v is
// pushed up from there.
STRATA_TOPK_FN void strata_topk_adjust(const float *sc, int32_t *h, int hole, int len, int32_t v)
{
    const int top = hole;
    int child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (strata_topk_before(sc, h[child], h[child - 1])) child--;
        h[hole] = h[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        h[hole] = h[child - 1];
        hole = child - 1;
    }
    strata_topk_push(sc, h, hole, top, v);
}

// __make_heap of positions 0 .. k-1 (k >= 1).
STRATA_TOPK_FN void strata_topk_make(const float *sc, int32_t *h, int k)
{
    for (int i = 0; i < k; i++) h[i] = i;
    for (int parent = (k - 2) / 2; k >= 2; parent--) {
        strata_topk_adjust(sc, h, parent, k, h[parent]);
        if (parent == 0) break;
    }
}

// The rest of __heap_select for position i >= k: it replaces the top when strictly better.
STRATA_TOPK_FN void strata_topk_offer(const float *sc, int32_t *h, int k, int32_t i)
{
    if (strata_topk_before(sc, i, h[0])) strata_topk_adjust(sc, h, 0, k, i);
}

#endif
