// Expert I/O engines: a pread thread pool and io_uring with O_DIRECT (see io.h for the contract).
#include "experts/io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

#define IO_ALIGN 4096u

enum fault_kind { FAULT_NONE, FAULT_EIO, FAULT_SHORT };

struct strata_io {
    enum strata_io_engine engine;
    int fd;                       // buffered for pread; O_DIRECT for uring when allowed
    bool direct;
    char *path;
    uint64_t max_len;
    // fault injection (STRATA_IO_FAULT)
    uint64_t fault_first, fault_count;
    enum fault_kind fault_kind;
    atomic_uint_fast64_t attempts;
    atomic_uint_fast64_t n_reads, n_retries, n_bytes;
    // pread pool: workers take request indices from `next` until the batch is done
    pthread_t *threads;
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    const struct strata_io_req *batch;
    int batch_n, batch_next, batch_done, batch_rc;
    int failed_req;               // first failed request of the batch, -1 if none
    bool stop;
    // uring
    struct io_uring ring;
    bool ring_ok;
    int depth;
    char *bounce;                 // [depth][bounce_bytes], 4 KiB aligned
    uint64_t bounce_bytes;
};

// Decide whether this attempt is hit by an injected fault.
static enum fault_kind next_attempt_fault(struct strata_io *io)
{
    const uint64_t a = atomic_fetch_add(&io->attempts, 1) + 1;
    if (io->fault_kind == FAULT_NONE || a < io->fault_first || a - io->fault_first >= io->fault_count)
        return FAULT_NONE;
    return io->fault_kind;
}

static int parse_fault(struct strata_io *io)
{
    const char *s = getenv("STRATA_IO_FAULT");
    if (!s || !*s) return 0;
    char kind[16] = "eio";
    unsigned long long first = 0, count = 1;
    int got = sscanf(s, "%llu:%15[a-z]:%llu", &first, kind, &count);
    if (got < 1 || first == 0 || count == 0 || (strcmp(kind, "eio") && strcmp(kind, "short"))) {
        strata_log_error("experts_io: STRATA_IO_FAULT='%s' is not N[:eio|short][:R]", s);
        return STRATA_EARG;
    }
    io->fault_first = first;
    io->fault_count = count;
    io->fault_kind = strcmp(kind, "short") == 0 ? FAULT_SHORT : FAULT_EIO;
    return 0;
}

static void log_failure(const struct strata_io *io, const struct strata_io_req *r, int err)
{
    strata_log_error("experts_io: read of %llu bytes at offset %llu of %s failed after %d tries: %s",
                     (unsigned long long)r->len, (unsigned long long)r->file_off, io->path,
                     STRATA_IO_MAX_TRIES, err ? strerror(err) : "short read");
}

// ---- pread pool --------------------------------------------------------------------------------

// One attempt: 0, or the errno of the failure (0 never means short: a short read gives EIO via
// *short_read).
static int pread_attempt(struct strata_io *io, const struct strata_io_req *r, bool *short_read)
{
    *short_read = false;
    const enum fault_kind f = next_attempt_fault(io);
    if (f == FAULT_EIO) return EIO;
    uint64_t want = f == FAULT_SHORT ? r->len / 2 : r->len, got = 0;
    while (got < want) {
        ssize_t k = pread(io->fd, (char *)r->dst + got, want - got, (off_t)(r->file_off + got));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        if (k == 0) break;  // end of file before the range ends
        got += (uint64_t)k;
    }
    if (got < r->len) {
        *short_read = true;
        return EIO;
    }
    return 0;
}

static int pread_one(struct strata_io *io, const struct strata_io_req *r, int *err)
{
    atomic_fetch_add(&io->n_reads, 1);
    for (int t = 0; t < STRATA_IO_MAX_TRIES; t++) {
        bool short_read;
        int e = pread_attempt(io, r, &short_read);
        if (e == 0) {
            atomic_fetch_add(&io->n_bytes, r->len);
            return 0;
        }
        *err = short_read ? 0 : e;
        if (t + 1 < STRATA_IO_MAX_TRIES) atomic_fetch_add(&io->n_retries, 1);
    }
    return STRATA_EIO;
}

static void *pread_worker(void *arg)
{
    struct strata_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        while (!io->stop && (!io->batch || io->batch_next >= io->batch_n)) pthread_cond_wait(&io->work_cv, &io->mu);
        if (io->stop) break;
        const int i = io->batch_next++;
        const struct strata_io_req *r = &io->batch[i];
        pthread_mutex_unlock(&io->mu);
        int err = 0;
        int rc = pread_one(io, r, &err);
        pthread_mutex_lock(&io->mu);
        if (rc && io->failed_req < 0) {
            io->failed_req = i;
            io->batch_rc = err;
        }
        if (++io->batch_done == io->batch_n) pthread_cond_signal(&io->done_cv);
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

static int pread_batch(struct strata_io *io, const struct strata_io_req *reqs, int n)
{
    pthread_mutex_lock(&io->mu);
    io->batch = reqs;
    io->batch_n = n;
    io->batch_next = 0;
    io->batch_done = 0;
    io->failed_req = -1;
    io->batch_rc = 0;
    pthread_cond_broadcast(&io->work_cv);
    while (io->batch_done < n) pthread_cond_wait(&io->done_cv, &io->mu);
    const int failed = io->failed_req, err = io->batch_rc;
    io->batch = NULL;
    io->batch_n = 0;
    pthread_mutex_unlock(&io->mu);
    if (failed >= 0) {
        log_failure(io, &reqs[failed], err);
        return STRATA_EIO;
    }
    return 0;
}

// ---- io_uring ----------------------------------------------------------------------------------

struct uring_slot {
    int req;       // request index, -1 when free
    int tries;
};

// Queue request i into bounce buffer b: the enclosing aligned range when O_DIRECT.
static void uring_queue(struct strata_io *io, const struct strata_io_req *r, int b)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    STRATA_ASSERT(sqe != NULL);  // never more in flight than the ring's depth
    uint64_t off = r->file_off, len = r->len;
    if (io->direct) {
        off = r->file_off & ~(uint64_t)(IO_ALIGN - 1);
        len = (r->file_off + r->len - off + IO_ALIGN - 1) & ~(uint64_t)(IO_ALIGN - 1);
    }
    io_uring_prep_read(sqe, io->fd, io->bounce + (size_t)b * io->bounce_bytes, (unsigned)len, off);
    io_uring_sqe_set_data64(sqe, (uint64_t)b);
}

static int uring_batch(struct strata_io *io, const struct strata_io_req *reqs, int n)
{
    struct uring_slot slots[256];
    STRATA_ASSERT(io->depth <= 256);
    for (int b = 0; b < io->depth; b++) slots[b].req = -1;
    int next = 0, done = 0, in_flight = 0, failed = -1, fail_err = 0;
    while (done < n) {
        // Fill every free bounce buffer with the next request.
        for (int b = 0; b < io->depth && next < n && failed < 0; b++) {
            if (slots[b].req >= 0) continue;
            slots[b] = (struct uring_slot){next, 0};
            atomic_fetch_add(&io->n_reads, 1);
            uring_queue(io, &reqs[next++], b);
            in_flight++;
        }
        if (in_flight == 0) break;  // a failure stopped new submissions and all have landed
        int rc = io_uring_submit_and_wait(&io->ring, 1);
        if (rc < 0 && rc != -EINTR) {
            strata_log_error("experts_io: io_uring_submit on %s: %s", io->path, strerror(-rc));
            // Drain what is in flight so the buffers are not written after we return.
            while (in_flight > 0) {
                struct io_uring_cqe *cqe;
                if (io_uring_wait_cqe(&io->ring, &cqe) < 0) break;
                io_uring_cqe_seen(&io->ring, cqe);
                in_flight--;
            }
            return STRATA_EIO;
        }
        struct io_uring_cqe *cqe;
        while (io_uring_peek_cqe(&io->ring, &cqe) == 0) {
            const int b = (int)io_uring_cqe_get_data64(cqe);
            int res = cqe->res;
            io_uring_cqe_seen(&io->ring, cqe);
            in_flight--;
            const struct strata_io_req *r = &reqs[slots[b].req];
            const uint64_t pad = io->direct ? r->file_off & (IO_ALIGN - 1) : 0;
            const enum fault_kind f = next_attempt_fault(io);
            if (f == FAULT_EIO) res = -EIO;
            if (f == FAULT_SHORT && res > 0) res /= 2;
            if (res >= 0 && (uint64_t)res >= pad + r->len) {
                memcpy(r->dst, io->bounce + (size_t)b * io->bounce_bytes + pad, r->len);
                atomic_fetch_add(&io->n_bytes, r->len);
                slots[b].req = -1;
                done++;
                continue;
            }
            if (++slots[b].tries < STRATA_IO_MAX_TRIES && failed < 0) {
                atomic_fetch_add(&io->n_retries, 1);
                uring_queue(io, r, b);
                in_flight++;
                continue;
            }
            if (failed < 0) {
                failed = slots[b].req;
                fail_err = res < 0 ? -res : 0;
            }
            slots[b].req = -1;
            done++;
        }
    }
    if (failed >= 0) {
        log_failure(io, &reqs[failed], fail_err);
        return STRATA_EIO;
    }
    return 0;
}

// ---- public ------------------------------------------------------------------------------------

int strata_io_open(struct strata_io **out, const char *path, enum strata_io_engine engine, int threads,
                   uint64_t max_len)
{
    *out = NULL;
    if (engine >= STRATA_IO_COUNT || threads < 0 || threads > 256 || max_len == 0 || max_len > (1u << 30)) {
        strata_log_error("experts_io: bad engine %d / threads %d / request size %llu", (int)engine, threads,
                         (unsigned long long)max_len);
        return STRATA_EARG;
    }
    struct strata_io *io = calloc(1, sizeof *io);
    if (!io) return STRATA_ENOMEM;
    io->engine = engine;
    io->fd = -1;
    io->max_len = max_len;
    io->path = strdup(path);
    int rc = io->path ? parse_fault(io) : STRATA_ENOMEM;
    if (rc) goto fail;
    if (threads == 0) threads = 4;
    if (engine == STRATA_IO_URING) {
        io->fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        io->direct = io->fd >= 0;
        if (io->fd < 0) {
            strata_log_warn("experts_io: %s refuses O_DIRECT (%s); io_uring reads go through the page cache",
                            path, strerror(errno));
            io->fd = open(path, O_RDONLY | O_CLOEXEC);
        }
    } else {
        io->fd = open(path, O_RDONLY | O_CLOEXEC);
    }
    if (io->fd < 0) {
        strata_log_error("experts_io: cannot open %s: %s", path, strerror(errno));
        rc = -errno;
        goto fail;
    }
    if (engine == STRATA_IO_URING) {
        io->depth = threads;
        io->bounce_bytes = (max_len + 2 * IO_ALIGN + IO_ALIGN - 1) & ~(uint64_t)(IO_ALIGN - 1);
        void *b = NULL;
        if (posix_memalign(&b, IO_ALIGN, (size_t)io->depth * io->bounce_bytes)) {
            strata_log_error("experts_io: out of memory for %d bounce buffers of %llu bytes", io->depth,
                             (unsigned long long)io->bounce_bytes);
            rc = STRATA_ENOMEM;
            goto fail;
        }
        io->bounce = b;
        int e = io_uring_queue_init((unsigned)io->depth, &io->ring, 0);
        if (e == -ENOSYS || e == -EPERM) {
            // Kernels or sandboxes without io_uring: same reads through the pread pool.
            strata_log_warn("experts_io: io_uring unavailable (%s); using the pread pool", strerror(-e));
            free(io->bounce);
            io->bounce = NULL;
            close(io->fd);
            io->fd = open(path, O_RDONLY | O_CLOEXEC);
            io->direct = false;
            io->engine = engine = STRATA_IO_PREAD;
            if (io->fd < 0) {
                strata_log_error("experts_io: cannot open %s: %s", path, strerror(errno));
                rc = -errno;
                goto fail;
            }
        } else if (e < 0) {
            strata_log_error("experts_io: io_uring_queue_init(%d): %s", io->depth, strerror(-e));
            rc = e;
            goto fail;
        } else {
            io->ring_ok = true;
        }
    }
    if (engine == STRATA_IO_PREAD) {
        pthread_mutex_init(&io->mu, NULL);
        pthread_cond_init(&io->work_cv, NULL);
        pthread_cond_init(&io->done_cv, NULL);
        io->threads = calloc((size_t)threads, sizeof *io->threads);
        if (!io->threads) {
            rc = STRATA_ENOMEM;
            goto fail;
        }
        for (int i = 0; i < threads; i++) {
            if (pthread_create(&io->threads[i], NULL, pread_worker, io)) {
                strata_log_error("experts_io: cannot start reader thread %d of %d", i + 1, threads);
                rc = STRATA_ENOMEM;
                goto fail;
            }
            io->n_threads++;
        }
    }
    *out = io;
    return 0;
fail:
    strata_io_close(io);
    return rc;
}

void strata_io_close(struct strata_io *io)
{
    if (!io) return;
    if (io->engine == STRATA_IO_PREAD && io->threads) {
        pthread_mutex_lock(&io->mu);
        io->stop = true;
        pthread_cond_broadcast(&io->work_cv);
        pthread_mutex_unlock(&io->mu);
        for (int i = 0; i < io->n_threads; i++) pthread_join(io->threads[i], NULL);
        free(io->threads);
    }
    if (io->engine == STRATA_IO_PREAD) {
        pthread_mutex_destroy(&io->mu);
        pthread_cond_destroy(&io->work_cv);
        pthread_cond_destroy(&io->done_cv);
    }
    if (io->ring_ok) io_uring_queue_exit(&io->ring);
    free(io->bounce);
    if (io->fd >= 0) close(io->fd);
    free(io->path);
    free(io);
}

int strata_io_read(struct strata_io *io, const struct strata_io_req *reqs, int n)
{
    if (n <= 0) return 0;
    for (int i = 0; i < n; i++)
        if (reqs[i].len == 0 || reqs[i].len > io->max_len || !reqs[i].dst) {
            strata_log_error("experts_io: request %d of %llu bytes (limit %llu)", i,
                             (unsigned long long)reqs[i].len, (unsigned long long)io->max_len);
            return STRATA_EARG;
        }
    return io->engine == STRATA_IO_URING ? uring_batch(io, reqs, n) : pread_batch(io, reqs, n);
}

void strata_io_get_counters(const struct strata_io *io, struct strata_io_counters *c)
{
    c->reads = atomic_load(&((struct strata_io *)io)->n_reads);
    c->retries = atomic_load(&((struct strata_io *)io)->n_retries);
    c->bytes = atomic_load(&((struct strata_io *)io)->n_bytes);
}

uint64_t strata_io_buffer_bytes(const struct strata_io *io)
{
    return io->engine == STRATA_IO_URING ? (uint64_t)io->depth * io->bounce_bytes : 0;
}
