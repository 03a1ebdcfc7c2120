// Expert I/O engines: a pread thread pool and io_uring with O_DIRECT (see io.h for the contract).
//
// Both engines serve one queue of tickets (normal ones first, then hints) under one mutex. The
// pread workers take one request at a time; the uring engine keeps up to `depth` requests in
// flight: whoever queues work or reaps a completion refills the ring under the mutex (the
// submission side of the ring is only touched under it), and one completion thread reaps
// (the completion side is only touched by it).
#include "experts/io.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

#define STOP_TAG UINT64_MAX

enum fault_kind { FAULT_NONE, FAULT_EIO, FAULT_SHORT };

struct inflight {
    struct strata_io_ticket *t;   // NULL when free
    int req;
    int tries;
    bool low;                     // started as a hint
};

struct queue {
    struct strata_io_ticket *head, *tail;
};

struct strata_io {
    enum strata_io_engine engine;
    int fd;                       // buffered
    int dfd;                      // O_DIRECT (uring, where allowed), else -1
    bool direct;
    uint64_t dio_align;           // O_DIRECT offset/length alignment (divides STRATA_IO_PAGE)
    char *path;
    uint64_t max_len;
    // fault injection (STRATA_IO_FAULT)
    uint64_t fault_first, fault_count;
    enum fault_kind fault_kind;
    atomic_uint_fast64_t attempts;
    atomic_uint_fast64_t n_reads, n_retries, n_bytes;
    // the queue and completion signalling
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct queue q[2];            // [0] normal, [1] hints
    int n_low_active, max_low;    // hint reads in flight, and their cap (half the depth)
    bool stop;
    // pread pool
    pthread_t *threads;
    int n_threads;
    // uring
    struct io_uring ring;
    bool ring_ok;
    int depth;
    struct inflight *inflight;    // [depth]
    int n_inflight;
    pthread_t reaper;
    bool reaper_ok;
};

// ---- faults and logging ------------------------------------------------------------------------

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

int strata_io_ticket_error(const struct strata_io *io, const struct strata_io_ticket *t)
{
    if (t->failed_req < 0) return 0;
    const struct strata_io_req *r = &t->reqs[t->failed_req];
    strata_log_error("experts_io: read of %llu bytes at offset %llu of %s failed after %d tries: %s",
                     (unsigned long long)r->len, (unsigned long long)r->file_off, io->path,
                     STRATA_IO_MAX_TRIES, t->failed_err ? strerror(t->failed_err) : "short read");
    return STRATA_EIO;
}

// ---- the queue (all under io->mu) --------------------------------------------------------------

static void queue_push(struct queue *q, struct strata_io_ticket *t)
{
    t->next = NULL;
    if (q->tail) q->tail->next = t;
    else q->head = t;
    q->tail = t;
}

static bool queue_remove(struct queue *q, struct strata_io_ticket *t)
{
    struct strata_io_ticket *prev = NULL;
    for (struct strata_io_ticket *c = q->head; c; prev = c, c = c->next) {
        if (c != t) continue;
        if (prev) prev->next = c->next;
        else q->head = c->next;
        if (q->tail == c) q->tail = prev;
        c->next = NULL;
        return true;
    }
    return false;
}

// The next request to start: normal tickets first; hints only while fewer than max_low hint
// reads are in flight, so demand reads always find room. A ticket leaves the queue when its last
// request starts. *low: the request counts as a hint until it finishes.
static struct strata_io_ticket *next_req(struct strata_io *io, int *req, bool *low)
{
    for (int p = 0; p < 2; p++) {
        struct strata_io_ticket *t = io->q[p].head;
        if (!t || (p == 1 && io->n_low_active >= io->max_low)) continue;
        *low = p == 1;
        io->n_low_active += p == 1;
        *req = t->issued++;
        if (t->issued == t->n) {
            io->q[p].head = t->next;
            if (!io->q[p].head) io->q[p].tail = NULL;
            t->next = NULL;
            t->queued = false;
        }
        return t;
    }
    return NULL;
}

// Count one request of t as finished (failed: err >= 0 is its errno, 0 for a short read).
// True when the ticket is now complete.
static bool finish_req(struct strata_io_ticket *t, int req, bool ok, int err)
{
    if (!ok && t->failed_req < 0) {
        t->failed_req = req;
        t->failed_err = err;
    }
    if (++t->finished < t->n) return false;
    t->complete = true;
    return true;
}

// Under io->mu, once a ticket is complete: a waiter is woken now (it may free the ticket as soon
// as the mutex is released); a ticket with a callback is returned, for call_done after unlocking.
static struct strata_io_ticket *completed(struct strata_io *io, struct strata_io_ticket *t)
{
    if (t->done) return t;
    pthread_cond_broadcast(&io->done_cv);
    return NULL;
}

// Outside io->mu.
static void call_done(struct strata_io_ticket *t)
{
    if (t) t->done(t->user, t, t->failed_req < 0 ? 0 : STRATA_EIO);
}

// ---- pread pool --------------------------------------------------------------------------------

// One attempt: 0, or the errno of the failure (a short read gives EIO and *short_read).
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

// Read r with retries: 0, or the errno of the last failure (0 for short) in *err and false.
static bool pread_one(struct strata_io *io, const struct strata_io_req *r, int *err)
{
    atomic_fetch_add(&io->n_reads, 1);
    for (int t = 0; t < STRATA_IO_MAX_TRIES; t++) {
        bool short_read;
        int e = pread_attempt(io, r, &short_read);
        if (e == 0) {
            atomic_fetch_add(&io->n_bytes, r->len);
            return true;
        }
        *err = short_read ? 0 : e;
        if (t + 1 < STRATA_IO_MAX_TRIES) atomic_fetch_add(&io->n_retries, 1);
    }
    return false;
}

static void *pread_worker(void *arg)
{
    struct strata_io *io = arg;
    pthread_mutex_lock(&io->mu);
    for (;;) {
        int i = 0;
        bool low = false;
        struct strata_io_ticket *t = NULL;
        while (!io->stop && !(t = next_req(io, &i, &low))) pthread_cond_wait(&io->work_cv, &io->mu);
        if (!t) break;
        const struct strata_io_req *r = &t->reqs[i];
        pthread_mutex_unlock(&io->mu);
        int err = 0;
        const bool ok = pread_one(io, r, &err);
        pthread_mutex_lock(&io->mu);
        if (low) {
            io->n_low_active--;
            pthread_cond_signal(&io->work_cv);  // a hint may start now
        }
        struct strata_io_ticket *cb = finish_req(t, i, ok, err) ? completed(io, t) : NULL;
        if (cb) {
            pthread_mutex_unlock(&io->mu);
            call_done(cb);
            pthread_mutex_lock(&io->mu);
        }
    }
    pthread_mutex_unlock(&io->mu);
    return NULL;
}

// ---- io_uring ----------------------------------------------------------------------------------

// Queue request r of in-flight slot b: the device-aligned enclosing range, straight into the
// destination's pages when O_DIRECT. Under io->mu.
static void uring_prep(struct strata_io *io, const struct strata_io_req *r, int b)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    STRATA_ASSERT(sqe != NULL);  // never more in flight than the ring's depth
    uint64_t off = r->file_off, len = r->len;
    char *dst = r->dst;
    const bool direct = io->direct && r->own_pages;
    if (direct) {
        const uint64_t a = io->dio_align;
        off = r->file_off & ~(a - 1);
        len = (r->file_off + r->len - off + a - 1) & ~(a - 1);
        dst -= r->file_off - off;
    }
    io_uring_prep_read(sqe, direct ? io->dfd : io->fd, dst, (unsigned)len, off);
    io_uring_sqe_set_data64(sqe, (uint64_t)b);
}

static void uring_submit_locked(struct strata_io *io)
{
    for (;;) {
        int rc = io_uring_submit(&io->ring);
        if (rc >= 0) return;
        // The ring is sized for every read in flight plus the stop request, so only transient
        // refusals are possible; the queued entries stay in the ring and go with the next call.
        STRATA_ASSERT(rc == -EINTR || rc == -EAGAIN || rc == -EBUSY);
    }
}

// Start queued requests while the ring has room. Under io->mu.
static void uring_pump(struct strata_io *io)
{
    bool any = false;
    for (int b = 0; b < io->depth && io->n_inflight < io->depth; b++) {
        if (io->inflight[b].t) continue;
        int i;
        bool low;
        struct strata_io_ticket *t = next_req(io, &i, &low);
        if (!t) break;
        io->inflight[b] = (struct inflight){t, i, 0, low};
        io->n_inflight++;
        atomic_fetch_add(&io->n_reads, 1);
        uring_prep(io, &t->reqs[i], b);
        any = true;
    }
    if (any) uring_submit_locked(io);
}

static void *uring_reaper(void *arg)
{
    struct strata_io *io = arg;
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&io->ring, &cqe);
        if (rc == -EINTR || rc == -EAGAIN) continue;
        STRATA_ASSERT(rc == 0);
        const uint64_t tag = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&io->ring, cqe);
        if (tag == STOP_TAG) break;
        pthread_mutex_lock(&io->mu);
        struct inflight *f = &io->inflight[tag];
        struct strata_io_ticket *t = f->t;
        const struct strata_io_req *r = &t->reqs[f->req];
        const uint64_t pad = io->direct && r->own_pages ? r->file_off & (io->dio_align - 1) : 0;
        const enum fault_kind k = next_attempt_fault(io);
        if (k == FAULT_EIO) res = -EIO;
        if (k == FAULT_SHORT && res > 0) res /= 2;
        struct strata_io_ticket *cb = NULL;
        if (res >= 0 && (uint64_t)res >= pad + r->len) {
            atomic_fetch_add(&io->n_bytes, r->len);
            if (finish_req(t, f->req, true, 0)) cb = completed(io, t);
            io->n_low_active -= f->low;
            f->t = NULL;
            io->n_inflight--;
        } else if (++f->tries < STRATA_IO_MAX_TRIES) {
            atomic_fetch_add(&io->n_retries, 1);
            uring_prep(io, r, (int)tag);
            uring_submit_locked(io);
        } else {
            if (finish_req(t, f->req, false, res < 0 ? -res : 0)) cb = completed(io, t);
            io->n_low_active -= f->low;
            f->t = NULL;
            io->n_inflight--;
        }
        uring_pump(io);
        pthread_mutex_unlock(&io->mu);
        call_done(cb);
    }
    return NULL;
}

// O_DIRECT alignment of the file: statx's dio_offset_align where the kernel reports it, else
// 4 KiB. 0 when it is larger than the 4 KiB phase rule can serve.
static uint64_t dio_alignment(int fd)
{
    uint64_t a = STRATA_IO_PAGE;
#ifdef STATX_DIOALIGN
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
        sx.stx_dio_offset_align > 0) {
        a = sx.stx_dio_offset_align;
        if (sx.stx_dio_mem_align > a) a = sx.stx_dio_mem_align;
    }
#endif
    if (a > STRATA_IO_PAGE || (STRATA_IO_PAGE % a) != 0) return 0;
    return a;
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
    io->fd = io->dfd = -1;
    io->max_len = max_len;
    pthread_mutex_init(&io->mu, NULL);
    pthread_cond_init(&io->work_cv, NULL);
    pthread_cond_init(&io->done_cv, NULL);
    io->path = strdup(path);
    int rc = io->path ? parse_fault(io) : STRATA_ENOMEM;
    if (rc) goto fail;
    if (threads == 0) threads = 4;
    io->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (io->fd < 0) {
        strata_log_error("experts_io: cannot open %s: %s", path, strerror(errno));
        rc = -errno;
        goto fail;
    }
    if (engine == STRATA_IO_URING) {
        io->dfd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
        if (io->dfd >= 0) {
            io->dio_align = dio_alignment(io->dfd);
            io->direct = io->dio_align != 0;
            if (!io->direct) {
                strata_log_warn("experts_io: %s needs O_DIRECT alignment above 4 KiB; io_uring reads go "
                                "through the page cache", path);
                close(io->dfd);
                io->dfd = -1;
            }
        } else {
            strata_log_warn("experts_io: %s refuses O_DIRECT (%s); io_uring reads go through the page cache",
                            path, strerror(errno));
        }
    }
    if (engine == STRATA_IO_URING) {
        io->depth = threads;
        int e = io_uring_queue_init((unsigned)io->depth + 1, &io->ring, 0);  // + the stop request
        if (e == -ENOSYS || e == -EPERM) {
            // Kernels or sandboxes without io_uring: same reads through the pread pool.
            strata_log_warn("experts_io: io_uring unavailable (%s); using the pread pool", strerror(-e));
            if (io->dfd >= 0) close(io->dfd);
            io->dfd = -1;
            io->direct = false;
            io->engine = engine = STRATA_IO_PREAD;
        } else if (e < 0) {
            strata_log_error("experts_io: io_uring_queue_init(%d): %s", io->depth, strerror(-e));
            rc = e;
            goto fail;
        } else {
            io->ring_ok = true;
            io->inflight = calloc((size_t)io->depth, sizeof *io->inflight);
            if (!io->inflight) {
                rc = STRATA_ENOMEM;
                goto fail;
            }
            if (pthread_create(&io->reaper, NULL, uring_reaper, io)) {
                strata_log_error("experts_io: cannot start the io_uring completion thread");
                rc = STRATA_ENOMEM;
                goto fail;
            }
            io->reaper_ok = true;
        }
    }
    io->max_low = (io->ring_ok ? io->depth : threads) / 2;
    if (io->max_low < 1) io->max_low = 1;
    if (engine == STRATA_IO_PREAD) {
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
    pthread_mutex_lock(&io->mu);
    io->stop = true;
    pthread_cond_broadcast(&io->work_cv);
    if (io->reaper_ok) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
        STRATA_ASSERT(sqe != NULL);
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, STOP_TAG);
        uring_submit_locked(io);
    }
    pthread_mutex_unlock(&io->mu);
    if (io->reaper_ok) pthread_join(io->reaper, NULL);
    for (int i = 0; i < io->n_threads; i++) pthread_join(io->threads[i], NULL);
    free(io->threads);
    if (io->ring_ok) io_uring_queue_exit(&io->ring);
    free(io->inflight);
    pthread_mutex_destroy(&io->mu);
    pthread_cond_destroy(&io->work_cv);
    pthread_cond_destroy(&io->done_cv);
    if (io->fd >= 0) close(io->fd);
    if (io->dfd >= 0) close(io->dfd);
    free(io->path);
    free(io);
}

int strata_io_submit(struct strata_io *io, struct strata_io_ticket *t)
{
    for (int i = 0; i < t->n; i++) {
        const struct strata_io_req *r = &t->reqs[i];
        if (r->len == 0 || r->len > io->max_len || !r->dst ||
            (r->own_pages && (((uintptr_t)r->dst ^ r->file_off) & (STRATA_IO_PAGE - 1)))) {
            strata_log_error("experts_io: request %d of %llu bytes at offset %llu (limit %llu, destination "
                             "phase %llu)", i, (unsigned long long)r->len, (unsigned long long)r->file_off,
                             (unsigned long long)io->max_len,
                             (unsigned long long)((uintptr_t)r->dst & (STRATA_IO_PAGE - 1)));
            return STRATA_EARG;
        }
    }
    t->issued = t->finished = 0;
    t->failed_req = -1;
    t->failed_err = 0;
    t->complete = false;
    pthread_mutex_lock(&io->mu);
    if (t->n <= 0) {
        t->complete = true;
        struct strata_io_ticket *cb = completed(io, t);
        pthread_mutex_unlock(&io->mu);
        call_done(cb);
        return 0;
    }
    t->queued = true;
    queue_push(&io->q[t->low ? 1 : 0], t);
    if (io->ring_ok) uring_pump(io);
    else pthread_cond_broadcast(&io->work_cv);
    pthread_mutex_unlock(&io->mu);
    return 0;
}

void strata_io_promote(struct strata_io *io, struct strata_io_ticket *t)
{
    pthread_mutex_lock(&io->mu);
    if (t->queued && t->low && queue_remove(&io->q[1], t)) {
        t->low = false;
        queue_push(&io->q[0], t);
    }
    pthread_mutex_unlock(&io->mu);
}

bool strata_io_cancel(struct strata_io *io, struct strata_io_ticket *t)
{
    pthread_mutex_lock(&io->mu);
    const bool taken = t->queued && t->issued == 0 && queue_remove(&io->q[t->low ? 1 : 0], t);
    if (taken) t->queued = false;
    pthread_mutex_unlock(&io->mu);
    return taken;
}

int strata_io_wait(struct strata_io *io, struct strata_io_ticket *t)
{
    pthread_mutex_lock(&io->mu);
    while (!t->complete) pthread_cond_wait(&io->done_cv, &io->mu);
    pthread_mutex_unlock(&io->mu);
    return strata_io_ticket_error(io, t);
}

int strata_io_read(struct strata_io *io, const struct strata_io_req *reqs, int n)
{
    struct strata_io_ticket t = {.reqs = reqs, .n = n};
    int rc = strata_io_submit(io, &t);
    return rc ? rc : strata_io_wait(io, &t);
}

void strata_io_get_counters(const struct strata_io *io, struct strata_io_counters *c)
{
    c->reads = atomic_load(&((struct strata_io *)io)->n_reads);
    c->retries = atomic_load(&((struct strata_io *)io)->n_retries);
    c->bytes = atomic_load(&((struct strata_io *)io)->n_bytes);
}

bool strata_io_direct(const struct strata_io *io) { return io->direct; }

int strata_io_depth(const struct strata_io *io) { return io->ring_ok ? io->depth : io->n_threads; }

const char *strata_io_engine_name(enum strata_io_engine e)
{
    static const char *const names[STRATA_IO_COUNT] = {"pread", "uring"};
    return e < STRATA_IO_COUNT ? names[e] : "?";
}
