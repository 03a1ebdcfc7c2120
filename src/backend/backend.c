// Opening a backend by kind: the CPU backend always, GPU backends when built in (make CUDA=1).
#include "backend/backend.h"

#include <stddef.h>

#include "backend/cpu/cpu.h"
#include "util/log.h"

static const char *const g_kind_names[STRATA_BACKEND_COUNT] = {"auto", "cpu", "cuda"};

const char *strata_backend_kind_name(enum strata_backend_kind kind)
{
    return (unsigned)kind < STRATA_BACKEND_COUNT ? g_kind_names[kind] : "?";
}

int strata_backend_open(struct strata_backend *out, const struct strata_backend_params *p)
{
    *out = (struct strata_backend){0};
    switch (p->kind) {
    case STRATA_BACKEND_AUTO:
    case STRATA_BACKEND_CPU:
        return strata_backend_cpu_open(out, p->n_threads);
    case STRATA_BACKEND_CUDA:
#ifdef STRATA_CUDA
        strata_log_error("backend_open: this build has CUDA, but the CUDA backend is not implemented yet");
#else
        strata_log_error("backend_open: this build of strata has no CUDA support (rebuild with make CUDA=1)");
#endif
        return STRATA_EUNSUP;
    case STRATA_BACKEND_COUNT: break;
    }
    strata_log_error("backend_open: unknown backend kind %d", (int)p->kind);
    return STRATA_EARG;
}

void strata_backend_close(struct strata_backend *be)
{
    if (be && be->iface) be->iface->free(be->ctx);
    if (be) *be = (struct strata_backend){0};
}
