// Decode graphs replayed without capturing them again.
//
// A decode step issues the same launches as the step before it: the same kernels, grids and
// argument bytes (positions, token ids, routes and tables live in device memory; host data goes up
// through the backend's pinned ring at the same offsets). Capturing and instantiating a graph every
// step costs more than it saves, so a pass is captured once (RECORD) and every launch, copy and
// memset of it is also written down: kernel, grid, block, shared memory and the argument bytes.
// The next passes of that shape walk the engine as usual, but each launch is only compared with
// the record (CHECK); when a segment of the record has been matched to its end, its graph is
// launched, so the GPU starts on the first layers while the host walks the rest. At the first
// launch that differs (another chunk count of the attention, a scratch that moved) the matched
// launches of the open segment are issued directly from the record, the rest of the pass runs on
// the stream as usual, and the next pass records again. Whatever a graph replays, the stream would
// have run with the same bytes: the check is complete, not a guess.
//
// Host memory read by a copy is read when the graph runs, not when the host queued it: only the
// range the owner declares (the backend's ring, written once per pass) may be the source of a
// copy in a replayed pass; a recorded pass that copies from other host memory is never replayed.
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/cuda/ctx.cuh"
#include "backend/cuda/cuda.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static bool reserve(void **p, size_t *cap, size_t need, size_t elt)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elt);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

static cudaError_t issue(struct strata_cuda *cu, const struct tape_op *op)
{
    struct strata_cuda_tape *t = &cu->tape;
    if (op->kind == TAPE_COPY) return cudaMemcpyAsync(op->dst, op->src, op->size, cudaMemcpyDefault, cu->stream);
    if (op->kind == TAPE_SET) return cudaMemsetAsync(op->dst, op->value, op->size, cu->stream);
    void *args[TAPE_MAX_ARGS];
    for (uint32_t i = 0; i < op->n_args; i++) args[i] = t->bytes + op->bytes0 + t->arg_off[op->arg0 + i];
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = cu->pdl;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = op->grid;
    cfg.blockDim = op->block;
    cfg.dynamicSmemBytes = op->smem;
    cfg.stream = cu->stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelExC(&cfg, op->func, args);
}

// The record of a segment [first, n_ops) closes: the capture ends, its graph replaces the
// segment's executable graph (updated in place where it can be), and it is launched.
static cudaError_t seg_close(struct strata_cuda *cu, bool again)
{
    struct strata_cuda_tape *t = &cu->tape;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(cu->stream, &g);
    cu->capturing = false;
    if (e != cudaSuccess) return e;
    const int s = t->n_seg;
    if (s == TAPE_MAX_SEG) {  // cannot happen with seg_ops chosen from the limit; keep the bound
        cudaGraphDestroy(g);
        return cudaErrorInvalidValue;
    }
    bool updated = false;
    if (t->exec[s]) {
        cudaGraphExecUpdateResultInfo info;
        updated = cudaGraphExecUpdate(t->exec[s], g, &info) == cudaSuccess;
        if (!updated) {
            (void)cudaGetLastError();
            cudaGraphExecDestroy(t->exec[s]);
            t->exec[s] = NULL;
        }
    }
    if (!updated) e = cudaGraphInstantiate(&t->exec[s], g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess) {
        t->exec[s] = NULL;
        return e;
    }
    if (updated) t->updates++;
    else t->builds++;
    t->seg_end[s] = t->n_ops;
    t->n_seg = s + 1;
    e = cudaGraphLaunch(t->exec[s], cu->stream);
    if (e != cudaSuccess || !again) return e;
    e = cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeRelaxed);
    if (e == cudaSuccess) cu->capturing = true;
    return e;
}

static size_t seg_first(const struct strata_cuda_tape *t, int s) { return s ? t->seg_end[s - 1] : 0; }

// Leaves CHECK: the launches matched since the last launched segment are issued from the record.
static cudaError_t diverge(struct strata_cuda *cu, const char *why, const char *what)
{
    struct strata_cuda_tape *t = &cu->tape;
    t->mode = TAPE_OFF;
    t->valid = false;
    t->diverged++;
    if (t->checks == 0 && ++t->streak >= 3) {  // a shape whose records never replay: record it rarely
        t->streak = 0;
        t->backoff = 64;
    }
    if (t->n_logged < 3) {
        t->n_logged++;
        strata_log_debug("cuda: decode graph not replayed at launch %zu of %zu (%s): %s", t->pos, t->n_ops,
                         what ? what : "?", why);
    }
    for (size_t i = seg_first(t, t->seg); i < t->pos; i++) {
        const cudaError_t e = issue(cu, &t->ops[i]);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

// One matched op in CHECK: a segment matched to its end is launched.
static cudaError_t matched(struct strata_cuda *cu)
{
    struct strata_cuda_tape *t = &cu->tape;
    t->pos++;
    if (t->seg < t->n_seg && t->pos == t->seg_end[t->seg]) {
        if (t->seg == 0) t->first_us += now_us() - t->t_begin;
        return cudaGraphLaunch(t->exec[t->seg++], cu->stream);
    }
    return cudaSuccess;
}

static cudaError_t append(struct strata_cuda *cu, const struct tape_op *op)
{
    struct strata_cuda_tape *t = &cu->tape;
    if (!reserve((void **)&t->ops, &t->cap_ops, t->n_ops + 1, sizeof *t->ops)) return cudaErrorMemoryAllocation;
    t->ops[t->n_ops++] = *op;
    if (t->n_ops - seg_first(t, t->n_seg) >= t->seg_ops && t->n_seg + 1 < TAPE_MAX_SEG) return seg_close(cu, true);
    return cudaSuccess;
}

cudaError_t strata_cuda_tape_kernel(struct strata_cuda *cu, const cudaLaunchConfig_t *cfg, const void *func,
                                    void **args, const uint16_t *sizes, int n_args, const char *what)
{
    struct strata_cuda_tape *t = &cu->tape;
    if (t->mode == TAPE_CHECK) {
        const struct tape_op *op = t->pos < t->n_ops ? &t->ops[t->pos] : NULL;
        const char *why = NULL;
        if (!op) why = "more launches than recorded";
        else if (op->kind != TAPE_KERNEL || op->func != func) why = "another kernel";
        else if (op->grid.x != cfg->gridDim.x || op->grid.y != cfg->gridDim.y || op->grid.z != cfg->gridDim.z ||
                 op->block.x != cfg->blockDim.x || op->block.y != cfg->blockDim.y || op->block.z != cfg->blockDim.z ||
                 op->smem != cfg->dynamicSmemBytes)
            why = "another grid";
        else {
            for (int i = 0; i < n_args && !why; i++) {
                const unsigned char *was = t->bytes + op->bytes0 + t->arg_off[op->arg0 + i];
                const unsigned char *now = (const unsigned char *)args[i];
                if (memcmp(was, now, sizes[i]) == 0) continue;
                int b = 0;
                while (was[b] == now[b]) b++;
                snprintf(t->why, sizeof t->why, "argument %d (%u bytes) differs from byte %d", i, sizes[i], b);
                why = t->why;
            }
        }
        if (!why) return matched(cu);
        const cudaError_t e = diverge(cu, why, what);
        if (e != cudaSuccess) return e;
        return cudaLaunchKernelExC(cfg, func, args);
    }
    cudaError_t e = cudaLaunchKernelExC(cfg, func, args);
    if (e != cudaSuccess || t->mode != TAPE_RECORD) return e;
    if (n_args > TAPE_MAX_ARGS) {  // cannot be issued from the record: this pass is not replayed
        t->unsafe = true;
        return cudaSuccess;
    }
    size_t total = 0;
    for (int i = 0; i < n_args; i++) total += ((size_t)sizes[i] + 15) / 16 * 16;
    if (!reserve((void **)&t->bytes, &t->cap_bytes, t->n_bytes + total, 1) ||
        !reserve((void **)&t->arg_off, &t->cap_off, t->n_off + (size_t)n_args, sizeof *t->arg_off))
        return cudaErrorMemoryAllocation;
    struct tape_op op = {};
    op.kind = TAPE_KERNEL;
    op.func = func;
    op.grid = cfg->gridDim;
    op.block = cfg->blockDim;
    op.smem = (uint32_t)cfg->dynamicSmemBytes;
    op.n_args = (uint32_t)n_args;
    op.arg0 = (uint32_t)t->n_off;
    op.bytes0 = (uint32_t)t->n_bytes;
    op.what = what;
    uint32_t off = 0;
    for (int i = 0; i < n_args; i++) {
        memcpy(t->bytes + t->n_bytes + off, args[i], sizes[i]);
        t->arg_off[t->n_off++] = off;
        off += ((uint32_t)sizes[i] + 15) / 16 * 16;
    }
    t->n_bytes += total;
    return append(cu, &op);
}

// Copies and memsets (ctx.cu's strata_cuda_copy_async and strata_cuda_memset while a tape is on).
cudaError_t strata_cuda_tape_copy(struct strata_cuda *cu, int kind, void *dst, const void *src, int value, size_t size)
{
    struct strata_cuda_tape *t = &cu->tape;
    if (t->mode == TAPE_CHECK) {
        const struct tape_op *op = t->pos < t->n_ops ? &t->ops[t->pos] : NULL;
        if (op && op->kind == kind && op->dst == dst && op->size == size &&
            (kind == TAPE_COPY ? op->src == src : op->value == value))
            return matched(cu);
        const cudaError_t e = diverge(cu, !op ? "more copies than recorded" : "another copy", "copy");
        if (e != cudaSuccess) return e;
    }
    cudaError_t e = kind == TAPE_COPY ? cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault, cu->stream)
                                      : cudaMemsetAsync(dst, value, size, cu->stream);
    if (e != cudaSuccess || t->mode != TAPE_RECORD) return e;
    if (kind == TAPE_COPY) {
        cudaPointerAttributes pa;
        const bool dev = cudaPointerGetAttributes(&pa, src) == cudaSuccess &&
                         (pa.type == cudaMemoryTypeDevice || pa.type == cudaMemoryTypeManaged);
        (void)cudaGetLastError();
        const char *s = (const char *)src;
        if (!dev && !(s >= (const char *)t->safe_lo && s + size <= (const char *)t->safe_hi)) t->unsafe = true;
    }
    struct tape_op op = {};
    op.kind = (uint8_t)kind;
    op.dst = dst;
    op.src = src;
    op.value = value;
    op.size = size;
    op.what = "copy";
    return append(cu, &op);
}

void strata_cuda_tape_host_range(struct strata_cuda *cu, const void *p, size_t bytes)
{
    cu->tape.safe_lo = p;
    cu->tape.safe_hi = (const char *)p + bytes;
}

int strata_cuda_tape_begin(struct strata_cuda *cu, uint64_t key)
{
    struct strata_cuda_tape *t = &cu->tape;
    if (t->mode != TAPE_OFF) {
        const int rc = strata_cuda_tape_end(cu);
        if (rc) return rc;
    }
    if (cu->prof || key == 0) return 0;  // profiles time single launches
    if (!t->seg_ops) {
        const char *e = getenv("STRATA_CUDA_GRAPH_SEG");
        const long v = e ? strtol(e, NULL, 10) : 0;
        t->seg_ops = v > 0 ? (size_t)v : 96;
    }
    t->t_begin = now_us();
    if (t->valid && t->key == key) {
        t->mode = TAPE_CHECK;
        t->pos = 0;
        t->seg = 0;
        return 0;
    }
    t->valid = false;
    if (t->backoff) {
        t->backoff--;
        return 0;
    }
    t->unsafe = false;
    t->checks = 0;
    t->n_ops = t->n_bytes = t->n_off = 0;
    t->n_seg = 0;
    t->key = key;
    CU_TRY(cudaStreamBeginCapture(cu->stream, cudaStreamCaptureModeRelaxed));
    cu->capturing = true;
    t->mode = TAPE_RECORD;
    return 0;
}

int strata_cuda_tape_end(struct strata_cuda *cu)
{
    struct strata_cuda_tape *t = &cu->tape;
    const int mode = t->mode;
    t->mode = TAPE_OFF;
    cudaError_t e = cudaSuccess;
    if (mode == TAPE_RECORD) {
        if (t->n_ops > seg_first(t, t->n_seg)) e = seg_close(cu, false);
        else {
            cudaGraph_t g = NULL;
            e = cudaStreamEndCapture(cu->stream, &g);
            cu->capturing = false;
            if (g) cudaGraphDestroy(g);
        }
        t->valid = e == cudaSuccess && !t->unsafe && t->n_ops > 0;
        t->recorded++;
    } else if (mode == TAPE_CHECK) {
        if (t->pos == t->n_ops) {
            t->replayed++;
            t->checks++;
            t->streak = 0;
            t->walk_us += now_us() - t->t_begin;
        } else {
            t->mode = TAPE_CHECK;  // diverge issues the matched ops of the open segment
            e = diverge(cu, "the pass drained before the recorded end", "drain");
        }
    }
    if (e != cudaSuccess) {
        if (cu->capturing) {  // leave the capture whatever failed inside it
            cudaGraph_t g = NULL;
            (void)cudaStreamEndCapture(cu->stream, &g);
            if (g) cudaGraphDestroy(g);
            cu->capturing = false;
        }
        t->valid = false;
        (void)cudaGetLastError();
        strata_log_error("cuda: decode graph: %s", cudaGetErrorString(e));
        return STRATA_EIO;
    }
    return 0;
}

void strata_cuda_tape_stats(const struct strata_cuda *cu, struct strata_cuda_tape_stats *s)
{
    const struct strata_cuda_tape *t = &cu->tape;
    *s = (struct strata_cuda_tape_stats){.recorded = t->recorded, .replayed = t->replayed, .diverged = t->diverged,
                                         .builds = t->builds, .updates = t->updates, .launches = t->n_ops,
                                         .segments = (uint64_t)t->n_seg,
                                         .walk_us = t->replayed ? t->walk_us / (double)t->replayed : 0.0,
                                         .first_us = t->replayed ? t->first_us / (double)t->replayed : 0.0};
}

void strata_cuda_tape_free(struct strata_cuda *cu)
{
    struct strata_cuda_tape *t = &cu->tape;
    for (int s = 0; s < TAPE_MAX_SEG; s++)
        if (t->exec[s]) cudaGraphExecDestroy(t->exec[s]);
    free(t->ops);
    free(t->bytes);
    free(t->arg_off);
    memset(t, 0, sizeof *t);
}
