// The CUDA device of the VRAM expert tier (vram_dev.h).
#include "engine/vram_dev.h"

#include <stdlib.h>

#include "util/log.h"

#ifdef STRATA_CUDA
#include "backend/cuda/cuda.h"

struct vdev {
    struct strata_backend *be;
    struct strata_cuda_copier *cp;
    void *registered;
};

static void *vd_alloc(void *ctx, size_t bytes, const char *what)
{
    struct vdev *d = ctx;
    return d->be->iface->alloc(d->be->ctx, bytes, what);
}
static void vd_free(void *ctx, void *p)
{
    struct vdev *d = ctx;
    d->be->iface->release(d->be->ctx, p);
}
static int vd_bind(void *ctx) { return strata_cuda_copier_bind(((struct vdev *)ctx)->cp); }
static int vd_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    return strata_cuda_copier_copy(((struct vdev *)ctx)->cp, dst, src, bytes);
}
static int vd_wait(void *ctx) { return strata_cuda_copier_wait(((struct vdev *)ctx)->cp); }
static const struct strata_vram_dev_i g_vd_iface = {vd_alloc, vd_free, vd_bind, vd_copy, vd_wait};

int strata_vram_dev_open(struct strata_vram_dev *out, struct strata_backend *be, int gpu, void *host,
                         size_t host_bytes)
{
    *out = (struct strata_vram_dev){0};
    struct vdev *d = calloc(1, sizeof *d);
    if (!d) return STRATA_ENOMEM;
    d->be = be;
    int rc = strata_cuda_copier_open(&d->cp, gpu);
    if (rc) {
        free(d);
        return rc;
    }
    if (host && host_bytes && strata_cuda_host_register(host, host_bytes) == 0) d->registered = host;
    *out = (struct strata_vram_dev){&g_vd_iface, d};
    return 0;
}

void strata_vram_dev_close(struct strata_vram_dev *vd)
{
    struct vdev *d = vd->ctx;
    if (!d) return;
    strata_cuda_copier_close(d->cp);
    strata_cuda_host_unregister(d->registered);
    free(d);
    *vd = (struct strata_vram_dev){0};
}

#else

int strata_vram_dev_open(struct strata_vram_dev *out, struct strata_backend *be, int gpu, void *host,
                         size_t host_bytes)
{
    (void)be, (void)gpu, (void)host, (void)host_bytes;
    *out = (struct strata_vram_dev){0};
    strata_log_error("vram experts: strata was built without CUDA (make CUDA=1)");
    return STRATA_EUNSUP;
}

void strata_vram_dev_close(struct strata_vram_dev *vd) { *vd = (struct strata_vram_dev){0}; }

#endif
