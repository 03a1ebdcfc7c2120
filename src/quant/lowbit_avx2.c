// AVX2 kernels of the low-bit formats (lowbit.h); entries left NULL come from the scalar table.
#include "quant/lowbit.h"

const struct strata_kernels strata_lowbit_avx2_table = {.isa = STRATA_ISA_AVX2};
