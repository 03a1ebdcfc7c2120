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
    cudaGraphExec_t graph_exec;
    uint64_t graph_key;
    bool capturing;
    uint64_t graph_launches, graph_builds;  // graphs launched, of which instantiated anew
    int mm_path;                     // 0 auto, 1 mat-vec only, 2 GEMM where it applies
    int pdl;                         // programmatic dependent launch on (sm_90, not STRATA_CUDA_PDL=0)
    int mla_old;                     // MLA's attention through k_attn_part_ext (STRATA_CUDA_MLA_OLD=1; A/B)
    int32_t *rows_dev;               // host row lists copied here for get_rows
    size_t rows_cap;
    struct strata_cuda_prof *prof;   // STRATA_CUDA_PROF=1: time per kernel (ctx.cu), else NULL
    char prof_tag[64];               // the next launch's name in the profile ("" = its kernel's)
};

// STRATA_CUDA_PROF=1: an event before every launch, the time to the next one charged to it.
void strata_cuda_prof_mark(struct strata_cuda *cu, const char *what);


// Each file's copy of the IQ grids and non-linear value tables (decode.cuh).
int strata_cuda_tables_quant(void);
int strata_cuda_tables_mv(void);
int strata_cuda_tables_mmq(void);
// attn.cu: the attention kernel's shared-memory limit raised once.
int strata_cuda_attn_init(void);

// Launch on the context's stream, allowed to overlap the previous kernel (programmatic dependent
// launch, sm_90; the kernels synchronise with pdl_wait, common.cuh). STRATA_CUDA_PDL=0 turns it off.
template <typename... K, typename... A>
static inline cudaError_t strata_cuda_launch(struct strata_cuda *cu, void (*kernel)(K...), dim3 grid, dim3 block,
                                             size_t smem, A &&...args)
{
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
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

// Launch and check (in functions returning int).
#define CU_LAUNCH(what, kernel, grid, block, smem, ...)                                                     \
    do {                                                                                                    \
        if (cu->prof) strata_cuda_prof_mark(cu, what);                                                     \
        cudaError_t cu_err_ = strata_cuda_launch(cu, kernel, grid, block, smem, __VA_ARGS__);               \
        if (cu_err_ != cudaSuccess) {                                                                       \
            strata_log_error("cuda: launching %s failed: %s", what, cudaGetErrorString(cu_err_));         \
            return strata_cuda_err(cu_err_);                                                                \
        }                                                                                                   \
    } while (0)

// Grid size helper.
static inline unsigned cdiv(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }

#endif
