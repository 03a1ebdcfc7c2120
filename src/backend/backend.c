// Opening a backend by kind: the CPU backend always, GPU backends when built in (make CUDA=1).
#include "backend/backend.h"

#include <stddef.h>

#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "util/log.h"
#ifdef STRATA_CUDA
#include "backend/cuda/backend_cuda.h"
#endif

static const char *const g_kind_names[STRATA_BACKEND_COUNT] = {"auto", "cpu", "cuda"};

const char *strata_backend_kind_name(enum strata_backend_kind kind)
{
    return (unsigned)kind < STRATA_BACKEND_COUNT ? g_kind_names[kind] : "?";
}

// Auto: STRATA_BACKEND=cpu|cuda when set, else CUDA where it is built in and finds a device.
static enum strata_backend_kind resolve_auto(void)
{
    const char *env = getenv("STRATA_BACKEND");
    if (env && strcmp(env, "cpu") == 0) return STRATA_BACKEND_CPU;
    if (env && strcmp(env, "cuda") == 0) return STRATA_BACKEND_CUDA;
#ifdef STRATA_CUDA
    const char *why;
    if (strata_backend_cuda_found(&why)) return STRATA_BACKEND_CUDA;
#endif
    return STRATA_BACKEND_CPU;
}

int strata_backend_open(struct strata_backend *out, const struct strata_backend_params *p)
{
    *out = (struct strata_backend){0};
    const enum strata_backend_kind kind = p->kind == STRATA_BACKEND_AUTO ? resolve_auto() : p->kind;
    switch (kind) {
    case STRATA_BACKEND_CPU:
        return strata_backend_cpu_open(out, p->n_threads, p->lazy_memory);
    case STRATA_BACKEND_CUDA:
#ifdef STRATA_CUDA
        return strata_backend_cuda_open(out, p->gpu);
#else
        strata_log_error("backend_open: this build of strata has no CUDA support (rebuild with make CUDA=1)");
        return STRATA_EUNSUP;
#endif
    case STRATA_BACKEND_AUTO:
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
