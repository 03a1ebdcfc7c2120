// The attention kernels (fattn_impl.h) compiled with AVX2 + FMA: the portable bodies, whose lane
// loops -O3 vectorises (gcc 12's -O2 cost model does not, with their run-time trip counts).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif
#include "backend/cpu/fattn_impl.h"

FATTN_PORTABLE_TABLE(avx2)
