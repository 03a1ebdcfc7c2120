// The device of the VRAM expert tier (experts/vram.h) on the CUDA backend: slots allocated through
// the backend (counted in its VRAM statistics), copies on a stream of their own, and the host
// expert store's slab page-locked once (cudaHostRegister) so fills copy at pinned speed.
#ifndef STRATA_ENGINE_VRAM_DEV_H
#define STRATA_ENGINE_VRAM_DEV_H

#include <stddef.h>

#include "backend/backend.h"
#include "experts/vram.h"

// 0, or STRATA_EUNSUP with one line where strata was built without CUDA. host / host_bytes: the
// host store's slab (registered here, unregistered at close), or NULL.
int strata_vram_dev_open(struct strata_vram_dev *out, struct strata_backend *be, int gpu, void *host,
                         size_t host_bytes);
void strata_vram_dev_close(struct strata_vram_dev *d);

#endif
