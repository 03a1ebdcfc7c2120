// Memory read bandwidth of this machine with 1..N threads: each thread sums its share of a
// buffer much larger than the caches, the best of several passes and of several stream counts
// is kept. Prints GB/s per thread count, one line each: "threads=N read_gbs=X streams=S" (S: the
// streams a thread read at the best rate); `membw N --streams` also each stream count's best, on
// lines "threads=N streams=S gbs=X" before it. Used by the benchmarks for the floor.
//
// Measured as the engine reads its weights: the buffer on huge pages where the kernel gives them
// (the expert slab and the scratch are, `strata_big_alloc`), wide loads, and a pass timed from
// the first thread's start to the last one's end after all are created and met at a barrier.
// The first version created the threads inside the timed window and read 4 KiB pages with 8-byte
// loads: on the 16-core hosts it reported 75-95 GB/s while strata's output head streamed its
// 175 MB at about 125 (docs/cpu.md). The second read one sequential stream a thread, as a
// memcpy does: on a host where it gave 85-91 GB/s at 16 threads the head (4 rows a step, so
// 4 streams a thread) read 118 and the experts 98. So a thread now also reads its share as 2,
// 4 or 8 streams at once, one vector of each a step, as the dot kernels walk their rows: more
// lines in flight a core where one stream's prefetcher does not keep enough of them.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef uint64_t v4u64 __attribute__((vector_size(32)));  // a 32-byte load (two on SSE2)

struct job {
    const v4u64 *p;
    size_t n;                 // vectors, a multiple of 4 * streams
    int streams;              // the share read as this many equal parts at once
    pthread_barrier_t *start;
    double t0, t1;
    uint64_t sum;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *reader(void *arg)
{
    struct job *j = arg;
    pthread_barrier_wait(j->start);
    j->t0 = now_s();
    v4u64 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    const int S = j->streams;
    const size_t part = j->n / (size_t)S;
    if (S == 1) {
        for (size_t i = 0; i + 4 <= j->n; i += 4) {
            s0 += j->p[i];
            s1 += j->p[i + 1];
            s2 += j->p[i + 2];
            s3 += j->p[i + 3];
        }
    } else {  // a step reads 2 vectors (64 bytes, a line) of each stream
        for (size_t i = 0; i + 2 <= part; i += 2)
            for (int k = 0; k < S; k += 2) {
                const v4u64 *a = j->p + (size_t)k * part + i, *b = a + part;
                s0 += a[0];
                s1 += a[1];
                s2 += b[0];
                s3 += b[1];
            }
    }
    const v4u64 s = (s0 + s1) + (s2 + s3);
    j->sum = s[0] + s[1] + s[2] + s[3];
    j->t1 = now_s();
    return NULL;
}

int main(int argc, char **argv)
{
    int max_threads = argc > 1 ? atoi(argv[1]) : 2;
    const int each = argc > 2 && strcmp(argv[2], "--streams") == 0;  // a line per stream count too
    const size_t bytes = (size_t)1 << 30;
    if (max_threads < 1 || max_threads > 256) max_threads = 2;
    void *buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) return 1;
    madvise(buf, bytes, MADV_HUGEPAGE);  // advice only: 4 KiB pages where the kernel has none
    memset(buf, 1, bytes);
    const size_t n = bytes / sizeof(v4u64);
    uint64_t guard = 0;
    static const int stream_counts[] = {1, 2, 4, 8};
    for (int t = 1; t <= max_threads; t++) {
        double best = 0, per[4] = {0};
        int best_streams = 1;
        const size_t share = n / (size_t)t / 32 * 32;
        for (int pass = 0; pass < 4 * 4; pass++) {  // the stream counts in turn, 4 passes each
            const int S = stream_counts[pass % 4];
            pthread_t th[256];
            struct job jobs[256];
            pthread_barrier_t start;
            pthread_barrier_init(&start, NULL, (unsigned)t);
            for (int i = 0; i < t; i++) {
                jobs[i] = (struct job){(const v4u64 *)buf + share * (size_t)i, share, S, &start, 0, 0, 0};
                pthread_create(&th[i], NULL, reader, &jobs[i]);
            }
            double t0 = 1e300, t1 = 0;
            for (int i = 0; i < t; i++) {
                pthread_join(th[i], NULL);
                guard += jobs[i].sum;
                t0 = jobs[i].t0 < t0 ? jobs[i].t0 : t0;
                t1 = jobs[i].t1 > t1 ? jobs[i].t1 : t1;
            }
            pthread_barrier_destroy(&start);
            const double gbs = (double)(share * (size_t)t * sizeof(v4u64)) / (t1 - t0) / 1e9;
            if (gbs > best) best = gbs, best_streams = S;
            if (gbs > per[pass % 4]) per[pass % 4] = gbs;
        }
        for (int i = 0; i < 4 && each; i++) printf("threads=%d streams=%d gbs=%.2f\n", t, stream_counts[i], per[i]);
        printf("threads=%d read_gbs=%.2f streams=%d\n", t, best, best_streams);
    }
    munmap(buf, bytes);
    return guard == 42;  // keeps the sums alive
}
