// Expert I/O engines: queue file ranges to be read into memory (submit) and learn when they are
// done (a callback, or wait), so reads are in flight while the caller computes.
//
//   pread  a persistent pool of reader threads, buffered reads straight into the destination
//          (the OS page cache sees every byte).
//   uring  one io_uring, up to `depth` reads in flight, reaped by one completion thread. A
//          request whose destination sits at the file offset's phase within 4 KiB (dst = file_off
//          mod 4096) and owns the 4 KiB pages around it (own_pages; the expert store places the
//          parts of paged layers so, see layout.h) is widened to the device's O_DIRECT alignment
//          (statx dio_offset_align, 512 B on most disks, at most 4 KiB) and read with O_DIRECT
//          straight into those pages: no bounce buffer, no copy, no page cache. Other requests
//          are read through the page cache on a second descriptor. Everything goes through the
//          page cache, with a warning, where O_DIRECT is refused (tmpfs) or needs more than 4 KiB
//          alignment.
//
// Requests are grouped in tickets. A ticket is queued at normal priority or as a hint (low:
// served only when no normal ticket waits; strata_io_promote moves a hint up when someone needs
// it now). The engine holds at most `depth` reads in flight (uring) or `threads` (pread).
//
// A failed attempt (EIO, or fewer bytes than asked: a short read or an unexpected end of file)
// is retried up to STRATA_IO_MAX_TRIES attempts in all, then the ticket completes with an error;
// the log line is written by whoever consumes the result (strata_io_wait, or
// strata_io_ticket_error), in that thread, so it becomes that thread's strata_last_error.
// Test hook: STRATA_IO_FAULT="N[:eio|short][:R]" makes read attempts N..N+R-1 (1-based, counted
// over the engine's life) fail as asked (default eio, R = 1).
//
// Threads: submit, promote and wait may be called from any thread; done callbacks run on an I/O
// thread with no engine lock held, so they may take the caller's own locks (the expert store's
// mutex), and the caller may hold its lock while calling submit or promote.
#ifndef STRATA_EXPERTS_IO_H
#define STRATA_EXPERTS_IO_H

#include <stdbool.h>
#include <stdint.h>

#include "strata.h"  // enum strata_io_engine

#define STRATA_IO_MAX_TRIES 3
#define STRATA_IO_PAGE 4096u   // the phase rule's period (see the header comment)


struct strata_io_req {
    uint64_t file_off;   // absolute offset in the file
    uint64_t len;        // bytes, at most the engine's max_len
    void *dst;           // destination of len bytes
    bool own_pages;      // dst is at file_off's phase within 4 KiB and the request owns the
                         // pages around it: O_DIRECT may read straight into them
};

struct strata_io_ticket;
// Called once when every request of t has landed or failed for good (rc 0 or STRATA_EIO); t may
// be reused or freed from here on.
typedef void (*strata_io_done_fn)(void *user, struct strata_io_ticket *t, int rc);

struct strata_io_ticket {
    // set by the caller before submit
    const struct strata_io_req *reqs;  // [n], borrowed until done
    int n;
    bool low;                          // a hint: after every normal ticket
    strata_io_done_fn done;            // or NULL: the caller will strata_io_wait
    void *user;
    // the engine's (under its lock)
    int issued, finished;              // requests started / landed or failed for good
    int failed_req, failed_err;        // first request that failed for good (-1), its errno (0: short)
    bool complete, queued;
    struct strata_io_ticket *next;     // queue link
};

struct strata_io_counters {
    uint64_t reads, retries, bytes;    // requests issued, attempts repeated, bytes landed
};

struct strata_io;

// Open an engine on path. threads: pread threads or io_uring depth (0: 4). max_len bounds one
// request. 0 or negative.
int strata_io_open(struct strata_io **out, const char *path, enum strata_io_engine engine, int threads,
                   uint64_t max_len);
// Every submitted ticket must be complete first.
void strata_io_close(struct strata_io *io);
// Queue t (reqs, n, low, done, user set). 0, or STRATA_EARG for a malformed request (logged,
// nothing queued, done not called).
int strata_io_submit(struct strata_io *io, struct strata_io_ticket *t);
// Serve t at normal priority if it still waits as a hint. No-op otherwise.
void strata_io_promote(struct strata_io *io, struct strata_io_ticket *t);
// Take t back if none of its requests has started: true (t is no longer the engine's, and done
// is not called), else false (it completes as usual).
bool strata_io_cancel(struct strata_io *io, struct strata_io_ticket *t);
// Block until t (submitted without a done callback) is complete. 0 or STRATA_EIO (logged here).
int strata_io_wait(struct strata_io *io, struct strata_io_ticket *t);
// Log the failure of a completed ticket in this thread; returns STRATA_EIO (0 if it did not fail).
int strata_io_ticket_error(const struct strata_io *io, const struct strata_io_ticket *t);
// submit + wait.
int strata_io_read(struct strata_io *io, const struct strata_io_req *reqs, int n);
void strata_io_get_counters(const struct strata_io *io, struct strata_io_counters *c);
// Reads issued straight from the device (O_DIRECT) rather than through the page cache.
bool strata_io_direct(const struct strata_io *io);
int strata_io_depth(const struct strata_io *io);
const char *strata_io_engine_name(enum strata_io_engine e);

#endif
