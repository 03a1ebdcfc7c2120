// A loaded model: hyperparameters, the dense weights (resident, as views in one backend's memory)
// and the layout of the routed experts (which the expert provider serves). Sequences, scratch and
// the forward pass are in forward.h; the engine (engine/) ties them together.
#ifndef STRATA_MODEL_H
#define STRATA_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/arch.h"

struct strata_backend;
struct strata_expert_layout;
struct strata_gguf_file;
struct strata_model;

// Open a GGUF and load its dense weights into backend `be` (borrowed; it must outlive the
// model). 0 or negative (one error line logged).
int strata_model_load(struct strata_model **out, const char *path, struct strata_backend *be);
void strata_model_free(struct strata_model *m);
const struct strata_hparams *strata_model_hparams(const struct strata_model *m);
const struct strata_gguf_file *strata_model_file(const struct strata_model *m);
struct strata_gguf_file *strata_model_file_rw(struct strata_model *m);   // for the expert store's reads
// The routed experts' layout in the file (borrowed until strata_model_free).
const struct strata_expert_layout *strata_model_expert_layout(const struct strata_model *m);
uint64_t strata_model_dense_bytes(const struct strata_model *m);   // resident non-expert weights
// Where the dense weights' host bytes are (model.c's arena): the arena's bytes used and mapped (0
// without one), and the backend views' bytes inside and outside it (a backend that copied them
// to its own memory has them all outside); `aligned`: every view inside starts 64-byte aligned.
struct strata_model_mem {
    size_t arena_used, arena_cap;
    uint64_t views_in_arena, views_outside;
    bool aligned;
};
void strata_model_mem_info(const struct strata_model *m, struct strata_model_mem *out);

#endif
