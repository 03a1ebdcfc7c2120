// Memory read bandwidth of this machine with 1..N threads: each thread sums its share of a
// buffer much larger than the caches, the best of several passes is kept. Prints GB/s per
// thread count, one line each: "threads=N read_gbs=X". Used by the benchmarks for the floor.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *reader(void *arg)
{
    struct job *j = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= j->n; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    j->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    int max_threads = argc > 1 ? atoi(argv[1]) : 2;
    size_t bytes = (size_t)1 << 30;
    if (max_threads < 1 || max_threads > 256) max_threads = 2;
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf) return 1;
    memset(buf, 1, bytes);
    const size_t n = bytes / sizeof *buf;
    uint64_t guard = 0;
    for (int t = 1; t <= max_threads; t++) {
        double best = 0;
        for (int pass = 0; pass < 4; pass++) {
            pthread_t th[256];
            struct job jobs[256];
            double t0 = now_s();
            for (int i = 0; i < t; i++) {
                jobs[i] = (struct job){buf + n / t * i, n / t, 0};
                pthread_create(&th[i], NULL, reader, &jobs[i]);
            }
            for (int i = 0; i < t; i++) {
                pthread_join(th[i], NULL);
                guard += jobs[i].sum;
            }
            double gbs = bytes / (now_s() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
        printf("threads=%d read_gbs=%.2f\n", t, best);
    }
    free(buf);
    return guard == 42;  // keeps the sums alive
}
