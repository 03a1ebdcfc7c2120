// Expert I/O engines: read a batch of file ranges into memory and wait for all of them.
//
//   pread  a persistent pool of reader threads, buffered reads straight into the destination
//          (the OS page cache sees every byte).
//   uring  one io_uring on a file opened with O_DIRECT: each range is widened to its enclosing
//          4 KiB-aligned range, read into one of `depth` aligned bounce buffers and copied to the
//          destination at the offset within. Slots stay packed (gate | up | down), so both
//          engines fill the same layout; the bounce buffers are the only extra memory
//          (depth * (largest range + 8 KiB)). Falls back to buffered reads where O_DIRECT is
//          refused (tmpfs), with a warning.
//
// A failed attempt (EIO, or fewer bytes than asked: a short read or an unexpected end of file)
// is retried up to STRATA_IO_MAX_TRIES attempts in all, then the batch fails with one log line.
// Test hook: STRATA_IO_FAULT="N[:eio|short][:R]" makes read attempts N..N+R-1 (1-based, counted
// over the engine's life) fail as asked (default eio, R = 1).
#ifndef STRATA_EXPERTS_IO_H
#define STRATA_EXPERTS_IO_H

#include <stdint.h>

#include "experts/experts.h"

#define STRATA_IO_MAX_TRIES 3

struct strata_io_req {
    uint64_t file_off;   // absolute offset in the file
    uint64_t len;        // bytes, at most the engine's max_len
    void *dst;           // destination, len bytes
};

struct strata_io_counters {
    uint64_t reads, retries, bytes;
};

struct strata_io;

// Open an engine on path. max_len bounds one request (sizes the bounce buffers). 0 or negative.
int strata_io_open(struct strata_io **out, const char *path, enum strata_io_engine engine, int threads,
                   uint64_t max_len);
void strata_io_close(struct strata_io *io);
// Read every request; returns when all are done. 0, or STRATA_EIO after the retries (logged once
// for the first failed request; the others may or may not have been filled).
int strata_io_read(struct strata_io *io, const struct strata_io_req *reqs, int n);
void strata_io_get_counters(const struct strata_io *io, struct strata_io_counters *c);
// Memory the engine holds for bounce buffers.
uint64_t strata_io_buffer_bytes(const struct strata_io *io);

#endif
