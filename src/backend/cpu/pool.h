// A persistent compute thread pool: n threads (the caller is thread 0) run one function together
// and meet at the end. Workers spin briefly for the next job (decode issues a few hundred small
// jobs per token, so a sleep/wake per job would cost more than the work), then sleep.
#ifndef STRATA_POOL_H
#define STRATA_POOL_H

#include <stdatomic.h>

struct strata_pool;

typedef void (*strata_pool_fn)(void *arg, int ith, int nth);

// n_threads >= 1 (0: all online CPUs). 0 or negative.
int strata_pool_create(struct strata_pool **out, int n_threads);
void strata_pool_free(struct strata_pool *p);
int strata_pool_size(const struct strata_pool *p);
// Run fn(arg, ith, nth) on every thread, ith = 0..nth-1, and return when all have finished.
// Not reentrant: one run at a time, from one caller thread.
void strata_pool_run(struct strata_pool *p, strata_pool_fn fn, void *arg);

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

#endif
