// The CUDA context: device selection and checks, the stream, device memory with accounting,
// uploads through pinned staging, CUDA graphs of the decode step, and event timing.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/mm.cuh"

int strata_cuda_device_count(const char **why)
{
    static const char *none = "";
    *why = none;
    int drv = 0, rt = 0, n = 0;
    cudaError_t e = cudaDriverGetVersion(&drv);
    if (e != cudaSuccess || drv == 0) {
        *why = "no NVIDIA driver found";
        return 0;
    }
    cudaRuntimeGetVersion(&rt);
    if (drv < rt) {
        *why = "the NVIDIA driver is older than the CUDA runtime strata was built with";
        return 0;
    }
    e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && n == 0)) {
        *why = "no CUDA device found";
        return 0;
    }
    if (e != cudaSuccess) {
        *why = cudaGetErrorString(e);
        return 0;
    }
    return n;
}

int strata_cuda_open(struct strata_cuda **out, int device)
{
    *out = NULL;
    const char *why;
    const int n = strata_cuda_device_count(&why);
    if (n == 0) {
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        strata_log_error("cuda: %s (driver supports CUDA %d.%d, strata was built with %d.%d)", why, drv / 1000,
                         drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        return STRATA_EUNSUP;
    }
    if (device < 0 || device >= n) {
        strata_log_error("cuda: --gpu %d, but this machine has %d CUDA device%s (0..%d)", device, n, n == 1 ? "" : "s",
                         n - 1);
        return STRATA_EUNSUP;
    }
    cudaDeviceProp prop;
    CU_TRY(cudaGetDeviceProperties(&prop, device));
    if (prop.major < 8) {
        strata_log_error("cuda: device %d (%s) has compute capability %d.%d; strata's CUDA kernels need 8.0 or newer",
                         device, prop.name, prop.major, prop.minor);
        return STRATA_EUNSUP;
    }
    CU_TRY(cudaSetDevice(device));
    struct strata_cuda *cu = (struct strata_cuda *)calloc(1, sizeof *cu);
    if (!cu) return STRATA_ENOMEM;
    cu->device = device;
    cu->n_sm = prop.multiProcessorCount;
    cu->cc = prop.major * 10 + prop.minor;
    snprintf(cu->name, sizeof cu->name, "%s", prop.name);
    const char *pdl = getenv("STRATA_CUDA_PDL");
    cu->pdl = prop.major >= 9 && !(pdl && strcmp(pdl, "0") == 0);
    int rc = 0;
    if (cudaStreamCreateWithFlags(&cu->stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&cu->ev[0]) != cudaSuccess || cudaEventCreate(&cu->ev[1]) != cudaSuccess) {
        strata_log_error("cuda: cannot create a stream on device %d (%s)", device, prop.name);
        rc = STRATA_EIO;
    }
    if (rc == 0) rc = strata_cuda_tables_quant();
    if (rc == 0) rc = strata_cuda_tables_mv();
    if (rc == 0) rc = strata_cuda_tables_mmq();
    if (rc == 0) rc = strata_cuda_mmq_init();
    if (rc == 0) rc = strata_cuda_attn_init();
    if (rc) {
        strata_cuda_close(cu);
        return rc;
    }
    *out = cu;
    return 0;
}

void strata_cuda_close(struct strata_cuda *cu)
{
    if (!cu) return;
    cudaSetDevice(cu->device);
    if (cu->stream) CU_WARN(cudaStreamSynchronize(cu->stream));
    if (cu->graph_exec) CU_WARN(cudaGraphExecDestroy(cu->graph_exec));
    for (size_t i = 0; i < cu->n_allocs; i++) CU_WARN(cudaFree(cu->allocs[i].p));
    free(cu->allocs);
    if (cu->pinned) CU_WARN(cudaFreeHost(cu->pinned));
    for (int i = 0; i < 2; i++)
        if (cu->ev[i]) CU_WARN(cudaEventDestroy(cu->ev[i]));
    if (cu->stream) CU_WARN(cudaStreamDestroy(cu->stream));
    free(cu);
}

void strata_cuda_get_info(struct strata_cuda *cu, struct strata_cuda_info *info)
{
    memset(info, 0, sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", cu->name);
    info->device = cu->device;
    info->cc_major = cu->cc / 10;
    info->cc_minor = cu->cc % 10;
    info->n_sm = cu->n_sm;
    cudaDriverGetVersion(&info->driver_version);
    cudaRuntimeGetVersion(&info->runtime_version);
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess) {
        info->free_bytes = fr;
        info->total_bytes = tot;
    }
}

// ---- memory --------------------------------------------------------------------------------------

void *strata_cuda_alloc(struct strata_cuda *cu, size_t bytes, const char *what)
{
    if (cu->n_allocs == cu->cap_allocs) {
        size_t cap = cu->cap_allocs ? 2 * cu->cap_allocs : 64;
        struct strata_cuda_alloc_rec *a = (struct strata_cuda_alloc_rec *)realloc(cu->allocs, cap * sizeof *a);
        if (!a) return NULL;
        cu->allocs = a;
        cu->cap_allocs = cap;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        cudaGetLastError();  // clear it: out of memory is not sticky
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        strata_log_error("cuda: not enough device memory for %s: %.1f MiB asked, %.1f MiB free of %.1f MiB "
                         "(strata holds %.1f MiB)", what, bytes / 1048576.0, fr / 1048576.0, tot / 1048576.0,
                         cu->bytes_used / 1048576.0);
        return NULL;
    }
    cu->allocs[cu->n_allocs++] = (struct strata_cuda_alloc_rec){p, bytes};
    cu->bytes_used += bytes;
    if (cu->bytes_used > cu->bytes_peak) cu->bytes_peak = cu->bytes_used;
    return p;
}

void strata_cuda_free(struct strata_cuda *cu, void *p)
{
    if (!p) return;
    for (size_t i = 0; i < cu->n_allocs; i++) {
        if (cu->allocs[i].p != p) continue;
        cu->bytes_used -= cu->allocs[i].bytes;
        cu->allocs[i] = cu->allocs[--cu->n_allocs];
        CU_WARN(cudaFree(p));
        return;
    }
    strata_log_warn("cuda: free of a pointer strata did not allocate");
}

uint64_t strata_cuda_bytes_used(const struct strata_cuda *cu) { return cu->bytes_used; }
uint64_t strata_cuda_bytes_peak(const struct strata_cuda *cu) { return cu->bytes_peak; }

int strata_cuda_sync(struct strata_cuda *cu)
{
    CU_TRY(cudaStreamSynchronize(cu->stream));
    return 0;
}

int strata_cuda_upload(struct strata_cuda *cu, void *dst, const void *src, size_t bytes)
{
    CU_TRY(cudaStreamSynchronize(cu->stream));
    CU_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

int strata_cuda_download(struct strata_cuda *cu, void *dst, const void *src, size_t bytes)
{
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu->stream));
    CU_TRY(cudaStreamSynchronize(cu->stream));
    return 0;
}

int strata_cuda_memset(struct strata_cuda *cu, void *dst, int value, size_t bytes)
{
    CU_TRY(cudaMemsetAsync(dst, value, bytes, cu->stream));
    return 0;
}

int strata_cuda_copy_async(struct strata_cuda *cu, void *dst, const void *src, size_t bytes)
{
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cu->stream));
    return 0;
}

// Two pinned halves of 32 MiB: one fills from host memory while the other copies (measured on the
// H200 machine: 55 GB/s pinned against 18 pageable).
#define STAGE_BYTES ((size_t)32 << 20)

int strata_cuda_upload_staged(struct strata_cuda *cu, void *dst, const void *src, size_t bytes,
                              void (*progress)(void *user, uint64_t done, uint64_t total), void *user)
{
    if (!cu->pinned) {
        if (cudaHostAlloc(&cu->pinned, 2 * STAGE_BYTES, cudaHostAllocDefault) != cudaSuccess) {
            cudaGetLastError();
            cu->pinned = NULL;
            return strata_cuda_upload(cu, dst, src, bytes);  // no pinned memory: pageable copy
        }
        CU_TRY(cudaEventCreateWithFlags(&cu->stage_ev[0], cudaEventDisableTiming));
        CU_TRY(cudaEventCreateWithFlags(&cu->stage_ev[1], cudaEventDisableTiming));
    }
    size_t done = 0;
    int half = 0;
    while (done < bytes) {
        const size_t n = bytes - done < STAGE_BYTES ? bytes - done : STAGE_BYTES;
        char *stage = (char *)cu->pinned + (size_t)half * STAGE_BYTES;
        CU_TRY(cudaEventSynchronize(cu->stage_ev[half]));  // the copy that last used this half is done
        memcpy(stage, (const char *)src + done, n);
        CU_TRY(cudaMemcpyAsync((char *)dst + done, stage, n, cudaMemcpyHostToDevice, cu->stream));
        CU_TRY(cudaEventRecord(cu->stage_ev[half], cu->stream));
        done += n;
        half ^= 1;
        if (progress) progress(user, done, bytes);
    }
    CU_TRY(cudaStreamSynchronize(cu->stream));
    return 0;
}

void *strata_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;
    if (cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void strata_cuda_host_free(void *p)
{
    if (p) CU_WARN(cudaFreeHost(p));
}

int strata_cuda_host_register(void *p, size_t bytes)
{
    const cudaError_t e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    if (e != cudaSuccess) {
        cudaGetLastError();
        strata_log_warn("cuda: cannot page-lock %.1f MiB of host memory (%s); copies from it stay pageable",
                        bytes / 1048576.0, cudaGetErrorString(e));
        return STRATA_EUNSUP;
    }
    return 0;
}

void strata_cuda_host_unregister(void *p)
{
    if (p) CU_WARN(cudaHostUnregister(p));
}

// ---- copies of the VRAM expert tier ----------------------------------------------------------

struct strata_cuda_copier {
    int device;
    cudaStream_t stream;
};

int strata_cuda_copier_open(struct strata_cuda_copier **out, int device)
{
    *out = NULL;
    CU_TRY(cudaSetDevice(device));
    struct strata_cuda_copier *c = (struct strata_cuda_copier *)calloc(1, sizeof *c);
    if (!c) return STRATA_ENOMEM;
    c->device = device;
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        strata_log_error("cuda: cannot create the copy stream on device %d", device);
        free(c);
        return STRATA_EIO;
    }
    *out = c;
    return 0;
}

void strata_cuda_copier_close(struct strata_cuda_copier *c)
{
    if (!c) return;
    cudaSetDevice(c->device);
    CU_WARN(cudaStreamSynchronize(c->stream));
    CU_WARN(cudaStreamDestroy(c->stream));
    free(c);
}

int strata_cuda_copier_bind(struct strata_cuda_copier *c)
{
    CU_TRY(cudaSetDevice(c->device));
    return 0;
}

int strata_cuda_copier_copy(struct strata_cuda_copier *c, void *dst, const void *src, size_t bytes)
{
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    return 0;
}

int strata_cuda_copier_wait(struct strata_cuda_copier *c)
{
    CU_TRY(cudaStreamSynchronize(c->stream));
    return 0;
}

// ---- graphs ------------------------------------------------------------------------------------

int strata_cuda_graph_begin(struct strata_cuda *cu)
{
    // relaxed: an allocation while capturing (a scratch that grows) is not an error
    CU_TRY(cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeRelaxed));
    cu->capturing = true;
    return 0;
}

// The captured graph into graph_exec: updated in place when its topology matches the last one
// (the kernels' arguments change every step), else instantiated anew.
int strata_cuda_graph_end_launch(struct strata_cuda *cu, uint64_t key)
{
    cudaGraph_t g = NULL;
    cu->capturing = false;
    CU_TRY(cudaStreamEndCapture(cu->stream, &g));
    bool updated = false;
    if (cu->graph_exec) {
        cudaGraphExecUpdateResultInfo info;
        updated = cudaGraphExecUpdate(cu->graph_exec, g, &info) == cudaSuccess;
        if (!updated) {
            (void)cudaGetLastError();
            CU_WARN(cudaGraphExecDestroy(cu->graph_exec));
            cu->graph_exec = NULL;
        }
    }
    cudaError_t e = updated ? cudaSuccess : cudaGraphInstantiate(&cu->graph_exec, g, 0);
    CU_WARN(cudaGraphDestroy(g));
    if (e != cudaSuccess) {
        strata_log_error("cuda: cudaGraphInstantiate failed: %s", cudaGetErrorString(e));
        cu->graph_exec = NULL;
        return STRATA_EIO;
    }
    cu->graph_key = key;
    if (!updated) cu->graph_builds++;
    cu->graph_launches++;
    return strata_cuda_graph_launch(cu);
}

void strata_cuda_graph_counts(const struct strata_cuda *cu, uint64_t *launches, uint64_t *builds)
{
    *launches = cu->graph_launches;
    *builds = cu->graph_builds;
}

bool strata_cuda_graph_cached(struct strata_cuda *cu, uint64_t key) { return cu->graph_exec && cu->graph_key == key; }

int strata_cuda_graph_launch(struct strata_cuda *cu)
{
    CU_TRY(cudaGraphLaunch(cu->graph_exec, cu->stream));
    return 0;
}

// start 1 records the first event; start 0 records the second and gives the time between them.
int strata_cuda_timer_ms(struct strata_cuda *cu, int start, float *ms)
{
    if (start) {
        CU_TRY(cudaEventRecord(cu->ev[0], cu->stream));
        return 0;
    }
    CU_TRY(cudaEventRecord(cu->ev[1], cu->stream));
    CU_TRY(cudaEventSynchronize(cu->ev[1]));
    CU_TRY(cudaEventElapsedTime(ms, cu->ev[0], cu->ev[1]));
    return 0;
}
