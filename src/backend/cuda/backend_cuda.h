// The CUDA backend: backend.h's interface over the kernels of cuda.h on one GPU (make CUDA=1).
#ifndef STRATA_BACKEND_CUDA_BACKEND_H
#define STRATA_BACKEND_CUDA_BACKEND_H

#include "backend/backend.h"

// Open device `gpu`. 0, or STRATA_EUNSUP with one line (no driver, no device, an old driver, an
// index out of range, compute capability below 8.0), STRATA_ENOMEM.
int strata_backend_cuda_open(struct strata_backend *out, int gpu);
// Whether a usable CUDA device exists (for the auto backend); *why gets the reason when not.
bool strata_backend_cuda_found(const char **why);

#endif
