// The AMX tile state the CPU kernels share (the GEMM's int8 tiles, the attention's bf16 ones):
// one configuration a thread, palette 1 with the eight tiles 16 rows x 64 bytes, made by the
// first kernel that runs on the thread and kept.
#ifndef STRATA_BACKEND_CPU_AMX_H
#define STRATA_BACKEND_CPU_AMX_H

#include <stdbool.h>

// True where the GEMM's AMX level runs (AMX-TILE, AMX-INT8, AMX-BF16, the tile state granted),
// unless STRATA_AMX is "0".
bool strata_amx_bf16_runs(void);
// Configures the calling thread's tiles (the first call on a thread; later ones return at once).
void strata_amx_configure(void);

#endif
