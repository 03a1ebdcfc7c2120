// Large, long-lived buffers (weights, expert slots, KV cache): anonymous mappings that ask for
// transparent huge pages, so streaming gigabytes of weights does not walk millions of 4 KiB
// TLB entries. Small requests fall back to aligned malloc. Memory is zero-filled.
#ifndef STRATA_MEM_H
#define STRATA_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// NULL on failure (not logged: the caller names what it was for). Aligned to a page (2 MiB for
// requests of 2 MiB and more).
void *strata_big_alloc(size_t bytes);
// bytes must be the size given to strata_big_alloc. NULL is fine.
void strata_big_free(void *p, size_t bytes);
// Small and medium buffers (scratch, tables): 64-byte aligned, zero-filled, released with free().
// NULL on failure (not logged).
void *strata_zalloc_aligned(size_t bytes);

// Address space for a buffer that fills from its start and grows (a KV cache sized for the whole
// context): an anonymous mapping of `bytes` (page-aligned, reads zero) that takes memory only
// where it is written or committed. Huge pages as the system's default for anonymous memory (no
// advice), so a commit stays near what was asked for. NULL on failure (not logged).
void *strata_reserve_pages(size_t bytes);
// Back [p + off, p + off + len) with memory now (zeroed pages; page-rounded), so that a block is
// paid for in one call instead of a fault per page, and a failure is STRATA_ENOMEM here rather
// than a kill at the first write. 0, or STRATA_ENOMEM. Where the kernel cannot prefault (before
// Linux 5.14) it returns 0 and the pages come at their first write.
int strata_commit_pages(void *p, size_t off, size_t len);
// p and bytes as given to / returned by strata_reserve_pages. NULL is fine.
void strata_release_pages(void *p, size_t bytes);

// The kernel's transparent huge page mode for anonymous memory: "always", "madvise" (what
// strata_big_alloc's advice needs at least) or "never"; "unknown" where the system does not say.
const char *strata_thp_mode(void);
// The mode of a line of that file ("always [madvise] never" -> "madvise"), "" if none.
const char *strata_thp_mode_parse(const char *line);
// This process's anonymous memory now and the part of it on huge pages, in bytes
// (/proc/self/smaps_rollup); false (both 0) where the system does not say.
bool strata_anon_memory(uint64_t *anon, uint64_t *huge);

#endif
