// Large, long-lived buffers (weights, expert slots, KV cache): anonymous mappings that ask for
// transparent huge pages, so streaming gigabytes of weights does not walk millions of 4 KiB
// TLB entries. Small requests fall back to aligned malloc. Memory is zero-filled.
#ifndef STRATA_MEM_H
#define STRATA_MEM_H

#include <stddef.h>

// NULL on failure (not logged: the caller names what it was for). Aligned to at least 64 bytes
// (2 MiB for requests of 2 MiB and more).
void *strata_big_alloc(size_t bytes);
// bytes must be the size given to strata_big_alloc. NULL is fine.
void strata_big_free(void *p, size_t bytes);
// Small and medium buffers (scratch, tables): 64-byte aligned, zero-filled, released with free().
// NULL on failure (not logged).
void *strata_zalloc_aligned(size_t bytes);

#endif
