// The IQ codebooks and non-linear value tables (data from llama.cpp's ggml-common.h; see
// iq_grids.c for provenance and layout).
#ifndef STRATA_QUANT_IQ_GRIDS_H
#define STRATA_QUANT_IQ_GRIDS_H

#include <stdint.h>

extern const uint64_t strata_iq2xxs_grid[256];
extern const uint64_t strata_iq2xs_grid[512];
extern const uint64_t strata_iq2s_grid[1024];
extern const uint32_t strata_iq3xxs_grid[256];
extern const uint32_t strata_iq3s_grid[512];
extern const uint64_t strata_iq1s_grid[2048];
extern const int8_t strata_kvalues_iq4nl[16];
extern const int8_t strata_kvalues_mxfp4[16];

#endif
