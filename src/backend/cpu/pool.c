// Persistent thread pool with a generation counter: the caller bumps the generation to start a
// job, workers spin on it (then sleep on a condition variable), and a countdown marks the end.
#include "backend/cpu/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/log.h"
#include "util/time.h"

#define SPIN_ITERS 20000  // ~50-100 us of pause loops before a worker sleeps

struct strata_pool {
    int n_threads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint generation;   // bumped once per job
    atomic_int pending;       // workers still running the current job
    atomic_bool quit;
    atomic_int sleepers;
    strata_pool_fn fn;
    void *arg;
    struct busy { _Alignas(64) atomic_uint_least64_t ns; } *busy;  // per thread, inside fn
    uint64_t runs, run_ns, tail_ns;                                // the caller's, between runs
};

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// fn on thread ith, its time added to the thread's own counter (only that thread writes it)
static inline uint64_t run_timed(struct strata_pool *p, int ith)
{
    const uint64_t t0 = now_ns();
    p->fn(p->arg, ith, p->n_threads);
    const uint64_t t1 = now_ns();
    atomic_store_explicit(&p->busy[ith].ns, atomic_load_explicit(&p->busy[ith].ns, memory_order_relaxed) + (t1 - t0),
                          memory_order_relaxed);
    return t1;
}

struct worker_arg {
    struct strata_pool *p;
    int ith;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void *worker_main(void *varg)
{
    struct worker_arg wa = *(struct worker_arg *)varg;
    free(varg);
    struct strata_pool *p = wa.p;
    unsigned seen = 0;
    for (;;) {
        unsigned gen;
        int spins = 0;
        while ((gen = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        seen = gen;
        if (atomic_load(&p->quit)) return NULL;
        run_timed(p, wa.ith);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

int strata_pool_create(struct strata_pool **out, int n_threads)
{
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 1024) {
        strata_log_error("pool_create: %d threads is too many", n_threads);
        return STRATA_EARG;
    }
    struct strata_pool *p = calloc(1, sizeof *p);
    if (!p) return STRATA_ENOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    p->busy = aligned_alloc(64, (size_t)n_threads * sizeof *p->busy);
    if (!p->threads || !p->busy) {
        free(p->threads);
        free(p->busy);
        free(p);
        return STRATA_ENOMEM;
    }
    for (int i = 0; i < n_threads; i++) atomic_init(&p->busy[i].ns, 0);
    for (int i = 1; i < n_threads; i++) {
        struct worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (struct worker_arg){p, i};
        int err = wa ? pthread_create(&p->threads[i], NULL, worker_main, wa) : ENOMEM;
        if (err) {
            free(wa);
            strata_log_error("pool_create: cannot start thread %d: error %d", i, err);
            p->n_threads = i;
            strata_pool_free(p);
            return STRATA_ENOMEM;
        }
    }
    *out = p;
    return 0;
}

void strata_pool_free(struct strata_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, true);
    atomic_fetch_add(&p->generation, 1);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->threads);
    free(p->busy);
    free(p);
}

int strata_pool_size(const struct strata_pool *p) { return p->n_threads; }

void strata_pool_run(struct strata_pool *p, strata_pool_fn fn, void *arg)
{
    const uint64_t t0 = now_ns();
    p->fn = fn;
    p->arg = arg;
    p->runs++;
    if (p->n_threads == 1) {
        p->run_ns += run_timed(p, 0) - t0;
        return;
    }
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    // seq_cst on both sides: a worker about to sleep either sees the new generation or is seen
    // in sleepers (it increments sleepers before re-checking the generation under the mutex).
    atomic_fetch_add(&p->generation, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    const uint64_t t1 = run_timed(p, 0);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) cpu_relax();
    const uint64_t t2 = now_ns();
    p->run_ns += t2 - t0;
    p->tail_ns += t2 - t1;
}

void strata_pool_counters(const struct strata_pool *p, struct strata_pool_counters *out)
{
    uint64_t busy = 0;
    for (int i = 0; i < p->n_threads; i++) busy += atomic_load_explicit(&p->busy[i].ns, memory_order_relaxed);
    *out = (struct strata_pool_counters){
        .n_threads = p->n_threads, .runs = p->runs, .run_s = p->run_ns * 1e-9, .tail_s = p->tail_ns * 1e-9,
        .busy_s = busy * 1e-9,
    };
}
