// A persistent compute thread pool: n threads (the caller is thread 0) run one function together
// and meet at the end. Workers spin briefly for the next job (decode issues a few hundred small
// jobs per token, so a sleep/wake per job would cost more than the work), then sleep.
#ifndef STRATA_POOL_H
#define STRATA_POOL_H

#include <stdatomic.h>
#include <stdint.h>

struct strata_pool;

typedef void (*strata_pool_fn)(void *arg, int ith, int nth);

// n_threads >= 1 (0: all online CPUs). 0 or negative.
int strata_pool_create(struct strata_pool **out, int n_threads);
void strata_pool_free(struct strata_pool *p);
int strata_pool_size(const struct strata_pool *p);
// Run fn(arg, ith, nth) on every thread, ith = 0..nth-1, and return when all have finished.
// Not reentrant: one run at a time, from one caller thread.
void strata_pool_run(struct strata_pool *p, strata_pool_fn fn, void *arg);

// Where the threads' time went, since the pool was created (read between runs, by the caller's
// thread): runs, the caller's seconds from the start of a run to its end, the caller's part of
// those spent waiting for the last thread to finish (imbalance and wake-up), and the seconds all
// threads spent inside fn together. The caller's time outside runs is serial (the other threads
// idle); n * run_s - busy_s is the thread time a run held but did no work in.
struct strata_pool_counters {
    int n_threads;
    uint64_t runs;
    double run_s, tail_s, busy_s;
};
void strata_pool_counters(const struct strata_pool *p, struct strata_pool_counters *out);

// Dynamic work split inside a run: threads take chunks [*begin, *end) of n items until none is
// left. The counter must be zeroed before the run (strata_pool_run's caller does it).
static inline int strata_chunk_next(atomic_int *counter, int n, int chunk, int *begin, int *end)
{
    int b = atomic_fetch_add_explicit(counter, chunk, memory_order_relaxed);
    if (b >= n) return 0;
    *begin = b;
    *end = b + chunk < n ? b + chunk : n;
    return 1;
}

// Guided: a claim takes a share of what is left, (n - next) / (2 nth) items and at least one,
// so nth threads make about 2 nth ln(n / 2 nth) claims in all instead of n, while the last
// claims stay single items for the balance at the end. For passes of many small items (a decode
// step's products: hundreds of items of a few KiB, where every claim of the shared counter is a
// cache line moving between cores).
static inline int strata_chunk_next_guided(atomic_int *counter, int n, int nth, int *begin, int *end)
{
    int b = atomic_load_explicit(counter, memory_order_relaxed);
    for (;;) {
        if (b >= n) return 0;
        int k = (n - b) / (2 * nth);
        if (k < 1) k = 1;
        if (atomic_compare_exchange_weak_explicit(counter, &b, b + k, memory_order_relaxed, memory_order_relaxed)) {
            *begin = b;
            *end = b + k;
            return 1;
        }
    }
}

#endif
