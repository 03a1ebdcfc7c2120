// The CPU backend: backend.h's interface over host memory, the persistent thread pool and the
// kernel table of the best instruction set this CPU runs (STRATA_ISA can force a lower one).
#ifndef STRATA_BACKEND_CPU_H
#define STRATA_BACKEND_CPU_H

#include "backend/backend.h"

// n_threads: compute threads (0: all online CPUs); the backend owns its pool. 0 or negative.
int strata_backend_cpu_open(struct strata_backend *out, int n_threads, bool lazy_memory);

#endif
