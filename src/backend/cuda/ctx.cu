// The CUDA context: device selection and checks, the stream, device memory with accounting,
// uploads through pinned staging, CUDA graphs of the decode step, and event timing.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/common.cuh"
#include "backend/cuda/ctx.cuh"
#include "backend/cuda/mm.cuh"

// ---- profile (STRATA_CUDA_PROF=1) ---------------------------------------------------------------
// Where Nsight cannot read the counters (the lent machine's runtime), this says where a pass's GPU
// time goes: an event is recorded before every launch and copy, and at each drain of the stream the
// time from one event to the next is charged to the launch it follows, under its kernel's name (or
// the tag its caller set: the mat-vec names type and shape). The host time from one mark to the
// next is kept beside it: when it is as large as the GPU time, launches, not kernels, set the pace.
// Events between kernels end programmatic dependent launch overlap, so totals are a little higher
// than without; graphs are not captured while profiling.

#define PROF_EVENTS 8192
#define PROF_TAGS 256

struct prof_tag {
    char name[64];
    uint64_t calls;
    double gpu_ms, host_ms;
};

struct strata_cuda_prof {
    cudaEvent_t ev[PROF_EVENTS + 1];
    int tag_of[PROF_EVENTS];
    double host_t[PROF_EVENTS + 1];
    int n;
    struct prof_tag tags[PROF_TAGS];
    int n_tags;
    uint64_t drains, marks;
    double span_ms;
};

static double prof_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void prof_open(struct strata_cuda *cu)
{
    const char *e = getenv("STRATA_CUDA_PROF");
    if (!e || !*e || strcmp(e, "0") == 0) return;
    struct strata_cuda_prof *p = (struct strata_cuda_prof *)calloc(1, sizeof *p);
    if (!p) return;
    for (int i = 0; i <= PROF_EVENTS; i++)
        if (cudaEventCreate(&p->ev[i]) != cudaSuccess) {
            strata_log_warn("cuda: STRATA_CUDA_PROF: cannot create events; no profile");
            for (int j = 0; j < i; j++) cudaEventDestroy(p->ev[j]);
            free(p);
            return;
        }
    cu->prof = p;
    strata_log_info("cuda: profiling every launch (STRATA_CUDA_PROF=1): the times are for comparisons");
}

static void prof_flush(struct strata_cuda *cu)
{
    struct strata_cuda_prof *p = cu->prof;
    if (!p || p->n == 0) return;
    if (cudaEventRecord(p->ev[p->n], cu->stream) != cudaSuccess || cudaEventSynchronize(p->ev[p->n]) != cudaSuccess) {
        (void)cudaGetLastError();
        p->n = 0;
        return;
    }
    p->host_t[p->n] = prof_now_ms();
    for (int i = 0; i < p->n; i++) {
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, p->ev[i], p->ev[i + 1]) != cudaSuccess) {
            (void)cudaGetLastError();
            continue;
        }
        struct prof_tag *t = &p->tags[p->tag_of[i]];
        t->calls++;
        t->gpu_ms += ms;
        t->host_ms += p->host_t[i + 1] - p->host_t[i];
        p->span_ms += ms;
    }
    p->drains++;
    p->n = 0;
}

void strata_cuda_prof_mark(struct strata_cuda *cu, const char *what)
{
    struct strata_cuda_prof *p = cu->prof;
    if (cu->capturing) return;
    if (p->n == PROF_EVENTS) prof_flush(cu);
    const char *name = cu->prof_tag[0] ? cu->prof_tag : what;
    int t = 0;
    while (t < p->n_tags && strcmp(p->tags[t].name, name) != 0) t++;
    if (t == p->n_tags) {
        if (p->n_tags == PROF_TAGS) t = PROF_TAGS - 1;  // the last tag collects the rest
        else snprintf(p->tags[p->n_tags++].name, sizeof p->tags[0].name, "%s", name);
    }
    cu->prof_tag[0] = 0;
    if (cudaEventRecord(p->ev[p->n], cu->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    p->host_t[p->n] = prof_now_ms();
    p->tag_of[p->n++] = t;
    p->marks++;
}

static int prof_cmp(const void *a, const void *b)
{
    const double x = ((const struct prof_tag *)a)->gpu_ms, y = ((const struct prof_tag *)b)->gpu_ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void prof_close(struct strata_cuda *cu)
{
    struct strata_cuda_prof *p = cu->prof;
    if (!p) return;
    prof_flush(cu);
    qsort(p->tags, (size_t)p->n_tags, sizeof p->tags[0], prof_cmp);
    fprintf(stderr, "cuda profile: %llu launches and copies in %llu drains, %.1f ms of GPU time between them\n",
            (unsigned long long)p->marks, (unsigned long long)p->drains, p->span_ms);
    fprintf(stderr, "cuda profile: %-40s %9s %11s %9s %9s %6s\n", "launch", "calls", "GPU ms", "GPU us/c", "host us/c",
            "share");
    for (int i = 0; i < p->n_tags; i++) {
        const struct prof_tag *t = &p->tags[i];
        if (t->calls == 0) continue;
        fprintf(stderr, "cuda profile: %-40s %9llu %11.2f %9.2f %9.2f %5.1f%%\n", t->name, (unsigned long long)t->calls,
                t->gpu_ms, 1e3 * t->gpu_ms / (double)t->calls, 1e3 * t->host_ms / (double)t->calls,
                p->span_ms > 0 ? 100.0 * t->gpu_ms / p->span_ms : 0.0);
    }
    for (int i = 0; i <= PROF_EVENTS; i++) cudaEventDestroy(p->ev[i]);
    free(p);
    cu->prof = NULL;
}

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
    const char *mla_old = getenv("STRATA_CUDA_MLA_OLD");
    cu->mla_old = mla_old && strcmp(mla_old, "1") == 0;
    const char *attn_mma = getenv("STRATA_CUDA_ATTN_MMA");
    cu->attn_mma = prop.major >= 8 && !(attn_mma && strcmp(attn_mma, "0") == 0);
    const char *merge_old = getenv("STRATA_CUDA_MERGE_OLD");
    cu->merge_old = merge_old && (strcmp(merge_old, "1") == 0 || strcmp(merge_old, "0") == 0) ? merge_old[0] - '0' : -1;
    const char *ftile = getenv("STRATA_CUDA_MV_FTILE");
    cu->mv_ftile = !(ftile && strcmp(ftile, "0") == 0);
    const char *merge_wts = getenv("STRATA_CUDA_MERGE_WTS");
    cu->merge_wts = merge_wts ? atoi(merge_wts) : 0;
    const char *mmq_opts = getenv("STRATA_CUDA_MMQ_OPTS");
    cu->mmq_opts = mmq_opts && mmq_opts[0] >= '0' && mmq_opts[0] <= '1' && !mmq_opts[1] ? mmq_opts[0] - '0' : 1;
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
    if (rc == 0) rc = strata_cuda_attn_init(cu);
    if (rc == 0) rc = strata_cuda_select_init(cu);
    // the tables went by cudaMemcpyToSymbol from pageable memory, on the legacy stream, which the
    // context's non-blocking stream does not wait for: landed before any kernel reads them
    if (rc == 0 && cudaDeviceSynchronize() != cudaSuccess) {
        strata_log_error("cuda: device %d (%s) failed while its tables were uploaded: %s", device, prop.name,
                         cudaGetErrorString(cudaGetLastError()));
        rc = STRATA_EIO;
    }
    if (rc) {
        strata_cuda_close(cu);
        return rc;
    }
    prof_open(cu);
    *out = cu;
    return 0;
}

void strata_cuda_close(struct strata_cuda *cu)
{
    if (!cu) return;
    cudaSetDevice(cu->device);
    if (cu->stream) CU_WARN(cudaStreamSynchronize(cu->stream));
    prof_close(cu);
    if (cu->graph_exec) CU_WARN(cudaGraphExecDestroy(cu->graph_exec));
    strata_cuda_tape_free(cu);
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

// A drain ends a decode pass's tape first (its pending segment is launched or issued).
#define TAPE_DRAIN(cu)                                      \
    do {                                                    \
        if ((cu)->tape.mode) {                              \
            const int tape_rc_ = strata_cuda_tape_end(cu);  \
            if (tape_rc_) return tape_rc_;                  \
        }                                                   \
    } while (0)

int strata_cuda_sync(struct strata_cuda *cu)
{
    TAPE_DRAIN(cu);
    CU_TRY(cudaStreamSynchronize(cu->stream));
    if (cu->prof) prof_flush(cu);
    return 0;
}

int strata_cuda_upload(struct strata_cuda *cu, void *dst, const void *src, size_t bytes)
{
    TAPE_DRAIN(cu);
    // On the context's stream, then waited for. A cudaMemcpy from pageable memory runs on the
    // legacy stream and may return once the bytes are staged, before the DMA has landed, and the
    // context's non-blocking stream does not wait for the legacy one: the next kernel could read
    // the buffer's old bytes (test_cuda's x_rows uploaded just before a product: wrong or NaN
    // outputs for the last tokens, at every seed on one H100 machine, never under the sanitizer).
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cu->stream));
    CU_TRY(cudaStreamSynchronize(cu->stream));
    return 0;
}

int strata_cuda_download(struct strata_cuda *cu, void *dst, const void *src, size_t bytes)
{
    TAPE_DRAIN(cu);
    if (cu->prof) strata_cuda_prof_mark(cu, "download");
    CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, cu->stream));
    CU_TRY(cudaStreamSynchronize(cu->stream));
    if (cu->prof) prof_flush(cu);
    return 0;
}

int strata_cuda_memset(struct strata_cuda *cu, void *dst, int value, size_t bytes)
{
    if (cu->prof) strata_cuda_prof_mark(cu, "memset");
    if (cu->tape.mode) CU_TRY(strata_cuda_tape_copy(cu, TAPE_SET, dst, NULL, value, bytes));
    else CU_TRY(cudaMemsetAsync(dst, value, bytes, cu->stream));
    return 0;
}

int strata_cuda_copy_async(struct strata_cuda *cu, void *dst, const void *src, size_t bytes)
{
    if (cu->prof) strata_cuda_prof_mark(cu, "copy (tables, small uploads)");
    if (cu->tape.mode) CU_TRY(strata_cuda_tape_copy(cu, TAPE_COPY, dst, src, 0, bytes));
    else CU_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cu->stream));
    return 0;
}

// Two pinned halves of 32 MiB: one fills from host memory while the other copies (measured on the
// H200 machine: 55 GB/s pinned against 18 pageable).
#define STAGE_BYTES ((size_t)32 << 20)

int strata_cuda_upload_staged(struct strata_cuda *cu, void *dst, const void *src, size_t bytes,
                              void (*progress)(void *user, uint64_t done, uint64_t total), void *user)
{
    TAPE_DRAIN(cu);
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
    cudaEvent_t done;   // blocking sync: the copy thread sleeps while its copies land, leaving its
                        // core to the threads computing (a spinning wait starved the CPU's experts)
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
    if (cudaEventCreateWithFlags(&c->done, cudaEventBlockingSync | cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        cudaStreamDestroy(c->stream);
        strata_log_error("cuda: cannot create the copy stream's event on device %d", device);
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
    CU_WARN(cudaEventDestroy(c->done));
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
    CU_TRY(cudaEventRecord(c->done, c->stream));
    CU_TRY(cudaEventSynchronize(c->done));
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

// The captured graph into graph_exec (instantiated anew), launched.
int strata_cuda_graph_end_launch(struct strata_cuda *cu)
{
    cudaGraph_t g = NULL;
    cu->capturing = false;
    CU_TRY(cudaStreamEndCapture(cu->stream, &g));
    if (cu->graph_exec) CU_WARN(cudaGraphExecDestroy(cu->graph_exec));
    cu->graph_exec = NULL;
    const cudaError_t e = cudaGraphInstantiate(&cu->graph_exec, g, 0);
    CU_WARN(cudaGraphDestroy(g));
    if (e != cudaSuccess) {
        strata_log_error("cuda: cudaGraphInstantiate failed: %s", cudaGetErrorString(e));
        cu->graph_exec = NULL;
        return STRATA_EIO;
    }
    return strata_cuda_graph_launch(cu);
}

int strata_cuda_graph_launch(struct strata_cuda *cu)
{
    CU_TRY(cudaGraphLaunch(cu->graph_exec, cu->stream));
    return 0;
}

// start 1 records the first event; start 0 records the second and gives the time between them.
int strata_cuda_timer_ms(struct strata_cuda *cu, int start, float *ms)
{
    TAPE_DRAIN(cu);
    if (start) {
        CU_TRY(cudaEventRecord(cu->ev[0], cu->stream));
        return 0;
    }
    CU_TRY(cudaEventRecord(cu->ev[1], cu->stream));
    CU_TRY(cudaEventSynchronize(cu->ev[1]));
    CU_TRY(cudaEventElapsedTime(ms, cu->ev[0], cu->ev[1]));
    return 0;
}
