// Every routed expert resident in the backend's memory: the expert provider of a backend whose
// memory is not the host's (a GPU holding the whole model). At open each MoE layer's stacked
// gate/up/down tensors are read from the file in pieces and uploaded once; acquire returns views
// into them and never blocks. The VRAM tier for models larger than the GPU (issue 11) replaces it
// with a cache over the host store.
#ifndef STRATA_ENGINE_RESIDENT_H
#define STRATA_ENGINE_RESIDENT_H

#include <stdint.h>

#include "backend/backend.h"
#include "experts/layout.h"
#include "experts/provider.h"

struct strata_gguf_file;
struct strata_resident;

// 0, STRATA_ENOMEM (one line from the backend naming the memory asked for), STRATA_EIO.
int strata_resident_open(struct strata_resident **out, struct strata_backend *be, const struct strata_gguf_file *f,
                         const struct strata_expert_layout *lay);
void strata_resident_close(struct strata_resident *r);
// Safe to call from several threads (acquire only reads; the counters are atomic).
struct strata_expert_provider strata_resident_provider(struct strata_resident *r);
uint64_t strata_resident_bytes(const struct strata_resident *r);

#endif
