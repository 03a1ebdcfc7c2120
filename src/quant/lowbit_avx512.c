// AVX-512 kernels of the low-bit formats: none of their own yet; dispatch.c fills every entry
// from the AVX2 table (whose 256-bit kernels run unchanged on AVX-512 machines).
#include "quant/lowbit.h"

const struct strata_kernels strata_lowbit_avx512_table = {.isa = STRATA_ISA_AVX512};
