// Private to src/backend/cuda: the context struct and the helpers the kernel files share.
#ifndef STRATA_CUDA_CTX_CUH
#define STRATA_CUDA_CTX_CUH

#include <cuda_runtime.h>

#include <stdio.h>

#include <utility>

#include "backend/cuda/common.cuh"

struct strata_cuda_alloc_rec {
    void *p;
    size_t bytes;
};

// The record of a decode pass (tape.cu).
enum { TAPE_OFF, TAPE_RECORD, TAPE_CHECK };
enum { TAPE_KERNEL, TAPE_COPY, TAPE_SET };
#define TAPE_MAX_ARGS 24
#define TAPE_MAX_SEG 64
struct tape_op {
    uint8_t kind;
    const void *func;                // kernel
    dim3 grid, block;
    uint32_t smem;
    uint32_t n_args, arg0, bytes0;   // argument i at bytes[bytes0 + arg_off[arg0 + i]]
    void *dst;                       // copy, memset
    const void *src;
    int value;
    size_t size;
    const char *what;
};
struct strata_cuda_tape {
    int mode;
    uint64_t key;                    // the recorded pass's shape
    bool valid, unsafe;              // replayable; copies from undeclared host memory
    struct tape_op *ops;
    size_t n_ops, cap_ops;
    unsigned char *bytes;
    size_t n_bytes, cap_bytes;
    uint32_t *arg_off;
    size_t n_off, cap_off;
    size_t seg_end[TAPE_MAX_SEG];    // segment s: ops [seg_end[s - 1], seg_end[s])
    cudaGraphExec_t exec[TAPE_MAX_SEG];
    int n_seg;
    size_t seg_ops;                  // ops per segment (STRATA_CUDA_GRAPH_SEG, default 96)
    size_t pos;                      // CHECK: the next op to match
    int seg;                         // CHECK: the next segment to launch
    const void *safe_lo, *safe_hi;   // host memory copies may read in a replay
    double t_begin, walk_us, first_us;
    uint64_t recorded, replayed, diverged, builds, updates;
    uint64_t checks;                 // passes replayed since the last record
    int streak, backoff;             // records left at their first check in a row; passes not recorded
    int n_logged;
    char why[64];
};

struct strata_cuda {
    int device, n_sm, cc;
    char name[256];
    cudaStream_t stream;
    cudaEvent_t ev[2];               // timer
    struct strata_cuda_alloc_rec *allocs;
    size_t n_allocs, cap_allocs;
    uint64_t bytes_used, bytes_peak;
    void *pinned;                    // 2 x 32 MiB staging for uploads
    cudaEvent_t stage_ev[2];
    cudaGraphExec_t graph_exec;      // strata_cuda_graph_* (one captured graph, tests)
    bool capturing;                  // the stream is being captured
    struct strata_cuda_tape tape;    // decode graphs (tape.cu)
    int mm_path;                     // 0 auto, 1 mat-vec only, 2 GEMM where it applies
    int pdl;                         // programmatic dependent launch on (sm_90, not STRATA_CUDA_PDL=0)
    int mla_old;                     // MLA's attention through k_attn_part_ext (STRATA_CUDA_MLA_OLD=1; A/B)
    int attn_mma;                    // the plain attention's chunks on the tensor cores (k_attn_mma; STRATA_CUDA_ATTN_MMA=0: k_attn_part)
    int mv_ftile;                    // many tokens on F32 rows through k_mv_ftile (STRATA_CUDA_MV_FTILE=0: k_mv)
    int merge_old;                   // attention's merge a block a token: 1 always, 0 never, -1 (unset)
                                     //   for passes of many tokens over few chunks (STRATA_CUDA_MERGE_OLD)
    int merge_wts;                   // chunk weights the merge keeps (STRATA_CUDA_MERGE_WTS, tests; 0: all it can)
    uint32_t *attn_done;             // the merge's tickets, a token of a pass each (attn.cu), made zeroed at open
    int mmq_opts;                    // GEMM options (mmq.cu MMQ_*; STRATA_CUDA_MMQ_OPTS, default all; A/B)
    int32_t *rows_dev;               // host row lists copied here for get_rows
    size_t rows_cap;
    void *sel;                       // the selections' scratch (select.cu), made at open
    struct strata_cuda_prof *prof;   // STRATA_CUDA_PROF=1: time per kernel (ctx.cu), else NULL
    char prof_tag[64];               // the next launch's name in the profile ("" = its kernel's)
};

// STRATA_CUDA_PROF=1: an event before every launch, the time to the next one charged to it.
void strata_cuda_prof_mark(struct strata_cuda *cu, const char *what);


// Each file's copy of the IQ grids and non-linear value tables (decode.cuh).
int strata_cuda_tables_quant(void);
int strata_cuda_tables_mv(void);
int strata_cuda_tables_mmq(void);
// attn.cu: the attention kernels' shared-memory limit raised once, the merge's tickets made.
int strata_cuda_attn_init(struct strata_cuda *cu);
// select.cu: the selections' scratch, made and zeroed.
int strata_cuda_select_init(struct strata_cuda *cu);

// Through tape.cu while a decode pass is recorded or checked against its record.
cudaError_t strata_cuda_tape_kernel(struct strata_cuda *cu, const cudaLaunchConfig_t *cfg, const void *func,
                                    void **args, const uint16_t *sizes, int n_args, const char *what);
cudaError_t strata_cuda_tape_copy(struct strata_cuda *cu, int kind, void *dst, const void *src, int value,
                                  size_t size);
void strata_cuda_tape_free(struct strata_cuda *cu);

// Launch on the context's stream, allowed to overlap the previous kernel (programmatic dependent
// launch, sm_90; the kernels synchronise with pdl_wait, common.cuh). STRATA_CUDA_PDL=0 turns it off.
// The arguments are converted to the kernel's parameter types first (as cudaLaunchKernelEx does),
// so a recorded launch holds the exact bytes the kernel receives.
template <typename... K, typename... A>
static inline cudaError_t strata_cuda_launch(struct strata_cuda *cu, const char *what, void (*kernel)(K...), dim3 grid,
                                             dim3 block, size_t smem, A &&...args)
{
    return [&](K... k) -> cudaError_t {
        void *pa[] = {(void *)&k..., nullptr};
        const uint16_t sz[] = {(uint16_t)sizeof(K)..., 0};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = cu->pdl;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid;
        cfg.blockDim = block;
        cfg.dynamicSmemBytes = smem;
        cfg.stream = cu->stream;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
        if (cu->tape.mode) return strata_cuda_tape_kernel(cu, &cfg, (const void *)kernel, pa, sz, (int)sizeof...(K), what);
        return cudaLaunchKernelExC(&cfg, (const void *)kernel, pa);
    }(std::forward<A>(args)...);
}

// Launch and check (in functions returning int).
#define CU_LAUNCH(what, kernel, grid, block, smem, ...)                                                     \
    do {                                                                                                    \
        if (cu->prof) strata_cuda_prof_mark(cu, what);                                                     \
        cudaError_t cu_err_ = strata_cuda_launch(cu, what, kernel, grid, block, smem, __VA_ARGS__);         \
        if (cu_err_ != cudaSuccess) {                                                                       \
            strata_log_error("cuda: launching %s failed: %s", what, cudaGetErrorString(cu_err_));         \
            return strata_cuda_err(cu_err_);                                                                \
        }                                                                                                   \
    } while (0)

// Grid size helper.
static inline unsigned cdiv(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

#endif
